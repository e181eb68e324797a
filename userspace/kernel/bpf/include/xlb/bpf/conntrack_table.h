// SPDX-License-Identifier: Apache-2.0
// The set-associative connection table (abi.h, struct xlb_ct_set) through a
// shared mapping of its array map: reads and writes touch memory, no system
// call per entry. Writes follow the table's protocol (abi.h: a way is claimed
// through its seq), so they are safe while the program runs; a copy is
// cheap (the mapping is shared) and stays valid while any copy lives.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "xlb/abi.h"
#include "xlb/bpf/error.h"
#include "xlb/bpf/fd.h"

namespace xlb::bpf {

class ConntrackTable {
public:
    ConntrackTable() = default;

    // Maps the table behind fd (owned by someone else, who keeps it open
    // while this lives). The header is not checked: see ready().
    static Result<ConntrackTable> map(int fd, std::string name);
    // Opens a pinned table and maps it; the copy owns the descriptor.
    static Result<ConntrackTable> open_pinned(const std::string& path);

    int fd() const { return fd_; }
    const std::string& name() const { return name_; }
    // max_entries of the map (the header included).
    std::uint32_t elements() const { return elements_; }
    std::uint32_t sets() const { return elements_ == 0 ? 0 : elements_ - 1; }
    std::uint32_t capacity() const { return XLB_CT_CAPACITY(elements_ == 0 ? 1 : elements_); }

    // Whether the header is written and fits the map: the program records
    // nothing before.
    bool ready() const;
    xlb_ct_header header() const;
    // Empties every set, then writes a header with this seed (magic last).
    // Only for a table no program records into yet.
    void format(std::uint32_t seed) const;

    Result<std::optional<xlb_ct_value>> get(const xlb_flow_key& key) const;
    // Records the flow, as an insert of the program does: in the way that
    // holds it, else an empty one, else over the one seen longest ago.
    enum class Put { kAdded, kUpdated, kReplacedOther };
    Result<Put> put(const xlb_flow_key& key, const xlb_ct_value& value) const;
    // Ways a writer claimed and never released (an agent killed in the
    // middle of a write; the program's writers take nanoseconds): after
    // `grace` with the same odd seq, the way is emptied and released.
    // Returns how many.
    std::uint64_t release_stuck_ways(std::chrono::microseconds grace) const;
    // Returns whether the key was present.
    Result<bool> erase(const xlb_flow_key& key) const;
    Result<std::vector<xlb_flow_key>> keys() const;
    Result<void> clear() const;
    // Every entry, set by set. Entries change meanwhile (no snapshot); an
    // entry being rewritten is skipped.
    void for_each(const std::function<void(const xlb_flow_key&, const xlb_ct_value&)>& use) const;
    std::uint64_t count() const;

private:
    struct Mapping {
        UniqueFd owned;
        void* base = nullptr;
        std::size_t length = 0;
        ~Mapping();
    };
    xlb_ct_set* set(std::uint32_t index) const;
    // The key's set; null while the table is not ready().
    xlb_ct_set* set_of(const xlb_flow_key& key) const;
    // The way holding key in set s, or -1; *value gets a consistent copy.
    int find(xlb_ct_set* s, const xlb_flow_key& key, xlb_ct_value* value) const;
    bool write(xlb_ct_set* s, unsigned way, const xlb_flow_key& key,
               const xlb_ct_value& value) const;
    Result<void> write_or_fail(xlb_ct_set* s, unsigned way, const xlb_flow_key& key,
                               const xlb_ct_value& value) const;

    std::shared_ptr<Mapping> mapping_;
    int fd_ = -1;
    std::string name_;
    std::uint32_t elements_ = 0;
};

}  // namespace xlb::bpf
