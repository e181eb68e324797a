// SPDX-License-Identifier: Apache-2.0
// The host: GET /v1/host, POST /v1/host/drain, POST /v1/host/resume
// (docs/api.md, docs/scale-out.md).
#include <spdlog/spdlog.h>

#include "bgp_json.h"
#include "handlers.h"
#include "listener.h"
#include "xlb/api/audit.h"

namespace xlb::api::detail {

namespace {

void set_drained(Api& api, const httplib::Request& req, httplib::Response& res, bool drained) {
    if (!api.s.host.set_drained) return reject(req, res, {501, "this agent has no host control"});
    if (!req.body.empty() && req.body != "{}")
        return reject(req, res, {400, "found a body, expected none (or {})"});
    auto reason = request_reason(req);
    if (!reason) return reject(req, res, reason.error());
    AuditEntry entry;
    entry.request = describe(req);
    entry.caller = request_caller();
    entry.reason = std::move(*reason);
    auto state = api.s.host.set_drained(drained);
    entry.ok = state.has_value();
    if (!state) {
        entry.result = "409 " + state.error().message();
        audit(entry);
        send_error(res, {409, state.error().message()});
        return;
    }
    entry.changes = drained ? "host drained: every VIP withdrawn" : "host resumed";
    entry.result = "ok";
    audit(entry);
    const std::optional<BgpInfo> bgp = api.s.host.bgp ? api.s.host.bgp() : std::nullopt;
    send_json(res, 200, bgp_json(*state, bgp));
}

}  // namespace

// The host's drain state and announcements (docs/scale-out.md).
void host(Api& api, const httplib::Request& req, httplib::Response& res) {
    if (!api.s.host.state) return reject(req, res, {501, "this agent has no host control"});
    const std::optional<BgpInfo> bgp = api.s.host.bgp ? api.s.host.bgp() : std::nullopt;
    send_json(res, 200, bgp_json(api.s.host.state(), bgp));
}
void drain_host(Api& api, const httplib::Request& req, httplib::Response& res) {
    set_drained(api, req, res, true);
}
void resume_host(Api& api, const httplib::Request& req, httplib::Response& res) {
    set_drained(api, req, res, false);
}
}  // namespace xlb::api::detail
