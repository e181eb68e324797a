// SPDX-License-Identifier: Apache-2.0
// Human renderings of the API's replies (field meanings: docs/api.md).
#include "xlb/xlbctl/render.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

namespace xlb::xlbctl {

namespace {

using Align = Table::Align;
using Cell = Table::Cell;

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

std::string panic_text(const json& vip) {
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
    // Agents before BGP announcements have no "bgp": shown as nothing.
    const json* bgp = nullptr;
    if (auto it = r.find("bgp"); it != r.end() && it->is_object()) bgp = &*it;
    if (bgp) out += bgp_line(*bgp, style);
    // Agents before the connection table's ages have no "conntrack".
    if (const auto ct = r.find("conntrack"); ct != r.end() && ct->is_object())
        out += conntrack_line(*ct, style);
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
        t.add(row);
    }
    return out + t.render(style) + vip_errors(vips, style);
}

std::string render_host(const json& r, const Style& style) { return bgp_line(r, style); }

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

std::string header_line(const json& r, const Style& style) {
    return paint("VIP " + str(r, "vip"), Colour::kBold, style) +
           fmt::format("  epoch {}  checksum {}", u64(r, "epoch"), str(r, "checksum"));
}

std::string effective_text(const json& b) {
    // effective_weight = weight x 100 x weight_factor: shown on the weight's scale.
    return format_number(static_cast<double>(u64(b, "effective_weight")) / 100.0);
}

// The backends whose health probe serves other VIPs' identical checks too
// (probe_shared_with, docs/config.md "Shared probes"): a line after the
// table, the first few named; nothing when none is shared.
std::string shared_probes_note(const json& backends) {
    constexpr std::size_t kNamed = 5;
    std::vector<std::string> shared;
    for (const json& b : backends) {
        const auto it = b.find("probe_shared_with");
        if (it == b.end() || !it->is_array() || it->empty()) continue;
        shared.push_back(fmt::format(
            "{} (with {})", str(b, "address"),
            it->size() == 1 ? it->front().get<std::string>() : fmt::format("{} VIPs", it->size())));
    }
    if (shared.empty()) return "";
    std::string names;
    for (std::size_t i = 0; i < std::min(shared.size(), kNamed); ++i)
        names += (i ? ", " : "") + shared[i];
    if (shared.size() > kNamed) names += fmt::format(" and {} more", shared.size() - kNamed);
    return fmt::format("health probe shared with other VIPs' identical checks: {}\n", names);
}

std::string render_backend_list(const json& r, const Style& style, bool quiet) {
    const json& backends = r.at("backends");
    std::string out;
    if (quiet) {
        for (const json& b : backends) out += str(b, "address") + "\n";
        return out;
    }
    out = header_line(r, style) + "\n";
    if (backends.empty())
        return out + "no backends (add one: xlbctl backend add " + str(r, "vip") + " ADDR)\n";
    Table t({{"ADDRESS"},
             {"STATE"},
             {"HEALTH"},
             {"WEIGHT", Align::kRight},
             {"EFFECTIVE", Align::kRight},
             {"SLOTS", Align::kRight},
             {"SHARE", Align::kRight},
             {"PACKETS", Align::kRight},
             {"BYTES", Align::kRight},
             {"LAST FAILURE"}});
    for (const json& b : backends) {
        const std::string failure = b.value("last_failure", "");
        t.add({str(b, "address"), state_cell(str(b, "state")), health_cell(str(b, "health")),
               std::to_string(u64(b, "weight")), effective_text(b), std::to_string(u64(b, "slots")),
               format_percent(number(b, "share_of_slots")), count_or_dash(b, "packets"),
               bytes_or_dash(b, "bytes"), failure.empty() ? "-" : failure});
    }
    return out + t.render(style) + shared_probes_note(backends);
}

const json* find_backend(const json& vip, const std::string& address) {
    if (!vip.contains("backends")) return nullptr;
    for (const json& b : vip.at("backends"))
        if (b.value("address", "") == address) return &b;
    return nullptr;
}

std::string slots_text(const json& b) {
    return fmt::format("{} slots ({})", u64(b, "slots"),
                       format_percent(number(b, "share_of_slots")));
}

std::string render_backend_change(const Command& c, const json& r) {
    const std::string addr = c.backend.to_string();
    const std::string vip = str(r, "vip");
    const std::string epoch = fmt::format("epoch {}", u64(r, "epoch"));
    const json* b = find_backend(r, addr);
    auto weights = [&]() {
        return fmt::format("weight {} (effective {}), {}", u64(*b, "weight"), effective_text(*b),
                           slots_text(*b));
    };
    switch (c.verb) {
        case Verb::kBackendAdd:
            if (!b) break;
            return fmt::format("added backend {} to {}: {}, {}\n", addr, vip, weights(), epoch);
        case Verb::kBackendDel:
            return fmt::format("removed backend {} from {}: its flows moved to the others, {}\n",
                               addr, vip, epoch);
        case Verb::kBackendSet:
            if (!b) break;
            return fmt::format("backend {} of {}: {}, {}\n", addr, vip, weights(), epoch);
        case Verb::kBackendDrain:
            return fmt::format(
                "backend {} of {} is draining: no new flows, established flows stay; {}\n", addr,
                vip, epoch);
        case Verb::kBackendEnable:
            if (!b) break;
            return fmt::format("backend {} of {} is active: {}, {}\n", addr, vip, weights(), epoch);
        case Verb::kBackendDisable:
            return fmt::format(
                "backend {} of {} is disabled: out of the table and the data plane; {}\n", addr,
                vip, epoch);
        default: break;
    }
    return fmt::format("backend {} of {}: done, {}\n", addr, vip, epoch);
}

// A backend's last verdict changes (GET /v1/backend/history), oldest first.
std::string render_backend_history(const json& r, const Style& style) {
    std::string out = paint("VIP " + str(r, "vip"), Colour::kBold, style) + " backend " +
                      str(r, "address") + ": " +
                      paint(str(r, "health"), health_cell(str(r, "health")).colour, style);
    if (!flag(r, "checked"))
        return out +
               ", not health-checked (its VIP has no health_check, or the backend is "
               "disabled): no history\n";
    const std::uint64_t capacity = u64(r, "capacity");
    if (capacity == 0) return out + "; health_history is 0: the agent keeps no verdict changes\n";
    const json& history = r.at("history");
    if (history.empty()) return out + "; no verdict change since the agent started\n";
    out += fmt::format("; {} verdict change{} (the agent keeps the last {})\n", history.size(),
                       history.size() == 1 ? "" : "s", capacity);
    Table t({{"TIME"}, {"FROM"}, {"TO"}, {"REASON"}});
    for (const json& h : history)
        t.add({str(h, "time"), health_cell(str(h, "from")), health_cell(str(h, "to")),
               str(h, "reason")});
    return out + t.render(style);
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

std::string render_table(const json& r, const Style& style) {
    const std::uint64_t ring = u64(r, "ring_size"), configured = u64(r, "configured_ring_size");
    std::string out = header_line(r, style);
    out += fmt::format("  {} slots", ring);
    if (ring != configured) out += fmt::format(" (configured {})", configured);
    out += "  ";
    out += flag(r, "published") ? paint("live", Colour::kGreen, style)
                                : paint("pending", Colour::kYellow, style);
    out += "\n";
    if (ring == 0)
        out += paint("empty table: no backend can take new flows", Colour::kRed, style) + "\n";
    const json& backends = r.at("backends");
    if (backends.empty()) return out;
    Table t({{"BACKEND"},
             {"SLOTS", Align::kRight},
             {"SHARE", Align::kRight},
             {"TARGET", Align::kRight},
             {"DEVIATION", Align::kRight},
             {"IN TABLE"}});
    for (const json& b : backends) {
        const bool in = flag(b, "in_table");
        const double share = number(b, "share"), target = number(b, "target_share");
        std::string deviation = "-";
        if (in && target > 0) deviation = format_signed_percent(share / target - 1);
        t.add({str(b, "address"), std::to_string(u64(b, "slots")), format_percent(share),
               in ? format_percent(target) : "-", deviation,
               in ? Cell{"yes"} : Cell{"no", Colour::kYellow}});
    }
    return out + t.render(style);
}

std::string render_lookup(const json& r, const Style& style) {
    const std::string outcome = str(r, "outcome");
    std::string out = fmt::format("{}: a new {} flow from {} to port {} ", str(r, "vip"),
                                  str(r, "proto"), str(r, "src"), u64(r, "dport"));
    const std::uint64_t hash = u64(r, "hash");
    if (outcome == "tx" && !r.at("backend").is_null()) {
        out += "goes to " + paint(str(r, "backend"), Colour::kBold, style) + "\n";
        out += fmt::format("  backend id {}, slot {} of {}, hash {} (0x{:08x}), epoch {}\n",
                           u64(r, "backend_id"), u64(r, "slot"), u64(r, "ring_size"), hash, hash,
                           u64(r, "epoch"));
        return out;
    }
    std::string why = outcome;
    if (outcome == "drop_no_table")
        why = "the VIP has no published table";
    else if (outcome == "drop_no_backend")
        why = "the table is empty: no backend can take traffic";
    out += paint("is dropped", Colour::kRed, style) + fmt::format(": {} ({})\n", why, outcome);
    out += fmt::format("  hash {} (0x{:08x}), epoch {}\n", hash, hash, u64(r, "epoch"));
    return out;
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

// What stats and watch show: a table of the VIPs (or "no VIPs"), then one of
// the outcomes the program has seen (or a line saying there are none yet).
// The callers give the columns and make a VIP's or an outcome's row.
template <typename VipRow, typename OutcomeRow>
std::string render_vips_and_outcomes(const json& vips, std::vector<Table::Column> vip_columns,
                                     VipRow vip_row, const json& outcomes,
                                     std::vector<Table::Column> outcome_columns,
                                     OutcomeRow outcome_row, const Style& style) {
    std::string out;
    if (vips.empty()) {
        out += "no VIPs\n";
    } else {
        Table t(std::move(vip_columns));
        for (const json& v : vips) t.add(vip_row(v));
        out += t.render(style);
    }
    out += "\n";
    const auto names = seen_outcomes(outcomes);
    if (names.empty()) return out + "every packet the program saw, by outcome: none yet\n";
    Table t(std::move(outcome_columns));
    for (const auto& n : names) t.add(outcome_row(n));
    return out + t.render(style);
}

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
                 {"AGE", Align::kRight}});
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
                   format_elapsed_ms(u64(e, "idle_ms")), format_elapsed_ms(u64(e, "age_ms"))});
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

