// SPDX-License-Identifier: Apache-2.0
// Packet-by-packet tests of bpf/xlb_lb.bpf.c through BPF_PROG_TEST_RUN.
//
// Single packets are rows of one table (PacketCase): the input frame, the map
// seeding, the XDP action, the whole output frame (built independently in
// C++, with valid checksums) and the counter deltas: exactly one outcome
// counter moves, by one, and each listed VIP's counters move by what the row
// says. The fixture resets every map before each row, so order never matters.
// Sequences (a flow across a table swap) and distributions stay TEST_F below.
#include <arpa/inet.h>

#include <cstdio>
#include <functional>
#include <ostream>
#include <random>
#include <set>
#include <string>

#include "lb_fixture.h"
#include "xlb/datapath/setup.h"

namespace xlb::test {
namespace {

constexpr std::uint32_t kVipId = 3;

Flow v4_flow(std::uint16_t sport = 40000, std::uint8_t proto = kProtoTcp) {
    return Flow{kClientV4, kVipV4, sport, kVipPort, proto};
}
Flow v6_flow(std::uint16_t sport = 40000, std::uint8_t proto = kProtoTcp) {
    return Flow{kClientV6, kVipV6, sport, kVipPort, proto};
}

class LbPacketTest : public LbTest {
public:
    // Public for the table's seeding functions.
    using LbTest::add_vip;
    using LbTest::default_config;
    using LbTest::publish_maglev;
    using LbTest::publish_ring;
    using LbTest::write_config;

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

protected:
    void SetUp() override {
        LbTest::SetUp();
        for (std::uint32_t i = 0; i < 4; ++i) add_backend(10 + i, kBackendV4[i]);
        for (std::uint32_t i = 0; i < 4; ++i) add_backend(20 + i, kBackendV6[i]);
    }

    // The frame `input` of `flow` must leave encapsulated to the backend
    // `ring` gives the flow; returns that frame, checked for being valid and
    // for carrying the client's IP packet byte for byte.
    Bytes expected_forward(const Bytes& input, const Flow& flow,
                           const std::vector<std::uint32_t>& ring, std::uint32_t vip_flags,
                           std::uint32_t* backend_out = nullptr) {
        const xlb_flow_key key = flow_key(flow);
        const std::uint32_t backend = expected_backend(ring, key, vip_flags);
        if (backend_out) *backend_out = backend;
        Bytes expected = expected_encap(input, backend_addr_[backend], key, vip_flags);
        EXPECT_EQ(checksum_errors(expected), "") << "test bug: expected frame is invalid";
        const auto inner_at =
            static_cast<std::ptrdiff_t>(14 + (backend_addr_[backend].is_v4() ? 20 : 40) +
                                        (config_.flags & XLB_CFG_F_GUE ? 12 : 0));
        const Bytes inner = ip_packet_of(input);
        EXPECT_EQ(Bytes(expected.begin() + inner_at,
                        expected.begin() + inner_at + static_cast<std::ptrdiff_t>(inner.size())),
                  inner);
        return expected;
    }

