// SPDX-License-Identifier: Apache-2.0
#include "xlb/agent/agent.h"

#include <signal.h>
#include <spdlog/spdlog.h>
#include <sys/statfs.h>
#include <systemd/sd-daemon.h>

#include <atomic>
#include <cstring>
#include <linux/magic.h>
#include <thread>

#include "xlb/agent/health_link.h"
#include "xlb/agent/reload.h"
#include "xlb/api/data_plane_view.h"
#include "xlb/api/metrics.h"
#include "xlb/api/server.h"
#include "xlb/api/services.h"
#include "xlb/api/state_store.h"
#include "xlb/bpf/probe.h"
#include "xlb/bpf/programs.h"
#include "xlb/bpf/xdp.h"
#include "xlb/config/config.h"
#include "xlb/control/data_plane.h"
#include "xlb/control/loop.h"
#include "xlb/control/reconciler.h"
#include "xlb/health/engine.h"
#include "xlb/netlink/neighbor.h"
#include "xlb/netlink/watcher.h"

namespace xlb::agent {

xlb_config make_datapath_config(const config::Settings& s, const net::MacAddress& next_hop) {
    xlb_config cfg{};
    cfg.magic = XLB_CONFIG_MAGIC;
    cfg.version = XLB_CONFIG_VERSION;
    cfg.hash_seed = s.hash_seed;
    if (s.icmp_too_big) cfg.flags |= XLB_CFG_F_ICMP_TOO_BIG;
    if (s.encap_source.ipv4) {
        __be32 words[4];
        s.encap_source.ipv4->to_words(words);
        cfg.src_v4 = words[0];
        cfg.src_v4_prefix_len = s.encap_source.ipv4_prefix_len;
    } else {
        cfg.src_v4_prefix_len = 32;
    }
    if (s.encap_source.ipv6) s.encap_source.ipv6->to_words(cfg.src_v6);
    cfg.src_v6_prefix_len = s.encap_source.ipv6 ? s.encap_source.ipv6_prefix_len : 128;
    std::memcpy(cfg.next_hop_mac, next_hop.data(), next_hop.size());
    cfg.mtu = s.mtu;
    return cfg;
}

void apply_overrides(const AgentOptions& o, config::Settings& s) {
    if (o.interface) s.interface = *o.interface;
    if (o.xdp_mode) s.xdp_mode = *o.xdp_mode;
    if (o.api_socket) s.api_socket = *o.api_socket;
    if (o.metrics_listen) s.metrics_listen = *o.metrics_listen;
    if (o.pin_dir) s.pin_dir = *o.pin_dir;
    if (o.state_file) s.state_file = *o.state_file;
}

std::vector<std::string> restart_only_changes(const config::Settings& a, const config::Settings& b) {
    std::vector<std::string> out;
    if (a.interface != b.interface) out.push_back("interface");
    if (a.xdp_mode != b.xdp_mode) out.push_back("xdp_mode");
    if (a.maps != b.maps) out.push_back("maps");
    if (a.api_socket != b.api_socket) out.push_back("api.socket");
    if (a.api_group != b.api_group) out.push_back("api.group");
    if (a.metrics_listen != b.metrics_listen) out.push_back("metrics.listen");
    if (a.state_file != b.state_file) out.push_back("state_file");
    if (a.pin_dir != b.pin_dir) out.push_back("pin_dir");
    return out;
}

namespace {

bpf::XdpMode to_bpf_mode(config::XdpMode mode) {
    switch (mode) {
        case config::XdpMode::kNative: return bpf::XdpMode::kNative;
        case config::XdpMode::kGeneric: return bpf::XdpMode::kGeneric;
        case config::XdpMode::kAuto: return bpf::XdpMode::kAuto;
    }
    return bpf::XdpMode::kAuto;
}

void notify(const std::string& text) { sd_notify(0, text.c_str()); }

std::string vip_list(const std::vector<std::string>& keys) {
    std::string out;
    for (const auto& k : keys) out += (out.empty() ? "" : ", ") + k;
    return out.empty() ? "none" : out;
}

// The next hop's MAC: fixed in the file, or resolved from the neighbour table.
std::expected<net::MacAddress, std::string> next_hop_mac(const config::Settings& s) {
    if (s.next_hop.mac) return *s.next_hop.mac;
    auto resolver = netlink::NeighborResolver::open(s.interface);
    if (!resolver) return std::unexpected(resolver.error().message());
    auto mac = resolver->resolve(*s.next_hop.address);
    if (!mac) return std::unexpected(mac.error().message());
    return *mac;
}

bool bpffs_mounted(const std::string& dir) {
    struct statfs st {};
    std::string probe = dir;
    while (!probe.empty() && statfs(probe.c_str(), &st) != 0) {
        auto slash = probe.rfind('/');
        probe = slash == 0 ? "/" : probe.substr(0, slash);
        if (probe == "/") break;
    }
    return statfs(probe.c_str(), &st) == 0 && st.f_type == BPF_FS_MAGIC;
}

class Agent {
public:
    explicit Agent(const AgentOptions& options) : options_(options) {}
    int run();

private:
    int start();
    void reload();
    void stop();
    void watch_next_hop();
    std::expected<void, std::string> write_datapath_config(const net::MacAddress& mac);
    // Health checking; every one of these runs on the control thread.
    void refresh_health(control::Reconciler& r);
    void on_probe_result(const health::ProbeResult& result, control::Reconciler& r);
    void on_health_timer(control::Reconciler& r);
    void schedule_health_timer(health::TimePoint now);
    void log_panic_changes(control::Reconciler& r);
    void log_apply_failures(control::Reconciler& r);
    void route_probes_through_vips(std::vector<health::ProbeTarget>& targets,
                                   control::Reconciler& r);
    std::expected<void, std::string> attach_probe_encap();

