// SPDX-License-Identifier: Apache-2.0
// The connection table's buckets (abi.h, layout 5: struct xlb_ct_bucket): a
// flow is found in any slot of its first bucket, and in its second bucket
// while the first says that flows overflowed; an insert that finds both its
// buckets full replaces the entry seen longest ago of the two and nothing
// else; a slot a writer holds (XLB_CT_CLAIMED) is neither used nor
// overwritten; and inserts on two CPUs with deletes from userspace, all into
// the same buckets, never leave a key with another flow's value.
#include <arpa/inet.h>
#include <pthread.h>
#include <sched.h>
#include <sys/mman.h>

#include <atomic>
#include <cstring>
#include <set>
#include <thread>
#include <utility>

#include "lb_fixture.h"
#include "xlb/bpf/ct_clock.h"
#include "xlb/ct_set.h"

namespace xlb::test {
namespace {

constexpr std::uint32_t kVipId = 5;
// Last-seen times an insert tells apart: a slot keeps them in these units.
constexpr std::uint32_t kQuantum = 1U << XLB_CT_SEEN_SHIFT;

struct Buckets {
    std::uint32_t first = 0, second = 0;
};

class ConntrackSetsTest : public LbTest {
protected:
    void SetUp() override {
        LbTest::SetUp();
        for (std::uint32_t i = 0; i < 4; ++i) add_backend(20 + i, kBackendV4[i]);
        add_vip(kVipV4, kVipPort, kProtoTcp, kVipId);
        ring_ = publish_maglev(kVipId, {{20}, {21}, {22}, {23}});
    }

    static Flow flow(std::uint16_t sport) {
        return Flow{kClientV4, kVipV4, sport, kVipPort, kProtoTcp};
    }
    static Buckets buckets_of(const Flow& f) {
        const xlb_ct_header5 h = lb().conntrack().header();
        const xlb_flow_key key = flow_key(f);
        Buckets b;
        xlb_ct_buckets(&key, h.seed, h.buckets, &b.first, &b.second);
        return b;
    }
    // n flows (source ports from `from` on) whose first bucket is `bucket`
    // (the first one's when nullopt) and whose second bucket is neither
    // their first nor one of `avoid`.
    static std::vector<Flow> flows_in_bucket(std::size_t n, std::uint16_t from,
                                             std::optional<std::uint32_t> bucket,
                                             const std::set<std::uint32_t>& avoid = {}) {
        std::vector<Flow> out;
        for (std::uint32_t sport = from; sport < 65536 && out.size() < n; ++sport) {
            const Flow f = flow(static_cast<std::uint16_t>(sport));
            const Buckets b = buckets_of(f);
            if (b.second == b.first || avoid.contains(b.first) || avoid.contains(b.second))
                continue;
            if (!bucket) bucket = b.first;
            if (b.first == *bucket) out.push_back(f);
        }
        EXPECT_EQ(out.size(), n) << "not enough flows in one bucket: test bug";
        return out;
    }

    xlb_ct_value entry_for(std::uint32_t backend, std::uint32_t last_seen) const {
        return xlb_ct_value{.backend_id = backend,
                            .generation = 1,
                            .created = last_seen - 100,
                            .last_seen = last_seen,
                            .vip_id = kVipId};
    }
    std::optional<xlb_ct_value> entry(const Flow& f) {
        auto e = lb().conntrack().get(flow_key(f));
        EXPECT_TRUE(e) << e.error().message();
        return e ? *e : std::nullopt;
    }
    std::uint32_t other_than(std::uint32_t backend) const { return backend == 20 ? 21 : 20; }
    std::uint32_t pinned_for(const Flow& f) const {
        return other_than(expected_backend(ring_, flow_key(f)));
    }
    // Sends the flow's ACK: it must leave encapsulated to `backend`.
    void expect_sent_to(const Flow& f, std::uint32_t backend) {
        const Bytes frame = make_frame(f);
        expect_outcome(frame, XDP_TX, XLB_OUT_TX,
                       expected_encap(frame, backend_addr_[backend], flow_key(f)));
    }

