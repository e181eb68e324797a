// SPDX-License-Identifier: Apache-2.0
#include "xlb/sim/random.h"

#include <arpa/inet.h>
#include <netinet/in.h>

#include <cmath>
#include <cstring>

#include "xlb/flow_hash.h"

namespace xlb::sim {

namespace {

// Purposes for derive_seed(); arbitrary distinct constants.
constexpr std::uint64_t kFlowFieldsPurpose = 1;
constexpr std::uint64_t kHashSeedPurpose = 2;

// The VIP every simulated flow is addressed to: 192.0.2.10:443/TCP
// (TEST-NET-1, RFC 5737).
constexpr std::uint32_t kVipAddress = 0xc000020aU;
constexpr std::uint16_t kVipPort = 443;

std::uint32_t hash_flow(std::uint64_t random_word, std::uint32_t hash_seed) noexcept {
    xlb_flow_key key;
    std::memset(&key, 0, sizeof(key));
    key.src[0] = htonl(static_cast<std::uint32_t>(random_word));
    key.dst[0] = htonl(kVipAddress);
    // Ephemeral ports (1024..65535), as clients use.
    key.sport = htons(static_cast<std::uint16_t>(1024 + (random_word >> 32) % 64512));
    key.dport = htons(kVipPort);
    key.proto = IPPROTO_TCP;
    key.family = AF_INET;
    return xlb_flow_hash(&key, hash_seed);
}

}  // namespace

double Rng::exponential(double mean) noexcept { return -mean * std::log(unit_open()); }

double Rng::pareto(double alpha, double mean) noexcept {
    // Inverse CDF: x = x_min * u^(-1/alpha); the mean is x_min * alpha / (alpha - 1).
    const double x_min = mean * (alpha - 1.0) / alpha;
    return x_min * std::pow(unit_open(), -1.0 / alpha);
}

std::vector<Key> generate_keys(std::size_t count, std::uint64_t seed) {
    Rng fields(derive_seed(seed, kFlowFieldsPurpose));
    const auto hash_seed = static_cast<std::uint32_t>(derive_seed(seed, kHashSeedPurpose));
    std::vector<Key> keys;
    keys.reserve(count);
    for (std::size_t i = 0; i < count; ++i) {
        const std::uint32_t h = hash_flow(fields.next(), hash_seed);
        keys.push_back({h, mix64(h)});
    }
    return keys;
}

std::uint32_t flow_hash_of(std::uint64_t id, std::uint64_t seed) noexcept {
    const std::uint64_t word = mix64(derive_seed(seed, kFlowFieldsPurpose) + id);
    return hash_flow(word, static_cast<std::uint32_t>(derive_seed(seed, kHashSeedPurpose)));
}

}  // namespace xlb::sim
