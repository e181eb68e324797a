// SPDX-License-Identifier: Apache-2.0
// Owners of the loaded BPF objects (libbpf skeletons) with typed views of
// every map. Tests, benchmarks and the agent use these and nothing lower.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "xlb/abi.h"
#include "xlb/bpf/conntrack_table.h"
#include "xlb/bpf/error.h"
#include "xlb/bpf/maps.h"
#include "xlb/bpf/pin.h"

struct xlb_lb;
struct xlb_decap;
struct xlb_cookie;

namespace xlb::bpf {

struct LbMapSizes {
    std::uint32_t max_vips = XLB_MAX_VIPS_DEFAULT;
    std::uint32_t max_backends = XLB_MAX_BACKENDS_DEFAULT;
    std::uint32_t conntrack_entries = XLB_CONNTRACK_DEFAULT;
};

// What a load did with the connection table (XLB_MAP_CONNTRACK). Without a
// pin directory it is always a new table of the requested size.
struct ConntrackLoad {
    enum class Outcome {
        kCreated,         // a new, empty table (nothing usable was pinned)
        kReused,          // the pinned table, same size, entries intact
        kKeptPinnedSize,  // kRefuse: the pinned table at its own size, not the requested one
        kResized,         // kReplace: a new table of the requested size, entries copied
        kMigrated,        // an older layout's entries copied into a new table, then unpinned
        kOldUnreadable,   // an older layout's pin that could not be read: a new, empty table
    };
    Outcome outcome = Outcome::kCreated;
    std::uint32_t capacity = 0;   // max_entries of the table now in use
    std::uint32_t requested = 0;  // LbMapSizes::conntrack_entries
    int old_layout = 0;           // kMigrated, kOldUnreadable: 1 or 2
    std::uint64_t copied = 0;     // entries carried over (kResized, kMigrated)
    std::uint64_t dropped = 0;    // entries that did not fit or could not be read
    // Ways of a reused table left claimed by a writer that stopped half way
    // (an agent killed mid-write), emptied and released.
    std::uint64_t released_ways = 0;
    std::string message;  // one line for the log

    // Whether the log line deserves the warning level: the table is not what
    // was asked for, or entries were lost.
    bool warn() const;
};
const char* to_string(ConntrackLoad::Outcome);

class LbProgram {
public:
    // Opens the embedded object, sizes the maps and loads it into the kernel.
    // With options.pin_dir, compatible maps pinned there are reused and every
    // map is pinned there after load (see xlb/bpf/pin.h); pins() tells which.
    static Result<LbProgram> load(const LbMapSizes& sizes = {}, const LoadOptions& options = {});

    // Removes the balancer's map pins from dir (and connection tables of
    // older layouts left there), then dir when it is empty (e.g. --detach-on-exit).
    // A missing dir or pin is not an error. The maps
    // themselves live on while a program or descriptor still uses them.
    static Result<void> unpin(const std::string& dir);

    LbProgram(LbProgram&&) noexcept;
    LbProgram& operator=(LbProgram&&) noexcept;
    ~LbProgram();

    int prog_fd() const;
    const LbMapSizes& sizes() const { return sizes_; }
    const PinReport& pins() const { return pins_; }
    const ConntrackLoad& conntrack_load() const { return conntrack_load_; }

