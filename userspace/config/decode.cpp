// SPDX-License-Identifier: Apache-2.0
#include "decode.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>

#include "xlb/config/config.h"

namespace xlb::config {

namespace {

// How many bytes the UTF-8 character starting with `lead` takes (1 for a
// byte that does not start a multi-byte character).
std::size_t utf8_length(unsigned char lead) {
    if ((lead & 0xe0) == 0xc0) return 2;
    if ((lead & 0xf0) == 0xe0) return 3;
    if ((lead & 0xf8) == 0xf0) return 4;
    return 1;
}

// One character of `text` at `at` as shown: escaped if a control character.
std::string shown_char(std::string_view text, std::size_t at, char quote, std::size_t& length) {
    const auto c = static_cast<unsigned char>(text[at]);
    length = 1;
    if (c == static_cast<unsigned char>(quote) || c == '\\') return std::string{'\\', text[at]};
    if (c == '\n') return "\\n";
    if (c == '\t') return "\\t";
    if (c < 0x20 || c == 0x7f) {
        char buf[8];
        std::snprintf(buf, sizeof(buf), "\\x%02x", c);
        return buf;
    }
    length = std::min(utf8_length(c), text.size() - at);
    return std::string(text.substr(at, length));
}

}  // namespace

std::string shown_value(std::string_view value, char quote) {
    std::string out(1, quote);
    std::size_t at = 0;
    while (at < value.size()) {
        std::size_t length = 0;
        std::string piece = shown_char(value, at, quote, length);
        if (out.size() - 1 + piece.size() > kShownValueBytes) break;
        out += piece;
        at += length;
    }
    out += quote;
    if (at < value.size()) out += "\u2026 (" + std::to_string(value.size()) + " bytes)";
    return out;
}

}  // namespace xlb::config

namespace xlb::config::detail {

void Sink::error(const std::string& path, Location location, std::string message) {
    errors_.push_back(Diag{path, location, std::move(message)});
}

void Sink::note(const std::string& path, Location location) {
    if (location.line > 0) locations_.try_emplace(path, location);
}

Location Sink::locate(std::string path) const {
    for (;;) {
        if (auto it = locations_.find(path); it != locations_.end()) return it->second;
        if (path.empty()) return Location{1, 1};
        // Drop the last component: ".key" or "[i]".
        auto cut = path.find_last_of(".[");
        path.resize(cut == std::string::npos ? 0 : cut);
    }
}

std::string join(const std::string& base, std::string_view key) {
    if (base.empty()) return std::string(key);
    return base + "." + std::string(key);
}

std::string index(const std::string& base, std::size_t i) {
    return base + "[" + std::to_string(i) + "]";
}

std::string with_path(const std::string& path, const std::string& message) {
    return path.empty() ? message : path + ": " + message;
}

std::string path_key(std::string_view key) {
    const bool plain =
        key.size() <= kShownValueBytes && std::none_of(key.begin(), key.end(), [](char c) {
            auto u = static_cast<unsigned char>(c);
            return u <= 0x20 || u == 0x7f;
        });
    return plain ? std::string(key) : shown_value(key);
}

namespace {

// Optimal string alignment distance: Levenshtein plus adjacent transpositions,
// so "intreval" is one edit from "interval".
std::size_t edit_distance(std::string_view a, std::string_view b) {
    const std::size_t n = a.size(), m = b.size();
    std::vector<std::vector<std::size_t>> d(n + 1, std::vector<std::size_t>(m + 1));
    for (std::size_t i = 0; i <= n; ++i) d[i][0] = i;
    for (std::size_t j = 0; j <= m; ++j) d[0][j] = j;
    for (std::size_t i = 1; i <= n; ++i) {
        for (std::size_t j = 1; j <= m; ++j) {
            const std::size_t cost = a[i - 1] == b[j - 1] ? 0 : 1;
            d[i][j] = std::min({d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + cost});
            if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1]) {
                d[i][j] = std::min(d[i][j], d[i - 2][j - 2] + 1);
            }
        }
    }
    return d[n][m];
}

}  // namespace

std::string_view closest(std::string_view key, std::span<const std::string_view> allowed) {
    // Short keys tolerate one edit, longer ones two; and "a_b" vs "a-b" or a
    // different case count as close whatever the length.
    const std::size_t limit = key.size() <= 4 ? 1 : 2;
    std::string_view best;
    std::size_t best_distance = limit + 1;
    auto normalise = [](std::string_view s) {
        std::string out(s);
        for (char& c : out) {
            if (c == '-') c = '_';
            if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
        }
        return out;
    };
    const std::string nkey = normalise(key);
    for (auto candidate : allowed) {
        // The lengths alone tell a far key (and spare a 10 MB key the table).
        const std::size_t gap = key.size() > candidate.size() ? key.size() - candidate.size()
                                                              : candidate.size() - key.size();
        if (gap > limit) continue;
        std::size_t distance = normalise(candidate) == nkey ? 0 : edit_distance(key, candidate);
        if (distance < best_distance) {
            best = candidate;
            best_distance = distance;
        }
    }
    return best;
}

std::optional<std::uint64_t> parse_decimal(std::string_view text) {
    if (text.empty() || text.front() < '0' || text.front() > '9') return std::nullopt;
    std::uint64_t value = 0;
    auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
    if (ec != std::errc{} || end != text.data() + text.size()) return std::nullopt;
    return value;
}

std::optional<std::uint64_t> parse_decimal_or_hex(std::string_view text) {
    if (text.size() > 2 && text[0] == '0' && (text[1] == 'x' || text[1] == 'X')) {
        text.remove_prefix(2);
        std::uint64_t value = 0;
        auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value, 16);
        if (ec != std::errc{} || end != text.data() + text.size() || text.front() == '-' ||
            text.front() == '+') {
            return std::nullopt;
        }
        return value;
    }
    return parse_decimal(text);
}

std::optional<double> parse_number(std::string_view text) {
    if (!text.empty() && text.front() == '+') text.remove_prefix(1);
    if (text.empty()) return std::nullopt;
    double value = 0;
    auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
    if (ec != std::errc{} || end != text.data() + text.size() || !std::isfinite(value)) {
        return std::nullopt;
    }
    return value;
}

std::optional<bool> parse_bool(std::string_view text) {
    // YAML 1.2 core schema; not YAML 1.1's yes/no/on/off.
    if (text == "true" || text == "True" || text == "TRUE") return true;
    if (text == "false" || text == "False" || text == "FALSE") return false;
    return std::nullopt;
}

std::optional<StatusRange> parse_status_range(std::string_view text) {
    auto dash = text.find('-');
    auto first = parse_decimal(text.substr(0, dash));
    auto last = dash == std::string_view::npos ? first : parse_decimal(text.substr(dash + 1));
    if (!first || !last || *first > 65535 || *last > 65535) return std::nullopt;
    return StatusRange{static_cast<std::uint16_t>(*first), static_cast<std::uint16_t>(*last)};
}

}  // namespace xlb::config::detail
