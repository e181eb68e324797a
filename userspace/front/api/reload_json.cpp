// SPDX-License-Identifier: Apache-2.0
#include "reload_json.h"

#include <cstdio>
#include <ctime>

namespace xlb::api {

const char* to_string(ReloadReport::Outcome outcome) {
    switch (outcome) {
        case ReloadReport::Outcome::kApplied: return "applied";
        case ReloadReport::Outcome::kInvalid: return "invalid";
        case ReloadReport::Outcome::kDisruptiveRefused: return "disruptive_refused";
        case ReloadReport::Outcome::kFailed: return "failed";
    }
    return "failed";
}

std::string utc_text(std::chrono::system_clock::time_point at) {
    const std::time_t t = std::chrono::system_clock::to_time_t(at);
    std::tm utc{};
    ::gmtime_r(&t, &utc);
    char text[32];
    std::strftime(text, sizeof(text), "%Y-%m-%dT%H:%M:%SZ", &utc);
    return text;
}

std::string utc_text_ms(std::chrono::system_clock::time_point at) {
    const auto seconds = std::chrono::floor<std::chrono::seconds>(at);
    const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(at - seconds).count();
    std::string text = utc_text(seconds);
    char fraction[8];
    std::snprintf(fraction, sizeof(fraction), ".%03d", static_cast<int>(ms));
    text.insert(text.size() - 1, fraction);  // before the Z
    return text;
}

namespace detail {

nlohmann::json last_reload_json(const ReloadReport& r) {
    return {{"time", utc_text(r.at)},
            {"source", r.source},
            {"result", to_string(r.outcome)},
            {"error", r.error.empty() ? nlohmann::json(nullptr) : nlohmann::json(r.error)}};
}

nlohmann::json reload_report_json(const ReloadReport& r) {
    nlohmann::json out = last_reload_json(r);
    out["errors"] = r.errors;
    out["added"] = r.added;
    out["removed"] = r.removed;
    out["changed"] = r.changed;
    out["untouched"] = r.untouched;
    out["settings_changed"] = r.settings_changed;
    out["restart_required"] = r.restart_required;
    out["disruptive"] = r.disruptive;
    out["warnings"] = r.warnings;
    if (r.dry_run) {
        out["dry_run"] = true;
        out["differences"] = r.differences;
    }
    return out;
}

int reload_http_status(ReloadReport::Outcome outcome) {
    switch (outcome) {
        case ReloadReport::Outcome::kApplied: return 200;
        case ReloadReport::Outcome::kInvalid: return 422;
        case ReloadReport::Outcome::kDisruptiveRefused: return 409;
        case ReloadReport::Outcome::kFailed: return 500;
    }
    return 500;
}

}  // namespace detail
}  // namespace xlb::api
