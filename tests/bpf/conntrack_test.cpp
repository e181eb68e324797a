// SPDX-License-Identifier: Apache-2.0
// The connection table under pressure (bpf/xlb_lb.bpf.c): what records an
// entry (not a SYN; the first ACK; UDP's first packet), the per-CPU insert
// budget (xlb_ct_cpu), the age of entries (created, last_seen), the
// established-flow path and its per-CPU flow cache.
//
// BPF_PROG_TEST_RUN runs the program on the calling thread's CPU, so the
// budget tests pin the thread to one CPU; counters are still summed over all
// CPUs, and times are compared with CLOCK_MONOTONIC_COARSE, the program's
// clock (bpf_ktime_get_coarse_ns) for the budget, and the entry-time clock
// the test ticks as the agent does (xlb_ct_clock) for entries.
#include <arpa/inet.h>
#include <sched.h>
#include <time.h>

#include <cstring>

#include "lb_fixture.h"
#include "xlb/bpf/ct_clock.h"
#include "xlb/ct_set.h"
#include "xlb/datapath/setup.h"

namespace xlb::test {
namespace {

constexpr std::uint32_t kVipId = 3;
constexpr std::uint64_t kSecond = 1'000'000'000ULL;

class ConntrackTest : public LbTest {
protected:
    void SetUp() override {
        LbTest::SetUp();
        for (std::uint32_t i = 0; i < 4; ++i) add_backend(10 + i, kBackendV4[i]);
    }

    std::vector<std::uint32_t> vip(std::uint8_t proto = kProtoTcp) {
        add_vip(kVipV4, kVipPort, proto, kVipId);
        return publish_maglev(kVipId, {{10}, {11}, {12}, {13}});
    }

    // Ticks the program's entry-time clock, as the agent's CtClockTicker
    // does, and returns the time it set.
    std::uint32_t ct_now() {
        const std::uint32_t now = bpf::ct_clock_now();
        lb().set_ct_clock(now);
        return now;
    }

    void set_budget(std::uint32_t rate, std::uint32_t burst) {
        xlb_config cfg = default_config();
        cfg.ct_insert_rate = rate;
        cfg.ct_insert_burst = burst;
        write_config(cfg);
    }

    // The frame must leave encapsulated, whole, to the backend the ring
    // gives its flow; returns that backend.
    std::uint32_t expect_balanced(const Bytes& frame, const Flow& flow,
                                  const std::vector<std::uint32_t>& ring) {
        const xlb_flow_key key = flow_key(flow);
        const std::uint32_t backend = expected_backend(ring, key);
        const Bytes expected = expected_encap(frame, backend_addr_[backend], key);
        EXPECT_EQ(checksum_errors(expected), "") << "test bug: expected frame is invalid";
        expect_outcome(frame, XDP_TX, XLB_OUT_TX, expected);
        return backend;
    }

    std::optional<xlb_ct_value> entry(const Flow& flow) {
        auto e = lb().conntrack().get(flow_key(flow));
        EXPECT_TRUE(e) << e.error().message();
        return e ? *e : std::nullopt;
    }

    // Counters summed over the CPUs; last_skip_ns: the latest.
    xlb_ct_cpu budget_state() {
        auto per_cpu = lb().ct_cpu().get_per_cpu(0);
        EXPECT_TRUE(per_cpu) << per_cpu.error().message();
        xlb_ct_cpu sum{};
        if (!per_cpu) return sum;
        for (const xlb_ct_cpu& c : *per_cpu) {
            sum.inserts += c.inserts;
            sum.skipped += c.skipped;
            sum.tokens += c.tokens;
            sum.refill_ns = std::max(sum.refill_ns, c.refill_ns);
            sum.last_skip_ns = std::max(sum.last_skip_ns, c.last_skip_ns);
        }
        return sum;
    }

    // Sets every CPU's bucket, as if its last refill had been at refill_ns.
    void set_bucket(std::uint64_t tokens, std::uint64_t refill_ns) {
        auto per_cpu = lb().ct_cpu().get_per_cpu(0);
        ASSERT_TRUE(per_cpu) << per_cpu.error().message();
        for (xlb_ct_cpu& c : *per_cpu) {
            c.tokens = tokens;
            c.refill_ns = refill_ns;
        }
        std::uint32_t key = 0;
        ASSERT_EQ(bpf_map_update_elem(lb().ct_cpu().fd(), &key, per_cpu->data(), BPF_ANY), 0)
            << std::strerror(errno);
    }

