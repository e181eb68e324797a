// SPDX-License-Identifier: Apache-2.0
// An agent upgraded over a full-sized layout-4 connection table (abi.h,
// struct xlb_ct_set) keeps every flow on its backend: 100,000 flows, IPv4
// and IPv6, pinned as an older agent pinned them, each recorded on a backend
// the ring would not choose. After the load migrates the table, one ACK per
// flow through the new program must leave for the recorded backend, so a
// single entry lost on the way fails the test.
//
// Pins go to a directory of their own under /sys/fs/bpf (xlbt-<pid>-..., as
// the lifecycle tests name theirs), always removed; no network namespace or
// interface is used. Needs root.
#include <arpa/inet.h>
#include <bpf/bpf.h>
#include <linux/bpf.h>
#include <sys/mman.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "lb_fixture.h"
#include "xlb/bpf/ct_clock.h"
#include "xlb/bpf/fd.h"
#include "xlb/datapath/setup.h"

namespace xlb::test {
namespace {

namespace fs = std::filesystem;

constexpr std::uint32_t kFlows = 100'000;
constexpr std::uint32_t kVipIdV4 = 1, kVipIdV6 = 2;
constexpr std::uint32_t kGeneration = 3;
// Layout 4: four ways a set. 65,536 sets hold 262,144 entries, so that
// 100,000 flows placed at random leave few sets full (a flow whose set is
// full is not used, as an older agent would not have kept it either).
constexpr std::uint32_t kSets = 65'536;
constexpr std::uint32_t kSeed = 0x0c7a5eed;
// The new table: 524,288 slots. The flows take 120,000 (an IPv6 flow takes
// two), under a quarter, and each flow has two buckets to choose from: none
// is left out. (At 262,144 slots, nearly half full, a run in a few dropped
// one or two flows whose buckets were both full, an IPv6 flow needing an
// aligned pair: the seed is drawn at every load.) The
// flows were last seen up to a minute ago: the copy must not give up an
// idle entry of a full first bucket while the second bucket has room, as
// the program's inserts do to spare a memory read (a few dozen flows here).
constexpr bpf::LbMapSizes kMigrateSizes{16, 64, 524'288};

// Ring members and the backends flows are recorded on, which no ring names.
constexpr std::uint32_t kRingV4 = 1, kRingV6 = 5;  // four each
constexpr std::uint32_t kPinnedV4 = 10, kPinnedV6 = 20;
constexpr std::uint32_t kPinnedCount = 8;

struct MigratedFlow {
    Flow flow;
    std::uint32_t backend;
};

class ConntrackMigrateTest : public LbTest {
protected:
    void SetUp() override {
        LbTest::SetUp();  // config_, as the program below gets it
        root_ = "/sys/fs/bpf/xlbt-" + std::to_string(::getpid()) + "-migrate";
        dir_ = root_ + "/xlb/xv0";
        for (std::uint32_t i = 0; i < 4; ++i) {
            addr_[kRingV4 + i] = kBackendV4[i];
            addr_[kRingV6 + i] = kBackendV6[i];
        }
        for (std::uint32_t i = 0; i < kPinnedCount; ++i) {
            addr_[kPinnedV4 + i] =
                net::IpAddress::v4(203, 0, 113, static_cast<std::uint8_t>(100 + i));
            addr_[kPinnedV6 + i] = ip(("2001:db8:b::1" + std::to_string(i) + "0").c_str());
        }
    }
    void TearDown() override {
        std::error_code ec;
        fs::remove_all(root_, ec);
    }

    // What an older agent leaves pinned besides its table: VIPs, backends,
    // rings and configuration (their layouts have not changed).
    void pin_balancer_state() {
        auto lb = bpf::LbProgram::load(kMigrateSizes, {.pin_dir = dir_});
        ASSERT_TRUE(lb) << lb.error().message();
        ASSERT_TRUE(lb->config().put(0, config_));
        ASSERT_TRUE(lb->put_vip(datapath::vip_key(kVipV4, kVipPort, kProtoTcp), {kVipIdV4, 0}));
        ASSERT_TRUE(lb->put_vip(datapath::vip_key(kVipV6, kVipPort, kProtoTcp), {kVipIdV6, 0}));
        for (const auto& [id, addr] : addr_)
            ASSERT_TRUE(lb->backends().put(id, datapath::backend_entry(addr, kGeneration)));
        for (auto [vip, first] : {std::pair{kVipIdV4, kRingV4}, std::pair{kVipIdV6, kRingV6}}) {
            std::vector<datapath::RingMember> members;
            for (std::uint32_t i = 0; i < 4; ++i)
                members.push_back({first + i, addr_.at(first + i), {}, 1});
            auto ring = datapath::build_ring(members);
            ASSERT_TRUE(ring) << ring.error().message();
            ASSERT_TRUE(bpf::publish_ring(lb->rings().fd(), vip, ring->slots));
            rings_[vip] = ring->slots;
        }
        // The older agent had no layout-5 table: this load's goes again.
        ASSERT_EQ(::unlink((dir_ + "/" XLB_MAP_CONNTRACK).c_str()), 0) << std::strerror(errno);
    }

    // Flow n: one in five IPv6, sources and ports spread.
    static Flow nth_flow(std::uint32_t n) {
        const auto sport = static_cast<std::uint16_t>(1024 + n % 60'000);
        if (n % 5 == 4) {
            const __be32 src[4] = {htonl(0x20010db8), htonl(0x000c0000), 0, htonl(n + 1)};
            return Flow{net::IpAddress::from_words(src, XLB_FAMILY_V6), kVipV6, sport, kVipPort,
                        kProtoTcp};
        }
        return Flow{
            net::IpAddress::v4(10, static_cast<std::uint8_t>(n >> 16),
                               static_cast<std::uint8_t>(n >> 8), static_cast<std::uint8_t>(n)),
            kVipV4, sport, kVipPort, kProtoTcp};
    }

    // The layout-4 table an older agent pinned, holding kFlows flows; the
    // flows, each with the backend its entry names.
    std::vector<MigratedFlow> pin_layout4_table(std::uint32_t now) {
        std::vector<MigratedFlow> out;
        LIBBPF_OPTS(bpf_map_create_opts, opts, .map_flags = BPF_F_MMAPABLE);
        bpf::UniqueFd fd(bpf_map_create(BPF_MAP_TYPE_ARRAY, XLB_MAP_CONNTRACK_V4, sizeof(__u32),
                                        sizeof(xlb_ct_set), 1 + kSets, &opts));
        EXPECT_TRUE(fd) << std::strerror(errno);
        if (!fd) return out;
        const std::size_t length = std::size_t{1 + kSets} * sizeof(xlb_ct_set);
        void* p = mmap(nullptr, length, PROT_READ | PROT_WRITE, MAP_SHARED, fd.get(), 0);
        EXPECT_NE(p, MAP_FAILED) << std::strerror(errno);
        if (p == MAP_FAILED) return out;
        auto* sets = static_cast<xlb_ct_set*>(p);
        for (std::uint32_t n = 0; out.size() < kFlows; ++n) {
            const Flow f = nth_flow(n);
            const xlb_flow_key key = flow_key(f);
            xlb_ct_set& set = sets[1 + ((std::uint64_t{xlb_flow_hash(&key, kSeed)} * kSets) >> 32)];
            int way = -1;
            for (int w = XLB_CT_WAYS - 1; w >= 0; --w)
                if (set.key[w].family == 0) way = w;
            if (way < 0) {
                ++full_sets_;
                continue;
            }
            const bool v6 = key.family == XLB_FAMILY_V6;
            const std::uint32_t backend = (v6 ? kPinnedV6 : kPinnedV4) + n % kPinnedCount;
            set.key[way] = key;
            set.value[way] = xlb_ct_value{.backend_id = backend,
                                          .generation = kGeneration,
                                          .created = now - 70'000,
                                          .last_seen = now - n % 1000 * 64,
                                          .vip_id = v6 ? kVipIdV6 : kVipIdV4,
                                          .vip_epoch = 40 + n % 7,
                                          .hash = xlb_vip_flow_hash(&key, 0, config_.hash_seed),
                                          .second_chance = 0};
            set.seq[way] = 2 * (1 + n % 3);
            out.push_back({f, backend});
        }
        // The header last, as the agent wrote it once its table was ready.
        auto* header = reinterpret_cast<xlb_ct_header*>(&sets[0]);
        header->seed = kSeed;
        header->sets = kSets;
        header->ways = XLB_CT_WAYS;
        std::atomic_ref<std::uint32_t>(header->magic)
            .store(XLB_CT_MAGIC, std::memory_order_release);
        munmap(p, length);
        EXPECT_EQ(bpf_obj_pin(fd.get(), (dir_ + "/" XLB_MAP_CONNTRACK_V4).c_str()), 0)
            << std::strerror(errno);
        return out;
    }

    std::string root_, dir_;
    std::map<std::uint32_t, net::IpAddress> addr_;
    std::map<std::uint32_t, std::vector<std::uint32_t>> rings_;
    std::uint64_t full_sets_ = 0;
};

TEST_F(ConntrackMigrateTest, EveryFlowOfALayoutFourTableStaysOnItsBackend) {
    pin_balancer_state();
    if (HasFatalFailure()) return;
    const std::uint32_t now = bpf::ct_clock_now();
    const std::vector<MigratedFlow> flows = pin_layout4_table(now);
    ASSERT_EQ(flows.size(), kFlows);
    // The ring would send (almost) no flow where its entry says: a lost
    // entry shows.
    std::size_t ring_agrees = 0;
    for (const MigratedFlow& m : flows) {
        const xlb_flow_key key = flow_key(m.flow);
        const auto& ring = rings_[key.family == XLB_FAMILY_V6 ? kVipIdV6 : kVipIdV4];
        ring_agrees += expected_backend(ring, key) == m.backend ? 1 : 0;
    }
    ASSERT_EQ(ring_agrees, 0u);

    auto loaded = bpf::LbProgram::load(kMigrateSizes, {.pin_dir = dir_});
    ASSERT_TRUE(loaded) << loaded.error().message();
    bpf::LbProgram& lb = *loaded;
    const bpf::ConntrackLoad& ct = lb.conntrack_load();
    EXPECT_EQ(ct.outcome, bpf::ConntrackLoad::Outcome::kMigrated);
    EXPECT_EQ(ct.old_layout, 4);
    EXPECT_EQ(ct.copied, kFlows);
    EXPECT_EQ(ct.dropped, 0u);
    EXPECT_EQ(ct.message,
              "upgraded the connection table from layout 4 (xlb_conntrack4): copied 100000 "
              "entries into a new table of 524288 entries; removed the old pin");
    EXPECT_FALSE(fs::exists(dir_ + "/" XLB_MAP_CONNTRACK_V4));
    EXPECT_TRUE(fs::exists(dir_ + "/" XLB_MAP_CONNTRACK));
    EXPECT_EQ(lb.conntrack().count(), kFlows);

    // One ACK per flow, on the agent's clock; the output exactly the
    // encapsulation to the recorded backend.
    lb.set_ct_clock(bpf::ct_clock_now());
    std::size_t wrong = 0;
    for (const MigratedFlow& m : flows) {
        const Bytes frame = make_frame(m.flow);
        auto out = bpf::test_run_xdp(lb.prog_fd(), frame);
        ASSERT_TRUE(out) << out.error().message();
        const Bytes expected = expected_encap(frame, addr_.at(m.backend), flow_key(m.flow));
        if (out->action == XDP_TX && out->frame == expected) continue;
        // The first few shown decoded; the rest only counted.
        if (++wrong <= 3) {
            EXPECT_EQ(out->action, XDP_TX) << describe(frame);
            expect_same_frame(out->frame, expected);
        }
    }
    EXPECT_EQ(wrong, 0u) << "of " << kFlows << " flows";

    // Every one of them from the table, none by the ring.
    std::uint64_t hits = 0;
    for (std::uint32_t vip : {kVipIdV4, kVipIdV6}) {
        auto per_cpu = lb.vip_stats().get_per_cpu(vip);
        ASSERT_TRUE(per_cpu);
        hits += datapath::sum_per_cpu(*per_cpu).conntrack_hits;
    }
    EXPECT_EQ(hits, kFlows);
    auto tx = lb.outcomes().get_per_cpu(XLB_OUT_TX);
    ASSERT_TRUE(tx);
    EXPECT_EQ(datapath::sum_per_cpu(*tx), kFlows);
    std::printf("flows %u, skipped for a full layout-4 set %llu\n", kFlows,
                static_cast<unsigned long long>(full_sets_));
}

}  // namespace
}  // namespace xlb::test
