// SPDX-License-Identifier: Apache-2.0
// What the agent hands to the API and metrics servers. Everything referenced
// must outlive both servers; stop the servers before the control loop.
//
// Handlers run on the servers' own threads and reach the reconciler only
// through ControlLoop::call (the control thread runs the task and the
// response waits for the publish that follows). The data-plane view is read
// directly: reads of the kernel's maps, no state of the agent.
#pragma once

#include <chrono>
#include <cstddef>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include "xlb/config/model.h"
#include "xlb/control/loop.h"
#include "xlb/health/backend_health.h"
#include "xlb/health/engine.h"

namespace xlb::api {

class DataPlaneView;
class PublishMetrics;
class StateStore;

// How the API and metrics servers bound what clients may hold (docs/api.md,
// "Connections and limits"): a request (head and body) must arrive within
// request_timeout of the moment the server starts waiting for it; a peer
// (uid on the Unix socket, address on TCP) holds at most max_per_peer
// connections, all peers together max_connections (one thread each).
struct ConnectionLimits {
    std::chrono::milliseconds request_timeout{3000};
    std::chrono::milliseconds write_timeout{5000};
    std::size_t max_connections = 128;
    std::size_t max_per_peer = 32;
    std::size_t max_requests_per_connection = 100;
    std::size_t max_head_bytes = 16 * 1024;
};

struct AgentInfo {
    std::string version;     // e.g. "0.1.0"
    std::string interface;   // "eth0"
    std::string xdp_mode;    // the mode actually attached: "native" or "generic"
    std::chrono::steady_clock::time_point started = std::chrono::steady_clock::now();
};

// nullopt: the XDP program is attached; otherwise why not ("not attached yet").
using Readiness = std::function<std::optional<std::string>()>;

// What the health checker knows about one backend of one VIP.
struct BackendHealthInfo {
    health::Snapshot snapshot;                      // verdict, last probe, counters
    std::optional<health::LastProbe> last_failure;  // the last probe that failed
};
// nullopt when the backend is not checked. Called on the control thread
// only, from inside ControlLoop::call.
using HealthLookup = std::function<std::optional<BackendHealthInfo>(const std::string& vip_key,
                                                                    const net::IpAddress& backend)>;
// The probe engine's counters and its thread's CPU time; any thread.
struct ProbeEngineInfo {
    health::ProbeEngine::Stats stats;
    std::chrono::nanoseconds cpu_time{};
};
using ProbeEngineLookup = std::function<ProbeEngineInfo()>;

// Called on the control thread right after the API changed the desired VIPs
// (Reconciler::set_vips), e.g. to probe the new set.
using VipsChanged = std::function<void(control::Reconciler&)>;

// The settings the API works with (validation of changes, the hash seed of
// lookups). A reload (SIGHUP) may change some of them while handlers run on
// their own threads, so they are read and replaced whole, under a lock.
class SharedSettings {
public:
    explicit SharedSettings(config::Settings settings) : settings_(std::move(settings)) {}
    config::Settings get() const {
        std::lock_guard lock(mu_);
        return settings_;
    }
    void set(config::Settings settings) {
        std::lock_guard lock(mu_);
        settings_ = std::move(settings);
    }

private:
    mutable std::mutex mu_;
    config::Settings settings_;
};

struct Services {
    control::ControlLoop& loop;
    StateStore& state;                 // persists every change before it is applied
    const DataPlaneView& data_plane;   // rings and counters
    PublishMetrics& publishes;         // fed by the agent from ControlLoop::on_publish
    std::shared_ptr<const SharedSettings> settings;  // never null
    AgentInfo info;
    Readiness readiness;
    // How long a handler waits for the control thread (a task and the publish
    // that follows). Past it: 503, and for a change "may still be applied".
    std::chrono::milliseconds call_timeout{15'000};
    HealthLookup health;          // empty: no health checker (fields show null)
    VipsChanged on_vips_changed;  // empty: nothing to tell
    ProbeEngineLookup probe_engine;  // empty: no probe engine (no series)
};

// /livez: the control and worker threads of the loop have iterated within
// `max_age`. Checks no dependency.
struct ProbeResult {
    bool ok = false;
    std::string text;  // "ok", or what is wrong
};
ProbeResult check_live(const control::ControlLoop& loop,
                       std::chrono::milliseconds max_age = std::chrono::seconds(5));
// /readyz: readiness() says attached and every VIP's desired state is live.
ProbeResult check_ready(const Services& services);

}  // namespace xlb::api
