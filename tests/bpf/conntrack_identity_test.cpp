// SPDX-License-Identifier: Apache-2.0
// How the connection table (abi.h, layout 5) names a flow, through the
// balancer's packets: a slot holds the VIP id, the source address and both
// ports, so flows that differ in any of them, even in one bucket, are kept
// apart; a flow that found its first bucket full lives in its second and is
// found there; an IPv4 entry with a second-chance hint takes a pair of slots
// and keeps its hint. Whole output frames are compared; the table's memory is
// read to check where entries went.
#include <gtest/gtest.h>
#include <sys/mman.h>

#include <cstring>
#include <optional>
#include <vector>

#include "lb_fixture.h"
#include "testbed.h"
#include "xlb/ct_set.h"
#include "xlb/datapath/setup.h"

namespace xlb::test {
namespace {

constexpr std::uint32_t kVipA = 3;
constexpr std::uint32_t kVipB = 4;

// The table's buckets as the program sees them (read only).
class TableView {
public:
    explicit TableView(const bpf::ConntrackTable& table)
        : length_(std::size_t{table.elements()} * sizeof(xlb_ct_line)) {
        void* p = mmap(nullptr, length_, PROT_READ, MAP_SHARED, table.fd(), 0);
        EXPECT_NE(p, MAP_FAILED) << std::strerror(errno);
        base_ = p == MAP_FAILED ? nullptr : static_cast<const xlb_ct_line*>(p);
    }
    ~TableView() {
        if (base_) munmap(const_cast<xlb_ct_line*>(base_), length_);
    }
    TableView(const TableView&) = delete;
    TableView& operator=(const TableView&) = delete;

    bool ok() const { return base_ != nullptr; }
    const xlb_ct_bucket& bucket(std::uint32_t b) const {
        return *reinterpret_cast<const xlb_ct_bucket*>(&base_[XLB_CT_BUCKET_ELEMENT(b)]);
    }
    // The head slot of the flow (of VIP vip_id) in bucket b, or -1.
    int head_of(std::uint32_t b, const xlb_flow_key& key, std::uint32_t vip_id) const {
        xlb_ct_ident id{};
        xlb_ct_ident_of(&key, vip_id, &id);
        const xlb_ct_bucket& bk = bucket(b);
        for (int s = 0; s < XLB_CT_SLOTS; ++s)
            if ((bk.slot[s].meta & XLB_CT_IDENT_MASK) == id.head_match &&
                bk.slot[s].key == id.head_key)
                return s;
        return -1;
    }
    // Slots holding an entry's head or tail, over all buckets.
    std::uint32_t used_slots(std::uint32_t buckets) const {
        std::uint32_t n = 0;
        for (std::uint32_t b = 0; b < buckets; ++b)
            for (const xlb_ct_slot& s : bucket(b).slot)
                n += xlb_ct_kind(s.meta) != XLB_CT_KIND_EMPTY;
        return n;
    }

private:
    std::size_t length_;
    const xlb_ct_line* base_ = nullptr;
};

class ConntrackIdentityTest : public LbTest {
protected:
    void SetUp() override {
        LbTest::SetUp();
        for (std::uint32_t i = 0; i < 4; ++i) add_backend(10 + i, kBackendV4[i]);
        for (std::uint32_t i = 0; i < 4; ++i) add_backend(20 + i, kBackendV6[i]);
    }

    static std::uint32_t buckets() { return lb().conntrack().buckets(); }
    static void buckets_of(const Flow& f, std::uint32_t* first, std::uint32_t* second) {
        const xlb_flow_key key = flow_key(f);
        xlb_ct_buckets(&key, lb().conntrack().header().seed, buckets(), first, second);
    }
    static std::uint32_t first_bucket(const Flow& f) {
        std::uint32_t first = 0, second = 0;
        buckets_of(f, &first, &second);
        return first;
    }

    // A source port from `from` on at which every flow make(port) has the
    // same first bucket: flows a slot must tell apart, side by side.
    template <typename Make>
    static std::uint16_t port_sharing_a_bucket(Make make, std::size_t flows, std::uint16_t from) {
        for (std::uint32_t port = from; port < 65536; ++port) {
            const std::vector<Flow> group = make(static_cast<std::uint16_t>(port));
            EXPECT_EQ(group.size(), flows);
            bool same = true;
            for (const Flow& f : group) same = same && first_bucket(f) == first_bucket(group[0]);
            if (same) return static_cast<std::uint16_t>(port);
        }
        ADD_FAILURE() << "no port puts the flows in one bucket: test bug";
        return from;
    }

