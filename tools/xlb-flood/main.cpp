// SPDX-License-Identifier: Apache-2.0
// xlb-flood: a spoofed TCP flood for the lab's tests (tests/conntrack). From
// the namespace it runs in, it writes frames straight onto an interface
// (AF_PACKET, past the qdisc) towards a VIP: every flow has a random source
// address in a given prefix and a random port. Modes:
//   syn      one SYN per flow (what a SYN flood looks like)
//   syn-ack  a SYN then an ACK per flow (a flood that passes for handshakes)
//   ack      one ACK per flow (packets of connections that never existed)
// It sends at a given rate (or as fast as it can) for a given time and prints
// one JSON line: what it sent and the rate it achieved. Test-only: not
// installed. The sources must be addresses that exist nowhere but in the lab.
#include <fmt/core.h>
#include <net/if.h>
#include <netinet/in.h>
#include <netpacket/packet.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <functional>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "packet.h"
#include "xlb/net/address.h"

namespace {

using Clock = std::chrono::steady_clock;
using xlb::net::IpAddress;
using xlb::test::Bytes;

volatile sig_atomic_t g_stop = 0;
void on_signal(int) { g_stop = 1; }

class Fd {
public:
    explicit Fd(int fd) : fd_(fd) {}
    ~Fd() {
        if (fd_ >= 0) ::close(fd_);
    }
    Fd(const Fd&) = delete;
    Fd& operator=(const Fd&) = delete;
    int get() const { return fd_; }

private:
    int fd_;
};

[[noreturn]] void fail(const std::string& what) {
    throw std::runtime_error(what + ": " + std::strerror(errno));
}

// splitmix64: fast, and a seed reproduces a flood exactly.
struct Random {
    std::uint64_t state;
    std::uint64_t next() {
        std::uint64_t z = (state += 0x9e3779b97f4a7c15ULL);
        z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
        z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
        return z ^ (z >> 31);
    }
};

struct Prefix {
    IpAddress base;
    unsigned length = 0;

    static Prefix parse(const std::string& text) {
        const auto slash = text.find('/');
        if (slash == std::string::npos) throw std::invalid_argument("--sources: expected ADDR/LEN");
        auto addr = IpAddress::parse(text.substr(0, slash));
        if (!addr) throw std::invalid_argument("--sources: " + addr.error());
        Prefix p{*addr, static_cast<unsigned>(std::stoul(text.substr(slash + 1)))};
        const unsigned bits = p.base.is_v4() ? 32 : 128;
        if (p.length > bits || bits - p.length < 2)
            throw std::invalid_argument("--sources: the prefix needs at least 2 host bits");
        return p;
    }

