// SPDX-License-Identifier: Apache-2.0
// The JSON side: an nlohmann view for the shared decoders (decode.h), and the
// encoders.
#include "xlb/config/json.h"

#include <cstdio>
#include <map>

#include "decode.h"
#include "xlb/config/config.h"

namespace xlb::config {

namespace {

using detail::Kind;
using detail::Location;
using json = nlohmann::json;

class JsonView {
public:
    static constexpr std::string_view kMapNoun = "an object";

    using Entry = detail::Entry<JsonView>;

    explicit JsonView(const json& j) : j_(&j) {}

    Kind kind() const {
        if (j_->is_object()) return Kind::kMap;
        if (j_->is_array()) return Kind::kList;
        if (j_->is_null()) return Kind::kNull;
        return Kind::kScalar;
    }
    Location location() const { return {}; }

    std::string found() const {
        if (j_->is_object()) return "an object";
        if (j_->is_array()) return "a list";
        if (j_->is_string()) return shown_value(j_->get_ref<const std::string&>());
        return j_->dump();  // number, true/false, null
    }

    // JSON is typed: a string is not a number, and so on.
    std::optional<std::string> string_text() const {
        if (j_->is_string()) return j_->get<std::string>();
        return std::nullopt;
    }
    std::optional<std::string> number_text() const {
        if (j_->is_number()) return j_->dump();
        return std::nullopt;
    }
    std::optional<std::string> bool_text() const {
        if (j_->is_boolean()) return j_->dump();
        return std::nullopt;
    }
    std::optional<std::string> scalar_text() const {
        if (j_->is_string() || j_->is_number())
            return j_->is_string() ? string_text() : number_text();
        return std::nullopt;
    }

    std::vector<Entry> entries() const {
        std::vector<Entry> out;
        for (auto it = j_->begin(); it != j_->end(); ++it) {
            out.push_back(Entry{it.key(), {}, shown_value(it.key()), JsonView(it.value())});
        }
        return out;
    }

