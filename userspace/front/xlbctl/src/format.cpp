// SPDX-License-Identifier: Apache-2.0
#include "xlb/xlbctl/format.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

namespace xlb::xlbctl {

std::string paint(std::string_view text, Colour colour, const Style& style) {
    if (!style.colour || colour == Colour::kNone || text.empty()) return std::string(text);
    const char* sgr = "";
    switch (colour) {
        case Colour::kBold: sgr = "1"; break;
        case Colour::kDim: sgr = "2"; break;
        case Colour::kGreen: sgr = "32"; break;
        case Colour::kYellow: sgr = "33"; break;
        case Colour::kRed: sgr = "31"; break;
        case Colour::kNone: break;
    }
    return fmt::format("\x1b[{}m{}\x1b[0m", sgr, text);
}

namespace {

// Three significant digits: 1.23, 12.3, 123.
std::string significant(double v) {
    if (v >= 99.95) return fmt::format("{:.0f}", v);
    if (v >= 9.995) return fmt::format("{:.1f}", v);
    return fmt::format("{:.2f}", v);
}

// value scaled by `base` through the prefixes; the unit follows the prefix.
std::string scaled(double value, double base, const char* const* prefixes, std::size_t count,
                   const char* unit, const char* separator) {
    if (!std::isfinite(value) || value < 0) value = 0;
    if (value < base) {
        // Whole numbers below the first prefix: "512 B", "950 pps"; small
        // fractional rates keep two decimals ("0.50 pps").
        if (value == std::floor(value) || value >= 100)
            return fmt::format("{:.0f}{}{}", value, separator, unit);
        return fmt::format("{}{}{}", significant(value), separator, unit);
    }
    std::size_t i = 0;
    while (value >= base && i + 1 < count) {
        value /= base;
        ++i;
    }
    // 999.96 KiB would print as "1000 KiB": move up a prefix instead.
    if (std::stod(significant(value)) >= base && i + 1 < count) {
        value /= base;
        ++i;
    }
    return fmt::format("{}{}{}{}", significant(value), separator, prefixes[i], unit);
}

}  // namespace

std::string format_bytes(double bytes) {
    static const char* const kIec[] = {"", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei"};
    return scaled(bytes, 1024, kIec, std::size(kIec), "B", " ");
}

std::string format_pps(double pps) {
    static const char* const kSi[] = {"", "k", "M", "G", "T"};
    return scaled(pps, 1000, kSi, std::size(kSi), "pps", " ");
}

std::string format_bits(double bits) {
    static const char* const kSi[] = {"", "k", "M", "G", "T"};
    return scaled(bits, 1000, kSi, std::size(kSi), "bit/s", " ");
}

std::string format_per_second(double per_second) {
    static const char* const kSi[] = {"", "k", "M", "G", "T"};
    return scaled(per_second, 1000, kSi, std::size(kSi), "/s", "");
}

std::string format_percent(double share) {
    if (!std::isfinite(share)) share = 0;
    return fmt::format("{:.2f}%", share * 100);
}

std::string format_signed_percent(double share) {
    if (!std::isfinite(share)) share = 0;
    const double pct = share * 100;
    if (std::fabs(pct) < 0.005) return "+0.00%";
    return fmt::format("{:+.2f}%", pct);
}

std::string format_uptime(std::uint64_t s) {
    const std::uint64_t d = s / 86400, h = s % 86400 / 3600, m = s % 3600 / 60, sec = s % 60;
    if (d) return fmt::format("{}d {}h {}m", d, h, m);
    if (h) return fmt::format("{}h {}m {}s", h, m, sec);
    if (m) return fmt::format("{}m {}s", m, sec);
    return fmt::format("{}s", sec);
}

std::string format_elapsed_ms(std::uint64_t ms) {
    // Tenths below ten seconds: idle times are what tell a live flow (0.4s)
    // from one that ended (45s).
    if (ms < 10'000) return fmt::format("{:.1f}s", static_cast<double>(ms / 100) / 10);
    return format_uptime(ms / 1000);
}

std::string format_number(double value) {
    if (!std::isfinite(value)) return "-";
    std::string text = fmt::format("{:.2f}", value);
    while (text.back() == '0') text.pop_back();
    if (text.back() == '.') text.pop_back();
    if (text == "-0") text = "0";
    return text;
}

std::string Table::render(const Style& style) const {
    std::vector<std::size_t> width(columns_.size(), 0);
    for (std::size_t i = 0; i < columns_.size(); ++i) width[i] = columns_[i].header.size();
    for (const auto& row : rows_)
        for (std::size_t i = 0; i < row.size() && i < width.size(); ++i)
            width[i] = std::max(width[i], row[i].text.size());

    std::string out;
    auto line = [&](const std::vector<Cell>& cells, bool header) {
        std::string text;
        std::size_t pending = 0;  // spaces owed before the next cell
        for (std::size_t i = 0; i < columns_.size(); ++i) {
            const Cell cell = i < cells.size() ? cells[i] : Cell{};
            const std::size_t pad = width[i] - std::min(width[i], cell.text.size());
            const bool right = columns_[i].align == Align::kRight;
            const Colour colour = header ? Colour::kBold : cell.colour;
            std::string body = paint(cell.text, colour, style);
            if (right) {
                pending += pad;
                if (!cell.text.empty()) {
                    text.append(pending, ' ');
                    text += body;
                    pending = 0;
                }
            } else {
                if (!cell.text.empty()) {
                    text.append(pending, ' ');
                    text += body;
                    pending = 0;
                }
                pending += pad;
            }
            pending += 2;
        }
        out += text;
        out += '\n';
    };
    std::vector<Cell> header;
    for (const auto& c : columns_) header.emplace_back(c.header);
    line(header, true);
    for (const auto& row : rows_) line(row, false);
    return out;
}

}  // namespace xlb::xlbctl
