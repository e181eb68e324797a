// SPDX-License-Identifier: Apache-2.0
#include "setup.h"

#include <fcntl.h>
#include <fmt/core.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <string_view>
#include <utility>

#include "xlb/bpf/fd.h"
#include "xlb/bpf/probe.h"
#include "xlb/bpf/xdp.h"
#include "xlb/files/files.h"
#include "xlb/netlink/address.h"
#include "xlb/netlink/link.h"

namespace xlb::decap {

namespace {

// /proc/sys/net/ipv4/conf/IFACE/LEAF: in /proc the interface keeps its dots.
std::string conf_path(const std::string& interface, const std::string& leaf) {
    return "/proc/sys/net/ipv4/conf/" + interface + "/" + leaf;
}

Result<int> read_sysctl(const std::string& interface, const std::string& leaf) {
    const std::string path = conf_path(interface, leaf);
    auto text = files::read_file(path);
    if (!text) return std::unexpected(text.error());
    if (!*text) return fail_on(ENOENT, "read sysctl", conf_key(interface, leaf));
    int value = 0;
    const std::string& s = **text;
    auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), value);
    if (ec != std::errc{} || (end != s.data() + s.size() && *end != '\n'))
        return fail_on(EINVAL, "read sysctl", conf_key(interface, leaf),
                       "found \"" + s + "\", expected a number");
    return value;
}

Result<void> write_sysctl(const std::string& interface, const std::string& leaf, int value) {
    const std::string key = conf_key(interface, leaf);
    bpf::UniqueFd fd(::open(conf_path(interface, leaf).c_str(), O_WRONLY | O_CLOEXEC));
    if (!fd) return fail_on(errno, "write sysctl", key);
    const std::string text = std::to_string(value) + "\n";
    const ssize_t n = ::write(fd.get(), text.data(), text.size());
    if (n < 0) return fail_on(errno, "write sysctl", key);
    if (n != static_cast<ssize_t>(text.size()))
        return fail_on(EIO, "write sysctl", key, "the kernel took part of the value");
    return {};
}

std::string sysctl_command(const std::string& interface, const std::string& leaf, int value) {
    return fmt::format("sysctl -w {}={}", conf_key(interface, leaf), value);
}

// One per-interface IPv4 sysctl of which the kernel uses the larger of "all"
// and the interface's own value (arp_ignore, arp_announce, rp_filter).
struct ConfPair {
    int all = 0;
    int own = 0;
    int effective() const { return std::max(all, own); }
};

Result<ConfPair> read_pair(const std::string& interface, const std::string& leaf) {
    auto all = read_sysctl("all", leaf);
    if (!all) return std::unexpected(all.error());
    auto own = read_sysctl(interface, leaf);
    if (!own) return std::unexpected(own.error());
    return ConfPair{*all, *own};
}

std::string describe_pair(const std::string& interface, const ConfPair& p,
                          std::string_view meaning = {}) {
    return fmt::format("{}{} (all {}, {} {})", p.effective(), meaning, p.all, interface, p.own);
}

// A fix made of sysctl writes: each (interface, value) pair for `leaf`.
Finding sysctl_finding(std::string setting, std::string found, std::string want,
                       const std::string& leaf, std::vector<std::pair<std::string, int>> writes) {
    Finding f{std::move(setting), std::move(found), std::move(want), {}, {}};
    for (const auto& [iface, value] : writes) f.fix.push_back(sysctl_command(iface, leaf, value));
    f.apply = [leaf, writes]() -> Result<void> {
        for (const auto& [iface, value] : writes)
            if (auto ok = write_sysctl(iface, leaf, value); !ok) return ok;
        return {};
    };
    return f;
}

}  // namespace

std::string conf_key(const std::string& interface, const std::string& leaf) {
    std::string name = interface;
    for (char& c : name)
        if (c == '.') c = '/';
    return "net.ipv4.conf." + name + "." + leaf;
}

std::string Finding::describe() const {
    std::string fixes;
    for (const std::string& f : fix) fixes += (fixes.empty() ? "" : "; ") + f;
    return fmt::format("{}: {}, want {}; fix: {}", setting, found, want, fixes);
}

