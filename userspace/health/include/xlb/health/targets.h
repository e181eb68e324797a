// SPDX-License-Identifier: Apache-2.0
// From the desired state (VIPs) to what is probed and judged.
#pragma once

#include <cstdint>
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
