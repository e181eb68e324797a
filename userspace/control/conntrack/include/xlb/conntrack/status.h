// SPDX-License-Identifier: Apache-2.0
// What the agent's sweeper last learnt of the connection table, for
// GET /v1/status and /metrics: written by the sweeper's thread, read by the
// servers' threads, whole under a lock.
#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <optional>
#include <vector>

namespace xlb::conntrack {

struct Status {
    std::uint32_t capacity = 0;             // max_entries of the table in use
    std::uint32_t requested_capacity = 0;   // maps.conntrack_entries, rounded up to whole sets
    std::uint32_t insert_rate_per_cpu = 0;  // the budget in xlb_config (0: unlimited)
    std::uint32_t insert_burst = 0;
    std::uint64_t entries = 0;                   // after the last sweep
    std::uint64_t inserts = 0;                   // all CPUs, since the table's counters were made
    std::vector<std::uint64_t> skipped_per_cpu;  // inserts over budget, by CPU
    std::vector<bool> flooded_per_cpu;
    std::uint64_t expired = 0;  // deleted by sweeps since the agent started
    std::uint64_t sweeps = 0;
    std::optional<double> last_sweep_ms;  // nullopt: no sweep yet
    // New flows per second by backend id over the last second (RateMeter);
    // an id missing has no rate yet.
    std::map<std::uint32_t, double> backend_new_flows_per_s;

    std::uint64_t skipped() const {
        std::uint64_t n = 0;
        for (auto s : skipped_per_cpu) n += s;
        return n;
    }
    std::vector<unsigned> flooded_cpus() const {
        std::vector<unsigned> out;
        for (unsigned i = 0; i < flooded_per_cpu.size(); ++i)
            if (flooded_per_cpu[i]) out.push_back(i);
        return out;
    }
};

// A status one thread writes and others read, whole, under a lock.
template <class T>
class Board {
public:
    T get() const {
        std::lock_guard lock(mu_);
        return status_;
    }
    template <class F>
    void update(F&& change) {
        std::lock_guard lock(mu_);
        change(status_);
    }

private:
    mutable std::mutex mu_;
    T status_;
};
using StatusBoard = Board<Status>;

}  // namespace xlb::conntrack
