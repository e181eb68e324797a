// SPDX-License-Identifier: Apache-2.0
// QUIC connection-ID routing in GET /v1/status and GET /v1/stats
// (docs/api.md, docs/quic.md): each QUIC VIP's packets routed by CID and
// fallbacks by reason.
#include "internal.h"
#include "xlb/datapath/setup.h"
#include "xlb/quic/cid.h"
#include "xlb/quic/key_file.h"

namespace xlb::api::detail {

bool routes_quic(const config::VipSpec& vip) {
    return (datapath::vip_flags(vip) & XLB_VIP_F_QUIC) != 0;
}

void read_quic_counters(const DataPlaneView& view, const std::vector<control::VipStatus>& vips,
                        Counters& counters) {
    for (const control::VipStatus& v : vips)
        if (v.vip_id && routes_quic(v.spec))
            if (auto q = view.vip_quic(*v.vip_id)) counters.vip_quic[*v.vip_id] = *q;
}

json quic_json(const control::VipStatus& v, const Counters& counters) {
    if (!routes_quic(v.spec)) return nullptr;
    const xlb_vip_quic_stats* counts = nullptr;
    if (v.vip_id)
        if (auto it = counters.vip_quic.find(*v.vip_id); it != counters.vip_quic.end())
            counts = &it->second;
    json fallbacks = json::object();
    for (std::uint32_t r = 0; r < XLB_QUIC_FALLBACKS; ++r)
        fallbacks[quic::fallback_name(r)] = counts ? json(counts->fallbacks[r]) : json(nullptr);
    return json{{"routed", counts ? json(counts->routed) : json(nullptr)},
                {"fallbacks", std::move(fallbacks)}};
}

QuicLookup quic_lookup(const control::VipStatus& v, std::span<const std::uint8_t> cid) {
    std::vector<quic::KeyOf> keys;
    for (const config::QuicConfig& q : v.spec.quic)
        if (q.mode == config::QuicMode::kEncrypted)
            // unreadable: that config decodes as no_key, as without a context
            if (auto key = quic::read_key_file(q.key_file)) keys.push_back({q.config_id, *key});
    QuicLookup out;
    out.body = json{{"cid", quic::to_hex(cid)},
                    {"config_id", nullptr},
                    {"server_id", nullptr},
                    {"fallback", nullptr}};
    quic::DecodeError why{};
    const auto decoded = quic::decode_cid(v.spec.quic, keys, cid, &why);
    if (!decoded) {
        out.body["fallback"] = quic::fallback_name(static_cast<std::uint32_t>(why));
        return out;
    }
    out.body["config_id"] = decoded->config_id;
    out.body["server_id"] = decoded->server_id;
    // The backend that owns the server id in xlb_quic_servers (as the
    // publisher writes it), then it must be live.
    for (std::size_t i = 0; i < v.spec.backends.size() && i < v.backends.size(); ++i) {
        const config::BackendSpec& b = v.spec.backends[i];
        const control::BackendStatus& s = v.backends[i];
        if (!datapath::quic_server_published(b) || b.server_id != decoded->server_id || !s.id)
            continue;
        if (!s.live) {
            out.body["fallback"] = quic::fallback_name(XLB_QUIC_FB_DEAD_BACKEND);
            return out;
        }
        out.backend_id = s.id;
        out.backend = s.address.to_string();
        return out;
    }
    out.body["fallback"] = quic::fallback_name(XLB_QUIC_FB_UNKNOWN_SERVER);
    return out;
}

}  // namespace xlb::api::detail
