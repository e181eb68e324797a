// SPDX-License-Identifier: Apache-2.0
#include "xlb/netlink/watcher.h"

#include <linux/neighbour.h>
#include <linux/rtnetlink.h>
#include <poll.h>
#include <sys/eventfd.h>

#include <atomic>
#include <cerrno>
#include <thread>
#include <vector>

#include "neighbor_internal.h"
#include "xlb/bpf/fd.h"
#include "xlb/netlink/link.h"
#include "xlb/netlink/neighbor.h"

namespace xlb::netlink {

struct NeighborWatcher::State {
    State(detail::Socket events_socket, detail::Socket request_socket)
        : events(std::move(events_socket)), requests(std::move(request_socket)) {}

    int ifindex = 0;
    std::string name;
    net::IpAddress next_hop;
    Callback on_change;
    WatchOptions options;
    std::string what;  // "watch next hop 192.0.2.1 on eth0"

    detail::Socket events;    // RTNLGRP_NEIGH notifications and our dumps
    detail::Socket requests;  // synchronous RTM_NEWNEIGH (managed)

    std::optional<net::MacAddress> current;
    bool managed = false;
    bool broken = false;
    // A FAILED entry seen in this batch, to be confirmed once the batch is
    // read (see on_entry()).
    std::optional<std::uint16_t> pending_loss;
    std::optional<std::uint32_t> dump_seq;  // a dump is in flight on `events`
    bool resync = false;                    // dump again once it finishes
    std::vector<std::byte> buffer = std::vector<std::byte>(detail::kReceiveBufferSize);

    Result<void> start_dump() {
        if (dump_seq) {
            resync = true;
            return {};
        }
        detail::Message msg =
            detail::neighbor_dump_request(ifindex, detail::address_family(next_hop));
        auto seq = events.send(msg, what + ": read the current entry");
        if (!seq) return std::unexpected(seq.error());
        dump_seq = *seq;
        return {};
    }

    Result<void> mark_managed() {
        auto r =
            detail::request_managed(requests, ifindex, next_hop, what + ": mark the entry managed");
        if (!r) {
            Error e = r.error();
            if (e.hint.empty()) e.hint = "needs CAP_NET_ADMIN and Linux 5.16 or later";
            return std::unexpected(std::move(e));
        }
        return {};
    }

    // One notification (or dump entry) for our (ifindex, address).
    Result<void> on_entry(const Neighbor& n, bool deleted) {
        if (deleted) {
            // Garbage collection, a flush, `ip neigh del`, or the link going
            // down. Not a loss by itself: the last MAC is still the best guess.
            // Recreate the entry (managed) so that the kernel resolves it again
            // and the outcome (REACHABLE or FAILED) is reported.
            managed = false;
            pending_loss.reset();
            return options.manage ? mark_managed() : Result<void>{};
        }
        managed = n.managed();
        if (usable_state(n.state) && n.mac) {
            pending_loss.reset();
            report(n.mac, n.state);
        } else if (n.state & NUD_FAILED) {
            // The kernel also announces FAILED just before it deletes an
            // entry (`ip neigh del`, flush), which is no loss. Decide once
            // everything queued has been read.
            pending_loss = n.state;
        }
        if (!options.manage || n.is_static()) return {};
        // An administrative change (`ip neigh change ... nud failed`, `ip neigh
        // replace ... lladdr X nud reachable`) drops the managed flag: put it
        // back. A STALE entry is re-confirmed at once (DELAY, then a unicast
        // probe) rather than at the kernel's next managed round, which runs
        // only every interval_probe_time_ms (5 s, a global setting): a next
        // hop that died or moved is found out one reachable time after it
        // last answered. That is one unicast probe per reachable time (15-45 s
        // by default), what the kernel does for any neighbour in use.
        if (!n.managed() || (n.state & NUD_STALE)) return mark_managed();
        return {};
    }

    void report(const std::optional<net::MacAddress>& mac, std::uint16_t state) {
        if (current == mac) return;
        current = mac;
        if (on_change) on_change(NextHopEvent{.mac = mac, .state = state});
    }

    // A FAILED entry was the last word in a batch: confirm it against the
    // table. Gone: it was being deleted (the RTM_DELNEIGH follows). Usable
    // again: report its MAC if it changed. Otherwise it is lost.
    Result<void> settle_pending_loss() {
        auto state = std::exchange(pending_loss, std::nullopt);
        if (!state || !current) return {};
        auto now =
            detail::find_neighbor(requests, ifindex, next_hop, what + ": confirm the entry failed");
        if (!now) {
            report(std::nullopt, *state);  // cannot confirm: trust the notification
            return std::unexpected(now.error());
        }
        if (!*now) return {};
        if ((*now)->usable()) {
            report((*now)->mac, (*now)->state);
        } else {
            report(std::nullopt, (*now)->state);
        }
        return {};
    }

