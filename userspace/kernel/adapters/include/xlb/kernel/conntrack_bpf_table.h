// SPDX-License-Identifier: Apache-2.0
// The connection table of a loaded (or pinned) balancer: its sets read and
// written through their mapping (bpf/conntrack_table.h), backends from
// XLB_MAP_BACKENDS (batched lookups), the clock of the entry times. Safe from
// several threads at once; a scan is not a snapshot.
#pragma once

#include <cstddef>
#include <functional>

#include "xlb/bpf/conntrack_table.h"
#include "xlb/bpf/maps.h"
#include "xlb/conntrack/table.h"

namespace xlb::conntrack {

// Entries handed to a scan's callback at once (and backends per batched
// syscall).
inline constexpr std::size_t kBatchSize = 4096;

// Called after a delete that removed entries, so that the data path stops
// using its cached copies of them (bpf::LbProgram::note_conntrack_erased).
using ErasedHook = std::function<void()>;

class BpfTable : public Table {
public:
    // Reads max_entries of the backends once.
    static Result<BpfTable> open(bpf::ConntrackTable conntrack, bpf::ArrayMap<xlb_backend> backends,
                                 ErasedHook erased, std::size_t batch_size = kBatchSize);

    std::uint32_t capacity() const override { return conntrack_.capacity(); }
    Units now() const override;
    Result<void> scan(const std::function<void(std::span<const Entry>)>& batch) const override;
    Result<std::uint64_t> erase(std::span<const xlb_flow_key> keys) const override;
    Result<Backends> backends() const override;

private:
    BpfTable(bpf::ConntrackTable conntrack, bpf::ArrayMap<xlb_backend> backends, ErasedHook erased,
             std::uint32_t backend_slots, std::size_t batch_size)
        : conntrack_(std::move(conntrack)),
          backends_(std::move(backends)),
          erased_(std::move(erased)),
          backend_slots_(backend_slots),
          batch_size_(batch_size) {}

    bpf::ConntrackTable conntrack_;
    bpf::ArrayMap<xlb_backend> backends_;
    ErasedHook erased_;
    std::uint32_t backend_slots_ = 0;
    std::size_t batch_size_ = kBatchSize;
};

}  // namespace xlb::conntrack
