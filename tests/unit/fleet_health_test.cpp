// SPDX-License-Identifier: Apache-2.0
// The fleet's health view on one host: other hosts' votes (their records, as
// the store has them) against this host's own probes (a real HealthLink fed
// probe results at fake times), handed to a real Reconciler over a recording
// fake data plane. No store, no network: the records are given.
#include "xlb/agent/fleet_health.h"

#include <gtest/gtest.h>

#include <chrono>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "recording_data_plane.h"
#include "xlb/agent/health_link.h"
#include "xlb/control/reconciler.h"
#include "xlb/health/policy.h"

namespace xlb::agent {
namespace {

using namespace std::chrono_literals;
using control::Health;
using health::Failure;
using health::ProbeResult;
using health::TimePoint;
using test::RecordingDataPlane;

constexpr Health H = Health::kHealthy;
constexpr Health U = Health::kUnhealthy;
constexpr Health N = Health::kUnknown;

// System clock minus steady clock on the host under test.
constexpr std::chrono::milliseconds kWallOffset{1'765'000'000'000};

config::VipSpec checked_vip(std::uint16_t port = 80) {
    config::VipSpec v;
    v.address = *net::IpAddress::parse("198.51.100.10");
    v.port = port;
    v.ring_size = 1021;
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

fleet::Vote healthy(std::int64_t since_ms = 0, double bias = 1.0) {
    return fleet::Vote{H, since_ms, bias};
}
fleet::Vote unhealthy() { return fleet::Vote{U, std::nullopt, 1.0}; }

// One host's record: its votes on one VIP's backends, in the spec's order.
fleet::HostVotes record(const config::VipSpec& vip, std::vector<fleet::Vote> votes) {
    fleet::HostVotes r;
    for (std::size_t i = 0; i < votes.size(); ++i)
        r.vips[vip.key()][vip.backends[i].address.to_string()] = votes[i];
    return r;
}
fleet::HostVotes all_healthy(const config::VipSpec& vip) {
    return record(vip, {healthy(), healthy(), healthy()});
}

// One LB host: its own probes, reconciler and fleet view.
struct Host {
    Host(std::string name, std::chrono::milliseconds wall_offset)
        : view(std::move(name), wall_offset) {}

    void start(const std::vector<config::VipSpec>& specs, TimePoint now) {
        vips = specs;
        reconciler.set_vips(vips);
        ASSERT_TRUE(reconciler.reconcile(control::Clock::now()));
        link.set_vips(vips, now, reconciler);
        link.hold_vips(FleetHealthView::consensus_vips(vips), now, reconciler);
    }
    // One probe round of one VIP on this host: each backend passes or fails.
    void round(const config::VipSpec& vip, const std::vector<bool>& passing, TimePoint now) {
        for (std::size_t i = 0; i < passing.size(); ++i) {
            ProbeResult r;
            r.key = {vip.key(), vip.backends[i].address};
            r.failure = passing[i] ? Failure::kNone : Failure::kRefused;
            r.detail = passing[i] ? "connected" : "connection refused";
            r.started = now;
            r.finished = now + 2ms;
            link.apply(r, now, reconciler);
        }
    }
    std::optional<TimePoint> apply(TimePoint now) {
        return view.apply(vips, link, now, reconciler);
    }
    control::BackendStatus backend(const config::VipSpec& vip, std::size_t i) const {
        return reconciler.vip_status(vip.key())->backends.at(i);
    }
    Health own(const config::VipSpec& vip, std::size_t i, TimePoint now) const {
        return view.own_vote(link, vip.key(), vip.backends[i].address, now).health;
    }

    RecordingDataPlane dp;
    control::Reconciler reconciler{dp, control::Reconciler::Options{16, 64}};
    HealthLink link{42};
    FleetHealthView view;
    std::vector<config::VipSpec> vips;
};

class FleetHealthViewTest : public ::testing::Test {
protected:
    // Two probe rounds: enough for a verdict (thresholds 2).
    void verdicts(const config::VipSpec& vip, const std::vector<bool>& passing) {
        for (int i = 0; i < 2; ++i) {
            lb1.round(vip, passing, now);
            now += 1s;
        }
    }

    TimePoint now = TimePoint{} + 1000s;
    Host lb1{"lb1", kWallOffset};
};

// The lab's case: this host cannot reach 10.0.0.1, the two others can. The
// table keeps it in; the host says it disagrees.
TEST_F(FleetHealthViewTest, MajorityKeepsInABackendOnlyThisHostCannotReach) {
    const config::VipSpec web = checked_vip();
    lb1.start({web}, now);
    verdicts(web, {false, true, true});
    ASSERT_EQ(lb1.own(web, 0, now), U);
    ASSERT_EQ(lb1.own(web, 1, now), H);
    // The VIP is held: this host's own verdicts do not reach the table.
    EXPECT_EQ(lb1.backend(web, 0).health, N);

    lb1.view.set_peers({{"lb1", record(web, {unhealthy(), healthy(), healthy()})},
                        {"lb2", all_healthy(web)},
                        {"lb3", all_healthy(web)}});
    ASSERT_TRUE(lb1.view.ready());
    lb1.apply(now);
    EXPECT_EQ(lb1.backend(web, 0).health, H);
    EXPECT_EQ(lb1.backend(web, 0).local_health, U);
    EXPECT_EQ(lb1.backend(web, 1).health, H);
    EXPECT_EQ(lb1.backend(web, 1).local_health, H);
    EXPECT_EQ(lb1.view.disagreements(),
              (std::vector<HealthDisagreement>{{web.key(), "10.0.0.1", U, H}}));
    EXPECT_EQ(lb1.view.falling_back(), 0u);
    EXPECT_EQ(lb1.view.other_hosts(), (std::vector<std::string>{"lb2", "lb3"}));
    ASSERT_TRUE(lb1.reconciler.reconcile(control::Clock::now()));
    EXPECT_TRUE(lb1.backend(web, 0).in_table);

    // A second host loses it too: two of three, out everywhere; this host
    // agrees again.
    lb1.view.set_peers({{"lb1", record(web, {unhealthy(), healthy(), healthy()})},
                        {"lb2", record(web, {unhealthy(), healthy(), healthy()})},
                        {"lb3", all_healthy(web)}});
    lb1.apply(now);
    EXPECT_EQ(lb1.backend(web, 0).health, U);
    EXPECT_TRUE(lb1.view.disagreements().empty());
}

TEST_F(FleetHealthViewTest, AnyDownTakesItOutWhenOneHostCannotReachIt) {
    config::VipSpec web = checked_vip();
    web.health_consensus = config::HealthConsensus::kAnyDown;
    lb1.start({web}, now);
    verdicts(web, {true, true, true});
    lb1.view.set_peers({{"lb1", all_healthy(web)},
                        {"lb2", record(web, {healthy(), unhealthy(), healthy()})},
                        {"lb3", all_healthy(web)}});
    lb1.apply(now);
    EXPECT_EQ(lb1.backend(web, 0).health, H);
    EXPECT_EQ(lb1.backend(web, 1).health, U);
    EXPECT_EQ(lb1.backend(web, 1).local_health, H);
    EXPECT_EQ(lb1.view.disagreements(),
              (std::vector<HealthDisagreement>{{web.key(), "10.0.0.2", H, U}}));
}

TEST_F(FleetHealthViewTest, ALocalVipFollowsThisHostsOwnVerdicts) {
    const config::VipSpec web = checked_vip(80);
    config::VipSpec api = checked_vip(81);
    api.health_consensus = config::HealthConsensus::kLocal;
    EXPECT_EQ(FleetHealthView::consensus_vips({web, api}), (std::set<std::string>{web.key()}));
    lb1.start({web, api}, now);
    verdicts(web, {true, true, true});
    verdicts(api, {true, true, true});
    // Every other host says every backend of both VIPs is down.
    fleet::HostVotes down = record(web, {unhealthy(), unhealthy(), unhealthy()});
    down.vips[api.key()] = record(api, {unhealthy(), unhealthy(), unhealthy()}).vips[api.key()];
    fleet::HostVotes own = all_healthy(web);
    own.vips[api.key()] = all_healthy(api).vips[api.key()];
    lb1.view.set_peers({{"lb1", own}, {"lb2", down}, {"lb3", down}});
    lb1.apply(now);
    for (std::size_t i = 0; i < 3; ++i) {
        EXPECT_EQ(lb1.backend(web, i).health, U) << i;
        EXPECT_EQ(lb1.backend(api, i).health, H) << i;
        EXPECT_EQ(lb1.backend(api, i).local_health, H) << i;
    }
    for (const HealthDisagreement& d : lb1.view.disagreements()) EXPECT_EQ(d.vip, web.key());
    EXPECT_EQ(lb1.view.disagreements().size(), 3u);
}

TEST_F(FleetHealthViewTest, StoreUnreachableKeepsTheFleetsVerdictUntilTheHostsOwnChanges) {
    const config::VipSpec web = checked_vip();
    lb1.start({web}, now);
    verdicts(web, {false, true, true});
    const std::map<std::string, fleet::HostVotes> peers{
        {"lb1", record(web, {unhealthy(), healthy(), healthy()})},
        {"lb2", all_healthy(web)},
        {"lb3", all_healthy(web)}};
    lb1.view.set_peers(peers);
    lb1.apply(now);
    ASSERT_EQ(lb1.backend(web, 0).health, H);

    lb1.view.set_store_reachable(false);
    EXPECT_FALSE(lb1.view.ready());
    lb1.apply(now);
    // Nothing changed on this host: the fleet's last verdicts stay, the one
    // this host disagrees with included.
    EXPECT_EQ(lb1.backend(web, 0).health, H);
    EXPECT_EQ(lb1.backend(web, 1).health, H);
    EXPECT_EQ(lb1.view.falling_back(), 0u);

    // 10.0.0.2 fails on this host: it follows its own verdict for that one.
    verdicts(web, {false, false, true});
    ASSERT_EQ(lb1.own(web, 1, now), U);
    lb1.apply(now);
    EXPECT_EQ(lb1.backend(web, 0).health, H);
    EXPECT_EQ(lb1.backend(web, 1).health, U);
    EXPECT_EQ(lb1.backend(web, 2).health, H);
    EXPECT_EQ(lb1.view.falling_back(), 1u);
    // And keeps following it while the store stays away.
    verdicts(web, {false, false, true});
    lb1.apply(now);
    EXPECT_EQ(lb1.backend(web, 1).health, U);
    EXPECT_EQ(lb1.view.falling_back(), 1u);

    // The store is back and the other hosts still reach it: the fleet's
    // view again.
    lb1.view.set_store_reachable(true);
    lb1.view.set_peers(peers);
    lb1.apply(now);
    EXPECT_EQ(lb1.backend(web, 1).health, H);
    EXPECT_EQ(lb1.backend(web, 1).local_health, U);
    EXPECT_EQ(lb1.view.falling_back(), 0u);
}

TEST_F(FleetHealthViewTest, NotReadyUntilThisHostsOwnRecordIsAmongThePeers) {
    const config::VipSpec web = checked_vip();
    lb1.start({web}, now);
    verdicts(web, {false, true, true});
    EXPECT_FALSE(lb1.view.ready()) << "no records at all";
    lb1.view.set_peers({{"lb2", all_healthy(web)}, {"lb3", all_healthy(web)}});
    EXPECT_FALSE(lb1.view.ready());
    // Without its own record the view is not the fleet's: the host follows
    // its own verdicts (nothing was decided before) and says so.
    lb1.apply(now);
    EXPECT_EQ(lb1.backend(web, 0).health, U);
    EXPECT_EQ(lb1.view.falling_back(), 3u);

    lb1.view.set_peers({{"lb1", record(web, {unhealthy(), healthy(), healthy()})},
                        {"lb2", all_healthy(web)},
                        {"lb3", all_healthy(web)}});
    EXPECT_TRUE(lb1.view.ready());
    lb1.apply(now);
    EXPECT_EQ(lb1.backend(web, 0).health, H);
    EXPECT_EQ(lb1.view.falling_back(), 0u);
}

// Slow start counts from when the fleet brought the backend in (the second
// of three hosts to turn healthy), on the wall clock, whatever this host's
// own ramp.
TEST_F(FleetHealthViewTest, SlowStartStepsComeFromTheFleetsClock) {
    const config::VipSpec web = checked_vip();
    lb1.start({web}, now);
    verdicts(web, {true, true, true});  // this host's starting pool: no ramp
    const std::int64_t t = lb1.view.wall_ms(now);
    EXPECT_EQ(
        t, std::chrono::duration_cast<std::chrono::milliseconds>(now.time_since_epoch()).count() +
               kWallOffset.count());
    lb1.view.set_peers({{"lb1", record(web, {healthy(t - 5'000), healthy(), healthy()})},
                        {"lb2", record(web, {healthy(t - 3'500), healthy(), healthy()})},
                        {"lb3", record(web, {healthy(t - 1'000), healthy(), healthy()})}});
    const std::optional<TimePoint> next = lb1.apply(now);

    const double factor = health::slow_start_factor(web.slow_start, 3'500ms);
    ASSERT_GT(factor, web.slow_start.floor);
    ASSERT_LT(factor, 1.0);
    EXPECT_DOUBLE_EQ(lb1.backend(web, 0).weight_factor, factor);
    EXPECT_EQ(lb1.backend(web, 1).weight_factor, 1.0) << "in from the start: no ramp";
    EXPECT_EQ(lb1.view.own_vote(lb1.link, web.key(), web.backends[0].address, now).healthy_since_ms,
              0)
        << "this host's own verdict has no ramp";
    const auto step = health::slow_start_next_step(web.slow_start, 3'500ms);
    ASSERT_TRUE(step);
    ASSERT_TRUE(next);
    EXPECT_EQ(*next, now + (*step - 3'500ms));
    EXPECT_GT(*next, now);

    // At that step the factor moves up, as it does on every host.
    const double later = health::slow_start_factor(web.slow_start, *step);
    EXPECT_GT(later, factor);
    lb1.apply(*next);
    EXPECT_DOUBLE_EQ(lb1.backend(web, 0).weight_factor, later);

    // Past the window: full weight, no step left.
    EXPECT_EQ(lb1.apply(now + 10s), std::nullopt);
    EXPECT_EQ(lb1.backend(web, 0).weight_factor, 1.0);
}

// Two hosts whose steady clocks differ (different wall offsets) read the
// same records at the same wall time: the same observations, the same next
// step on the wall clock and the same table.
TEST(FleetHealthViewHosts, SameRecordsAtTheSameWallTimeGiveTheSameTable) {
    const config::VipSpec web = checked_vip();
    constexpr std::chrono::milliseconds kOtherOffset = kWallOffset + 1'234'567ms;
    const TimePoint now_a = TimePoint{} + 5000s;
    const TimePoint now_b = now_a + kWallOffset - kOtherOffset;
    Host a{"lb1", kWallOffset};
    Host b{"lb2", kOtherOffset};
    a.start({web}, now_a);
    b.start({web}, now_b);
    // Their own probes differ too: lb1 cannot reach 10.0.0.2, lb2 has no
    // verdicts yet.
    for (int i = 0; i < 2; ++i) a.round(web, {true, false, true}, now_a + i * 1s);
    const TimePoint at_a = now_a + 2s;
    const TimePoint at_b = now_b + 2s;
    const std::int64_t t = a.view.wall_ms(at_a);
    ASSERT_EQ(t, b.view.wall_ms(at_b));
    const std::map<std::string, fleet::HostVotes> peers{
        {"lb1", record(web, {healthy(t - 2'500), unhealthy(), healthy(0, 0.5)})},
        {"lb2", record(web, {healthy(t - 4'000), healthy(t - 9'000), healthy(0, 0.5)})},
        {"lb3", record(web, {unhealthy(), healthy(t - 8'000), healthy()})}};
    a.view.set_peers(peers);
    b.view.set_peers(peers);
    const auto next_a = a.apply(at_a);
    const auto next_b = b.apply(at_b);
    ASSERT_TRUE(next_a && next_b);
    EXPECT_EQ(a.view.wall_ms(*next_a), b.view.wall_ms(*next_b));
    for (std::size_t i = 0; i < web.backends.size(); ++i) {
        EXPECT_EQ(a.backend(web, i).health, b.backend(web, i).health) << i;
        EXPECT_EQ(a.backend(web, i).weight_factor, b.backend(web, i).weight_factor) << i;
    }
    // Not trivially equal: a ramp, a rate-limit bias and a disagreement.
    EXPECT_LT(a.backend(web, 0).weight_factor, 1.0);
    EXPECT_EQ(a.backend(web, 2).weight_factor, 0.5);
    EXPECT_EQ(a.backend(web, 1).local_health, U);
    EXPECT_EQ(b.backend(web, 1).local_health, N);
    ASSERT_TRUE(a.reconciler.reconcile(control::Clock::now()));
    ASSERT_TRUE(b.reconciler.reconcile(control::Clock::now()));
    EXPECT_EQ(a.reconciler.vip_status(web.key())->checksum,
              b.reconciler.vip_status(web.key())->checksum);

    // The same records a second later on the wall clock (one slow-start
    // step on): a different table, so the agreement above is the clock's.
    Host c{"lb3", kWallOffset};
    c.start({web}, now_a);
    c.view.set_peers(peers);
    c.apply(at_a + 1s);
    EXPECT_NE(c.backend(web, 0).weight_factor, a.backend(web, 0).weight_factor);
}

}  // namespace
}  // namespace xlb::agent
