// SPDX-License-Identifier: Apache-2.0
// The connection table's clock (include/xlb/abi.h): CLOCK_MONOTONIC_COARSE,
// and in entry-time units (XLB_CT_TIME_SHIFT). The program does not read the
// clock per packet; CtClockTicker writes the time into it every
// XLB_CT_CLOCK_TICK_MS from a thread of its own while it lives.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>

#include "xlb/abi.h"

namespace xlb::bpf {

// CLOCK_MONOTONIC_COARSE in ns: what bpf_ktime_get_coarse_ns() returns.
std::uint64_t monotonic_coarse_ns();
// The same in entry-time units, truncated to 32 bits as entries store it.
std::uint32_t ct_clock_now();

class CtClockTicker {
public:
    // `write` stores a time (ct_clock_now()) into the program; called once
    // here, then every `interval` from the thread.
    explicit CtClockTicker(
        std::function<void(std::uint32_t)> write,
        std::chrono::milliseconds interval = std::chrono::milliseconds(XLB_CT_CLOCK_TICK_MS));
    ~CtClockTicker();
    CtClockTicker(const CtClockTicker&) = delete;
    CtClockTicker& operator=(const CtClockTicker&) = delete;

private:
    std::function<void(std::uint32_t)> write_;
    std::chrono::milliseconds interval_;
    std::mutex mu_;
    std::condition_variable cv_;
    bool stopping_ = false;
    std::thread thread_;
};

}  // namespace xlb::bpf
