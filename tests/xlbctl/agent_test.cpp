// SPDX-License-Identifier: Apache-2.0
// The xlbctl binary against a real xlbd in network namespaces (lab.h): every
// verb, human and --json, and each error path with its exit code (bad
// arguments: 2, before anything is sent; the agent's refusal: 1 with its
// message; no agent: 3 with one line). `lookup` is checked against the
// backend the XDP program itself picks (BPF_PROG_TEST_RUN on a second
// instance of the balancer sharing the agent's pinned maps), and a change
// made with xlbctl is checked to survive an agent restart.
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <linux/bpf.h>
#include <poll.h>
#include <pty.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <termios.h>
#include <unistd.h>
#include <utmp.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <cstring>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <regex>
#include <set>
#include <sstream>
#include <thread>

#include "lab.h"
#include "packet.h"
#include "xlb/bpf/programs.h"
#include "xlb/bpf/ring.h"
#include "xlb/bpf/test_run.h"
#include "xlb/config/config.h"
#include "xlb/config/json.h"

namespace xlb::xlbctl::test {
namespace {

using json = nlohmann::json;
using namespace std::chrono_literals;

#define EXPECT_HAS(text, part) EXPECT_NE((text).find(part), std::string::npos) << (text)
#define EXPECT_LACKS(text, part) EXPECT_EQ((text).find(part), std::string::npos) << (text)

constexpr const char* kWeb = "198.51.100.10:80/tcp";
constexpr const char* kAny = "198.51.100.20:0/tcp";
// A socket path nobody serves: a command that exits 1 with it was refused
// before anything was sent (sending would have failed with exit 2).
constexpr const char* kNoSocket = "/nonexistent/xlbd.sock";

std::string read_file(const std::string& path) {
    std::ifstream in(path);
    std::stringstream buf;
    buf << in.rdbuf();
    return buf.str();
}

json parse(const std::string& text) {
    json j = json::parse(text, nullptr, false);
    EXPECT_FALSE(j.is_discarded()) << "not JSON: " << text;
    return j;
}

// The line of `text` that starts with `start`, or "".
std::string line_of(const std::string& text, const std::string& start) {
    std::istringstream in(text);
    for (std::string line; std::getline(in, line);)
        if (line.starts_with(start)) return line;
    return "";
}

int lines(const std::string& text) {
    return static_cast<int>(std::count(text.begin(), text.end(), '\n'));
}

// The backend of `address` in a reply's "backends", or null.
json find_backend(const json& reply, const std::string& address) {
    for (const json& b : reply.at("backends"))
        if (b.at("address") == address) return b;
    return nullptr;
}

// Runs the real binary, without a terminal (so never colour).
ProcessResult xlbctl(std::vector<std::string> args, ProcessOptions options = {}) {
    args.insert(args.begin(), XLBCTL_PATH);
    options.unset_env.push_back("NO_COLOR");
    return run_process(args, options);
}

TEST(XlbctlBinary, HelpAndVersionNeedNoAgent) {
    ProcessResult r = xlbctl({"backend", "add", "--help"}, {{"XLB_SOCKET=/nonexistent"}});
    EXPECT_EQ(r.code, 0);
    EXPECT_HAS(r.out, "Usage: xlbctl backend add [OPTIONS] VIP ADDR");
    EXPECT_HAS(r.out, "Examples:\n  xlbctl backend add 198.51.100.10:80/tcp 203.0.113.14\n");
    EXPECT_EQ(r.err, "");
    ProcessResult v = xlbctl({"--version"});
    EXPECT_EQ(v.code, 0);
    EXPECT_HAS(v.out, "xlbctl ");
    ProcessResult none = xlbctl({});
    EXPECT_EQ(none.code, 2) << "a usage error, as in every xlb tool";
    EXPECT_HAS(none.err, "xlbctl: expected a verb after 'xlbctl'");
}

class XlbctlAgent : public ::testing::Test {
protected:
    void SetUp() override {
        if (auto why = Lab::unavailable(XLBD_PATH)) GTEST_SKIP() << *why;
        lab = std::make_unique<Lab>(XLBD_PATH);
        lab->start_agent();
    }

    void TearDown() override {
        if (HasFailure() && lab) std::cerr << "--- xlbd's log ---\n" << lab->agent_log();
        lab.reset();
    }

    // xlbctl with XLB_SOCKET pointing at the lab's agent.
    ProcessResult ctl(std::vector<std::string> args, ProcessOptions options = {}) {
        options.env.push_back("XLB_SOCKET=" + lab->socket());
        return xlbctl(std::move(args), std::move(options));
    }

    // Success: exit 0, nothing on stderr, the output.
    std::string ok(const std::vector<std::string>& args) {
        ProcessResult r = ctl(args);
        EXPECT_EQ(r.code, 0) << join(args) << "\nstdout: " << r.out << "\nstderr: " << r.err;
        EXPECT_EQ(r.err, "") << join(args);
        return r.out;
    }

    json ok_json(std::vector<std::string> args) {
        args.push_back("--json");
        return parse(ok(args));
    }

    // Refused: exit 1 and one line on stderr, nothing on stdout.
    std::string refused(const std::vector<std::string>& args, const ProcessOptions& options = {}) {
        ProcessResult r = ctl(args, options);
        EXPECT_EQ(r.code, 1) << join(args) << "\nstdout: " << r.out << "\nstderr: " << r.err;
        EXPECT_EQ(r.out, "") << join(args);
        EXPECT_EQ(lines(r.err), 1) << join(args) << ": " << r.err;
        return r.err;
    }

    // Refused by xlbctl's own checks: with a socket nobody serves, exit 2
    // (a usage error, not 3) shows that nothing was sent.
    std::string refused_before_sending(std::vector<std::string> args) {
        args.push_back("--socket");
        args.push_back(kNoSocket);
        ProcessResult r = ctl(args);
        EXPECT_EQ(r.code, 2) << join(args) << "\nstdout: " << r.out << "\nstderr: " << r.err;
        EXPECT_EQ(r.out, "") << join(args);
        EXPECT_EQ(lines(r.err), 1) << join(args) << ": " << r.err;
        return r.err;
    }

    static std::string join(const std::vector<std::string>& args) {
        std::string s = "xlbctl";
        for (const auto& a : args) s += " " + a;
        return s;
    }

    // A second instance of the balancer on the agent's pinned maps.
    bpf::LbProgram balancer() {
        auto lb = bpf::LbProgram::load({Lab::kMaxVips, Lab::kMaxBackends, Lab::kConntrackEntries},
                                       {lab->maps_dir()});
        if (!lb) throw std::runtime_error(lb.error().message());
        if (!lb->pins().names(bpf::PinAction::kReplaced).empty() ||
            !lb->pins().names(bpf::PinAction::kCreated).empty())
            throw std::runtime_error("the test's balancer did not reuse every map of the agent: " +
                                     lb->pins().summary());
        return std::move(*lb);
    }

    // The backend the XDP program sends a new TCP flow to: the outer
    // destination of the encapsulated frame.
    static std::string data_plane_backend(const bpf::LbProgram& lb, const std::string& src,
                                          std::uint16_t sport, const std::string& vip,
                                          std::uint16_t dport) {
        xlb::test::Flow flow{*net::IpAddress::parse(src), *net::IpAddress::parse(vip), sport, dport,
                             xlb::test::kProtoTcp};
        xlb::test::FrameOptions opt;
        opt.tcp_flags = xlb::test::kTcpSyn;
        auto frame = xlb::test::make_frame(flow, opt);
        auto run = bpf::test_run_xdp(lb.prog_fd(), frame);
        if (!run) return "test run failed: " + run.error().message();
        if (run->action != XDP_TX) return "action " + std::to_string(run->action);
        const auto& out = run->frame;
        if (out.size() < 34 || out[12] != 0x08 || out[13] != 0x00) return "not IPv4 out";
        return fmt::format("{}.{}.{}.{}", out[30], out[31], out[32], out[33]);
    }

