// SPDX-License-Identifier: Apache-2.0
// SYN cookies on the balancer (lib/cookie.h, docs/syn-cookies.md) and the
// per-VIP source lists. A SYN answered in place must come back as a whole
// SYN-ACK built here independently (addresses and ports swapped, the cookie
// as sequence number, the option block, valid checksums); the ACK carrying
// the cookie must be encapsulated to the ring's backend with the negotiated
// options as GUE data, which proves the cookie checks out with the kernel's
// helper; a wrong cookie is dropped and counted.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <time.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include "lb_fixture.h"
#include "testbed.h"
#include "xlb/datapath/setup.h"
#include "xlb/kernel/bpf_data_plane.h"

namespace xlb::test {
namespace {

constexpr std::uint32_t kVipId = 5;
constexpr std::uint32_t kClientSeq = 0x11223344;
constexpr std::uint32_t kClientTsval = 0x01020304;

// What a client's SYN offers.
struct Offer {
    std::uint16_t mss = 1460;
    std::optional<std::uint8_t> wscale = 9;
    bool sack = true;
    bool timestamps = true;
};

// The SYN's options as Linux orders them, padded with NOPs to 4-byte words.
Bytes syn_options(const Offer& o) {
    Bytes b{2, 4};
    append_be16(b, o.mss);
    if (o.sack) b.insert(b.end(), {4, 2});
    if (o.timestamps) {
        if (!o.sack) b.insert(b.end(), {1, 1});
        b.insert(b.end(), {8, 10});
        append_be32(b, kClientTsval);
        append_be32(b, 0);
    }
    if (o.wscale) b.insert(b.end(), {1, 3, 3, *o.wscale});
    while (b.size() % 4) b.push_back(1);
    return b;
}

// The SYN-ACK's 20-byte option block (lib/cookie.h).
Bytes synack_options(std::uint16_t mss, const Offer& o, std::uint32_t tsval) {
    Bytes b{2, 4};
    append_be16(b, mss);
    if (o.sack)
        b.insert(b.end(), {4, 2});
    else
        b.insert(b.end(), {1, 1});
    if (o.timestamps) {
        b.insert(b.end(), {8, 10});
        append_be32(b, tsval);
        append_be32(b, kClientTsval);
    } else {
        b.insert(b.end(), 10, 1);
    }
    b.push_back(1);
    if (o.wscale)
        b.insert(b.end(), {3, 3, XLB_COOKIE_RCV_WSCALE});
    else
        b.insert(b.end(), 3, 1);
    return b;
}

Flow reversed(const Flow& f) { return Flow{f.dst, f.src, f.dport, f.sport, f.proto}; }

std::uint32_t monotonic_ms() {
    timespec ts{};
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return static_cast<std::uint32_t>(ts.tv_sec * 1000ULL + ts.tv_nsec / 1000000);
}

// The GUE data of a cookie ACK (abi.h, struct xlb_gue_cookie), byte by byte.
Bytes cookie_data(std::uint8_t flags, std::uint8_t snd_wscale, std::uint16_t mss,
                  std::uint32_t tsval, std::uint32_t tsecr) {
    Bytes b{XLB_GUE_COOKIE_MAGIC, flags, snd_wscale, XLB_COOKIE_RCV_WSCALE};
    append_be16(b, mss);
    append_be16(b, 0);
    append_be32(b, tsval);
    append_be32(b, tsecr);
    return b;
}

class SynCookieTest : public LbTest {
protected:
    void SetUp() override {
        LbTest::SetUp();
        xlb_config cfg = default_config();
        cfg.flags |= XLB_CFG_F_GUE;
        cfg.gue_port = XLB_GUE_PORT_DEFAULT;
        write_config(cfg);
        for (std::uint32_t i = 0; i < 3; ++i) add_backend(10 + i, kBackendV4[i]);
        for (std::uint32_t i = 0; i < 3; ++i) add_backend(20 + i, kBackendV6[i]);
    }

    void vip(bool v6, std::uint32_t flags) {
        add_vip(v6 ? kVipV6 : kVipV4, kVipPort, kProtoTcp, kVipId, flags);
        const std::uint32_t base = v6 ? 20 : 10;
        ring_ = publish_maglev(kVipId, {{base}, {base + 1}, {base + 2}});
    }

