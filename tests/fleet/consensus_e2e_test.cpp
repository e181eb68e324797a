// SPDX-License-Identifier: Apache-2.0
// Hosts that agree, end to end (label fleet): the fleet lab with three LB
// hosts over BGP, HTTP health checks (500 ms) and a 3 s slow start, 40
// long-lived streams through the routers' ECMP. A backend that one host
// cannot probe stays in every table (majority) and losing that host resets
// nothing; the same case under `local` is measured as the baseline; a
// backend that really fails leaves every table together; tables go live
// within max_publish_wait of each other, a frozen host holds nobody back;
// the store lost falls back to local verdicts; a host frozen while a
// backend is added withdraws until it caught up; hosts ramp a returning
// backend in step. One lab for the whole suite (one ctest entry).
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <functional>
#include <future>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <thread>

#include "fleet_lab.h"
#include "tcp_lab.h"

namespace xlb::e2e_tcp {
namespace {

using json = nlohmann::json;

class Consensus : public ::testing::Test {
protected:
    static void SetUpTestSuite() {
        lab_ = new FleetLab();
        // b4 is there but not configured: a backend to add.
        lab_->up(4, "--fleet --lb-hosts 3 --router bgp --agent --health --in-config 3");
    }
    static void TearDownTestSuite() {
        delete lab_;
        lab_ = nullptr;
    }
    void TearDown() override {
        thaw("lb3");
        if (!HasFailure()) return;
        for (const char* host : kHosts)
            std::printf("---- xlbd log of %s (tail) ----\n%s\n", host,
                        lab_->host_log(host).c_str());
    }

    static json status(const std::string& host) {
        return lab_->api_json(host, "GET", "/v1/status");
    }
    // The VIP's object in a host's status.
    static json vip4(const std::string& host) { return lab_->vip_status(host, vip_key4()); }
    static json backend_of(const json& vip, const std::string& address) {
        for (const json& b : vip["backends"])
            if (b["address"] == address) return b;
        return nullptr;
    }
    // Polls `done` every 50 ms until it holds; false after `timeout`.
    static bool wait_for(const std::function<bool()>& done, std::chrono::milliseconds timeout) {
        const auto until = Clock::now() + timeout;
        while (!done()) {
            if (Clock::now() > until) return false;
            std::this_thread::sleep_for(50ms);
        }
        return true;
    }
    // Every host's table of the IPv4 VIP, by host.
    // Asked of the hosts at once, so that the answers are from (nearly) one
    // moment: a slow-start step every 300 ms would fall between answers
    // asked one after another.
    static std::map<std::string, std::string> checksums(const std::vector<std::string>& hosts = {
                                                            "lb", "lb2", "lb3"}) {
        std::map<std::string, std::future<std::string>> asked;
        for (const std::string& h : hosts)
            asked[h] = std::async(std::launch::async,
                                  [h] { return vip4(h)["checksum"].get<std::string>(); });
        std::map<std::string, std::string> out;
        for (auto& [h, answer] : asked) out[h] = answer.get();
        return out;
    }
    static bool same(const std::map<std::string, std::string>& by_host) {
        return std::all_of(by_host.begin(), by_host.end(),
                           [&](const auto& kv) { return kv.second == by_host.begin()->second; });
    }
    // Every host's table says `address` is `health`.
    static bool table_health(const std::string& address, const std::string& health) {
        for (const char* h : kHosts)
            if (backend_of(vip4(h), address)["health"] != health) return false;
        return true;
    }
    static void blackhole(const std::string& host, const std::string& address, bool on) {
        CmdResult r = run("ip -n " + lab_->ns(host) + " route " + (on ? "add" : "del") +
                          " blackhole " + address + "/32 2>&1");
        if (r.rc != 0) throw std::runtime_error("blackhole " + address + ": " + r.out);
    }
    // Freezes (SIGSTOP) or thaws a host's agent alone; its BIRD goes on.
    static void freeze(const std::string& host) { signal_agent(host, "STOP"); }
    static void thaw(const std::string& host) { signal_agent(host, "CONT"); }
    static void signal_agent(const std::string& host, const std::string& sig) {
        run("kill -" + sig + " $(cat " + shell_quote(lab_->host_dir(host) + "/xlbd.pid") +
            ") 2>/dev/null");
    }
    // Streams that reset, closed or changed backend since `before`.
    static int broken(Streams& streams, const std::vector<Streams::Conn>& before) {
        const auto now = streams.snapshot();
        int n = 0;
        for (std::size_t i = 0; i < now.size(); ++i)
            n += !now[i].error.empty() || now[i].backend != before[i].backend;
        return n;
    }
    static std::vector<Streams::Conn> settled(Streams& streams) {
        std::this_thread::sleep_for(700ms);
        streams.reset_worst();
        return streams.snapshot();
    }
    static std::int64_t write(const std::string& args) {
        CmdResult r = lab_->fleet_xlbctl(args + " --reason consensus-e2e");
        if (r.rc != 0) throw std::runtime_error("xlbctl " + args + ": " + r.out);
        return FleetLab::written_at(r.out);
    }

