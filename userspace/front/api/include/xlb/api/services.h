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
#include <cstdint>
#include <functional>
#include <iterator>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "xlb/announce/announcer.h"
#include "xlb/config/model.h"
#include "xlb/conntrack/status.h"
#include "xlb/conntrack/syn_flood.h"
#include "xlb/conntrack/table.h"
#include "xlb/control/loop.h"
#include "xlb/health/backend_health.h"
#include "xlb/health/engine.h"

namespace xlb::api {

class DataPlaneView;
class PublishMetrics;
class StateStore;

// The XDP mode actually attached ("native" or "generic"). The API starts
// before the program is attached (a start that fails later must leave the
// data plane alone), so the agent fills it in afterwards; copies share it.
class AttachedMode {
public:
    AttachedMode(std::string mode = {}) : value_(std::make_shared<Value>(std::move(mode))) {}
    AttachedMode(const char* mode) : AttachedMode(std::string(mode)) {}
    void set(std::string mode) {
        std::lock_guard lock(value_->mu);
        value_->mode = std::move(mode);
    }
    std::string get() const {
        std::lock_guard lock(value_->mu);
        return value_->mode;
    }
    // Serialises as the plain string (nlohmann::json finds this by ADL).
    template <typename Json>
    friend void to_json(Json& j, const AttachedMode& m) {
        j = m.get();
    }

private:
    struct Value {
        explicit Value(std::string m) : mode(std::move(m)) {}
        mutable std::mutex mu;
        std::string mode;
    };
    std::shared_ptr<Value> value_;
};

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
    std::string version;    // e.g. "0.1.0"
    std::string interface;  // "eth0"
    AttachedMode xdp_mode;  // empty until attached
    std::chrono::steady_clock::time_point started = std::chrono::steady_clock::now();
};

// What one reload did: from SIGHUP or POST /v1/reload (docs/api.md).
struct ReloadReport {
    enum class Outcome {
        kApplied,            // the new file runs
        kInvalid,            // the file has errors: nothing applied
        kDisruptiveRefused,  // it would remap flows and was not confirmed: nothing applied
        kFailed,             // valid, but could not be applied (e.g. next hop unresolvable)
    };
    Outcome outcome = Outcome::kApplied;
    std::string source;  // "SIGHUP" or "api"
    std::chrono::system_clock::time_point at = std::chrono::system_clock::now();
    std::string error;                                 // one line; empty when applied
    std::vector<std::string> errors;                   // file:line:column: ..., for kInvalid
    std::vector<std::string> added, removed, changed;  // VIP keys
    std::size_t untouched = 0;
    std::vector<std::string> settings_changed;  // applied now, e.g. "hash_seed"
    std::vector<std::string> restart_required;  // changed, take effect at the next start
    std::vector<std::string> disruptive;        // changes that remap established flows
    std::vector<std::string> warnings;
    // A dry run (xlbctl diff): nothing was applied; `result` says what a
    // reload would end with, and `differences` says, field by field, how
    // each added, removed or changed VIP differs from what runs.
    bool dry_run = false;
    std::vector<std::string> differences;
};
// "applied", "invalid", "disruptive_refused", "failed": the `result` field and
// the metric label.
const char* to_string(ReloadReport::Outcome outcome);
inline constexpr ReloadReport::Outcome kReloadOutcomes[] = {
    ReloadReport::Outcome::kApplied, ReloadReport::Outcome::kInvalid,
    ReloadReport::Outcome::kDisruptiveRefused, ReloadReport::Outcome::kFailed};

// The last reload and how many ended each way since the start; any thread.
class ReloadHistory {
public:
    void record(const ReloadReport& report) {
        std::lock_guard lock(mu_);
        last_ = report;
        ++counts_[static_cast<std::size_t>(report.outcome)];
    }
    std::optional<ReloadReport> last() const {
        std::lock_guard lock(mu_);
        return last_;
    }
    std::uint64_t count(ReloadReport::Outcome outcome) const {
        std::lock_guard lock(mu_);
        return counts_[static_cast<std::size_t>(outcome)];
    }

private:
    mutable std::mutex mu_;
    std::optional<ReloadReport> last_;
    std::uint64_t counts_[std::size(kReloadOutcomes)] = {};
};

// Re-reads the configuration file; `allow_disruptive` confirms changes that
// remap flows. Blocks until applied or rejected; any thread but the control
// thread.
using ReloadFn = std::function<ReloadReport(bool allow_disruptive)>;
// The same reload of `yaml` instead of the file (errors name `file`), as a
// dry run: the report of what it would change, nothing applied, nothing
// recorded; any thread but the control thread.
using ReloadDryRunFn = std::function<ReloadReport(const std::string& yaml, const std::string& file,
                                                  bool allow_disruptive)>;

// nullopt: the XDP program is attached; otherwise why not ("not attached yet").
using Readiness = std::function<std::optional<std::string>()>;

