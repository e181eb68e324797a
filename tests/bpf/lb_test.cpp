// SPDX-License-Identifier: Apache-2.0
// Packet-by-packet tests of bpf/xlb_lb.bpf.c through BPF_PROG_TEST_RUN. Every
// case checks the XDP action, that exactly one outcome counter moved, and the
// whole output frame against one built independently in C++.
#include <arpa/inet.h>

#include <random>
#include <set>

#include "lb_fixture.h"

namespace xlb::test {
namespace {

constexpr std::uint32_t kVipId = 3;

class LbPacketTest : public LbTest {
protected:
    void SetUp() override {
        LbTest::SetUp();
        for (std::uint32_t i = 0; i < 4; ++i) add_backend(10 + i, kBackendV4[i]);
        for (std::uint32_t i = 0; i < 4; ++i) add_backend(20 + i, kBackendV6[i]);
    }

    Flow v4_flow(std::uint16_t sport = 40000, std::uint8_t proto = kProtoTcp) const {
        return Flow{kClientV4, kVipV4, sport, kVipPort, proto};
    }
    Flow v6_flow(std::uint16_t sport = 40000, std::uint8_t proto = kProtoTcp) const {
        return Flow{kClientV6, kVipV6, sport, kVipPort, proto};
    }

    // A VIP with the four IPv4 (or IPv6) backends in its ring.
    std::vector<std::uint32_t> v4_vip(std::uint8_t proto = kProtoTcp, std::uint32_t flags = 0) {
        add_vip(kVipV4, kVipPort, proto, kVipId, flags);
        return publish_maglev(kVipId, {{10}, {11}, {12}, {13}});
    }
    std::vector<std::uint32_t> v6_vip(std::uint8_t proto = kProtoTcp,
                                      std::uint32_t vip_id = kVipId) {
        add_vip(kVipV6, kVipPort, proto, vip_id);
        return publish_maglev(vip_id, {{20}, {21}, {22}, {23}});
    }

