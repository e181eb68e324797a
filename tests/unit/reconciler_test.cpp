// SPDX-License-Identifier: Apache-2.0
// The reconciler against a recording fake data plane: effective weights,
// order of map writes, epochs and checksums, coalescing.
#include "xlb/control/reconciler.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <thread>

#include "manual_loop_clock.h"
#include "xlb/control/effective.h"
#include "xlb/control/loop.h"

namespace xlb::control {
namespace {

using config::AdminState;
using config::BackendSpec;
using config::VipSpec;

net::IpAddress ip(const char* s) { return *net::IpAddress::parse(s); }

// Records every write, in order, and keeps the resulting map contents.
class FakeDataPlane : public DataPlane {
public:
    xlb::Result<void> put_vip(const xlb_vip_key& key, const xlb_vip_value& value) override {
        log.push_back("vip+ " + std::to_string(value.vip_id));
        vips[key.port] = value;
        return {};
    }
    xlb::Result<void> remove_vip(const xlb_vip_key& key) override {
        log.push_back("vip- " + std::to_string(vips[key.port].vip_id));
        vips.erase(key.port);
        return {};
    }
    xlb::Result<void> put_backend(std::uint32_t id, const xlb_backend& be) override {
        if (fail_put_backend) return xlb::fail(ENOMEM, "update backend " + std::to_string(id));
        log.push_back("backend " + std::to_string(id) + " gen " + std::to_string(be.generation));
        backends[id] = be;
        return {};
    }
    xlb::Result<PublishTiming> publish(const std::vector<RingUpdate>& updates) override {
        ++publish_attempts;
        if (fail_publish) return xlb::fail(EIO, "publish");
        if (publish_delay.count() > 0) std::this_thread::sleep_for(publish_delay);
        ++publishes;
        for (const RingUpdate& r : updates) {
            // a ring may only name backends whose entries exist and are current
            for (std::uint32_t id : r.backend_ids)
                if (!backends.contains(id) || backends[id].generation == 0)
                    ring_names_missing_backend = true;
            log.push_back("ring " + std::to_string(r.vip_id));
            if (r.previous == PreviousRing::kLiveRing && rings.contains(r.vip_id))
                previous_rings[r.vip_id] = rings[r.vip_id];
            else if (r.previous != PreviousRing::kUnchanged)
                previous_rings.erase(r.vip_id);
            rings[r.vip_id] = r.backend_ids;
        }
        auto now = Clock::now();
        return PublishTiming{now, now};
    }
    xlb::Result<void> remove_ring(std::uint32_t vip_id) override {
        log.push_back("ring- " + std::to_string(vip_id));
        rings.erase(vip_id);
        previous_rings.erase(vip_id);
        return {};
    }
    xlb::Result<void> remove_previous_ring(std::uint32_t vip_id) override {
        if (previous_rings.erase(vip_id) > 0) log.push_back("previous- " + std::to_string(vip_id));
        return {};
    }

    xlb::Result<std::optional<std::vector<std::uint32_t>>> live_ring(
        std::uint32_t vip_id) override {
        if (!rings.contains(vip_id)) return std::optional<std::vector<std::uint32_t>>{};
        return std::optional<std::vector<std::uint32_t>>{rings[vip_id]};
    }

    std::set<std::uint32_t> ids_in_ring(std::uint32_t vip_id) {
        return {rings[vip_id].begin(), rings[vip_id].end()};
    }
    // Whether `first` was written and `then` written after it. An entry that
    // was never written fails the check: an ordering is only shown by two
    // writes that both happened.
    testing::AssertionResult written_in_order(const std::string& first,
                                              const std::string& then) const {
        auto a = std::find(log.begin(), log.end(), first);
        auto b = std::find(log.begin(), log.end(), then);
        if (a == log.end())
            return testing::AssertionFailure() << '"' << first << "\" never written";
        if (b == log.end()) return testing::AssertionFailure() << '"' << then << "\" never written";
        if (a < b) return testing::AssertionSuccess();
        return testing::AssertionFailure() << '"' << then << "\" written before \"" << first << '"';
    }

    std::vector<std::string> log;
    std::map<std::uint16_t, xlb_vip_value> vips;  // by port: tests use distinct ports
    std::map<std::uint32_t, xlb_backend> backends;
    std::map<std::uint32_t, std::vector<std::uint32_t>> rings;
    std::map<std::uint32_t, std::vector<std::uint32_t>> previous_rings;
    int publishes = 0;
    std::atomic<int> publish_attempts{0};
    std::atomic<bool> fail_publish{false};
    std::atomic<bool> fail_put_backend{false};
    bool ring_names_missing_backend = false;
    std::chrono::milliseconds publish_delay{0};
};

VipSpec web_vip(std::size_t backends = 3, std::uint16_t port = 80) {
    VipSpec v;
    v.address = ip("198.51.100.10");
    v.port = port;
    v.ring_size = 251;
    for (std::size_t i = 0; i < backends; ++i) {
        BackendSpec b;
        b.address = net::IpAddress::v4(203, 0, 113, static_cast<std::uint8_t>(11 + i));
        v.backends.push_back(b);
    }
    return v;
}

// The ordering check itself: comparing positions in the log passed when the
// later write never happened (a missing entry sat "after" everything).
TEST(FakeDataPlaneTest, OrderingCheckFailsWhenAWriteNeverHappened) {
    FakeDataPlane dp;
    dp.log = {"ring 1"};
    EXPECT_FALSE(dp.written_in_order("ring 1", "vip+ 1"));
    EXPECT_FALSE(dp.written_in_order("vip+ 1", "ring 1"));
    dp.log.push_back("vip+ 1");
    EXPECT_TRUE(dp.written_in_order("ring 1", "vip+ 1"));
    EXPECT_FALSE(dp.written_in_order("vip+ 1", "ring 1"));
}

class ReconcilerTest : public ::testing::Test {
protected:
    FakeDataPlane dp;
    Reconciler rec{dp, {16, 64}};

