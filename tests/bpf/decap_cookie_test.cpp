// SPDX-License-Identifier: Apache-2.0
// Packet tests of xlb_decap's SYN-cookie path: an ACK whose GUE private data
// is a struct xlb_gue_cookie is decapsulated, its 16 bytes left for the
// cookie acceptor under the flow (abi.h, XLB_MAP_COOKIE_ACKS), when an
// acceptor is attached; dropped when none is; anything that only looks like
// cookie data is treated as before.
#include <arpa/inet.h>

#include <array>
#include <cstring>

#include "constants.h"
#include "lb_fixture.h"
#include "packet.h"
#include "xlb/bpf/programs.h"
#include "xlb/bpf/test_run.h"

namespace xlb::test {
namespace {

// The cookie data written out byte by byte (abi.h, struct xlb_gue_cookie),
// not through the struct, so that a layout change shows here.
Bytes cookie_data(std::uint8_t flags, std::uint8_t snd_wscale, std::uint8_t rcv_wscale,
                  std::uint16_t mss, std::uint32_t tsval, std::uint32_t tsecr) {
    return Bytes{0x63,
                 flags,
                 snd_wscale,
                 rcv_wscale,
                 static_cast<std::uint8_t>(mss >> 8),
                 static_cast<std::uint8_t>(mss),
                 0,
                 0,
                 static_cast<std::uint8_t>(tsval >> 24),
                 static_cast<std::uint8_t>(tsval >> 16),
                 static_cast<std::uint8_t>(tsval >> 8),
                 static_cast<std::uint8_t>(tsval),
                 static_cast<std::uint8_t>(tsecr >> 24),
                 static_cast<std::uint8_t>(tsecr >> 16),
                 static_cast<std::uint8_t>(tsecr >> 8),
                 static_cast<std::uint8_t>(tsecr)};
}

class DecapCookieTest : public ::testing::Test {
protected:
    static void SetUpTestSuite() {
        program_ = decap_serving({kBackendV4[0], kBackendV6[0]});
        ASSERT_TRUE(program_);
    }
    static void TearDownTestSuite() { program_.reset(); }
    void SetUp() override {
        ASSERT_TRUE(program_);
        ASSERT_TRUE(program_->cookie_acks().clear());
        ASSERT_TRUE(program_->cookie_pending().put(0, 0));
    }
    void TearDown() override { program_->set_cookie_acceptor(false); }

    static xlb_cookie_ack_key key_of(const Flow& flow) {
        xlb_cookie_ack_key key{};
        flow.src.to_words(key.saddr);
        flow.dst.to_words(key.daddr);
        key.sport = htons(flow.sport);
        key.dport = htons(flow.dport);
        key.family = flow.src.family;
        return key;
    }
    static std::uint64_t pending() {
        auto n = program_->cookie_pending().get(0);
        EXPECT_TRUE(n);
        return n ? *n : 0;
    }

    static Bytes wrap_gue(const Bytes& inner_ip, const IpAddress& to, const Bytes& extension) {
        Encapsulation enc = from_lb(to);
        enc.gue_port = XLB_GUE_PORT_DEFAULT;
        enc.gue_sport = 0xc123;
        enc.gue_extension = extension;
        return encapsulate(inner_ip, enc);
    }
    static Bytes delivered(const Bytes& inner_ip) {
        return ethernet(kLbMac, kNextHopMac, (inner_ip[0] >> 4) == 4 ? 0x0800 : 0x86dd, inner_ip);
    }

