// SPDX-License-Identifier: Apache-2.0
#include "xlb/agent/journal_log.h"

#include <spdlog/pattern_formatter.h>
#include <sys/stat.h>
#include <systemd/sd-daemon.h>
#include <unistd.h>

#include <charconv>
#include <cstdint>
#include <cstdlib>
#include <system_error>

namespace xlb::agent {
namespace {

// Appends `text` to `dest`, each of its lines prefixed; a missing final
// newline is added.
template <typename Out>
void append_prefixed(Out& dest, std::string_view prefix, std::string_view text) {
    while (!text.empty()) {
        const auto eol = text.find('\n');
        const std::string_view line = text.substr(0, eol);
        dest.append(prefix.data(), prefix.data() + prefix.size());
        dest.append(line.data(), line.data() + line.size());
        dest.push_back('\n');
        if (eol == std::string_view::npos) break;
        text.remove_prefix(eol + 1);
    }
}

struct StringOut {
    std::string& s;
    void append(const char* first, const char* last) { s.append(first, last); }
    void push_back(char c) { s.push_back(c); }
};

bool parse_u64(std::string_view text, std::uint64_t& out) {
    if (text.empty()) return false;
    const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), out);
    return ec == std::errc{} && end == text.data() + text.size();
}

}  // namespace

std::string_view journal_priority(spdlog::level::level_enum level) noexcept {
    switch (level) {
        case spdlog::level::critical: return SD_CRIT;
        case spdlog::level::err: return SD_ERR;
        case spdlog::level::warn: return SD_WARNING;
        case spdlog::level::info: return SD_INFO;
        case spdlog::level::debug: return SD_DEBUG;
        case spdlog::level::trace: return SD_DEBUG;
        default: return SD_INFO;
    }
}

std::string journal_lines(spdlog::level::level_enum level, std::string_view text) {
    std::string out;
    StringOut sink{out};
    append_prefixed(sink, journal_priority(level), text);
    if (out.empty()) out.assign(journal_priority(level)).push_back('\n');
    return out;
}

JournalFormatter::JournalFormatter(std::unique_ptr<spdlog::formatter> inner)
    : inner_(std::move(inner)) {}

void JournalFormatter::format(const spdlog::details::log_msg& msg, spdlog::memory_buf_t& dest) {
    spdlog::memory_buf_t line;
    inner_->format(msg, line);
    const std::string_view prefix = journal_priority(msg.level);
    if (line.size() == 0) {
        dest.append(prefix.data(), prefix.data() + prefix.size());
        dest.push_back('\n');
        return;
    }
    append_prefixed(dest, prefix, std::string_view(line.data(), line.size()));
}

std::unique_ptr<spdlog::formatter> JournalFormatter::clone() const {
    return std::make_unique<JournalFormatter>(inner_->clone());
}

bool is_journal_stream(const char* journal_stream, int fd) {
    if (journal_stream == nullptr) return false;
    const std::string_view value(journal_stream);
    const auto colon = value.find(':');
    if (colon == std::string_view::npos) return false;
    std::uint64_t device = 0, inode = 0;
    if (!parse_u64(value.substr(0, colon), device) || !parse_u64(value.substr(colon + 1), inode))
        return false;
    struct stat st {};
    if (::fstat(fd, &st) != 0) return false;
    return static_cast<std::uint64_t>(st.st_dev) == device &&
           static_cast<std::uint64_t>(st.st_ino) == inode;
}

bool fd_is_journal(int fd) { return is_journal_stream(std::getenv("JOURNAL_STREAM"), fd); }

std::unique_ptr<spdlog::formatter> make_log_formatter(bool journal) {
    if (!journal) return std::make_unique<spdlog::pattern_formatter>();
    // no time: the journal records it; no colour: it is not a terminal
    return std::make_unique<JournalFormatter>(
        std::make_unique<spdlog::pattern_formatter>("%l: %v"));
}

bool configure_logging(spdlog::level::level_enum level) {
    const bool journal = fd_is_journal(STDOUT_FILENO);
    spdlog::set_level(level);
    spdlog::set_formatter(make_log_formatter(journal));
    return journal;
}

}  // namespace xlb::agent
