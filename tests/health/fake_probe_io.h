// SPDX-License-Identifier: Apache-2.0
// A fake ProbeIo (xlb/health/probe_io.h) for the probe engine's tests: time
// is a value the test sets; sockets are records of what the engine did
// (options, bind, connect, bytes sent) and queues of what the test wants it
// to read; events are queued by the test (writable, input, peer closed,
// errors) and handed out by the next wait(), which never blocks. Failures
// are injected per call. Single-threaded: the engine runs on the test's
// thread through ProbeEngine::run_once().
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstring>
#include <deque>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "xlb/health/probe_io.h"

namespace xlb::health::test {

class FakeProbeIo final : public ProbeIo {
public:
    struct Input {
        std::string data;  // bytes to read, unless:
        int error = 0;     // recv() fails with this errno (once)
        bool eof = false;  // recv() returns 0 (from then on)
    };
    struct Socket {
        int domain = 0;
        int type = 0;  // SOCK_STREAM or SOCK_DGRAM (flags masked off)
        bool open = true;
        bool watched = false;
        std::uint64_t tag = 0;
        bool abortive = false;  // SO_LINGER {1, 0}
        std::uint32_t mark = 0;
        std::string device;
        std::string bound;  // the address bound to; empty: none
        std::string peer;   // "address port" connected to; empty after a disconnect
        int connects = 0;
        int disconnects = 0;  // connect(AF_UNSPEC)
        std::string sent;
        std::size_t send_room = SIZE_MAX;  // send() takes this much more, then EAGAIN
        std::deque<Input> input;
        int so_error = 0;
    };

    // --- Time
    TimePoint time = TimePoint{} + std::chrono::hours(1);
    std::chrono::system_clock::time_point wall =
        std::chrono::system_clock::time_point{} + std::chrono::hours(24 * 365 * 54);
    TimePoint now() override { return time; }
    std::chrono::system_clock::time_point wall_now() override { return wall; }

    // --- The wait
    int open_errno = 0;
    bool opened = false;
    TimePoint deadline = TimePoint::max();  // what the last wait() was asked for
    int waits = 0;
    Result<void> open() override {
        if (open_errno != 0) return fail(open_errno, "open the fake");
        opened = true;
        return {};
    }
    int wait(std::span<epoll_event> out, TimePoint until) override {
        deadline = until;
        ++waits;
        std::size_t n = 0;
        if (woken && n < out.size()) {
            woken = false;
            out[n].events = EPOLLIN;
            out[n++].data.u64 = kWakeTag;
        }
        while (!ready.empty() && n < out.size()) {
            out[n++] = ready.front();
            ready.pop_front();
        }
        return static_cast<int>(n);
    }
    void wake() override {
        if (opened) woken = true;
    }

    // --- Sockets
    int socket_errno = 0;               // socket() fails with this (0: it works)
    int bind_errno = 0;                 // bind() fails with this
    int mark_errno = 0;                 // setsockopt(SO_MARK) fails with this
    int connect_result = -EINPROGRESS;  // what connect() returns
    int disconnect_result = 0;          // what connect(AF_UNSPEC) returns
    std::map<int, Socket> sockets;      // every socket made, by fd
    int last_fd = -1;

