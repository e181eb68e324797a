// SPDX-License-Identifier: Apache-2.0
// Logs for journald: the priority prefix of every level, multi-line
// messages, the JOURNAL_STREAM match, and the default logger as xlbd sets it
// up: journal records when standard output is the stream JOURNAL_STREAM
// names, "<3>" lines there when the journal's socket is missing, and zoned
// plain lines elsewhere.
#include "xlb/agent/journal_log.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

namespace {

using spdlog::level::level_enum;
using xlb::agent::journal_lines;
using xlb::agent::journal_priority;

std::string identity_of(int fd) {
    struct stat st {};
    EXPECT_EQ(::fstat(fd, &st), 0);
    return std::to_string(st.st_dev) + ":" + std::to_string(st.st_ino);
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

TEST(JournalLog, ConfiguredLoggerSendsJournalRecordsWhenStdoutIsTheJournal) {
    std::vector<std::vector<std::string>> sent;
    auto fake = [&](const std::vector<std::string>& record) {
        sent.push_back(record);
        return 0;
    };
    {
        StdoutToFile out;
        ASSERT_EQ(::setenv("JOURNAL_STREAM", identity_of(STDOUT_FILENO).c_str(), 1), 0);
        EXPECT_TRUE(xlb::agent::configure_logging(level_enum::info, fake));
        spdlog::error("cannot attach to eth9: no such device");
        xlb::log::emit(xlb::log::Priority::kNotice, "audit: x",
                       {{xlb::log::kEvent, xlb::log::kEventApiChange}});
        spdlog::debug("not at level info");
        spdlog::default_logger()->flush();
        EXPECT_EQ(out.text(), "");  // records, not lines
    }
    ASSERT_EQ(sent.size(), 2u);
    EXPECT_EQ(sent[0], (std::vector<std::string>{"PRIORITY=3",
                                                 "MESSAGE=cannot attach to eth9: no such device",
                                                 "SYSLOG_IDENTIFIER=xlbd"}));
    EXPECT_EQ(sent[1],
              (std::vector<std::string>{"PRIORITY=5", "MESSAGE=audit: x", "SYSLOG_IDENTIFIER=xlbd",
                                        "XLB_EVENT=api_change"}));
    {
        // no journal socket: the stream still gets the priorities
        StdoutToFile out;
        EXPECT_TRUE(xlb::agent::configure_logging(
            level_enum::info, [](const std::vector<std::string>&) { return -ENOENT; }));
        spdlog::warn("two\nlines");
        spdlog::default_logger()->flush();
        EXPECT_EQ(out.text(), "<4>warning: two\n<4>lines\n");
    }
    {
        // JOURNAL_STREAM set but naming another stream (inherited): plain lines
        StdoutToFile out;
        ASSERT_EQ(::setenv("JOURNAL_STREAM", "1:1", 1), 0);
        EXPECT_FALSE(xlb::agent::configure_logging(level_enum::info, fake));
        spdlog::error("plain");
        spdlog::default_logger()->flush();
        const std::string text = out.text();
        EXPECT_EQ(text.find("<3>"), std::string::npos) << text;
        // "2026-12-06T18:58:48.123+00:00 error: plain"
        EXPECT_TRUE(std::regex_match(
            text,
            std::regex(R"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}[+-]\d\d:\d\d error: plain\n)")))
            << text;
        EXPECT_EQ(sent.size(), 2u);
    }
    ::unsetenv("JOURNAL_STREAM");
}

}  // namespace
