// SPDX-License-Identifier: Apache-2.0
// SYN cookies at the LB and per-VIP source ranges, end to end (label
// syn_cookies): scripts/lab.sh's lab (client, router, LB, b1..b3; encap gue
// and cookie_acks on every backend with --syn-cookies), real TCP, the real
// xlbd, the backends' xlb-decap with its cookie acceptor, and
// tools/xlb-flood sending spoofed SYNs (random sources in 192.0.2.128/25, as
// tests/conntrack) from the client namespace.
//   always : 20 streams and new connections every 10 ms through cookies while
//            a SYN flood runs at the lab's maximum sustainable rate; no flood
//            SYN may reach a backend (their SYN queues, nstat's cookie and
//            overflow counters stay flat), at least 99% of the connections
//            succeed, no stream breaks. Then the same flood for a second with
//            cookies off, to show that the backends' counters see a flood.
//   bulk   : a transfer both ways over a connection made through a cookie
//            against one made without, on the same backend; the window
//            scales both ends use (TCP_INFO) must agree.
//   auto   : with a low syn_flood.start_rate the host starts answering
//            within a second of the flood and stops after it ends, logged;
//            connections made all along, across both switches, succeed.
//   ranges : allow_sources and deny_sources, IPv4 and IPv6, and a reload
//            that narrows the allowed range.
// Each test prints what it measured (MEASURED lines).
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <fstream>
#include <future>
#include <nlohmann/json.hpp>
#include <regex>
#include <sstream>
#include <thread>

#include "tcp_lab.h"
#include "xlb/abi.h"

#if !defined(XLB_FLOOD_PATH)
#error "XLB_FLOOD_PATH must be defined"
#endif

namespace xlb::e2e_tcp {
namespace {

using json = nlohmann::json;

// Short floods: what they show is there within seconds (a flood SYN that got
// through would leave a half-open connection on a backend for a minute), and
// the suite shares CI's time with every other one.
constexpr double kFloodSeconds = 6;
// As tests/conntrack: the rate the LB counts under a flood as fast as
// xlb-flood can send, measured first, and 75% of it, the lab's maximum
// sustainable rate (above it the legitimate connections' own packets lack
// CPU). XLB_FLOOD_RATE=N skips the probe.
constexpr double kProbeSeconds = 1;
constexpr double kRateMargin = 0.75;
const char* const kSpoofedSources = "192.0.2.128/25";

// The bulk VIPs: the web VIP's address, ports of their own, backend b1 only.
constexpr int kBulkCookiePort = 5001;  // syn_cookies: always
constexpr int kBulkPlainPort = 5002;   // syn_cookies: off
constexpr double kBulkSeconds = 0.5;

std::string trim(std::string s) {
    while (!s.empty() && (s.back() == '\n' || s.back() == ' ' || s.back() == '\r')) s.pop_back();
    return s;
}

double seconds_since(Clock::time_point t) {
    return std::chrono::duration<double>(Clock::now() - t).count();
}

bool failed(const std::string& name) { return name.rfind("error", 0) == 0; }

class CookieLab : public Lab {
public:
    std::string config_path() const { return dir() + "/xlbd.yaml"; }
    std::string read_config() const {
        std::ifstream in(config_path());
        std::stringstream ss;
        ss << in.rdbuf();
        return ss.str();
    }
    void write_config(const std::string& text) const { std::ofstream(config_path()) << text; }

    json api_json(const std::string& method, const std::string& path,
                  const std::string& body = "") {
        Reply r = api(method, path, body);
        if (r.status < 200 || r.status >= 300)
            throw std::runtime_error(method + " " + path + ": " + std::to_string(r.status) + " " +
                                     r.body);
        return json::parse(r.body);
    }
    json stats() { return api_json("GET", "/v1/stats"); }
    static json vip_in(const json& doc, const std::string& key) {
        for (const json& v : doc.at("vips"))
            if (v.at("vip") == key) return v;
        throw std::runtime_error("no VIP " + key + " in " + doc.dump());
    }
    json cookies(const std::string& key) { return vip_in(stats(), key).at("syn_cookies"); }

