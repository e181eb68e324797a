// SPDX-License-Identifier: Apache-2.0
// xlbctl vip list|add|set|del: the VIPs (GET, POST /v1/vips; PATCH, DELETE
// /v1/vip). vip add and vip set take every per-VIP key of the configuration
// file as an option (vip_settings.h), decoded and checked by the config
// library as the file's keys are.
#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <cstdlib>

#include "../checks.h"
#include "../render_parts.h"
#include "../request_parts.h"
#include "nouns.h"
#include "xlb/config/json.h"
#include "xlb/xlbctl/vip_settings.h"

namespace xlb::xlbctl::noun {

namespace {

Checked<config::BackendSpec> check_backend_option(const std::string& text, const Examples& ex) {
    const std::string form = "expected ADDR or ADDR=WEIGHT, e.g. --backend " + ex.backend +
                             " or --backend " + ex.backend + "=50";
    config::BackendSpec b;
    std::string address = text, weight;
    if (auto eq = text.find('='); eq != std::string::npos) {
        address = text.substr(0, eq);
        weight = text.substr(eq + 1);
    }
    auto parsed = net::IpAddress::parse(address);
    if (!parsed)
        return std::unexpected("--backend " + in_quotes(text) + ": " + parsed.error() + "; " +
                               form);
    b.address = *parsed;
    if (!weight.empty() || text.find('=') != std::string::npos) {
        auto w = parse_unsigned(weight);
        if (!w || *w > config::kMaxWeight)
            return std::unexpected("--backend " + in_quotes(text) + ": weight " +
                                   in_quotes(weight) + " is not an integer 0-" +
                                   std::to_string(config::kMaxWeight) + "; " + form);
        b.weight = static_cast<std::uint32_t>(*w);
    }
    return b;
}

Checked<config::VipSpec> check_vip_add(const Raw& raw, const config::VipKey& key,
                                       const Examples& ex) {
    config::VipSpec spec;
    spec.address = key.address;
    spec.port = key.port;
    spec.protocol = key.protocol;
    spec.name = raw.name;
    spec.conntrack = !raw.no_conntrack;
    if (!raw.hash.empty()) {
        auto mode = config::parse_hash_mode(raw.hash);
        if (!mode)
            return std::unexpected("--hash: found " + in_quotes(raw.hash) +
                                   ", expected 5tuple (addresses and ports: a client's "
                                   "connections spread) or source (client address only: one "
                                   "client, one backend), e.g. --hash source");
        spec.hash = *mode;
    }
    if (!raw.ring_size.empty()) {
        auto size = parse_unsigned(raw.ring_size);
        if (!size || *size > UINT32_MAX)
            return std::unexpected("--ring-size: found " + in_quotes(raw.ring_size) +
                                   ", expected a prime number of table slots, e.g. "
                                   "--ring-size 65537");
        spec.ring_size = static_cast<std::uint32_t>(*size);
    }
    if (!raw.panic_threshold.empty()) {
        auto t = parse_number(raw.panic_threshold);
        if (!t || *t < 0 || *t > 1)
            return std::unexpected("--panic-threshold: found " + in_quotes(raw.panic_threshold) +
                                   ", expected a number 0-1 (share of healthy weight below "
                                   "which health is ignored; 0 = never panic), e.g. "
                                   "--panic-threshold 0.5");
        spec.panic_threshold = *t;
    }
    for (const std::string& text : raw.backends) {
        auto b = check_backend_option(text, ex);
        if (!b) return std::unexpected(b.error());
        spec.backends.push_back(*b);
    }
    // The other settings given: decoded by the config library as the file's.
    if (!raw.given.empty()) {
        nlohmann::json whole = spec;
        whole.update(settings_object(raw.given), true);
        auto decoded = config::vip_from_json(whole);
        if (!decoded)
            return std::unexpected(
                with_example(with_options(decoded.error()),
                             "xlbctl vip add " + ex.vip + " --health-check.type tcp"));
        spec = std::move(*decoded);
    }

    std::vector<std::string> problems;
    for (const config::ValidationIssue& issue : config::check_vip(spec, client_settings())) {
        const std::string& p = issue.path;
        std::string where = p;
        if (p == "address")
            where = "VIP " + key.to_string();
        else if (p == "name")
            where = "--name";
        else if (p == "ring_size")
            where = "--ring-size";
        else if (p == "panic_threshold")
            where = "--panic-threshold";
        else if (p.starts_with("backends[")) {
            const std::size_t i = std::strtoul(p.c_str() + 9, nullptr, 10);
            if (i < raw.backends.size()) where = "--backend " + raw.backends[i];
        } else if (const std::string option = option_of(p); !option.empty()) {
            where = option;
        }
        std::string message = where + ": " + issue.message;
        if (p == "name") message = with_example(message, "--name web");
        problems.push_back(std::move(message));
    }
    if (!problems.empty()) {
        std::string message;
        for (const auto& p : problems) message += (message.empty() ? "" : "; ") + p;
        return std::unexpected(
            with_example(message, "xlbctl vip add " + ex.vip + " --ring-size 65537"));
    }
    return spec;
}

// vip set: the settings given, typed and decoded as the file's keys (the
// agent checks them with the VIP's other settings, which only it has).
Checked<std::string> check_vip_set(const Raw& raw, const config::VipKey& key, const Examples& ex) {
    const std::string example = "xlbctl vip set " + ex.vip + " --health-check.type tcp";
    if (raw.given.empty())
        return std::unexpected("vip set: expected at least one setting to change, e.g. " + example +
                               " (xlbctl vip set --help lists them)");
    const nlohmann::json given = settings_object(raw.given);
    // Over a VIP of defaults, as the agent merges them over the VIP's own
    // (a health_check object needs its type, for one).
    config::VipSpec base;
    base.address = key.address;
    base.port = key.port;
    base.protocol = key.protocol;
    nlohmann::json whole = base;
    whole.update(given, true);
    if (auto decoded = config::vip_from_json(whole); !decoded)
        return std::unexpected(with_example(with_options(decoded.error()), example));
    return given.dump();
}

// vip add and vip set can be tried first.
void add_dry_run_flag_vip(CLI::App* app, Raw& raw, const std::string& verb) {
    app->add_flag("--dry-run", raw.dry_run,
                  "have the agent check the " + std::string(verb == "add" ? "VIP" : "change") +
                      " as it would apply it, and change nothing");
}

// The per-VIP keys of the file as options (vip_settings.h). vip add has
// options of its own for name, hash, ring_size, panic_threshold and
// conntrack (--no-conntrack); vip set takes them as the others.
void add_vip_settings(CLI::App* app, Raw& raw, bool with_dedicated) {
    for (const VipSetting& s : vip_settings()) {
        const bool dedicated = s.path == "name" || s.path == "hash" || s.path == "ring_size" ||
                               s.path == "panic_threshold" || s.path == "conntrack";
        if (dedicated && !with_dedicated) continue;
        const CLI::Option* option = app->add_option(s.option, raw.settings[s.path], s.help)
                                        ->type_name(s.type_name)
                                        ->group("VIP settings (docs/config.md)");
        raw.setting_options[app].emplace_back(option, s.path);
    }
}

std::string render_vip_list(const json& r, const Style& style, bool quiet) {
    const json& vips = r.at("vips");
    std::string out;
    if (quiet) {
        for (const json& v : vips) out += str(v, "vip") + "\n";
        return out;
    }
    if (vips.empty()) return "no VIPs (add one: xlbctl vip add ADDRESS:PORT/PROTO)\n";
    Table t({{"VIP"},
             {"NAME"},
             {"HASH"},
             {"CONNTRACK"},
             {"RING", Align::kRight},
             {"PANIC AT", Align::kRight},
             {"BACKENDS", Align::kRight},
             {"EPOCH", Align::kRight},
             {"PANIC"},
             {"TABLE"}});
    for (const json& v : vips) {
        const json& spec = v.at("spec");
        t.add({str(v, "vip"), name_or_dash(v), str(spec, "hash"),
               flag(spec, "conntrack") ? "yes" : "no", std::to_string(u64(spec, "ring_size")),
               format_number(number(spec, "panic_threshold") * 100) + "%", backends_cell(v),
               std::to_string(u64(v, "epoch")), panic_cell(v), table_state_cell(v)});
    }
    return t.render(style) + vip_errors(vips, style);
}

std::string render_vip_add(const json& r) {
    const std::size_t n = r.at("backends").size();
    return fmt::format("added VIP {}: {} backend{}, epoch {}, checksum {}\n", str(r, "vip"), n,
                       n == 1 ? "" : "s", u64(r, "epoch"), str(r, "checksum"));
}

// vip set (PATCH /v1/vip, docs/api.md): each setting that changed, from
// and to; a dry run says it changed nothing.
std::string render_vip_set(const json& r) {
    const json& changes = r.at("changes");
    const bool dry = r.value("dry_run", false);
    auto text = [](const json& v) {
        if (v.is_null()) return std::string("(default)");
        return v.is_string() ? v.get<std::string>() : v.dump();
    };
    std::string out;
    if (dry)
        out = fmt::format("dry run of vip set {}: nothing was changed; ", str(r, "vip"));
    else
        out = fmt::format("VIP {}: ", str(r, "vip"));
    if (changes.empty()) return out + (dry ? "no setting would change\n" : "no setting changed\n");
    out += dry ? fmt::format("{} setting{} would change\n", changes.size(),
                             changes.size() == 1 ? "" : "s")
               : fmt::format("{} setting{} changed, epoch {}\n", changes.size(),
                             changes.size() == 1 ? "" : "s", u64(r, "epoch"));
    for (const json& c : changes)
        out += fmt::format("  {}: {} -> {}\n", str(c, "key"), text(c.at("from")), text(c.at("to")));
    return out;
}

void vip_add_options(CLI::App& app, Raw& raw) {
    add_vip_arg(&app, raw);
    app.add_option("--name", raw.name, "label for logs and metrics (A-Z a-z 0-9 . _ -)");
    app.add_option("--hash", raw.hash,
                   "5tuple (default: addresses and ports) or source (client address "
                   "only: one client, one backend)")
        ->type_name("MODE");
    app.add_option("--ring-size", raw.ring_size,
                   "Maglev table slots, a prime >= 10 per backend (default 65537)")
        ->type_name("N");
    app.add_flag("--no-conntrack", raw.no_conntrack,
                 "skip the connection table (stateless UDP): flows follow the table");
    app.add_option("--panic-threshold", raw.panic_threshold,
                   "below this healthy share of weight, ignore health (default 0.5; 0 = "
                   "never)")
        ->type_name("0-1");
    app.add_option("-b,--backend", raw.backends,
                   "a backend to start with, ADDR or ADDR=WEIGHT (repeatable)")
        ->type_name("ADDR[=W]");
    add_dry_run_flag_vip(&app, raw, "add");
    add_vip_settings(&app, raw, /*with_dedicated=*/false);
}

Checked<void> vip_add_check(const Raw& raw, Command& c) {
    auto spec = check_vip_add(raw, *c.vip_key, examples_for(c.vip_key));
    if (!spec) return std::unexpected(spec.error());
    c.spec = std::move(*spec);
    c.settings = settings_object(raw.given).dump();
    c.dry_run = raw.dry_run;
    return {};
}

HttpRequest vip_add_request(const Command& c) {
    using nlohmann::json;
    // Only what the operator chose: everything else takes the agent's
    // defaults (the same as config::VipSpec's).
    json body{{"address", c.spec.address.to_string()},
              {"port", c.spec.port},
              {"protocol", config::to_string(c.spec.protocol)},
              {"hash", config::to_string(c.spec.hash)},
              {"conntrack", c.spec.conntrack},
              {"ring_size", c.spec.ring_size},
              {"panic_threshold", c.spec.panic_threshold}};
    if (!c.spec.name.empty()) body["name"] = c.spec.name;
    if (!c.spec.backends.empty()) {
        json backends = json::array();
        for (const auto& b : c.spec.backends)
            backends.push_back(json{{"address", b.address.to_string()}, {"weight", b.weight}});
        body["backends"] = std::move(backends);
    }
    // the other settings given, as typed (the agent decodes them as the file's)
    const json settings = json::parse(c.settings, nullptr, false);
    if (settings.is_object()) body.update(settings, true);
    return {"POST", std::string("/v1/vips") + (c.dry_run ? "?dry_run=1" : ""), body.dump()};
}

constexpr VerbSpec kVipVerbs[] = {
    {.verb = Verb::kVipList,
     .name = "list",
     .help = "Every VIP: name, hash mode, conntrack, ring size, panic threshold,\n"
             "healthy/total backends, epoch and whether its table is live.",
     .examples = "  xlbctl vip list\n"
                 "  xlbctl vip list -q          # keys only, one a line\n"
                 "  xlbctl vip list --json\n",
     .options =
         [](CLI::App& app, Raw& raw) {
             app.add_flag("-q,--quiet", raw.quiet, "print only the VIP keys, one a line");
         },
     .request =
         [](const Command&) {
             return HttpRequest{"GET", "/v1/vips", ""};
         },
     .render = [](const Command& c, const json& r,
                  const Style& style) { return render_vip_list(r, style, c.quiet); }},
    {.verb = Verb::kVipAdd,
     .name = "add",
     .help = "Add a VIP (persisted: it survives an agent restart). Every per-VIP key of\n"
             "the configuration file is an option, named after its path (docs/config.md);\n"
             "those not given take the file's defaults (no health check: its backends are\n"
             "never probed and show as unchecked).",
     .examples =
         "  xlbctl vip add 10.0.0.10:80/tcp --hash 5tuple --ring-size 65537\n"
         "  xlbctl vip add 198.51.100.10:443 --name web --backend 203.0.113.11 --backend "
         "203.0.113.12=50\n"
         "  xlbctl vip add '[2001:db8::10]:53/udp' --hash source --no-conntrack\n"
         "  xlbctl vip add 198.51.100.20:0/tcp --panic-threshold 0   # every port, never panic\n"
         "  xlbctl vip add 198.51.100.10:80 --health-check.type http --health-check.path /healthz "
         "--slow-start.window 10s\n"
         "  xlbctl vip add 198.51.100.10:80 --announce never --conntrack-idle-timeout 10m "
         "--dry-run\n",
     .options = vip_add_options,
     .check = vip_add_check,
     .request = vip_add_request,
     .render =
         [](const Command&, const json& r, const Style&) {
             if (r.value("dry_run", false))
                 return fmt::format(
                     "dry run of vip add {}: the agent would add it as given; "
                     "nothing was changed\n",
                     str(r, "vip"));
             return render_vip_add(r);
         }},
    {.verb = Verb::kVipSet,
     .name = "set",
     .help = "Change settings of a VIP (persisted): only those given; its backends and\n"
             "other settings stay. Every per-VIP key of the configuration file is an\n"
             "option, named after its path (docs/config.md). A change that moves\n"
             "established flows (hash, ring_size) is refused unless --allow-disruptive\n"
             "confirms it, as for reloads.",
     .examples =
         "  xlbctl vip set 198.51.100.10:80/tcp --health-check.type http --health-check.path "
         "/healthz\n"
         "  xlbctl vip set 198.51.100.10:80/tcp --slow-start.window 10s --announce always\n"
         "  xlbctl vip set 198.51.100.10:80/tcp --conntrack-idle-timeout 5m --dry-run\n"
         "  xlbctl vip set 198.51.100.10:80/tcp --ring-size 131071 --allow-disruptive\n",
     .options =
         [](CLI::App& app, Raw& raw) {
             add_vip_arg(&app, raw);
             add_dry_run_flag_vip(&app, raw, "set");
             app.add_flag("--allow-disruptive", raw.allow_disruptive,
                          "apply a change of hash or ring_size, which moves established flows "
                          "of a VIP without conntrack and flows other LB hosts receive");
             add_vip_settings(&app, raw, /*with_dedicated=*/true);
         },
     .check = [](const Raw& raw, Command& c) -> Checked<void> {
         auto settings = check_vip_set(raw, *c.vip_key, examples_for(c.vip_key));
         if (!settings) return std::unexpected(settings.error());
         c.settings = std::move(*settings);
         c.dry_run = raw.dry_run;
         return {};
     },
     .request =
         [](const Command& c) {
             return HttpRequest{"PATCH",
                                "/v1/vip?" + vip_query(c) + dry_run(c) +
                                    (c.allow_disruptive ? "&allow_disruptive=1" : ""),
                                c.settings};
         },
     .render = [](const Command&, const json& r, const Style&) { return render_vip_set(r); }},
    {.verb = Verb::kVipDel,
     .name = "del",
     .help = "Delete a VIP: its table and entries leave the data plane, its flows are dropped.",
     .examples = "  xlbctl vip del 198.51.100.10:80/tcp\n",
     .options = [](CLI::App& app, Raw& raw) { add_vip_arg(&app, raw); },
     .request =
         [](const Command& c) {
             return HttpRequest{"DELETE", "/v1/vip?" + vip_query(c), ""};
         },
     .render = [](const Command&, const json& r,
                  const Style&) { return fmt::format("deleted VIP {}\n", str(r, "vip")); }},
};

}  // namespace

const Noun& vip() {
    static const Noun noun{.name = "vip",
                           .help = "List, add, change or delete VIPs.",
                           .examples =
                               "  xlbctl vip list\n"
                               "  xlbctl vip add 198.51.100.10:80/tcp --hash 5tuple "
                               "--ring-size 65537\n"
                               "  xlbctl vip set 198.51.100.10:80/tcp --health-check.type "
                               "tcp\n"
                               "  xlbctl vip del 198.51.100.10:80/tcp\n",
                           .verbs = kVipVerbs};
    return noun;
}

}  // namespace xlb::xlbctl::noun
