// SPDX-License-Identifier: Apache-2.0
// What the API and the metrics read from the kernel side: live rings (for
// lookup) and the per-CPU counters, summed over CPUs. Reads only; the
// reconciler alone writes the maps. Implementations must be safe to call
// from several threads at once (the BPF one is: every read is a syscall).
#pragma once

#include <array>
#include <cstdint>
#include <vector>

#include "xlb/abi.h"
#include "xlb/error.h"

namespace xlb::bpf {
class LbProgram;
}

namespace xlb::api {

using OutcomeCounts = std::array<std::uint64_t, XLB_OUT__MAX>;

class DataPlaneView {
public:
    virtual ~DataPlaneView() = default;
    // The live ring of a VIP id: backend id per slot (slots 1..M of the map,
    // so index i is Maglev position i). Fails with ENOENT when the VIP has no
    // published ring.
    virtual Result<std::vector<std::uint32_t>> ring(std::uint32_t vip_id) const = 0;
    virtual Result<OutcomeCounts> outcomes() const = 0;
    virtual Result<xlb_vip_stats> vip_stats(std::uint32_t vip_id) const = 0;
    virtual Result<xlb_backend_stats> backend_stats(std::uint32_t backend_id) const = 0;
    // Packets of the VIP sent with a second-chance hint (abi.h, struct
    // xlb_gue_hint). A view without them counts none.
    virtual Result<std::uint64_t> vip_hints(std::uint32_t) const { return 0; }
    // The VIP's drops by reason (abi.h, struct xlb_vip_drops). A view
    // without them counts none.
    virtual Result<xlb_vip_drops> vip_drops(std::uint32_t) const { return xlb_vip_drops{}; }
    // The VIP's SYN cookie counters (abi.h, struct xlb_vip_cookie_stats). A
    // view without them counts none.
    virtual Result<xlb_vip_cookie_stats> vip_cookies(std::uint32_t) const {
        return xlb_vip_cookie_stats{};
    }
    // The VIP's QUIC counters (abi.h, struct xlb_vip_quic_stats): packets
    // routed by connection ID, fallbacks by reason. A view without them
    // counts none.
    virtual Result<xlb_vip_quic_stats> vip_quic(std::uint32_t) const {
        return xlb_vip_quic_stats{};
    }
    // The balancer POST /v1/capture turns a capture on in (its one write:
    // the capture flag and filter, docs/capture.md); null: none to capture.
    virtual const bpf::LbProgram* capture_program() const { return nullptr; }
};

// Stable lower-case names of enum xlb_outcome without the XLB_OUT_ prefix
// ("tx", "drop_no_backend", ...): JSON keys and metric label values.
const char* outcome_name(std::uint32_t outcome);
// The `reason` label of xlb_vip_drops_total for slot `slot` of struct
// xlb_vip_drops: the outcome's name for the first six ("drop_no_table", as
// dashboards know them), the name without "drop_" for later ones
// ("source_denied", "cookie_invalid").
const char* vip_drop_reason(std::uint32_t slot);

}  // namespace xlb::api
