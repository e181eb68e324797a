// SPDX-License-Identifier: Apache-2.0
// The JSON gateway's encoding: keys and values in base64, int64 fields as
// JSON strings, fields at their default value left out (a missing
// "succeeded" is false, a missing event "type" is PUT).
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>

#include "xlb/etcd/client.h"

namespace xlb::etcd::codec {

std::string base64_encode(std::string_view bytes);
// nullopt when `text` is not base64.
std::optional<std::string> base64_decode(std::string_view text);

// The decoders throw std::runtime_error (or nlohmann's exceptions) on an
// answer of the wrong shape; the caller turns that into an Error.

// A string or a number; 0 when absent.
std::int64_t int64_field(const nlohmann::json& object, const char* name);
// A base64 field, decoded; empty when absent.
std::string bytes_field(const nlohmann::json& object, const char* name);
KeyValue key_value(const nlohmann::json& kv);
// header.revision of an answer.
std::int64_t header_revision(const nlohmann::json& answer);
// The kvs of a RangeResponse.
std::vector<KeyValue> kvs(const nlohmann::json& range_response);

// A RangeRequest for one key, or every key under a prefix.
nlohmann::json range_request(std::string_view key, bool prefix, std::int64_t revision);
nlohmann::json request_op(const Op& op);
nlohmann::json compare(const Compare& compare);

// The error an etcd answer carries: {"error": "text"} or {"error": {"message":
// "text", ...}}, or {"message": ...}; empty when it carries none.
std::string error_text(const nlohmann::json& answer);

}  // namespace xlb::etcd::codec
