// SPDX-License-Identifier: Apache-2.0
#include "xlb/announce/policy.h"

#include <gtest/gtest.h>

namespace xlb::announce {
namespace {

using std::chrono::seconds;

net::IpAddress ip(const char* text) { return *net::IpAddress::parse(text); }

VipInput serving(std::string key, const char* address, std::uint32_t backends = 2) {
    VipInput v;
    v.key = std::move(key);
    v.address = ip(address);
    v.table_live = true;
    v.serving_backends = backends;
    v.configured_backends = backends;
    return v;
}

struct Row {
    const char* name;
    Policy policy;
    bool table_live;
    std::uint32_t serving;
    std::uint32_t configured;
    bool drained;
    bool announced;
    Reason reason;
};

TEST(AnnouncePolicy, Table) {
    const Row rows[] = {
        {"serving", Policy::kWhenServing, true, 2, 3, false, true, Reason::kServing},
        {"panic still serves (table not empty)", Policy::kWhenServing, true, 3, 3, false, true,
         Reason::kServing},
        {"empty table (panic_threshold 0, all down)", Policy::kWhenServing, true, 0, 3, false,
         false, Reason::kNoServingBackend},
        {"no backend at all", Policy::kWhenServing, true, 0, 0, false, false,
         Reason::kNoServingBackend},
        {"not yet published", Policy::kWhenServing, false, 0, 3, false, false,
         Reason::kNotPublished},
        {"drained beats serving", Policy::kWhenServing, true, 3, 3, true, false,
         Reason::kHostDrained},
        {"drained beats always", Policy::kAlways, false, 0, 0, true, false, Reason::kHostDrained},
        {"drained with never", Policy::kNever, true, 3, 3, true, false, Reason::kHostDrained},
        {"always without a table", Policy::kAlways, false, 0, 0, false, true,
         Reason::kPolicyAlways},
        {"never while serving", Policy::kNever, true, 3, 3, false, false, Reason::kPolicyNever},
    };
    for (const auto& row : rows) {
        VipInput v;
        v.key = "192.0.2.10:80/tcp";
        v.address = ip("192.0.2.10");
        v.policy = row.policy;
        v.table_live = row.table_live;
        v.serving_backends = row.serving;
        v.configured_backends = row.configured;
        const Verdict got = decide(v, row.drained);
        EXPECT_EQ(got.announced, row.announced) << row.name;
        EXPECT_EQ(got.reason, row.reason) << row.name << ": " << to_string(got.reason);
        EXPECT_FALSE(got.detail.empty()) << row.name;
    }
}

TEST(AnnouncePolicy, StableWords) {
    EXPECT_EQ(to_string(Reason::kServing), "serving");
    EXPECT_EQ(to_string(Reason::kNoServingBackend), "no_serving_backend");
    EXPECT_EQ(to_string(Reason::kNotPublished), "not_published");
    EXPECT_EQ(to_string(Reason::kHostDrained), "host_drained");
    EXPECT_EQ(to_string(Reason::kPolicyNever), "policy_never");
    EXPECT_EQ(to_string(Reason::kPolicyAlways), "policy_always");
    for (Policy p : {Policy::kWhenServing, Policy::kAlways, Policy::kNever})
        EXPECT_EQ(parse_policy(to_string(p)), p);
    EXPECT_FALSE(parse_policy("sometimes"));
}

TEST(AnnouncePolicy, SinceKeptWhileStateAndReasonHold) {
    const TimePoint t0 = TimePoint{} + seconds(1000);
    DecisionTable table;
    HostInput in;
    in.vips = {serving("192.0.2.10:80/tcp", "192.0.2.10", 2)};

    auto d = table.update(in, t0);
    ASSERT_EQ(d.size(), 1u);
    EXPECT_TRUE(d[0].announced);
    EXPECT_EQ(d[0].since, t0);

    // Another backend count, same state and reason: `since` stays, the text follows.
    in.vips[0].serving_backends = 1;
    d = table.update(in, t0 + seconds(5));
    EXPECT_EQ(d[0].since, t0);
    EXPECT_NE(d[0].detail.find("1 of 2"), std::string::npos) << d[0].detail;

    // Every backend gone: withdrawn since now.
    in.vips[0].serving_backends = 0;
    d = table.update(in, t0 + seconds(10));
    EXPECT_FALSE(d[0].announced);
    EXPECT_EQ(d[0].reason, Reason::kNoServingBackend);
    EXPECT_EQ(d[0].since, t0 + seconds(10));

    // Withdrawn for another reason (drain): a new since, though still withdrawn.
    in.drained = true;
    d = table.update(in, t0 + seconds(20));
    EXPECT_EQ(d[0].reason, Reason::kHostDrained);
    EXPECT_EQ(d[0].since, t0 + seconds(20));

    // Deleted, then added again: starts afresh.
    in.drained = false;
    in.vips[0].serving_backends = 2;
    HostInput empty;
    EXPECT_TRUE(table.update(empty, t0 + seconds(30)).empty());
    d = table.update(in, t0 + seconds(40));
    EXPECT_EQ(d[0].since, t0 + seconds(40));
}

// A fleet's host that is behind (announce: when_current): every VIP is
// withdrawn, `always` included, with the reason and the text it was given;
// a drain still says drain, and `never` stays `never`.
TEST(AnnouncePolicy, BehindTheFleetWithdrawsEveryVip) {
    const std::string behind = "applied revision 41, the fleet's is 44 (behind for 3.2 s)";
    for (Policy policy : {Policy::kWhenServing, Policy::kAlways}) {
        for (bool live : {true, false}) {
            VipInput v = serving("192.0.2.10:80/tcp", "192.0.2.10");
            v.policy = policy;
            v.table_live = live;
            const Verdict current = decide(v, false, "");
            const Verdict got = decide(v, false, behind);
            EXPECT_FALSE(got.announced) << to_string(policy);
            EXPECT_EQ(got.reason, Reason::kBehindFleet) << to_string(policy);
            EXPECT_EQ(got.detail, behind);
            EXPECT_TRUE(current.announced || !live) << "the same VIP when current";
            const Verdict drained = decide(v, true, behind);
            EXPECT_FALSE(drained.announced);
            EXPECT_EQ(drained.reason, Reason::kHostDrained) << "drain wins";
        }
    }
    VipInput never = serving("192.0.2.10:80/tcp", "192.0.2.10");
    never.policy = Policy::kNever;
    EXPECT_EQ(decide(never, false, behind).reason, Reason::kPolicyNever);
    EXPECT_EQ(to_string(Reason::kBehindFleet), "behind_fleet");
}

TEST(AnnouncePolicy, ATableBehindTheFleetWithdrawsUntilItCatchesUp) {
    const TimePoint t0 = TimePoint{} + seconds(100);
    DecisionTable table;
    HostInput in;
    in.vips = {serving("192.0.2.10:80/tcp", "192.0.2.10"),
               serving("192.0.2.11:80/tcp", "192.0.2.11"),
               serving("192.0.2.12:80/tcp", "192.0.2.12")};
    in.vips[1].policy = Policy::kAlways;
    in.vips[2].policy = Policy::kNever;
    ASSERT_EQ(routes_of(table.update(in, t0)).size(), 2u);

    in.behind = "applied revision 7, the fleet's is 9";
    const auto& d = table.update(in, t0 + seconds(1));
    ASSERT_EQ(d.size(), 3u);
    EXPECT_TRUE(routes_of(d).empty());
    EXPECT_EQ(d[0].reason, Reason::kBehindFleet);
    EXPECT_EQ(d[0].detail, in.behind);
    EXPECT_EQ(d[0].since, t0 + seconds(1));
    EXPECT_EQ(d[1].reason, Reason::kBehindFleet);
    EXPECT_EQ(d[2].reason, Reason::kPolicyNever);
    EXPECT_EQ(d[2].since, t0) << "never was withdrawn already, for the same reason";

    in.drained = true;
    EXPECT_EQ(table.update(in, t0 + seconds(2))[0].reason, Reason::kHostDrained);

    in.drained = false;
    in.behind.clear();
    const auto& caught_up = table.update(in, t0 + seconds(3));
    EXPECT_EQ(routes_of(caught_up).size(), 2u);
    EXPECT_EQ(caught_up[0].reason, Reason::kServing);
    EXPECT_EQ(caught_up[1].reason, Reason::kPolicyAlways);
}

TEST(AnnouncePolicy, RoutesPerAddress) {
    const TimePoint t0 = TimePoint{} + seconds(1);
    DecisionTable table;
    HostInput in;
    in.vips = {
        serving("192.0.2.10:80/tcp", "192.0.2.10"), serving("192.0.2.10:443/tcp", "192.0.2.10"),
        serving("[2001:db8::10]:80/tcp", "2001:db8::10"), serving("192.0.2.2:53/udp", "192.0.2.2"),
        serving("192.0.2.30:80/tcp", "192.0.2.30", 0)};
    // One of two VIPs of an address withdrawn: the address stays announced.
    in.vips[1].policy = Policy::kNever;
    const auto& d = table.update(in, t0);
    ASSERT_EQ(d.size(), 5u);
    EXPECT_EQ(d[0].key, "192.0.2.10:443/tcp");  // sorted by key
    const auto routes = routes_of(d);
    ASSERT_EQ(routes.size(), 3u);
    EXPECT_EQ(routes[0], ip("192.0.2.2"));
    EXPECT_EQ(routes[1], ip("192.0.2.10"));
    EXPECT_EQ(routes[2], ip("2001:db8::10"));
}

}  // namespace
}  // namespace xlb::announce