    void reconcile() {
        auto r = rec.reconcile(Clock::now());
        ASSERT_TRUE(r) << r.error().message();
    }
    std::uint32_t id_of(const VipSpec& v, std::size_t i) {
        return rec.registry().find_backend(v.key(), v.backends[i].address)->id;
    }
    std::uint32_t vip_id(const VipSpec& v) { return *rec.registry().find_vip(v.key()); }
};

TEST(EffectiveWeights, AdministrativeStates) {
    VipSpec v = web_vip(3);
    v.backends[1].state = AdminState::kDrain;
    v.backends[2].state = AdminState::kDisabled;
    std::vector<ObservedBackend> obs(3, {Health::kHealthy, 1.0});
    VipPlan p = plan_vip(v, obs, false);
    EXPECT_TRUE(p.backends[0].in_table);
    EXPECT_EQ(p.backends[0].effective_weight, config::kDefaultWeight * kWeightScale);
    EXPECT_FALSE(p.backends[1].in_table);
    EXPECT_TRUE(p.backends[1].live) << "a drained backend keeps its flows";
    EXPECT_FALSE(p.backends[2].in_table);
    EXPECT_FALSE(p.backends[2].live) << "a disabled backend is gone";
    EXPECT_FALSE(p.in_panic());
}

TEST(EffectiveWeights, WeightFactorScalesAndNeverRoundsToZero) {
    VipSpec v = web_vip(2);
    v.backends[0].weight = 1;
    std::vector<ObservedBackend> obs{{Health::kHealthy, 0.1}, {Health::kHealthy, 0.5}};
    VipPlan p = plan_vip(v, obs, false);
    EXPECT_EQ(p.backends[0].effective_weight, 10u);
    EXPECT_EQ(p.backends[1].effective_weight, config::kDefaultWeight * kWeightScale / 2);
    obs[0].weight_factor = 0.0001;
    EXPECT_EQ(plan_vip(v, obs, false).backends[0].effective_weight, 1u);
}

TEST(EffectiveWeights, UnhealthyPolicyDecidesWhetherFlowsMove) {
    VipSpec v = web_vip(4);
    v.panic_threshold = 0.5;
    std::vector<ObservedBackend> obs(4, {Health::kHealthy, 1.0});
    obs[3].health = Health::kUnhealthy;
    VipPlan p = plan_vip(v, obs, false);
    EXPECT_FALSE(p.backends[3].in_table);
    EXPECT_FALSE(p.backends[3].live);
    v.on_unhealthy = config::UnhealthyPolicy::kKeep;
    p = plan_vip(v, obs, false);
    EXPECT_FALSE(p.backends[3].in_table);
    EXPECT_TRUE(p.backends[3].live);
}

TEST(EffectiveWeights, PanicAtTheBoundary) {
    VipSpec v = web_vip(4);
    std::vector<ObservedBackend> obs(4, {Health::kHealthy, 1.0});
    obs[2].health = obs[3].health = Health::kUnhealthy;
    v.panic_threshold = 0.5;  // healthy share exactly 0.5: not below
    EXPECT_FALSE(plan_vip(v, obs, false).in_panic());
    v.panic_threshold = 0.5001;  // just above the share: panic, everyone in
    VipPlan p = plan_vip(v, obs, false);
    EXPECT_EQ(p.panic, PanicReason::kBelowThreshold);
    EXPECT_TRUE(std::all_of(p.backends.begin(), p.backends.end(),
                            [](const PlannedBackend& b) { return b.in_table && b.live; }));
    v.panic_threshold = 0.4999;
    EXPECT_FALSE(plan_vip(v, obs, false).in_panic());
    v.panic_threshold = 0;  // never panic, even with nothing healthy
    for (auto& o : obs) o.health = Health::kUnhealthy;
    p = plan_vip(v, obs, false);
    EXPECT_FALSE(p.in_panic());
    EXPECT_TRUE(std::none_of(p.backends.begin(), p.backends.end(),
                             [](const PlannedBackend& b) { return b.in_table; }));
}

TEST(EffectiveWeights, StartupIsPanicUntilEveryVerdictIsIn) {
    VipSpec v = web_vip(3);
    std::vector<ObservedBackend> obs(3);
    obs[0].health = Health::kUnhealthy;
    VipPlan p = plan_vip(v, obs, true);
    EXPECT_EQ(p.panic, PanicReason::kAwaitingFirstVerdicts);
    EXPECT_TRUE(p.backends[0].in_table && p.backends[1].in_table && p.backends[2].in_table);
    // after start-up, a backend without a verdict waits outside the table
    obs[0].health = Health::kHealthy;
    obs[1].health = Health::kHealthy;
    p = plan_vip(v, obs, false);
    EXPECT_FALSE(p.in_panic());
    EXPECT_FALSE(p.backends[2].in_table);
}

// The reconciler passes the addresses already formatted; the plan must be
// the one plan_vip() makes from the spec alone, hash keys included.
TEST(EffectiveWeights, GivenAddressTextsGiveTheSamePlan) {
    VipSpec v = web_vip(4);
    v.backends[1].hash_key = "web-b";
    v.backends[2].state = AdminState::kDisabled;
    v.backends[3].weight = 7;
    std::vector<ObservedBackend> obs(4, {Health::kHealthy, 0.5});
    std::vector<std::string> texts;
    for (const BackendSpec& b : v.backends) texts.push_back(b.address.to_string());
    const VipPlan expected = plan_vip(v, obs, false);
    const VipPlan given = plan_vip(v, obs, false, texts);
    ASSERT_EQ(given.backends.size(), expected.backends.size());
    for (std::size_t i = 0; i < given.backends.size(); ++i) {
        EXPECT_EQ(given.backends[i].identity, v.backends[i].identity());
        EXPECT_EQ(given.backends[i].identity, expected.backends[i].identity);
        EXPECT_EQ(given.backends[i].effective_weight, expected.backends[i].effective_weight);
        EXPECT_EQ(given.backends[i].in_table, expected.backends[i].in_table);
        EXPECT_EQ(given.backends[i].live, expected.backends[i].live);
    }
    EXPECT_EQ(given.panic, expected.panic);
    EXPECT_EQ(given.healthy_share, expected.healthy_share);
}

// Only the in-table members, in order, with their weights, make a table.
TEST(EffectiveWeights, SameTableInputsComparesInTableMembersOnly) {
    auto member = [](std::string identity, std::uint32_t weight, bool in_table) {
        PlannedBackend p;
        p.identity = std::move(identity);
        p.effective_weight = weight;
        p.in_table = in_table;
        return p;
    };
    VipPlan a, b;
    a.backends = {member("x", 10, true), member("gone", 0, false), member("y", 20, true)};
    b.backends = {member("x", 10, true), member("y", 20, true), member("out", 5, false)};
    EXPECT_TRUE(a.same_table_inputs(b));
    EXPECT_TRUE(b.same_table_inputs(a));
    b.backends[1].effective_weight = 21;
    EXPECT_FALSE(a.same_table_inputs(b));
    b.backends[1].effective_weight = 20;
    b.backends[1].identity = "z";
    EXPECT_FALSE(a.same_table_inputs(b));
    b.backends[1].identity = "y";
    b.backends[2].in_table = true;  // one member more
    EXPECT_FALSE(a.same_table_inputs(b));
    EXPECT_FALSE(b.same_table_inputs(a));
    b.backends[2].in_table = false;
    std::swap(b.backends[0], b.backends[1]);  // the order is part of the input
    EXPECT_FALSE(a.same_table_inputs(b));
    EXPECT_TRUE(VipPlan{}.same_table_inputs(VipPlan{}));
    EXPECT_FALSE(VipPlan{}.same_table_inputs(a));
}

TEST_F(ReconcilerTest, PublishesEveryVipWithEntriesRingThenVip) {
    VipSpec v = web_vip(3);
    rec.set_vips({v});
    EXPECT_TRUE(rec.has_pending_work(Clock::now()));
    reconcile();
    EXPECT_FALSE(rec.has_pending_work(Clock::now()));
    EXPECT_TRUE(rec.all_published());
    EXPECT_FALSE(dp.ring_names_missing_backend);
    EXPECT_EQ(dp.ids_in_ring(vip_id(v)),
              (std::set<std::uint32_t>{id_of(v, 0), id_of(v, 1), id_of(v, 2)}));
    EXPECT_EQ(dp.rings[vip_id(v)].size(), 251u);
    // ring live before the VIP entry sends packets to it
    EXPECT_TRUE(dp.written_in_order("ring " + std::to_string(vip_id(v)),
                                    "vip+ " + std::to_string(vip_id(v))));
    auto s = rec.vip_status(v.key());
    ASSERT_TRUE(s);
    EXPECT_EQ(s->epoch, 1u);
    EXPECT_NE(s->checksum, 0u);
    std::uint32_t slots = 0;
    for (const auto& b : s->backends) slots += b.slots;
    EXPECT_EQ(slots, 251u);
}

TEST_F(ReconcilerTest, DrainKeepsTheBackendOutOfNewTablesOnly) {
    VipSpec v = web_vip(3);
    rec.set_vips({v});
    reconcile();
    const std::uint32_t drained = id_of(v, 1);
    const std::uint32_t gen = dp.backends[drained].generation;
    v.backends[1].state = AdminState::kDrain;
    rec.set_vips({v});
    reconcile();
    EXPECT_FALSE(dp.ids_in_ring(vip_id(v)).contains(drained));
    EXPECT_EQ(dp.backends[drained].generation, gen) << "established flows must stay";
    EXPECT_EQ(rec.vip_status(v.key())->epoch, 2u);
}

TEST_F(ReconcilerTest, RemovedBackendLeavesTheRingBeforeItsFlowsMove) {
    VipSpec v = web_vip(3);
    rec.set_vips({v});
    reconcile();
    const std::uint32_t gone = id_of(v, 2);
    const std::uint32_t gen = dp.backends[gone].generation;
    dp.log.clear();
    v.backends.pop_back();
    rec.set_vips({v});
    reconcile();
    EXPECT_FALSE(dp.ids_in_ring(vip_id(v)).contains(gone));
    EXPECT_GT(dp.backends[gone].generation, gen);
    EXPECT_TRUE(dp.written_in_order("ring " + std::to_string(vip_id(v)),
                                    "backend " + std::to_string(gone) + " gen " +
                                        std::to_string(dp.backends[gone].generation)));
    EXPECT_FALSE(rec.registry().find_backend(v.key(), ip("203.0.113.13")));
    // the id comes back with a generation no recorded flow can hold
    v.backends.push_back(BackendSpec{ip("203.0.113.99")});
    rec.set_vips({v});
    reconcile();
    EXPECT_EQ(id_of(v, 2), gone);
    EXPECT_GT(dp.backends[gone].generation, gen + 1);
}

// plan() remembers each backend's id by its place in the spec; the ring must
// still name the right, current entries when backends move, leave and come
// back to the same place.
TEST_F(ReconcilerTest, RingNamesTheCurrentIdsWhenBackendsMoveLeaveAndReturn) {
    VipSpec v = web_vip(4);
    rec.set_vips({v});
    reconcile();
    auto ring_matches_registry = [&] {
        std::set<std::uint32_t> ids;
        for (std::size_t i = 0; i < v.backends.size(); ++i)
            if (v.backends[i].state == AdminState::kActive) ids.insert(id_of(v, i));
        return dp.ids_in_ring(vip_id(v)) == ids;
    };
    // two backends swap places
    std::swap(v.backends[0], v.backends[3]);
    v.backends[1].weight = 50;
    rec.set_vips({v});
    reconcile();
    EXPECT_TRUE(ring_matches_registry());
    // one leaves; its id is released and its entry made stale
    const BackendSpec left = v.backends[2];
    const std::uint32_t left_id = id_of(v, 2);
    v.backends.erase(v.backends.begin() + 2);
    rec.set_vips({v});
    reconcile();
    EXPECT_FALSE(rec.registry().find_backend(v.key(), left.address));
    EXPECT_TRUE(ring_matches_registry());
    // it comes back to the same place: a fresh entry is written before the
    // ring names it again
    const std::uint32_t stale_generation = dp.backends[left_id].generation;
    dp.log.clear();
    v.backends.insert(v.backends.begin() + 2, left);
    rec.set_vips({v});
    reconcile();
    const std::uint32_t back_id = id_of(v, 2);
    EXPECT_GT(dp.backends[back_id].generation, stale_generation);
    EXPECT_TRUE(dp.written_in_order("backend " + std::to_string(back_id) + " gen " +
                                        std::to_string(dp.backends[back_id].generation),
                                    "ring " + std::to_string(vip_id(v))));
    EXPECT_TRUE(ring_matches_registry());
    // disabled and enabled again in place: same story
    v.backends[1].state = AdminState::kDisabled;
    rec.set_vips({v});
    reconcile();
    EXPECT_FALSE(rec.registry().find_backend(v.key(), v.backends[1].address));
    v.backends[1].state = AdminState::kActive;
    rec.set_vips({v});
    reconcile();
    EXPECT_TRUE(ring_matches_registry());
    EXPECT_FALSE(dp.ring_names_missing_backend);
    for (std::size_t i = 0; i < v.backends.size(); ++i) {
        const xlb_backend& entry = dp.backends[id_of(v, i)];
        EXPECT_EQ(net::IpAddress::from_words(entry.addr, entry.family), v.backends[i].address);
        EXPECT_EQ(entry.generation,
                  rec.registry().find_backend(v.key(), v.backends[i].address)->generation);
    }
}

// A dry run predicts exactly what the publish of the same change then does,
// slot by slot, and changes nothing itself.
TEST_F(ReconcilerTest, PredictionEqualsThePublishedChange) {
    VipSpec v = web_vip(4);
    v.ring_size = 1009;
    rec.set_vips({v});
    reconcile();
    std::vector<VipSpec> edits;
    {
        VipSpec add = v;  // a fifth backend
        add.backends.push_back(BackendSpec{ip("203.0.113.50")});
        edits.push_back(add);
        VipSpec del = v;  // the second removed: later ones shift in the list
        del.backends.erase(del.backends.begin() + 1);
        edits.push_back(del);
        VipSpec weight = v;
        weight.backends[2].weight = 300;
        edits.push_back(weight);
        VipSpec drain = v;
        drain.backends[0].state = AdminState::kDrain;
        edits.push_back(drain);
    }
    for (const VipSpec& next : edits) {
        const auto before_ring = dp.rings.at(vip_id(v));
        const int publishes = dp.publishes;
        auto predicted = rec.predict(next);
        ASSERT_TRUE(predicted) << predicted.error();
        EXPECT_EQ(dp.publishes, publishes) << "a dry run publishes nothing";
        EXPECT_EQ(rec.vips().front(), v) << "a dry run changes nothing";

        // owner addresses per slot, from the ids each table used (a removed
        // backend's id is released by the publish)
        auto ids = [&](const VipSpec& spec) {
            std::map<std::uint32_t, net::IpAddress> address_of_id;
            for (const BackendSpec& b : spec.backends)
                if (auto ref = rec.registry().find_backend(spec.key(), b.address))
                    address_of_id[ref->id] = b.address;
            return address_of_id;
        };
        const auto before_ids = ids(v);
        rec.set_vips({next});
        reconcile();
        const auto after_ring = dp.rings.at(vip_id(next));
        const auto after_ids = ids(next);
        ASSERT_EQ(after_ring.size(), before_ring.size());
        std::uint32_t moved = 0;
        std::map<net::IpAddress, std::pair<std::uint32_t, std::uint32_t>> slots;
        for (std::size_t slot = 0; slot < after_ring.size(); ++slot) {
            const net::IpAddress was = before_ids.at(before_ring[slot]);
            const net::IpAddress now = after_ids.at(after_ring[slot]);
            moved += was != now;
            slots[was].first += 1;
            slots[now].second += 1;
        }
        EXPECT_EQ(predicted->slots_moved, moved);
        EXPECT_GT(predicted->slots_moved, 0u);
        EXPECT_EQ(predicted->ring_size, 1009u);
        EXPECT_EQ(predicted->checksum, rec.vip_status(next.key())->checksum);
        for (const auto& b : predicted->backends) {
            EXPECT_EQ(b.slots_before, slots[b.address].first) << b.address.to_string();
            EXPECT_EQ(b.slots_after, slots[b.address].second) << b.address.to_string();
        }
        // back to v for the next edit
        rec.set_vips({v});
        reconcile();
    }
    EXPECT_FALSE(rec.predict(web_vip(3, 8080))) << "unknown VIP";
}

TEST_F(ReconcilerTest, UnhealthyBackendIsRescheduledAfterTheNewRingIsLive) {
    VipSpec v = web_vip(3);
    v.health_check.type = config::HealthCheckType::kTcp;
    rec.set_vips({v});
    for (const auto& b : v.backends) rec.set_observed(v.key(), b.address, {Health::kHealthy, 1.0});
    reconcile();
    const std::uint32_t sick = id_of(v, 0);
    const std::uint32_t gen = dp.backends[sick].generation;
    dp.log.clear();
    rec.set_observed(v.key(), v.backends[0].address, {Health::kUnhealthy, 1.0});
    reconcile();
    EXPECT_FALSE(dp.ids_in_ring(vip_id(v)).contains(sick));
    EXPECT_EQ(dp.backends[sick].generation, gen + 1);
    EXPECT_TRUE(
        dp.written_in_order("ring " + std::to_string(vip_id(v)),
                            "backend " + std::to_string(sick) + " gen " + std::to_string(gen + 1)));
    // marked down, so that no second-chance hint names it
    EXPECT_EQ(dp.backends[sick].flags, XLB_BACKEND_F_DOWN);
    EXPECT_EQ(dp.backends[id_of(v, 1)].flags, 0u);
    // healthy again: back in the ring with its new generation, not down
    rec.set_observed(v.key(), v.backends[0].address, {Health::kHealthy, 1.0});
    reconcile();
    EXPECT_TRUE(dp.ids_in_ring(vip_id(v)).contains(sick));
    EXPECT_EQ(dp.backends[sick].generation, gen + 1);
    EXPECT_EQ(dp.backends[sick].flags, 0u);
}

// Second chance on (a 10-minute window), one VIP with its first table.
class ReconcilerSecondChance : public ::testing::Test {
protected:
    void SetUp() override {
        rec.set_vips({v});
        ASSERT_TRUE(rec.reconcile(t0));
        id = *rec.registry().find_vip(v.key());
    }

