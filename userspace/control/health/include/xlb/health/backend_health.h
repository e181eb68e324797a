// SPDX-License-Identifier: Apache-2.0
// The health state machine of one backend of one VIP. Pure logic: no I/O, no
// clock (every call takes `now`), randomness from a seeded generator, so that
// tests drive it with a fake clock.
//
//   unknown --healthy_threshold successes----------------> healthy
//   unknown --unhealthy_threshold failures---------------> unhealthy
//   healthy --unhealthy_threshold consecutive failures---> unhealthy
//   healthy --success rate below the accrual threshold---> unhealthy (accrual on)
//   unhealthy --healthy_threshold successes, hold over---> healthy (slow start)
//
// Consecutive counts: a success resets the failures, a failure the successes.
// A kLocal result (the agent could not probe) counts neither way.
//
// Hold-downs keep an ejected backend out even when it passes again:
//  - failure accrual (opt-in): every ejection of a healthy backend holds it
//    out for a back-off (policy.h, accrual_penalty()); the back-off level
//    grows with each ejection and resets once the backend has stayed
//    healthy for max_penalty;
//  - flapping: an ejection that makes more than `changes` healthy<->unhealthy
//    changes within `window` holds the backend out for `hold`.
// A held backend returns at the first probe after the hold that completes
// healthy_threshold consecutive successes (successes during the hold count).
//
// Weight factor (what the reconciler multiplies the weight by), in (0, 1]:
//  - slow start: a backend that turns healthy ramps from the floor to 1 over
//    the window in steps (policy.h), except its first verdict when it was
//    part of the set the agent started with (`initial`): at agent start the
//    whole pool is already serving;
//  - rate-limit bias: a rate-limited answer (HTTP 429, or 503 with
//    Retry-After) multiplies the factor by bias.factor until
//    now + bias_duration(); a later one extends it, never shortens it.
//    A 429 is a success for the thresholds; a 503 stays a failure. In the
//    accrual's success rate both count as failures (as in Linkerd: a backend
//    that only answers "too many requests" is not serving).
#pragma once

#include <array>
#include <cstdint>
#include <deque>
#include <optional>
#include <string>

#include "xlb/health/history.h"
#include "xlb/health/latency_histogram.h"
#include "xlb/health/policy.h"
#include "xlb/health/transition.h"
#include "xlb/health/types.h"

namespace xlb::health {

// What one result changed.
struct Update {
    std::optional<Transition> transition;
    bool bias_started = false;  // the result started or extended a rate-limit bias ...
    TimePoint bias_until{};     // ... until then
};

struct LastProbe {
    TimePoint at{};
    Failure failure = Failure::kNone;
    std::string detail;
    std::uint16_t http_status = 0;
    bool rate_limited = false;
    Clock::duration latency{};
};

// Everything the API and the metrics show about one backend.
struct Snapshot {
    Verdict verdict = Verdict::kUnknown;
    TimePoint since{};  // of the current verdict (or of tracking, while unknown)
    double weight_factor = 1.0;
    std::optional<LastProbe> last;
    std::uint32_t consecutive_successes = 0;
    std::uint32_t consecutive_failures = 0;
    Hold hold = Hold::kNone;
    TimePoint held_until{};      // time_point{}: not held
    TimePoint bias_until{};      // time_point{}: not biased (or over)
    TimePoint slow_start_end{};  // time_point{}: not ramping
    // Healthy after a slow start: when its ramp began (kept after the ramp
    // ended); nullopt: not healthy, or healthy without a ramp. A fleet's
    // hosts ramp by the time the fleet brought the backend in, from these.
    std::optional<TimePoint> ramp_start;
    double bias_factor = 1.0;  // the rate-limit bias now (1: none)
    // Failure accrual (when on): success rate over the window, nullopt while
    // it holds fewer than min_probes probes; the back-off level.
    std::optional<double> success_rate;
    std::uint32_t window_probes = 0;
    std::uint32_t ejections = 0;
    // Counters since tracking began (monotonic: Prometheus counters).
    std::uint64_t probes = 0;
    std::uint64_t rate_limited = 0;
    std::array<std::uint64_t, kFailureKinds> failures{};  // by Failure
    std::uint64_t became_healthy = 0;
    std::uint64_t became_unhealthy = 0;
    // Latencies of the probes that reached the backend: every probe but
    // timeouts (their time is the check's timeout, not a measurement) and
    // kLocal failures (no probe was made).
    LatencyHistogram latency;
    std::optional<Transition> last_transition;  // the one that gave the verdict
};

class BackendHealth {
public:
    // `initial`: part of the set the agent started with (its first verdict
    // does not slow start). `seed` feeds the back-off jitter. `history`: how
    // many transitions history() keeps.
    BackendHealth(Policy policy, bool initial, std::uint64_t seed, TimePoint now,
                  std::size_t history = config::kDefaultHealthHistory);

    // A configuration change: the state (verdict, counts, holds, ramp) stays.
    void set_policy(const Policy& policy) { policy_ = policy; }
    const Policy& policy() const { return policy_; }

    Update apply(const ProbeResult& result, TimePoint now);

    Verdict verdict() const { return verdict_; }
    // Slow start x rate-limit bias, in [kMinWeightFactor, 1].
    double weight_factor(TimePoint now) const;
    // The next time after `now` at which weight_factor() changes without a
    // new result (a slow-start step, the end of a bias); TimePoint::max()
    // when it will not.
    TimePoint next_change(TimePoint now) const;
    Snapshot snapshot(TimePoint now) const;
    // The last transitions (the health history), oldest first.
    const TransitionHistory& history() const { return history_; }
    void set_history_capacity(std::size_t capacity) { history_.set_capacity(capacity); }

private:
    struct Sample {
        TimePoint at;
        bool ok;
    };
    void become_healthy(const ProbeResult& r, TimePoint now, Update& update);
    void become_unhealthy(const ProbeResult& r, TimePoint now, Cause cause, std::string detail,
                          Update& update);
    void record(Transition t, const ProbeResult& r, Update& update);
    void prune(TimePoint now);
    double next_uniform();
    std::optional<double> success_rate() const;

    Policy policy_;
    bool initial_;
    std::uint64_t rng_;
    Verdict verdict_ = Verdict::kUnknown;
    TimePoint since_;
    std::uint32_t successes_ = 0;    // consecutive
    std::uint32_t failures_ = 0;     // consecutive
    std::deque<Sample> window_;      // failure accrual
    std::deque<TimePoint> changes_;  // healthy <-> unhealthy, for flapping
    Hold hold_ = Hold::kNone;
    TimePoint held_until_{};
    std::uint32_t ejections_ = 0;  // consecutive accrual ejections (back-off level)
    TimePoint healthy_since_{};
    std::optional<TimePoint> ramp_start_;
    TimePoint bias_until_{};
    std::optional<LastProbe> last_;
    std::uint64_t probes_ = 0;
    std::uint64_t rate_limited_ = 0;
    std::array<std::uint64_t, kFailureKinds> failure_counts_{};
    std::uint64_t became_healthy_ = 0;
    std::uint64_t became_unhealthy_ = 0;
    LatencyHistogram latency_;
    std::optional<Transition> last_transition_;
    TransitionHistory history_;
};

}  // namespace xlb::health
