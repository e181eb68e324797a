// SPDX-License-Identifier: Apache-2.0
// xlbd's wiring: configuration -> BPF program (pinned, reused) -> reconciler
// and its loop -> API, metrics -> XDP attach -> next-hop watcher, announcer,
// sweeper -> signals, as an ordered list of components (component.h). The
// parts are libraries with one job each; this file only connects them.
#pragma once

#include <expected>
#include <optional>
#include <string>

#include "xlb/abi.h"
#include "xlb/config/model.h"
#include "xlb/config/vip_merge.h"
#include "xlb/version.h"

namespace xlb::agent {

inline constexpr const char* kVersion = XLB_VERSION;  // project(xlb VERSION ...) in CMake

struct AgentOptions {
    std::string config_path;
    // Command-line overrides of the file's settings.
    std::optional<std::string> interface;
    std::optional<config::XdpMode> xdp_mode;
    std::optional<std::string> api_socket;
    std::optional<std::string> metrics_listen;
    std::optional<std::string> pin_dir;
    std::optional<std::string> state_file;
    bool detach_on_exit = false;
    // Which side a start takes for a VIP changed both in the file and at
    // runtime since the state file was written; kNone: such a start refuses.
    config::Prefer prefer = config::Prefer::kNone;
};

// Applies the command-line overrides to settings read from the file.
void apply_overrides(const AgentOptions& options, config::Settings& settings);

// Runs the agent until SIGTERM/SIGINT; SIGHUP reloads. Returns the exit code.
int run_agent(const AgentOptions& options);

}  // namespace xlb::agent
