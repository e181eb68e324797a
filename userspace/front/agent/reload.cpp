// SPDX-License-Identifier: Apache-2.0
#include "xlb/agent/reload.h"

#include <array>
#include <map>

#include "xlb/config/vip_merge.h"

namespace xlb::agent {
namespace {

std::map<std::string, const config::VipSpec*> by_key(const std::vector<config::VipSpec>& vips) {
    std::map<std::string, const config::VipSpec*> out;
    for (const auto& v : vips) out.emplace(v.key(), &v);
    return out;
}

// One row per setting: its name in the file, whether a reload applies it,
// and how to compare and copy it. The only list of reloadable settings.
struct SettingRow {
    const char* name;
    bool reloadable;
    bool (*differs)(const config::Settings&, const config::Settings&);
    void (*copy)(config::Settings& to, const config::Settings& from);
};

template <auto Member>
constexpr SettingRow row(const char* name, bool reloadable) {
    return {
        name, reloadable,
        [](const config::Settings& a, const config::Settings& b) { return a.*Member != b.*Member; },
        [](config::Settings& to, const config::Settings& from) { to.*Member = from.*Member; }};
}

// A field of a settings section, for sections whose fields differ in
// whether a reload applies them.
template <auto Section, auto Field>
constexpr SettingRow field_row(const char* name, bool reloadable) {
    return {name, reloadable,
            [](const config::Settings& a, const config::Settings& b) {
                return (a.*Section).*Field != (b.*Section).*Field;
            },
            [](config::Settings& to, const config::Settings& from) {
                (to.*Section).*Field = (from.*Section).*Field;
            }};
}

using S = config::Settings;
using Ct = config::ConntrackSettings;
constexpr std::array kSettingRows = {
    row<&S::interface>("interface", false),
    row<&S::xdp_mode>("xdp_mode", false),
    row<&S::next_hop>("next_hop", true),
    row<&S::encap_source>("encap_source", true),
    row<&S::hash_seed>("hash_seed", true),
    row<&S::mtu>("mtu", true),
    row<&S::icmp_too_big>("icmp_too_big", true),
    // Fields of xlb_config: the next packet is encapsulated the new way
    // (backends running xlb-decap take both).
    row<&S::encap>("encap", true),
    row<&S::gue_port>("gue_port", true),
    // A flag of xlb_config and the reconciler's window: from the next
    // packet and the next table (turned off, previous rings go at once).
    row<&S::second_chance>("second_chance", true),
    // The flood detector's thresholds: it takes the new ones at its next
    // sample; no flow or table depends on them.
    row<&S::syn_flood>("syn_flood", true),
    row<&S::maps>("maps", false),
    row<&S::api_socket>("api.socket", false),
    row<&S::api_group>("api.group", false),
    row<&S::metrics_listen>("metrics.listen", false),
    row<&S::state_file>("state_file", false),
    row<&S::pin_dir>("pin_dir", false),
    // The announcer is made at start; a restart keeps every route (the
    // routes file and BIRD outlive the agent), so it costs no traffic.
    row<&S::bgp>("bgp", false),
    // The budget is a field of xlb_config, rewritten at once; the sweeper
    // picks up its new interval at its next wait.
    field_row<&S::conntrack, &Ct::insert_rate>("conntrack.insert_rate", true),
    field_row<&S::conntrack, &Ct::insert_burst>("conntrack.insert_burst", true),
    field_row<&S::conntrack, &Ct::sweep_interval>("conntrack.sweep_interval", true),
    // Decided when the maps are loaded.
    field_row<&S::conntrack, &Ct::resize>("conntrack.resize", false),
    // The histories are resized at once (a smaller one drops the oldest).
    row<&S::health_history>("health_history", true),
    // Which store, and this host's name in it: read at start.
    row<&S::fleet>("fleet", false),
};

std::vector<std::string> changes(const S& a, const S& b, bool reloadable) {
    std::vector<std::string> out;
    for (const SettingRow& r : kSettingRows)
        if (r.reloadable == reloadable && r.differs(a, b)) out.push_back(r.name);
    return out;
}

}  // namespace

config::Settings reloadable_settings(const S& running, const S& next) {
    S out = running;
    for (const SettingRow& r : kSettingRows)
        if (r.reloadable) r.copy(out, next);
    return out;
}

std::vector<std::string> reloadable_changes(const S& before, const S& after) {
    return changes(before, after, true);
}

std::vector<std::string> restart_only_changes(const S& before, const S& after) {
    return changes(before, after, false);
}

std::vector<std::string> disruptive_changes(const S& before, const S& after,
                                            const std::vector<config::VipSpec>& running,
                                            const std::vector<config::VipSpec>& next) {
    std::vector<std::string> out;
    if (before.hash_seed != after.hash_seed)
        out.push_back("hash_seed " + std::to_string(before.hash_seed) + " -> " +
                      std::to_string(after.hash_seed) +
                      ": every VIP's flows move to new ring slots");
    const auto now = by_key(running);
    for (const auto& v : next) {
        auto it = now.find(v.key());
        if (it == now.end()) continue;
        for (std::string& change : config::disruptive_vip_changes(*it->second, v))
            out.push_back(std::move(change));
    }
    return out;
}

ReloadResult merge_reload(const std::vector<config::VipSpec>& old_file,
                          const std::vector<config::VipSpec>& new_file,
                          const std::vector<config::VipSpec>& running) {
    const std::vector<config::VipThreeWay> vips =
        config::compare_three_way(&old_file, new_file, running);
    ReloadResult result;

    // VIPs running now: kept unless the file's edit touches them.
    for (const config::VipThreeWay& w : vips) {
        if (!w.running) continue;
        if (!w.file_changed) {
            ++result.untouched;
            result.vips.push_back(*w.running);
            continue;
        }
        if (!w.file) {
            result.removed.push_back(w.key);
            continue;
        }
        // The file's new version is what already runs (e.g. a file written
        // by `xlbctl export`): nothing changes, and nothing is replaced.
        if (*w.file == *w.running) {
            ++result.untouched;
            result.vips.push_back(*w.running);
            continue;
        }
        // edited in the file (or added to the file while it existed at runtime)
        if (w.runtime_changed)
            result.warnings.push_back("VIP " + w.key +
                                      ": the file's new version replaces runtime changes");
        result.changed.push_back(w.key);
        result.vips.push_back(*w.file);
    }
    // VIPs new in the file.
    for (const config::VipThreeWay& w : vips) {
        if (w.running || !w.file) continue;
        if (!w.file_changed) {
            // removed at runtime and untouched in the file: stays removed
            ++result.untouched;
            continue;
        }
        result.added.push_back(w.key);
        result.vips.push_back(*w.file);
    }
    return result;
}

}  // namespace xlb::agent
