// SPDX-License-Identifier: Apache-2.0
// xlb-bench-health: the probe engine at scale. 10,000 backends answered by one
// small server, probed every second. Cases (JSON "name"): tcp; tcp_shared_10_vips
// (the same 10,000 backends checked alike by 10 VIPs: 100,000 (VIP, backend)
// pairs served by 10,000 probes a second, shared probes); http (connections
// kept between probes, the default); http_no_reuse (one connection per probe,
// "Connection: close"). Measured over
// a window after a warm-up: CPU of the engine's thread (user and system, and
// of the whole probing process), scheduling lateness (start of a probe minus
// the time it was due), probe latency, RSS.
//
// Where. In the current network namespace, on its loopback: backends are
// 127.1.x.y, which every Linux host routes to lo with no set-up and no
// privilege. The bench creates no namespace (only scripts/lab.sh and the
// tests' helper do). Its server listens on 0.0.0.0 (the one address that
// accepts every 127.1.x.y) but bound to the device lo, so that nothing off
// this host can reach it for the few seconds it runs.
//
// What the CPU figures include. On loopback the kernel runs both ends of
// every connection in the context of the thread that sends: the server's
// half of each handshake, request and reset is charged to the probing thread
// too (this kernel has no IRQ time accounting). In production receive
// processing runs in the NIC's softirq, so the figures here are an upper
// bound of what the agent's engine costs.
//
// Processes. The server is a forked process, and each case runs in a forked
// process of its own, so that the case's CPU and RSS figures are the probing
// alone, with a fresh heap.
//
// Floor. Before and after each case's window the same system calls are run
// one probe at a time in a tight loop against the same server for 2 s
// ("floor_before_us", "floor_after_us", their mean "floor_us_per_probe": the
// kernel's and libc's cost of a probe made the plain way on this machine,
// both ends included on loopback), to compare with the engine's CPU per
// probe ("engine_to_floor"). tcp: socket, SO_LINGER 0, connect, poll, close;
// http: the same with the request and response; http with reuse: a request
// and its response on an open connection.
//
// Ports. At 10,000 probes a second a client that closed first would leave
// 600,000 sockets in TIME_WAIT per minute. The engine does not: tcp probes
// are closed with a reset (SO_LINGER 0); http probes keep their connection,
// or without reuse read the response to the end, so that the server
// (Connection: close) closes first and holds the TIME_WAIT. The figure
// "time_wait" (from /proc/net/sockstat: the sockets of the current namespace,
// the server's and the host's other programs' too) shows where they are:
// about none for tcp and http, the server's for http_no_reuse (which runs
// last: its minute of TIME_WAIT would slow the cases after it).
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <future>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "xlb/health/engine.h"
#include "xlb/health/http.h"

namespace {

using namespace std::chrono_literals;
using xlb::health::Clock;
using xlb::health::ProbeEngine;
using xlb::health::ProbeResult;
using xlb::health::ProbeTarget;
using xlb::health::TimePoint;

// --- Environment -------------------------------------------------------------------------

void raise_fd_limit() {
    rlimit rl{};
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
        rl.rlim_cur = rl.rlim_max;
        setrlimit(RLIMIT_NOFILE, &rl);
    }
}

long proc_status_kib(const char* field) {
    std::ifstream in("/proc/self/status");
    std::string line;
    const std::string want = std::string(field) + ":";
    while (std::getline(in, line)) {
        if (line.rfind(want, 0) == 0) return std::strtol(line.c_str() + want.size(), nullptr, 10);
    }
    return -1;
}

long sockstat_time_wait() {
    std::ifstream in("/proc/net/sockstat");
    std::string line;
    while (std::getline(in, line)) {
        if (line.rfind("TCP:", 0) != 0) continue;
        std::istringstream words(line);
        std::string w;
        while (words >> w) {
            if (w == "tw") {
                long n = -1;
                words >> n;
                return n;
            }
        }
    }
    return -1;
}

double seconds_of(const timeval& tv) {
    return static_cast<double>(tv.tv_sec) + static_cast<double>(tv.tv_usec) / 1e6;
}

double cpu_seconds(const rusage& ru) { return seconds_of(ru.ru_utime) + seconds_of(ru.ru_stime); }

// --- The server --------------------------------------------------------------------------------

