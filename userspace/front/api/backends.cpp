// SPDX-License-Identifier: Apache-2.0
// Backends: GET, POST, PATCH, DELETE /v1/backends and GET
// /v1/backend/history (docs/api.md).
#include <algorithm>

#include "handlers.h"
#include "xlb/config/config.h"
#include "xlb/config/json.h"

namespace xlb::api::detail {
namespace {

json backend_list_json(const control::VipStatus& vip, const Counters& counters,
                       const HealthDetails& health) {
    json backends = json::array();
    for (const auto& b : vip.backends) backends.push_back(backend_json(vip, b, counters, health));
    return json{{"vip", vip.spec.key()},
                {"epoch", vip.epoch},
                {"checksum", hex64(vip.checksum)},
                {"backends", std::move(backends)}};
}

}  // namespace

// One VIP's backends (?vip=), or every VIP's: {"vips": [...]}.
void list_backends(Api& api, const httplib::Request& req, httplib::Response& res) {
    if (!req.has_param("vip")) {
        const Services& services = api.s;
        auto all = api.call<std::pair<std::vector<control::VipStatus>, HealthDetails>>(
            [&services](control::Reconciler& r) {
                auto vips = r.status();
                auto health = collect_health(services, vips);
                return std::pair{std::move(vips), std::move(health)};
            });
        if (!all) return reject(req, res, all.error());
        Counters counters = read_counters(api.s.data_plane, all->first);
        add_connections(api.s, counters);
        json list = json::array();
        for (const auto& vip : all->first)
            list.push_back(backend_list_json(vip, counters, all->second));
        return send_json(res, 200, json{{"vips", std::move(list)}});
    }
    auto key = vip_param(req);
    if (!key) return reject(req, res, key.error());
    auto found = one_status_with_health(api, *key);
    if (!found) return reject(req, res, found.error());
    Counters counters = read_counters(api.s.data_plane, {found->status});
    add_connections(api.s, counters);
    send_json(res, 200, backend_list_json(found->status, counters, found->health));
}

// One backend's last verdict changes, oldest first. A dedicated path
// rather than a field of every backend object: a history may hold up to
// kMaxHealthHistory transitions, and backend objects travel in every
// VIP object and every change's answer.
void backend_history(Api& api, const httplib::Request& req, httplib::Response& res) {
    auto ref = backend_params(req);
    if (!ref) return reject(req, res, ref.error());
    struct Found {
        control::BackendStatus backend;
        bool vip_checked = false;
        std::optional<std::vector<health::Transition>> history;
    };
    const Services& services = api.s;
    auto found = api.call<std::expected<Found, HttpError>>(
        [ref = *ref, &services](control::Reconciler& r) -> std::expected<Found, HttpError> {
            auto vip = r.vip_status(ref.vip_key);
            if (!vip) return std::unexpected(unknown_vip(ref.vip_key));
            auto b = std::find_if(
                vip->backends.begin(), vip->backends.end(),
                [&](const control::BackendStatus& x) { return x.address == ref.address; });
            if (b == vip->backends.end())
                return std::unexpected(unknown_backend(ref.vip_key, ref.address));
            Found out{std::move(*b), vip->spec.health_check.type != config::HealthCheckType::kNone,
                      std::nullopt};
            if (services.health_history)
                out.history = services.health_history(ref.vip_key, ref.address);
            return out;
        });
    if (!found) return reject(req, res, found.error());
    if (!*found) return reject(req, res, found->error());
    send_json(res, 200,
              backend_history_json(ref->vip_key, (*found)->backend, (*found)->vip_checked,
                                   (*found)->history, api.s.settings->get().health_history));
}

void add_backend(Api& api, const httplib::Request& req, httplib::Response& res) {
    auto key = vip_param(req);
    if (!key) return reject(req, res, key.error());
    auto body =
        body_json(req, "a backend object, e.g. {\"address\": \"10.0.0.1\", \"weight\": 100}");
    if (!body) return reject(req, res, body.error());
    auto backend = config::backend_from_json(*body);
    if (!backend) return reject(req, res, {400, "invalid backend: " + backend.error()});
    apply(
        api, req, res,
        [key = *key,
         b = *backend](std::vector<config::VipSpec> vips) -> std::expected<Change, HttpError> {
            auto it = find_vip(vips, key);
            if (it == vips.end()) return std::unexpected(unknown_vip(key));
            if (it->find_backend(b.address))
                return std::unexpected(HttpError{409, "VIP " + key + " already has backend " +
                                                          b.address.to_string() +
                                                          " (change it with PATCH /v1/backends)"});
            it->backends.push_back(b);
            const std::size_t index = it->backends.size() - 1;
            return Change{std::move(vips), key, false, index,
                          "backend " + b.address.to_string() + " added (weight " +
                              std::to_string(b.weight) + ", " + config::to_string(b.state) + ")"};
        },
        201);
}

void delete_backend(Api& api, const httplib::Request& req, httplib::Response& res) {
    auto ref = backend_params(req);
    if (!ref) return reject(req, res, ref.error());
    apply(
        api, req, res,
        [key = ref->vip_key, address = ref->address](
            std::vector<config::VipSpec> vips) -> std::expected<Change, HttpError> {
            auto b = find_backend(vips, key, address);
            if (!b) return std::unexpected(b.error());
            b->list.erase(b->it);
            return Change{std::move(vips), key, false, std::nullopt,
                          "backend " + address.to_string() + " removed"};
        },
        200);
}

void patch_backend(Api& api, const httplib::Request& req, httplib::Response& res) {
    auto ref = backend_params(req);
    if (!ref) return reject(req, res, ref.error());
    const std::string expected(config::kBackendPatchExpected);
    auto body = body_json(req, expected.c_str());
    if (!body) return reject(req, res, body.error());
    auto patch = config::backend_patch_from_json(*body);
    if (!patch) return reject(req, res, {400, patch.error()});
    apply(
        api, req, res,
        [key = ref->vip_key, address = ref->address,
         patch = *patch](std::vector<config::VipSpec> vips) -> std::expected<Change, HttpError> {
            auto found = find_backend(vips, key, address);
            if (!found) return std::unexpected(found.error());
            auto b = found->it;
            std::string what = "backend " + address.to_string();
            if (patch.weight && *patch.weight != b->weight) {
                what +=
                    " weight " + std::to_string(b->weight) + " -> " + std::to_string(*patch.weight);
                b->weight = *patch.weight;
            }
            if (patch.state && *patch.state != b->state) {
                what += std::string(" state ") + config::to_string(b->state) + " -> " +
                        config::to_string(*patch.state);
                b->state = *patch.state;
            }
            if (patch.cookie_acks && *patch.cookie_acks != b->cookie_acks) {
                what += std::string(" cookie_acks ") + (b->cookie_acks ? "true" : "false") +
                        " -> " + (*patch.cookie_acks ? "true" : "false");
                b->cookie_acks = *patch.cookie_acks;
            }
            if (patch.server_id && *patch.server_id != b->server_id) {
                auto shown = [](const std::optional<std::uint64_t>& id) {
                    return id ? std::to_string(*id) : std::string("unset");
                };
                what += " server_id " + shown(b->server_id) + " -> " + shown(*patch.server_id);
                b->server_id = *patch.server_id;
            }
            if (what == "backend " + address.to_string()) what += " unchanged";
            const auto index = static_cast<std::size_t>(b - found->list.begin());
            return Change{std::move(vips), key, false, index, what};
        },
        200);
}

}  // namespace xlb::api::detail
