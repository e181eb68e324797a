// SPDX-License-Identifier: Apache-2.0
// The pieces of rendering the verbs share (render.cpp): a reply's fields,
// cells coloured by state, and the lines several verbs print.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "xlb/xlbctl/render.h"

namespace xlb::xlbctl {

using Align = Table::Align;
using Cell = Table::Cell;

// A field that must be there (json::exception otherwise).
std::string str(const json& j, const char* key);
bool flag(const json& j, const char* key);
std::uint64_t u64(const json& j, const char* key);
double number(const json& j, const char* key);
// A counter that may be null (unreadable): "-".
std::string count_or_dash(const json& j, const char* key);
std::string bytes_or_dash(const json& j, const char* key);
std::string name_or_dash(const json& j);

Cell panic_cell(const json& vip);
Cell backends_cell(const json& vip);
Cell table_state_cell(const json& vip);
Cell state_cell(const std::string& state);
Cell health_cell(const std::string& health);
Cell announcement_cell(const json& vip);
// The VIPs' last errors, a line each, after a table of them.
std::string vip_errors(const json& vips, const Style& style);
// The BGP speaker's state and the host's drain, one line.
std::string bgp_line(const json& bgp, const Style& style);
std::string entries_text(std::uint64_t n);
// "1234 of 4096 entries (30.13%)"
std::string occupancy_text(std::uint64_t entries, std::uint64_t capacity);
std::string conntrack_line(const json& ct, const Style& style);
// SYN cookies (docs/syn-cookies.md): the host's flood state, one line
// ("syn_flood" of /v1/status); a VIP's cookie state ("answering", "off (encap
// is not gue)"); whether any VIP of a reply has cookies on, or says anything
// of them at all (agents before cookies do not).
std::string syn_flood_line(const json& flood, const Style& style);
Cell syn_cookies_cell(const json& vip);
bool any_cookies_on(const json& vips);
bool any_cookies_shown(const json& vips);
// "VIP v  epoch N  checksum C"
std::string header_line(const json& r, const Style& style);
// A backend's effective weight on its configured weight's scale.
std::string effective_text(const json& b);
// Outcomes with a nonzero total: tx, then pass, then drops.
std::vector<std::string> seen_outcomes(const json& outcomes);
Colour outcome_colour(const std::string& name);
// later - earlier per second; null when either is null; 0 when it went back.
json rate(const json& earlier, const json& later, double seconds);
std::string rate_text(const json& v, std::string (*fmt_fn)(double));
// A backend change's dry run (docs/api.md, "Dry runs"): the share of slots
// that would change owner, per backend; nothing was changed.
std::string render_dry_run(const Command& c, const json& r, const Style& style);
// "a, b, c", or "none".
std::string list_or_none(const json& items);

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

}  // namespace xlb::xlbctl
