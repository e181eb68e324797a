// SPDX-License-Identifier: Apache-2.0
// A whole xlbctl run against a scripted agent (no process, no kernel): exit
// codes (0 done, 1 rejected, 2 usage, 3 unreachable), what goes to stdout and stderr,
// --json errors, colour rules, the watch loop; and the HTTP transport against
// small socket servers in this process (refused, missing, silent, garbage).
#include "xlb/xlbctl/run.h"

#include <gtest/gtest.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <deque>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <sstream>
#include <thread>

#include "xlb/xlbctl/drain.h"
#include "xlb/xlbctl/render.h"

namespace xlb::xlbctl {
namespace {

namespace fs = std::filesystem;

#define EXPECT_HAS(text, part) EXPECT_NE((text).find(part), std::string::npos) << (text)

// Replies in order; records what was sent.
class ScriptedTransport : public Transport {
public:
    explicit ScriptedTransport(std::deque<std::expected<HttpResponse, TransportError>> replies,
                               std::vector<HttpRequest>* sent)
        : replies_(std::move(replies)), sent_(sent) {}
    std::expected<HttpResponse, TransportError> send(const HttpRequest& r) override {
        sent_->push_back(r);
        if (replies_.empty()) return HttpResponse{500, R"({"error": "script ran out"})"};
        auto next = replies_.front();
        replies_.pop_front();
        return next;
    }

private:
    std::deque<std::expected<HttpResponse, TransportError>> replies_;
    std::vector<HttpRequest>* sent_;
};

struct Harness {
    std::ostringstream out, err;
    std::vector<HttpRequest> sent;
    std::deque<std::expected<HttpResponse, TransportError>> replies;
    std::map<std::string, std::string> env;
    bool tty = false;
    std::chrono::steady_clock::time_point clock{};
    std::vector<std::chrono::milliseconds> sleeps;
    bool watch_started = false;
    std::string socket_seen;
    // Ctrl-C after this many sleeps (never when negative).
    int interrupt_after_sleeps = -1;
    std::function<std::optional<int>()> terminal_rows;
    std::function<std::optional<int>()> terminal_columns;
    // top's keyboard: taken (and given back) how many times.
    int keys_taken = 0, keys_given_back = 0;
    bool keyboard = false;  // a terminal on standard input

