// SPDX-License-Identifier: Apache-2.0
// xlbctl reload: the agent re-reads its configuration file (POST /v1/reload)
// and says what changed, or why nothing did.
#include <fmt/format.h>

#include <CLI/CLI.hpp>

#include "../checks.h"
#include "../render_parts.h"
#include "nouns.h"

namespace xlb::xlbctl::noun {

namespace {

std::string render_reload(const json& r, const Style& style) {
    const std::string result = str(r, "result");
    std::string out;
    if (result == "applied") {
        out += paint("reload applied", Colour::kGreen, style) +
               fmt::format(": added {}; removed {}; changed {}; {} VIP(s) untouched\n",
                           list_or_none(r.at("added")), list_or_none(r.at("removed")),
                           list_or_none(r.at("changed")), u64(r, "untouched"));
        out += fmt::format("settings changed: {}\n", list_or_none(r.at("settings_changed")));
        for (const json& d : r.at("disruptive"))
            out +=
                paint("disruptive (confirmed): " + d.get<std::string>(), Colour::kYellow, style) +
                "\n";
    } else {
        out += paint("reload rejected (" + result + ")", Colour::kRed, style) + ": " +
               str(r, "error") + "\n";
        for (const json& e : r.at("errors")) out += "  " + e.get<std::string>() + "\n";
        for (const json& d : r.at("disruptive"))
            out += "  disruptive: " + d.get<std::string>() + "\n";
        out += "the running configuration stays\n";
    }
    if (!r.at("restart_required").empty())
        out += fmt::format("takes effect at the next restart: {}\n",
                           list_or_none(r.at("restart_required")));
    for (const json& w : r.at("warnings")) out += "warning: " + w.get<std::string>() + "\n";
    return out;
}

constexpr VerbSpec kReloadVerbs[] = {
    {.verb = Verb::kReload,
     .help = "Ask the agent to re-read its configuration file. Prints what changed,\n"
             "or why nothing did (file:line:column errors) and exits 1. A change that\n"
             "moves established flows (hash_seed, a VIP's hash or ring_size) is\n"
             "refused unless --allow-disruptive confirms it.",
     .examples = "  xlbctl reload\n"
                 "  xlbctl reload --allow-disruptive   # e.g. after changing hash_seed\n"
                 "  xlbctl reload --json\n",
     .options =
         [](CLI::App& app, Raw& raw) {
             app.add_flag("--allow-disruptive", raw.allow_disruptive,
                          "apply changes that remap flows: flows of VIPs without conntrack, and "
                          "flows that other LB hosts (not yet reloaded) receive, move to other "
                          "backends");
         },
     .request =
         [](const Command& c) {
             return HttpRequest{"POST", "/v1/reload",
                                nlohmann::json{{"allow_disruptive", c.allow_disruptive}}.dump()};
         },
     .render = [](const Command&, const json& r,
                  const Style& style) { return render_reload(r, style); }},
};

}  // namespace

const Noun& reload() {
    static const Noun noun{.name = "reload", .verbs = kReloadVerbs};
    return noun;
}

}  // namespace xlb::xlbctl::noun
