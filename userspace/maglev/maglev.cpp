// SPDX-License-Identifier: Apache-2.0
//
// Maglev table construction. The algorithm and its contract are in maglev.h;
// this file is about doing it fast:
//
//  * A backend's permutation is never materialised: each backend keeps only
//    its next position and its skip, and steps with add-and-subtract.
//  * Claimed slots are tracked in a bitmap (8 KB for M = 65537, so it stays in
//    the L1 cache while the table itself is only written).
//  * The end game. Walking costs about M/F probes per claim while F slots are
//    free, so the last few hundred claims would cost about as much as all the
//    others. Once F falls to a threshold the builder switches to computing,
//    for the backend whose turn it is, the permutation index of every free
//    slot directly, k = (slot - position) * skip^-1 mod M, and claims the
//    free slot with the smallest k: by definition the one the walk would
//    reach first. The result is identical; only the work differs.
//  * Weighted scheduling visits, pass by pass, only backends that are due at
//    least every few passes; rarely-due backends wait in a heap keyed by the
//    pass of their next turn. Skewed weights (1 against 1,000,000) thus cost
//    no more than equal ones.

#include <algorithm>
#include <cstdlib> // TEMP
#include <bit>
#include <cstdint>
#include <expected>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "hash_internal.h"
#include "xlb/maglev/maglev.h"

namespace xlb::maglev {
namespace {

constexpr std::uint32_t kNoBackend = UINT32_MAX;

// A backend due at least once every this many passes is visited every pass;
// one due less often waits in the heap of rare backends.
constexpr std::uint64_t kFrequentMaxGap = 8;

// Free slots left when the end game starts. The walk costs about M/F probes
// per claim and the end game about F cheap multiplications, so the best switch
// point grows like sqrt(M); the factor was tuned with tools/bench/maglev.
std::uint32_t end_game_threshold(std::uint32_t ring_size) noexcept {
    if (const char* e = std::getenv("XLB_EG")) return std::min<std::uint32_t>(ring_size, std::atoi(e));
    std::uint32_t root = 1;
    while (std::uint64_t{root} * root < ring_size) {
        ++root;
    }
    return std::min(ring_size, root * 2);
}

// Inverse of `value` modulo the prime `modulus` (extended Euclid).
std::uint32_t modular_inverse(std::uint32_t value, std::uint32_t modulus) noexcept {
    std::int64_t r0 = modulus, r1 = value;
    std::int64_t t0 = 0, t1 = 1;
    while (r1 != 0) {
        const std::int64_t q = r0 / r1;
        std::tie(r0, r1) = std::pair{r1, r0 - q * r1};
        std::tie(t0, t1) = std::pair{t1, t0 - q * t1};
    }
    return static_cast<std::uint32_t>(t0 < 0 ? t0 + modulus : t0);
}

// Montgomery multiplication modulo an odd M < 2^31 with R = 2^32: a product
// reduced with two multiplications and a shift, no division.
class Montgomery {
public:
    explicit Montgomery(std::uint32_t modulus) noexcept : modulus_(modulus) {
        // Newton's iteration doubles the correct low bits of M^-1 mod 2^32
        // each step: 3 (M * M == 1 mod 8), 6, 12, 24, 48.
        std::uint32_t inverse = modulus;
        for (int i = 0; i < 4; ++i) {
            inverse *= 2 - modulus * inverse;
        }
        negated_inverse_ = 0U - inverse;
    }

    // value * 2^32 mod M: multiplying by this and reducing multiplies by value.
    [[nodiscard]] std::uint32_t to_factor(std::uint32_t value) const noexcept {
        return static_cast<std::uint32_t>((std::uint64_t{value} << 32) % modulus_);
    }

