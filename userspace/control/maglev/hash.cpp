// SPDX-License-Identifier: Apache-2.0
//
// The hash functions behind the Maglev permutations and the table checksum.
// Both are part of the contract between LB hosts (see maglev.h): any change
// here reshuffles every table in a deployment.

#include <bit>
#include <cstring>

#include "hash_internal.h"
#include "xlb/maglev/maglev.h"

namespace xlb::maglev {
namespace {

// Reads 8 bytes as a little-endian number whatever the host's byte order, so
// that hashes agree between hosts.
std::uint64_t load_le64(const char* bytes) noexcept {
    std::uint64_t value;
    std::memcpy(&value, bytes, sizeof value);
    if constexpr (std::endian::native == std::endian::big) {
        value = std::byteswap(value);
    }
    return value;
}

struct SipState {
    std::uint64_t v0, v1, v2, v3;

    void round() noexcept {
        v0 += v1;
        v1 = std::rotl(v1, 13);
        v1 ^= v0;
        v0 = std::rotl(v0, 32);
        v2 += v3;
        v3 = std::rotl(v3, 16);
        v3 ^= v2;
        v0 += v3;
        v3 = std::rotl(v3, 21);
        v3 ^= v0;
        v2 += v1;
        v1 = std::rotl(v1, 17);
        v1 ^= v2;
        v2 = std::rotl(v2, 32);
    }

