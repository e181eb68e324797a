// SPDX-License-Identifier: Apache-2.0
#include "servers.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/tcp.h>
#include <openssl/ssl.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <csignal>
#include <cstdlib>
#include <cstring>
#include <filesystem>

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

// --- TLS --------------------------------------------------------------------------------

namespace {

// Runs a shell command quietly; its output on failure.
std::string run(const std::string& command) {
    const std::string full = "(" + command + ") 2>&1";
    FILE* p = ::popen(full.c_str(), "r");
    if (!p) return "popen failed";
    std::string out;
    char buf[512];
    while (std::fgets(buf, sizeof(buf), p)) out += buf;
    const int status = ::pclose(p);
    return status == 0 ? std::string() : (out.empty() ? "failed: " + command : out);
}

}  // namespace

TestCertificates::TestCertificates() {
    char dir[] = "/tmp/xlb-tls-test.XXXXXX";
    if (!::mkdtemp(dir)) {
        error_ = "mkdtemp failed";
        return;
    }
    dir_ = dir;
    const std::string d = "'" + dir_ + "'";
    const std::string key = "openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes ";
    error_ = run(key + "-x509 -days 30 -subj /CN=xlb-test-ca -keyout " + d + "/ca.key -out " + d +
                 "/ca.pem");
    // name, SAN, days (-1: already expired when made)
    const struct {
        const char* name;
        const char* san;
        const char* days;
    } leaves[] = {{"good", "DNS:backend.test,IP:127.0.0.1", "30"},
                  {"expired", "DNS:backend.test,IP:127.0.0.1", "-1"},
                  {"wrong-name", "DNS:other.test", "30"}};
    for (const auto& l : leaves) {
        if (!error_.empty()) return;
        const std::string base = d + "/" + l.name;
        error_ = run(key + "-subj /CN=" + l.name + " -keyout " + base + ".key -out " + base +
                     ".csr && printf 'subjectAltName=" + l.san + "\\n' > " + base +
                     ".ext && openssl x509 -req -in " + base + ".csr -CA " + d + "/ca.pem -CAkey " +
                     d + "/ca.key -CAcreateserial -days " + l.days + " -extfile " + base +
                     ".ext -out " + base + ".pem");
    }
}

TestCertificates::~TestCertificates() {
    if (dir_.empty()) return;
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
}

TlsServer::TlsServer(const std::string& addr, const std::string& cert, const std::string& key,
                     Handler handler)
    : handler_(std::move(handler)) {
    // OpenSSL writes to the socket with write(): a client that went away
    // (a probe that refused the certificate) must not end the test process.
    ::signal(SIGPIPE, SIG_IGN);
    std::unique_ptr<SSL_CTX, decltype(&SSL_CTX_free)> ctx(SSL_CTX_new(TLS_server_method()),
                                                          SSL_CTX_free);
    if (ctx && SSL_CTX_use_certificate_chain_file(ctx.get(), cert.c_str()) == 1 &&
        SSL_CTX_use_PrivateKey_file(ctx.get(), key.c_str(), SSL_FILETYPE_PEM) == 1)
        ctx_ = ctx.release();
    tcp_ = std::make_unique<TcpServer>(addr, [this](TcpServer::Connection& c) { serve(c); });
}

TlsServer::~TlsServer() {
    tcp_.reset();
    if (ctx_) SSL_CTX_free(static_cast<SSL_CTX*>(ctx_));
}

void TlsServer::serve(TcpServer::Connection& c) {
    if (!ctx_) return;
    // A client that never finishes its handshake must not hold the
    // destructor: reads wait at most 2 s.
    const timeval limit{2, 0};
    ::setsockopt(c.fd, SOL_SOCKET, SO_RCVTIMEO, &limit, sizeof(limit));
    // As web servers do: the response must not wait behind the session
    // tickets' ACK (Nagle).
    const int one = 1;
    ::setsockopt(c.fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    std::unique_ptr<SSL, decltype(&SSL_free)> owned(SSL_new(static_cast<SSL_CTX*>(ctx_)), SSL_free);
    SSL* ssl = owned.get();
    if (!ssl || SSL_set_fd(ssl, c.fd) != 1) return;
    if (SSL_accept(ssl) == 1) {
        ++handshakes_;
        const char* name = SSL_get_servername(ssl, TLSEXT_NAMETYPE_host_name);
        {
            std::lock_guard lock(mu_);
            server_names_.emplace_back(name ? name : "");
        }
        Connection conn{ssl, c.stop, this};
        if (handler_) handler_(conn);
        SSL_shutdown(ssl);
    }
}

std::vector<std::string> TlsServer::requests() const {
    std::lock_guard lock(mu_);
    return requests_;
}

std::vector<std::string> TlsServer::server_names() const {
    std::lock_guard lock(mu_);
    return server_names_;
}

std::string TlsServer::Connection::read_request() {
    auto* s = static_cast<SSL*>(ssl);
    std::string head;
    char buf[4096];
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(2);
    while (head.find("\r\n\r\n") == std::string::npos &&
           std::chrono::steady_clock::now() < deadline) {
        if (SSL_pending(s) == 0 &&
            !stop.wait_fd(SSL_get_fd(s), POLLIN, std::chrono::milliseconds(100))) {
            if (stop.fired()) break;
            continue;
        }
        const int n = SSL_read(s, buf, sizeof(buf));
        if (n <= 0) break;
        head.append(buf, static_cast<std::size_t>(n));
    }
    std::lock_guard lock(server->mu_);
    server->requests_.push_back(head);
    return head;
}

void TlsServer::Connection::write(std::string_view bytes) {
    auto* s = static_cast<SSL*>(ssl);
    while (!bytes.empty()) {
        const int n = SSL_write(s, bytes.data(), static_cast<int>(bytes.size()));
        if (n <= 0) return;
        bytes.remove_prefix(static_cast<std::size_t>(n));
    }
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
