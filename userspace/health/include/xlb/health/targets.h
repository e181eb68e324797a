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
