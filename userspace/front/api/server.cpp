// SPDX-License-Identifier: Apache-2.0
#include "xlb/api/server.h"

#include <grp.h>
#include <spdlog/spdlog.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <charconv>
#include <cstring>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <span>
#include <string_view>
#include <vector>

#include "bgp_json.h"
#include "capture_stream.h"
#include "files.h"
#include "internal.h"
#include "listener.h"
#include "reload_json.h"
#include "xlb/api/lookup.h"
#include "xlb/api/state_store.h"
#include "xlb/config/config.h"
#include "xlb/config/json.h"
#include "xlb/datapath/setup.h"
#include "xlb/files/files.h"

namespace xlb::api {
namespace {

using detail::HttpError;
using detail::json;
using detail::send_error;
using detail::send_json;

// A change to the desired VIP list, computed on the control thread from the
// current list.
struct Change {
    std::vector<config::VipSpec> vips;         // the whole new desired list
    std::string vip_key;                       // the VIP changed or removed
    bool removed = false;                      // the VIP is gone
    std::optional<std::size_t> backend_index;  // the backend changed (for error paths)
    std::string what;                          // for the log: "backend 10.0.0.1 added"
};
using Mutator = std::function<std::expected<Change, HttpError>(std::vector<config::VipSpec>)>;

std::string describe(const httplib::Request& req) {
    std::string text = req.method + " " + req.path;
    std::string query;
    for (const auto& [k, v] : req.params) query += (query.empty() ? "?" : "&") + k + "=" + v;
    return text + query;
}

// Validates the VIP a change touches, in the context of all the others (the
// rules across VIPs: names, maps.max_vips, maps.max_backends), with the same
// rules as the configuration file. Paths are relative to the VIP, or to the
// backend for backend changes.
std::optional<HttpError> validate_change(const Change& change, const config::Settings& settings) {
    if (change.removed) return std::nullopt;
    config::Config candidate;
    candidate.settings = settings;
    const config::VipSpec* changed = nullptr;
    for (const config::VipSpec& v : change.vips) {
        if (v.key() == change.vip_key)
            changed = &v;
        else
            candidate.vips.push_back(v);
    }
    if (!changed)
        return HttpError{500, "internal error: changed VIP " + change.vip_key + " missing"};
    candidate.vips.push_back(*changed);  // last: rules across VIPs report on it
    const std::string prefix = "vips[" + std::to_string(candidate.vips.size() - 1) + "]";
    const std::string backend_prefix =
        change.backend_index ? "backends[" + std::to_string(*change.backend_index) + "]" : "";

    std::vector<std::string> problems;
    for (const config::ValidationIssue& issue : config::check_config(candidate)) {
        std::string path = issue.path;
        if (path == prefix)
            path.clear();
        else if (path.starts_with(prefix + "."))
            path = path.substr(prefix.size() + 1);
        else
            continue;  // settings, or another VIP: not this change's doing
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

// The offset of the first byte that is not part of well-formed UTF-8 (no
// overlong forms, no surrogates, nothing above U+10FFFF), or nullopt.
std::optional<std::size_t> invalid_utf8_at(std::string_view text) {
    const auto* p = reinterpret_cast<const unsigned char*>(text.data());
    const std::size_t n = text.size();
    std::size_t i = 0;
    while (i < n) {
        const unsigned char c = p[i];
        if (c < 0x80) {
            ++i;
            continue;
        }
        std::size_t len = 0;
        unsigned char lo = 0x80, hi = 0xBF;  // allowed range of the second byte
        if (c >= 0xC2 && c <= 0xDF)
            len = 2;
        else if (c == 0xE0)
            len = 3, lo = 0xA0;
        else if (c == 0xED)
            len = 3, hi = 0x9F;
        else if (c >= 0xE1 && c <= 0xEF)
            len = 3;
        else if (c == 0xF0)
            len = 4, lo = 0x90;
        else if (c >= 0xF1 && c <= 0xF3)
            len = 4;
        else if (c == 0xF4)
            len = 4, hi = 0x8F;
        else
            return i;
        if (i + len > n) return i;
        if (p[i + 1] < lo || p[i + 1] > hi) return i;
        for (std::size_t k = 2; k < len; ++k)
            if (p[i + k] < 0x80 || p[i + k] > 0xBF) return i;
        i += len;
    }
    return std::nullopt;
}

// How long a change's answer waits for a publish that is pending without an
// error before it answers 202.
constexpr std::chrono::milliseconds kPendingWait{1000};

HttpError unknown_vip(const std::string& key) {
    return {404, "no VIP " + key + " (GET /v1/vips lists them)"};
}

HttpError unknown_backend(const std::string& key, const net::IpAddress& address) {
    return {404, "VIP " + key + " has no backend " + address.to_string() +
                     " (GET /v1/backends?vip=" + key + " lists them)"};
}

// Backend `address` of VIP `key` in vips: its list and place in it, or the
// 404 naming the VIP or the backend that is not there.
struct BackendPlace {
    std::vector<config::BackendSpec>& list;
    std::vector<config::BackendSpec>::iterator it;
};
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

// A JSON value as an error message echoes it: as written when short, cut
// (config::shown_value) when long.
std::string shown_json(const json& value) {
    std::string text = value.dump(-1, ' ', false, json::error_handler_t::replace);
    return text.size() <= config::kShownValueBytes ? text : config::shown_value(text, '\'');
}

// A JSON document's leaves by dotted path ("health_check.interval"); a list
// is one leaf.
void flatten(const json& j, const std::string& prefix, std::map<std::string, json>& out) {
    if (j.is_object() && !(j.empty() && !prefix.empty())) {
        for (auto it = j.begin(); it != j.end(); ++it)
            flatten(it.value(), prefix.empty() ? it.key() : prefix + "." + it.key(), out);
        return;
    }
    out[prefix] = j;
}

// What a change of a VIP's settings changed, leaf by leaf, in the order of
// the VIP object: [{"key", "from", "to"}] (null: not set, e.g.
// conntrack_idle_timeout back to its default).
json settings_changes(const config::VipSpec& was, const config::VipSpec& now) {
    json before = was, after = now;
    before.erase("backends");
    after.erase("backends");
    // Written only when not the default: compared with its default's name.
    for (json* j : {&before, &after})
        if (!j->contains("announce"))
            (*j)["announce"] = announce::to_string(announce::Policy::kWhenServing);
    std::map<std::string, json> a, b;
    flatten(before, "", a);
    flatten(after, "", b);
    for (const auto& [key, value] : b) a.try_emplace(key, nullptr);
    json changes = json::array();
    for (const auto& [key, from] : a) {
        const auto it = b.find(key);
        const json to = it == b.end() ? json(nullptr) : it->second;
        if (from != to) changes.push_back({{"key", key}, {"from", from}, {"to", to}});
    }
    return changes;
}

// Merges `patch` into `target` key by key, objects recursively (a JSON
// merge patch, RFC 7396, without null meaning removal).
void merge_into(json& target, const json& patch) {
    for (auto it = patch.begin(); it != patch.end(); ++it) {
        if (it.value().is_object() && target.contains(it.key()) && target[it.key()].is_object())
            merge_into(target[it.key()], it.value());
        else
            target[it.key()] = it.value();
    }
}

class Handlers {
public:
    explicit Handlers(Services services) : s_(std::move(services)) {}

    void install(detail::Router& router, const std::shared_ptr<Handlers>& self) {
        auto bind = [self](void (Handlers::*fn)(const httplib::Request&, httplib::Response&)) {
            return [self, fn](const httplib::Request& req, httplib::Response& res) {
                ((*self).*fn)(req, res);
            };
        };
        router.add("GET", "/v1/status", bind(&Handlers::status));
        router.add("GET", "/v1/vips", bind(&Handlers::list_vips));
        router.add("POST", "/v1/vips", bind(&Handlers::add_vip));
        router.add("GET", "/v1/vip", bind(&Handlers::get_vip));
        router.add("DELETE", "/v1/vip", bind(&Handlers::delete_vip));
        router.add("PATCH", "/v1/vip", bind(&Handlers::patch_vip));
        router.add("GET", "/v1/backends", bind(&Handlers::list_backends));
        router.add("POST", "/v1/backends", bind(&Handlers::add_backend));
        router.add("DELETE", "/v1/backends", bind(&Handlers::delete_backend));
        router.add("PATCH", "/v1/backends", bind(&Handlers::patch_backend));
        router.add("GET", "/v1/backend/history", bind(&Handlers::backend_history));
        router.add("GET", "/v1/table", bind(&Handlers::table));
        router.add("GET", "/v1/lookup", bind(&Handlers::lookup));
        router.add("GET", "/v1/stats", bind(&Handlers::stats));
        router.add("POST", "/v1/reload", bind(&Handlers::reload));
        router.add("GET", "/v1/host", bind(&Handlers::host));
        router.add("POST", "/v1/host/drain", bind(&Handlers::drain_host));
        router.add("POST", "/v1/host/resume", bind(&Handlers::resume_host));
        router.add("GET", "/v1/conntrack/count", bind(&Handlers::conntrack_count));
        router.add("GET", "/v1/conntrack", bind(&Handlers::conntrack_list));
        router.add("POST", "/v1/conntrack/flush", bind(&Handlers::conntrack_flush));
        router.add("POST", "/v1/capture", bind(&Handlers::start_capture));
        router.add("GET", "/v1/capture", bind(&Handlers::capture_status));
        detail::add_probes(router, s_);
    }

private:
    template <typename R>
    std::expected<R, HttpError> call(std::function<R(control::Reconciler&)> fn) {
        return detail::on_control<R>(s_.loop, s_.call_timeout, std::move(fn));
    }

    // ?vip=KEY, normalised ("10.0.0.10:80" -> "10.0.0.10:80/tcp").
    static std::expected<std::string, HttpError> vip_param(const httplib::Request& req) {
        if (!req.has_param("vip"))
            return std::unexpected(HttpError{
                400, "missing query parameter vip, expected e.g. ?vip=198.51.100.10:80/tcp"});
        auto key = config::parse_vip_key(req.get_param_value("vip"));
        if (!key) return std::unexpected(HttpError{400, "vip: " + key.error()});
        return key->to_string();
    }

    static std::expected<net::IpAddress, HttpError> address_param(const httplib::Request& req) {
        if (!req.has_param("address"))
            return std::unexpected(
                HttpError{400, "missing query parameter address, expected e.g. &address=10.0.0.1"});
        auto address = net::IpAddress::parse(req.get_param_value("address"));
        if (!address) return std::unexpected(HttpError{400, "address: " + address.error()});
        return *address;
    }

    // ?NAME=1|true|0|false; absent: false.
    static std::expected<bool, HttpError> flag_param(const httplib::Request& req,
                                                     const std::string& name) {
        if (!req.has_param(name)) return false;
        const std::string value = req.get_param_value(name);
        if (value == "1" || value == "true") return true;
        if (value == "0" || value == "false") return false;
        return std::unexpected(
            HttpError{400, name + ": found \"" + value + "\", expected 1 or true (or 0, false)"});
    }

    // ?vip=KEY&address=ADDR: one backend of one VIP.
    struct BackendRef {
        std::string vip_key;
        net::IpAddress address;
    };
    static std::expected<BackendRef, HttpError> backend_params(const httplib::Request& req) {
        auto key = vip_param(req);
        if (!key) return std::unexpected(key.error());
        auto address = address_param(req);
        if (!address) return std::unexpected(address.error());
        return BackendRef{std::move(*key), *address};
    }

    static std::expected<json, HttpError> body_json(const httplib::Request& req,
                                                    const char* expected) {
        if (req.body.empty())
            return std::unexpected(
                HttpError{400, std::string("missing request body, expected ") + expected});
        if (auto bad = invalid_utf8_at(req.body))
            return std::unexpected(
                HttpError{400, "invalid UTF-8 in the body at byte " + std::to_string(*bad) +
                                   ": bodies are JSON in UTF-8, expected " + expected});
        // Duplicate keys: nlohmann keeps the last; a client that sends two
        // meant one of them, and which one is a guess. Keys are tracked per
        // object being parsed.
        std::vector<std::set<std::string>> open_objects;
        std::optional<std::string> duplicate;
        const json::parser_callback_t track = [&](int, json::parse_event_t event, json& parsed) {
            if (event == json::parse_event_t::object_start) {
                open_objects.emplace_back();
            } else if (event == json::parse_event_t::object_end) {
                if (!open_objects.empty()) open_objects.pop_back();
            } else if (event == json::parse_event_t::key && !open_objects.empty()) {
                const std::string& key = parsed.get_ref<const std::string&>();
                if (!open_objects.back().insert(key).second && !duplicate) duplicate = key;
            }
            return true;
        };
        json j;
        try {
            j = json::parse(req.body, track);
        } catch (const json::parse_error& e) {
            return std::unexpected(HttpError{
                400, "malformed JSON at byte " + std::to_string(e.byte) + ": " + e.what()});
        } catch (const json::out_of_range& e) {
            // e.g. 1e309: no double holds it
            return std::unexpected(HttpError{400, std::string("number out of range in the body (") +
                                                      e.what() + "), expected " + expected});
        }
        if (duplicate)
            return std::unexpected(HttpError{
                400, "duplicate key \"" + *duplicate + "\" in the body: each key may appear once"});
        if (!j.is_object())
            return std::unexpected(HttpError{
                400, "found " + std::string(j.type_name()) + " as the body, expected " + expected});
        return j;
    }

    std::expected<std::vector<control::VipStatus>, HttpError> all_status() {
        return call<std::vector<control::VipStatus>>(
            [](control::Reconciler& r) { return r.status(); });
    }

    std::expected<control::VipStatus, HttpError> one_status(const std::string& key) {
        auto status = call<std::optional<control::VipStatus>>(
            [key](control::Reconciler& r) { return r.vip_status(key); });
        if (!status) return std::unexpected(status.error());
        if (!*status) return std::unexpected(unknown_vip(key));
        return std::move(**status);
    }

    // A VIP's status and its backends' health details, taken together on
    // the control thread.
    struct StatusWithHealth {
        control::VipStatus status;
        detail::HealthDetails health;
    };
    std::expected<StatusWithHealth, HttpError> one_status_with_health(const std::string& key) {
        const Services& services = s_;
        auto status = call<std::optional<StatusWithHealth>>(
            [key, &services](control::Reconciler& r) -> std::optional<StatusWithHealth> {
                auto vip = r.vip_status(key);
                if (!vip) return std::nullopt;
                detail::HealthDetails health = detail::collect_health(services, {*vip});
                return StatusWithHealth{std::move(*vip), std::move(health)};
            });
        if (!status) return std::unexpected(status.error());
        if (!*status) return std::unexpected(unknown_vip(key));
        return std::move(**status);
    }

    // The same for the VIP the request names in its vip parameter.
    std::expected<control::VipStatus, HttpError> requested_status(const httplib::Request& req) {
        auto key = vip_param(req);
        if (!key) return std::unexpected(key.error());
        return one_status(*key);
    }
    std::expected<StatusWithHealth, HttpError> requested_status_with_health(
        const httplib::Request& req) {
        auto key = vip_param(req);
        if (!key) return std::unexpected(key.error());
        return one_status_with_health(*key);
    }

    void reject(const httplib::Request& req, httplib::Response& res, const HttpError& e) {
        if (e.status >= 500)
            spdlog::warn("api: failed {}: {} ({})", describe(req), e.message, e.status);
        else if (req.method != "GET")
            spdlog::info("api: rejected {}: {} ({})", describe(req), e.message, e.status);
        send_error(res, e);
    }

    // Validate, persist, apply, wait for the publish, answer with the VIP.
    // With dry_run=1 (backend changes): validate and predict only.
    // dry_run_handled: the caller took the dry_run parameter itself;
    // `amend` adds to a successful answer.
    void apply(const httplib::Request& req, httplib::Response& res, Mutator mutate,
               int success_status, bool dry_run_handled = false,
               std::function<void(json&)> amend = {}) {
        if (req.has_param("dry_run") && !dry_run_handled) {
            if (req.path != "/v1/backends")
                return reject(req, res,
                              {400,
                               "dry_run: only changes of backends (/v1/backends) and VIPs "
                               "(POST /v1/vips, PATCH /v1/vip) can be tried; found it on " +
                                   req.method + " " + req.path});
            auto dry_run = flag_param(req, "dry_run");
            if (!dry_run) return reject(req, res, dry_run.error());
            if (*dry_run) return predict(req, res, std::move(mutate));
        }
        const config::Settings settings = s_.settings->get();
        StateStore& state = s_.state;
        const VipsChanged on_vips_changed = s_.on_vips_changed;
        auto outcome = call<std::expected<Change, HttpError>>(
            [mutate, settings, &state,
             on_vips_changed](control::Reconciler& r) -> std::expected<Change, HttpError> {
                auto change = mutate(r.vips());
                if (!change) return change;
                if (auto invalid = validate_change(*change, settings))
                    return std::unexpected(*invalid);
                StateFile next = snapshot_state(r, state.config_digest());
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
        const Services& services = s_;
        auto read_back = [&] {
            return call<std::optional<StatusWithHealth>>(
                [key, &state,
                 &services](control::Reconciler& r) -> std::optional<StatusWithHealth> {
                    if (auto saved = state.save_current(r); !saved)
                        spdlog::warn("api: VIP {}: ids and epochs not saved: {}", key,
                                     saved.error().message());
                    auto status = r.vip_status(key);
                    if (!status) return std::nullopt;
                    detail::HealthDetails health = detail::collect_health(services, {*status});
                    return StatusWithHealth{std::move(*status), std::move(health)};
                });
        };
        auto after = read_back();
        const auto wait_until = std::chrono::steady_clock::now() + kPendingWait;
        while (after && *after && !(*after)->status.published &&
               (*after)->status.last_error.empty() && std::chrono::steady_clock::now() < wait_until)
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
        const detail::Counters counters = detail::read_counters(s_.data_plane, {vip});
        json body = detail::vip_detail_json(vip, counters, (*after)->health);
        if (amend) amend(body);
        if (vip.published) {
            spdlog::info("api: VIP {}: {} (epoch {}, checksum {})", key, change.what, vip.epoch,
                         detail::hex64(vip.checksum));
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

    // A dry run: the change validated exactly like the real one, then the
    // table it would give compared with the live one. Nothing is persisted
    // or published.
    void predict(const httplib::Request& req, httplib::Response& res, Mutator mutate) {
        struct Predicted {
            std::string vip_key;  // as the change names it
            control::TablePrediction table;
        };
        const config::Settings settings = s_.settings->get();
        auto outcome = call<std::expected<Predicted, HttpError>>(
            [mutate, settings](control::Reconciler& r) -> std::expected<Predicted, HttpError> {
                auto change = mutate(r.vips());
                if (!change) return std::unexpected(change.error());
                if (auto invalid = validate_change(*change, settings))
                    return std::unexpected(*invalid);
                auto next = find_vip(change->vips, change->vip_key);
                if (next == change->vips.end())
                    return std::unexpected(HttpError{500, "internal error: changed VIP missing"});
                auto predicted = r.predict(*next);
                if (!predicted) return std::unexpected(HttpError{409, predicted.error().message()});
                return Predicted{change->vip_key, std::move(*predicted)};
            });
        if (!outcome) return reject(req, res, outcome.error());
        if (!*outcome) return reject(req, res, outcome->error());
        const control::TablePrediction& p = (*outcome)->table;
        const double ring = p.ring_size ? static_cast<double>(p.ring_size) : 1.0;
        json backends = json::array();
        for (const auto& b : p.backends)
            backends.push_back(json{{"address", b.address.to_string()},
                                    {"slots_before", b.slots_before},
                                    {"slots_after", b.slots_after},
                                    {"share_before", b.slots_before / ring},
                                    {"share_after", b.slots_after / ring}});
        send_json(res, 200,
                  json{{"vip", (*outcome)->vip_key},
                       {"dry_run", true},
                       {"epoch", p.epoch},
                       {"ring_size", p.ring_size},
                       {"checksum", detail::hex64(p.checksum)},
                       {"slots_moved", p.slots_moved},
                       {"share_moved", p.slots_moved / ring},
                       {"backends", std::move(backends)}});
    }

    void status(const httplib::Request& req, httplib::Response& res) {
        struct Snapshot {
            std::vector<control::VipStatus> vips;
            bool published = false;
        };
        auto snap = call<Snapshot>([](control::Reconciler& r) {
            return Snapshot{r.status(), r.all_published()};
        });
        if (!snap) return reject(req, res, snap.error());
        std::optional<std::string> not_attached = s_.readiness ? s_.readiness() : std::nullopt;
        const std::optional<BgpInfo> bgp = s_.host.bgp ? s_.host.bgp() : std::nullopt;
        const std::uint32_t seed = s_.settings->get().hash_seed;
        json vips = json::array();
        for (const auto& v : snap->vips) {
            json j = detail::vip_summary_json(v);
            j["inputs_checksum"] = detail::hex64(datapath::table_inputs_checksum(v.spec, seed));
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
            vips.push_back(std::move(j));
        }
        const auto uptime = std::chrono::duration_cast<std::chrono::seconds>(
            std::chrono::steady_clock::now() - s_.info.started);
        send_json(
            res, 200,
            json{{"version", s_.info.version},
                 {"interface", s_.info.interface},
                 {"xdp_mode", s_.info.xdp_mode},
                 {"uptime_s", uptime.count()},
                 {"ready", !not_attached && snap->published},
                 {"last_reload", last_reload()},
                 {"hash_seed", seed},
                 {"bgp", detail::bgp_json(s_.host.state ? s_.host.state() : HostState{}, bgp)},
                 {"conntrack", s_.conntrack_status
                                   ? detail::conntrack_status_json(s_.conntrack_status->get())
                                   : json(nullptr)},
                 {"vips", std::move(vips)}});
    }

    // --- The connection table (docs/api.md). The scans run here, on the
    // server's thread; the control thread only hands over the VIPs.

    static constexpr std::size_t kDefaultListLimit = 100;
    static constexpr std::size_t kMaxListLimit = 100'000;

    // Query parameters other than `allowed` are refused: a typo (?backnd=)
    // would otherwise widen a count to the whole table.
    static std::optional<HttpError> only_params(const httplib::Request& req,
                                                std::initializer_list<std::string_view> allowed) {
        for (const auto& [name, value] : req.params) {
            if (std::find(allowed.begin(), allowed.end(), name) != allowed.end()) continue;
            std::string list;
            for (auto a : allowed) list += (list.empty() ? "" : ", ") + std::string(a);
            return HttpError{400, "unknown query parameter " + config::shown_value(name) +
                                      ", expected only " + list};
        }
        return std::nullopt;
    }

    // The VIPs as the reconciler has them and the backends as xlb_backends
    // has them now. A VIP named in the filter must exist (404).
    std::expected<conntrack::Context, HttpError> conntrack_context(
        const std::optional<std::string>& vip) {
        auto vips = call<std::vector<conntrack::VipInfo>>([](control::Reconciler& r) {
            std::vector<conntrack::VipInfo> out;
            for (const auto& v : r.vips()) out.push_back(conntrack::vip_info(v));
            return out;
        });
        if (!vips) return std::unexpected(vips.error());
        auto backends = s_.conntrack->backends();
        if (!backends) return std::unexpected(HttpError{500, backends.error().message()});
        conntrack::Context context(std::move(*vips), std::move(*backends));
        if (vip && !context.find_vip(*vip)) return std::unexpected(unknown_vip(*vip));
        return context;
    }

    static std::optional<HttpError> read_filter_text(const std::string& name,
                                                     const std::string& text,
                                                     conntrack::Filter& f) {
        if (name == "vip") {
            auto key = config::parse_vip_key(text);
            if (!key) return HttpError{400, "vip: " + key.error()};
            f.vip = key->to_string();
        } else if (name == "backend") {
            auto address = net::IpAddress::parse(text);
            if (!address) return HttpError{400, "backend: " + address.error()};
            f.backend = *address;
        } else if (name == "client") {
            auto prefix = net::Prefix::parse(text);
            if (!prefix) return HttpError{400, "client: " + prefix.error()};
            f.client = *prefix;
        } else if (name == "active_within") {
            auto d = config::parse_duration(text);
            if (!d) return HttpError{400, "active_within: " + d.error()};
            if (d->count() <= 0)
                return HttpError{400, "active_within: found " + text +
                                          ", expected a positive duration, e.g. 10s"};
            f.active_within = *d;
        }
        return std::nullopt;
    }

    static std::expected<conntrack::Filter, HttpError> filter_params(
        const httplib::Request& req, std::initializer_list<std::string_view> allowed) {
        if (auto bad = only_params(req, allowed)) return std::unexpected(*bad);
        conntrack::Filter f;
        for (const char* name : {"vip", "backend", "client", "active_within"}) {
            if (!req.has_param(name)) continue;
            if (auto bad = read_filter_text(name, req.get_param_value(name), f))
                return std::unexpected(*bad);
        }
        return f;
    }

    void conntrack_count(const httplib::Request& req, httplib::Response& res) {
        if (!s_.conntrack) return reject(req, res, {501, "this agent has no connection table"});
        auto filter = filter_params(req, {"vip", "backend", "active_within"});
        if (!filter) return reject(req, res, filter.error());
        auto context = conntrack_context(filter->vip);
        if (!context) return reject(req, res, context.error());
        auto report = conntrack::count(*s_.conntrack, *context, *filter);
        if (!report) return reject(req, res, {500, report.error().message()});
        send_json(res, 200, detail::conntrack_count_json(*report, filter->active_within));
    }

    void conntrack_list(const httplib::Request& req, httplib::Response& res) {
        if (!s_.conntrack) return reject(req, res, {501, "this agent has no connection table"});
        auto filter = filter_params(req, {"vip", "backend", "client", "limit"});
        if (!filter) return reject(req, res, filter.error());
        std::size_t limit = kDefaultListLimit;
        if (req.has_param("limit")) {
            const std::string text = req.get_param_value("limit");
            auto n = detail_parse_size(text);
            if (!n || *n < 1 || *n > kMaxListLimit)
                return reject(
                    req, res,
                    {400, "limit: found " + config::shown_value(text) + ", expected an integer 1-" +
                              std::to_string(kMaxListLimit)});
            limit = *n;
        }
        auto context = conntrack_context(filter->vip);
        if (!context) return reject(req, res, context.error());
        auto report = conntrack::list(*s_.conntrack, *context, *filter, limit);
        if (!report) return reject(req, res, {500, report.error().message()});
        send_json(res, 200, detail::conntrack_list_json(*report));
    }

    static std::optional<std::size_t> detail_parse_size(const std::string& text) {
        std::size_t n = 0;
        auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), n);
        if (text.empty() || ec != std::errc{} || end != text.data() + text.size())
            return std::nullopt;
        return n;
    }

    // POST /v1/capture: checks everything, takes the one capture slot, then
    // streams the capture (capture_stream.h) until its count, its duration,
    // or the client leaves.
    void start_capture(const httplib::Request& req, httplib::Response& res) {
        const bpf::LbProgram* program = s_.data_plane.capture_program();
        if (!program) return reject(req, res, {501, "this agent has no data path to capture on"});
        const char* expected =
            "an object with any of vip, backend, src, outcomes, count, duration_ms, snaplen, "
            "e.g. {\"vip\": \"198.51.100.10:80/tcp\", \"outcomes\": [\"drop\"], \"count\": 100}";
        json body = json::object();
        if (!req.body.empty()) {
            auto parsed = body_json(req, expected);
            if (!parsed) return reject(req, res, parsed.error());
            body = std::move(*parsed);
        }
        if (!body.is_object())
            return reject(req, res, {400, "found " + shown_json(body) + ", expected " + expected});
        capture::Selection selection;
        selection.outcomes = 0;
        detail::CaptureLimits limits;
        auto positive = [&](const std::string& key,
                            std::uint64_t max) -> std::expected<std::uint64_t, HttpError> {
            const json& v = body[key];
            if (!v.is_number_unsigned() || v.get<std::uint64_t>() == 0 ||
                v.get<std::uint64_t>() > max)
                return std::unexpected(HttpError{400, key + ": found " + shown_json(v) +
                                                          ", expected an integer 1-" +
                                                          std::to_string(max)});
            return v.get<std::uint64_t>();
        };
        auto text = [&](const std::string& key) -> std::expected<std::string, HttpError> {
            const json& v = body[key];
            if (!v.is_string())
                return std::unexpected(
                    HttpError{400, key + ": found " + shown_json(v) + ", expected a string"});
            return v.get<std::string>();
        };
        std::vector<const char*> names;
        for (std::uint32_t o = 0; o < XLB_OUT__MAX; ++o) names.push_back(outcome_name(o));
        for (auto it = body.begin(); it != body.end(); ++it) {
            const std::string& key = it.key();
            if (key == "vip") {
                auto t = text(key);
                if (!t) return reject(req, res, t.error());
                auto parsed = config::parse_vip_key(*t);
                if (!parsed) return reject(req, res, {400, "vip: " + parsed.error()});
                auto vip = one_status(parsed->to_string());
                if (!vip) return reject(req, res, vip.error());
                if (!vip->vip_id)
                    return reject(req, res,
                                  {409, "vip: " + parsed->to_string() +
                                            " is not in the data path yet (not applied)"});
                selection.vip_id = *vip->vip_id;
            } else if (key == "backend") {
                auto t = text(key);
                if (!t) return reject(req, res, t.error());
                auto address = net::IpAddress::parse(*t);
                if (!address) return reject(req, res, {400, "backend: " + address.error()});
                selection.backend = *address;
            } else if (key == "src") {
                auto t = text(key);
                if (!t) return reject(req, res, t.error());
                auto prefix = net::Prefix::parse(*t);
                if (!prefix) return reject(req, res, {400, "src: " + prefix.error()});
                selection.src = *prefix;
            } else if (key == "outcomes") {
                if (!it.value().is_array() || it.value().empty())
                    return reject(req, res,
                                  {400, "outcomes: found " + shown_json(it.value()) +
                                            ", expected a list such as [\"drop\", \"tx\"]"});
                for (const json& word : it.value()) {
                    if (!word.is_string())
                        return reject(
                            req, res,
                            {400, "outcomes: found " + shown_json(word) + ", expected a string"});
                    auto bits = capture::outcome_bits(word.get<std::string>(), names);
                    if (!bits) return reject(req, res, {400, bits.error().message()});
                    selection.outcomes |= *bits;
                }
            } else if (key == "count") {
                auto n = positive(key, 1'000'000'000);
                if (!n) return reject(req, res, n.error());
                limits.packets = *n;
            } else if (key == "duration_ms") {
                auto n = positive(key, 7ULL * 24 * 3600 * 1000);
                if (!n) return reject(req, res, n.error());
                limits.duration = std::chrono::milliseconds(*n);
            } else if (key == "snaplen") {
                auto n = positive(key, XLB_CAPTURE_DATA_MAX);
                if (!n) return reject(req, res, n.error());
                selection.snaplen = static_cast<std::uint32_t>(*n);
            } else {
                return reject(req, res,
                              {400, "unknown key " + config::shown_value(key) +
                                        ", expected only vip, backend, src, outcomes, count, "
                                        "duration_ms, snaplen"});
            }
        }
        if (selection.outcomes == 0) selection.outcomes = (1U << XLB_OUT__MAX) - 1;
        auto filter = capture::make_filter(selection);
        if (!filter) return reject(req, res, {400, filter.error().message()});
        auto pcap = capture::PcapStream::open(selection.snaplen);
        if (!pcap) return reject(req, res, {500, pcap.error().message()});
        bool idle = false;
        if (!capture_busy_->compare_exchange_strong(idle, true))
            return reject(req, res, {409, "a capture is already running (one at a time)"});
        auto session = capture::Session::start(*program, *filter);
        if (!session) {
            capture_busy_->store(false);
            return reject(req, res, {409, session.error().message()});
        }
        spdlog::info("api: capture started: {}", req.body.empty() ? "{}" : req.body);
        auto stream =
            std::make_shared<detail::CaptureStream>(std::move(*session), std::move(*pcap), limits,
                                                    [busy = capture_busy_] { busy->store(false); });
        res.status = 200;
        res.set_chunked_content_provider(
            "application/vnd.xlb.capture",
            [stream](std::size_t, httplib::DataSink& sink) {
                auto frame = stream->next(std::chrono::milliseconds(1000));
                if (!frame) {
                    sink.done();
                    return true;
                }
                // false: the client is gone; the stream's end frees the slot
                return sink.write(frame->data(), frame->size());
            },
            [stream](bool) { spdlog::info("api: capture ended"); });
    }

    // GET /v1/capture: whether a capture runs, and its kernel counters.
    void capture_status(const httplib::Request&, httplib::Response& res) {
        const bpf::LbProgram* program = s_.data_plane.capture_program();
        json body = {{"available", program != nullptr}, {"active", capture_busy_->load()}};
        if (program) {
            const auto c = program->capture_counters();
            body["capturing"] = program->capture_on();
            body["matched"] = c.matched;
            body["lost"] = c.lost;
        }
        send_json(res, 200, body);
    }

    void conntrack_flush(const httplib::Request& req, httplib::Response& res) {
        if (!s_.conntrack) return reject(req, res, {501, "this agent has no connection table"});
        const char* expected =
            "an object with at least one of vip, backend, client, stale: true (and dry_run), "
            "e.g. {\"backend\": \"203.0.113.11\"}";
        auto body = body_json(req, expected);
        if (!body) return reject(req, res, body.error());
        conntrack::Filter filter;
        bool dry_run = false;
        for (auto it = body->begin(); it != body->end(); ++it) {
            const std::string& key = it.key();
            if (key == "stale" || key == "dry_run") {
                if (!it.value().is_boolean())
                    return reject(req, res,
                                  {400, key + ": found " + shown_json(it.value()) +
                                            ", expected true or false"});
                (key == "stale" ? filter.stale_only : dry_run) = it.value().get<bool>();
            } else if (key == "vip" || key == "backend" || key == "client") {
                if (!it.value().is_string())
                    return reject(
                        req, res,
                        {400, key + ": found " + shown_json(it.value()) + ", expected a string"});
                if (auto bad = read_filter_text(key, it.value().get<std::string>(), filter))
                    return reject(req, res, *bad);
            } else {
                return reject(req, res,
                              {400, "unknown key " + config::shown_value(key) +
                                        ", expected only vip, backend, client, stale, dry_run"});
            }
        }
        if (!filter.has_selector())
            return reject(req, res,
                          {400,
                           "nothing selected: give vip, backend, client or stale: true "
                           "(the whole table is never flushed at once)"});
        auto context = conntrack_context(filter.vip);
        if (!context) return reject(req, res, context.error());
        auto report = conntrack::flush(*s_.conntrack, *context, filter, dry_run);
        if (!report) return reject(req, res, {500, report.error().message()});
        if (!dry_run)
            spdlog::info("api: connection table flushed: {} entries deleted of {} matched ({})",
                         report->deleted, report->matched, describe(req));
        send_json(res, 200, detail::conntrack_flush_json(*report));
    }

    // The host's drain state and announcements (docs/scale-out.md).
    void host(const httplib::Request& req, httplib::Response& res) {
        if (!s_.host.state) return reject(req, res, {501, "this agent has no host control"});
        const std::optional<BgpInfo> bgp = s_.host.bgp ? s_.host.bgp() : std::nullopt;
        send_json(res, 200, detail::bgp_json(s_.host.state(), bgp));
    }
    void drain_host(const httplib::Request& req, httplib::Response& res) {
        set_drained(req, res, true);
    }
    void resume_host(const httplib::Request& req, httplib::Response& res) {
        set_drained(req, res, false);
    }
    void set_drained(const httplib::Request& req, httplib::Response& res, bool drained) {
        if (!s_.host.set_drained) return reject(req, res, {501, "this agent has no host control"});
        if (!req.body.empty() && req.body != "{}")
            return reject(req, res, {400, "found a body, expected none (or {})"});
        auto state = s_.host.set_drained(drained);
        if (!state) return reject(req, res, {409, state.error().message()});
        spdlog::info("api: host {} ({})", drained ? "drained: every VIP withdrawn" : "resumed",
                     describe(req));
        const std::optional<BgpInfo> bgp = s_.host.bgp ? s_.host.bgp() : std::nullopt;
        send_json(res, 200, detail::bgp_json(*state, bgp));
    }

    json last_reload() const {
        if (!s_.reloads) return nullptr;
        auto last = s_.reloads->last();
        return last ? detail::last_reload_json(*last) : json(nullptr);
    }

    // Re-reads the configuration file; the answer says what changed or why
    // nothing did. Body (optional): {"allow_disruptive": true}.
    void reload(const httplib::Request& req, httplib::Response& res) {
        if (!s_.reload) return reject(req, res, {501, "this agent cannot reload"});
        bool allow_disruptive = false;
        if (!req.body.empty()) {
            auto body = body_json(req, "an object {\"allow_disruptive\": true|false}");
            if (!body) return reject(req, res, body.error());
            for (auto it = body->begin(); it != body->end(); ++it) {
                if (it.key() != "allow_disruptive")
                    return reject(
                        req, res,
                        {400, "unknown key \"" + it.key() + "\", expected only allow_disruptive"});
                if (!it.value().is_boolean())
                    return reject(
                        req, res,
                        {400, "allow_disruptive: found " + std::string(it.value().type_name()) +
                                  ", expected true or false"});
                allow_disruptive = it.value().get<bool>();
            }
        }
        const ReloadReport report = s_.reload(allow_disruptive);
        send_json(res, detail::reload_http_status(report.outcome),
                  detail::reload_report_json(report));
    }

    void list_vips(const httplib::Request& req, httplib::Response& res) {
        auto all = all_status();
        if (!all) return reject(req, res, all.error());
        json vips = json::array();
        for (const auto& v : *all) {
            json j = detail::vip_summary_json(v);
            j["spec"] = v.spec;
            vips.push_back(std::move(j));
        }
        send_json(res, 200, json{{"vips", std::move(vips)}});
    }

    void get_vip(const httplib::Request& req, httplib::Response& res) {
        auto vip = requested_status_with_health(req);
        if (!vip) return reject(req, res, vip.error());
        send_json(
            res, 200,
            detail::vip_detail_json(
                vip->status, detail::read_counters(s_.data_plane, {vip->status}), vip->health));
    }

    void add_vip(const httplib::Request& req, httplib::Response& res) {
        auto dry_run = flag_param(req, "dry_run");
        if (!dry_run) return reject(req, res, dry_run.error());
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
        if (*dry_run) {
            auto checked = try_change(std::move(mutate));
            if (!checked) return reject(req, res, checked.error());
            return send_json(res, 200,
                             json{{"vip", spec->key()}, {"dry_run", true}, {"spec", *spec}});
        }
        // apply() takes dry_run for backends only: this one is done.
        apply(req, res, std::move(mutate), 201, /*dry_run_handled=*/true);
    }

    // PATCH /v1/vip?vip=KEY[&dry_run=1][&allow_disruptive=1]: the given
    // settings of an existing VIP (its key and backends stay), validated like
    // the file; a change that moves established flows (hash, ring_size) only
    // with allow_disruptive, as reloads.
    void patch_vip(const httplib::Request& req, httplib::Response& res) {
        auto key = vip_param(req);
        if (!key) return reject(req, res, key.error());
        auto dry_run = flag_param(req, "dry_run");
        if (!dry_run) return reject(req, res, dry_run.error());
        auto allow_disruptive = flag_param(req, "allow_disruptive");
        if (!allow_disruptive) return reject(req, res, allow_disruptive.error());
        auto body =
            body_json(req, "an object with the VIP settings to change, e.g. {\"ring_size\": 251}");
        if (!body) return reject(req, res, body.error());
        if (!body->is_object() || body->empty())
            return reject(req, res,
                          {400, "found " + shown_json(*body) +
                                    ", expected an object with at least one VIP setting, e.g. "
                                    "{\"health_check\": {\"type\": \"tcp\"}}"});
        for (const char* fixed : {"address", "port", "protocol"})
            if (body->contains(fixed))
                return reject(req, res,
                              {400, std::string(fixed) +
                                        ": a VIP's address, port and protocol are its key and "
                                        "do not change (add a VIP with the new key, then "
                                        "delete this one)"});
        if (body->contains("backends"))
            return reject(req, res,
                          {400, "backends: change them with /v1/backends (POST, PATCH, DELETE)"});
        const bool allow = *allow_disruptive;
        auto changes = std::make_shared<json>();
        const config::Settings settings = s_.settings->get();
        Mutator mutate =
            [key = *key, patch = *body, allow, changes,
             settings](std::vector<config::VipSpec> vips) -> std::expected<Change, HttpError> {
            auto it = find_vip(vips, key);
            if (it == vips.end()) return std::unexpected(unknown_vip(key));
            json merged = *it;
            merge_into(merged, patch);
            auto next = config::vip_from_json(merged);
            if (!next)
                return std::unexpected(HttpError{400, "invalid VIP " + key + ": " + next.error()});
            // Invalid before disruptive: a change that could never apply is
            // not worth confirming.
            {
                std::vector<config::VipSpec> candidate = vips;
                *find_vip(candidate, key) = *next;
                if (auto invalid = validate_change(
                        Change{std::move(candidate), key, false, std::nullopt, ""}, settings))
                    return std::unexpected(*invalid);
            }
            if (const auto disruptive = config::disruptive_vip_changes(*it, *next);
                !disruptive.empty() && !allow) {
                std::string message = "refused: ";
                for (std::size_t i = 0; i < disruptive.size(); ++i)
                    message += (i ? "; " : "") + disruptive[i];
                return std::unexpected(HttpError{
                    409, message +
                             " (established flows of a VIP without conntrack, and flows other "
                             "LB hosts receive, change backend; confirm with allow_disruptive=1)"});
            }
            *changes = settings_changes(*it, *next);
            std::string what = "settings changed:";
            for (const json& c : *changes) what += " " + c.at("key").get<std::string>();
            if (changes->empty()) what = "settings unchanged";
            *it = std::move(*next);
            return Change{std::move(vips), key, false, std::nullopt, what};
        };
        if (*dry_run) {
            auto checked = try_change(std::move(mutate));
            if (!checked) return reject(req, res, checked.error());
            json spec = *checked;
            return send_json(res, 200,
                             json{{"vip", *key},
                                  {"dry_run", true},
                                  {"changes", *changes},
                                  {"spec", std::move(spec)}});
        }
        apply(req, res, std::move(mutate), 200, /*dry_run_handled=*/true,
              [changes](json& answer) { answer["changes"] = *changes; });
    }

    // A change validated exactly as apply() would, on the control thread,
    // then dropped: the VIP it would give, or why it is refused.
    std::expected<config::VipSpec, HttpError> try_change(Mutator mutate) {
        const config::Settings settings = s_.settings->get();
        auto outcome = call<std::expected<config::VipSpec, HttpError>>(
            [mutate = std::move(mutate),
             settings](control::Reconciler& r) -> std::expected<config::VipSpec, HttpError> {
                auto change = mutate(r.vips());
                if (!change) return std::unexpected(change.error());
                if (auto invalid = validate_change(*change, settings))
                    return std::unexpected(*invalid);
                auto it = find_vip(change->vips, change->vip_key);
                if (it == change->vips.end())
                    return std::unexpected(HttpError{500, "internal error: changed VIP missing"});
                return *it;
            });
        if (!outcome) return std::unexpected(outcome.error());
        return std::move(*outcome);
    }

    void delete_vip(const httplib::Request& req, httplib::Response& res) {
        auto key = vip_param(req);
        if (!key) return reject(req, res, key.error());
        apply(
            req, res,
            [key = *key](std::vector<config::VipSpec> vips) -> std::expected<Change, HttpError> {
                auto it = find_vip(vips, key);
                if (it == vips.end()) return std::unexpected(unknown_vip(key));
                vips.erase(it);
                return Change{std::move(vips), key, true, std::nullopt, "deleted"};
            },
            200);
    }

    static json backend_list_json(const control::VipStatus& vip, const detail::Counters& counters,
                                  const detail::HealthDetails& health) {
        json backends = json::array();
        for (const auto& b : vip.backends)
            backends.push_back(detail::backend_json(vip, b, counters, health));
        return json{{"vip", vip.spec.key()},
                    {"epoch", vip.epoch},
                    {"checksum", detail::hex64(vip.checksum)},
                    {"backends", std::move(backends)}};
    }

    // One VIP's backends (?vip=), or every VIP's: {"vips": [...]}.
    void list_backends(const httplib::Request& req, httplib::Response& res) {
        if (!req.has_param("vip")) {
            const Services& services = s_;
            auto all = call<std::pair<std::vector<control::VipStatus>, detail::HealthDetails>>(
                [&services](control::Reconciler& r) {
                    auto vips = r.status();
                    auto health = detail::collect_health(services, vips);
                    return std::pair{std::move(vips), std::move(health)};
                });
            if (!all) return reject(req, res, all.error());
            const detail::Counters counters = detail::read_counters(s_.data_plane, all->first);
            json list = json::array();
            for (const auto& vip : all->first)
                list.push_back(backend_list_json(vip, counters, all->second));
            return send_json(res, 200, json{{"vips", std::move(list)}});
        }
        auto key = vip_param(req);
        if (!key) return reject(req, res, key.error());
        auto found = one_status_with_health(*key);
        if (!found) return reject(req, res, found.error());
        const detail::Counters counters = detail::read_counters(s_.data_plane, {found->status});
        send_json(res, 200, backend_list_json(found->status, counters, found->health));
    }

    // One backend's last verdict changes, oldest first. A dedicated path
    // rather than a field of every backend object: a history may hold up to
    // kMaxHealthHistory transitions, and backend objects travel in every
    // VIP object and every change's answer.
    void backend_history(const httplib::Request& req, httplib::Response& res) {
        auto ref = backend_params(req);
        if (!ref) return reject(req, res, ref.error());
        struct Found {
            control::BackendStatus backend;
            bool vip_checked = false;
            std::optional<std::vector<health::Transition>> history;
        };
        const Services& services = s_;
        auto found = call<std::expected<Found, HttpError>>(
            [ref = *ref, &services](control::Reconciler& r) -> std::expected<Found, HttpError> {
                auto vip = r.vip_status(ref.vip_key);
                if (!vip) return std::unexpected(unknown_vip(ref.vip_key));
                auto b = std::find_if(
                    vip->backends.begin(), vip->backends.end(),
                    [&](const control::BackendStatus& x) { return x.address == ref.address; });
                if (b == vip->backends.end())
                    return std::unexpected(unknown_backend(ref.vip_key, ref.address));
                Found out{std::move(*b),
                          vip->spec.health_check.type != config::HealthCheckType::kNone,
                          std::nullopt};
                if (services.health_history)
                    out.history = services.health_history(ref.vip_key, ref.address);
                return out;
            });
        if (!found) return reject(req, res, found.error());
        if (!*found) return reject(req, res, found->error());
        send_json(
            res, 200,
            detail::backend_history_json(ref->vip_key, (*found)->backend, (*found)->vip_checked,
                                         (*found)->history, s_.settings->get().health_history));
    }

    void add_backend(const httplib::Request& req, httplib::Response& res) {
        auto key = vip_param(req);
        if (!key) return reject(req, res, key.error());
        auto body =
            body_json(req, "a backend object, e.g. {\"address\": \"10.0.0.1\", \"weight\": 100}");
        if (!body) return reject(req, res, body.error());
        auto backend = config::backend_from_json(*body);
        if (!backend) return reject(req, res, {400, "invalid backend: " + backend.error()});
        apply(
            req, res,
            [key = *key,
             b = *backend](std::vector<config::VipSpec> vips) -> std::expected<Change, HttpError> {
                auto it = find_vip(vips, key);
                if (it == vips.end()) return std::unexpected(unknown_vip(key));
                if (it->find_backend(b.address))
                    return std::unexpected(HttpError{
                        409, "VIP " + key + " already has backend " + b.address.to_string() +
                                 " (change it with PATCH /v1/backends)"});
                it->backends.push_back(b);
                const std::size_t index = it->backends.size() - 1;
                return Change{std::move(vips), key, false, index,
                              "backend " + b.address.to_string() + " added (weight " +
                                  std::to_string(b.weight) + ", " + config::to_string(b.state) +
                                  ")"};
            },
            201);
    }

    void delete_backend(const httplib::Request& req, httplib::Response& res) {
        auto ref = backend_params(req);
        if (!ref) return reject(req, res, ref.error());
        apply(
            req, res,
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

    void patch_backend(const httplib::Request& req, httplib::Response& res) {
        auto ref = backend_params(req);
        if (!ref) return reject(req, res, ref.error());
        const char* expected =
            "an object with \"weight\" (0-10000) and/or \"state\" "
            "(active, drain or disabled), e.g. {\"weight\": 50}";
        auto body = body_json(req, expected);
        if (!body) return reject(req, res, body.error());
        std::optional<std::uint32_t> weight;
        std::optional<config::AdminState> state;
        for (auto it = body->begin(); it != body->end(); ++it) {
            if (it.key() == "weight") {
                if (!it.value().is_number_unsigned() ||
                    it.value().get<std::uint64_t>() > UINT32_MAX)
                    return reject(
                        req, res,
                        {400, "weight: found " + shown_json(it.value()) +
                                  ", expected an integer 0-" + std::to_string(config::kMaxWeight)});
                weight = it.value().get<std::uint32_t>();
            } else if (it.key() == "state") {
                std::optional<config::AdminState> parsed;
                if (it.value().is_string())
                    parsed = config::parse_admin_state(it.value().get<std::string>());
                if (!parsed)
                    return reject(req, res,
                                  {400, "state: found " + shown_json(it.value()) +
                                            ", expected active, drain or disabled"});
                state = parsed;
            } else {
                return reject(req, res,
                              {400, "found unknown field " + config::shown_value(it.key()) +
                                        ", expected " + expected});
            }
        }
        if (!weight && !state)
            return reject(req, res, {400, "nothing to change, expected " + std::string(expected)});
        apply(
            req, res,
            [key = ref->vip_key, address = ref->address, weight,
             state](std::vector<config::VipSpec> vips) -> std::expected<Change, HttpError> {
                auto found = find_backend(vips, key, address);
                if (!found) return std::unexpected(found.error());
                auto b = found->it;
                std::string what = "backend " + address.to_string();
                if (weight && *weight != b->weight) {
                    what +=
                        " weight " + std::to_string(b->weight) + " -> " + std::to_string(*weight);
                    b->weight = *weight;
                }
                if (state && *state != b->state) {
                    what += std::string(" state ") + config::to_string(b->state) + " -> " +
                            config::to_string(*state);
                    b->state = *state;
                }
                if (what == "backend " + address.to_string()) what += " unchanged";
                const auto index = static_cast<std::size_t>(b - found->list.begin());
                return Change{std::move(vips), key, false, index, what};
            },
            200);
    }

    void table(const httplib::Request& req, httplib::Response& res) {
        auto vip = requested_status(req);
        if (!vip) return reject(req, res, vip.error());
        send_json(res, 200, detail::table_json(*vip));
    }

    void lookup(const httplib::Request& req, httplib::Response& res) {
        auto key = vip_param(req);
        if (!key) return reject(req, res, key.error());
        if (!req.has_param("src"))
            return reject(req, res,
                          {400, "missing query parameter src, expected e.g. &src=192.0.2.7:40000"});
        auto src = net::Endpoint::parse(req.get_param_value("src"));
        if (!src) return reject(req, res, {400, "src: " + src.error()});
        auto vip = one_status(*key);
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
            if (ec != std::errc() || end != text.data() + text.size() || value == 0 ||
                value > 65535)
                return reject(req, res,
                              {400, "dport: found " + config::shown_value(text) +
                                        ", expected a port 1-65535"});
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

        std::optional<std::vector<std::uint32_t>> ring;
        if (vip->vip_id) {
            auto live = s_.data_plane.ring(*vip->vip_id);
            if (live)
                ring = std::move(*live);
            else if (live.error().code != ENOENT)
                return reject(req, res,
                              {503, "reading the live table failed: " + live.error().message()});
        }
        std::optional<std::span<const std::uint32_t>> view;
        if (ring) view = std::span<const std::uint32_t>(*ring);
        const LookupResult r = api::lookup(spec, *src, dport, s_.settings->get().hash_seed, view);

        json backend = nullptr;
        if (r.backend_id) {
            for (const auto& b : vip->backends)
                if (b.id == r.backend_id) backend = b.address.to_string();
        }
        auto opt = [](const std::optional<std::uint32_t>& v) {
            return v ? json(*v) : json(nullptr);
        };
        send_json(res, 200,
                  json{{"vip", *key},
                       {"src", src->to_string()},
                       {"dport", dport},
                       {"proto", config::to_string(spec.protocol)},
                       {"hash", r.hash},
                       {"ring_size", r.ring_size},
                       {"slot", opt(r.slot)},
                       {"backend_id", opt(r.backend_id)},
                       {"backend", backend},
                       {"outcome", r.outcome},
                       {"epoch", vip->epoch}});
    }

    void stats(const httplib::Request& req, httplib::Response& res) {
        std::optional<std::string> only;
        if (req.has_param("vip")) {
            auto key = vip_param(req);
            if (!key) return reject(req, res, key.error());
            only = *key;
        }
        auto all = all_status();
        if (!all) return reject(req, res, all.error());
        std::vector<control::VipStatus> vips;
        for (auto& v : *all)
            if (!only || v.spec.key() == *only) vips.push_back(std::move(v));
        if (only && vips.empty()) return reject(req, res, unknown_vip(*only));
        auto outcomes = s_.data_plane.outcomes();
        if (!outcomes)
            return reject(req, res,
                          {503, "reading counters failed: " + outcomes.error().message()});
        json by_outcome = json::object();
        for (std::uint32_t i = 0; i < XLB_OUT__MAX; ++i)
            by_outcome[outcome_name(i)] = (*outcomes)[i];
        const detail::Counters counters = detail::read_counters(s_.data_plane, vips);
        json list = json::array();
        for (const auto& v : vips) list.push_back(detail::vip_stats_json(v, counters));
        send_json(res, 200, json{{"outcomes", std::move(by_outcome)}, {"vips", std::move(list)}});
    }

    Services s_;
    // The one capture at a time (shared with the running stream, which
    // frees it when it ends).
    std::shared_ptr<std::atomic<bool>> capture_busy_ = std::make_shared<std::atomic<bool>>(false);
};

// Whether something accepts connections on the socket at `path`: 1 yes,
// 0 no (stale), or the errno that prevented finding out.
std::expected<bool, int> socket_answers(const std::string& path) {
    int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) return std::unexpected(errno);
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    std::memcpy(addr.sun_path, path.c_str(), path.size() + 1);
    const int rc = ::connect(fd, reinterpret_cast<const sockaddr*>(&addr), sizeof(addr));
    const int err = errno;
    ::close(fd);
    if (rc == 0) return true;
    if (err == ECONNREFUSED || err == ENOENT) return false;
    return std::unexpected(err);
}

}  // namespace

struct ApiServer::Impl {
    detail::Router router;
};

ApiServer::ApiServer(Services services, Options options)
    : services_(std::move(services)),
      options_(std::move(options)),
      impl_(std::make_unique<Impl>()) {
    auto handlers = std::make_shared<Handlers>(services_);
    handlers->install(impl_->router, handlers);
}

ApiServer::~ApiServer() { stop(); }

Result<void> ApiServer::start() {
    const std::string& path = options_.socket_path;
    const std::string where = "API socket " + path;
    // A step that failed (with its errno, if any), or an error from below.
    auto fail = [&](std::string step, int err = 0) -> Result<void> {
        return std::unexpected(make_error(err, std::move(step)).add_context(where));
    };
    auto failed = [&](Error e) -> Result<void> {
        return std::unexpected(std::move(e).add_context(where));
    };
    if (path.empty() || path.size() > config::kMaxSocketPathBytes)
        return fail("expected a path of 1-" + std::to_string(config::kMaxSocketPathBytes) +
                    " bytes");
    // before anything is created: an unknown group leaves nothing behind
    std::optional<gid_t> group;
    if (!options_.group.empty()) {
        auto resolved = resolve_group(options_.group);
        if (!resolved) return failed(std::move(resolved.error()));
        group = *resolved;
    }
    if (auto made = files::make_dirs(files::parent_dir(path)); !made)
        return failed(std::move(made.error()));

    struct stat st {};
    if (::lstat(path.c_str(), &st) == 0) {
        if (!S_ISSOCK(st.st_mode))
            return fail("exists and is not a socket; refusing to replace it");
        auto answers = socket_answers(path);
        if (!answers) return fail("cannot tell whether another agent uses it", answers.error());
        if (*answers) return fail("another agent is serving on it; stop it first");
        if (::unlink(path.c_str()) != 0 && errno != ENOENT)
            return fail("remove stale socket", errno);
        spdlog::info("api: removed stale socket {}", path);
    } else if (errno != ENOENT) {
        return fail("stat", errno);
    }

    // The socket is bound, given its mode and group, and only then listens:
    // nobody connects before the permissions hold.
    auto bound = detail::bind_unix(path);
    if (!bound) return failed(std::move(bound.error()));
    const int fd = *bound;
    created_socket_ = true;
    auto undo = [&](Error e) -> Result<void> {
        ::close(fd);
        ::unlink(path.c_str());
        created_socket_ = false;
        return failed(std::move(e));
    };
    if (::chmod(path.c_str(), 0660) != 0) return undo(make_error(errno, "chmod 0660"));
    if (group && ::chown(path.c_str(), static_cast<uid_t>(-1), *group) != 0)
        return undo(make_error(errno, "chown to group " + options_.group));
    if (auto listening = detail::start_listening(fd); !listening)
        return undo(std::move(listening.error()));

    server_ = std::make_unique<detail::GuardedServer>(options_.limits, true);
    server_->set_payload_max_length(options_.max_body_bytes);
    impl_->router.install(*server_);
    server_->adopt(fd);
    thread_ = std::thread([server = server_.get()] { server->serve(); });
    // stop() only works once the server runs: wait for it.
    for (int i = 0; i < 2000 && !server_->is_running(); ++i)
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
    spdlog::info("api: serving on {}", path);
    return {};
}

void ApiServer::stop() {
    if (server_) {
        server_->stop();
        if (thread_.joinable()) thread_.join();
        server_.reset();
    }
    if (created_socket_) {
        ::unlink(options_.socket_path.c_str());
        created_socket_ = false;
        spdlog::info("api: stopped serving on {}", options_.socket_path);
    }
}

}  // namespace xlb::api