    std::unique_ptr<Lab> lab;
};

TEST_F(XlbctlAgent, Status) {
    const std::string out = ok({"status"});
    EXPECT_HAS(out, std::string("on ") + Lab::kInterface + ", native XDP, up ");
    EXPECT_HAS(out, ", ready\n");
    EXPECT_HAS(out, "VIP                   NAME     BACKENDS  HEALTHY WEIGHT  PANIC");
    // The lab's VIPs have no health check: their backends are never probed,
    // so none is called healthy.
    EXPECT_HAS(out, "198.51.100.10:80/tcp  web   3 unchecked               -  no");
    EXPECT_HAS(out, "198.51.100.20:0/tcp   any   2 unchecked");
    // The lab encapsulates with IPIP: no SYN cookies, and status says why.
    EXPECT_HAS(out, "live   off (encap is not gue)\n");
    EXPECT_HAS(out, "\nSYN flood: calm (answers over 20000 SYNs/s on a CPU; 0 floods so far)\n");

    const json j = ok_json({"status"});
    EXPECT_EQ(j["syn_flood"]["state"], "calm") << "the agent's detector runs";
    EXPECT_EQ(j["vips"][0]["syn_cookies"]["reason"], "encap is not gue");
    EXPECT_EQ(j["vips"][0]["syn_cookies"]["cookies_sent"], 0) << "read from the program's map";
    EXPECT_TRUE(j["version"].is_string());
    EXPECT_EQ(j["interface"], Lab::kInterface);
    EXPECT_EQ(j["xdp_mode"], "native");
    EXPECT_TRUE(j["uptime_s"].is_number_unsigned());
    EXPECT_EQ(j["ready"], true);
    ASSERT_EQ(j["vips"].size(), 2u);
    for (const char* field :
         {"vip", "name", "vip_id", "epoch", "checksum", "panic", "panic_reason", "healthy_share",
          "published", "backends_total", "backends_healthy", "last_error"})
        EXPECT_TRUE(j["vips"][0].contains(field)) << field;
    EXPECT_EQ(j["vips"][0]["checksum"].get<std::string>().size(), 16u);
}

TEST_F(XlbctlAgent, VipListAddDel) {
    std::string out = ok({"vip", "list"});
    EXPECT_HAS(out, "VIP                   NAME  HASH    CONNTRACK  RING  PANIC AT     BACKENDS");
    EXPECT_HAS(out, "198.51.100.10:80/tcp  web   5tuple  yes         251       50%  3 unchecked");
    EXPECT_EQ(ok({"vip", "list", "-q"}), std::string(kWeb) + "\n" + kAny + "\n");

    out = ok({"vip", "add", "198.51.100.30:443", "--name", "tls", "--hash", "source", "--ring-size",
              "1009", "--panic-threshold", "0.25", "--no-conntrack", "--backend", "203.0.113.21",
              "-b", "203.0.113.22=50"});
    EXPECT_HAS(out, "added VIP 198.51.100.30:443/tcp: 2 backends, epoch 1, checksum ");
    json list = ok_json({"vip", "list"});
    json added;
    for (const json& v : list["vips"])
        if (v["vip"] == "198.51.100.30:443/tcp") added = v;
    ASSERT_TRUE(added.is_object()) << list.dump(2);
    EXPECT_EQ(added["spec"]["name"], "tls");
    EXPECT_EQ(added["spec"]["hash"], "source");
    EXPECT_EQ(added["spec"]["ring_size"], 1009);
    EXPECT_EQ(added["spec"]["conntrack"], false);
    EXPECT_EQ(added["spec"]["panic_threshold"], 0.25);
    EXPECT_EQ(added["spec"]["backends"].size(), 2u);
    EXPECT_EQ(added["spec"]["backends"][1]["weight"], 50);

    EXPECT_HAS(refused({"vip", "add", "198.51.100.30:443"}),
               "xlbctl: xlbd: VIP 198.51.100.30:443/tcp already exists");

    json v6 = ok_json({"vip", "add", "[2001:db8::30]:443/udp", "--hash", "source"});
    EXPECT_EQ(v6["vip"], "[2001:db8::30]:443/udp");
    EXPECT_EQ(v6["spec"]["protocol"], "udp");
    EXPECT_TRUE(v6["backends"].empty());

    EXPECT_EQ(ok({"vip", "del", "198.51.100.30:443"}), "deleted VIP 198.51.100.30:443/tcp\n");
    EXPECT_EQ(ok_json({"vip", "del", "[2001:db8::30]:443/udp"}),
              (json{{"vip", "[2001:db8::30]:443/udp"}, {"deleted", true}}));
    EXPECT_EQ(refused({"vip", "del", "198.51.100.30:443"}),
              "xlbctl: xlbd: no VIP 198.51.100.30:443/tcp (GET /v1/vips lists them)\n");
    ProcessResult j = ctl({"vip", "del", "198.51.100.30:443", "--json"});
    EXPECT_EQ(j.code, 1);
    json e = parse(j.err);
    EXPECT_EQ(e["http_status"], 404);
    EXPECT_EQ(e["exit_code"], 1);
    EXPECT_HAS(e["error"].get<std::string>(), "no VIP 198.51.100.30:443/tcp");

    EXPECT_EQ(ok({"vip", "list", "-q"}), std::string(kWeb) + "\n" + kAny + "\n");
}

// A VIP without a health check: its backends are never probed, and neither
// status, top nor backend list calls them healthy. vip add and vip set take
// every setting of the file; vip set changes only those given, refuses what
// moves flows unless confirmed, and is checked by the agent as the file is.
TEST_F(XlbctlAgent, VipAddAndSetTakeTheFilesSettings) {
    EXPECT_HAS(line_of(ok({"status"}), "198.51.100.10:80/tcp"), "3 unchecked");
    for (const json& b : ok_json({"backend", "list", kWeb})["backends"])
        EXPECT_EQ(b["health"], "unchecked") << b.dump();
    const json top = ok_json({"top", "--interval", "0.2"});
    for (const json& v : top["vips"])
        for (const json& b : v["backends"]) EXPECT_EQ(b["health"], "unchecked") << b.dump();

    // A checked VIP, added with settings of the file.
    const json added = ok_json({"vip",
                                "add",
                                "198.51.100.30:443",
                                "-b",
                                "203.0.113.21",
                                "--health-check.type",
                                "tcp",
                                "--health-check.port",
                                "1",
                                "--health-check.interval",
                                "200ms",
                                "--health-check.timeout",
                                "100ms",
                                "--health-check.jitter",
                                "0s",
                                "--slow-start.window",
                                "0s",
                                "--announce",
                                "never",
                                "--conntrack-idle-timeout",
                                "5m"});
    EXPECT_EQ(added["spec"]["health_check"]["type"], "tcp");
    EXPECT_EQ(added["spec"]["health_check"]["interval"], "200ms");
    EXPECT_EQ(added["spec"]["slow_start"]["window"], "0s");
    EXPECT_EQ(added["spec"]["announce"], "never");
    EXPECT_EQ(added["spec"]["conntrack_idle_timeout"], "5m");
    EXPECT_NE(added["backends"][0]["health"], "unchecked");
    EXPECT_HAS(line_of(ok({"status"}), "198.51.100.30:443/tcp"), "0/1");

    // vip set: only what is given changes.
    const json before = ok_json({"vip", "list"})["vips"][0];
    EXPECT_EQ(ok({"vip", "set", kWeb, "--slow-start.window", "5s", "--announce", "always"}),
              "VIP 198.51.100.10:80/tcp: 2 settings changed, epoch " + before["epoch"].dump() +
                  "\n  announce: when_serving -> always\n  slow_start.window: " +
                  before["spec"]["slow_start"]["window"].get<std::string>() + " -> 5s\n");
    json web = ok_json({"backend", "list", kWeb});
    const json spec = ok_json({"vip", "list"})["vips"][0]["spec"];
    EXPECT_EQ(spec["slow_start"]["window"], "5s");
    EXPECT_EQ(spec["announce"], "always");
    EXPECT_EQ(spec["ring_size"], 251);
    EXPECT_EQ(web["backends"].size(), 3u);

    // A change that moves flows: refused, tried, then confirmed.
    EXPECT_HAS(refused({"vip", "set", kWeb, "--ring-size", "509"}),
               "refused: VIP 198.51.100.10:80/tcp: ring_size 251 -> 509");
    EXPECT_EQ(ok({"vip", "set", kWeb, "--ring-size", "509", "--allow-disruptive", "--dry-run"}),
              "dry run of vip set 198.51.100.10:80/tcp: nothing was changed; 1 setting would "
              "change\n  ring_size: 251 -> 509\n");
    EXPECT_EQ(ok_json({"table", kWeb})["ring_size"], 251);
    ok({"vip", "set", kWeb, "--ring-size", "509", "--allow-disruptive"});
    EXPECT_EQ(ok_json({"table", kWeb})["ring_size"], 509);

    // The agent checks a setting against the VIP's others, as the file's.
    EXPECT_HAS(refused({"vip", "set", kWeb, "--health-check.type", "tcp", "--health-check.timeout",
                        "20s"}),
               "health_check.timeout");
    EXPECT_HAS(refused({"vip", "set", "198.51.100.99:80", "--name", "x"}),
               "no VIP 198.51.100.99:80/tcp");
    EXPECT_HAS(refused_before_sending({"vip", "set", kWeb, "--health-check.type", "icmp"}),
               "--health-check.type: found \"icmp\"");
    EXPECT_EQ(ok_json({"vip", "list"})["vips"][0]["spec"]["health_check"]["type"], "none");

    // Kept across a restart, like every change made through the API.
    EXPECT_EQ(lab->stop_agent(), 0);
    lab->start_agent();
    const json after = ok_json({"vip", "list"})["vips"];
    EXPECT_EQ(after[0]["spec"]["slow_start"]["window"], "5s");
    EXPECT_EQ(after[0]["spec"]["ring_size"], 509);
}

// top on a real terminal (a pty of 80 columns): no line wider than it, the
// keyboard read a key at a time without echo while it runs, q quits at once,
// and the terminal is as it was afterwards.
TEST_F(XlbctlAgent, TopOnATerminalFitsItAndQuitsOnQ) {
    int master = -1, slave = -1;
    winsize size{};
    size.ws_row = 40;
    size.ws_col = 80;
    ASSERT_EQ(::openpty(&master, &slave, nullptr, nullptr, &size), 0) << std::strerror(errno);
    termios before{};
    ASSERT_EQ(::tcgetattr(slave, &before), 0);
    ASSERT_TRUE(before.c_lflag & ICANON);
    const std::string socket = "XLB_SOCKET=" + lab->socket();
    const pid_t pid = ::fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
        ::close(master);
        if (::login_tty(slave) != 0) ::_exit(126);
        char* const argv[] = {const_cast<char*>(XLBCTL_PATH), const_cast<char*>("top"),
                              const_cast<char*>("--interval"), const_cast<char*>("0.2"), nullptr};
        char* const envp[] = {const_cast<char*>(socket.c_str()), const_cast<char*>("TERM=xterm"),
                              nullptr};
        ::execve(XLBCTL_PATH, argv, envp);
        ::_exit(127);
    }
    // Whatever fails below, the child does not outlive the test.
    struct Reaper {
        pid_t pid;
        bool reaped = false;
        ~Reaper() {
            if (reaped) return;
            ::kill(pid, SIGKILL);
            ::waitpid(pid, nullptr, 0);
        }
    } reaper{pid};
    std::string screen;
    auto read_for = [&](std::chrono::milliseconds limit, const std::function<bool()>& done) {
        const auto until = std::chrono::steady_clock::now() + limit;
        while (!done() && std::chrono::steady_clock::now() < until) {
            pollfd p{master, POLLIN, 0};
            if (::poll(&p, 1, 50) <= 0) continue;
            char buf[4096];
            const ssize_t n = ::read(master, buf, sizeof(buf));
            if (n <= 0) break;
            screen.append(buf, static_cast<std::size_t>(n));
        }
    };
    read_for(10s, [&] { return screen.find("VIP / BACKEND") != std::string::npos; });
    ASSERT_NE(screen.find("VIP / BACKEND"), std::string::npos) << screen;
    termios during{};
    ASSERT_EQ(::tcgetattr(slave, &during), 0);
    EXPECT_FALSE(during.c_lflag & ICANON) << "a key at a time";
    EXPECT_FALSE(during.c_lflag & ECHO);
    EXPECT_TRUE(during.c_lflag & ISIG) << "Ctrl-C still a signal";