// What the health checker knows about one backend of one VIP.
struct BackendHealthInfo {
    health::Snapshot snapshot;                      // verdict, last probe, counters
    std::optional<health::LastProbe> last_failure;  // the last probe that failed
    // Other VIPs whose identical checks of this backend share its probe.
    std::vector<std::string> probe_shared_with;
};
// nullopt when the backend is not checked. Called on the control thread
// only, from inside ControlLoop::call.
using HealthLookup = std::function<std::optional<BackendHealthInfo>(const std::string& vip_key,
                                                                    const net::IpAddress& backend)>;
// The last verdict changes of one backend of one VIP, oldest first (GET
// /v1/backend/history); nullopt when the backend is not checked. Control
// thread only, like HealthLookup.
using HealthHistoryLookup = std::function<std::optional<std::vector<health::Transition>>(
    const std::string& vip_key, const net::IpAddress& backend)>;
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

// This LB host as the routers see it (docs/scale-out.md): drained or not
// (xlbctl host drain), and the announcer's last word on each VIP and on BIRD.
struct HostState {
    bool drained = false;
    std::optional<std::chrono::system_clock::time_point> since;  // of the drain
};
struct BgpInfo {
    config::BgpSettings settings;
    announce::AnnouncerStatus status;
};
struct HostControl {
    std::function<HostState()> state;
    // Persists the drain state first, then has the VIPs announced or withdrawn;
    // any thread but the control thread.
    std::function<Result<HostState>(bool drained)> set_drained;
    // nullopt: BGP announcements are off (bgp.enabled: false).
    std::function<std::optional<BgpInfo>()> bgp;
};

// Fleet mode (docs/fleet.md): the host's VIPs, backends and drain come from
// the fleet's store, so the API refuses to change them (409, `refusal`, which
// says how to change them instead), and status and metrics show the store.
struct FleetInfo {
    std::string name;
    std::string host;
    bool store_reachable = true;
    std::optional<std::chrono::system_clock::time_point> store_since;  // of the last change
    std::string store_error;                                           // when unreachable
    std::int64_t applied_revision = 0;  // the config revision running; 0: none yet
    std::int64_t seen_revision = 0;     // the newest store revision read
    // The newest desired state not applied, and why (invalid, disruptive).
    std::int64_t refused_revision = 0;  // 0: none
    std::string refused_reason;
    std::vector<std::string> refused_errors;
    // Where the running desired state came from: "store", or "persisted"
    // (a start with the store unreachable), or "none" (waiting for it).
    std::string source = "none";
    // One health view (docs/fleet.md): "fleet" while the store answers and
    // holds this host's record, else "local" (the fleet's last verdicts,
    // and this host's own for backends that changed since), with why.
    std::string health_view = "fleet";
    std::string health_view_reason;
    std::size_t local_fallbacks = 0;  // backends following this host's own verdict
    struct Disagreement {
        std::string vip;
        std::string backend;
        std::string local;  // this host's verdict
        std::string fleet;  // the one the table follows
    };
    std::vector<Disagreement> disagreements;
    // when_current: why this host withdraws its routes (empty: it does not).
    std::string behind;
    // The last table every live host published, per VIP: first to last.
    struct Spread {
        std::string vip;
        std::string checksum;
        double seconds = 0;
        std::size_t hosts = 0;
    };
    std::vector<Spread> publish_spreads;
};
struct FleetHooks {
    std::string refusal;                // empty: not in a fleet
    std::function<FleetInfo()> status;  // set with refusal
};

struct Services {
    control::ControlLoop& loop;
    StateStore& state;                // persists every change before it is applied
    const DataPlaneView& data_plane;  // rings and counters
    PublishMetrics& publishes;        // fed by the agent from ControlLoop::on_publish
    std::shared_ptr<const SharedSettings> settings;  // never null
    AgentInfo info;
    Readiness readiness;
    // How long a handler waits for the control thread (a task and the publish
    // that follows). Past it: 503, and for a change "may still be applied".
    std::chrono::milliseconds call_timeout{15'000};
    HealthLookup health;                           // empty: no health checker (fields show null)
    HealthHistoryLookup health_history;            // empty: no health checker (no histories)
    VipsChanged on_vips_changed;                   // empty: nothing to tell
    ProbeEngineLookup probe_engine;                // empty: no probe engine (no series)
    ReloadFn reload;                               // empty: POST /v1/reload answers 501
    ReloadDryRunFn reload_dry_run;                 // empty: ?dry_run=1 answers 501
    std::shared_ptr<const ReloadHistory> reloads;  // null: no reload shown
    HostControl host;                              // empty: /v1/host answers 501
    // The connection table, scanned on the API's threads (null: the
    // /v1/conntrack endpoints answer 501), and the sweeper's last word on it
    // (null: status shows "conntrack": null, no metrics).
    std::shared_ptr<const conntrack::Table> conntrack;
    std::shared_ptr<const conntrack::StatusBoard> conntrack_status;
    // The SYN flood detector's last word (docs/syn-cookies.md); null: no
    // detector ("syn_flood": null, no series, VIPs on auto shown idle).
    std::shared_ptr<const conntrack::SynFloodBoard> syn_flood;
    // Connections per backend for /v1/backends and /metrics, one scan of the
    // table shared by the readers of a second (null: those fields are null).
    std::shared_ptr<conntrack::ConnectionsCache> connections;
    FleetHooks fleet;  // empty: a host configured by its file alone
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
