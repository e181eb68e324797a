// SPDX-License-Identifier: Apache-2.0
// status --peers and host drain/resume: parsing, requests, and the comparison
// of LB hosts' status replies (pure: canned JSON).
#include <gtest/gtest.h>

#include "xlb/xlbctl/command.h"
#include "xlb/xlbctl/render.h"
#include "xlb/xlbctl/request.h"

namespace xlb::xlbctl {
namespace {

Command parsed(const std::vector<std::string>& args) {
    ParseResult r = parse_command(args, [](const char*) -> const char* { return nullptr; });
    const Command* c = std::get_if<Command>(&r);
    EXPECT_NE(c, nullptr) << std::get<ParseExit>(r).error;
    return c ? *c : Command{};
}

TEST(XlbctlHost, DrainAndResumeArePostsWithoutBody) {
    const HttpRequest drain = build_request(parsed({"host", "drain"}));
    EXPECT_EQ(drain.method, "POST");
    EXPECT_EQ(drain.target, "/v1/host/drain");
    EXPECT_EQ(drain.body, "");
    const HttpRequest resume = build_request(parsed({"host", "resume"}));
    EXPECT_EQ(resume.target, "/v1/host/resume");
}

TEST(XlbctlHost, PeersAreTakenInOrder) {
    const Command c = parsed({"status", "--peers", "/run/a.sock", "b.json"});
    EXPECT_EQ(c.verb, Verb::kStatus);
    EXPECT_EQ(c.peers, (std::vector<std::string>{"/run/a.sock", "b.json"}));
}

// One host's status reply with one VIP.
json host_status(std::uint64_t weight, const std::string& checksum, std::uint32_t seed = 7,
                 const std::string& identity = "203.0.113.11") {
    json backend{{"identity", identity},
                 {"address", "203.0.113.11"},
                 {"weight", weight},
                 {"state", "active"}};
    return json{{"vips",
                 {{{"vip", "198.51.100.10:80/tcp"},
                   {"checksum", checksum},
                   {"table_inputs",
                    {{"hash_seed", seed},
                     {"ring_size", 65537},
                     {"hash", "5tuple"},
                     {"backends", {backend}}}}}}}};
}

TEST(XlbctlPeers, SameInputsAndTablesAgree) {
    const json c = compare_peers({{"a", host_status(100, "01")}, {"b", host_status(100, "01")}});
    EXPECT_TRUE(c["agree"]);
    EXPECT_EQ(c["vips"][0]["problems"].size(), 0u);
    EXPECT_NE(render_peers(c, Style{}).find("all 2 hosts agree"), std::string::npos);
}

TEST(XlbctlPeers, AnotherWeightIsNamedWithTheHost) {
    const json c = compare_peers({{"a", host_status(100, "01")}, {"b", host_status(300, "02")}});
    EXPECT_FALSE(c["agree"]);
    ASSERT_EQ(c["vips"][0]["problems"].size(), 1u);
    EXPECT_EQ(c["vips"][0]["problems"][0], "b: backend 203.0.113.11: weight 300 (a: 100)");
}

// Three hosts, one with another weight: that one is named, against the two
// that agree, whichever comes first.
TEST(XlbctlPeers, TheOddHostOutIsNamedNotTheFirst) {
    const json c = compare_peers({{"lb", host_status(150, "02")},
                                  {"lb2", host_status(100, "01")},
                                  {"lb3", host_status(100, "01")}});
    EXPECT_FALSE(c["agree"]);
    const json& problems = c["vips"][0]["problems"];
    ASSERT_EQ(problems.size(), 1u) << problems.dump();
    EXPECT_EQ(problems[0], "lb: backend 203.0.113.11: weight 150 (lb2, lb3: 100)");
    EXPECT_EQ(c["vips"][0]["checksum"], "01") << "the majority's table";
}

TEST(XlbctlPeers, AHashKeyChangeIsNamedAsSuch) {
    const json c =
        compare_peers({{"a", host_status(100, "01")}, {"b", host_status(100, "05", 7, "web-1")}});
    const json& problems = c["vips"][0]["problems"];
    ASSERT_EQ(problems.size(), 1u) << problems.dump();
    EXPECT_EQ(problems[0],
              "b: backend 203.0.113.11: hash_key changed, Maglev identity web-1 (a: "
              "203.0.113.11): its slots move");
}

TEST(XlbctlPeers, AnotherSeedAndAMissingVipDiffer) {
    json lonely = host_status(100, "01");
    lonely["vips"] = json::array();
    const json c = compare_peers(
        {{"a", host_status(100, "01")}, {"b", host_status(100, "03", 8)}, {"c", lonely}});
    EXPECT_FALSE(c["agree"]);
    const json& problems = c["vips"][0]["problems"];
    ASSERT_EQ(problems.size(), 2u) << problems.dump();
    // in the hosts' order
    EXPECT_EQ(problems[0], "b: hash_seed 8 (a: 7)");
    EXPECT_EQ(problems[1], "c: has no such VIP");
}

TEST(XlbctlPeers, SameInputsDifferentTableIsHealth) {
    const json c = compare_peers({{"a", host_status(100, "01")}, {"b", host_status(100, "09")}});
    EXPECT_FALSE(c["agree"]);
    EXPECT_NE(c["vips"][0]["problems"][0].get<std::string>().find("health differs"),
              std::string::npos);
}

}  // namespace
}  // namespace xlb::xlbctl
