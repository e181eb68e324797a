// SPDX-License-Identifier: Apache-2.0
// A change of a backend's verdict and why it happened: what the state
// machine (backend_health.h) reports, the agent logs, and the health history
// (history.h) keeps.
#pragma once

#include <cstdint>
#include <string>

#include "xlb/health/types.h"

namespace xlb::health {

// What turned a backend healthy or unhealthy.
enum class Cause : std::uint8_t {
    kConsecutiveSuccesses,  // "consecutive_successes"
    kConsecutiveFailures,   // "consecutive_failures"
    kSuccessRate,           // "success_rate" (failure accrual)
};
const char* to_string(Cause);

enum class Hold : std::uint8_t {
    kNone,            // "none"
    kFailureAccrual,  // "failure_accrual"
    kFlapping,        // "flapping"
};
const char* to_string(Hold);

// A change of verdict, with its reason (for logs, metrics and the API).
struct Transition {
    TimePoint at{};
    // `at` by the wall clock (ProbeResult::finished_wall of the probe that
    // caused it): what the health history shows operators.
    WallTime wall_time{};
    Verdict from = Verdict::kUnknown;
    Verdict to = Verdict::kUnknown;
    Cause cause = Cause::kConsecutiveSuccesses;
    // The outcome of the probe that caused it: kNone (passed) or why it failed.
    Failure probe = Failure::kNone;
    // "2 consecutive failures, last: connection refused",
    // "success rate 40% (2 of 5 probes in 10s) below 80%".
    std::string detail;
    // to == kUnhealthy: not back before held_until (time_point{} if no hold).
    Hold hold = Hold::kNone;
    TimePoint held_until{};
    std::string hold_detail;  // "ejection 3: held out 4.6s", "5 changes in 5m: held out 5m"
    // to == kHealthy: ramps from the slow-start floor.
    bool slow_start = false;

    // The detail with the hold and slow start: "2 consecutive successes; slow start".
    std::string reason() const;
    std::string to_string() const;  // one line: "unknown -> healthy: 2 consecutive successes"
};

}  // namespace xlb::health
