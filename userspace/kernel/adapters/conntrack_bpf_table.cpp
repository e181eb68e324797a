// SPDX-License-Identifier: Apache-2.0
#include "xlb/kernel/conntrack_bpf_table.h"

#include <bpf/bpf.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <vector>

#include "xlb/bpf/ct_clock.h"

namespace xlb::conntrack {

namespace {

Result<std::uint32_t> max_entries(int fd, const std::string& name) {
    bpf_map_info info{};
    __u32 length = sizeof(info);
    if (bpf_obj_get_info_by_fd(fd, &info, &length) != 0)
        return fail_on(errno, "read the size of", name);
    return info.max_entries;
}

}  // namespace

Result<BpfTable> BpfTable::open(bpf::ConntrackTable conntrack, bpf::ArrayMap<xlb_backend> backends,
                                ErasedHook erased, std::size_t batch_size) {
    auto slots = max_entries(backends.fd(), backends.name());
    if (!slots) return std::unexpected(slots.error());
    return BpfTable(std::move(conntrack), std::move(backends), std::move(erased), *slots,
                    batch_size == 0 ? kBatchSize : batch_size);
}

Units BpfTable::now() const { return bpf::ct_clock_now(); }

Result<void> BpfTable::scan(const std::function<void(std::span<const Entry>)>& batch) const {
    std::vector<Entry> entries;
    entries.reserve(batch_size_);
    conntrack_.for_each_entry(
        [&](const xlb_flow_key& key, const xlb_ct_value& value, unsigned ended) {
            entries.push_back(Entry{key, value, ended});
            if (entries.size() < batch_size_) return;
            batch(entries);
            entries.clear();
        });
    if (!entries.empty()) batch(entries);
    return {};
}

Result<std::uint64_t> BpfTable::erase(std::span<const xlb_flow_key> keys) const {
    std::uint64_t deleted = 0;
    // Also after a failure part-way: what was deleted stays deleted.
    struct Notify {
        const ErasedHook& hook;
        const std::uint64_t& deleted;
        ~Notify() {
            if (deleted != 0 && hook) hook();
        }
    } notify{erased_, deleted};
    // A key that is gone (replaced by an insert, deleted by a flush
    // meanwhile) is skipped.
    for (const xlb_flow_key& key : keys) {
        auto erased = conntrack_.erase(key);
        if (!erased) return std::unexpected(erased.error());
        deleted += *erased ? 1 : 0;
    }
    return deleted;
}

Result<Backends> BpfTable::backends() const {
    std::vector<std::pair<std::uint32_t, xlb_backend>> entries;
    entries.reserve(backend_slots_);
    auto read = bpf::lookup_batches<std::uint32_t, xlb_backend>(
        backends_.fd(), backends_.name(), batch_size_,
        [&](std::span<const std::uint32_t> keys, std::span<const xlb_backend> values) {
            for (std::size_t i = 0; i < keys.size(); ++i) entries.emplace_back(keys[i], values[i]);
        });
    if (!read) return std::unexpected(read.error());
    return backends_from_map(entries);
}

}  // namespace xlb::conntrack
