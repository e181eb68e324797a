// SPDX-License-Identifier: Apache-2.0
// Rendering of the agent's replies: human text (aligned tables, units,
// optional colour) and xlbctl's JSON (docs/xlbctl.md). Pure functions of the
// reply, so that tests render canned JSON.
#pragma once

#include <chrono>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "xlb/xlbctl/command.h"
#include "xlb/xlbctl/format.h"

namespace xlb::xlbctl {

using json = nlohmann::json;

// The human text for a successful reply to `command` (ends with a newline).
// Throws json::exception when the reply lacks a field it needs (the caller
// reports a malformed reply).
std::string render_human(const Command& command, const json& reply, const Style& style);

// The --json document for a successful reply: the reply itself (its fields
// are the API's, documented and stable), pretty-printed, ending with a newline.
std::string render_json(const json& reply);

// For a change answered 202 (persisted, not live yet): the warning line, or
// "" when the reply says the change is live.
std::string pending_warning(const Command& command, const json& reply);

// stats --watch: one refresh from two samples of GET /v1/stats taken
// `seconds` apart. The result is the later sample with rates added:
//   "time" (RFC 3339, UTC, from `time_utc`), "interval_s",
//   "outcomes_per_s" {name: rate}, and in each element of "vips"
//   "packets_per_s", "bytes_per_s", "bits_per_s", "new_flows_per_s",
//   "conntrack_hits_per_s", "drops_per_s" (null when a counter is null in
//   either sample; 0 when a counter went backwards, e.g. maps recreated).
json watch_sample(const json& before, const json& after, double seconds,
                  const std::string& time_utc);
// status --peers: compares the `status` replies of several LB hosts, the
// first being this one ({name, reply} each). Per VIP: present everywhere,
// the same table inputs (seed, ring size, hash, backends' identities,
// addresses, weights, states) and the same table checksum; the hosts outside
// the largest group of agreeing hosts are named with the field that differs
// (inputs, else a backend's health, else its weight factor). The result:
//   {"agree": bool, "state": "agree"|"agree_local_differs"|"differ",
//    "hosts": [names], "unknown": [text],
//    "vips": [{"vip", "agree", "state", "checksum", "health_consensus",
//              "problems": [text], "notes": [text],
//              "health_disagreements": [{"host", "backend", "local_health", "health"}],
//              "publish_spread_seconds": number|null}]}
// where a problem starts with the name of the host that differs.
json compare_peers(const std::vector<std::pair<std::string, json>>& hosts);
std::string render_peers(const json& comparison, const Style& style);
// "2026-12-06T14:03:07.123Z" -> a time point, the fraction kept (an offset
// is ignored: the agent writes UTC); nullopt when it is no such text.
std::optional<std::chrono::system_clock::time_point> parse_utc(const std::string& text);

// The human form of watch_sample()'s result.
std::string render_watch(const json& sample, const Style& style);

// top: every VIP (from GET /v1/stats) with its backends (from GET
// /v1/backends), the counters of the second pair of replies and their rates
// since the first, `seconds` earlier. Effective weights on the configured
// weight's scale.
json top_sample(const json& backends_before, const json& stats_before, const json& backends_after,
                const json& stats_after, double seconds, const std::string& time_utc);
// Its human form; with `rows`, no more lines than the terminal has; with
// `columns`, no line wider than it: the least needed columns are left out
// first (name, slots, effective weight, weight, new flows, drops, state,
// throughput), and what still does not fit is cut.
std::string render_top(const json& sample, const Style& style, std::optional<int> rows,
                       std::optional<int> columns = std::nullopt);

}  // namespace xlb::xlbctl