    // Runs the program and checks the action, the whole output frame, that
    // `outcome` alone was counted, and what was left for the acceptor:
    // `cookie` under `flow`, or nothing at all.
    void expect_run(const Bytes& input, std::uint32_t action, xlb_decap_outcome outcome,
                    const Bytes& expected, const Flow* flow = nullptr, const Bytes& cookie = {}) {
        const std::uint64_t pending_before = pending();
        expect_decap_run(*program_, input, action, outcome, expected);
        auto keys = program_->cookie_acks().keys();
        ASSERT_TRUE(keys);
        if (flow == nullptr) {
            EXPECT_TRUE(keys->empty()) << "cookie data left for a packet that carried none";
            EXPECT_EQ(pending(), pending_before);
            return;
        }
        EXPECT_EQ(keys->size(), 1u);
        EXPECT_EQ(pending(), pending_before + 1);
        auto left = program_->cookie_acks().get(key_of(*flow));
        ASSERT_TRUE(left);
        ASSERT_TRUE(*left) << "no cookie data under the ACK's flow";
        xlb_gue_cookie want{};
        ASSERT_EQ(cookie.size(), sizeof(want));
        std::memcpy(&want, cookie.data(), sizeof(want));
        const xlb_gue_cookie& got = **left;
        EXPECT_EQ(got.magic, want.magic);
        EXPECT_EQ(got.flags, want.flags);
        EXPECT_EQ(got.snd_wscale, want.snd_wscale);
        EXPECT_EQ(got.rcv_wscale, want.rcv_wscale);
        EXPECT_EQ(ntohs(got.mss), ntohs(want.mss));
        EXPECT_EQ(ntohl(got.tsval), ntohl(want.tsval));
        EXPECT_EQ(ntohl(got.tsecr), ntohl(want.tsecr));
        ASSERT_TRUE(program_->cookie_acks().clear());
    }

