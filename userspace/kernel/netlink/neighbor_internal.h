// SPDX-License-Identifier: Apache-2.0
// Internal: neighbour-table messages shared by the resolver and the watcher.
#pragma once

#include <linux/netlink.h>

#include <optional>
#include <string>
#include <string_view>

#include "rtnl.h"
#include "xlb/netlink/neighbor.h"

namespace xlb::netlink::detail {

// AF_INET / AF_INET6 for an IpAddress (family 4 / 6); 0 if neither.
int address_family(const net::IpAddress& address);

// The entry carried by an RTM_NEWNEIGH / RTM_DELNEIGH message; nullopt for
// other messages, proxy entries and families other than IPv4/IPv6.
std::optional<Neighbor> parse_neighbor(const nlmsghdr& msg);

// RTM_GETNEIGH dump of one interface and one family (AF_UNSPEC: both).
Message neighbor_dump_request(int ifindex, int af);

// The entry for `address` on `ifindex`, read with a dump over `sock`.
Result<std::optional<Neighbor>> find_neighbor(Socket& sock, int ifindex,
                                              const net::IpAddress& address, std::string_view what);

// RTM_NEWNEIGH + NTF_USE: "resolve this now", as if a packet were waiting.
// Creates the entry if needed. Callers must not send it for PERMANENT/NOARP
// entries: the kernel drops PERMANENT on NTF_USE and starts probing. NTF_USE
// is an administrative update that also clears NTF_EXT_MANAGED, so for an entry
// that is `managed` this sends request_managed() instead, which triggers
// resolution the same way and keeps the flag.
Result<void> request_resolution(Socket& sock, int ifindex, const net::IpAddress& address,
                                bool managed, std::string_view what);

// RTM_NEWNEIGH with NTF_EXT_MANAGED (Linux >= 5.16): the kernel re-resolves
// the entry on its own (every interval_probe_time_ms) and never garbage-collects
// it, so it stays REACHABLE without traffic from the stack. Creates it if
// needed and starts resolution. Same caveat as above for static entries.
Result<void> request_managed(Socket& sock, int ifindex, const net::IpAddress& address,
                             std::string_view what);

// Neighbour events subscribed to before anything is looked up, so that a
// change between the first look and the wait is queued, not missed; and a
// second socket for the look-ups and requests themselves. EAFNOSUPPORT for an
// address that is neither IPv4 nor IPv6.
struct NeighborSockets {
    Socket events;
    Socket requests;
};
Result<NeighborSockets> open_neighbor_sockets(const net::IpAddress& address,
                                              const std::string& what);

// "192.0.2.1 on eth0"
std::string subject(const net::IpAddress& address, std::string_view interface);

}  // namespace xlb::netlink::detail
