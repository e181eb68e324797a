// SPDX-License-Identifier: Apache-2.0
#include "conntrack_load.h"

#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <sys/mman.h>

#include <algorithm>
#include <atomic>
#include <iterator>
#include <numeric>
#include <optional>
#include <vector>

#include "pin_session.h"
#include "xlb/bpf/ct_clock.h"
#include "xlb/names.h"

namespace xlb::bpf {

namespace {

// Indexed by ConntrackLoad::Outcome, in its order.
constexpr std::string_view kOutcomes[] = {"created", "reused",   "kept_pinned_size",
                                          "resized", "migrated", "old_unreadable"};
static_assert(std::size(kOutcomes) ==
              static_cast<std::size_t>(ConntrackLoad::Outcome::kOldUnreadable) + 1);

}  // namespace

const char* to_string(ConntrackLoad::Outcome outcome) { return name_at(outcome, kOutcomes); }

bool ConntrackLoad::warn() const {
    return outcome == Outcome::kKeptPinnedSize || outcome == Outcome::kOldUnreadable ||
           dropped > 0 || released_ways > 0;
}

namespace detail {
namespace {

using Outcome = ConntrackLoad::Outcome;

// Entries per batch call; a hash bucket holding more than this makes the
// kernel answer ENOSPC, and the batch grows.
constexpr std::uint32_t kBatch = 4096;

std::string entries(std::uint64_t n) {
    return std::to_string(n) + (n == 1 ? " entry" : " entries");
}

// The pinned object at path, or an empty fd when nothing is pinned there.
Result<UniqueFd> open_pin(const std::string& path, const std::string& what) {
    int fd = bpf_obj_get(path.c_str());
    if (fd >= 0) return UniqueFd(fd);
    if (errno == ENOENT) return UniqueFd();
    return fail_on(errno, "open pinned " + what, path);
}

Result<bpf_map_info> map_info(int fd, const std::string& what, const std::string& path) {
    bpf_map_info info{};
    __u32 len = sizeof info;
    if (bpf_obj_get_info_by_fd(fd, &info, &len) != 0) return fail_on(errno, "read " + what, path);
    return info;
}

// The connection-table layouts an agent upgrades from, newest first.
struct OldLayout {
    int layout;
    const char* name;
    std::uint32_t value_size;
};
constexpr OldLayout kOldLayouts[] = {
    {4, XLB_MAP_CONNTRACK_V4, sizeof(xlb_ct_set)},
    {3, XLB_MAP_CONNTRACK_V3, sizeof(xlb_ct_value)},
    {2, XLB_MAP_CONNTRACK_V2, sizeof(xlb_ct_value_v2)},
    {1, XLB_MAP_CONNTRACK_V1, sizeof(xlb_ct_value_v1)},
};

const OldLayout& old_layout(int layout) {
    for (const OldLayout& l : kOldLayouts)
        if (l.layout == layout) return l;
    return kOldLayouts[0];
}

std::string layout_name(int layout) { return "layout-" + std::to_string(layout); }

// Why a pinned table of an older layout cannot be read as one; empty when it can.
std::string old_layout_problem(int fd, const std::string& path, const OldLayout& layout) {
    auto info = map_info(fd, "the " + layout_name(layout.layout) + " connection table", path);
    if (!info) return "not a map: " + info.error().message();
    if (layout.layout == 4) {
        if (info->type == BPF_MAP_TYPE_ARRAY && info->value_size == sizeof(xlb_ct_set) &&
            info->max_entries >= 2 && (info->map_flags & BPF_F_MMAPABLE))
            return {};
        return "type " + std::to_string(info->type) + ", value size " +
               std::to_string(info->value_size) + "; want a mapped array of " +
               std::to_string(sizeof(xlb_ct_set)) + "-byte sets";
    }
    const bool hash = info->type == BPF_MAP_TYPE_LRU_HASH || info->type == BPF_MAP_TYPE_HASH;
    if (hash && info->key_size == sizeof(xlb_flow_key) && info->value_size == layout.value_size)
        return {};
    const char* type = libbpf_bpf_map_type_str(static_cast<bpf_map_type>(info->type));
    return std::string(type ? type : "unknown type") + ", key size " +
           std::to_string(info->key_size) + ", value size " + std::to_string(info->value_size) +
           "; want a hash of " + std::to_string(sizeof(xlb_flow_key)) + "-byte keys and " +
           std::to_string(layout.value_size) + "-byte values";
}

template <typename V>
struct Entries {
    std::vector<xlb_flow_key> keys;
    std::vector<V> values;
};

// Every entry of a hash map whose values are V, in batches. Concurrent
// updates (an attached program) may be missed or seen twice; a restart's copy
// accepts that.
template <typename V>
Result<Entries<V>> read_all(int fd, const std::string& what, const std::string& object) {
    Entries<V> out;
    auto read = lookup_batches<xlb_flow_key, V>(
        fd, object.empty() ? what : what + " " + object, kBatch,
        [&](std::span<const xlb_flow_key> keys, std::span<const V> values) {
            out.keys.insert(out.keys.end(), keys.begin(), keys.end());
            out.values.insert(out.values.end(), values.begin(), values.end());
        });
    if (!read) return std::unexpected(read.error());
    return out;
}

std::uint64_t capacity_of(std::uint32_t elements) { return XLB_CT_CAPACITY(elements); }

// Every entry of a layout-4 table (abi.h, struct xlb_ct_set), read through a
// mapping of it: a way whose seq is odd, or changed while it was read, is
// being rewritten and is skipped.
Result<void> read_layout4(int fd, std::uint32_t elements, const std::string& path,
                          std::vector<xlb_flow_key>& keys, std::vector<xlb_ct_value>& values) {
    const std::size_t length = std::size_t{elements} * sizeof(xlb_ct_set);
    void* base = mmap(nullptr, length, PROT_READ, MAP_SHARED, fd, 0);
    if (base == MAP_FAILED) return fail_on(errno, "map into memory", path);
    const auto* sets = static_cast<const xlb_ct_set*>(base);
    const auto* header = reinterpret_cast<const xlb_ct_header*>(&sets[0]);
    if (header->magic == XLB_CT_MAGIC && header->ways == XLB_CT_WAYS) {
        for (std::uint32_t index = 1; index < elements; ++index) {
            const xlb_ct_set& set = sets[index];
            for (unsigned way = 0; way < XLB_CT_WAYS; ++way) {
                auto seq = std::atomic_ref<const __u64>(set.seq[way]);
                const __u64 before = seq.load(std::memory_order_acquire);
                if (before & 1) continue;
                const xlb_flow_key key = set.key[way];
                const xlb_ct_value value = set.value[way];
                std::atomic_thread_fence(std::memory_order_acquire);
                if (seq.load(std::memory_order_relaxed) != before || key.family == 0) continue;
                keys.push_back(key);
                values.push_back(value);
            }
        }
    }
    munmap(base, length);
    return {};
}

}  // namespace

Result<ConntrackLoader> ConntrackLoader::plan(const std::string& dir, bpf_map* map,
                                              ConntrackResize resize) {
    ConntrackLoader loader;
    ConntrackLoad& r = loader.result_;
    r.requested = r.capacity = static_cast<std::uint32_t>(capacity_of(bpf_map__max_entries(map)));
    r.outcome = Outcome::kCreated;
    r.message = "new connection table of " + std::to_string(r.capacity) + " entries";
    if (dir.empty()) return loader;

    // Pins of older layouts, newest first: the newest is migrated, all are
    // removed. An unopenable one (not even ENOENT) is still ours to remove.
    std::optional<Result<UniqueFd>> newest_old;
    for (const OldLayout& layout : kOldLayouts) {
        const std::string path = join(dir, layout.name);
        auto old = open_pin(path, layout_name(layout.layout) + " connection table");
        if (old && !*old) continue;
        loader.old_paths_.push_back(path);
        if (!newest_old) {
            loader.source_layout_ = layout.layout;
            loader.source_path_ = path;
            newest_old.emplace(std::move(old));
        }
    }

    const std::string current_path = join(dir, XLB_MAP_CONNTRACK);
    auto current = open_pin(current_path, "connection table");
    if (!current) return std::unexpected(current.error());
    if (*current) {
        // A pinned table of the current layout supersedes older ones: their
        // pins are what an interrupted upgrade left after pinning the new table.
        loader.source_layout_ = 0;
        std::string other = incompatibility(map, current->get(), /*max_entries=*/false);
        if (!other.empty()) {
            // PinSession::prepare replaces it and reports why.
            r.message = "new connection table of " + std::to_string(r.capacity) +
                        " entries: the pinned one is incompatible (" + other + ")";
            return loader;
        }
        auto info = map_info(current->get(), "the pinned connection table", current_path);
        if (!info) return std::unexpected(info.error());
        const std::uint32_t pinned_elements = info->max_entries;
        const auto pinned = static_cast<std::uint32_t>(capacity_of(pinned_elements));
        if (pinned_elements == bpf_map__max_entries(map)) {
            r.outcome = Outcome::kReused;
            r.message =
                "reused the pinned connection table of " + std::to_string(pinned) + " entries";
        } else if (resize == ConntrackResize::kRefuse) {
            if (int rc = bpf_map__set_max_entries(map, pinned_elements); rc != 0)
                return fail_on(rc,
                               "size the connection table to the pinned one's " +
                                   std::to_string(pinned) + " entries",
                               current_path);
            r.outcome = Outcome::kKeptPinnedSize;
            r.capacity = pinned;
            r.message = "kept the pinned connection table of " + std::to_string(pinned) +
                        " entries, not the " + std::to_string(r.requested) +
                        " requested (replacing it copies its entries into a new table)";
        } else {
            r.outcome = Outcome::kResized;
            loader.source_ = Source::kResize;
            loader.source_fd_ = std::move(*current);
            loader.source_path_ = current_path;
            loader.old_capacity_ = pinned;
            r.message = "resizing the connection table from " + std::to_string(pinned) + " to " +
                        std::to_string(r.requested) + " entries";
        }
        return loader;
    }

    if (!newest_old) return loader;
    loader.source_ = Source::kOldLayout;
    r.old_layout = loader.source_layout_;
    if (!*newest_old) {
        loader.old_problem_ = newest_old->error().message();
    } else {
        loader.source_fd_ = std::move(**newest_old);
        loader.old_problem_ = old_layout_problem(loader.source_fd_.get(), loader.source_path_,
                                                 old_layout(loader.source_layout_));
    }
    r.outcome = loader.old_problem_.empty() ? Outcome::kMigrated : Outcome::kOldUnreadable;
    return loader;
}

Result<void> ConntrackLoader::fill(const ConntrackTable& into) {
    ConntrackLoad& r = result_;
    const std::string table = "connection table " XLB_MAP_CONNTRACK;
    std::vector<xlb_flow_key> keys;
    std::vector<xlb_ct_value> values;
    const std::uint32_t now = ct_clock_now();

    if (source_ == Source::kNone) return {};
    if (source_ == Source::kResize) {
        auto old = ConntrackTable::map(source_fd_.get(), "the pinned " + table, into.vips_fd());
        if (!old) return std::unexpected(old.error());
        if (old->ready())
            old->for_each([&](const xlb_flow_key& key, const xlb_ct_value& value) {
                keys.push_back(key);
                values.push_back(value);
            });
    } else if (old_problem_.empty()) {
        // An older layout's values, converted; a read that fails makes the
        // table unreadable (below).
        auto copy = [&]<typename V>(auto convert) {
            auto old = read_all<V>(source_fd_.get(),
                                   "the " + layout_name(source_layout_) + " connection table",
                                   source_path_);
            if (!old) {
                old_problem_ = old.error().message();
                return;
            }
            keys = std::move(old->keys);
            values.reserve(old->values.size());
            for (const V& v : old->values) values.push_back(convert(v));
        };
        if (source_layout_ == 4) {
            auto info = map_info(source_fd_.get(), "the layout-4 connection table", source_path_);
            if (!info) {
                old_problem_ = info.error().message();
            } else if (auto read = read_layout4(source_fd_.get(), info->max_entries, source_path_,
                                                keys, values);
                       !read) {
                old_problem_ = read.error().message();
            }
        } else if (source_layout_ == 3) {
            copy.operator()<xlb_ct_value>([](const xlb_ct_value& v) { return v; });
        } else if (source_layout_ == 2) {
            // No VIP epoch: each flow's next packet takes the full path once.
            copy.operator()<xlb_ct_value_v2>([](const xlb_ct_value_v2& v) {
                return xlb_ct_value{.backend_id = v.backend_id,
                                    .generation = v.generation,
                                    .created = v.created,
                                    .last_seen = v.last_seen};
            });
        } else {
            // Ages are unknown: as if every flow had just been seen.
            copy.operator()<xlb_ct_value_v1>([now](const xlb_ct_value_v1& v) {
                return xlb_ct_value{.backend_id = v.backend_id,
                                    .generation = v.generation,
                                    .created = now,
                                    .last_seen = now};
            });
        }
    }
    if (source_ == Source::kOldLayout && !old_problem_.empty()) {
        r.outcome = Outcome::kOldUnreadable;
        r.message = "could not read the " + layout_name(source_layout_) + " connection table at " +
                    source_path_ + " (" + old_problem_ + "): starting with an empty table of " +
                    std::to_string(r.capacity) + " entries; removed the old pin";
        source_fd_.reset();
        return {};
    }

    // Inserted oldest first: where a set overflows, a later (more recently
    // seen) entry replaces the one seen longest ago, as the program's
    // inserts do.
    std::vector<std::size_t> order(keys.size());
    std::iota(order.begin(), order.end(), std::size_t{0});
    std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
        return now - values[a].last_seen > now - values[b].last_seen;
    });
    // A layout-5 slot names its flow by its VIP (abi.h): the VIP the
    // balancer matches the flow to (put() looks it up); an entry of none
    // cannot be kept.
    std::uint64_t without_vip = 0;
    for (std::size_t i : order) {
        if (keys[i].family == 0) continue;  // not a flow: nothing to copy
        xlb_ct_value value = values[i];
        if (!into.has_vip(keys[i])) {
            ++without_vip;
            continue;
        }
        if (auto put = into.put(keys[i], value); !put)
            return std::unexpected(put.error().add_context("copy entries into the new " + table));
    }
    // Buckets that overflowed kept their most recent entries: count what is in.
    r.copied = into.count();
    r.dropped = keys.size() > r.copied ? keys.size() - r.copied : 0;
    source_fd_.reset();

