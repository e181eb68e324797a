// SPDX-License-Identifier: Apache-2.0
#include "xlb/agent/conntrack_sweeper.h"

#include <spdlog/spdlog.h>

#include <optional>

#include "xlb/bpf/ct_clock.h"
#include "xlb/kernel/conntrack_bpf_table.h"
#include "xlb/log/event.h"

namespace xlb::agent {

namespace {

// Floods are judged against a one-second window: reading more rarely would
// miss short ones, more often would only cost syscalls.
constexpr std::chrono::seconds kFloodCheck{1};

}  // namespace

std::string describe_flood(const conntrack::FloodChange& c) {
    return "connection-table flood " + std::string(c.started ? "started" : "ended") + " on CPU " +
           std::to_string(c.cpu) + " (" + std::to_string(c.skipped) + " inserts skipped)";
}

ConntrackSweeper::ConntrackSweeper(Inputs inputs, std::chrono::milliseconds interval)
    : in_(std::move(inputs)), interval_ms_(interval.count()) {}

ConntrackSweeper::~ConntrackSweeper() { stop(); }

void ConntrackSweeper::start() {
    thread_ = std::thread([this] { main(); });
}

void ConntrackSweeper::stop() {
    {
        std::lock_guard lock(mu_);
        stopping_ = true;
    }
    cv_.notify_all();
    if (thread_.joinable()) thread_.join();
}

void ConntrackSweeper::set_interval(std::chrono::milliseconds interval) {
    interval_ms_ = interval.count();
    cv_.notify_all();
}

void ConntrackSweeper::check_floods() {
    auto cpus = in_.read_cpus();
    if (!cpus) {
        spdlog::warn("connection table: {}", cpus.error().message());
        return;
    }
    for (const auto& change : floods_.update(*cpus, bpf::monotonic_coarse_ns()))
        log::emit(change.started ? log::Priority::kWarning : log::Priority::kInfo,
                  describe_flood(change),
                  {{log::kEvent, log::kEventFlood},
                   {"FLOOD", change.started ? "start" : "end"},
                   {"CPU", std::to_string(change.cpu)}});
    const auto flooded = floods_.flooded();
    in_.status->update([&](conntrack::Status& s) {
        s.inserts = 0;
        s.skipped_per_cpu.assign(cpus->size(), 0);
        s.flooded_per_cpu.assign(cpus->size(), false);
        for (std::size_t i = 0; i < cpus->size(); ++i) {
            s.inserts += (*cpus)[i].inserts;
            s.skipped_per_cpu[i] = (*cpus)[i].skipped;
        }
        for (unsigned cpu : flooded)
            if (cpu < s.flooded_per_cpu.size()) s.flooded_per_cpu[cpu] = true;
    });
}

void ConntrackSweeper::sweep_once() {
    auto vips = in_.vips();
    if (!vips) {
        spdlog::warn("connection-table sweep skipped: {}", vips.error().message());
        return;
    }
    auto backends = in_.table.backends();
    if (!backends) {
        spdlog::warn("connection-table sweep skipped: {}", backends.error().message());
        return;
    }
    const conntrack::Context context(std::move(*vips), std::move(*backends));
    const auto clock_running = std::chrono::duration_cast<std::chrono::milliseconds>(
        std::chrono::steady_clock::now() - in_.clock_started);
    auto report =
        conntrack::sweep(in_.table, context, static_cast<std::uint64_t>(clock_running.count()));
    if (!report) {
        spdlog::warn("connection-table sweep: {}", report.error().message());
        return;
    }
    if (report->expired > 0)
        spdlog::debug("connection table: {} idle entries expired, {} left, sweep {:.1f} ms",
                      report->expired, report->entries, report->sweep_ms);
    in_.status->update([&](conntrack::Status& s) {
        s.capacity = report->capacity;
        s.entries = report->entries;
        s.expired += report->expired;
        ++s.sweeps;
        s.last_sweep_ms = report->sweep_ms;
    });
}

void ConntrackSweeper::sample_backends() {
    if (!in_.read_backend_new_flows) return;
    auto counts = in_.read_backend_new_flows();
    if (!counts) {
        spdlog::debug("connection table: per-backend new flows unreadable: {}",
                      counts.error().message());
        return;
    }
    auto rates = new_flow_rates_.update(bpf::monotonic_coarse_ns(), *counts);
    in_.status->update([&](conntrack::Status& s) { s.backend_new_flows_per_s = std::move(rates); });
}

void ConntrackSweeper::main() {
    using Clock = std::chrono::steady_clock;
    std::optional<Clock::time_point> last_sweep;
    std::unique_lock lock(mu_);
    while (!stopping_) {
        lock.unlock();
        check_floods();
        sample_backends();
        // From the interval now in force, so a reload's shorter one counts at once.
        auto due = [&] {
            return last_sweep ? *last_sweep + std::chrono::milliseconds(interval_ms_.load())
                              : Clock::now();
        };
        if (Clock::now() >= due()) {
            last_sweep = Clock::now();
            sweep_once();
        }
        lock.lock();
        const auto wake = std::min(Clock::now() + kFloodCheck, due());
        cv_.wait_until(lock, wake, [&] { return stopping_; });
    }
}

}  // namespace xlb::agent
