// SPDX-License-Identifier: Apache-2.0
// Human renderings of the API's replies (field meanings: docs/api.md): what
// the verbs share (render_parts.h), stats --watch and top. Each verb's own
// rendering is in its noun's file (src/nouns/).
#include "xlb/xlbctl/render.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "render_parts.h"
#include "xlb/xlbctl/verbs.h"

namespace xlb::xlbctl {

std::string str(const json& j, const char* key) { return j.at(key).get<std::string>(); }

bool flag(const json& j, const char* key) { return j.at(key).get<bool>(); }

std::uint64_t u64(const json& j, const char* key) { return j.at(key).get<std::uint64_t>(); }

double number(const json& j, const char* key) { return j.at(key).get<double>(); }

// An integer counter that may be null (unreadable): "-".
std::string count_or_dash(const json& j, const char* key) {
    const json& v = j.at(key);
    return v.is_null() ? "-" : std::to_string(v.get<std::uint64_t>());
}

std::string bytes_or_dash(const json& j, const char* key) {
    const json& v = j.at(key);
    return v.is_null() ? "-" : format_bytes(v.get<double>());
}

std::string name_or_dash(const json& j) {
    std::string name = j.value("name", "");
    return name.empty() ? "-" : name;
}

static std::string panic_text(const json& vip) {
    if (!flag(vip, "panic")) return "no";
    const std::string reason = str(vip, "panic_reason");
    if (reason == "below_threshold") return "yes (below threshold)";
    if (reason == "awaiting_first_verdicts") return "yes (awaiting first verdicts)";
    return "yes (" + reason + ")";
}

Cell panic_cell(const json& vip) {
    const bool panic = flag(vip, "panic");
    return {panic_text(vip), panic ? Colour::kRed : Colour::kNone};
}

Cell backends_cell(const json& vip) {
    const auto healthy = u64(vip, "backends_healthy"), total = u64(vip, "backends_total");
    // A VIP without a health check: its backends are never probed.
    const auto unchecked = vip.value("backends_unchecked", std::uint64_t{0});
    if (total > 0 && unchecked == total) return {fmt::format("{} unchecked", total)};
    Colour c = Colour::kNone;
    if (total > 0 && healthy == 0)
        c = Colour::kRed;
    else if (healthy < total)
        c = Colour::kYellow;
    return {fmt::format("{}/{}", healthy, total), c};
}

Cell table_state_cell(const json& vip) {
    return flag(vip, "published") ? Cell{"live", Colour::kGreen} : Cell{"pending", Colour::kYellow};
}

Cell state_cell(const std::string& state) {
    if (state == "drain") return {state, Colour::kYellow};
    if (state == "disabled") return {state, Colour::kDim};
    return {state};
}

Cell health_cell(const std::string& health) {
    if (health == "healthy") return {health, Colour::kGreen};
    if (health == "unhealthy") return {health, Colour::kRed};
    if (health == "unchecked") return {health};  // no health check: never probed
    return {health, Colour::kYellow};
}

// Errors the agent reported for VIPs, one line each.
std::string vip_errors(const json& vips, const Style& style) {
    std::string out;
    for (const json& v : vips) {
        const std::string error = v.value("last_error", "");
        if (!error.empty())
            out += paint(str(v, "vip") + ": last error: " + error, Colour::kRed, style) + "\n";
    }
    return out;
}

// "BGP: ..." and "host: ..." lines of status (and the host verbs' answer).
std::string bgp_line(const json& bgp, const Style& style) {
    std::string out;
    const json& host = bgp.at("host");
    if (flag(host, "drained"))
        out += paint("host drained", Colour::kYellow, style) + " since " +
               host.at("since").get<std::string>() + ": every VIP withdrawn (xlbctl host resume)\n";
    if (!bgp.value("enabled", false)) {
        out += "BGP: off (bgp.enabled: false)\n";
        return out;
    }
    const json& daemon = bgp.at("daemon");
    const std::size_t routes = bgp.at("routes").size();
    if (flag(daemon, "reachable") && daemon.at("error").is_null()) {
        out +=
            fmt::format("BGP: BIRD {} on {}: {} ", str(daemon, "version"),
                        str(daemon, "control_socket"), paint("reachable", Colour::kGreen, style));
    } else {
        out += "BGP: " +
               paint(daemon.at("error").is_string() ? daemon.at("error").get<std::string>()
                                                    : std::string("BGP daemon not reached yet"),
                     Colour::kRed, style) +
               "; ";
    }
    out +=
        fmt::format("{} route{} in {}\n", routes, routes == 1 ? "" : "s", str(bgp, "routes_file"));
    return out;
}

Cell announcement_cell(const json& vip) {
    const auto it = vip.find("announcement");
    if (it == vip.end() || !it->is_object()) return {"-"};
    const std::string state = str(*it, "state"), reason = str(*it, "reason");
    if (state == "announced")
        return {reason == "serving" ? "announced" : "announced (" + reason + ")", Colour::kGreen};
    // BIRD does not answer: the routers may have dropped the routes or may
    // hold older ones.
    if (state == "unknown") return {"unknown (daemon unreachable)", Colour::kRed};
    return {"withdrawn (" + reason + ")",
            reason == "policy_never" ? Colour::kDim : Colour::kYellow};
}

std::string entries_text(std::uint64_t n) {
    return fmt::format("{} entr{}", n, n == 1 ? "y" : "ies");
}

// "1234 of 4096 entries (30.13%)"
std::string occupancy_text(std::uint64_t entries, std::uint64_t capacity) {
    std::string out = fmt::format("{} of {} entries", entries, capacity);
    if (capacity > 0) out += " (" + format_percent(static_cast<double>(entries) / capacity) + ")";
    return out;
}

// status's connection-table line (docs/api.md, "conntrack" of GET /v1/status).
std::string conntrack_line(const json& ct, const Style& style) {
    const std::uint64_t capacity = u64(ct, "capacity"), entries = u64(ct, "entries");
    // From 75% most of the table's 4-entry sets are full (docs/conntrack.md):
    // new flows replace entries, live ones in crowded sets.
    const bool nearly_full = capacity > 0 && entries * 4 >= capacity * 3;
    std::string out = "conntrack: " + paint(occupancy_text(entries, capacity),
                                            nearly_full ? Colour::kYellow : Colour::kNone, style);
    const std::uint64_t requested = ct.value("requested_capacity", capacity);
    if (requested != capacity)
        out += paint(fmt::format(" (maps.conntrack_entries is {}: kept the pinned size; "
                                 "conntrack.resize: replace resizes)",
                                 requested),
                     Colour::kYellow, style);
    const std::uint64_t rate = u64(ct, "insert_rate_per_cpu");
    out += rate == 0 ? std::string(", insert budget unlimited")
                     : fmt::format(", insert budget {}/s per CPU (burst {})", rate,
                                   u64(ct, "insert_burst"));
    const std::uint64_t skipped = u64(ct, "skipped_inserts");
    out += ", " + paint(fmt::format("{} skipped insert{}", skipped, skipped == 1 ? "" : "s"),
                        skipped > 0 ? Colour::kYellow : Colour::kNone, style);
    std::string cpus;
    if (const auto f = ct.find("flooded_cpus"); f != ct.end() && f->is_array())
        for (const json& cpu : *f)
            cpus += (cpus.empty() ? "" : ", ") + std::to_string(cpu.get<std::uint64_t>());
    if (!cpus.empty()) out += "; " + paint("under flood on CPU " + cpus, Colour::kRed, style);
    return out + "\n";
}

std::string syn_flood_line(const json& f, const Style& style) {
    const std::string state = str(f, "state");
    const std::uint64_t floods = u64(f, "floods");
    const std::string since = f.value("since", json()).is_string() ? str(f, "since") : "";
    std::string peak;
    if (floods > 0 && f.value("peak_cpu", json()).is_number())
        peak = fmt::format("peak {} SYNs/s on CPU {}",
                           format_number(std::round(number(f, "peak_rate"))), u64(f, "peak_cpu"));
    std::string out = "SYN flood: ";
    if (state == "answering") {
        out += paint("answering", Colour::kRed, style);
        if (!since.empty()) out += " since " + since;
        out += " (" + peak + "): VIPs on auto answer SYNs with cookies";
    } else if (state == "recent") {
        out += paint("recent", Colour::kYellow, style);
        out += " (ended" + (since.empty() ? "" : " " + since) + ", " + peak +
               "): SYNs go to backends, cookies already sent are still accepted";
    } else {
        out += state;
        out += fmt::format(" (answers over {} SYNs/s on a CPU; {} flood{} so far)",
                           u64(f, "start_rate"), floods, floods == 1 ? "" : "s");
    }
    return out + "\n";
}

Cell syn_cookies_cell(const json& vip) {
    const auto it = vip.find("syn_cookies");
    if (it == vip.end() || !it->is_object()) return Cell{"-"};
    const std::string state = str(*it, "state");
    const json& reason = it->value("reason", json());
    if (state == "off" && reason.is_string())
        return Cell{"off (" + reason.get<std::string>() + ")"};
    return Cell{state, state == "answering" ? Colour::kRed : Colour::kNone};
}

bool any_cookies_on(const json& vips) {
    for (const json& v : vips)
        if (const auto it = v.find("syn_cookies"); it != v.end() && it->is_object())
            if (it->value("mode", std::string("off")) != "off") return true;
    return false;
}

bool any_cookies_shown(const json& vips) {
    for (const json& v : vips)
        if (const auto it = v.find("syn_cookies"); it != v.end() && it->is_object()) return true;
    return false;
}

std::string header_line(const json& r, const Style& style) {
    return paint("VIP " + str(r, "vip"), Colour::kBold, style) +
           fmt::format("  epoch {}  checksum {}", u64(r, "epoch"), str(r, "checksum"));
}

std::string effective_text(const json& b) {
    // effective_weight = weight x 100 x weight_factor: shown on the weight's scale.
    return format_number(static_cast<double>(u64(b, "effective_weight")) / 100.0);
}

// Outcomes with a nonzero total, in the API's order.
std::vector<std::string> seen_outcomes(const json& outcomes) {
    std::vector<std::string> names;
    for (auto it = outcomes.begin(); it != outcomes.end(); ++it)
        if (it.value().is_number() && it.value().get<std::uint64_t>() > 0)
            names.push_back(it.key());
    // tx first, then pass, then drops: easier to read than alphabetical
    auto rank = [](const std::string& n) {
        if (n.starts_with("tx")) return 0;
        if (n.starts_with("pass")) return 1;
        return 2;
    };
    std::stable_sort(names.begin(), names.end(),
                     [&](const auto& a, const auto& b) { return rank(a) < rank(b); });
    return names;
}

Colour outcome_colour(const std::string& name) {
    return name.starts_with("drop") ? Colour::kRed : Colour::kNone;
}

// later - earlier per second; null when either is null; 0 when it went back.
json rate(const json& earlier, const json& later, double seconds) {
    if (!earlier.is_number() || !later.is_number() || seconds <= 0) return nullptr;
    const auto a = earlier.get<std::uint64_t>(), b = later.get<std::uint64_t>();
    return b < a ? 0.0 : static_cast<double>(b - a) / seconds;
}

std::string rate_text(const json& v, std::string (*fmt_fn)(double)) {
    return v.is_null() ? "-" : fmt_fn(v.get<double>());
}

std::string list_or_none(const json& items) {
    std::string out;
    for (const json& item : items) out += (out.empty() ? "" : ", ") + item.get<std::string>();
    return out.empty() ? "none" : out;
}
// A dry run's prediction (docs/api.md, "Dry runs"): what would move, per
// backend, and nothing changed.
std::string render_dry_run(const Command& c, const json& r, const Style& style) {
    const std::uint64_t ring = u64(r, "ring_size"), moved = u64(r, "slots_moved");
    std::string out = fmt::format("dry run of {} {} {}: nothing was changed\n", verb_name(c.verb),
                                  str(r, "vip"), c.backend.to_string());
    out += fmt::format("  {} of {} slots ({} of new flows) would change backend; live epoch {}\n",
                       moved, ring, format_percent(number(r, "share_moved")), u64(r, "epoch"));
    const json& backends = r.at("backends");
    if (backends.empty()) return out;
    Table t({{"BACKEND"},
             {"SLOTS NOW", Align::kRight},
             {"SLOTS AFTER", Align::kRight},
             {"CHANGE", Align::kRight},
             {"SHARE NOW", Align::kRight},
             {"SHARE AFTER", Align::kRight}});
    for (const json& b : backends) {
        const auto before = static_cast<std::int64_t>(u64(b, "slots_before"));
        const auto after = static_cast<std::int64_t>(u64(b, "slots_after"));
        const std::int64_t change = after - before;
        const Colour colour = change < 0 ? Colour::kYellow : Colour::kNone;
        t.add({str(b, "address"), std::to_string(before), std::to_string(after),
               Cell{change == 0 ? "0" : fmt::format("{:+}", change), colour},
               format_percent(number(b, "share_before")),
               format_percent(number(b, "share_after"))});
    }
    return out + t.render(style);
}

std::string render_human(const Command& c, const json& r, const Style& style) {
    const VerbSpec& verb = verb_spec(c.verb);
    if (verb.render) return verb.render(c, r, style);
    return render_json(r);
}

std::string render_json(const json& reply) { return reply.dump(2) + "\n"; }

std::string pending_warning(const Command& c, const json& r) {
    if (c.dry_run) return "";
    if (!r.is_object() || !r.contains("published") || r.value("published", true)) return "";
    std::string why = r.value("last_error", "");
    // 202 with "publish": "pending": nothing failed, the table is being
    // built. (An agent before "publish" answered 202 for a failed publish
    // too, with last_error set.)
    if (r.value("publish", "") == "pending" || why.empty())
        return fmt::format(
            "{} {}: persisted, publish pending: not live yet (nothing failed; xlbctl status "
            "shows when it is live)",
            verb_name(c.verb), r.value("vip", c.vip));
    return fmt::format(
        "{} {}: persisted, but not live yet: {} (the agent retries; xlbctl status "
        "shows when it is)",
        verb_name(c.verb), r.value("vip", c.vip), why);
}

json watch_sample(const json& before, const json& after, double seconds,
                  const std::string& time_utc) {
    json out = after;
    out["time"] = time_utc;
    out["interval_s"] = seconds;
    json outcome_rates = json::object();
    const json& a_out = after.at("outcomes");
    const json& b_out = before.at("outcomes");
    for (auto it = a_out.begin(); it != a_out.end(); ++it)
        outcome_rates[it.key()] =
            rate(b_out.contains(it.key()) ? b_out.at(it.key()) : json(), it.value(), seconds);
    out["outcomes_per_s"] = std::move(outcome_rates);
    for (json& v : out.at("vips")) {
        const json* prev = nullptr;
        for (const json& p : before.at("vips"))
            if (p.value("vip", "") == v.value("vip", "")) prev = &p;
        auto field_rate = [&](const char* key) {
            return prev ? rate(prev->at(key), v.at(key), seconds) : json();
        };
        v["packets_per_s"] = field_rate("packets");
        v["bytes_per_s"] = field_rate("bytes");
        v["bits_per_s"] =
            v["bytes_per_s"].is_null() ? json() : json(v["bytes_per_s"].get<double>() * 8);
        v["new_flows_per_s"] = field_rate("new_flows");
        v["conntrack_hits_per_s"] = field_rate("conntrack_hits");
        v["drops_per_s"] = field_rate("drops");
    }
    return out;
}

json top_sample(const json& backends_before, const json& stats_before, const json& backends_after,
                const json& stats_after, double seconds, const std::string& time_utc) {
    auto by_vip = [](const json& list, const std::string& key) -> const json* {
        for (const json& v : list.at("vips"))
            if (v.value("vip", "") == key) return &v;
        return nullptr;
    };
    static const json kNone;
    json vips = json::array();
    for (const json& vb : backends_after.at("vips")) {
        const std::string key = str(vb, "vip");
        const json* now = by_vip(stats_after, key);
        const json* then = by_vip(stats_before, key);
        const json* backends_then = by_vip(backends_before, key);
        json v = {
            {"vip", key}, {"name", now ? now->value("name", "") : ""}, {"epoch", vb.at("epoch")}};
        for (const char* field : {"packets", "bytes", "new_flows", "conntrack_hits", "drops"}) {
            const json& later = now && now->contains(field) ? now->at(field) : kNone;
            const json& earlier = then && then->contains(field) ? then->at(field) : kNone;
            v[field] = later;
            v[std::string(field) + "_per_s"] = rate(earlier, later, seconds);
        }
        v["bits_per_s"] =
            v["bytes_per_s"].is_null() ? json() : json(v["bytes_per_s"].get<double>() * 8);
        // Agents before SYN cookies have none: no "syn_cookies" either.
        if (now && now->contains("syn_cookies") && now->at("syn_cookies").is_object()) {
            const json& k = now->at("syn_cookies");
            const json* was =
                then && then->contains("syn_cookies") ? &then->at("syn_cookies") : nullptr;
            json c = {{"mode", k.value("mode", json())},
                      {"state", k.value("state", json())},
                      {"reason", k.value("reason", json())}};
            for (const char* field : {"syns", "cookies_sent", "acks_valid", "acks_invalid"}) {
                const json& later = k.contains(field) ? k.at(field) : kNone;
                const json& earlier = was && was->contains(field) ? was->at(field) : kNone;
                c[field] = later;
                c[std::string(field) + "_per_s"] = rate(earlier, later, seconds);
            }
            v["syn_cookies"] = std::move(c);
        }
        // QUIC VIPs (agents before QUIC routing have no "quic"; null: not a
        // QUIC VIP): routed by CID and all fallbacks together, with rates.
        if (now && now->contains("quic") && now->at("quic").is_object()) {
            const json& q = now->at("quic");
            const json* was = then && then->contains("quic") && then->at("quic").is_object()
                                  ? &then->at("quic")
                                  : nullptr;
            // The fallbacks' sum; null when one of them is unreadable.
            auto fallbacks = [](const json& quic) -> json {
                const auto f = quic.find("fallbacks");
                if (f == quic.end() || !f->is_object()) return nullptr;
                std::uint64_t sum = 0;
                for (const auto& [reason, n] : f->items()) {
                    if (!n.is_number()) return nullptr;
                    sum += n.get<std::uint64_t>();
                }
                return sum;
            };
            json c = {{"routed", q.value("routed", json())},
                      {"fallbacks", q.value("fallbacks", json())}};
            c["routed_per_s"] =
                rate(was ? was->value("routed", json()) : kNone, c["routed"], seconds);
            c["fallbacks_per_s"] = rate(was ? fallbacks(*was) : kNone, fallbacks(q), seconds);
            v["quic"] = std::move(c);
        }
        json backends = json::array();
        for (const json& b : vb.at("backends")) {
            const json* prev = nullptr;
            if (backends_then)
                for (const json& p : backends_then->at("backends"))
                    if (p.value("address", "") == b.value("address", "")) prev = &p;
            json row = {
                {"address", b.at("address")},
                {"state", b.at("state")},
                {"health", b.at("health")},
                {"weight", b.at("weight")},
                {"effective_weight", static_cast<double>(u64(b, "effective_weight")) / 100.0},
                {"share_of_slots", b.at("share_of_slots")},
                {"packets", b.at("packets")},
                {"bytes", b.at("bytes")},
                {"new_flows", b.value("new_flows", json())},
                {"connections", b.value("connections", json())},
                {"inactive_connections", b.value("inactive_connections", json())}};
            row["packets_per_s"] =
                prev ? rate(prev->at("packets"), b.at("packets"), seconds) : json();
            row["new_flows_per_s"] =
                prev ? rate(prev->value("new_flows", json()), row["new_flows"], seconds) : json();
            row["bytes_per_s"] = prev ? rate(prev->at("bytes"), b.at("bytes"), seconds) : json();
            row["bits_per_s"] =
                row["bytes_per_s"].is_null() ? json() : json(row["bytes_per_s"].get<double>() * 8);
            backends.push_back(std::move(row));
        }
        v["backends"] = std::move(backends);
        vips.push_back(std::move(v));
    }
    json out = {{"time", time_utc}, {"interval_s", seconds}, {"vips", std::move(vips)}};
    if (const auto f = stats_after.find("syn_flood"); f != stats_after.end() && f->is_object())
        out["syn_flood"] = *f;
    return out;
}

namespace {

// The visible width of a line (what paint() adds takes no room).
std::size_t visible_width(std::string_view line) {
    std::size_t n = 0;
    for (std::size_t i = 0; i < line.size(); ++i) {
        if (line[i] == '\x1b') {
            while (i < line.size() && line[i] != 'm') ++i;
            continue;
        }
        // UTF-8: count lead bytes only
        if ((static_cast<unsigned char>(line[i]) & 0xC0) != 0x80) ++n;
    }
    return n;
}

std::size_t widest_line(const std::string& text) {
    std::size_t widest = 0, at = 0;
    while (at < text.size()) {
        const std::size_t eol = std::min(text.find('\n', at), text.size());
        widest = std::max(widest, visible_width(std::string_view(text).substr(at, eol - at)));
        at = eol + 1;
    }
    return widest;
}

// The first `width` visible characters of a plain (uncoloured) line.
std::string cut_to(const std::string& line, std::size_t width) {
    std::size_t n = 0, i = 0;
    for (; i < line.size(); ++i) {
        if ((static_cast<unsigned char>(line[i]) & 0xC0) != 0x80) {
            if (n == width) break;
            ++n;
        }
    }
    return line.substr(0, i);
}

}  // namespace

std::string render_top(const json& s, const Style& style, std::optional<int> rows,
                       std::optional<int> columns) {
    const std::vector<Table::Column> all{{"VIP / BACKEND"},
                                         {"NAME"},
                                         {"STATE"},
                                         {"HEALTH"},
                                         {"WEIGHT", Align::kRight},
                                         {"EFFECTIVE", Align::kRight},
                                         {"SLOTS", Align::kRight},
                                         {"PACKETS", Align::kRight},
                                         {"THROUGHPUT", Align::kRight},
                                         {"NEW FLOWS", Align::kRight},
                                         {"DROPS", Align::kRight},
                                         {"CONNS", Align::kRight},
                                         {"SYN COOKIES"},
                                         {"COOKIES", Align::kRight},
                                         {"ACKS OK", Align::kRight},
                                         {"ACKS BAD", Align::kRight},
                                         {"QUIC CID", Align::kRight},
                                         {"QUIC FALLBACK", Align::kRight}};
    // Left out in this order while the table is wider than the terminal, as
    // top(1) does: VIP / BACKEND, HEALTH and PACKETS always stay. The cookie
    // columns (12-15) are there only while a VIP has cookies on, the QUIC
    // ones (16-17) while a VIP routes QUIC by connection ID.
    constexpr std::size_t kDropOrder[] = {1, 13, 14, 17, 6, 5, 4, 11, 9, 15, 16, 10, 2, 12, 8};
    const bool cookies_on = any_cookies_on(s.at("vips"));
    bool quic_on = false;
    for (const json& v : s.at("vips"))
        if (const auto q = v.find("quic"); q != v.end() && q->is_object()) quic_on = true;
    std::vector<std::vector<Cell>> cells;
    for (const json& v : s.at("vips")) {
        const json& drops = v.at("drops_per_s");
        const bool dropping = drops.is_number() && drops.get<double>() > 0;
        cells.push_back(
            {Cell{str(v, "vip")}, name_or_dash(v), "", "", "", "", "",
             rate_text(v.at("packets_per_s"), format_pps),
             rate_text(v.at("bits_per_s"), format_bits),
             rate_text(v.at("new_flows_per_s"), format_per_second),
             Cell{rate_text(drops, format_per_second), dropping ? Colour::kRed : Colour::kNone},
             ""});
        const auto k = v.find("syn_cookies");
        if (k != v.end() && k->is_object()) {
            const json& bad = k->value("acks_invalid_per_s", json());
            const bool refusing = bad.is_number() && bad.get<double>() > 0;
            cells.back().insert(
                cells.back().end(),
                {syn_cookies_cell(v),
                 rate_text(k->value("cookies_sent_per_s", json()), format_per_second),
                 rate_text(k->value("acks_valid_per_s", json()), format_per_second),
                 Cell{rate_text(bad, format_per_second), refusing ? Colour::kRed : Colour::kNone}});
        } else {
            cells.back().insert(cells.back().end(), {"-", "-", "-", "-"});
        }
        if (const auto q = v.find("quic"); q != v.end() && q->is_object()) {
            const json& fallbacks = q->value("fallbacks_per_s", json());
            cells.back().insert(
                cells.back().end(),
                {rate_text(q->value("routed_per_s", json()), format_pps),
                 Cell{rate_text(fallbacks, format_pps),
                      fallbacks.is_number() && fallbacks.get<double>() > 0 ? Colour::kYellow
                                                                           : Colour::kNone}});
        } else {
            cells.back().insert(cells.back().end(), {"-", "-"});
        }
        for (const json& b : v.at("backends"))
            cells.push_back({"  " + str(b, "address"), "", state_cell(str(b, "state")),
                             health_cell(str(b, "health")), std::to_string(u64(b, "weight")),
                             format_number(number(b, "effective_weight")),
                             format_number(number(b, "share_of_slots") * 100) + "%",
                             rate_text(b.at("packets_per_s"), format_pps),
                             rate_text(b.at("bits_per_s"), format_bits),
                             rate_text(b.at("new_flows_per_s"), format_per_second), "",
                             count_or_dash(b, "connections"), "", "", "", "", "", ""});
    }
    std::vector<bool> shown(all.size(), true);
    if (!cookies_on)
        for (std::size_t i = 12; i <= 15; ++i) shown[i] = false;
    if (!quic_on) shown[16] = shown[17] = false;
    auto table = [&](const Style& with) {
        std::vector<Table::Column> cols;
        for (std::size_t i = 0; i < all.size(); ++i)
            if (shown[i]) cols.push_back(all[i]);
        Table t(std::move(cols));
        for (const auto& row : cells) {
            std::vector<Cell> kept;
            for (std::size_t i = 0; i < all.size(); ++i)
                if (shown[i]) kept.push_back(row[i]);
            t.add(std::move(kept));
        }
        return t.render(with);
    };
    const std::size_t width = columns ? static_cast<std::size_t>(std::max(*columns, 20)) : 0;
    std::size_t hidden = 0;
    if (columns)
        for (std::size_t drop : kDropOrder) {
            if (widest_line(table(Style{})) <= width) break;
            if (!shown[drop]) continue;
            shown[drop] = false;
            ++hidden;
        }

    std::string head =
        paint(fmt::format("every {}s", format_number(s.at("interval_s").get<double>())),
              Colour::kBold, style) +
        fmt::format("  {}  (q or Ctrl-C to stop)", str(s, "time"));
    if (const auto f = s.find("syn_flood"); f != s.end() && f->is_object()) {
        const std::string state = f->value("state", std::string());
        if (state == "answering")
            head += "  " + paint("SYN flood: answering", Colour::kRed, style);
        else if (state == "recent")
            head += "  " + paint("SYN flood: recent", Colour::kYellow, style);
    }
    if (hidden > 0) head += fmt::format("  {} column{} hidden", hidden, hidden == 1 ? "" : "s");
    if (columns && visible_width(head) > width) {
        head = fmt::format("every {}s  {}", format_number(s.at("interval_s").get<double>()),
                           str(s, "time"));
        head = cut_to(head, width);
    }
    head += "\n";
    std::string body;
    if (s.at("vips").empty()) {
        body = "no VIPs (add one: xlbctl vip add VIP)\n";
    } else if (columns && widest_line(table(Style{})) > width) {
        // Still too wide with only the columns that stay: cut, without colour
        // (a cut escape sequence would colour the rest of the screen).
        const std::string plain = table(Style{});
        for (std::size_t at = 0; at < plain.size();) {
            const std::size_t eol = std::min(plain.find('\n', at), plain.size());
            body += cut_to(plain.substr(at, eol - at), width) + "\n";
            at = eol + 1;
        }
    } else {
        body = table(style);
    }
    if (!rows) return head + body;
    // The heading, the table's lines that fit, and a last line saying what
    // did not.
    std::vector<std::string> lines;
    for (std::size_t at = 0; at < body.size();) {
        const std::size_t eol = body.find('\n', at);
        lines.push_back(body.substr(at, eol == std::string::npos ? std::string::npos : eol - at));
        at = eol == std::string::npos ? body.size() : eol + 1;
    }
    const auto room = static_cast<std::size_t>(std::max(*rows - 2, 2));
    if (lines.size() <= room) return head + body;
    std::string out = head;
    for (std::size_t i = 0; i + 1 < room; ++i) out += lines[i] + "\n";
    std::string more =
        fmt::format("... {} more lines (a taller terminal shows them; --json has every row)",
                    lines.size() - (room - 1));
    if (columns && more.size() > width)
        more = cut_to(fmt::format("... {} more lines", lines.size() - (room - 1)), width);
    return out + more + "\n";
}

std::string render_watch(const json& s, const Style& style) {
    std::string out =
        paint(fmt::format("every {}s", format_number(s.at("interval_s").get<double>())),
              Colour::kBold, style) +
        fmt::format("  {}  (Ctrl-C to stop)\n", str(s, "time"));
    const json& outcomes = s.at("outcomes");
    return out + render_vips_and_outcomes(
                     s.at("vips"),
                     {{"VIP"},
                      {"NAME"},
                      {"PACKETS", Align::kRight},
                      {"THROUGHPUT", Align::kRight},
                      {"NEW FLOWS", Align::kRight},
                      {"CT HITS", Align::kRight},
                      {"DROPS", Align::kRight},
                      {"TOTAL PACKETS", Align::kRight},
                      {"TOTAL BYTES", Align::kRight}},
                     [](const json& v) -> std::vector<Cell> {
                         const json& drops = v.at("drops_per_s");
                         const bool dropping = drops.is_number() && drops.get<double>() > 0;
                         return {str(v, "vip"),
                                 name_or_dash(v),
                                 rate_text(v.at("packets_per_s"), format_pps),
                                 rate_text(v.at("bits_per_s"), format_bits),
                                 rate_text(v.at("new_flows_per_s"), format_per_second),
                                 rate_text(v.at("conntrack_hits_per_s"), format_per_second),
                                 Cell{rate_text(drops, format_per_second),
                                      dropping ? Colour::kRed : Colour::kNone},
                                 count_or_dash(v, "packets"),
                                 bytes_or_dash(v, "bytes")};
                     },
                     outcomes,
                     {{"OUTCOME (every packet the program saw)"},
                      {"RATE", Align::kRight},
                      {"TOTAL", Align::kRight}},
                     [&](const std::string& n) -> std::vector<Cell> {
                         return {Cell{n, outcome_colour(n)},
                                 rate_text(s.at("outcomes_per_s").at(n), format_pps),
                                 std::to_string(outcomes.at(n).get<std::uint64_t>())};
                     },
                     style);
}

}  // namespace xlb::xlbctl
