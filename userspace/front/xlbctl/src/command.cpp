// SPDX-License-Identifier: Apache-2.0
// Command line -> Command: the command tree built from the verb table
// (verbs.h), the options every verb has, and the usage errors of the parser;
// each verb's own options and checks are in its noun's file (src/nouns/).
#include "xlb/xlbctl/command.h"

#include <CLI/CLI.hpp>
#include <algorithm>
#include <climits>
#include <filesystem>
#include <map>
#include <optional>

#include "checks.h"
#include "xlb/cli/suggest.h"
#include "xlb/xlbctl/fleet.h"
#include "xlb/xlbctl/seed.h"
#include "xlb/xlbctl/verbs.h"

#ifndef XLBCTL_VERSION
#define XLBCTL_VERSION "unknown"
#endif

namespace xlb::xlbctl {

bool wants_json(const std::vector<std::string>& args) {
    return std::find(args.begin(), args.end(), "--json") != args.end();
}

namespace {

constexpr std::chrono::milliseconds kMinTimeout{100}, kMaxTimeout{3'600'000};
constexpr std::size_t kMaxSocketPath = config::kMaxSocketPathBytes;

struct Cli {
    CLI::App app{
        "xlbctl: the operator's command line of the xlb load balancer.\n"
        "Talks to the xlbd agent over its Unix socket (never to the kernel).",
        "xlbctl"};
    Raw raw;
    std::map<const CLI::App*, const VerbSpec*> leaves;
    // Answered here, without the agent (no Verb, no request).
    CLI::App* gen_seed = nullptr;
};

CLI::App* leaf(Cli& cli, CLI::App* parent, const std::string& name, const VerbSpec& verb) {
    CLI::App* app = parent->add_subcommand(name, verb.help);
    add_common(app, cli.raw);
    app->footer("Examples:\n" + std::string(verb.examples));
    cli.leaves[app] = &verb;
    if (verb.options) verb.options(*app, cli.raw);
    if (fleet_write_verb(verb.verb))
        add_fleet_write_options(app, cli.raw, verb.verb != Verb::kVipSet);
    return app;
}

void build(Cli& cli) {
    CLI::App& app = cli.app;
    Raw& raw = cli.raw;
    app.set_version_flag("--version", "xlbctl " XLBCTL_VERSION);
    app.require_subcommand(1);
    add_common(&app, raw);
    app.footer(
        "Examples:\n"
        "  xlbctl status\n"
        "  xlbctl vip add 198.51.100.10:80/tcp --hash 5tuple --ring-size 65537\n"
        "  xlbctl backend add 198.51.100.10:80/tcp 203.0.113.14 --weight 50\n"
        "  xlbctl backend drain 198.51.100.10:80/tcp 203.0.113.11 --wait\n"
        "  xlbctl conntrack count --vip 198.51.100.10:80/tcp\n"
        "  xlbctl stats --watch\n"
        "  xlbctl lookup 198.51.100.10:80/tcp --src 192.0.2.7:40000\n"
        "  xlbctl reload\n"
        "Every verb takes --json and --socket PATH, and --help with examples.\n"
        "Exit status: 0 done; 1 rejected by the agent; 2 a wrong command line\n"
        "(nothing was sent); 3 the agent could not be reached. See man xlbctl.");

    for (const Noun& noun : nouns()) {
        if (noun.is_verb()) {
            leaf(cli, &app, noun.name, noun.verbs.front());
            continue;
        }
        CLI::App* sub = app.add_subcommand(noun.name, noun.help);
        sub->require_subcommand(1);
        add_common(sub, raw);
        if (*noun.examples) sub->footer("Examples:\n" + std::string(noun.examples));
        for (const VerbSpec& verb : noun.verbs) leaf(cli, sub, verb.name, verb);
    }

    cli.gen_seed = app.add_subcommand(
        "gen-seed",
        "Print a new random hash_seed line (from getrandom) for the configuration file.\n"
        "xlbd refuses to start without a seed, and there is no default. Every LB host\n"
        "of a fleet (behind one ECMP group) needs the same seed: make it once and copy\n"
        "the line to each host's file. Needs no agent.");
    cli.gen_seed->footer(
        "Examples:\n"
        "  xlbctl gen-seed                          # hash_seed: 0x3f6c19a2\n"
        "  xlbctl gen-seed >> /etc/xlb/xlbd.yaml    # a file that has no hash_seed line yet\n");
}

// The deepest subcommand given on the line.
CLI::App* selected(CLI::App& app) {
    CLI::App* at = &app;
    while (true) {
        auto subs = at->get_subcommands();
        if (subs.empty()) return at;
        at = subs.front();
    }
}

std::string path_of(CLI::App* app) {
    std::string path;
    for (CLI::App* at = app; at; at = at->get_parent())
        path = at->get_name() + (path.empty() ? "" : " " + path);
    return path;
}

std::string verbs_of(CLI::App* app) {
    std::vector<std::string> names;
    for (CLI::App* sub : app->get_subcommands([](CLI::App*) { return true; }))
        names.push_back(sub->get_name());
    std::string text;
    for (std::size_t i = 0; i < names.size(); ++i)
        text += (i == 0 ? "" : i + 1 == names.size() ? " or " : ", ") + names[i];
    return text;
}

ParseExit usage(std::string message) { return ParseExit{kExitUsage, "", std::move(message)}; }

using xlb::cli::closest;
using xlb::cli::option_names;

// "did you mean ..." for the first word the parser could not place at `at`:
// a verb when `at` takes verbs, an option when the word starts with '-'.
std::optional<std::string> suggestion(CLI::App* at) {
    const std::vector<std::string> left = at->remaining();
    if (left.empty()) return std::nullopt;
    const std::string& word = left.front();
    if (word.starts_with("-")) {
        const std::string flag = word.substr(0, word.find('='));
        auto near = closest(flag, option_names(at));
        if (!near) return std::nullopt;
        return "unknown option " + in_quotes(flag) + " for '" + path_of(at) + "': did you mean " +
               *near + "?";
    }
    std::vector<std::string> verbs;
    for (CLI::App* sub : at->get_subcommands([](CLI::App*) { return true; }))
        verbs.push_back(sub->get_name());
    if (verbs.empty()) return std::nullopt;
    auto near = closest(word, verbs);
    return "unknown verb " + in_quotes(word) + " after '" + path_of(at) +
           "': " + (near ? "did you mean " + *near + "?" : "expected " + verbs_of(at));
}

// The fleet of the line (--fleet and its options), else of xlbctl's file
// (--config-file, $XLBCTL_CONFIG, /etc/xlb/xlbctl.yaml when it exists);
// nullopt: none.
Checked<std::optional<config::FleetSettings>> fleet_of(const Raw& raw, const GetEnv& getenv,
                                                       std::string& source) {
    if (raw.fleet.empty()) {
        for (auto [option, value] :
             {std::pair{"--fleet-name", &raw.fleet_name},
              std::pair{"--fleet-prefix", &raw.fleet_prefix},
              std::pair{"--fleet-ca", &raw.fleet_ca}, std::pair{"--fleet-cert", &raw.fleet_cert},
              std::pair{"--fleet-key", &raw.fleet_key}})
            if (!value->empty())
                return std::unexpected(std::string(option) +
                                       " without --fleet: it describes the fleet --fleet names, "
                                       "e.g. --fleet https://10.0.0.1:2379 " +
                                       option + " ...");
        // A file named on the line or in the environment must be there.
        std::string path = raw.config_file;
        if (path.empty())
            if (const char* env = getenv ? getenv(kConfigEnv) : nullptr; env && *env) path = env;
        if (path.empty()) {
            std::error_code ec;
            if (!std::filesystem::exists(kDefaultConfigFile, ec)) return std::nullopt;
            path = kDefaultConfigFile;
        }
        auto loaded = config::load_client_config(path);
        if (!loaded) {
            std::string message;
            for (const auto& e : loaded.error())
                message += (message.empty() ? "" : "; ") + e.to_string();
            return std::unexpected(message);
        }
        source = path;
        return *loaded;
    }
    if (!raw.config_file.empty())
        return std::unexpected(
            "--fleet with --config-file: give the fleet on the line or in the file, not both");
    config::FleetSettings f;
    f.enabled = true;
    std::string rest = raw.fleet;
    for (std::size_t at; !rest.empty();) {
        at = rest.find(',');
        f.endpoints.push_back(rest.substr(0, at));
        rest = at == std::string::npos ? "" : rest.substr(at + 1);
    }
    if (!raw.fleet_name.empty()) f.name = raw.fleet_name;
    f.prefix = raw.fleet_prefix;
    f.ca = raw.fleet_ca;
    f.cert = raw.fleet_cert;
    f.key = raw.fleet_key;
    std::string message;
    for (const config::ValidationIssue& issue : config::check_fleet(f)) {
        std::string path = issue.path;
        for (auto [key, option] :
             {std::pair{"fleet.endpoints", "--fleet"}, std::pair{"fleet.name", "--fleet-name"},
              std::pair{"fleet.prefix", "--fleet-prefix"}, std::pair{"fleet.ca", "--fleet-ca"},
              std::pair{"fleet.cert", "--fleet-cert"}, std::pair{"fleet.key", "--fleet-key"}})
            if (path.starts_with(key)) path = option + path.substr(std::string(key).size());
        message += (message.empty() ? "" : "; ") + path + ": " + issue.message;
    }
    if (!message.empty()) return std::unexpected(message);
    source = "--fleet";
    return f;
}

bool fleet_verb(Verb v) {
    return v == Verb::kFleetStatus || v == Verb::kFleetImport || v == Verb::kFleetExport ||
           v == Verb::kFleetHistory;
}

// The fleet and what only a fleet takes.
Checked<void> check_fleet_options(const Raw& raw, Command& c, const GetEnv& getenv) {
    auto fleet = fleet_of(raw, getenv, c.fleet_source);
    if (!fleet) return std::unexpected(fleet.error());
    c.fleet = *fleet;
    const std::string name = verb_name(c.verb);
    const std::string hint = " (with a fleet: --fleet URLS, or a fleet: section in " +
                             std::string(kDefaultConfigFile) + "; see xlbctl " + name + " --help)";
    if (!c.fleet) {
        if (fleet_verb(c.verb))
            return std::unexpected(name +
                                   ": no fleet to read: expected --fleet URLS or a fleet: "
                                   "section in --config-file, $" +
                                   kConfigEnv + " or " + kDefaultConfigFile);
        if (!raw.if_revision.empty())
            return std::unexpected("--if-revision: only a fleet's store has revisions" + hint);
        if (!raw.host.empty())
            return std::unexpected("host " + raw.host +
                                   ": without a fleet, host drain|resume acts on this host's "
                                   "agent only; drop the name" +
                                   hint);
        if (raw.allow_disruptive && fleet_write_verb(c.verb) && c.verb != Verb::kVipSet)
            return std::unexpected("--allow-disruptive: " + name +
                                   " sends no disruptive change to the agent" + hint);
        return {};
    }
    if (!raw.if_revision.empty()) {
        auto n = parse_unsigned(raw.if_revision);
        if (!n || *n > static_cast<std::uint64_t>(INT64_MAX))
            return std::unexpected("--if-revision: found " + in_quotes(raw.if_revision) +
                                   ", expected a store revision (an integer, 0: the key must not "
                                   "exist yet), e.g. --if-revision 41");
        c.if_revision = static_cast<std::int64_t>(*n);
    }
    c.host = raw.host;
    if (c.wait)
        return std::unexpected(
            "--wait with a fleet: the drain is written to the fleet's store, and each host's "
            "connections are its own; wait on a host with xlbctl --socket PATH conntrack count "
            "--vip VIP --backend ADDR");
    return {};
}

// Checks what every verb has (the socket, the timeout, the VIP), then the
// verb's own arguments, and fills the Command.
Checked<Command> finish(const Raw& raw, const VerbSpec& verb, const GetEnv& getenv) {
    Command c;
    c.verb = verb.verb;
    c.json = raw.json;
    c.quiet = raw.quiet;
    c.allow_disruptive = raw.allow_disruptive;
    c.peers = raw.peers;
    // The agent's limit on X-Xlb-Reason (docs/api.md, "Audit").
    constexpr std::size_t kMaxReason = 1024;
    if (raw.reason.size() > kMaxReason)
        return std::unexpected("--reason: found " + std::to_string(raw.reason.size()) +
                               " bytes, expected at most " + std::to_string(kMaxReason));
    if (std::any_of(raw.reason.begin(), raw.reason.end(),
                    [](unsigned char ch) { return ch < ' ' || ch == 0x7f; }))
        return std::unexpected(
            "--reason: found a control character (a new line?), expected one line of text, "
            "e.g. --reason 'kernel upgrade'");
    c.reason = raw.reason;

    if (!raw.socket.empty()) {
        c.socket = raw.socket;
    } else if (const char* env = getenv ? getenv(kSocketEnv) : nullptr; env && *env) {
        c.socket = env;
    }
    if (c.socket.size() > kMaxSocketPath) {
        const std::string from = raw.socket.empty() ? std::string(kSocketEnv) : "--socket";
        return std::unexpected(from + ": found a path of " + std::to_string(c.socket.size()) +
                               " bytes, expected at most " + std::to_string(kMaxSocketPath) +
                               " (the limit of a Unix socket address), e.g. --socket " +
                               kDefaultSocket);
    }
    // --timeout bounds each request, in every verb; the drain's wait has its own bound.
    if (!raw.timeout.empty()) {
        auto t = check_time_bound("--timeout", raw.timeout, kMinTimeout, kMaxTimeout, "100ms to 1h",
                                  "10s");
        if (!t) return std::unexpected(t.error());
        c.timeout = *t;
    }
    if (!raw.vip.empty()) {
        auto key = check_vip_key(raw.vip);
        if (!key)
            return std::unexpected(verb.vip_option ? "--vip: " + key.error().substr(5)
                                                   : key.error());
        c.vip_key = *key;
    }
    if (verb.check)
        if (auto ok = verb.check(raw, c); !ok) return std::unexpected(ok.error());
    if (auto ok = check_fleet_options(raw, c, getenv); !ok) return std::unexpected(ok.error());
    if (c.vip_key) c.vip = c.vip_key->to_string();
    return c;
}

}  // namespace

ParseResult parse_command(const std::vector<std::string>& args, const GetEnv& getenv) {
    Cli cli;
    build(cli);
    std::vector<std::string> reversed(args.rbegin(), args.rend());
    try {
        cli.app.parse(reversed);
    } catch (const CLI::CallForHelp&) {
        return ParseExit{kExitOk, cli.app.help(), ""};
    } catch (const CLI::CallForAllHelp&) {
        return ParseExit{kExitOk, cli.app.help("", CLI::AppFormatMode::All), ""};
    } catch (const CLI::CallForVersion& e) {
        return ParseExit{kExitOk, std::string(e.what()) + "\n", ""};
    } catch (const CLI::ParseError& e) {
        CLI::App* at = selected(cli.app);
        if (auto hint = suggestion(at))
            return usage(*hint + " (" + path_of(at) + " --help shows usage and examples)");
        if (!cli.leaves.contains(at) &&
            at->get_subcommands([](CLI::App*) { return true; }).size() &&
            dynamic_cast<const CLI::RequiredError*>(&e))
            return usage("expected a verb after '" + path_of(at) + "': " + verbs_of(at) + " (" +
                         path_of(at) + " --help shows them with examples)");
        return usage(std::string(e.what()) + " (" + path_of(at) +
                     " --help shows usage and examples)");
    }
    CLI::App* at = selected(cli.app);
    if (at == cli.gen_seed) {
        auto seed = random_seed();
        if (!seed) return ParseExit{kExitFailed, "", "gen-seed: " + seed.error().message()};
        return ParseExit{kExitOk, seed_line(*seed), ""};
    }
    auto it = cli.leaves.find(at);
    if (it == cli.leaves.end())
        return usage("expected a verb after '" + path_of(at) + "': " + verbs_of(at));
    cli.raw.watch_given =
        at->get_option_no_throw("--watch") && at->get_option_no_throw("--watch")->count() > 0;
    cli.raw.count_given =
        at->get_option_no_throw("--count") && at->get_option_no_throw("--count")->count() > 0;
    // The VIP settings given, in the order of vip_settings().
    if (auto options = cli.raw.setting_options.find(at); options != cli.raw.setting_options.end())
        for (const auto& [option, path] : options->second)
            if (option->count() > 0) cli.raw.given.emplace_back(path, cli.raw.settings[path]);
    auto command = finish(cli.raw, *it->second, getenv);
    if (!command) return usage(command.error());
    return *command;
}

}  // namespace xlb::xlbctl
