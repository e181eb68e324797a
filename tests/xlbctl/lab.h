// SPDX-License-Identifier: Apache-2.0
// A real xlbd for xlbctl's tests: two network namespaces joined by a veth
// (the LB side 192.0.2.1/24, the router side 192.0.2.2/24, the next hop), the
// agent attached natively to the LB end, its API socket and state file in a
// temporary directory, its maps pinned in a bpffs directory of their own.
// Names start with "xlbc-<pid>-" so that concurrent runs never collide and a
// later run can clean up after a crashed one. Everything is torn down by the
// destructor, whatever happened: the agent killed, XDP off, namespaces, pins
// and directories removed.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <optional>
#include <string>
#include <vector>

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

    // Creates the namespaces, the directories and the configuration file;
    // throws std::runtime_error (after cleaning up) when a step fails.
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
    bool agent_running() const { return agent_ > 0; }
    // Rewrites the configuration with another hash seed and
    // returns once `xlbctl reload --allow-disruptive` says it was applied.
    void reload_with_hash_seed(std::uint32_t seed);

    const std::string& socket() const { return socket_; }
    const std::string& dir() const { return dir_; }
    const std::string& state_file() const { return state_file_; }
    // Where the agent pins its maps: PIN_DIR/INTERFACE.
    std::string maps_dir() const { return pin_dir_ + "/" + kInterface; }
    std::string agent_log() const;

    static constexpr const char* kInterface = "xlbc-lb";
    static constexpr std::uint32_t kMaxVips = 16;
    static constexpr std::uint32_t kMaxBackends = 64;
    static constexpr std::uint32_t kConntrackEntries = 4096;
    static constexpr std::uint32_t kHashSeed = 0x5eed1234;

private:
    void setup();
    void teardown() noexcept;

    std::string xlbd_;
    std::string prefix_;  // "xlbc-<pid>-<n>"
    std::string ns_lb_, ns_rt_;
    std::string dir_, pin_dir_, socket_, state_file_, config_, log_;
    pid_t agent_ = -1;
};

// Removes what runs of the tests that died left behind (namespaces, pins,
// directories of processes that no longer exist).
void clean_up_stale_labs() noexcept;

}  // namespace xlb::xlbctl::test