    static Flow client(bool v6, std::uint16_t port = 40000) {
        return Flow{v6 ? kClientV6 : kClientV4, v6 ? kVipV6 : kVipV4, port, kVipPort, kProtoTcp};
    }

    xlb_vip_cookie_stats cookies() {
        auto per_cpu = lb().vip_cookies().get_per_cpu(kVipId);
        EXPECT_TRUE(per_cpu);
        return per_cpu ? datapath::sum_per_cpu(*per_cpu) : xlb_vip_cookie_stats{};
    }

    std::uint64_t vip_drops(xlb_outcome outcome) {
        auto per_cpu = lb().vip_drops().get_per_cpu(kVipId);
        EXPECT_TRUE(per_cpu);
        return per_cpu ? datapath::sum_per_cpu(*per_cpu).by_reason[xlb_vip_drop_slot(outcome)] : 0;
    }

    static FrameOptions syn_of(const Offer& o) {
        FrameOptions opt;
        opt.tcp_flags = kTcpSyn;
        opt.tcp_seq = kClientSeq;
        opt.tcp_ack = 0;
        opt.tcp_window = 64240;
        opt.tcp_options = syn_options(o);
        opt.payload = {};
        return opt;
    }

    // Sends the SYN and expects its SYN-ACK, whole; returns {cookie, tsval}.
    std::pair<std::uint32_t, std::uint32_t> expect_answered(const Flow& f, const Offer& o,
                                                            std::uint16_t want_mss) {
        const Bytes input = make_frame(f, syn_of(o));
        const std::uint32_t before = monotonic_ms();
        bpf::TestRunResult r = run(input);
        EXPECT_EQ(r.action, XDP_TX);
        EXPECT_EQ(outcomes()[XLB_OUT_TX_SYN_COOKIE], 1u);
        const std::size_t tcp_at = 14 + (f.src.is_v4() ? 20 : 40);
        if (r.frame.size() < tcp_at + 40) {
            ADD_FAILURE() << "short answer: " << describe(r.frame);
            return {};
        }
        const std::uint32_t cookie = read_be32(r.frame, tcp_at + 4);
        const std::uint32_t tsval = o.timestamps ? read_be32(r.frame, tcp_at + 20 + 8) : 0;

        FrameOptions back;
        back.eth_src = FrameOptions{}.eth_dst;
        back.eth_dst = FrameOptions{}.eth_src;
        back.tcp_flags = kTcpSyn | kTcpAck;
        back.tcp_seq = cookie;
        back.tcp_ack = kClientSeq + 1;
        back.tcp_window = XLB_COOKIE_SYNACK_WINDOW;
        back.tcp_options = synack_options(want_mss, o, tsval);
        back.payload = {};
        back.ttl = XLB_COOKIE_TTL;
        back.ipv4_id = 0;
        back.ipv4_frag = 0x4000;
        back.ipv6_flow_label = 0;
        const Bytes expected = make_frame(reversed(f), back);
        EXPECT_EQ(checksum_errors(r.frame), "");
        expect_same_frame(r.frame, expected);
        if (o.timestamps) {
            // The kernel's encoding: the client's window scale (15: none)
            // and SACK in the low six bits; never ahead of the clock.
            const std::uint32_t options = (o.wscale ? *o.wscale : 0xf) | (o.sack ? 0x10 : 0);
            EXPECT_EQ(tsval & 0x3f, options);
            EXPECT_LE(static_cast<std::int32_t>(tsval - monotonic_ms()), 0);
            EXPECT_GE(static_cast<std::int32_t>(tsval - (before - 64)), 0);
        }
        return {cookie, tsval};
    }

    static FrameOptions ack_of(std::uint32_t cookie, std::optional<std::uint32_t> tsecr,
                               Bytes payload = {}) {
        FrameOptions opt;
        opt.tcp_flags = kTcpAck;
        opt.tcp_seq = kClientSeq + 1;
        opt.tcp_ack = cookie + 1;
        opt.tcp_window = 502;
        if (tsecr) {
            opt.tcp_options = {1, 1, 8, 10};
            append_be32(opt.tcp_options, kClientTsval + 7);
            append_be32(opt.tcp_options, *tsecr);
        }
        opt.payload = std::move(payload);
        return opt;
    }