    AgentOptions options_;
    config::Config config_;
    net::MacAddress mac_{};
    std::string pin_dir_;
    std::optional<bpf::LbProgram> lb_;
    std::optional<control::BpfDataPlane> data_plane_;
    std::optional<control::Reconciler> reconciler_;
    std::optional<control::ControlLoop> loop_;
    // Control thread only: the health state machines and the wake-up asked
    // of the engine for their next change with time (max: none pending).
    HealthLink health_;
    health::TimePoint health_timer_at_ = health::TimePoint::max();
    std::optional<health::ProbeEngine> engine_;
    std::optional<api::StateStore> state_;
    std::optional<api::BpfDataPlaneView> view_;
    api::PublishMetrics publish_metrics_;
    std::optional<bpf::XdpAttachment> xdp_;
    // via_vip probes: the tc egress encapsulator, attached on first need
    // (control thread); detached on exit, it only carries probes.
    std::optional<bpf::ProbeEncapProgram> probe_encap_;
    std::optional<bpf::TcAttachment> probe_tc_;
    std::atomic<bool> attached_{false};
    // The API's view of config_.settings, replaced when a reload changes them.
    std::shared_ptr<api::SharedSettings> api_settings_;
    std::optional<api::ApiServer> api_;
    std::optional<api::MetricsServer> metrics_;
    std::optional<netlink::NeighborWatchThread> watcher_;
    std::atomic<bool> stopping_{false};
    std::thread watchdog_;
};

std::expected<void, std::string> Agent::write_datapath_config(const net::MacAddress& mac) {
    auto ok = lb_->config().put(0, make_datapath_config(config_.settings, mac));
    if (!ok) return std::unexpected(ok.error().message());
    mac_ = mac;
    return {};
}

void Agent::log_panic_changes(control::Reconciler& r) {
    for (const control::PanicChange& c : r.take_panic_changes()) {
        if (c.to == control::PanicReason::kBelowThreshold)
            spdlog::warn("{}", describe_panic_change(c));
        else
            spdlog::info("{}", describe_panic_change(c));
    }
}

void Agent::log_apply_failures(control::Reconciler& r) {
    for (const control::ApplyFailure& f : r.take_apply_failures())
        spdlog::error("VIP {} not applied: {}; trying again in {} ms", f.vip_key, f.error,
                      std::chrono::duration_cast<std::chrono::milliseconds>(f.retry_in).count());
}

std::expected<void, std::string> Agent::attach_probe_encap() {
    if (probe_tc_) return {};
    // A failed attach is tried again at the next change of probe targets (an
    // API change or a reload, never on a timer): whatever stood in the way may
    // have been fixed by then, and the error is logged again if not.
    auto fail = [](std::string why) { return std::unexpected(std::move(why)); };
    auto program = bpf::ProbeEncapProgram::load(*lb_);
    if (!program) return fail(program.error().message());
    auto iface = bpf::Interface::by_name(config_.settings.interface);
    if (!iface) return fail(iface.error().message());
    auto tc = bpf::TcAttachment::attach(*program, *iface);
    if (!tc) return fail(tc.error().message());
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
                          ref.error());
            continue;
        }
        auto mark = bpf::probe_mark(ref->id);
        if (!mark) {
            spdlog::error("health: {}: cannot probe through the VIP: backend id {} does not fit "
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
        spdlog::error("health: probes through the VIP cannot be encapsulated ({}); those "
                      "checks will fail",
                      ok.error());
    }
}

void Agent::refresh_health(control::Reconciler& r) {
    const auto now = health::Clock::now();
    std::vector<health::ProbeTarget> targets = health_.set_vips(r.vips(), now, r);
    route_probes_through_vips(targets, r);
    spdlog::info("health: probing {} (VIP, backend) pair(s)", targets.size());
    engine_->set_targets(std::move(targets));
    schedule_health_timer(now);
}

void Agent::on_probe_result(const health::ProbeResult& result, control::Reconciler& r) {
    const auto now = health::Clock::now();
    if (auto event = health_.apply(result, now, r)) {
        if (event->warning)
            spdlog::warn("health: {}", event->line);
        else
            spdlog::info("health: {}", event->line);
    }
    schedule_health_timer(now);
}

void Agent::on_health_timer(control::Reconciler& r) {
    const auto now = health::Clock::now();
    if (health_timer_at_ <= now) health_timer_at_ = health::TimePoint::max();
    health_.tick(now, r);
    schedule_health_timer(now);
}

// One wake-up at a time: the earliest one the state machines need. A timer
// asked for earlier than needed only costs a spare tick.
void Agent::schedule_health_timer(health::TimePoint now) {
    const health::TimePoint next = health_.next_change(now);
    if (next == health::TimePoint::max()) return;
    if (health_timer_at_ > now && health_timer_at_ <= next) return;
    health_timer_at_ = next;
    engine_->call_at(
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
                    spdlog::error("update next-hop MAC: {}", ok.error());
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
    auto loaded = config::load_config_file(options_.config_path);
    if (!loaded) {
        for (const auto& e : loaded.error()) spdlog::error("{}", e.to_string());
        spdlog::error("{} has {} error(s); not starting", options_.config_path, loaded.error().size());
        return 1;
    }
    config_ = std::move(*loaded);
    apply_overrides(options_, config_.settings);
    const config::Settings& s = config_.settings;

    if (!bpffs_mounted(s.pin_dir)) {
        spdlog::error("{} is not on a BPF filesystem (mount -t bpf bpf /sys/fs/bpf)", s.pin_dir);
        return 1;
    }
    auto mac = next_hop_mac(s);
    if (!mac) {
        spdlog::error("next hop: {}", mac.error());
        return 1;
    }

    pin_dir_ = s.pin_dir + "/" + s.interface;
    auto lb = bpf::LbProgram::load({s.maps.max_vips, s.maps.max_backends, s.maps.conntrack_entries},
                                   {pin_dir_});
    if (!lb) {
        spdlog::error("{}", lb.error().message());
        return 1;
    }
    lb_.emplace(std::move(*lb));
    spdlog::info("maps in {}: {}", pin_dir_, lb_->pins().summary());
    if (auto ok = write_datapath_config(*mac); !ok) {
        spdlog::error("write data-plane configuration: {}", ok.error());
        return 1;
    }

    // Desired state: the file, or the state file when it was written for it.
    state_.emplace(s.state_file, api::config_digest(config_.vips));
    auto state = state_->load();
    if (!state) {
        spdlog::error("{} (move it aside to start from {} alone)", state.error(), options_.config_path);
        return 1;
    }
    api::StartupDecision decision = api::decide_startup_vips(config_.vips, *state);
    if (!decision.warning.empty()) spdlog::warn("{}", decision.warning);
    if (decision.backup_state) {
        auto moved = state_->backup();
        if (!moved) {
            spdlog::error("back up {}: {}", s.state_file, moved.error());
            return 1;
        }
        if (!moved->empty()) spdlog::warn("previous state file kept as {}", *moved);
    }

    data_plane_.emplace(*lb_);
    reconciler_.emplace(*data_plane_, control::Reconciler::Options{s.maps.max_vips, s.maps.max_backends});
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
        if (!saved) spdlog::error("epochs not recorded (published all the same): {}", saved.error());
        return saved;
    });
    reconciler_->set_vips(decision.vips);
    if (auto first = reconciler_->reconcile(control::Clock::now()); !first)
        spdlog::error("first publish: {}", first.error().message());
    for (const auto& v : reconciler_->status())
        spdlog::info("VIP {} published: epoch {}, checksum {:016x}, {} backends{}", v.spec.key(), v.epoch,
                     v.checksum, v.backends.size(), v.last_error.empty() ? "" : " (" + v.last_error + ")");
    if (auto saved = state_->save_current(*reconciler_); !saved) spdlog::warn("{}", saved.error());

