// SPDX-License-Identifier: Apache-2.0
// Internal to xlb_api: the listening sockets of the API and metrics servers
// and the connection handling that keeps them answering while slow or idle
// clients are connected.
//
// httplib (0.11.4, Debian's shared library) is kept for parsing requests and
// writing responses, but not for sockets or threads:
//   - the agent creates, binds and listens on the socket itself (backlog
//     kBacklog, SO_REUSEADDR but never SO_REUSEPORT, errors with errno text
//     and the address) and hands it to the server;
//   - every connection gets its own thread, up to max_connections;
//   - a peer holds at most max_per_peer connections; more are answered 503
//     at once. A peer is a uid on the Unix socket (SO_PEERCRED); on TCP the
//     uid of a local process (its socket found through NETLINK_SOCK_DIAG:
//     every local user shares 127.0.0.1), else the client's address;
//   - a request (head and body) must arrive within request_timeout of the
//     moment the server starts waiting for it; a request still incomplete
//     then is answered 408 and the connection closed, an idle connection is
//     closed silently.
// docs/api.md ("Connections and limits") documents the numbers.
#pragma once

#include <httplib.h>

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <deque>
#include <expected>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "xlb/api/audit.h"
#include "xlb/api/services.h"
#include "xlb/error.h"

namespace xlb::api::detail {

inline constexpr int kBacklog = 1024;

using ServerLimits = ConnectionLimits;

// A bound TCP socket for HOST:PORT (port 0: any free port), listening when
// `listen`; bound only, it tells a check before a start whether the server
// could take the address. The error names the address; EADDRINUSE says
// "address in use".
Result<int> bind_tcp(const std::string& host, std::uint16_t port, const std::string& shown,
                     bool listen);
inline Result<int> listen_tcp(const std::string& host, std::uint16_t port,
                              const std::string& shown) {
    return bind_tcp(host, port, shown, true);
}
// A bound Unix stream socket at path, not yet listening (set its mode and
// group first, then start_listening).
Result<int> bind_unix(const std::string& path);
Result<void> start_listening(int fd);

// Who sent the request being handled on this thread (a handler runs on its
// connection's thread): SO_PEERCRED's uid and pid on the Unix socket, the
// local uid or the address on TCP; an empty Caller outside a connection.
const Caller& request_caller();

// One thread per connection, created on demand up to max_threads; idle
// threads exit after a while. Connections beyond max_threads wait for one.
class ConnectionThreads : public httplib::TaskQueue {
public:
    explicit ConnectionThreads(std::size_t max_threads) : max_threads_(max_threads) {}
    ~ConnectionThreads() override;
    void enqueue(std::function<void()> fn) override;
    void shutdown() override;

private:
    void work();
    void reap_locked();
    std::size_t max_threads_;
    std::mutex mu_;
    std::condition_variable cv_;
    std::deque<std::function<void()>> jobs_;
    std::map<std::thread::id, std::thread> threads_;
    std::vector<std::thread::id> finished_;
    std::size_t idle_ = 0;
    bool stopping_ = false;
};

class GuardedServer : public httplib::Server {
public:
    // json_errors: the connection-level errors (408, 431, 503) as
    // {"error": ...} (the API) or plain text (metrics).
    GuardedServer(ServerLimits limits, bool json_errors);

    // Takes the listening socket; serve() then runs the accept loop until
    // stop().
    void adopt(int listening_fd) { svr_sock_ = listening_fd; }
    bool serve() { return listen_after_bind(); }

    // Connections being served now (for tests and logs).
    std::size_t connections() const;

private:
    bool process_and_close_socket(socket_t sock) override;
    void serve_connection(int fd);
    bool stopping() const { return svr_sock_ == INVALID_SOCKET; }
    void send_raw_error(int fd, int status, const char* reason, const std::string& message) const;

    ServerLimits limits_;
    bool json_errors_;
    mutable std::mutex mu_;
    std::map<std::string, std::size_t> per_peer_;
    std::size_t total_ = 0;
};

}  // namespace xlb::api::detail
