// SPDX-License-Identifier: Apache-2.0
// Health checking wired into xlbd, end to end: the real agent in the lab's lb
// namespace probes real TCP servers that listen on the backends' addresses in
// the router namespace (lab.h). A server is "killed" by closing its listening
// socket (connects are refused, as when the process dies) and restarted by
// listening again. What the agent decides is read through its API: health
// verdicts, table membership, effective weights, epochs, generations.
//
// Short intervals (200 ms) keep the tests fast; the figures they measure
// (detection time, slow-start ramp) are printed as "[ measured ]" lines.
// Needs root (namespaces, XDP, bpffs).
#include <gtest/gtest.h>
#include <linux/magic.h>
#include <signal.h>
#include <sys/statfs.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <map>
#include <memory>
#include <sstream>
#include <tuple>

#include "lab.h"
#include "servers.h"

namespace xlb::e2e {
namespace {

constexpr std::uint16_t kServerPort = 8080;
constexpr auto kReadyTimeout = 15s;
// The check every test uses: tcp on kServerPort every 200 ms, 100 ms
// timeout, no jitter, 3 failures out, 2 passes in.
constexpr auto kInterval = 200ms;
constexpr auto kTimeout = 100ms;
constexpr int kUnhealthyThreshold = 3;
constexpr int kHealthyThreshold = 2;
// Slow start: 2 s window, floor 10%: 10 steps of 200 ms (the minimum count).
constexpr auto kSlowStartWindow = 2s;

const std::vector<std::string> kBackends = {"203.0.113.21", "203.0.113.22", "203.0.113.23"};

struct HealthVip {
    std::string address;
    std::string name;
    double panic_threshold = 0.5;
    std::string on_unhealthy = "reschedule";
    std::vector<std::string> backends = kBackends;
    std::string key() const { return address + ":80/tcp"; }
};

std::string render_config(const Lab& lab, const std::vector<HealthVip>& vips) {
    std::ostringstream y;
    y << render_settings(lab, "xlb_health_e2e_tests", {});
    for (const HealthVip& v : vips) {
        y << "  - address: " << v.address << "\n"
          << "    port: 80\n"
          << "    name: " << v.name << "\n"
          << "    ring_size: 4093\n"
          << "    panic_threshold: " << v.panic_threshold << "\n"
          << "    on_unhealthy: " << v.on_unhealthy << "\n"
          << "    slow_start: {window: " << kSlowStartWindow.count() << "s, floor: 0.1}\n"
          << "    health_check:\n"
          << "      type: tcp\n"
          << "      port: " << kServerPort << "\n"
          << "      interval: " << kInterval.count() << "ms\n"
          << "      timeout: " << kTimeout.count() << "ms\n"
          << "      jitter: 0s\n"
          << "      unhealthy_threshold: " << kUnhealthyThreshold << "\n"
          << "      healthy_threshold: " << kHealthyThreshold << "\n"
          << "    backends:\n";
        for (const std::string& b : v.backends)
            y << "      - {address: " << b << ", weight: 100}\n";
    }
    return y.str();
}

class HealthE2E : public ::testing::Test {
protected:
    void SetUp() override {
        if (::geteuid() != 0) GTEST_SKIP() << "needs root: network namespaces, XDP, bpffs";
        lab_ = new_lab_up();
        add_router_addresses(*lab_, kBackends);
        for (const std::string& b : kBackends)
            servers_[b] = std::make_unique<TcpServer>(lab_->router_ns(), b, kServerPort);
        config_path_ = lab_->tmp() + "/xlbd.yaml";
        api_ = std::make_unique<Api>(lab_->tmp() + "/run/xlbd.sock");
    }

    void TearDown() override {
        if (agent_) {
            if (HasFailure()) print_log();
            agent_.reset();  // SIGKILL
        }
        servers_.clear();  // before the namespaces go
        lab_.reset();
    }

    void print_log() {
        std::printf("----- xlbd log -----\n%s----- end of xlbd log -----\n", agent_->log().c_str());
    }

    void start_agent(const std::vector<HealthVip>& vips) {
        write_file(config_path_, render_config(*lab_, vips));
        agent_ = std::make_unique<AgentProcess>(*lab_, config_path_, lab_->tmp() + "/xlbd.log");
        agent_->start();
        wait_ready();
    }

