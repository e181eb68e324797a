// SPDX-License-Identifier: Apache-2.0
// Interface facts the agent needs, read over rtnetlink (RTM_GETLINK) in the
// calling thread's network namespace.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "xlb/bpf/error.h"
#include "xlb/net/address.h"

namespace xlb::netlink {

using bpf::Error;
using bpf::Result;

struct LinkInfo {
    int ifindex = 0;
    std::string name;
    net::MacAddress mac{};              // IFLA_ADDRESS; all zero if the link has none
    bool has_ethernet_address = false;  // ARPHRD_ETHER with a 6-byte address
    std::uint32_t mtu = 0;
    std::uint16_t type = 0;  // ARPHRD_*
    unsigned flags = 0;      // IFF_*
    bool up() const;         // IFF_UP
    bool running() const;    // IFF_RUNNING (carrier)
};

// Errors: unknown interfaces fail with ENODEV and "no such interface eth9".
Result<LinkInfo> link_info(std::string_view name);
Result<LinkInfo> link_info(int ifindex);

Result<int> interface_index(std::string_view name);
Result<std::string> interface_name(int ifindex);
// The interface's own MAC; EADDRNOTAVAIL if it has no Ethernet address.
Result<net::MacAddress> interface_mac(std::string_view name);
Result<std::uint32_t> interface_mtu(std::string_view name);
// Sets the interface's MTU (RTM_NEWLINK, IFLA_MTU); needs CAP_NET_ADMIN.
Result<void> set_interface_mtu(int ifindex, std::uint32_t mtu);

}  // namespace xlb::netlink
