// SPDX-License-Identifier: Apache-2.0
#include "listener.h"

#include <arpa/inet.h>
#include <linux/inet_diag.h>
#include <linux/netlink.h>
#include <linux/sock_diag.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <spdlog/spdlog.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <nlohmann/json.hpp>
#include <optional>
#include <string_view>

#include "xlb/bpf/fd.h"

namespace xlb::api::detail {
namespace {

using Clock = std::chrono::steady_clock;
using namespace std::chrono_literals;

// "address in use" spelled out (the usual cause: a second agent), else the
// errno text.
// EADDRINUSE says "address in use" and how to find the holder.
Error bind_error(int err, std::string step) {
    Error e = make_error(err, std::move(step));
    if (err == EADDRINUSE) {
        e.code = 0;
        e.what += ": address in use";
        e.hint = "another socket is bound to it: a second agent? ss -ltnp shows which process";
    }
    return e;
}

enum class Wait { kReady, kTimeout, kStopping };

// Waits for `events` on fd until the deadline, waking every 100 ms to notice
// a stopping server.
template <typename Stopping>
Wait wait_for(int fd, short events, Clock::time_point deadline, const Stopping& stopping) {
    for (;;) {
        if (stopping()) return Wait::kStopping;
        const auto left =
            std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
        if (left <= 0ms) return Wait::kTimeout;
        pollfd p{fd, events, 0};
        const int rc = ::poll(
            &p, 1, static_cast<int>(std::min<std::chrono::milliseconds>(left, 100ms).count()));
        if (rc > 0) return Wait::kReady;  // includes POLLHUP/POLLERR: recv/send tell
        if (rc < 0 && errno != EINTR) return Wait::kReady;  // let the call report it
    }
}

void address_of(const sockaddr_storage& ss, std::string& ip, int& port) {
    char text[INET6_ADDRSTRLEN] = "";
    if (ss.ss_family == AF_INET) {
        const auto& a = reinterpret_cast<const sockaddr_in&>(ss);
        ::inet_ntop(AF_INET, &a.sin_addr, text, sizeof(text));
        port = ntohs(a.sin_port);
    } else if (ss.ss_family == AF_INET6) {
        const auto& a = reinterpret_cast<const sockaddr_in6&>(ss);
        ::inet_ntop(AF_INET6, &a.sin6_addr, text, sizeof(text));
        port = ntohs(a.sin6_port);
    } else {
        port = 0;
    }
    ip = text;
}

// An IPv4-mapped IPv6 address (a dual-stack listener's IPv4 peer) as the
// IPv4 address it is: the peer's own socket is an IPv4 one.
sockaddr_storage unmapped(const sockaddr_storage& ss) {
    if (ss.ss_family != AF_INET6) return ss;
    const auto& a6 = reinterpret_cast<const sockaddr_in6&>(ss);
    if (!IN6_IS_ADDR_V4MAPPED(&a6.sin6_addr)) return ss;
    sockaddr_storage out{};
    auto& a4 = reinterpret_cast<sockaddr_in&>(out);
    a4.sin_family = AF_INET;
    a4.sin_port = a6.sin6_port;
    std::memcpy(&a4.sin_addr, &a6.sin6_addr.s6_addr[12], 4);
    return out;
}

// The uid of the process at the other end of an accepted TCP connection
// when that end is a socket of this network namespace, i.e. a local user:
// every local user connects from the same loopback address, so a limit per
// address would let one user's idle connections starve the others. The
// kernel's socket diagnostics (NETLINK_SOCK_DIAG, inet_diag) look the peer's
// socket up by its exact 4-tuple: its source is our peer, its destination
// is us. nullopt for a remote peer (no such socket here) or any failure.
// Only an established socket with an inode counts: an orphaned one (closed
// by its owner) is reported with uid 0 and must not pass for root.
std::optional<uid_t> local_peer_uid(const sockaddr_storage& local_raw,
                                    const sockaddr_storage& peer_raw) {
    const sockaddr_storage local = unmapped(local_raw), peer = unmapped(peer_raw);
    if (local.ss_family != peer.ss_family ||
        (peer.ss_family != AF_INET && peer.ss_family != AF_INET6))
        return std::nullopt;
    struct {
        nlmsghdr header;
        inet_diag_req_v2 body;
    } request{};
    request.header.nlmsg_len = sizeof request;
    request.header.nlmsg_type = SOCK_DIAG_BY_FAMILY;
    request.header.nlmsg_flags = NLM_F_REQUEST;
    inet_diag_req_v2& r = request.body;
    r.sdiag_family = static_cast<std::uint8_t>(peer.ss_family);
    r.sdiag_protocol = IPPROTO_TCP;
    r.idiag_states = 1u << TCP_ESTABLISHED;
    r.id.idiag_cookie[0] = r.id.idiag_cookie[1] = INET_DIAG_NOCOOKIE;
    if (peer.ss_family == AF_INET) {
        const auto& p = reinterpret_cast<const sockaddr_in&>(peer);
        const auto& l = reinterpret_cast<const sockaddr_in&>(local);
        r.id.idiag_sport = p.sin_port;
        r.id.idiag_dport = l.sin_port;
        std::memcpy(r.id.idiag_src, &p.sin_addr, 4);
        std::memcpy(r.id.idiag_dst, &l.sin_addr, 4);
    } else {
        const auto& p = reinterpret_cast<const sockaddr_in6&>(peer);
        const auto& l = reinterpret_cast<const sockaddr_in6&>(local);
        r.id.idiag_sport = p.sin6_port;
        r.id.idiag_dport = l.sin6_port;
        std::memcpy(r.id.idiag_src, &p.sin6_addr, 16);
        std::memcpy(r.id.idiag_dst, &l.sin6_addr, 16);
    }
    bpf::UniqueFd nl(::socket(AF_NETLINK, SOCK_DGRAM | SOCK_CLOEXEC, NETLINK_SOCK_DIAG));
    if (!nl) return std::nullopt;
    const timeval wait{1, 0};  // the kernel answers at once; never hang a connection on it
    ::setsockopt(nl.get(), SOL_SOCKET, SO_RCVTIMEO, &wait, sizeof wait);
    sockaddr_nl kernel{};
    kernel.nl_family = AF_NETLINK;
    if (::sendto(nl.get(), &request, sizeof request, 0, reinterpret_cast<sockaddr*>(&kernel),
                 sizeof kernel) != static_cast<ssize_t>(sizeof request))
        return std::nullopt;
    alignas(nlmsghdr) char answer[8192];
    ssize_t n;
    do {
        n = ::recv(nl.get(), answer, sizeof answer, 0);
    } while (n < 0 && errno == EINTR);
    if (n <= 0) return std::nullopt;
    const auto* h = reinterpret_cast<const nlmsghdr*>(answer);
    for (int left = static_cast<int>(n); NLMSG_OK(h, left); h = NLMSG_NEXT(h, left)) {
        if (h->nlmsg_type != SOCK_DIAG_BY_FAMILY ||
            h->nlmsg_len < NLMSG_LENGTH(sizeof(inet_diag_msg)))
            return std::nullopt;  // NLMSG_ERROR: ENOENT for a remote peer
        const auto* m = static_cast<const inet_diag_msg*>(NLMSG_DATA(h));
        // The addresses are not compared: an IPv6 socket connected to an
        // IPv4 address answers with them mapped.
        if (m->idiag_state != TCP_ESTABLISHED || m->idiag_inode == 0 ||
            m->id.idiag_sport != r.id.idiag_sport || m->id.idiag_dport != r.id.idiag_dport)
            return std::nullopt;
        return static_cast<uid_t>(m->idiag_uid);
    }
    return std::nullopt;
}

// Who is at the other end: the uid and pid on a Unix socket (SO_PEERCRED);
// for TCP the uid of the peer when it is a process of this host
// (local_peer_uid), else its address.
struct Peer {
    Caller caller;
    std::string key;  // "uid N", "local uid N", the address, or "unknown peer"
};
Peer peer_of(int fd) {
    Peer out{{}, "unknown peer"};
    sockaddr_storage local{};
    socklen_t len = sizeof(local);
    if (::getsockname(fd, reinterpret_cast<sockaddr*>(&local), &len) != 0) return out;
    if (local.ss_family == AF_UNIX) {
        ucred cred{};
        socklen_t clen = sizeof(cred);
        if (::getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &clen) != 0) return out;
        out.caller.uid = cred.uid;
        out.caller.pid = cred.pid;
        out.key = "uid " + std::to_string(cred.uid);
        return out;
    }
    sockaddr_storage peer{};
    len = sizeof(peer);
    if (::getpeername(fd, reinterpret_cast<sockaddr*>(&peer), &len) != 0) return out;
    if (const auto uid = local_peer_uid(local, peer)) {
        out.caller.uid = *uid;
        out.key = "local uid " + std::to_string(*uid);
        return out;
    }
    int port = 0;
    address_of(peer, out.caller.address, port);
    out.key = out.caller.address;
    return out;
}

thread_local const Caller* connection_caller = nullptr;

// Reads the rest of a request head into buffer (it may hold bytes already).
enum class Head { kComplete, kClosed, kTimedOut, kTooLarge, kStopping };
template <typename Stopping>
Head read_head(int fd, std::string& buffer, std::size_t max_bytes, Clock::time_point deadline,
               const Stopping& stopping, std::size_t& head_end) {
    for (;;) {
        if (auto at = buffer.find("\r\n\r\n"); at != std::string::npos) {
            head_end = at;
            return Head::kComplete;
        }
        if (buffer.size() > max_bytes) return Head::kTooLarge;
        switch (wait_for(fd, POLLIN, deadline, stopping)) {
            case Wait::kTimeout: return Head::kTimedOut;
            case Wait::kStopping: return Head::kStopping;
            case Wait::kReady: break;
        }
        char chunk[4096];
        const ssize_t n = ::recv(fd, chunk, sizeof(chunk), 0);
        if (n == 0) return Head::kClosed;
        if (n < 0) {
            if (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK) continue;
            return Head::kClosed;
        }
        buffer.append(chunk, static_cast<std::size_t>(n));
    }
}

// A request without Content-Length and without Transfer-Encoding has no body
// (RFC 9112, 6.3); httplib would wait for the connection to close instead.
void add_missing_length(std::string& buffer, std::size_t head_end) {
    std::size_t line = buffer.find("\r\n");  // end of the request line
    while (line != std::string::npos && line < head_end) {
        const std::size_t start = line + 2;
        const std::size_t end = buffer.find("\r\n", start);
        const std::size_t colon = buffer.find(':', start);
        if (colon != std::string::npos && colon < end) {
            std::string name = buffer.substr(start, colon - start);
            std::transform(name.begin(), name.end(), name.begin(),
                           [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
            if (name == "content-length" || name == "transfer-encoding") return;
        }
        line = end;
    }
    buffer.insert(head_end + 2, "Content-Length: 0\r\n");
}

// A connection as httplib reads and writes it: first the bytes already read,
// then the socket, every read bounded by the request's deadline.
class ConnectionStream final : public httplib::Stream {
public:
    ConnectionStream(int fd, std::string& buffer, Clock::time_point deadline,
                     std::chrono::milliseconds write_timeout, std::function<bool()> stopping)
        : fd_(fd),
          buffer_(buffer),
          deadline_(deadline),
          write_timeout_(write_timeout),
          stopping_(std::move(stopping)) {}

    bool timed_out() const { return timed_out_; }

    bool is_readable() const override {
        return !buffer_.empty() || wait_for(fd_, POLLIN, deadline_, stopping_) == Wait::kReady;
    }
    bool is_writable() const override {
        return !timed_out_ &&
               wait_for(fd_, POLLOUT, Clock::now() + write_timeout_, stopping_) == Wait::kReady;
    }
    ssize_t read(char* ptr, size_t size) override {
        if (!buffer_.empty()) {
            const std::size_t n = std::min(size, buffer_.size());
            std::memcpy(ptr, buffer_.data(), n);
            buffer_.erase(0, n);
            return static_cast<ssize_t>(n);
        }
        for (;;) {
            switch (wait_for(fd_, POLLIN, deadline_, stopping_)) {
                case Wait::kTimeout: timed_out_ = true; return -1;
                case Wait::kStopping: return -1;
                case Wait::kReady: break;
            }
            const ssize_t n = ::recv(fd_, ptr, size, 0);
            if (n < 0 && (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK)) continue;
            return n;
        }
    }
    ssize_t write(const char* ptr, size_t size) override {
        if (timed_out_) return -1;  // the caller answers 408 itself
        for (;;) {
            if (wait_for(fd_, POLLOUT, Clock::now() + write_timeout_, stopping_) != Wait::kReady)
                return -1;
            const ssize_t n = ::send(fd_, ptr, size, MSG_NOSIGNAL);
            if (n < 0 && (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK)) continue;
            return n;
        }
    }
    void get_remote_ip_and_port(std::string& ip, int& port) const override {
        socket_name(::getpeername, ip, port);
    }
    void get_local_ip_and_port(std::string& ip, int& port) const override {
        socket_name(::getsockname, ip, port);
    }
    socket_t socket() const override { return fd_; }

private:
    // getpeername or getsockname; empty and 0 when the call fails.
    void socket_name(int (*get)(int, sockaddr*, socklen_t*), std::string& ip, int& port) const {
        sockaddr_storage ss{};
        socklen_t len = sizeof(ss);
        ip.clear();
        port = 0;
        if (get(fd_, reinterpret_cast<sockaddr*>(&ss), &len) == 0) address_of(ss, ip, port);
    }

    int fd_;
    std::string& buffer_;
    Clock::time_point deadline_;
    std::chrono::milliseconds write_timeout_;
    std::function<bool()> stopping_;
    bool timed_out_ = false;
};

// Logs a connection-level refusal at most every 10 s per kind, counting the
// ones it left out.
class RateLimitedLog {
public:
    void warn(const std::string& message) {
        std::lock_guard lock(mu_);
        const auto now = Clock::now();
        if (now - last_ < 10s) {
            ++skipped_;
            return;
        }
        if (skipped_ > 0)
            spdlog::warn("{} (and {} more like it in the last 10 s)", message, skipped_);
        else
            spdlog::warn("{}", message);
        last_ = now;
        skipped_ = 0;
    }

private:
    std::mutex mu_;
    Clock::time_point last_{};
    std::size_t skipped_ = 0;
};

RateLimitedLog refused_log;
RateLimitedLog timeout_log;

}  // namespace

Result<int> bind_tcp(const std::string& host, std::uint16_t port, const std::string& shown,
                     bool listen) {
    addrinfo hints{};
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
    addrinfo* found = nullptr;
    const std::string service = std::to_string(port);
    if (int rc = ::getaddrinfo(host.c_str(), service.c_str(), &hints, &found); rc != 0)
        return fail("resolve " + shown + ": " + ::gai_strerror(rc));
    std::unique_ptr<addrinfo, decltype(&::freeaddrinfo)> list(found, &::freeaddrinfo);
    std::optional<Error> first_error;
    for (const addrinfo* ai = found; ai != nullptr; ai = ai->ai_next) {
        const int fd = ::socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC, ai->ai_protocol);
        auto failed = [&](Error e) {
            if (!first_error) first_error = std::move(e);
            if (fd >= 0) ::close(fd);
        };
        if (fd < 0) {
            failed(make_error(errno, "socket for " + shown));
            continue;
        }
        // SO_REUSEADDR: a restarted agent may bind while old connections are
        // in TIME_WAIT. Never SO_REUSEPORT: a second agent must not share it.
        const int yes = 1;
        if (::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof(yes)) != 0) {
            failed(make_error(errno, "SO_REUSEADDR on " + shown));
            continue;
        }
        if (::bind(fd, ai->ai_addr, ai->ai_addrlen) != 0) {
            failed(bind_error(errno, "bind " + shown));
            continue;
        }
        if (listen && ::listen(fd, kBacklog) != 0) {
            failed(bind_error(errno, "listen on " + shown));
            continue;
        }
        return fd;
    }
    if (!first_error) first_error = make_error(0, "resolve " + shown + ": no address");
    return std::unexpected(std::move(*first_error));
}