    // Sends the ACK and expects it encapsulated to the ring's backend with
    // `data` as GUE private data (empty: none).
    void expect_balanced(const Flow& f, const FrameOptions& opt, const Bytes& data) {
        const xlb_flow_key key = flow_key(f);
        const Bytes input = make_frame(f, opt);
        const Bytes expected = expected_encap(input, backend_addr_.at(expected_backend(ring_, key)),
                                              key, 0, std::nullopt, data);
        ASSERT_EQ(checksum_errors(expected), "");
        expect_outcome(input, XDP_TX, XLB_OUT_TX, expected);
    }

    std::vector<std::uint32_t> ring_;
};

TEST_F(SynCookieTest, AlwaysAnswersTheSynAndBalancesItsAckWithTheOptions) {
    for (bool v6 : {false, true}) {
        SCOPED_TRACE(v6 ? "IPv6" : "IPv4");
        SetUp();
        vip(v6, XLB_VIP_F_COOKIES_ALWAYS);
        const Flow f = client(v6);
        const Offer o;
        const std::uint16_t mss = v6 ? 1440 : 1460;
        auto [cookie, tsval] = expect_answered(f, o, mss);
        EXPECT_EQ(backend_stats(expected_backend(ring_, flow_key(f))).packets, 0u)
            << "no backend saw the SYN";
        auto entry = lb().conntrack().get(flow_key(f));
        ASSERT_TRUE(entry);
        EXPECT_FALSE(*entry) << "an answered SYN makes no entry";

        expect_balanced(
            f, ack_of(cookie, tsval),
            cookie_data(XLB_GUE_COOKIE_F_WSCALE | XLB_GUE_COOKIE_F_SACK | XLB_GUE_COOKIE_F_TSTAMP,
                        9, mss, kClientTsval + 7, tsval));
        const xlb_vip_cookie_stats c = cookies();
        EXPECT_EQ(c.syns, 1u);
        EXPECT_EQ(c.cookies_sent, 1u);
        EXPECT_EQ(c.acks_valid, 1u);
        EXPECT_EQ(c.acks_invalid, 0u);
        const std::uint32_t backend = expected_backend(ring_, flow_key(f));
        EXPECT_EQ(backend_stats(backend).new_flows, 1u) << "the cookie ACK starts the flow";
        entry = lb().conntrack().get(flow_key(f));
        ASSERT_TRUE(entry && *entry) << "the cookie ACK records the flow";
        EXPECT_EQ((*entry)->backend_id, backend);

        // Its next packet finds the entry: forwarded as any other, no data.
        FrameOptions data = ack_of(cookie, tsval, Bytes{'G', 'E', 'T'});
        data.tcp_seq += 100;
        expect_balanced(f, data, {});
        EXPECT_EQ(cookies().acks_valid, 1u) << "an ACK with an entry is not checked";
    }
}

TEST_F(SynCookieTest, EveryMssOfTheKernelsTableComesBackFromTheCookie) {
    struct Case {
        bool v6;
        std::uint16_t offered, kept;
    };
    // The kernel's tables: 536 1300 1440 1460 (IPv4), 1220 1420 1440 8940
    // (IPv6); a SYN gets the largest not above its MSS.
    for (const Case& c : {Case{false, 536, 536}, Case{false, 1299, 536}, Case{false, 1300, 1300},
                          Case{false, 1452, 1440}, Case{false, 9000, 1460}, Case{true, 1220, 1220},
                          Case{true, 1420, 1420}, Case{true, 1500, 1440}, Case{true, 9000, 8940}}) {
        SCOPED_TRACE(testing::Message() << (c.v6 ? "IPv6 " : "IPv4 ") << c.offered);
        SetUp();
        vip(c.v6, XLB_VIP_F_COOKIES_ALWAYS);
        const Flow f = client(c.v6, static_cast<std::uint16_t>(41000 + c.offered % 1000));
        Offer o;
        o.mss = c.offered;
        auto [cookie, tsval] = expect_answered(f, o, c.kept);
        expect_balanced(
            f, ack_of(cookie, tsval),
            cookie_data(XLB_GUE_COOKIE_F_WSCALE | XLB_GUE_COOKIE_F_SACK | XLB_GUE_COOKIE_F_TSTAMP,
                        9, c.kept, kClientTsval + 7, tsval));
    }
}

TEST_F(SynCookieTest, WithoutTimestampsTheClientGetsNeitherWindowScaleNorSack) {
    vip(false, XLB_VIP_F_COOKIES_ALWAYS);
    const Flow f = client(false);
    Offer o;
    o.timestamps = false;
    auto [cookie, tsval] = expect_answered(f, o, 1460);
    EXPECT_EQ(tsval, 0u);
    expect_balanced(f, ack_of(cookie, std::nullopt), cookie_data(0, 0, 1460, 0, 0));
}

TEST_F(SynCookieTest, ASynWithoutOptionsIsAnsweredWithTheDefaultMss) {
    vip(false, XLB_VIP_F_COOKIES_ALWAYS);
    const Flow f = client(false);
    Offer o;
    o.mss = 536;
    o.wscale.reset();
    o.sack = false;
    o.timestamps = false;
    FrameOptions bare = syn_of(o);
    bare.tcp_options = {};  // no MSS option: the kernel assumes 536
    const Bytes input = make_frame(f, bare);
    bpf::TestRunResult r = run(input);
    EXPECT_EQ(r.action, XDP_TX);
    EXPECT_EQ(checksum_errors(r.frame), "");
    FrameOptions back;
    back.eth_src = FrameOptions{}.eth_dst;
    back.eth_dst = FrameOptions{}.eth_src;
    back.tcp_flags = kTcpSyn | kTcpAck;
    back.tcp_seq = r.frame.size() >= 58 ? read_be32(r.frame, 38) : 0;
    back.tcp_ack = kClientSeq + 1;
    back.tcp_window = XLB_COOKIE_SYNACK_WINDOW;
    back.tcp_options = synack_options(536, o, 0);
    back.payload = {};
    back.ttl = XLB_COOKIE_TTL;
    back.ipv4_id = 0;
    expect_same_frame(r.frame, make_frame(reversed(f), back));
}

TEST_F(SynCookieTest, AWrongCookieWithoutEntryIsDroppedAndCounted) {
    for (bool v6 : {false, true}) {
        SCOPED_TRACE(v6 ? "IPv6" : "IPv4");
        SetUp();
        vip(v6, XLB_VIP_F_COOKIES_ALWAYS);
        const Flow f = client(v6);
        auto [cookie, tsval] = expect_answered(f, Offer{}, v6 ? 1440 : 1460);
        // Another flipped bit, another port: neither checks out.
        for (const auto& [flow, ack] :
             {std::pair{f, cookie ^ 0x01000000U}, std::pair{client(v6, 40001), cookie}}) {
            const auto before = outcomes()[XLB_OUT_DROP_COOKIE_INVALID];
            expect_outcome(make_frame(flow, ack_of(ack, tsval)), XDP_DROP,
                           XLB_OUT_DROP_COOKIE_INVALID, std::nullopt);
            EXPECT_EQ(outcomes()[XLB_OUT_DROP_COOKIE_INVALID], before + 1);
        }
        EXPECT_EQ(cookies().acks_invalid, 2u);
        EXPECT_EQ(vip_drops(XLB_OUT_DROP_COOKIE_INVALID), 2u);
        EXPECT_EQ(vip_stats(kVipId).drops, 2u);
        auto entry = lb().conntrack().get(flow_key(f));
        ASSERT_TRUE(entry);
        EXPECT_FALSE(*entry);
    }
}

TEST_F(SynCookieTest, AnEstablishedFlowsAckIsForwardedAsBefore) {
    vip(false, XLB_VIP_F_COOKIES_ALWAYS);
    const Flow f = client(false);
    // Recorded before cookies answered: its entry names backend 12, not
    // necessarily the ring's choice.
    xlb_flow_key key = flow_key(f);
    ASSERT_TRUE(lb().conntrack().put(key, {12, 1}));
    const Bytes input = make_frame(f, ack_of(0x5555, std::nullopt, Bytes{'x'}));
    const Bytes expected = expected_encap(input, backend_addr_.at(12), key);
    expect_outcome(input, XDP_TX, XLB_OUT_TX, expected);
    EXPECT_EQ(cookies().acks_valid + cookies().acks_invalid, 0u);
}

TEST_F(SynCookieTest, AutoAnswersOnlyWhileTheHostIsFlooded) {
    vip(false, XLB_VIP_F_COOKIES_AUTO);
    const Flow f = client(false);
    const xlb_flow_key key = flow_key(f);

    // Calm: the SYN goes to its backend as without cookies.
    const Bytes syn = make_frame(f, syn_of(Offer{}));
    expect_outcome(syn, XDP_TX, XLB_OUT_TX,
                   expected_encap(syn, backend_addr_.at(expected_backend(ring_, key)), key));
    EXPECT_EQ(cookies().syns, 1u);
    EXPECT_EQ(cookies().cookies_sent, 0u);

    lb().set_syn_flood(XLB_SYN_FLOOD_ANSWERING);
    auto [cookie, tsval] = expect_answered(f, Offer{}, 1460);

    // The flood is over, cookies sent may still come back: a valid one is
    // balanced with its options, an ACK without entry and without a valid
    // cookie is forwarded as in calm, and SYNs go to backends again.
    lb().set_syn_flood(XLB_SYN_FLOOD_RECENT);
    const Flow other = client(false, 40002);
    expect_balanced(other, ack_of(0x7777, std::nullopt), {});
    expect_balanced(
        f, ack_of(cookie, tsval),
        cookie_data(XLB_GUE_COOKIE_F_WSCALE | XLB_GUE_COOKIE_F_SACK | XLB_GUE_COOKIE_F_TSTAMP, 9,
                    1460, kClientTsval + 7, tsval));
    const Flow third = client(false, 40003);
    const Bytes syn3 = make_frame(third, syn_of(Offer{}));
    expect_outcome(syn3, XDP_TX, XLB_OUT_TX,
                   expected_encap(syn3, backend_addr_.at(expected_backend(ring_, flow_key(third))),
                                  flow_key(third)));
    const xlb_vip_cookie_stats c = cookies();
    EXPECT_EQ(c.syns, 3u);
    EXPECT_EQ(c.cookies_sent, 1u);
    EXPECT_EQ(c.acks_valid, 1u);
    EXPECT_EQ(c.acks_invalid, 0u);
}

TEST_F(SynCookieTest, CookiesNeedGue) {
    xlb_config cfg = default_config();
    write_config(cfg);  // IP-in-IP
    vip(false, XLB_VIP_F_COOKIES_ALWAYS);
    const Flow f = client(false);
    const xlb_flow_key key = flow_key(f);
    const Bytes syn = make_frame(f, syn_of(Offer{}));
    expect_outcome(syn, XDP_TX, XLB_OUT_TX,
                   expected_encap(syn, backend_addr_.at(expected_backend(ring_, key)), key));
}

// --- source lists ----------------------------------------------------------

class SourceRangeTest : public SynCookieTest {
protected:
    // An entry of the trie as the agent writes them (abi.h).
    void range(const char* prefix, std::uint8_t verdict) {
        auto p = net::Prefix::parse(prefix);
        ASSERT_TRUE(p) << p.error();
        xlb_src_range_key k{};
        k.vip_id = htonl(kVipId);
        if (p->address.is_v4()) {
            k.addr[2] = htonl(0xffff);
            std::memcpy(&k.addr[3], p->address.bytes.data(), 4);
            k.prefixlen = 32 + 96 + p->length;
        } else {
            std::memcpy(k.addr, p->address.bytes.data(), 16);
            k.prefixlen = 32 + p->length;
        }
        auto ok = lb().source_ranges().put(k, verdict);
        ASSERT_TRUE(ok) << ok.error().message();
    }

