// SPDX-License-Identifier: Apache-2.0
// The next hop's MAC address from the kernel's neighbour table (ARP for IPv4,
// NDP for IPv6), read and triggered over rtnetlink.
//
// Everything here works in the network namespace of the calling thread at the
// time of the call (sockets are opened per call), and needs CAP_NET_ADMIN only
// to trigger resolution (reading the table needs no privilege).
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "xlb/bpf/error.h"
#include "xlb/net/address.h"

namespace xlb::netlink {

using bpf::Error;
using bpf::Result;

// One entry of the kernel's neighbour table.
struct Neighbor {
    int ifindex = 0;
    net::IpAddress address;
    std::optional<net::MacAddress> mac;  // NDA_LLADDR, when it is 6 bytes long
    std::uint16_t state = 0;             // NUD_* bits
    std::uint8_t flags = 0;              // NTF_* bits
    std::uint32_t ext_flags = 0;         // NTF_EXT_* bits (NTF_EXT_MANAGED)
    std::uint32_t probes = 0;            // NDA_PROBES: solicitations sent in this round

    // A state the kernel itself would send with (see usable_state) and a MAC.
    bool usable() const;
    bool managed() const;    // NTF_EXT_MANAGED: the kernel keeps it resolved
    bool is_static() const;  // PERMANENT or NOARP: set by an operator, never probed
};

// REACHABLE, STALE, DELAY, PROBE, PERMANENT and NOARP carry a MAC the kernel
// would use; NONE, INCOMPLETE and FAILED do not. STALE/DELAY/PROBE only mean
// "not confirmed recently": the kernel keeps sending to that MAC meanwhile.
bool usable_state(std::uint16_t nud_state);
// "REACHABLE", "STALE|DELAY", "NONE".
std::string state_name(std::uint16_t nud_state);

// All IPv4 and/or IPv6 entries of one interface (family 4, 6, or 0 for both).
Result<std::vector<Neighbor>> dump_neighbors(int ifindex, int family = 0);

inline constexpr std::chrono::milliseconds kDefaultResolveTimeout{3000};

// Resolves next hops on one interface. Holds no socket: each call opens what
// it needs in the calling thread's network namespace.
class NeighborResolver {
public:
    // Fails with "no such interface eth9" (ENODEV).
    static Result<NeighborResolver> open(std::string_view interface);
    static Result<NeighborResolver> open(int ifindex);

    int ifindex() const { return ifindex_; }
    const std::string& interface() const { return name_; }

    // The table's entry for `address` on this interface, whatever its state;
    // nullopt if there is none. Never triggers resolution.
    Result<std::optional<Neighbor>> lookup(const net::IpAddress& address) const;

    // The MAC of `next_hop`: a usable entry is returned at once; otherwise the
    // kernel is asked to resolve it (see trigger()) and this waits, on
    // neighbour notifications, up to `timeout`. Fails with ETIMEDOUT; message():
    // "resolve next hop 192.0.2.1 on eth0: no usable neighbour entry after 3 s:
    // Connection timed out (entry FAILED; is it on-link? check `ip neigh show
    // dev eth0`)", naming a down interface or a hand-made INCOMPLETE entry too.
    // Never marks the entry managed (that is NeighborWatcher's job).
    Result<net::MacAddress> resolve(
        const net::IpAddress& next_hop,
        std::chrono::milliseconds timeout = kDefaultResolveTimeout) const;

    // Asks the kernel to send an ARP request / neighbour solicitation for
    // `address` now (RTM_NEWNEIGH with NTF_USE), without waiting. Does nothing
    // to a PERMANENT or NOARP entry (NTF_USE would demote it). Needs CAP_NET_ADMIN.
    Result<void> trigger(const net::IpAddress& address) const;

private:
    NeighborResolver(int ifindex, std::string name) : ifindex_(ifindex), name_(std::move(name)) {}

    int ifindex_ = 0;
    std::string name_;
};

}  // namespace xlb::netlink
