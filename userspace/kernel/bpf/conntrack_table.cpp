// SPDX-License-Identifier: Apache-2.0
#include "xlb/bpf/conntrack_table.h"

#include <bpf/bpf.h>
#include <sys/mman.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <thread>

#include "xlb/bpf/ct_clock.h"
#include "xlb/ct_set.h"

namespace xlb::bpf {

namespace {

// A writer of the program holds a way for tens of nanoseconds; a way still
// claimed after this many looks (tens of microseconds) belongs to a writer
// that died half way (an agent killed mid-write; release_stuck_ways frees
// it at the next start): give up rather than spin.
constexpr int kClaimAttempts = 100'000;

std::atomic_ref<__u64> seq_of(xlb_ct_set* s, unsigned way) {
    return std::atomic_ref<__u64>(s->seq[way]);
}

bool same_flow(const xlb_flow_key& a, const xlb_flow_key& b) {
    return std::memcmp(&a, &b, sizeof a) == 0;
}

}  // namespace

ConntrackTable::Mapping::~Mapping() {
    if (base != nullptr) munmap(base, length);
}

Result<ConntrackTable> ConntrackTable::map(int fd, std::string name) {
    bpf_map_info info{};
    __u32 len = sizeof info;
    if (bpf_obj_get_info_by_fd(fd, &info, &len) != 0)
        return fail_on(errno, "read the size of", name);
    if (info.type != BPF_MAP_TYPE_ARRAY || info.value_size != sizeof(xlb_ct_set) ||
        info.max_entries < 2)
        return fail_on(EINVAL, "map", name,
                       "not a set-associative connection table (want an array of " +
                           std::to_string(sizeof(xlb_ct_set)) + "-byte sets)");
    auto mapping = std::make_shared<Mapping>();
    mapping->length = std::size_t{info.max_entries} * sizeof(xlb_ct_set);
    void* base = mmap(nullptr, mapping->length, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (base == MAP_FAILED) return fail_on(errno, "map into memory", name);
    mapping->base = base;
    ConntrackTable table;
    table.mapping_ = std::move(mapping);
    table.fd_ = fd;
    table.name_ = std::move(name);
    table.elements_ = info.max_entries;
    return table;
}

Result<ConntrackTable> ConntrackTable::open_pinned(const std::string& path) {
    UniqueFd fd(bpf_obj_get(path.c_str()));
    if (!fd) return fail_on(errno, "open the pinned connection table", path);
    auto table = map(fd.get(), path);
    if (!table) return table;
    table->mapping_->owned = std::move(fd);
    return table;
}

xlb_ct_set* ConntrackTable::set(std::uint32_t index) const {
    return static_cast<xlb_ct_set*>(mapping_->base) + index;
}

xlb_ct_header ConntrackTable::header() const {
    xlb_ct_header h{};
    if (!mapping_) return h;
    auto* raw = reinterpret_cast<xlb_ct_header*>(set(0));
    h.magic = std::atomic_ref<std::uint32_t>(raw->magic).load(std::memory_order_acquire);
    h.seed = raw->seed;
    h.sets = raw->sets;
    h.ways = raw->ways;
    return h;
}

void ConntrackTable::format(std::uint32_t seed) const {
    auto* raw = reinterpret_cast<xlb_ct_header*>(set(0));
    std::atomic_ref<std::uint32_t>(raw->magic).store(0, std::memory_order_release);
    std::memset(static_cast<void*>(set(1)), 0, std::size_t{sets()} * sizeof(xlb_ct_set));
    raw->seed = seed;
    raw->sets = sets();
    raw->ways = XLB_CT_WAYS;
    std::atomic_ref<std::uint32_t>(raw->magic).store(XLB_CT_MAGIC, std::memory_order_release);
}

int ConntrackTable::find(xlb_ct_set* s, const xlb_flow_key& key, xlb_ct_value* value) const {
    for (unsigned way = 0; way < XLB_CT_WAYS; ++way) {
        for (int attempt = 0; attempt < kClaimAttempts; ++attempt) {
            const __u64 before = seq_of(s, way).load(std::memory_order_acquire);
            if (before & 1) continue;
            const bool same = same_flow(s->key[way], key);
            xlb_ct_value copy = s->value[way];
            std::atomic_thread_fence(std::memory_order_acquire);
            if (seq_of(s, way).load(std::memory_order_relaxed) != before) continue;
            if (!same) break;
            if (value) *value = copy;
            return static_cast<int>(way);
        }
    }
    return -1;
}

bool ConntrackTable::write(xlb_ct_set* s, unsigned way, const xlb_flow_key& key,
                           const xlb_ct_value& value) const {
    for (int attempt = 0; attempt < kClaimAttempts; ++attempt) {
        __u64 seq = seq_of(s, way).load(std::memory_order_relaxed);
        if (seq & 1) continue;
        if (!seq_of(s, way).compare_exchange_weak(seq, seq + 1, std::memory_order_acquire))
            continue;
        s->key[way] = key;
        s->value[way] = value;
        seq_of(s, way).store(seq + 2, std::memory_order_release);
        return true;
    }
    return false;
}

Result<void> ConntrackTable::write_or_fail(xlb_ct_set* s, unsigned way, const xlb_flow_key& key,
                                           const xlb_ct_value& value) const {
    if (write(s, way, key, value)) return {};
    return fail_on(EBUSY, "write an entry of", name_, "its way stayed claimed");
}

xlb_ct_set* ConntrackTable::set_of(const xlb_flow_key& key) const {
    const xlb_ct_header h = header();
    if (h.magic != XLB_CT_MAGIC || h.sets != sets() || h.ways != XLB_CT_WAYS) return nullptr;
    return set(xlb_ct_set_index(&key, h.seed, h.sets));
}

bool ConntrackTable::ready() const {
    const xlb_ct_header h = header();
    return h.magic == XLB_CT_MAGIC && h.sets == sets() && h.ways == XLB_CT_WAYS;
}

Result<std::optional<xlb_ct_value>> ConntrackTable::get(const xlb_flow_key& key) const {
    xlb_ct_set* s = set_of(key);
    xlb_ct_value value{};
    if (!s || find(s, key, &value) < 0) return std::optional<xlb_ct_value>{};
    return std::optional<xlb_ct_value>{value};
}

Result<ConntrackTable::Put> ConntrackTable::put(const xlb_flow_key& key,
                                                const xlb_ct_value& value) const {
    if (key.family == 0)
        return fail_on(EINVAL, "write an entry of", name_, "the key has no family");
    xlb_ct_set* s = set_of(key);
    if (!s) return fail_on(ENODATA, "write an entry of", name_, "the table has no header");
    if (int way = find(s, key, nullptr); way >= 0) {
        if (auto ok = write_or_fail(s, static_cast<unsigned>(way), key, value); !ok)
            return std::unexpected(ok.error());
        return Put::kUpdated;
    }
    const unsigned victim = xlb_ct_victim(s, ct_clock_now());
    const bool empty = s->key[victim].family == 0;
    if (auto ok = write_or_fail(s, victim, key, value); !ok) return std::unexpected(ok.error());
    return empty ? Put::kAdded : Put::kReplacedOther;
}

std::uint64_t ConntrackTable::release_stuck_ways(std::chrono::microseconds grace) const {
    struct Claimed {
        xlb_ct_set* set;
        unsigned way;
        __u64 seq;
    };
    std::vector<Claimed> claimed;
    for (std::uint32_t index = 1; index <= sets(); ++index) {
        xlb_ct_set* s = set(index);
        for (unsigned way = 0; way < XLB_CT_WAYS; ++way) {
            const __u64 seq = seq_of(s, way).load(std::memory_order_acquire);
            if (seq & 1) claimed.push_back({s, way, seq});
        }
    }
    if (claimed.empty()) return 0;
    std::this_thread::sleep_for(grace);
    std::uint64_t released = 0;
    for (const Claimed& c : claimed) {
        __u64 seq = c.seq;
        // Still the same odd value: nobody finished the write. Taken over
        // (odd still, readers keep off), emptied, released even.
        if (!seq_of(c.set, c.way).compare_exchange_strong(seq, seq + 2, std::memory_order_acquire))
            continue;
        c.set->key[c.way] = xlb_flow_key{};
        c.set->value[c.way] = xlb_ct_value{};
        seq_of(c.set, c.way).store(seq + 3, std::memory_order_release);
        ++released;
    }
    return released;
}

Result<bool> ConntrackTable::erase(const xlb_flow_key& key) const {
    xlb_ct_set* s = set_of(key);
    if (!s) return false;
    const int way = find(s, key, nullptr);
    if (way < 0) return false;
    // Claimed, the key is checked again: the program may have replaced it.
    for (int attempt = 0; attempt < kClaimAttempts; ++attempt) {
        __u64 seq = seq_of(s, way).load(std::memory_order_relaxed);
        if (seq & 1) continue;
        if (!seq_of(s, way).compare_exchange_weak(seq, seq + 1, std::memory_order_acquire))
            continue;
        const bool same = same_flow(s->key[way], key);
        if (same) {
            s->key[way] = xlb_flow_key{};
            s->value[way] = xlb_ct_value{};
        }
        seq_of(s, way).store(seq + 2, std::memory_order_release);
        return same;
    }
    return fail_on(EBUSY, "delete an entry of", name_, "its way stayed claimed");
}

void ConntrackTable::for_each(
    const std::function<void(const xlb_flow_key&, const xlb_ct_value&)>& use) const {
    for (std::uint32_t index = 1; index <= sets(); ++index) {
        xlb_ct_set* s = set(index);
        for (unsigned way = 0; way < XLB_CT_WAYS; ++way) {
            const __u64 before = seq_of(s, way).load(std::memory_order_acquire);
            if (before & 1) continue;
            const xlb_flow_key key = s->key[way];
            if (key.family == 0) continue;
            const xlb_ct_value value = s->value[way];
            std::atomic_thread_fence(std::memory_order_acquire);
            if (seq_of(s, way).load(std::memory_order_relaxed) != before) continue;
            use(key, value);
        }
    }
}

std::uint64_t ConntrackTable::count() const {
    std::uint64_t n = 0;
    for (std::uint32_t index = 1; index <= sets(); ++index) {
        const xlb_ct_set* s = set(index);
        for (unsigned way = 0; way < XLB_CT_WAYS; ++way) n += s->key[way].family != 0;
    }
    return n;
}

Result<std::vector<xlb_flow_key>> ConntrackTable::keys() const {
    std::vector<xlb_flow_key> out;
    for_each([&](const xlb_flow_key& key, const xlb_ct_value&) { out.push_back(key); });
    return out;
}

Result<void> ConntrackTable::clear() const {
    for (std::uint32_t index = 1; index <= sets(); ++index) {
        xlb_ct_set* s = set(index);
        for (unsigned way = 0; way < XLB_CT_WAYS; ++way) {
            if (s->key[way].family == 0) continue;
            if (auto ok = write_or_fail(s, way, xlb_flow_key{}, xlb_ct_value{}); !ok) return ok;
        }
    }
    return {};
}

}  // namespace xlb::bpf
