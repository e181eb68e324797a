// SPDX-License-Identifier: Apache-2.0
#include "xlb/control/registry.h"

#include <algorithm>

namespace xlb::control {

IdRegistry::IdRegistry(std::uint32_t max_vips, std::uint32_t max_backends)
    : max_vips_(max_vips),
      max_backends_(max_backends),
      vip_used_(max_vips, false),
      backend_used_(max_backends, false),
      last_generation_(max_backends, 0) {}

Result<std::uint32_t> IdRegistry::vip_id(const std::string& vip_key) {
    if (auto it = vip_by_key_.find(vip_key); it != vip_by_key_.end()) return it->second;
    auto free = std::find(vip_used_.begin(), vip_used_.end(), false);
    if (free == vip_used_.end())
        return fail(
            "no free VIP id for " + vip_key + ": all " + std::to_string(max_vips_) + " in use",
            "raise maps.max_vips");
    *free = true;
    auto id = static_cast<std::uint32_t>(free - vip_used_.begin());
    vip_by_key_.emplace(vip_key, id);
    return id;
}

std::optional<std::uint32_t> IdRegistry::find_vip(const std::string& vip_key) const {
    if (auto it = vip_by_key_.find(vip_key); it != vip_by_key_.end()) return it->second;
    return std::nullopt;
}

void IdRegistry::release_vip(const std::string& vip_key) {
    if (auto it = vip_by_key_.find(vip_key); it != vip_by_key_.end()) {
        vip_used_[it->second] = false;
        vip_by_key_.erase(it);
    }
}

Result<BackendRef> IdRegistry::backend(const std::string& vip_key, const net::IpAddress& address) {
    BackendKey key{vip_key, address};
    if (auto it = backend_by_key_.find(key); it != backend_by_key_.end()) return it->second;
    auto free = std::find(backend_used_.begin(), backend_used_.end(), false);
    if (free == backend_used_.end())
        return fail("no free backend id for " + address.to_string() + " of " + vip_key + ": all " +
                        std::to_string(max_backends_) + " in use",
                    "raise maps.max_backends");
    *free = true;
    auto id = static_cast<std::uint32_t>(free - backend_used_.begin());
    BackendRef ref{id, ++last_generation_[id]};
    backend_by_key_.emplace(key, ref);
    return ref;
}

std::optional<BackendRef> IdRegistry::find_backend(const std::string& vip_key,
                                                   const net::IpAddress& address) const {
    if (auto it = backend_by_key_.find({vip_key, address}); it != backend_by_key_.end())
        return it->second;
    return std::nullopt;
}

BackendRef IdRegistry::bump_generation(const std::string& vip_key, const net::IpAddress& address) {
    auto it = backend_by_key_.find({vip_key, address});
    if (it == backend_by_key_.end()) return {};
    it->second.generation = ++last_generation_[it->second.id];
    return it->second;
}

std::optional<BackendRef> IdRegistry::release_backend(const std::string& vip_key,
                                                      const net::IpAddress& address) {
    auto it = backend_by_key_.find({vip_key, address});
    if (it == backend_by_key_.end()) return std::nullopt;
    const std::uint32_t id = it->second.id;
    backend_used_[id] = false;
    backend_by_key_.erase(it);
    return BackendRef{id, ++last_generation_[id]};
}

void IdRegistry::seed_generation(std::uint32_t id, std::uint32_t generation) {
    if (id < max_backends_) last_generation_[id] = std::max(last_generation_[id], generation);
}

std::vector<std::string> IdRegistry::restore(
    const std::vector<std::pair<std::string, std::uint32_t>>& vips,
    const std::vector<BackendAssignment>& backends) {
    std::vector<std::string> skipped;
    for (const auto& [key, id] : vips) {
        if (id >= max_vips_ || vip_used_[id] || vip_by_key_.contains(key)) {
            skipped.push_back("VIP " + key + " id " + std::to_string(id));
            continue;
        }
        vip_used_[id] = true;
        vip_by_key_.emplace(key, id);
    }
    for (const BackendAssignment& a : backends) {
        BackendKey key{a.vip_key, a.address};
        if (a.id >= max_backends_ || backend_used_[a.id] || a.generation == 0 ||
            backend_by_key_.contains(key)) {
            skipped.push_back("backend " + a.address.to_string() + " of " + a.vip_key + " id " +
                              std::to_string(a.id));
            continue;
        }
        backend_used_[a.id] = true;
        last_generation_[a.id] = std::max(last_generation_[a.id], a.generation);
        backend_by_key_.emplace(key, BackendRef{a.id, a.generation});
    }
    return skipped;
}

std::vector<std::pair<std::string, std::uint32_t>> IdRegistry::vip_assignments() const {
    return {vip_by_key_.begin(), vip_by_key_.end()};
}

std::vector<BackendAssignment> IdRegistry::backend_assignments() const {
    std::vector<BackendAssignment> out;
    for (const auto& [key, ref] : backend_by_key_)
        out.push_back({key.first, key.second, ref.id, ref.generation});
    return out;
}

}  // namespace xlb::control
