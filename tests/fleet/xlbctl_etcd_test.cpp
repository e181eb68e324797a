// SPDX-License-Identifier: Apache-2.0
// xlbctl against real etcd members (tests/support/etcd_members.h): the
// binary as an operator runs it, writing and reading the fleet's keys.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>

#include "etcd_members.h"
#include "xlb/config/config.h"
#include "xlb/etcd/client.h"
#include "xlb/fleet/values.h"

#ifndef XLBCTL_PATH
#error "XLBCTL_PATH must name the xlbctl binary"
#endif

namespace xlb::fleet {
namespace {

#define EXPECT_HAS(text, part) EXPECT_NE((text).find(part), std::string::npos) << (text)

struct Ran {
    int rc = -1;
    std::string out;  // stdout and stderr
};

Ran run(const std::string& command) {
    Ran r;
    FILE* p = ::popen((command + " 2>&1").c_str(), "r");
    if (!p) return r;
    std::array<char, 4096> buf{};
    while (std::size_t n = std::fread(buf.data(), 1, buf.size(), p)) r.out.append(buf.data(), n);
    const int status = ::pclose(p);
    r.rc = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    return r;
}

const std::string kVip = "198.51.100.10:80/tcp";
const Layout kLayout{"/xlb/t/"};

const char* kFile = R"(interface: eth0
next_hop: {address: 192.0.2.1}
encap_source: {ipv4: 192.0.2.2}
hash_seed: 0x1234abcd
vips:
  - address: 198.51.100.10
    port: 80
    backends:
      - {address: 203.0.113.11}
      - {address: 203.0.113.12, weight: 50}
  - address: 198.51.100.20
    port: 80
    backends:
      - {address: 203.0.113.21}
)";

class XlbctlEtcd : public ::testing::Test {
protected:
    static void SetUpTestSuite() {
        members_ = new test::EtcdMembers(test::EtcdMembersOptions{.members = 1, .tls = true});
        file_ = (std::filesystem::path(members_->dir()) / "xlbd.yaml").string();
        std::ofstream(file_) << kFile;
    }
    static void TearDownTestSuite() {
        delete members_;
        members_ = nullptr;
    }
    void SetUp() override {
        // Each test on its own fleet: a clean prefix.
        prefix_ = "/xlb/t" + std::to_string(++count_) + "/";
        layout_ = Layout{prefix_};
    }
    std::string fleet_args(bool with_cert = true) const {
        std::string a = std::string(XLBCTL_PATH) + " --fleet " + members_->endpoint(0) +
                        " --fleet-prefix " + prefix_ + " --fleet-ca " + members_->ca();
        if (with_cert)
            a += " --fleet-cert " + members_->client_cert() + " --fleet-key " +
                 members_->client_key();
        return a;
    }
    Ran xlbctl(const std::string& args) { return run(fleet_args() + " " + args); }
    etcd::Client client() const {
        etcd::ClientOptions o;
        o.endpoints = members_->endpoints();
        o.ca = members_->ca();
        o.cert = members_->client_cert();
        o.key = members_->client_key();
        return *etcd::Client::open(o);
    }
    std::int64_t store_revision() const { return *client().revision(); }