    int run(const std::vector<std::string>& args) {
        Io io;
        io.out = &out;
        io.err = &err;
        io.out_is_tty = tty;
        io.getenv = [this](const char* name) -> const char* {
            auto it = env.find(name);
            return it == env.end() ? nullptr : it->second.c_str();
        };
        io.connect = [this](const Command& c) -> std::unique_ptr<Transport> {
            socket_seen = c.socket;
            return std::make_unique<ScriptedTransport>(replies, &sent);
        };
        io.sleep = [this](std::chrono::milliseconds d) {
            sleeps.push_back(d);
            clock += d;
        };
        io.now = [this] { return clock; };
        io.wall_time = [] { return std::string("2026-01-02T03:04:05Z"); };
        io.interrupted = [this] {
            return interrupt_after_sleeps >= 0 &&
                   sleeps.size() >= static_cast<std::size_t>(interrupt_after_sleeps);
        };
        io.on_watch_start = [this] { watch_started = true; };
        io.terminal_rows = terminal_rows;
        io.terminal_columns = terminal_columns;
        io.take_keys = [this]() -> std::shared_ptr<void> {
            if (!keyboard) return nullptr;
            ++keys_taken;
            return std::shared_ptr<void>(nullptr, [this](void*) { ++keys_given_back; });
        };
        return xlbctl::run(args, io);
    }
};

HttpResponse ok(json body, int status = 200) { return HttpResponse{status, body.dump()}; }

json vip_object(bool published = true) {
    return json{{"vip", "198.51.100.10:80/tcp"},
                {"name", "web"},
                {"vip_id", 0},
                {"epoch", 2},
                {"checksum", "5bf6441c8ac68df2"},
                {"panic", false},
                {"panic_reason", "none"},
                {"healthy_share", 1.0},
                {"published", published},
                {"backends_total", 1},
                {"backends_healthy", 1},
                {"last_error", published ? "" : "publish rings: EIO"},
                {"backends",
                 {{{"address", "203.0.113.14"},
                   {"hash_key", ""},
                   {"state", "active"},
                   {"health", "healthy"},
                   {"last_failure", ""},
                   {"weight", 50},
                   {"effective_weight", 5000},
                   {"weight_factor", 1.0},
                   {"slots", 251},
                   {"share_of_slots", 1.0},
                   {"in_table", true},
                   {"live", true},
                   {"id", 0},
                   {"generation", 1},
                   {"packets", 0},
                   {"bytes", 0}}}}};
}

TEST(XlbctlRun, SuccessIsExitZero) {
    Harness h;
    h.replies.push_back(ok(vip_object(), 201));
    EXPECT_EQ(h.run({"backend", "add", "198.51.100.10:80", "203.0.113.14", "--weight", "50"}), 0);
    ASSERT_EQ(h.sent.size(), 1u);
    EXPECT_EQ(h.sent[0].method, "POST");
    EXPECT_HAS(h.out.str(), "added backend 203.0.113.14 to 198.51.100.10:80/tcp");
    EXPECT_EQ(h.err.str(), "");
    EXPECT_EQ(h.socket_seen, "/run/xlb/xlbd.sock");
}

TEST(XlbctlRun, JsonOutputIsTheReply) {
    Harness h;
    h.replies.push_back(ok(vip_object(), 201));
    EXPECT_EQ(h.run({"backend", "add", "198.51.100.10:80", "203.0.113.14", "--json"}), 0);
    EXPECT_EQ(json::parse(h.out.str()), vip_object());
}

TEST(XlbctlRun, BadArgumentsAreExitTwoAndNothingIsSent) {
    Harness h;
    EXPECT_EQ(h.run({"backend", "set", "198.51.100.10:80", "203.0.113.14", "--weight", "20000"}),
              2);
    EXPECT_TRUE(h.sent.empty());
    EXPECT_EQ(h.out.str(), "");
    EXPECT_EQ(h.err.str(),
              "xlbctl: --weight: found 20000, expected 0-10000 (0 takes no new flows), e.g. "
              "--weight 100\n");
}

TEST(XlbctlRun, BadArgumentsWithJsonAreAJsonError) {
    Harness h;
    EXPECT_EQ(h.run({"table", "nonsense", "--json"}), 2);
    json e = json::parse(h.err.str());
    EXPECT_EQ(e["exit_code"], 2);
    EXPECT_HAS(e["error"].get<std::string>(), "VIP: 'nonsense' is not a VIP");
    EXPECT_FALSE(e.contains("http_status"));
    EXPECT_EQ(h.out.str(), "");
}

TEST(XlbctlRun, ApiErrorShowsTheAgentsMessageExitOne) {
    Harness h;
    h.replies.push_back(HttpResponse{
        404, R"J({"error": "no VIP 198.51.100.99:80/tcp (GET /v1/vips lists them)"})J"});
    EXPECT_EQ(h.run({"backend", "list", "198.51.100.99:80"}), 1);
    EXPECT_EQ(h.err.str(), "xlbctl: xlbd: no VIP 198.51.100.99:80/tcp (GET /v1/vips lists them)\n");
    EXPECT_EQ(h.out.str(), "");

    Harness j;
    j.replies.push_back(
        HttpResponse{409, R"({"error": "VIP 198.51.100.10:80/tcp already exists"})"});
    EXPECT_EQ(j.run({"vip", "add", "198.51.100.10:80", "--json"}), 1);
    json e = json::parse(j.err.str());
    EXPECT_EQ(e["error"], "xlbd: VIP 198.51.100.10:80/tcp already exists");
    EXPECT_EQ(e["http_status"], 409);
    EXPECT_EQ(e["exit_code"], 1);
}

TEST(XlbctlRun, ErrorWithoutJsonBody) {
    Harness h;
    h.replies.push_back(HttpResponse{503, "not ready: XDP program not attached\n"});
    EXPECT_EQ(h.run({"status"}), 1);
    EXPECT_EQ(h.err.str(), "xlbctl: xlbd: not ready: XDP program not attached\n");
}

TEST(XlbctlRun, UnreachableIsExitThreeOnOneLine) {
    Harness h;
    h.replies.push_back(std::unexpected(
        TransportError{TransportError::Stage::kConnect, ENOENT, "No such file or directory"}));
    EXPECT_EQ(h.run({"status", "--socket", "/tmp/nowhere.sock"}), 3);
    EXPECT_EQ(
        h.err.str(),
        "xlbctl: cannot connect to xlbd at /tmp/nowhere.sock: No such file or directory (is "
        "xlbd running? systemctl status xlbd; another socket: --socket PATH or XLB_SOCKET)\n");

    Harness j;
    j.replies.push_back(std::unexpected(
        TransportError{TransportError::Stage::kConnect, EACCES, "Permission denied"}));
    EXPECT_EQ(j.run({"vip", "list", "--json"}), 3);
    json e = json::parse(j.err.str());
    EXPECT_EQ(e["exit_code"], 3);
    EXPECT_HAS(e["error"].get<std::string>(), "Permission denied (the socket is mode 0660");
}

TEST(XlbctlRun, MalformedRepliesAreExitThree) {
    Harness h;
    h.replies.push_back(HttpResponse{200, "<html>"});
    EXPECT_EQ(h.run({"status"}), 3);
    EXPECT_HAS(h.err.str(), "sent a malformed reply: HTTP 200 without a JSON object");

    Harness j;
    j.replies.push_back(ok(json{{"version", "9"}}));
    EXPECT_EQ(j.run({"status"}), 3);
    EXPECT_HAS(j.err.str(), "sent a reply xlbctl does not understand");
}

// A drain the agent persisted but did not (yet) publish: 202 is the result
// with a warning and exit 0, 502 an error naming both and exit 1.
TEST(XlbctlRun, PersistedButNotLive) {
    struct Case {
        const char* what;
        json reply;
        int status;
        int exit;
        const char* out_has;
        const char* err_has;
    };
    json pending = vip_object(false);
    pending["last_error"] = "";
    pending["publish"] = "pending";
    json failed = vip_object(false);
    failed["publish"] = "failed";
    failed["persisted"] = true;
    failed["error"] =
        "the change was persisted, but its publish failed: publish rings: EIO (the agent "
        "retries after 100 ms, doubling up to 5 s; xlbctl status shows when it is live)";
    const Case cases[] = {
        {"accepted, last publish failed", vip_object(false), 202, 0, "is draining",
         "xlbctl: warning: backend drain 198.51.100.10:80/tcp: persisted, but not live yet: "
         "publish rings: EIO (the agent retries; xlbctl status shows when it is)\n"},
        {"accepted, publish pending", pending, 202, 0, "is draining",
         "xlbctl: warning: backend drain 198.51.100.10:80/tcp: persisted, publish pending: "
         "not live yet (nothing failed; xlbctl status shows when it is live)\n"},
        {"publish failed", failed, 502, 1, "",
         "xlbd: the change was persisted, but its publish failed: publish rings: EIO"},
    };
    for (const Case& c : cases) {
        SCOPED_TRACE(c.what);
        Harness h;
        h.replies.push_back(ok(c.reply, c.status));
        EXPECT_EQ(h.run({"backend", "drain", "198.51.100.10:80", "203.0.113.14"}), c.exit);
        EXPECT_HAS(h.out.str(), c.out_has);
        EXPECT_HAS(h.err.str(), c.err_has);
    }
}

json history_reply() {
    return json{{"vip", "198.51.100.10:80/tcp"},
                {"address", "203.0.113.14"},
                {"health", "unhealthy"},
                {"checked", true},
                {"capacity", 20},
                {"history",
                 {{{"time", "2026-12-01T15:02:11.250Z"},
                   {"from", "unknown"},
                   {"to", "healthy"},
                   {"cause", "consecutive_successes"},
                   {"probe", "passed"},
                   {"reason", "2 consecutive successes"}},
                  {{"time", "2026-12-01T16:40:03.112Z"},
                   {"from", "healthy"},
                   {"to", "unhealthy"},
                   {"cause", "consecutive_failures"},
                   {"probe", "timeout"},
                   {"reason", "2 consecutive failures, last: timeout after 1s (connecting)"}}}}};
}

TEST(XlbctlRun, BackendHistoryPrintsTheChangesOldestFirst) {
    Harness h;
    h.replies.push_back(ok(history_reply()));
    EXPECT_EQ(h.run({"backend", "history", "198.51.100.10:80", "203.0.113.14"}), 0);
    ASSERT_EQ(h.sent.size(), 1u);
    EXPECT_EQ(h.sent[0].method, "GET");
    EXPECT_EQ(h.sent[0].target,
              "/v1/backend/history?vip=198.51.100.10%3A80%2Ftcp&address=203.0.113.14");
    const std::string out = h.out.str();
    EXPECT_HAS(out, "VIP 198.51.100.10:80/tcp backend 203.0.113.14: unhealthy; 2 verdict changes");
    EXPECT_HAS(out, "TIME                      FROM     TO         REASON\n");
    const std::size_t up = out.find(
        "2026-12-01T15:02:11.250Z  unknown  healthy    2 consecutive "
        "successes\n");
    const std::size_t down = out.find(
        "2026-12-01T16:40:03.112Z  healthy  unhealthy  2 "
        "consecutive failures, last: timeout after 1s (connecting)\n");
    ASSERT_NE(up, std::string::npos) << out;
    ASSERT_NE(down, std::string::npos) << out;
    EXPECT_LT(up, down) << "oldest first";
    EXPECT_EQ(h.err.str(), "");

    Harness j;
    j.replies.push_back(ok(history_reply()));
    EXPECT_EQ(j.run({"backend", "history", "198.51.100.10:80", "203.0.113.14", "--json"}), 0);
    EXPECT_EQ(json::parse(j.out.str()), history_reply());
}

TEST(XlbctlRun, BackendHistoryOfAnUnknownVipOrBackendIsTheAgentsError) {
    Harness h;
    h.replies.push_back(HttpResponse{
        404,
        R"J({"error": "VIP 198.51.100.10:80/tcp has no backend 203.0.113.99 (GET /v1/backends?vip=198.51.100.10:80/tcp lists them)"})J"});
    EXPECT_EQ(h.run({"backend", "history", "198.51.100.10:80", "203.0.113.99"}), 1);
    EXPECT_EQ(h.err.str(),
              "xlbctl: xlbd: VIP 198.51.100.10:80/tcp has no backend 203.0.113.99 (GET "
              "/v1/backends?vip=198.51.100.10:80/tcp lists them)\n");
    EXPECT_EQ(h.out.str(), "");

    Harness j;
    j.replies.push_back(HttpResponse{
        404, R"J({"error": "no VIP 198.51.100.99:80/tcp (GET /v1/vips lists them)"})J"});
    EXPECT_EQ(j.run({"backend", "history", "198.51.100.99:80", "203.0.113.14", "--json"}), 1);
    json e = json::parse(j.err.str());
    EXPECT_EQ(e["error"], "xlbd: no VIP 198.51.100.99:80/tcp (GET /v1/vips lists them)");
    EXPECT_EQ(e["http_status"], 404);
}

TEST(XlbctlRun, HelpIsExitZeroOnStdout) {
    Harness h;
    EXPECT_EQ(h.run({"lookup", "--help"}), 0);
    EXPECT_HAS(h.out.str(), "Usage: xlbctl lookup");
    EXPECT_EQ(h.err.str(), "");
    EXPECT_TRUE(h.sent.empty());
}

TEST(XlbctlRun, SocketFromEnvironment) {
    Harness h;
    h.env["XLB_SOCKET"] = "/tmp/env.sock";
    h.replies.push_back(ok(json{{"vips", json::array()}}));
    EXPECT_EQ(h.run({"vip", "list"}), 0);
    EXPECT_EQ(h.socket_seen, "/tmp/env.sock");
}

json status_reply() {
    return json{{"version", "0.1.0"}, {"interface", "eth0"}, {"xdp_mode", "native"},
                {"uptime_s", 5},      {"ready", true},       {"vips", json::array()}};
}

TEST(XlbctlRun, ColourOnlyOnATerminalAndNeverWithNoColor) {
    struct Case {
        const char* what;
        bool tty;
        const char* env_name;
        const char* env_value;
        bool coloured;
    };
    const Case cases[] = {
        {"pipe", false, nullptr, nullptr, false},
        {"terminal", true, nullptr, nullptr, true},
        {"terminal, NO_COLOR=1", true, "NO_COLOR", "1", false},
        {"terminal, TERM=dumb", true, "TERM", "dumb", false},
    };
    for (const Case& c : cases) {
        SCOPED_TRACE(c.what);
        Harness h;
        h.tty = c.tty;
        if (c.env_name) h.env[c.env_name] = c.env_value;
        h.replies.push_back(ok(status_reply()));
        h.run({"status"});
        if (c.coloured) {
            EXPECT_HAS(h.out.str(), "\x1b[32mready");
        } else {
            EXPECT_EQ(h.out.str().find('\x1b'), std::string::npos);
        }
    }
}

json stats(std::uint64_t packets) {
    return json{{"outcomes", {{"tx", packets}, {"drop_no_backend", 0}}},
                {"vips",
                 {{{"vip", "198.51.100.10:80/tcp"},
                   {"name", "web"},
                   {"packets", packets},
                   {"bytes", packets * 100},
                   {"new_flows", packets / 10},
                   {"conntrack_hits", packets - packets / 10},
                   {"drops", 0}}}}};
}

TEST(XlbctlRun, WatchJsonLines) {
    Harness h;
    for (std::uint64_t p : {1000u, 3000u, 7000u}) h.replies.push_back(ok(stats(p)));
    EXPECT_EQ(h.run({"stats", "--watch", "2", "--count", "2", "--json"}), 0);
    EXPECT_TRUE(h.watch_started);
    EXPECT_EQ(h.sent.size(), 3u) << "one sample, then one per refresh";
    ASSERT_EQ(h.sleeps.size(), 2u);
    EXPECT_EQ(h.sleeps[0], std::chrono::milliseconds(2000));
    std::istringstream lines(h.out.str());
    std::string line;
    std::vector<json> samples;
    while (std::getline(lines, line)) samples.push_back(json::parse(line));
    ASSERT_EQ(samples.size(), 2u);
    EXPECT_DOUBLE_EQ(samples[0]["vips"][0]["packets_per_s"].get<double>(), 1000.0);
    EXPECT_DOUBLE_EQ(samples[1]["vips"][0]["packets_per_s"].get<double>(), 2000.0);
    EXPECT_DOUBLE_EQ(samples[1]["vips"][0]["bits_per_s"].get<double>(), 2000.0 * 800);
    EXPECT_EQ(samples[1]["time"], "2026-01-02T03:04:05Z");
}

TEST(XlbctlRun, WatchRefreshesInPlaceOnATerminal) {
    Harness h;
    h.tty = true;
    for (std::uint64_t p : {1000u, 3000u, 7000u}) h.replies.push_back(ok(stats(p)));
    EXPECT_EQ(h.run({"stats", "--watch", "1", "-n", "2"}), 0);
    const std::string out = h.out.str();
    EXPECT_HAS(out, "measuring rates over 1s");
    EXPECT_HAS(out, "\x1b[H\x1b[2J");
    EXPECT_HAS(out, "\x1b[K\n");
    EXPECT_HAS(out, "4.00 kpps");

    Harness pipe;
    for (std::uint64_t p : {1000u, 3000u, 7000u}) pipe.replies.push_back(ok(stats(p)));
    EXPECT_EQ(pipe.run({"stats", "--watch", "1", "-n", "2"}), 0);
    EXPECT_EQ(pipe.out.str().find('\x1b'), std::string::npos) << "frames one after another";
    EXPECT_HAS(pipe.out.str(), "2.00 kpps");
    EXPECT_HAS(pipe.out.str(), "4.00 kpps");
}

// GET /v1/backends of one VIP with two backends that have sent `packets`
// and `packets / 2`.
json backends(std::uint64_t packets) {
    auto backend = [](const char* address, const char* state, const char* health,
                      std::uint64_t weight, std::uint64_t effective, double share,
                      std::uint64_t n) {
        return json{{"address", address},
                    {"state", state},
                    {"health", health},
                    {"weight", weight},
                    {"effective_weight", effective},
                    {"share_of_slots", share},
                    {"packets", n},
                    {"bytes", n * 100},
                    {"new_flows", n / 10},
                    {"connections", n / 100},
                    {"inactive_connections", 1}};
    };
    return json{
        {"vips",
         {{{"vip", "198.51.100.10:80/tcp"},
           {"epoch", 3},
           {"checksum", "5bf6441c8ac68df2"},
           {"backends",
            {backend("203.0.113.11", "active", "healthy", 100, 5000, 0.6667, packets),
             backend("203.0.113.12", "drain", "unhealthy", 50, 0, 0.3333, packets / 2)}}}}}};
}

TEST(XlbctlRun, TopJsonIsOneSnapshotOfEveryVipAndBackendWithRates) {
    Harness h;
    h.replies = {ok(backends(1000)), ok(stats(1000)), ok(backends(3000)), ok(stats(4000))};
    EXPECT_EQ(h.run({"top", "--json"}), 0) << h.err.str();
    ASSERT_EQ(h.sent.size(), 4u);
    EXPECT_EQ(h.sent[0].target, "/v1/backends");
    EXPECT_EQ(h.sent[1].target, "/v1/stats");
    ASSERT_EQ(h.sleeps.size(), 1u) << "one interval, then one snapshot";
    EXPECT_EQ(h.sleeps[0], std::chrono::milliseconds(1000)) << "the default interval";
    const json s = json::parse(h.out.str());
    EXPECT_DOUBLE_EQ(s["interval_s"].get<double>(), 1.0);
    const json& v = s["vips"][0];
    EXPECT_EQ(v["vip"], "198.51.100.10:80/tcp");
    EXPECT_EQ(v["name"], "web");
    EXPECT_EQ(v["packets"], 4000) << "the counters of the last replies";
    EXPECT_DOUBLE_EQ(v["packets_per_s"].get<double>(), 3000.0);
    EXPECT_DOUBLE_EQ(v["bytes_per_s"].get<double>(), 300000.0);
    EXPECT_DOUBLE_EQ(v["bits_per_s"].get<double>(), 2400000.0);
    EXPECT_DOUBLE_EQ(v["new_flows_per_s"].get<double>(), 300.0);
    EXPECT_DOUBLE_EQ(v["drops_per_s"].get<double>(), 0.0);
    ASSERT_EQ(v["backends"].size(), 2u);
    const json& b11 = v["backends"][0];
    const json& b12 = v["backends"][1];
    EXPECT_EQ(b11["address"], "203.0.113.11");
    EXPECT_EQ(b11["state"], "active");
    EXPECT_EQ(b11["health"], "healthy");
    EXPECT_EQ(b11["weight"], 100);
    EXPECT_DOUBLE_EQ(b11["effective_weight"].get<double>(), 50.0) << "the CLI's units";
    EXPECT_DOUBLE_EQ(b11["packets_per_s"].get<double>(), 2000.0);
    EXPECT_DOUBLE_EQ(b11["bits_per_s"].get<double>(), 1600000.0);
    EXPECT_DOUBLE_EQ(b11["new_flows_per_s"].get<double>(), 200.0);
    EXPECT_EQ(b11["connections"], 30) << "as of the last reply";
    EXPECT_EQ(b11["inactive_connections"], 1);
    EXPECT_EQ(b12["state"], "drain");
    EXPECT_DOUBLE_EQ(b12["packets_per_s"].get<double>(), 1000.0);
    EXPECT_DOUBLE_EQ(b12["new_flows_per_s"].get<double>(), 100.0);
    EXPECT_EQ(b12["packets"], 1500);
}

TEST(XlbctlRun, TopFitsTheTerminal) {
    Harness h;
    h.tty = true;
    h.replies = {ok(backends(1000)), ok(stats(1000)), ok(backends(3000)), ok(stats(4000))};
    // A terminal of 5 lines: the heading, the table's header, the VIP, and
    // the line that counts what did not fit (the last line stays free).
    h.terminal_rows = [] { return std::optional<int>(5); };
    EXPECT_EQ(h.run({"top", "--count", "1"}), 0) << h.err.str();
    const std::string out = h.out.str();
    EXPECT_HAS(out, "VIP / BACKEND");
    EXPECT_HAS(out, "198.51.100.10:80/tcp");
    EXPECT_HAS(out, "3.00 kpps");
    EXPECT_EQ(out.find("203.0.113.11"), std::string::npos) << out;
    EXPECT_HAS(out, "... 2 more lines");

    Harness tall;
    tall.tty = true;
    tall.replies = {ok(backends(1000)), ok(stats(1000)), ok(backends(3000)), ok(stats(4000))};
    tall.terminal_rows = [] { return std::optional<int>(40); };
    EXPECT_EQ(tall.run({"top", "-n", "1"}), 0);
    EXPECT_HAS(tall.out.str(), "203.0.113.12");
    EXPECT_HAS(tall.out.str(), "drain");
    EXPECT_HAS(tall.out.str(), "2.00 kpps") << "203.0.113.11's rate";
    EXPECT_HAS(tall.out.str(), "66.67%");
    EXPECT_HAS(tall.out.str(), "CONNS");
    EXPECT_HAS(tall.out.str(), "200/s") << "203.0.113.11's new flows";
    EXPECT_EQ(tall.out.str().find("more lines"), std::string::npos);
}

// An 80-column terminal: no line wider than 80 (a wider one wraps and
// scrolls the heading away); the least needed columns go first and the
// heading says how many.
TEST(XlbctlRun, TopFitsTheTerminalsWidth) {
    auto widest = [](const std::string& text) {
        std::size_t w = 0;
        std::istringstream in(text);
        for (std::string line; std::getline(in, line);) {
            std::string plain;  // without the escape sequences of painting in place
            for (std::size_t i = 0; i < line.size(); ++i) {
                if (line[i] == '\x1b') {
                    while (i < line.size() && !std::isalpha(static_cast<unsigned char>(line[i])))
                        ++i;
                    continue;
                }
                plain += line[i];
            }
            w = std::max(w, plain.size());
        }
        return w;
    };
    for (int columns : {80, 60, 40}) {
        SCOPED_TRACE(columns);
        Harness h;
        h.tty = true;
        h.replies = {ok(backends(1000)), ok(stats(1000)), ok(backends(3000)), ok(stats(4000))};
        h.terminal_rows = [] { return std::optional<int>(40); };
        h.terminal_columns = [columns] { return std::optional<int>(columns); };
        EXPECT_EQ(h.run({"top", "--count", "1"}), 0) << h.err.str();
        const std::string out = h.out.str();
        EXPECT_LE(widest(out), static_cast<std::size_t>(columns)) << out;
        EXPECT_HAS(out, "203.0.113.12");
        if (columns >= 60) {
            EXPECT_HAS(out, "unhealthy");
            EXPECT_HAS(out, "3.00 kpps") << "the VIP's packet rate always stays";
        }
        if (columns == 80) {
            EXPECT_HAS(out, "THROUGHPUT");
            EXPECT_EQ(out.find("NAME"), std::string::npos) << "the name goes first";
            EXPECT_HAS(out, "columns hidden");
        }
    }
    Harness wide;
    wide.tty = true;
    wide.replies = {ok(backends(1000)), ok(stats(1000)), ok(backends(3000)), ok(stats(4000))};
    wide.terminal_columns = [] { return std::optional<int>(200); };
    EXPECT_EQ(wide.run({"top", "--count", "1"}), 0);
    EXPECT_HAS(wide.out.str(), "NAME");
    EXPECT_EQ(wide.out.str().find("hidden"), std::string::npos);
}

// top reads the keyboard while it paints in place (q quits), and gives the
// terminal back on every way out: its count, Ctrl-C, `q`, a failure.
TEST(XlbctlRun, TopGivesTheKeyboardBackOnEveryExit) {
    auto replies = [] {
        return std::deque<std::expected<HttpResponse, TransportError>>{
            ok(backends(1000)), ok(stats(1000)),    ok(backends(3000)),
            ok(stats(4000)),    ok(backends(5000)), ok(stats(6000))};
    };
    {
        Harness h;
        h.tty = h.keyboard = true;
        h.replies = replies();
        EXPECT_EQ(h.run({"top", "--count", "1"}), 0);
        EXPECT_EQ(h.keys_taken, 1);
        EXPECT_EQ(h.keys_given_back, 1);
        EXPECT_HAS(h.out.str(), "q or Ctrl-C to stop");
    }
    {
        Harness h;  // Ctrl-C or q (both end the wait through interrupted())
        h.tty = h.keyboard = true;
        h.replies = replies();
        h.interrupt_after_sleeps = 2;
        EXPECT_EQ(h.run({"top"}), 0);
        EXPECT_EQ(h.keys_given_back, 1);
    }
    {
        Harness h;  // the agent goes away
        h.tty = h.keyboard = true;
        h.replies = {ok(backends(1000)), ok(stats(1000)),
                     std::unexpected(TransportError{TransportError::Stage::kConnect, ECONNREFUSED,
                                                    "Connection refused"})};
        EXPECT_EQ(h.run({"top"}), 3);
        EXPECT_EQ(h.keys_taken, 1);
        EXPECT_EQ(h.keys_given_back, 1);
    }
    {
        Harness h;  // --json and pipes leave the keyboard alone
        h.keyboard = true;
        h.replies = replies();
        EXPECT_EQ(h.run({"top", "--count", "1"}), 0);
        h.tty = true;
        h.replies = replies();
        EXPECT_EQ(h.run({"top", "--json"}), 0);
        EXPECT_EQ(h.keys_taken, 0);
    }
}

// capture -w FILE: the file is created once the agent accepted the capture;
// a refused one (another capture runs, a bad outcome, no agent) leaves a file
// of that name as it was.
TEST(XlbctlRun, ARefusedCaptureLeavesTheFileAlone) {
    const fs::path dir = fs::path(::testing::TempDir()) / "xlbctl_capture_refused";
    fs::create_directories(dir);
    const std::string file = (dir / "keep.pcap").string();
    auto write = [&] { std::ofstream(file) << "an earlier capture"; };
    auto read = [&] {
        std::ifstream in(file);
        std::stringstream text;
        text << in.rdbuf();
        return text.str();
    };
    for (auto reply : std::vector<std::expected<HttpResponse, TransportError>>{
             HttpResponse{409, R"J({"error": "a capture is already running (one at a time)"})J"},
             HttpResponse{400, R"({"error": "outcomes: unknown outcome \"dorp\""})"},
             std::unexpected(TransportError{TransportError::Stage::kConnect, ENOENT,
                                            "No such file or directory"})}) {
        write();
        Harness h;
        h.replies = {reply};
        EXPECT_NE(h.run({"capture", "--count", "1", "-w", file}), 0);
        EXPECT_EQ(read(), "an earlier capture") << h.err.str();
    }
    const std::string fresh = (dir / "fresh.pcap").string();
    fs::remove(fresh);
    Harness h;
    h.replies = {HttpResponse{409, R"({"error": "a capture is already running"})"}};
    EXPECT_EQ(h.run({"capture", "-w", fresh}), 1);
    EXPECT_FALSE(fs::exists(fresh)) << "nothing created for a refused capture";

