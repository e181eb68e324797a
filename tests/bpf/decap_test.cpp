// SPDX-License-Identifier: Apache-2.0
// Packet tests of bpf/xlb_decap.bpf.c, the backend-side decapsulator.
#include <arpa/inet.h>

#include <array>

#include "constants.h"
#include "lb_fixture.h"
#include "packet.h"
#include "xlb/bpf/programs.h"
#include "xlb/bpf/test_run.h"

namespace xlb::test {
namespace {

class DecapTest : public ::testing::Test {
protected:
    static void SetUpTestSuite() {
        program_ = decap_serving({kBackendV4[0], kBackendV6[0]});
        ASSERT_TRUE(program_);
    }
    static void TearDownTestSuite() { program_.reset(); }

    void expect_decap(const Bytes& input, xlb_decap_outcome outcome, const Bytes& expected) {
        expect_decap_run(*program_, input, XDP_PASS, outcome, expected);
    }

    static Bytes wrap(const Bytes& inner_ip, const net::IpAddress& to) {
        return encapsulate(inner_ip, from_lb(to));
    }
    static Bytes wrap_gue(const Bytes& inner_ip, const net::IpAddress& to,
                          std::uint16_t port = XLB_GUE_PORT_DEFAULT, const Bytes& extension = {}) {
        Encapsulation enc = from_lb(to);
        enc.gue_port = port;
        enc.gue_sport = 0xc123;
        enc.gue_extension = extension;
        return encapsulate(inner_ip, enc);
    }

