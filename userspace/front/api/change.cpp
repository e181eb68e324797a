// SPDX-License-Identifier: Apache-2.0
// The change path: every change of the desired VIPs (POST, PATCH, DELETE of
// VIPs and backends) is computed, checked, persisted and applied here, on
// the control thread, and answered once its publish is known.
#include <spdlog/spdlog.h>

#include <algorithm>

#include "handlers.h"
#include "listener.h"
#include "xlb/api/audit.h"
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

// The audit entry of one change (audit.h), filled in as apply() goes and
// logged once when it returns, whichever way it answers.
class ChangeAudit {
public:
    ChangeAudit(const httplib::Request& req, const httplib::Response& res) : res_(res) {
        entry_.request = describe(req);
        entry_.caller = request_caller();
        entry_.vip = req.get_param_value("vip");
        entry_.backend = req.get_param_value("address");
    }
    ChangeAudit(const ChangeAudit&) = delete;
    ChangeAudit& operator=(const ChangeAudit&) = delete;
    ~ChangeAudit() {
        entry_.ok = res_.status >= 200 && res_.status < 300;
        if (entry_.ok) {
            entry_.result = note_.empty() ? "ok" : "ok (" + note_ + ")";
        } else {
            const json body = json::parse(res_.body, nullptr, false);
            const std::string error =
                body.is_object() && body.contains("error") && body["error"].is_string()
                    ? body["error"].get<std::string>()
                    : res_.body;
            entry_.result = std::to_string(res_.status) + " " + error;
        }
        audit(entry_);
    }
    void reason(std::string text) { entry_.reason = std::move(text); }
    // What the change did, known once the control thread took it.
    void change(const Change& change, std::string diff) {
        entry_.vip = change.vip_key;
        entry_.changes = std::move(diff);
        if (entry_.backend.empty() && change.backend_index && !change.removed) {
            auto vip =
                std::find_if(change.vips.begin(), change.vips.end(),
                             [&](const config::VipSpec& v) { return v.key() == change.vip_key; });
            if (vip != change.vips.end() && *change.backend_index < vip->backends.size())
                entry_.backend = vip->backends[*change.backend_index].address.to_string();
        }
    }
    void note(std::string text) { note_ = std::move(text); }

private:
    const httplib::Response& res_;
    AuditEntry entry_;
    std::string note_;
};

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

std::expected<std::string, HttpError> request_reason(const httplib::Request& req) {
    if (!req.has_header(kReasonHeader)) return std::string();
    auto reason = decode_reason(req.get_header_value(kReasonHeader));
    if (!reason) return std::unexpected(HttpError{400, reason.error()});
    return std::move(*reason);
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
    ChangeAudit audited(req, res);
    // The audit entry is this change's log line: refusals are not logged
    // again (failures of the agent still are, as warnings).
    auto refuse = [&](const HttpError& e) {
        if (e.status >= 500) return reject(req, res, e);
        send_error(res, e);
    };
    auto reason = request_reason(req);
    if (!reason) return refuse(reason.error());
    audited.reason(std::move(*reason));
    const config::Settings settings = api.s.settings->get();
    StateStore& state = api.s.state;
    const VipsChanged on_vips_changed = api.s.on_vips_changed;
    // Written on the control thread, read here once the call returned.
    auto diff = std::make_shared<std::string>();
    auto outcome = api.call<std::expected<Change, HttpError>>(
        [mutate, settings, &state, on_vips_changed,
         diff](control::Reconciler& r) -> std::expected<Change, HttpError> {
            auto change = checked_change(mutate, r.vips(), settings);
            if (!change) return change;
            const std::string what = vip_changes(r.vips(), change->vips);
            StateFile next = state.snapshot(r);
            next.vips = change->vips;
            if (auto saved = state.save(next); !saved)
                return std::unexpected(
                    HttpError{500, "not applied, nothing changed: " + saved.error().message()});
            r.set_vips(change->vips);
            if (on_vips_changed) on_vips_changed(r);
            *diff = what;
            return change;
        });
    if (!outcome) return refuse(outcome.error());
    if (!*outcome) return refuse(outcome->error());
    const Change& change = **outcome;
    audited.change(change, *diff);

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
        audited.note("epoch " + std::to_string(vip.epoch) + ", checksum " + hex64(vip.checksum));
        body["publish"] = "live";
        return send_json(res, success_status, body);
    }
    if (vip.last_error.empty()) {
        audited.note("persisted, publish pending");
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
