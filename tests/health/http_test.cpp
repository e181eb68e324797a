// SPDX-License-Identifier: Apache-2.0
// The HTTP probe's pure parts: the request, the response reader (every
// framing, fed whole and byte by byte), dates, Retry-After, the judgement.
#include "xlb/health/http.h"

#include <gtest/gtest.h>

namespace xlb::health {
namespace {

using namespace std::chrono_literals;
using State = HttpResponseReader::State;
using std::chrono::system_clock;

// Feeds `text` in pieces of `chunk` bytes (0: at once).
HttpResponseReader read(std::string_view text, std::size_t chunk = 0, bool keep = true,
                        std::size_t max_body = 1024) {
    HttpResponseReader r(512, max_body, keep);
    if (chunk == 0) {
        r.feed(text);
    } else {
        for (std::size_t i = 0; i < text.size(); i += chunk) r.feed(text.substr(i, chunk));
    }
    return r;
}

TEST(HttpRequest, DefaultHostIsTheBackendAndItsPort) {
    config::HealthCheck hc;
    hc.type = config::HealthCheckType::kHttp;
    hc.path = "/healthz";
    // Reused connections (the default) ask for HTTP/1.1's keep-alive by
    // saying nothing; one connection per probe says close.
    EXPECT_EQ(http_request(hc, *net::IpAddress::parse("10.0.0.1"), 80),
              "GET /healthz HTTP/1.1\r\nHost: 10.0.0.1\r\nUser-Agent: xlb-health-check\r\n"
              "Accept: */*\r\n\r\n");
    hc.reuse_connection = false;
    EXPECT_EQ(http_request(hc, *net::IpAddress::parse("10.0.0.1"), 80),
              "GET /healthz HTTP/1.1\r\nHost: 10.0.0.1\r\nUser-Agent: xlb-health-check\r\n"
              "Accept: */*\r\nConnection: close\r\n\r\n");
    hc.reuse_connection = true;
    const std::string v6 = http_request(hc, *net::IpAddress::parse("2001:db8::1"), 8080);
    EXPECT_NE(v6.find("\r\nHost: [2001:db8::1]:8080\r\n"), std::string::npos);
    hc.host = "www.example.com";
    EXPECT_NE(http_request(hc, *net::IpAddress::parse("10.0.0.1"), 8080)
                  .find("\r\nHost: www.example.com\r\n"),
              std::string::npos);
}

TEST(HttpRequest, HttpsHostOmitsPort443NotPort80) {
    config::HealthCheck hc;
    hc.type = config::HealthCheckType::kHttps;
    const auto backend = *net::IpAddress::parse("10.0.0.1");
    EXPECT_NE(http_request(hc, backend, 443).find("\r\nHost: 10.0.0.1\r\n"), std::string::npos);
    EXPECT_NE(http_request(hc, backend, 80).find("\r\nHost: 10.0.0.1:80\r\n"), std::string::npos);
}

TEST(HttpReader, ReusableOnlyWhenFramedHttp11AndNotClosed) {
    EXPECT_TRUE(read("HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nOK").reusable());
    EXPECT_TRUE(read("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n").reusable());
    EXPECT_TRUE(read("HTTP/1.1 204 No Content\r\nConnection: keep-alive\r\n\r\n").reusable());
    // The server says it closes (as one option of several, in any case).
    EXPECT_FALSE(
        read("HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: Close\r\n\r\nOK").reusable());
    EXPECT_FALSE(
        read("HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: upgrade, close\r\n\r\nOK")
            .reusable());
    // HTTP/1.0 closes unless told otherwise; a body that ends with the
    // connection cannot be followed by another response; incomplete: not yet.
    EXPECT_FALSE(read("HTTP/1.0 200 OK\r\nContent-Length: 2\r\n\r\nOK").reusable());
    EXPECT_FALSE(read("HTTP/1.1 200 OK\r\n\r\nOK").reusable());
    EXPECT_FALSE(read("HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nOK").reusable());
}

TEST(HttpReader, ContentLengthWholeAndByteByByte) {
    const std::string text = "HTTP/1.1 200 OK\r\nContent-Length: 5\r\nX-A: b\r\n\r\nhello";
    for (std::size_t chunk : {0, 1, 3}) {
        const auto r = read(text, chunk);
        EXPECT_EQ(r.state(), State::kDone) << chunk;
        EXPECT_EQ(r.status(), 200);
        EXPECT_EQ(r.body(), "hello");
        EXPECT_EQ(r.header("x-a"), "b");
        EXPECT_EQ(r.header("CONTENT-LENGTH"), "5");
    }
    auto partial = read("HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhel");
    EXPECT_EQ(partial.state(), State::kBody);
    EXPECT_EQ(partial.finish(), State::kError);
    EXPECT_TRUE(partial.closed_early());
}

TEST(HttpReader, ChunkedWholeAndByteByByte) {
    const std::string text =
        "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
        "4\r\nWiki\r\n6;ext=1\r\npedia \r\nE\r\nin \r\n\r\nchunks.\r\n0\r\nTrailer: x\r\n\r\n";
    for (std::size_t chunk : {0, 1, 2, 7}) {
        const auto r = read(text, chunk);
        EXPECT_EQ(r.state(), State::kDone) << chunk;
        EXPECT_EQ(r.body(), "Wikipedia in \r\n\r\nchunks.") << chunk;
    }
    EXPECT_EQ(read("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n").state(),
              State::kError);
}

TEST(HttpReader, BodyUntilTheConnectionCloses) {
    auto r = read("HTTP/1.0 200 OK\r\nServer: x\r\n\r\nall of it");
    EXPECT_EQ(r.state(), State::kBody);
    EXPECT_EQ(r.finish(), State::kDone);
    EXPECT_EQ(r.body(), "all of it");
}

TEST(HttpReader, NoBodyStatuses) {
    EXPECT_EQ(read("HTTP/1.1 204 No Content\r\nContent-Length: 10\r\n\r\n").state(), State::kDone);
    EXPECT_EQ(read("HTTP/1.1 304 Not Modified\r\n\r\n").state(), State::kDone);
    EXPECT_EQ(read("HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n").state(), State::kDone);
}

TEST(HttpReader, InterimResponsesAreSkipped) {
    const auto r = read(
        "HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 503 Service Unavailable\r\nContent-Length: "
        "0\r\n\r\n",
        5);
    EXPECT_EQ(r.state(), State::kDone);
    EXPECT_EQ(r.status(), 503);
}

TEST(HttpReader, BareLineFeedsAreAccepted) {
    const auto r = read("HTTP/1.1 200 OK\nContent-Length: 2\n\nok");
    EXPECT_EQ(r.state(), State::kDone);
    EXPECT_EQ(r.body(), "ok");
}

TEST(HttpReader, MalformedResponses) {
    auto not_http = read("SSH-2.0-OpenSSH_9.2\r\n");
    EXPECT_EQ(not_http.state(), State::kError);
    EXPECT_FALSE(not_http.closed_early());
    EXPECT_EQ(read("HTTP/1.1 2x0 OK\r\n\r\n").state(), State::kError);
    EXPECT_EQ(read("HTTP/2 200\r\n\r\n").state(), State::kError);
    EXPECT_EQ(read("HTTP/1.1 200 OK\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n").state(),
              State::kError);
    EXPECT_EQ(read("HTTP/1.1 200 OK\r\nno colon\r\n\r\n").state(), State::kError);
    EXPECT_EQ(read("HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip\r\n\r\n").state(), State::kError);
    const auto big = read("HTTP/1.1 200 OK\r\nX: " + std::string(600, 'a'), 64);
    EXPECT_EQ(big.state(), State::kError);
    EXPECT_NE(big.error().find("longer than 512"), std::string::npos);
    auto closed = read("");
    EXPECT_EQ(closed.finish(), State::kError);
    EXPECT_TRUE(closed.closed_early());
    EXPECT_EQ(closed.error(), "closed without a response");
}

TEST(HttpReader, LongBodiesAreTruncatedOrOnlyCounted) {
    const std::string text =
        "HTTP/1.1 200 OK\r\nContent-Length: 3000\r\n\r\n" + std::string(3000, 'x');
    auto kept = read(text, 100, true, 1000);
    EXPECT_TRUE(kept.body_truncated());
    EXPECT_EQ(kept.body().size(), 1000u);
    auto counted = read(text, 100, false, 1000);
    EXPECT_TRUE(counted.body_truncated());
    EXPECT_TRUE(counted.body().empty());
    auto small = read("HTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\nabc", 0, false);
    EXPECT_EQ(small.state(), State::kDone);
    EXPECT_FALSE(small.body_truncated());
}

TEST(HttpDate, ThreeForms) {
    const auto want = std::chrono::sys_days(std::chrono::year(1994) / 11 / 6) + 8h + 49min + 37s;
    EXPECT_EQ(parse_http_date("Sun, 06 Nov 1994 08:49:37 GMT"), want);
    EXPECT_EQ(parse_http_date("Sunday, 06-Nov-94 08:49:37 GMT"), want);
    EXPECT_EQ(parse_http_date("Sun Nov  6 08:49:37 1994"), want);
    EXPECT_FALSE(parse_http_date("Sun, 06 Nov 1994 08:49:37 CET"));
    EXPECT_FALSE(parse_http_date("Sun, 31 Feb 1994 08:49:37 GMT"));
    EXPECT_FALSE(parse_http_date("yesterday"));
    EXPECT_FALSE(parse_http_date("Sun, 06 Nov 1994 08:49:37 GMT trailing"));
}

TEST(RetryAfter, SecondsOrADate) {
    const auto now = std::chrono::sys_days(std::chrono::year(2024) / 1 / 1) + 12h;
    EXPECT_EQ(parse_retry_after("120", std::nullopt, now), 120s);
    EXPECT_EQ(parse_retry_after(" 0 ", std::nullopt, now), 0s);
    EXPECT_FALSE(parse_retry_after("-1", std::nullopt, now));
    EXPECT_FALSE(parse_retry_after("1.5", std::nullopt, now));
    EXPECT_FALSE(parse_retry_after("soon", std::nullopt, now));
    // A date, relative to our clock ...
    EXPECT_EQ(parse_retry_after("Mon, 01 Jan 2024 12:01:30 GMT", std::nullopt, now), 90s);
    EXPECT_EQ(parse_retry_after("Mon, 01 Jan 2024 11:00:00 GMT", std::nullopt, now), 0s);
    // ... or to the response's Date, which is immune to clock skew.
    EXPECT_EQ(parse_retry_after("Mon, 01 Jan 2024 09:00:30 GMT",
                                std::string_view("Mon, 01 Jan 2024 09:00:00 GMT"), now),
              30s);
}

config::HealthCheck http_check(std::string body = "") {
    config::HealthCheck hc;
    hc.type = config::HealthCheckType::kHttp;
    hc.body_contains = std::move(body);
    return hc;
}

HttpJudgement judge(const config::HealthCheck& hc, std::string_view text) {
    auto r = read(text);
    return judge_http(hc, r, system_clock::now());
}

TEST(HttpJudge, StatusesAndBodies) {
    const auto ok = judge(http_check(), "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n");
    EXPECT_EQ(ok.failure, Failure::kNone);
    EXPECT_EQ(ok.detail, "status 200");
    const auto bad = judge(http_check(), "HTTP/1.1 503 Unavailable\r\nContent-Length: 0\r\n\r\n");
    EXPECT_EQ(bad.failure, Failure::kStatus);
    EXPECT_EQ(bad.detail, "status 503");
    EXPECT_FALSE(bad.rate_limited);
    auto ranges = http_check();
    ranges.expected_statuses = {{200, 204}, {301, 301}};
    EXPECT_EQ(judge(ranges, "HTTP/1.1 301 Moved\r\nContent-Length: 0\r\n\r\n").failure,
              Failure::kNone);
    EXPECT_EQ(judge(ranges, "HTTP/1.1 205 Reset\r\nContent-Length: 0\r\n\r\n").failure,
              Failure::kStatus);
    const auto body =
        judge(http_check("ready"), "HTTP/1.1 200 OK\r\nContent-Length: 8\r\n\r\nnot yet!");
    EXPECT_EQ(body.failure, Failure::kBodyMismatch);
    EXPECT_EQ(body.detail, "status 200, body lacks \"ready\"");
    EXPECT_EQ(
        judge(http_check("ready"), "HTTP/1.1 200 OK\r\nContent-Length: 9\r\n\r\nall ready").failure,
        Failure::kNone);
}

TEST(HttpJudge, RateLimited) {
    const auto plain = judge(http_check(), "HTTP/1.1 429 Too Many\r\nContent-Length: 0\r\n\r\n");
    EXPECT_EQ(plain.failure, Failure::kNone);  // not a health failure
    EXPECT_TRUE(plain.rate_limited);
    EXPECT_FALSE(plain.retry_after);
    EXPECT_EQ(plain.detail, "status 429 (rate limited)");
    // The body of a 429 is not checked.
    const auto with =
        judge(http_check("ready"),
              "HTTP/1.1 429 Too Many\r\nRetry-After: 30\r\nContent-Length: 0\r\n\r\n");
    EXPECT_EQ(with.failure, Failure::kNone);
    EXPECT_EQ(with.retry_after, 30s);
    EXPECT_EQ(with.detail, "status 429 (rate limited, Retry-After 30s)");
    const auto busy =
        judge(http_check(), "HTTP/1.1 503 Busy\r\nRetry-After: 10\r\nContent-Length: 0\r\n\r\n");
    EXPECT_EQ(busy.failure, Failure::kStatus);
    EXPECT_TRUE(busy.rate_limited);
    EXPECT_EQ(busy.retry_after, 10s);
    const auto other =
        judge(http_check(), "HTTP/1.1 500 Oops\r\nRetry-After: 10\r\nContent-Length: 0\r\n\r\n");
    EXPECT_FALSE(other.rate_limited);
}

}  // namespace
}  // namespace xlb::health
