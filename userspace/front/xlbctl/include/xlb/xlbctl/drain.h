// SPDX-License-Identifier: Apache-2.0
// backend drain --wait: polling the drained backend's active connections
// until none are left or the time is up. The loop is a pure function of what
// it is given (the fetch, the clock, the sleep), so that tests run it on a
// fake clock against scripted counts.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>

#include "xlb/error.h"
#include "xlb/net/address.h"

namespace xlb::xlbctl {

// The entries of `backend` under `vip` in a reply of GET /v1/conntrack/count;
// 0 when the reply lists neither (no entry matched). Throws json::exception
// when the reply lacks the fields it needs.
std::uint64_t backend_entries(const nlohmann::json& count_reply, const std::string& vip,
                              const net::IpAddress& backend);

struct DrainWaitIo {
    // The backend's active connections now, or why they could not be had.
    std::function<Result<std::uint64_t>()> fetch;
    // Called with the first count and with each one that differs from the
    // previous, and the time since the wait began.
    std::function<void(std::uint64_t count, std::chrono::milliseconds elapsed)> report;
    std::function<void(std::chrono::milliseconds)> sleep;
    std::function<std::chrono::steady_clock::time_point()> now;
    std::function<bool()> interrupted;  // Ctrl-C: stop waiting
};

struct DrainWaitResult {
    enum class Outcome { kDrained, kTimedOut, kFailed, kInterrupted };
    Outcome outcome = Outcome::kFailed;
    std::uint64_t remaining = 0;  // the last count seen
    std::chrono::milliseconds waited{0};
    Error error;  // kFailed: fetch's error
};

// Fetches, reports a change, and returns kDrained at 0; otherwise sleeps
// `interval` (or what is left of `timeout`) and fetches again. The last fetch
// is made at the deadline, so a backend that empties just in time counts as
// drained.
DrainWaitResult wait_until_drained(const DrainWaitIo& io, std::chrono::milliseconds timeout,
                                   std::chrono::milliseconds interval);

}  // namespace xlb::xlbctl
