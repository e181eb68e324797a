// SPDX-License-Identifier: Apache-2.0
#include "xlb/fleet/values.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <initializer_list>
#include <string_view>

#include "xlb/config/json.h"

namespace xlb::fleet {

namespace {

using json = nlohmann::json;

// The value as an object of known fields in the expected format.
Result<json> object_of(std::string_view text, std::initializer_list<std::string_view> fields) {
    json j = json::parse(text, nullptr, false);
    if (j.is_discarded()) return xlb::fail("not valid JSON");
    if (!j.is_object())
        return xlb::fail("found " + std::string(j.type_name()) + ", expected an object");
    for (const auto& [key, value] : j.items()) {
        if (key == "format") continue;
        if (std::find(fields.begin(), fields.end(), key) == fields.end())
            return xlb::fail("unknown field \"" + key + "\" (format " + std::to_string(kFormat) +
                             " has none such: written by a newer xlbctl?)");
    }
    auto format = j.find("format");
    if (format == j.end() || !format->is_number_integer())
        return xlb::fail("format: missing, expected " + std::to_string(kFormat));
    if (format->get<std::int64_t>() != kFormat)
        return xlb::fail("format " + format->dump() +
                         " is not understood by this version (it reads " + std::to_string(kFormat) +
                         "): upgrade it");
    return j;
}

template <class T>
Result<T> field(const json& j, const char* key, T fallback) {
    auto it = j.find(key);
    if (it == j.end()) return fallback;
    try {
        return it->get<T>();
    } catch (const json::exception&) {
        return xlb::fail(std::string(key) + ": found " + it->dump() + ", expected " +
                         (std::is_same_v<T, bool>          ? "true or false"
                          : std::is_same_v<T, std::string> ? "a string"
                                                           : "a number"));
    }
}

Result<Written> decode_written(const json& j) {
    auto it = j.find("written");
    if (it == j.end()) return Written{};
    if (!it->is_object()) return xlb::fail("written: found " + it->dump() + ", expected an object");
    Written w;
    for (const auto& [key, value] : it->items())
        if (key != "by" && key != "uid" && key != "host" && key != "at" && key != "reason" &&
            key != "tool")
            return xlb::fail("written: unknown field \"" + key + "\"");
    auto text = [&](const char* key, std::string& out) -> Result<void> {
        auto v = field<std::string>(*it, key, "");
        if (!v) return std::unexpected(std::move(v.error()).add_context("written"));
        out = *v;
        return {};
    };
    for (auto [key, out] :
         {std::pair{"by", &w.by}, std::pair{"host", &w.host}, std::pair{"at", &w.at},
          std::pair{"reason", &w.reason}, std::pair{"tool", &w.tool}})
        if (auto ok = text(key, *out); !ok) return std::unexpected(std::move(ok.error()));
    auto uid = field<std::uint32_t>(*it, "uid", 0);
    if (!uid) return std::unexpected(std::move(uid.error()).add_context("written"));
    w.uid = *uid;
    return w;
}

// The fields every desired value of a VIP or the settings carries.
template <class Value>
Result<void> decode_confirmed_and_written(const json& j, Value& out) {
    auto allow = field<bool>(j, "allow_disruptive", false);
    if (!allow) return std::unexpected(std::move(allow.error()));
    out.allow_disruptive = *allow;
    auto written = decode_written(j);
    if (!written) return std::unexpected(std::move(written.error()));
    out.written = std::move(*written);
    return {};
}

json stamp(json j) {
    j["format"] = kFormat;
    return j;
}

}  // namespace

json written_json(const Written& w) {
    return json{{"by", w.by}, {"uid", w.uid},       {"host", w.host},
                {"at", w.at}, {"reason", w.reason}, {"tool", w.tool}};
}

std::string encode(const GlobalValue& v) {
    return stamp(json{{"settings", config::fleet_wide_to_json(v.settings)},
                      {"allow_disruptive", v.allow_disruptive},
                      {"written", written_json(v.written)}})
        .dump();
}

std::string encode(const VipValue& v) {
    json j{{"written", written_json(v.written)}};
    if (v.vip) {
        j["vip"] = *v.vip;
        j["allow_disruptive"] = v.allow_disruptive;
    } else {
        j["deleted"] = true;
    }
    return stamp(std::move(j)).dump();
}

std::string encode(const DrainValue& v) {
    return stamp(json{{"drained", v.drained}, {"written", written_json(v.written)}}).dump();
}

Result<GlobalValue> decode_global(std::string_view text) {
    auto j = object_of(text, {"settings", "allow_disruptive", "written"});
    if (!j) return std::unexpected(std::move(j.error()));
    GlobalValue out;
    auto settings = j->find("settings");
    if (settings == j->end())
        return xlb::fail("settings: missing, expected the fleet-wide settings");
    auto decoded = config::fleet_wide_from_json(*settings);
    if (!decoded) return xlb::fail("settings." + decoded.error());
    out.settings = std::move(*decoded);
    if (auto ok = decode_confirmed_and_written(*j, out); !ok)
        return std::unexpected(std::move(ok.error()));
    return out;
}

Result<VipValue> decode_vip(std::string_view text) {
    auto j = object_of(text, {"vip", "deleted", "allow_disruptive", "written"});
    if (!j) return std::unexpected(std::move(j.error()));
    VipValue out;
    auto deleted = field<bool>(*j, "deleted", false);
    if (!deleted) return std::unexpected(std::move(deleted.error()));
    auto vip = j->find("vip");
    if (*deleted == (vip != j->end()))
        return xlb::fail(*deleted ? "vip: present in a deleted VIP's value"
                                  : "vip: missing, expected the VIP and its backends");
    if (!*deleted) {
        auto spec = config::vip_from_json(*vip);
        if (!spec) return xlb::fail("vip." + spec.error());
        out.vip = std::move(*spec);
    }
    if (auto ok = decode_confirmed_and_written(*j, out); !ok)
        return std::unexpected(std::move(ok.error()));
    return out;
}

Result<DrainValue> decode_drain(std::string_view text) {
    auto j = object_of(text, {"drained", "written"});
    if (!j) return std::unexpected(std::move(j.error()));
    DrainValue out;
    if (!j->contains("drained")) return xlb::fail("drained: missing, expected true or false");
    auto drained = field<bool>(*j, "drained", false);
    if (!drained) return std::unexpected(std::move(drained.error()));
    out.drained = *drained;
    auto written = decode_written(*j);
    if (!written) return std::unexpected(std::move(written.error()));
    out.written = std::move(*written);
    return out;
}

std::string encode(const HostRecord& r) {
    json refused = nullptr;
    if (r.refused)
        refused = json{{"revision", r.refused->revision},
                       {"reason", r.refused->reason},
                       {"errors", r.refused->errors}};
    return stamp(json{{"host", r.host},
                      {"version", r.version},
                      {"config_revision", r.config_revision},
                      {"applied_at", r.applied_at},
                      {"seen_revision", r.seen_revision},
                      {"drained", r.drained},
                      {"store",
                       {{"reachable", r.store_reachable},
                        {"since", r.store_since},
                        {"error", r.store_error}}},
                      {"refused", refused},
                      {"updated_at", r.updated_at},
                      {"vips", r.vips}})
        .dump();
}

Result<HostRecord> decode_host(std::string_view text) {
    auto j = object_of(text, {"host", "version", "config_revision", "applied_at", "seen_revision",
                              "drained", "store", "refused", "updated_at", "vips"});
    if (!j) return std::unexpected(std::move(j.error()));
    HostRecord r;
    try {
        r.host = j->value("host", "");
        r.version = j->value("version", "");
        r.config_revision = j->value("config_revision", std::int64_t{0});
        r.applied_at = j->value("applied_at", "");
        r.seen_revision = j->value("seen_revision", std::int64_t{0});
        r.drained = j->value("drained", false);
        if (auto s = j->find("store"); s != j->end() && s->is_object()) {
            r.store_reachable = s->value("reachable", true);
            r.store_since = s->value("since", "");
            r.store_error = s->value("error", "");
        }
        if (auto f = j->find("refused"); f != j->end() && f->is_object())
            r.refused =
                HostRecord::Refusal{f->value("revision", std::int64_t{0}), f->value("reason", ""),
                                    f->value("errors", std::vector<std::string>{})};
        r.updated_at = j->value("updated_at", "");
        if (auto v = j->find("vips"); v != j->end()) {
            if (!v->is_array()) return xlb::fail("vips: found " + v->dump() + ", expected a list");
            r.vips = *v;
        }
    } catch (const json::exception& e) {
        return xlb::fail(std::string("a field has the wrong type: ") + e.what());
    }
    return r;
}

std::string encode(const PublishState& state) {
    json live = json::object();
    for (const auto& [vip, l] : state.live)
        live[vip] = json{{"checksum", l.checksum}, {"published_at", l.published_at}};
    return stamp(json{{"prepared", state.prepared}, {"live", std::move(live)}}).dump();
}

Result<PublishState> decode_publish(std::string_view text) {
    auto j = object_of(text, {"prepared", "live"});
    if (!j) return std::unexpected(std::move(j.error()));
    PublishState out;
    try {
        if (auto p = j->find("prepared"); p != j->end())
            out.prepared = p->get<std::map<std::string, std::string>>();
        if (auto l = j->find("live"); l != j->end())
            for (const auto& [vip, v] : l->items())
                out.live[vip] = PublishState::Live{v.at("checksum").get<std::string>(),
                                                   v.value("published_at", "")};
    } catch (const json::exception& e) {
        return xlb::fail(std::string("a field has the wrong type: ") + e.what());
    }
    return out;
}

std::optional<std::int64_t> parse_utc_ms(std::string_view text) {
    int y = 0, mo = 0, d = 0, h = 0, mi = 0, s = 0, ms = 0, used = 0;
    const std::string t(text);
    if (std::sscanf(t.c_str(), "%4d-%2d-%2dT%2d:%2d:%2d%n", &y, &mo, &d, &h, &mi, &s, &used) != 6)
        return std::nullopt;
    std::string_view rest = text.substr(static_cast<std::size_t>(used));
    if (rest.size() == 5 && rest[0] == '.') {
        for (char c : rest.substr(1, 3)) {
            if (c < '0' || c > '9') return std::nullopt;
            ms = ms * 10 + (c - '0');
        }
        rest.remove_prefix(4);
    }
    if (rest != "Z") return std::nullopt;
    // timegm() would turn a 13th month or a 25th hour into a later time.
    const std::chrono::year_month_day date{std::chrono::year{y},
                                           std::chrono::month{static_cast<unsigned>(mo)},
                                           std::chrono::day{static_cast<unsigned>(d)}};
    if (!date.ok() || h < 0 || h > 23 || mi < 0 || mi > 59 || s < 0 || s > 60)
        return std::nullopt;  // 60: a leap second
    std::tm utc{};
    utc.tm_year = y - 1900;
    utc.tm_mon = mo - 1;
    utc.tm_mday = d;
    utc.tm_hour = h;
    utc.tm_min = mi;
    utc.tm_sec = s;
    const std::time_t at = ::timegm(&utc);
    return static_cast<std::int64_t>(at) * 1000 + ms;
}

HostVotes host_votes(const HostRecord& record) {
    HostVotes out;
    out.config_revision = record.config_revision;
    out.applied_at_ms = parse_utc_ms(record.applied_at).value_or(0);
    auto health_of = [](const json& j, const char* key) {
        auto f = j.find(key);
        if (f == j.end() || !f->is_string()) return control::Health::kUnknown;
        const std::string h = f->get<std::string>();
        // A VIP without a health check: every backend takes traffic.
        if (h == "healthy" || h == "unchecked") return control::Health::kHealthy;
        if (h == "unhealthy") return control::Health::kUnhealthy;
        return control::Health::kUnknown;
    };
    for (const json& v : record.vips) {
        if (!v.is_object() || !v.contains("vip") || !v["vip"].is_string()) continue;
        const std::string key = v["vip"].get<std::string>();
        auto text = [&](const char* field) -> std::optional<std::string> {
            auto f = v.find(field);
            if (f == v.end() || !f->is_string()) return std::nullopt;
            return f->get<std::string>();
        };
        if (auto c = text("checksum")) out.live[key] = *c;
        if (auto at = text("published_at"))
            if (auto ms = parse_utc_ms(*at)) out.published_at_ms[key] = *ms;
        auto& votes = out.vips[key];
        auto b = v.find("backends");
        if (b == v.end() || !b->is_array()) continue;
        for (const json& one : *b) {
            if (!one.is_object() || !one.contains("address") || !one["address"].is_string())
                continue;
            Vote vote;
            vote.health = one.contains("local_health") ? health_of(one, "local_health")
                                                       : health_of(one, "health");
            if (auto s = one.find("healthy_since_ms"); s != one.end() && s->is_number_integer())
                vote.healthy_since_ms = s->get<std::int64_t>();
            else if (vote.health == control::Health::kHealthy)
                vote.healthy_since_ms = 0;
            if (auto f = one.find("bias"); f != one.end() && f->is_number())
                vote.bias = f->get<double>();
            votes[one["address"].get<std::string>()] = vote;
        }
    }
    return out;
}

}  // namespace xlb::fleet
