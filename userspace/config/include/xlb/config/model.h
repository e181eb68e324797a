// SPDX-License-Identifier: Apache-2.0
// The operator's desired state, as read from the YAML file, changed through
// the API and persisted in the state file. Plain values, no I/O: the parser
// (config.h), the JSON codec (json.h), the reconciler and the API all speak
// these types. Defaults here are the documented defaults (docs/config.md).
#pragma once

#include <chrono>
#include <compare>
#include <cstdint>
#include <expected>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "xlb/announce/policy.h"
#include "xlb/announce/render.h"
#include "xlb/net/address.h"

namespace xlb::config {

using Duration = std::chrono::milliseconds;

enum class XdpMode { kNative, kGeneric, kAuto };             // "native" | "generic" | "auto"
enum class Encap { kIpip, kGue };                            // "ipip" | "gue"
enum class Protocol : std::uint8_t { kTcp = 6, kUdp = 17 };  // "tcp" | "udp"
enum class HashMode { kFiveTuple, kSourceIp };               // "5tuple" | "source"
enum class AdminState { kActive, kDrain, kDisabled };        // "active" | "drain" | "disabled"
// "none" | "tcp" | "http" | "udp" | "https"
enum class HealthCheckType { kNone, kTcp, kHttp, kUdp, kHttps };
enum class UnhealthyPolicy { kReschedule, kKeep };  // "reschedule" | "keep"
enum class ConntrackResize { kRefuse, kReplace };   // "refuse" | "replace"
// Whose health verdicts a VIP's table follows (docs/fleet.md, "One health
// view"): "local" | "majority" | "any_down".
enum class HealthConsensus { kLocal, kMajority, kAnyDown };
// When a fleet's host announces its VIPs: "when_current" | "always".
enum class FleetAnnounce { kWhenCurrent, kAlways };
// When the LB answers a VIP's SYNs itself with SYN cookies
// (docs/syn-cookies.md): "off" | "auto" (while the host is under a SYN
// flood) | "always".
enum class SynCookies { kOff, kAuto, kAlways };

// Largest configurable backend weight. Effective weights are scaled from it,
// so the bound keeps every Maglev weight sum inside 32 bits.
inline constexpr std::uint32_t kMaxWeight = 10000;
inline constexpr std::uint32_t kDefaultWeight = 100;

struct StatusRange {
    std::uint16_t first = 200;
    std::uint16_t last = 299;  // inclusive
    bool operator==(const StatusRange&) const = default;
};

// Failure accrual (opt-in, after Linkerd's unified failure accrual): a
// backend is also ejected when its success rate over a sliding window falls
// below a threshold; with accrual on, every ejection of a serving backend
// (by the success rate, or by unhealthy_threshold consecutive failures) holds
// it out for a back-off: min_penalty doubling per consecutive ejection up to
// max_penalty, plus up to `jitter` of it at random (never above max_penalty).
struct FailureAccrual {
    bool enabled = false;
    double success_rate = 0.8;     // eject below this share of successful probes ...
    Duration window{10'000};       // ... over this sliding window ...
    std::uint32_t min_probes = 5;  // ... once it holds at least this many probes
    Duration min_penalty{1'000};   // first hold-down
    Duration max_penalty{60'000};  // longest hold-down
    double jitter = 0.5;           // 0-1: share of the hold-down added at random
    bool operator==(const FailureAccrual&) const = default;
};

// Rate-limit bias (http checks, after Linkerd's load biaser): a probe
// answered 429, or 503 with Retry-After, scales the backend's weight by
// `factor` for max(penalty, Retry-After), at most max_retry_after.
struct RateLimitBias {
    double factor = 0.1;                // (0, 1]; 1: off
    Duration penalty{5'000};            // shortest bias
    Duration max_retry_after{300'000};  // cap on the bias (and on Retry-After)
    bool operator==(const RateLimitBias&) const = default;
};

// Flapping: a backend whose health changes more than `changes` times within
// `window` is, on turning unhealthy, held out for `hold` before it may come
// back (besides healthy_threshold successes). changes = 0: off.
struct Flapping {
    std::uint32_t changes = 4;
    Duration window{300'000};
    Duration hold{300'000};
    bool operator==(const Flapping&) const = default;
};

struct HealthCheck {
    HealthCheckType type = HealthCheckType::kNone;
    std::uint16_t port = 0;  // 0: the VIP's port
    Duration interval{10'000};
    Duration timeout{1'000};  // must be below interval
    Duration jitter{1'000};   // up to this much is added to each interval, at random
    std::uint32_t unhealthy_threshold = 2;
    std::uint32_t healthy_threshold = 2;
    // http
    std::string path = "/";
    std::string host;  // Host header; empty: the backend's address
    // One range, 200-299. (Not a braced list: g++ 12 warns falsely about an
    // initializer_list in a default member initializer at -O2.)
    std::vector<StatusRange> expected_statuses = std::vector<StatusRange>(1, StatusRange{200, 299});
    std::string body_contains;  // empty: any body
    // Keep the connection open between probes (HTTP/1.1 keep-alive, never
    // pipelined); off: one connection per probe, "Connection: close".
    bool reuse_connection = true;
    // A kept connection older than this is closed and the next probe opens a
    // new one, so that a listener that is gone while an old connection
    // lingers is noticed (docs/config.md, "Connection reuse").
    Duration reuse_limit{30'000};
    // https (and every http key above): the server name sent in the TLS
    // handshake (SNI), and checked against the certificate when verifying;
    // empty: `host` when that is a name, else none (and the certificate
    // must then name the probed address).
    std::string sni;
    std::string ca_file;  // PEM; empty: the system's trust store
    bool verify = true;   // false: any certificate is accepted
    // udp
    std::string udp_payload;
    std::string udp_expect;  // empty: any reply
    // send the probe to the VIP, encapsulated like client traffic
    bool via_vip = false;
    FailureAccrual failure_accrual;
    RateLimitBias rate_limit_bias;  // http only
    Flapping flapping;
    bool operator==(const HealthCheck&) const = default;
};

// QUIC connection-ID routing (docs/quic.md, draft-ietf-quic-load-balancers).
enum class QuicMode { kPlaintext, kEncrypted };

// One QUIC-LB configuration of a UDP VIP: the CIDs its servers issue are
// one octet whose top three bits are config_id, then server_id_length
// octets of server id, then nonce_length octets of nonce; encrypted: those
// 16 octets (server_id_length + nonce_length == 16) under AES-128-ECB with
// the key in key_file (16 octets, raw or as 32 hex digits; root-only).
struct QuicConfig {
    std::uint8_t config_id = 0;  // 0..6
    std::uint8_t server_id_length = 2;
    std::uint8_t nonce_length = 6;
    QuicMode mode = QuicMode::kPlaintext;
    std::string key_file;  // encrypted only
    bool operator==(const QuicConfig&) const = default;
};

struct SlowStart {
    Duration window{30'000};  // 0: off
    double floor = 0.1;       // share of the weight a backend starts from
    bool operator==(const SlowStart&) const = default;
};

struct BackendSpec {
    net::IpAddress address;
    std::uint32_t weight = kDefaultWeight;  // 0 .. kMaxWeight; 0 takes no new flows
    AdminState state = AdminState::kActive;
    // Stable identity for Maglev; empty: the address. Set it to re-address a
    // backend without moving its flows.
    std::string hash_key;
    // The backend runs xlb-decap with its cookie program, so it can complete
    // a handshake whose SYN the LB answered with a cookie.
    bool cookie_acks = false;
    // QUIC VIPs (VipSpec::quic): the server id this backend's QUIC server
    // writes into its connection IDs (docs/quic.md). Unique within the VIP,
    // below 2^(8 * server_id_length) for each of the VIP's configs.
    std::optional<std::uint64_t> server_id;
    bool operator==(const BackendSpec&) const = default;

    // What Maglev hashes: maglev_identity(address, hash_key).
    std::string identity() const;
};

// A backend's Maglev identity: `hash_key` when set, else the address as
// net::IpAddress::to_string() spells it ("10.0.0.1", "2001:db8::1"; no
// port). A contract between LB hosts, pinned by a golden test
// (tests/unit/datapath_test.cpp): every host must spell it the same. The
// one definition; xlb::datapath re-exports it.
std::string maglev_identity(const net::IpAddress& address, std::string_view hash_key);
// The same rule for a caller that keeps the address already spelled
// (address_text == address.to_string()), e.g. the reconciler, which would
// otherwise format thousands of addresses on every plan.
std::string maglev_identity(std::string_view address_text, std::string_view hash_key);

// A VIP's identity: what the data plane matches on.
struct VipKey {
    net::IpAddress address;
    std::uint16_t port = 0;  // 0: every port (wildcard)
    Protocol protocol = Protocol::kTcp;

    // "198.51.100.10:80/tcp", "[2001:db8::10]:443/udp", "198.51.100.10:0/tcp".
    std::string to_string() const;
    auto operator<=>(const VipKey&) const = default;
};

struct VipSpec {
    net::IpAddress address;
    std::uint16_t port = 0;  // 0: every port (wildcard)
    Protocol protocol = Protocol::kTcp;
    std::string name;  // optional label for logs and metrics
    HashMode hash = HashMode::kFiveTuple;
    bool conntrack = true;  // false: XLB_VIP_F_NO_CONNTRACK (e.g. stateless UDP)
    std::uint32_t ring_size = 65537;
    double panic_threshold = 0.5;  // 0: never panic
    SlowStart slow_start;
    HealthCheck health_check;
    UnhealthyPolicy on_unhealthy = UnhealthyPolicy::kReschedule;
    // nullopt: majority on a fleet's host, local elsewhere
    // (effective_consensus()).
    std::optional<HealthConsensus> health_consensus;
    // Whether this host announces the VIP's address over BGP (bgp.enabled).
    announce::Policy announce = announce::Policy::kWhenServing;
    // How long an idle connection-table entry of this VIP is kept before the
    // agent expires it; nullopt: the protocol's default (idle_timeout()).
    std::optional<Duration> conntrack_idle_timeout;
    // nullopt: auto where the VIP can use cookies, else off
    // (effective_syn_cookies()); set: asked for, and a configuration that
    // cannot honour it is an error.
    std::optional<SynCookies> syn_cookies;
    // Client source ranges: with allow_sources, only clients in one of them;
    // never one in deny_sources. Of the VIP's family.
    std::vector<net::Prefix> allow_sources;
    std::vector<net::Prefix> deny_sources;
    // UDP only: route QUIC packets by the server id in their connection ID.
    // Several configs (distinct config ids) live at once during a key or
    // format rotation; the first is the one servers should issue.
    std::vector<QuicConfig> quic;
    std::vector<BackendSpec> backends;
    bool operator==(const VipSpec&) const = default;

    // "198.51.100.10:80/tcp", "[2001:db8::10]:443/tcp"; the VIP's identity.
    std::string key() const;
    VipKey vip_key() const { return VipKey{address, port, protocol}; }
    // The policy in effect: health_consensus, else majority on a fleet's
    // host and local elsewhere.
    HealthConsensus consensus(bool fleet_host) const {
        return health_consensus.value_or(fleet_host ? HealthConsensus::kMajority
                                                    : HealthConsensus::kLocal);
    }
    const BackendSpec* find_backend(const net::IpAddress& address) const;
    BackendSpec* find_backend(const net::IpAddress& address);
};

struct NextHop {
    // Exactly one of them: an address whose MAC the agent resolves (and keeps
    // current) from the kernel's neighbour table, or a fixed MAC.
    std::optional<net::IpAddress> address;
    std::optional<net::MacAddress> mac;
    bool operator==(const NextHop&) const = default;
};

struct EncapSource {
    // Outer source addresses; with a prefix shorter than the address, the
    // host bits come from the flow hash.
    std::optional<net::IpAddress> ipv4;
    std::uint8_t ipv4_prefix_len = 32;
    std::optional<net::IpAddress> ipv6;
    std::uint8_t ipv6_prefix_len = 128;
    bool operator==(const EncapSource&) const = default;
};

struct MapSizes {
    std::uint32_t max_vips = 512;
    std::uint32_t max_backends = 4096;
    std::uint32_t conntrack_entries = 1'048'576;
    bool operator==(const MapSizes&) const = default;
};

// Announcing VIPs through the local BIRD 2 (docs/scale-out.md): xlbd writes
// the routes of the VIPs to announce to `routes_file`, which bird.conf
// includes, and asks BIRD to reconfigure on `control_socket`.
struct BgpSettings {
    bool enabled = false;
    std::string control_socket = "/run/bird/bird.ctl";
    // Under /run: a reboot, which empties the data plane, forgets every
    // announcement too (docs/bird-notes.md).
    std::string routes_file = "/run/xlb/bird/xlb.conf";
    // The file's static protocols are "<protocol>4" and "<protocol>6".
    std::string protocol = "xlb";
    announce::RouteForm route = announce::RouteForm::kBlackhole;
    bool operator==(const BgpSettings&) const = default;
};

// The connection table under pressure (docs/config.md, conntrack).
struct ConntrackSettings {
    // New entries per second per CPU; 0: derived from the table size
    // (datapath::ct_insert_budget), so a flood replaces at most a small share
    // of the table per second.
    std::uint32_t insert_rate = 0;
    std::uint32_t insert_burst = 0;  // 0: one second's worth (the rate)
    // When maps.conntrack_entries differs from the pinned table's size.
    ConntrackResize resize = ConntrackResize::kRefuse;
    Duration sweep_interval{10'000};  // expiry of idle entries and the count
    bool operator==(const ConntrackSettings&) const = default;
};

// Defaults of VipSpec::conntrack_idle_timeout: long for TCP (a quiet SSH
// session must keep its backend), short for UDP (no close tells us it ended).
inline constexpr Duration kDefaultTcpIdleTimeout{3'600'000};
inline constexpr Duration kDefaultUdpIdleTimeout{30'000};
Duration default_idle_timeout(Protocol protocol);
// The VIP's conntrack_idle_timeout, or its protocol's default.
Duration idle_timeout(const VipSpec& vip);

// Second chance (docs/second-chance.md): after each change of a VIP's ring,
// its previous ring stays live for `window`, and a TCP packet that finds no
// connection-table entry and whose backend the two rings disagree on is sent
// with a hint naming the previous one, which the backends' xlb-decap follows
// when the flow is not theirs. Needs encap: gue (the hint is GUE data).
struct SecondChance {
    bool enabled = false;
    Duration window{600'000};
    bool operator==(const SecondChance&) const = default;
};

// What "under a SYN flood" means for VIPs with syn_cookies auto
// (docs/syn-cookies.md): a CPU that sees more than start_rate SYNs per second
// to such VIPs starts the flood; it ends once every CPU has stayed below
// end_rate for end_after.
struct SynFloodSettings {
    std::uint32_t start_rate = 20'000;
    std::uint32_t end_rate = 10'000;
    Duration end_after{5'000};
    bool operator==(const SynFloodSettings&) const = default;
};

// health_history: verdict changes the agent keeps per (VIP, backend), in
// memory (GET /v1/backend/history). The bound keeps a flapping backend's
// history near 200 KB (a transition with its texts is about 200 bytes).
inline constexpr std::uint32_t kDefaultHealthHistory = 20;
inline constexpr std::uint32_t kMaxHealthHistory = 1000;

// fleet: this host is one of a fleet configured through etcd (docs/fleet.md).
// The file then holds only the host's own settings; VIPs, backends and the
// fleet-wide settings (kFleetWideKeys in the schema) come from the store.
struct FleetSettings {
    bool enabled = false;  // the section is there
    std::string name = "default";
    // Where the fleet's keys live; empty: "/xlb/<name>/" (fleet_prefix()).
    std::string prefix;
    std::vector<std::string> endpoints;  // "https://198.18.0.11:2379", ...
    // This host's name in the fleet (its hosts/<name> key); empty: the
    // machine's host name, which the agent looks up.
    std::string host_name;
    // PEM files: the CA that signed the members' certificates (https needs
    // it), and this host's client certificate and key (both or neither).
    std::string ca;
    std::string cert;
    std::string key;
    // The lease under this host's key: a host silent for this long is gone
    // from the fleet's view.
    Duration lease_ttl{10'000};
    Duration dial_timeout{2'000};
    Duration request_timeout{5'000};
    // Two-phase publish: how long a host that has built a table waits for
    // every live host to have built it too before it makes it live anyway.
    Duration max_publish_wait{1'000};
    // when_current: the host withdraws its routes while its applied desired
    // revision has been behind another live host's for longer than this.
    FleetAnnounce announce = FleetAnnounce::kWhenCurrent;
    Duration max_lag{2'000};
    bool operator==(const FleetSettings&) const = default;
};
// The prefix the fleet's keys live under, always ending in '/'.
std::string fleet_prefix(const FleetSettings& fleet);

struct Settings {
    std::string interface;
    XdpMode xdp_mode = XdpMode::kAuto;
    NextHop next_hop;
    EncapSource encap_source;
    std::uint32_t hash_seed = 0;
    // Whether the file sets hash_seed. The agent refuses to run without it:
    // a seed built in would be the same, public value on every install
    // (missing_hash_seed() in config.h).
    bool hash_seed_set = false;
    std::uint16_t mtu = 1500;
    bool icmp_too_big = true;
    Encap encap = Encap::kIpip;
    // The UDP destination port of GUE packets (encap: gue).
    std::uint16_t gue_port = 6080;
    SecondChance second_chance;
    SynFloodSettings syn_flood;
    MapSizes maps;
    std::string api_socket = "/run/xlb/xlbd.sock";
    // Group of the API socket (name or number); empty: the agent's own.
    std::string api_group;
    std::string metrics_listen = "127.0.0.1:9464";
    std::string state_file = "/var/lib/xlb/state.json";
    std::string pin_dir = "/sys/fs/bpf/xlb";
    BgpSettings bgp;
    ConntrackSettings conntrack;
    std::uint32_t health_history = kDefaultHealthHistory;  // 0: none kept
    FleetSettings fleet;
    bool operator==(const Settings&) const = default;
};

// The settings every host of a fleet shares (the fleet's desired/global):
// copies them from `from` into `to`, leaving the host's own settings.
void copy_fleet_wide(Settings& to, const Settings& from);
// Whether two settings differ in a fleet-wide setting.
bool fleet_wide_differ(const Settings& a, const Settings& b);

struct Config {
    Settings settings;
    std::vector<VipSpec> vips;
    bool operator==(const Config&) const = default;

    // By VipSpec::key() text (as parse_vip_key() normalises it).
    const VipSpec* find_vip(const std::string& key) const;
    VipSpec* find_vip(const std::string& key);
};

// Source lists: prefixes per list of a VIP, and the data path's entries for
// all VIPs together (its trie's size, XLB_SOURCE_RANGES_DEFAULT).
inline constexpr std::size_t kMaxSourcePrefixes = 1024;
inline constexpr std::size_t kMaxSourceRangeEntries = 16384;
// The most entries a VIP's lists take in the data path: each prefix, and
// the family's whole space with an allow list.
std::size_t source_range_entry_bound(const VipSpec& vip);

// The SYN cookie mode a VIP runs with, and why it is off when it is: the
// mode asked for (auto when unset), off when the VIP cannot use cookies (not
// TCP, no connection table, encap not gue, a backend without cookie_acks).
// reason: empty when on or asked off, else the first thing missing.
struct EffectiveSynCookies {
    SynCookies mode = SynCookies::kOff;
    std::string reason;
    bool operator==(const EffectiveSynCookies&) const = default;
};
EffectiveSynCookies effective_syn_cookies(const VipSpec& vip, const Settings& settings);

// What in a change of one VIP's settings moves its established flows to
// new ring slots (a reload and the API refuse it unless confirmed): a
// changed `hash` or `ring_size`, each one line naming the VIP, e.g.
// "VIP 198.51.100.10:80/tcp: ring_size 65537 -> 251: its flows move to new
// ring slots". Empty: nothing disruptive.
std::vector<std::string> disruptive_vip_changes(const VipSpec& was, const VipSpec& now);

// Names as written in YAML and JSON.
const char* to_string(XdpMode);
const char* to_string(Encap);
const char* to_string(Protocol);
const char* to_string(HashMode);
const char* to_string(AdminState);
const char* to_string(HealthCheckType);
// http and https checks send the same request and judge the same response.
inline bool speaks_http(HealthCheckType t) {
    return t == HealthCheckType::kHttp || t == HealthCheckType::kHttps;
}
const char* to_string(UnhealthyPolicy);
const char* to_string(ConntrackResize);
const char* to_string(HealthConsensus);
const char* to_string(FleetAnnounce);
const char* to_string(SynCookies);
const char* to_string(QuicMode);

// A hash seed as the file and the API write it: "0x5eed1234".
std::string format_hash_seed(std::uint32_t seed);

// The inverses: exact names as above; nullopt for anything else.
std::optional<XdpMode> parse_xdp_mode(std::string_view);
std::optional<Encap> parse_encap(std::string_view);
std::optional<Protocol> parse_protocol(std::string_view);
std::optional<HashMode> parse_hash_mode(std::string_view);
std::optional<AdminState> parse_admin_state(std::string_view);
std::optional<HealthCheckType> parse_health_check_type(std::string_view);
std::optional<UnhealthyPolicy> parse_unhealthy_policy(std::string_view);
std::optional<ConntrackResize> parse_conntrack_resize(std::string_view);
std::optional<HealthConsensus> parse_health_consensus(std::string_view);
std::optional<FleetAnnounce> parse_fleet_announce(std::string_view);
std::optional<SynCookies> parse_syn_cookies(std::string_view);
std::optional<QuicMode> parse_quic_mode(std::string_view);

// "10.0.0.10:80/tcp", "[2001:db8::1]:443/udp", or "10.0.0.10:80" (tcp). The
// error says what was wrong and shows the expected form.
std::expected<VipKey, std::string> parse_vip_key(std::string_view text);

// Durations as written in YAML and JSON: a non-negative integer and a unit,
// one of ms, s, m, h ("500ms", "2s", "1m"). A bare number is an error (units
// are required). format_duration() writes the largest exact unit ("90s",
// "1500ms", "0s") and parse_duration() reads it back unchanged.
std::expected<Duration, std::string> parse_duration(std::string_view text);
std::string format_duration(Duration duration);

}  // namespace xlb::config
