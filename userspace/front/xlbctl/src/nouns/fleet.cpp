// SPDX-License-Identifier: Apache-2.0
// xlbctl fleet status|import|export|history: the fleet's store, read or
// filled from a file (fleet.h; docs/fleet.md, "xlbctl and the fleet"). They
// send nothing to the agent: run.cpp hands them to run_fleet().
#include <CLI/CLI.hpp>

#include "../checks.h"
#include "nouns.h"

namespace xlb::xlbctl::noun {

namespace {

HttpRequest no_request(const Command&) { return {}; }

Checked<void> import_check(const Raw& raw, Command& c) {
    c.file = raw.file;
    c.replace = raw.replace;
    c.dry_run = raw.dry_run;
    return {};
}

Checked<void> history_check(const Raw& raw, Command& c) {
    if (raw.diff.empty()) return {};
    if (raw.diff.size() != 2)
        return std::unexpected("--diff: expected two revisions, e.g. --diff 41 43");
    std::int64_t rev[2];
    for (int i = 0; i < 2; ++i) {
        auto n = parse_unsigned(raw.diff[i]);
        if (!n || *n == 0 || *n > static_cast<std::uint64_t>(INT64_MAX))
            return std::unexpected("--diff: found " + in_quotes(raw.diff[i]) +
                                   ", expected a store revision (an integer above 0, as fleet "
                                   "history lists them), e.g. --diff 41 43");
        rev[i] = static_cast<std::int64_t>(*n);
    }
    c.diff = std::pair{rev[0], rev[1]};
    return {};
}

constexpr VerbSpec kFleetVerbs[] = {
    {.verb = Verb::kFleetStatus,
     .name = "status",
     .help = "The fleet as its hosts report it: one line per host (the config revision it\n"
             "applied, how old its record is, drained, refused revision) and one per VIP\n"
             "(which hosts agree on its table inputs and checksum, which differ and in\n"
             "what). Exit 0 when every live host applied the newest revision and agrees,\n"
             "1 when one lags, refused or differs, 2 when the store cannot be read.",
     .examples = "  xlbctl --fleet https://10.0.0.1:2379 --fleet-ca ca.pem fleet status\n"
                 "  xlbctl fleet status --json        # with /etc/xlb/xlbctl.yaml\n",
     .request = no_request},
    {.verb = Verb::kFleetImport,
     .name = "import",
     .help = "Write an xlbd configuration file's fleet-wide settings (hash_seed, encap,\n"
             "...) to desired/global and each of its VIPs to desired/vips/<vip>, in one\n"
             "transaction: every key or none. Only into an empty fleet unless --replace,\n"
             "which also deletes (with a tombstone) the store's VIPs the file lacks.",
     .examples = "  xlbctl fleet import /etc/xlb/xlbd.yaml --dry-run\n"
                 "  xlbctl fleet import /etc/xlb/xlbd.yaml --reason 'move to the fleet'\n"
                 "  xlbctl fleet import new.yaml --replace --allow-disruptive\n",
     .options =
         [](CLI::App& app, Raw& raw) {
             app.add_option("FILE", raw.file, "an xlbd configuration file (YAML)")
                 ->type_name("")
                 ->required();
             app.add_flag("--dry-run", raw.dry_run,
                          "show the keys that would be written, and write nothing");
             app.add_flag("--replace", raw.replace,
                          "overwrite the fleet's values; VIPs not in the file are deleted");
             app.add_flag("--allow-disruptive", raw.allow_disruptive,
                          "confirm a new hash_seed, or a VIP's new hash or ring_size");
         },
     .check = import_check,
     .request = no_request},
    {.verb = Verb::kFleetExport,
     .name = "export",
     .help = "The fleet's desired state as an xlbd configuration file: its fleet-wide\n"
             "settings and VIPs, with placeholder host settings (interface, next_hop)\n"
             "to fill in. xlbd accepts it standalone; fleet import reads it back.",
     .examples = "  xlbctl fleet export -o fleet.yaml\n"
                 "  xlbctl fleet export | grep -c address:\n",
     .options = add_output_option,
     .check = take_output,
     .request = no_request},
    {.verb = Verb::kFleetHistory,
     .name = "history",
     .help = "Every change of a VIP's key still in the store's history, oldest first:\n"
             "revision, when, who, from which host, why, and what changed. --diff shows\n"
             "the VIP's fields that differ between two revisions.",
     .examples = "  xlbctl fleet history 198.51.100.10:80/tcp\n"
                 "  xlbctl fleet history 198.51.100.10:80/tcp --diff 41 43\n",
     .options =
         [](CLI::App& app, Raw& raw) {
             add_vip_arg(&app, raw);
             app.add_option("--diff", raw.diff, "the differences between two revisions")
                 ->type_name("REV1 REV2")
                 ->expected(2);
         },
     .check = history_check,
     .request = no_request},
};

}  // namespace

const Noun& fleet() {
    static const Noun noun{.name = "fleet",
                           .help =
                               "The fleet's store: status of its hosts, import a file, "
                               "export it, a VIP's history.",
                           .examples =
                               "  xlbctl fleet status\n"
                               "  xlbctl fleet import /etc/xlb/xlbd.yaml --dry-run\n"
                               "  xlbctl fleet export -o fleet.yaml\n"
                               "  xlbctl fleet history 198.51.100.10:80/tcp\n",
                           .verbs = kFleetVerbs};
    return noun;
}

}  // namespace xlb::xlbctl::noun