    static Bytes syn_frame(const Flow& flow) {
        FrameOptions syn;
        syn.tcp_flags = kTcpSyn;
        syn.payload.clear();
        return make_frame(flow, syn);
    }
};

Flow tcp_flow(std::uint16_t sport) { return Flow{kClientV4, kVipV4, sport, kVipPort, kProtoTcp}; }

TEST_F(ConntrackTest, ASynIsBalancedByTheRingAndRecordsNothing) {
    auto ring = vip();
    const Flow flow = tcp_flow(41000);
    expect_balanced(syn_frame(flow), flow, ring);
    EXPECT_FALSE(entry(flow));
    const xlb_ct_cpu budget = budget_state();
    EXPECT_EQ(budget.inserts, 0u);
    EXPECT_EQ(budget.skipped, 0u);
    EXPECT_EQ(vip_stats(kVipId).new_flows, 1u);
    EXPECT_EQ(vip_stats(kVipId).conntrack_hits, 0u);
}

TEST_F(ConntrackTest, TheFirstAckRecordsTheFlowWithItsTimes) {
    auto ring = vip();
    const Flow flow = tcp_flow(41001);
    const std::uint32_t syn_backend = expect_balanced(syn_frame(flow), flow, ring);
    const std::uint32_t before = ct_now();
    const std::uint32_t backend = expect_balanced(make_frame(flow), flow, ring);
    const std::uint32_t after = ct_now();
    EXPECT_EQ(backend, syn_backend) << "the handshake's packets go to one backend";

    auto e = entry(flow);
    ASSERT_TRUE(e);
    EXPECT_EQ(e->backend_id, backend);
    EXPECT_EQ(e->generation, 1u);
    EXPECT_EQ(e->created, e->last_seen);
    // Without a record yet, the times are the start of the slot's 16-bit
    // unit (XLB_CT_SEEN_SHIFT) that holds the insert.
    const std::uint32_t unit_start = (before >> XLB_CT_SEEN_SHIFT) << XLB_CT_SEEN_SHIFT;
    EXPECT_LE(e->created - unit_start, after - unit_start) << "created within the run";
    EXPECT_EQ(budget_state().inserts, 1u);

    // The next packet hits the entry.
    expect_balanced(make_frame(flow), flow, ring);
    EXPECT_EQ(vip_stats(kVipId).conntrack_hits, 1u);
    EXPECT_EQ(budget_state().inserts, 1u);
}

TEST_F(ConntrackTest, UdpRecordsOnTheFirstPacket) {
    auto ring = vip(kProtoUdp);
    const Flow flow{kClientV4, kVipV4, 41002, kVipPort, kProtoUdp};
    const std::uint32_t backend = expect_balanced(make_frame(flow), flow, ring);
    auto e = entry(flow);
    ASSERT_TRUE(e);
    EXPECT_EQ(e->backend_id, backend);
    EXPECT_EQ(e->generation, 1u);
    EXPECT_EQ(budget_state().inserts, 1u);
}

TEST_F(ConntrackTest, OverBudgetANewFlowIsBalancedButNotRecorded) {
    PinnedToOneCpu pinned;
    ASSERT_TRUE(pinned.ok());
    // Two entries per second, two at once: a new bucket holds two.
    set_budget(2, 2);
    auto ring = vip();
    const Flow first = tcp_flow(42000), second = tcp_flow(42001), third = tcp_flow(42002);
    expect_balanced(make_frame(first), first, ring);
    expect_balanced(make_frame(second), second, ring);
    const std::uint64_t before = bpf::monotonic_coarse_ns();
    expect_balanced(make_frame(third), third, ring);
    const std::uint64_t after = bpf::monotonic_coarse_ns();

    EXPECT_TRUE(entry(first));
    EXPECT_TRUE(entry(second));
    EXPECT_FALSE(entry(third));
    const xlb_ct_cpu budget = budget_state();
    EXPECT_EQ(budget.inserts, 2u);
    EXPECT_EQ(budget.skipped, 1u);
    EXPECT_GE(budget.last_skip_ns, before);
    EXPECT_LE(budget.last_skip_ns, after);
    EXPECT_LT(budget.tokens, kSecond) << "less than one entry's worth left";
    auto own = lb().ct_cpu().get_per_cpu(0);
    ASSERT_TRUE(own);
    EXPECT_EQ(own->at(static_cast<std::size_t>(pinned.cpu())).skipped, 1u)
        << "the skip is counted on the CPU that ran the packet";

    // The unrecorded flow keeps being balanced by the ring, and an
    // established one still hits its entry.
    expect_balanced(make_frame(third), third, ring);
    EXPECT_EQ(budget_state().skipped, 2u);
    expect_balanced(make_frame(first), first, ring);
    EXPECT_EQ(vip_stats(kVipId).conntrack_hits, 1u);
    EXPECT_EQ(budget_state().skipped, 2u);
}

TEST_F(ConntrackTest, TheBudgetRefillsWithTime) {
    PinnedToOneCpu pinned;
    ASSERT_TRUE(pinned.ok());
    set_budget(2, 2);
    auto ring = vip();
    // An empty bucket last refilled 0.6 s ago: 1.2 entries' worth by now.
    set_bucket(0, bpf::monotonic_coarse_ns() - 600'000'000ULL);
    const Flow a = tcp_flow(43000), b = tcp_flow(43001);
    expect_balanced(make_frame(a), a, ring);
    expect_balanced(make_frame(b), b, ring);
    EXPECT_TRUE(entry(a));
    EXPECT_FALSE(entry(b));
    xlb_ct_cpu budget = budget_state();
    EXPECT_EQ(budget.inserts, 1u);
    EXPECT_EQ(budget.skipped, 1u);

    // Long idle: the bucket fills up to the burst, no further.
    set_bucket(0, bpf::monotonic_coarse_ns() - 30 * kSecond);
    const Flow c = tcp_flow(43002), d = tcp_flow(43003), e = tcp_flow(43004);
    for (const Flow& f : {c, d, e}) expect_balanced(make_frame(f), f, ring);
    EXPECT_TRUE(entry(c));
    EXPECT_TRUE(entry(d));
    EXPECT_FALSE(entry(e));
    budget = budget_state();
    EXPECT_EQ(budget.inserts, 3u);
    EXPECT_EQ(budget.skipped, 2u);
}

TEST_F(ConntrackTest, WithoutABudgetEveryInsertIsCounted) {
    set_budget(0, 0);
    auto ring = vip();
    for (std::uint16_t sport = 44000; sport < 44020; ++sport) {
        const Flow f = tcp_flow(sport);
        expect_balanced(make_frame(f), f, ring);
        EXPECT_TRUE(entry(f));
    }
    const xlb_ct_cpu budget = budget_state();
    EXPECT_EQ(budget.inserts, 20u);
    EXPECT_EQ(budget.skipped, 0u);
    EXPECT_EQ(budget.last_skip_ns, 0u);
}

TEST_F(ConntrackTest, ReRecordingAStaleEntryGoesThroughTheBudget) {
    PinnedToOneCpu pinned;
    ASSERT_TRUE(pinned.ok());
    set_budget(2, 2);
    auto ring = vip();
    const Flow flow = tcp_flow(45000);
    const xlb_flow_key key = flow_key(flow);
    // Recorded for generation 1 of its backend, which is now generation 2:
    // stale, and the bucket is empty.
    const std::uint32_t backend = expected_backend(ring, key);
    const xlb_ct_value stale{backend, 1, 7, 8, kVipId};
    ASSERT_TRUE(lb().conntrack().put(key, stale));
    add_backend(backend, backend_addr_[backend], 2);
    set_bucket(0, bpf::monotonic_coarse_ns());

    expect_balanced(make_frame(flow), flow, ring);
    auto e = entry(flow);
    ASSERT_TRUE(e);
    EXPECT_EQ(std::memcmp(&*e, &stale, sizeof stale), 0) << "left as it was";
    EXPECT_EQ(budget_state().skipped, 1u);
    EXPECT_EQ(vip_stats(kVipId).conntrack_hits, 0u);
}

TEST_F(ConntrackTest, EntryTimesComeFromTheClockTheAgentTicks) {
    // Not the kernel's clock: the program reads xlb_ct_clock, which stands
    // still between ticks (and while no agent runs). One CPU, so that every
    // packet finds the copy the one before left in the flow cache.
    PinnedToOneCpu pinned;
    ASSERT_TRUE(pinned.ok());
    auto ring = vip();
    // The slot keeps the time in units of 2^XLB_CT_SEEN_SHIFT, which is
    // what the program stamps and the agent reads back (the high bits from
    // its own clock): times are compared in those units. t0 starts one.
    constexpr std::uint32_t kUnit = 1U << XLB_CT_SEEN_SHIFT;
    auto seen = [](std::uint32_t units) { return xlb_ct_seen16(units); };
    const std::uint32_t t0 = (ct_clock_ / kUnit + 1) * kUnit;
    lb().set_ct_clock(t0);
    const Flow flow = tcp_flow(45900);
    expect_balanced(make_frame(flow), flow, ring);
    auto e = entry(flow);
    ASSERT_TRUE(e);
    EXPECT_EQ(seen(e->created), seen(t0));
    EXPECT_EQ(seen(e->last_seen), seen(t0));
    // The agent's walk records when the entry was created (the program
    // keeps no such time).
    lb().conntrack().for_each([](const xlb_flow_key&, const xlb_ct_value&) {});
    const std::uint32_t created = entry(flow)->created;
    // A lookup in a later unit rewrites the slot's time (this one also
    // leaves a copy in the cache, checked at t1) ...
    const std::uint32_t t1 = t0 + kUnit;
    lb().set_ct_clock(t1);
    expect_balanced(make_frame(flow), flow, ring);
    EXPECT_EQ(seen(entry(flow)->last_seen), seen(t1));
    // ... the copy stands in for the table while it is younger than
    // XLB_CT_LOOKUP_UNITS, so the entry is not even looked up (its time
    // stays, though a unit has passed) ...
    lb().set_ct_clock(t1 + XLB_CT_LOOKUP_UNITS - 1);
    ASSERT_NE(seen(t1 + XLB_CT_LOOKUP_UNITS - 1), seen(t1));
    expect_balanced(make_frame(flow), flow, ring);
    EXPECT_EQ(seen(entry(flow)->last_seen), seen(t1));
    // ... and then the table is looked up again, and the entry refreshed: a
    // busy flow's last_seen is never XLB_CT_REFRESH_UNITS behind.
    const std::uint32_t t2 = t1 + XLB_CT_LOOKUP_UNITS;
    ASSERT_LT(t2 - t0, XLB_CT_REFRESH_UNITS);
    lb().set_ct_clock(t2);
    expect_balanced(make_frame(flow), flow, ring);
    EXPECT_EQ(seen(entry(flow)->last_seen), seen(t2));
    EXPECT_EQ(entry(flow)->created, created);
    EXPECT_EQ(vip_stats(kVipId).conntrack_hits, 3u);
}

TEST_F(ConntrackTest, ARecentlySeenEntryIsNotRewritten) {
    auto ring = vip();
    const Flow flow = tcp_flow(46000);
    const xlb_flow_key key = flow_key(flow);
    const std::uint32_t backend = expected_backend(ring, key);
    const std::uint32_t now = ct_now();
    // Seen earlier in the slot's current unit of time (2^XLB_CT_SEEN_SHIFT):
    // the program rewrites the time once the unit has passed.
    const std::uint32_t unit_start = now & ~((1U << XLB_CT_SEEN_SHIFT) - 1);
    const xlb_ct_value recent{backend, 1, now - 5000, unit_start};
    ASSERT_TRUE(lb().conntrack().put(key, recent));

    // The first packet is forwarded from the entry and leaves the times
    // alone (layout 5 keeps no VIP epoch or hash to fill in).
    expect_balanced(make_frame(flow), flow, ring);
    auto e = entry(flow);
    ASSERT_TRUE(e);
    EXPECT_EQ(e->backend_id, recent.backend_id);
    EXPECT_EQ(e->generation, recent.generation);
    EXPECT_EQ(e->created, recent.created);
    EXPECT_EQ(e->last_seen, recent.last_seen) << "refreshed though seen in this unit";
    EXPECT_EQ(e->vip_id, kVipId);
    // The next packet, from the entry alone, writes nothing at all.
    const xlb_ct_value filled = *e;
    expect_balanced(make_frame(flow), flow, ring);
    e = entry(flow);
    ASSERT_TRUE(e);
    EXPECT_EQ(std::memcmp(&*e, &filled, sizeof filled), 0);
    EXPECT_EQ(vip_stats(kVipId).conntrack_hits, 2u);
}

TEST_F(ConntrackTest, AnEntryNotSeenForASecondIsRefreshed) {
    auto ring = vip();
    const Flow flow = tcp_flow(46001);
    const xlb_flow_key key = flow_key(flow);
    const std::uint32_t backend = expected_backend(ring, key);
    const std::uint32_t now = ct_now();
    // Times wrap: an entry from before the wrap refreshes just the same.
    const xlb_ct_value old{backend, 1, now - 0x90000000U, now - XLB_CT_REFRESH_UNITS - 1};
    ASSERT_TRUE(lb().conntrack().put(key, old));

    const std::uint32_t before = ct_now();
    expect_balanced(make_frame(flow), flow, ring);
    const std::uint32_t after = ct_now();
    auto e = entry(flow);
    ASSERT_TRUE(e);
    EXPECT_EQ(e->backend_id, backend);
    EXPECT_EQ(e->generation, 1u);
    EXPECT_EQ(e->created, old.created) << "created never changes";
    // In the slot's units (2^XLB_CT_SEEN_SHIFT): what the program writes.
    constexpr int kShift = XLB_CT_SEEN_SHIFT;
    EXPECT_LE((e->last_seen >> kShift) - (before >> kShift), (after >> kShift) - (before >> kShift))
        << "refreshed to the run's time";
    EXPECT_EQ(budget_state().inserts, 0u) << "a refresh is not an insert";
}

// ---------------------------------------------------------------------------
// The established-flow path: a TCP packet that is not a SYN is looked up in
// the connection table first and, while its VIP bucket holds the epoch the
// entry recorded, forwarded from the entry alone (no VIP lookup, no hash).

// An entry sending `flow` to `backend`, which the ring would not choose.
xlb_ct_value entry_to(std::uint32_t backend) { return {backend, 1, 0, 0}; }

std::uint32_t other_than(std::uint32_t backend) { return backend == 10 ? 11 : 10; }

// The first IPv4 address after `from` (host order) whose VIP bucket is `bucket`.
std::optional<net::IpAddress> ipv4_in_bucket(std::uint32_t bucket, std::uint32_t from) {
    for (std::uint32_t n = 1; n < 4'000'000; ++n) {
        const __be32 addr[4] = {htonl(from + n), 0, 0, 0};
        if (xlb_vip_bucket(addr) == bucket) return net::IpAddress::from_words(addr, 4);
    }
    return std::nullopt;
}

TEST_F(ConntrackTest, AnEstablishedFlowIsForwardedFromItsEntryAlone) {
    auto ring = vip();
    const Flow flow = tcp_flow(47000);
    const xlb_flow_key key = flow_key(flow);
    const std::uint32_t pinned = other_than(expected_backend(ring, key));
    ASSERT_TRUE(lb().conntrack().put(key, entry_to(pinned)));
    const Bytes frame = make_frame(flow);
    const Bytes expected = expected_encap(frame, backend_addr_[pinned], key);
    // Full path (no epoch yet), then the entry alone, both to the entry's backend.
    for (int i = 0; i < 3; ++i) expect_outcome(frame, XDP_TX, XLB_OUT_TX, expected);
    EXPECT_EQ(vip_stats(kVipId).conntrack_hits, 3u);
    EXPECT_EQ(vip_stats(kVipId).packets, 3u);
    EXPECT_EQ(vip_stats(kVipId).new_flows, 0u);
    EXPECT_EQ(backend_stats(pinned).packets, 3u);

    // The outer header's source comes from the hash the entry carries: with
    // a /24 outer source prefix, the entry's hash picks the host bits.
    xlb_config cfg = default_config();
    cfg.src_v4_prefix_len = 24;
    write_config(cfg);
    expect_outcome(frame, XDP_TX, XLB_OUT_TX, expected_encap(frame, backend_addr_[pinned], key));
}

TEST_F(ConntrackTest, AnIpv6EstablishedFlowIsForwardedFromItsEntry) {
    for (std::uint32_t i = 0; i < 4; ++i) add_backend(20 + i, kBackendV6[i]);
    add_vip(kVipV6, kVipPort, kProtoTcp, kVipId);
    auto ring = publish_maglev(kVipId, {{20}, {21}, {22}, {23}});
    const Flow flow{kClientV6, kVipV6, 47001, kVipPort, kProtoTcp};
    const xlb_flow_key key = flow_key(flow);
    const std::uint32_t pinned = expected_backend(ring, key) == 20 ? 21 : 20;
    ASSERT_TRUE(lb().conntrack().put(key, entry_to(pinned)));
    const Bytes frame = make_frame(flow);
    const Bytes expected = expected_encap(frame, backend_addr_[pinned], key);
    for (int i = 0; i < 2; ++i) expect_outcome(frame, XDP_TX, XLB_OUT_TX, expected);
    auto e = lb().conntrack().get(key);
    ASSERT_TRUE(e && *e);
    EXPECT_EQ((*e)->backend_id, pinned);
    EXPECT_EQ((*e)->vip_id, kVipId);
    EXPECT_EQ(vip_stats(kVipId).conntrack_hits, 2u);
}

TEST_F(ConntrackTest, AfterItsVipIsDeletedAnEstablishedFlowGoesToTheKernel) {
    auto ring = vip();
    const Flow flow = tcp_flow(47002);
    const Bytes frame = make_frame(flow);
    expect_balanced(frame, flow, ring);  // records
    expect_balanced(frame, flow, ring);  // from the entry
    ASSERT_TRUE(entry(flow));
    ASSERT_TRUE(lb().erase_vip(datapath::vip_key(kVipV4, kVipPort, kProtoTcp)));
    expect_outcome(frame, XDP_PASS, XLB_OUT_PASS_NOT_VIP, frame);

    // Another VIP address sharing the deleted one's bucket keeps the bucket
    // in use (renewed epoch): the flow still leaves by the full path.
    const std::uint32_t bucket = xlb_vip_bucket(flow_key(flow).dst);
    const std::optional<net::IpAddress> neighbour = ipv4_in_bucket(bucket, 0x0a000000U);
    ASSERT_TRUE(neighbour) << "no IPv4 address in the VIP's bucket among 4M";
    add_vip(*neighbour, kVipPort, kProtoTcp, kVipId + 1);
    publish_maglev(kVipId + 1, {{12}});
    EXPECT_NE(*lb().vip_buckets().get(bucket), 0u);
    expect_outcome(frame, XDP_PASS, XLB_OUT_PASS_NOT_VIP, frame);
    // ... and the neighbour is balanced as usual.
    const Flow to_neighbour{kClientV4, *neighbour, 47003, kVipPort, kProtoTcp};
    expect_balanced(make_frame(to_neighbour), to_neighbour,
                    std::vector<std::uint32_t>(ring.size(), 12));
}

TEST_F(ConntrackTest, AnAddressSharingAVipsBucketIsNotAVip) {
    vip();
    const std::uint32_t bucket = xlb_vip_bucket(flow_key(tcp_flow(1)).dst);
    const std::optional<net::IpAddress> same_bucket = ipv4_in_bucket(bucket, 0x0b000000U);
    ASSERT_TRUE(same_bucket);
    ASSERT_NE(*same_bucket, kVipV4);
    for (std::uint8_t flags : {kTcpSyn, kTcpAck}) {
        FrameOptions opt;
        opt.tcp_flags = flags;
        const Bytes frame =
            make_frame(Flow{kClientV4, *same_bucket, 47004, kVipPort, kProtoTcp}, opt);
        expect_outcome(frame, XDP_PASS, XLB_OUT_PASS_NOT_VIP, frame);
    }
    EXPECT_EQ(vip_stats(kVipId).packets, 0u);
}

// A slot names its flow by its VIP's id (abi.h, layout 5): a VIP added
// back under another id does not find the entries of the old one. Its flows
// are balanced by its ring and recorded anew; the old id's entries are not
// used, and the agent's next walk empties them.
TEST_F(ConntrackTest, AVipAddedBackUnderAnotherIdRecordsItsFlowsAnew) {
    auto ring = vip();
    const Flow flow = tcp_flow(47005);
    const xlb_flow_key key = flow_key(flow);
    const Bytes frame = make_frame(flow);
    const std::uint32_t ring_choice = expected_backend(ring, key);
    const std::uint32_t pinned = other_than(ring_choice);
    ASSERT_TRUE(lb().conntrack().put(key, entry_to(pinned)));
    expect_outcome(frame, XDP_TX, XLB_OUT_TX, expected_encap(frame, backend_addr_[pinned], key));

    const xlb_vip_key vk = datapath::vip_key(kVipV4, kVipPort, kProtoTcp);
    ASSERT_TRUE(lb().erase_vip(vk));
    add_vip(kVipV4, kVipPort, kProtoTcp, kVipId + 2);
    const auto again = publish_maglev(kVipId + 2, {{10}, {11}, {12}, {13}});
    const std::uint32_t new_choice = expected_backend(again, key);
    ASSERT_NE(new_choice, pinned);
    expect_outcome(frame, XDP_TX, XLB_OUT_TX,
                   expected_encap(frame, backend_addr_[new_choice], key));
    auto e = entry(flow);
    ASSERT_TRUE(e);
    EXPECT_EQ(e->vip_id, kVipId + 2);
    EXPECT_EQ(e->backend_id, new_choice);
    expect_outcome(frame, XDP_TX, XLB_OUT_TX,
                   expected_encap(frame, backend_addr_[new_choice], key));
    EXPECT_EQ(vip_stats(kVipId + 2).packets, 2u);
    EXPECT_EQ(vip_stats(kVipId + 2).conntrack_hits, 1u);
    EXPECT_EQ(lb().conntrack().count(), 2u) << "the old id's entry, and the new one";
    lb().conntrack().for_each([](const xlb_flow_key&, const xlb_ct_value&) {});
    EXPECT_EQ(lb().conntrack().count(), 1u) << "the walk empties the old id's entry";
}

TEST_F(ConntrackTest, AVipTurnedStatelessNoLongerFollowsItsEntries) {
    auto ring = vip();
    const Flow flow = tcp_flow(47006);
    const xlb_flow_key key = flow_key(flow);
    const std::uint32_t ring_choice = expected_backend(ring, key);
    const std::uint32_t pinned = other_than(ring_choice);
    ASSERT_TRUE(lb().conntrack().put(key, entry_to(pinned)));
    const Bytes frame = make_frame(flow);
    for (int i = 0; i < 2; ++i)
        expect_outcome(frame, XDP_TX, XLB_OUT_TX,
                       expected_encap(frame, backend_addr_[pinned], key));
    add_vip(kVipV4, kVipPort, kProtoTcp, kVipId, XLB_VIP_F_NO_CONNTRACK);
    expect_outcome(frame, XDP_TX, XLB_OUT_TX,
                   expected_encap(frame, backend_addr_[ring_choice], key));
    EXPECT_EQ(vip_stats(kVipId).conntrack_hits, 2u);
    EXPECT_EQ(vip_stats(kVipId).new_flows, 1u);
}

TEST_F(ConntrackTest, AnEntryWhoseBackendWentAwayIsRepointedByTheRing) {
    auto ring = vip();
    const Flow flow = tcp_flow(47007);
    const xlb_flow_key key = flow_key(flow);
    const Bytes frame = make_frame(flow);
    const std::uint32_t ring_choice = expected_backend(ring, key);
    const std::uint32_t pinned = other_than(ring_choice);
    ASSERT_TRUE(lb().conntrack().put(key, entry_to(pinned)));
    expect_outcome(frame, XDP_TX, XLB_OUT_TX, expected_encap(frame, backend_addr_[pinned], key));
    // The backend id is reused by another backend (a new generation).
    add_backend(pinned, backend_addr_[pinned], 2);
    expect_balanced(frame, flow, ring);
    auto e = entry(flow);
    ASSERT_TRUE(e);
    EXPECT_EQ(e->backend_id, ring_choice);
    EXPECT_EQ(e->generation, 1u);
    EXPECT_EQ(e->vip_id, kVipId);
}

// ---------------------------------------------------------------------------
// The flow cache (abi.h, XLB_MAP_FLOW_CACHE): each CPU's copies of the
// entries it used. Every test here makes the copy send the flow somewhere the
// table no longer does, so a copy used when it must not be shows.

class FlowCacheTest : public ConntrackTest {
protected:
    // A flow recorded to a backend the ring would not choose, its copy
    // cached on this CPU (the second packet leaves it).
    struct Cached {
        Flow flow;
        xlb_flow_key key;
        Bytes frame;
        std::uint32_t ring_choice;
        std::uint32_t pinned;
    };
    Cached cached_flow(const std::vector<std::uint32_t>& ring, std::uint16_t sport) {
        Cached c{tcp_flow(sport), {}, {}, 0, 0};
        c.key = flow_key(c.flow);
        c.frame = make_frame(c.flow);
        c.ring_choice = expected_backend(ring, c.key);
        c.pinned = other_than(c.ring_choice);
        EXPECT_TRUE(lb().conntrack().put(c.key, entry_to(c.pinned)));
        for (int i = 0; i < 2; ++i) expect_to(c, c.pinned);
        return c;
    }

