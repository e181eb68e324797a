// SPDX-License-Identifier: Apache-2.0
// Second chance on the backend's side (bpf/xlb_decap.bpf.c, abi.h struct
// xlb_gue_hint), with real sockets: the program runs (BPF_PROG_TEST_RUN) from
// a thread inside a namespace of the test's own, where the VIP and the
// client's address live on loopback, so the kernel's socket lookup sees that
// namespace's connections. A hinted packet of a flow the kernel knows (an
// established socket, a SYN, a valid SYN cookie) is delivered; one it does
// not know goes back out to the hinted backend, once.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <cstring>
#include <optional>
#include <string>

#include "constants.h"
#include "lb_fixture.h"
#include "netns.h"
#include "packet.h"
#include "xlb/bpf/fd.h"
#include "xlb/bpf/programs.h"
#include "xlb/bpf/test_run.h"

namespace xlb::test {
namespace {

const net::MacAddress kHopMac{0x02, 0, 0, 0, 0, 0x3f};
constexpr std::uint16_t kCookiePort = 81;

sockaddr_storage sockaddr_of(const net::IpAddress& a, std::uint16_t port, socklen_t* len) {
    sockaddr_storage ss{};
    if (a.is_v4()) {
        auto* s4 = reinterpret_cast<sockaddr_in*>(&ss);
        s4->sin_family = AF_INET;
        s4->sin_port = htons(port);
        std::memcpy(&s4->sin_addr, a.bytes.data(), 4);
        *len = sizeof(sockaddr_in);
    } else {
        auto* s6 = reinterpret_cast<sockaddr_in6*>(&ss);
        s6->sin6_family = AF_INET6;
        s6->sin6_port = htons(port);
        std::memcpy(&s6->sin6_addr, a.bytes.data(), 16);
        *len = sizeof(sockaddr_in6);
    }
    return ss;
}

bpf::UniqueFd tcp_socket(const net::IpAddress& a) {
    bpf::UniqueFd fd(socket(a.is_v4() ? AF_INET : AF_INET6, SOCK_STREAM | SOCK_CLOEXEC, 0));
    if (!fd) throw std::runtime_error(std::string("socket: ") + std::strerror(errno));
    return fd;
}

void bind_to(int fd, const net::IpAddress& a, std::uint16_t port) {
    socklen_t len = 0;
    sockaddr_storage ss = sockaddr_of(a, port, &len);
    if (bind(fd, reinterpret_cast<sockaddr*>(&ss), len) != 0)
        throw std::runtime_error("bind " + a.to_string() + ": " + std::strerror(errno));
}

std::uint16_t local_port(int fd) {
    sockaddr_storage ss{};
    socklen_t len = sizeof(ss);
    getsockname(fd, reinterpret_cast<sockaddr*>(&ss), &len);
    return ss.ss_family == AF_INET ? ntohs(reinterpret_cast<sockaddr_in*>(&ss)->sin_port)
                                   : ntohs(reinterpret_cast<sockaddr_in6*>(&ss)->sin6_port);
}

// An established connection client -> VIP:kVipPort inside the namespace.
struct Connection {
    bpf::UniqueFd listener, client, server;
    std::uint16_t client_port = 0;
};

class DecapSecondChanceTest : public ::testing::Test {
protected:
    static void SetUpTestSuite() {
        sweep_stale_netns("xlbsc");
        ns_.emplace(unique_netns_prefix("xlbsc"));
        ns_->ip("link set lo up");
        ns_->ip("addr add " + kVipV4.to_string() + "/32 dev lo");
        ns_->ip("addr add " + kClientV4.to_string() + "/32 dev lo");
        ns_->ip("addr add " + kVipV6.to_string() + "/128 dev lo nodad");
        ns_->ip("addr add " + kClientV6.to_string() + "/128 dev lo nodad");
        // cookies for every SYN, so a listener's cookie can be checked
        run_command_ok("ip netns exec " + ns_->name() + " sysctl -qw net.ipv4.tcp_syncookies=2");
        program_ = decap_serving({kBackendV4[0], kBackendV6[0]});
        ASSERT_TRUE(program_);
    }
    static void TearDownTestSuite() {
        program_.reset();
        ns_.reset();
    }
    void SetUp() override {
        ASSERT_TRUE(program_);
        program_->set_next_hop_mac(kHopMac);
    }

