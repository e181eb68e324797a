// SPDX-License-Identifier: Apache-2.0
// xlb::conntrack over the real map: entries written into a loaded balancer's
// xlb_conntrack5 with known backends, generations and times (the clock the
// data path stamps them with), then counted, listed, flushed and expired
// through batched lookups and deletes, in batches small enough that every
// operation spans several syscalls.
#include <gtest/gtest.h>
#include <netinet/in.h>

#include "xlb/bpf/programs.h"
#include "xlb/datapath/setup.h"
#include "xlb/kernel/conntrack_bpf_table.h"

namespace xlb::conntrack {
namespace {

using namespace std::chrono_literals;

net::IpAddress ip(const char* t) { return *net::IpAddress::parse(t); }

class ConntrackTableTest : public ::testing::Test {
protected:
    void SetUp() override {
        auto lb = bpf::LbProgram::load({16, 64, 4096});
        ASSERT_TRUE(lb.has_value()) << lb.error();
        lb_.emplace(std::move(*lb));
        ASSERT_TRUE(lb_->backends().put(1, datapath::backend_entry(ip("203.0.113.11"), 1)));
        ASSERT_TRUE(lb_->backends().put(2, datapath::backend_entry(ip("203.0.113.12"), 2)));
        ASSERT_TRUE(lb_->backends().put(3, datapath::released_backend_entry(5)));
        // The balancer's VIPs: a slot names its flow by its VIP, and the
        // table lists only entries of VIPs the balancer has. The third is
        // one the configuration below does not know (counted as no VIP).
        ASSERT_TRUE(lb_->put_vip(datapath::vip_key(ip("198.51.100.10"), 80, IPPROTO_TCP), {1, 0}));
        ASSERT_TRUE(lb_->put_vip(datapath::vip_key(ip("198.51.100.53"), 53, IPPROTO_UDP), {2, 0}));
        ASSERT_TRUE(lb_->put_vip(datapath::vip_key(ip("198.51.100.99"), 80, IPPROTO_TCP), {3, 0}));
        auto table = BpfTable::open(
            lb_->conntrack(), lb_->backends(), [this] { ++erased_; }, 7);
        ASSERT_TRUE(table.has_value()) << table.error();
        table_.emplace(std::move(*table));
        config::VipSpec web;
        web.address = ip("198.51.100.10");
        web.port = 80;
        web.conntrack_idle_timeout = 60s;
        config::VipSpec dns;
        dns.address = ip("198.51.100.53");
        dns.port = 53;
        dns.protocol = config::Protocol::kUdp;
        auto backends = table_->backends();
        ASSERT_TRUE(backends.has_value()) << backends.error();
        context_ = Context({vip_info(web), vip_info(dns)}, std::move(*backends));
    }

    // An entry seen `idle` ago, on the data path's clock.
    void put(std::uint32_t n, const char* vip, std::uint16_t port, std::uint8_t proto,
             std::uint32_t backend, std::uint32_t generation, std::chrono::milliseconds idle) {
        const net::Endpoint client{net::IpAddress::v4(192, 0, static_cast<std::uint8_t>(n >> 8),
                                                      static_cast<std::uint8_t>(n)),
                                   static_cast<std::uint16_t>(10000 + n)};
        const xlb_flow_key key = datapath::flow_key(client, {ip(vip), port}, proto);
        const Units now = table_->now();
        const auto idle_units =
            static_cast<Units>(std::chrono::duration_cast<std::chrono::nanoseconds>(idle).count() >>
                               XLB_CT_TIME_SHIFT);
        ASSERT_TRUE(lb_->conntrack().put(
            key, xlb_ct_value{backend, generation, now - idle_units - 10, now - idle_units}));
    }