    // a * factor / 2^32 mod M, for a, factor < M.
    [[nodiscard]] std::uint32_t multiply(std::uint32_t a, std::uint32_t factor) const noexcept {
        const std::uint64_t product = std::uint64_t{a} * factor;
        const std::uint32_t m = static_cast<std::uint32_t>(product) * negated_inverse_;
        const auto reduced =
            static_cast<std::uint32_t>((product + std::uint64_t{m} * modulus_) >> 32);
        return reduced >= modulus_ ? reduced - modulus_ : reduced;
    }

private:
    std::uint32_t modulus_;
    std::uint32_t negated_inverse_;
};

// Where a backend's walk stands: the next slot of its permutation to look at,
// and its step. Eight bytes, so that a pass over all backends stays in cache.
struct Walker {
    std::uint32_t position;
    std::uint32_t skip;
};

// Fills the table one claim at a time. Backends are numbered in sorted order.
class TableFiller {
public:
    TableFiller(std::uint32_t ring_size, std::vector<Walker> walkers, std::uint32_t* table,
                std::uint32_t* slot_counts)
        : ring_size_(ring_size),
          remaining_(ring_size),
          end_game_at_(end_game_threshold(ring_size)),
          walkers_(std::move(walkers)),
          claimed_(std::make_unique<std::uint64_t[]>((ring_size + 63) / 64)),
          table_(table),
          slot_counts_(slot_counts),
          montgomery_(ring_size) {
        if (remaining_ <= end_game_at_) {
            start_end_game();
        }
    }

    // The turn of `backend`: claims its next free slot. Returns true once
    // every slot is taken.
    bool claim(std::uint32_t backend) {
        const std::uint32_t slot =
            in_end_game_ ? end_game_next_slot(backend) : walk_to_free_slot(backend);
        table_[slot] = backend;
        ++slot_counts_[backend];
        --remaining_;
        if (remaining_ == end_game_at_ && !in_end_game_) {
            start_end_game();
        }
        return remaining_ == 0;
    }

private:
    [[nodiscard]] bool is_claimed(std::uint32_t slot) const noexcept {
        return (claimed_[slot / 64] >> (slot % 64)) & 1;
    }
    void mark_claimed(std::uint32_t slot) noexcept {
        claimed_[slot / 64] |= std::uint64_t{1} << (slot % 64);
    }

    std::uint32_t walk_to_free_slot(std::uint32_t backend) noexcept {
        Walker& walker = walkers_[backend];
        const std::uint32_t skip = walker.skip;
        const std::uint32_t ring_size = ring_size_;
        std::uint32_t position = walker.position;
        // position < M and skip < M, so one subtraction keeps it in range.
        while (is_claimed(position)) {
            position += skip;
            position = position >= ring_size ? position - ring_size : position;
        }
        mark_claimed(position);
        const std::uint32_t next = position + skip;
        walker.position = next >= ring_size ? next - ring_size : next;
        return position;
    }

    void start_end_game() {
        in_end_game_ = true;
        free_slots_.reserve(remaining_);
        for (std::uint32_t slot = 0; slot < ring_size_; ++slot) {
            if (!is_claimed(slot)) {
                free_slots_.push_back(slot);
            }
        }
        skip_factors_.assign(walkers_.size(), 0);
    }

    std::uint32_t end_game_next_slot(std::uint32_t backend) {
        const Walker& walker = walkers_[backend];
        std::uint32_t& factor = skip_factors_[backend];
        if (factor == 0) {
            // skip^-1 * 2^32 mod M; never 0 as M is prime and skip < M.
            factor = montgomery_.to_factor(modular_inverse(walker.skip, ring_size_));
        }
        // Every slot the backend's walk has passed is claimed, so among the
        // free slots the one the walk would reach first is the one with the
        // smallest distance k from the current position along the walk.
        const std::uint32_t base = walker.position;
        const std::uint32_t ring_size = ring_size_;
        std::uint32_t best_distance = UINT32_MAX;
        std::size_t best_index = 0;
        for (std::size_t i = 0; i < free_slots_.size(); ++i) {
            const std::uint32_t slot = free_slots_[i];
            const std::uint32_t delta = slot >= base ? slot - base : slot + ring_size - base;
            const std::uint32_t distance = montgomery_.multiply(delta, factor);
            if (distance < best_distance) {
                best_distance = distance;
                best_index = i;
            }
        }
        const std::uint32_t slot = free_slots_[best_index];
        free_slots_[best_index] = free_slots_.back();
        free_slots_.pop_back();
        // The walker's position stays behind: distances from it still order
        // the remaining free slots correctly.
        mark_claimed(slot);
        return slot;
    }

