// SPDX-License-Identifier: Apache-2.0
//
// Maglev lookup-table construction (Eisenbud et al., "Maglev: A Fast and
// Reliable Software Network Load Balancer", NSDI 2016), with integer weights.
//
// Pure computation: no I/O, no BPF, no global state. Safe to call from any
// thread; each call owns everything it touches.
//
// The algorithm, precisely (this is what every LB host must agree on):
//
//  1. Backends with weight 0 are dropped. The rest are sorted by key, bytewise
//     (std::string_view ordering), and numbered 0..n-1 in that order. Input
//     order and the caller's backend ids play no part.
//  2. Each backend's permutation of the M slots is
//         slot(k) = (offset + k * skip) mod M,  k = 0, 1, ..., M-1
//     where, with h = SipHash-2-4 of the key under the 128-bit key
//     (k0 = seed, k1 = kKeyHashK1), fmix64 MurmurHash3's 64-bit finaliser
//     and hi32(x) = x >> 32,
//         offset = (hi32(fmix64(h ^ kOffsetSalt)) * M) >> 32        in [0, M-1]
//         skip   = ((hi32(fmix64(h ^ kSkipSalt)) * (M - 1)) >> 32) + 1  in [1, M-1]
//     (multiply-shift range reduction, in 64-bit arithmetic). M is prime, so
//     every skip visits every slot exactly once.
//  3. Turns are taken in passes. In every pass, each backend in order 0..n-1
//     adds its weight to its credit (starting at 0); when the credit reaches
//     the largest weight W, it subtracts W and takes a turn. (So backend b's
//     t-th turn falls in pass ceil(t * W / w_b), and a backend of the largest
//     weight takes a turn in every pass.) A turn claims the first slot of the
//     backend's permutation, from where its previous turn stopped, that no
//     backend has claimed yet. Building stops the moment every slot is taken.
//     All integer arithmetic: the same input gives the same table on every
//     platform.
//  4. checksum: a 64-bit digest (WordDigest in hash.cpp, seeded with the
//     ASCII "xlb-csum") of the words M, n, h_0 .. h_{n-1}, which then seeds a
//     second digest of the table written in the sorted numbers of step 1, two
//     slots per word. It depends only on the set of (key, weight), M and the
//     seed: never on input order, the caller's ids, host or byte order.
//
// The seed, kKeyHashK1, the two salts, the hash functions and the order of
// turns are part of the contract between LB hosts behind the same ECMP group:
// changing any of them moves almost every flow. Change them only together with
// every host, and expect the golden-checksum unit test to fail when you do.

#pragma once

#include <cstddef>
#include <cstdint>
#include <expected>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace xlb::maglev {

// Default table size: a prime, about 65 slots per backend at 1000 backends.
inline constexpr std::uint32_t kDefaultRingSize = 65537;
// Largest table size accepted (a prime): 20 MB of u32 per VIP.
inline constexpr std::uint32_t kMaxRingSize = 5'000'011;
// Fewer slots per backend than this makes shares too coarse and disruption
// on a change too large; such a ring size is rejected.
inline constexpr std::uint32_t kMinSlotsPerBackend = 10;

// The constants below spell ASCII text, first character in the most
// significant byte, so that they are easy to recognise in a hex dump.
//
// The seed of the backend-key hash ("xlb-magl"). Wire contract.
inline constexpr std::uint64_t kDefaultSeed = 0x786c622d6d61676cULL;
// Second half of the SipHash key for backend keys ("xlb-keys").
inline constexpr std::uint64_t kKeyHashK1 = 0x786c622d6b657973ULL;
// Salts that turn one key hash into two independent values. Wire contract.
inline constexpr std::uint64_t kOffsetSalt = 0x6f66667365742d31ULL;  // "offset-1"
inline constexpr std::uint64_t kSkipSalt = 0x736b69702d2d2d31ULL;    // "skip---1"

