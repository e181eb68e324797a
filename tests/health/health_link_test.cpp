// SPDX-License-Identifier: Apache-2.0
// The agent's health link: probe results -> state machines -> reconciler,
// with a fake clock and a fake data plane that records every publish.
#include "xlb/agent/health_link.h"

#include <gtest/gtest.h>

#include <map>

#include "recording_data_plane.h"
#include "xlb/control/reconciler.h"

namespace xlb::agent {
namespace {

using namespace std::chrono_literals;
using control::Health;
using control::PanicReason;
using health::Failure;
using health::ProbeResult;
using health::TimePoint;

using test::RecordingDataPlane;

config::VipSpec checked_vip(double panic_threshold) {
    config::VipSpec v;
    v.address = *net::IpAddress::parse("198.51.100.10");
    v.port = 80;
    v.ring_size = 1021;
    v.panic_threshold = panic_threshold;
    v.health_check.type = config::HealthCheckType::kTcp;
    v.health_check.interval = 1000ms;
    v.health_check.timeout = 500ms;
    v.health_check.healthy_threshold = 2;
    v.health_check.unhealthy_threshold = 2;
    v.health_check.flapping.changes = 0;
    v.slow_start.window = 10'000ms;
    v.slow_start.floor = 0.1;
    for (const char* a : {"10.0.0.1", "10.0.0.2", "10.0.0.3"})
        v.backends.push_back(config::BackendSpec{*net::IpAddress::parse(a), 100});
    return v;
}

class HealthLinkTest : public ::testing::Test {
protected:
    void start(const config::VipSpec& spec) {
        vip = spec;
        reconciler.set_vips({vip});
        ASSERT_TRUE(reconciler.reconcile(control::Clock::now()));
        targets = link.set_vips({vip}, now, reconciler);
    }
    ProbeResult result(std::size_t backend, Failure failure) {
        ProbeResult r;
        r.key = {vip.key(), vip.backends[backend].address};
        r.failure = failure;
        r.detail = failure == Failure::kNone ? "connected" : "connection refused";
        r.started = now;
        r.finished = now + 2ms;
        return r;
    }
    // One probe round: every backend passes or fails as told; then publish.
    std::vector<HealthEvent> round(const std::vector<bool>& passing) {
        std::vector<HealthEvent> events;
        for (std::size_t i = 0; i < passing.size(); ++i)
            for (HealthEvent& e : link.apply(
                     result(i, passing[i] ? Failure::kNone : Failure::kRefused), now, reconciler))
                events.push_back(std::move(e));
        EXPECT_TRUE(reconciler.reconcile(control::Clock::now()));
        now += 1s;
        return events;
    }
    control::BackendStatus backend(std::size_t i) {
        return reconciler.vip_status(vip.key())->backends[i];
    }