    // Tables first, then the program: from its first packet it finds them.
    auto iface = bpf::Interface::by_name(s.interface);
    if (!iface) {
        spdlog::error("{}", iface.error().message());
        return 1;
    }
    auto xdp = bpf::XdpAttachment::attach(*lb_, *iface, {to_bpf_mode(s.xdp_mode), false});
    if (!xdp) {
        spdlog::error("{}", xdp.error().message());
        return 1;
    }
    xdp_.emplace(std::move(*xdp));
    attached_ = true;
    spdlog::info("{}", xdp_->summary());
    if (xdp_->report().native_error)
        spdlog::warn("native XDP unavailable on {}: {}; running in generic mode", s.interface,
                     xdp_->report().native_error->message());

    loop_.emplace(*reconciler_, control::ControlLoop::Options{});
    loop_->on_publish([this](const control::PublishRecord& r) {
        publish_metrics_.record(r);
        spdlog::info("VIP {} published: epoch {}, checksum {:016x}, live {:.2f} ms after the decision",
                     r.vip_key, r.epoch, r.checksum, r.decision_to_live_ms);
    });
    // Both run on the control thread, which owns the reconciler.
    loop_->on_error([this](const std::string&) { log_apply_failures(*reconciler_); });
    loop_->on_pass([this](control::Reconciler& r) {
        log_panic_changes(r);
        log_apply_failures(r);
    });
    loop_->start();
    watch_next_hop();

