// SPDX-License-Identifier: Apache-2.0
// The per-backend state machine with a fake clock: every transition,
// thresholds, failure accrual (window, back-off bounds), rate-limit bias,
// slow start, flapping, start-up.
#include "xlb/health/backend_health.h"

#include <gtest/gtest.h>

#include <array>
#include <initializer_list>
#include <set>
#include <string_view>
#include <vector>

namespace xlb::health {
namespace {

using namespace std::chrono_literals;

const TimePoint t0 = TimePoint(std::chrono::hours(1000));

ProbeResult ok() {
    ProbeResult r;
    r.detail = "connected";
    return r;
}

ProbeResult fail(Failure f = Failure::kRefused, std::string detail = "connection refused") {
    ProbeResult r;
    r.failure = f;
    r.detail = std::move(detail);
    return r;
}

// An HTTP answer as the engine judges it with expected_statuses 200-299.
ProbeResult http(int status, std::optional<std::chrono::seconds> retry_after = std::nullopt) {
    ProbeResult r;
    r.type = config::HealthCheckType::kHttp;
    r.http_status = static_cast<std::uint16_t>(status);
    r.retry_after = retry_after;
    r.rate_limited = status == 429 || (status == 503 && retry_after);
    const bool good = status == 429 || (status >= 200 && status < 300);
    r.failure = good ? Failure::kNone : Failure::kStatus;
    r.detail = "status " + std::to_string(status);
    return r;
}

Policy policy(std::uint32_t healthy = 2, std::uint32_t unhealthy = 2) {
    Policy p;
    p.healthy_threshold = healthy;
    p.unhealthy_threshold = unhealthy;
    p.slow_start.window = 0ms;  // off unless a test turns it on
    p.flapping.changes = 0;     // likewise
    return p;
}

// Feeds `n` copies of a result one second apart from `t`; returns the time
// after the last.
TimePoint feed(BackendHealth& h, const ProbeResult& r, int n, TimePoint t,
               Clock::duration step = 1s) {
    for (int i = 0; i < n; ++i) {
        h.apply(r, t);
        t += step;
    }
    return t;
}

// A backend that is healthy at t0 (first verdict at start: no slow start).
BackendHealth healthy_at_t0(Policy p) {
    BackendHealth h(p, /*initial=*/true, 1, t0 - 10s);
    h.apply(ok(), t0 - 1s);
    for (std::uint32_t i = 1; i < p.healthy_threshold; ++i) h.apply(ok(), t0 - 1s);
    EXPECT_EQ(h.verdict(), Verdict::kHealthy);
    return h;
}

// Applies each result one second apart from `t`, none of which may change
// the verdict; returns the time after the last.
TimePoint apply_quietly(BackendHealth& h, std::initializer_list<ProbeResult> results, TimePoint t) {
    for (const auto& r : results) {
        EXPECT_FALSE(h.apply(r, t).transition) << r.detail;
        t += 1s;
    }
    return t;
}

// The update changed the verdict from `from` to `to`, saying `detail`.
::testing::AssertionResult Moved(const Update& u, Verdict from, Verdict to,
                                 std::string_view detail) {
    if (!u.transition) return ::testing::AssertionFailure() << "no transition";
    const Transition& tr = *u.transition;
    if (tr.from != from || tr.to != to || tr.detail != detail) {
        return ::testing::AssertionFailure() << "moved " << to_string(tr.from) << " -> "
                                             << to_string(tr.to) << " (" << tr.detail << ")";
    }
    return ::testing::AssertionSuccess();
}

// --- Thresholds and transitions ------------------------------------------------------

TEST(BackendHealth, StartsUnknownAtFullFactor) {
    BackendHealth h(policy(), true, 1, t0);
    EXPECT_EQ(h.verdict(), Verdict::kUnknown);
    EXPECT_EQ(h.weight_factor(t0), 1.0);
    EXPECT_EQ(h.next_change(t0), TimePoint::max());
    EXPECT_TRUE(h.history().empty());
}

TEST(BackendHealth, UnknownToHealthyAfterHealthyThreshold) {
    BackendHealth h(policy(3, 2), true, 1, t0);
    EXPECT_FALSE(h.apply(ok(), t0).transition);
    EXPECT_FALSE(h.apply(ok(), t0 + 1s).transition);
    EXPECT_EQ(h.verdict(), Verdict::kUnknown);
    const Update u = h.apply(ok(), t0 + 2s);
    EXPECT_TRUE(Moved(u, Verdict::kUnknown, Verdict::kHealthy, "3 consecutive successes"));
    EXPECT_EQ(u.transition->cause, Cause::kConsecutiveSuccesses);
    EXPECT_EQ(u.transition->at, t0 + 2s);
    EXPECT_EQ(h.verdict(), Verdict::kHealthy);
    EXPECT_EQ(h.history().size(), 1u);
}

TEST(BackendHealth, UnknownToUnhealthyAfterUnhealthyThreshold) {
    BackendHealth h(policy(2, 3), true, 1, t0);
    h.apply(fail(), t0);
    h.apply(fail(Failure::kTimeout, "timeout after 1s (connecting)"), t0 + 1s);
    EXPECT_EQ(h.verdict(), Verdict::kUnknown);
    const Update u = h.apply(fail(Failure::kTimeout, "timeout after 1s (connecting)"), t0 + 2s);
    ASSERT_TRUE(u.transition);
    EXPECT_EQ(u.transition->to, Verdict::kUnhealthy);
    EXPECT_EQ(u.transition->cause, Cause::kConsecutiveFailures);
    EXPECT_EQ(u.transition->detail, "3 consecutive failures, last: timeout after 1s (connecting)");
    EXPECT_EQ(u.transition->hold, Hold::kNone);  // not an ejection: it never served
}

TEST(BackendHealth, MixedResultsNeverReachAThreshold) {
    BackendHealth h(policy(2, 2), true, 1, t0);
    TimePoint t = t0;
    for (int i = 0; i < 10; ++i) {
        h.apply(i % 2 ? ok() : fail(), t);
        t += 1s;
    }
    EXPECT_EQ(h.verdict(), Verdict::kUnknown);
}

TEST(BackendHealth, HealthyNeedsConsecutiveFailuresToLeave) {
    BackendHealth h = healthy_at_t0(policy(2, 3));
    TimePoint t = t0;
    // F F S F F S: never three in a row.
    t = apply_quietly(h, {fail(), fail(), ok(), fail(), fail(), ok()}, t);
    EXPECT_EQ(h.verdict(), Verdict::kHealthy);
    h.apply(fail(), t);
    h.apply(fail(), t + 1s);
    const Update u = h.apply(fail(Failure::kReset, "connection reset"), t + 2s);
    EXPECT_TRUE(Moved(u, Verdict::kHealthy, Verdict::kUnhealthy,
                      "3 consecutive failures, last: connection reset"));
}

TEST(BackendHealth, UnhealthyNeedsConsecutiveSuccessesToReturn) {
    BackendHealth h = healthy_at_t0(policy(3, 1));
    ASSERT_TRUE(h.apply(fail(), t0).transition);
    EXPECT_EQ(h.verdict(), Verdict::kUnhealthy);
    TimePoint t = t0 + 1s;
    t = apply_quietly(h, {ok(), ok(), fail(), ok(), ok()}, t);
    const Update u = h.apply(ok(), t);
    EXPECT_TRUE(Moved(u, Verdict::kUnhealthy, Verdict::kHealthy, "3 consecutive successes"));
}

TEST(BackendHealth, ThresholdsOfOneFollowEveryResult) {
    BackendHealth h(policy(1, 1), true, 1, t0);
    TimePoint t = t0;
    for (int i = 0; i < 6; ++i) {
        const bool good = i % 2 == 0;
        const Update u = h.apply(good ? ok() : fail(), t);
        ASSERT_TRUE(u.transition) << i;
        EXPECT_EQ(h.verdict(), good ? Verdict::kHealthy : Verdict::kUnhealthy);
        t += 1s;
    }
    EXPECT_EQ(h.history().size(), 6u);
}

TEST(BackendHealth, LocalErrorsCountNeitherWay) {
    BackendHealth h(policy(2, 2), true, 1, t0);
    h.apply(fail(), t0);
    h.apply(fail(Failure::kLocal, "could not probe: Too many open files"), t0 + 1s);
    EXPECT_EQ(h.verdict(), Verdict::kUnknown);
    ASSERT_TRUE(h.snapshot(t0 + 1s).last);
    EXPECT_EQ(h.snapshot(t0 + 1s).last->failure, Failure::kLocal);
    EXPECT_EQ(h.snapshot(t0 + 1s).consecutive_failures, 1u);
    h.apply(fail(), t0 + 2s);  // the second real failure
    EXPECT_EQ(h.verdict(), Verdict::kUnhealthy);
}

TEST(BackendHealth, HistoryIsBoundedAndReadable) {
    const std::size_t kept = config::kDefaultHealthHistory;
    BackendHealth h(policy(1, 1), true, 1, t0);
    TimePoint t = t0;
    for (std::size_t i = 0; i < kept + 5; ++i) {
        h.apply(i % 2 ? fail() : ok(), t);
        t += 1s;
    }
    ASSERT_EQ(h.history().size(), kept);
    const std::vector<Transition> entries = h.history().entries();
    // kept + 5 transitions, one a second from t0: the oldest 5 are gone.
    EXPECT_EQ(entries.front().at, t0 + 5s);
    EXPECT_EQ(entries.back().at, t0 + std::chrono::seconds(kept + 4));
    EXPECT_EQ(entries.back().to_string(),
              std::string(entries.back().to == Verdict::kHealthy
                              ? "unhealthy -> healthy: 1 consecutive success"
                              : "healthy -> unhealthy: 1 consecutive failure, last: connection "
                                "refused"));
    const Snapshot s = h.snapshot(t);
    ASSERT_TRUE(s.last_transition);
    EXPECT_EQ(s.last_transition->at, entries.back().at);
    EXPECT_EQ(s.became_healthy + s.became_unhealthy, kept + 5);
    EXPECT_EQ(s.probes, kept + 5);
    EXPECT_EQ(s.failures[static_cast<std::size_t>(Failure::kRefused)], (kept + 5) / 2);
}

TEST(BackendHealth, HistoryRecordsTheWallTimeAndTheProbeOfEachChange) {
    const WallTime noon = WallTime{} + std::chrono::hours(24 * 365 * 56 + 12);
    BackendHealth h(policy(1, 1), true, 1, t0, /*history=*/3);
    ProbeResult down = fail(Failure::kTimeout, "timeout after 1s (connecting)");
    down.finished_wall = noon;
    ProbeResult up = ok();
    up.finished_wall = noon + 1500ms;
    h.apply(down, t0);
    h.apply(up, t0 + 2s);
    const std::vector<Transition> entries = h.history().entries();
    ASSERT_EQ(entries.size(), 2u);
    EXPECT_EQ(entries[0].from, Verdict::kUnknown);
    EXPECT_EQ(entries[0].to, Verdict::kUnhealthy);
    EXPECT_EQ(entries[0].wall_time, noon);
    EXPECT_EQ(entries[0].probe, Failure::kTimeout);
    EXPECT_EQ(entries[0].reason(), "1 consecutive failure, last: timeout after 1s (connecting)");
    EXPECT_EQ(entries[1].to, Verdict::kHealthy);
    EXPECT_EQ(entries[1].wall_time, noon + 1500ms);
    EXPECT_EQ(entries[1].probe, Failure::kNone);
    EXPECT_EQ(entries[1].reason(), "1 consecutive success");
}

TEST(BackendHealth, HistoryOfZeroKeepsNothingButTheVerdictsReason) {
    BackendHealth h(policy(1, 1), true, 1, t0, /*history=*/0);
    h.apply(fail(), t0);
    h.apply(ok(), t0 + 1s);
    EXPECT_TRUE(h.history().empty());
    const Snapshot s = h.snapshot(t0 + 1s);
    ASSERT_TRUE(s.last_transition) << "health_reason does not depend on the history";
    EXPECT_EQ(s.last_transition->to_string(), "unhealthy -> healthy: 1 consecutive success");
}

// --- Latency histogram ------------------------------------------------------------------

ProbeResult timed(ProbeResult r, Clock::duration latency) {
    r.started = t0;
    r.finished = t0 + latency;
    return r;
}

TEST(BackendHealth, LatencyHistogramCountsEveryAnsweredProbe) {
    BackendHealth h(policy(), true, 1, t0);
    h.apply(timed(ok(), 300us), t0);                                  // <= 0.0005
    h.apply(timed(ok(), 1ms), t0 + 1s);                               // <= 0.001, on the bound
    h.apply(timed(fail(), 40ms), t0 + 2s);                            // refused: measured
    h.apply(timed(http(503), 7s), t0 + 3s);                           // above 5 s: +Inf only
    h.apply(timed(fail(Failure::kTimeout, "timeout"), 1s), t0 + 4s);  // not counted
    h.apply(timed(fail(Failure::kLocal, "could not probe"), 0ms), t0 + 5s);  // not counted
    const LatencyHistogram l = h.snapshot(t0 + 5s).latency;
    EXPECT_EQ(l.count, 4u);
    EXPECT_DOUBLE_EQ(l.sum, 0.0003 + 0.001 + 0.040 + 7.0);
    ASSERT_EQ(LatencyHistogram::kBounds.size(), 13u);
    // cumulative: 0.0005 0.001 0.0025 0.005 0.01 0.025 0.05 0.1 0.25 0.5 1 2.5 5
    const std::array<std::uint64_t, 13> expected = {1, 2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3, 3};
    EXPECT_EQ(l.buckets, expected);
    EXPECT_EQ(h.snapshot(t0 + 5s).probes, 6u) << "the histogram leaves the probe counters alone";
}

TEST(BackendHealth, SnapshotShowsTheLastProbe) {
    BackendHealth h(policy(), true, 1, t0);
    ProbeResult r = http(503);
    r.started = t0;
    r.finished = t0 + 12ms;
    h.apply(r, t0 + 12ms);
    const Snapshot s = h.snapshot(t0 + 1s);
    ASSERT_TRUE(s.last);
    EXPECT_EQ(s.last->failure, Failure::kStatus);
    EXPECT_EQ(s.last->detail, "status 503");
    EXPECT_EQ(s.last->http_status, 503);
    EXPECT_EQ(s.last->latency, 12ms);
    EXPECT_EQ(s.last->at, t0 + 12ms);
    EXPECT_EQ(s.failures[static_cast<std::size_t>(Failure::kStatus)], 1u);
}

TEST(BackendHealth, PolicyChangeKeepsState) {
    BackendHealth h = healthy_at_t0(policy(2, 2));
    h.apply(fail(), t0);
    Policy p = policy(2, 5);
    h.set_policy(p);
    h.apply(fail(), t0 + 1s);
    EXPECT_EQ(h.verdict(), Verdict::kHealthy);  // 2 of 5 now
    feed(h, fail(), 3, t0 + 2s);
    EXPECT_EQ(h.verdict(), Verdict::kUnhealthy);
}

// --- Slow start ------------------------------------------------------------------------

TEST(SlowStart, StepsPerWindow) {
    EXPECT_EQ(slow_start_steps(30s), 30u);
    EXPECT_EQ(slow_start_steps(5s), 10u);  // at least 10
    EXPECT_EQ(slow_start_steps(500ms), 10u);
    EXPECT_EQ(slow_start_steps(1h), 60u);  // at most 60
}

// Walks a ramp with its own next_change() and checks the steps.
void check_ramp(const BackendHealth& h, TimePoint start, Clock::duration window, double floor) {
    std::vector<std::pair<TimePoint, double>> steps;
    TimePoint t = start;
    steps.emplace_back(t, h.weight_factor(t));
    for (int guard = 0; guard < 1000; ++guard) {
        const TimePoint next = h.next_change(t);
        if (next == TimePoint::max()) break;
        ASSERT_GT(next, t);
        // The factor holds until the step ...
        EXPECT_EQ(h.weight_factor(next - 1ns), steps.back().second);
        // ... and changes at it.
        t = next;
        steps.emplace_back(t, h.weight_factor(t));
    }
    EXPECT_DOUBLE_EQ(steps.front().second, floor);
    EXPECT_GE(steps.size() - 1, kMinSlowStartSteps);  // changes after the floor
    for (std::size_t i = 1; i < steps.size(); ++i) {
        EXPECT_GT(steps[i].second, steps[i - 1].second) << "monotone, at step " << i;
    }
    EXPECT_EQ(steps.back().first, start + window);  // full weight exactly at the end
    EXPECT_DOUBLE_EQ(steps.back().second, 1.0);
    EXPECT_DOUBLE_EQ(h.weight_factor(start + window + 1h), 1.0);
}

TEST(SlowStart, BackendAddedAtRuntimeRampsInAtLeastTenSteps) {
    Policy p = policy(2, 2);
    p.slow_start = config::SlowStart{30s, 0.1};
    BackendHealth h(p, /*initial=*/false, 1, t0);
    h.apply(ok(), t0);
    const Update u = h.apply(ok(), t0 + 1s);
    ASSERT_TRUE(u.transition);
    EXPECT_TRUE(u.transition->slow_start);
    EXPECT_EQ(h.snapshot(t0 + 1s).slow_start_end, t0 + 31s);
    check_ramp(h, t0 + 1s, 30s, 0.1);
    EXPECT_DOUBLE_EQ(h.weight_factor(t0 + 16s), 0.1 + 0.9 * 15.0 / 30.0);
}

TEST(SlowStart, ShortWindowStillTakesTenSteps) {
    Policy p = policy(1, 1);
    p.slow_start = config::SlowStart{2s, 0.25};
    BackendHealth h(p, false, 1, t0);
    h.apply(ok(), t0);
    check_ramp(h, t0, 2s, 0.25);
}

TEST(SlowStart, FirstVerdictAtAgentStartDoesNotRamp) {
    Policy p = policy(2, 2);
    p.slow_start = config::SlowStart{30s, 0.1};
    BackendHealth h(p, /*initial=*/true, 1, t0);
    h.apply(ok(), t0);
    const Update u = h.apply(ok(), t0 + 1s);
    ASSERT_TRUE(u.transition);
    EXPECT_FALSE(u.transition->slow_start);
    EXPECT_EQ(h.weight_factor(t0 + 1s), 1.0);
    EXPECT_EQ(h.next_change(t0 + 1s), TimePoint::max());
}

TEST(SlowStart, RecoveryRampsEvenForTheInitialSet) {
    Policy p = policy(1, 1);
    p.slow_start = config::SlowStart{30s, 0.1};
    BackendHealth h = healthy_at_t0(p);
    h.apply(fail(), t0);
    const Update u = h.apply(ok(), t0 + 5s);
    ASSERT_TRUE(u.transition);
    EXPECT_TRUE(u.transition->slow_start);
    check_ramp(h, t0 + 5s, 30s, 0.1);
}

TEST(SlowStart, UnhealthyMidRampStartsOverNextTime) {
    Policy p = policy(1, 1);
    p.slow_start = config::SlowStart{30s, 0.1};
    BackendHealth h(p, false, 1, t0);
    h.apply(ok(), t0);
    EXPECT_GT(h.weight_factor(t0 + 20s), 0.5);
    h.apply(fail(), t0 + 20s);
    EXPECT_EQ(h.next_change(t0 + 20s), TimePoint::max());
    h.apply(ok(), t0 + 25s);
    EXPECT_DOUBLE_EQ(h.weight_factor(t0 + 25s), 0.1);
    check_ramp(h, t0 + 25s, 30s, 0.1);
}

TEST(SlowStart, WindowZeroIsOff) {
    Policy p = policy(1, 1);
    p.slow_start = config::SlowStart{0s, 0.1};
    BackendHealth h(p, false, 1, t0);
    const Update u = h.apply(ok(), t0);
    ASSERT_TRUE(u.transition);
    EXPECT_FALSE(u.transition->slow_start);
    EXPECT_EQ(h.weight_factor(t0), 1.0);
}

TEST(SlowStart, FloorZeroKeepsAFoothold) {
    Policy p = policy(1, 1);
    p.slow_start = config::SlowStart{10s, 0.0};
    BackendHealth h(p, false, 1, t0);
    h.apply(ok(), t0);
    EXPECT_EQ(h.weight_factor(t0), kMinWeightFactor);
    EXPECT_DOUBLE_EQ(h.weight_factor(t0 + 5s), 0.5);
}

// --- Rate-limit bias ---------------------------------------------------------------------

TEST(RateLimitBias, A429IsASuccessThatScalesTheWeight) {
    BackendHealth h = healthy_at_t0(policy(2, 1));  // one failure would eject it
    const Update u = h.apply(http(429), t0);
    EXPECT_FALSE(u.transition);
    EXPECT_EQ(h.verdict(), Verdict::kHealthy);
    EXPECT_TRUE(u.bias_started);
    EXPECT_EQ(u.bias_until, t0 + 5s);  // the penalty: no Retry-After
    EXPECT_DOUBLE_EQ(h.weight_factor(t0), 0.1);
    EXPECT_DOUBLE_EQ(h.weight_factor(t0 + 5s - 1ns), 0.1);
    EXPECT_EQ(h.next_change(t0), t0 + 5s);
    EXPECT_EQ(h.weight_factor(t0 + 5s), 1.0);
    EXPECT_EQ(h.next_change(t0 + 5s), TimePoint::max());
    EXPECT_EQ(h.snapshot(t0).rate_limited, 1u);
}

TEST(RateLimitBias, A429CountsTowardsHealthyFromUnknown) {
    BackendHealth h(policy(2, 2), true, 1, t0);
    h.apply(http(429), t0);
    h.apply(http(429), t0 + 1s);
    EXPECT_EQ(h.verdict(), Verdict::kHealthy);
    EXPECT_DOUBLE_EQ(h.weight_factor(t0 + 1s), 0.1);
}

TEST(RateLimitBias, RetryAfterLongerThanThePenaltyWins) {
    BackendHealth h = healthy_at_t0(policy());
    const Update u = h.apply(http(429, 30s), t0);
    EXPECT_EQ(u.bias_until, t0 + 30s);
    EXPECT_DOUBLE_EQ(h.weight_factor(t0 + 29s), 0.1);
    EXPECT_EQ(h.weight_factor(t0 + 30s), 1.0);
}

TEST(RateLimitBias, RetryAfterShorterThanThePenaltyDoesNotShortenIt) {
    BackendHealth h = healthy_at_t0(policy());
    EXPECT_EQ(h.apply(http(429, 1s), t0).bias_until, t0 + 5s);
    EXPECT_EQ(h.apply(http(429, 0s), t0 + 1s).bias_until, t0 + 6s);
}

TEST(RateLimitBias, RetryAfterIsCapped) {
    BackendHealth h = healthy_at_t0(policy());
    EXPECT_EQ(h.apply(http(429, 86400s), t0).bias_until, t0 + 300s);
    EXPECT_DOUBLE_EQ(h.weight_factor(t0 + 299s), 0.1);
    EXPECT_EQ(h.weight_factor(t0 + 300s), 1.0);
}

TEST(RateLimitBias, ALaterAnswerExtendsButNeverShortens) {
    BackendHealth h = healthy_at_t0(policy());
    EXPECT_EQ(h.apply(http(429, 60s), t0).bias_until, t0 + 60s);
    const Update shorter = h.apply(http(429), t0 + 10s);  // would end at +15s
    EXPECT_FALSE(shorter.bias_started);
    EXPECT_EQ(h.next_change(t0 + 10s), t0 + 60s);
    // A success does not lift it either: the backend asked for the pause.
    h.apply(http(200), t0 + 20s);
    EXPECT_DOUBLE_EQ(h.weight_factor(t0 + 20s), 0.1);
    const Update longer = h.apply(http(429, 120s), t0 + 30s);
    EXPECT_TRUE(longer.bias_started);
    EXPECT_EQ(longer.bias_until, t0 + 150s);
}

TEST(RateLimitBias, A503WithRetryAfterIsAFailureAndABias) {
    BackendHealth h = healthy_at_t0(policy(2, 2));
    const Update u = h.apply(http(503, 20s), t0);
    EXPECT_TRUE(u.bias_started);
    EXPECT_EQ(u.bias_until, t0 + 20s);
    EXPECT_EQ(h.snapshot(t0).consecutive_failures, 1u);
    h.apply(http(503, 20s), t0 + 1s);
    EXPECT_EQ(h.verdict(), Verdict::kUnhealthy);
}

TEST(RateLimitBias, A503WithoutRetryAfterIsOnlyAFailure) {
    BackendHealth h = healthy_at_t0(policy(2, 2));
    const Update u = h.apply(http(503), t0);
    EXPECT_FALSE(u.bias_started);
    EXPECT_EQ(h.weight_factor(t0), 1.0);
}

TEST(RateLimitBias, FactorOneTurnsItOff) {
    Policy p = policy();
    p.bias.factor = 1.0;
    BackendHealth h = healthy_at_t0(p);
    EXPECT_FALSE(h.apply(http(429, 30s), t0).bias_started);
    EXPECT_EQ(h.weight_factor(t0), 1.0);
    EXPECT_EQ(h.next_change(t0), TimePoint::max());
}

TEST(RateLimitBias, ComposesWithSlowStart) {
    Policy p = policy(1, 1);
    p.slow_start = config::SlowStart{10s, 0.5};
    BackendHealth h(p, false, 1, t0);
    h.apply(ok(), t0);
    h.apply(http(429, 3s), t0);  // bias until +5s (the penalty)
    EXPECT_DOUBLE_EQ(h.weight_factor(t0), 0.5 * 0.1);
    EXPECT_DOUBLE_EQ(h.weight_factor(t0 + 4s), (0.5 + 0.5 * 0.4) * 0.1);
    EXPECT_DOUBLE_EQ(h.weight_factor(t0 + 5s), 0.5 + 0.5 * 0.5);
    // The next change is the nearer of the next step and the end of the bias.
    EXPECT_EQ(h.next_change(t0 + 4s + 500ms), t0 + 5s);
}

// --- Failure accrual ----------------------------------------------------------------

Policy accrual_policy() {
    Policy p = policy(2, 100);  // consecutive failures alone would take 100 probes
    p.accrual.enabled = true;   // 0.8 over 10s, at least 5 probes, 1s .. 1m, jitter 0.5
    return p;
}

TEST(FailureAccrual, LowSuccessRateEjects) {
    BackendHealth h = healthy_at_t0(accrual_policy());
    TimePoint t = t0;
    // S F S F: 4 probes, not judged yet.
    t = apply_quietly(h, {ok(), fail(), ok(), fail()}, t);
    EXPECT_FALSE(h.snapshot(t).success_rate);
    const Update u = h.apply(ok(), t);  // 3 of 5 = 60%
    ASSERT_TRUE(u.transition);
    EXPECT_EQ(u.transition->cause, Cause::kSuccessRate);
    EXPECT_EQ(u.transition->detail, "success rate 60% (3 of 5 probes in 10s) below 80%");
    EXPECT_EQ(u.transition->hold, Hold::kFailureAccrual);
    EXPECT_GE(u.transition->held_until, t + 1s);
    EXPECT_LE(u.transition->held_until, t + 1500ms);
    EXPECT_EQ(h.verdict(), Verdict::kUnhealthy);
}

TEST(FailureAccrual, AtTheThresholdIsNotBelowIt) {
    BackendHealth h = healthy_at_t0(accrual_policy());
    // S S S S F: exactly 80%.
    const TimePoint t = feed(h, ok(), 4, t0);
    EXPECT_FALSE(h.apply(fail(), t).transition);
    EXPECT_DOUBLE_EQ(*h.snapshot(t).success_rate, 0.8);
}

TEST(FailureAccrual, WindowSlides) {
    BackendHealth h = healthy_at_t0(accrual_policy());
    h.apply(fail(), t0);
    // 11 s later the failure has left the window (now - 10s, now].
    const TimePoint t = feed(h, ok(), 3, t0 + 11s);    // t0+11s .. t0+13s
    EXPECT_FALSE(h.apply(ok(), t).transition);         // 4 probes in the window
    EXPECT_FALSE(h.apply(fail(), t + 1s).transition);  // 4 of 5 = 80%; 4 of 6 had it counted
    EXPECT_EQ(h.verdict(), Verdict::kHealthy);
    EXPECT_EQ(h.snapshot(t + 1s).window_probes, 5u);
}

TEST(FailureAccrual, HoldKeepsItOutDespiteSuccesses) {
    Policy p = accrual_policy();
    p.accrual.jitter = 0;  // exactly 1s
    BackendHealth h = healthy_at_t0(p);
    TimePoint t = t0;
    for (const auto& r : {fail(), fail(), fail(), fail()}) {
        h.apply(r, t);
        t += 100ms;
    }
    const Update u = h.apply(fail(), t);  // 0 of 5
    ASSERT_TRUE(u.transition);
    EXPECT_EQ(u.transition->held_until, t + 1s);
    EXPECT_EQ(u.transition->hold_detail, "ejection 1: held out 1s");
    // Two successes inside the hold: still out.
    h.apply(ok(), t + 200ms);
    EXPECT_FALSE(h.apply(ok(), t + 400ms).transition);
    EXPECT_EQ(h.verdict(), Verdict::kUnhealthy);
    EXPECT_EQ(h.snapshot(t + 400ms).hold, Hold::kFailureAccrual);
    EXPECT_EQ(h.snapshot(t + 400ms).held_until, t + 1s);
    // The first success after the hold brings it back (it has its two).
    const Update back = h.apply(ok(), t + 1s);
    ASSERT_TRUE(back.transition);
    EXPECT_EQ(back.transition->to, Verdict::kHealthy);
}

TEST(FailureAccrual, ConsecutiveFailuresAlsoHoldWhenOn) {
    Policy p = accrual_policy();
    p.unhealthy_threshold = 2;
    p.accrual.jitter = 0;
    BackendHealth h = healthy_at_t0(p);
    h.apply(fail(), t0);
    const Update u = h.apply(fail(), t0 + 1s);
    ASSERT_TRUE(u.transition);
    EXPECT_EQ(u.transition->cause, Cause::kConsecutiveFailures);
    EXPECT_EQ(u.transition->hold, Hold::kFailureAccrual);
    EXPECT_EQ(u.transition->held_until, t0 + 2s);
}

TEST(FailureAccrual, ConsecutiveFailuresDoNotHoldWhenOff) {
    BackendHealth h = healthy_at_t0(policy(2, 2));
    h.apply(fail(), t0);
    const Update u = h.apply(fail(), t0 + 1s);
    ASSERT_TRUE(u.transition);
    EXPECT_EQ(u.transition->hold, Hold::kNone);
    h.apply(ok(), t0 + 2s);
    EXPECT_TRUE(h.apply(ok(), t0 + 3s).transition);
}

// Ejects (two consecutive failures), waits out the hold, comes back; returns
// the hold-down of the ejection.
Clock::duration eject_and_return(BackendHealth& h, TimePoint& t) {
    h.apply(fail(), t);
    const Update u = h.apply(fail(), t + 1ms);
    EXPECT_TRUE(u.transition && u.transition->to == Verdict::kUnhealthy);
    const auto hold = u.transition->held_until - (t + 1ms);
    t = u.transition->held_until;
    h.apply(ok(), t);
    EXPECT_TRUE(h.apply(ok(), t + 1ms).transition);
    t += 2ms;
    return hold;
}

TEST(FailureAccrual, BackOffDoublesUpToTheMaximumWithoutJitter) {
    Policy p = accrual_policy();
    p.unhealthy_threshold = 2;
    p.accrual.jitter = 0;
    BackendHealth h = healthy_at_t0(p);
    TimePoint t = t0;
    std::vector<Clock::duration> holds;
    for (int i = 0; i < 9; ++i) holds.push_back(eject_and_return(h, t));
    const std::vector<Clock::duration> want = {1s, 2s, 4s, 8s, 16s, 32s, 60s, 60s, 60s};
    EXPECT_EQ(holds, want);
    EXPECT_EQ(h.snapshot(t).ejections, 9u);
}

TEST(FailureAccrual, JitteredBackOffStaysWithinItsBounds) {
    Policy p = accrual_policy();
    p.unhealthy_threshold = 2;  // jitter 0.5
    std::set<Clock::rep> seen;
    for (std::uint64_t seed = 1; seed <= 20; ++seed) {
        BackendHealth h(p, true, seed, t0 - 10s);
        h.apply(ok(), t0 - 2s);
        h.apply(ok(), t0 - 1s);
        TimePoint t = t0;
        Clock::duration base = 1s;
        for (int i = 0; i < 8; ++i) {
            const auto hold = eject_and_return(h, t);
            EXPECT_GE(hold, std::min<Clock::duration>(base, 60s)) << "seed " << seed;
            EXPECT_LE(hold, std::min<Clock::duration>(base + base / 2, 60s)) << "seed " << seed;
            EXPECT_GE(hold, 1s);
            EXPECT_LE(hold, 60s);
            if (i == 0) seen.insert(hold.count());
            base *= 2;
        }
    }
    EXPECT_GT(seen.size(), 10u);  // the jitter spreads backends that failed together
}

TEST(FailureAccrual, BackOffResetsAfterStayingHealthyForTheMaximum) {
    Policy p = accrual_policy();
    p.unhealthy_threshold = 2;
    p.accrual.jitter = 0;
    BackendHealth h = healthy_at_t0(p);
    TimePoint t = t0;
    eject_and_return(h, t);
    eject_and_return(h, t);
    EXPECT_EQ(eject_and_return(h, t), 4s);
    t += 60s;  // a quiet minute
    EXPECT_EQ(eject_and_return(h, t), 1s);
}

TEST(FailureAccrual, RateLimitedAnswersCountAsFailuresInTheRate) {
    BackendHealth h = healthy_at_t0(accrual_policy());
    TimePoint t = feed(h, http(200), 3, t0);
    h.apply(http(429), t);
    const Update u = h.apply(http(429), t + 1s);  // 3 of 5: 60%
    ASSERT_TRUE(u.transition);
    EXPECT_EQ(u.transition->cause, Cause::kSuccessRate);
    // ... while without accrual they are plain successes.
    BackendHealth g = healthy_at_t0(policy(2, 2));
    feed(g, http(429), 10, t0);
    EXPECT_EQ(g.verdict(), Verdict::kHealthy);
}

TEST(FailureAccrual, UnknownBackendsAreJudgedByThresholdsOnly) {
    BackendHealth h(accrual_policy(), true, 1, t0);
    feed(h, ok(), 1, t0);
    feed(h, fail(), 1, t0 + 1s);
    feed(h, ok(), 1, t0 + 2s);
    feed(h, fail(), 2, t0 + 3s);
    feed(h, ok(), 1, t0 + 5s);  // 3 of 6: a healthy backend would have been ejected
    EXPECT_EQ(h.verdict(), Verdict::kUnknown);
}

// --- Flapping -------------------------------------------------------------------------

Policy flapping_policy() {
    Policy p = policy(1, 1);
    p.flapping = config::Flapping{4, 300s, 300s};
    return p;
}

TEST(Flapping, MoreThanKChangesInTheWindowHoldsOut) {
    BackendHealth h = healthy_at_t0(flapping_policy());
    TimePoint t = t0;
    // Changes 1-4: down, up, down, up (every 30s).
    for (int i = 0; i < 4; ++i) {
        const Update u = h.apply(i % 2 ? ok() : fail(), t);
        ASSERT_TRUE(u.transition);
        EXPECT_EQ(u.transition->hold, Hold::kNone);
        t += 30s;
    }
    // Change 5: down, and held for 5 minutes.
    const Update u = h.apply(fail(), t);
    ASSERT_TRUE(u.transition);
    EXPECT_EQ(u.transition->hold, Hold::kFlapping);
    EXPECT_EQ(u.transition->held_until, t + 300s);
    EXPECT_EQ(u.transition->hold_detail, "flapping: 5 changes in 5m: held out 5m");
    // Passing probes during the hold do not bring it back.
    feed(h, ok(), 299, t + 1s);  // up to t + 299s
    EXPECT_EQ(h.verdict(), Verdict::kUnhealthy);
    EXPECT_EQ(h.snapshot(t + 299s).hold, Hold::kFlapping);
    // After it, the next one does.
    EXPECT_TRUE(h.apply(ok(), t + 300s).transition);
    EXPECT_EQ(h.verdict(), Verdict::kHealthy);
}

TEST(Flapping, ChangesSpreadBeyondTheWindowDoNotCount) {
    BackendHealth h = healthy_at_t0(flapping_policy());
    TimePoint t = t0;
    for (int i = 0; i < 12; ++i) {
        const Update u = h.apply(i % 2 ? ok() : fail(), t);
        ASSERT_TRUE(u.transition);
        EXPECT_EQ(u.transition->hold, Hold::kNone) << i;
        t += 80s;  // 4 changes span 240s; the 5th is 320s after the 1st
    }
}

TEST(Flapping, ZeroChangesIsOff) {
    Policy p = policy(1, 1);
    BackendHealth h = healthy_at_t0(p);
    TimePoint t = t0;
    for (int i = 0; i < 20; ++i) {
        const Update u = h.apply(i % 2 ? ok() : fail(), t);
        ASSERT_TRUE(u.transition);
        EXPECT_EQ(u.transition->hold, Hold::kNone);
        t += 1s;
    }
}

TEST(Flapping, FirstVerdictIsNotAChange) {
    BackendHealth h(flapping_policy(), true, 1, t0);
    TimePoint t = t0;
    // unknown -> unhealthy, then 4 changes: no hold yet.
    for (int i = 0; i < 5; ++i) {
        const Update u = h.apply(i % 2 ? ok() : fail(), t);
        ASSERT_TRUE(u.transition);
        EXPECT_EQ(u.transition->hold, Hold::kNone) << i;
        t += 1s;
    }
}

TEST(Flapping, LongerOfAccrualAndFlappingHoldWins) {
    Policy p = flapping_policy();
    p.accrual.enabled = true;
    p.accrual.jitter = 0;
    BackendHealth h = healthy_at_t0(p);
    TimePoint t = t0;
    for (int i = 0; i < 4; ++i) {
        h.apply(i % 2 ? ok() : fail(), t);
        t += 30s;
    }
    const Update u = h.apply(fail(), t);
    ASSERT_TRUE(u.transition);
    EXPECT_EQ(u.transition->hold, Hold::kFlapping);
    EXPECT_EQ(u.transition->held_until, t + 300s);
    EXPECT_EQ(u.transition->hold_detail,
              "ejection 3: held out 4s; flapping: 5 changes in 5m: held out 5m");
}

}  // namespace
}  // namespace xlb::health
