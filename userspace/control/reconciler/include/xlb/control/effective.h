// SPDX-License-Identifier: Apache-2.0
// Effective weights: from what the operator wants (a VipSpec) and what the
// agent observes (health, slow-start and rate-limit factors) to the weights a
// VIP's next Maglev table is built from. Pure logic, no I/O, no clock.
//
// Rules (docs/architecture.md, "Effective weights"):
//  - disabled backends are gone; drained backends take no new flows (their
//    established flows stay through the connection table);
//  - only healthy backends take new flows, unless the VIP is in panic;
//  - panic: the healthy share of the active backends' configured weight is
//    strictly below the VIP's threshold; then every active backend takes
//    traffic, health ignored. A threshold of 0 never panics: with no healthy
//    backend the table is empty and the VIP's packets are dropped (counted);
//  - a backend without a verdict yet counts as healthy only in the sense that
//    the VIP is in panic until every verdict is in (startup panic), which the
//    plan reports instead of hiding;
//  - slow start and rate-limit bias arrive as a factor in (0, 1] that scales
//    the configured weight.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "xlb/config/model.h"

namespace xlb::control {

enum class Health { kUnknown, kHealthy, kUnhealthy };
const char* to_string(Health);

struct ObservedBackend {
    Health health = Health::kUnknown;
    double weight_factor = 1.0;  // slow start x rate-limit bias, in (0, 1]
    // This host's own verdict: the same as `health` unless the table
    // follows the fleet's (health_consensus), which may differ. Shown, never
    // planned from.
    Health local_health = Health::kUnknown;
};

// Multiplier from configured to effective weight: keeps a factor of 0.1 on a
// weight of 1 distinguishable from 0.
inline constexpr std::uint32_t kWeightScale = 100;

enum class PanicReason { kNone, kBelowThreshold, kAwaitingFirstVerdicts };
const char* to_string(PanicReason);

struct PlannedBackend {
    std::size_t spec_index = 0;          // index into VipSpec::backends
    std::string identity;                // Maglev key (BackendSpec::identity())
    std::uint32_t effective_weight = 0;  // 0: not in the next table
    bool in_table = false;
    bool live = true;  // false: its established flows must move
};

struct VipPlan {
    std::vector<PlannedBackend> backends;  // same order as VipSpec::backends
    PanicReason panic = PanicReason::kNone;
    double healthy_share = 0.0;  // of the active backends' configured weight
    bool in_panic() const { return panic != PanicReason::kNone; }
    // What the table is built from: identities and weights of in_table members.
    bool same_table_inputs(const VipPlan& other) const;
    // The same identities in the table, whatever their weights: a change
    // between two such plans (a slow-start step, a weight) is weight-only.
    bool same_table_members(const VipPlan& other) const;
};

// `observed` is indexed like spec.backends. A VIP without a health check has
// every backend healthy by definition (the caller passes kHealthy).
// `starting`: the VIP has not yet had a verdict for every active backend;
// until then unknown backends put it in panic. Afterwards a backend without
// a verdict (one added at runtime) waits outside the table for its first.
VipPlan plan_vip(const config::VipSpec& spec, const std::vector<ObservedBackend>& observed,
                 bool starting);
// The same, with every backend's address already in text form
// (address_texts[i] == spec.backends[i].address.to_string()): the reconciler
// keeps those between plans instead of formatting thousands on every one.
VipPlan plan_vip(const config::VipSpec& spec, const std::vector<ObservedBackend>& observed,
                 bool starting, std::span<const std::string> address_texts);

}  // namespace xlb::control
