// SPDX-License-Identifier: Apache-2.0
#include "tcp_lab.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>

namespace xlb::e2e_tcp {

using test::in_netns;

namespace {

std::string quote(const std::string& s) {
    std::string out = "'";
    for (char c : s) {
        if (c == '\'')
            out += "'\\''";
        else
            out += c;
    }
    return out + "'";
}

// A TCP connection to vip:port, made in the calling thread's namespace, from
// `source` when not empty (an address of the namespace). -1 and error set on
// failure.
int connect_to(const std::string& vip, int port, std::string& error, int timeout_ms = 3000,
               const std::string& source = "") {
    addrinfo hints{};
    hints.ai_flags = AI_NUMERICHOST | AI_NUMERICSERV;
    hints.ai_socktype = SOCK_STREAM;
    addrinfo* found = nullptr;
    if (int rc = getaddrinfo(vip.c_str(), std::to_string(port).c_str(), &hints, &found); rc != 0) {
        error = "address " + vip + ": " + gai_strerror(rc);
        return -1;
    }
    sockaddr_storage ss{};
    const socklen_t len = found->ai_addrlen;
    std::memcpy(&ss, found->ai_addr, len);
    const int family = found->ai_family;
    freeaddrinfo(found);
    int fd = socket(family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (fd < 0) {
        error = std::string("socket: ") + strerror(errno);
        return -1;
    }
    if (!source.empty()) {
        addrinfo* local = nullptr;
        hints.ai_family = family;
        if (int rc = getaddrinfo(source.c_str(), "0", &hints, &local); rc != 0) {
            error = "source " + source + ": " + gai_strerror(rc);
            close(fd);
            return -1;
        }
        const int bound = bind(fd, local->ai_addr, local->ai_addrlen);
        freeaddrinfo(local);
        if (bound != 0) {
            error = "bind " + source + ": " + strerror(errno);
            close(fd);
            return -1;
        }
    }
    if (connect(fd, reinterpret_cast<sockaddr*>(&ss), len) != 0 && errno != EINPROGRESS) {
        error = std::string("connect: ") + strerror(errno);
        close(fd);
        return -1;
    }
    pollfd p{fd, POLLOUT, 0};
    if (poll(&p, 1, timeout_ms) != 1) {
        error = "connect: timed out";
        close(fd);
        return -1;
    }
    int soerr = 0;
    socklen_t sl = sizeof soerr;
    getsockopt(fd, SOL_SOCKET, SO_ERROR, &soerr, &sl);
    if (soerr != 0) {
        error = std::string("connect: ") + strerror(soerr);
        close(fd);
        return -1;
    }
    int flags = fcntl(fd, F_GETFL);
    fcntl(fd, F_SETFL, flags & ~O_NONBLOCK);
    return fd;
}

// Reads until `until` is in buf or the peer closes; false on timeout/error.
bool read_until(int fd, std::string& buf, const std::string& until, int timeout_ms,
                std::string& error) {
    auto deadline = Clock::now() + std::chrono::milliseconds(timeout_ms);
    while (until.empty() || buf.find(until) == std::string::npos) {
        auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
        if (left.count() <= 0) {
            error = "timed out after " + std::to_string(timeout_ms) + " ms";
            return false;
        }
        pollfd p{fd, POLLIN, 0};
        int r = poll(&p, 1, static_cast<int>(left.count()));
        if (r < 0) {
            error = std::string("poll: ") + strerror(errno);
            return false;
        }
        if (r == 0) continue;
        char tmp[4096];
        ssize_t n = recv(fd, tmp, sizeof tmp, 0);
        if (n < 0) {
            error = std::string("recv: ") + strerror(errno);
            return false;
        }
        if (n == 0) {
            if (until.empty()) return true;
            error = "closed by the peer";
            return false;
        }
        buf.append(tmp, static_cast<std::size_t>(n));
    }
    return true;
}

bool send_all(int fd, const std::string& data, std::string& error) {
    std::size_t off = 0;
    while (off < data.size()) {
        ssize_t n = send(fd, data.data() + off, data.size() - off, MSG_NOSIGNAL);
        if (n < 0) {
            error = std::string("send: ") + strerror(errno);
            return false;
        }
        off += static_cast<std::size_t>(n);
    }
    return true;
}

std::string http_get_name(const std::string& vip, int port, const std::string& source = "",
                          int connect_ms = 3000) {
    std::string error;
    int fd = connect_to(vip, port, error, connect_ms, source);
    if (fd < 0) return "error: " + error;
    std::string buf;
    bool ok = send_all(fd, "GET / HTTP/1.0\r\nHost: lab\r\n\r\n", error) &&
              read_until(fd, buf, "", 3000, error);
    close(fd);
    if (!ok) return "error: " + error;
    auto body = buf.find("\r\n\r\n");
    if (buf.rfind("HTTP/1.0 200", 0) != 0 || body == std::string::npos)
        return "error: unexpected answer: " + buf.substr(0, 60);
    std::string name = buf.substr(body + 4);
    while (!name.empty() && (name.back() == '\n' || name.back() == '\r')) name.pop_back();
    return name;
}

}  // namespace

// ---- Lab ----------------------------------------------------------------------

void Lab::up(int backends, const std::string& extra) {
    test::LabOptions options;
    options.backends = backends;
    options.client = true;
    std::istringstream words(extra);
    for (std::string w; words >> w;) options.extra.push_back(w);
    test::Lab::up(options);
}

std::string Lab::agent_log() const {
    std::ifstream in(state_dir() + "/xlbd.log");
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
}

Lab::Reply Lab::api(const std::string& method, const std::string& path, const std::string& body) {
    std::string cmd = "curl -sS --max-time 20 --unix-socket " + quote(state_dir() + "/xlbd.sock") +
                      " -X " + method + " -w '\\n%{http_code}'";
    if (!body.empty()) cmd += " -H 'Content-Type: application/json' --data-binary " + quote(body);
    cmd += " " + quote("http://xlbd" + path);
    CmdResult r = run(cmd);
    Reply reply;
    auto nl = r.out.rfind('\n');
    if (r.rc != 0 || nl == std::string::npos) {
        reply.body = r.out;
        return reply;
    }
    reply.body = r.out.substr(0, nl);
    try {
        reply.status = std::stoi(r.out.substr(nl + 1));
    } catch (...) {
        reply.status = -1;
    }
    return reply;
}

// ---- clients -------------------------------------------------------------------

int connect_in(const std::string& ns, const std::string& vip, int port, std::string& error,
               const std::string& source) {
    return in_netns(ns, [&] {
        const int fd = connect_to(vip, port, error, 3000, source);
        if (fd >= 0) error.clear();
        return fd;
    });
}

std::string get_backend_name(const std::string& ns, const std::string& vip, int port,
                             const std::string& source, int connect_ms) {
    return in_netns(ns, [&] { return http_get_name(vip, port, source, connect_ms); });
}

std::map<std::string, int> count_backends(const std::string& ns, const std::string& vip, int n) {
    return in_netns(ns, [&] {
        std::map<std::string, int> counts;
        for (int i = 0; i < n; ++i) {
            std::string name = http_get_name(vip, 80);
            if (name.rfind("error", 0) == 0) {
                if (counts["error"]++ == 0) std::fprintf(stderr, "first error: %s\n", name.c_str());
            } else {
                counts[name]++;
            }
        }
        return counts;
    });
}

std::string format_counts(const std::map<std::string, int>& counts) {
    int total = 0;
    for (const auto& [k, v] : counts) total += v;
    std::string out;
    char line[128];
    for (const auto& [k, v] : counts) {
        std::snprintf(line, sizeof line, "%s%s %d (%.1f%%)", out.empty() ? "" : ", ", k.c_str(), v,
                      total ? 100.0 * v / total : 0.0);
        out += line;
    }
    return out;
}

Streams::Streams(const std::string& ns, const std::string& vip, int count,
                 const std::string& source) {
    conns_ = in_netns(ns, [&] {
        std::vector<Conn> conns;
        for (int i = 0; i < count; ++i) {
            Conn c;
            std::string error, buf;
            c.fd = connect_to(vip, 80, error, 3000, source);
            if (c.fd >= 0 && send_all(c.fd, "GET /echo HTTP/1.0\r\n\r\n", error) &&
                read_until(c.fd, buf, "\r\n\r\n", 3000, error) &&
                buf.rfind("HTTP/1.0 200", 0) == 0) {
                // fine
            } else {
                c.error = "setup: " + (error.empty() ? "bad answer " + buf.substr(0, 40) : error);
            }
            conns.push_back(std::move(c));
        }
        return conns;
    });
    thread_ = std::thread([this] { loop(); });
}

Streams::~Streams() {
    stop();
    for (Conn& c : conns_)
        if (c.fd >= 0) close(c.fd);
}

void Streams::stop() {
    stop_ = true;
    if (thread_.joinable()) thread_.join();
}

void Streams::reset_worst() {
    std::lock_guard lock(mu_);
    for (Conn& c : conns_) c.worst_ms = 0;
}

std::vector<Streams::Conn> Streams::snapshot() {
    std::lock_guard lock(mu_);
    return conns_;
}

int Streams::close_on(const std::string& backend) {
    std::lock_guard lock(mu_);
    int closed = 0;
    for (Conn& c : conns_) {
        if (!c.error.empty() || c.backend != backend) continue;
        // shutdown, not close: the loop may be using the fd right now, and a
        // closed fd number could be reused under it
        ::shutdown(c.fd, SHUT_RDWR);
        c.closed = true;
        c.error = "closed by the test";
        ++closed;
    }
    return closed;
}

void Streams::loop() {
    std::uint64_t seq = 0;
    std::vector<std::string> bufs(conns_.size());
    while (!stop_) {
        ++seq;
        for (std::size_t i = 0; i < conns_.size() && !stop_; ++i) {
            int fd;
            {
                std::lock_guard lock(mu_);
                if (!conns_[i].error.empty()) continue;
                fd = conns_[i].fd;
            }
            std::string line = std::to_string(seq) + "\n", error;
            auto start = Clock::now();
            std::string& buf = bufs[i];
            bool ok = send_all(fd, line, error) && read_until(fd, buf, "\n", 2000, error);
            double ms = std::chrono::duration<double, std::milli>(Clock::now() - start).count();
            std::string name;
            if (ok) {
                std::string reply = buf.substr(0, buf.find('\n'));
                buf.erase(0, buf.find('\n') + 1);
                auto sp = reply.find(' ');
                name = reply.substr(0, sp);
                if (sp == std::string::npos || reply.substr(sp + 1) != std::to_string(seq)) {
                    ok = false;
                    error = "unexpected echo \"" + reply + "\" for " + std::to_string(seq);
                }
            }
            std::lock_guard lock(mu_);
            Conn& c = conns_[i];
            if (c.closed) continue;
            if (!ok) {
                c.error = error + " (after " + std::to_string(c.echoes) + " echoes)";
                continue;
            }
            if (c.backend.empty()) c.backend = name;
            if (name != c.backend) {
                c.error = "moved from " + c.backend + " to " + name;
                continue;
            }
            c.echoes++;
            if (ms > c.worst_ms) c.worst_ms = ms;
        }
        std::this_thread::sleep_for(20ms);
    }
}

}  // namespace xlb::e2e_tcp