// One epoll loop: accepts everything; a connection that sends a request head
// gets a small 200, and is closed if the request said "Connection: close"
// (kept open for the next request otherwise, as HTTP/1.1 servers do); one
// that is reset or closed (a tcp probe) is closed.
[[noreturn]] void serve(int listen_fd) {
    ::signal(SIGTERM, SIG_DFL);
    const int ep = ::epoll_create1(EPOLL_CLOEXEC);
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.fd = listen_fd;
    ::epoll_ctl(ep, EPOLL_CTL_ADD, listen_fd, &ev);
    static constexpr char kResponse[] =
        "HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nOK";
    static constexpr char kKeepAliveResponse[] = "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nOK";
    std::vector<epoll_event> events(1024);
    char buf[4096];
    for (;;) {
        const int n = ::epoll_wait(ep, events.data(), static_cast<int>(events.size()), -1);
        for (int i = 0; i < n; ++i) {
            const int fd = events[static_cast<std::size_t>(i)].data.fd;
            if (fd == listen_fd) {
                for (;;) {
                    const int c =
                        ::accept4(listen_fd, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
                    if (c < 0) break;
                    epoll_event cev{};
                    cev.events = EPOLLIN | EPOLLRDHUP;
                    cev.data.fd = c;
                    ::epoll_ctl(ep, EPOLL_CTL_ADD, c, &cev);
                }
                continue;
            }
            const ssize_t r = ::recv(fd, buf, sizeof(buf), 0);
            if (r > 0) {
                const std::string_view head(buf, static_cast<std::size_t>(r));
                if (head.find("\r\n\r\n") == std::string_view::npos) {
                    continue;  // the rest of the head follows (not seen in practice)
                }
                if (head.find("\r\nConnection: close\r\n") == std::string_view::npos) {
                    [[maybe_unused]] auto w = ::send(fd, kKeepAliveResponse,
                                                     sizeof(kKeepAliveResponse) - 1, MSG_NOSIGNAL);
                    continue;
                }
                [[maybe_unused]] auto w =
                    ::send(fd, kResponse, sizeof(kResponse) - 1, MSG_NOSIGNAL);
            } else if (r < 0 && errno == EAGAIN) {
                continue;
            }
            ::close(fd);
        }
    }
}

// 0.0.0.0 on an ephemeral port, bound to lo: every 127.1.x.y reaches it,
// nothing from another host does (Linux >= 5.7 lets anyone bind a socket to
// a device it is not bound to yet).
int listen_on_loopback() {
    const int lfd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    sockaddr_in sa{};
    sa.sin_family = AF_INET;
    sa.sin_addr.s_addr = htonl(INADDR_ANY);
    static constexpr char kLoopback[] = "lo";
    if (::setsockopt(lfd, SOL_SOCKET, SO_BINDTODEVICE, kLoopback, sizeof(kLoopback)) != 0 ||
        ::bind(lfd, reinterpret_cast<sockaddr*>(&sa), sizeof(sa)) != 0 ||
        ::listen(lfd, 4096) != 0) {
        std::perror("server socket on lo");
        std::exit(1);
    }
    return lfd;
}

std::uint16_t port_of(int fd) {
    sockaddr_in sa{};
    socklen_t len = sizeof(sa);
    ::getsockname(fd, reinterpret_cast<sockaddr*>(&sa), &len);
    return ntohs(sa.sin_port);
}

// Backend i: 127.1.x.y with x = i / 250, y = 1 + i % 250.
xlb::net::IpAddress backend_address(int i) {
    return xlb::net::IpAddress::v4(127, 1, static_cast<std::uint8_t>(i / 250),
                                   static_cast<std::uint8_t>(1 + i % 250));
}

struct Server {
    pid_t pid = -1;
    std::uint16_t port = 0;
};

Server loopback_server() {
    Server s;
    const int lfd = listen_on_loopback();
    s.port = port_of(lfd);
    s.pid = ::fork();
    if (s.pid == 0) serve(lfd);
    ::close(lfd);
    return s;
}

// --- A case ----------------------------------------------------------------------------------

// What a case probes: `vips` VIPs checking the same backends alike (one
// probe each round serves them all: shared probes), over a fresh connection
// per probe or a kept one (http reuse).
struct CaseSpec {
    std::string name;
    xlb::config::HealthCheckType type = xlb::config::HealthCheckType::kTcp;
    bool reuse = true;  // http only
    int vips = 1;
};

const std::vector<CaseSpec>& all_cases() {
    using xlb::config::HealthCheckType;
    static const std::vector<CaseSpec> cases{
        {"tcp", HealthCheckType::kTcp, false, 1},
        {"tcp_shared_10_vips", HealthCheckType::kTcp, false, 10},
        {"http", HealthCheckType::kHttp, true, 1},
        // Last: the server keeps a TIME_WAIT per probe for a minute, which
        // would slow the cases after it (ports, lookups).
        {"http_no_reuse", HealthCheckType::kHttp, false, 1},
    };
    return cases;
}

struct Case {
    std::string name;
    std::string type;
    int vips = 1;
    std::uint64_t pairs = 0;    // (VIP, backend) targets
    std::uint64_t results = 0;  // results delivered (one per pair a probe serves)
    int backends = 0;
    double interval_s = 0;
    double seconds = 0;
    std::uint64_t probes = 0;
    std::uint64_t failures = 0;
    std::string first_failure;
    double cpu_percent = 0;          // the engine's thread
    double cpu_user_percent = 0;     // ... in user space
    double cpu_sys_percent = 0;      // ... in the kernel
    double process_cpu_percent = 0;  // the whole probing process
    double lateness_p50_ms = 0, lateness_p99_ms = 0, lateness_max_ms = 0;
    double latency_p50_ms = 0, latency_p99_ms = 0;
    double rss_mib = 0, peak_rss_mib = 0;
    long time_wait = -1;
    double engine_us_per_probe = 0;  // the engine thread's CPU per probe
    double floor_us_per_probe = 0;   // the same system calls in a tight loop: the mean of
    double floor_before_us = 0;      // ... before the engine's window
    double floor_after_us = 0;       // ... and after it
};

double thread_cpu_us() {
    timespec ts{};
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return static_cast<double>(ts.tv_sec) * 1e6 + static_cast<double>(ts.tv_nsec) / 1e3;
}

// One probe after the other, blocking on poll(), for `seconds`: CPU per probe.
// With reuse, one kept connection per backend (opened before the clock
// starts): a request and its response, as a reused http probe makes them.
double floor_us_per_probe(xlb::config::HealthCheckType type, bool reuse, int backends,
                          std::uint16_t port, std::chrono::seconds seconds) {
    const bool http = type == xlb::config::HealthCheckType::kHttp;
    xlb::config::HealthCheck check;
    check.type = type;
    check.path = "/healthz";
    check.reuse_connection = reuse;
    char buf[4096];
    if (http && reuse) {
        const int kept = std::min(backends, 1000);
        std::vector<int> fds;
        std::vector<std::string> requests;
        for (int i = 0; i < kept; ++i) {
            const auto address = backend_address(i);
            sockaddr_in sa{};
            sa.sin_family = AF_INET;
            sa.sin_port = htons(port);
            std::memcpy(&sa.sin_addr, address.bytes.data(), 4);
            const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
            if (::connect(fd, reinterpret_cast<sockaddr*>(&sa), sizeof(sa)) != 0) {
                std::perror("floor: connect");
                std::exit(1);
            }
            ::fcntl(fd, F_SETFL, O_NONBLOCK);
            fds.push_back(fd);
            requests.push_back(xlb::health::http_request(check, address, port));
        }
        const auto end = Clock::now() + seconds;
        const double cpu0 = thread_cpu_us();
        long n = 0;
        for (int i = 0; Clock::now() < end; i = (i + 1) % kept, ++n) {
            const int fd = fds[static_cast<std::size_t>(i)];
            const std::string& request = requests[static_cast<std::size_t>(i)];
            [[maybe_unused]] auto w = ::send(fd, request.data(), request.size(), MSG_NOSIGNAL);
            pollfd p{fd, POLLIN, 0};
            if (::poll(&p, 1, 1000) <= 0) break;
            [[maybe_unused]] auto r = ::recv(fd, buf, sizeof(buf), 0);
        }
        const double us = n > 0 ? (thread_cpu_us() - cpu0) / static_cast<double>(n) : 0;
        const linger lg{1, 0};
        for (const int fd : fds) {
            ::setsockopt(fd, SOL_SOCKET, SO_LINGER, &lg, sizeof(lg));
            ::close(fd);
        }
        return us;
    }
    const auto end = Clock::now() + seconds;
    const double cpu0 = thread_cpu_us();
    long n = 0;
    for (int i = 0; Clock::now() < end; i = (i + 1) % backends, ++n) {
        const auto address = backend_address(i);
        sockaddr_in sa{};
        sa.sin_family = AF_INET;
        sa.sin_port = htons(port);
        std::memcpy(&sa.sin_addr, address.bytes.data(), 4);
        const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
        if (!http) {
            const linger lg{1, 0};
            ::setsockopt(fd, SOL_SOCKET, SO_LINGER, &lg, sizeof(lg));
        }
        ::connect(fd, reinterpret_cast<sockaddr*>(&sa), sizeof(sa));
        pollfd p{fd, POLLOUT, 0};
        ::poll(&p, 1, 1000);
        if (http) {
            const std::string request = xlb::health::http_request(check, address, port);
            [[maybe_unused]] auto w = ::send(fd, request.data(), request.size(), MSG_NOSIGNAL);
            for (;;) {
                p = pollfd{fd, POLLIN, 0};
                if (::poll(&p, 1, 1000) <= 0) break;
                const ssize_t r = ::recv(fd, buf, sizeof(buf), 0);
                if (r <= 0 && !(r < 0 && errno == EAGAIN)) break;
            }
        }
        ::close(fd);
    }
    return n > 0 ? (thread_cpu_us() - cpu0) / static_cast<double>(n) : 0;
}

// The engine thread's own rusage, read on that thread.
rusage engine_rusage(ProbeEngine& engine) {
    std::promise<rusage> promise;
    auto future = promise.get_future();
    engine.call_at(Clock::now(), [&promise] {
        rusage ru{};
        getrusage(RUSAGE_THREAD, &ru);
        promise.set_value(ru);
    });
    return future.get();
}

double percentile(std::vector<double>& v, double p) {
    if (v.empty()) return 0;
    const auto k = static_cast<std::size_t>(p * static_cast<double>(v.size() - 1));
    std::nth_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(k), v.end());
    return v[k];
}

