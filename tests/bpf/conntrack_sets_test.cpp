// SPDX-License-Identifier: Apache-2.0
// The connection table's sets (abi.h, struct xlb_ct_set): a flow is found in
// any way of its set; an insert into a full set replaces the way seen
// longest ago and nothing else; a way a writer holds (odd seq) is neither
// used nor overwritten; and inserts on two CPUs with deletes from userspace,
// all into the same two sets, never leave a key with another flow's value.
#include <arpa/inet.h>
#include <pthread.h>
#include <sched.h>
#include <sys/mman.h>

#include <atomic>
#include <cstring>
#include <set>
#include <thread>

#include "lb_fixture.h"
#include "xlb/ct_set.h"

namespace xlb::test {
namespace {

constexpr std::uint32_t kVipId = 5;

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
    static std::uint32_t set_of(const Flow& f) {
        const xlb_ct_header h = lb().conntrack().header();
        const xlb_flow_key key = flow_key(f);
        return xlb_ct_set_index(&key, h.seed, h.sets);
    }
    // n flows that share one set (the first one's), none of them `avoid`'s.
    static std::vector<Flow> flows_in_one_set(std::size_t n, std::uint16_t from,
                                              std::uint32_t avoid_set = 0) {
        std::vector<Flow> out;
        std::uint32_t target = 0;
        for (std::uint32_t sport = from; sport < 65536 && out.size() < n; ++sport) {
            const Flow f = flow(static_cast<std::uint16_t>(sport));
            const std::uint32_t s = set_of(f);
            if (s == avoid_set) continue;
            if (out.empty()) target = s;
            if (s == target) out.push_back(f);
        }
        EXPECT_EQ(out.size(), n) << "not enough flows in one set: test bug";
        return out;
    }

    xlb_ct_value entry_for(std::uint32_t backend, std::uint32_t last_seen) const {
        return xlb_ct_value{.backend_id = backend,
                            .generation = 1,
                            .created = last_seen - 100,
                            .last_seen = last_seen};
    }
    std::optional<xlb_ct_value> entry(const Flow& f) {
        auto e = lb().conntrack().get(flow_key(f));
        EXPECT_TRUE(e) << e.error().message();
        return e ? *e : std::nullopt;
    }
    std::uint32_t other_than(std::uint32_t backend) const { return backend == 20 ? 21 : 20; }
    // Sends the flow's ACK: it must leave encapsulated to `backend`.
    void expect_sent_to(const Flow& f, std::uint32_t backend) {
        const Bytes frame = make_frame(f);
        expect_outcome(frame, XDP_TX, XLB_OUT_TX,
                       expected_encap(frame, backend_addr_[backend], flow_key(f)));
    }

