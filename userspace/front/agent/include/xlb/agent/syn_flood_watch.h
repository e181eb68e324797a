// SPDX-License-Identifier: Apache-2.0
// The SYN flood detector (xlb/conntrack/syn_flood.h) on a thread of its own:
// every kSample it reads the per-CPU SYN counters of the VIPs with a cookie
// flag, writes each change of state into the program (`xlb_syn_flood`),
// logs a flood's start and end and keeps a StatusBoard-like view for the API
// and /metrics. The agent only wires it: what it reads and writes are
// functions.
#pragma once

#include <chrono>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "xlb/config/model.h"
#include "xlb/conntrack/syn_flood.h"
#include "xlb/error.h"

namespace xlb::agent {

class SynFloodWatch {
public:
    // Often enough that `auto` answers within a second of a flood's start,
    // rarely enough that reading a few VIPs' counters costs nothing.
    static constexpr std::chrono::milliseconds kSample{100};

    struct Inputs {
        // Per VIP id with a cookie flag: its SYNs per CPU.
        std::function<Result<conntrack::SynCounts>()> read_syns;
        // Writes XLB_SYN_FLOOD_* into the program.
        std::function<void(std::uint32_t)> write_state;
        std::shared_ptr<conntrack::SynFloodBoard> status;
    };

    SynFloodWatch(Inputs inputs, const config::SynFloodSettings& settings);
    ~SynFloodWatch();
    SynFloodWatch(const SynFloodWatch&) = delete;
    SynFloodWatch& operator=(const SynFloodWatch&) = delete;

    void start();
    void stop();
    // A reload's syn_flood settings, from the next sample on; any thread.
    void set_settings(const config::SynFloodSettings& settings);
    // One sample at `now_ns` (monotonic); what the thread does. Public for tests.
    void sample(std::uint64_t now_ns);

private:
    void main();

    Inputs in_;
    std::mutex mu_;  // the detector (sample, set_settings) and stopping_
    conntrack::SynFloodDetector detector_;
    bool read_failing_ = false;  // the sampling thread's
    std::condition_variable cv_;
    bool stopping_ = false;
    std::thread thread_;
};

// "SYN flood started: 45000 SYNs/s on CPU 3 (start_rate 20000/s); VIPs with
// syn_cookies auto answer SYNs with cookies", and the lines of its end.
std::string describe_syn_flood(const conntrack::SynFloodChange& change,
                               const config::SynFloodSettings& settings);

}  // namespace xlb::agent
