// SPDX-License-Identifier: Apache-2.0
// The harness of the real-TCP end-to-end tests: a lab from scripts/lab.sh
// (namespaces client, router, lb, b1..b4) owned by an object whose destructor
// always takes it down (tests/support/lab_driver.h), the agent started and
// killed through the script, the
// agent's API over its Unix socket (curl), and TCP clients that run inside the
// client namespace.
//
// Sockets belong to the namespace they were created in: a helper thread
// enters the client namespace, creates and connects the socket, and the
// caller's thread then uses it; the test's own threads never change namespace.
#pragma once

#include <atomic>
#include <chrono>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "lab_driver.h"
#include "netns.h"

namespace xlb::e2e_tcp {

using Clock = std::chrono::steady_clock;
using namespace std::chrono_literals;

using CmdResult = test::CommandResult;
inline CmdResult run(const std::string& command) { return test::run_command(command); }

// The lab's fixed addresses (scripts/lab.sh).
inline constexpr const char* kVip4 = "198.51.100.10";
inline constexpr const char* kVip6 = "2001:db8:f::10";
inline constexpr const char* kVipMixed = "198.51.100.20";  // IPv4 VIP, IPv6 backends
inline std::string backend_v4(int i) { return "203.0.113.1" + std::to_string(i); }
inline std::string backend_v6(int i) { return "2001:db8:b::1" + std::to_string(i); }
inline std::string vip_key4() { return std::string(kVip4) + ":80/tcp"; }
inline std::string vip_key6() { return "[" + std::string(kVip6) + "]:80/tcp"; }
inline std::string vip_key_mixed() { return std::string(kVipMixed) + ":80/tcp"; }

// The full lab of scripts/lab.sh (tests/support/lab_driver.h): a client, the
// router, the LB and backends.
class Lab : public test::Lab {
public:
    // lab.sh up with the client and `backends` namespaces, the first 3 in
    // the agent's config with weights 100,100,200; `extra`: more lab.sh
    // options, separated by spaces. Throws std::runtime_error with the
    // script's output on failure.
    void up(int backends = 4, const std::string& extra = "");
    void agent_start() { script("agent-start"); }
    void agent_kill() { script("agent-kill"); }  // kill -9
    std::string agent_log() const;

    // The agent's API: HTTP status and body.
    struct Reply {
        int status = -1;
        std::string body;
    };
    Reply api(const std::string& method, const std::string& path, const std::string& body = "");

    std::string state_dir() const { return dir(); }
};

// One HTTP GET / through the VIP from the client namespace: the backend's
// name ("b1"), or "error: ..." . `source`: the client's address to use (one
// of the namespace's), else the kernel's choice; connect_ms: how long the
// connection may take (SYN retransmissions included).
std::string get_backend_name(const std::string& ns, const std::string& vip, int port = 80,
                             const std::string& source = "", int connect_ms = 3000);

// A TCP connection to vip:port made in namespace ns (blocking, 3 s to
// connect), from `source` when not empty: its fd, owned by the caller, or -1
// with error set.
int connect_in(const std::string& ns, const std::string& vip, int port, std::string& error,
               const std::string& source = "");

// n sequential connections (varied source ports, as the kernel picks them):
// count per backend name, and errors under "error".
std::map<std::string, int> count_backends(const std::string& ns, const std::string& vip, int n);
std::string format_counts(const std::map<std::string, int>& counts);

// Long-lived connections to GET /echo through the VIP: a thread sends a
// numbered line on each connection every 20 ms and waits (up to 2 s) for its
// echo, recording which backend answers, the worst round trip, and any reset,
// close, timeout or change of backend.
class Streams {
public:
    struct Conn {
        int fd = -1;
        std::string backend;  // from the first echo
        std::uint64_t echoes = 0;
        double worst_ms = 0;
        std::string error;    // empty while healthy
        bool closed = false;  // by close_on(), not by the peer
    };
    // `source`: as for get_backend_name.
    Streams(const std::string& ns, const std::string& vip, int count,
            const std::string& source = "");
    ~Streams();
    // Worst round trip since the last reset_worst().
    void reset_worst();
    std::vector<Conn> snapshot();
    // Closes (FIN) the healthy connections on `backend`, as a client that is
    // done would; their error says so. The number closed.
    int close_on(const std::string& backend);
    void stop();

private:
    void loop();
    std::mutex mu_;
    std::vector<Conn> conns_;
    std::atomic<bool> stop_{false};
    std::thread thread_;
};

}  // namespace xlb::e2e_tcp
