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

using DecapOutcomes = std::array<std::uint64_t, XLB_DECAP_OUT__MAX>;

class DecapTest : public ::testing::Test {
protected:
    static void SetUpTestSuite() {
        auto loaded = bpf::DecapProgram::load();
        ASSERT_TRUE(loaded) << loaded.error().message();
        program_.emplace(std::move(*loaded));
        for (const net::IpAddress& a : {kBackendV4[0], kBackendV6[0]}) {
            xlb_decap_addr key{};
            a.to_words(key.addr);
            key.family = a.family;
            ASSERT_TRUE(program_->local_addresses().put(key, 1));
        }
    }
    static void TearDownTestSuite() { program_.reset(); }

    DecapOutcomes counts() {
        DecapOutcomes out{};
        for (std::uint32_t o = 0; o < XLB_DECAP_OUT__MAX; ++o) {
            auto per_cpu = program_->outcomes().get_per_cpu(o);
            EXPECT_TRUE(per_cpu);
            if (per_cpu) out[o] = bpf::sum_per_cpu(*per_cpu, [](std::uint64_t v) { return v; });
        }
        return out;
    }

    void expect_decap(const Bytes& input, xlb_decap_outcome outcome, const Bytes& expected) {
        DecapOutcomes before = counts();
        auto out = bpf::test_run_xdp(program_->prog_fd(), input);
        ASSERT_TRUE(out) << out.error().message();
        EXPECT_EQ(out->action, XDP_PASS);
        expect_same_frame(out->frame, expected);
        DecapOutcomes after = counts();
        for (std::uint32_t o = 0; o < XLB_DECAP_OUT__MAX; ++o)
            EXPECT_EQ(after[o] - before[o], o == static_cast<std::uint32_t>(outcome) ? 1u : 0u)
                << "decap outcome " << o;
    }

    static Bytes wrap(const Bytes& inner_ip, const net::IpAddress& to) {
        Encapsulation enc;
        enc.outer_src = to.is_v4() ? kEncapSrcV4 : kEncapSrcV6;
        enc.outer_dst = to;
        enc.eth_src = kNextHopMac;
        enc.eth_dst = kLbMac;
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
    }
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
    auto decap = bpf::DecapProgram::load();
    ASSERT_TRUE(decap) << decap.error().message();
    add_backend(1, kBackendV4[2]);
    add_backend(2, kBackendV6[2]);
    for (const net::IpAddress& a : {kBackendV4[2], kBackendV6[2]}) {
        xlb_decap_addr key{};
        a.to_words(key.addr);
        key.family = a.family;
        ASSERT_TRUE(decap->local_addresses().put(key, 1));
    }
    add_vip(kVipV4, kVipPort, kProtoTcp, 1);
    add_vip(kVipV6, kVipPort, kProtoTcp, 2);
    publish_ring(1, std::vector<std::uint32_t>(13, 2));  // IPv4 VIP -> IPv6 backend
    publish_ring(2, std::vector<std::uint32_t>(13, 2));
    for (const Flow& flow : {Flow{kClientV4, kVipV4, 40000, kVipPort, kProtoTcp},
                             Flow{kClientV6, kVipV6, 40000, kVipPort, kProtoTcp}}) {
        Bytes frame = make_frame(flow);
        auto lb_out = run(frame);
        ASSERT_EQ(lb_out.action, XDP_TX);
        auto backend_in = bpf::test_run_xdp(decap->prog_fd(), lb_out.frame);
        ASSERT_TRUE(backend_in);
        EXPECT_EQ(backend_in->action, XDP_PASS);
        Bytes expected =
            ethernet(kNextHopMac, kLbMac, flow.src.is_v4() ? 0x0800 : 0x86dd, make_ip_packet(flow));
        expect_same_frame(backend_in->frame, expected);
    }
}

}  // namespace
}  // namespace xlb::test
