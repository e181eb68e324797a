// SPDX-License-Identifier: Apache-2.0
// The data path's set-up (xlb/datapath/setup.h): every builder field by field
// and in byte order, the Maglev identity's spelling (a contract between LB
// hosts), and the rings the demo and the XDP benchmark build being the ones
// xlbd's reconciler publishes for the same backends.
#include <arpa/inet.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include "recording_data_plane.h"
#include "xlb/control/data_plane.h"
#include "xlb/control/reconciler.h"
#include "xlb/datapath/setup.h"
#include "xlb/flow_hash.h"

namespace xlb::datapath {
namespace {

net::IpAddress ip(const char* s) { return *net::IpAddress::parse(s); }

// The bytes of a map field as the kernel sees them.
template <typename T>
std::vector<std::uint8_t> bytes_of(const T& v) {
    const auto* p = reinterpret_cast<const std::uint8_t*>(&v);
    return {p, p + sizeof(T)};
}

// ---- the Maglev identity: golden spellings --------------------------------

// Changing any of these moves flows between backends on a mixed fleet of LB
// hosts: every host must spell a backend the same way. IPv6 follows RFC 5952
// (lowercase, no leading zeros, "::" for the longest run of two or more zero
// fields, the first on a tie; IPv4-mapped addresses dotted).
struct GoldenIdentity {
    const char* address;
    const char* hash_key;
    const char* identity;
};

constexpr GoldenIdentity kGoldenIdentities[] = {
    {"10.0.0.1", "", "10.0.0.1"},
    {"203.0.113.11", "", "203.0.113.11"},
    {"0.0.0.0", "", "0.0.0.0"},
    {"2001:db8::1", "", "2001:db8::1"},
    {"2001:0DB8:0000:0000:0000:0000:0000:0001", "", "2001:db8::1"},
    {"2001:db8:0:0:1:0:0:1", "", "2001:db8::1:0:0:1"},
    {"2001:db8:0:1:1:1:1:1", "", "2001:db8:0:1:1:1:1:1"},
    {"2001:0:0:1:0:0:0:1", "", "2001:0:0:1::1"},
    {"fe80:0:0:0:ABCD:00EF:0:0", "", "fe80::abcd:ef:0:0"},
    {"2001:db8:b::100", "", "2001:db8:b::100"},
    {"::", "", "::"},
    {"::1", "", "::1"},
    {"1::", "", "1::"},
    {"fe80::", "", "fe80::"},
    {"::ffff:192.0.2.1", "", "::ffff:192.0.2.1"},
    // hash_key wins, verbatim, whatever the address
    {"10.0.0.1", "web-1", "web-1"},
    {"2001:db8::1", "rack7/web 1", "rack7/web 1"},
};

TEST(MaglevIdentity, GoldenSpellings) {
    for (const auto& g : kGoldenIdentities) {
        EXPECT_EQ(maglev_identity(ip(g.address), g.hash_key), g.identity)
            << g.address << " hash_key '" << g.hash_key << "'";
    }
}

TEST(MaglevIdentity, IsWhatTheConfigurationsBackendHashes) {
    config::BackendSpec b;
    b.address = ip("2001:db8::a");
    EXPECT_EQ(b.identity(), maglev_identity(b.address, ""));
    b.hash_key = "db-primary";
    EXPECT_EQ(b.identity(), "db-primary");
}

// ---- the builders ----------------------------------------------------------

TEST(DatapathSetup, ConfigFromSettings) {
    config::Settings s;
    s.hash_seed = 0x01020304;
    s.mtu = 9000;
    s.icmp_too_big = true;
    s.encap_source.ipv4 = ip("203.0.113.0");
    s.encap_source.ipv4_prefix_len = 24;
    s.encap_source.ipv6 = ip("2001:db8:e::");
    s.encap_source.ipv6_prefix_len = 112;
    const net::MacAddress mac{0x02, 0x11, 0x22, 0x33, 0x44, 0x55};
    const xlb_config c = make_config(s, mac);
    EXPECT_EQ(c.magic, XLB_CONFIG_MAGIC);
    EXPECT_EQ(c.version, XLB_CONFIG_VERSION);
    EXPECT_EQ(c.hash_seed, 0x01020304u);
    EXPECT_EQ(c.flags, static_cast<std::uint32_t>(XLB_CFG_F_ICMP_TOO_BIG));
    EXPECT_EQ(c.src_v4, htonl(0xcb007100));  // 203.0.113.0, network order
    EXPECT_EQ(c.src_v4_prefix_len, 24);
    EXPECT_EQ(c.src_v6[0], htonl(0x20010db8));
    EXPECT_EQ(c.src_v6[1], htonl(0x000e0000));
    EXPECT_EQ(c.src_v6[2], 0u);
    EXPECT_EQ(c.src_v6[3], 0u);
    EXPECT_EQ(c.src_v6_prefix_len, 112);
    EXPECT_EQ(std::vector<std::uint8_t>(c.next_hop_mac, c.next_hop_mac + 6),
              std::vector<std::uint8_t>(mac.begin(), mac.end()));
    EXPECT_EQ(c.mtu, 9000);
    EXPECT_EQ(c.ct_insert_rate, 0u);  // no budget given: unlimited
    EXPECT_EQ(c.ct_insert_burst, 0u);
    s.encap = config::Encap::kGue;
    s.gue_port = 7000;
    const xlb_config gue = make_config(s, mac);
    EXPECT_EQ(gue.flags, static_cast<std::uint32_t>(XLB_CFG_F_ICMP_TOO_BIG | XLB_CFG_F_GUE));
    EXPECT_EQ(gue.gue_port, 7000) << "host order";
    const xlb_config limited = make_config(s, mac, {.rate = 300, .burst = 50});
    EXPECT_EQ(limited.ct_insert_rate, 300u);
    EXPECT_EQ(limited.ct_insert_burst, 50u);

    config::Settings bare;  // no sources: 0 with a full prefix; ICMP off
    bare.icmp_too_big = false;
    const xlb_config b = make_config(bare, mac);
    EXPECT_EQ(b.flags, 0u);
    EXPECT_EQ(b.gue_port, XLB_GUE_PORT_DEFAULT)
        << "the config's default is the decapsulator's; unused without XLB_CFG_F_GUE";
    EXPECT_EQ(b.src_v4, 0u);
    EXPECT_EQ(b.src_v4_prefix_len, 32);
    EXPECT_EQ(b.src_v6_prefix_len, 128);
}

TEST(DatapathSetup, InsertBudgetIsDerivedFromTheTable) {
    // 2% of the table per second over all CPUs, one second's worth of burst.
    CtBudget b = ct_insert_budget(0, 0, 1'000'000, 4);
    EXPECT_EQ(b.rate, 5000u);
    EXPECT_EQ(b.burst, 5000u);
    b = ct_insert_budget(0, 0, 65536, 3);  // 1310 / 3, rounded down
    EXPECT_EQ(b.rate, 436u);
    EXPECT_EQ(b.burst, 436u);
    // A small table on many CPUs still admits one entry per second per CPU.
    b = ct_insert_budget(0, 0, 100, 64);
    EXPECT_EQ(b.rate, 1u);
    EXPECT_EQ(b.burst, 1u);
    b = ct_insert_budget(0, 0, 1, 0);  // no CPU count: as one CPU
    EXPECT_EQ(b.rate, 1u);
    // No overflow for the largest tables.
    b = ct_insert_budget(0, 0, 0xffffffffU, 1);
    EXPECT_EQ(b.rate, 85899345u);
}

TEST(DatapathSetup, InsertBudgetSettingsWin) {
    CtBudget b = ct_insert_budget(1000, 0, 1'000'000, 4);  // burst: the rate
    EXPECT_EQ(b.rate, 1000u);
    EXPECT_EQ(b.burst, 1000u);
    b = ct_insert_budget(1000, 10, 1'000'000, 4);
    EXPECT_EQ(b.rate, 1000u);
    EXPECT_EQ(b.burst, 10u);
    b = ct_insert_budget(0, 7, 1'000'000, 4);  // derived rate, set burst
    EXPECT_EQ(b.rate, 5000u);
    EXPECT_EQ(b.burst, 7u);
}

TEST(DatapathSetup, VipKeyValueAndFlags) {
    config::VipSpec v;
    v.address = ip("198.51.100.10");
    v.port = 443;
    v.protocol = config::Protocol::kUdp;
    const xlb_vip_key k = vip_key(v);
    EXPECT_EQ(k.addr[0], htonl(0xc633640a));
    EXPECT_EQ(k.addr[1] | k.addr[2] | k.addr[3], 0u);
    EXPECT_EQ(bytes_of(k.port), (std::vector<std::uint8_t>{0x01, 0xbb}));  // 443, big-endian
    EXPECT_EQ(k.proto, 17);
    EXPECT_EQ(k.family, XLB_FAMILY_V4);
    EXPECT_EQ(bytes_of(k), bytes_of(vip_key(ip("198.51.100.10"), 443, 17)));

    const xlb_vip_key k6 = vip_key(ip("2001:db8:f::10"), 0, 6);
    EXPECT_EQ(k6.addr[0], htonl(0x20010db8));
    EXPECT_EQ(k6.addr[1], htonl(0x000f0000));
    EXPECT_EQ(k6.addr[3], htonl(0x10));
    EXPECT_EQ(k6.port, 0);
    EXPECT_EQ(k6.family, XLB_FAMILY_V6);

    EXPECT_EQ(vip_flags(v), 0u);
    v.conntrack = false;
    EXPECT_EQ(vip_flags(v), static_cast<std::uint32_t>(XLB_VIP_F_NO_CONNTRACK));
    v.hash = config::HashMode::kSourceIp;
    EXPECT_EQ(vip_flags(v),
              static_cast<std::uint32_t>(XLB_VIP_F_NO_CONNTRACK | XLB_VIP_F_HASH_SRC_ONLY));
    const xlb_vip_value value = vip_value(v, 7);
    EXPECT_EQ(value.vip_id, 7u);
    EXPECT_EQ(value.flags, vip_flags(v));
}

TEST(DatapathSetup, VipFlagsFollowCookiesAndSourceLists) {
    config::VipSpec v;
    v.address = ip("198.51.100.10");
    v.port = 443;
    config::BackendSpec b;
    b.address = ip("203.0.113.11");
    b.cookie_acks = true;
    v.backends.push_back(b);
    // Unset: auto where possible (gue), off with ipip.
    EXPECT_EQ(vip_flags(v, config::Encap::kGue),
              static_cast<std::uint32_t>(XLB_VIP_F_COOKIES_AUTO));
    EXPECT_EQ(vip_flags(v, config::Encap::kIpip), 0u);
    v.syn_cookies = config::SynCookies::kAlways;
    EXPECT_EQ(vip_flags(v, config::Encap::kGue),
              static_cast<std::uint32_t>(XLB_VIP_F_COOKIES_ALWAYS));
    v.syn_cookies = config::SynCookies::kOff;
    EXPECT_EQ(vip_flags(v, config::Encap::kGue), 0u);
    v.syn_cookies.reset();
    v.backends[0].cookie_acks = false;
    EXPECT_EQ(vip_flags(v, config::Encap::kGue), 0u);
    v.backends[0].state = config::AdminState::kDisabled;
    EXPECT_EQ(vip_flags(v, config::Encap::kGue),
              static_cast<std::uint32_t>(XLB_VIP_F_COOKIES_AUTO));
    v.conntrack = false;
    EXPECT_EQ(vip_flags(v, config::Encap::kGue),
              static_cast<std::uint32_t>(XLB_VIP_F_NO_CONNTRACK));
    v.conntrack = true;
    v.protocol = config::Protocol::kUdp;
    EXPECT_EQ(vip_flags(v, config::Encap::kGue), 0u);
    v.deny_sources.push_back(*net::Prefix::parse("192.0.2.0/24"));
    EXPECT_EQ(vip_flags(v, config::Encap::kGue),
              static_cast<std::uint32_t>(XLB_VIP_F_SOURCE_RANGES));
    v.deny_sources.clear();
    v.allow_sources.push_back(*net::Prefix::parse("192.0.2.0/24"));
    EXPECT_EQ(vip_value(v, 3, config::Encap::kGue).flags,
              static_cast<std::uint32_t>(XLB_VIP_F_SOURCE_RANGES));
}

// The trie entries of a VIP as "prefix verdict" lines, the key decoded back.
std::vector<std::string> entries_of(const config::VipSpec& vip, std::uint32_t vip_id) {
    std::vector<std::string> out;
    for (const SourceRangeEntry& e : source_range_entries(vip, vip_id)) {
        EXPECT_EQ(ntohl(e.key.vip_id), vip_id);
        EXPECT_GE(e.key.prefixlen, 32u);
        const auto* b = reinterpret_cast<const std::uint8_t*>(e.key.addr);
        const bool v4 = vip.address.is_v4();
        std::string text;
        if (v4) {
            // ::ffff:a.b.c.d, the length counted from the IPv6 address's start
            for (int i = 0; i < 10; ++i) EXPECT_EQ(b[i], 0) << i;
            EXPECT_EQ(b[10], 0xff);
            EXPECT_EQ(b[11], 0xff);
            EXPECT_GE(e.key.prefixlen, 32u + 96u);
            text = net::IpAddress::v4(b[12], b[13], b[14], b[15]).to_string() + "/" +
                   std::to_string(e.key.prefixlen - 32 - 96);
        } else {
            net::IpAddress a;
            a.family = 6;
            std::memcpy(a.bytes.data(), b, 16);
            text = a.to_string() + "/" + std::to_string(e.key.prefixlen - 32);
        }
        text += e.verdict == XLB_SOURCE_ALLOW  ? " allow"
                : e.verdict == XLB_SOURCE_DENY ? " deny"
                                               : " ?";
        out.push_back(text);
    }
    std::sort(out.begin(), out.end());
    return out;
}

config::VipSpec vip_with(const char* address, std::vector<const char*> allow,
                         std::vector<const char*> deny) {
    config::VipSpec v;
    v.address = ip(address);
    for (const char* p : allow) v.allow_sources.push_back(*net::Prefix::parse(p));
    for (const char* p : deny) v.deny_sources.push_back(*net::Prefix::parse(p));
    return v;
}

using Lines = std::vector<std::string>;

TEST(SourceRanges, NoListsNoEntries) {
    EXPECT_TRUE(source_range_entries(vip_with("198.51.100.10", {}, {}), 1).empty());
}

TEST(SourceRanges, AllowListDeniesTheRestOfTheFamily) {
    EXPECT_EQ(entries_of(vip_with("198.51.100.10", {"192.0.2.0/24", "198.18.0.7"}, {}), 5),
              (Lines{"0.0.0.0/0 deny", "192.0.2.0/24 allow", "198.18.0.7/32 allow"}));
}

TEST(SourceRanges, DenyListAloneAllowsTheRest) {
    EXPECT_EQ(entries_of(vip_with("198.51.100.10", {}, {"192.0.2.0/24", "10.0.0.0/8"}), 5),
              (Lines{"10.0.0.0/8 deny", "192.0.2.0/24 deny"}));
}

TEST(SourceRanges, DenyInsideAllowIsCarvedOut) {
    EXPECT_EQ(entries_of(vip_with("198.51.100.10", {"192.0.2.0/24"}, {"192.0.2.128/25"}), 5),
              (Lines{"0.0.0.0/0 deny", "192.0.2.0/24 allow", "192.0.2.128/25 deny"}));
}

TEST(SourceRanges, AllowInsideDenyStaysDenied) {
    // A more specific ALLOW would win the longest match: it is left out.
    EXPECT_EQ(
        entries_of(vip_with("198.51.100.10", {"10.1.0.0/16", "192.0.2.0/24"}, {"10.0.0.0/8"}), 5),
        (Lines{"0.0.0.0/0 deny", "10.0.0.0/8 deny", "192.0.2.0/24 allow"}));
}

TEST(SourceRanges, AllowingTheWholeSpaceKeepsItsAllow) {
    EXPECT_EQ(entries_of(vip_with("198.51.100.10", {"0.0.0.0/0"}, {"192.0.2.0/24"}), 5),
              (Lines{"0.0.0.0/0 allow", "192.0.2.0/24 deny"}));
}

TEST(SourceRanges, Ipv6PrefixesCountFromTheAddress) {
    EXPECT_EQ(entries_of(vip_with("2001:db8::10", {"2001:db8:c::/48"}, {"2001:db8:c:1::/64"}), 9),
              (Lines{"2001:db8:c:1::/64 deny", "2001:db8:c::/48 allow", "::/0 deny"}));
    const auto raw = source_range_entries(vip_with("2001:db8::10", {}, {"2001:db8:c::/48"}), 9);
    ASSERT_EQ(raw.size(), 1u);
    EXPECT_EQ(raw[0].key.prefixlen, 32u + 48u);
    EXPECT_EQ(raw[0].key.addr[0], htonl(0x20010db8));
    EXPECT_EQ(raw[0].key.addr[1], htonl(0x000c0000));
}

TEST(SourceRanges, TheVipIdIsBigEndianInTheKey) {
    const auto raw =
        source_range_entries(vip_with("198.51.100.10", {}, {"192.0.2.0/24"}), 0x01020304);
    ASSERT_EQ(raw.size(), 1u);
    const auto bytes = bytes_of(raw[0].key);
    EXPECT_EQ((std::vector<std::uint8_t>(bytes.begin() + 4, bytes.begin() + 8)),
              (std::vector<std::uint8_t>{1, 2, 3, 4}));
    EXPECT_EQ(raw[0].key.prefixlen, 32u + 96u + 24u);
}

// The reconciler never lets a packet see the source flag without the
// entries: entries before the flag, the flag's removal before theirs.
TEST(SourceRanges, ReconcilerWritesEntriesAroundTheFlag) {
    config::VipSpec vip = vip_with("198.51.100.10", {"192.0.2.0/24"}, {});
    vip.port = 80;
    vip.health_check.type = config::HealthCheckType::kNone;
    config::BackendSpec b;
    b.address = ip("203.0.113.11");
    vip.backends.push_back(b);
    test::RecordingDataPlane dp;
    control::Reconciler rec{dp, {16, 1024}};
    auto settle = [&] {
        for (int i = 0; i < 50; ++i) {
            auto r = rec.reconcile(control::Clock::now());
            ASSERT_TRUE(r) << r.error().message();
            if (rec.all_published()) return;
            std::this_thread::sleep_for(std::chrono::milliseconds(10));
        }
        FAIL() << "not published";
    };
    rec.set_vips({vip});
    settle();
    ASSERT_EQ(dp.events.size(), 2u);
    const std::uint32_t id = dp.vip_flags.begin()->first;
    const std::string sid = std::to_string(id);
    EXPECT_EQ(dp.events[0], "set_source_ranges " + sid + " 2");
    EXPECT_EQ(dp.events[1], "put_vip " + sid + " flags " + std::to_string(XLB_VIP_F_SOURCE_RANGES));
    EXPECT_EQ(dp.source_ranges[id], source_range_entries(vip, id));

    // Narrowed: new entries, the flag unchanged (no VIP write).
    dp.events.clear();
    vip.deny_sources.push_back(*net::Prefix::parse("192.0.2.128/25"));
    rec.set_vips({vip});
    settle();
    EXPECT_EQ(dp.events, (Lines{"set_source_ranges " + sid + " 3"}));
    EXPECT_EQ(dp.source_ranges[id], source_range_entries(vip, id));

    // Lists gone: the flag first, then the entries.
    dp.events.clear();
    vip.allow_sources.clear();
    vip.deny_sources.clear();
    rec.set_vips({vip});
    settle();
    EXPECT_EQ(dp.events, (Lines{"put_vip " + sid + " flags 0", "remove_source_ranges " + sid}));

    // A VIP removed with lists: its entries go with it.
    vip.deny_sources.push_back(*net::Prefix::parse("10.0.0.0/8"));
    rec.set_vips({vip});
    settle();
    dp.events.clear();
    rec.set_vips({});
    settle();
    EXPECT_EQ(dp.events, (Lines{"remove_source_ranges " + sid}));
    EXPECT_TRUE(dp.source_ranges.empty());
}

// A reload that changes encap writes the flags again: cookies follow it.
TEST(SourceRanges, EncapChangeRewritesCookieFlags) {
    config::VipSpec vip = vip_with("198.51.100.10", {}, {});
    vip.port = 80;
    vip.health_check.type = config::HealthCheckType::kNone;
    config::BackendSpec b;
    b.address = ip("203.0.113.11");
    b.cookie_acks = true;
    vip.backends.push_back(b);
    test::RecordingDataPlane dp;
    control::Reconciler rec{dp, {16, 1024}};
    rec.set_vips({vip});
    for (int i = 0; i < 50 && !rec.all_published(); ++i)
        ASSERT_TRUE(rec.reconcile(control::Clock::now()));
    ASSERT_EQ(dp.vip_flags.size(), 1u);
    EXPECT_EQ(dp.vip_flags.begin()->second, 0u);
    rec.set_encap(config::Encap::kGue);
    for (int i = 0; i < 50 && !rec.all_published(); ++i)
        ASSERT_TRUE(rec.reconcile(control::Clock::now()));
    EXPECT_EQ(dp.vip_flags.begin()->second, static_cast<std::uint32_t>(XLB_VIP_F_COOKIES_AUTO));
}

// ---- QUIC connection-ID routing -------------------------------------------

config::QuicConfig quic_config(std::uint8_t id, std::uint8_t sid, std::uint8_t nonce,
                               config::QuicMode mode = config::QuicMode::kPlaintext) {
    config::QuicConfig q;
    q.config_id = id;
    q.server_id_length = sid;
    q.nonce_length = nonce;
    q.mode = mode;
    if (mode == config::QuicMode::kEncrypted) q.key_file = "/etc/xlb/quic.key";
    return q;
}

config::VipSpec quic_vip(std::vector<config::QuicConfig> configs,
                         std::vector<std::optional<std::uint64_t>> server_ids) {
    config::VipSpec v;
    v.address = ip("198.51.100.10");
    v.port = 443;
    v.protocol = config::Protocol::kUdp;
    v.health_check.type = config::HealthCheckType::kNone;
    v.quic = std::move(configs);
    for (std::size_t i = 0; i < server_ids.size(); ++i) {
        config::BackendSpec b;
        b.address = net::IpAddress::v4(203, 0, 113, static_cast<std::uint8_t>(11 + i));
        b.server_id = server_ids[i];
        v.backends.push_back(b);
    }
    return v;
}

TEST(Quic, FlagOnlyForUdpVipsWithConfigs) {
    config::VipSpec v = quic_vip({}, {});
    EXPECT_EQ(vip_flags(v) & XLB_VIP_F_QUIC, 0u);
    v.quic.push_back(quic_config(0, 2, 6));
    EXPECT_EQ(vip_flags(v), static_cast<std::uint32_t>(XLB_VIP_F_QUIC));
    EXPECT_EQ(vip_value(v, 4).flags, static_cast<std::uint32_t>(XLB_VIP_F_QUIC));
    v.conntrack = false;
    EXPECT_EQ(vip_flags(v), static_cast<std::uint32_t>(XLB_VIP_F_QUIC | XLB_VIP_F_NO_CONNTRACK));
    // TCP carries no QUIC: never the flag, whatever reached the spec.
    v.protocol = config::Protocol::kTcp;
    v.conntrack = true;
    EXPECT_EQ(vip_flags(v) & XLB_VIP_F_QUIC, 0u);
}

TEST(Quic, ConfigEntriesCoverEverySlotOfTheVip) {
    const config::VipSpec v =
        quic_vip({quic_config(2, 3, 5), quic_config(5, 4, 12, config::QuicMode::kEncrypted)}, {});
    const std::uint32_t vip_id = 7;
    const std::vector<QuicConfigEntry> entries = quic_config_entries(v, vip_id);
    ASSERT_EQ(entries.size(), static_cast<std::size_t>(XLB_QUIC_CONFIG_SLOTS));
    for (std::uint8_t c = 0; c < XLB_QUIC_CONFIG_SLOTS; ++c) {
        EXPECT_EQ(entries[c].slot, vip_id * 8 + c);
        EXPECT_EQ(entries[c].slot, quic_slot(vip_id, c));
        const xlb_quic_config& value = entries[c].value;
        EXPECT_EQ(value.pad[0] | value.pad[1] | value.pad[2] | value.pad[3] | value.pad[4], 0);
        if (c == 2) {
            EXPECT_EQ(value.server_id_len, 3);
            EXPECT_EQ(value.nonce_len, 5);
            EXPECT_EQ(value.mode, XLB_QUIC_MODE_PLAINTEXT);
        } else if (c == 5) {
            EXPECT_EQ(value.server_id_len, 4);
            EXPECT_EQ(value.nonce_len, 12);
            EXPECT_EQ(value.mode, XLB_QUIC_MODE_ENCRYPTED);
        } else {
            EXPECT_EQ(bytes_of(value), bytes_of(xlb_quic_config{})) << int(c);
        }
    }
}

TEST(Quic, NoRoutingNoConfigs) {
    // A TCP VIP (refused by the validation) or a UDP VIP without configs:
    // every slot zero, so writing them clears what an earlier spec had.
    config::VipSpec v = quic_vip({quic_config(1, 2, 6)}, {5});
    v.protocol = config::Protocol::kTcp;
    for (const QuicConfigEntry& e : quic_config_entries(v, 3))
        EXPECT_EQ(e.value.server_id_len, 0) << e.slot;
    EXPECT_TRUE(quic_server_entries(v, 3, std::vector<std::optional<std::uint32_t>>{9}).empty());
    v.protocol = config::Protocol::kUdp;
    v.quic.clear();
    for (const QuicConfigEntry& e : quic_config_entries(v, 3))
        EXPECT_EQ(e.value.server_id_len, 0) << e.slot;
}

TEST(Quic, ConfigIdSevenIsNeverRoutable) {
    const config::VipSpec v = quic_vip({quic_config(7, 2, 6), quic_config(0, 1, 4)}, {});
    const auto entries = quic_config_entries(v, 0);
    EXPECT_EQ(entries[7].value.server_id_len, 0);
    EXPECT_EQ(entries[0].value.server_id_len, 1);
}

TEST(Quic, ServerEntriesNameTheBackendIds) {
    config::VipSpec v =
        quic_vip({quic_config(0, 2, 6)}, {0x0102, std::nullopt, 0x0a0b, 0x0001, 0x0c0d});
    v.backends[4].state = config::AdminState::kDisabled;
    // ids as the reconciler assigns them; the fourth backend has none yet
    const std::vector<std::optional<std::uint32_t>> ids{40, 41, 42, std::nullopt, 44};
    const std::vector<QuicServerEntry> entries = quic_server_entries(v, 9, ids);
    ASSERT_EQ(entries.size(), 2u);
    EXPECT_EQ(entries[0].key.vip_id, 9u);
    EXPECT_EQ(entries[0].key.server_id, 0x0102u);
    EXPECT_EQ(entries[0].backend_id, 40u);
    EXPECT_EQ(entries[1].key.server_id, 0x0a0bu);
    EXPECT_EQ(entries[1].backend_id, 42u);
    for (const QuicServerEntry& e : entries) EXPECT_EQ(e.key.pad, 0u);
}

TEST(Quic, SumsPerCpu) {
    std::vector<xlb_vip_quic_stats> cpus(3);
    for (std::size_t c = 0; c < cpus.size(); ++c) {
        cpus[c].routed = 100 * (c + 1);
        for (std::size_t r = 0; r < XLB_QUIC_FALLBACKS; ++r) cpus[c].fallbacks[r] = (c + 1) * r;
    }
    const xlb_vip_quic_stats sum = sum_per_cpu(std::span<const xlb_vip_quic_stats>(cpus));
    EXPECT_EQ(sum.routed, 600u);
    for (std::size_t r = 0; r < XLB_QUIC_FALLBACKS; ++r) EXPECT_EQ(sum.fallbacks[r], 6 * r) << r;
    EXPECT_EQ(sum.pad, 0u);
}

// The reconciler's QUIC writes through a recording data plane.
class QuicPublish : public ::testing::Test {
protected:
    // Fails the test when a released backend id is still named by a server
    // entry at the moment of its release.
    struct CheckingDataPlane : test::RecordingDataPlane {
        xlb::Result<void> put_backend(std::uint32_t id, const xlb_backend& be) override {
            if (be.family != 0) return RecordingDataPlane::put_backend(id, be);
            for (const auto& [vip, entries] : quic_servers) {
                for (const QuicServerEntry& e : entries) {
                    EXPECT_NE(e.backend_id, id) << "backend id released while named";
                }
            }
            return RecordingDataPlane::put_backend(id, be);
        }
    };

