// SPDX-License-Identifier: Apache-2.0
#include "xlb/config/model.h"

#include <algorithm>
#include <charconv>
#include <cstdint>
#include <cstdio>
#include <limits>
#include <utility>

#include "xlb/config/config.h"

namespace xlb::config {

namespace {

template <class Enum, std::size_t N>
std::optional<Enum> lookup(std::string_view text,
                           const std::pair<std::string_view, Enum> (&names)[N]) {
    for (const auto& [name, value] : names) {
        if (name == text) return value;
    }
    return std::nullopt;
}

constexpr std::pair<std::string_view, XdpMode> kXdpModes[] = {
    {"native", XdpMode::kNative}, {"generic", XdpMode::kGeneric}, {"auto", XdpMode::kAuto}};
constexpr std::pair<std::string_view, Encap> kEncaps[] = {{"ipip", Encap::kIpip},
                                                          {"gue", Encap::kGue}};
constexpr std::pair<std::string_view, Protocol> kProtocols[] = {{"tcp", Protocol::kTcp},
                                                                {"udp", Protocol::kUdp}};
constexpr std::pair<std::string_view, HashMode> kHashModes[] = {{"5tuple", HashMode::kFiveTuple},
                                                                {"source", HashMode::kSourceIp}};
constexpr std::pair<std::string_view, AdminState> kAdminStates[] = {
    {"active", AdminState::kActive},
    {"drain", AdminState::kDrain},
    {"disabled", AdminState::kDisabled}};
constexpr std::pair<std::string_view, HealthCheckType> kCheckTypes[] = {
    {"none", HealthCheckType::kNone},
    {"tcp", HealthCheckType::kTcp},
    {"http", HealthCheckType::kHttp},
    {"udp", HealthCheckType::kUdp},
    {"https", HealthCheckType::kHttps}};
constexpr std::pair<std::string_view, UnhealthyPolicy> kPolicies[] = {
    {"reschedule", UnhealthyPolicy::kReschedule}, {"keep", UnhealthyPolicy::kKeep}};
constexpr std::pair<std::string_view, ConntrackResize> kResizes[] = {
    {"refuse", ConntrackResize::kRefuse}, {"replace", ConntrackResize::kReplace}};
constexpr std::pair<std::string_view, HealthConsensus> kConsensus[] = {
    {"local", HealthConsensus::kLocal},
    {"majority", HealthConsensus::kMajority},
    {"any_down", HealthConsensus::kAnyDown}};
constexpr std::pair<std::string_view, FleetAnnounce> kFleetAnnounce[] = {
    {"when_current", FleetAnnounce::kWhenCurrent}, {"always", FleetAnnounce::kAlways}};
constexpr std::pair<std::string_view, SynCookies> kSynCookies[] = {
    {"off", SynCookies::kOff}, {"auto", SynCookies::kAuto}, {"always", SynCookies::kAlways}};
constexpr std::pair<std::string_view, QuicMode> kQuicModes[] = {
    {"plaintext", QuicMode::kPlaintext}, {"encrypted", QuicMode::kEncrypted}};

template <class Enum, std::size_t N>
const char* name_of(Enum value, const std::pair<std::string_view, Enum> (&names)[N]) {
    for (const auto& [name, v] : names) {
        if (v == value) return name.data();  // the literals are NUL-terminated
    }
    return "?";
}

}  // namespace

const char* to_string(XdpMode v) { return name_of(v, kXdpModes); }
const char* to_string(Encap v) { return name_of(v, kEncaps); }
const char* to_string(Protocol v) { return name_of(v, kProtocols); }
const char* to_string(HashMode v) { return name_of(v, kHashModes); }
const char* to_string(AdminState v) { return name_of(v, kAdminStates); }
const char* to_string(HealthCheckType v) { return name_of(v, kCheckTypes); }
const char* to_string(UnhealthyPolicy v) { return name_of(v, kPolicies); }
const char* to_string(ConntrackResize v) { return name_of(v, kResizes); }
const char* to_string(HealthConsensus v) { return name_of(v, kConsensus); }
const char* to_string(FleetAnnounce v) { return name_of(v, kFleetAnnounce); }
const char* to_string(SynCookies v) { return name_of(v, kSynCookies); }
const char* to_string(QuicMode v) { return name_of(v, kQuicModes); }

std::string format_hash_seed(std::uint32_t seed) {
    char text[16];
    std::snprintf(text, sizeof(text), "0x%08x", seed);
    return text;
}

std::optional<XdpMode> parse_xdp_mode(std::string_view t) { return lookup(t, kXdpModes); }
std::optional<Encap> parse_encap(std::string_view t) { return lookup(t, kEncaps); }
std::optional<Protocol> parse_protocol(std::string_view t) { return lookup(t, kProtocols); }
std::optional<HashMode> parse_hash_mode(std::string_view t) { return lookup(t, kHashModes); }
std::optional<AdminState> parse_admin_state(std::string_view t) { return lookup(t, kAdminStates); }
std::optional<HealthCheckType> parse_health_check_type(std::string_view t) {
    return lookup(t, kCheckTypes);
}
std::optional<UnhealthyPolicy> parse_unhealthy_policy(std::string_view t) {
    return lookup(t, kPolicies);
}

std::optional<ConntrackResize> parse_conntrack_resize(std::string_view t) {
    return lookup(t, kResizes);
}
std::optional<HealthConsensus> parse_health_consensus(std::string_view t) {
    return lookup(t, kConsensus);
}
std::optional<FleetAnnounce> parse_fleet_announce(std::string_view t) {
    return lookup(t, kFleetAnnounce);
}
std::optional<SynCookies> parse_syn_cookies(std::string_view t) { return lookup(t, kSynCookies); }
std::optional<QuicMode> parse_quic_mode(std::string_view t) { return lookup(t, kQuicModes); }

std::size_t source_range_entry_bound(const VipSpec& vip) {
    return vip.allow_sources.size() + vip.deny_sources.size() + (vip.allow_sources.empty() ? 0 : 1);
}

EffectiveSynCookies effective_syn_cookies(const VipSpec& vip, const Settings& settings) {
    const SynCookies asked = vip.syn_cookies.value_or(SynCookies::kAuto);
    if (asked == SynCookies::kOff) return {};
    if (vip.protocol != Protocol::kTcp) return {SynCookies::kOff, "not a TCP VIP"};
    if (!vip.conntrack) return {SynCookies::kOff, "conntrack is off"};
    if (settings.encap != Encap::kGue) return {SynCookies::kOff, "encap is not gue"};
    for (const BackendSpec& b : vip.backends)
        if (b.state != AdminState::kDisabled && !b.cookie_acks)
            return {SynCookies::kOff, "backend " + b.address.to_string() + " has no cookie_acks"};
    return {asked, {}};
}

Duration default_idle_timeout(Protocol protocol) {
    return protocol == Protocol::kUdp ? kDefaultUdpIdleTimeout : kDefaultTcpIdleTimeout;
}

Duration idle_timeout(const VipSpec& vip) {
    return vip.conntrack_idle_timeout.value_or(default_idle_timeout(vip.protocol));
}

std::string VipKey::to_string() const {
    return net::Endpoint{address, port}.to_string() + "/" + config::to_string(protocol);
}

std::string maglev_identity(std::string_view address_text, std::string_view hash_key) {
    return std::string(hash_key.empty() ? address_text : hash_key);
}

// Formats the address only when it is the identity.
std::string maglev_identity(const net::IpAddress& address, std::string_view hash_key) {
    return maglev_identity(hash_key.empty() ? address.to_string() : std::string(), hash_key);
}

std::string BackendSpec::identity() const { return maglev_identity(address, hash_key); }

std::string VipSpec::key() const { return vip_key().to_string(); }

std::vector<std::string> disruptive_vip_changes(const VipSpec& was, const VipSpec& now) {
    std::vector<std::string> out;
    if (was.hash != now.hash)
        out.push_back("VIP " + now.key() + ": hash " + to_string(was.hash) + " -> " +
                      to_string(now.hash) + ": its flows move to new ring slots");
    if (was.ring_size != now.ring_size)
        out.push_back("VIP " + now.key() + ": ring_size " + std::to_string(was.ring_size) + " -> " +
                      std::to_string(now.ring_size) + ": its flows move to new ring slots");
    return out;
}

const BackendSpec* VipSpec::find_backend(const net::IpAddress& a) const {
    auto it = std::find_if(backends.begin(), backends.end(),
                           [&](const BackendSpec& b) { return b.address == a; });
    return it == backends.end() ? nullptr : &*it;
}

BackendSpec* VipSpec::find_backend(const net::IpAddress& a) {
    return const_cast<BackendSpec*>(std::as_const(*this).find_backend(a));
}

const VipSpec* Config::find_vip(const std::string& key) const {
    auto it =
        std::find_if(vips.begin(), vips.end(), [&](const VipSpec& v) { return v.key() == key; });
    return it == vips.end() ? nullptr : &*it;
}

VipSpec* Config::find_vip(const std::string& key) {
    return const_cast<VipSpec*>(std::as_const(*this).find_vip(key));
}

std::expected<VipKey, std::string> parse_vip_key(std::string_view text) {
    const std::string shown = shown_value(text, '\'');
    const char* form =
        " (expected ADDRESS:PORT[/tcp|/udp], e.g. 198.51.100.10:80/tcp or "
        "[2001:db8::10]:443/udp)";
    std::string_view endpoint = text;
    Protocol protocol = Protocol::kTcp;
    // The protocol follows the last '/', which cannot occur in an endpoint.
    if (auto slash = text.rfind('/'); slash != std::string_view::npos) {
        endpoint = text.substr(0, slash);
        auto name = text.substr(slash + 1);
        auto parsed = parse_protocol(name);
        if (!parsed) {
            return std::unexpected(shown + " is not a VIP: protocol " + shown_value(name, '\'') +
                                   " is neither tcp nor udp" + form);
        }
        protocol = *parsed;
    }
    auto ep = net::Endpoint::parse(endpoint);
    if (!ep) {
        // The reason quotes the endpoint again, uncut: only a short one's.
        const std::string reason =
            text.size() <= kShownValueBytes ? ep.error() : "not ADDRESS:PORT";
        return std::unexpected(shown + " is not a VIP: " + reason + form);
    }
    return VipKey{ep->address, ep->port, protocol};
}

std::expected<Duration, std::string> parse_duration(std::string_view text) {
    const std::string shown = shown_value(text, '\'');
    const char* form = "a whole number and a unit: ms, s, m or h, e.g. 500ms, 2s, 1m";
    std::size_t digits = 0;
    while (digits < text.size() && text[digits] >= '0' && text[digits] <= '9') ++digits;
    if (digits == 0) return std::unexpected(shown + " is not a duration (expected " + form + ")");
    std::uint64_t value = 0;
    auto [end, ec] = std::from_chars(text.data(), text.data() + digits, value);
    (void)end;
    const std::string_view unit = text.substr(digits);
    if (unit.empty()) {
        return std::unexpected(shown + " has no unit; units are required (expected " +
                               std::string(form) + ")");
    }
    std::uint64_t scale = 0;
    if (unit == "ms") {
        scale = 1;
    } else if (unit == "s") {
        scale = 1'000;
    } else if (unit == "m") {
        scale = 60'000;
    } else if (unit == "h") {
        scale = 3'600'000;
    } else {
        return std::unexpected(shown + " has an unknown unit " + shown_value(unit, '\'') +
                               " (expected " + form + ")");
    }
    // Bound: ten years is more than any setting needs, and far from overflow.
    constexpr std::uint64_t kMaxMs = 10ULL * 366 * 24 * 3'600'000;
    if (ec != std::errc{} || value > kMaxMs / scale) {
        return std::unexpected(shown + " is too long (expected at most " +
                               std::to_string(kMaxMs / 3'600'000) + "h)");
    }
    return Duration{static_cast<Duration::rep>(value * scale)};
}

std::string format_duration(Duration d) {
    const auto ms = d.count();
    if (ms == 0) return "0s";
    if (ms % 3'600'000 == 0) return std::to_string(ms / 3'600'000) + "h";
    if (ms % 60'000 == 0) return std::to_string(ms / 60'000) + "m";
    if (ms % 1'000 == 0) return std::to_string(ms / 1'000) + "s";
    return std::to_string(ms) + "ms";
}

std::string fleet_prefix(const FleetSettings& fleet) {
    if (fleet.prefix.empty()) return "/xlb/" + fleet.name + "/";
    return fleet.prefix.ends_with('/') ? fleet.prefix : fleet.prefix + "/";
}

void copy_fleet_wide(Settings& to, const Settings& from) {
    to.hash_seed = from.hash_seed;
    to.hash_seed_set = from.hash_seed_set;
    to.icmp_too_big = from.icmp_too_big;
    to.encap = from.encap;
    to.gue_port = from.gue_port;
    to.second_chance = from.second_chance;
    to.health_history = from.health_history;
}

bool fleet_wide_differ(const Settings& a, const Settings& b) {
    Settings x = a;
    copy_fleet_wide(x, b);
    return !(x == a);
}

}  // namespace xlb::config
