// SPDX-License-Identifier: Apache-2.0
#include "xlb/fleet/desired.h"

#include <algorithm>

#include "xlb/config/config.h"

namespace xlb::fleet {

std::string Problem::to_string() const {
    return key + "@" + std::to_string(revision) + ": " + message;
}

std::expected<Desired, std::vector<Problem>> read_desired(const Layout& layout,
                                                          std::span<const StoredKey> keys) {
    Desired out;
    std::vector<Problem> problems;
    for (const StoredKey& k : keys) {
        out.config_revision = std::max(out.config_revision, k.mod_revision);
        auto problem = [&](std::string message) {
            problems.push_back(Problem{k.key, k.mod_revision, std::move(message)});
        };
        if (k.key == layout.global()) {
            auto v = decode_global(k.value);
            if (!v)
                problem(v.error().message());
            else
                out.global = Versioned<GlobalValue>{std::move(*v), k.mod_revision};
        } else if (k.key.starts_with(layout.vips())) {
            const std::string name = k.key.substr(layout.vips().size());
            auto parsed = config::parse_vip_key(name);
            if (!parsed) {
                problem("the key does not name a VIP: " + parsed.error());
                continue;
            }
            auto v = decode_vip(k.value);
            if (!v) {
                problem(v.error().message());
                continue;
            }
            // One spelling per VIP: the key as the VIP writes its own.
            if (parsed->to_string() != name) {
                problem("the key spells the VIP " + name + ", expected " + parsed->to_string());
                continue;
            }
            if (v->vip && v->vip->key() != name) {
                problem("the value is VIP " + v->vip->key() + ", expected the key's " + name);
                continue;
            }
            out.vips.emplace(name, Versioned<VipValue>{std::move(*v), k.mod_revision});
        } else if (k.key.starts_with(layout.drains())) {
            auto v = decode_drain(k.value);
            if (!v)
                problem(v.error().message());
            else
                out.drains.emplace(k.key.substr(layout.drains().size()),
                                   Versioned<DrainValue>{std::move(*v), k.mod_revision});
        } else {
            problem(
                "not a key of the fleet's layout (desired/global, desired/vips/<vip>, "
                "desired/hosts/<host>)");
        }
    }
    if (!problems.empty()) return std::unexpected(std::move(problems));
    return out;
}

std::expected<config::Config, std::vector<Problem>> host_config(const Layout& layout,
                                                                const Desired& desired,
                                                                const config::Settings& host) {
    if (!desired.global)
        return std::unexpected(std::vector<Problem>{Problem{
            layout.global(), desired.config_revision,
            "missing: the fleet has no settings and no hash seed yet (xlbctl fleet import)"}});
    config::Config out;
    out.settings = host;
    config::copy_fleet_wide(out.settings, desired.global->value.settings);
    std::vector<std::string> keys;  // of out.vips, in order
    for (const auto& [key, v] : desired.vips) {
        if (!v.value.vip) continue;
        out.vips.push_back(*v.value.vip);
        keys.push_back(key);
    }
    std::vector<Problem> problems;
    for (const config::ValidationIssue& issue : config::check_config(out)) {
        // "vips[3].backends[0].weight: ..." belongs to the fourth VIP's key;
        // anything else to the settings.
        std::string key = layout.global();
        std::int64_t revision = desired.global->mod_revision;
        std::string path = issue.path;
        if (path.starts_with("vips[")) {
            const std::size_t index = std::stoul(path.substr(5));
            if (index < keys.size()) {
                key = layout.vip(keys[index]);
                revision = desired.vips.at(keys[index]).mod_revision;
                const auto dot = path.find("].");
                path = dot == std::string::npos ? std::string() : "vip." + path.substr(dot + 2);
            }
        }
        problems.push_back(
            Problem{key, revision, path.empty() ? issue.message : path + ": " + issue.message});
    }
    if (!problems.empty()) return std::unexpected(std::move(problems));
    return out;
}

std::vector<Problem> unconfirmed_disruptive(const Layout& layout, const config::Config& running,
                                            const Desired& desired, const config::Config& next) {
    std::vector<Problem> out;
    // With no VIP running, a new seed moves no flow (the first apply).
    if (running.settings.hash_seed != next.settings.hash_seed && !running.vips.empty() &&
        desired.global && !desired.global->value.allow_disruptive)
        out.push_back(Problem{layout.global(), desired.global->mod_revision,
                              "hash_seed " + config::format_hash_seed(running.settings.hash_seed) +
                                  " -> " + config::format_hash_seed(next.settings.hash_seed) +
                                  " moves every VIP's flows to new ring slots; write it with "
                                  "--allow-disruptive to confirm"});
    for (const config::VipSpec& now : next.vips) {
        const config::VipSpec* was = running.find_vip(now.key());
        if (!was) continue;
        const std::vector<std::string> changes = config::disruptive_vip_changes(*was, now);
        if (changes.empty()) continue;
        const Versioned<VipValue>& v = desired.vips.at(now.key());
        if (v.value.allow_disruptive) continue;
        for (const std::string& change : changes)
            out.push_back(Problem{layout.vip(now.key()), v.mod_revision,
                                  change + "; write it with --allow-disruptive to confirm"});
    }
    return out;
}

}  // namespace xlb::fleet
