// SPDX-License-Identifier: Apache-2.0
// The agent's HTTP/JSON API on a Unix socket (default /run/xlb/xlbd.sock,
// mode 0660). xlbctl is its client. Endpoints, bodies and errors:
// docs/api.md. Every change is decoded and validated like the configuration
// file, checked against the current state (unknown VIP 404, duplicate 409),
// persisted to the state file (atomic write) and only then applied through
// the reconciler; the response comes after the publish, with the VIP's new
// status. A rejected request changes nothing.
#pragma once

#include <sys/types.h>

#include <expected>
#include <memory>
#include <string>
#include <thread>

#include "xlb/api/services.h"
#include "xlb/error.h"

namespace xlb::api::detail {
class GuardedServer;
}  // namespace xlb::api::detail

namespace xlb::api {

// A group name or number as the host knows it; the error says how to create
// a missing one. Used by the socket set-up and by the checks before a start.
Result<gid_t> resolve_group(const std::string& group);

class ApiServer {
public:
    struct Options {
        std::string socket_path = "/run/xlb/xlbd.sock";
        std::size_t max_body_bytes = 1 << 20;
        // The socket's group (name or number), so that its members may use
        // xlbctl without root; empty: the agent's own group.
        std::string group;
        ConnectionLimits limits;
    };

    ApiServer(Services services, Options options);
    ~ApiServer();
    ApiServer(const ApiServer&) = delete;
    ApiServer& operator=(const ApiServer&) = delete;

    // Creates the socket's directory (0755) if needed, removes a stale socket,
    // refuses to start when another agent answers on it (or the path is not a
    // socket), binds, sets mode 0660 and serves on its own threads.
    Result<void> start();
    // Stops serving and removes the socket. Call before stopping the loop.
    void stop();

    const std::string& socket_path() const { return options_.socket_path; }

private:
    struct Impl;
    Services services_;
    Options options_;
    std::unique_ptr<Impl> impl_;
    std::unique_ptr<detail::GuardedServer> server_;
    std::thread thread_;
    bool created_socket_ = false;
};

}  // namespace xlb::api