    std::vector<std::uint32_t> ring_;
};

// The table's memory, as the program sees it: for the tests that put an
// entry in a slot of their choosing, or play a writer caught half way.
class TableMapping {
public:
    explicit TableMapping(const bpf::ConntrackTable& table)
        : length_(std::size_t{table.elements()} * sizeof(xlb_ct_line)), buckets_(table.buckets()) {
        void* p = mmap(nullptr, length_, PROT_READ | PROT_WRITE, MAP_SHARED, table.fd(), 0);
        EXPECT_NE(p, MAP_FAILED) << std::strerror(errno);
        base_ = p == MAP_FAILED ? nullptr : static_cast<xlb_ct_line*>(p);
    }
    ~TableMapping() {
        if (base_) munmap(base_, length_);
    }
    bool ok() const { return base_ != nullptr; }
    xlb_ct_slot& slot(std::uint32_t bucket, unsigned s) {
        return reinterpret_cast<xlb_ct_bucket*>(&base_[XLB_CT_BUCKET_ELEMENT(bucket)])->slot[s];
    }
    // Writes an IPv4 flow of VIP kVipId into one slot, with its record (so
    // that the agent reads back its times exactly), as a writer would: the
    // version moves on, the overflow bit stays. Nothing else runs meanwhile.
    void put(std::uint32_t bucket, unsigned s, const Flow& f, const xlb_ct_value& v) {
        const xlb_flow_key key = flow_key(f);
        xlb_ct_ident id{};
        xlb_ct_ident_of(&key, kVipId, &id);
        xlb_ct_slot& sl = slot(bucket, s);
        const __u64 meta = xlb_ct_head_meta(kVipId, v.backend_id, v.generation, XLB_CT_KIND_V4, 0,
                                            xlb_ct_seen16(v.last_seen)) |
                           ((sl.meta ^ XLB_CT_VERSION) & (XLB_CT_VERSION | XLB_CT_BUCKET_FLAGS));
        auto* rec =
            reinterpret_cast<xlb_ct_record*>(&base_[XLB_CT_RECORD_ELEMENT(buckets_, bucket, s)]) +
            s % 2;
        *rec = xlb_ct_record{.tag_key = id.head_key,
                             .tag_meta = meta & XLB_CT_TAG_MASK,
                             .created = v.created,
                             .last_seen = v.last_seen,
                             .seen16 = xlb_ct_seen16(v.last_seen),
                             .ended = 0};
        // As every writer: a bucket's second line is flagged before use.
        if (s >= XLB_CT_SLOTS / 2)
            __atomic_fetch_or(&slot(bucket, 0).meta, XLB_CT_LINE1, __ATOMIC_ACQ_REL);
        sl.key = id.head_key;
        __atomic_store_n(&sl.meta, meta, __ATOMIC_RELEASE);
    }
    // Whether the slot holds the flow's entry (whatever its value).
    bool holds(std::uint32_t bucket, unsigned s, const Flow& f) {
        const xlb_flow_key key = flow_key(f);
        xlb_ct_ident id{};
        xlb_ct_ident_of(&key, kVipId, &id);
        const xlb_ct_slot& sl = slot(bucket, s);
        return sl.key == id.head_key &&
               (sl.meta & (XLB_CT_IDENT_MASK & ~XLB_CT_CLAIMED)) == id.head_match;
    }

private:
    std::size_t length_;
    std::uint32_t buckets_;
    xlb_ct_line* base_ = nullptr;
};

TEST_F(ConntrackSetsTest, EverySlotOfABucketHoldsAFlowThatStaysOnItsBackend) {
    TableMapping mapping(lb().conntrack());
    ASSERT_TRUE(mapping.ok());
    // Eight flows in the eight slots of their first bucket, four more in
    // their second buckets (their first one full), all recorded elsewhere
    // than the ring would send them.
    const std::vector<Flow> flows = flows_in_bucket(12, 1024, std::nullopt);
    const std::uint32_t bucket = buckets_of(flows[0]).first;
    std::vector<std::uint32_t> pinned;
    for (std::size_t i = 0; i < flows.size(); ++i) {
        pinned.push_back(pinned_for(flows[i]));
        const xlb_ct_value v = entry_for(pinned.back(), ct_clock_);
        if (i < XLB_CT_SLOTS)
            mapping.put(bucket, static_cast<unsigned>(i), flows[i], v);
        else
            mapping.put(buckets_of(flows[i]).second, static_cast<unsigned>(i % XLB_CT_SLOTS),
                        flows[i], v);
    }
    __atomic_fetch_or(&mapping.slot(bucket, 0).meta, XLB_CT_OVERFLOW, __ATOMIC_ACQ_REL);
    for (std::size_t i = 0; i < flows.size(); ++i) expect_sent_to(flows[i], pinned[i]);
    EXPECT_EQ(vip_stats(kVipId).conntrack_hits, flows.size());

    // Without the overflow bit the second buckets are not read: a flow
    // there is new to the program, and the ring decides.
    __atomic_fetch_and(&mapping.slot(bucket, 0).meta, ~XLB_CT_OVERFLOW, __ATOMIC_ACQ_REL);
    lb().note_conntrack_erased();  // the flow cache's copies are not used
    lb().set_ct_clock(ct_clock_ + 1);
    const Flow& overflowed = flows[XLB_CT_SLOTS];
    expect_sent_to(overflowed, expected_backend(ring_, flow_key(overflowed)));
    EXPECT_EQ(vip_stats(kVipId).conntrack_hits, flows.size());
}

TEST_F(ConntrackSetsTest, AFullPairOfBucketsReplacesTheEntrySeenLongestAgoAndNothingElse) {
    TableMapping mapping(lb().conntrack());
    ASSERT_TRUE(mapping.ok());
    const Flow fresh = flows_in_bucket(1, 2048, std::nullopt)[0];
    const Buckets b = buckets_of(fresh);
    std::vector<Flow> fillers = flows_in_bucket(8, 1024, b.first, {b.second});
    for (const Flow& f : flows_in_bucket(8, 1024, b.second, {b.first})) fillers.push_back(f);
    // Idle 0-2 quanta, but slot 5 of the second bucket idle 3 (all under
    // XLB_CT_STALE16, so the full first bucket gives nothing up alone).
    const std::uint32_t now = ct_clock_;
    std::vector<xlb_ct_value> values;
    for (std::size_t i = 0; i < fillers.size(); ++i) {
        const std::uint32_t quanta = i == 13 ? 3 : i % 3;
        values.push_back(entry_for(pinned_for(fillers[i]), now - quanta * kQuantum));
        mapping.put(i < 8 ? b.first : b.second, static_cast<unsigned>(i % 8), fillers[i],
                    values.back());
    }
    for (std::size_t i = 0; i < fillers.size(); ++i) {
        auto e = entry(fillers[i]);
        ASSERT_TRUE(e) << "filler " << i;
        ASSERT_EQ(std::memcmp(&*e, &values[i], sizeof values[i]), 0) << "filler " << i;
    }

    const std::uint32_t ring_choice = expected_backend(ring_, flow_key(fresh));
    expect_sent_to(fresh, ring_choice);
    auto e = entry(fresh);
    ASSERT_TRUE(e) << "the new flow was not recorded";
    EXPECT_EQ(e->backend_id, ring_choice);
    EXPECT_TRUE(mapping.holds(b.second, 5, fresh)) << "not in the place of the oldest";
    EXPECT_TRUE(mapping.slot(b.first, 0).meta & XLB_CT_OVERFLOW)
        << "the first bucket must send lookups on to the second";
    EXPECT_FALSE(entry(fillers[13])) << "the entry seen longest ago was kept";
    for (std::size_t i = 0; i < fillers.size(); ++i) {
        if (i == 13) continue;
        auto kept = entry(fillers[i]);
        ASSERT_TRUE(kept) << "filler " << i << " was replaced";
        EXPECT_EQ(std::memcmp(&*kept, &values[i], sizeof values[i]), 0) << "filler " << i;
    }
    EXPECT_EQ(lb().conntrack().count(), 16u);
    // The survivors still go where they were pinned; the new flow too.
    expect_sent_to(fillers[0], values[0].backend_id);
    expect_sent_to(fillers[15], values[15].backend_id);
    expect_sent_to(fresh, ring_choice);
}

// The program's insert gives up an entry of a full first bucket idle a
// second or more without reading the second bucket; the agent's (a copy into
// a new table) reads both anyway and must not lose a flow that fits.
TEST_F(ConntrackSetsTest, AnAgentsInsertKeepsIdleEntriesWhileTheSecondBucketHasRoom) {
    TableMapping mapping(lb().conntrack());
    ASSERT_TRUE(mapping.ok());
    const Flow fresh = flows_in_bucket(1, 2048, std::nullopt)[0];
    const Buckets b = buckets_of(fresh);
    const std::vector<Flow> fillers = flows_in_bucket(8, 1024, b.first, {b.second});
    const std::uint32_t now = bpf::ct_clock_now();  // the agent's clock
    std::vector<xlb_ct_value> values;
    for (std::size_t i = 0; i < fillers.size(); ++i) {
        values.push_back(entry_for(pinned_for(fillers[i]), now - (10 + i) * kQuantum));
        mapping.put(b.first, static_cast<unsigned>(i), fillers[i], values.back());
    }
    auto put = lb().conntrack().put(flow_key(fresh), entry_for(20, now));
    ASSERT_TRUE(put) << put.error().message();
    EXPECT_EQ(*put, bpf::ConntrackTable::Put::kAdded);
    EXPECT_EQ(lb().conntrack().count(), 9u);
    for (std::size_t i = 0; i < fillers.size(); ++i) {
        auto kept = entry(fillers[i]);
        ASSERT_TRUE(kept) << "filler " << i << " was replaced";
        EXPECT_EQ(std::memcmp(&*kept, &values[i], sizeof values[i]), 0) << "filler " << i;
    }
    auto e = entry(fresh);
    ASSERT_TRUE(e);
    EXPECT_EQ(e->backend_id, 20u);
}

TEST_F(ConntrackSetsTest, ASlotAWriterHoldsIsNeitherUsedNorOverwritten) {
    TableMapping mapping(lb().conntrack());
    ASSERT_TRUE(mapping.ok());
    const Flow fresh = flows_in_bucket(1, 4096, std::nullopt)[0];
    const Buckets b = buckets_of(fresh);
    std::vector<Flow> fillers = flows_in_bucket(8, 1024, b.first, {b.second});
    for (const Flow& f : flows_in_bucket(8, 1024, b.second, {b.first})) fillers.push_back(f);
    // Filler 13 seen longest ago (3 quanta), filler 2 next (2 quanta), the
    // rest 0 or 1.
    const std::uint32_t now = ct_clock_;
    std::vector<xlb_ct_value> values;
    for (std::size_t i = 0; i < fillers.size(); ++i) {
        const std::uint32_t quanta = i == 13 ? 3 : i == 2 ? 2 : i % 2;
        values.push_back(entry_for(pinned_for(fillers[i]), now - quanta * kQuantum));
        mapping.put(i < 8 ? b.first : b.second, static_cast<unsigned>(i % 8), fillers[i],
                    values.back());
    }
    // A writer on another CPU has claimed the oldest entry's slot and not
    // finished.
    xlb_ct_slot& held = mapping.slot(b.second, 5);
    const __u64 meta = __atomic_load_n(&held.meta, __ATOMIC_ACQUIRE);
    const __u64 key = held.key;
    __atomic_store_n(&held.meta, meta | XLB_CT_CLAIMED, __ATOMIC_RELEASE);
    EXPECT_FALSE(entry(fillers[13])) << "a reader used a claimed slot";

    // The new flow's insert passes the claimed slot by: the oldest entry it
    // may replace is filler 2's.
    const std::uint32_t ring_choice = expected_backend(ring_, flow_key(fresh));
    expect_sent_to(fresh, ring_choice);
    EXPECT_TRUE(mapping.holds(b.first, 2, fresh));
    EXPECT_FALSE(entry(fillers[2]));
    // The held flow's own packet does not use the slot: the ring decides.
    expect_sent_to(fillers[13], expected_backend(ring_, flow_key(fillers[13])));
    EXPECT_EQ(__atomic_load_n(&held.meta, __ATOMIC_ACQUIRE), meta | XLB_CT_CLAIMED);
    EXPECT_EQ(held.key, key);
    for (std::size_t i = 0; i < fillers.size(); ++i) {
        if (i == 2 || i == 13) continue;
        auto kept = entry(fillers[i]);
        ASSERT_TRUE(kept) << "filler " << i;
        EXPECT_EQ(std::memcmp(&*kept, &values[i], sizeof values[i]), 0) << "filler " << i;
    }

    // The writer done (the entry unchanged), the flow is found there again:
    // its first bucket is read before the second, where its packet's
    // insert put a copy meanwhile.
    __atomic_store_n(&held.meta, meta, __ATOMIC_RELEASE);
    auto back = entry(fillers[13]);
    ASSERT_TRUE(back);
    EXPECT_EQ(std::memcmp(&*back, &values[13], sizeof values[13]), 0);
}

TEST_F(ConntrackSetsTest, InsertsOnTwoCpusWithDeletesLeaveOnlyWholeEntries) {
    const int cpus = static_cast<int>(std::thread::hardware_concurrency());
    if (cpus < 2) GTEST_SKIP() << "needs two CPUs";
    // Eight flows for each of two first buckets: the packets on both CPUs
    // claim slots of the same buckets (and insert over each other's
    // deleted entries) while userspace deletes.
    std::vector<Flow> flows = flows_in_bucket(8, 1024, std::nullopt);
    const std::vector<Flow> more =
        flows_in_bucket(8, 1024, std::nullopt, {buckets_of(flows[0]).first});
    flows.insert(flows.end(), more.begin(), more.end());
    std::vector<Bytes> frames;
    for (const Flow& f : flows) frames.push_back(make_frame(f));
    // The clock stands still at the stamp of a delete: the flow cache keeps
    // no copy, and every packet goes to the table.
    lb().note_conntrack_erased();

    // An entry is whole when its value is the one its own key's packet
    // wrote. The program writes no record: both times are the slot's
    // (in its units, read on the agent's clock).
    auto whole = [&](const xlb_flow_key& key, const xlb_ct_value& v) {
        return v.backend_id == expected_backend(ring_, key) && v.generation == 1 &&
               v.vip_id == kVipId && v.vip_epoch == 0 && v.hash == 0 && v.created == v.last_seen &&
               xlb_ct_seen16(v.last_seen) == xlb_ct_seen16(ct_clock_) && v.second_chance == 0;
    };
    std::atomic<bool> stop{false};
    std::atomic<std::uint64_t> runs{0};
    std::atomic<int> errors{0};
    auto hammer = [&](int cpu) {
        cpu_set_t one;
        CPU_ZERO(&one);
        CPU_SET(cpu, &one);
        if (pthread_setaffinity_np(pthread_self(), sizeof one, &one) != 0) errors.fetch_add(1);
        std::size_t i = static_cast<std::size_t>(cpu) * 5;
        while (!stop.load(std::memory_order_relaxed)) {
            auto r = bpf::test_run_xdp(lb().prog_fd(), frames[i++ % frames.size()]);
            if (!r || r->action != XDP_TX) errors.fetch_add(1);
            runs.fetch_add(1, std::memory_order_relaxed);
        }
    };
    std::thread a(hammer, 0), b(hammer, 1);
    std::uint64_t reads = 0, found = 0, deleted = 0, torn = 0;
    // At least 400 ms, and until enough happened to judge: on a busy machine
    // the two CPUs' threads may get little time (at most 10 s).
    const auto start = std::chrono::steady_clock::now();
    auto enough = [&] {
        const auto spent = std::chrono::steady_clock::now() - start;
        if (spent > std::chrono::seconds(10)) return true;
        return spent > std::chrono::milliseconds(400) && runs.load() > 10'000u && found > 100u &&
               deleted > 100u;
    };
    for (std::size_t i = 0; !enough(); ++i) {
        const xlb_flow_key key = flow_key(flows[i % flows.size()]);
        auto e = lb().conntrack().get(key);
        ++reads;
        if (e && *e) {
            ++found;
            torn += whole(key, **e) ? 0 : 1;
        }
        if (i % 3 == 0) {
            auto gone = lb().conntrack().erase(key);
            deleted += gone && *gone ? 1 : 0;
        }
    }
    // The two CPUs go on alone for a while: the deletes must not have the
    // last word, or nothing may be left to check (a starved machine).
    const std::uint64_t runs_at_last_delete = runs.load();
    const auto grace = std::chrono::steady_clock::now() + std::chrono::seconds(5);
    while (runs.load() < runs_at_last_delete + 1000 && std::chrono::steady_clock::now() < grace)
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
    stop = true;
    a.join();
    b.join();
    EXPECT_EQ(errors.load(), 0);
    EXPECT_EQ(torn, 0u) << "of " << found << " entries read while written";
    EXPECT_GT(runs.load(), 10'000u);
    EXPECT_GT(found, 100u);
    EXPECT_GT(deleted, 100u);

    // What is left: only these flows, each whole, each once.
    std::set<std::uint16_t> seen;
    std::uint64_t left = 0;
    lb().conntrack().for_each([&](const xlb_flow_key& key, const xlb_ct_value& v) {
        ++left;
        EXPECT_TRUE(whole(key, v)) << "entry of source port " << ntohs(key.sport);
        EXPECT_TRUE(seen.insert(ntohs(key.sport)).second) << "twice: " << ntohs(key.sport);
    });
    EXPECT_GT(left, 0u);
    EXPECT_LE(left, flows.size());
    std::printf("runs %llu, reads %llu (%llu found), deletes %llu, left %llu\n",
                static_cast<unsigned long long>(runs.load()),
                static_cast<unsigned long long>(reads), static_cast<unsigned long long>(found),
                static_cast<unsigned long long>(deleted), static_cast<unsigned long long>(left));
}

}  // namespace
}  // namespace xlb::test
