// SPDX-License-Identifier: Apache-2.0
//
// xlb-sim's command line, as a function so that tests run it in-process.

#pragma once

#include <ostream>
#include <string>
#include <vector>

namespace xlb::sim {

// Exit codes: 0 success, 1 the simulation could not run (e.g. a ring size
// Maglev rejects), 2 bad usage.
inline constexpr int kExitOk = 0;
inline constexpr int kExitFailure = 1;
inline constexpr int kExitUsage = 2;

// Runs xlb-sim with `args` (without the program name), writing results to
// `out` and diagnostics to `err`. --plot files are written as a side effect.
int run_cli(const std::vector<std::string>& args, std::ostream& out, std::ostream& err);

}  // namespace xlb::sim