    // Probes run on the engine's thread; their results are judged on the
    // control thread, which owns the state machines and the reconciler.
    engine_.emplace(health::ProbeEngine::Options{}, [this](health::ProbeResult result) {
        loop_->post([this, result = std::move(result)](control::Reconciler& r) {
            on_probe_result(result, r);
        });
    });
    if (auto ok = engine_->start(); !ok) {
        spdlog::error("health checks: {}", ok.error());
        return 1;
    }
    loop_->post([this](control::Reconciler& r) {
        log_panic_changes(r);
        refresh_health(r);
    });

    view_.emplace(*lb_);
    api_settings_ = std::make_shared<api::SharedSettings>(s);
    api::Services services{*loop_,
                           *state_,
                           *view_,
                           publish_metrics_,
                           api_settings_,
                           api::AgentInfo{kVersion, s.interface, bpf::to_string(xdp_->mode()),
                                          std::chrono::steady_clock::now()},
                           [this]() -> std::optional<std::string> {
                               if (!attached_) return std::string("XDP program not attached");
                               return std::nullopt;
                           }};
    services.health = [this](
                          const std::string& vip,
                          const net::IpAddress& backend) -> std::optional<api::BackendHealthInfo> {
        auto snapshot = health_.snapshot(vip, backend, health::Clock::now());
        if (!snapshot) return std::nullopt;
        return api::BackendHealthInfo{std::move(*snapshot), health_.last_failure(vip, backend)};
    };
    services.on_vips_changed = [this](control::Reconciler& r) { refresh_health(r); };
    services.probe_engine = [this] {
        return api::ProbeEngineInfo{engine_->stats(), engine_->cpu_time()};
    };
    api::ApiServer::Options api_options;
    api_options.socket_path = s.api_socket;
    api_options.group = s.api_group;
    api_.emplace(services, api_options);
    if (auto ok = api_->start(); !ok) {
        spdlog::error("API: {}", ok.error());
        return 1;
    }
    metrics_.emplace(services, s.metrics_listen);
    if (auto ok = metrics_->start(); !ok) {
        spdlog::error("metrics: {}", ok.error());
        return 1;
    }
    spdlog::info("xlbd {} serving: API on {}, metrics on {}", kVersion, s.api_socket, s.metrics_listen);

    notify("READY=1\nSTATUS=forwarding on " + s.interface);
    std::uint64_t watchdog_usec = 0;
    if (sd_watchdog_enabled(0, &watchdog_usec) > 0) {
        watchdog_ = std::thread([this, period = std::chrono::microseconds(watchdog_usec / 2)] {
            while (!stopping_) {
                if (api::check_live(*loop_).ok) notify("WATCHDOG=1");
                for (auto slept = std::chrono::microseconds(0); slept < period && !stopping_;
                     slept += std::chrono::milliseconds(100))
                    std::this_thread::sleep_for(std::chrono::milliseconds(100));
            }
        });
    }
    return 0;
}

