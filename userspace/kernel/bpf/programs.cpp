// SPDX-License-Identifier: Apache-2.0
#include "xlb/bpf/programs.h"

#include <bpf/bpf.h>
#include <bpf/btf.h>
#include <bpf/libbpf.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <map>
#include <optional>
#include <vector>

#include "conntrack_load.h"
#include "pin_session.h"
#include "xlb/flow_hash.h"
#include "xlb_cookie.skel.h"
#include "xlb_decap.skel.h"
#include "xlb_lb.skel.h"

namespace xlb::bpf {
namespace {

std::string load_hint(int code) {
    if (code == EPERM) return "loading BPF needs root or CAP_BPF + CAP_NET_ADMIN (and CAP_PERFMON)";
    return {};
}

// Before load: with a pin directory, lock it.
Result<std::optional<detail::PinSession>> open_pins(const LoadOptions& options) {
    if (options.pin_dir.empty()) return std::optional<detail::PinSession>{};
    auto session = detail::PinSession::open(options.pin_dir);
    if (!session) return std::unexpected(session.error());
    return std::optional<detail::PinSession>{std::move(*session)};
}

// Then reuse the compatible pins.
Result<void> prepare_pins(std::optional<detail::PinSession>& session, bpf_object* obj) {
    if (!session) return {};
    return session->prepare(obj);
}

// Before load: with a pin directory, lock it and reuse the compatible pins.
Result<std::optional<detail::PinSession>> open_and_prepare_pins(const LoadOptions& options,
                                                                bpf_object* obj) {
    auto session = open_pins(options);
    if (!session) return std::unexpected(session.error());
    if (auto ok = prepare_pins(*session, obj); !ok) return std::unexpected(ok.error());
    return session;
}

// After load: pin what was not reused.
Result<PinReport> commit_pins(std::optional<detail::PinSession>& session) {
    if (!session) return PinReport{};
    return session->commit();
}

std::string load_failure_hint(int code, const std::optional<detail::PinSession>& session) {
    std::string hint = load_hint(code);
    if (session && session->reused() > 0) {
        if (!hint.empty()) hint += "; ";
        hint += "maps pinned in " + session->dir() +
                " were reused: if an incompatible xlb left them, remove them";
    }
    return hint;
}

// The next VIP bucket epoch: from the counter in XLB_VIP_EPOCH_SLOT, never 0.
Result<std::uint32_t> next_vip_epoch(const ArrayMap<std::uint32_t>& buckets) {
    auto last = buckets.get(XLB_VIP_EPOCH_SLOT);
    if (!last) return std::unexpected(last.error());
    std::uint32_t next = *last + 1;
    if (next == 0) next = 1;
    if (auto ok = buckets.put(XLB_VIP_EPOCH_SLOT, next); !ok) return std::unexpected(ok.error());
    return next;
}

// Every bucket's value (and the epoch counter last), in one batched read.
Result<std::vector<std::uint32_t>> read_vip_buckets(const ArrayMap<std::uint32_t>& buckets) {
    std::vector<std::uint32_t> out(XLB_VIP_BUCKETS + 1, 0);
    auto read = lookup_batches<std::uint32_t, std::uint32_t>(
        buckets.fd(), buckets.name(), out.size(),
        [&](std::span<const std::uint32_t> index, std::span<const std::uint32_t> value) {
            for (std::size_t i = 0; i < index.size(); ++i)
                if (index[i] < out.size()) out[index[i]] = value[i];
        });
    if (!read) return std::unexpected(read.error());
    return out;
}

// The VIPs whose address falls in each bucket, with their values, ordered by
// key so that a block's contents depend on the VIPs alone.
using VipsByBucket = std::map<std::uint32_t, std::vector<std::pair<xlb_vip_key, xlb_vip_value>>>;

Result<VipsByBucket> vips_by_bucket(const HashMap<xlb_vip_key, xlb_vip_value>& vips,
                                    std::optional<std::uint32_t> only_bucket = std::nullopt) {
    auto keys = vips.keys();
    if (!keys) return std::unexpected(keys.error());
    VipsByBucket out;
    for (const xlb_vip_key& key : *keys) {
        const std::uint32_t bucket = xlb_vip_bucket(key.addr);
        if (only_bucket && bucket != *only_bucket) continue;
        auto value = vips.get(key);
        if (!value) return std::unexpected(value.error());
        if (*value) out[bucket].emplace_back(key, **value);  // else deleted meanwhile
    }
    for (auto& [bucket, entries] : out)
        std::sort(entries.begin(), entries.end(), [](const auto& a, const auto& b) {
            return std::memcmp(&a.first, &b.first, sizeof a.first) < 0;
        });
    return out;
}

// A bucket's block as it should be for `entries` (seq left 0).
xlb_vip_candidates candidates_block(
    std::span<const std::pair<xlb_vip_key, xlb_vip_value>> entries) {
    xlb_vip_candidates block{};
    if (entries.size() > XLB_VIP_CANDIDATES) {
        block.count = XLB_VIP_CANDIDATES_SPILL;
        return block;
    }
    block.count = static_cast<std::uint32_t>(entries.size());
    for (std::size_t i = 0; i < entries.size(); ++i) {
        const auto& [key, value] = entries[i];
        xlb_vip_candidate& c = block.vip[i];
        std::memcpy(c.addr, key.addr, sizeof c.addr);
        c.port = key.port;
        c.proto = key.proto;
        c.family = key.family;
        c.vip_id = value.vip_id;
        c.flags = value.flags;
    }
    return block;
}

// Rewrites a block in place under its seq (abi.h, XLB_MAP_VIP_CANDIDATES):
// odd while the contents change, even and higher after. A block left odd by
// a crash is made even again.
void write_candidates(xlb_vip_candidates& live, const xlb_vip_candidates& wanted) {
    const std::uint32_t busy = __atomic_load_n(&live.seq, __ATOMIC_RELAXED) | 1U;
    __atomic_store_n(&live.seq, busy, __ATOMIC_RELAXED);
    __atomic_thread_fence(__ATOMIC_RELEASE);
    // Word by word, as the program reads them.
    auto* to = reinterpret_cast<std::uint32_t*>(&live);
    const auto* from = reinterpret_cast<const std::uint32_t*>(&wanted);
    for (std::size_t w = 1; w < sizeof wanted / sizeof(std::uint32_t); ++w)
        __atomic_store_n(&to[w], from[w], __ATOMIC_RELAXED);
    __atomic_store_n(&live.seq, busy + 1, __ATOMIC_RELEASE);
}

// The block's contents, seq aside.
bool same_candidates(const xlb_vip_candidates& a, const xlb_vip_candidates& b) {
    return std::memcmp(reinterpret_cast<const char*>(&a) + sizeof a.seq,
                       reinterpret_cast<const char*>(&b) + sizeof b.seq,
                       sizeof a - sizeof a.seq) == 0;
}

// Makes the VIP buckets match the VIP map at load: every block lists its
// bucket's VIPs (a map new to this load, from an older agent, starts empty;
// a crash may have left one half written), a bucket with a VIP address gets
// a new epoch, the others 0. An upgrade finds VIPs pinned
// without buckets; a crash between a VIP change and its bucket's renewal
// leaves an epoch that entries recorded under the old VIPs still carry. A
// new epoch for every used bucket covers both, at the price of each
// established flow taking the full path once (an agent start re-applies
// every VIP, which renews them anyway). A bucket map new to this load starts
// its epochs at a random point, so no pinned connection-table entry can carry
// one of them.
Result<void> sync_vip_buckets(const HashMap<xlb_vip_key, xlb_vip_value>& vips,
                              const ArrayMap<std::uint32_t>& buckets,
                              std::span<xlb_vip_candidates> blocks) {
    auto last = buckets.get(XLB_VIP_EPOCH_SLOT);
    if (!last) return std::unexpected(last.error());
    if (*last == 0) {
        std::uint32_t seed = 0;
        if (getrandom(&seed, sizeof seed, 0) != sizeof seed)
            return fail_on(errno, "seed the VIP bucket epochs", XLB_MAP_VIP_BUCKETS);
        if (auto ok = buckets.put(XLB_VIP_EPOCH_SLOT, seed == 0 ? 1 : seed); !ok) return ok;
    }
    auto by_bucket = vips_by_bucket(vips);
    if (!by_bucket) return std::unexpected(by_bucket.error());
    std::vector<bool> wanted(XLB_VIP_BUCKETS, false);
    for (std::uint32_t b = 0; b < XLB_VIP_BUCKETS; ++b) {
        auto it = by_bucket->find(b);
        wanted[b] = it != by_bucket->end();
        const xlb_vip_candidates block =
            candidates_block(wanted[b] ? std::span(it->second)
                                       : std::span<const std::pair<xlb_vip_key, xlb_vip_value>>());
        if ((blocks[b].seq & 1U) != 0 || !same_candidates(blocks[b], block))
            write_candidates(blocks[b], block);
    }
    auto current = read_vip_buckets(buckets);
    if (!current) return std::unexpected(current.error());
    for (std::uint32_t b = 0; b < XLB_VIP_BUCKETS; ++b) {
        if (!wanted[b] && (*current)[b] == 0) continue;
        std::uint32_t value = 0;
        if (wanted[b]) {
            auto next = next_vip_epoch(buckets);
            if (!next) return std::unexpected(next.error());
            value = *next;
        }
        if (auto ok = buckets.put(b, value); !ok) return ok;
    }
    return {};
}

// Whether the kernel has what encrypted QUIC configs need: the BPF crypto
// kfuncs and their context type (Linux >= 6.10).
Result<bool> kernel_has_bpf_crypto() {
    btf* vmlinux = btf__load_vmlinux_btf();
    if (vmlinux == nullptr) return fail(errno, "read the kernel's BTF (/sys/kernel/btf/vmlinux)");
    const bool found =
        btf__find_by_name_kind(vmlinux, "bpf_crypto_ctx_create", BTF_KIND_FUNC) > 0 &&
        btf__find_by_name_kind(vmlinux, "bpf_crypto_decrypt", BTF_KIND_FUNC) > 0 &&
        btf__find_by_name_kind(vmlinux, "bpf_crypto_ctx_release", BTF_KIND_FUNC) > 0 &&
        btf__find_by_name_kind(vmlinux, "bpf_crypto_ctx", BTF_KIND_STRUCT) > 0;
    btf__free(vmlinux);
    return found;
}

// XLB_MAP_QUIC_KEYS with a BTF that says what clang 14 cannot: its value's
// crypto_ctx is a referenced kptr to the kernel's struct bpf_crypto_ctx. The
// verifier takes a map's field kinds from the map's BTF, so the program
// (built without the tag) then reads the field as that pointer.
Result<UniqueFd> create_quic_keys_map(std::uint32_t entries) {
    std::unique_ptr<btf, decltype(&btf__free)> types(btf__new_empty(), btf__free);
    if (!types) return fail(errno, "build the BTF of map " XLB_MAP_QUIC_KEYS);
    const int u32 = btf__add_int(types.get(), "unsigned int", 4, 0);
    const int ctx_type = btf__add_struct(types.get(), "bpf_crypto_ctx", 0);
    const int tagged = ctx_type > 0 ? btf__add_type_tag(types.get(), "kptr", ctx_type) : -1;
    const int ptr = tagged > 0 ? btf__add_ptr(types.get(), tagged) : -1;
    const int value =
        ptr > 0 ? btf__add_struct(types.get(), "xlb_quic_key", sizeof(xlb_quic_key)) : -1;
    if (u32 <= 0 || value <= 0 || btf__add_field(types.get(), "crypto_ctx", ptr, 0, 0) != 0 ||
        btf__add_field(types.get(), "generation", u32, 64, 0) != 0 ||
        btf__add_field(types.get(), "pad", u32, 96, 0) != 0)
        return fail(EINVAL, "build the BTF of map " XLB_MAP_QUIC_KEYS);
    if (int rc = btf__load_into_kernel(types.get()); rc != 0)
        return fail(rc, "load the BTF of map " XLB_MAP_QUIC_KEYS);
    LIBBPF_OPTS(bpf_map_create_opts, opts, .btf_fd = static_cast<__u32>(btf__fd(types.get())),
                .btf_key_type_id = static_cast<__u32>(u32),
                .btf_value_type_id = static_cast<__u32>(value));
    const int fd = bpf_map_create(BPF_MAP_TYPE_ARRAY, XLB_MAP_QUIC_KEYS, sizeof(std::uint32_t),
                                  sizeof(xlb_quic_key), entries, &opts);
    if (fd < 0) return fail(errno, "create map " XLB_MAP_QUIC_KEYS);
    return UniqueFd(fd);
}

Result<void> resize(bpf_map* map, std::uint32_t entries) {
    if (int rc = bpf_map__set_max_entries(map, entries); rc != 0)
        return fail(rc, std::string("size map ") + bpf_map__name(map) + " to " +
                            std::to_string(entries) + " entries");
    return {};
}

}  // namespace

void LbProgram::SkeletonDeleter::operator()(xlb_lb* skel) const { xlb_lb__destroy(skel); }
void LbProgram::Unmap::operator()(xlb_vip_candidates* blocks) const {
    munmap(blocks, XLB_VIP_BUCKETS * sizeof(xlb_vip_candidates));
}

LbProgram::LbProgram(std::unique_ptr<xlb_lb, SkeletonDeleter> skel, LbMapSizes sizes,
                     PinReport pins, ConntrackLoad conntrack_load,
                     std::unique_ptr<xlb_vip_candidates, Unmap> candidates,
                     ConntrackTable conntrack)
    : skel_(std::move(skel)),
      sizes_(sizes),
      pins_(std::move(pins)),
      conntrack_load_(std::move(conntrack_load)),
      candidates_(std::move(candidates)),
      conntrack_(std::move(conntrack)) {}
LbProgram::LbProgram(LbProgram&&) noexcept = default;
LbProgram& LbProgram::operator=(LbProgram&&) noexcept = default;
LbProgram::~LbProgram() = default;

Result<LbProgram> LbProgram::load(const LbMapSizes& sizes, const LoadOptions& options) {
    if (sizes.max_vips == 0 || sizes.max_backends == 0 || sizes.conntrack_entries == 0)
        return fail(EINVAL, "size the balancer's maps", "every map needs at least one entry");
    std::unique_ptr<xlb_lb, SkeletonDeleter> skel(xlb_lb__open());
    if (!skel) return fail(errno, "open the xlb_lb BPF object");
    auto& maps = skel->maps;
    for (auto [map, entries] :
         {std::pair{maps.xlb_vips, sizes.max_vips}, std::pair{maps.xlb_rings, sizes.max_vips},
          std::pair{maps.xlb_vip_stats, sizes.max_vips},
          std::pair{maps.xlb_prev_rings, sizes.max_vips},
          std::pair{maps.xlb_vip_hints, sizes.max_vips},
          std::pair{maps.xlb_vip_drops2, sizes.max_vips},
          std::pair{maps.xlb_vip_cookies, sizes.max_vips},
          std::pair{maps.xlb_vip_quic, sizes.max_vips},
          std::pair{maps.xlb_quic_configs, sizes.max_vips * XLB_QUIC_CONFIG_SLOTS},
          std::pair{maps.xlb_quic_keys, sizes.max_vips * XLB_QUIC_CONFIG_SLOTS},
          std::pair{maps.xlb_backends, sizes.max_backends},
          std::pair{maps.xlb_backend_stats2, sizes.max_backends},
          std::pair{maps.xlb_conntrack5,
                    static_cast<std::uint32_t>(XLB_CT_ELEMENTS(sizes.conntrack_entries))}}) {
        if (auto ok = resize(map, entries); !ok) return std::unexpected(ok.error());
    }
    // Encrypted QUIC configs: without the kernel's crypto the program is
    // loaded with its decryption left out (never reached: xlb_quic_crypto).
    auto crypto = options.without_bpf_crypto ? Result<bool>(false) : kernel_has_bpf_crypto();
    if (!crypto) return std::unexpected(crypto.error());
    skel->rodata->xlb_quic_crypto = *crypto ? 1 : 0;
    if (*crypto) {
        auto keys = create_quic_keys_map(sizes.max_vips * XLB_QUIC_CONFIG_SLOTS);
        if (!keys) return std::unexpected(keys.error());
        // libbpf keeps a duplicate of the descriptor.
        if (int rc = bpf_map__reuse_fd(maps.xlb_quic_keys, keys->get()); rc != 0)
            return fail(rc, "use map " XLB_MAP_QUIC_KEYS " in the xlb_lb BPF object");
    }
    auto session = open_pins(options);
    if (!session) return std::unexpected(session.error());
    auto conntrack = detail::ConntrackLoader::plan(*session ? (*session)->dir() : std::string(),
                                                   maps.xlb_conntrack5, options.conntrack_resize);
    if (!conntrack) return std::unexpected(conntrack.error());
    if (auto ok = prepare_pins(*session, skel->obj); !ok) return std::unexpected(ok.error());
    if (int rc = xlb_lb__load(skel.get()); rc != 0)
        return fail(rc, "load the xlb_lb BPF program", load_failure_hint(-rc, *session));
    auto table = ConntrackTable::map(bpf_map__fd(maps.xlb_conntrack5), XLB_MAP_CONNTRACK,
                                     bpf_map__fd(maps.xlb_vips));
    if (!table) return std::unexpected(table.error());
    // A new table, or one whose creator died before writing its header.
    const bool fresh = !table->ready();
    if (fresh) {
        std::uint32_t seed = 0;
        if (getrandom(&seed, sizeof seed, 0) != static_cast<ssize_t>(sizeof seed))
            return fail(errno, "draw the connection table's seed");
        table->format(seed);
    }
    if (auto ok = conntrack->fill(*table); !ok) return std::unexpected(ok.error());
    // A reused table may keep a way an agent was killed while writing.
    const std::uint64_t stuck = fresh ? 0 : table->release_stuck_ways(std::chrono::milliseconds(1));
    auto pins = commit_pins(*session);
    if (!pins) return std::unexpected(pins.error());
    if (auto ok = conntrack->finish(); !ok) return std::unexpected(ok.error());
    // Counters of an older agent whose layout grew (per backend: no
    // new_flows; per VIP drops: six reasons): their successors start at 0,
    // and nothing reads the old maps again.
    if (*session) {
        for (const char* old : {XLB_MAP_BACKEND_STATS_V1, XLB_MAP_VIP_DROPS_V1}) {
            const std::string path = (*session)->dir() + "/" + old;
            if (::unlink(path.c_str()) != 0 && errno != ENOENT)
                return fail(errno, "unpin the older counters", path);
        }
    }
    // Array values are laid out at 8-byte strides: a block is exactly 128.
    static_assert(sizeof(xlb_vip_candidates) % 8 == 0);
    void* mapped = mmap(nullptr, XLB_VIP_BUCKETS * sizeof(xlb_vip_candidates),
                        PROT_READ | PROT_WRITE, MAP_SHARED, bpf_map__fd(maps.xlb_vip_cands), 0);
    if (mapped == MAP_FAILED) return fail(errno, "map into memory", XLB_MAP_VIP_CANDIDATES);
    std::unique_ptr<xlb_vip_candidates, Unmap> candidates(static_cast<xlb_vip_candidates*>(mapped));
    ConntrackLoad conntrack_load = conntrack->result();
    conntrack_load.released_ways = stuck;
    if (stuck > 0)
        conntrack_load.message += "; released " + std::to_string(stuck) +
                                  (stuck == 1 ? " slot" : " slots") +
                                  " a stopped writer had left claimed (their entries dropped)";
    LbProgram program(std::move(skel), sizes, std::move(*pins), std::move(conntrack_load),
                      std::move(candidates), std::move(*table));
    program.quic_crypto_ = *crypto;
    if (auto ok = sync_vip_buckets(program.vips(), program.vip_buckets(), program.blocks()); !ok)
        return std::unexpected(ok.error());
    return program;
}

Result<void> LbProgram::unpin(const std::string& dir) {
    std::unique_ptr<xlb_lb, SkeletonDeleter> skel(xlb_lb__open());
    if (!skel) return fail(errno, "open the xlb_lb BPF object");
    const std::string older[] = {XLB_MAP_CONNTRACK_V4,     XLB_MAP_CONNTRACK_V3,
                                 XLB_MAP_CONNTRACK_V2,     XLB_MAP_CONNTRACK_V1,
                                 XLB_MAP_BACKEND_STATS_V1, XLB_MAP_VIP_DROPS_V1};
    return detail::unpin_object_maps(skel->obj, dir, older);
}

int LbProgram::prog_fd() const { return bpf_program__fd(skel_->progs.xlb_lb); }

ArrayMap<xlb_config> LbProgram::config() const {
    return {bpf_map__fd(skel_->maps.xlb_config), XLB_MAP_CONFIG};
}
Result<std::uint32_t> LbProgram::config_map_id() const {
    bpf_map_info info{};
    __u32 len = sizeof info;
    if (bpf_obj_get_info_by_fd(bpf_map__fd(skel_->maps.xlb_config), &info, &len) != 0)
        return fail(errno, std::string("inspect map ") + XLB_MAP_CONFIG);
    return info.id;
}
HashMap<xlb_vip_key, xlb_vip_value> LbProgram::vips() const {
    return {bpf_map__fd(skel_->maps.xlb_vips), XLB_MAP_VIPS};
}
ArrayMap<std::uint32_t> LbProgram::vip_buckets() const {
    return {bpf_map__fd(skel_->maps.xlb_vip_buckets), XLB_MAP_VIP_BUCKETS};
}

ArrayMap<xlb_vip_candidates> LbProgram::vip_candidates() const {
    return {bpf_map__fd(skel_->maps.xlb_vip_cands), XLB_MAP_VIP_CANDIDATES};
}

std::span<xlb_vip_candidates> LbProgram::blocks() const {
    return {candidates_.get(), XLB_VIP_BUCKETS};
}

Result<bool> LbProgram::refresh_candidates(std::uint32_t bucket) const {
    auto by_bucket = vips_by_bucket(vips(), bucket);
    if (!by_bucket) return std::unexpected(by_bucket.error());
    auto it = by_bucket->find(bucket);
    const bool any = it != by_bucket->end();
    write_candidates(
        blocks()[bucket],
        candidates_block(any ? std::span(it->second)
                             : std::span<const std::pair<xlb_vip_key, xlb_vip_value>>()));
    return any;
}

// The order matters to a packet racing the change: the VIP map first, then
// the bucket's candidates, then its epoch, so that a packet that saw the new
// epoch also sees the new VIPs (the program reads the epoch before matching
// the VIP).
Result<void> LbProgram::put_vip(const xlb_vip_key& key, const xlb_vip_value& value) const {
    if (auto ok = vips().put(key, value); !ok) return ok;
    const std::uint32_t bucket = xlb_vip_bucket(key.addr);
    if (auto ok = refresh_candidates(bucket); !ok) return std::unexpected(ok.error());
    auto epoch = next_vip_epoch(vip_buckets());
    if (!epoch) return std::unexpected(epoch.error());
    return vip_buckets().put(bucket, *epoch);
}

Result<bool> LbProgram::erase_vip(const xlb_vip_key& key) const {
    auto erased = vips().erase(key);
    if (!erased || !*erased) return erased;
    const std::uint32_t bucket = xlb_vip_bucket(key.addr);
    auto any_left = refresh_candidates(bucket);
    if (!any_left) return std::unexpected(any_left.error());
    std::uint32_t value = 0;
    if (*any_left) {
        auto epoch = next_vip_epoch(vip_buckets());
        if (!epoch) return std::unexpected(epoch.error());
        value = *epoch;
    }
    if (auto ok = vip_buckets().put(bucket, value); !ok) return std::unexpected(ok.error());
    return true;
}

Result<void> LbProgram::renew_vip_epoch(const xlb_vip_key& key) const {
    const std::uint32_t bucket = xlb_vip_bucket(key.addr);
    auto current = vip_buckets().get(bucket);
    if (!current) return std::unexpected(current.error());
    if (*current == 0) return {};
    auto epoch = next_vip_epoch(vip_buckets());
    if (!epoch) return std::unexpected(epoch.error());
    return vip_buckets().put(bucket, *epoch);
}

Result<void> LbProgram::clear_vips() const {
    if (auto ok = vips().clear(); !ok) return ok;
    const xlb_vip_candidates empty{};
    for (xlb_vip_candidates& block : blocks())
        if ((block.seq & 1U) != 0 || !same_candidates(block, empty)) write_candidates(block, empty);
    auto current = read_vip_buckets(vip_buckets());
    if (!current) return std::unexpected(current.error());
    for (std::uint32_t b = 0; b < XLB_VIP_BUCKETS; ++b)
        if ((*current)[b] != 0)
            if (auto ok = vip_buckets().put(b, 0); !ok) return ok;
    return {};
}

MapView LbProgram::rings() const { return {bpf_map__fd(skel_->maps.xlb_rings), XLB_MAP_RINGS}; }
MapView LbProgram::prev_rings() const {
    return {bpf_map__fd(skel_->maps.xlb_prev_rings), XLB_MAP_PREV_RINGS};
}
PerCpuArrayMap<std::uint64_t> LbProgram::vip_hints() const {
    return {bpf_map__fd(skel_->maps.xlb_vip_hints), XLB_MAP_VIP_HINTS};
}
ArrayMap<xlb_backend> LbProgram::backends() const {
    return {bpf_map__fd(skel_->maps.xlb_backends), XLB_MAP_BACKENDS};
}
const ConntrackTable& LbProgram::conntrack() const { return conntrack_; }
PerCpuArrayMap<xlb_ct_cpu> LbProgram::ct_cpu() const {
    return {bpf_map__fd(skel_->maps.xlb_ct_cpu), XLB_MAP_CT_CPU};
}
void LbProgram::set_ct_clock(std::uint32_t units) const {
    // One aligned 32-bit store into the mmap()ed .bss: the program reads
    // either the old time or the new one.
    __atomic_store_n(&skel_->bss->xlb_ct_clock, units, __ATOMIC_RELAXED);
}
void LbProgram::note_conntrack_erased() const {
    // The program's clock now, read after the deletes: every copy it took
    // of a deleted entry was checked at this time or before.
    const std::uint32_t now = __atomic_load_n(&skel_->bss->xlb_ct_clock, __ATOMIC_RELAXED);
    __atomic_store_n(&skel_->bss->xlb_ct_erased, now, __ATOMIC_RELAXED);
}
PerCpuArrayMap<std::uint64_t> LbProgram::outcomes() const {
    return {bpf_map__fd(skel_->maps.xlb_stats), XLB_MAP_STATS};
}
PerCpuArrayMap<xlb_vip_stats> LbProgram::vip_stats() const {
    return {bpf_map__fd(skel_->maps.xlb_vip_stats), XLB_MAP_VIP_STATS};
}
PerCpuArrayMap<xlb_backend_stats> LbProgram::backend_stats() const {
    return {bpf_map__fd(skel_->maps.xlb_backend_stats2), XLB_MAP_BACKEND_STATS};
}
PerCpuArrayMap<xlb_vip_drops> LbProgram::vip_drops() const {
    return {bpf_map__fd(skel_->maps.xlb_vip_drops2), XLB_MAP_VIP_DROPS};
}
PerCpuArrayMap<xlb_vip_cookie_stats> LbProgram::vip_cookies() const {
    return {bpf_map__fd(skel_->maps.xlb_vip_cookies), XLB_MAP_VIP_COOKIES};
}
HashMap<xlb_src_range_key, std::uint8_t> LbProgram::source_ranges() const {
    return {bpf_map__fd(skel_->maps.xlb_src_ranges), XLB_MAP_SOURCE_RANGES};
}
ArrayMap<xlb_quic_config> LbProgram::quic_configs() const {
    return {bpf_map__fd(skel_->maps.xlb_quic_configs), XLB_MAP_QUIC_CONFIGS};
}
HashMap<xlb_quic_server_key, std::uint32_t> LbProgram::quic_servers() const {
    return {bpf_map__fd(skel_->maps.xlb_quic_servers), XLB_MAP_QUIC_SERVERS};
}
PerCpuArrayMap<xlb_vip_quic_stats> LbProgram::vip_quic() const {
    return {bpf_map__fd(skel_->maps.xlb_vip_quic), XLB_MAP_VIP_QUIC};
}
bool LbProgram::quic_crypto_available() const { return quic_crypto_; }

namespace {
Result<void> run_quic_key_install(bpf_program* prog, xlb_quic_key_args& args, bool crypto) {
    const std::string what = "install the AES key of QUIC config slot " + std::to_string(args.slot);
    if (!crypto)
        return fail(EOPNOTSUPP, what,
                    "this kernel has no BPF crypto kfuncs (bpf_crypto_ctx_create, "
                    "bpf_crypto_decrypt: Linux 6.10 or later)");
    // A syscall program's run writes its context back through ctx_in.
    LIBBPF_OPTS(bpf_test_run_opts, run, .ctx_in = &args, .ctx_size_in = sizeof args);
    if (bpf_prog_test_run_opts(bpf_program__fd(prog), &run) != 0) return fail(errno, what);
    if (args.err == -ENOENT)
        return fail(ENOENT, what, "no such slot (VIP id beyond the map's max_vips)");
    if (args.err != 0)
        return fail(-args.err, what, "bpf_crypto_ctx_create(\"ecb(aes)\") refused it");
    return {};
}
}  // namespace

Result<void> LbProgram::install_quic_key(std::uint32_t slot,
                                         std::span<const std::uint8_t, 16> key) const {
    xlb_quic_key_args args{};
    args.slot = slot;
    std::memcpy(args.key, key.data(), sizeof args.key);
    return run_quic_key_install(skel_->progs.xlb_quic_key_install, args, quic_crypto_);
}
Result<void> LbProgram::clear_quic_key(std::uint32_t slot) const {
    if (!quic_crypto_) return {};  // nothing can have been installed
    xlb_quic_key_args args{};
    args.slot = slot;
    args.clear = 1;
    return run_quic_key_install(skel_->progs.xlb_quic_key_install, args, quic_crypto_);
}

void LbProgram::set_syn_flood(std::uint32_t state) const {
    __atomic_store_n(&skel_->bss->xlb_syn_flood, state, __ATOMIC_RELAXED);
}
void LbProgram::start_capture(const xlb_capture_filter& filter) const {
    stop_capture();
    auto* bss = skel_->data_capture;
    __atomic_store_n(&bss->xlb_capture_matched, 0, __ATOMIC_RELAXED);
    __atomic_store_n(&bss->xlb_capture_lost, 0, __ATOMIC_RELAXED);
    std::memcpy(&bss->xlb_capture_filter, &filter, sizeof filter);
    // The filter is complete before a packet can see the flag set.
    __atomic_store_n(&bss->xlb_capture_on, 1U, __ATOMIC_RELEASE);
}
void LbProgram::stop_capture() const {
    __atomic_store_n(&skel_->data_capture->xlb_capture_on, 0U, __ATOMIC_RELEASE);
}
bool LbProgram::capture_on() const {
    return __atomic_load_n(&skel_->data_capture->xlb_capture_on, __ATOMIC_ACQUIRE) != 0;
}
LbProgram::CaptureCounters LbProgram::capture_counters() const {
    return {__atomic_load_n(&skel_->data_capture->xlb_capture_matched, __ATOMIC_RELAXED),
            __atomic_load_n(&skel_->data_capture->xlb_capture_lost, __ATOMIC_RELAXED)};
}
int LbProgram::capture_ring_fd() const { return bpf_map__fd(skel_->maps.xlb_capture_ring); }
std::vector<std::pair<std::string, int>> LbProgram::map_fds() const {
    std::vector<std::pair<std::string, int>> out;
    bpf_map* map = nullptr;
    bpf_object__for_each_map(map, skel_->obj)
        out.emplace_back(bpf_map__name(map), bpf_map__fd(map));
    return out;
}

void DecapProgram::SkeletonDeleter::operator()(xlb_decap* skel) const { xlb_decap__destroy(skel); }

DecapProgram::DecapProgram(std::unique_ptr<xlb_decap, SkeletonDeleter> skel, PinReport pins)
    : skel_(std::move(skel)), pins_(std::move(pins)) {}
DecapProgram::DecapProgram(DecapProgram&&) noexcept = default;
DecapProgram& DecapProgram::operator=(DecapProgram&&) noexcept = default;
DecapProgram::~DecapProgram() = default;

Result<DecapProgram> DecapProgram::load(const LoadOptions& options) {
    std::unique_ptr<xlb_decap, SkeletonDeleter> skel(xlb_decap__open());
    if (!skel) return fail(errno, "open the xlb_decap BPF object");
    auto session = open_and_prepare_pins(options, skel->obj);
    if (!session) return std::unexpected(session.error());
    if (int rc = xlb_decap__load(skel.get()); rc != 0)
        return fail(rc, "load the xlb_decap BPF program", load_failure_hint(-rc, *session));
    auto pins = commit_pins(*session);
    if (!pins) return std::unexpected(pins.error());
    return DecapProgram(std::move(skel), std::move(*pins));
}

Result<void> DecapProgram::unpin(const std::string& dir) {
    std::unique_ptr<xlb_decap, SkeletonDeleter> skel(xlb_decap__open());
    if (!skel) return fail(errno, "open the xlb_decap BPF object");
    return detail::unpin_object_maps(skel->obj, dir);
}

int DecapProgram::prog_fd() const { return bpf_program__fd(skel_->progs.xlb_decap); }

HashMap<xlb_decap_addr, std::uint8_t> DecapProgram::local_addresses() const {
    return {bpf_map__fd(skel_->maps.xlb_decap_addrs), XLB_MAP_DECAP_ADDRS};
}
PerCpuArrayMap<std::uint64_t> DecapProgram::outcomes() const {
    return {bpf_map__fd(skel_->maps.xlb_decap_stats), XLB_MAP_DECAP_STATS};
}
void DecapProgram::set_gue_port(std::uint16_t port) {
    // One aligned 16-bit store into the mmap()ed .data the program reads.
    __atomic_store_n(&skel_->data->xlb_gue_port, port, __ATOMIC_RELAXED);
}
std::uint16_t DecapProgram::gue_port() const {
    return __atomic_load_n(&skel_->data->xlb_gue_port, __ATOMIC_RELAXED);
}
void DecapProgram::set_next_hop_mac(const std::optional<std::array<std::uint8_t, 6>>& mac) {
    // Set before the program is attached (xlb-decap, the tests); a change
    // while packets flow could pair two halves of different MACs for one
    // packet, which a supervisor restart avoids.
    const std::array<std::uint8_t, 6> bytes = mac.value_or(std::array<std::uint8_t, 6>{});
    for (std::size_t i = 0; i < bytes.size(); ++i)
        __atomic_store_n(&skel_->bss->xlb_next_hop_mac[i], bytes[i], __ATOMIC_RELAXED);
}
void DecapProgram::set_cookie_acceptor(bool attached) {
    __atomic_store_n(&skel_->bss->xlb_cookie_acceptor, attached ? 1 : 0, __ATOMIC_RELAXED);
}
bool DecapProgram::cookie_acceptor() const {
    return __atomic_load_n(&skel_->bss->xlb_cookie_acceptor, __ATOMIC_RELAXED) != 0;
}
HashMap<xlb_cookie_ack_key, xlb_gue_cookie> DecapProgram::cookie_acks() const {
    return {bpf_map__fd(skel_->maps.xlb_cookie_acks), XLB_MAP_COOKIE_ACKS};
}
ArrayMap<std::uint64_t> DecapProgram::cookie_pending() const {
    return {bpf_map__fd(skel_->maps.xlb_cookie_pending), XLB_MAP_COOKIE_PENDING};
}
Result<std::vector<std::pair<xlb_decap_addr, std::uint64_t>>> DecapProgram::passed_on() const {
    const int fd = bpf_map__fd(skel_->maps.xlb_decap_pass);
    HashMap<xlb_decap_addr, std::uint64_t> map{fd, XLB_MAP_DECAP_PASSED};
    auto keys = map.keys();
    if (!keys) return std::unexpected(keys.error());
    std::vector<std::pair<xlb_decap_addr, std::uint64_t>> out;
    std::vector<std::uint64_t> per_cpu(possible_cpu_count());
    for (const xlb_decap_addr& key : *keys) {
        if (bpf_map_lookup_elem(fd, &key, per_cpu.data()) != 0) {
            if (errno == ENOENT) continue;  // evicted meanwhile
            return fail_on(errno, "read", XLB_MAP_DECAP_PASSED);
        }
        std::uint64_t total = 0;
        for (std::uint64_t n : per_cpu) total += n;
        out.emplace_back(key, total);
    }
    return out;
}

// ---- CookieProgram ----------------------------------------------------------------

void CookieProgram::SkeletonDeleter::operator()(xlb_cookie* skel) const {
    xlb_cookie__destroy(skel);
}

CookieProgram::CookieProgram(std::unique_ptr<xlb_cookie, SkeletonDeleter> skel)
    : skel_(std::move(skel)) {}
CookieProgram::CookieProgram(CookieProgram&&) noexcept = default;
CookieProgram& CookieProgram::operator=(CookieProgram&&) noexcept = default;
CookieProgram::~CookieProgram() = default;

Result<bool> CookieProgram::kernel_supports() {
    btf* vmlinux = btf__load_vmlinux_btf();
    if (vmlinux == nullptr) return fail(errno, "read the kernel's BTF (/sys/kernel/btf/vmlinux)");
    const bool found =
        btf__find_by_name_kind(vmlinux, "bpf_sk_assign_tcp_reqsk", BTF_KIND_FUNC) > 0;
    btf__free(vmlinux);
    return found;
}

Result<CookieProgram> CookieProgram::load(const DecapProgram& decap) {
    auto supported = kernel_supports();
    if (!supported) return std::unexpected(supported.error());
    if (!*supported)
        return fail(EOPNOTSUPP, "load the xlb_cookie BPF program",
                    "this kernel has no kfunc bpf_sk_assign_tcp_reqsk (Linux 6.9 or later, "
                    "built with CONFIG_SYN_COOKIES)");
    std::unique_ptr<xlb_cookie, SkeletonDeleter> skel(xlb_cookie__open());
    if (!skel) return fail(errno, "open the xlb_cookie BPF object");
    for (auto [map, fd] : {std::pair{skel->maps.xlb_cookie_acks, decap.cookie_acks().fd()},
                           std::pair{skel->maps.xlb_cookie_pending, decap.cookie_pending().fd()}}) {
        if (int rc = bpf_map__reuse_fd(map, fd); rc != 0)
            return fail(rc, std::string("share xlb_decap's map ") + bpf_map__name(map) + " (fd " +
                                std::to_string(fd) + ") with xlb_cookie");
    }
    if (int rc = xlb_cookie__load(skel.get()); rc != 0)
        return fail(rc, "load the xlb_cookie BPF program", load_hint(-rc));
    return CookieProgram(std::move(skel));
}

int CookieProgram::prog_fd() const { return bpf_program__fd(skel_->progs.xlb_cookie); }

PerCpuArrayMap<std::uint64_t> CookieProgram::outcomes() const {
    return {bpf_map__fd(skel_->maps.xlb_cookie_stats), XLB_MAP_COOKIE_STATS};
}

}  // namespace xlb::bpf
