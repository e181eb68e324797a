// SPDX-License-Identifier: Apache-2.0
// Internal to xlb_api: a reload's report as the API answers it and as
// /v1/status shows the last one (docs/api.md, "Reloads").
#pragma once

#include <nlohmann/json.hpp>

#include "xlb/api/services.h"
#include "xlb/api/status_json.h"

namespace xlb::api::detail {

using api::utc_text;
using api::utc_text_ms;

// The whole report: result, error, errors, what changed, disruptive changes.
nlohmann::json reload_report_json(const ReloadReport& report);
// The short form for /v1/status: time, source, result, error.
nlohmann::json last_reload_json(const ReloadReport& report);
// 200 applied; 422 invalid file; 409 disruptive and not confirmed; 500 failed.
int reload_http_status(ReloadReport::Outcome outcome);

}  // namespace xlb::api::detail
