// SPDX-License-Identifier: Apache-2.0
//
// Tests of the Maglev table builder (userspace/maglev): balance, weights,
// disruption, determinism, bad input, and agreement slot for slot with a
// direct transcription of the algorithm documented in maglev.h.

#include "xlb/maglev/maglev.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "xlb/config/model.h"
#include "xlb/net/address.h"

namespace {

namespace maglev = xlb::maglev;
using maglev::Backend;
using maglev::BuildOptions;
using maglev::ErrorCode;
using maglev::kDefaultRingSize;

// Backends 10.a.b.c numbered from `first`, all of weight `weight`, keyed as
// xlbd keys them.
std::vector<Backend> make_backends(std::uint32_t count, std::uint32_t weight = 1,
                                   std::uint32_t first = 0) {
    std::vector<Backend> backends;
    backends.reserve(count);
    for (std::uint32_t i = first; i < first + count; ++i) {
        const auto address = xlb::net::IpAddress::v4(10, static_cast<std::uint8_t>(i >> 16),
                                                     static_cast<std::uint8_t>(i >> 8),
                                                     static_cast<std::uint8_t>(i));
        backends.push_back({xlb::config::maglev_identity(address, ""), weight});
    }
    return backends;
}

maglev::Table build_ok(const std::vector<Backend>& backends, const BuildOptions& options = {}) {
    auto table = maglev::build_table(backends, options);
    EXPECT_TRUE(table.has_value()) << (table ? "" : table.error().message);
    return table ? *std::move(table) : maglev::Table{};
}

// The table as the keys of the owners, which is what compares across builds
// whose inputs are numbered differently.
std::vector<std::string> owner_keys(const std::vector<Backend>& backends,
                                    const maglev::Table& table) {
    std::vector<std::string> owners;
    owners.reserve(table.table.size());
    for (const std::uint32_t index : table.table) {
        owners.push_back(backends.at(index).key);
    }
    return owners;
}

double changed_fraction(const std::vector<std::string>& before,
                        const std::vector<std::string>& after) {
    EXPECT_EQ(before.size(), after.size());
    std::size_t changed = 0;
    for (std::size_t slot = 0; slot < before.size(); ++slot) {
        changed += before[slot] != after[slot];
    }
    return static_cast<double>(changed) / static_cast<double>(before.size());
}

// slots_per_backend must be what the table really holds.
void expect_counts_match_table(const maglev::Table& table, std::size_t backend_count) {
    std::vector<std::uint32_t> counted(backend_count, 0);
    for (const std::uint32_t index : table.table) {
        ASSERT_LT(index, backend_count);
        ++counted[index];
    }
    EXPECT_EQ(counted, table.slots_per_backend);
}

// The algorithm of maglev.h written as plainly as possible: every pass visits
// every backend, every probe computes (offset + k * skip) mod M. Slow, and
// obviously what the header says; the builder must agree with it exactly.
std::vector<std::uint32_t> reference_build(const std::vector<Backend>& backends,
                                           std::uint32_t ring_size,
                                           std::uint64_t seed = maglev::kDefaultSeed) {
    std::vector<std::uint32_t> active;
    for (std::uint32_t i = 0; i < backends.size(); ++i) {
        if (backends[i].weight != 0) {
            active.push_back(i);
        }
    }
    std::sort(active.begin(), active.end(),
              [&](std::uint32_t a, std::uint32_t b) { return backends[a].key < backends[b].key; });
    if (active.empty()) {
        return {};
    }
    const std::size_t count = active.size();
    std::uint64_t max_weight = 0;
    std::vector<std::uint64_t> offset(count), skip(count), next(count, 0), credit(count, 0);
    for (std::size_t j = 0; j < count; ++j) {
        const auto permutation = maglev::permutation_for(backends[active[j]].key, ring_size, seed);
        offset[j] = permutation.offset;
        skip[j] = permutation.skip;
        max_weight = std::max<std::uint64_t>(max_weight, backends[active[j]].weight);
    }
    std::vector<std::int64_t> entry(ring_size, -1);
    std::uint32_t filled = 0;
    for (;;) {
        for (std::size_t j = 0; j < count; ++j) {
            credit[j] += backends[active[j]].weight;
            if (credit[j] < max_weight) {
                continue;
            }
            credit[j] -= max_weight;
            std::uint64_t slot = (offset[j] + next[j] * skip[j]) % ring_size;
            while (entry[slot] >= 0) {
                ++next[j];
                slot = (offset[j] + next[j] * skip[j]) % ring_size;
            }
            entry[slot] = active[j];
            ++next[j];
            if (++filled == ring_size) {
                return {entry.begin(), entry.end()};
            }
        }
    }
}

// ---------------------------------------------------------------------------
// Hash and key helpers.

TEST(MaglevHash, SipHashMatchesTheReferenceVectors) {
    // Key 00 01 .. 0f, messages 00 01 .. (n-1): vectors from the SipHash
    // paper and its reference implementation.
    const std::uint64_t k0 = 0x0706050403020100ULL;
    const std::uint64_t k1 = 0x0f0e0d0c0b0a0908ULL;
    std::string message;
    for (int i = 0; i < 15; ++i) {
        message += static_cast<char>(i);
    }
    EXPECT_EQ(maglev::siphash24("", k0, k1), 0x726fdb47dd0e0e31ULL);
    EXPECT_EQ(maglev::siphash24(message.substr(0, 1), k0, k1), 0x74f839c593dc67fdULL);
    EXPECT_EQ(maglev::siphash24(message, k0, k1), 0xa129ca6149be45e5ULL);
}

TEST(MaglevHash, PermutationsStayInRange) {
    for (const std::uint32_t ring_size : {11U, 101U, kDefaultRingSize, maglev::kMaxRingSize}) {
        for (const auto& backend : make_backends(500)) {
            const auto permutation = maglev::permutation_for(backend.key, ring_size);
            EXPECT_LT(permutation.offset, ring_size);
            EXPECT_GE(permutation.skip, 1U);
            EXPECT_LT(permutation.skip, ring_size);
        }
    }
}

TEST(MaglevPrimes, IsPrimeAndNextPrime) {
    EXPECT_FALSE(maglev::is_prime(0));
    EXPECT_FALSE(maglev::is_prime(1));
    EXPECT_TRUE(maglev::is_prime(2));
    EXPECT_TRUE(maglev::is_prime(65537));
    EXPECT_FALSE(maglev::is_prime(65536));
    EXPECT_TRUE(maglev::is_prime(655373));
    EXPECT_TRUE(maglev::is_prime(maglev::kMaxRingSize));
    EXPECT_FALSE(maglev::is_prime(65537U * 65537U));
    EXPECT_EQ(maglev::next_prime(65536), 65537U);
    EXPECT_EQ(maglev::next_prime(65537), 65537U);
    EXPECT_EQ(maglev::next_prime(100), 101U);
}

// ---------------------------------------------------------------------------
// The builder agrees with the reference transcription.

struct ReferenceCase {
    std::uint32_t ring_size;
    std::vector<Backend> backends;
    std::uint64_t seed = maglev::kDefaultSeed;
};

void expect_matches_reference(const ReferenceCase& c) {
    const auto table = build_ok(c.backends, {.ring_size = c.ring_size, .seed = c.seed});
    EXPECT_EQ(table.table, reference_build(c.backends, c.ring_size, c.seed))
        << "M=" << c.ring_size << " N=" << c.backends.size();
    expect_counts_match_table(table, c.backends.size());
}

TEST(MaglevReference, EqualWeightsMatchSlotForSlot) {
    for (const std::uint32_t ring_size : {11U, 101U, 1009U, 10007U, kDefaultRingSize}) {
        for (const std::uint32_t count : {1U, 2U, 3U, 10U, 100U, 1000U, 6553U}) {
            if (std::uint64_t{count} * maglev::kMinSlotsPerBackend > ring_size) {
                continue;
            }
            expect_matches_reference({ring_size, make_backends(count)});
        }
    }
}

TEST(MaglevReference, OtherSeedsMatch) {
    for (const std::uint64_t seed : {0ULL, 1ULL, 0xdeadbeefcafef00dULL}) {
        expect_matches_reference({kDefaultRingSize, make_backends(300), seed});
    }
}

TEST(MaglevReference, WeightsMatchSlotForSlot) {
    std::mt19937 random(7);
    // 1:2:4, random weights, and skewed weights that put most backends in
    // the builder's rarely-due group, some with weight 0.
    std::vector<Backend> cycled = make_backends(100);
    for (std::size_t i = 0; i < cycled.size(); ++i) {
        cycled[i].weight = 1U << (i % 3);
    }
    std::vector<Backend> mixed = make_backends(50);
    for (auto& backend : mixed) {
        backend.weight = std::uniform_int_distribution<std::uint32_t>(0, 100)(random);
    }
    std::vector<Backend> skewed = make_backends(20);
    for (std::size_t i = 0; i < skewed.size(); ++i) {
        skewed[i].weight = i % 5 == 0 ? 1000 : static_cast<std::uint32_t>(1 + i % 3);
    }
    skewed[3].weight = 0;
    std::vector<Backend> extreme = make_backends(3);
    extreme[0].weight = 0x7ffffffe;  // the three sum to 2^32 - 1
    extreme[1].weight = 1;
    extreme[2].weight = 0x80000000;
    // Every gap between turns from 1 to 16 passes: 16 distinct weights, the
    // most the builder schedules by weight class (turn lists per set of
    // weights due, reused across passes).
    std::vector<Backend> sixteen = make_backends(1000);
    for (std::size_t i = 0; i < sixteen.size(); ++i) {
        sixteen[i].weight = static_cast<std::uint32_t>(1 + (i * 7) % 16);
    }
    expect_matches_reference({kDefaultRingSize, sixteen});
    // 17 distinct weights, so the per-backend wheel, over enough backends
    // that its per-pass bitmaps span several words.
    std::vector<Backend> seventeen = make_backends(1000);
    for (std::size_t i = 0; i < seventeen.size(); ++i) {
        seventeen[i].weight = static_cast<std::uint32_t>(1 + (i * 7) % 17);
    }
    expect_matches_reference({kDefaultRingSize, seventeen});
    // Equal weights but for a few changed ones (a weight change, a backend in
    // slow start): the common case of the weight-class schedule.
    std::vector<Backend> few_changed = make_backends(1000, 100);
    few_changed[0].weight = 150;
    few_changed[500].weight = 50;
    few_changed[999].weight = 150;
    expect_matches_reference({kDefaultRingSize, few_changed});
    // One heavy backend and many light ones: tens of thousands of passes,
    // most with a single turn.
    std::vector<Backend> one_heavy = make_backends(100);
    one_heavy[37].weight = 100000;
    expect_matches_reference({kDefaultRingSize, one_heavy});
    for (const std::uint32_t ring_size : {1009U, kDefaultRingSize}) {
        expect_matches_reference({ring_size, cycled});
        expect_matches_reference({ring_size, mixed});
        expect_matches_reference({ring_size, skewed});
        expect_matches_reference({ring_size, extreme});
    }
}

TEST(MaglevReference, LargeRingMatches) {
    // Ring sizes from 262144 up use the builder's bitmap of claimed slots.
    expect_matches_reference({655373, make_backends(1000)});
    std::vector<Backend> weighted = make_backends(200);
    for (std::size_t i = 0; i < weighted.size(); ++i) {
        weighted[i].weight = static_cast<std::uint32_t>(1 + i % 16);
    }
    expect_matches_reference({655373, weighted});
}

// ---------------------------------------------------------------------------
// Balance and weights.

TEST(MaglevBalance, EqualWeightsGiveFloorOrCeilingSlots) {
    // N = 1 ... 5000, sampled: every N up to 64, then about 90 more spread
    // over the range, and the largest N the default ring accepts.
    std::vector<std::uint32_t> counts;
    for (std::uint32_t n = 1; n <= 64; ++n) {
        counts.push_back(n);
    }
    for (std::uint32_t n = 71; n < 5000; n += 53 + n / 16) {
        counts.push_back(n);
    }
    counts.insert(counts.end(), {4999, 5000, kDefaultRingSize / 10});
    for (const std::uint32_t n : counts) {
        const auto backends = make_backends(n);
        const auto table = build_ok(backends);
        ASSERT_EQ(table.table.size(), kDefaultRingSize);
        expect_counts_match_table(table, n);
        const std::uint32_t floor = kDefaultRingSize / n;
        const std::uint32_t ceiling = floor + (kDefaultRingSize % n != 0);
        const auto [least, most] = std::ranges::minmax(table.slots_per_backend);
        EXPECT_GE(least, floor) << "N=" << n;
        EXPECT_LE(most, ceiling) << "N=" << n;
    }
}

TEST(MaglevBalance, WeightsOneTwoFourWithinHalfAPercent) {
    std::vector<Backend> backends = make_backends(100);
    std::uint64_t total_weight = 0;
    for (std::size_t i = 0; i < backends.size(); ++i) {
        backends[i].weight = 1U << (i % 3);
        total_weight += backends[i].weight;
    }
    const auto table = build_ok(backends);
    expect_counts_match_table(table, backends.size());
    for (std::size_t i = 0; i < backends.size(); ++i) {
        const double target = static_cast<double>(kDefaultRingSize) * backends[i].weight /
                              static_cast<double>(total_weight);
        const double realized = table.slots_per_backend[i];
        EXPECT_LE(std::abs(realized - target) / target, 0.005)
            << backends[i].key << " weight " << backends[i].weight << ": " << realized
            << " slots, target " << target;
    }
}

TEST(MaglevBalance, LargestRingIsBalanced) {
    const auto table = build_ok(make_backends(100), {.ring_size = maglev::kMaxRingSize});
    ASSERT_EQ(table.table.size(), maglev::kMaxRingSize);
    const auto [least, most] = std::ranges::minmax(table.slots_per_backend);
    EXPECT_EQ(least, maglev::kMaxRingSize / 100);
    EXPECT_EQ(most, maglev::kMaxRingSize / 100 + 1);
    expect_counts_match_table(table, 100);
}

// ---------------------------------------------------------------------------
// Disruption: what Maglev inherently costs when the set changes.

struct DisruptionBound {
    std::uint32_t backend_count;
    double max_changed;  // fraction of all slots
};

// Measured on these inputs with some headroom: the figures depend on the
// keys' hashes (at N=5000 the worst of the removals below changes 0.21% of
// the slots, the best 0.15%).
constexpr std::array<DisruptionBound, 3> kDisruptionBounds{{
    {100, 0.0165},
    {1000, 0.0075},
    {5000, 0.0025},
}};

TEST(MaglevDisruption, RemovingOneBackend) {
    for (const auto& bound : kDisruptionBounds) {
        const std::uint32_t n = bound.backend_count;
        auto backends = make_backends(n);
        // Sorted, so that the choices below are positions in the builder's
        // order: first, last, and between.
        std::ranges::sort(backends, {}, &Backend::key);
        const auto before = owner_keys(backends, build_ok(backends));
        for (const std::uint32_t removed : {0U, n / 4, n / 2, 3 * n / 4, n - 1}) {
            auto fewer = backends;
            const std::string removed_key = fewer[removed].key;
            fewer.erase(fewer.begin() + removed);
            const auto after = owner_keys(fewer, build_ok(fewer));
            std::size_t owned_before = 0;
            for (std::size_t slot = 0; slot < before.size(); ++slot) {
                owned_before += before[slot] == removed_key;
                ASSERT_NE(after[slot], removed_key);
            }
            EXPECT_GT(owned_before, 0U);
            EXPECT_LE(changed_fraction(before, after), bound.max_changed)
                << "N=" << n << ", removed " << removed_key;
        }
    }
}

TEST(MaglevDisruption, AddingOneBackend) {
    for (const auto& bound : kDisruptionBounds) {
        const std::uint32_t n = bound.backend_count;
        const auto backends = make_backends(n);
        const auto before = owner_keys(backends, build_ok(backends));
        // Added keys that sort first, last and in between.
        for (const char* added : {"0.0.0.1:80", "10.0.0.0:81", "250.0.0.1:80"}) {
            auto more = backends;
            more.push_back({added, 1});
            const auto after = owner_keys(more, build_ok(more));
            EXPECT_LE(changed_fraction(before, after), bound.max_changed)
                << "N=" << n << ", added " << added;
        }
    }
}

TEST(MaglevDisruption, ChangingOneBackendsWeight) {
    for (const auto& bound : kDisruptionBounds) {
        const std::uint32_t n = bound.backend_count;
        for (const auto& [from, to] : {std::pair{1U, 2U}, {2U, 1U}, {2U, 3U}, {4U, 3U}}) {
            const auto backends = make_backends(n, from);
            const auto before = owner_keys(backends, build_ok(backends));
            for (const std::uint32_t changed : {0U, n / 2, n - 1}) {
                auto reweighted = backends;
                reweighted[changed].weight = to;
                const auto table = build_ok(reweighted);
                EXPECT_LE(changed_fraction(before, owner_keys(reweighted, table)),
                          bound.max_changed)
                    << "N=" << n << ", weight " << from << " -> " << to;
                // The changed backend's share moved the way its weight did.
                const auto others = table.slots_per_backend[(changed + 1) % n];
                if (to > from) {
                    EXPECT_GT(table.slots_per_backend[changed], others);
                } else {
                    EXPECT_LT(table.slots_per_backend[changed], others);
                }
            }
        }
    }
}

// ---------------------------------------------------------------------------
// Determinism.

TEST(MaglevDeterminism, InputOrderDoesNotMatter) {
    auto backends = make_backends(1000);
    for (std::size_t i = 0; i < backends.size(); ++i) {
        backends[i].weight = static_cast<std::uint32_t>(i % 7);  // including weight 0
    }
    const auto reference = build_ok(backends);
    const auto reference_owners = owner_keys(backends, reference);
    std::mt19937 random(42);
    for (int round = 0; round < 3; ++round) {
        auto shuffled = backends;
        std::ranges::shuffle(shuffled, random);
        const auto table = build_ok(shuffled);
        EXPECT_EQ(table.checksum, reference.checksum);
        EXPECT_EQ(owner_keys(shuffled, table), reference_owners);
        // slots_per_backend follows the caller's numbering.
        std::map<std::string, std::uint32_t> slots_by_key;
        for (std::size_t i = 0; i < backends.size(); ++i) {
            slots_by_key[backends[i].key] = reference.slots_per_backend[i];
        }
        for (std::size_t i = 0; i < shuffled.size(); ++i) {
            EXPECT_EQ(table.slots_per_backend[i], slots_by_key[shuffled[i].key]);
        }
    }
}

TEST(MaglevDeterminism, SeedChangesTheTable) {
    const auto backends = make_backends(100);
    const auto with_default = build_ok(backends);
    const auto with_other = build_ok(backends, {.seed = maglev::kDefaultSeed + 1});
    EXPECT_NE(with_default.table, with_other.table);
    EXPECT_NE(with_default.checksum, with_other.checksum);
    // Still balanced.
    const auto [least, most] = std::ranges::minmax(with_other.slots_per_backend);
    EXPECT_LE(most - least, 1U);
}

TEST(MaglevDeterminism, GoldenChecksum) {
    // Pins the hash, its seed and salts, the scheduling and the checksum: a
    // change to any of them reshuffles every deployed table, and must be
    // deliberate (change this value, and every LB host at once).
    auto backends = make_backends(100);
    for (std::size_t i = 0; i < backends.size(); ++i) {
        backends[i].weight = static_cast<std::uint32_t>(1 + i % 4);
    }
    backends.push_back({"2001:db8::1", 3});
    backends.push_back({"operator-key/web-7", 2});
    const auto table = build_ok(backends);
    EXPECT_EQ(table.checksum, 0x3fa806f8fc9d02aeULL) << std::hex << "actual 0x" << table.checksum;
    // Two slots in the clear, for a reader who wants to see what moved.
    EXPECT_EQ(backends[table.table[0]].key, "10.0.0.55");
    EXPECT_EQ(backends[table.table[65536]].key, "10.0.0.33");
}

TEST(MaglevDeterminism, ChecksumDependsOnIdentitiesNotNumbering) {
    const auto backends = make_backends(50);
    auto reversed = backends;
    std::ranges::reverse(reversed);
    EXPECT_EQ(build_ok(backends).checksum, build_ok(reversed).checksum);
    // Same size, different identities: different checksum.
    EXPECT_NE(build_ok(backends).checksum, build_ok(make_backends(50, 1, 1000)).checksum);
    // Different ring size: different checksum.
    EXPECT_NE(build_ok(backends).checksum, build_ok(backends, {.ring_size = 65539}).checksum);
}

// ---------------------------------------------------------------------------
// Weight 0 and empty sets.

TEST(MaglevEdges, WeightZeroExcludesTheBackend) {
    auto backends = make_backends(10);
    backends[4].weight = 0;
    const auto table = build_ok(backends);
    EXPECT_EQ(table.slots_per_backend[4], 0U);
    EXPECT_EQ(std::ranges::count(table.table, 4U), 0);
    // Exactly as if the backend were not in the input at all.
    auto without = backends;
    without.erase(without.begin() + 4);
    const auto table_without = build_ok(without);
    EXPECT_EQ(owner_keys(backends, table), owner_keys(without, table_without));
    EXPECT_EQ(table.checksum, table_without.checksum);
}

TEST(MaglevEdges, NoBackendsGiveAnExplicitEmptyTable) {
    const auto table = build_ok({});
    EXPECT_TRUE(table.empty());
    EXPECT_TRUE(table.table.empty());
    EXPECT_TRUE(table.slots_per_backend.empty());
    EXPECT_EQ(table.ring_size, kDefaultRingSize);
}

TEST(MaglevEdges, AllWeightsZeroGiveAnExplicitEmptyTable) {
    const auto backends = make_backends(5, 0);
    const auto table = build_ok(backends);
    EXPECT_TRUE(table.empty());
    EXPECT_EQ(table.slots_per_backend, std::vector<std::uint32_t>(5, 0));
    EXPECT_EQ(table.checksum, build_ok({}).checksum);
    // Weight 0 does not count towards the minimum slots per backend.
    EXPECT_TRUE(maglev::build_table(make_backends(100, 0), {.ring_size = 11}).has_value());
}

TEST(MaglevEdges, SmallestRingForItsBackends) {
    // 10 slots per backend exactly is allowed.
    const auto table = build_ok(make_backends(1), {.ring_size = 11});
    EXPECT_EQ(table.table, std::vector<std::uint32_t>(11, 0));
    const auto ten = build_ok(make_backends(10), {.ring_size = 101});
    expect_counts_match_table(ten, 10);
}

// ---------------------------------------------------------------------------
// Bad input: each rejected with its own error, saying why and what to use.

void expect_error(const std::vector<Backend>& backends, const BuildOptions& options, ErrorCode code,
                  const std::vector<std::string>& message_parts) {
    const auto table = maglev::build_table(backends, options);
    ASSERT_FALSE(table.has_value());
    EXPECT_EQ(table.error().code, code) << table.error().message;
    for (const auto& part : message_parts) {
        EXPECT_NE(table.error().message.find(part), std::string::npos)
            << "message \"" << table.error().message << "\" lacks \"" << part << "\"";
    }
}

TEST(MaglevErrors, RingSizeNotPrime) {
    expect_error(make_backends(10), {.ring_size = 65536}, ErrorCode::kRingSizeNotPrime,
                 {"65536", "not prime", "65537"});
    expect_error(make_backends(10), {.ring_size = 0}, ErrorCode::kRingSizeNotPrime,
                 {"not prime", "101"});
}

TEST(MaglevErrors, RingSizeTooLarge) {
    const std::uint32_t too_large = maglev::next_prime(maglev::kMaxRingSize + 1);
    expect_error(make_backends(10), {.ring_size = too_large}, ErrorCode::kRingSizeTooLarge,
                 {std::to_string(too_large), "maximum", "5000011"});
}

TEST(MaglevErrors, RingSizeTooSmallForItsBackends) {
    // N larger than M / 10.
    expect_error(make_backends(11), {.ring_size = 101}, ErrorCode::kRingSizeTooSmall,
                 {"101", "fewer than 10 slots per backend", "11 backends", "110", "113"});
    expect_error(make_backends(6554), {}, ErrorCode::kRingSizeTooSmall,
                 {"65537", "6554 backends", "65540", "65543"});
}

TEST(MaglevErrors, TooManyBackendsForAnyRing) {
    std::vector<Backend> backends(maglev::kMaxRingSize / 10 + 1);
    for (std::size_t i = 0; i < backends.size(); ++i) {
        backends[i].key = std::to_string(i);
    }
    expect_error(backends, {.ring_size = maglev::kMaxRingSize}, ErrorCode::kTooManyBackends,
                 {"500002 backends", "at most 500001"});
}

TEST(MaglevErrors, WeightSumOverflow) {
    auto backends = make_backends(3);
    backends[0].weight = 0x80000000U;
    backends[1].weight = 0x80000000U;
    expect_error(backends, {}, ErrorCode::kWeightSumOverflow,
                 {"4294967297", "32 bits", "divide every weight by 2"});
    // The largest sum that fits is fine.
    backends[0].weight = 0x80000000U;
    backends[1].weight = 0x7ffffffeU;
    EXPECT_TRUE(maglev::build_table(backends).has_value());
}

TEST(MaglevErrors, DuplicateKey) {
    auto backends = make_backends(10);
    backends[7].key = backends[3].key;
    expect_error(backends, {}, ErrorCode::kDuplicateKey,
                 {"\"" + backends[3].key + "\"", "positions 3 and 7"});
    // Also when one of the two has weight 0.
    backends[7].weight = 0;
    expect_error(backends, {}, ErrorCode::kDuplicateKey, {backends[3].key});
    // Keys that differ only after 16 bytes, or in length, are distinct.
    std::vector<Backend> long_keys{{"a-very-long-backend-key-1", 1},
                                   {"a-very-long-backend-key-2", 1},
                                   {"a-very-long-backend-key", 1},
                                   {std::string("a-very-long-backend-key\0", 24), 1}};
    EXPECT_TRUE(maglev::build_table(long_keys, {.ring_size = 41}).has_value());
    long_keys.push_back({"a-very-long-backend-key-2", 1});
    expect_error(long_keys, {.ring_size = 53}, ErrorCode::kDuplicateKey,
                 {"a-very-long-backend-key-2", "positions 1 and 4"});
}

TEST(MaglevErrors, EmptyKey) {
    auto backends = make_backends(3);
    backends[2].key.clear();
    expect_error(backends, {}, ErrorCode::kEmptyKey, {"position 2", "empty key"});
}

TEST(MaglevErrors, ValidateRingSizeAlone) {
    EXPECT_TRUE(maglev::validate_ring_size(kDefaultRingSize, 6553).has_value());
    EXPECT_FALSE(maglev::validate_ring_size(kDefaultRingSize, 6554).has_value());
    EXPECT_TRUE(maglev::validate_ring_size(2, 0).has_value());
    EXPECT_FALSE(maglev::validate_ring_size(4, 0).has_value());
}

}  // namespace
