// SPDX-License-Identifier: Apache-2.0
// xlbctl's verbs as one table: per noun (vip, backend, conntrack, host) or
// verb standing alone (status, stats, ...), each verb's name, help and
// examples, its options, its checks, the request it sends and how its reply
// is rendered. The command tree, --help, the request and the rendering are
// all read from here, and the tests hold the bash completion and the man
// page's synopsis against it: a new verb is one row in its noun's file
// (src/nouns/) and one Verb.
#pragma once

#include <expected>
#include <nlohmann/json.hpp>
#include <span>
#include <string>

#include "xlb/xlbctl/command.h"
#include "xlb/xlbctl/format.h"
#include "xlb/xlbctl/request.h"

namespace CLI {
class App;
}

namespace xlb::xlbctl {

// The arguments as typed, before checking (src/checks.h).
struct Raw;

struct VerbSpec {
    Verb verb = Verb::kStatus;
    // The word after the noun ("add"); "" when the noun is the verb (status).
    const char* name = "";
    const char* help = "";
    const char* examples = "";  // the lines of --help's "Examples:"
    // The verb's own arguments and options, after the common ones (--socket,
    // --json, --timeout); nullptr: none.
    void (*options)(CLI::App& app, Raw& raw) = nullptr;
    // Its VIP is the --vip option (errors then name --vip) rather than the
    // VIP argument.
    bool vip_option = false;
    // Checks what options() took and fills the Command; the message of a
    // wrong line (exit 2). nullptr: nothing to check beyond the VIP.
    std::expected<void, std::string> (*check)(const Raw& raw, Command& command) = nullptr;
    HttpRequest (*request)(const Command& command) = nullptr;
    // The human text of a successful reply; nullptr: run.cpp shows it
    // otherwise (capture streams a file, top refreshes a screen). Throws
    // json::exception on a reply without a field it needs.
    std::string (*render)(const Command& command, const nlohmann::json& reply,
                          const Style& style) = nullptr;
};

struct Noun {
    const char* name = "";
    const char* help = "";      // a noun of several verbs: its own line in xlbctl --help
    const char* examples = "";  // its --help's "Examples:" ("" for none)
    std::span<const VerbSpec> verbs;

    // A verb standing alone: `xlbctl status`, not `xlbctl status VERB`.
    bool is_verb() const { return verbs.size() == 1 && *verbs.front().name == '\0'; }
};

// Every noun, in the order of xlbctl --help (gen-seed, answered without the
// agent, is not one of them).
std::span<const Noun> nouns();

// The row of a verb.
const VerbSpec& verb_spec(Verb verb);

}  // namespace xlb::xlbctl