    // Two compression rounds per 8-byte block: the "2" of SipHash-2-4.
    void absorb(std::uint64_t block) noexcept {
        v3 ^= block;
        round();
        round();
        v0 ^= block;
    }
};

}  // namespace

std::uint64_t siphash24(std::string_view data, std::uint64_t k0, std::uint64_t k1) noexcept {
    // The initial constants spell "somepseudorandomlygeneratedbytes".
    SipState state{k0 ^ 0x736f6d6570736575ULL, k1 ^ 0x646f72616e646f6dULL,
                   k0 ^ 0x6c7967656e657261ULL, k1 ^ 0x7465646279746573ULL};
    const char* cursor = data.data();
    const std::size_t full_blocks = data.size() / 8;
    for (std::size_t i = 0; i < full_blocks; ++i, cursor += 8) {
        state.absorb(load_le64(cursor));
    }
    // The last block holds the remaining 0-7 bytes, little-endian, with the
    // message length (mod 256) in its top byte.
    std::uint64_t last = static_cast<std::uint64_t>(data.size() & 0xff) << 56;
    const std::size_t tail = data.size() % 8;
    for (std::size_t i = 0; i < tail; ++i) {
        last |= static_cast<std::uint64_t>(static_cast<unsigned char>(cursor[i])) << (8 * i);
    }
    state.absorb(last);
    // Four finalisation rounds: the "4".
    state.v2 ^= 0xff;
    state.round();
    state.round();
    state.round();
    state.round();
    return state.v0 ^ state.v1 ^ state.v2 ^ state.v3;
}

namespace detail {

std::uint64_t fmix64(std::uint64_t x) noexcept {
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdULL;
    x ^= x >> 33;
    x *= 0xc4ceb9fe1a85ec53ULL;
    x ^= x >> 33;
    return x;
}

namespace {
// Odd constants with well-mixed bits (the golden ratio and two primes used by
// xxHash64); the multiply spreads every input bit over the upper word.
constexpr std::uint64_t kLaneMul1 = 0x9e3779b185ebca87ULL;
constexpr std::uint64_t kLaneMul2 = 0xc2b2ae3d27d4eb4fULL;
constexpr std::uint64_t kLaneAdd = 0x85ebca77c2b2ae63ULL;

std::uint64_t lane_round(std::uint64_t accumulator, std::uint64_t word) noexcept {
    return std::rotl(accumulator + word * kLaneMul2, 31) * kLaneMul1;
}
}  // namespace

// Four independent lanes so that the multiplies of consecutive words overlap
// in the pipeline; a 655373-slot table digests in well under a millisecond.
WordDigest::WordDigest(std::uint64_t seed) noexcept
    : lanes_{seed + kLaneMul1 + kLaneMul2, seed + kLaneMul2, seed, seed - kLaneMul1} {}

void WordDigest::add_block(std::uint64_t w0, std::uint64_t w1, std::uint64_t w2,
                           std::uint64_t w3) noexcept {
    lanes_[0] = lane_round(lanes_[0], w0);
    lanes_[1] = lane_round(lanes_[1], w1);
    lanes_[2] = lane_round(lanes_[2], w2);
    lanes_[3] = lane_round(lanes_[3], w3);
    word_count_ += 4;
}

void WordDigest::add(std::uint64_t word) noexcept {
    pending_[pending_count_++] = word;
    if (pending_count_ == 4) {
        pending_count_ = 0;
        add_block(pending_[0], pending_[1], pending_[2], pending_[3]);
    }
}

void WordDigest::add_u32_array(std::span<const std::uint32_t> values) noexcept {
    std::size_t i = 0;
    // Whole blocks straight from the array when nothing is pending: always
    // for the table, which goes to a fresh digest in chunks of a multiple of
    // eight values.
    if (pending_count_ == 0) {
        for (; i + 8 <= values.size(); i += 8) {
            add_block(values[i] | std::uint64_t{values[i + 1]} << 32,
                      values[i + 2] | std::uint64_t{values[i + 3]} << 32,
                      values[i + 4] | std::uint64_t{values[i + 5]} << 32,
                      values[i + 6] | std::uint64_t{values[i + 7]} << 32);
        }
    }
    for (; i + 2 <= values.size(); i += 2) {
        add(values[i] | std::uint64_t{values[i + 1]} << 32);
    }
    if (i < values.size()) {
        // An odd count: the last value alone, marked so that it cannot be
        // confused with a pair whose upper half is zero.
        add(values[i] | std::uint64_t{0xffffffffU} << 32);
    }
}

std::uint64_t WordDigest::finish() const noexcept {
    std::uint64_t h = std::rotl(lanes_[0], 1) + std::rotl(lanes_[1], 7) + std::rotl(lanes_[2], 12) +
                      std::rotl(lanes_[3], 18);
    for (const std::uint64_t lane : lanes_) {
        h = (h ^ lane_round(0, lane)) * kLaneMul1 + kLaneAdd;
    }
    for (std::size_t i = 0; i < pending_count_; ++i) {
        h = std::rotl(h ^ lane_round(0, pending_[i]), 27) * kLaneMul1 + kLaneAdd;
    }
    h += (word_count_ + pending_count_) * 8;
    return fmix64(h);
}

}  // namespace detail

Permutation permutation_for(std::string_view key, std::uint32_t ring_size,
                            std::uint64_t seed) noexcept {
    const std::uint64_t key_hash = siphash24(key, seed, kKeyHashK1);
    return detail::permutation_from_hash(key_hash, ring_size);
}

namespace detail {

Permutation permutation_from_hash(std::uint64_t key_hash, std::uint32_t ring_size) noexcept {
    // Two salted finalisations of one hash: offset and skip must not be
    // correlated, or backends with nearby offsets would walk in lockstep.
    // Each takes the top 32 bits of its finalisation into its range by
    // multiply-shift (x * range / 2^32): no division, and a bias of at most
    // range / 2^32, below 0.12% even for the largest ring.
    const std::uint64_t offset_bits = fmix64(key_hash ^ kOffsetSalt) >> 32;
    const std::uint64_t skip_bits = fmix64(key_hash ^ kSkipSalt) >> 32;
    return {static_cast<std::uint32_t>((offset_bits * ring_size) >> 32),
            static_cast<std::uint32_t>((skip_bits * (ring_size - 1)) >> 32) + 1};
}

}  // namespace detail
}  // namespace xlb::maglev