std::string render_reload(const json& r, const Style& style) {
    const std::string result = str(r, "result");
    std::string out;
    if (result == "applied") {
        out += paint("reload applied", Colour::kGreen, style) +
               fmt::format(": added {}; removed {}; changed {}; {} VIP(s) untouched\n",
                           list_or_none(r.at("added")), list_or_none(r.at("removed")),
                           list_or_none(r.at("changed")), u64(r, "untouched"));
        out += fmt::format("settings changed: {}\n", list_or_none(r.at("settings_changed")));
        for (const json& d : r.at("disruptive"))
            out +=
                paint("disruptive (confirmed): " + d.get<std::string>(), Colour::kYellow, style) +
                "\n";
    } else {
        out += paint("reload rejected (" + result + ")", Colour::kRed, style) + ": " +
               str(r, "error") + "\n";
        for (const json& e : r.at("errors")) out += "  " + e.get<std::string>() + "\n";
        for (const json& d : r.at("disruptive"))
            out += "  disruptive: " + d.get<std::string>() + "\n";
        out += "the running configuration stays\n";
    }
    if (!r.at("restart_required").empty())
        out += fmt::format("takes effect at the next restart: {}\n",
                           list_or_none(r.at("restart_required")));
    for (const json& w : r.at("warnings")) out += "warning: " + w.get<std::string>() + "\n";
    return out;
}

}  // namespace

