// SPDX-License-Identifier: Apache-2.0
#include "xlb/bpf/ct_clock.h"

#include <time.h>

#include <utility>

namespace xlb::bpf {

std::uint64_t monotonic_coarse_ns() {
    timespec ts{};
    ::clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
    return static_cast<std::uint64_t>(ts.tv_sec) * 1'000'000'000ULL +
           static_cast<std::uint64_t>(ts.tv_nsec);
}

std::uint32_t ct_clock_now() {
    return static_cast<std::uint32_t>(monotonic_coarse_ns() >> XLB_CT_TIME_SHIFT);
}

CtClockTicker::CtClockTicker(std::function<void(std::uint32_t)> write,
                             std::chrono::milliseconds interval)
    : write_(std::move(write)), interval_(interval) {
    write_(ct_clock_now());
    thread_ = std::thread([this] {
        std::unique_lock lock(mu_);
        while (!cv_.wait_for(lock, interval_, [this] { return stopping_; })) write_(ct_clock_now());
    });
}

CtClockTicker::~CtClockTicker() {
    {
        std::lock_guard lock(mu_);
        stopping_ = true;
    }
    cv_.notify_all();
    thread_.join();
}

}  // namespace xlb::bpf
