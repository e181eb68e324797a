// SPDX-License-Identifier: Apache-2.0
// The real ProbeIo: the clocks, epoll and the socket system calls.
#include "xlb/health/probe_io.h"

#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <ctime>

namespace xlb::health {

namespace {

int rc(int r) { return r < 0 ? -errno : r; }
ssize_t rc(ssize_t r) { return r < 0 ? -errno : r; }

class SystemProbeIo final : public ProbeIo {
public:
    ~SystemProbeIo() override {
        if (epfd_ >= 0) ::close(epfd_);
        if (const int fd = evfd_.load(); fd >= 0) ::close(fd);
    }

    TimePoint now() override { return Clock::now(); }
    std::chrono::system_clock::time_point wall_now() override {
        return std::chrono::system_clock::now();
    }

    Result<void> open() override {
        if (epfd_ >= 0) return {};
        const int ep = ::epoll_create1(EPOLL_CLOEXEC);
        if (ep < 0) return fail(errno, "create the probes' epoll instance");
        const int ev = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
        if (ev < 0) {
            const int err = errno;
            ::close(ep);
            return fail(err, "create the probe engine's eventfd");
        }
        epoll_event e{};
        e.events = EPOLLIN;
        e.data.u64 = kWakeTag;
        if (::epoll_ctl(ep, EPOLL_CTL_ADD, ev, &e) != 0) {
            const int err = errno;
            ::close(ep);
            ::close(ev);
            return fail(err, "add the eventfd to the probes' epoll instance");
        }
        epfd_ = ep;
        evfd_ = ev;
        return {};
    }

    int wait(std::span<epoll_event> out, TimePoint deadline) override {
        timespec ts{};
        timespec* timeout = nullptr;
        if (deadline != TimePoint::max()) {
            const auto left = std::max(deadline - Clock::now(), Clock::duration::zero());
            const auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(left).count();
            ts.tv_sec = static_cast<time_t>(ns / 1'000'000'000);
            ts.tv_nsec = static_cast<long>(ns % 1'000'000'000);
            timeout = &ts;
        }
        const int n =
            ::epoll_pwait2(epfd_, out.data(), static_cast<int>(out.size()), timeout, nullptr);
        if (n < 0) return errno == EINTR ? 0 : -errno;
        for (int k = 0; k < n; ++k) {
            if (out[static_cast<std::size_t>(k)].data.u64 == kWakeTag) {
                std::uint64_t v;
                [[maybe_unused]] auto r = ::read(evfd_.load(), &v, sizeof(v));
            }
        }
        return n;
    }

    void wake() override {
        const int fd = evfd_.load();
        if (fd < 0) return;
        const std::uint64_t one = 1;
        [[maybe_unused]] auto n = ::write(fd, &one, sizeof(one));
    }

    int socket(int domain, int type) override { return rc(::socket(domain, type, 0)); }
    int setsockopt(int fd, int level, int name, const void* value, socklen_t len) override {
        return rc(::setsockopt(fd, level, name, value, len));
    }
    int bind(int fd, const sockaddr* addr, socklen_t len) override {
        return rc(::bind(fd, addr, len));
    }
    int connect(int fd, const sockaddr* addr, socklen_t len) override {
        return rc(::connect(fd, addr, len));
    }
    ssize_t send(int fd, const void* data, std::size_t len, int flags) override {
        return rc(::send(fd, data, len, flags));
    }
    ssize_t recv(int fd, void* data, std::size_t len, int flags) override {
        return rc(::recv(fd, data, len, flags));
    }
    int socket_error(int fd) override {
        int err = 0;
        socklen_t len = sizeof(err);
        if (::getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) != 0) return errno;
        return err;
    }
    int watch(int fd, std::uint64_t tag) override {
        epoll_event ev{};
        ev.events = EPOLLIN | EPOLLOUT | EPOLLRDHUP | EPOLLET;
        ev.data.u64 = tag;
        return rc(::epoll_ctl(epfd_, EPOLL_CTL_ADD, fd, &ev));
    }
    void close(int fd) override { ::close(fd); }

private:
    int epfd_ = -1;              // set by open(), before the engine's thread
    std::atomic<int> evfd_{-1};  // read by wake() on any thread
};

}  // namespace

std::unique_ptr<ProbeIo> system_probe_io() { return std::make_unique<SystemProbeIo>(); }

}  // namespace xlb::health
