// SPDX-License-Identifier: Apache-2.0
#include "xlb/health/tracker.h"

#include <random>
#include <string>

#include "xlb/fnv1a.h"

namespace xlb::health {

HealthTracker::HealthTracker(std::uint64_t seed) : seed_(seed) {
    if (seed_ == 0) {
        std::random_device rd;
        seed_ = (static_cast<std::uint64_t>(rd()) << 32) ^ rd();
    }
}

std::uint64_t HealthTracker::seed_for(const TargetKey& key) const {
    return fnv1a64(key.backend.to_string(), fnv1a64(key.vip, seed_));
}

void HealthTracker::set_targets(const std::vector<TrackedTarget>& targets, TimePoint now) {
    std::set<std::string> serving;  // VIPs with tracked targets before this call
    for (const auto& [key, entry] : entries_) serving.insert(key.vip);
    Map next;
    for (const TrackedTarget& t : targets) {
        if (next.contains(t.key)) continue;  // first one wins
        if (auto it = entries_.find(t.key); it != entries_.end()) {
            auto node = entries_.extract(it);
            if (node.mapped().health.policy() != t.policy) {
                node.mapped().health.set_policy(t.policy);
                dirty_.insert(t.key);
            }
            next.insert(std::move(node));
        } else {
            const bool initial = !serving.contains(t.key.vip);
            next.emplace(t.key, Entry{BackendHealth(t.policy, initial, seed_for(t.key), now,
                                                    history_capacity_),
                                      Observation{t.key, Verdict::kUnknown, 1.0}});
        }
    }
    entries_ = std::move(next);
    std::erase_if(dirty_, [&](const TargetKey& k) { return !entries_.contains(k); });
    std::erase_if(timed_, [&](const auto& tk) { return !entries_.contains(tk.second); });
}

std::optional<Update> HealthTracker::apply(const ProbeResult& result, TimePoint now) {
    auto it = entries_.find(result.key);
    if (it == entries_.end()) return std::nullopt;
    Update update = it->second.health.apply(result, now);
    dirty_.insert(result.key);
    return update;
}

void HealthTracker::retime(Map::iterator it, TimePoint now) {
    Entry& e = it->second;
    const TimePoint next = e.health.next_change(now);
    if (next == e.timed) return;
    if (e.timed != TimePoint::max()) timed_.erase({e.timed, it->first});
    e.timed = next;
    if (next != TimePoint::max()) timed_.insert({next, it->first});
}

std::vector<Observation> HealthTracker::take_changes(TimePoint now) {
    std::vector<Observation> out;
    std::set<TargetKey> keys;
    keys.swap(dirty_);
    while (!timed_.empty() && timed_.begin()->first <= now) {
        keys.insert(timed_.begin()->second);
        timed_.erase(timed_.begin());
        // Entry::timed is reset below, through retime().
    }
    for (const TargetKey& key : keys) {
        auto it = entries_.find(key);
        if (it == entries_.end()) continue;
        Entry& e = it->second;
        if (e.timed != TimePoint::max() && e.timed <= now) e.timed = TimePoint::max();  // popped
        Observation seen{key, e.health.verdict(), e.health.weight_factor(now)};
        if (seen != e.reported) {
            e.reported = seen;
            out.push_back(std::move(seen));
        }
        retime(it, now);
    }
    return out;
}

TimePoint HealthTracker::next_change(TimePoint now) const {
    if (!dirty_.empty()) return now;
    return timed_.empty() ? TimePoint::max() : timed_.begin()->first;
}

void HealthTracker::set_history_capacity(std::size_t capacity) {
    history_capacity_ = capacity;
    for (auto& [key, entry] : entries_) entry.health.set_history_capacity(capacity);
}

const BackendHealth* HealthTracker::find(const TargetKey& key) const {
    auto it = entries_.find(key);
    return it == entries_.end() ? nullptr : &it->second.health;
}

std::vector<std::pair<TargetKey, Snapshot>> HealthTracker::snapshot(TimePoint now) const {
    std::vector<std::pair<TargetKey, Snapshot>> out;
    out.reserve(entries_.size());
    for (const auto& [key, entry] : entries_) out.emplace_back(key, entry.health.snapshot(now));
    return out;
}

}  // namespace xlb::health
