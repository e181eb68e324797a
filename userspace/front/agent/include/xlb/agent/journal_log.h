// SPDX-License-Identifier: Apache-2.0
// Logs that journald understands. Under systemd, xlbd's standard output is a
// stream into the journal and systemd says so in JOURNAL_STREAM
// ("DEVICE:INODE" of that stream). There, xlbd's logger sends every line as
// a journal record with its priority and fields (xlb/log/event.h), so that
// `journalctl -p err -u xlbd` shows errors only and `journalctl
// XLB_VIP=...` one VIP's events. Output that is not a log line (the result
// of --check-config) is written to the stream with the priority at the start
// of every line ("<3>" for an error, sd-daemon.h's SD_ERR, ...), which
// journald strips and records. Elsewhere (a terminal, a file, the lab) every
// event is one line with the local time and its offset from UTC.
#pragma once

#include <spdlog/spdlog.h>

#include <memory>
#include <string>
#include <string_view>

#include "xlb/log/event.h"

namespace xlb::agent {

// The syslog priority prefix of a spdlog level: critical "<2>", error "<3>",
// warn "<4>", info "<6>", debug and trace "<7>" (off: "<6>").
std::string_view journal_priority(spdlog::level::level_enum level) noexcept;

// `text` with the level's prefix at the start of every line, so that each
// line of a multi-line message keeps the priority (journald reads one record
// per line). Ends with a newline.
std::string journal_lines(spdlog::level::level_enum level, std::string_view text);

// True when `journal_stream` (JOURNAL_STREAM's value, may be null) names the
// file open on `fd`: a child that inherited the variable but writes elsewhere
// does not get prefixes.
bool is_journal_stream(const char* journal_stream, int fd);

// is_journal_stream(getenv("JOURNAL_STREAM"), fd).
bool fd_is_journal(int fd);

// Sets spdlog's default logger up for xlbd: the level, and journal records
// (through `send`; empty: sd_journal_sendv) when standard output is the
// journal stream, else plain lines on standard output. Returns whether it
// chose the journal.
bool configure_logging(spdlog::level::level_enum level, log::JournalSend send = {});

}  // namespace xlb::agent
