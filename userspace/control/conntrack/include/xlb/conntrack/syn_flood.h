// SPDX-License-Identifier: Apache-2.0
// Whether the host is under a SYN flood, for VIPs with `syn_cookies: auto`
// (docs/syn-cookies.md): pure, fed by the agent with the data path's per-CPU
// SYN counters (abi.h, struct xlb_vip_cookie_stats.syns) and a monotonic
// time, so that its thresholds and holds are tested with a fake clock.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <mutex>
#include <optional>
#include <vector>

#include "xlb/abi.h"
#include "xlb/config/model.h"
#include "xlb/conntrack/status.h"

namespace xlb::conntrack {

// The values of the program's `xlb_syn_flood` (abi.h, XLB_SYN_FLOOD_*).
enum class SynFloodState : std::uint32_t {
    kCalm = XLB_SYN_FLOOD_CALM,
    kAnswering = XLB_SYN_FLOOD_ANSWERING,
    kRecent = XLB_SYN_FLOOD_RECENT,
};
// "calm", "answering", "recent": the API's and the metrics' words.
const char* to_string(SynFloodState state);

// Per VIP id: its cumulative SYN count, one value per CPU.
using SynCounts = std::map<std::uint32_t, std::vector<std::uint64_t>>;

struct SynFloodChange {
    SynFloodState from = SynFloodState::kCalm;
    SynFloodState to = SynFloodState::kCalm;
    // To answering: the fastest CPU and its rate. Out of answering: the
    // flood's peak (its CPU and rate) and how long it lasted.
    unsigned cpu = 0;
    double rate = 0;  // SYNs per second
    std::chrono::nanoseconds lasted{};
};

class SynFloodDetector {
public:
    // recent: how long the state stays RECENT after a flood (abi.h,
    // XLB_SYN_FLOOD_RECENT_MS: cookies sent may still come back).
    explicit SynFloodDetector(
        config::SynFloodSettings settings = {},
        std::chrono::nanoseconds recent = std::chrono::milliseconds(XLB_SYN_FLOOD_RECENT_MS));

    // A reload's settings: judged from the next update on.
    void set_settings(const config::SynFloodSettings& settings) { settings_ = settings; }
    const config::SynFloodSettings& settings() const { return settings_; }

    // One sample taken at `now_ns` (monotonic). Rates come from the previous
    // sample: the first gives none. A VIP's counter is compared only with
    // its own previous value, so that a VIP that appears (its older count
    // included) or whose counter went back (a new map, a reused id) adds
    // nothing rather than a burst that reads as a flood.
    std::optional<SynFloodChange> update(std::uint64_t now_ns, const SynCounts& syns);

    SynFloodState state() const { return state_; }
    // SYNs per second per CPU over the last interval (empty before two samples).
    const std::vector<double>& rates() const { return rates_; }
    // Of the flood going on or the last one: its highest rate and CPU.
    double peak_rate() const { return peak_rate_; }
    unsigned peak_cpu() const { return peak_cpu_; }
    // Floods started (CALM or RECENT to ANSWERING).
    std::uint64_t floods() const { return floods_; }

private:
    config::SynFloodSettings settings_;
    std::chrono::nanoseconds recent_;
    SynFloodState state_ = SynFloodState::kCalm;
    std::optional<std::uint64_t> last_ns_;
    SynCounts last_;
    std::vector<double> rates_;
    std::uint64_t started_ns_ = 0;                 // of the flood going on
    std::optional<std::uint64_t> below_since_ns_;  // every CPU below end_rate since
    std::uint64_t ended_ns_ = 0;                   // when it turned RECENT
    double peak_rate_ = 0;
    unsigned peak_cpu_ = 0;
    std::uint64_t floods_ = 0;
};

// What the agent last learnt, for GET /v1/status, /v1/stats and /metrics:
// written by the detector's thread, read by the servers', whole under a lock.
struct SynFloodStatus {
    SynFloodState state = SynFloodState::kCalm;
    std::optional<std::chrono::system_clock::time_point> since;  // of the state; nullopt: start
    std::vector<double> rate_per_cpu;
    double peak_rate = 0;  // of the flood going on or the last one
    unsigned peak_cpu = 0;
    std::uint64_t floods = 0;
};

using SynFloodBoard = Board<SynFloodStatus>;

}  // namespace xlb::conntrack