    // accepted: the file holds what the agent streamed
    auto frame = [](char type, const std::string& payload) {
        std::string f(1, type);
        for (int shift = 24; shift >= 0; shift -= 8)
            f += static_cast<char>((payload.size() >> shift) & 0xff);
        return f + payload;
    };
    Harness accepted;
    accepted.replies = {HttpResponse{
        200, frame('P', "PCAPHEADER") + frame('P', "RECORD") +
                 frame('E', R"({"ended": "count", "packets": 1, "records": 1, "matched": 1,
                               "lost": 0})")}};
    EXPECT_EQ(accepted.run({"capture", "--count", "1", "-w", fresh}), 0) << accepted.err.str();
    std::ifstream in(fresh);
    std::stringstream got;
    got << in.rdbuf();
    EXPECT_EQ(got.str(), "PCAPHEADERRECORD");
    EXPECT_HAS(accepted.err.str(), "captured 1 packets (1 records)");
    fs::remove_all(dir);
}

TEST(XlbctlRun, WatchEndsCleanlyOnCtrlC) {
    Harness h;
    for (std::uint64_t p : {1000u, 3000u, 7000u, 9000u}) h.replies.push_back(ok(stats(p)));
    h.interrupt_after_sleeps = 3;  // Ctrl-C during the third wait
    EXPECT_EQ(h.run({"stats", "--watch", "1", "--json"}), 0);
    EXPECT_EQ(h.sent.size(), 3u);
    EXPECT_EQ(h.err.str(), "");
    const std::string out = h.out.str();
    EXPECT_EQ(std::count(out.begin(), out.end(), '\n'), 2) << "two refreshes before Ctrl-C";
}

TEST(XlbctlRun, WatchStopsOnAgentFailure) {
    Harness h;
    h.replies.push_back(ok(stats(1)));
    h.replies.push_back(std::unexpected(
        TransportError{TransportError::Stage::kConnect, ECONNREFUSED, "Connection refused"}));
    EXPECT_EQ(h.run({"stats", "--watch", "1"}), 3);
    EXPECT_HAS(h.err.str(), "cannot connect to xlbd");
}

// --- backend drain --wait ---------------------------------------------------

// wait_until_drained on a fake clock: fetch i returns counts[i] (an error
// string once they run out, or at "fail_at").
struct DrainScript {
    std::vector<std::uint64_t> counts;
    std::size_t fetched = 0;
    std::chrono::steady_clock::time_point clock{};
    std::vector<std::chrono::milliseconds> sleeps;
    std::vector<std::pair<std::uint64_t, std::chrono::milliseconds>> reported;
    int interrupt_after_sleeps = -1;

