// SPDX-License-Identifier: Apache-2.0
#include "xlb/bpf/conntrack_table.h"

#include <bpf/bpf.h>
#include <sys/mman.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <thread>

#include "xlb/bpf/ct_clock.h"
#include "xlb/ct_set.h"

namespace xlb::bpf {

namespace {

// A writer of the program holds a slot for tens of nanoseconds; a slot still
// claimed after this many looks (tens of microseconds) belongs to a writer
// that died half way (an agent killed mid-write; release_stuck_ways frees
// it at the next start): give up rather than spin.
constexpr int kClaimAttempts = 100'000;
// A record's last_seen is brought forward once the slot's 16-bit time has
// moved this far from it (about 37 minutes: well inside the 4.9 hours after
// which the 16-bit time wraps).
constexpr __u32 kRecordRefresh = 1U << 13;

std::atomic_ref<__u64> meta_of(xlb_ct_slot* s) { return std::atomic_ref<__u64>(s->meta); }
std::atomic_ref<__u64> key_of(xlb_ct_slot* s) { return std::atomic_ref<__u64>(s->key); }

bool is_head(__u64 meta) {
    const __u32 kind = xlb_ct_kind(meta);
    return kind == XLB_CT_KIND_V4 || kind == XLB_CT_KIND_V6;
}

// The whole time of a slot's 16-bit last_seen, `seen16`: from the record
// when it is the entry's, else from the clock (the entry was seen within
// the last 4.9 hours: the agent walks the table more often than that).
__u32 unwrap_seen(__u32 seen16, const xlb_ct_record* rec, __u32 now) {
    if (rec) {
        const __u32 ahead = (seen16 - rec->seen16) & 0xffff;
        if (ahead == 0) return rec->last_seen;
        return ((rec->last_seen >> XLB_CT_SEEN_SHIFT) + ahead) << XLB_CT_SEEN_SHIFT;
    }
    // The start of the slot's 16-bit unit: the same answer however often
    // it is read while the slot is not refreshed.
    const __u32 behind = (xlb_ct_seen16(now) - seen16) & 0xffff;
    return ((now >> XLB_CT_SEEN_SHIFT) - behind) << XLB_CT_SEEN_SHIFT;
}

// Writes the agent's fields of a record; `ended` is the program's, which it
// may be writing now.
void keep_record(xlb_ct_record* rec, __u64 tag_key, __u64 tag_meta, __u32 created, __u32 last_seen,
                 __u32 seen16) {
    rec->tag_key = tag_key;
    rec->tag_meta = tag_meta;
    rec->created = created;
    rec->last_seen = last_seen;
    rec->seen16 = seen16;
}

}  // namespace

ConntrackTable::Mapping::~Mapping() {
    if (base != nullptr) munmap(base, length);
}

Result<ConntrackTable> ConntrackTable::map(int fd, std::string name, int vips_fd) {
    bpf_map_info info{};
    __u32 len = sizeof info;
    if (bpf_obj_get_info_by_fd(fd, &info, &len) != 0)
        return fail_on(errno, "read the size of", name);
    if (info.type != BPF_MAP_TYPE_ARRAY || info.value_size != sizeof(xlb_ct_line) ||
        XLB_CT_BUCKETS_OF(info.max_entries) == 0)
        return fail_on(EINVAL, "map", name,
                       "not a layout-5 connection table (want an array of " +
                           std::to_string(sizeof(xlb_ct_line)) + "-byte lines)");
    auto mapping = std::make_shared<Mapping>();
    mapping->length = std::size_t{info.max_entries} * sizeof(xlb_ct_line);
    void* base = mmap(nullptr, mapping->length, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (base == MAP_FAILED) return fail_on(errno, "map into memory", name);
    mapping->base = base;
    ConntrackTable table;
    table.mapping_ = std::move(mapping);
    table.fd_ = fd;
    table.vips_fd_ = vips_fd;
    table.name_ = std::move(name);
    table.elements_ = info.max_entries;
    return table;
}

Result<ConntrackTable> ConntrackTable::open_pinned(const std::string& path) {
    UniqueFd fd(bpf_obj_get(path.c_str()));
    if (!fd) return fail_on(errno, "open the pinned connection table", path);
    const std::string vips_path =
        (std::filesystem::path(path).parent_path() / XLB_MAP_VIPS).string();
    UniqueFd vips(bpf_obj_get(vips_path.c_str()));
    if (!vips) return fail_on(errno, "open the pinned VIP map", vips_path);
    auto table = map(fd.get(), path, vips.get());
    if (!table) return table;
    table->mapping_->owned = std::move(fd);
    table->mapping_->owned_vips = std::move(vips);
    return table;
}

ConntrackTable::VipKeys ConntrackTable::vip_keys() const {
    VipKeys out;
    if (vips_fd_ < 0) return out;
    xlb_vip_key key{}, next{};
    const void* at = nullptr;
    while (bpf_map_get_next_key(vips_fd_, at, &next) == 0) {
        xlb_vip_value value{};
        if (bpf_map_lookup_elem(vips_fd_, &next, &value) == 0) out.emplace_back(value.vip_id, next);
        key = next;
        at = &key;
    }
    return out;
}

std::optional<std::uint32_t> ConntrackTable::vip_id_of(const xlb_flow_key& key) const {
    if (vips_fd_ < 0) return std::nullopt;
    xlb_vip_key vk{};
    std::memcpy(vk.addr, key.dst, sizeof vk.addr);
    vk.port = key.dport;
    vk.proto = key.proto;
    vk.family = key.family;
    xlb_vip_value value{};
    if (bpf_map_lookup_elem(vips_fd_, &vk, &value) == 0) return value.vip_id;
    vk.port = 0;
    if (bpf_map_lookup_elem(vips_fd_, &vk, &value) == 0) return value.vip_id;
    return std::nullopt;
}

xlb_ct_line* ConntrackTable::element(std::uint32_t index) const {
    return static_cast<xlb_ct_line*>(mapping_->base) + index;
}

xlb_ct_slot* ConntrackTable::slot(std::uint32_t bucket, unsigned s) const {
    return &element(XLB_CT_BUCKET_ELEMENT(bucket) + s / 4)->slot[s % 4];
}

xlb_ct_record* ConntrackTable::record(std::uint32_t bucket, unsigned s) const {
    auto* line = element(XLB_CT_RECORD_ELEMENT(buckets(), bucket, s));
    return reinterpret_cast<xlb_ct_record*>(line) + (s % 2);
}

xlb_ct_header5 ConntrackTable::header() const {
    xlb_ct_header5 h{};
    if (!mapping_) return h;
    auto* raw = reinterpret_cast<xlb_ct_header5*>(element(0));
    h.magic = std::atomic_ref<std::uint32_t>(raw->magic).load(std::memory_order_acquire);
    h.seed = raw->seed;
    h.buckets = raw->buckets;
    h.slots = raw->slots;
    h.layout = raw->layout;
    return h;
}

void ConntrackTable::format(std::uint32_t seed) const {
    auto* raw = reinterpret_cast<xlb_ct_header5*>(element(0));
    std::atomic_ref<std::uint32_t>(raw->magic).store(0, std::memory_order_release);
    std::memset(static_cast<void*>(element(XLB_CT_HEADER_ELEMENTS)), 0,
                std::size_t{elements_ - XLB_CT_HEADER_ELEMENTS} * sizeof(xlb_ct_line));
    raw->seed = seed;
    raw->buckets = buckets();
    raw->slots = XLB_CT_SLOTS;
    raw->layout = XLB_CT_LAYOUT;
    std::atomic_ref<std::uint32_t>(raw->magic).store(XLB_CT_MAGIC5, std::memory_order_release);
}

bool ConntrackTable::ready() const {
    if (!mapping_) return false;
    const xlb_ct_header5 h = header();
    return h.magic == XLB_CT_MAGIC5 && h.buckets == buckets() && h.slots == XLB_CT_SLOTS &&
           h.layout == XLB_CT_LAYOUT;
}

bool ConntrackTable::read(std::uint32_t bucket, unsigned s, Raw* raw) const {
    xlb_ct_slot* head = slot(bucket, s);
    const __u64 before = meta_of(head).load(std::memory_order_acquire);
    if ((before & XLB_CT_CLAIMED) || !is_head(before)) return false;
    raw->meta = before;
    raw->head_key = key_of(head).load(std::memory_order_relaxed);
    raw->tail_key = raw->tail_meta = 0;
    if (xlb_ct_has_tail(before)) {
        if (s & 1) return false;
        xlb_ct_slot* tail = slot(bucket, s | 1);
        raw->tail_meta = meta_of(tail).load(std::memory_order_acquire);
        if ((raw->tail_meta & XLB_CT_CLAIMED) || xlb_ct_kind(raw->tail_meta) != XLB_CT_KIND_TAIL)
            return false;
        raw->tail_key = key_of(tail).load(std::memory_order_relaxed);
        if (meta_of(tail).load(std::memory_order_acquire) != raw->tail_meta) return false;
    }
    std::atomic_thread_fence(std::memory_order_acquire);
    const __u64 after = meta_of(head).load(std::memory_order_relaxed);
    return ((after ^ before) & ~(XLB_CT_SEEN_MASK | XLB_CT_BUCKET_FLAGS)) == 0;
}

xlb_ct_value ConntrackTable::value_of(std::uint32_t bucket, unsigned s, const Raw& raw,
                                      bool keep) const {
    const __u32 now = ct_clock_now();
    const __u32 seen16 = xlb_ct_meta_seen(raw.meta);
    xlb_ct_record* rec = record(bucket, s);
    const bool mine = rec->tag_key == raw.head_key && rec->tag_meta == (raw.meta & XLB_CT_TAG_MASK);
    const __u32 last_seen = unwrap_seen(seen16, mine ? rec : nullptr, now);
    const __u32 created = mine ? rec->created : last_seen;
    if (keep && (!mine || ((seen16 - rec->seen16) & 0xffff) >= kRecordRefresh)) {
        // Only the agent writes records, one walk at a time; a record
        // written for an entry replaced meanwhile fails its tag.
        keep_record(rec, raw.head_key, raw.meta & XLB_CT_TAG_MASK, created, last_seen, seen16);
    }
    const __u32 hint = (raw.meta & XLB_CT_HINT) ? xlb_ct_tail_hint(raw.tail_meta) : 0;
    return xlb_ct_value{.backend_id = xlb_ct_meta_backend(raw.meta),
                        .generation = xlb_ct_meta_generation(raw.meta),
                        .created = created,
                        .last_seen = last_seen,
                        .vip_id = xlb_ct_meta_vip(raw.meta),
                        .vip_epoch = 0,
                        .hash = 0,
                        .second_chance = hint};
}

std::optional<ConntrackTable::Place> ConntrackTable::find(const xlb_flow_key& key,
                                                          std::optional<std::uint32_t> vip_id,
                                                          xlb_ct_value* value) const {
    if (!ready() || key.family == 0) return std::nullopt;
    xlb_ct_ident id{};
    xlb_ct_ident_of(&key, vip_id.value_or(0), &id);
    // Without a VIP (the key's is gone from the VIP map), any entry of the
    // same client and ports whose VIP id the map no longer has.
    std::vector<bool> known;
    __u64 mask = XLB_CT_IDENT_MASK & ~XLB_CT_CLAIMED;
    if (!vip_id) {
        mask &= ~__u64{XLB_CT_MAX_VIP_ID};
        id.head_match &= ~__u64{XLB_CT_MAX_VIP_ID};
        for (const auto& [known_id, vip_key] : vip_keys()) {
            if (known_id >= known.size()) known.resize(known_id + 1, false);
            known[known_id] = true;
        }
    }
    std::uint32_t first = 0, second = 0;
    xlb_ct_buckets(&key, header().seed, buckets(), &first, &second);
    for (std::uint32_t bucket : {first, second}) {
        for (unsigned s = 0; s < XLB_CT_SLOTS; ++s) {
            for (int attempt = 0; attempt < kClaimAttempts; ++attempt) {
                const __u64 meta = meta_of(slot(bucket, s)).load(std::memory_order_acquire);
                if ((meta & mask) != id.head_match) break;
                Raw raw;
                if (!read(bucket, s, &raw)) continue;  // being written: look again
                if (raw.head_key != id.head_key) break;
                const __u32 slot_vip = xlb_ct_meta_vip(raw.meta);
                if (!vip_id && slot_vip < known.size() && known[slot_vip]) break;
                if (id.v6 && (raw.tail_key != id.tail_key ||
                              (raw.tail_meta & XLB_CT_TAIL_IDENT_MASK) != id.tail_ports))
                    break;
                if (value) *value = value_of(bucket, s, raw, false);
                return Place{bucket, s};
            }
        }
        if (second == first) break;
    }
    return std::nullopt;
}

bool ConntrackTable::write(std::uint32_t bucket, unsigned s, bool pair, const xlb_ct_ident& id,
                           __u64 meta, __u64 tail_meta, const xlb_ct_value& value) const {
    if (pair) s &= ~1U;
    xlb_ct_slot* head = slot(bucket, s);
    xlb_ct_slot* tail = pair ? slot(bucket, s | 1) : nullptr;
    for (int attempt = 0; attempt < kClaimAttempts; ++attempt) {
        __u64 old = meta_of(head).load(std::memory_order_relaxed);
        if (old & XLB_CT_CLAIMED) continue;
        if (!meta_of(head).compare_exchange_weak(old, old | XLB_CT_CLAIMED,
                                                 std::memory_order_acquire))
            continue;
        if (tail) {
            __u64 told = meta_of(tail).load(std::memory_order_relaxed);
            if ((told & XLB_CT_CLAIMED) ||
                !meta_of(tail).compare_exchange_strong(told, told | XLB_CT_CLAIMED,
                                                       std::memory_order_acquire)) {
                meta_of(head).store(old, std::memory_order_release);
                continue;
            }
        }
        const __u64 final_meta =
            meta | ((old ^ XLB_CT_VERSION) & (XLB_CT_VERSION | XLB_CT_BUCKET_FLAGS));
        keep_record(record(bucket, s), id.head_key, final_meta & XLB_CT_TAG_MASK, value.created,
                    value.last_seen, xlb_ct_meta_seen(meta));
        key_of(head).store(id.head_key, std::memory_order_relaxed);
        if (tail) {
            key_of(tail).store((tail_meta & XLB_CT_KIND_MASK) ? id.tail_key : 0,
                               std::memory_order_relaxed);
            meta_of(tail).store(tail_meta, std::memory_order_release);
        }
        meta_of(head).store(final_meta, std::memory_order_release);
        return true;
    }
    return false;
}

bool ConntrackTable::clear_slot(std::uint32_t bucket, unsigned s, __u64 expect, __u64 head_key,
                                bool* cleared) const {
    *cleared = false;
    xlb_ct_slot* head = slot(bucket, s);
    for (int attempt = 0; attempt < kClaimAttempts; ++attempt) {
        __u64 old = meta_of(head).load(std::memory_order_relaxed);
        if (old & XLB_CT_CLAIMED) continue;
        if (!is_head(old)) return true;  // emptied meanwhile
        if (!meta_of(head).compare_exchange_weak(old, old | XLB_CT_CLAIMED,
                                                 std::memory_order_acquire))
            continue;
        xlb_ct_slot* tail = nullptr;
        __u64 told = 0;
        if (xlb_ct_has_tail(old)) {
            tail = slot(bucket, s | 1);
            told = meta_of(tail).load(std::memory_order_relaxed);
            if ((told & XLB_CT_CLAIMED) ||
                !meta_of(tail).compare_exchange_strong(told, told | XLB_CT_CLAIMED,
                                                       std::memory_order_acquire)) {
                meta_of(head).store(old, std::memory_order_release);
                continue;
            }
        }
        // Claimed, the entry is checked again: the program may have replaced it.
        const bool same = expect == 0 || ((old & XLB_CT_TAG_MASK) == (expect & XLB_CT_TAG_MASK) &&
                                          key_of(head).load() == head_key);
        if (same) {
            key_of(head).store(0, std::memory_order_relaxed);
            if (tail) {
                key_of(tail).store(0, std::memory_order_relaxed);
                meta_of(tail).store(0, std::memory_order_release);
            }
            // Empty; the version moves on and the overflow bit stays.
            meta_of(head).store((old ^ XLB_CT_VERSION) & (XLB_CT_VERSION | XLB_CT_BUCKET_FLAGS),
                                std::memory_order_release);
        } else {
            if (tail) meta_of(tail).store(told, std::memory_order_release);
            meta_of(head).store(old, std::memory_order_release);
        }
        *cleared = same;
        return true;
    }
    return false;
}

Result<std::optional<xlb_ct_value>> ConntrackTable::get(const xlb_flow_key& key) const {
    xlb_ct_value value{};
    if (!find(key, vip_id_of(key), &value)) return std::optional<xlb_ct_value>{};
    return std::optional<xlb_ct_value>{value};
}

Result<ConntrackTable::Put> ConntrackTable::put(const xlb_flow_key& key,
                                                const xlb_ct_value& value) const {
    if (key.family != XLB_FAMILY_V4 && key.family != XLB_FAMILY_V6)
        return fail_on(EINVAL, "write an entry of", name_, "the key has no family");
    const std::uint32_t vip_id = vip_id_of(key).value_or(value.vip_id);
    if (vip_id > XLB_CT_MAX_VIP_ID || value.backend_id > XLB_CT_MAX_BACKEND_ID)
        return fail_on(EINVAL, "write an entry of", name_,
                       "VIP id " + std::to_string(vip_id) + " or backend id " +
                           std::to_string(value.backend_id) + " beyond what a slot holds");
    if (!ready()) return fail_on(ENODATA, "write an entry of", name_, "the table has no header");
    xlb_ct_ident id{};
    xlb_ct_ident_of(&key, vip_id, &id);
    const __u32 hint = value.second_chance;
    const __u32 kind = id.v6 ? XLB_CT_KIND_V6 : XLB_CT_KIND_V4;
    const __u32 seen16 = xlb_ct_seen16(value.last_seen);
    auto metas = [&](bool pair, bool with_hint) {
        const __u64 meta =
            xlb_ct_head_meta(vip_id, value.backend_id, value.generation, kind, with_hint, seen16);
        const __u64 tail = id.v6 || with_hint ? id.tail_ports | (__u64{with_hint ? hint : 0}
                                                                 << XLB_CT_TAIL_HINT_SHIFT)
                                              : 0;
        return std::pair{meta, pair ? tail : __u64{0}};
    };
    if (auto at = find(key, vip_id, nullptr)) {
        // In the slots it holds, as the program rewrites (a single slot
        // keeps no hint).
        const bool pair = xlb_ct_has_tail(meta_of(slot(at->bucket, at->slot)).load());
        const auto [meta, tail] = metas(pair, pair && hint != 0);
        if (!write(at->bucket, at->slot, pair, id, meta, tail, value))
            return fail_on(EBUSY, "write an entry of", name_, "its slot stayed claimed");
        return Put::kUpdated;
    }
    const bool pair = id.v6 || hint != 0;
    std::uint32_t first = 0, second = 0;
    xlb_ct_buckets(&key, header().seed, buckets(), &first, &second);
    for (int attempt = 0; attempt < kClaimAttempts; ++attempt) {
        xlb_ct_place_state st{};
        for (unsigned s = 0; s < XLB_CT_SLOTS; ++s) {
            st.meta[s] = meta_of(slot(first, s)).load(std::memory_order_acquire);
            st.meta[XLB_CT_SLOTS + s] =
                second == first ? XLB_CT_CLAIMED
                                : meta_of(slot(second, s)).load(std::memory_order_acquire);
        }
        st.pair = pair;
        st.now16 = xlb_ct_seen16(ct_clock_now());
        // xlb_ct_place without its shortcut (a full first bucket giving up
        // an entry idle a second or more unread the second): the agent
        // reads both buckets anyway, and a copy into a new table must not
        // lose a flow that fits.
        xlb_ct_spot spot{};
        if (xlb_ct_place_first(&st, &spot) != 0 && xlb_ct_place_room(&st, &spot) != 0) {
            for (__u32 i = 0; i < 2 * XLB_CT_SLOTS; ++i) xlb_ct_place_evict_step(&st, i);
            if (xlb_ct_place_evicted(&st, &spot) != 0) continue;
        }
        const __u64* taken = &st.meta[spot.bucket * XLB_CT_SLOTS];
        const bool replaced =
            is_head(taken[spot.slot]) || (spot.pair && is_head(taken[spot.slot | 1]));
        // The flags say where flows may be before one goes there: the first
        // bucket that it sends flows on, a bucket that its second line is
        // in use.
        if (spot.bucket)
            meta_of(slot(first, 0)).fetch_or(XLB_CT_OVERFLOW, std::memory_order_acq_rel);
        if (spot.slot >= XLB_CT_SLOTS / 2)
            meta_of(slot(spot.bucket ? second : first, 0))
                .fetch_or(XLB_CT_LINE1, std::memory_order_acq_rel);
        auto [meta, tail] = metas(pair, hint != 0);
        if (spot.pair && !pair) tail = 0;  // one slot over a pair: the tail emptied
        if (write(spot.bucket ? second : first, spot.slot, spot.pair, id, meta, tail, value))
            return replaced ? Put::kReplacedOther : Put::kAdded;
    }
    return fail_on(EBUSY, "write an entry of", name_, "its slots stayed claimed");
}

std::uint64_t ConntrackTable::release_stuck_ways(std::chrono::microseconds grace) const {
    struct Claimed {
        xlb_ct_slot* slot;
        xlb_ct_slot* tail;  // a claimed head's tail, or null
        __u64 meta;
    };
    if (!ready()) return 0;
    std::vector<Claimed> claimed;
    for (std::uint32_t bucket = 0; bucket < buckets(); ++bucket) {
        for (unsigned s = 0; s < XLB_CT_SLOTS; ++s) {
            xlb_ct_slot* sl = slot(bucket, s);
            const __u64 meta = meta_of(sl).load(std::memory_order_acquire);
            // A tail without its head (its writer died between the two) is
            // as stuck as a claimed slot.
            bool orphan = false;
            if (xlb_ct_kind(meta) == XLB_CT_KIND_TAIL) {
                const __u64 head = (s & 1) ? meta_of(slot(bucket, s - 1)).load() : 0;
                orphan = !(head & XLB_CT_CLAIMED) && !xlb_ct_has_tail(head);
            }
            if (!(meta & XLB_CT_CLAIMED) && !orphan) continue;
            xlb_ct_slot* tail = (!(s & 1) && xlb_ct_has_tail(meta)) ? slot(bucket, s | 1) : nullptr;
            claimed.push_back({sl, tail, meta});
        }
    }
    if (claimed.empty()) return 0;
    std::this_thread::sleep_for(grace);
    std::uint64_t released = 0;
    for (const Claimed& c : claimed) {
        __u64 meta = c.meta;
        // Still the same value: nobody finished the write. Emptied (the
        // version moves on, so a reader mid-read notices).
        if (!meta_of(c.slot).compare_exchange_strong(meta, meta | XLB_CT_CLAIMED,
                                                     std::memory_order_acquire))
            continue;
        key_of(c.slot).store(0, std::memory_order_relaxed);
        if (c.tail) {
            key_of(c.tail).store(0, std::memory_order_relaxed);
            meta_of(c.tail).store(0, std::memory_order_release);
        }
        meta_of(c.slot).store((meta ^ XLB_CT_VERSION) & (XLB_CT_VERSION | XLB_CT_BUCKET_FLAGS),
                              std::memory_order_release);
        ++released;
    }
    return released;
}

Result<bool> ConntrackTable::erase(const xlb_flow_key& key) const {
    auto at = find(key, vip_id_of(key), nullptr);
    if (!at) return false;
    const __u64 meta = meta_of(slot(at->bucket, at->slot)).load();
    const __u64 head_key = key_of(slot(at->bucket, at->slot)).load();
    bool cleared = false;
    if (!clear_slot(at->bucket, at->slot, meta, head_key, &cleared))
        return fail_on(EBUSY, "delete an entry of", name_, "its slot stayed claimed");
    return cleared;
}

void ConntrackTable::for_each(
    const std::function<void(const xlb_flow_key&, const xlb_ct_value&)>& use) const {
    for_each_entry(
        [&](const xlb_flow_key& key, const xlb_ct_value& value, unsigned) { use(key, value); });
}

void ConntrackTable::for_each_entry(const EntryUse& use) const {
    if (!ready()) return;
    const VipKeys vips = vip_keys();
    std::vector<const xlb_vip_key*> by_id;
    for (const auto& [id, key] : vips) {
        if (id >= by_id.size()) by_id.resize(id + 1, nullptr);
        by_id[id] = &key;
    }
    for (std::uint32_t bucket = 0; bucket < buckets(); ++bucket) {
        for (unsigned s = 0; s < XLB_CT_SLOTS; ++s) {
            Raw raw;
            if (!read(bucket, s, &raw)) continue;
            const __u32 vip = xlb_ct_meta_vip(raw.meta);
            if (vip >= by_id.size() || by_id[vip] == nullptr) {
                // Its VIP is gone from the map: no packet can match it any
                // more, and its destination is unknown. Emptied here.
                bool cleared = false;
                if (vips_fd_ >= 0) clear_slot(bucket, s, raw.meta, raw.head_key, &cleared);
                continue;
            }
            xlb_flow_key key{};
            xlb_ct_key_of(raw.head_key, raw.tail_key, raw.tail_meta, by_id[vip], &key);
            const xlb_ct_value value = value_of(bucket, s, raw, true);
            const __u32 word =
                std::atomic_ref<__u32>(record(bucket, s)->ended).load(std::memory_order_relaxed);
            use(key, value, xlb_ct_ended_flags(word, raw.head_key, raw.meta));
        }
    }
}

std::uint64_t ConntrackTable::count() const {
    if (!ready()) return 0;
    std::uint64_t n = 0;
    for (std::uint32_t bucket = 0; bucket < buckets(); ++bucket)
        for (unsigned s = 0; s < XLB_CT_SLOTS; ++s)
            n += is_head(meta_of(slot(bucket, s)).load(std::memory_order_relaxed));
    return n;
}

Result<std::vector<xlb_flow_key>> ConntrackTable::keys() const {
    std::vector<xlb_flow_key> out;
    for_each([&](const xlb_flow_key& key, const xlb_ct_value&) { out.push_back(key); });
    return out;
}

Result<void> ConntrackTable::clear() const {
    if (!ready()) return {};
    for (std::uint32_t bucket = 0; bucket < buckets(); ++bucket) {
        for (unsigned s = 0; s < XLB_CT_SLOTS; ++s) {
            if (!is_head(meta_of(slot(bucket, s)).load(std::memory_order_relaxed))) continue;
            bool cleared = false;
            if (!clear_slot(bucket, s, 0, 0, &cleared))
                return fail_on(EBUSY, "delete an entry of", name_, "its slot stayed claimed");
        }
        // Empty buckets send nothing on.
        meta_of(slot(bucket, 0)).fetch_and(~XLB_CT_BUCKET_FLAGS, std::memory_order_acq_rel);
    }
    return {};
}

}  // namespace xlb::bpf
