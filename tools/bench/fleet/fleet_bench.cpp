// SPDX-License-Identifier: Apache-2.0
// xlb-bench-fleet: how long a change written to the fleet's store takes to
// be live on every LB host, and what an agent in fleet mode costs while
// nothing changes. Two labs of scripts/lab.sh, one after the other:
//
// The fleet. `lab.sh up --fleet --lb-hosts 3 --agent` (three etcd members
// with TLS, three LB hosts whose xlbd runs in fleet mode). The bench writes
// one VIP of 1,000 backends to the store and waits until all three hosts run
// it, then makes the common change: one backend's weight, written as xlbctl
// writes it (one etcd transaction, compare-and-swap on the VIP key's
// revision, the value with who wrote it). For each change, the time from
// just before the transaction is sent until the last of the three host
// records (hosts/<host>, which each agent writes right after the revision's
// tables are live) shows config_revision >= the transaction's revision, as
// a watch on hosts/ from a thread in the LB host lb delivers it: etcd's
// commit, the agents' watches, their reloads and table publishes, their
// record writes and the watch back are all in it. No API is polled.
//
// Idle. With nothing changing, each agent's CPU (utime + stime of
// /proc/PID/stat, every thread) over a window, as percent of one core; the
// etcd members' too. Beside it, the CPU each agent and member spent per
// change over the changes: where the write-to-live time goes when the
// processes share few cores.
//
// Baseline, in the same run: a host without a fleet cannot be changed
// through the store, and a fleet host refuses API changes (409), so the
// baseline is a plain lab (`lab.sh up --lb-hosts 1 --agent`, no fleet) with
// the same VIP: the same change as PATCH /v1/backends on the agent's socket,
// timed to its answer (which waits for the table's publish), and the same
// agent's idle CPU. The difference is what the store and the fan-out to three
// hosts cost.
#include <fmt/format.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <numeric>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "host.h"
#include "lab_driver.h"
#include "netns.h"
#include "xlb/config/config.h"
#include "xlb/config/json.h"
#include "xlb/etcd/client.h"
#include "xlb/fleet/values.h"
#include "xlb/xlbctl/fleet.h"
#include "xlb/xlbctl/request.h"
#include "xlb/xlbctl/transport.h"

