// SPDX-License-Identifier: Apache-2.0
// The API's DataPlaneView over a loaded balancer's maps.
#pragma once

#include <cstdint>
#include <vector>

#include "xlb/api/data_plane_view.h"

namespace xlb::api {

// Reads a loaded (or pinned and reused) balancer's maps.
class BpfDataPlaneView : public DataPlaneView {
public:
    explicit BpfDataPlaneView(const bpf::LbProgram& program) : program_(program) {}
    Result<std::vector<std::uint32_t>> ring(std::uint32_t vip_id) const override;
    Result<OutcomeCounts> outcomes() const override;
    Result<xlb_vip_stats> vip_stats(std::uint32_t vip_id) const override;
    Result<xlb_backend_stats> backend_stats(std::uint32_t backend_id) const override;
    Result<std::uint64_t> vip_hints(std::uint32_t vip_id) const override;
    Result<xlb_vip_drops> vip_drops(std::uint32_t vip_id) const override;
    Result<xlb_vip_cookie_stats> vip_cookies(std::uint32_t vip_id) const override;
    Result<xlb_vip_quic_stats> vip_quic(std::uint32_t vip_id) const override;
    const bpf::LbProgram* capture_program() const override { return &program_; }

private:
    const bpf::LbProgram& program_;
};

}  // namespace xlb::api