// The counters a case's figures are differences of, read together at the
// start and at the end of the measured window.
struct Snapshot {
    TimePoint at;
    std::chrono::nanoseconds engine_cpu;
    rusage thread;
    rusage process;
    std::uint64_t failures;
    std::uint64_t started;  // probes (a shared one once)
    std::uint64_t results;
};

Snapshot snapshot(ProbeEngine& engine, const std::atomic<std::uint64_t>& failures,
                  const std::atomic<std::uint64_t>& results) {
    Snapshot s{.at = Clock::now(),
               .engine_cpu = engine.cpu_time(),
               .thread = engine_rusage(engine),
               .process = {},
               .failures = 0,
               .started = engine.stats().probes_started,
               .results = 0};
    getrusage(RUSAGE_SELF, &s.process);
    s.failures = failures.load();
    s.results = results.load();
    return s;
}

Case run_case(const CaseSpec& spec, int backends, std::chrono::milliseconds interval,
              std::chrono::milliseconds timeout, std::chrono::milliseconds jitter,
              std::chrono::seconds warmup, std::chrono::seconds duration, std::uint16_t port,
              ProbeEngine::Options options) {
    const auto type = spec.type;
    // The floor before and after the engine's window: this host's speed
    // drifts by tens of percent over a minute, and their mean is what the
    // window is compared with.
    const double floor_before = floor_us_per_probe(type, spec.reuse, backends, port, 2s);
    std::vector<ProbeTarget> targets;
    targets.reserve(static_cast<std::size_t>(backends) * static_cast<std::size_t>(spec.vips));
    for (int v = 0; v < spec.vips; ++v) {
        for (int i = 0; i < backends; ++i) {
            ProbeTarget t;
            t.key.vip = "bench-" + std::to_string(v);
            t.key.backend = backend_address(i);
            t.port = port;
            t.check.type = type;
            t.check.path = "/healthz";
            t.check.interval = interval;
            t.check.timeout = timeout;
            t.check.jitter = jitter;
            t.check.reuse_connection = spec.reuse;
            // Each VIP judges with its own thresholds: the probe is still shared.
            t.check.unhealthy_threshold = 2 + static_cast<std::uint32_t>(v);
            targets.push_back(std::move(t));
        }
    }
    const std::uint64_t pairs = targets.size();

    struct Sample {
        TimePoint scheduled;
        float lateness_ms;
        float latency_ms;
    };
    std::vector<Sample> samples;
    const auto total = warmup + duration + 2s;
    samples.reserve(static_cast<std::size_t>(
        static_cast<double>(backends) * (std::chrono::duration<double>(total) / interval) * 1.2));
    std::atomic<std::uint64_t> failures{0}, results{0};
    std::string first_failure;
    // A shared probe's result reaches every VIP it serves; its timing is
    // sampled once (the first VIP's).
    const std::string sampled_vip = "bench-0";
    ProbeEngine engine(options, [&](const ProbeResult& r) {
        results.fetch_add(r.targets().size(), std::memory_order_relaxed);
        if (!r.ok() && failures++ == 0) first_failure = r.detail;
        if (r.key.vip == sampled_vip && samples.size() < samples.capacity()) {
            samples.push_back(
                Sample{r.scheduled, std::chrono::duration<float, std::milli>(r.lateness()).count(),
                       std::chrono::duration<float, std::milli>(r.latency()).count()});
        }
    });
    engine.set_targets(std::move(targets));
    if (auto started = engine.start(); !started) {
        std::fprintf(stderr, "engine: %s\n", started.error().message().c_str());
        std::exit(1);
    }
    std::this_thread::sleep_for(warmup);
    const Snapshot first = snapshot(engine, failures, results);
    std::this_thread::sleep_for(duration);
    const Snapshot last = snapshot(engine, failures, results);
    const TimePoint from = first.at, to = last.at;
    Case c;
    c.rss_mib = static_cast<double>(proc_status_kib("VmRSS")) / 1024.0;
    c.peak_rss_mib = static_cast<double>(proc_status_kib("VmHWM")) / 1024.0;
    c.time_wait = sockstat_time_wait();
    engine.stop();
    const double floor_after = floor_us_per_probe(type, spec.reuse, backends, port, 2s);
    const double floor = (floor_before + floor_after) / 2;

    const double wall = std::chrono::duration<double>(to - from).count();
    c.name = spec.name;
    c.type = type == xlb::config::HealthCheckType::kTcp ? "tcp" : "http";
    c.vips = spec.vips;
    c.pairs = pairs;
    c.results = last.results - first.results;
    c.backends = backends;
    c.interval_s = std::chrono::duration<double>(interval).count();
    c.seconds = wall;
    const double engine_cpu =
        std::chrono::duration<double>(last.engine_cpu - first.engine_cpu).count();
    c.cpu_percent = 100.0 * engine_cpu / wall;
    c.cpu_user_percent =
        100.0 * (seconds_of(last.thread.ru_utime) - seconds_of(first.thread.ru_utime)) / wall;
    c.cpu_sys_percent =
        100.0 * (seconds_of(last.thread.ru_stime) - seconds_of(first.thread.ru_stime)) / wall;
    c.process_cpu_percent = 100.0 * (cpu_seconds(last.process) - cpu_seconds(first.process)) / wall;
    c.failures = last.failures - first.failures;
    c.first_failure = first_failure;
    std::vector<double> lateness, latency;
    for (const Sample& s : samples) {
        if (s.scheduled < from || s.scheduled >= to) continue;
        lateness.push_back(s.lateness_ms);
        latency.push_back(s.latency_ms);
    }
    // Probes made in the window (a shared probe once), from the engine's
    // counter: the samples are of one VIP's results.
    c.probes = last.started - first.started;
    c.floor_us_per_probe = floor;
    c.floor_before_us = floor_before;
    c.floor_after_us = floor_after;
    c.engine_us_per_probe = c.probes ? 1e6 * engine_cpu / static_cast<double>(c.probes) : 0;
    c.lateness_max_ms = lateness.empty() ? 0 : *std::max_element(lateness.begin(), lateness.end());
    c.lateness_p50_ms = percentile(lateness, 0.50);
    c.lateness_p99_ms = percentile(lateness, 0.99);
    c.latency_p50_ms = percentile(latency, 0.50);
    c.latency_p99_ms = percentile(latency, 0.99);
    return c;
}

