// SPDX-License-Identifier: Apache-2.0
#include "xlb/sim/report.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>

namespace xlb::sim {

namespace {

std::string text_cell(const Cell& cell, int precision) {
    if (std::holds_alternative<std::int64_t>(cell)) {
        return fmt::format("{}", std::get<std::int64_t>(cell));
    }
    if (std::holds_alternative<double>(cell)) {
        return fmt::format("{:.{}f}", std::get<double>(cell), precision);
    }
    if (std::holds_alternative<std::string>(cell)) return std::get<std::string>(cell);
    return "n/a";
}

std::string csv_field(const std::string& text) {
    if (text.find_first_of(",\"\n") == std::string::npos) return text;
    std::string quoted = "\"";
    for (char c : text) {
        if (c == '"') quoted += '"';
        quoted += c;
    }
    return quoted + '"';
}

std::string xml_escape(const std::string& text) {
    std::string out;
    for (char c : text) {
        switch (c) {
            case '&': out += "&amp;"; break;
            case '<': out += "&lt;"; break;
            case '>': out += "&gt;"; break;
            case '"': out += "&quot;"; break;
            default: out += c;
        }
    }
    return out;
}

// 1, 2 or 5 times a power of ten: tick steps people can read.
double nice_step(double span, int target_ticks) {
    const double raw = span / target_ticks;
    const double magnitude = std::pow(10.0, std::floor(std::log10(raw)));
    for (double m : {1.0, 2.0, 5.0}) {
        if (m * magnitude >= raw) return m * magnitude;
    }
    return 10 * magnitude;
}

std::string tick_label(double v) { return fmt::format("{:g}", std::abs(v) < 1e-12 ? 0.0 : v); }

}  // namespace

std::string render_text(const Report& report) {
    std::vector<std::vector<std::string>> cells;
    std::vector<std::size_t> width(report.columns.size());
    for (std::size_t c = 0; c < report.columns.size(); ++c)
        width[c] = report.columns[c].name.size();
    for (const auto& row : report.rows) {
        auto& out = cells.emplace_back();
        for (std::size_t c = 0; c < row.size(); ++c) {
            out.push_back(text_cell(row[c], report.columns[c].precision));
            width[c] = std::max(width[c], out.back().size());
        }
    }
    std::string text;
    const auto line = [&](const auto& fields, const std::vector<bool>& left) {
        std::string l;
        for (std::size_t c = 0; c < fields.size(); ++c) {
            if (c > 0) l += "  ";
            l += left[c] ? fmt::format("{:<{}}", fields[c], width[c])
                         : fmt::format("{:>{}}", fields[c], width[c]);
        }
        while (!l.empty() && l.back() == ' ') l.pop_back();
        text += l + '\n';
    };
    // Text columns read left-aligned, numbers right-aligned.
    std::vector<bool> left(report.columns.size(), false);
    for (std::size_t c = 0; c < report.columns.size(); ++c) {
        left[c] = !report.rows.empty() && std::holds_alternative<std::string>(report.rows[0][c]);
    }
    std::vector<std::string> names;
    for (const auto& col : report.columns) names.push_back(col.name);
    line(names, left);
    std::vector<std::string> rule;
    for (auto w : width) rule.emplace_back(w, '-');
    line(rule, left);
    for (const auto& row : cells) line(row, left);
    return text;
}

std::string render_csv(const Report& report) {
    std::string text;
    for (std::size_t c = 0; c < report.columns.size(); ++c) {
        text += (c ? "," : "") + csv_field(report.columns[c].name);
    }
    text += '\n';
    for (const auto& row : report.rows) {
        for (std::size_t c = 0; c < row.size(); ++c) {
            if (c) text += ',';
            const Cell& cell = row[c];
            if (std::holds_alternative<double>(cell)) {
                text += fmt::format("{}", std::get<double>(cell));  // shortest round-trip
            } else if (!std::holds_alternative<std::monostate>(cell)) {
                text += csv_field(text_cell(cell, 0));
            }
        }
        text += '\n';
    }
    return text;
}

std::string render_json(const Report& report) {
    nlohmann::ordered_json doc;
    doc["command"] = report.command;
    doc["parameters"] = report.parameters;
    auto& rows = doc["rows"] = nlohmann::ordered_json::array();
    for (const auto& row : report.rows) {
        nlohmann::ordered_json object = nlohmann::ordered_json::object();
        for (std::size_t c = 0; c < row.size(); ++c) {
            const auto& name = report.columns[c].name;
            std::visit(
                [&](const auto& v) {
                    if constexpr (std::is_same_v<std::decay_t<decltype(v)>, std::monostate>) {
                        object[name] = nullptr;
                    } else {
                        object[name] = v;
                    }
                },
                row[c]);
        }
        rows.push_back(std::move(object));
    }
    return doc.dump(2) + '\n';
}

std::string render_svg(const Plot& plot) {
    constexpr double kWidth = 720, kHeight = 440;
    constexpr double kLeft = 80, kRight = 180, kTop = 40, kBottom = 60;
    const double plot_w = kWidth - kLeft - kRight, plot_h = kHeight - kTop - kBottom;

    double x_min = std::numeric_limits<double>::infinity(), x_max = -x_min;
    double y_min = 0, y_max = -std::numeric_limits<double>::infinity();
    const auto fx = [&](double x) { return plot.log_x ? std::log10(x) : x; };
    for (const auto& s : plot.series) {
        for (auto [x, y] : s.points) {
            if (plot.log_x && x <= 0) continue;
            x_min = std::min(x_min, fx(x));
            x_max = std::max(x_max, fx(x));
            y_min = std::min(y_min, y);
            y_max = std::max(y_max, y);
        }
    }
    if (!std::isfinite(x_min)) x_min = 0, x_max = 1;
    if (!std::isfinite(y_max)) y_max = 1;
    if (x_max <= x_min) x_max = x_min + 1;
    if (y_max <= y_min) y_max = y_min + 1;
    const double y_step = nice_step(y_max - y_min, 5);
    y_max = std::ceil(y_max / y_step) * y_step;
    const auto px = [&](double x) { return kLeft + (fx(x) - x_min) / (x_max - x_min) * plot_w; };
    const auto py = [&](double y) { return kTop + (1 - (y - y_min) / (y_max - y_min)) * plot_h; };

    // Colour-blind-safe palette (Okabe and Ito).
    static constexpr const char* kColours[] = {"#0072B2", "#D55E00", "#009E73", "#CC79A7",
                                               "#E69F00", "#56B4E9", "#000000", "#F0E442"};
    std::string svg = fmt::format(
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{}\" height=\"{}\" "
        "viewBox=\"0 0 {} {}\" font-family=\"sans-serif\" font-size=\"12\">\n"
        "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n"
        "<text x=\"{}\" y=\"24\" font-size=\"15\" text-anchor=\"middle\">{}</text>\n",
        kWidth, kHeight, kWidth, kHeight, kWidth / 2, xml_escape(plot.title));
    // Axes, grid and ticks.
    for (double y = y_min; y <= y_max + y_step / 2; y += y_step) {
        svg += fmt::format(
            "<line x1=\"{:.1f}\" y1=\"{:.1f}\" x2=\"{:.1f}\" y2=\"{:.1f}\" stroke=\"#ddd\"/>\n"
            "<text x=\"{:.1f}\" y=\"{:.1f}\" text-anchor=\"end\">{}</text>\n",
            kLeft, py(y), kLeft + plot_w, py(y), kLeft - 6, py(y) + 4, tick_label(y));
    }
    std::vector<double> x_ticks;
    if (plot.log_x) {
        for (double d = std::floor(x_min); d <= std::ceil(x_max); ++d) {
            for (double m : {1.0, 2.0, 5.0}) {
                const double v = m * std::pow(10.0, d);
                if (std::log10(v) >= x_min - 1e-9 && std::log10(v) <= x_max + 1e-9) {
                    x_ticks.push_back(v);
                }
            }
        }
    } else {
        const double step = nice_step(x_max - x_min, 8);
        for (double x = std::ceil(x_min / step) * step; x <= x_max + step / 1e6; x += step) {
            x_ticks.push_back(x);
        }
    }
    for (double x : x_ticks) {
        svg += fmt::format(
            "<line x1=\"{0:.1f}\" y1=\"{1:.1f}\" x2=\"{0:.1f}\" y2=\"{2:.1f}\" stroke=\"#ddd\"/>\n"
            "<text x=\"{0:.1f}\" y=\"{3:.1f}\" text-anchor=\"middle\">{4}</text>\n",
            px(x), kTop, kTop + plot_h, kTop + plot_h + 16, tick_label(x));
    }
    svg += fmt::format(
        "<rect x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" fill=\"none\" stroke=\"black\"/>\n"
        "<text x=\"{}\" y=\"{}\" text-anchor=\"middle\">{}</text>\n"
        "<text transform=\"translate(20 {}) rotate(-90)\" text-anchor=\"middle\">{}</text>\n",
        kLeft, kTop, plot_w, plot_h, kLeft + plot_w / 2, kHeight - 18, xml_escape(plot.x_label),
        kTop + plot_h / 2, xml_escape(plot.y_label));
    // Series and legend.
    for (std::size_t i = 0; i < plot.series.size(); ++i) {
        const auto& s = plot.series[i];
        const std::size_t c = s.colour >= 0 ? static_cast<std::size_t>(s.colour) : i;
        const char* colour = kColours[c % std::size(kColours)];
        std::string points;
        for (auto [x, y] : s.points) {
            if (plot.log_x && x <= 0) continue;
            points += fmt::format("{}{:.1f},{:.1f}", points.empty() ? "" : " ", px(x), py(y));
        }
        const char* dash = s.dashed ? " stroke-dasharray=\"6 4\"" : "";
        svg += fmt::format(
            "<polyline fill=\"none\" stroke=\"{}\" stroke-width=\"2\"{} points=\"{}\"/>\n", colour,
            dash, points);
        for (auto [x, y] : s.points) {
            if (plot.log_x && x <= 0) continue;
            svg += fmt::format("<circle cx=\"{:.1f}\" cy=\"{:.1f}\" r=\"2.5\" fill=\"{}\"/>\n",
                               px(x), py(y), colour);
        }
        const double ly = kTop + 10 + 20.0 * static_cast<double>(i);
        svg += fmt::format(
            "<line x1=\"{:.1f}\" y1=\"{:.1f}\" x2=\"{:.1f}\" y2=\"{:.1f}\" stroke=\"{}\" "
            "stroke-width=\"2\"{}/>\n<text x=\"{:.1f}\" y=\"{:.1f}\">{}</text>\n",
            kLeft + plot_w + 12, ly, kLeft + plot_w + 36, ly, colour, dash, kLeft + plot_w + 42,
            ly + 4, xml_escape(s.name));
    }
    svg += "</svg>\n";
    return svg;
}

}  // namespace xlb::sim
