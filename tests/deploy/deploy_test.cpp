// SPDX-License-Identifier: Apache-2.0
// `xlb-decap setup` on a backend: a namespace of its own with eth0 (one end of
// a veth pair), an interface named as a VLAN is, and lo:
//
//   netns xlbdep-<pid>-<n>:  eth0 <--veth--> peer0,  eth0.100 <--veth--> peer1
//
// setup applies every setting, `--check` then passes; each setting broken in
// turn makes `--check` report exactly that one with a fix that, typed as
// printed, repairs it (and setup repairs it too). The namespace is removed
// whatever the outcome.
#include <gtest/gtest.h>

#include <sstream>
#include <string>
#include <vector>

#include "netns.h"

namespace {

using xlb::test::CommandResult;
using xlb::test::Netns;
using xlb::test::run_command;
using xlb::test::run_command_ok;

const std::string kVip4 = "198.51.100.10";
const std::string kVip6 = "2001:db8:f::10";

class Backend : public ::testing::Test {
protected:
    void SetUp() override {
        xlb::test::sweep_stale_netns("xlbdep");
        ns_ = std::make_unique<Netns>(xlb::test::unique_netns_prefix("xlbdep"));
        ns_->ip("link set lo up");
        ns_->ip("link add eth0 type veth peer name peer0");
        ns_->ip("link set eth0 up");
        ns_->ip("link set peer0 up");
        // VLAN devices are named IFACE.ID; the dot is what matters to the
        // sysctl names (and the test kernel may lack 8021q), so a veth.
        ns_->ip("link add eth0.100 type veth peer name peer1");
        ns_->ip("link set eth0.100 up");
        // The settings as a fresh host has them, and strict rp_filter (as
        // several distributions ship it), whatever this machine's defaults.
        in_ns(
            "sysctl -qw net.ipv4.conf.all.arp_ignore=0 net.ipv4.conf.all.arp_announce=0 "
            "net.ipv4.conf.all.rp_filter=1");
    }

    std::string in_ns(const std::string& command) {
        return run_command_ok("ip netns exec " + ns_->name() + " " + command);
    }

    CommandResult decap(const std::string& args) {
        return run_command("ip netns exec " + ns_->name() + " " + XLB_DECAP_PATH + " " + args);
    }