    void expect_allowed(const net::IpAddress& src) {
        Flow f = client(!src.is_v4());
        f.src = src;
        const xlb_flow_key key = flow_key(f);
        const Bytes input = make_frame(f);
        expect_outcome(input, XDP_TX, XLB_OUT_TX,
                       expected_encap(input, backend_addr_.at(expected_backend(ring_, key)), key));
    }

    void expect_denied(const net::IpAddress& src) {
        Flow f = client(!src.is_v4());
        f.src = src;
        const std::uint64_t before = vip_drops(XLB_OUT_DROP_SOURCE_DENIED);
        expect_outcome(make_frame(f), XDP_DROP, XLB_OUT_DROP_SOURCE_DENIED, std::nullopt);
        EXPECT_EQ(vip_drops(XLB_OUT_DROP_SOURCE_DENIED), before + 1);
    }
};

TEST_F(SourceRangeTest, AnAllowListRefusesEveryoneElse) {
    vip(false, XLB_VIP_F_SOURCE_RANGES);
    range("0.0.0.0/0", XLB_SOURCE_DENY);
    range("192.0.2.0/24", XLB_SOURCE_ALLOW);
    expect_allowed(ip("192.0.2.10"));
    expect_allowed(ip("192.0.2.255"));
    expect_denied(ip("192.0.3.1"));
    expect_denied(ip("10.0.0.1"));
}

TEST_F(SourceRangeTest, ADenyPrefixInsideTheAllowListWins) {
    vip(false, XLB_VIP_F_SOURCE_RANGES);
    range("0.0.0.0/0", XLB_SOURCE_DENY);
    range("192.0.2.0/24", XLB_SOURCE_ALLOW);
    range("192.0.2.128/25", XLB_SOURCE_DENY);
    expect_allowed(ip("192.0.2.10"));
    expect_denied(ip("192.0.2.200"));
}

TEST_F(SourceRangeTest, ADenyListAloneRefusesOnlyItsPrefixes) {
    vip(true, XLB_VIP_F_SOURCE_RANGES);
    range("2001:db8:bad::/48", XLB_SOURCE_DENY);
    expect_allowed(ip("2001:db8:c::10"));
    expect_denied(ip("2001:db8:bad::7"));
}

TEST_F(SourceRangeTest, AVipWithoutTheFlagIgnoresTheTrie) {
    vip(false, 0);
    range("0.0.0.0/0", XLB_SOURCE_DENY);
    expect_allowed(ip("192.0.2.10"));
}

TEST_F(SourceRangeTest, ANarrowedListStopsTheFlowsItNoLongerAllows) {
    vip(false, XLB_VIP_F_SOURCE_RANGES);
    range("0.0.0.0/0", XLB_SOURCE_DENY);
    range("192.0.2.0/24", XLB_SOURCE_ALLOW);
    expect_allowed(ip("192.0.2.10"));
    expect_allowed(ip("192.0.2.200"));
    expect_allowed(ip("192.0.2.10"));  // now from its entry (or the flow cache)
    // Narrowed as the agent does it: new entries, then the bucket's epoch
    // (put_vip renews it), so that cached copies are checked again.
    range("192.0.2.128/25", XLB_SOURCE_DENY);
    vip(false, XLB_VIP_F_SOURCE_RANGES);
    expect_allowed(ip("192.0.2.10"));
    expect_denied(ip("192.0.2.200"));
}

// The agent's own layer over the real maps: control::BpfDataPlane given a
// VIP's lists as the reconciler hands them (datapath::source_range_entries,
// entries before the flag, the flag cleared before the entries go).
class SourceRangeDataPlaneTest : public SourceRangeTest {
protected:
    static config::VipSpec lists(std::vector<const char*> allow, std::vector<const char*> deny) {
        config::VipSpec v;
        v.address = kVipV4;
        v.port = kVipPort;
        v.syn_cookies = config::SynCookies::kOff;  // only the lists at work here
        for (const char* p : allow) v.allow_sources.push_back(*net::Prefix::parse(p));
        for (const char* p : deny) v.deny_sources.push_back(*net::Prefix::parse(p));
        return v;
    }

