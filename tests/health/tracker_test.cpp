// SPDX-License-Identifier: Apache-2.0
// The tracker: targets from the configuration, diffing, observations for the
// reconciler (only changes, including those that come with time).
#include "xlb/health/tracker.h"

#include <gtest/gtest.h>

namespace xlb::health {
namespace {

using namespace std::chrono_literals;

const TimePoint t0 = TimePoint(std::chrono::hours(1000));

net::IpAddress ip(const char* text) { return *net::IpAddress::parse(text); }

ProbeResult result(const TargetKey& key, bool ok, int status = 0) {
    ProbeResult r;
    r.key = key;
    r.failure = ok ? Failure::kNone : Failure::kRefused;
    if (status) {
        r.http_status = static_cast<std::uint16_t>(status);
        r.rate_limited = status == 429;
    }
    return r;
}

config::VipSpec vip(const char* address, std::uint16_t port, config::HealthCheckType type) {
    config::VipSpec v;
    v.address = ip(address);
    v.port = port;
    v.health_check.type = type;
    v.health_check.healthy_threshold = 1;
    v.health_check.unhealthy_threshold = 1;
    v.backends = {config::BackendSpec{ip("10.0.0.1")},
                  config::BackendSpec{ip("10.0.0.2"), 100, config::AdminState::kDrain},
                  config::BackendSpec{ip("10.0.0.3"), 100, config::AdminState::kDisabled}};
    return v;
}

TEST(Targets, FromTheConfiguration) {
    auto web = vip("198.51.100.10", 80, config::HealthCheckType::kHttp);
    web.health_check.port = 8080;
    auto dns = vip("198.51.100.53", 53, config::HealthCheckType::kUdp);
    dns.protocol = config::Protocol::kUdp;
    auto plain = vip("198.51.100.20", 443, config::HealthCheckType::kNone);
    const auto probes = probe_targets({web, dns, plain});
    ASSERT_EQ(probes.size(), 4u);  // disabled backends and unchecked VIPs: none
    EXPECT_EQ(probes[0].key, (TargetKey{"198.51.100.10:80/tcp", ip("10.0.0.1")}));
    EXPECT_EQ(probes[0].port, 8080);                   // the check's port
    EXPECT_EQ(probes[1].key.backend, ip("10.0.0.2"));  // drained: still probed
    EXPECT_EQ(probes[2].key.vip, "198.51.100.53:53/udp");
    EXPECT_EQ(probes[2].port, 53);  // the VIP's port
    EXPECT_EQ(probes[2].check.type, config::HealthCheckType::kUdp);
    const auto tracked = tracked_targets({web, dns, plain});
    ASSERT_EQ(tracked.size(), 4u);
    EXPECT_EQ(tracked[0].policy, Policy::from(web.health_check, web.slow_start));
    EXPECT_EQ(tracked[0].policy.healthy_threshold, 1u);
}

TEST(Tracker, ReportsOnlyChanges) {
    HealthTracker tracker(7);
    const TargetKey a{"vip", ip("10.0.0.1")};
    const TargetKey b{"vip", ip("10.0.0.2")};
    Policy p;
    p.healthy_threshold = 2;
    tracker.set_targets({{a, p}, {b, p}}, t0);
    EXPECT_EQ(tracker.size(), 2u);
    EXPECT_TRUE(tracker.take_changes(t0).empty());  // unknown at 1.0: the default
    tracker.apply(result(a, true), t0);
    EXPECT_TRUE(tracker.take_changes(t0).empty());  // still unknown
    ASSERT_TRUE(tracker.apply(result(a, true), t0 + 1s)->transition);
    auto changes = tracker.take_changes(t0 + 1s);
    ASSERT_EQ(changes.size(), 1u);
    EXPECT_EQ(changes[0], (Observation{a, Verdict::kHealthy, 1.0}));
    tracker.apply(result(a, true), t0 + 2s);
    EXPECT_TRUE(tracker.take_changes(t0 + 2s).empty());
    EXPECT_EQ(tracker.next_change(t0 + 2s), TimePoint::max());
}

TEST(Tracker, IgnoresResultsForUntrackedTargets) {
    HealthTracker tracker(7);
    EXPECT_FALSE(tracker.apply(result(TargetKey{"vip", ip("10.0.0.9")}, true), t0));
    EXPECT_TRUE(tracker.take_changes(t0).empty());
}

TEST(Tracker, FollowsFactorsThatChangeWithTime) {
    HealthTracker tracker(7);
    const TargetKey a{"vip", ip("10.0.0.1")};
    Policy p;
    p.healthy_threshold = 1;
    p.slow_start = config::SlowStart{10s, 0.1};
    const TargetKey other{"vip", ip("10.0.0.9")};
    tracker.set_targets({{other, p}}, t0);
    tracker.set_targets({{other, p}, {a, p}}, t0);  // a joins a VIP that is serving
    tracker.apply(result(a, true), t0);
    EXPECT_EQ(tracker.next_change(t0), t0);  // a result not yet taken
    auto changes = tracker.take_changes(t0);
    ASSERT_EQ(changes.size(), 1u);
    EXPECT_DOUBLE_EQ(changes[0].weight_factor, 0.1);
    // Step by step, only when something changed.
    int publishes = 0;
    TimePoint t = t0;
    double last = 0.1;
    while (tracker.next_change(t) != TimePoint::max()) {
        const TimePoint next = tracker.next_change(t);
        EXPECT_TRUE(tracker.take_changes(next - 1ms).empty());
        t = next;
        changes = tracker.take_changes(t);
        ASSERT_EQ(changes.size(), 1u);
        EXPECT_GT(changes[0].weight_factor, last);
        last = changes[0].weight_factor;
        ++publishes;
    }
    EXPECT_EQ(publishes, 10);
    EXPECT_EQ(last, 1.0);
    EXPECT_EQ(t, t0 + 10s);
}

TEST(Tracker, RateLimitBiasEndsByItself) {
    HealthTracker tracker(7);
    const TargetKey a{"vip", ip("10.0.0.1")};
    Policy p;
    p.healthy_threshold = 1;
    tracker.set_targets({{a, p}}, t0);
    tracker.apply(result(a, true), t0);
    tracker.take_changes(t0);
    tracker.apply(result(a, true, 429), t0 + 1s);
    auto changes = tracker.take_changes(t0 + 1s);
    ASSERT_EQ(changes.size(), 1u);
    EXPECT_DOUBLE_EQ(changes[0].weight_factor, 0.1);
    EXPECT_EQ(tracker.next_change(t0 + 1s), t0 + 6s);
    changes = tracker.take_changes(t0 + 6s);
    ASSERT_EQ(changes.size(), 1u);
    EXPECT_EQ(changes[0].weight_factor, 1.0);
    EXPECT_EQ(tracker.next_change(t0 + 6s), TimePoint::max());
}

TEST(Tracker, SetTargetsKeepsStateDropsAndAdds) {
    HealthTracker tracker(7);
    const TargetKey a{"vip", ip("10.0.0.1")};
    const TargetKey b{"vip", ip("10.0.0.2")};
    const TargetKey c{"vip", ip("10.0.0.3")};
    Policy p;
    p.healthy_threshold = 1;
    p.slow_start = config::SlowStart{30s, 0.1};
    tracker.set_targets({{a, p}, {b, p}}, t0);  // at start
    tracker.apply(result(a, true), t0);
    tracker.apply(result(b, false), t0);
    tracker.take_changes(t0);
    // b leaves, c arrives at runtime; a keeps its verdict.
    Policy q = p;
    q.unhealthy_threshold = 3;
    tracker.set_targets({{a, q}, {c, p}}, t0 + 1s);
    EXPECT_EQ(tracker.size(), 2u);
    EXPECT_EQ(tracker.find(a)->verdict(), Verdict::kHealthy);
    EXPECT_EQ(tracker.find(a)->policy(), q);
    EXPECT_EQ(tracker.find(b), nullptr);
    EXPECT_EQ(tracker.find(c)->verdict(), Verdict::kUnknown);
    EXPECT_TRUE(tracker.take_changes(t0 + 1s).empty());  // a's observation is unchanged
    // a (initial) got its first verdict without slow start; c slow-starts.
    EXPECT_EQ(tracker.find(a)->weight_factor(t0 + 1s), 1.0);
    tracker.apply(result(c, true), t0 + 2s);
    auto changes = tracker.take_changes(t0 + 2s);
    ASSERT_EQ(changes.size(), 1u);
    EXPECT_EQ(changes[0].key, c);
    EXPECT_DOUBLE_EQ(changes[0].weight_factor, 0.1);
    // A VIP new to the tracker: its first verdicts take full weight.
    const TargetKey d{"other-vip", ip("10.0.0.4")};
    tracker.set_targets({{a, q}, {c, p}, {d, p}}, t0 + 3s);
    tracker.apply(result(d, true), t0 + 3s);
    EXPECT_EQ(tracker.find(d)->weight_factor(t0 + 3s), 1.0);
    tracker.set_targets({{a, q}, {c, p}}, t0 + 3s);
    const auto snap = tracker.snapshot(t0 + 2s);
    ASSERT_EQ(snap.size(), 2u);
    EXPECT_EQ(snap[0].first, a);
    EXPECT_EQ(snap[1].second.verdict, Verdict::kHealthy);
}

}  // namespace
}  // namespace xlb::health
