// SPDX-License-Identifier: Apache-2.0
// Keeps BIRD announcing what the decisions say: renders the routes file,
// replaces it atomically when its content changes, then asks BIRD to
// `configure`. BIRD reads the same file when it starts, so either process can
// restart on its own:
//  - BIRD restarted: it announces what the file says; nothing to do here.
//  - xlbd restarted: the same decisions give the same bytes, so the file is
//    not rewritten and BIRD is not reconfigured. On its first update the
//    Announcer only checks (read-only) that BIRD runs what the file says, in
//    case the previous agent died between the write and the configure.
//  - BIRD unreachable: the file is written anyway (BIRD reads it when it
//    comes back), the status says "BGP daemon unreachable" since when and why,
//    and the configure is tried again on a later update.
// Until HostInput::startup_complete, routes already in the file are kept:
// a restarting agent whose tables are not yet published must not withdraw.
//
// The agent calls update() from one thread, on every change of its VIPs and
// periodically (every second or so). update() blocks on BIRD for at most
// about 2 x `timeout`.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "xlb/announce/bird_client.h"
#include "xlb/announce/policy.h"
#include "xlb/announce/render.h"

namespace xlb::announce {

struct AnnouncerOptions {
    // BIRD includes it (docs/bird-notes.md: under /run, so that a reboot,
    // which also empties the data plane, forgets every announcement).
    std::string routes_file = "/run/xlb/bird/xlb.conf";
    std::string control_socket = "/run/bird/bird.ctl";
    RenderOptions render;
    std::chrono::milliseconds timeout{2000};  // connect, and each command
    // After a failed configure, the next is tried no sooner than this.
    Clock::duration retry_interval = std::chrono::seconds(2);
    // With nothing to change, BIRD is asked how it is this often (status:
    // reachable, our protocols up).
    Clock::duration check_interval = std::chrono::seconds(10);
};

// What is wrong, as a stable word for metrics and the API.
enum class Problem {
    kNone,
    kFile,         // the routes file could not be read or written
    kUnreachable,  // "BGP daemon unreachable": no connection, or BIRD stopped answering
    kRefused,      // BIRD refused its configuration (8002, with BIRD's text)
    kNotIncluded,  // BIRD accepted it but runs neither of our protocols
};
// "none", "file", "daemon_unreachable", "config_refused", "not_included"
std::string_view to_string(Problem);

// What the routers hear of a VIP from this host, as far as the agent knows.
enum class RouteState {
    kAnnounced,
    kWithdrawn,
    // BIRD does not answer (killed, stopped, wedged) or was never reached:
    // its sessions and routes may be gone or may still hold an older file.
    kUnknown,
};
// "announced", "withdrawn", "unknown"
std::string_view to_string(RouteState);

struct AnnouncerStatus {
    // The last contact with BIRD succeeded. False before the first contact.
    bool daemon_reachable = false;
    std::optional<TimePoint> unreachable_since;  // set while unreachable
    std::string daemon_version;                  // "2.0.12"
    // Empty when the last step succeeded; else what failed: the file, BIRD
    // unreachable (with errno text and socket), or BIRD's refusal.
    Problem problem = Problem::kNone;
    std::string last_error;
    std::optional<TimePoint> last_error_at;
    std::optional<TimePoint> last_write;      // of the routes file, by this process
    std::optional<TimePoint> last_configure;  // last `configure` BIRD accepted
    // The file changed and BIRD has not accepted a configure since.
    bool configure_pending = false;
    // BIRD runs both static protocols of the file (false: not checked yet,
    // or bird.conf does not include the file).
    bool protocols_loaded = false;
    std::vector<bird::ProtocolInfo> protocols;  // ours, as BIRD last showed them
    // Start-up: routes already in the file are kept until every VIP's
    // table was published.
    bool holding_withdrawals = false;
    std::vector<net::IpAddress> routes;  // in the file, sorted
    std::vector<VipDecision> vips;       // sorted by key

    std::uint64_t writes_total = 0;
    std::uint64_t configures_total = 0;          // accepted by BIRD
    std::uint64_t configure_failures_total = 0;  // unreachable or refused

    // The decision says what the agent wants; only a BIRD that answers says
    // it is what the routers hear. Unknown until BIRD answers (again).
    RouteState route_state(const VipDecision& decision) const {
        if (!daemon_reachable) return RouteState::kUnknown;
        return decision.announced ? RouteState::kAnnounced : RouteState::kWithdrawn;
    }
};

class Announcer {
public:
    // Validate options.render first (validate()): a name BIRD cannot parse
    // makes the included file stop BIRD from (re)starting.
    explicit Announcer(AnnouncerOptions options);

    const AnnouncerStatus& update(const HostInput& input, TimePoint now);
    const AnnouncerStatus& status() const { return status_; }
    const AnnouncerOptions& options() const { return options_; }

private:
    void configure(bird::Client& client, TimePoint now);
    void check(bird::Client& client, TimePoint now, bool verify_routes);
    void lost(const bird::Client& client, Error e, TimePoint now);
    // Connects, recording reachability; nullopt when BIRD is unreachable.
    std::optional<bird::Client> connect(TimePoint now);
    void record_error(Problem problem, Error e, TimePoint now);
    void clear_error(Problem problem);

    AnnouncerOptions options_;
    DecisionTable table_;
    AnnouncerStatus status_;
    bool first_update_ = true;
    TimePoint next_configure_{};
    TimePoint next_check_{};
};

}  // namespace xlb::announce
