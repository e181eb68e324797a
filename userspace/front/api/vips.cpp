// SPDX-License-Identifier: Apache-2.0
// VIPs: GET /v1/vips, POST /v1/vips, GET /v1/vip, PATCH /v1/vip,
// DELETE /v1/vip (docs/api.md).
#include "handlers.h"
#include "xlb/config/config.h"
#include "xlb/config/json.h"

namespace xlb::api::detail {
void list_vips(Api& api, const httplib::Request& req, httplib::Response& res) {
    auto all = all_status(api);
    if (!all) return reject(req, res, all.error());
    json vips = json::array();
    for (const auto& v : *all) {
        json j = vip_summary_json(v);
        j["spec"] = v.spec;
        vips.push_back(std::move(j));
    }
    send_json(res, 200, json{{"vips", std::move(vips)}});
}

void get_vip(Api& api, const httplib::Request& req, httplib::Response& res) {
    auto vip = requested_status_with_health(api, req);
    if (!vip) return reject(req, res, vip.error());
    send_json(
        res, 200,
        vip_detail_json(vip->status, read_counters(api.s.data_plane, {vip->status}), vip->health));
}

void add_vip(Api& api, const httplib::Request& req, httplib::Response& res) {
    auto wanted = flag_param(req, "dry_run");
    if (!wanted) return reject(req, res, wanted.error());
    auto body = body_json(req, "a VIP object (docs/api.md)");
    if (!body) return reject(req, res, body.error());
    auto spec = config::vip_from_json(*body);
    if (!spec) return reject(req, res, {400, "invalid VIP: " + spec.error()});
    Mutator mutate =
        [spec = *spec](std::vector<config::VipSpec> vips) -> std::expected<Change, HttpError> {
        const std::string key = spec.key();
        if (find_vip(vips, key) != vips.end())
            return std::unexpected(
                HttpError{409, "VIP " + key +
                                   " already exists (change its settings with PATCH "
                                   "/v1/vip, its backends with /v1/backends)"});
        vips.push_back(spec);
        return Change{std::move(vips), key, false, std::nullopt,
                      "added with " + std::to_string(spec.backends.size()) + " backends"};
    };
    if (*wanted) {
        auto tried = dry_run(api, std::move(mutate), /*with_table=*/false);
        if (!tried) return reject(req, res, tried.error());
        return send_json(res, 200, json{{"vip", spec->key()}, {"dry_run", true}, {"spec", *spec}});
    }
    // apply() takes dry_run for backends only: this one is done.
    apply(api, req, res, std::move(mutate), 201, /*dry_run_handled=*/true);
}

Mutator vip_patch(std::string key, json patch, bool allow_disruptive,
                  std::shared_ptr<json> changes) {
    return [key = std::move(key), patch = std::move(patch), allow_disruptive,
            changes = std::move(changes)](
               std::vector<config::VipSpec> vips) -> std::expected<Change, HttpError> {
        auto it = find_vip(vips, key);
        if (it == vips.end()) return std::unexpected(unknown_vip(key));
        json merged = *it;
        config::merge_patch(merged, patch);
        auto next = config::vip_from_json(merged);
        if (!next)
            return std::unexpected(HttpError{400, "invalid VIP " + key + ": " + next.error()});
        std::optional<HttpError> refusal;
        if (const auto disruptive = config::disruptive_vip_changes(*it, *next);
            !disruptive.empty() && !allow_disruptive) {
            std::string message = "refused: ";
            for (std::size_t i = 0; i < disruptive.size(); ++i)
                message += (i ? "; " : "") + disruptive[i];
            refusal = HttpError{
                409, message +
                         " (established flows of a VIP without conntrack, and flows other "
                         "LB hosts receive, change backend; confirm with allow_disruptive=1)"};
        }
        *changes = config::vip_settings_changes(*it, *next);
        std::string what = "settings changed:";
        for (const json& c : *changes) what += " " + c.at("key").get<std::string>();
        if (changes->empty()) what = "settings unchanged";
        *it = std::move(*next);
        return Change{std::move(vips), key, false, std::nullopt, what, std::move(refusal)};
    };
}

// PATCH /v1/vip?vip=KEY[&dry_run=1][&allow_disruptive=1]: the given
// settings of an existing VIP (its key and backends stay), validated like
// the file; a change that moves established flows (hash, ring_size) only
// with allow_disruptive, as reloads.
void patch_vip(Api& api, const httplib::Request& req, httplib::Response& res) {
    auto key = vip_param(req);
    if (!key) return reject(req, res, key.error());
    auto wanted = flag_param(req, "dry_run");
    if (!wanted) return reject(req, res, wanted.error());
    auto allow_disruptive = flag_param(req, "allow_disruptive");
    if (!allow_disruptive) return reject(req, res, allow_disruptive.error());
    auto body =
        body_json(req, "an object with the VIP settings to change, e.g. {\"ring_size\": 251}");
    if (!body) return reject(req, res, body.error());
    if (body->empty())  // body_json admits objects only
        return reject(req, res,
                      {400, "found " + shown_json(*body) +
                                ", expected an object with at least one VIP setting, e.g. "
                                "{\"health_check\": {\"type\": \"tcp\"}}"});
    for (const char* fixed : {"address", "port", "protocol"})
        if (body->contains(fixed))
            return reject(
                req, res,
                {400, std::string(fixed) + ": a VIP's address, port and protocol are its key and "
                                           "do not change (add a VIP with the new key, then "
                                           "delete this one)"});
    if (body->contains("backends"))
        return reject(req, res,
                      {400, "backends: change them with /v1/backends (POST, PATCH, DELETE)"});
    auto changes = std::make_shared<json>();
    Mutator mutate = vip_patch(*key, std::move(*body), *allow_disruptive, changes);
    if (*wanted) {
        auto tried = dry_run(api, std::move(mutate), /*with_table=*/false);
        if (!tried) return reject(req, res, tried.error());
        json spec = tried->vip;
        return send_json(res, 200,
                         json{{"vip", *key},
                              {"dry_run", true},
                              {"changes", *changes},
                              {"spec", std::move(spec)}});
    }
    apply(api, req, res, std::move(mutate), 200, /*dry_run_handled=*/true,
          [changes](json& answer) { answer["changes"] = *changes; });
}

void delete_vip(Api& api, const httplib::Request& req, httplib::Response& res) {
    auto key = vip_param(req);
    if (!key) return reject(req, res, key.error());
    apply(
        api, req, res,
        [key = *key](std::vector<config::VipSpec> vips) -> std::expected<Change, HttpError> {
            auto it = find_vip(vips, key);
            if (it == vips.end()) return std::unexpected(unknown_vip(key));
            vips.erase(it);
            return Change{std::move(vips), key, true, std::nullopt, "deleted"};
        },
        200);
}

}  // namespace xlb::api::detail
