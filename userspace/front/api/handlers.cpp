// SPDX-License-Identifier: Apache-2.0
// What the API's handlers share: replies, query parameters, bodies, and the
// reconciler's status taken on the control thread.
#include "handlers.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <set>

#include "xlb/config/config.h"

namespace xlb::api::detail {
namespace {

// The offset of the first byte that is not part of well-formed UTF-8 (no
// overlong forms, no surrogates, nothing above U+10FFFF), or nullopt.
std::optional<std::size_t> invalid_utf8_at(std::string_view text) {
    const auto* p = reinterpret_cast<const unsigned char*>(text.data());
    const std::size_t n = text.size();
    std::size_t i = 0;
    while (i < n) {
        const unsigned char c = p[i];
        if (c < 0x80) {
            ++i;
            continue;
        }
        std::size_t len = 0;
        unsigned char lo = 0x80, hi = 0xBF;  // allowed range of the second byte
        if (c >= 0xC2 && c <= 0xDF)
            len = 2;
        else if (c == 0xE0)
            len = 3, lo = 0xA0;
        else if (c == 0xED)
            len = 3, hi = 0x9F;
        else if (c >= 0xE1 && c <= 0xEF)
            len = 3;
        else if (c == 0xF0)
            len = 4, lo = 0x90;
        else if (c >= 0xF1 && c <= 0xF3)
            len = 4;
        else if (c == 0xF4)
            len = 4, hi = 0x8F;
        else
            return i;
        if (i + len > n) return i;
        if (p[i + 1] < lo || p[i + 1] > hi) return i;
        for (std::size_t k = 2; k < len; ++k)
            if (p[i + k] < 0x80 || p[i + k] > 0xBF) return i;
        i += len;
    }
    return std::nullopt;
}

}  // namespace

std::string describe(const httplib::Request& req) {
    std::string text = req.method + " " + req.path;
    std::string query;
    for (const auto& [k, v] : req.params) query += (query.empty() ? "?" : "&") + k + "=" + v;
    return text + query;
}

void reject(const httplib::Request& req, httplib::Response& res, const HttpError& e) {
    if (e.status >= 500)
        spdlog::warn("api: failed {}: {} ({})", describe(req), e.message, e.status);
    else if (req.method != "GET")
        spdlog::info("api: rejected {}: {} ({})", describe(req), e.message, e.status);
    send_error(res, e);
}

std::string shown_json(const json& value) {
    std::string text = value.dump(-1, ' ', false, json::error_handler_t::replace);
    return text.size() <= config::kShownValueBytes ? text : config::shown_value(text, '\'');
}

HttpError unknown_vip(const std::string& key) {
    return {404, "no VIP " + key + " (GET /v1/vips lists them)"};
}

HttpError unknown_backend(const std::string& key, const net::IpAddress& address) {
    return {404, "VIP " + key + " has no backend " + address.to_string() +
                     " (GET /v1/backends?vip=" + key + " lists them)"};
}

std::expected<std::string, HttpError> vip_param(const httplib::Request& req) {
    if (!req.has_param("vip"))
        return std::unexpected(
            HttpError{400, "missing query parameter vip, expected e.g. ?vip=198.51.100.10:80/tcp"});
    auto key = config::parse_vip_key(req.get_param_value("vip"));
    if (!key) return std::unexpected(HttpError{400, "vip: " + key.error()});
    return key->to_string();
}

std::expected<net::IpAddress, HttpError> address_param(const httplib::Request& req) {
    if (!req.has_param("address"))
        return std::unexpected(
            HttpError{400, "missing query parameter address, expected e.g. &address=10.0.0.1"});
    auto address = net::IpAddress::parse(req.get_param_value("address"));
    if (!address) return std::unexpected(HttpError{400, "address: " + address.error()});
    return *address;
}

std::expected<bool, HttpError> flag_param(const httplib::Request& req, const std::string& name) {
    if (!req.has_param(name)) return false;
    const std::string value = req.get_param_value(name);
    if (value == "1" || value == "true") return true;
    if (value == "0" || value == "false") return false;
    return std::unexpected(
        HttpError{400, name + ": found \"" + value + "\", expected 1 or true (or 0, false)"});
}

std::expected<BackendRef, HttpError> backend_params(const httplib::Request& req) {
    auto key = vip_param(req);
    if (!key) return std::unexpected(key.error());
    auto address = address_param(req);
    if (!address) return std::unexpected(address.error());
    return BackendRef{std::move(*key), *address};
}

std::optional<HttpError> only_params(const httplib::Request& req,
                                     std::initializer_list<std::string_view> allowed) {
    for (const auto& [name, value] : req.params) {
        if (std::find(allowed.begin(), allowed.end(), name) != allowed.end()) continue;
        std::string list;
        for (auto a : allowed) list += (list.empty() ? "" : ", ") + std::string(a);
        return HttpError{400, "unknown query parameter " + config::shown_value(name) +
                                  ", expected only " + list};
    }
    return std::nullopt;
}

std::expected<json, HttpError> body_json(const httplib::Request& req, const char* expected) {
    if (req.body.empty())
        return std::unexpected(
            HttpError{400, std::string("missing request body, expected ") + expected});
    if (auto bad = invalid_utf8_at(req.body))
        return std::unexpected(
            HttpError{400, "invalid UTF-8 in the body at byte " + std::to_string(*bad) +
                               ": bodies are JSON in UTF-8, expected " + expected});
    // Duplicate keys: nlohmann keeps the last; a client that sends two
    // meant one of them, and which one is a guess. Keys are tracked per
    // object being parsed.
    std::vector<std::set<std::string>> open_objects;
    std::optional<std::string> duplicate;
    const json::parser_callback_t track = [&](int, json::parse_event_t event, json& parsed) {
        if (event == json::parse_event_t::object_start) {
            open_objects.emplace_back();
        } else if (event == json::parse_event_t::object_end) {
            if (!open_objects.empty()) open_objects.pop_back();
        } else if (event == json::parse_event_t::key && !open_objects.empty()) {
            const std::string& key = parsed.get_ref<const std::string&>();
            if (!open_objects.back().insert(key).second && !duplicate) duplicate = key;
        }
        return true;
    };
    json j;
    try {
        j = json::parse(req.body, track);
    } catch (const json::parse_error& e) {
        return std::unexpected(
            HttpError{400, "malformed JSON at byte " + std::to_string(e.byte) + ": " + e.what()});
    } catch (const json::out_of_range& e) {
        // e.g. 1e309: no double holds it
        return std::unexpected(HttpError{400, std::string("number out of range in the body (") +
                                                  e.what() + "), expected " + expected});
    }
    if (duplicate)
        return std::unexpected(HttpError{
            400, "duplicate key \"" + *duplicate + "\" in the body: each key may appear once"});
    if (!j.is_object())
        return std::unexpected(HttpError{
            400, "found " + std::string(j.type_name()) + " as the body, expected " + expected});
    return j;
}

std::expected<std::vector<control::VipStatus>, HttpError> all_status(Api& api) {
    return api.call<std::vector<control::VipStatus>>(
        [](control::Reconciler& r) { return r.status(); });
}

std::expected<control::VipStatus, HttpError> one_status(Api& api, const std::string& key) {
    auto status = api.call<std::optional<control::VipStatus>>(
        [key](control::Reconciler& r) { return r.vip_status(key); });
    if (!status) return std::unexpected(status.error());
    if (!*status) return std::unexpected(unknown_vip(key));
    return std::move(**status);
}

std::expected<StatusWithHealth, HttpError> one_status_with_health(Api& api,
                                                                  const std::string& key) {
    const Services& services = api.s;
    auto status = api.call<std::optional<StatusWithHealth>>(
        [key, &services](control::Reconciler& r) -> std::optional<StatusWithHealth> {
            auto vip = r.vip_status(key);
            if (!vip) return std::nullopt;
            HealthDetails health = collect_health(services, {*vip});
            return StatusWithHealth{std::move(*vip), std::move(health)};
        });
    if (!status) return std::unexpected(status.error());
    if (!*status) return std::unexpected(unknown_vip(key));
    return std::move(**status);
}

std::expected<control::VipStatus, HttpError> requested_status(Api& api,
                                                              const httplib::Request& req) {
    auto key = vip_param(req);
    if (!key) return std::unexpected(key.error());
    return one_status(api, *key);
}

std::expected<StatusWithHealth, HttpError> requested_status_with_health(
    Api& api, const httplib::Request& req) {
    auto key = vip_param(req);
    if (!key) return std::unexpected(key.error());
    return one_status_with_health(api, *key);
}

}  // namespace xlb::api::detail
