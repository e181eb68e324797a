// SPDX-License-Identifier: Apache-2.0
// The reconciler's DataPlane over a loaded balancer's maps.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <vector>

#include "xlb/bpf/ring.h"
#include "xlb/control/data_plane.h"

namespace xlb::bpf {
class LbProgram;
}

namespace xlb::control {

// Writes the maps of a loaded (or pinned and reused) balancer.
class BpfDataPlane : public DataPlane {
public:
    explicit BpfDataPlane(const bpf::LbProgram& program) : program_(program) {}
    Result<void> put_vip(const xlb_vip_key& key, const xlb_vip_value& value) override;
    Result<void> remove_vip(const xlb_vip_key& key) override;
    Result<void> put_backend(std::uint32_t id, const xlb_backend& backend) override;
    Result<PublishTiming> publish(const std::vector<RingUpdate>& rings) override;
    Result<void> remove_ring(std::uint32_t vip_id) override;
    Result<void> remove_previous_ring(std::uint32_t vip_id) override;
    Result<std::optional<std::vector<std::uint32_t>>> live_ring(std::uint32_t vip_id) override;
    Result<void> set_source_ranges(const xlb_vip_key& key, std::uint32_t vip_id,
                                   const std::vector<datapath::SourceRangeEntry>& entries) override;
    Result<void> remove_source_ranges(std::uint32_t vip_id) override;
    Result<void> set_quic(std::uint32_t vip_id,
                          const std::vector<datapath::QuicConfigEntry>& configs,
                          const std::vector<datapath::QuicServerEntry>& servers,
                          const std::vector<datapath::QuicKeyEntry>& keys) override;
    Result<void> remove_quic(std::uint32_t vip_id) override;
    Result<void> install_quic_keys(const std::vector<datapath::QuicKeyEntry>& keys) override;
    bool quic_crypto_available() const override;

private:
    using RangeKeys = std::vector<xlb_src_range_key>;
    // The trie's keys by VIP id, read from the map once (it may be pinned
    // with entries of an earlier run), then kept in step with each write.
    Result<std::map<std::uint32_t, RangeKeys>*> range_keys();
    // The server ids in xlb_quic_servers by VIP id, learnt the same way.
    Result<std::map<std::uint32_t, std::set<std::uint64_t>>*> quic_server_ids();
    Result<void> install_keys(const std::vector<datapath::QuicKeyEntry>& keys);

    // Ring maps made after a publish for the ring sizes it used, so that the
    // next publish of those sizes only writes slots (see bpf::BlankRing).
    void make_spare_rings(const std::vector<RingUpdate>& published);

    // Sizes kept spare at most: VIPs share a handful of ring sizes.
    static constexpr std::size_t kMaxSpareRings = 8;

    const bpf::LbProgram& program_;
    std::map<std::uint32_t, bpf::BlankRing> spare_rings_;  // by ring size
    std::optional<std::map<std::uint32_t, RangeKeys>> range_keys_;
    std::optional<std::map<std::uint32_t, std::set<std::uint64_t>>> quic_server_ids_;
    // Key slots installed in this program (its key map starts empty), with
    // their keys: a key already there is not made again.
    std::map<std::uint32_t, datapath::QuicKey> quic_keys_;
};

}  // namespace xlb::control
