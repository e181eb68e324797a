// SPDX-License-Identifier: Apache-2.0
// The lab for the C++ tests: a driver of scripts/lab.sh, the one definition of
// the lab's topology and life cycle (namespaces, links, addresses, the DSR
// settings, decapsulators, servers, teardown and the sweep of stale labs).
// Every e2e suite (tests/e2e, tests/xlbctl, tests/e2e_tcp) builds its lab
// through this class; none creates a namespace itself.
//
//   [client] --- router --- br0 203.0.113.0/24, 2001:db8:b::/64
//                            |-- lb  eth0 .2 / ::2  (the agent's interface)
//                            `-- [b1 .. bN]  (xlb-decap, VIPs on lo, HTTP server)
//
// The smallest lab (LabOptions{}: no client, no backends) is the LB and its
// next hop, the router (203.0.113.1, MAC kRouterMac, known to the LB without
// ARP); the router routes the VIPs (198.51.100.0/24, 2001:db8:f::/64) to the
// LB. Everything carries the lab's prefix and is removed by the destructor;
// labs of killed runs are swept (`lab.sh sweep`) before the first lab of a
// process comes up.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <optional>
#include <string>
#include <vector>

namespace xlb::test {

struct LabOptions {
    int backends = 0;                // backend namespaces b1..bN (0-9)
    bool client = false;             // the client namespace
    std::vector<std::string> extra;  // more `lab.sh up` options (e.g. --health, --weights 1,1,2)
};

class Lab {
public:
    static constexpr const char* kLbIf = "eth0";
    static constexpr const char* kLbAddr = "203.0.113.2";
    static constexpr const char* kLbAddr6 = "2001:db8:b::2";
    static constexpr const char* kRouterAddr = "203.0.113.1";
    static constexpr const char* kRouterMac = "02:78:6c:62:00:01";

    // Picks a prefix unique to this process and call ("t<pid><aa>"); creates
    // nothing yet.
    Lab();
    // `lab.sh down` when up() was called, whatever happened; never throws.
    ~Lab();
    Lab(const Lab&) = delete;
    Lab& operator=(const Lab&) = delete;

    // Mounts bpffs when needed, sweeps stale labs (once per process), then
    // `lab.sh up`. Throws std::runtime_error with the script's output (a
    // failed up has removed what it built).
    void up(const LabOptions& options = {});
    // Runs `lab.sh ARGS --prefix P` (agent-start, server-stop b2, ...):
    // its output, or std::runtime_error with it.
    std::string script(const std::string& args) const;

    const std::string& prefix() const { return prefix_; }
    // ROLE: client, router, lb, b1..b9.
    std::string ns(const std::string& role) const { return prefix_ + "-" + role; }
    std::string lb_ns() const { return ns("lb"); }
    std::string router_ns() const { return ns("router"); }
    std::string client_ns() const { return ns("client"); }
    // The lab's directory (/run/xlb-lab/P, mode 0755): its config, logs, and
    // room for a test's own files.
    std::string dir() const { return "/run/xlb-lab/" + prefix_; }
    // A pin directory on bpffs, created by up().
    std::string pin_dir() const { return "/sys/fs/bpf/xlb-lab-" + prefix_; }

private:
    std::string prefix_;
    bool up_ = false;
};

// The xlbd to test: $XLBD, else the build's.
std::string xlbd_path();

// xlbd as a child of the test, inside a namespace, its output appended to a
// log. Killed (SIGKILL) and reaped by the destructor.
class AgentProcess {
public:
    AgentProcess(std::string ns, std::string config_path, std::string log_path,
                 std::string xlbd = xlbd_path());
    ~AgentProcess();
    AgentProcess(const AgentProcess&) = delete;
    AgentProcess& operator=(const AgentProcess&) = delete;

    // fork; the child enters the namespace and execs xlbd --config FILE ARGS.
    void start(const std::vector<std::string>& extra_args = {});
    bool running();
    pid_t pid() const { return pid_; }
    void signal(int sig);
    // Waits for the process to exit: its exit code, 128+signal, or nullopt
    // on timeout.
    std::optional<int> wait_exit(std::chrono::milliseconds timeout);
    void kill9();
    std::string log() const;
    const std::string& log_path() const { return log_path_; }
    int starts() const { return starts_; }

private:
    std::string ns_, config_path_, log_path_, xlbd_;
    pid_t pid_ = -1;
    int starts_ = 0;
};

}  // namespace xlb::test