Result<int> bind_unix(const std::string& path) {
    sockaddr_un addr{};
    if (path.size() >= sizeof(addr.sun_path))
        return fail("path longer than " + std::to_string(sizeof(addr.sun_path) - 1) + " bytes");
    addr.sun_family = AF_UNIX;
    std::memcpy(addr.sun_path, path.c_str(), path.size() + 1);
    const int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) return xlb::fail(errno, "socket");
    if (::bind(fd, reinterpret_cast<const sockaddr*>(&addr), sizeof(addr)) != 0) {
        const int err = errno;
        ::close(fd);
        return std::unexpected(bind_error(err, "bind"));
    }
    return fd;
}

Result<void> start_listening(int fd) {
    if (::listen(fd, kBacklog) != 0) return std::unexpected(bind_error(errno, "listen"));
    return {};
}

const Caller& request_caller() {
    static const Caller kUnknown;
    return connection_caller ? *connection_caller : kUnknown;
}

// ---- threads -----------------------------------------------------------

ConnectionThreads::~ConnectionThreads() { shutdown(); }

void ConnectionThreads::reap_locked() {
    for (const std::thread::id id : finished_) {
        auto it = threads_.find(id);
        if (it == threads_.end()) continue;
        it->second.join();
        threads_.erase(it);
    }
    finished_.clear();
}

