// SPDX-License-Identifier: Apache-2.0
// xlbctl stats and top: the packet counters (GET /v1/stats), once or as
// rates refreshed in place (stats --watch), and every VIP with its backends
// on one screen (top, with GET /v1/backends). The refreshing loops are
// run.cpp's; their rendering is render.cpp's (render_watch, render_top).
#include <fmt/format.h>

#include <CLI/CLI.hpp>

#include "../checks.h"
#include "../render_parts.h"
#include "../request_parts.h"
#include "nouns.h"

namespace xlb::xlbctl::noun {

namespace {

std::string render_stats(const json& r, const Style& style) {
    const json& outcomes = r.at("outcomes");
    return render_vips_and_outcomes(
        r.at("vips"),
        {{"VIP"},
         {"NAME"},
         {"PACKETS", Align::kRight},
         {"BYTES", Align::kRight},
         {"NEW FLOWS", Align::kRight},
         {"CT HITS", Align::kRight},
         {"DROPS", Align::kRight},
         {"HINTED", Align::kRight}},
        [](const json& v) -> std::vector<Cell> {
            const bool drops = !v.at("drops").is_null() && u64(v, "drops") > 0;
            return {
                str(v, "vip"), name_or_dash(v), count_or_dash(v, "packets"),
                bytes_or_dash(v, "bytes"), count_or_dash(v, "new_flows"),
                count_or_dash(v, "conntrack_hits"),
                Cell{count_or_dash(v, "drops"), drops ? Colour::kRed : Colour::kNone},
                // second-chance hints; absent from older agents' replies
                v.contains("second_chance_hints") ? count_or_dash(v, "second_chance_hints") : "-"};
        },
        outcomes, {{"OUTCOME (every packet the program saw)"}, {"PACKETS", Align::kRight}},
        [&](const std::string& n) -> std::vector<Cell> {
            return {Cell{n, outcome_colour(n)},
                    std::to_string(outcomes.at(n).get<std::uint64_t>())};
        },
        style);
}

Checked<void> stats_check(const Raw& raw, Command& c) {
    // stats --watch VIP: the VIP was taken for SECS.
    std::string watch = raw.watch;
    if (!watch.empty() && !parse_number(watch) && raw.vip.empty()) {
        auto key = check_vip_key(watch);
        if (!key) return std::unexpected(key.error());
        c.vip_key = *key;
        watch.clear();
    }
    if (raw.watch_given) {
        double seconds = kDefaultWatchSeconds;
        if (!watch.empty()) {
            auto s = check_seconds("--watch", watch, kMinWatch, kMaxWatch, "--watch 2");
            if (!s) return std::unexpected(s.error());
            seconds = *s;
        }
        c.watch_seconds = seconds;
    }
    if (raw.count_given) {
        auto n = check_count(raw.count, "refreshes", "--watch 2 --count 10");
        if (!n) return std::unexpected(n.error());
        if (!c.watch_seconds)
            return std::unexpected("--count " + raw.count +
                                   " without --watch: --count limits the refreshes of "
                                   "--watch, e.g. xlbctl stats --watch 2 --count 10");
        c.count = *n;
    }
    return {};
}

Checked<void> top_check(const Raw& raw, Command& c) {
    double seconds = kDefaultTopSeconds;
    if (!raw.watch.empty()) {
        auto s = check_seconds("--interval", raw.watch, kMinWatch, kMaxWatch, "--interval 2");
        if (!s) return std::unexpected(s.error());
        seconds = *s;
    }
    c.watch_seconds = seconds;
    if (raw.count_given) {
        auto n = check_count(raw.count, "refreshes", "--count 10");
        if (!n) return std::unexpected(n.error());
        c.count = *n;
    }
    return {};
}

constexpr VerbSpec kStats[] = {
    {.verb = Verb::kStats,
     .help = "Packet counters: per VIP packets, bytes, new flows, connection-table\n"
             "hits and drops; globally every outcome (drops by reason). With\n"
             "--watch, rates (pps, bit/s) refreshed in place every SECS.",
     .examples = "  xlbctl stats\n"
                 "  xlbctl stats 198.51.100.10:80/tcp\n"
                 "  xlbctl stats --watch            # every 2 s until Ctrl-C\n"
                 "  xlbctl stats 198.51.100.10:80/tcp --watch 1\n"
                 "  xlbctl stats --watch 5 --count 12 --json   # JSON Lines\n",
     .options =
         [](CLI::App& app, Raw& raw) {
             app.add_option("VIP", raw.vip, "only this VIP (ADDRESS:PORT[/tcp|/udp])")
                 ->type_name("");
             app.add_option("--watch", raw.watch, "show rates, refreshing every SECS (default 2)")
                 ->expected(0, 1)
                 ->type_name("[SECS]");
             app.add_option("-n,--count", raw.count, "with --watch: stop after N refreshes")
                 ->type_name("N");
         },
     .check = stats_check,
     .request =
         [](const Command& c) {
             return HttpRequest{"GET", c.vip.empty() ? "/v1/stats" : "/v1/stats?" + vip_query(c),
                                ""};
         },
     .render = [](const Command&, const json& r,
                  const Style& style) { return render_stats(r, style); }},
};

constexpr VerbSpec kTop[] = {
    {.verb = Verb::kTop,
     .help = "Every VIP and its backends on one screen, refreshed every SECS: admin state,\n"
             "health, weight and effective weight, share of the table's slots, and rates\n"
             "(packets/s, throughput, new flows/s and drops/s per VIP; packets/s and\n"
             "throughput per backend) over the last interval. Fits the terminal (the\n"
             "rows that do not fit are counted). --json: one snapshot after one interval\n"
             "(with --count N, N lines of JSON).",
     .examples = "  xlbctl top\n"
                 "  xlbctl top --interval 5\n"
                 "  xlbctl top --json\n",
     .options =
         [](CLI::App& app, Raw& raw) {
             app.add_option("-i,--interval", raw.watch,
                            "seconds between refreshes, 0.1-3600 (default 1)")
                 ->type_name("SECS");
             app.add_option("-n,--count", raw.count, "stop after N refreshes")->type_name("N");
         },
     .check = top_check,
     // and GET /v1/backends: run.cpp
     .request =
         [](const Command&) {
             return HttpRequest{"GET", "/v1/stats", ""};
         }},
};

}  // namespace

const Noun& stats() {
    static const Noun noun{.name = "stats", .verbs = kStats};
    return noun;
}

const Noun& top() {
    static const Noun noun{.name = "top", .verbs = kTop};
    return noun;
}

}  // namespace xlb::xlbctl::noun