namespace {

using xlb::bench::percentile;

using Clock = std::chrono::steady_clock;
using json = nlohmann::json;

constexpr int kHosts = 3;
constexpr std::uint32_t kBackends = 1000;
constexpr const char* kVipAddress = "198.51.100.40";
// Room for the VIP's backends, the lab's own (none) and the ids a change
// holds until no published table uses them.
constexpr const char* kMaxBackends = "4096";

double ms_between(Clock::time_point from, Clock::time_point to) {
    return std::chrono::duration<double, std::milli>(to - from).count();
}

struct Summary {
    double p50 = 0, p99 = 0, max = 0;
};

Summary summarise(const std::vector<double>& v) {
    return {percentile(v, 50), percentile(v, 99),
            v.empty() ? 0 : *std::max_element(v.begin(), v.end())};
}

json summary_json(const Summary& s) {
    return {{"p50_ms", s.p50}, {"p99_ms", s.p99}, {"max_ms", s.max}};
}

std::string read_text(const std::string& path) {
    std::ifstream in(path);
    if (!in) throw std::runtime_error("cannot read " + path);
    std::stringstream buf;
    buf << in.rdbuf();
    return buf.str();
}

std::vector<double> loadavg() {
    std::istringstream in(read_text("/proc/loadavg"));
    std::vector<double> out(3, 0);
    in >> out[0] >> out[1] >> out[2];
    return out;
}

std::string utc_now() {
    const std::time_t now = std::time(nullptr);
    std::tm tm{};
    ::gmtime_r(&now, &tm);
    char buf[32];
    std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
    return buf;
}

// The VIP the bench changes: 1,000 backends, no health check (nothing to
// probe in the lab; a probe engine's work would be in the idle figure).
xlb::config::VipSpec bench_vip() {
    xlb::config::VipSpec vip;
    vip.name = "bench";
    vip.address = *xlb::net::IpAddress::parse(kVipAddress);
    vip.port = 80;
    for (std::uint32_t i = 0; i < kBackends; ++i) {
        xlb::config::BackendSpec b;
        b.address = xlb::net::IpAddress::v4(10, 1, static_cast<std::uint8_t>(i >> 8),
                                            static_cast<std::uint8_t>(i));
        vip.backends.push_back(b);
    }
    return vip;
}

// Change i of a run: backend i's weight, between the default and 150, so
// that every change builds a new table.
void change_backend(xlb::config::VipSpec& vip, int i) {
    auto& weight = vip.backends[static_cast<std::size_t>(i) % vip.backends.size()].weight;
    weight = weight == xlb::config::kDefaultWeight ? 150 : xlb::config::kDefaultWeight;
}

// ---- CPU of a process ------------------------------------------------------------------

// utime + stime of every thread of `pid`, in clock ticks.
long long cpu_ticks(pid_t pid) {
    const std::string stat = read_text("/proc/" + std::to_string(pid) + "/stat");
    // the fields after the command, whose name may hold spaces and ')'
    std::istringstream in(stat.substr(stat.rfind(')') + 2));
    std::string field;
    long long utime = 0, stime = 0;
    for (int n = 3; n <= 15 && in >> field; ++n) {
        if (n == 14) utime = std::stoll(field);
        if (n == 15) stime = std::stoll(field);
    }
    return utime + stime;
}

pid_t read_pid(const std::string& path, const std::string& expected_comm) {
    const pid_t pid = static_cast<pid_t>(std::stol(read_text(path)));
    std::string comm = read_text("/proc/" + std::to_string(pid) + "/comm");
    if (!comm.empty() && comm.back() == '\n') comm.pop_back();
    if (comm != expected_comm)
        throw std::runtime_error(
            fmt::format("{}: pid {} runs {}, expected {}", path, pid, comm, expected_comm));
    return pid;
}

// CPU milliseconds of each process since `before` (cpu_ticks of each).
std::vector<double> cpu_ms_since(const std::vector<pid_t>& pids,
                                 const std::vector<long long>& before) {
    const double hz = static_cast<double>(::sysconf(_SC_CLK_TCK));
    std::vector<double> out;
    for (std::size_t i = 0; i < pids.size(); ++i)
        out.push_back(static_cast<double>(cpu_ticks(pids[i]) - before[i]) / hz * 1000);
    return out;
}

// Percent of one core each process used over `window`.
std::vector<double> cpu_percent(const std::vector<pid_t>& pids, std::chrono::seconds window) {
    std::vector<long long> before;
    for (pid_t p : pids) before.push_back(cpu_ticks(p));
    const auto start = Clock::now();
    std::this_thread::sleep_for(window);
    const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
    const double hz = static_cast<double>(::sysconf(_SC_CLK_TCK));
    std::vector<double> out;
    for (std::size_t i = 0; i < pids.size(); ++i)
        out.push_back(static_cast<double>(cpu_ticks(pids[i]) - before[i]) / hz / seconds * 100);
    return out;
}

// ---- the hosts' records, as a watch on hosts/ delivers them ----------------------------

// Each host's newest config_revision, when the watch first showed it, and
// what it refused. Filled by the watch thread, read by the writer.
class HostsView {
public:
    void update(const std::string& host, std::int64_t revision,
                std::optional<xlb::fleet::HostRecord::Refusal> refused, Clock::time_point at,
                xlb::fleet::HostVotes votes = {}) {
        std::lock_guard lock(mu_);
        Host& h = hosts_[host];
        h.live = std::move(votes.live);
        h.published_at_ms = std::move(votes.published_at_ms);
        if (revision > h.revision) {
            h.revision = revision;
            h.since = at;
        }
        h.refused = std::move(refused);
        changed_.notify_all();
    }
    void fail(std::string error) {
        std::lock_guard lock(mu_);
        error_ = std::move(error);
        changed_.notify_all();
    }