    // A backend's kernel counters (nstat, absolute, its history untouched).
    std::map<std::string, std::uint64_t> nstat(const std::string& role) {
        CmdResult r = run("ip netns exec " + ns(role) + " nstat -asz 2>&1");
        if (r.rc != 0) throw std::runtime_error("nstat in " + ns(role) + ": " + r.out);
        std::map<std::string, std::uint64_t> out;
        std::istringstream lines(r.out);
        for (std::string line; std::getline(lines, line);) {
            std::istringstream words(line);
            std::string name;
            std::uint64_t value = 0;
            if (words >> name >> value && name.front() != '#') out[name] = value;
        }
        return out;
    }
    // Half-open connections in a backend: every SYN that reaches a listener
    // leaves one for about a minute (unless the queue is full: then its
    // SyncookiesSent counts).
    int syn_recv(const std::string& role) {
        CmdResult r = run("ip netns exec " + ns(role) + " ss -Htn state syn-recv 2>&1");
        if (r.rc != 0) throw std::runtime_error("ss in " + ns(role) + ": " + r.out);
        int n = 0;
        std::istringstream lines(r.out);
        for (std::string line; std::getline(lines, line);) n += !trim(line).empty();
        return n;
    }
    std::string router_mac_towards_client() {
        return trim(run("ip netns exec " + router_ns() + " cat /sys/class/net/cl0/address").out);
    }
    pid_t agent_pid() const {
        std::ifstream in(dir() + "/xlbd.pid");
        pid_t pid = -1;
        in >> pid;
        return pid;
    }
    // The agent's metrics (metrics.listen is 127.0.0.1:9464 in the LB's namespace).
    std::string metrics() {
        return run("ip netns exec " + lb_ns() +
                   " curl -sS --max-time 5 http://127.0.0.1:9464/metrics")
            .out;
    }
};

struct FloodReport {
    int rc = -1;
    std::string output;
    json report;  // xlb-flood's JSON line (null when it failed)
};

// The counters of the backends b1..b3 that a SYN reaching them moves.
struct BackendSyns {
    std::uint64_t cookies_sent = 0, overflows = 0, drops = 0, passive_opens = 0;
    int syn_recv = 0;
};

class SynCookies : public ::testing::Test {
protected:
    void SetUp() override {
        if (geteuid() != 0) GTEST_SKIP() << "needs root (network namespaces, BPF)";
    }
    void TearDown() override {
        if (!HasFailure()) return;
        std::string log = lab_.agent_log();
        if (log.size() > 4000) log = log.substr(log.size() - 4000);
        std::printf("---- xlbd log (tail) ----\n%s\n", log.c_str());
    }

    FloodReport flood(double rate, double seconds, int port = 80) {
        const std::string cmd = "ip netns exec " + lab_.client_ns() + " " + XLB_FLOOD_PATH +
                                " --interface eth0 --dst-mac " + mac_ + " --vip " + kVip4 +
                                " --port " + std::to_string(port) + " --mode syn --sources " +
                                kSpoofedSources + " --rate " +
                                std::to_string(static_cast<long>(rate)) + " --duration " +
                                std::to_string(seconds) + " 2>&1";
        CmdResult r = run(cmd);
        FloodReport out{r.rc, r.out, nullptr};
        std::istringstream lines(r.out);
        for (std::string line; std::getline(lines, line);)
            if (!line.empty() && line.front() == '{')
                out.report = json::parse(line, nullptr, false);
        return out;
    }

    // XLB_FLOOD_RATE, or kRateMargin of the SYNs per second the LB counts
    // for the web VIP under a flood as fast as xlb-flood can send.
    double flood_rate() {
        if (const char* v = std::getenv("XLB_FLOOD_RATE"); v && *v) return std::atof(v);
        const auto before = lab_.cookies(vip_key4()).at("syns").get<std::uint64_t>();
        const FloodReport probe = flood(0, kProbeSeconds);
        const auto after = lab_.cookies(vip_key4()).at("syns").get<std::uint64_t>();
        if (probe.rc != 0 || !probe.report.is_object())
            throw std::runtime_error("xlb-flood failed: " + probe.output);
        const double counted =
            static_cast<double>(after - before) / probe.report["duration_s"].get<double>();
        const double rate = std::floor(kRateMargin * counted / 1000) * 1000;
        std::printf(
            "MEASURED probe: xlb-flood sent %.0f/s as fast as it could, the LB counted %.0f "
            "SYNs/s: flooding at %.0f/s\n",
            probe.report["rate"].get<double>(), counted, rate);
        if (rate < 1000) throw std::runtime_error("the lab took under 1,334 flood SYNs/s");
        std::this_thread::sleep_for(1s);  // the probe's last packets
        return rate;
    }

    BackendSyns backend_syns() {
        BackendSyns s;
        for (const char* b : {"b1", "b2", "b3"}) {
            auto c = lab_.nstat(b);
            s.cookies_sent += c["TcpExtSyncookiesSent"];
            // (TCPReqQFullDoCookies: the SYNs SyncookiesSent counts too)
            s.overflows += c["TcpExtListenOverflows"] + c["TcpExtTCPReqQFullDrop"];
            s.drops += c["TcpExtListenDrops"];
            s.passive_opens += c["TcpPassiveOpens"];
            s.syn_recv += lab_.syn_recv(b);
        }
        return s;
    }

    void start(const std::string& cookies, const std::string& config_tail = "") {
        try {
            lab_.up(3, "--syn-cookies " + cookies);
            if (!config_tail.empty()) lab_.write_config(lab_.read_config() + config_tail);
            lab_.agent_start();
        } catch (const std::exception& e) {
            FAIL() << e.what();
        }
        mac_ = lab_.router_mac_towards_client();
        ASSERT_FALSE(mac_.empty());
    }

