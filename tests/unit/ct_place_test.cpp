// SPDX-License-Identifier: Apache-2.0
// The connection table's placement (abi.h, layout 5; ct_set.h) simulated in
// memory with the table's own code: the buckets (xlb_ct_buckets), the
// placement steps (xlb_ct_place and its parts), the slots' names
// (xlb_ct_ident_of) and metas (xlb_ct_head_meta) as the program writes them,
// under a fake clock. It measures how many live flows a full table loses and
// checks the rules of eviction one by one.
#include <gtest/gtest.h>
#include <netinet/in.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "xlb/ct_set.h"

namespace {

constexpr std::uint32_t kSlotsPow = 20;  // 2^20 slots, as a mid-sized table
constexpr std::uint32_t kCapacity = 1U << kSlotsPow;
constexpr std::uint32_t kBuckets = kCapacity / XLB_CT_SLOTS;
constexpr std::uint32_t kVips = 8;

// The seed of a run: XLB_CT_PLACE_SEED when set (to replay a failure), else
// random. Printed by every test that uses it.
std::uint64_t run_seed() {
    static const std::uint64_t seed = []() -> std::uint64_t {
        if (const char* env = std::getenv("XLB_CT_PLACE_SEED"))
            return std::strtoull(env, nullptr, 0);
        std::random_device rd;
        return (static_cast<std::uint64_t>(rd()) << 32) | static_cast<std::uint64_t>(rd());
    }();
    return seed;
}

struct Flow {
    xlb_flow_key key{};
    std::uint32_t vip_id = 0;
    std::uint32_t backend_id = 0;
    std::uint32_t hint = 0;  // 0, or 1 + the hinted backend's id
    bool lost = false;
};

// The table as the program sees it, plus who owns each slot (for counting
// losses; the program does not know).
class SimTable {
public:
    // first_only: a flow may live in its first bucket only (single choice),
    // the second bucket never offered, as a table of one hash would behave.
    SimTable(std::uint32_t buckets, std::uint32_t seed, bool first_only = false)
        : buckets_(buckets),
          seed_(seed),
          first_only_(first_only),
          slots_(static_cast<std::size_t>(buckets) * XLB_CT_SLOTS),
          owner_(slots_.size(), -1) {}

    std::uint32_t clock = 1U << 12;      // XLB_CT_TIME_SHIFT units
    std::uint64_t evicted_live = 0;      // live entries (flows) an insert replaced
    std::uint64_t evicted_by_pairs = 0;  // of those, by an entry of two slots
    std::uint64_t refused = 0;           // inserts with nowhere to go

    std::uint32_t now16() const { return xlb_ct_seen16(clock); }

    // xlb_ct_insert of a flow not in the table. Returns whether it wrote.
    bool insert(std::vector<Flow>& flows, int index) {
        Flow& f = flows[static_cast<std::size_t>(index)];
        xlb_ct_ident id{};
        xlb_ct_ident_of(&f.key, f.vip_id, &id);
        std::uint32_t b[2];
        xlb_ct_buckets(&f.key, seed_, buckets_, &b[0], &b[1]);
        const bool pair = id.v6 || f.hint != 0;
        xlb_ct_place_state st{};
        for (std::uint32_t s = 0; s < XLB_CT_SLOTS; s++) {
            st.meta[s] = at(b[0], s).meta;
            st.meta[XLB_CT_SLOTS + s] =
                (first_only_ || b[1] == b[0]) ? XLB_CT_CLAIMED : at(b[1], s).meta;
        }
        st.pair = pair;
        st.now16 = now16();
        xlb_ct_spot spot{};
        if (xlb_ct_place(&st, &spot) != 0) {
            refused++;
            return false;
        }
        if (spot.bucket) at(b[0], 0).meta |= XLB_CT_OVERFLOW;
        const std::uint32_t bucket = b[spot.bucket];
        std::uint32_t slot = spot.slot;
        if (spot.pair) slot &= ~1U;
        const std::uint64_t before = evicted_live;
        evict(flows, bucket, slot);
        if (spot.pair) evict(flows, bucket, slot | 1);
        if (pair) evicted_by_pairs += evicted_live - before;
        const std::uint64_t kind = id.v6 ? XLB_CT_KIND_V6 : XLB_CT_KIND_V4;
        xlb_ct_slot& head = at(bucket, slot);
        const std::uint64_t old = head.meta;
        head.key = id.head_key;
        head.meta = xlb_ct_head_meta(f.vip_id, f.backend_id, 1, static_cast<std::uint32_t>(kind),
                                     f.hint != 0, now16()) |
                    ((old ^ XLB_CT_VERSION) & (XLB_CT_VERSION | XLB_CT_OVERFLOW));
        owner_[index_of(bucket, slot)] = index;
        if (spot.pair) {
            xlb_ct_slot& tail = at(bucket, slot | 1);
            tail.key = pair ? id.tail_key : 0;
            tail.meta = pair ? (id.tail_ports |
                                (static_cast<std::uint64_t>(f.hint) << XLB_CT_TAIL_HINT_SHIFT))
                             : 0;
            if (pair) owner_[index_of(bucket, slot | 1)] = index;
        }
        return true;
    }

