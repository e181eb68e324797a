// SPDX-License-Identifier: Apache-2.0
// Human output: units, colour, and aligned tables.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace xlb::xlbctl {

// Colour is decided once per run: on a terminal, unless NO_COLOR is set to a
// non-empty value or TERM is "dumb".
struct Style {
    bool colour = false;
};

enum class Colour { kNone, kBold, kDim, kGreen, kYellow, kRed };

// text wrapped in the SGR sequence for `colour` (and a reset), or text as is.
std::string paint(std::string_view text, Colour colour, const Style& style);

// 0 B, 512 B, 1.50 KiB, 3.21 GiB: IEC units, three significant digits.
std::string format_bytes(double bytes);
// 0 pps, 950 pps, 12.3 kpps, 1.23 Mpps.
std::string format_pps(double packets_per_second);
// 0 bit/s, 800 bit/s, 12.3 kbit/s, 9.41 Gbit/s (SI, from bytes per second x 8).
std::string format_bits(double bits_per_second);
// 950/s, 12.3k/s: other rates (new flows, drops).
std::string format_per_second(double per_second);
// 66.93% (two decimals).
std::string format_percent(double share);
// Signed relative difference: +0.40%, -1.25%.
std::string format_signed_percent(double share);
// 45s, 2m 5s, 1h 2m 5s, 3d 4h 5m.
std::string format_uptime(std::uint64_t seconds);
// 0.4s, 9.9s, 45s, 2m 5s, 1h 2m 5s: idle times and ages from milliseconds
// (truncated, never rounded up).
std::string format_elapsed_ms(std::uint64_t milliseconds);
// Up to two decimals without trailing zeros: 100, 12.5, 0.33.
std::string format_number(double value);

class Table {
public:
    enum class Align { kLeft, kRight };
    struct Column {
        std::string header;
        Align align = Align::kLeft;
    };
    struct Cell {
        std::string text;
        Colour colour = Colour::kNone;
        Cell(std::string t = {}, Colour c = Colour::kNone) : text(std::move(t)), colour(c) {}
        Cell(const char* t, Colour c = Colour::kNone) : text(t), colour(c) {}
    };

    explicit Table(std::vector<Column> columns) : columns_(std::move(columns)) {}
    void add(std::vector<Cell> row) { rows_.push_back(std::move(row)); }
    bool empty() const { return rows_.empty(); }

    // Header (bold with colour) and rows, columns two spaces apart, widths
    // from the plain text (colour never shifts a column), no trailing blanks.
    std::string render(const Style& style) const;

private:
    std::vector<Column> columns_;
    std::vector<std::vector<Cell>> rows_;
};

}  // namespace xlb::xlbctl