    RecordingDataPlane dp;
    control::Reconciler reconciler{dp, control::Reconciler::Options{16, 64}};
    HealthLink link{42};
    config::VipSpec vip;
    std::vector<health::ProbeTarget> targets;
    TimePoint now = TimePoint{} + 1000s;
};

// Two VIPs checking 10.0.0.1 alike (their thresholds differ): one probe
// serves both and each says so; a VIP whose check differs probes alone.
TEST_F(HealthLinkTest, ShowsWhichVipsShareABackendsProbe) {
    config::VipSpec web = checked_vip(0.5);
    config::VipSpec api = web;
    api.port = 443;
    api.health_check.port = 80;  // the same port probed as web's (its VIP port)
    api.health_check.unhealthy_threshold = 5;
    api.backends.resize(1);  // 10.0.0.1
    config::VipSpec other = web;
    other.port = 8080;
    other.health_check.port = 80;
    other.health_check.timeout = 300ms;  // a different probe
    const std::vector<config::VipSpec> vips{web, api, other};
    reconciler.set_vips(vips);
    ASSERT_TRUE(reconciler.reconcile(control::Clock::now()));
    const auto probe_targets = link.set_vips(vips, now, reconciler);
    EXPECT_EQ(probe_targets.size(), 7u);
    const auto b1 = *net::IpAddress::parse("10.0.0.1");
    const auto b2 = *net::IpAddress::parse("10.0.0.2");
    EXPECT_EQ(link.probe_shared_with(web.key(), b1), std::vector<std::string>{api.key()});
    EXPECT_EQ(link.probe_shared_with(api.key(), b1), std::vector<std::string>{web.key()});
    EXPECT_TRUE(link.probe_shared_with(web.key(), b2).empty());  // api does not check it
    EXPECT_TRUE(link.probe_shared_with(other.key(), b1).empty());
    EXPECT_EQ(health::group_probes(probe_targets).size(), 6u);  // 7 pairs, 6 probes

    // One refused probe of 10.0.0.1 serves web and api; each judges it with
    // its own threshold: web (2) leaves after two, api (5) stays.
    ProbeResult shared;
    shared.key = {web.key(), b1};
    shared.shared_targets = std::make_shared<const std::vector<health::TargetKey>>(
        std::vector<health::TargetKey>{{web.key(), b1}, {api.key(), b1}});
    shared.failure = Failure::kRefused;
    shared.detail = "connection refused";
    std::vector<HealthEvent> events;
    for (int i = 0; i < 2; ++i) {
        shared.started = now;
        shared.finished = now + 1ms;
        for (HealthEvent& e : link.apply(shared, now, reconciler)) events.push_back(e);
        now += 1s;
    }
    ASSERT_EQ(events.size(), 1u);
    EXPECT_NE(events[0].line.find("VIP " + web.key() + " backend 10.0.0.1"), std::string::npos)
        << events[0].line;
    EXPECT_EQ(link.snapshot(web.key(), b1, now)->verdict, health::Verdict::kUnhealthy);
    EXPECT_NE(link.snapshot(api.key(), b1, now)->verdict, health::Verdict::kUnhealthy);
    EXPECT_EQ(link.last_failure(api.key(), b1)->detail, "connection refused");

    // api's check changes: nothing is shared any more.
    config::VipSpec api2 = api;
    api2.health_check.interval = 2000ms;
    link.set_vips({web, api2, other}, now, reconciler);
    EXPECT_TRUE(link.probe_shared_with(web.key(), b1).empty());
    EXPECT_TRUE(link.probe_shared_with(api2.key(), b1).empty());
}

TEST_F(HealthLinkTest, ProbesEveryCheckedBackendAndStartsInStartupPanic) {
    start(checked_vip(0.5));
    ASSERT_EQ(targets.size(), 3u);
    EXPECT_EQ(targets[0].port, 80);
    auto s = reconciler.vip_status(vip.key());
    EXPECT_TRUE(s->starting);
    EXPECT_EQ(s->panic, PanicReason::kAwaitingFirstVerdicts);
    EXPECT_EQ(link.size(), 3u);
}

TEST_F(HealthLinkTest, VerdictsReachTheReconcilerAndTransitionsAreDescribed) {
    start(checked_vip(0.5));
    EXPECT_TRUE(round({true, true, true}).empty());  // one pass is not a verdict
    const auto events = round({true, true, true});
    ASSERT_EQ(events.size(), 3u);
    EXPECT_FALSE(events[0].warning);
    EXPECT_TRUE(events[0].line.starts_with(
        "VIP 198.51.100.10:80/tcp backend 10.0.0.1: unknown -> healthy: "))
        << events[0].line;
    auto s = reconciler.vip_status(vip.key());
    EXPECT_FALSE(s->starting);
    EXPECT_EQ(s->panic, PanicReason::kNone);
    for (const auto& b : s->backends) {
        EXPECT_EQ(b.health, Health::kHealthy);
        EXPECT_TRUE(b.in_table);
        EXPECT_EQ(b.weight_factor, 1.0);  // the starting pool is not slow-started
    }

    // Backend 0 fails twice: out of the table, generation bumped (reschedule).
    const std::uint32_t gen = backend(0).generation;
    round({false, true, true});
    EXPECT_TRUE(backend(0).in_table);  // one failure is not a verdict
    const auto out = round({false, true, true});
    ASSERT_EQ(out.size(), 1u);
    EXPECT_TRUE(out[0].warning);
    EXPECT_NE(out[0].line.find("backend 10.0.0.1: healthy -> unhealthy"), std::string::npos)
        << out[0].line;
    EXPECT_NE(out[0].line.find("connection refused"), std::string::npos) << out[0].line;
    EXPECT_EQ(backend(0).health, Health::kUnhealthy);
    EXPECT_FALSE(backend(0).in_table);
    EXPECT_FALSE(backend(0).live);
    EXPECT_GT(backend(0).generation, gen);
    ASSERT_TRUE(link.last_failure(vip.key(), vip.backends[0].address));
    EXPECT_EQ(link.last_failure(vip.key(), vip.backends[0].address)->failure, Failure::kRefused);
    EXPECT_FALSE(link.last_failure(vip.key(), vip.backends[1].address));
}

TEST_F(HealthLinkTest, HistoryKeepsTheConfiguredNumberOfChangesPerBackend) {
    link.set_history_capacity(2);  // what the agent does with health_history
    start(checked_vip(0.5));
    round({true, true, false});
    round({true, true, false});  // unknown -> healthy, healthy, unhealthy
    round({false, true, true});
    round({false, true, true});  // 10.0.0.1 down, 10.0.0.3 still failing then passing
    round({true, true, true});
    round({true, true, true});  // 10.0.0.1 and 10.0.0.3 back
    const auto first = link.history(vip.key(), vip.backends[0].address);
    ASSERT_TRUE(first);
    ASSERT_EQ(first->size(), 2u) << "three changes, two kept: the oldest went";
    EXPECT_EQ((*first)[0].to_string(),
              "healthy -> unhealthy: 2 consecutive failures, last: connection refused");
    EXPECT_EQ((*first)[0].probe, Failure::kRefused);
    EXPECT_EQ((*first)[1].from, health::Verdict::kUnhealthy);
    EXPECT_EQ((*first)[1].to, health::Verdict::kHealthy);
    EXPECT_LT((*first)[0].at, (*first)[1].at);
    const auto steady = link.history(vip.key(), vip.backends[1].address);
    ASSERT_TRUE(steady);
    ASSERT_EQ(steady->size(), 1u);
    EXPECT_EQ((*steady)[0].from, health::Verdict::kUnknown);
    EXPECT_FALSE(link.history(vip.key(), *net::IpAddress::parse("10.0.0.9")))
        << "not checked: no history at all";
    link.set_history_capacity(0);
    EXPECT_TRUE(link.history(vip.key(), vip.backends[0].address)->empty());
}

TEST_F(HealthLinkTest, KeepPolicyLeavesTheGenerationAlone) {
    config::VipSpec spec = checked_vip(0.5);
    spec.on_unhealthy = config::UnhealthyPolicy::kKeep;
    start(spec);
    round({true, true, true});
    round({true, true, true});
    const std::uint32_t gen = backend(0).generation;
    round({false, true, true});
    round({false, true, true});
    EXPECT_FALSE(backend(0).in_table);
    EXPECT_TRUE(backend(0).live);
    EXPECT_EQ(backend(0).generation, gen);
}

TEST_F(HealthLinkTest, ARecoveredBackendRampsThroughSlowStartInPublishedSteps) {
    start(checked_vip(0.5));
    round({true, true, true});
    round({true, true, true});
    round({false, true, true});
    round({false, true, true});
    ASSERT_FALSE(backend(0).in_table);
    round({true, true, true});
    const std::size_t publishes_before = dp.publishes;
    round({true, true, true});  // healthy again: ramps from the floor
    ASSERT_TRUE(backend(0).in_table);
    std::vector<std::uint32_t> weights{backend(0).effective_weight};
    EXPECT_EQ(weights[0], 1000u);  // 100 x 100 x floor 0.1
    // Time alone moves the ramp: tick at every next_change().
    for (int i = 0; i < 100; ++i) {
        const TimePoint next = link.next_change(now);
        if (next == TimePoint::max()) break;
        now = next;
        EXPECT_GE(link.tick(now, reconciler), 1u);
        ASSERT_TRUE(reconciler.reconcile(control::Clock::now()));
        weights.push_back(backend(0).effective_weight);
    }
    EXPECT_EQ(weights.back(), 10000u);
    EXPECT_GE(weights.size(), 10u);
    EXPECT_TRUE(std::is_sorted(weights.begin(), weights.end()));
    EXPECT_GE(dp.publishes - publishes_before, 10u);  // one publish per step
    EXPECT_EQ(link.next_change(now), TimePoint::max());
}

TEST_F(HealthLinkTest, TwoOfThreeDownPanicsAtHalfAndDropsToOneAtZero) {
    for (double threshold : {0.5, 0.0}) {
        SCOPED_TRACE(threshold);
        start(checked_vip(threshold));
        round({true, false, false});
        round({true, false, false});
        auto s = reconciler.vip_status(vip.key());
        EXPECT_FALSE(s->starting);
        std::size_t in_table = 0;
        for (const auto& b : s->backends) in_table += b.in_table;
        if (threshold > 0) {
            EXPECT_EQ(s->panic, PanicReason::kBelowThreshold);
            EXPECT_EQ(s->panic_entries, 1u);
            EXPECT_EQ(in_table, 3u);
        } else {
            EXPECT_EQ(s->panic, PanicReason::kNone);
            EXPECT_EQ(s->panic_entries, 0u);
            EXPECT_EQ(in_table, 1u);
        }
        const auto changes = reconciler.take_panic_changes();
        ASSERT_FALSE(changes.empty());
        EXPECT_EQ(changes.back().to,
                  threshold > 0 ? PanicReason::kBelowThreshold : PanicReason::kNone);
        if (threshold > 0) {
            EXPECT_NE(describe_panic_change(changes.back())
                          .find("in panic: healthy share 33% below the "
                                "threshold 50%"),
                      std::string::npos)
                << describe_panic_change(changes.back());
        }
        reconciler.set_vips({});
        ASSERT_TRUE(reconciler.reconcile(control::Clock::now()));
        link.set_vips({}, now, reconciler);
    }
}

TEST_F(HealthLinkTest, ABackendDisabledAndEnabledAgainStartsUnknown) {
    start(checked_vip(0.5));
    round({true, true, true});
    round({true, true, true});
    config::VipSpec changed = vip;
    changed.backends[2].state = config::AdminState::kDisabled;
    reconciler.set_vips({changed});
    EXPECT_EQ(link.set_vips({changed}, now, reconciler).size(), 2u);
    ASSERT_TRUE(reconciler.reconcile(control::Clock::now()));
    EXPECT_FALSE(link.snapshot(vip.key(), vip.backends[2].address, now));
    reconciler.set_vips({vip});
    link.set_vips({vip}, now, reconciler);
    ASSERT_TRUE(reconciler.reconcile(control::Clock::now()));
    // not "healthy" from before: no verdict yet, so not in the table
    EXPECT_EQ(backend(2).health, Health::kUnknown);
    EXPECT_FALSE(backend(2).in_table);
}

TEST_F(HealthLinkTest, AVipWithoutACheckIsNotProbed) {
    config::VipSpec spec = checked_vip(0.5);
    spec.health_check = config::HealthCheck{};
    start(spec);
    EXPECT_TRUE(targets.empty());
    EXPECT_EQ(backend(0).health, Health::kHealthy);
    EXPECT_FALSE(link.snapshot(vip.key(), vip.backends[0].address, now));
}

}  // namespace
}  // namespace xlb::agent