    // xlb_ct_lookup: the first bucket, then the second when the first's
    // slot 0 says some flow overflowed. Returns the head's meta, or 0.
    std::uint64_t lookup(const Flow& f) const {
        xlb_ct_ident id{};
        xlb_ct_ident_of(&f.key, f.vip_id, &id);
        std::uint32_t b[2];
        xlb_ct_buckets(&f.key, seed_, buckets_, &b[0], &b[1]);
        if (std::uint64_t m = find_in(id, b[0])) return m;
        if (!(at(b[0], 0).meta & XLB_CT_OVERFLOW) || b[1] == b[0]) return 0;
        return find_in(id, b[1]);
    }

    // A packet of a recorded flow: refreshes its last_seen, as
    // xlb_ct_backend does.
    void refresh_all() {
        for (std::size_t i = 0; i < slots_.size(); i++) {
            __u64& m = slots_[i].meta;
            const std::uint32_t kind = xlb_ct_kind(m);
            if (kind == XLB_CT_KIND_V4 || kind == XLB_CT_KIND_V6)
                m = (m & ~XLB_CT_SEEN_MASK) |
                    (static_cast<std::uint64_t>(now16()) << XLB_CT_SEEN_SHIFT_BITS);
        }
    }

    std::uint64_t used_slots() const {
        std::uint64_t n = 0;
        for (const auto& s : slots_) n += xlb_ct_kind(s.meta) != XLB_CT_KIND_EMPTY;
        return n;
    }

private:
    std::size_t index_of(std::uint32_t bucket, std::uint32_t slot) const {
        return static_cast<std::size_t>(bucket) * XLB_CT_SLOTS + slot;
    }
    xlb_ct_slot& at(std::uint32_t bucket, std::uint32_t slot) {
        return slots_[index_of(bucket, slot)];
    }
    const xlb_ct_slot& at(std::uint32_t bucket, std::uint32_t slot) const {
        return slots_[index_of(bucket, slot)];
    }

    void evict(std::vector<Flow>& flows, std::uint32_t bucket, std::uint32_t slot) {
        int& o = owner_[index_of(bucket, slot)];
        if (o < 0) return;
        Flow& victim = flows[static_cast<std::size_t>(o)];
        if (!victim.lost) {
            victim.lost = true;
            evicted_live++;
        }
        o = -1;
    }

    // Mirrors xlb_ct_match: the head by VIP, kind and key; a tail by ports,
    // kind and key.
    std::uint64_t find_in(const xlb_ct_ident& id, std::uint32_t bucket) const {
        for (std::uint32_t s = 0; s < XLB_CT_SLOTS; s++) {
            if (id.v6 && (s & 1)) continue;
            const xlb_ct_slot& head = at(bucket, s);
            if ((head.meta & XLB_CT_IDENT_MASK) != id.head_match || head.key != id.head_key)
                continue;
            if (xlb_ct_has_tail(head.meta)) {
                const xlb_ct_slot& tail = at(bucket, s | 1);
                if ((tail.meta & XLB_CT_TAIL_IDENT_MASK) != id.tail_ports ||
                    tail.key != id.tail_key)
                    continue;
            }
            return head.meta;
        }
        return 0;
    }

