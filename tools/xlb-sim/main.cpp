// SPDX-License-Identifier: Apache-2.0
// xlb-sim: offline placement, balancing and fleet simulations (docs/placement.md,
// docs/fleet.md).
#include <iostream>

#include "xlb/sim/cli.h"

int main(int argc, char** argv) {
    std::vector<std::string> args(argv + 1, argv + argc);
    return xlb::sim::run_cli(args, std::cout, std::cerr);
}
