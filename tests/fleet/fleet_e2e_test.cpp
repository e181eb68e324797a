// SPDX-License-Identifier: Apache-2.0
// One fleet, end to end (label fleet): scripts/lab.sh up --fleet with three
// LB hosts over BGP, a 3-member etcd store with TLS on the management
// network, the desired state imported with xlbctl, a client and backends.
// Changes are written with xlbctl (or, for what xlbctl would refuse to
// write, straight into etcd with etcdctl) and every host's agent is read
// back through its API. One lab for the whole suite (one ctest entry): each
// test leaves the fleet as it found it.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <numeric>
#include <sstream>
#include <thread>

#include "fleet_lab.h"
#include "tcp_lab.h"
#include "xlb/config/json.h"
#include "xlb/fleet/values.h"

namespace xlb::e2e_tcp {
namespace {

using json = nlohmann::json;

class Fleet : public ::testing::Test {
protected:
    static void SetUpTestSuite() {
        lab_ = new FleetLab();
        lab_->up(3, "--fleet --lb-hosts 3 --router bgp --agent --max-backends 1100");
    }
    static void TearDownTestSuite() {
        delete lab_;
        lab_ = nullptr;
    }
    void TearDown() override {
        if (!HasFailure()) return;
        for (const char* host : kHosts)
            std::printf("---- xlbd log of %s (tail) ----\n%s\n", host,
                        lab_->host_log(host).c_str());
    }
    // Every host runs `revision`, with the same table checksum per VIP, and
    // fleet status says so (exit 0).
    void expect_agreement(std::int64_t revision) {
        ASSERT_TRUE(lab_->wait_applied(revision)) << "not every host applied " << revision;
        std::map<std::string, std::string> checksums;
        for (const char* host : kHosts) {
            const json st = lab_->api_json(host, "GET", "/v1/status");
            EXPECT_EQ(st["fleet"]["applied_revision"], revision) << host;
            EXPECT_TRUE(st["fleet"]["refused"].is_null()) << host << ": " << st["fleet"].dump();
            for (const json& v : st["vips"]) {
                auto [it, fresh] = checksums.emplace(v["vip"], v["checksum"]);
                EXPECT_EQ(it->second, v["checksum"]) << host << " " << v["vip"];
            }
        }
        // The records follow the applies: give them a moment.
        CmdResult status;
        for (int i = 0; i < 50; ++i) {
            status = lab_->fleet_xlbctl("fleet status");
            if (status.rc == 0) break;
            std::this_thread::sleep_for(100ms);
        }
        EXPECT_EQ(status.rc, 0) << status.out;
    }
    static inline FleetLab* lab_ = nullptr;
};

TEST_F(Fleet, AChangeReachesEveryHostAndTheyAgree) {
    CmdResult drained =
        lab_->fleet_xlbctl("backend drain " + vip_key4() + " " + backend_v4(1) + " --reason e2e");
    ASSERT_EQ(drained.rc, 0) << drained.out;
    const std::int64_t revision = FleetLab::written_at(drained.out);
    expect_agreement(revision);
    for (const char* host : kHosts) {
        const json b = lab_->api_json(host, "GET", "/v1/backends?vip=" + vip_key4());
        for (const json& backend : b["backends"]) {
            if (backend["address"] != backend_v4(1)) continue;
            EXPECT_EQ(backend["state"], "drain") << host;
        }
    }
    // The last reload of every host names the revision.
    for (const char* host : kHosts)
        EXPECT_EQ(lab_->api_json(host, "GET", "/v1/status")["last_reload"]["source"],
                  "fleet revision " + std::to_string(revision))
            << host;
    CmdResult enabled = lab_->fleet_xlbctl("backend enable " + vip_key4() + " " + backend_v4(1));
    ASSERT_EQ(enabled.rc, 0) << enabled.out;
    expect_agreement(FleetLab::written_at(enabled.out));
}

// 1,000 backends, 30 changes of one backend's weight with xlbctl: the time
// from the start of the write to the last host's status showing the
// revision (polled every 20 ms: the figure is an upper bound; make bench
// measures it without polling, tools/bench/fleet).
TEST_F(Fleet, ThirtyChangesOfAThousandBackendsVip) {
    config::VipSpec big;
    big.address = *net::IpAddress::parse("198.51.100.30");
    big.port = 80;
    for (int i = 0; i < 1000; ++i) {
        config::BackendSpec b;
        b.address = net::IpAddress::v4(10, 1, static_cast<std::uint8_t>(i / 250),
                                       static_cast<std::uint8_t>(i % 250 + 1));
        big.backends.push_back(b);
    }
    const std::string key = big.key();
    expect_agreement(
        lab_->put(kPrefix + "desired/vips/" + key, fleet::encode(fleet::VipValue{big, false, {}})));

    std::vector<double> ms;
    std::int64_t last = 0;
    for (int i = 0; i < 30; ++i) {
        const auto start = Clock::now();
        CmdResult set = lab_->fleet_xlbctl("backend set " + key + " 10.1.0.1 --weight " +
                                           std::to_string(100 + i % 7 + 1));
        ASSERT_EQ(set.rc, 0) << set.out;
        const std::int64_t revision = last = FleetLab::written_at(set.out);
        for (const char* host : kHosts)
            while (lab_->fleet_of(host)["applied_revision"].get<std::int64_t>() < revision) {
                ASSERT_LT(Clock::now() - start, 10s) << host << " did not apply " << revision;
                std::this_thread::sleep_for(20ms);
            }
        ms.push_back(std::chrono::duration<double, std::milli>(Clock::now() - start).count());
    }
    std::sort(ms.begin(), ms.end());
    std::printf(
        "MEASURED 30 changes of a 1000-backend VIP with xlbctl, write to live on 3 hosts: "
        "p50 %.0f ms, max %.0f ms\n",
        ms[ms.size() / 2], ms.back());
    expect_agreement(last);
    CmdResult del = lab_->fleet_xlbctl("vip del " + key);
    ASSERT_EQ(del.rc, 0) << del.out;
    expect_agreement(FleetLab::written_at(del.out));
}

// Written by hand (xlbctl itself refuses it): a new ring size without
// allow_disruptive. Every host refuses the same revision the same way and
// keeps its table; confirmed, it applies everywhere.
TEST_F(Fleet, ADisruptiveChangeWithoutConfirmationIsRefusedByEveryHostAlike) {
    const std::string key = vip_key_mixed();
    CmdResult got = lab_->etcdctl("get " + shell_quote(kPrefix + "desired/vips/" + key) +
                                  " --print-value-only");
    ASSERT_EQ(got.rc, 0) << got.out;
    auto value = fleet::decode_vip(got.out.substr(0, got.out.find_last_not_of('\n') + 1));
    ASSERT_TRUE(value.has_value()) << value.error().message() << ": " << got.out;
    const json before = lab_->vip_status("lb", key);
    value->vip->ring_size = 251;
    auto put = [&](const fleet::VipValue& v) {
        return lab_->put(kPrefix + "desired/vips/" + key, fleet::encode(v));
    };
    const std::int64_t refused = put(*value);
    std::string first_errors;
    for (const char* host : kHosts) {
        json f;
        for (int i = 0; i < 200; ++i) {
            f = lab_->fleet_of(host);
            if (f["refused"].is_object()) break;
            std::this_thread::sleep_for(20ms);
        }
        ASSERT_TRUE(f["refused"].is_object()) << host << ": " << f.dump();
        EXPECT_EQ(f["refused"]["reason"], "disruptive") << host;
        EXPECT_EQ(f["refused"]["revision"].get<std::int64_t>(), refused) << host;
        const std::string errors = f["refused"]["errors"].dump();
        EXPECT_NE(errors.find("ring_size 65537 -> 251"), std::string::npos) << errors;
        if (first_errors.empty()) first_errors = errors;
        EXPECT_EQ(errors, first_errors) << host << " refused differently";
        EXPECT_EQ(lab_->vip_status(host, key)["checksum"], before["checksum"]) << host;
    }
    EXPECT_EQ(lab_->fleet_xlbctl("fleet status").rc, 1);

    value->allow_disruptive = true;
    expect_agreement(put(*value));
    for (const char* host : kHosts)
        EXPECT_NE(lab_->vip_status(host, key)["checksum"], before["checksum"]) << host;
    value->vip->ring_size = 65537;
    expect_agreement(put(*value));
}

// Bad data in the store (by hand): every host reports it with the key and
// the revision and keeps its last good state; the next valid revision
// applies.
TEST_F(Fleet, BadDataIsReportedWithKeyAndRevisionAndTheNextValidRevisionApplies) {
    const std::string key = kPrefix + "desired/vips/198.51.100.40:80/tcp";
    const std::int64_t good = lab_->fleet_of("lb")["applied_revision"].get<std::int64_t>();
    const std::vector<std::pair<std::string, std::string>> bad{
        {"{\"format\": 1, \"vip\": ", "not valid JSON"},
        {R"({"format": 1, "vip": {"address": "198.51.100.40", "port": 80}, "colour": "red"})",
         "colour"},
        {R"({"format": 1, "vip": {"address": "198.51.100.40", "port": 80, "ring_size": 100}})",
         "ring_size"},
    };
    for (const auto& [value, words] : bad) {
        const std::int64_t revision = lab_->put(key, value);
        for (const char* host : kHosts) {
            json f;
            for (int i = 0; i < 200; ++i) {
                f = lab_->fleet_of(host);
                if (f["refused"].is_object() && f["refused"]["revision"] == revision) break;
                std::this_thread::sleep_for(20ms);
            }
            ASSERT_TRUE(f["refused"].is_object()) << host << ": " << f.dump();
            EXPECT_EQ(f["refused"]["revision"], revision) << host;
            const std::string errors = f["refused"]["errors"].dump();
            EXPECT_NE(errors.find(key + "@" + std::to_string(revision)), std::string::npos)
                << errors;
            EXPECT_NE(errors.find(words), std::string::npos) << errors;
            EXPECT_EQ(f["applied_revision"], good) << host << ": the last good state goes on";
        }
    }
    expect_agreement(lab_->put(key, R"({"format": 1, "vip": {"address": "198.51.100.40",
        "port": 80, "backends": [{"address": "203.0.113.11"}]}})"));
    CmdResult del = lab_->fleet_xlbctl("vip del 198.51.100.40:80/tcp");
    ASSERT_EQ(del.rc, 0) << del.out;
    expect_agreement(FleetLab::written_at(del.out));
}

// One member down changes nothing; the whole store down leaves tables,
// routes and established streams as they were (status says unreachable,
// readyz stays 200); a change made once the store is back is applied.
TEST_F(Fleet, TheStoreGoneLeavesTrafficAloneAndAChangeAppliesWhenItIsBack) {
    lab_->script("etcd-stop 1");
    CmdResult drain =
        lab_->fleet_xlbctl("backend drain " + vip_key6() + " " + backend_v6(2) + " --reason m1");
    ASSERT_EQ(drain.rc, 0) << drain.out;
    expect_agreement(FleetLab::written_at(drain.out));
    lab_->script("etcd-start 1");

    ASSERT_TRUE(lab_->wait_next_hops(kVip4, 3)) << "not every host announces";
    Streams streams(lab_->client_ns(), kVip4, 20);
    std::this_thread::sleep_for(1s);
    const auto before = streams.snapshot();
    std::map<std::string, std::string> checksums;
    for (const char* host : kHosts)
        checksums[host] = lab_->vip_status(host, vip_key4())["checksum"];

    lab_->script("etcd-fail");
    for (const char* host : kHosts) {
        json f;
        for (int i = 0; i < 150; ++i) {
            f = lab_->fleet_of(host);
            if (f["store"]["reachable"] == false) break;
            std::this_thread::sleep_for(20ms);
        }
        EXPECT_EQ(f["store"]["reachable"], false) << host << ": " << f.dump();
        EXPECT_NE(f["store"]["error"].get<std::string>().find("198.18.0.1"), std::string::npos)
            << f.dump();
    }
    std::this_thread::sleep_for(3s);
    EXPECT_EQ(lab_->next_hops(kVip4).size(), 3u) << "a host withdrew its routes";
    for (const char* host : kHosts) {
        EXPECT_EQ(lab_->vip_status(host, vip_key4())["checksum"], checksums[host]) << host;
        CmdResult ready = run("curl -s -o /dev/null -w '%{http_code}' --unix-socket " +
                              shell_quote(lab_->socket(host)) + " http://xlbd/readyz");
        EXPECT_EQ(ready.out, "200") << host;
        CmdResult status = run(std::string(XLBCTL_PATH) + " --socket " +
                               shell_quote(lab_->socket(host)) + " status 2>&1");
        EXPECT_NE(status.out.find("store unreachable since"), std::string::npos) << status.out;
    }
    const auto after = streams.snapshot();
    int broken = 0;
    for (std::size_t i = 0; i < after.size(); ++i) {
        EXPECT_EQ(after[i].error, "") << "stream " << i;
        broken += !after[i].error.empty();
        EXPECT_GT(after[i].echoes, before[i].echoes) << "stream " << i << " stalled";
    }
    std::printf("MEASURED store down 3 s: %zu streams, %d reset, routes %zu\n", after.size(),
                broken, lab_->next_hops(kVip4).size());
    streams.stop();

    lab_->script("etcd-start all");
    CmdResult enable = lab_->fleet_xlbctl("backend enable " + vip_key6() + " " + backend_v6(2));
    ASSERT_EQ(enable.rc, 0) << enable.out;
    expect_agreement(FleetLab::written_at(enable.out));
    for (const char* host : kHosts) EXPECT_EQ(lab_->fleet_of(host)["store"]["reachable"], true);
}

// A host stopped while the fleet changes reads the newest revision when it
// starts again, also after the store compacted the history it missed.
TEST_F(Fleet, AHostStoppedDuringChangesCatchesUpEvenPastACompaction) {
    for (bool compact : {false, true}) {
        lab_->script("agent-stop lb3");
        std::int64_t last = 0;
        for (int i = 1; i <= 3; ++i) {
            CmdResult set = lab_->fleet_xlbctl("backend set " + vip_key4() + " " + backend_v4(2) +
                                               " --weight " + std::to_string(100 + i));
            ASSERT_EQ(set.rc, 0) << set.out;
            last = FleetLab::written_at(set.out);
        }
        if (compact) {
            CmdResult c = lab_->etcdctl("compact " + std::to_string(lab_->store_revision()));
            ASSERT_EQ(c.rc, 0) << c.out;
        }
        lab_->script("agent-start lb3");
        expect_agreement(last);
        EXPECT_EQ(lab_->vip_status("lb3", vip_key4())["checksum"],
                  lab_->vip_status("lb", vip_key4())["checksum"]);
    }
    CmdResult back =
        lab_->fleet_xlbctl("backend set " + vip_key4() + " " + backend_v4(2) + " --weight 100");
    ASSERT_EQ(back.rc, 0) << back.out;
    expect_agreement(FleetLab::written_at(back.out));
}

// A drain written while the host was stopped holds from its start, and the
// desired state it started from is the one it keeps for a start without
// the store.
TEST_F(Fleet, AHostStartsWithTheDrainAndTheRevisionTheStoreHolds) {
    lab_->script("agent-stop lb3");
    CmdResult drain = lab_->fleet_xlbctl("host drain lb3 --reason 'rack work'");
    ASSERT_EQ(drain.rc, 0) << drain.out;
    const std::int64_t revision = FleetLab::written_at(drain.out);
    lab_->script("agent-start lb3");
    EXPECT_EQ(lab_->api_json("lb3", "GET", "/v1/host")["host"]["drained"], true);
    EXPECT_TRUE(lab_->wait_next_hops(kVip4, 2)) << "lb3 still announces";
    const json persisted = json::parse(read_text(lab_->host_dir("lb3") + "/state.json.fleet"));
    EXPECT_EQ(persisted["revision"].get<std::int64_t>() >= revision, true) << persisted.dump();
    CmdResult resume = lab_->fleet_xlbctl("host resume lb3");
    ASSERT_EQ(resume.rc, 0) << resume.out;
    expect_agreement(FleetLab::written_at(resume.out));
    EXPECT_EQ(lab_->api_json("lb3", "GET", "/v1/host")["host"]["drained"], false);
    EXPECT_TRUE(lab_->wait_next_hops(kVip4, 3)) << "lb3 did not announce again";
}

// An agent without a client certificate: etcd refuses it; the agent says
// which endpoint and that TLS failed, and serves what it applied last.
TEST_F(Fleet, AnAgentWithoutAClientCertificateIsRefusedAndSaysWhy) {
    const std::string config = lab_->host_dir("lb3") + "/xlbd.yaml";
    const std::string saved = config + ".with-cert";
    ASSERT_EQ(run("cp " + config + " " + saved).rc, 0);
    ASSERT_EQ(run("sed -i '/^  cert: /d; /^  key: /d' " + config).rc, 0);
    lab_->script("agent-stop lb3");
    lab_->script("agent-start lb3");
    const json f = lab_->fleet_of("lb3");
    EXPECT_EQ(f["store"]["reachable"], false) << f.dump();
    const std::string error = f["store"]["error"];
    EXPECT_NE(error.find("https://198.18.0.11:2379"), std::string::npos) << error;
    EXPECT_NE(error.find("TLS"), std::string::npos) << error;
    EXPECT_EQ(f["source"], "persisted") << f.dump();
    EXPECT_GT(f["applied_revision"].get<std::int64_t>(), 0);
    ASSERT_EQ(run("mv " + saved + " " + config).rc, 0);
    lab_->script("agent-stop lb3");
    lab_->script("agent-start lb3");
    expect_agreement(lab_->fleet_of("lb")["applied_revision"].get<std::int64_t>());
}

}  // namespace
}  // namespace xlb::e2e_tcp
