// SPDX-License-Identifier: Apache-2.0
// Health checking wired to the reconciler. The agent keeps one HealthLink on
// its control thread: the probe engine's results are posted there and fed to
// the health tracker, whose changed observations go to the reconciler; time
// alone changes some of them (slow-start steps, the end of a rate-limit
// bias), so the agent also calls tick() at next_change(). No I/O, no clock,
// no threads: tests drive it with a fake clock and a fake data plane.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "xlb/config/model.h"
#include "xlb/control/reconciler.h"
#include "xlb/health/targets.h"
#include "xlb/health/tracker.h"

namespace xlb::agent {

control::Health to_control_health(health::Verdict verdict);

// A health event worth one log line.
struct HealthEvent {
    bool warning = false;  // a backend lost (log as a warning)
    std::string line;      // "VIP 198.51.100.10:80/tcp backend 10.0.0.1: healthy -> unhealthy: ..."
    health::TargetKey key;  // the log's XLB_VIP and XLB_BACKEND
};

// "VIP K backend B: <transition>", naming both and the reason.
std::string describe_transition(const health::TargetKey& key, const health::Transition& t);
// "VIP K: in panic: healthy share 33% below the threshold 50%; every active backend takes traffic".
std::string describe_panic_change(const control::PanicChange& change);

class HealthLink {
public:
    // seed 0: random (back-off jitter only).
    explicit HealthLink(std::uint64_t seed = 0) : tracker_(seed) {}

    // The desired VIPs changed (start, API, SIGHUP): tracks their checked
    // backends and returns what the probe engine must probe. A backend new to
    // the tracker starts unknown in the reconciler too, whatever it was
    // told before (e.g. a backend disabled and enabled again).
    std::vector<health::ProbeTarget> set_vips(const std::vector<config::VipSpec>& vips,
                                              health::TimePoint now,
                                              control::Reconciler& reconciler);

    // One probe result, for every target it serves (a shared probe: each
    // VIP's state machine judges it). Returns the transitions it caused, for
    // the log.
    std::vector<HealthEvent> apply(const health::ProbeResult& result, health::TimePoint now,
                                   control::Reconciler& reconciler);

    // Hands the reconciler whatever changed with time (call at next_change()).
    // Returns how many observations changed.
    std::size_t tick(health::TimePoint now, control::Reconciler& reconciler);
    // When tick() next has something to do; TimePoint::max(): never.
    health::TimePoint next_change(health::TimePoint now) const { return tracker_.next_change(now); }

    // What the API and metrics show about one backend of one VIP; nullopt when
    // it is not checked (the VIP has no health check, or it is disabled).
    std::optional<health::Snapshot> snapshot(const std::string& vip_key,
                                             const net::IpAddress& backend,
                                             health::TimePoint now) const;
    // The last probe of that backend that failed (nullopt: none yet).
    std::optional<health::LastProbe> last_failure(const std::string& vip_key,
                                                  const net::IpAddress& backend) const;
    // Its last verdict changes, oldest first (config health_history); nullopt
    // when it is not checked. In memory only: a restarted agent starts empty.
    // The other VIPs whose checks of this backend share its probe (one probe
    // feeds them all; targets.h group_probes); empty when it has its own.
    std::vector<std::string> probe_shared_with(const std::string& vip_key,
                                               const net::IpAddress& backend) const;
    std::optional<std::vector<health::Transition>> history(const std::string& vip_key,
                                                           const net::IpAddress& backend) const;
    // VIPs whose table follows the fleet's verdicts (health_consensus): their
    // observations are not handed to the reconciler (FleetHealthView does,
    // from every host's votes). A VIP that leaves the set gets its own
    // verdicts back at once.
    void hold_vips(std::set<std::string> vips, health::TimePoint now,
                   control::Reconciler& reconciler);
    bool held(const std::string& vip_key) const { return held_.contains(vip_key); }
    // How many verdict changes each backend's history keeps (start, reload).
    void set_history_capacity(std::size_t capacity) { tracker_.set_history_capacity(capacity); }
    std::size_t size() const { return tracker_.size(); }

private:
    std::size_t push(health::TimePoint now, control::Reconciler& reconciler);

    health::HealthTracker tracker_;
    std::set<health::TargetKey> tracked_;
    std::set<std::string> held_;
    std::map<health::TargetKey, health::LastProbe> last_failures_;
    // A shared probe's VIPs (one list per probe), for every target it serves.
    std::map<health::TargetKey, std::shared_ptr<const std::vector<std::string>>> shared_;
};

}  // namespace xlb::agent
