// SPDX-License-Identifier: Apache-2.0
#include "xlb/api/lookup.h"

#include <arpa/inet.h>

#include "xlb/flow_hash.h"

namespace xlb::api {

std::uint32_t vip_flags(const config::VipSpec& vip) {
    std::uint32_t flags = 0;
    if (!vip.conntrack) flags |= XLB_VIP_F_NO_CONNTRACK;
    if (vip.hash == config::HashMode::kSourceIp) flags |= XLB_VIP_F_HASH_SRC_ONLY;
    return flags;
}

xlb_flow_key flow_key(const config::VipSpec& vip, const net::Endpoint& src, std::uint16_t dport) {
    xlb_flow_key key{};
    src.address.to_words(key.src);
    vip.address.to_words(key.dst);
    key.sport = htons(src.port);
    key.dport = htons(dport);
    key.proto = static_cast<std::uint8_t>(vip.protocol);
    key.family = vip.address.is_v4() ? XLB_FAMILY_V4 : XLB_FAMILY_V6;
    return key;
}

LookupResult lookup(const config::VipSpec& vip, const net::Endpoint& src, std::uint16_t dport,
                    std::uint32_t hash_seed,
                    const std::optional<std::span<const std::uint32_t>>& ring) {
    LookupResult r;
    const xlb_flow_key key = flow_key(vip, src, dport);
    r.hash = xlb_vip_flow_hash(&key, vip_flags(vip), hash_seed);
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
