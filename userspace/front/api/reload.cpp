// SPDX-License-Identifier: Apache-2.0
// POST /v1/reload: re-reads the configuration file (docs/api.md).
#include "handlers.h"
#include "reload_json.h"

namespace xlb::api::detail {

// Re-reads the configuration file; the answer says what changed or why
// nothing did. Body (optional): {"allow_disruptive": true}.
void reload(Api& api, const httplib::Request& req, httplib::Response& res) {
    if (!api.s.reload) return reject(req, res, {501, "this agent cannot reload"});
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
    const ReloadReport report = api.s.reload(allow_disruptive);
    send_json(res, reload_http_status(report.outcome), reload_report_json(report));
}

}  // namespace xlb::api::detail
