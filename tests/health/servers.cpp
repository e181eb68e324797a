// SPDX-License-Identifier: Apache-2.0
#include "servers.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <cstring>

namespace xlb::health::test {

namespace {

socklen_t make_addr(const std::string& addr, std::uint16_t port, sockaddr_storage& ss) {
    std::memset(&ss, 0, sizeof(ss));
    if (addr.find(':') != std::string::npos) {
        auto* s6 = reinterpret_cast<sockaddr_in6*>(&ss);
        s6->sin6_family = AF_INET6;
        s6->sin6_port = htons(port);
        inet_pton(AF_INET6, addr.c_str(), &s6->sin6_addr);
        return sizeof(sockaddr_in6);
    }
    auto* s4 = reinterpret_cast<sockaddr_in*>(&ss);
    s4->sin_family = AF_INET;
    s4->sin_port = htons(port);
    inet_pton(AF_INET, addr.c_str(), &s4->sin_addr);
    return sizeof(sockaddr_in);
}

std::string addr_text(const sockaddr_storage& ss) {
    char buf[INET6_ADDRSTRLEN] = {};
    if (ss.ss_family == AF_INET) {
        inet_ntop(AF_INET, &reinterpret_cast<const sockaddr_in*>(&ss)->sin_addr, buf, sizeof(buf));
    } else {
        inet_ntop(AF_INET6, &reinterpret_cast<const sockaddr_in6*>(&ss)->sin6_addr, buf,
                  sizeof(buf));
    }
    return buf;
}

}  // namespace

int bind_loopback(const std::string& addr, int type) {
    sockaddr_storage ss;
    const socklen_t len = make_addr(addr, 0, ss);
    const int fd = ::socket(ss.ss_family, type | SOCK_CLOEXEC, 0);
    if (fd < 0) return -1;
    if (::bind(fd, reinterpret_cast<sockaddr*>(&ss), len) != 0) {
        ::close(fd);
        return -1;
    }
    return fd;
}

std::uint16_t local_port(int fd) {
    sockaddr_storage ss{};
    socklen_t len = sizeof(ss);
    ::getsockname(fd, reinterpret_cast<sockaddr*>(&ss), &len);
    return ss.ss_family == AF_INET ? ntohs(reinterpret_cast<sockaddr_in*>(&ss)->sin_port)
                                   : ntohs(reinterpret_cast<sockaddr_in6*>(&ss)->sin6_port);
}

std::uint16_t unused_port(const std::string& addr, int type) {
    const int fd = bind_loopback(addr, type);
    const std::uint16_t port = local_port(fd);
    ::close(fd);
    return port;
}

Stop::Stop() : fd_(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)) {}
Stop::~Stop() { ::close(fd_); }

void Stop::fire() {
    const std::uint64_t one = 1;
    [[maybe_unused]] auto n = ::write(fd_, &one, sizeof(one));
}

bool Stop::fired() const { return wait(std::chrono::milliseconds(0)); }

bool Stop::wait(std::chrono::milliseconds d) const {
    pollfd p{fd_, POLLIN, 0};
    return ::poll(&p, 1, static_cast<int>(d.count())) > 0;
}

bool Stop::wait_fd(int fd, short events, std::chrono::milliseconds d) const {
    pollfd p[2] = {{fd, events, 0}, {fd_, POLLIN, 0}};
    if (::poll(p, 2, static_cast<int>(d.count())) <= 0) return false;
    return p[0].revents != 0 && p[1].revents == 0;
}

// --- TCP --------------------------------------------------------------------------

