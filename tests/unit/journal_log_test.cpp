// SPDX-License-Identifier: Apache-2.0
// Logs for journald: the priority prefix of every level, multi-line
// messages, the JOURNAL_STREAM match, and the default logger as xlbd sets it
// up writing real "<3>" lines into the stream that JOURNAL_STREAM names.
#include "xlb/agent/journal_log.h"

#include <gtest/gtest.h>
#include <spdlog/details/log_msg.h>
#include <spdlog/sinks/ostream_sink.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>

namespace {

using spdlog::level::level_enum;
using xlb::agent::journal_lines;
using xlb::agent::journal_priority;

std::string identity_of(int fd) {
    struct stat st {};
    EXPECT_EQ(::fstat(fd, &st), 0);
    return std::to_string(st.st_dev) + ":" + std::to_string(st.st_ino);
}

// What `formatter` makes of one message.
std::string format(spdlog::formatter& formatter, level_enum level, std::string_view text) {
    spdlog::details::log_msg msg("xlbd", level, text);
    spdlog::memory_buf_t out;
    formatter.format(msg, out);
    return std::string(out.data(), out.size());
}

TEST(JournalLog, EveryLevelHasItsSyslogPriority) {
    EXPECT_EQ(journal_priority(level_enum::critical), "<2>");
    EXPECT_EQ(journal_priority(level_enum::err), "<3>");
    EXPECT_EQ(journal_priority(level_enum::warn), "<4>");
    EXPECT_EQ(journal_priority(level_enum::info), "<6>");
    EXPECT_EQ(journal_priority(level_enum::debug), "<7>");
    EXPECT_EQ(journal_priority(level_enum::trace), "<7>");
}

TEST(JournalLog, EveryLineOfAMessageCarriesThePriority) {
    EXPECT_EQ(journal_lines(level_enum::err, "one"), "<3>one\n");
    EXPECT_EQ(journal_lines(level_enum::err, "one\n"), "<3>one\n");
    EXPECT_EQ(journal_lines(level_enum::warn, "one\ntwo\n\nfour"),
              "<4>one\n<4>two\n<4>\n<4>four\n");
    EXPECT_EQ(journal_lines(level_enum::info, ""), "<6>\n");
}

TEST(JournalLog, FormatterPrefixesLevelNameAndText) {
    auto journal = xlb::agent::make_log_formatter(true);
    EXPECT_EQ(format(*journal, level_enum::critical, "x"), "<2>critical: x\n");
    EXPECT_EQ(format(*journal, level_enum::err, "VIP 198.51.100.10:80/tcp not applied"),
              "<3>error: VIP 198.51.100.10:80/tcp not applied\n");
    EXPECT_EQ(format(*journal, level_enum::warn, "x"), "<4>warning: x\n");
    EXPECT_EQ(format(*journal, level_enum::info, "x"), "<6>info: x\n");
    EXPECT_EQ(format(*journal, level_enum::debug, "x"), "<7>debug: x\n");
    EXPECT_EQ(format(*journal, level_enum::trace, "x"), "<7>trace: x\n");
    // a multi-line message stays at its priority on every line
    EXPECT_EQ(format(*journal, level_enum::err, "a.yaml:3:5: bad\na.yaml:7:1: worse"),
              "<3>error: a.yaml:3:5: bad\n<3>a.yaml:7:1: worse\n");
    // clones (spdlog gives one to each sink) format the same
    auto copy = journal->clone();
    EXPECT_EQ(format(*copy, level_enum::err, "x"), "<3>error: x\n");
}

TEST(JournalLog, OutsideTheJournalLinesKeepTheUsualPattern) {
    auto plain = xlb::agent::make_log_formatter(false);
    const std::string line = format(*plain, level_enum::err, "x");
    EXPECT_EQ(line.front(), '[') << line;  // "[2026-...] [xlbd] [error] x"
    EXPECT_NE(line.find("error"), std::string::npos) << line;
    EXPECT_EQ(line.find("<3>"), std::string::npos) << line;
}

TEST(JournalLog, JournalStreamMustNameTheFileOnTheDescriptor) {
    std::FILE* file = std::tmpfile();
    ASSERT_NE(file, nullptr);
    const int fd = ::fileno(file);
    const std::string id = identity_of(fd);
    EXPECT_TRUE(xlb::agent::is_journal_stream(id.c_str(), fd));
    EXPECT_FALSE(xlb::agent::is_journal_stream(nullptr, fd));
    EXPECT_FALSE(xlb::agent::is_journal_stream("", fd));
    EXPECT_FALSE(xlb::agent::is_journal_stream("12", fd));
    EXPECT_FALSE(xlb::agent::is_journal_stream((id + "x").c_str(), fd));
    EXPECT_FALSE(xlb::agent::is_journal_stream(("x" + id).c_str(), fd));
    // another file: a child that inherited JOURNAL_STREAM but writes elsewhere
    std::FILE* other = std::tmpfile();
    ASSERT_NE(other, nullptr);
    EXPECT_FALSE(xlb::agent::is_journal_stream(id.c_str(), ::fileno(other)));
    std::fclose(other);
    std::fclose(file);
}

// Standard output pointed at a file for the test's duration.
class StdoutToFile {
public:
    StdoutToFile() : path_(::testing::TempDir() + "xlb_journal_log_test.out") {
        std::fflush(stdout);
        saved_ = ::dup(STDOUT_FILENO);
        std::FILE* f = std::fopen(path_.c_str(), "w");
        ::dup2(::fileno(f), STDOUT_FILENO);
        std::fclose(f);
    }
    ~StdoutToFile() {
        restore();
        std::remove(path_.c_str());
    }
    std::string text() {
        restore();
        std::ifstream in(path_);
        std::stringstream s;
        s << in.rdbuf();
        return s.str();
    }

private:
    void restore() {
        if (saved_ < 0) return;
        std::fflush(stdout);
        ::dup2(saved_, STDOUT_FILENO);
        ::close(saved_);
        saved_ = -1;
    }
    std::string path_;
    int saved_ = -1;
};

TEST(JournalLog, ConfiguredLoggerWritesPrioritiesWhenStdoutIsTheJournal) {
    {
        StdoutToFile out;
        ASSERT_EQ(::setenv("JOURNAL_STREAM", identity_of(STDOUT_FILENO).c_str(), 1), 0);
        EXPECT_TRUE(xlb::agent::configure_logging(level_enum::info));
        spdlog::error("cannot attach to eth9: no such device");
        spdlog::warn("two\nlines");
        spdlog::info("serving");
        spdlog::debug("not at level info");
        spdlog::default_logger()->flush();
        EXPECT_EQ(out.text(),
                  "<3>error: cannot attach to eth9: no such device\n"
                  "<4>warning: two\n<4>lines\n"
                  "<6>info: serving\n");
    }
    {
        // JOURNAL_STREAM set but naming another stream (inherited): plain lines
        StdoutToFile out;
        ASSERT_EQ(::setenv("JOURNAL_STREAM", "1:1", 1), 0);
        EXPECT_FALSE(xlb::agent::configure_logging(level_enum::info));
        spdlog::error("plain");
        spdlog::default_logger()->flush();
        const std::string text = out.text();
        EXPECT_EQ(text.find("<3>"), std::string::npos) << text;
        EXPECT_NE(text.find("error"), std::string::npos) << text;
        EXPECT_NE(text.find("] plain\n"), std::string::npos) << text;
    }
    ::unsetenv("JOURNAL_STREAM");
}

}  // namespace
