// SPDX-License-Identifier: Apache-2.0
#include "xlb/announce/policy.h"

#include <algorithm>
#include <iterator>
#include <map>

#include "xlb/names.h"

namespace xlb::announce {

namespace {
// Indexed by Policy, in its order.
constexpr std::string_view kPolicies[] = {"when_serving", "always", "never"};
static_assert(std::size(kPolicies) == static_cast<std::size_t>(Policy::kNever) + 1);
// Indexed by Reason, in its order.
constexpr std::string_view kReasons[] = {"serving",       "policy_always", "no_serving_backend",
                                         "not_published", "host_drained",  "policy_never",
                                         "behind_fleet"};
static_assert(std::size(kReasons) == static_cast<std::size_t>(Reason::kBehindFleet) + 1);
}  // namespace

std::string_view to_string(Policy p) { return name_at(p, kPolicies); }
std::optional<Policy> parse_policy(std::string_view text) {
    return value_at<Policy>(text, kPolicies);
}
std::string_view to_string(Reason r) { return name_at(r, kReasons); }

Verdict decide(const VipInput& vip, bool host_drained, const std::string& behind) {
    // Drain first: an operator draining a host wants every route gone,
    // `always` included, or the maintenance procedure would leak traffic.
    if (host_drained)
        return {false, Reason::kHostDrained,
                "the host is drained (xlbctl host resume announces again)"};
    if (vip.policy != Policy::kNever && !behind.empty())
        return {false, Reason::kBehindFleet, behind};
    switch (vip.policy) {
        case Policy::kNever: return {false, Reason::kPolicyNever, "announce policy is never"};
        case Policy::kAlways: return {true, Reason::kPolicyAlways, "announce policy is always"};
        case Policy::kWhenServing: break;
    }
    if (!vip.table_live) return {false, Reason::kNotPublished, "no table of this VIP is live yet"};
    if (vip.serving_backends == 0) {
        std::string detail = "no backend takes new flows";
        if (vip.configured_backends == 0)
            detail = "the VIP has no backend";
        else
            detail +=
                " (" + std::to_string(vip.configured_backends) + " configured, none in the table)";
        return {false, Reason::kNoServingBackend, std::move(detail)};
    }
    std::string detail = std::to_string(vip.serving_backends) + " of " +
                         std::to_string(std::max(vip.configured_backends, vip.serving_backends)) +
                         " backends take new flows";
    if (vip.in_panic) detail += " (in panic: health ignored)";
    return {true, Reason::kServing, std::move(detail)};
}

const std::vector<VipDecision>& DecisionTable::update(const HostInput& input, TimePoint now) {
    std::map<std::string, const VipDecision*> previous;
    for (const auto& d : decisions_) previous.emplace(d.key, &d);

    std::vector<VipDecision> next;
    next.reserve(input.vips.size());
    for (const auto& vip : input.vips) {
        Verdict v = decide(vip, input.drained, input.behind);
        VipDecision d{vip.key,  vip.address,         vip.policy, v.announced,
                      v.reason, std::move(v.detail), now};
        if (auto it = previous.find(vip.key); it != previous.end()) {
            const VipDecision& before = *it->second;
            if (before.announced == d.announced && before.reason == d.reason)
                d.since = before.since;
        }
        next.push_back(std::move(d));
    }
    std::sort(next.begin(), next.end(),
              [](const VipDecision& a, const VipDecision& b) { return a.key < b.key; });
    // Two inputs with one key would make `since` depend on their order.
    next.erase(
        std::unique(next.begin(), next.end(),
                    [](const VipDecision& a, const VipDecision& b) { return a.key == b.key; }),
        next.end());
    decisions_ = std::move(next);
    return decisions_;
}

std::vector<net::IpAddress> routes_of(const std::vector<VipDecision>& decisions) {
    std::vector<net::IpAddress> out;
    for (const auto& d : decisions)
        if (d.announced) out.push_back(d.address);
    std::sort(out.begin(), out.end());
    out.erase(std::unique(out.begin(), out.end()), out.end());
    return out;
}

}  // namespace xlb::announce
