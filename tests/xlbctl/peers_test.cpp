// SPDX-License-Identifier: Apache-2.0
// status --peers and host drain/resume: parsing, requests, and the comparison
// of LB hosts' status replies (pure: canned JSON).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "xlb/xlbctl/command.h"
#include "xlb/xlbctl/render.h"
#include "xlb/xlbctl/request.h"
#include "xlb/xlbctl/run.h"

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

// What one host says of the second backend (203.0.113.12) beyond the table
// inputs: the verdict its table is built from, its own probes' verdict and
// its weight factor.
struct Seen {
    std::string health = "healthy";
    std::string local_health = "healthy";
    double weight_factor = 1.0;
};

// One host's status reply with one VIP under `majority`, two backends, in
// the shape of an agent with the fleet's health view.
json fleet_host(const std::string& checksum, const Seen& seen = {}, std::uint64_t weight = 100,
                const std::string& identity = "203.0.113.12",
                const std::string& published_at = "2026-12-06T14:03:07.123Z") {
    json inputs = host_status(100, checksum)["vips"][0]["table_inputs"];
    inputs["backends"].push_back({{"identity", identity},
                                  {"address", "203.0.113.12"},
                                  {"weight", weight},
                                  {"state", "active"}});
    return json{{"vips",
                 {{{"vip", "198.51.100.10:80/tcp"},
                   {"epoch", 4},
                   {"checksum", checksum},
                   {"inputs_checksum", "i1"},
                   {"health_consensus", "majority"},
                   {"published_at", published_at},
                   {"table_inputs", inputs},
                   {"backends",
                    {{{"address", "203.0.113.11"},
                      {"health", "healthy"},
                      {"local_health", "healthy"},
                      {"weight_factor", 1.0}},
                     {{"address", "203.0.113.12"},
                      {"health", seen.health},
                      {"local_health", seen.local_health},
                      {"weight_factor", seen.weight_factor}}}}}}}};
}

const json& only_vip(const json& c) { return c.at("vips").at(0); }

TEST(XlbctlPeers, SameInputsSameFleetHealthSameTableAgreeWithTheirPublishSpread) {
    const json c = compare_peers(
        {{"lb1", fleet_host("01", {}, 100, "203.0.113.12", "2026-12-06T14:03:07.123Z")},
         {"lb2", fleet_host("01", {}, 100, "203.0.113.12", "2026-12-06T14:03:07.100Z")},
         {"lb3", fleet_host("01", {}, 100, "203.0.113.12", "2026-12-06T14:03:07.141Z")}});
    EXPECT_TRUE(c["agree"]);
    EXPECT_EQ(c["state"], "agree");
    const json& v = only_vip(c);
    EXPECT_EQ(v["state"], "agree");
    EXPECT_EQ(v["health_consensus"], "majority");
    EXPECT_TRUE(v["notes"].empty()) << v.dump();
    EXPECT_TRUE(v["health_disagreements"].empty());
    EXPECT_TRUE(c["unknown"].empty()) << c.dump();
    EXPECT_DOUBLE_EQ(v["publish_spread_seconds"].get<double>(), 0.041);
    const std::string text = render_peers(c, Style{});
    EXPECT_NE(text.find("all 3 hosts agree (checksum 01, publish spread 41 ms)"), std::string::npos)
        << text;
}

TEST(XlbctlPeers, LocalHealthThatConsensusHidesIsANoteNotADifference) {
    const json c = compare_peers({{"lb1", fleet_host("01")},
                                  {"lb2", fleet_host("01")},
                                  {"lb3", fleet_host("01", Seen{"healthy", "unhealthy", 1.0})}});
    EXPECT_TRUE(c["agree"]);
    EXPECT_EQ(c["state"], "agree_local_differs");
    const json& v = only_vip(c);
    EXPECT_TRUE(v["agree"]);
    EXPECT_EQ(v["state"], "agree_local_differs");
    EXPECT_TRUE(v["problems"].empty());
    ASSERT_EQ(v["notes"].size(), 1u) << v.dump();
    EXPECT_EQ(v["notes"][0],
              "same inputs, same fleet health, same table; lb3's own probes judge backend "
              "203.0.113.12 unhealthy, the fleet healthy (consensus hides it)");
    ASSERT_EQ(v["health_disagreements"].size(), 1u);
    EXPECT_EQ(v["health_disagreements"][0], (json{{"host", "lb3"},
                                                  {"backend", "203.0.113.12"},
                                                  {"local_health", "unhealthy"},
                                                  {"health", "healthy"}}));
    const std::string text = render_peers(c, Style{});
    EXPECT_NE(text.find("all 3 hosts agree (checksum 01"), std::string::npos) << text;
    EXPECT_NE(text.find("lb3's own probes judge backend 203.0.113.12 unhealthy"), std::string::npos)
        << text;
}