    CookieLab lab_;
    std::string mac_;
};

// ---- always: the flood never reaches a backend ---------------------------------

TEST_F(SynCookies, AlwaysKeepsTheFloodFromTheBackends) {
    ASSERT_NO_FATAL_FAILURE(start("always"));
    const json mode = lab_.cookies(vip_key4());
    ASSERT_EQ(mode.at("mode"), "always") << mode.dump();

    const double rate = flood_rate();
    // the streams' handshakes go through cookies too
    Streams streams(lab_.client_ns(), kVip4, 20);
    std::this_thread::sleep_for(1s);
    const auto before = streams.snapshot();
    std::map<std::string, int> per_backend;
    for (std::size_t i = 0; i < before.size(); ++i) {
        ASSERT_EQ(before[i].error, "") << "stream " << i;
        per_backend[before[i].backend]++;
    }
    std::printf("20 streams established through cookies: %s\n", format_counts(per_backend).c_str());

    const json c0 = lab_.cookies(vip_key4());
    const BackendSyns b0 = backend_syns();
    auto flooding = std::async(std::launch::async, [&] { return flood(rate, kFloodSeconds); });
    // short connections, paced so that they measure the flood's effect
    // rather than compete with it for the two CPUs
    std::atomic<bool> stop{false};
    int made = 0, failures = 0;
    std::string first_error;
    std::thread legit([&] {
        while (!stop) {
            const auto next = Clock::now() + 10ms;
            // 7 s to connect: a SYN the lab's own overloaded links lose
            // before the LB is sent again after 1 s and 3 s, as by any
            // client; the LB must answer one of them.
            const std::string name = get_backend_name(lab_.client_ns(), kVip4, 80, "", 7000);
            ++made;
            if (failed(name) && failures++ == 0) first_error = name;
            std::this_thread::sleep_until(next);
        }
    });
    const FloodReport fr = flooding.get();
    stop = true;
    legit.join();
    std::this_thread::sleep_for(1s);  // the streams' last echoes
    const auto after = streams.snapshot();
    const json c1 = lab_.cookies(vip_key4());
    const BackendSyns b1 = backend_syns();
    streams.stop();

    ASSERT_EQ(fr.rc, 0) << fr.output;
    ASSERT_TRUE(fr.report.is_object()) << fr.output;
    int broken = 0;
    for (std::size_t i = 0; i < after.size(); ++i) {
        if (after[i].error.empty()) continue;
        ++broken;
        std::printf("stream %zu (on %s): %s\n", i, before[i].backend.c_str(),
                    after[i].error.c_str());
    }
    auto delta = [&](const char* k) {
        return c1.at(k).get<std::uint64_t>() - c0.at(k).get<std::uint64_t>();
    };
    const auto sent = fr.report["packets"].get<std::uint64_t>();
    const std::uint64_t answered = delta("cookies_sent");
    const int succeeded = made - failures;
    std::printf(
        "MEASURED [always] flood: %llu SYNs in %.1f s (%.0f/s, target %.0f/s); the LB answered "
        "%llu SYNs with cookies (%.1f%% of those sent, the connections' own included), %llu "
        "valid cookie ACKs, %llu invalid\n",
        static_cast<unsigned long long>(sent), fr.report["duration_s"].get<double>(),
        fr.report["rate"].get<double>(), rate, static_cast<unsigned long long>(answered),
        sent ? 100.0 * answered / sent : 0.0, static_cast<unsigned long long>(delta("acks_valid")),
        static_cast<unsigned long long>(delta("acks_invalid")));
    std::printf(
        "MEASURED [always] backends during the flood: SyncookiesSent +%llu, listen/SYN-queue "
        "overflows +%llu, ListenDrops +%llu, half-open connections %d (before %d), "
        "TcpPassiveOpens +%llu for %d connections made\n",
        static_cast<unsigned long long>(b1.cookies_sent - b0.cookies_sent),
        static_cast<unsigned long long>(b1.overflows - b0.overflows),
        static_cast<unsigned long long>(b1.drops - b0.drops), b1.syn_recv, b0.syn_recv,
        static_cast<unsigned long long>(b1.passive_opens - b0.passive_opens), made);
    std::printf(
        "MEASURED [always] new connections during the flood: %d of %d succeeded (%.2f%%); 20 "
        "streams: %d broken\n",
        succeeded, made, made ? 100.0 * succeeded / made : 0.0, broken);

    // a flood that mostly never reached the LB would prove nothing
    EXPECT_GE(static_cast<double>(answered), 0.5 * rate * kFloodSeconds)
        << "the LB answered too little of the flood";
    // no flood SYN on any backend
    EXPECT_EQ(b1.syn_recv, 0) << "flood SYNs left half-open connections on the backends";
    EXPECT_EQ(b1.cookies_sent, b0.cookies_sent) << "backends answered SYNs with their own cookies";
    EXPECT_EQ(b1.overflows, b0.overflows);
    EXPECT_EQ(b1.drops, b0.drops);
    // what the backends accepted is the short connections, each through a cookie
    EXPECT_LE(b1.passive_opens - b0.passive_opens, static_cast<std::uint64_t>(made));
    EXPECT_GE(delta("acks_valid"), static_cast<std::uint64_t>(succeeded));
    EXPECT_GE(succeeded, 0.99 * made) << "first failure: " << first_error;
    EXPECT_GT(made, 100);
    EXPECT_EQ(broken, 0);

    // The same flood for a second with the VIP's cookies off: the backends'
    // counters must show it, or their staying flat above meant nothing.
    lab_.api_json("PATCH", "/v1/vip?vip=" + vip_key4(), R"({"syn_cookies": "off"})");
    std::this_thread::sleep_for(500ms);  // published
    const BackendSyns o0 = backend_syns();
    const FloodReport control = flood(rate, 1);
    std::this_thread::sleep_for(500ms);
    const BackendSyns o1 = backend_syns();
    ASSERT_EQ(control.rc, 0) << control.output;
    const std::uint64_t reached = static_cast<std::uint64_t>(o1.syn_recv) +
                                  (o1.cookies_sent - o0.cookies_sent) +
                                  (o1.overflows - o0.overflows) + (o1.drops - o0.drops);
    std::printf(
        "MEASURED [off] a 1 s flood of %llu SYNs with cookies off: backends' half-open "
        "connections %d, SyncookiesSent +%llu, overflows +%llu, ListenDrops +%llu\n",
        static_cast<unsigned long long>(control.report.value("packets", 0ull)), o1.syn_recv,
        static_cast<unsigned long long>(o1.cookies_sent - o0.cookies_sent),
        static_cast<unsigned long long>(o1.overflows - o0.overflows),
        static_cast<unsigned long long>(o1.drops - o0.drops));
    EXPECT_GE(static_cast<double>(reached), 0.25 * rate)
        << "without cookies the backends' counters did not see the flood";
}

// ---- bulk transfers: window scaling through a cookie ---------------------------

// Throughput over one connection, and what each end's TCP_INFO says.
struct Transfer {
    double mbit_s = 0;
    tcp_info client{}, server{};
    std::string error;
};

tcp_info info_of(int fd) {
    tcp_info ti{};
    socklen_t len = sizeof ti;
    getsockopt(fd, IPPROTO_TCP, TCP_INFO, &ti, &len);
    return ti;
}

// The receiving side's count: bytes from the first to EOF, as Mbit/s.
double receive_all(int fd, std::string& error) {
    std::vector<char> buf(1 << 16);
    std::uint64_t bytes = 0;
    std::optional<Clock::time_point> first;
    for (;;) {
        pollfd p{fd, POLLIN, 0};
        if (poll(&p, 1, 5000) != 1) {
            error = "receive: timed out";
            return 0;
        }
        const ssize_t n = recv(fd, buf.data(), buf.size(), 0);
        if (n < 0) {
            error = std::string("recv: ") + std::strerror(errno);
            return 0;
        }
        if (n == 0) break;
        if (!first) first = Clock::now();
        bytes += static_cast<std::uint64_t>(n);
    }
    const double s = first ? seconds_since(*first) : 0;
    return s > 0 ? bytes * 8 / s / 1e6 : 0;
}

void send_for(int fd, double seconds, std::string& error) {
    std::vector<char> buf(1 << 16, 'x');
    const auto end = Clock::now() + std::chrono::duration<double>(seconds);
    while (Clock::now() < end) {
        if (send(fd, buf.data(), buf.size(), MSG_NOSIGNAL) < 0) {
            error = std::string("send: ") + std::strerror(errno);
            return;
        }
    }
    shutdown(fd, SHUT_WR);
}

// A listener in a backend's namespace on every address, a port.
int listen_in(const std::string& ns, int port) {
    return test::in_netns(ns, [&] {
        const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        const int on = 1;
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &on, sizeof on);
        sockaddr_in a{};
        a.sin_family = AF_INET;
        a.sin_port = htons(static_cast<std::uint16_t>(port));
        if (fd < 0 || bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 ||
            listen(fd, 16) != 0)
            throw std::runtime_error("listen on port " + std::to_string(port) + " in " + ns + ": " +
                                     std::strerror(errno));
        return fd;
    });
}

// One connection from the client to VIP:port, accepted on `listener`; 'D'
// the backend sends (download), 'U' the client sends (upload).
Transfer transfer(const std::string& client_ns, int listener, int port, char direction) {
    Transfer t;
    auto served = std::async(std::launch::async, [&]() -> std::string {
        pollfd p{listener, POLLIN, 0};
        if (poll(&p, 1, 5000) != 1) return "accept: nothing came";
        const int fd = accept4(listener, nullptr, nullptr, SOCK_CLOEXEC);
        if (fd < 0) return std::string("accept: ") + std::strerror(errno);
        std::string error;
        char what = 0;
        if (recv(fd, &what, 1, MSG_WAITALL) != 1) error = "no command";
        t.server = info_of(fd);
        if (error.empty() && what == 'D') {
            send_for(fd, kBulkSeconds, error);
            char c;
            while (recv(fd, &c, 1, 0) > 0) {
            }
        } else if (error.empty()) {
            t.mbit_s = receive_all(fd, error);
        }
        close(fd);
        return error;
    });
    std::string error;
    const int fd = connect_in(client_ns, kVip4, port, error);
    if (fd >= 0) {
        t.client = info_of(fd);
        if (send(fd, &direction, 1, MSG_NOSIGNAL) != 1) error = "send the command";
        if (error.empty() && direction == 'D') {
            t.mbit_s = receive_all(fd, error);
        } else if (error.empty()) {
            send_for(fd, kBulkSeconds, error);
            char c;
            while (recv(fd, &c, 1, 0) > 0) {
            }
        }
        close(fd);
    }
    const std::string server_error = served.get();
    t.error = !error.empty() ? error : server_error;
    return t;
}

std::string options_of(const tcp_info& ti) {
    std::string out;
    if (ti.tcpi_options & TCPI_OPT_WSCALE)
        out += "wscale " + std::to_string(ti.tcpi_snd_wscale) + "/" +
               std::to_string(ti.tcpi_rcv_wscale) + " (send/receive)";
    else
        out += "no wscale";
    if (ti.tcpi_options & TCPI_OPT_SACK) out += ", sack";
    if (ti.tcpi_options & TCPI_OPT_TIMESTAMPS) out += ", timestamps";
    out += ", mss " + std::to_string(ti.tcpi_snd_mss);
    return out;
}

const char* kBulkVips = R"(  - name: bulk-cookie
    address: "198.51.100.10"
    port: 5001
    syn_cookies: always
    health_check: {type: none}
    backends:
      - {address: "203.0.113.11", cookie_acks: true}
  - name: bulk-plain
    address: "198.51.100.10"
    port: 5002
    syn_cookies: off
    health_check: {type: none}
    backends:
      - {address: "203.0.113.11", cookie_acks: true}
)";

