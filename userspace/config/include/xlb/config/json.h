// SPDX-License-Identifier: Apache-2.0
// JSON forms of the desired-state types, for the API (request and response
// bodies) and the state file. Field names and value forms are those of the
// YAML file (docs/config.md): enums by name, durations as strings ("2s"),
// statuses as 301 or "200-299". Encoding writes every field, defaults
// included; decoding fills missing optional fields with the defaults.
//
// Decoding checks structure only (unknown fields, types, enum names, required
// fields) and rejects with a message naming the field, e.g.
//   backends[0].weight: found "heavy", expected an integer 0-10000
// Semantic rules (ranges, duplicates, ring size, ...) are check_vip() and
// check_config() in config.h: run them on the decoded value.
#pragma once

#include <chrono>
#include <cstdint>
#include <expected>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "xlb/config/model.h"
#include "xlb/net/address.h"

namespace xlb::config {

// Found by nlohmann's ADL: `nlohmann::json j = vip;` works.
void to_json(nlohmann::json& j, const StatusRange& range);
void to_json(nlohmann::json& j, const HealthCheck& check);
void to_json(nlohmann::json& j, const SlowStart& slow_start);
void to_json(nlohmann::json& j, const BackendSpec& backend);
void to_json(nlohmann::json& j, const VipSpec& vip);

// On failure: every problem found, "; "-separated, each "field: found X,
// expected Y" (field paths relative to the decoded object).
std::expected<VipSpec, std::string> vip_from_json(const nlohmann::json& j);
std::expected<BackendSpec, std::string> backend_from_json(const nlohmann::json& j);
std::expected<HealthCheck, std::string> health_check_from_json(const nlohmann::json& j);
std::expected<SlowStart, std::string> slow_start_from_json(const nlohmann::json& j);

// A change to one existing backend (PATCH /v1/backends): at least one of
// weight, state and cookie_acks. The errors name the field as
// backend_from_json does ("weight: found -1, expected an integer 0-10000");
// an unknown field or an empty object is refused with kBackendPatchExpected.
struct BackendPatch {
    std::optional<std::uint32_t> weight;
    std::optional<AdminState> state;
    std::optional<bool> cookie_acks;
    // Outer: given; inner: the id, or nullopt (JSON null) to clear it.
    std::optional<std::optional<std::uint64_t>> server_id;
};
inline constexpr std::string_view kBackendPatchExpected =
    "an object with \"weight\" (0-10000), \"state\" (active, drain or disabled), "
    "\"cookie_acks\" (true or false) and/or \"server_id\" (an integer, or null to clear it), "
    "e.g. {\"weight\": 50}";
std::expected<BackendPatch, std::string> backend_patch_from_json(const nlohmann::json& j);

// What a packet capture selects and how long it runs (POST /v1/capture);
// every key optional. The VIP key is parsed (parse_vip_key) but not looked
// up; outcome words are left to the capture library, which knows them.
struct CaptureRequest {
    std::optional<VipKey> vip;
    std::optional<net::IpAddress> backend;
    std::optional<net::Prefix> src;
    std::vector<std::string> outcomes;  // empty: every outcome
    std::optional<std::uint64_t> count;
    std::optional<std::chrono::milliseconds> duration;
    std::optional<std::uint32_t> snaplen;
};
inline constexpr std::uint64_t kMaxCaptureCount = 1'000'000'000;
inline constexpr std::uint64_t kMaxCaptureDurationMs = 7ULL * 24 * 3600 * 1000;
// max_snaplen: the data path's largest snap length.
std::expected<CaptureRequest, std::string> capture_request_from_json(const nlohmann::json& j,
                                                                     std::uint32_t max_snaplen);

// The state file's list of VIPs: a JSON array of VIP objects; error paths
// start with the index ("[2].backends[0].address: ...").
nlohmann::json vips_to_json(const std::vector<VipSpec>& vips);
std::expected<std::vector<VipSpec>, std::string> vips_from_json(const nlohmann::json& j);

// The global settings as JSON (for status output; YAML key layout, encode
// only: settings come from the file).
nlohmann::json settings_to_json(const Settings& settings);

// The fleet-wide settings (the store's desired/global "settings" object):
// hash_seed, icmp_too_big, encap, gue_port, second_chance, health_history.
// Decoding requires hash_seed and leaves every other setting at its default.
nlohmann::json fleet_wide_to_json(const Settings& settings);
std::expected<Settings, std::string> fleet_wide_from_json(const nlohmann::json& j);

// A change of a VIP's settings as PATCH /v1/vip and `xlbctl vip set` make
// it: `patch` merged into `target` key by key, objects recursively (a JSON
// merge patch, RFC 7396, without null meaning removal).
void merge_patch(nlohmann::json& target, const nlohmann::json& patch);
// What changed between two VIPs' settings (backends left out), leaf by leaf
// by dotted path: [{"key", "from", "to"}] (null: not set, e.g.
// conntrack_idle_timeout back to its default).
nlohmann::json vip_settings_changes(const VipSpec& was, const VipSpec& now);

}  // namespace xlb::config