TEST(XlbctlPeers, OneHostsHealthNamesThatHostTheBackendAndHealth) {
    const json c = compare_peers({{"lb1", fleet_host("01")},
                                  {"lb2", fleet_host("07", Seen{"unhealthy", "unhealthy", 1.0})},
                                  {"lb3", fleet_host("01")}});
    EXPECT_FALSE(c["agree"]);
    EXPECT_EQ(c["state"], "differ");
    const json& v = only_vip(c);
    EXPECT_EQ(v["state"], "differ");
    ASSERT_EQ(v["problems"].size(), 1u) << v.dump();
    EXPECT_EQ(v["problems"][0],
              "lb2: backend 203.0.113.12: health unhealthy on lb2, healthy on lb1, lb3");
    EXPECT_EQ(v["checksum"], "01");
    EXPECT_TRUE(v["health_disagreements"].empty()) << "its own view and its table agree";
}

TEST(XlbctlPeers, AnotherWeightFactorIsNamedAsASlowStartStep) {
    const json c = compare_peers({{"lb1", fleet_host("03", Seen{"healthy", "healthy", 0.4})},
                                  {"lb2", fleet_host("02", Seen{"healthy", "healthy", 0.5})},
                                  {"lb3", fleet_host("02", Seen{"healthy", "healthy", 0.5})}});
    const json& v = only_vip(c);
    ASSERT_EQ(v["problems"].size(), 1u) << v.dump();
    EXPECT_EQ(v["problems"][0],
              "lb1: backend 203.0.113.12: slow-start step / weight factor 0.4 on lb1, 0.5 on "
              "lb2, lb3");
}

TEST(XlbctlPeers, AWeightOnOneOfThreeHostsNamesOnlyThatHost) {
    const json c = compare_peers(
        {{"lb1", fleet_host("01")}, {"lb2", fleet_host("01")}, {"lb3", fleet_host("04", {}, 150)}});
    const json& v = only_vip(c);
    ASSERT_EQ(v["problems"].size(), 1u) << v.dump();
    EXPECT_EQ(v["problems"][0], "lb3: backend 203.0.113.12: weight 150 (lb1, lb2: 100)");
}

TEST(XlbctlPeers, AHashKeyChangeAmongThreeIsNamedAsSuch) {
    const json c = compare_peers({{"lb1", fleet_host("01")},
                                  {"lb2", fleet_host("05", {}, 100, "web-2")},
                                  {"lb3", fleet_host("01")}});
    const json& v = only_vip(c);
    ASSERT_EQ(v["problems"].size(), 1u) << v.dump();
    EXPECT_EQ(v["problems"][0],
              "lb2: backend 203.0.113.12: hash_key changed, Maglev identity web-2 (lb1, lb3: "
              "203.0.113.12): its slots move");
}

TEST(XlbctlPeers, SameInputsHealthAndFactorsButAnotherTableHasNoVisibleReason) {
    const json c = compare_peers(
        {{"lb1", fleet_host("01")}, {"lb2", fleet_host("01")}, {"lb3", fleet_host("09")}});
    const json& v = only_vip(c);
    ASSERT_EQ(v["problems"].size(), 1u) << v.dump();
    EXPECT_EQ(v["problems"][0],
              "lb3: table checksum 09 (lb1, lb2: 01) with the same inputs, health and weight "
              "factors: no visible reason");
}