    // The frame of `f` must leave encapsulated, whole and with valid
    // checksums, to `backend`.
    void expect_sent_to(const Flow& f, std::uint32_t backend) {
        const Bytes frame = make_frame(f);
        const Bytes expected = expected_encap(frame, backend_addr_.at(backend), flow_key(f));
        ASSERT_EQ(checksum_errors(expected), "") << "test bug: expected frame is invalid";
        expect_outcome(frame, XDP_TX, XLB_OUT_TX, expected);
    }

    // Records each flow through the program on its own backend (the VIP's
    // ring names only that one when the flow's first packet comes), then
    // turns every ring to `elsewhere`: each flow must still reach its own
    // backend, so each was recorded and is found as itself. A table that
    // took one flow for another sends the second to the first's backend.
    void expect_kept_apart(const std::vector<Flow>& flows, const std::vector<std::uint32_t>& vips,
                           const std::vector<std::uint32_t>& backends, std::uint32_t elsewhere) {
        ASSERT_EQ(flows.size(), backends.size());
        for (std::size_t i = 0; i < flows.size(); ++i) {
            publish_ring(vips[i], std::vector<std::uint32_t>(64, backends[i]));
            expect_sent_to(flows[i], backends[i]);
        }
        for (std::uint32_t v : vips) publish_ring(v, std::vector<std::uint32_t>(64, elsewhere));
        for (std::size_t i = 0; i < flows.size(); ++i) {
            SCOPED_TRACE("flow " + std::to_string(i));
            expect_sent_to(flows[i], backends[i]);
            auto e = lb().conntrack().get(flow_key(flows[i]));
            ASSERT_TRUE(e && *e) << "not found by the agent's reader";
            EXPECT_EQ((*e)->backend_id, backends[i]);
        }
        EXPECT_EQ(lb().conntrack().count(), flows.size());
    }
};

// Catches a slot that does not hold the VIP: two flows with the same client
// address and ports, to two VIPs (other addresses, or one address under
// TCP and UDP), in one bucket, have equal slot keys and differ only in the
// VIP id of the meta.
TEST_F(ConntrackIdentityTest, TheSameClientAndPortsToTwoVipsAreTwoFlows) {
    const net::IpAddress other_vip = ip("198.51.100.11");
    add_vip(kVipV4, kVipPort, kProtoTcp, kVipA);
    add_vip(other_vip, kVipPort, kProtoTcp, kVipB);
    auto two_vips = [&](std::uint16_t port) {
        return std::vector<Flow>{{kClientV4, kVipV4, port, kVipPort, kProtoTcp},
                                 {kClientV4, other_vip, port, kVipPort, kProtoTcp}};
    };
    const std::uint16_t port = port_sharing_a_bucket(two_vips, 2, 30000);
    expect_kept_apart(two_vips(port), {kVipA, kVipB}, {10, 11}, 12);
}

// Catches a generation check that compares more bits than the slot keeps
// (XLB_CT_GENERATION_MASK): the backend's generation is far above them, and
// its flow must still be found on it.
TEST_F(ConntrackIdentityTest, AFlowOfABackendWithALargeGenerationStaysOnIt) {
    add_vip(kVipV4, kVipPort, kProtoTcp, kVipA);
    add_backend(10, backend_addr_.at(10), 1000);
    const Flow f{kClientV4, kVipV4, 31000, kVipPort, kProtoTcp};
    expect_kept_apart({f}, {kVipA}, {10}, 12);
    auto e = lb().conntrack().get(flow_key(f));
    ASSERT_TRUE(e && *e);
    EXPECT_EQ((*e)->generation, 1000u & XLB_CT_GENERATION_MASK);
}

TEST_F(ConntrackIdentityTest, OneAddressAndPortUnderTcpAndUdpAreTwoFlows) {
    constexpr std::uint32_t kUdpVip = 5;
    add_vip(kVipV4, kVipPort, kProtoTcp, kVipA);
    add_vip(kVipV4, kVipPort, kProtoUdp, kUdpVip);
    auto two_protocols = [&](std::uint16_t port) {
        return std::vector<Flow>{{kClientV4, kVipV4, port, kVipPort, kProtoTcp},
                                 {kClientV4, kVipV4, port, kVipPort, kProtoUdp}};
    };
    const std::uint16_t port = port_sharing_a_bucket(two_protocols, 2, 31000);
    expect_kept_apart(two_protocols(port), {kVipA, kUdpVip}, {11, 13}, 10);
}

// Catches an IPv6 entry named by its head alone (the first 8 bytes of the
// source): clients 2001:db8:c::10 and ::11 share those bytes and differ only
// in the tail's key.
TEST_F(ConntrackIdentityTest, Ipv6FlowsThatShareAHeadAreToldApartByTheirTail) {
    const net::IpAddress client2 = ip("2001:db8:c::11");
    add_vip(kVipV6, kVipPort, kProtoTcp, kVipA);
    auto two_clients = [&](std::uint16_t port) {
        return std::vector<Flow>{{kClientV6, kVipV6, port, kVipPort, kProtoTcp},
                                 {client2, kVipV6, port, kVipPort, kProtoTcp}};
    };
    const std::uint16_t port = port_sharing_a_bucket(two_clients, 2, 32000);
    expect_kept_apart(two_clients(port), {kVipA, kVipA}, {20, 21}, 23);
}

// Catches a tail that drops the ports: one IPv6 client's flows from two
// source ports (the second found among the ports after the first that
// share its bucket), and below, to a port-0 VIP, to two destination ports.
TEST_F(ConntrackIdentityTest, Ipv6FlowsThatDifferInTheSourcePortAreTwoFlows) {
    add_vip(kVipV6, kVipPort, kProtoTcp, kVipA);
    const Flow first{kClientV6, kVipV6, 34000, kVipPort, kProtoTcp};
    auto with = [&](std::uint16_t port) {
        return std::vector<Flow>{first, {kClientV6, kVipV6, port, kVipPort, kProtoTcp}};
    };
    const std::uint16_t port = port_sharing_a_bucket(with, 2, 34001);
    expect_kept_apart(with(port), {kVipA, kVipA}, {22, 21}, 20);
}

TEST_F(ConntrackIdentityTest, Ipv6FlowsThatDifferInTheDestinationPortAreTwoFlows) {
    add_vip(kVipV6, 0, kProtoTcp, kVipB);  // every port of the address
    auto two_ports = [&](std::uint16_t port) {
        return std::vector<Flow>{{kClientV6, kVipV6, port, 443, kProtoTcp},
                                 {kClientV6, kVipV6, port, 8443, kProtoTcp}};
    };
    const std::uint16_t port = port_sharing_a_bucket(two_ports, 2, 33000);
    expect_kept_apart(two_ports(port), {kVipB, kVipB}, {21, 22}, 20);
}

// Catches an insert that puts a flow in its second bucket without the first
// bucket's overflow bit, and a lookup that never reads the second bucket (or
// the first bucket's second line): XLB_CT_FIRST_FILL + 1 flows share a first
// bucket; the first XLB_CT_FIRST_FILL fill it that far (into its second
// line), and the last goes to its (empty) second bucket, the less loaded.
// All of them then keep their backends when the ring turns elsewhere.
TEST_F(ConntrackIdentityTest, AFlowPastItsFullFirstBucketIsFoundInItsSecond) {
    add_vip(kVipV4, kVipPort, kProtoTcp, kVipA);
    constexpr std::size_t kFlows = XLB_CT_FIRST_FILL + 1;
    std::vector<Flow> flows;
    std::uint32_t target = 0;
    for (std::uint32_t port = 40000; port < 65536 && flows.size() < kFlows; ++port) {
        const Flow f{kClientV4, kVipV4, static_cast<std::uint16_t>(port), kVipPort, kProtoTcp};
        std::uint32_t first = 0, second = 0;
        buckets_of(f, &first, &second);
        if (first == second) continue;  // one bucket: nowhere to overflow to
        if (flows.empty()) target = first;
        if (first == target) flows.push_back(f);
    }
    ASSERT_EQ(flows.size(), kFlows) << "test bug: not enough flows in one bucket";
    std::vector<std::uint32_t> backends;
    for (std::size_t i = 0; i < kFlows; ++i)
        backends.push_back(10 + static_cast<std::uint32_t>(i % 3));
    expect_kept_apart(flows, std::vector<std::uint32_t>(kFlows, kVipA), backends, 13);

    TableView view(lb().conntrack());
    ASSERT_TRUE(view.ok());
    std::uint32_t first = 0, second = 0;
    for (std::size_t i = 0; i + 1 < kFlows; ++i)
        EXPECT_GE(view.head_of(target, flow_key(flows[i]), kVipA), 0) << "flow " << i;
    buckets_of(flows.back(), &first, &second);
    EXPECT_LT(view.head_of(first, flow_key(flows.back()), kVipA), 0);
    EXPECT_GE(view.head_of(second, flow_key(flows.back()), kVipA), 0) << "not in its second bucket";
    EXPECT_TRUE(view.bucket(first).slot[0].meta & XLB_CT_OVERFLOW);
    // Slots 4-7 in use are flagged (XLB_CT_LINE1), or the lookup skips them.
    EXPECT_EQ((view.bucket(first).slot[0].meta & XLB_CT_LINE1) != 0,
              XLB_CT_FIRST_FILL > XLB_CT_SLOTS / 2);
}

// Second chance with GUE: a moved flow's first packet carries the previous
// backend as a hint and records it; the entry takes an aligned pair of
// slots (its tail holds the hint) and every later packet, from the entry,
// carries the same hint. Catches a hint dropped by the store (the entry
// would take one slot) or not read back by the lookup (no hint later).
class ConntrackHintTest : public ConntrackIdentityTest {
protected:
    void SetUp() override {
        ConntrackIdentityTest::SetUp();
        xlb_config cfg = default_config();
        cfg.flags |= XLB_CFG_F_GUE | XLB_CFG_F_SECOND_CHANCE;
        cfg.gue_port = XLB_GUE_PORT_DEFAULT;
        write_config(cfg);
        add_vip(kVipV4, kVipPort, kProtoTcp, kVipA);
        previous_ = build({{10}, {11}, {12}});
        auto ok = bpf::publish_ring(lb().prev_rings().fd(), kVipA, previous_);
        ASSERT_TRUE(ok) << ok.error().message();
        current_ = publish_maglev(kVipA, {{10}, {11}, {12}, {13}});
    }