    void expect_to(const Cached& c, std::uint32_t backend) {
        expect_outcome(c.frame, XDP_TX, XLB_OUT_TX,
                       expected_encap(c.frame, backend_addr_[backend], c.key));
    }

    // Runs the rest of the test on `cpu` (from the CPUs this process may use).
    static bool move_to(int cpu) {
        cpu_set_t one;
        CPU_ZERO(&one);
        CPU_SET(cpu, &one);
        return ::sched_setaffinity(0, sizeof one, &one) == 0 && ::sched_getcpu() == cpu;
    }
};

TEST_F(FlowCacheTest, ACopyStandsInForItsEntry) {
    PinnedToOneCpu pinned;
    ASSERT_TRUE(pinned.ok());
    auto ring = vip();
    const Cached c = cached_flow(ring, 48000);
    // The entry deleted behind the agent's back (as an insert replaces it): the
    // copy still sends the flow where the entry did, so the copy is used.
    ASSERT_TRUE(lb().conntrack().erase(c.key));
    expect_to(c, c.pinned);
    EXPECT_EQ(vip_stats(kVipId).conntrack_hits, 3u);
    EXPECT_FALSE(entry(c.flow)) << "a copy never writes the table";
    // Half a refresh interval later the table is looked up again: gone, so
    // the ring decides and records the flow anew.
    lb().set_ct_clock(ct_clock_ + XLB_CT_LOOKUP_UNITS);
    expect_to(c, c.ring_choice);
    auto e = entry(c.flow);
    ASSERT_TRUE(e);
    EXPECT_EQ(e->backend_id, c.ring_choice);
}

TEST_F(FlowCacheTest, DeletesByTheAgentRetireEveryCopyAtOnce) {
    PinnedToOneCpu pinned;
    ASSERT_TRUE(pinned.ok());
    auto ring = vip();
    const Cached c = cached_flow(ring, 48001);
    ASSERT_TRUE(lb().conntrack().erase(c.key));
    lb().note_conntrack_erased();
    expect_to(c, c.ring_choice);
    EXPECT_EQ(vip_stats(kVipId).new_flows, 1u);
    // Nor is a copy from the tick of the stamp (none is even written): its
    // lookup may have found the entry just before it went.
    const Cached again = cached_flow(ring, 48002);
    ASSERT_TRUE(lb().conntrack().erase(again.key));
    expect_to(again, again.ring_choice);
    // A later copy is.
    lb().set_ct_clock(ct_clock_ + 1);
    const Cached later = cached_flow(ring, 48003);
    ASSERT_TRUE(lb().conntrack().erase(later.key));
    expect_to(later, later.pinned);
}

TEST_F(FlowCacheTest, ChangesTheEntryChecksAlsoRetireTheCopy) {
    PinnedToOneCpu pinned;
    ASSERT_TRUE(pinned.ok());
    auto ring = vip();
    // The backend's id reused (a new generation): the ring decides.
    const Cached gone = cached_flow(ring, 48004);
    add_backend(gone.pinned, backend_addr_[gone.pinned], 2);
    expect_to(gone, gone.ring_choice);
    add_backend(gone.pinned, backend_addr_[gone.pinned], 1);
    // The VIP changed (a new epoch): the full path matches it again and
    // follows the entry, which is still there.
    const Cached changed = cached_flow(ring, 48005);
    ASSERT_TRUE(lb().conntrack().put(changed.key, entry_to(changed.ring_choice)));
    add_vip(kVipV4, kVipPort, kProtoTcp, kVipId);
    expect_to(changed, changed.ring_choice);
}

TEST_F(FlowCacheTest, ASynRetiresItsFlowsCopy) {
    PinnedToOneCpu pinned;
    ASSERT_TRUE(pinned.ok());
    auto ring = vip();
    // The old connection's entry evicted, its copy still here: the reused
    // 4-tuple's SYN goes by the ring, and so must the packets after it.
    const Cached c = cached_flow(ring, 48006);
    ASSERT_TRUE(lb().conntrack().erase(c.key));
    expect_balanced(syn_frame(c.flow), c.flow, ring);
    expect_to(c, c.ring_choice);
    EXPECT_EQ(entry(c.flow)->backend_id, c.ring_choice);
}

TEST_F(FlowCacheTest, ASynThatRepointsAnEntryRetiresTheCopiesOfEveryCpu) {
    cpu_set_t allowed;
    ASSERT_EQ(::sched_getaffinity(0, sizeof allowed, &allowed), 0);
    if (CPU_COUNT(&allowed) < 2) GTEST_SKIP() << "needs two CPUs";
    std::vector<int> cpus;
    for (int i = 0; i < CPU_SETSIZE && cpus.size() < 2; ++i)
        if (CPU_ISSET(i, &allowed)) cpus.push_back(i);
    PinnedToOneCpu restore;  // puts the old affinity back at the end
    auto ring = vip();
    ASSERT_TRUE(move_to(cpus[0]));
    const Cached c = cached_flow(ring, 48007);
    // The SYN of a new connection on the same 4-tuple, on the other CPU:
    // the entry is repointed to the ring's choice ...
    ASSERT_TRUE(move_to(cpus[1]));
    expect_balanced(syn_frame(c.flow), c.flow, ring);
    EXPECT_EQ(entry(c.flow)->backend_id, c.ring_choice);
    // ... and the first CPU's copy of the old one is gone.
    ASSERT_TRUE(move_to(cpus[0]));
    expect_to(c, c.ring_choice);
}

}  // namespace
}  // namespace xlb::test
