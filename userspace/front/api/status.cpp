// SPDX-License-Identifier: Apache-2.0
// GET /v1/status: the agent, its VIPs, BGP and the connection table at a
// glance (docs/api.md).
#include "bgp_json.h"
#include "handlers.h"
#include "reload_json.h"
#include "xlb/api/status_json.h"
#include "xlb/config/json.h"
#include "xlb/datapath/setup.h"

namespace xlb::api::detail {

namespace {

json last_reload(const Api& api) {
    if (!api.s.reloads) return nullptr;
    auto last = api.s.reloads->last();
    return last ? last_reload_json(*last) : json(nullptr);
}

}  // namespace

}  // namespace xlb::api::detail

namespace xlb::api {

using detail::hex64;
using json = nlohmann::json;

nlohmann::json vip_status_json(const control::VipStatus& v, std::uint32_t seed,
                               const std::optional<BgpInfo>& bgp, bool fleet_host) {
    json j = detail::vip_summary_json(v);
    j["inputs_checksum"] = hex64(datapath::table_inputs_checksum(v.spec, seed));
    // What inputs_checksum covers, for `xlbctl status --peers` to say what differs.
    json backends = json::array();
    for (const config::BackendSpec& b : v.spec.backends)
        backends.push_back({{"identity", b.identity()},
                            {"address", b.address.to_string()},
                            {"weight", b.weight},
                            {"state", config::to_string(b.state)}});
    j["table_inputs"] = {{"hash_seed", seed},
                         {"ring_size", v.spec.ring_size},
                         {"hash", config::to_string(v.spec.hash)},
                         {"backends", std::move(backends)}};
    j["announcement"] = detail::announcement_json(bgp, v.spec.key());
    // Without a fleet there are no other hosts' votes: every VIP is local.
    j["health_consensus"] =
        config::to_string(fleet_host ? v.spec.consensus(true) : config::HealthConsensus::kLocal);
    j["backends"] = backend_health_json(v);
    return j;
}

nlohmann::json fleet_json(const FleetInfo& f) {
    json disagreements = json::array();
    for (const FleetInfo::Disagreement& d : f.disagreements)
        disagreements.push_back(
            {{"vip", d.vip}, {"backend", d.backend}, {"local", d.local}, {"fleet", d.fleet}});
    json spreads = json::array();
    for (const FleetInfo::Spread& s : f.publish_spreads)
        spreads.push_back(
            {{"vip", s.vip}, {"checksum", s.checksum}, {"seconds", s.seconds}, {"hosts", s.hosts}});
    return json{{"name", f.name},
                {"host", f.host},
                {"health_view",
                 {{"source", f.health_view},
                  {"reason", f.health_view_reason},
                  {"local_fallbacks", f.local_fallbacks},
                  {"disagreements", std::move(disagreements)}}},
                {"behind", f.behind.empty() ? json(nullptr) : json(f.behind)},
                {"publish_spreads", std::move(spreads)},
                {"source", f.source},
                {"store",
                 {{"reachable", f.store_reachable},
                  {"since", f.store_since ? json(detail::utc_text(*f.store_since)) : json(nullptr)},
                  {"error", f.store_error}}},
                {"applied_revision", f.applied_revision},
                {"seen_revision", f.seen_revision},
                {"refused", f.refused_revision == 0 ? json(nullptr)
                                                    : json{{"revision", f.refused_revision},
                                                           {"reason", f.refused_reason},
                                                           {"errors", f.refused_errors}}}};
}

}  // namespace xlb::api

namespace xlb::api::detail {

void status(Api& api, const httplib::Request& req, httplib::Response& res) {
    struct Snapshot {
        std::vector<control::VipStatus> vips;
        bool published = false;
    };
    auto snap = api.call<Snapshot>([](control::Reconciler& r) {
        return Snapshot{r.status(), r.all_published()};
    });
    if (!snap) return reject(req, res, snap.error());
    std::optional<std::string> not_attached = api.s.readiness ? api.s.readiness() : std::nullopt;
    const std::optional<BgpInfo> bgp = api.s.host.bgp ? api.s.host.bgp() : std::nullopt;
    const config::Settings settings = api.s.settings->get();
    const std::uint32_t seed = settings.hash_seed;
    json vips = json::array();
    const bool fleet_host = !api.s.fleet.refusal.empty();
    // Only the cookie and QUIC counters: status reads no other per-VIP counter.
    Counters counters;
    for (const auto& v : snap->vips)
        if (v.vip_id)
            if (auto k = api.s.data_plane.vip_cookies(*v.vip_id))
                counters.vip_cookies[*v.vip_id] = *k;
    read_quic_counters(api.s.data_plane, snap->vips, counters);
    const auto host = host_syn_flood(api.s);
    for (const auto& v : snap->vips) {
        // Not in vip_status_json: a fleet's host record would change with
        // every counter.
        json j = vip_status_json(v, seed, bgp, fleet_host);
        j["syn_cookies"] = syn_cookies_json(v, settings, host, counters);
        j["quic"] = quic_json(v, counters);
        vips.push_back(std::move(j));
    }
    const auto uptime = std::chrono::duration_cast<std::chrono::seconds>(
        std::chrono::steady_clock::now() - api.s.info.started);
    json body{
        {"version", api.s.info.version},
        {"interface", api.s.info.interface},
        {"xdp_mode", api.s.info.xdp_mode},
        {"uptime_s", uptime.count()},
        {"ready", !not_attached && snap->published},
        {"last_reload", last_reload(api)},
        {"hash_seed", seed},
        {"bgp", bgp_json(api.s.host.state ? api.s.host.state() : HostState{}, bgp)},
        {"conntrack", api.s.conntrack_status ? conntrack_status_json(api.s.conntrack_status->get())
                                             : json(nullptr)},
        {"syn_flood", host_syn_flood_json(api.s, settings)},
        {"vips", std::move(vips)}};
    // Only on a fleet's host: a host configured by its file answers as before.
    if (api.s.fleet.status) body["fleet"] = fleet_json(api.s.fleet.status());
    send_json(res, 200, body);
}

}  // namespace xlb::api::detail
