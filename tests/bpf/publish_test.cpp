// SPDX-License-Identifier: Apache-2.0
// Atomic publish: while packets run through the program, rings are replaced
// again and again. Every packet must reach a backend that the old or the new
// ring assigns to its flow; none may find a missing or half-written ring.
#include <arpa/inet.h>

#include <atomic>
#include <thread>

#include "lb_fixture.h"
#include "xlb/bpf/ring.h"
#include "xlb/control/data_plane.h"
#include "xlb/kernel/bpf_data_plane.h"

namespace xlb::test {
namespace {

TEST_F(LbTest, PublishingWhileForwardingNeverLosesOrMixesATable) {
    constexpr std::uint32_t kVip = 1;
    constexpr int kPublishes = 200;
    constexpr int kFlows = 512;
    for (std::uint32_t i = 0; i < 4; ++i) add_backend(10 + i, kBackendV4[i]);
    // Without the connection table every packet consults the ring.
    add_vip(kVipV4, kVipPort, kProtoTcp, kVip, XLB_VIP_F_NO_CONNTRACK);
    const auto ring_a = publish_maglev(kVip, {{10}, {11}});
    const auto ring_b = publish_maglev(kVip, {{12}, {13}});
    ASSERT_FALSE(ring_a.empty());
    ASSERT_FALSE(ring_b.empty());

    std::vector<Bytes> frames;
    std::vector<std::pair<net::IpAddress, net::IpAddress>> allowed;
    for (int f = 0; f < kFlows; ++f) {
        Flow flow{kClientV4, kVipV4, static_cast<std::uint16_t>(20000 + f), kVipPort, kProtoTcp};
        frames.push_back(make_frame(flow));
        const xlb_flow_key key = flow_key(flow);
        allowed.emplace_back(backend_addr_[expected_backend(ring_a, key)],
                             backend_addr_[expected_backend(ring_b, key)]);
    }

    std::atomic<bool> done{false};
    std::atomic<long> packets{0}, not_forwarded{0}, wrong_backend{0};
    std::thread forwarder([&] {
        int f = 0;
        while (!done.load(std::memory_order_relaxed)) {
            auto out = bpf::test_run_xdp(lb().prog_fd(), frames[f]);
            packets.fetch_add(1, std::memory_order_relaxed);
            if (!out || out->action != XDP_TX) {
                not_forwarded.fetch_add(1, std::memory_order_relaxed);
            } else {
                net::IpAddress dst = net::IpAddress::v4(out->frame[30], out->frame[31],
                                                        out->frame[32], out->frame[33]);
                if (dst != allowed[f].first && dst != allowed[f].second)
                    wrong_backend.fetch_add(1, std::memory_order_relaxed);
            }
            f = (f + 1) % kFlows;
        }
    });
    for (int p = 0; p < kPublishes; ++p) {
        auto ok = bpf::publish_ring(lb().rings().fd(), kVip, p % 2 ? ring_a : ring_b);
        ASSERT_TRUE(ok) << ok.error().message();
    }
    done = true;
    forwarder.join();

    std::printf("  %ld packets during %d publishes\n", packets.load(), kPublishes);
    EXPECT_GT(packets.load(), kPublishes) << "the forwarder must overlap the publishes";
    EXPECT_EQ(not_forwarded.load(), 0);
    EXPECT_EQ(wrong_backend.load(), 0);
    const Outcomes counts = outcomes();
    EXPECT_EQ(counts[XLB_OUT_DROP_NO_TABLE], 0u);
    EXPECT_EQ(counts[XLB_OUT_DROP_NO_BACKEND], 0u);
}

TEST_F(LbTest, BatchedPublishMakesSeveralRingsLiveAtOnce) {
    for (std::uint32_t i = 0; i < 4; ++i) add_backend(10 + i, kBackendV4[i]);
    std::vector<bpf::PreparedRing> prepared;
    for (std::uint32_t vip = 0; vip < 3; ++vip) {
        std::vector<std::uint32_t> ring(251, 10 + vip);
        auto p = bpf::prepare_ring(vip, ring);
        ASSERT_TRUE(p) << p.error().message();
        prepared.push_back(std::move(*p));
    }
    auto ok = bpf::publish_rings(lb().rings().fd(), prepared);
    ASSERT_TRUE(ok) << ok.error().message();
    for (std::uint32_t vip = 0; vip < 3; ++vip) {
        auto ring = bpf::read_ring(lb().rings().fd(), vip);
        ASSERT_TRUE(ring) << ring.error().message();
        EXPECT_EQ(*ring, std::vector<std::uint32_t>(251, 10 + vip));
    }
}

TEST_F(LbTest, PublishedRingReadsBackExactly) {
    std::vector<std::uint32_t> ring(65537);
    for (std::size_t i = 0; i < ring.size(); ++i)
        ring[i] = static_cast<std::uint32_t>(i * 7 % 4096);
    publish_ring(2, ring);
    auto back = bpf::read_ring(lb().rings().fd(), 2);
    ASSERT_TRUE(back) << back.error().message();
    EXPECT_EQ(*back, ring);
    publish_ring(2, {});
    back = bpf::read_ring(lb().rings().fd(), 2);
    ASSERT_TRUE(back);
    EXPECT_TRUE(back->empty());
    ASSERT_TRUE(bpf::unpublish_ring(lb().rings().fd(), 2));
    back = bpf::read_ring(lb().rings().fd(), 2);
    ASSERT_FALSE(back);
    EXPECT_EQ(back.error().code, ENOENT);
}

TEST_F(LbTest, BlankRingMadeAheadIsFilledAndPublishedLater) {
    std::vector<std::uint32_t> ring(1009);
    for (std::size_t i = 0; i < ring.size(); ++i) ring[i] = static_cast<std::uint32_t>(i % 13);
    auto blank = bpf::BlankRing::create(1009);
    ASSERT_TRUE(blank) << blank.error().message();
    EXPECT_EQ(blank->ring_size(), 1009u);
    auto prepared = std::move(*blank).fill(4, ring);
    ASSERT_TRUE(prepared) << prepared.error().message();
    ASSERT_TRUE(bpf::publish_rings(lb().rings().fd(), std::span(&*prepared, 1)));
    auto back = bpf::read_ring(lb().rings().fd(), 4);
    ASSERT_TRUE(back) << back.error().message();
    EXPECT_EQ(*back, ring);
}

TEST_F(LbTest, BlankRingRefusesAWrongSizeAndIsFilledOnce) {
    auto blank = bpf::BlankRing::create(11);
    ASSERT_TRUE(blank) << blank.error().message();
    auto wrong = std::move(*blank).fill(1, std::vector<std::uint32_t>(7, 3));
    ASSERT_FALSE(wrong);
    EXPECT_EQ(wrong.error().code, EINVAL);
    EXPECT_NE(wrong.error().message().find("11 slots"), std::string::npos)
        << wrong.error().message();
    // the refusal left the blank as it was
    auto right = std::move(*blank).fill(1, std::vector<std::uint32_t>(11, 3));
    ASSERT_TRUE(right) << right.error().message();
    auto again = std::move(*blank).fill(1, std::vector<std::uint32_t>(11, 3));
    ASSERT_FALSE(again);
    EXPECT_EQ(again.error().code, EBADF);
    EXPECT_FALSE(bpf::read_ring(lb().rings().fd(), 1)) << "nothing was published";
}

// The data plane fills spare maps made after its previous publish; rings of
// sizes coming and going must each read back exactly, whichever map they got.
TEST_F(LbTest, DataPlanePublishesThroughSpareRingsOfEverySize) {
    control::BpfDataPlane data_plane(lb());
    const std::uint32_t sizes[] = {251, 1009, 251, 251, 1009, 13, 251};
    for (std::size_t round = 0; round < std::size(sizes); ++round) {
        std::vector<control::RingUpdate> updates;
        for (std::uint32_t vip = 0; vip < 2; ++vip) {
            std::vector<std::uint32_t> ring(sizes[round] + vip * 2);
            for (std::size_t i = 0; i < ring.size(); ++i)
                ring[i] = static_cast<std::uint32_t>((i + round * 31 + vip) % 97);
            updates.push_back({vip, std::move(ring)});
        }
        auto timing = data_plane.publish(updates);
        ASSERT_TRUE(timing) << timing.error().message();
        for (const control::RingUpdate& u : updates) {
            auto back = bpf::read_ring(lb().rings().fd(), u.vip_id);
            ASSERT_TRUE(back) << back.error().message();
            EXPECT_EQ(*back, u.backend_ids) << "round " << round << ", VIP id " << u.vip_id;
        }
    }
}

}  // namespace
}  // namespace xlb::test
