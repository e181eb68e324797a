// SPDX-License-Identifier: Apache-2.0
// Ids in the BPF maps: a VIP id per VIP (its ring's slot in the outer map and
// its stats index) and a backend id per (VIP, backend) pair, each with a
// generation. Backends are per VIP because health is judged per VIP: a
// backend rescheduled away from one VIP must not lose another VIP's flows.
//
// A backend id is released only after the table that stops referencing it
// has gone live, and it is reused with a generation no connection-table entry
// can still hold, so a recorded flow never follows a reused id to the wrong
// server.
#pragma once

#include <cstdint>
#include <expected>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "xlb/error.h"
#include "xlb/net/address.h"

namespace xlb::control {

struct BackendRef {
    std::uint32_t id = 0;
    std::uint32_t generation = 0;
};

// One persisted assignment, so a restarted agent keeps ids and generations
// (and with them the connection table) valid.
struct BackendAssignment {
    std::string vip_key;
    net::IpAddress address;
    std::uint32_t id = 0;
    std::uint32_t generation = 0;
};

class IdRegistry {
public:
    IdRegistry(std::uint32_t max_vips, std::uint32_t max_backends);

    // The VIP's id, allocated on first use.
    Result<std::uint32_t> vip_id(const std::string& vip_key);
    std::optional<std::uint32_t> find_vip(const std::string& vip_key) const;
    void release_vip(const std::string& vip_key);

    // The backend's id and current generation, allocated on first use.
    Result<BackendRef> backend(const std::string& vip_key, const net::IpAddress& address);
    std::optional<BackendRef> find_backend(const std::string& vip_key,
                                           const net::IpAddress& address) const;
    // A new generation for the same id: recorded flows of the old one move.
    BackendRef bump_generation(const std::string& vip_key, const net::IpAddress& address);
    // Frees the id and returns it with a fresh generation, which the caller
    // writes to the map so recorded flows of the released backend are stale.
    // Its next user gets a generation above that one.
    std::optional<BackendRef> release_backend(const std::string& vip_key,
                                              const net::IpAddress& address);
    // The generation the map holds for an id (read back from pinned maps at
    // start), so a reused id never repeats a generation a flow may hold.
    void seed_generation(std::uint32_t id, std::uint32_t generation);

    // Restores assignments (from the state file or pinned maps) before any
    // allocation. Conflicting or out-of-range entries are skipped and reported.
    std::vector<std::string> restore(const std::vector<std::pair<std::string, std::uint32_t>>& vips,
                                     const std::vector<BackendAssignment>& backends);
    std::vector<std::pair<std::string, std::uint32_t>> vip_assignments() const;
    std::vector<BackendAssignment> backend_assignments() const;

    std::size_t backends_in_use() const { return backend_by_key_.size(); }

private:
    using BackendKey = std::pair<std::string, net::IpAddress>;

    std::uint32_t max_vips_;
    std::uint32_t max_backends_;
    std::map<std::string, std::uint32_t> vip_by_key_;
    std::vector<bool> vip_used_;
    std::map<BackendKey, BackendRef> backend_by_key_;
    std::vector<bool> backend_used_;
    // Highest generation ever handed out per id (0: never used).
    std::vector<std::uint32_t> last_generation_;
};

}  // namespace xlb::control