    int socket(int domain, int type) override {
        if (socket_errno != 0) return -socket_errno;
        last_fd = next_fd_++;
        Socket& s = sockets[last_fd];
        s.domain = domain;
        s.type = type & ~(SOCK_NONBLOCK | SOCK_CLOEXEC);
        return last_fd;
    }
    int setsockopt(int fd, int level, int name, const void* value, socklen_t len) override {
        Socket& s = at(fd);
        if (level == SOL_SOCKET && name == SO_LINGER) {
            linger lg;
            std::memcpy(&lg, value, sizeof(lg));
            s.abortive = lg.l_onoff == 1 && lg.l_linger == 0;
        } else if (level == SOL_SOCKET && name == SO_MARK) {
            if (mark_errno != 0) return -mark_errno;
            std::memcpy(&s.mark, value, sizeof(s.mark));
        } else if (level == SOL_SOCKET && name == SO_BINDTODEVICE) {
            s.device.assign(static_cast<const char*>(value), len);
        }
        return 0;
    }
    int bind(int fd, const sockaddr* addr, socklen_t) override {
        if (bind_errno != 0) return -bind_errno;
        at(fd).bound = address(addr);
        return 0;
    }
    int connect(int fd, const sockaddr* addr, socklen_t) override {
        if (addr->sa_family == AF_UNSPEC) {
            // As the kernel's disconnect: unconnected, ECONNRESET pending.
            Socket& s = at(fd);
            ++s.disconnects;
            s.peer.clear();
            s.so_error = ECONNRESET;
            return disconnect_result;
        }
        ++at(fd).connects;
        const sockaddr_in* in = reinterpret_cast<const sockaddr_in*>(addr);
        const auto port = addr->sa_family == AF_INET
                              ? ntohs(in->sin_port)
                              : ntohs(reinterpret_cast<const sockaddr_in6*>(addr)->sin6_port);
        at(fd).peer = address(addr) + " " + std::to_string(port);
        return connect_result;
    }
    ssize_t send(int fd, const void* data, std::size_t len, int) override {
        Socket& s = at(fd);
        if (s.so_error != 0) return -std::exchange(s.so_error, 0);
        const std::size_t n = std::min(len, s.send_room);
        if (n == 0) return -EAGAIN;
        s.send_room -= s.send_room == SIZE_MAX ? 0 : n;
        s.sent.append(static_cast<const char*>(data), n);
        return static_cast<ssize_t>(n);
    }
    ssize_t recv(int fd, void* data, std::size_t len, int flags) override {
        Socket& s = at(fd);
        if (s.input.empty()) return -EAGAIN;
        Input& in = s.input.front();
        if (in.eof) return 0;
        if (in.error != 0) {
            const int err = in.error;
            if (!(flags & MSG_PEEK)) s.input.pop_front();
            return -err;
        }
        const std::size_t n = std::min(len, in.data.size());
        std::memcpy(data, in.data.data(), n);
        if (!(flags & MSG_PEEK)) {
            in.data.erase(0, n);
            if (in.data.empty()) s.input.pop_front();
        }
        return static_cast<ssize_t>(n);
    }
    int socket_error(int fd) override { return std::exchange(at(fd).so_error, 0); }
    int watch(int fd, std::uint64_t tag) override {
        Socket& s = at(fd);
        s.watched = true;
        s.tag = tag;
        return 0;
    }
    void close(int fd) override { at(fd).open = false; }

    // --- What the test makes happen (events reach the engine at its next turn)
    void writable(int fd) { event(fd, EPOLLOUT); }
    // A connect that failed (ECONNREFUSED: a reset to the SYN).
    void connect_fails(int fd, int err) {
        at(fd).so_error = err;
        event(fd, EPOLLOUT | EPOLLERR | EPOLLHUP);
    }
    void receive(int fd, std::string data) {
        at(fd).input.push_back(Input{std::move(data)});
        event(fd, EPOLLIN);
    }
    void peer_closes(int fd) {
        at(fd).input.push_back(Input{.eof = true});
        event(fd, EPOLLIN | EPOLLRDHUP);
    }
    void receive_error(int fd, int err) {
        at(fd).input.push_back(Input{.error = err});
        event(fd, EPOLLIN | EPOLLERR);
    }
    // An event with the tag the socket was watched with.
    void event(int fd, std::uint32_t events) {
        epoll_event ev{};
        ev.events = events;
        ev.data.u64 = at(fd).tag;
        ready.push_back(ev);
    }

    Socket& at(int fd) { return sockets.at(fd); }
    std::size_t open_sockets() const {
        return static_cast<std::size_t>(std::count_if(
            sockets.begin(), sockets.end(), [](const auto& kv) { return kv.second.open; }));
    }

private:
    static std::string address(const sockaddr* addr) {
        char buf[INET6_ADDRSTRLEN] = {};
        if (addr->sa_family == AF_INET) {
            inet_ntop(AF_INET, &reinterpret_cast<const sockaddr_in*>(addr)->sin_addr, buf,
                      sizeof(buf));
        } else {
            inet_ntop(AF_INET6, &reinterpret_cast<const sockaddr_in6*>(addr)->sin6_addr, buf,
                      sizeof(buf));
        }
        return buf;
    }

    int next_fd_ = 100;
    bool woken = false;
    std::deque<epoll_event> ready;
};

}  // namespace xlb::health::test
