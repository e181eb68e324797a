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
// "2026-12-01T17:45:42.250Z": the same to the millisecond, for events that
// may follow each other within a second (the health history, publishes).
std::string utc_text_ms(std::chrono::system_clock::time_point at);
// A checksum as the API and a fleet's keys spell it: 16 lower-case hex
// digits ("5bf6441c8ac68df2").
std::string hex64(std::uint64_t value);

// One VIP as /v1/status lists it: its summary, inputs_checksum and the
// table_inputs it covers, its announcement, its health_consensus (as in
// effect on a fleet's host, `fleet_host`, or elsewhere) and each backend's
// health as the table has it (backend_health_json).
nlohmann::json vip_status_json(const control::VipStatus& vip, std::uint32_t hash_seed,
                               const std::optional<BgpInfo>& bgp, bool fleet_host);
// Each backend of the VIP: [{address, health, local_health, weight_factor}],
// the verdict the table follows, this host's own (they differ under a
// fleet's consensus) and the factor its weight is scaled by (slow start x
// rate-limit bias), worded as GET /v1/backends words them.
nlohmann::json backend_health_json(const control::VipStatus& vip);
// The "fleet" object of /v1/status.
nlohmann::json fleet_json(const FleetInfo& fleet);

}  // namespace xlb::api