TEST_F(SynCookies, BulkThroughACookieScalesItsWindow) {
    ASSERT_NO_FATAL_FAILURE(start("always", kBulkVips));
    const std::string cookie_key =
        std::string(kVip4) + ":" + std::to_string(kBulkCookiePort) + "/tcp";
    const std::string plain_key =
        std::string(kVip4) + ":" + std::to_string(kBulkPlainPort) + "/tcp";
    ASSERT_EQ(lab_.cookies(cookie_key).at("mode"), "always");
    ASSERT_EQ(lab_.cookies(plain_key).at("mode"), "off");
    const int cookie_listener = listen_in(lab_.ns("b1"), kBulkCookiePort);
    const int plain_listener = listen_in(lab_.ns("b1"), kBulkPlainPort);

    // three rounds, alternating, the best of each: the machine is shared,
    // and one transfer of the same kind may take half of another's speed
    std::map<std::string, Transfer> best;
    const std::uint64_t valid0 = lab_.cookies(cookie_key).at("acks_valid").get<std::uint64_t>();
    for (int round = 0; round < 3; ++round) {
        for (char direction : {'D', 'U'}) {
            for (bool cookie : {false, true}) {
                const Transfer t =
                    transfer(lab_.client_ns(), cookie ? cookie_listener : plain_listener,
                             cookie ? kBulkCookiePort : kBulkPlainPort, direction);
                const std::string name = std::string(cookie ? "cookie" : "plain") +
                                         (direction == 'D' ? " download" : " upload");
                ASSERT_EQ(t.error, "") << name;
                std::printf("%s round %d: %.0f Mbit/s\n", name.c_str(), round + 1, t.mbit_s);
                if (t.mbit_s >= best[name].mbit_s) best[name] = t;
            }
        }
    }
    close(cookie_listener);
    close(plain_listener);
    const std::uint64_t valid1 = lab_.cookies(cookie_key).at("acks_valid").get<std::uint64_t>();
    const json plain = lab_.cookies(plain_key);

    for (const char* way : {"download", "upload"}) {
        const Transfer& c = best[std::string("cookie ") + way];
        const Transfer& p = best[std::string("plain ") + way];
        std::printf(
            "MEASURED [bulk %s, %.1f s] through a cookie %.0f Mbit/s, without %.0f Mbit/s "
            "(%.0f%%)\n",
            way, kBulkSeconds, c.mbit_s, p.mbit_s, p.mbit_s > 0 ? 100 * c.mbit_s / p.mbit_s : 0.0);
        EXPECT_GE(c.mbit_s, 0.7 * p.mbit_s) << way;
    }
    const Transfer& c = best["cookie download"];
    const Transfer& p = best["plain download"];
    std::printf("MEASURED [bulk] through a cookie: client %s; backend %s\n",
                options_of(c.client).c_str(), options_of(c.server).c_str());
    std::printf("MEASURED [bulk] without: client %s; backend %s\n", options_of(p.client).c_str(),
                options_of(p.server).c_str());
    for (const Transfer* t : {&c, &p}) {
        ASSERT_TRUE(t->client.tcpi_options & TCPI_OPT_WSCALE) << "the client scales no window";
        ASSERT_TRUE(t->server.tcpi_options & TCPI_OPT_WSCALE) << "the backend scales no window";
        // each end scales the other's window as the other does
        EXPECT_EQ(t->client.tcpi_snd_wscale, t->server.tcpi_rcv_wscale);
        EXPECT_EQ(t->client.tcpi_rcv_wscale, t->server.tcpi_snd_wscale);
        EXPECT_EQ(t->client.tcpi_options & (TCPI_OPT_SACK | TCPI_OPT_TIMESTAMPS),
                  t->server.tcpi_options & (TCPI_OPT_SACK | TCPI_OPT_TIMESTAMPS));
    }
    // through the cookie the client was told the scale the LB announced for
    // the backend
    EXPECT_EQ(c.client.tcpi_snd_wscale, XLB_COOKIE_RCV_WSCALE);
    // every cookie connection was balanced through its cookie, none without
    EXPECT_GE(valid1 - valid0, 6u);
    EXPECT_EQ(plain.at("cookies_sent").get<std::uint64_t>(), 0u);
}

