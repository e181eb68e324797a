// SPDX-License-Identifier: Apache-2.0
// The query pieces the verbs' requests share (request.cpp).
#pragma once

#include <string>

#include "xlb/xlbctl/command.h"
#include "xlb/xlbctl/request.h"

namespace xlb::xlbctl {

// "vip=198.51.100.10%3A80%2Ftcp"
std::string vip_query(const Command& c);
// vip_query() and "&address=ADDR"
std::string backend_query(const Command& c);
// A dry run asks for the prediction instead of the change (docs/api.md).
std::string dry_run(const Command& c);
// The conntrack selectors given, as a query ("" when none).
std::string selector_query(const Command& c);

}  // namespace xlb::xlbctl
