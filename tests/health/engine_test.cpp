// SPDX-License-Identifier: Apache-2.0
// The probe engine with a fake ProbeIo (fake_probe_io.h), on the test's
// thread: the test sets the time, says what each socket does, and fires the
// engine's timers by hand (run_once() at the deadline the engine asked for).
// Nothing sleeps; outcomes, times and schedules are asserted exactly. A few
// probes with real sockets are in engine_socket_test.cpp.
#include "xlb/health/engine.h"

#include <gtest/gtest.h>
#include <sys/socket.h>

#include <map>
#include <optional>
#include <set>

#include "fake_probe_io.h"

namespace xlb::health {
namespace {

using namespace std::chrono_literals;
using config::HealthCheckType;
using test::FakeProbeIo;

ProbeTarget target(HealthCheckType type, const char* address = "10.0.0.1",
                   std::uint16_t port = 8080, std::string vip = "v") {
    ProbeTarget t;
    t.key = TargetKey{std::move(vip), *net::IpAddress::parse(address)};
    t.port = port;
    t.check.type = type;
    t.check.interval = 2s;
    t.check.timeout = 250ms;
    t.check.jitter = 0ms;
    return t;
}

class EngineTest : public ::testing::Test {
protected:
    // The first probe due at once, timers exact: times are predictable.
    static ProbeEngine::Options options() {
        ProbeEngine::Options o;
        o.first_probe_spread = 0ms;
        o.timer_resolution = 0us;
        o.max_in_flight = 100;
        o.seed = 42;
        return o;
    }
    void SetUp() override { make(options()); }
    void make(ProbeEngine::Options o) {
        engine.reset();
        // A shared probe's result as one result per target it serves, and
        // the probes as the engine reported them.
        engine.emplace(
            std::move(o),
            [this](const ProbeResult& r) {
                ++reports;
                for (const TargetKey& key : r.targets()) {
                    ProbeResult one = r;
                    one.key = key;
                    one.shared_targets.reset();
                    results.push_back(std::move(one));
                }
            },
            io);
    }
    // One turn of the engine's loop at io.time.
    void turn() {
        auto ok = engine->run_once();
        ASSERT_TRUE(ok) << ok.error().message();
    }
    void set(std::vector<ProbeTarget> targets) {
        engine->set_targets(std::move(targets));
        turn();
    }
    // Runs the engine up to `t`, waking at each deadline it asks for, as the
    // real loop would, then at t.
    void run_to(TimePoint t) {
        turn();
        for (int guard = 0; io.deadline <= t; ++guard) {
            ASSERT_LT(guard, 100000) << "the engine keeps asking for the same time";
            io.time = std::max(io.time, io.deadline);
            turn();
        }
        io.time = t;
        turn();
    }
    // The one result so far.
    ProbeResult result() {
        EXPECT_EQ(results.size(), 1u);
        return results.empty() ? ProbeResult{} : results.back();
    }