// ---- auto: on with the flood, off after it ---------------------------------------

// The time of the first line of xlbd's log containing `text`
// ("2026-12-06T22:41:57.549+00:00 warning: SYN flood started: ...").
std::optional<std::chrono::system_clock::time_point> logged_at(const std::string& log,
                                                               const std::string& text) {
    const auto at = log.find(text);
    if (at == std::string::npos) return std::nullopt;
    const auto line = log.rfind('\n', at) == std::string::npos ? 0 : log.rfind('\n', at) + 1;
    std::tm tm{};
    int ms = 0, off_h = 0, off_m = 0;
    char sign = '+';
    if (std::sscanf(log.c_str() + line, "%d-%d-%dT%d:%d:%d.%d%c%d:%d", &tm.tm_year, &tm.tm_mon,
                    &tm.tm_mday, &tm.tm_hour, &tm.tm_min, &tm.tm_sec, &ms, &sign, &off_h,
                    &off_m) != 10)
        return std::nullopt;
    tm.tm_year -= 1900;
    tm.tm_mon -= 1;
    const int offset = (sign == '-' ? -1 : 1) * (off_h * 3600 + off_m * 60);
    return std::chrono::system_clock::from_time_t(timegm(&tm) - offset) +
           std::chrono::milliseconds(ms);
}

