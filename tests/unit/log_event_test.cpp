// SPDX-License-Identifier: Apache-2.0
// Log events (xlb/log/event.h): the plain line (local time with its offset,
// one line per event, the fields), the journal record, the sink in both
// forms with a fake journal, and, where journald runs, the real journal
// read back with a field match.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <regex>
#include <string>
#include <thread>
#include <vector>

#include "xlb/log/event.h"

namespace {

using namespace std::chrono_literals;
using xlb::log::Field;
using xlb::log::Fields;
using xlb::log::Priority;

// 2026-12-06T13:28:48.123Z
std::chrono::system_clock::time_point at() {
    return std::chrono::sys_days{std::chrono::year{2026} / 12 / 6} + 13h + 28min + 48s + 123ms;
}

// TZ for the test's duration.
class Zone {
public:
    explicit Zone(const char* tz) {
        if (const char* old = std::getenv("TZ")) saved_ = old;
        ::setenv("TZ", tz, 1);
        ::tzset();
    }
    ~Zone() {
        if (saved_.empty())
            ::unsetenv("TZ");
        else
            ::setenv("TZ", saved_.c_str(), 1);
        ::tzset();
    }

private:
    std::string saved_;
};

TEST(LogEvent, TimestampCarriesTheOffsetFromUtc) {
    {
        Zone utc("UTC0");
        EXPECT_EQ(xlb::log::local_time_text(at()), "2026-12-06T13:28:48.123+00:00");
    }
    {
        Zone east("IST-05:30");  // POSIX TZ: the sign is west of Greenwich
        EXPECT_EQ(xlb::log::local_time_text(at()), "2026-12-06T18:58:48.123+05:30");
    }
    {
        Zone west("XYZ+03");
        EXPECT_EQ(xlb::log::local_time_text(at()), "2026-12-06T10:28:48.123-03:00");
    }
}

TEST(LogEvent, PlainLineIsOneLineWithFields) {
    Zone utc("UTC0");
    const std::string line = xlb::log::format_line(
        at(), Priority::kNotice, "backend 203.0.113.11 down\nsecond line",
        {{"EVENT", "health"}, {"VIP", "198.51.100.10:80/tcp"}, {"REASON", "kernel \"upgrade\""}});
    EXPECT_EQ(line,
              "2026-12-06T13:28:48.123+00:00 notice: backend 203.0.113.11 down\\nsecond line "
              "event=health vip=198.51.100.10:80/tcp reason=\"kernel \\\"upgrade\\\"\"\n");
    EXPECT_EQ(std::count(line.begin(), line.end(), '\n'), 1);
    // an empty value and one with '=' stay readable as one field each
    EXPECT_EQ(xlb::log::format_line(at(), Priority::kInfo, "x", {{"A", ""}, {"B", "k=v"}}),
              "2026-12-06T13:28:48.123+00:00 info: x a=\"\" b=\"k=v\"\n");
}

TEST(LogEvent, JournalRecordHasPriorityMessageIdentifierAndPrefixedFields) {
    const std::vector<std::string> record =
        xlb::log::journal_record(Priority::kNotice, "two\nlines",
                                 {{"VIP", "198.51.100.10:80/tcp"}, {"EVENT", "publish"}}, "xlbd");
    EXPECT_EQ(record, (std::vector<std::string>{
                          "PRIORITY=5", "MESSAGE=two\nlines", "SYSLOG_IDENTIFIER=xlbd",
                          "XLB_VIP=198.51.100.10:80/tcp", "XLB_EVENT=publish"}));
}

TEST(LogEvent, PrefixedLinesKeepThePriorityOnEveryLine) {
    EXPECT_EQ(xlb::log::prefixed_lines(Priority::kError, "one"), "<3>one\n");
    EXPECT_EQ(xlb::log::prefixed_lines(Priority::kNotice, "one\ntwo\n"), "<5>one\n<5>two\n");
    EXPECT_EQ(xlb::log::prefixed_lines(Priority::kInfo, ""), "<6>\n");
}

// The default logger replaced for a test, then restored.
class Logger {
public:
    explicit Logger(std::shared_ptr<xlb::log::Sink> sink,
                    spdlog::level::level_enum level = spdlog::level::info)
        : saved_(spdlog::default_logger()) {
        auto logger = std::make_shared<spdlog::logger>("test", std::move(sink));
        logger->set_level(level);
        spdlog::set_default_logger(std::move(logger));
    }
    ~Logger() { spdlog::set_default_logger(saved_); }

private:
    std::shared_ptr<spdlog::logger> saved_;
};

std::string read_rest(std::FILE* f) {
    std::string out;
    char buf[4096];
    for (std::size_t n; (n = std::fread(buf, 1, sizeof buf, f)) > 0;) out.append(buf, n);
    return out;
}

std::string read_all(std::FILE* f) {
    std::fflush(f);
    std::rewind(f);
    return read_rest(f);
}

TEST(LogEvent, JournalSinkSendsFieldsOfEventsAndPlainLinesWithout) {
    std::vector<std::vector<std::string>> sent;
    std::FILE* out = std::tmpfile();
    ASSERT_NE(out, nullptr);
    {
        Logger logger(std::make_shared<xlb::log::Sink>(
            [&](const std::vector<std::string>& r) {
                sent.push_back(r);
                return 0;
            },
            "xlbd", out));
        xlb::log::emit(Priority::kNotice, "audit: x", {{"EVENT", "api_change"}, {"UID", "1000"}});
        spdlog::error("plain {}", 1);
        spdlog::debug("below the level");
    }
    ASSERT_EQ(sent.size(), 2u);
    EXPECT_EQ(sent[0],
              (std::vector<std::string>{"PRIORITY=5", "MESSAGE=audit: x", "SYSLOG_IDENTIFIER=xlbd",
                                        "XLB_EVENT=api_change", "XLB_UID=1000"}));
    EXPECT_EQ(sent[1], (std::vector<std::string>{"PRIORITY=3", "MESSAGE=plain 1",
                                                 "SYSLOG_IDENTIFIER=xlbd"}));
    EXPECT_EQ(read_all(out), "");  // nothing on the stream when the journal took it
    std::fclose(out);
}

TEST(LogEvent, JournalSinkFallsBackToPrefixedLinesWhenTheJournalIsGone) {
    std::FILE* out = std::tmpfile();
    ASSERT_NE(out, nullptr);
    {
        Logger logger(std::make_shared<xlb::log::Sink>(
            [](const std::vector<std::string>&) { return -ENOENT; }, "xlbd", out));
        xlb::log::emit(Priority::kNotice, "audit: y", {{"EVENT", "reload"}});
        spdlog::warn("two\nlines");
    }
    EXPECT_EQ(read_all(out), "<5>notice: audit: y\n<4>warning: two\n<4>lines\n");
    std::fclose(out);
}

TEST(LogEvent, PlainSinkWritesOneZonedLinePerEvent) {
    std::FILE* out = std::tmpfile();
    ASSERT_NE(out, nullptr);
    {
        // at warn, a notice still passes (syslog ranks it above info)
        Logger logger(std::make_shared<xlb::log::Sink>(out), spdlog::level::warn);
        xlb::log::emit(Priority::kNotice, "audit: z", {{"EVENT", "api_change"}, {"UID", "0"}});
        xlb::log::emit(Priority::kInfo, "not at level warn", {{"EVENT", "health"}});
        spdlog::error("plain");
    }
    const std::string text = read_all(out);
    std::fclose(out);
    const std::regex line(
        R"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}[+-]\d\d:\d\d (notice|error): [^\n]*\n)");
    std::vector<std::string> lines;
    for (std::sregex_iterator it(text.begin(), text.end(), line), end; it != end; ++it)
        lines.push_back(it->str());
    ASSERT_EQ(lines.size(), 2u) << text;
    EXPECT_EQ(lines[0].substr(30), "notice: audit: z event=api_change uid=0\n") << text;
    EXPECT_EQ(lines[1].substr(30), "error: plain\n") << text;
    EXPECT_EQ(lines[0].size() + lines[1].size(), text.size()) << text;
}

// journald itself, when it runs here: the record is found by its field.
TEST(LogEvent, RealJournalFindsTheEventByItsField) {
    if (!std::filesystem::exists("/run/systemd/journal/socket"))
        GTEST_SKIP() << "journald is not running here (no /run/systemd/journal/socket)";
    if (std::system("command -v journalctl >/dev/null 2>&1") != 0)
        GTEST_SKIP() << "journalctl is not installed";
    const std::string vip = "192.0.2." + std::to_string(::getpid() % 250) + ":" +
                            std::to_string(::time(nullptr) % 60000) + "/tcp";
    {
        Logger logger(
            std::make_shared<xlb::log::Sink>(xlb::log::JournalSend{}, "xlb-log-test", stdout));
        xlb::log::emit(Priority::kNotice, "log test event", {{"EVENT", "test"}, {"VIP", vip}});
    }
    const std::string command =
        "journalctl --no-pager -o cat XLB_VIP=" + vip + " XLB_EVENT=test 2>/dev/null";
    std::string found;
    for (int i = 0; i < 50 && found.find("log test event") == std::string::npos; ++i) {
        std::this_thread::sleep_for(100ms);
        if (std::FILE* p = ::popen(command.c_str(), "r")) {
            found = read_rest(p);
            ::pclose(p);
        }
    }
    EXPECT_NE(found.find("log test event"), std::string::npos)
        << "journalctl XLB_VIP=" << vip << " found: " << found;
}

}  // namespace
