// SPDX-License-Identifier: Apache-2.0
#include "xlb/health/targets.h"

#include <algorithm>
#include <map>
#include <set>

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

ProbeEndpoint probe_endpoint(const ProbeTarget& t) {
    return ProbeEndpoint{t.key.backend, t.destination(), t.port, t.mark,
                         t.check.via_vip ? t.key.vip : std::string()};
}

config::HealthCheck probe_part(config::HealthCheck c) {
    const config::HealthCheck defaults;
    c.port = 0;  // the port probed is the endpoint's (resolved: 0 is the VIP's port)
    c.unhealthy_threshold = defaults.unhealthy_threshold;
    c.healthy_threshold = defaults.healthy_threshold;
    c.failure_accrual = defaults.failure_accrual;
    c.rate_limit_bias = defaults.rate_limit_bias;
    c.flapping = defaults.flapping;
    return c;
}

std::vector<std::vector<std::size_t>> group_probes(const std::vector<ProbeTarget>& targets) {
    struct Group {
        config::HealthCheck probe;
        std::size_t index;  // into `groups`
    };
    std::vector<std::vector<std::size_t>> groups;
    std::map<ProbeEndpoint, std::vector<Group>> by_endpoint;
    std::set<TargetKey> seen;
    for (std::size_t i = 0; i < targets.size(); ++i) {
        const ProbeTarget& t = targets[i];
        if (t.check.type == config::HealthCheckType::kNone || !seen.insert(t.key).second) continue;
        std::vector<Group>& bucket = by_endpoint[probe_endpoint(t)];
        config::HealthCheck probe = probe_part(t.check);
        auto same = std::find_if(bucket.begin(), bucket.end(),
                                 [&](const Group& g) { return g.probe == probe; });
        if (same != bucket.end()) {
            groups[same->index].push_back(i);
            continue;
        }
        bucket.push_back(Group{std::move(probe), groups.size()});
        groups.push_back({i});
    }
    return groups;
}

}  // namespace xlb::health
