// SPDX-License-Identifier: Apache-2.0
#include "xlb/bpf/ring.h"

#include <bpf/bpf.h>
#include <sys/mman.h>

#include <string>
#include <utility>

#include "xlb/abi.h"

namespace xlb::bpf {
namespace {

// Array maps lay values out at round_up(value_size, 8) bytes.
constexpr std::size_t kMappedStride = 8;

std::string vip_name(std::uint32_t vip_id) { return "VIP id " + std::to_string(vip_id); }

}  // namespace

Result<BlankRing> BlankRing::create(std::uint32_t ring_size) {
    if (ring_size > XLB_RING_SIZE_MAX)
        return fail(E2BIG, "ring map of " + std::to_string(ring_size) + " slots",
                    "at most " + std::to_string(XLB_RING_SIZE_MAX));
    const std::uint32_t slots = ring_size + 1;
    LIBBPF_OPTS(bpf_map_create_opts, opts, .map_flags = XLB_RING_MAP_FLAGS);
    int fd = bpf_map_create(BPF_MAP_TYPE_ARRAY, "xlb_ring", sizeof(std::uint32_t),
                            sizeof(std::uint32_t), slots, &opts);
    if (fd < 0) return fail(errno, "create ring map of " + std::to_string(ring_size) + " slots");
    UniqueFd map(fd);
    const std::size_t bytes = static_cast<std::size_t>(slots) * kMappedStride;
    void* memory = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, map.get(), 0);
    if (memory == MAP_FAILED)
        return fail(errno, "map ring map of " + std::to_string(ring_size) + " slots into memory");
    return BlankRing(std::move(map), memory, bytes, ring_size);
}

BlankRing::BlankRing(BlankRing&& other) noexcept
    : map_(std::move(other.map_)),
      memory_(std::exchange(other.memory_, nullptr)),
      bytes_(std::exchange(other.bytes_, 0)),
      ring_size_(other.ring_size_) {}

BlankRing& BlankRing::operator=(BlankRing&& other) noexcept {
    if (this != &other) {
        unmap();
        map_ = std::move(other.map_);
        memory_ = std::exchange(other.memory_, nullptr);
        bytes_ = std::exchange(other.bytes_, 0);
        ring_size_ = other.ring_size_;
    }
    return *this;
}

BlankRing::~BlankRing() { unmap(); }

void BlankRing::unmap() noexcept {
    if (memory_ != nullptr) munmap(memory_, bytes_);
    memory_ = nullptr;
}

Result<PreparedRing> BlankRing::fill(std::uint32_t vip_id,
                                     std::span<const std::uint32_t> backend_ids) && {
    if (memory_ == nullptr) return fail(EBADF, "fill a used ring map for " + vip_name(vip_id));
    if (backend_ids.size() != ring_size_)
        return fail(
            EINVAL,
            "fill a ring map of " + std::to_string(ring_size_) + " slots for " + vip_name(vip_id),
            "the ring has " + std::to_string(backend_ids.size()));
    auto* base = static_cast<std::uint8_t*>(memory_);
    auto store = [base](std::size_t slot, std::uint32_t value) {
        *reinterpret_cast<std::uint32_t*>(base + slot * kMappedStride) = value;
    };
    store(XLB_RING_SIZE_SLOT, ring_size_);
    for (std::size_t i = 0; i < backend_ids.size(); ++i)
        store(XLB_RING_FIRST_SLOT + i, backend_ids[i]);
    // once live, the ring is the kernel's alone
    unmap();
    return PreparedRing{vip_id, std::move(map_)};
}

Result<PreparedRing> prepare_ring(std::uint32_t vip_id,
                                  std::span<const std::uint32_t> backend_ids) {
    if (backend_ids.size() > XLB_RING_SIZE_MAX)
        return fail(
            E2BIG,
            "ring of " + std::to_string(backend_ids.size()) + " slots for " + vip_name(vip_id),
            "at most " + std::to_string(XLB_RING_SIZE_MAX));
    auto blank = BlankRing::create(static_cast<std::uint32_t>(backend_ids.size()));
    if (!blank) return std::unexpected(blank.error());
    return std::move(*blank).fill(vip_id, backend_ids);
}