    ASSERT_EQ(::write(master, "q", 1), 1);
    int status = -1;
    const auto until = std::chrono::steady_clock::now() + 5s;
    pid_t done = 0;
    while ((done = ::waitpid(pid, &status, WNOHANG)) == 0 &&
           std::chrono::steady_clock::now() < until)
        read_for(50ms, [] { return false; });
    if (done == 0) {
        ::kill(pid, SIGKILL);
        ::waitpid(pid, &status, 0);
        ADD_FAILURE() << "q did not end top:\n" << screen;
    }
    reaper.reaped = true;
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
    termios after{};
    ASSERT_EQ(::tcgetattr(slave, &after), 0);
    EXPECT_EQ(after.c_lflag, before.c_lflag) << "the terminal given back as it was";
    EXPECT_EQ(after.c_cc[VMIN], before.c_cc[VMIN]);
    ::close(master);
    ::close(slave);

    // Each painted line, escape sequences left out, fits the 80 columns.
    std::string line;
    std::size_t widest = 0;
    for (std::size_t i = 0; i < screen.size(); ++i) {
        const char ch = screen[i];
        if (ch == '\x1b') {
            while (i < screen.size() && !std::isalpha(static_cast<unsigned char>(screen[i]))) ++i;
            continue;
        }
        if (ch == '\r') continue;
        if (ch == '\n') {
            widest = std::max(widest, line.size());
            line.clear();
            continue;
        }
        line += ch;
    }
    EXPECT_LE(widest, 80u) << screen;
}

TEST_F(XlbctlAgent, BadArgumentsChangeNothing) {
    const std::string state = read_file(lab->state_file());
    const json before = ok_json({"status"});
    EXPECT_HAS(refused_before_sending({"vip", "add", "198.51.100.31:80", "--ring-size", "1000"}),
               "--ring-size: ring size 1000 is not prime");
    EXPECT_HAS(refused_before_sending({"vip", "add", "198.51.100.31:99999"}),
               "'99999' is not a port (expected 0-65535)");
    EXPECT_HAS(refused_before_sending({"vip", "add", "198.51.100.31:80", "--hash", "random"}),
               "e.g. --hash source");
    EXPECT_HAS(
        refused_before_sending({"backend", "add", kWeb, "203.0.113.14", "--weight", "10001"}),
        "--weight: found 10001, expected 0-10000");
    EXPECT_HAS(refused_before_sending({"backend", "add", "[2001:db8::10]:80", "203.0.113.14"}),
               "found IPv4 address 203.0.113.14 in an IPv6 VIP");
    EXPECT_HAS(refused_before_sending({"backend", "drain", "web", "203.0.113.11"}),
               "VIP: 'web' is not a VIP");
    EXPECT_HAS(refused_before_sending({"backend", "del", kWeb, "203.0.113.11:80"}),
               "an address with a port");
    EXPECT_HAS(refused_before_sending({"stats", "--watch", "0"}), "--watch: found '0'");
    EXPECT_HAS(refused_before_sending({"status", "--bogus"}), "--bogus");
    EXPECT_EQ(read_file(lab->state_file()), state) << "the state file was not touched";
    const json after = ok_json({"status"});
    for (std::size_t i = 0; i < 2; ++i)
        EXPECT_EQ(after["vips"][i]["epoch"], before["vips"][i]["epoch"]);
}

TEST_F(XlbctlAgent, BackendVerbs) {
    std::string out = ok({"backend", "list", kWeb});
    EXPECT_HAS(out, "VIP 198.51.100.10:80/tcp  epoch ");
    EXPECT_HAS(out,
               "ADDRESS       STATE   HEALTH     WEIGHT  EFFECTIVE  SLOTS   SHARE  ACTIVE  "
               "INACTIVE  NEW/S  PACKETS  BYTES  LAST FAILURE\n");
    EXPECT_HAS(out, "203.0.113.13  active  unchecked      50         50");
    EXPECT_EQ(ok({"backend", "list", kWeb, "-q"}), "203.0.113.11\n203.0.113.12\n203.0.113.13\n");
    json list = ok_json({"backend", "list", kWeb});
    EXPECT_EQ(list["vip"], kWeb);
    ASSERT_EQ(list["backends"].size(), 3u);
    for (const char* field : {"address",
                              "hash_key",
                              "state",
                              "health",
                              "last_failure",
                              "weight",
                              "effective_weight",
                              "weight_factor",
                              "slots",
                              "share_of_slots",
                              "in_table",
                              "live",
                              "id",
                              "generation",
                              "packets",
                              "bytes",
                              "new_flows",
                              "new_flows_per_s",
                              "connections",
                              "inactive_connections"})
        EXPECT_TRUE(list["backends"][0].contains(field)) << field;
    // without a VIP: every VIP's section, the web VIP's as above
    json all = ok_json({"backend", "list"});
    ASSERT_GE(all["vips"].size(), 2u);
    bool web_seen = false;
    for (const json& vip : all["vips"]) {
        EXPECT_TRUE(vip.contains("backends")) << vip.dump();
        if (vip["vip"] == kWeb) {
            web_seen = true;
            EXPECT_EQ(vip["backends"].size(), 3u);
        }
    }
    EXPECT_TRUE(web_seen);
    EXPECT_HAS(ok({"backend", "list"}), "VIP 198.51.100.10:80/tcp  epoch ");
    const auto epoch0 = list["epoch"].get<std::uint64_t>();

    out = ok({"backend", "add", kWeb, "203.0.113.14", "--weight", "25"});
    EXPECT_HAS(out,
               "added backend 203.0.113.14 to 198.51.100.10:80/tcp: weight 25 (effective "
               "25), ");
    EXPECT_HAS(refused({"backend", "add", kWeb, "203.0.113.14"}),
               "xlbctl: xlbd: VIP 198.51.100.10:80/tcp already has backend 203.0.113.14");

    json set = ok_json({"backend", "set", kWeb, "203.0.113.14", "--weight", "75"});
    EXPECT_EQ(find_backend(set, "203.0.113.14")["weight"], 75);
    EXPECT_GT(set["epoch"].get<std::uint64_t>(), epoch0);

    EXPECT_HAS(ok({"backend", "drain", kWeb, "203.0.113.14"}),
               "backend 203.0.113.14 of 198.51.100.10:80/tcp is draining");
    json drained = find_backend(ok_json({"backend", "list", kWeb}), "203.0.113.14");
    EXPECT_EQ(drained["state"], "drain");
    EXPECT_EQ(drained["in_table"], false);
    EXPECT_EQ(drained["live"], true);

    EXPECT_HAS(ok({"backend", "enable", kWeb, "203.0.113.14"}),
               "backend 203.0.113.14 of 198.51.100.10:80/tcp is active: weight 75");
    json disabled = ok_json({"backend", "disable", kWeb, "203.0.113.14"});
    EXPECT_EQ(find_backend(disabled, "203.0.113.14")["state"], "disabled");
    EXPECT_HAS(ok({"backend", "list", kWeb}), "203.0.113.14  disabled");

    EXPECT_HAS(ok({"backend", "del", kWeb, "203.0.113.14"}),
               "removed backend 203.0.113.14 from 198.51.100.10:80/tcp");
    EXPECT_EQ(ok({"backend", "list", kWeb, "-q"}), "203.0.113.11\n203.0.113.12\n203.0.113.13\n");
    EXPECT_EQ(refused({"backend", "del", kWeb, "203.0.113.14"}),
              "xlbctl: xlbd: VIP 198.51.100.10:80/tcp has no backend 203.0.113.14 (GET "
              "/v1/backends?vip=198.51.100.10:80/tcp lists them)\n");
    EXPECT_HAS(refused({"backend", "drain", kWeb, "203.0.113.99"}), "has no backend 203.0.113.99");
    EXPECT_EQ(refused({"backend", "list", "198.51.100.99:80"}),
              "xlbctl: xlbd: no VIP 198.51.100.99:80/tcp (GET /v1/vips lists them)\n");
    EXPECT_HAS(refused({"backend", "add", "198.51.100.99:80", "203.0.113.14"}),
               "xlbctl: xlbd: no VIP 198.51.100.99:80/tcp");
}

// cookie_acks through the real agent: set and taken back, and syn_cookies
// refused by the agent (the lab's encap is ipip), not by xlbctl, which
// leaves the encap to the agent.
TEST_F(XlbctlAgent, BackendCookieAcksAndTheAgentsEncap) {
    EXPECT_HAS(ok({"backend", "add", kWeb, "203.0.113.14", "--cookie-acks"}),
               "accepts cookie ACKs, epoch ");
    json vip = ok_json({"vip", "list"});
    auto spec_of = [&](const json& list) {
        for (const json& v : list["vips"])
            if (v["vip"] == kWeb) return v["spec"];
        ADD_FAILURE() << "no " << kWeb << " in " << list.dump();
        return json::object();
    };
    EXPECT_EQ(spec_of(vip)["backends"][3]["cookie_acks"], true);
    EXPECT_HAS(ok({"backend", "set", kWeb, "203.0.113.14", "--cookie-acks", "false"}),
               "takes no cookie ACKs, epoch ");
    EXPECT_FALSE(spec_of(ok_json({"vip", "list"}))["backends"][3].contains("cookie_acks"));
    EXPECT_HAS(refused({"vip", "set", kWeb, "--syn-cookies", "always"}),
               "xlbctl: xlbd: invalid VIP 198.51.100.10:80/tcp: syn_cookies: found always with "
               "encap: ipip, expected encap: gue");
    EXPECT_HAS(
        refused_before_sending({"backend", "set", kWeb, "203.0.113.14", "--cookie-acks", "maybe"}),
        "--cookie-acks: found 'maybe', expected true or false");
}

// A real probe's verdict change, as the agent recorded it. The backend is the
// router (203.0.113.1): nothing listens on its port 80, so the probe is
// refused (or, behind a filter, times out) and the backend turns unhealthy
// at the first probe.
TEST_F(XlbctlAgent, BackendHistoryShowsARealVerdictChange) {
    const std::string vip = "198.51.100.40:80/tcp";
    ProcessResult added = run_process({"curl", "-sS", "--unix-socket", lab->socket(), "-X", "POST",
                                       "http://xlbd/v1/vips", "-d",
                                       R"({"address": "198.51.100.40", "port": 80, "ring_size": 101,
             "health_check": {"type": "tcp", "interval": "500ms", "timeout": "200ms",
                              "jitter": "0s", "unhealthy_threshold": 1, "healthy_threshold": 1},
             "backends": [{"address": "203.0.113.1"}]})"});
    ASSERT_EQ(added.code, 0) << added.err;
    ASSERT_NE(added.out.find("\"epoch\""), std::string::npos) << added.out;

    json history;
    const auto deadline = std::chrono::steady_clock::now() + 10s;
    do {
        history = ok_json({"backend", "history", vip, "203.0.113.1"});
        if (!history["history"].empty()) break;
        std::this_thread::sleep_for(100ms);
    } while (std::chrono::steady_clock::now() < deadline);
    ASSERT_EQ(history["history"].size(), 1u) << history.dump(2);
    EXPECT_EQ(history["vip"], vip);
    EXPECT_EQ(history["health"], "unhealthy");
    EXPECT_EQ(history["checked"], true);
    EXPECT_EQ(history["capacity"], 20) << "health_history's default";
    const json& change = history["history"][0];
    EXPECT_EQ(change["from"], "unknown");
    EXPECT_EQ(change["to"], "unhealthy");
    EXPECT_EQ(change["cause"], "consecutive_failures");
    EXPECT_NE(change["probe"], "passed");
    EXPECT_TRUE(std::regex_match(change["time"].get<std::string>(),
                                 std::regex(R"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z)")))
        << change["time"];
    EXPECT_HAS(change["reason"].get<std::string>(), "1 consecutive failure, last: ");

    const std::string out = ok({"backend", "history", vip, "203.0.113.1"});
    EXPECT_HAS(out,
               "VIP 198.51.100.40:80/tcp backend 203.0.113.1: unhealthy; 1 verdict change "
               "(the agent keeps the last 20)\n");
    EXPECT_HAS(out, "TIME                      FROM     TO         REASON\n");
    EXPECT_HAS(out, change["time"].get<std::string>() +
                        "  unknown  unhealthy  1 consecutive failure, last: ");

    // A backend without a check, and the same errors as the other backend verbs.
    EXPECT_HAS(ok({"backend", "history", kWeb, "203.0.113.11"}),
               "VIP 198.51.100.10:80/tcp backend 203.0.113.11: unchecked, not health-checked");
    EXPECT_EQ(refused({"backend", "history", vip, "203.0.113.99"}),
              "xlbctl: xlbd: VIP 198.51.100.40:80/tcp has no backend 203.0.113.99 (GET "
              "/v1/backends?vip=198.51.100.40:80/tcp lists them)\n");
    EXPECT_EQ(refused({"backend", "history", "198.51.100.99:80", "203.0.113.1"}),
              "xlbctl: xlbd: no VIP 198.51.100.99:80/tcp (GET /v1/vips lists them)\n");
    EXPECT_EQ(refused({"backend", "drain", "198.51.100.99:80", "203.0.113.1"}),
              "xlbctl: xlbd: no VIP 198.51.100.99:80/tcp (GET /v1/vips lists them)\n")
        << "the same words";
}

TEST_F(XlbctlAgent, Table) {
    const std::string out = ok({"table", kWeb});
    EXPECT_HAS(out, "VIP 198.51.100.10:80/tcp  epoch ");
    EXPECT_HAS(out, "  251 slots  live\n");
    EXPECT_HAS(out, "BACKEND       SLOTS   SHARE  TARGET  DEVIATION  IN TABLE\n");
    EXPECT_HAS(out, "203.0.113.13");
    const json t = ok_json({"table", kWeb});
    EXPECT_EQ(t["ring_size"], 251);
    EXPECT_EQ(t["configured_ring_size"], 251);
    EXPECT_EQ(t["published"], true);
    const json backends = ok_json({"backend", "list", kWeb});
    std::uint64_t total = 0;
    for (const json& b : t["backends"]) {
        total += b["slots"].get<std::uint64_t>();
        EXPECT_EQ(find_backend(backends, b["address"])["slots"], b["slots"]);
        EXPECT_NEAR(b["share"].get<double>(), b["target_share"].get<double>(), 0.05);
    }
    EXPECT_EQ(total, 251u);
    EXPECT_EQ(t["checksum"], backends["checksum"]);
    EXPECT_HAS(refused({"table", "198.51.100.99:80"}), "xlbctl: xlbd: no VIP 198.51.100.99:80/tcp");
}

// --dry-run predicts the change the same edit then publishes: the slots that
// change owner in the pinned ring, and each backend's slots after; and
// changes nothing itself.
TEST_F(XlbctlAgent, DryRunPredictsThePublishedChange) {
    bpf::LbProgram lb = balancer();
    const std::uint32_t web_id = ok_json({"status"})["vips"][0]["vip_id"].get<std::uint32_t>();
    ASSERT_EQ(ok_json({"status"})["vips"][0]["vip"], kWeb);
    auto owners = [&] {  // address per slot of the live ring, through the ids
        auto ring = bpf::read_ring(lb.rings().fd(), web_id);
        if (!ring) throw std::runtime_error(ring.error().message());
        std::map<std::uint32_t, std::string> address_of;
        const json list = ok_json({"backend", "list", kWeb});
        for (const json& b : list.at("backends"))
            if (!b["id"].is_null()) address_of[b["id"].get<std::uint32_t>()] = b["address"];
        std::vector<std::string> out;
        for (std::uint32_t id : *ring) out.push_back(address_of.count(id) ? address_of[id] : "?");
        return out;
    };
    struct Edit {
        std::vector<std::string> args;
    };
    for (const Edit& edit : {Edit{{"backend", "add", kWeb, "203.0.113.14", "--weight", "50"}},
                             Edit{{"backend", "set", kWeb, "203.0.113.12", "--weight", "300"}},
                             Edit{{"backend", "del", kWeb, "203.0.113.14"}}}) {
        const std::vector<std::string> before = owners();
        const json table_before = ok_json({"table", kWeb});
        std::vector<std::string> dry = edit.args;
        dry.push_back("--dry-run");
        const std::string human = ok(dry);
        EXPECT_HAS(human, "nothing was changed");
        dry.push_back("--json");
        const json p = ok_json(dry);
        EXPECT_EQ(p["dry_run"], true);
        EXPECT_EQ(p["vip"], ok_json({"table", kWeb})["vip"]) << "the VIP's canonical key";
        EXPECT_EQ(ok_json({"table", kWeb})["epoch"], table_before["epoch"]) << "nothing published";
        EXPECT_EQ(owners(), before);

        ok(edit.args);
        const std::vector<std::string> after = owners();
        ASSERT_EQ(after.size(), before.size());
        std::uint64_t moved = 0;
        for (std::size_t i = 0; i < after.size(); ++i) moved += after[i] != before[i];
        std::printf("[ MEASURED ] %s: predicted %llu of %zu slots to move, %llu moved\n",
                    join(edit.args).c_str(),
                    static_cast<unsigned long long>(p["slots_moved"].get<std::uint64_t>()),
                    after.size(), static_cast<unsigned long long>(moved));
        EXPECT_EQ(p["slots_moved"].get<std::uint64_t>(), moved) << join(edit.args);
        EXPECT_GT(moved, 0u);
        const json table_after = ok_json({"table", kWeb});
        EXPECT_EQ(p["checksum"], table_after["checksum"]);
        for (const json& b : p["backends"]) {
            const std::string addr = b["address"];
            const auto n = static_cast<std::uint64_t>(std::count(after.begin(), after.end(), addr));
            EXPECT_EQ(b["slots_after"].get<std::uint64_t>(), n) << addr;
        }
    }
    // only changes can be tried; errors are the real change's
    EXPECT_HAS(refused({"backend", "set", kWeb, "203.0.113.99", "--weight", "5", "--dry-run"}),
               "has no backend 203.0.113.99");
}

// The hash seed can change on SIGHUP; lookups must follow the data path.
TEST_F(XlbctlAgent, LookupFollowsAHashSeedChangedByAReload) {
    bpf::LbProgram lb = balancer();
    auto flow = [](int i) {
        return std::pair{fmt::format("198.18.7.{}", 1 + i),
                         static_cast<std::uint16_t>(30000 + i * 7)};
    };
    std::vector<std::string> before;
    for (int i = 0; i < 40; ++i) {
        const auto [src, sport] = flow(i);
        before.push_back(
            ok_json({"lookup", kWeb, "--src", fmt::format("{}:{}", src, sport)})["backend"]);
    }
    lab->reload_with_hash_seed(Lab::kHashSeed ^ 0x00c0ffee);
    int moved = 0;
    for (int i = 0; i < 40; ++i) {
        const auto [src, sport] = flow(i);
        const json r = ok_json({"lookup", kWeb, "--src", fmt::format("{}:{}", src, sport)});
        EXPECT_EQ(r["backend"], data_plane_backend(lb, src, sport, "198.51.100.10", 80))
            << "flow " << src << ":" << sport << " after the reload";
        moved += r["backend"] != before[static_cast<std::size_t>(i)];
    }
    // otherwise the seed would not matter and the test could not fail
    EXPECT_GT(moved, 0) << "a new seed moves some of 40 new flows";
}

TEST_F(XlbctlAgent, LookupAgreesWithTheDataPlane) {
    bpf::LbProgram lb = balancer();
    std::set<std::string> seen;
    for (int i = 0; i < 100; ++i) {
        const std::string src = fmt::format("198.18.{}.{}", i / 50, 1 + (i * 37) % 250);
        const auto sport = static_cast<std::uint16_t>(20000 + i * 101);
        const json r = ok_json({"lookup", kWeb, "--src", fmt::format("{}:{}", src, sport)});
        ASSERT_EQ(r["outcome"], "tx") << r.dump();
        const std::string kernel = data_plane_backend(lb, src, sport, "198.51.100.10", 80);
        EXPECT_EQ(r["backend"], kernel) << "flow " << src << ":" << sport;
        seen.insert(kernel);
    }
    EXPECT_EQ(seen.size(), 3u) << "100 flows reach every backend";

    // The every-port VIP: the destination port is part of the flow.
    for (int i = 0; i < 20; ++i) {
        const std::string src = fmt::format("198.18.9.{}", 1 + i);
        const auto dport = static_cast<std::uint16_t>(1000 + i * 997);
        const json r =
            ok_json({"lookup", kAny, "--src", src + ":40000", "--dport", std::to_string(dport)});
        EXPECT_EQ(r["dport"], dport);
        EXPECT_EQ(r["backend"], data_plane_backend(lb, src, 40000, "198.51.100.20", dport));
    }

    const std::string human = ok({"lookup", kWeb, "--src", "198.18.0.1:20000"});
    EXPECT_HAS(human,
               "198.51.100.10:80/tcp: a new tcp flow from 198.18.0.1:20000 to port 80 "
               "goes to ");
    EXPECT_HAS(human, " of 251, hash ");
    const json j = ok_json({"lookup", kWeb, "--src", "198.18.0.1:20000"});
    for (const char* field : {"vip", "src", "dport", "proto", "hash", "ring_size", "slot",
                              "backend_id", "backend", "outcome", "epoch"})
        EXPECT_TRUE(j.contains(field)) << field;
}

TEST_F(XlbctlAgent, LookupErrors) {
    EXPECT_HAS(refused_before_sending({"lookup", kAny, "--src", "198.18.0.1:1"}),
               "VIP 198.51.100.20:0/tcp serves every port: --dport is required, e.g.");
    EXPECT_HAS(refused_before_sending({"lookup", kWeb, "--src", "[2001:db8::1]:5"}),
               "--src: found an IPv6 client");
    EXPECT_HAS(refused_before_sending({"lookup", kWeb, "--src", "198.18.0.1"}),
               "--src: '198.18.0.1' is not an endpoint");
    EXPECT_HAS(refused_before_sending({"lookup", kWeb, "--src", "198.18.0.1:1", "--dport", "443"}),
               "serves port 80 only");
    EXPECT_HAS(refused_before_sending({"lookup", kWeb, "--src", "198.18.0.1:1", "--proto", "udp"}),
               "--proto: found udp, but VIP 198.51.100.10:80/tcp is tcp");
    EXPECT_HAS(refused({"lookup", "198.51.100.10:80", "--proto", "udp", "--src", "198.18.0.1:1"}),
               "xlbctl: xlbd: no VIP 198.51.100.10:80/udp");
    // An empty table: dropped, and said so (exit 0: the lookup itself worked).
    ok({"backend", "disable", kAny, "203.0.113.11"});
    ok({"backend", "disable", kAny, "203.0.113.12"});
    const std::string out = ok({"lookup", kAny, "--src", "198.18.0.1:1", "--dport", "22"});
    EXPECT_HAS(out,
               "is dropped: the table is empty: no backend can take traffic "
               "(drop_no_backend)");
    EXPECT_EQ(ok_json({"lookup", kAny, "--src", "198.18.0.1:1", "--dport", "22"})["backend"],
              nullptr);
}

TEST_F(XlbctlAgent, StatsAndWatch) {
    bpf::LbProgram lb = balancer();
    for (int i = 0; i < 50; ++i)
        ASSERT_EQ(data_plane_backend(lb, "198.18.1.1", static_cast<std::uint16_t>(30000 + i),
                                     "198.51.100.10", 80)
                      .find("203.0.113."),
                  0u);

    std::string out = ok({"stats"});
    EXPECT_HAS(
        out, "VIP                   NAME  PACKETS     BYTES  NEW FLOWS  CT HITS  DROPS  HINTED\n");
    EXPECT_HAS(out, "198.51.100.10:80/tcp  web        50  ");
    EXPECT_HAS(out, "OUTCOME (every packet the program saw)  PACKETS\n");
    EXPECT_HAS(out, "\ntx  ");

    json s = ok_json({"stats", kWeb});
    ASSERT_EQ(s["vips"].size(), 1u);
    EXPECT_EQ(s["vips"][0]["vip"], kWeb);
    EXPECT_EQ(s["vips"][0]["packets"], 50);
    EXPECT_EQ(s["vips"][0]["new_flows"], 50);
    EXPECT_GT(s["vips"][0]["bytes"].get<std::uint64_t>(), 50u * 54);
    EXPECT_GE(s["outcomes"]["tx"].get<std::uint64_t>(), 50u);
    std::uint64_t sent = 0;
    const json backends = ok_json({"backend", "list", kWeb});
    for (const json& b : backends["backends"]) sent += b["packets"].get<std::uint64_t>();
    EXPECT_EQ(sent, 50u) << "per-backend packets add up: " << backends.dump(2) << "\n"
                         << run_process({"bpftool", "map", "dump", "pinned",
                                         lab->maps_dir() + "/" XLB_MAP_BACKEND_STATS})
                                .out;
    EXPECT_HAS(refused({"stats", "198.51.100.99:80"}), "xlbctl: xlbd: no VIP 198.51.100.99:80/tcp");

    // Rates while traffic flows.
    std::atomic<bool> stop{false};
    std::thread traffic([&] {
        for (std::uint16_t port = 1; !stop; ++port) {
            data_plane_backend(lb, "198.18.2.2", port, "198.51.100.10", 80);
            std::this_thread::sleep_for(1ms);
        }
    });
    ProcessResult watch = ctl({"stats", kWeb, "--watch", "0.3", "--count", "2", "--json"});
    ProcessResult human = ctl({"stats", "--watch", "0.2", "--count", "1"});
    ProcessResult busy_top = ctl({"top", "--interval", "0.3", "--json"});
    stop = true;
    traffic.join();

    // top: rates while traffic flows; once it stopped, the same counters as
    // stats and backend list, and rates of 0.
    EXPECT_EQ(busy_top.code, 0) << busy_top.err;
    const json busy = parse(busy_top.out);
    EXPECT_GT(busy["vips"][0]["packets_per_s"].get<double>(), 0.0) << busy_top.out;
    ProcessResult quiet_top = ctl({"top", "--interval", "0.2", "--json"});
    ASSERT_EQ(quiet_top.code, 0) << quiet_top.err;
    const json quiet = parse(quiet_top.out);
    const json after_stats = ok_json({"stats", kWeb});
    const json after_backends = ok_json({"backend", "list", kWeb});
    json top_vip;
    for (const json& v : quiet["vips"])
        if (v["vip"] == kWeb) top_vip = v;
    ASSERT_TRUE(top_vip.is_object()) << quiet_top.out;
    EXPECT_EQ(top_vip["packets"], after_stats["vips"][0]["packets"]) << quiet_top.out;
    EXPECT_EQ(top_vip["bytes"], after_stats["vips"][0]["bytes"]);
    EXPECT_EQ(top_vip["new_flows"], after_stats["vips"][0]["new_flows"]);
    EXPECT_DOUBLE_EQ(top_vip["packets_per_s"].get<double>(), 0.0);
    ASSERT_EQ(top_vip["backends"].size(), after_backends["backends"].size());
    for (std::size_t i = 0; i < top_vip["backends"].size(); ++i) {
        const json& t = top_vip["backends"][i];
        const json& b = after_backends["backends"][i];
        EXPECT_EQ(t["address"], b["address"]);
        EXPECT_EQ(t["packets"], b["packets"]);
        EXPECT_EQ(t["state"], b["state"]);
        EXPECT_DOUBLE_EQ(t["effective_weight"].get<double>(),
                         b["effective_weight"].get<double>() / 100.0);
        EXPECT_DOUBLE_EQ(t["packets_per_s"].get<double>(), 0.0);
    }

    EXPECT_EQ(watch.code, 0) << watch.err;
    EXPECT_EQ(lines(watch.out), 2) << watch.out;
    std::istringstream in(watch.out);
    for (std::string line; std::getline(in, line);) {
        json sample = parse(line);
        EXPECT_GE(sample["interval_s"].get<double>(), 0.29);
        EXPECT_LT(sample["interval_s"].get<double>(), 5.0);
        EXPECT_TRUE(sample["time"].is_string());
        const json& v = sample["vips"][0];
        EXPECT_GT(v["packets_per_s"].get<double>(), 0.0) << line;
        EXPECT_DOUBLE_EQ(v["bits_per_s"].get<double>(), v["bytes_per_s"].get<double>() * 8);
        EXPECT_TRUE(sample["outcomes_per_s"].contains("tx"));
    }
    EXPECT_EQ(human.code, 0) << human.err;
    // The header shows the measured interval: 0.2 s asked, a little more on a busy host.
    std::smatch every;
    ASSERT_TRUE(std::regex_search(human.out, every, std::regex("every ([0-9.]+)s  "))) << human.out;
    EXPECT_GE(std::stod(every[1]), 0.2);
    EXPECT_LT(std::stod(every[1]), 5.0);
    EXPECT_HAS(human.out, "pps");
    EXPECT_HAS(human.out, "bit/s");
    EXPECT_LACKS(human.out, "\x1b[");
}

TEST_F(XlbctlAgent, ChangesSurviveARestart) {
    ok({"backend", "add", kWeb, "203.0.113.14", "--weight", "25"});
    ok({"backend", "drain", kWeb, "203.0.113.11"});
    ok({"vip", "add", "198.51.100.30:443", "--name", "tls", "-b", "203.0.113.21"});
    const json before = ok_json({"backend", "list", kWeb});

    EXPECT_EQ(lab->stop_agent(), 0);
    ProcessResult down = ctl({"backend", "list", kWeb});
    EXPECT_EQ(down.code, 3);
    lab->start_agent();

    const json after = ok_json({"backend", "list", kWeb});
    ASSERT_EQ(after["backends"].size(), 4u) << after.dump(2);
    EXPECT_EQ(find_backend(after, "203.0.113.14")["weight"], 25);
    EXPECT_EQ(find_backend(after, "203.0.113.11")["state"], "drain");
    EXPECT_GE(after["epoch"].get<std::uint64_t>(), before["epoch"].get<std::uint64_t>());
    EXPECT_EQ(after["checksum"], before["checksum"]) << "the same table";
    EXPECT_HAS(ok({"backend", "list", kWeb}), "203.0.113.14  active");
    EXPECT_HAS(ok({"vip", "list", "-q"}), "198.51.100.30:443/tcp\n");
}

// What runs, as model objects: every VIP's spec, by key.
std::vector<config::VipSpec> running_specs(const json& vip_list) {
    std::vector<config::VipSpec> out;
    for (const json& v : vip_list.at("vips")) {
        auto spec = config::vip_from_json(v.at("spec"));
        EXPECT_TRUE(spec) << spec.error();
        if (spec) out.push_back(*spec);
    }
    std::sort(out.begin(), out.end(),
              [](const auto& a, const auto& b) { return a.key() < b.key(); });
    return out;
}

// export writes what runs (the file and the runtime changes) as a file the
// agent accepts and starts from; diff of it finds nothing, diff of an edited
// copy finds the edits, a bad file is exit 2 with file:line:column.
TEST_F(XlbctlAgent, ExportDiffAndAStartFromTheExport) {
    ok({"backend", "set", kWeb, "203.0.113.13", "--weight", "75"});
    ok({"backend", "drain", kWeb, "203.0.113.12"});
    ok({"vip", "set", kWeb, "--health-check.type", "tcp", "--health-check.interval", "2s"});
    ok({"vip", "add", "198.51.100.30:443", "--name", "tls", "-b", "203.0.113.21=20"});
    ok({"vip", "del", kAny});
    const json before = ok_json({"vip", "list"});
    const std::vector<config::VipSpec> running = running_specs(before);
    ASSERT_EQ(running.size(), 2u);

    const std::string file = lab->dir() + "/export.yaml";
    EXPECT_EQ(ok({"export", "-o", file}), "wrote " + file + ": 2 VIP(s)\n");
    struct stat st {};
    ASSERT_EQ(::stat(file.c_str(), &st), 0);
    EXPECT_EQ(st.st_mode & 0777, 0600u) << "it holds the hash seed";
    auto exported = config::load_config_file(file);
    ASSERT_TRUE(exported) << exported.error().front().to_string() << "\n" << read_file(file);
    auto original = config::load_config_file(lab->config());
    ASSERT_TRUE(original);
    EXPECT_EQ(exported->settings, original->settings);
    std::vector<config::VipSpec> vips = exported->vips;
    std::sort(vips.begin(), vips.end(),
              [](const auto& a, const auto& b) { return a.key() < b.key(); });
    EXPECT_EQ(vips, running);
    EXPECT_EQ(ok({"export"}).substr(read_file(file).find('\n')),
              read_file(file).substr(read_file(file).find('\n')))
        << "stdout holds the same file (but the time in its first line)";

    // Nothing to apply: the export, and the agent's own file (a reload
    // keeps the runtime changes of VIPs the file did not change).
    // Twice each: a dry run leaves the agent's idea of its file alone.
    for (int i = 0; i < 2; ++i) {
        const std::string same = ok({"diff", file});
        EXPECT_EQ(same,
                  "no difference: a reload with " + file + " would change nothing (2 VIP(s))\n");
        const std::string own = ok({"diff", lab->config()});
        EXPECT_HAS(own, "no difference");
    }

    // An edited copy: one backend's weight, one VIP more.
    std::string text = read_file(file) +
                       "  - address: 198.51.100.40\n    port: 80\n    ring_size: 251\n"
                       "    backends:\n      - {address: 203.0.113.41}\n";
    const std::string weight = "{address: 203.0.113.13, weight: 75,";
    ASSERT_NE(text.find(weight), std::string::npos) << text;
    text.replace(text.find(weight), weight.size(), "{address: 203.0.113.13, weight: 30,");
    const std::string edited = lab->dir() + "/edited.yaml";
    std::ofstream(edited) << text;
    ProcessResult d = ctl({"diff", edited});
    EXPECT_EQ(d.code, 1) << d.out << d.err;
    EXPECT_EQ(d.err, "");
    EXPECT_HAS(d.out, "added 198.51.100.40:80/tcp; removed none; changed " + std::string(kWeb));
    EXPECT_HAS(d.out, "VIP 198.51.100.40:80/tcp: in the file, not at runtime");
    EXPECT_HAS(d.out,
               "VIP 198.51.100.10:80/tcp backend 203.0.113.13: weight 75 at runtime, 30 in "
               "the file");
    d = ctl({"diff", edited, "--json"});
    EXPECT_EQ(d.code, 1);
    const json report = parse(d.out);
    EXPECT_EQ(report["dry_run"], true);
    EXPECT_EQ(report["added"], json::array({"198.51.100.40:80/tcp"}));

    // A bad file: the reload's errors, exit 2.
    const std::string bad = lab->dir() + "/bad.yaml";
    std::string bad_text = read_file(file);
    ASSERT_NE(bad_text.find("\nmtu: 1500\n"), std::string::npos) << bad_text;
    bad_text.replace(bad_text.find("\nmtu: 1500\n"), 11, "\nmtu: huge\n");
    std::ofstream(bad) << bad_text;
    d = ctl({"diff", bad});
    EXPECT_EQ(d.code, 2) << d.out << d.err;
    EXPECT_HAS(d.err, "xlbctl: " + bad + " has 1 error(s)\n  " + bad + ":");
    EXPECT_HAS(d.err, ": mtu: found \"huge\"");
    EXPECT_EQ(d.out, "");
    d = ctl({"diff", lab->dir() + "/missing.yaml"});
    EXPECT_EQ(d.code, 2) << d.err;
    EXPECT_HAS(d.err, "missing.yaml");
    d = ctl({"diff", edited, "--socket", kNoSocket});
    EXPECT_EQ(d.code, 2) << "an unreachable agent is trouble, not a difference: " << d.err;

    // The dry runs applied nothing and are no reload.
    EXPECT_EQ(running_specs(ok_json({"vip", "list"})), running);
    EXPECT_EQ(ok_json({"status"})["last_reload"], nullptr);

    // The agent starts from the export: in place of its file, with its
    // state file, and then with none.
    EXPECT_EQ(lab->stop_agent(), 0);
    std::ofstream(lab->config()) << read_file(file);
    lab->start_agent();
    EXPECT_EQ(running_specs(ok_json({"vip", "list"})), running);
    for (const json& v : before["vips"]) {
        if (v["vip"] != kWeb) continue;
        EXPECT_EQ(ok_json({"backend", "list", kWeb})["checksum"], v["checksum"])
            << "the same table";
    }
    EXPECT_EQ(lab->stop_agent(), 0);
    ASSERT_EQ(::unlink(lab->state_file().c_str()), 0);
    lab->start_agent();
    EXPECT_EQ(running_specs(ok_json({"vip", "list"})), running);
    EXPECT_HAS(ok({"diff", file}), "no difference");
}

// The agent's audit entry of a change made with xlbctl --reason: the
// caller's uid, the diff, the result and the reason, in one line of its log.
TEST_F(XlbctlAgent, AChangeIsAuditedWithWhoWhatAndWhy) {
    ok({"--reason", "lab audit", "backend", "set", kWeb, "203.0.113.12", "--weight", "7"});
    const std::string log = lab->agent_log();
    const std::size_t at = log.find(" notice: audit: PATCH /v1/backends?");
    ASSERT_NE(at, std::string::npos) << log;
    const std::string entry = log.substr(at, log.find('\n', at) - at);
    EXPECT_HAS(entry, " by uid " + std::to_string(::getuid()));
    EXPECT_HAS(entry, "changed 198.51.100.10:80/tcp (backend 203.0.113.12 weight ");
    EXPECT_HAS(entry, " -> 7); result: ok (epoch ");
    EXPECT_HAS(entry, "; reason: \"lab audit\"");
    EXPECT_HAS(entry, " event=api_change vip=198.51.100.10:80/tcp backend=203.0.113.12 ");
    EXPECT_HAS(entry, " result=ok reason=\"lab audit\"");
    // a reload through xlbctl: its own entry, with the reload's words
    ok({"reload", "--reason", "same file"});
    const std::string after = lab->agent_log();
    EXPECT_HAS(after, "audit: POST /v1/reload by uid " + std::to_string(::getuid()));
    EXPECT_HAS(after,
               "added none; removed none; changed none; settings changed: none; result: "
               "ok; reason: \"same file\"");
}

TEST_F(XlbctlAgent, AgentDownIsExitThreeWithOneLine) {
    lab->stop_agent();
    ProcessResult r = ctl({"status"});
    EXPECT_EQ(r.code, 3);
    EXPECT_EQ(r.out, "");
    EXPECT_EQ(r.err, "xlbctl: cannot connect to xlbd at " + lab->socket() +
                         ": No such file or directory (is xlbd running? systemctl status xlbd; "
                         "another socket: --socket PATH or XLB_SOCKET)\n");
    ProcessResult j = ctl({"vip", "list", "--json"});
    EXPECT_EQ(j.code, 3);
    json e = parse(j.err);
    EXPECT_EQ(e["exit_code"], 3);
    EXPECT_HAS(e["error"].get<std::string>(), "No such file or directory");
    // Arguments are still checked first: a bad one is exit 2, not 3.
    ProcessResult bad = ctl({"backend", "set", kWeb, "203.0.113.11", "--weight", "x"});
    EXPECT_EQ(bad.code, 2);
    EXPECT_HAS(bad.err, "--weight: found 'x'");

    // A stale socket (an agent that crashed): refused.
    {
        int fd = ::socket(AF_UNIX, SOCK_STREAM, 0);
        sockaddr_un addr{};
        addr.sun_family = AF_UNIX;
        std::snprintf(addr.sun_path, sizeof(addr.sun_path), "%s", lab->socket().c_str());
        ASSERT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
        ::close(fd);
    }
    r = ctl({"stats"});
    EXPECT_EQ(r.code, 3);
    EXPECT_HAS(r.err, ": Connection refused (nothing accepts connections on it: is xlbd running?");
    EXPECT_EQ(lines(r.err), 1);

    // Not accessible: an unprivileged user (the socket is 0660, root's).
    ProcessOptions nobody;
    nobody.uid = 65534;
    r = ctl({"status"}, nobody);
    if (r.code == 126 || r.code == 127) GTEST_SKIP() << "cannot run xlbctl as nobody: " << r.err;
    EXPECT_EQ(r.code, 3);
    EXPECT_HAS(r.err,
               ": Permission denied (the socket is mode 0660: run as root or as a member of "
               "its group");
}

TEST_F(XlbctlAgent, SocketOptionBeatsTheEnvironment) {
    ProcessResult r = xlbctl({"status", "--socket", lab->socket()}, {{"XLB_SOCKET=/nonexistent"}});
    EXPECT_EQ(r.code, 0) << r.err;
    r = xlbctl({"--socket", lab->socket(), "vip", "list", "-q"});
    EXPECT_EQ(r.code, 0) << r.err;
    r = xlbctl({"status"}, {{"XLB_SOCKET=" + lab->dir() + "/other.sock"}});
    EXPECT_EQ(r.code, 3);
    EXPECT_HAS(r.err, "cannot connect to xlbd at " + lab->dir() + "/other.sock");
}

}  // namespace
}  // namespace xlb::xlbctl::test
