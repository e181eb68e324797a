// SPDX-License-Identifier: Apache-2.0
// From the desired state (VIPs) to what is probed and judged.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "xlb/config/model.h"
#include "xlb/health/policy.h"
#include "xlb/health/types.h"

namespace xlb::health {

// One (VIP, backend) pair to probe, self-contained.
struct ProbeTarget {
    TargetKey key;
    std::uint16_t port = 0;     // resolved: the check's port, or the VIP's
    config::HealthCheck check;  // type is never kNone here
    // Through the data path (check.via_vip): the probe is addressed to
    // via_address (the VIP) and carries SO_MARK `mark`, which the tc egress
    // program (bpf/xlb_probe.bpf.c) turns into the encapsulation towards
    // key.backend. The agent fills both in (it knows the backend ids);
    // unset, the backend's own address is probed.
    std::optional<net::IpAddress> via_address;
    std::uint32_t mark = 0;
    // Where the probe goes.
    const net::IpAddress& destination() const { return via_address ? *via_address : key.backend; }
    bool operator==(const ProbeTarget&) const = default;
};

// Where and how a probe goes, apart from the check: targets with the same
// endpoint and the same probe part of their check (probe_part) are probed
// once (shared probes, docs/config.md). A probe through the data path
// (via_vip) belongs to its VIP: its endpoint names the VIP, so it is never
// shared.
struct ProbeEndpoint {
    net::IpAddress backend;
    net::IpAddress destination;
    std::uint16_t port = 0;
    std::uint32_t mark = 0;
    std::string via_vip;  // the VIP's key for a probe through it; else empty
    auto operator<=>(const ProbeEndpoint&) const = default;
};
ProbeEndpoint probe_endpoint(const ProbeTarget& t);

// The check without the settings only the state machine reads (thresholds,
// failure accrual, rate-limit bias, flapping) and without its port (the
// endpoint's resolved port is what counts): what decides how a probe is made
// and what it finds.
config::HealthCheck probe_part(config::HealthCheck check);

// The targets (indices into `targets`) that one probe serves, in the order
// of their first member; targets of type none are left out, and so is a
// second target with a key seen before.
std::vector<std::vector<std::size_t>> group_probes(const std::vector<ProbeTarget>& targets);

// One state machine to keep.
struct TrackedTarget {
    TargetKey key;
    Policy policy;
};

// Every backend that is not disabled, of every VIP whose check is not
// `none`. Drained backends are probed: their health is shown and they can be
// enabled again at once. VIPs without a check have no targets (the agent
// reports their backends healthy).
std::vector<ProbeTarget> probe_targets(const std::vector<config::VipSpec>& vips);
std::vector<TrackedTarget> tracked_targets(const std::vector<config::VipSpec>& vips);

}  // namespace xlb::health
