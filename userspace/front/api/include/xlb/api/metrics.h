// SPDX-License-Identifier: Apache-2.0
// Prometheus metrics (text exposition format 0.0.4) on a TCP address,
// 127.0.0.1:9464 by default, with /livez and /readyz beside /metrics.
// Series (docs/api.md lists them with their meaning):
//   xlb_build_info{version}  process_* (CPU, memory, fds, start time)
//   xlb_vip_info{vip,name} (always 1: the VIP's configured name)
//   xlb_packets_total{vip}  xlb_bytes_total{vip}  xlb_new_flows_total{vip}
//   xlb_conntrack_hits_total{vip}  xlb_vip_drops_total{vip}
//   xlb_backend_packets_total{vip,backend}  xlb_backend_bytes_total{vip,backend}
//   xlb_outcomes_total{outcome}
//   xlb_backend_healthy{vip,backend}  xlb_backend_effective_weight{vip,backend}
//   xlb_backend_state{vip,backend,state}  xlb_second_chance_hints_total{vip}
//   xlb_vip_panic{vip}  xlb_table_epoch{vip}
//   xlb_publishes_total  xlb_publish_latency_seconds (histogram, decision to live)
//   xlb_publish_return_latency_seconds (histogram, decision to the update's return)
//   xlb_vip_panic_entries_total{vip}  xlb_vip_starting{vip}
//   xlb_health_probes_total{vip,backend,outcome}
//   xlb_health_probe_latency_seconds{vip,backend} (histogram)
//   xlb_health_transitions_total{vip,backend,to}
//   xlb_health_probe_targets  xlb_health_probes_in_flight  xlb_health_probes_waiting
//   xlb_health_probes_started_total  xlb_health_engine_cpu_seconds_total
//   xlb_reloads_total{result}
#pragma once

#include <array>
#include <cstdint>
#include <expected>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "xlb/api/data_plane_view.h"
#include "xlb/api/services.h"
#include "xlb/control/reconciler.h"

namespace xlb::api::detail {
class GuardedServer;
}  // namespace xlb::api::detail

namespace xlb::api {

// Publish counts and latencies. Thread-safe: the agent calls record() from
// ControlLoop::on_publish (control thread), the metrics server reads.
class PublishMetrics {
public:
    // Upper bounds in seconds; +Inf is implied.
    static constexpr std::array<double, 11> kBuckets = {0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025,
                                                        0.05,   0.1,   0.25,   0.5,   1.0};
    struct Histogram {
        std::array<std::uint64_t, kBuckets.size()> buckets{};  // cumulative, per bound
        std::uint64_t count = 0;
        double sum = 0;  // seconds
    };
    struct Snapshot {
        std::uint64_t publishes = 0;
        Histogram decision_to_live;
        Histogram decision_to_return;
        // A fleet's hosts: between the first and the last host's publish of
        // the same table.
        Histogram fleet_spread;
    };

    void record(const control::PublishRecord& record);
    void record_spread(double seconds);
    Snapshot snapshot() const;

private:
    static void add(Histogram& h, double seconds);
    mutable std::mutex mu_;
    Snapshot data_;
};

// The process's own figures, Prometheus's standard process_* families.
struct ProcessStats {
    double cpu_seconds = 0;         // user + system
    double start_time_seconds = 0;  // since the Unix epoch
    std::uint64_t resident_memory_bytes = 0;
    std::uint64_t virtual_memory_bytes = 0;
    std::uint64_t open_fds = 0;
    std::uint64_t max_fds = 0;
};
// From /proc/self/stat's text (pure): ticks per second, page size and the
// boot time (/proc/stat's btime) convert its fields. nullopt: not that format.
std::optional<ProcessStats> parse_proc_stat(std::string_view stat, long ticks_per_second,
                                            long page_size, double boot_time_seconds);
// This process's, read from /proc; nullopt when /proc cannot be read.
std::optional<ProcessStats> read_process_stats();

// Everything one scrape shows, gathered from the reconciler and the maps.
struct MetricsInput {
    std::string version;                  // xlb_build_info
    std::optional<ProcessStats> process;  // nullopt: no process_* families
    std::vector<control::VipStatus> vips;
    std::optional<OutcomeCounts> outcomes;                      // nullopt: read failed
    std::map<std::uint32_t, xlb_vip_stats> vip_stats;           // by VIP id
    std::map<std::uint32_t, std::uint64_t> vip_hints;           // by VIP id: second-chance hints
    std::map<std::uint32_t, xlb_vip_drops> vip_drops;           // by VIP id: drops by reason
    std::map<std::uint32_t, xlb_vip_cookie_stats> vip_cookies;  // by VIP id: SYN cookies
    std::map<std::uint32_t, xlb_vip_quic_stats> vip_quic;       // by VIP id: QUIC VIPs only
    std::map<std::uint32_t, xlb_backend_stats> backend_stats;   // by backend id
    // Connections by (VIP id, backend id); nullopt: no xlb_backend_connections.
    std::optional<conntrack::ConnectionsByBackend> connections;
    PublishMetrics::Snapshot publishes;
    // Health-checker details by (VIP key, backend address); checked backends only.
    std::map<std::pair<std::string, net::IpAddress>, BackendHealthInfo> health;
    std::optional<ProbeEngineInfo> probe_engine;
    // Reloads by outcome, in kReloadOutcomes order; nullopt: no reloads shown.
    std::optional<std::array<std::uint64_t, std::size(kReloadOutcomes)>> reloads;
    std::uint32_t hash_seed = 0;                         // for xlb_vip_table_info's inputs_checksum
    std::optional<HostState> host;                       // nullopt: no host control
    std::optional<BgpInfo> bgp;                          // nullopt: BGP announcements off
    std::optional<conntrack::Status> conntrack;          // nullopt: no connection-table series
    std::optional<conntrack::SynFloodStatus> syn_flood;  // nullopt: no SYN flood detector
    std::optional<FleetInfo> fleet;                      // nullopt: not a fleet's host
};

// Prometheus text exposition format 0.0.4: HELP and TYPE per family, label
// values escaped (\\, \", \n).
std::string render_metrics(const MetricsInput& input);
// A label value as the format wants it: \ -> \\, " -> \", newline -> \n.
std::string escape_label_value(std::string_view value);

// "127.0.0.1:9464", "[::1]:9464", "localhost:9464"; port 0 picks a free one.
Result<std::pair<std::string, std::uint16_t>> parse_listen_address(std::string_view text);
// Binds the address as the metrics server would (SO_REUSEADDR, never
// SO_REUSEPORT) and closes it again, so that a start can be refused before
// it changes anything, with the error the server's start would give.
Result<void> check_listen_address(const std::string& listen);

class MetricsServer {
public:
    MetricsServer(Services services, std::string listen = "127.0.0.1:9464",
                  ConnectionLimits limits = {});
    ~MetricsServer();
    MetricsServer(const MetricsServer&) = delete;
    MetricsServer& operator=(const MetricsServer&) = delete;

    // Binds (SO_REUSEADDR, never SO_REUSEPORT: a second agent gets "address
    // in use") and starts serving on its own threads. The error names the
    // address and why.
    Result<void> start();
    void stop();
    // The bound port (useful with port 0).
    std::uint16_t port() const { return port_; }

private:
    Services services_;
    std::string listen_;
    ConnectionLimits limits_;
    std::uint16_t port_ = 0;
    std::unique_ptr<detail::GuardedServer> server_;
    std::thread thread_;
};

}  // namespace xlb::api