std::string render_human(const Command& c, const json& r, const Style& style) {
    switch (c.verb) {
        case Verb::kStatus: return render_status(r, style);
        case Verb::kVipList: return render_vip_list(r, style, c.quiet);
        case Verb::kVipAdd:
            if (r.value("dry_run", false))
                return fmt::format(
                    "dry run of vip add {}: the agent would add it as given; "
                    "nothing was changed\n",
                    str(r, "vip"));
            return render_vip_add(r);
        case Verb::kVipSet: return render_vip_set(r);
        case Verb::kVipDel: return fmt::format("deleted VIP {}\n", str(r, "vip"));
        case Verb::kBackendList: {
            if (!r.contains("vips")) return render_backend_list(r, style, c.quiet);
            // every VIP: one section each, a blank line between
            std::string out;
            for (const json& vip : r.at("vips")) {
                if (!out.empty() && !c.quiet) out += "\n";
                out += render_backend_list(vip, style, c.quiet);
            }
            return out.empty() && !c.quiet ? "no VIPs (add one: xlbctl vip add VIP)\n" : out;
        }
        case Verb::kBackendAdd:
        case Verb::kBackendDel:
        case Verb::kBackendSet:
        case Verb::kBackendDrain:
        case Verb::kBackendEnable:
        case Verb::kBackendDisable:
            if (c.dry_run) return render_dry_run(c, r, style);
            return render_backend_change(c, r);
        case Verb::kBackendHistory: return render_backend_history(r, style);
        case Verb::kStats: return render_stats(r, style);
        case Verb::kTable: return render_table(r, style);
        case Verb::kLookup: return render_lookup(r, style);
        case Verb::kReload: return render_reload(r, style);
        case Verb::kHostDrain:
        case Verb::kHostResume: return render_host(r, style);
        case Verb::kConntrackCount: return render_conntrack_count(r, style);
        case Verb::kConntrackList: return render_conntrack_list(r, style);
        case Verb::kConntrackFlush: return render_conntrack_flush(r);
        case Verb::kCapture: break;  // streamed to its file by run.cpp, never rendered
        case Verb::kTop: break;      // render_top
    }
    return r.dump(2) + "\n";
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
                {"bytes", b.at("bytes")}};
            row["packets_per_s"] =
                prev ? rate(prev->at("packets"), b.at("packets"), seconds) : json();
            row["bytes_per_s"] = prev ? rate(prev->at("bytes"), b.at("bytes"), seconds) : json();
            row["bits_per_s"] =
                row["bytes_per_s"].is_null() ? json() : json(row["bytes_per_s"].get<double>() * 8);
            backends.push_back(std::move(row));
        }
        v["backends"] = std::move(backends);
        vips.push_back(std::move(v));
    }
    return {{"time", time_utc}, {"interval_s", seconds}, {"vips", std::move(vips)}};
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
                                         {"DROPS", Align::kRight}};
    // Left out in this order while the table is wider than the terminal, as
    // top(1) does: VIP / BACKEND, HEALTH and PACKETS always stay.
    constexpr std::size_t kDropOrder[] = {1, 6, 5, 4, 9, 10, 2, 8};
    std::vector<std::vector<Cell>> cells;
    for (const json& v : s.at("vips")) {
        const json& drops = v.at("drops_per_s");
        const bool dropping = drops.is_number() && drops.get<double>() > 0;
        cells.push_back(
            {Cell{str(v, "vip")}, name_or_dash(v), "", "", "", "", "",
             rate_text(v.at("packets_per_s"), format_pps),
             rate_text(v.at("bits_per_s"), format_bits),
             rate_text(v.at("new_flows_per_s"), format_per_second),
             Cell{rate_text(drops, format_per_second), dropping ? Colour::kRed : Colour::kNone}});
        for (const json& b : v.at("backends"))
            cells.push_back({"  " + str(b, "address"), "", state_cell(str(b, "state")),
                             health_cell(str(b, "health")), std::to_string(u64(b, "weight")),
                             format_number(number(b, "effective_weight")),
                             format_number(number(b, "share_of_slots") * 100) + "%",
                             rate_text(b.at("packets_per_s"), format_pps),
                             rate_text(b.at("bits_per_s"), format_bits), "", ""});
    }
    std::vector<bool> shown(all.size(), true);
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
            shown[drop] = false;
            ++hidden;
        }

    std::string head =
        paint(fmt::format("every {}s", format_number(s.at("interval_s").get<double>())),
              Colour::kBold, style) +
        fmt::format("  {}  (q or Ctrl-C to stop)", str(s, "time"));
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