    FakeDataPlane dp;
    Reconciler rec{dp, {16, 64, std::chrono::minutes(10)}};
    VipSpec v = web_vip(3);
    const Clock::time_point t0 = Clock::now();
    std::uint32_t id = 0;
};

TEST_F(ReconcilerSecondChance, EachNewRingKeepsTheOneBeforeForTheWindow) {
    EXPECT_FALSE(dp.previous_rings.contains(id)) << "nothing came before the first ring";
    const auto first = dp.rings[id];

    v.backends.push_back(web_vip(4).backends[3]);
    rec.set_vips({v});
    const auto t1 = t0 + std::chrono::seconds(5);
    ASSERT_TRUE(rec.reconcile(t1));
    ASSERT_TRUE(dp.previous_rings.contains(id));
    EXPECT_EQ(dp.previous_rings[id], first);
    EXPECT_NE(dp.rings[id], first);

    auto due = rec.expire_previous_rings(t1 + std::chrono::minutes(9));
    EXPECT_TRUE(dp.previous_rings.contains(id));
    ASSERT_TRUE(due);
    EXPECT_EQ(*due, t1 + std::chrono::minutes(10));
    due = rec.expire_previous_rings(t1 + std::chrono::minutes(10));
    EXPECT_FALSE(dp.previous_rings.contains(id)) << "the window ended";
    EXPECT_FALSE(due) << "nothing left to expire";

    // turned off: no previous ring from the next publish on, and the one
    // kept goes at the next expiry pass
    v.backends.pop_back();
    rec.set_vips({v});
    ASSERT_TRUE(rec.reconcile(t1 + std::chrono::minutes(11)));
    ASSERT_TRUE(dp.previous_rings.contains(id));
    rec.set_second_chance(std::nullopt);
    rec.expire_previous_rings(t1 + std::chrono::minutes(11));
    EXPECT_FALSE(dp.previous_rings.contains(id));
    v.backends.push_back(web_vip(4).backends[3]);
    rec.set_vips({v});
    ASSERT_TRUE(rec.reconcile(t1 + std::chrono::minutes(12)));
    EXPECT_FALSE(dp.previous_rings.contains(id));
}

// Slow start publishes a table per step. The previous ring stays the one from
// before the members changed (the backend's arrival), with that change's
// window, however many weight-only steps follow; a later change of members
// starts over from the ring live then.
TEST_F(ReconcilerSecondChance, WeightOnlyStepsKeepTheRingFromBeforeTheMembersChanged) {
    VipSpec checked = v;
    checked.health_check.type = config::HealthCheckType::kTcp;
    rec.set_vips({checked});
    for (const auto& b : checked.backends)
        rec.set_observed(checked.key(), b.address, {Health::kHealthy, 1.0});
    ASSERT_TRUE(rec.reconcile(t0));
    const auto before_add = dp.rings[id];

    const auto t1 = t0 + std::chrono::seconds(5);
    checked.backends.push_back(web_vip(4).backends[3]);
    rec.set_vips({checked});
    rec.set_observed(checked.key(), checked.backends[3].address, {Health::kHealthy, 0.1});
    ASSERT_TRUE(rec.reconcile(t1));
    ASSERT_NE(dp.rings[id], before_add);
    ASSERT_TRUE(dp.previous_rings.contains(id));
    EXPECT_EQ(dp.previous_rings[id], before_add);

    auto ring = dp.rings[id];
    int steps = 0;
    for (double factor : {0.3, 0.55, 0.8, 1.0}) {
        rec.set_observed(checked.key(), checked.backends[3].address, {Health::kHealthy, factor});
        ASSERT_TRUE(rec.reconcile(t1 + std::chrono::seconds(1 + steps)));
        EXPECT_NE(dp.rings[id], ring) << "step " << factor << " published no new table";
        ring = dp.rings[id];
        ++steps;
        ASSERT_TRUE(dp.previous_rings.contains(id));
        EXPECT_EQ(dp.previous_rings[id], before_add) << "after the step to " << factor;
    }
    // the window runs from the change of members, not from the last step
    auto due = rec.expire_previous_rings(t1 + std::chrono::seconds(10));
    ASSERT_TRUE(due);
    EXPECT_EQ(*due, t1 + std::chrono::minutes(10));

    // a backend leaving is a change of members: the ring live then is kept
    const auto full = dp.rings[id];
    checked.backends[0].state = AdminState::kDrain;
    rec.set_vips({checked});
    const auto t2 = t1 + std::chrono::minutes(1);
    ASSERT_TRUE(rec.reconcile(t2));
    EXPECT_EQ(dp.previous_rings[id], full);
    due = rec.expire_previous_rings(t2);
    ASSERT_TRUE(due);
    EXPECT_EQ(*due, t2 + std::chrono::minutes(10));
}

// After a restart the reconciler does not know when a pinned previous ring
// was kept: it gives it one whole window from its first look.
TEST_F(ReconcilerSecondChance, APreviousRingFoundAtStartGetsOneWindow) {
    dp.previous_rings[id] = {1, 2, 3};  // left by the process before

    Reconciler restarted{dp, {16, 64, std::chrono::minutes(10)}};
    restarted.set_vips({v});
    auto due = restarted.expire_previous_rings(t0);
    ASSERT_TRUE(due);
    EXPECT_EQ(*due, t0 + std::chrono::minutes(10));
    EXPECT_TRUE(dp.previous_rings.contains(id));
    ASSERT_TRUE(restarted.reconcile(t0));  // takes its ids
    ASSERT_EQ(*restarted.registry().find_vip(v.key()), id);
    restarted.expire_previous_rings(t0 + std::chrono::minutes(9));
    EXPECT_TRUE(dp.previous_rings.contains(id));
    restarted.expire_previous_rings(t0 + std::chrono::minutes(10));
    EXPECT_FALSE(dp.previous_rings.contains(id));
}

TEST_F(ReconcilerTest, KeepPolicyAndDrainLeaveGenerationsAlone) {
    VipSpec v = web_vip(3);
    v.health_check.type = config::HealthCheckType::kTcp;
    v.on_unhealthy = config::UnhealthyPolicy::kKeep;
    v.backends[2].state = config::AdminState::kDrain;
    rec.set_vips({v});
    for (const auto& b : v.backends) rec.set_observed(v.key(), b.address, {Health::kHealthy, 1.0});
    reconcile();
    const std::uint32_t sick = id_of(v, 0), drained = id_of(v, 2);
    const std::uint32_t gen = dp.backends[sick].generation,
                        drained_gen = dp.backends[drained].generation;
    rec.set_observed(v.key(), v.backends[0].address, {Health::kUnhealthy, 1.0});
    rec.set_observed(v.key(), v.backends[2].address, {Health::kUnhealthy, 1.0});
    reconcile();
    EXPECT_FALSE(dp.ids_in_ring(vip_id(v)).contains(sick));
    EXPECT_EQ(dp.backends[sick].generation, gen);  // keep: its flows stay
    EXPECT_EQ(dp.backends[drained].generation, drained_gen);
    EXPECT_TRUE(rec.vip_status(v.key())->backends[0].live);
    // reschedule, but drained: a drained backend always keeps its flows
    v.on_unhealthy = config::UnhealthyPolicy::kReschedule;
    rec.set_vips({v});
    reconcile();
    EXPECT_EQ(dp.backends[drained].generation, drained_gen);
    EXPECT_TRUE(rec.vip_status(v.key())->backends[2].live);
}

TEST_F(ReconcilerTest, PanicChangesAreCountedAndReported) {
    VipSpec v = web_vip(3);
    v.health_check.type = config::HealthCheckType::kTcp;
    rec.set_vips({v});
    reconcile();
    auto st = rec.vip_status(v.key());
    EXPECT_TRUE(st->starting);
    EXPECT_EQ(st->panic_entries, 0u);  // start-up panic is not an entry
    auto changes = rec.take_panic_changes();
    ASSERT_EQ(changes.size(), 1u);
    EXPECT_EQ(changes[0].to, PanicReason::kAwaitingFirstVerdicts);

    rec.set_observed(v.key(), v.backends[0].address, {Health::kHealthy, 1.0});
    rec.set_observed(v.key(), v.backends[1].address, {Health::kUnhealthy, 1.0});
    rec.set_observed(v.key(), v.backends[2].address, {Health::kUnhealthy, 1.0});
    reconcile();
    st = rec.vip_status(v.key());
    EXPECT_FALSE(st->starting);
    EXPECT_EQ(st->panic, PanicReason::kBelowThreshold);
    EXPECT_EQ(st->panic_entries, 1u);
    changes = rec.take_panic_changes();
    ASSERT_EQ(changes.size(), 1u);
    EXPECT_EQ(changes[0].from, PanicReason::kAwaitingFirstVerdicts);
    EXPECT_EQ(changes[0].to, PanicReason::kBelowThreshold);
    EXPECT_NEAR(changes[0].healthy_share, 1.0 / 3.0, 1e-9);
    EXPECT_EQ(changes[0].threshold, 0.5);
    EXPECT_TRUE(rec.take_panic_changes().empty());  // taken once

    rec.set_observed(v.key(), v.backends[1].address, {Health::kHealthy, 1.0});
    reconcile();
    changes = rec.take_panic_changes();
    ASSERT_EQ(changes.size(), 1u);
    EXPECT_EQ(changes[0].to, PanicReason::kNone);
    rec.set_observed(v.key(), v.backends[1].address, {Health::kUnhealthy, 1.0});
    reconcile();
    EXPECT_EQ(rec.vip_status(v.key())->panic_entries, 2u);
}

TEST_F(ReconcilerTest, TurningAHealthCheckOnStartsOverInStartupPanic) {
    VipSpec v = web_vip(3);
    v.panic_threshold = 0;  // without the start-up rule the table would empty
    rec.set_vips({v});
    reconcile();
    EXPECT_FALSE(rec.vip_status(v.key())->starting);
    v.health_check.type = config::HealthCheckType::kTcp;
    rec.set_vips({v});
    reconcile();
    auto st = rec.vip_status(v.key());
    EXPECT_TRUE(st->starting);
    EXPECT_EQ(st->panic, PanicReason::kAwaitingFirstVerdicts);
    for (const auto& b : st->backends) EXPECT_TRUE(b.in_table);
    for (const auto& b : v.backends) rec.set_observed(v.key(), b.address, {Health::kHealthy, 1.0});
    reconcile();
    EXPECT_FALSE(rec.vip_status(v.key())->starting);
}

TEST_F(ReconcilerTest, UnchangedInputKeepsTheEpochAndSameInputGivesSameChecksum) {
    VipSpec v = web_vip(3);
    VipSpec other = web_vip(2, 443);
    rec.set_vips({v, other});
    reconcile();
    const auto first = *rec.vip_status(v.key());
    const int publishes = dp.publishes;
    rec.set_vips({v, other});
    reconcile();
    EXPECT_EQ(dp.publishes, publishes);
    // change one VIP: only it gets a new epoch
    VipSpec heavier = v;
    heavier.backends[0].weight = 300;
    rec.set_vips({heavier, other});
    reconcile();
    EXPECT_EQ(rec.vip_status(v.key())->epoch, first.epoch + 1);
    EXPECT_NE(rec.vip_status(v.key())->checksum, first.checksum);
    EXPECT_EQ(rec.vip_status(other.key())->epoch, 1u);
    // and back: the same inputs give the same table checksum again
    rec.set_vips({v, other});
    reconcile();
    EXPECT_EQ(rec.vip_status(v.key())->checksum, first.checksum);
    EXPECT_EQ(rec.vip_status(v.key())->epoch, first.epoch + 2);
}

TEST_F(ReconcilerTest, TwoReconcilersAgreeWhateverTheirIds) {
    VipSpec v = web_vip(5);
    FakeDataPlane dp2;
    Reconciler rec2(dp2, {16, 64});
    // the second host allocated other ids before (another VIP came and went)
    rec2.set_vips({web_vip(4, 8080)});
    ASSERT_TRUE(rec2.reconcile(Clock::now()));
    VipSpec reversed = v;
    std::reverse(reversed.backends.begin(), reversed.backends.end());
    rec2.set_vips({reversed});
    ASSERT_TRUE(rec2.reconcile(Clock::now()));
    rec.set_vips({v});
    reconcile();
    EXPECT_EQ(rec.vip_status(v.key())->checksum, rec2.vip_status(v.key())->checksum);
    // each host's ring names its own ids, for the same addresses slot by slot
    auto address_ring = [](Reconciler& r, FakeDataPlane& d, const VipSpec& spec) {
        std::map<std::uint32_t, net::IpAddress> by_id;
        for (const auto& b : spec.backends)
            by_id[r.registry().find_backend(spec.key(), b.address)->id] = b.address;
        std::vector<net::IpAddress> out;
        for (std::uint32_t id : d.rings[*r.registry().find_vip(spec.key())])
            out.push_back(by_id[id]);
        return out;
    };
    EXPECT_EQ(address_ring(rec, dp, v), address_ring(rec2, dp2, reversed));
}

TEST_F(ReconcilerTest, StaleBuildIsDroppedAndTheNewestPlanPublished) {
    VipSpec v = web_vip(3);
    rec.set_vips({v});
    auto jobs = rec.plan(Clock::now());
    ASSERT_EQ(jobs.size(), 1u);
    BuildResult old = build_table(jobs[0]);
    v.backends[0].weight = 50;
    rec.set_vips({v});  // changes while the build was running
    auto records = rec.publish({old}, Clock::now());
    ASSERT_TRUE(records);
    EXPECT_TRUE(records->empty());
    EXPECT_EQ(dp.publishes, 0);
    EXPECT_TRUE(rec.has_pending_work(Clock::now()));
    reconcile();
    EXPECT_EQ(rec.vip_status(v.key())->epoch, 1u);
    EXPECT_EQ(rec.vip_status(v.key())->backends[0].weight, 50u);
}

TEST_F(ReconcilerTest, FailedPublishIsReportedAndRetriedAfterABackOff) {
    using std::chrono::milliseconds;
    VipSpec v = web_vip(3);
    rec.set_vips({v});
    dp.fail_publish = true;
    const Clock::time_point t0 = Clock::now();  // a fake clock: only passed in
    auto r = rec.reconcile(t0);
    EXPECT_FALSE(r);
    EXPECT_FALSE(rec.all_published());
    EXPECT_FALSE(rec.vip_status(v.key())->last_error.empty());
    // the same version again only after 100 ms, then 200, 400, ... 5 s at most
    Clock::time_point failed_at = t0;
    for (const int delay_ms : {100, 200, 400, 800, 1600, 3200, 5000, 5000}) {
        EXPECT_FALSE(rec.has_pending_work(failed_at + milliseconds(delay_ms - 1))) << delay_ms;
        EXPECT_TRUE(rec.plan(failed_at + milliseconds(delay_ms - 1)).empty()) << delay_ms;
        ASSERT_EQ(rec.next_retry(), failed_at + milliseconds(delay_ms));
        failed_at += milliseconds(delay_ms);
        ASSERT_TRUE(rec.has_pending_work(failed_at)) << delay_ms;
        EXPECT_FALSE(rec.reconcile(failed_at));
    }
    const int attempts = dp.publish_attempts;
    // a change is tried at once, back-off or not
    v.backends[0].weight = 7;
    rec.set_vips({v});
    EXPECT_TRUE(rec.has_pending_work(failed_at));
    EXPECT_FALSE(rec.reconcile(failed_at));
    EXPECT_EQ(dp.publish_attempts, attempts + 1);
    // the failure count goes on: its retry waits the longest back-off
    EXPECT_EQ(rec.next_retry(), failed_at + milliseconds(5000));
    // once the data plane takes it, no retry is pending and back-offs start over
    dp.fail_publish = false;
    failed_at += milliseconds(5000);
    ASSERT_TRUE(rec.reconcile(failed_at));
    EXPECT_TRUE(rec.all_published());
    EXPECT_TRUE(rec.vip_status(v.key())->last_error.empty());
    EXPECT_FALSE(rec.next_retry());
    dp.fail_publish = true;
    v.backends[0].weight = 8;
    rec.set_vips({v});
    const Clock::time_point t1 = failed_at + milliseconds(1);
    EXPECT_FALSE(rec.reconcile(t1));
    EXPECT_EQ(rec.next_retry(), t1 + milliseconds(100));
}

// Not only publishes: a map write that fails while planning is retried the
// same way, and each failure is reported once with its retry delay.
TEST_F(ReconcilerTest, FailedBackendWriteIsRetriedAfterABackOffAndReported) {
    using std::chrono::milliseconds;
    VipSpec v = web_vip(3);
    rec.set_vips({v});
    dp.fail_put_backend = true;
    const Clock::time_point t0 = Clock::now();
    ASSERT_TRUE(rec.reconcile(t0));  // nothing to publish yet
    EXPECT_EQ(dp.publish_attempts, 0);
    const VipStatus s = *rec.vip_status(v.key());
    EXPECT_FALSE(s.published);
    EXPECT_NE(s.last_error.find("update backend"), std::string::npos) << s.last_error;
    auto failures = rec.take_apply_failures();
    ASSERT_EQ(failures.size(), 1u);
    EXPECT_EQ(failures[0].vip_key, v.key());
    EXPECT_EQ(failures[0].error.message(), s.last_error);
    EXPECT_EQ(failures[0].retry_in, milliseconds(100));
    EXPECT_TRUE(rec.take_apply_failures().empty()) << "taken once";
    EXPECT_FALSE(rec.has_pending_work(t0 + milliseconds(99)));
    ASSERT_TRUE(rec.has_pending_work(t0 + milliseconds(100)));
    ASSERT_TRUE(rec.reconcile(t0 + milliseconds(100)));
    failures = rec.take_apply_failures();
    ASSERT_EQ(failures.size(), 1u);
    EXPECT_EQ(failures[0].retry_in, milliseconds(200));
    dp.fail_put_backend = false;
    ASSERT_TRUE(rec.reconcile(t0 + milliseconds(300)));
    EXPECT_TRUE(rec.all_published());
    EXPECT_TRUE(rec.vip_status(v.key())->last_error.empty());
    EXPECT_TRUE(rec.take_apply_failures().empty());
    EXPECT_FALSE(dp.ring_names_missing_backend);
    // xlb_applies_total: two failed attempts, then the table that went live
    EXPECT_EQ(rec.vip_status(v.key())->applies_failed, 2u);
    EXPECT_EQ(rec.vip_status(v.key())->applies_published, 1u);
}

TEST_F(ReconcilerTest, RemovingAVipStopsMatchingFirstThenFreesEverything) {
    VipSpec v = web_vip(2);
    rec.set_vips({v});
    reconcile();
    const std::uint32_t id = vip_id(v);
    const std::uint32_t b0 = id_of(v, 0);
    dp.log.clear();
    rec.set_vips({});
    reconcile();
    EXPECT_TRUE(dp.written_in_order("vip- " + std::to_string(id), "ring- " + std::to_string(id)));
    EXPECT_FALSE(dp.rings.contains(id));
    EXPECT_TRUE(dp.vips.empty());
    EXPECT_FALSE(rec.registry().find_vip(v.key()));
    EXPECT_EQ(rec.registry().backends_in_use(), 0u);
    EXPECT_EQ(dp.backends[b0].family, 0) << "released entries hold no address";
}

TEST_F(ReconcilerTest, EpochsContinueAfterARestart) {
    VipSpec v = web_vip(2);
    rec.restore_epoch(v.key(), 41);
    rec.set_vips({v});
    reconcile();
    EXPECT_EQ(rec.vip_status(v.key())->epoch, 42u);
}

TEST_F(ReconcilerTest, RestartAdoptsAnIdenticalLiveTableWithoutPublishing) {
    VipSpec v = web_vip(3);
    rec.set_vips({v});
    reconcile();
    const auto before = *rec.vip_status(v.key());
    const int publishes = dp.publishes;
    // a new agent over the same maps, ids and epochs restored from the state
    // (after a clean stop: the record names the live table and nothing later)
    Reconciler restarted(dp, {16, 64});
    restarted.registry().restore(rec.registry().vip_assignments(),
                                 rec.registry().backend_assignments());
    restarted.restore_epoch(v.key(), EpochRecord{before.epoch, before.checksum, before.epoch});
    restarted.set_vips({v});
    ASSERT_TRUE(restarted.reconcile(Clock::now()));
    EXPECT_EQ(dp.publishes, publishes) << "the live table is already the right one";
    auto after = *restarted.vip_status(v.key());
    EXPECT_EQ(after.epoch, before.epoch);
    EXPECT_EQ(after.checksum, before.checksum);
    EXPECT_TRUE(after.published);
    EXPECT_EQ(after.backends[0].slots, before.backends[0].slots);
    // a different table is published as usual
    v.backends[0].weight = 7;
    restarted.set_vips({v});
    ASSERT_TRUE(restarted.reconcile(Clock::now()));
    EXPECT_EQ(dp.publishes, publishes + 1);
    EXPECT_EQ(restarted.vip_status(v.key())->epoch, before.epoch + 1);
}

// An epoch names one table of a VIP address/port/protocol for good: deleting
// the VIP and adding it again continues above every epoch it had.
TEST_F(ReconcilerTest, ADeletedAndReAddedVipNeverReusesAnEpoch) {
    std::map<std::uint64_t, std::uint64_t> table_of_epoch;
    auto note = [&](const VipSpec& spec) {
        const auto st = *rec.vip_status(spec.key());
        ASSERT_TRUE(st.published);
        auto [it, fresh] = table_of_epoch.emplace(st.epoch, st.checksum);
        EXPECT_TRUE(fresh || it->second == st.checksum)
            << "epoch " << st.epoch << " named tables " << std::hex << it->second << " and "
            << st.checksum;
    };
    VipSpec v = web_vip(3);
    rec.set_vips({v});
    reconcile();
    note(v);
    std::uint64_t highest = rec.vip_status(v.key())->epoch;
    for (int round = 0; round < 3; ++round) {
        rec.set_vips({});
        reconcile();
        ASSERT_FALSE(rec.vip_status(v.key()));
        VipSpec again = web_vip(3);
        again.backends[0].weight = 10 + round;  // another table each time
        rec.set_vips({again});
        reconcile();
        note(again);
        const std::uint64_t epoch = rec.vip_status(v.key())->epoch;
        EXPECT_GT(epoch, highest) << "round " << round;
        highest = epoch;
    }
}

// The same across a restart: the journal keeps the epochs of a deleted VIP,
// so the next process starts above them.
TEST_F(ReconcilerTest, ADeletedVipsEpochsSurviveARestartInTheJournal) {
    std::map<std::string, EpochRecord> journal;
    auto keep = [&journal](Reconciler& r) -> Result<void> {
        journal = r.epoch_records();
        return {};
    };
    rec.set_epoch_journal(keep);
    VipSpec v = web_vip(3);
    rec.set_vips({v});
    reconcile();
    VipSpec heavier = v;
    heavier.backends[0].weight = 300;
    rec.set_vips({heavier});
    reconcile();
    const std::uint64_t before = rec.vip_status(v.key())->epoch;
    rec.set_vips({});
    reconcile();
    ASSERT_TRUE(keep(rec));
    ASSERT_TRUE(journal.contains(v.key())) << "the deleted VIP's epochs were dropped";

    FakeDataPlane dp2;
    Reconciler restarted(dp2, {16, 64});
    for (const auto& [key, record] : journal) restarted.restore_epoch(key, record);
    restarted.set_vips({v});
    ASSERT_TRUE(restarted.reconcile(Clock::now()));
    EXPECT_GT(restarted.vip_status(v.key())->epoch, before);
}

// ---- epochs across crashes (docs/architecture.md, "Epochs and checksums") ----------
// What a kill -9 leaves: the journal's last successful write (the state
// file) and the maps. The journal of these tests keeps what the agent's state
// file keeps about epochs and ids.
struct Durable {
    std::map<std::string, EpochRecord> epochs;
    std::vector<std::pair<std::string, std::uint32_t>> vip_ids;
    std::vector<BackendAssignment> backend_ids;
    int writes = 0;
};

Reconciler::EpochJournal journal_into(Durable& durable, bool* fail = nullptr) {
    return [&durable, fail](Reconciler& r) -> Result<void> {
        if (fail && *fail) return xlb::fail(ENOSPC, "save state file: write");
        durable.epochs = r.epoch_records();
        durable.vip_ids = r.registry().vip_assignments();
        durable.backend_ids = r.registry().backend_assignments();
        ++durable.writes;
        return {};
    };
}

struct Image {
    Durable durable;
    std::map<std::uint16_t, xlb_vip_value> vips;
    std::map<std::uint32_t, xlb_backend> backends;
    std::map<std::uint32_t, std::vector<std::uint32_t>> rings;
};

// A restarted reconciler over an image: (epoch, checksum) of its first table
// for `spec`, and of the table after one more change.
struct Restarted {
    std::uint64_t epoch = 0, checksum = 0;
    std::uint64_t next_epoch = 0, next_checksum = 0;
    int publishes = 0;  // of its first reconcile
};

Restarted restart_from(const Image& image, VipSpec spec) {
    FakeDataPlane dp;
    dp.vips = image.vips;
    dp.backends = image.backends;
    dp.rings = image.rings;
    Durable durable = image.durable;
    Reconciler rec(dp, {16, 64});
    rec.set_epoch_journal(journal_into(durable));
    rec.registry().restore(image.durable.vip_ids, image.durable.backend_ids);
    for (const auto& [key, record] : image.durable.epochs) rec.restore_epoch(key, record);
    rec.set_vips({spec});
    Restarted out;
    EXPECT_TRUE(rec.reconcile(Clock::now()));
    out.publishes = dp.publishes;
    auto first = *rec.vip_status(spec.key());
    EXPECT_TRUE(first.published);
    out.epoch = first.epoch;
    out.checksum = first.checksum;
    spec.backends[0].weight = 99;  // a table no step of the tests uses
    rec.set_vips({spec});
    EXPECT_TRUE(rec.reconcile(Clock::now()));
    auto next = *rec.vip_status(spec.key());
    out.next_epoch = next.epoch;
    out.next_checksum = next.checksum;
    return out;
}

// A data plane that takes an image after every change of its maps, and the
// journal one after every write: together every state a kill -9 can leave.
class CrashImages {
public:
    CrashImages(FakeDataPlane& dp, Durable& durable) : dp_(dp), durable_(durable) {}
    void take(int step) {
        images.push_back({durable_, dp_.vips, dp_.backends, dp_.rings});
        step_of.push_back(step);
    }
    std::vector<Image> images;
    std::vector<int> step_of;  // the step during which each image was taken

private:
    FakeDataPlane& dp_;
    Durable& durable_;
};

class HookedDataPlane : public FakeDataPlane {
public:
    std::function<void()> after_change;
    std::function<void()> before_publish;
    xlb::Result<void> put_backend(std::uint32_t id, const xlb_backend& be) override {
        auto ok = FakeDataPlane::put_backend(id, be);
        if (after_change) after_change();
        return ok;
    }
    xlb::Result<void> put_vip(const xlb_vip_key& key, const xlb_vip_value& value) override {
        auto ok = FakeDataPlane::put_vip(key, value);
        if (after_change) after_change();
        return ok;
    }
    xlb::Result<PublishTiming> publish(const std::vector<RingUpdate>& updates) override {
        if (before_publish) before_publish();
        auto ok = FakeDataPlane::publish(updates);
        if (after_change) after_change();
        return ok;
    }
};

// The required property, at every instant: SIGHUP-like changes (A, B, A
// again, ...), a kill -9 anywhere, a restart, another change. Epochs never go
// back, and no epoch names two tables.
TEST(EpochCrashTest, AKillAtAnyInstantNeverReusesOrRewindsAnEpoch) {
    HookedDataPlane dp;
    Durable durable;
    CrashImages crash(dp, durable);
    int step = 0;
    dp.after_change = [&] { crash.take(step); };
    Reconciler rec(dp, {16, 64});
    rec.set_epoch_journal([&, journal = journal_into(durable)](Reconciler& r) {
        auto ok = journal(r);
        crash.take(step);
        return ok;
    });
    // Write-ahead: when a table goes live, the epoch it takes is recorded.
    std::uint64_t unrecorded = 0;
    dp.before_publish = [&] {
        for (const VipStatus& s : rec.status())  // each will take at least epoch + 1
            if (!durable.epochs.contains(s.spec.key()) ||
                durable.epochs.at(s.spec.key()).reserved <= s.epoch)
                ++unrecorded;
    };

    // step k applies specs[k]; weights cycle so that tables come back
    std::vector<VipSpec> specs;
    const std::uint32_t weights[] = {100, 200, 100, 300, 200};
    for (int k = 0; k < 40; ++k) {
        VipSpec v = web_vip(3);
        v.backends[1].weight = weights[k % 5];
        v.backends[2].weight = k < 20 ? 100 : 150;
        specs.push_back(v);
    }
    // (epoch, checksum) announced by each step
    std::vector<std::pair<std::uint64_t, std::uint64_t>> announced;
    for (step = 0; step < static_cast<int>(specs.size()); ++step) {
        rec.set_vips({specs[step]});
        ASSERT_TRUE(rec.reconcile(Clock::now()));
        auto s = *rec.vip_status(specs[step].key());
        announced.emplace_back(s.epoch, s.checksum);
        if (step > 0) {
            ASSERT_GT(s.epoch, announced[step - 1].first);
        }
    }
    EXPECT_EQ(unrecorded, 0u) << "a table went live with an epoch the journal had not reserved";
    EXPECT_LT(durable.writes, 10) << "reserved in blocks, not a write per publish";
    // one per publish and per journal write at least
    ASSERT_GE(crash.images.size(), specs.size() + static_cast<std::size_t>(durable.writes));

    const std::string key = specs[0].key();
    for (std::size_t i = 0; i < crash.images.size(); ++i) {
        const int k = crash.step_of[i];
        SCOPED_TRACE("image " + std::to_string(i) + " taken in step " + std::to_string(k));
        // what may have been named: every step up to the one interrupted
        std::map<std::uint64_t, std::uint64_t> named;
        std::uint64_t last_announced = 0, highest = 0;
        for (int j = 0; j <= k; ++j) {
            named[announced[j].first] = announced[j].second;
            if (j < k) last_announced = announced[j].first;
            highest = std::max(highest, announced[j].first);
        }
        // the desired state after a restart: the interrupted step's (the
        // state file is written before a change applies)
        const Restarted r = restart_from(crash.images[i], specs[k]);
        EXPECT_GE(r.epoch, last_announced) << "an epoch went back";
        if (auto it = named.find(r.epoch); it != named.end()) {
            EXPECT_EQ(it->second, r.checksum) << "epoch " << r.epoch << " names two tables";
        }
        EXPECT_GT(r.next_epoch, r.epoch);
        EXPECT_GT(r.next_epoch, highest)
            << "after the restart, a change reused epoch " << r.next_epoch;
        if (::testing::Test::HasFailure()) break;
    }
}

// The sequence that once repeated an epoch: published (203) but the record
// still says 202.
TEST(EpochCrashTest, TablePublishedButRecordNotUpdatedGetsAnEpochAboveEveryReserved) {
    FakeDataPlane dp;
    Durable durable;
    Reconciler rec(dp, {16, 64});
    rec.set_epoch_journal(journal_into(durable));
    VipSpec v = web_vip(3);
    rec.restore_epoch(v.key(), EpochRecord{202, std::nullopt, 202});
    rec.set_vips({v});
    ASSERT_TRUE(rec.reconcile(Clock::now()));
    EXPECT_EQ(rec.vip_status(v.key())->epoch, 203u);
    const Durable at_publish = durable;  // nothing written after the publish
    ASSERT_GE(at_publish.epochs.at(v.key()).reserved, 203u)
        << "203 was reserved before it went live";
    v.backends[0].weight = 300;
    rec.set_vips({v});
    ASSERT_TRUE(rec.reconcile(Clock::now()));
    const auto published = *rec.vip_status(v.key());  // epoch 204, not in the record
    ASSERT_EQ(published.epoch, 204u);
    EXPECT_EQ(durable.writes, at_publish.writes) << "no write per publish";

    // kill -9 now; the restart (same desired state) adopts the live ring...
    const Restarted r = restart_from({at_publish, dp.vips, dp.backends, dp.rings}, v);
    EXPECT_EQ(r.publishes, 0) << "the identical live ring is adopted, not swapped";
    EXPECT_EQ(r.checksum, published.checksum);
    // ...but cannot prove it is 204 (the record says 203): it moves past
    // every epoch that may have been used
    EXPECT_GT(r.epoch, at_publish.epochs.at(v.key()).reserved);
    EXPECT_GT(r.next_epoch, r.epoch);
}

TEST(EpochCrashTest, CleanStopLetsTheNextStartKeepTheLiveEpoch) {
    FakeDataPlane dp;
    Durable durable;
    Reconciler rec(dp, {16, 64});
    rec.set_epoch_journal(journal_into(durable));
    VipSpec v = web_vip(3);
    rec.set_vips({v});
    ASSERT_TRUE(rec.reconcile(Clock::now()));
    v.backends[0].weight = 300;
    rec.set_vips({v});
    ASSERT_TRUE(rec.reconcile(Clock::now()));
    const auto live = *rec.vip_status(v.key());
    EXPECT_GT(durable.epochs.at(v.key()).reserved, live.epoch) << "reserved ahead";
    // stop: nothing publishes any more, the last save trims the reservation
    rec.release_epoch_reservations();
    ASSERT_TRUE(journal_into(durable)(rec));
    EXPECT_EQ(durable.epochs.at(v.key()).reserved, live.epoch);
    EXPECT_EQ(durable.epochs.at(v.key()).checksum, live.checksum);

    const Restarted r = restart_from({durable, dp.vips, dp.backends, dp.rings}, v);
    EXPECT_EQ(r.publishes, 0);
    EXPECT_EQ(r.epoch, live.epoch)
        << "proven: same ring, recorded checksum, nothing reserved beyond";
    EXPECT_EQ(r.next_epoch, live.epoch + 1);

    // a record whose checksum names another table proves nothing
    Durable other = durable;
    other.epochs.at(v.key()).checksum = live.checksum ^ 1;
    const Restarted r2 = restart_from({other, dp.vips, dp.backends, dp.rings}, v);
    EXPECT_EQ(r2.epoch, live.epoch + 1);
    // nor does a record without one (a state file from before checksums)
    other.epochs.at(v.key()).checksum.reset();
    EXPECT_EQ(restart_from({other, dp.vips, dp.backends, dp.rings}, v).epoch, live.epoch + 1);
}

TEST(EpochCrashTest, ReservedButNeverPublishedEpochsAreSkipped) {
    // kill -9 after the journal write, before the table went live
    FakeDataPlane dp;
    Durable durable;
    bool fail = false;
    Reconciler rec(dp, {16, 64});
    rec.set_epoch_journal(journal_into(durable, &fail));
    VipSpec v = web_vip(3);
    rec.set_vips({v});
    dp.fail_publish = true;  // stands for the crash before the outer update
    (void)rec.reconcile(Clock::now());
    EXPECT_EQ(dp.publishes, 0);
    const auto reserved = durable.epochs.at(v.key()).reserved;
    EXPECT_GE(reserved, 1u);
    dp.fail_publish = false;
    const Restarted r = restart_from({durable, dp.vips, dp.backends, dp.rings}, v);
    EXPECT_EQ(r.publishes, 1);
    EXPECT_GT(r.epoch, reserved);
}

TEST(EpochCrashTest, AFailingJournalDoesNotHoldTablesBackAndIsRetried) {
    FakeDataPlane dp;
    Durable durable;
    bool fail = true;
    Reconciler rec(dp, {16, 64});
    rec.set_epoch_journal(journal_into(durable, &fail));
    VipSpec v = web_vip(3);
    rec.set_vips({v});
    ASSERT_TRUE(rec.reconcile(Clock::now()));
    EXPECT_EQ(dp.publishes, 1) << "failover must not wait for a disk";
    EXPECT_EQ(durable.writes, 0);
    fail = false;
    v.backends[0].weight = 300;
    rec.set_vips({v});
    ASSERT_TRUE(rec.reconcile(Clock::now()));
    ASSERT_GE(durable.writes, 1) << "the next publish writes what is missing";
    EXPECT_GT(durable.epochs.at(v.key()).reserved, rec.vip_status(v.key())->epoch);
}

// A data plane that keeps refusing must not turn the loop into a busy retry
// (a build, a failed publish and an error line per iteration).
TEST(ControlLoopTest, FailingPublishesAreRetriedWithBackOffNotInALoop) {
    FakeDataPlane dp;
    dp.fail_publish = true;
    Reconciler rec(dp, {16, 64});
    test::ManualLoopClock clock;
    const auto t0 = clock.now();
    ControlLoop::Options options;
    options.clock = &clock;
    ControlLoop loop(rec, options);
    std::atomic<int> errors{0};
    loop.on_error([&](const Error&) { ++errors; });
    loop.start();
    // returns once a pass at the clock's present time has run (and any
    // publish it started has been tried); the value is all_published() as
    // the pass began
    auto pass = [&] {
        return loop.call<bool>([](Reconciler& r) { return r.all_published(); }).get();
    };

    loop.post([](Reconciler& r) { r.set_vips({web_vip(3)}); });
    std::vector<long> attempted_at_ms;  // on the loop's clock
    int seen = 0;
    auto note_attempts = [&] {
        pass();
        for (; seen < dp.publish_attempts; ++seen)
            attempted_at_ms.push_back(static_cast<long>(
                std::chrono::duration_cast<std::chrono::milliseconds>(clock.now() - t0).count()));
    };
    note_attempts();
    for (int step = 0; step < 100; ++step) {  // 1 s in steps of 10 ms
        clock.advance(std::chrono::milliseconds(10));
        note_attempts();
    }
    // back-off 100, 200, 400, 800 ms: four attempts in the first second
    EXPECT_EQ(attempted_at_ms, (std::vector<long>{0, 100, 300, 700}));
    EXPECT_EQ(errors.load(), dp.publish_attempts.load()) << "each failure is reported once";

    // once the data plane recovers, the next retry (at 1,500 ms) publishes
    dp.fail_publish = false;
    bool published = false;
    while (!published && clock.now() - t0 < std::chrono::milliseconds(1500)) {
        clock.advance(std::chrono::milliseconds(10));
        pass();
        published = pass();
    }
    const auto recovered_at = clock.now() - t0;
    loop.stop();
    EXPECT_TRUE(published);
    EXPECT_EQ(recovered_at, std::chrono::milliseconds(1500)) << "published at the next retry";
}

TEST(ControlLoopTest, BurstsOfChangesAreCoalesced) {
    FakeDataPlane dp;
    dp.publish_delay = std::chrono::milliseconds(20);
    Reconciler rec(dp, {16, 64});
    ControlLoop loop(rec, {});
    int published = 0;
    loop.on_publish([&](const PublishRecord&) { ++published; });
    loop.start();
    VipSpec v = web_vip(3);
    std::vector<std::future<bool>> done;
    for (std::uint32_t w = 1; w <= 100; ++w) {
        v.backends[0].weight = w;
        done.push_back(loop.call<bool>([v](Reconciler& r) {
            r.set_vips({v});
            return true;
        }));
    }
    for (auto& f : done) ASSERT_TRUE(f.get());
    auto status =
        loop.call<std::optional<VipStatus>>([&](Reconciler& r) { return r.vip_status(v.key()); });
    auto s = status.get();
    loop.stop();
    ASSERT_TRUE(s);
    EXPECT_EQ(s->backends[0].weight, 100u) << "the last change wins";
    EXPECT_TRUE(s->published);
    EXPECT_LT(published, 10) << "100 changes in a burst must not mean 100 publishes";
    EXPECT_GE(published, 1);
    std::printf("  100 changes -> %d publishes\n", published);
}

// Two-phase publish: a ControlLoop with a publish gate on a clock moved by
// hand. prepare() says how long tables may be held, ready() whether they may
// go live now.
class ControlLoopGateTest : public ::testing::Test {
protected:
    ControlLoopGateTest() {
        options.clock = &clock;
        loop = std::make_unique<ControlLoop>(rec, options);
    }
    ~ControlLoopGateTest() override { loop->stop(); }