TcpServer::TcpServer(const std::string& addr, Handler handler) : handler_(std::move(handler)) {
    fd_ = bind_loopback(addr, SOCK_STREAM);
    const int one = 1;
    ::setsockopt(fd_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    ::listen(fd_, 64);
    port_ = local_port(fd_);
    thread_ = std::thread([this] { run(); });
}

TcpServer::~TcpServer() {
    stop_.fire();
    thread_.join();
    std::vector<std::thread> workers;
    {
        std::lock_guard lock(mu_);
        workers.swap(workers_);
    }
    for (auto& w : workers) w.join();
    ::close(fd_);
}

void TcpServer::run() {
    while (stop_.wait_fd(fd_, POLLIN, std::chrono::milliseconds(10'000))) {
        sockaddr_storage peer{};
        socklen_t len = sizeof(peer);
        const int c = ::accept4(fd_, reinterpret_cast<sockaddr*>(&peer), &len, SOCK_CLOEXEC);
        if (c < 0) continue;
        ++accepted_;
        std::lock_guard lock(mu_);
        peers_.push_back(addr_text(peer));
        workers_.emplace_back([this, c, p = addr_text(peer)] {
            Connection conn{c, stop_, p, this};
            if (handler_) handler_(conn);
            ::close(c);
        });
    }
}

void TcpServer::record_request(std::string head) {
    std::lock_guard lock(mu_);
    requests_.push_back(std::move(head));
}

std::vector<std::string> TcpServer::requests() const {
    std::lock_guard lock(mu_);
    return requests_;
}

std::vector<std::string> TcpServer::peers() const {
    std::lock_guard lock(mu_);
    return peers_;
}

std::string TcpServer::Connection::read_request() {
    std::string head;
    char buf[4096];
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(2);
    while (head.find("\r\n\r\n") == std::string::npos &&
           std::chrono::steady_clock::now() < deadline) {
        if (!stop.wait_fd(fd, POLLIN, std::chrono::milliseconds(100))) {
            if (stop.fired()) break;
            continue;
        }
        const ssize_t n = ::recv(fd, buf, sizeof(buf), 0);
        if (n <= 0) break;
        head.append(buf, static_cast<std::size_t>(n));
    }
    server->record_request(head);
    return head;
}

void TcpServer::Connection::write(std::string_view bytes) {
    while (!bytes.empty()) {
        const ssize_t n = ::send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL);
        if (n <= 0) return;
        bytes.remove_prefix(static_cast<std::size_t>(n));
    }
}

// --- UDP --------------------------------------------------------------------------

UdpServer::UdpServer(const std::string& addr, Handler handler) : handler_(std::move(handler)) {
    fd_ = bind_loopback(addr, SOCK_DGRAM);
    port_ = local_port(fd_);
    thread_ = std::thread([this] {
        while (stop_.wait_fd(fd_, POLLIN, std::chrono::milliseconds(10'000))) {
            char buf[2048];
            sockaddr_storage peer{};
            socklen_t len = sizeof(peer);
            const ssize_t n =
                ::recvfrom(fd_, buf, sizeof(buf), 0, reinterpret_cast<sockaddr*>(&peer), &len);
            if (n < 0) continue;
            ++received_;
            if (auto reply = handler_(std::string(buf, static_cast<std::size_t>(n)))) {
                ::sendto(fd_, reply->data(), reply->size(), 0, reinterpret_cast<sockaddr*>(&peer),
                         len);
            }
        }
    });
}

UdpServer::~UdpServer() {
    stop_.fire();
    thread_.join();
    ::close(fd_);
}

// --- A full accept queue ---------------------------------------------------------------

FullBacklog::FullBacklog() {
    fd_ = bind_loopback("127.0.0.1", SOCK_STREAM);
    ::listen(fd_, 0);  // room for one connection that nobody accepts
    port_ = local_port(fd_);
    sockaddr_storage ss;
    const socklen_t len = make_addr("127.0.0.1", port_, ss);
    // Connect fillers until one cannot complete: the queue is full.
    for (int i = 0; i < 8 && !full_; ++i) {
        const int c = ::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
        ::connect(c, reinterpret_cast<sockaddr*>(&ss), len);
        fillers_.push_back(c);
        pollfd p{c, POLLOUT, 0};
        if (::poll(&p, 1, 200) == 0) full_ = true;  // SYN dropped: still connecting
    }
}

FullBacklog::~FullBacklog() {
    for (int c : fillers_) ::close(c);
    ::close(fd_);
}

}  // namespace xlb::health::test
