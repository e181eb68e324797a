// SPDX-License-Identifier: Apache-2.0
// Epochs never go backwards (docs/api.md, "Conventions"), with the real xlbd
// in the lab (lab.h): a SIGHUP change, kill -9, a restart, another change.
// At every step (epoch, checksum) is read from /v1/status and from the
// agent's "published" log lines: epochs strictly increase from step to step,
// and no epoch ever names two table checksums. Needs root.
#include <gtest/gtest.h>
#include <linux/magic.h>
#include <signal.h>
#include <sys/statfs.h>
#include <unistd.h>

#include <cstdio>
#include <map>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "lab.h"

namespace xlb::e2e {
namespace {

constexpr const char* kVip = "198.51.100.20:80/tcp";
constexpr auto kTimeout = 15s;

// One VIP whose table depends on the first backend's weight.
std::string config_with_weight(const Lab& lab, std::uint32_t weight) {
    std::ostringstream y;
    y << render_settings(lab, "xlb_agent_e2e_tests (epochs)", {})
      << "  - address: \"198.51.100.20\"\n"
      << "    port: 80\n"
      << "    protocol: tcp\n"
      << "    name: epochs\n"
      << "    ring_size: 1021\n"
      << "    backends:\n"
      << "      - {address: \"203.0.113.21\", weight: " << weight << "}\n"
      << "      - {address: \"203.0.113.22\", weight: 100}\n"
      << "      - {address: \"203.0.113.23\", weight: 100}\n";
    return y.str();
}

struct Named {
    std::uint64_t epoch = 0;
    std::string checksum;
};

class EpochE2E : public ::testing::Test {
protected:
    void SetUp() override {
        if (::geteuid() != 0) GTEST_SKIP() << "needs root: network namespaces, XDP, bpffs";
        lab_ = new_lab_up();
        config_ = lab_->tmp() + "/xlbd.yaml";
        api_ = std::make_unique<Api>(lab_->tmp() + "/run/xlbd.sock");
        agent_ = std::make_unique<AgentProcess>(*lab_, config_, lab_->tmp() + "/xlbd.log");
    }
    void TearDown() override {
        if (agent_ && HasFailure())
            std::printf("----- xlbd log -----\n%s----- end -----\n", agent_->log().c_str());
        agent_.reset();
        lab_.reset();
    }

    // The VIP's (epoch, checksum) once it is published and, when `after` is
    // set, its epoch differs from it.
    Named wait_published(std::optional<std::uint64_t> after = std::nullopt) {
        const auto deadline = Clock::now() + kTimeout;
        std::string last;
        while (Clock::now() < deadline) {
            if (!agent_->running()) throw std::runtime_error("xlbd exited");
            Reply r = api_->get("/v1/status");
            last = r.text;
            if (r.status == 200 && r.body.is_object() && r.body.value("ready", false))
                for (const json& v : r.body["vips"])
                    if (v["vip"] == kVip && v.value("published", false) &&
                        (!after || v["epoch"].get<std::uint64_t>() != *after))
                        return {v["epoch"].get<std::uint64_t>(), v["checksum"].get<std::string>()};
            std::this_thread::sleep_for(10ms);
        }
        throw std::runtime_error("VIP not published in time; last /v1/status: " + last);
    }

    // Every "VIP ... published: epoch N, checksum H" line of the log so far.
    std::vector<Named> logged() {
        static const std::regex line(std::string("VIP ") + "198\\.51\\.100\\.20:80/tcp" +
                                     " published: epoch ([0-9]+), checksum ([0-9a-f]{16})");
        std::vector<Named> out;
        const std::string log = agent_->log();
        for (std::sregex_iterator it(log.begin(), log.end(), line), end; it != end; ++it)
            out.push_back({std::stoull((*it)[1]), (*it)[2]});
        return out;
    }

    std::unique_ptr<Lab> lab_;
    std::unique_ptr<Api> api_;
    std::unique_ptr<AgentProcess> agent_;
    std::string config_;
};

TEST_F(EpochE2E, SighupKillNineRestartChangeEpochsStrictlyIncreaseAndNameOneTable) {
    std::vector<std::pair<std::string, Named>> steps;  // from /v1/status
    write_file(config_, config_with_weight(*lab_, 100));
    agent_->start();
    steps.emplace_back("start", wait_published());

    // SIGHUP with a changed weight
    write_file(config_, config_with_weight(*lab_, 250));
    agent_->signal(SIGHUP);
    steps.emplace_back("SIGHUP", wait_published(steps.back().second.epoch));

    // kill -9 at once: whatever the agent wrote after the publish is not waited for
    agent_->kill9();
    agent_->start();
    steps.emplace_back("kill -9, restart", wait_published());

    // another change
    write_file(config_, config_with_weight(*lab_, 400));
    agent_->signal(SIGHUP);
    steps.emplace_back("SIGHUP after the restart", wait_published(steps.back().second.epoch));

    std::map<std::uint64_t, std::string> named;  // epoch -> checksum, status and log together
    auto name = [&](const std::string& where, const Named& n) {
        auto [it, fresh] = named.emplace(n.epoch, n.checksum);
        EXPECT_EQ(it->second, n.checksum) << where << ": epoch " << n.epoch << " names two tables";
    };
    for (std::size_t i = 0; i < steps.size(); ++i) {
        const auto& [what, n] = steps[i];
        std::printf("[ measured ] %-26s epoch %llu, checksum %s\n", what.c_str(),
                    static_cast<unsigned long long>(n.epoch), n.checksum.c_str());
        name(what, n);
        if (i > 0) {
            EXPECT_GT(n.epoch, steps[i - 1].second.epoch)
                << what << ": the epoch did not grow past " << steps[i - 1].first << "'s";
        }
    }
    const std::vector<Named> lines = logged();
    EXPECT_GE(lines.size(), steps.size()) << "every step logs its table";
    for (const Named& n : lines) name("log", n);
    // the restart adopted the live table of the SIGHUP: same table, a new epoch
    EXPECT_EQ(steps[2].second.checksum, steps[1].second.checksum);
    EXPECT_NE(steps[3].second.checksum, steps[2].second.checksum);
}

}  // namespace
}  // namespace xlb::e2e