    ArrayMap<xlb_config> config() const;
    // The kernel's id of the configuration map: a program attached somewhere
    // that uses it is this program or an earlier one over the same pins.
    Result<std::uint32_t> config_map_id() const;
    // Read-only use: change VIPs with put_vip / erase_vip / clear_vips, which
    // keep the VIP buckets (abi.h, XLB_MAP_VIP_BUCKETS) in step.
    HashMap<xlb_vip_key, xlb_vip_value> vips() const;
    ArrayMap<std::uint32_t> vip_buckets() const;
    // The buckets' VIP candidates (abi.h, XLB_MAP_VIP_CANDIDATES), which the
    // same calls keep in step (through a mapping of the map, under each
    // block's seq). Read-only use too, but for tests.
    ArrayMap<xlb_vip_candidates> vip_candidates() const;
    // Adds or changes a VIP, rewrites its bucket's candidates, then renews
    // the bucket's epoch, so that connection-table entries recorded under the
    // old VIPs there take the full path once. One caller at a time: a
    // block's seq allows one writer.
    Result<void> put_vip(const xlb_vip_key& key, const xlb_vip_value& value) const;
    // Removes a VIP (true) or finds none (false); its bucket is emptied when
    // no other VIP address falls in it, else renewed.
    Result<bool> erase_vip(const xlb_vip_key& key) const;
    Result<void> clear_vips() const;
    // Renews the epoch of the bucket of a VIP's address (abi.h,
    // XLB_MAP_VIP_BUCKETS) after a change the data path's cached flows must
    // see, e.g. its source lists; an empty bucket (no VIP there yet) stays
    // empty.
    Result<void> renew_vip_epoch(const xlb_vip_key& key) const;
    MapView rings() const;  // ARRAY_OF_MAPS: use ring.h to publish
    // Each VIP's previous ring, kept for second chance (abi.h, struct
    // xlb_gue_hint); same layout as rings().
    MapView prev_rings() const;
    ArrayMap<xlb_backend> backends() const;
    // The connection table (abi.h, struct xlb_ct_set), mapped.
    const ConntrackTable& conntrack() const;
    PerCpuArrayMap<xlb_ct_cpu> ct_cpu() const;  // the insert budget, one entry
    // Sets the program's entry-time clock (abi.h, `xlb_ct_clock`), in
    // XLB_CT_TIME_SHIFT units; CtClockTicker (ct_clock.h) keeps it current.
    void set_ct_clock(std::uint32_t units) const;
    // After entries were deleted from the connection table: the data path's
    // cached copies of entries (abi.h, XLB_MAP_FLOW_CACHE) taken until now
    // are no longer used.
    void note_conntrack_erased() const;
    PerCpuArrayMap<std::uint64_t> outcomes() const;
    PerCpuArrayMap<xlb_vip_stats> vip_stats() const;
    PerCpuArrayMap<xlb_backend_stats> backend_stats() const;
    // Per VIP id: packets sent with a second-chance hint.
    PerCpuArrayMap<std::uint64_t> vip_hints() const;
    // Per VIP id: drops by reason (abi.h, struct xlb_vip_drops).
    PerCpuArrayMap<xlb_vip_drops> vip_drops() const;
    // Per VIP id: SYN cookies (abi.h, struct xlb_vip_cookie_stats).
    PerCpuArrayMap<xlb_vip_cookie_stats> vip_cookies() const;
    // Per-VIP source lists (abi.h, struct xlb_src_range_key): an LPM trie.
    HashMap<xlb_src_range_key, std::uint8_t> source_ranges() const;
    // QUIC connection-ID routing (abi.h, struct xlb_quic_config): the
    // configs by slot (vip_id * XLB_QUIC_CONFIG_SLOTS + config id), the
    // backend of each server id, per-VIP counters.
    ArrayMap<xlb_quic_config> quic_configs() const;
    HashMap<xlb_quic_server_key, std::uint32_t> quic_servers() const;
    PerCpuArrayMap<xlb_vip_quic_stats> vip_quic() const;
    // Whether this kernel has the BPF crypto kfuncs that encrypted configs
    // need (bpf_crypto_ctx_create, bpf_crypto_decrypt: Linux >= 6.10 with
    // CONFIG_CRYPTO_ECB); without them the program is loaded with its
    // decryption left out and install_quic_key fails.
    bool quic_crypto_available() const;
    // Makes the AES-128-ECB context of an encrypted config's slot from its
    // key (replacing any), or removes it. Per loaded program: the keys are
    // installed again after every load.
    Result<void> install_quic_key(std::uint32_t slot, std::span<const std::uint8_t, 16> key) const;
    Result<void> clear_quic_key(std::uint32_t slot) const;
    // Writes the program's `xlb_syn_flood` (abi.h, XLB_SYN_FLOOD_*):
    // whether VIPs with cookies on `auto` answer SYNs now.
    void set_syn_flood(std::uint32_t state) const;

    // Packet capture (abi.h, struct xlb_capture_filter). start_capture
    // zeroes the counters, writes the filter, then turns the capture on;
    // stop_capture turns it off. One capture at a time: the caller (the
    // capture library) keeps it so.
    void start_capture(const xlb_capture_filter& filter) const;
    void stop_capture() const;
    bool capture_on() const;
    struct CaptureCounters {
        std::uint64_t matched = 0;  // packets the filter matched
        std::uint64_t lost = 0;     // records the ring had no room for
    };
    CaptureCounters capture_counters() const;
    int capture_ring_fd() const;
    // Every map of the loaded object by its name (".bss" and the other
    // global-variable maps under their libbpf names): for a second copy of
    // the program that shares them (xlb-bench-xdp's baseline).
    std::vector<std::pair<std::string, int>> map_fds() const;

private:
    struct SkeletonDeleter {
        void operator()(xlb_lb* skel) const;
    };
    struct Unmap {
        void operator()(xlb_vip_candidates* blocks) const;
    };
    LbProgram(std::unique_ptr<xlb_lb, SkeletonDeleter> skel, LbMapSizes sizes, PinReport pins,
              ConntrackLoad conntrack_load, std::unique_ptr<xlb_vip_candidates, Unmap> candidates,
              ConntrackTable conntrack);

