// SPDX-License-Identifier: Apache-2.0
// The probe engine's seam for time and the operating system (engine.h): the
// clocks, the wait for socket events and timers, and the socket calls. The
// engine makes every one of these calls through a ProbeIo, so that tests
// give it a fake one (tests/health/fake_probe_io.h): they set the time, say
// which socket is writable, readable, reset or closed, fire timers by hand
// (ProbeEngine::run_once()) and never sleep.
//
// Cost: one virtual call per system call (the system call dominates), no
// allocation; the events are epoll's own structs, filled in place.
//
// Calls return what the system call returns on success and -errno on
// failure (errno is not read). Event bits are epoll's (EPOLLIN, EPOLLOUT,
// EPOLLERR, EPOLLHUP, EPOLLRDHUP).
#pragma once

#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/types.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>

#include "xlb/error.h"
#include "xlb/health/types.h"

namespace xlb::health {

class ProbeIo {
public:
    // The tag (epoll_event::data.u64) of the event that wake() causes.
    static constexpr std::uint64_t kWakeTag = ~std::uint64_t{0};

    virtual ~ProbeIo() = default;

    // --- Time -------------------------------------------------------------------
    virtual TimePoint now() = 0;  // monotonic: schedules, timeouts, results
    // Wall-clock time, for HTTP dates (Retry-After relative to a Date).
    virtual std::chrono::system_clock::time_point wall_now() = 0;

    // --- The wait -----------------------------------------------------------------
    // Sets up the wait (the real one: an epoll instance and an eventfd for
    // wake()). Called once, before the first wait().
    virtual Result<void> open() = 0;
    // Waits until a watched socket has an event, wake() is called, or
    // `deadline` passes (TimePoint::max(): no deadline); fills `out` and
    // returns how many events it holds (0: the deadline), or -errno.
    virtual int wait(std::span<epoll_event> out, TimePoint deadline) = 0;
    // Makes wait() return an event tagged kWakeTag. Any thread; before
    // open(), nothing.
    virtual void wake() = 0;

    // --- Sockets (non-blocking) ---------------------------------------------------
    virtual int socket(int domain, int type) = 0;
    virtual int setsockopt(int fd, int level, int name, const void* value, socklen_t len) = 0;
    virtual int bind(int fd, const sockaddr* addr, socklen_t len) = 0;
    virtual int connect(int fd, const sockaddr* addr, socklen_t len) = 0;  // -EINPROGRESS
    virtual ssize_t send(int fd, const void* data, std::size_t len, int flags) = 0;
    virtual ssize_t recv(int fd, void* data, std::size_t len, int flags) = 0;
    // The socket's pending error (SO_ERROR), 0 for none.
    virtual int socket_error(int fd) = 0;
    // Adds fd to the wait, edge-triggered, for input, output and hang-ups;
    // its events carry `tag`.
    virtual int watch(int fd, std::uint64_t tag) = 0;
    // Closes fd (which leaves the wait).
    virtual void close(int fd) = 0;
};

// The real one: steady_clock and system_clock, epoll_pwait2() with an
// eventfd for wake(), the socket system calls.
std::unique_ptr<ProbeIo> system_probe_io();

}  // namespace xlb::health