    static Connection connect_in_ns(const net::IpAddress& client, const net::IpAddress& vip) {
        return in_netns(ns_->name(), [&] {
            Connection c;
            c.listener = tcp_socket(vip);
            const int one = 1;
            setsockopt(c.listener.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
            bind_to(c.listener.get(), vip, kVipPort);
            if (listen(c.listener.get(), 8) != 0) throw std::runtime_error("listen");
            c.client = tcp_socket(client);
            bind_to(c.client.get(), client, 0);
            socklen_t len = 0;
            sockaddr_storage to = sockaddr_of(vip, kVipPort, &len);
            if (connect(c.client.get(), reinterpret_cast<sockaddr*>(&to), len) != 0)
                throw std::runtime_error(std::string("connect: ") + std::strerror(errno));
            c.server = bpf::UniqueFd(accept4(c.listener.get(), nullptr, nullptr, SOCK_CLOEXEC));
            c.client_port = local_port(c.client.get());
            return c;
        });
    }

    // The balancer's GUE packet to `to`.
    static Encapsulation from_lb_gue(const net::IpAddress& to) {
        Encapsulation enc = from_lb(to);
        enc.gue_port = XLB_GUE_PORT_DEFAULT;
        enc.gue_sport = 0xc321;
        return enc;
    }
    // The balancer's packet to backend 0 with a hint naming backend 1.
    static Bytes hinted(const Bytes& inner, bool v6_outer, std::uint8_t state = 1) {
        Encapsulation enc = from_lb_gue(v6_outer ? kBackendV6[0] : kBackendV4[0]);
        enc.gue_extension = second_chance_hint(v6_outer ? kBackendV6[1] : kBackendV4[1], state);
        return encapsulate(inner, enc);
    }
    // That packet as backend 0 sends it on: to backend 1, one hop less,
    // the hint marked passed, from this host to its next hop.
    static Bytes passed_on(const Bytes& inner, bool v6_outer) {
        const net::IpAddress to = v6_outer ? kBackendV6[1] : kBackendV4[1];
        Encapsulation enc = from_lb_gue(to);
        enc.gue_extension = second_chance_hint(to, 2);
        enc.ttl = 63;
        enc.eth_src = kLbMac;
        enc.eth_dst = kHopMac;
        return encapsulate(inner, enc);
    }
    static Bytes delivered(const Bytes& inner) {
        return ethernet(kLbMac, kNextHopMac, (inner[0] >> 4) == 4 ? 0x0800 : 0x86dd, inner);
    }

    // Runs the program inside the namespace (its socket lookups see the
    // namespace's connections) and checks action, output frame and outcome.
    void expect(const Bytes& input, std::uint32_t action, xlb_decap_outcome outcome,
                const Bytes& expected) {
        ASSERT_EQ(checksum_errors(input), "") << "test bug: input frame is invalid";
        ASSERT_EQ(checksum_errors(expected), "") << "test bug: expected frame is invalid";
        expect_decap_run(
            *program_, input, action, outcome, expected, [&](int prog_fd, const Bytes& frame) {
                return in_netns(ns_->name(), [&] { return bpf::test_run_xdp(prog_fd, frame); });
            });
    }

    std::uint64_t passed_to(const net::IpAddress& backend) {
        auto passed = program_->passed_on();
        EXPECT_TRUE(passed);
        if (!passed) return 0;
        for (const auto& [addr, count] : *passed)
            if (net::IpAddress::from_words(addr.addr, addr.family) == backend) return count;
        return 0;
    }

    static std::optional<Netns> ns_;
    static std::optional<bpf::DecapProgram> program_;
};

std::optional<Netns> DecapSecondChanceTest::ns_;
std::optional<bpf::DecapProgram> DecapSecondChanceTest::program_;

Bytes ack_of(const Flow& f, std::uint32_t seq = 1000, std::uint32_t ack = 2000) {
    FrameOptions opt;
    opt.tcp_flags = kTcpAck;
    opt.tcp_seq = seq;
    opt.tcp_ack = ack;
    return make_ip_packet(f, opt);
}

TEST_F(DecapSecondChanceTest, AKnownFlowIsDeliveredAnUnknownOneGoesToTheHintedBackend) {
    for (bool v6 : {false, true}) {
        SCOPED_TRACE(v6 ? "IPv6" : "IPv4");
        const net::IpAddress client = v6 ? kClientV6 : kClientV4;
        const net::IpAddress vip = v6 ? kVipV6 : kVipV4;
        Connection c = connect_in_ns(client, vip);
        ASSERT_TRUE(c.server);

        const Bytes known = ack_of({client, vip, c.client_port, kVipPort, kProtoTcp});
        expect(hinted(known, v6), XDP_PASS, XLB_DECAP_OUT_DECAPSULATED, delivered(known));

        const std::uint64_t before = passed_to(v6 ? kBackendV6[1] : kBackendV4[1]);
        const Bytes unknown = ack_of(
            {client, vip, static_cast<std::uint16_t>(c.client_port ^ 1), kVipPort, kProtoTcp});
        expect(hinted(unknown, v6), XDP_TX, XLB_DECAP_OUT_PASSED_ON, passed_on(unknown, v6));
        EXPECT_EQ(passed_to(v6 ? kBackendV6[1] : kBackendV4[1]) - before, 1u);

        // closed by the server first: its time-wait socket still knows the flow
        c.server.reset();
        c.client.reset();
        usleep(50'000);
        expect(hinted(known, v6), XDP_PASS, XLB_DECAP_OUT_DECAPSULATED, delivered(known));
    }
}

TEST_F(DecapSecondChanceTest, ASynIsDeliveredWhoeverKnowsIt) {
    FrameOptions syn;
    syn.tcp_flags = kTcpSyn;
    syn.payload.clear();
    const Bytes inner = make_ip_packet({kClientV4, kVipV4, 50001, kVipPort, kProtoTcp}, syn);
    expect(hinted(inner, false), XDP_PASS, XLB_DECAP_OUT_DECAPSULATED, delivered(inner));
}

TEST_F(DecapSecondChanceTest, APacketIsPassedOnAtMostOnce) {
    const Bytes unknown = ack_of({kClientV4, kVipV4, 50002, kVipPort, kProtoTcp});
    // what the first backend sent on, arriving at a backend that does not
    // know the flow either: delivered (the client gets its reset from there)
    Encapsulation enc = from_lb_gue(kBackendV4[0]);
    enc.gue_extension = second_chance_hint(kBackendV4[1], 2);
    expect(encapsulate(unknown, enc), XDP_PASS, XLB_DECAP_OUT_DECAPSULATED, delivered(unknown));
}

TEST_F(DecapSecondChanceTest, WithoutANextHopAnUnknownFlowIsDeliveredAndCounted) {
    program_->set_next_hop_mac(std::nullopt);
    const Bytes unknown = ack_of({kClientV4, kVipV4, 50003, kVipPort, kProtoTcp});
    expect(hinted(unknown, false), XDP_PASS, XLB_DECAP_OUT_DECAPSULATED_NO_NEXT_HOP,
           delivered(unknown));
}

TEST_F(DecapSecondChanceTest, HintsThatAreNotOursAreSkippedLikeAnyExtension) {
    const Bytes unknown = ack_of({kClientV4, kVipV4, 50004, kVipPort, kProtoTcp});
    Encapsulation enc = from_lb_gue(kBackendV4[0]);
    enc.gue_extension = second_chance_hint(kBackendV4[1]);
    enc.gue_extension[0] = 0x79;  // another magic
    expect(encapsulate(unknown, enc), XDP_PASS, XLB_DECAP_OUT_DECAPSULATED, delivered(unknown));
    // an IPv6 hint in an IPv4 outer header cannot be followed
    enc.gue_extension = second_chance_hint(kBackendV6[1]);
    expect(encapsulate(unknown, enc), XDP_PASS, XLB_DECAP_OUT_DECAPSULATED, delivered(unknown));
}

// A SYN sent by hand gets a cookie SYN-ACK (tcp_syncookies=2); the ACK that
// answers it is the listener's to accept, though no socket exists yet. An
// ACK with a wrong cookie is not, and goes on.
TEST_F(DecapSecondChanceTest, AValidSynCookieIsDeliveredAnInvalidOneGoesOn) {
    const std::uint16_t client_port = 50005;
    const std::uint32_t isn = 77777;
    bpf::UniqueFd listener;  // open until the ACKs were judged
    auto server_isn = in_netns(ns_->name(), [&]() -> std::optional<std::uint32_t> {
        listener = tcp_socket(kVipV4);
        bind_to(listener.get(), kVipV4, kCookiePort);
        if (listen(listener.get(), 8) != 0) return std::nullopt;
        bpf::UniqueFd sniff(socket(AF_INET, SOCK_RAW | SOCK_CLOEXEC, IPPROTO_TCP));
        bpf::UniqueFd raw(socket(AF_INET, SOCK_RAW | SOCK_CLOEXEC, IPPROTO_RAW));
        if (!sniff || !raw) return std::nullopt;
        timeval tv{2, 0};
        setsockopt(sniff.get(), SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
        FrameOptions syn;
        syn.tcp_flags = kTcpSyn;
        syn.tcp_seq = isn;
        syn.tcp_ack = 0;
        syn.payload.clear();
        const Bytes packet =
            make_ip_packet({kClientV4, kVipV4, client_port, kCookiePort, kProtoTcp}, syn);
        socklen_t len = 0;
        sockaddr_storage to = sockaddr_of(kVipV4, 0, &len);
        if (sendto(raw.get(), packet.data(), packet.size(), 0, reinterpret_cast<sockaddr*>(&to),
                   len) < 0)
            return std::nullopt;
        std::array<std::uint8_t, 2048> buf{};
        for (int i = 0; i < 20; ++i) {
            ssize_t n = recv(sniff.get(), buf.data(), buf.size(), 0);
            if (n < 40) return std::nullopt;
            const std::size_t ihl = (buf[0] & 0x0f) * 4;
            const std::uint8_t* tcp = buf.data() + ihl;
            const std::uint16_t sport = tcp[0] << 8 | tcp[1], dport = tcp[2] << 8 | tcp[3];
            if (sport != kCookiePort || dport != client_port || (tcp[13] & 0x12) != 0x12) continue;
            std::uint32_t seq = 0;
            std::memcpy(&seq, tcp + 4, 4);
            return ntohl(seq);
        }
        return std::nullopt;
    });
    ASSERT_TRUE(server_isn) << "no SYN-ACK seen";
    const Flow f{kClientV4, kVipV4, client_port, kCookiePort, kProtoTcp};
    const Bytes good = ack_of(f, isn + 1, *server_isn + 1);
    expect(hinted(good, false), XDP_PASS, XLB_DECAP_OUT_DECAPSULATED, delivered(good));
    const Bytes bad = ack_of(f, isn + 1, *server_isn + 1001);
    expect(hinted(bad, false), XDP_TX, XLB_DECAP_OUT_PASSED_ON, passed_on(bad, false));
}

}  // namespace
}  // namespace xlb::test
