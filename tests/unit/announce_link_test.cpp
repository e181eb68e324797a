// SPDX-License-Identifier: Apache-2.0
// The agent's side of BGP announcements: the announcer's input from the
// reconciler's VIP states, the start-up gate, and the drain state's file.
#include "xlb/agent/announce_link.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>

namespace xlb::agent {
namespace {

using namespace std::chrono_literals;

control::VipStatus vip(const char* address, std::uint64_t epoch,
                       std::vector<std::pair<bool, std::uint32_t>> backends) {
    control::VipStatus v;
    v.spec.address = *net::IpAddress::parse(address);
    v.spec.port = 80;
    v.epoch = epoch;
    for (const auto& [in_table, weight] : backends) {
        control::BackendStatus b;
        b.in_table = in_table;
        b.effective_weight = weight;
        b.slots = in_table && weight > 0 ? 100 : 0;
        v.backends.push_back(b);
        v.spec.backends.emplace_back();
    }
    return v;
}

TEST(AnnounceInput, CountsBackendsThatTakeNewFlowsInTheLiveTable) {
    std::vector<control::VipStatus> vips{
        vip("198.51.100.10", 3, {{true, 100}, {true, 0}, {false, 100}}),
        vip("198.51.100.20", 0, {{true, 100}})};
    vips[1].spec.announce = announce::Policy::kNever;
    vips[1].panic = control::PanicReason::kBelowThreshold;
    const announce::HostInput in = announce_input(vips, true, false);
    EXPECT_TRUE(in.drained);
    EXPECT_FALSE(in.startup_complete);
    ASSERT_EQ(in.vips.size(), 2u);
    EXPECT_EQ(in.vips[0].key, "198.51.100.10:80/tcp");
    EXPECT_TRUE(in.vips[0].table_live);
    EXPECT_EQ(in.vips[0].serving_backends, 1u);  // weight 0 and out of table do not count
    EXPECT_EQ(in.vips[0].configured_backends, 3u);
    EXPECT_FALSE(in.vips[0].in_panic);
    EXPECT_FALSE(in.vips[1].table_live);  // epoch 0: never published
    EXPECT_EQ(in.vips[1].policy, announce::Policy::kNever);
    EXPECT_TRUE(in.vips[1].in_panic);
}

TEST(StartupGate, OpensWhenEveryVipWasPublishedOrPatienceRunsOut) {
    const auto t0 = std::chrono::steady_clock::now();
    StartupGate gate(t0, 10s);
    std::vector<control::VipStatus> vips{vip("198.51.100.10", 1, {}), vip("198.51.100.20", 0, {})};
    EXPECT_FALSE(gate.complete(vips, t0 + 1s));
    vips[1].epoch = 1;
    EXPECT_TRUE(gate.complete(vips, t0 + 2s));
    vips[1].epoch = 0;
    EXPECT_TRUE(gate.complete(vips, t0 + 3s)) << "once open, it stays open";

    StartupGate slow(t0, 10s);
    EXPECT_FALSE(slow.complete(vips, t0 + 9s));
    EXPECT_TRUE(slow.complete(vips, t0 + 10s));
}

class DrainFile : public ::testing::Test {
protected:
    void SetUp() override {
        dir_ = std::filesystem::temp_directory_path() / ("xlb-drain-" + std::to_string(::getpid()));
        std::filesystem::create_directories(dir_);
    }
    void TearDown() override { std::filesystem::remove_all(dir_); }
    std::string path() const { return (dir_ / "state.json.drain").string(); }
    std::filesystem::path dir_;
};

TEST_F(DrainFile, AbsentIsNotDrainedAndADrainSurvivesAReload) {
    HostDrainFile file(path());
    auto none = file.load();
    ASSERT_TRUE(none) << none.error();
    EXPECT_FALSE(none->drained);

    const auto since = std::chrono::system_clock::time_point(std::chrono::seconds(1764600000));
    ASSERT_TRUE(file.save({.drained = true, .since = since}));
    auto back = HostDrainFile(path()).load();
    ASSERT_TRUE(back) << back.error();
    EXPECT_TRUE(back->drained);
    EXPECT_EQ(back->since, since);

    ASSERT_TRUE(file.save({.drained = false}));
    EXPECT_FALSE(std::filesystem::exists(path()));
    EXPECT_TRUE(file.save({.drained = false})) << "resuming an active host is no error";
}

// `host drain` answers with the routes after the change: once wait_applied()
// returns, status() has the announcer's run with that input (here BIRD is
// absent, the routes file is still written).
TEST_F(DrainFile, WaitAppliedGivesTheStatusOfThatInput) {
    announce::AnnouncerOptions options;
    options.routes_file = (dir_ / "xlb.conf").string();
    options.control_socket = (dir_ / "no-bird.ctl").string();
    options.timeout = 100ms;
    AnnounceLink link(options, {}, 1h);  // no tick: only submissions run it
    link.start();
    std::vector<control::VipStatus> vips{vip("198.51.100.10", 1, {{true, 100}}),
                                         vip("198.51.100.20", 1, {{true, 100}})};
    for (int round = 0; round < 5; ++round) {
        const std::uint64_t serving = link.submit(announce_input(vips, false, true));
        ASSERT_TRUE(link.wait_applied(serving, 5s));
        EXPECT_EQ(link.status().routes.size(), 2u) << "round " << round;
        const std::uint64_t drained = link.submit(announce_input(vips, true, true));
        EXPECT_GT(drained, serving);
        ASSERT_TRUE(link.wait_applied(drained, 5s));
        EXPECT_EQ(link.status().routes.size(), 0u) << "round " << round << ": drained";
    }
    EXPECT_FALSE(link.wait_applied(1000, 50ms)) << "an input never submitted";
    link.stop();
}

TEST_F(DrainFile, AFileXlbdDidNotWriteIsAnErrorNamingIt) {
    std::ofstream(path()) << "drained, I think\n";
    auto r = HostDrainFile(path()).load();
    ASSERT_FALSE(r);
    EXPECT_NE(r.error().message().find(path()), std::string::npos) << r.error();
    EXPECT_NE(r.error().message().find("xlbctl host resume"), std::string::npos) << r.error();
}

}  // namespace
}  // namespace xlb::agent