    std::uint32_t buckets_;
    std::uint32_t seed_;
    bool first_only_;
    std::vector<xlb_ct_slot> slots_;
    std::vector<int> owner_;
};

// Bijections of 64-bit values (splitmix64's finaliser) and of 48-bit ones
// (odd multipliers and xor-shifts, modulo 2^48): distinct inputs, distinct
// random-looking outputs.
std::uint64_t mix64(std::uint64_t x) {
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
    return x ^ (x >> 31);
}
std::uint64_t mix48(std::uint64_t x) {
    constexpr std::uint64_t m = (1ULL << 48) - 1;
    x = ((x & m) * 0x9e3779b97f4bULL) & m;
    x ^= x >> 24;
    x = (x * 0xbf58476d1ce5ULL) & m;
    return x ^ (x >> 23);
}

// Random distinct flows to kVips VIPs (VIP i: 198.51.100.i / 2001:db8::i,
// TCP port 443, or for an even i a port-0 VIP's random destination port)
// until their slots add up to `slots`; v6_share of them IPv6, hint_share of
// the IPv4 ones with a second-chance hint. Distinct by construction: an IPv4
// flow's source address and port are mix48, an IPv6 flow's first 8 source
// bytes mix64, of a distinct number.
std::vector<Flow> make_flows(std::mt19937_64& rng, std::uint64_t slots, double v6_share,
                             double hint_share = 0.0) {
    std::vector<Flow> flows;
    std::uniform_real_distribution<double> unit(0.0, 1.0);
    const std::uint64_t salt = rng();
    std::uint64_t used = 0;
    for (std::uint64_t n = 0; used < slots; n++) {
        Flow f;
        const bool v6 = unit(rng) < v6_share;
        const std::uint64_t r = v6 ? mix64(n ^ salt) : mix48(n ^ salt);
        f.vip_id = 1 + static_cast<std::uint32_t>(rng() % kVips);
        f.key.proto = IPPROTO_TCP;
        f.key.family = v6 ? XLB_FAMILY_V6 : XLB_FAMILY_V4;
        if (v6) {
            const std::uint64_t low = rng();
            f.key.dst[0] = htonl(0x20010db8);
            f.key.dst[3] = htonl(f.vip_id);
            f.key.src[0] = static_cast<__be32>(r);
            f.key.src[1] = static_cast<__be32>(r >> 32);
            f.key.src[2] = static_cast<__be32>(low);
            f.key.src[3] = static_cast<__be32>(low >> 32);
            f.key.sport = static_cast<__be16>(low >> 7);
            f.key.dport = (f.vip_id & 1) ? htons(443) : static_cast<__be16>(low >> 23);
        } else {
            f.key.dst[0] = htonl(0xc6336400 | f.vip_id);
            f.key.src[0] = static_cast<__be32>(r);
            f.key.sport = static_cast<__be16>(r >> 32);
            f.key.dport = (f.vip_id & 1) ? htons(443) : static_cast<__be16>(rng());
        }
        f.backend_id = 1 + static_cast<std::uint32_t>(rng() % 1000);
        if (!v6 && unit(rng) < hint_share) f.hint = 1 + static_cast<std::uint32_t>(rng() % 1000);
        used += (v6 || f.hint) ? 2 : 1;
        flows.push_back(f);
    }
    return flows;
}

struct FillResult {
    std::uint64_t flows = 0;
    std::uint64_t lost = 0;     // evicted while live, or never recorded
    std::uint64_t missing = 0;  // kept but not found by a lookup
    double loss() const { return flows ? static_cast<double>(lost) / flows : 0.0; }
};

// Inserts the flows in order, the clock ticking (about four seconds over the
// fill) and every recorded flow sending a packet each tick: all of them are
// live, so every eviction loses one. Then looks every kept flow up.
FillResult fill(SimTable& table, std::vector<Flow>& flows) {
    const std::size_t per_tick = flows.size() / 16 + 1;
    for (std::size_t i = 0; i < flows.size(); i++) {
        if (i % per_tick == 0 && i != 0) {
            table.clock += 1U << XLB_CT_SEEN_SHIFT;  // one last_seen unit, ~268 ms
            table.refresh_all();
        }
        if (table.lookup(flows[i]) != 0) {
            ADD_FAILURE() << "flow " << i << " found before it was inserted";
            continue;
        }
        if (!table.insert(flows, static_cast<int>(i))) flows[i].lost = true;
    }
    FillResult r;
    r.flows = flows.size();
    for (const Flow& f : flows) {
        if (f.lost) {
            r.lost++;
            continue;
        }
        const std::uint64_t m = table.lookup(f);
        if (m == 0 || xlb_ct_meta_backend(m) != f.backend_id || xlb_ct_meta_vip(m) != f.vip_id)
            r.missing++;
    }
    return r;
}

void report(const char* name, const FillResult& r, SimTable& table) {
    char line[256];
    std::snprintf(line, sizeof line,
                  "%s: %llu flows in %u slots (%.1f %% used), %llu lost (%.4f %%; %llu to "
                  "inserts of two slots), seed 0x%llx",
                  name, static_cast<unsigned long long>(r.flows), kCapacity,
                  100.0 * static_cast<double>(table.used_slots()) / kCapacity,
                  static_cast<unsigned long long>(r.lost), 100.0 * r.loss(),
                  static_cast<unsigned long long>(table.evicted_by_pairs),
                  static_cast<unsigned long long>(run_seed()));
    std::printf("%s\n", line);
    ::testing::Test::RecordProperty(std::string(name) + "_loss_percent",
                                    std::to_string(100.0 * r.loss()));
}

// Live IPv4 flows at 75 % of the capacity: the two buckets keep all but
// fewer than 0.1 % of them (abi.h's promise), and every kept flow is found
// where the lookup looks (its first bucket, or the second when the first's
// overflow bit is set).
TEST(CtPlace, LiveIpv4FlowsAtThreeQuartersLoseUnderAThousandth) {
    std::mt19937_64 rng(run_seed());
    SimTable table(kBuckets, static_cast<std::uint32_t>(rng()));
    auto flows = make_flows(rng, kCapacity * 3 / 4, 0.0);
    const FillResult r = fill(table, flows);
    report("ipv4", r, table);
    EXPECT_LT(r.loss(), 0.001);
    EXPECT_EQ(r.missing, 0u) << "kept flows a lookup does not find";
}

// A quarter of the flows IPv6 (an aligned pair of slots each: 40 % of the
// slots), slots 75 % used. A pair needs an aligned free pair in one of its
// buckets, and at 75 % a bucket has two free slots on average, so pairs find
// both buckets without one far more often than single slots do: measured
// 0.33 % to 0.35 % over many seeds (IPv4 alone: 0.002 % to 0.003 %), most of
// it lost to inserts of pairs (the count is printed). The bound, 0.5 %, is
// that measurement with room for the seed's spread, and still ten times below
// the single-choice loss of OneBucketAFlowLosesFarMore.
TEST(CtPlace, QuarterIpv6AtThreeQuartersLosesUnderHalfAPercent) {
    std::mt19937_64 rng(run_seed() ^ 0x6);
    SimTable table(kBuckets, static_cast<std::uint32_t>(rng()));
    auto flows = make_flows(rng, kCapacity * 3 / 4, 0.25);
    const FillResult r = fill(table, flows);
    report("mixed_v6", r, table);
    EXPECT_LT(r.loss(), 0.005);
    EXPECT_EQ(r.missing, 0u) << "kept flows a lookup does not find";
}

// The same fill with one bucket a flow (the second never offered) loses far
// more: the measurement above can fail, and the second choice is what keeps
// the loss low.
TEST(CtPlace, OneBucketAFlowLosesFarMore) {
    std::mt19937_64 rng(run_seed() ^ 0x1);
    SimTable table(kBuckets, static_cast<std::uint32_t>(rng()), /*first_only=*/true);
    auto flows = make_flows(rng, kCapacity * 3 / 4, 0.0);
    const FillResult r = fill(table, flows);
    report("one_bucket", r, table);
    EXPECT_GT(r.loss(), 0.01);
    EXPECT_EQ(r.missing, 0u);
}

// Layout 4's 4-way sets, one set a flow, at the same fill: a flow is lost
// when its set already holds four live flows. A plain model (set = the flow
// hash onto capacity/4 sets), independent of ct_set.h.
TEST(CtPlace, OldFourWaySetsLoseFarMore) {
    std::mt19937_64 rng(run_seed() ^ 0x4);
    const std::uint32_t seed = static_cast<std::uint32_t>(rng());
    auto flows = make_flows(rng, kCapacity * 3 / 4, 0.0);
    const std::uint32_t sets = kCapacity / 4;
    std::vector<std::uint8_t> used(sets, 0);
    std::uint64_t lost = 0;
    for (const Flow& f : flows) {
        const std::uint32_t set = xlb_ct_first_bucket(xlb_flow_hash(&f.key, seed), sets);
        if (used[set] == 4)
            lost++;  // the oldest of four live flows goes, or the new one
        else
            used[set]++;
    }
    const double loss = static_cast<double>(lost) / static_cast<double>(flows.size());
    std::printf("four_way: %zu flows, %llu lost (%.4f %%), seed 0x%llx\n", flows.size(),
                static_cast<unsigned long long>(lost), 100.0 * loss,
                static_cast<unsigned long long>(run_seed()));
    RecordProperty("four_way_loss_percent", std::to_string(100.0 * loss));
    EXPECT_GT(loss, 0.01);
}

// ---- The rules, one placement at a time ----

constexpr std::uint32_t kNow16 = 0x0010;

// An IPv4 head last seen `idle` units before kNow16.
std::uint64_t v4(std::uint32_t idle) {
    return xlb_ct_head_meta(1, 1, 1, XLB_CT_KIND_V4, 0, kNow16 - idle);
}
std::uint64_t v6_head(std::uint32_t idle) {
    return xlb_ct_head_meta(1, 1, 1, XLB_CT_KIND_V6, 0, kNow16 - idle);
}
constexpr std::uint64_t kTail = static_cast<std::uint64_t>(XLB_CT_KIND_TAIL) << XLB_CT_KIND_SHIFT;

xlb_ct_place_state state(bool pair) {
    xlb_ct_place_state st{};
    st.pair = pair;
    st.now16 = kNow16;
    return st;
}

// Both buckets full of live entries (idle 1..3, under XLB_CT_STALE16): the
// one seen longest ago goes, in whichever bucket it is.
TEST(CtPlaceRules, EvictsTheEntrySeenLongestAgoOfBothBuckets) {
    for (std::uint32_t oldest = 0; oldest < 2 * XLB_CT_SLOTS; oldest++) {
        auto st = state(false);
        for (std::uint32_t i = 0; i < 2 * XLB_CT_SLOTS; i++)
            st.meta[i] = v4(i == oldest ? 3 : 1 + (i % 2));
        xlb_ct_spot spot{};
        ASSERT_EQ(xlb_ct_place(&st, &spot), 0);
        EXPECT_EQ(spot.bucket * XLB_CT_SLOTS + spot.slot, oldest);
        EXPECT_EQ(spot.pair, 0u);
    }
}

// The 16-bit last_seen wraps: an entry stamped just before the wrap is older
// than one stamped after it.
TEST(CtPlaceRules, AgeAcrossTheWrapOfLastSeen) {
    auto st = state(false);
    st.meta[XLB_CT_SLOTS + 5] = xlb_ct_head_meta(1, 1, 1, XLB_CT_KIND_V4, 0, 0xfffe);
    st.now16 = 1;  // 0xfffe is 3 units ago
    for (std::uint32_t i = 0; i < 2 * XLB_CT_SLOTS; i++)
        if (i != XLB_CT_SLOTS + 5) st.meta[i] = xlb_ct_head_meta(1, 1, 1, XLB_CT_KIND_V4, 0, 0);
    xlb_ct_spot spot{};
    ASSERT_EQ(xlb_ct_place(&st, &spot), 0);
    EXPECT_EQ(spot.bucket, 1u);
    EXPECT_EQ(spot.slot, 5u);
}

// A claimed slot (a writer holds it) is never taken: not as room, not as a
// victim, not as the tail of a pair; with every candidate claimed, nothing.
TEST(CtPlaceRules, NeverChoosesAClaimedSlot) {
    {
        // The oldest entry is claimed: the next oldest goes.
        auto st = state(false);
        for (std::uint32_t i = 0; i < 2 * XLB_CT_SLOTS; i++) st.meta[i] = v4(1);
        st.meta[XLB_CT_SLOTS + 2] = v4(3) | XLB_CT_CLAIMED;
        st.meta[4] = v4(2);
        xlb_ct_spot spot{};
        ASSERT_EQ(xlb_ct_place(&st, &spot), 0);
        EXPECT_EQ(spot.bucket, 0u);
        EXPECT_EQ(spot.slot, 4u);
    }
    {
        // A claimed empty slot is no room: the first bucket is otherwise
        // full, so the entry goes to the second bucket's free slot.
        auto st = state(false);
        for (std::uint32_t i = 0; i < 2 * XLB_CT_SLOTS; i++) st.meta[i] = v4(1);
        st.meta[3] = XLB_CT_CLAIMED;
        st.meta[XLB_CT_SLOTS + 6] = 0;
        xlb_ct_spot spot{};
        ASSERT_EQ(xlb_ct_place(&st, &spot), 0);
        EXPECT_EQ(spot.bucket, 1u);
        EXPECT_EQ(spot.slot, 6u);
    }
    {
        // A pair whose tail is claimed is not taken, though its head is the
        // oldest; nor is an IPv6 entry whose tail is claimed.
        auto st = state(true);
        for (std::uint32_t i = 0; i < 2 * XLB_CT_SLOTS; i++) st.meta[i] = v4(1);
        st.meta[0] = v4(3);
        st.meta[1] = v4(3) | XLB_CT_CLAIMED;
        st.meta[XLB_CT_SLOTS + 4] = v4(2);
        st.meta[XLB_CT_SLOTS + 5] = v4(2);
        xlb_ct_spot spot{};
        ASSERT_EQ(xlb_ct_place(&st, &spot), 0);
        EXPECT_EQ(spot.bucket, 1u);
        EXPECT_EQ(spot.slot, 4u);
        EXPECT_EQ(spot.pair, 1u);

        auto one = state(false);
        for (std::uint32_t i = 0; i < 2 * XLB_CT_SLOTS; i++) one.meta[i] = v4(1);
        one.meta[2] = v6_head(3);
        one.meta[3] = kTail | XLB_CT_CLAIMED;
        one.meta[XLB_CT_SLOTS + 7] = v4(2);
        ASSERT_EQ(xlb_ct_place(&one, &spot), 0);
        EXPECT_EQ(spot.bucket * XLB_CT_SLOTS + spot.slot, XLB_CT_SLOTS + 7);
    }
    {
        auto st = state(false);
        for (std::uint32_t i = 0; i < 2 * XLB_CT_SLOTS; i++) st.meta[i] = v4(1) | XLB_CT_CLAIMED;
        xlb_ct_spot spot{};
        EXPECT_EQ(xlb_ct_place(&st, &spot), -1);
    }
}

// A full first bucket whose oldest entry has been idle XLB_CT_STALE16 units
// gives it up on its own (xlb_ct_place_stale), though the second bucket has
// room; one unit less and the second bucket decides.
TEST(CtPlaceRules, FullFirstBucketGivesUpAStaleEntryWithoutTheSecond) {
    for (std::uint32_t idle : {XLB_CT_STALE16 - 1, XLB_CT_STALE16, XLB_CT_STALE16 + 100}) {
        auto st = state(false);
        for (std::uint32_t s = 0; s < XLB_CT_SLOTS; s++) st.meta[s] = v4(s == 6 ? idle : 1);
        // The second bucket is empty: room, if it were read.
        xlb_ct_spot spot{};
        ASSERT_EQ(xlb_ct_place_first(&st, &spot), 1) << "a full first bucket cannot decide alone";
        st.best = 0;
        for (std::uint32_t i = 0; i < XLB_CT_SLOTS; i++) xlb_ct_place_evict_step(&st, i);
        const int alone = xlb_ct_place_stale(&st, &spot);
        xlb_ct_spot whole{};
        auto again = st;
        ASSERT_EQ(xlb_ct_place(&again, &whole), 0);
        if (idle >= XLB_CT_STALE16) {
            ASSERT_EQ(alone, 0) << "idle " << idle;
            EXPECT_EQ(spot.bucket, 0u);
            EXPECT_EQ(spot.slot, 6u);
            EXPECT_EQ(whole.bucket, 0u);
            EXPECT_EQ(whole.slot, 6u);
        } else {
            EXPECT_EQ(alone, 1) << "idle " << idle << ": a live entry must not go";
            EXPECT_EQ(whole.bucket, 1u) << "the second bucket's room, not an eviction";
        }
    }
}

// The first bucket alone takes a flow while it holds fewer than
// XLB_CT_FIRST_FILL slots; from there on, the less loaded bucket does.
TEST(CtPlaceRules, FirstBucketUntilFirstFillThenTheLessLoaded) {
    auto st = state(false);
    for (std::uint32_t s = 0; s + 1 < XLB_CT_FIRST_FILL; s++) st.meta[s] = v4(1);
    xlb_ct_spot spot{};
    ASSERT_EQ(xlb_ct_place_first(&st, &spot), 0);
    EXPECT_EQ(spot.bucket, 0u);
    EXPECT_EQ(spot.slot, XLB_CT_FIRST_FILL - 1);
    st.meta[XLB_CT_FIRST_FILL - 1] = v4(1);
    EXPECT_EQ(xlb_ct_place_first(&st, &spot), 1);
    st.meta[XLB_CT_SLOTS + 0] = v4(1);
    ASSERT_EQ(xlb_ct_place(&st, &spot), 0);
    EXPECT_EQ(spot.bucket, 1u);
    EXPECT_EQ(spot.slot, 1u);
}

}  // namespace
