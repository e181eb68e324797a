// SPDX-License-Identifier: Apache-2.0
// xlb::conntrack on a fake table and clock: judging entries (VIP match with
// the wildcard, validity by generation, idle and age across the 32-bit wrap),
// filters, counts, lists, flushes, expiry by each VIP's idle timeout, and the
// flood flags.
#include <gtest/gtest.h>
#include <netinet/in.h>

#include "fake_conntrack.h"
#include "xlb/conntrack/table.h"

namespace xlb::conntrack {
namespace {

using test::FakeConntrack;
using namespace std::chrono_literals;

net::IpAddress ip(const char* text) { return *net::IpAddress::parse(text); }
net::Endpoint ep(const char* text) { return *net::Endpoint::parse(text); }

config::VipSpec vip(const char* address, std::uint16_t port, config::Protocol protocol,
                    std::optional<config::Duration> idle = std::nullopt) {
    config::VipSpec v;
    v.address = ip(address);
    v.port = port;
    v.protocol = protocol;
    v.conntrack_idle_timeout = idle;
    return v;
}

constexpr std::uint8_t kTcp = IPPROTO_TCP;
constexpr std::uint8_t kUdp = IPPROTO_UDP;
// The program's clock has been ticking for a day: only idle times decide.
constexpr std::uint64_t kClockRunning = 86'400'000;

// VIPs: web 198.51.100.10:80/tcp (idle 10m), any 198.51.100.10:0/tcp
// (wildcard, default 1h), dns 198.51.100.53:53/udp (default 30s).
// Backends: 1 = 203.0.113.11 gen 1, 2 = 203.0.113.12 gen 3, 3 = 203.0.113.11
// gen 1 (the same address in another VIP), 9 released.
struct Fixture : ::testing::Test {
    FakeConntrack table{4096, 2};
    Context context;

