// SPDX-License-Identifier: Apache-2.0
// The pure parts of xlbctl with a fleet (fleet.h): a write verb applied to
// a VIP's value with the API's rules, the refusal texts, the status
// comparison, import, export, and the field-level difference of two values.
#include "xlb/xlbctl/fleet.h"

#include <fmt/format.h>

#include <algorithm>
#include <ctime>
#include <map>
#include <set>

#include "render_parts.h"
#include "xlb/config/config.h"
#include "xlb/config/json.h"
#include "xlb/fleet/desired.h"
#include "xlb/xlbctl/render.h"

namespace xlb::xlbctl {

namespace {

using json = nlohmann::json;

std::string quoted(const std::string& text) { return config::shown_value(text); }

std::string backend_text(const config::BackendSpec& b) {
    std::string out = fmt::format("weight {}, {}", b.weight, config::to_string(b.state));
    if (!b.hash_key.empty()) out += ", hash key " + b.hash_key;
    if (b.cookie_acks) out += ", cookie ACKs";
    if (b.server_id) out += fmt::format(", server id {}", *b.server_id);
    return out;
}

// The rules of the agent's API for a changed VIP (config::check_vip_among,
// as the API's validate_change).
std::optional<std::string> invalid(const config::VipSpec& next,
                                   const std::vector<config::VipSpec>& others,
                                   const config::Settings& settings, bool backend_change) {
    std::string message;
    for (const config::ValidationIssue& issue : config::check_vip_among(next, others, settings))
        message += (message.empty() ? "" : "; ") + issue.to_string();
    if (message.empty()) return std::nullopt;
    return (backend_change ? "invalid backend for VIP " : "invalid VIP ") + next.key() + ": " +
           message;
}

std::string unknown_vip(const std::string& key) {
    return "no VIP " + key + " in the fleet (add it: xlbctl vip add " + key + ")";
}

std::string age_text(std::int64_t seconds) {
    if (seconds < 120) return std::to_string(seconds) + "s";
    if (seconds < 7200) return std::to_string(seconds / 60) + "m";
    return std::to_string(seconds / 3600) + "h";
}

std::vector<fleet::StoredKey> stored_keys(const StoreRead& read, const std::string& prefix) {
    std::vector<fleet::StoredKey> out;
    for (const StoredValue& kv : read.kvs)
        if (kv.key.starts_with(prefix)) out.push_back({kv.key, kv.value, kv.mod_revision});
    return out;
}

std::string problems_text(const std::vector<fleet::Problem>& problems) {
    std::string out;
    for (const auto& p : problems) out += (out.empty() ? "" : "; ") + p.to_string();
    return out;
}

}  // namespace

std::expected<VipApplied, std::string> apply_to_vip(const Command& c,
                                                    const std::optional<config::VipSpec>& current,
                                                    const std::vector<config::VipSpec>& others,
                                                    const config::Settings& settings) {
    const std::string key = c.vip;
    VipApplied out;
    bool backend_change = false;
    if (c.verb != Verb::kVipAdd && !current) return std::unexpected(unknown_vip(key));
    const std::string address = c.backend.to_string();
    auto find = [&](config::VipSpec& v) {
        return std::find_if(v.backends.begin(), v.backends.end(),
                            [&](const config::BackendSpec& b) { return b.address == c.backend; });
    };
    switch (c.verb) {
        case Verb::kVipAdd:
            if (current)
                return std::unexpected("VIP " + key +
                                       " already exists in the fleet (change its settings with "
                                       "xlbctl vip set, its backends with xlbctl backend)");
            out.next = c.spec;
            out.summary = fmt::format("added with {} backend{}", c.spec.backends.size(),
                                      c.spec.backends.size() == 1 ? "" : "s");
            break;
        case Verb::kVipSet: {
            json merged = *current;
            config::merge_patch(merged, json::parse(c.settings));
            auto next = config::vip_from_json(merged);
            if (!next) return std::unexpected("invalid VIP " + key + ": " + next.error());
            if (const auto disruptive = config::disruptive_vip_changes(*current, *next);
                !disruptive.empty() && !c.allow_disruptive) {
                std::string message;
                for (const auto& d : disruptive) message += (message.empty() ? "" : "; ") + d;
                return std::unexpected(
                    "refused: " + message +
                    " (established flows of a VIP without conntrack, and flows the routers move "
                    "between hosts, change backend; confirm with --allow-disruptive); nothing "
                    "written");
            }
            out.changes = config::vip_settings_changes(*current, *next);
            out.summary = out.changes.empty() ? "settings unchanged" : "settings changed:";
            for (const json& ch : out.changes)
                out.summary += fmt::format(" {} {} -> {}", ch.at("key").get<std::string>(),
                                           ch.at("from").dump(), ch.at("to").dump());
            out.next = std::move(*next);
            break;
        }
        case Verb::kVipDel: out.summary = "deleted"; break;
        case Verb::kBackendAdd: {
            config::VipSpec next = *current;
            if (find(next) != next.backends.end())
                return std::unexpected("VIP " + key + " already has backend " + address +
                                       " (change it with xlbctl backend set)");
            config::BackendSpec b;
            b.address = c.backend;
            b.weight = c.weight.value_or(config::kDefaultWeight);
            b.hash_key = c.hash_key;
            b.cookie_acks = c.cookie_acks.value_or(false);
            if (c.server_id) b.server_id = *c.server_id;
            next.backends.push_back(b);
            out.summary = "backend " + address + " added (" + backend_text(b) + ")";
            out.next = std::move(next);
            backend_change = true;
            break;
        }
        case Verb::kBackendDel:
        case Verb::kBackendSet:
        case Verb::kBackendDrain:
        case Verb::kBackendEnable:
        case Verb::kBackendDisable: {
            config::VipSpec next = *current;
            auto b = find(next);
            if (b == next.backends.end())
                return std::unexpected(
                    "VIP " + key + " has no backend " + address +
                    " (xlbctl backend list, or fleet export, shows its backends)");
            backend_change = true;
            if (c.verb == Verb::kBackendDel) {
                next.backends.erase(b);
                out.summary = "backend " + address + " removed";
            } else if (c.verb == Verb::kBackendSet) {
                // As the API's PATCH words it: each setting that changed.
                std::string changed, kept;
                if (c.weight) {
                    if (b->weight == *c.weight)
                        kept += fmt::format("weight {}", *c.weight);
                    else
                        changed += fmt::format(" weight {} -> {}", b->weight, *c.weight);
                    b->weight = *c.weight;
                }
                if (c.cookie_acks) {
                    if (b->cookie_acks == *c.cookie_acks)
                        kept += fmt::format("{}cookie_acks {}", kept.empty() ? "" : ", ",
                                            *c.cookie_acks);
                    else
                        changed +=
                            fmt::format(" cookie_acks {} -> {}", b->cookie_acks, *c.cookie_acks);
                    b->cookie_acks = *c.cookie_acks;
                }
                if (c.server_id) {
                    auto shown = [](const std::optional<std::uint64_t>& id) {
                        return id ? std::to_string(*id) : std::string("unset");
                    };
                    if (b->server_id == *c.server_id)
                        kept += fmt::format("{}server_id {}", kept.empty() ? "" : ", ",
                                            shown(b->server_id));
                    else
                        changed += fmt::format(" server_id {} -> {}", shown(b->server_id),
                                               shown(*c.server_id));
                    b->server_id = *c.server_id;
                }
                out.summary = changed.empty() ? "backend " + address + " unchanged (" + kept + ")"
                                              : "backend " + address + changed;
            } else {
                const config::AdminState state =
                    c.verb == Verb::kBackendDrain    ? config::AdminState::kDrain
                    : c.verb == Verb::kBackendEnable ? config::AdminState::kActive
                                                     : config::AdminState::kDisabled;
                out.summary =
                    b->state == state
                        ? "backend " + address + " unchanged (" + config::to_string(state) + ")"
                        : fmt::format("backend {} {} -> {}", address, config::to_string(b->state),
                                      config::to_string(state));
                b->state = state;
            }
            out.next = std::move(next);
            break;
        }
        default: return std::unexpected(std::string(verb_name(c.verb)) + " does not change a VIP");
    }
    if (out.next)
        if (auto problem = invalid(*out.next, others, settings, backend_change))
            return std::unexpected(*problem);
    return out;
}

std::string written_text(const fleet::Written& w) {
    std::string out = "by " + (w.by.empty() ? std::string("?") : w.by);
    if (!w.host.empty()) out += " on " + w.host;
    if (!w.at.empty()) out += " at " + w.at;
    if (!w.reason.empty()) out += ": " + quoted(w.reason);
    return out;
}

std::optional<fleet::Written> written_of(const std::string& value) {
    const json j = json::parse(value, nullptr, false);
    if (!j.is_object() || !j.contains("written")) return std::nullopt;
    // Any of the desired values: the one decoder of each kind reads it.
    if (auto v = fleet::decode_vip(value)) return v->written;
    if (auto g = fleet::decode_global(value)) return g->written;
    if (auto d = fleet::decode_drain(value)) return d->written;
    return std::nullopt;
}

std::string changed_since_read(const std::string& what, std::int64_t read_revision,
                               const std::optional<StoredValue>& now, bool if_revision) {
    std::string out = "refused: " + what;
    out += if_revision ? fmt::format(" is not at revision {} (--if-revision)", read_revision)
           : read_revision == 0 ? std::string(" was created since it was read")
                                : std::string(" changed since it was read");
    if (!now) {
        out += fmt::format(" (revision {} -> deleted)", read_revision);
    } else {
        out += fmt::format(" (revision {} -> {}", read_revision, now->mod_revision);
        if (auto w = written_of(now->value)) out += ", " + written_text(*w);
        out += ")";
    }
    return out + "; nothing written; run the command again to apply it to the new version";
}

json fleet_status(const fleet::Layout& layout, const StoreRead& read,
                  std::chrono::system_clock::time_point now) {
    json out{{"prefix", layout.prefix}, {"revision", read.revision}};
    const auto desired_keys = stored_keys(read, layout.desired());
    std::int64_t config_revision = 0;
    for (const auto& k : desired_keys) config_revision = std::max(config_revision, k.mod_revision);
    out["config_revision"] = config_revision;
    json problems = json::array();
    if (auto desired = fleet::read_desired(layout, desired_keys); !desired)
        for (const auto& p : desired.error()) problems.push_back(p.to_string());
    if (desired_keys.empty())
        problems.push_back("the fleet has no desired state yet (xlbctl fleet import FILE)");

    json hosts = json::array();
    std::vector<std::pair<std::string, json>> records;
    for (const StoredValue& kv : read.kvs) {
        if (!kv.key.starts_with(layout.hosts())) continue;
        const std::string name = kv.key.substr(layout.hosts().size());
        auto r = fleet::decode_host(kv.value);
        if (!r) {
            problems.push_back(kv.key + "@" + std::to_string(kv.mod_revision) + ": " +
                               r.error().message());
            continue;
        }
        json h{{"host", name},
               {"version", r->version},
               {"config_revision", r->config_revision},
               {"lags", r->config_revision < config_revision},
               {"updated_at", r->updated_at},
               {"lease", kv.lease},
               {"drained", r->drained},
               {"store_reachable", r->store_reachable},
               {"refused", nullptr},
               {"agrees", true}};
        h["applied_at"] = r->applied_at.empty() ? json(nullptr) : json(r->applied_at);
        if (auto at = parse_utc(r->updated_at))
            h["age_seconds"] = std::chrono::duration_cast<std::chrono::seconds>(now - *at).count();
        else
            h["age_seconds"] = nullptr;
        if (r->refused)
            h["refused"] = json{{"revision", r->refused->revision},
                                {"reason", r->refused->reason},
                                {"errors", r->refused->errors}};
        hosts.push_back(std::move(h));
        records.emplace_back(name, json{{"vips", r->vips}});
    }
    json comparison;
    try {
        comparison = compare_peers(records);
    } catch (const json::exception& e) {
        problems.push_back(std::string("a host record lacks a field the comparison needs: ") +
                           e.what());
        comparison = json{{"agree", false}, {"vips", json::array()}};
    }
    bool ok = problems.empty() && !hosts.empty() && comparison.at("agree").get<bool>();
    for (json& h : hosts) {
        const std::string name = h.at("host").get<std::string>() + ": ";
        for (const json& v : comparison.at("vips"))
            for (const json& p : v.at("problems"))
                if (p.get<std::string>().starts_with(name)) h["agrees"] = false;
        if (h.at("lags").get<bool>() || !h.at("refused").is_null() || !h.at("agrees").get<bool>())
            ok = false;
    }
    // Every host whose own probes judge a backend otherwise than the table
    // it runs: the fleet's consensus hides it from the table, not from here.
    json disagreements = json::array();
    for (const json& v : comparison.at("vips"))
        for (json d : v.value("health_disagreements", json::array())) {
            d["vip"] = v.at("vip");
            disagreements.push_back(std::move(d));
        }
    out["hosts"] = std::move(hosts);
    out["state"] = comparison.value("state", ok ? "agree" : "differ");
    out["vips"] = comparison.at("vips");
    out["health_disagreements"] = std::move(disagreements);
    out["unknown"] = comparison.value("unknown", json::array());
    out["problems"] = std::move(problems);
    out["ok"] = ok;
    return out;
}

int fleet_status_exit(const json& status) {
    return status.at("ok").get<bool>() ? kExitOk : kExitFailed;
}

std::string render_fleet_status(const json& s, const Style& style) {
    std::string out = fmt::format(
        "fleet {}: config revision {} (store at revision {})\n", s.at("prefix").get<std::string>(),
        s.at("config_revision").get<std::int64_t>(), s.at("revision").get<std::int64_t>());
    const json& hosts = s.at("hosts");
    if (hosts.empty()) {
        out +=
            paint("no host reports to the fleet (no live hosts/<host> key)", Colour::kRed, style) +
            "\n";
    } else {
        Table t({{"HOST"},
                 {"APPLIED", Align::kRight},
                 {"RECORD AGE", Align::kRight},
                 {"DRAINED"},
                 {"STORE"},
                 {"REFUSED"},
                 {"AGREES"}});
        for (const json& h : hosts) {
            const bool lags = h.at("lags").get<bool>();
            Cell applied{std::to_string(h.at("config_revision").get<std::int64_t>()) +
                             (lags ? " (lags)" : ""),
                         lags ? Colour::kRed : Colour::kNone};
            const json& age = h.at("age_seconds");
            std::string refused = "-";
            if (!h.at("refused").is_null())
                refused = fmt::format("{} ({})", h.at("refused").at("revision").get<std::int64_t>(),
                                      h.at("refused").at("reason").get<std::string>());
            const bool agrees = h.at("agrees").get<bool>();
            t.add({h.at("host").get<std::string>(), applied,
                   age.is_null() ? std::string("?") : age_text(age.get<std::int64_t>()),
                   h.at("drained").get<bool>() ? "yes" : "no",
                   h.at("store_reachable").get<bool>() ? "reachable" : "unreachable",
                   Cell{refused, refused == "-" ? Colour::kNone : Colour::kRed},
                   Cell{agrees ? "yes" : "no", agrees ? Colour::kGreen : Colour::kRed}});
        }
        out += t.render(style);
        for (const json& h : hosts)
            if (!h.at("refused").is_null())
                for (const json& e : h.at("refused").at("errors"))
                    out += fmt::format("   {} refused: {}\n", h.at("host").get<std::string>(),
                                       e.get<std::string>());
        json comparison{{"hosts", json::array()}, {"vips", s.at("vips")}};
        for (const json& h : hosts) comparison["hosts"].push_back(h.at("host"));
        comparison["agree"] = true;
        for (const json& v : s.at("vips"))
            if (!v.at("agree").get<bool>()) comparison["agree"] = false;
        comparison["state"] = s.value("state", "");
        comparison["unknown"] = s.value("unknown", json::array());
        out += render_peers(comparison, style);
    }
    for (const json& p : s.at("problems"))
        out += paint("!!", Colour::kRed, style) + " " + p.get<std::string>() + "\n";
    out += s.at("ok").get<bool>()
               ? paint("ok", Colour::kGreen, style) +
                     ": every host applied the newest revision and they agree\n"
               : paint("not ok", Colour::kRed, style) +
                     ": a host lags, refused or differs, or the fleet has a problem\n";
    return out;
}

ImportPlan plan_import(const fleet::Layout& layout, const config::Config& file,
                       const StoreRead& desired, bool replace, bool allow_disruptive,
                       const fleet::Written& written) {
    ImportPlan plan;
    std::map<std::string, const StoredValue*> now;
    for (const StoredValue& kv : desired.kvs) now[kv.key] = &kv;
    auto add = [&](const std::string& key, std::string value, std::string summary) {
        auto it = now.find(key);
        const StoredValue* was = it == now.end() ? nullptr : it->second;
        const bool tombstone = was && [&] {
            auto v = fleet::decode_vip(was->value);
            return v && !v->vip;
        }();
        std::string action = !was        ? "create"
                             : tombstone ? "create (over a deleted VIP)"
                                         : "replace";
        if (was && !tombstone && !replace) {
            std::string who;
            if (auto w = written_of(was->value)) who = ", " + written_text(*w);
            plan.refusals.push_back(
                fmt::format("{} exists (revision {}{})", key, was->mod_revision, who));
        }
        plan.keys.push_back(json{{"key", key}, {"action", action}, {"summary", summary}});
        plan.writes.push_back(StoreWrite{key, std::move(value), was ? was->mod_revision : 0});
    };
    // The fleet as it is, for the disruptive checks of --replace.
    auto current = fleet::read_desired(layout, stored_keys(desired, layout.desired()));

    fleet::GlobalValue global;
    config::copy_fleet_wide(global.settings, file.settings);
    global.settings.hash_seed_set = true;
    // As for a VIP: a confirmed seed stays confirmed while it stays the same.
    global.allow_disruptive =
        allow_disruptive ||
        (current && current->global && current->global->value.allow_disruptive &&
         current->global->value.settings.hash_seed == file.settings.hash_seed);
    global.written = written;
    add(layout.global(), fleet::encode(global),
        fmt::format("hash_seed {}, encap {}", config::format_hash_seed(file.settings.hash_seed),
                    config::to_string(file.settings.encap)));
    if (current && current->global && !allow_disruptive &&
        current->global->value.settings.hash_seed != file.settings.hash_seed) {
        bool running = false;
        for (const auto& [k, v] : current->vips) running = running || v.value.vip.has_value();
        if (running)
            plan.refusals.push_back(
                "hash_seed " + config::format_hash_seed(current->global->value.settings.hash_seed) +
                " -> " + config::format_hash_seed(file.settings.hash_seed) +
                " moves every VIP's flows to new ring slots (confirm with --allow-disruptive)");
    }
    std::set<std::string> in_file;
    for (const config::VipSpec& v : file.vips) {
        const std::string key = v.key();
        in_file.insert(key);
        bool confirmed = false;
        if (current)
            if (auto it = current->vips.find(key); it != current->vips.end() &&
                                                   it->second.value.vip &&
                                                   it->second.value.allow_disruptive)
                confirmed = it->second.value.vip->hash == v.hash &&
                            it->second.value.vip->ring_size == v.ring_size;
        fleet::VipValue value{v, allow_disruptive || confirmed, written};
        add(layout.vip(key), fleet::encode(value),
            fmt::format("{} backend{}", v.backends.size(), v.backends.size() == 1 ? "" : "s"));
        if (current && !allow_disruptive)
            if (auto it = current->vips.find(key);
                it != current->vips.end() && it->second.value.vip)
                for (const std::string& d :
                     config::disruptive_vip_changes(*it->second.value.vip, v))
                    plan.refusals.push_back("VIP " + key + ": " + d +
                                            " (confirm with --allow-disruptive)");
    }
    if (replace)
        for (const StoredValue& kv : desired.kvs) {
            if (!kv.key.starts_with(layout.vips())) continue;
            const std::string key = kv.key.substr(layout.vips().size());
            auto v = fleet::decode_vip(kv.value);
            if (in_file.contains(key) || (v && !v->vip)) continue;
            fleet::VipValue tomb{std::nullopt, false, written};
            plan.keys.push_back(
                json{{"key", kv.key},
                     {"action", "delete"},
                     {"summary", "not in the file: a tombstone keeps who and why"}});
            plan.writes.push_back(StoreWrite{kv.key, fleet::encode(tomb), kv.mod_revision});
        }
    return plan;
}

std::expected<std::string, std::string> export_yaml(const fleet::Layout& layout,
                                                    const StoreRead& read) {
    auto desired = fleet::read_desired(layout, stored_keys(read, layout.desired()));
    if (!desired) return std::unexpected(problems_text(desired.error()));
    if (!desired->global)
        return std::unexpected(layout.global() +
                               ": missing: the fleet has no settings yet (xlbctl fleet import)");
    config::Config out;
    // Placeholders: every host has its own; xlbd needs them to accept the file.
    out.settings.interface = "eth0";
    out.settings.next_hop.address = net::IpAddress::v4(192, 0, 2, 1);
    out.settings.encap_source.ipv4 = net::IpAddress::v4(192, 0, 2, 2);
    out.settings.encap_source.ipv6 = *net::IpAddress::parse("2001:db8::2");
    config::copy_fleet_wide(out.settings, desired->global->value.settings);
    out.settings.hash_seed_set = true;
    for (const auto& [key, v] : desired->vips)
        if (v.value.vip) out.vips.push_back(*v.value.vip);
    return fmt::format(
               "# The desired state of fleet {} at config revision {} (xlbctl fleet export).\n"
               "# interface, next_hop and encap_source below are PLACEHOLDERS (documentation\n"
               "# addresses): set this host's own before running xlbd with this file.\n",
               layout.prefix, desired->config_revision) +
           config::to_yaml(out) + "\n";
}

std::vector<std::string> vip_diff(const std::optional<fleet::VipValue>& before,
                                  const std::optional<fleet::VipValue>& after) {
    const config::VipSpec* a = before && before->vip ? &*before->vip : nullptr;
    const config::VipSpec* b = after && after->vip ? &*after->vip : nullptr;
    if (!a && !b) return {};
    if (!a)
        return {fmt::format("created ({} backend{})", b->backends.size(),
                            b->backends.size() == 1 ? "" : "s")};
    if (!b) return {"deleted"};
    std::vector<std::string> out;
    for (const config::BackendSpec& x : a->backends) {
        const config::BackendSpec* y = b->find_backend(x.address);
        if (!y)
            out.push_back("backend " + x.address.to_string() + " removed");
        else if (backend_text(x) != backend_text(*y))
            out.push_back("backend " + x.address.to_string() + ": " + backend_text(x) + " -> " +
                          backend_text(*y));
    }
    for (const config::BackendSpec& y : b->backends)
        if (!a->find_backend(y.address))
            out.push_back("backend " + y.address.to_string() + " added (" + backend_text(y) + ")");
    for (const json& ch : config::vip_settings_changes(*a, *b))
        out.push_back(fmt::format("{} {} -> {}", ch.at("key").get<std::string>(),
                                  ch.at("from").dump(), ch.at("to").dump()));
    if (before->allow_disruptive != after->allow_disruptive && after->allow_disruptive)
        out.push_back("written with --allow-disruptive");
    return out;
}

}  // namespace xlb::xlbctl
