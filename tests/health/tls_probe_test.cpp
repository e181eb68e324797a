// SPDX-License-Identifier: Apache-2.0
// https probes with real sockets against a TLS server on loopback, whose
// certificates the openssl command makes at set-up (servers.h,
// TestCertificates): a CA, a good certificate, an expired one and one for
// another name. Each waits for its result, not for time.
#include <gtest/gtest.h>

#include <filesystem>
#include <functional>
#include <memory>
#include <string>

#include "event_log.h"
#include "servers.h"
#include "xlb/health/engine.h"

namespace xlb::health {
namespace {

using namespace std::chrono_literals;
using config::HealthCheckType;
using test::TestCertificates;
using test::TlsServer;

using Collector = xlb::test::EventLog<ProbeResult>;

class TlsProbe : public ::testing::Test {
protected:
    static void SetUpTestSuite() { certs_ = std::make_unique<TestCertificates>(); }
    static void TearDownTestSuite() { certs_.reset(); }
    void SetUp() override { ASSERT_EQ(certs_->error(), "") << "making the certificates"; }

    static std::unique_ptr<TlsServer> server(const std::string& cert,
                                             std::string response =
                                                 "HTTP/1.1 200 OK\r\n"
                                                 "Content-Length: 2\r\n\r\nOK") {
        auto s = std::make_unique<TlsServer>(
            "127.0.0.1", certs_->cert(cert), certs_->key(cert),
            [response](TlsServer::Connection& c) {
                while (c.read_request().find("\r\n\r\n") != std::string::npos) c.write(response);
            });
        EXPECT_TRUE(s->ready()) << "the TLS server could not load " << cert;
        return s;
    }

    static ProbeTarget target(std::uint16_t port) {
        ProbeTarget t;
        t.key = TargetKey{"test", *net::IpAddress::parse("127.0.0.1")};
        t.port = port;
        t.check.type = HealthCheckType::kHttps;
        t.check.interval = 2s;
        t.check.timeout = 1s;
        t.check.jitter = 0ms;
        t.check.path = "/healthz";
        t.check.sni = "backend.test";
        t.check.ca_file = certs_->ca();
        return t;
    }

    static ProbeEngine::Options options() {
        ProbeEngine::Options o;
        o.first_probe_spread = 5ms;
        o.seed = 7;
        return o;
    }

    static ProbeResult probe_once(const ProbeTarget& t) {
        Collector c;
        ProbeEngine engine(options(), std::ref(c));
        engine.set_targets({t});
        EXPECT_TRUE(engine.start().has_value());
        auto results = c.wait_for(1, 5s);
        engine.stop();
        EXPECT_FALSE(results.empty()) << "no result";
        return results.empty() ? ProbeResult{} : results.front();
    }

    static std::string peer(std::uint16_t port) { return "127.0.0.1:" + std::to_string(port); }