    std::vector<std::uint32_t> build(const std::vector<RingMember>& members) {
        std::vector<datapath::RingMember> input;
        for (const RingMember& m : members)
            input.push_back({m.backend_id, backend_addr_.at(m.backend_id), {}, m.weight});
        auto ring = datapath::build_ring(input);
        EXPECT_TRUE(ring) << ring.error().message();
        return ring ? ring->slots : std::vector<std::uint32_t>{};
    }

    // A flow whose backend the two rings agree on (moved = false) or not.
    Flow flow(bool moved, std::uint16_t from) {
        for (std::uint32_t port = from; port < 65536; ++port) {
            const Flow f{kClientV4, kVipV4, static_cast<std::uint16_t>(port), kVipPort, kProtoTcp};
            const xlb_flow_key key = flow_key(f);
            if ((expected_backend(current_, key) != expected_backend(previous_, key)) == moved)
                return f;
        }
        ADD_FAILURE() << "no flow found";
        return {};
    }

    void expect_sent(const Flow& f, const std::optional<std::uint32_t>& hint) {
        const xlb_flow_key key = flow_key(f);
        const Bytes input = make_frame(f);
        const Bytes expected =
            expected_encap(input, backend_addr_.at(expected_backend(current_, key)), key, 0,
                           hint ? std::optional(backend_addr_.at(*hint)) : std::nullopt);
        ASSERT_EQ(checksum_errors(expected), "") << "test bug: expected frame is invalid";
        expect_outcome(input, XDP_TX, XLB_OUT_TX, expected);
    }

