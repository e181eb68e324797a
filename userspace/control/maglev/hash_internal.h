// SPDX-License-Identifier: Apache-2.0
//
// Internal pieces shared by the builder's translation units. Not installed.

#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

#include "xlb/maglev/maglev.h"

namespace xlb::maglev::detail {

// MurmurHash3's 64-bit finaliser: a bijection with full avalanche.
std::uint64_t fmix64(std::uint64_t x) noexcept;

// Step 2 of the algorithm in maglev.h, from an already computed key hash.
Permutation permutation_from_hash(std::uint64_t key_hash, std::uint32_t ring_size) noexcept;

// Streaming 64-bit digest over 64-bit words, four multiply-rotate lanes in the
// style of xxHash64. Used for the table checksum, where it must be fast (it
// reads the whole table) but need not resist an adversary.
class WordDigest {
public:
    explicit WordDigest(std::uint64_t seed) noexcept;
    void add(std::uint64_t word) noexcept;
    // Values in pairs, the first of a pair in the low half of a word.
    void add_u32_array(std::span<const std::uint32_t> values) noexcept;
    [[nodiscard]] std::uint64_t finish() const noexcept;

private:
    void add_block(std::uint64_t w0, std::uint64_t w1, std::uint64_t w2, std::uint64_t w3) noexcept;

    std::uint64_t lanes_[4];
    std::uint64_t pending_[4] = {};
    std::size_t pending_count_ = 0;
    std::uint64_t word_count_ = 0;
};

}  // namespace xlb::maglev::detail
