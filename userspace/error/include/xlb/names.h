// SPDX-License-Identifier: Apache-2.0
// An enum's spellings (logs, JSON, metric labels, command lines) kept as one
// table per enum, so that what is printed and what is parsed cannot drift
// apart. It lives beside the error type because every library under the
// agent already links that one.
#pragma once

#include <cstddef>
#include <optional>
#include <string_view>
#include <utility>

namespace xlb {

template <class Enum>
using EnumName = std::pair<std::string_view, Enum>;

// The value's name; "?" for a value the table lacks (a cast from a wider
// integer), so that a log line never dereferences null.
template <class Enum, std::size_t N>
constexpr const char* name_of(Enum value, const EnumName<Enum> (&names)[N]) {
    for (const auto& [name, v] : names)
        if (v == value) return name.data();  // the tables hold string literals
    return "?";
}

template <class Enum, std::size_t N>
constexpr std::optional<Enum> value_of(std::string_view text, const EnumName<Enum> (&names)[N]) {
    for (const auto& [name, v] : names)
        if (name == text) return v;
    return std::nullopt;
}

}  // namespace xlb
