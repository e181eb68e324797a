// SPDX-License-Identifier: Apache-2.0
#include "xlb/exposition/exposition.h"

#include <cmath>
#include <cstdio>

namespace xlb::exposition {

std::string escape_label_value(std::string_view value) {
    std::string out;
    out.reserve(value.size());
    for (char c : value) {
        if (c == '\\')
            out += "\\\\";
        else if (c == '"')
            out += "\\\"";
        else if (c == '\n')
            out += "\\n";
        else
            out += c;
    }
    return out;
}

std::string number(double value) {
    // 15 significant digits: every digit a double holds for sure, so no
    // binary noise ("0.01254", not "0.012539999999999999"), and a time in
    // seconds since 1970 keeps its microseconds (9 digits moved it by up to
    // 5 s).
    if (std::isnan(value)) return "NaN";
    if (std::isinf(value)) return value > 0 ? "+Inf" : "-Inf";
    char buf[40];
    std::snprintf(buf, sizeof(buf), "%.15g", value);
    return buf;
}

void Writer::family(std::string_view name, std::string_view type, std::string_view help) {
    out_ += "# HELP ";
    out_ += name;
    out_ += ' ';
    out_ += help;
    out_ += "\n# TYPE ";
    out_ += name;
    out_ += ' ';
    out_ += type;
    out_ += '\n';
}

void Writer::sample(std::string_view name, Labels labels, const std::string& value) {
    line(name, labels, nullptr, value);
}

void Writer::line(std::string_view name, Labels labels, const Label* extra,
                  std::string_view value) {
    out_ += name;
    if (labels.size() > 0 || extra) {
        out_ += '{';
        bool first = true;
        auto add = [&](const Label& label) {
            if (!first) out_ += ',';
            first = false;
            out_ += label.first;
            out_ += "=\"";
            out_ += escape_label_value(label.second);
            out_ += '"';
        };
        for (const Label& label : labels) add(label);
        if (extra) add(*extra);
        out_ += '}';
    }
    out_ += ' ';
    out_ += value;
    out_ += '\n';
}

void Writer::histogram(std::string_view name, std::string_view help, std::span<const double> bounds,
                       std::span<const std::uint64_t> buckets, std::uint64_t count, double sum) {
    family(name, "histogram", help);
    histogram_series(name, {}, bounds, buckets, count, sum);
}

void Writer::histogram_series(std::string_view name, Labels labels, std::span<const double> bounds,
                              std::span<const std::uint64_t> buckets, std::uint64_t count,
                              double sum) {
    const std::string bucket = std::string(name) + "_bucket";
    for (std::size_t i = 0; i < bounds.size() && i < buckets.size(); ++i) {
        const std::string le = number(bounds[i]);
        const Label bound{"le", le};
        line(bucket, labels, &bound, std::to_string(buckets[i]));
    }
    const Label inf{"le", "+Inf"};
    line(bucket, labels, &inf, std::to_string(count));
    line(std::string(name) + "_sum", labels, nullptr, number(sum));
    line(std::string(name) + "_count", labels, nullptr, std::to_string(count));
}

}  // namespace xlb::exposition
