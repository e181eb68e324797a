// SPDX-License-Identifier: Apache-2.0
// Internal to xlb_api: the host's announcements as /v1/status and /v1/host
// show them (docs/api.md, "BGP announcements").
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "xlb/api/services.h"

namespace xlb::api::detail {

// {"drained": bool, "since": time|null}
nlohmann::json host_json(const HostState& host);
// The "bgp" object of /v1/status: enabled, the host, BIRD, the routes.
nlohmann::json bgp_json(const HostState& host, const std::optional<BgpInfo>& bgp);
// A VIP's "announcement": policy, state (announced|withdrawn), reason,
// detail, since; null when BGP is off or the announcer has not seen the VIP.
nlohmann::json announcement_json(const std::optional<BgpInfo>& bgp, const std::string& vip_key);

}  // namespace xlb::api::detail
