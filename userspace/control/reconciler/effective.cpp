// SPDX-License-Identifier: Apache-2.0
#include "xlb/control/effective.h"

#include <cmath>
#include <iterator>
#include <limits>

#include "xlb/names.h"

namespace xlb::control {

namespace {

// Indexed by Health, in its order.
constexpr std::string_view kHealths[] = {"unknown", "healthy", "unhealthy"};
static_assert(std::size(kHealths) == static_cast<std::size_t>(Health::kUnhealthy) + 1);
// Indexed by PanicReason, in its order.
constexpr std::string_view kPanicReasons[] = {"none", "below_threshold", "awaiting_first_verdicts"};
static_assert(std::size(kPanicReasons) ==
              static_cast<std::size_t>(PanicReason::kAwaitingFirstVerdicts) + 1);

}  // namespace

const char* to_string(Health h) { return name_at(h, kHealths); }
const char* to_string(PanicReason r) { return name_at(r, kPanicReasons); }

namespace {

// Walks both member lists in step instead of copying them out (this runs on
// every plan, with thousands of backends); the weight is compared before the
// identity string because it is the cheap, usual difference.
bool same_members(const VipPlan& one, const VipPlan& other, bool compare_weights) {
    auto next_member = [](const std::vector<PlannedBackend>& backends, std::size_t i) {
        while (i < backends.size() && !backends[i].in_table) ++i;
        return i;
    };
    std::size_t a = next_member(one.backends, 0), b = next_member(other.backends, 0);
    while (a < one.backends.size() && b < other.backends.size()) {
        const PlannedBackend& mine = one.backends[a];
        const PlannedBackend& theirs = other.backends[b];
        if ((compare_weights && mine.effective_weight != theirs.effective_weight) ||
            mine.identity != theirs.identity)
            return false;
        a = next_member(one.backends, a + 1);
        b = next_member(other.backends, b + 1);
    }
    return a == one.backends.size() && b == other.backends.size();
}

}  // namespace

bool VipPlan::same_table_inputs(const VipPlan& other) const {
    return same_members(*this, other, /*compare_weights=*/true);
}

bool VipPlan::same_table_members(const VipPlan& other) const {
    return same_members(*this, other, /*compare_weights=*/false);
}

namespace {

std::uint32_t scaled_weight(std::uint32_t weight, double factor) {
    if (weight == 0) return 0;
    if (!(factor > 0.0)) return 0;
    if (factor > 1.0) factor = 1.0;
    double w = std::round(static_cast<double>(weight) * kWeightScale * factor);
    return w < 1.0 ? 1u : static_cast<std::uint32_t>(w);
}

// identity_of(i): spec.backends[i].identity(), however the caller gets it.
template <class IdentityOf>
VipPlan plan_with(const config::VipSpec& spec, const std::vector<ObservedBackend>& observed,
                  bool starting, IdentityOf identity_of) {
    using config::AdminState;
    VipPlan plan;
    plan.backends.resize(spec.backends.size());

    std::uint64_t active_weight = 0, healthy_weight = 0;
    bool awaiting = false;
    std::size_t active_count = 0;
    for (std::size_t i = 0; i < spec.backends.size(); ++i) {
        const config::BackendSpec& b = spec.backends[i];
        if (b.state != AdminState::kActive) continue;
        ++active_count;
        active_weight += b.weight;
        Health h = i < observed.size() ? observed[i].health : Health::kUnknown;
        if (h == Health::kHealthy) healthy_weight += b.weight;
        if (h == Health::kUnknown) awaiting = true;
    }
    plan.healthy_share = active_weight == 0 ? 0.0
                                            : static_cast<double>(healthy_weight) /
                                                  static_cast<double>(active_weight);
    if (active_count > 0 && awaiting && starting)
        plan.panic = PanicReason::kAwaitingFirstVerdicts;
    else if (active_count > 0 && spec.panic_threshold > 0.0 &&
             plan.healthy_share < spec.panic_threshold)
        plan.panic = PanicReason::kBelowThreshold;

    std::uint64_t total = 0;
    for (std::size_t i = 0; i < spec.backends.size(); ++i) {
        const config::BackendSpec& b = spec.backends[i];
        PlannedBackend& p = plan.backends[i];
        p.spec_index = i;
        p.identity = identity_of(i);
        const ObservedBackend o = i < observed.size() ? observed[i] : ObservedBackend{};
        switch (b.state) {
            case AdminState::kDisabled: p.live = false; continue;
            case AdminState::kDrain:
                p.live = true;  // established flows stay
                continue;
            case AdminState::kActive: break;
        }
        const bool healthy = o.health == Health::kHealthy;
        if (healthy || plan.in_panic()) {
            p.effective_weight = scaled_weight(b.weight, o.weight_factor);
            p.in_table = p.effective_weight > 0;
            p.live = true;
        } else {
            p.live = spec.on_unhealthy == config::UnhealthyPolicy::kKeep;
        }
        total += p.effective_weight;
    }

    // Maglev needs the sum inside 32 bits: shrink every weight by one divisor.
    const std::uint64_t limit = std::numeric_limits<std::uint32_t>::max();
    if (total > limit) {
        const std::uint64_t divisor = (total + limit - 1) / limit + 1;
        for (PlannedBackend& p : plan.backends)
            if (p.in_table)
                p.effective_weight = std::max<std::uint32_t>(
                    1, static_cast<std::uint32_t>(p.effective_weight / divisor));
    }
    return plan;
}

}  // namespace

VipPlan plan_vip(const config::VipSpec& spec, const std::vector<ObservedBackend>& observed,
                 bool starting) {
    return plan_with(spec, observed, starting,
                     [&](std::size_t i) { return spec.backends[i].identity(); });
}

VipPlan plan_vip(const config::VipSpec& spec, const std::vector<ObservedBackend>& observed,
                 bool starting, std::span<const std::string> address_texts) {
    return plan_with(spec, observed, starting, [&](std::size_t i) {
        return config::maglev_identity(address_texts[i], spec.backends[i].hash_key);
    });
}

}  // namespace xlb::control
