// SPDX-License-Identifier: Apache-2.0
// Log events with fields, and the one sink every log line of xlbd goes
// through (docs/logging.md). An event is a priority, a message that reads on
// its own, and fields an operator filters by (XLB_VIP, XLB_BACKEND,
// XLB_EVENT, ...). Under journald the sink sends each line as a journal
// record (sd_journal_sendv): PRIORITY, MESSAGE, SYSLOG_IDENTIFIER and the
// fields, so that `journalctl XLB_VIP=198.51.100.10:80/tcp` finds a VIP's
// events. Elsewhere it writes one line per event,
//   2026-12-06T18:58:48.123+00:00 notice: MESSAGE event=api_change vip=...
// with the local time and its offset from UTC. Plain spdlog calls go through
// the same sink, without fields.
#pragma once

#include <spdlog/sinks/base_sink.h>
#include <spdlog/spdlog.h>

#include <chrono>
#include <cstdio>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

namespace xlb::log {

// Syslog priorities, with notice (5), which spdlog has no level for.
enum class Priority : int {
    kCritical = 2,
    kError = 3,
    kWarning = 4,
    kNotice = 5,
    kInfo = 6,
    kDebug = 7,
};
// "critical", "error", "warning", "notice", "info", "debug".
const char* to_string(Priority priority) noexcept;
Priority priority_of(spdlog::level::level_enum level) noexcept;
// The spdlog level an event is filtered at: notice as warn, so that
// --log-level warn keeps notices (syslog ranks them above info).
spdlog::level::level_enum level_of(Priority priority) noexcept;

// A field: NAME in upper case letters, digits and '_' (the journal gets
// XLB_NAME=value, a plain line name=value in lower case).
struct Field {
    std::string name;
    std::string value;
};
using Fields = std::vector<Field>;

// The field names xlbd uses (docs/logging.md lists them).
inline constexpr const char* kEvent = "EVENT";      // the kind, below
inline constexpr const char* kVip = "VIP";          // "198.51.100.10:80/tcp"
inline constexpr const char* kBackend = "BACKEND";  // "203.0.113.11"

// Event kinds (the value of XLB_EVENT).
inline constexpr const char* kEventApiChange = "api_change";
inline constexpr const char* kEventReload = "reload";
inline constexpr const char* kEventHealth = "health";
inline constexpr const char* kEventPublish = "publish";
inline constexpr const char* kEventPanic = "panic";
inline constexpr const char* kEventFlood = "flood";
inline constexpr const char* kEventSynFlood = "syn_flood";

// Logs an event through spdlog's default logger.
void emit(Priority priority, std::string_view message, const Fields& fields = {});

// Local time with milliseconds and the offset from UTC:
// "2026-12-06T18:58:48.123+01:00".
std::string local_time_text(std::chrono::system_clock::time_point at);

// The plain form of an event: one line (control characters in the message
// escaped), ending in '\n'; a value with a space, '"', '=' or a control
// character in double quotes.
std::string format_line(std::chrono::system_clock::time_point at, Priority priority,
                        std::string_view message, const Fields& fields);

// The journal form: "PRIORITY=5", "MESSAGE=...", "SYSLOG_IDENTIFIER=...",
// then "XLB_NAME=value" per field.
std::vector<std::string> journal_record(Priority priority, std::string_view message,
                                        const Fields& fields, std::string_view identifier);

// `text` for journald's stream reader: every line starts with the
// priority ("<5>"), which journald strips and records. Ends with a newline.
std::string prefixed_lines(Priority priority, std::string_view text);

// Sends one journal record; a negative errno on failure. Default:
// sd_journal_sendv.
using JournalSend = std::function<int(const std::vector<std::string>& record)>;

// The sink of xlbd's logger. In the journal form a record that cannot be
// sent (no journald socket) is written to `out` as "<N>level: text" lines,
// which journald's stream reader files by priority too.
class Sink final : public spdlog::sinks::base_sink<std::mutex> {
public:
    // Plain lines on `out`.
    explicit Sink(std::FILE* out);
    // Journal records through `send` (empty: sd_journal_sendv), as
    // `identifier`; `out` when sending fails.
    Sink(JournalSend send, std::string identifier, std::FILE* out);

private:
    void sink_it_(const spdlog::details::log_msg& msg) override;
    void flush_() override;

    bool journal_;
    JournalSend send_;
    std::string identifier_;
    std::FILE* out_;
};

}  // namespace xlb::log