void Agent::reload() {
    notify("RELOADING=1");
    spdlog::info("SIGHUP: reloading {}", options_.config_path);
    auto loaded = config::load_config_file(options_.config_path);
    if (!loaded) {
        for (const auto& e : loaded.error()) spdlog::error("{}", e.to_string());
        spdlog::error("reload rejected: {} has {} error(s); the running configuration stays",
                      options_.config_path, loaded.error().size());
        notify("READY=1");
        return;
    }
    config::Config next = std::move(*loaded);
    apply_overrides(options_, next.settings);
    for (const auto& key : restart_only_changes(config_.settings, next.settings))
        spdlog::warn("reload: '{}' changed; it takes effect at the next restart", key);
    // keep what only a restart can change
    config::Settings applied = config_.settings;
    applied.next_hop = next.settings.next_hop;
    applied.encap_source = next.settings.encap_source;
    applied.hash_seed = next.settings.hash_seed;
    applied.mtu = next.settings.mtu;
    applied.icmp_too_big = next.settings.icmp_too_big;
    const bool hop_changed = applied.next_hop != config_.settings.next_hop;
    const bool datapath_changed = hop_changed || applied.encap_source != config_.settings.encap_source ||
                                  applied.hash_seed != config_.settings.hash_seed ||
                                  applied.mtu != config_.settings.mtu ||
                                  applied.icmp_too_big != config_.settings.icmp_too_big;
    net::MacAddress mac = mac_;
    if (hop_changed) {
        auto resolved = next_hop_mac(applied);
        if (!resolved) {
            spdlog::error("reload rejected: next hop: {}", resolved.error());
            notify("READY=1");
            return;
        }
        mac = *resolved;
    }

    const std::vector<config::VipSpec> old_file = config_.vips;
    const std::vector<config::VipSpec> new_file = next.vips;
    auto merged = loop_->call<ReloadResult>([&](control::Reconciler& r) {
        ReloadResult result = merge_reload(old_file, new_file, r.vips());
        if (datapath_changed) {
            config_.settings = applied;
            if (auto ok = write_datapath_config(mac); !ok) result.warnings.push_back(ok.error());
            // lookups hash with the seed the data path now uses
            if (api_settings_) api_settings_->set(applied);
        }
        r.set_vips(result.vips);
        refresh_health(r);
        state_->set_config_digest(api::config_digest(new_file));
        if (auto saved = state_->save_current(r); !saved) result.warnings.push_back(saved.error());
        return result;
    });
    ReloadResult result = merged.get();
    config_.vips = new_file;
    for (const auto& w : result.warnings) spdlog::warn("reload: {}", w);
    spdlog::info("reload applied: added {}; removed {}; changed {}; {} VIP(s) untouched",
                 vip_list(result.added), vip_list(result.removed), vip_list(result.changed),
                 result.untouched);
    if (hop_changed) watch_next_hop();
    notify("READY=1");
}

void Agent::stop() {
    notify("STOPPING=1");
    stopping_ = true;
    if (watchdog_.joinable()) watchdog_.join();
    // first: its thread posts results and timers to the control loop
    if (engine_) engine_->stop();
    if (api_) api_->stop();
    if (metrics_) metrics_->stop();
    watcher_.reset();
    if (loop_) loop_->stop();
    // nothing publishes any more: the next start can then prove its tables' epochs
    if (reconciler_) reconciler_->release_epoch_reservations();
    if (reconciler_ && state_)
        if (auto saved = state_->save_current(*reconciler_); !saved) spdlog::warn("{}", saved.error());
    probe_tc_.reset();  // probes are over; the XDP program stays
    probe_encap_.reset();
    if (xdp_) {
        if (options_.detach_on_exit) {
            if (auto ok = xdp_->detach(); !ok) spdlog::error("detach: {}", ok.error().message());
            xdp_.reset();
            lb_.reset();
            if (auto ok = bpf::LbProgram::unpin(pin_dir_); !ok)
                spdlog::error("unpin {}: {}", pin_dir_, ok.error().message());
            spdlog::info("detached from {} and removed the pinned maps", config_.settings.interface);
        } else {
            xdp_->keep();
            spdlog::info("exiting; the data plane keeps forwarding on {} (pinned in {})",
                         config_.settings.interface, pin_dir_);
        }
    }
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

    if (int rc = start(); rc != 0) {
        stop();
        return rc;
    }
    while (true) {
        int sig = 0;
        if (sigwait(&signals, &sig) != 0) continue;
        if (sig == SIGHUP) {
            reload();
            continue;
        }
        spdlog::info("{}: stopping", sig == SIGTERM ? "SIGTERM" : "SIGINT");
        break;
    }
    stop();
    return 0;
}

}  // namespace

int run_agent(const AgentOptions& options) {
    Agent agent(options);
    return agent.run();
}

}  // namespace xlb::agent
