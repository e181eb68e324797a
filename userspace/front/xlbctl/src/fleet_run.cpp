// SPDX-License-Identifier: Apache-2.0
// xlbctl with a fleet, against its store (fleet.h): each write verb reads
// its key, applies the change to the value and writes it back only if the
// key is still at the revision read; the fleet verbs read or import.
#include <fmt/format.h>
#include <pwd.h>
#include <unistd.h>

#include <fstream>
#include <map>

#include "render_parts.h"
#include "xlb/config/config.h"
#include "xlb/config/json.h"
#include "xlb/fleet/desired.h"
#include "xlb/xlbctl/fleet.h"
#include "xlb/xlbctl/render.h"

#ifndef XLBCTL_VERSION
#define XLBCTL_VERSION "unknown"
#endif

namespace xlb::xlbctl {

namespace {

using json = nlohmann::json;

FleetRun unreachable(const Error& e) {
    return FleetRun{kExitUnreachable, "", "fleet store: " + e.message()};
}

FleetRun refused(std::string message) { return FleetRun{kExitFailed, "", std::move(message)}; }

std::optional<StoredValue> find(const StoreRead& read, const std::string& key) {
    for (const StoredValue& kv : read.kvs)
        if (kv.key == key) return kv;
    return std::nullopt;
}

// The result of a written value: the line, or the JSON.
FleetRun written(const Command& c, const std::string& key, std::int64_t read_revision,
                 std::int64_t revision, const std::string& what, const std::string& summary,
                 const std::string& value, const json& changes) {
    if (c.json)
        return FleetRun{kExitOk,
                        json{{"key", key},
                             {"revision", revision},
                             {"previous_revision", read_revision},
                             {"dry_run", c.dry_run},
                             {"summary", summary},
                             {"changes", changes},
                             {"value", json::parse(value)}}
                                .dump(2) +
                            "\n",
                        ""};
    if (c.dry_run)
        return FleetRun{kExitOk,
                        fmt::format("dry run: {}: {}; would write {} (if still at revision {}); "
                                    "nothing written\n{}\n",
                                    what, summary, key, read_revision, value),
                        ""};
    return FleetRun{
        kExitOk,
        fmt::format("{}: {}; written at revision {} (was {}), {}\n", what, summary, revision,
                    read_revision == 0 ? "absent" : std::to_string(read_revision), key),
        ""};
}

// The write, or the refusal naming who changed the key since.
std::expected<std::int64_t, FleetRun> write_one(FleetStore& store, const std::string& key,
                                                const std::string& value, std::int64_t expect,
                                                const std::string& what, bool if_revision) {
    auto res = store.write({StoreWrite{key, value, expect}});
    if (!res) return std::unexpected(unreachable(res.error()));
    if (!res->succeeded)
        return std::unexpected(refused(changed_since_read(
            what, expect, res->now.empty() ? std::nullopt : std::optional(res->now.front()),
            if_revision)));
    return res->revision;
}

FleetRun write_host(const Command& c, FleetStore& store, const fleet::Layout& layout,
                    const fleet::Written& who) {
    const std::string host = !c.host.empty()               ? c.host
                             : !c.fleet->host_name.empty() ? c.fleet->host_name
                                                           : who.host;
    const std::string key = layout.drain(host);
    auto read = store.get(key);
    if (!read) return unreachable(read.error());
    auto now = find(*read, key);
    const std::int64_t read_revision = now ? now->mod_revision : 0;
    const bool drained = c.verb == Verb::kHostDrain;
    if (now)
        if (auto v = fleet::decode_drain(now->value); !v)
            return refused(key + "@" + std::to_string(read_revision) +
                           ": the store's value does not decode: " + v.error().message());
    const std::string value = fleet::encode(fleet::DrainValue{drained, who});
    const std::string what = "host " + host;
    const std::string summary = drained ? "drained (every VIP withdrawn from the routers)"
                                        : "resumed (VIPs announced by their policy)";
    const std::int64_t expect = c.if_revision.value_or(read_revision);
    if (c.dry_run) return written(c, key, expect, 0, what, summary, value, json::array());
    auto rev = write_one(store, key, value, expect, what, c.if_revision.has_value());
    if (!rev) return rev.error();
    return written(c, key, read_revision, *rev, what, summary, value, json::array());
}

FleetRun write_vip(const Command& c, FleetStore& store, const fleet::Layout& layout,
                   const fleet::Written& who) {
    const std::string key = layout.vip(c.vip);
    auto read = store.get_prefix(layout.desired());
    if (!read) return unreachable(read.error());
    std::optional<StoredValue> now;
    config::Settings settings = client_fleet_settings();
    std::vector<config::VipSpec> others;
    for (const StoredValue& kv : read->kvs) {
        if (kv.key == key) {
            now = kv;
        } else if (kv.key == layout.global()) {
            if (auto g = fleet::decode_global(kv.value))
                config::copy_fleet_wide(settings, g->settings);
        } else if (kv.key.starts_with(layout.vips())) {
            // Another VIP that does not decode is that key's problem, not this write's.
            if (auto v = fleet::decode_vip(kv.value); v && v->vip) others.push_back(*v->vip);
        }
    }
    const std::int64_t read_revision = now ? now->mod_revision : 0;
    std::optional<config::VipSpec> current;
    bool confirmed = false;  // the stored value carries a confirmed disruptive change
    if (now) {
        auto v = fleet::decode_vip(now->value);
        if (!v)
            return refused(key + "@" + std::to_string(read_revision) +
                           ": the store's value does not decode: " + v.error().message() +
                           " (write it whole: xlbctl vip del, then vip add)");
        current = v->vip;
        confirmed = v->allow_disruptive;
    }
    auto applied = apply_to_vip(c, current, others, settings);
    if (!applied) return refused(applied.error());
    // A confirmation stays with the value while its hash and ring size stay
    // as confirmed: a host that missed the confirmed revision (its watch
    // broke, it was stopped) must not refuse the next, ordinary change.
    const bool keeps_confirmation = confirmed && current && applied->next &&
                                    current->hash == applied->next->hash &&
                                    current->ring_size == applied->next->ring_size;
    const std::string value = fleet::encode(
        fleet::VipValue{applied->next, c.allow_disruptive || keeps_confirmation, who});
    const std::string what = "VIP " + c.vip;
    const std::int64_t expect = c.if_revision.value_or(read_revision);
    if (c.dry_run)
        return written(c, key, expect, 0, what, applied->summary, value, applied->changes);
    auto rev = write_one(store, key, value, expect, what, c.if_revision.has_value());
    if (!rev) return rev.error();
    return written(c, key, read_revision, *rev, what, applied->summary, value, applied->changes);
}

FleetRun import(const Command& c, FleetStore& store, const fleet::Layout& layout,
                const fleet::Written& who) {
    auto file = config::load_config_file(c.file);
    if (!file) {
        std::string message;
        for (const auto& e : file.error()) message += (message.empty() ? "" : "; ") + e.to_string();
        return FleetRun{kExitUsage, "", "fleet import: " + message};
    }
    if (file->settings.fleet.enabled)
        return FleetRun{kExitUsage, "",
                        "fleet import: " + c.file +
                            " is a fleet host's file (it has fleet:): its VIPs and seed are in "
                            "the store already; import a standalone xlbd file"};
    if (auto missing = config::missing_hash_seed(*file, c.file))
        return FleetRun{kExitUsage, "",
                        "fleet import: " + c.file +
                            ": hash_seed is not set, and every host of the fleet needs the same "
                            "one: make one with `xlbctl gen-seed`, add the line it prints to "
                            "the file, and import it again"};
    auto read = store.get_prefix(layout.desired());
    if (!read) return unreachable(read.error());
    const ImportPlan plan = plan_import(layout, *file, *read, c.replace, c.allow_disruptive, who);
    std::string refusals;
    for (const auto& r : plan.refusals) refusals += (refusals.empty() ? "" : "; ") + r;
    if (!plan.refusals.empty() && !c.dry_run)
        return refused("refused: " + refusals + "; nothing written" +
                       (c.replace ? "" : " (--replace overwrites the fleet's values)"));
    std::int64_t revision = 0;
    if (!c.dry_run) {
        auto res = store.write(plan.writes);
        if (!res) return unreachable(res.error());
        if (!res->succeeded) {
            std::string who_changed;
            for (const StoredValue& kv : res->now) {
                std::int64_t read_rev = 0;
                for (const StoreWrite& w : plan.writes)
                    if (w.key == kv.key) read_rev = w.expect_revision;
                if (kv.mod_revision == read_rev) continue;
                who_changed +=
                    fmt::format("; {} revision {} -> {}", kv.key, read_rev, kv.mod_revision);
                if (auto w = written_of(kv.value)) who_changed += ", " + written_text(*w);
            }
            return refused("refused: the fleet changed since it was read" + who_changed +
                           "; nothing written; run the command again");
        }
        revision = res->revision;
    }
    if (c.json)
        return FleetRun{plan.refusals.empty() ? kExitOk : kExitFailed,
                        json{{"dry_run", c.dry_run},
                             {"revision", revision},
                             {"keys", plan.keys},
                             {"refusals", plan.refusals}}
                                .dump(2) +
                            "\n",
                        ""};
    std::string out = c.dry_run ? fmt::format(
                                      "dry run of fleet import {}: would write {} keys "
                                      "in one transaction; nothing written\n",
                                      c.file, plan.keys.size())
                                : fmt::format("imported {}: {} keys written at revision {}\n",
                                              c.file, plan.keys.size(), revision);
    for (const json& k : plan.keys)
        out += fmt::format("  {} {}: {}\n", k.at("action").get<std::string>(),
                           k.at("key").get<std::string>(), k.at("summary").get<std::string>());
    if (!plan.refusals.empty())
        return FleetRun{kExitFailed, out, "the import would be refused: " + refusals};
    return FleetRun{kExitOk, out, ""};
}

FleetRun export_file(const Command& c, FleetStore& store, const fleet::Layout& layout) {
    auto read = store.get_prefix(layout.desired());
    if (!read) return unreachable(read.error());
    auto yaml = export_yaml(layout, *read);
    if (!yaml) return refused("fleet export: " + yaml.error());
    if (!c.output.empty()) {
        std::ofstream out(c.output, std::ios::binary | std::ios::trunc);
        out << *yaml;
        out.flush();
        if (!out)
            return FleetRun{kExitFailed, "",
                            "fleet export: cannot write " + c.output + ": " + std::strerror(errno)};
    }
    if (c.json)
        return FleetRun{
            kExitOk,
            json{{"revision", read->revision}, {"output", c.output}, {"yaml", *yaml}}.dump(2) +
                "\n",
            ""};
    if (!c.output.empty())
        return FleetRun{
            kExitOk, fmt::format("wrote {} (store revision {})\n", c.output, read->revision), ""};
    return FleetRun{kExitOk, *yaml, ""};
}

std::optional<fleet::VipValue> decoded(const std::optional<StoredValue>& kv) {
    if (!kv) return std::nullopt;
    auto v = fleet::decode_vip(kv->value);
    if (!v) return std::nullopt;
    return std::move(*v);
}

FleetRun history(const Command& c, FleetStore& store, const fleet::Layout& layout) {
    const std::string key = layout.vip(c.vip);
    if (c.diff) {
        std::optional<fleet::VipValue> at[2];
        for (int i = 0; i < 2; ++i) {
            const std::int64_t rev = i == 0 ? c.diff->first : c.diff->second;
            auto read = store.get(key, rev);
            if (!read)
                return refused(fmt::format("fleet history --diff: {} at revision {}: {}", key, rev,
                                           read.error().message()));
            at[i] = decoded(find(*read, key));
        }
        const auto lines = vip_diff(at[0], at[1]);
        if (c.json)
            return FleetRun{kExitOk,
                            json{{"vip", c.vip},
                                 {"from", c.diff->first},
                                 {"to", c.diff->second},
                                 {"changes", lines}}
                                    .dump(2) +
                                "\n",
                            ""};
        std::string out =
            fmt::format("VIP {} from revision {} to {}:\n", c.vip, c.diff->first, c.diff->second);
        if (lines.empty()) out += "  no difference\n";
        for (const auto& l : lines) out += "  " + l + "\n";
        return FleetRun{kExitOk, out, ""};
    }
    // Newest first: each version's mod_revision, then the store just before it.
    struct Version {
        std::int64_t revision;
        std::optional<fleet::VipValue> value;
    };
    std::vector<Version> versions;
    std::string end_note;
    std::int64_t at = 0;
    while (true) {
        auto read = store.get(key, at);
        if (!read) {
            if (versions.empty()) return unreachable(read.error());
            end_note = "older changes are no longer in the store's history (" +
                       read.error().message() + ")";
            break;
        }
        auto kv = find(*read, key);
        if (!kv) break;
        versions.push_back({kv->mod_revision, decoded(kv)});
        if (kv->mod_revision <= 1) break;
        at = kv->mod_revision - 1;
    }
    if (versions.empty())
        return refused("fleet history: no VIP " + c.vip + " in the store's history (" + key + ")");
    json entries = json::array();
    for (std::size_t i = versions.size(); i-- > 0;) {
        const auto& v = versions[i];
        const std::optional<fleet::VipValue> before =
            i + 1 < versions.size() ? versions[i + 1].value : std::nullopt;
        const fleet::Written w = v.value ? v.value->written : fleet::Written{};
        entries.push_back(
            json{{"revision", v.revision},
                 {"at", w.at},
                 {"by", w.by},
                 {"uid", w.uid},
                 {"host", w.host},
                 {"reason", w.reason},
                 {"tool", w.tool},
                 {"changes", v.value ? json(vip_diff(before, v.value))
                                     : json::array({"a value that does not decode"})}});
    }
    if (c.json)
        return FleetRun{
            kExitOk,
            json{{"vip", c.vip}, {"key", key}, {"changes", entries}, {"note", end_note}}.dump(2) +
                "\n",
            ""};
    Table t({{"REVISION", Align::kRight}, {"WHEN"}, {"WHO"}, {"HOST"}, {"REASON"}, {"WHAT"}});
    for (const json& e : entries) {
        std::string what;
        for (const json& ch : e.at("changes"))
            what += (what.empty() ? "" : "; ") + ch.get<std::string>();
        const std::string reason = e.at("reason").get<std::string>();
        t.add({std::to_string(e.at("revision").get<std::int64_t>()), e.at("at").get<std::string>(),
               e.at("by").get<std::string>(), e.at("host").get<std::string>(),
               reason.empty() ? "-" : reason, what.empty() ? "no change" : what});
    }
    std::string out = "VIP " + c.vip + " (" + key + ")\n" + t.render(Style{false});
    if (!end_note.empty()) out += end_note + "\n";
    return FleetRun{kExitOk, out, ""};
}

}  // namespace

config::Settings client_fleet_settings() {
    // The checks a change needs without one host's settings: both families
    // have an encapsulation source (as xlbctl's own checks assume).
    config::Settings s;
    s.encap_source.ipv4 = net::IpAddress::v4(192, 0, 2, 1);
    s.encap_source.ipv6 = *net::IpAddress::parse("2001:db8::1");
    return s;
}

bool fleet_write_verb(Verb v) {
    switch (v) {
        case Verb::kVipAdd:
        case Verb::kVipDel:
        case Verb::kVipSet:
        case Verb::kBackendAdd:
        case Verb::kBackendDel:
        case Verb::kBackendSet:
        case Verb::kBackendDrain:
        case Verb::kBackendEnable:
        case Verb::kBackendDisable:
        case Verb::kHostDrain:
        case Verb::kHostResume: return true;
        default: return false;
    }
}

FleetRun run_fleet(const Command& c, FleetStore& store, const fleet::Written& who_in,
                   const Style& style, std::chrono::system_clock::time_point now) {
    const fleet::Layout layout{config::fleet_prefix(*c.fleet)};
    fleet::Written who = who_in;
    who.reason = c.reason;
    switch (c.verb) {
        case Verb::kHostDrain:
        case Verb::kHostResume: return write_host(c, store, layout, who);
        case Verb::kFleetImport: return import(c, store, layout, who);
        case Verb::kFleetExport: return export_file(c, store, layout);
        case Verb::kFleetHistory: return history(c, store, layout);
        case Verb::kFleetStatus: {
            auto read = store.get_prefix(layout.prefix);
            if (!read)
                return FleetRun{kExitFleetError, "", "fleet status: " + read.error().message()};
            const json status = fleet_status(layout, *read, now);
            return FleetRun{fleet_status_exit(status),
                            c.json ? status.dump(2) + "\n" : render_fleet_status(status, style),
                            ""};
        }
        default: return write_vip(c, store, layout, who);
    }
}

fleet::Written local_writer(const std::string& at) {
    fleet::Written w;
    w.uid = ::getuid();
    if (const passwd* pw = ::getpwuid(w.uid)) w.by = pw->pw_name;
    if (w.by.empty()) w.by = std::to_string(w.uid);
    char host[256] = {};
    if (::gethostname(host, sizeof(host) - 1) == 0) w.host = host;
    w.at = at;
    w.tool = "xlbctl " XLBCTL_VERSION;
    return w;
}

}  // namespace xlb::xlbctl
