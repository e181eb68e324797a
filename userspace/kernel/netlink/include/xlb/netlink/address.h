// SPDX-License-Identifier: Apache-2.0
// An interface's IP addresses (RTM_GETADDR, RTM_NEWADDR), in the calling
// thread's network namespace: what `xlb-decap setup` needs to put a VIP on a
// backend's loopback and to check that it is there.
#pragma once

#include <cstdint>
#include <vector>

#include "xlb/bpf/error.h"
#include "xlb/net/address.h"

namespace xlb::netlink {

using bpf::Error;
using bpf::Result;

struct InterfaceAddress {
    net::IpAddress address;
    std::uint8_t prefix_len = 0;
};

// The IPv4 and IPv6 addresses on the interface.
Result<std::vector<InterfaceAddress>> interface_addresses(int ifindex);

// Adds address/prefix_len to the interface. IPv6 addresses are added without
// duplicate address detection (IFA_F_NODAD): a VIP is on every backend, so a
// DAD that ran would find it "duplicated". Fails with EEXIST when it is there.
Result<void> add_address(int ifindex, const net::IpAddress& address, std::uint8_t prefix_len);

}  // namespace xlb::netlink
