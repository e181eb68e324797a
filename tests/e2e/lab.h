// SPDX-License-Identifier: Apache-2.0
// The harness of the agent's end-to-end tests: the smallest lab of
// scripts/lab.sh (the LB and the router, through tests/support/lab_driver.h), xlbd
// run as a child process inside the load balancer's namespace, HTTP over the
// agent's Unix socket and (from a thread that entered the namespace) over its
// metrics port, and readers of the pinned maps.
//
// Every resource has an owner whose destructor removes it, whatever the test
// did: the agent is killed, then the lab goes down (its processes, namespaces,
// pin directory and directory).
//
//   lb namespace  eth0 203.0.113.2/24 ---- br0 203.0.113.1/24  router namespace
//                 (xlbd, XDP)              (next hop; routes the VIPs via 203.0.113.2)
#pragma once

#include <sys/types.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <future>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "lab_driver.h"
#include "netns.h"
#include "url_encode.h"
#include "xlb/bpf/fd.h"

// Printed lines that carry a measurement: "[ measured ] ...".
#define MEASURED(...)                 \
    do {                              \
        std::printf("[ measured ] "); \
        std::printf(__VA_ARGS__);     \
        std::printf("\n");            \
        std::fflush(stdout);          \
    } while (0)

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

// The LB and the router from scripts/lab.sh (tests/support/lab_driver.h), with what
// these suites read from it.
class Lab : public test::Lab {
public:
    // A room for the test's files (the lab's directory, removed with it).
    std::string tmp() const { return dir(); }
    std::string map_pin(const std::string& map) const {
        return pin_dir() + "/" + kLbIf + "/" + map;
    }
    // XDP program id attached to the LB's interface (0: none), queried inside
    // the namespace.
    std::uint32_t xdp_prog_id() const;
};

// The settings part of an agent configuration for this lab, up to and
// including the `vips:` line; the caller appends the VIPs.
struct LabSettings {
    std::uint32_t hash_seed = 0;
    std::uint32_t max_vips = 16, max_backends = 64, conntrack_entries = 8192;
    int metrics_port = 9464;
};
std::string render_settings(const Lab& lab, const std::string& writer, const LabSettings& settings);

// A new lab, up (the smallest: the LB and the router); test::Lab::up mounts
// bpffs when needed and sweeps the labs of killed runs once per process.
std::unique_ptr<Lab> new_lab_up();

// Polls the XDP program attached to the lab's interface from a thread in the
// lb namespace, as fast as it can, until stop().
class XdpWatch {
public:
    struct Report {
        std::uint64_t polls = 0;
        std::uint64_t none = 0;          // polls that found no program attached
        std::uint64_t errors = 0;        // polls that failed
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

// xlbd in the lab's lb namespace (tests/support/lab_driver.h).
class AgentProcess : public test::AgentProcess {
public:
    // log_path collects the agent's stdout and stderr over every start.
    AgentProcess(const Lab& lab, std::string config_path, std::string log_path)
        : test::AgentProcess(lab.lb_ns(), std::move(config_path), std::move(log_path)) {}
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
    json body;  // parsed body (discarded value when not JSON)
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

// Waits until the agent's /v1/status says ready; throws when the agent exits
// first or the timeout passes (naming the last answer).
void wait_agent_ready(AgentProcess& agent, const Api& api, std::chrono::milliseconds timeout);

// GET over TCP from inside the namespace.
Reply http_get_in_netns(const std::string& ns, const std::string& host, int port,
                        const std::string& path);
using test::url_encode;

// ---- pinned maps -----------------------------------------------------------------

// bpf_obj_get; throws when the pin is missing.
bpf::UniqueFd open_pinned(const std::string& path);
std::uint32_t map_id(int fd);

}  // namespace xlb::e2e
