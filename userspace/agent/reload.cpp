// SPDX-License-Identifier: Apache-2.0
#include "xlb/agent/reload.h"

#include <map>

namespace xlb::agent {
namespace {

std::map<std::string, const config::VipSpec*> by_key(const std::vector<config::VipSpec>& vips) {
    std::map<std::string, const config::VipSpec*> out;
    for (const auto& v : vips) out.emplace(v.key(), &v);
    return out;
}

}  // namespace

ReloadResult merge_reload(const std::vector<config::VipSpec>& old_file,
                          const std::vector<config::VipSpec>& new_file,
                          const std::vector<config::VipSpec>& running) {
    const auto before = by_key(old_file);
    const auto after = by_key(new_file);
    const auto now = by_key(running);
    ReloadResult result;

    // VIPs running now: kept unless the file's edit touches them.
    for (const auto& [key, spec] : now) {
        auto was = before.find(key);
        auto is = after.find(key);
        const bool in_old = was != before.end(), in_new = is != after.end();
        if (in_old && !in_new) {
            result.removed.push_back(key);
            continue;
        }
        if (in_new && (!in_old || !(*was->second == *is->second))) {
            // edited in the file (or added to the file while it existed at runtime)
            if (!in_old || !(*spec == *was->second))
                result.warnings.push_back("VIP " + key +
                                          ": the file's new version replaces runtime changes");
            result.changed.push_back(key);
            result.vips.push_back(*is->second);
            continue;
        }
        ++result.untouched;
        result.vips.push_back(*spec);
    }
    // VIPs new in the file.
    for (const auto& [key, spec] : after) {
        if (now.contains(key)) continue;
        auto was = before.find(key);
        if (was != before.end() && *was->second == *spec) {
            // removed at runtime and untouched in the file: stays removed
            ++result.untouched;
            continue;
        }
        result.added.push_back(key);
        result.vips.push_back(*spec);
    }
    return result;
}

}  // namespace xlb::agent