TEST_F(SynCookies, AutoAnswersOnlyDuringTheFlood) {
    // far below the lab's rate, far above the test's own connections
    constexpr int kStartRate = 5000, kEndRate = 2500;
    constexpr double kFloodRate = 20000, kAutoFloodSeconds = 2.5;
    ASSERT_NO_FATAL_FAILURE(start("auto", "syn_flood: {start_rate: " + std::to_string(kStartRate) +
                                              ", end_rate: " + std::to_string(kEndRate) +
                                              ", end_after: 1s}\n"));
    const json s0 = lab_.stats();
    ASSERT_EQ(s0.at("syn_flood").at("state"), "calm") << s0.at("syn_flood").dump();
    ASSERT_EQ(CookieLab::vip_in(s0, vip_key4()).at("syn_cookies").at("state"), "auto idle");
    // calm: a connection's SYN goes to the backend
    ASSERT_FALSE(failed(get_backend_name(lab_.client_ns(), kVip4)));
    ASSERT_EQ(lab_.cookies(vip_key4()).at("cookies_sent").get<std::uint64_t>(), 0u);
    // The detector learns which VIPs have cookies once a second, the first
    // time when xlbd starts, before it publishes them: a flood in the first
    // second after the start is seen only at the next look (about 1 s).
    std::this_thread::sleep_for(1500ms);

    // the flood state as the API shows it, every 50 ms; each sample's time
    // is when its answer came
    struct Sample {
        double at;  // seconds since the flood started
        std::string state;
        std::uint64_t syns = 0;  // the web VIP's
    };
    std::vector<Sample> samples;
    std::atomic<bool> stop{false};
    const auto t0 = Clock::now();
    const auto wall0 = std::chrono::system_clock::now();
    std::thread watch([&] {
        while (!stop) {
            const auto next = Clock::now() + 50ms;
            Sample sample;
            try {
                const json st = lab_.stats();
                sample.state = st.at("syn_flood").at("state").get<std::string>();
                sample.syns = CookieLab::vip_in(st, vip_key4())
                                  .at("syn_cookies")
                                  .at("syns")
                                  .get<std::uint64_t>();
            } catch (const std::exception& e) {
                sample.state = std::string("error: ") + e.what();
            }
            sample.at = seconds_since(t0);
            samples.push_back(sample);
            std::this_thread::sleep_until(next);
        }
    });
    // connections all along: through cookies while answering, to the
    // backends before and after, and across both switches (a cookie sent
    // just before the end must still be taken)
    int made = 0, failures = 0;
    std::string first_error;
    std::thread legit([&] {
        while (!stop) {
            const auto next = Clock::now() + 20ms;
            // 7 s to connect: a SYN the lab's own overloaded links lose
            // before the LB is sent again after 1 s and 3 s, as by any
            // client; the LB must answer one of them.
            const std::string name = get_backend_name(lab_.client_ns(), kVip4, 80, "", 7000);
            ++made;
            if (failed(name) && failures++ == 0) first_error = name;
            std::this_thread::sleep_until(next);
        }
    });
    const FloodReport fr = flood(kFloodRate, kAutoFloodSeconds);
    const double flood_end = seconds_since(t0);
    const json during = lab_.cookies(vip_key4());
    std::this_thread::sleep_for(3s);
    stop = true;
    watch.join();
    legit.join();
    ASSERT_EQ(fr.rc, 0) << fr.output;
    std::printf(
        "MEASURED [auto] connections before, during and after the flood: %d of %d succeeded\n",
        made - failures, made);
    EXPECT_GE(made - failures, 0.99 * made) << "first failure: " << first_error;

    std::optional<double> on, off, first_syns;
    bool left_early = false;
    for (const Sample& s : samples) {
        // the first sample with SYNs counted: xlb-flood takes a while to start
        if (!first_syns && !samples.empty() && s.syns > samples.front().syns) first_syns = s.at;
        if (!on && s.state == "answering") on = s.at;
        if (on && !off && s.state != "answering") {
            if (s.at < flood_end) left_early = true;
            off = s.at;
        }
    }
    // the log's times (milliseconds) of the start and the end
    const std::string log = lab_.agent_log();
    const auto logged_on = logged_at(log, "SYN flood started");
    const auto logged_off = logged_at(log, "SYN flood ended");
    auto since_wall0 = [&](std::chrono::system_clock::time_point t) {
        return std::chrono::duration<double>(t - wall0).count();
    };
    std::printf(
        "MEASURED [auto] flood at %.0f/s for %.1f s (start_rate %d/s per CPU, end_after 1s): "
        "logged answering %.2f s after it started, off %.2f s after it ended; the API said "
        "answering %.2f s after the start, off %.2f s after the end; the LB counted the first "
        "flood SYNs %.2f s after the start; %llu cookies sent\n",
        fr.report.value("rate", 0.0), flood_end, kStartRate,
        logged_on ? since_wall0(*logged_on) : -1.0,
        logged_off ? since_wall0(*logged_off) - flood_end : -1.0, on.value_or(-1),
        off ? *off - flood_end : -1.0, first_syns.value_or(-1),
        static_cast<unsigned long long>(during.at("cookies_sent").get<std::uint64_t>()));
    ASSERT_TRUE(logged_on) << "the start was not logged";
    ASSERT_TRUE(logged_off) << "the end was not logged";
    EXPECT_LE(since_wall0(*logged_on), 1.0) << "answering too late";
    // end_after is 1 s: not at once, and within the detector's 100 ms samples after it
    EXPECT_GE(since_wall0(*logged_off) - flood_end, 0.5);
    EXPECT_LE(since_wall0(*logged_off) - flood_end, 2.0);
    // what the API showed: answering from about the start until after the end
    ASSERT_TRUE(on) << "the API never said answering";
    EXPECT_LE(*on, 1.5) << "the API said answering late";
    ASSERT_TRUE(off) << "the API said answering 3 s after the flood";
    EXPECT_FALSE(left_early) << "stopped answering while the flood went on";
    EXPECT_LE(*off - flood_end, 2.5);
    // while answering, the LB did answer the flood
    EXPECT_GE(during.at("cookies_sent").get<std::uint64_t>(),
              0.5 * kFloodRate * (flood_end - since_wall0(*logged_on)));
    // after the flood a SYN goes to the backend again
    const auto sent = lab_.cookies(vip_key4()).at("cookies_sent").get<std::uint64_t>();
    EXPECT_FALSE(failed(get_backend_name(lab_.client_ns(), kVip4)));
    EXPECT_EQ(lab_.cookies(vip_key4()).at("cookies_sent").get<std::uint64_t>(), sent);
}

