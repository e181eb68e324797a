// SPDX-License-Identifier: Apache-2.0
// A connection table in memory with a settable clock, for tests of
// xlb::conntrack and of the API's conntrack endpoints.
#pragma once

#include <algorithm>
#include <cstring>
#include <mutex>
#include <vector>

#include "xlb/conntrack/table.h"
#include "xlb/datapath/setup.h"

namespace xlb::test {

class FakeConntrack : public conntrack::Table {
public:
    explicit FakeConntrack(std::uint32_t capacity = 4096, std::size_t batch = 3)
        : capacity_(capacity), batch_(batch) {}

    // Times in ms on the fake clock (converted to entry units).
    static conntrack::Units units(std::uint64_t ms) {
        return static_cast<conntrack::Units>(ms * 1'000'000 >> XLB_CT_TIME_SHIFT);
    }
    void set_now_ms(std::uint64_t ms) {
        std::lock_guard lock(mu_);
        now_ = units(ms);
    }
    void set_now_units(conntrack::Units u) {
        std::lock_guard lock(mu_);
        now_ = u;
    }
    // vip_id: the VIP id the program would record; ended: XLB_CT_ENDED_*.
    void add(const net::Endpoint& client, const net::Endpoint& destination, std::uint8_t protocol,
             std::uint32_t backend_id, std::uint32_t generation, conntrack::Units created,
             conntrack::Units last_seen, std::uint32_t vip_id = 0, unsigned ended = 0) {
        std::lock_guard lock(mu_);
        xlb_ct_value value{backend_id, generation, created, last_seen};
        value.vip_id = vip_id;
        entries_.push_back(
            conntrack::Entry{datapath::flow_key(client, destination, protocol), value, ended});
    }
    std::size_t scans() const {
        std::lock_guard lock(mu_);
        return scans_;
    }
    void set_backend(std::uint32_t id, const net::IpAddress& address, std::uint32_t generation) {
        std::lock_guard lock(mu_);
        backends_.emplace_back(id, datapath::backend_entry(address, generation));
    }
    std::size_t size() const {
        std::lock_guard lock(mu_);
        return entries_.size();
    }
    std::size_t erase_calls() const {
        std::lock_guard lock(mu_);
        return erase_calls_;
    }

    std::uint32_t capacity() const override { return capacity_; }
    conntrack::Units now() const override {
        std::lock_guard lock(mu_);
        return now_;
    }
    Result<void> scan(
        const std::function<void(std::span<const conntrack::Entry>)>& batch) const override {
        std::vector<conntrack::Entry> copy;
        {
            std::lock_guard lock(mu_);
            copy = entries_;
            ++scans_;
        }
        for (std::size_t at = 0; at < copy.size(); at += batch_) {
            batch(std::span<const conntrack::Entry>(copy).subspan(
                at, std::min(batch_, copy.size() - at)));
        }
        return {};
    }
    Result<std::uint64_t> erase(std::span<const xlb_flow_key> keys) const override {
        std::lock_guard lock(mu_);
        ++erase_calls_;
        std::uint64_t n = 0;
        for (const auto& k : keys) {
            auto it = std::find_if(
                entries_.begin(), entries_.end(),
                [&](const conntrack::Entry& e) { return std::memcmp(&e.key, &k, sizeof(k)) == 0; });
            if (it != entries_.end()) {
                entries_.erase(it);
                ++n;
            }
        }
        return n;
    }
    Result<conntrack::Backends> backends() const override {
        std::lock_guard lock(mu_);
        return conntrack::backends_from_map(backends_);
    }

private:
    mutable std::mutex mu_;
    std::uint32_t capacity_;
    std::size_t batch_;
    conntrack::Units now_ = 0;
    mutable std::vector<conntrack::Entry> entries_;
    std::vector<std::pair<std::uint32_t, xlb_backend>> backends_;
    mutable std::size_t erase_calls_ = 0;
    mutable std::size_t scans_ = 0;
};

}  // namespace xlb::test
