// SPDX-License-Identifier: Apache-2.0
// xlbd: the xlb agent. See README.md, docs/xlbd.8 and docs/config.md.
//
// Exit status: 0 stopped cleanly (or --check-config: the file is valid,
// --help, --version); 1 the configuration is invalid or unreadable, or the
// agent could not start; 2 the command line is wrong.
#include <fmt/format.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <cstdio>
#include <iostream>
#include <string>
#include <string_view>
#include <vector>

#include "xlb/agent/agent.h"
#include "xlb/agent/journal_log.h"
#include "xlb/agent/preflight.h"
#include "xlb/api/state_store.h"
#include "xlb/cli/suggest.h"
#include "xlb/config/config.h"
#include "xlb/version.h"

namespace {

constexpr int kExitInvalid = 1;
constexpr int kExitUsage = 2;

// A line of xlbd's own output (not a log line) on `out`, with its journal
// priority when `out` is the journal stream (ExecStartPre's --check-config).
void say(std::FILE* out, spdlog::level::level_enum level, std::string_view text) {
    if (xlb::agent::fd_is_journal(::fileno(out)))
        fmt::print(out, "{}", xlb::agent::journal_lines(level, text));
    else
        fmt::print(out, "{}\n", text);
}

int usage_error(std::string_view message) {
    fmt::print(stderr, "xlbd: {}\nRun with --help for more information.\n", message);
    return kExitUsage;
}

// --check-config: parse and validate, then check the host as a start would,
// except for what a running agent holds (the interface lock, the metrics
// address) and what needs the kernel, and say what a start would do with
// the runtime changes in the state file (--prefer included). Creates nothing.
int check_config(const std::string& path, const xlb::agent::AgentOptions& options) {
    auto config = xlb::config::load_config_file(path);
    if (!config) {
        for (const auto& e : config.error()) say(stderr, spdlog::level::err, e.to_string());
        say(stderr, spdlog::level::err,
            fmt::format("{}: {} error(s)", path, config.error().size()));
        return kExitInvalid;
    }
    if (auto seed = xlb::config::missing_hash_seed(*config, path)) {
        say(stderr, spdlog::level::err, seed->to_string());
        say(stderr, spdlog::level::err, path + ": 1 error(s)");
        return kExitInvalid;
    }
    xlb::agent::apply_overrides(options, config->settings);
    const std::vector<std::string> problems = xlb::agent::check_host(config->settings);
    if (!problems.empty()) {
        for (const auto& p : problems) say(stderr, spdlog::level::err, path + ": " + p);
        say(stderr, spdlog::level::err,
            fmt::format("{}: valid, but {} problem(s) with this host", path, problems.size()));
        return kExitInvalid;
    }
    // What a start would make of the runtime changes in the state file
    // (readable: check_host said so). A fleet's host takes its VIPs from the
    // store, whatever the state file holds: nothing to merge here.
    if (auto state = xlb::api::StateStore(config->settings.state_file).load();
        state && !config->settings.fleet.enabled) {
        const xlb::api::StartupDecision decision =
            xlb::api::decide_startup_vips(config->vips, *state, options.prefer);
        const std::string where = "state file " + config->settings.state_file + ": ";
        for (const auto& w : decision.warnings) say(stdout, spdlog::level::warn, where + w);
        if (!decision.conflicts.empty()) {
            for (const auto& c : decision.conflicts) say(stderr, spdlog::level::err, where + c);
            say(stderr, spdlog::level::err,
                path + ": valid, but a start would refuse: " +
                    xlb::api::startup_refusal(decision, config->settings.state_file).message());
            return kExitInvalid;
        }
    }
    std::size_t backends = 0;
    for (const auto& v : config->vips) backends += v.backends.size();
    say(stdout, spdlog::level::info,
        fmt::format("{}: valid ({} VIPs, {} backends)", path, config->vips.size(), backends));
    return 0;
}

}  // namespace

