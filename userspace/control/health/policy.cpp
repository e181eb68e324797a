// SPDX-License-Identifier: Apache-2.0
#include "xlb/health/policy.h"

#include <algorithm>
#include <cmath>

namespace xlb::health {

Policy Policy::from(const config::HealthCheck& check, const config::SlowStart& slow_start) {
    Policy p;
    p.healthy_threshold = std::max<std::uint32_t>(1, check.healthy_threshold);
    p.unhealthy_threshold = std::max<std::uint32_t>(1, check.unhealthy_threshold);
    p.accrual = check.failure_accrual;
    p.bias = check.rate_limit_bias;
    p.flapping = check.flapping;
    p.slow_start = slow_start;
    return p;
}

std::uint32_t slow_start_steps(config::Duration window) {
    const auto seconds = static_cast<std::uint64_t>(std::max<std::int64_t>(
        0, std::chrono::duration_cast<std::chrono::seconds>(window).count()));
    return static_cast<std::uint32_t>(
        std::clamp<std::uint64_t>(seconds, kMinSlowStartSteps, kMaxSlowStartSteps));
}

namespace {

// Whole steps completed after `elapsed`: floor(elapsed * steps / window).
std::uint64_t steps_done(const config::SlowStart& s, Clock::duration elapsed, std::uint32_t steps) {
    const auto window = std::chrono::duration_cast<Clock::duration>(s.window).count();
    const auto e = std::max<Clock::rep>(0, elapsed.count());
    // e < window <= 1h in ns (3.6e12) times at most 60 steps: no overflow.
    return static_cast<std::uint64_t>(e) * steps / static_cast<std::uint64_t>(window);
}

}  // namespace

double slow_start_factor(const config::SlowStart& s, Clock::duration elapsed) {
    if (s.window <= config::Duration::zero() || elapsed >= s.window) return 1.0;
    const double floor = std::clamp(s.floor, 0.0, 1.0);
    const std::uint32_t steps = slow_start_steps(s.window);
    const auto k = steps_done(s, elapsed, steps);
    return floor + (1.0 - floor) * static_cast<double>(k) / static_cast<double>(steps);
}

std::optional<Clock::duration> slow_start_next_step(const config::SlowStart& s,
                                                    Clock::duration elapsed) {
    if (s.window <= config::Duration::zero() || elapsed >= s.window) return std::nullopt;
    const std::uint32_t steps = slow_start_steps(s.window);
    const auto k = steps_done(s, elapsed, steps) + 1;
    const auto window = std::chrono::duration_cast<Clock::duration>(s.window).count();
    // ceil(window * k / steps): the first instant at which steps_done() >= k.
    const auto num = static_cast<std::uint64_t>(window) * k;
    const auto at = static_cast<Clock::rep>((num + steps - 1) / steps);
    return Clock::duration(at);
}

Clock::duration accrual_penalty(const config::FailureAccrual& a, std::uint32_t n, double u) {
    const auto min = std::chrono::duration_cast<Clock::duration>(a.min_penalty);
    const auto max = std::max(min, std::chrono::duration_cast<Clock::duration>(a.max_penalty));
    Clock::duration base = min;
    for (std::uint32_t i = 0; i < n && base < max; ++i) base *= 2;
    base = std::min(base, max);
    const double jitter = std::clamp(a.jitter, 0.0, 1.0) * std::clamp(u, 0.0, 1.0);
    const auto extra = Clock::duration(
        static_cast<Clock::rep>(std::floor(static_cast<double>(base.count()) * jitter)));
    return std::min(max, base + extra);
}

Clock::duration bias_duration(const config::RateLimitBias& b,
                              std::optional<std::chrono::seconds> retry_after) {
    Clock::duration d = b.penalty;
    if (retry_after && *retry_after > d) d = *retry_after;
    return std::min<Clock::duration>(d, b.max_retry_after);
}

}  // namespace xlb::health
