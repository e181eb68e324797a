// SPDX-License-Identifier: Apache-2.0
// A control::DataPlane for tests of the reconciler's users: it keeps what the
// reconciler writes (backend entries by id, rings by VIP id) and counts the
// rings published, and never fails.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "xlb/control/data_plane.h"

namespace xlb::test {

class RecordingDataPlane : public control::DataPlane {
public:
    xlb::Result<void> put_vip(const xlb_vip_key&, const xlb_vip_value& value) override {
        vip_flags[value.vip_id] = value.flags;
        events.push_back("put_vip " + std::to_string(value.vip_id) + " flags " +
                         std::to_string(value.flags));
        return {};
    }
    xlb::Result<void> remove_vip(const xlb_vip_key&) override { return {}; }
    xlb::Result<void> set_source_ranges(
        const xlb_vip_key&, std::uint32_t vip_id,
        const std::vector<datapath::SourceRangeEntry>& entries) override {
        source_ranges[vip_id] = entries;
        events.push_back("set_source_ranges " + std::to_string(vip_id) + " " +
                         std::to_string(entries.size()));
        return {};
    }
    xlb::Result<void> remove_source_ranges(std::uint32_t vip_id) override {
        source_ranges.erase(vip_id);
        events.push_back("remove_source_ranges " + std::to_string(vip_id));
        return {};
    }
    xlb::Result<void> set_quic(std::uint32_t vip_id,
                               const std::vector<datapath::QuicConfigEntry>& configs,
                               const std::vector<datapath::QuicServerEntry>& servers,
                               const std::vector<datapath::QuicKeyEntry>& keys) override {
        quic_configs[vip_id] = configs;
        quic_servers[vip_id] = servers;
        quic_keys[vip_id] = keys;
        events.push_back("set_quic " + std::to_string(vip_id) + " servers " +
                         std::to_string(servers.size()) + " keys " + std::to_string(keys.size()));
        return {};
    }
    xlb::Result<void> remove_quic(std::uint32_t vip_id) override {
        quic_configs.erase(vip_id);
        quic_servers.erase(vip_id);
        quic_keys.erase(vip_id);
        events.push_back("remove_quic " + std::to_string(vip_id));
        return {};
    }
    xlb::Result<void> install_quic_keys(const std::vector<datapath::QuicKeyEntry>& keys) override {
        installed_keys.insert(installed_keys.end(), keys.begin(), keys.end());
        events.push_back("install_quic_keys " + std::to_string(keys.size()));
        return {};
    }
    bool quic_crypto_available() const override { return crypto; }
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
    std::map<std::uint32_t, std::uint32_t> vip_flags;  // by VIP id, as last put
    std::map<std::uint32_t, std::vector<datapath::SourceRangeEntry>> source_ranges;
    std::vector<std::string> events;  // VIP entries, source ranges, QUIC, in order
    // QUIC routing as last set, by VIP id; keys given to install_quic_keys
    std::map<std::uint32_t, std::vector<datapath::QuicConfigEntry>> quic_configs;
    std::map<std::uint32_t, std::vector<datapath::QuicServerEntry>> quic_servers;
    std::map<std::uint32_t, std::vector<datapath::QuicKeyEntry>> quic_keys;
    std::vector<datapath::QuicKeyEntry> installed_keys;
    bool crypto = true;  // what quic_crypto_available() answers
    std::map<std::uint32_t, xlb_backend> backends;
    std::map<std::uint32_t, std::vector<std::uint32_t>> rings;
    std::map<std::uint32_t, std::vector<std::uint32_t>> previous_rings;  // second chance
    std::size_t publishes = 0;                                           // rings published
};

}  // namespace xlb::test