nlohmann::json to_json(const Case& c) {
    // Rounded to `unit` (a power of ten), as the nearest double to the decimal.
    auto round = [](double v, double unit) {
        const double scale = std::round(1.0 / unit);
        return std::round(v * scale) / scale;
    };
    return nlohmann::json{
        {"name", c.name},
        {"type", c.type},
        {"backends", c.backends},
        {"interval_s", c.interval_s},
        {"cpu_percent", round(c.cpu_percent, 0.01)},
        {"lateness_p99_ms", round(c.lateness_p99_ms, 0.001)},
        {"rss_mib", round(c.rss_mib, 0.1)},
        // Beyond the required fields:
        {"seconds", round(c.seconds, 0.01)},
        {"probes", c.probes},
        {"probes_per_s", round(static_cast<double>(c.probes) / c.seconds, 1)},
        {"vips", c.vips},
        {"pairs", c.pairs},
        {"results_per_s", round(static_cast<double>(c.results) / c.seconds, 1)},
        {"failures", c.failures},
        {"cpu_user_percent", round(c.cpu_user_percent, 0.01)},
        {"cpu_sys_percent", round(c.cpu_sys_percent, 0.01)},
        {"process_cpu_percent", round(c.process_cpu_percent, 0.01)},
        {"lateness_p50_ms", round(c.lateness_p50_ms, 0.001)},
        {"lateness_max_ms", round(c.lateness_max_ms, 0.001)},
        {"latency_p50_ms", round(c.latency_p50_ms, 0.001)},
        {"latency_p99_ms", round(c.latency_p99_ms, 0.001)},
        {"peak_rss_mib", round(c.peak_rss_mib, 0.1)},
        {"time_wait", c.time_wait},
        {"engine_us_per_probe", round(c.engine_us_per_probe, 0.1)},
        {"floor_us_per_probe", round(c.floor_us_per_probe, 0.1)},
        {"floor_before_us", round(c.floor_before_us, 0.1)},
        {"floor_after_us", round(c.floor_after_us, 0.1)},
        {"engine_to_floor",
         round(c.floor_us_per_probe > 0 ? c.engine_us_per_probe / c.floor_us_per_probe : 0, 0.01)},
    };
}

}  // namespace

