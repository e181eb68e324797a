// SPDX-License-Identifier: Apache-2.0
// The agent's link to its fleet's store (xlb/agent/fleet_link.h) against a
// real etcd member on 127.0.0.1: a watch from a compacted revision reads
// everything again, the host record's lease lives on while nothing changes,
// and reachability follows the store.
#include "xlb/agent/fleet_link.h"

#include <gtest/gtest.h>

#include <atomic>
#include <condition_variable>
#include <mutex>
#include <thread>

#include "etcd_members.h"

namespace xlb::agent {
namespace {

using namespace std::chrono_literals;

const fleet::Layout kLayout{"/xlb/link/"};

etcd::Client client_of(const test::EtcdMembers& members) {
    etcd::ClientOptions o;
    o.endpoints = members.endpoints();
    o.dial_timeout = 500ms;
    o.request_timeout = 2s;
    return *etcd::Client::open(o);
}

// What the link hands over, for the test thread to wait on.
struct Seen {
    std::mutex mu;
    std::condition_variable changed;
    std::vector<FleetSnapshot> snapshots;
    std::vector<bool> reachability;

    template <class Pred>
    bool wait(Pred pred, std::chrono::milliseconds timeout = 10s) {
        std::unique_lock lock(mu);
        return changed.wait_for(lock, timeout, [&] { return pred(*this); });
    }
};

FleetLink::OnSnapshot record_snapshots(Seen& seen) {
    return [&seen](const FleetSnapshot& s) {
        std::lock_guard lock(seen.mu);
        seen.snapshots.push_back(s);
        seen.changed.notify_all();
    };
}
FleetLink::OnReachability record_reachability(Seen& seen) {
    return [&seen](bool reachable, const std::string&) {
        std::lock_guard lock(seen.mu);
        seen.reachability.push_back(reachable);
        seen.changed.notify_all();
    };
}

TEST(FleetLink, AWatchFromACompactedRevisionReadsEverythingAgain) {
    test::EtcdMembers members(test::EtcdMembersOptions{.members = 1});
    etcd::Client c = client_of(members);
    const std::int64_t first = *c.put(kLayout.global(), "one");
    ASSERT_TRUE(c.put(kLayout.vip("198.51.100.10:80/tcp"), "two").has_value());
    ASSERT_TRUE(c.del(kLayout.global()).has_value());
    const std::int64_t now = *c.put(kLayout.vip("198.51.100.20:80/tcp"), "three");
    ASSERT_TRUE(c.compact(now).has_value());

    // What the agent ran: the snapshot of the first revision, long compacted.
    FleetSnapshot old{{fleet::StoredKey{kLayout.global(), "one", first}}, first};
    FleetLink link(client_of(members), FleetLink::Options{.layout = kLayout, .host = "h1"});
    Seen seen;
    link.start_watch(old, record_snapshots(seen), record_reachability(seen));
    ASSERT_TRUE(seen.wait([](Seen& s) { return !s.snapshots.empty(); }))
        << "nothing handed over after the compaction";
    const FleetSnapshot got = seen.snapshots.back();
    EXPECT_GE(got.revision, now);
    ASSERT_EQ(got.keys.size(), 2u) << "the deleted key is gone, both VIPs are there";
    EXPECT_EQ(got.keys[0].key, kLayout.vip("198.51.100.10:80/tcp"));
    EXPECT_EQ(got.keys[1].value, "three");
    link.stop();
}

TEST(FleetLink, TheRecordsLeaseLivesOnWhileNothingChanges) {
    test::EtcdMembers members(test::EtcdMembersOptions{.members = 1});
    FleetLink::Options options{.layout = kLayout, .host = "h1"};
    options.lease_ttl = 2s;
    options.record_interval = 60s;  // nothing pokes it: only the lease keeps it
    FleetLink link(client_of(members), options);
    std::atomic<int> built{0};
    link.start_records([&built] {
        ++built;
        return std::string(R"({"format": 1, "host": "h1"})");
    });
    etcd::Client c = client_of(members);
    std::this_thread::sleep_for(5s);  // two and a half TTLs
    auto key = c.get(kLayout.host("h1"));
    ASSERT_TRUE(key.has_value()) << key.error().message();
    ASSERT_EQ(key->kvs.size(), 1u) << "the record expired with its lease";
    EXPECT_EQ(key->kvs[0].version, 1) << "written once: it did not change";
    auto ttl = c.time_to_live(key->kvs[0].lease);
    ASSERT_TRUE(ttl.has_value());
    EXPECT_GT(ttl->remaining.count(), 0);
    EXPECT_EQ(built.load(), 1) << "rebuilt without a poke before record_interval";
    link.poke_record();
    std::this_thread::sleep_for(300ms);
    EXPECT_EQ(built.load(), 2);
    link.stop();
}

TEST(FleetLink, ReachabilityFollowsTheStore) {
    test::EtcdMembers members(test::EtcdMembersOptions{.members = 1});
    FleetLink link(client_of(members), FleetLink::Options{.layout = kLayout, .host = "h1"});
    Seen seen;
    link.start_watch(std::nullopt, record_snapshots(seen), record_reachability(seen));
    ASSERT_TRUE(seen.wait([](Seen& s) { return !s.reachability.empty(); }));
    EXPECT_TRUE(seen.reachability.back());
    members.stop(0);
    EXPECT_TRUE(seen.wait([](Seen& s) { return !s.reachability.back(); }))
        << "still reachable with the member stopped";
    members.start(0);
    EXPECT_TRUE(seen.wait([](Seen& s) { return s.reachability.back(); }))
        << "not reachable again after the member came back";
    link.stop();
}

}  // namespace
}  // namespace xlb::agent
