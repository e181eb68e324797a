// SPDX-License-Identifier: Apache-2.0
//
// Balancing policies: the balls-into-bins bounds (static model) and the
// queueing simulation's behaviour with a slow server and a hot key.

#include "xlb/sim/balance.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>

namespace {

using xlb::sim::Policy;
using xlb::sim::QueueScenario;

std::uint64_t max_load(std::uint32_t servers, std::uint64_t jobs, Policy policy) {
    auto loads = xlb::sim::place_static(servers, jobs, policy, 1);
    EXPECT_TRUE(loads.has_value()) << (loads ? std::string() : loads.error().message());
    if (!loads) return 0;
    EXPECT_EQ(std::accumulate(loads->begin(), loads->end(), std::uint64_t{0}), jobs);
    return *std::max_element(loads->begin(), loads->end());
}

// N = 1000 servers, 1000 x N unit jobs. With that many jobs every policy's
// maximum is dominated by the mean (1000), so the comparison is of what lies
// above the mean: random leaves about sqrt(2 m/N ln N) ~ 117 on the fullest
// server, two choices about ln ln N / ln 2 ~ 3 (Berenbrink et al., 2006).
TEST(BalanceStatic, PowerOfTwoChoicesBeatsRandomByThreeTimes) {
    constexpr std::uint32_t kN = 1000;
    constexpr std::uint64_t kJobs = 1000ull * kN;
    const double mean = static_cast<double>(kJobs) / kN;
    const double random_excess = static_cast<double>(max_load(kN, kJobs, Policy::kRandom)) - mean;
    const double p2c_excess = static_cast<double>(max_load(kN, kJobs, Policy::kP2C)) - mean;
    EXPECT_GT(random_excess, 0);
    EXPECT_GE(p2c_excess, 0);
    EXPECT_LE(3 * p2c_excess, random_excess)
        << "random " << random_excess << " above the mean, p2c " << p2c_excess;
}

TEST(BalanceStatic, RoundRobinIsExactlyCeil) {
    constexpr std::uint32_t kN = 1000;
    EXPECT_EQ(max_load(kN, 1000ull * kN, Policy::kRoundRobin), 1000u);
    EXPECT_EQ(max_load(kN, 1000ull * kN + 7, Policy::kRoundRobin), 1001u);
    EXPECT_EQ(max_load(7, 20, Policy::kRoundRobin), 3u);
    EXPECT_EQ(max_load(7, 20, Policy::kLeastRequest), 3u);
}

TEST(BalanceStatic, EwmaHasNothingToLearnFrom) {
    auto loads = xlb::sim::place_static(10, 100, Policy::kP2CEwma, 1);
    ASSERT_FALSE(loads.has_value());
    EXPECT_NE(loads.error().message().find("queue model"), std::string::npos);
}

QueueScenario small_scenario() {
    QueueScenario s;
    s.servers = 50;
    s.requests = 40'000;
    s.utilisation = 0.8;
    return s;
}

// A server five times slower receives 1/N of requests under random choice
// and drowns; the latency-aware policy sends it much less.
TEST(BalanceQueue, LatencyAwarePolicyAvoidsTheSlowServer) {
    auto s = small_scenario();
    s.slow_factor = 5;
    const auto random = xlb::sim::simulate_queue(s, Policy::kRandom);
    const auto ewma = xlb::sim::simulate_queue(s, Policy::kP2CEwma);
    const auto p2c = xlb::sim::simulate_queue(s, Policy::kP2C);
    ASSERT_TRUE(random && ewma && p2c);
    EXPECT_NEAR(random->server0_share, 1.0 / s.servers, 0.005);
    EXPECT_LT(ewma->server0_share, 0.5 * random->server0_share);
    EXPECT_LT(ewma->p99, random->p99 / 2);
    EXPECT_LT(p2c->p99, random->p99 / 2);
}

// Placement by key sends all of a hot key to one server; no table can fix
// that, while a per-request policy spreads it.
TEST(BalanceQueue, HotKeyOverloadsItsOwnerUnderHashPlacement) {
    auto s = small_scenario();
    s.hot_share = 0.1;  // 4 servers' worth of work for one server
    const auto hash = xlb::sim::simulate_queue(s, Policy::kHash);
    const auto p2c = xlb::sim::simulate_queue(s, Policy::kP2C);
    ASSERT_TRUE(hash && p2c);
    EXPECT_GT(hash->mean_max_outstanding, 20 * p2c->mean_max_outstanding);
    EXPECT_GT(hash->p99, 10 * p2c->p99);
}

TEST(BalanceQueue, SameSeedSameResult) {
    const auto s = small_scenario();
    for (Policy p : xlb::sim::kAllPolicies) {
        const auto a = xlb::sim::simulate_queue(s, p);
        const auto b = xlb::sim::simulate_queue(s, p);
        ASSERT_TRUE(a && b);
        EXPECT_EQ(a->p99, b->p99);
        EXPECT_EQ(a->mean_max_outstanding, b->mean_max_outstanding);
    }
}

TEST(BalanceQueue, RejectsBadScenarios) {
    auto s = small_scenario();
    s.utilisation = 1.2;
    auto r = xlb::sim::simulate_queue(s, Policy::kRandom);
    ASSERT_FALSE(r.has_value());
    EXPECT_NE(r.error().message().find("utilisation"), std::string::npos);
    s = small_scenario();
    s.servers = 0;
    EXPECT_FALSE(xlb::sim::simulate_queue(s, Policy::kRandom).has_value());
}

}  // namespace
