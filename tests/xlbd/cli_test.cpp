// SPDX-License-Identifier: Apache-2.0
// The xlbd binary's command line, run as a process: --check-config in both
// documented forms, missing and invalid files, usage errors, --version, and
// journald priorities on the real output. Nothing here touches the kernel:
// every run stops before loading BPF.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "xlb/version.h"

extern char** environ;

namespace {

struct Ran {
    int code = -1;
    std::string out, err;
};

struct RunOptions {
    // JOURNAL_STREAM names the stdout pipe (as systemd does for a service)
    bool stdout_is_journal = false;
    bool stderr_is_journal = false;
};

std::string identity_of(int fd) {
    struct stat st {};
    if (::fstat(fd, &st) != 0) return "0:0";
    return std::to_string(st.st_dev) + ":" + std::to_string(st.st_ino);
}

// Runs the program `path` with `args`; gives up (and fails) after 20 s.
Ran run_tool(const char* path, std::vector<std::string> args, RunOptions options = {}) {
    args.insert(args.begin(), path);
    int out[2], err[2];
    if (::pipe2(out, O_CLOEXEC) != 0 || ::pipe2(err, O_CLOEXEC) != 0) {
        ADD_FAILURE() << "pipe: " << std::strerror(errno);
        return {};
    }
    std::vector<std::string> env;
    for (char** e = environ; *e != nullptr; ++e)
        if (std::strncmp(*e, "JOURNAL_STREAM=", 15) != 0) env.emplace_back(*e);
    if (options.stdout_is_journal) env.push_back("JOURNAL_STREAM=" + identity_of(out[1]));
    if (options.stderr_is_journal) env.push_back("JOURNAL_STREAM=" + identity_of(err[1]));
    std::vector<char*> c_args, c_env;
    for (auto& a : args) c_args.push_back(a.data());
    for (auto& e : env) c_env.push_back(e.data());
    c_args.push_back(nullptr);
    c_env.push_back(nullptr);

    const pid_t pid = ::fork();
    if (pid == 0) {
        ::dup2(out[1], STDOUT_FILENO);
        ::dup2(err[1], STDERR_FILENO);
        ::execve(c_args[0], c_args.data(), c_env.data());
        ::_exit(127);
    }
    ::close(out[1]);
    ::close(err[1]);
    Ran run;
    pollfd fds[2] = {{out[0], POLLIN, 0}, {err[0], POLLIN, 0}};
    std::string* sinks[2] = {&run.out, &run.err};
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    int open = 2;
    while (open > 0 && std::chrono::steady_clock::now() < deadline) {
        if (::poll(fds, 2, 200) <= 0) continue;
        for (int i = 0; i < 2; ++i) {
            if (fds[i].fd < 0 || fds[i].revents == 0) continue;
            char buf[4096];
            const ssize_t n = ::read(fds[i].fd, buf, sizeof buf);
            if (n > 0) {
                sinks[i]->append(buf, static_cast<std::size_t>(n));
            } else if (n == 0 || errno != EINTR) {
                ::close(fds[i].fd);
                fds[i].fd = -1;
                --open;
            }
        }
    }
    if (open > 0) {
        ADD_FAILURE() << "xlbd did not finish in 20 s";
        ::kill(pid, SIGKILL);
        for (auto& f : fds)
            if (f.fd >= 0) ::close(f.fd);
    }
    int status = 0;
    ::waitpid(pid, &status, 0);
    run.code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    return run;
}

Ran xlbd(std::vector<std::string> args, RunOptions options = {}) {
    return run_tool(XLBD_PATH, std::move(args), options);
}

#define EXPECT_HAS(text, part) \
    EXPECT_NE(std::string(text).find(part), std::string::npos) << "in: " << (text)

// A file under the test's temporary directory.
std::string write_file(const std::string& name, const std::string& text) {
    const std::string path = ::testing::TempDir() + name;
    std::ofstream(path) << text;
    return path;
}

// The example as shipped: no hash_seed (there is no default seed).
const std::string kShippedExample = std::string(XLB_SOURCE_DIR) + "/etc/xlbd.example.yaml";

// The example with a seed, as an operator completes it: a valid file.
std::string seeded_example() {
    std::ifstream in(kShippedExample);
    std::stringstream text;
    text << in.rdbuf() << "\nhash_seed: 0x5eed1234\n";
    return write_file("xlbd_cli_example.yaml", text.str());
}
const std::string kExample = seeded_example();

// "colour" is an unknown key at line 6, column 5; nothing else is wrong.
const std::string kInvalid =
    "interface: eth0\n"
    "next_hop: {address: 192.0.2.1}\n"
    "encap_source: {ipv4: 203.0.113.2}\n"
    "vips:\n"
    "  - address: 198.51.100.10\n"
    "    colour: blue\n"
    "    port: 80\n"
    "    protocol: tcp\n"
    "    backends: [{address: 203.0.113.11}]\n";

TEST(XlbdCli, CheckConfigTakesTheFileAsItsValue) {
    const Ran r = xlbd({"--check-config", kExample});
    EXPECT_EQ(r.code, 0) << r.err;
    EXPECT_HAS(r.out, kExample + ": valid (");
    EXPECT_EQ(r.err, "");
}

TEST(XlbdCli, CheckConfigWithConfigFlagStillWorks) {
    for (const auto& args :
         std::vector<std::vector<std::string>>{{"--check-config", "--config", kExample},
                                               {"--config", kExample, "--check-config"},
                                               {"-c", kExample, "--check-config", kExample}}) {
        const Ran r = xlbd(args);
        EXPECT_EQ(r.code, 0) << args.front() << ": " << r.err;
        EXPECT_HAS(r.out, kExample + ": valid (");
    }
}

TEST(XlbdCli, InvalidConfigExitsOneNamingLineAndColumn) {
    const std::string path = write_file("xlbd_cli_invalid.yaml", kInvalid);
    for (const auto& args : std::vector<std::vector<std::string>>{
             {"--check-config", path}, {"--check-config", "--config", path}}) {
        const Ran r = xlbd(args);
        EXPECT_EQ(r.code, 1);
        EXPECT_HAS(r.err, path + ":6:5: ");
        EXPECT_HAS(r.err, "colour");
        EXPECT_HAS(r.err, path + ": 1 error(s)");
        EXPECT_EQ(r.out, "");
    }
}

// No default seed: --check-config and a start refuse a file without one,
// and say how to make one and that the fleet shares it.
TEST(XlbdCli, AFileWithoutASeedIsRefused) {
    const Ran check = xlbd({"--check-config", kShippedExample});
    EXPECT_EQ(check.code, 1) << check.out << check.err;
    EXPECT_HAS(check.err, kShippedExample + ": hash_seed is not set");
    EXPECT_HAS(check.err, "xlbctl gen-seed");
    EXPECT_HAS(check.err, "every LB host of a fleet");
    EXPECT_HAS(check.err, kShippedExample + ": 1 error(s)");
    EXPECT_EQ(check.out, "");
    // the agent stops there, before touching anything
    const Ran start = xlbd({"--config", kShippedExample});
    EXPECT_EQ(start.code, 1);
    EXPECT_HAS(start.out + start.err, kShippedExample + ": hash_seed is not set");
    EXPECT_HAS(start.out + start.err, "xlbctl gen-seed");
}

TEST(XlbdCli, MissingFileIsAConfigErrorWithExitOne) {
    const std::string path = ::testing::TempDir() + "xlbd_cli_no_such_file.yaml";
    std::remove(path.c_str());
    for (const auto& args : std::vector<std::vector<std::string>>{
             {"--check-config", path}, {"--check-config", "--config", path}}) {
        const Ran r = xlbd(args);
        EXPECT_EQ(r.code, 1);
        EXPECT_HAS(r.err, path + ": cannot read the file: No such file or directory");
    }
    // starting the agent with it fails the same way, before touching anything
    const Ran r = xlbd({"--config", path});
    EXPECT_EQ(r.code, 1);
    EXPECT_HAS(r.out + r.err, path + ": cannot read the file: No such file or directory");
}

TEST(XlbdCli, UsageErrorsExitTwo) {
    const Ran none = xlbd({});
    EXPECT_EQ(none.code, 2);
    EXPECT_HAS(none.err, "--config FILE is required");
    const Ran bare = xlbd({"--check-config"});
    EXPECT_EQ(bare.code, 2);
    EXPECT_HAS(bare.err, "--check-config needs a file");
    const Ran two = xlbd({"--check-config", kExample, "--config", "/other.yaml"});
    EXPECT_EQ(two.code, 2);
    EXPECT_HAS(two.err, "name different files");
    const Ran unknown = xlbd({"--config", kExample, "--no-such-flag"});
    EXPECT_EQ(unknown.code, 2);
    EXPECT_HAS(unknown.err, "--no-such-flag");
    const Ran mode = xlbd({"--config", kExample, "--xdp-mode", "fast"});
    EXPECT_EQ(mode.code, 2);
}

TEST(XlbdCli, AMistypedFlagGetsTheClosestOne) {
    const Ran typo = xlbd({"--confg", kExample});
    EXPECT_EQ(typo.code, 2);
    EXPECT_HAS(typo.err, "xlbd: unknown option '--confg': did you mean --config?");
    const Ran swapped = xlbd({"--config", kExample, "--xdp-mdoe", "generic"});
    EXPECT_EQ(swapped.code, 2);
    EXPECT_HAS(swapped.err, "did you mean --xdp-mode?");
    const Ran far = xlbd({"--config", kExample, "--frobnicate"});
    EXPECT_EQ(far.code, 2);
    EXPECT_EQ(far.err.find("did you mean"), std::string::npos) << "nothing close: " << far.err;
    EXPECT_HAS(far.err, "--frobnicate");
}

TEST(XlbdCli, VersionIsTheProjectVersion) {
    const Ran r = xlbd({"--version"});
    EXPECT_EQ(r.code, 0);
    EXPECT_EQ(r.out, std::string("xlbd ") + XLB_VERSION + "\n");
    EXPECT_EQ(std::string(XLB_VERSION), XLB_PROJECT_VERSION);  // project(xlb VERSION ...)
}

// Every xlb tool: the same version line, and exit 2 for a wrong command line
// (an unknown option, a missing or malformed argument), with one message.
TEST(XlbTools, VersionLineAndUsageExitAreTheSameInEveryTool) {
    const std::vector<std::pair<std::string, const char*>> tools = {{"xlbd", XLBD_PATH},
                                                                    {"xlbctl", XLBCTL_PATH},
                                                                    {"xlb-decap", XLB_DECAP_PATH},
                                                                    {"xlb-sim", XLB_SIM_PATH}};
    for (const auto& [name, path] : tools) {
        SCOPED_TRACE(name);
        const Ran version = run_tool(path, {"--version"});
        EXPECT_EQ(version.code, 0) << version.err;
        EXPECT_EQ(version.out, name + " " + XLB_VERSION + "\n");
        const Ran unknown = run_tool(path, {"--no-such-flag"});
        EXPECT_EQ(unknown.code, 2) << unknown.out << unknown.err;
        EXPECT_NE(unknown.err, "");
    }
    // xlb-decap: a missing --interface, a mistyped option, and arguments
    // that do not parse are usage errors, found before any interface is touched.
    const Ran no_interface = run_tool(XLB_DECAP_PATH, {"--address", "203.0.113.11"});
    EXPECT_EQ(no_interface.code, 2) << no_interface.err;
    EXPECT_HAS(no_interface.err, "--interface");
    const Ran typo = run_tool(XLB_DECAP_PATH, {"--interfce", "eth0"});
    EXPECT_EQ(typo.code, 2) << typo.err;
    EXPECT_HAS(typo.err, "did you mean --interface?");
    const Ran mode = run_tool(XLB_DECAP_PATH, {"-i", "no-such-if0", "--xdp-mode", "fast"});
    EXPECT_EQ(mode.code, 2) << mode.err;
    EXPECT_HAS(mode.err, "--xdp-mode: found \"fast\"");
    const Ran address = run_tool(XLB_DECAP_PATH, {"-i", "no-such-if0", "-a", "203.0.113.300"});
    EXPECT_EQ(address.code, 2) << address.err;
    EXPECT_HAS(address.err, "--address 203.0.113.300");
    const Ran hop = run_tool(XLB_DECAP_PATH, {"-i", "no-such-if0", "--next-hop", "router"});
    EXPECT_EQ(hop.code, 2) << hop.err;
    // a good command line on a missing interface is a failure, not a usage error
    const Ran missing = run_tool(XLB_DECAP_PATH, {"-i", "no-such-if0", "-a", "203.0.113.11"});
    EXPECT_EQ(missing.code, 1) << missing.err;
    EXPECT_HAS(missing.err, "no-such-if0");
    // xlbctl: an argument its checks refuse is a usage error; nothing is sent
    const Ran weight = run_tool(XLBCTL_PATH, {"backend", "set", "198.51.100.10:80", "203.0.113.11",
                                              "--weight", "x", "--socket", "/nonexistent.sock"});
    EXPECT_EQ(weight.code, 2) << weight.err;
}

TEST(XlbdCli, HelpNamesEveryFlag) {
    const Ran r = xlbd({"--help"});
    EXPECT_EQ(r.code, 0);
    for (const char* flag : {"--config", "--check-config", "--interface", "--xdp-mode",
                             "--api-socket", "--metrics-listen", "--pin-dir", "--state-file",
                             "--detach-on-exit", "--log-level", "--version", "--help"})
        EXPECT_HAS(r.out, flag);
}

TEST(XlbdCli, UnderJournaldEveryLineCarriesItsPriority) {
    // the agent's log (standard output) when it cannot start
    const std::string missing = ::testing::TempDir() + "xlbd_cli_no_such_file.yaml";
    std::remove(missing.c_str());
    const Ran agent = xlbd({"--config", missing}, {.stdout_is_journal = true});
    EXPECT_EQ(agent.code, 1);
    if (std::filesystem::exists("/run/systemd/journal/socket")) {
        // journald runs here: the line went to it as a record, not to the stream
        EXPECT_EQ(agent.out.find("cannot read the file"), std::string::npos) << agent.out;
    } else {
        // no journal socket: the stream still files the line by its priority
        EXPECT_HAS(agent.out, "<3>error: " + missing + ": cannot read the file");
    }
    // without the journal: one line with a zoned timestamp, no prefix
    const Ran plain = xlbd({"--config", missing});
    EXPECT_EQ(plain.out.find("<3>"), std::string::npos) << plain.out;
    EXPECT_TRUE(std::regex_search(
        plain.out,
        std::regex(R"((^|\n)\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}[+-]\d\d:\d\d error: )" +
                   std::string(".*cannot read the file"))))
        << plain.out;

    // --check-config as ExecStartPre: its errors are errors in the journal
    const std::string path = write_file("xlbd_cli_invalid_journal.yaml", kInvalid);
    const Ran check = xlbd({"--check-config", path}, {.stderr_is_journal = true});
    EXPECT_EQ(check.code, 1);
    EXPECT_HAS(check.err, "<3>" + path + ":6:5: ");
    EXPECT_HAS(check.err, "<3>" + path + ": 1 error(s)\n");
}

std::string read_source(const std::string& relative) {
    std::ifstream in(std::string(XLB_SOURCE_DIR) + "/" + relative);
    std::stringstream s;
    s << in.rdbuf();
    EXPECT_FALSE(s.str().empty()) << relative;
    return s.str();
}

// A line of `text` that starts with `start` and contains `part`.
bool has_line(const std::string& text, const std::string& start, const std::string& part) {
    std::istringstream in(text);
    for (std::string line; std::getline(in, line);)
        if (line.starts_with(start) && line.find(part) != std::string::npos) return true;
    return false;
}

// Every flag of `xlbd --help` is in the man page and in the README's table.
TEST(XlbdDocs, EveryFlagIsDocumented) {
    const Ran r = xlbd({"--help"});
    ASSERT_EQ(r.code, 0);
    std::set<std::string> flags;
    const std::regex flag("--[a-z][a-z-]*");
    for (auto it = std::sregex_iterator(r.out.begin(), r.out.end(), flag);
         it != std::sregex_iterator(); ++it)
        flags.insert(it->str());
    EXPECT_GE(flags.size(), 12u);
    const std::string man = read_source("docs/xlbd.8");
    const std::string readme = read_source("README.md");
    for (const auto& f : flags) {
        std::string escaped;  // roff writes each - as \-
        for (char c : f) escaped += c == '-' ? std::string("\\-") : std::string(1, c);
        EXPECT_TRUE(has_line(man, ".B", escaped)) << f << " has no entry in docs/xlbd.8";
        EXPECT_TRUE(has_line(readme, "| `", f)) << f << " is not in README.md's table of flags";
    }
}

// Every outcome of enum xlb_outcome is a row of the README's outcome table.
TEST(XlbdDocs, ReadmeListsEveryOutcome) {
    const std::string abi = read_source("include/xlb/abi.h");
    const std::string readme = read_source("README.md");
    const std::regex outcome("XLB_OUT_([A-Z0-9_]+) = [0-9]+");
    int count = 0;
    for (auto it = std::sregex_iterator(abi.begin(), abi.end(), outcome);
         it != std::sregex_iterator(); ++it) {
        const std::string name = (*it)[1].str();
        if (name == "_MAX") continue;
        ++count;
        EXPECT_NE(readme.find("`" + name + "`"), std::string::npos)
            << name << " (enum xlb_outcome) is missing from the README's outcome table";
    }
    EXPECT_GE(count, 18);
}

}  // namespace