    const std::uint32_t ring_size_;
    std::uint32_t remaining_;
    const std::uint32_t end_game_at_;
    std::vector<Walker> walkers_;
    std::unique_ptr<std::uint64_t[]> claimed_;
    std::uint32_t* table_;
    std::uint32_t* slot_counts_;
    bool in_end_game_ = false;
    std::vector<std::uint32_t> free_slots_;
    std::vector<std::uint32_t> skip_factors_;  // 0 = not computed yet
    Montgomery montgomery_;
};

// Equal weights: every backend takes a turn in every pass.
void fill_equal_weights(TableFiller& filler, std::uint32_t backend_count) {
    for (;;) {
        for (std::uint32_t backend = 0; backend < backend_count; ++backend) {
            if (filler.claim(backend)) {
                return;
            }
        }
    }
}

// Integer credit scheduling (maglev.h, step 3) for unequal weights.
void fill_weighted(TableFiller& filler, std::span<const std::uint32_t> weights,
                   std::uint32_t ring_size) {
    const std::uint64_t max_weight = *std::ranges::max_element(weights);

    // Frequent backends: visited every pass, credits kept explicitly.
    std::vector<std::uint32_t> frequent;
    std::vector<std::uint64_t> frequent_weight;
    // Rare backends: (pass of next turn) << 32 | backend, in a min-heap, so
    // that the top is the next due and, within a pass, the lowest number.
    std::vector<std::uint64_t> rare_heap;
    std::vector<std::uint32_t> rare_turns(weights.size(), 0);
    // The heaviest backend takes a turn every pass, so the table is full after
    // at most M passes; turns due later never happen.
    const std::uint64_t last_pass = ring_size;
    auto pass_of_turn = [&](std::uint32_t backend, std::uint64_t turn) {
        // The t-th turn falls in pass ceil(t * W / w): the first pass after
        // which the accumulated credit t * W has been earned.
        const std::uint64_t weight = weights[backend];
        return (turn * max_weight + weight - 1) / weight;
    };
    for (std::uint32_t backend = 0; backend < weights.size(); ++backend) {
        if (weights[backend] * kFrequentMaxGap >= max_weight) {
            frequent.push_back(backend);
            frequent_weight.push_back(weights[backend]);
        } else {
            const std::uint64_t pass = pass_of_turn(backend, 1);
            if (pass <= last_pass) {
                rare_heap.push_back(pass << 32 | backend);
            }
        }
    }
    std::ranges::make_heap(rare_heap, std::greater<>{});
    std::vector<std::uint64_t> credits(frequent.size(), 0);
    std::vector<std::uint32_t> due(frequent.size());

    for (std::uint64_t pass = 1;; ++pass) {
        // Branch-free: which frequent backends are due this pass, in order.
        std::size_t due_count = 0;
        for (std::size_t i = 0; i < frequent.size(); ++i) {
            const std::uint64_t credit = credits[i] + frequent_weight[i];
            const bool takes_turn = credit >= max_weight;
            credits[i] = takes_turn ? credit - max_weight : credit;
            due[due_count] = frequent[i];
            due_count += takes_turn;
        }
        // Merge the due frequent backends with the rare ones due this pass,
        // by backend number.
        std::size_t next_due = 0;
        for (;;) {
            std::uint32_t rare = kNoBackend;
            if (!rare_heap.empty() && rare_heap.front() >> 32 == pass) {
                rare = static_cast<std::uint32_t>(rare_heap.front());
            }
            const std::uint32_t regular = next_due < due_count ? due[next_due] : kNoBackend;
            if (rare == kNoBackend && regular == kNoBackend) {
                break;
            }
            std::uint32_t backend;
            if (rare < regular) {
                backend = rare;
                std::ranges::pop_heap(rare_heap, std::greater<>{});
                rare_heap.pop_back();
                const std::uint64_t pass_after = pass_of_turn(backend, ++rare_turns[backend] + 1);
                if (pass_after <= last_pass) {
                    rare_heap.push_back(pass_after << 32 | backend);
                    std::ranges::push_heap(rare_heap, std::greater<>{});
                }
            } else {
                backend = regular;
                ++next_due;
            }
            if (filler.claim(backend)) {
                return;
            }
        }
    }
}

// The checksum of maglev.h, step 4.
std::uint64_t table_checksum(std::uint32_t ring_size, std::span<const std::uint64_t> key_hashes,
                             std::span<const std::uint32_t> sorted_table) {
    // "xlb-csum": a fixed seed so that checksums compare across hosts.
    detail::WordDigest header(0x786c622d6373756dULL);
    header.add(ring_size);
    header.add(key_hashes.size());
    for (const std::uint64_t key_hash : key_hashes) {
        header.add(key_hash);
    }
    detail::WordDigest body(header.finish());
    body.add_u32_array(sorted_table);
    return body.finish();
}

// "what to use" for a ring size that must be a prime >= minimum.
std::string prime_advice(std::uint32_t minimum) {
    const std::uint32_t smallest = next_prime(minimum);
    std::string advice = "use a prime of at least " + std::to_string(minimum) + ": " +
                         std::to_string(smallest) + " is the smallest";
    if (smallest < kDefaultRingSize) {
        advice += ", " + std::to_string(kDefaultRingSize) + " the default";
    }
    return advice;
}

}  // namespace

std::expected<void, Error> validate_ring_size(std::uint32_t ring_size,
                                              std::size_t active_backends) {
    const std::uint64_t needed = std::uint64_t{kMinSlotsPerBackend} * active_backends;
    if (needed > kMaxRingSize) {
        return std::unexpected(Error{
            ErrorCode::kTooManyBackends,
            std::to_string(active_backends) + " backends with nonzero weight need at least " +
                std::to_string(needed) + " slots (" + std::to_string(kMinSlotsPerBackend) +
                " each), more than the largest ring size " + std::to_string(kMaxRingSize) +
                "; use at most " + std::to_string(kMaxRingSize / kMinSlotsPerBackend) +
                " backends in one VIP"});
    }
    const auto minimum = static_cast<std::uint32_t>(std::max<std::uint64_t>(needed, 2));
    if (ring_size > kMaxRingSize) {
        return std::unexpected(Error{
            ErrorCode::kRingSizeTooLarge,
            "ring size " + std::to_string(ring_size) + " exceeds the maximum " +
                std::to_string(kMaxRingSize) + "; use a prime between " + std::to_string(minimum) +
                " and " + std::to_string(kMaxRingSize) + ", e.g. " +
                std::to_string(std::max(kDefaultRingSize, next_prime(minimum)))});
    }
    if (!is_prime(ring_size)) {
        return std::unexpected(
            Error{ErrorCode::kRingSizeNotPrime,
                  "ring size " + std::to_string(ring_size) +
                      " is not prime (every backend's walk must visit every slot, which "
                      "needs a prime); " + prime_advice(std::max(ring_size, minimum))});
    }
    if (ring_size < needed) {
        return std::unexpected(Error{
            ErrorCode::kRingSizeTooSmall,
            "ring size " + std::to_string(ring_size) + " gives fewer than " +
                std::to_string(kMinSlotsPerBackend) + " slots per backend to " +
                std::to_string(active_backends) + " backends with nonzero weight; " +
                prime_advice(minimum)});
    }
    return {};
}

std::expected<Table, Error> build_table(std::span<const Backend> backends,
                                        const BuildOptions& options) {
    const std::uint32_t ring_size = options.ring_size;

    std::uint64_t weight_sum = 0;
    std::size_t active_count = 0;
    for (std::size_t i = 0; i < backends.size(); ++i) {
        if (backends[i].key.empty()) {
            return std::unexpected(
                Error{ErrorCode::kEmptyKey,
                      "backend at input position " + std::to_string(i) +
                          " has an empty key; use its canonical address:port "
                          "(canonical_key()) or an explicit hash key"});
        }
        weight_sum += backends[i].weight;
        active_count += backends[i].weight != 0;
    }
    if (weight_sum > UINT32_MAX) {
        const std::uint64_t divisor = (weight_sum + UINT32_MAX - 1) / UINT32_MAX;
        return std::unexpected(Error{
            ErrorCode::kWeightSumOverflow,
            "sum of weights " + std::to_string(weight_sum) + " does not fit in 32 bits (max " +
                std::to_string(UINT32_MAX) + "); use smaller weights, e.g. divide every "
                "weight by " + std::to_string(divisor) + " or more"});
    }
    if (auto valid = validate_ring_size(ring_size, active_count); !valid) {
        return std::unexpected(std::move(valid.error()));
    }

    // Sort every backend, weight 0 included, so that duplicates are found
    // whatever their weights.
    std::vector<std::uint32_t> order(backends.size());
    for (std::uint32_t i = 0; i < order.size(); ++i) {
        order[i] = i;
    }
    std::ranges::sort(order, [&](std::uint32_t a, std::uint32_t b) {
        return std::string_view(backends[a].key) < std::string_view(backends[b].key);
    });
    for (std::size_t i = 1; i < order.size(); ++i) {
        if (backends[order[i - 1]].key == backends[order[i]].key) {
            const auto [first, second] = std::minmax(order[i - 1], order[i]);
            return std::unexpected(Error{
                ErrorCode::kDuplicateKey,
                "duplicate backend key \"" + backends[order[i]].key + "\" at input positions " +
                    std::to_string(first) + " and " + std::to_string(second) +
                    "; every backend needs a distinct key (its address:port, or an explicit "
                    "hash key)"});
        }
    }

    Table result;
    result.ring_size = ring_size;
    result.slots_per_backend.assign(backends.size(), 0);

    // Active backends in sorted order; "sorted number" below means the index
    // into these arrays.
    std::vector<std::uint32_t> input_index;
    std::vector<std::uint32_t> weights;
    std::vector<std::uint64_t> key_hashes;
    std::vector<Walker> walkers;
    input_index.reserve(active_count);
    weights.reserve(active_count);
    key_hashes.reserve(active_count);
    walkers.reserve(active_count);
    for (const std::uint32_t i : order) {
        if (backends[i].weight == 0) {
            continue;
        }
        const std::uint64_t key_hash = siphash24(backends[i].key, options.seed, kKeyHashK1);
        const Permutation permutation = detail::permutation_from_hash(key_hash, ring_size);
        input_index.push_back(i);
        weights.push_back(backends[i].weight);
        key_hashes.push_back(key_hash);
        walkers.push_back({permutation.offset, permutation.skip});
    }

    if (active_count == 0) {
        result.checksum = table_checksum(ring_size, {}, {});
        return result;
    }

    result.table.resize(ring_size);
    std::vector<std::uint32_t> sorted_counts(active_count, 0);
    const bool equal_weights =
        std::ranges::all_of(weights, [&](std::uint32_t w) { return w == weights.front(); });
    TableFiller filler(ring_size, std::move(walkers), result.table.data(), sorted_counts.data());
    if (equal_weights) {
        fill_equal_weights(filler, static_cast<std::uint32_t>(active_count));
    } else {
        fill_weighted(filler, weights, ring_size);
    }

    result.checksum = table_checksum(ring_size, key_hashes, result.table);

    // From sorted numbers to the caller's indices.
    bool identity_order = true;
    for (std::uint32_t b = 0; b < active_count; ++b) {
        identity_order = identity_order && input_index[b] == b;
        result.slots_per_backend[input_index[b]] = sorted_counts[b];
    }
    if (!identity_order) {
        for (std::uint32_t& owner : result.table) {
            owner = input_index[owner];
        }
    }
    return result;
}

}  // namespace xlb::maglev
