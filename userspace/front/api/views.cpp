// SPDX-License-Identifier: Apache-2.0
// JSON views of the reconciler's status, HTTP helpers and the health probes.
#include <spdlog/spdlog.h>

#include <cinttypes>
#include <cstdio>
#include <memory>

#include "internal.h"
#include "reload_json.h"
#include "xlb/api/status_json.h"
#include "xlb/config/json.h"

namespace xlb::api {

ProbeResult check_live(const control::ControlLoop& loop, std::chrono::milliseconds max_age) {
    const auto now = control::Clock::now();
    auto age = [&](control::Clock::time_point beat) {
        return std::chrono::duration_cast<std::chrono::milliseconds>(now - beat);
    };
    const auto control_age = age(loop.control_heartbeat());
    const auto worker_age = age(loop.worker_heartbeat());
    std::string stuck;
    if (control_age > max_age)
        stuck += "control thread last answered " + std::to_string(control_age.count()) + " ms ago";
    if (worker_age > max_age) {
        if (!stuck.empty()) stuck += "; ";
        stuck +=
            "table worker thread last answered " + std::to_string(worker_age.count()) + " ms ago";
    }
    if (!stuck.empty())
        return {false, stuck + " (limit " + std::to_string(max_age.count()) + " ms)"};
    return {true, "ok"};
}

ProbeResult check_ready(const Services& services) {
    if (services.readiness) {
        if (auto reason = services.readiness()) return {false, "not ready: " + *reason};
    }
    auto unpublished = detail::on_control<std::vector<std::string>>(
        services.loop, std::min(services.call_timeout, std::chrono::milliseconds(5000)),
        [](control::Reconciler& r) {
            std::vector<std::string> out;
            if (r.all_published()) return out;
            for (const control::VipStatus& v : r.status()) {
                if (v.published) continue;
                std::string line = v.spec.key();
                if (!v.last_error.empty()) line += " (" + v.last_error + ")";
                out.push_back(std::move(line));
            }
            if (out.empty()) out.push_back("removed VIPs are still being torn down");
            return out;
        });
    if (!unpublished) return {false, "not ready: " + unpublished.error().message};
    if (!unpublished->empty()) {
        std::string text = "not ready: tables not yet published for ";
        for (std::size_t i = 0; i < unpublished->size(); ++i)
            text += (i ? ", " : "") + (*unpublished)[i];
        return {false, text};
    }
    return {true, "ok"};
}

std::string hex64(std::uint64_t value) {
    char buf[17];
    std::snprintf(buf, sizeof(buf), "%016" PRIx64, value);
    return buf;
}

namespace detail {

Counters read_counters(const DataPlaneView& view, const std::vector<control::VipStatus>& vips) {
    Counters c;
    // The first failure is kept, naming whose counters could not be read.
    auto note = [&](Error& e, std::string whose) {
        if (!c.error) c.error = std::move(e.add_context(std::move(whose)));
    };
    for (const control::VipStatus& v : vips) {
        if (v.vip_id) {
            if (auto s = view.vip_stats(*v.vip_id))
                c.vips[*v.vip_id] = *s;
            else
                note(s.error(), "VIP " + v.spec.key());
            if (auto h = view.vip_hints(*v.vip_id))
                c.vip_hints[*v.vip_id] = *h;
            else
                note(h.error(), "second-chance hints of VIP " + v.spec.key());
            if (auto d = view.vip_drops(*v.vip_id))
                c.vip_drops[*v.vip_id] = *d;
            else
                note(d.error(), "drops by reason of VIP " + v.spec.key());
            if (auto k = view.vip_cookies(*v.vip_id))
                c.vip_cookies[*v.vip_id] = *k;
            else
                note(k.error(), "SYN cookie counters of VIP " + v.spec.key());
            if (routes_quic(v.spec)) {
                if (auto q = view.vip_quic(*v.vip_id))
                    c.vip_quic[*v.vip_id] = *q;
                else
                    note(q.error(), "QUIC counters of VIP " + v.spec.key());
            }
        }
        for (const control::BackendStatus& b : v.backends) {
            if (!b.id) continue;
            if (auto s = view.backend_stats(*b.id))
                c.backends[*b.id] = *s;
            else
                note(s.error(), "backend " + b.address.to_string() + " of VIP " + v.spec.key());
        }
    }
    return c;
}

void add_connections(const Services& services, Counters& counters) {
    if (services.conntrack_status)
        counters.new_flows_per_s = services.conntrack_status->get().backend_new_flows_per_s;
    if (!services.connections) return;
    auto report = services.connections->get();
    if (!report) {
        if (!counters.error)
            counters.error = std::move(report.error().add_context("count connections per backend"));
        return;
    }
    counters.connections = std::move(report->backends);
}

namespace {

json optional_id(const std::optional<std::uint32_t>& id) { return id ? json(*id) : json(nullptr); }

// A VIP without a health check never probes its backends: the reconciler
// takes them as fit, and the API calls them "unchecked", never "healthy".
bool health_checked(const config::VipSpec& vip) {
    return vip.health_check.type != config::HealthCheckType::kNone;
}

std::size_t healthy_count(const control::VipStatus& vip) {
    if (!health_checked(vip.spec)) return 0;
    std::size_t n = 0;
    for (const auto& b : vip.backends)
        if (b.health == control::Health::kHealthy) ++n;
    return n;
}

std::string health_text(const config::VipSpec& vip, control::Health health) {
    return health_checked(vip) ? control::to_string(health) : kUnchecked;
}

double share(std::uint64_t part, std::uint64_t whole) {
    return whole == 0 ? 0.0 : static_cast<double>(part) / static_cast<double>(whole);
}

std::uint64_t table_slots(const control::VipStatus& vip) {
    std::uint64_t total = 0;
    for (const auto& b : vip.backends) total += b.slots;
    return total;
}

}  // namespace

HealthDetails collect_health(const Services& services,
                             const std::vector<control::VipStatus>& vips) {
    HealthDetails out;
    if (!services.health) return out;
    for (const control::VipStatus& v : vips) {
        const std::string key = v.spec.key();
        for (const control::BackendStatus& b : v.backends)
            if (auto snap = services.health(key, b.address))
                out.emplace(std::pair{key, b.address}, std::move(*snap));
    }
    return out;
}

namespace {

// Seconds from a steady-clock instant to now (negative: in the future).
double seconds_ago(health::TimePoint at) {
    return std::chrono::duration<double>(health::Clock::now() - at).count();
}

double seconds_until(health::TimePoint at) {
    return std::chrono::duration<double>(at - health::Clock::now()).count();
}

// The health checker's fields of a backend object; null without a check.
void add_health_fields(json& j, const BackendHealthInfo* info) {
    j["last_failure_detail"] = "";
    j["last_probe"] = nullptr;
    j["health_reason"] = "";
    j["health_since_s"] = nullptr;
    j["last_failure_age_s"] = nullptr;
    j["held_for_s"] = nullptr;
    j["probes"] = nullptr;
    j["slow_start_for_s"] = nullptr;
    j["rate_limit_bias_for_s"] = nullptr;
    j["probe_shared_with"] = nullptr;
    if (!info) return;
    j["probe_shared_with"] = info->probe_shared_with;
    const health::Snapshot* h = &info->snapshot;
    if (h->last_transition && h->last_transition->to == h->verdict)
        j["health_reason"] = h->last_transition->to_string();
    j["health_since_s"] = seconds_ago(h->since);
    if (h->held_until != health::TimePoint{} && seconds_until(h->held_until) > 0)
        j["held_for_s"] = seconds_until(h->held_until);
    j["probes"] = h->probes;
    // what scales weight_factor down now, and for how long
    if (h->slow_start_end != health::TimePoint{} && seconds_until(h->slow_start_end) > 0)
        j["slow_start_for_s"] = seconds_until(h->slow_start_end);
    if (h->bias_until != health::TimePoint{} && seconds_until(h->bias_until) > 0)
        j["rate_limit_bias_for_s"] = seconds_until(h->bias_until);
    if (h->last) {
        const health::LastProbe& p = *h->last;
        j["last_probe"] = json{
            {"outcome",
             p.failure == health::Failure::kNone ? "passed" : health::to_string(p.failure)},
            {"detail", p.detail},
            {"latency_ms", std::chrono::duration<double, std::milli>(p.latency).count()},
            {"age_s", seconds_ago(p.at)},
            {"http_status", p.http_status == 0 ? json(nullptr) : json(p.http_status)},
            {"rate_limited", p.rate_limited},
        };
    }
    if (info->last_failure) {
        j["last_failure"] = health::to_string(info->last_failure->failure);
        j["last_failure_detail"] = info->last_failure->detail;
        j["last_failure_age_s"] = seconds_ago(info->last_failure->at);
    }
}

}  // namespace

json vip_summary_json(const control::VipStatus& v) {
    return json{
        {"vip", v.spec.key()},
        {"name", v.spec.name},
        {"vip_id", optional_id(v.vip_id)},
        {"epoch", v.epoch},
        {"checksum", hex64(v.checksum)},
        {"panic", v.panic != control::PanicReason::kNone},
        {"panic_reason", control::to_string(v.panic)},
        {"panic_entries", v.panic_entries},
        {"starting", v.starting},
        {"healthy_share", v.healthy_share},
        {"published", v.published},
        {"backends_total", v.backends.size()},
        {"backends_healthy", healthy_count(v)},
        {"backends_unchecked", health_checked(v.spec) ? 0 : v.backends.size()},
        {"last_error", v.last_error},
    };
}

json backend_json(const control::VipStatus& vip, const control::BackendStatus& b,
                  const Counters& counters, const HealthDetails& health) {
    json packets = nullptr, bytes = nullptr, new_flows = nullptr, new_flows_per_s = nullptr;
    json active = nullptr, inactive = nullptr;
    if (b.id) {
        if (auto it = counters.backends.find(*b.id); it != counters.backends.end()) {
            packets = it->second.packets;
            bytes = it->second.bytes;
            new_flows = it->second.new_flows;
        }
        if (auto it = counters.new_flows_per_s.find(*b.id); it != counters.new_flows_per_s.end())
            new_flows_per_s = it->second;
        if (counters.connections && vip.vip_id && vip.spec.conntrack) {
            active = 0;
            inactive = 0;
            auto it = counters.connections->find({*vip.vip_id, *b.id});
            if (it != counters.connections->end()) {
                active = it->second.active;
                inactive = it->second.inactive;
            }
        }
    }
    const config::BackendSpec* spec = vip.spec.find_backend(b.address);
    json j{
        {"address", b.address.to_string()},
        {"hash_key", spec ? spec->hash_key : std::string()},
        {"state", config::to_string(b.state)},
        {"health", health_text(vip.spec, b.health)},
        {"last_failure", ""},
        {"weight", b.weight},
        {"effective_weight", b.effective_weight},
        {"weight_factor", b.weight_factor},
        {"slots", b.slots},
        {"share_of_slots", share(b.slots, table_slots(vip))},
        {"in_table", b.in_table},
        {"live", b.live},
        {"id", optional_id(b.id)},
        {"generation", b.generation},
        {"packets", packets},
        {"bytes", bytes},
        {"new_flows", new_flows},
        {"new_flows_per_s", new_flows_per_s},
        {"connections", active},
        {"inactive_connections", inactive},
    };
    auto h = health.find(std::pair{vip.spec.key(), b.address});
    add_health_fields(j, h == health.end() ? nullptr : &h->second);
    if (spec && spec->server_id) j["server_id"] = *spec->server_id;
    return j;
}

json vip_detail_json(const control::VipStatus& v, const Counters& counters,
                     const HealthDetails& health) {
    json j = vip_summary_json(v);
    j["spec"] = v.spec;
    json backends = json::array();
    for (const auto& b : v.backends) backends.push_back(backend_json(v, b, counters, health));
    j["backends"] = std::move(backends);
    return j;
}

json table_json(const control::VipStatus& v) {
    std::uint64_t weight_sum = 0;
    for (const auto& b : v.backends)
        if (b.in_table) weight_sum += b.effective_weight;
    const std::uint64_t slots = table_slots(v);
    json backends = json::array();
    for (const auto& b : v.backends) {
        if (b.state == config::AdminState::kDisabled) continue;
        backends.push_back(json{
            {"address", b.address.to_string()},
            {"in_table", b.in_table},
            {"slots", b.slots},
            {"share", share(b.slots, slots)},
            {"target_share", b.in_table ? share(b.effective_weight, weight_sum) : 0.0},
        });
    }
    return json{{"vip", v.spec.key()},
                {"epoch", v.epoch},
                {"checksum", hex64(v.checksum)},
                {"published", v.published},
                {"ring_size", slots},
                {"configured_ring_size", v.spec.ring_size},
                {"backends", std::move(backends)}};
}

json backend_history_json(const std::string& vip_key, const control::BackendStatus& backend,
                          bool vip_checked,
                          const std::optional<std::vector<health::Transition>>& history,
                          std::uint32_t capacity) {
    json entries = json::array();
    if (history) {
        for (const health::Transition& t : *history)
            entries.push_back(json{
                {"time", utc_text_ms(t.wall_time)},
                {"from", health::to_string(t.from)},
                {"to", health::to_string(t.to)},
                {"cause", health::to_string(t.cause)},
                {"probe",
                 t.probe == health::Failure::kNone ? "passed" : health::to_string(t.probe)},
                {"reason", t.reason()},
            });
    }
    return json{{"vip", vip_key},
                {"address", backend.address.to_string()},
                {"health", vip_checked ? control::to_string(backend.health) : kUnchecked},
                {"checked", history.has_value()},
                {"capacity", capacity},
                {"history", std::move(entries)}};
}

json vip_stats_json(const control::VipStatus& v, const Counters& counters) {
    xlb_vip_stats s{};
    std::uint64_t hints = 0;
    bool have = false;
    if (v.vip_id) {
        if (auto it = counters.vips.find(*v.vip_id); it != counters.vips.end()) {
            s = it->second;
            have = true;
        }
        if (auto it = counters.vip_hints.find(*v.vip_id); it != counters.vip_hints.end())
            hints = it->second;
    }
    auto value = [&](std::uint64_t x) { return have ? json(x) : json(nullptr); };
    return json{{"vip", v.spec.key()},
                {"name", v.spec.name},
                {"packets", value(s.packets)},
                {"bytes", value(s.bytes)},
                {"new_flows", value(s.new_flows)},
                {"conntrack_hits", value(s.conntrack_hits)},
                {"drops", value(s.drops)},
                {"second_chance_hints", value(hints)}};
}

void send_json(httplib::Response& res, int status, const json& body) {
    res.status = status;
    // Client bytes echoed in a message may be invalid UTF-8: replaced, never
    // an exception.
    res.set_content(body.dump(2, ' ', false, json::error_handler_t::replace) + "\n",
                    "application/json");
}

void send_error(httplib::Response& res, int status, const std::string& message) {
    send_json(res, status, json{{"error", message}});
}

void Router::add(const std::string& method, const std::string& path, Handler handler) {
    routes_[path][method] = std::move(handler);
}

void Router::install(httplib::Server& server) const {
    auto self = std::make_shared<Router>(*this);
    auto handler = [self](const httplib::Request& req, httplib::Response& res) {
        self->dispatch(req, res);
    };
    server.Get(".*", handler);
    server.Post(".*", handler);
    server.Put(".*", handler);
    server.Patch(".*", handler);
    server.Delete(".*", handler);
    server.Options(".*", handler);
    // Errors httplib produces itself (bad request line, body too large): JSON too.
    server.set_error_handler(
        httplib::Server::HandlerWithResponse([](const httplib::Request&, httplib::Response& res) {
            if (!res.body.empty()) return httplib::Server::HandlerResponse::Unhandled;
            std::string what = "HTTP status " + std::to_string(res.status);
            if (res.status == 400) what = "bad request: the request could not be parsed as HTTP";
            if (res.status == 413) what = "request body too large";
            if (res.status == 414) what = "request URI too long";
            send_error(res, res.status, what);
            return httplib::Server::HandlerResponse::Handled;
        }));
    server.set_exception_handler(
        [](const httplib::Request& req, httplib::Response& res, std::exception_ptr ep) {
            std::string what = "unknown exception";
            try {
                if (ep) std::rethrow_exception(ep);
            } catch (const std::exception& e) {
                what = e.what();
            } catch (...) {
                // Not a std::exception: it carries no text, and it is still
                // logged and answered below.
                what = "unknown exception";
            }
            spdlog::error("api: {} {} failed: {}", req.method, req.path, what);
            send_error(res, 500, "internal error: " + what);
        });
}

void Router::dispatch(const httplib::Request& req, httplib::Response& res) const {
    // A NUL would cut the value short where it meets C strings (addresses):
    // "198.51.100.10%00garbage" must not name 198.51.100.10.
    for (const auto& [name, value] : req.params) {
        if (name.find('\0') == std::string::npos && value.find('\0') == std::string::npos) continue;
        std::string shown = name;
        for (std::size_t at = shown.find('\0'); at != std::string::npos; at = shown.find('\0', at))
            shown.replace(at, 1, "%00");
        send_error(
            res, 400,
            "query parameter " + shown + ": contains a NUL byte (%00), expected text without one");
        return;
    }
    auto path = routes_.find(req.path);
    if (path == routes_.end()) {
        send_error(res, 404, "no such endpoint: " + req.path + " (see docs/api.md)");
        return;
    }
    std::string method = req.method == "HEAD" ? "GET" : req.method;
    auto handler = path->second.find(method);
    if (handler == path->second.end()) {
        std::string allow;
        for (const auto& [m, h] : path->second) allow += (allow.empty() ? "" : ", ") + m;
        res.set_header("Allow", allow);
        send_error(
            res, 405,
            "method " + req.method + " not allowed on " + req.path + ", expected one of: " + allow);
        return;
    }
    try {
        handler->second(req, res);
    } catch (const std::exception& e) {
        spdlog::error("api: {} {} failed: {}", req.method, req.path, e.what());
        send_error(res, 500, std::string("internal error: ") + e.what());
    }
}

void add_probes(Router& router, const Services& services) {
    router.add("GET", "/livez",
               [&loop = services.loop](const httplib::Request&, httplib::Response& res) {
                   ProbeResult r = check_live(loop);
                   res.status = r.ok ? 200 : 503;
                   res.set_content(r.text + "\n", "text/plain");
               });
    router.add("GET", "/readyz", [services](const httplib::Request&, httplib::Response& res) {
        ProbeResult r = check_ready(services);
        res.status = r.ok ? 200 : 503;
        res.set_content(r.text + "\n", "text/plain");
    });
}

}  // namespace detail

nlohmann::json backend_health_json(const control::VipStatus& v) {
    nlohmann::json out = nlohmann::json::array();
    for (const control::BackendStatus& b : v.backends)
        out.push_back(nlohmann::json{{"address", b.address.to_string()},
                                     {"health", detail::health_text(v.spec, b.health)},
                                     {"local_health", detail::health_text(v.spec, b.local_health)},
                                     {"weight_factor", b.weight_factor}});
    return out;
}

}  // namespace xlb::api
