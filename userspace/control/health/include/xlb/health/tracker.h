// SPDX-License-Identifier: Apache-2.0
// All backends' state machines, keyed by (VIP, backend). Pure and
// single-threaded: the agent keeps one on the control thread and feeds it the
// engine's results there (ControlLoop::post()).
//
// The agent's side, on the control thread:
//
//   tracker.set_targets(tracked_targets(vips), now);  // at start, and on every change
//   ...
//   // for each ProbeResult posted from the engine thread:
//   if (auto u = tracker.apply(result, now); u && u->transition) log(*u->transition);
//   for (const Observation& o : tracker.take_changes(now))
//       reconciler.set_observed(o.key.vip, o.key.backend, {health(o.verdict), o.weight_factor});
//   // and when weight factors change with time (slow start, end of a bias):
//   wake up at tracker.next_change(now) and call take_changes() again.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <utility>
#include <vector>

#include "xlb/health/backend_health.h"
#include "xlb/health/targets.h"
#include "xlb/health/types.h"

namespace xlb::health {

// What the reconciler consumes per backend (control::ObservedBackend).
struct Observation {
    TargetKey key;
    Verdict verdict = Verdict::kUnknown;
    double weight_factor = 1.0;
    bool operator==(const Observation&) const = default;
};

class HealthTracker {
public:
    // seed 0: a random one (back-off jitter only; verdicts are deterministic).
    explicit HealthTracker(std::uint64_t seed = 0);

    // Replaces the tracked set. Targets already tracked keep their state (a
    // changed policy applies from now on); new ones start unknown; missing
    // ones are forgotten. A new target's first verdict slow-starts only when
    // its VIP already had tracked targets (a backend added to a serving
    // pool); the first verdicts at agent start, and those of a VIP new to the
    // tracker (or newly checked), take full weight: that pool was serving, or
    // has nothing to protect.
    void set_targets(const std::vector<TrackedTarget>& targets, TimePoint now);

    // A probe result; nullopt for a target not (or no longer) tracked.
    std::optional<Update> apply(const ProbeResult& result, TimePoint now);

    // Observations that differ from the last ones taken (verdicts, and factors
    // that changed with results or with time). A target starts as
    // {kUnknown, 1.0}, the reconciler's default, so nothing is reported
    // until it has something to say.
    std::vector<Observation> take_changes(TimePoint now);
    // When take_changes() will next have something without a new result
    // (the earliest next_change() of all backends; `now` while results or
    // policy changes are not yet taken); TimePoint::max(): never.
    TimePoint next_change(TimePoint now) const;

    // How many verdict changes each backend's history keeps (config
    // health_history): applies to the backends tracked now and to new ones.
    // A smaller capacity drops the oldest; 0 empties every history.
    void set_history_capacity(std::size_t capacity);

    const BackendHealth* find(const TargetKey& key) const;
    std::size_t size() const { return entries_.size(); }
    // Every tracked backend, in key order.
    std::vector<std::pair<TargetKey, Snapshot>> snapshot(TimePoint now) const;

private:
    struct Entry {
        BackendHealth health;
        Observation reported;
        TimePoint timed = TimePoint::max();  // its key in timed_, if not max()
    };
    using Map = std::map<TargetKey, Entry>;
    std::uint64_t seed_for(const TargetKey& key) const;
    void retime(Map::iterator it, TimePoint now);

    std::uint64_t seed_;
    std::size_t history_capacity_ = config::kDefaultHealthHistory;
    Map entries_;
    std::set<TargetKey> dirty_;                        // changed since the last take_changes()
    std::set<std::pair<TimePoint, TargetKey>> timed_;  // factor changes then without a result
};

}  // namespace xlb::health
