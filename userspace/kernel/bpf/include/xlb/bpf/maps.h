// SPDX-License-Identifier: Apache-2.0
// Typed access to BPF maps. A map handle is a (fd, name) view: the object
// that loaded the program (or pinned it) owns the descriptor.
#pragma once

#include <bpf/bpf.h>

#include <cerrno>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <type_traits>
#include <vector>

#include "xlb/bpf/error.h"

namespace xlb::bpf {

class MapView {
public:
    MapView() = default;
    MapView(int fd, std::string name) : fd_(fd), name_(std::move(name)) {}
    int fd() const { return fd_; }
    const std::string& name() const { return name_; }

protected:
    Result<void> update_raw(const void* key, const void* value, std::uint64_t flags,
                            const char* verb) const;
    Result<bool> lookup_raw(const void* key, void* value) const;
    Result<bool> erase_raw(const void* key) const;

    int fd_ = -1;
    std::string name_;
};

// Reads a whole hash or array map with batched lookups, `chunk` entries at a time;
// `use(std::span<const K>, std::span<const V>)` gets each batch. A bucket
// holding more than `chunk` entries (ENOSPC) doubles the buffers and tries
// the batch again. A snapshot only as far as the kernel's batches are.
template <typename K, typename V, typename Use>
Result<void> lookup_batches(int fd, const std::string& name, std::size_t chunk, Use use) {
    std::vector<K> keys(chunk);
    std::vector<V> values(chunk);
    // The batch token: a bucket index for hash maps, an index for arrays.
    std::uint32_t in = 0, out = 0;
    bool first = true;
    for (;;) {
        __u32 count = static_cast<__u32>(keys.size());
        const int rc = bpf_map_lookup_batch(fd, first ? nullptr : &in, &out, keys.data(),
                                            values.data(), &count, nullptr);
        const int err = rc == 0 ? 0 : errno;
        if (rc != 0 && err == ENOSPC && count == 0) {
            keys.resize(keys.size() * 2);
            values.resize(values.size() * 2);
            continue;
        }
        if (rc != 0 && err != ENOENT) return fail_on(err, "read (batched lookup)", name);
        use(std::span<const K>(keys.data(), count), std::span<const V>(values.data(), count));
        if (rc != 0) return {};  // ENOENT: the last batch
        in = out;
        first = false;
    }
}

// Hash and LRU-hash maps.
template <typename K, typename V>
class HashMap : public MapView {
    static_assert(std::has_unique_object_representations_v<K>,
                  "hash keys must have no padding: add explicit pad fields");

public:
    using MapView::MapView;
    Result<void> put(const K& key, const V& value) const {
        return update_raw(&key, &value, BPF_ANY, "update");
    }
    Result<std::optional<V>> get(const K& key) const {
        V value{};
        auto found = lookup_raw(&key, &value);
        if (!found) return std::unexpected(found.error());
        if (!*found) return std::optional<V>{};
        return std::optional<V>{value};
    }
    // Returns whether the key was present.
    Result<bool> erase(const K& key) const { return erase_raw(&key); }
    // Every key currently in the map (a snapshot; concurrent changes may race).
    Result<std::vector<K>> keys() const;
    Result<void> clear() const;
};

// Array maps indexed by a u32.
template <typename V>
class ArrayMap : public MapView {
public:
    using MapView::MapView;
    Result<void> put(std::uint32_t index, const V& value) const {
        return update_raw(&index, &value, BPF_ANY, "update");
    }
    Result<V> get(std::uint32_t index) const {
        V value{};
        auto found = lookup_raw(&index, &value);
        if (!found) return std::unexpected(found.error());
        if (!*found) return fail(ENOENT, "read " + name_ + "[" + std::to_string(index) + "]");
        return value;
    }
};

// Per-CPU arrays: reads return one value per possible CPU.
template <typename V>
class PerCpuArrayMap : public MapView {
    static_assert(sizeof(V) % 8 == 0, "per-CPU values are laid out at 8-byte strides");

public:
    using MapView::MapView;
    Result<std::vector<V>> get_per_cpu(std::uint32_t index) const {
        std::vector<V> values(possible_cpus());
        auto found = lookup_raw(&index, values.data());
        if (!found) return std::unexpected(found.error());
        if (!*found) return fail(ENOENT, "read " + name_ + "[" + std::to_string(index) + "]");
        return values;
    }
    Result<void> zero(std::uint32_t index) const {
        std::vector<V> values(possible_cpus());
        return update_raw(&index, values.data(), BPF_ANY, "zero");
    }

private:
    static std::size_t possible_cpus();
};

std::size_t possible_cpu_count();

template <typename V>
std::size_t PerCpuArrayMap<V>::possible_cpus() {
    return possible_cpu_count();
}

template <typename K, typename V>
Result<std::vector<K>> HashMap<K, V>::keys() const {
    std::vector<K> out;
    K key{}, next{};
    const void* prev = nullptr;
    while (true) {
        int rc = bpf_map_get_next_key(fd_, prev, &next);
        if (rc != 0) {
            if (errno == ENOENT) break;
            return fail(errno, "iterate " + name_);
        }
        out.push_back(next);
        key = next;
        prev = &key;
    }
    return out;
}

template <typename K, typename V>
Result<void> HashMap<K, V>::clear() const {
    auto all = keys();
    if (!all) return std::unexpected(all.error());
    for (const K& k : *all) {
        auto erased = erase(k);
        if (!erased) return std::unexpected(erased.error());
    }
    return {};
}

}  // namespace xlb::bpf
