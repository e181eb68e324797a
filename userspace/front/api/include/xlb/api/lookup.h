// SPDX-License-Identifier: Apache-2.0
// Which backend a new flow to a VIP gets: the same flow key, flow hash and
// ring slot as the XDP program (bpf/xlb_lb.bpf.c), so `xlbctl lookup` and the
// kernel agree: the flow key and the VIP's flags come from the data path's
// set-up (xlb/datapath/setup.h), as the reconciler's do. Pure; the ring comes from
// DataPlaneView::ring().
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>

#include "xlb/abi.h"
#include "xlb/config/model.h"
#include "xlb/net/address.h"

namespace xlb::api {

struct LookupResult {
    std::uint32_t hash = 0;             // xlb_vip_flow_hash(key, flags, seed)
    std::uint32_t ring_size = 0;        // M of the live ring
    std::optional<std::uint32_t> slot;  // hash % M: the Maglev position (0-based)
    std::optional<std::uint32_t> backend_id;
    // What the XDP program would do with the flow's first packet:
    // "tx", "drop_no_table" (ring unpublished) or "drop_no_backend" (empty ring).
    std::string outcome;
};

// `ring`: nullopt when the VIP has no published ring.
LookupResult lookup(const config::VipSpec& vip, const net::Endpoint& src, std::uint16_t dport,
                    std::uint32_t hash_seed,
                    const std::optional<std::span<const std::uint32_t>>& ring);

}  // namespace xlb::api
