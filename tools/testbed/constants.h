// SPDX-License-Identifier: Apache-2.0
// One source for the addresses, ports and MACs every test uses. All of them
// are documentation ranges (RFC 5737 / RFC 3849) or locally administered MACs.
#pragma once

#include "xlb/net/address.h"

namespace xlb::test {

inline net::IpAddress ip(const char* text) { return *net::IpAddress::parse(text); }

inline const net::MacAddress kClientSideMac{0x02, 0, 0, 0, 0, 0x0c};  // router, towards the LB
inline const net::MacAddress kLbMac{0x02, 0, 0, 0, 0, 0x1b};
inline const net::MacAddress kNextHopMac{0x02, 0, 0, 0, 0, 0x2e};

inline const net::IpAddress kClientV4 = ip("192.0.2.10");
inline const net::IpAddress kClientV6 = ip("2001:db8:c::10");
inline const net::IpAddress kRouterV4 = ip("192.0.2.1");
inline const net::IpAddress kRouterV6 = ip("2001:db8:c::1");

inline const net::IpAddress kVipV4 = ip("198.51.100.10");
inline const net::IpAddress kVipV4Wildcard = ip("198.51.100.20");
inline const net::IpAddress kVipV6 = ip("2001:db8:f::10");
inline constexpr std::uint16_t kVipPort = 80;

// Outer source addresses of encapsulated packets.
inline const net::IpAddress kEncapSrcV4 = ip("203.0.113.1");
inline const net::IpAddress kEncapSrcV6 = ip("2001:db8:e::1");

inline const net::IpAddress kBackendV4[] = {ip("203.0.113.11"), ip("203.0.113.12"),
                                            ip("203.0.113.13"), ip("203.0.113.14")};
inline const net::IpAddress kBackendV6[] = {ip("2001:db8:b::11"), ip("2001:db8:b::12"),
                                            ip("2001:db8:b::13"), ip("2001:db8:b::14")};

inline constexpr std::uint32_t kHashSeed = 0x5eed1234;
inline constexpr std::uint16_t kLinkMtu = 1500;

}  // namespace xlb::test