    Result<void> handle_readable() {
        Result<void> first_error;
        auto keep = [&](Result<void> r) {
            if (!r && first_error) first_error = std::move(r);
        };
        for (;;) {
            auto n = events.receive(buffer, what);
            if (!n) {
                if (n.error().code == ENOBUFS) {
                    // The kernel dropped notifications: read the entry again.
                    keep(start_dump());
                    continue;
                }
                broken = true;
                keep(std::unexpected(n.error()));
                return first_error;
            }
            if (*n == 0) {
                if (!pending_loss) break;
                keep(settle_pending_loss());
                continue;  // confirming may have queued more
            }
            detail::for_each_message(std::span(buffer.data(), *n), [&](const nlmsghdr& h) {
                if (dump_seq && h.nlmsg_seq == *dump_seq &&
                    (h.nlmsg_type == NLMSG_DONE || h.nlmsg_type == NLMSG_ERROR)) {
                    dump_seq.reset();
                    if (h.nlmsg_type == NLMSG_ERROR) {
                        auto status = detail::parse_error_message(h);
                        if (status.error != 0)
                            keep(bpf::fail(status.error, what + ": read the current entry",
                                           status.message));
                    }
                    if (std::exchange(resync, false)) keep(start_dump());
                    return;
                }
                auto entry = detail::parse_neighbor(h);
                if (!entry || entry->ifindex != ifindex || entry->address != next_hop) return;
                keep(on_entry(*entry, h.nlmsg_type == RTM_DELNEIGH));
            });
        }
        return first_error;
    }
};

NeighborWatcher::NeighborWatcher(std::unique_ptr<State> state) : state_(std::move(state)) {}
NeighborWatcher::NeighborWatcher(NeighborWatcher&&) noexcept = default;
NeighborWatcher& NeighborWatcher::operator=(NeighborWatcher&&) noexcept = default;
NeighborWatcher::~NeighborWatcher() = default;

Result<NeighborWatcher> NeighborWatcher::open(std::string_view interface,
                                              const net::IpAddress& next_hop, Callback on_change,
                                              WatchOptions options) {
    auto info = link_info(interface);
    if (!info) return std::unexpected(info.error());
    return open(info->ifindex, next_hop, std::move(on_change), std::move(options));
}

Result<NeighborWatcher> NeighborWatcher::open(int ifindex, const net::IpAddress& next_hop,
                                              Callback on_change, WatchOptions options) {
    auto info = link_info(ifindex);
    if (!info) return std::unexpected(info.error());
    std::string what = "watch next hop " + detail::subject(next_hop, info->name);
    auto sockets = detail::open_neighbor_sockets(next_hop, what);
    if (!sockets) return std::unexpected(sockets.error());

    auto state = std::make_unique<State>(std::move(sockets->events), std::move(sockets->requests));
    state->ifindex = info->ifindex;
    state->name = info->name;
    state->next_hop = next_hop;
    state->on_change = std::move(on_change);
    state->options = std::move(options);
    state->what = std::move(what);
    state->current = state->options.known;

    if (state->options.manage) {
        auto existing =
            detail::find_neighbor(state->requests, state->ifindex, next_hop, state->what);
        if (!existing) return std::unexpected(existing.error());
        if (!*existing || !(*existing)->is_static()) {
            if (auto r = state->mark_managed(); !r) return std::unexpected(r.error());
        }
    }
    if (auto r = state->start_dump(); !r) return std::unexpected(r.error());
    return NeighborWatcher(std::move(state));
}

int NeighborWatcher::fd() const { return state_->events.fd(); }
Result<void> NeighborWatcher::handle_readable() { return state_->handle_readable(); }
bool NeighborWatcher::broken() const { return state_->broken; }
std::optional<net::MacAddress> NeighborWatcher::current() const { return state_->current; }
bool NeighborWatcher::managed() const { return state_->managed; }
int NeighborWatcher::ifindex() const { return state_->ifindex; }
const std::string& NeighborWatcher::interface() const { return state_->name; }
const net::IpAddress& NeighborWatcher::next_hop() const { return state_->next_hop; }

struct NeighborWatchThread::Impl {
    Impl(NeighborWatcher w, ErrorCallback e, bpf::UniqueFd fd)
        : watcher(std::move(w)), on_error(std::move(e)), stop_fd(std::move(fd)) {}

    NeighborWatcher watcher;
    ErrorCallback on_error;
    bpf::UniqueFd stop_fd;  // eventfd: any write wakes and ends the thread
    std::atomic<bool> running{true};
    std::thread thread;

    void run() {
        for (;;) {
            pollfd fds[2] = {{.fd = stop_fd.get(), .events = POLLIN, .revents = 0},
                             {.fd = watcher.fd(), .events = POLLIN, .revents = 0}};
            if (::poll(fds, 2, -1) < 0) {
                if (errno == EINTR) continue;
                if (on_error) on_error(bpf::make_error(errno, "watch next hop: poll"));
                break;
            }
            if (fds[0].revents) break;
            if (fds[1].revents) {
                auto r = watcher.handle_readable();
                if (!r && on_error) on_error(r.error());
                if (watcher.broken()) break;
            }
        }
        running.store(false);
    }
};

NeighborWatchThread::NeighborWatchThread(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
NeighborWatchThread::NeighborWatchThread(NeighborWatchThread&&) noexcept = default;
NeighborWatchThread& NeighborWatchThread::operator=(NeighborWatchThread&& other) noexcept {
    if (this != &other) {
        stop();
        impl_ = std::move(other.impl_);
    }
    return *this;
}
NeighborWatchThread::~NeighborWatchThread() { stop(); }

Result<NeighborWatchThread> NeighborWatchThread::start(NeighborWatcher watcher,
                                                       ErrorCallback on_error) {
    bpf::UniqueFd stop_fd(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
    if (!stop_fd) return bpf::fail(errno, "watch next hop: create eventfd");
    auto impl = std::make_unique<Impl>(std::move(watcher), std::move(on_error), std::move(stop_fd));
    Impl* raw = impl.get();
    impl->thread = std::thread([raw] { raw->run(); });
    return NeighborWatchThread(std::move(impl));
}

void NeighborWatchThread::stop() {
    if (!impl_ || !impl_->thread.joinable()) return;
    std::uint64_t one = 1;
    // An eventfd write only fails if the counter would overflow; the thread
    // wakes either way.
    (void)!::write(impl_->stop_fd.get(), &one, sizeof one);
    impl_->thread.join();
}

bool NeighborWatchThread::running() const { return impl_ && impl_->running.load(); }

}  // namespace xlb::netlink
