// SPDX-License-Identifier: Apache-2.0
// Keeps the next hop's MAC current: follows the kernel's neighbour
// notifications (RTNLGRP_NEIGH) for one (interface, address) and reports each
// change of the MAC the data plane should use.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "xlb/bpf/error.h"
#include "xlb/net/address.h"

namespace xlb::netlink {

using bpf::Error;
using bpf::Result;

struct NextHopEvent {
    // The MAC to use from now on; nullopt: the next hop is lost (its entry
    // went FAILED: nobody answered ARP/ND).
    std::optional<net::MacAddress> mac;
    std::uint16_t state = 0;  // the NUD_* state that caused the event (see state_name())
};

struct WatchOptions {
    // The MAC the caller already uses (typically from NeighborResolver::resolve).
    // The watcher reports only differences from it; if the table already
    // disagrees when the watcher starts, the first handle_readable() says so.
    std::optional<net::MacAddress> known;
    // Mark the entry NTF_EXT_MANAGED (Linux >= 5.16) unless it is static
    // (PERMANENT/NOARP). XDP_TX bypasses the neighbour subsystem, so without
    // this the kernel never re-confirms the entry: it ages to STALE, may be
    // garbage-collected, and a dead or replaced next hop goes unnoticed. A
    // managed entry is re-probed by the kernel itself, is exempt from GC, and
    // goes FAILED when the next hop stops answering. The watcher re-marks the
    // entry if it is deleted or loses the flag, and has a STALE entry
    // re-confirmed at once (one unicast probe per reachable time, 15-45 s).
    // false: only listen, never write to the table.
    bool manage = true;
};

class NeighborWatcher {
public:
    using Callback = std::function<void(const NextHopEvent&)>;

    // Subscribes, marks the entry managed (see WatchOptions), and queues a
    // read of the current entry that the first handle_readable() processes.
    // Sockets live in the calling thread's network namespace.
    static Result<NeighborWatcher> open(std::string_view interface, const net::IpAddress& next_hop,
                                        Callback on_change, WatchOptions options = {});
    static Result<NeighborWatcher> open(int ifindex, const net::IpAddress& next_hop,
                                        Callback on_change, WatchOptions options = {});

    NeighborWatcher(NeighborWatcher&&) noexcept;
    NeighborWatcher& operator=(NeighborWatcher&&) noexcept;
    ~NeighborWatcher();

    // For an event loop: poll this fd for POLLIN, then call handle_readable().
    int fd() const;
    // Processes every queued notification (never blocks) and calls the
    // callback, on this thread, for each change. An error leaves the watcher
    // usable unless broken() says otherwise (the socket itself failed).
    Result<void> handle_readable();
    bool broken() const;

    // The MAC last reported (or WatchOptions::known before any report).
    std::optional<net::MacAddress> current() const;
    // Whether the entry was managed when last seen.
    bool managed() const;
    int ifindex() const;
    const std::string& interface() const;
    const net::IpAddress& next_hop() const;

private:
    struct State;
    explicit NeighborWatcher(std::unique_ptr<State> state);
    std::unique_ptr<State> state_;
};

// A NeighborWatcher on its own thread, for as long as this object lives. The
// callbacks run on that thread. Destruction (or stop()) wakes the thread
// through an eventfd and joins it.
class NeighborWatchThread {
public:
    using ErrorCallback = std::function<void(const Error&)>;

    // The thread stops on its own only if the watcher breaks; every error is
    // passed to `on_error` first.
    static Result<NeighborWatchThread> start(NeighborWatcher watcher, ErrorCallback on_error = {});

    NeighborWatchThread(NeighborWatchThread&&) noexcept;
    NeighborWatchThread& operator=(NeighborWatchThread&&) noexcept;
    ~NeighborWatchThread();

    void stop();
    bool running() const;

private:
    struct Impl;
    explicit NeighborWatchThread(std::unique_ptr<Impl> impl);
    std::unique_ptr<Impl> impl_;
};

}  // namespace xlb::netlink