    static inline std::unique_ptr<TestCertificates> certs_;
};

TEST_F(TlsProbe, GoodCertificatePassesWithTheHttpCheckInside) {
    auto s = server("good");
    const auto r = probe_once(target(s->port()));
    EXPECT_EQ(r.failure, Failure::kNone) << r.detail;
    EXPECT_EQ(r.type, HealthCheckType::kHttps);
    EXPECT_EQ(r.http_status, 200);
    EXPECT_EQ(r.detail, "status 200");
    ASSERT_EQ(s->server_names().size(), 1u);
    EXPECT_EQ(s->server_names()[0], "backend.test");
    const auto requests = s->requests();
    ASSERT_FALSE(requests.empty());
    EXPECT_EQ(requests[0].rfind("GET /healthz HTTP/1.1\r\n", 0), 0u) << requests[0];
    EXPECT_NE(requests[0].find("\r\nHost: 127.0.0.1:" + std::to_string(s->port()) + "\r\n"),
              std::string::npos)
        << requests[0];
}

TEST_F(TlsProbe, WithoutANameTheCertificateMustNameTheAddress) {
    auto good = server("good");  // IP:127.0.0.1 among its names
    auto t = target(good->port());
    t.check.sni.clear();
    const auto r = probe_once(t);
    EXPECT_EQ(r.failure, Failure::kNone) << r.detail;
    ASSERT_EQ(good->server_names().size(), 1u);
    EXPECT_EQ(good->server_names()[0], "");  // an address is never sent as SNI

    auto other = server("wrong-name");  // other.test only
    t.port = other->port();
    const auto wrong = probe_once(t);
    EXPECT_EQ(wrong.failure, Failure::kTls);
    EXPECT_EQ(wrong.detail, "TLS handshake with " + peer(other->port()) + ": IP address mismatch");
}

TEST_F(TlsProbe, HostNameIsTheServerNameWithoutSni) {
    auto s = server("good");
    auto t = target(s->port());
    t.check.sni.clear();
    t.check.host = "backend.test:8443";
    const auto r = probe_once(t);
    EXPECT_EQ(r.failure, Failure::kNone) << r.detail;
    ASSERT_EQ(s->server_names().size(), 1u);
    EXPECT_EQ(s->server_names()[0], "backend.test");
}

TEST_F(TlsProbe, ExpiredCertificateFailsWithTheLibrarysReason) {
    auto s = server("expired");
    const auto r = probe_once(target(s->port()));
    EXPECT_EQ(r.failure, Failure::kTls);
    EXPECT_EQ(r.detail, "TLS handshake with " + peer(s->port()) + ": certificate has expired");
    EXPECT_EQ(r.http_status, 0);
    EXPECT_TRUE(s->requests().empty());
}

TEST_F(TlsProbe, WrongNameFailsWithTheLibrarysReason) {
    auto s = server("wrong-name");
    const auto r = probe_once(target(s->port()));
    EXPECT_EQ(r.failure, Failure::kTls);
    EXPECT_EQ(r.detail, "TLS handshake with " + peer(s->port()) + ": hostname mismatch");
    EXPECT_TRUE(s->requests().empty());
}

TEST_F(TlsProbe, AnotherCaFailsVerification) {
    auto s = server("good");
    auto t = target(s->port());
    t.check.ca_file.clear();  // the system's trust store, which lacks the test CA
    const auto r = probe_once(t);
    EXPECT_EQ(r.failure, Failure::kTls);
    EXPECT_EQ(r.detail.rfind("TLS handshake with " + peer(s->port()) + ": ", 0), 0u) << r.detail;
    EXPECT_NE(r.detail.find("issuer certificate"), std::string::npos) << r.detail;
}

TEST_F(TlsProbe, VerificationOffAcceptsExpiredAndWrongName) {
    for (const char* cert : {"expired", "wrong-name"}) {
        auto s = server(cert);
        auto t = target(s->port());
        t.check.verify = false;
        t.check.ca_file.clear();
        const auto r = probe_once(t);
        EXPECT_EQ(r.failure, Failure::kNone) << cert << ": " << r.detail;
        EXPECT_EQ(r.http_status, 200) << cert;
    }
}

TEST_F(TlsProbe, HttpStatusIsCheckedInsideTls) {
    auto s = server("good", "HTTP/1.1 503 Service Unavailable\r\nContent-Length: 0\r\n\r\n");
    const auto r = probe_once(target(s->port()));
    EXPECT_EQ(r.failure, Failure::kStatus);
    EXPECT_EQ(r.http_status, 503);
    EXPECT_EQ(r.detail, "status 503");

    auto body = server("good", "HTTP/1.1 200 OK\r\nContent-Length: 8\r\n\r\nstarting");
    auto t = target(body->port());
    t.check.body_contains = "ready";
    const auto b = probe_once(t);
    EXPECT_EQ(b.failure, Failure::kBodyMismatch);
}

// Catches a TLS context kept across a configuration change by a slot whose
// check did not change: the operator replaces the CA file and reloads, and
// the probes must trust the new one.
TEST_F(TlsProbe, AConfigurationChangeReadsAReplacedCaFileAgain) {
    namespace fs = std::filesystem;
    auto s = server("good");
    const std::string ca_file = certs_->cert("rotated-ca");
    // First a file with a certificate that is no CA of the server's.
    fs::copy_file(certs_->cert("wrong-name"), ca_file, fs::copy_options::overwrite_existing);
    auto t = target(s->port());
    t.check.ca_file = ca_file;
    t.check.interval = 100ms;
    t.check.timeout = 90ms;
    Collector c;
    ProbeEngine engine(options(), std::ref(c));
    engine.set_targets({t});
    ASSERT_TRUE(engine.start().has_value());
    auto results = c.wait_for(2, 5s);
    ASSERT_GE(results.size(), 2u);
    EXPECT_EQ(results[0].failure, Failure::kTls) << results[0].detail;
    fs::copy_file(certs_->ca(), ca_file, fs::copy_options::overwrite_existing);
    engine.set_targets({t});  // a reload: the same check
    const std::size_t before = c.wait_for(0, 0ms).size();
    results = c.wait_for(before + 3, 5s);
    engine.stop();
    ASSERT_GE(results.size(), before + 3);
    EXPECT_EQ(results.back().failure, Failure::kNone) << results.back().detail;
    fs::remove(ca_file);
}

TEST_F(TlsProbe, ReusesOneSessionForSeveralProbes) {
    auto s = server("good");
    auto t = target(s->port());
    t.check.interval = 100ms;
    t.check.timeout = 90ms;
    Collector c;
    ProbeEngine engine(options(), std::ref(c));
    engine.set_targets({t});
    ASSERT_TRUE(engine.start().has_value());
    const auto results = c.wait_for(4, 5s);
    const auto stats = engine.stats();
    engine.stop();
    ASSERT_GE(results.size(), 4u);
    for (const ProbeResult& r : results) EXPECT_EQ(r.failure, Failure::kNone) << r.detail;
    EXPECT_EQ(s->accepted(), 1);
    EXPECT_EQ(s->handshakes(), 1);
    EXPECT_GE(stats.reused, 3u);
}

// A reload that leaves the CA file as it was keeps the kept connection (no
// handshake per backend at every configuration change).
TEST_F(TlsProbe, AConfigurationChangeKeepsTheSessionWhileTheCaFileStays) {
    auto s = server("good");
    auto t = target(s->port());
    t.check.interval = 100ms;
    t.check.timeout = 90ms;
    Collector c;
    ProbeEngine engine(options(), std::ref(c));
    engine.set_targets({t});
    ASSERT_TRUE(engine.start().has_value());
    ASSERT_GE(c.wait_for(2, 5s).size(), 2u);
    engine.set_targets({t});
    const std::size_t before = c.wait_for(0, 0ms).size();
    const auto results = c.wait_for(before + 2, 5s);
    engine.stop();
    ASSERT_GE(results.size(), before + 2);
    for (const ProbeResult& r : results) EXPECT_EQ(r.failure, Failure::kNone) << r.detail;
    EXPECT_EQ(s->accepted(), 1);
    EXPECT_EQ(s->handshakes(), 1);
}

TEST_F(TlsProbe, WithoutReuseEachProbeHandshakesAgain) {
    auto s = server("good", "HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nOK");
    auto t = target(s->port());
    t.check.interval = 100ms;
    t.check.timeout = 90ms;
    t.check.reuse_connection = false;
    Collector c;
    ProbeEngine engine(options(), std::ref(c));
    engine.set_targets({t});
    ASSERT_TRUE(engine.start().has_value());
    const auto results = c.wait_for(3, 5s);
    engine.stop();
    ASSERT_GE(results.size(), 3u);
    for (const ProbeResult& r : results) EXPECT_EQ(r.failure, Failure::kNone) << r.detail;
    EXPECT_GE(s->handshakes(), 3);
    EXPECT_NE(s->requests()[0].find("\r\nConnection: close\r\n"), std::string::npos);
}

TEST_F(TlsProbe, PlainHttpServerIsATlsFailure) {
    test::TcpServer plain("127.0.0.1", [](test::TcpServer::Connection& c) {
        c.write("HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\nConnection: close\r\n\r\n");
    });
    const auto r = probe_once(target(plain.port()));
    EXPECT_EQ(r.failure, Failure::kTls);
    EXPECT_EQ(r.detail.rfind("TLS handshake with " + peer(plain.port()) + ": ", 0), 0u) << r.detail;
}

TEST_F(TlsProbe, UnreadableCaFileIsALocalFailure) {
    auto s = server("good");
    auto t = target(s->port());
    t.check.ca_file = "/nonexistent/xlb-ca.pem";
    const auto r = probe_once(t);
    EXPECT_EQ(r.failure, Failure::kLocal);
    EXPECT_EQ(r.detail.rfind("could not probe: load the CA file /nonexistent/xlb-ca.pem: ", 0), 0u)
        << r.detail;
    EXPECT_EQ(s->accepted(), 0);  // no connection for a probe that cannot judge it
}

}  // namespace
}  // namespace xlb::health
