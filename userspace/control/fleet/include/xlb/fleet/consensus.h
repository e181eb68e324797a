// SPDX-License-Identifier: Apache-2.0
// The fleet's verdict on one backend from every live host's verdict
// (docs/fleet.md, "One health view"): every host that reads the same host
// records decides the same, so every host builds the same table even where
// their own probes disagree. Pure: the caller says which hosts are live (a
// host is live while its record's lease holds) and what the fleet decided
// last.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "xlb/config/model.h"
#include "xlb/control/effective.h"
#include "xlb/error.h"

namespace xlb::fleet {

//  kLocal: each host its own verdicts (a host without a fleet);
//  kMajority: out when more than half of the live hosts judge it unhealthy,
//    back in when more than half judge it healthy;
//  kAnyDown: out when any live host judges it unhealthy, back in when none
//    does and more than half judge it healthy.
using HealthConsensus = config::HealthConsensus;
using config::parse_health_consensus;
using config::to_string;

// One live host's view of one backend, as its record has it.
struct Vote {
    control::Health health = control::Health::kUnknown;  // the host's own probes
    // When the host's verdict turned healthy and started its slow start, in
    // ms since the Unix epoch; 0: healthy without a ramp (the pool it
    // started with); nullopt: not healthy.
    std::optional<std::int64_t> healthy_since_ms;
    double bias = 1.0;  // its rate-limit bias factor now, in (0, 1]
    bool operator==(const Vote&) const = default;
};

// What the fleet decides for one backend.
struct FleetBackend {
    control::Health health = control::Health::kUnknown;
    std::size_t live = 0;  // the votes counted
    std::size_t healthy = 0;
    std::size_t unhealthy = 0;
    // When the fleet brought the backend in (the slow start every host
    // ramps by), ms since the Unix epoch: the moment the deciding host
    // turned healthy. 0: no ramp; nullopt: not in.
    std::optional<std::int64_t> in_since_ms;
    double bias = 1.0;  // the fleet's rate-limit bias factor
    bool operator==(const FleetBackend&) const = default;
};

// `votes`: one per live host, this host's included (in any order: the
// answer does not depend on it); `previous`: the fleet's verdict before
// (kept while no side has its majority, so that a tie or a host joining
// does not flap the table). kLocal is the single vote given.
FleetBackend decide_backend(HealthConsensus policy, std::span<const Vote> votes,
                            control::Health previous);

struct FleetVerdict {
    control::Health health = control::Health::kUnknown;
    std::size_t live = 0;  // hosts whose verdicts were counted, this one included
    std::size_t healthy = 0;
    std::size_t unhealthy = 0;
    // This host's own verdict is known and differs from the fleet's: it
    // follows the fleet and reports the disagreement.
    bool local_disagrees = false;
};

// decide_backend() on verdicts alone: `local` this host's, `others` the
// other live hosts'.
FleetVerdict decide(HealthConsensus policy, control::Health local,
                    std::span<const control::Health> others, control::Health previous);

// Every backend's vote of one host, by VIP key and backend address text.
struct HostVotes {
    std::int64_t config_revision = 0;
    std::int64_t applied_at_ms = 0;  // when it applied config_revision
    std::map<std::string, std::map<std::string, Vote>> vips;
    // Per VIP: the checksum of the table live on the host, as hex text,
    // and when it went live.
    std::map<std::string, std::string> live;
    std::map<std::string, std::int64_t> published_at_ms;  // of the live one
};

}  // namespace xlb::fleet
