// SPDX-License-Identifier: Apache-2.0
// Internal: durations and shares as the detail texts show them.
#pragma once

#include <chrono>
#include <cstdio>
#include <string>

namespace xlb::health::detail {

// "250ms", "4.6s", "90s", "5m".
inline std::string human(std::chrono::nanoseconds d) {
    using namespace std::chrono;
    char buf[32];
    const auto ms = duration_cast<milliseconds>(d).count();
    if (ms < 1000) {
        std::snprintf(buf, sizeof(buf), "%lldms", static_cast<long long>(ms));
    } else if (ms % 60'000 == 0) {
        std::snprintf(buf, sizeof(buf), "%lldm", static_cast<long long>(ms / 60'000));
    } else if (ms % 1000 == 0 || ms >= 60'000) {
        std::snprintf(buf, sizeof(buf), "%llds", static_cast<long long>((ms + 500) / 1000));
    } else {
        std::snprintf(buf, sizeof(buf), "%.1fs", static_cast<double>(ms) / 1000.0);
    }
    return buf;
}

inline std::string percent(double share) {
    char buf[16];
    std::snprintf(buf, sizeof(buf), "%.0f%%", share * 100.0);
    return buf;
}

}  // namespace xlb::health::detail
