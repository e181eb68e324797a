// SPDX-License-Identifier: Apache-2.0
// Publishing a VIP's Maglev ring. A new ring is written, complete, into a
// fresh inner map before one update of the outer ARRAY_OF_MAPS makes it live,
// so a packet sees the whole old ring or the whole new one, never a mix and
// never an empty one. Layout: slot 0 holds the ring size M, slots 1..M the
// backend ids (see include/xlb/abi.h).
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "xlb/bpf/error.h"
#include "xlb/bpf/fd.h"

namespace xlb::bpf {

// A filled inner map that is not yet referenced by the outer map.
struct PreparedRing {
    std::uint32_t vip_id = 0;
    UniqueFd map;
};

// An inner map for a ring of a given size, created and mapped into memory
// but not filled. Creating one (allocating and zeroing the kernel's array,
// half a millisecond for M = 65537) is the costly part of a publish, so the
// agent keeps a spare made after its last publish, off the latency path, and
// a publish then only writes the slots.
class BlankRing {
public:
    static Result<BlankRing> create(std::uint32_t ring_size);

    BlankRing(BlankRing&& other) noexcept;
    BlankRing& operator=(BlankRing&& other) noexcept;
    BlankRing(const BlankRing&) = delete;
    BlankRing& operator=(const BlankRing&) = delete;
    ~BlankRing();

    std::uint32_t ring_size() const { return ring_size_; }

    // Writes the ring (backend_ids.size() must be ring_size()) and hands the
    // map over; the blank is used up.
    Result<PreparedRing> fill(std::uint32_t vip_id, std::span<const std::uint32_t> backend_ids) &&;

private:
    BlankRing(UniqueFd map, void* memory, std::size_t bytes, std::uint32_t ring_size)
        : map_(std::move(map)), memory_(memory), bytes_(bytes), ring_size_(ring_size) {}
    void unmap() noexcept;

    UniqueFd map_;
    void* memory_ = nullptr;  // the map's array, shared with the kernel
    std::size_t bytes_ = 0;
    std::uint32_t ring_size_ = 0;
};

// Creates an inner map of backend_ids.size() + 1 slots and fills it through a
// shared mapping. An empty span gives the explicit empty ring (M = 0).
Result<PreparedRing> prepare_ring(std::uint32_t vip_id, std::span<const std::uint32_t> backend_ids);

// Makes prepared rings live: one outer-map update (batched when several VIPs
// change together, so they share one RCU grace period).
Result<void> publish_rings(int outer_map_fd, std::span<PreparedRing> rings);

// prepare + publish for one VIP.
Result<void> publish_ring(int outer_map_fd, std::uint32_t vip_id,
                          std::span<const std::uint32_t> backend_ids);

// Removes a VIP's ring: its packets then count as "no table".
Result<void> unpublish_ring(int outer_map_fd, std::uint32_t vip_id);

// Second chance: makes the ring live for a VIP in one outer map (xlb_rings)
// its entry in another (xlb_prev_rings); the same inner map, no copy. No ring
// live: the VIP's entry there goes.
Result<void> keep_as_previous(int outer_map_fd, int previous_map_fd, std::uint32_t vip_id);

// Reads a live ring back (slots 1..M), e.g. to verify or to show it.
Result<std::vector<std::uint32_t>> read_ring(int outer_map_fd, std::uint32_t vip_id);

}  // namespace xlb::bpf