    // Sends the frame and expects it encapsulated to the ring's choice.
    void expect_forwarded(const Bytes& frame, const Flow& flow,
                          const std::vector<std::uint32_t>& ring, std::uint32_t vip_flags = 0) {
        Bytes expected = expected_forward(frame, flow, ring, vip_flags);
        expect_outcome(frame, XDP_TX, XLB_OUT_TX, expected);
    }
};

// ---------------------------------------------------------------------------
// The table

// What a row's seeding leaves for the expectation: the ring a forwarded
// packet's backend comes from and the VIP's hash flags.
struct Seeded {
    std::vector<std::uint32_t> ring;
    std::uint32_t vip_flags = 0;
};
using Seed = std::function<Seeded(LbPacketTest&)>;

enum class Output {
    kNotChecked,  // dropped: the frame goes nowhere
    kInput,       // passed to the kernel unmodified
    kEncap,       // encapsulated to the backend the seeded ring gives `flow`
    kFrame,       // exactly `expected`
};

// A VIP's counters over the row's packet; bytes move by packets * frame size.
struct VipDelta {
    std::uint32_t vip_id;
    std::uint64_t packets = 0, new_flows = 0, conntrack_hits = 0, drops = 0;
};

struct PacketCase {
    std::string name;
    Seed seed;
    Bytes input;
    std::uint32_t action = XDP_PASS;
    xlb_outcome outcome = XLB_OUT_PASS_NOT_VIP;  // the one outcome counter that moves
    Output output = Output::kNotChecked;
    Flow flow{};     // kEncap: the client's flow, whose hash picks the backend
    Bytes expected;  // kFrame
    std::vector<VipDelta> vips;
    // Further checks of the input (that the row builds what it means) and
    // of the output frame.
    std::function<void(const Bytes& input, const Bytes& output)> also;
};

void PrintTo(const PacketCase& c, std::ostream* os) { *os << c.name; }

Seed v4_seed(std::uint8_t proto = kProtoTcp, std::uint32_t flags = 0) {
    return [=](LbPacketTest& t) { return Seeded{t.v4_vip(proto, flags), flags}; };
}
Seed v6_seed(std::uint8_t proto = kProtoTcp) {
    return [=](LbPacketTest& t) { return Seeded{t.v6_vip(proto)}; };
}
// The VIP at port kVipPort for TCP and UDP, IPv4 and IPv6.
Seed four_vips_seed() {
    return [](LbPacketTest& t) {
        auto ring = t.v4_vip(kProtoTcp);
        t.add_vip(kVipV4, kVipPort, kProtoUdp, kVipId);
        t.add_vip(kVipV6, kVipPort, kProtoTcp, kVipId);
        t.add_vip(kVipV6, kVipPort, kProtoUdp, kVipId);
        return Seeded{ring};
    };
}

// A new flow's first packet: encapsulated, counted as a new flow.
PacketCase forward(std::string name, Seed seed, const Flow& flow, const FrameOptions& opt = {},
                   std::uint32_t vip_id = kVipId) {
    return {.name = std::move(name),
            .seed = std::move(seed),
            .input = make_frame(flow, opt),
            .action = XDP_TX,
            .outcome = XLB_OUT_TX,
            .output = Output::kEncap,
            .flow = flow,
            .vips = {{vip_id, 1, 1, 0, 0}}};
}
PacketCase pass(std::string name, Seed seed, Bytes input, xlb_outcome outcome) {
    return {.name = std::move(name),
            .seed = std::move(seed),
            .input = std::move(input),
            .action = XDP_PASS,
            .outcome = outcome,
            .output = Output::kInput,
            .vips = {{kVipId}}};
}
PacketCase drop(std::string name, Seed seed, Bytes input, xlb_outcome outcome,
                std::vector<VipDelta> vips = {{kVipId}}) {
    return {.name = std::move(name),
            .seed = std::move(seed),
            .input = std::move(input),
            .action = XDP_DROP,
            .outcome = outcome,
            .vips = std::move(vips)};
}

// An IPv4 frame whose header says it is `total` bytes long, checksum fixed.
void set_ipv4_total_length(Bytes& frame, std::size_t total) {
    frame[14 + 2] = static_cast<std::uint8_t>(total >> 8);
    frame[14 + 3] = static_cast<std::uint8_t>(total);
    frame[14 + 10] = frame[14 + 11] = 0;
    const std::uint16_t c = internet_checksum(&frame[14], 20);
    frame[14 + 10] = static_cast<std::uint8_t>(c >> 8);
    frame[14 + 11] = static_cast<std::uint8_t>(c);
}

std::string flow_name(const Flow& flow) {
    return std::string(flow.src.is_v4() ? "Ipv4" : "Ipv6") +
           (flow.proto == kProtoTcp ? "Tcp" : "Udp");
}

void add_forwarding_cases(std::vector<PacketCase>& cases) {
    for (auto [flags, name] : {std::pair<std::uint8_t, const char*>{kTcpSyn, "Syn"},
                               {kTcpAck, "Ack"},
                               {std::uint8_t(kTcpFin | kTcpAck), "FinAck"}}) {
        FrameOptions opt;
        opt.tcp_flags = flags;
        cases.push_back(forward(std::string("Ipv4Tcp") + name + "IsEncapsulatedToTheRingsBackend",
                                v4_seed(), v4_flow(41000 + flags), opt));
    }
    cases.push_back(forward("Ipv4UdpIsEncapsulated", v4_seed(kProtoUdp), v4_flow(5353, kProtoUdp)));

    for (std::uint8_t proto : {kProtoTcp, kProtoUdp}) {
        FrameOptions opt;
        opt.tos = 0xb8;  // traffic class must be copied to the outer header
        Seed seed = [](LbPacketTest& t) {
            auto ring = t.v6_vip(kProtoTcp);
            t.add_vip(kVipV6, kVipPort, kProtoUdp, kVipId);
            return Seeded{ring};
        };
        cases.push_back(forward(
            proto == kProtoTcp ? "Ipv6TcpIsEncapsulatedIp6Ip6" : "Ipv6UdpIsEncapsulatedIp6Ip6",
            seed, v6_flow(42000, proto), opt));
    }

    {
        FrameOptions opt;
        opt.tos = 0x28;
        PacketCase c = forward(
            "Ipv4VipWithIpv6BackendIsIpv4InIpv6",
            [](LbPacketTest& t) {
                t.add_vip(kVipV4, kVipPort, kProtoTcp, kVipId);
                return Seeded{t.publish_maglev(kVipId, {{20}, {21}})};
            },
            v4_flow(43000), opt);
        c.also = [](const Bytes&, const Bytes& out) {
            ASSERT_GT(out.size(), 14u + 6);
            EXPECT_EQ(out[14 + 6], kProtoIpip) << "IPv4-in-IPv6 uses next header 4";
        };
        cases.push_back(std::move(c));
    }

    for (std::uint16_t port : {22, 443, 8080}) {
        cases.push_back(forward(
            "PortWildcardVipMatchesPort" + std::to_string(port),
            [](LbPacketTest& t) {
                t.add_vip(kVipV4Wildcard, 0, kProtoTcp, kVipId);
                return Seeded{t.publish_maglev(kVipId, {{10}, {11}})};
            },
            Flow{kClientV4, kVipV4Wildcard, 40000, port, kProtoTcp}));
    }

    {
        PacketCase c = forward(
            "ExactVipWinsOverWildcard",
            [](LbPacketTest& t) {
                t.add_vip(kVipV4, 0, kProtoTcp, 7);
                t.add_vip(kVipV4, kVipPort, kProtoTcp, kVipId);
                t.publish_maglev(7, {{10}});
                return Seeded{t.publish_maglev(kVipId, {{12}})};
            },
            v4_flow());
        c.vips.push_back({7});
        cases.push_back(std::move(c));
    }

    {
        FrameOptions opt;
        opt.payload = {};
        opt.pad_to = 60;  // minimum Ethernet frame: 6 bytes of padding after a bare ACK
        PacketCase c =
            forward("EthernetPaddingAfterTheIpPacketIsCutOff", v4_seed(), v4_flow(), opt);
        c.also = [](const Bytes& in, const Bytes& out) {
            EXPECT_EQ(in.size(), 60u);
            EXPECT_EQ(out.size(), 54u + 20u) << "inner packet (40) + outer header + Ethernet";
        };
        cases.push_back(std::move(c));
    }
    {
        // Padding after an IPv6 packet inside an IPv6 outer header, whose
        // payload length must be the inner packet's length alone.
        FrameOptions opt;
        opt.payload = {};
        opt.pad_to = 120;
        PacketCase c =
            forward("EthernetPaddingAfterAnIpv6PacketIsCutOff", v6_seed(), v6_flow(), opt);
        c.also = [](const Bytes& in, const Bytes& out) {
            EXPECT_EQ(in.size(), 120u);
            EXPECT_EQ(out.size(), 14u + 40u + 60u);
        };
        cases.push_back(std::move(c));
    }

    {
        FrameOptions opt;
        opt.ipv4_options = {0x94, 0x04, 0x00, 0x00,
                            0x01, 0x01, 0x01, 0x00};  // router alert, NOPs, EOL
        PacketCase c =
            forward("Ipv4WithOptionsIsForwardedWithTheOptions", v4_seed(), v4_flow(), opt);
        c.also = [](const Bytes& in, const Bytes&) { EXPECT_EQ(in[14] & 0x0f, 7); };
        cases.push_back(std::move(c));
    }
}

void add_pass_cases(std::vector<PacketCase>& cases) {
    Seed both = [](LbPacketTest& t) {
        auto ring = t.v4_vip();
        t.add_vip(kVipV6, kVipPort, kProtoTcp, 4);
        t.publish_maglev(4, {{20}});
        return Seeded{ring};
    };
    const std::pair<const char*, Flow> not_vips[] = {
        {"NotAVipAddressPasses", {kClientV4, ip("198.51.100.99"), 40000, kVipPort, kProtoTcp}},
        {"NotAVipPortPasses", {kClientV4, kVipV4, 40000, 81, kProtoTcp}},
        {"NotAVipProtocolPasses", {kClientV4, kVipV4, 40000, kVipPort, kProtoUdp}},
        {"NotAVipIpv6AddressPasses", {kClientV6, ip("2001:db8:f::99"), 40000, kVipPort, kProtoTcp}},
        {"NotAVipIpv6ProtocolPasses", {kClientV6, kVipV6, 40000, kVipPort, kProtoUdp}},
    };
    for (const auto& [name, flow] : not_vips) {
        PacketCase c = pass(name, both, make_frame(flow), XLB_OUT_PASS_NOT_VIP);
        c.vips.push_back({4});
        cases.push_back(std::move(c));
    }
    {
        // ICMP echo to the VIP address is the kernel's business
        FrameOptions opt;
        opt.payload = {8, 0, 0xf7, 0xff, 0, 0, 0, 0};
        PacketCase c =
            pass("IcmpEchoToTheVipPasses", both,
                 make_frame(Flow{kClientV4, kVipV4, 0, 0, kProtoIcmp}, opt), XLB_OUT_PASS_NOT_VIP);
        c.vips.push_back({4});
        cases.push_back(std::move(c));
    }

    cases.push_back(pass("ArpPasses", v4_seed(),
                         ethernet(kLbMac, kClientSideMac, 0x0806, Bytes(28, 0x11)),
                         XLB_OUT_PASS_NOT_IP));
    cases.push_back(pass("VlanTaggedPasses", v4_seed(),
                         ethernet(kLbMac, kClientSideMac, 0x8100, make_ip_packet(v4_flow())),
                         XLB_OUT_PASS_NOT_IP));
    cases.push_back(pass(
        "UnconfiguredProgramPassesEverything",
        [](LbPacketTest& t) {
            auto ring = t.v4_vip();
            xlb_config cfg = t.default_config();
            cfg.magic = 0;
            t.write_config(cfg);
            return Seeded{ring};
        },
        make_frame(v4_flow()), XLB_OUT_PASS_NO_CONFIG));

    Seed v4_and_v6 = [](LbPacketTest& t) {
        auto ring = t.v4_vip();
        t.v6_vip(kProtoTcp, kVipId + 1);
        return Seeded{ring};
    };
    for (std::uint16_t frag :
         {std::uint16_t(0x2000), std::uint16_t(0x0010), std::uint16_t(0x2010)}) {
        FrameOptions opt;
        opt.ipv4_frag = frag;
        char name[64];
        std::snprintf(name, sizeof name, "Ipv4Fragment%04xPasses", frag);
        PacketCase c = pass(name, v4_and_v6, make_frame(v4_flow(), opt), XLB_OUT_PASS_FRAGMENT);
        c.vips.push_back({kVipId + 1});
        cases.push_back(std::move(c));
    }
    {
        FrameOptions opt;
        opt.ipv6_ext = {{44, {0, 1, 0, 0, 0x12, 0x34}}};  // offset 0, more fragments
        PacketCase c = pass("Ipv6FirstFragmentPasses", v4_and_v6, make_frame(v6_flow(), opt),
                            XLB_OUT_PASS_FRAGMENT);
        c.vips.push_back({kVipId + 1});
        cases.push_back(std::move(c));
    }
}

void add_ipv6_extension_cases(std::vector<PacketCase>& cases) {
    FrameOptions opt;
    opt.ipv6_ext = {
        {0, {1, 4, 0, 0, 0, 0}},                            // hop-by-hop, PadN
        {43, {0, 0, 0, 0, 0, 0}},                           // routing, 0 segments left
        {60, {1, 12, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}},  // dest opts, 16 bytes
    };
    const Flow flow = v6_flow(44000);
    cases.push_back(forward("Ipv6ExtensionHeadersAreWalked", v6_seed(), flow, opt));

    // more extension headers than the program walks: the kernel decides
    FrameOptions many;
    for (int i = 0; i < XLB_IPV6_EXT_MAX + 1; ++i)
        many.ipv6_ext.push_back({60, {1, 4, 0, 0, 0, 0}});
    cases.push_back(pass("Ipv6ExtensionHeadersBeyondTheLimitPass", v6_seed(),
                         make_frame(flow, many), XLB_OUT_PASS_IPV6_EXT_LIMIT));

    // an extension header that runs past the packet
    Bytes bad = make_frame(flow, opt);
    bad[14 + 40 + 1] = 200;
    cases.push_back(drop("Ipv6ExtensionHeaderPastThePacketIsDropped", v6_seed(), bad,
                         XLB_OUT_DROP_MALFORMED_IPV6));

    // The payload length ends inside the extension headers (8 + 8 bytes of
    // hop-by-hop and routing, then 16 of destination options); the frame
    // goes on with the rest as if it were padding. The bytes past the
    // packet's own length are not the packet's.
    for (std::uint16_t payload : {std::uint16_t(4), std::uint16_t(12), std::uint16_t(24)}) {
        Bytes short_payload = make_frame(flow, opt);
        short_payload[14 + 4] = static_cast<std::uint8_t>(payload >> 8);
        short_payload[14 + 5] = static_cast<std::uint8_t>(payload);
        cases.push_back(drop(
            "Ipv6PayloadLengthEndingInsideExtensionHeader" + std::to_string(payload) + "IsDropped",
            v6_seed(), short_payload, XLB_OUT_DROP_MALFORMED_IPV6));
    }
}

void add_malformed_cases(std::vector<PacketCase>& cases) {
    // Truncating the frame anywhere must never read out of bounds and must
    // give the outcome of the first header that no longer fits: the IP
    // header is cut, or its length no longer fits the frame.
    for (const Flow& flow : {v4_flow(40000, kProtoTcp), v4_flow(40000, kProtoUdp),
                             v6_flow(40000, kProtoTcp), v6_flow(40000, kProtoUdp)}) {
        const Bytes full = make_frame(flow);
        const bool v4 = flow.src.is_v4();
        for (std::size_t len = 14; len < full.size(); ++len)
            cases.push_back(
                drop(flow_name(flow) + "CutTo" + std::to_string(len) + "Bytes", four_vips_seed(),
                     Bytes(full.begin(), full.begin() + static_cast<std::ptrdiff_t>(len)),
                     v4 ? XLB_OUT_DROP_MALFORMED_IPV4 : XLB_OUT_DROP_MALFORMED_IPV6));
    }

    // An IP packet whose own length ends inside the TCP or UDP header.
    for (const Flow& flow : {v4_flow(40000, kProtoTcp), v4_flow(40000, kProtoUdp),
                             v6_flow(40000, kProtoTcp), v6_flow(40000, kProtoUdp)}) {
        FrameOptions opt;
        opt.payload = {};
        const Bytes full = make_frame(flow, opt);
        const bool v4 = flow.src.is_v4();
        const std::size_t l3 = v4 ? 20 : 40;
        const std::size_t l4 = flow.proto == kProtoTcp ? 20 : 8;
        for (std::size_t keep = 0; keep < l4; ++keep) {
            Bytes cut(full.begin(), full.begin() + static_cast<std::ptrdiff_t>(14 + l3 + keep));
            if (v4) {
                set_ipv4_total_length(cut, l3 + keep);
            } else {
                cut[14 + 4] = 0;
                cut[14 + 5] = static_cast<std::uint8_t>(keep);
            }
            cases.push_back(
                drop(flow_name(flow) + "With" + std::to_string(keep) + "BytesOfL4IsMalformed",
                     four_vips_seed(), cut, XLB_OUT_DROP_MALFORMED_L4));
            // The same packet followed by the rest of the header as Ethernet
            // padding: the header still ends past the IP packet.
            Bytes padded = cut;
            padded.insert(padded.end(), full.begin() + static_cast<std::ptrdiff_t>(cut.size()),
                          full.end());
            padded.resize(std::max<std::size_t>(padded.size(), 60), 0);
            cases.push_back(drop(flow_name(flow) + "With" + std::to_string(keep) +
                                     "BytesOfL4AndTheRestInPaddingIsMalformed",
                                 four_vips_seed(), padded, XLB_OUT_DROP_MALFORMED_L4));
        }
    }
    {
        // TCP options (data offset 8 words) that end past the IP packet,
        // though inside the frame.
        FrameOptions opt;
        opt.payload.assign(12, 0x01);  // read as options when doff says so
        Bytes frame = make_frame(v4_flow(), opt);
        frame[14 + 20 + 12] = 8 << 4;
        set_ipv4_total_length(frame, 20 + 28);
        cases.push_back(drop("TcpOptionsEndingPastTheIpPacketAreMalformed", four_vips_seed(), frame,
                             XLB_OUT_DROP_MALFORMED_L4));
    }
    {
        Bytes bad = make_frame(v4_flow());
        bad[14 + 20 + 12] = 4 << 4;
        cases.push_back(drop("TcpDataOffsetBelowFiveWordsIsMalformed", four_vips_seed(), bad,
                             XLB_OUT_DROP_MALFORMED_L4));
    }

    const Bytes good = make_frame(v4_flow());
    Bytes ihl4 = good;
    ihl4[14] = 0x44;
    cases.push_back(drop("Ipv4HeaderLengthBelowFiveWordsIsDropped", v4_seed(), ihl4,
                         XLB_OUT_DROP_MALFORMED_IPV4));
    Bytes version = good;
    version[14] = 0x55;
    cases.push_back(
        drop("Ipv4VersionNotFourIsDropped", v4_seed(), version, XLB_OUT_DROP_MALFORMED_IPV4));
    Bytes short_total = good;
    short_total[14 + 2] = 0;
    short_total[14 + 3] = 19;  // total length below the header length
    cases.push_back(drop("Ipv4TotalLengthBelowHeaderLengthIsDropped", v4_seed(), short_total,
                         XLB_OUT_DROP_MALFORMED_IPV4));
}

void add_vip_drop_cases(std::vector<PacketCase>& cases) {
    cases.push_back(drop("Ipv6VipWithIpv4BackendIsDropped",
                         [](LbPacketTest& t) {
                             t.add_vip(kVipV6, kVipPort, kProtoTcp, kVipId);
                             return Seeded{t.publish_maglev(kVipId, {{10}})};
                         },
                         make_frame(v6_flow()), XLB_OUT_DROP_FAMILY, {{kVipId, 1, 1, 0, 1}}));

    const Bytes frame = make_frame(v4_flow());
    cases.push_back(drop("VipWithoutTableIsDropped",
                         [](LbPacketTest& t) {
                             t.add_vip(kVipV4, kVipPort, kProtoTcp, kVipId);
                             return Seeded{};
                         },
                         frame, XLB_OUT_DROP_NO_TABLE, {{kVipId, 1, 0, 0, 1}}));
    cases.push_back(drop("VipWithTheEmptyRingIsDropped",
                         [](LbPacketTest& t) {
                             t.add_vip(kVipV4, kVipPort, kProtoTcp, kVipId);
                             t.publish_ring(kVipId, {});  // the explicit empty ring
                             return Seeded{};
                         },
                         frame, XLB_OUT_DROP_NO_BACKEND, {{kVipId, 1, 0, 0, 1}}));
    // a ring naming an unused backend id is refused, not followed
    cases.push_back(drop("RingNamingAnUnusedBackendIsRefused",
                         [](LbPacketTest& t) {
                             t.add_vip(kVipV4, kVipPort, kProtoTcp, kVipId);
                             t.publish_ring(kVipId, {99, 99, 99, 99, 99, 99, 99});
                             return Seeded{};
                         },
                         frame, XLB_OUT_DROP_BAD_BACKEND, {{kVipId, 1, 0, 0, 1}}));
}

// With XLB_CFG_F_ICMP_TOO_BIG the client is told the size that fits: the
// answer quotes the IP header and 8 bytes of `frame` (`quoted` bytes) and
// names the MTU left once the outer headers (`outer` bytes) are added.
PacketCase answered_too_big(std::string name, Seed seed, const Bytes& frame,
                            const net::IpAddress& vip, std::size_t quoted, std::uint32_t outer,
                            std::uint32_t vip_id) {
    FrameOptions reply;  // what the reply's headers must hold
    reply.eth_src = kLbMac;
    reply.eth_dst = kClientSideMac;
    reply.ttl = 64;
    reply.ipv4_id = 0;
    reply.ipv4_frag = 0x4000;
    reply.ipv6_flow_label = 0;
    const Bytes ip = ip_packet_of(frame);
    return {.name = std::move(name),
            .seed = std::move(seed),
            .input = frame,
            .action = XDP_TX,
            .outcome = XLB_OUT_TX_ICMP_TOO_BIG,
            .output = Output::kFrame,
            .expected = make_icmp_too_big_frame(vip, Bytes(ip.begin(), ip.begin() + quoted),
                                                kLinkMtu - outer, reply),
            .vips = {{vip_id, 1, 1, 0, 1}}};
}

void add_too_big_cases(std::vector<PacketCase>& cases) {
    Seed v4_and_v6 = [](LbPacketTest& t) {
        auto ring = t.v4_vip();
        t.v6_vip(kProtoTcp, kVipId + 1);
        return Seeded{ring};
    };
    FrameOptions opt;
    opt.payload.assign(kLinkMtu - 20 - 20, 'x');  // exactly the MTU before encapsulation
    cases.push_back(drop("Ipv4TooBigAfterEncapsulationIsDropped", v4_and_v6,
                         make_frame(v4_flow(), opt), XLB_OUT_DROP_TOO_BIG, {{kVipId, 1, 1, 0, 1}}));
    opt.payload.resize(kLinkMtu - 20 - 20 - 20);  // fits exactly with the outer header
    cases.push_back(forward("Ipv4FittingTheMtuExactlyIsEncapsulated", v4_and_v6, v4_flow(), opt));
    FrameOptions opt6;
    opt6.payload.assign(kLinkMtu - 40 - 20, 'y');
    cases.push_back(drop("Ipv6TooBigAfterEncapsulationIsDropped", v4_and_v6,
                         make_frame(v6_flow(), opt6), XLB_OUT_DROP_TOO_BIG,
                         {{kVipId + 1, 1, 1, 0, 1}}));

    // With XLB_CFG_F_ICMP_TOO_BIG the client is told the size that fits.
    Seed answering = [](LbPacketTest& t) {
        xlb_config cfg = t.default_config();
        cfg.flags |= XLB_CFG_F_ICMP_TOO_BIG;
        t.write_config(cfg);
        auto ring = t.v4_vip();
        t.add_vip(kVipV6, kVipPort, kProtoTcp, kVipId + 1);
        t.publish_maglev(kVipId + 1, {{20}, {21}});
        return Seeded{ring};
    };
    FrameOptions big;
    big.payload.assign(kLinkMtu - 40, 'x');
    cases.push_back(answered_too_big("Ipv4TooBigIsAnsweredWithFragmentationNeeded", answering,
                                     make_frame(v4_flow(), big), kVipV4, 28, 20, kVipId));
    cases.push_back(answered_too_big("Ipv6TooBigIsAnsweredWithPacketTooBig", answering,
                                     make_frame(v6_flow(), big), kVipV6, 48, 40, kVipId + 1));
    // IPv4 without DF did not ask for path-MTU discovery: dropped, not answered
    big.ipv4_frag = 0;
    cases.push_back(drop("Ipv4TooBigWithoutDfIsDroppedNotAnswered", answering,
                         make_frame(v4_flow(), big), XLB_OUT_DROP_TOO_BIG, {{kVipId, 1, 1, 0, 1}}));
}

// With XLB_CFG_F_GUE every forwarded packet carries UDP (to the configured
// port, from a port the flow hash picks) and a GUE header naming the inner
// protocol between the outer IP header and the client's packet.
Seed with_gue(Seed inner, std::uint16_t port = XLB_GUE_PORT_DEFAULT,
              std::uint32_t extra_flags = 0) {
    return [=](LbPacketTest& t) {
        xlb_config cfg = t.default_config();
        cfg.flags |= XLB_CFG_F_GUE | extra_flags;
        cfg.gue_port = port;
        t.write_config(cfg);
        return inner(t);
    };
}

void add_gue_cases(std::vector<PacketCase>& cases) {
    // What the expected frames are built from must itself be GUE: the
    // outer protocol, the port, the GUE header's version and protocol.
    auto gue_at = [](std::size_t outer_ip, std::uint16_t port, std::uint8_t inner_proto) {
        return [=](const Bytes&, const Bytes& out) {
            ASSERT_GT(out.size(), 14 + outer_ip + 12);
            EXPECT_EQ(out[14 + (outer_ip == 20 ? 9 : 6)], kProtoUdp);
            const std::size_t udp = 14 + outer_ip;
            EXPECT_EQ(out[udp + 2] << 8 | out[udp + 3], port);
            EXPECT_GE(out[udp] << 8 | out[udp + 1], XLB_GUE_SPORT_BASE)
                << "source port from the hash";
            EXPECT_EQ(out[udp + 4] << 8 | out[udp + 5], out.size() - 14 - outer_ip)
                << "UDP length: the rest of the packet";
            EXPECT_EQ(out[udp + 8], 0) << "GUE version 0, data, no extensions";
            EXPECT_EQ(out[udp + 9], inner_proto);
        };
    };
    {
        PacketCase c = forward("GueIpv4InIpv4", with_gue(v4_seed()), v4_flow(45000));
        c.also = gue_at(20, XLB_GUE_PORT_DEFAULT, kProtoIpip);
        cases.push_back(std::move(c));
    }
    {
        PacketCase c = forward("GueIpv6InIpv6", with_gue(v6_seed()), v6_flow(45001));
        c.also = gue_at(40, XLB_GUE_PORT_DEFAULT, kProtoIpv6);
        cases.push_back(std::move(c));
    }
    {
        PacketCase c = forward("GueIpv4InIpv6", with_gue([](LbPacketTest& t) {
                                   t.add_vip(kVipV4, kVipPort, kProtoTcp, kVipId);
                                   return Seeded{t.publish_maglev(kVipId, {{20}, {21}})};
                               }),
                               v4_flow(45002));
        c.also = gue_at(40, XLB_GUE_PORT_DEFAULT, kProtoIpip);
        cases.push_back(std::move(c));
    }
    {
        PacketCase c = forward("GueUsesTheConfiguredPort", with_gue(v4_seed(kProtoUdp), 7777),
                               v4_flow(5353, kProtoUdp));
        c.also = gue_at(20, 7777, kProtoIpip);
        cases.push_back(std::move(c));
    }

    // The MTU counts the 12 bytes of UDP and GUE too.
    Seed v4_and_v6 = with_gue([](LbPacketTest& t) {
        auto ring = t.v4_vip();
        t.v6_vip(kProtoTcp, kVipId + 1);
        return Seeded{ring};
    });
    FrameOptions fits;
    fits.payload.assign(kLinkMtu - 20 - 20 - 20 - 12, 'g');
    cases.push_back(
        forward("GueIpv4FittingTheMtuExactlyIsEncapsulated", v4_and_v6, v4_flow(), fits));
    FrameOptions over = fits;
    over.payload.push_back('g');
    cases.push_back(drop("GueIpv4OneByteOverTheMtuIsDropped", v4_and_v6,
                         make_frame(v4_flow(), over), XLB_OUT_DROP_TOO_BIG,
                         {{kVipId, 1, 1, 0, 1}}));
    FrameOptions over6;
    over6.payload.assign(kLinkMtu - 40 - 20 - 40 - 12 + 1, 'h');
    cases.push_back(drop("GueIpv6OneByteOverTheMtuIsDropped", v4_and_v6,
                         make_frame(v6_flow(), over6), XLB_OUT_DROP_TOO_BIG,
                         {{kVipId + 1, 1, 1, 0, 1}}));

    // ICMP too-big names the MTU left after the outer IP header, UDP and GUE.
    Seed answering = with_gue(
        [](LbPacketTest& t) {
            auto ring = t.v4_vip();
            t.add_vip(kVipV6, kVipPort, kProtoTcp, kVipId + 1);
            t.publish_maglev(kVipId + 1, {{20}, {21}});
            return Seeded{ring};
        },
        XLB_GUE_PORT_DEFAULT, XLB_CFG_F_ICMP_TOO_BIG);
    FrameOptions big;
    big.payload.assign(kLinkMtu - 40, 'x');
    cases.push_back(answered_too_big("GueIpv4TooBigIsAnsweredWithTheRoomLeft", answering,
                                     make_frame(v4_flow(), big), kVipV4, 28, 20 + 12, kVipId));
    cases.push_back(answered_too_big("GueIpv6TooBigIsAnsweredWithTheRoomLeft", answering,
                                     make_frame(v6_flow(), big), kVipV6, 48, 40 + 12, kVipId + 1));
}

void add_icmp_error_cases(std::vector<PacketCase>& cases) {
    {
        // no connection-table entry: the ring decides, as for the flow's packets
        Flow reply{kVipV6, kClientV6, kVipPort, 49100, kProtoTcp};
        FrameOptions big;
        big.payload.assign(1400, 'r');
        cases.push_back(
            {.name = "IcmpV6PacketTooBigGoesToTheFlowsBackend",
             .seed = v6_seed(),
             .input = make_icmp_too_big_frame(kRouterV6, make_ip_packet(reply, big), 1280),
             .action = XDP_TX,
             .outcome = XLB_OUT_TX_ICMP_ERROR,
             .output = Output::kEncap,
             .flow = v6_flow(49100),
             .vips = {{kVipId, 1, 0, 0, 0}}});
    }
    Flow reply{kVipV4, kClientV4, kVipPort, 49000, kProtoTcp};
    const Bytes icmp = make_icmp_too_big_frame(kRouterV4, make_ip_packet(reply), 1280);
    Bytes port_unreachable = icmp;
    port_unreachable[14 + 20 + 1] = 3;  // code 3; the checksum is not ours to judge
    cases.push_back(
        pass("IcmpPortUnreachablePasses", v4_seed(), port_unreachable, XLB_OUT_PASS_NOT_VIP));
    Flow other{ip("198.51.100.77"), kClientV4, kVipPort, 49000, kProtoTcp};
    cases.push_back(pass("IcmpQuotingAnUnknownFlowPasses", v4_seed(),
                         make_icmp_too_big_frame(kRouterV4, make_ip_packet(other), 1280),
                         XLB_OUT_PASS_NOT_VIP));
    Bytes truncated(icmp.begin(), icmp.begin() + 14 + 20 + 4);
    set_ipv4_total_length(truncated, 24);  // header + 4 bytes of ICMP
    cases.push_back(
        drop("IcmpHeaderCutShortIsMalformed", v4_seed(), truncated, XLB_OUT_DROP_MALFORMED_L4));
    // Whoever it is for: an ICMP header cut short to an address that is no
    // VIP's is as malformed as a TCP or UDP one.
    {
        Bytes to_other = make_icmp_too_big_frame(kRouterV4, make_ip_packet(reply), 1280, {},
                                                 ip("198.51.100.99"));
        Bytes cut(to_other.begin(), to_other.begin() + 14 + 20 + 4);
        set_ipv4_total_length(cut, 24);
        cases.push_back(drop("IcmpHeaderCutShortToAnotherAddressIsMalformed", v4_seed(), cut,
                             XLB_OUT_DROP_MALFORMED_L4));
    }
    Bytes short_length = icmp;
    set_ipv4_total_length(short_length, 24);  // the rest of the frame is padding
    cases.push_back(drop("IcmpHeaderEndingPastTheIpPacketIsMalformed", v4_seed(), short_length,
                         XLB_OUT_DROP_MALFORMED_L4));

    // Only errors addressed to the VIP they quote go to a backend: one sent
    // to this host's own address is the kernel's.
    cases.push_back(
        pass("IcmpFragNeededToTheHostsOwnAddressPasses", v4_seed(),
             make_icmp_too_big_frame(kRouterV4, make_ip_packet(reply), 1280, {}, kEncapSrcV4),
             XLB_OUT_PASS_NOT_VIP));
    {
        Flow reply6{kVipV6, kClientV6, kVipPort, 49100, kProtoTcp};
        cases.push_back(
            pass("IcmpV6PacketTooBigToTheHostsOwnAddressPasses", v6_seed(),
                 make_icmp_too_big_frame(kRouterV6, make_ip_packet(reply6), 1280, {}, kEncapSrcV6),
                 XLB_OUT_PASS_NOT_VIP));
    }
    // A quoted IPv4 header with a bad checksum is not a packet the backend
    // sent; the error is the kernel's to judge.
    {
        Bytes quoted = make_ip_packet(reply);
        quoted[10] ^= 0x5a;
        Bytes frame = make_icmp_too_big_frame(kRouterV4, quoted, 1280);
        cases.push_back(
            pass("IcmpQuotingABadIpv4ChecksumPasses", v4_seed(), frame, XLB_OUT_PASS_NOT_VIP));
    }
    {
        // The same with IPv4 options in the quoted header: the checksum
        // covers them (ihl words), and a valid one is forwarded.
        FrameOptions with_options;
        with_options.ipv4_options = {0x01, 0x01, 0x01, 0x00};
        PacketCase c{
            .name = "IcmpQuotingAHeaderWithOptionsGoesToTheFlowsBackend",
            .seed = v4_seed(),
            .input = make_icmp_too_big_frame(kRouterV4, make_ip_packet(reply, with_options), 1280),
            .action = XDP_TX,
            .outcome = XLB_OUT_TX_ICMP_ERROR,
            .output = Output::kEncap,
            .flow = v4_flow(49000),
            .vips = {{kVipId, 1, 0, 0, 0}}};
        cases.push_back(std::move(c));
        Bytes quoted = make_ip_packet(reply, with_options);
        quoted[21] ^= 0x01;  // an option byte: the checksum no longer holds
        cases.push_back(pass("IcmpQuotingABadChecksumOverOptionsPasses", v4_seed(),
                             make_icmp_too_big_frame(kRouterV4, quoted, 1280),
                             XLB_OUT_PASS_NOT_VIP));
    }
}

// The IPv4 header checksum of a packet to a VIP's address is checked: a
// damaged header is dropped and counted, never forwarded; to any other
// address the packet is the kernel's, which checks it itself.
void add_checksum_cases(std::vector<PacketCase>& cases) {
    const Bytes good = make_frame(v4_flow(41000));
    Bytes bad = good;
    bad[14 + 10] ^= 0x5a;
    cases.push_back(
        drop("Ipv4HeaderWithABadChecksumIsDropped", v4_seed(), bad, XLB_OUT_DROP_IPV4_CSUM));
    Bytes zero = good;
    zero[14 + 10] = 0;
    zero[14 + 11] = 0;
    cases.push_back(
        drop("Ipv4HeaderWithAZeroChecksumIsDropped", v4_seed(), zero, XLB_OUT_DROP_IPV4_CSUM));
    Bytes ttl = good;
    ttl[14 + 8] -= 1;  // a router that forgot to update the checksum
    cases.push_back(drop("Ipv4HeaderChangedWithoutItsChecksumIsDropped", v4_seed(), ttl,
                         XLB_OUT_DROP_IPV4_CSUM));
    FrameOptions with_options;
    with_options.ipv4_options = {0x01, 0x01, 0x01, 0x00};
    Bytes options_bad = make_frame(v4_flow(41001), with_options);
    options_bad[14 + 21] ^= 0x01;  // an option byte: the checksum covers it
    cases.push_back(drop("Ipv4OptionsOutsideTheChecksumAreDropped", v4_seed(), options_bad,
                         XLB_OUT_DROP_IPV4_CSUM));
    Flow other = v4_flow(41002);
    other.dst = ip("198.51.100.77");
    Bytes other_bad = make_frame(other);
    other_bad[14 + 10] ^= 0x5a;
    cases.push_back(pass("Ipv4BadChecksumToAnotherAddressIsTheKernels", v4_seed(), other_bad,
                         XLB_OUT_PASS_NOT_VIP));

    // A "too big" error to a VIP must quote an IP packet of its own family:
    // its addresses and ports would be read from whatever it quotes.
    Flow reply4{kVipV4, kClientV4, kVipPort, 49000, kProtoTcp};
    Flow reply6{kVipV6, kClientV6, kVipPort, 49100, kProtoTcp};
    cases.push_back(
        drop("IcmpV6TooBigQuotingAnIpv4PacketIsDropped", v6_seed(),
             make_icmp_too_big_frame(kRouterV6, make_ip_packet(reply4), 1280, {}, kVipV6),
             XLB_OUT_DROP_ICMP_QUOTE));
    Bytes not_ip = make_ip_packet(reply6);
    not_ip[0] = 0x00;  // version 0
    cases.push_back(drop("IcmpV6TooBigQuotingNoIpPacketIsDropped", v6_seed(),
                         make_icmp_too_big_frame(kRouterV6, not_ip, 1280, {}, kVipV6),
                         XLB_OUT_DROP_ICMP_QUOTE));
    Bytes version6 = make_icmp_too_big_frame(kRouterV4, make_ip_packet(reply4), 1280);
    version6[14 + 20 + 8] = 0x65;  // the quote says version 6 (the ICMP checksum is not ours)
    cases.push_back(drop("IcmpFragNeededQuotingNoIpv4PacketIsDropped", v4_seed(), version6,
                         XLB_OUT_DROP_ICMP_QUOTE));
}

std::vector<PacketCase> packet_cases() {
    std::vector<PacketCase> cases;
    add_forwarding_cases(cases);
    add_pass_cases(cases);
    add_ipv6_extension_cases(cases);
    add_malformed_cases(cases);
    add_vip_drop_cases(cases);
    add_too_big_cases(cases);
    add_checksum_cases(cases);
    add_icmp_error_cases(cases);
    add_gue_cases(cases);
    return cases;
}

class LbPacketTableTest : public LbPacketTest, public ::testing::WithParamInterface<PacketCase> {};

TEST_P(LbPacketTableTest, Packet) {
    const PacketCase& c = GetParam();
    SCOPED_TRACE(describe(c.input));
    const Seeded seeded = c.seed ? c.seed(*this) : Seeded{};
    ASSERT_FALSE(HasFailure()) << "seeding the maps failed";

    std::optional<Bytes> expected;
    std::optional<std::uint32_t> backend;  // kEncap: the backend the packet goes to
    switch (c.output) {
        case Output::kNotChecked: break;
        case Output::kInput: expected = c.input; break;
        case Output::kFrame:
            ASSERT_EQ(checksum_errors(c.expected), "") << "test bug: expected frame is invalid";
            expected = c.expected;
            break;
        case Output::kEncap: {
            std::uint32_t id = 0;
            expected = expected_forward(c.input, c.flow, seeded.ring, seeded.vip_flags, &id);
            backend = id;
            break;
        }
    }
    if (c.output == Output::kEncap || c.output == Output::kFrame) {
        ASSERT_EQ(checksum_errors(c.input), "") << "test bug: input frame is invalid";
    }

    std::vector<xlb_vip_stats> vips_before;
    for (const VipDelta& d : c.vips) vips_before.push_back(vip_stats(d.vip_id));
    const xlb_backend_stats backend_before =
        backend ? backend_stats(*backend) : xlb_backend_stats{};

    expect_outcome(c.input, c.action, c.outcome, expected);

    for (std::size_t i = 0; i < c.vips.size(); ++i) {
        const VipDelta& d = c.vips[i];
        const xlb_vip_stats now = vip_stats(d.vip_id);
        const xlb_vip_stats& was = vips_before[i];
        SCOPED_TRACE(testing::Message() << "VIP " << d.vip_id);
        EXPECT_EQ(now.packets - was.packets, d.packets);
        EXPECT_EQ(now.bytes - was.bytes, d.packets * c.input.size());
        EXPECT_EQ(now.new_flows - was.new_flows, d.new_flows);
        EXPECT_EQ(now.conntrack_hits - was.conntrack_hits, d.conntrack_hits);
        EXPECT_EQ(now.drops - was.drops, d.drops);
    }
    if (backend) {
        const xlb_backend_stats now = backend_stats(*backend);
        EXPECT_EQ(now.packets - backend_before.packets, 1u) << "backend " << *backend;
        EXPECT_EQ(now.bytes - backend_before.bytes, c.input.size()) << "backend " << *backend;
    }
    if (c.also) c.also(c.input, run(c.input).frame);
}

INSTANTIATE_TEST_SUITE_P(Packets, LbPacketTableTest, ::testing::ValuesIn(packet_cases()),
                         [](const testing::TestParamInfo<PacketCase>& info) {
                             return info.param.name;
                         });

// ---------------------------------------------------------------------------
// Sequences and distributions

// The kernel's test run refuses frames shorter than an Ethernet header
// (EINVAL), as drivers never hand XDP one: the table starts at 14 bytes.
TEST_F(LbPacketTest, FramesShorterThanAnEthernetHeaderAreRefusedByTheTestRun) {
    for (std::size_t len = 0; len < 14; ++len) {
        auto refused = bpf::test_run_xdp(lb().prog_fd(), Bytes(len, 0));
        ASSERT_FALSE(refused);
        EXPECT_EQ(refused.error().code, EINVAL);
    }
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

    // a SYN with the same tuple is a new connection (the client reused the
    // port): it follows the new ring, and the old entry is pointed there too,
    // or the handshake's ACK would go to the old backend
    FrameOptions syn;
    syn.tcp_flags = kTcpSyn;
    Bytes syn_frame = make_frame(flow, syn);
    const std::uint32_t moved = expected_backend(new_ring, key);
    expect_outcome(syn_frame, XDP_TX, XLB_OUT_TX,
                   expected_encap(syn_frame, backend_addr_[moved], key));
    auto after_syn = lb().conntrack().get(key);
    ASSERT_TRUE(after_syn && *after_syn);
    EXPECT_EQ((*after_syn)->backend_id, moved);
    EXPECT_EQ((*after_syn)->generation, 1u);
    EXPECT_EQ((*after_syn)->created, (*after_syn)->last_seen);
    Bytes handshake_ack = make_frame(flow);
    expect_outcome(handshake_ack, XDP_TX, XLB_OUT_TX,
                   expected_encap(handshake_ack, backend_addr_[moved], key));
    EXPECT_EQ(vip_stats(kVipId).conntrack_hits, 2u);
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

// ---------------------------------------------------------------------------
// VIP candidates (abi.h, XLB_MAP_VIP_CANDIDATES): a bucket's block lists its
// VIPs; the hash map answers when the block cannot.

TEST_F(LbPacketTest, ABucketsBlockListsItsVips) {
    auto ring = v4_vip();
    add_vip(kVipV4, 0, kProtoUdp, kVipId + 1, XLB_VIP_F_NO_CONNTRACK);
    const std::uint32_t bucket = xlb_vip_bucket(flow_key(v4_flow()).dst);
    auto block = lb().vip_candidates().get(bucket);
    ASSERT_TRUE(block) << block.error().message();
    EXPECT_EQ(block->seq % 2, 0u);
    ASSERT_EQ(block->count, 2u);
    const bool tcp_first = block->vip[0].vip_id == kVipId;
    const xlb_vip_candidate& tcp = block->vip[tcp_first ? 0 : 1];
    const xlb_vip_candidate& udp = block->vip[tcp_first ? 1 : 0];
    EXPECT_EQ(tcp.vip_id, kVipId);
    EXPECT_EQ(tcp.port, htons(kVipPort));
    EXPECT_EQ(tcp.proto, kProtoTcp);
    EXPECT_EQ(tcp.family, XLB_FAMILY_V4);
    EXPECT_EQ(tcp.flags, 0u);
    EXPECT_EQ(udp.vip_id, kVipId + 1);
    EXPECT_EQ(udp.port, 0);
    EXPECT_EQ(udp.proto, kProtoUdp);
    EXPECT_EQ(udp.flags, XLB_VIP_F_NO_CONNTRACK);
    ASSERT_TRUE(lb().erase_vip(datapath::vip_key(kVipV4, 0, kProtoUdp)));
    EXPECT_EQ(lb().vip_candidates().get(bucket)->count, 1u);
    const Flow flow = v4_flow(47100);
    expect_forwarded(make_frame(flow), flow, ring);
}

TEST_F(LbPacketTest, MoreVipsThanABlockHoldsAreStillMatched) {
    constexpr std::uint32_t kVips = XLB_VIP_CANDIDATES + 2;
    for (std::uint32_t i = 0; i < kVips; ++i)
        add_vip(kVipV4, static_cast<std::uint16_t>(kVipPort + i), kProtoTcp, kVipId + i);
    const std::uint32_t bucket = xlb_vip_bucket(flow_key(v4_flow()).dst);
    EXPECT_EQ(lb().vip_candidates().get(bucket)->count, XLB_VIP_CANDIDATES_SPILL);
    for (std::uint32_t i = 0; i < kVips; ++i) {
        auto ring = publish_maglev(kVipId + i, {{10 + i % 4}});
        const Flow flow{kClientV4, kVipV4, 47200, static_cast<std::uint16_t>(kVipPort + i),
                        kProtoTcp};
        expect_forwarded(make_frame(flow), flow, ring);
        EXPECT_EQ(vip_stats(kVipId + i).packets, 1u) << "VIP " << i;
    }
    // Back under the limit: listed again.
    ASSERT_TRUE(lb().erase_vip(datapath::vip_key(kVipV4, kVipPort, kProtoTcp)));
    ASSERT_TRUE(lb().erase_vip(datapath::vip_key(kVipV4, kVipPort + 1, kProtoTcp)));
    EXPECT_EQ(lb().vip_candidates().get(bucket)->count, XLB_VIP_CANDIDATES);
}

TEST_F(LbPacketTest, ABlockBeingRewrittenIsNotTrusted) {
    // New flows every time: each takes the full path and matches the VIP.
    auto ring = v4_vip();
    Flow flow = v4_flow(47300);
    const std::uint32_t bucket = xlb_vip_bucket(flow_key(flow).dst);
    auto block = lb().vip_candidates().get(bucket);
    ASSERT_TRUE(block && block->count == 1);
    // A block naming another VIP id: followed while its seq is even (the
    // packet is counted there) ...
    publish_maglev(kVipId + 1, {{10}, {11}, {12}, {13}});
    xlb_vip_candidates wrong = *block;
    wrong.vip[0].vip_id = kVipId + 1;
    ASSERT_TRUE(lb().vip_candidates().put(bucket, wrong));
    expect_forwarded(make_frame(flow), flow, ring);
    EXPECT_EQ(vip_stats(kVipId + 1).packets, 1u);
    // ... and not while it is odd: the hash map has the truth.
    wrong.seq += 1;
    ASSERT_TRUE(lb().vip_candidates().put(bucket, wrong));
    flow = v4_flow(47301);
    expect_forwarded(make_frame(flow), flow, ring);
    EXPECT_EQ(vip_stats(kVipId).packets, 1u);
    EXPECT_EQ(vip_stats(kVipId + 1).packets, 1u);
    // A block with no room says nothing either.
    wrong.seq += 1;
    wrong.count = XLB_VIP_CANDIDATES_SPILL;
    ASSERT_TRUE(lb().vip_candidates().put(bucket, wrong));
    flow = v4_flow(47302);
    expect_forwarded(make_frame(flow), flow, ring);
    EXPECT_EQ(vip_stats(kVipId).packets, 2u);
    // The next change rewrites the block whole.
    add_vip(kVipV4, kVipPort, kProtoTcp, kVipId);
    block = lb().vip_candidates().get(bucket);
    EXPECT_EQ(block->seq % 2, 0u);
    EXPECT_EQ(block->count, 1u);
    EXPECT_EQ(block->vip[0].vip_id, kVipId);
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
            flow.src = net::IpAddress::v4(
                static_cast<std::uint8_t>(rng()), static_cast<std::uint8_t>(rng()),
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
        net::IpAddress got =
            v6 ? net::IpAddress::from_words(reinterpret_cast<const __be32*>(&out.frame[14 + 24]), 6)
               : net::IpAddress::v4(out.frame[30], out.frame[31], out.frame[32], out.frame[33]);
        if (got != backend_addr_[want]) ++mismatches;
    }
    EXPECT_EQ(mismatches, 0);
}

}  // namespace
}  // namespace xlb::test
