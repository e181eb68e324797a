// SPDX-License-Identifier: Apache-2.0
// Internal to xlb_api: small filesystem helpers shared by the state file and
// the socket setup.
#pragma once

#include <expected>
#include <string>

#include "xlb/api/server.h"  // parent_dir, resolve_group
#include "xlb/error.h"

namespace xlb::api::detail {

// mkdir -p; directories it creates get mode 0755, existing ones are left as
// they are. The error names the directory and the errno text.
Result<void> make_dirs(const std::string& dir);

}  // namespace xlb::api::detail
