// SPDX-License-Identifier: Apache-2.0
#include "xlb/health/targets.h"

namespace xlb::health {

namespace {

template <class Fn>
void for_each_target(const std::vector<config::VipSpec>& vips, Fn fn) {
    for (const config::VipSpec& vip : vips) {
        if (vip.health_check.type == config::HealthCheckType::kNone) continue;
        const std::string key = vip.key();
        for (const config::BackendSpec& b : vip.backends) {
            if (b.state == config::AdminState::kDisabled) continue;
            fn(vip, key, b);
        }
    }
}

}  // namespace

std::vector<ProbeTarget> probe_targets(const std::vector<config::VipSpec>& vips) {
    std::vector<ProbeTarget> out;
    for_each_target(vips, [&](const config::VipSpec& vip, const std::string& key,
                              const config::BackendSpec& b) {
        const auto& hc = vip.health_check;
        out.push_back(
            ProbeTarget{TargetKey{key, b.address}, hc.port != 0 ? hc.port : vip.port, hc});
    });
    return out;
}

std::vector<TrackedTarget> tracked_targets(const std::vector<config::VipSpec>& vips) {
    std::vector<TrackedTarget> out;
    for_each_target(vips, [&](const config::VipSpec& vip, const std::string& key,
                              const config::BackendSpec& b) {
        out.push_back(TrackedTarget{TargetKey{key, b.address},
                                    Policy::from(vip.health_check, vip.slow_start)});
    });
    return out;
}

}  // namespace xlb::health
