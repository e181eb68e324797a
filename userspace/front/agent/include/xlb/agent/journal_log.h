// SPDX-License-Identifier: Apache-2.0
// Logs that journald understands. Under systemd, xlbd's standard output is a
// stream into the journal and systemd says so in JOURNAL_STREAM
// ("DEVICE:INODE" of that stream). There, every line starts with its syslog
// priority ("<3>" for an error, sd-daemon.h's SD_ERR, ...), which journald
// strips and records, so that `journalctl -p err -u xlbd` shows errors only.
// The journal stamps time and unit itself, so the line is only "level: text".
// Elsewhere (a terminal, a file, the lab) lines keep spdlog's usual pattern.
#pragma once

#include <spdlog/formatter.h>
#include <spdlog/spdlog.h>

#include <memory>
#include <string>
#include <string_view>

namespace xlb::agent {

// The syslog priority prefix of a spdlog level: critical "<2>", error "<3>",
// warn "<4>", info "<6>", debug and trace "<7>" (off: "<6>").
std::string_view journal_priority(spdlog::level::level_enum level) noexcept;

// `text` with the level's prefix at the start of every line, so that each
// line of a multi-line message keeps the priority (journald reads one record
// per line). Ends with a newline.
std::string journal_lines(spdlog::level::level_enum level, std::string_view text);

// Formats with `inner`, then prefixes every line of the result as
// journal_lines does.
class JournalFormatter final : public spdlog::formatter {
public:
    explicit JournalFormatter(std::unique_ptr<spdlog::formatter> inner);
    void format(const spdlog::details::log_msg& msg, spdlog::memory_buf_t& dest) override;
    std::unique_ptr<spdlog::formatter> clone() const override;

private:
    std::unique_ptr<spdlog::formatter> inner_;
};

// True when `journal_stream` (JOURNAL_STREAM's value, may be null) names the
// file open on `fd`: a child that inherited the variable but writes elsewhere
// does not get prefixes.
bool is_journal_stream(const char* journal_stream, int fd);

// is_journal_stream(getenv("JOURNAL_STREAM"), fd).
bool fd_is_journal(int fd);

// The formatter of xlbd's log lines: "<N>level: text" for the journal,
// spdlog's default pattern otherwise.
std::unique_ptr<spdlog::formatter> make_log_formatter(bool journal);

// Sets spdlog's default logger (standard output) up for xlbd: the level, and
// the journal form when standard output is the journal stream. Returns
// whether it chose the journal form.
bool configure_logging(spdlog::level::level_enum level);

}  // namespace xlb::agent
