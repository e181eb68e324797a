// SPDX-License-Identifier: Apache-2.0
#include "xlb/health/transition.h"

#include <iterator>
#include <string_view>

#include "xlb/names.h"

namespace xlb::health {

namespace {

// Indexed by Cause, in its order.
constexpr std::string_view kCauses[] = {"consecutive_successes", "consecutive_failures",
                                        "success_rate"};
static_assert(std::size(kCauses) == static_cast<std::size_t>(Cause::kSuccessRate) + 1);
// Indexed by Hold, in its order.
constexpr std::string_view kHolds[] = {"none", "failure_accrual", "flapping"};
static_assert(std::size(kHolds) == static_cast<std::size_t>(Hold::kFlapping) + 1);

}  // namespace

const char* to_string(Cause c) { return name_at(c, kCauses); }
const char* to_string(Hold h) { return name_at(h, kHolds); }

std::string Transition::reason() const {
    std::string s = detail;
    if (!hold_detail.empty()) s += "; " + hold_detail;
    if (slow_start) s += "; slow start";
    return s;
}

std::string Transition::to_string() const {
    return std::string(health::to_string(from)) + " -> " + health::to_string(to) + ": " + reason();
}

}  // namespace xlb::health
