// SPDX-License-Identifier: Apache-2.0
// The HTTP side of the http probe, pure: the request, an incremental reader
// of the response (status line, headers, body framed by Content-Length,
// chunked encoding or the end of the connection), Retry-After, and the
// judgement of a response against the check.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "xlb/config/model.h"
#include "xlb/health/types.h"

namespace xlb::health {

// "GET /path HTTP/1.1" with Host (the check's, or the backend's address and
// a port other than 80, 443 for https), User-Agent, Accept, and "Connection: close" unless the
// check reuses its connection.
std::string http_request(const config::HealthCheck& check, const net::IpAddress& backend,
                         std::uint16_t port);

class HttpResponseReader {
public:
    enum class State { kHead, kBody, kDone, kError };

    // Headers beyond max_head bytes are an error. Body bytes are kept up to
    // max_body when keep_body (for body_contains), otherwise only counted.
    HttpResponseReader(std::size_t max_head, std::size_t max_body, bool keep_body);

    // Bytes as they arrive. Interim 1xx responses are skipped.
    State feed(std::string_view bytes);
    // The peer closed: completes a body delimited by the end of the
    // connection; anything else incomplete is an error.
    State finish();

    State state() const { return state_; }
    int status() const { return status_; }
    std::optional<std::string_view> header(std::string_view name) const;  // first, trimmed
    std::string_view body() const { return body_; }
    bool body_truncated() const { return truncated_; }  // more than max_body arrived
    const std::string& error() const { return error_; }
    // kError because the peer closed before the response was complete (as
    // opposed to a malformed response).
    bool closed_early() const { return closed_early_; }
    // The response is complete and leaves the connection usable for the
    // next request: HTTP/1.1, framed by length or chunks (not by the end of
    // the connection), and no "close" among the Connection options.
    bool reusable() const;

private:
    State parse_head();
    State feed_body(std::string_view bytes);
    void keep(std::string_view bytes);
    State fail(std::string message);

    std::size_t max_head_;
    std::size_t max_body_;
    bool keep_body_;
    State state_ = State::kHead;
    std::string head_;  // raw status line and headers
    int status_ = 0;
    bool http_1_1_ = false;  // the status line's version is 1.1 (else 1.0)
    std::vector<std::pair<std::string, std::string>> headers_;  // names in lower case
    // Body framing.
    enum class Framing { kNone, kLength, kChunked, kUntilClose } framing_ = Framing::kNone;
    std::uint64_t remaining_ = 0;  // kLength: body bytes; kChunked: bytes of the current chunk
    enum class ChunkState { kSize, kData, kDataEnd, kTrailer } chunk_ = ChunkState::kSize;
    std::string line_;  // a partial chunk-size or trailer line
    std::string body_;
    std::uint64_t body_bytes_ = 0;
    bool truncated_ = false;
    bool closed_early_ = false;
    std::string error_;
};

// An HTTP-date (RFC 9110 5.6.7: IMF-fixdate, and the obsolete RFC 850 and
// asctime forms).
std::optional<std::chrono::system_clock::time_point> parse_http_date(std::string_view text);

// Retry-After as a delay: delta-seconds, or an HTTP-date taken relative to
// the response's Date header when there is one (immune to clock skew between
// the backend and this host), else to `now`. A date in the past is 0 s.
std::optional<std::chrono::seconds> parse_retry_after(std::string_view value,
                                                      std::optional<std::string_view> date,
                                                      std::chrono::system_clock::time_point now);

struct HttpJudgement {
    Failure failure = Failure::kNone;
    std::string detail;  // "status 200", "status 503", "body lacks \"OK\"", ...
    bool rate_limited = false;
    std::optional<std::chrono::seconds> retry_after;
};

// A complete (or, past max_body, truncated) response against the check:
//  - 429 is a success that is rate limited, whatever expected_statuses says
//    (it says the backend is alive and pushing back; its body is not checked);
//  - otherwise the status must be in expected_statuses and the body must
//    contain body_contains (in its first max_body bytes);
//  - a 503 with Retry-After is rate limited as well (and a failure unless
//    expected_statuses includes 503).
HttpJudgement judge_http(const config::HealthCheck& check, const HttpResponseReader& response,
                         std::chrono::system_clock::time_point now);

}  // namespace xlb::health
