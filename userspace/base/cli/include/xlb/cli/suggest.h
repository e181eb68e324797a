// SPDX-License-Identifier: Apache-2.0
// "Did you mean ...?" for a mistyped verb or option. CLI11 suggests nothing
// and no Debian C++ library offers the edit distance, hence these lines.
#pragma once

#include <CLI/CLI.hpp>
#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace xlb::cli {

// Edits (insert, delete, substitute, swap two neighbours) from a to b.
std::size_t edit_distance(std::string_view a, std::string_view b);

// The name closest to a mistyped word: at most 2 edits away, and fewer than
// half its letters (so "ls" suggests nothing); the first of equals.
std::optional<std::string> closest(std::string_view typed, const std::vector<std::string>& names);

// "--name" and "-n" of every option of `app`.
std::vector<std::string> option_names(const CLI::App* app);

// After a failed parse of `app` (extra arguments): for the first word no
// option or verb took, "unknown option '--confg': did you mean --config?" or
// "unknown verb 'placment': did you mean placement?", looking at the
// deepest verb that was parsed and the options of the verbs above it;
// nullopt when nothing is close.
std::optional<std::string> did_you_mean(CLI::App* app);

}  // namespace xlb::cli
