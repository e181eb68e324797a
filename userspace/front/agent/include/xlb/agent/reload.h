// SPDX-License-Identifier: Apache-2.0
// SIGHUP applies only what changed in the file. A VIP the operator added,
// removed or edited in the file since the last load takes the file's new
// version; every other VIP keeps its running state, runtime (API) changes
// included. A file's version equal to what runs (a file written by `xlbctl
// export`) changes nothing and counts as untouched. Pure logic.
#pragma once

#include <string>
#include <vector>

#include "xlb/config/model.h"

namespace xlb::agent {

struct ReloadResult {
    std::vector<config::VipSpec> vips;  // the new desired state
    std::vector<std::string> added, removed, changed;
    std::size_t untouched = 0;
    // e.g. runtime changes to a VIP that the file's edit supersedes
    std::vector<std::string> warnings;
};

// The settings a reload applies at once, copied from `next` onto the
// running ones; every other setting keeps its running value until a restart.
// One table (reload.cpp) says which is which.
config::Settings reloadable_settings(const config::Settings& running, const config::Settings& next);
// Names of the settings that differ ("hash_seed", "api.socket", ...), of
// those a reload applies, and of those only a restart applies.
std::vector<std::string> reloadable_changes(const config::Settings& before,
                                            const config::Settings& after);
std::vector<std::string> restart_only_changes(const config::Settings& before,
                                              const config::Settings& after);

// Changes that move established flows: a new hash_seed remaps every flow
// (each VIP's ring slot changes), a VIP's new `hash` mode or `ring_size`
// remaps that VIP's flows. Flows the connection table holds keep their
// backend on this host; flows of VIPs without conntrack, and every flow the
// routers send to another LB host that has not reloaded yet, move. One line
// per change, saying what moves.
std::vector<std::string> disruptive_changes(const config::Settings& before,
                                            const config::Settings& after,
                                            const std::vector<config::VipSpec>& running,
                                            const std::vector<config::VipSpec>& next);

ReloadResult merge_reload(const std::vector<config::VipSpec>& old_file,
                          const std::vector<config::VipSpec>& new_file,
                          const std::vector<config::VipSpec>& running);

}  // namespace xlb::agent
