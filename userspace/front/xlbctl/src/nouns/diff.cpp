// SPDX-License-Identifier: Apache-2.0
// xlbctl diff FILE: what a reload with FILE as the configuration would
// change, as the agent computes it for a reload (POST /v1/reload?dry_run=1);
// nothing is applied. Exit 0: no difference, 1: differences, 2: an error.
#include <fmt/format.h>

#include <CLI/CLI.hpp>

#include "../checks.h"
#include "../render_parts.h"
#include "nouns.h"
#include "xlb/files/files.h"

namespace xlb::xlbctl::noun {

namespace {

Checked<void> diff_check(const Raw& raw, Command& c) {
    c.file = raw.file;
    auto text = files::read_file(raw.file);
    if (!text) return std::unexpected(text.error().message());
    if (!*text)
        return std::unexpected(raw.file +
                               ": no such file, expected an xlbd configuration file (YAML)");
    c.file_text = std::move(**text);
    return {};
}

// What a reload with the file would change, VIP by VIP and field by field;
// one line when nothing would.
std::string render_diff(const Command& c, const json& r, const Style& style) {
    const json& differences = r.at("differences");
    const bool settings = !r.at("settings_changed").empty() || !r.at("restart_required").empty();
    if (r.at("added").empty() && r.at("removed").empty() && r.at("changed").empty() && !settings &&
        r.at("disruptive").empty())
        return fmt::format("no difference: a reload with {} would change nothing ({} VIP(s))\n",
                           c.file, u64(r, "untouched"));
    std::string out = fmt::format(
        "{} against what runs: added {}; removed {}; changed {}; {} "
        "VIP(s) the same\n",
        c.file, list_or_none(r.at("added")), list_or_none(r.at("removed")),
        list_or_none(r.at("changed")), u64(r, "untouched"));
    for (const json& d : differences) out += "  " + d.get<std::string>() + "\n";
    if (!r.at("settings_changed").empty())
        out +=
            fmt::format("settings a reload applies: {}\n", list_or_none(r.at("settings_changed")));
    if (!r.at("restart_required").empty())
        out += fmt::format("settings that take effect at the next restart: {}\n",
                           list_or_none(r.at("restart_required")));
    for (const json& d : r.at("disruptive"))
        out += paint("disruptive: " + d.get<std::string>(), Colour::kYellow, style) + "\n";
    if (str(r, "result") == "disruptive_refused")
        out += "a reload needs --allow-disruptive to apply it\n";
    for (const json& w : r.at("warnings")) out += "warning: " + w.get<std::string>() + "\n";
    return out;
}

HttpRequest diff_request(const Command& c) {
    return HttpRequest{"POST", "/v1/reload?dry_run=1",
                       nlohmann::json{{"config", c.file_text}, {"file", c.file}}.dump()};
}

constexpr VerbSpec kDiffVerbs[] = {
    {.verb = Verb::kDiff,
     .help = "Show what applying FILE (an xlbd configuration file) would change: the report\n"
             "a reload with FILE in place of the agent's file would give, field by field,\n"
             "with nothing applied. Runtime changes a reload keeps are not differences.\n"
             "Exit 0: no difference; 1: differences; 2: an error (FILE unreadable or\n"
             "invalid, with file:line:column, or the agent unreachable), as diff(1).",
     .examples = "  xlbctl diff /etc/xlb/xlbd.yaml.new\n"
                 "  xlbctl export -o /etc/xlb/xlbd.yaml.new; xlbctl diff /etc/xlb/xlbd.yaml.new\n"
                 "  xlbctl diff new.yaml --json\n",
     .options =
         [](CLI::App& app, Raw& raw) {
             app.add_option("FILE", raw.file, "an xlbd configuration file (YAML)")
                 ->type_name("")
                 ->required();
         },
     .check = diff_check,
     .request = diff_request,
     .render = render_diff},
};

}  // namespace

const Noun& diff() {
    static const Noun noun{.name = "diff", .verbs = kDiffVerbs};
    return noun;
}

}  // namespace xlb::xlbctl::noun
