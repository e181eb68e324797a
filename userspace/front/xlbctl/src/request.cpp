// SPDX-License-Identifier: Apache-2.0
#include "xlb/xlbctl/request.h"

#include <nlohmann/json.hpp>

#include "xlb/config/json.h"

namespace xlb::xlbctl {

std::string url_encode(std::string_view text) {
    static constexpr char kHex[] = "0123456789ABCDEF";
    std::string out;
    out.reserve(text.size());
    for (unsigned char c : text) {
        const bool unreserved = (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') ||
                                (c >= '0' && c <= '9') || c == '-' || c == '.' || c == '_' ||
                                c == '~';
        if (unreserved) {
            out += static_cast<char>(c);
        } else {
            out += '%';
            out += kHex[c >> 4];
            out += kHex[c & 0xf];
        }
    }
    return out;
}

namespace {

std::string vip_query(const Command& c) { return "vip=" + url_encode(c.vip); }

std::string backend_query(const Command& c) {
    return vip_query(c) + "&address=" + url_encode(c.backend.to_string());
}

// A dry run asks for the prediction instead of the change (docs/api.md).
std::string dry_run(const Command& c) { return c.dry_run ? "&dry_run=1" : ""; }

// The conntrack selectors given, as a query ("" when none).
std::string selector_query(const Command& c) {
    std::string q;
    auto add = [&](const char* name, const std::string& value) {
        q += (q.empty() ? "?" : "&") + std::string(name) + "=" + url_encode(value);
    };
    if (c.vip_key) add("vip", c.vip);
    if (c.ct_backend) add("backend", c.ct_backend->to_string());
    if (c.ct_client) add("client", c.ct_client->to_string());
    if (c.active_within) add("active_within", config::format_duration(*c.active_within));
    if (c.limit) add("limit", std::to_string(*c.limit));
    return q;
}

HttpRequest patch(const Command& c, const nlohmann::json& body) {
    return {"PATCH", "/v1/backends?" + backend_query(c) + dry_run(c), body.dump()};
}

}  // namespace

HttpRequest drain_count_request(const Command& c) {
    Command count = c;
    count.verb = Verb::kConntrackCount;
    count.ct_backend = c.backend;
    count.active_within = c.active_within.value_or(kDefaultActiveWithin);
    count.limit.reset();
    count.ct_client.reset();
    return build_request(count);
}

HttpRequest build_request(const Command& c) {
    using nlohmann::json;
    switch (c.verb) {
        case Verb::kStatus: return {"GET", "/v1/status", ""};
        case Verb::kVipList: return {"GET", "/v1/vips", ""};
        case Verb::kVipAdd: {
            // Only what the operator chose: everything else takes the agent's
            // defaults (the same as config::VipSpec's).
            json body{{"address", c.spec.address.to_string()},
                      {"port", c.spec.port},
                      {"protocol", config::to_string(c.spec.protocol)},
                      {"hash", config::to_string(c.spec.hash)},
                      {"conntrack", c.spec.conntrack},
                      {"ring_size", c.spec.ring_size},
                      {"panic_threshold", c.spec.panic_threshold}};
            if (!c.spec.name.empty()) body["name"] = c.spec.name;
            if (!c.spec.backends.empty()) {
                json backends = json::array();
                for (const auto& b : c.spec.backends)
                    backends.push_back(
                        json{{"address", b.address.to_string()}, {"weight", b.weight}});
                body["backends"] = std::move(backends);
            }
            // the other settings given, as typed (the agent decodes them as the file's)
            const json settings = json::parse(c.settings, nullptr, false);
            if (settings.is_object()) body.update(settings, true);
            return {"POST", std::string("/v1/vips") + (c.dry_run ? "?dry_run=1" : ""), body.dump()};
        }
        case Verb::kVipSet:
            return {"PATCH",
                    "/v1/vip?" + vip_query(c) + dry_run(c) +
                        (c.allow_disruptive ? "&allow_disruptive=1" : ""),
                    c.settings};
        case Verb::kVipDel: return {"DELETE", "/v1/vip?" + vip_query(c), ""};
        case Verb::kBackendList:
            return {"GET", c.vip.empty() ? "/v1/backends" : "/v1/backends?" + vip_query(c), ""};
        case Verb::kBackendAdd: {
            json body{{"address", c.backend.to_string()}};
            if (c.weight) body["weight"] = *c.weight;
            if (!c.hash_key.empty()) body["hash_key"] = c.hash_key;
            return {"POST", "/v1/backends?" + vip_query(c) + dry_run(c), body.dump()};
        }
        case Verb::kBackendDel:
            return {"DELETE", "/v1/backends?" + backend_query(c) + dry_run(c), ""};
        case Verb::kBackendSet: return patch(c, json{{"weight", c.weight.value_or(0)}});
        case Verb::kBackendDrain: return patch(c, json{{"state", "drain"}});
        case Verb::kBackendEnable: return patch(c, json{{"state", "active"}});
        case Verb::kBackendDisable: return patch(c, json{{"state", "disabled"}});
        case Verb::kBackendHistory: return {"GET", "/v1/backend/history?" + backend_query(c), ""};
        case Verb::kStats:
            return {"GET", c.vip.empty() ? "/v1/stats" : "/v1/stats?" + vip_query(c), ""};
        case Verb::kTable: return {"GET", "/v1/table?" + vip_query(c), ""};
        case Verb::kLookup: {
            std::string target =
                "/v1/lookup?" + vip_query(c) + "&src=" + url_encode(c.src.to_string());
            if (c.proto) target += "&proto=" + std::string(config::to_string(*c.proto));
            if (c.dport) target += "&dport=" + std::to_string(*c.dport);
            return {"GET", target, ""};
        }
        case Verb::kReload:
            return {"POST", "/v1/reload", json{{"allow_disruptive", c.allow_disruptive}}.dump()};
        case Verb::kHostDrain: return {"POST", "/v1/host/drain", ""};
        case Verb::kHostResume: return {"POST", "/v1/host/resume", ""};
        case Verb::kConntrackCount: return {"GET", "/v1/conntrack/count" + selector_query(c), ""};
        case Verb::kConntrackList: return {"GET", "/v1/conntrack" + selector_query(c), ""};
        case Verb::kConntrackFlush: {
            json body = json::object();
            if (c.vip_key) body["vip"] = c.vip;
            if (c.ct_backend) body["backend"] = c.ct_backend->to_string();
            if (c.ct_client) body["client"] = c.ct_client->to_string();
            if (c.ct_stale) body["stale"] = true;
            if (c.dry_run) body["dry_run"] = true;
            return {"POST", "/v1/conntrack/flush", body.dump()};
        }
        case Verb::kTop: return {"GET", "/v1/stats", ""};  // and /v1/backends: run.cpp
        case Verb::kCapture: {
            json body = json::object();
            if (c.vip_key) body["vip"] = c.vip;
            if (c.capture_backend) body["backend"] = c.capture_backend->to_string();
            if (c.capture_src) body["src"] = c.capture_src->to_string();
            if (!c.outcomes.empty()) body["outcomes"] = c.outcomes;
            if (c.count) body["count"] = *c.count;
            if (c.capture_duration)
                body["duration_ms"] =
                    std::chrono::duration_cast<std::chrono::milliseconds>(*c.capture_duration)
                        .count();
            if (c.snaplen) body["snaplen"] = *c.snaplen;
            return {"POST", "/v1/capture", body.dump()};
        }
    }
    return {"GET", "/v1/status", ""};
}

}  // namespace xlb::xlbctl
