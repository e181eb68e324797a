// SPDX-License-Identifier: Apache-2.0
// SIGHUP applies only what changed in the file. A VIP the operator added,
// removed or edited in the file since the last load takes the file's new
// version; every other VIP keeps its running state, runtime (API) changes
// included. Pure logic.
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

ReloadResult merge_reload(const std::vector<config::VipSpec>& old_file,
                          const std::vector<config::VipSpec>& new_file,
                          const std::vector<config::VipSpec>& running);

}  // namespace xlb::agent
