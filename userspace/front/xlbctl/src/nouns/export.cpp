// SPDX-License-Identifier: Apache-2.0
// xlbctl export: what the agent runs (its file and the changes made through
// the API) as a configuration file it accepts (GET /v1/config/export).
// run.cpp writes it: to standard output, or to -o FILE.
#include <CLI/CLI.hpp>

#include "../checks.h"
#include "nouns.h"

namespace xlb::xlbctl::noun {

namespace {

constexpr VerbSpec kExportVerbs[] = {
    {.verb = Verb::kExport,
     .help = "Write the agent's desired state as a configuration file xlbd accepts: the\n"
             "settings in force and every VIP and backend, with the changes made through\n"
             "the API (weights, drains, VIPs added or removed). Loading it gives the same\n"
             "state; `xlbctl diff FILE` then shows no difference. It holds the hash seed:\n"
             "-o writes the file with mode 0600. A fleet's host writes its own settings\n"
             "only (its VIPs are the fleet's: xlbctl fleet export).",
     .examples = "  xlbctl export -o /etc/xlb/xlbd.yaml.new\n"
                 "  xlbctl export | grep -c address:\n",
     .options = add_output_option,
     .check = take_output,
     .request =
         [](const Command&) {
             return HttpRequest{"GET", "/v1/config/export", ""};
         }},
};

}  // namespace

const Noun& export_state() {
    static const Noun noun{.name = "export", .verbs = kExportVerbs};
    return noun;
}

}  // namespace xlb::xlbctl::noun
