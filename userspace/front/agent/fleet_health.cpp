// SPDX-License-Identifier: Apache-2.0
#include "xlb/agent/fleet_health.h"

#include <algorithm>

#include "xlb/health/policy.h"

namespace xlb::agent {

using control::Health;

FleetHealthView::FleetHealthView(std::string host, std::chrono::milliseconds wall_offset)
    : host_(std::move(host)), wall_offset_(wall_offset) {}

void FleetHealthView::set_peers(std::map<std::string, fleet::HostVotes> records) {
    peers_ = std::move(records);
}

std::vector<std::string> FleetHealthView::other_hosts() const {
    std::vector<std::string> out;
    for (const auto& [host, votes] : peers_)
        if (host != host_) out.push_back(host);
    return out;
}

std::set<std::string> FleetHealthView::consensus_vips(const std::vector<config::VipSpec>& vips) {
    std::set<std::string> out;
    for (const config::VipSpec& v : vips)
        if (v.health_check.type != config::HealthCheckType::kNone &&
            v.consensus(true) != config::HealthConsensus::kLocal)
            out.insert(v.key());
    return out;
}

std::int64_t FleetHealthView::wall_ms(health::TimePoint t) const {
    return std::chrono::duration_cast<std::chrono::milliseconds>(t.time_since_epoch()).count() +
           wall_offset_.count();
}

fleet::Vote FleetHealthView::own_vote(const HealthLink& local, const std::string& vip_key,
                                      const net::IpAddress& backend, health::TimePoint now) const {
    fleet::Vote vote;
    const std::optional<health::Snapshot> s = local.snapshot(vip_key, backend, now);
    if (!s) return vote;
    vote.health = to_control_health(s->verdict);
    if (vote.health == Health::kHealthy)
        vote.healthy_since_ms = s->ramp_start ? wall_ms(*s->ramp_start) : 0;
    vote.bias = s->bias_factor;
    return vote;
}

std::optional<health::TimePoint> FleetHealthView::apply(const std::vector<config::VipSpec>& vips,
                                                        const HealthLink& local,
                                                        health::TimePoint now,
                                                        control::Reconciler& reconciler) {
    const std::int64_t now_ms = wall_ms(now);
    const bool view = ready();
    std::optional<health::TimePoint> next;
    std::map<Key, fleet::FleetBackend> decided;
    std::set<Key> fallback;
    std::vector<HealthDisagreement> disagreements;
    const std::set<std::string> held = consensus_vips(vips);
    for (const config::VipSpec& vip : vips) {
        const std::string vip_key = vip.key();
        if (!held.contains(vip_key)) continue;
        const config::HealthConsensus policy = vip.consensus(true);
        for (const config::BackendSpec& b : vip.backends) {
            const std::string address = b.address.to_string();
            const Key key{vip_key, address};
            const fleet::Vote own = own_vote(local, vip_key, b.address, now);
            const auto before = decided_.find(key);
            const fleet::FleetBackend previous =
                before == decided_.end() ? fleet::FleetBackend{} : before->second;
            fleet::FleetBackend fleet;
            double own_factor = 1.0;
            if (view) {
                std::vector<fleet::Vote> votes;
                votes.reserve(peers_.size());
                for (const auto& [host, record] : peers_) {
                    fleet::Vote v;
                    if (auto on = record.vips.find(vip_key); on != record.vips.end())
                        if (auto it = on->second.find(address); it != on->second.end())
                            v = it->second;
                    votes.push_back(v);
                }
                fleet = fleet::decide_backend(policy, votes, previous.health);
            } else {
                // Without the fleet's view: what it decided last, until this
                // host's own verdict changes (or there is nothing decided).
                const auto at_loss = own_at_loss_.try_emplace(key, own.health).first;
                const bool decided_before =
                    before != decided_.end() && before->second.health != Health::kUnknown;
                if (decided_before && at_loss->second == own.health && !fallback_.contains(key)) {
                    fleet = previous;
                } else {
                    fleet = fleet::decide_backend(config::HealthConsensus::kLocal,
                                                  std::span(&own, 1), previous.health);
                    fallback.insert(key);
                    if (auto s = local.snapshot(vip_key, b.address, now))
                        own_factor = s->weight_factor;
                }
            }
            double factor = std::clamp(fleet.bias, health::kMinWeightFactor, 1.0);
            if (fallback.contains(key)) {
                factor = own_factor;
            } else if (fleet.health == Health::kHealthy && fleet.in_since_ms &&
                       *fleet.in_since_ms > 0) {
                const auto elapsed = std::chrono::milliseconds(now_ms - *fleet.in_since_ms);
                factor *= health::slow_start_factor(vip.slow_start, elapsed);
                if (auto step = health::slow_start_next_step(vip.slow_start, elapsed)) {
                    const auto due = now + (*step - elapsed);
                    if (!next || due < *next) next = due;
                }
            }
            factor = std::clamp(factor, health::kMinWeightFactor, 1.0);
            reconciler.set_observed(vip_key, b.address,
                                    control::ObservedBackend{fleet.health, factor, own.health});
            if (own.health != Health::kUnknown && fleet.health != Health::kUnknown &&
                own.health != fleet.health)
                disagreements.push_back(
                    HealthDisagreement{vip_key, address, own.health, fleet.health});
            decided.emplace(key, fleet);
        }
    }
    decided_ = std::move(decided);
    if (view) own_at_loss_.clear();
    fallback_ = std::move(fallback);
    disagreements_ = std::move(disagreements);
    return next;
}

}  // namespace xlb::agent
