// SPDX-License-Identifier: Apache-2.0
// SYN cookies in GET /v1/status and GET /v1/stats (docs/api.md,
// docs/syn-cookies.md): the host's flood state and each VIP's cookie state
// and counters.
#include "internal.h"
#include "xlb/api/status_json.h"

namespace xlb::api::detail {

const char* syn_cookie_state(config::SynCookies mode,
                             std::optional<conntrack::SynFloodState> host) {
    switch (mode) {
        case config::SynCookies::kOff: return kCookiesOff;
        case config::SynCookies::kAlways: return kCookiesAlways;
        case config::SynCookies::kAuto:
            return host == conntrack::SynFloodState::kAnswering ? kCookiesAnswering
                                                                : kCookiesAutoIdle;
    }
    return kCookiesOff;
}

json syn_cookies_json(const control::VipStatus& v, const config::Settings& settings,
                      std::optional<conntrack::SynFloodState> host, const Counters& counters) {
    const config::EffectiveSynCookies effective = config::effective_syn_cookies(v.spec, settings);
    const xlb_vip_cookie_stats* counts = nullptr;
    if (v.vip_id)
        if (auto it = counters.vip_cookies.find(*v.vip_id); it != counters.vip_cookies.end())
            counts = &it->second;
    auto value = [&](__u64 xlb_vip_cookie_stats::*field) {
        return counts ? json(counts->*field) : json(nullptr);
    };
    return json{{"mode", config::to_string(effective.mode)},
                {"state", syn_cookie_state(effective.mode, host)},
                {"reason", effective.reason.empty() ? json(nullptr) : json(effective.reason)},
                {"syns", value(&xlb_vip_cookie_stats::syns)},
                {"cookies_sent", value(&xlb_vip_cookie_stats::cookies_sent)},
                {"acks_valid", value(&xlb_vip_cookie_stats::acks_valid)},
                {"acks_invalid", value(&xlb_vip_cookie_stats::acks_invalid)}};
}

json syn_flood_json(const conntrack::SynFloodStatus& s, const config::SynFloodSettings& settings) {
    return json{{"state", conntrack::to_string(s.state)},
                {"since", s.since ? json(utc_text(*s.since)) : json(nullptr)},
                {"floods", s.floods},
                {"peak_rate", s.peak_rate},
                {"peak_cpu", s.floods > 0 ? json(s.peak_cpu) : json(nullptr)},
                {"rate_per_cpu", s.rate_per_cpu},
                {"start_rate", settings.start_rate},
                {"end_rate", settings.end_rate},
                {"end_after_ms", settings.end_after.count()}};
}

std::optional<conntrack::SynFloodState> host_syn_flood(const Services& services) {
    if (!services.syn_flood) return std::nullopt;
    return services.syn_flood->get().state;
}

json host_syn_flood_json(const Services& services, const config::Settings& settings) {
    if (!services.syn_flood) return nullptr;
    return syn_flood_json(services.syn_flood->get(), settings.syn_flood);
}

}  // namespace xlb::api::detail