    // The time each host's record first showed config_revision >= revision,
    // once all `hosts` do; throws after `timeout`, or when a host refused it.
    std::vector<Clock::time_point> wait_all(std::int64_t revision, int hosts,
                                            std::chrono::milliseconds timeout) {
        std::unique_lock lock(mu_);
        std::string refusal;
        auto done = [&] {
            if (!error_.empty()) return true;
            int live = 0;
            for (const auto& [name, h] : hosts_) {
                live += h.revision >= revision;
                if (h.refused && h.refused->revision >= revision)
                    refusal = fmt::format("host {} refused revision {} ({}): {}", name,
                                          h.refused->revision, h.refused->reason,
                                          fmt::join(h.refused->errors, "; "));
            }
            return live >= hosts || !refusal.empty();
        };
        if (!changed_.wait_for(lock, timeout, done)) {
            std::string behind;
            for (const auto& [name, h] : hosts_)
                if (h.revision < revision) behind += fmt::format(" {} at {};", name, h.revision);
            throw std::runtime_error(fmt::format(
                "revision {} not live on all {} hosts after {} ms (records seen of {} hosts;{})",
                revision, hosts, timeout.count(), hosts_.size(), behind));
        }
        if (!error_.empty()) throw std::runtime_error("the watch on the host records: " + error_);
        if (!refusal.empty()) throw std::runtime_error(refusal);
        std::vector<Clock::time_point> out;
        for (const auto& [name, h] : hosts_)
            if (h.revision >= revision) out.push_back(h.since);
        return out;
    }

