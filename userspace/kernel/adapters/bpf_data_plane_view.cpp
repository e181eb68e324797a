// SPDX-License-Identifier: Apache-2.0
#include "xlb/kernel/bpf_data_plane_view.h"

#include "xlb/bpf/programs.h"
#include "xlb/bpf/ring.h"
#include "xlb/datapath/setup.h"

namespace xlb::api {

xlb::Result<std::vector<std::uint32_t>> BpfDataPlaneView::ring(std::uint32_t vip_id) const {
    return bpf::read_ring(program_.rings().fd(), vip_id);
}

xlb::Result<OutcomeCounts> BpfDataPlaneView::outcomes() const {
    OutcomeCounts out{};
    const auto map = program_.outcomes();
    for (std::uint32_t i = 0; i < XLB_OUT__MAX; ++i) {
        auto per_cpu = map.get_per_cpu(i);
        if (!per_cpu) return std::unexpected(per_cpu.error());
        out[i] = datapath::sum_per_cpu(*per_cpu);
    }
    return out;
}

xlb::Result<xlb_vip_stats> BpfDataPlaneView::vip_stats(std::uint32_t vip_id) const {
    auto per_cpu = program_.vip_stats().get_per_cpu(vip_id);
    if (!per_cpu) return std::unexpected(per_cpu.error());
    return datapath::sum_per_cpu(*per_cpu);
}

xlb::Result<xlb_vip_drops> BpfDataPlaneView::vip_drops(std::uint32_t vip_id) const {
    auto per_cpu = program_.vip_drops().get_per_cpu(vip_id);
    if (!per_cpu) return std::unexpected(per_cpu.error());
    return datapath::sum_per_cpu(*per_cpu);
}

xlb::Result<xlb_vip_cookie_stats> BpfDataPlaneView::vip_cookies(std::uint32_t vip_id) const {
    auto per_cpu = program_.vip_cookies().get_per_cpu(vip_id);
    if (!per_cpu) return std::unexpected(per_cpu.error());
    return datapath::sum_per_cpu(*per_cpu);
}

xlb::Result<xlb_vip_quic_stats> BpfDataPlaneView::vip_quic(std::uint32_t vip_id) const {
    auto per_cpu = program_.vip_quic().get_per_cpu(vip_id);
    if (!per_cpu) return std::unexpected(per_cpu.error());
    return datapath::sum_per_cpu(std::span<const xlb_vip_quic_stats>(*per_cpu));
}

xlb::Result<std::uint64_t> BpfDataPlaneView::vip_hints(std::uint32_t vip_id) const {
    auto per_cpu = program_.vip_hints().get_per_cpu(vip_id);
    if (!per_cpu) return std::unexpected(per_cpu.error());
    return bpf::sum_per_cpu(*per_cpu, [](std::uint64_t v) { return v; });
}

xlb::Result<xlb_backend_stats> BpfDataPlaneView::backend_stats(std::uint32_t backend_id) const {
    auto per_cpu = program_.backend_stats().get_per_cpu(backend_id);
    if (!per_cpu) return std::unexpected(per_cpu.error());
    return datapath::sum_per_cpu(*per_cpu);
}

}  // namespace xlb::api
