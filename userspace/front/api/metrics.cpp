// SPDX-License-Identifier: Apache-2.0
#include "xlb/api/metrics.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <spdlog/spdlog.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <filesystem>

#include "internal.h"
#include "listener.h"
#include "xlb/datapath/setup.h"
#include "xlb/exposition/exposition.h"
#include "xlb/files/files.h"
#include "xlb/quic/cid.h"

namespace xlb::api {

void PublishMetrics::add(Histogram& h, double seconds) {
    for (std::size_t i = 0; i < kBuckets.size(); ++i)
        if (seconds <= kBuckets[i]) ++h.buckets[i];
    ++h.count;
    h.sum += seconds;
}

void PublishMetrics::record(const control::PublishRecord& record) {
    std::lock_guard lock(mu_);
    ++data_.publishes;
    add(data_.decision_to_live, record.decision_to_live_ms / 1000.0);
    add(data_.decision_to_return, record.decision_to_return_ms / 1000.0);
}

void PublishMetrics::record_spread(double seconds) {
    std::lock_guard lock(mu_);
    add(data_.fleet_spread, seconds);
}

PublishMetrics::Snapshot PublishMetrics::snapshot() const {
    std::lock_guard lock(mu_);
    return data_;
}

std::string escape_label_value(std::string_view value) {
    return exposition::escape_label_value(value);
}

namespace {

using exposition::number;

// A counter family read from one field of a per-VIP or per-backend stats struct.
template <class Stats>
struct Counter {
    const char* name;
    const char* help;
    __u64 Stats::*field;
};

// The agent's families on the shared writer, with its publish histograms.
class Writer : public exposition::Writer {
public:
    using exposition::Writer::histogram;
    void histogram(std::string_view name, std::string_view help,
                   const PublishMetrics::Histogram& h) {
        histogram(name, help, PublishMetrics::kBuckets, h.buckets, h.count, h.sum);
    }
};

}  // namespace

std::optional<ProcessStats> parse_proc_stat(std::string_view stat, long ticks_per_second,
                                            long page_size, double boot_time_seconds) {
    // "PID (COMM) STATE ...": COMM may hold spaces and parentheses; the
    // fields after the last ')' are space-separated, state being field 3.
    const std::size_t close = stat.rfind(')');
    if (close == std::string_view::npos || ticks_per_second <= 0) return std::nullopt;
    std::vector<std::string_view> fields;
    std::size_t at = close + 1;
    while (at < stat.size()) {
        while (at < stat.size() && stat[at] == ' ') ++at;
        const std::size_t end = std::min(stat.find(' ', at), stat.size());
        if (end > at) fields.push_back(stat.substr(at, end - at));
        at = end;
    }
    // fields[0] is field 3 (state): field N is fields[N - 3].
    auto field = [&](std::size_t n) -> std::optional<std::uint64_t> {
        if (n - 3 >= fields.size()) return std::nullopt;
        std::uint64_t value = 0;
        const std::string_view text = fields[n - 3];
        auto [p, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
        if (ec != std::errc() || p != text.data() + text.size()) return std::nullopt;
        return value;
    };
    auto utime = field(14), stime = field(15), starttime = field(22), vsize = field(23),
         rss = field(24);
    if (!utime || !stime || !starttime || !vsize || !rss) return std::nullopt;
    ProcessStats p;
    const double ticks = static_cast<double>(ticks_per_second);
    p.cpu_seconds = static_cast<double>(*utime + *stime) / ticks;
    p.start_time_seconds = boot_time_seconds + static_cast<double>(*starttime) / ticks;
    p.virtual_memory_bytes = *vsize;
    p.resident_memory_bytes = *rss * static_cast<std::uint64_t>(page_size);
    return p;
}

std::optional<ProcessStats> read_process_stats() {
    auto read = [](const char* path) -> std::optional<std::string> {
        auto text = files::read_file(path);
        if (!text || !*text) return std::nullopt;
        return **text;
    };
    auto stat = read("/proc/self/stat");
    if (!stat) return std::nullopt;
    // The start time in /proc/self/stat counts from boot on CLOCK_BOOTTIME
    // as this process sees it (a time namespace shifts it); /proc/stat's
    // btime does not follow a time namespace and is whole seconds, so the
    // boot instant is derived from the two clocks read together instead.
    timespec real{}, since_boot{};
    if (clock_gettime(CLOCK_REALTIME, &real) != 0 ||
        clock_gettime(CLOCK_BOOTTIME, &since_boot) != 0)
        return std::nullopt;
    auto seconds = [](const timespec& t) {
        return static_cast<double>(t.tv_sec) + static_cast<double>(t.tv_nsec) / 1e9;
    };
    const double boot = seconds(real) - seconds(since_boot);
    auto p = parse_proc_stat(*stat, sysconf(_SC_CLK_TCK), sysconf(_SC_PAGESIZE), boot);
    if (!p) return std::nullopt;
    std::error_code ec;
    for (auto it = std::filesystem::directory_iterator("/proc/self/fd", ec);
         !ec && it != std::filesystem::directory_iterator(); it.increment(ec))
        ++p->open_fds;
    if (rlimit limit{}; getrlimit(RLIMIT_NOFILE, &limit) == 0) p->max_fds = limit.rlim_cur;
    return p;
}

std::string render_metrics(const MetricsInput& in) {
    Writer w;
    w.family("xlb_build_info", "gauge", "Always 1: the running xlbd's version as a label.");
    w.sample("xlb_build_info", {{"version", in.version}}, 1);
    if (in.process) {
        const ProcessStats& p = *in.process;
        w.family("process_cpu_seconds_total", "counter", "User and system CPU time, seconds.");
        w.sample("process_cpu_seconds_total", {}, number(p.cpu_seconds));
        w.family("process_start_time_seconds", "gauge",
                 "Start time of the process, seconds since the Unix epoch.");
        w.sample("process_start_time_seconds", {}, number(p.start_time_seconds));
        w.family("process_resident_memory_bytes", "gauge", "Resident memory, bytes.");
        w.sample("process_resident_memory_bytes", {}, p.resident_memory_bytes);
        w.family("process_virtual_memory_bytes", "gauge", "Virtual memory, bytes.");
        w.sample("process_virtual_memory_bytes", {}, p.virtual_memory_bytes);
        w.family("process_open_fds", "gauge", "Open file descriptors.");
        w.sample("process_open_fds", {}, p.open_fds);
        w.family("process_max_fds", "gauge", "The limit of open file descriptors.");
        w.sample("process_max_fds", {}, p.max_fds);
    }
    // The VIP's name (config `name`), once per VIP: join on `vip`, e.g.
    // xlb_packets_total * on(vip) group_left(name) xlb_vip_info.
    w.family("xlb_vip_info", "gauge",
             "Always 1: the VIP's configured name as a label, to join on vip.");
    for (const control::VipStatus& v : in.vips)
        w.sample("xlb_vip_info", {{"vip", v.spec.key()}, {"name", v.spec.name}}, 1);
    // Per-VIP counters.
    const Counter<xlb_vip_stats> vip_counters[] = {
        {"xlb_packets_total", "Packets received for the VIP.", &xlb_vip_stats::packets},
        {"xlb_bytes_total", "Bytes received for the VIP (whole frames).", &xlb_vip_stats::bytes},
        {"xlb_new_flows_total", "Flows that took a backend from the Maglev table.",
         &xlb_vip_stats::new_flows},
        {"xlb_conntrack_hits_total",
         "Packets that kept their backend through the connection table.",
         &xlb_vip_stats::conntrack_hits},
    };
    for (const auto& c : vip_counters) {
        w.family(c.name, "counter", c.help);
        for (const control::VipStatus& v : in.vips) {
            if (!v.vip_id) continue;
            auto it = in.vip_stats.find(*v.vip_id);
            if (it == in.vip_stats.end()) continue;
            w.sample(c.name, {{"vip", v.spec.key()}}, it->second.*c.field);
        }
    }

    w.family("xlb_applies_total", "counter",
             "Attempts to apply the VIP's table since the agent started, by result: published "
             "(went live) or failed (retried after a back-off).");
    for (const control::VipStatus& v : in.vips) {
        w.sample("xlb_applies_total", {{"vip", v.spec.key()}, {"result", "published"}},
                 v.applies_published);
        w.sample("xlb_applies_total", {{"vip", v.spec.key()}, {"result", "failed"}},
                 v.applies_failed);
    }

    // Every reason of every VIP, zeros too: a rate() needs the series from
    // before its first drop.
    w.family("xlb_vip_drops_total", "counter",
             "Packets for the VIP that were dropped, by reason (the drop outcome's name).");
    for (const control::VipStatus& v : in.vips) {
        if (!v.vip_id) continue;
        auto it = in.vip_drops.find(*v.vip_id);
        if (it == in.vip_drops.end()) continue;
        for (std::uint32_t r = 0; r < XLB_VIP_DROP_REASONS; ++r)
            w.sample("xlb_vip_drops_total", {{"vip", v.spec.key()}, {"reason", vip_drop_reason(r)}},
                     it->second.by_reason[r]);
    }

    // SYN cookies (docs/syn-cookies.md): every VIP has the series, zeros
    // while its cookies are off, as for drops.
    using CookieField = __u64 xlb_vip_cookie_stats::*;
    auto cookie_counter = [&](const char* name, const char* help, CookieField field,
                              const char* result = nullptr) {
        if (help) w.family(name, "counter", help);
        for (const control::VipStatus& v : in.vips) {
            if (!v.vip_id) continue;
            auto it = in.vip_cookies.find(*v.vip_id);
            if (it == in.vip_cookies.end()) continue;
            if (result)
                w.sample(name, {{"vip", v.spec.key()}, {"result", result}}, it->second.*field);
            else
                w.sample(name, {{"vip", v.spec.key()}}, it->second.*field);
        }
    };
    cookie_counter("xlb_syns_total",
                   "SYNs to the VIP while its SYN cookies were on (auto or always), answered "
                   "or not: the SYN flood detector's input.",
                   &xlb_vip_cookie_stats::syns);
    cookie_counter("xlb_syn_cookies_sent_total",
                   "SYNs the LB answered itself with a SYN cookie (a SYN-ACK back to the client).",
                   &xlb_vip_cookie_stats::cookies_sent);
    cookie_counter("xlb_syn_cookie_acks_total",
                   "ACKs without a connection-table entry checked for a SYN cookie, by result: "
                   "valid (balanced as a new connection) or invalid (dropped while answering).",
                   &xlb_vip_cookie_stats::acks_valid, "valid");
    cookie_counter("xlb_syn_cookie_acks_total", nullptr, &xlb_vip_cookie_stats::acks_invalid,
                   "invalid");

    // QUIC connection-ID routing (docs/quic.md): the VIPs that route QUIC,
    // every reason, zeros too.
    w.family("xlb_quic_routed_total", "counter",
             "QUIC packets sent to the backend whose server id their connection ID carries.");
    for (const control::VipStatus& v : in.vips) {
        if (!v.vip_id) continue;
        auto it = in.vip_quic.find(*v.vip_id);
        if (it == in.vip_quic.end()) continue;
        w.sample("xlb_quic_routed_total", {{"vip", v.spec.key()}}, it->second.routed);
    }
    w.family("xlb_quic_fallbacks_total", "counter",
             "Packets of a QUIC VIP balanced by their addresses instead of their connection ID, "
             "by reason: client_cid, unknown_config, bad_length, unknown_server, dead_backend, "
             "no_key.");
    for (const control::VipStatus& v : in.vips) {
        if (!v.vip_id) continue;
        auto it = in.vip_quic.find(*v.vip_id);
        if (it == in.vip_quic.end()) continue;
        for (std::uint32_t r = 0; r < XLB_QUIC_FALLBACKS; ++r)
            w.sample("xlb_quic_fallbacks_total",
                     {{"vip", v.spec.key()}, {"reason", quic::fallback_name(r)}},
                     it->second.fallbacks[r]);
    }

    w.family("xlb_second_chance_hints_total", "counter",
             "Packets sent with a second-chance hint naming the backend the VIP's previous "
             "table chose (docs/second-chance.md).");
    for (const control::VipStatus& v : in.vips) {
        if (!v.vip_id) continue;
        auto it = in.vip_hints.find(*v.vip_id);
        if (it == in.vip_hints.end()) continue;
        w.sample("xlb_second_chance_hints_total", {{"vip", v.spec.key()}}, it->second);
    }

    const Counter<xlb_backend_stats> backend_counters[] = {
        {"xlb_backend_packets_total", "Packets sent to the backend.", &xlb_backend_stats::packets},
        {"xlb_backend_bytes_total", "Bytes sent to the backend (before encapsulation).",
         &xlb_backend_stats::bytes},
        {"xlb_backend_new_flows_total",
         "Connections started towards the backend: TCP SYNs, and packets of other protocols "
         "that found no connection-table entry.",
         &xlb_backend_stats::new_flows},
    };
    for (const auto& c : backend_counters) {
        w.family(c.name, "counter", c.help);
        for (const control::VipStatus& v : in.vips) {
            const std::string vip = v.spec.key();
            for (const control::BackendStatus& b : v.backends) {
                if (!b.id) continue;
                auto it = in.backend_stats.find(*b.id);
                if (it == in.backend_stats.end()) continue;
                w.sample(c.name, {{"vip", vip}, {"backend", b.address.to_string()}},
                         it->second.*c.field);
            }
        }
    }

    if (in.connections) {
        w.family("xlb_backend_connections", "gauge",
                 "Connection-table entries of the backend: state=\"active\" saw a packet within "
                 "the last 10 s and no FIN or RST from the client; state=\"inactive\" the rest.");
        for (const control::VipStatus& v : in.vips) {
            if (!v.vip_id || !v.spec.conntrack) continue;
            const std::string vip = v.spec.key();
            for (const control::BackendStatus& b : v.backends) {
                if (!b.id) continue;
                conntrack::Connections c;
                if (auto it = in.connections->find({*v.vip_id, *b.id}); it != in.connections->end())
                    c = it->second;
                const std::string backend = b.address.to_string();
                w.sample("xlb_backend_connections",
                         {{"vip", vip}, {"backend", backend}, {"state", "active"}}, c.active);
                w.sample("xlb_backend_connections",
                         {{"vip", vip}, {"backend", backend}, {"state", "inactive"}}, c.inactive);
            }
        }
    }

    w.family("xlb_outcomes_total", "counter",
             "Packets by what the XDP program did with them (forwarded, passed, dropped and why).");
    if (in.outcomes) {
        for (std::uint32_t i = 0; i < XLB_OUT__MAX; ++i)
            w.sample("xlb_outcomes_total", {{"outcome", outcome_name(i)}}, (*in.outcomes)[i]);
    }

    w.family("xlb_backend_healthy", "gauge", "1 when the backend's health check passes, else 0.");
    for (const control::VipStatus& v : in.vips) {
        const std::string vip = v.spec.key();
        for (const control::BackendStatus& b : v.backends)
            w.sample("xlb_backend_healthy", {{"vip", vip}, {"backend", b.address.to_string()}},
                     b.health == control::Health::kHealthy ? 1 : 0);
    }
    w.family("xlb_backend_effective_weight", "gauge",
             "The backend's weight in the VIP's live table, in the configured weight's units "
             "(configured weight x slow start, bias and panic factors; 0: not in the table).");
    for (const control::VipStatus& v : in.vips) {
        const std::string vip = v.spec.key();
        for (const control::BackendStatus& b : v.backends)
            w.sample("xlb_backend_effective_weight",
                     {{"vip", vip}, {"backend", b.address.to_string()}},
                     number(static_cast<double>(b.effective_weight) / control::kWeightScale));
    }
    w.family("xlb_backend_state", "gauge",
             "1 for the backend's administrative state (active, drain or disabled), 0 for the "
             "others.");
    for (const control::VipStatus& v : in.vips) {
        const std::string vip = v.spec.key();
        for (const control::BackendStatus& b : v.backends) {
            const std::string backend = b.address.to_string();
            for (config::AdminState state :
                 {config::AdminState::kActive, config::AdminState::kDrain,
                  config::AdminState::kDisabled})
                w.sample("xlb_backend_state",
                         {{"vip", vip}, {"backend", backend}, {"state", config::to_string(state)}},
                         b.state == state ? 1 : 0);
        }
    }
    w.family("xlb_vip_panic", "gauge",
             "1 when the VIP is in panic (health ignored: too few healthy backends), else 0.");
    for (const control::VipStatus& v : in.vips)
        w.sample("xlb_vip_panic", {{"vip", v.spec.key()}},
                 v.panic != control::PanicReason::kNone ? 1 : 0);
    w.family("xlb_vip_panic_entries_total", "counter",
             "Times the VIP went into panic because its healthy share fell below panic_threshold.");
    for (const control::VipStatus& v : in.vips)
        w.sample("xlb_vip_panic_entries_total", {{"vip", v.spec.key()}}, v.panic_entries);
    w.family("xlb_vip_starting", "gauge",
             "1 while not every active backend of the VIP has its first health verdict, else 0.");
    for (const control::VipStatus& v : in.vips)
        w.sample("xlb_vip_starting", {{"vip", v.spec.key()}}, v.starting ? 1 : 0);

    w.family("xlb_health_probes_total", "counter",
             "Health probes by outcome (passed, or why it failed: refused, timeout, ...).");
    for (const auto& [key, info] : in.health) {
        const health::Snapshot& h = info.snapshot;
        std::uint64_t failed = 0;
        for (std::size_t i = 1; i < h.failures.size(); ++i) failed += h.failures[i];
        const std::string backend = key.second.to_string();
        w.sample("xlb_health_probes_total",
                 {{"vip", key.first}, {"backend", backend}, {"outcome", "passed"}},
                 h.probes >= failed ? h.probes - failed : 0);
        for (std::size_t i = 1; i < h.failures.size(); ++i)
            w.sample("xlb_health_probes_total",
                     {{"vip", key.first},
                      {"backend", backend},
                      {"outcome", health::to_string(static_cast<health::Failure>(i))}},
                     h.failures[i]);
    }
    w.family("xlb_health_probe_latency_seconds", "histogram",
             "Latency of the backend's health probes, start to verdict: every probe that "
             "reached the backend, passed or failed (timeouts and probes the agent could not "
             "make are left out).");
    for (const auto& [key, info] : in.health) {
        const health::LatencyHistogram& l = info.snapshot.latency;
        w.histogram_series("xlb_health_probe_latency_seconds",
                           {{"vip", key.first}, {"backend", key.second.to_string()}},
                           health::LatencyHistogram::kBounds, l.buckets, l.count, l.sum);
    }
    w.family("xlb_health_transitions_total", "counter",
             "Health verdict changes of the backend, by the verdict it changed to.");
    for (const auto& [key, info] : in.health) {
        const std::string backend = key.second.to_string();
        w.sample("xlb_health_transitions_total",
                 {{"vip", key.first}, {"backend", backend}, {"to", "healthy"}},
                 info.snapshot.became_healthy);
        w.sample("xlb_health_transitions_total",
                 {{"vip", key.first}, {"backend", backend}, {"to", "unhealthy"}},
                 info.snapshot.became_unhealthy);
    }

    if (in.probe_engine) {
        const auto& e = *in.probe_engine;
        w.family("xlb_health_probe_targets", "gauge",
                 "(VIP, backend) pairs the probe engine probes.");
        w.sample("xlb_health_probe_targets", {}, e.stats.targets);
        w.family("xlb_health_probes_distinct", "gauge",
                 "Probes made per round: (VIP, backend) pairs checked alike share one.");
        w.sample("xlb_health_probes_distinct", {}, e.stats.probes);
        w.family("xlb_health_kept_connections", "gauge",
                 "Sockets kept between probes: http connections (reuse_connection) and tcp "
                 "checks' disconnected sockets.");
        w.sample("xlb_health_kept_connections", {}, e.stats.kept_connections);
        w.family("xlb_health_probes_reused_total", "counter",
                 "Health probes made on a kept connection or socket.");
        w.sample("xlb_health_probes_reused_total", {}, e.stats.reused);
        w.family("xlb_health_probes_in_flight", "gauge",
                 "Health probes started and not yet finished.");
        w.sample("xlb_health_probes_in_flight", {}, e.stats.in_flight);
        w.family(
            "xlb_health_probes_waiting", "gauge",
            "Health probes due but held back by the in-flight limit (file descriptors): late.");
        w.sample("xlb_health_probes_waiting", {}, e.stats.waiting);
        w.family("xlb_health_probes_started_total", "counter", "Health probes started.");
        w.sample("xlb_health_probes_started_total", {}, e.stats.probes_started);
        w.family("xlb_health_engine_cpu_seconds_total", "counter",
                 "CPU time (user and system) of the probe engine's thread.");
        w.sample("xlb_health_engine_cpu_seconds_total", {},
                 number(std::chrono::duration<double>(e.cpu_time).count()));
    }

    if (in.reloads) {
        w.family("xlb_reloads_total", "counter",
                 "Configuration reloads (SIGHUP or POST /v1/reload) by result: applied, invalid, "
                 "disruptive_refused, failed.");
        for (std::size_t i = 0; i < std::size(kReloadOutcomes); ++i)
            w.sample("xlb_reloads_total", {{"result", to_string(kReloadOutcomes[i])}},
                     (*in.reloads)[i]);
    }

    if (in.fleet) {
        const FleetInfo& f = *in.fleet;
        w.family("xlb_fleet_store_reachable", "gauge",
                 "1 while the fleet's store (etcd) answers this host, 0 while it does not (the "
                 "host keeps running what it applied last).");
        w.sample("xlb_fleet_store_reachable", {{"fleet", f.name}}, f.store_reachable ? 1 : 0);
        w.family("xlb_fleet_applied_revision", "gauge",
                 "The fleet's config revision this host runs (0: none yet).");
        w.sample("xlb_fleet_applied_revision", {{"fleet", f.name}}, f.applied_revision);
        w.family("xlb_fleet_refused_revision", "gauge",
                 "The newest desired revision this host refused (invalid or an unconfirmed "
                 "disruptive change); 0: none.");
        w.sample("xlb_fleet_refused_revision", {{"fleet", f.name}}, f.refused_revision);
        w.family("xlb_fleet_health_disagreement", "gauge",
                 "1 per backend this host's own probes judge otherwise than the fleet's verdict, "
                 "which its table follows (health_consensus majority or any_down).");
        for (const FleetInfo::Disagreement& d : f.disagreements)
            w.sample("xlb_fleet_health_disagreement",
                     {{"fleet", f.name},
                      {"host", f.host},
                      {"vip", d.vip},
                      {"backend", d.backend},
                      {"local", d.local},
                      {"fleet_verdict", d.fleet}},
                     1);
        w.family("xlb_fleet_health_local_fallbacks", "gauge",
                 "Backends whose table follows this host's own verdict because the fleet's view "
                 "is lost (the store is unreachable); 0 in the fleet's view.");
        w.sample("xlb_fleet_health_local_fallbacks", {{"fleet", f.name}}, f.local_fallbacks);
        w.family("xlb_fleet_behind", "gauge",
                 "1 while this host withdraws its routes because its desired revision is behind "
                 "the fleet's for longer than fleet.max_lag (announce: when_current).");
        w.sample("xlb_fleet_behind", {{"fleet", f.name}}, f.behind.empty() ? 0 : 1);
        w.histogram(
            "xlb_fleet_publish_spread_seconds",
            "Between the first and the last live host's publish of the same table of a "
            "VIP (two-phase publish; bounded by fleet.max_publish_wait while hosts are up).",
            in.publishes.fleet_spread);
    }

    w.family("xlb_table_epoch", "gauge", "Epoch of the VIP's live table (0: never published).");
    for (const control::VipStatus& v : in.vips)
        w.sample("xlb_table_epoch", {{"vip", v.spec.key()}}, v.epoch);
    // Compared across LB hosts: equal inputs_checksum means the same table
    // inputs; a different checksum then comes from health alone.
    w.family("xlb_vip_table_info", "gauge",
             "Always 1: the VIP's live table (checksum, epoch) and the digest of its inputs "
             "(seed, ring size, backends, weights, identities) as labels, to compare LB hosts.");
    for (const control::VipStatus& v : in.vips)
        w.sample("xlb_vip_table_info",
                 {{"vip", v.spec.key()},
                  {"checksum", detail::hex64(v.checksum)},
                  {"inputs_checksum",
                   detail::hex64(datapath::table_inputs_checksum(v.spec, in.hash_seed))},
                  {"epoch", std::to_string(v.epoch)}},
                 1);
    if (in.host) {
        w.family("xlb_host_drained", "gauge",
                 "1 while this LB host is drained (xlbctl host drain).");
        w.sample("xlb_host_drained", {}, in.host->drained ? 1 : 0);
    }
    if (in.bgp) {
        const announce::AnnouncerStatus& b = in.bgp->status;
        w.family("xlb_bgp_daemon_up", "gauge",
                 "1 when the last contact with the local BGP daemon (BIRD) succeeded.");
        w.sample("xlb_bgp_daemon_up", {}, b.daemon_reachable ? 1 : 0);
        w.family("xlb_bgp_problem", "gauge",
                 "1 for the announcer's current problem: none, file, daemon_unreachable, "
                 "config_refused, not_included.");
        for (announce::Problem p :
             {announce::Problem::kNone, announce::Problem::kFile, announce::Problem::kUnreachable,
              announce::Problem::kRefused, announce::Problem::kNotIncluded})
            w.sample("xlb_bgp_problem", {{"problem", std::string(announce::to_string(p))}},
                     b.problem == p ? 1 : 0);
        w.family("xlb_bgp_configures_total", "counter", "Reconfigurations BIRD accepted.");
        w.sample("xlb_bgp_configures_total", {}, b.configures_total);
        w.family("xlb_bgp_configure_failures_total", "counter",
                 "Reconfigurations that failed: BIRD unreachable or refusing the file.");
        w.sample("xlb_bgp_configure_failures_total", {}, b.configure_failures_total);
        w.family("xlb_vip_announced", "gauge",
                 "1 while this host announces the VIP's address to the routers, with the reason.");
        for (const announce::VipDecision& d : b.vips)
            w.sample("xlb_vip_announced",
                     {{"vip", d.key}, {"reason", std::string(announce::to_string(d.reason))}},
                     d.announced ? 1 : 0);
    }

    if (in.conntrack) {
        const conntrack::Status& c = *in.conntrack;
        w.family("xlb_conntrack_entries", "gauge",
                 "Entries in the connection table after the last sweep.");
        w.sample("xlb_conntrack_entries", {}, c.entries);
        w.family("xlb_conntrack_capacity", "gauge",
                 "Size (max_entries) of the connection table in use.");
        w.sample("xlb_conntrack_capacity", {}, c.capacity);
        w.family("xlb_conntrack_inserts_total", "counter",
                 "Entries the data path recorded, all CPUs.");
        w.sample("xlb_conntrack_inserts_total", {}, c.inserts);
        w.family("xlb_conntrack_insert_skipped_total", "counter",
                 "New flows not recorded because the CPU's insert budget was spent (still "
                 "balanced by the Maglev table), by CPU.");
        for (std::size_t i = 0; i < c.skipped_per_cpu.size(); ++i)
            w.sample("xlb_conntrack_insert_skipped_total", {{"cpu", std::to_string(i)}},
                     c.skipped_per_cpu[i]);
        w.family("xlb_conntrack_flooded", "gauge",
                 "1 while the CPU skipped an insert within the last second (under flood).");
        for (std::size_t i = 0; i < c.flooded_per_cpu.size(); ++i)
            w.sample("xlb_conntrack_flooded", {{"cpu", std::to_string(i)}},
                     c.flooded_per_cpu[i] ? 1 : 0);
        w.family("xlb_conntrack_expired_total", "counter",
                 "Entries deleted by the agent's sweeps for idling past their VIP's "
                 "conntrack_idle_timeout.");
        w.sample("xlb_conntrack_expired_total", {}, c.expired);
        if (c.last_sweep_ms) {
            w.family("xlb_conntrack_sweep_seconds", "gauge",
                     "Duration of the last sweep (scan, count and deletes) of the connection "
                     "table.");
            w.sample("xlb_conntrack_sweep_seconds", {}, number(*c.last_sweep_ms / 1000.0));
        }
    }

    if (in.syn_flood) {
        const conntrack::SynFloodStatus& f = *in.syn_flood;
        w.family("xlb_syn_flood_state", "gauge",
                 "1 for the host's SYN flood state (calm, answering: VIPs with syn_cookies auto "
                 "answer SYNs with cookies, recent: a flood ended and its cookies are still "
                 "accepted), 0 for the others.");
        for (auto state : {conntrack::SynFloodState::kCalm, conntrack::SynFloodState::kAnswering,
                           conntrack::SynFloodState::kRecent})
            w.sample("xlb_syn_flood_state", {{"state", conntrack::to_string(state)}},
                     f.state == state ? 1 : 0);
        w.family("xlb_syn_floods_total", "counter",
                 "SYN floods detected since the agent started (a CPU over syn_flood.start_rate).");
        w.sample("xlb_syn_floods_total", {}, f.floods);
        w.family("xlb_syn_flood_syn_rate", "gauge",
                 "SYNs per second to VIPs with SYN cookies on, by CPU, over the detector's last "
                 "interval (100 ms).");
        for (std::size_t i = 0; i < f.rate_per_cpu.size(); ++i)
            w.sample("xlb_syn_flood_syn_rate", {{"cpu", std::to_string(i)}},
                     number(f.rate_per_cpu[i]));
    }

    w.family("xlb_publishes_total", "counter", "Table publishes (one per VIP table made live).");
    w.sample("xlb_publishes_total", {}, in.publishes.publishes);
    w.histogram(
        "xlb_publish_latency_seconds",
        "From the reconciler's decision until the table was live (outer map update issued).",
        in.publishes.decision_to_live);
    w.histogram("xlb_publish_return_latency_seconds",
                "From the reconciler's decision until the outer map update returned (after the RCU "
                "grace period).",
                in.publishes.decision_to_return);
    return w.take();
}

Result<std::pair<std::string, std::uint16_t>> parse_listen_address(std::string_view text) {
    auto bad = [&](const std::string& why) {
        return fail("metrics address \"" + std::string(text) + "\": " + why +
                    ", expected HOST:PORT, e.g. 127.0.0.1:9464 or [::1]:9464");
    };
    std::string host;
    std::string_view port;
    if (text.starts_with('[')) {
        auto close = text.find(']');
        if (close == std::string_view::npos) return bad("missing ']'");
        host = std::string(text.substr(1, close - 1));
        if (close + 1 >= text.size() || text[close + 1] != ':') return bad("missing :PORT");
        port = text.substr(close + 2);
    } else {
        auto colon = text.rfind(':');
        if (colon == std::string_view::npos) return bad("missing :PORT");
        host = std::string(text.substr(0, colon));
        if (host.find(':') != std::string::npos) return bad("an IPv6 address needs brackets");
        port = text.substr(colon + 1);
    }
    if (host.empty()) return bad("missing host");
    unsigned value = 0;
    auto [end, ec] = std::from_chars(port.data(), port.data() + port.size(), value);
    if (port.empty() || ec != std::errc() || end != port.data() + port.size() || value > 65535)
        return bad("port \"" + std::string(port) + "\" is not 0-65535");
    return std::pair{host, static_cast<std::uint16_t>(value)};
}

MetricsServer::MetricsServer(Services services, std::string listen, ConnectionLimits limits)
    : services_(std::move(services)), listen_(std::move(listen)), limits_(limits) {}

MetricsServer::~MetricsServer() { stop(); }

Result<void> check_listen_address(const std::string& listen) {
    auto address = parse_listen_address(listen);
    if (!address) return std::unexpected(std::move(address.error()));
    auto fd = detail::bind_tcp(address->first, address->second, listen, false);
    if (!fd) return std::unexpected(std::move(fd.error()));
    ::close(*fd);
    return {};
}

Result<void> MetricsServer::start() {
    auto address = parse_listen_address(listen_);
    if (!address) return std::unexpected(std::move(address.error()).add_context("metrics"));
    const auto& [host, port] = *address;

    detail::Router router;
    router.add("GET", "/metrics", [s = services_](const httplib::Request&, httplib::Response& res) {
        MetricsInput in;
        in.version = s.info.version;
        in.process = read_process_stats();
        using Taken = std::pair<std::vector<control::VipStatus>, detail::HealthDetails>;
        auto taken =
            detail::on_control<Taken>(s.loop, s.call_timeout, [&s](control::Reconciler& r) {
                std::vector<control::VipStatus> vips = r.status();
                detail::HealthDetails health = detail::collect_health(s, vips);
                return Taken{std::move(vips), std::move(health)};
            });
        if (!taken) {
            res.status = 503;
            res.set_content(taken.error().message + "\n", "text/plain");
            return;
        }
        in.vips = std::move(taken->first);
        in.health = std::move(taken->second);
        detail::Counters counters = detail::read_counters(s.data_plane, in.vips);
        detail::add_connections(s, counters);
        in.connections = std::move(counters.connections);
        if (counters.error)
            spdlog::warn("metrics: counters incomplete: {}", counters.error->message());
        in.vip_stats = std::move(counters.vips);
        in.vip_hints = std::move(counters.vip_hints);
        in.vip_drops = std::move(counters.vip_drops);
        in.vip_cookies = std::move(counters.vip_cookies);
        in.vip_quic = std::move(counters.vip_quic);
        in.backend_stats = std::move(counters.backends);
        if (auto outcomes = s.data_plane.outcomes())
            in.outcomes = *outcomes;
        else
            spdlog::warn("metrics: outcome counters unreadable: {}", outcomes.error().message());
        in.publishes = s.publishes.snapshot();
        if (s.probe_engine) in.probe_engine = s.probe_engine();
        if (s.reloads) {
            in.reloads.emplace();
            for (std::size_t i = 0; i < std::size(kReloadOutcomes); ++i)
                (*in.reloads)[i] = s.reloads->count(kReloadOutcomes[i]);
        }
        in.hash_seed = s.settings->get().hash_seed;
        if (s.host.state) in.host = s.host.state();
        if (s.fleet.status) in.fleet = s.fleet.status();
        if (s.host.bgp) in.bgp = s.host.bgp();
        if (s.conntrack_status) in.conntrack = s.conntrack_status->get();
        if (s.syn_flood) in.syn_flood = s.syn_flood->get();
        res.status = 200;
        res.set_content(render_metrics(in), "text/plain; version=0.0.4; charset=utf-8");
    });
    detail::add_probes(router, services_);

    auto fd = detail::listen_tcp(host, port, listen_);
    if (!fd) return std::unexpected(std::move(fd.error()).add_context("metrics"));
    sockaddr_storage bound{};
    socklen_t len = sizeof(bound);
    if (::getsockname(*fd, reinterpret_cast<sockaddr*>(&bound), &len) != 0) {
        const int err = errno;
        ::close(*fd);
        return std::unexpected(make_error(err, "getsockname of " + listen_).add_context("metrics"));
    }
    port_ =
        ntohs(bound.ss_family == AF_INET6 ? reinterpret_cast<const sockaddr_in6&>(bound).sin6_port
                                          : reinterpret_cast<const sockaddr_in&>(bound).sin_port);
    server_ = std::make_unique<detail::GuardedServer>(limits_, false);
    router.install(*server_);
    server_->adopt(*fd);
    thread_ = std::thread([server = server_.get()] { server->serve(); });
    for (int i = 0; i < 2000 && !server_->is_running(); ++i)
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
    spdlog::info("metrics: serving /metrics, /livez, /readyz on {}:{}", host, port_);
    return {};
}

void MetricsServer::stop() {
    if (!server_) return;
    server_->stop();
    if (thread_.joinable()) thread_.join();
    server_.reset();
}

}  // namespace xlb::api