    std::vector<std::uint32_t> ring_;
};

// The table's memory, as the program sees it (for the tests that play a
// writer caught half way).
class SetsMapping {
public:
    explicit SetsMapping(const bpf::ConntrackTable& table)
        : length_(std::size_t{table.elements()} * sizeof(xlb_ct_set)) {
        void* p = mmap(nullptr, length_, PROT_READ | PROT_WRITE, MAP_SHARED, table.fd(), 0);
        EXPECT_NE(p, MAP_FAILED) << std::strerror(errno);
        base_ = p == MAP_FAILED ? nullptr : static_cast<xlb_ct_set*>(p);
    }
    ~SetsMapping() {
        if (base_) munmap(base_, length_);
    }
    xlb_ct_set& set(std::uint32_t index) { return base_[index]; }
    bool ok() const { return base_ != nullptr; }

private:
    std::size_t length_;
    xlb_ct_set* base_ = nullptr;
};

TEST_F(ConntrackSetsTest, EveryWayOfASetHoldsAFlowThatStaysOnItsBackend) {
    const std::vector<Flow> flows = flows_in_one_set(4, 1024);
    for (const Flow& f : flows) expect_sent_to(f, expected_backend(ring_, flow_key(f)));
    // All four recorded, then the ring sends every flow elsewhere: each one
    // is still found, whatever its way.
    std::vector<std::uint32_t> recorded;
    for (const Flow& f : flows) {
        auto e = entry(f);
        ASSERT_TRUE(e);
        recorded.push_back(e->backend_id);
    }
    publish_ring(kVipId, std::vector<std::uint32_t>(ring_.size(), 23));
    for (std::size_t i = 0; i < flows.size(); ++i) expect_sent_to(flows[i], recorded[i]);
    EXPECT_EQ(vip_stats(kVipId).conntrack_hits, 4u);
}

TEST_F(ConntrackSetsTest, AFullSetReplacesTheWaySeenLongestAgoAndNothingElse) {
    const std::vector<Flow> flows = flows_in_one_set(5, 2048);
    const std::uint32_t now = ct_clock_;
    // Seen 10, 400, 5 and 20 units ago: the second is the one to go.
    const std::uint32_t ago[] = {10, 400, 5, 20};
    std::vector<xlb_ct_value> values;
    for (std::size_t i = 0; i < 4; ++i) {
        const std::uint32_t pinned = other_than(expected_backend(ring_, flow_key(flows[i])));
        values.push_back(entry_for(pinned, now - ago[i]));
        auto put = lb().conntrack().put(flow_key(flows[i]), values.back());
        ASSERT_TRUE(put) << put.error().message();
        EXPECT_EQ(*put, bpf::ConntrackTable::Put::kAdded);
    }
    const Flow& fifth = flows[4];
    const std::uint32_t ring_choice = expected_backend(ring_, flow_key(fifth));
    expect_sent_to(fifth, ring_choice);

    auto e = entry(fifth);
    ASSERT_TRUE(e) << "the new flow was not recorded";
    EXPECT_EQ(e->backend_id, ring_choice);
    EXPECT_EQ(e->created, ct_clock_);
    EXPECT_FALSE(entry(flows[1])) << "the way seen longest ago was kept";
    for (std::size_t i : {0u, 2u, 3u}) {
        auto kept = entry(flows[i]);
        ASSERT_TRUE(kept) << "flow " << i << " was replaced";
        EXPECT_EQ(std::memcmp(&*kept, &values[i], sizeof values[i]), 0) << "flow " << i;
    }
    EXPECT_EQ(lb().conntrack().count(), 4u);
    // The survivors still go where they were pinned.
    expect_sent_to(flows[0], values[0].backend_id);
}

TEST_F(ConntrackSetsTest, AWayAWriterHoldsIsNeitherUsedNorOverwritten) {
    const std::vector<Flow> flows = flows_in_one_set(5, 4096);
    const std::uint32_t now = ct_clock_;
    std::vector<xlb_ct_value> values;
    for (std::size_t i = 0; i < 4; ++i) {
        const std::uint32_t pinned = other_than(expected_backend(ring_, flow_key(flows[i])));
        // flows[0] seen longest ago: every insert into the set picks its way.
        values.push_back(entry_for(pinned, now - (i == 0 ? 900 : 10)));
        ASSERT_TRUE(lb().conntrack().put(flow_key(flows[i]), values.back()));
    }
    SetsMapping mapping(lb().conntrack());
    ASSERT_TRUE(mapping.ok());
    xlb_ct_set& set = mapping.set(set_of(flows[0]));
    const xlb_flow_key first = flow_key(flows[0]);
    int held = -1;
    for (int w = 0; w < XLB_CT_WAYS; ++w)
        if (std::memcmp(&set.key[w], &first, sizeof first) == 0) held = w;
    ASSERT_GE(held, 0);
    // A writer on another CPU has claimed the way and not finished.
    const __u64 seq = set.seq[held];
    ASSERT_EQ(seq % 2, 0u);
    __atomic_store_n(&set.seq[held], seq + 1, __ATOMIC_RELEASE);

    // Its flow is not found there: the ring decides, and the insert that
    // follows finds the way taken and records nothing.
    expect_sent_to(flows[0], expected_backend(ring_, flow_key(flows[0])));
    // A new flow of the set: the way seen longest ago is that one, taken.
    expect_sent_to(flows[4], expected_backend(ring_, flow_key(flows[4])));
    EXPECT_EQ(__atomic_load_n(&set.seq[held], __ATOMIC_ACQUIRE), seq + 1);
    EXPECT_EQ(std::memcmp(&set.key[held], &first, sizeof first), 0);
    EXPECT_EQ(std::memcmp(&set.value[held], &values[0], sizeof(xlb_ct_value)), 0);
    for (std::size_t i = 1; i < 4; ++i) {
        auto kept = entry(flows[i]);
        ASSERT_TRUE(kept);
        EXPECT_EQ(std::memcmp(&*kept, &values[i], sizeof values[i]), 0) << "flow " << i;
    }
    EXPECT_FALSE(entry(flows[4]));

    // The writer done (the value unchanged), the flow is found again.
    __atomic_store_n(&set.seq[held], seq + 2, __ATOMIC_RELEASE);
    expect_sent_to(flows[0], values[0].backend_id);
}

TEST_F(ConntrackSetsTest, InsertsOnTwoCpusWithDeletesLeaveOnlyWholeEntries) {
    const int cpus = static_cast<int>(std::thread::hardware_concurrency());
    if (cpus < 2) GTEST_SKIP() << "needs two CPUs";
    // Eight flows for each of two sets of four ways: every packet that
    // misses replaces another flow, on both CPUs at once.
    std::vector<Flow> flows = flows_in_one_set(8, 1024);
    const std::vector<Flow> more = flows_in_one_set(8, 1024, set_of(flows[0]));
    flows.insert(flows.end(), more.begin(), more.end());
    std::vector<Bytes> frames;
    for (const Flow& f : flows) frames.push_back(make_frame(f));
    // The clock stands still at the stamp of a delete: the flow cache keeps
    // no copy, and every packet goes to the table.
    lb().note_conntrack_erased();
    const std::uint32_t epoch = *lb().vip_buckets().get(xlb_vip_bucket(flow_key(flows[0]).dst));

    // An entry is whole when its value is the one its own key's packet wrote.
    auto whole = [&](const xlb_flow_key& key, const xlb_ct_value& v) {
        return v.backend_id == expected_backend(ring_, key) && v.generation == 1 &&
               v.vip_id == kVipId && v.vip_epoch == epoch &&
               v.hash == xlb_flow_hash(&key, kHashSeed) && v.created == ct_clock_ &&
               v.last_seen == ct_clock_ && v.second_chance == 0;
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
    EXPECT_LE(left, 2u * XLB_CT_WAYS);
    std::printf("runs %llu, reads %llu (%llu found), deletes %llu, left %llu\n",
                static_cast<unsigned long long>(runs.load()),
                static_cast<unsigned long long>(reads), static_cast<unsigned long long>(found),
                static_cast<unsigned long long>(deleted), static_cast<unsigned long long>(left));
}

}  // namespace
}  // namespace xlb::test
