// SPDX-License-Identifier: Apache-2.0
#include "xlb/api/lookup.h"

#include "xlb/datapath/setup.h"
#include "xlb/flow_hash.h"

namespace xlb::api {

LookupResult lookup(const config::VipSpec& vip, const net::Endpoint& src, std::uint16_t dport,
                    std::uint32_t hash_seed,
                    const std::optional<std::span<const std::uint32_t>>& ring) {
    LookupResult r;
    const xlb_flow_key key = datapath::flow_key(vip, src, dport);
    r.hash = xlb_vip_flow_hash(&key, datapath::vip_flags(vip), hash_seed);
    if (!ring) {
        r.outcome = "drop_no_table";
        return r;
    }
    r.ring_size = static_cast<std::uint32_t>(ring->size());
    if (ring->empty()) {
        r.outcome = "drop_no_backend";
        return r;
    }
    // The map slot is xlb_ring_slot() = 1 + hash % M; the ring read back
    // starts at slot 1.
    const std::uint32_t map_slot = xlb_ring_slot(r.hash, r.ring_size);
    r.slot = map_slot - XLB_RING_FIRST_SLOT;
    r.backend_id = (*ring)[*r.slot];
    r.outcome = "tx";
    return r;
}

}  // namespace xlb::api
