// SPDX-License-Identifier: Apache-2.0
// HTTP/1.1 over the agent's Unix socket: one request per connection
// (Connection: close), a deadline for the whole exchange, and failures
// reported with the errno that caused them so that the operator gets one
// clear line ("cannot connect to xlbd at PATH: No such file or directory (is
// xlbd running? ...)").
#pragma once

#include <chrono>
#include <expected>
#include <functional>
#include <string>
#include <string_view>

#include "xlb/error.h"
#include "xlb/xlbctl/request.h"

namespace xlb::xlbctl {

struct HttpResponse {
    int status = 0;
    std::string body;
};

struct TransportError {
    enum class Stage { kConnect, kSend, kReceive, kProtocol };
    Stage stage = Stage::kConnect;
    int err = 0;         // errno (ETIMEDOUT for the deadline), 0 for kProtocol
    std::string detail;  // what went wrong, without the socket path
};

// The one line xlbctl prints for a transport failure, with a hint, e.g.
//   cannot connect to xlbd at /run/xlb/xlbd.sock: No such file or directory
//   (is xlbd running? systemctl status xlbd; another socket: --socket PATH or XLB_SOCKET)
std::string describe(const TransportError& error, const std::string& socket_path,
                     std::chrono::milliseconds timeout);

// Takes a streamed body piece by piece; false stops reading.
using BodySink = std::function<bool(std::string_view piece)>;

class Transport {
public:
    virtual ~Transport() = default;
    virtual std::expected<HttpResponse, TransportError> send(const HttpRequest& request) = 0;
    // As send(), but a 200 reply's body goes to `sink` as it arrives (the
    // returned body is then empty), waiting at most `idle` for each piece
    // instead of one deadline for the whole exchange. Other replies come
    // back whole. This default hands send()'s body over in one piece.
    virtual std::expected<HttpResponse, TransportError> stream(const HttpRequest& request,
                                                               const BodySink& sink,
                                                               std::chrono::milliseconds idle);
};

class UnixSocketTransport final : public Transport {
public:
    // `reason` (xlbctl --reason): sent as X-Xlb-Reason, percent-encoded, with
    // every request; empty: no such header.
    UnixSocketTransport(std::string path, std::chrono::milliseconds timeout,
                        std::string reason = {});
    std::expected<HttpResponse, TransportError> send(const HttpRequest& request) override;
    std::expected<HttpResponse, TransportError> stream(const HttpRequest& request,
                                                       const BodySink& sink,
                                                       std::chrono::milliseconds idle) override;

private:
    std::expected<HttpResponse, TransportError> exchange(const HttpRequest& request,
                                                         const BodySink* sink,
                                                         std::chrono::milliseconds idle);
    std::string path_;
    std::chrono::milliseconds timeout_;
    std::string reason_;
};

// Parses a complete HTTP/1.x response (status line, headers, then a body by
// Content-Length, chunked, or up to the end of the stream). Exposed for tests.
Result<HttpResponse> parse_http_response(const std::string& raw);

}  // namespace xlb::xlbctl
