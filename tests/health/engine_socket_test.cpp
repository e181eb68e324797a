// SPDX-License-Identifier: Apache-2.0
// The probe engine with real sockets against servers on loopback (127.0.0.1
// and ::1): a few probes end to end, through the system's ProbeIo and its
// thread. Every outcome and the schedule are tested with a fake ProbeIo, by
// hand and without sleeping, in engine_test.cpp. These wait for results (a
// condition variable), not for time, and assert no timing window.
#include <gtest/gtest.h>
#include <sys/socket.h>

#include <functional>
#include <thread>
#include <utility>

#include "event_log.h"
#include "servers.h"
#include "xlb/health/engine.h"

namespace xlb::health {
namespace {

using namespace std::chrono_literals;
using config::HealthCheckType;
using test::TcpServer;
using test::UdpServer;

using Collector = xlb::test::EventLog<ProbeResult>;

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
    ProbeEngine engine(options, std::ref(c));
    engine.set_targets({t});
    EXPECT_TRUE(engine.start().has_value());
    auto results = c.wait_for(1, 3s);
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

TEST(RealTcpProbe, Connects) {
    TcpServer server("127.0.0.1", [](TcpServer::Connection&) {});
    const auto r = probe_once(target(HealthCheckType::kTcp, "127.0.0.1", server.port()));
    EXPECT_EQ(r.failure, Failure::kNone) << r.detail;
    EXPECT_EQ(r.detail, "connected");
    EXPECT_EQ(r.key.backend, *net::IpAddress::parse("127.0.0.1"));
    EXPECT_EQ(r.port, server.port());
    EXPECT_GE(r.started, r.scheduled);
    EXPECT_GE(r.finished, r.started);
}

TEST(RealTcpProbe, ConnectsOverIPv6) {
    TcpServer server("::1", [](TcpServer::Connection&) {});
    const auto r = probe_once(target(HealthCheckType::kTcp, "::1", server.port()));
    EXPECT_EQ(r.failure, Failure::kNone) << r.detail;
}

TEST(RealTcpProbe, Refused) {
    const auto port = test::unused_port("127.0.0.1", SOCK_STREAM);
    const auto r = probe_once(target(HealthCheckType::kTcp, "127.0.0.1", port));
    EXPECT_EQ(r.failure, Failure::kRefused);
    EXPECT_EQ(r.detail, "connection refused");
}

TEST(RealTcpProbe, TimesOutAgainstAFullBacklog) {
    test::FullBacklog backlog;
    ASSERT_TRUE(backlog.full()) << "could not fill the accept queue";
    const auto r = probe_once(target(HealthCheckType::kTcp, "127.0.0.1", backlog.port()));
    EXPECT_EQ(r.failure, Failure::kTimeout);
    EXPECT_EQ(r.detail, "timeout after 250ms (connecting)");
    EXPECT_GE(r.latency(), 250ms);
}

TEST(RealTcpProbe, BindsToTheSourceAddress) {
    TcpServer server("127.0.0.1", [](TcpServer::Connection&) {});
    auto options = fast_options();
    options.source_v4 = *net::IpAddress::parse("127.0.0.2");
    const auto r = probe_once(target(HealthCheckType::kTcp, "127.0.0.1", server.port()), options);
    EXPECT_EQ(r.failure, Failure::kNone) << r.detail;
    for (int i = 0; i < 100 && server.peers().empty(); ++i) std::this_thread::sleep_for(5ms);
    ASSERT_EQ(server.peers().size(), 1u);
    EXPECT_EQ(server.peers()[0], "127.0.0.2");
}

TEST(RealTcpProbe, UnusableSourceIsALocalError) {
    auto options = fast_options();
    options.source_v4 = *net::IpAddress::parse("192.0.2.77");  // not ours
    const auto r = probe_once(target(HealthCheckType::kTcp, "127.0.0.1", 9), options);
    EXPECT_EQ(r.failure, Failure::kLocal);
    EXPECT_NE(r.detail.find("bind 192.0.2.77"), std::string::npos) << r.detail;
}

TEST(RealHttpProbe, Status200) {
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
    // Reuse is the default: keep-alive is asked for by not saying close.
    EXPECT_EQ(requests[0].find("\r\nConnection: close\r\n"), std::string::npos);
}

TEST(RealHttpProbe, ReusesOneConnectionForSeveralProbes) {
    TcpServer server("127.0.0.1", [](TcpServer::Connection& c) {
        while (c.read_request().find("\r\n\r\n") != std::string::npos)
            c.write("HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nOK");
    });
    auto t = target(HealthCheckType::kHttp, "127.0.0.1", server.port());
    t.check.interval = 20ms;
    t.check.timeout = 15ms;
    Collector c;
    ProbeEngine engine(fast_options(), std::ref(c));
    engine.set_targets({t});
    ASSERT_TRUE(engine.start().has_value());
    const auto results = c.wait_for(4, 5s);
    const auto stats = engine.stats();
    engine.stop();
    ASSERT_EQ(results.size(), 4u);
    for (const ProbeResult& r : results) EXPECT_EQ(r.failure, Failure::kNone) << r.detail;
    EXPECT_EQ(server.accepted(), 1);
    EXPECT_GE(stats.reused, 3u);
}

TEST(RealUdpProbe, Reply) {
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

TEST(RealUdpProbe, AnyReplyWithoutExpect) {
    UdpServer server("::1", [](const std::string&) { return std::optional<std::string>("x"); });
    auto t = target(HealthCheckType::kUdp, "::1", server.port());
    EXPECT_EQ(probe_once(t).failure, Failure::kNone);
}

TEST(RealUdpProbe, PortUnreachable) {
    const auto port = test::unused_port("127.0.0.1", SOCK_DGRAM);
    auto t = target(HealthCheckType::kUdp, "127.0.0.1", port);
    t.check.udp_payload = "ping";
    const auto r = probe_once(t);
    EXPECT_EQ(r.failure, Failure::kRefused);
    EXPECT_EQ(r.detail, "port unreachable");
}

TEST(RealEngine, CallAtRunsOnTheEngineThread) {
    Collector c;
    ProbeEngine engine(fast_options(), std::ref(c));
    ASSERT_TRUE(engine.start());
    // Where and when the call ran.
    xlb::test::EventLog<std::pair<std::thread::id, TimePoint>> ran;
    const TimePoint when = Clock::now() + 30ms;
    engine.call_at(when, [&] { ran({std::this_thread::get_id(), Clock::now()}); });
    const auto runs = ran.wait_for(1, 1s);
    ASSERT_EQ(runs.size(), 1u);
    const auto [ran_on, ran_at] = runs[0];
    EXPECT_NE(ran_on, std::this_thread::get_id());
    EXPECT_GE(ran_at, when);
    EXPECT_GT(engine.cpu_time().count(), 0);
    engine.stop();
}

}  // namespace
}  // namespace xlb::health
