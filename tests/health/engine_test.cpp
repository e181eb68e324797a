// SPDX-License-Identifier: Apache-2.0
// The probe engine against real servers on loopback (127.0.0.1 and ::1):
// tcp, http and udp probes, every failure the issue lists, the schedule and
// its diffing.
#include "xlb/health/engine.h"

#include <gtest/gtest.h>
#include <sys/socket.h>

#include <algorithm>
#include <condition_variable>
#include <mutex>
#include <set>
#include <thread>

#include "servers.h"

namespace xlb::health {
namespace {

using namespace std::chrono_literals;
using config::HealthCheckType;
using test::TcpServer;
using test::UdpServer;

class Collector {
public:
    ProbeEngine::ResultHandler handler() {
        return [this](ProbeResult r) {
            std::lock_guard lock(mu_);
            results_.push_back(std::move(r));
            cv_.notify_all();
        };
    }
    // Waits for at least n results (at most `max`); returns them all.
    std::vector<ProbeResult> wait(std::size_t n, std::chrono::milliseconds max = 3000ms) {
        std::unique_lock lock(mu_);
        cv_.wait_for(lock, max, [&] { return results_.size() >= n; });
        return results_;
    }

private:
    std::mutex mu_;
    std::condition_variable cv_;
    std::vector<ProbeResult> results_;
};

ProbeEngine::Options fast_options() {
    ProbeEngine::Options o;
    o.first_probe_spread = 5ms;
    o.seed = 42;
    return o;
}

ProbeTarget target(HealthCheckType type, const char* address, std::uint16_t port) {
    ProbeTarget t;
    t.key = TargetKey{"test", *net::IpAddress::parse(address)};
    t.port = port;
    t.check.type = type;
    t.check.interval = 2s;  // one probe per test unless a test says otherwise
    t.check.timeout = 250ms;
    t.check.jitter = 0ms;
    return t;
}

// Runs one target until its first result.
ProbeResult probe_once(const ProbeTarget& t, ProbeEngine::Options options = fast_options()) {
    Collector c;
    ProbeEngine engine(options, c.handler());
    engine.set_targets({t});
    EXPECT_TRUE(engine.start().has_value());
    auto results = c.wait(1);
    engine.stop();
    EXPECT_FALSE(results.empty()) << "no result";
    return results.empty() ? ProbeResult{} : results.front();
}

TcpServer http_server(std::string response) {
    return TcpServer("127.0.0.1", [response](TcpServer::Connection& c) {
        c.read_request();
        c.write(response);
    });
}

// --- tcp -----------------------------------------------------------------------------

TEST(TcpProbe, Connects) {
    TcpServer server("127.0.0.1", [](TcpServer::Connection&) {});
    const auto r = probe_once(target(HealthCheckType::kTcp, "127.0.0.1", server.port()));
    EXPECT_EQ(r.failure, Failure::kNone) << r.detail;
    EXPECT_EQ(r.detail, "connected");
    EXPECT_EQ(r.key.backend, *net::IpAddress::parse("127.0.0.1"));
    EXPECT_EQ(r.port, server.port());
    EXPECT_GE(r.started, r.scheduled);
    EXPECT_GE(r.finished, r.started);
    EXPECT_LT(r.latency(), 250ms);
}

TEST(TcpProbe, ConnectsOverIPv6) {
    TcpServer server("::1", [](TcpServer::Connection&) {});
    const auto r = probe_once(target(HealthCheckType::kTcp, "::1", server.port()));
    EXPECT_EQ(r.failure, Failure::kNone) << r.detail;
}

TEST(TcpProbe, Refused) {
    const auto port = test::unused_port("127.0.0.1", SOCK_STREAM);
    const auto r = probe_once(target(HealthCheckType::kTcp, "127.0.0.1", port));
    EXPECT_EQ(r.failure, Failure::kRefused);
    EXPECT_EQ(r.detail, "connection refused");
}

TEST(TcpProbe, TimesOutAgainstAFullBacklog) {
    test::FullBacklog backlog;
    ASSERT_TRUE(backlog.full()) << "could not fill the accept queue";
    const auto r = probe_once(target(HealthCheckType::kTcp, "127.0.0.1", backlog.port()));
    EXPECT_EQ(r.failure, Failure::kTimeout);
    EXPECT_EQ(r.detail, "timeout after 250ms (connecting)");
    EXPECT_GE(r.latency(), 250ms);
    EXPECT_LT(r.latency(), 750ms);  // ours, not the kernel's 1 s SYN retry
}

TEST(TcpProbe, BindsToTheSourceAddress) {
    TcpServer server("127.0.0.1", [](TcpServer::Connection&) {});
    auto options = fast_options();
    options.source_v4 = *net::IpAddress::parse("127.0.0.2");
    const auto r = probe_once(target(HealthCheckType::kTcp, "127.0.0.1", server.port()), options);
    EXPECT_EQ(r.failure, Failure::kNone) << r.detail;
    for (int i = 0; i < 100 && server.peers().empty(); ++i) std::this_thread::sleep_for(5ms);
    ASSERT_EQ(server.peers().size(), 1u);
    EXPECT_EQ(server.peers()[0], "127.0.0.2");
}

TEST(TcpProbe, UnusableSourceIsALocalError) {
    auto options = fast_options();
    options.source_v4 = *net::IpAddress::parse("192.0.2.77");  // not ours
    const auto r = probe_once(target(HealthCheckType::kTcp, "127.0.0.1", 9), options);
    EXPECT_EQ(r.failure, Failure::kLocal);
    EXPECT_NE(r.detail.find("bind 192.0.2.77"), std::string::npos) << r.detail;
}

// --- http ---------------------------------------------------------------------------

TEST(HttpProbe, Status200) {
    auto server =
        http_server("HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nOK");
    auto t = target(HealthCheckType::kHttp, "127.0.0.1", server.port());
    t.check.path = "/healthz";
    const auto r = probe_once(t);
    EXPECT_EQ(r.failure, Failure::kNone) << r.detail;
    EXPECT_EQ(r.http_status, 200);
    EXPECT_EQ(r.detail, "status 200");
    const auto requests = server.requests();
    ASSERT_EQ(requests.size(), 1u);
    EXPECT_EQ(requests[0].rfind("GET /healthz HTTP/1.1\r\n", 0), 0u) << requests[0];
    EXPECT_NE(requests[0].find("\r\nHost: 127.0.0.1:" + std::to_string(server.port()) + "\r\n"),
              std::string::npos);
    EXPECT_NE(requests[0].find("\r\nConnection: close\r\n"), std::string::npos);
}

TEST(HttpProbe, BodyUntilCloseAndHostHeader) {
    auto server = http_server("HTTP/1.0 200 OK\r\n\r\nstatus: ready\n");
    auto t = target(HealthCheckType::kHttp, "127.0.0.1", server.port());
    t.check.host = "app.example";
    t.check.body_contains = "ready";
    const auto r = probe_once(t);
    EXPECT_EQ(r.failure, Failure::kNone) << r.detail;
    ASSERT_EQ(server.requests().size(), 1u);
    EXPECT_NE(server.requests()[0].find("\r\nHost: app.example\r\n"), std::string::npos);
}

TEST(HttpProbe, Status503) {
    auto server = http_server("HTTP/1.1 503 Service Unavailable\r\nContent-Length: 0\r\n\r\n");
    const auto r = probe_once(target(HealthCheckType::kHttp, "127.0.0.1", server.port()));
    EXPECT_EQ(r.failure, Failure::kStatus);
    EXPECT_EQ(r.detail, "status 503");
    EXPECT_EQ(r.http_status, 503);
    EXPECT_FALSE(r.rate_limited);
}

TEST(HttpProbe, Status429WithRetryAfter) {
    auto server = http_server(
        "HTTP/1.1 429 Too Many Requests\r\nRetry-After: 42\r\nContent-Length: 4\r\n\r\nslow");
    const auto r = probe_once(target(HealthCheckType::kHttp, "127.0.0.1", server.port()));
    EXPECT_EQ(r.failure, Failure::kNone);  // alive, pushing back
    EXPECT_TRUE(r.rate_limited);
    EXPECT_EQ(r.retry_after, 42s);
    EXPECT_EQ(r.http_status, 429);
}

TEST(HttpProbe, Status503WithRetryAfterDate) {
    auto server = http_server(
        "HTTP/1.1 503 Service Unavailable\r\nDate: Mon, 01 Jan 2024 09:00:00 GMT\r\n"
        "Retry-After: Mon, 01 Jan 2024 09:02:00 GMT\r\nContent-Length: 0\r\n\r\n");
    const auto r = probe_once(target(HealthCheckType::kHttp, "127.0.0.1", server.port()));
    EXPECT_EQ(r.failure, Failure::kStatus);
    EXPECT_TRUE(r.rate_limited);
    EXPECT_EQ(r.retry_after, 120s);
}

TEST(HttpProbe, WrongBody) {
    auto server = http_server(
        "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n8\r\nstarting\r\n0\r\n\r\n");
    auto t = target(HealthCheckType::kHttp, "127.0.0.1", server.port());
    t.check.body_contains = "ready";
    const auto r = probe_once(t);
    EXPECT_EQ(r.failure, Failure::kBodyMismatch);
    EXPECT_EQ(r.detail, "status 200, body lacks \"ready\"");
}

TEST(HttpProbe, SlowHeadersPastTheTimeout) {
    TcpServer server("127.0.0.1", [](TcpServer::Connection& c) {
        c.read_request();
        c.write("HTTP/1.1 200 OK\r\n");
        if (c.stop.wait(1000ms)) return;
        c.write("Content-Length: 0\r\n\r\n");
    });
    const auto r = probe_once(target(HealthCheckType::kHttp, "127.0.0.1", server.port()));
    EXPECT_EQ(r.failure, Failure::kTimeout);
    EXPECT_EQ(r.detail, "timeout after 250ms (waiting for the response headers)");
    EXPECT_LT(r.latency(), 750ms);  // the server would finish at 1 s
}

TEST(HttpProbe, SlowBodyPastTheTimeout) {
    TcpServer server("127.0.0.1", [](TcpServer::Connection& c) {
        c.read_request();
        c.write("HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nabc");
        c.stop.wait(1000ms);
    });
    const auto r = probe_once(target(HealthCheckType::kHttp, "127.0.0.1", server.port()));
    EXPECT_EQ(r.failure, Failure::kTimeout);
    EXPECT_EQ(r.detail, "timeout after 250ms (reading the response body)");
}

TEST(HttpProbe, AcceptsAndNeverAnswers) {
    TcpServer server("127.0.0.1", [](TcpServer::Connection& c) { c.stop.wait(5000ms); });
    const auto r = probe_once(target(HealthCheckType::kHttp, "127.0.0.1", server.port()));
    EXPECT_EQ(r.failure, Failure::kTimeout);
    EXPECT_EQ(r.detail, "timeout after 250ms (waiting for the response headers)");
    EXPECT_LT(r.latency(), 750ms);  // ours: the server never answers
}

TEST(HttpProbe, ClosedWithoutAnAnswer) {
    TcpServer server("127.0.0.1", [](TcpServer::Connection& c) { c.read_request(); });
    const auto r = probe_once(target(HealthCheckType::kHttp, "127.0.0.1", server.port()));
    EXPECT_EQ(r.failure, Failure::kClosed);
    EXPECT_EQ(r.detail, "closed without a response");
}

TEST(HttpProbe, NotHttp) {
    auto server = http_server("SSH-2.0-OpenSSH_9.2\r\n");
    const auto r = probe_once(target(HealthCheckType::kHttp, "127.0.0.1", server.port()));
    EXPECT_EQ(r.failure, Failure::kBadResponse);
}

TEST(HttpProbe, Refused) {
    const auto port = test::unused_port("127.0.0.1", SOCK_STREAM);
    const auto r = probe_once(target(HealthCheckType::kHttp, "127.0.0.1", port));
    EXPECT_EQ(r.failure, Failure::kRefused);
}

// --- udp -----------------------------------------------------------------------------

TEST(UdpProbe, Reply) {
    UdpServer server("127.0.0.1", [](const std::string& d) -> std::optional<std::string> {
        return d == "ping" ? std::optional<std::string>("pong v1") : std::nullopt;
    });
    auto t = target(HealthCheckType::kUdp, "127.0.0.1", server.port());
    t.check.udp_payload = "ping";
    t.check.udp_expect = "pong";
    const auto r = probe_once(t);
    EXPECT_EQ(r.failure, Failure::kNone) << r.detail;
    EXPECT_EQ(r.detail, "reply of 7 bytes");
}

TEST(UdpProbe, AnyReplyWithoutExpect) {
    UdpServer server("::1", [](const std::string&) { return std::optional<std::string>("x"); });
    auto t = target(HealthCheckType::kUdp, "::1", server.port());
    EXPECT_EQ(probe_once(t).failure, Failure::kNone);
}

TEST(UdpProbe, NoReply) {
    UdpServer server("127.0.0.1", [](const std::string&) { return std::nullopt; });
    auto t = target(HealthCheckType::kUdp, "127.0.0.1", server.port());
    t.check.udp_payload = "ping";
    const auto r = probe_once(t);
    EXPECT_EQ(r.failure, Failure::kTimeout);
    EXPECT_EQ(r.detail, "timeout after 250ms (no reply)");
    EXPECT_EQ(server.received(), 1);
}

TEST(UdpProbe, PayloadMismatch) {
    UdpServer server("127.0.0.1",
                     [](const std::string&) { return std::optional<std::string>("ERR"); });
    auto t = target(HealthCheckType::kUdp, "127.0.0.1", server.port());
    t.check.udp_payload = "ping";
    t.check.udp_expect = "pong";
    const auto r = probe_once(t);
    EXPECT_EQ(r.failure, Failure::kReplyMismatch);
    EXPECT_EQ(r.detail, "reply of 3 bytes lacks \"pong\"");
}

TEST(UdpProbe, PortUnreachable) {
    const auto port = test::unused_port("127.0.0.1", SOCK_DGRAM);
    auto t = target(HealthCheckType::kUdp, "127.0.0.1", port);
    t.check.udp_payload = "ping";
    const auto r = probe_once(t);
    EXPECT_EQ(r.failure, Failure::kRefused);
    EXPECT_EQ(r.detail, "port unreachable");
}

// --- Schedule ------------------------------------------------------------------------

TEST(Schedule, IntervalPlusJitterAndLateness) {
    TcpServer server("127.0.0.1", [](TcpServer::Connection&) {});
    auto t = target(HealthCheckType::kTcp, "127.0.0.1", server.port());
    t.check.interval = 60ms;
    t.check.timeout = 40ms;
    t.check.jitter = 30ms;
    Collector c;
    ProbeEngine engine(fast_options(), c.handler());
    engine.set_targets({t});
    ASSERT_TRUE(engine.start());
    auto results = c.wait(12);
    engine.stop();
    ASSERT_GE(results.size(), 12u);
    std::set<Clock::rep> gaps;
    std::vector<Clock::duration> lateness;
    int in_range = 0;
    for (std::size_t i = 1; i < results.size(); ++i) {
        // Due times are interval + [0, jitter] apart (unless the loop fell a
        // whole interval behind, which a loaded test machine may cause).
        const auto gap = results[i].scheduled - results[i - 1].scheduled;
        EXPECT_GE(gap, 60ms);
        in_range += gap <= 90ms ? 1 : 0;
        gaps.insert(gap.count());
        lateness.push_back(results[i].lateness());
        EXPECT_EQ(results[i].failure, Failure::kNone) << results[i].detail;
    }
    EXPECT_GE(in_range, static_cast<int>(results.size()) * 3 / 4);
    EXPECT_GT(gaps.size(), 5u);  // jittered
    std::nth_element(lateness.begin(), lateness.begin() + lateness.size() / 2, lateness.end());
    EXPECT_LT(lateness[lateness.size() / 2], 10ms);  // median
}

TEST(Schedule, UnchangedTargetsKeepTheirScheduleChangedOnesMove) {
    TcpServer a("127.0.0.1", [](TcpServer::Connection&) {});
    TcpServer b("127.0.0.1", [](TcpServer::Connection&) {});
    auto ta = target(HealthCheckType::kTcp, "127.0.0.1", a.port());
    ta.key.vip = "a";
    ta.check.interval = 100ms;
    ta.check.timeout = 50ms;
    auto tb = ta;
    tb.key.vip = "b";
    Collector c;
    ProbeEngine engine(fast_options(), c.handler());
    engine.set_targets({ta, tb});
    ASSERT_TRUE(engine.start());
    c.wait(4);
    // a only gets new thresholds (not a probe change); b moves to another
    // port; c is new.
    auto ta2 = ta;
    ta2.check.unhealthy_threshold = 5;
    ta2.check.flapping.changes = 0;
    auto tb2 = tb;
    tb2.port = b.port();
    auto tc = ta;
    tc.key.vip = "c";
    engine.set_targets({ta2, tb2, tc});
    std::this_thread::sleep_for(350ms);
    engine.set_targets({ta});  // b and c go
    std::this_thread::sleep_for(30ms);
    const auto count_before = c.wait(0).size();
    std::this_thread::sleep_for(250ms);
    engine.stop();
    const auto results = c.wait(0);
    std::vector<TimePoint> a_due;
    bool b_on_new_port = false, c_seen = false;
    for (const auto& r : results) {
        if (r.key.vip == "a") a_due.push_back(r.scheduled);
        if (r.key.vip == "b" && r.port == b.port()) b_on_new_port = true;
        if (r.key.vip == "c") c_seen = true;
    }
    // a's probes stayed exactly one interval apart through every set_targets().
    ASSERT_GE(a_due.size(), 6u);
    for (std::size_t i = 1; i < a_due.size(); ++i) EXPECT_EQ(a_due[i] - a_due[i - 1], 100ms);
    EXPECT_TRUE(b_on_new_port);
    EXPECT_TRUE(c_seen);
    // After the last change only a is probed.
    for (std::size_t i = count_before; i < results.size(); ++i) EXPECT_EQ(results[i].key.vip, "a");
    EXPECT_EQ(engine.stats().targets, 1u);
}

TEST(Schedule, FirstProbesAreSpread) {
    TcpServer server("127.0.0.1", [](TcpServer::Connection&) {});
    std::vector<ProbeTarget> targets;
    for (int i = 0; i < 50; ++i) {
        auto t = target(HealthCheckType::kTcp, "127.0.0.1", server.port());
        t.key.vip = "v" + std::to_string(i);
        targets.push_back(t);
    }
    auto options = fast_options();
    options.first_probe_spread = 200ms;
    Collector c;
    ProbeEngine engine(options, c.handler());
    engine.set_targets(targets);
    const auto start = Clock::now();
    ASSERT_TRUE(engine.start());
    const auto results = c.wait(50);
    engine.stop();
    ASSERT_EQ(results.size(), 50u);
    TimePoint first = TimePoint::max(), last = TimePoint::min();
    for (const auto& r : results) {
        first = std::min(first, r.scheduled);
        last = std::max(last, r.scheduled);
        EXPECT_LT(r.scheduled - start, 250ms);
    }
    EXPECT_GT(last - first, 100ms);  // not one burst
}

TEST(Schedule, InFlightLimitDefersButLosesNothing) {
    TcpServer server("127.0.0.1", [](TcpServer::Connection&) {});
    std::vector<ProbeTarget> targets;
    for (int i = 0; i < 20; ++i) {
        auto t = target(HealthCheckType::kTcp, "127.0.0.1", server.port());
        t.key.vip = "v" + std::to_string(i);
        targets.push_back(t);
    }
    auto options = fast_options();
    options.max_in_flight = 2;
    options.first_probe_spread = 1ms;
    Collector c;
    ProbeEngine engine(options, c.handler());
    engine.set_targets(targets);
    ASSERT_TRUE(engine.start());
    const auto results = c.wait(20);
    engine.stop();
    ASSERT_EQ(results.size(), 20u);
    for (const auto& r : results) EXPECT_EQ(r.failure, Failure::kNone) << r.detail;
}

TEST(Engine, CallAtRunsOnTheEngineThread) {
    Collector c;
    ProbeEngine engine(fast_options(), c.handler());
    ASSERT_TRUE(engine.start());
    std::mutex mu;
    std::condition_variable cv;
    std::thread::id ran_on;
    TimePoint ran_at{};
    const TimePoint when = Clock::now() + 30ms;
    engine.call_at(when, [&] {
        std::lock_guard lock(mu);
        ran_on = std::this_thread::get_id();
        ran_at = Clock::now();
        cv.notify_all();
    });
    {
        std::unique_lock lock(mu);
        ASSERT_TRUE(cv.wait_for(lock, 1s, [&] { return ran_at != TimePoint{}; }));
    }
    EXPECT_NE(ran_on, std::this_thread::get_id());
    EXPECT_GE(ran_at, when);
    EXPECT_LT(ran_at - when, 100ms);
    EXPECT_GT(engine.cpu_time().count(), 0);
    engine.stop();
}

}  // namespace
}  // namespace xlb::health