    std::unique_ptr<Netns> ns_;
};

std::vector<std::string> lines_with(const std::string& text, const std::string& needle) {
    std::vector<std::string> out;
    std::istringstream in(text);
    for (std::string line; std::getline(in, line);)
        if (line.find(needle) != std::string::npos) out.push_back(line);
    return out;
}

const std::string kSetup =
    "setup --interface eth0 --vip " + kVip4 + " --vip " + kVip6 + " --mtu 1600";

struct Breakage {
    std::string name;
    std::string break_it;  // run in the namespace
    std::string setting;   // the one --check must report
    std::string fix;       // the fix it must print
    bool setup_fixes = true;
};

TEST_F(Backend, SetupThenCheckPassesAndEachBrokenSettingIsReportedWithItsFix) {
    const CommandResult before = decap(kSetup + " --check");
    EXPECT_EQ(before.rc, 1) << before.out;
    EXPECT_EQ(lines_with(before.out, "wrong: ").size(), 7u) << before.out;

    const CommandResult setup = decap(kSetup);
    ASSERT_EQ(setup.rc, 0) << setup.out;
    EXPECT_EQ(lines_with(setup.out, "still to do: decapsulator on eth0").size(), 1u) << setup.out;
    // Only the decapsulator is left: a service's job.
    const CommandResult no_decap = decap(kSetup + " --check");
    EXPECT_EQ(no_decap.rc, 1);
    ASSERT_EQ(lines_with(no_decap.out, "wrong: ").size(), 1u) << no_decap.out;
    EXPECT_NE(no_decap.out.find("wrong: decapsulator on eth0: no XDP program"), std::string::npos)
        << no_decap.out;

    const std::string attach = std::string(XLB_DECAP_PATH) + " -i eth0 -a 203.0.113.11 --keep -q";
    in_ns(attach);
    const CommandResult good = decap(kSetup + " --check");
    ASSERT_EQ(good.rc, 0) << good.out;
    EXPECT_EQ(lines_with(good.out, "wrong: ").size(), 0u) << good.out;
    EXPECT_NE(good.out.find("every setting is right"), std::string::npos) << good.out;
    // Applying again changes nothing.
    const CommandResult again = decap(kSetup);
    EXPECT_EQ(again.rc, 0) << again.out;
    EXPECT_NE(again.out.find("0 settings changed"), std::string::npos) << again.out;

    const std::vector<Breakage> cases = {
        {"VIP v4 gone", "ip address del " + kVip4 + "/32 dev lo", "VIP " + kVip4 + " on lo",
         "ip address add " + kVip4 + "/32 dev lo"},
        {"VIP v6 gone", "ip address del " + kVip6 + "/128 dev lo", "VIP " + kVip6 + " on lo",
         "ip address add " + kVip6 + "/128 dev lo"},
        {"arp_ignore all 0", "sysctl -qw net.ipv4.conf.all.arp_ignore=0", "arp_ignore on eth0",
         "sysctl -w net.ipv4.conf.all.arp_ignore=1"},
        {"arp_ignore eth0 8", "sysctl -qw net.ipv4.conf.eth0.arp_ignore=8", "arp_ignore on eth0",
         "sysctl -w net.ipv4.conf.eth0.arp_ignore=0"},
        {"arp_announce all 1", "sysctl -qw net.ipv4.conf.all.arp_announce=1",
         "arp_announce on eth0", "sysctl -w net.ipv4.conf.all.arp_announce=2"},
        {"rp_filter all strict", "sysctl -qw net.ipv4.conf.all.rp_filter=1", "rp_filter on eth0",
         "sysctl -w net.ipv4.conf.all.rp_filter=2"},
        {"rp_filter eth0 strict",
         "sysctl -qw net.ipv4.conf.all.rp_filter=0 net.ipv4.conf.eth0.rp_filter=1",
         "rp_filter on eth0", "sysctl -w net.ipv4.conf.eth0.rp_filter=2"},
        {"MTU too small", "ip link set dev eth0 mtu 1500", "MTU of eth0",
         "ip link set dev eth0 mtu 1600"},
        {"decapsulator detached", std::string(XLB_DECAP_PATH) + " -i eth0 --detach",
         "decapsulator on eth0", "systemctl enable --now xlb-decap@eth0", false},
    };
    for (const Breakage& c : cases) {
        SCOPED_TRACE(c.name);
        for (const bool by_setup : {false, true}) {
            if (by_setup && !c.setup_fixes) continue;
            in_ns(c.break_it);
            const CommandResult r = decap(kSetup + " --check");
            EXPECT_EQ(r.rc, 1) << r.out;
            const auto wrong = lines_with(r.out, "wrong: ");
            ASSERT_EQ(wrong.size(), 1u) << r.out;
            EXPECT_EQ(wrong[0].rfind("xlb-decap: wrong: " + c.setting + ": ", 0), 0u) << wrong[0];
            const std::size_t at = wrong[0].find("; fix: ");
            ASSERT_NE(at, std::string::npos) << wrong[0];
            const std::string fix = wrong[0].substr(at + 7);
            EXPECT_EQ(fix.rfind(c.fix, 0), 0u) << fix;
            EXPECT_NE(r.out.find("1 setting wrong"), std::string::npos) << r.out;
            if (!c.setup_fixes) {
                in_ns(attach);  // the unit's job, here by hand
            } else if (by_setup) {
                const CommandResult s = decap(kSetup);
                EXPECT_EQ(s.rc, 0) << s.out;
                EXPECT_NE(s.out.find("setup: " + c.fix), std::string::npos) << s.out;
            } else {
                in_ns(fix);  // the fix as printed, typed by an operator
            }
            const CommandResult after = decap(kSetup + " --check");
            EXPECT_EQ(after.rc, 0) << after.out;
        }
    }
    in_ns(std::string(XLB_DECAP_PATH) + " -i eth0 --detach");
}

// A VLAN's name (eth0.100): sysctl(8) spells its dot as a slash, and the fix printed
// is one sysctl accepts.
TEST_F(Backend, VlanStyleNameGetsFixesSysctlAccepts) {
    const std::string vlan_setup = "setup --interface eth0.100 --vip " + kVip4 + " --decap kernel";
    ASSERT_EQ(decap(vlan_setup).rc, 0);
    in_ns("sysctl -qw net.ipv4.conf.all.rp_filter=0");
    in_ns("sysctl -qw net/ipv4/conf/eth0.100/rp_filter=1");
    const CommandResult r = decap(vlan_setup + " --check");
    EXPECT_EQ(r.rc, 1) << r.out;
    const auto wrong = lines_with(r.out, "wrong: ");
    ASSERT_EQ(wrong.size(), 1u) << r.out;
    const std::string expected_fix = "sysctl -w net.ipv4.conf.eth0/100.rp_filter=2";
    EXPECT_NE(wrong[0].find("wrong: rp_filter on eth0.100: 1, strict"), std::string::npos)
        << wrong[0];
    EXPECT_NE(wrong[0].find("; fix: " + expected_fix), std::string::npos) << wrong[0];
    in_ns(expected_fix);
    EXPECT_EQ(decap(vlan_setup + " --check").rc, 0);
}

// With IPv6 VIPs only there is no ARP and no reverse-path filter to set.
TEST_F(Backend, Ipv6OnlyNeedsOnlyTheVipOnLo) {
    const std::string v6_setup = "setup --interface eth0 --vip " + kVip6 + " --decap kernel";
    const CommandResult before = decap(v6_setup + " --check");
    EXPECT_EQ(before.rc, 1);
    const auto wrong = lines_with(before.out, "wrong: ");
    ASSERT_EQ(wrong.size(), 1u) << before.out;
    EXPECT_NE(wrong[0].find("VIP " + kVip6 + " on lo"), std::string::npos) << wrong[0];
    ASSERT_EQ(decap(v6_setup).rc, 0);
    EXPECT_EQ(decap(v6_setup + " --check").rc, 0);
    EXPECT_EQ(in_ns("sysctl -n net.ipv4.conf.all.arp_ignore"), "0\n") << "left alone";
}

TEST_F(Backend, UnknownInterfaceIsNamed) {
    const CommandResult r = decap("setup --interface nosuch0 --vip " + kVip4 + " --check");
    EXPECT_EQ(r.rc, 1) << r.out;
    EXPECT_NE(r.out.find("no such interface nosuch0: No such device"), std::string::npos) << r.out;
}

}  // namespace
