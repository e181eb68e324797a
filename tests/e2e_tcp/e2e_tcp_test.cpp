// SPDX-License-Identifier: Apache-2.0
// Real TCP through the real data plane: scripts/lab.sh builds the namespaces
// (client, router, lb, b1..b4), xlbd attaches xlb_lb in native XDP on the
// LB's veth, backends decapsulate with xlb-decap and answer the client
// directly. The lab's config: VIPs web (198.51.100.10:80 -> b1..b3 over
// IPv4), web6 ([2001:db8:f::10]:80 -> b1..b3 over IPv6) and mixed
// (198.51.100.20:80 -> b1..b3 over IPv6), weights 100:100:200, no health
// check. b4 exists but is not configured. Each test prints what it measured.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <nlohmann/json.hpp>
#include <set>
#include <thread>

#include "tcp_lab.h"
#include "xlb/abi.h"
#include "xlb/files/files.h"

namespace xlb::e2e_tcp {
namespace {

class TcpE2e : public ::testing::Test {
protected:
    void SetUp() override {
        if (geteuid() != 0) GTEST_SKIP() << "needs root (network namespaces, BPF)";
        try {
            lab_.up(4);
            lab_.agent_start();
        } catch (const std::exception& e) {
            FAIL() << e.what();
        }
    }
    void TearDown() override {
        if (HasFailure()) {
            std::string log = lab_.agent_log();
            if (log.size() > 4000) log = log.substr(log.size() - 4000);
            std::printf("---- xlbd log (tail) ----\n%s\n", log.c_str());
        }
    }

    // Checks the API call succeeded (2xx).
    void change(const std::string& method, const std::string& path, const std::string& body = "") {
        Lab::Reply r = lab_.api(method, path, body);
        ASSERT_GE(r.status, 200) << method << " " << path << ": " << r.body;
        ASSERT_LT(r.status, 300) << method << " " << path << ": " << r.body;
    }

    // Every stream still healthy on the backend it started on; prints them.
    void expect_streams_intact(Streams& streams, const std::string& step,
                               const std::vector<Streams::Conn>& before) {
        auto now = streams.snapshot();
        double worst = 0;
        std::uint64_t echoes = 0;
        std::map<std::string, int> per_backend;
        for (std::size_t i = 0; i < now.size(); ++i) {
            EXPECT_EQ(now[i].error, "")
                << step << ": stream " << i << " (on " << before[i].backend << ")";
            EXPECT_EQ(now[i].backend, before[i].backend) << step << ": stream " << i;
            EXPECT_GT(now[i].echoes, before[i].echoes) << step << ": stream " << i << " stalled";
            worst = std::max(worst, now[i].worst_ms);
            echoes += now[i].echoes - before[i].echoes;
            per_backend[now[i].backend]++;
        }
        std::printf(
            "[%s] %zu streams: %llu echoes in this step, worst round trip %.1f ms, "
            "streams per backend: %s\n",
            step.c_str(), now.size(), static_cast<unsigned long long>(echoes), worst,
            format_counts(per_backend).c_str());
        EXPECT_LT(worst, 1000.0) << step << ": a stream stalled for " << worst << " ms";
    }