    // Once every host's record shows the same live table of `vip` with the
    // time it went live: the spread between the first and the last (ms).
    double wait_spread(const std::string& vip, int hosts, std::chrono::milliseconds timeout) {
        std::unique_lock lock(mu_);
        double spread = 0;
        auto done = [&] {
            if (static_cast<int>(hosts_.size()) < hosts) return false;
            std::optional<std::string> table;
            std::int64_t first = 0, last = 0;
            for (const auto& [name, h] : hosts_) {
                auto live = h.live.find(vip);
                auto at = h.published_at_ms.find(vip);
                if (live == h.live.end() || at == h.published_at_ms.end()) return false;
                if (table && *table != live->second) return false;
                if (!table) first = last = at->second;
                table = live->second;
                first = std::min(first, at->second);
                last = std::max(last, at->second);
            }
            spread = static_cast<double>(last - first);
            return true;
        };
        if (!changed_.wait_for(lock, timeout, done))
            throw std::runtime_error(fmt::format(
                "the hosts' records do not show one live table of {} with its publish time "
                "after {} ms",
                vip, timeout.count()));
        return spread;
    }

private:
    struct Host {
        std::map<std::string, std::string> live;
        std::map<std::string, std::int64_t> published_at_ms;
        std::int64_t revision = 0;
        Clock::time_point since{};
        std::optional<xlb::fleet::HostRecord::Refusal> refused;
    };
    std::mutex mu_;
    std::condition_variable changed_;
    std::map<std::string, Host> hosts_;
    std::string error_;
};

void record_host(HostsView& view, const xlb::fleet::Layout& layout, const std::string& key,
                 const std::string& value, Clock::time_point at) {
    auto record = xlb::fleet::decode_host(value);
    if (!record) {
        view.fail(key + ": " + record.error().message());
        return;
    }
    view.update(key.substr(layout.hosts().size()), record->config_revision, record->refused, at,
                xlb::fleet::host_votes(*record));
}

// ---- the fleet's half ------------------------------------------------------------------

struct FleetResult {
    std::vector<double> all_live_ms, first_live_ms, commit_ms;
    // Between the first and the last host's publish of each change's table.
    std::vector<double> publish_spread_ms;
    std::vector<double> idle_cpu;  // per host, lb, lb2, lb3
    std::vector<double> etcd_idle_cpu;
    // CPU each agent and each member spent per change, over all the changes
    // (warm-up included, the pauses between them too).
    std::vector<double> cpu_ms_per_change, etcd_cpu_ms_per_change;
    std::int64_t first_revision = 0;
};

xlb::etcd::Client open_client(const std::string& xlbctl_yaml) {
    auto settings = xlb::config::load_client_config(xlbctl_yaml);
    if (!settings) {
        std::string errors;
        for (const auto& e : settings.error()) errors += "\n  " + e.to_string();
        throw std::runtime_error(xlbctl_yaml + ":" + errors);
    }
    xlb::etcd::ClientOptions options;
    options.endpoints = settings->endpoints;
    options.ca = settings->ca;
    options.cert = settings->cert;
    options.key = settings->key;
    auto client = xlb::etcd::Client::open(std::move(options));
    if (!client) throw std::runtime_error(client.error().message());
    return std::move(*client);
}

// The writer: one transaction as xlbctl's store writes it (fleet_etcd.cpp),
// the key compared at the revision it was last written at. The revision of
// the write.
std::int64_t write_vip(const xlb::etcd::Client& client, const xlb::fleet::Layout& layout,
                       const xlb::config::VipSpec& vip, std::int64_t& key_revision) {
    xlb::fleet::Written who = xlb::xlbctl::local_writer(utc_now());
    who.reason = "xlb-bench-fleet";
    who.tool = "xlb-bench-fleet";
    const std::string key = layout.vip(vip.key());
    auto txn =
        client.txn({xlb::etcd::Compare{key, key_revision}},
                   {xlb::etcd::Op::put(
                       key, xlb::fleet::encode(xlb::fleet::VipValue{vip, false, std::move(who)}))},
                   {xlb::etcd::Op::get(key)});
    if (!txn) throw std::runtime_error(txn.error().message());
    if (!txn->succeeded)
        throw std::runtime_error(
            fmt::format("{} changed by someone else since revision {}", key, key_revision));
    key_revision = txn->revision;
    return txn->revision;
}

// Runs on a thread in the LB host lb's namespace (the store is on the lab's
// management network).
FleetResult run_fleet(const xlb::test::Lab& lab, int changes, int warmup,
                      std::chrono::milliseconds gap, std::chrono::seconds idle) {
    const xlb::etcd::Client client = open_client(lab.dir() + "/fleet/xlbctl.yaml");
    const xlb::fleet::Layout layout{"/xlb/lab/"};
    HostsView view;

    auto hosts = client.get_prefix(layout.hosts());
    if (!hosts) throw std::runtime_error(hosts.error().message());
    for (const auto& kv : hosts->kvs) record_host(view, layout, kv.key, kv.value, Clock::now());
    xlb::etcd::Watch handle;
    std::thread watcher([&, ns = lab.lb_ns(), from = hosts->revision + 1] {
        xlb::test::NetnsScope scope(ns);
        auto ended = client.watch(
            layout.hosts(), from,
            [&](const xlb::etcd::WatchBatch& batch) {
                const auto at = Clock::now();
                for (const auto& e : batch.events)
                    if (e.type == xlb::etcd::Event::Type::kPut)
                        record_host(view, layout, e.kv.key, e.kv.value, at);
            },
            handle);
        if (!ended)
            view.fail(ended.error().message());
        else if (ended->reason != xlb::etcd::WatchEnd::Reason::kStopped)
            view.fail("compacted");
    });
    struct StopWatch {
        xlb::etcd::Watch& handle;
        std::thread& thread;
        ~StopWatch() {
            handle.stop();
            thread.join();
        }
    } stop_watch{handle, watcher};

    FleetResult out;
    xlb::config::VipSpec vip = bench_vip();
    std::int64_t key_revision = 0;
    out.first_revision = write_vip(client, layout, vip, key_revision);
    view.wait_all(out.first_revision, kHosts, std::chrono::seconds(60));
    std::vector<pid_t> agents{read_pid(lab.dir() + "/xlbd.pid", "xlbd")};
    for (int k = 2; k <= kHosts; ++k)
        agents.push_back(read_pid(fmt::format("{}/lb{}/xlbd.pid", lab.dir(), k), "xlbd"));
    std::vector<pid_t> members;
    for (int k = 1; k <= 3; ++k)
        members.push_back(read_pid(fmt::format("{}/fleet/e{}.pid", lab.dir(), k), "etcd"));
    std::vector<pid_t> all = agents;
    all.insert(all.end(), members.begin(), members.end());
    std::vector<long long> ticks;
    for (pid_t p : all) ticks.push_back(cpu_ticks(p));
    for (int i = 0; i < warmup + changes; ++i) {
        std::this_thread::sleep_for(gap);
        change_backend(vip, i);
        const auto start = Clock::now();
        const std::int64_t revision = write_vip(client, layout, vip, key_revision);
        const auto committed = Clock::now();
        const auto live = view.wait_all(revision, kHosts, std::chrono::seconds(10));
        if (i < warmup) continue;
        out.commit_ms.push_back(ms_between(start, committed));
        out.all_live_ms.push_back(ms_between(start, *std::max_element(live.begin(), live.end())));
        out.first_live_ms.push_back(ms_between(start, *std::min_element(live.begin(), live.end())));
        out.publish_spread_ms.push_back(
            view.wait_spread(vip.key(), kHosts, std::chrono::seconds(10)));
    }

    const std::vector<double> spent = [&] {
        std::vector<double> v = cpu_ms_since(all, ticks);
        for (double& ms : v) ms /= warmup + changes;
        return v;
    }();
    out.cpu_ms_per_change.assign(spent.begin(), spent.begin() + kHosts);
    out.etcd_cpu_ms_per_change.assign(spent.begin() + kHosts, spent.end());

    // Idle: after the last change's record writes have settled.
    std::this_thread::sleep_for(std::chrono::seconds(2));
    const std::vector<double> cpu = cpu_percent(all, idle);
    out.idle_cpu.assign(cpu.begin(), cpu.begin() + kHosts);
    out.etcd_idle_cpu.assign(cpu.begin() + kHosts, cpu.end());
    return out;
}

// ---- the baseline: one host without a fleet --------------------------------------------

struct BaselineResult {
    std::vector<double> patch_ms;
    double cpu_ms_per_change = 0;  // the agent's, as FleetResult's
    double idle_cpu = 0;
};

json call_api(xlb::xlbctl::UnixSocketTransport& api, const std::string& method,
              const std::string& target, const std::string& body) {
    auto response = api.send({method, target, body});
    if (!response)
        throw std::runtime_error(fmt::format("{} {}: {}", method, target, response.error().detail));
    json j = json::parse(response->body, nullptr, false);
    if (response->status != 200 && response->status != 201)
        throw std::runtime_error(
            fmt::format("{} {}: {} {}", method, target, response->status, response->body));
    return j;
}

BaselineResult run_baseline(const xlb::test::Lab& lab, int changes, int warmup,
                            std::chrono::milliseconds gap, std::chrono::seconds idle) {
    xlb::xlbctl::UnixSocketTransport api(lab.dir() + "/xlbd.sock", std::chrono::seconds(20));
    xlb::config::VipSpec vip = bench_vip();
    call_api(api, "POST", "/v1/vips", json(vip).dump());
    const std::string vip_query = "vip=" + xlb::xlbctl::url_encode(vip.key());
    BaselineResult out;
    const pid_t agent = read_pid(lab.dir() + "/xlbd.pid", "xlbd");
    const long long ticks = cpu_ticks(agent);
    for (int i = 0; i < warmup + changes; ++i) {
        std::this_thread::sleep_for(gap);
        change_backend(vip, i);
        const auto& b = vip.backends[static_cast<std::size_t>(i) % vip.backends.size()];
        const std::string target = "/v1/backends?" + vip_query +
                                   "&address=" + xlb::xlbctl::url_encode(b.address.to_string());
        const auto start = Clock::now();
        const json answer = call_api(api, "PATCH", target, json{{"weight", b.weight}}.dump());
        const double ms = ms_between(start, Clock::now());
        if (answer.value("publish", "") != "live")
            throw std::runtime_error(fmt::format("PATCH {}: publish {}, expected live", target,
                                                 answer.value("publish", json()).dump()));
        if (i >= warmup) out.patch_ms.push_back(ms);
    }
    out.cpu_ms_per_change = cpu_ms_since({agent}, {ticks}).front() / (warmup + changes);
    std::this_thread::sleep_for(std::chrono::seconds(2));
    out.idle_cpu = cpu_percent({agent}, idle).front();
    return out;
}

}  // namespace