    static std::optional<bpf::DecapProgram> program_;
};

std::optional<bpf::DecapProgram> DecapTest::program_;

TEST_F(DecapTest, EncapsulatedPacketsToThisBackendBecomeTheInnerPacket) {
    const Flow v4{kClientV4, kVipV4, 40000, kVipPort, kProtoTcp};
    const Flow v6{kClientV6, kVipV6, 40000, kVipPort, kProtoUdp};
    struct Case {
        const char* name;
        Bytes inner;
        net::IpAddress to;
    };
    const Case cases[] = {{"ipv4-in-ipv4", make_ip_packet(v4), kBackendV4[0]},
                          {"ipv4-in-ipv6", make_ip_packet(v4), kBackendV6[0]},
                          {"ipv6-in-ipv6", make_ip_packet(v6), kBackendV6[0]}};
    for (const Case& c : cases) {
        SCOPED_TRACE(c.name);
        const bool inner_v4 = (c.inner[0] >> 4) == 4;
        Bytes expected = ethernet(kLbMac, kNextHopMac, inner_v4 ? 0x0800 : 0x86dd, c.inner);
        expect_decap(wrap(c.inner, c.to), XLB_DECAP_OUT_DECAPSULATED, expected);
        SCOPED_TRACE("in GUE");
        expect_decap(wrap_gue(c.inner, c.to), XLB_DECAP_OUT_DECAPSULATED, expected);
        // Extension words (Hlen) are skipped with the header.
        expect_decap(wrap_gue(c.inner, c.to, XLB_GUE_PORT_DEFAULT, Bytes(8, 0xee)),
                     XLB_DECAP_OUT_DECAPSULATED, expected);
    }
}

TEST_F(DecapTest, GueOnlyOnItsPortAndOnlyDataOfVersionZero) {
    const Flow v4{kClientV4, kVipV4, 40000, kVipPort, kProtoTcp};
    const Bytes inner = make_ip_packet(v4);
    const Bytes expected = ethernet(kLbMac, kNextHopMac, 0x0800, inner);

    Bytes other_port = wrap_gue(inner, kBackendV4[0], 6081);
    expect_decap(other_port, XLB_DECAP_OUT_PASS_NOT_ENCAP, other_port);
    Bytes other_port6 = wrap_gue(inner, kBackendV6[0], 4789);
    expect_decap(other_port6, XLB_DECAP_OUT_PASS_NOT_ENCAP, other_port6);
    Bytes not_ours = wrap_gue(inner, kBackendV4[1]);
    expect_decap(not_ours, XLB_DECAP_OUT_PASS_NOT_ENCAP, not_ours);

    const std::size_t gue = 14 + 20 + 8;
    Bytes control = wrap_gue(inner, kBackendV4[0]);
    control[gue] |= 0x20;  // C: a control message, the kernel's
    expect_decap(control, XLB_DECAP_OUT_PASS_NOT_ENCAP, control);
    Bytes version1 = wrap_gue(inner, kBackendV4[0]);
    version1[gue] |= 0x40;
    expect_decap(version1, XLB_DECAP_OUT_PASS_NOT_ENCAP, version1);
    Bytes udp_payload = wrap_gue(inner, kBackendV4[0]);
    udp_payload[gue + 1] = kProtoUdp;  // GUE carrying something other than IP
    expect_decap(udp_payload, XLB_DECAP_OUT_PASS_NOT_ENCAP, udp_payload);
    // Hlen claims more extension words than the packet has.
    Bytes long_hlen = wrap_gue(inner, kBackendV4[0]);
    long_hlen[gue] = 31;
    expect_decap(long_hlen, XLB_DECAP_OUT_PASS_NOT_ENCAP, long_hlen);
    // Cut inside the GUE header.
    Bytes cut = wrap_gue(inner, kBackendV4[0]);
    cut.resize(gue + 2);
    expect_decap(cut, XLB_DECAP_OUT_PASS_NOT_ENCAP, cut);

    // Another port, set at run time; 0 turns GUE off.
    program_->set_gue_port(7777);
    EXPECT_EQ(program_->gue_port(), 7777);
    expect_decap(wrap_gue(inner, kBackendV4[0], 7777), XLB_DECAP_OUT_DECAPSULATED, expected);
    Bytes default_port = wrap_gue(inner, kBackendV4[0]);
    expect_decap(default_port, XLB_DECAP_OUT_PASS_NOT_ENCAP, default_port);
    program_->set_gue_port(0);
    expect_decap(default_port, XLB_DECAP_OUT_PASS_NOT_ENCAP, default_port);
    program_->set_gue_port(XLB_GUE_PORT_DEFAULT);
    expect_decap(default_port, XLB_DECAP_OUT_DECAPSULATED, expected);
}

TEST_F(DecapTest, EverythingElsePassesUntouched) {
    const Flow v4{kClientV4, kVipV4, 40000, kVipPort, kProtoTcp};
    Bytes inner = make_ip_packet(v4);
    Bytes plain = make_frame(v4);
    expect_decap(plain, XLB_DECAP_OUT_PASS_NOT_ENCAP, plain);
    Bytes plain6 = make_frame(Flow{kClientV6, kVipV6, 1, 2, kProtoUdp});
    expect_decap(plain6, XLB_DECAP_OUT_PASS_NOT_ENCAP, plain6);
    Bytes other_backend = wrap(inner, kBackendV4[1]);
    expect_decap(other_backend, XLB_DECAP_OUT_PASS_NOT_ENCAP, other_backend);
    Bytes other_backend6 = wrap(inner, kBackendV6[1]);
    expect_decap(other_backend6, XLB_DECAP_OUT_PASS_NOT_ENCAP, other_backend6);
    Bytes arp = ethernet(kLbMac, kNextHopMac, 0x0806, Bytes(28, 0));
    expect_decap(arp, XLB_DECAP_OUT_PASS_NOT_ENCAP, arp);

    // an outer header with nothing inside it is left to the kernel
    Bytes empty = wrap(inner, kBackendV4[0]);
    empty.resize(14 + 20 + 10);
    expect_decap(empty, XLB_DECAP_OUT_PASS_MALFORMED, empty);
    // an outer fragment needs reassembly first
    Bytes fragment = wrap(inner, kBackendV4[0]);
    fragment[14 + 6] |= 0x20;
    expect_decap(fragment, XLB_DECAP_OUT_PASS_FRAGMENT, fragment);
}

// What the balancer emits, the decapsulator turns back into the client's packet.
class RoundTripTest : public LbTest {};

TEST_F(RoundTripTest, BalancerOutputDecapsulatesToTheClientsPacket) {
    auto decap = decap_serving({kBackendV4[2], kBackendV6[2]});
    ASSERT_TRUE(decap);
    add_backend(1, kBackendV4[2]);
    add_backend(2, kBackendV6[2]);
    add_vip(kVipV4, kVipPort, kProtoTcp, 1);
    add_vip(kVipV6, kVipPort, kProtoTcp, 2);
    add_vip(kVipV4, kVipPort + 1, kProtoTcp, 3);
    publish_ring(1, std::vector<std::uint32_t>(13, 2));  // IPv4 VIP -> IPv6 backend
    publish_ring(2, std::vector<std::uint32_t>(13, 2));
    publish_ring(3, std::vector<std::uint32_t>(13, 1));  // IPv4 VIP -> IPv4 backend
    for (bool gue : {false, true}) {
        SCOPED_TRACE(gue ? "GUE" : "IP-in-IP");
        xlb_config cfg = default_config();
        if (gue) cfg.flags |= XLB_CFG_F_GUE;
        cfg.gue_port = XLB_GUE_PORT_DEFAULT;
        write_config(cfg);
        for (const Flow& flow : {Flow{kClientV4, kVipV4, 40000, kVipPort, kProtoTcp},
                                 Flow{kClientV6, kVipV6, 40000, kVipPort, kProtoTcp},
                                 Flow{kClientV4, kVipV4, 40000, kVipPort + 1, kProtoTcp}}) {
            Bytes frame = make_frame(flow);
            auto lb_out = run(frame);
            ASSERT_EQ(lb_out.action, XDP_TX);
            EXPECT_EQ(lb_out.frame.size(),
                      frame.size() + (flow.dport == kVipPort ? 40 : 20) + (gue ? 12 : 0));
            auto backend_in = bpf::test_run_xdp(decap->prog_fd(), lb_out.frame);
            ASSERT_TRUE(backend_in);
            EXPECT_EQ(backend_in->action, XDP_PASS);
            Bytes expected = ethernet(kNextHopMac, kLbMac, flow.src.is_v4() ? 0x0800 : 0x86dd,
                                      make_ip_packet(flow));
            expect_same_frame(backend_in->frame, expected);
        }
    }
}

}  // namespace
}  // namespace xlb::test
