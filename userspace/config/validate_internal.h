// SPDX-License-Identifier: Apache-2.0
// Internal: the semantic checks, with what parse_config() needs to skip the
// consequences of a value it could not read (one mistake, one error).
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "xlb/config/config.h"

namespace xlb::config::detail {

// A semantic issue and the paths (absolute) whose values it was computed
// from, besides its own path. parse_config() drops an issue when its path or
// one of these had a structural error: the value there is a default standing
// in for what could not be read, and the operator already has an error for it.
struct Issue {
    ValidationIssue issue;
    std::vector<std::string> depends_on;
};

void check_config(const Config& config, std::vector<Issue>& out);
// The fleet: section alone (xlbctl's own file has nothing else).
void check_fleet_settings(const FleetSettings& fleet, std::vector<Issue>& out);

// True when one path is the other or contains it ("vips[0]" and
// "vips[0].port", "a.b" and "a.b[2]"), false otherwise ("a.b" and "a.bc").
bool related(std::string_view a, std::string_view b);

}  // namespace xlb::config::detail
