// SPDX-License-Identifier: Apache-2.0
// A real xlbd for xlbctl's tests: the smallest lab of scripts/lab.sh (the LB
// and the router, its next hop; tests/support/lab_driver.h), the agent
// attached natively to the LB's interface, its API socket, state file and
// config in the lab's directory, its maps pinned in the lab's bpffs
// directory. Everything is torn down by the destructor, whatever happened: the
// agent killed, the lab taken down; labs of killed runs are swept by the next.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <optional>
#include <string>
#include <vector>

#include "lab_driver.h"

namespace xlb::xlbctl::test {

struct ProcessResult {
    int code = -1;  // exit code; 128 + signal when killed
    std::string out, err;
};

struct ProcessOptions {
    std::vector<std::string> env;  // NAME=VALUE, added to (or replacing in) ours
    std::vector<std::string> unset_env;
    std::optional<uid_t> uid;  // run as this user (and its gid), no groups
    std::chrono::milliseconds timeout{20'000};
};

// Runs argv (argv[0] looked up in PATH) and captures its output.
ProcessResult run_process(const std::vector<std::string>& argv, const ProcessOptions& options = {});

class Lab {
public:
    // Why this machine cannot host the lab (not root, no bpffs, no
    // namespaces, no xlbd binary), or nullopt.
    static std::optional<std::string> unavailable(const std::string& xlbd_path);

    // Brings the lab up and writes the configuration file; throws
    // std::runtime_error (after cleaning up) when a step fails.
    explicit Lab(std::string xlbd_path);
    ~Lab();
    Lab(const Lab&) = delete;
    Lab& operator=(const Lab&) = delete;

    // Starts the agent and waits until GET /v1/status says it is ready.
    // Throws std::runtime_error with the agent's log on failure.
    void start_agent();
    // SIGTERM, and waits for it to exit (SIGKILL after 5 s). Returns its
    // exit code.
    int stop_agent();
    bool agent_running() const { return agent_.pid() > 0; }
    // Rewrites the configuration with another hash seed and
    // returns once `xlbctl reload --allow-disruptive` says it was applied.
    void reload_with_hash_seed(std::uint32_t seed);

    const std::string& socket() const { return socket_; }
    const std::string& dir() const { return dir_; }
    const std::string& state_file() const { return state_file_; }
    const std::string& config() const { return config_; }  // the agent's file
    // Where the agent pins its maps: PIN_DIR/INTERFACE.
    std::string maps_dir() const { return pin_dir_ + "/" + kInterface; }
    std::string agent_log() const;

    static constexpr const char* kInterface = xlb::test::Lab::kLbIf;
    static constexpr std::uint32_t kMaxVips = 16;
    static constexpr std::uint32_t kMaxBackends = 64;
    static constexpr std::uint32_t kConntrackEntries = 4096;
    static constexpr std::uint32_t kHashSeed = 0x5eed1234;

private:
    xlb::test::Lab lab_;  // first: everything else lives in it
    std::string dir_, pin_dir_, socket_, state_file_, config_, log_;
    xlb::test::AgentProcess agent_;
};

}  // namespace xlb::xlbctl::test
