// SPDX-License-Identifier: Apache-2.0
// An enum's spellings (logs, JSON, metric labels, command lines) kept as one
// table per enum, so that what is printed and what is parsed cannot drift
// apart. The table lists the names in the enum's order (its values 0..N-1);
// a static_assert next to each table checks that it has one name per value.
// It lives beside the error type because every library under the agent
// already links that one.
#pragma once

#include <cstddef>
#include <optional>
#include <string_view>

namespace xlb {

// The value's name; "?" for a value outside the table (a cast from a wider
// integer), so that a log line never dereferences null.
template <class Enum, std::size_t N>
constexpr const char* name_at(Enum value, const std::string_view (&names)[N]) {
    const auto i = static_cast<std::size_t>(value);
    return i < N ? names[i].data() : "?";  // the tables hold string literals
}

template <class Enum, std::size_t N>
constexpr std::optional<Enum> value_at(std::string_view text, const std::string_view (&names)[N]) {
    for (std::size_t i = 0; i < N; ++i)
        if (names[i] == text) return static_cast<Enum>(i);
    return std::nullopt;
}

}  // namespace xlb
