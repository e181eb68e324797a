// SPDX-License-Identifier: Apache-2.0
// A backend accepts the handshake it never saw: the balancer answered the
// client's SYN with a SYN cookie and sends the client's ACK on with the
// negotiated options in the GUE data (abi.h, struct xlb_gue_cookie). Here
// the test plays client and balancer with raw frames, on one namespace:
//
//   netns xlbck-<pid>-<n>:  peer0 (AF_PACKET: the "client" 10.77.0.50 and
//                            the "LB") <--veth--> eth0 10.77.0.2, xlb-decap
//                            (generic XDP + tc), lo: VIP 10.77.9.9, listener
//
// 10.77.0.50 is no address of the namespace: what the backend sends to it
// leaves eth0, is read on peer0 and goes no further. The backend never checks
// the cookie (the LB did), so the test computes none: only the options count.
// The namespace is removed (xlb-decap with it) whatever the outcome.
#include <arpa/inet.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <linux/if_packet.h>
#include <net/ethernet.h>
#include <net/if.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <thread>

#include "netns.h"
#include "packet.h"
#include "xlb/abi.h"

namespace {

using xlb::test::Bytes;
using xlb::test::Netns;
using xlb::test::run_command_ok;

const std::string kBackend = "10.77.0.2";
const std::string kClient = "10.77.0.50";  // also the "LB": the outer source
const std::string kVip = "10.77.9.9";
constexpr std::uint16_t kPort = 8080;
constexpr std::uint32_t kClientIsn = 0x10000000;
constexpr std::uint32_t kServerIsn = 0x20000000;  // the cookie, as far as the backend knows
constexpr std::uint32_t kSynAckTsval = 50000;

xlb::net::IpAddress ip(const std::string& text) { return *xlb::net::IpAddress::parse(text); }

std::uint32_t be32_of(const std::string& text) {
    in_addr a{};
    inet_pton(AF_INET, text.c_str(), &a);
    return a.s_addr;
}

void put16(Bytes& b, std::size_t at, std::uint16_t v) {
    b[at] = static_cast<std::uint8_t>(v >> 8);
    b[at + 1] = static_cast<std::uint8_t>(v);
}
void put32(Bytes& b, std::size_t at, std::uint32_t v) {
    put16(b, at, static_cast<std::uint16_t>(v >> 16));
    put16(b, at + 2, static_cast<std::uint16_t>(v));
}
std::uint32_t get32(const std::uint8_t* p) {
    return (std::uint32_t{p[0]} << 24) | (std::uint32_t{p[1]} << 16) | (std::uint32_t{p[2]} << 8) |
           p[3];
}

// The client's IPv4 packet to the VIP: a TCP segment with a timestamp option
// (NOP NOP TS) when tsval is non-zero.
Bytes client_packet(std::uint16_t sport, std::uint32_t seq, std::uint32_t ack, std::uint8_t flags,
                    std::uint32_t tsval, std::uint32_t tsecr, const std::string& payload = {}) {
    Bytes tcp(20);
    put16(tcp, 0, sport);
    put16(tcp, 2, kPort);
    put32(tcp, 4, seq);
    put32(tcp, 8, ack);
    tcp[13] = flags;
    // The largest window: the kernel caps the MSS at half the peer's window.
    put16(tcp, 14, 65535);
    if (tsval != 0) {
        Bytes ts{1, 1, 8, 10, 0, 0, 0, 0, 0, 0, 0, 0};
        put32(ts, 4, tsval);
        put32(ts, 8, tsecr);
        tcp.insert(tcp.end(), ts.begin(), ts.end());
    }
    tcp[12] = static_cast<std::uint8_t>((tcp.size() / 4) << 4);
    tcp.insert(tcp.end(), payload.begin(), payload.end());

    Bytes pseudo(12);
    const std::uint32_t src = be32_of(kClient), dst = be32_of(kVip);
    std::memcpy(&pseudo[0], &src, 4);
    std::memcpy(&pseudo[4], &dst, 4);
    pseudo[9] = 6;
    put16(pseudo, 10, static_cast<std::uint16_t>(tcp.size()));
    Bytes sum = pseudo;
    sum.insert(sum.end(), tcp.begin(), tcp.end());
    put16(tcp, 16, xlb::test::internet_checksum(sum.data(), sum.size()));

    Bytes iph(20);
    iph[0] = 0x45;
    put16(iph, 2, static_cast<std::uint16_t>(20 + tcp.size()));
    put16(iph, 6, 0x4000);
    iph[8] = 64;
    iph[9] = 6;
    std::memcpy(&iph[12], &src, 4);
    std::memcpy(&iph[16], &dst, 4);
    put16(iph, 10, xlb::test::internet_checksum(iph.data(), iph.size()));
    iph.insert(iph.end(), tcp.begin(), tcp.end());
    return iph;
}

struct CookieOptions {
    std::uint8_t flags = 0;  // XLB_GUE_COOKIE_F_*
    std::uint8_t snd_wscale = 0;
    std::uint8_t rcv_wscale = 0;
    std::uint16_t mss = 536;
};

// struct xlb_gue_cookie, byte by byte; tsval/tsecr are the ACK's own.
Bytes cookie_data(const CookieOptions& o, std::uint32_t tsval, std::uint32_t tsecr) {
    Bytes b(16, 0);
    b[0] = XLB_GUE_COOKIE_MAGIC;
    b[1] = o.flags;
    b[2] = o.snd_wscale;
    b[3] = o.rcv_wscale;
    put16(b, 4, o.mss);
    put32(b, 8, tsval);
    put32(b, 12, tsecr);
    return b;
}

// xlb-decap in the namespace, stopped (SIGTERM) by stop() or on destruction.
class DecapProcess {
public:
    DecapProcess(const std::string& ns, const std::string& extra_args, std::string dir)
        : dir_(std::move(dir)) {
        const std::string command = "exec ip netns exec " + ns + " " + XLB_DECAP_PATH +
                                    " -i eth0 -a " + kBackend +
                                    " -m generic --metrics-interval 3600 --metrics-file " +
                                    metrics_path() + " " + extra_args + " >" + log_path() + " 2>&1";
        pid_ = fork();
        if (pid_ == 0) {
            execl("/bin/sh", "sh", "-c", command.c_str(), static_cast<char*>(nullptr));
            _exit(127);
        }
    }
    ~DecapProcess() { stop(); }

