// SPDX-License-Identifier: Apache-2.0
// The probers: every probe of every target on one event loop (epoll, one
// thread), with non-blocking sockets; no thread per probe.
//
// Schedule, per target: the first probe at a random point within
// min(interval, first_probe_spread) of the target's arrival (so that a large
// pool is not probed in one burst, and first verdicts come quickly); each next
// one `interval` plus a random share of `jitter` ([0, jitter]) after the
// previous one was due. The timeout is strict: a probe without a complete
// answer `timeout` after it started fails with Failure::kTimeout, whatever
// stage it is at (connecting, waiting for the headers, reading the body).
//
// Probes:
//  - tcp: a connect, ended with a reset so that this host keeps no TIME_WAIT
//    socket per probe (at 10,000 probes/s TIME_WAIT would pin 600,000
//    four-tuples): connect(AF_UNSPEC), which leaves the socket for the
//    target's next probe (no socket(), setsockopt(), epoll_ctl() or close()
//    per probe; a new source port each time, as a new socket would get);
//    closed with SO_LINGER 0 when the target goes;
//  - http: HTTP/1.1 GET (http.h). With reuse_connection (the default) the
//    connection is kept for the next probe while the response allows it and
//    it is younger than reuse_limit; a close by the server between probes
//    drops it without a failure. Without reuse, "Connection: close": the
//    response is read to its end, the server closes first and keeps the
//    TIME_WAIT, as for any Connection: close exchange; if the probe must close
//    first (a timeout, a body too long to read, a server that keeps the
//    connection open), the close is a reset, for the same reason as above;
//  - https: the http probe inside TLS (OpenSSL, tls.h), its handshake driven
//    by the same events, its records read and written through ProbeIo; a
//    kept connection keeps its session. A failed handshake is
//    Failure::kTls, its detail OpenSSL's reason ("TLS handshake with
//    10.0.0.2:443: certificate has expired");
//  - udp: the payload in one datagram to the backend (connected socket, so
//    that an ICMP port unreachable fails it at once as "refused"); any reply
//    passes, or one containing udp_expect.
//
// Probes through the data path (HealthCheck::via_vip): a target with
// via_address connects to the VIP with SO_MARK = its mark (the backend's id
// under XLB_PROBE_MARK_BASE); the tc egress program bpf/xlb_probe.bpf.c
// encapsulates marked packets to that backend exactly as the XDP program does
// client traffic; the backend answers from the VIP straight to the prober
// (direct return), which XDP passes as not addressed to a VIP. A backend whose
// decapsulation or VIP binding is broken thus fails its probe.
//
// Threads: set_targets(), call_at(), stats() and cpu_time() may be called from
// any thread; the result handler and call_at() functions run on the engine's
// thread and must not block it (the agent posts results to its control loop).
// Nor may they throw: the engine does not catch, so an exception from them
// ends the process (std::terminate, noexcept) rather than being lost.
//
// The seam for time and sockets (probe_io.h): every clock reading, wait and
// socket call goes through a ProbeIo, the system's unless the constructor is
// given one. A test gives a fake one and, instead of start(), calls
// run_once(): one turn of the loop on the test's thread (the engine asks the
// fake to wait until its next timer, takes the events the test queued,
// reads the fake's time and runs every timer due by then). Setting the
// fake's time to the deadline it was asked for and calling run_once() fires
// the timers by hand; nothing sleeps. The seam costs one virtual call per
// system call and allocates nothing.
//
// Errors: start() returns an xlb::Error (xlb/error.h). A probe that this
// host cannot make (no file descriptor, an unusable source address or
// device) is a probe outcome, Failure::kLocal, its detail the Error's
// message: "could not probe: bind 192.0.2.77: Cannot assign requested address".
#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "xlb/error.h"
#include "xlb/health/probe_io.h"
#include "xlb/health/targets.h"
#include "xlb/health/types.h"

