// SPDX-License-Identifier: Apache-2.0
// The connection table (abi.h, layout 5: buckets of slots, and a record per
// slot) through a shared mapping of its array map: reads and writes touch
// memory, no system call per entry. Writes follow the table's protocol
// (abi.h: a slot is claimed through its meta), so they are safe while the
// program runs; a copy is cheap (the mapping is shared) and stays valid while
// any copy lives.
//
// A slot names its flow given its VIP: the table reads the balancer's VIP
// map (XLB_MAP_VIPS) to find a key's VIP id and a VIP id's address. The
// agent keeps each entry's record (created, whole last_seen) current on its
// walks (for_each, which the sweep makes at least hourly).
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "xlb/abi.h"
#include "xlb/bpf/error.h"
#include "xlb/bpf/fd.h"
#include "xlb/ct_set.h"

namespace xlb::bpf {

class ConntrackTable {
public:
    ConntrackTable() = default;

    // Maps the table behind fd; vips_fd is the balancer's VIP map (both
    // owned by someone else, who keeps them open while this lives). The
    // header is not checked: see ready().
    static Result<ConntrackTable> map(int fd, std::string name, int vips_fd);
    // Opens a pinned table and maps it, with the VIP map pinned beside it;
    // the copy owns both descriptors.
    static Result<ConntrackTable> open_pinned(const std::string& path);

    int fd() const { return fd_; }
    int vips_fd() const { return vips_fd_; }
    const std::string& name() const { return name_; }
    // max_entries of the map (header, buckets and records).
    std::uint32_t elements() const { return elements_; }
    std::uint32_t buckets() const { return XLB_CT_BUCKETS_OF(elements_); }
    std::uint32_t capacity() const { return XLB_CT_CAPACITY(elements_); }

    // Whether the header is written and fits the map: the program records
    // nothing before.
    bool ready() const;
    xlb_ct_header5 header() const;
    // Empties every bucket, then writes a header with this seed (magic last).
    // Only for a table no program records into yet.
    void format(std::uint32_t seed) const;

    Result<std::optional<xlb_ct_value>> get(const xlb_flow_key& key) const;
    // Whether the VIP map matches the key to a VIP (the table can hold it).
    bool has_vip(const xlb_flow_key& key) const { return vip_id_of(key).has_value(); }
    // Records the flow, as an insert of the program does: in the slot(s)
    // that hold it, else where xlb_ct_place says (ct_set.h), but for its
    // shortcut: an idle entry of a full first bucket is replaced only when
    // the second bucket is full too. The VIP is the
    // one the VIP map matches the key to (else value.vip_id); value's
    // created and last_seen go to the entry's record.
    enum class Put { kAdded, kUpdated, kReplacedOther };
    Result<Put> put(const xlb_flow_key& key, const xlb_ct_value& value) const;
    // Slots a writer claimed and never released (an agent killed in the
    // middle of a write; the program's writers take nanoseconds): after
    // `grace` still claimed with the same meta, the slot (and an IPv6
    // entry's other slot) is emptied and released. Returns how many.
    std::uint64_t release_stuck_ways(std::chrono::microseconds grace) const;
    // Returns whether the key was present.
    Result<bool> erase(const xlb_flow_key& key) const;
    Result<std::vector<xlb_flow_key>> keys() const;
    Result<void> clear() const;
    // Every entry, bucket by bucket, and its record brought up to date.
    // Entries change meanwhile (no snapshot); an entry being rewritten is
    // skipped. An entry whose VIP id the VIP map no longer has is emptied,
    // not passed on: no packet can match it, and its destination is
    // unknown. The value's generation is the backend's low 7 bits;
    // vip_epoch and hash are 0 (layout 5 keeps neither).
    void for_each(const std::function<void(const xlb_flow_key&, const xlb_ct_value&)>& use) const;
    // As for_each, with what the program noted of the client ending the
    // flow: XLB_CT_ENDED_FIN and _RST (abi.h, struct xlb_ct_record).
    using EntryUse = std::function<void(const xlb_flow_key&, const xlb_ct_value&, unsigned ended)>;
    void for_each_entry(const EntryUse& use) const;
    std::uint64_t count() const;

private:
    struct Mapping {
        UniqueFd owned;
        UniqueFd owned_vips;
        void* base = nullptr;
        std::size_t length = 0;
        ~Mapping();
    };
    struct Place {
        std::uint32_t bucket = 0;
        unsigned slot = 0;
    };
    // VIP keys by id, read from the VIP map.
    using VipKeys = std::vector<std::pair<std::uint32_t, xlb_vip_key>>;
    VipKeys vip_keys() const;
    std::optional<std::uint32_t> vip_id_of(const xlb_flow_key& key) const;

    xlb_ct_line* element(std::uint32_t index) const;
    xlb_ct_slot* slot(std::uint32_t bucket, unsigned s) const;
    xlb_ct_record* record(std::uint32_t bucket, unsigned s) const;
    // The head slot holding the flow of VIP vip_id (none: of a VIP the VIP
    // map no longer holds), or nullopt; *value gets a consistent copy.
    std::optional<Place> find(const xlb_flow_key& key, std::optional<std::uint32_t> vip_id,
                              xlb_ct_value* value) const;
    // The entry at a head slot, when it is one (not claimed, consistent
    // across the read): its slots' words and value; the key needs its VIP.
    struct Raw {
        __u64 head_key = 0, meta = 0, tail_key = 0, tail_meta = 0;
    };
    bool read(std::uint32_t bucket, unsigned s, Raw* raw) const;
    xlb_ct_value value_of(std::uint32_t bucket, unsigned s, const Raw& raw, bool keep) const;
    // Writes the flow (pair: with its aligned pair of slots), claimed as
    // the program does; false when another writer held a slot.
    bool write(std::uint32_t bucket, unsigned s, bool pair, const xlb_ct_ident& id, __u64 meta,
               __u64 tail_meta, const xlb_ct_value& value) const;
    // Empties the entry at a head slot if it still is `expect` under
    // XLB_CT_TAG_MASK and holds `head_key` (any entry when expect is 0);
    // false when another writer held it.
    bool clear_slot(std::uint32_t bucket, unsigned s, __u64 expect, __u64 head_key,
                    bool* cleared) const;

    std::shared_ptr<Mapping> mapping_;
    int fd_ = -1;
    int vips_fd_ = -1;
    std::string name_;
    std::uint32_t elements_ = 0;
};

}  // namespace xlb::bpf
