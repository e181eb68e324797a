// SPDX-License-Identifier: Apache-2.0
// What the data path tells the agent about connections, through the
// balancer's packets: a client's FIN and RST are noted in its entry's record
// (abi.h, struct xlb_ct_record: `ended`), also when the flow cache holds the
// flow, and forgotten when a SYN gives the client's ports a new connection;
// each backend counts the connections started towards it (struct
// xlb_backend_stats: new_flows). Whole output frames are compared.
#include <gtest/gtest.h>

#include <cstring>
#include <optional>

#include "lb_fixture.h"
#include "testbed.h"

namespace xlb::test {
namespace {

constexpr std::uint32_t kVipId = 3;
constexpr std::uint32_t kUdpVipId = 4;

class ConntrackEndedTest : public LbTest {
protected:
    void SetUp() override {
        LbTest::SetUp();
        add_backend(10, kBackendV4[0]);
        add_backend(11, kBackendV4[1]);
        add_backend(20, kBackendV6[0]);
    }

    // Sends the flow's frame with these TCP flags: it must leave whole,
    // encapsulated to `backend`.
    void send(const Flow& f, std::uint8_t flags, std::uint32_t backend) {
        FrameOptions opt;
        opt.tcp_flags = flags;
        const Bytes frame = make_frame(f, opt);
        const Bytes expected = expected_encap(frame, backend_addr_.at(backend), flow_key(f));
        ASSERT_EQ(checksum_errors(expected), "") << "test bug: expected frame is invalid";
        expect_outcome(frame, XDP_TX, XLB_OUT_TX, expected);
    }

    // The XLB_CT_ENDED_* flags the agent's walk reads for the flow's entry;
    // nullopt when the walk does not find it.
    static std::optional<unsigned> ended_of(const Flow& f) {
        const xlb_flow_key want = flow_key(f);
        std::optional<unsigned> out;
        lb().conntrack().for_each_entry(
            [&](const xlb_flow_key& key, const xlb_ct_value&, unsigned ended) {
                if (std::memcmp(&key, &want, sizeof key) == 0) out = ended;
            });
        return out;
    }

