// SPDX-License-Identifier: Apache-2.0
// Reading and validating the YAML configuration file (schema: docs/config.md).
//
// parse_config() reports every problem it finds, not just the first, each
// with the file, the line and column of the offending node, the key path,
// what was found and what was expected:
//
//   xlbd.yaml:12:14: vips[0].port: found "http", expected an integer 0-65535 (0 = every port)
//
// There is one set of rules. The structural checks (required and unknown
// keys, types, enum names) belong to the reader; every semantic check lives
// in validate_config() / validate_vip(), which parse_config() runs on what it
// read and which the API runs on runtime changes.
#pragma once

#include <sys/un.h>

#include <cstddef>
#include <expected>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "xlb/config/model.h"

namespace xlb::config {

struct ConfigError {
    std::string file;
    int line = 0;         // 1-based; 0: not tied to a position (e.g. unreadable file)
    int column = 0;       // 1-based
    std::string message;  // "vips[0].port: found \"http\", expected ..."

    // "FILE:LINE:COL: message" (or "FILE: message" without a position).
    std::string to_string() const;
    bool operator==(const ConfigError&) const = default;
};

// The longest path a Unix socket address holds: sun_path less its NUL
// (107 bytes on Linux). api.socket is checked against it.
inline constexpr std::size_t kMaxSocketPathBytes = sizeof(sockaddr_un{}.sun_path) - 1;

// An error message shows at most this many bytes of a value it echoes.
inline constexpr std::size_t kShownValueBytes = 48;

// A value as an error message shows it (every echo of a name, key, path or
// text goes through here): between `quote` characters, control characters
// escaped (\n, \t, \x00), and, when that is longer than kShownValueBytes,
// cut there (never inside a UTF-8 character) and followed by the value's
// size: "aaaa...aaaa"… (10485760 bytes). A 10 MB value gives a short line.
std::string shown_value(std::string_view value, char quote = '"');

// Reads and validates a YAML file. On failure: every error, in file order.
std::expected<Config, std::vector<ConfigError>> load_config_file(const std::string& path);

// The same for text already in memory; `source_name` is the file name used in
// the errors.
std::expected<Config, std::vector<ConfigError>> parse_config(std::string_view yaml,
                                                             const std::string& source_name);

// xlbctl's own file (/etc/xlb/xlbctl.yaml): a mapping with one key, fleet:,
// decoded and checked exactly as xlbd's fleet: section (the same keys,
// rules and messages, with file:line:column).
std::expected<FleetSettings, std::vector<ConfigError>> parse_client_config(
    std::string_view yaml, const std::string& source_name);
std::expected<FleetSettings, std::vector<ConfigError>> load_client_config(const std::string& path);

// What a file needs before an agent runs with it, beyond being valid: a
// hash_seed of its own. There is no default seed (one built in would be the
// same, readable value on every install, and a client that knows the seed
// can aim flows at one backend). An error naming `xlbctl gen-seed` when the
// file sets none; nullopt when it does. xlbd checks it at start, on
// --check-config and on every reload.
std::optional<ConfigError> missing_hash_seed(const Config& config, const std::string& source_name);

// A semantic problem, located by key path rather than by line.
struct ValidationIssue {
    // Relative to what was validated: "ring_size", "backends[2].weight" for
    // validate_vip(); "mtu", "vips[1].health_check.timeout" for validate_config().
    std::string path;
    std::string message;  // what is wrong and what is expected, without the path

    std::string to_string() const;  // "path: message"
    bool operator==(const ValidationIssue&) const = default;
};

// The checks of one VIP on its own against the global settings: ranges,
// backends (weights, duplicates, families, encapsulation source), ring size,
// health check, slow start, MTU. Empty: valid.
std::vector<ValidationIssue> check_vip(const VipSpec& vip, const Settings& settings);
// The same as "path: message" strings, for API error bodies.
std::vector<std::string> validate_vip(const VipSpec& vip, const Settings& settings);

// The issues of `vip` joining `others` under `settings`, checked as a file
// is (the rules across VIPs included), with paths relative to the VIP (""
// for the VIP itself, "backends[0].weight"); issues of the settings or of
// the other VIPs are left out: not this VIP's doing. What a change of one
// VIP is checked with, through the API or in a fleet's store.
std::vector<ValidationIssue> check_vip_among(const VipSpec& vip, const std::vector<VipSpec>& others,
                                             const Settings& settings);

// Everything: the settings, every VIP (as check_vip), and the rules across
// VIPs (duplicate keys and names, maps.max_vips, maps.max_backends). The API
// should check a whole candidate configuration (current state plus the
// change) with this before applying a change.
std::vector<ValidationIssue> check_config(const Config& config);
std::vector<std::string> validate_config(const Config& config);
// The fleet: section alone, as check_config checks it ("fleet.endpoints[0]: ...").
std::vector<ValidationIssue> check_fleet(const FleetSettings& fleet);

// A YAML document that parse_config() reads back to an equal Config: every
// key written out, defaults included: the effective configuration, for
// showing to an operator and for tests.
std::string to_yaml(const Config& config);

}  // namespace xlb::config