namespace xlb::health {

class ProbeEngine {
public:
    struct Options {
        // Source addresses of probes, per family (IP_BIND_ADDRESS_NO_PORT:
        // the port is still picked at connect time). None: the kernel picks.
        std::optional<net::IpAddress> source_v4;
        std::optional<net::IpAddress> source_v6;
        std::string device;      // SO_BINDTODEVICE; empty: none
        std::uint32_t mark = 0;  // SO_MARK; 0: none
        // Probes in flight at most; the others wait (and are late). 0: the
        // file-descriptor limit less 256, at least 64.
        std::size_t max_in_flight = 0;
        std::chrono::milliseconds first_probe_spread{1000};
        // Due probes are started in batches, the loop waking at most once per
        // this much time (rounded up to a multiple of it): a probe starts up to
        // this late, and 10,000 probes a second cost 250 wake-ups, not 10,000.
        // In a VM a timer wake-up costs several microseconds (xlb-bench-health,
        // tcp: 1 ms gave 1.07-1.19 times the floor's CPU per probe, 4 ms
        // 1.00-1.02, with lateness p99 0.9 and 3.4 ms). 0: wake for every probe.
        std::chrono::microseconds timer_resolution{4000};
        std::size_t max_http_head = 16 * 1024;
        std::size_t max_http_body = 64 * 1024;  // read for body_contains
        std::uint64_t seed = 0;                 // 0: random
    };

    struct Stats {
        std::uint64_t targets = 0;  // (VIP, backend) pairs
        std::uint64_t probes = 0;   // distinct probes serving them (shared probes)
        std::uint64_t probes_started = 0;
        std::uint64_t results = 0;  // probes finished (each fed every pair it serves)
        std::uint64_t in_flight = 0;
        std::uint64_t waiting = 0;  // due, held back by max_in_flight
        // Open between probes: http connections (reuse_connection) and tcp
        // probes' sockets (disconnected, connected again by the next probe).
        std::uint64_t kept_connections = 0;
        std::uint64_t reused = 0;  // probes started on a kept connection or socket
    };

    // Called once per finished probe; a shared probe's result names every
    // (VIP, backend) target it serves (ProbeResult::targets()). The result is
    // valid for the call only.
    using ResultHandler = std::function<void(const ProbeResult&)>;

    ProbeEngine(Options options, ResultHandler on_result);  // the system's ProbeIo
    // With `io` (a fake, in tests), which must outlive the engine.
    ProbeEngine(Options options, ResultHandler on_result, ProbeIo& io);
    ~ProbeEngine();  // stop()
    ProbeEngine(const ProbeEngine&) = delete;
    ProbeEngine& operator=(const ProbeEngine&) = delete;

    // Starts the engine's thread. An error if the event loop cannot be set up
    // (ProbeIo::open()) or the thread cannot be started.
    Result<void> start();
    // For tests with a fake ProbeIo, on an engine never started: one turn of
    // the loop on the caller's thread (wait, then events, commands, timers
    // due by io.now(), probes held back). An error if started, or if
    // ProbeIo::open() fails.
    Result<void> run_once();
    // Stops and joins the thread; probes in flight are abandoned (no result).
    void stop();

    // Replaces the set of targets (by key). A target probed as before (same
    // port and check, thresholds and the state machine's other settings
    // aside) keeps its schedule and its probe in flight; a changed one
    // abandons its probe in flight and is next probed no later than one new
    // interval from now; a new one is probed within first_probe_spread.
    // Applied on the engine thread, soon after the call.
    void set_targets(std::vector<ProbeTarget> targets);

    // Runs fn on the engine thread at `when` (or soon after): a timer for the
    // agent, e.g. to wake its control loop at HealthTracker::next_change().
    void call_at(TimePoint when, std::function<void()> fn);

    Stats stats() const;
    // CPU time (user + system) used by the engine's thread so far.
    std::chrono::nanoseconds cpu_time() const;

    struct Impl;

private:
    std::unique_ptr<Impl> impl_;
};

}  // namespace xlb::health
