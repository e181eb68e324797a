// SPDX-License-Identifier: Apache-2.0
// The harness of the agent's end-to-end tests: a two-namespace lab joined by
// a veth pair, xlbd run as a child process inside the load balancer's
// namespace, HTTP over the agent's Unix socket and (from a thread that entered
// the namespace) over its metrics port, and readers of the pinned maps.
//
// Every resource has an owner whose destructor removes it, whatever the test
// did: the agent is killed, processes left in the namespaces are killed, XDP
// is detached, the namespaces, the pin directory under /sys/fs/bpf and the
// temporary directory are removed.
//
//   lb namespace  xa0 192.0.2.1/24 ---- veth ---- xa1 192.0.2.2/24  router namespace
//                 (xlbd, XDP)                     (next hop; routes the VIPs via 192.0.2.1)
#pragma once

#include <sys/types.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <future>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "netns.h"
#include "url_encode.h"
#include "xlb/bpf/fd.h"

namespace xlb::e2e {

using json = nlohmann::json;
using Clock = std::chrono::steady_clock;
using namespace std::chrono_literals;

// ---- processes and files -----------------------------------------------------

// Shell commands and network namespaces: the tests' shared helpers.
using CmdResult = test::CommandResult;
inline CmdResult run(const std::string& command) { return test::run_command(command); }
inline std::string run_ok(const std::string& command) { return test::run_command_ok(command); }
using test::in_netns;
using test::NetnsScope;

std::string read_file(const std::string& path);
void write_file(const std::string& path, const std::string& text);
double ms_since(Clock::time_point start);

// ---- the lab -----------------------------------------------------------------

class Lab {
public:
    static constexpr const char* kLbIf = "xa0";
    static constexpr const char* kRouterIf = "xa1";
    static constexpr const char* kLbAddr = "192.0.2.1";
    static constexpr const char* kRouterAddr = "192.0.2.2";

    // Picks unique names (xlbe-<pid>-<n>); creates nothing yet.
    Lab();
    // Tears down whatever up() created, even partly; never throws.
    ~Lab();
    Lab(const Lab&) = delete;
    Lab& operator=(const Lab&) = delete;

    // Namespaces, veth, addresses, routes, the pin directory and the
    // temporary directory. Throws on failure (the destructor still cleans up).
    void up();

    const std::string& prefix() const { return prefix_; }
    const std::string& lb_ns() const { return lb_ns_; }
    const std::string& router_ns() const { return router_ns_; }
    const std::string& tmp() const { return tmp_; }
    // The agent's pin_dir (created by the lab); maps go to pin_dir/xa0/.
    const std::string& pin_dir() const { return pin_dir_; }
    std::string map_pin(const std::string& map) const { return pin_dir_ + "/" + kLbIf + "/" + map; }

    // XDP program id attached to xa0 (0: none), queried inside the namespace.
    std::uint32_t xdp_prog_id() const;

private:
    std::string prefix_, lb_ns_, router_ns_, tmp_, pin_dir_;
    bool tmp_made_ = false, pin_made_ = false;
};

// The settings part of an agent configuration for this lab, up to and
// including the `vips:` line; the caller appends the VIPs.
struct LabSettings {
    std::uint32_t hash_seed = 0;
    std::uint32_t max_vips = 16, max_backends = 64, conntrack_entries = 8192;
    int metrics_port = 9464;
};
std::string render_settings(const Lab& lab, const std::string& writer, const LabSettings& settings);

// Removes what an earlier run of these tests left behind when it was killed
// before its destructors ran: namespaces, pin directories and temporary
// directories named xlbe-<pid>-<n>... whose <pid> no longer exists. Touches
// nothing else. Returns what it removed (for the log).
std::vector<std::string> sweep_stale_labs();

// A new lab, up, after what every lab test needs from the host: bpffs
// mounted at /sys/fs/bpf, and (once per process) the stale labs of killed
// runs swept, each printed as "[ cleanup  ] removed ...".
std::unique_ptr<Lab> new_lab_up();

// Polls the XDP program attached to the lab's interface from a thread in the
// lb namespace, as fast as it can, until stop().
class XdpWatch {
public:
    struct Report {
        std::uint64_t polls = 0;
        std::uint64_t none = 0;     // polls that found no program attached
        std::uint64_t errors = 0;   // polls that failed
        std::vector<std::uint32_t> ids;  // program ids seen, in order, without repeats
    };
    explicit XdpWatch(const Lab& lab);
    ~XdpWatch();
    Report stop();

private:
    std::atomic<bool> stop_{false};
    std::atomic<bool> started_{false};
    Report report_;
    std::thread thread_;
};

// ---- servers in the namespaces (health checks) ----------------------------------

// Puts IPv4 addresses (/32) on the router namespace's loopback and routes them
// from the lb namespace through the router: servers the agent can probe at
// the backends' own addresses. They go with the namespaces.
void add_router_addresses(const Lab& lab, const std::vector<std::string>& addresses);

// A TCP server inside a namespace that accepts every connection and closes
// it (all a tcp health check needs). stop() closes the listening socket, so
// that connects are refused from then on, as when a server process dies;
// start() listens again on the same address.
class TcpServer {
public:
    TcpServer(std::string ns, std::string address, std::uint16_t port);
    ~TcpServer();  // stop()
    TcpServer(const TcpServer&) = delete;
    TcpServer& operator=(const TcpServer&) = delete;