    // Sends the frame and expects it encapsulated to the ring's choice.
    void expect_forwarded(const Bytes& frame, const Flow& flow,
                          const std::vector<std::uint32_t>& ring, std::uint32_t vip_flags = 0) {
        xlb_flow_key key = flow_key(flow);
        std::uint32_t backend = expected_backend(ring, key, vip_flags);
        Bytes expected = expected_encap(frame, backend_addr_[backend], key, vip_flags);
        ASSERT_EQ(checksum_errors(expected), "") << "test bug: expected frame is invalid";
        // the inner packet is the client's IP packet, byte for byte
        const std::size_t outer = backend_addr_[backend].is_v4() ? 20 : 40;
        ASSERT_EQ(Bytes(expected.begin() + 14 + static_cast<std::ptrdiff_t>(outer),
                        expected.begin() + 14 + static_cast<std::ptrdiff_t>(outer) +
                            static_cast<std::ptrdiff_t>(ip_packet_of(frame).size())),
                  ip_packet_of(frame));
        expect_outcome(frame, XDP_TX, XLB_OUT_TX, expected);
    }
};

TEST_F(LbPacketTest, Ipv4TcpSynAckFinAreEncapsulatedToTheRingsBackend) {
    auto ring = v4_vip();
    for (std::uint8_t flags : {kTcpSyn, kTcpAck, std::uint8_t(kTcpFin | kTcpAck)}) {
        SCOPED_TRACE(testing::Message() << "tcp flags " << int(flags));
        FrameOptions opt;
        opt.tcp_flags = flags;
        Flow flow = v4_flow(41000 + flags);
        expect_forwarded(make_frame(flow, opt), flow, ring);
    }
    xlb_vip_stats vs = vip_stats(kVipId);
    EXPECT_EQ(vs.packets, 3u);
    EXPECT_EQ(vs.new_flows, 3u);
    EXPECT_EQ(vs.conntrack_hits, 0u);
}

TEST_F(LbPacketTest, Ipv4UdpIsEncapsulated) {
    auto ring = v4_vip(kProtoUdp);
    Flow flow = v4_flow(5353, kProtoUdp);
    expect_forwarded(make_frame(flow), flow, ring);
}

TEST_F(LbPacketTest, Ipv6TcpAndUdpAreEncapsulatedIp6Ip6) {
    auto ring = v6_vip(kProtoTcp);
    add_vip(kVipV6, kVipPort, kProtoUdp, kVipId);
    for (std::uint8_t proto : {kProtoTcp, kProtoUdp}) {
        SCOPED_TRACE(int(proto));
        FrameOptions opt;
        opt.tos = 0xb8;  // traffic class must be copied to the outer header
        Flow flow = v6_flow(42000, proto);
        expect_forwarded(make_frame(flow, opt), flow, ring);
    }
}

TEST_F(LbPacketTest, Ipv4VipWithIpv6BackendIsIpv4InIpv6) {
    add_vip(kVipV4, kVipPort, kProtoTcp, kVipId);
    auto ring = publish_maglev(kVipId, {{20}, {21}});
    FrameOptions opt;
    opt.tos = 0x28;
    Flow flow = v4_flow(43000);
    Bytes frame = make_frame(flow, opt);
    expect_forwarded(frame, flow, ring);
    auto out = run(frame);
    EXPECT_EQ(out.frame[14 + 6], kProtoIpip) << "IPv4-in-IPv6 uses next header 4";
}

TEST_F(LbPacketTest, Ipv6VipWithIpv4BackendIsDropped) {
    add_vip(kVipV6, kVipPort, kProtoTcp, kVipId);
    publish_maglev(kVipId, {{10}});
    expect_outcome(make_frame(v6_flow()), XDP_DROP, XLB_OUT_DROP_FAMILY, std::nullopt);
    EXPECT_EQ(vip_stats(kVipId).drops, 1u);
}

TEST_F(LbPacketTest, PortWildcardVipMatchesAnyPort) {
    add_vip(kVipV4Wildcard, 0, kProtoTcp, kVipId);
    auto ring = publish_maglev(kVipId, {{10}, {11}});
    for (std::uint16_t port : {22, 443, 8080}) {
        Flow flow{kClientV4, kVipV4Wildcard, 40000, port, kProtoTcp};
        expect_forwarded(make_frame(flow), flow, ring);
    }
}

TEST_F(LbPacketTest, ExactVipWinsOverWildcard) {
    add_vip(kVipV4, 0, kProtoTcp, 7);
    add_vip(kVipV4, kVipPort, kProtoTcp, kVipId);
    publish_maglev(7, {{10}});
    auto ring = publish_maglev(kVipId, {{12}});
    Flow flow = v4_flow();
    expect_forwarded(make_frame(flow), flow, ring);
    EXPECT_EQ(vip_stats(kVipId).packets, 1u);
    EXPECT_EQ(vip_stats(7).packets, 0u);
}

TEST_F(LbPacketTest, SourceOnlyHashSendsAllOfAClientsFlowsToOneBackend) {
    auto ring = v4_vip(kProtoTcp, XLB_VIP_F_HASH_SRC_ONLY);
    std::set<std::uint32_t> seen;
    for (std::uint16_t sport = 30000; sport < 30040; ++sport) {
        Flow flow = v4_flow(sport);
        expect_forwarded(make_frame(flow), flow, ring, XLB_VIP_F_HASH_SRC_ONLY);
        seen.insert(expected_backend(ring, flow_key(flow), XLB_VIP_F_HASH_SRC_ONLY));
    }
    EXPECT_EQ(seen.size(), 1u);
    // and the 5-tuple hash would have spread the same flows
    std::set<std::uint32_t> spread;
    for (std::uint16_t sport = 30000; sport < 30040; ++sport)
        spread.insert(expected_backend(ring, flow_key(v4_flow(sport))));
    EXPECT_GT(spread.size(), 1u);
}

TEST_F(LbPacketTest, OuterSourceDerivedFromFlowHashWithinPrefix) {
    xlb_config cfg = default_config();
    ip("203.0.113.0").to_words(&cfg.src_v4);
    cfg.src_v4_prefix_len = 24;
    ip("2001:db8:e::").to_words(cfg.src_v6);
    cfg.src_v6_prefix_len = 112;
    write_config(cfg);
    auto ring = v4_vip();
    std::set<std::uint8_t> last_octets;
    for (std::uint16_t sport = 50000; sport < 50016; ++sport) {
        Flow flow = v4_flow(sport);
        Bytes frame = make_frame(flow);
        expect_forwarded(frame, flow, ring);
        last_octets.insert(run(frame).frame[14 + 15]);
    }
    EXPECT_GT(last_octets.size(), 4u) << "outer sources should spread over the prefix";
    add_vip(kVipV6, kVipPort, kProtoTcp, 4);
    auto ring6 = publish_maglev(4, {{20}, {21}});
    Flow flow6 = v6_flow(50100);
    expect_forwarded(make_frame(flow6), flow6, ring6);
}

TEST_F(LbPacketTest, NotAVipPassesUnmodified) {
    v4_vip();
    add_vip(kVipV6, kVipPort, kProtoTcp, 4);
    publish_maglev(4, {{20}});
    const Flow cases[] = {
        {kClientV4, ip("198.51.100.99"), 40000, kVipPort, kProtoTcp},  // address
        {kClientV4, kVipV4, 40000, 81, kProtoTcp},                     // port
        {kClientV4, kVipV4, 40000, kVipPort, kProtoUdp},               // protocol
        {kClientV6, ip("2001:db8:f::99"), 40000, kVipPort, kProtoTcp},
        {kClientV6, kVipV6, 40000, kVipPort, kProtoUdp},
    };
    for (const Flow& flow : cases) {
        Bytes frame = make_frame(flow);
        SCOPED_TRACE(describe(frame));
        expect_outcome(frame, XDP_PASS, XLB_OUT_PASS_NOT_VIP, frame);
    }
    // ICMP echo to the VIP address is the kernel's business
    FrameOptions opt;
    opt.payload = {8, 0, 0xf7, 0xff, 0, 0, 0, 0};
    Bytes ping = make_frame(Flow{kClientV4, kVipV4, 0, 0, kProtoIcmp}, opt);
    expect_outcome(ping, XDP_PASS, XLB_OUT_PASS_NOT_VIP, ping);
}

TEST_F(LbPacketTest, NonIpFramesPass) {
    v4_vip();
    Bytes arp = ethernet(kLbMac, kClientSideMac, 0x0806, Bytes(28, 0x11));
    expect_outcome(arp, XDP_PASS, XLB_OUT_PASS_NOT_IP, arp);
    Bytes vlan = ethernet(kLbMac, kClientSideMac, 0x8100, make_ip_packet(v4_flow()));
    expect_outcome(vlan, XDP_PASS, XLB_OUT_PASS_NOT_IP, vlan);
}

TEST_F(LbPacketTest, UnconfiguredProgramPassesEverything) {
    auto ring = v4_vip();
    xlb_config cfg = default_config();
    cfg.magic = 0;
    write_config(cfg);
    Bytes frame = make_frame(v4_flow());
    expect_outcome(frame, XDP_PASS, XLB_OUT_PASS_NO_CONFIG, frame);
}

TEST_F(LbPacketTest, EthernetPaddingAfterTheIpPacketIsKept) {
    auto ring = v4_vip();
    FrameOptions opt;
    opt.payload = {};
    opt.pad_to = 60;  // minimum Ethernet frame: 6 bytes of padding after a bare ACK
    Flow flow = v4_flow();
    Bytes frame = make_frame(flow, opt);
    ASSERT_EQ(frame.size(), 60u);
    expect_forwarded(frame, flow, ring);
}

// Truncating the frame anywhere must never read out of bounds and must give
// the outcome of the first header that no longer fits.
TEST_F(LbPacketTest, EveryTruncatedFrameHasItsDefinedOutcome) {
    v4_vip(kProtoTcp);
    add_vip(kVipV4, kVipPort, kProtoUdp, kVipId);
    add_vip(kVipV6, kVipPort, kProtoTcp, kVipId);
    add_vip(kVipV6, kVipPort, kProtoUdp, kVipId);
    struct Case {
        Flow flow;
        std::size_t ip_header;
    };
    const Case cases[] = {{v4_flow(40000, kProtoTcp), 20}, {v4_flow(40000, kProtoUdp), 20},
                          {v6_flow(40000, kProtoTcp), 40}, {v6_flow(40000, kProtoUdp), 40}};
    for (const Case& c : cases) {
        Bytes full = make_frame(c.flow);
        const bool v4 = c.flow.src.is_v4();
        // The kernel's test run refuses frames shorter than an Ethernet
        // header (EINVAL), as drivers never hand XDP one: start there.
        for (std::size_t len = 0; len < 14; ++len) {
            auto refused = bpf::test_run_xdp(lb().prog_fd(), Bytes(len, 0));
            ASSERT_FALSE(refused);
            EXPECT_EQ(refused.error().code, EINVAL);
        }
        for (std::size_t len = 14; len < full.size(); ++len) {
            Bytes cut(full.begin(), full.begin() + static_cast<std::ptrdiff_t>(len));
            SCOPED_TRACE(testing::Message() << "cut to " << len << " of " << describe(full));
            // the IP header is cut, or its length no longer fits the frame
            expect_outcome(cut, XDP_DROP,
                           v4 ? XLB_OUT_DROP_MALFORMED_IPV4 : XLB_OUT_DROP_MALFORMED_IPV6,
                           std::nullopt);
        }
    }
}

// An IP packet whose own length ends inside the TCP or UDP header.
TEST_F(LbPacketTest, TruncatedTransportHeadersAreMalformed) {
    v4_vip(kProtoTcp);
    add_vip(kVipV4, kVipPort, kProtoUdp, kVipId);
    add_vip(kVipV6, kVipPort, kProtoTcp, kVipId);
    add_vip(kVipV6, kVipPort, kProtoUdp, kVipId);
    for (const Flow& flow : {v4_flow(40000, kProtoTcp), v4_flow(40000, kProtoUdp),
                             v6_flow(40000, kProtoTcp), v6_flow(40000, kProtoUdp)}) {
        FrameOptions opt;
        opt.payload = {};
        Bytes full = make_frame(flow, opt);
        const bool v4 = flow.src.is_v4();
        const std::size_t l3 = v4 ? 20 : 40;
        const std::size_t l4 = flow.proto == kProtoTcp ? 20 : 8;
        for (std::size_t keep = 0; keep < l4; ++keep) {
            SCOPED_TRACE(testing::Message() << keep << " bytes of L4 in " << describe(full));
            Bytes cut(full.begin(), full.begin() + static_cast<std::ptrdiff_t>(14 + l3 + keep));
            if (v4) {
                cut[14 + 2] = 0;
                cut[14 + 3] = static_cast<std::uint8_t>(l3 + keep);
                cut[14 + 10] = cut[14 + 11] = 0;
                std::uint16_t c = internet_checksum(&cut[14], 20);
                cut[14 + 10] = static_cast<std::uint8_t>(c >> 8);
                cut[14 + 11] = static_cast<std::uint8_t>(c);
            } else {
                cut[14 + 4] = 0;
                cut[14 + 5] = static_cast<std::uint8_t>(keep);
            }
            expect_outcome(cut, XDP_DROP, XLB_OUT_DROP_MALFORMED_L4, std::nullopt);
        }
    }
    // TCP data offset below 5 words
    Bytes bad = make_frame(v4_flow());
    bad[14 + 20 + 12] = 4 << 4;
    expect_outcome(bad, XDP_DROP, XLB_OUT_DROP_MALFORMED_L4, std::nullopt);
}

TEST_F(LbPacketTest, MalformedIpv4HeadersAreDropped) {
    v4_vip();
    Bytes good = make_frame(v4_flow());
    Bytes ihl4 = good;
    ihl4[14] = 0x44;
    expect_outcome(ihl4, XDP_DROP, XLB_OUT_DROP_MALFORMED_IPV4, std::nullopt);
    Bytes version = good;
    version[14] = 0x55;
    expect_outcome(version, XDP_DROP, XLB_OUT_DROP_MALFORMED_IPV4, std::nullopt);
    Bytes short_total = good;
    short_total[14 + 2] = 0;
    short_total[14 + 3] = 19;  // total length below the header length
    expect_outcome(short_total, XDP_DROP, XLB_OUT_DROP_MALFORMED_IPV4, std::nullopt);
}

TEST_F(LbPacketTest, Ipv4WithOptionsIsForwardedWithTheOptions) {
    auto ring = v4_vip();
    FrameOptions opt;
    opt.ipv4_options = {0x94, 0x04, 0x00, 0x00, 0x01, 0x01, 0x01, 0x00};  // router alert, NOPs, EOL
    Flow flow = v4_flow();
    Bytes frame = make_frame(flow, opt);
    ASSERT_EQ(frame[14] & 0x0f, 7);
    expect_forwarded(frame, flow, ring);
}

TEST_F(LbPacketTest, Ipv6ExtensionHeadersAreWalked) {
    auto ring = v6_vip();
    FrameOptions opt;
    opt.ipv6_ext = {
        {0, {1, 4, 0, 0, 0, 0}},                                                 // hop-by-hop, PadN
        {43, {0, 0, 0, 0, 0, 0}},                                                // routing, 0 segments left
        {60, {1, 12, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}},                       // dest opts, 16 bytes
    };
    Flow flow = v6_flow(44000);
    expect_forwarded(make_frame(flow, opt), flow, ring);

    // more extension headers than the program walks: the kernel decides
    FrameOptions many;
    for (int i = 0; i < XLB_IPV6_EXT_MAX + 1; ++i) many.ipv6_ext.push_back({60, {1, 4, 0, 0, 0, 0}});
    Bytes deep = make_frame(flow, many);
    expect_outcome(deep, XDP_PASS, XLB_OUT_PASS_IPV6_EXT_LIMIT, deep);

    // an extension header that runs past the packet
    Bytes bad = make_frame(flow, opt);
    bad[14 + 40 + 1] = 200;
    expect_outcome(bad, XDP_DROP, XLB_OUT_DROP_MALFORMED_IPV6, std::nullopt);
}

TEST_F(LbPacketTest, FragmentsArePassedAndCounted) {
    v4_vip();
    v6_vip(kProtoTcp, kVipId + 1);
    for (std::uint16_t frag : {std::uint16_t(0x2000), std::uint16_t(0x0010), std::uint16_t(0x2010)}) {
        FrameOptions opt;
        opt.ipv4_frag = frag;
        Bytes frame = make_frame(v4_flow(), opt);
        expect_outcome(frame, XDP_PASS, XLB_OUT_PASS_FRAGMENT, frame);
    }
    FrameOptions opt;
    opt.ipv6_ext = {{44, {0, 1, 0, 0, 0x12, 0x34}}};  // offset 0, more fragments
    Bytes frame = make_frame(v6_flow(), opt);
    expect_outcome(frame, XDP_PASS, XLB_OUT_PASS_FRAGMENT, frame);
}

TEST_F(LbPacketTest, VipWithoutTableOrBackendsIsDroppedAndCounted) {
    add_vip(kVipV4, kVipPort, kProtoTcp, kVipId);
    Bytes frame = make_frame(v4_flow());
    expect_outcome(frame, XDP_DROP, XLB_OUT_DROP_NO_TABLE, std::nullopt);
    publish_ring(kVipId, {});  // the explicit empty ring
    expect_outcome(frame, XDP_DROP, XLB_OUT_DROP_NO_BACKEND, std::nullopt);
    // a ring naming an unused backend id is refused, not followed
    publish_ring(kVipId, {99, 99, 99, 99, 99, 99, 99});
    expect_outcome(frame, XDP_DROP, XLB_OUT_DROP_BAD_BACKEND, std::nullopt);
    EXPECT_EQ(vip_stats(kVipId).drops, 3u);
}

TEST_F(LbPacketTest, TooBigAfterEncapsulationIsDropped) {
    auto ring = v4_vip();
    v6_vip(kProtoTcp, kVipId + 1);
    FrameOptions opt;
    opt.payload.assign(kLinkMtu - 20 - 20, 'x');  // exactly the MTU before encapsulation
    Flow flow = v4_flow();
    expect_outcome(make_frame(flow, opt), XDP_DROP, XLB_OUT_DROP_TOO_BIG, std::nullopt);
    opt.payload.resize(kLinkMtu - 20 - 20 - 20);  // fits exactly with the outer header
    expect_forwarded(make_frame(flow, opt), flow, ring);
    FrameOptions opt6;
    opt6.payload.assign(kLinkMtu - 40 - 20, 'y');
    expect_outcome(make_frame(v6_flow(), opt6), XDP_DROP, XLB_OUT_DROP_TOO_BIG, std::nullopt);
}

TEST_F(LbPacketTest, TooBigIsAnsweredWithIcmpWhenConfigured) {
    xlb_config cfg = default_config();
    cfg.flags |= XLB_CFG_F_ICMP_TOO_BIG;
    write_config(cfg);
    v4_vip();
    add_vip(kVipV6, kVipPort, kProtoTcp, kVipId + 1);
    publish_maglev(kVipId + 1, {{20}, {21}});
    FrameOptions reply_opt;  // what the reply's headers must hold
    reply_opt.eth_src = kLbMac;
    reply_opt.eth_dst = kClientSideMac;
    reply_opt.ttl = 64;
    reply_opt.ipv4_id = 0;
    reply_opt.ipv4_frag = 0x4000;
    reply_opt.ipv6_flow_label = 0;

    FrameOptions big;
    big.payload.assign(kLinkMtu - 40, 'x');
    Bytes frame = make_frame(v4_flow(), big);
    Bytes ip4 = ip_packet_of(frame);
    Bytes expected4 = make_icmp_too_big_frame(kVipV4, Bytes(ip4.begin(), ip4.begin() + 28),
                                              kLinkMtu - 20, reply_opt);
    ASSERT_EQ(checksum_errors(expected4), "");
    expect_outcome(frame, XDP_TX, XLB_OUT_TX_ICMP_TOO_BIG, expected4);

    Bytes frame6 = make_frame(v6_flow(), big);
    Bytes ip6 = ip_packet_of(frame6);
    Bytes expected6 = make_icmp_too_big_frame(kVipV6, Bytes(ip6.begin(), ip6.begin() + 48),
                                              kLinkMtu - 40, reply_opt);
    ASSERT_EQ(checksum_errors(expected6), "");
    expect_outcome(frame6, XDP_TX, XLB_OUT_TX_ICMP_TOO_BIG, expected6);

    // IPv4 without DF did not ask for path-MTU discovery: dropped, not answered
    big.ipv4_frag = 0;
    expect_outcome(make_frame(v4_flow(), big), XDP_DROP, XLB_OUT_DROP_TOO_BIG, std::nullopt);
    EXPECT_EQ(vip_stats(kVipId).drops, 2u);
}

TEST_F(LbPacketTest, EstablishedFlowStaysOnItsBackendAcrossATableSwap) {
    auto ring = v4_vip();
    Flow flow = v4_flow(45000);
    const xlb_flow_key key = flow_key(flow);
    const std::uint32_t first = expected_backend(ring, key);
    expect_forwarded(make_frame(flow), flow, ring);  // ACK: miss, ring, recorded

    auto recorded = lb().conntrack().get(key);
    ASSERT_TRUE(recorded && *recorded);
    EXPECT_EQ((*recorded)->backend_id, first);
    EXPECT_EQ((*recorded)->generation, 1u);

    // new ring without the flow's backend (e.g. it is drained): the flow stays
    std::vector<RingMember> others;
    for (std::uint32_t id = 10; id < 14; ++id)
        if (id != first) others.push_back({id});
    auto new_ring = publish_maglev(kVipId, others);
    ASSERT_NE(expected_backend(new_ring, key), first);
    Bytes ack = make_frame(flow);
    expect_outcome(ack, XDP_TX, XLB_OUT_TX, expected_encap(ack, backend_addr_[first], key));
    EXPECT_EQ(vip_stats(kVipId).conntrack_hits, 1u);

    // a SYN with the same tuple is a new connection: it follows the new ring
    FrameOptions syn;
    syn.tcp_flags = kTcpSyn;
    Bytes syn_frame = make_frame(flow, syn);
    const std::uint32_t moved = expected_backend(new_ring, key);
    expect_outcome(syn_frame, XDP_TX, XLB_OUT_TX,
                   expected_encap(syn_frame, backend_addr_[moved], key));
    auto rerecorded = lb().conntrack().get(key);
    ASSERT_TRUE(rerecorded && *rerecorded);
    EXPECT_EQ((*rerecorded)->backend_id, moved);
}

TEST_F(LbPacketTest, FlowOfARemovedBackendMovesToALiveOne) {
    auto ring = v4_vip();
    Flow flow = v4_flow(46000);
    const xlb_flow_key key = flow_key(flow);
    const std::uint32_t first = expected_backend(ring, key);
    expect_forwarded(make_frame(flow), flow, ring);

    // the backend is removed: new ring without it, and its generation bumped
    std::vector<RingMember> others;
    for (std::uint32_t id = 10; id < 14; ++id)
        if (id != first) others.push_back({id});
    auto new_ring = publish_maglev(kVipId, others);
    add_backend(first, backend_addr_[first], 2);

    const std::uint32_t moved = expected_backend(new_ring, key);
    Bytes ack = make_frame(flow);
    expect_outcome(ack, XDP_TX, XLB_OUT_TX, expected_encap(ack, backend_addr_[moved], key));
    auto recorded = lb().conntrack().get(key);
    ASSERT_TRUE(recorded && *recorded);
    EXPECT_EQ((*recorded)->backend_id, moved);
    EXPECT_EQ(vip_stats(kVipId).conntrack_hits, 0u);
    EXPECT_EQ(backend_stats(first).packets, 1u);
    EXPECT_EQ(backend_stats(moved).packets, 1u);
}

TEST_F(LbPacketTest, NoConntrackVipNeverRecordsFlows) {
    auto ring = v4_vip(kProtoUdp, XLB_VIP_F_NO_CONNTRACK);
    Flow flow = v4_flow(47000, kProtoUdp);
    expect_forwarded(make_frame(flow), flow, ring);
    expect_forwarded(make_frame(flow), flow, ring);
    auto recorded = lb().conntrack().get(flow_key(flow));
    ASSERT_TRUE(recorded);
    EXPECT_FALSE(*recorded);
    EXPECT_EQ(vip_stats(kVipId).new_flows, 2u);
}

TEST_F(LbPacketTest, CountersCountPacketsAndBytes) {
    auto ring = v4_vip();
    Flow flow = v4_flow(48000);
    Bytes frame = make_frame(flow);
    for (int i = 0; i < 5; ++i) run(frame);
    const std::uint32_t backend = expected_backend(ring, flow_key(flow));
    xlb_vip_stats vs = vip_stats(kVipId);
    EXPECT_EQ(vs.packets, 5u);
    EXPECT_EQ(vs.bytes, 5u * frame.size());
    EXPECT_EQ(vs.new_flows, 1u);
    EXPECT_EQ(vs.conntrack_hits, 4u);
    EXPECT_EQ(backend_stats(backend).packets, 5u);
    EXPECT_EQ(backend_stats(backend).bytes, 5u * frame.size());
    EXPECT_EQ(outcomes()[XLB_OUT_TX], 5u);
}

TEST_F(LbPacketTest, IcmpFragmentationNeededGoesToTheFlowsBackend) {
    auto ring = v4_vip();
    Flow flow = v4_flow(49000);
    const xlb_flow_key key = flow_key(flow);
    expect_forwarded(make_frame(flow), flow, ring);
    const std::uint32_t owner = expected_backend(ring, key);

    // the flow's owner is no longer in the ring; the error must still reach it
    std::vector<RingMember> others;
    for (std::uint32_t id = 10; id < 14; ++id)
        if (id != owner) others.push_back({id});
    publish_maglev(kVipId, others);

    // the backend's reply (VIP -> client) hit a small link on the way back
    Flow reply{kVipV4, kClientV4, kVipPort, 49000, kProtoTcp};
    FrameOptions big;
    big.payload.assign(1400, 'r');
    Bytes icmp = make_icmp_too_big_frame(kRouterV4, make_ip_packet(reply, big), 1280);
    ASSERT_EQ(checksum_errors(icmp), "");
    expect_outcome(icmp, XDP_TX, XLB_OUT_TX_ICMP_ERROR,
                   expected_encap(icmp, backend_addr_[owner], key));
    EXPECT_FALSE(*lb().conntrack().get(flow_key(Flow{kRouterV4, kVipV4, 0, 0, kProtoIcmp})));
}

TEST_F(LbPacketTest, IcmpV6PacketTooBigGoesToTheFlowsBackend) {
    auto ring = v6_vip();
    Flow flow = v6_flow(49100);
    const xlb_flow_key key = flow_key(flow);
    const std::uint32_t owner = expected_backend(ring, key);
    Flow reply{kVipV6, kClientV6, kVipPort, 49100, kProtoTcp};
    FrameOptions big;
    big.payload.assign(1400, 'r');
    Bytes icmp = make_icmp_too_big_frame(kRouterV6, make_ip_packet(reply, big), 1280);
    ASSERT_EQ(checksum_errors(icmp), "");
    // no connection-table entry: the ring decides, as for the flow's packets
    expect_outcome(icmp, XDP_TX, XLB_OUT_TX_ICMP_ERROR,
                   expected_encap(icmp, backend_addr_[owner], key));
}

TEST_F(LbPacketTest, OtherIcmpErrorsAndUnknownQuotesPass) {
    v4_vip();
    Flow reply{kVipV4, kClientV4, kVipPort, 49000, kProtoTcp};
    Bytes quoted = make_ip_packet(reply);
    Bytes icmp = make_icmp_too_big_frame(kRouterV4, quoted, 1280);
    Bytes port_unreachable = icmp;
    port_unreachable[14 + 20 + 1] = 3;  // code 3; the checksum is not ours to judge
    expect_outcome(port_unreachable, XDP_PASS, XLB_OUT_PASS_NOT_VIP, port_unreachable);
    Flow other{ip("198.51.100.77"), kClientV4, kVipPort, 49000, kProtoTcp};
    Bytes unrelated = make_icmp_too_big_frame(kRouterV4, make_ip_packet(other), 1280);
    expect_outcome(unrelated, XDP_PASS, XLB_OUT_PASS_NOT_VIP, unrelated);
    Bytes truncated(icmp.begin(), icmp.begin() + 14 + 20 + 4);
    truncated[14 + 3] = 24;  // IPv4 total length: header + 4 bytes of ICMP
    truncated[14 + 10] = truncated[14 + 11] = 0;
    std::uint16_t c = internet_checksum(&truncated[14], 20);
    truncated[14 + 10] = static_cast<std::uint8_t>(c >> 8);
    truncated[14 + 11] = static_cast<std::uint8_t>(c);
    expect_outcome(truncated, XDP_DROP, XLB_OUT_DROP_MALFORMED_L4, std::nullopt);
}

// The program and C++ agree on every flow: same hash, same table.
TEST_F(LbPacketTest, TenThousandRandomFlowsPickWhatCppComputes) {
    add_vip(kVipV4, 0, kProtoTcp, kVipId);
    add_vip(kVipV6, 0, kProtoUdp, 5);
    std::vector<RingMember> v4_members, v6_members;
    for (std::uint32_t id = 30; id < 60; ++id) {
        add_backend(id, net::IpAddress::v4(203, 0, 113, static_cast<std::uint8_t>(id)));
        v4_members.push_back({id, 1 + id % 3});
    }
    for (std::uint32_t id = 60; id < 70; ++id) {
        net::IpAddress a = kBackendV6[0];
        a.bytes[15] = static_cast<std::uint8_t>(id);
        add_backend(id, a);
        v6_members.push_back({id});
    }
    auto ring4 = publish_maglev(kVipId, v4_members);
    auto ring6 = publish_maglev(5, v6_members);
    std::mt19937_64 rng(20261129);
    FrameOptions opt;
    opt.tcp_flags = kTcpSyn;
    opt.payload = {};
    int mismatches = 0;
    for (int i = 0; i < 10000; ++i) {
        const bool v6 = i % 4 == 3;
        Flow flow;
        if (v6) {
            flow.src = kClientV6;
            for (int b = 8; b < 16; ++b) flow.src.bytes[b] = static_cast<std::uint8_t>(rng());
            flow.dst = kVipV6;
            flow.proto = kProtoUdp;
        } else {
            flow.src = net::IpAddress::v4(static_cast<std::uint8_t>(rng()), static_cast<std::uint8_t>(rng()),
                                          static_cast<std::uint8_t>(rng()), static_cast<std::uint8_t>(rng()));
            flow.dst = kVipV4;
        }
        flow.sport = static_cast<std::uint16_t>(rng());
        flow.dport = static_cast<std::uint16_t>(1 + rng() % 65535);
        Bytes frame = make_frame(flow, opt);
        auto out = run(frame);
        ASSERT_EQ(out.action, XDP_TX);
        const auto& ring = v6 ? ring6 : ring4;
        const std::uint32_t want = expected_backend(ring, flow_key(flow));
        net::IpAddress got = v6 ? net::IpAddress::from_words(
                                      reinterpret_cast<const __be32*>(&out.frame[14 + 24]), 6)
                                : net::IpAddress::v4(out.frame[30], out.frame[31], out.frame[32],
                                                     out.frame[33]);
        if (got != backend_addr_[want]) ++mismatches;
    }
    EXPECT_EQ(mismatches, 0);
}

}  // namespace
}  // namespace xlb::test