void ConnectionThreads::enqueue(std::function<void()> fn) {
    std::lock_guard lock(mu_);
    reap_locked();
    jobs_.push_back(std::move(fn));
    if (jobs_.size() > idle_ && threads_.size() < max_threads_) {
        std::thread t([this] { work(); });
        const std::thread::id id = t.get_id();
        threads_.emplace(id, std::move(t));
    }
    cv_.notify_one();
}

void ConnectionThreads::work() {
    std::unique_lock lock(mu_);
    for (;;) {
        ++idle_;
        const bool woken = cv_.wait_for(lock, 30s, [&] { return stopping_ || !jobs_.empty(); });
        --idle_;
        if (!jobs_.empty()) {
            std::function<void()> job = std::move(jobs_.front());
            jobs_.pop_front();
            lock.unlock();
            job();
            lock.lock();
            continue;
        }
        if (stopping_ || !woken) {
            if (!stopping_) finished_.push_back(std::this_thread::get_id());
            return;
        }
    }
}

void ConnectionThreads::shutdown() {
    std::map<std::thread::id, std::thread> threads;
    {
        std::lock_guard lock(mu_);
        stopping_ = true;
        threads.swap(threads_);
        finished_.clear();
    }
    cv_.notify_all();
    for (auto& [id, t] : threads) t.join();
}

