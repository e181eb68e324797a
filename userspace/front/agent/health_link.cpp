// SPDX-License-Identifier: Apache-2.0
#include "xlb/agent/health_link.h"

#include <cmath>

namespace xlb::agent {

control::Health to_control_health(health::Verdict verdict) {
    switch (verdict) {
        case health::Verdict::kUnknown: return control::Health::kUnknown;
        case health::Verdict::kHealthy: return control::Health::kHealthy;
        case health::Verdict::kUnhealthy: return control::Health::kUnhealthy;
    }
    return control::Health::kUnknown;
}

std::string describe_transition(const health::TargetKey& key, const health::Transition& t) {
    return "VIP " + key.vip + " backend " + key.backend.to_string() + ": " + t.to_string();
}

namespace {

std::string percent(double share) {
    return std::to_string(static_cast<int>(std::lround(share * 100.0))) + "%";
}

}  // namespace

std::string describe_panic_change(const control::PanicChange& c) {
    using control::PanicReason;
    std::string line = "VIP " + c.vip_key + ": ";
    switch (c.to) {
        case PanicReason::kBelowThreshold:
            return line + "in panic: healthy share " + percent(c.healthy_share) +
                   " below the threshold " + percent(c.threshold) +
                   "; every active backend takes traffic, health ignored";
        case PanicReason::kAwaitingFirstVerdicts:
            return line +
                   "in start-up panic: not every backend has its first verdict yet; every "
                   "active backend takes traffic meanwhile";
        case PanicReason::kNone: break;
    }
    return line + "out of panic (" + control::to_string(c.from) + "): healthy share " +
           percent(c.healthy_share) + ", only healthy backends take new flows";
}

std::vector<health::ProbeTarget> HealthLink::set_vips(const std::vector<config::VipSpec>& vips,
                                                      health::TimePoint now,
                                                      control::Reconciler& reconciler) {
    const std::vector<health::TrackedTarget> tracked = health::tracked_targets(vips);
    tracker_.set_targets(tracked, now);
    std::set<health::TargetKey> next;
    for (const health::TrackedTarget& t : tracked) {
        next.insert(t.key);
        // The tracker reports only what differs from {unknown, 1}; the
        // reconciler may still hold an older observation of this backend.
        if (!tracked_.contains(t.key))
            reconciler.set_observed(t.key.vip, t.key.backend, control::ObservedBackend{});
    }
    tracked_ = std::move(next);
    std::erase_if(last_failures_, [&](const auto& kv) { return !tracked_.contains(kv.first); });
    push(now, reconciler);
    std::vector<health::ProbeTarget> targets = health::probe_targets(vips);
    shared_.clear();
    for (const std::vector<std::size_t>& members : health::group_probes(targets)) {
        if (members.size() < 2) continue;
        auto group = std::make_shared<std::vector<std::string>>();
        for (const std::size_t m : members) group->push_back(targets[m].key.vip);
        for (const std::size_t m : members) shared_.emplace(targets[m].key, group);
    }
    return targets;
}

std::vector<std::string> HealthLink::probe_shared_with(const std::string& vip_key,
                                                       const net::IpAddress& backend) const {
    std::vector<std::string> others;
    auto it = shared_.find(health::TargetKey{vip_key, backend});
    if (it == shared_.end()) return others;
    for (const std::string& vip : *it->second)
        if (vip != vip_key) others.push_back(vip);
    return others;
}

std::vector<HealthEvent> HealthLink::apply(const health::ProbeResult& result, health::TimePoint now,
                                           control::Reconciler& reconciler) {
    std::vector<HealthEvent> events;
    health::ProbeResult one = result;
    for (const health::TargetKey& key : result.targets()) {
        one.key = key;
        if (!one.ok() && tracked_.contains(key))
            last_failures_[key] =
                health::LastProbe{one.finished,    one.failure,      one.detail,
                                  one.http_status, one.rate_limited, one.latency()};
        if (auto update = tracker_.apply(one, now); update && update->transition)
            events.push_back(HealthEvent{update->transition->to == health::Verdict::kUnhealthy,
                                         describe_transition(key, *update->transition), key});
    }
    push(now, reconciler);
    return events;
}

std::size_t HealthLink::tick(health::TimePoint now, control::Reconciler& reconciler) {
    return push(now, reconciler);
}

std::size_t HealthLink::push(health::TimePoint now, control::Reconciler& reconciler) {
    const std::vector<health::Observation> changes = tracker_.take_changes(now);
    for (const health::Observation& o : changes)
        if (!held_.contains(o.key.vip))
            reconciler.set_observed(
                o.key.vip, o.key.backend,
                control::ObservedBackend{to_control_health(o.verdict), o.weight_factor,
                                         to_control_health(o.verdict)});
    return changes.size();
}

void HealthLink::hold_vips(std::set<std::string> vips, health::TimePoint now,
                           control::Reconciler& reconciler) {
    push(now, reconciler);
    for (const health::TargetKey& key : tracked_) {
        if (!held_.contains(key.vip) || vips.contains(key.vip)) continue;
        if (const health::BackendHealth* h = tracker_.find(key)) {
            const control::Health verdict = to_control_health(h->verdict());
            reconciler.set_observed(
                key.vip, key.backend,
                control::ObservedBackend{verdict, h->weight_factor(now), verdict});
        }
    }
    held_ = std::move(vips);
}

std::optional<health::LastProbe> HealthLink::last_failure(const std::string& vip_key,
                                                          const net::IpAddress& backend) const {
    auto it = last_failures_.find(health::TargetKey{vip_key, backend});
    if (it == last_failures_.end()) return std::nullopt;
    return it->second;
}

std::optional<std::vector<health::Transition>> HealthLink::history(
    const std::string& vip_key, const net::IpAddress& backend) const {
    const health::BackendHealth* h = tracker_.find(health::TargetKey{vip_key, backend});
    if (!h) return std::nullopt;
    return h->history().entries();
}

std::optional<health::Snapshot> HealthLink::snapshot(const std::string& vip_key,
                                                     const net::IpAddress& backend,
                                                     health::TimePoint now) const {
    const health::BackendHealth* h = tracker_.find(health::TargetKey{vip_key, backend});
    if (!h) return std::nullopt;
    return h->snapshot(now);
}

}  // namespace xlb::agent
