// SPDX-License-Identifier: Apache-2.0
// Real TCP with health checks: the lab's VIPs get an HTTP check of GET
// /healthz every 500 ms (timeout 250 ms, jitter 50 ms, thresholds 2 and 2).
// A backend's /healthz answers with the status in
// /run/xlb-lab/P/health-bN ("500", "429 6" = 429 with Retry-After: 6), 200
// without that file; its GET / keeps answering with its name, so the client
// sees which backend took each connection.
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <thread>

#include "tcp_lab.h"

namespace xlb::e2e_tcp {
namespace {

// interval x unhealthy_threshold + timeout + jitter x threshold
constexpr double kDetectMs = 500 * 2 + 250 + 50 * 2;
// a table build and publish, with room for a loaded 2-core machine
constexpr double kPublishMarginMs = 500;

class HealthE2e : public ::testing::Test {
protected:
    void start(const std::string& extra = "") {
        if (geteuid() != 0) GTEST_SKIP() << "needs root (network namespaces, BPF)";
        try {
            lab_.up(3, "--health " + extra);
            lab_.agent_start();
        } catch (const std::exception& e) {
            FAIL() << e.what();
        }
        // every backend judged healthy, no start-up panic
        auto t0 = Clock::now();
        if (!wait_web(
                [](const nlohmann::json& v) {
                    return v.value("backends_healthy", -1) == 3 && !v.value("panic", true);
                },
                10s))
            FAIL() << "backends not all healthy 10 s after start: " << web_status().dump();
        std::printf("all backends healthy %.0f ms after the agent was ready\n",
                    std::chrono::duration<double, std::milli>(Clock::now() - t0).count());
    }

    // The web VIP's summary from GET /v1/status (null when unreadable).
    nlohmann::json web_status() {
        auto parsed = nlohmann::json::parse(lab_.api("GET", "/v1/status").body, nullptr, false);
        if (parsed.is_discarded() || !parsed.contains("vips")) return nullptr;
        for (const auto& v : parsed["vips"])
            if (v.value("vip", "") == vip_key4()) return v;
        return nullptr;
    }

    // Waits until the web VIP's summary satisfies pred.
    template <typename Pred>
    bool wait_web(Pred pred, std::chrono::milliseconds timeout) {
        auto deadline = Clock::now() + timeout;
        do {
            nlohmann::json v = web_status();
            if (v.is_object() && pred(v)) return true;
            std::this_thread::sleep_for(50ms);
        } while (Clock::now() < deadline);
        return false;
    }

    void TearDown() override {
        if (HasFailure()) {
            std::string log = lab_.agent_log();
            if (log.size() > 4000) log = log.substr(log.size() - 4000);
            std::printf("---- xlbd log (tail) ----\n%s\n", log.c_str());
        }
    }

    void set_health(int backend, const std::string& answer) {
        std::string path = lab_.state_dir() + "/health-b" + std::to_string(backend);
        if (answer.empty())
            std::remove(path.c_str());
        else
            std::ofstream(path) << answer << "\n";
    }