    DrainWaitResult run(std::chrono::milliseconds timeout,
                        std::chrono::milliseconds interval = std::chrono::seconds(1)) {
        DrainWaitIo io;
        io.fetch = [this]() -> Result<std::uint64_t> {
            if (fetched >= counts.size()) return xlb::fail("agent gone");
            // each fetch takes 100 ms
            clock += std::chrono::milliseconds(100);
            return counts[fetched++];
        };
        io.report = [this](std::uint64_t n, std::chrono::milliseconds at) {
            reported.emplace_back(n, at);
        };
        io.sleep = [this](std::chrono::milliseconds d) {
            sleeps.push_back(d);
            clock += d;
        };
        io.now = [this] { return clock; };
        io.interrupted = [this] {
            return interrupt_after_sleeps >= 0 &&
                   sleeps.size() >= static_cast<std::size_t>(interrupt_after_sleeps);
        };
        return wait_until_drained(io, timeout, interval);
    }
};

using Outcome = DrainWaitResult::Outcome;
using ms = std::chrono::milliseconds;

TEST(XlbctlDrainWait, ReportsEachChangeUntilZero) {
    DrainScript d{{12, 12, 7, 7, 7, 1, 0}};
    const DrainWaitResult r = d.run(std::chrono::minutes(5));
    EXPECT_EQ(r.outcome, Outcome::kDrained);
    EXPECT_EQ(r.remaining, 0u);
    EXPECT_EQ(d.fetched, 7u);
    ASSERT_EQ(d.reported.size(), 4u) << "12, 7, 1, 0: one line per change";
    EXPECT_EQ(d.reported[0], std::make_pair(std::uint64_t{12}, ms(100)));
    EXPECT_EQ(d.reported[1], std::make_pair(std::uint64_t{7}, ms(2300)));
    EXPECT_EQ(d.reported[3].first, 0u);
    EXPECT_EQ(d.sleeps, std::vector<ms>(6, ms(1000))) << "every second";
    EXPECT_EQ(r.waited, ms(6700));
}

TEST(XlbctlDrainWait, ZeroAtOnceFetchesOnce) {
    DrainScript d{{0}};
    const DrainWaitResult r = d.run(std::chrono::minutes(5));
    EXPECT_EQ(r.outcome, Outcome::kDrained);
    EXPECT_EQ(d.fetched, 1u);
    EXPECT_TRUE(d.sleeps.empty());
    ASSERT_EQ(d.reported.size(), 1u);
    EXPECT_EQ(d.reported[0].first, 0u);
}

TEST(XlbctlDrainWait, TimesOutWithTheLastCountAfterAFetchAtTheDeadline) {
    DrainScript d{std::vector<std::uint64_t>(100, 3)};
    const DrainWaitResult r = d.run(ms(2500));
    EXPECT_EQ(r.outcome, Outcome::kTimedOut);
    EXPECT_EQ(r.remaining, 3u);
    ASSERT_EQ(d.reported.size(), 1u) << "no change, one line";
    // fetch (0.1) sleep 1 fetch (1.2) sleep 1 fetch (2.3) sleep 0.2 (what is left) fetch (2.6)
    EXPECT_EQ(d.sleeps, (std::vector<ms>{ms(1000), ms(1000), ms(200)}));
    EXPECT_EQ(d.fetched, 4u);
    EXPECT_EQ(r.waited, ms(2600));
}

TEST(XlbctlDrainWait, ZeroAtTheDeadlineIsDrained) {
    DrainScript d{{5, 5, 0}};
    EXPECT_EQ(d.run(ms(1500)).outcome, Outcome::kDrained);
}

TEST(XlbctlDrainWait, AFailedFetchEndsTheWait) {
    DrainScript d{{4, 2}};
    const DrainWaitResult r = d.run(std::chrono::minutes(5));
    EXPECT_EQ(r.outcome, Outcome::kFailed);
    EXPECT_EQ(r.error.message(), "agent gone");
    EXPECT_EQ(r.remaining, 2u);
}

TEST(XlbctlDrainWait, CtrlCEndsTheWait) {
    DrainScript d{std::vector<std::uint64_t>(100, 3)};
    d.interrupt_after_sleeps = 2;
    const DrainWaitResult r = d.run(std::chrono::minutes(5));
    EXPECT_EQ(r.outcome, Outcome::kInterrupted);
    EXPECT_EQ(d.fetched, 2u);
}

json count_of(std::uint64_t n) {
    return json{
        {"capacity", 4096},
        {"scanned", 100},
        {"matched", n},
        {"scan_ms", 1.5},
        {"active_within", "10s"},
        {"vips",
         n == 0 ? json::array()
                : json::array({{{"vip", "198.51.100.10:80/tcp"},
                                {"entries", n},
                                {"stale", 0},
                                {"backends", {{{"backend", "203.0.113.14"}, {"entries", n}}}}}})},
        {"no_vip", 0}};
}

TEST(XlbctlRun, DrainWaitShowsTheFallingCount) {
    Harness h;
    h.replies.push_back(ok(vip_object()));
    for (std::uint64_t n : {12u, 12u, 3u, 0u}) h.replies.push_back(ok(count_of(n)));
    EXPECT_EQ(h.run({"backend", "drain", "198.51.100.10:80", "203.0.113.14", "--wait"}), 0);
    ASSERT_EQ(h.sent.size(), 5u);
    EXPECT_EQ(h.sent[0].method, "PATCH");
    EXPECT_EQ(h.sent[1], (HttpRequest{"GET",
                                      "/v1/conntrack/count?vip=198.51.100.10%3A80%2Ftcp&backend="
                                      "203.0.113.14&active_within=10s",
                                      ""}));
    EXPECT_EQ(h.out.str(),
              "backend 203.0.113.14 of 198.51.100.10:80/tcp is draining: no new flows, "
              "established flows stay; epoch 2\n"
              "waiting up to 5m for 203.0.113.14's active connections (entries seen within 10s) "
              "to reach 0\n"
              "203.0.113.14: 12 active connections\n"
              "203.0.113.14: 3 active connections\n"
              "203.0.113.14: 0 active connections\n");
    EXPECT_EQ(h.err.str(), "");
    EXPECT_EQ(h.sleeps, std::vector<std::chrono::milliseconds>(3, std::chrono::seconds(1)));
    EXPECT_TRUE(h.watch_started) << "Ctrl-C handled";
}

TEST(XlbctlRun, DrainWaitTimesOutExitOne) {
    Harness h;
    h.replies.push_back(ok(vip_object()));
    for (int i = 0; i < 5; ++i) h.replies.push_back(ok(count_of(1)));
    EXPECT_EQ(h.run({"backend", "drain", "198.51.100.10:80", "203.0.113.14", "--wait",
                     "--wait-timeout", "3s", "--active-within", "1m"}),
              1);
    EXPECT_HAS(h.sent[1].target, "&active_within=1m");
    EXPECT_EQ(h.sent.size(), 5u) << "the drain, then a count at 0, 1, 2 and 3 s";
    EXPECT_HAS(h.out.str(), "203.0.113.14: 1 active connection\n");
    EXPECT_EQ(
        h.err.str(),
        "xlbctl: backend drain --wait: 203.0.113.14 of 198.51.100.10:80/tcp still has 1 "
        "active connection after 3s (--wait-timeout); it stays draining (xlbctl conntrack list "
        "--vip 198.51.100.10:80/tcp --backend 203.0.113.14 shows them)\n");
}

TEST(XlbctlRun, DrainWaitJsonLines) {
    Harness h;
    h.replies.push_back(ok(vip_object()));
    for (std::uint64_t n : {2u, 0u}) h.replies.push_back(ok(count_of(n)));
    EXPECT_EQ(h.run({"backend", "drain", "198.51.100.10:80", "203.0.113.14", "--wait", "--json"}),
              0);
    std::istringstream in(h.out.str());
    json drained;
    in >> drained;
    EXPECT_EQ(drained, vip_object()) << "the drain's reply first";
    std::string line;
    std::getline(in, line);
    std::vector<json> lines;
    while (std::getline(in, line)) lines.push_back(json::parse(line));
    ASSERT_EQ(lines.size(), 2u);
    EXPECT_EQ(lines[0], (json{{"vip", "198.51.100.10:80/tcp"},
                              {"backend", "203.0.113.14"},
                              {"active_connections", 2},
                              {"active_within", "10s"},
                              {"elapsed_s", 0.0}}));
    EXPECT_EQ(lines[1]["active_connections"], 0);
    EXPECT_DOUBLE_EQ(lines[1]["elapsed_s"].get<double>(), 1.0);
}

TEST(XlbctlRun, DrainWaitFailures) {
    {
        // The drain itself refused: no wait.
        Harness h;
        h.replies.push_back(HttpResponse{404, R"({"error": "no backend 203.0.113.14"})"});
        EXPECT_EQ(h.run({"backend", "drain", "198.51.100.10:80", "203.0.113.14", "--wait"}), 1);
        EXPECT_EQ(h.sent.size(), 1u);
    }
    {
        // The agent goes away while waiting: exit 3, its message.
        Harness h;
        h.replies.push_back(ok(vip_object()));
        h.replies.push_back(ok(count_of(4)));
        h.replies.push_back(std::unexpected(
            TransportError{TransportError::Stage::kConnect, ECONNREFUSED, "Connection refused"}));
        EXPECT_EQ(h.run({"backend", "drain", "198.51.100.10:80", "203.0.113.14", "--wait"}), 3);
        EXPECT_HAS(h.err.str(), "cannot connect to xlbd");
    }
    {
        // An agent without GET /v1/conntrack/count.
        Harness h;
        h.replies.push_back(ok(vip_object()));
        h.replies.push_back(HttpResponse{404, R"({"error": "no such endpoint"})"});
        EXPECT_EQ(h.run({"backend", "drain", "198.51.100.10:80", "203.0.113.14", "--wait"}), 1);
        EXPECT_HAS(h.err.str(), "xlbd: no such endpoint");
    }
    {
        // A VIP without a connection table: nothing to count.
        Harness h;
        json vip = vip_object();
        vip["spec"] = {{"conntrack", false}};
        h.replies.push_back(ok(vip));
        EXPECT_EQ(h.run({"backend", "drain", "198.51.100.10:80", "203.0.113.14", "--wait"}), 1);
        EXPECT_EQ(h.sent.size(), 1u);
        EXPECT_HAS(h.err.str(), "has no connection table (conntrack: false)");
    }
    {
        Harness h;
        h.interrupt_after_sleeps = 1;
        h.replies.push_back(ok(vip_object()));
        for (int i = 0; i < 3; ++i) h.replies.push_back(ok(count_of(2)));
        EXPECT_EQ(h.run({"backend", "drain", "198.51.100.10:80", "203.0.113.14", "--wait"}), 1);
        EXPECT_HAS(h.err.str(),
                   "interrupted: 203.0.113.14 of 198.51.100.10:80/tcp still has 2 "
                   "active connections; it stays draining");
    }
}

TEST(XlbctlRun, ConntrackFlushJsonIsTheReply) {
    Harness h;
    const json reply{{"matched", 3}, {"deleted", 3}, {"dry_run", false}, {"scan_ms", 1.0}};
    h.replies.push_back(ok(reply));
    EXPECT_EQ(h.run({"conntrack", "flush", "--stale", "--json"}), 0);
    EXPECT_EQ(json::parse(h.out.str()), reply);
    Harness none;
    EXPECT_EQ(none.run({"conntrack", "flush"}), 2);
    EXPECT_TRUE(none.sent.empty());
    EXPECT_HAS(none.err.str(), "xlbctl: conntrack flush: expected at least one selector");
}

// --- the transport ---------------------------------------------------------

TEST(XlbctlHttp, ParsesResponses) {
    auto r = parse_http_response(
        "HTTP/1.1 404 Not Found\r\nContent-Type: application/json\r\nContent-Length: 15\r\n\r\n"
        "{\"error\": \"x\"}\n");
    ASSERT_TRUE(r) << r.error();
    EXPECT_EQ(r->status, 404);
    EXPECT_EQ(r->body, "{\"error\": \"x\"}\n");

    auto chunked = parse_http_response(
        "HTTP/1.1 200 OK\r\nTransfer-Encoding: "
        "chunked\r\n\r\n4\r\n{\"a\"\r\n3\r\n:1}\r\n0\r\n\r\n");
    ASSERT_TRUE(chunked) << chunked.error();
    EXPECT_EQ(chunked->body, "{\"a\":1}");

    auto to_end = parse_http_response("HTTP/1.0 200 OK\r\n\r\nall of it");
    ASSERT_TRUE(to_end);
    EXPECT_EQ(to_end->body, "all of it");

    EXPECT_FALSE(parse_http_response("SSH-2.0-OpenSSH\r\n\r\n"));
    EXPECT_FALSE(parse_http_response("HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nshort"));
    // what is wrong, as an xlb::Error without an errno
    auto empty = parse_http_response("");
    ASSERT_FALSE(empty);
    EXPECT_EQ(empty.error().code, 0);
    EXPECT_EQ(empty.error().message(), "the connection closed without a reply");
}

// A Unix socket server in this process that does one thing per connection.
class SocketServer {
public:
    enum class Mode { kReply, kSilent, kClose, kGarbage };

