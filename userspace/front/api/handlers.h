// SPDX-License-Identifier: Apache-2.0
// Internal to xlb_api: what the API server's handlers share. Each resource
// has its handlers in its own file (status.cpp, vips.cpp, backends.cpp, ...),
// routes.cpp lists them all in one table, and every change of the desired
// VIPs goes through the one change path (change.cpp). Responses and errors:
// docs/api.md.
#pragma once

#include <atomic>
#include <expected>
#include <functional>
#include <initializer_list>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "internal.h"
#include "xlb/config/model.h"

namespace xlb::api::detail {

// What every handler runs with.
struct Api {
    Services s;
    // The one capture at a time (shared with the running stream, which
    // frees it when it ends).
    std::shared_ptr<std::atomic<bool>> capture_busy = std::make_shared<std::atomic<bool>>(false);

    template <typename R>
    std::expected<R, HttpError> call(std::function<R(control::Reconciler&)> fn) {
        return on_control<R>(s.loop, s.call_timeout, std::move(fn));
    }
};

// --- The route table (routes.cpp) ---

using Handler = void (*)(Api&, const httplib::Request&, httplib::Response&);
// Whether a route changes the desired state (VIPs, backends, the host's
// drain), which a fleet's host takes from the store only.
enum class Changes { kNothing, kDesired };
struct Route {
    const char* method;
    const char* path;
    Handler handler;
    Changes changes = Changes::kNothing;
};
std::span<const Route> routes();
// Every route of the table, then the probes (GET /livez, GET /readyz).
void install_routes(Router& router, const std::shared_ptr<Api>& api);

// The handlers, by resource.
void status(Api&, const httplib::Request&, httplib::Response&);
void list_vips(Api&, const httplib::Request&, httplib::Response&);
void add_vip(Api&, const httplib::Request&, httplib::Response&);
void get_vip(Api&, const httplib::Request&, httplib::Response&);
void delete_vip(Api&, const httplib::Request&, httplib::Response&);
void patch_vip(Api&, const httplib::Request&, httplib::Response&);
void list_backends(Api&, const httplib::Request&, httplib::Response&);
void add_backend(Api&, const httplib::Request&, httplib::Response&);
void delete_backend(Api&, const httplib::Request&, httplib::Response&);
void patch_backend(Api&, const httplib::Request&, httplib::Response&);
void backend_history(Api&, const httplib::Request&, httplib::Response&);
void table(Api&, const httplib::Request&, httplib::Response&);
void lookup(Api&, const httplib::Request&, httplib::Response&);
void stats(Api&, const httplib::Request&, httplib::Response&);
void reload(Api&, const httplib::Request&, httplib::Response&);
void export_config(Api&, const httplib::Request&, httplib::Response&);
void host(Api&, const httplib::Request&, httplib::Response&);
void drain_host(Api&, const httplib::Request&, httplib::Response&);
void resume_host(Api&, const httplib::Request&, httplib::Response&);
void conntrack_count(Api&, const httplib::Request&, httplib::Response&);
void conntrack_list(Api&, const httplib::Request&, httplib::Response&);
void conntrack_flush(Api&, const httplib::Request&, httplib::Response&);
void start_capture(Api&, const httplib::Request&, httplib::Response&);
void capture_status(Api&, const httplib::Request&, httplib::Response&);

// --- Replies (handlers.cpp) ---

// "PATCH /v1/backends?vip=...&address=...", for the log.
std::string describe(const httplib::Request& req);
// Answers with the error, and logs it: a failure (5xx) as a warning, a
// refused change at info; refused reads are the client's business.
void reject(const httplib::Request& req, httplib::Response& res, const HttpError& e);

// A JSON value as an error message echoes it: as written when short, cut
// (config::shown_value) when long.
std::string shown_json(const json& value);

HttpError unknown_vip(const std::string& key);
HttpError unknown_backend(const std::string& key, const net::IpAddress& address);

// --- Query parameters and bodies (handlers.cpp) ---

// ?vip=KEY, normalised ("10.0.0.10:80" -> "10.0.0.10:80/tcp").
std::expected<std::string, HttpError> vip_param(const httplib::Request& req);
std::expected<net::IpAddress, HttpError> address_param(const httplib::Request& req);
// ?NAME=1|true|0|false; absent: false.
std::expected<bool, HttpError> flag_param(const httplib::Request& req, const std::string& name);

// ?vip=KEY&address=ADDR: one backend of one VIP.
struct BackendRef {
    std::string vip_key;
    net::IpAddress address;
};
std::expected<BackendRef, HttpError> backend_params(const httplib::Request& req);

// Query parameters other than `allowed` are refused: a typo (?backnd=)
// would otherwise widen a count to the whole table.
std::optional<HttpError> only_params(const httplib::Request& req,
                                     std::initializer_list<std::string_view> allowed);

// The body as a JSON object: well-formed UTF-8, each key once. `expected`
// says what the route takes, for the error.
std::expected<json, HttpError> body_json(const httplib::Request& req, const char* expected);

// --- The reconciler's status, taken on the control thread (handlers.cpp) ---

std::expected<std::vector<control::VipStatus>, HttpError> all_status(Api& api);
// 404 for a VIP that is not there.
std::expected<control::VipStatus, HttpError> one_status(Api& api, const std::string& key);

// A VIP's status and its backends' health details, taken together.
struct StatusWithHealth {
    control::VipStatus status;
    HealthDetails health;
};
std::expected<StatusWithHealth, HttpError> one_status_with_health(Api& api, const std::string& key);

// The same for the VIP the request names in its vip parameter.
std::expected<control::VipStatus, HttpError> requested_status(Api& api,
                                                              const httplib::Request& req);
std::expected<StatusWithHealth, HttpError> requested_status_with_health(
    Api& api, const httplib::Request& req);

// --- The change path (change.cpp) ---

// A change to the desired VIP list, computed on the control thread from the
// current list.
struct Change {
    std::vector<config::VipSpec> vips;         // the whole new desired list
    std::string vip_key;                       // the VIP changed or removed
    bool removed = false;                      // the VIP is gone
    std::optional<std::size_t> backend_index;  // the backend changed (for error paths)
    std::string what;                          // for the log: "backend 10.0.0.1 added"
    // Why a valid change is still refused (a disruptive change without
    // consent). Reported only once the change validates: a change that
    // could never apply is not worth confirming.
    std::optional<HttpError> refusal;
};
using Mutator = std::function<std::expected<Change, HttpError>(std::vector<config::VipSpec>)>;

// Validates the VIP a change touches, in the context of all the others (the
// rules across VIPs: names, maps.max_vips, maps.max_backends), with the same
// rules as the configuration file. Paths are relative to the VIP, or to the
// backend for backend changes.
std::optional<HttpError> validate_change(const Change& change, const config::Settings& settings);
using Validator = std::function<std::optional<HttpError>(const Change&, const config::Settings&)>;

// The one check of every change, real or dry run: `mutate` applied to
// `current`, validated once by `validate`, then its refusal if any.
std::expected<Change, HttpError> checked_change(const Mutator& mutate,
                                                std::vector<config::VipSpec> current,
                                                const config::Settings& settings,
                                                const Validator& validate = validate_change);

// Validate, persist, apply, wait for the publish, answer with the VIP (and
// `amend` adds to a successful answer). With dry_run=1 on /v1/backends:
// answers with the table the change would give instead; dry_run_handled:
// the caller took the dry_run parameter itself.
void apply(Api& api, const httplib::Request& req, httplib::Response& res, Mutator mutate,
           int success_status, bool dry_run_handled = false, std::function<void(json&)> amend = {});

// The request's X-Xlb-Reason decoded (audit.h); empty without one; 400
// when it is not one line of percent-encoded text within the limit.
std::expected<std::string, HttpError> request_reason(const httplib::Request& req);

// A change checked exactly as apply() checks it, then dropped: the VIP it
// would give and, with `with_table`, the table it would give compared with
// the live one. Nothing is persisted or published.
struct DryRun {
    std::string vip_key;  // as the change names it
    config::VipSpec vip;
    std::optional<control::TablePrediction> table;
};
std::expected<DryRun, HttpError> dry_run(Api& api, Mutator mutate, bool with_table);

std::vector<config::VipSpec>::iterator find_vip(std::vector<config::VipSpec>& vips,
                                                const std::string& key);

// Backend `address` of VIP `key` in vips: its list and place in it, or the
// 404 naming the VIP or the backend that is not there.
struct BackendPlace {
    std::vector<config::BackendSpec>& list;
    std::vector<config::BackendSpec>::iterator it;
};
std::expected<BackendPlace, HttpError> find_backend(std::vector<config::VipSpec>& vips,
                                                    const std::string& key,
                                                    const net::IpAddress& address);

// PATCH /v1/vip's change: `patch` merged into VIP `key`; a disruptive
// change refused unless `allow_disruptive`. `changes` receives what
// changed, leaf by leaf ([{"key", "from", "to"}]).
Mutator vip_patch(std::string key, json patch, bool allow_disruptive,
                  std::shared_ptr<json> changes);

}  // namespace xlb::api::detail
