// SPDX-License-Identifier: Apache-2.0
#include "xlb/health/http.h"

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <cstring>

namespace xlb::health {

namespace {

std::string_view trim(std::string_view s) {
    while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
    while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r')) {
        s.remove_suffix(1);
    }
    return s;
}

std::string lower(std::string_view s) {
    std::string out(s);
    for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    return out;
}

bool iequals(std::string_view a, std::string_view b) {
    return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
               return std::tolower(static_cast<unsigned char>(x)) ==
                      std::tolower(static_cast<unsigned char>(y));
           });
}

std::optional<std::uint64_t> decimal(std::string_view s, std::size_t max_digits = 18) {
    if (s.empty() || s.size() > max_digits) return std::nullopt;
    std::uint64_t v = 0;
    for (char c : s) {
        if (c < '0' || c > '9') return std::nullopt;
        v = v * 10 + static_cast<std::uint64_t>(c - '0');
    }
    return v;
}

// Takes bytes up to and including a '\n' into `line`. True when the line is
// complete (without its "\r\n" / "\n").
bool take_line(std::string_view bytes, std::size_t& i, std::string& line) {
    const auto nl = bytes.find('\n', i);
    if (nl == std::string_view::npos) {
        line.append(bytes.substr(i));
        i = bytes.size();
        return false;
    }
    line.append(bytes.substr(i, nl - i));
    i = nl + 1;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    return true;
}

constexpr std::size_t kMaxChunkLine = 4096;

}  // namespace

std::string http_request(const config::HealthCheck& check, const net::IpAddress& backend,
                         std::uint16_t port) {
    std::string host = check.host;
    if (host.empty()) {
        host = backend.is_v4() ? backend.to_string() : "[" + backend.to_string() + "]";
        const std::uint16_t default_port = check.type == config::HealthCheckType::kHttps ? 443 : 80;
        if (port != default_port) host += ":" + std::to_string(port);
    }
    // With reuse, HTTP/1.1's default (keep-alive) is asked for by saying nothing.
    return "GET " + check.path + " HTTP/1.1\r\nHost: " + host +
           "\r\nUser-Agent: xlb-health-check\r\nAccept: */*\r\n" +
           (check.reuse_connection ? "" : "Connection: close\r\n") + "\r\n";
}

HttpResponseReader::HttpResponseReader(std::size_t max_head, std::size_t max_body, bool keep_body)
    : max_head_(max_head), max_body_(max_body), keep_body_(keep_body) {}

HttpResponseReader::State HttpResponseReader::fail(std::string message) {
    error_ = std::move(message);
    state_ = State::kError;
    return state_;
}

HttpResponseReader::State HttpResponseReader::feed(std::string_view bytes) {
    switch (state_) {
        case State::kHead: head_.append(bytes); return parse_head();
        case State::kBody: return feed_body(bytes);
        case State::kDone:
        case State::kError: break;
    }
    return state_;
}

