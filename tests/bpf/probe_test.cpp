// SPDX-License-Identifier: Apache-2.0
// Tests of bpf/xlb_probe.bpf.c, the tc egress encapsulator of health probes
// sent through the data path: packet tests through BPF_PROG_TEST_RUN, then a
// two-namespace topology with real TCP connects (needs root).
#include "xlb/bpf/probe.h"

#include <arpa/inet.h>
#include <linux/pkt_cls.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <optional>

#include "constants.h"
#include "lb_fixture.h"
#include "netns.h"
#include "packet.h"
#include "xlb/bpf/fd.h"
#include "xlb/bpf/programs.h"
#include "xlb/bpf/test_run.h"
#include "xlb/bpf/xdp.h"
#include "xlb/datapath/setup.h"
#include "xlb/flow_hash.h"

namespace xlb::test {
namespace {

using namespace std::chrono_literals;
using ProbeOutcomes = std::array<std::uint64_t, XLB_PROBE_OUT__MAX>;

// ---- the mark -----------------------------------------------------------------------

TEST(ProbeMark, CarriesTheBackendIdUnderTheTag) {
    EXPECT_EQ(bpf::probe_mark(0), XLB_PROBE_MARK_BASE);
    EXPECT_EQ(bpf::probe_mark(7), XLB_PROBE_MARK_BASE | 7u);
    EXPECT_EQ(bpf::probe_mark(XLB_PROBE_MARK_ID_MASK),
              XLB_PROBE_MARK_BASE | XLB_PROBE_MARK_ID_MASK);
    EXPECT_EQ(bpf::probe_mark(XLB_PROBE_MARK_ID_MASK + 1), std::nullopt);
    EXPECT_EQ(bpf::probe_backend_of(XLB_PROBE_MARK_BASE | 42u), 42u);
    EXPECT_EQ(bpf::probe_backend_of(0), std::nullopt);
    EXPECT_EQ(bpf::probe_backend_of(0x12000005u), std::nullopt);
}

// ---- packets through BPF_PROG_TEST_RUN --------------------------------------------------

// The prober on the LB host; its frames leave from the LB's MAC towards the
// router's (the kernel's neighbour for the VIP route).
const net::IpAddress kProberV4 = ip("192.0.2.50");
const net::IpAddress kProberV6 = ip("2001:db8:c::50");

class ProbeEncapTest : public LbTest {
protected:
    static void SetUpTestSuite() {
        LbTest::SetUpTestSuite();
        auto loaded = bpf::ProbeEncapProgram::load(lb());
        ASSERT_TRUE(loaded) << loaded.error().message();
        probe_.emplace(std::move(*loaded));
    }
    static void TearDownTestSuite() { probe_.reset(); }

    void SetUp() override {
        LbTest::SetUp();
        ASSERT_TRUE(probe_) << "the probe program did not load";
        for (std::uint32_t o = 0; o < XLB_PROBE_OUT__MAX; ++o)
            ASSERT_TRUE(probe_->outcomes().zero(o));
    }

    ProbeOutcomes probe_outcomes() {
        ProbeOutcomes out{};
        for (std::uint32_t o = 0; o < XLB_PROBE_OUT__MAX; ++o) {
            auto per_cpu = probe_->outcomes().get_per_cpu(o);
            EXPECT_TRUE(per_cpu);
            if (per_cpu) out[o] = datapath::sum_per_cpu(*per_cpu);
        }
        return out;
    }

    static FrameOptions syn(std::uint8_t tos = 0) {
        FrameOptions opt;
        opt.eth_src = kLbMac;
        opt.eth_dst = kClientSideMac;
        opt.tcp_flags = kTcpSyn;
        opt.payload = {};
        opt.tos = tos;
        return opt;
    }