    FakeProbeIo io;  // outlives the engine
    std::optional<ProbeEngine> engine;
    std::vector<ProbeResult> results;
    int reports = 0;
    const TimePoint t0 = io.time;
};

// --- tcp -----------------------------------------------------------------------------

TEST_F(EngineTest, TcpConnectsWhenTheSocketIsWritable) {
    set({target(HealthCheckType::kTcp)});
    ASSERT_EQ(io.sockets.size(), 1u);
    const int fd = io.last_fd;
    const auto& s = io.at(fd);
    EXPECT_EQ(s.domain, AF_INET);
    EXPECT_EQ(s.type, SOCK_STREAM);
    EXPECT_EQ(s.peer, "10.0.0.1 8080");
    EXPECT_TRUE(s.watched);
    EXPECT_FALSE(s.abortive);  // the probe ends with a disconnect (a reset), not a close
    EXPECT_TRUE(results.empty());

    io.time = t0 + 3ms;
    io.wall += 3ms;
    io.writable(fd);
    turn();
    const auto r = result();
    EXPECT_EQ(r.failure, Failure::kNone);
    EXPECT_EQ(r.detail, "connected");
    EXPECT_EQ(r.port, 8080);
    EXPECT_EQ(r.scheduled, t0);
    EXPECT_EQ(r.started, t0);
    EXPECT_EQ(r.latency(), 3ms);
    EXPECT_EQ(r.finished_wall, io.wall) << "the health history's time of a change it causes";
    EXPECT_TRUE(io.at(fd).open);  // kept for the next probe, disconnected
    EXPECT_EQ(io.at(fd).disconnects, 1);
}

TEST_F(EngineTest, TcpOverIPv6) {
    set({target(HealthCheckType::kTcp, "2001:db8::1", 443)});
    EXPECT_EQ(io.at(io.last_fd).domain, AF_INET6);
    EXPECT_EQ(io.at(io.last_fd).peer, "2001:db8::1 443");
}

TEST_F(EngineTest, TcpRefused) {
    set({target(HealthCheckType::kTcp)});
    io.connect_fails(io.last_fd, ECONNREFUSED);
    turn();
    EXPECT_EQ(result().failure, Failure::kRefused);
    EXPECT_EQ(result().detail, "connection refused");
}

TEST_F(EngineTest, TcpConnectFailsAtOnce) {
    io.connect_result = -ENETUNREACH;
    set({target(HealthCheckType::kTcp)});
    EXPECT_EQ(result().failure, Failure::kUnreachable);
    EXPECT_EQ(result().detail, "network unreachable");
    EXPECT_EQ(io.at(io.last_fd).disconnects, 1);  // reset for the next probe
}

TEST_F(EngineTest, TcpTimesOutExactlyAtTheTimeout) {
    set({target(HealthCheckType::kTcp)});
    turn();
    EXPECT_EQ(io.deadline, t0 + 250ms);  // the probe's timeout, not the next interval
    io.time = t0 + 250ms - 1ns;
    turn();
    EXPECT_TRUE(results.empty());
    io.time = t0 + 250ms;
    turn();
    const auto r = result();
    EXPECT_EQ(r.failure, Failure::kTimeout);
    EXPECT_EQ(r.detail, "timeout after 250ms (connecting)");
    EXPECT_EQ(r.latency(), 250ms);
    EXPECT_EQ(io.at(io.last_fd).disconnects, 1);  // the SYN abandoned, the socket kept
    EXPECT_TRUE(io.at(io.last_fd).open);
}

// --- Local errors: this host could not probe ------------------------------------------

TEST_F(EngineTest, NoSocketIsALocalFailure) {
    io.socket_errno = EMFILE;
    set({target(HealthCheckType::kTcp)});
    EXPECT_EQ(result().failure, Failure::kLocal);
    EXPECT_EQ(result().detail, "could not probe: socket: Too many open files");
}

TEST_F(EngineTest, UnusableSourceAddressIsALocalFailure) {
    auto o = options();
    o.source_v4 = *net::IpAddress::parse("192.0.2.77");
    make(o);
    io.bind_errno = EADDRNOTAVAIL;
    set({target(HealthCheckType::kTcp)});
    EXPECT_EQ(result().failure, Failure::kLocal);
    EXPECT_EQ(result().detail, "could not probe: bind 192.0.2.77: Cannot assign requested address");
    EXPECT_EQ(io.open_sockets(), 0u);
}

TEST_F(EngineTest, SourceDeviceAndMark) {
    auto o = options();
    o.source_v4 = *net::IpAddress::parse("192.0.2.77");
    o.device = "eth1";
    o.mark = 7;
    make(o);
    auto via = target(HealthCheckType::kTcp);
    via.via_address = *net::IpAddress::parse("198.51.100.10");
    via.mark = 0x1234;
    set({target(HealthCheckType::kTcp, "10.0.0.2"), via});
    ASSERT_EQ(io.sockets.size(), 2u);
    for (const auto& [fd, s] : io.sockets) {
        EXPECT_EQ(s.bound, "192.0.2.77");
        EXPECT_EQ(s.device, "eth1");
    }
    EXPECT_EQ(io.at(100).mark, 7u);
    EXPECT_EQ(io.at(101).mark, 0x1234u);               // the target's own mark wins
    EXPECT_EQ(io.at(101).peer, "198.51.100.10 8080");  // through the VIP
}

TEST_F(EngineTest, RefusedMarkIsALocalFailure) {
    auto o = options();
    o.mark = 7;
    make(o);
    io.mark_errno = EPERM;
    set({target(HealthCheckType::kTcp)});
    EXPECT_EQ(result().failure, Failure::kLocal);
    EXPECT_EQ(result().detail, "could not probe: SO_MARK: Operation not permitted");
}

// --- http ---------------------------------------------------------------------------

class HttpEngineTest : public EngineTest {
protected:
    // Starts an http probe and connects it; returns its socket.
    int connect(ProbeTarget t = target(HealthCheckType::kHttp)) {
        set({std::move(t)});
        const int fd = io.last_fd;
        io.writable(fd);
        turn();
        return fd;
    }
};

TEST_F(HttpEngineTest, Status200) {
    auto t = target(HealthCheckType::kHttp);
    t.check.path = "/healthz";
    t.check.reuse_connection = false;
    const int fd = connect(t);
    const std::string& request = io.at(fd).sent;
    EXPECT_EQ(request.rfind("GET /healthz HTTP/1.1\r\n", 0), 0u) << request;
    EXPECT_NE(request.find("\r\nHost: 10.0.0.1:8080\r\n"), std::string::npos) << request;
    EXPECT_NE(request.find("\r\nConnection: close\r\n"), std::string::npos) << request;
    EXPECT_TRUE(results.empty());

    io.receive(fd, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nOK");
    io.peer_closes(fd);
    io.time = t0 + 5ms;
    turn();
    const auto r = result();
    EXPECT_EQ(r.failure, Failure::kNone) << r.detail;
    EXPECT_EQ(r.detail, "status 200");
    EXPECT_EQ(r.http_status, 200);
    EXPECT_EQ(r.latency(), 5ms);
    EXPECT_FALSE(io.at(fd).open);
    EXPECT_FALSE(io.at(fd).abortive);  // the server closed first: a polite close
}

TEST_F(HttpEngineTest, ARequestSentInPieces) {
    auto t = target(HealthCheckType::kHttp);
    t.check.reuse_connection = false;
    set({t});
    const int fd = io.last_fd;
    io.at(fd).send_room = 10;
    io.writable(fd);
    turn();
    EXPECT_EQ(io.at(fd).sent.size(), 10u);  // then EAGAIN: waits for EPOLLOUT
    io.at(fd).send_room = SIZE_MAX;
    io.writable(fd);
    turn();
    EXPECT_GT(io.at(fd).sent.size(), 10u);
    EXPECT_TRUE(io.at(fd).sent.ends_with("\r\n\r\n"));
    io.receive(fd, "HTTP/1.1 204 No Content\r\n\r\n");
    turn();
    EXPECT_EQ(result().failure, Failure::kNone);
    EXPECT_TRUE(io.at(fd).abortive);  // answered, but the server has not closed: reset
}

// --- http: connection reuse -------------------------------------------------------

constexpr std::string_view kOk = "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nOK";

TEST_F(HttpEngineTest, AConnectionIsKeptAcrossProbes) {
    const int fd = connect();
    EXPECT_EQ(io.at(fd).sent.find("Connection: close"), std::string::npos);
    io.receive(fd, std::string(kOk));
    turn();
    EXPECT_EQ(result().failure, Failure::kNone) << result().detail;
    EXPECT_TRUE(io.at(fd).open);  // kept, not closed
    EXPECT_EQ(engine->stats().kept_connections, 1u);
    EXPECT_EQ(engine->stats().in_flight, 0u);
    const std::size_t first_request = io.at(fd).sent.size();

    // The readable edge of the response read at once arrives late: nothing
    // to read, the connection stays.
    io.event(fd, EPOLLIN);
    turn();
    EXPECT_TRUE(io.at(fd).open);

    results.clear();
    run_to(t0 + 2s);  // the next probe: the same socket, a second request
    EXPECT_EQ(io.sockets.size(), 1u);
    EXPECT_EQ(io.at(fd).sent.size(), 2 * first_request);
    EXPECT_TRUE(results.empty());
    io.time = t0 + 2s + 3ms;
    io.receive(fd, std::string(kOk));
    turn();
    ASSERT_EQ(results.size(), 1u);
    EXPECT_EQ(result().failure, Failure::kNone);
    EXPECT_EQ(result().latency(), 3ms);
    EXPECT_EQ(engine->stats().reused, 1u);
    EXPECT_EQ(engine->stats().probes_started, 2u);
    EXPECT_EQ(engine->stats().kept_connections, 1u);

    // Off: one connection per probe, closed when it is over.
    results.clear();
    auto t = target(HealthCheckType::kHttp);
    t.check.reuse_connection = false;
    set({t});
    EXPECT_FALSE(io.at(fd).open);  // a changed check ends the kept connection
    EXPECT_TRUE(io.at(fd).abortive);
    EXPECT_EQ(engine->stats().kept_connections, 0u);
}

TEST_F(HttpEngineTest, AServerThatSaysCloseIsNotReused) {
    const int fd = connect();
    io.receive(fd, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nOK");
    turn();
    EXPECT_EQ(result().failure, Failure::kNone);
    EXPECT_FALSE(io.at(fd).open);
    run_to(t0 + 2s);
    EXPECT_EQ(io.sockets.size(), 2u);  // a new connection for the next probe
}

TEST_F(HttpEngineTest, AKeptConnectionClosedByTheServerBetweenProbesIsNoFailure) {
    const int fd = connect();
    io.receive(fd, std::string(kOk));
    turn();
    results.clear();
    io.time = t0 + 1s;
    io.peer_closes(fd);  // e.g. the server's idle timeout
    turn();
    EXPECT_TRUE(results.empty());
    EXPECT_FALSE(io.at(fd).open);
    EXPECT_EQ(engine->stats().kept_connections, 0u);
    run_to(t0 + 2s);
    ASSERT_EQ(io.sockets.size(), 2u);
    const int next = io.last_fd;
    io.writable(next);
    io.receive(next, std::string(kOk));
    turn();
    ASSERT_EQ(results.size(), 1u);
    EXPECT_EQ(result().failure, Failure::kNone);
}

TEST_F(HttpEngineTest, AKeptConnectionClosedDuringAProbeIsAFailureAndNotReused) {
    const int fd = connect();
    io.receive(fd, std::string(kOk));
    turn();
    results.clear();
    run_to(t0 + 2s);
    io.peer_closes(fd);  // the request went out, the server closed
    turn();
    EXPECT_EQ(result().failure, Failure::kClosed);
    EXPECT_EQ(result().detail, "closed without a response");
    EXPECT_FALSE(io.at(fd).open);
    run_to(t0 + 4s);
    EXPECT_EQ(io.sockets.size(), 2u);
}

TEST_F(HttpEngineTest, AServerSilentOnAKeptConnectionTimesOutAndTheNextProbeReconnects) {
    const int fd = connect();
    io.receive(fd, std::string(kOk));
    turn();
    results.clear();
    run_to(t0 + 2s + 250ms);
    ASSERT_EQ(results.size(), 1u);
    EXPECT_EQ(result().failure, Failure::kTimeout);
    EXPECT_EQ(result().detail, "timeout after 250ms (waiting for the response headers)");
    EXPECT_FALSE(io.at(fd).open);
    EXPECT_TRUE(io.at(fd).abortive);
    run_to(t0 + 4s);
    ASSERT_EQ(io.sockets.size(), 2u);
    EXPECT_EQ(io.at(io.last_fd).peer, "10.0.0.1 8080");
}

// A listener gone while an old connection lingers (the server still answers
// on it): noticed once the connection reaches reuse_limit, so the failures
// start no later than reuse_limit after the connection was opened and the
// backend fails its unhealthy_threshold probes within unhealthy_threshold
// intervals after that.
TEST_F(HttpEngineTest, AListenerGoneWhileAKeptConnectionLingersIsNoticedWithinTheReuseLimit) {
    auto t = target(HealthCheckType::kHttp);
    t.check.reuse_limit = 5s;
    t.check.unhealthy_threshold = 2;
    const int fd = connect(t);
    // From now on a new connection is refused; the kept one still answers.
    io.connect_result = -ECONNREFUSED;
    std::vector<ProbeResult> failures;
    for (TimePoint at = t0; at <= t0 + 12s; at += 2s) {
        run_to(at);
        if (io.at(fd).open && io.sockets.size() == 1) {
            io.receive(fd, std::string(kOk));
            turn();
        }
    }
    for (const ProbeResult& r : results) {
        if (!r.ok()) failures.push_back(r);
    }
    // 0, 2 and 4 s on the kept connection; at 6 s it is 6 s old: replaced.
    EXPECT_EQ(results[0].failure, Failure::kNone);
    EXPECT_EQ(results[1].failure, Failure::kNone);
    EXPECT_EQ(results[2].failure, Failure::kNone);
    ASSERT_GE(failures.size(), 2u);
    EXPECT_EQ(failures[0].failure, Failure::kRefused);
    EXPECT_EQ(failures[0].scheduled, t0 + 6s);
    // The second consecutive failure (unhealthy) within reuse_limit +
    // unhealthy_threshold intervals of the listener going.
    EXPECT_LE(failures[1].scheduled, t0 + t.check.reuse_limit + 2 * t.check.interval);
    EXPECT_FALSE(io.at(fd).open);
    EXPECT_TRUE(io.at(fd).abortive);  // this side closed first: a reset, no TIME_WAIT
}

// --- tcp: one socket per target ---------------------------------------------------

TEST_F(EngineTest, ATcpProbesSocketIsDisconnectedAndServesTheNextProbe) {
    set({target(HealthCheckType::kTcp)});
    const int fd = io.last_fd;
    io.writable(fd);
    turn();
    EXPECT_EQ(result().failure, Failure::kNone);
    // Ended with a disconnect (a reset, as the kernel sends for it), not a
    // close; the error the disconnect leaves is read.
    EXPECT_TRUE(io.at(fd).open);
    EXPECT_EQ(io.at(fd).disconnects, 1);
    EXPECT_EQ(io.at(fd).so_error, 0);
    EXPECT_EQ(io.at(fd).peer, "");
    EXPECT_EQ(engine->stats().kept_connections, 1u);
    io.event(fd, EPOLLHUP | EPOLLERR | EPOLLRDHUP);  // what the disconnect reports
    turn();
    EXPECT_TRUE(io.at(fd).open);

    results.clear();
    run_to(t0 + 2s);  // the next probe: the same socket, connected again
    EXPECT_EQ(io.sockets.size(), 1u);
    EXPECT_EQ(io.at(fd).connects, 2);
    EXPECT_EQ(io.at(fd).peer, "10.0.0.1 8080");
    io.writable(fd);
    turn();
    ASSERT_EQ(results.size(), 1u);
    EXPECT_EQ(result().failure, Failure::kNone);
    EXPECT_EQ(engine->stats().reused, 1u);

    // Refused, then unanswered: each a failure, the socket reused after both.
    results.clear();
    run_to(t0 + 4s);
    io.connect_fails(fd, ECONNREFUSED);
    turn();
    EXPECT_EQ(result().failure, Failure::kRefused);
    EXPECT_EQ(io.at(fd).disconnects, 3);
    results.clear();
    run_to(t0 + 6s + 250ms);
    EXPECT_EQ(result().failure, Failure::kTimeout);
    EXPECT_EQ(io.at(fd).disconnects, 4);
    EXPECT_TRUE(io.at(fd).open);
    EXPECT_FALSE(io.at(fd).abortive);  // a disconnect, no close: no SO_LINGER needed
    EXPECT_EQ(io.sockets.size(), 1u);
    EXPECT_EQ(engine->stats().in_flight, 0u);

    // The target goes: the socket is closed with a reset.
    set({});
    EXPECT_FALSE(io.at(fd).open);
    EXPECT_TRUE(io.at(fd).abortive);
    EXPECT_EQ(engine->stats().kept_connections, 0u);
}

TEST_F(EngineTest, ATcpSocketThatCannotBeDisconnectedOrSetUpIsNotReused) {
    io.mark_errno = EPERM;  // the first socket cannot be set up
    auto t = target(HealthCheckType::kTcp);
    t.mark = 7;
    set({t});
    const int first = io.last_fd;
    EXPECT_EQ(result().failure, Failure::kLocal);
    EXPECT_FALSE(io.at(first).open);
    io.mark_errno = 0;
    results.clear();
    run_to(t0 + 2s);
    const int second = io.last_fd;
    ASSERT_NE(second, first);
    EXPECT_EQ(io.at(second).mark, 7u);
    io.disconnect_result = -EINVAL;  // and this one cannot be disconnected
    io.writable(second);
    turn();
    EXPECT_EQ(result().failure, Failure::kNone);
    EXPECT_FALSE(io.at(second).open);
    run_to(t0 + 4s);
    EXPECT_NE(io.last_fd, second);
    EXPECT_EQ(engine->stats().kept_connections, 0u);
}

// --- shared probes ---------------------------------------------------------------

TEST_F(EngineTest, OneProbeFeedsEveryVipThatChecksTheBackendAlike) {
    auto a = target(HealthCheckType::kTcp, "10.0.0.1", 80, "a");
    auto b = a;
    b.key.vip = "b";
    b.check.unhealthy_threshold = 7;  // the state machines' own: still shared
    b.check.failure_accrual.enabled = true;
    auto other = a;  // another backend of VIP b
    other.key = TargetKey{"b", *net::IpAddress::parse("10.0.0.2")};
    set({a, b, other});
    EXPECT_EQ(engine->stats().targets, 3u);
    EXPECT_EQ(engine->stats().probes, 2u);
    ASSERT_EQ(io.sockets.size(), 2u);
    for (auto& [fd, sock] : io.sockets) io.writable(fd);
    turn();
    ASSERT_EQ(results.size(), 3u);
    std::set<std::string> keys;
    for (const ProbeResult& r : results) keys.insert(r.key.to_string());
    EXPECT_EQ(keys, (std::set<std::string>{"a 10.0.0.1", "b 10.0.0.1", "b 10.0.0.2"}));
    EXPECT_EQ(reports, 2);  // one report per probe: the shared one names a and b
    EXPECT_EQ(results[0].started, results[1].started);
    EXPECT_EQ(engine->stats().probes_started, 2u);
}

TEST_F(EngineTest, ChangingOneVipsCheckSplitsASharedProbe) {
    io.connect_result = 0;
    auto a = target(HealthCheckType::kTcp, "10.0.0.1", 80, "a");
    a.check.interval = 100ms;
    a.check.timeout = 50ms;
    auto b = a;
    b.key.vip = "b";
    set({a, b});
    run_to(t0 + 150ms);
    ASSERT_EQ(results.size(), 4u);  // both at 0 and 100 ms, from one probe each time
    ASSERT_EQ(io.sockets.size(), 1u);
    const int shared = io.last_fd;
    EXPECT_EQ(io.at(shared).connects, 2);
    EXPECT_EQ(engine->stats().probes, 1u);

    auto b2 = b;
    b2.check.timeout = 80ms;  // a probe setting: b gets a probe of its own
    results.clear();
    set({a, b2});
    EXPECT_EQ(engine->stats().probes, 2u);
    run_to(t0 + 250ms);
    std::map<std::string, std::vector<TimePoint>> due;
    for (const auto& r : results) due[r.key.vip].push_back(r.scheduled);
    EXPECT_EQ(due["a"], (std::vector<TimePoint>{t0 + 200ms}));  // a keeps its schedule
    EXPECT_EQ(due["b"], (std::vector<TimePoint>{t0 + 200ms}));  // no later than it was due
    ASSERT_EQ(io.sockets.size(), 2u);                           // two probes at 200 ms
    const int own = io.last_fd;
    EXPECT_EQ(io.at(shared).connects, 3);
    EXPECT_EQ(io.at(own).connects, 1);

    // Back alike: shared again (b joins a's probe and schedule).
    results.clear();
    set({a, b});
    EXPECT_EQ(engine->stats().probes, 1u);
    run_to(t0 + 350ms);
    ASSERT_EQ(results.size(), 2u);
    EXPECT_EQ(results[0].scheduled, t0 + 300ms);
    EXPECT_EQ(results[1].scheduled, t0 + 300ms);
    EXPECT_EQ(io.at(shared).connects, 4);  // one probe at 300 ms
    EXPECT_FALSE(io.at(own).open);         // b's own probe is gone
}

TEST_F(EngineTest, ProbesThroughTheDataPathAreNeverShared) {
    auto a = target(HealthCheckType::kTcp, "10.0.0.1", 80, "a");
    a.check.via_vip = true;
    a.via_address = *net::IpAddress::parse("198.51.100.10");
    a.mark = 0x10001;
    auto b = a;
    b.key.vip = "b";
    set({a, b});
    EXPECT_EQ(engine->stats().probes, 2u);
    EXPECT_EQ(io.sockets.size(), 2u);
}

TEST_F(HttpEngineTest, Status429IsRateLimitedAndAlive) {
    const int fd = connect();
    io.receive(fd,
               "HTTP/1.1 429 Too Many Requests\r\nRetry-After: 42\r\nContent-Length: 0\r\n\r\n");
    turn();
    const auto r = result();
    EXPECT_EQ(r.failure, Failure::kNone);
    EXPECT_TRUE(r.rate_limited);
    EXPECT_EQ(r.retry_after, 42s);
    EXPECT_EQ(r.http_status, 429);
}

TEST_F(HttpEngineTest, Status503) {
    const int fd = connect();
    io.receive(fd, "HTTP/1.1 503 Service Unavailable\r\nContent-Length: 0\r\n\r\n");
    turn();
    EXPECT_EQ(result().failure, Failure::kStatus);
    EXPECT_EQ(result().detail, "status 503");
    EXPECT_FALSE(result().rate_limited);
}

TEST_F(HttpEngineTest, WrongBody) {
    auto t = target(HealthCheckType::kHttp);
    t.check.body_contains = "ready";
    const int fd = connect(t);
    io.receive(fd,
               "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n8\r\nstarting\r\n0\r\n\r\n");
    turn();
    EXPECT_EQ(result().failure, Failure::kBodyMismatch);
    EXPECT_EQ(result().detail, "status 200, body lacks \"ready\"");
}

TEST_F(HttpEngineTest, HeadersPastTheTimeout) {
    const int fd = connect();
    io.time = t0 + 100ms;
    io.receive(fd, "HTTP/1.1 200 OK\r\n");
    turn();
    EXPECT_TRUE(results.empty());
    run_to(t0 + 250ms);
    EXPECT_EQ(result().failure, Failure::kTimeout);
    EXPECT_EQ(result().detail, "timeout after 250ms (waiting for the response headers)");
    EXPECT_EQ(result().latency(), 250ms);
    EXPECT_TRUE(io.at(fd).abortive);
}

TEST_F(HttpEngineTest, BodyPastTheTimeout) {
    const int fd = connect();
    io.receive(fd, "HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nabc");
    run_to(t0 + 250ms);
    EXPECT_EQ(result().detail, "timeout after 250ms (reading the response body)");
}

TEST_F(HttpEngineTest, ClosedWithoutAnAnswer) {
    const int fd = connect();
    io.peer_closes(fd);
    turn();
    EXPECT_EQ(result().failure, Failure::kClosed);
    EXPECT_EQ(result().detail, "closed without a response");
}

TEST_F(HttpEngineTest, ResetWhileWaiting) {
    const int fd = connect();
    io.receive_error(fd, ECONNRESET);
    turn();
    EXPECT_EQ(result().failure, Failure::kReset);
    EXPECT_EQ(result().detail, "connection reset (waiting for the response headers)");
}

TEST_F(HttpEngineTest, NotHttp) {
    const int fd = connect();
    io.receive(fd, "SSH-2.0-OpenSSH_9.2\r\n");
    turn();
    EXPECT_EQ(result().failure, Failure::kBadResponse);
    EXPECT_TRUE(io.at(fd).abortive);
}

// --- udp -----------------------------------------------------------------------------

class UdpEngineTest : public EngineTest {
protected:
    int send_ping(std::string expect) {
        auto t = target(HealthCheckType::kUdp);
        t.check.udp_payload = "ping";
        t.check.udp_expect = std::move(expect);
        set({t});
        const int fd = io.last_fd;
        EXPECT_EQ(io.at(fd).type, SOCK_DGRAM);
        io.writable(fd);
        turn();
        EXPECT_EQ(io.at(fd).sent, "ping");
        return fd;
    }
    // The result of a ping that expects `expect` and is answered `reply`.
    ProbeResult answered(std::string expect, const std::string& reply) {
        const int fd = send_ping(std::move(expect));
        io.receive(fd, reply);
        turn();
        return result();
    }
};

TEST_F(UdpEngineTest, Reply) {
    const ProbeResult r = answered("pong", "pong v1");
    EXPECT_EQ(r.failure, Failure::kNone);
    EXPECT_EQ(r.detail, "reply of 7 bytes");
}

TEST_F(UdpEngineTest, ReplyMismatch) {
    const ProbeResult r = answered("pong", "ERR");
    EXPECT_EQ(r.failure, Failure::kReplyMismatch);
    EXPECT_EQ(r.detail, "reply of 3 bytes lacks \"pong\"");
}

TEST_F(UdpEngineTest, PortUnreachable) {
    const int fd = send_ping("");
    io.receive_error(fd, ECONNREFUSED);
    turn();
    EXPECT_EQ(result().failure, Failure::kRefused);
    EXPECT_EQ(result().detail, "port unreachable");
}

TEST_F(UdpEngineTest, NoReply) {
    send_ping("");
    run_to(t0 + 250ms);
    EXPECT_EQ(result().failure, Failure::kTimeout);
    EXPECT_EQ(result().detail, "timeout after 250ms (no reply)");
}

// --- Schedule ------------------------------------------------------------------------

TEST_F(EngineTest, ProbesOneIntervalApartWithoutDrift) {
    io.connect_result = 0;  // connected at once: a result per probe
    auto t = target(HealthCheckType::kTcp);
    t.check.interval = 1s;
    set({t});
    run_to(t0 + 5s);
    ASSERT_EQ(results.size(), 6u);
    for (std::size_t i = 0; i < results.size(); ++i) {
        EXPECT_EQ(results[i].scheduled, t0 + i * 1s);
        EXPECT_EQ(results[i].lateness(), 0ns);
    }
}

TEST_F(EngineTest, JitterAddsUpToItsShare) {
    io.connect_result = 0;
    auto t = target(HealthCheckType::kTcp);
    t.check.interval = 1s;
    t.check.jitter = 300ms;
    set({t});
    run_to(t0 + 30s);
    ASSERT_GE(results.size(), 23u);
    std::set<Clock::rep> gaps;
    for (std::size_t i = 1; i < results.size(); ++i) {
        const auto gap = results[i].scheduled - results[i - 1].scheduled;
        EXPECT_GE(gap, 1s);
        EXPECT_LE(gap, 1300ms);
        gaps.insert(gap.count());
    }
    EXPECT_GT(gaps.size(), results.size() / 2);  // jittered
}

TEST_F(EngineTest, TimersAreBatchedToTheResolution) {
    auto o = options();
    o.timer_resolution = 1ms;
    make(o);
    io.connect_result = 0;
    io.time = t0 + 300us;
    auto t = target(HealthCheckType::kTcp);
    t.check.interval = 1s;
    set({t});
    ASSERT_EQ(results.size(), 1u);       // due at once
    turn();                              // (io.deadline: what the last turn's wait was asked for)
    EXPECT_EQ(io.deadline, t0 + 251ms);  // the probe's spent deadline, rounded up
    io.time = io.deadline;
    turn();
    turn();
    EXPECT_EQ(io.deadline, t0 + 1s + 1ms);  // the next probe, due at 1 s 300 us, rounded up
    io.time = io.deadline;
    turn();
    ASSERT_EQ(results.size(), 2u);
    EXPECT_EQ(results[1].scheduled, t0 + 1s + 300us);
    EXPECT_EQ(results[1].lateness(), 700us);
}

TEST_F(EngineTest, FirstProbesAreSpread) {
    auto o = options();
    o.first_probe_spread = 200ms;
    make(o);
    io.connect_result = 0;
    std::vector<ProbeTarget> targets;
    for (int i = 0; i < 50; ++i) {
        targets.push_back(
            target(HealthCheckType::kTcp, ("10.0.1." + std::to_string(i + 1)).c_str(), 80, "v"));
    }
    set(targets);
    EXPECT_LT(results.size(), 5u);  // not one burst
    run_to(t0 + 200ms);
    ASSERT_EQ(results.size(), 50u);
    std::set<TimePoint> due;
    for (const auto& r : results) {
        EXPECT_GE(r.scheduled, t0);
        EXPECT_LT(r.scheduled, t0 + 200ms);
        EXPECT_EQ(r.lateness(), 0ns);
        due.insert(r.scheduled);
    }
    EXPECT_GT(due.size(), 45u);
}

TEST_F(EngineTest, UnchangedTargetsKeepTheirScheduleChangedOnesMove) {
    io.connect_result = 0;
    auto ta = target(HealthCheckType::kTcp, "10.0.0.1", 80, "a");
    ta.check.interval = 100ms;
    ta.check.timeout = 50ms;
    auto tb = ta;
    tb.key.vip = "b";
    tb.key.backend = *net::IpAddress::parse("10.0.0.2");
    set({ta, tb});
    run_to(t0 + 250ms);
    ASSERT_EQ(results.size(), 6u);  // a and b at 0, 100, 200 ms

    // a only gets new thresholds (not a probe change); b moves to another
    // port; c is new.
    auto ta2 = ta;
    ta2.check.unhealthy_threshold = 5;
    ta2.check.flapping.changes = 0;
    auto tb2 = tb;
    tb2.port = 81;
    auto tc = ta;
    tc.key.vip = "c";
    tc.key.backend = *net::IpAddress::parse("10.0.0.3");
    results.clear();
    set({ta2, tb2, tc});
    ASSERT_EQ(results.size(), 1u);  // c, at once
    EXPECT_EQ(results[0].key.vip, "c");
    EXPECT_EQ(results[0].scheduled, t0 + 250ms);
    run_to(t0 + 350ms);
    std::map<std::string, std::vector<TimePoint>> due;
    for (const auto& r : results) {
        due[r.key.vip].push_back(r.scheduled);
        if (r.key.vip == "b") {
            EXPECT_EQ(r.port, 81);
        }
    }
    EXPECT_EQ(due["a"], std::vector<TimePoint>{t0 + 300ms});  // as before
    EXPECT_EQ(due["b"], std::vector<TimePoint>{t0 + 300ms});  // no later than it was due
    EXPECT_EQ(due["c"], (std::vector<TimePoint>{t0 + 250ms, t0 + 350ms}));

    results.clear();
    set({ta});  // b and c go
    run_to(t0 + 1s);
    ASSERT_EQ(results.size(), 7u);  // 400 ms .. 1 s
    for (const auto& r : results) EXPECT_EQ(r.key.vip, "a");
    EXPECT_EQ(engine->stats().targets, 1u);
}

TEST_F(EngineTest, AChangedTargetAbandonsItsProbeInFlight) {
    auto t = target(HealthCheckType::kTcp);
    set({t});
    const int old_fd = io.last_fd;
    io.time = t0 + 10ms;
    auto moved = t;
    moved.port = 9090;
    set({moved});
    EXPECT_FALSE(io.at(old_fd).open);
    EXPECT_TRUE(io.at(old_fd).abortive);
    io.writable(old_fd);  // too late: stale
    turn();
    EXPECT_TRUE(results.empty());
    EXPECT_EQ(io.sockets.size(), 1u);
    run_to(t0 + 2s);  // next due: the old due time
    ASSERT_EQ(io.sockets.size(), 2u);
    EXPECT_EQ(io.at(io.last_fd).peer, "10.0.0.1 9090");
    io.writable(io.last_fd);
    turn();
    EXPECT_EQ(result().port, 9090);
    EXPECT_EQ(result().scheduled, t0 + 2s);
}

TEST_F(EngineTest, AProbeStillRunningSkipsItsRound) {
    auto t = target(HealthCheckType::kTcp);
    t.check.interval = 100ms;
    t.check.timeout = 250ms;  // longer than the interval (config forbids; the engine copes)
    set({t});
    const int fd = io.last_fd;
    run_to(t0 + 200ms);
    EXPECT_EQ(io.at(fd).connects, 1);  // 100 and 200 ms skipped
    run_to(t0 + 250ms);
    EXPECT_EQ(result().failure, Failure::kTimeout);
    run_to(t0 + 300ms);
    EXPECT_EQ(io.at(fd).connects, 2);
}

TEST_F(EngineTest, InFlightLimitDefersButLosesNothing) {
    auto o = options();
    o.max_in_flight = 2;
    make(o);
    std::vector<ProbeTarget> targets;
    for (int i = 0; i < 5; ++i) {
        targets.push_back(
            target(HealthCheckType::kTcp, ("10.0.1." + std::to_string(i + 1)).c_str(), 80, "v"));
    }
    set(targets);
    EXPECT_EQ(io.open_sockets(), 2u);
    EXPECT_EQ(engine->stats().waiting, 3u);
    EXPECT_EQ(engine->stats().in_flight, 2u);
    for (int round = 0; round < 3; ++round) {
        io.time += 10ms;
        for (auto& [fd, s] : io.sockets) {
            if (s.open) io.writable(fd);
        }
        turn();
    }
    ASSERT_EQ(results.size(), 5u);
    EXPECT_EQ(results[2].lateness(), 10ms);  // started when a place was free
    EXPECT_EQ(results[4].lateness(), 20ms);
    for (const auto& r : results) EXPECT_EQ(r.failure, Failure::kNone);
    EXPECT_EQ(engine->stats().waiting, 0u);
    EXPECT_EQ(engine->stats().probes_started, 5u);
}

TEST_F(EngineTest, CallAtRunsAtItsTime) {
    int runs = 0;
    engine->call_at(t0 + 30ms, [&] { ++runs; });
    turn();
    turn();
    EXPECT_EQ(io.deadline, t0 + 30ms);
    EXPECT_EQ(runs, 0);
    io.time = t0 + 30ms;
    turn();
    EXPECT_EQ(runs, 1);
    turn();
    EXPECT_EQ(io.deadline, TimePoint::max());  // nothing left
    EXPECT_EQ(runs, 1);
}

TEST_F(EngineTest, DestroyingTheEngineClosesItsProbes) {
    set({target(HealthCheckType::kTcp), target(HealthCheckType::kUdp, "10.0.0.3")});
    EXPECT_EQ(io.open_sockets(), 2u);
    engine.reset();
    EXPECT_EQ(io.open_sockets(), 0u);
}

TEST_F(EngineTest, ASetupErrorIsReported) {
    FakeProbeIo broken;
    broken.open_errno = EMFILE;
    ProbeEngine e(options(), {}, broken);
    auto ok = e.start();
    ASSERT_FALSE(ok);
    EXPECT_EQ(ok.error().code, EMFILE);
    EXPECT_EQ(ok.error().message(), "start the probe engine: open the fake: Too many open files");
}

}  // namespace
}  // namespace xlb::health