    static inline test::EtcdMembers* members_ = nullptr;
    static inline std::string file_;
    static inline int count_ = 0;
    std::string prefix_;
    Layout layout_;
};

TEST_F(XlbctlEtcd, ImportDryRunWritesNothingThenEverythingAtOneRevisionOnce) {
    const std::int64_t before = store_revision();
    Ran dry = xlbctl("fleet import " + file_ + " --dry-run");
    ASSERT_EQ(dry.rc, 0) << dry.out;
    EXPECT_HAS(dry.out, "nothing written");
    EXPECT_EQ(store_revision(), before) << "a dry run wrote";

    Ran imported = xlbctl("fleet import " + file_ + " --reason 'move to the fleet'");
    ASSERT_EQ(imported.rc, 0) << imported.out;
    auto keys = client().get_prefix(layout_.desired());
    ASSERT_TRUE(keys.has_value()) << keys.error().message();
    ASSERT_EQ(keys->kvs.size(), 3u);
    for (const etcd::KeyValue& kv : keys->kvs) {
        EXPECT_EQ(kv.mod_revision, keys->kvs[0].mod_revision) << kv.key << ": not one transaction";
        if (kv.key == layout_.global()) {
            auto g = decode_global(kv.value);
            ASSERT_TRUE(g.has_value()) << g.error().message();
            EXPECT_EQ(g->settings.hash_seed, 0x1234abcdu);
            EXPECT_EQ(g->written.reason, "move to the fleet");
        }
    }
    Ran again = xlbctl("fleet import " + file_);
    EXPECT_NE(again.rc, 0) << again.out;
    EXPECT_EQ(client().get_prefix(layout_.desired())->kvs[0].mod_revision,
              keys->kvs[0].mod_revision)
        << "a refused import wrote";

    Ran exported = xlbctl("fleet export");
    ASSERT_EQ(exported.rc, 0) << exported.out;
    auto parsed = config::parse_config(exported.out, "exported.yaml");
    ASSERT_TRUE(parsed.has_value()) << exported.out;
    auto original = config::load_config_file(file_);
    EXPECT_EQ(parsed->vips, original->vips);
    EXPECT_EQ(parsed->settings.hash_seed, original->settings.hash_seed);
}

TEST_F(XlbctlEtcd, TwoWritersOnOneRevisionOneWinsTheOtherIsRefusedNamingIt) {
    ASSERT_EQ(xlbctl("fleet import " + file_).rc, 0);
    const std::int64_t read = client().get(layout_.vip(kVip))->kvs.at(0).mod_revision;
    Ran first = xlbctl("backend set " + kVip + " 203.0.113.11 --weight 5 --if-revision " +
                       std::to_string(read) + " --reason 'first writer'");
    ASSERT_EQ(first.rc, 0) << first.out;
    Ran second = xlbctl("backend set " + kVip + " 203.0.113.12 --weight 7 --if-revision " +
                        std::to_string(read) + " --reason 'second writer'");
    EXPECT_EQ(second.rc, 1) << second.out;
    EXPECT_HAS(second.out, "refused");
    EXPECT_HAS(second.out, "first writer");
    EXPECT_HAS(second.out, "nothing written");
    auto now = decode_vip(client().get(layout_.vip(kVip))->kvs.at(0).value);
    ASSERT_TRUE(now.has_value());
    EXPECT_EQ(now->written.reason, "first writer");
    EXPECT_EQ(now->vip->find_backend(*net::IpAddress::parse("203.0.113.11"))->weight, 5u);
    EXPECT_EQ(now->vip->find_backend(*net::IpAddress::parse("203.0.113.12"))->weight, 50u)
        << "the refused writer's change leaked";
}

TEST_F(XlbctlEtcd, HistoryListsEachChangeWithItsReason) {
    ASSERT_EQ(xlbctl("fleet import " + file_ + " --reason one").rc, 0);
    ASSERT_EQ(xlbctl("backend drain " + kVip + " 203.0.113.11 --reason two").rc, 0);
    ASSERT_EQ(xlbctl("backend enable " + kVip + " 203.0.113.11 --reason three").rc, 0);
    Ran history = xlbctl("fleet history " + kVip);
    ASSERT_EQ(history.rc, 0) << history.out;
    const auto one = history.out.find(" one "), two = history.out.find(" two "),
               three = history.out.find(" three ");
    ASSERT_NE(one, std::string::npos) << history.out;
    ASSERT_NE(two, std::string::npos) << history.out;
    ASSERT_NE(three, std::string::npos) << history.out;
    EXPECT_LT(one, two);
    EXPECT_LT(two, three);
    EXPECT_HAS(history.out, "active -> weight 100, drain");
}

TEST_F(XlbctlEtcd, WithoutAClientCertificateTheStoreRefusesAndTheErrorSaysWhere) {
    Ran refused = run(fleet_args(/*with_cert=*/false) + " fleet status");
    EXPECT_EQ(refused.rc, 2) << refused.out;
    EXPECT_HAS(refused.out, members_->endpoint(0));
    EXPECT_HAS(refused.out, "TLS");
}

}  // namespace
}  // namespace xlb::fleet
