// SPDX-License-Identifier: Apache-2.0
// Internal to xlb_api: the call into the control thread, JSON views of the
// reconciler's status, and small HTTP helpers shared by the API and metrics
// servers.
#pragma once

#include <httplib.h>

#include <chrono>
#include <expected>
#include <functional>
#include <future>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "xlb/api/data_plane_view.h"
#include "xlb/api/services.h"
#include "xlb/api/status_json.h"
#include "xlb/control/loop.h"
#include "xlb/control/reconciler.h"

namespace xlb::api::detail {

using json = nlohmann::json;

struct HttpError {
    int status = 400;
    std::string message;
};

// Runs fn on the control thread; the value arrives after the publish that
// follows. A loop that does not answer in time (or is stopping) gives 503.
template <typename R>
std::expected<R, HttpError> on_control(control::ControlLoop& loop,
                                       std::chrono::milliseconds timeout,
                                       std::function<R(control::Reconciler&)> fn) {
    std::future<R> future = loop.call<R>(std::move(fn));
    if (future.wait_for(timeout) != std::future_status::ready)
        return std::unexpected(HttpError{503, "the control thread did not answer within " +
                                                  std::to_string(timeout.count()) +
                                                  " ms (is the agent wedged? see /livez)"});
    try {
        return future.get();
    } catch (const std::future_error&) {
        return std::unexpected(HttpError{503, "the agent is shutting down"});
    }
}

using api::hex64;

// Per-backend and per-VIP counters for a status snapshot. Missing entries:
// the read failed (the first error is returned, for logs and bodies).
struct Counters {
    std::map<std::uint32_t, xlb_vip_stats> vips;                // by VIP id
    std::map<std::uint32_t, std::uint64_t> vip_hints;           // by VIP id: second-chance hints
    std::map<std::uint32_t, xlb_vip_drops> vip_drops;           // by VIP id: drops by reason
    std::map<std::uint32_t, xlb_vip_cookie_stats> vip_cookies;  // by VIP id: SYN cookies
    std::map<std::uint32_t, xlb_vip_quic_stats> vip_quic;       // by VIP id: QUIC VIPs only
    std::map<std::uint32_t, xlb_backend_stats> backends;        // by backend id
    std::optional<Error> error;                                 // the first read that failed
    // Valid entries by (VIP id, backend id); nullopt: no connection table,
    // or its scan failed (add_connections).
    std::optional<conntrack::ConnectionsByBackend> connections;
    std::map<std::uint32_t, double> new_flows_per_s;  // by backend id (the sweeper's)
};
Counters read_counters(const DataPlaneView& view, const std::vector<control::VipStatus>& vips);
// Adds the connections per backend and the new-flow rates to `counters`.
void add_connections(const Services& services, Counters& counters);

// Health-checker details of backends, by (VIP key, backend address). Taken on
// the control thread (Services::health), with the status they go with.
using HealthDetails = std::map<std::pair<std::string, net::IpAddress>, BackendHealthInfo>;
HealthDetails collect_health(const Services& services, const std::vector<control::VipStatus>& vips);

// A backend's health when its VIP has no health check (it is never probed).
inline constexpr const char* kUnchecked = "unchecked";

json vip_summary_json(const control::VipStatus& vip);
json backend_json(const control::VipStatus& vip, const control::BackendStatus& backend,
                  const Counters& counters, const HealthDetails& health = {});
json vip_detail_json(const control::VipStatus& vip, const Counters& counters,
                     const HealthDetails& health = {});
json table_json(const control::VipStatus& vip);
// GET /v1/backend/history: one backend's current health and its last verdict
// changes, oldest first; `history` nullopt: the backend is not checked.
// `vip_checked`: the VIP has a health check (its backends are otherwise
// "unchecked").
json backend_history_json(const std::string& vip_key, const control::BackendStatus& backend,
                          bool vip_checked,
                          const std::optional<std::vector<health::Transition>>& history,
                          std::uint32_t capacity);
json vip_stats_json(const control::VipStatus& vip, const Counters& counters);

// SYN cookies (docs/syn-cookies.md). A VIP's state in words: its effective
// mode, with `auto` told apart by the host's flood state (nullopt: no
// detector runs, so auto never answers).
inline constexpr const char* kCookiesOff = "off";
inline constexpr const char* kCookiesAutoIdle = "auto idle";
inline constexpr const char* kCookiesAnswering = "answering";
inline constexpr const char* kCookiesAlways = "always";
const char* syn_cookie_state(config::SynCookies mode, std::optional<conntrack::SynFloodState> host);
// The "syn_cookies" object of a VIP in /v1/status and /v1/stats: mode, state,
// reason (why off, null otherwise) and the counters (null: unread).
// Whether a VIP routes QUIC by connection ID (the flag its entry gets).
bool routes_quic(const config::VipSpec& vip);
// Reads the QUIC counters of the VIPs that route QUIC into `counters`.
void read_quic_counters(const DataPlaneView& view, const std::vector<control::VipStatus>& vips,
                        Counters& counters);
// A VIP's "quic" in GET /v1/status and /v1/stats: null for a VIP without
// QUIC routing; else packets routed by CID and fallbacks by reason (null:
// not readable).
json quic_json(const control::VipStatus& vip, const Counters& counters);
// What the data path does with a short-header packet of a QUIC VIP whose
// connection ID starts with `cid`: the body's "quic" ({"cid", "config_id",
// "server_id", "fallback"}) and, when routed by it, the backend's id and
// address. Encrypted configs' keys are read from their files.
struct QuicLookup {
    json body;
    std::optional<std::uint32_t> backend_id;  // set: routed by the CID
    std::string backend;
};
QuicLookup quic_lookup(const control::VipStatus& vip, std::span<const std::uint8_t> cid);
json syn_cookies_json(const control::VipStatus& vip, const config::Settings& settings,
                      std::optional<conntrack::SynFloodState> host, const Counters& counters);
// The host's "syn_flood" object, and null without a detector.
json syn_flood_json(const conntrack::SynFloodStatus& status,
                    const config::SynFloodSettings& settings);
std::optional<conntrack::SynFloodState> host_syn_flood(const Services& services);
json host_syn_flood_json(const Services& services, const config::Settings& settings);

// The connection table (GET /v1/conntrack/count, GET /v1/conntrack, POST
// /v1/conntrack/flush, the "conntrack" object of GET /v1/status):
// docs/api.md.
json conntrack_count_json(const conntrack::CountReport& report,
                          const std::optional<config::Duration>& active_within);
json conntrack_list_json(const conntrack::ListReport& report);
json conntrack_flush_json(const conntrack::FlushReport& report);
json conntrack_status_json(const conntrack::Status& status);

// Responses.
void send_json(httplib::Response& res, int status, const json& body);
void send_error(httplib::Response& res, int status, const std::string& message);
inline void send_error(httplib::Response& res, const HttpError& e) {
    send_error(res, e.status, e.message);
}

// Method dispatch with 404 for unknown paths and 405 (with Allow) for known
// paths and other methods. Catches exceptions as 500 JSON.
class Router {
public:
    using Handler = std::function<void(const httplib::Request&, httplib::Response&)>;
    void add(const std::string& method, const std::string& path, Handler handler);
    void install(httplib::Server& server) const;

private:
    void dispatch(const httplib::Request& req, httplib::Response& res) const;
    std::map<std::string, std::map<std::string, Handler>> routes_;  // path -> method -> handler
};

// GET /livez and GET /readyz, plain text.
void add_probes(Router& router, const Services& services);

}  // namespace xlb::api::detail
