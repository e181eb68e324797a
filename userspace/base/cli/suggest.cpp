// SPDX-License-Identifier: Apache-2.0
#include "xlb/cli/suggest.h"

#include <algorithm>

namespace xlb::cli {

std::size_t edit_distance(std::string_view a, std::string_view b) {
    std::vector<std::vector<std::size_t>> d(a.size() + 1, std::vector<std::size_t>(b.size() + 1));
    for (std::size_t i = 0; i <= a.size(); ++i) d[i][0] = i;
    for (std::size_t j = 0; j <= b.size(); ++j) d[0][j] = j;
    for (std::size_t i = 1; i <= a.size(); ++i) {
        for (std::size_t j = 1; j <= b.size(); ++j) {
            const std::size_t cost = a[i - 1] == b[j - 1] ? 0 : 1;
            d[i][j] = std::min({d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + cost});
            if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1])
                d[i][j] = std::min(d[i][j], d[i - 2][j - 2] + 1);
        }
    }
    return d[a.size()][b.size()];
}

std::optional<std::string> closest(std::string_view typed, const std::vector<std::string>& names) {
    std::optional<std::string> best;
    std::size_t best_distance = 0;
    for (const std::string& name : names) {
        const std::size_t distance = edit_distance(typed, name);
        if (distance > 2 || 2 * distance >= std::max(typed.size(), name.size())) continue;
        if (!best || distance < best_distance) {
            best = name;
            best_distance = distance;
        }
    }
    return best;
}

std::vector<std::string> option_names(const CLI::App* app) {
    std::vector<std::string> names;
    for (const CLI::Option* option : app->get_options()) {
        for (const std::string& name : option->get_lnames()) names.push_back("--" + name);
        for (const std::string& name : option->get_snames()) names.push_back("-" + name);
    }
    return names;
}

std::optional<std::string> did_you_mean(CLI::App* app) {
    // The deepest verb parsed, and the options of it and the verbs above.
    CLI::App* at = app;
    std::vector<std::string> options = option_names(app);
    while (true) {
        CLI::App* next = nullptr;
        for (CLI::App* sub : at->get_subcommands()) next = sub;
        if (!next) break;
        at = next;
        for (std::string& name : option_names(at)) options.push_back(std::move(name));
    }
    std::vector<std::string> left = app->remaining(true);
    if (left.empty()) return std::nullopt;
    const std::string& word = left.front();
    if (word.starts_with("-")) {
        const std::string flag = word.substr(0, word.find('='));
        auto near = closest(flag, options);
        if (!near) return std::nullopt;
        return "unknown option '" + flag + "': did you mean " + *near + "?";
    }
    std::vector<std::string> verbs;
    for (CLI::App* sub : at->get_subcommands([](CLI::App*) { return true; }))
        verbs.push_back(sub->get_name());
    auto near = closest(word, verbs);
    if (!near) return std::nullopt;
    return "unknown verb '" + word + "': did you mean " + *near + "?";
}

}  // namespace xlb::cli