HttpResponseReader::State HttpResponseReader::parse_head() {
    for (;;) {
        std::size_t end = head_.find("\r\n\r\n");
        std::size_t sep = 4;
        if (const auto lf = head_.find("\n\n"); lf != std::string::npos && lf < end) {
            end = lf;
            sep = 2;
        }
        if (end == std::string::npos) {
            if (head_.size() > max_head_) {
                return fail("response headers longer than " + std::to_string(max_head_) + " bytes");
            }
            // A first line that is not a status line need not wait for more.
            if (head_.size() >= 5 && head_.compare(0, 5, "HTTP/") != 0) {
                return fail("not an HTTP response");
            }
            return state_;
        }
        if (end > max_head_) {
            return fail("response headers longer than " + std::to_string(max_head_) + " bytes");
        }
        const std::string block = head_.substr(0, end);
        std::string rest = head_.substr(end + sep);
        // Status line: HTTP/1.x SP 3DIGIT [SP reason]
        std::string_view text(block);
        const auto eol = text.find('\n');
        const std::string_view status_line = trim(text.substr(0, eol));
        if (status_line.size() < 12 || status_line.compare(0, 7, "HTTP/1.") != 0 ||
            status_line[8] != ' ' || !std::isdigit(static_cast<unsigned char>(status_line[9])) ||
            !std::isdigit(static_cast<unsigned char>(status_line[10])) ||
            !std::isdigit(static_cast<unsigned char>(status_line[11])) ||
            (status_line.size() > 12 && status_line[12] != ' ')) {
            std::string shown(status_line.substr(0, 40));
            for (char& c : shown) {
                if (static_cast<unsigned char>(c) < 0x20 || static_cast<unsigned char>(c) >= 0x7f) {
                    c = '?';
                }
            }
            return fail("not an HTTP/1.x status line: \"" + shown + "\"");
        }
        const int status =
            (status_line[9] - '0') * 100 + (status_line[10] - '0') * 10 + (status_line[11] - '0');
        if (status < 100) return fail("status " + std::to_string(status) + " is not valid");
        headers_.clear();
        std::size_t pos = eol == std::string_view::npos ? text.size() : eol + 1;
        while (pos < text.size()) {
            auto next = text.find('\n', pos);
            if (next == std::string_view::npos) next = text.size();
            const std::string_view line = trim(text.substr(pos, next - pos));
            pos = next + 1;
            if (line.empty()) continue;
            const auto colon = line.find(':');
            if (colon == std::string_view::npos || colon == 0) {
                return fail("malformed header line");
            }
            headers_.emplace_back(lower(trim(line.substr(0, colon))),
                                  std::string(trim(line.substr(colon + 1))));
        }
        if (status >= 100 && status < 200 && status != 101) {
            head_ = std::move(rest);  // interim response: the real one follows
            continue;
        }
        status_ = status;
        http_1_1_ = status_line[7] == '1';
        head_.clear();
        if (status < 200 || status == 204 || status == 304) {
            framing_ = Framing::kNone;
        } else if (auto te = header("transfer-encoding")) {
            if (lower(*te).find("chunked") == std::string::npos) {
                return fail("unsupported transfer-encoding \"" + std::string(*te) + "\"");
            }
            framing_ = Framing::kChunked;
        } else if (header("content-length")) {
            std::optional<std::uint64_t> length;
            for (const auto& [name, value] : headers_) {
                if (name != "content-length") continue;
                auto v = decimal(value);
                if (!v || (length && *length != *v)) return fail("invalid content-length");
                length = v;
            }
            framing_ = Framing::kLength;
            remaining_ = *length;
        } else {
            framing_ = Framing::kUntilClose;
        }
        if (framing_ == Framing::kNone || (framing_ == Framing::kLength && remaining_ == 0)) {
            state_ = State::kDone;
            return state_;
        }
        state_ = State::kBody;
        return rest.empty() ? state_ : feed_body(rest);
    }
}

void HttpResponseReader::keep(std::string_view bytes) {
    body_bytes_ += bytes.size();
    if (keep_body_ && body_.size() < max_body_) {
        body_.append(bytes.substr(0, max_body_ - body_.size()));
    }
    if (body_bytes_ > max_body_) truncated_ = true;
}

