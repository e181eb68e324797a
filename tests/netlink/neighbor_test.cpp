// SPDX-License-Identifier: Apache-2.0
// Next-hop resolution and watching against the kernel's real neighbour
// tables. Each test builds its own pair of network namespaces joined by a veth
// pair and runs the code under test inside the first one:
//
//   netns xlbn-<pid>-<n>-lb            netns xlbn-<pid>-<n>-hop
//   lb0  02:00:00:00:0a:01  <--veth-->  hop0 02:00:00:00:0b:01
//   192.0.2.1/24 2001:db8::1/64         192.0.2.2/24 2001:db8::2/64
//
// Nothing leaves the namespaces; they are deleted when the test ends, whatever
// its outcome.
#include "xlb/netlink/neighbor.h"

#include <gtest/gtest.h>
#include <linux/neighbour.h>
#include <poll.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "event_log.h"
#include "netns.h"
#include "xlb/netlink/link.h"
#include "xlb/netlink/watcher.h"

namespace {

using namespace std::chrono_literals;
using xlb::net::IpAddress;
using xlb::net::MacAddress;
namespace nl = xlb::netlink;
using Clock = std::chrono::steady_clock;

const std::string kPrefix = "xlbn-" + std::to_string(::getpid()) + "-";

MacAddress mac(const char* text) { return *xlb::net::parse_mac(text); }
IpAddress ip(const char* text) { return *IpAddress::parse(text); }

const MacAddress kLbMac = mac("02:00:00:00:0a:01");
const MacAddress kHopMac = mac("02:00:00:00:0b:01");
const IpAddress kHop4 = ip("192.0.2.2");
const IpAddress kHop6 = ip("2001:db8::2");

void sh(const std::string& command) { xlb::test::run_command_ok(command); }

using Namespace = xlb::test::Netns;

// The two namespaces and the veth between them.
class Lab {
public:
    Lab() : lb_(next_name("lb")), hop_(next_name("hop")) {
        const std::string lb = "ip -n " + lb_.name() + " ";
        const std::string hop = "ip -n " + hop_.name() + " ";
        // No duplicate address detection: addresses are usable at once. The
        // hop announces a MAC change (gratuitous ARP, unsolicited NA).
        for (const Namespace* ns : {&lb_, &hop_})
            sh("ip netns exec " + ns->name() +
               " sysctl -qw net.ipv6.conf.all.accept_dad=0 net.ipv6.conf.default.accept_dad=0"
               " net.ipv4.conf.all.arp_notify=1 net.ipv4.conf.default.arp_notify=1"
               " net.ipv6.conf.all.ndisc_notify=1 net.ipv6.conf.default.ndisc_notify=1");
        sh(lb +
           "link add lb0 address 02:00:00:00:0a:01 mtu 1600 type veth peer name hop0"
           " address 02:00:00:00:0b:01 mtu 1600 netns " +
           hop_.name());
        sh(lb + "addr add 192.0.2.1/24 dev lb0 && " + lb +
           "addr add 2001:db8::1/64 dev lb0 nodad && " + hop +
           "addr add 192.0.2.2/24 dev hop0 && " + hop +
           "addr add 2001:db8::2/64 dev hop0 nodad && " + lb + "link set lo up && " + hop +
           "link set lo up && " + lb + "link set lb0 up && " + hop + "link set hop0 up");
        // Until both ends are operationally up and have their link-local
        // addresses the first ARP request / solicitation can be dropped, which
        // costs a 1 s retransmission.
        sh("for i in $(seq 100); do " + lb +
           "-6 addr show dev lb0 scope link | grep -q 'state UP' && " + hop +
           "-6 addr show dev hop0 scope link | grep -q 'state UP' && " + lb +
           "-6 addr show dev lb0 scope link | grep -q fe80 && " + hop +
           "-6 addr show dev hop0 scope link | grep -q fe80 && exit 0; sleep 0.01; done; exit 1");
    }

    const std::string& lb() const { return lb_.name(); }
    const std::string& hop() const { return hop_.name(); }
    void in_lb(const std::string& args) const { sh("ip -n " + lb() + " " + args); }
    void in_hop(const std::string& args) const { sh("ip -n " + hop() + " " + args); }
    void sysctl_lb(const std::string& settings) const {
        sh("ip netns exec " + lb() + " sysctl -qw " + settings);
    }

private:
    static std::string next_name(const char* role) {
        static std::atomic<int> counter{0};
        // namespaces left behind by earlier runs whose process is gone
        static bool swept = [] {
            xlb::test::sweep_stale_netns("xlbn");
            return true;
        }();
        (void)swept;
        return kPrefix + std::to_string(counter.fetch_add(1)) + "-" + role;
    }