int main(int argc, char** argv) {
    CLI::App app{"xlb-bench-health: the probe engine with 10,000 backends"};
    std::string out_path = "build/bench/health.json";
    int backends = 10000;
    int interval_ms = 1000, timeout_ms = 500, jitter_ms = 0;
    int warmup_s = 3, duration_s = 10;
    std::vector<std::string> names;
    std::vector<std::string> known;
    for (const CaseSpec& c : all_cases()) {
        names.push_back(c.name);
        known.push_back(c.name);
    }
    app.add_option("--out", out_path, "JSON output path")->capture_default_str();
    app.add_option("--backends", backends, "backends")
        ->check(CLI::Range(1, 62500))
        ->capture_default_str();
    app.add_option("--interval-ms", interval_ms, "probe interval")->capture_default_str();
    app.add_option("--timeout-ms", timeout_ms, "probe timeout")->capture_default_str();
    app.add_option("--jitter-ms", jitter_ms, "probe jitter")->capture_default_str();
    app.add_option("--warmup", warmup_s, "seconds before measuring")->capture_default_str();
    app.add_option("--duration", duration_s, "seconds measured per case")->capture_default_str();
    ProbeEngine::Options options;  // the agent's
    long timer_resolution_us = options.timer_resolution.count();
    app.add_option("--timer-resolution-us", timer_resolution_us,
                   "the engine's timer resolution (ProbeEngine::Options; the agent's default)")
        ->check(CLI::Range(0L, 100000L))
        ->capture_default_str();
    app.add_option("--cases", names, "cases to run, in this order")
        ->check(CLI::IsMember(known))
        ->capture_default_str();
    CLI11_PARSE(app, argc, argv);
    options.timer_resolution = std::chrono::microseconds(timer_resolution_us);

    raise_fd_limit();
    const Server srv = loopback_server();

    std::printf(
        "xlb-bench-health: %d backends, 127.1.x.y on lo in the current network namespace "
        "(none of its own), port %u; interval %d ms, timeout %d ms, jitter %d ms\n",
        backends, srv.port, interval_ms, timeout_ms, jitter_ms);
    std::printf("warm-up %d s, then %d s measured per case, each case in its own process\n\n",
                warmup_s, duration_s);

    nlohmann::json cases = nlohmann::json::array();
    std::printf("%-18s %8s %9s %8s %7s %7s %7s %9s %9s %9s %11s %11s %11s %11s %8s %8s\n", "case",
                "backends", "probes/s", "failures", "cpu %", "user %", "sys %", "process %",
                "us/probe", "floor us", "late p50", "late p99", "late max", "latency p99",
                "rss MiB", "tw");
    for (const std::string& name : names) {
        const CaseSpec& spec = *std::find_if(all_cases().begin(), all_cases().end(),
                                             [&](const CaseSpec& c) { return c.name == name; });
        int pipefd[2];
        if (::pipe2(pipefd, O_CLOEXEC) != 0) return 1;
        const pid_t child = ::fork();
        if (child == 0) {
            ::close(pipefd[0]);
            const Case c =
                run_case(spec, backends, std::chrono::milliseconds(interval_ms),
                         std::chrono::milliseconds(timeout_ms),
                         std::chrono::milliseconds(jitter_ms), std::chrono::seconds(warmup_s),
                         std::chrono::seconds(duration_s), srv.port, options);
            nlohmann::json j = to_json(c);
            j["topology"] = "loopback";
            // How the bench was scheduled (e.g. under chrt -f or nice): CPU
            // figures of a shared machine depend on it.
            const int policy = sched_getscheduler(0);
            j["scheduling"] = policy == SCHED_FIFO ? "fifo" : policy == SCHED_RR ? "rr" : "other";
            errno = 0;
            j["nice"] = getpriority(PRIO_PROCESS, 0);
            double load[3] = {0, 0, 0};
            if (getloadavg(load, 3) > 0) j["load_average_1m"] = std::round(load[0] * 100) / 100;
            j["first_failure"] = c.first_failure;
            const std::string text = j.dump();
            [[maybe_unused]] auto w = ::write(pipefd[1], text.data(), text.size());
            ::_exit(0);
        }
        ::close(pipefd[1]);
        std::string text;
        char buf[4096];
        for (ssize_t n; (n = ::read(pipefd[0], buf, sizeof(buf))) > 0;) {
            text.append(buf, static_cast<std::size_t>(n));
        }
        ::close(pipefd[0]);
        int status = 0;
        ::waitpid(child, &status, 0);
        if (text.empty()) {
            std::fprintf(stderr, "case %s failed\n", name.c_str());
            ::kill(srv.pid, SIGTERM);
            return 1;
        }
        nlohmann::json j = nlohmann::json::parse(text);
        const std::string first_failure = j.value("first_failure", "");
        j.erase("first_failure");
        std::printf(
            "%-18s %8d %9.0f %8llu %7.2f %7.2f %7.2f %9.2f %9.1f %9.1f %8.3f ms %8.3f ms "
            "%8.3f ms %8.3f ms %8.1f %8ld\n",
            name.c_str(), j["backends"].get<int>(), j["probes_per_s"].get<double>(),
            static_cast<unsigned long long>(j["failures"].get<std::uint64_t>()),
            j["cpu_percent"].get<double>(), j["cpu_user_percent"].get<double>(),
            j["cpu_sys_percent"].get<double>(), j["process_cpu_percent"].get<double>(),
            j["engine_us_per_probe"].get<double>(), j["floor_us_per_probe"].get<double>(),
            j["lateness_p50_ms"].get<double>(), j["lateness_p99_ms"].get<double>(),
            j["lateness_max_ms"].get<double>(), j["latency_p99_ms"].get<double>(),
            j["rss_mib"].get<double>(), j["time_wait"].get<long>());
        if (!first_failure.empty()) std::printf("      first failure: %s\n", first_failure.c_str());
        cases.push_back(std::move(j));
    }
    ::kill(srv.pid, SIGTERM);
    ::waitpid(srv.pid, nullptr, 0);

    std::printf(
        "\ncpu %%: the engine's thread, user + system. Targets: http (reuse) <= 15%%, tcp\n"
        "us/probe <= 1.1 x floor us, tcp_shared_10_vips: 10,000 probes/s for 100,000\n"
        "(VIP, backend) pairs within 10%% of tcp's cpu %%. process %%: the whole probing\n"
        "process. us/probe: the engine thread's CPU per probe; floor us: the same system\n"
        "calls one probe at a time in a tight loop (http: on a kept connection), the mean\n"
        "of 2 s before and 2 s after the engine's window.\n"
        "late: probe start minus the time it was due. tw: TCP sockets in TIME_WAIT in\n"
        "the current namespace, other programs' included.\n");
    const std::filesystem::path path(out_path);
    if (path.has_parent_path()) std::filesystem::create_directories(path.parent_path());
    std::ofstream(path) << nlohmann::json{{"cases", cases}}.dump(2) << "\n";
    std::printf("wrote %s\n", out_path.c_str());
    return 0;
}
