// SPDX-License-Identifier: Apache-2.0
#include "xlb/conntrack/bpf_table.h"

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

Result<BpfTable> BpfTable::open(bpf::HashMap<xlb_flow_key, xlb_ct_value> conntrack,
                                bpf::ArrayMap<xlb_backend> backends, ErasedHook erased,
                                std::size_t batch_size) {
    auto capacity = max_entries(conntrack.fd(), conntrack.name());
    if (!capacity) return std::unexpected(capacity.error());
    auto slots = max_entries(backends.fd(), backends.name());
    if (!slots) return std::unexpected(slots.error());
    return BpfTable(std::move(conntrack), std::move(backends), std::move(erased), *capacity, *slots,
                    batch_size == 0 ? kBatchSize : batch_size);
}

Units BpfTable::now() const { return bpf::ct_clock_now(); }

Result<void> BpfTable::scan(const std::function<void(std::span<const Entry>)>& batch) const {
    std::vector<Entry> entries;
    entries.reserve(batch_size_);
    return bpf::lookup_batches<xlb_flow_key, xlb_ct_value>(
        conntrack_.fd(), conntrack_.name(), batch_size_,
        [&](std::span<const xlb_flow_key> keys, std::span<const xlb_ct_value> values) {
            entries.clear();
            for (std::size_t i = 0; i < keys.size(); ++i)
                entries.push_back(Entry{keys[i], values[i]});
            if (!entries.empty()) batch(entries);
        });
}

Result<std::uint64_t> BpfTable::erase(std::span<const xlb_flow_key> keys) const {
    std::uint64_t deleted = 0;
    std::size_t at = 0;
    // Also after a failure part-way: what was deleted stays deleted.
    struct Notify {
        const ErasedHook& hook;
        const std::uint64_t& deleted;
        ~Notify() {
            if (deleted != 0 && hook) hook();
        }
    } notify{erased_, deleted};
    while (at < keys.size()) {
        const std::size_t n = std::min(batch_size_, keys.size() - at);
        __u32 count = static_cast<__u32>(n);
        int rc = bpf_map_delete_batch(conntrack_.fd(), keys.data() + at, &count, nullptr);
        const int err = rc == 0 ? 0 : errno;
        deleted += count;
        if (rc == 0) {
            at += n;
            continue;
        }
        // The kernel stops at a key that is gone (evicted, expired by the
        // data path's own reuse, deleted by a flush meanwhile): skip it.
        if (err != ENOENT) return fail_on(err, "delete entries (batched) from", conntrack_.name());
        at += count + 1;
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