    static inline FleetLab* lab_ = nullptr;
};

// A backend that lb3 alone cannot probe: lb3 reports the disagreement and
// follows the fleet; every table stays the same; losing lb3 silently
// resets none of 40 streams. Then the same case under `local`: measured.
TEST_F(Consensus, ABackendOneHostCannotReachStaysInEveryTable) {
    const std::string b1 = backend_v4(1);
    Streams streams(lab_->client_ns(), kVip4, 40);
    auto before = settled(streams);
    blackhole("lb3", b1, true);
    ASSERT_TRUE(wait_for(
        [&] {
            const json f = status("lb3")["fleet"];
            for (const json& d : f["health_view"]["disagreements"])
                if (d["vip"] == vip_key4() && d["backend"] == b1 && d["local"] == "unhealthy")
                    return true;
            return false;
        },
        10s))
        << status("lb3")["fleet"].dump();
    const json lb3 = backend_of(vip4("lb3"), b1);
    EXPECT_EQ(lb3["health"], "healthy") << lb3.dump();
    EXPECT_EQ(lb3["local_health"], "unhealthy") << lb3.dump();
    EXPECT_TRUE(table_health(b1, "healthy"));
    const auto tables = checksums();
    EXPECT_TRUE(same(tables)) << json(tables).dump();
    CmdResult fleet = lab_->fleet_xlbctl("fleet status");
    EXPECT_EQ(fleet.rc, 0) << fleet.out;
    EXPECT_NE(fleet.out.find("lb3's own probes judge backend " + b1 + " unhealthy"),
              std::string::npos)
        << fleet.out;

    lab_->script("host-fail lb3");
    ASSERT_TRUE(lab_->wait_next_hops(kVip4, 2, 15s)) << "lb3 still in the router's ECMP";
    std::this_thread::sleep_for(1s);
    const int majority_resets = broken(streams, before);
    std::printf("MEASURED majority: %d of 40 streams reset when lb3 (cannot reach %s) was lost\n",
                majority_resets, b1.c_str());
    EXPECT_EQ(majority_resets, 0);
    lab_->script("host-restore lb3");
    ASSERT_TRUE(lab_->wait_next_hops(kVip4, 3, 15s)) << "lb3 not back in the router's ECMP";
    streams.stop();

    // The baseline this removes: each host its own verdicts.
    const std::int64_t local = write("vip set " + vip_key4() + " --health-consensus local");
    ASSERT_TRUE(lab_->wait_applied(local));
    ASSERT_TRUE(wait_for([&] { return backend_of(vip4("lb3"), b1)["health"] == "unhealthy"; }, 5s));
    EXPECT_FALSE(same(checksums())) << "under local, lb3's table leaves b1 out";
    Streams baseline(lab_->client_ns(), kVip4, 40);
    before = settled(baseline);
    lab_->script("host-fail lb3");
    ASSERT_TRUE(lab_->wait_next_hops(kVip4, 2, 15s));
    std::this_thread::sleep_for(1s);
    std::printf("MEASURED local (baseline): %d of 40 streams reset when lb3 was lost\n",
                broken(baseline, before));
    lab_->script("host-restore lb3");
    ASSERT_TRUE(lab_->wait_next_hops(kVip4, 3, 15s));
    baseline.stop();

    blackhole("lb3", b1, false);
    const std::int64_t back = write("vip set " + vip_key4() + " --health-consensus majority");
    ASSERT_TRUE(lab_->wait_applied(back));
    ASSERT_TRUE(wait_for([&] { return table_health(b1, "healthy") && same(checksums()); }, 10s));
}

// The backend then really fails: it leaves every host's table in the same
// revision, the hosts' publishes within max_publish_wait of each other.
// Back, with lb3's agent frozen for 1.5 s meanwhile: hosts ramp it in step
// (its slow start runs on the fleet's clock).
TEST_F(Consensus, ARealFailureLeavesEveryTableTogetherAndTheReturnRampsInStep) {
    const std::string b1 = backend_v4(1);
    lab_->script("server-stop b1");
    ASSERT_TRUE(wait_for([&] { return table_health(b1, "unhealthy"); }, 10s));
    ASSERT_TRUE(wait_for([&] { return same(checksums()); }, 3s)) << json(checksums()).dump();
    const std::string table = checksums()["lb"];
    ASSERT_TRUE(wait_for(
        [&] {
            const json f = status("lb")["fleet"];
            for (const json& s : f["publish_spreads"])
                if (s["vip"] == vip_key4() && s["checksum"] == table) return true;
            return false;
        },
        5s));
    const json lb_fleet = status("lb")["fleet"];
    for (const json& s : lb_fleet["publish_spreads"]) {
        if (s["vip"] != vip_key4()) continue;
        EXPECT_EQ(s["hosts"], 3) << s.dump();
        EXPECT_LE(s["seconds"].get<double>(), 1.0) << s.dump();
        std::printf("MEASURED a real failure: tables went live %.0f ms apart on 3 hosts\n",
                    s["seconds"].get<double>() * 1000);
    }
    std::set<std::int64_t> revisions;
    for (const char* h : kHosts)
        revisions.insert(status(h)["fleet"]["applied_revision"].get<std::int64_t>());
    EXPECT_EQ(revisions.size(), 1u);

    freeze("lb3");
    lab_->script("server-start b1");
    std::this_thread::sleep_for(1500ms);
    thaw("lb3");
    // The 3 s ramp: every 100 ms, the three tables; two rounds in a row
    // that differ would be hosts ramping on clocks of their own.
    int rounds = 0, differing = 0, in_a_row = 0, worst_run = 0;
    std::set<std::string> steps;
    const auto until = Clock::now() + 5s;
    while (Clock::now() < until) {
        const auto tables = checksums();
        ++rounds;
        if (same(tables)) {
            in_a_row = 0;
            steps.insert(tables.begin()->second);
        } else {
            ++differing;
            worst_run = std::max(worst_run, ++in_a_row);
        }
        std::this_thread::sleep_for(100ms);
    }
    std::printf("MEASURED ramp: %d rounds, %d with differing tables (longest run %d), %zu steps\n",
                rounds, differing, worst_run, steps.size());
    EXPECT_LE(worst_run, 1) << "hosts ramped apart";
    EXPECT_GE(steps.size(), 2u) << "no ramp seen";
    EXPECT_TRUE(table_health(b1, "healthy"));
    EXPECT_EQ(backend_of(vip4("lb3"), b1)["weight_factor"].get<double>(), 1.0);
    EXPECT_TRUE(same(checksums()));
}

// Weight changes: each table goes live on the three hosts within
// max_publish_wait of each other; lb3's agent frozen: lb and lb2 publish
// after max_publish_wait, and lb3 catches up once thawed.
TEST_F(Consensus, TablesGoLiveTogetherAndAFrozenHostHoldsNobodyBack) {
    const std::string b2 = backend_v4(2);
    std::vector<double> spreads;
    for (int i = 1; i <= 10; ++i) {
        const std::int64_t rev =
            write("backend set " + vip_key4() + " " + b2 + " --weight " + std::to_string(100 + i));
        ASSERT_TRUE(lab_->wait_applied(rev));
        ASSERT_TRUE(wait_for([&] { return same(checksums()); }, 3s));
        const std::string table = checksums()["lb"];
        json spread;
        ASSERT_TRUE(wait_for(
            [&] {
                const json f = status("lb")["fleet"];
                for (const json& s : f["publish_spreads"])
                    if (s["vip"] == vip_key4() && s["checksum"] == table) spread = s;
                return !spread.is_null();
            },
            3s))
            << "no spread reported for " << table;
        EXPECT_LE(spread["seconds"].get<double>(), 1.0) << spread.dump();
        spreads.push_back(spread["seconds"].get<double>() * 1000);
    }
    std::sort(spreads.begin(), spreads.end());
    std::printf("MEASURED publish spread over %zu changes: median %.0f ms, worst %.0f ms\n",
                spreads.size(), spreads[spreads.size() / 2], spreads.back());

    freeze("lb3");
    const auto start = Clock::now();
    const std::int64_t rev = write("backend set " + vip_key4() + " " + b2 + " --weight 100");
    const std::string old = vip4("lb")["checksum"];
    ASSERT_TRUE(wait_for(
        [&] {
            for (const char* h : {"lb", "lb2"})
                if (status(h)["fleet"]["applied_revision"].get<std::int64_t>() < rev ||
                    vip4(h)["checksum"] == old)
                    return false;
            return true;
        },
        5s))
        << "lb and lb2 waited for the frozen lb3 beyond max_publish_wait";
    const auto took = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - start);
    std::printf("MEASURED with lb3 frozen: lb and lb2 live %lld ms after the write\n",
                static_cast<long long>(took.count()));
    EXPECT_GE(took.count(), 900) << "they did not wait for lb3's prepare";
    EXPECT_TRUE(same(checksums({"lb", "lb2"})));
    thaw("lb3");
    ASSERT_TRUE(lab_->wait_applied(rev));
    EXPECT_TRUE(wait_for([&] { return same(checksums()); }, 5s)) << json(checksums()).dump();
}

// The store lost: every host says its health follows local verdicts; a
// host whose own verdict changes meanwhile follows it; the store back, the
// fleet's view again. No stream reset by the transitions.
TEST_F(Consensus, TheStoreLostFallsBackToLocalVerdictsAndComesBack) {
    const std::string b2 = backend_v4(2);
    Streams streams(lab_->client_ns(), kVip4, 40);
    auto before = settled(streams);
    lab_->script("etcd-fail");
    ASSERT_TRUE(wait_for(
        [&] {
            for (const char* h : kHosts)
                if (status(h)["fleet"]["health_view"]["source"] != "local") return false;
            return true;
        },
        20s));
    EXPECT_NE(status("lb2")["fleet"]["health_view"]["reason"].get<std::string>().find(
                  "store is unreachable"),
              std::string::npos);
    EXPECT_EQ(broken(streams, before), 0) << "streams reset when the store went";
    streams.stop();

    // A change meanwhile: lb2 cannot reach b2 any more and follows itself.
    blackhole("lb2", b2, true);
    EXPECT_TRUE(wait_for(
        [&] {
            const json f = status("lb2")["fleet"]["health_view"];
            return f["local_fallbacks"].get<int>() >= 1 &&
                   backend_of(vip4("lb2"), b2)["health"] == "unhealthy";
        },
        10s))
        << status("lb2")["fleet"].dump();
    EXPECT_EQ(backend_of(vip4("lb"), b2)["health"], "healthy");
    blackhole("lb2", b2, false);
    ASSERT_TRUE(wait_for([&] { return backend_of(vip4("lb2"), b2)["health"] == "healthy"; }, 10s));

    Streams again(lab_->client_ns(), kVip4, 40);
    before = settled(again);
    lab_->script("etcd-start all");
    ASSERT_TRUE(wait_for(
        [&] {
            for (const char* h : kHosts)
                if (status(h)["fleet"]["health_view"]["source"] != "fleet") return false;
            return true;
        },
        20s));
    std::this_thread::sleep_for(1s);
    EXPECT_EQ(broken(again, before), 0) << "streams reset when the store came back";
    EXPECT_TRUE(wait_for([&] { return same(checksums()); }, 5s));
}

// lb3 lost silently while b4 is added: once restored it withdraws (or
// never announces) until it runs the revision; 0 of 40 streams reset, some
// of them on b4.
TEST_F(Consensus, AHostFrozenWhileABackendIsAddedAnnouncesOnlyOnceCurrent) {
    const std::string b4 = backend_v4(4);
    lab_->script("host-fail lb3");
    ASSERT_TRUE(lab_->wait_next_hops(kVip4, 2, 15s));
    const std::int64_t rev = write("backend add " + vip_key4() + " " + b4 + " --weight 200");
    ASSERT_TRUE(wait_for(
        [&] {
            for (const char* h : {"lb", "lb2"})
                if (status(h)["fleet"]["applied_revision"].get<std::int64_t>() < rev ||
                    backend_of(vip4(h), b4)["health"] != "healthy" ||
                    backend_of(vip4(h), b4)["weight_factor"].get<double>() != 1.0)
                    return false;
            return true;
        },
        15s));
    Streams streams(lab_->client_ns(), kVip4, 40);
    const auto before = settled(streams);
    int on_b4 = 0;
    for (const auto& c : before) on_b4 += c.backend == "b4";
    lab_->script("host-restore lb3");
    // Whenever the router has lb3 again, lb3 runs the revision.
    bool announced = false;
    const auto until = Clock::now() + 15s;
    while (Clock::now() < until && !announced) {
        const bool hop = lab_->next_hops(kVip4).size() == 3;
        if (hop) {
            announced = true;
            EXPECT_GE(status("lb3")["fleet"]["applied_revision"].get<std::int64_t>(), rev)
                << "lb3 announced before it applied the revision";
        }
        std::this_thread::sleep_for(20ms);
    }
    ASSERT_TRUE(announced) << "lb3 did not announce again";
    std::this_thread::sleep_for(1s);
    const int resets = broken(streams, before);
    std::printf("MEASURED lb3 back after b4 was added: %d of 40 streams reset (%d on b4)\n", resets,
                on_b4);
    EXPECT_EQ(resets, 0);
    streams.stop();
    const std::int64_t removed = write("backend del " + vip_key4() + " " + b4);
    EXPECT_TRUE(lab_->wait_applied(removed));
}

}  // namespace
}  // namespace xlb::e2e_tcp
