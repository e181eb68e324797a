// SPDX-License-Identifier: Apache-2.0
// xlbctl status: the agent and its VIPs at a glance (GET /v1/status); with
// --peers, the comparison with other LB hosts is run.cpp's (peers.cpp).
#include <fmt/format.h>

#include <CLI/CLI.hpp>

#include "../checks.h"
#include "../render_parts.h"
#include "nouns.h"
#include "xlb/quic/cid.h"

namespace xlb::xlbctl::noun {

namespace {

// One line per VIP that routes QUIC by connection ID (agents before QUIC
// routing have no "quic"; null: not such a VIP): packets routed by CID and
// the fallbacks by reason, a count "-" while unreadable.
std::string quic_lines(const json& vips, const Style& style) {
    std::string out;
    for (const json& v : vips) {
        const auto q = v.find("quic");
        if (q == v.end() || !q->is_object()) continue;
        std::string reasons;
        std::uint64_t fell_back = 0;
        static const json kNone = json::object();
        const auto f = q->find("fallbacks");
        const json& by_reason = f != q->end() && f->is_object() ? *f : kNone;
        // in the data path's order, not the object's (alphabetical)
        for (std::uint32_t r = 0; r < XLB_QUIC_FALLBACKS; ++r) {
            const char* reason = quic::fallback_name(r);
            const json n = by_reason.value(reason, json());
            reasons += fmt::format("{}{} {}", reasons.empty() ? "" : ", ", reason,
                                   n.is_number() ? std::to_string(n.get<std::uint64_t>()) : "-");
            if (n.is_number()) fell_back += n.get<std::uint64_t>();
        }
        out += fmt::format("quic {}: {} routed by connection ID, {} fallbacks ({})\n",
                           paint(str(v, "vip"), Colour::kBold, style), count_or_dash(*q, "routed"),
                           fell_back, reasons);
    }
    return out;
}

std::string render_status(const json& r, const Style& style) {
    const bool ready = flag(r, "ready");
    std::string out =
        fmt::format("xlbd {} on {}, {} XDP, up {}, ", str(r, "version"), str(r, "interface"),
                    str(r, "xdp_mode"), format_uptime(u64(r, "uptime_s")));
    out += ready ? paint("ready", Colour::kGreen, style) : paint("not ready", Colour::kRed, style);
    out += "\n";
    // Agents before POST /v1/reload have no such field: shown as nothing.
    if (const auto reload = r.find("last_reload"); reload != r.end() && reload->is_object()) {
        const std::string result = str(*reload, "result");
        out += fmt::format("last reload: {} ({}): ", str(*reload, "time"), str(*reload, "source"));
        if (result == "applied")
            out += paint("applied", Colour::kGreen, style) + "\n";
        else
            out += paint("rejected (" + result + ")", Colour::kRed, style) + ": " +
                   reload->value("error", std::string()) + "\n";
    }
    // Only a fleet's host has "fleet": the config revision its tables are of.
    if (const auto f = r.find("fleet"); f != r.end() && f->is_object()) {
        const json& store = f->at("store");
        out += fmt::format("fleet {} as host {}: config revision {} ({})", str(*f, "name"),
                           str(*f, "host"), f->value("applied_revision", std::int64_t{0}),
                           str(*f, "source"));
        out += store.value("reachable", false)
                   ? ", store reachable"
                   : ", " +
                         paint("store unreachable since " + store.value("since", std::string()),
                               Colour::kRed, style) +
                         ": " + store.value("error", std::string());
        out += "\n";
        if (const auto refused = f->find("refused"); refused != f->end() && refused->is_object()) {
            out += paint(fmt::format("refused desired revision {} ({})",
                                     refused->value("revision", std::int64_t{0}),
                                     refused->value("reason", std::string())),
                         Colour::kRed, style) +
                   ":\n";
            for (const json& e : refused->value("errors", json::array()))
                out += "  " + e.get<std::string>() + "\n";
        }
    }
    // Agents before BGP announcements have no "bgp": shown as nothing.
    const json* bgp = nullptr;
    if (auto it = r.find("bgp"); it != r.end() && it->is_object()) bgp = &*it;
    if (bgp) out += bgp_line(*bgp, style);
    // Agents before the connection table's ages have no "conntrack".
    if (const auto ct = r.find("conntrack"); ct != r.end() && ct->is_object())
        out += conntrack_line(*ct, style);
    // Agents before SYN cookies have no "syn_flood"; null: no detector.
    if (const auto f = r.find("syn_flood"); f != r.end() && f->is_object())
        out += syn_flood_line(*f, style);
    const bool announcing = bgp && bgp->value("enabled", false);
    const json& vips = r.at("vips");
    if (vips.empty()) {
        out += "no VIPs (add one: xlbctl vip add ADDRESS:PORT/PROTO)\n";
        return out;
    }
    std::vector<Table::Column> columns{{"VIP"},
                                       {"NAME"},
                                       {"BACKENDS", Align::kRight},
                                       {"HEALTHY WEIGHT", Align::kRight},
                                       {"PANIC"},
                                       {"EPOCH", Align::kRight},
                                       {"CHECKSUM"},
                                       {"TABLE"}};
    if (announcing) columns.push_back({"BGP"});
    const bool cookies_shown = any_cookies_shown(vips), cookies_on = any_cookies_on(vips);
    if (cookies_shown) columns.push_back({"SYN COOKIES"});
    if (cookies_on)
        for (const char* c : {"COOKIES SENT", "ACKS VALID", "ACKS INVALID"})
            columns.push_back({c, Align::kRight});
    Table t(columns);
    for (const json& v : vips) {
        const bool unchecked =
            v.value("backends_unchecked", std::uint64_t{0}) > 0 &&
            v.value("backends_unchecked", std::uint64_t{0}) == u64(v, "backends_total");
        std::vector<Cell> row{
            str(v, "vip"),
            name_or_dash(v),
            backends_cell(v),
            unchecked ? Cell{"-"} : Cell{format_percent(number(v, "healthy_share"))},
            panic_cell(v),
            std::to_string(u64(v, "epoch")),
            str(v, "checksum"),
            table_state_cell(v)};
        if (announcing) row.push_back(announcement_cell(v));
        if (cookies_shown) row.push_back(syn_cookies_cell(v));
        if (cookies_on) {
            static const json kNone = json::object();
            const auto it = v.find("syn_cookies");
            const json& k = it != v.end() && it->is_object() ? *it : kNone;
            for (const char* key : {"cookies_sent", "acks_valid", "acks_invalid"})
                row.push_back(k.contains(key) ? Cell{count_or_dash(k, key)} : Cell{"-"});
        }
        t.add(row);
    }
    return out + t.render(style) + quic_lines(vips, style) + vip_errors(vips, style);
}

constexpr VerbSpec kStatusVerbs[] = {
    {.verb = Verb::kStatus,
     .help = "The agent (version, interface, XDP mode, uptime, readiness, BGP) and, per VIP,\n"
             "healthy/total backends, panic, epoch, table checksum, announcement and SYN\n"
             "cookies (off, auto idle, answering, always; the counts while on); for QUIC\n"
             "VIPs, packets routed by connection ID and fallbacks by reason.\n"
             "With --peers, compares this host's tables with other LB hosts' and exits 1\n"
             "when they differ (docs/scale-out.md).",
     .examples = "  xlbctl status\n"
                 "  xlbctl status --json\n"
                 "  XLB_SOCKET=/tmp/lab/xlbd.sock xlbctl status\n"
                 "  xlbctl status --peers /run/xlb-lab/p/lb2/xlbd.sock\n"
                 "  ssh lb2 xlbctl status --json > lb2.json; xlbctl status --peers lb2.json\n",
     .options =
         [](CLI::App& app, Raw& raw) {
             app.add_option("--peers", raw.peers,
                            "other LB hosts: API socket paths, or files with their `xlbctl "
                            "status --json`")
                 ->type_name("SOCKET|FILE")
                 ->expected(1, -1);
         },
     .request =
         [](const Command&) {
             return HttpRequest{"GET", "/v1/status", ""};
         },
     .render = [](const Command&, const json& r,
                  const Style& style) { return render_status(r, style); }},
};

}  // namespace

const Noun& status() {
    static const Noun noun{.name = "status", .verbs = kStatusVerbs};
    return noun;
}

}  // namespace xlb::xlbctl::noun