    void start();  // throws when it cannot listen
    void stop();
    bool listening() const { return thread_.joinable(); }
    std::string name() const { return address_ + ":" + std::to_string(port_); }
    std::uint64_t accepted() const { return accepted_; }

private:
    std::string ns_, address_;
    std::uint16_t port_;
    bpf::UniqueFd listener_;
    std::atomic<bool> stop_{false};
    std::atomic<std::uint64_t> accepted_{0};
    std::thread thread_;
};

// ---- the agent -----------------------------------------------------------------

class AgentProcess {
public:
    // log_path collects the agent's stdout and stderr over every start.
    AgentProcess(const Lab& lab, std::string config_path, std::string log_path);
    ~AgentProcess();  // SIGKILL and reap when still running
    AgentProcess(const AgentProcess&) = delete;
    AgentProcess& operator=(const AgentProcess&) = delete;

    // fork; the child enters the lb namespace and execs xlbd --config FILE.
    void start(const std::vector<std::string>& extra_args = {});
    bool running();
    pid_t pid() const { return pid_; }
    void signal(int sig);
    // Waits for the process to exit: its exit code, 128+signal, or nullopt
    // on timeout.
    std::optional<int> wait_exit(std::chrono::milliseconds timeout);
    void kill9();
    std::string log() const { return read_file(log_path_); }
    const std::string& log_path() const { return log_path_; }
    int starts() const { return starts_; }

private:
    const Lab& lab_;
    std::string config_path_, log_path_;
    pid_t pid_ = -1;
    int starts_ = 0;
};

// Runs xlbd to completion inside the lb namespace (e.g. --check-config):
// exit code and its output.
CmdResult run_xlbd(const Lab& lab, const std::vector<std::string>& args,
                   std::chrono::milliseconds timeout = 10s);

// ---- HTTP ----------------------------------------------------------------------

struct Reply {
    int status = -1;   // -1: no answer
    std::string text;  // body, or the transport error
    std::string content_type;
    json body;         // parsed body (discarded value when not JSON)
};

// The agent's JSON API over its Unix socket.
class Api {
public:
    explicit Api(std::string socket_path) : socket_(std::move(socket_path)) {}
    Reply get(const std::string& path) const;
    Reply patch(const std::string& path, const std::string& body) const;
    Reply post(const std::string& path, const std::string& body) const;

private:
    std::string socket_;
};

// GET over TCP from inside the namespace.
Reply http_get_in_netns(const std::string& ns, const std::string& host, int port,
                        const std::string& path);
using test::url_encode;

// ---- pinned maps -----------------------------------------------------------------

// bpf_obj_get; throws when the pin is missing.
bpf::UniqueFd open_pinned(const std::string& path);
std::uint32_t map_id(int fd);

}  // namespace xlb::e2e