int main(int argc, char** argv) {
    xlb::agent::AgentOptions options;
    std::string check_path;
    std::string xdp_mode, log_level = "info";
    std::string interface, api_socket, metrics_listen, pin_dir, state_file, prefer;

    CLI::App app{
        "xlbd: the xlb load-balancer agent (XDP data plane, health checks, Maglev tables)"};
    app.set_version_flag("--version", "xlbd " XLB_VERSION);
    app.add_option("-c,--config", options.config_path, "configuration file (YAML)")
        ->type_name("FILE");
    CLI::Option* check =
        app.add_option(
               "--check-config", check_path,
               "validate FILE (or the --config file) and exit 0 (valid) or 1; touches nothing")
            ->type_name("[FILE]")
            ->expected(0, 1);
    app.add_option("--interface", interface, "interface to attach to (overrides the file)");
    app.add_option("--xdp-mode", xdp_mode, "native, generic or auto (overrides the file)")
        ->check(CLI::IsMember({"native", "generic", "auto"}));
    app.add_option("--api-socket", api_socket, "Unix socket of the API (overrides the file)");
    app.add_option(
        "--metrics-listen", metrics_listen,
        "address of /metrics, /livez, /readyz, e.g. 127.0.0.1:9464 (overrides the file)");
    app.add_option("--pin-dir", pin_dir, "bpffs directory for pinned maps (overrides the file)");
    app.add_option("--state-file", state_file,
                   "where runtime changes persist (overrides the file)");
    app.add_option("--prefer", prefer,
                   "for a VIP changed both in the file and at runtime (API) since the state "
                   "file was written: use the file's version or keep the runtime one "
                   "(without it such a start refuses)")
        ->check(CLI::IsMember({"file", "runtime"}));
    app.add_flag("--detach-on-exit", options.detach_on_exit,
                 "detach XDP and remove the pinned maps on exit (default: keep forwarding)");
    app.add_option("--log-level", log_level, "trace, debug, info, warn, error")
        ->check(CLI::IsMember({"trace", "debug", "info", "warn", "error"}))
        ->capture_default_str();
    app.footer(
        "Examples:\n"
        "  xlbd --config /etc/xlb/xlbd.yaml\n"
        "  xlbd --check-config /etc/xlb/xlbd.yaml\n"
        "  xlbd --config lab.yaml --interface veth-lb --xdp-mode generic --detach-on-exit\n"
        "  xlbd --config /etc/xlb/xlbd.yaml --prefer runtime   (after a refused start)\n"
        "Signals: SIGHUP reloads the file and applies only what changed; SIGTERM stops.\n"
        "Exit status: 0 done, 1 invalid configuration or failed start, 2 usage error.\n"
        "See xlbd(8).");
    try {
        app.parse(argc, argv);
    } catch (const CLI::ParseError& e) {
        if (auto hint = xlb::cli::did_you_mean(&app)) {
            std::cerr << "xlbd: " << *hint << " (xlbd --help lists the options)\n";
            return kExitUsage;
        }
        const int code = app.exit(e);  // prints help, the version, or the error
        return code == 0 ? 0 : kExitUsage;
    }

    if (!interface.empty()) options.interface = interface;
    if (!xdp_mode.empty()) options.xdp_mode = xlb::config::parse_xdp_mode(xdp_mode);
    if (!api_socket.empty()) options.api_socket = api_socket;
    if (!metrics_listen.empty()) options.metrics_listen = metrics_listen;
    if (!pin_dir.empty()) options.pin_dir = pin_dir;
    if (!state_file.empty()) options.state_file = state_file;
    if (prefer == "file") options.prefer = xlb::config::Prefer::kFile;
    if (prefer == "runtime") options.prefer = xlb::config::Prefer::kRuntime;

    if (check->count() > 0) {
        if (!check_path.empty() && !options.config_path.empty() &&
            check_path != options.config_path)
            return usage_error("--check-config " + check_path + " and --config " +
                               options.config_path + " name different files; give one");
        const std::string path = check_path.empty() ? options.config_path : check_path;
        if (path.empty())
            return usage_error("--check-config needs a file: xlbd --check-config FILE");
        return check_config(path, options);
    }
    if (options.config_path.empty())
        return usage_error("--config FILE is required (e.g. xlbd --config /etc/xlb/xlbd.yaml)");

    // under systemd: "<3>error: ..." lines that journald files by priority
    xlb::agent::configure_logging(spdlog::level::from_str(log_level));
    return xlb::agent::run_agent(options);
}
