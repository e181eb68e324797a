// SPDX-License-Identifier: Apache-2.0
//
// xlb-sim's command line, in-process: reproducible output, formats, plots
// and clear errors for bad arguments.

#include "xlb/sim/cli.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "xlb/version.h"

namespace {

struct Outcome {
    int code;
    std::string out;
    std::string err;
};

Outcome run(std::vector<std::string> args) {
    std::ostringstream out, err;
    const int code = xlb::sim::run_cli(args, out, err);
    return {code, out.str(), err.str()};
}

TEST(SimCli, SameSeedGivesByteIdenticalJson) {
    const std::vector<std::vector<std::string>> commands{
        {"placement", "--keys", "10000", "--no-timing", "--json", "--seed", "7"},
        {"churn", "--keys", "10000", "--backends", "40", "--json", "--seed", "7"},
        {"balance", "--servers", "20", "--requests", "5000", "--jobs-per-server", "50", "--json",
         "--seed", "7"},
    };
    for (const auto& args : commands) {
        SCOPED_TRACE(args.front());
        const auto a = run(args);
        const auto b = run(args);
        ASSERT_EQ(a.code, 0) << a.err;
        EXPECT_EQ(a.out, b.out);
        EXPECT_FALSE(nlohmann::json::parse(a.out)["rows"].empty());
        auto other = args;
        other.back() = "8";
        EXPECT_NE(run(other).out, a.out) << "a different seed should change something";
    }
}

TEST(SimCli, PlacementJsonCarriesTheFigures) {
    const auto r = run({"placement", "--keys", "20000", "--backends", "50", "--algorithms",
                        "jump,maglev", "--json"});
    ASSERT_EQ(r.code, 0) << r.err;
    const auto doc = nlohmann::json::parse(r.out);
    EXPECT_EQ(doc["command"], "placement");
    EXPECT_EQ(doc["parameters"]["backends"][0], 50);
    ASSERT_EQ(doc["rows"].size(), 2u);
    EXPECT_EQ(doc["rows"][0]["algorithm"], "jump");
    EXPECT_TRUE(doc["rows"][0]["weight_moved_pct"].is_null());  // jump has no weights
    EXPECT_TRUE(doc["rows"][1]["lookup_ns"].is_number());
    EXPECT_NEAR(doc["rows"][1]["add_ideal_pct"].get<double>(), 100.0 / 51, 1e-9);
}

TEST(SimCli, TableAndCsvOutput) {
    const auto table = run({"churn", "--keys", "5000", "--backends", "10", "--script",
                            "join,flap:3", "--algorithms", "ring,maglev"});
    ASSERT_EQ(table.code, 0) << table.err;
    EXPECT_EQ(table.out.rfind("step  action", 0), 0u) << table.out;
    EXPECT_NE(table.out.find("rejoin:3"), std::string::npos);
    const auto csv = run({"churn", "--keys", "5000", "--backends", "10", "--script", "join",
                          "--algorithms", "ring", "--csv"});
    ASSERT_EQ(csv.code, 0) << csv.err;
    EXPECT_EQ(csv.out.substr(0, csv.out.find('\n')),
              "step,action,backends,ideal_pct,ring_pct,ideal_cum_pct,ring_cum_pct");
}

TEST(SimCli, PlotWritesSvg) {
    const std::string path =
        testing::TempDir() + "xlb-sim-plot-" + std::to_string(getpid()) + ".svg";
    const auto r = run({"placement", "--keys", "5000", "--backends", "10,20,40", "--algorithms",
                        "ring,jump,maglev", "--plot", path});
    ASSERT_EQ(r.code, 0) << r.err;
    std::ifstream file(path);
    std::stringstream svg;
    svg << file.rdbuf();
    EXPECT_EQ(svg.str().rfind("<svg", 0), 0u);
    EXPECT_NE(svg.str().find("<polyline"), std::string::npos);
    EXPECT_NE(svg.str().find(">maglev<"), std::string::npos);
    std::remove(path.c_str());
}

TEST(SimCli, BadArgumentsGetClearErrors) {
    struct Case {
        std::vector<std::string> args;
        int code;
        std::string message;
    };
    const std::vector<Case> cases{
        {{}, xlb::sim::kExitUsage, "subcommand"},
        {{"placement", "--backends", "0"}, xlb::sim::kExitUsage, "--backends"},
        {{"placement", "--algorithms", "ring,cuckoo"},
         xlb::sim::kExitUsage,
         "unknown algorithm 'cuckoo'"},
        {{"placement", "--keys", "100", "--ring-size", "65536"}, xlb::sim::kExitUsage, "prime"},
        {{"placement", "--keys", "100", "--backends", "10000", "-a", "maglev"},
         xlb::sim::kExitUsage,
         "maglev"},
        {{"placement", "--csv", "--json"}, xlb::sim::kExitUsage, "excludes"},
        {{"placement", "--keys", "100", "--plot", "x.svg"}, xlb::sim::kExitUsage, "sweep"},
        {{"churn", "--keys", "100", "--script", "join,explode"},
         xlb::sim::kExitUsage,
         "unknown step 'explode'"},
        {{"churn", "--keys", "100", "--script", "leave:500"},
         xlb::sim::kExitUsage,
         "no backend 500"},
        {{"balance", "--utilisation", "1.5"}, xlb::sim::kExitUsage, "--utilisation"},
        {{"balance", "--policies", "fastest"}, xlb::sim::kExitUsage, "unknown policy"},
        {{"balance", "--scenarios", "tsunami"}, xlb::sim::kExitUsage, "unknown scenario"},
        {{"frobnicate"}, xlb::sim::kExitUsage, "subcommand"},
        {{"placment"}, xlb::sim::kExitUsage, "unknown verb 'placment': did you mean placement?"},
        {{"placement", "--backnds", "10"},
         xlb::sim::kExitUsage,
         "unknown option '--backnds': did you mean --backends?"},
        {{"balance", "--polices", "p2c"}, xlb::sim::kExitUsage, "did you mean --policies?"},
    };
    // Every one is a wrong command line: exit 2, as in every xlb tool.
    for (const auto& c : cases) {
        const auto r = run(c.args);
        SCOPED_TRACE(c.message);
        EXPECT_EQ(r.code, c.code) << r.err;
        EXPECT_NE(r.err.find(c.message), std::string::npos) << r.err;
        EXPECT_EQ(r.out, "");
    }
}

// Writing the plot is the one failure that is not the command line's.
TEST(SimCli, AnUnwritablePlotIsAFailureNotAUsageError) {
    const auto r = run({"placement", "--keys", "1000", "--backends", "5,10", "--algorithms", "jump",
                        "--plot", "/nonexistent-dir/plot.svg"});
    EXPECT_EQ(r.code, xlb::sim::kExitFailure) << r.err;
    EXPECT_NE(r.err.find("cannot write plot file"), std::string::npos) << r.err;
}

TEST(SimCli, VersionIsTheProjectVersion) {
    const auto r = run({"--version"});
    EXPECT_EQ(r.code, xlb::sim::kExitOk);
    EXPECT_EQ(r.out, std::string("xlb-sim ") + XLB_VERSION + "\n");
    EXPECT_EQ(r.err, "");
}

TEST(SimCli, HelpSucceeds) {
    const auto r = run({"placement", "--help"});
    EXPECT_EQ(r.code, 0);
    EXPECT_NE(r.out.find("--vnodes"), std::string::npos);
}

}  // namespace
