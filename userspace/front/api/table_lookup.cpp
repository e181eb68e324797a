// SPDX-License-Identifier: Apache-2.0
// GET /v1/table (a VIP's Maglev table) and GET /v1/lookup (which backend
// a flow goes to), docs/api.md.
#include <charconv>
#include <span>

#include "handlers.h"
#include "xlb/api/lookup.h"
#include "xlb/config/config.h"
#include "xlb/quic/cid.h"

namespace xlb::api::detail {

void table(Api& api, const httplib::Request& req, httplib::Response& res) {
    auto vip = requested_status(api, req);
    if (!vip) return reject(req, res, vip.error());
    send_json(res, 200, table_json(*vip));
}

void lookup(Api& api, const httplib::Request& req, httplib::Response& res) {
    auto key = vip_param(req);
    if (!key) return reject(req, res, key.error());
    if (!req.has_param("src"))
        return reject(req, res,
                      {400, "missing query parameter src, expected e.g. &src=192.0.2.7:40000"});
    auto src = net::Endpoint::parse(req.get_param_value("src"));
    if (!src) return reject(req, res, {400, "src: " + src.error()});
    auto vip = one_status(api, *key);
    if (!vip) return reject(req, res, vip.error());
    const config::VipSpec& spec = vip->spec;
    if (src->address.family != spec.address.family)
        return reject(req, res,
                      {400, "src: found an IPv" + std::to_string(src->address.family) +
                                " client for an IPv" + std::to_string(spec.address.family) +
                                " VIP, expected the VIP's address family"});
    if (req.has_param("proto")) {
        auto proto = config::parse_protocol(req.get_param_value("proto"));
        if (!proto)
            return reject(
                req, res,
                {400, "proto: found " + config::shown_value(req.get_param_value("proto")) +
                          ", expected tcp or udp"});
        if (*proto != spec.protocol)
            return reject(
                req, res,
                {400, std::string("proto: found ") + config::to_string(*proto) + ", but VIP " +
                          *key + " is " + config::to_string(spec.protocol)});
    }
    std::uint16_t dport = spec.port;
    if (req.has_param("dport")) {
        const std::string text = req.get_param_value("dport");
        unsigned long value = 0;
        auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
        if (ec != std::errc() || end != text.data() + text.size() || value == 0 || value > 65535)
            return reject(
                req, res,
                {400, "dport: found " + config::shown_value(text) + ", expected a port 1-65535"});
        if (spec.port != 0 && value != spec.port)
            return reject(req, res,
                          {400, "dport: found " + text + ", but VIP " + *key + " serves port " +
                                    std::to_string(spec.port) + " only"});
        dport = static_cast<std::uint16_t>(value);
    } else if (spec.port == 0) {
        return reject(
            req, res,
            {400, "VIP " + *key + " serves every port: dport is required, e.g. &dport=443"});
    }

    std::optional<std::vector<std::uint8_t>> cid;
    if (req.has_param("cid")) {
        if (!routes_quic(spec))
            return reject(req, res,
                          {400, "cid: VIP " + *key +
                                    " does not route QUIC by connection ID (a UDP VIP with "
                                    "quic configs does)"});
        auto octets = quic::from_hex(req.get_param_value("cid"));
        if (!octets) return reject(req, res, {400, "cid: " + octets.error().message()});
        if (octets->empty() || octets->size() > XLB_QUIC_CID_MAX)
            return reject(req, res,
                          {400, "cid: found " + std::to_string(octets->size()) +
                                    " octets, expected 1 to 20 (a QUIC connection ID)"});
        cid = std::move(*octets);
    }

    std::optional<std::vector<std::uint32_t>> ring;
    if (vip->vip_id) {
        auto live = api.s.data_plane.ring(*vip->vip_id);
        if (live)
            ring = std::move(*live);
        else if (live.error().code != ENOENT)
            return reject(req, res,
                          {503, "reading the live table failed: " + live.error().message()});
    }
    std::optional<std::span<const std::uint32_t>> view;
    if (ring) view = std::span<const std::uint32_t>(*ring);
    const LookupResult r =
        xlb::api::lookup(spec, *src, dport, api.s.settings->get().hash_seed, view);

    json backend = nullptr;
    if (r.backend_id) {
        for (const auto& b : vip->backends)
            if (b.id == r.backend_id) backend = b.address.to_string();
    }
    auto opt = [](const std::optional<std::uint32_t>& v) { return v ? json(*v) : json(nullptr); };
    json body{{"vip", *key},         {"src", src->to_string()},
              {"dport", dport},      {"proto", config::to_string(spec.protocol)},
              {"hash", r.hash},      {"ring_size", r.ring_size},
              {"slot", opt(r.slot)}, {"backend_id", opt(r.backend_id)},
              {"backend", backend},  {"outcome", r.outcome},
              {"epoch", vip->epoch}};
    if (cid) {
        // Routed by its CID, the packet never reads the ring; a fallback
        // is the ring's answer above.
        QuicLookup q = quic_lookup(*vip, *cid);
        if (q.backend_id) {
            body["slot"] = nullptr;
            body["backend_id"] = *q.backend_id;
            body["backend"] = q.backend;
            body["outcome"] = outcome_name(XLB_OUT_TX_QUIC_CID);
        }
        body["quic"] = std::move(q.body);
    }
    send_json(res, 200, body);
}

}  // namespace xlb::api::detail
