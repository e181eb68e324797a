// SPDX-License-Identifier: Apache-2.0
#include "xlb/fleet/consensus.h"

namespace xlb::fleet {

using control::Health;

const char* to_string(HealthConsensus policy) {
    switch (policy) {
        case HealthConsensus::kLocal: return "local";
        case HealthConsensus::kMajority: return "majority";
        case HealthConsensus::kAnyDown: return "any_down";
    }
    return "local";
}

std::optional<HealthConsensus> parse_health_consensus(std::string_view text) {
    for (HealthConsensus p :
         {HealthConsensus::kLocal, HealthConsensus::kMajority, HealthConsensus::kAnyDown})
        if (text == to_string(p)) return p;
    return std::nullopt;
}

FleetVerdict decide(HealthConsensus policy, Health local, std::span<const Health> others,
                    Health previous) {
    FleetVerdict out;
    out.live = others.size() + 1;
    auto count = [&](Health h) {
        out.healthy += h == Health::kHealthy;
        out.unhealthy += h == Health::kUnhealthy;
    };
    count(local);
    for (Health h : others) count(h);
    // A strict majority of the live hosts, unknown verdicts included in
    // the count: a host that has not judged yet holds no vote either way.
    const bool most_healthy = out.healthy * 2 > out.live;
    const bool most_unhealthy = out.unhealthy * 2 > out.live;
    switch (policy) {
        case HealthConsensus::kLocal: out.health = local; break;
        case HealthConsensus::kMajority:
            out.health = most_unhealthy ? Health::kUnhealthy
                         : most_healthy ? Health::kHealthy
                                        : previous;
            break;
        case HealthConsensus::kAnyDown:
            out.health = out.unhealthy > 0 ? Health::kUnhealthy
                         : most_healthy    ? Health::kHealthy
                                           : previous;
            break;
    }
    out.local_disagrees =
        local != Health::kUnknown && out.health != Health::kUnknown && local != out.health;
    return out;
}

}  // namespace xlb::fleet