    // Waits for the start line; false (with the log) when it exits first.
    bool wait_attached() {
        for (int i = 0; i < 200; ++i) {
            if (log().find("xlb_decap attached to eth0") != std::string::npos) return true;
            int status = 0;
            if (waitpid(pid_, &status, WNOHANG) == pid_) {
                pid_ = -1;
                return false;
            }
            std::this_thread::sleep_for(std::chrono::milliseconds(50));
        }
        return false;
    }
    // SIGTERM, then its exit status.
    int stop() {
        if (pid_ <= 0) return -1;
        kill(pid_, SIGTERM);
        int status = 0;
        waitpid(pid_, &status, 0);
        pid_ = -1;
        return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    }
    std::string log() const { return slurp(log_path()); }
    // The last metrics file's samples, "name{labels}" -> value.
    std::map<std::string, std::uint64_t> metrics() const {
        std::map<std::string, std::uint64_t> out;
        std::istringstream in(slurp(metrics_path()));
        for (std::string line; std::getline(in, line);) {
            if (line.empty() || line[0] == '#') continue;
            const auto space = line.rfind(' ');
            out[line.substr(0, space)] = std::stoull(line.substr(space + 1));
        }
        return out;
    }

private:
    static std::string slurp(const std::string& path) {
        std::ifstream in(path);
        std::stringstream ss;
        ss << in.rdbuf();
        return ss.str();
    }
    std::string log_path() const { return dir_ + "/decap.log"; }
    std::string metrics_path() const { return dir_ + "/decap.prom"; }

