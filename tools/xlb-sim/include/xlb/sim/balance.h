// SPDX-License-Identifier: Apache-2.0
//
// Request-level balancing: which server a request goes to, decided per
// request (unlike placement, which fixes an owner per key).
//
// Two models:
//  - static: jobs that never finish are dropped into servers one by one
//    ("balls into bins"), the setting of the classic bounds: with random
//    choice the fullest of N servers holds about log N / log log N above the
//    mean when jobs = N, with the better of two random choices about
//    log log N / log 2;
//  - queue: a discrete-event simulation of Poisson arrivals to N FIFO
//    servers with random service times, optionally with one slow server
//    and a hot key.

#pragma once

#include <cstdint>
#include <expected>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "xlb/error.h"

namespace xlb::sim {

enum class Policy {
    kRandom,
    kRoundRobin,
    kLeastRequest,  // full scan for the fewest outstanding requests
    kP2C,           // the fewer outstanding of two distinct random servers
    kP2CEwma,       // of two, the lower peak-EWMA latency x (outstanding + 1)
    kHash,          // by request key through a Maglev table (placement)
};

inline constexpr Policy kAllPolicies[] = {Policy::kRandom,       Policy::kRoundRobin,
                                          Policy::kLeastRequest, Policy::kP2C,
                                          Policy::kP2CEwma,      Policy::kHash};

[[nodiscard]] std::string_view policy_name(Policy policy) noexcept;
[[nodiscard]] xlb::Result<Policy> parse_policy(std::string_view name);

// ---- static model ---------------------------------------------------------

// Final load of each server after `jobs` unit jobs, none finishing.
// Least-request is exact here (ties broken at random). P2C-EWMA has no
// latency to learn from, so it is not defined: returns an error.
[[nodiscard]] xlb::Result<std::vector<std::uint64_t>> place_static(std::uint32_t servers,
                                                                   std::uint64_t jobs,
                                                                   Policy policy,
                                                                   std::uint64_t seed);

// ---- queue model ----------------------------------------------------------

enum class Durations {
    kUniform,      // uniform on [0, 2): mean 1, no tail
    kHeavyTailed,  // Pareto, shape 1.5, mean 1: infinite variance
};
[[nodiscard]] std::string_view durations_name(Durations durations) noexcept;

struct QueueScenario {
    std::uint32_t servers = 100;
    std::uint64_t requests = 200'000;
    // Arrival rate as a fraction of the capacity of N normal servers (a slow
    // server lowers the real capacity, so the same rate loads it harder).
    double utilisation = 0.8;
    Durations durations = Durations::kUniform;
    // Server 0 takes this many times longer per request (1 = no slow server).
    double slow_factor = 1.0;
    // Fraction of requests that carry one hot key; the rest spread over
    // `key_space` keys. Only the hash policy looks at keys.
    double hot_share = 0.0;
    std::uint64_t key_space = 100'000;
    std::uint64_t seed = 1;
};

struct QueueResult {
    // Sampled at every arrival after warm-up (the first tenth of requests).
    double mean_outstanding;      // per server
    double mean_max_outstanding;  // of the busiest server at that moment
    std::uint64_t peak_outstanding;
    // Completion time (queueing plus service), in mean service times.
    double p50;
    double p99;
    // A server that gets under 1% of requests can be drowning while p99 looks
    // fine; p99.9 shows it.
    double p999;
    // Share of requests that server 0 (the slow one, if any) received.
    double server0_share;
};

[[nodiscard]] xlb::Result<QueueResult> simulate_queue(const QueueScenario& scenario, Policy policy);

}  // namespace xlb::sim
