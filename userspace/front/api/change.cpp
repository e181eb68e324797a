// SPDX-License-Identifier: Apache-2.0
// The change path: every change of the desired VIPs (POST, PATCH, DELETE of
// VIPs and backends) is computed, checked, persisted and applied here, on
// the control thread, and answered once its publish is known.
#include <spdlog/spdlog.h>

#include <algorithm>

#include "handlers.h"
#include "xlb/api/state_store.h"
#include "xlb/config/config.h"
#include "xlb/config/json.h"

namespace xlb::api::detail {
namespace {

// How long a change's answer waits for a publish that is pending without an
// error before it answers 202.
constexpr std::chrono::milliseconds kPendingWait{1000};

// The answer to a dry run of a backend change: the table before and after.
void send_prediction(httplib::Response& res, const std::string& vip_key,
                     const control::TablePrediction& p) {
    const double ring = p.ring_size ? static_cast<double>(p.ring_size) : 1.0;
    json backends = json::array();
    for (const auto& b : p.backends)
        backends.push_back(json{{"address", b.address.to_string()},
                                {"slots_before", b.slots_before},
                                {"slots_after", b.slots_after},
                                {"share_before", b.slots_before / ring},
                                {"share_after", b.slots_after / ring}});
    send_json(res, 200,
              json{{"vip", vip_key},
                   {"dry_run", true},
                   {"epoch", p.epoch},
                   {"ring_size", p.ring_size},
                   {"checksum", hex64(p.checksum)},
                   {"slots_moved", p.slots_moved},
                   {"share_moved", p.slots_moved / ring},
                   {"backends", std::move(backends)}});
}

}  // namespace

std::optional<HttpError> validate_change(const Change& change, const config::Settings& settings) {
    if (change.removed) return std::nullopt;
    std::vector<config::VipSpec> others;
    const config::VipSpec* changed = nullptr;
    for (const config::VipSpec& v : change.vips) {
        if (v.key() == change.vip_key)
            changed = &v;
        else
            others.push_back(v);
    }
    if (!changed)
        return HttpError{500, "internal error: changed VIP " + change.vip_key + " missing"};
    const std::string backend_prefix =
        change.backend_index ? "backends[" + std::to_string(*change.backend_index) + "]" : "";

    std::vector<std::string> problems;
    for (const config::ValidationIssue& issue :
         config::check_vip_among(*changed, others, settings)) {
        std::string path = issue.path;
        if (!backend_prefix.empty()) {
            if (path == backend_prefix)
                path.clear();
            else if (path.starts_with(backend_prefix + "."))
                path = path.substr(backend_prefix.size() + 1);
        }
        problems.push_back(path.empty() ? issue.message : path + ": " + issue.message);
    }
    if (problems.empty()) return std::nullopt;
    std::string message = change.backend_index ? "invalid backend for VIP " + change.vip_key + ": "
                                               : "invalid VIP " + change.vip_key + ": ";
    for (std::size_t i = 0; i < problems.size(); ++i) message += (i ? "; " : "") + problems[i];
    return HttpError{400, message};
}

std::vector<config::VipSpec>::iterator find_vip(std::vector<config::VipSpec>& vips,
                                                const std::string& key) {
    return std::find_if(vips.begin(), vips.end(),
                        [&](const config::VipSpec& v) { return v.key() == key; });
}

std::expected<BackendPlace, HttpError> find_backend(std::vector<config::VipSpec>& vips,
                                                    const std::string& key,
                                                    const net::IpAddress& address) {
    auto vip = find_vip(vips, key);
    if (vip == vips.end()) return std::unexpected(unknown_vip(key));
    auto& list = vip->backends;
    auto b = std::find_if(list.begin(), list.end(),
                          [&](const config::BackendSpec& x) { return x.address == address; });
    if (b == list.end()) return std::unexpected(unknown_backend(key, address));
    return BackendPlace{list, b};
}

std::expected<Change, HttpError> checked_change(const Mutator& mutate,
                                                std::vector<config::VipSpec> current,
                                                const config::Settings& settings,
                                                const Validator& validate) {
    auto change = mutate(std::move(current));
    if (!change) return change;
    if (auto invalid = validate(*change, settings)) return std::unexpected(std::move(*invalid));
    if (change->refusal) return std::unexpected(std::move(*change->refusal));
    return change;
}

std::expected<DryRun, HttpError> dry_run(Api& api, Mutator mutate, bool with_table) {
    const config::Settings settings = api.s.settings->get();
    auto outcome = api.call<std::expected<DryRun, HttpError>>(
        [mutate = std::move(mutate), settings,
         with_table](control::Reconciler& r) -> std::expected<DryRun, HttpError> {
            auto change = checked_change(mutate, r.vips(), settings);
            if (!change) return std::unexpected(change.error());
            auto next = find_vip(change->vips, change->vip_key);
            if (next == change->vips.end())
                return std::unexpected(HttpError{500, "internal error: changed VIP missing"});
            DryRun out{change->vip_key, *next, std::nullopt};
            if (with_table) {
                auto predicted = r.predict(*next);
                if (!predicted) return std::unexpected(HttpError{409, predicted.error().message()});
                out.table = std::move(*predicted);
            }
            return out;
        });
    if (!outcome) return std::unexpected(outcome.error());
    return std::move(*outcome);
}

void apply(Api& api, const httplib::Request& req, httplib::Response& res, Mutator mutate,
           int success_status, bool dry_run_handled, std::function<void(json&)> amend) {
    if (req.has_param("dry_run") && !dry_run_handled) {
        if (req.path != "/v1/backends")
            return reject(req, res,
                          {400,
                           "dry_run: only changes of backends (/v1/backends) and VIPs "
                           "(POST /v1/vips, PATCH /v1/vip) can be tried; found it on " +
                               req.method + " " + req.path});
        auto wanted = flag_param(req, "dry_run");
        if (!wanted) return reject(req, res, wanted.error());
        if (*wanted) {
            auto tried = dry_run(api, std::move(mutate), /*with_table=*/true);
            if (!tried) return reject(req, res, tried.error());
            return send_prediction(res, tried->vip_key, *tried->table);
        }
    }
    const config::Settings settings = api.s.settings->get();
    StateStore& state = api.s.state;
    const VipsChanged on_vips_changed = api.s.on_vips_changed;
    auto outcome = api.call<std::expected<Change, HttpError>>(
        [mutate, settings, &state,
         on_vips_changed](control::Reconciler& r) -> std::expected<Change, HttpError> {
            auto change = checked_change(mutate, r.vips(), settings);
            if (!change) return change;
            StateFile next = state.snapshot(r);
            next.vips = change->vips;
            if (auto saved = state.save(next); !saved)
                return std::unexpected(
                    HttpError{500, "not applied, nothing changed: " + saved.error().message()});
            r.set_vips(change->vips);
            if (on_vips_changed) on_vips_changed(r);
            return change;
        });
    if (!outcome) return reject(req, res, outcome.error());
    if (!*outcome) return reject(req, res, outcome->error());
    const Change& change = **outcome;

    // Published: record the ids and epochs it settled on, and read back.
    // A publish still pending without an error (the worker was busy with
    // an earlier change) is waited for a little longer, one pass at a
    // time.
    const std::string key = change.vip_key;
    const Services& services = api.s;
    auto read_back = [&] {
        return api.call<std::optional<StatusWithHealth>>(
            [key, &state, &services](control::Reconciler& r) -> std::optional<StatusWithHealth> {
                if (auto saved = state.save_current(r); !saved)
                    spdlog::warn("api: VIP {}: ids and epochs not saved: {}", key,
                                 saved.error().message());
                auto status = r.vip_status(key);
                if (!status) return std::nullopt;
                HealthDetails health = collect_health(services, {*status});
                return StatusWithHealth{std::move(*status), std::move(health)};
            });
    };
    auto after = read_back();
    const auto wait_until = std::chrono::steady_clock::now() + kPendingWait;
    while (after && *after && !(*after)->status.published && (*after)->status.last_error.empty() &&
           std::chrono::steady_clock::now() < wait_until)
        after = read_back();
    if (!after) {
        spdlog::warn("api: VIP {}: {} (persisted; publish not confirmed: {})", key, change.what,
                     after.error().message);
        return send_json(res, after.error().status,
                         json{{"error",
                               "the change was persisted and handed to the control "
                               "thread, but its publish was not confirmed: " +
                                   after.error().message},
                              {"persisted", true}});
    }
    if (change.removed) {
        spdlog::info("api: VIP {}: {}", key, change.what);
        return send_json(res, 200, json{{"vip", key}, {"deleted", true}});
    }
    if (!*after) {
        return send_error(res, 409, "VIP " + key + " was removed by a concurrent request");
    }
    const control::VipStatus& vip = (*after)->status;
    const Counters counters = read_counters(api.s.data_plane, {vip});
    json body = vip_detail_json(vip, counters, (*after)->health);
    if (amend) amend(body);
    if (vip.published) {
        spdlog::info("api: VIP {}: {} (epoch {}, checksum {})", key, change.what, vip.epoch,
                     hex64(vip.checksum));
        body["publish"] = "live";
        return send_json(res, success_status, body);
    }
    if (vip.last_error.empty()) {
        spdlog::info("api: VIP {}: {} (persisted, publish pending)", key, change.what);
        body["publish"] = "pending";
        return send_json(res, 202, body);
    }
    spdlog::warn("api: VIP {}: {} (persisted, publish failed: {})", key, change.what,
                 vip.last_error);
    body["publish"] = "failed";
    body["persisted"] = true;
    body["error"] = "the change was persisted, but its publish failed: " + vip.last_error +
                    " (the agent retries after 100 ms, doubling up to 5 s; xlbctl status "
                    "shows when it is live)";
    send_json(res, 502, body);
}

}  // namespace xlb::api::detail
