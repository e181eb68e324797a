// SPDX-License-Identifier: Apache-2.0
//
// A fleet of LB hosts behind ECMP, simulated: what share of established
// flows each health consensus policy (local, majority, any_down) breaks when
// a host is lost, a backend fails or joins, or a host loses its path to a
// backend, with and without second chance (docs/fleet.md, "Simulated at
// scale").
//
// The fleet's verdict is xlb::fleet::decide(), the function the agent runs,
// and every table is built by the data plane's Maglev library and looked up
// with the data plane's flow hash: only the hosts, paths and routers are
// modelled.

#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>
#include <vector>

#include "xlb/error.h"
#include "xlb/fleet/consensus.h"

namespace xlb::sim {

// How the routers spread flows over the live LB hosts.
enum class Ecmp {
    // Only the lost host's flows move, spread evenly over the others
    // (resilient next-hop groups, consistent ECMP in most switches).
    kResilient,
    // Flow hash modulo the number of live hosts: almost every flow moves when
    // one host goes.
    kModulo,
};
[[nodiscard]] std::string_view ecmp_name(Ecmp ecmp) noexcept;
[[nodiscard]] xlb::Result<Ecmp> parse_ecmp(std::string_view name);

enum class FleetEvent {
    kHostLoss,          // one LB host gone, its lease expired; ECMP rehashes
    kBackendFail,       // one backend dies: every host judges it unhealthy
    kBackendJoin,       // a new backend, each host's path to it failing with P
    kPathFailure,       // one more host-backend path fails (backend alive)
    kJoinThenHostLoss,  // a join, then a host lost within second chance's window
    kFailThenHostLoss,  // a backend fails, then a host lost within the window
    kPathThenHostLoss,  // one more bad path, then a host lost (the lab's case)
};
inline constexpr FleetEvent kAllFleetEvents[] = {
    FleetEvent::kHostLoss,        FleetEvent::kBackendFail,      FleetEvent::kBackendJoin,
    FleetEvent::kPathFailure,     FleetEvent::kJoinThenHostLoss, FleetEvent::kFailThenHostLoss,
    FleetEvent::kPathThenHostLoss};
[[nodiscard]] std::string_view fleet_event_name(FleetEvent event) noexcept;
[[nodiscard]] xlb::Result<FleetEvent> parse_fleet_event(std::string_view name);

inline constexpr std::uint32_t kMaxFleetHosts = 100;
inline constexpr std::uint32_t kMaxFleetBackends = 100'000;

struct FleetStudy {
    std::uint32_t hosts = 10;
    std::uint32_t backends = 1000;
    std::size_t flows = 100'000;
    // Probability that one host's path to one backend fails (that host
    // judges the backend unhealthy while it is alive), drawn independently
    // for every pair, including a joining backend's.
    double path_failure = 0.01;
    // Independent trials per event kind, each from the same steady state.
    std::uint32_t events = 10;
    // Maglev table size; 0: 65537, or the smallest prime giving every
    // backend (and one joining) 10 slots when that is larger.
    std::uint32_t ring_size = 0;
    Ecmp ecmp = Ecmp::kResilient;
    std::uint64_t seed = 1;
    std::vector<FleetEvent> kinds{std::begin(kAllFleetEvents), std::end(kAllFleetEvents)};
    std::vector<fleet::HealthConsensus> policies{fleet::HealthConsensus::kLocal,
                                                 fleet::HealthConsensus::kMajority,
                                                 fleet::HealthConsensus::kAnyDown};
};

// The ring size a study uses (resolves 0).
[[nodiscard]] std::uint32_t fleet_ring_size(const FleetStudy& study);

// One event kind under one policy, averaged over the study's trials.
// Fractions are of the flows established before the event.
struct FleetRow {
    std::optional<FleetEvent> event;  // nullopt: the steady state, no event
    fleet::HealthConsensus policy;
    std::uint32_t trials = 0;
    // Flows with a backend in the steady state: every flow, unless some
    // host's table is empty.
    std::size_t established = 0;
    double moved = 0;                 // flows the routers sent to another host
    double lost = 0;                  // flows of a backend that died (not the LB's doing)
    double broken = 0;                // sent to a backend other than their own
    double broken_second_chance = 0;  // the same, with second chance
    double max_broken = 0;            // the worst trial, without second chance
    // Alive backends out of a live host's table, averaged over live hosts,
    // as a fraction of the alive backends: capacity the policy gives up.
    double capacity_lost = 0;
};

struct FleetResult {
    std::uint32_t ring_size = 0;
    std::size_t failed_paths = 0;  // host-backend paths failing in the steady state
    // The steady state, then each kind in the study's order; within each,
    // one row per policy in the study's order.
    std::vector<FleetRow> rows;
};

[[nodiscard]] xlb::Result<FleetResult> run_fleet(const FleetStudy& study);

}  // namespace xlb::sim
