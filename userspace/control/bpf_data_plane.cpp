// SPDX-License-Identifier: Apache-2.0
#include "xlb/bpf/programs.h"
#include "xlb/bpf/ring.h"
#include "xlb/control/data_plane.h"

namespace xlb::control {

bpf::Result<void> BpfDataPlane::write_config(const xlb_config& cfg) {
    return program_.config().put(0, cfg);
}

bpf::Result<void> BpfDataPlane::put_vip(const xlb_vip_key& key, const xlb_vip_value& value) {
    return program_.vips().put(key, value);
}

bpf::Result<void> BpfDataPlane::remove_vip(const xlb_vip_key& key) {
    auto erased = program_.vips().erase(key);
    if (!erased) return std::unexpected(erased.error());
    return {};
}

bpf::Result<void> BpfDataPlane::put_backend(std::uint32_t id, const xlb_backend& backend) {
    return program_.backends().put(id, backend);
}

bpf::Result<PublishTiming> BpfDataPlane::publish(const std::vector<RingUpdate>& rings) {
    std::vector<bpf::PreparedRing> prepared;
    prepared.reserve(rings.size());
    for (const RingUpdate& r : rings) {
        auto p = bpf::prepare_ring(r.vip_id, r.backend_ids);
        if (!p) return std::unexpected(p.error());
        prepared.push_back(std::move(*p));
    }
    PublishTiming timing;
    timing.issued = std::chrono::steady_clock::now();
    auto ok = bpf::publish_rings(program_.rings().fd(), prepared);
    timing.returned = std::chrono::steady_clock::now();
    if (!ok) return std::unexpected(ok.error());
    return timing;
}

bpf::Result<void> BpfDataPlane::remove_ring(std::uint32_t vip_id) {
    return bpf::unpublish_ring(program_.rings().fd(), vip_id);
}

bpf::Result<std::optional<std::vector<std::uint32_t>>> BpfDataPlane::live_ring(std::uint32_t vip_id) {
    auto ring = bpf::read_ring(program_.rings().fd(), vip_id);
    if (!ring) {
        if (ring.error().code == ENOENT) return std::optional<std::vector<std::uint32_t>>{};
        return std::unexpected(ring.error());
    }
    return std::optional<std::vector<std::uint32_t>>{std::move(*ring)};
}

}  // namespace xlb::control
