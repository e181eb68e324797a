// SPDX-License-Identifier: Apache-2.0
#include "xlb/health/types.h"

namespace xlb::health {

const char* to_string(Verdict v) {
    switch (v) {
        case Verdict::kUnknown:
            return "unknown";
        case Verdict::kHealthy:
            return "healthy";
        case Verdict::kUnhealthy:
            return "unhealthy";
    }
    return "?";
}

const char* to_string(Failure f) {
    switch (f) {
        case Failure::kNone:
            return "none";
        case Failure::kRefused:
            return "refused";
        case Failure::kTimeout:
            return "timeout";
        case Failure::kReset:
            return "reset";
        case Failure::kUnreachable:
            return "unreachable";
        case Failure::kClosed:
            return "closed";
        case Failure::kBadResponse:
            return "bad_response";
        case Failure::kStatus:
            return "status";
        case Failure::kBodyMismatch:
            return "body_mismatch";
        case Failure::kReplyMismatch:
            return "reply_mismatch";
        case Failure::kLocal:
            return "local";
    }
    return "?";
}

std::string TargetKey::to_string() const { return vip + " " + backend.to_string(); }

}  // namespace xlb::health