    std::optional<bpf::LbProgram> lb_;
    std::optional<BpfTable> table_;
    Context context_;
    int erased_ = 0;  // calls of the table's ErasedHook
};

TEST_F(ConntrackTableTest, CountListFlushAndExpireKnownEntries) {
    EXPECT_EQ(table_->capacity(), 4096u);
    // web: 30 fresh on .11, 10 idle 2 min on .11 (expire at 60 s), 5 stale on
    // .12 (generation 1, live 2), 3 on a released id; dns: 20 fresh on .12,
    // 4 idle 40 s (expire at 30 s); 2 of no VIP.
    std::uint32_t n = 0;
    for (int i = 0; i < 30; ++i) put(n++, "198.51.100.10", 80, IPPROTO_TCP, 1, 1, 0ms);
    for (int i = 0; i < 10; ++i) put(n++, "198.51.100.10", 80, IPPROTO_TCP, 1, 1, 120s);
    for (int i = 0; i < 5; ++i) put(n++, "198.51.100.10", 80, IPPROTO_TCP, 2, 1, 0ms);
    for (int i = 0; i < 3; ++i) put(n++, "198.51.100.10", 80, IPPROTO_TCP, 3, 4, 0ms);
    for (int i = 0; i < 20; ++i) put(n++, "198.51.100.53", 53, IPPROTO_UDP, 2, 2, 0ms);
    for (int i = 0; i < 4; ++i) put(n++, "198.51.100.53", 53, IPPROTO_UDP, 2, 2, 40s);
    for (int i = 0; i < 2; ++i) put(n++, "198.51.100.99", 80, IPPROTO_TCP, 1, 1, 0ms);

    auto all = count(*table_, context_, Filter{});
    ASSERT_TRUE(all.has_value()) << all.error();
    EXPECT_EQ(all->counts.scanned, 74u);
    EXPECT_EQ(all->counts.no_vip, 2u);
    ASSERT_EQ(all->counts.vips.size(), 2u);
    const VipCount& web = all->counts.vips[0];
    EXPECT_EQ(web.vip, "198.51.100.10:80/tcp");
    EXPECT_EQ(web.entries, 48u);
    EXPECT_EQ(web.stale, 8u) << "5 of an old generation, 3 of a released id";
    ASSERT_EQ(web.backends.size(), 2u);
    EXPECT_EQ(web.backends[0].entries, 40u);
    EXPECT_EQ(web.backends[1].entries, 5u);
    EXPECT_EQ(all->counts.vips[1].entries, 24u);

    Filter active;
    active.vip = "198.51.100.10:80/tcp";
    active.backend = ip("203.0.113.11");
    active.active_within = 10s;
    EXPECT_EQ(count(*table_, context_, active)->counts.matched, 30u);

    Filter clients;
    clients.client = *net::Prefix::parse("192.0.0.0/28");
    auto listed = list(*table_, context_, clients, 10);
    ASSERT_TRUE(listed.has_value()) << listed.error();
    EXPECT_EQ(listed->matched, 16u);
    EXPECT_TRUE(listed->truncated);
    EXPECT_EQ(listed->rows.size(), 10u);
    for (const Row& r : listed->rows) {
        EXPECT_EQ(r.vip, "198.51.100.10:80/tcp");
        EXPECT_EQ(r.backend, "203.0.113.11");
        EXPECT_TRUE(r.valid);
        EXPECT_LT(r.idle_ms, 1000u);
    }

    Filter stale;
    stale.stale_only = true;
    auto dry = flush(*table_, context_, stale, true);
    ASSERT_TRUE(dry.has_value()) << dry.error();
    EXPECT_EQ(dry->matched, 8u);
    EXPECT_EQ(dry->deleted, 0u);
    EXPECT_EQ(erased_, 0) << "a dry run deletes nothing";
    auto done = flush(*table_, context_, stale, false);
    ASSERT_TRUE(done.has_value()) << done.error();
    EXPECT_EQ(done->deleted, 8u);
    EXPECT_EQ(erased_, 1) << "the data path must stop using copies of what was deleted";
    EXPECT_EQ(count(*table_, context_, Filter{})->counts.scanned, 66u);

    auto swept = sweep(*table_, context_, 86'400'000);  // clock ticking for a day
    ASSERT_TRUE(swept.has_value()) << swept.error();
    EXPECT_EQ(swept->expired, 14u) << "10 web entries idle 2 min, 4 dns entries idle 40 s";
    EXPECT_EQ(swept->entries, 52u);
    EXPECT_EQ(erased_, 2);
    ASSERT_TRUE(sweep(*table_, context_, 86'400'000));
    EXPECT_EQ(erased_, 2) << "a sweep that deletes nothing";
    EXPECT_EQ(count(*table_, context_, Filter{})->counts.scanned, 52u);
}

TEST_F(ConntrackTableTest, EraseSkipsKeysAlreadyGone) {
    std::vector<xlb_flow_key> keys;
    for (std::uint32_t n = 0; n < 20; ++n) put(n, "198.51.100.10", 80, IPPROTO_TCP, 1, 1, 0ms);
    ASSERT_TRUE(table_->scan([&](std::span<const Entry> batch) {
        for (const Entry& e : batch) keys.push_back(e.key);
    }));
    ASSERT_EQ(keys.size(), 20u);
    // Gone before the batched delete reaches them: the first, one in the
    // middle of a batch, the last.
    for (std::size_t i : {0u, 9u, 19u}) ASSERT_TRUE(lb_->conntrack().erase(keys[i]));
    auto deleted = table_->erase(keys);
    ASSERT_TRUE(deleted.has_value()) << deleted.error();
    EXPECT_EQ(*deleted, 17u);
    EXPECT_EQ(erased_, 1);
    ASSERT_TRUE(table_->erase(keys));
    EXPECT_EQ(erased_, 1) << "nothing left to delete";
    EXPECT_EQ(count(*table_, context_, Filter{})->counts.scanned, 0u);
}

TEST_F(ConntrackTableTest, ScanOfAFullTable) {
    auto big = BpfTable::open(lb_->conntrack(), lb_->backends(), {});
    ASSERT_TRUE(big.has_value());
    for (std::uint32_t n = 0; n < 4096; ++n) put(n, "198.51.100.10", 80, IPPROTO_TCP, 1, 1, 0ms);
    auto r = count(*big, context_, Filter{});
    ASSERT_TRUE(r.has_value()) << r.error();
    // As many flows as entries do not all fit (where both buckets of a flow
    // are full, a later one replaces an earlier one); the scan sees every
    // entry there is.
    EXPECT_EQ(r->counts.scanned, lb_->conntrack().count());
    EXPECT_GT(r->counts.scanned, 3000u);
    EXPECT_LT(r->counts.scanned, 4096u);
    EXPECT_EQ(r->counts.matched, r->counts.scanned);
}

}  // namespace
}  // namespace xlb::conntrack