    // The VIP's flags and entries, in the reconciler's order.
    void apply(control::BpfDataPlane& dp, const config::VipSpec& v, bool flag_changes) {
        const auto entries = datapath::source_range_entries(v, kVipId);
        const xlb_vip_key key = datapath::vip_key(v);
        if (!entries.empty()) {
            auto ok = dp.set_source_ranges(key, kVipId, entries);
            ASSERT_TRUE(ok) << ok.error().message();
        }
        if (flag_changes) {
            auto ok = dp.put_vip(key, datapath::vip_value(v, kVipId, config::Encap::kGue));
            ASSERT_TRUE(ok) << ok.error().message();
        }
        if (entries.empty()) {
            auto ok = dp.remove_source_ranges(kVipId);
            ASSERT_TRUE(ok) << ok.error().message();
        }
    }

    // The trie's keys of one VIP id.
    static std::vector<xlb_src_range_key> keys_of(std::uint32_t vip_id) {
        auto keys = lb().source_ranges().keys();
        EXPECT_TRUE(keys) << keys.error().message();
        std::vector<xlb_src_range_key> out;
        if (keys)
            for (const xlb_src_range_key& k : *keys)
                if (ntohl(k.vip_id) == vip_id) out.push_back(k);
        return out;
    }

    static bool same_keys(std::vector<xlb_src_range_key> a,
                          const std::vector<datapath::SourceRangeEntry>& want) {
        if (a.size() != want.size()) return false;
        for (const auto& e : want)
            if (std::none_of(a.begin(), a.end(), [&](const xlb_src_range_key& k) {
                    return std::memcmp(&k, &e.key, sizeof k) == 0;
                }))
                return false;
        return true;
    }
};

TEST_F(SourceRangeDataPlaneTest, ListsAreAppliedNarrowedAndRemoved) {
    PinnedToOneCpu pinned;  // one flow cache for every run below
    ASSERT_TRUE(pinned.ok());
    vip(false, 0);
    control::BpfDataPlane dp{lb()};
    // Another VIP's entries, which nothing below may touch.
    const config::VipSpec other = lists({}, {"203.0.113.0/24"});
    const auto other_entries = datapath::source_range_entries(other, kVipId + 1);
    ASSERT_TRUE(dp.set_source_ranges(datapath::vip_key(other), kVipId + 1, other_entries));

    const config::VipSpec wide = lists({"192.0.2.0/24", "198.18.0.0/15"}, {"192.0.2.64/26"});
    apply(dp, wide, true);
    EXPECT_TRUE(same_keys(keys_of(kVipId), datapath::source_range_entries(wide, kVipId)));
    expect_allowed(ip("192.0.2.10"));
    expect_allowed(ip("192.0.2.200"));
    expect_allowed(ip("198.19.3.4"));
    expect_denied(ip("192.0.2.70"));  // the deny inside the allow
    expect_denied(ip("10.0.0.1"));    // outside every allow
    // Established: each flow again, from its entry or this CPU's cache.
    for (int i = 0; i < 3; ++i) {
        expect_allowed(ip("192.0.2.10"));
        expect_allowed(ip("192.0.2.200"));
    }

    // Narrowed: only new entries and the epoch, no VIP write (its flag is
    // unchanged), yet the established flow it no longer allows stops.
    const config::VipSpec narrow = lists({"192.0.2.0/25"}, {"192.0.2.64/26"});
    apply(dp, narrow, false);
    EXPECT_TRUE(same_keys(keys_of(kVipId), datapath::source_range_entries(narrow, kVipId)))
        << "stale entries of the wide lists were removed";
    expect_denied(ip("192.0.2.200"));
    expect_allowed(ip("192.0.2.10"));
    expect_denied(ip("198.19.3.4"));
    expect_denied(ip("192.0.2.70"));

    // Lists gone: every client passes, and the trie holds nothing of the VIP.
    apply(dp, lists({}, {}), true);
    EXPECT_TRUE(keys_of(kVipId).empty());
    for (const char* client : {"192.0.2.10", "192.0.2.200", "192.0.2.70", "10.0.0.1"})
        expect_allowed(ip(client));
    EXPECT_TRUE(same_keys(keys_of(kVipId + 1), other_entries)) << "the other VIP's stay";
}

// A restarted agent (a new BpfDataPlane over the same maps) removes the
// entries an earlier one left for the VIP id.
TEST_F(SourceRangeDataPlaneTest, ARestartedAgentRemovesEntriesItDidNotWrite) {
    vip(false, 0);
    {
        control::BpfDataPlane before{lb()};
        apply(before, lists({"192.0.2.0/24"}, {}), true);
    }
    control::BpfDataPlane after{lb()};
    const config::VipSpec deny_only = lists({}, {"192.0.2.128/25"});
    apply(after, deny_only, true);
    EXPECT_TRUE(same_keys(keys_of(kVipId), datapath::source_range_entries(deny_only, kVipId)));
    expect_allowed(ip("10.0.0.1"));  // the old 0.0.0.0/0 deny is gone
    expect_denied(ip("192.0.2.200"));
    control::BpfDataPlane again{lb()};
    ASSERT_TRUE(again.remove_source_ranges(kVipId));
    EXPECT_TRUE(keys_of(kVipId).empty());
}

}  // namespace
}  // namespace xlb::test