    std::vector<JsonView> items() const {
        std::vector<JsonView> out;
        for (const auto& item : *j_) out.emplace_back(item);
        return out;
    }

private:
    const json* j_;
};

template <class T, class Decode>
std::expected<T, std::string> decode(const json& j, const std::string& path, Decode fn) {
    detail::Sink sink;
    T value = fn(JsonView(j), path, sink);
    if (sink.count() == 0) return value;
    std::string message;
    for (const auto& d : sink.errors()) {
        if (!message.empty()) message += "; ";
        message += detail::with_path(d.path, d.message);
    }
    return std::unexpected(std::move(message));
}

}  // namespace

void to_json(json& j, const StatusRange& r) {
    if (r.first == r.last) {
        j = r.first;
    } else {
        j = std::to_string(r.first) + "-" + std::to_string(r.last);
    }
}

void to_json(json& j, const HealthCheck& h) {
    j = json{
        {"type", to_string(h.type)},
        {"port", h.port},
        {"path", h.path},
        {"host", h.host},
        {"expected_statuses", h.expected_statuses},
        {"body_contains", h.body_contains},
        {"reuse_connection", h.reuse_connection},
        {"reuse_limit", format_duration(h.reuse_limit)},
        {"sni", h.sni},
        {"ca_file", h.ca_file},
        {"verify", h.verify},
        {"udp_payload", h.udp_payload},
        {"udp_expect", h.udp_expect},
        {"interval", format_duration(h.interval)},
        {"timeout", format_duration(h.timeout)},
        {"jitter", format_duration(h.jitter)},
        {"unhealthy_threshold", h.unhealthy_threshold},
        {"healthy_threshold", h.healthy_threshold},
        {"via_vip", h.via_vip},
        {"failure_accrual",
         {{"enabled", h.failure_accrual.enabled},
          {"success_rate", h.failure_accrual.success_rate},
          {"window", format_duration(h.failure_accrual.window)},
          {"min_probes", h.failure_accrual.min_probes},
          {"min_penalty", format_duration(h.failure_accrual.min_penalty)},
          {"max_penalty", format_duration(h.failure_accrual.max_penalty)},
          {"jitter", h.failure_accrual.jitter}}},
        {"rate_limit_bias",
         {{"factor", h.rate_limit_bias.factor},
          {"penalty", format_duration(h.rate_limit_bias.penalty)},
          {"max_retry_after", format_duration(h.rate_limit_bias.max_retry_after)}}},
        {"flapping",
         {{"changes", h.flapping.changes},
          {"window", format_duration(h.flapping.window)},
          {"hold", format_duration(h.flapping.hold)}}},
    };
}

void to_json(json& j, const SlowStart& s) {
    j = json{{"window", format_duration(s.window)}, {"floor", s.floor}};
}

void to_json(json& j, const BackendSpec& b) {
    j = json{{"address", b.address.to_string()},
             {"weight", b.weight},
             {"state", to_string(b.state)},
             {"hash_key", b.hash_key}};
    // Only when set, so that a backend that never set it keeps the digest
    // of its VIP's config (as conntrack_idle_timeout below).
    if (b.cookie_acks) j["cookie_acks"] = true;
    if (b.server_id) j["server_id"] = *b.server_id;
}

// The key file's path only: the key itself never leaves the host's file.
void to_json(json& j, const QuicConfig& q) {
    j = json{{"config_id", q.config_id},
             {"server_id_length", q.server_id_length},
             {"nonce_length", q.nonce_length},
             {"mode", to_string(q.mode)}};
    if (!q.key_file.empty()) j["key_file"] = q.key_file;
}

void to_json(json& j, const VipSpec& v) {
    j = json{
        {"address", v.address.to_string()},  {"port", v.port},
        {"protocol", to_string(v.protocol)}, {"name", v.name},
        {"hash", to_string(v.hash)},         {"conntrack", v.conntrack},
        {"ring_size", v.ring_size},          {"panic_threshold", v.panic_threshold},
        {"slow_start", v.slow_start},        {"on_unhealthy", to_string(v.on_unhealthy)},
        {"health_check", v.health_check},    {"backends", v.backends},
    };
    // Written only when it is not the default, so that the state file of a
    // VIP that never set it keeps its config digest across the upgrade that
    // added it (a changed digest drops the API's runtime changes).
    if (v.announce != announce::Policy::kWhenServing)
        j["announce"] = announce::to_string(v.announce);
    // Likewise: only when set.
    if (v.conntrack_idle_timeout)
        j["conntrack_idle_timeout"] = format_duration(*v.conntrack_idle_timeout);
    if (v.health_consensus) j["health_consensus"] = to_string(*v.health_consensus);
    if (v.syn_cookies) j["syn_cookies"] = to_string(*v.syn_cookies);
    auto prefixes = [](const std::vector<net::Prefix>& list) {
        json out = json::array();
        for (const net::Prefix& p : list) out.push_back(p.to_string());
        return out;
    };
    if (!v.allow_sources.empty()) j["allow_sources"] = prefixes(v.allow_sources);
    if (!v.deny_sources.empty()) j["deny_sources"] = prefixes(v.deny_sources);
    // Always a list, whichever form the file used.
    if (!v.quic.empty()) j["quic"] = v.quic;
}

std::expected<VipSpec, std::string> vip_from_json(const json& j) {
    return decode<VipSpec>(j, "", detail::decode_vip<JsonView>);
}

std::expected<BackendSpec, std::string> backend_from_json(const json& j) {
    return decode<BackendSpec>(j, "", detail::decode_backend<JsonView>);
}

std::expected<HealthCheck, std::string> health_check_from_json(const json& j) {
    return decode<HealthCheck>(j, "", detail::decode_health_check<JsonView>);
}

std::expected<SlowStart, std::string> slow_start_from_json(const json& j) {
    return decode<SlowStart>(j, "", detail::decode_slow_start<JsonView>);
}

namespace {

inline constexpr std::string_view kCaptureKeys[] = {"vip",   "backend",     "src",    "outcomes",
                                                    "count", "duration_ms", "snaplen"};

// A string parsed by `parse` (an expected<T, std::string>): a wrong type is
// "found X, expected a string", a string that does not parse gives the
// parser's own words ("backend: <why>").
template <class Parse>
auto read_text_parsed(const JsonView& v, const std::string& path, detail::Sink& s, Parse parse)
    -> std::optional<typename std::invoke_result_t<Parse, const std::string&>::value_type> {
    auto text = detail::read_string(v, path, s, "a string");
    if (!text) return std::nullopt;
    auto parsed = parse(*text);
    if (parsed) return std::move(*parsed);
    s.error(path, v.location(), parsed.error());
    return std::nullopt;
}

std::optional<std::uint64_t> read_positive(const JsonView& v, const std::string& path,
                                           detail::Sink& s, std::uint64_t max) {
    return detail::read_parsed(
        v, path, s, &JsonView::number_text,
        [max](const std::string& t) {
            auto n = detail::parse_decimal(t);
            return n && *n >= 1 && *n <= max ? n : std::nullopt;
        },
        "an integer 1-" + std::to_string(max));
}

}  // namespace

std::expected<BackendPatch, std::string> backend_patch_from_json(const json& j) {
    return decode<BackendPatch>(
        j, "", [](const JsonView& v, const std::string& p, detail::Sink& s) {
            BackendPatch out;
            if (v.kind() != Kind::kMap) {
                s.error(p, v.location(),
                        "found " + v.found() + ", expected " + std::string(kBackendPatchExpected));
                return out;
            }
            // The readers are decode_backend's, so that a patch and a new
            // backend refuse a value in the same words.
            for (const auto& entry : v.entries()) {
                const std::string& key = *entry.key;
                if (key == "weight") {
                    auto w = detail::read_uint(entry.value, detail::join(p, key), s, 0xffffffffULL,
                                               "an integer 0-" + std::to_string(kMaxWeight));
                    if (w) out.weight = static_cast<std::uint32_t>(*w);
                } else if (key == "state") {
                    out.state = detail::read_enum<AdminState>(entry.value, detail::join(p, key), s,
                                                              parse_admin_state,
                                                              "active, drain or disabled");
                } else if (key == "cookie_acks") {
                    out.cookie_acks = detail::read_bool(entry.value, detail::join(p, key), s);
                } else if (key == "server_id") {
                    if (entry.value.kind() == Kind::kNull) {
                        out.server_id.emplace();
                    } else if (auto id =
                                   detail::read_server_id(entry.value, detail::join(p, key), s)) {
                        out.server_id.emplace(*id);
                    }
                } else {
                    s.error(p, entry.key_location,
                            "found unknown field " + entry.key_found + ", expected " +
                                std::string(kBackendPatchExpected));
                }
            }
            if (s.count() == 0 && !out.weight && !out.state && !out.cookie_acks && !out.server_id)
                s.error(p, v.location(),
                        "nothing to change, expected " + std::string(kBackendPatchExpected));
            return out;
        });
}

std::expected<CaptureRequest, std::string> capture_request_from_json(const json& j,
                                                                     std::uint32_t max_snaplen) {
    return decode<CaptureRequest>(
        j, "", [max_snaplen](const JsonView& v, const std::string& p, detail::Sink& s) {
            CaptureRequest out;
            auto f = detail::read_fields(
                v, p, s, kCaptureKeys,
                "a capture: vip, backend, src, outcomes, count, duration_ms, snaplen");
            if (!f) return out;
            using Field = const JsonView&;
            detail::field(*f, p, "vip", out.vip, [&](Field x, const std::string& path) {
                return read_text_parsed(x, path, s, parse_vip_key);
            });
            detail::field(*f, p, "backend", out.backend, [&](Field x, const std::string& path) {
                return read_text_parsed(x, path, s, net::IpAddress::parse);
            });
            detail::field(*f, p, "src", out.src, [&](Field x, const std::string& path) {
                return read_text_parsed(x, path, s, net::Prefix::parse);
            });
            if (const JsonView* list = f->get("outcomes")) {
                const std::string path = detail::join(p, "outcomes");
                if (list->kind() != Kind::kList || list->items().empty()) {
                    s.error(path, list->location(),
                            "found " +
                                (list->kind() == Kind::kList ? std::string("an empty list")
                                                             : list->found()) +
                                ", expected a list such as [\"drop\", \"tx\"]");
                } else {
                    std::size_t i = 0;
                    for (const JsonView& word : list->items())
                        if (auto w =
                                detail::read_string(word, detail::index(path, i++), s, "a string"))
                            out.outcomes.push_back(std::move(*w));
                }
            }
            detail::field(*f, p, "count", out.count, [&](Field x, const std::string& path) {
                return read_positive(x, path, s, kMaxCaptureCount);
            });
            detail::field(
                *f, p, "duration_ms", out.duration, [&](Field x, const std::string& path) {
                    auto ms = read_positive(x, path, s, kMaxCaptureDurationMs);
                    return ms ? std::optional(std::chrono::milliseconds(*ms)) : std::nullopt;
                });
            detail::field(*f, p, "snaplen", out.snaplen, [&](Field x, const std::string& path) {
                auto n = read_positive(x, path, s, max_snaplen);
                return n ? std::optional(static_cast<std::uint32_t>(*n)) : std::nullopt;
            });
            return out;
        });
}

json vips_to_json(const std::vector<VipSpec>& vips) {
    json out = json::array();
    for (const auto& v : vips) out.push_back(v);
    return out;
}

std::expected<std::vector<VipSpec>, std::string> vips_from_json(const json& j) {
    return decode<std::vector<VipSpec>>(
        j, "", [](const JsonView& v, const std::string& p, detail::Sink& s) {
            std::vector<VipSpec> out;
            if (v.kind() != Kind::kList) {
                s.error(p, v.location(), "found " + v.found() + ", expected a list of VIPs");
                return out;
            }
            std::size_t i = 0;
            for (const JsonView& item : v.items()) {
                out.push_back(detail::decode_vip(item, detail::index(p, i++), s));
            }
            return out;
        });
}

json settings_to_json(const Settings& s) {
    json next_hop = json::object();
    if (s.next_hop.address) next_hop["address"] = s.next_hop.address->to_string();
    if (s.next_hop.mac) next_hop["mac"] = net::mac_to_string(*s.next_hop.mac);
    json encap = json::object();
    if (s.encap_source.ipv4) {
        encap["ipv4"] =
            s.encap_source.ipv4->to_string() + "/" + std::to_string(s.encap_source.ipv4_prefix_len);
    }
    if (s.encap_source.ipv6) {
        encap["ipv6"] =
            s.encap_source.ipv6->to_string() + "/" + std::to_string(s.encap_source.ipv6_prefix_len);
    }
    json out{
        {"interface", s.interface},
        {"xdp_mode", to_string(s.xdp_mode)},
        {"next_hop", next_hop},
        {"encap_source", encap},
        {"hash_seed", format_hash_seed(s.hash_seed)},
        {"mtu", s.mtu},
        {"icmp_too_big", s.icmp_too_big},
        {"encap", to_string(s.encap)},
        {"gue_port", s.gue_port},
        {"second_chance",
         {{"enabled", s.second_chance.enabled},
          {"window", format_duration(s.second_chance.window)}}},
        {"maps",
         {{"max_vips", s.maps.max_vips},
          {"max_backends", s.maps.max_backends},
          {"conntrack_entries", s.maps.conntrack_entries}}},
        {"api", {{"socket", s.api_socket}, {"group", s.api_group}}},
        {"metrics", {{"listen", s.metrics_listen}}},
        {"state_file", s.state_file},
        {"pin_dir", s.pin_dir},
        {"bgp",
         {{"enabled", s.bgp.enabled},
          {"control_socket", s.bgp.control_socket},
          {"routes_file", s.bgp.routes_file},
          {"protocol", s.bgp.protocol},
          {"route", announce::to_string(s.bgp.route)}}},
        {"conntrack",
         {{"insert_rate", s.conntrack.insert_rate},
          {"insert_burst", s.conntrack.insert_burst},
          {"resize", to_string(s.conntrack.resize)},
          {"sweep_interval", format_duration(s.conntrack.sweep_interval)}}},
        {"health_history", s.health_history},
        {"syn_flood",
         {{"start_rate", s.syn_flood.start_rate},
          {"end_rate", s.syn_flood.end_rate},
          {"end_after", format_duration(s.syn_flood.end_after)}}},
    };
    if (s.fleet.enabled) {
        const FleetSettings& f = s.fleet;
        out["fleet"] = {{"name", f.name},
                        {"prefix", fleet_prefix(f)},
                        {"endpoints", f.endpoints},
                        {"host_name", f.host_name},
                        {"ca", f.ca},
                        {"cert", f.cert},
                        {"key", f.key},
                        {"lease_ttl", format_duration(f.lease_ttl)},
                        {"dial_timeout", format_duration(f.dial_timeout)},
                        {"request_timeout", format_duration(f.request_timeout)},
                        {"max_publish_wait", format_duration(f.max_publish_wait)},
                        {"announce", to_string(f.announce)},
                        {"max_lag", format_duration(f.max_lag)}};
    }
    return out;
}

json fleet_wide_to_json(const Settings& s) {
    return json{{"hash_seed", format_hash_seed(s.hash_seed)},
                {"icmp_too_big", s.icmp_too_big},
                {"encap", to_string(s.encap)},
                {"gue_port", s.gue_port},
                {"second_chance",
                 {{"enabled", s.second_chance.enabled},
                  {"window", format_duration(s.second_chance.window)}}},
                {"health_history", s.health_history}};
}

std::expected<Settings, std::string> fleet_wide_from_json(const json& j) {
    return decode<Settings>(j, "", detail::decode_fleet_global<JsonView>);
}

namespace {

// A JSON document's leaves by dotted path ("health_check.interval"); a list
// is one leaf.
void flatten(const json& j, const std::string& prefix, std::map<std::string, json>& out) {
    if (j.is_object() && !(j.empty() && !prefix.empty())) {
        for (auto it = j.begin(); it != j.end(); ++it)
            flatten(it.value(), prefix.empty() ? it.key() : prefix + "." + it.key(), out);
        return;
    }
    out[prefix] = j;
}

}  // namespace

void merge_patch(json& target, const json& patch) {
    for (auto it = patch.begin(); it != patch.end(); ++it) {
        if (it.value().is_object() && target.contains(it.key()) && target[it.key()].is_object())
            merge_patch(target[it.key()], it.value());
        else
            target[it.key()] = it.value();
    }
}

json vip_settings_changes(const VipSpec& was, const VipSpec& now) {
    json before = was, after = now;
    before.erase("backends");
    after.erase("backends");
    // Written only when not the default: compared with its default's name.
    for (json* j : {&before, &after})
        if (!j->contains("announce"))
            (*j)["announce"] = announce::to_string(announce::Policy::kWhenServing);
    std::map<std::string, json> a, b;
    flatten(before, "", a);
    flatten(after, "", b);
    for (const auto& [key, value] : b) a.try_emplace(key, nullptr);
    json changes = json::array();
    for (const auto& [key, from] : a) {
        const auto it = b.find(key);
        const json to = it == b.end() ? json(nullptr) : it->second;
        if (from != to) changes.push_back({{"key", key}, {"from", from}, {"to", to}});
    }
    return changes;
}

}  // namespace xlb::config
