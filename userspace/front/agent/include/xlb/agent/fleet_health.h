// SPDX-License-Identifier: Apache-2.0
// The fleet's health view on one host (docs/fleet.md, "One health view"):
// from every live host's votes (their records, this host's included, as the
// store has them) it decides each backend of each VIP under `majority` or
// `any_down` and hands that to the reconciler, so that every host that reads
// the same records builds the same table. Slow start ramps from the time
// the fleet brought a backend in (the deciding host's healthy_since), on the
// wall clock, so that hosts ramp in step. While the store is unreachable (or
// before this host's own record is back from it) a backend keeps the fleet's
// last verdict unless this host's own verdict changes: then it follows its
// own, and says so.
//
// Control thread only; no I/O. Tests give it the time.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "xlb/agent/health_link.h"
#include "xlb/config/model.h"
#include "xlb/control/reconciler.h"
#include "xlb/fleet/consensus.h"

namespace xlb::agent {

// A backend this host judges otherwise than the fleet does (it follows the
// fleet, and says so).
struct HealthDisagreement {
    std::string vip;
    std::string backend;
    control::Health local = control::Health::kUnknown;
    control::Health fleet = control::Health::kUnknown;
    bool operator==(const HealthDisagreement&) const = default;
};

class FleetHealthView {
public:
    // `host`: this host's name (its record among the peers'); `wall_offset`:
    // system clock minus steady clock, to put steady times on the wall clock.
    FleetHealthView(std::string host, std::chrono::milliseconds wall_offset);

    // Every host record the store holds now (a record is there while its
    // host's lease holds), by host name.
    void set_peers(std::map<std::string, fleet::HostVotes> records);
    void set_store_reachable(bool reachable) { store_reachable_ = reachable; }
    // The store answers and holds this host's record: the fleet's view.
    bool ready() const { return store_reachable_ && peers_.contains(host_); }
    const std::map<std::string, fleet::HostVotes>& peers() const { return peers_; }
    // The other hosts whose records are there (live).
    std::vector<std::string> other_hosts() const;

    // The VIPs whose tables follow the fleet (for HealthLink::hold_vips).
    static std::set<std::string> consensus_vips(const std::vector<config::VipSpec>& vips);

    // Decides every backend of every consensus VIP and tells the reconciler
    // what changed. The next wall-clock moment a slow-start step is due, as
    // a steady time (nullopt: none).
    std::optional<health::TimePoint> apply(const std::vector<config::VipSpec>& vips,
                                           const HealthLink& local, health::TimePoint now,
                                           control::Reconciler& reconciler);

    // This host's vote on a backend, for its record.
    fleet::Vote own_vote(const HealthLink& local, const std::string& vip_key,
                         const net::IpAddress& backend, health::TimePoint now) const;
    std::int64_t wall_ms(health::TimePoint t) const;

    std::vector<HealthDisagreement> disagreements() const { return disagreements_; }
    // Backends that follow this host's own verdicts for want of the store.
    std::size_t falling_back() const { return fallback_.size(); }

private:
    std::string host_;
    std::chrono::milliseconds wall_offset_;
    bool store_reachable_ = true;
    std::map<std::string, fleet::HostVotes> peers_;
    // By (VIP key, backend address text).
    using Key = std::pair<std::string, std::string>;
    std::map<Key, fleet::FleetBackend> decided_;
    // Own verdict when the fleet's view was lost: a change from it is
    // followed; removed when the view is back.
    std::map<Key, control::Health> own_at_loss_;
    std::set<Key> fallback_;
    std::vector<HealthDisagreement> disagreements_;
};

}  // namespace xlb::agent
