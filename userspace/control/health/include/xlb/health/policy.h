// SPDX-License-Identifier: Apache-2.0
// The settings a backend's state machine judges by: the thresholds, failure
// accrual, rate-limit bias and flapping of the VIP's health check, and the
// VIP's slow start. Documented in docs/config.md ("health_check").
#pragma once

#include <chrono>
#include <cstdint>

#include "xlb/config/model.h"
#include "xlb/health/types.h"

namespace xlb::health {

struct Policy {
    std::uint32_t healthy_threshold = 2;
    std::uint32_t unhealthy_threshold = 2;
    config::FailureAccrual accrual;
    config::RateLimitBias bias;
    config::Flapping flapping;
    config::SlowStart slow_start;

    static Policy from(const config::HealthCheck& check, const config::SlowStart& slow_start);
    bool operator==(const Policy&) const = default;
};

// The weight factor never goes below this, so that a healthy backend at the
// bottom of its ramp and rate-limited keeps a foothold in the table (the
// reconciler treats 0 as "not in the table"): 1 / control::kWeightScale.
inline constexpr double kMinWeightFactor = 0.01;

// Slow start ramps in one step per second of the window, at least 10 and at
// most 60 steps (each step is a table publish for the VIP).
inline constexpr std::uint32_t kMinSlowStartSteps = 10;
inline constexpr std::uint32_t kMaxSlowStartSteps = 60;
std::uint32_t slow_start_steps(config::Duration window);

// Factor of a ramp that started `elapsed` ago: floor + (1 - floor) * k / steps
// for the k-th whole step; 1 from the end of the window on.
double slow_start_factor(const config::SlowStart& slow_start, Clock::duration elapsed);
// When (as an offset from the start of the ramp) the factor next changes
// after `elapsed`; nullopt when the ramp is over.
std::optional<Clock::duration> slow_start_next_step(const config::SlowStart& slow_start,
                                                    Clock::duration elapsed);

// The hold-down after the n-th consecutive ejection (n = 0 for the first):
// base = min_penalty * 2^n, at most max_penalty; plus base * jitter * u
// (u in [0, 1) at random); never above max_penalty.
Clock::duration accrual_penalty(const config::FailureAccrual& accrual, std::uint32_t n, double u);

// How long a rate-limited answer biases the weight: max(penalty, Retry-After),
// at most max_retry_after.
Clock::duration bias_duration(const config::RateLimitBias& bias,
                              std::optional<std::chrono::seconds> retry_after);

}  // namespace xlb::health