// An agent older than the fleet's health view reports no policy, no publish
// time, no local verdict and no weight factor: unknown, said so, not a crash
// and not a difference.
TEST(XlbctlPeers, AnOlderAgentsMissingFieldsAreUnknownAndSaidSo) {
    json old = fleet_host("01");
    json& v = old["vips"][0];
    v.erase("health_consensus");
    v.erase("published_at");
    for (json& b : v["backends"]) {
        b.erase("local_health");
        b.erase("weight_factor");
    }
    const json c =
        compare_peers({{"lb1", fleet_host("01")}, {"lb2", fleet_host("01")}, {"lb3", old}});
    EXPECT_TRUE(c["agree"]);
    EXPECT_EQ(c["state"], "agree");
    EXPECT_TRUE(only_vip(c)["publish_spread_seconds"].is_null()) << "lb3 does not say when";
    ASSERT_EQ(c["unknown"].size(), 1u) << c.dump();
    EXPECT_EQ(c["unknown"][0],
              "lb3 does not report backends' local_health, backends' weight_factor, "
              "health_consensus, published_at (an older agent?): unknown, not compared");
    EXPECT_NE(render_peers(c, Style{}).find("lb3 does not report"), std::string::npos);

    // Another table: the cause cannot be seen, and the text says why.
    old["vips"][0]["checksum"] = "08";
    const json d =
        compare_peers({{"lb1", fleet_host("01")}, {"lb2", fleet_host("01")}, {"lb3", old}});
    const json& problems = only_vip(d)["problems"];
    ASSERT_EQ(problems.size(), 1u) << problems.dump();
    EXPECT_NE(problems[0].get<std::string>().find("lb3: the same inputs but table checksum 08"),
              std::string::npos);
    EXPECT_NE(problems[0].get<std::string>().find("an older agent"), std::string::npos);
}

TEST(XlbctlPeers, PublishTimesKeepTheirMilliseconds) {
    auto a = parse_utc("2026-12-06T14:03:07.123Z");
    auto b = parse_utc("2026-12-06T14:03:08Z");
    ASSERT_TRUE(a && b);
    EXPECT_EQ(std::chrono::duration_cast<std::chrono::milliseconds>(*b - *a).count(), 877);
    EXPECT_FALSE(parse_utc("yesterday"));
}

// A run of `status --peers` with this host's reply from its socket and the
// two others from files: the tables agree while a host's own probes differ,
// which exits 0 and prints the note; a differing table exits 1.
int peers_run(const json& own, const json& lb2, const json& lb3, std::string& out) {
    const auto dir = std::filesystem::temp_directory_path();
    const std::string f2 = (dir / "xlbctl-peers-lb2.json").string();
    const std::string f3 = (dir / "xlbctl-peers-lb3.json").string();
    std::ofstream(f2) << lb2.dump();
    std::ofstream(f3) << lb3.dump();
    struct Reply : Transport {
        std::string body;
        std::expected<HttpResponse, TransportError> send(const HttpRequest&) override {
            return HttpResponse{200, body};
        }
    };
    std::ostringstream o, e;
    Io io;
    io.out = &o;
    io.err = &e;
    io.getenv = [](const char*) -> const char* { return nullptr; };
    io.connect = [&](const Command&) -> std::unique_ptr<Transport> {
        auto r = std::make_unique<Reply>();
        r->body = own.dump();
        return r;
    };
    const int code = run({"status", "--peers", f2, f3}, io);
    out = o.str() + e.str();
    return code;
}

TEST(XlbctlPeers, ConsensusHidingLocalHealthExitsZeroADifferentTableOne) {
    std::string out;
    EXPECT_EQ(peers_run(fleet_host("01"), fleet_host("01"),
                        fleet_host("01", Seen{"healthy", "unhealthy", 1.0}), out),
              0)
        << out;
    EXPECT_NE(out.find("same inputs, same fleet health, same table; "), std::string::npos) << out;
    EXPECT_EQ(peers_run(fleet_host("01"), fleet_host("01"),
                        fleet_host("02", Seen{"unhealthy", "unhealthy", 1.0}), out),
              1)
        << out;
    EXPECT_NE(out.find("health unhealthy on"), std::string::npos) << out;
}

}  // namespace
}  // namespace xlb::xlbctl