// ---- connections -------------------------------------------------------

GuardedServer::GuardedServer(ServerLimits limits, bool json_errors)
    : limits_(limits), json_errors_(json_errors) {
    const std::size_t threads = limits_.max_connections;
    new_task_queue = [threads] { return new ConnectionThreads(threads); };
}

std::size_t GuardedServer::connections() const {
    std::lock_guard lock(mu_);
    return total_;
}

void GuardedServer::send_raw_error(int fd, int status, const char* reason,
                                   const std::string& message) const {
    std::string body;
    const char* type = "text/plain";
    if (json_errors_) {
        body = nlohmann::json{{"error", message}}.dump(-1, ' ', false,
                                                       nlohmann::json::error_handler_t::replace) +
               "\n";
        type = "application/json";
    } else {
        body = message + "\n";
    }
    const std::string response = "HTTP/1.1 " + std::to_string(status) + " " + reason +
                                 "\r\nContent-Type: " + type +
                                 "\r\nContent-Length: " + std::to_string(body.size()) +
                                 "\r\nConnection: close\r\n\r\n" + body;
    const auto deadline = Clock::now() + 200ms;
    std::size_t sent = 0;
    auto stopping = [this] { return this->stopping(); };
    while (sent < response.size() && wait_for(fd, POLLOUT, deadline, stopping) == Wait::kReady) {
        const ssize_t n = ::send(fd, response.data() + sent, response.size() - sent, MSG_NOSIGNAL);
        if (n < 0 && (errno == EINTR || errno == EAGAIN)) continue;
        if (n <= 0) return;
        sent += static_cast<std::size_t>(n);
    }
    // Let the peer read the answer before the close: a close with unread
    // input would reset a TCP connection and lose it.
    ::shutdown(fd, SHUT_WR);
    const auto drain_until = Clock::now() + 100ms;
    char sink[1024];
    while (wait_for(fd, POLLIN, drain_until, stopping) == Wait::kReady)
        if (::recv(fd, sink, sizeof(sink), MSG_DONTWAIT) <= 0) break;
}