Result<std::vector<Finding>> check(const SetupOptions& o) {
    std::vector<Finding> out;
    const std::string& ifname = o.interface;
    auto link = netlink::link_info(ifname);
    if (!link) return std::unexpected(link.error());
    auto lo = netlink::link_info("lo");
    if (!lo) return std::unexpected(lo.error());

    // The VIPs on lo: the kernel then takes the decapsulated packets as its
    // own, and answers from the VIP.
    auto on_lo = netlink::interface_addresses(lo->ifindex);
    if (!on_lo) return std::unexpected(on_lo.error().add_context("look at lo"));
    bool any_v4 = false;
    for (const net::IpAddress& vip : o.vips) {
        any_v4 = any_v4 || vip.is_v4();
        bool present = false;
        for (const auto& a : *on_lo) present = present || a.address == vip;
        if (present) continue;
        const std::uint8_t len = vip.is_v4() ? 32 : 128;
        const int lo_index = lo->ifindex;
        out.push_back(Finding{fmt::format("VIP {} on lo", vip.to_string()),
                              "not there",
                              fmt::format("{}/{} on lo", vip.to_string(), len),
                              {fmt::format("ip address add {}/{} dev lo", vip.to_string(), len)},
                              [lo_index, vip, len]() -> Result<void> {
                                  auto added = netlink::add_address(lo_index, vip, len);
                                  if (!added && added.error().code == EEXIST)
                                      return {};  // added meanwhile
                                  return added;
                              }});
    }

    // IPv4 only: ARP and the reverse-path filter do not exist for IPv6 (an
    // IPv6 VIP on lo is never answered for on another interface).
    if (any_v4) {
        // arp_ignore 1: answer ARP only for addresses of the interface asked,
        // so the backend never claims the VIP its balancer owns (2 is
        // stricter still and as good; above 2 the backend's own address goes
        // unanswered too).
        auto ignore = read_pair(ifname, "arp_ignore");
        if (!ignore) return std::unexpected(ignore.error());
        if (ignore->effective() < 1 || ignore->effective() > 2) {
            std::vector<std::pair<std::string, int>> writes;
            if (ignore->all < 1 || ignore->all > 2) writes.emplace_back("all", 1);
            if (ignore->own > 2) writes.emplace_back(ifname, 0);
            out.push_back(sysctl_finding("arp_ignore on " + ifname, describe_pair(ifname, *ignore),
                                         "1 or 2", "arp_ignore", std::move(writes)));
        }
        // arp_announce 2: ARP requests the backend sends name its
        // interface's own address, never the VIP a reply came from.
        auto announce = read_pair(ifname, "arp_announce");
        if (!announce) return std::unexpected(announce.error());
        if (announce->effective() != 2)
            out.push_back(sysctl_finding("arp_announce on " + ifname,
                                         describe_pair(ifname, *announce), "2", "arp_announce",
                                         {{"all", 2}}));
        // rp_filter: strict (1) drops a packet whose source is not routed
        // back out of the interface it came in on: the client's address
        // when replies leave by another NIC, and through a kernel tunnel
        // device always. Loose (2) still drops unroutable sources.
        auto rp = read_pair(ifname, "rp_filter");
        if (!rp) return std::unexpected(rp.error());
        if (rp->effective() == 1) {
            std::vector<std::pair<std::string, int>> writes;
            writes.emplace_back(rp->all == 1 ? "all" : ifname, 2);
            out.push_back(sysctl_finding("rp_filter on " + ifname,
                                         describe_pair(ifname, *rp, ", strict"), "0 or 2 (loose)",
                                         "rp_filter", std::move(writes)));
        }
    }

    // The balancer's largest outer packet must fit the backend's link, or
    // the NIC drops the full-sized packets of every connection.
    if (o.mtu && link->mtu < *o.mtu) {
        const int index = link->ifindex;
        const std::uint32_t mtu = *o.mtu;
        out.push_back(Finding{fmt::format("MTU of {}", ifname),
                              std::to_string(link->mtu),
                              fmt::format("at least {} (the balancer's mtu)", mtu),
                              {fmt::format("ip link set dev {} mtu {}", ifname, mtu)},
                              [index, mtu] { return netlink::set_interface_mtu(index, mtu); }});
    }

    if (o.want_decapsulator) {
        auto iface = bpf::Interface::by_name(ifname);
        if (!iface) return std::unexpected(iface.error());
        auto xdp = bpf::query_xdp(*iface);
        if (!xdp) return std::unexpected(xdp.error());
        if (!xdp->attached() || xdp->prog_name != "xlb_decap")
            out.push_back(Finding{
                fmt::format("decapsulator on {}", ifname),
                xdp->attached() ? "another XDP program, " + xdp->describe() : "no XDP program",
                "xlb_decap",
                {fmt::format("systemctl enable --now xlb-decap@{} (XLB_DECAP_ADDRESSES in "
                             "/etc/xlb/decap-{}.conf)",
                             ifname, ifname)},
                {}});
    }
    if (o.want_cookie_acceptor) {
        auto iface = bpf::Interface::by_name(ifname);
        if (!iface) return std::unexpected(iface.error());
        auto name = bpf::query_tc_name(*iface, bpf::cookie_tc_options());
        if (!name) return std::unexpected(name.error());
        if (*name != "xlb_cookie")
            out.push_back(Finding{
                fmt::format("cookie acceptor on {}", ifname),
                name->empty() ? "no tc ingress program" : "another tc program, " + *name,
                "xlb_cookie (xlb-decap without --no-cookies, Linux 6.9 or later)",
                {fmt::format("systemctl restart xlb-decap@{} (without XLB_DECAP_NO_COOKIES in "
                             "/etc/xlb/decap-{}.conf)",
                             ifname, ifname)},
                {}});
    }
    return out;
}

}  // namespace xlb::decap
