// SPDX-License-Identifier: Apache-2.0
// The data path's set-up: one builder for every value of the ABI
// (include/xlb/abi.h) that userspace writes into the BPF maps or computes as
// the program does, and the sums of the per-CPU counters. Used by xlbd (the
// agent and the reconciler), `xlbctl lookup`, xlb-demo, xlb-bench-xdp and
// the tests, so that none of them spells a key, a flag or a Maglev identity
// its own way. Pure functions, no I/O.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "xlb/abi.h"
#include "xlb/config/model.h"
#include "xlb/error.h"
#include "xlb/maglev/maglev.h"
#include "xlb/net/address.h"

namespace xlb::datapath {

// A backend's Maglev identity, what the table is built from: its hash_key
// when set, else its address in the text form of net::IpAddress::to_string()
// ("10.0.0.1", "2001:db8::1", no port). A contract between LB hosts: every
// host must spell it the same, or their tables (and flows' backends) differ.
// Defined next to config::BackendSpec, whose identity() is this.
using config::maglev_identity;

// The connection table's insert budget per CPU (xlb_config.ct_insert_rate
// and ct_insert_burst): entries per second and bucket depth; rate 0 means
// unlimited.
struct CtBudget {
    std::uint32_t rate = 0;
    std::uint32_t burst = 0;
};

// The budget from the settings (conntrack.insert_rate / insert_burst, 0 =
// derived) for a table of `capacity` entries on `possible_cpus` CPUs. The
// derived rate lets all CPUs together fill 2% of the table per second, so a
// flood of new flows replaces idle entries (an insert takes the way of its
// set seen longest ago, and live flows are refreshed twice a second), while
// a legitimate ramp of that size is rare; at least 1 per CPU.
// The derived burst is one second's worth.
CtBudget ct_insert_budget(std::uint32_t rate_setting, std::uint32_t burst_setting,
                          std::uint32_t capacity, std::uint32_t possible_cpus);

// The data plane's global configuration (map XLB_MAP_CONFIG, key 0) from the
// settings, the next hop's MAC and the connection table's insert budget
// (default: unlimited). No encapsulation source for a family: the address 0
// with a full-length prefix.
xlb_config make_config(const config::Settings& settings, const net::MacAddress& next_hop,
                       CtBudget budget = {});

// A VIP's key in XLB_MAP_VIPS: address, port (network order; 0: every
// port), IP protocol number, family.
xlb_vip_key vip_key(const net::IpAddress& address, std::uint16_t port, std::uint8_t protocol);
xlb_vip_key vip_key(const config::VipSpec& vip);
// XLB_VIP_F_* of a VIP: no connection table, source-only hash, source lists,
// QUIC routing (a UDP VIP with configs) and its SYN cookie mode (config::effective_syn_cookies,
// which needs the settings' encap: without it, cookies are off; the flow hash reads only the hash
// flags, so `xlbctl lookup` can leave it out).
std::uint32_t vip_flags(const config::VipSpec& vip, config::Encap encap = config::Encap::kIpip);
xlb_vip_value vip_value(const config::VipSpec& vip, std::uint32_t vip_id,
                        config::Encap encap = config::Encap::kIpip);

// One entry of the source-range trie (XLB_MAP_SOURCE_RANGES).
struct SourceRangeEntry {
    xlb_src_range_key key{};
    std::uint8_t verdict = 0;  // XLB_SOURCE_ALLOW or XLB_SOURCE_DENY
    bool operator==(const SourceRangeEntry& other) const;
};
// A prefix as a key of the trie: the VIP id, then the address as IPv6 (IPv4
// as ::ffff:a.b.c.d/96 + length).
xlb_src_range_key source_range_key(std::uint32_t vip_id, const net::Prefix& prefix);
// The trie entries of a VIP's allow_sources and deny_sources, by the rule in
// abi.h above struct xlb_src_range_key: each deny prefix DENY, each allow
// prefix that no deny prefix covers ALLOW, and with an allow list the VIP
// family's whole space DENY (unless an allow prefix is that space). Sorted by
// key, no key twice; empty when the VIP has no lists.
std::vector<SourceRangeEntry> source_range_entries(const config::VipSpec& vip,
                                                   std::uint32_t vip_id);

// QUIC connection-ID routing (abi.h, XLB_MAP_QUIC_CONFIGS and
// XLB_MAP_QUIC_SERVERS). The slot of a VIP's config id in the configs map
// and in the per-program key map.
std::uint32_t quic_slot(std::uint32_t vip_id, std::uint8_t config_id);

struct QuicConfigEntry {
    std::uint32_t slot = 0;
    xlb_quic_config value{};  // all zero: no config of that id
    bool operator==(const QuicConfigEntry& other) const;
};
// Every slot of a VIP (XLB_QUIC_CONFIG_SLOTS of them, in slot order): the
// VIP's config of that id, or zero, so that writing them all also clears a
// config id the VIP no longer has. All zero for a VIP without QUIC routing.
std::vector<QuicConfigEntry> quic_config_entries(const config::VipSpec& vip, std::uint32_t vip_id);

struct QuicServerEntry {
    xlb_quic_server_key key{};
    std::uint32_t backend_id = 0;
    bool operator==(const QuicServerEntry& other) const;
};
// Whether a backend's server id goes into XLB_MAP_QUIC_SERVERS: it has
// one and is not disabled (it still needs a backend id to be written).
bool quic_server_published(const config::BackendSpec& backend);

// The server ids of a VIP with QUIC routing and the backend ids that own
// them. backend_ids: parallel to vip.backends, the id each backend has in
// XLB_MAP_BACKENDS (nullopt: none, e.g. disabled). A backend without a
// server_id or an id, or disabled, has no entry. Sorted by server id; a
// server id twice (refused by the validation) keeps its first backend.
// Empty for a VIP without QUIC routing.
std::vector<QuicServerEntry> quic_server_entries(
    const config::VipSpec& vip, std::uint32_t vip_id,
    std::span<const std::optional<std::uint32_t>> backend_ids);

// The 16-octet AES key of an encrypted config, installed at its slot.
using QuicKey = std::array<std::uint8_t, 16>;
struct QuicKeyEntry {
    std::uint32_t slot = 0;
    QuicKey key{};
    bool operator==(const QuicKeyEntry&) const = default;
};

// A flow's key (connection table, flow hash): as the program fills it from a
// packet, ports in network order, the family of the source.
xlb_flow_key flow_key(const net::Endpoint& src, const net::Endpoint& dst, std::uint8_t protocol);
// A client's flow to a VIP on `dport` (the VIP's own port unless it is a
// wildcard): what `xlbctl lookup` computes.
xlb_flow_key flow_key(const config::VipSpec& vip, const net::Endpoint& src, std::uint16_t dport);

// A backend's entry in XLB_MAP_BACKENDS; a released id keeps only its
// generation (family 0: the program drops what still names it).
// down: its flows do not stay (XLB_BACKEND_F_DOWN: no second-chance hint names it).
xlb_backend backend_entry(const net::IpAddress& address, std::uint32_t generation,
                          bool down = false);
xlb_backend released_backend_entry(std::uint32_t generation);

// One backend of a ring: its id in XLB_MAP_BACKENDS, its identity's parts
// and its weight.
struct RingMember {
    std::uint32_t backend_id = 0;
    net::IpAddress address;
    std::string hash_key;  // empty: the address
    std::uint32_t weight = 1;
};

struct Ring {
    std::vector<std::uint32_t> slots;             // backend id per slot, as published
    std::vector<std::uint32_t> slots_per_member;  // parallel to the members
    std::uint64_t checksum = 0;                   // maglev::Table::checksum
};

// The Maglev ring of the members, keyed by maglev_identity(): the table xlbd
// publishes for the same backends and weights.
Result<Ring> build_ring(std::span<const RingMember> members,
                        std::uint32_t ring_size = maglev::kDefaultRingSize);

// The slot the program reads for a flow (flow hash with the VIP's flags and
// the seed, then xlb_ring_slot), as an index into Ring::slots.
std::uint32_t ring_index(const xlb_flow_key& key, std::uint32_t vip_flags, std::uint32_t hash_seed,
                         std::size_t ring_size);

// A digest of what a VIP's table is built from and how flows are mapped onto
// it, health left out: the seed, the ring size, the hash mode and, sorted by
// identity, each backend's identity, address, weight and admin state. LB
// hosts behind ECMP must agree on it (docs/scale-out.md); their published
// tables (the checksum) then differ only where their health checks differ.
std::uint64_t table_inputs_checksum(const config::VipSpec& vip, std::uint32_t hash_seed);

// A QUIC config's value in XLB_MAP_QUIC_CONFIGS (abi.h, struct
// xlb_quic_config).
xlb_quic_config quic_config_value(const config::QuicConfig& config);

// Sums of per-CPU values as the map lookups return them (one per CPU).
std::uint64_t sum_per_cpu(std::span<const std::uint64_t> per_cpu);
xlb_vip_stats sum_per_cpu(std::span<const xlb_vip_stats> per_cpu);
xlb_backend_stats sum_per_cpu(std::span<const xlb_backend_stats> per_cpu);
xlb_vip_cookie_stats sum_per_cpu(std::span<const xlb_vip_cookie_stats> per_cpu);
xlb_vip_drops sum_per_cpu(std::span<const xlb_vip_drops> per_cpu);
xlb_vip_quic_stats sum_per_cpu(std::span<const xlb_vip_quic_stats> per_cpu);

}  // namespace xlb::datapath