HttpResponseReader::State HttpResponseReader::feed_body(std::string_view bytes) {
    switch (framing_) {
        case Framing::kNone: state_ = State::kDone; return state_;
        case Framing::kUntilClose: keep(bytes); return state_;
        case Framing::kLength: {
            const auto take =
                static_cast<std::size_t>(std::min<std::uint64_t>(remaining_, bytes.size()));
            keep(bytes.substr(0, take));
            remaining_ -= take;
            if (remaining_ == 0) state_ = State::kDone;
            return state_;
        }
        case Framing::kChunked: break;
    }
    std::size_t i = 0;
    while (i < bytes.size() && state_ == State::kBody) {
        switch (chunk_) {
            case ChunkState::kSize: {
                if (!take_line(bytes, i, line_)) {
                    if (line_.size() > kMaxChunkLine) return fail("chunk size line too long");
                    break;
                }
                std::string_view size = trim(std::string_view(line_).substr(0, line_.find(';')));
                if (size.empty() || size.size() > 15) return fail("invalid chunk size");
                std::uint64_t n = 0;
                for (char c : size) {
                    const int d = std::isdigit(static_cast<unsigned char>(c)) ? c - '0'
                                  : (std::tolower(static_cast<unsigned char>(c)) >= 'a' &&
                                     std::tolower(static_cast<unsigned char>(c)) <= 'f')
                                      ? std::tolower(static_cast<unsigned char>(c)) - 'a' + 10
                                      : -1;
                    if (d < 0) return fail("invalid chunk size");
                    n = n * 16 + static_cast<std::uint64_t>(d);
                }
                line_.clear();
                remaining_ = n;
                chunk_ = n == 0 ? ChunkState::kTrailer : ChunkState::kData;
                break;
            }
            case ChunkState::kData: {
                const auto take =
                    static_cast<std::size_t>(std::min<std::uint64_t>(remaining_, bytes.size() - i));
                keep(bytes.substr(i, take));
                i += take;
                remaining_ -= take;
                if (remaining_ == 0) chunk_ = ChunkState::kDataEnd;
                break;
            }
            case ChunkState::kDataEnd:
                if (!take_line(bytes, i, line_)) {
                    if (line_.size() > 2) return fail("missing CRLF after a chunk");
                    break;
                }
                if (!line_.empty()) return fail("missing CRLF after a chunk");
                chunk_ = ChunkState::kSize;
                break;
            case ChunkState::kTrailer:
                if (!take_line(bytes, i, line_)) {
                    if (line_.size() > kMaxChunkLine) return fail("trailer line too long");
                    break;
                }
                if (line_.empty()) {
                    state_ = State::kDone;
                } else {
                    line_.clear();  // a trailer field: ignored
                }
                break;
        }
    }
    return state_;
}

HttpResponseReader::State HttpResponseReader::finish() {
    switch (state_) {
        case State::kHead:
            closed_early_ = true;
            return fail(head_.empty() ? "closed without a response"
                                      : "closed before the end of the response headers");
        case State::kBody:
            if (framing_ == Framing::kUntilClose) {
                state_ = State::kDone;
                return state_;
            }
            closed_early_ = true;
            return fail("closed before the end of the response body");
        case State::kDone:
        case State::kError: break;
    }
    return state_;
}

bool HttpResponseReader::reusable() const {
    if (state_ != State::kDone || !http_1_1_ || framing_ == Framing::kUntilClose) return false;
    // Connection is a comma-separated list of options, case-insensitive.
    for (const auto& [name, value] : headers_) {
        if (name != "connection") continue;
        std::string_view rest(value);
        while (!rest.empty()) {
            const auto comma = rest.find(',');
            if (iequals(trim(rest.substr(0, comma)), "close")) return false;
            if (comma == std::string_view::npos) break;
            rest.remove_prefix(comma + 1);
        }
    }
    return true;
}

std::optional<std::string_view> HttpResponseReader::header(std::string_view name) const {
    for (const auto& [n, v] : headers_) {
        if (iequals(n, name)) return std::string_view(v);
    }
    return std::nullopt;
}

// --- Dates ---------------------------------------------------------------------

namespace {

std::optional<unsigned> month_of(std::string_view m) {
    static constexpr const char* kMonths[] = {"Jan", "Feb", "Mar", "Apr", "May", "Jun",
                                              "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"};
    for (unsigned i = 0; i < 12; ++i) {
        if (m == kMonths[i]) return i + 1;
    }
    return std::nullopt;
}

std::optional<std::chrono::system_clock::time_point> make_time(int year, unsigned month,
                                                               unsigned day, int hh, int mm,
                                                               int ss) {
    using namespace std::chrono;
    if (hh < 0 || hh > 23 || mm < 0 || mm > 59 || ss < 0 || ss > 60) return std::nullopt;
    const year_month_day ymd{std::chrono::year(year), std::chrono::month(month),
                             std::chrono::day(day)};
    if (!ymd.ok()) return std::nullopt;
    return sys_days(ymd) + hours(hh) + minutes(mm) + seconds(ss);
}

}  // namespace