    std::span<xlb_vip_candidates> blocks() const;
    // Rewrites the bucket's candidates from the VIP map; returns whether any
    // VIP address falls in it.
    Result<bool> refresh_candidates(std::uint32_t bucket) const;

    std::unique_ptr<xlb_lb, SkeletonDeleter> skel_;
    LbMapSizes sizes_;
    PinReport pins_;
    ConntrackLoad conntrack_load_;
    std::unique_ptr<xlb_vip_candidates, Unmap> candidates_;  // XLB_VIP_BUCKETS blocks
    ConntrackTable conntrack_;
    bool quic_crypto_ = false;
};

class DecapProgram {
public:
    // Same pinning behaviour as LbProgram::load.
    static Result<DecapProgram> load(const LoadOptions& options = {});
    static Result<void> unpin(const std::string& dir);

    DecapProgram(DecapProgram&&) noexcept;
    DecapProgram& operator=(DecapProgram&&) noexcept;
    ~DecapProgram();

    int prog_fd() const;
    const PinReport& pins() const { return pins_; }
    HashMap<xlb_decap_addr, std::uint8_t> local_addresses() const;
    PerCpuArrayMap<std::uint64_t> outcomes() const;
    // The UDP port GUE packets arrive on (default XLB_GUE_PORT_DEFAULT);
    // 0: only IP-in-IP is decapsulated. Takes effect with the next packet.
    void set_gue_port(std::uint16_t port);
    std::uint16_t gue_port() const;
    // Second chance: the MAC of this host's next hop, where packets whose
    // hint names another backend and whose flow this host does not know are
    // sent on (abi.h, struct xlb_gue_hint). nullopt (the default): none;
    // such packets are decapsulated here. Takes effect with the next packet.
    void set_next_hop_mac(const std::optional<std::array<std::uint8_t, 6>>& mac);
    // Packets passed on so far, per hinted backend address (summed over CPUs).
    Result<std::vector<std::pair<xlb_decap_addr, std::uint64_t>>> passed_on() const;
    // SYN cookies: whether a cookie acceptor (CookieProgram) is attached to
    // the interface's tc ingress. Without one (the default) ACKs carrying
    // cookie data are dropped (XLB_DECAP_OUT_DROP_COOKIE_NO_ACCEPTOR): the
    // kernel would answer them with a reset. Set it once the acceptor is
    // attached, clear it before detaching it.
    void set_cookie_acceptor(bool attached);
    bool cookie_acceptor() const;
    // Cookie data of decapsulated ACKs not yet taken by the acceptor, and
    // their count (abi.h, XLB_MAP_COOKIE_ACKS): shared with CookieProgram.
    HashMap<xlb_cookie_ack_key, xlb_gue_cookie> cookie_acks() const;
    ArrayMap<std::uint64_t> cookie_pending() const;

private:
    struct SkeletonDeleter {
        void operator()(xlb_decap* skel) const;
    };
    DecapProgram(std::unique_ptr<xlb_decap, SkeletonDeleter> skel, PinReport pins);

    std::unique_ptr<xlb_decap, SkeletonDeleter> skel_;
    PinReport pins_;
};

// The backend's cookie acceptor (bpf/xlb_cookie.bpf.c): a tc ingress program
// that turns a cookie ACK decapsulated by xlb_decap into a connection
// (bpf_sk_assign_tcp_reqsk). Attach it with TcAttachment (probe.h) at
// cookie_tc_options() on decap's interface, then
// DecapProgram::set_cookie_acceptor(true).
class CookieProgram {
public:
    // Loads it with decap's cookie maps (the same kernel maps). Fails with
    // EOPNOTSUPP, saying so, on a kernel without the kfunc (kernel_supports()).
    static Result<CookieProgram> load(const DecapProgram& decap);
    // Whether the running kernel has bpf_sk_assign_tcp_reqsk (Linux 6.9 or
    // later built with SYN cookies), from its BTF.
    static Result<bool> kernel_supports();

    CookieProgram(CookieProgram&&) noexcept;
    CookieProgram& operator=(CookieProgram&&) noexcept;
    ~CookieProgram();

    int prog_fd() const;
    // Per-CPU counters indexed by enum xlb_cookie_outcome.
    PerCpuArrayMap<std::uint64_t> outcomes() const;

private:
    struct SkeletonDeleter {
        void operator()(xlb_cookie* skel) const;
    };
    explicit CookieProgram(std::unique_ptr<xlb_cookie, SkeletonDeleter> skel);

    std::unique_ptr<xlb_cookie, SkeletonDeleter> skel_;
};

// Sums a per-CPU counter vector.
template <typename V, typename F>
auto sum_per_cpu(const std::vector<V>& per_cpu, F field) {
    decltype(field(per_cpu.front())) total{};
    for (const V& v : per_cpu) total += field(v);
    return total;
}

}  // namespace xlb::bpf