    void wait_ready() { wait_agent_ready(*agent_, *api_, kReadyTimeout); }

    json vip(const std::string& key) {
        Reply r = api_->get("/v1/vip?vip=" + url_encode(key));
        if (r.status != 200) throw std::runtime_error("/v1/vip " + key + ": " + r.text);
        return r.body;
    }
    static json backend_of(const json& vip, const std::string& address) {
        for (const json& b : vip["backends"])
            if (b["address"] == address) return b;
        throw std::runtime_error("no backend " + address + " in " + vip.dump());
    }
    json backend(const std::string& key, const std::string& address) {
        return backend_of(vip(key), address);
    }

    // Polls the VIP (every 10 ms) until pred holds of its published state;
    // its time in ms, or -1 when it did not happen within `limit`. A snapshot
    // taken while a table is being built shows the new plan (panic, health)
    // next to the old table's members, so only published ones count.
    double wait_for(const std::string& key, const std::function<bool(const json&)>& pred,
                    std::chrono::milliseconds limit, json* last = nullptr) {
        const auto t0 = Clock::now();
        json v;
        while (Clock::now() - t0 < limit) {
            v = vip(key);
            if (v["published"] == true && pred(v)) {
                if (last) *last = v;
                return ms_since(t0);
            }
            std::this_thread::sleep_for(10ms);
        }
        if (last) *last = v;
        return -1;
    }

    static bool all_healthy_in_table(const json& v) {
        if (v["starting"] != false) return false;
        for (const json& b : v["backends"])
            if (b["health"] != "healthy" || b["in_table"] != true || b["weight_factor"] != 1.0)
                return false;
        return true;
    }