std::optional<std::chrono::system_clock::time_point> parse_http_date(std::string_view text) {
    const std::string s(trim(text));
    char wk[16] = {}, mon[4] = {}, zone[4] = {};
    int day = 0, year = 0, hh = 0, mm = 0, ss = 0, used = 0;
    // IMF-fixdate: "Sun, 06 Nov 1994 08:49:37 GMT"
    if (std::sscanf(s.c_str(), "%3[A-Za-z], %2d %3[A-Za-z] %4d %2d:%2d:%2d %3[A-Z]%n", wk, &day,
                    mon, &year, &hh, &mm, &ss, zone, &used) == 8 &&
        static_cast<std::size_t>(used) == s.size() && std::strcmp(zone, "GMT") == 0) {
        if (auto m = month_of(mon)) {
            return make_time(year, *m, static_cast<unsigned>(day), hh, mm, ss);
        }
        return std::nullopt;
    }
    // RFC 850: "Sunday, 06-Nov-94 08:49:37 GMT"
    used = 0;
    if (std::sscanf(s.c_str(), "%9[A-Za-z], %2d-%3[A-Za-z]-%2d %2d:%2d:%2d %3[A-Z]%n", wk, &day,
                    mon, &year, &hh, &mm, &ss, zone, &used) == 8 &&
        static_cast<std::size_t>(used) == s.size() && std::strcmp(zone, "GMT") == 0) {
        if (auto m = month_of(mon)) {
            return make_time(year < 70 ? 2000 + year : 1900 + year, *m, static_cast<unsigned>(day),
                             hh, mm, ss);
        }
        return std::nullopt;
    }
    // asctime: "Sun Nov  6 08:49:37 1994"
    used = 0;
    if (std::sscanf(s.c_str(), "%3[A-Za-z] %3[A-Za-z] %2d %2d:%2d:%2d %4d%n", wk, mon, &day, &hh,
                    &mm, &ss, &year, &used) == 7 &&
        static_cast<std::size_t>(used) == s.size()) {
        if (auto m = month_of(mon)) {
            return make_time(year, *m, static_cast<unsigned>(day), hh, mm, ss);
        }
    }
    return std::nullopt;
}

std::optional<std::chrono::seconds> parse_retry_after(std::string_view value,
                                                      std::optional<std::string_view> date,
                                                      std::chrono::system_clock::time_point now) {
    using namespace std::chrono;
    const std::string_view v = trim(value);
    if (auto n = decimal(v, 9)) return seconds(static_cast<seconds::rep>(*n));
    auto when = parse_http_date(v);
    if (!when) return std::nullopt;
    system_clock::time_point reference = now;
    if (date) {
        if (auto d = parse_http_date(*date)) reference = *d;
    }
    if (*when <= reference) return seconds(0);
    return ceil<seconds>(*when - reference);
}

HttpJudgement judge_http(const config::HealthCheck& check, const HttpResponseReader& response,
                         std::chrono::system_clock::time_point now) {
    HttpJudgement j;
    const int status = response.status();
    if (auto ra = response.header("retry-after")) {
        j.retry_after = parse_retry_after(*ra, response.header("date"), now);
    }
    const std::string ra_text =
        j.retry_after ? ", Retry-After " + std::to_string(j.retry_after->count()) + "s" : "";
    if (status == 429) {
        j.rate_limited = true;
        j.detail = "status 429 (rate limited" + ra_text + ")";
        return j;
    }
    j.rate_limited = status == 503 && j.retry_after.has_value();
    const bool expected = std::any_of(
        check.expected_statuses.begin(), check.expected_statuses.end(),
        [&](const config::StatusRange& r) { return status >= r.first && status <= r.last; });
    j.detail = "status " + std::to_string(status) +
               (j.rate_limited ? " (rate limited" + ra_text + ")" : "");
    if (!expected) {
        j.failure = Failure::kStatus;
        return j;
    }
    if (!check.body_contains.empty() &&
        response.body().find(check.body_contains) == std::string_view::npos) {
        j.failure = Failure::kBodyMismatch;
        std::string shown = check.body_contains.substr(0, 40);
        j.detail = "status " + std::to_string(status) + ", body lacks \"" + shown + "\"";
        if (response.body_truncated()) {
            j.detail += " in its first " + std::to_string(response.body().size()) + " bytes";
        }
    }
    return j;
}

}  // namespace xlb::health
