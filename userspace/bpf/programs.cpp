// SPDX-License-Identifier: Apache-2.0
#include "xlb/bpf/programs.h"

#include <bpf/libbpf.h>

#include "xlb_decap.skel.h"
#include "xlb_lb.skel.h"

namespace xlb::bpf {
namespace {

std::string load_hint(int code) {
    if (code == EPERM)
        return "loading BPF needs root or CAP_BPF + CAP_NET_ADMIN (and CAP_PERFMON)";
    return {};
}

Result<void> resize(bpf_map* map, std::uint32_t entries) {
    if (int rc = bpf_map__set_max_entries(map, entries); rc != 0)
        return fail(rc, std::string("size map ") + bpf_map__name(map) + " to " +
                            std::to_string(entries) + " entries");
    return {};
}

}  // namespace

void LbProgram::SkeletonDeleter::operator()(xlb_lb* skel) const { xlb_lb__destroy(skel); }

LbProgram::LbProgram(std::unique_ptr<xlb_lb, SkeletonDeleter> skel, LbMapSizes sizes)
    : skel_(std::move(skel)), sizes_(sizes) {}
LbProgram::LbProgram(LbProgram&&) noexcept = default;
LbProgram& LbProgram::operator=(LbProgram&&) noexcept = default;
LbProgram::~LbProgram() = default;

Result<LbProgram> LbProgram::load(const LbMapSizes& sizes) {
    if (sizes.max_vips == 0 || sizes.max_backends == 0 || sizes.conntrack_entries == 0)
        return fail(EINVAL, "size the balancer's maps", "every map needs at least one entry");
    std::unique_ptr<xlb_lb, SkeletonDeleter> skel(xlb_lb__open());
    if (!skel) return fail(errno, "open the xlb_lb BPF object");
    auto& maps = skel->maps;
    for (auto [map, entries] :
         {std::pair{maps.xlb_vips, sizes.max_vips}, std::pair{maps.xlb_rings, sizes.max_vips},
          std::pair{maps.xlb_vip_stats, sizes.max_vips},
          std::pair{maps.xlb_backends, sizes.max_backends},
          std::pair{maps.xlb_backend_stats, sizes.max_backends},
          std::pair{maps.xlb_conntrack, sizes.conntrack_entries}}) {
        if (auto ok = resize(map, entries); !ok) return std::unexpected(ok.error());
    }
    if (int rc = xlb_lb__load(skel.get()); rc != 0)
        return fail(rc, "load the xlb_lb BPF program", load_hint(-rc));
    return LbProgram(std::move(skel), sizes);
}

int LbProgram::prog_fd() const { return bpf_program__fd(skel_->progs.xlb_lb); }

ArrayMap<xlb_config> LbProgram::config() const {
    return {bpf_map__fd(skel_->maps.xlb_config), XLB_MAP_CONFIG};
}
HashMap<xlb_vip_key, xlb_vip_value> LbProgram::vips() const {
    return {bpf_map__fd(skel_->maps.xlb_vips), XLB_MAP_VIPS};
}
MapView LbProgram::rings() const { return {bpf_map__fd(skel_->maps.xlb_rings), XLB_MAP_RINGS}; }
ArrayMap<xlb_backend> LbProgram::backends() const {
    return {bpf_map__fd(skel_->maps.xlb_backends), XLB_MAP_BACKENDS};
}
HashMap<xlb_flow_key, xlb_ct_value> LbProgram::conntrack() const {
    return {bpf_map__fd(skel_->maps.xlb_conntrack), XLB_MAP_CONNTRACK};
}
PerCpuArrayMap<std::uint64_t> LbProgram::outcomes() const {
    return {bpf_map__fd(skel_->maps.xlb_stats), XLB_MAP_STATS};
}
PerCpuArrayMap<xlb_vip_stats> LbProgram::vip_stats() const {
    return {bpf_map__fd(skel_->maps.xlb_vip_stats), XLB_MAP_VIP_STATS};
}
PerCpuArrayMap<xlb_backend_stats> LbProgram::backend_stats() const {
    return {bpf_map__fd(skel_->maps.xlb_backend_stats), XLB_MAP_BACKEND_STATS};
}

void DecapProgram::SkeletonDeleter::operator()(xlb_decap* skel) const {
    xlb_decap__destroy(skel);
}

DecapProgram::DecapProgram(std::unique_ptr<xlb_decap, SkeletonDeleter> skel)
    : skel_(std::move(skel)) {}
DecapProgram::DecapProgram(DecapProgram&&) noexcept = default;
DecapProgram& DecapProgram::operator=(DecapProgram&&) noexcept = default;
DecapProgram::~DecapProgram() = default;

Result<DecapProgram> DecapProgram::load() {
    std::unique_ptr<xlb_decap, SkeletonDeleter> skel(xlb_decap__open());
    if (!skel) return fail(errno, "open the xlb_decap BPF object");
    if (int rc = xlb_decap__load(skel.get()); rc != 0)
        return fail(rc, "load the xlb_decap BPF program", load_hint(-rc));
    return DecapProgram(std::move(skel));
}

int DecapProgram::prog_fd() const { return bpf_program__fd(skel_->progs.xlb_decap); }

HashMap<xlb_decap_addr, std::uint8_t> DecapProgram::local_addresses() const {
    return {bpf_map__fd(skel_->maps.xlb_decap_addrs), XLB_MAP_DECAP_ADDRS};
}
PerCpuArrayMap<std::uint64_t> DecapProgram::outcomes() const {
    return {bpf_map__fd(skel_->maps.xlb_decap_stats), XLB_MAP_DECAP_STATS};
}

}  // namespace xlb::bpf
