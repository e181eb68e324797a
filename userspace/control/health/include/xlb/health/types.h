// SPDX-License-Identifier: Apache-2.0
// Vocabulary shared by the probers (engine.h) and the state machines
// (backend_health.h, tracker.h): what is probed, what a probe found.
#pragma once

#include <chrono>
#include <compare>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "xlb/config/model.h"
#include "xlb/net/address.h"

namespace xlb::health {

using Clock = std::chrono::steady_clock;  // CLOCK_MONOTONIC
using TimePoint = Clock::time_point;
// The wall clock: only to tell operators when something happened (the
// health history); schedules and verdicts never read it.
using WallClock = std::chrono::system_clock;
using WallTime = WallClock::time_point;

// A backend's health as the reconciler sees it (control::Health has the same
// three values; the agent maps one to the other).
enum class Verdict : std::uint8_t { kUnknown, kHealthy, kUnhealthy };
const char* to_string(Verdict);

// Why a probe failed. kNone is a success. The names (to_string) are stable:
// they label metrics and appear in the API.
enum class Failure : std::uint8_t {
    kNone,           // "none": the probe passed
    kRefused,        // "refused": TCP reset to the SYN, or ICMP port unreachable (UDP)
    kTimeout,        // "timeout": no complete answer within the check's timeout
    kReset,          // "reset": the connection was reset before a complete response
    kUnreachable,    // "unreachable": no route, host or network unreachable, filtered
    kClosed,         // "closed": the peer closed before a complete response
    kBadResponse,    // "bad_response": not HTTP/1.x, or malformed
    kStatus,         // "status": an HTTP status outside expected_statuses
    kBodyMismatch,   // "body_mismatch": the body lacks body_contains
    kReplyMismatch,  // "reply_mismatch": the UDP reply lacks udp_expect
    kLocal,          // "local": the agent could not probe (out of file descriptors, no
                     // source address, ...); says nothing about the backend
    kTls,            // "tls": the TLS handshake or session failed (https): a certificate
                     // refused, no common protocol, not TLS
};
inline constexpr std::size_t kFailureKinds = 12;
const char* to_string(Failure);

// What a state machine belongs to: one backend of one VIP. The same server
// behind two VIPs is two targets, probed and judged separately (their checks
// may differ).
struct TargetKey {
    std::string vip;         // config::VipSpec::key(), e.g. "198.51.100.10:80/tcp"
    net::IpAddress backend;  // the backend's own address

    std::string to_string() const;  // "198.51.100.10:80/tcp 10.0.0.1"
    auto operator<=>(const TargetKey&) const = default;
};

// One probe's outcome, as the engine reports it.
struct ProbeResult {
    TargetKey key;
    // A shared probe (targets.h group_probes): every target it serves, key
    // (the first) included; null when it serves key alone. targets() is the
    // one list either way.
    std::shared_ptr<const std::vector<TargetKey>> shared_targets;
    std::span<const TargetKey> targets() const {
        if (shared_targets) return {shared_targets->data(), shared_targets->size()};
        return {&key, 1};
    }
    config::HealthCheckType type = config::HealthCheckType::kTcp;
    std::uint16_t port = 0;
    Failure failure = Failure::kNone;
    // For logs and the API: "connected", "status 200", "connection refused",
    // "timeout after 1s (waiting for the response headers)", ...
    std::string detail;
    std::uint16_t http_status = 0;  // 0: no HTTP status line was read
    // HTTP 429, or 503 with Retry-After: scales the weight down for a while
    // (rate-limit bias). A 429 is a success (failure == kNone); a 503 is not.
    bool rate_limited = false;
    std::optional<std::chrono::seconds> retry_after;  // Retry-After, made relative
    TimePoint scheduled{};                            // when the probe was due
    TimePoint started{};                              // when its first packet was sent
    TimePoint finished{};
    // `finished` by the wall clock: when a verdict change this result causes
    // happened, as the health history shows it.
    WallTime finished_wall{};

    bool ok() const { return failure == Failure::kNone; }
    Clock::duration latency() const { return finished - started; }
    Clock::duration lateness() const { return started - scheduled; }
};

}  // namespace xlb::health
