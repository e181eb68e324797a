// SPDX-License-Identifier: Apache-2.0
#include "xlb/netlink/neighbor.h"

#include <linux/neighbour.h>
#include <linux/rtnetlink.h>
#include <poll.h>
#include <sys/socket.h>

#include <array>
#include <cerrno>
#include <cstdio>
#include <cstring>

#include "neighbor_internal.h"
#include "xlb/netlink/link.h"

namespace xlb::netlink {

namespace {

constexpr std::uint16_t kUsableStates =
    NUD_REACHABLE | NUD_STALE | NUD_DELAY | NUD_PROBE | NUD_PERMANENT | NUD_NOARP;

std::string seconds_text(std::chrono::milliseconds ms) {
    std::array<char, 32> buf{};
    std::snprintf(buf.data(), buf.size(), "%g s", static_cast<double>(ms.count()) / 1000.0);
    return buf.data();
}

}  // namespace

bool usable_state(std::uint16_t nud_state) { return (nud_state & kUsableStates) != 0; }

std::string state_name(std::uint16_t nud_state) {
    static constexpr std::pair<std::uint16_t, const char*> kNames[] = {
        {NUD_INCOMPLETE, "INCOMPLETE"}, {NUD_REACHABLE, "REACHABLE"}, {NUD_STALE, "STALE"},
        {NUD_DELAY, "DELAY"},           {NUD_PROBE, "PROBE"},         {NUD_FAILED, "FAILED"},
        {NUD_NOARP, "NOARP"},           {NUD_PERMANENT, "PERMANENT"},
    };
    if (nud_state == NUD_NONE) return "NONE";
    std::string out;
    for (auto [bit, name] : kNames) {
        if (!(nud_state & bit)) continue;
        if (!out.empty()) out += '|';
        out += name;
    }
    return out;
}

bool Neighbor::usable() const { return usable_state(state) && mac.has_value(); }
bool Neighbor::managed() const { return (ext_flags & NTF_EXT_MANAGED) != 0; }
bool Neighbor::is_static() const { return (state & (NUD_PERMANENT | NUD_NOARP)) != 0; }

namespace detail {

int address_family(const net::IpAddress& address) {
    if (address.family == 4) return AF_INET;
    if (address.family == 6) return AF_INET6;
    return 0;
}

std::string subject(const net::IpAddress& address, std::string_view interface) {
    return address.to_string() + " on " + std::string(interface);
}

Result<NeighborSockets> open_neighbor_sockets(const net::IpAddress& address,
                                              const std::string& what) {
    if (!address_family(address)) return bpf::fail(EAFNOSUPPORT, what);
    const unsigned groups[] = {RTNLGRP_NEIGH};
    auto events = Socket::open(groups);
    if (!events) return std::unexpected(events.error());
    auto requests = Socket::open();
    if (!requests) return std::unexpected(requests.error());
    return NeighborSockets{std::move(*events), std::move(*requests)};
}

std::optional<Neighbor> parse_neighbor(const nlmsghdr& msg) {
    if (msg.nlmsg_type != RTM_NEWNEIGH && msg.nlmsg_type != RTM_DELNEIGH) return std::nullopt;
    if (msg.nlmsg_len < NLMSG_LENGTH(sizeof(ndmsg))) return std::nullopt;
    auto* ndm = static_cast<const ndmsg*>(NLMSG_DATA(const_cast<nlmsghdr*>(&msg)));
    if (ndm->ndm_family != AF_INET && ndm->ndm_family != AF_INET6) return std::nullopt;
    if (ndm->ndm_flags & NTF_PROXY) return std::nullopt;

    Neighbor n;
    n.ifindex = ndm->ndm_ifindex;
    n.state = ndm->ndm_state;
    n.flags = ndm->ndm_flags;
    n.address.family = ndm->ndm_family == AF_INET ? 4 : 6;
    std::size_t address_len = ndm->ndm_family == AF_INET ? 4 : 16;
    bool have_dst = false;
    for_each_attribute(
        msg, sizeof(ndmsg), [&](std::uint16_t type, std::span<const std::byte> data) {
            switch (type) {
                case NDA_DST:
                    if (data.size() == address_len) {
                        std::memcpy(n.address.bytes.data(), data.data(), address_len);
                        have_dst = true;
                    }
                    break;
                case NDA_LLADDR:
                    if (data.size() == 6) {
                        net::MacAddress mac;
                        std::memcpy(mac.data(), data.data(), mac.size());
                        n.mac = mac;
                    }
                    break;
                case NDA_PROBES:
                    if (data.size() >= sizeof(std::uint32_t))
                        std::memcpy(&n.probes, data.data(), sizeof n.probes);
                    break;
                case NDA_FLAGS_EXT:
                    if (data.size() >= sizeof(std::uint32_t))
                        std::memcpy(&n.ext_flags, data.data(), sizeof n.ext_flags);
                    break;
                default: break;
            }
        });
    if (!have_dst) return std::nullopt;
    return n;
}

Message neighbor_dump_request(int ifindex, int af) {
    Message msg(RTM_GETNEIGH, NLM_F_DUMP);
    auto& ndm = msg.family_header<ndmsg>();
    ndm.ndm_family = static_cast<std::uint8_t>(af);
    // With NETLINK_GET_STRICT_CHK the kernel filters on NDA_IFINDEX (ndm_ifindex
    // must stay 0 in a strict dump request); without it we filter below anyway.
    if (ifindex > 0) msg.attribute_u32(NDA_IFINDEX, static_cast<std::uint32_t>(ifindex));
    return msg;
}

Result<std::optional<Neighbor>> find_neighbor(Socket& sock, int ifindex,
                                              const net::IpAddress& address,
                                              std::string_view what) {
    Message msg = neighbor_dump_request(ifindex, address_family(address));
    std::optional<Neighbor> found;
    auto done = sock.transact(msg, what, [&](const nlmsghdr& h) {
        auto n = parse_neighbor(h);
        if (n && h.nlmsg_type == RTM_NEWNEIGH && n->ifindex == ifindex && n->address == address)
            found = *n;
    });
    if (!done) return std::unexpected(done.error());
    return found;
}

namespace {

Message new_neighbor(int ifindex, const net::IpAddress& address, std::uint16_t flags,
                     std::uint8_t ndm_flags) {
    Message msg(RTM_NEWNEIGH, flags);
    auto& ndm = msg.family_header<ndmsg>();
    ndm.ndm_family = static_cast<std::uint8_t>(address_family(address));
    ndm.ndm_ifindex = ifindex;
    ndm.ndm_state = NUD_NONE;  // a new entry is not exempt from GC, and NONE is what it is
    ndm.ndm_flags = ndm_flags;
    msg.attribute(NDA_DST, address.bytes.data(), address.is_v4() ? 4 : 16);
    return msg;
}

}  // namespace

Result<void> request_resolution(Socket& sock, int ifindex, const net::IpAddress& address,
                                bool managed, std::string_view what) {
    if (managed) return request_managed(sock, ifindex, address, what);
    // NLM_F_CREATE without NLM_F_REPLACE/EXCL: create the entry if it is
    // missing; an existing one keeps its MAC and is probed again.
    Message msg = new_neighbor(ifindex, address, NLM_F_CREATE, NTF_USE);
    return sock.transact(msg, what);
}

Result<void> request_managed(Socket& sock, int ifindex, const net::IpAddress& address,
                             std::string_view what) {
    // Same request as `ip neigh replace ADDR dev DEV managed`: state NONE and
    // NTF_EXT_MANAGED; the kernel keeps an existing MAC and state and starts
    // resolution (it treats the request like NTF_USE).
    Message msg = new_neighbor(ifindex, address, NLM_F_CREATE | NLM_F_REPLACE, 0);
    std::uint32_t ext = NTF_EXT_MANAGED;
    msg.attribute_u32(NDA_FLAGS_EXT, ext);
    return sock.transact(msg, what);
}

}  // namespace detail

Result<std::vector<Neighbor>> dump_neighbors(int ifindex, int family) {
    int af = family == 4 ? AF_INET : family == 6 ? AF_INET6 : AF_UNSPEC;
    auto sock = detail::Socket::open();
    if (!sock) return std::unexpected(sock.error());
    detail::Message msg = detail::neighbor_dump_request(ifindex, af);
    std::vector<Neighbor> out;
    auto done = sock->transact(
        msg, "dump neighbour table of interface index " + std::to_string(ifindex),
        [&](const nlmsghdr& h) {
            auto n = detail::parse_neighbor(h);
            if (n && h.nlmsg_type == RTM_NEWNEIGH && (ifindex <= 0 || n->ifindex == ifindex))
                out.push_back(*n);
        });
    if (!done) return std::unexpected(done.error());
    return out;
}

Result<NeighborResolver> NeighborResolver::open(std::string_view interface) {
    auto info = link_info(interface);
    if (!info) return std::unexpected(info.error());
    return NeighborResolver(info->ifindex, info->name);
}

Result<NeighborResolver> NeighborResolver::open(int ifindex) {
    auto info = link_info(ifindex);
    if (!info) return std::unexpected(info.error());
    return NeighborResolver(info->ifindex, info->name);
}

Result<std::optional<Neighbor>> NeighborResolver::lookup(const net::IpAddress& address) const {
    std::string what = "look up neighbour " + detail::subject(address, name_);
    if (!detail::address_family(address)) return bpf::fail(EAFNOSUPPORT, what);
    auto sock = detail::Socket::open();
    if (!sock) return std::unexpected(sock.error());
    return detail::find_neighbor(*sock, ifindex_, address, what);
}

Result<void> NeighborResolver::trigger(const net::IpAddress& address) const {
    std::string what = "trigger resolution of " + detail::subject(address, name_);
    if (!detail::address_family(address)) return bpf::fail(EAFNOSUPPORT, what);
    auto sock = detail::Socket::open();
    if (!sock) return std::unexpected(sock.error());
    auto current = detail::find_neighbor(*sock, ifindex_, address, what);
    if (!current) return std::unexpected(current.error());
    if (*current && (*current)->is_static()) return {};
    return detail::request_resolution(*sock, ifindex_, address, *current && (*current)->managed(),
                                      what);
}

// How resolution is triggered, and why this way.
//
// We send RTM_NEWNEIGH with NTF_USE for (ifindex, address). The kernel then
// does exactly what it does when a packet waits for that neighbour
// (neigh_event_send): it creates the entry if needed, moves it to INCOMPLETE
// and sends ARP requests / neighbour solicitations on that interface, or, for a
// STALE entry, goes through DELAY/PROBE and confirms it with a unicast probe.
// Alternatives considered:
//  - a connected UDP socket and an empty datagram to a discard port (bound to
//    the interface with SO_BINDTODEVICE): it goes through a route lookup, so a
//    next hop that is not on-link resolves the *gateway* of that route instead
//    (or fails with ENETUNREACH), and it sends a real datagram to the router,
//    which may answer with ICMP port unreachable or log it. NTF_USE names the
//    interface and the address directly and puts only ARP/ND on the wire.
//  - RTM_NEWNEIGH with state NUD_INCOMPLETE: the kernel treats that as an
//    administrative state change and does not start probing by itself.
// The one caveat: NTF_USE on a PERMANENT entry turns it into a dynamic one, so
// we look first and never trigger on a static entry.
Result<net::MacAddress> NeighborResolver::resolve(const net::IpAddress& next_hop,
                                                  std::chrono::milliseconds timeout) const {
    using Clock = std::chrono::steady_clock;
    std::string what = "resolve next hop " + detail::subject(next_hop, name_);
    auto sockets = detail::open_neighbor_sockets(next_hop, what);
    if (!sockets) return std::unexpected(sockets.error());
    detail::Socket& events = sockets->events;
    detail::Socket& sock = sockets->requests;

    std::optional<std::uint16_t> last_state;
    std::uint32_t last_probes = 0;
    bool managed = false;  // keep a watcher's NTF_EXT_MANAGED when triggering
    // Returns the MAC of a usable entry, an error for a usable entry without
    // an Ethernet address, or nullopt to keep waiting.
    auto settle = [&](const std::optional<Neighbor>& n) -> std::optional<Result<net::MacAddress>> {
        last_state = n ? std::optional(n->state) : std::nullopt;
        last_probes = n ? n->probes : 0;
        managed = n && n->managed();
        if (!n || !usable_state(n->state)) return std::nullopt;
        if (!n->mac)
            return bpf::fail(EADDRNOTAVAIL,
                             what + ": entry " + state_name(n->state) + " has no Ethernet address");
        return *n->mac;
    };

    auto current = detail::find_neighbor(sock, ifindex_, next_hop, what);
    if (!current) return std::unexpected(current.error());
    if (auto r = settle(*current)) return *r;

    const auto deadline = Clock::now() + timeout;
    auto trigger_now = [&]() -> Result<void> {
        return detail::request_resolution(sock, ifindex_, next_hop, managed, what);
    };
    if (auto t = trigger_now(); !t) return std::unexpected(t.error());
    auto last_trigger = Clock::now();
    // With the default sysctls (mcast_solicit 3, retrans_time 1 s) an unanswered
    // entry turns FAILED 3 s after a trigger; we then trigger again, but never
    // more than once a second, so odd sysctls cannot make this spin.
    constexpr auto kRetriggerGap = std::chrono::seconds(1);
    bool retrigger = false;

    std::vector<std::byte> buffer(detail::kReceiveBufferSize);
    for (;;) {
        auto now = Clock::now();
        if (retrigger && now >= last_trigger + kRetriggerGap) {
            if (auto t = trigger_now(); !t) return std::unexpected(t.error());
            last_trigger = now;
            retrigger = false;
        }
        if (now >= deadline) break;
        auto wake = retrigger ? std::min(deadline, last_trigger + kRetriggerGap) : deadline;
        auto wait_ms = std::chrono::ceil<std::chrono::milliseconds>(wake - now).count();

        pollfd pfd{.fd = events.fd(), .events = POLLIN, .revents = 0};
        int ready = ::poll(&pfd, 1, static_cast<int>(std::max<long long>(wait_ms, 0)));
        if (ready < 0) {
            if (errno == EINTR) continue;
            return bpf::fail(errno, what + ": poll");
        }
        if (ready == 0) continue;

        for (;;) {
            auto n = events.receive(buffer, what);
            if (!n && n.error().code == ENOBUFS) {
                // Notifications were dropped: read the entry again.
                auto again = detail::find_neighbor(sock, ifindex_, next_hop, what);
                if (!again) return std::unexpected(again.error());
                if (auto r = settle(*again)) return *r;
                continue;
            }
            if (!n) return std::unexpected(n.error());
            if (*n == 0) break;
            std::optional<Result<net::MacAddress>> result;
            detail::for_each_message(std::span(buffer.data(), *n), [&](const nlmsghdr& h) {
                if (result) return;
                auto entry = detail::parse_neighbor(h);
                if (!entry || entry->ifindex != ifindex_ || entry->address != next_hop) return;
                if (h.nlmsg_type == RTM_DELNEIGH) {
                    last_state.reset();
                    managed = false;
                    retrigger = true;
                    return;
                }
                result = settle(entry);
                if (!result && (entry->state & NUD_FAILED)) retrigger = true;
            });
            if (result) return *result;
        }
    }

    // One last look, in case the answer came with the deadline.
    auto final_look = detail::find_neighbor(sock, ifindex_, next_hop, what);
    if (!final_look) return std::unexpected(final_look.error());
    if (auto r = settle(*final_look)) return *r;

    std::string hint = last_state ? "entry " + state_name(*last_state) : std::string("no entry");
    if (auto link = link_info(ifindex_); link && !(link->up() && link->running()))
        hint += "; " + name_ + " is " + (link->up() ? "without carrier" : "down");
    if (last_state == NUD_INCOMPLETE && last_probes == 0) {
        // `ip neigh add ADDR nud incomplete` makes an entry that never probes
        // and that NTF_USE does not restart.
        hint += " but nothing is probing it (set by hand?); remove it: `ip neigh del " +
                next_hop.to_string() + " dev " + name_ + "`";
    } else {
        hint += "; is it on-link? check `ip neigh show dev " + name_ + "`";
    }
    return bpf::fail(ETIMEDOUT, what + ": no usable neighbour entry after " + seconds_text(timeout),
                     hint);
}

}  // namespace xlb::netlink
