// SPDX-License-Identifier: Apache-2.0
// xlbctl: the operator's command line (man xlbctl, docs/xlbctl.md).
#include <signal.h>

#include <string>
#include <vector>

#include "xlb/xlbctl/run.h"

int main(int argc, char** argv) {
    // A closed pipe (xlbctl ... | head) ends the output quietly.
    ::signal(SIGPIPE, SIG_IGN);
    std::vector<std::string> args(argv + 1, argv + argc);
    xlb::xlbctl::Io io = xlb::xlbctl::process_io();
    return xlb::xlbctl::run(args, io);
}