Result<void> publish_rings(int outer_map_fd, std::span<PreparedRing> rings) {
    if (rings.empty()) return {};
    if (rings.size() == 1) {
        std::uint32_t key = rings[0].vip_id;
        std::uint32_t value = static_cast<std::uint32_t>(rings[0].map.get());
        if (bpf_map_update_elem(outer_map_fd, &key, &value, BPF_ANY) != 0)
            return fail(errno, "publish ring of " + vip_name(key));
        return {};
    }
    std::vector<std::uint32_t> keys, values;
    keys.reserve(rings.size());
    values.reserve(rings.size());
    for (const PreparedRing& ring : rings) {
        keys.push_back(ring.vip_id);
        values.push_back(static_cast<std::uint32_t>(ring.map.get()));
    }
    __u32 count = static_cast<__u32>(rings.size());
    if (bpf_map_update_batch(outer_map_fd, keys.data(), values.data(), &count, nullptr) != 0)
        return fail(errno, "publish " + std::to_string(rings.size()) + " rings (" +
                               std::to_string(count) + " went live)");
    return {};
}

Result<void> publish_ring(int outer_map_fd, std::uint32_t vip_id,
                          std::span<const std::uint32_t> backend_ids) {
    auto ring = prepare_ring(vip_id, backend_ids);
    if (!ring) return std::unexpected(ring.error());
    return publish_rings(outer_map_fd, std::span<PreparedRing>(&*ring, 1));
}

Result<void> unpublish_ring(int outer_map_fd, std::uint32_t vip_id) {
    if (bpf_map_delete_elem(outer_map_fd, &vip_id) != 0 && errno != ENOENT)
        return fail(errno, "remove ring of " + vip_name(vip_id));
    return {};
}

Result<void> keep_as_previous(int outer_map_fd, int previous_map_fd, std::uint32_t vip_id) {
    std::uint32_t inner_id = 0;
    if (bpf_map_lookup_elem(outer_map_fd, &vip_id, &inner_id) != 0) {
        if (errno != ENOENT) return fail(errno, "find ring of " + vip_name(vip_id));
        return unpublish_ring(previous_map_fd, vip_id);
    }
    int fd = bpf_map_get_fd_by_id(inner_id);
    if (fd < 0) {
        // replaced and freed since the lookup: whatever replaced it is live
        if (errno == ENOENT) return keep_as_previous(outer_map_fd, previous_map_fd, vip_id);
        return fail(errno, "open ring map id " + std::to_string(inner_id));
    }
    UniqueFd map(fd);
    std::uint32_t value = static_cast<std::uint32_t>(map.get());
    if (bpf_map_update_elem(previous_map_fd, &vip_id, &value, BPF_ANY) != 0)
        return fail(errno, "keep the previous ring of " + vip_name(vip_id));
    return {};
}

Result<std::vector<std::uint32_t>> read_ring(int outer_map_fd, std::uint32_t vip_id) {
    std::uint32_t inner_id = 0;
    if (bpf_map_lookup_elem(outer_map_fd, &vip_id, &inner_id) != 0)
        return fail(errno, "find ring of " + vip_name(vip_id));
    int fd = bpf_map_get_fd_by_id(inner_id);
    if (fd < 0) return fail(errno, "open ring map id " + std::to_string(inner_id));
    UniqueFd map(fd);
    bpf_map_info info{};
    __u32 info_len = sizeof(info);
    if (bpf_obj_get_info_by_fd(map.get(), &info, &info_len) != 0)
        return fail(errno, "inspect ring map of " + vip_name(vip_id));
    const std::size_t bytes = static_cast<std::size_t>(info.max_entries) * kMappedStride;
    void* mem = mmap(nullptr, bytes, PROT_READ, MAP_SHARED, map.get(), 0);
    if (mem == MAP_FAILED) return fail(errno, "map ring of " + vip_name(vip_id) + " into memory");
    const auto* base = static_cast<const std::uint8_t*>(mem);
    auto load = [base](std::size_t slot) {
        return *reinterpret_cast<const std::uint32_t*>(base + slot * kMappedStride);
    };
    std::uint32_t size = load(XLB_RING_SIZE_SLOT);
    if (size + 1ULL > info.max_entries) {
        munmap(mem, bytes);
        return fail(EINVAL, "ring of " + vip_name(vip_id) + " claims " + std::to_string(size) +
                                " slots in a map of " + std::to_string(info.max_entries));
    }
    std::vector<std::uint32_t> ids(size);
    for (std::uint32_t i = 0; i < size; ++i) ids[i] = load(XLB_RING_FIRST_SLOT + i);
    munmap(mem, bytes);
    return ids;
}

}  // namespace xlb::bpf