    Lab lab_;
};

// A backend's server killed: after the detection time no new connection
// fails, and none reaches it.
TEST_F(HealthE2e, FailoverAfterServerKilled) {
    start();
    if (HasFatalFailure()) return;
    std::ifstream pid_file(lab_.state_dir() + "/httpd-b2.pid");
    pid_t pid = 0;
    ASSERT_TRUE(pid_file >> pid) << "no pid file for b2's server";
    auto t0 = Clock::now();
    ASSERT_EQ(kill(pid, SIGKILL), 0);

    std::map<std::string, int> before, after;
    double last_failure_ms = -1;
    int failures = 0;
    const double bound = kDetectMs + kPublishMarginMs;
    while (Clock::now() - t0 < 5s) {
        std::string name = get_backend_name(lab_.client_ns(), kVip4);
        double at = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
        bool failed = name.rfind("error", 0) == 0;
        if (failed) {
            ++failures;
            last_failure_ms = at;
            name = "error";
        }
        (at <= bound ? before : after)[name]++;
        std::this_thread::sleep_for(5ms);
    }
    std::printf("b2's server killed; connections in the first %.0f ms: %s\n", bound,
                format_counts(before).c_str());
    std::printf("after that: %s\n", format_counts(after).c_str());
    std::printf("%d failed connections, the last %.0f ms after the kill (bound %.0f ms)\n",
                failures, last_failure_ms, bound);
    EXPECT_EQ(after["error"], 0) << "connections still fail after the detection time";
    EXPECT_EQ(after["b2"], 0);
    EXPECT_GT(after["b1"] + after["b3"], 100);
    auto backends = nlohmann::json::parse(lab_.api("GET", "/v1/backends?vip=" + vip_key4()).body,
                                          nullptr, false);
    std::string health = "?";
    if (!backends.is_discarded() && backends.contains("backends"))
        for (const auto& b : backends["backends"])
            if (b.value("address", "") == backend_v4(2)) health = b.value("health", "?");
    EXPECT_EQ(health, "unhealthy") << backends.dump();
}

// Two of three down, panic threshold 0.5: traffic reaches all three.
TEST_F(HealthE2e, PanicSpreadsOverAllBackends) {
    start();
    if (HasFatalFailure()) return;
    set_health(2, "500");
    set_health(3, "500");
    ASSERT_TRUE(wait_web([](const nlohmann::json& v) { return v.value("panic", false); }, 5s))
        << web_status().dump();
    std::this_thread::sleep_for(200ms);
    auto counts = count_backends(lab_.client_ns(), kVip4, 300);
    std::printf("b2, b3 unhealthy (healthy share 25%% < 50%%), in panic: %s\n",
                format_counts(counts).c_str());
    EXPECT_EQ(counts["error"], 0);
    EXPECT_GT(counts["b1"], 0);
    EXPECT_GT(counts["b2"], 0);
    EXPECT_GT(counts["b3"], 0);
}

// The same with panic threshold 0: only the healthy backend takes traffic.
TEST_F(HealthE2e, ZeroPanicThresholdUsesOnlyHealthyBackends) {
    start("--panic-threshold 0");
    if (HasFatalFailure()) return;
    set_health(2, "500");
    set_health(3, "500");
    ASSERT_TRUE(
        wait_web([](const nlohmann::json& v) { return v.value("backends_healthy", -1) == 1; }, 5s))
        << web_status().dump();
    std::this_thread::sleep_for(kPublishMarginMs * 1ms);
    auto counts = count_backends(lab_.client_ns(), kVip4, 300);
    std::printf("b2, b3 unhealthy, panic threshold 0: %s\n", format_counts(counts).c_str());
    EXPECT_EQ(counts["error"], 0);
    EXPECT_EQ(counts["b1"], 300);
    EXPECT_FALSE(web_status().value("panic", true)) << web_status().dump();
}

// via_vip: the probe goes to the VIP, encapsulated to the backend like
// client traffic. A backend that stops decapsulating turns unhealthy and
// leaves the table although its own address still answers the same check.
TEST_F(HealthE2e, ProbeThroughTheVipFindsABackendThatStoppedDecapsulating) {
    start("--via-vip");
    if (HasFatalFailure()) return;
    const std::string b2_health = "http://" + backend_v4(2) + "/healthz";
    auto direct = [&] {  // the same check at b2's own address, from the LB
        return run("ip netns exec " + lab_.prefix() +
                   "-lb curl -s -o /dev/null -w '%{http_code}' "
                   "--max-time 2 " +
                   b2_health)
            .out;
    };
    ASSERT_EQ(direct(), "200");
    // b2's decapsulator detaches on SIGTERM
    std::ifstream pid_file(lab_.state_dir() + "/decap-b2.pid");
    pid_t decap = 0;
    ASSERT_TRUE(pid_file >> decap) << "no decap-b2.pid";
    const auto t0 = Clock::now();
    ASSERT_EQ(::kill(decap, SIGTERM), 0);
    ASSERT_TRUE(
        wait_web([](const nlohmann::json& v) { return v.value("backends_healthy", -1) == 2; }, 5s))
        << web_status().dump();
    const double ms = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
    std::printf(
        "b2 stopped decapsulating: unhealthy through the VIP after %.0f ms (bound %.0f); "
        "its own address still answers %s\n",
        ms, kDetectMs + kPublishMarginMs, direct().c_str());
    EXPECT_LT(ms, kDetectMs + kPublishMarginMs);
    EXPECT_EQ(direct(), "200") << "the direct check would still pass";
    std::this_thread::sleep_for(kPublishMarginMs * 1ms);
    auto counts = count_backends(lab_.client_ns(), kVip4, 200);
    std::printf("after: %s\n", format_counts(counts).c_str());
    EXPECT_EQ(counts["error"], 0);
    EXPECT_EQ(counts["b2"], 0);
}

// A backend whose /healthz answers 429 with Retry-After gets less new
// traffic until the pushback ends.
TEST_F(HealthE2e, RateLimitedBackendGetsLessTrafficUntilPushbackEnds) {
    start();
    if (HasFatalFailure()) return;
    auto base = count_backends(lab_.client_ns(), kVip4, 300);
    std::printf("before: %s\n", format_counts(base).c_str());
    set_health(3, "429 3");
    std::this_thread::sleep_for(1500ms);  // at least two probes answered 429
    auto biased = count_backends(lab_.client_ns(), kVip4, 300);
    set_health(3, "");
    auto t_lifted = Clock::now();
    std::printf("b3 answering 429, Retry-After 3: %s\n", format_counts(biased).c_str());
    EXPECT_EQ(biased["error"], 0);
    // weight 200 x 0.1 against 100 + 100: about 9%
    EXPECT_LT(biased["b3"], 300 * 0.20) << "b3 is not biased down";
    // the bias lasts max(penalty, Retry-After) = 5 s after the last 429
    std::this_thread::sleep_for(7s);
    auto after = count_backends(lab_.client_ns(), kVip4, 300);
    std::printf("%.1f s after the last 429: %s\n",
                std::chrono::duration<double>(Clock::now() - t_lifted).count(),
                format_counts(after).c_str());
    EXPECT_GT(after["b3"], 300 * 0.40) << "b3 did not get its weight back";
}

}  // namespace
}  // namespace xlb::e2e_tcp
