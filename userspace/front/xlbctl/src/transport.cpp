// SPDX-License-Identifier: Apache-2.0
// A minimal HTTP/1.1 client over AF_UNIX: enough for xlbd's API, with errno
// kept for every failure and one deadline for the whole exchange.
#include "xlb/xlbctl/transport.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstring>
#include <thread>

#ifndef XLBCTL_VERSION
#define XLBCTL_VERSION "unknown"
#endif

namespace xlb::xlbctl {

namespace {

using Clock = std::chrono::steady_clock;

class Fd {
public:
    explicit Fd(int fd) : fd_(fd) {}
    Fd(const Fd&) = delete;
    Fd& operator=(const Fd&) = delete;
    ~Fd() {
        if (fd_ >= 0) ::close(fd_);
    }
    int get() const { return fd_; }

private:
    int fd_;
};

std::string lower(std::string_view s) {
    std::string out(s);
    std::transform(out.begin(), out.end(), out.begin(),
                   [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
    return out;
}

std::string_view trim(std::string_view s) {
    while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
    while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r'))
        s.remove_suffix(1);
    return s;
}

enum class ParseState { kIncomplete, kDone, kError };

struct Parsed {
    ParseState state = ParseState::kIncomplete;
    HttpResponse response;
    std::string error;
};

// The chunk of a chunked body that starts at in[at]: kDone with `chunk`
// set and `at` moved past it (an empty chunk is the last one; trailers are
// not needed), kIncomplete while it has not all arrived.
ParseState next_chunk(std::string_view in, std::size_t& at, std::string_view& chunk,
                      std::string& error) {
    const std::size_t eol = in.find("\r\n", at);
    if (eol == std::string_view::npos) return ParseState::kIncomplete;
    std::string_view size_text = in.substr(at, eol - at);
    if (auto semi = size_text.find(';'); semi != std::string_view::npos)
        size_text = size_text.substr(0, semi);
    size_text = trim(size_text);
    std::size_t size = 0;
    auto [end, ec] =
        std::from_chars(size_text.data(), size_text.data() + size_text.size(), size, 16);
    if (size_text.empty() || ec != std::errc{} || end != size_text.data() + size_text.size()) {
        error = "bad chunk size '" + std::string(size_text) + "'";
        return ParseState::kError;
    }
    if (size == 0) {
        chunk = {};
        at = eol + 2;
        return ParseState::kDone;
    }
    if (in.size() < eol + 2 + size + 2) return ParseState::kIncomplete;
    chunk = in.substr(eol + 2, size);
    at = eol + 2 + size + 2;
    return ParseState::kDone;
}

// Decodes a chunked body; kIncomplete until the last chunk.
ParseState dechunk(std::string_view in, std::string& out, std::string& error) {
    out.clear();
    std::size_t at = 0;
    while (true) {
        std::string_view chunk;
        const ParseState state = next_chunk(in, at, chunk, error);
        if (state != ParseState::kDone || chunk.empty()) return state;
        out.append(chunk);
    }
}

Parsed try_parse(const std::string& raw, bool eof) {
    Parsed p;
    const std::size_t head_end = raw.find("\r\n\r\n");
    if (head_end == std::string::npos) {
        if (eof) {
            p.state = ParseState::kError;
            p.error = raw.empty() ? "the connection closed without a reply"
                                  : "the reply ended inside its headers";
        }
        return p;
    }
    std::string_view head(raw.data(), head_end);
    const std::size_t first_eol = head.find("\r\n");
    std::string_view status_line = head.substr(0, first_eol);
    // "HTTP/1.1 200 OK"
    if (!status_line.starts_with("HTTP/1.") || status_line.size() < 12 || status_line[8] != ' ') {
        p.state = ParseState::kError;
        p.error =
            "not an HTTP reply (status line '" + std::string(status_line.substr(0, 40)) + "')";
        return p;
    }
    int status = 0;
    auto [end, ec] = std::from_chars(status_line.data() + 9, status_line.data() + 12, status);
    if (ec != std::errc{} || end != status_line.data() + 12 || status < 100 || status > 599) {
        p.state = ParseState::kError;
        p.error = "bad HTTP status in '" + std::string(status_line) + "'";
        return p;
    }
    std::optional<std::size_t> length;
    bool chunked = false;
    std::size_t at = first_eol == std::string_view::npos ? head.size() : first_eol + 2;
    while (at < head.size()) {
        std::size_t eol = head.find("\r\n", at);
        if (eol == std::string_view::npos) eol = head.size();
        std::string_view line = head.substr(at, eol - at);
        at = eol + 2;
        const std::size_t colon = line.find(':');
        if (colon == std::string_view::npos) continue;
        const std::string name = lower(trim(line.substr(0, colon)));
        const std::string_view value = trim(line.substr(colon + 1));
        if (name == "content-length") {
            std::size_t n = 0;
            auto [e, c] = std::from_chars(value.data(), value.data() + value.size(), n);
            if (c != std::errc{} || e != value.data() + value.size()) {
                p.state = ParseState::kError;
                p.error = "bad Content-Length '" + std::string(value) + "'";
                return p;
            }
            length = n;
        } else if (name == "transfer-encoding" &&
                   lower(value).find("chunked") != std::string::npos) {
            chunked = true;
        }
    }
    p.response.status = status;
    const std::string_view body(raw.data() + head_end + 4, raw.size() - head_end - 4);
    if (chunked) {
        p.state = dechunk(body, p.response.body, p.error);
        if (p.state == ParseState::kIncomplete && eof) {
            p.state = ParseState::kError;
            p.error = "the reply ended inside its chunked body";
        }
        return p;
    }
    if (length) {
        if (body.size() < *length) {
            if (eof) {
                p.state = ParseState::kError;
                p.error =
                    fmt::format("the reply ended after {} of {} body bytes", body.size(), *length);
            }
            return p;
        }
        p.response.body.assign(body.substr(0, *length));
        p.state = ParseState::kDone;
        return p;
    }
    if (status == 204 || status == 304 || status < 200) {
        p.state = ParseState::kDone;
        return p;
    }
    // No length: the body runs to the end of the stream.
    if (eof) {
        p.response.body.assign(body);
        p.state = ParseState::kDone;
    }
    return p;
}

int remaining_ms(Clock::time_point deadline) {
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
    return static_cast<int>(std::max<std::int64_t>(0, left.count()));
}

std::unexpected<TransportError> fail(TransportError::Stage stage, int err,
                                     std::string detail = {}) {
    if (detail.empty() && err) detail = std::strerror(err);
    return std::unexpected(TransportError{stage, err, std::move(detail)});
}

// Appends what fd has to `into`, waiting for it until `until`: 0 when bytes
// came, -1 when the peer closed, else the errno (ETIMEDOUT at the deadline).
int wait_for(int fd, short events, Clock::time_point deadline);
int receive_some(int fd, std::string& into, Clock::time_point until) {
    char buf[16384];
    while (true) {
        if (int w = wait_for(fd, POLLIN, until); w) return w;
        const ssize_t n = ::recv(fd, buf, sizeof(buf), 0);
        if (n > 0) {
            into.append(buf, static_cast<std::size_t>(n));
            return 0;
        }
        if (n == 0) return -1;
        if (errno != EINTR && errno != EAGAIN) return errno;
    }
}

// Waits for `events` on fd until the deadline: 0, or ETIMEDOUT / errno.
int wait_for(int fd, short events, Clock::time_point deadline) {
    while (true) {
        pollfd p{fd, events, 0};
        const int rc = ::poll(&p, 1, remaining_ms(deadline));
        if (rc > 0) return 0;
        if (rc == 0) return ETIMEDOUT;
        if (errno != EINTR) return errno;
    }
}

}  // namespace

Result<HttpResponse> parse_http_response(const std::string& raw) {
    Parsed p = try_parse(raw, true);
    if (p.state != ParseState::kDone) return xlb::fail(p.error);
    return std::move(p.response);
}

UnixSocketTransport::UnixSocketTransport(std::string path, std::chrono::milliseconds timeout,
                                         std::string reason)
    : path_(std::move(path)), timeout_(timeout), reason_(std::move(reason)) {}

std::expected<HttpResponse, TransportError> Transport::stream(const HttpRequest& request,
                                                              const BodySink& sink,
                                                              std::chrono::milliseconds) {
    auto r = send(request);
    if (r && r->status == 200) {
        sink(r->body);
        r->body.clear();
    }
    return r;
}

std::expected<HttpResponse, TransportError> UnixSocketTransport::send(const HttpRequest& request) {
    return exchange(request, nullptr, {});
}

std::expected<HttpResponse, TransportError> UnixSocketTransport::stream(
    const HttpRequest& request, const BodySink& sink, std::chrono::milliseconds idle) {
    return exchange(request, &sink, idle);
}

std::expected<HttpResponse, TransportError> UnixSocketTransport::exchange(
    const HttpRequest& request, const BodySink* sink, std::chrono::milliseconds idle) {
    using Stage = TransportError::Stage;
    Clock::time_point deadline = Clock::now() + timeout_;
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    if (path_.empty() || path_.size() >= sizeof(addr.sun_path))
        return fail(Stage::kConnect, ENAMETOOLONG);
    std::memcpy(addr.sun_path, path_.c_str(), path_.size() + 1);

    Fd fd(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
    if (fd.get() < 0) return fail(Stage::kConnect, errno);
    while (::connect(fd.get(), reinterpret_cast<const sockaddr*>(&addr), sizeof(addr)) != 0) {
        const int err = errno;
        if (err == EINTR) continue;
        if (err == EINPROGRESS) {
            if (int w = wait_for(fd.get(), POLLOUT, deadline); w) return fail(Stage::kConnect, w);
            int so_error = 0;
            socklen_t len = sizeof(so_error);
            ::getsockopt(fd.get(), SOL_SOCKET, SO_ERROR, &so_error, &len);
            if (so_error) return fail(Stage::kConnect, so_error);
            break;
        }
        // EAGAIN: the listener's queue is full; retry until the deadline.
        if (err == EAGAIN && remaining_ms(deadline) > 0) {
            std::this_thread::sleep_for(std::chrono::milliseconds(10));
            continue;
        }
        return fail(Stage::kConnect, err == EAGAIN ? ETIMEDOUT : err);
    }

    std::string out =
        fmt::format("{} {} HTTP/1.1\r\nHost: xlbd\r\nUser-Agent: xlbctl/" XLBCTL_VERSION
                    "\r\nAccept: application/json\r\nConnection: close\r\n",
                    request.method, request.target);
    if (!reason_.empty()) out += "X-Xlb-Reason: " + url_encode(reason_) + "\r\n";
    if (!request.body.empty() || request.method != "GET")
        out += fmt::format("Content-Type: application/json\r\nContent-Length: {}\r\n",
                           request.body.size());
    out += "\r\n";
    out += request.body;

    std::size_t sent = 0;
    while (sent < out.size()) {
        const ssize_t n = ::send(fd.get(), out.data() + sent, out.size() - sent, MSG_NOSIGNAL);
        if (n > 0) {
            sent += static_cast<std::size_t>(n);
            continue;
        }
        if (n < 0 && errno == EINTR) continue;
        if (n < 0 && errno == EAGAIN) {
            if (int w = wait_for(fd.get(), POLLOUT, deadline); w) return fail(Stage::kSend, w);
            continue;
        }
        return fail(Stage::kSend, errno);
    }

    std::string raw;
    // Streaming (a 200 reply with a chunked body, sink set): whole chunks
    // are taken off the front of `pending` as they complete.
    bool streaming = false;
    std::string pending;
    while (sink && !streaming) {
        const std::size_t head_end = raw.find("\r\n\r\n");
        if (head_end != std::string::npos) {
            const std::string head = lower(raw.substr(0, head_end));
            if (head.starts_with("http/1.1 200") && head.find("chunked") != std::string::npos) {
                streaming = true;
                pending = raw.substr(head_end + 4);
                break;
            }
            break;  // any other reply: read whole, as send() does
        }
        const int r = receive_some(fd.get(), raw, deadline);
        if (r > 0) return fail(Stage::kReceive, r);
        if (r < 0) break;  // closed: the parser below says what was wrong
    }
    while (streaming) {
        std::string piece, error;
        bool last = false;
        std::size_t at = 0;
        while (true) {
            std::string_view chunk;
            const ParseState state = next_chunk(pending, at, chunk, error);
            if (state == ParseState::kError) return fail(Stage::kProtocol, 0, error);
            if (state == ParseState::kIncomplete) break;
            if (chunk.empty()) {
                last = true;
                break;
            }
            piece.append(chunk);
        }
        pending.erase(0, at);
        if (!piece.empty() && !(*sink)(piece)) return HttpResponse{200, {}};
        if (last) return HttpResponse{200, {}};
        const int r = receive_some(fd.get(), pending, Clock::now() + idle);
        if (r > 0) return fail(Stage::kReceive, r);
        if (r < 0) return fail(Stage::kReceive, 0, "the agent closed the stream before its end");
    }
    while (true) {
        Parsed p = try_parse(raw, false);
        if (p.state == ParseState::kDone) return std::move(p.response);
        if (p.state == ParseState::kError) return fail(Stage::kProtocol, 0, p.error);
        const int r = receive_some(fd.get(), raw, deadline);
        if (r > 0) return fail(Stage::kReceive, r);
        if (r == 0) continue;
        // End of stream.
        Parsed last = try_parse(raw, true);
        if (last.state == ParseState::kDone) return std::move(last.response);
        if (raw.empty())
            return fail(Stage::kReceive, 0, "the agent closed the connection without a reply");
        return fail(Stage::kProtocol, 0, last.error);
    }
}

std::string describe(const TransportError& e, const std::string& path,
                     std::chrono::milliseconds timeout) {
    using Stage = TransportError::Stage;
    const std::string seconds = fmt::format("{:g}", static_cast<double>(timeout.count()) / 1000);
    switch (e.stage) {
        case Stage::kConnect: {
            std::string hint;
            switch (e.err) {
                case ENOENT:
                    hint =
                        "is xlbd running? systemctl status xlbd; another socket: --socket "
                        "PATH or XLB_SOCKET";
                    break;
                case ECONNREFUSED:
                    hint =
                        "nothing accepts connections on it: is xlbd running? systemctl "
                        "status xlbd";
                    break;
                case EACCES:
                case EPERM:
                    hint =
                        "the socket is mode 0660: run as root or as a member of its group, "
                        "e.g. sudo xlbctl ...";
                    break;
                case ENOTDIR:
                    hint =
                        "a component of the path is not a directory: check --socket or "
                        "XLB_SOCKET";
                    break;
                case ENAMETOOLONG: hint = "a Unix socket path has at most 107 bytes"; break;
                case ETIMEDOUT:
                    hint = "its connection queue stayed full for " + seconds +
                           " s: is xlbd wedged? systemctl status xlbd";
                    break;
                default: hint = "is xlbd running? systemctl status xlbd"; break;
            }
            return fmt::format("cannot connect to xlbd at {}: {} ({})", path, e.detail, hint);
        }
        case Stage::kSend:
        case Stage::kReceive:
            if (e.err == ETIMEDOUT)
                return fmt::format(
                    "xlbd at {} did not answer within {} s (is it wedged? systemctl status xlbd; "
                    "curl --unix-socket {} http://xlbd/livez; a longer wait: --timeout SECS)",
                    path, seconds, path);
            return fmt::format(
                "lost the connection to xlbd at {}: {} (did it stop? systemctl "
                "status xlbd)",
                path, e.detail);
        case Stage::kProtocol:
            return fmt::format(
                "xlbd at {} sent a malformed reply: {} (is it the agent's API "
                "socket?)",
                path, e.detail);
    }
    return "xlbd at " + path + ": " + e.detail;
}

}  // namespace xlb::xlbctl
