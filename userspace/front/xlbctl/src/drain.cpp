// SPDX-License-Identifier: Apache-2.0
#include "xlb/xlbctl/drain.h"

#include <algorithm>
#include <optional>

namespace xlb::xlbctl {

std::uint64_t backend_entries(const nlohmann::json& reply, const std::string& vip,
                              const net::IpAddress& backend) {
    std::uint64_t entries = 0;
    for (const nlohmann::json& v : reply.at("vips")) {
        if (v.at("vip").get<std::string>() != vip) continue;
        for (const nlohmann::json& b : v.at("backends")) {
            // Compared as addresses: the agent's spelling of an IPv6 address
            // need not be the operator's.
            const nlohmann::json& address = b.at("backend");
            if (!address.is_string()) continue;
            auto parsed = net::IpAddress::parse(address.get<std::string>());
            if (parsed && *parsed == backend) entries += b.at("entries").get<std::uint64_t>();
        }
    }
    return entries;
}

DrainWaitResult wait_until_drained(const DrainWaitIo& io, std::chrono::milliseconds timeout,
                                   std::chrono::milliseconds interval) {
    using std::chrono::duration_cast;
    using std::chrono::milliseconds;
    const auto start = io.now();
    std::optional<std::uint64_t> last;
    DrainWaitResult result;
    while (true) {
        auto count = io.fetch();
        result.waited = duration_cast<milliseconds>(io.now() - start);
        if (!count) {
            result.outcome = DrainWaitResult::Outcome::kFailed;
            result.error = count.error();
            return result;
        }
        result.remaining = *count;
        if (!last || *last != *count) io.report(*count, result.waited);
        last = *count;
        if (*count == 0) {
            result.outcome = DrainWaitResult::Outcome::kDrained;
            return result;
        }
        if (result.waited >= timeout) {
            result.outcome = DrainWaitResult::Outcome::kTimedOut;
            return result;
        }
        if (io.interrupted && io.interrupted()) {
            result.outcome = DrainWaitResult::Outcome::kInterrupted;
            return result;
        }
        io.sleep(std::min(interval, timeout - result.waited));
        if (io.interrupted && io.interrupted()) {
            result.outcome = DrainWaitResult::Outcome::kInterrupted;
            return result;
        }
    }
}

}  // namespace xlb::xlbctl
