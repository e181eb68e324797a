// SPDX-License-Identifier: Apache-2.0
// The connection table: GET /v1/conntrack/count, GET /v1/conntrack, POST
// /v1/conntrack/flush (docs/api.md). The scans run here, on the server's
// thread; the control thread only hands over the VIPs.
#include <spdlog/spdlog.h>

#include <charconv>

#include "handlers.h"
#include "listener.h"
#include "xlb/api/audit.h"
#include "xlb/config/config.h"

namespace xlb::api::detail {
namespace {

constexpr std::size_t kDefaultListLimit = 100;
constexpr std::size_t kMaxListLimit = 100'000;

// The VIPs as the reconciler has them and the backends as xlb_backends
// has them now. A VIP named in the filter must exist (404).
std::expected<conntrack::Context, HttpError> conntrack_context(
    Api& api, const std::optional<std::string>& vip) {
    auto vips = api.call<std::vector<conntrack::VipInfo>>([](control::Reconciler& r) {
        std::vector<conntrack::VipInfo> out;
        for (const auto& v : r.vips()) out.push_back(conntrack::vip_info(v));
        return out;
    });
    if (!vips) return std::unexpected(vips.error());
    auto backends = api.s.conntrack->backends();
    if (!backends) return std::unexpected(HttpError{500, backends.error().message()});
    conntrack::Context context(std::move(*vips), std::move(*backends));
    if (vip && !context.find_vip(*vip)) return std::unexpected(unknown_vip(*vip));
    return context;
}

std::optional<HttpError> read_filter_text(const std::string& name, const std::string& text,
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
            return HttpError{
                400, "active_within: found " + text + ", expected a positive duration, e.g. 10s"};
        f.active_within = *d;
    }
    return std::nullopt;
}

std::expected<conntrack::Filter, HttpError> filter_params(
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

std::optional<std::size_t> parse_size(const std::string& text) {
    std::size_t n = 0;
    auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), n);
    if (text.empty() || ec != std::errc{} || end != text.data() + text.size()) return std::nullopt;
    return n;
}

}  // namespace

void conntrack_count(Api& api, const httplib::Request& req, httplib::Response& res) {
    if (!api.s.conntrack) return reject(req, res, {501, "this agent has no connection table"});
    auto filter = filter_params(req, {"vip", "backend", "active_within"});
    if (!filter) return reject(req, res, filter.error());
    auto context = conntrack_context(api, filter->vip);
    if (!context) return reject(req, res, context.error());
    auto report = conntrack::count(*api.s.conntrack, *context, *filter);
    if (!report) return reject(req, res, {500, report.error().message()});
    send_json(res, 200, conntrack_count_json(*report, filter->active_within));
}

void conntrack_list(Api& api, const httplib::Request& req, httplib::Response& res) {
    if (!api.s.conntrack) return reject(req, res, {501, "this agent has no connection table"});
    auto filter = filter_params(req, {"vip", "backend", "client", "limit"});
    if (!filter) return reject(req, res, filter.error());
    std::size_t limit = kDefaultListLimit;
    if (req.has_param("limit")) {
        const std::string text = req.get_param_value("limit");
        auto n = parse_size(text);
        if (!n || *n < 1 || *n > kMaxListLimit)
            return reject(req, res,
                          {400, "limit: found " + config::shown_value(text) +
                                    ", expected an integer 1-" + std::to_string(kMaxListLimit)});
        limit = *n;
    }
    auto context = conntrack_context(api, filter->vip);
    if (!context) return reject(req, res, context.error());
    auto report = conntrack::list(*api.s.conntrack, *context, *filter, limit);
    if (!report) return reject(req, res, {500, report.error().message()});
    send_json(res, 200, conntrack_list_json(*report));
}

void conntrack_flush(Api& api, const httplib::Request& req, httplib::Response& res) {
    if (!api.s.conntrack) return reject(req, res, {501, "this agent has no connection table"});
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
                return reject(
                    req, res,
                    {400, key + ": found " + shown_json(it.value()) + ", expected true or false"});
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
    auto context = conntrack_context(api, filter.vip);
    if (!context) return reject(req, res, context.error());
    auto reason = request_reason(req);
    if (!reason) return reject(req, res, reason.error());
    auto report = conntrack::flush(*api.s.conntrack, *context, filter, dry_run);
    if (dry_run) {
        if (!report) return reject(req, res, {500, report.error().message()});
        return send_json(res, 200, conntrack_flush_json(*report));
    }
    // A flush changes which backend established flows reach: audited.
    AuditEntry entry;
    entry.request = describe(req);
    entry.caller = request_caller();
    entry.reason = *reason;
    entry.vip = filter.vip.value_or("");
    entry.backend = filter.backend ? filter.backend->to_string() : "";
    if (report) {
        entry.changes = "flushed " + std::to_string(report->deleted) + " of " +
                        std::to_string(report->matched) + " matching connection-table entries";
        entry.ok = true;
        entry.result = "ok";
    } else {
        entry.result = "error: 500 " + report.error().message();
    }
    audit(entry);
    if (!report) return reject(req, res, {500, report.error().message()});
    send_json(res, 200, conntrack_flush_json(*report));
}

}  // namespace xlb::api::detail