    SocketServer(const std::string& path, Mode mode, std::string reply = {})
        : path_(path), mode_(mode), reply_(std::move(reply)) {
        fd_ = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        sockaddr_un addr{};
        addr.sun_family = AF_UNIX;
        std::snprintf(addr.sun_path, sizeof(addr.sun_path), "%s", path.c_str());
        EXPECT_EQ(::bind(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
        EXPECT_EQ(::listen(fd_, 4), 0);
        thread_ = std::thread([this] { serve(); });
    }
    ~SocketServer() {
        stop_ = true;
        ::shutdown(fd_, SHUT_RDWR);
        thread_.join();
        ::close(fd_);
        ::unlink(path_.c_str());
    }
    std::string request() const {
        std::lock_guard lock(mu_);
        return request_;
    }

private:
    void serve() {
        while (!stop_) {
            int c = ::accept(fd_, nullptr, nullptr);
            if (c < 0) return;
            char buf[4096];
            std::string in;
            while (in.find("\r\n\r\n") == std::string::npos) {
                ssize_t n = ::recv(c, buf, sizeof(buf), 0);
                if (n <= 0) break;
                in.append(buf, static_cast<std::size_t>(n));
            }
            {
                std::lock_guard lock(mu_);
                request_ = in;
            }
            if (mode_ == Mode::kReply) {
                (void)!::send(c, reply_.data(), reply_.size(), MSG_NOSIGNAL);
            } else if (mode_ == Mode::kGarbage) {
                const char g[] = "garbage garbage\r\n\r\n";
                (void)!::send(c, g, sizeof(g) - 1, MSG_NOSIGNAL);
            } else if (mode_ == Mode::kSilent) {
                while (!stop_) std::this_thread::sleep_for(std::chrono::milliseconds(10));
            }
            ::close(c);
        }
    }

    std::string path_;
    Mode mode_;
    std::string reply_;
    int fd_ = -1;
    std::atomic<bool> stop_{false};
    std::thread thread_;
    mutable std::mutex mu_;
    std::string request_;
};

class XlbctlTransport : public ::testing::Test {
protected:
    void SetUp() override {
        char tmpl[] = "/tmp/xlbctl-transport-XXXXXX";
        ASSERT_NE(::mkdtemp(tmpl), nullptr);
        dir = tmpl;
        path = dir + "/xlbd.sock";
    }
    void TearDown() override { fs::remove_all(dir); }

    std::expected<HttpResponse, TransportError> send(
        HttpRequest r = {"GET", "/v1/status", ""},
        std::chrono::milliseconds timeout = std::chrono::milliseconds(2000)) {
        UnixSocketTransport t(path, timeout);
        return t.send(r);
    }

    std::string dir, path;
};

TEST_F(XlbctlTransport, ExchangesARequest) {
    SocketServer server(path, SocketServer::Mode::kReply,
                        "HTTP/1.1 201 Created\r\nContent-Length: 2\r\n\r\n{}");
    auto r = send({"POST", "/v1/backends?vip=x", R"({"address":"203.0.113.14"})"});
    ASSERT_TRUE(r) << r.error().detail;
    EXPECT_EQ(r->status, 201);
    EXPECT_EQ(r->body, "{}");
    const std::string sent = server.request();
    EXPECT_HAS(sent, "POST /v1/backends?vip=x HTTP/1.1\r\n");
    EXPECT_HAS(sent, "Connection: close\r\n");
    EXPECT_HAS(sent, "Content-Type: application/json\r\nContent-Length: 26\r\n\r\n");
}

TEST_F(XlbctlTransport, SendsTheReasonPercentEncoded) {
    SocketServer server(path, SocketServer::Mode::kReply,
                        "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n{}");
    UnixSocketTransport with(path, std::chrono::milliseconds(2000), "kernel upgrade: 100%");
    ASSERT_TRUE(with.send({"POST", "/v1/reload", ""}));
    EXPECT_HAS(server.request(), "\r\nX-Xlb-Reason: kernel%20upgrade%3A%20100%25\r\n");
    ASSERT_TRUE(send({"POST", "/v1/reload", ""}));
    EXPECT_EQ(server.request().find("X-Xlb-Reason"), std::string::npos) << server.request();
}

TEST_F(XlbctlTransport, MissingSocket) {
    auto r = send();
    ASSERT_FALSE(r);
    EXPECT_EQ(r.error().stage, TransportError::Stage::kConnect);
    EXPECT_EQ(r.error().err, ENOENT);
    EXPECT_EQ(describe(r.error(), path, std::chrono::seconds(30)),
              "cannot connect to xlbd at " + path +
                  ": No such file or directory (is xlbd running? systemctl status xlbd; another "
                  "socket: --socket PATH or XLB_SOCKET)");
}

TEST_F(XlbctlTransport, StaleSocketIsRefused) {
    {
        // Bound and closed without unlinking: what a crashed agent leaves.
        int fd = ::socket(AF_UNIX, SOCK_STREAM, 0);
        sockaddr_un addr{};
        addr.sun_family = AF_UNIX;
        std::snprintf(addr.sun_path, sizeof(addr.sun_path), "%s", path.c_str());
        ASSERT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
        ::close(fd);
    }
    auto r = send();
    ASSERT_FALSE(r);
    EXPECT_EQ(r.error().err, ECONNREFUSED);
    EXPECT_HAS(describe(r.error(), path, std::chrono::seconds(30)),
               "Connection refused (nothing accepts connections on it: is xlbd running?");
}

TEST_F(XlbctlTransport, NotADirectory) {
    { std::ofstream(dir + "/file") << "x"; }
    path = dir + "/file/xlbd.sock";
    auto r = send();
    ASSERT_FALSE(r);
    EXPECT_EQ(r.error().err, ENOTDIR);
}

TEST_F(XlbctlTransport, SilentAgentTimesOut) {
    SocketServer server(path, SocketServer::Mode::kSilent);
    const auto start = std::chrono::steady_clock::now();
    auto r = send({"GET", "/v1/status", ""}, std::chrono::milliseconds(200));
    const auto took = std::chrono::steady_clock::now() - start;
    ASSERT_FALSE(r);
    EXPECT_EQ(r.error().err, ETIMEDOUT);
    EXPECT_LT(took, std::chrono::seconds(2));
    EXPECT_HAS(describe(r.error(), path, std::chrono::milliseconds(200)),
               "did not answer within 0.2 s (is it wedged?");
}

// An agent that answers with something other than a reply.
TEST_F(XlbctlTransport, NoReplyOrNotHttp) {
    struct Case {
        SocketServer::Mode mode;
        TransportError::Stage stage;
        std::string says;
    };
    const Case cases[] = {
        {SocketServer::Mode::kClose, TransportError::Stage::kReceive,
         "lost the connection to xlbd at " + path +
             ": the agent closed the connection without a reply"},
        {SocketServer::Mode::kGarbage, TransportError::Stage::kProtocol,
         "sent a malformed reply: not an HTTP reply"},
    };
    for (const Case& c : cases) {
        SocketServer server(path, c.mode);
        auto r = send();
        ASSERT_FALSE(r);
        EXPECT_EQ(r.error().stage, c.stage);
        EXPECT_HAS(describe(r.error(), path, std::chrono::seconds(30)), c.says);
    }
}

TEST_F(XlbctlTransport, PathTooLong) {
    path = "/tmp/" + std::string(200, 'x');
    auto r = send();
    ASSERT_FALSE(r);
    EXPECT_EQ(r.error().err, ENAMETOOLONG);
}

// A QUIC VIP as GET /v1/vip gives it: config 0 plaintext (2 + 4), config 2
// encrypted (8 + 8) with a key file; two backends with server ids.
json quic_vip(const std::string& key_file) {
    json vip = vip_object();
    vip["vip"] = "198.51.100.10:443/udp";
    vip["backends"][0]["address"] = "203.0.113.14";
    vip["spec"] = {
        {"address", "198.51.100.10"},
        {"port", 443},
        {"protocol", "udp"},
        {"quic",
         {{{"config_id", 0}, {"server_id_length", 2}, {"nonce_length", 4}, {"mode", "plaintext"}},
          {{"config_id", 2},
           {"server_id_length", 8},
           {"nonce_length", 8},
           {"mode", "encrypted"},
           {"key_file", key_file}}}},
        {"backends",
         {{{"address", "203.0.113.14"}, {"weight", 50}, {"server_id", 3}},
          {{"address", "203.0.113.15"}, {"weight", 50}, {"server_id", 0xed793a51d49b8f5fULL}},
          {{"address", "203.0.113.16"}, {"weight", 50}}}}};
    return vip;
}

// The draft's single-pass key in a file only root can read.
class XlbctlQuic : public ::testing::Test {
protected:
    void SetUp() override {
        char tmpl[] = "/tmp/xlbctl-quic-XXXXXX";
        ASSERT_NE(::mkdtemp(tmpl), nullptr);
        dir_ = tmpl;
        key_ = dir_ + "/key";
        std::ofstream(key_) << "8f95f09245765f80256934e50c66207f\n";
        ASSERT_EQ(::chmod(key_.c_str(), 0600), 0);
    }
    void TearDown() override { fs::remove_all(dir_); }
    std::string dir_, key_;
};

TEST_F(XlbctlQuic, CidEncodesTheServerIdUnderTheFirstConfig) {
    Harness h;
    h.replies.push_back(ok(quic_vip(key_)));
    EXPECT_EQ(
        h.run({"quic", "cid", "198.51.100.10:443", "--server-id", "3", "--nonce", "0a:0b:0c:0d"}),
        0)
        << h.err.str();
    ASSERT_EQ(h.sent.size(), 1u);
    // A QUIC VIP's key without /proto is UDP.
    EXPECT_EQ(h.sent[0], (HttpRequest{"GET", "/v1/vip?vip=198.51.100.10%3A443%2Fudp", ""}));
    // config 0, 6 octets after the first; server id 3 in two octets; the nonce
    EXPECT_EQ(h.out.str(), "0600030a0b0c0d\n");
    EXPECT_EQ(h.err.str(), "");

    // A random nonce: another CID each time, the same server id in it.
    Harness r1, r2;
    r1.replies.push_back(ok(quic_vip(key_)));
    r2.replies.push_back(ok(quic_vip(key_)));
    ASSERT_EQ(r1.run({"quic", "cid", "198.51.100.10:443/udp", "--server-id", "3"}), 0);
    ASSERT_EQ(r2.run({"quic", "cid", "198.51.100.10:443/udp", "--server-id", "3"}), 0);
    EXPECT_EQ(r1.out.str().substr(0, 6), "060003");
    EXPECT_EQ(r1.out.str().size(), 15u);
    EXPECT_NE(r1.out.str(), r2.out.str());
}

TEST_F(XlbctlQuic, CidOfAnEncryptedConfigReadsItsKeyFile) {
    if (::geteuid() != 0) GTEST_SKIP() << "key files must be owned by root";
    Harness h;
    h.replies.push_back(ok(quic_vip(key_)));
    ASSERT_EQ(h.run({"quic", "cid", "198.51.100.10:443", "--server-id", "17111772382304636767",
                     "--config-id", "2", "--nonce", "ee080dbf48c0d1e5", "--json"}),
              0)
        << h.err.str();
    const json doc = json::parse(h.out.str());
    // draft-ietf-quic-load-balancers' single-pass test vector
    EXPECT_EQ(doc["cid"], "504dd2d05a7b0de9b2b9907afb5ecf8cc3");
    EXPECT_EQ(doc["config_id"], 2);
    EXPECT_EQ(doc["mode"], "encrypted");
    EXPECT_EQ(doc["backend"], "203.0.113.15");

    // --key-file instead of the config's own.
    Harness k;
    k.replies.push_back(ok(quic_vip("/nonexistent/key")));
    ASSERT_EQ(k.run({"quic", "cid", "198.51.100.10:443", "--server-id", "17111772382304636767",
                     "--config-id", "2", "--nonce", "ee080dbf48c0d1e5", "--key-file", key_}),
              0)
        << k.err.str();
    EXPECT_EQ(k.out.str(), "504dd2d05a7b0de9b2b9907afb5ecf8cc3\n");
}

TEST_F(XlbctlQuic, DecodeNamesTheBackendOrTheFallback) {
    if (::geteuid() != 0) GTEST_SKIP() << "key files must be owned by root";
    Harness h;
    h.replies.push_back(ok(quic_vip(key_)));
    ASSERT_EQ(h.run({"quic", "decode", "198.51.100.10:443", "504dd2d05a7b0de9b2b9907afb5ecf8cc3"}),
              0)
        << h.err.str();
    EXPECT_HAS(h.out.str(), "server id  17111772382304636767 (0xed793a51d49b8f5f)");
    EXPECT_HAS(h.out.str(), "nonce      ee080dbf48c0d1e5");
    EXPECT_HAS(h.out.str(), "backend    203.0.113.15");

    // Plaintext, as --json; the backend's status from the reply.
    Harness p;
    p.replies.push_back(ok(quic_vip(key_)));
    ASSERT_EQ(p.run({"quic", "decode", "198.51.100.10:443", "0x0600030a0b0c0d"}), 0);
    Harness pj;
    pj.replies.push_back(ok(quic_vip(key_)));
    ASSERT_EQ(pj.run({"quic", "decode", "198.51.100.10:443", "0600030a0b0c0d", "--json"}), 0);
    EXPECT_HAS(p.out.str(), "backend    203.0.113.14 (active, healthy)");
    const json doc = json::parse(pj.out.str());
    EXPECT_EQ(doc["server_id"], 3);
    EXPECT_EQ(doc["config_id"], 0);
    EXPECT_EQ(doc["nonce"], "0a0b0c0d");
    EXPECT_EQ(doc["backend"], "203.0.113.14");
    EXPECT_TRUE(doc["fallback"].is_null());

    // The fallbacks, each by its reason's name.
    for (const auto& [cid, reason] :
         std::vector<std::pair<std::string, std::string>>{{"0600090a0b0c0d", "unknown_server"},
                                                          {"2600030a0b0c0d", "unknown_config"},
                                                          {"e600030a0b0c0d", "unknown_config"},
                                                          {"0600030a0b0c", "bad_length"}}) {
        Harness f;
        f.replies.push_back(ok(quic_vip(key_)));
        ASSERT_EQ(f.run({"quic", "decode", "198.51.100.10:443", cid, "--json"}), 0) << cid;
        EXPECT_EQ(json::parse(f.out.str())["fallback"], reason) << cid;
        EXPECT_TRUE(json::parse(f.out.str())["backend"].is_null()) << cid;
        Harness t;
        t.replies.push_back(ok(quic_vip(key_)));
        ASSERT_EQ(t.run({"quic", "decode", "198.51.100.10:443", cid}), 0) << cid;
        EXPECT_HAS(t.out.str(), "balanced by its 5-tuple, " + reason);
    }
}

TEST_F(XlbctlQuic, ClearErrors) {
    auto fails = [&](json vip, const std::vector<std::string>& args, int code,
                     const std::string& part) {
        Harness h;
        h.replies.push_back(ok(std::move(vip)));
        EXPECT_EQ(h.run(args), code) << h.err.str();
        EXPECT_HAS(h.err.str(), part);
        EXPECT_EQ(h.out.str(), "");
    };
    json plain_vip = vip_object();
    fails(plain_vip, {"quic", "cid", "198.51.100.10:80/tcp", "--server-id", "1"}, 1,
          "has no quic configuration");
    fails(quic_vip(key_),
          {"quic", "cid", "198.51.100.10:443", "--server-id", "1", "--config-id", "5"}, 1,
          "--config-id: VIP 198.51.100.10:443/udp has no config 5; its configs: 0, 2");
    fails(quic_vip(key_),
          {"quic", "cid", "198.51.100.10:443", "--server-id", "1", "--nonce", "0a0b"}, 1,
          "--nonce: found 2 octets");
    fails(quic_vip(key_), {"quic", "cid", "198.51.100.10:443", "--server-id", "65536"}, 1,
          "server id 65536 does not fit in 2 octets");
    fails(quic_vip(dir_ + "/missing"),
          {"quic", "cid", "198.51.100.10:443", "--server-id", "1", "--config-id", "2"}, 1,
          "open QUIC-LB key file " + dir_ + "/missing: No such file or directory");
    fails(quic_vip(""),
          {"quic", "decode", "198.51.100.10:443", "504dd2d05a7b0de9b2b9907afb5ecf8cc3"}, 1,
          "names no key_file: give its key with --key-file PATH");
    ASSERT_EQ(::chmod(key_.c_str(), 0644), 0);
    fails(quic_vip(key_),
          {"quic", "decode", "198.51.100.10:443", "504dd2d05a7b0de9b2b9907afb5ecf8cc3"}, 1,
          "chmod 600 " + key_);

    // Usage: nothing sent.
    for (const auto& [args, part] : std::vector<std::pair<std::vector<std::string>, std::string>>{
             {{"quic", "cid", "198.51.100.10:443", "--server-id", "x"}, "--server-id: found 'x'"},
             {{"quic", "cid", "198.51.100.10:443", "--server-id", "1", "--config-id", "7"},
              "--config-id: found '7', expected a config id 0-6"},
             {{"quic", "cid", "198.51.100.10:443", "--server-id", "1", "--nonce", "abc"},
              "--nonce: read hex \"abc\": odd number of hex digits"},
             {{"quic", "decode", "198.51.100.10:443", "06:00:0g"}, "CID: read hex"},
             {{"quic", "cid", "198.51.100.10:443"}, "--server-id"}}) {
        Harness h;
        EXPECT_EQ(h.run(args), 2) << h.err.str();
        EXPECT_HAS(h.err.str(), part);
        EXPECT_TRUE(h.sent.empty());
    }
}

TEST_F(XlbctlQuic, WarnsWhenNoBackendHasTheServerId) {
    Harness h;
    h.replies.push_back(ok(quic_vip(key_)));
    ASSERT_EQ(h.run({"quic", "cid", "198.51.100.10:443", "--server-id", "9"}), 0);
    EXPECT_HAS(h.err.str(), "warning: no backend of VIP 198.51.100.10:443/udp has server_id 9");
    EXPECT_EQ(h.out.str().substr(0, 6), "060009");
}

}  // namespace
}  // namespace xlb::xlbctl
