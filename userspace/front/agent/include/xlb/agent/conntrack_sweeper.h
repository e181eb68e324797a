// SPDX-License-Identifier: Apache-2.0
// The connection table's housekeeping on a thread of its own, so that a scan
// of a million entries never holds up the control loop: every second it reads
// the per-CPU insert budgets (xlb_ct_cpu) and logs floods starting and
// ending, and each backend's new-flow counter for its rate; every sweep
// interval it expires idle entries (batched deletes) and counts the table.
// What it learns goes to a StatusBoard for the API and /metrics.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "xlb/abi.h"
#include "xlb/conntrack/status.h"
#include "xlb/conntrack/table.h"
#include "xlb/error.h"

namespace xlb::agent {

class ConntrackSweeper {
public:
    struct Inputs {
        const conntrack::Table& table;
        // The per-CPU budget state (LbProgram::ct_cpu()), one value per CPU.
        std::function<Result<std::vector<xlb_ct_cpu>>()> read_cpus;
        // The VIPs the entries are judged against (from the control thread).
        std::function<Result<std::vector<conntrack::VipInfo>>()> vips;
        std::shared_ptr<conntrack::StatusBoard> status;
        // When this agent started ticking the program's clock (ct_clock.h):
        // nothing expires before the clock has run through its timeout.
        std::chrono::steady_clock::time_point clock_started = std::chrono::steady_clock::now();
        // Each backend's new-flow counter by id (struct xlb_backend_stats),
        // read every second for the rates in the status board; empty: none.
        std::function<Result<std::map<std::uint32_t, std::uint64_t>>()> read_backend_new_flows;
    };

    ConntrackSweeper(Inputs inputs, std::chrono::milliseconds interval);
    ~ConntrackSweeper();
    ConntrackSweeper(const ConntrackSweeper&) = delete;
    ConntrackSweeper& operator=(const ConntrackSweeper&) = delete;

    void start();
    void stop();
    // Applies from the next wait on (a reload's conntrack.sweep_interval).
    void set_interval(std::chrono::milliseconds interval);

    // One flood check and, when `sweep`, one sweep; what the thread does.
    // Public for tests.
    void check_floods();
    void sweep_once();
    void sample_backends();

private:
    void main();

    Inputs in_;
    std::atomic<std::chrono::milliseconds::rep> interval_ms_;
    conntrack::FloodTracker floods_;
    conntrack::RateMeter new_flow_rates_;
    std::mutex mu_;
    std::condition_variable cv_;
    bool stopping_ = false;
    std::thread thread_;
};

// "connection-table flood started on CPU 3 (120 inserts skipped)".
std::string describe_flood(const conntrack::FloodChange& change);

}  // namespace xlb::agent