    Namespace lb_;
    Namespace hop_;
};

class NeighborTest : public ::testing::Test {
protected:
    void SetUp() override {
        lab_.emplace();
        inside_.emplace(lab_->lb());
    }
    void TearDown() override {
        inside_.reset();
        lab_.reset();
    }

    std::optional<Lab> lab_;
    std::optional<xlb::test::NetnsScope> inside_;
};

using EventLog = xlb::test::EventLog<nl::NextHopEvent>;

std::string describe(const std::vector<nl::NextHopEvent>& events) {
    std::ostringstream out;
    for (const auto& e : events)
        out << "[" << (e.mac ? xlb::net::mac_to_string(*e.mac) : "lost") << " "
            << nl::state_name(e.state) << "] ";
    return out.str();
}

// Runs a watcher's event-loop API (fd + handle_readable) until `done` or the limit.
template <typename Done>
void pump(nl::NeighborWatcher& watcher, std::chrono::milliseconds limit, Done done) {
    auto deadline = Clock::now() + limit;
    while (!done() && Clock::now() < deadline) {
        pollfd pfd{.fd = watcher.fd(), .events = POLLIN, .revents = 0};
        ASSERT_GE(::poll(&pfd, 1, 50), 0);
        if (pfd.revents) {
            auto r = watcher.handle_readable();
            ASSERT_TRUE(r) << r.error().message();
        }
    }
}

// --- interfaces --------------------------------------------------------------

TEST_F(NeighborTest, InterfaceIndexMacAndMtu) {
    auto info = nl::link_info("lb0");
    ASSERT_TRUE(info) << info.error().message();
    EXPECT_GT(info->ifindex, 0);
    EXPECT_EQ(info->name, "lb0");
    EXPECT_EQ(info->mac, kLbMac);
    EXPECT_TRUE(info->has_ethernet_address);
    EXPECT_EQ(info->mtu, 1600u);
    EXPECT_TRUE(info->up());

    EXPECT_EQ(nl::interface_index("lb0").value(), info->ifindex);
    EXPECT_EQ(nl::interface_name(info->ifindex).value(), "lb0");
    EXPECT_EQ(nl::interface_mac("lb0").value(), kLbMac);
    EXPECT_EQ(nl::interface_mtu("lb0").value(), 1600u);

    // Loopback has no Ethernet address to put in a frame.
    auto lo = nl::interface_mac("lo");
    ASSERT_FALSE(lo);
    EXPECT_EQ(lo.error().code, EADDRNOTAVAIL);
}

TEST_F(NeighborTest, UnknownInterfaceIsNamed) {
    auto index = nl::interface_index("eth9");
    ASSERT_FALSE(index);
    EXPECT_EQ(index.error().code, ENODEV);
    EXPECT_EQ(index.error().message(), "no such interface eth9: No such device");

    auto by_index = nl::link_info(99999);
    ASSERT_FALSE(by_index);
    EXPECT_EQ(by_index.error().message(), "no such interface index 99999: No such device");

    auto resolver = nl::NeighborResolver::open("eth9");
    ASSERT_FALSE(resolver);
    EXPECT_EQ(resolver.error().code, ENODEV);
    EXPECT_NE(resolver.error().message().find("no such interface eth9"), std::string::npos);

    auto watcher = nl::NeighborWatcher::open("eth9", kHop4, {});
    ASSERT_FALSE(watcher);
    EXPECT_NE(watcher.error().message().find("no such interface eth9"), std::string::npos);

    auto too_long = nl::interface_index("a-name-far-too-long-for-linux");
    ASSERT_FALSE(too_long);
    EXPECT_EQ(too_long.error().code, EINVAL);
}

// --- resolution --------------------------------------------------------------

TEST_F(NeighborTest, ResolvesIpv4NextHop) {
    auto resolver = nl::NeighborResolver::open("lb0");
    ASSERT_TRUE(resolver) << resolver.error().message();
    auto before = resolver->lookup(kHop4);
    ASSERT_TRUE(before) << before.error().message();
    EXPECT_FALSE(before->has_value()) << "a fresh namespace has no entry";

    auto start = Clock::now();
    auto resolved = resolver->resolve(kHop4, 2s);
    auto took = Clock::now() - start;
    ASSERT_TRUE(resolved) << resolved.error().message();
    EXPECT_EQ(*resolved, kHopMac);
    EXPECT_LT(took, 1s);

    auto entry = resolver->lookup(kHop4);
    ASSERT_TRUE(entry && entry->has_value());
    EXPECT_TRUE((*entry)->usable());
    EXPECT_EQ((*entry)->state, NUD_REACHABLE) << nl::state_name((*entry)->state);
    EXPECT_FALSE((*entry)->managed()) << "resolve() does not mark entries managed";
}

TEST_F(NeighborTest, ResolvesIpv6NextHop) {
    auto resolver = nl::NeighborResolver::open("lb0");
    ASSERT_TRUE(resolver) << resolver.error().message();
    auto resolved = resolver->resolve(kHop6, 2s);
    ASSERT_TRUE(resolved) << resolved.error().message();
    EXPECT_EQ(*resolved, kHopMac);

    auto all = nl::dump_neighbors(resolver->ifindex(), 6);
    ASSERT_TRUE(all) << all.error().message();
    bool seen = false;
    for (const auto& n : *all) seen |= n.address == kHop6 && n.mac == kHopMac;
    EXPECT_TRUE(seen);
}

TEST_F(NeighborTest, StaticEntryIsReturnedAndLeftAlone) {
    // A static entry that disagrees with what the hop would answer: the
    // operator's word wins, and resolution must not probe it away.
    const MacAddress pinned = mac("02:00:00:00:77:77");
    lab_->in_lb("neigh add 192.0.2.2 dev lb0 lladdr 02:00:00:00:77:77 nud permanent");
    auto resolver = nl::NeighborResolver::open("lb0");
    ASSERT_TRUE(resolver);

    auto resolved = resolver->resolve(kHop4, 1s);
    ASSERT_TRUE(resolved) << resolved.error().message();
    EXPECT_EQ(*resolved, pinned);
    ASSERT_TRUE(resolver->trigger(kHop4));

    auto entry = resolver->lookup(kHop4);
    ASSERT_TRUE(entry && entry->has_value());
    EXPECT_EQ((*entry)->state, NUD_PERMANENT) << nl::state_name((*entry)->state);
    EXPECT_EQ((*entry)->mac, pinned);
}

TEST_F(NeighborTest, NextHopThatNeverAnswersTimesOut) {
    auto resolver = nl::NeighborResolver::open("lb0");
    ASSERT_TRUE(resolver);
    for (const char* silent : {"192.0.2.99", "2001:db8::99"}) {
        auto start = Clock::now();
        auto resolved = resolver->resolve(ip(silent), 500ms);
        auto took = Clock::now() - start;
        ASSERT_FALSE(resolved) << silent;
        EXPECT_EQ(resolved.error().code, ETIMEDOUT);
        std::string text = resolved.error().message();
        EXPECT_NE(text.find(std::string("resolve next hop ") + silent +
                            " on lb0: no usable neighbour entry after 0.5 s"),
                  std::string::npos)
            << text;
        EXPECT_NE(text.find("entry INCOMPLETE"), std::string::npos) << text;
        EXPECT_NE(text.find("check `ip neigh show dev lb0`"), std::string::npos) << text;
        EXPECT_GE(took, 500ms);
        EXPECT_LT(took, 1500ms);
    }
}

TEST_F(NeighborTest, FailedEntryIsRetried) {
    // A FAILED entry from an earlier outage: resolution starts over.
    lab_->in_lb("neigh add 192.0.2.2 dev lb0 nud failed");
    auto resolver = nl::NeighborResolver::open("lb0");
    ASSERT_TRUE(resolver);
    auto start = Clock::now();
    auto resolved = resolver->resolve(kHop4, 2s);
    ASSERT_TRUE(resolved) << resolved.error().message();
    EXPECT_EQ(*resolved, kHopMac);
    EXPECT_LT(Clock::now() - start, 1s);
}

TEST_F(NeighborTest, HandMadeIncompleteEntryIsExplained) {
    // `nud incomplete` by hand: the kernel never probes such an entry.
    lab_->in_lb("neigh add 192.0.2.2 dev lb0 nud incomplete");
    auto resolver = nl::NeighborResolver::open("lb0");
    ASSERT_TRUE(resolver);
    auto resolved = resolver->resolve(kHop4, 300ms);
    ASSERT_FALSE(resolved);
    EXPECT_NE(resolved.error().message().find("remove it: `ip neigh del 192.0.2.2 dev lb0`"),
              std::string::npos)
        << resolved.error().message();
}

// --- keeping it current ------------------------------------------------------

TEST_F(NeighborTest, WatcherThreadFollowsPeerMacChange) {
    auto resolver = nl::NeighborResolver::open("lb0");
    ASSERT_TRUE(resolver);
    auto mac4 = resolver->resolve(kHop4, 2s);
    auto mac6 = resolver->resolve(kHop6, 2s);
    ASSERT_TRUE(mac4 && mac6);

    EventLog log4, log6;
    auto w4 = nl::NeighborWatcher::open("lb0", kHop4, std::ref(log4), {.known = *mac4});
    ASSERT_TRUE(w4) << w4.error().message();
    auto w6 = nl::NeighborWatcher::open("lb0", kHop6, std::ref(log6), {.known = *mac6});
    ASSERT_TRUE(w6) << w6.error().message();
    auto t4 = nl::NeighborWatchThread::start(std::move(*w4));
    auto t6 = nl::NeighborWatchThread::start(std::move(*w6));
    ASSERT_TRUE(t4 && t6);

    // The kernel now keeps both entries resolved on its own.
    auto entry = resolver->lookup(kHop4);
    ASSERT_TRUE(entry && entry->has_value());
    EXPECT_TRUE((*entry)->managed());

    // The next hop is replaced by a box with another MAC, which announces itself.
    const MacAddress moved = mac("02:00:00:00:0b:02");
    lab_->in_hop("link set dev hop0 address 02:00:00:00:0b:02");

    auto events4 = log4.wait_for(1, 3s);
    auto events6 = log6.wait_for(1, 3s);
    ASSERT_EQ(events4.size(), 1u) << describe(events4);
    EXPECT_EQ(events4[0].mac, moved) << describe(events4);
    ASSERT_EQ(events6.size(), 1u) << describe(events6);
    EXPECT_EQ(events6[0].mac, moved) << describe(events6);
    EXPECT_TRUE(t4->running());
}

TEST_F(NeighborTest, WatcherEventLoopFollowsStaticOverrideAndDeletion) {
    auto resolver = nl::NeighborResolver::open("lb0");
    ASSERT_TRUE(resolver);
    ASSERT_TRUE(resolver->resolve(kHop4, 2s));

    // Started without a known MAC: the first read reports the current one.
    std::vector<nl::NextHopEvent> events;
    auto watcher = nl::NeighborWatcher::open(
        "lb0", kHop4, [&](const nl::NextHopEvent& e) { events.push_back(e); });
    ASSERT_TRUE(watcher) << watcher.error().message();
    pump(*watcher, 2s, [&] { return events.size() >= 1; });
    ASSERT_EQ(events.size(), 1u) << describe(events);
    EXPECT_EQ(events[0].mac, kHopMac);
    EXPECT_EQ(watcher->current(), kHopMac);

    // An operator pins another MAC.
    const MacAddress pinned = mac("02:00:00:00:0c:0c");
    lab_->in_lb("neigh replace 192.0.2.2 dev lb0 lladdr 02:00:00:00:0c:0c nud permanent");
    pump(*watcher, 2s, [&] { return events.size() >= 2; });
    ASSERT_EQ(events.size(), 2u) << describe(events);
    EXPECT_EQ(events[1].mac, pinned);
    EXPECT_EQ(events[1].state, NUD_PERMANENT);
    EXPECT_FALSE(watcher->managed()) << "a static entry is left static";

    // ... and removes the pin: the watcher has the kernel resolve it again.
    lab_->in_lb("neigh del 192.0.2.2 dev lb0");
    pump(*watcher, 2s, [&] { return events.size() >= 3; });
    ASSERT_EQ(events.size(), 3u) << describe(events);
    EXPECT_EQ(events[2].mac, kHopMac);
    EXPECT_TRUE(watcher->managed());
}

TEST_F(NeighborTest, WatcherRepairsAdministrativeFailure) {
    auto resolver = nl::NeighborResolver::open("lb0");
    ASSERT_TRUE(resolver);
    ASSERT_TRUE(resolver->resolve(kHop4, 2s));

    std::vector<nl::NextHopEvent> events;
    auto watcher = nl::NeighborWatcher::open(
        "lb0", kHop4, [&](const nl::NextHopEvent& e) { events.push_back(e); }, {.known = kHopMac});
    ASSERT_TRUE(watcher) << watcher.error().message();

    // `nud failed` by hand also drops the managed flag. The watcher marks the
    // entry managed again, which has the kernel resolve it at once; the hop
    // still answers, so the MAC in use ends where it was.
    lab_->in_lb("neigh change 192.0.2.2 dev lb0 nud failed");
    auto repaired = [&] {
        auto entry = resolver->lookup(kHop4);
        return entry && entry->has_value() && (*entry)->managed() &&
               (*entry)->state == NUD_REACHABLE;
    };
    pump(*watcher, 2s, repaired);
    EXPECT_TRUE(repaired());
    EXPECT_EQ(watcher->current(), kHopMac) << describe(events);
    if (!events.empty()) {
        EXPECT_EQ(events.back().mac, kHopMac) << describe(events);
    }
}

TEST_F(NeighborTest, WatcherReportsLossAndRecovery) {
    // Short timers on lb0 so that a silent next hop is found out within about
    // a second: reachable for 0.2-0.6 s, no delay before probing, two unicast
    // probes 100 ms apart.
    lab_->sysctl_lb(
        "net.ipv4.neigh.lb0.base_reachable_time_ms=400 net.ipv4.neigh.lb0.delay_first_probe_time=0"
        " net.ipv4.neigh.lb0.retrans_time_ms=100 net.ipv4.neigh.lb0.ucast_solicit=2");
    auto resolver = nl::NeighborResolver::open("lb0");
    ASSERT_TRUE(resolver);
    auto known = resolver->resolve(kHop4, 2s);
    ASSERT_TRUE(known);

    EventLog log;
    auto watcher = nl::NeighborWatcher::open("lb0", kHop4, std::ref(log), {.known = *known});
    ASSERT_TRUE(watcher) << watcher.error().message();
    auto thread = nl::NeighborWatchThread::start(std::move(*watcher));
    ASSERT_TRUE(thread);

    // The hop goes silent (its address is gone). XDP_TX traffic would not
    // tell the kernel; the watcher's re-confirmation of the STALE entry does.
    auto start = Clock::now();
    lab_->in_hop("addr del 192.0.2.2/24 dev hop0");
    auto events = log.wait_for(1, 4s);
    ASSERT_EQ(events.size(), 1u) << describe(events);
    EXPECT_FALSE(events[0].mac.has_value());
    EXPECT_EQ(events[0].state, NUD_FAILED);
    EXPECT_LT(Clock::now() - start, 3s);

    // It comes back (say, rebooted) and talks to us: its ARP request updates
    // the entry, and the MAC is reported again.
    lab_->in_hop("addr add 192.0.2.2/24 dev hop0");
    sh("ip netns exec " + lab_->hop() + " ping -c 1 -W 1 -q 192.0.2.1");
    events = log.wait_for(2, 3s);
    ASSERT_EQ(events.size(), 2u) << describe(events);
    EXPECT_EQ(events[1].mac, kHopMac);
    EXPECT_TRUE(thread->running());
}

TEST_F(NeighborTest, PassiveWatcherDoesNotTouchTheTable) {
    auto resolver = nl::NeighborResolver::open("lb0");
    ASSERT_TRUE(resolver);
    ASSERT_TRUE(resolver->resolve(kHop4, 2s));
    std::vector<nl::NextHopEvent> events;
    auto watcher = nl::NeighborWatcher::open(
        "lb0", kHop4, [&](const nl::NextHopEvent& e) { events.push_back(e); },
        {.known = kHopMac, .manage = false});
    ASSERT_TRUE(watcher) << watcher.error().message();
    pump(*watcher, 200ms, [] { return false; });
    EXPECT_TRUE(events.empty()) << describe(events);
    auto entry = resolver->lookup(kHop4);
    ASSERT_TRUE(entry && entry->has_value());
    EXPECT_FALSE((*entry)->managed());
}

}  // namespace