// ---- source ranges --------------------------------------------------------------

// The web VIPs' source lists, as lab.sh writes the VIPs.
std::string with_sources(std::string config, const std::string& allow4) {
    auto add = [&](const std::string& address, const std::string& lists) {
        const std::string at = "    address: \"" + address + "\"\n    port: 80\n";
        const auto pos = config.find(at);
        if (pos == std::string::npos)
            throw std::runtime_error("no VIP " + address + " in the config");
        config.insert(pos + at.size(), lists);
    };
    add(kVip4, "    allow_sources: [" + allow4 + "]\n    deny_sources: [192.0.2.12/32]\n");
    add(kVip6,
        "    allow_sources: [\"2001:db8:c::/120\"]\n    deny_sources: [\"2001:db8:c::12/128\"]\n");
    return config;
}

std::uint64_t source_denied(const std::string& metrics, const std::string& vip) {
    std::istringstream lines(metrics);
    for (std::string line; std::getline(lines, line);) {
        if (line.rfind("xlb_vip_drops_total{", 0) != 0) continue;
        if (line.find("vip=\"" + vip + "\"") == std::string::npos ||
            line.find("reason=\"source_denied\"") == std::string::npos)
            continue;
        return std::stoull(line.substr(line.rfind(' ') + 1));
    }
    throw std::runtime_error("no xlb_vip_drops_total for " + vip + " source_denied");
}

std::size_t count_of(const std::string& text, const std::string& needle) {
    std::size_t n = 0;
    for (auto pos = text.find(needle); pos != std::string::npos; pos = text.find(needle, pos + 1))
        ++n;
    return n;
}