    std::vector<std::uint32_t> previous_, current_;
};

TEST_F(ConntrackHintTest, AnIpv4EntryWithAHintTakesTwoSlotsAndKeepsIt) {
    const Flow moved = flow(true, 40000);
    const xlb_flow_key key = flow_key(moved);
    const std::uint32_t prev = expected_backend(previous_, key);
    for (int i = 0; i < 3; ++i) expect_sent(moved, prev);

    TableView view(lb().conntrack());
    ASSERT_TRUE(view.ok());
    const std::uint32_t first = first_bucket(moved);
    const int head = view.head_of(first, key, kVipA);
    ASSERT_GE(head, 0) << "not recorded in its first bucket";
    EXPECT_EQ(head % 2, 0) << "a pair's head is in an even slot";
    const xlb_ct_slot& h = view.bucket(first).slot[head];
    const xlb_ct_slot& t = view.bucket(first).slot[head | 1];
    EXPECT_EQ(xlb_ct_kind(h.meta), XLB_CT_KIND_V4);
    EXPECT_TRUE(h.meta & XLB_CT_HINT);
    EXPECT_EQ(xlb_ct_kind(t.meta), XLB_CT_KIND_TAIL);
    EXPECT_EQ(xlb_ct_tail_hint(t.meta), prev + 1);
    EXPECT_EQ(view.used_slots(buckets()), 2u);
    auto e = lb().conntrack().get(key);
    ASSERT_TRUE(e && *e);
    EXPECT_EQ((*e)->second_chance, prev + 1);

    // A flow the rings agree on has no hint: one slot.
    const Flow stayed = flow(false, 41000);
    expect_sent(stayed, std::nullopt);
    expect_sent(stayed, std::nullopt);
    EXPECT_EQ(view.used_slots(buckets()), 3u);
}

}  // namespace
}  // namespace xlb::test
