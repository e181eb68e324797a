// SPDX-License-Identifier: Apache-2.0
//
// xlb-sim fleet: the flows each health consensus breaks across host loss,
// backend churn and partial reachability, through the agent's own decision.

#include "xlb/sim/fleet.h"

#include <gtest/gtest.h>

#include <cmath>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "xlb/sim/cli.h"

namespace {

using xlb::fleet::HealthConsensus;
using xlb::sim::FleetEvent;
using xlb::sim::FleetResult;
using xlb::sim::FleetRow;
using xlb::sim::FleetStudy;

FleetResult run(const FleetStudy& study) {
    auto r = xlb::sim::run_fleet(study);
    EXPECT_TRUE(r.has_value()) << (r ? std::string() : r.error().message());
    return r ? *r : FleetResult{};
}

const FleetRow& row(const FleetResult& r, std::optional<FleetEvent> event, HealthConsensus policy) {
    for (const auto& row : r.rows) {
        if (row.event == event && row.policy == policy) return row;
    }
    ADD_FAILURE() << "no row for that event and policy";
    static const FleetRow none{};
    return none;
}

FleetStudy small(double path_failure, std::vector<FleetEvent> kinds) {
    FleetStudy s;
    s.hosts = 5;
    s.backends = 200;
    s.flows = 40'000;
    s.path_failure = path_failure;
    s.events = 6;
    s.seed = 3;
    s.kinds = std::move(kinds);
    return s;
}

constexpr HealthConsensus kPolicies[] = {HealthConsensus::kLocal, HealthConsensus::kMajority,
                                         HealthConsensus::kAnyDown};

TEST(SimFleet, WithEveryPathUpNoPolicyBreaksAFlowWhenAHostIsLost) {
    for (auto ecmp : {xlb::sim::Ecmp::kResilient, xlb::sim::Ecmp::kModulo}) {
        auto study = small(0.0, {FleetEvent::kHostLoss});
        study.ecmp = ecmp;
        const auto r = run(study);
        for (auto policy : kPolicies) {
            SCOPED_TRACE(xlb::fleet::to_string(policy));
            const auto& loss = row(r, FleetEvent::kHostLoss, policy);
            EXPECT_EQ(loss.trials, 6u);
            EXPECT_GT(loss.moved, 0.1);  // the lost host's flows, at least
            EXPECT_EQ(loss.broken, 0.0);
            EXPECT_EQ(loss.broken_second_chance, 0.0);
            EXPECT_EQ(row(r, std::nullopt, policy).capacity_lost, 0.0);
        }
    }
}

TEST(SimFleet, ModuloEcmpMovesMostFlowsResilientOnlyTheLostHosts) {
    auto study = small(0.0, {FleetEvent::kHostLoss});
    const double resilient = row(run(study), FleetEvent::kHostLoss, HealthConsensus::kLocal).moved;
    study.ecmp = xlb::sim::Ecmp::kModulo;
    const double modulo = row(run(study), FleetEvent::kHostLoss, HealthConsensus::kLocal).moved;
    EXPECT_NEAR(resilient, 1.0 / 5, 0.02);
    EXPECT_GT(modulo, 0.6);
}

// Hosts that cannot reach a backend drop it from their own table under
// `local`, so the lost host's flows to it are re-picked where they land;
// with five hosts a path lost by one or two of them never sways the
// majority, before or after the loss (a tie keeps the fleet's verdict).
TEST(SimFleet, PartialReachabilityBreaksFlowsUnderLocalButNotUnderMajority) {
    const auto r = run(small(0.03, {FleetEvent::kHostLoss}));
    ASSERT_GT(r.failed_paths, 0u);
    const auto& local = row(r, FleetEvent::kHostLoss, HealthConsensus::kLocal);
    const auto& majority = row(r, FleetEvent::kHostLoss, HealthConsensus::kMajority);
    EXPECT_GT(local.broken, 0.0);
    EXPECT_EQ(majority.broken, 0.0);
    EXPECT_EQ(majority.broken_second_chance, 0.0);
    // The backend is down on that host: second chance does not hint it.
    EXPECT_GT(local.broken_second_chance, 0.0);
    EXPECT_LE(local.broken_second_chance, local.broken);
}

// The lab's case: three hosts, three backends, every path up until one host
// loses its path to one backend; then any one host is lost.
TEST(SimFleet, TheLabsCaseOneBadPathThenAHostLost) {
    FleetStudy study = small(0.0, {FleetEvent::kPathFailure, FleetEvent::kPathThenHostLoss});
    study.hosts = 3;
    study.backends = 3;
    study.flows = 9'000;
    study.events = 12;
    const auto r = run(study);
    // The bad path alone: `local` resets that host's flows to that backend,
    // about a ninth of all; majority none; any_down the backend's on every
    // host, about a third.
    const auto& path_local = row(r, FleetEvent::kPathFailure, HealthConsensus::kLocal);
    EXPECT_NEAR(path_local.broken, 1.0 / 9, 0.03);
    EXPECT_EQ(row(r, FleetEvent::kPathFailure, HealthConsensus::kMajority).broken, 0.0);
    EXPECT_NEAR(row(r, FleetEvent::kPathFailure, HealthConsensus::kAnyDown).broken, 1.0 / 3, 0.05);
    const auto& both_local = row(r, FleetEvent::kPathThenHostLoss, HealthConsensus::kLocal);
    const auto& both_majority = row(r, FleetEvent::kPathThenHostLoss, HealthConsensus::kMajority);
    // Under local, the lost host's flows to the backend that land on the host
    // without a path are reset too (unless the lost host is that one).
    EXPECT_GT(both_local.broken, 0.0);
    EXPECT_GT(both_local.max_broken, path_local.broken);
    EXPECT_EQ(both_majority.broken, 0.0);
    EXPECT_EQ(both_majority.broken_second_chance, 0.0);
    EXPECT_EQ(both_majority.capacity_lost, 0.0);
}

TEST(SimFleet, AnyDownGivesUpCapacityForEveryHostsBadPath) {
    FleetStudy study = small(0.02, {FleetEvent::kPathFailure});
    study.hosts = 10;
    study.backends = 2000;
    const auto r = run(study);
    const double local = row(r, std::nullopt, HealthConsensus::kLocal).capacity_lost;
    const double majority = row(r, std::nullopt, HealthConsensus::kMajority).capacity_lost;
    const double any_down = row(r, std::nullopt, HealthConsensus::kAnyDown).capacity_lost;
    EXPECT_NEAR(local, 0.02, 0.006);
    EXPECT_EQ(majority, 0.0);
    // Out when any of 10 hosts fails its path: 1 - 0.98^10.
    EXPECT_NEAR(any_down, 1 - std::pow(0.98, 10), 0.04);
    // A new bad path: local resets that host's flows to the backend, any_down
    // every host's, majority none.
    const auto& path_local = row(r, FleetEvent::kPathFailure, HealthConsensus::kLocal);
    const auto& path_any = row(r, FleetEvent::kPathFailure, HealthConsensus::kAnyDown);
    EXPECT_GT(path_local.broken, 0.0);
    EXPECT_GT(path_any.broken, 3 * path_local.broken);
    EXPECT_EQ(row(r, FleetEvent::kPathFailure, HealthConsensus::kMajority).broken, 0.0);
}

// With a connection table, a backend's failure costs its own flows and no
// others; those are lost, not broken by the balancer.
TEST(SimFleet, ABackendFailureLosesOnlyItsOwnFlows) {
    const auto r = run(small(0.0, {FleetEvent::kBackendFail, FleetEvent::kBackendJoin}));
    for (auto policy : kPolicies) {
        SCOPED_TRACE(xlb::fleet::to_string(policy));
        const auto& fail = row(r, FleetEvent::kBackendFail, policy);
        EXPECT_NEAR(fail.lost, 1.0 / 200, 0.003);
        EXPECT_GT(fail.lost, 0.0);
        EXPECT_EQ(fail.broken, 0.0);
        EXPECT_EQ(row(r, FleetEvent::kBackendJoin, policy).broken, 0.0);
    }
}

// A join changes every table; the flows a host loss then moves find their
// backend in the previous ring.
TEST(SimFleet, SecondChanceRescuesFlowsMovedAfterAJoin) {
    const auto r = run(small(0.0, {FleetEvent::kJoinThenHostLoss}));
    for (auto policy : kPolicies) {
        SCOPED_TRACE(xlb::fleet::to_string(policy));
        const auto& j = row(r, FleetEvent::kJoinThenHostLoss, policy);
        EXPECT_GT(j.broken, 0.0);
        EXPECT_EQ(j.broken_second_chance, 0.0);
        // About 1/(B+1) of the moved flows land on the new backend.
        EXPECT_LT(j.broken, j.moved * 5.0 / 201);
    }
}

TEST(SimFleet, SameSeedSameFiguresOtherSeedOtherFigures) {
    const auto study = small(0.02, {FleetEvent::kHostLoss, FleetEvent::kJoinThenHostLoss});
    const auto a = run(study);
    const auto b = run(study);
    ASSERT_EQ(a.rows.size(), b.rows.size());
    for (std::size_t i = 0; i < a.rows.size(); ++i) {
        EXPECT_EQ(a.rows[i].broken, b.rows[i].broken);
        EXPECT_EQ(a.rows[i].capacity_lost, b.rows[i].capacity_lost);
    }
    auto other = study;
    other.seed = 4;
    const auto c = run(other);
    EXPECT_NE(row(a, FleetEvent::kHostLoss, HealthConsensus::kLocal).broken,
              row(c, FleetEvent::kHostLoss, HealthConsensus::kLocal).broken);
}

struct Outcome {
    int code;
    std::string out;
    std::string err;
};

Outcome cli(std::vector<std::string> args) {
    std::ostringstream out, err;
    const int code = xlb::sim::run_cli(args, out, err);
    return {code, out.str(), err.str()};
}

TEST(SimFleetCli, JsonHasARowPerKindAndPolicy) {
    const auto r =
        cli({"fleet", "--hosts", "4", "--backends", "100", "--flows", "5000", "--events", "2",
             "--kinds", "host-loss,path-failure", "--policies", "local,majority", "--json"});
    ASSERT_EQ(r.code, 0) << r.err;
    const auto doc = nlohmann::json::parse(r.out);
    EXPECT_EQ(doc["command"], "fleet");
    EXPECT_EQ(doc["parameters"]["hosts"], 4);
    EXPECT_EQ(doc["parameters"]["ring_size"], 65537);
    ASSERT_EQ(doc["rows"].size(), 6u);  // steady, host-loss, path-failure x 2 policies
    EXPECT_EQ(doc["rows"][0]["event"], "steady");
    EXPECT_TRUE(doc["rows"][0]["broken_pct"].is_null());
    EXPECT_EQ(doc["rows"][2]["event"], "host-loss");
    EXPECT_EQ(doc["rows"][3]["policy"], "majority");
    EXPECT_EQ(doc["rows"][3]["trials"], 2);
    EXPECT_TRUE(doc["rows"][3]["broken_sc_pct"].is_number());
    EXPECT_TRUE(doc["rows"][3]["capacity_lost_pct"].is_number());
    // Same seed, same bytes.
    EXPECT_EQ(cli({"fleet", "--hosts", "4", "--backends", "100", "--flows", "5000", "--events", "2",
                   "--kinds", "host-loss,path-failure", "--policies", "local,majority", "--json"})
                  .out,
              r.out);
}

TEST(SimFleetCli, RingSizeGrowsWithTheBackendsUnlessGiven) {
    const auto r = cli({"fleet", "--hosts", "2", "--backends", "10000", "--flows", "100",
                        "--events", "1", "--kinds", "path-failure", "--json"});
    ASSERT_EQ(r.code, 0) << r.err;
    // The smallest prime with 10 slots for 10,001 backends.
    EXPECT_EQ(nlohmann::json::parse(r.out)["parameters"]["ring_size"], 100'019);
}

TEST(SimFleetCli, BadArgumentsGetClearErrors) {
    struct Case {
        std::vector<std::string> args;
        std::string message;
    };
    const std::vector<Case> cases{
        {{"fleet", "--hosts", "101"}, "--hosts"},
        {{"fleet", "--hosts", "0"}, "--hosts"},
        {{"fleet", "--backends", "100001"}, "--backends"},
        {{"fleet", "--flows", "0"}, "--flows"},
        {{"fleet", "--path-failure", "1.5"}, "--path-failure"},
        {{"fleet", "--path-failure", "-0.1"}, "--path-failure"},
        {{"fleet", "--events", "0"}, "--events"},
        {{"fleet", "--ecmp", "hashy"}, "unknown ECMP model 'hashy': use resilient or modulo"},
        {{"fleet", "--kinds", "host-loss,meteor"}, "unknown event 'meteor'"},
        {{"fleet", "--policies", "local,quorum"}, "unknown health consensus 'quorum'"},
        {{"fleet", "--hosts", "1", "--kinds", "host-loss"}, "host-loss needs at least 2 hosts"},
        {{"fleet", "--ring-size", "65536"}, "prime"},
        {{"fleet", "--backends", "1000", "--ring-size", "4099"},
         "ring size 4099 for 1000 backends"},
        {{"fleet", "--plot", "x.svg"}, "no curve to draw"},
        {{"fleet", "--csv", "--json"}, "excludes"},
    };
    for (const auto& c : cases) {
        const auto r = cli(c.args);
        SCOPED_TRACE(c.message);
        EXPECT_EQ(r.code, xlb::sim::kExitUsage) << r.err;
        EXPECT_NE(r.err.find(c.message), std::string::npos) << r.err;
        EXPECT_EQ(r.out, "");
    }
}

}  // namespace
