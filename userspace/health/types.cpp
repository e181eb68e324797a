// SPDX-License-Identifier: Apache-2.0
#include "xlb/health/types.h"

#include "xlb/names.h"

namespace xlb::health {

namespace {

constexpr EnumName<Verdict> kVerdicts[] = {{"unknown", Verdict::kUnknown},
                                           {"healthy", Verdict::kHealthy},
                                           {"unhealthy", Verdict::kUnhealthy}};
constexpr EnumName<Failure> kFailures[] = {{"none", Failure::kNone},
                                           {"refused", Failure::kRefused},
                                           {"timeout", Failure::kTimeout},
                                           {"reset", Failure::kReset},
                                           {"unreachable", Failure::kUnreachable},
                                           {"closed", Failure::kClosed},
                                           {"bad_response", Failure::kBadResponse},
                                           {"status", Failure::kStatus},
                                           {"body_mismatch", Failure::kBodyMismatch},
                                           {"reply_mismatch", Failure::kReplyMismatch},
                                           {"local", Failure::kLocal}};

}  // namespace

const char* to_string(Verdict v) { return name_of(v, kVerdicts); }
const char* to_string(Failure f) { return name_of(f, kFailures); }

std::string TargetKey::to_string() const { return vip + " " + backend.to_string(); }

}  // namespace xlb::health
