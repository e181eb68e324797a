// SPDX-License-Identifier: Apache-2.0
#include "xlb/kernel/bpf_data_plane.h"

#include <arpa/inet.h>

#include <algorithm>
#include <cstring>

#include "xlb/bpf/programs.h"
#include "xlb/bpf/ring.h"

namespace xlb::control {

xlb::Result<void> BpfDataPlane::put_vip(const xlb_vip_key& key, const xlb_vip_value& value) {
    return program_.put_vip(key, value);
}

xlb::Result<void> BpfDataPlane::remove_vip(const xlb_vip_key& key) {
    auto erased = program_.erase_vip(key);
    if (!erased) return std::unexpected(erased.error());
    return {};
}

xlb::Result<std::map<std::uint32_t, BpfDataPlane::RangeKeys>*> BpfDataPlane::range_keys() {
    if (!range_keys_) {
        auto keys = program_.source_ranges().keys();
        if (!keys) return std::unexpected(keys.error());
        std::map<std::uint32_t, RangeKeys> by_vip;
        for (const xlb_src_range_key& k : *keys) by_vip[ntohl(k.vip_id)].push_back(k);
        range_keys_ = std::move(by_vip);
    }
    return &*range_keys_;
}

xlb::Result<void> BpfDataPlane::set_source_ranges(
    const xlb_vip_key& key, std::uint32_t vip_id,
    const std::vector<datapath::SourceRangeEntry>& entries) {
    auto known = range_keys();
    if (!known) return std::unexpected(known.error());
    const auto trie = program_.source_ranges();
    // New entries first: a packet meets the old lists or the new ones, never
    // a list with a prefix missing.
    RangeKeys written;
    written.reserve(entries.size());
    for (const datapath::SourceRangeEntry& e : entries) {
        if (auto ok = trie.put(e.key, e.verdict); !ok) return ok;
        written.push_back(e.key);
    }
    auto same = [](const xlb_src_range_key& a, const xlb_src_range_key& b) {
        return std::memcmp(&a, &b, sizeof(a)) == 0;
    };
    for (const xlb_src_range_key& old : (**known)[vip_id]) {
        if (std::any_of(written.begin(), written.end(),
                        [&](const xlb_src_range_key& k) { return same(k, old); }))
            continue;
        if (auto gone = trie.erase(old); !gone) return std::unexpected(gone.error());
    }
    (**known)[vip_id] = std::move(written);
    return program_.renew_vip_epoch(key);
}

xlb::Result<void> BpfDataPlane::remove_source_ranges(std::uint32_t vip_id) {
    auto known = range_keys();
    if (!known) return std::unexpected(known.error());
    auto it = (*known)->find(vip_id);
    if (it == (*known)->end()) return {};
    const auto trie = program_.source_ranges();
    for (const xlb_src_range_key& old : it->second)
        if (auto gone = trie.erase(old); !gone) return std::unexpected(gone.error());
    (*known)->erase(it);
    return {};
}

xlb::Result<std::map<std::uint32_t, std::set<std::uint64_t>>*> BpfDataPlane::quic_server_ids() {
    if (!quic_server_ids_) {
        auto keys = program_.quic_servers().keys();
        if (!keys) return std::unexpected(keys.error());
        std::map<std::uint32_t, std::set<std::uint64_t>> by_vip;
        for (const xlb_quic_server_key& k : *keys) by_vip[k.vip_id].insert(k.server_id);
        quic_server_ids_ = std::move(by_vip);
    }
    return &*quic_server_ids_;
}

bool BpfDataPlane::quic_crypto_available() const { return program_.quic_crypto_available(); }

xlb::Result<void> BpfDataPlane::install_keys(const std::vector<datapath::QuicKeyEntry>& keys) {
    for (const datapath::QuicKeyEntry& k : keys) {
        auto known = quic_keys_.find(k.slot);
        if (known != quic_keys_.end() && known->second == k.key) continue;
        if (auto ok = program_.install_quic_key(k.slot, k.key); !ok)
            return std::unexpected(
                std::move(ok.error())
                    .add_context("install the QUIC key of slot " + std::to_string(k.slot)));
        quic_keys_[k.slot] = k.key;
    }
    return {};
}

xlb::Result<void> BpfDataPlane::install_quic_keys(const std::vector<datapath::QuicKeyEntry>& keys) {
    return install_keys(keys);
}

xlb::Result<void> BpfDataPlane::set_quic(std::uint32_t vip_id,
                                         const std::vector<datapath::QuicConfigEntry>& configs,
                                         const std::vector<datapath::QuicServerEntry>& servers,
                                         const std::vector<datapath::QuicKeyEntry>& keys) {
    auto known = quic_server_ids();
    if (!known) return std::unexpected(known.error());
    // What a config needs goes in first: a packet meets a config with its
    // key and its servers, or the config before it.
    if (auto ok = install_keys(keys); !ok) return ok;
    const auto server_map = program_.quic_servers();
    std::set<std::uint64_t> written;
    for (const datapath::QuicServerEntry& e : servers) {
        if (auto ok = server_map.put(e.key, e.backend_id); !ok)
            return std::unexpected(
                std::move(ok.error())
                    .add_context("QUIC server id " + std::to_string(e.key.server_id)));
        written.insert(e.key.server_id);
    }
    const auto config_map = program_.quic_configs();
    for (const datapath::QuicConfigEntry& c : configs)
        if (auto ok = config_map.put(c.slot, c.value); !ok) return ok;
    // Then what no config or backend of the VIP has any more.
    std::set<std::uint64_t>& had = (**known)[vip_id];
    for (std::uint64_t server_id : had) {
        if (written.contains(server_id)) continue;
        xlb_quic_server_key key{};
        key.vip_id = vip_id;
        key.server_id = server_id;
        if (auto gone = server_map.erase(key); !gone) return std::unexpected(gone.error());
    }
    had = std::move(written);
    const std::uint32_t first = datapath::quic_slot(vip_id, 0);
    for (auto it = quic_keys_.lower_bound(first);
         it != quic_keys_.end() && it->first < first + XLB_QUIC_CONFIG_SLOTS;) {
        const bool kept =
            std::any_of(keys.begin(), keys.end(),
                        [&](const datapath::QuicKeyEntry& k) { return k.slot == it->first; });
        if (kept) {
            ++it;
            continue;
        }
        if (auto ok = program_.clear_quic_key(it->first); !ok) return ok;
        it = quic_keys_.erase(it);
    }
    return {};
}

xlb::Result<void> BpfDataPlane::remove_quic(std::uint32_t vip_id) {
    std::vector<datapath::QuicConfigEntry> cleared(XLB_QUIC_CONFIG_SLOTS);
    for (std::uint8_t c = 0; c < XLB_QUIC_CONFIG_SLOTS; ++c)
        cleared[c].slot = datapath::quic_slot(vip_id, c);
    if (auto ok = set_quic(vip_id, cleared, {}, {}); !ok) return ok;
    if (auto known = quic_server_ids(); known) (*known)->erase(vip_id);
    return {};
}

xlb::Result<void> BpfDataPlane::put_backend(std::uint32_t id, const xlb_backend& backend) {
    return program_.backends().put(id, backend);
}

xlb::Result<PublishTiming> BpfDataPlane::publish(const std::vector<RingUpdate>& rings) {
    std::vector<bpf::PreparedRing> prepared;
    prepared.reserve(rings.size());
    for (const RingUpdate& r : rings) {
        const auto ring_size = static_cast<std::uint32_t>(r.backend_ids.size());
        auto spare = spare_rings_.extract(ring_size);
        auto p = spare ? std::move(spare.mapped()).fill(r.vip_id, r.backend_ids)
                       : bpf::prepare_ring(r.vip_id, r.backend_ids);
        if (!p) return std::unexpected(p.error());
        prepared.push_back(std::move(*p));
    }
    // Second chance: a ring live now becomes its VIP's previous ring before
    // the new one replaces it, so that no packet finds a new ring next to a
    // stale previous one.
    for (const RingUpdate& r : rings) {
        xlb::Result<void> ok;
        switch (r.previous) {
            case PreviousRing::kNone:
                ok = bpf::unpublish_ring(program_.prev_rings().fd(), r.vip_id);
                break;
            case PreviousRing::kLiveRing:
                ok = bpf::keep_as_previous(program_.rings().fd(), program_.prev_rings().fd(),
                                           r.vip_id);
                break;
            case PreviousRing::kUnchanged: break;
        }
        if (!ok) return std::unexpected(ok.error());
    }
    PublishTiming timing;
    timing.issued = std::chrono::steady_clock::now();
    auto ok = bpf::publish_rings(program_.rings().fd(), prepared);
    timing.returned = std::chrono::steady_clock::now();
    if (!ok) return std::unexpected(ok.error());
    make_spare_rings(rings);
    return timing;
}

void BpfDataPlane::make_spare_rings(const std::vector<RingUpdate>& published) {
    for (const RingUpdate& r : published) {
        const auto ring_size = static_cast<std::uint32_t>(r.backend_ids.size());
        if (spare_rings_.contains(ring_size) || spare_rings_.size() >= kMaxSpareRings) continue;
        // Without a spare the next publish creates its map itself; that is
        // slower, not wrong, and a real shortage shows there with its error.
        if (auto blank = bpf::BlankRing::create(ring_size))
            spare_rings_.emplace(ring_size, std::move(*blank));
    }
}

xlb::Result<void> BpfDataPlane::remove_ring(std::uint32_t vip_id) {
    if (auto ok = bpf::unpublish_ring(program_.rings().fd(), vip_id); !ok) return ok;
    return remove_previous_ring(vip_id);
}

xlb::Result<void> BpfDataPlane::remove_previous_ring(std::uint32_t vip_id) {
    return bpf::unpublish_ring(program_.prev_rings().fd(), vip_id);
}

xlb::Result<std::optional<std::vector<std::uint32_t>>> BpfDataPlane::live_ring(
    std::uint32_t vip_id) {
    auto ring = bpf::read_ring(program_.rings().fd(), vip_id);
    if (!ring) {
        if (ring.error().code == ENOENT) return std::optional<std::vector<std::uint32_t>>{};
        return std::unexpected(ring.error());
    }
    return std::optional<std::vector<std::uint32_t>>{std::move(*ring)};
}

}  // namespace xlb::control
