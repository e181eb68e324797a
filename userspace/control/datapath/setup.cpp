// SPDX-License-Identifier: Apache-2.0
#include "xlb/datapath/setup.h"

#include <arpa/inet.h>

#include <algorithm>
#include <array>
#include <cstring>
#include <map>
#include <string>
#include <vector>

#include "xlb/flow_hash.h"
#include "xlb/fnv1a.h"

namespace xlb::datapath {

CtBudget ct_insert_budget(std::uint32_t rate_setting, std::uint32_t burst_setting,
                          std::uint32_t capacity, std::uint32_t possible_cpus) {
    CtBudget budget;
    budget.rate = rate_setting;
    if (budget.rate == 0) {
        // 64-bit: capacity * 2 overflows 32 bits for tables over 2^31 entries.
        const std::uint64_t all_cpus = std::uint64_t{capacity} * 2 / 100;
        budget.rate = static_cast<std::uint32_t>(
            std::max<std::uint64_t>(all_cpus / std::max<std::uint32_t>(possible_cpus, 1), 1));
    }
    budget.burst = burst_setting != 0 ? burst_setting : budget.rate;
    return budget;
}

xlb_config make_config(const config::Settings& s, const net::MacAddress& next_hop,
                       CtBudget budget) {
    xlb_config cfg{};
    cfg.magic = XLB_CONFIG_MAGIC;
    cfg.version = XLB_CONFIG_VERSION;
    cfg.hash_seed = s.hash_seed;
    if (s.icmp_too_big) cfg.flags |= XLB_CFG_F_ICMP_TOO_BIG;
    if (s.encap == config::Encap::kGue) cfg.flags |= XLB_CFG_F_GUE;
    if (s.encap == config::Encap::kGue && s.second_chance.enabled)
        cfg.flags |= XLB_CFG_F_SECOND_CHANCE;
    cfg.gue_port = s.gue_port;
    if (s.encap_source.ipv4) {
        __be32 words[4];
        s.encap_source.ipv4->to_words(words);
        cfg.src_v4 = words[0];
        cfg.src_v4_prefix_len = s.encap_source.ipv4_prefix_len;
    } else {
        cfg.src_v4_prefix_len = 32;
    }
    if (s.encap_source.ipv6) s.encap_source.ipv6->to_words(cfg.src_v6);
    cfg.src_v6_prefix_len = s.encap_source.ipv6 ? s.encap_source.ipv6_prefix_len : 128;
    std::memcpy(cfg.next_hop_mac, next_hop.data(), next_hop.size());
    cfg.mtu = s.mtu;
    cfg.ct_insert_rate = budget.rate;
    cfg.ct_insert_burst = budget.burst;
    return cfg;
}

xlb_vip_key vip_key(const net::IpAddress& address, std::uint16_t port, std::uint8_t protocol) {
    xlb_vip_key key{};
    address.to_words(key.addr);
    key.port = htons(port);
    key.proto = protocol;
    key.family = address.family;
    return key;
}

xlb_vip_key vip_key(const config::VipSpec& vip) {
    return vip_key(vip.address, vip.port, static_cast<std::uint8_t>(vip.protocol));
}

std::uint32_t vip_flags(const config::VipSpec& vip, config::Encap encap) {
    std::uint32_t flags = 0;
    if (!vip.conntrack) flags |= XLB_VIP_F_NO_CONNTRACK;
    if (vip.hash == config::HashMode::kSourceIp) flags |= XLB_VIP_F_HASH_SRC_ONLY;
    if (!vip.allow_sources.empty() || !vip.deny_sources.empty()) flags |= XLB_VIP_F_SOURCE_RANGES;
    if (vip.protocol == config::Protocol::kUdp && !vip.quic.empty()) flags |= XLB_VIP_F_QUIC;
    config::Settings settings;
    settings.encap = encap;
    switch (config::effective_syn_cookies(vip, settings).mode) {
        case config::SynCookies::kOff: break;
        case config::SynCookies::kAuto: flags |= XLB_VIP_F_COOKIES_AUTO; break;
        case config::SynCookies::kAlways: flags |= XLB_VIP_F_COOKIES_ALWAYS; break;
    }
    return flags;
}

xlb_vip_value vip_value(const config::VipSpec& vip, std::uint32_t vip_id, config::Encap encap) {
    xlb_vip_value value{};
    value.vip_id = vip_id;
    value.flags = vip_flags(vip, encap);
    return value;
}

static_assert(config::kMaxSourceRangeEntries == XLB_SOURCE_RANGES_DEFAULT,
              "the configuration's bound is the trie's size");

bool SourceRangeEntry::operator==(const SourceRangeEntry& other) const {
    return std::memcmp(&key, &other.key, sizeof(key)) == 0 && verdict == other.verdict;
}

xlb_src_range_key source_range_key(std::uint32_t vip_id, const net::Prefix& prefix) {
    xlb_src_range_key key{};
    key.vip_id = htonl(vip_id);
    auto* bytes = reinterpret_cast<std::uint8_t*>(key.addr);
    if (prefix.address.is_v4()) {
        bytes[10] = 0xff;
        bytes[11] = 0xff;
        std::memcpy(bytes + 12, prefix.address.bytes.data(), 4);
        key.prefixlen = 32 + 96 + prefix.length;
    } else {
        std::memcpy(bytes, prefix.address.bytes.data(), 16);
        key.prefixlen = 32 + prefix.length;
    }
    return key;
}

namespace {
// Whether `outer` contains all of `inner` (same family).
bool covers(const net::Prefix& outer, const net::Prefix& inner) {
    return outer.length <= inner.length && outer.contains(inner.address);
}
}  // namespace

std::vector<SourceRangeEntry> source_range_entries(const config::VipSpec& vip,
                                                   std::uint32_t vip_id) {
    using Bytes = std::array<std::uint8_t, sizeof(xlb_src_range_key)>;
    std::map<Bytes, SourceRangeEntry> out;
    auto add = [&](const net::Prefix& prefix, std::uint8_t verdict) {
        SourceRangeEntry e{source_range_key(vip_id, prefix), verdict};
        Bytes bytes;
        std::memcpy(bytes.data(), &e.key, sizeof(e.key));
        out.try_emplace(bytes, e);  // the first verdict for a key stands
    };
    // Deny first: a prefix in both lists (refused by the validation) stays denied.
    for (const net::Prefix& p : vip.deny_sources) add(p, XLB_SOURCE_DENY);
    for (const net::Prefix& p : vip.allow_sources) {
        const bool denied = std::any_of(vip.deny_sources.begin(), vip.deny_sources.end(),
                                        [&](const net::Prefix& d) { return covers(d, p); });
        if (!denied) add(p, XLB_SOURCE_ALLOW);
    }
    // Last: an allow prefix of the whole space keeps its ALLOW.
    if (!vip.allow_sources.empty()) {
        net::IpAddress any;
        any.family = vip.address.family;
        add(net::Prefix{any, 0}, XLB_SOURCE_DENY);
    }
    std::vector<SourceRangeEntry> entries;
    entries.reserve(out.size());
    for (auto& [bytes, e] : out) entries.push_back(e);
    return entries;
}

std::uint32_t quic_slot(std::uint32_t vip_id, std::uint8_t config_id) {
    return vip_id * XLB_QUIC_CONFIG_SLOTS + config_id;
}

bool QuicConfigEntry::operator==(const QuicConfigEntry& other) const {
    return slot == other.slot && std::memcmp(&value, &other.value, sizeof(value)) == 0;
}

bool QuicServerEntry::operator==(const QuicServerEntry& other) const {
    return std::memcmp(&key, &other.key, sizeof(key)) == 0 && backend_id == other.backend_id;
}

namespace {
bool routes_quic(const config::VipSpec& vip) { return (vip_flags(vip) & XLB_VIP_F_QUIC) != 0; }
}  // namespace

std::vector<QuicConfigEntry> quic_config_entries(const config::VipSpec& vip, std::uint32_t vip_id) {
    std::vector<QuicConfigEntry> entries(XLB_QUIC_CONFIG_SLOTS);
    for (std::uint8_t c = 0; c < XLB_QUIC_CONFIG_SLOTS; ++c) entries[c].slot = quic_slot(vip_id, c);
    if (!routes_quic(vip)) return entries;
    for (const config::QuicConfig& q : vip.quic) {
        // 7 marks CIDs no balancer routes: its slot stays empty whatever
        // the validation let through
        if (q.config_id >= XLB_QUIC_CONFIG_IDS) continue;
        xlb_quic_config& value = entries[q.config_id].value;
        if (value.server_id_len != 0) continue;  // a config id twice: the first stands
        value = quic_config_value(q);
    }
    return entries;
}

bool quic_server_published(const config::BackendSpec& backend) {
    return backend.server_id && backend.state != config::AdminState::kDisabled;
}

std::vector<QuicServerEntry> quic_server_entries(
    const config::VipSpec& vip, std::uint32_t vip_id,
    std::span<const std::optional<std::uint32_t>> backend_ids) {
    std::map<std::uint64_t, std::uint32_t> by_server;
    if (routes_quic(vip))
        for (std::size_t i = 0; i < vip.backends.size() && i < backend_ids.size(); ++i) {
            const config::BackendSpec& b = vip.backends[i];
            if (!quic_server_published(b) || !backend_ids[i]) continue;
            by_server.try_emplace(*b.server_id, *backend_ids[i]);
        }
    std::vector<QuicServerEntry> entries;
    entries.reserve(by_server.size());
    for (const auto& [server_id, backend_id] : by_server) {
        QuicServerEntry e;
        e.key.vip_id = vip_id;
        e.key.server_id = server_id;
        e.backend_id = backend_id;
        entries.push_back(e);
    }
    return entries;
}

xlb_flow_key flow_key(const net::Endpoint& src, const net::Endpoint& dst, std::uint8_t protocol) {
    xlb_flow_key key{};
    src.address.to_words(key.src);
    dst.address.to_words(key.dst);
    key.sport = htons(src.port);
    key.dport = htons(dst.port);
    key.proto = protocol;
    key.family = src.address.family;
    return key;
}

xlb_flow_key flow_key(const config::VipSpec& vip, const net::Endpoint& src, std::uint16_t dport) {
    return flow_key(src, net::Endpoint{vip.address, dport},
                    static_cast<std::uint8_t>(vip.protocol));
}

xlb_backend backend_entry(const net::IpAddress& address, std::uint32_t generation, bool down) {
    xlb_backend be{};
    address.to_words(be.addr);
    be.family = address.family;
    be.flags = down ? XLB_BACKEND_F_DOWN : 0;
    be.generation = generation;
    return be;
}

xlb_backend released_backend_entry(std::uint32_t generation) {
    xlb_backend be{};
    be.generation = generation;
    return be;
}

Result<Ring> build_ring(std::span<const RingMember> members, std::uint32_t ring_size) {
    std::vector<maglev::Backend> input;
    input.reserve(members.size());
    for (const RingMember& m : members)
        input.push_back({maglev_identity(m.address, m.hash_key), m.weight});
    maglev::BuildOptions options;
    options.ring_size = ring_size;
    auto table = maglev::build_table(input, options);
    if (!table) return fail("build the Maglev table: " + table.error().message);
    Ring ring;
    ring.slots.reserve(table->table.size());
    for (std::uint32_t index : table->table) ring.slots.push_back(members[index].backend_id);
    ring.slots_per_member = std::move(table->slots_per_backend);
    ring.checksum = table->checksum;
    return ring;
}

std::uint32_t ring_index(const xlb_flow_key& key, std::uint32_t vip_flags, std::uint32_t hash_seed,
                         std::size_t ring_size) {
    const std::uint32_t hash = xlb_vip_flow_hash(&key, vip_flags, hash_seed);
    return xlb_ring_slot(hash, static_cast<std::uint32_t>(ring_size)) - XLB_RING_FIRST_SLOT;
}

namespace {

// The stats structs are all u64 counters; the size check fails the build when
// one is added to the ABI and not named here.
template <auto... Fields, class T>
T sum_fields(std::span<const T> per_cpu) {
    static_assert(sizeof(T) == sizeof...(Fields) * sizeof(std::uint64_t), "every counter summed");
    T total{};
    for (const T& s : per_cpu) ((total.*Fields += s.*Fields), ...);
    return total;
}

}  // namespace

std::uint64_t sum_per_cpu(std::span<const std::uint64_t> per_cpu) {
    std::uint64_t total = 0;
    for (std::uint64_t v : per_cpu) total += v;
    return total;
}

xlb_vip_stats sum_per_cpu(std::span<const xlb_vip_stats> per_cpu) {
    return sum_fields<&xlb_vip_stats::packets, &xlb_vip_stats::bytes, &xlb_vip_stats::new_flows,
                      &xlb_vip_stats::conntrack_hits, &xlb_vip_stats::drops>(per_cpu);
}

xlb_backend_stats sum_per_cpu(std::span<const xlb_backend_stats> per_cpu) {
    return sum_fields<&xlb_backend_stats::packets, &xlb_backend_stats::bytes,
                      &xlb_backend_stats::new_flows>(per_cpu);
}

xlb_vip_cookie_stats sum_per_cpu(std::span<const xlb_vip_cookie_stats> per_cpu) {
    return sum_fields<&xlb_vip_cookie_stats::syns, &xlb_vip_cookie_stats::cookies_sent,
                      &xlb_vip_cookie_stats::acks_valid, &xlb_vip_cookie_stats::acks_invalid>(
        per_cpu);
}

xlb_vip_drops sum_per_cpu(std::span<const xlb_vip_drops> per_cpu) {
    xlb_vip_drops sum{};
    for (const xlb_vip_drops& cpu : per_cpu)
        for (std::size_t r = 0; r < XLB_VIP_DROP_REASONS; ++r) sum.by_reason[r] += cpu.by_reason[r];
    return sum;
}

xlb_vip_quic_stats sum_per_cpu(std::span<const xlb_vip_quic_stats> per_cpu) {
    xlb_vip_quic_stats sum{};
    for (const xlb_vip_quic_stats& cpu : per_cpu) {
        sum.routed += cpu.routed;
        for (std::size_t r = 0; r < XLB_QUIC_FALLBACKS; ++r) sum.fallbacks[r] += cpu.fallbacks[r];
    }
    return sum;
}

xlb_quic_config quic_config_value(const config::QuicConfig& config) {
    xlb_quic_config value{};
    value.server_id_len = config.server_id_length;
    value.nonce_len = config.nonce_length;
    value.mode = config.mode == config::QuicMode::kEncrypted ? XLB_QUIC_MODE_ENCRYPTED
                                                             : XLB_QUIC_MODE_PLAINTEXT;
    return value;
}

std::uint64_t table_inputs_checksum(const config::VipSpec& vip, std::uint32_t hash_seed) {
    std::vector<std::string> backends;
    for (const config::BackendSpec& b : vip.backends)
        backends.push_back(b.identity() + " " + b.address.to_string() + " " +
                           std::to_string(b.weight) + " " + config::to_string(b.state));
    std::sort(backends.begin(), backends.end());
    std::uint64_t h =
        fnv1a64("seed " + std::to_string(hash_seed) + " ring " + std::to_string(vip.ring_size) +
                " hash " + config::to_string(vip.hash));
    for (const std::string& b : backends) h = fnv1a64("\n" + b, h);
    return h;
}

}  // namespace xlb::datapath