    void gate(Clock::duration hold) {
        loop->set_publish_gate(
            ControlLoop::PublishGate{[this, hold](const std::vector<BuildResult>& built) {
                                         prepared_vips += built.size();
                                         ++prepared;
                                         return hold;
                                     },
                                     [this](const std::vector<BuildResult>&) {
                                         ++asked;
                                         return may_publish.load();
                                     }});
    }
    // Whether the VIP's table is live, asked on the control thread while a
    // publish may be held.
    bool published() {
        auto answer = loop->query<bool>([](Reconciler& r) {
            auto s = r.vip_status(web_vip(3).key());
            return s && s->published;
        });
        EXPECT_EQ(answer.wait_for(std::chrono::seconds(5)), std::future_status::ready)
            << "query() waits for nothing but the control thread";
        return answer.get();
    }
    // Waits (in real time, the loop's clock standing still) until `done`.
    template <class F>
    static bool eventually(F done) {
        for (int i = 0; i < 5000 && !done(); ++i)
            std::this_thread::sleep_for(std::chrono::milliseconds(1));
        return done();
    }

    FakeDataPlane dp;
    Reconciler rec{dp, {16, 64}};
    test::ManualLoopClock clock;
    ControlLoop::Options options;
    std::unique_ptr<ControlLoop> loop;
    std::atomic<int> prepared{0};
    std::atomic<std::size_t> prepared_vips{0};
    std::atomic<int> asked{0};
    std::atomic<bool> may_publish{false};
};

TEST_F(ControlLoopGateTest, BuiltTablesWaitUntilReadyAndAPostedTaskAsksAgain) {
    gate(std::chrono::seconds(1));
    loop->start();
    const auto t0 = clock.now();
    loop->post([](Reconciler& r) { r.set_vips({web_vip(3)}); });
    ASSERT_TRUE(eventually([&] { return prepared == 1; }));
    EXPECT_EQ(prepared_vips, 1u);
    EXPECT_FALSE(published()) << "held: not ready, its time not up";
    EXPECT_FALSE(published());
    EXPECT_EQ(dp.publish_attempts, 0);

    // The loop's clock stands still: only a posted task wakes the loop, and
    // each wake asks ready() again.
    ASSERT_TRUE(eventually([&] { return asked > 0; }));
    const int before = asked;
    loop->post([](Reconciler&) {});
    EXPECT_TRUE(eventually([&] { return asked > before; }));
    EXPECT_FALSE(published());

    may_publish = true;
    loop->post([](Reconciler&) {});
    EXPECT_TRUE(eventually([&] { return published(); }));
    EXPECT_EQ(clock.now(), t0) << "published because ready, not because the wait was up";
    EXPECT_EQ(dp.publishes, 1);
    EXPECT_EQ(prepared, 1);
}

TEST_F(ControlLoopGateTest, HeldTablesGoLiveWhenPreparesTimeIsUp) {
    gate(std::chrono::milliseconds(500));
    loop->start();
    loop->post([](Reconciler& r) { r.set_vips({web_vip(3)}); });
    ASSERT_TRUE(eventually([&] { return prepared == 1; }));
    clock.advance(std::chrono::milliseconds(499));
    loop->post([](Reconciler&) {});
    EXPECT_FALSE(published());
    EXPECT_FALSE(published());
    clock.advance(std::chrono::milliseconds(1));
    // No task: the loop wakes at the end of the wait by itself.
    EXPECT_TRUE(eventually([&] { return dp.publish_attempts > 0; }));
    EXPECT_TRUE(published());
    EXPECT_GT(asked, 0) << "asked while held";
}

TEST_F(ControlLoopGateTest, NoWaitPublishesAtOnceWithoutAskingReady) {
    gate(Clock::duration::zero());
    loop->start();
    ASSERT_TRUE(loop->call<bool>([](Reconciler& r) {
                        r.set_vips({web_vip(3)});
                        return true;
                    })
                    .get());
    EXPECT_TRUE(published());
    EXPECT_EQ(prepared, 1);
    EXPECT_EQ(asked, 0);
}

}  // namespace
}  // namespace xlb::control