    std::string dir_;
    pid_t pid_ = -1;
};

class CookieBackend : public ::testing::Test {
protected:
    void SetUp() override {
        xlb::test::sweep_stale_netns("xlbck");
        ns_ = std::make_unique<Netns>(xlb::test::unique_netns_prefix("xlbck"));
        ns_->ip("link set lo up");
        ns_->ip("link add eth0 type veth peer name peer0");
        ns_->ip("link set eth0 up");
        ns_->ip("link set peer0 up");
        ns_->ip("address add " + kBackend + "/24 dev eth0");
        ns_->ip("address add " + kVip + "/32 dev lo");
        in_ns("sysctl -qw net.ipv4.conf.all.rp_filter=0 net.ipv4.conf.eth0.rp_filter=0");
        eth0_mac_ = mac_of("eth0");
        peer0_mac_ = mac_of("peer0");
        ns_->ip("neigh replace " + kClient + " lladdr " + xlb::net::mac_to_string(peer0_mac_) +
                " dev eth0 nud permanent");
        char dir[] = "/tmp/xlbck-XXXXXX";
        ASSERT_NE(mkdtemp(dir), nullptr);
        dir_ = dir;

        xlb::test::in_netns(ns_->name(), [&] {
            listener_ = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
            int one = 1;
            setsockopt(listener_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
            sockaddr_in sa{};
            sa.sin_family = AF_INET;
            sa.sin_port = htons(kPort);
            sa.sin_addr.s_addr = be32_of(kVip);
            if (bind(listener_, reinterpret_cast<sockaddr*>(&sa), sizeof sa) != 0 ||
                listen(listener_, 16) != 0)
                throw std::runtime_error(std::string("listen: ") + std::strerror(errno));
            raw_ = socket(AF_PACKET, SOCK_RAW | SOCK_NONBLOCK, htons(ETH_P_ALL));
            sockaddr_ll ll{};
            ll.sll_family = AF_PACKET;
            ll.sll_protocol = htons(ETH_P_ALL);
            ll.sll_ifindex = static_cast<int>(if_nametoindex("peer0"));
            if (raw_ < 0 || bind(raw_, reinterpret_cast<sockaddr*>(&ll), sizeof ll) != 0)
                throw std::runtime_error(std::string("packet socket: ") + std::strerror(errno));
        });
    }
    void TearDown() override {
        if (listener_ >= 0) close(listener_);
        if (raw_ >= 0) close(raw_);
        decap_.reset();
        ns_.reset();
        if (!dir_.empty()) run_command_ok("rm -rf " + dir_);
    }

    std::string in_ns(const std::string& command) {
        return run_command_ok("ip netns exec " + ns_->name() + " " + command);
    }
    xlb::net::MacAddress mac_of(const std::string& dev) {
        std::string text = in_ns("cat /sys/class/net/" + dev + "/address");
        while (!text.empty() && (text.back() == '\n' || text.back() == ' ')) text.pop_back();
        return *xlb::net::parse_mac(text);
    }

    void start_decap(const std::string& args) {
        decap_ = std::make_unique<DecapProcess>(ns_->name(), args, dir_);
        ASSERT_TRUE(decap_->wait_attached()) << decap_->log();
    }

    // The frame the "LB" sends: the client's packet to the backend in GUE,
    // with `extension` as private data.
    Bytes to_backend(const Bytes& inner, const Bytes& extension) const {
        xlb::test::Encapsulation enc;
        enc.outer_src = ip(kClient);
        enc.outer_dst = ip(kBackend);
        enc.eth_src = peer0_mac_;
        enc.eth_dst = eth0_mac_;
        enc.gue_port = XLB_GUE_PORT_DEFAULT;
        enc.gue_sport = 0xc0c0;
        enc.gue_extension = extension;
        return xlb::test::encapsulate(inner, enc);
    }
    void send_frame(const Bytes& frame) {
        ASSERT_EQ(send(raw_, frame.data(), frame.size(), 0), static_cast<ssize_t>(frame.size()))
            << std::strerror(errno);
    }

    // The client's ACK of the cookie SYN-ACK, carried with its cookie data.
    void send_cookie_ack(std::uint16_t sport, const CookieOptions& o) {
        const bool ts = o.flags & XLB_GUE_COOKIE_F_TSTAMP;
        const std::uint32_t tsval = ts ? 1000 : 0, tsecr = ts ? kSynAckTsval : 0;
        send_frame(
            to_backend(client_packet(sport, kClientIsn + 1, kServerIsn + 1, 0x10, tsval, tsecr),
                       cookie_data(o, tsval, tsecr)));
    }

    // accept() within `wait`; -1 when nothing came.
    int accept_within(std::chrono::milliseconds wait) {
        pollfd p{listener_, POLLIN, 0};
        if (poll(&p, 1, static_cast<int>(wait.count())) != 1) return -1;
        return accept4(listener_, nullptr, nullptr, SOCK_CLOEXEC);
    }

    // The first segment from the VIP to `sport` with a payload, read on peer0.
    struct Segment {
        std::uint32_t seq = 0;
        std::string payload;
    };
    std::optional<Segment> backend_data(std::uint16_t sport) {
        const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
        std::uint8_t buf[2048];
        while (std::chrono::steady_clock::now() < deadline) {
            pollfd p{raw_, POLLIN, 0};
            if (poll(&p, 1, 200) != 1) continue;
            const ssize_t n = recv(raw_, buf, sizeof buf, 0);
            if (n < 14 + 20 + 20 || buf[12] != 0x08 || buf[13] != 0x00) continue;
            const std::uint8_t* iph = buf + 14;
            const std::size_t ihl = (iph[0] & 0x0f) * 4u;
            std::uint32_t src = 0;
            std::memcpy(&src, iph + 12, 4);
            if (iph[9] != 6 || src != be32_of(kVip)) continue;
            const std::uint8_t* th = iph + ihl;
            if (((th[0] << 8) | th[1]) != kPort || ((th[2] << 8) | th[3]) != sport) continue;
            const std::size_t total = (iph[2] << 8) | iph[3];
            const std::size_t doff = (th[12] >> 4) * 4u;
            if (total <= ihl + doff) continue;  // a bare ACK
            return Segment{get32(th + 4), std::string(reinterpret_cast<const char*>(th + doff),
                                                      total - ihl - doff)};
        }
        return std::nullopt;
    }

    std::unique_ptr<Netns> ns_;
    std::unique_ptr<DecapProcess> decap_;
    std::string dir_;
    xlb::net::MacAddress eth0_mac_{}, peer0_mac_{};
    int listener_ = -1;
    int raw_ = -1;
};

TEST_F(CookieBackend, ACookieAckBecomesAConnectionWithTheNegotiatedOptions) {
    start_decap("");
    ASSERT_NE(decap_->log().find("accepting cookie ACKs"), std::string::npos) << decap_->log();

    struct Case {
        const char* name;
        std::uint16_t sport;
        CookieOptions options;
        std::uint32_t option_bytes;  // per segment: the timestamp option
    };
    const Case cases[] = {
        {"window scale, SACK, timestamps",
         41000,
         {XLB_GUE_COOKIE_F_WSCALE | XLB_GUE_COOKIE_F_SACK | XLB_GUE_COOKIE_F_TSTAMP, 9, 5, 1000},
         12},
        {"no options", 41001, {0, 0, 0, 1200}, 0},
    };
    for (const Case& c : cases) {
        SCOPED_TRACE(c.name);
        send_cookie_ack(c.sport, c.options);
        const int conn = accept_within(std::chrono::seconds(3));
        ASSERT_GE(conn, 0) << "no connection from the cookie ACK; xlb-decap: " << decap_->log();

        tcp_info info{};
        socklen_t len = sizeof info;
        ASSERT_EQ(getsockopt(conn, IPPROTO_TCP, TCP_INFO, &info, &len), 0);
        const bool wscale = c.options.flags & XLB_GUE_COOKIE_F_WSCALE;
        EXPECT_EQ((info.tcpi_options & TCPI_OPT_WSCALE) != 0, wscale);
        EXPECT_EQ((info.tcpi_options & TCPI_OPT_SACK) != 0,
                  (c.options.flags & XLB_GUE_COOKIE_F_SACK) != 0);
        EXPECT_EQ((info.tcpi_options & TCPI_OPT_TIMESTAMPS) != 0,
                  (c.options.flags & XLB_GUE_COOKIE_F_TSTAMP) != 0);
        if (wscale) {
            EXPECT_EQ(info.tcpi_snd_wscale, c.options.snd_wscale);
            EXPECT_EQ(info.tcpi_rcv_wscale, c.options.rcv_wscale);
        }
        // The client's MSS from the cookie, less the options every segment carries.
        EXPECT_EQ(info.tcpi_snd_mss, c.options.mss - c.option_bytes);
        int maxseg = 0;
        len = sizeof maxseg;
        ASSERT_EQ(getsockopt(conn, IPPROTO_TCP, TCP_MAXSEG, &maxseg, &len), 0);
        EXPECT_EQ(static_cast<std::uint32_t>(maxseg), c.options.mss - c.option_bytes);

        // Data both ways: the client's is read, the backend's answer leaves
        // with the sequence numbers the ACK set (its ack - 1 as the ISN).
        const bool ts = c.options.flags & XLB_GUE_COOKIE_F_TSTAMP;
        send_frame(to_backend(client_packet(c.sport, kClientIsn + 1, kServerIsn + 1, 0x18,
                                            ts ? 1001 : 0, ts ? kSynAckTsval : 0, "ping"),
                              {}));
        pollfd p{conn, POLLIN, 0};
        ASSERT_EQ(poll(&p, 1, 3000), 1) << "the client's data did not arrive";
        char got[16] = {};
        EXPECT_EQ(recv(conn, got, sizeof got, 0), 4);
        EXPECT_EQ(std::string(got), "ping");
        ASSERT_EQ(send(conn, "pong", 4, 0), 4);
        auto answer = backend_data(c.sport);
        ASSERT_TRUE(answer) << "the backend's data did not leave";
        EXPECT_EQ(answer->payload, "pong");
        EXPECT_EQ(answer->seq, kServerIsn + 1);
        close(conn);
    }

    ASSERT_EQ(decap_->stop(), 0) << decap_->log();
    auto m = decap_->metrics();
    EXPECT_EQ(m["xlb_decap_packets_total{interface=\"eth0\",outcome=\"decapsulated_cookie\"}"], 2u);
    EXPECT_EQ(m["xlb_decap_cookie_acks_total{interface=\"eth0\",outcome=\"assigned\"}"], 2u);
    EXPECT_EQ(m["xlb_decap_packets_total{interface=\"eth0\",outcome=\"drop_cookie_no_acceptor\"}"],
              0u);
}

TEST_F(CookieBackend, WithoutTheAcceptorTheCookieAckIsDroppedAndCounted) {
    start_decap("--no-cookies");
    ASSERT_NE(decap_->log().find("cookie ACKs dropped (--no-cookies)"), std::string::npos)
        << decap_->log();
    EXPECT_EQ(in_ns("tc filter show dev eth0 ingress"), "");
    send_cookie_ack(42000, {XLB_GUE_COOKIE_F_SACK, 0, 0, 1460});
    EXPECT_LT(accept_within(std::chrono::milliseconds(1500)), 0)
        << "a connection appeared without the acceptor";

    ASSERT_EQ(decap_->stop(), 0) << decap_->log();
    auto m = decap_->metrics();
    EXPECT_EQ(m["xlb_decap_packets_total{interface=\"eth0\",outcome=\"drop_cookie_no_acceptor\"}"],
              1u);
    EXPECT_EQ(m["xlb_decap_packets_total{interface=\"eth0\",outcome=\"decapsulated_cookie\"}"], 0u);
    EXPECT_EQ(m.count("xlb_decap_cookie_acks_total{interface=\"eth0\",outcome=\"assigned\"}"), 0u);
}

// The acceptor is on tc ingress while xlb-decap runs, gone once it stops.
TEST_F(CookieBackend, TheAcceptorLeavesWithXlbDecap) {
    start_decap("");
    EXPECT_NE(in_ns("tc filter show dev eth0 ingress").find("xlb_cookie"), std::string::npos);
    ASSERT_EQ(decap_->stop(), 0) << decap_->log();
    EXPECT_EQ(in_ns("tc filter show dev eth0 ingress").find("xlb_cookie"), std::string::npos);
}

}  // namespace
