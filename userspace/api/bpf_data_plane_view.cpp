// SPDX-License-Identifier: Apache-2.0
#include "xlb/api/data_plane_view.h"
#include "xlb/bpf/programs.h"
#include "xlb/bpf/ring.h"
#include "xlb/datapath/setup.h"

namespace xlb::api {

bpf::Result<std::vector<std::uint32_t>> BpfDataPlaneView::ring(std::uint32_t vip_id) const {
    return bpf::read_ring(program_.rings().fd(), vip_id);
}

bpf::Result<OutcomeCounts> BpfDataPlaneView::outcomes() const {
    OutcomeCounts out{};
    const auto map = program_.outcomes();
    for (std::uint32_t i = 0; i < XLB_OUT__MAX; ++i) {
        auto per_cpu = map.get_per_cpu(i);
        if (!per_cpu) return std::unexpected(per_cpu.error());
        out[i] = datapath::sum_per_cpu(*per_cpu);
    }
    return out;
}

bpf::Result<xlb_vip_stats> BpfDataPlaneView::vip_stats(std::uint32_t vip_id) const {
    auto per_cpu = program_.vip_stats().get_per_cpu(vip_id);
    if (!per_cpu) return std::unexpected(per_cpu.error());
    return datapath::sum_per_cpu(*per_cpu);
}

bpf::Result<xlb_vip_drops> BpfDataPlaneView::vip_drops(std::uint32_t vip_id) const {
    auto per_cpu = program_.vip_drops().get_per_cpu(vip_id);
    if (!per_cpu) return std::unexpected(per_cpu.error());
    xlb_vip_drops sum{};
    for (const xlb_vip_drops& cpu : *per_cpu)
        for (std::size_t r = 0; r < XLB_VIP_DROP_REASONS; ++r) sum.by_reason[r] += cpu.by_reason[r];
    return sum;
}

bpf::Result<std::uint64_t> BpfDataPlaneView::vip_hints(std::uint32_t vip_id) const {
    auto per_cpu = program_.vip_hints().get_per_cpu(vip_id);
    if (!per_cpu) return std::unexpected(per_cpu.error());
    return bpf::sum_per_cpu(*per_cpu, [](std::uint64_t v) { return v; });
}

bpf::Result<xlb_backend_stats> BpfDataPlaneView::backend_stats(std::uint32_t backend_id) const {
    auto per_cpu = program_.backend_stats().get_per_cpu(backend_id);
    if (!per_cpu) return std::unexpected(per_cpu.error());
    return datapath::sum_per_cpu(*per_cpu);
}

const char* outcome_name(std::uint32_t outcome) {
    switch (static_cast<xlb_outcome>(outcome)) {
        case XLB_OUT_TX: return "tx";
        case XLB_OUT_TX_ICMP_ERROR: return "tx_icmp_error";
        case XLB_OUT_TX_ICMP_TOO_BIG: return "tx_icmp_too_big";
        case XLB_OUT_PASS_NO_CONFIG: return "pass_no_config";
        case XLB_OUT_PASS_NOT_IP: return "pass_not_ip";
        case XLB_OUT_PASS_NOT_VIP: return "pass_not_vip";
        case XLB_OUT_PASS_FRAGMENT: return "pass_fragment";
        case XLB_OUT_PASS_IPV6_EXT_LIMIT: return "pass_ipv6_ext_limit";
        case XLB_OUT_DROP_MALFORMED_ETH: return "drop_malformed_eth";
        case XLB_OUT_DROP_MALFORMED_IPV4: return "drop_malformed_ipv4";
        case XLB_OUT_DROP_MALFORMED_IPV6: return "drop_malformed_ipv6";
        case XLB_OUT_DROP_MALFORMED_L4: return "drop_malformed_l4";
        case XLB_OUT_DROP_NO_TABLE: return "drop_no_table";
        case XLB_OUT_DROP_NO_BACKEND: return "drop_no_backend";
        case XLB_OUT_DROP_TOO_BIG: return "drop_too_big";
        case XLB_OUT_DROP_FAMILY: return "drop_family";
        case XLB_OUT_DROP_BAD_BACKEND: return "drop_bad_backend";
        case XLB_OUT_DROP_HEADROOM: return "drop_headroom";
        case XLB_OUT_DROP_IPV4_CSUM: return "drop_ipv4_csum";
        case XLB_OUT_DROP_ICMP_QUOTE: return "drop_icmp_quote";
        case XLB_OUT__MAX: break;
    }
    return "unknown";
}

}  // namespace xlb::api
