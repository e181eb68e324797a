// SPDX-License-Identifier: Apache-2.0
// Probe latencies of one backend of one VIP as a Prometheus histogram
// (xlb_health_probe_latency_seconds): fixed buckets, so that recording a
// probe allocates nothing and costs a few additions.
#pragma once

#include <array>
#include <chrono>
#include <cstdint>

#include "xlb/health/types.h"

namespace xlb::health {

struct LatencyHistogram {
    // Upper bounds in seconds; +Inf is implied (count). From 0.5 ms (a
    // connect on the same LAN) to 5 s (past any sane check timeout).
    static constexpr std::array<double, 13> kBounds = {
        0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0};

    // Cumulative, as the exposition format wants them: buckets[i] counts
    // the latencies at most kBounds[i].
    std::array<std::uint64_t, kBounds.size()> buckets{};
    std::uint64_t count = 0;
    double sum = 0;  // seconds

    void add(Clock::duration latency) {
        const double seconds = std::chrono::duration<double>(latency).count();
        for (std::size_t i = 0; i < kBounds.size(); ++i)
            if (seconds <= kBounds[i]) ++buckets[i];
        ++count;
        sum += seconds;
    }
    bool operator==(const LatencyHistogram&) const = default;
};

}  // namespace xlb::health