bool GuardedServer::process_and_close_socket(socket_t sock) {
    try {
        serve_connection(sock);
    } catch (const std::exception& e) {
        spdlog::error("http: connection failed: {}", e.what());
    }
    ::shutdown(sock, SHUT_RDWR);
    ::close(sock);
    return true;
}

void GuardedServer::serve_connection(int fd) {
    const Peer who = peer_of(fd);
    const std::string& peer = who.key;
    // The handlers run on this thread, inside process_request.
    struct Current {
        explicit Current(const Caller& c) { connection_caller = &c; }
        ~Current() { connection_caller = nullptr; }
    } current{who.caller};
    bool admitted = false;
    {
        std::lock_guard lock(mu_);
        std::size_t& held = per_peer_[peer];
        if (held < limits_.max_per_peer) {
            ++held;
            ++total_;
            admitted = true;
        }
    }
    if (!admitted) {
        const std::string why = "too many connections from " + peer + " (at most " +
                                std::to_string(limits_.max_per_peer) +
                                " at a time); close idle ones or retry";
        refused_log.warn("http: refused a connection: " + why);
        send_raw_error(fd, 503, "Service Unavailable", why);
        return;
    }
    struct Release {
        GuardedServer& self;
        const std::string& peer;
        ~Release() {
            std::lock_guard lock(self.mu_);
            --self.total_;
            if (--self.per_peer_[peer] == 0) self.per_peer_.erase(peer);
        }
    } release{*this, peer};

    auto stopping = [this] { return this->stopping(); };
    // A head or a body that did not arrive within request_timeout.
    auto timed_out = [&](const char* part) {
        const std::string ms = std::to_string(limits_.request_timeout.count());
        timeout_log.warn("http: " + peer + ": " + part + " incomplete after " + ms + " ms; closed");
        send_raw_error(fd, 408, "Request Timeout",
                       "the request did not arrive within " + ms + " ms");
    };
    std::string buffer;  // bytes read and not yet consumed (pipelined requests)
    for (std::size_t served = 0; served < limits_.max_requests_per_connection; ++served) {
        const auto deadline = Clock::now() + limits_.request_timeout;
        std::size_t head_end = 0;
        switch (read_head(fd, buffer, limits_.max_head_bytes, deadline, stopping, head_end)) {
            case Head::kComplete: break;
            case Head::kClosed:
            case Head::kStopping: return;
            case Head::kTooLarge:
                send_raw_error(fd, 431, "Request Header Fields Too Large",
                               "request head larger than " +
                                   std::to_string(limits_.max_head_bytes) + " bytes");
                return;
            case Head::kTimedOut:
                if (buffer.empty()) return;  // idle: close without a word
                timed_out("request");
                return;
        }
        add_missing_length(buffer, head_end);
        const bool last = served + 1 == limits_.max_requests_per_connection;
        bool connection_closed = false;
        ConnectionStream stream(fd, buffer, deadline, limits_.write_timeout, stopping);
        const bool ok = process_request(stream, last, connection_closed, nullptr);
        if (stream.timed_out()) {
            timed_out("request body");
            return;
        }
        if (!ok || connection_closed || last || stopping()) return;
    }
}

}  // namespace xlb::api::detail
