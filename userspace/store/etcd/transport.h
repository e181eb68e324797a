// SPDX-License-Identifier: Apache-2.0
// How the client reaches the members: the parsed endpoints, a pool of idle
// HTTP connections per endpoint, and the failures of a request told in
// words (the TLS ones with OpenSSL's reason).
#pragma once

#include <httplib.h>

#include <atomic>
#include <cstddef>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "xlb/error.h"
#include "xlb/etcd/client.h"

namespace xlb::etcd::detail {

struct Endpoint {
    std::string url;   // as given: named in errors
    std::string host;  // without brackets
    int port = 0;
    bool tls = false;
    std::string scheme_host_port;  // for httplib
};

// Why one endpoint failed one request.
struct Failure {
    int code = 0;      // errno, 0 when none
    std::string text;  // "TLS handshake failed: ...", "connect"
    // The request was surely not sent: a write may go to another member.
    bool unsent = false;
    // Worth trying on another member (a transport failure, a member without
    // a leader); not a refusal every member would give.
    bool retryable = true;
};

// "connect: Connection refused" (code's text added).
std::string failure_text(const Failure& failure);

// Renders `failure` of `endpoint` doing `operation` as an Error:
// "etcd URL: OPERATION: TEXT".
Error endpoint_error(const Endpoint& endpoint, const std::string& operation,
                     const Failure& failure);
// The error after every endpoint tried failed: one endpoint's as above, or
// "etcd: OPERATION: no member answered: URL1: TEXT1; URL2: TEXT2".
Error endpoints_error(const std::string& operation,
                      const std::vector<std::pair<const Endpoint*, Failure>>& failures);

// Describes an httplib transport error on `client` to `endpoint`; reads
// (and clears) this thread's OpenSSL error queue. `request_timeout`: the one
// the request had (a watch's is its idle timeout).
Failure transport_failure(httplib::Error error, httplib::Client& client, const Endpoint& endpoint,
                          const ClientOptions& options, std::chrono::milliseconds request_timeout);

// Empties this thread's OpenSSL error queue before a request, so that what is
// there after a failure is that request's.
void clear_tls_errors();

// Blocks SIGPIPE in this thread while it lives, and discards one raised
// meanwhile: a member that closes the connection while a request is written
// (TLS writes cannot pass MSG_NOSIGNAL) must not end the process, whatever
// the program does with SIGPIPE.
class SigpipeGuard {
public:
    SigpipeGuard();
    ~SigpipeGuard();
    SigpipeGuard(const SigpipeGuard&) = delete;
    SigpipeGuard& operator=(const SigpipeGuard&) = delete;

private:
    bool was_pending_ = false;
    bool was_blocked_ = false;
};

// An answer as read: the member's status and body. The gateway ends an
// error's chunked body with a trailer that httplib cannot read, so a body
// that parses whole counts as read even when httplib says it failed.
struct Answer {
    int status = 0;  // 0: no answer
    std::string body;
    httplib::Error error;  // httplib's verdict
    bool complete = false;
};
// POSTs `body` to `path` on `client`.
Answer post(httplib::Client& client, const std::string& path, const std::string& body);

struct ClientState {
    ClientOptions options;
    std::vector<Endpoint> endpoints;
    // The endpoint that answered last: requests start there.
    std::atomic<std::size_t> preferred{0};

    std::mutex mutex;
    std::vector<std::vector<std::unique_ptr<httplib::Client>>> idle;  // per endpoint

    // A new connection object (not yet connected) to endpoint i, with the
    // TLS files and timeouts; nullptr and `failure` when the client
    // certificate cannot be loaded.
    std::unique_ptr<httplib::Client> make(std::size_t i, Failure& failure) const;
    std::unique_ptr<httplib::Client> take(std::size_t i, Failure& failure);
    void give_back(std::size_t i, std::unique_ptr<httplib::Client> client);
};

}  // namespace xlb::etcd::detail
