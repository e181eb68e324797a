// SPDX-License-Identifier: Apache-2.0
#include "xlb/exposition/exposition.h"

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
    char buf[32];
    std::snprintf(buf, sizeof(buf), "%.9g", value);
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