    // A random address of the prefix, never its first or last one: a source
    // that is the subnet's broadcast would be a martian to the router.
    IpAddress pick(Random& rng) const {
        IpAddress a = base;
        const unsigned bits = a.is_v4() ? 32 : 128;
        const unsigned host_bits = bits - length;
        // at most 64 host bits are randomised: plenty of distinct flows
        const unsigned random_bits = host_bits > 64 ? 64 : host_bits;
        std::uint64_t host;
        do {
            host = rng.next();
            if (random_bits < 64) host &= (std::uint64_t{1} << random_bits) - 1;
        } while (
            host_bits <= 64 &&
            (host == 0 || host == (random_bits == 64 ? ~std::uint64_t{0}
                                                     : (std::uint64_t{1} << random_bits) - 1)));
        const unsigned bytes = bits / 8;
        for (unsigned i = 0; i < random_bits; i += 8) {
            const unsigned byte = bytes - 1 - i / 8;
            const unsigned take = random_bits - i >= 8 ? 8 : random_bits - i;
            const std::uint8_t mask = static_cast<std::uint8_t>((1u << take) - 1);
            a.bytes[byte] =
                static_cast<std::uint8_t>((a.bytes[byte] & ~mask) | ((host >> i) & mask));
        }
        return a;
    }
};

struct Options {
    std::string interface = "eth0";
    std::string dst_mac;
    std::string vip;
    std::uint16_t port = 80;
    std::string mode = "syn";
    std::string sources;
    double rate = 0;  // packets per second; 0 = as fast as it can
    double duration = 10;
    std::uint64_t seed = 0;
    unsigned batch = 64;
    unsigned threads = 1;
};

struct Totals {
    std::uint64_t packets = 0;  // accepted by the interface
    std::uint64_t flows = 0;
    std::uint64_t refused = 0;  // frames the interface refused (its queue full)
    double seconds = 0;
};

Totals flood(const Options& o) {
    auto vip = IpAddress::parse(o.vip);
    if (!vip) throw std::invalid_argument("--vip: " + vip.error());
    const Prefix sources = Prefix::parse(o.sources);
    if (sources.base.family != vip->family)
        throw std::invalid_argument("--sources and --vip are of different families");
    auto dst_mac = xlb::net::parse_mac(o.dst_mac);
    if (!dst_mac) throw std::invalid_argument("--dst-mac: " + dst_mac.error());
    const bool syn = o.mode == "syn" || o.mode == "syn-ack";
    const bool ack = o.mode == "ack" || o.mode == "syn-ack";
    if (!syn && !ack) throw std::invalid_argument("--mode: syn, syn-ack or ack");

    // protocol 0: send only, so the socket queues none of the traffic it sees
    Fd fd(::socket(AF_PACKET, SOCK_RAW | SOCK_CLOEXEC, 0));
    if (fd.get() < 0) fail("socket(AF_PACKET)");
    const unsigned ifindex = if_nametoindex(o.interface.c_str());
    if (ifindex == 0) fail("interface " + o.interface);
    int one = 1;
    // the qdisc would only add a lock and a queue the frames do not need
    if (setsockopt(fd.get(), SOL_PACKET, PACKET_QDISC_BYPASS, &one, sizeof one) != 0)
        fail("PACKET_QDISC_BYPASS");
    int sndbuf = 4 << 20;
    setsockopt(fd.get(), SOL_SOCKET, SO_SNDBUF, &sndbuf, sizeof sndbuf);
    sockaddr_ll ll{};
    ll.sll_family = AF_PACKET;
    ll.sll_ifindex = static_cast<int>(ifindex);
    if (::bind(fd.get(), reinterpret_cast<sockaddr*>(&ll), sizeof ll) != 0) fail("bind");
    ifreq ifr{};
    std::snprintf(ifr.ifr_name, sizeof ifr.ifr_name, "%s", o.interface.c_str());
    if (::ioctl(fd.get(), SIOCGIFHWADDR, &ifr) != 0) fail("SIOCGIFHWADDR " + o.interface);

    xlb::test::FrameOptions fo;
    std::memcpy(fo.eth_src.data(), ifr.ifr_hwaddr.sa_data, 6);
    fo.eth_dst = *dst_mac;
    fo.payload.clear();
    fo.ttl = 64;
    xlb::test::Flow flow;
    flow.dst = *vip;
    flow.dport = o.port;
    flow.proto = xlb::test::kProtoTcp;

    Random rng{o.seed ? o.seed
                      : static_cast<std::uint64_t>(Clock::now().time_since_epoch().count()) ^
                            std::hash<std::thread::id>{}(std::this_thread::get_id())};
    const unsigned batch = o.batch == 0 ? 1 : o.batch;
    std::vector<Bytes> frames;
    std::vector<iovec> iov(batch);
    std::vector<mmsghdr> msgs(batch);
    Totals t;
    const auto start = Clock::now();
    const auto end = start + std::chrono::duration_cast<Clock::duration>(
                                 std::chrono::duration<double>(o.duration));
    // A pending ACK of syn-ack mode goes into the next batch when the SYN
    // took the last place of this one.
    bool ack_pending = false;
    Bytes pending;
    while (!g_stop) {
        const auto now = Clock::now();
        if (now >= end) break;
        std::uint64_t want = batch;
        if (o.rate > 0) {
            const double elapsed = std::chrono::duration<double>(now - start).count();
            const auto due = static_cast<std::uint64_t>(elapsed * o.rate);
            const std::uint64_t sent = t.packets + t.refused;
            if (due <= sent) {
                // the next packet's time: sleep most of it, the scheduler adds the rest
                std::this_thread::sleep_for(std::chrono::microseconds(
                    std::max<long>(20, static_cast<long>(1e6 / o.rate * 0.8))));
                continue;
            }
            want = std::min<std::uint64_t>(batch, due - sent);
        }
        frames.clear();
        if (ack_pending) {
            frames.push_back(std::move(pending));
            ack_pending = false;
        }
        while (frames.size() < want) {
            flow.src = sources.pick(rng);
            const std::uint64_t r = rng.next();
            // ephemeral-looking ports, never 0
            flow.sport = static_cast<std::uint16_t>(1024 + r % (65536 - 1024));
            const auto seq = static_cast<std::uint32_t>(r >> 32);
            ++t.flows;
            if (syn) {
                fo.tcp_flags = xlb::test::kTcpSyn;
                fo.tcp_seq = seq;
                fo.tcp_ack = 0;
                frames.push_back(xlb::test::make_frame(flow, fo));
            }
            if (ack) {
                fo.tcp_flags = xlb::test::kTcpAck;
                fo.tcp_seq = syn ? seq + 1 : seq;
                fo.tcp_ack = static_cast<std::uint32_t>(rng.next());
                Bytes f = xlb::test::make_frame(flow, fo);
                if (frames.size() < want) {
                    frames.push_back(std::move(f));
                } else {
                    pending = std::move(f);
                    ack_pending = true;
                }
            }
        }
        for (std::size_t i = 0; i < frames.size(); ++i) {
            iov[i] = {frames[i].data(), frames[i].size()};
            msgs[i] = {};
            msgs[i].msg_hdr.msg_iov = &iov[i];
            msgs[i].msg_hdr.msg_iovlen = 1;
        }
        std::size_t done = 0;
        while (done < frames.size() && !g_stop) {
            const int n = ::sendmmsg(fd.get(), msgs.data() + done,
                                     static_cast<unsigned>(frames.size() - done), 0);
            if (n > 0) {
                done += static_cast<std::size_t>(n);
                t.packets += static_cast<std::uint64_t>(n);
            } else if (errno == ENOBUFS || errno == EAGAIN) {
                // the interface's queue is full: this frame is lost, as on a wire
                ++done;
                ++t.refused;
            } else if (errno != EINTR) {
                fail("sendmmsg");
            }
        }
    }
    t.seconds = std::chrono::duration<double>(Clock::now() - start).count();
    return t;
}

}  // namespace