// One backend as the builder sees it.
struct Backend {
    // Stable identity, the same on every LB host: what
    // config::maglev_identity() gives (the bare address, or the operator's
    // hash_key so that a backend can be re-addressed without moving its
    // traffic). Must be non-empty and unique.
    std::string key;
    // Relative share of slots. 0 excludes the backend from the table.
    std::uint32_t weight = 1;
};

struct BuildOptions {
    // Must be prime, <= kMaxRingSize, and >= kMinSlotsPerBackend times the
    // number of backends with nonzero weight.
    std::uint32_t ring_size = kDefaultRingSize;
    // Override only to study placement (simulator, tests). Every host of one
    // deployment must use the same seed.
    std::uint64_t seed = kDefaultSeed;
};

// The built table. Indices refer to positions in the caller's input span.
struct Table {
    // Requested size M (kept even when the table is empty).
    std::uint32_t ring_size = 0;
    // table[slot] = index into the input of the backend owning that slot.
    // Empty (size 0) when no backend has a nonzero weight: an explicit
    // "no backend" table, never a stale one.
    std::vector<std::uint32_t> table;
    // Host-independent digest of the table; see the file comment.
    std::uint64_t checksum = 0;
    // slots_per_backend[i] = slots owned by input backend i (0 for weight 0).
    std::vector<std::uint32_t> slots_per_backend;

    [[nodiscard]] bool empty() const noexcept { return table.empty(); }
};

enum class ErrorCode {
    kRingSizeNotPrime,
    kRingSizeTooLarge,
    kRingSizeTooSmall,   // fewer than kMinSlotsPerBackend slots per backend
    kTooManyBackends,    // even kMaxRingSize is too small for them
    kWeightSumOverflow,  // sum of weights does not fit in 32 bits
    kDuplicateKey,
    kEmptyKey,
};

struct Error {
    ErrorCode code;
    // Says what is wrong and what to use instead, e.g. the next prime.
    std::string message;
};

// Builds the table for the given backends. Deterministic: the same set of
// (key, weight), the same ring size and seed give a byte-identical table
// (modulo the caller's index numbering) and the same checksum on every host.
// Cost: O(N log N) to sort, about M ln(M) / 2 probes to fill, plus, with
// unequal weights, a few operations per pass (at most M passes); memory
// O(M + N); no allocation per slot. About 1 ms for M = 65537, N = 1000 on
// the development machines (tools/bench/maglev). Safe to call concurrently.
[[nodiscard]] std::expected<Table, Error> build_table(std::span<const Backend> backends,
                                                      const BuildOptions& options = {});

// Checks a ring size against the rules of build_table() for the given number
// of backends with nonzero weight, without building anything.
[[nodiscard]] std::expected<void, Error> validate_ring_size(std::uint32_t ring_size,
                                                            std::size_t active_backends);

// Where a key's permutation starts and how it steps, for ring size M.
struct Permutation {
    std::uint32_t offset;  // in [0, M-1]
    std::uint32_t skip;    // in [1, M-1]
};
// The permutation of step 2 above. M must be a prime >= 2.
[[nodiscard]] Permutation permutation_for(std::string_view key, std::uint32_t ring_size,
                                          std::uint64_t seed = kDefaultSeed) noexcept;

// SipHash-2-4 (Aumasson and Bernstein) of `data` under the key (k0, k1),
// where a 16-byte key K gives k0 = K[0..7] and k1 = K[8..15] read little-endian.
[[nodiscard]] std::uint64_t siphash24(std::string_view data, std::uint64_t k0,
                                      std::uint64_t k1) noexcept;

// Primality by trial division (at most about 1100 divisions for ring sizes).
[[nodiscard]] bool is_prime(std::uint32_t n) noexcept;
// Smallest prime >= n (n <= 4294967291).
[[nodiscard]] std::uint32_t next_prime(std::uint32_t n) noexcept;

}  // namespace xlb::maglev
