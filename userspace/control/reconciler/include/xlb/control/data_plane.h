// SPDX-License-Identifier: Apache-2.0
// What the reconciler asks of the kernel side. The real implementation writes
// the balancer's maps; tests use a recording fake.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <vector>

#include "xlb/abi.h"
#include "xlb/datapath/setup.h"
#include "xlb/error.h"

namespace xlb::control {

// What a publish does with a VIP's previous ring (second chance).
enum class PreviousRing {
    kNone,       // the VIP keeps no previous ring (second chance off)
    kLiveRing,   // the ring live until now becomes the previous ring, before
                 // the new one goes live (the members changed)
    kUnchanged,  // the previous ring stays as it is (a weight-only change:
                 // the ring from before the last change of members stays)
};

struct RingUpdate {
    std::uint32_t vip_id = 0;
    std::vector<std::uint32_t> backend_ids;  // one per slot; empty: the explicit empty ring
    PreviousRing previous = PreviousRing::kNone;
};

// When the outer-map update was issued (the rings are live from then) and when
// the call returned (after the kernel's RCU grace period).
struct PublishTiming {
    std::chrono::steady_clock::time_point issued;
    std::chrono::steady_clock::time_point returned;
};

class DataPlane {
public:
    virtual ~DataPlane() = default;
    virtual Result<void> put_vip(const xlb_vip_key& key, const xlb_vip_value& value) = 0;
    virtual Result<void> remove_vip(const xlb_vip_key& key) = 0;
    virtual Result<void> put_backend(std::uint32_t id, const xlb_backend& backend) = 0;
    // Every ring complete in a fresh map first, then one outer-map update.
    // Returns when the new rings are live and no packet still uses the old.
    virtual Result<PublishTiming> publish(const std::vector<RingUpdate>& rings) = 0;
    // Removes the VIP's ring and its previous ring.
    virtual Result<void> remove_ring(std::uint32_t vip_id) = 0;
    // Ends a VIP's second-chance window: its previous ring goes (none: no-op).
    virtual Result<void> remove_previous_ring(std::uint32_t vip_id) = 0;
    // Makes `entries` a VIP's source-range entries (datapath::
    // source_range_entries): writes them, then removes the id's entries not
    // among them, then renews the VIP's bucket epoch so that flows the data
    // path cached are checked against the new lists.
    virtual Result<void> set_source_ranges(const xlb_vip_key&, std::uint32_t,
                                           const std::vector<datapath::SourceRangeEntry>&) {
        return {};
    }
    // Removes a VIP id's source-range entries (the VIP is gone).
    virtual Result<void> remove_source_ranges(std::uint32_t) { return {}; }
    // Makes a VIP's QUIC routing the one these entries give (datapath::
    // quic_config_entries, quic_server_entries; keys: the AES key of each
    // encrypted config's slot): keys installed and server entries written
    // before the configs that need them, then the id's server entries and
    // keys not among them removed.
    virtual Result<void> set_quic(std::uint32_t, const std::vector<datapath::QuicConfigEntry>&,
                                  const std::vector<datapath::QuicServerEntry>&,
                                  const std::vector<datapath::QuicKeyEntry>&) {
        return {};
    }
    // Removes a VIP id's QUIC routing: its configs cleared, then its keys
    // and server entries removed (the flag is off, or the VIP gone).
    virtual Result<void> remove_quic(std::uint32_t) { return {}; }
    // Installs keys alone: a restarted agent's new program has none (they
    // are per program, never pinned) while the pinned configs already send
    // packets to them, so the keys go in before it is attached.
    virtual Result<void> install_quic_keys(const std::vector<datapath::QuicKeyEntry>&) {
        return {};
    }
    // Whether the kernel can decrypt encrypted configs' CIDs (the BPF
    // crypto kfuncs); a VIP with such a config is refused without them.
    virtual bool quic_crypto_available() const { return true; }
    // The ring live now for a VIP id (nullopt: none or unknown), so a
    // restarted agent can adopt an identical table instead of publishing it
    // again (and bumping its epoch).
    virtual Result<std::optional<std::vector<std::uint32_t>>> live_ring(std::uint32_t) {
        return std::optional<std::vector<std::uint32_t>>{};
    }
};

}  // namespace xlb::control
