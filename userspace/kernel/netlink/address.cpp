// SPDX-License-Identifier: Apache-2.0
#include "xlb/netlink/address.h"

#include <linux/if_addr.h>
#include <linux/rtnetlink.h>
#include <sys/socket.h>

#include <cstring>
#include <string>

#include "rtnl.h"

namespace xlb::netlink {

namespace {

int address_family(const net::IpAddress& a) { return a.is_v4() ? AF_INET : AF_INET6; }

}  // namespace

Result<std::vector<InterfaceAddress>> interface_addresses(int ifindex) {
    const std::string what = "list the addresses of interface index " + std::to_string(ifindex);
    auto sock = detail::Socket::open();
    if (!sock) return std::unexpected(sock.error());
    detail::Message msg(RTM_GETADDR, NLM_F_DUMP);
    auto& ifa = msg.family_header<ifaddrmsg>();
    ifa.ifa_family = AF_UNSPEC;
    // A strict dump filters on the index; the check below covers the rest.
    ifa.ifa_index = static_cast<std::uint32_t>(ifindex);
    std::vector<InterfaceAddress> out;
    auto done = sock->transact(msg, what, [&](const nlmsghdr& h) {
        if (h.nlmsg_type != RTM_NEWADDR || h.nlmsg_len < NLMSG_LENGTH(sizeof(ifaddrmsg))) return;
        auto* reply = static_cast<const ifaddrmsg*>(NLMSG_DATA(const_cast<nlmsghdr*>(&h)));
        if (static_cast<int>(reply->ifa_index) != ifindex) return;
        if (reply->ifa_family != AF_INET && reply->ifa_family != AF_INET6) return;
        const std::size_t len = reply->ifa_family == AF_INET ? 4 : 16;
        InterfaceAddress entry;
        entry.address.family = reply->ifa_family == AF_INET ? 4 : 6;
        entry.prefix_len = reply->ifa_prefixlen;
        bool have_local = false;
        bool have_address = false;
        net::IpAddress address = entry.address;
        // IFA_LOCAL is the interface's own address; IFA_ADDRESS is the peer's on
        // a point-to-point link and the same as IFA_LOCAL elsewhere.
        detail::for_each_attribute(
            h, sizeof(ifaddrmsg), [&](std::uint16_t type, std::span<const std::byte> data) {
                if (data.size() != len) return;
                if (type == IFA_LOCAL) {
                    std::memcpy(entry.address.bytes.data(), data.data(), len);
                    have_local = true;
                } else if (type == IFA_ADDRESS) {
                    std::memcpy(address.bytes.data(), data.data(), len);
                    have_address = true;
                }
            });
        if (!have_local && !have_address) return;
        if (!have_local) entry.address = address;
        out.push_back(entry);
    });
    if (!done) return std::unexpected(done.error());
    return out;
}

Result<void> add_address(int ifindex, const net::IpAddress& address, std::uint8_t prefix_len) {
    auto sock = detail::Socket::open();
    if (!sock) return std::unexpected(sock.error());
    detail::Message msg(RTM_NEWADDR, NLM_F_CREATE | NLM_F_EXCL);
    auto& ifa = msg.family_header<ifaddrmsg>();
    ifa.ifa_family = static_cast<std::uint8_t>(address_family(address));
    ifa.ifa_prefixlen = prefix_len;
    ifa.ifa_scope = RT_SCOPE_UNIVERSE;
    ifa.ifa_index = static_cast<std::uint32_t>(ifindex);
    const std::size_t len = address.is_v4() ? 4 : 16;
    msg.attribute(IFA_LOCAL, address.bytes.data(), len);
    msg.attribute(IFA_ADDRESS, address.bytes.data(), len);
    if (!address.is_v4()) {
        ifa.ifa_flags = IFA_F_NODAD;
        msg.attribute_u32(IFA_FLAGS, IFA_F_NODAD);
    }
    return sock->transact(msg, "add address " + address.to_string() + "/" +
                                   std::to_string(prefix_len) + " to interface index " +
                                   std::to_string(ifindex));
}

}  // namespace xlb::netlink
