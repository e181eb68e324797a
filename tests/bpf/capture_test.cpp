// SPDX-License-Identifier: Apache-2.0
// Capture in the balancer (abi.h, struct xlb_capture_filter; docs/capture.md):
// with the flag off nothing is copied; with it on, exactly the packets whose
// verdict matches the filter are, as received and (sent on) as sent, byte for
// byte against the frames the program took in and put out; the per-VIP drop
// reasons count alongside; a full ring counts what it lost.
#include "xlb/capture/capture.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <memory>
#include <vector>

#include "lb_fixture.h"
#include "testbed.h"

namespace xlb::test {
namespace {

constexpr std::uint32_t kVipId = 3;
constexpr std::uint32_t kTablelessVipId = 4;  // a VIP without a published ring
const net::IpAddress kTablelessVip = ip("198.51.100.30");

struct Copied {
    xlb_capture_record header;
    Bytes data;
};

class CaptureTest : public LbTest {
protected:
    void SetUp() override {
        LbTest::SetUp();
        for (std::uint32_t i = 0; i < 4; ++i) add_backend(10 + i, kBackendV4[i]);
        add_vip(kVipV4, kVipPort, kProtoTcp, kVipId);
        ring_ = publish_maglev(kVipId, {{10}, {11}, {12}, {13}});
        add_vip(kTablelessVip, kVipPort, kProtoTcp, kTablelessVipId);
    }
    void TearDown() override { session_.reset(); }

    void start(const capture::Selection& s) {
        session_.reset();
        auto filter = capture::make_filter(s);
        ASSERT_TRUE(filter) << filter.error().message();
        auto session = capture::Session::start(lb(), *filter);
        ASSERT_TRUE(session) << session.error().message();
        session_ = std::move(*session);
    }

    std::vector<Copied> records() {
        std::vector<Copied> out;
        auto n = session_->poll(0, [&](const capture::Record& r) {
            out.push_back({r.header, Bytes(r.data.begin(), r.data.end())});
        });
        EXPECT_TRUE(n) << n.error().message();
        return out;
    }

    Flow flow_to(std::uint32_t backend_id, std::uint16_t first_port = 40000) {
        for (std::uint16_t port = first_port; port < first_port + 5000; ++port) {
            Flow f{kClientV4, kVipV4, port, kVipPort, kProtoTcp};
            if (expected_backend(ring_, flow_key(f)) == backend_id) return f;
        }
        ADD_FAILURE() << "no flow goes to backend " << backend_id;
        return {};
    }

