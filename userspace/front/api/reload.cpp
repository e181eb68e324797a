// SPDX-License-Identifier: Apache-2.0
// The configuration file (docs/api.md): POST /v1/reload re-reads it, or,
// with dry_run=1, says what a file sent in the body would change; GET
// /v1/config/export writes what runs as one.
#include "handlers.h"
#include "listener.h"
#include "reload_json.h"
#include "xlb/api/audit.h"
#include "xlb/config/config.h"

namespace xlb::api::detail {

// Re-reads the configuration file; the answer says what changed or why
// nothing did. Body (optional): {"allow_disruptive": true}. With
// ?dry_run=1 the body carries a file instead ({"config": YAML, "file":
// NAME}) and the answer is the report a reload of it would give, with
// nothing applied.
void reload(Api& api, const httplib::Request& req, httplib::Response& res) {
    auto dry = flag_param(req, "dry_run");
    if (!dry) return reject(req, res, dry.error());
    if (*dry ? !api.s.reload_dry_run : !api.s.reload)
        return reject(req, res, {501, "this agent cannot reload"});
    auto reason = request_reason(req);
    if (!reason) return reject(req, res, reason.error());
    bool allow_disruptive = false;
    std::optional<std::string> config;
    std::string file = "(request)";
    if (!req.body.empty()) {
        auto body = body_json(req, *dry ? "an object {\"config\": YAML text, \"file\": NAME, "
                                          "\"allow_disruptive\": true|false}"
                                        : "an object {\"allow_disruptive\": true|false}");
        if (!body) return reject(req, res, body.error());
        for (auto it = body->begin(); it != body->end(); ++it) {
            const bool text_key = *dry && (it.key() == "config" || it.key() == "file");
            if (it.key() != "allow_disruptive" && !text_key)
                return reject(
                    req, res,
                    {400,
                     "unknown key \"" + it.key() + "\", expected only allow_disruptive" +
                         (*dry ? ", config and file"
                               : (it.key() == "config" ? " (config: only with dry_run=1)" : ""))});
            if (text_key) {
                if (!it.value().is_string())
                    return reject(
                        req, res,
                        {400, it.key() + ": found " + std::string(it.value().type_name()) +
                                  ", expected a string"});
                (it.key() == "config" ? config.emplace() : file) = it.value().get<std::string>();
                continue;
            }
            if (!it.value().is_boolean())
                return reject(
                    req, res,
                    {400, "allow_disruptive: found " + std::string(it.value().type_name()) +
                              ", expected true or false"});
            allow_disruptive = it.value().get<bool>();
        }
    }
    if (!*dry) {
        const ReloadReport report = api.s.reload(allow_disruptive);
        audit(reload_audit(report, describe(req), request_caller(), *reason));
        return send_json(res, reload_http_status(report.outcome), reload_report_json(report));
    }
    if (!config)
        return reject(req, res,
                      {400,
                       "dry_run: the body needs \"config\", the text of the YAML file to try "
                       "(xlbctl diff FILE sends it)"});
    // A dry run changes nothing: not audited.
    const ReloadReport report = api.s.reload_dry_run(*config, file, allow_disruptive);
    send_json(res, reload_http_status(report.outcome), reload_report_json(report));
}

// What runs as a configuration file: the settings in force and the
// desired VIPs, runtime changes included. A fleet's host writes its own
// settings only: the rest is the fleet's (xlbctl fleet export).
void export_config(Api& api, const httplib::Request& req, httplib::Response& res) {
    if (!req.params.empty())
        return reject(
            req, res,
            {400, "unknown query parameter " + config::shown_value(req.params.begin()->first) +
                      ": GET /v1/config/export takes none"});
    auto vips =
        api.call<std::vector<config::VipSpec>>([](control::Reconciler& r) { return r.vips(); });
    if (!vips) return reject(req, res, vips.error());
    config::Config running{api.s.settings->get(), std::move(*vips)};
    std::string header =
        "# xlbd's desired state at " + utc_text(std::chrono::system_clock::now()) +
        " (xlbctl export): the\n# configuration file with the changes made through the API.\n";
    if (running.settings.fleet.enabled) {
        header += "# This host is one of fleet " + running.settings.fleet.name +
                  ": its VIPs and fleet-wide settings are in the\n# fleet's store (xlbctl fleet "
                  "export); this file holds the host's own settings.\n";
        running.vips.clear();
    }
    send_json(res, 200,
              json{{"yaml", header + config::to_yaml(running)},
                   {"vips", running.vips.size()},
                   {"fleet", running.settings.fleet.enabled}});
}

}  // namespace xlb::api::detail
