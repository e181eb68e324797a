// SPDX-License-Identifier: Apache-2.0
//
// Reproducible randomness and key generation for the simulator.
//
// Every figure xlb-sim prints must come back bit for bit from the same
// --seed, on any host. The standard library's distributions are not specified
// precisely enough for that (libstdc++ and libc++ differ), so the few we need
// are written here from raw 64-bit words.

#pragma once

#include <cstdint>
#include <vector>

#include "xlb/abi.h"

namespace xlb::sim {

// The simulator's one 64-bit mixer (SplitMix64's output function, Steele,
// Lea and Flood, OOPSLA 2014): a bijection with full avalanche. Used to
// generate random words, to widen the 32-bit flow hash for algorithms that
// want 64 bits, and to derive ring points and rendezvous scores.
[[nodiscard]] constexpr std::uint64_t mix64(std::uint64_t x) noexcept {
    x ^= x >> 30;
    x *= 0xbf58476d1ce4e5b9ULL;
    x ^= x >> 27;
    x *= 0x94d049bb133111ebULL;
    x ^= x >> 31;
    return x;
}

// SplitMix64 generator: a Weyl sequence fed through mix64. Small state,
// passes BigCrush, and trivially reproducible.
class Rng {
public:
    explicit Rng(std::uint64_t seed) noexcept : state_(seed) {}

    std::uint64_t next() noexcept {
        state_ += kGamma;
        return mix64(state_);
    }
    // Uniform in [0, n), n > 0, by multiply-shift (Lemire); the bias is below
    // n / 2^64, far under anything a simulation can see.
    std::uint64_t below(std::uint64_t n) noexcept {
        return static_cast<std::uint64_t>((static_cast<unsigned __int128>(next()) * n) >> 64);
    }
    // Uniform in (0, 1): never 0, so that log() is always finite.
    double unit_open() noexcept { return (static_cast<double>(next() >> 11) + 0.5) * 0x1p-53; }
    // Exponential with the given mean.
    double exponential(double mean) noexcept;
    // Pareto with shape alpha > 1, scaled so that its mean is `mean`.
    double pareto(double alpha, double mean) noexcept;

private:
    static constexpr std::uint64_t kGamma = 0x9e3779b97f4a7c15ULL;
    std::uint64_t state_;
};

// A derived, independent seed for one purpose of one run (keys, arrivals,
// choices), so that adding a consumer of randomness does not shift the
// others' streams.
[[nodiscard]] constexpr std::uint64_t derive_seed(std::uint64_t seed,
                                                  std::uint64_t purpose) noexcept {
    return mix64(seed ^ mix64(purpose));
}

// One simulated client flow: the 32-bit hash the data plane computes for it
// (include/xlb/flow_hash.h, so the simulator places keys exactly as XDP does)
// and its 64-bit widening for algorithms that take 64-bit keys.
struct Key {
    std::uint32_t flow_hash;
    std::uint64_t hash64;
};

// Generates `count` TCP flows to one VIP (random IPv4 source address
// and port), hashed with the data plane's flow hash under a seed drawn from
// `seed`. Deterministic in (count, seed).
[[nodiscard]] std::vector<Key> generate_keys(std::size_t count, std::uint64_t seed);

// The flow hash of one simulated flow, numbered `id` in a key space drawn
// from `seed` (the balance simulation's request keys).
[[nodiscard]] std::uint32_t flow_hash_of(std::uint64_t id, std::uint64_t seed) noexcept;

}  // namespace xlb::sim