    void SetUp() override {
        table.set_backend(1, ip("203.0.113.11"), 1);
        table.set_backend(2, ip("203.0.113.12"), 3);
        table.set_backend(3, ip("203.0.113.11"), 1);
        table.set_backend(9, ip("203.0.113.19"), 0);
        std::vector<VipInfo> vips{vip_info(vip("198.51.100.10", 80, config::Protocol::kTcp, 10min)),
                                  vip_info(vip("198.51.100.10", 0, config::Protocol::kTcp)),
                                  vip_info(vip("198.51.100.53", 53, config::Protocol::kUdp))};
        context = Context(std::move(vips), *table.backends());
    }
};

TEST(ConntrackTime, ElapsedAcrossTheWrap) {
    EXPECT_EQ(elapsed_ms(1000, 1000), 0u);
    // 1000 units of 2^20 ns = 1048.576 ms.
    EXPECT_EQ(elapsed_ms(2000, 1000), 1048u);
    EXPECT_EQ(elapsed_ms(100, 0xffffff00u), 373u) << "356 units across the wrap";
    EXPECT_EQ(elapsed_ms(1000, 1005), 0u) << "refreshed after the clock was read";
    EXPECT_EQ(units_from_ns(3ULL << 20), 3u);
    EXPECT_EQ(units_from_ns((1ULL << 52) + (5ULL << 20)), 5u) << "truncated to 32 bits";
}

TEST_F(Fixture, JudgesVipBackendValidityAndTimes) {
    table.set_now_ms(100'000);
    const Units now = table.now();
    Entry exact{datapath::flow_key(ep("192.0.2.1:40000"), ep("198.51.100.10:80"), kTcp),
                {1, 1, FakeConntrack::units(40'000), FakeConntrack::units(90'000)}};
    View v = judge(context, exact, now);
    ASSERT_NE(v.vip, nullptr);
    EXPECT_EQ(v.vip->key, "198.51.100.10:80/tcp");
    ASSERT_NE(v.backend, nullptr);
    EXPECT_EQ(v.backend->text, "203.0.113.11");
    EXPECT_TRUE(v.valid);
    EXPECT_NEAR(static_cast<double>(v.idle_ms), 10'000, 2);
    EXPECT_NEAR(static_cast<double>(v.age_ms), 60'000, 2);

    Entry wildcard{datapath::flow_key(ep("192.0.2.1:40000"), ep("198.51.100.10:443"), kTcp),
                   {2, 2, 0, 0}};
    v = judge(context, wildcard, now);
    ASSERT_NE(v.vip, nullptr);
    EXPECT_EQ(v.vip->key, "198.51.100.10:0/tcp");
    EXPECT_FALSE(v.valid) << "generation 2, backend 2 is at 3";

    Entry udp_on_tcp_vip{datapath::flow_key(ep("192.0.2.1:40000"), ep("198.51.100.10:80"), kUdp),
                         {1, 1, 0, 0}};
    EXPECT_EQ(judge(context, udp_on_tcp_vip, now).vip, nullptr);

    Entry released{datapath::flow_key(ep("192.0.2.1:40000"), ep("198.51.100.53:53"), kUdp),
                   {9, 0, 0, 0}};
    v = judge(context, released, now);
    EXPECT_EQ(v.backend, nullptr) << "a released id names no backend";
    EXPECT_FALSE(v.valid) << "generation 0 is never valid";
}

// The known traffic of the count, list and flush tests.
void fill(FakeConntrack& t) {
    t.set_now_ms(1'000'000);
    auto at = [](std::uint64_t ms) { return FakeConntrack::units(ms); };
    // web: three to backend 1 (one idle 20 min: expired), one to backend 2.
    t.add(ep("192.0.2.1:1000"), ep("198.51.100.10:80"), kTcp, 1, 1, at(0), at(999'000));
    t.add(ep("192.0.2.2:1000"), ep("198.51.100.10:80"), kTcp, 1, 1, at(0), at(995'000));
    t.add(ep("192.0.2.3:1000"), ep("198.51.100.10:80"), kTcp, 1, 1, at(0), at(0));
    t.add(ep("198.18.0.1:1000"), ep("198.51.100.10:80"), kTcp, 2, 3, at(0), at(999'500));
    // wildcard: one stale entry of backend 2, idle 100 s.
    t.add(ep("192.0.2.4:1000"), ep("198.51.100.10:8080"), kTcp, 2, 2, at(0), at(900'000));
    // dns: one fresh, one idle 31 s (expired).
    t.add(ep("192.0.2.5:53000"), ep("198.51.100.53:53"), kUdp, 3, 1, at(0), at(999'000));
    t.add(ep("192.0.2.6:53000"), ep("198.51.100.53:53"), kUdp, 3, 1, at(0), at(969'000));
    // no VIP: a deleted VIP's TCP entry idle 10 s (kept: tcp default 1h).
    t.add(ep("192.0.2.7:1000"), ep("198.51.100.99:80"), kTcp, 1, 1, at(0), at(990'000));
}

TEST_F(Fixture, CountsPerVipAndBackend) {
    fill(table);
    auto r = count(table, context, Filter{});
    ASSERT_TRUE(r.has_value()) << r.error();
    EXPECT_EQ(r->capacity, 4096u);
    EXPECT_EQ(r->counts.scanned, 8u);
    EXPECT_EQ(r->counts.matched, 8u);
    EXPECT_EQ(r->counts.no_vip, 1u);
    ASSERT_EQ(r->counts.vips.size(), 3u);
    const VipCount& any = r->counts.vips[0];
    EXPECT_EQ(any.vip, "198.51.100.10:0/tcp");
    EXPECT_EQ(any.entries, 1u);
    EXPECT_EQ(any.stale, 1u);
    const VipCount& web = r->counts.vips[1];
    EXPECT_EQ(web.vip, "198.51.100.10:80/tcp");
    EXPECT_EQ(web.entries, 4u);
    EXPECT_EQ(web.stale, 0u);
    ASSERT_EQ(web.backends.size(), 2u);
    EXPECT_EQ(web.backends[0].backend, "203.0.113.11");
    EXPECT_EQ(web.backends[0].entries, 3u);
    EXPECT_EQ(web.backends[1].backend, "203.0.113.12");
    EXPECT_EQ(web.backends[1].entries, 1u);
    const VipCount& dns = r->counts.vips[2];
    EXPECT_EQ(dns.vip, "198.51.100.53:53/udp");
    EXPECT_EQ(dns.entries, 2u);

    Filter drain;
    drain.vip = "198.51.100.10:80/tcp";
    drain.backend = ip("203.0.113.11");
    drain.active_within = 2s;
    r = count(table, context, drain);
    ASSERT_TRUE(r.has_value());
    EXPECT_EQ(r->counts.scanned, 8u);
    EXPECT_EQ(r->counts.matched, 1u) << "only 192.0.2.1 sent within 2 s";
    drain.active_within = 10s;
    EXPECT_EQ(count(table, context, drain)->counts.matched, 2u);
    drain.active_within.reset();
    EXPECT_EQ(count(table, context, drain)->counts.matched, 3u);

    Filter by_backend;
    by_backend.backend = ip("203.0.113.11");
    EXPECT_EQ(count(table, context, by_backend)->counts.matched, 6u)
        << "ids 1 and 3 share the address: web, dns and the VIP-less entry";
}

TEST_F(Fixture, ListsWithFiltersAndLimit) {
    fill(table);
    Filter clients;
    clients.client = *net::Prefix::parse("192.0.2.0/30");
    auto r = list(table, context, clients, 100);
    ASSERT_TRUE(r.has_value()) << r.error();
    EXPECT_EQ(r->matched, 3u) << "192.0.2.1-3";
    EXPECT_FALSE(r->truncated);
    ASSERT_EQ(r->rows.size(), 3u);
    const Row& first = r->rows[0];
    EXPECT_EQ(client_of(first.entry.key).to_string(), "192.0.2.1:1000");
    EXPECT_EQ(destination_of(first.entry.key).to_string(), "198.51.100.10:80");
    EXPECT_EQ(first.vip, "198.51.100.10:80/tcp");
    EXPECT_EQ(first.backend, "203.0.113.11");
    EXPECT_TRUE(first.valid);
    EXPECT_NEAR(static_cast<double>(first.idle_ms), 1'000, 2);
    EXPECT_NEAR(static_cast<double>(first.age_ms), 1'000'000, 2);

    r = list(table, context, Filter{}, 5);
    ASSERT_TRUE(r.has_value());
    EXPECT_EQ(r->matched, 8u);
    EXPECT_EQ(r->rows.size(), 5u);
    EXPECT_TRUE(r->truncated);

    Filter stale;
    stale.stale_only = true;
    r = list(table, context, stale, 100);
    ASSERT_EQ(r->rows.size(), 1u);
    EXPECT_EQ(client_of(r->rows[0].entry.key).to_string(), "192.0.2.4:1000");
    EXPECT_FALSE(r->rows[0].valid);
}

TEST_F(Fixture, FlushNeedsASelectorAndHonoursDryRun) {
    fill(table);
    EXPECT_FALSE(flush(table, context, Filter{}, false).has_value());
    Filter f;
    f.backend = ip("203.0.113.12");
    auto dry = flush(table, context, f, true);
    ASSERT_TRUE(dry.has_value()) << dry.error();
    EXPECT_EQ(dry->matched, 2u);
    EXPECT_EQ(dry->deleted, 0u);
    EXPECT_TRUE(dry->dry_run);
    EXPECT_EQ(table.size(), 8u);
    auto done = flush(table, context, f, false);
    ASSERT_TRUE(done.has_value());
    EXPECT_EQ(done->matched, 2u);
    EXPECT_EQ(done->deleted, 2u);
    EXPECT_EQ(table.size(), 6u);
    EXPECT_EQ(count(table, context, f)->counts.matched, 0u);
}

TEST_F(Fixture, SweepExpiresByEachVipsIdleTimeout) {
    fill(table);
    auto r = sweep(table, context, kClockRunning);
    ASSERT_TRUE(r.has_value()) << r.error();
    // web's 10 min: the 192.0.2.3 entry (idle 1000 s) goes; dns's 30 s: the
    // entry idle 31 s goes; the wildcard's 1 h and the VIP-less TCP entry stay.
    EXPECT_EQ(r->expired, 2u);
    EXPECT_EQ(r->entries, 6u);
    EXPECT_EQ(table.size(), 6u);
    EXPECT_EQ(r->counts.no_vip, 1u);
    // An hour later everything TCP is idle over an hour, the UDP one too.
    table.set_now_ms(1'000'000 + 3'601'000);
    r = sweep(table, context, kClockRunning);
    ASSERT_TRUE(r.has_value());
    EXPECT_EQ(r->expired, 6u);
    EXPECT_EQ(table.size(), 0u);
}

TEST_F(Fixture, SweepWaitsUntilTheClockHasRunThroughTheTimeout) {
    // Just after an agent start the entries' idle times may be the time no
    // agent ticked the clock: nothing goes until the clock has run for the
    // VIP's timeout (dns: 30 s, web: 10 min).
    fill(table);
    auto r = sweep(table, context, 29'000);
    ASSERT_TRUE(r.has_value());
    EXPECT_EQ(r->expired, 0u);
    EXPECT_EQ(table.size(), 8u);
    r = sweep(table, context, 31'000);
    ASSERT_TRUE(r.has_value());
    EXPECT_EQ(r->expired, 1u) << "the dns entry idle 31 s";
    r = sweep(table, context, 601'000);
    ASSERT_TRUE(r.has_value());
    EXPECT_EQ(r->expired, 1u) << "the web entry idle 1000 s";
}

TEST_F(Fixture, SweepAcrossTheClockWrap) {
    // The clock wrapped after the entry was seen: still 5 s idle, kept.
    table.set_now_units(100);
    table.add(ep("192.0.2.1:1000"), ep("198.51.100.53:53"), kUdp, 3, 1, 0xffffff00u,
              100 - FakeConntrack::units(5'000));
    table.add(ep("192.0.2.2:1000"), ep("198.51.100.53:53"), kUdp, 3, 1, 0xffffff00u,
              100 - FakeConntrack::units(31'000));
    auto r = sweep(table, context, kClockRunning);
    ASSERT_TRUE(r.has_value());
    EXPECT_EQ(r->expired, 1u);
    EXPECT_EQ(table.size(), 1u);
}

TEST(ConntrackFlood, StartsAndEndsPerCpu) {
    FloodTracker t;
    std::vector<xlb_ct_cpu> cpus(3);
    const std::uint64_t s = 1'000'000'000;
    EXPECT_TRUE(t.update(cpus, 10 * s).empty());
    cpus[1].skipped = 500;
    cpus[1].last_skip_ns = 10 * s - 1000;
    auto changes = t.update(cpus, 10 * s);
    ASSERT_EQ(changes.size(), 1u);
    EXPECT_EQ(changes[0].cpu, 1u);
    EXPECT_TRUE(changes[0].started);
    EXPECT_EQ(changes[0].skipped, 500u);
    EXPECT_EQ(t.flooded(), std::vector<unsigned>{1});
    cpus[1].skipped = 2500;
    cpus[1].last_skip_ns = 11 * s;
    EXPECT_TRUE(t.update(cpus, 11 * s + s / 2).empty()) << "still within a second";
    changes = t.update(cpus, 12 * s + 1);
    ASSERT_EQ(changes.size(), 1u);
    EXPECT_FALSE(changes[0].started);
    EXPECT_EQ(changes[0].skipped, 2500u);
    EXPECT_TRUE(t.flooded().empty());
    // The next flood counts its own skips.
    cpus[1].skipped = 2600;
    cpus[1].last_skip_ns = 20 * s;
    changes = t.update(cpus, 20 * s);
    ASSERT_EQ(changes.size(), 1u);
    EXPECT_EQ(changes[0].skipped, 100u);
}

TEST_F(Fixture, ConnectionsPerBackendSplitActiveFromInactive) {
    auto at = [](std::uint64_t ms) { return FakeConntrack::units(ms); };
    table.set_now_ms(100'000);
    const net::Endpoint web = ep("198.51.100.10:80");
    // VIP 7: backend 1 has two active flows, one idle 20 s, one that sent
    // FIN and one RST (both recent); backend 2 one active, one whose
    // generation is gone (not a connection at all).
    table.add(ep("192.0.2.1:40000"), web, kTcp, 1, 1, at(1'000), at(99'000), 7);
    table.add(ep("192.0.2.2:40000"), web, kTcp, 1, 1, at(1'000), at(95'000), 7);
    table.add(ep("192.0.2.3:40000"), web, kTcp, 1, 1, at(1'000), at(80'000), 7);
    table.add(ep("192.0.2.4:40000"), web, kTcp, 1, 1, at(1'000), at(99'500), 7, XLB_CT_ENDED_FIN);
    table.add(ep("192.0.2.5:40000"), web, kTcp, 1, 1, at(1'000), at(99'500), 7, XLB_CT_ENDED_RST);
    table.add(ep("192.0.2.6:40000"), web, kTcp, 2, 3, at(1'000), at(99'000), 7);
    table.add(ep("192.0.2.7:40000"), web, kTcp, 2, 2, at(1'000), at(99'000), 7);
    // The same backend id under another VIP id counts apart.
    table.add(ep("192.0.2.8:40000"), web, kTcp, 1, 1, at(1'000), at(99'000), 8);

    auto report = connections(table, 10s);
    ASSERT_TRUE(report.has_value()) << report.error().message();
    EXPECT_EQ(report->active_within, config::Duration(10s));
    const auto& b = report->backends;
    ASSERT_EQ(b.size(), 3u);
    EXPECT_EQ(b.at({7, 1}).active, 2u);
    EXPECT_EQ(b.at({7, 1}).inactive, 3u);
    EXPECT_EQ(b.at({7, 2}).active, 1u);
    EXPECT_EQ(b.at({7, 2}).inactive, 0u);
    EXPECT_EQ(b.at({8, 1}).active, 1u);
    // A wider window takes the idle flow in.
    report = connections(table, 30s);
    ASSERT_TRUE(report.has_value());
    EXPECT_EQ(report->backends.at({7, 1}).active, 3u);
    EXPECT_EQ(report->backends.at({7, 1}).inactive, 2u);
}

TEST_F(Fixture, ConnectionsCacheSharesAScanWithinItsAge) {
    auto shared = std::make_shared<FakeConntrack>(4096, 2);
    shared->set_backend(1, ip("203.0.113.11"), 1);
    shared->set_now_ms(100'000);
    shared->add(ep("192.0.2.1:40000"), ep("198.51.100.10:80"), kTcp, 1, 1, 0,
                FakeConntrack::units(99'000), 7);
    auto now = std::chrono::steady_clock::time_point{} + 1h;
    ConnectionsCache cache(shared, 1000ms, [&] { return now; });
    auto first = cache.get();
    ASSERT_TRUE(first.has_value());
    EXPECT_EQ(first->backends.at({7, 1}).active, 1u);
    EXPECT_EQ(shared->scans(), 1u);
    shared->add(ep("192.0.2.2:40000"), ep("198.51.100.10:80"), kTcp, 1, 1, 0,
                FakeConntrack::units(99'000), 7);
    now += 900ms;
    EXPECT_EQ(cache.get()->backends.at({7, 1}).active, 1u) << "the same scan";
    EXPECT_EQ(shared->scans(), 1u);
    EXPECT_EQ(cache.get(30s)->backends.at({7, 1}).active, 2u) << "another window: a new scan";
    EXPECT_EQ(shared->scans(), 2u);
    now += 1100ms;
    EXPECT_EQ(cache.get(30s)->backends.at({7, 1}).active, 2u);
    EXPECT_EQ(shared->scans(), 3u) << "older than its age: scanned again";
}

TEST(ConntrackRates, NewFlowsPerSecondSinceTheLastReading) {
    RateMeter meter;
    const std::uint64_t s = 1'000'000'000;
    EXPECT_TRUE(meter.update(10 * s, {{1, 100}, {2, 5}}).empty()) << "nothing to compare with";
    auto rates = meter.update(12 * s, {{1, 300}, {2, 5}, {3, 40}});
    ASSERT_EQ(rates.size(), 2u) << "id 3 is new: no rate yet";
    EXPECT_DOUBLE_EQ(rates.at(1), 100.0);
    EXPECT_DOUBLE_EQ(rates.at(2), 0.0);
    rates = meter.update(13 * s, {{1, 350}, {3, 10}});
    ASSERT_EQ(rates.size(), 1u) << "id 3's counter went back (a reused id)";
    EXPECT_DOUBLE_EQ(rates.at(1), 50.0);
    EXPECT_TRUE(meter.update(13 * s, {{1, 400}}).empty()) << "no time passed";
}

}  // namespace
}  // namespace xlb::conntrack
