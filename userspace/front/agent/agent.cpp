// SPDX-License-Identifier: Apache-2.0
#include "xlb/agent/agent.h"

#include <signal.h>
#include <spdlog/spdlog.h>
#include <systemd/sd-daemon.h>
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <filesystem>
#include <future>
#include <mutex>

#include "xlb/agent/announce_link.h"
#include "xlb/agent/component.h"
#include "xlb/agent/components.h"
#include "xlb/agent/conntrack_sweeper.h"
#include "xlb/agent/fleet_health.h"
#include "xlb/agent/fleet_link.h"
#include "xlb/agent/health_link.h"
#include "xlb/agent/instance_lock.h"
#include "xlb/agent/preflight.h"
#include "xlb/agent/quic_keys.h"
#include "xlb/agent/reload.h"
#include "xlb/api/audit.h"
#include "xlb/api/data_plane_view.h"
#include "xlb/api/metrics.h"
#include "xlb/api/server.h"
#include "xlb/api/services.h"
#include "xlb/api/state_store.h"
#include "xlb/api/status_json.h"
#include "xlb/bpf/probe.h"
#include "xlb/bpf/programs.h"
#include "xlb/bpf/xdp.h"
#include "xlb/config/config.h"
#include "xlb/config/vip_merge.h"
#include "xlb/control/data_plane.h"
#include "xlb/control/loop.h"
#include "xlb/control/reconciler.h"
#include "xlb/datapath/setup.h"
#include "xlb/etcd/fleet_options.h"
#include "xlb/files/files.h"
#include "xlb/fleet/desired.h"
#include "xlb/health/engine.h"
#include "xlb/kernel/bpf_data_plane.h"
#include "xlb/kernel/bpf_data_plane_view.h"
#include "xlb/kernel/conntrack_bpf_table.h"
#include "xlb/log/event.h"
#include "xlb/netlink/neighbor.h"
#include "xlb/netlink/watcher.h"

namespace xlb::agent {

namespace fs = std::filesystem;

void apply_overrides(const AgentOptions& o, config::Settings& s) {
    if (o.interface) s.interface = *o.interface;
    if (o.xdp_mode) s.xdp_mode = *o.xdp_mode;
    if (o.api_socket) s.api_socket = *o.api_socket;
    if (o.metrics_listen) s.metrics_listen = *o.metrics_listen;
    if (o.pin_dir) s.pin_dir = *o.pin_dir;
    if (o.state_file) s.state_file = *o.state_file;
}

namespace {

// How long `host drain|resume` waits for the routes file to follow.
constexpr std::chrono::milliseconds kHostChangeWait{3000};

bpf::XdpMode to_bpf_mode(config::XdpMode mode) {
    switch (mode) {
        case config::XdpMode::kNative: return bpf::XdpMode::kNative;
        case config::XdpMode::kGeneric: return bpf::XdpMode::kGeneric;
        case config::XdpMode::kAuto: return bpf::XdpMode::kAuto;
    }
    return bpf::XdpMode::kAuto;
}

void notify(const std::string& text) { sd_notify(0, text.c_str()); }

// Gives the reconciler (which reads no files) the keys of the VIPs'
// encrypted QUIC configs, and for a file that could not be read its error,
// which the VIP's refusal then says. Read at each start, reload and change
// of the VIPs: a key file rewritten takes effect with the next reload.
void give_quic_keys(control::Reconciler& r, const std::vector<config::VipSpec>& vips) {
    QuicKeys read = read_quic_keys(vips);
    for (const auto& [file, error] : read.errors)
        spdlog::error("QUIC key file {}: {}", file, error);
    r.set_quic_keys(std::move(read.keys), std::move(read.errors));
}

std::string disruptive_refusal(std::size_t count) {
    return std::to_string(count) +
           " change(s) would move established flows (VIPs without conntrack, and flows "
           "re-routed to LB hosts that have not reloaded); confirm with 'xlbctl reload "
           "--allow-disruptive'";
}

// A reload's report as a dry run: what it would add, remove and change
// (each VIP's differences from what runs, field by field) and how it would
// end; nothing is applied. `out` holds the disruptive changes already.
api::ReloadReport dry_run_report(api::ReloadReport out, const ReloadResult& merged,
                                 const std::vector<config::VipSpec>& running,
                                 bool allow_disruptive) {
    auto find = [](const std::vector<config::VipSpec>& vips,
                   const std::string& key) -> const config::VipSpec* {
        for (const config::VipSpec& v : vips)
            if (v.key() == key) return &v;
        return nullptr;
    };
    for (const auto* keys : {&merged.added, &merged.removed, &merged.changed})
        for (const std::string& key : *keys)
            for (std::string& line :
                 config::describe_differences(key, find(running, key), find(merged.vips, key)))
                out.differences.push_back(std::move(line));
    out.added = merged.added;
    out.removed = merged.removed;
    out.changed = merged.changed;
    out.untouched = merged.untouched;
    out.warnings = merged.warnings;
    if (!out.disruptive.empty() && !allow_disruptive) {
        out.outcome = api::ReloadReport::Outcome::kDisruptiveRefused;
        out.error = disruptive_refusal(out.disruptive.size());
    }
    return out;
}

// The next hop's MAC: fixed in the file, or resolved from the neighbour table.
// The reconciler's second-chance window: what the data path does with it
// (datapath::make_config sets the flag only with GUE, as validation demands).
std::optional<control::Clock::duration> second_chance_window(const config::Settings& s) {
    if (!s.second_chance.enabled || s.encap != config::Encap::kGue) return std::nullopt;
    return s.second_chance.window;
}

Result<net::MacAddress> next_hop_mac(const config::Settings& s) {
    if (s.next_hop.mac) return *s.next_hop.mac;
    auto resolver = netlink::NeighborResolver::open(s.interface);
    if (!resolver) return std::unexpected(std::move(resolver.error()));
    return resolver->resolve(*s.next_hop.address);
}

class Agent {
public:
    explicit Agent(const AgentOptions& options) : options_(options) {}
    int run();

private:
    using Step = Result<void>;
    // The start: the configuration, then the components in order (see
    // add_components). Nothing before "go live" changes the kernel's data
    // plane or the state file, so a failure there leaves the host as it was;
    // the data plane's component undoes a first start that fails.
    int start();
    Step read_config();
    void add_components();
    Step check_host_first();
    Step lock_interface();
    Step open_data_plane();
    void close_data_plane();
    void undo_data_plane();
    Step prepare_loop();
    void load_host_state();
    api::Services services();
    Step go_live();
    void start_watching();
    void stop_watching();
    ConntrackSweeperComponent::Setup sweeper_setup();
    SynFloodComponent::Setup syn_flood_setup();

    api::ReloadReport reload(const std::string& source, bool allow_disruptive);
    api::ReloadReport reload_locked(api::ReloadReport report, bool allow_disruptive);
    // A reload of `yaml` (errors name `file`) as a dry run: nothing applied.
    api::ReloadReport reload_dry_run(const std::string& yaml, const std::string& file,
                                     bool allow_disruptive);
    api::ReloadReport reload_parsed(
        api::ReloadReport report,
        std::expected<config::Config, std::vector<config::ConfigError>> loaded,
        const std::string& file, bool allow_disruptive, bool dry_run);
    api::ReloadReport apply_locked(api::ReloadReport report, config::Config next,
                                   bool allow_disruptive, bool dry_run = false);
    // Fleet mode (docs/fleet.md).
    Result<void> open_fleet();
    Step read_fleet_first();
    void start_fleet();
    void apply_fleet(const FleetSnapshot& snapshot);
    void apply_fleet_drain(const fleet::Desired& desired);
    void refuse_fleet(const char* reason, std::int64_t revision,
                      const std::vector<fleet::Problem>& problems);
    void on_store_reachability(bool reachable, const std::string& error);
    void on_peers(const FleetSnapshot& records);
    void on_publishes(const FleetSnapshot& states);
    std::string publish_state();
    // One health view, two-phase publish, when_current (control thread).
    void refresh_fleet_health(control::Reconciler& r);
    void measure_publish_spreads();
    std::string behind_fleet(std::int64_t now_ms);
    void call_at(health::TimePoint when, health::TimePoint& pending,
                 std::function<void(control::Reconciler&)> fn);
    control::Clock::duration prepare_publish(const std::vector<control::BuildResult>& built);
    bool publish_ready(const std::vector<control::BuildResult>& built) const;
    std::string host_record();
    api::FleetInfo fleet_info() const;
    void watch_next_hop();
    Result<void> write_datapath_config(const net::MacAddress& mac);
    // Health checking; every one of these runs on the control thread.
    void refresh_health(control::Reconciler& r);
    void on_probe_result(const health::ProbeResult& result, control::Reconciler& r);
    void on_health_timer(control::Reconciler& r);
    void schedule_health_timer(health::TimePoint now);
    void log_panic_changes(control::Reconciler& r);
    void log_apply_failures(control::Reconciler& r);
    void route_probes_through_vips(std::vector<health::ProbeTarget>& targets,
                                   control::Reconciler& r);
    Result<void> attach_probe_encap();
    // BGP announcements (docs/scale-out.md).
    // Returns the input's number (AnnounceLink::wait_applied), 0 without BGP.
    std::uint64_t submit_announcements(control::Reconciler& r);
    Result<api::HostState> set_drained(bool drained);
    api::HostState host_state() const;