    static std::optional<bpf::DecapProgram> program_;
};

std::optional<bpf::DecapProgram> DecapCookieTest::program_;

struct CookieCase {
    const char* name;
    Flow flow;
    IpAddress to;
};

std::vector<CookieCase> cookie_cases() {
    return {{"ipv4-in-ipv4", Flow{kClientV4, kVipV4, 40000, kVipPort, kProtoTcp}, kBackendV4[0]},
            {"ipv4-in-ipv6", Flow{kClientV4, kVipV4, 40001, kVipPort, kProtoTcp}, kBackendV6[0]},
            {"ipv6-in-ipv6", Flow{kClientV6, kVipV6, 40002, kVipPort, kProtoTcp}, kBackendV6[0]}};
}

TEST_F(DecapCookieTest, CookieAckBecomesTheClientsAckWithTheCookieLeftForTheAcceptor) {
    program_->set_cookie_acceptor(true);
    EXPECT_TRUE(program_->cookie_acceptor());
    const Bytes cookie =
        cookie_data(XLB_GUE_COOKIE_F_WSCALE | XLB_GUE_COOKIE_F_SACK | XLB_GUE_COOKIE_F_TSTAMP, 9,
                    XLB_COOKIE_RCV_WSCALE, 1460, 0x01020304, 0xa0b0c0d0);
    for (const CookieCase& c : cookie_cases()) {
        SCOPED_TRACE(c.name);
        FrameOptions opt;
        opt.tcp_flags = kTcpAck;
        opt.payload = {};
        const Bytes ack = make_ip_packet(c.flow, opt);
        expect_run(wrap_gue(ack, c.to, cookie), XDP_PASS, XLB_DECAP_OUT_DECAPSULATED_COOKIE,
                   delivered(ack), &c.flow, cookie);
    }
    // Other options, another MSS: carried as they come.
    const Bytes plain = cookie_data(0, 0, 0, 536, 0, 0);
    const Flow flow = cookie_cases()[0].flow;
    const Bytes ack = make_ip_packet(flow);
    expect_run(wrap_gue(ack, kBackendV4[0], plain), XDP_PASS, XLB_DECAP_OUT_DECAPSULATED_COOKIE,
               delivered(ack), &flow, plain);
    // Cookie data on what is not TCP: nothing to accept, decapsulated as any.
    const Bytes udp = make_ip_packet(Flow{kClientV4, kVipV4, 40000, kVipPort, kProtoUdp});
    expect_run(wrap_gue(udp, kBackendV4[0], plain), XDP_PASS, XLB_DECAP_OUT_DECAPSULATED,
               delivered(udp));
}

TEST_F(DecapCookieTest, WithoutAnAcceptorCookieAcksAreDroppedAndCounted) {
    program_->set_cookie_acceptor(false);
    EXPECT_FALSE(program_->cookie_acceptor());
    const Bytes cookie = cookie_data(XLB_GUE_COOKIE_F_WSCALE, 7, XLB_COOKIE_RCV_WSCALE, 1460, 0, 0);
    for (const CookieCase& c : cookie_cases()) {
        SCOPED_TRACE(c.name);
        const Bytes in = wrap_gue(make_ip_packet(c.flow), c.to, cookie);
        expect_run(in, XDP_DROP, XLB_DECAP_OUT_DROP_COOKIE_NO_ACCEPTOR, in);
    }
    // Not to this backend: not ours to judge, whatever it carries.
    const Bytes other = wrap_gue(make_ip_packet(cookie_cases()[0].flow), kBackendV4[1], cookie);
    expect_run(other, XDP_PASS, XLB_DECAP_OUT_PASS_NOT_ENCAP, other);
}

TEST_F(DecapCookieTest, DataThatIsNotACookieIsDecapsulatedAsBefore) {
    for (bool acceptor : {false, true}) {
        SCOPED_TRACE(acceptor ? "with acceptor" : "without acceptor");
        program_->set_cookie_acceptor(acceptor);
        const Flow flow = cookie_cases()[0].flow;
        const Bytes ack = make_ip_packet(flow);
        const Bytes cookie = cookie_data(XLB_GUE_COOKIE_F_SACK, 0, 0, 1460, 0, 0);

        // 16 bytes with another magic: unknown private data, skipped.
        Bytes wrong_magic = cookie;
        wrong_magic[0] = 0x64;
        expect_run(wrap_gue(ack, kBackendV4[0], wrong_magic), XDP_PASS, XLB_DECAP_OUT_DECAPSULATED,
                   delivered(ack));
        // The magic, but 8 bytes of data (Hlen 2): not a cookie.
        const Bytes short_data(cookie.begin(), cookie.begin() + 8);
        expect_run(wrap_gue(ack, kBackendV4[0], short_data), XDP_PASS, XLB_DECAP_OUT_DECAPSULATED,
                   delivered(ack));
        // The magic and 20 bytes (Hlen 5): not a cookie either.
        Bytes long_data = cookie;
        long_data.resize(20, 0);
        expect_run(wrap_gue(ack, kBackendV4[0], long_data), XDP_PASS, XLB_DECAP_OUT_DECAPSULATED,
                   delivered(ack));
        // Cut inside the cookie data: left to the kernel untouched.
        Bytes cut = wrap_gue(ack, kBackendV4[0], cookie);
        cut.resize(14 + 20 + 8 + 4 + 10);
        expect_run(cut, XDP_PASS, XLB_DECAP_OUT_PASS_NOT_ENCAP, cut);
        // A second-chance hint is still a hint: passed (state 2) means delivered.
        expect_run(wrap_gue(ack, kBackendV4[0], second_chance_hint(kBackendV4[1], 2)), XDP_PASS,
                   XLB_DECAP_OUT_DECAPSULATED, delivered(ack));
        // Plain IP-in-IP and GUE without data are untouched by the flag.
        expect_run(encapsulate(ack, from_lb(kBackendV4[0])), XDP_PASS, XLB_DECAP_OUT_DECAPSULATED,
                   delivered(ack));
        expect_run(wrap_gue(ack, kBackendV4[0], {}), XDP_PASS, XLB_DECAP_OUT_DECAPSULATED,
                   delivered(ack));
    }
}

// The acceptor's side without sockets: it takes the data xlb_decap left (and
// only while some is pending), counts what it found, and passes the packet
// on when no socket listens. The sockets' side: tests/backend.
TEST_F(DecapCookieTest, AcceptorTakesTheDataLeftForItsFlow) {
    auto supported = bpf::CookieProgram::kernel_supports();
    ASSERT_TRUE(supported) << supported.error().message();
    if (!*supported) GTEST_SKIP() << "no bpf_sk_assign_tcp_reqsk in this kernel";
    auto acceptor = bpf::CookieProgram::load(*program_);
    ASSERT_TRUE(acceptor) << acceptor.error().message();
    auto count = [&](std::uint32_t o) {
        auto per_cpu = acceptor->outcomes().get_per_cpu(o);
        EXPECT_TRUE(per_cpu);
        return per_cpu ? bpf::sum_per_cpu(*per_cpu, [](std::uint64_t v) { return v; }) : 0;
    };
    program_->set_cookie_acceptor(true);
    const Bytes cookie = cookie_data(XLB_GUE_COOKIE_F_SACK, 0, 0, 1460, 0, 0);
    for (const CookieCase& c : cookie_cases()) {
        SCOPED_TRACE(c.name);
        const Bytes ack = make_ip_packet(c.flow);
        auto decapsulated = bpf::test_run_xdp(program_->prog_fd(), wrap_gue(ack, c.to, cookie));
        ASSERT_TRUE(decapsulated) << decapsulated.error().message();
        ASSERT_EQ(pending(), 1u);
        const std::uint64_t no_listener = count(XLB_COOKIE_OUT_PASS_NO_LISTENER);
        auto out = bpf::test_run_tc(acceptor->prog_fd(), decapsulated->frame);
        ASSERT_TRUE(out) << out.error().message();
        EXPECT_EQ(out->action, 0u);  // TC_ACT_OK
        expect_same_frame(out->frame, delivered(ack));
        EXPECT_EQ(count(XLB_COOKIE_OUT_PASS_NO_LISTENER), no_listener + 1);
        EXPECT_EQ(pending(), 0u);
        auto keys = program_->cookie_acks().keys();
        ASSERT_TRUE(keys);
        EXPECT_TRUE(keys->empty()) << "the acceptor left the data it took";
        // The same ACK again (a retransmission the LB did not mark): no data
        // is pending, nothing is counted.
        auto again = bpf::test_run_tc(acceptor->prog_fd(), decapsulated->frame);
        ASSERT_TRUE(again);
        EXPECT_EQ(again->action, 0u);
        EXPECT_EQ(count(XLB_COOKIE_OUT_PASS_NO_LISTENER), no_listener + 1);
    }
    // Data pending for another flow: this packet passes uncounted, the data stays.
    const Flow other{kClientV4, kVipV4, 41000, kVipPort, kProtoTcp};
    ASSERT_TRUE(bpf::test_run_xdp(program_->prog_fd(),
                                  wrap_gue(make_ip_packet(other), kBackendV4[0], cookie)));
    std::uint64_t total = 0;
    for (std::uint32_t o = 0; o < XLB_COOKIE_OUT__MAX; ++o) total += count(o);
    const Bytes ack = delivered(make_ip_packet(cookie_cases()[0].flow));
    auto out = bpf::test_run_tc(acceptor->prog_fd(), ack);
    ASSERT_TRUE(out);
    EXPECT_EQ(out->action, 0u);
    std::uint64_t total_after = 0;
    for (std::uint32_t o = 0; o < XLB_COOKIE_OUT__MAX; ++o) total_after += count(o);
    EXPECT_EQ(total_after, total);
    EXPECT_EQ(pending(), 1u);
    // The data of a SYN (not an ACK) is taken and the packet left to the kernel.
    FrameOptions syn;
    syn.tcp_flags = kTcpSyn;
    auto syn_out = bpf::test_run_tc(acceptor->prog_fd(), delivered(make_ip_packet(other, syn)));
    ASSERT_TRUE(syn_out);
    EXPECT_EQ(syn_out->action, 0u);
    EXPECT_EQ(count(XLB_COOKIE_OUT_PASS_NOT_ACK), 1u);
    EXPECT_EQ(pending(), 0u);
}

}  // namespace
}  // namespace xlb::test
