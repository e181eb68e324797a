// SPDX-License-Identifier: Apache-2.0
#include "xlb/netlink/link.h"

#include <linux/if.h>
#include <linux/if_arp.h>
#include <linux/rtnetlink.h>

#include <cerrno>
#include <cstring>
#include <optional>

#include "rtnl.h"

namespace xlb::netlink {

bool LinkInfo::up() const { return (flags & IFF_UP) != 0; }
bool LinkInfo::running() const { return (flags & IFF_RUNNING) != 0; }

namespace {

// RTM_GETLINK for one interface, by name (ifindex 0) or by index.
Result<LinkInfo> get_link(std::string_view name, int ifindex) {
    std::string subject = ifindex > 0 ? "interface index " + std::to_string(ifindex)
                                      : "interface " + std::string(name);
    if (ifindex <= 0) {
        if (name.empty()) return bpf::fail(EINVAL, "look up interface: empty interface name");
        if (name.size() >= IFNAMSIZ)
            return bpf::fail(EINVAL, "look up " + subject + ": name longer than " +
                                         std::to_string(IFNAMSIZ - 1) + " characters");
    }

    auto sock = detail::Socket::open();
    if (!sock) return std::unexpected(sock.error());

    detail::Message msg(RTM_GETLINK, 0);
    auto& ifi = msg.family_header<ifinfomsg>();
    ifi.ifi_family = AF_UNSPEC;
    ifi.ifi_index = ifindex > 0 ? ifindex : 0;
    if (ifindex <= 0) msg.attribute_string(IFLA_IFNAME, name);
    // Skip per-VF and stats payloads we do not read.
    msg.attribute_u32(IFLA_EXT_MASK, RTEXT_FILTER_SKIP_STATS);

    std::optional<LinkInfo> found;
    auto done = sock->transact(msg, "look up " + subject, [&](const nlmsghdr& h) {
        if (h.nlmsg_type != RTM_NEWLINK || h.nlmsg_len < NLMSG_LENGTH(sizeof(ifinfomsg))) return;
        auto* reply = static_cast<const ifinfomsg*>(NLMSG_DATA(const_cast<nlmsghdr*>(&h)));
        LinkInfo info;
        info.ifindex = reply->ifi_index;
        info.type = reply->ifi_type;
        info.flags = reply->ifi_flags;
        detail::for_each_attribute(
            h, sizeof(ifinfomsg), [&](std::uint16_t type, std::span<const std::byte> data) {
                switch (type) {
                    case IFLA_IFNAME:
                        info.name.assign(
                            reinterpret_cast<const char*>(data.data()),
                            strnlen(reinterpret_cast<const char*>(data.data()), data.size()));
                        break;
                    case IFLA_MTU:
                        if (data.size() >= sizeof(std::uint32_t))
                            std::memcpy(&info.mtu, data.data(), sizeof info.mtu);
                        break;
                    case IFLA_ADDRESS:
                        if (data.size() == info.mac.size()) {
                            std::memcpy(info.mac.data(), data.data(), info.mac.size());
                            info.has_ethernet_address = info.type == ARPHRD_ETHER;
                        }
                        break;
                    default: break;
                }
            });
        found = std::move(info);
    });
    if (!done) {
        Error error = done.error();
        if (error.code == ENODEV) error.what = "no such " + subject;
        return std::unexpected(std::move(error));
    }
    if (!found) return bpf::fail(ENODEV, "no such " + subject);
    return *found;
}

}  // namespace

Result<LinkInfo> link_info(std::string_view name) { return get_link(name, 0); }

Result<LinkInfo> link_info(int ifindex) {
    if (ifindex <= 0)
        return bpf::fail(
            EINVAL, "look up interface index " + std::to_string(ifindex) + ": not a valid index");
    return get_link({}, ifindex);
}

Result<int> interface_index(std::string_view name) {
    auto info = link_info(name);
    if (!info) return std::unexpected(info.error());
    return info->ifindex;
}

Result<std::string> interface_name(int ifindex) {
    auto info = link_info(ifindex);
    if (!info) return std::unexpected(info.error());
    return info->name;
}

Result<net::MacAddress> interface_mac(std::string_view name) {
    auto info = link_info(name);
    if (!info) return std::unexpected(info.error());
    if (!info->has_ethernet_address)
        return bpf::fail(EADDRNOTAVAIL, "interface " + info->name + " has no Ethernet address");
    return info->mac;
}

Result<std::uint32_t> interface_mtu(std::string_view name) {
    auto info = link_info(name);
    if (!info) return std::unexpected(info.error());
    return info->mtu;
}

Result<void> set_interface_mtu(int ifindex, std::uint32_t mtu) {
    auto sock = detail::Socket::open();
    if (!sock) return std::unexpected(sock.error());
    detail::Message msg(RTM_NEWLINK, 0);
    auto& ifi = msg.family_header<ifinfomsg>();
    ifi.ifi_family = AF_UNSPEC;
    ifi.ifi_index = ifindex;
    msg.attribute_u32(IFLA_MTU, mtu);
    return sock->transact(msg, "set the MTU of interface index " + std::to_string(ifindex) +
                                   " to " + std::to_string(mtu));
}

}  // namespace xlb::netlink