    // Runs the frame with the mark; checks the action, that exactly `outcome`
    // was counted once, and the output frame.
    void expect_probe(const Bytes& input, std::uint32_t mark, int action, xlb_probe_outcome outcome,
                      const Bytes& expected) {
        ProbeOutcomes before = probe_outcomes();
        auto out = bpf::test_run_tc(probe_->prog_fd(), input, mark);
        ASSERT_TRUE(out) << out.error().message();
        EXPECT_EQ(out->action, static_cast<std::uint32_t>(action));
        if (action == TC_ACT_OK) {
            expect_same_frame(out->frame, expected);
            EXPECT_EQ(checksum_errors(out->frame), "") << describe(out->frame);
        }
        ProbeOutcomes after = probe_outcomes();
        for (std::uint32_t o = 0; o < XLB_PROBE_OUT__MAX; ++o)
            EXPECT_EQ(after[o] - before[o], o == static_cast<std::uint32_t>(outcome) ? 1u : 0u)
                << "probe outcome " << o;
    }

    // The frame xlb_probe must emit, written from the contract: the
    // balancer's outer header rules, our MAC kept as source.
    Bytes expected_probe_encap(const Bytes& input, const Flow& flow, const net::IpAddress& backend,
                               std::uint8_t tos, bool df) const {
        const xlb_flow_key key = flow_key(flow);
        const std::uint32_t hash = xlb_flow_hash(&key, config_.hash_seed);
        Encapsulation enc;
        enc.outer_dst = backend;
        enc.eth_dst = kNextHopMac;
        enc.eth_src = kLbMac;
        enc.tos = tos;
        enc.df = df;
        enc.flow_label = hash & 0xfffff;
        if (backend.is_v4()) {
            const std::uint32_t host_bits =
                32 - std::min<std::uint32_t>(config_.src_v4_prefix_len, 32);
            std::uint32_t src = ntohl(config_.src_v4);
            if (host_bits > 0) {
                const std::uint32_t mask = host_bits == 32 ? 0xffffffffU : (1U << host_bits) - 1;
                src = (src & ~mask) | (hash & mask);
            }
            const std::uint32_t be_src = htonl(src);
            enc.outer_src = net::IpAddress::from_words(&be_src, XLB_FAMILY_V4);
        } else {
            enc.outer_src = net::IpAddress::from_words(config_.src_v6, XLB_FAMILY_V6);
        }
        if (config_.flags & XLB_CFG_F_GUE) {
            enc.gue_port = config_.gue_port;
            enc.gue_sport = static_cast<std::uint16_t>(XLB_GUE_SPORT(hash));
        }
        return encapsulate(ip_packet_of(input), enc);
    }

