// SPDX-License-Identifier: Apache-2.0
// `xlb-decap setup`: the host settings a backend needs besides the
// decapsulator (docs/deploy.md, "The backends"), applied or checked. Each
// setting is looked at in the calling process's network namespace.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "xlb/error.h"
#include "xlb/net/address.h"

namespace xlb::decap {

struct SetupOptions {
    std::string interface;             // receives the encapsulated packets
    std::vector<net::IpAddress> vips;  // go on lo
    // The balancer's `mtu` (its largest outer packet): the interface must
    // carry it. Unset: not checked.
    std::optional<std::uint32_t> mtu;
    // Whether an xlb_decap program must be attached to the interface (false
    // when the kernel's tunnel devices decapsulate).
    bool want_decapsulator = true;
    // Whether the balancer sends this backend cookie ACKs (its cookie_acks):
    // the cookie acceptor must then be on the interface's tc ingress too.
    bool want_cookie_acceptor = false;
};

// One setting that is not as a backend needs it.
struct Finding {
    std::string setting;  // "rp_filter on eth0"
    std::string found;    // "1, strict (all 1, eth0 0)"
    std::string want;     // "0 or 2 (loose)"
    // The commands that fix it, as an operator would type them.
    std::vector<std::string> fix;
    // Applies the fix; empty when setup leaves it to the operator (starting
    // the decapsulator is a service's job, not a one-off command's).
    std::function<Result<void>()> apply;

    // "rp_filter on eth0: 1, strict (all 1, eth0 0), want 0 or 2 (loose); fix:
    // sysctl -w net.ipv4.conf.all.rp_filter=2"
    std::string describe() const;
};

// Every setting that is wrong now, in a fixed order: the VIPs on lo, then
// arp_ignore, arp_announce and rp_filter (with an IPv4 VIP), the MTU, the
// decapsulator, the cookie acceptor. An error only when a setting cannot be read at all (no such
// interface, no /proc/sys).
Result<std::vector<Finding>> check(const SetupOptions& options);

// The sysctl key of `leaf` for an interface as sysctl(8) spells it: a dot in
// the name (a VLAN, eth0.100) becomes a slash: net.ipv4.conf.eth0/100.rp_filter.
std::string conf_key(const std::string& interface, const std::string& leaf);

}  // namespace xlb::decap
