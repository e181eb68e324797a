// SPDX-License-Identifier: Apache-2.0
// Second chance on the balancer's side (abi.h, struct xlb_gue_hint): a TCP
// packet that is not a SYN and finds no connection-table entry carries the
// backend the VIP's previous ring names, when that differs from the current
// ring's choice and is still a live backend of the same family; nothing else
// carries a hint. Whole output frames are compared with frames built by the
// testbed, and the VIP's hint counter is checked alongside.
#include <gtest/gtest.h>

#include <optional>
#include <vector>

#include "lb_fixture.h"
#include "testbed.h"
#include "xlb/control/data_plane.h"
#include "xlb/datapath/setup.h"
#include "xlb/kernel/bpf_data_plane.h"

namespace xlb::test {
namespace {

constexpr std::uint32_t kVipId = 3;

class SecondChanceTest : public LbTest {
protected:
    void SetUp() override {
        LbTest::SetUp();
        xlb_config cfg = default_config();
        cfg.flags |= XLB_CFG_F_GUE | XLB_CFG_F_SECOND_CHANCE;
        cfg.gue_port = XLB_GUE_PORT_DEFAULT;
        write_config(cfg);
        for (std::uint32_t i = 0; i < 4; ++i) add_backend(10 + i, kBackendV4[i]);
        for (std::uint32_t i = 0; i < 4; ++i) add_backend(20 + i, kBackendV6[i]);
    }

    // A VIP whose ring went from {first three} to all four backends of the
    // family: about a quarter of the flows moved to the fourth.
    void grown_vip(bool v6 = false) {
        const std::uint32_t base = v6 ? 20 : 10;
        add_vip(v6 ? kVipV6 : kVipV4, kVipPort, kProtoTcp, kVipId);
        previous_ = build({{base}, {base + 1}, {base + 2}});
        auto ok = bpf::publish_ring(lb().prev_rings().fd(), kVipId, previous_);
        ASSERT_TRUE(ok) << ok.error().message();
        current_ = publish_maglev(kVipId, {{base}, {base + 1}, {base + 2}, {base + 3}});
    }

    std::vector<std::uint32_t> build(const std::vector<RingMember>& members) {
        std::vector<datapath::RingMember> input;
        for (const RingMember& m : members)
            input.push_back({m.backend_id, backend_addr_.at(m.backend_id), {}, m.weight});
        auto ring = datapath::build_ring(input);
        EXPECT_TRUE(ring) << ring.error().message();
        return ring ? ring->slots : std::vector<std::uint32_t>{};
    }

    // A client flow to the VIP whose two rings agree (moved = false) or not.
    Flow flow(bool moved, bool v6 = false, std::uint16_t first_port = 40000) {
        for (std::uint16_t port = first_port; port < first_port + 2000; ++port) {
            Flow f{v6 ? kClientV6 : kClientV4, v6 ? kVipV6 : kVipV4, port, kVipPort, kProtoTcp};
            const xlb_flow_key key = flow_key(f);
            if ((expected_backend(current_, key) != expected_backend(previous_, key)) == moved)
                return f;
        }
        ADD_FAILURE() << "no flow found";
        return {};
    }

    std::uint64_t hints() {
        auto per_cpu = lb().vip_hints().get_per_cpu(kVipId);
        EXPECT_TRUE(per_cpu);
        return per_cpu ? bpf::sum_per_cpu(*per_cpu, [](std::uint64_t v) { return v; }) : 0;
    }

    // Sends the frame and expects it encapsulated to the current ring's
    // backend, with a hint naming `hint` (or none), whole frame compared.
    void expect_sent(const Flow& f, const FrameOptions& opt,
                     const std::optional<net::IpAddress>& hint) {
        const xlb_flow_key key = flow_key(f);
        const Bytes input = make_frame(f, opt);
        const Bytes expected =
            expected_encap(input, backend_addr_.at(expected_backend(current_, key)), key, 0, hint);
        ASSERT_EQ(checksum_errors(expected), "");
        const std::uint64_t before = hints();
        expect_outcome(input, XDP_TX, XLB_OUT_TX, expected);
        EXPECT_EQ(hints() - before, hint ? 1u : 0u) << "the VIP's hint counter";
    }

