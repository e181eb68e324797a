// SPDX-License-Identifier: Apache-2.0
// The health history: the ring of a backend's last verdict changes (order,
// capacity, wrap-around, capacity 0, resizing), and the tracker keeping one
// per backend with the configured capacity; fake clocks throughout.
#include "xlb/health/history.h"

#include <gtest/gtest.h>

#include <vector>

#include "xlb/health/tracker.h"

namespace xlb::health {
namespace {

using namespace std::chrono_literals;

const TimePoint t0 = TimePoint(std::chrono::hours(1000));
const WallTime wall0 = WallTime{} + std::chrono::hours(24 * 365 * 56);

// The i-th change of a backend that flaps once a second from t0.
Transition change(int i) {
    Transition t;
    t.at = t0 + std::chrono::seconds(i);
    t.wall_time = wall0 + std::chrono::seconds(i);
    t.from = i == 0 ? Verdict::kUnknown : i % 2 ? Verdict::kHealthy : Verdict::kUnhealthy;
    t.to = i % 2 ? Verdict::kUnhealthy : Verdict::kHealthy;
    t.detail = "change " + std::to_string(i);
    return t;
}

// The details of the entries, oldest first.
std::vector<std::string> details(const TransitionHistory& h) {
    std::vector<std::string> out;
    for (const Transition& t : h.entries()) out.push_back(t.detail);
    return out;
}

TEST(TransitionHistory, KeepsTheOrderOfArrival) {
    TransitionHistory h(5);
    EXPECT_TRUE(h.empty());
    for (int i = 0; i < 3; ++i) h.record(change(i));
    EXPECT_EQ(h.size(), 3u);
    EXPECT_EQ(details(h), (std::vector<std::string>{"change 0", "change 1", "change 2"}));
    const std::vector<Transition> e = h.entries();
    EXPECT_EQ(e[0].from, Verdict::kUnknown);
    EXPECT_EQ(e[1].wall_time, wall0 + 1s);
    EXPECT_EQ(e[2].at, t0 + 2s);
}

TEST(TransitionHistory, HoldsAtMostItsCapacityDroppingTheOldest) {
    TransitionHistory h(3);
    for (int i = 0; i < 3; ++i) h.record(change(i));
    EXPECT_EQ(details(h), (std::vector<std::string>{"change 0", "change 1", "change 2"}));
    h.record(change(3));
    EXPECT_EQ(h.size(), 3u);
    EXPECT_EQ(details(h), (std::vector<std::string>{"change 1", "change 2", "change 3"}));
}

TEST(TransitionHistory, WrapsAroundManyTimes) {
    TransitionHistory h(4);
    for (int i = 0; i < 4 * 7 + 2; ++i) h.record(change(i));  // 30 changes
    EXPECT_EQ(h.size(), 4u);
    EXPECT_EQ(details(h),
              (std::vector<std::string>{"change 26", "change 27", "change 28", "change 29"}));
    const std::vector<Transition> e = h.entries();
    for (std::size_t i = 1; i < e.size(); ++i) EXPECT_LT(e[i - 1].at, e[i].at) << "oldest first";
}

TEST(TransitionHistory, CapacityZeroKeepsNothing) {
    TransitionHistory h(0);
    for (int i = 0; i < 3; ++i) h.record(change(i));
    EXPECT_TRUE(h.empty());
    EXPECT_TRUE(h.entries().empty());
}

TEST(TransitionHistory, DefaultsToTheConfigurationsDefault) {
    TransitionHistory h;
    EXPECT_EQ(h.capacity(), config::kDefaultHealthHistory);
    EXPECT_EQ(h.capacity(), 20u);
}

TEST(TransitionHistory, ResizingKeepsTheNewest) {
    TransitionHistory h(4);
    for (int i = 0; i < 6; ++i) h.record(change(i));  // wrapped: 2 3 4 5
    h.set_capacity(2);
    EXPECT_EQ(details(h), (std::vector<std::string>{"change 4", "change 5"}));
    h.record(change(6));
    EXPECT_EQ(details(h), (std::vector<std::string>{"change 5", "change 6"}));
    h.set_capacity(3);  // room again: nothing comes back, the next one is added
    h.record(change(7));
    EXPECT_EQ(details(h), (std::vector<std::string>{"change 5", "change 6", "change 7"}));
    h.record(change(8));
    EXPECT_EQ(details(h), (std::vector<std::string>{"change 6", "change 7", "change 8"}));
    h.set_capacity(0);
    EXPECT_TRUE(h.empty());
    h.record(change(9));
    EXPECT_TRUE(h.empty());
}

// --- One history per backend, through the tracker -------------------------------------

ProbeResult result(const TargetKey& key, bool ok, WallTime wall) {
    ProbeResult r;
    r.key = key;
    r.failure = ok ? Failure::kNone : Failure::kRefused;
    r.detail = ok ? "connected" : "connection refused";
    r.finished_wall = wall;
    return r;
}

Policy thresholds_of_one() {
    Policy p;
    p.healthy_threshold = 1;
    p.unhealthy_threshold = 1;
    p.flapping.changes = 0;
    return p;
}

TEST(TrackerHistory, EachBackendKeepsItsOwnWithTheConfiguredCapacity) {
    HealthTracker tracker(7);
    const TargetKey a{"198.51.100.10:80/tcp", *net::IpAddress::parse("10.0.0.1")};
    const TargetKey b{"198.51.100.10:80/tcp", *net::IpAddress::parse("10.0.0.2")};
    tracker.set_history_capacity(2);
    tracker.set_targets({{a, thresholds_of_one()}, {b, thresholds_of_one()}}, t0);
    // a: up, down, up; b: down.
    tracker.apply(result(a, true, wall0), t0);
    tracker.apply(result(a, false, wall0 + 1s), t0 + 1s);
    tracker.apply(result(a, true, wall0 + 2s), t0 + 2s);
    tracker.apply(result(b, false, wall0 + 3s), t0 + 3s);

    const std::vector<Transition> ha = tracker.find(a)->history().entries();
    ASSERT_EQ(ha.size(), 2u) << "capacity 2: the first verdict is gone";
    EXPECT_EQ(ha[0].from, Verdict::kHealthy);
    EXPECT_EQ(ha[0].to, Verdict::kUnhealthy);
    EXPECT_EQ(ha[0].probe, Failure::kRefused);
    EXPECT_EQ(ha[0].wall_time, wall0 + 1s);
    EXPECT_EQ(ha[1].to, Verdict::kHealthy);
    EXPECT_EQ(ha[1].wall_time, wall0 + 2s);
    const std::vector<Transition> hb = tracker.find(b)->history().entries();
    ASSERT_EQ(hb.size(), 1u);
    EXPECT_EQ(hb[0].reason(), "1 consecutive failure, last: connection refused");

    // A new capacity reaches the backends tracked already, and new ones.
    tracker.set_history_capacity(1);
    EXPECT_EQ(tracker.find(a)->history().entries()[0].wall_time, wall0 + 2s);
    const TargetKey c{"198.51.100.10:80/tcp", *net::IpAddress::parse("10.0.0.3")};
    tracker.set_targets(
        {{a, thresholds_of_one()}, {b, thresholds_of_one()}, {c, thresholds_of_one()}}, t0 + 4s);
    EXPECT_EQ(tracker.find(c)->history().capacity(), 1u);
    tracker.set_history_capacity(0);
    EXPECT_TRUE(tracker.find(a)->history().empty());
    tracker.apply(result(c, true, wall0 + 5s), t0 + 5s);
    EXPECT_TRUE(tracker.find(c)->history().empty());
    EXPECT_EQ(tracker.find(c)->verdict(), Verdict::kHealthy) << "verdicts do not need a history";
}

TEST(TrackerHistory, ABackendRemovedAndAddedAgainStartsEmpty) {
    HealthTracker tracker(7);
    const TargetKey a{"198.51.100.10:80/tcp", *net::IpAddress::parse("10.0.0.1")};
    tracker.set_targets({{a, thresholds_of_one()}}, t0);
    tracker.apply(result(a, false, wall0), t0);
    ASSERT_EQ(tracker.find(a)->history().size(), 1u);
    tracker.set_targets({}, t0 + 1s);
    tracker.set_targets({{a, thresholds_of_one()}}, t0 + 2s);
    EXPECT_TRUE(tracker.find(a)->history().empty());
}

}  // namespace
}  // namespace xlb::health
