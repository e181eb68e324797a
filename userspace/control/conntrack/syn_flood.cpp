// SPDX-License-Identifier: Apache-2.0
#include "xlb/conntrack/syn_flood.h"

#include <algorithm>

namespace xlb::conntrack {

const char* to_string(SynFloodState state) {
    switch (state) {
        case SynFloodState::kCalm: return "calm";
        case SynFloodState::kAnswering: return "answering";
        case SynFloodState::kRecent: return "recent";
    }
    return "unknown";
}

SynFloodDetector::SynFloodDetector(config::SynFloodSettings settings,
                                   std::chrono::nanoseconds recent)
    : settings_(settings), recent_(recent) {}

std::optional<SynFloodChange> SynFloodDetector::update(std::uint64_t now_ns,
                                                       const SynCounts& syns) {
    // A clock that did not move gives no rate: the sample waits for the next.
    if (last_ns_ && now_ns <= *last_ns_) return std::nullopt;
    const std::optional<std::uint64_t> prev_ns = last_ns_;
    std::vector<std::uint64_t> delta;
    if (prev_ns) {
        for (const auto& [vip, counts] : syns) {
            auto it = last_.find(vip);
            if (it == last_.end() || it->second.size() != counts.size()) continue;
            if (delta.size() < counts.size()) delta.resize(counts.size());
            for (std::size_t cpu = 0; cpu < counts.size(); ++cpu)
                if (counts[cpu] >= it->second[cpu]) delta[cpu] += counts[cpu] - it->second[cpu];
        }
    }
    last_ns_ = now_ns;
    last_ = syns;
    if (!prev_ns) return std::nullopt;

    const double seconds = static_cast<double>(now_ns - *prev_ns) / 1e9;
    rates_.assign(delta.size(), 0.0);
    double fastest = 0;
    unsigned fastest_cpu = 0;
    for (std::size_t cpu = 0; cpu < delta.size(); ++cpu) {
        rates_[cpu] = static_cast<double>(delta[cpu]) / seconds;
        if (rates_[cpu] > fastest) {
            fastest = rates_[cpu];
            fastest_cpu = static_cast<unsigned>(cpu);
        }
    }

    const SynFloodState from = state_;
    if (state_ != SynFloodState::kAnswering) {
        if (fastest > static_cast<double>(settings_.start_rate)) {
            state_ = SynFloodState::kAnswering;
            started_ns_ = now_ns;
            below_since_ns_.reset();
            peak_rate_ = fastest;
            peak_cpu_ = fastest_cpu;
            ++floods_;
            return SynFloodChange{from, state_, fastest_cpu, fastest, {}};
        }
        if (state_ == SynFloodState::kRecent &&
            now_ns - ended_ns_ >= static_cast<std::uint64_t>(recent_.count())) {
            state_ = SynFloodState::kCalm;
            return SynFloodChange{from, state_, peak_cpu_, peak_rate_,
                                  std::chrono::nanoseconds(ended_ns_ - started_ns_)};
        }
        return std::nullopt;
    }

    if (fastest > peak_rate_) {
        peak_rate_ = fastest;
        peak_cpu_ = fastest_cpu;
    }
    if (fastest >= static_cast<double>(settings_.end_rate)) {
        below_since_ns_.reset();
        return std::nullopt;
    }
    // The rate just measured covers the interval since the previous sample:
    // every CPU has been below end_rate since then.
    if (!below_since_ns_) below_since_ns_ = *prev_ns;
    const auto end_after =
        std::chrono::duration_cast<std::chrono::nanoseconds>(settings_.end_after);
    if (now_ns - *below_since_ns_ < static_cast<std::uint64_t>(end_after.count()))
        return std::nullopt;
    state_ = SynFloodState::kRecent;
    ended_ns_ = now_ns;
    return SynFloodChange{from, state_, peak_cpu_, peak_rate_,
                          std::chrono::nanoseconds(now_ns - started_ns_)};
}

}  // namespace xlb::conntrack
