// SPDX-License-Identifier: Apache-2.0
#include "lb_fixture.h"

#include <arpa/inet.h>
#include <linux/bpf.h>

#include <algorithm>
#include <cstring>

#include "xlb/bpf/ct_clock.h"
#include "xlb/datapath/setup.h"

namespace xlb::test {

std::optional<bpf::LbProgram> LbTest::program_;

void LbTest::SetUpTestSuite() {
    if (program_) return;
    auto loaded = bpf::LbProgram::load(kSizes);
    ASSERT_TRUE(loaded) << loaded.error().message();
    program_.emplace(std::move(*loaded));
}

void LbTest::TearDownTestSuite() {}

void LbTest::SetUp() {
    ASSERT_TRUE(program_) << "the balancer program did not load";
    auto& p = lb();
    ASSERT_TRUE(p.clear_vips());
    ASSERT_TRUE(p.conntrack().clear());
    // A running clock, later than any earlier test's, and the deletes
    // stamped on it: no copy the flow cache kept from an earlier test is
    // used, and this test's copies are (their time is after the stamp).
    static std::uint32_t clock = 0;
    clock = std::max(bpf::ct_clock_now(), clock + 2 * XLB_CT_REFRESH_UNITS);
    p.set_ct_clock(clock);
    p.note_conntrack_erased();
    ct_clock_ = clock + 1;
    p.set_ct_clock(ct_clock_);
    ASSERT_TRUE(p.ct_cpu().zero(0));
    for (std::uint32_t v = 0; v < kSizes.max_vips; ++v) {
        ASSERT_TRUE(bpf::unpublish_ring(p.rings().fd(), v));
        ASSERT_TRUE(bpf::unpublish_ring(p.prev_rings().fd(), v));
        ASSERT_TRUE(p.vip_stats().zero(v));
        ASSERT_TRUE(p.vip_hints().zero(v));
        ASSERT_TRUE(p.vip_drops().zero(v));
        ASSERT_TRUE(p.vip_cookies().zero(v));
        ASSERT_TRUE(p.vip_quic().zero(v));
        for (std::uint32_t c = 0; c < XLB_QUIC_CONFIG_SLOTS; ++c) {
            ASSERT_TRUE(p.quic_configs().put(v * XLB_QUIC_CONFIG_SLOTS + c, xlb_quic_config{}));
            ASSERT_TRUE(p.clear_quic_key(v * XLB_QUIC_CONFIG_SLOTS + c));
        }
    }
    ASSERT_TRUE(p.source_ranges().clear());
    ASSERT_TRUE(p.quic_servers().clear());
    p.set_syn_flood(XLB_SYN_FLOOD_CALM);
    for (std::uint32_t b = 0; b < kSizes.max_backends; ++b) {
        ASSERT_TRUE(p.backends().put(b, xlb_backend{}));
        ASSERT_TRUE(p.backend_stats().zero(b));
    }
    for (std::uint32_t o = 0; o < XLB_OUT__MAX; ++o) ASSERT_TRUE(p.outcomes().zero(o));
    backend_addr_.assign(kSizes.max_backends, net::IpAddress{});
    write_config(default_config());
}

xlb_config LbTest::default_config() { return bench_config(); }

void LbTest::write_config(const xlb_config& cfg) {
    config_ = cfg;
    auto ok = lb().config().put(0, cfg);
    ASSERT_TRUE(ok) << ok.error().message();
}

void LbTest::add_vip(const net::IpAddress& addr, std::uint16_t port, std::uint8_t proto,
                     std::uint32_t vip_id, std::uint32_t flags) {
    auto ok = lb().put_vip(datapath::vip_key(addr, port, proto), xlb_vip_value{vip_id, flags});
    ASSERT_TRUE(ok) << ok.error().message();
}

void LbTest::add_backend(std::uint32_t id, const net::IpAddress& addr, std::uint32_t generation) {
    auto ok = lb().backends().put(id, datapath::backend_entry(addr, generation));
    ASSERT_TRUE(ok) << ok.error().message();
    backend_addr_.at(id) = addr;
}

std::vector<std::uint32_t> LbTest::publish_maglev(std::uint32_t vip_id,
                                                  const std::vector<RingMember>& members) {
    std::vector<datapath::RingMember> input;
    for (const RingMember& m : members)
        input.push_back({m.backend_id, backend_addr_.at(m.backend_id), {}, m.weight});
    auto ring = datapath::build_ring(input);
    EXPECT_TRUE(ring) << ring.error().message();
    if (!ring) return {};
    publish_ring(vip_id, ring->slots);
    return ring->slots;
}

void LbTest::publish_ring(std::uint32_t vip_id, const std::vector<std::uint32_t>& ring) {
    auto ok = bpf::publish_ring(lb().rings().fd(), vip_id, ring);
    ASSERT_TRUE(ok) << ok.error().message();
}

bpf::TestRunResult LbTest::run(const Bytes& frame) {
    auto result = bpf::test_run_xdp(lb().prog_fd(), frame);
    EXPECT_TRUE(result) << result.error().message();
    return result ? *result : bpf::TestRunResult{};
}

Outcomes LbTest::outcomes() {
    Outcomes out{};
    for (std::uint32_t o = 0; o < XLB_OUT__MAX; ++o) {
        auto per_cpu = lb().outcomes().get_per_cpu(o);
        EXPECT_TRUE(per_cpu);
        if (per_cpu) out[o] = datapath::sum_per_cpu(*per_cpu);
    }
    return out;
}

xlb_vip_stats LbTest::vip_stats(std::uint32_t vip_id) {
    auto per_cpu = lb().vip_stats().get_per_cpu(vip_id);
    EXPECT_TRUE(per_cpu);
    return per_cpu ? datapath::sum_per_cpu(*per_cpu) : xlb_vip_stats{};
}

xlb_backend_stats LbTest::backend_stats(std::uint32_t backend_id) {
    auto per_cpu = lb().backend_stats().get_per_cpu(backend_id);
    EXPECT_TRUE(per_cpu);
    return per_cpu ? datapath::sum_per_cpu(*per_cpu) : xlb_backend_stats{};
}

std::uint32_t LbTest::expected_backend(const std::vector<std::uint32_t>& ring,
                                       const xlb_flow_key& key, std::uint32_t vip_flags) {
    return ring.at(datapath::ring_index(key, vip_flags, kHashSeed, ring.size()));
}

Bytes LbTest::expected_encap(const Bytes& input, const net::IpAddress& backend,
                             const xlb_flow_key& key, std::uint32_t vip_flags,
                             const std::optional<net::IpAddress>& hint,
                             const Bytes& gue_data) const {
    const std::uint32_t hash = xlb_vip_flow_hash(&key, vip_flags, config_.hash_seed);
    Bytes inner = ip_packet_of(input);
    Encapsulation enc;
    enc.outer_dst = backend;
    enc.eth_dst = kNextHopMac;
    std::copy(input.begin(), input.begin() + 6, enc.eth_src.begin());
    if (backend.is_v4()) {
        enc.outer_src = net::IpAddress::from_words(&config_.src_v4, 4);
        std::uint32_t host_bits = 32 - std::min<std::uint32_t>(config_.src_v4_prefix_len, 32);
        if (host_bits > 0) {
            std::uint32_t mask = host_bits == 32 ? 0xffffffffU : (1U << host_bits) - 1;
            std::uint32_t base = ntohl(config_.src_v4);
            std::uint32_t derived = htonl((base & ~mask) | (hash & mask));
            std::memcpy(enc.outer_src.bytes.data(), &derived, 4);
        }
        enc.df = (inner[6] & 0x40) != 0;
        enc.tos = inner[1];
    } else {
        enc.outer_src = net::IpAddress::from_words(config_.src_v6, 6);
        std::uint32_t host_bits = std::min<std::uint32_t>(
            128 - std::min<std::uint32_t>(config_.src_v6_prefix_len, 128), 32);
        if (host_bits > 0) {
            std::uint32_t mask = host_bits == 32 ? 0xffffffffU : (1U << host_bits) - 1;
            std::uint32_t base = ntohl(config_.src_v6[3]);
            std::uint32_t derived = htonl((base & ~mask) | (hash & mask));
            std::memcpy(enc.outer_src.bytes.data() + 12, &derived, 4);
        }
        enc.flow_label = hash & 0xfffff;
        enc.tos = (inner[0] >> 4) == 4
                      ? inner[1]
                      : static_cast<std::uint8_t>((inner[0] << 4) | (inner[1] >> 4));
    }
    if (config_.flags & XLB_CFG_F_GUE) {
        enc.gue_port = config_.gue_port;
        enc.gue_sport = static_cast<std::uint16_t>(XLB_GUE_SPORT(hash));
        if (hint) enc.gue_extension = second_chance_hint(*hint);
        if (!gue_data.empty()) enc.gue_extension = gue_data;
    }
    // Ethernet padding after the IP packet is not carried: the outer packet
    // is the inner one plus the outer header.
    return encapsulate(inner, enc);
}

void LbTest::expect_outcome(const Bytes& input, std::uint32_t action, xlb_outcome outcome,
                            const std::optional<Bytes>& expected_output) {
    Outcomes before = outcomes();
    bpf::TestRunResult result = run(input);
    Outcomes after = outcomes();
    EXPECT_EQ(result.action, action) << describe(input);
    for (std::uint32_t o = 0; o < XLB_OUT__MAX; ++o)
        EXPECT_EQ(after[o] - before[o], o == static_cast<std::uint32_t>(outcome) ? 1u : 0u)
            << "outcome counter " << o << " for frame of " << input.size() << " bytes";
    if (expected_output) expect_same_frame(result.frame, *expected_output);
}

std::optional<bpf::DecapProgram> decap_serving(std::initializer_list<net::IpAddress> addresses) {
    auto decap = bpf::DecapProgram::load();
    if (!decap) {
        ADD_FAILURE() << decap.error().message();
        return std::nullopt;
    }
    for (const net::IpAddress& a : addresses) {
        xlb_decap_addr key{};
        a.to_words(key.addr);
        key.family = a.family;
        if (auto put = decap->local_addresses().put(key, 1); !put) {
            ADD_FAILURE() << "add " << a.to_string() << ": " << put.error().message();
            return std::nullopt;
        }
    }
    return std::move(*decap);
}

void expect_decap_run(const bpf::DecapProgram& decap, const Bytes& input, std::uint32_t action,
                      xlb_decap_outcome outcome, const Bytes& expected, const DecapRun& run) {
    auto counts = [&] {
        std::array<std::uint64_t, XLB_DECAP_OUT__MAX> out{};
        for (std::uint32_t o = 0; o < XLB_DECAP_OUT__MAX; ++o) {
            auto per_cpu = decap.outcomes().get_per_cpu(o);
            EXPECT_TRUE(per_cpu);
            if (per_cpu) out[o] = bpf::sum_per_cpu(*per_cpu, [](std::uint64_t v) { return v; });
        }
        return out;
    };
    const auto before = counts();
    auto out = run ? run(decap.prog_fd(), input) : bpf::test_run_xdp(decap.prog_fd(), input);
    ASSERT_TRUE(out) << out.error().message();
    EXPECT_EQ(out->action, action);
    expect_same_frame(out->frame, expected);
    const auto after = counts();
    for (std::uint32_t o = 0; o < XLB_DECAP_OUT__MAX; ++o)
        EXPECT_EQ(after[o] - before[o], o == static_cast<std::uint32_t>(outcome) ? 1u : 0u)
            << "decap outcome " << o;
}

Encapsulation from_lb(const net::IpAddress& to) {
    Encapsulation enc;
    enc.outer_src = to.is_v4() ? kEncapSrcV4 : kEncapSrcV6;
    enc.outer_dst = to;
    enc.eth_src = kNextHopMac;
    enc.eth_dst = kLbMac;
    return enc;
}

void expect_same_frame(const Bytes& actual, const Bytes& expected) {
    EXPECT_EQ(describe(actual), describe(expected));
    EXPECT_EQ(actual, expected) << "frames differ byte for byte";
    // Frames the program forwards must keep valid checksums; a malformed input
    // passed through stays exactly as malformed as it came.
    EXPECT_EQ(checksum_errors(actual), checksum_errors(expected));
}

}  // namespace xlb::test