    net::IpAddress previous_backend(const Flow& f) {
        return backend_addr_.at(expected_backend(previous_, flow_key(f)));
    }

    std::vector<std::uint32_t> previous_, current_;
};

TEST_F(SecondChanceTest, AMovedFlowWithoutEntryCarriesThePreviousBackend) {
    grown_vip();
    const Flow moved = flow(true);
    expect_sent(moved, {}, previous_backend(moved));
    // The entry it made keeps the hint: the next packet (a table hit, never
    // a flow-cache copy) carries it too.
    auto entry = lb().conntrack().get(flow_key(moved));
    ASSERT_TRUE(entry && *entry);
    EXPECT_EQ((*entry)->second_chance, expected_backend(previous_, flow_key(moved)) + 1);
    expect_sent(moved, {}, previous_backend(moved));
    expect_sent(moved, {}, previous_backend(moved));
}

TEST_F(SecondChanceTest, Ipv6FlowsCarryA20ByteHint) {
    grown_vip(true);
    const Flow moved = flow(true, true);
    expect_sent(moved, {}, previous_backend(moved));
}

TEST_F(SecondChanceTest, AFlowTheRingsAgreeOnCarriesNothing) {
    grown_vip();
    const Flow stayed = flow(false);
    expect_sent(stayed, {}, std::nullopt);
    auto entry = lb().conntrack().get(flow_key(stayed));
    ASSERT_TRUE(entry && *entry);
    EXPECT_EQ((*entry)->second_chance, 0u);
}

TEST_F(SecondChanceTest, ASynNeverCarriesAHint) {
    grown_vip();
    FrameOptions syn;
    syn.tcp_flags = kTcpSyn;
    syn.payload.clear();
    expect_sent(flow(true), syn, std::nullopt);
}

TEST_F(SecondChanceTest, ASynStartsTheFlowAfreshAtTheCurrentBackend) {
    grown_vip();
    const Flow moved = flow(true);
    expect_sent(moved, {}, previous_backend(moved));
    FrameOptions syn;
    syn.tcp_flags = kTcpSyn;
    syn.payload.clear();
    expect_sent(moved, syn, std::nullopt);
    // the SYN repointed the entry: the new connection is the current backend's
    expect_sent(moved, {}, std::nullopt);
}

TEST_F(SecondChanceTest, NoHintWhenThePreviousBackendIsGoneDownOrOfTheOtherFamily) {
    grown_vip();
    const Flow moved = flow(true);
    const std::uint32_t prev = expected_backend(previous_, flow_key(moved));

    ASSERT_TRUE(lb().backends().put(prev, xlb_backend{}));  // released id
    expect_sent(moved, {}, std::nullopt);
    ASSERT_TRUE(lb().conntrack().clear());

    add_backend(prev, backend_addr_.at(prev), 2);
    auto down = lb().backends().get(prev);
    ASSERT_TRUE(down);
    down->flags = XLB_BACKEND_F_DOWN;
    ASSERT_TRUE(lb().backends().put(prev, *down));
    expect_sent(moved, {}, std::nullopt);
    ASSERT_TRUE(lb().conntrack().clear());

    // an IPv6 backend cannot be named in an IPv4 outer header
    add_backend(prev, kBackendV6[3], 3);
    expect_sent(moved, {}, std::nullopt);
    ASSERT_TRUE(lb().conntrack().clear());

    // back: the hint returns
    add_backend(prev, kBackendV4[prev - 10], 4);
    expect_sent(moved, {}, kBackendV4[prev - 10]);
}

TEST_F(SecondChanceTest, NoHintWithoutAPreviousRingOrWithSecondChanceOff) {
    add_vip(kVipV4, kVipPort, kProtoTcp, kVipId);
    previous_ = build({{10}, {11}, {12}});
    current_ = publish_maglev(kVipId, {{10}, {11}, {12}, {13}});
    const Flow moved = flow(true);
    expect_sent(moved, {}, std::nullopt);  // no previous ring published
    ASSERT_TRUE(lb().conntrack().clear());

    ASSERT_TRUE(bpf::publish_ring(lb().prev_rings().fd(), kVipId, previous_));
    xlb_config cfg = config_;
    cfg.flags &= ~XLB_CFG_F_SECOND_CHANCE;
    write_config(cfg);
    expect_sent(moved, {}, std::nullopt);
    ASSERT_TRUE(lb().conntrack().clear());

    // GUE off: nothing could carry it (the flag alone is never enough)
    cfg.flags = (config_.flags & ~XLB_CFG_F_GUE) | XLB_CFG_F_SECOND_CHANCE;
    write_config(cfg);
    expect_sent(moved, {}, std::nullopt);
}

TEST_F(SecondChanceTest, TheMtuCountsTheHint) {
    grown_vip();
    const Flow moved = flow(true);
    const Flow stayed = flow(false, false, 41000);
    FrameOptions fits;
    // outer IPv4 20 + UDP/GUE 12 + hint 8 in front of IP 20 + TCP 20
    fits.payload.assign(kLinkMtu - 20 - 12 - 8 - 20 - 20, 'g');
    expect_sent(moved, fits, previous_backend(moved));
    FrameOptions over = fits;
    over.payload.push_back('g');
    expect_outcome(make_frame(moved, over), XDP_DROP, XLB_OUT_DROP_TOO_BIG, std::nullopt);
    // without a hint the same packet still fits
    expect_sent(stayed, over, std::nullopt);
}

TEST_F(SecondChanceTest, ThePublishKeepsTheRingLiveUntilThenAsThePreviousOne) {
    using control::PreviousRing;
    add_vip(kVipV4, kVipPort, kProtoTcp, kVipId);
    control::BpfDataPlane plane(lb());
    previous_ = build({{10}, {11}, {12}});
    current_ = build({{10}, {11}, {12}, {13}});
    ASSERT_TRUE(plane.publish({{kVipId, previous_, PreviousRing::kLiveRing}}));
    // the first ring has nothing before it
    auto none = bpf::read_ring(lb().prev_rings().fd(), kVipId);
    EXPECT_FALSE(none);
    ASSERT_TRUE(plane.publish({{kVipId, current_, PreviousRing::kLiveRing}}));
    auto kept = bpf::read_ring(lb().prev_rings().fd(), kVipId);
    ASSERT_TRUE(kept) << kept.error().message();
    EXPECT_EQ(*kept, previous_);
    const Flow moved = flow(true);
    expect_sent(moved, {}, previous_backend(moved));

    // a weight-only step (slow start) leaves the previous ring as it was:
    // still the ring from before the members changed
    const auto step = build({{10}, {11}, {12}, {13, 60}});
    ASSERT_NE(step, current_);
    ASSERT_TRUE(plane.publish({{kVipId, step, PreviousRing::kUnchanged}}));
    kept = bpf::read_ring(lb().prev_rings().fd(), kVipId);
    ASSERT_TRUE(kept) << kept.error().message();
    EXPECT_EQ(*kept, previous_);
    EXPECT_EQ(*bpf::read_ring(lb().rings().fd(), kVipId), step);

    // a publish with no previous ring (second chance off) drops it
    ASSERT_TRUE(plane.publish({{kVipId, current_, PreviousRing::kNone}}));
    EXPECT_FALSE(bpf::read_ring(lb().prev_rings().fd(), kVipId));
    ASSERT_TRUE(plane.publish({{kVipId, previous_, PreviousRing::kLiveRing}}));
    ASSERT_TRUE(bpf::read_ring(lb().prev_rings().fd(), kVipId));
    ASSERT_TRUE(plane.remove_previous_ring(kVipId));
    EXPECT_FALSE(bpf::read_ring(lb().prev_rings().fd(), kVipId));
    ASSERT_TRUE(plane.publish({{kVipId, current_, PreviousRing::kLiveRing}}));
    ASSERT_TRUE(plane.remove_ring(kVipId));
    EXPECT_FALSE(bpf::read_ring(lb().prev_rings().fd(), kVipId)) << "removed with the VIP's ring";
}

}  // namespace
}  // namespace xlb::test
