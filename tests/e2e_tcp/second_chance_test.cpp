// SPDX-License-Identifier: Apache-2.0
// Second chance with real TCP (label second_chance): 40 long-lived streams
// through the IPv4 VIP of the lab (b1..b3, weights 100:100:200, GUE); a
// fourth backend joins, so about a fifth of the flows' ring choices move;
// then the LB's connection table is emptied, as when the flows are re-hashed
// to an LB host that never saw them. With second chance, the backend the new
// ring names passes each unknown packet on to the one the previous ring
// named: no stream is reset or moves. The same run with second chance off
// loses the moved share: that difference is the figure of merit, printed.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <thread>

#include "tcp_lab.h"
#include "xlb/files/files.h"

namespace xlb::e2e_tcp {
namespace {

struct RunResult {
    int streams = 0;
    int reset = 0;  // broken: reset, closed, timed out
    int moved = 0;  // answered by another backend
};

class SecondChanceE2e : public ::testing::Test {
protected:
    void SetUp() override {
        if (geteuid() != 0) GTEST_SKIP() << "needs root (network namespaces, BPF)";
    }

    void change(Lab& lab, const std::string& method, const std::string& path,
                const std::string& body = "") {
        Lab::Reply r = lab.api(method, path, body);
        ASSERT_GE(r.status, 200) << method << " " << path << ": " << r.body;
        ASSERT_LT(r.status, 300) << method << " " << path << ": " << r.body;
    }

    RunResult run_once(bool second_chance) {
        RunResult result;
        Lab lab;
        try {
            lab.up(4, "--second-chance");
            if (!second_chance) {
                const std::string path = lab.state_dir() + "/xlbd.yaml";
                auto read = files::read_file(path);
                EXPECT_TRUE(read && *read) << path;
                if (!read || !*read) return result;
                std::string yaml = **read;
                const std::string on = "second_chance: {enabled: true";
                const auto at = yaml.find(on);
                EXPECT_NE(at, std::string::npos) << yaml;
                if (at == std::string::npos) return result;
                yaml.replace(at, on.size(), "second_chance: {enabled: false");
                EXPECT_TRUE(files::write_file_atomic(path, yaml));
            }
            lab.agent_start();
        } catch (const std::exception& e) {
            ADD_FAILURE() << e.what();
            return result;
        }
        const char* mode = second_chance ? "on" : "off";

        Streams streams(lab.client_ns(), kVip4, 40);
        std::this_thread::sleep_for(1s);
        const auto before = streams.snapshot();
        for (std::size_t i = 0; i < before.size(); ++i)
            EXPECT_EQ(before[i].error, "") << "stream " << i << " before any change";
        result.streams = static_cast<int>(before.size());

        // A fourth backend: about a fifth of the ring's slots go to it.
        change(lab, "POST", "/v1/backends?vip=" + vip_key4(),
               R"({"address": ")" + backend_v4(4) + R"(", "weight": 100})");
        std::this_thread::sleep_for(1s);
        // The connection table forgets every flow.
        change(lab, "POST", "/v1/conntrack/flush", R"({"vip": ")" + vip_key4() + R"("})");
        std::this_thread::sleep_for(3s);

        const auto after = streams.snapshot();
        std::map<std::string, int> per_backend;
        for (std::size_t i = 0; i < after.size(); ++i) {
            per_backend[after[i].backend]++;
            if (!after[i].error.empty())
                ++result.reset;
            else if (after[i].backend != before[i].backend)
                ++result.moved;
        }
        streams.stop();
        std::printf(
            "second chance %s: %d streams, after adding b4 and emptying the connection table: "
            "%d reset, %d moved, %d intact (streams per backend: %s)\n",
            mode, result.streams, result.reset, result.moved,
            result.streams - result.reset - result.moved, format_counts(per_backend).c_str());
        // The balancer counted the hints it sent.
        Lab::Reply stats = lab.api("GET", "/v1/stats?vip=" + vip_key4());
        std::uint64_t hints = 0;
        try {
            hints = nlohmann::json::parse(stats.body)
                        .at("vips")
                        .at(0)
                        .at("second_chance_hints")
                        .get<std::uint64_t>();
        } catch (const std::exception& e) {
            ADD_FAILURE() << e.what() << ": " << stats.body;
        }
        std::printf("second chance %s: %llu packets sent with a hint\n", mode,
                    static_cast<unsigned long long>(hints));
        if (second_chance)
            EXPECT_GT(hints, 0u);
        else
            EXPECT_EQ(hints, 0u);

        // The backends' decapsulators counted what they passed on (their
        // metrics files, rewritten every second).
        std::this_thread::sleep_for(1500ms);
        std::uint64_t passed = 0;
        for (int b = 1; b <= 4; ++b) {
            const std::string path = lab.dir() + "/decap-b" + std::to_string(b) + ".prom";
            auto text = files::read_file(path);
            EXPECT_TRUE(text && *text) << path;
            if (!text || !*text) continue;
            std::istringstream lines(**text);
            for (std::string line; std::getline(lines, line);)
                if (line.starts_with("xlb_decap_passed_on_total{"))
                    passed += std::stoull(line.substr(line.rfind(' ') + 1));
        }
        std::printf("second chance %s: the backends passed %llu packets on\n", mode,
                    static_cast<unsigned long long>(passed));
        if (second_chance)
            EXPECT_GT(passed, 0u);
        else
            EXPECT_EQ(passed, 0u);
        return result;
    }
};

TEST_F(SecondChanceE2e, EstablishedStreamsSurviveABackendChangeAndLostConnectionState) {
    const RunResult on = run_once(true);
    const RunResult off = run_once(false);
    std::printf("figure of merit: second chance on: %d of %d streams broken; off: %d of %d\n",
                on.reset + on.moved, on.streams, off.reset + off.moved, off.streams);
    EXPECT_EQ(on.streams, 40);
    EXPECT_EQ(on.reset, 0);
    EXPECT_EQ(on.moved, 0);
    // Without it, the flows whose choice moved to b4 are reset there.
    EXPECT_EQ(off.streams, 40);
    EXPECT_GT(off.reset + off.moved, 0) << "the control run lost nothing: the test shows nothing";
}

}  // namespace
}  // namespace xlb::e2e_tcp
