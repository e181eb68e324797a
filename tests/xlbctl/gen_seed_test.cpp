// SPDX-License-Identifier: Apache-2.0
// xlbctl gen-seed: a fresh random hash_seed line that the configuration file
// takes as it is, made without any agent; and the places that document it.
#include <gtest/gtest.h>

#include <fstream>
#include <regex>
#include <set>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "xlb/config/config.h"
#include "xlb/xlbctl/run.h"

namespace xlb::xlbctl {
namespace {

struct Ran {
    int code = 0;
    std::string out, err;
    bool connected = false;
};

Ran run_xlbctl(const std::vector<std::string>& args) {
    Ran ran;
    std::ostringstream out, err;
    Io io;
    io.out = &out;
    io.err = &err;
    io.getenv = [](const char*) -> const char* { return nullptr; };
    io.connect = [&](const Command&) -> std::unique_ptr<Transport> {
        ran.connected = true;
        throw std::runtime_error("gen-seed asked for the agent");
    };
    ran.code = run(args, io);
    ran.out = out.str();
    ran.err = err.str();
    return ran;
}

TEST(GenSeed, PrintsALineTheConfigurationTakes) {
    const Ran r = run_xlbctl({"gen-seed"});
    EXPECT_EQ(r.code, 0) << r.err;
    EXPECT_EQ(r.err, "");
    EXPECT_FALSE(r.connected) << "gen-seed needs no agent";
    std::smatch m;
    ASSERT_TRUE(std::regex_match(r.out, m, std::regex("hash_seed: (0x[0-9a-f]{8})\n"))) << r.out;
    auto parsed = config::parse_config("interface: eth0\nnext_hop: {address: 192.0.2.1}\n" + r.out,
                                       "seeded.yaml");
    ASSERT_TRUE(parsed.has_value()) << parsed.error().front().to_string();
    EXPECT_TRUE(parsed->settings.hash_seed_set);
    EXPECT_EQ(parsed->settings.hash_seed, std::stoul(m[1].str(), nullptr, 16));
    EXPECT_FALSE(config::missing_hash_seed(*parsed, "seeded.yaml").has_value());
}

// Random each time: five runs give five seeds (a repeat by chance: about 1
// in 400 million).
TEST(GenSeed, EveryRunGivesANewSeed) {
    std::set<std::string> seen;
    for (int i = 0; i < 5; ++i) seen.insert(run_xlbctl({"gen-seed"}).out);
    EXPECT_EQ(seen.size(), 5u);
}

TEST(GenSeed, TakesNoArgumentsAndIsListedInHelp) {
    const Ran extra = run_xlbctl({"gen-seed", "42"});
    EXPECT_NE(extra.code, 0);
    EXPECT_EQ(extra.out, "");
    const Ran help = run_xlbctl({"--help"});
    EXPECT_EQ(help.code, 0);
    EXPECT_NE(help.out.find("gen-seed"), std::string::npos) << help.out;
    const Ran own = run_xlbctl({"gen-seed", "--help"});
    EXPECT_EQ(own.code, 0);
    EXPECT_NE(own.out.find("same seed"), std::string::npos) << own.out;
}

std::string read_source(const std::string& relative) {
    std::ifstream in(std::string(XLB_SOURCE_DIR) + "/" + relative);
    std::stringstream s;
    s << in.rdbuf();
    return s.str();
}

TEST(GenSeed, IsDocumentedAndCompleted) {
    for (const char* doc : {"docs/xlbctl.md", "docs/config.md", "README.md",
                            "etc/xlbd.example.yaml", "scripts/xlbctl.bash-completion"})
        EXPECT_NE(read_source(doc).find("gen-seed"), std::string::npos) << doc;
    EXPECT_NE(read_source("docs/xlbctl.8").find("gen\\-seed"), std::string::npos);
}

}  // namespace
}  // namespace xlb::xlbctl