    void settle() {
        for (int i = 0; i < 50; ++i) {
            auto r = rec.reconcile(control::Clock::now());
            ASSERT_TRUE(r) << r.error().message();
            if (rec.all_published()) return;
            std::this_thread::sleep_for(std::chrono::milliseconds(10));
        }
        FAIL() << "not published";
    }
    // The backend id each server id of the VIP routes to, as published.
    std::map<std::uint64_t, std::uint32_t> routes(std::uint32_t vip_id) {
        std::map<std::uint64_t, std::uint32_t> out;
        for (const QuicServerEntry& e : dp.quic_servers[vip_id]) {
            EXPECT_EQ(e.key.vip_id, vip_id);
            out[e.key.server_id] = e.backend_id;
        }
        return out;
    }
    std::uint32_t id_of(const config::VipSpec& vip, std::size_t backend) {
        auto ref = rec.registry().find_backend(vip.key(), vip.backends[backend].address);
        EXPECT_TRUE(ref);
        return ref ? ref->id : ~0u;
    }

    // The VIP and QUIC writes in order (source ranges left out).
    Lines events() const {
        Lines out;
        for (const std::string& e : dp.events)
            if (e.find("source_ranges") == std::string::npos) out.push_back(e);
        return out;
    }

    CheckingDataPlane dp;
    control::Reconciler rec{dp, {16, 1024}};
};

TEST_F(QuicPublish, EntriesBeforeTheFlagAndServersFollowBackends) {
    config::VipSpec vip = quic_vip({quic_config(1, 2, 6)}, {0x11, 0x22, std::nullopt});
    rec.set_vips({vip});
    settle();
    ASSERT_EQ(dp.vip_flags.size(), 1u);
    const std::uint32_t id = dp.vip_flags.begin()->first;
    const std::string sid = std::to_string(id);
    EXPECT_EQ(events(), (Lines{"set_quic " + sid + " servers 2 keys 0",
                               "put_vip " + sid + " flags " + std::to_string(XLB_VIP_F_QUIC)}));
    EXPECT_EQ(dp.quic_configs[id], quic_config_entries(vip, id));
    EXPECT_EQ(routes(id), (std::map<std::uint64_t, std::uint32_t>{{0x11, id_of(vip, 0)},
                                                                  {0x22, id_of(vip, 1)}}));

    // A backend removed loses its entry before its id is released; one
    // disabled likewise; a new one gets its own.
    dp.events.clear();
    vip.backends.erase(vip.backends.begin());
    vip.backends[0].state = config::AdminState::kDisabled;
    vip.backends[1].server_id = 0x33;
    rec.set_vips({vip});
    settle();
    EXPECT_EQ(events(), (Lines{"set_quic " + sid + " servers 1 keys 0"}));
    EXPECT_EQ(routes(id), (std::map<std::uint64_t, std::uint32_t>{{0x33, id_of(vip, 1)}}));

    // QUIC off: the flag goes first, then the entries.
    dp.events.clear();
    vip.quic.clear();
    rec.set_vips({vip});
    settle();
    EXPECT_EQ(events(), (Lines{"put_vip " + sid + " flags 0", "remove_quic " + sid}));
    EXPECT_TRUE(dp.quic_servers.empty());
}

TEST_F(QuicPublish, RemovedVipLosesItsEntries) {
    const config::VipSpec vip = quic_vip({quic_config(0, 2, 6)}, {7});
    rec.set_vips({vip});
    settle();
    const std::uint32_t id = dp.vip_flags.begin()->first;
    const std::uint32_t backend = id_of(vip, 0);
    ASSERT_EQ(routes(id).at(7), backend);
    dp.events.clear();
    rec.set_vips({});
    settle();
    EXPECT_EQ(events(), (Lines{"remove_quic " + std::to_string(id)}));
    EXPECT_TRUE(dp.quic_servers.empty());
    EXPECT_EQ(dp.backends[backend].family, 0) << "released after";
}

TEST_F(QuicPublish, EncryptedConfigsCarryTheirKeysAndRotate) {
    const QuicKey k1{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16};
    const QuicKey k2{0xa0, 0xa1};
    auto enc = [](std::uint8_t id, const char* file) {
        config::QuicConfig q = quic_config(id, 4, 12, config::QuicMode::kEncrypted);
        q.key_file = file;
        return q;
    };
    config::VipSpec vip = quic_vip({enc(3, "/k/one")}, {1});
    // No key read for the file: not applied, and said why.
    rec.set_vips({vip});
    (void)rec.reconcile(control::Clock::now());
    EXPECT_FALSE(rec.all_published());
    EXPECT_TRUE(dp.vip_flags.empty());
    EXPECT_TRUE(dp.quic_configs.empty());
    auto status = rec.vip_status(vip.key());
    ASSERT_TRUE(status);
    EXPECT_EQ(status->last_error, "VIP " + vip.key() + ": quic config 3: no key read from /k/one");

    // A file that could not be read: its error.
    rec.set_quic_keys({}, {{"/k/one", "/k/one: mode 0644 (chmod 600 /k/one)"}});
    (void)rec.reconcile(control::Clock::now());
    EXPECT_EQ(rec.vip_status(vip.key())->last_error,
              "VIP " + vip.key() + ": quic config 3: /k/one: mode 0644 (chmod 600 /k/one)");

    rec.set_quic_keys({{"/k/one", k1}, {"/k/two", k2}});
    settle();
    const std::uint32_t id = dp.vip_flags.begin()->first;
    EXPECT_EQ(dp.quic_keys[id], (std::vector<QuicKeyEntry>{{id * 8 + 3, k1}}));

    // Rotation: a second config with its own key, then the first removed.
    vip.quic.push_back(enc(4, "/k/two"));
    rec.set_vips({vip});
    settle();
    EXPECT_EQ(dp.quic_keys[id], (std::vector<QuicKeyEntry>{{id * 8 + 3, k1}, {id * 8 + 4, k2}}));
    vip.quic.erase(vip.quic.begin());
    rec.set_vips({vip});
    settle();
    EXPECT_EQ(dp.quic_keys[id], (std::vector<QuicKeyEntry>{{id * 8 + 4, k2}}));
    EXPECT_EQ(dp.quic_configs[id][3].value.server_id_len, 0) << "slot cleared";
    EXPECT_EQ(dp.quic_configs[id][4].value.mode, XLB_QUIC_MODE_ENCRYPTED);

    // A key file read again with another key: written again.
    dp.events.clear();
    rec.set_quic_keys({{"/k/two", k1}});
    settle();
    EXPECT_EQ(events(), (Lines{"set_quic " + std::to_string(id) + " servers 1 keys 1"}));
    EXPECT_EQ(dp.quic_keys[id], (std::vector<QuicKeyEntry>{{id * 8 + 4, k1}}));
}

TEST_F(QuicPublish, EncryptedWithoutKernelCryptoIsRefused) {
    dp.crypto = false;
    config::QuicConfig q = quic_config(2, 4, 12, config::QuicMode::kEncrypted);
    config::VipSpec vip = quic_vip({quic_config(0, 2, 6), q}, {1});
    rec.set_quic_keys({{q.key_file, QuicKey{}}});
    rec.set_vips({vip});
    (void)rec.reconcile(control::Clock::now());
    EXPECT_FALSE(rec.all_published());
    // Neither plaintext nor the ring alone: nothing of the VIP is written.
    EXPECT_TRUE(events().empty());
    EXPECT_TRUE(dp.rings.empty());
    auto status = rec.vip_status(vip.key());
    ASSERT_TRUE(status);
    EXPECT_EQ(status->last_error, "VIP " + vip.key() +
                                      ": quic config 2 is encrypted, but this kernel has no BPF "
                                      "crypto kfuncs (bpf_crypto_decrypt; Linux >= 6.10)");
    auto failures = rec.take_apply_failures();
    ASSERT_FALSE(failures.empty());
    EXPECT_EQ(failures[0].error.message(), status->last_error);
    // Plaintext alone is served.
    vip.quic.pop_back();
    rec.set_vips({vip});
    settle();
    EXPECT_EQ(dp.vip_flags.begin()->second, static_cast<std::uint32_t>(XLB_VIP_F_QUIC));
}

TEST_F(QuicPublish, KeysOfRestoredVipsInstalledBeforeAnyPlan) {
    config::QuicConfig q = quic_config(5, 4, 12, config::QuicMode::kEncrypted);
    const config::VipSpec vip = quic_vip({q, quic_config(1, 2, 6)}, {1});
    config::VipSpec other = quic_vip({q}, {2});
    other.port = 8443;
    const QuicKey k{9, 9, 9};
    rec.set_quic_keys({{q.key_file, k}});
    rec.set_vips({vip, other});
    // As after a restart: the id of `vip` restored, `other` has none yet.
    rec.registry().restore({{vip.key(), 6}}, {});
    ASSERT_TRUE(rec.install_quic_keys());
    EXPECT_EQ(events(), (Lines{"install_quic_keys 1"}));
    EXPECT_EQ(dp.installed_keys, (std::vector<QuicKeyEntry>{{6 * 8 + 5, k}}));
    // Without crypto nothing is installed: plan() refuses the VIP.
    dp.crypto = false;
    dp.events.clear();
    ASSERT_TRUE(rec.install_quic_keys());
    EXPECT_TRUE(events().empty());
}

TEST(DatapathSetup, FlowKey) {
    const xlb_flow_key k =
        flow_key(net::Endpoint{ip("192.0.2.7"), 40000}, net::Endpoint{ip("198.51.100.10"), 80}, 6);
    EXPECT_EQ(k.src[0], htonl(0xc0000207));
    EXPECT_EQ(k.dst[0], htonl(0xc633640a));
    EXPECT_EQ(k.src[1] | k.src[2] | k.src[3] | k.dst[1] | k.dst[2] | k.dst[3], 0u);
    EXPECT_EQ(bytes_of(k.sport), (std::vector<std::uint8_t>{0x9c, 0x40}));  // 40000
    EXPECT_EQ(bytes_of(k.dport), (std::vector<std::uint8_t>{0x00, 0x50}));  // 80
    EXPECT_EQ(k.proto, 6);
    EXPECT_EQ(k.family, XLB_FAMILY_V4);
    EXPECT_EQ(k.pad[0] | k.pad[1], 0);

    config::VipSpec v;
    v.address = ip("2001:db8:f::10");
    v.port = 0;  // wildcard: the packet's port
    v.protocol = config::Protocol::kTcp;
    const net::Endpoint client{ip("2001:db8:c::10"), 50000};
    const xlb_flow_key k6 = flow_key(v, client, 8443);
    EXPECT_EQ(bytes_of(k6), bytes_of(flow_key(client, net::Endpoint{v.address, 8443}, 6)));
    EXPECT_EQ(k6.family, XLB_FAMILY_V6);
    EXPECT_EQ(k6.dst[3], htonl(0x10));
    EXPECT_EQ(bytes_of(k6.dport), (std::vector<std::uint8_t>{0x20, 0xfb}));
}

TEST(DatapathSetup, BackendEntries) {
    const xlb_backend be = backend_entry(ip("2001:db8:b::11"), 3);
    EXPECT_EQ(be.addr[0], htonl(0x20010db8));
    EXPECT_EQ(be.addr[1], htonl(0x000b0000));
    EXPECT_EQ(be.addr[3], htonl(0x11));
    EXPECT_EQ(be.family, XLB_FAMILY_V6);
    EXPECT_EQ(be.generation, 3u);
    const xlb_backend v4 = backend_entry(ip("203.0.113.11"), 1);
    EXPECT_EQ(v4.addr[0], htonl(0xcb00710b));
    EXPECT_EQ(v4.family, XLB_FAMILY_V4);
    const xlb_backend gone = released_backend_entry(4);
    EXPECT_EQ(bytes_of(gone), bytes_of(xlb_backend{.generation = 4}));
    EXPECT_EQ(gone.family, 0);
}

TEST(DatapathSetup, RingIndexIsTheProgramsSlot) {
    const xlb_flow_key k =
        flow_key(net::Endpoint{ip("192.0.2.7"), 40000}, net::Endpoint{ip("198.51.100.10"), 80}, 6);
    const std::uint32_t seed = 0x5eed1234;
    EXPECT_EQ(ring_index(k, 0, seed, 251), xlb_flow_hash(&k, seed) % 251);
    EXPECT_EQ(ring_index(k, XLB_VIP_F_HASH_SRC_ONLY, seed, 251), xlb_flow_hash_src(&k, seed) % 251);
}

TEST(DatapathSetup, SumsPerCpu) {
    const std::vector<std::uint64_t> counts{1, 2, 40};
    EXPECT_EQ(sum_per_cpu(counts), 43u);
    const std::vector<xlb_vip_stats> vips{{1, 10, 2, 3, 4}, {5, 50, 6, 7, 8}};
    const xlb_vip_stats v = sum_per_cpu(vips);
    EXPECT_EQ(v.packets, 6u);
    EXPECT_EQ(v.bytes, 60u);
    EXPECT_EQ(v.new_flows, 8u);
    EXPECT_EQ(v.conntrack_hits, 10u);
    EXPECT_EQ(v.drops, 12u);
    const std::vector<xlb_backend_stats> backends{{1, 100, 4}, {2, 200, 5}, {3, 300, 6}};
    const xlb_backend_stats b = sum_per_cpu(backends);
    EXPECT_EQ(b.packets, 6u);
    EXPECT_EQ(b.bytes, 600u);
    EXPECT_EQ(b.new_flows, 15u);
    EXPECT_EQ(sum_per_cpu(std::vector<std::uint64_t>{}), 0u);
}

TEST(DatapathSetup, BuildRingMapsSlotsToBackendIds) {
    const std::vector<RingMember> members{{7, ip("10.0.0.1"), "", 1}, {9, ip("10.0.0.2"), "", 3}};
    auto ring = build_ring(members, 251);
    ASSERT_TRUE(ring) << ring.error().message();
    ASSERT_EQ(ring->slots.size(), 251u);
    std::map<std::uint32_t, std::uint32_t> count;
    for (std::uint32_t id : ring->slots) ++count[id];
    EXPECT_EQ(count.size(), 2u);
    EXPECT_EQ(count[7], ring->slots_per_member[0]);
    EXPECT_EQ(count[9], ring->slots_per_member[1]);
    EXPECT_GT(count[9], 2 * count[7]);
    EXPECT_FALSE(build_ring(members, 250)) << "250 is no prime";
}

// ---- the demo's and the benchmark's rings are xlbd's ----------------------

using test::RecordingDataPlane;

// The ring as backend addresses, slot by slot: ids differ between builders.
std::vector<net::IpAddress> addresses(const std::vector<std::uint32_t>& slots,
                                      const std::map<std::uint32_t, net::IpAddress>& by_id) {
    std::vector<net::IpAddress> out;
    out.reserve(slots.size());
    for (std::uint32_t id : slots) out.push_back(by_id.at(id));
    return out;
}

// What xlbd publishes for one VIP with these backends, all healthy (no
// health check), as addresses per slot.
std::vector<net::IpAddress> published_by_xlbd(const std::vector<RingMember>& members) {
    config::VipSpec vip;
    vip.address = ip("198.51.100.10");
    vip.port = 80;
    vip.health_check.type = config::HealthCheckType::kNone;
    vip.slow_start.window = config::Duration{0};
    for (const RingMember& m : members) {
        config::BackendSpec b;
        b.address = m.address;
        b.weight = m.weight;
        b.hash_key = m.hash_key;
        vip.backends.push_back(b);
    }
    RecordingDataPlane dp;
    control::Reconciler rec{dp, {16, 1024}};
    rec.set_vips({vip});
    for (int i = 0; i < 100 && dp.rings.empty(); ++i) {
        auto r = rec.reconcile(control::Clock::now());
        EXPECT_TRUE(r) << r.error().message();
        if (dp.rings.empty()) std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    EXPECT_EQ(dp.rings.size(), 1u);
    if (dp.rings.empty()) return {};
    std::map<std::uint32_t, net::IpAddress> by_id;
    for (const auto& [id, be] : dp.backends)
        by_id[id] = net::IpAddress::from_words(be.addr, be.family);
    return addresses(dp.rings.begin()->second, by_id);
}

std::vector<net::IpAddress> built_by_tools(const std::vector<RingMember>& members) {
    auto ring = build_ring(members);
    EXPECT_TRUE(ring) << ring.error().message();
    if (!ring) return {};
    std::map<std::uint32_t, net::IpAddress> by_id;
    for (const RingMember& m : members) by_id[m.backend_id] = m.address;
    return addresses(ring->slots, by_id);
}

TEST(ToolRings, TheDemosRingIsTheOneXlbdPublishes) {
    // xlb-demo: three IPv4 backends weighted 1:1:2, ids 1-3.
    const std::vector<RingMember> demo{{1, ip("203.0.113.11"), "", 1},
                                       {2, ip("203.0.113.12"), "", 1},
                                       {3, ip("203.0.113.13"), "", 2}};
    const auto tools = built_by_tools(demo);
    ASSERT_EQ(tools.size(), maglev::kDefaultRingSize);
    EXPECT_TRUE(tools == published_by_xlbd(demo));
}

TEST(ToolRings, TheBenchmarksRingsAreTheOnesXlbdPublishes) {
    // xlb-bench-xdp: 100 equal-weight backends per family, 198.18.0.1... and
    // 2001:db8:b::100...
    for (const bool v6 : {false, true}) {
        std::vector<RingMember> bench;
        for (std::uint32_t i = 0; i < 100; ++i) {
            char text[64];
            if (v6)
                std::snprintf(text, sizeof text, "2001:db8:b::%x", 0x100 + i);
            else
                std::snprintf(text, sizeof text, "198.18.0.%u", 1 + i);
            bench.push_back({i, ip(text), "", 1});
        }
        const auto tools = built_by_tools(bench);
        ASSERT_EQ(tools.size(), maglev::kDefaultRingSize);
        EXPECT_TRUE(tools == published_by_xlbd(bench)) << (v6 ? "IPv6" : "IPv4");
    }
}

TEST(ToolRings, HashKeysAreHonouredAlike) {
    const std::vector<RingMember> keyed{{1, ip("203.0.113.11"), "web-a", 1},
                                        {2, ip("2001:db8:b::12"), "web-b", 1}};
    EXPECT_TRUE(built_by_tools(keyed) == published_by_xlbd(keyed));
}

}  // namespace
}  // namespace xlb::datapath
