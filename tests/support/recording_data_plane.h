// SPDX-License-Identifier: Apache-2.0
// A control::DataPlane for tests of the reconciler's users: it keeps what the
// reconciler writes (backend entries by id, rings by VIP id) and counts the
// rings published, and never fails.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <optional>
#include <vector>

#include "xlb/control/data_plane.h"

namespace xlb::test {

class RecordingDataPlane : public control::DataPlane {
public:
    xlb::Result<void> put_vip(const xlb_vip_key&, const xlb_vip_value&) override { return {}; }
    xlb::Result<void> remove_vip(const xlb_vip_key&) override { return {}; }
    xlb::Result<void> put_backend(std::uint32_t id, const xlb_backend& be) override {
        backends[id] = be;
        return {};
    }
    xlb::Result<control::PublishTiming> publish(
        const std::vector<control::RingUpdate>& updates) override {
        publishes += updates.size();
        for (const control::RingUpdate& r : updates) {
            auto live = rings.find(r.vip_id);
            if (r.previous == control::PreviousRing::kLiveRing && live != rings.end())
                previous_rings[r.vip_id] = live->second;
            else if (r.previous != control::PreviousRing::kUnchanged)
                previous_rings.erase(r.vip_id);
            rings[r.vip_id] = r.backend_ids;
        }
        const auto now = std::chrono::steady_clock::now();
        return control::PublishTiming{now, now};
    }
    xlb::Result<void> remove_ring(std::uint32_t vip_id) override {
        rings.erase(vip_id);
        previous_rings.erase(vip_id);
        return {};
    }
    xlb::Result<void> remove_previous_ring(std::uint32_t vip_id) override {
        previous_rings.erase(vip_id);
        return {};
    }
    // With reports_live_rings, what a restarted agent finds in pinned maps: the
    // rings published so far (otherwise nothing is known, as for fresh maps).
    xlb::Result<std::optional<std::vector<std::uint32_t>>> live_ring(
        std::uint32_t vip_id) override {
        auto it = rings.find(vip_id);
        if (!reports_live_rings || it == rings.end())
            return std::optional<std::vector<std::uint32_t>>{};
        return std::optional<std::vector<std::uint32_t>>{it->second};
    }

    bool reports_live_rings = false;
    std::map<std::uint32_t, xlb_backend> backends;
    std::map<std::uint32_t, std::vector<std::uint32_t>> rings;
    std::map<std::uint32_t, std::vector<std::uint32_t>> previous_rings;  // second chance
    std::size_t publishes = 0;                                           // rings published
};

}  // namespace xlb::test
