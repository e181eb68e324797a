// SPDX-License-Identifier: Apache-2.0
#include "bgp_json.h"

#include "reload_json.h"

namespace xlb::api::detail {

using json = nlohmann::json;

namespace {

json time_or_null(const std::optional<std::chrono::system_clock::time_point>& at) {
    return at ? json(utc_text(*at)) : json(nullptr);
}

}  // namespace

json host_json(const HostState& host) {
    return {{"drained", host.drained}, {"since", time_or_null(host.since)}};
}

json bgp_json(const HostState& host, const std::optional<BgpInfo>& bgp) {
    json out{{"enabled", bgp.has_value()}, {"host", host_json(host)}};
    if (!bgp) return out;
    const announce::AnnouncerStatus& s = bgp->status;
    // The announcer's text starts with "BGP daemon unreachable" for that
    // problem already.
    const std::string& error = s.last_error;
    json protocols = json::array();
    for (const auto& p : s.protocols)
        protocols.push_back({{"name", p.name}, {"state", p.state}, {"info", p.info}});
    json routes = json::array();
    for (const auto& r : s.routes) routes.push_back(r.to_string() + (r.is_v4() ? "/32" : "/128"));
    out["routes_file"] = bgp->settings.routes_file;
    out["protocol"] = bgp->settings.protocol;
    out["daemon"] = {
        {"control_socket", bgp->settings.control_socket},
        {"reachable", s.daemon_reachable},
        {"unreachable_since", time_or_null(s.unreachable_since)},
        {"version", s.daemon_version},
        {"problem", std::string(announce::to_string(s.problem))},
        {"error", s.problem == announce::Problem::kNone ? json(nullptr) : json(error)},
        {"last_error_at", time_or_null(s.last_error_at)},
        {"last_configure", time_or_null(s.last_configure)},
        {"configure_pending", s.configure_pending},
        {"protocols_loaded", s.protocols_loaded},
        {"protocols", std::move(protocols)},
    };
    out["holding_withdrawals"] = s.holding_withdrawals;
    out["routes"] = std::move(routes);
    out["writes_total"] = s.writes_total;
    out["configures_total"] = s.configures_total;
    out["configure_failures_total"] = s.configure_failures_total;
    return out;
}

json announcement_json(const std::optional<BgpInfo>& bgp, const std::string& vip_key) {
    if (!bgp) return nullptr;
    for (const announce::VipDecision& d : bgp->status.vips) {
        if (d.key != vip_key) continue;
        return {{"policy", std::string(announce::to_string(d.policy))},
                {"state", std::string(announce::to_string(bgp->status.route_state(d)))},
                {"reason", std::string(announce::to_string(d.reason))},
                {"detail", d.detail},
                {"since", utc_text(d.since)}};
    }
    return nullptr;
}

}  // namespace xlb::api::detail
