// SPDX-License-Identifier: Apache-2.0
// Writes the Prometheus text exposition format 0.0.4: a HELP and a TYPE line
// per family, then its samples, label values escaped (\\, \", \n).
#pragma once

#include <cstdint>
#include <initializer_list>
#include <span>
#include <string>
#include <string_view>
#include <utility>

namespace xlb::exposition {

// A label value as the format wants it: \ -> \\, " -> \", newline -> \n.
std::string escape_label_value(std::string_view value);
// A floating-point sample value: 15 significant digits, no trailing zeros;
// NaN, +Inf and -Inf as the format spells them.
std::string number(double value);

using Labels = std::initializer_list<std::pair<std::string_view, std::string_view>>;

class Writer {
public:
    void family(std::string_view name, std::string_view type, std::string_view help);
    void sample(std::string_view name, Labels labels, const std::string& value);
    void sample(std::string_view name, Labels labels, std::uint64_t value) {
        sample(name, labels, std::to_string(value));
    }
    // A histogram family without labels: cumulative counts per upper bound
    // in `bounds` (same order), +Inf implied by `count`.
    void histogram(std::string_view name, std::string_view help, std::span<const double> bounds,
                   std::span<const std::uint64_t> buckets, std::uint64_t count, double sum);
    // One series of a histogram family declared with family(name,
    // "histogram", help): its buckets (with `labels` and le), sum and count.
    void histogram_series(std::string_view name, Labels labels, std::span<const double> bounds,
                          std::span<const std::uint64_t> buckets, std::uint64_t count, double sum);
    std::string take() { return std::move(out_); }

private:
    using Label = std::pair<std::string_view, std::string_view>;
    // A sample line; `extra`, when given, is written after `labels` (le).
    void line(std::string_view name, Labels labels, const Label* extra, std::string_view value);

    std::string out_;
};

}  // namespace xlb::exposition