    void client_ending_is_noted(const Flow& f, std::uint32_t vip_id, std::uint32_t backend,
                                std::uint32_t other) {
        publish_ring(vip_id, std::vector<std::uint32_t>(64, backend));
        send(f, kTcpSyn, backend);
        send(f, kTcpAck, backend);  // records the flow
        // Enough packets for this CPU's flow cache to hold the flow: the FIN
        // must still reach the table.
        for (int i = 0; i < 4; ++i) send(f, kTcpAck | kTcpPsh, backend);
        ASSERT_EQ(ended_of(f), 0u);
        send(f, kTcpFin | kTcpAck, backend);
        EXPECT_EQ(ended_of(f), XLB_CT_ENDED_FIN);
        send(f, kTcpAck, backend);
        EXPECT_EQ(ended_of(f), XLB_CT_ENDED_FIN) << "kept by later packets";
        send(f, kTcpRst, backend);
        EXPECT_EQ(ended_of(f), XLB_CT_ENDED_FIN | XLB_CT_ENDED_RST);
        // The same ports start a new connection, which the ring now sends
        // elsewhere: the SYN rewrites the entry, whose word no longer fits.
        publish_ring(vip_id, std::vector<std::uint32_t>(64, other));
        send(f, kTcpSyn, other);
        send(f, kTcpAck, other);
        EXPECT_EQ(ended_of(f), 0u) << "the earlier connection's FIN and RST stayed";
    }
};

TEST_F(ConntrackEndedTest, AClientsFinAndRstAreNotedInItsEntryV4) {
    add_vip(kVipV4, kVipPort, kProtoTcp, kVipId);
    client_ending_is_noted({kClientV4, kVipV4, 41000, kVipPort, kProtoTcp}, kVipId, 10, 11);
}

TEST_F(ConntrackEndedTest, AClientsFinAndRstAreNotedInItsEntryV6) {
    add_vip(kVipV6, kVipPort, kProtoTcp, kVipId);
    add_backend(21, kBackendV6[1]);
    client_ending_is_noted({kClientV6, kVipV6, 41000, kVipPort, kProtoTcp}, kVipId, 20, 21);
}

// A FIN of a flow the table does not hold notes nothing (and is balanced as
// any packet without an entry).
TEST_F(ConntrackEndedTest, AFinWithoutAnEntryNotesNothing) {
    add_vip(kVipV4, kVipPort, kProtoTcp, kVipId);
    publish_ring(kVipId, std::vector<std::uint32_t>(64, 10));
    const Flow f{kClientV4, kVipV4, 41001, kVipPort, kProtoTcp};
    send(f, kTcpFin | kTcpAck, 10);
    EXPECT_EQ(ended_of(f), 0u) << "recorded by the FIN, but no earlier FIN to note";
}

// Catches a counter that counts the handshake twice (SYN and its ACK), or
// established packets, or a UDP flow's later packets.
TEST_F(ConntrackEndedTest, EachBackendCountsTheConnectionsStartedTowardsIt) {
    add_vip(kVipV4, kVipPort, kProtoTcp, kVipId);
    add_vip(kVipV4, 53, kProtoUdp, kUdpVipId);
    publish_ring(kVipId, std::vector<std::uint32_t>(64, 10));
    publish_ring(kUdpVipId, std::vector<std::uint32_t>(64, 11));
    const Flow tcp{kClientV4, kVipV4, 42000, kVipPort, kProtoTcp};
    send(tcp, kTcpSyn, 10);
    EXPECT_EQ(backend_stats(10).new_flows, 1u);
    send(tcp, kTcpAck, 10);
    for (int i = 0; i < 3; ++i) send(tcp, kTcpAck | kTcpPsh, 10);
    send(tcp, kTcpFin | kTcpAck, 10);
    EXPECT_EQ(backend_stats(10).new_flows, 1u) << "one connection";
    EXPECT_EQ(backend_stats(10).packets, 6u);
    send({kClientV4, kVipV4, 42001, kVipPort, kProtoTcp}, kTcpSyn, 10);
    EXPECT_EQ(backend_stats(10).new_flows, 2u);

    const Flow udp{kClientV4, kVipV4, 42000, 53, kProtoUdp};
    const Bytes frame = make_frame(udp);
    const Bytes expected = expected_encap(frame, backend_addr_.at(11), flow_key(udp));
    expect_outcome(frame, XDP_TX, XLB_OUT_TX, expected);
    expect_outcome(frame, XDP_TX, XLB_OUT_TX, expected);
    EXPECT_EQ(backend_stats(11).new_flows, 1u) << "the second packet found the entry";
    EXPECT_EQ(backend_stats(11).packets, 2u);
    EXPECT_EQ(backend_stats(10).new_flows, 2u);

    // A stateless UDP VIP (no connection table) has no flows to count.
    constexpr std::uint32_t kStatelessVipId = 5;
    add_vip(kVipV4, 5353, kProtoUdp, kStatelessVipId, XLB_VIP_F_NO_CONNTRACK);
    add_backend(12, kBackendV4[2]);
    publish_ring(kStatelessVipId, std::vector<std::uint32_t>(64, 12));
    const Flow dns{kClientV4, kVipV4, 42000, 5353, kProtoUdp};
    const Bytes query = make_frame(dns);
    const Bytes sent =
        expected_encap(query, backend_addr_.at(12), flow_key(dns), XLB_VIP_F_NO_CONNTRACK);
    expect_outcome(query, XDP_TX, XLB_OUT_TX, sent);
    expect_outcome(query, XDP_TX, XLB_OUT_TX, sent);
    EXPECT_EQ(backend_stats(12).packets, 2u);
    EXPECT_EQ(backend_stats(12).new_flows, 0u) << "each packet is no new connection";
}

}  // namespace
}  // namespace xlb::test