// Each sender shares the rate and has its own socket and random sequence:
// the kernel forwards a frame in its sender's context, so a second sender
// brings a second CPU to the lab.
Totals flood_parallel(const Options& o) {
    const unsigned n = o.threads == 0 ? 1 : o.threads;
    std::vector<Totals> totals(n);
    std::vector<std::string> errors(n);
    std::vector<std::thread> senders;
    for (unsigned i = 0; i < n; ++i) {
        senders.emplace_back([&, i] {
            Options mine = o;
            mine.rate = o.rate / n;
            if (o.seed) mine.seed = o.seed + i;
            try {
                totals[i] = flood(mine);
            } catch (const std::exception& e) {
                errors[i] = e.what();
                g_stop = 1;
            }
        });
    }
    for (auto& t : senders) t.join();
    Totals sum;
    for (unsigned i = 0; i < n; ++i) {
        if (!errors[i].empty()) throw std::runtime_error(errors[i]);
        sum.packets += totals[i].packets;
        sum.flows += totals[i].flows;
        sum.refused += totals[i].refused;
        sum.seconds = std::max(sum.seconds, totals[i].seconds);
    }
    return sum;
}

int main(int argc, char** argv) {
    Options o;
    CLI::App app{"xlb-flood: a spoofed TCP flood towards a VIP, for the lab's tests"};
    app.add_option("--interface", o.interface, "interface to send on (default eth0)");
    app.add_option("--dst-mac", o.dst_mac, "Ethernet destination: the next hop's MAC")->required();
    app.add_option("--vip", o.vip, "destination address")->required();
    app.add_option("--port", o.port, "destination port (default 80)");
    app.add_option("--mode", o.mode, "syn, syn-ack or ack")
        ->check(CLI::IsMember({"syn", "syn-ack", "ack"}));
    app.add_option("--sources", o.sources, "prefix of the random sources, e.g. 192.0.2.128/25")
        ->required();
    app.add_option("--rate", o.rate, "packets per second (0: as fast as possible)");
    app.add_option("--duration", o.duration, "seconds (default 10)");
    app.add_option("--seed", o.seed, "random seed (0: from the clock)");
    app.add_option("--batch", o.batch, "frames per sendmmsg (default 64)");
    app.add_option("--threads", o.threads, "senders, each with its share of the rate (default 1)");
    CLI11_PARSE(app, argc, argv);

    struct sigaction sa {};
    sa.sa_handler = on_signal;
    sigaction(SIGINT, &sa, nullptr);
    sigaction(SIGTERM, &sa, nullptr);
    try {
        const Totals t = flood_parallel(o);
        fmt::print(
            "{{\"mode\":\"{}\",\"target_rate\":{:.0f},\"duration_s\":{:.3f},\"packets\":{},"
            "\"flows\":{},\"refused\":{},\"rate\":{:.0f}}}\n",
            o.mode, o.rate, t.seconds, t.packets, t.flows, t.refused,
            t.seconds > 0 ? static_cast<double>(t.packets) / t.seconds : 0.0);
    } catch (const std::exception& e) {
        fmt::print(stderr, "xlb-flood: {}\n", e.what());
        return 1;
    }
    return 0;
}