TEST_F(SynCookies, SourceRangesAllowDenyAndNarrowOnReload) {
    std::string base;  // the config as lab.sh wrote it
    try {
        lab_.up(3);
        base = lab_.read_config();
        lab_.write_config(with_sources(base, "192.0.2.0/27"));
        lab_.agent_start();
        // more clients: addresses of the client's namespace, none in the flood's range
        for (const char* a : {"192.0.2.11/24", "192.0.2.12/24", "192.0.2.40/24"})
            test::run_command_ok("ip -n " + lab_.client_ns() + " addr add " + a + " dev eth0");
        for (const char* a : {"2001:db8:c::11/64", "2001:db8:c::12/64"})
            test::run_command_ok("ip -n " + lab_.client_ns() + " addr add " + a +
                                 " dev eth0 nodad");
    } catch (const std::exception& e) {
        FAIL() << e.what();
    }
    // every source at once: a refused one costs the connect timeout (3 s)
    auto attempt = [&](const std::vector<std::pair<std::string, std::string>>& tries) {
        std::vector<std::future<std::string>> all;
        for (const auto& [vip, source] : tries)
            all.push_back(std::async(std::launch::async, [&, vip, source] {
                return get_backend_name(lab_.client_ns(), vip, 80, source);
            }));
        std::map<std::string, std::string> out;
        for (std::size_t i = 0; i < tries.size(); ++i) out[tries[i].second] = all[i].get();
        return out;
    };
    const std::uint64_t denied0 = source_denied(lab_.metrics(), vip_key4());
    const std::uint64_t denied6_0 = source_denied(lab_.metrics(), vip_key6());
    auto first = attempt({{kVip4, "192.0.2.10"},
                          {kVip4, "192.0.2.11"},
                          {kVip4, "192.0.2.12"},
                          {kVip4, "192.0.2.40"},
                          {kVip6, "2001:db8:c::10"},
                          {kVip6, "2001:db8:c::11"},
                          {kVip6, "2001:db8:c::12"}});
    for (const auto& [source, result] : first)
        std::printf("from %s: %s\n", source.c_str(), result.c_str());
    EXPECT_FALSE(failed(first["192.0.2.10"])) << "allowed";
    EXPECT_FALSE(failed(first["192.0.2.11"])) << "allowed";
    EXPECT_TRUE(failed(first["192.0.2.12"])) << "denied by deny_sources inside allow_sources";
    EXPECT_TRUE(failed(first["192.0.2.40"])) << "outside allow_sources";
    EXPECT_FALSE(failed(first["2001:db8:c::10"])) << "allowed";
    EXPECT_FALSE(failed(first["2001:db8:c::11"])) << "allowed";
    EXPECT_TRUE(failed(first["2001:db8:c::12"])) << "denied";
    const std::uint64_t denied1 = source_denied(lab_.metrics(), vip_key4());
    const std::uint64_t denied6_1 = source_denied(lab_.metrics(), vip_key6());
    std::printf("MEASURED [ranges] source_denied drops: IPv4 +%llu, IPv6 +%llu\n",
                static_cast<unsigned long long>(denied1 - denied0),
                static_cast<unsigned long long>(denied6_1 - denied6_0));
    // the two refused IPv4 clients' SYNs, retransmitted within the 3 s
    EXPECT_GE(denied1 - denied0, 2u);
    EXPECT_GE(denied6_1 - denied6_0, 1u);

    // streams from two allowed clients; a reload narrows the range to one
    Streams kept(lab_.client_ns(), kVip4, 2, "192.0.2.10");
    Streams cut(lab_.client_ns(), kVip4, 2, "192.0.2.11");
    std::this_thread::sleep_for(500ms);
    for (auto* s : {&kept, &cut})
        for (const auto& c : s->snapshot()) ASSERT_EQ(c.error, "") << "before the reload";
    const auto applied_before = count_of(lab_.agent_log(), "SIGHUP reload by");
    lab_.write_config(with_sources(base, "192.0.2.10/32"));
    ASSERT_EQ(::kill(lab_.agent_pid(), SIGHUP), 0);
    const auto sent = Clock::now();
    while (count_of(lab_.agent_log(), "SIGHUP reload by") == applied_before &&
           seconds_since(sent) < 10)
        std::this_thread::sleep_for(50ms);
    ASSERT_GT(count_of(lab_.agent_log(), "SIGHUP reload by"), applied_before) << "no reload";
    ASSERT_EQ(count_of(lab_.agent_log(), "result: error"), 0u) << "the reload failed";
    std::printf("MEASURED [ranges] SIGHUP to reload applied: %.2f s\n", seconds_since(sent));
    // A stream stopped by the narrower range times out (2 s) at its next
    // echo; Streams waits for one connection's echo at a time, so the second
    // one's wait starts when the first's ends.
    auto all_cut = [&] {
        for (const auto& c : cut.snapshot())
            if (c.error.empty()) return false;
        return true;
    };
    const auto reloaded = Clock::now();
    while (!all_cut() && seconds_since(reloaded) < 8) std::this_thread::sleep_for(100ms);
    const double stopped_after = seconds_since(reloaded);
    const auto k = kept.snapshot(), c = cut.snapshot();
    std::printf(
        "MEASURED [ranges] streams of the client no longer allowed: all timed out %.1f s after "
        "the reload (2 s each, one after the other)\n",
        stopped_after);
    for (std::size_t i = 0; i < k.size(); ++i)
        EXPECT_EQ(k[i].error, "") << "allowed stream " << i << " (" << k[i].echoes << " echoes)";
    for (std::size_t i = 0; i < c.size(); ++i) {
        EXPECT_NE(c[i].error, "") << "stream " << i << " of a client no longer allowed";
        std::printf("stream %zu from 192.0.2.11: %s\n", i, c[i].error.c_str());
    }
    kept.stop();
    cut.stop();
    auto second = attempt({{kVip4, "192.0.2.10"}, {kVip4, "192.0.2.11"}});
    EXPECT_FALSE(failed(second["192.0.2.10"])) << second["192.0.2.10"];
    EXPECT_TRUE(failed(second["192.0.2.11"])) << "still allowed after the reload";
}

}  // namespace
}  // namespace xlb::e2e_tcp
