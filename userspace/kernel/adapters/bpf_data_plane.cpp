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
