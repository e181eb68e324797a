// SPDX-License-Identifier: Apache-2.0
// The fleet's verdict on one backend from every live host's verdict
// (docs/fleet.md, "One health view"): every host that reads the same host
// records decides the same, so every host builds the same table even where
// their own probes disagree. Pure: the caller says which hosts are live (a
// host is live while its record's lease holds) and what the fleet decided
// last.
#pragma once

#include <cstddef>
#include <optional>
#include <span>
#include <string_view>

#include "xlb/control/effective.h"

namespace xlb::fleet {

enum class HealthConsensus {
    kLocal,     // each host its own verdicts (a host without a fleet)
    kMajority,  // out when more than half of the live hosts judge it unhealthy,
                // back in when more than half judge it healthy
    kAnyDown,   // out when any live host judges it unhealthy, back in when
                // none does and more than half judge it healthy
};
const char* to_string(HealthConsensus policy);
std::optional<HealthConsensus> parse_health_consensus(std::string_view text);

struct FleetVerdict {
    control::Health health = control::Health::kUnknown;
    std::size_t live = 0;  // hosts whose verdicts were counted, this one included
    std::size_t healthy = 0;
    std::size_t unhealthy = 0;
    // This host's own verdict is known and differs from the fleet's: it
    // follows the fleet and reports the disagreement.
    bool local_disagrees = false;
};

// `local`: this host's verdict; `others`: the other live hosts' verdicts;
// `previous`: the fleet's verdict before (kept while no side has its
// majority, so that a tie or a host joining does not flap the table).
FleetVerdict decide(HealthConsensus policy, control::Health local,
                    std::span<const control::Health> others, control::Health previous);

}  // namespace xlb::fleet