    static std::optional<bpf::ProbeEncapProgram> probe_;
};

std::optional<bpf::ProbeEncapProgram> ProbeEncapTest::probe_;

TEST_F(ProbeEncapTest, MarkedSynToAVipLeavesEncapsulatedToItsBackend) {
    add_backend(5, kBackendV4[0]);
    add_backend(6, kBackendV4[1]);
    const Flow flow{kProberV4, kVipV4, 41000, kVipPort, kProtoTcp};
    const Bytes input = make_frame(flow, syn(0x28));
    ASSERT_EQ(checksum_errors(input), "");
    expect_probe(input, *bpf::probe_mark(5), TC_ACT_OK, XLB_PROBE_OUT_ENCAPSULATED,
                 expected_probe_encap(input, flow, kBackendV4[0], 0x28, true));
    // the mark, not the packet, chooses the backend
    expect_probe(input, *bpf::probe_mark(6), TC_ACT_OK, XLB_PROBE_OUT_ENCAPSULATED,
                 expected_probe_encap(input, flow, kBackendV4[1], 0x28, true));
}

TEST_F(ProbeEncapTest, OuterHeaderFollowsTheInnerPacketAndTheConfiguration) {
    add_backend(5, kBackendV4[0]);
    // DF clear stays clear; a UDP probe; outer source derived from the flow hash
    xlb_config cfg = default_config();
    cfg.src_v4_prefix_len = 24;
    write_config(cfg);
    const Flow flow{kProberV4, kVipV4, 41001, 53, kProtoUdp};
    FrameOptions opt = syn();
    opt.ipv4_frag = 0;
    const Bytes input = make_frame(flow, opt);
    expect_probe(input, *bpf::probe_mark(5), TC_ACT_OK, XLB_PROBE_OUT_ENCAPSULATED,
                 expected_probe_encap(input, flow, kBackendV4[0], 0, false));
}

TEST_F(ProbeEncapTest, Ipv6BackendsGetIpv6OuterHeaders) {
    add_backend(9, kBackendV6[0]);
    const Flow v6{kProberV6, kVipV6, 41002, kVipPort, kProtoTcp};
    const Bytes in6 = make_frame(v6, syn(0xb8));
    expect_probe(in6, *bpf::probe_mark(9), TC_ACT_OK, XLB_PROBE_OUT_ENCAPSULATED,
                 expected_probe_encap(in6, v6, kBackendV6[0], 0xb8, false));
    // an IPv4 VIP served by an IPv6 backend: IPv4-in-IPv6
    const Flow v4{kProberV4, kVipV4, 41003, kVipPort, kProtoTcp};
    const Bytes in4 = make_frame(v4, syn());
    expect_probe(in4, *bpf::probe_mark(9), TC_ACT_OK, XLB_PROBE_OUT_ENCAPSULATED,
                 expected_probe_encap(in4, v4, kBackendV6[0], 0, false));
}

// A probe through the data path is encapsulated the way client traffic is:
// with GUE on, in UDP and GUE, and the backend's decapsulator takes it.
TEST_F(ProbeEncapTest, WithGueProbesAreEncapsulatedInGueAndDecapsulate) {
    xlb_config cfg = default_config();
    cfg.flags |= XLB_CFG_F_GUE;
    cfg.gue_port = 6090;
    write_config(cfg);
    auto decap = decap_serving({kBackendV4[2], kBackendV6[2]});
    ASSERT_TRUE(decap);
    decap->set_gue_port(6090);
    add_backend(5, kBackendV4[2]);
    add_backend(9, kBackendV6[2]);
    const Flow v4{kProberV4, kVipV4, 41010, kVipPort, kProtoTcp};
    const Flow v6{kProberV6, kVipV6, 41011, kVipPort, kProtoTcp};
    struct Case {
        const char* name;
        Flow flow;
        std::uint32_t backend_id;
        net::IpAddress backend;
        std::size_t outer_ip;
    };
    for (const Case& c : {Case{"ipv4-in-ipv4", v4, 5, kBackendV4[2], 20},
                          Case{"ipv4-in-ipv6", v4, 9, kBackendV6[2], 40},
                          Case{"ipv6-in-ipv6", v6, 9, kBackendV6[2], 40}}) {
        SCOPED_TRACE(c.name);
        const Bytes input = make_frame(c.flow, syn());
        const Bytes expected = expected_probe_encap(input, c.flow, c.backend, 0, true);
        ASSERT_GT(expected.size(), 14 + c.outer_ip + 4);
        EXPECT_EQ(expected[14 + c.outer_ip + 2] << 8 | expected[14 + c.outer_ip + 3], 6090)
            << "test bug: the expected frame is not GUE";
        expect_probe(input, *bpf::probe_mark(c.backend_id), TC_ACT_OK, XLB_PROBE_OUT_ENCAPSULATED,
                     expected);
        auto probe_out = bpf::test_run_tc(probe_->prog_fd(), input, *bpf::probe_mark(c.backend_id));
        ASSERT_TRUE(probe_out) << probe_out.error().message();
        auto backend_in = bpf::test_run_xdp(decap->prog_fd(), probe_out->frame);
        ASSERT_TRUE(backend_in) << backend_in.error().message();
        EXPECT_EQ(backend_in->action, XDP_PASS);
        expect_same_frame(backend_in->frame,
                          ethernet(kNextHopMac, kLbMac, c.flow.src.is_v4() ? 0x0800 : 0x86dd,
                                   make_ip_packet(c.flow, syn())));
    }
}

TEST_F(ProbeEncapTest, UnmarkedPacketsPassUntouched) {
    add_backend(5, kBackendV4[0]);
    const Bytes to_vip = make_frame(Flow{kProberV4, kVipV4, 41004, kVipPort, kProtoTcp}, syn());
    const Bytes v6 = make_frame(Flow{kProberV6, kVipV6, 41005, kVipPort, kProtoUdp}, syn());
    const Bytes arp = ethernet(kClientSideMac, kLbMac, 0x0806, Bytes(28, 0));
    for (const Bytes* frame : {&to_vip, &v6, &arp}) {
        expect_probe(*frame, 0, TC_ACT_OK, XLB_PROBE_OUT_PASS_UNMARKED, *frame);
        // another user's mark that happens to carry a backend id in its low bits
        expect_probe(*frame, 0x12000005u, TC_ACT_OK, XLB_PROBE_OUT_PASS_UNMARKED, *frame);
    }
}

TEST_F(ProbeEncapTest, MarkedPacketsThatCannotReachTheirBackendAreDropped) {
    add_backend(5, kBackendV4[0]);
    add_backend(6, kBackendV4[1], 3);
    ASSERT_TRUE(lb().backends().put(6, xlb_backend{}));  // removed: generation 0
    const Flow flow{kProberV4, kVipV4, 41006, kVipPort, kProtoTcp};
    const Bytes input = make_frame(flow, syn());
    const Bytes none;
    expect_probe(input, *bpf::probe_mark(6), TC_ACT_SHOT, XLB_PROBE_OUT_DROP_NO_BACKEND, none);
    expect_probe(input, *bpf::probe_mark(7), TC_ACT_SHOT, XLB_PROBE_OUT_DROP_NO_BACKEND, none);
    // beyond the backends map
    expect_probe(input, *bpf::probe_mark(kSizes.max_backends), TC_ACT_SHOT,
                 XLB_PROBE_OUT_DROP_NO_BACKEND, none);
    // IPv6 probe, IPv4 backend
    const Bytes v6 = make_frame(Flow{kProberV6, kVipV6, 41007, kVipPort, kProtoTcp}, syn());
    expect_probe(v6, *bpf::probe_mark(5), TC_ACT_SHOT, XLB_PROBE_OUT_DROP_FAMILY, none);
    // not IP at all, or truncated
    const Bytes arp = ethernet(kClientSideMac, kLbMac, 0x0806, Bytes(28, 0));
    expect_probe(arp, *bpf::probe_mark(5), TC_ACT_SHOT, XLB_PROBE_OUT_DROP_MALFORMED, none);
    Bytes truncated = input;
    truncated.resize(14 + 20 + 10);
    expect_probe(truncated, *bpf::probe_mark(5), TC_ACT_SHOT, XLB_PROBE_OUT_DROP_MALFORMED, none);
    // too big for the link once encapsulated
    xlb_config small = default_config();
    small.mtu = static_cast<std::uint16_t>(ip_packet_of(input).size() + 19);
    write_config(small);
    expect_probe(input, *bpf::probe_mark(5), TC_ACT_SHOT, XLB_PROBE_OUT_DROP_TOO_BIG, none);
    // the agent has not configured the balancer yet
    write_config(xlb_config{});
    expect_probe(input, *bpf::probe_mark(5), TC_ACT_SHOT, XLB_PROBE_OUT_DROP_NO_CONFIG, none);
}

// What xlb_probe emits, the backend's decapsulator turns back into the probe.
TEST_F(ProbeEncapTest, ProbeOutputDecapsulatesToTheProbe) {
    auto decap = decap_serving({kBackendV4[2], kBackendV6[2]});
    ASSERT_TRUE(decap);
    add_backend(5, kBackendV4[2]);
    add_backend(6, kBackendV6[2]);
    const Flow flow{kProberV4, kVipV4, 41008, kVipPort, kProtoTcp};
    const Bytes input = make_frame(flow, syn());
    for (std::uint32_t id : {5u, 6u}) {
        auto probe_out = bpf::test_run_tc(probe_->prog_fd(), input, *bpf::probe_mark(id));
        ASSERT_TRUE(probe_out) << probe_out.error().message();
        ASSERT_EQ(probe_out->action, static_cast<std::uint32_t>(TC_ACT_OK));
        auto backend_in = bpf::test_run_xdp(decap->prog_fd(), probe_out->frame);
        ASSERT_TRUE(backend_in) << backend_in.error().message();
        EXPECT_EQ(backend_in->action, XDP_PASS);
        expect_same_frame(backend_in->frame,
                          ethernet(kNextHopMac, kLbMac, 0x0800, make_ip_packet(flow, syn())));
    }
}

// ---- a real probe through two network namespaces -------------------------------------------
//
//   lb namespace  xp0 192.0.2.1/24 --- veth --- xp1 192.0.2.2/24  backend namespace
//   xlb_probe at tc egress                       xlb_decap (XDP), VIP 198.51.100.10 on lo,
//   route VIP via 192.0.2.2                      TCP listener on *:8080

constexpr const char* kLbAddr = "192.0.2.1";
constexpr const char* kBackendAddr = "192.0.2.2";
constexpr const char* kVipAddr = "198.51.100.10";
constexpr std::uint16_t kProbePort = 8080;
constexpr const char* kBackendMac = "02:00:00:00:00:2e";
constexpr std::uint32_t kBackendId = 3;
constexpr const char* kLbAddr6 = "2001:db8:2::1";
constexpr const char* kBackendAddr6 = "2001:db8:2::2";
constexpr const char* kVipAddr6 = "2001:db8:f::10";
constexpr std::uint32_t kBackendId6 = 4;

// Owns a T that must be created and destroyed inside namespace ns (an
// attachment: interface indexes belong to a namespace).
template <typename T>
class OwnedInNetns {
public:
    explicit OwnedInNetns(std::string ns) : ns_(std::move(ns)) {}
    ~OwnedInNetns() { reset(); }
    template <typename F>
    void emplace(F&& make) {
        NetnsScope scope(ns_);
        value_.emplace(make());
    }
    T& operator*() { return *value_; }
    const std::string& ns() const { return ns_; }
    void reset() {
        if (!value_) return;
        try {
            NetnsScope scope(ns_);
            value_.reset();
        } catch (const std::exception& e) {
            ADD_FAILURE() << "cannot enter " << ns_ << " to clean up: " << e.what();
        }
    }

private:
    std::string ns_;
    std::optional<T> value_;
};

// 0 when a TCP connect from namespace ns to addr:port succeeds within the
// timeout, else the errno (ETIMEDOUT when nothing answered).
int tcp_connect(const std::string& ns, const char* addr, std::uint16_t port,
                std::optional<std::uint32_t> mark, std::chrono::milliseconds timeout) {
    return in_netns(ns, [&]() -> int {
        const bool v6 = std::strchr(addr, ':') != nullptr;
        bpf::UniqueFd fd(
            ::socket(v6 ? AF_INET6 : AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
        if (!fd) return errno;
        if (mark && ::setsockopt(fd.get(), SOL_SOCKET, SO_MARK, &*mark, sizeof(*mark)) != 0)
            return errno;
        sockaddr_storage ss{};
        socklen_t ss_len;
        if (v6) {
            auto* sa = reinterpret_cast<sockaddr_in6*>(&ss);
            sa->sin6_family = AF_INET6;
            sa->sin6_port = htons(port);
            if (::inet_pton(AF_INET6, addr, &sa->sin6_addr) != 1) return EINVAL;
            ss_len = sizeof(*sa);
        } else {
            auto* sa = reinterpret_cast<sockaddr_in*>(&ss);
            sa->sin_family = AF_INET;
            sa->sin_port = htons(port);
            if (::inet_pton(AF_INET, addr, &sa->sin_addr) != 1) return EINVAL;
            ss_len = sizeof(*sa);
        }
        if (::connect(fd.get(), reinterpret_cast<sockaddr*>(&ss), ss_len) == 0) return 0;
        if (errno != EINPROGRESS) return errno;
        pollfd p{fd.get(), POLLOUT, 0};
        const int n = ::poll(&p, 1, static_cast<int>(timeout.count()));
        if (n == 0) return ETIMEDOUT;
        if (n < 0) return errno;
        int err = 0;
        socklen_t len = sizeof(err);
        ::getsockopt(fd.get(), SOL_SOCKET, SO_ERROR, &err, &len);
        return err;
    });
}

std::string errno_text(int e) { return e == 0 ? "connected" : std::strerror(e); }

TEST(ProbeNetnsTest, ProbeThroughTheVipNeedsTheBackendsDecapsulation) {
    const std::string prefix = unique_netns_prefix("xlbp");
    Netns lb_ns(prefix + "-lb");
    Netns be_ns(prefix + "-be");
    run_command_ok("ip link add xp0 netns " + lb_ns.name() + " type veth peer name xp1 netns " +
                   be_ns.name());
    lb_ns.ip("addr add " + std::string(kLbAddr) + "/24 dev xp0");
    lb_ns.ip("link set xp0 up");
    be_ns.ip("link set xp1 address " + std::string(kBackendMac));
    be_ns.ip("addr add " + std::string(kBackendAddr) + "/24 dev xp1");
    be_ns.ip("link set xp1 up");
    be_ns.ip("addr add " + std::string(kVipAddr) + "/32 dev lo");
    lb_ns.ip("route add " + std::string(kVipAddr) + "/32 via " + kBackendAddr);
    lb_ns.ip("addr add " + std::string(kLbAddr6) + "/64 dev xp0 nodad");
    be_ns.ip("addr add " + std::string(kBackendAddr6) + "/64 dev xp1 nodad");
    be_ns.ip("addr add " + std::string(kVipAddr6) + "/128 dev lo");
    lb_ns.ip("route add " + std::string(kVipAddr6) + "/128 via " + kBackendAddr6);

    // The balancer's maps (no XDP program is needed on the LB side: only the
    // probe path is under test) and the probe program sharing them.
    auto lb = bpf::LbProgram::load();
    ASSERT_TRUE(lb) << lb.error().message();
    config::Settings settings = bench_settings();
    settings.encap_source.ipv4 = ip(kLbAddr);
    settings.encap_source.ipv6 = ip(kLbAddr6);
    auto mac = net::parse_mac(kBackendMac);
    ASSERT_TRUE(mac);
    ASSERT_TRUE(lb->config().put(0, datapath::make_config(settings, *mac)));
    ASSERT_TRUE(lb->backends().put(kBackendId, datapath::backend_entry(ip(kBackendAddr), 1)));
    ASSERT_TRUE(lb->backends().put(kBackendId6, datapath::backend_entry(ip(kBackendAddr6), 1)));
    auto probe = bpf::ProbeEncapProgram::load(*lb);
    ASSERT_TRUE(probe) << probe.error().message();

    auto decap = decap_serving({ip(kBackendAddr), ip(kBackendAddr6)});
    ASSERT_TRUE(decap);

    OwnedInNetns<bpf::TcAttachment> tc(lb_ns.name());
    tc.emplace([&] {
        auto iface = bpf::Interface::by_name("xp0");
        if (!iface) throw std::runtime_error(iface.error().message());
        auto attached = bpf::TcAttachment::attach(*probe, *iface, {.remove_created_qdisc = true});
        if (!attached) throw std::runtime_error(attached.error().message());
        return std::move(*attached);
    });
    OwnedInNetns<bpf::XdpAttachment> xdp(be_ns.name());
    xdp.emplace([&] {
        auto iface = bpf::Interface::by_name("xp1");
        if (!iface) throw std::runtime_error(iface.error().message());
        auto attached = bpf::XdpAttachment::attach(*decap, *iface);
        if (!attached) throw std::runtime_error(attached.error().message());
        return std::move(*attached);
    });

    // The backend's server: every address of both families, port 8080 (the
    // kernel completes handshakes into the backlog without accept()).
    bpf::UniqueFd listener = in_netns(be_ns.name(), [] {
        bpf::UniqueFd fd(::socket(AF_INET6, SOCK_STREAM | SOCK_CLOEXEC, 0));
        if (!fd) throw std::runtime_error("socket: " + std::string(std::strerror(errno)));
        const int off = 0;
        ::setsockopt(fd.get(), IPPROTO_IPV6, IPV6_V6ONLY, &off, sizeof(off));
        sockaddr_in6 sa{};
        sa.sin6_family = AF_INET6;
        sa.sin6_port = htons(kProbePort);
        if (::bind(fd.get(), reinterpret_cast<sockaddr*>(&sa), sizeof(sa)) != 0 ||
            ::listen(fd.get(), 64) != 0)
            throw std::runtime_error("listen on *:8080: " + std::string(std::strerror(errno)));
        return fd;
    });

    const auto mark = bpf::probe_mark(kBackendId);
    const auto encapsulated = [&] {
        auto per_cpu = probe->outcomes().get_per_cpu(XLB_PROBE_OUT_ENCAPSULATED);
        return per_cpu ? datapath::sum_per_cpu(*per_cpu) : std::uint64_t{0};
    };

    // 1. healthy backend: the marked probe to the VIP connects, encapsulated
    int rc = tcp_connect(lb_ns.name(), kVipAddr, kProbePort, mark, 3s);
    EXPECT_EQ(rc, 0) << "probe through the VIP: " << errno_text(rc);
    EXPECT_GE(encapsulated(), 1u) << "the probe's packets did not go through xlb_probe";
    const auto before6 = encapsulated();
    rc = tcp_connect(lb_ns.name(), kVipAddr6, kProbePort, bpf::probe_mark(kBackendId6), 3s);
    EXPECT_EQ(rc, 0) << "IPv6 probe through the VIP: " << errno_text(rc);
    EXPECT_GT(encapsulated(), before6) << "the IPv6 probe did not go through xlb_probe";
    // an IPv4 VIP through an IPv6 backend: IPv4-in-IPv6
    rc = tcp_connect(lb_ns.name(), kVipAddr, kProbePort, bpf::probe_mark(kBackendId6), 3s);
    EXPECT_EQ(rc, 0) << "IPv4 probe through an IPv6 backend: " << errno_text(rc);

    // 2. a mark naming no backend never reaches anyone
    rc = tcp_connect(lb_ns.name(), kVipAddr, kProbePort, bpf::probe_mark(kBackendId + 10), 1s);
    EXPECT_NE(rc, 0) << "a probe of an unknown backend connected";

    // 3. the backend loses its decapsulation: the probe through the VIP fails,
    //    while a probe of its own address still passes
    xdp.reset();
    rc = tcp_connect(lb_ns.name(), kVipAddr, kProbePort, mark, 1500ms);
    EXPECT_NE(rc, 0) << "probe through the VIP connected without decapsulation";
    rc = tcp_connect(lb_ns.name(), kBackendAddr, kProbePort, std::nullopt, 3s);
    EXPECT_EQ(rc, 0) << "direct probe of the backend: " << errno_text(rc);
    rc = tcp_connect(lb_ns.name(), kVipAddr6, kProbePort, bpf::probe_mark(kBackendId6), 1500ms);
    EXPECT_NE(rc, 0) << "IPv6 probe through the VIP connected without decapsulation";
    rc = tcp_connect(lb_ns.name(), kBackendAddr6, kProbePort, std::nullopt, 3s);
    EXPECT_EQ(rc, 0) << "direct IPv6 probe of the backend: " << errno_text(rc);

    // 4. the attachment is what tc reports, and leaves nothing behind
    const auto attached_id = [&]() -> std::uint32_t {
        return in_netns(lb_ns.name(), [] {
            auto iface = bpf::Interface::by_name("xp0");
            if (!iface) throw std::runtime_error(iface.error().message());
            auto id = bpf::query_tc(*iface);
            if (!id) throw std::runtime_error(id.error().message());
            return *id;
        });
    };
    EXPECT_TRUE((*tc).created_qdisc());
    EXPECT_NE((*tc).prog_id(), 0u);
    EXPECT_EQ(attached_id(), (*tc).prog_id());
    tc.reset();
    EXPECT_EQ(attached_id(), 0u);
    EXPECT_EQ(run_command_ok("tc -n " + lb_ns.name() + " qdisc show dev xp0").find("clsact"),
              std::string::npos)
        << "the clsact qdisc this test's attachment created is still there";
}

TEST(TcAttachmentTest, ErrorsNameTheInterfaceAndTheErrno) {
    auto lb = bpf::LbProgram::load();
    ASSERT_TRUE(lb) << lb.error().message();
    auto probe = bpf::ProbeEncapProgram::load(*lb);
    ASSERT_TRUE(probe) << probe.error().message();
    // an interface index no namespace of this test has
    auto attached = bpf::TcAttachment::attach(*probe, bpf::Interface{"xlbp-none", 0x7ffffff0});
    ASSERT_FALSE(attached);
    const std::string message = attached.error().message();
    EXPECT_NE(message.find("xlbp-none"), std::string::npos) << message;
    std::printf("error as reported: %s\n", message.c_str());
    EXPECT_NE(message.find(std::strerror(attached.error().code)), std::string::npos) << message;
}

}  // namespace
}  // namespace xlb::test
