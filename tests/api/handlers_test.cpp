// SPDX-License-Identifier: Apache-2.0
// The API server's inside: the route table against docs/api.md, and the one
// change path every change (real or dry run) goes through.
#include "handlers.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <fstream>
#include <iterator>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <utility>

#include "xlb/abi.h"
#include "xlb/api/data_plane_view.h"
#include "xlb/config/config.h"

#ifndef XLB_SOURCE_DIR
#error "XLB_SOURCE_DIR must be defined (the source tree, to read docs/api.md)"
#endif

namespace xlb::api::detail {
namespace {

using Endpoint = std::pair<std::string, std::string>;  // method, path

// Every "### METHOD /path..." heading of docs/api.md (several per heading
// when separated by ", "), without query strings or optional parts.
std::set<Endpoint> documented_endpoints() {
    std::ifstream in(std::string(XLB_SOURCE_DIR) + "/docs/api.md");
    EXPECT_TRUE(in) << "docs/api.md";
    std::set<Endpoint> out;
    const std::regex endpoint(R"((GET|POST|PATCH|DELETE) (/v1/[a-z/]+))");
    std::string line;
    while (std::getline(in, line)) {
        if (!line.starts_with("### ")) continue;
        for (std::sregex_iterator it(line.begin(), line.end(), endpoint), end; it != end; ++it)
            out.emplace((*it)[1].str(), (*it)[2].str());
    }
    return out;
}

TEST(ApiRoutes, TheTableIsWhatDocsApiMdDocuments) {
    std::set<Endpoint> table;
    for (const Route& r : routes()) {
        EXPECT_TRUE(table.emplace(r.method, r.path).second)
            << "listed twice: " << r.method << " " << r.path;
    }
    const std::set<Endpoint> documented = documented_endpoints();
    for (const auto& [method, path] : table)
        EXPECT_TRUE(documented.contains({method, path}))
            << "undocumented: " << method << " " << path;
    for (const auto& [method, path] : documented)
        EXPECT_TRUE(table.contains({method, path})) << "no route: " << method << " " << path;
    EXPECT_EQ(table.size(), 24u);
}

config::VipSpec web_vip() {
    config::VipSpec v;
    v.address = *net::IpAddress::parse("198.51.100.10");
    v.port = 80;
    v.name = "web";
    v.ring_size = 251;
    config::BackendSpec b;
    b.address = *net::IpAddress::parse("203.0.113.11");
    v.backends.push_back(b);
    return v;
}

// validate_change, counting its calls.
struct CountingValidator {
    std::shared_ptr<int> calls = std::make_shared<int>(0);
    Validator validator() const {
        return [calls = calls](const Change& change, const config::Settings& settings) {
            ++*calls;
            return validate_change(change, settings);
        };
    }
};

// PATCH /v1/vip is checked once: its own order (invalid before disruptive)
// comes from the change path, not from a second validation of its own.
// Every outcome the data path counts, by the name stats and metrics give
// it, has its row in the troubleshooting table: meaning, cause, what to do.
TEST(Docs, TroubleshootingHasARowForEveryOutcome) {
    std::ifstream in(std::string(XLB_SOURCE_DIR) + "/docs/troubleshooting.md");
    ASSERT_TRUE(in) << "docs/troubleshooting.md";
    const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    for (std::uint32_t o = 0; o < XLB_OUT__MAX; ++o) {
        const std::string row = std::string("\n| `") + outcome_name(o) + "` |";
        EXPECT_NE(text.find(row), std::string::npos) << "no row for outcome " << outcome_name(o);
    }
}

TEST(ApiChangePath, APatchIsValidatedOnceWhateverItsOutcome) {
    config::Settings settings;
    settings.encap_source.ipv4 = *net::IpAddress::parse("192.0.2.1");
    const std::string key = web_vip().key();
    struct Case {
        const char* patch;
        bool allow_disruptive;
        int status;  // 0: accepted
        const char* says;
    };
    for (const Case& c : {
             Case{R"({"name": "www"})", false, 0, ""},
             Case{R"({"ring_size": 257})", true, 0, ""},
             Case{R"({"ring_size": 257})", false, 409,
                  "refused: VIP 198.51.100.10:80/tcp: "
                  "ring_size 251 -> 257"},
             // invalid and disruptive: the invalid value is what is reported
             Case{R"({"ring_size": 256})", false, 400, "ring_size"},
             Case{R"({"ring_size": 256})", true, 400, "ring_size"},
         }) {
        SCOPED_TRACE(c.patch);
        CountingValidator counting;
        auto changes = std::make_shared<json>();
        auto change =
            checked_change(vip_patch(key, json::parse(c.patch), c.allow_disruptive, changes),
                           {web_vip()}, settings, counting.validator());
        EXPECT_EQ(*counting.calls, 1);
        if (c.status == 0) {
            ASSERT_TRUE(change) << change.error().message;
            EXPECT_FALSE(changes->empty());
        } else {
            ASSERT_FALSE(change);
            EXPECT_EQ(change.error().status, c.status);
            EXPECT_NE(change.error().message.find(c.says), std::string::npos)
                << change.error().message;
        }
    }
}

// The patch itself does not validate (that would be a second validation):
// with a validator that accepts anything, an invalid value gets through, and
// the disruptive refusal still comes after the validator's verdict.
TEST(ApiChangePath, ThePatchLeavesValidationToThePath) {
    const Validator accept_all = [](const Change&, const config::Settings&) {
        return std::optional<HttpError>{};
    };
    const std::string key = web_vip().key();
    auto accepted = checked_change(
        vip_patch(key, json::parse(R"({"ring_size": 256})"), true, std::make_shared<json>()),
        {web_vip()}, config::Settings{}, accept_all);
    ASSERT_TRUE(accepted) << accepted.error().message;
    EXPECT_EQ(accepted->vips.at(0).ring_size, 256u);

    const Validator reject_all = [](const Change&, const config::Settings&) {
        return std::optional<HttpError>{HttpError{400, "invalid by the validator"}};
    };
    auto refused = checked_change(
        vip_patch(key, json::parse(R"({"ring_size": 257})"), false, std::make_shared<json>()),
        {web_vip()}, config::Settings{}, reject_all);
    ASSERT_FALSE(refused);
    EXPECT_EQ(refused.error().message, "invalid by the validator");
}

// A change that its mutator refuses outright (unknown VIP) is not validated.
TEST(ApiChangePath, ARefusedMutationIsNotValidated) {
    CountingValidator counting;
    auto change = checked_change(vip_patch("198.51.100.99:80/tcp", json::parse(R"({"name": "x"})"),
                                           false, std::make_shared<json>()),
                                 {web_vip()}, config::Settings{}, counting.validator());
    ASSERT_FALSE(change);
    EXPECT_EQ(change.error().status, 404);
    EXPECT_EQ(*counting.calls, 0);
}

}  // namespace
}  // namespace xlb::api::detail
