// SPDX-License-Identifier: Apache-2.0
// The per-VIP settings of the configuration file as options of `vip add` and
// `vip set`: one option per key, named after its path in the file
// ("health_check.interval" -> --health-check.interval), taken from the
// config library's own JSON form of a VIP, so that every key the file has is
// an option. Values are typed as the file's keys are, then decoded and
// checked by the config library (config::vip_from_json, config::check_vip):
// the same rules and messages as the file, with the option named.
#pragma once

#include <expected>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace xlb::xlbctl {

struct VipSetting {
    std::string path;       // "health_check.interval"
    std::string option;     // "--health-check.interval"
    std::string type_name;  // DUR, N, NUM, true|false, LIST, TEXT
    std::string help;       // the default, and the accepted words of an enum
};

// Every per-VIP key of the file but the VIP's key (address, port, protocol)
// and its backends, in the order of the VIP object.
const std::vector<VipSetting>& vip_settings();

// The option of a path, or of the nearest setting above it ("" if none):
// "health_check.expected_statuses[1]" -> "--health-check.expected-statuses".
std::string option_of(const std::string& path);

// The given settings (path, text as typed) as a JSON object nested like the
// VIP object, each value typed as the file's key is (a number, true/false, a
// list split at commas, or a string); a text that is not of the key's type
// stays a string, for the decoder to name.
nlohmann::json settings_object(const std::vector<std::pair<std::string, std::string>>& given);

// A decoder's or validator's message with each path it starts with, or that
// follows "; ", written as its option: "health_check.interval: found ..." ->
// "--health-check.interval: found ...".
std::string with_options(const std::string& message);

}  // namespace xlb::xlbctl
