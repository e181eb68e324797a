// SPDX-License-Identifier: Apache-2.0
// Which VIPs this host announces to the routers, and why: pure decisions, no
// I/O, time passed in. The agent fills HostInput from the reconciler's per-VIP
// state on every change and tick; the Announcer (announcer.h) turns the
// decisions into BIRD's routes.
//
// Routes are per address while VIPs are {address, port, protocol}: an address
// is announced when at least one of its VIPs is (routes_of()). A VIP with
// policy `never` therefore does not stop another VIP on the same address from
// announcing it.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "xlb/net/address.h"

namespace xlb::announce {

// Wall clock: "since" is shown to operators and survives nothing but the
// process, so steady time would buy nothing.
using Clock = std::chrono::system_clock;
using TimePoint = Clock::time_point;

enum class Policy {
    kWhenServing,  // default: announced while the VIP can take new flows here
    kAlways,       // announced unless the host is drained
    kNever,        // never announced by xlbd
};
// "when_serving", "always", "never"
std::string_view to_string(Policy);
std::optional<Policy> parse_policy(std::string_view);

// Stable machine words: they appear in the API, metrics labels and logs.
enum class Reason {
    kServing,           // announced: table live with a backend taking new flows
    kPolicyAlways,      // announced: policy always
    kNoServingBackend,  // withdrawn: the live table has no backend for new flows
    kNotPublished,      // withdrawn: no table of this VIP is live yet
    kHostDrained,       // withdrawn: the host is drained (beats every policy)
    kPolicyNever,       // withdrawn: policy never
    kBehindFleet,       // withdrawn: the host's desired state is behind its fleet's
};
// "serving", "policy_always", "no_serving_backend", "not_published",
// "host_drained", "policy_never", "behind_fleet"
std::string_view to_string(Reason);

// One VIP as the reconciler sees it (control::VipStatus).
struct VipInput {
    std::string key;         // "198.51.100.10:80/tcp" (config::VipKey::to_string())
    net::IpAddress address;  // what is announced (/32 or /128)
    Policy policy = Policy::kWhenServing;
    // A table of this VIP is live in the data plane (epoch != 0). Not
    // VipStatus::published, which is false while a newer table is on its way:
    // a routine weight change must not withdraw the VIP.
    bool table_live = false;
    // Backends in the live table that take new flows (in_table with an
    // effective weight > 0). In panic every active backend is in the
    // table, so panic counts as serving; with panic_threshold 0 and nothing
    // healthy the table is empty and this is 0.
    std::uint32_t serving_backends = 0;
    // For the human text only.
    std::uint32_t configured_backends = 0;
    bool in_panic = false;
};

struct HostInput {
    bool drained = false;  // xlbctl host drain: withdraw everything
    // A fleet's host (announce: when_current) whose applied desired revision
    // has been behind another live host's for longer than fleet.max_lag:
    // why, and every VIP is withdrawn until it catches up. Empty: current.
    std::string behind;
    // Every VIP's first table has been published since the agent started
    // (or the start-up gave up waiting). Until then the Announcer only adds
    // routes, so a restarting agent never withdraws what it will announce
    // again a moment later.
    bool startup_complete = false;
    std::vector<VipInput> vips;
};

struct Verdict {
    bool announced = false;
    Reason reason = Reason::kNotPublished;
    std::string detail;  // human text: "3 of 4 backends take new flows"
};

// The decision for one VIP, from its input alone.
Verdict decide(const VipInput& vip, bool host_drained, const std::string& behind = {});

struct VipDecision {
    std::string key;
    net::IpAddress address;
    Policy policy = Policy::kWhenServing;
    bool announced = false;
    Reason reason = Reason::kNotPublished;
    std::string detail;
    TimePoint since{};  // last change of `announced` or `reason`

    bool operator==(const VipDecision&) const = default;
};

// The decisions of every VIP, remembering since when each holds. A VIP
// missing from an update (deleted) is forgotten: its address goes unless
// another VIP still wants it.
class DecisionTable {
public:
    // Sorted by key. A VIP seen for the first time gets `since = now`; one
    // whose `announced` and `reason` are unchanged keeps its `since` (the
    // detail text may change without resetting it).
    const std::vector<VipDecision>& update(const HostInput& input, TimePoint now);
    const std::vector<VipDecision>& decisions() const { return decisions_; }

private:
    std::vector<VipDecision> decisions_;
};

// The addresses to announce: those of the announced VIPs, sorted (IPv4 first),
// each once.
std::vector<net::IpAddress> routes_of(const std::vector<VipDecision>& decisions);

}  // namespace xlb::announce
