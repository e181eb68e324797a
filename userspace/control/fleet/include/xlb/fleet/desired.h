// SPDX-License-Identifier: Apache-2.0
// The fleet's desired state as one host reads it: every key under
// <prefix>desired/ at one store revision, decoded, checked, and turned into
// the configuration the host runs (its own settings from its file, the rest
// from the store). Every host that reads the same revision decides the same:
// apply it, or refuse it for the same reasons (docs/fleet.md).
#pragma once

#include <cstdint>
#include <expected>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "xlb/config/model.h"
#include "xlb/fleet/values.h"

namespace xlb::fleet {

// One key as the store holds it.
struct StoredKey {
    std::string key;
    std::string value;
    std::int64_t mod_revision = 0;
    std::int64_t lease = 0;  // 0: none (a host record has its host's)
    bool operator==(const StoredKey&) const = default;
};

// Something wrong with the desired state, at a key and the revision that
// wrote it.
struct Problem {
    std::string key;
    std::int64_t revision = 0;
    std::string message;
    // "/xlb/lab/desired/vips/198.51.100.10:80/tcp@42: vip.port: found ..."
    std::string to_string() const;
};

template <class T>
struct Versioned {
    T value;
    std::int64_t mod_revision = 0;
};

struct Desired {
    std::optional<Versioned<GlobalValue>> global;
    std::map<std::string, Versioned<VipValue>> vips;      // by VIP key, tombstones too
    std::map<std::string, Versioned<DrainValue>> drains;  // by host name
    // The fleet's config revision: the newest revision among the keys.
    std::int64_t config_revision = 0;
};

// Decodes every key; a key under desired/ that is not one of the layout's is
// a problem too. Problems come back all together, in key order.
std::expected<Desired, std::vector<Problem>> read_desired(const Layout& layout,
                                                          std::span<const StoredKey> keys);

// The configuration the host runs: `host` (its file's settings) with the
// fleet-wide settings and the VIPs of `desired`, checked as a file is. A
// missing desired/global is a problem (the fleet has no seed).
std::expected<config::Config, std::vector<Problem>> host_config(const Layout& layout,
                                                                const Desired& desired,
                                                                const config::Settings& host);

// What in going from `running` to `next` moves established flows (a new
// hash_seed while VIPs run; a VIP's new hash or ring_size) and was written
// without allow_disruptive; empty: nothing to refuse.
std::vector<Problem> unconfirmed_disruptive(const Layout& layout, const config::Config& running,
                                            const Desired& desired, const config::Config& next);

}  // namespace xlb::fleet