    std::unique_ptr<Lab> lab_;
    std::map<std::string, std::unique_ptr<TcpServer>> servers_;
    std::string config_path_;
    std::unique_ptr<Api> api_;
    std::unique_ptr<AgentProcess> agent_;
};

TEST_F(HealthE2E, DeadServerLeavesTheTableAndComesBackThroughSlowStart) {
    for (auto& [addr, server] : servers_) server->start();
    const HealthVip resched{"198.51.100.20", "resched", 0.5, "reschedule"};
    const HealthVip keep{"198.51.100.21", "keep", 0.5, "keep"};
    start_agent({resched, keep});

    // First verdicts: every backend healthy, at full weight (the pool the
    // agent starts with is not slow-started), start-up panic over.
    json v;
    const auto ready = Clock::now();
    for (const HealthVip& h : {resched, keep}) {
        const double ms = wait_for(h.key(), all_healthy_in_table, 5s, &v);
        ASSERT_GE(ms, 0) << "first verdicts not in: " << v.dump(2);
        EXPECT_EQ(v["panic"], false);
        EXPECT_EQ(v["panic_reason"], "none");
    }
    MEASURED("first verdicts for 2 VIPs x 3 backends in %.0f ms after ready", ms_since(ready));

    const std::string victim = kBackends[0];
    const json before_r = backend(resched.key(), victim);
    const json before_k = backend(keep.key(), victim);
    EXPECT_EQ(before_r["last_probe"]["outcome"], "passed");
    EXPECT_GE(before_r["last_probe"]["latency_ms"].get<double>(), 0.0);
    EXPECT_EQ(before_r["last_failure"], "");

    // Kill it: it must leave both VIPs' tables within interval x threshold
    // (+ timeout, + one interval of phase: the kill falls anywhere between
    // two probes).
    const auto killed = Clock::now();
    servers_[victim]->stop();
    auto out_of_table = [&](const json& vj) {
        const json b = backend_of(vj, victim);
        return b["in_table"] == false && b["health"] == "unhealthy";
    };
    const double detect_ms = wait_for(resched.key(), out_of_table, 5s, &v);
    ASSERT_GE(detect_ms, 0) << "still in the table: " << v.dump(2);
    const double bound_ms = std::chrono::duration<double, std::milli>(
                                kInterval * kUnhealthyThreshold + kTimeout + kInterval)
                                .count();
    const double floor_ms =
        std::chrono::duration<double, std::milli>(kInterval * (kUnhealthyThreshold - 1)).count();
    MEASURED(
        "killed backend out of the table after %.0f ms (interval %lld ms x threshold %d = %lld ms; "
        "bound with timeout and probe phase %.0f ms)",
        detect_ms, static_cast<long long>(kInterval.count()), kUnhealthyThreshold,
        static_cast<long long>((kInterval * kUnhealthyThreshold).count()), bound_ms);
    EXPECT_GE(detect_ms, floor_ms)
        << "ejected before " << kUnhealthyThreshold << " failed probes could run";
    EXPECT_LE(detect_ms, bound_ms + 300) << "slower than the thresholds allow";
    ASSERT_GE(wait_for(keep.key(), out_of_table, 2s, &v), 0) << v.dump(2);

    const json after_r = backend(resched.key(), victim);
    const json after_k = backend(keep.key(), victim);
    EXPECT_EQ(after_r["last_failure"], "refused") << after_r.dump(2);
    EXPECT_NE(after_r["last_failure_detail"], "");
    EXPECT_EQ(after_r["last_probe"]["outcome"], "refused");
    EXPECT_NE(after_r["health_reason"].get<std::string>().find("healthy -> unhealthy"),
              std::string::npos)
        << after_r.dump(2);
    // reschedule: a new generation, its flows re-pick; keep: same generation, still live
    EXPECT_GT(after_r["generation"].get<int>(), before_r["generation"].get<int>());
    EXPECT_EQ(after_r["live"], false);
    EXPECT_EQ(after_k["generation"], before_k["generation"]);
    EXPECT_EQ(after_k["live"], true);
    EXPECT_NE(agent_->log().find("backend " + victim + ": healthy -> unhealthy"), std::string::npos)
        << "no transition line in the log";
    MEASURED("kill to the reschedule VIP's new generation seen: %.0f ms", ms_since(killed));

    // Restart it: back after healthy_threshold passes, ramping from the floor.
    const std::uint64_t epoch_back_start = vip(resched.key())["epoch"].get<std::uint64_t>();
    servers_[victim]->start();
    const auto restarted = Clock::now();
    const double back_ms = wait_for(
        resched.key(), [&](const json& vj) { return backend_of(vj, victim)["in_table"] == true; },
        5s, &v);
    ASSERT_GE(back_ms, 0) << v.dump(2);
    MEASURED(
        "restarted backend back in the table after %.0f ms (healthy_threshold %d x interval %lld "
        "ms)",
        back_ms, kHealthyThreshold, static_cast<long long>(kInterval.count()));

    // Follow the ramp: every distinct effective weight and the epoch it came with.
    const std::uint32_t full = 100 * 100;
    std::vector<std::pair<std::uint32_t, std::uint64_t>> ramp;  // (effective weight, epoch)
    const auto ramp_deadline = Clock::now() + kSlowStartWindow + 2s;
    while (Clock::now() < ramp_deadline) {
        const json vj = vip(resched.key());
        const json b = backend_of(vj, victim);
        const std::uint32_t w = b["effective_weight"].get<std::uint32_t>();
        const std::uint64_t epoch = vj["epoch"].get<std::uint64_t>();
        if (b["in_table"] == true && (ramp.empty() || ramp.back().first != w))
            ramp.emplace_back(w, epoch);
        if (w == full) break;
        std::this_thread::sleep_for(10ms);
    }
    const double ramp_ms = ms_since(restarted) - back_ms;
    std::string steps;
    for (const auto& [w, e] : ramp) steps += std::to_string(w) + "@" + std::to_string(e) + " ";
    const std::uint64_t epoch_end = vip(resched.key())["epoch"].get<std::uint64_t>();
    MEASURED(
        "slow start: %zu effective weights seen over %.0f ms (window %lld s): %s; %llu publishes "
        "from restart to full weight",
        ramp.size(), ramp_ms, static_cast<long long>(kSlowStartWindow.count()), steps.c_str(),
        static_cast<unsigned long long>(epoch_end - epoch_back_start));
    ASSERT_FALSE(ramp.empty());
    EXPECT_LE(ramp.front().first, full / 4) << "did not start near the floor: " << steps;
    EXPECT_EQ(ramp.back().first, full) << "never reached full weight: " << steps;
    EXPECT_GE(ramp.size(), 5u) << "too few steps seen: " << steps;
    EXPECT_TRUE(std::is_sorted(ramp.begin(), ramp.end())) << "the ramp went down: " << steps;
    EXPECT_GE(epoch_end - epoch_back_start, 5u) << "each step is a publish";

    // The health history has the three changes, oldest first, with the
    // probes that caused them and times in order; a steady backend has one.
    Reply h =
        api_->get("/v1/backend/history?vip=" + url_encode(resched.key()) + "&address=" + victim);
    ASSERT_EQ(h.status, 200) << h.text;
    const json& changes = h.body["history"];
    ASSERT_EQ(changes.size(), 3u) << h.body.dump(2);
    const std::vector<std::tuple<const char*, const char*, const char*>> expected = {
        {"unknown", "healthy", "passed"},
        {"healthy", "unhealthy", "refused"},
        {"unhealthy", "healthy", "passed"}};
    for (std::size_t i = 0; i < 3; ++i) {
        EXPECT_EQ(changes[i]["from"], std::get<0>(expected[i])) << i;
        EXPECT_EQ(changes[i]["to"], std::get<1>(expected[i])) << i;
        EXPECT_EQ(changes[i]["probe"], std::get<2>(expected[i])) << i;
    }
    EXPECT_LT(changes[0]["time"].get<std::string>(), changes[1]["time"].get<std::string>());
    EXPECT_LT(changes[1]["time"].get<std::string>(), changes[2]["time"].get<std::string>());
    EXPECT_NE(changes[2]["reason"].get<std::string>().find("slow start"), std::string::npos)
        << changes[2];
    Reply steady = api_->get("/v1/backend/history?vip=" + url_encode(resched.key()) +
                             "&address=" + kBackends[1]);
    ASSERT_EQ(steady.status, 200) << steady.text;
    EXPECT_EQ(steady.body["history"].size(), 1u) << steady.body.dump(2);
}

TEST_F(HealthE2E, TwoOfThreeDownPanicsAtHalfAndNotAtZero) {
    servers_[kBackends[0]]->start();  // the other two never answer
    const HealthVip panics{"198.51.100.30", "panics", 0.5, "reschedule"};
    const HealthVip never{"198.51.100.31", "never", 0.0, "reschedule"};
    start_agent({panics, never});

    // Settled: every backend judged (starting over), one healthy of three.
    auto settled = [](const json& vj) {
        if (vj["starting"] != false) return false;
        for (const json& b : vj["backends"])
            if (b["health"] == "unknown") return false;
        return true;
    };
    json v;
    const double settle_ms = wait_for(panics.key(), settled, 5s, &v);
    ASSERT_GE(settle_ms, 0) << v.dump(2);
    MEASURED("first verdicts (1 up, 2 refused) in %.0f ms after ready", settle_ms);

    // panic_threshold 0.5, healthy share 1/3: panic, all three take traffic.
    v = vip(panics.key());
    EXPECT_EQ(v["panic"], true) << v.dump(2);
    EXPECT_EQ(v["panic_reason"], "below_threshold");
    EXPECT_NEAR(v["healthy_share"].get<double>(), 1.0 / 3.0, 1e-9);
    EXPECT_GE(v["panic_entries"].get<int>(), 1);
    for (const std::string& b : kBackends) {
        const json bj = backend_of(v, b);
        EXPECT_EQ(bj["in_table"], true) << bj.dump(2);
        EXPECT_GT(bj["slots"].get<int>(), 0) << bj.dump(2);
    }
    EXPECT_EQ(backend_of(v, kBackends[1])["health"], "unhealthy");
    EXPECT_EQ(backend_of(v, kBackends[1])["last_failure"], "refused");

    // panic_threshold 0: only the healthy one.
    ASSERT_GE(wait_for(never.key(), settled, 3s, &v), 0) << v.dump(2);
    v = vip(never.key());
    EXPECT_EQ(v["panic"], false) << v.dump(2);
    EXPECT_EQ(backend_of(v, kBackends[0])["in_table"], true);
    EXPECT_EQ(backend_of(v, kBackends[0])["slots"], 4093);
    EXPECT_EQ(backend_of(v, kBackends[1])["in_table"], false);
    EXPECT_EQ(backend_of(v, kBackends[2])["in_table"], false);

    EXPECT_NE(agent_->log().find("VIP " + panics.key() + ": in panic"), std::string::npos)
        << "panic entry not logged";

    // The metrics say the same.
    Reply m = http_get_in_netns(lab_->lb_ns(), "127.0.0.1", 9464, "/metrics");
    ASSERT_EQ(m.status, 200) << m.text;
    EXPECT_NE(m.text.find("xlb_vip_panic{vip=\"" + panics.key() + "\"} 1"), std::string::npos);
    EXPECT_NE(m.text.find("xlb_vip_panic{vip=\"" + never.key() + "\"} 0"), std::string::npos);
    EXPECT_NE(m.text.find("xlb_vip_panic_entries_total{vip=\"" + panics.key() + "\"} 1"),
              std::string::npos)
        << m.text;
    EXPECT_NE(m.text.find("xlb_health_probes_total{vip=\"" + panics.key() + "\",backend=\"" +
                          kBackends[1] + "\",outcome=\"refused\"}"),
              std::string::npos);
    // A histogram: the healthy backend's answered probes are counted.
    const std::string latency_count = "xlb_health_probe_latency_seconds_count{vip=\"" +
                                      panics.key() + "\",backend=\"" + kBackends[0] + "\"} ";
    const std::size_t at = m.text.find(latency_count);
    ASSERT_NE(at, std::string::npos) << m.text;
    EXPECT_GT(std::stoull(m.text.substr(at + latency_count.size())), 0u) << m.text;

    // One comes back: 2 of 3 healthy is above 0.5, panic over, the dead one out.
    servers_[kBackends[1]]->start();
    const double calm_ms = wait_for(
        panics.key(),
        [&](const json& vj) {
            return vj["panic"] == false && backend_of(vj, kBackends[1])["health"] == "healthy";
        },
        5s, &v);
    ASSERT_GE(calm_ms, 0) << v.dump(2);
    MEASURED("panic left %.0f ms after a second backend came back", calm_ms);
    EXPECT_EQ(backend_of(v, kBackends[2])["in_table"], false) << v.dump(2);
    EXPECT_NE(agent_->log().find("VIP " + panics.key() + ": out of panic"), std::string::npos);
}

TEST_F(HealthE2E, SilentBackendFailsByTimeoutAndLeavesAfterThresholdPlusTimeout) {
    for (auto& [addr, server] : servers_) server->start();
    const HealthVip vip_conf{"198.51.100.50", "silent", 0.5, "reschedule"};
    start_agent({vip_conf});
    json v;
    ASSERT_GE(wait_for(vip_conf.key(), all_healthy_in_table, 5s, &v), 0) << v.dump(2);

    // The router drops everything to it without a word: each probe times out.
    const std::string victim = kBackends[1];
    const auto silenced = Clock::now();
    run_ok("ip -n " + lab_->router_ns() + " addr del " + victim + "/32 dev lo");
    run_ok("ip -n " + lab_->router_ns() + " route add blackhole " + victim + "/32");
    const double detect_ms = wait_for(
        vip_conf.key(), [&](const json& vj) { return backend_of(vj, victim)["in_table"] == false; },
        5s, &v);
    ASSERT_GE(detect_ms, 0) << v.dump(2);
    const double silenced_ms = ms_since(silenced) - detect_ms;  // time spent reconfiguring
    const double bound_ms = std::chrono::duration<double, std::milli>(
                                kInterval * kUnhealthyThreshold + kTimeout + kInterval)
                                .count();
    MEASURED(
        "silent backend out of the table after %.0f ms (interval x threshold %lld ms + timeout "
        "%lld ms; bound with probe phase %.0f ms; %.0f ms to silence it)",
        detect_ms, static_cast<long long>((kInterval * kUnhealthyThreshold).count()),
        static_cast<long long>(kTimeout.count()), bound_ms, silenced_ms);
    EXPECT_LE(detect_ms, bound_ms + 300);
    const json b = backend_of(v, victim);
    EXPECT_EQ(b["last_failure"], "timeout") << b.dump(2);
    EXPECT_GE(b["last_probe"]["latency_ms"].get<double>(), 90.0) << b.dump(2);
    EXPECT_EQ(b["health"], "unhealthy");

    Reply m = http_get_in_netns(lab_->lb_ns(), "127.0.0.1", 9464, "/metrics");
    ASSERT_EQ(m.status, 200) << m.text;
    EXPECT_NE(m.text.find("xlb_health_probes_total{vip=\"" + vip_conf.key() + "\",backend=\"" +
                          victim + "\",outcome=\"timeout\"}"),
              std::string::npos);
    EXPECT_NE(m.text.find("xlb_health_probe_targets 3"), std::string::npos) << m.text;
    EXPECT_NE(m.text.find("xlb_health_probes_started_total"), std::string::npos);
}

TEST_F(HealthE2E, BackendsAddedThroughTheApiOrSighupAreProbed) {
    servers_[kBackends[0]]->start();
    servers_[kBackends[1]]->start();  // kBackends[2]: down for now
    HealthVip first{"198.51.100.40", "first", 0.5, "reschedule", {kBackends[0], kBackends[1]}};
    start_agent({first});
    json v;
    ASSERT_GE(wait_for(first.key(), all_healthy_in_table, 5s, &v), 0) << v.dump(2);

    // Added at runtime while its server is down: probed, judged, kept out.
    const std::string added = kBackends[2];
    Reply r = api_->post("/v1/backends?vip=" + url_encode(first.key()),
                         "{\"address\": \"" + added + "\", \"weight\": 100}");
    ASSERT_TRUE(r.status == 201 || r.status == 202) << r.status << " " << r.text;
    EXPECT_EQ(backend_of(r.body, added)["in_table"], false) << r.body.dump(2);
    const double judged_ms = wait_for(
        first.key(), [&](const json& vj) { return backend_of(vj, added)["health"] == "unhealthy"; },
        5s, &v);
    ASSERT_GE(judged_ms, 0) << "the added backend is not probed: " << v.dump(2);
    MEASURED("backend added through the API judged unhealthy %.0f ms later", judged_ms);
    EXPECT_EQ(backend_of(v, added)["in_table"], false);
    EXPECT_EQ(backend_of(v, added)["last_failure"], "refused");

    // Its server starts: in, ramping (the pool was serving: slow start).
    servers_[added]->start();
    ASSERT_GE(
        wait_for(
            first.key(), [&](const json& vj) { return backend_of(vj, added)["in_table"] == true; },
            5s, &v),
        0)
        << v.dump(2);
    EXPECT_LT(backend_of(v, added)["weight_factor"].get<double>(), 0.5) << v.dump(2);

    // SIGHUP with a second checked VIP in the file: probed from the reload on.
    HealthVip second{"198.51.100.41", "second", 0.5, "reschedule", {kBackends[0], kBackends[1]}};
    write_file(config_path_, render_config(*lab_, {first, second}));
    const auto hup = Clock::now();
    agent_->signal(SIGHUP);
    json s2;
    const auto deadline = Clock::now() + 5s;
    bool judged = false;
    while (!judged && Clock::now() < deadline) {
        Reply got = api_->get("/v1/vip?vip=" + url_encode(second.key()));
        if (got.status == 200 && all_healthy_in_table(got.body))
            judged = true;
        else
            std::this_thread::sleep_for(10ms);
        s2 = got.body;
    }
    ASSERT_TRUE(judged) << "the VIP added by SIGHUP has no verdicts: " << s2.dump(2);
    MEASURED("VIP added by SIGHUP: every backend judged healthy %.0f ms after the signal",
             ms_since(hup));
    // The first VIP keeps its runtime backend (the file did not change it).
    EXPECT_EQ(backend(first.key(), added)["health"], "healthy");

    // Stops cleanly with probes in flight (the engine stops before the loop).
    agent_->signal(SIGTERM);
    EXPECT_EQ(agent_->wait_exit(5s), std::optional<int>(0)) << agent_->log();
}

// https checks of TLS servers on the backends' addresses (their
// certificates made at set-up by the openssl command): a good certificate
// passes, an expired one and one for another name fail with OpenSSL's
// reason in the backend's last failure, and without verification the
// expired one passes. One VIP per server: each listens on a port of its own.
TEST_F(HealthE2E, HttpsChecksJudgeTheCertificateAndSayWhy) {
    const health::test::TestCertificates certs;
    ASSERT_EQ(certs.error(), "") << "making the certificates";
    const std::vector<std::string> kinds = {"good", "expired", "wrong-name"};
    std::vector<std::unique_ptr<health::test::TlsServer>> tls;
    for (std::size_t i = 0; i < kinds.size(); ++i) {
        tls.push_back(in_netns(lab_->router_ns(), [&] {
            return std::make_unique<health::test::TlsServer>(
                kBackends[i], certs.cert(kinds[i]), certs.key(kinds[i]),
                [](health::test::TlsServer::Connection& c) {
                    while (c.read_request().find("\r\n\r\n") != std::string::npos)
                        c.write("HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nOK");
                });
        }));
        ASSERT_TRUE(tls.back()->ready()) << kinds[i];
    }
    struct Checked {
        std::string vip;
        std::size_t server;
        bool verify;
    };
    const std::vector<Checked> checked = {{"198.51.100.30", 0, true},
                                          {"198.51.100.31", 1, true},
                                          {"198.51.100.32", 2, true},
                                          {"198.51.100.33", 1, false}};
    std::ostringstream y;
    y << render_settings(*lab_, "xlb_health_e2e_tests", {});
    for (const Checked& c : checked) {
        y << "  - address: " << c.vip << "\n"
          << "    port: 80\n"
          << "    ring_size: 4093\n"
          << "    health_check:\n"
          << "      type: https\n"
          << "      port: " << tls[c.server]->port() << "\n"
          << "      path: /healthz\n"
          << "      sni: backend.test\n"
          << (c.verify ? "      ca_file: " + certs.ca() + "\n" : "      verify: false\n")
          << "      interval: " << kInterval.count() << "ms\n"
          << "      timeout: " << kTimeout.count() << "ms\n"
          << "      jitter: 0s\n"
          << "    backends:\n"
          << "      - {address: " << kBackends[c.server] << "}\n";
    }
    write_file(config_path_, y.str());
    agent_ = std::make_unique<AgentProcess>(*lab_, config_path_, lab_->tmp() + "/xlbd.log");
    agent_->start();
    wait_ready();

    auto judged = [](const json& v) { return v["backends"][0]["health"] != "unknown"; };
    std::vector<json> backends;
    for (const Checked& c : checked) {
        json v;
        ASSERT_GE(wait_for(c.vip + ":80/tcp", judged, 5s, &v), 0) << "no verdict: " << v.dump(2);
        backends.push_back(v["backends"][0]);
    }
    const std::string peer = ":" + std::to_string(tls[1]->port());
    EXPECT_EQ(backends[0]["health"], "healthy") << backends[0].dump(2);
    EXPECT_EQ(backends[0]["last_probe"]["http_status"], 200);
    EXPECT_EQ(backends[1]["health"], "unhealthy");
    EXPECT_EQ(backends[1]["last_failure"], "tls");
    EXPECT_EQ(backends[1]["last_failure_detail"],
              "TLS handshake with " + kBackends[1] + peer + ": certificate has expired");
    EXPECT_EQ(backends[2]["health"], "unhealthy");
    EXPECT_EQ(backends[2]["last_failure"], "tls");
    EXPECT_EQ(backends[2]["last_failure_detail"], "TLS handshake with " + kBackends[2] + ":" +
                                                      std::to_string(tls[2]->port()) +
                                                      ": hostname mismatch");
    EXPECT_EQ(backends[3]["health"], "healthy") << backends[3].dump(2);
    // Kept connections: the good server handshook once for all its probes.
    EXPECT_EQ(tls[0]->handshakes(), 1);
    agent_.reset();
}

}  // namespace
}  // namespace xlb::e2e
