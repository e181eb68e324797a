// SPDX-License-Identifier: Apache-2.0
//
// Output of xlb-sim: one table of results, rendered as aligned text, CSV or
// JSON, and line charts written straight to SVG (no plotting dependency).

#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <variant>
#include <vector>

namespace xlb::sim {

// A value in the table; monostate is "not applicable" (printed "n/a", JSON
// null, empty in CSV).
using Cell = std::variant<std::monostate, std::int64_t, double, std::string>;

struct Column {
    std::string name;
    // Digits after the point for doubles in the text table (CSV and JSON
    // carry full precision).
    int precision = 3;
};

struct Report {
    std::string command;                // "placement", "churn", "balance"
    nlohmann::ordered_json parameters;  // everything needed to rerun it
    std::vector<Column> columns;
    std::vector<std::vector<Cell>> rows;
};

[[nodiscard]] std::string render_text(const Report& report);
[[nodiscard]] std::string render_csv(const Report& report);
// Deterministic: the same report gives the same bytes.
[[nodiscard]] std::string render_json(const Report& report);

struct Series {
    std::string name;
    std::vector<std::pair<double, double>> points;
    bool dashed = false;  // e.g. the ideal
    // Palette index, so that a series keeps its colour across plots even when
    // others are left out; -1 takes the series' position.
    int colour = -1;
};

struct Plot {
    std::string title;
    std::string x_label;
    std::string y_label;
    bool log_x = false;
    std::vector<Series> series;
};

[[nodiscard]] std::string render_svg(const Plot& plot);

}  // namespace xlb::sim
