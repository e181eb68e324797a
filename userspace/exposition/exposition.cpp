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
    out_ += name;
    if (labels.size() > 0) {
        out_ += '{';
        bool first = true;
        for (const auto& [k, v] : labels) {
            if (!first) out_ += ',';
            first = false;
            out_ += k;
            out_ += "=\"";
            out_ += escape_label_value(v);
            out_ += '"';
        }
        out_ += '}';
    }
    out_ += ' ';
    out_ += value;
    out_ += '\n';
}

void Writer::histogram(std::string_view name, std::string_view help, std::span<const double> bounds,
                       std::span<const std::uint64_t> buckets, std::uint64_t count, double sum) {
    family(name, "histogram", help);
    const std::string bucket = std::string(name) + "_bucket";
    for (std::size_t i = 0; i < bounds.size() && i < buckets.size(); ++i)
        sample(bucket, {{"le", number(bounds[i])}}, buckets[i]);
    sample(bucket, {{"le", "+Inf"}}, count);
    sample(std::string(name) + "_sum", {}, number(sum));
    sample(std::string(name) + "_count", {}, count);
}

}  // namespace xlb::exposition
