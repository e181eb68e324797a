// SPDX-License-Identifier: Apache-2.0
#include "xlb/fleet/consensus.h"

#include <algorithm>

namespace xlb::fleet {

using control::Health;

FleetBackend decide_backend(HealthConsensus policy, std::span<const Vote> votes, Health previous) {
    FleetBackend out;
    out.live = votes.size();
    std::vector<std::int64_t> since;  // of the healthy votes
    std::vector<double> bias;
    for (const Vote& v : votes) {
        out.healthy += v.health == Health::kHealthy;
        out.unhealthy += v.health == Health::kUnhealthy;
        if (v.health == Health::kHealthy) since.push_back(v.healthy_since_ms.value_or(0));
        bias.push_back(std::clamp(v.bias, 0.0, 1.0));
    }
    std::sort(since.begin(), since.end());
    std::sort(bias.begin(), bias.end());
    // A strict majority of the live hosts, unknown verdicts included in the
    // count: a host that has not judged yet holds no vote either way.
    const std::size_t majority = out.live / 2 + 1;
    const bool most_healthy = out.healthy >= majority;
    const bool most_unhealthy = out.unhealthy >= majority;
    switch (policy) {
        case HealthConsensus::kLocal:
            out.health = votes.empty() ? previous : votes.front().health;
            if (out.health == Health::kHealthy && !votes.empty())
                out.in_since_ms = votes.front().healthy_since_ms.value_or(0);
            if (!votes.empty()) out.bias = bias.front();
            return out;
        case HealthConsensus::kMajority:
            out.health = most_unhealthy ? Health::kUnhealthy
                         : most_healthy ? Health::kHealthy
                                        : previous;
            // The backend came in when the majority-th host turned healthy;
            // biased while more than half of the hosts are: by the factor
            // that many are biased by at least (ascending, the majority-th).
            if (!since.empty()) out.in_since_ms = since[std::min(majority, since.size()) - 1];
            if (!bias.empty()) out.bias = bias[std::min(majority, bias.size()) - 1];
            break;
        case HealthConsensus::kAnyDown:
            out.health = out.unhealthy > 0 ? Health::kUnhealthy
                         : most_healthy    ? Health::kHealthy
                                           : previous;
            // In once the last host judging it turned healthy; biased while
            // any host is.
            if (!since.empty()) out.in_since_ms = since.back();
            if (!bias.empty()) out.bias = bias.front();
            break;
    }
    if (out.health != Health::kHealthy)
        out.in_since_ms.reset();
    else if (!out.in_since_ms)
        out.in_since_ms = 0;  // kept in by a tie: no ramp to start
    return out;
}

FleetVerdict decide(HealthConsensus policy, Health local, std::span<const Health> others,
                    Health previous) {
    std::vector<Vote> votes;
    votes.reserve(others.size() + 1);
    votes.push_back(Vote{local});
    for (Health h : others) votes.push_back(Vote{h});
    const FleetBackend fleet = decide_backend(policy, votes, previous);
    FleetVerdict out{fleet.health, fleet.live, fleet.healthy, fleet.unhealthy};
    out.local_disagrees =
        local != Health::kUnknown && out.health != Health::kUnknown && local != out.health;
    return out;
}

}  // namespace xlb::fleet
