// SPDX-License-Identifier: Apache-2.0
#include "xlb/agent/journal_log.h"

#include <sys/stat.h>
#include <systemd/sd-daemon.h>
#include <unistd.h>

#include <charconv>
#include <cstdint>
#include <cstdlib>
#include <system_error>

namespace xlb::agent {
namespace {

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
    return log::prefixed_lines(log::priority_of(level), text);
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

bool configure_logging(spdlog::level::level_enum level, log::JournalSend send) {
    const bool journal = fd_is_journal(STDOUT_FILENO);
    auto sink = journal ? std::make_shared<log::Sink>(std::move(send), "xlbd", stdout)
                        : std::make_shared<log::Sink>(stdout);
    auto logger = std::make_shared<spdlog::logger>("xlbd", std::move(sink));
    logger->set_level(level);
    spdlog::set_default_logger(std::move(logger));
    return journal;
}

}  // namespace xlb::agent