int main(int argc, char** argv) {
    CLI::App app{"xlb-bench-fleet: a change written to the fleet's store, until live on 3 hosts"};
    std::string out_path = "build/bench/fleet.json";
    int changes = 100, warmup = 5, gap_ms = 100, idle_s = 10;
    app.add_option("--out", out_path, "JSON output path")->capture_default_str();
    app.add_option("--changes", changes, "measured changes")
        ->check(CLI::Range(10, 10000))
        ->capture_default_str();
    app.add_option("--warmup", warmup, "changes made first, not measured")
        ->check(CLI::Range(0, 100))
        ->capture_default_str();
    app.add_option("--gap-ms", gap_ms, "pause before each change")
        ->check(CLI::Range(0, 10000))
        ->capture_default_str();
    app.add_option("--idle-seconds", idle_s, "window of the idle CPU figures")
        ->check(CLI::Range(1, 600))
        ->capture_default_str();
    CLI11_PARSE(app, argc, argv);
    const std::chrono::milliseconds gap(gap_ms);
    const std::chrono::seconds idle(idle_s);

    const std::vector<double> load = loadavg();
    FleetResult fleet;
    BaselineResult baseline;
    try {
        {
            xlb::test::Lab lab;  // its destructor takes the lab down, whatever happened
            lab.up({.extra = {"--fleet", "--lb-hosts", std::to_string(kHosts), "--agent",
                              "--max-backends", kMaxBackends}});
            fleet = xlb::test::in_netns(lab.lb_ns(),
                                        [&] { return run_fleet(lab, changes, warmup, gap, idle); });
        }
        {
            xlb::test::Lab lab;
            lab.up({.extra = {"--lb-hosts", "1", "--agent", "--max-backends", kMaxBackends}});
            baseline = run_baseline(lab, changes, warmup, gap, idle);
        }
    } catch (const std::exception& e) {
        fmt::print(stderr, "xlb-bench-fleet: {}\n", e.what());
        return 1;
    }

    const Summary all = summarise(fleet.all_live_ms), first = summarise(fleet.first_live_ms),
                  commit = summarise(fleet.commit_ms), base = summarise(baseline.patch_ms),
                  spread = summarise(fleet.publish_spread_ms);
    const double idle_max = *std::max_element(fleet.idle_cpu.begin(), fleet.idle_cpu.end());
    const double idle_mean = std::accumulate(fleet.idle_cpu.begin(), fleet.idle_cpu.end(), 0.0) /
                             static_cast<double>(fleet.idle_cpu.size());
    const bool latency_met = all.p99 < 500, idle_met = idle_max < 1.0, spread_met = spread.p99 < 50;

    fmt::print(
        "{} changes (after {} not measured, {} ms apart) of one backend's weight in a VIP of {} "
        "backends\n",
        changes, warmup, gap_ms, kBackends);
    fmt::print("{:<58}  {:>8}  {:>8}  {:>8}  {}\n", "", "p50 ms", "p99 ms", "max ms", "target");
    auto row = [](const std::string& what, const Summary& s, const std::string& target) {
        fmt::print("{:<58}  {:>8.1f}  {:>8.1f}  {:>8.1f}  {}\n", what, s.p50, s.p99, s.max, target);
    };
    row(fmt::format("fleet: etcd txn to live on all {} hosts", kHosts), all,
        latency_met ? "p99 < 500 ms: met" : "p99 < 500 ms: MISSED");
    row("fleet: etcd txn to live on the first host", first, "-");
    row("fleet: etcd txn answered (committed)", commit, "-");
    row(fmt::format("fleet: publish spread, first to last of {} hosts", kHosts), spread,
        spread_met ? "p99 < 50 ms: met" : "p99 < 50 ms: MISSED");
    row("baseline: 1 host, no fleet: PATCH /v1/backends answered", base, "-");
    fmt::print(
        "fleet: the xlbctl transaction sent from LB host lb; live: the host's record "
        "(hosts/<host>) shows the revision, seen through a watch\n"
        "baseline: the same change through the agent's API on its socket; the answer waits for "
        "the table's publish\n");
    fmt::print(
        "idle CPU over {} s, % of one core: agents lb {:.2f}, lb2 {:.2f}, lb3 {:.2f} (highest "
        "{:.2f}, mean {:.2f}; target < 1%: {}); etcd members {:.2f}, {:.2f}, {:.2f}; "
        "baseline agent without a fleet {:.2f}\n",
        idle_s, fleet.idle_cpu[0], fleet.idle_cpu[1], fleet.idle_cpu[2], idle_max, idle_mean,
        idle_met ? "met" : "MISSED", fleet.etcd_idle_cpu[0], fleet.etcd_idle_cpu[1],
        fleet.etcd_idle_cpu[2], baseline.idle_cpu);
    fmt::print(
        "CPU per change, ms: agents lb {:.1f}, lb2 {:.1f}, lb3 {:.1f}; etcd members {:.1f}, "
        "{:.1f}, {:.1f}; baseline agent without a fleet {:.1f}\n",
        fleet.cpu_ms_per_change[0], fleet.cpu_ms_per_change[1], fleet.cpu_ms_per_change[2],
        fleet.etcd_cpu_ms_per_change[0], fleet.etcd_cpu_ms_per_change[1],
        fleet.etcd_cpu_ms_per_change[2], baseline.cpu_ms_per_change);
    fmt::print("load average at start: {:.2f} {:.2f} {:.2f}; {}, {}\n", load[0], load[1], load[2],
               xlb::bench::kernel_release(), xlb::bench::cpu_model());

    const json out{
        {"write_to_live_p50_ms", all.p50},
        {"write_to_live_p99_ms", all.p99},
        {"write_to_live_max_ms", all.max},
        {"publish_spread_p50_ms", spread.p50},
        {"publish_spread_p99_ms", spread.p99},
        {"publish_spread_max_ms", spread.max},
        {"publish_spread",
         "per change, between the first and the last host's publish of its table (the "
         "published_at of each host's record; two-phase publish, fleet.max_publish_wait 1s)"},
        {"publish_spread_samples_ms", fleet.publish_spread_ms},
        {"idle_cpu_percent", idle_max},
        {"idle_cpu_percent_mean", idle_mean},
        {"idle_cpu_percent_per_host",
         {{"lb", fleet.idle_cpu[0]}, {"lb2", fleet.idle_cpu[1]}, {"lb3", fleet.idle_cpu[2]}}},
        {"idle_seconds", idle_s},
        {"etcd_idle_cpu_percent", fleet.etcd_idle_cpu},
        {"cpu_ms_per_change", fleet.cpu_ms_per_change},
        {"etcd_cpu_ms_per_change", fleet.etcd_cpu_ms_per_change},
        {"baseline_cpu_ms_per_change", baseline.cpu_ms_per_change},
        {"first_host_live", summary_json(first)},
        {"commit", summary_json(commit)},
        {"baseline_p50_ms", base.p50},
        {"baseline_p99_ms", base.p99},
        {"baseline_max_ms", base.max},
        {"baseline_idle_cpu_percent", baseline.idle_cpu},
        {"baseline",
         "one LB host without a fleet (lab.sh up --lb-hosts 1 --agent): the same change as "
         "PATCH /v1/backends on the agent's socket, timed to the answer, which waits for the "
         "publish"},
        {"change",
         "one backend's weight (default <-> 150), one etcd transaction as xlbctl writes it "
         "(compare-and-swap on the VIP key), sent from LB host lb; live: all hosts' records "
         "show config_revision >= the write's, through a watch on hosts/"},
        {"hosts", kHosts},
        {"backends", kBackends},
        {"changes", changes},
        {"warmup", warmup},
        {"gap_ms", gap_ms},
        {"samples_ms", fleet.all_live_ms},
        {"baseline_samples_ms", baseline.patch_ms},
        {"targets",
         {{"write_to_live_p99_ms", 500}, {"idle_cpu_percent", 1.0}, {"publish_spread_p99_ms", 50}}},
        {"met",
         {{"write_to_live_p99_ms", latency_met},
          {"idle_cpu_percent", idle_met},
          {"publish_spread_p99_ms", spread_met}}},
        {"loadavg_at_start", load},
        {"kernel", xlb::bench::kernel_release()},
        {"cpu", xlb::bench::cpu_model()}};
    std::filesystem::path path(out_path);
    if (path.has_parent_path()) std::filesystem::create_directories(path.parent_path());
    std::ofstream(path) << out.dump(2) << "\n";
    fmt::print("wrote {}\n", out_path);
    return 0;
}
