// SPDX-License-Identifier: Apache-2.0
#include "xlb/health/types.h"

#include <iterator>

#include "xlb/names.h"

namespace xlb::health {

namespace {

// Indexed by Verdict, in its order.
constexpr std::string_view kVerdicts[] = {"unknown", "healthy", "unhealthy"};
static_assert(std::size(kVerdicts) == static_cast<std::size_t>(Verdict::kUnhealthy) + 1);
// Indexed by Failure, in its order.
constexpr std::string_view kFailures[] = {
    "none",         "refused", "timeout",       "reset",          "unreachable", "closed",
    "bad_response", "status",  "body_mismatch", "reply_mismatch", "local",       "tls"};
static_assert(std::size(kFailures) == static_cast<std::size_t>(Failure::kTls) + 1);
static_assert(std::size(kFailures) == kFailureKinds);

}  // namespace

const char* to_string(Verdict v) { return name_at(v, kVerdicts); }
const char* to_string(Failure f) { return name_at(f, kFailures); }

std::string TargetKey::to_string() const { return vip + " " + backend.to_string(); }

}  // namespace xlb::health
