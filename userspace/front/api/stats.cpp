// SPDX-License-Identifier: Apache-2.0
// GET /v1/stats: the data path's counters, by outcome and by VIP
// (docs/api.md).
#include "handlers.h"

namespace xlb::api::detail {

void stats(Api& api, const httplib::Request& req, httplib::Response& res) {
    std::optional<std::string> only;
    if (req.has_param("vip")) {
        auto key = vip_param(req);
        if (!key) return reject(req, res, key.error());
        only = *key;
    }
    auto all = all_status(api);
    if (!all) return reject(req, res, all.error());
    std::vector<control::VipStatus> vips;
    for (auto& v : *all)
        if (!only || v.spec.key() == *only) vips.push_back(std::move(v));
    if (only && vips.empty()) return reject(req, res, unknown_vip(*only));
    auto outcomes = api.s.data_plane.outcomes();
    if (!outcomes)
        return reject(req, res, {503, "reading counters failed: " + outcomes.error().message()});
    json by_outcome = json::object();
    for (std::uint32_t i = 0; i < XLB_OUT__MAX; ++i) by_outcome[outcome_name(i)] = (*outcomes)[i];
    const Counters counters = read_counters(api.s.data_plane, vips);
    const config::Settings settings = api.s.settings->get();
    const auto host = host_syn_flood(api.s);
    json list = json::array();
    for (const auto& v : vips) {
        json j = vip_stats_json(v, counters);
        j["syn_cookies"] = syn_cookies_json(v, settings, host, counters);
        j["quic"] = quic_json(v, counters);
        list.push_back(std::move(j));
    }
    send_json(res, 200,
              json{{"outcomes", std::move(by_outcome)},
                   {"vips", std::move(list)},
                   {"syn_flood", host_syn_flood_json(api.s, settings)}});
}

}  // namespace xlb::api::detail
