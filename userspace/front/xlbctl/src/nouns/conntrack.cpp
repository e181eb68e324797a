// SPDX-License-Identifier: Apache-2.0
// xlbctl conntrack count|list|flush: the connection table's entries,
// selected by VIP, backend and client (/v1/conntrack).
#include <fmt/format.h>

#include <CLI/CLI.hpp>

#include "../checks.h"
#include "../render_parts.h"
#include "../request_parts.h"
#include "nouns.h"

namespace xlb::xlbctl::noun {

namespace {

// The conntrack selectors: a backend address, a client prefix. With a VIP,
// one that no entry of the VIP can match is a mistake on the line: a client
// of the other family, an IPv4 backend of an IPv6 VIP.
Checked<void> check_selectors(const Raw& raw, Command& c, const Examples& ex) {
    const std::string family_of_vip =
        c.vip_key ? "IPv" + std::to_string(c.vip_key->address.family) : "";
    if (!raw.ct_backend.empty()) {
        auto address = check_address(raw.ct_backend, "--backend", ex);
        if (!address) return std::unexpected(address.error());
        // An IPv4 VIP may have IPv6 backends (IPv4-in-IPv6), not the reverse.
        if (c.vip_key && !c.vip_key->address.is_v4() && address->is_v4())
            return std::unexpected("--backend: found IPv4 address " + address->to_string() +
                                   " for the IPv6 VIP " + c.vip_key->to_string() +
                                   " (its backends are IPv6), e.g. --backend " + ex.backend);
        c.ct_backend = *address;
    }
    if (!raw.client.empty()) {
        auto prefix = net::Prefix::parse(raw.client);
        if (!prefix) return std::unexpected("--client: " + prefix.error());
        if (c.vip_key && prefix->address.family != c.vip_key->address.family)
            return std::unexpected("--client: found IPv" + std::to_string(prefix->address.family) +
                                   " prefix " + prefix->to_string() + " for the " + family_of_vip +
                                   " VIP " + c.vip_key->to_string() + ", expected an " +
                                   family_of_vip + " address or prefix, e.g. --client " +
                                   ex.client);
        c.ct_client = *prefix;
    }
    return {};
}

// "table: 1234 of 4096 entries (30.13%), scanned in 3.2 ms"
std::string scan_line(const json& r) {
    return "table: " + occupancy_text(u64(r, "scanned"), u64(r, "capacity")) + ", scanned in " +
           format_number(number(r, "scan_ms")) + " ms\n";
}

std::string render_conntrack_count(const json& r, const Style& style) {
    std::string out;
    Table t({{"VIP"}, {"BACKEND"}, {"ENTRIES", Align::kRight}, {"STALE", Align::kRight}});
    for (const json& v : r.at("vips")) {
        const std::uint64_t stale = u64(v, "stale");
        t.add({str(v, "vip"), Cell{"(all)", Colour::kDim}, std::to_string(u64(v, "entries")),
               Cell{std::to_string(stale), stale > 0 ? Colour::kYellow : Colour::kNone}});
        for (const json& b : v.at("backends"))
            t.add({"", b.at("backend").is_string() ? str(b, "backend") : "unknown",
                   std::to_string(u64(b, "entries")), "-"});
    }
    const std::uint64_t no_vip = r.value("no_vip", std::uint64_t{0});
    if (no_vip > 0) t.add({Cell{"(no VIP)", Colour::kYellow}, "", std::to_string(no_vip), "-"});
    out += t.empty() ? std::string("no entries match\n") : t.render(style);
    const json& within = r.at("active_within");
    out += fmt::format(
        "{} matched{}; ", entries_text(u64(r, "matched")),
        within.is_string() ? " (active within " + within.get<std::string>() + ")" : std::string());
    return out + scan_line(r);
}

// What the client of a TCP entry sent to end it: "FIN", "RST", "FIN RST",
// "-" for neither; blank for other protocols.
Cell ended_text(const json& e) {
    const json fin = e.value("fin_seen", json()), rst = e.value("rst_seen", json());
    if (!fin.is_boolean() || !rst.is_boolean()) return Cell{""};
    std::string text;
    if (fin.get<bool>()) text = "FIN";
    if (rst.get<bool>()) text += text.empty() ? "RST" : " RST";
    return text.empty() ? Cell{"-", Colour::kDim} : Cell{text};
}

std::string render_conntrack_list(const json& r, const Style& style) {
    const json& entries = r.at("entries");
    std::string out;
    if (entries.empty()) {
        out += "no entries match\n";
    } else {
        Table t({{"CLIENT"},
                 {"VIP"},
                 {"BACKEND"},
                 {"STATE"},
                 {"IDLE", Align::kRight},
                 {"AGE", Align::kRight},
                 {"CLIENT SENT"}});
        for (const json& e : entries) {
            const std::string state = str(e, "state");
            Cell vip = e.at("vip").is_string()
                           ? Cell{str(e, "vip")}
                           : Cell{str(e, "destination") + "/" + str(e, "protocol") + " (no VIP)",
                                  Colour::kYellow};
            Cell backend =
                e.at("backend").is_string()
                    ? Cell{str(e, "backend")}
                    : Cell{fmt::format("id {} (unknown)", u64(e, "backend_id")), Colour::kYellow};
            t.add({str(e, "client"), vip, backend,
                   Cell{state, state == "valid" ? Colour::kNone : Colour::kYellow},
                   format_elapsed_ms(u64(e, "idle_ms")), format_elapsed_ms(u64(e, "age_ms")),
                   ended_text(e)});
        }
        out += t.render(style);
    }
    const std::uint64_t matched = u64(r, "matched"), shown = entries.size();
    if (flag(r, "truncated"))
        out += paint(matched > shown
                         ? fmt::format("showing {} of {} matching entries (truncated: --limit N "
                                       "shows more)",
                                       shown, matched)
                         : fmt::format("showing the first {}; more entries match (truncated: "
                                       "--limit N shows more)",
                                       entries_text(shown)),
                     Colour::kYellow, style) +
               "\n";
    else
        out += entries_text(matched) + " matched\n";
    return out + scan_line(r);
}

std::string render_conntrack_flush(const json& r) {
    const std::uint64_t matched = u64(r, "matched"), deleted = u64(r, "deleted");
    const std::string scan = " (scanned in " + format_number(number(r, "scan_ms")) + " ms)";
    if (flag(r, "dry_run"))
        return "would delete " + entries_text(matched) + scan + "; dry run: nothing deleted\n";
    std::string out = "deleted " + entries_text(deleted);
    if (deleted < matched)
        out += fmt::format(" of {} matched (the others ended or changed meanwhile)", matched);
    return out + scan + "\n";
}

// The selectors, --active-within and --limit, of every conntrack verb.
Checked<void> conntrack_check(const Raw& raw, Command& c) {
    if (auto ok = check_selectors(raw, c, examples_for(c.vip_key)); !ok) return ok;
    if (!raw.active_within.empty()) {
        auto d = check_duration("--active-within", raw.active_within, "--active-within 30s");
        if (!d) return std::unexpected(d.error());
        c.active_within = *d;
    }
    if (!raw.limit.empty()) {
        auto n = parse_unsigned(raw.limit);
        if (!n || *n < 1 || *n > kMaxListLimit)
            return std::unexpected("--limit: found " + in_quotes(raw.limit) +
                                   ", expected a number of entries 1-" +
                                   std::to_string(kMaxListLimit) + ", e.g. --limit 1000");
        c.limit = static_cast<std::uint32_t>(*n);
    }
    c.ct_stale = raw.stale;
    c.dry_run = raw.dry_run;
    return {};
}

void add_vip_selector(CLI::App& app, Raw& raw) {
    app.add_option("--vip", raw.vip, "only this VIP's entries (ADDRESS:PORT[/tcp|/udp])")
        ->type_name("VIP");
}

void add_backend_selector(CLI::App& app, Raw& raw) {
    app.add_option("--backend", raw.ct_backend,
                   "only entries pointing at this backend address (of any VIP, unless --vip)")
        ->type_name("ADDR");
}

void add_client_selector(CLI::App& app, Raw& raw) {
    app.add_option("--client", raw.client,
                   "only entries of clients in this prefix, or of this one address")
        ->type_name("CIDR");
}

constexpr VerbSpec kConntrackVerbs[] = {
    {.verb = Verb::kConntrackCount,
     .name = "count",
     .help = "Count the table's entries per VIP and per backend (stale: the entry's backend\n"
             "generation is no longer live; such a flow is rebalanced on its next packet),\n"
             "with the table's capacity, how full it is, and how long the scan took.",
     .examples = "  xlbctl conntrack count\n"
                 "  xlbctl conntrack count --vip 198.51.100.10:80/tcp\n"
                 "  xlbctl conntrack count --backend 203.0.113.11 --active-within 30s\n"
                 "  xlbctl conntrack count --json\n",
     .options =
         [](CLI::App& app, Raw& raw) {
             add_vip_selector(app, raw);
             add_backend_selector(app, raw);
             app.add_option("--active-within", raw.active_within,
                            "count only entries that saw a packet within DUR, e.g. 30s")
                 ->type_name("DUR");
         },
     .vip_option = true,
     .check = conntrack_check,
     .request =
         [](const Command& c) {
             return HttpRequest{"GET", "/v1/conntrack/count" + selector_query(c), ""};
         },
     .render = [](const Command&, const json& r,
                  const Style& style) { return render_conntrack_count(r, style); }},
    {.verb = Verb::kConntrackList,
     .name = "list",
     .help = "List entries: client, VIP, backend, state (valid, or stale: its backend\n"
             "generation is no longer live), idle time (since the entry last saw a\n"
             "packet, to about a second) and age. Says when more entries matched than\n"
             "--limit shows.",
     .examples = "  xlbctl conntrack list\n"
                 "  xlbctl conntrack list --vip 198.51.100.10:80/tcp --backend 203.0.113.11\n"
                 "  xlbctl conntrack list --client 192.0.2.0/24 --limit 1000\n"
                 "  xlbctl conntrack list --client 2001:db8:c::7 --json\n",
     .options =
         [](CLI::App& app, Raw& raw) {
             add_vip_selector(app, raw);
             add_backend_selector(app, raw);
             add_client_selector(app, raw);
             app.add_option("--limit", raw.limit,
                            "show at most N entries, 1-" + std::to_string(kMaxListLimit) +
                                " (default " + std::to_string(kDefaultListLimit) + ")")
                 ->type_name("N");
         },
     .vip_option = true,
     .check = conntrack_check,
     .request =
         [](const Command& c) {
             return HttpRequest{"GET", "/v1/conntrack" + selector_query(c), ""};
         },
     .render = [](const Command&, const json& r,
                  const Style& style) { return render_conntrack_list(r, style); }},
    {.verb = Verb::kConntrackFlush,
     .name = "flush",
     .help = "Delete the entries that match every selector given (at least one: --vip,\n"
             "--backend, --client or --stale). Their flows are then balanced by the\n"
             "table again: a flow whose backend is no longer its table owner moves (TCP\n"
             "connections to it are reset). Try --dry-run first.",
     .examples = "  xlbctl conntrack flush --stale\n"
                 "  xlbctl conntrack flush --backend 203.0.113.11 --dry-run\n"
                 "  xlbctl conntrack flush --vip 198.51.100.10:80/tcp --client 192.0.2.0/24\n",
     .options =
         [](CLI::App& app, Raw& raw) {
             add_vip_selector(app, raw);
             add_backend_selector(app, raw);
             add_client_selector(app, raw);
             app.add_flag("--stale", raw.stale,
                          "entries whose backend generation is no longer live (a removed or "
                          "re-added backend)");
             app.add_flag("--dry-run", raw.dry_run,
                          "delete nothing: say how many entries would be deleted");
         },
     .vip_option = true,
     .check = [](const Raw& raw, Command& c) -> Checked<void> {
         if (auto ok = conntrack_check(raw, c); !ok) return ok;
         if (!c.vip_key && !c.ct_backend && !c.ct_client && !c.ct_stale)
             return std::unexpected(
                 "conntrack flush: expected at least one selector, --vip V, --backend ADDR, "
                 "--client CIDR or --stale (deleting the whole table moves every flow whose "
                 "backend is not its table owner), e.g. xlbctl conntrack flush --stale "
                 "--dry-run");
         return {};
     },
     .request =
         [](const Command& c) {
             nlohmann::json body = nlohmann::json::object();
             if (c.vip_key) body["vip"] = c.vip;
             if (c.ct_backend) body["backend"] = c.ct_backend->to_string();
             if (c.ct_client) body["client"] = c.ct_client->to_string();
             if (c.ct_stale) body["stale"] = true;
             if (c.dry_run) body["dry_run"] = true;
             return HttpRequest{"POST", "/v1/conntrack/flush", body.dump()};
         },
     .render = [](const Command&, const json& r,
                  const Style&) { return render_conntrack_flush(r); }},
};

}  // namespace

const Noun& conntrack() {
    static const Noun noun{
        .name = "conntrack",
        .help = "Count, list or flush the connection table's entries (per VIP, backend, client).",
        .examples =
            "  xlbctl conntrack count\n"
            "  xlbctl conntrack count --vip 198.51.100.10:80/tcp --active-within 30s\n"
            "  xlbctl conntrack list --backend 203.0.113.11 --limit 20\n"
            "  xlbctl conntrack flush --stale --dry-run\n",
        .verbs = kConntrackVerbs};
    return noun;
}

}  // namespace xlb::xlbctl::noun
