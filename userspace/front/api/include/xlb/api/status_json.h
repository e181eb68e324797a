// SPDX-License-Identifier: Apache-2.0
// Pieces of GET /v1/status that a fleet's host also writes into its host
// record (docs/fleet.md), so that `xlbctl fleet status` compares hosts on
// the same fields `xlbctl status --peers` does.
#pragma once

#include <chrono>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "xlb/api/services.h"
#include "xlb/control/reconciler.h"

namespace xlb::api {

// "2026-12-01T17:45:42Z": the API's one spelling of a wall-clock time.
std::string utc_text(std::chrono::system_clock::time_point at);

// One VIP as /v1/status lists it: its summary, inputs_checksum and the
// table_inputs it covers, and its announcement.
nlohmann::json vip_status_json(const control::VipStatus& vip, std::uint32_t hash_seed,
                               const std::optional<BgpInfo>& bgp);
// Each backend of the VIP and its health verdict ([{address, health}]), as
// GET /v1/backends words it: what a fleet's host record adds per VIP.
nlohmann::json backend_health_json(const control::VipStatus& vip);
// The "fleet" object of /v1/status.
nlohmann::json fleet_json(const FleetInfo& fleet);

}  // namespace xlb::api
