// SPDX-License-Identifier: Apache-2.0
#include "xlb/log/event.h"

#include <sys/uio.h>
#include <unistd.h>
// the location would be this file's, not the caller's
#define SD_JOURNAL_SUPPRESS_LOCATION
#include <systemd/sd-journal.h>

#include <cctype>
#include <cerrno>
#include <cstdio>
#include <ctime>

namespace xlb::log {
namespace {

// The event being logged on this thread: spdlog hands the sink a message
// only, so emit() leaves the rest here for the sink (the default logger is
// synchronous: the sink runs on the caller's thread, inside the call).
struct Current {
    Priority priority;
    const Fields* fields;
};
thread_local const Current* current_event = nullptr;

bool needs_quotes(std::string_view value) {
    if (value.empty()) return true;
    for (const unsigned char c : value)
        if (c <= ' ' || c == '"' || c == '=' || c == 0x7f) return true;
    return false;
}

// Control characters as C escapes, so that an event stays on one line.
void append_escaped(std::string& out, std::string_view text, bool quoted) {
    for (const unsigned char c : text) {
        switch (c) {
            case '\n': out += "\\n"; break;
            case '\r': out += "\\r"; break;
            case '\t': out += "\\t"; break;
            case '"':
                if (quoted) out += '\\';
                out += '"';
                break;
            case '\\':
                if (quoted) out += '\\';
                out += '\\';
                break;
            default:
                if (c < ' ' || c == 0x7f) {
                    char hex[8];
                    std::snprintf(hex, sizeof hex, "\\x%02x", c);
                    out += hex;
                } else {
                    out += static_cast<char>(c);
                }
        }
    }
}

int journal_sendv(const std::vector<std::string>& record) {
    // sd_journal_sendv reports success when the socket is missing (it drops
    // the record): ask first, so that the line goes to the stream instead.
    if (::access("/run/systemd/journal/socket", F_OK) != 0) return -errno;
    std::vector<iovec> iov(record.size());
    for (std::size_t i = 0; i < record.size(); ++i)
        iov[i] = {const_cast<char*>(record[i].data()), record[i].size()};
    return ::sd_journal_sendv(iov.data(), static_cast<int>(iov.size()));
}

}  // namespace

const char* to_string(Priority priority) noexcept {
    switch (priority) {
        case Priority::kCritical: return "critical";
        case Priority::kError: return "error";
        case Priority::kWarning: return "warning";
        case Priority::kNotice: return "notice";
        case Priority::kInfo: return "info";
        case Priority::kDebug: return "debug";
    }
    return "info";
}

Priority priority_of(spdlog::level::level_enum level) noexcept {
    switch (level) {
        case spdlog::level::critical: return Priority::kCritical;
        case spdlog::level::err: return Priority::kError;
        case spdlog::level::warn: return Priority::kWarning;
        case spdlog::level::debug:
        case spdlog::level::trace: return Priority::kDebug;
        default: return Priority::kInfo;
    }
}

spdlog::level::level_enum level_of(Priority priority) noexcept {
    switch (priority) {
        case Priority::kCritical: return spdlog::level::critical;
        case Priority::kError: return spdlog::level::err;
        case Priority::kWarning:
        case Priority::kNotice: return spdlog::level::warn;
        case Priority::kInfo: return spdlog::level::info;
        case Priority::kDebug: return spdlog::level::debug;
    }
    return spdlog::level::info;
}

void emit(Priority priority, std::string_view message, const Fields& fields) {
    const Current event{priority, &fields};
    const Current* outer = current_event;
    current_event = &event;
    spdlog::default_logger_raw()->log(level_of(priority), "{}", message);
    current_event = outer;
}

std::string local_time_text(std::chrono::system_clock::time_point at) {
    const auto seconds = std::chrono::floor<std::chrono::seconds>(at);
    const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(at - seconds).count();
    const std::time_t t = std::chrono::system_clock::to_time_t(seconds);
    std::tm local{};
    ::localtime_r(&t, &local);
    char date[32];
    std::strftime(date, sizeof date, "%Y-%m-%dT%H:%M:%S", &local);
    const long offset = local.tm_gmtoff;
    const long minutes = (offset < 0 ? -offset : offset) / 60;
    char text[64];
    std::snprintf(text, sizeof text, "%s.%03d%c%02ld:%02ld", date, static_cast<int>(ms),
                  offset < 0 ? '-' : '+', minutes / 60, minutes % 60);
    return text;
}

std::string format_line(std::chrono::system_clock::time_point at, Priority priority,
                        std::string_view message, const Fields& fields) {
    std::string out = local_time_text(at);
    out += ' ';
    out += to_string(priority);
    out += ": ";
    append_escaped(out, message, false);
    for (const Field& f : fields) {
        out += ' ';
        for (const char c : f.name)
            out += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
        out += '=';
        if (needs_quotes(f.value)) {
            out += '"';
            append_escaped(out, f.value, true);
            out += '"';
        } else {
            out += f.value;
        }
    }
    out += '\n';
    return out;
}

std::vector<std::string> journal_record(Priority priority, std::string_view message,
                                        const Fields& fields, std::string_view identifier) {
    std::vector<std::string> out;
    out.reserve(3 + fields.size());
    out.push_back("PRIORITY=" + std::to_string(static_cast<int>(priority)));
    out.push_back("MESSAGE=" + std::string(message));
    out.push_back("SYSLOG_IDENTIFIER=" + std::string(identifier));
    for (const Field& f : fields) out.push_back("XLB_" + f.name + "=" + f.value);
    return out;
}

std::string prefixed_lines(Priority priority, std::string_view text) {
    const std::string prefix = "<" + std::to_string(static_cast<int>(priority)) + ">";
    std::string out;
    do {
        const auto eol = text.find('\n');
        out += prefix;
        out += text.substr(0, eol);
        out += '\n';
        text = eol == std::string_view::npos ? std::string_view{} : text.substr(eol + 1);
    } while (!text.empty());
    return out;
}

Sink::Sink(std::FILE* out) : journal_(false), out_(out) {}

Sink::Sink(JournalSend send, std::string identifier, std::FILE* out)
    : journal_(true),
      send_(send ? std::move(send) : JournalSend(journal_sendv)),
      identifier_(std::move(identifier)),
      out_(out) {}

void Sink::sink_it_(const spdlog::details::log_msg& msg) {
    static const Fields kNone;
    const Current* event = current_event;
    const Priority priority = event ? event->priority : priority_of(msg.level);
    const Fields& fields = event ? *event->fields : kNone;
    const std::string_view text(msg.payload.data(), msg.payload.size());
    std::string line;
    if (journal_) {
        if (send_(journal_record(priority, text, fields, identifier_)) >= 0) return;
        // the journal's socket is not there: its stream still files by priority
        line =
            prefixed_lines(priority, std::string(to_string(priority)) + ": " + std::string(text));
    } else {
        line = format_line(msg.time, priority, text, fields);
    }
    std::fwrite(line.data(), 1, line.size(), out_);
    std::fflush(out_);
}

void Sink::flush_() { std::fflush(out_); }

}  // namespace xlb::log
