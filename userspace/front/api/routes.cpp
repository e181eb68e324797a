// SPDX-License-Identifier: Apache-2.0
// The API's routes, all of them, in one table (docs/api.md). A new route is
// a row here and a handler in its resource's file.
#include <array>

#include "handlers.h"

namespace xlb::api::detail {
namespace {

constexpr auto kRoutes = std::to_array<Route>({
    {"GET", "/v1/status", status},
    {"GET", "/v1/vips", list_vips},
    {"POST", "/v1/vips", add_vip, Changes::kDesired},
    {"GET", "/v1/vip", get_vip},
    {"DELETE", "/v1/vip", delete_vip, Changes::kDesired},
    {"PATCH", "/v1/vip", patch_vip, Changes::kDesired},
    {"GET", "/v1/backends", list_backends},
    {"POST", "/v1/backends", add_backend, Changes::kDesired},
    {"DELETE", "/v1/backends", delete_backend, Changes::kDesired},
    {"PATCH", "/v1/backends", patch_backend, Changes::kDesired},
    {"GET", "/v1/backend/history", backend_history},
    {"GET", "/v1/table", table},
    {"GET", "/v1/lookup", lookup},
    {"GET", "/v1/stats", stats},
    {"POST", "/v1/reload", reload},
    {"GET", "/v1/config/export", export_config},
    {"GET", "/v1/host", host},
    {"POST", "/v1/host/drain", drain_host, Changes::kDesired},
    {"POST", "/v1/host/resume", resume_host, Changes::kDesired},
    {"GET", "/v1/conntrack/count", conntrack_count},
    {"GET", "/v1/conntrack", conntrack_list},
    {"POST", "/v1/conntrack/flush", conntrack_flush},
    {"POST", "/v1/capture", start_capture},
    {"GET", "/v1/capture", capture_status},
});

}  // namespace

std::span<const Route> routes() { return kRoutes; }

void install_routes(Router& router, const std::shared_ptr<Api>& api) {
    for (const Route& route : routes())
        router.add(route.method, route.path,
                   [api, handler = route.handler, desired = route.changes == Changes::kDesired](
                       const httplib::Request& req, httplib::Response& res) {
                       if (desired && !api->s.fleet.refusal.empty())
                           return reject(req, res, {409, api->s.fleet.refusal});
                       handler(*api, req, res);
                   });
    add_probes(router, api->s);
}

}  // namespace xlb::api::detail
