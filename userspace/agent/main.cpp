// SPDX-License-Identifier: Apache-2.0
// xlbd: the xlb agent. See README.md and docs/config.md.
#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <CLI/CLI.hpp>
#include <cstdlib>

#include "xlb/agent/agent.h"
#include "xlb/config/config.h"

int main(int argc, char** argv) {
    xlb::agent::AgentOptions options;
    bool check_only = false;
    std::string xdp_mode, log_level = "info";
    std::string interface, api_socket, metrics_listen, pin_dir, state_file;

    CLI::App app{"xlbd: the xlb load-balancer agent (XDP data plane, health checks, Maglev tables)"};
    app.add_option("-c,--config", options.config_path, "configuration file (YAML)")
        ->required()
        ->check(CLI::ExistingFile);
    app.add_flag("--check-config", check_only,
                 "validate the configuration and exit 0 (valid) or 1; touches nothing");
    app.add_option("--interface", interface, "interface to attach to (overrides the file)");
    app.add_option("--xdp-mode", xdp_mode, "native, generic or auto (overrides the file)")
        ->check(CLI::IsMember({"native", "generic", "auto"}));
    app.add_option("--api-socket", api_socket, "Unix socket of the API (overrides the file)");
    app.add_option("--metrics-listen", metrics_listen,
                   "address of /metrics, /livez, /readyz, e.g. 127.0.0.1:9464 (overrides the file)");
    app.add_option("--pin-dir", pin_dir, "bpffs directory for pinned maps (overrides the file)");
    app.add_option("--state-file", state_file, "where runtime changes persist (overrides the file)");
    app.add_flag("--detach-on-exit", options.detach_on_exit,
                 "detach XDP and remove the pinned maps on exit (default: keep forwarding)");
    app.add_option("--log-level", log_level, "trace, debug, info, warn, error")
        ->check(CLI::IsMember({"trace", "debug", "info", "warn", "error"}))
        ->capture_default_str();
    app.footer(
        "Examples:\n"
        "  xlbd --config /etc/xlb/xlbd.yaml\n"
        "  xlbd --check-config --config /etc/xlb/xlbd.yaml\n"
        "  xlbd --config lab.yaml --interface veth-lb --xdp-mode generic --detach-on-exit\n"
        "Signals: SIGHUP reloads the file and applies only what changed; SIGTERM stops.");
    CLI11_PARSE(app, argc, argv);

    if (check_only) {
        auto config = xlb::config::load_config_file(options.config_path);
        if (!config) {
            for (const auto& e : config.error()) fmt::print(stderr, "{}\n", e.to_string());
            fmt::print(stderr, "{}: {} error(s)\n", options.config_path, config.error().size());
            return 1;
        }
        std::size_t backends = 0;
        for (const auto& v : config->vips) backends += v.backends.size();
        fmt::print("{}: valid ({} VIPs, {} backends)\n", options.config_path, config->vips.size(),
                   backends);
        return 0;
    }

    if (!interface.empty()) options.interface = interface;
    if (!xdp_mode.empty()) options.xdp_mode = xlb::config::parse_xdp_mode(xdp_mode);
    if (!api_socket.empty()) options.api_socket = api_socket;
    if (!metrics_listen.empty()) options.metrics_listen = metrics_listen;
    if (!pin_dir.empty()) options.pin_dir = pin_dir;
    if (!state_file.empty()) options.state_file = state_file;

    spdlog::set_level(spdlog::level::from_str(log_level));
    // under systemd the journal stamps each line already
    if (std::getenv("JOURNAL_STREAM")) spdlog::set_pattern("%l: %v");
    return xlb::agent::run_agent(options);
}