    std::string dropped;
    if (r.dropped > without_vip)
        dropped = ", dropped " + entries(r.dropped - without_vip) + " that did not fit";
    if (without_vip > 0) dropped += ", dropped " + entries(without_vip) + " of no configured VIP";
    if (source_ == Source::kResize) {
        r.message = "resized the connection table from " + std::to_string(old_capacity_) + " to " +
                    std::to_string(r.capacity) + " entries: copied " + entries(r.copied) + dropped;
    } else {
        r.message = "upgraded the connection table from layout " + std::to_string(source_layout_) +
                    " (" + old_layout(source_layout_).name + "): copied " + entries(r.copied) +
                    " into a new table of " + std::to_string(r.capacity) + " entries" + dropped +
                    "; removed the old pin";
    }
    return {};
}

Result<void> ConntrackLoader::finish() {
    bool leftover = false;
    for (const std::string& path : old_paths_) {
        if (::unlink(path.c_str()) != 0 && errno != ENOENT)
            return fail_on(errno, "unpin an older connection table", path);
        leftover = leftover || source_ != Source::kOldLayout || path != source_path_;
    }
    if (leftover) result_.message += "; removed a leftover table of an older layout";
    old_paths_.clear();
    return {};
}

}  // namespace detail
}  // namespace xlb::bpf