    std::vector<std::uint32_t> ring_;
    std::unique_ptr<capture::Session> session_;
};

std::uint32_t bit(xlb_outcome o) { return 1U << o; }

// The received record of a packet sent on: the packet as it came in, under
// the Ethernet addresses it left with (the outer header overwrote the
// received ones).
Bytes received_copy(const Bytes& input, const Bytes& sent) {
    Bytes out = input;
    std::copy(sent.begin(), sent.begin() + 12, out.begin());
    return out;
}

TEST_F(CaptureTest, NothingIsCopiedWhileTheFlagIsOff) {
    const Bytes frame = make_frame(flow_to(10), {.tcp_flags = kTcpSyn});
    ASSERT_EQ(run(frame).action, XDP_TX);
    EXPECT_FALSE(lb().capture_on());
    start({.outcomes = ~0U});
    EXPECT_TRUE(records().empty()) << "a packet from before the capture";
    session_.reset();
    EXPECT_FALSE(lb().capture_on()) << "the session's end turns the flag off";
    ASSERT_EQ(run(frame).action, XDP_TX);
    start({.outcomes = ~0U});
    EXPECT_TRUE(records().empty()) << "a packet from after the capture";
    EXPECT_EQ(lb().capture_counters().matched, 0u);
}

TEST_F(CaptureTest, ASentPacketIsCopiedAsReceivedAndAsSent) {
    const Flow f = flow_to(11);
    const Bytes frame = make_frame(f, {.tcp_flags = kTcpSyn});
    start({.outcomes = bit(XLB_OUT_TX)});
    const auto out = run(frame);
    ASSERT_EQ(out.action, XDP_TX);
    ASSERT_EQ(out.frame, expected_encap(frame, kBackendV4[1], flow_key(f)));
    const auto got = records();
    ASSERT_EQ(got.size(), 2u);
    EXPECT_EQ(got[0].header.direction, XLB_CAPTURE_RECEIVED);
    EXPECT_EQ(got[0].data, received_copy(frame, out.frame)) << "the received frame";
    EXPECT_EQ(got[0].header.len, frame.size());
    EXPECT_EQ(got[0].header.caplen, frame.size());
    EXPECT_EQ(got[1].header.direction, XLB_CAPTURE_SENT);
    EXPECT_EQ(got[1].data, out.frame) << "the encapsulated frame as it left";
    EXPECT_EQ(got[1].header.len, out.frame.size());
    for (const Copied& c : got) {
        EXPECT_EQ(c.header.outcome, XLB_OUT_TX);
        EXPECT_EQ(c.header.flags, XLB_CAPTURE_F_VIP);
        EXPECT_EQ(c.header.vip_id, kVipId);
        EXPECT_GT(c.header.time_ns, 0u);
    }
    EXPECT_LE(got[0].header.time_ns, got[1].header.time_ns);
    EXPECT_EQ(lb().capture_counters().matched, 1u);
    EXPECT_EQ(lb().capture_counters().lost, 0u);
}

TEST_F(CaptureTest, FiltersSelectByOutcomeVipBackendAndSource) {
    const Flow to_b10 = flow_to(10), to_b12 = flow_to(12);
    Flow other_client = flow_to(12, 45000);
    other_client.src = ip("192.0.2.200");
    other_client.sport = 41000;
    const Bytes tableless =
        make_frame({kClientV4, kTablelessVip, 40000, kVipPort, kProtoTcp}, {.tcp_flags = kTcpSyn});
    const Bytes syn10 = make_frame(to_b10, {.tcp_flags = kTcpSyn});
    const Bytes syn12 = make_frame(to_b12, {.tcp_flags = kTcpSyn});
    const Bytes not_vip = make_frame({kClientV4, ip("198.51.100.99"), 40000, kVipPort, kProtoTcp});

    // drops only: the table-less VIP's packet, not the sent or passed ones
    start({.outcomes = bit(XLB_OUT_DROP_NO_TABLE) | bit(XLB_OUT_DROP_NO_BACKEND)});
    ASSERT_EQ(run(syn10).action, XDP_TX);
    ASSERT_EQ(run(not_vip).action, XDP_PASS);
    ASSERT_EQ(run(tableless).action, XDP_DROP);
    auto got = records();
    ASSERT_EQ(got.size(), 1u);
    EXPECT_EQ(got[0].header.outcome, XLB_OUT_DROP_NO_TABLE);
    EXPECT_EQ(got[0].header.direction, XLB_CAPTURE_RECEIVED);
    EXPECT_EQ(got[0].header.vip_id, kTablelessVipId);
    EXPECT_EQ(got[0].data, tableless);
    auto drops = lb().vip_drops().get_per_cpu(kTablelessVipId);
    ASSERT_TRUE(drops);
    std::uint64_t no_table = 0, others = 0;
    for (const xlb_vip_drops& cpu : *drops)
        for (std::uint32_t r = 0; r < XLB_VIP_DROP_REASONS; ++r)
            (r == xlb_vip_drop_slot(XLB_OUT_DROP_NO_TABLE) ? no_table : others) += cpu.by_reason[r];
    EXPECT_EQ(no_table, 1u) << "the VIP's drop counted under its reason";
    EXPECT_EQ(others, 0u);

    // one VIP's packets: not another VIP's, not traffic for no VIP
    start({.outcomes = ~0U, .vip_id = kVipId});
    ASSERT_EQ(run(tableless).action, XDP_DROP);
    ASSERT_EQ(run(not_vip).action, XDP_PASS);
    const Bytes sent12 = run(syn12).frame;
    got = records();
    ASSERT_EQ(got.size(), 2u);
    EXPECT_EQ(got[0].data, received_copy(syn12, sent12));
    EXPECT_EQ(got[1].data, sent12);

    // one backend: only the packets sent to it
    start({.outcomes = ~0U, .backend = kBackendV4[2]});
    ASSERT_EQ(run(syn10).action, XDP_TX);
    ASSERT_EQ(run(syn12).action, XDP_TX);
    ASSERT_EQ(run(tableless).action, XDP_DROP);
    got = records();
    ASSERT_EQ(got.size(), 2u);
    EXPECT_EQ(got[0].data, received_copy(syn12, sent12));

    // one client prefix: not the other client, whatever its verdict
    start({.outcomes = ~0U, .src = *net::Prefix::parse("192.0.2.128/25")});
    ASSERT_EQ(run(syn12).action, XDP_TX);
    const Bytes other = make_frame(other_client, {.tcp_flags = kTcpSyn});
    const auto sent_other = run(other);
    ASSERT_EQ(sent_other.action, XDP_TX);
    got = records();
    ASSERT_EQ(got.size(), 2u);
    EXPECT_EQ(got[0].data, received_copy(other, sent_other.frame));
    EXPECT_EQ(lb().capture_counters().matched, 1u);
}

TEST_F(CaptureTest, SnapLengthCutsRecordsNotTheirLength) {
    const Bytes frame = make_frame(flow_to(13), {.tcp_flags = kTcpSyn, .payload = Bytes(400, 'x')});
    start({.outcomes = ~0U, .snaplen = 60});
    const auto out = run(frame);
    ASSERT_EQ(out.action, XDP_TX);
    const auto got = records();
    ASSERT_EQ(got.size(), 2u);
    EXPECT_EQ(got[0].header.len, frame.size());
    EXPECT_EQ(got[0].data, received_copy(Bytes(frame.begin(), frame.begin() + 60), out.frame));
    EXPECT_EQ(got[1].header.len, out.frame.size());
    EXPECT_EQ(got[1].data, Bytes(out.frame.begin(), out.frame.begin() + 60));
}

TEST_F(CaptureTest, AFullRingCountsWhatItLost) {
    // Every record of a 600-byte frame reserves the large size: the ring
    // holds fewer than 2100 of them.
    const Bytes frame = make_frame({kClientV4, kTablelessVip, 40000, kVipPort, kProtoTcp},
                                   {.tcp_flags = kTcpSyn, .payload = Bytes(540, 'y')});
    start({.outcomes = ~0U});
    auto r = bpf::test_run_xdp(lb().prog_fd(), frame, 2100);
    ASSERT_TRUE(r) << r.error().message();
    ASSERT_EQ(r->action, XDP_DROP);
    std::size_t read = 0;
    for (int i = 0; i < 10; ++i) read += records().size();
    const auto counters = lb().capture_counters();
    EXPECT_EQ(counters.matched, 2100u);
    EXPECT_GT(counters.lost, 0u);
    EXPECT_EQ(read + counters.lost, 2100u) << "every matched packet read or counted lost";
}

TEST_F(CaptureTest, BadSelectionsAreRefused) {
    EXPECT_FALSE(capture::make_filter({.outcomes = 0}));
    EXPECT_FALSE(capture::make_filter({.outcomes = 1, .snaplen = 0}));
    EXPECT_FALSE(capture::make_filter({.outcomes = 1, .snaplen = XLB_CAPTURE_DATA_MAX + 1}));
    start({.outcomes = ~0U});
    auto filter = capture::make_filter({.outcomes = 1});
    ASSERT_TRUE(filter);
    auto second = capture::Session::start(lb(), *filter);
    ASSERT_FALSE(second) << "a second capture while one runs";
    EXPECT_NE(second.error().message().find("another capture"), std::string::npos)
        << second.error().message();
    EXPECT_TRUE(lb().capture_on()) << "the refused one leaves the first running";
}

// What a capture writes of the ring's records (capture::PacketRecords): at
// most --count packets, each whole. The ring may hold, past the count, the
// sent copy of a packet whose received copy was left out, and records of
// several CPUs interleave; no such sent copy is written, and the count of
// records is exactly that of the packets taken.
TEST(PacketRecords, TakesWholePacketsUpToTheCount) {
    auto record = [](std::uint8_t outcome, std::uint8_t direction, std::uint32_t ifindex = 2) {
        xlb_capture_record r{};
        r.ifindex = ifindex;
        r.vip_id = kVipId;
        r.flags = XLB_CAPTURE_F_VIP;
        r.outcome = outcome;
        r.direction = direction;
        return r;
    };
    using Take = capture::PacketRecords::Take;
    const auto in = record(XLB_OUT_TX, XLB_CAPTURE_RECEIVED);
    const auto out = record(XLB_OUT_TX, XLB_CAPTURE_SENT);
    const auto drop = record(XLB_OUT_DROP_NO_BACKEND, XLB_CAPTURE_RECEIVED);

    capture::PacketRecords p(3);
    EXPECT_EQ(p.take(out), Take::kSkip) << "a sent copy whose packet began before the capture";
    EXPECT_EQ(p.take(in), Take::kPacket);
    EXPECT_EQ(p.take(drop), Take::kPacket);
    EXPECT_EQ(p.take(out), Take::kRecord) << "the first packet's sent copy, after another CPU's";
    EXPECT_EQ(p.take(in), Take::kPacket);
    EXPECT_TRUE(p.full());
    EXPECT_EQ(p.take(in), Take::kSkip) << "a fourth packet";
    EXPECT_EQ(p.take(out), Take::kRecord) << "the third packet's sent copy, after the count";
    EXPECT_EQ(p.take(out), Take::kSkip)
        << "the fourth packet's sent copy: its packet was not taken";
    EXPECT_EQ(p.take(drop), Take::kSkip);
    EXPECT_EQ(p.packets(), 3u);
    EXPECT_EQ(p.records(), 5u) << "two packets sent on, one dropped";

    // a sent copy belongs to a received one of its own interface and outcome
    capture::PacketRecords q(std::nullopt);
    EXPECT_EQ(q.take(record(XLB_OUT_TX, XLB_CAPTURE_RECEIVED, 2)), Take::kPacket);
    EXPECT_EQ(q.take(record(XLB_OUT_TX, XLB_CAPTURE_SENT, 3)), Take::kSkip);
    EXPECT_EQ(q.take(record(XLB_OUT_TX_ICMP_ERROR, XLB_CAPTURE_SENT, 2)), Take::kSkip);
    EXPECT_EQ(q.take(record(XLB_OUT_TX, XLB_CAPTURE_SENT, 2)), Take::kRecord);
    // an answered "too big" is the one record of its packet
    EXPECT_EQ(q.take(record(XLB_OUT_TX_ICMP_TOO_BIG, XLB_CAPTURE_SENT)), Take::kPacket);
    EXPECT_EQ(q.packets(), 2u);
    EXPECT_EQ(q.records(), 3u);
    EXPECT_FALSE(q.full());
}

}  // namespace
}  // namespace xlb::test