    Lab lab_;
};

// 3,000 connections with weights 1:1:2: each backend's share within 5 points.
TEST_F(TcpE2e, DistributionFollowsWeights) {
    auto start = Clock::now();
    auto counts = count_backends(lab_.client_ns(), kVip4, 3000);
    double secs = std::chrono::duration<double>(Clock::now() - start).count();
    std::printf("3000 connections to %s:80 in %.2f s: %s\n", kVip4, secs,
                format_counts(counts).c_str());
    EXPECT_EQ(counts["error"], 0);
    const std::map<std::string, double> want = {{"b1", 0.25}, {"b2", 0.25}, {"b3", 0.50}};
    for (const auto& [name, share] : want) {
        double got = counts[name] / 3000.0;
        std::printf("  %s: %.1f%% (weight share %.1f%%)\n", name.c_str(), 100 * got, 100 * share);
        EXPECT_NEAR(got, share, 0.05) << name;
    }
    EXPECT_EQ(counts.size(), counts.count("error") + 3u) << format_counts(counts);
}

// 20 long-lived streams survive backend add, unrelated removal, weight
// changes, and kill -9 plus restart of xlbd.
TEST_F(TcpE2e, LongLivedConnectionsSurviveChanges) {
    Streams streams(lab_.client_ns(), kVip4, 20);
    std::this_thread::sleep_for(500ms);
    auto before = streams.snapshot();
    for (std::size_t i = 0; i < before.size(); ++i)
        ASSERT_EQ(before[i].error, "") << "stream " << i;
    std::set<std::string> used;
    for (const auto& c : before) used.insert(c.backend);
    std::printf("20 streams established on %zu backends\n", used.size());
    const std::string vip = "/v1/backends?vip=" + vip_key4();

    // (a) a fourth backend
    streams.reset_worst();
    change("POST", vip, R"({"address": ")" + backend_v4(4) + R"(", "weight": 100})");
    std::this_thread::sleep_for(1s);
    expect_streams_intact(streams, "a: add b4", before);
    auto counts = count_backends(lab_.client_ns(), kVip4, 300);
    std::printf("[a: add b4] 300 new connections: %s\n", format_counts(counts).c_str());
    EXPECT_GT(counts["b4"], 0) << "the new backend takes no new connections";
    EXPECT_EQ(counts["error"], 0);
    before = streams.snapshot();

    // (b) remove a backend none of the streams uses (b4, added after them)
    streams.reset_worst();
    change("DELETE", vip + "&address=" + backend_v4(4));
    std::this_thread::sleep_for(1s);
    expect_streams_intact(streams, "b: remove b4", before);
    before = streams.snapshot();

    // (c) weights
    streams.reset_worst();
    change("PATCH", vip + "&address=" + backend_v4(1), R"({"weight": 400})");
    change("PATCH", vip + "&address=" + backend_v4(3), R"({"weight": 50})");
    std::this_thread::sleep_for(1s);
    expect_streams_intact(streams, "c: weights b1 400, b3 50", before);
    counts = count_backends(lab_.client_ns(), kVip4, 300);
    std::printf("[c: weights] 300 new connections: %s\n", format_counts(counts).c_str());
    EXPECT_GT(counts["b1"], counts["b3"]) << "the new weights are not in effect";
    before = streams.snapshot();

    // (d) kill -9, streams keep going without an agent, then a restart
    streams.reset_worst();
    auto t0 = Clock::now();
    lab_.agent_kill();
    std::this_thread::sleep_for(1s);
    expect_streams_intact(streams, "d1: xlbd killed", before);
    before = streams.snapshot();
    streams.reset_worst();
    lab_.agent_start();
    double restart_ms = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
    std::this_thread::sleep_for(1s);
    expect_streams_intact(streams, "d2: xlbd restarted", before);
    std::printf("[d] kill -9 to ready again: %.0f ms (including 1 s without an agent)\n",
                restart_ms);
    counts = count_backends(lab_.client_ns(), kVip4, 300);
    std::printf("[d] 300 new connections after the restart: %s\n", format_counts(counts).c_str());
    EXPECT_EQ(counts["error"], 0);
    EXPECT_GT(counts["b1"], counts["b3"]) << "the runtime weights were lost in the restart";
    streams.stop();
}

// Drain: the drained backend's established connections continue; no new
// connection reaches it.
TEST_F(TcpE2e, DrainKeepsEstablishedAndTakesNoNewConnections) {
    // 30 streams: the chance that none lands on b1 (25%) is 0.75^30, 0.02%
    Streams streams(lab_.client_ns(), kVip4, 30);
    std::this_thread::sleep_for(500ms);
    auto before = streams.snapshot();
    int on_b1 = 0;
    for (const auto& c : before) {
        ASSERT_EQ(c.error, "");
        on_b1 += c.backend == "b1";
    }
    ASSERT_GT(on_b1, 0) << "no stream landed on b1 (30 streams, b1 weight 25%)";
    streams.reset_worst();
    change("PATCH", "/v1/backends?vip=" + vip_key4() + "&address=" + backend_v4(1),
           R"({"state": "drain"})");
    auto counts = count_backends(lab_.client_ns(), kVip4, 600);
    std::printf("drained b1 (%d of 30 streams on it); 600 new connections: %s\n", on_b1,
                format_counts(counts).c_str());
    EXPECT_EQ(counts["b1"], 0) << "new connections reached the drained backend";
    EXPECT_EQ(counts["error"], 0);
    EXPECT_GT(counts["b2"], 0);
    EXPECT_GT(counts["b3"], 0);
    expect_streams_intact(streams, "drain b1", before);
    streams.stop();
}

// IPv6 VIP with IPv6 backends, IPv4 VIP with IPv6 backends (IPv4-in-IPv6).
TEST_F(TcpE2e, Ipv6VipAndIpv4VipWithIpv6Backends) {
    struct Case {
        const char* name;
        const char* vip;
    };
    for (const Case& c :
         {Case{"IPv6 VIP, IPv6 backends", kVip6}, Case{"IPv4 VIP, IPv6 backends", kVipMixed}}) {
        auto counts = count_backends(lab_.client_ns(), c.vip, 600);
        std::printf("%s (%s): 600 connections: %s\n", c.name, c.vip, format_counts(counts).c_str());
        EXPECT_EQ(counts["error"], 0) << c.name;
        EXPECT_NEAR(counts["b1"] / 600.0, 0.25, 0.08) << c.name;
        EXPECT_NEAR(counts["b2"] / 600.0, 0.25, 0.08) << c.name;
        EXPECT_NEAR(counts["b3"] / 600.0, 0.50, 0.08) << c.name;
    }
    // and a long-lived stream over IPv6
    Streams streams(lab_.client_ns(), kVip6, 5);
    std::this_thread::sleep_for(1s);
    auto now = streams.snapshot();
    for (std::size_t i = 0; i < now.size(); ++i) {
        EXPECT_EQ(now[i].error, "") << "IPv6 stream " << i;
        EXPECT_GT(now[i].echoes, 10u) << "IPv6 stream " << i;
    }
    streams.stop();
}

// Switching the encapsulation to GUE by a reload: the streams started over
// IP-in-IP keep going (the backends' xlb-decap takes both), the kernel
// program's configuration says GUE, and new connections to every VIP (IPv4
// and IPv6 outer headers) work through it.
TEST_F(TcpE2e, SwitchingToGueByReloadKeepsStreamsAndCarriesNewConnections) {
    Streams streams(lab_.client_ns(), kVip4, 10);
    std::this_thread::sleep_for(500ms);
    const auto before = streams.snapshot();

    const std::string yaml_path = lab_.state_dir() + "/xlbd.yaml";
    auto read = files::read_file(yaml_path);
    ASSERT_TRUE(read && *read) << yaml_path;
    std::string yaml = **read;
    const auto mtu_at = yaml.find("\nmtu: ");
    ASSERT_NE(mtu_at, std::string::npos) << yaml;
    yaml.insert(mtu_at + 1, "encap: gue\n");
    auto written = files::write_file_atomic(yaml_path, yaml);
    ASSERT_TRUE(written) << written.error().message();
    change("POST", "/v1/reload", "{}");

    // What the XDP program reads: xlb_config's flags and gue_port, in the
    // map pinned under pin_dir/INTERFACE (bpftool prints its bytes).
    const auto pin_at = yaml.find("\npin_dir: ");
    ASSERT_NE(pin_at, std::string::npos);
    const auto pin_end = yaml.find('\n', pin_at + 1);
    const std::string pin_dir = yaml.substr(pin_at + 10, pin_end - pin_at - 10);
    CmdResult dump =
        run("bpftool -j map lookup pinned " + pin_dir + "/eth0/xlb_config key 0 0 0 0 2>/dev/null");
    ASSERT_EQ(dump.rc, 0) << dump.out;
    const auto value = nlohmann::json::parse(dump.out).at("value");
    ASSERT_EQ(value.size(), sizeof(xlb_config)) << dump.out;
    xlb_config cfg{};
    auto* bytes = reinterpret_cast<unsigned char*>(&cfg);
    for (std::size_t i = 0; i < sizeof cfg; ++i)
        bytes[i] = static_cast<unsigned char>(std::stoul(value[i].get<std::string>(), nullptr, 16));
    EXPECT_EQ(cfg.flags & XLB_CFG_F_GUE, XLB_CFG_F_GUE) << dump.out;
    EXPECT_EQ(cfg.gue_port, XLB_GUE_PORT_DEFAULT) << dump.out;

    std::this_thread::sleep_for(1s);
    expect_streams_intact(streams, "after switching to GUE", before);
    streams.stop();
    for (const char* vip : {kVip4, kVip6, kVipMixed}) {
        auto counts = count_backends(lab_.client_ns(), vip, 200);
        std::printf("GUE, %s: 200 connections: %s\n", vip, format_counts(counts).c_str());
        EXPECT_EQ(counts["error"], 0) << vip;
        EXPECT_EQ(counts.size(), counts.count("error") + 3u)
            << vip << ": " << format_counts(counts);
    }
}

}  // namespace
}  // namespace xlb::e2e_tcp