    AgentOptions options_;
    config::Config config_;
    net::MacAddress mac_{};
    std::string pin_dir_;
    std::optional<InstanceLock> lock_;
    std::vector<std::string> created_pin_dirs_;  // by open_data_plane, deepest first
    // What this start found, so that a failed first start removes exactly
    // what it created and a failed restart leaves the previous data plane.
    bool first_start_ = true;  // no pinned map was reused
    bool had_state_file_ = false;
    bool backup_state_ = false;
    bool running_ = false;  // every component started
    std::optional<bpf::LbProgram> lb_;
    std::optional<control::BpfDataPlane> data_plane_;
    std::optional<control::Reconciler> reconciler_;
    std::optional<control::ControlLoop> loop_;
    // Control thread only: the health state machines and the wake-up asked
    // of the engine for their next change with time (max: none pending).
    HealthLink health_;
    health::TimePoint health_timer_at_ = health::TimePoint::max();
    std::optional<api::StateStore> state_;
    std::optional<api::BpfDataPlaneView> view_;
    // The connection table: scanned by the API's threads and the sweeper.
    std::shared_ptr<const conntrack::Table> ct_table_;
    std::shared_ptr<conntrack::StatusBoard> ct_status_ = std::make_shared<conntrack::StatusBoard>();
    std::shared_ptr<conntrack::SynFloodBoard> syn_flood_ =
        std::make_shared<conntrack::SynFloodBoard>();
    api::PublishMetrics publish_metrics_;
    std::optional<bpf::XdpAttachment> xdp_;
    // via_vip probes: the tc egress encapsulator, attached on first need
    // (control thread); detached on exit, it only carries probes.
    std::optional<bpf::ProbeEncapProgram> probe_encap_;
    std::optional<bpf::TcAttachment> probe_tc_;
    std::atomic<bool> attached_{false};
    api::AttachedMode attached_mode_;
    // The API's view of config_.settings, replaced when a reload changes them.
    std::shared_ptr<api::SharedSettings> api_settings_;
    // What the API and metrics servers share; built by the first to start.
    std::optional<api::Services> services_;
    // Reloads come from SIGHUP (main thread) and the API (its threads): one
    // at a time. Also guards the next-hop watcher, which a reload replaces.
    std::mutex reload_mu_;
    std::shared_ptr<api::ReloadHistory> reloads_ = std::make_shared<api::ReloadHistory>();
    std::optional<netlink::NeighborWatchThread> watcher_;
    bool watching_ = false;  // the watcher's component runs
    // The drain state is kept whether or not BGP is on. host_ is guarded by
    // host_mu_ (API threads change it, the control thread reads it).
    std::optional<StartupGate> startup_gate_;  // control thread
    std::optional<HostDrainFile> drain_file_;
    mutable std::mutex host_mu_;
    api::HostState host_;
    // The components that own threads, as the rest of the agent reaches
    // them; they live in components_. announce_ is null without BGP.
    CtClockComponent* ct_clock_ = nullptr;
    HealthEngineComponent* engine_ = nullptr;
    AnnouncerComponent* announce_ = nullptr;
    ConntrackSweeperComponent* sweeper_ = nullptr;
    SynFloodComponent* syn_flood_watch_ = nullptr;
    // Fleet mode: empty for a host configured by its file. fleet_info_ is
    // what status shows (fleet_mu_); the snapshot the start applied seeds
    // the watch; the record's body and time are the writer thread's.
    std::optional<fleet::Layout> fleet_layout_;
    std::unique_ptr<FleetLink> fleet_;
    std::optional<SnapshotFile> fleet_file_;
    std::optional<FleetSnapshot> fleet_start_;
    mutable std::mutex fleet_mu_;
    api::FleetInfo fleet_info_;
    std::string record_body_;
    std::string record_at_;
    // Control thread only: the fleet's health view; the tables held for the
    // other hosts (VIP -> checksum) and the live ones' publish times; the
    // spreads already counted (VIP -> checksum); pending timers.
    std::optional<FleetHealthView> fleet_health_;
    std::map<std::string, std::string> prepared_;
    std::map<std::string, std::pair<std::string, std::int64_t>> published_;
    std::map<std::string, std::string> spread_counted_;
    std::map<std::string, fleet::PublishState> peer_publishes_;  // by host, this one's too
    // The peers watch thread's: each record decoded once per revision.
    std::map<std::string, std::pair<std::int64_t, fleet::HostVotes>> decoded_records_;
    health::TimePoint fleet_step_at_ = health::TimePoint::max();
    health::TimePoint behind_check_at_ = health::TimePoint::max();
    std::string applied_at_;  // fleet_mu_: when applied_revision was applied (UTC, ms)
    // Last, so that it goes first: what its components use is declared above.
    Components components_;
};

std::uint64_t Agent::submit_announcements(control::Reconciler& r) {
    if (!announce_) return 0;
    const std::vector<control::VipStatus> vips = r.status();
    const bool complete = startup_gate_->complete(vips, std::chrono::steady_clock::now());
    std::string behind;
    if (fleet_health_) behind = behind_fleet(fleet_health_->wall_ms(health::Clock::now()));
    return announce_->link().submit(
        announce_input(vips, host_state().drained, complete, std::move(behind)));
}

api::HostState Agent::host_state() const {
    std::lock_guard lock(host_mu_);
    return host_;
}

// Persisted before it takes effect: a drain that the next start would forget
// would bring the host back into the routers' ECMP groups unasked.
Result<api::HostState> Agent::set_drained(bool drained) {
    if (drained && !announce_)
        return xlb::fail(
            "drain: BGP announcements are off (bgp.enabled: false), so there is nothing "
            "to withdraw",
            "turn bgp on in the configuration, or take the host out of the routers' "
            "configuration by hand");
    api::HostState next;
    {
        std::lock_guard lock(host_mu_);
        if (host_.drained == drained) return host_;
        next.drained = drained;
        if (drained) next.since = std::chrono::system_clock::now();
        if (auto saved = drain_file_->save(next); !saved)
            return std::unexpected(
                std::move(saved.error()).add_context(drained ? "drain" : "resume"));
        host_ = next;
    }
    spdlog::info("host {}",
                 drained ? "drained: withdrawing every VIP" : "resumed: announcing again");
    if (fleet_) fleet_->poke_record();
    // The answer reports the routes after the change: wait (a little) for
    // the announcer to have rewritten the routes file. A wedged BIRD only
    // delays the answer; the change goes ahead either way.
    auto submitted = loop_->call<std::uint64_t>(
        [this](control::Reconciler& r) { return submit_announcements(r); });
    if (submitted.wait_for(kHostChangeWait) == std::future_status::ready && announce_ &&
        !announce_->link().wait_applied(submitted.get(), kHostChangeWait))
        spdlog::warn(
            "host {}: the routes file was not rewritten within {} ms; the answer shows "
            "the routes from before",
            drained ? "drain" : "resume", kHostChangeWait.count());
    return next;
}

Result<void> Agent::write_datapath_config(const net::MacAddress& mac) {
    const config::ConntrackSettings& ct = config_.settings.conntrack;
    // Derived from the table actually in use, which a refused resize keeps
    // at the pinned size.
    const datapath::CtBudget budget =
        datapath::ct_insert_budget(ct.insert_rate, ct.insert_burst, lb_->conntrack_load().capacity,
                                   static_cast<std::uint32_t>(bpf::possible_cpu_count()));
    auto ok = lb_->config().put(0, datapath::make_config(config_.settings, mac, budget));
    if (!ok) return ok;
    mac_ = mac;
    ct_status_->update([&](conntrack::Status& s) {
        s.insert_rate_per_cpu = budget.rate;
        s.insert_burst = budget.burst;
    });
    return {};
}

void Agent::log_panic_changes(control::Reconciler& r) {
    for (const control::PanicChange& c : r.take_panic_changes())
        log::emit(c.to == control::PanicReason::kBelowThreshold ? log::Priority::kWarning
                                                                : log::Priority::kInfo,
                  describe_panic_change(c),
                  {{log::kEvent, log::kEventPanic}, {log::kVip, c.vip_key}});
}

void Agent::log_apply_failures(control::Reconciler& r) {
    for (const control::ApplyFailure& f : r.take_apply_failures())
        log::emit(log::Priority::kError,
                  fmt::format(
                      "VIP {} not applied: {}; trying again in {} ms", f.vip_key, f.error.message(),
                      std::chrono::duration_cast<std::chrono::milliseconds>(f.retry_in).count()),
                  {{log::kEvent, log::kEventPublish}, {log::kVip, f.vip_key}});
}

Result<void> Agent::attach_probe_encap() {
    if (probe_tc_) return {};
    // A failed attach is tried again at the next change of probe targets (an
    // API change or a reload, never on a timer): whatever stood in the way may
    // have been fixed by then, and the error is logged again if not.
    auto program = bpf::ProbeEncapProgram::load(*lb_);
    if (!program) return std::unexpected(std::move(program.error()));
    auto iface = bpf::Interface::by_name(config_.settings.interface);
    if (!iface) return std::unexpected(std::move(iface.error()));
    auto tc = bpf::TcAttachment::attach(*program, *iface);
    if (!tc) return std::unexpected(std::move(tc.error()));
    probe_encap_.emplace(std::move(*program));
    probe_tc_.emplace(std::move(*tc));
    spdlog::info("health: probes through the VIPs are encapsulated by tc egress on {}",
                 config_.settings.interface);
    return {};
}

// Targets of via_vip checks are addressed to their VIP and marked with their
// backend's id, which the tc egress program encapsulates towards. The id is
// allocated here if the backend has none yet: the reconciler writes its
// entry with the next plan, well before the first probe (they are spread
// over the first second).
void Agent::route_probes_through_vips(std::vector<health::ProbeTarget>& targets,
                                      control::Reconciler& r) {
    bool any = false;
    for (health::ProbeTarget& t : targets) {
        if (!t.check.via_vip) continue;
        any = true;
        const config::VipSpec* vip = r.find_vip(t.key.vip);
        if (!vip) continue;
        t.via_address = vip->address;
        auto ref = r.registry().backend(t.key.vip, t.key.backend);
        if (!ref) {
            spdlog::error("health: {}: cannot probe through the VIP: {}", t.key.to_string(),
                          ref.error().message());
            continue;
        }
        auto mark = bpf::probe_mark(ref->id);
        if (!mark) {
            spdlog::error(
                "health: {}: cannot probe through the VIP: backend id {} does not fit "
                "in a probe mark",
                t.key.to_string(), ref->id);
            continue;
        }
        t.mark = *mark;
    }
    if (!any) return;
    if (auto ok = attach_probe_encap(); !ok) {
        // Unencapsulated, the probes fail: the backends are judged unhealthy,
        // never healthy by mistake.
        spdlog::error(
            "health: probes through the VIP cannot be encapsulated ({}); those "
            "checks will fail",
            ok.error().message());
    }
}

void Agent::refresh_health(control::Reconciler& r) {
    const auto now = health::Clock::now();
    std::vector<health::ProbeTarget> targets = health_.set_vips(r.vips(), now, r);
    if (fleet_health_) {
        health_.hold_vips(FleetHealthView::consensus_vips(r.vips()), now, r);
        refresh_fleet_health(r);
    }
    route_probes_through_vips(targets, r);
    spdlog::info("health: probing {} (VIP, backend) pair(s)", targets.size());
    engine_->engine().set_targets(std::move(targets));
    schedule_health_timer(now);
}

void Agent::on_probe_result(const health::ProbeResult& result, control::Reconciler& r) {
    const auto now = health::Clock::now();
    const std::vector<HealthEvent> events = health_.apply(result, now, r);
    for (const HealthEvent& event : events)
        log::emit(event.warning ? log::Priority::kWarning : log::Priority::kInfo,
                  "health: " + event.line,
                  {{log::kEvent, log::kEventHealth},
                   {log::kVip, event.key.vip},
                   {log::kBackend, event.key.backend.to_string()}});
    if (fleet_ && !events.empty()) {
        fleet_->poke_record();  // a verdict to report
        // In the fleet's view it comes back through the record; without it
        // this host's own verdict counts at once.
        if (fleet_health_ && !fleet_health_->ready()) refresh_fleet_health(r);
    }
    schedule_health_timer(now);
}

void Agent::on_health_timer(control::Reconciler& r) {
    const auto now = health::Clock::now();
    if (health_timer_at_ <= now) health_timer_at_ = health::TimePoint::max();
    health_.tick(now, r);
    if (fleet_health_ && fleet_health_->falling_back() > 0) refresh_fleet_health(r);
    schedule_health_timer(now);
}

// One wake-up at a time: the earliest one the state machines need. A timer
// asked for earlier than needed only costs a spare tick.
void Agent::schedule_health_timer(health::TimePoint now) {
    const health::TimePoint next = health_.next_change(now);
    if (next == health::TimePoint::max()) return;
    if (health_timer_at_ > now && health_timer_at_ <= next) return;
    health_timer_at_ = next;
    engine_->engine().call_at(
        next, [this] { loop_->post([this](control::Reconciler& r) { on_health_timer(r); }); });
}

void Agent::watch_next_hop() {
    watcher_.reset();
    if (!config_.settings.next_hop.address) return;
    const net::IpAddress hop = *config_.settings.next_hop.address;
    auto watcher = netlink::NeighborWatcher::open(
        config_.settings.interface, hop,
        [this, hop](const netlink::NextHopEvent& event) {
            if (!event.mac) {
                spdlog::warn("next hop {} lost its neighbour entry; keeping {} until it is back",
                             hop.to_string(), net::mac_to_string(mac_));
                return;
            }
            const net::MacAddress mac = *event.mac;
            loop_->post([this, hop, mac](control::Reconciler&) {
                if (mac == mac_) return;
                spdlog::info("next hop {} moved from {} to {}", hop.to_string(),
                             net::mac_to_string(mac_), net::mac_to_string(mac));
                if (auto ok = write_datapath_config(mac); !ok)
                    spdlog::error("update next-hop MAC: {}", ok.error().message());
            });
        },
        netlink::WatchOptions{mac_, true});
    if (!watcher) {
        spdlog::warn("cannot watch next hop {}: {}; its MAC is fixed at {} until a reload",
                     hop.to_string(), watcher.error().message(), net::mac_to_string(mac_));
        return;
    }
    auto thread = netlink::NeighborWatchThread::start(std::move(*watcher), [](const bpf::Error& e) {
        spdlog::warn("next-hop watcher: {}", e.message());
    });
    if (thread) watcher_.emplace(std::move(*thread));
}

int Agent::start() {
    auto not_starting = [](const Error& e) {
        spdlog::error("{}", e.message());
        spdlog::error("not starting");
    };
    if (auto ok = read_config(); !ok) {
        not_starting(ok.error());
        return 1;
    }
    add_components();
    if (auto ok = components_.start(not_starting); !ok) return 1;
    running_ = true;
    return 0;
}

// The agent's parts in the order they start; they stop in reverse. Each
// starts after what it needs and so stops before it: every part that posts
// to the control loop or waits for it (the health engine, the servers, the
// watcher, the announcer, the sweeper, the watchdog) stops before the loop,
// and the loop before the data plane's last writes. The API and metrics
// servers start before "go live" so that a socket that cannot be had stops
// the start before the data plane is touched; the loop is created before
// them (their requests wait for it) and runs from "go live" on, after the
// first publish, which is the main thread's.
void Agent::add_components() {
    const config::Settings& s = config_.settings;
    components_.add<StepComponent>(
        "interface lock", [this] { return lock_interface(); }, [this] { lock_.reset(); });
    components_.add<StepComponent>("host checks", [this] { return check_host_first(); });
    if (fleet_)
        components_.add<StepComponent>("fleet desired state",
                                       [this] { return read_fleet_first(); });
    components_.add<StepComponent>(
        "data plane",
        [this]() -> Step {
            auto ok = open_data_plane();
            if (!ok) undo_data_plane();
            return ok;
        },
        [this] { close_data_plane(); });
    ct_clock_ = &components_.add<CtClockComponent>(
        [this](std::uint32_t units) { lb_->set_ct_clock(units); });
    // Before anything attaches the program: a restart's new program then
    // starts answering a flood that goes on before it takes the traffic.
    syn_flood_watch_ = &components_.add<SynFloodComponent>([this] { return syn_flood_setup(); });
    components_.add<StepComponent>(
        "control loop", [this] { return prepare_loop(); }, [this] { loop_->stop(); });
    components_.add<StepComponent>("drain state", [this]() -> Step {
        load_host_state();
        return {};
    });
    // Probes run on the engine's thread; their results are judged on the
    // control thread, which owns the state machines and the reconciler.
    engine_ = &components_.add<HealthEngineComponent>(
        health::ProbeEngine::Options{}, [this](const health::ProbeResult& result) {
            loop_->post([this, result](control::Reconciler& r) { on_probe_result(result, r); });
        });
    api::ApiServer::Options api_options;
    api_options.socket_path = s.api_socket;
    api_options.group = s.api_group;
    components_.add<ApiServerComponent>(
        "API server", [this] { return services(); }, api_options);
    components_.add<MetricsServerComponent>(
        "metrics server", [this] { return services(); }, s.metrics_listen);
    components_.add<StepComponent>("go live", [this] { return go_live(); });
    components_.add<StepComponent>(
        "next-hop watcher",
        [this]() -> Step {
            start_watching();
            return {};
        },
        [this] { stop_watching(); });
    if (fleet_)
        components_.add<StepComponent>(
            "fleet store",
            [this]() -> Step {
                start_fleet();
                return {};
            },
            [this] { fleet_->stop(); });
    if (s.bgp.enabled)
        announce_ = &components_.add<AnnouncerComponent>(s.bgp, [this] {
            loop_->post([this](control::Reconciler& r) { submit_announcements(r); });
        });
    sweeper_ = &components_.add<ConntrackSweeperComponent>([this] { return sweeper_setup(); });
    components_.add<SystemdComponent>(fmt::format("xlbd {} serving: API on {}, metrics on {}",
                                                  kVersion, s.api_socket, s.metrics_listen),
                                      "forwarding on " + s.interface,
                                      [this] { return api::check_live(*loop_).ok; });
}

Agent::Step Agent::read_config() {
    auto loaded = config::load_config_file(options_.config_path);
    if (!loaded) {
        for (const auto& e : loaded.error()) spdlog::error("{}", e.to_string());
        return xlb::fail(options_.config_path + " has " + std::to_string(loaded.error().size()) +
                         " error(s)");
    }
    if (auto seed = config::missing_hash_seed(*loaded, options_.config_path)) {
        spdlog::error("{}", seed->to_string());
        return xlb::fail(options_.config_path + " has 1 error(s)");
    }
    config_ = std::move(*loaded);
    apply_overrides(options_, config_.settings);
    if (config_.settings.fleet.enabled) return open_fleet();
    return {};
}

// The store's client and this host's name; nothing is read yet.
Result<void> Agent::open_fleet() {
    const config::FleetSettings& f = config_.settings.fleet;
    // Looked up here and kept out of the settings: a reload compares those
    // with the file, where it is not written.
    std::string host = f.host_name;
    if (host.empty()) {
        char name[256] = {};
        if (::gethostname(name, sizeof(name) - 1) != 0)
            return xlb::fail(errno, "fleet: this host's name",
                             "set fleet.host_name in " + options_.config_path);
        host = name;
    }
    auto client = etcd::Client::open(etcd::fleet_client_options(f));
    if (!client) return std::unexpected(std::move(client.error()).add_context("fleet"));
    fleet_layout_ = fleet::Layout{config::fleet_prefix(f)};
    FleetLink::Options link;
    link.layout = *fleet_layout_;
    link.host = host;
    link.lease_ttl = std::chrono::duration_cast<std::chrono::seconds>(f.lease_ttl);
    fleet_ = std::make_unique<FleetLink>(std::move(*client), std::move(link));
    fleet_file_.emplace(config_.settings.state_file + ".fleet");
    fleet_info_.name = f.name;
    fleet_info_.host = host;
    const auto wall_offset = std::chrono::duration_cast<std::chrono::milliseconds>(
        std::chrono::system_clock::now().time_since_epoch() -
        health::Clock::now().time_since_epoch());
    fleet_health_.emplace(host, wall_offset);
    spdlog::info("fleet {}: this host is {}, its keys under {} on {}", f.name, host,
                 fleet_layout_->prefix, api::names_or_none(f.endpoints));
    return {};
}

// Everything that can fail without touching the kernel, reported together.
Agent::Step Agent::check_host_first() {
    const std::vector<std::string> problems = check_start(config_.settings);
    if (problems.empty()) return {};
    for (const auto& p : problems) spdlog::error("{}", p);
    return xlb::fail(std::to_string(problems.size()) +
                     " problem(s) with the host; nothing was changed");
}

Agent::Step Agent::lock_interface() {
    auto iface = identify_interface(config_.settings.interface);
    if (!iface) return std::unexpected(std::move(iface.error()));
    auto lock = InstanceLock::acquire(*iface);
    if (!lock) return std::unexpected(std::move(lock.error()));
    lock_.emplace(std::move(*lock));
    return {};
}

// Loads the program and reuses or creates the pinned maps (writing nothing
// into reused ones), reads the state file and prepares the reconciler.
Agent::Step Agent::open_data_plane() {
    const config::Settings& s = config_.settings;
    auto mac = next_hop_mac(s);
    if (!mac) return std::unexpected(std::move(mac.error()).add_context("next hop"));
    mac_ = *mac;

    state_.emplace(s.state_file, config_.vips);
    auto state = state_->load();
    if (!state) {
        state.error().hint = "move it aside to start from " + options_.config_path + " alone";
        return std::unexpected(std::move(state.error()));
    }
    had_state_file_ = state->has_value();
    // Desired state: the file merged VIP by VIP with the runtime changes the
    // state file records; a conflict stops the start before anything is
    // written.
    // A fleet's host runs the store's VIPs: runtime changes from before it
    // joined (kept in the state file) give way to them.
    api::StartupDecision decision = api::decide_startup_vips(
        config_.vips, *state, fleet_ ? config::Prefer::kFile : options_.prefer);
    for (const auto& c : decision.conflicts) spdlog::error("{}", c);
    if (!decision.conflicts.empty())
        return std::unexpected(api::startup_refusal(decision, s.state_file));
    for (const auto& w : decision.warnings) spdlog::warn("{}", w);
    backup_state_ = decision.backup_state;

    pin_dir_ = s.pin_dir + "/" + s.interface;
    // The directories the load may create: a first start that is undone
    // removes them again (deepest first).
    created_pin_dirs_.clear();
    for (std::string dir = pin_dir_; !dir.empty() && dir != "/" && !fs::exists(dir);
         dir = files::parent_dir(dir))
        created_pin_dirs_.push_back(dir);
    bpf::LoadOptions load_options;
    load_options.pin_dir = pin_dir_;
    load_options.conntrack_resize = s.conntrack.resize == config::ConntrackResize::kReplace
                                        ? bpf::ConntrackResize::kReplace
                                        : bpf::ConntrackResize::kRefuse;
    auto lb = bpf::LbProgram::load({s.maps.max_vips, s.maps.max_backends, s.maps.conntrack_entries},
                                   load_options);
    if (!lb) return std::unexpected(std::move(lb.error()));
    lb_.emplace(std::move(*lb));
    first_start_ = lb_->pins().names(bpf::PinAction::kReused).empty();
    spdlog::info("maps in {}: {}", pin_dir_, lb_->pins().summary());
    const auto& ct_load = lb_->conntrack_load();
    if (ct_load.warn())
        spdlog::warn("{}", ct_load.message);
    else
        spdlog::info("{}", ct_load.message);
    auto ct_table = conntrack::BpfTable::open(lb_->conntrack(), lb_->backends(),
                                              [lb = &*lb_] { lb->note_conntrack_erased(); });
    if (!ct_table) return std::unexpected(std::move(ct_table.error()));
    ct_table_ = std::make_shared<const conntrack::BpfTable>(std::move(*ct_table));
    ct_status_->update([&](conntrack::Status& st) {
        st.capacity = ct_load.capacity;
        st.requested_capacity = ct_load.requested;  // rounded up to whole sets
    });

    data_plane_.emplace(*lb_);
    reconciler_.emplace(*data_plane_,
                        control::Reconciler::Options{s.maps.max_vips, s.maps.max_backends,
                                                     second_chance_window(s), s.encap});
    // Generations already in the (pinned) backends map: a reused id must
    // never repeat one a recorded flow may hold.
    for (std::uint32_t id = 0; id < s.maps.max_backends; ++id)
        if (auto be = lb_->backends().get(id); be && be->generation != 0)
            reconciler_->registry().seed_generation(id, be->generation);
    if (*state)
        for (const auto& skipped : api::restore_ids_and_epochs(*reconciler_, **state))
            spdlog::warn("state file: could not restore {}", skipped);
    // Epochs are reserved in the state file before a table can take them.
    reconciler_->set_epoch_journal([this](control::Reconciler& r) {
        auto saved = state_->save_current(r);
        if (!saved)
            spdlog::error("epochs not recorded (published all the same): {}",
                          saved.error().message());
        return saved;
    });
    give_quic_keys(*reconciler_, decision.vips);
    reconciler_->set_vips(decision.vips);
    return {};
}

// The loop is created here but runs only once the data plane is live (go
// live); API requests meanwhile wait for it (readiness says why).
Agent::Step Agent::prepare_loop() {
    loop_.emplace(*reconciler_, control::ControlLoop::Options{});
    loop_->on_publish([this](const control::PublishRecord& r) {
        publish_metrics_.record(r);
        if (fleet_health_) {
            prepared_.erase(r.vip_key);
            published_[r.vip_key] = {api::hex64(r.checksum),
                                     fleet_health_->wall_ms(health::Clock::now())};
        }
        if (fleet_) {
            fleet_->poke_publish();
            fleet_->poke_record();  // a new epoch and checksum to report
        }
        // A table made live may change what this host can serve.
        if (announce_) loop_->post([this](control::Reconciler& rc) { submit_announcements(rc); });
        spdlog::info(
            "VIP {} published: epoch {}, checksum {:016x}, live {:.2f} ms after the decision",
            r.vip_key, r.epoch, r.checksum, r.decision_to_live_ms);
    });
    // Both run on the control thread, which owns the reconciler.
    loop_->on_error([this](const Error&) { log_apply_failures(*reconciler_); });
    loop_->on_pass([this](control::Reconciler& r) {
        log_panic_changes(r);
        log_apply_failures(r);
        submit_announcements(r);
    });
    if (fleet_health_)
        loop_->set_publish_gate(control::ControlLoop::PublishGate{
            [this](const std::vector<control::BuildResult>& b) { return prepare_publish(b); },
            [this](const std::vector<control::BuildResult>& b) { return publish_ready(b); }});
    return {};
}

void Agent::load_host_state() {
    const config::Settings& s = config_.settings;
    drain_file_.emplace(s.state_file + ".drain");
    if (auto host = drain_file_->load()) {
        host_ = *host;
        if (host_.drained)
            spdlog::warn("host drained (since a drain recorded in {}): announcing nothing",
                         drain_file_->path());
    } else {
        host_ = api::HostState{.drained = true, .since = std::chrono::system_clock::now()};
        spdlog::error("{}; staying drained", host.error().message());
    }
    if (s.bgp.enabled)
        startup_gate_.emplace(std::chrono::steady_clock::now(), std::chrono::seconds(10));
}

api::Services Agent::services() {
    if (services_) return *services_;
    const config::Settings& s = config_.settings;
    view_.emplace(*lb_);
    api_settings_ = std::make_shared<api::SharedSettings>(s);
    api::Services services{
        *loop_,
        *state_,
        *view_,
        publish_metrics_,
        api_settings_,
        api::AgentInfo{kVersion, s.interface, attached_mode_, std::chrono::steady_clock::now()},
        [this]() -> std::optional<std::string> {
            if (!attached_) return std::string("XDP program not attached");
            if (fleet_) {
                const api::FleetInfo f = fleet_info();
                if (f.applied_revision == 0)
                    return "waiting for fleet " + f.name + "'s desired state (" +
                           (f.store_reachable ? std::string("none applied yet")
                                              : "the store is unreachable: " + f.store_error) +
                           ")";
            }
            return std::nullopt;
        }};
    services.health = [this](
                          const std::string& vip,
                          const net::IpAddress& backend) -> std::optional<api::BackendHealthInfo> {
        auto snapshot = health_.snapshot(vip, backend, health::Clock::now());
        if (!snapshot) return std::nullopt;
        return api::BackendHealthInfo{std::move(*snapshot), health_.last_failure(vip, backend),
                                      health_.probe_shared_with(vip, backend)};
    };
    services.health_history = [this](const std::string& vip, const net::IpAddress& backend) {
        return health_.history(vip, backend);
    };
    services.on_vips_changed = [this](control::Reconciler& r) {
        give_quic_keys(r, r.vips());
        refresh_health(r);
    };
    services.probe_engine = [engine = engine_] { return engine->info(); };
    services.reload = [this](bool allow_disruptive) { return reload("api", allow_disruptive); };
    services.reload_dry_run = [this](const std::string& yaml, const std::string& file,
                                     bool allow_disruptive) {
        return reload_dry_run(yaml, file, allow_disruptive);
    };
    services.reloads = reloads_;
    services.host.state = [this] { return host_state(); };
    services.host.set_drained = [this](bool drained) { return set_drained(drained); };
    services.host.bgp = [this]() -> std::optional<api::BgpInfo> {
        if (!announce_) return std::nullopt;
        return api::BgpInfo{announce_->bgp(), announce_->link().status()};
    };
    services.conntrack = ct_table_;
    services.conntrack_status = ct_status_;
    services.syn_flood = syn_flood_;
    if (ct_table_)
        services.connections =
            std::make_shared<conntrack::ConnectionsCache>(ct_table_, std::chrono::seconds(1));
    if (fleet_) {
        services.fleet.refusal =
            "this host takes its VIPs, backends and drain from fleet " +
            config_.settings.fleet.name + " (" +
            api::names_or_none(config_.settings.fleet.endpoints) +
            "): change them there, with xlbctl --fleet, so that every host of the fleet applies "
            "the same change";
        services.fleet.status = [this] { return fleet_info(); };
    }
    services_.emplace(std::move(services));
    return *services_;
}

// The only component that changes the data plane. A restart attaches the new
// program first: it finds the previous agent's tables in the reused maps, and
// if the attach fails nothing has been written. A first start publishes the
// tables first, so that the program finds them from its first packet.
Agent::Step Agent::go_live() {
    const config::Settings& s = config_.settings;
    auto attach = [&]() -> Step {
        auto iface = bpf::Interface::by_name(s.interface);
        if (!iface) return std::unexpected(std::move(iface.error()));
        auto config_map = lb_->config_map_id();
        if (!config_map) return std::unexpected(std::move(config_map.error()));
        // An xlb_lb is replaced only when it is this agent's (uses the maps
        // pinned in pin_dir_): never another agent's, whatever its lock.
        auto xdp =
            bpf::XdpAttachment::attach(*lb_, *iface, {to_bpf_mode(s.xdp_mode), false, *config_map});
        if (!xdp) return std::unexpected(std::move(xdp.error()));
        xdp_.emplace(std::move(*xdp));
        attached_mode_.set(bpf::to_string(xdp_->mode()));
        spdlog::info("{}", xdp_->summary());
        if (xdp_->report().native_error)
            spdlog::warn("native XDP unavailable on {}: {}; running in generic mode", s.interface,
                         xdp_->report().native_error->message());
        return {};
    };
    if (!first_start_) {
        // The pinned configs send encrypted CIDs to the new program's key
        // map, empty until filled: the keys go in before it takes traffic.
        // A failure leaves those packets to the ring (no_key) until the
        // first publish installs them, or refuses the VIP saying why.
        if (auto keys = reconciler_->install_quic_keys(); !keys)
            spdlog::error("QUIC keys before the attach: {}", keys.error().message());
        if (auto ok = attach(); !ok) return ok;
    }

    if (auto ok = write_datapath_config(mac_); !ok)
        return std::unexpected(std::move(ok.error()).add_context("write data-plane configuration"));
    if (auto first = reconciler_->reconcile(control::Clock::now()); !first)
        spdlog::error("first publish: {}", first.error().message());
    for (const auto& v : reconciler_->status())
        log::emit(log::Priority::kInfo,
                  fmt::format("VIP {} published: epoch {}, checksum {:016x}, {} backends{}",
                              v.spec.key(), v.epoch, v.checksum, v.backends.size(),
                              v.last_error.empty() ? "" : " (" + v.last_error + ")"),
                  {{log::kEvent, log::kEventPublish}, {log::kVip, v.spec.key()}});

    if (first_start_)
        if (auto ok = attach(); !ok) return ok;
    attached_ = true;

    if (backup_state_) {
        auto moved = state_->backup();
        if (!moved)
            spdlog::warn("{}", moved.error().message());
        else if (!moved->empty())
            spdlog::warn("previous state file kept as {}", *moved);
    }
    if (auto saved = state_->save_current(*reconciler_); !saved)
        spdlog::warn("{}", saved.error().message());

    loop_->start();
    loop_->post([this](control::Reconciler& r) {
        log_panic_changes(r);
        health_.set_history_capacity(config_.settings.health_history);
        refresh_health(r);
        submit_announcements(r);
    });
    return {};
}

ConntrackSweeperComponent::Setup Agent::sweeper_setup() {
    auto ct_cpu = lb_->ct_cpu();
    return {ConntrackSweeper::Inputs{
                *ct_table_,
                [ct_cpu]() -> Result<std::vector<xlb_ct_cpu>> { return ct_cpu.get_per_cpu(0); },
                [this]() -> Result<std::vector<conntrack::VipInfo>> {
                    auto future =
                        loop_->call<std::vector<conntrack::VipInfo>>([](control::Reconciler& r) {
                            std::vector<conntrack::VipInfo> out;
                            for (const auto& v : r.vips()) out.push_back(conntrack::vip_info(v));
                            return out;
                        });
                    if (future.wait_for(std::chrono::seconds(15)) != std::future_status::ready)
                        return xlb::fail("the control thread did not answer within 15 s");
                    try {
                        return future.get();
                    } catch (const std::future_error&) {
                        return xlb::fail("the agent is stopping");
                    }
                },
                ct_status_, ct_clock_->started(),
                [this,
                 stats = lb_->backend_stats()]() -> Result<std::map<std::uint32_t, std::uint64_t>> {
                    auto backends = ct_table_->backends();
                    if (!backends) return std::unexpected(backends.error());
                    std::map<std::uint32_t, std::uint64_t> out;
                    for (const auto& [id, info] : *backends) {
                        auto per_cpu = stats.get_per_cpu(id);
                        if (!per_cpu) return std::unexpected(per_cpu.error());
                        out[id] = datapath::sum_per_cpu(*per_cpu).new_flows;
                    }
                    return out;
                }},
            config_.settings.conntrack.sweep_interval};
}

// The VIPs with a cookie flag are those the program has now (the flags the
// publisher wrote), looked up again every second, and every sample while
// none has one (so that a start's first publish is seen at once, not up to
// a second later while a flood goes on): their counters every sample, a few
// syscalls.
SynFloodComponent::Setup Agent::syn_flood_setup() {
    struct Flagged {
        std::vector<std::uint32_t> ids;
        std::optional<std::chrono::steady_clock::time_point> read_at;
    };
    auto read = [vips = lb_->vips(), cookies = lb_->vip_cookies(),
                 flagged = std::make_shared<Flagged>()]() -> Result<conntrack::SynCounts> {
        const auto now = std::chrono::steady_clock::now();
        if (!flagged->read_at || flagged->ids.empty() ||
            now - *flagged->read_at >= std::chrono::seconds(1)) {
            auto keys = vips.keys();
            if (!keys) return std::unexpected(keys.error());
            std::vector<std::uint32_t> ids;
            for (const xlb_vip_key& key : *keys) {
                auto value = vips.get(key);
                if (!value) return std::unexpected(value.error());
                if (*value &&
                    ((*value)->flags & (XLB_VIP_F_COOKIES_AUTO | XLB_VIP_F_COOKIES_ALWAYS)) != 0)
                    ids.push_back((*value)->vip_id);
            }
            flagged->ids = std::move(ids);
            flagged->read_at = now;
        }
        conntrack::SynCounts out;
        for (std::uint32_t id : flagged->ids) {
            auto per_cpu = cookies.get_per_cpu(id);
            if (!per_cpu) return std::unexpected(per_cpu.error());
            std::vector<std::uint64_t>& syns = out[id];
            for (const xlb_vip_cookie_stats& cpu : *per_cpu) syns.push_back(cpu.syns);
        }
        return out;
    };
    return {SynFloodWatch::Inputs{std::move(read),
                                  [this](std::uint32_t state) { lb_->set_syn_flood(state); },
                                  syn_flood_},
            config_.settings.syn_flood};
}

// A reload through the API may replace the watcher at any time, until the
// watcher's component has stopped.
void Agent::start_watching() {
    std::lock_guard lock(reload_mu_);
    watching_ = true;
    watch_next_hop();
}

void Agent::stop_watching() {
    std::lock_guard lock(reload_mu_);
    watching_ = false;
    watcher_.reset();
}

// The data plane's last step. After a start that failed, undo_data_plane();
// otherwise the loop has stopped: nothing publishes any more, so the epochs
// are released and recorded (the next start can then prove its tables'
// epochs) and the program stays attached, or is detached with
// --detach-on-exit.
void Agent::close_data_plane() {
    if (!running_) {
        undo_data_plane();
        return;
    }
    reconciler_->release_epoch_reservations();
    if (auto saved = state_->save_current(*reconciler_); !saved)
        spdlog::warn("{}", saved.error().message());
    probe_tc_.reset();  // probes are over; the XDP program stays
    probe_encap_.reset();
    if (xdp_) {
        if (options_.detach_on_exit) {
            if (auto ok = xdp_->detach(); !ok) spdlog::error("detach: {}", ok.error().message());
            xdp_.reset();
            lb_.reset();
            if (auto ok = bpf::LbProgram::unpin(pin_dir_); !ok)
                spdlog::error("unpin {}: {}", pin_dir_, ok.error().message());
            spdlog::info("detached from {} and removed the pinned maps",
                         config_.settings.interface);
        } else {
            xdp_->keep();
            spdlog::info("exiting; the data plane keeps forwarding on {} (pinned in {})",
                         config_.settings.interface, pin_dir_);
        }
    }
}

// A start that failed, once every later component has stopped: a first start
// removes the pins, the program and the state file it made. A restart leaves
// the previous agent's data plane as it found it (nothing was written before
// go live, whose restart path writes only after its attach succeeded).
void Agent::undo_data_plane() {
    if (!lb_) return;
    if (first_start_) {
        const bool detached = xdp_.has_value();
        if (xdp_) {
            if (auto ok = xdp_->detach(); !ok) spdlog::error("detach: {}", ok.error().message());
            xdp_.reset();
        }
        services_.reset();
        view_.reset();
        loop_.reset();
        reconciler_.reset();
        data_plane_.reset();
        lb_.reset();
        if (auto ok = bpf::LbProgram::unpin(pin_dir_); !ok)
            spdlog::error("unpin {}: {}", pin_dir_, ok.error().message());
        for (const std::string& dir : created_pin_dirs_)
            if (::rmdir(dir.c_str()) != 0 && errno != ENOENT) {
                spdlog::error("remove pin directory {}: {}", dir, std::strerror(errno));
                break;
            }
        if (!had_state_file_ && state_) ::unlink(state_->path().c_str());
        spdlog::info("first start undone: pins in {} removed{}", pin_dir_,
                     detached ? ", XDP program detached" : "");
    } else if (xdp_) {
        xdp_->keep();
    }
}

api::ReloadReport Agent::reload(const std::string& source, bool allow_disruptive) {
    std::lock_guard lock(reload_mu_);
    notify("RELOADING=1");
    spdlog::info("{}: reloading {}", source, options_.config_path);
    api::ReloadReport report;
    report.source = source;
    report = reload_locked(std::move(report), allow_disruptive);
    for (const auto& w : report.warnings) spdlog::warn("reload: {}", w);
    for (const auto& key : report.restart_required)
        spdlog::warn("reload: '{}' changed; it takes effect at the next restart", key);
    using Outcome = api::ReloadReport::Outcome;
    if (report.outcome == Outcome::kApplied) {
        for (const auto& d : report.disruptive)
            spdlog::warn("reload: disruptive change applied: {}", d);
        // At debug: the reload's audit entry says the same at notice.
        spdlog::debug(
            "reload applied: added {}; removed {}; changed {}; {} VIP(s) untouched; settings "
            "changed: {}",
            api::names_or_none(report.added), api::names_or_none(report.removed),
            api::names_or_none(report.changed), report.untouched,
            api::names_or_none(report.settings_changed));
    } else {
        for (const auto& e : report.errors) spdlog::error("{}", e);
        for (const auto& d : report.disruptive) spdlog::error("reload: disruptive change: {}", d);
        spdlog::error("reload rejected: {}; the running configuration stays", report.error);
    }
    reloads_->record(report);
    notify("READY=1");
    return report;
}

api::ReloadReport Agent::reload_locked(api::ReloadReport report, bool allow_disruptive) {
    return reload_parsed(std::move(report), config::load_config_file(options_.config_path),
                         options_.config_path, allow_disruptive, /*dry_run=*/false);
}

api::ReloadReport Agent::reload_dry_run(const std::string& yaml, const std::string& file,
                                        bool allow_disruptive) {
    std::lock_guard lock(reload_mu_);
    api::ReloadReport report;
    report.source = "api";
    report.dry_run = true;
    report = reload_parsed(std::move(report), config::parse_config(yaml, file), file,
                           allow_disruptive, /*dry_run=*/true);
    spdlog::debug("api: dry run of a reload of {}: {}", file, api::to_string(report.outcome));
    return report;
}

api::ReloadReport Agent::reload_parsed(
    api::ReloadReport report,
    std::expected<config::Config, std::vector<config::ConfigError>> loaded, const std::string& file,
    bool allow_disruptive, bool dry_run) {
    using Outcome = api::ReloadReport::Outcome;
    if (!loaded) {
        for (const auto& e : loaded.error()) report.errors.push_back(e.to_string());
        report.outcome = Outcome::kInvalid;
        report.error = file + " has " + std::to_string(loaded.error().size()) + " error(s)";
        return report;
    }
    if (auto seed = config::missing_hash_seed(*loaded, file)) {
        report.errors.push_back(seed->to_string());
        report.outcome = Outcome::kInvalid;
        report.error = file + " has 1 error(s)";
        return report;
    }
    config::Config next = std::move(*loaded);
    apply_overrides(options_, next.settings);
    if (fleet_) {
        // The file holds the host's own settings only; the rest stays the fleet's.
        next.vips = config_.vips;
        config::copy_fleet_wide(next.settings, config_.settings);
    }
    return apply_locked(std::move(report), std::move(next), allow_disruptive, dry_run);
}

// What a reload and a fleet revision share: `next` (settings and VIPs)
// replaces the running configuration, the way docs/api.md describes for a
// reload. reload_mu_ held.
api::ReloadReport Agent::apply_locked(api::ReloadReport report, config::Config next,
                                      bool allow_disruptive, bool dry_run) {
    using Outcome = api::ReloadReport::Outcome;
    report.restart_required = restart_only_changes(config_.settings, next.settings);
    const config::Settings applied = reloadable_settings(config_.settings, next.settings);
    report.settings_changed = reloadable_changes(config_.settings, applied);
    const bool hop_changed = applied.next_hop != config_.settings.next_hop;
    net::MacAddress mac = mac_;
    if (hop_changed) {
        auto resolved = next_hop_mac(applied);
        if (!resolved) {
            report.outcome = Outcome::kFailed;
            report.error = "next hop: " + resolved.error().message();
            return report;
        }
        mac = *resolved;
    }

    const std::vector<config::VipSpec> old_file = config_.vips;
    const std::vector<config::VipSpec> new_file = next.vips;
    // One task on the control thread: the decision and the change see the
    // same running VIPs (the API may change them in between otherwise).
    report = loop_
                 ->call<api::ReloadReport>([&](control::Reconciler& r) {
                     api::ReloadReport out = report;
                     ReloadResult merged = merge_reload(old_file, new_file, r.vips());
                     out.disruptive =
                         disruptive_changes(config_.settings, applied, r.vips(), merged.vips);
                     if (dry_run)
                         return dry_run_report(std::move(out), merged, r.vips(), allow_disruptive);
                     if (!out.disruptive.empty() && !allow_disruptive) {
                         out.outcome = Outcome::kDisruptiveRefused;
                         out.error = disruptive_refusal(out.disruptive.size());
                         return out;
                     }
                     out.added = std::move(merged.added);
                     out.removed = std::move(merged.removed);
                     out.changed = std::move(merged.changed);
                     out.untouched = merged.untouched;
                     out.warnings = std::move(merged.warnings);
                     if (!out.settings_changed.empty()) {
                         config_.settings = applied;
                         if (auto ok = write_datapath_config(mac); !ok)
                             out.warnings.push_back(ok.error().message());
                         r.set_second_chance(second_chance_window(applied));
                         r.set_encap(applied.encap);
                         health_.set_history_capacity(applied.health_history);
                         // lookups hash with the seed the data path now uses
                         if (api_settings_) api_settings_->set(applied);
                     }
                     give_quic_keys(r, merged.vips);
                     r.set_vips(merged.vips);
                     refresh_health(r);
                     state_->set_config_vips(new_file);
                     if (auto saved = state_->save_current(r); !saved)
                         out.warnings.push_back(saved.error().message());
                     return out;
                 })
                 .get();
    if (dry_run || report.outcome != Outcome::kApplied) return report;
    config_.vips = new_file;
    sweeper_->set_interval(config_.settings.conntrack.sweep_interval);
    syn_flood_watch_->set_settings(config_.settings.syn_flood);
    // not once the watcher's component has stopped: nothing would stop it again
    if (hop_changed && watching_) watch_next_hop();
    return report;
}

api::FleetInfo Agent::fleet_info() const {
    std::lock_guard lock(fleet_mu_);
    return fleet_info_;
}

// Before the data plane: what the host runs from its first instant. The
// store's desired state if it answers; otherwise what this host applied
// last (persisted); otherwise nothing, and readiness says it waits.
Agent::Step Agent::read_fleet_first() {
    const fleet::Layout& layout = *fleet_layout_;
    auto usable = [&](const FleetSnapshot& snap, const char* source) -> bool {
        auto desired = fleet::read_desired(layout, snap.keys);
        std::optional<config::Config> next;
        if (desired) {
            auto made = fleet::host_config(layout, *desired, config_.settings);
            if (!made) {
                refuse_fleet("invalid", desired->config_revision, made.error());
                return false;
            }
            next = std::move(*made);
        } else {
            refuse_fleet("invalid", snap.revision, desired.error());
            return false;
        }
        config_ = std::move(*next);
        fleet_start_ = snap;
        if (std::string_view(source) == "store")
            if (auto saved = fleet_file_->save(snap); !saved)
                spdlog::warn("fleet: the desired state is not persisted: {}",
                             saved.error().message());
        std::lock_guard lock(fleet_mu_);
        fleet_info_.applied_revision = desired->config_revision;
        applied_at_ = api::utc_text_ms(std::chrono::system_clock::now());
        fleet_info_.seen_revision = snap.revision;
        fleet_info_.source = source;
        spdlog::info("fleet: starting from the {} desired state of revision {}: {} VIP(s)", source,
                     desired->config_revision, config_.vips.size());
        return true;
    };
    auto read = fleet_->read();
    if (read && read->keys.empty()) {
        on_store_reachability(true, {});
        spdlog::warn(
            "fleet: the store has no desired state for fleet {} yet ({}desired/ is empty; "
            "`xlbctl fleet import` writes one): the host starts with no VIP and /readyz "
            "answers 503 until it is there",
            config_.settings.fleet.name, layout.prefix);
        return {};
    }
    if (read) {
        on_store_reachability(true, {});
        if (usable(*read, "store")) return {};
    } else {
        on_store_reachability(false, read.error().message());
    }
    auto persisted = fleet_file_->load();
    if (!persisted) {
        spdlog::error("fleet: {}", persisted.error().message());
    } else if (*persisted && usable(**persisted, "persisted")) {
        if (!read)
            spdlog::warn(
                "fleet: serving the desired state this host applied last (revision {}, {}) "
                "until the store answers",
                fleet_info().applied_revision, fleet_file_->path());
        return {};
    }
    spdlog::warn(
        "fleet: no desired state to run yet ({}): the host starts with no VIP and /readyz "
        "answers 503 until the store gives one",
        read ? "the store's is refused" : "the store is unreachable and nothing was persisted");
    return {};
}

void Agent::start_fleet() {
    // The drain the store holds for this host, from the start: the watch
    // sees only what changes after the revision read.
    if (fleet_start_)
        if (auto desired = fleet::read_desired(*fleet_layout_, fleet_start_->keys))
            apply_fleet_drain(*desired);
    fleet_->start_watch(
        fleet_start_, [this](const FleetSnapshot& snap) { apply_fleet(snap); },
        [this](bool reachable, const std::string& error) {
            on_store_reachability(reachable, error);
        });
    fleet_->start_records([this] { return host_record(); }, [this] { return publish_state(); });
    fleet_->start_peers([this](const FleetSnapshot& records) { on_peers(records); },
                        [this](const FleetSnapshot& states) { on_publishes(states); });
}

// This host's publish state (publish/<host>): what it holds and runs.
std::string Agent::publish_state() {
    if (!loop_) return {};
    auto state = loop_->query<fleet::PublishState>([this](control::Reconciler&) {
        fleet::PublishState out;
        out.prepared = prepared_;
        for (const auto& [vip, live] : published_)
            out.live[vip] = fleet::PublishState::Live{
                live.first, api::utc_text_ms(std::chrono::system_clock::time_point(
                                std::chrono::milliseconds(live.second)))};
        return out;
    });
    if (state.wait_for(std::chrono::seconds(2)) != std::future_status::ready) return {};
    try {
        return fleet::encode(state.get());
    } catch (const std::future_error&) {
        return {};
    }
}

void Agent::on_publishes(const FleetSnapshot& states) {
    std::map<std::string, fleet::PublishState> by_host;
    const std::string prefix = fleet_layout_->publishes();
    for (const fleet::StoredKey& k : states.keys) {
        auto state = fleet::decode_publish(k.value);
        if (!state) {
            spdlog::warn("fleet: {}@{}: {}", k.key, k.mod_revision, state.error().message());
            continue;
        }
        by_host[k.key.substr(prefix.size())] = std::move(*state);
    }
    loop_->post([this, by_host = std::move(by_host)](control::Reconciler&) mutable {
        peer_publishes_ = std::move(by_host);
        measure_publish_spreads();
    });
}

// Every live host's record, as the store has it now: the fleet's health
// view, the publishes the gate waits for, and whether this host is behind.
void Agent::on_peers(const FleetSnapshot& records) {
    std::map<std::string, fleet::HostVotes> votes;
    const std::string prefix = fleet_layout_->hosts();
    std::map<std::string, std::pair<std::int64_t, fleet::HostVotes>> decoded;
    for (const fleet::StoredKey& k : records.keys) {
        const std::string host = k.key.substr(prefix.size());
        if (auto was = decoded_records_.find(host);
            was != decoded_records_.end() && was->second.first == k.mod_revision) {
            decoded.emplace(host, was->second);
            votes[host] = was->second.second;
            continue;
        }
        auto record = fleet::decode_host(k.value);
        if (!record) {
            // Logged once per revision: the next change of another record
            // hands this one over again.
            spdlog::warn("fleet: {}@{}: {} (that host counts as having no verdict)", k.key,
                         k.mod_revision, record.error().message());
            votes[host];
        } else {
            votes[host] = fleet::host_votes(*record);
        }
        decoded.emplace(host, std::pair{k.mod_revision, votes[host]});
    }
    decoded_records_ = std::move(decoded);
    loop_->post([this, votes = std::move(votes)](control::Reconciler& r) mutable {
        fleet_health_->set_peers(std::move(votes));
        refresh_fleet_health(r);
        measure_publish_spreads();
        submit_announcements(r);
    });
}

void Agent::call_at(health::TimePoint when, health::TimePoint& pending,
                    std::function<void(control::Reconciler&)> fn) {
    const auto now = health::Clock::now();
    if (pending > now && pending <= when) return;
    pending = when;
    engine_->engine().call_at(when, [this, fn = std::move(fn)] { loop_->post(fn); });
}

void Agent::refresh_fleet_health(control::Reconciler& r) {
    const auto now = health::Clock::now();
    if (fleet_step_at_ <= now) fleet_step_at_ = health::TimePoint::max();
    const std::optional<health::TimePoint> step = fleet_health_->apply(r.vips(), health_, now, r);
    if (step)
        call_at(*step, fleet_step_at_,
                [this](control::Reconciler& rc) { refresh_fleet_health(rc); });
    std::vector<api::FleetInfo::Disagreement> now_disagree;
    for (const HealthDisagreement& d : fleet_health_->disagreements())
        now_disagree.push_back(api::FleetInfo::Disagreement{
            d.vip, d.backend, control::to_string(d.local), control::to_string(d.fleet)});
    std::vector<std::string> news;
    bool changed = false;
    {
        std::lock_guard lock(fleet_mu_);
        api::FleetInfo& f = fleet_info_;
        for (const auto& d : now_disagree)
            if (std::none_of(f.disagreements.begin(), f.disagreements.end(), [&](const auto& o) {
                    return o.vip == d.vip && o.backend == d.backend && o.local == d.local;
                }))
                news.push_back("VIP " + d.vip + " backend " + d.backend + ": this host judges it " +
                               d.local + ", the fleet " + d.fleet +
                               "; its table follows the fleet's verdict");
        changed = f.disagreements.size() != now_disagree.size() || !news.empty();
        f.disagreements = std::move(now_disagree);
        const std::string view = fleet_health_->ready() ? "fleet" : "local";
        changed =
            changed || view != f.health_view || f.local_fallbacks != fleet_health_->falling_back();
        const std::string reason =
            view == "fleet" ? ""
            : f.store_reachable
                ? "this host's record is not in the store (yet): the fleet's last verdicts, this "
                  "host's own for backends that changed since"
                : "the store is unreachable: the fleet's last verdicts, this host's own for "
                  "backends that changed since";
        if (view != f.health_view || reason != f.health_view_reason) {
            if (view == "local")
                spdlog::warn("fleet: health: {}", reason);
            else
                spdlog::info("fleet: health follows the fleet's view again");
        }
        f.health_view = view;
        f.health_view_reason = reason;
        f.local_fallbacks = fleet_health_->falling_back();
    }
    for (const std::string& line : news) spdlog::warn("fleet: {}", line);
    if (changed && fleet_) fleet_->poke_record();
}

// Per VIP, once every live host runs the same table: the time between the
// first and the last host's publish of it.
void Agent::measure_publish_spreads() {
    std::vector<api::FleetInfo::Spread> spreads;
    for (const auto& [vip, mine] : published_) {
        std::int64_t first = mine.second, last = mine.second;
        std::size_t hosts = 0;
        bool all = true;
        for (const auto& [host, votes] : fleet_health_->peers()) {
            auto state = peer_publishes_.find(host);
            if (state == peer_publishes_.end()) {
                all = false;
                break;
            }
            auto live = state->second.live.find(vip);
            const std::optional<std::int64_t> at =
                live == state->second.live.end() ? std::nullopt
                                                 : fleet::parse_utc_ms(live->second.published_at);
            if (!at || live->second.checksum != mine.first) {
                all = false;
                break;
            }
            first = std::min(first, *at);
            last = std::max(last, *at);
            ++hosts;
        }
        if (!all || hosts < 2) continue;
        const double seconds = static_cast<double>(last - first) / 1000.0;
        spreads.push_back(api::FleetInfo::Spread{vip, mine.first, seconds, hosts});
        if (spread_counted_[vip] == mine.first) continue;
        spread_counted_[vip] = mine.first;
        publish_metrics_.record_spread(seconds);
    }
    std::lock_guard lock(fleet_mu_);
    for (api::FleetInfo::Spread& s : spreads) {
        auto it =
            std::find_if(fleet_info_.publish_spreads.begin(), fleet_info_.publish_spreads.end(),
                         [&](const auto& o) { return o.vip == s.vip; });
        if (it == fleet_info_.publish_spreads.end())
            fleet_info_.publish_spreads.push_back(std::move(s));
        else
            *it = std::move(s);
    }
    std::erase_if(fleet_info_.publish_spreads,
                  [&](const auto& s) { return !published_.contains(s.vip); });
}

// when_current: withdrawn while another live host has applied a newer
// desired revision for longer than fleet.max_lag; never for want of the
// store (an outage of the store must not take the fleet's routes down).
std::string Agent::behind_fleet(std::int64_t now_ms) {
    const config::FleetSettings& f = config_.settings.fleet;
    std::string behind;
    const api::FleetInfo info = fleet_info();
    if (f.announce == config::FleetAnnounce::kWhenCurrent && info.store_reachable) {
        std::int64_t newest = info.applied_revision, since = now_ms;
        std::string ahead;
        for (const auto& [host, votes] : fleet_health_->peers()) {
            if (host == info.host || votes.config_revision <= info.applied_revision) continue;
            if (votes.config_revision > newest) {
                newest = votes.config_revision;
                ahead = host;
            }
            since = std::min(since, votes.applied_at_ms > 0 ? votes.applied_at_ms : now_ms);
        }
        const std::int64_t lag_ms = f.max_lag.count();
        if (newest > info.applied_revision) {
            if (now_ms - since > lag_ms)
                behind = "this host runs desired revision " +
                         std::to_string(info.applied_revision) + " while " + ahead + " runs " +
                         std::to_string(newest) +
                         " for longer than fleet.max_lag: withdrawn until it catches up";
            else
                call_at(
                    health::Clock::now() + std::chrono::milliseconds(lag_ms - (now_ms - since) + 1),
                    behind_check_at_, [this](control::Reconciler& r) { submit_announcements(r); });
        }
    }
    bool changed = false;
    {
        std::lock_guard lock(fleet_mu_);
        changed = behind != fleet_info_.behind;
        fleet_info_.behind = behind;
    }
    if (changed) {
        if (!behind.empty())
            spdlog::warn("fleet: {}", behind);
        else
            spdlog::info("fleet: this host runs the fleet's newest desired revision: announcing");
        if (fleet_) fleet_->poke_record();
    }
    return behind;
}

// Two-phase publish: tables built are held until every other live host has
// built (or already runs) the same, at most fleet.max_publish_wait; a lone
// host, or one without the store, publishes at once.
control::Clock::duration Agent::prepare_publish(const std::vector<control::BuildResult>& built) {
    if (!fleet_health_->ready() || fleet_health_->other_hosts().empty()) return {};
    const control::Clock::duration wait = config_.settings.fleet.max_publish_wait;
    if (wait <= control::Clock::duration::zero()) return {};
    for (const control::BuildResult& b : built)
        if (!b.error) prepared_[b.vip_key] = api::hex64(b.checksum);
    fleet_->poke_publish();
    return wait;
}

bool Agent::publish_ready(const std::vector<control::BuildResult>& built) const {
    for (const std::string& host : fleet_health_->other_hosts()) {
        auto state = peer_publishes_.find(host);
        if (state == peer_publishes_.end()) return false;
        const fleet::PublishState& s = state->second;
        for (const control::BuildResult& b : built) {
            if (b.error) continue;
            const std::string checksum = api::hex64(b.checksum);
            auto prepared = s.prepared.find(b.vip_key);
            auto live = s.live.find(b.vip_key);
            if ((prepared == s.prepared.end() || prepared->second != checksum) &&
                (live == s.live.end() || live->second.checksum != checksum))
                return false;
        }
    }
    return true;
}

// Logged when it changes; while unreachable, the newest error is kept.
void Agent::on_store_reachability(bool reachable, const std::string& error) {
    {
        std::lock_guard lock(fleet_mu_);
        const bool same = fleet_info_.store_since && fleet_info_.store_reachable == reachable;
        fleet_info_.store_error = error;
        if (same) return;
        fleet_info_.store_reachable = reachable;
        fleet_info_.store_since = std::chrono::system_clock::now();
    }
    if (reachable)
        spdlog::info("fleet: the store answers");
    else
        spdlog::warn(
            "fleet: the store is unreachable ({}); tables, routes and health checks go "
            "on with what was applied last",
            error);
    if (fleet_) fleet_->poke_record();
    if (loop_)
        loop_->post([this, reachable](control::Reconciler& r) {
            fleet_health_->set_store_reachable(reachable);
            refresh_fleet_health(r);
            submit_announcements(r);
        });
}

// The same revision is refused once in the log; status and the host record
// keep saying it until a newer one applies.
void Agent::refuse_fleet(const char* reason, std::int64_t revision,
                         const std::vector<fleet::Problem>& problems) {
    std::vector<std::string> errors;
    for (const fleet::Problem& p : problems) errors.push_back(p.to_string());
    {
        std::lock_guard lock(fleet_mu_);
        if (fleet_info_.refused_revision == revision && fleet_info_.refused_errors == errors)
            return;
        fleet_info_.refused_revision = revision;
        fleet_info_.refused_reason = reason;
        fleet_info_.refused_errors = errors;
    }
    for (const std::string& e : errors) spdlog::error("fleet: {}", e);
    spdlog::error("fleet: desired revision {} refused ({}); running revision {} as before",
                  revision, reason, fleet_info().applied_revision);
    if (fleet_) fleet_->poke_record();
}

// A new revision of the desired keys: applied as a reload applies a file,
// or refused whole with the key and revision at fault (every host that
// reads the same revision refuses it the same way).
void Agent::apply_fleet(const FleetSnapshot& snap) {
    std::lock_guard lock(reload_mu_);
    const fleet::Layout& layout = *fleet_layout_;
    {
        std::lock_guard fl(fleet_mu_);
        fleet_info_.seen_revision = std::max(fleet_info_.seen_revision, snap.revision);
    }
    // Nothing desired (before the first import): nothing to refuse either.
    if (snap.keys.empty()) return;
    auto desired = fleet::read_desired(layout, snap.keys);
    if (!desired) return refuse_fleet("invalid", snap.revision, desired.error());
    auto next = fleet::host_config(layout, *desired, config_.settings);
    if (!next) return refuse_fleet("invalid", desired->config_revision, next.error());
    const std::vector<fleet::Problem> disruptive =
        fleet::unconfirmed_disruptive(layout, config_, *desired, *next);
    if (!disruptive.empty())
        return refuse_fleet("disruptive", desired->config_revision, disruptive);
    const std::int64_t revision = desired->config_revision;
    if (!(*next == config_)) {
        notify("RELOADING=1");
        api::ReloadReport report;
        report.source = "fleet revision " + std::to_string(revision);
        report = apply_locked(std::move(report), std::move(*next), /*allow_disruptive=*/true);
        reloads_->record(report);
        notify("READY=1");
        for (const auto& w : report.warnings) spdlog::warn("fleet: {}", w);
        if (report.outcome != api::ReloadReport::Outcome::kApplied)
            return refuse_fleet("failed", revision,
                                {fleet::Problem{layout.desired(), revision, report.error}});
        spdlog::info(
            "fleet: revision {} applied: added {}; removed {}; changed {}; settings "
            "changed: {}",
            revision, api::names_or_none(report.added), api::names_or_none(report.removed),
            api::names_or_none(report.changed), api::names_or_none(report.settings_changed));
    }
    {
        std::lock_guard fl(fleet_mu_);
        if (fleet_info_.applied_revision != revision)
            applied_at_ = api::utc_text_ms(std::chrono::system_clock::now());
        fleet_info_.applied_revision = revision;
        fleet_info_.source = "store";
        fleet_info_.refused_revision = 0;
        fleet_info_.refused_reason.clear();
        fleet_info_.refused_errors.clear();
    }
    if (auto saved = fleet_file_->save(snap); !saved)
        spdlog::warn("fleet: the applied desired state is not persisted: {}",
                     saved.error().message());
    apply_fleet_drain(*desired);
    fleet_->poke_record();
    loop_->post([this](control::Reconciler& r) { submit_announcements(r); });
}

void Agent::apply_fleet_drain(const fleet::Desired& desired) {
    const std::string host = fleet_info().host;
    auto drain = desired.drains.find(host);
    const bool drained = drain != desired.drains.end() && drain->second.value.drained;
    if (drained == host_state().drained) return;
    if (auto changed = set_drained(drained); !changed)
        spdlog::error("fleet: {}: {}", fleet_layout_->drain(host), changed.error().message());
}

// This host's record (docs/fleet.md): rebuilt by the writer when poked
// (and every 10 s at least), put only when it changed; updated_at says
// when it last did.
std::string Agent::host_record() {
    if (!loop_) return {};
    std::optional<api::BgpInfo> bgp;
    if (announce_) bgp = api::BgpInfo{announce_->bgp(), announce_->link().status()};
    const std::uint32_t seed = api_settings_ ? api_settings_->get().hash_seed : 0;
    // A query, not a call: a call would wait for the publish the gate
    // holds until this very record shows the table prepared.
    auto vips = loop_->query<nlohmann::json>([this, seed, bgp](control::Reconciler& r) {
        const auto now = health::Clock::now();
        nlohmann::json out = nlohmann::json::array();
        for (const control::VipStatus& v : r.status()) {
            const std::string key = v.spec.key();
            nlohmann::json j = api::vip_status_json(v, seed, bgp, true);
            // This host's votes, which every host's view counts.
            for (nlohmann::json& b : j["backends"]) {
                auto address = net::IpAddress::parse(b["address"].get<std::string>());
                if (!address) continue;
                const fleet::Vote vote = fleet_health_->own_vote(health_, key, *address, now);
                // Fresh from the probes: the reconciler learns it only
                // when the view is next decided, from this record.
                if (v.spec.health_check.type != config::HealthCheckType::kNone)
                    b["local_health"] = control::to_string(vote.health);
                if (vote.healthy_since_ms) b["healthy_since_ms"] = *vote.healthy_since_ms;
                b["bias"] = vote.bias;
            }
            auto published = published_.find(key);
            j["published_at"] =
                published == published_.end() ||
                        published->second.first != j["checksum"].get<std::string>()
                    ? nlohmann::json(nullptr)
                    : nlohmann::json(api::utc_text_ms(std::chrono::system_clock::time_point(
                          std::chrono::milliseconds(published->second.second))));
            out.push_back(std::move(j));
        }
        return out;
    });
    if (vips.wait_for(std::chrono::seconds(2)) != std::future_status::ready) return {};
    fleet::HostRecord record;
    try {
        record.vips = vips.get();
    } catch (const std::future_error&) {
        return {};
    }
    const api::FleetInfo f = fleet_info();
    record.host = f.host;
    record.version = kVersion;
    record.config_revision = f.applied_revision;
    {
        std::lock_guard lock(fleet_mu_);
        record.applied_at = applied_at_;
    }
    record.seen_revision = f.seen_revision;
    record.drained = host_state().drained;
    record.store_reachable = f.store_reachable;
    record.store_since = f.store_since ? api::utc_text(*f.store_since) : std::string();
    record.store_error = f.store_error;
    if (f.refused_revision != 0)
        record.refused =
            fleet::HostRecord::Refusal{f.refused_revision, f.refused_reason, f.refused_errors};
    const std::string body = fleet::encode(record);
    if (body != record_body_) {
        record_body_ = body;
        record_at_ = api::utc_text(std::chrono::system_clock::now());
    }
    record.updated_at = record_at_;
    return fleet::encode(record);
}

int Agent::run() {
    sigset_t signals;
    sigemptyset(&signals);
    sigaddset(&signals, SIGHUP);
    sigaddset(&signals, SIGTERM);
    sigaddset(&signals, SIGINT);
    // every thread started from here on inherits the mask; only sigwait sees them
    pthread_sigmask(SIG_BLOCK, &signals, nullptr);
    signal(SIGPIPE, SIG_IGN);

    if (int rc = start(); rc != 0) return rc;
    while (true) {
        siginfo_t info{};
        const int sig = sigwaitinfo(&signals, &info);
        if (sig < 0) continue;
        if (sig == SIGHUP) {
            const api::ReloadReport report = reload("SIGHUP", false);
            // the kernel fills the sender in for kill(2); 0 and 0 for the
            // kernel itself (a hang-up of the terminal)
            api::Caller sender;
            if (info.si_code == SI_USER || info.si_code == SI_QUEUE) {
                sender.uid = info.si_uid;
                sender.pid = info.si_pid;
            }
            api::audit(api::reload_audit(report, "SIGHUP reload", sender, ""));
            continue;
        }
        spdlog::info("{}: stopping", sig == SIGTERM ? "SIGTERM" : "SIGINT");
        break;
    }
    components_.stop();
    return 0;
}

}  // namespace

int run_agent(const AgentOptions& options) {
    Agent agent(options);
    return agent.run();
}

}  // namespace xlb::agent
