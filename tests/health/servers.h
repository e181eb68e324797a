// SPDX-License-Identifier: Apache-2.0
// Small servers for the probe tests, on loopback only (127.0.0.1 / ::1):
// each accepted TCP connection is handled on its own thread by a handler
// (test code: a handful of connections); UDP datagrams by a handler on the
// server's thread. Destructors stop everything (handlers that wait use
// wait_for_stop(), which returns at once then).
#pragma once

#include <netinet/in.h>
#include <sys/socket.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

namespace xlb::health::test {

// Binds a socket of `type` on addr:0 and returns it, or -1.
int bind_loopback(const std::string& addr, int type);
std::uint16_t local_port(int fd);
// A port on addr that nothing listens on (bound once, then closed).
std::uint16_t unused_port(const std::string& addr, int type);

class Stop {
public:
    Stop();
    ~Stop();
    void fire();
    bool fired() const;
    // Waits until stopped or `d` passed; true if stopped.
    bool wait(std::chrono::milliseconds d) const;
    // poll() on fd for `events` or the stop; true if fd is ready.
    bool wait_fd(int fd, short events, std::chrono::milliseconds d) const;
    int fd() const { return fd_; }

private:
    int fd_;
};

class TcpServer {
public:
    struct Connection {
        int fd;
        const Stop& stop;
        std::string peer;  // the client's address
        TcpServer* server;
        // Reads until the end of an HTTP request head (or 2 s, or the stop).
        std::string read_request();
        void write(std::string_view bytes);
    };
    using Handler = std::function<void(Connection&)>;

    TcpServer(const std::string& addr, Handler handler);
    ~TcpServer();
    std::uint16_t port() const { return port_; }
    std::vector<std::string> requests() const;  // heads read by read_request()
    std::vector<std::string> peers() const;
    int accepted() const { return accepted_.load(); }

private:
    void run();
    int fd_ = -1;
    std::uint16_t port_ = 0;
    Handler handler_;
    Stop stop_;
    std::thread thread_;
    mutable std::mutex mu_;
    std::vector<std::thread> workers_;
    std::vector<std::string> requests_;
    std::vector<std::string> peers_;
    std::atomic<int> accepted_{0};
    friend struct Connection;
    void record_request(std::string head);
};

class UdpServer {
public:
    // Returns the reply to send, or nullopt for none.
    using Handler = std::function<std::optional<std::string>(const std::string& datagram)>;
    UdpServer(const std::string& addr, Handler handler);
    ~UdpServer();
    std::uint16_t port() const { return port_; }
    int received() const { return received_.load(); }

private:
    int fd_ = -1;
    std::uint16_t port_ = 0;
    Handler handler_;
    Stop stop_;
    std::thread thread_;
    std::atomic<int> received_{0};
};

// Certificates for the TLS tests, made at set-up with the openssl command in
// a temporary directory (removed by the destructor): a CA, and three server
// certificates it signed for the name backend.test and the address
// 127.0.0.1: a good one, an expired one, and one for another name
// (other.test, no address).
class TestCertificates {
public:
    TestCertificates();
    ~TestCertificates();
    TestCertificates(const TestCertificates&) = delete;
    TestCertificates& operator=(const TestCertificates&) = delete;
    // Empty when every file was made; else what failed.
    const std::string& error() const { return error_; }
    std::string ca() const { return dir_ + "/ca.pem"; }
    std::string cert(const std::string& name) const { return dir_ + "/" + name + ".pem"; }
    std::string key(const std::string& name) const { return dir_ + "/" + name + ".key"; }

private:
    std::string dir_;
    std::string error_;
};

// A TLS server (OpenSSL) on a TcpServer: each connection's handshake with
// `cert`/`key`, then the handler, which reads and writes through TLS.
class TlsServer {
public:
    struct Connection {
        void* ssl;  // SSL*
        const Stop& stop;
        TlsServer* server;
        // As TcpServer::Connection::read_request(), through TLS.
        std::string read_request();
        void write(std::string_view bytes);
    };
    using Handler = std::function<void(Connection&)>;

    TlsServer(const std::string& addr, const std::string& cert, const std::string& key,
              Handler handler);
    ~TlsServer();
    bool ready() const { return ctx_ != nullptr; }
    std::uint16_t port() const { return tcp_->port(); }
    int accepted() const { return tcp_->accepted(); }
    int handshakes() const { return handshakes_.load(); }
    std::vector<std::string> requests() const;      // heads read by read_request()
    std::vector<std::string> server_names() const;  // SNI of each handshake ("" for none)

private:
    void serve(TcpServer::Connection& c);
    void* ctx_ = nullptr;  // SSL_CTX*
    Handler handler_;
    std::atomic<int> handshakes_{0};
    mutable std::mutex mu_;
    std::vector<std::string> requests_;
    std::vector<std::string> server_names_;
    std::unique_ptr<TcpServer> tcp_;  // last: its threads stop first
};

// A listening socket whose accept queue is full: further SYNs are dropped, so
// a connect to it neither succeeds nor fails (until the probe's timeout).
class FullBacklog {
public:
    FullBacklog();
    ~FullBacklog();
    std::uint16_t port() const { return port_; }
    bool full() const { return full_; }

private:
    int fd_ = -1;
    std::uint16_t port_ = 0;
    std::vector<int> fillers_;
    bool full_ = false;
};

}  // namespace xlb::health::test
