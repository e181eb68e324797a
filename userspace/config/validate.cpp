// SPDX-License-Identifier: Apache-2.0
// The semantic rules: one place, used by the file reader and by the API.
#include <algorithm>
#include <cctype>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <map>
#include <set>
#include <string>
#include <utility>

#include "decode.h"
#include "validate_internal.h"
#include "xlb/config/config.h"
#include "xlb/files/files.h"
#include "xlb/maglev/maglev.h"
#include "xlb/net/address.h"
#include "xlb/quic/key_file.h"

namespace xlb::config {

namespace {

using detail::join;

// Bounds, documented in docs/config.md.
constexpr std::uint16_t kMinMtu = 576;          // IPv4's minimum reassembly size
constexpr std::uint16_t kMaxMtu = 9000;         // jumbo frames
constexpr std::uint16_t kMinMtuV6 = 1280 + 40;  // IPv6 minimum after an IPv6 outer header
constexpr std::uint16_t kGueOverhead = 8 + 4;   // UDP + GUE headers (abi.h)
constexpr std::uint16_t kHintV6 = 20;           // a second-chance hint with an IPv6 address
constexpr std::uint32_t kMaxVipsLimit = 65536;
// Keeps every VIP's weight sum (at most max_backends * kMaxWeight) in 32 bits.
constexpr std::uint32_t kMaxBackendsLimit = 262144;
constexpr std::uint32_t kMaxConntrackLimit = 134'217'728;  // 2^27 entries, ~10 GiB
constexpr Duration kMinInterval{10};
constexpr Duration kMaxDurationSetting{3'600'000};  // 1h
// Entry times are 32-bit counts of 2^20 ns and wrap after about 52 days; an
// idle time is only meaningful well inside that.
constexpr Duration kMinIdleTimeout{1'000};
constexpr Duration kMaxIdleTimeout{30LL * 24 * 3'600'000};  // 30 days, exclusive
constexpr Duration kMinSweepInterval{1'000};
constexpr Duration kMaxSweepInterval{3'600'000};
// syn_flood: a rate of 1 per second per CPU is a test's, 10^8 more than a
// CPU can take; the flood's end is confirmed within a second to an hour.
constexpr std::uint32_t kMinSynFloodRate = 1;
constexpr std::uint32_t kMaxSynFloodRate = 100'000'000;
constexpr Duration kMinSynFloodEndAfter{1'000};
constexpr Duration kMaxSynFloodEndAfter{3'600'000};
constexpr std::size_t kMaxNameLength = 64;
constexpr std::size_t kMaxHashKeyLength = 255;
constexpr std::size_t kIfNameMax = 15;  // IFNAMSIZ - 1

// Collects issues under a path prefix ("vips[3]"). `local` dependencies are
// relative to the prefix, `global` ones absolute (see detail::Issue).
struct Out {
    std::vector<detail::Issue>& issues;
    std::string prefix;
    void add(std::string_view path, std::string message, std::vector<std::string> local = {},
             std::vector<std::string> global = {}) const {
        detail::Issue issue{ValidationIssue{join(prefix, path), std::move(message)},
                            std::move(global)};
        for (const auto& l : local) issue.depends_on.push_back(join(prefix, l));
        issues.push_back(std::move(issue));
    }
};

std::string number(double v) {
    char buf[32];
    std::snprintf(buf, sizeof(buf), "%g", v);
    return buf;
}

std::string dur(Duration d) { return format_duration(d); }

bool is_unicast(const net::IpAddress& a) {
    const auto& b = a.bytes;
    if (a.is_v4()) {
        const bool zero = b[0] == 0 && b[1] == 0 && b[2] == 0 && b[3] == 0;
        const bool multicast = (b[0] & 0xf0) == 0xe0;
        const bool broadcast = b[0] == 255 && b[1] == 255 && b[2] == 255 && b[3] == 255;
        return !zero && !multicast && !broadcast;
    }
    const bool zero = std::all_of(b.begin(), b.end(), [](std::uint8_t x) { return x == 0; });
    return !zero && b[0] != 0xff;
}

bool is_loopback(const net::IpAddress& a) {
    const auto& b = a.bytes;
    if (a.is_v4()) return b[0] == 127;
    return std::all_of(b.begin(), b.begin() + 15, [](std::uint8_t x) { return x == 0; }) &&
           b[15] == 1;
}

std::string family_name(const net::IpAddress& a) { return a.is_v4() ? "IPv4" : "IPv6"; }

bool printable(std::string_view s) {
    return std::none_of(s.begin(), s.end(), [](char c) {
        auto u = static_cast<unsigned char>(c);
        return u < 0x20 || u == 0x7f;
    });
}

bool is_token(std::string_view s) {
    return std::none_of(s.begin(), s.end(), [](char c) {
        auto u = static_cast<unsigned char>(c);
        return u <= 0x20 || u == 0x7f;
    });
}

// Keys of one check type set on another would be silently ignored.
void check_health_fields(const HealthCheck& hc, const Out& out) {
    const std::string type = to_string(hc.type);
    const HealthCheck defaults;
    const bool http = speaks_http(hc.type);
    const bool https = hc.type == HealthCheckType::kHttps;
    const bool udp = hc.type == HealthCheckType::kUdp;
    auto only = [&](const char* key, bool set, const char* wanted) {
        if (set) {
            out.add(std::string("health_check.") + key,
                    "set for type " + type + ", expected only with type: " + wanted,
                    {"health_check.type"});
        }
    };
    if (!http) {
        const char* wanted = "http or https";
        only("path", hc.path != defaults.path, wanted);
        only("host", !hc.host.empty(), wanted);
        only("expected_statuses", hc.expected_statuses != defaults.expected_statuses, wanted);
        only("body_contains", !hc.body_contains.empty(), wanted);
        only("reuse_connection", hc.reuse_connection != defaults.reuse_connection, wanted);
        only("reuse_limit", hc.reuse_limit != defaults.reuse_limit, wanted);
    }
    if (!https) {
        only("sni", !hc.sni.empty(), "https");
        only("ca_file", !hc.ca_file.empty(), "https");
        only("verify", hc.verify != defaults.verify, "https");
    }
    if (!udp) {
        only("udp_payload", !hc.udp_payload.empty(), "udp");
        only("udp_expect", !hc.udp_expect.empty(), "udp");
    }
    if (!http) {
        only("rate_limit_bias", hc.rate_limit_bias != defaults.rate_limit_bias, "http or https");
    }
    if (hc.type == HealthCheckType::kNone) {
        const char* wanted = "tcp, http, https or udp";
        only("failure_accrual", hc.failure_accrual != defaults.failure_accrual, wanted);
        only("flapping", hc.flapping != defaults.flapping, wanted);
    }
}

std::string share(double v) { return number(v); }

bool in_unit(double v) { return v >= 0.0 && v <= 1.0; }      // [0, 1], not NaN
bool in_open_unit(double v) { return v > 0.0 && v <= 1.0; }  // (0, 1]

// Failure accrual, rate-limit bias and flapping (docs/config.md, health_check).
void check_health_policies(const HealthCheck& hc, const Out& out) {
    const HealthCheck defaults;
    const FailureAccrual& fa = hc.failure_accrual;
    const FailureAccrual fa0 = defaults.failure_accrual;
    const std::string fa_at = "health_check.failure_accrual";
    if (!fa.enabled) {
        // Settings of an accrual that is off would be silently ignored.
        FailureAccrual as_set = fa;
        as_set.enabled = fa0.enabled;
        if (as_set != fa0) {
            out.add(fa_at,
                    "settings given while enabled is false, expected enabled: true to use them "
                    "(or leave them out)",
                    {fa_at + ".enabled"});
        }
    } else {
        if (!in_open_unit(fa.success_rate)) {
            out.add(fa_at + ".success_rate",
                    "found " + share(fa.success_rate) +
                        ", expected a number above 0, at most 1 (eject below this share of "
                        "successful probes)");
        }
        if (fa.min_probes < 1) {
            out.add(fa_at + ".min_probes",
                    "found 0, expected an integer >= 1 (probes in the window before the success "
                    "rate is judged)");
        }
        if (fa.window <= Duration::zero() || fa.window > kMaxDurationSetting) {
            out.add(fa_at + ".window", "found " + dur(fa.window) + ", expected above 0s, at most " +
                                           dur(kMaxDurationSetting));
        } else if (fa.min_probes >= 1 && hc.interval >= kMinInterval &&
                   fa.window < hc.interval * fa.min_probes) {
            // A window that cannot hold min_probes probes never judges anything.
            out.add(fa_at + ".window",
                    "found " + dur(fa.window) + ", which holds fewer than min_probes (" +
                        std::to_string(fa.min_probes) + ") probes at the interval " +
                        dur(hc.interval) + "; expected at least min_probes x interval (" +
                        dur(hc.interval * fa.min_probes) +
                        "), or a shorter interval (the success rate would never be judged)",
                    {"health_check.interval", fa_at + ".min_probes"});
        }
        if (fa.min_penalty <= Duration::zero() || fa.min_penalty > kMaxDurationSetting) {
            out.add(fa_at + ".min_penalty", "found " + dur(fa.min_penalty) +
                                                ", expected above 0s, at most " +
                                                dur(kMaxDurationSetting));
        } else if (fa.max_penalty < fa.min_penalty || fa.max_penalty > kMaxDurationSetting) {
            out.add(fa_at + ".max_penalty",
                    "found " + dur(fa.max_penalty) + ", expected min_penalty (" +
                        dur(fa.min_penalty) + ") to " + dur(kMaxDurationSetting),
                    {fa_at + ".min_penalty"});
        }
        if (!in_unit(fa.jitter)) {
            out.add(fa_at + ".jitter",
                    "found " + share(fa.jitter) +
                        ", expected a number 0-1 (share of the hold-down added at random)");
        }
    }

    const RateLimitBias& rb = hc.rate_limit_bias;
    const std::string rb_at = "health_check.rate_limit_bias";
    if (speaks_http(hc.type)) {  // on other types: check_health_fields()
        if (!in_open_unit(rb.factor)) {
            out.add(rb_at + ".factor", "found " + share(rb.factor) +
                                           ", expected a number above 0, at most 1 (1 = no bias)");
        }
        if (rb.penalty < Duration::zero() || rb.penalty > kMaxDurationSetting) {
            out.add(rb_at + ".penalty",
                    "found " + dur(rb.penalty) + ", expected 0s to " + dur(kMaxDurationSetting));
        } else if (rb.max_retry_after < rb.penalty || rb.max_retry_after > kMaxDurationSetting) {
            out.add(rb_at + ".max_retry_after",
                    "found " + dur(rb.max_retry_after) + ", expected penalty (" + dur(rb.penalty) +
                        ") to " + dur(kMaxDurationSetting),
                    {rb_at + ".penalty"});
        }
    }

    const Flapping& fl = hc.flapping;
    const Flapping fl0 = defaults.flapping;
    const std::string fl_at = "health_check.flapping";
    if (fl.changes == 0) {
        if (fl.window != fl0.window || fl.hold != fl0.hold) {
            out.add(fl_at,
                    "window or hold given while changes is 0 (off), expected changes >= 1 to use "
                    "them (or leave them out)",
                    {fl_at + ".changes"});
        }
    } else {
        if (fl.window <= Duration::zero() || fl.window > kMaxDurationSetting) {
            out.add(fl_at + ".window", "found " + dur(fl.window) + ", expected above 0s, at most " +
                                           dur(kMaxDurationSetting));
        }
        if (fl.hold <= Duration::zero() || fl.hold > kMaxDurationSetting) {
            out.add(fl_at + ".hold", "found " + dur(fl.hold) + ", expected above 0s, at most " +
                                         dur(kMaxDurationSetting));
        }
    }
}

// A server name as SNI carries it (RFC 6066 3): a DNS name, never an
// address literal.
bool is_dns_name(std::string_view s) {
    if (s.empty() || s.size() > 253 || net::IpAddress::parse(s)) return false;
    std::size_t label = 0;
    for (std::size_t i = 0; i < s.size(); ++i) {
        const char c = s[i];
        if (c == '.') {
            if (label == 0 || s[i - 1] == '-') return false;
            label = 0;
            continue;
        }
        const bool alnum = std::isalnum(static_cast<unsigned char>(c)) != 0;
        if (!alnum && c != '-' && c != '_') return false;
        if (c == '-' && label == 0) return false;
        if (++label > 63) return false;
    }
    return s.back() != '-';
}

// The CA file is read where the agent runs the probes: one it cannot read
// (or that holds no certificate) would fail every probe of the VIP for a
// reason that has nothing to do with its backends.
void check_ca_file(const std::string& path, const Out& out) {
    const std::string at = "health_check.ca_file";
    if (path.front() != '/') {
        out.add(at, "found " + shown_value(path) +
                        ", expected an absolute path to a PEM file of CA certificates");
        return;
    }
    auto content = files::read_file(path);
    if (!content) {
        out.add(at, "cannot read the CA file: " + content.error().message());
    } else if (!*content) {
        out.add(at, "cannot read the CA file " + path + ": " + std::strerror(ENOENT));
    } else if ((*content)->find("-----BEGIN CERTIFICATE-----") == std::string::npos) {
        out.add(at, path +
                        " holds no PEM certificate (\"-----BEGIN CERTIFICATE-----\"); "
                        "expected the CA certificates that signed the backends' ones");
    }
}

void check_tls(const HealthCheck& hc, const Out& out) {
    if (!hc.sni.empty() && !is_dns_name(hc.sni)) {
        out.add("health_check.sni",
                "found " + shown_value(hc.sni) +
                    ", expected a DNS name, e.g. www.example.com (an address is not sent as "
                    "SNI; leave sni out to check the certificate against the probed address)");
    }
    if (!hc.ca_file.empty()) {
        if (!hc.verify) {
            out.add("health_check.ca_file",
                    "set while verify is false, expected verify: true to use it (or leave it "
                    "out)",
                    {"health_check.verify"});
        } else {
            check_ca_file(hc.ca_file, out);
        }
    }
}

void check_health(const HealthCheck& hc, const VipSpec& vip, const Out& out) {
    check_health_fields(hc, out);
    if (hc.type == HealthCheckType::kNone) return;
    const std::string type = to_string(hc.type);
    if (hc.interval < kMinInterval || hc.interval > kMaxDurationSetting) {
        out.add("health_check.interval", "found " + dur(hc.interval) + ", expected " +
                                             dur(kMinInterval) + " to " + dur(kMaxDurationSetting));
    }
    if (hc.timeout <= Duration::zero()) {
        out.add("health_check.timeout",
                "found " + dur(hc.timeout) + ", expected a timeout above 0 and below the interval");
    } else if (hc.timeout >= hc.interval) {
        out.add("health_check.timeout",
                "found " + dur(hc.timeout) + ", not below the interval " + dur(hc.interval) +
                    "; expected a timeout shorter than the interval (a probe must fail before "
                    "the next one starts)",
                {"health_check.interval"});
    }
    if (hc.jitter < Duration::zero() || hc.jitter > kMaxDurationSetting) {
        out.add("health_check.jitter",
                "found " + dur(hc.jitter) + ", expected 0s to " + dur(kMaxDurationSetting));
    }
    if (hc.reuse_limit <= Duration::zero() || hc.reuse_limit > kMaxDurationSetting) {
        out.add("health_check.reuse_limit",
                "found " + dur(hc.reuse_limit) + ", expected a positive duration up to " +
                    dur(kMaxDurationSetting) + " (how long a kept connection serves probes)");
    }
    if (hc.unhealthy_threshold < 1) {
        out.add("health_check.unhealthy_threshold",
                "found 0, expected an integer >= 1 (consecutive failures before unhealthy)");
    }
    if (hc.healthy_threshold < 1) {
        out.add("health_check.healthy_threshold",
                "found 0, expected an integer >= 1 (consecutive successes before healthy)");
    }
    if (hc.port == 0 && vip.port == 0) {
        out.add("health_check.port",
                "found 0 (the VIP's port), but the VIP's port is 0 (every port); expected the "
                "port to probe, 1-65535",
                {"port"});
    }

    // A probe through the data path is addressed to the VIP: it must be
    // something the VIP matches, or it goes nowhere.
    if (hc.via_vip) {
        const Protocol probe = hc.type == HealthCheckType::kUdp ? Protocol::kUdp : Protocol::kTcp;
        if (probe != vip.protocol) {
            out.add("health_check.via_vip",
                    "found true for a " + type + " check of a " + to_string(vip.protocol) +
                        " VIP, which does not match the probe; expected via_vip: false, or a " +
                        (vip.protocol == Protocol::kUdp ? "udp" : "tcp, http or https") + " check",
                    {"protocol", "health_check.type"});
        } else if (vip.port != 0 && hc.port != 0 && hc.port != vip.port) {
            out.add("health_check.port",
                    "found " + std::to_string(hc.port) +
                        " with via_vip: true, but the VIP matches only port " +
                        std::to_string(vip.port) + "; expected 0 (the VIP's port) or " +
                        std::to_string(vip.port),
                    {"port", "health_check.via_vip"});
        }
    }
    check_health_policies(hc, out);
    if (hc.type == HealthCheckType::kHttps) check_tls(hc, out);
    const bool http = speaks_http(hc.type);
    if (http) {
        if (hc.path.empty() || hc.path.front() != '/' || !is_token(hc.path)) {
            out.add("health_check.path",
                    "found " + shown_value(hc.path) +
                        ", expected an absolute request path without spaces, e.g. /healthz");
        }
        if (!is_token(hc.host)) {
            out.add("health_check.host",
                    "found " + shown_value(hc.host) +
                        ", expected a host name without spaces or control characters");
        }
        if (!printable(hc.body_contains)) {
            out.add("health_check.body_contains", "found " + shown_value(hc.body_contains) +
                                                      ", expected text without control characters");
        }
        if (hc.expected_statuses.empty()) {
            out.add("health_check.expected_statuses",
                    "found an empty list, expected at least one status or range, e.g. "
                    "[\"200-299\"]");
        }
        for (std::size_t i = 0; i < hc.expected_statuses.size(); ++i) {
            const auto& r = hc.expected_statuses[i];
            const std::string shown = r.first == r.last
                                          ? std::to_string(r.first)
                                          : std::to_string(r.first) + "-" + std::to_string(r.last);
            if (r.first < 100 || r.last > 599 || r.first > r.last) {
                out.add("health_check.expected_statuses[" + std::to_string(i) + "]",
                        "found " + shown +
                            ", expected an HTTP status 100-599 or a range FIRST-LAST with "
                            "FIRST <= LAST");
            }
        }
    }
}

void check_backends(const VipSpec& vip, const Settings* settings, const Out& out) {
    std::map<net::IpAddress, std::size_t> addresses;
    std::map<std::string, std::size_t> identities;
    bool v4_reported = false, v6_reported = false;
    for (std::size_t i = 0; i < vip.backends.size(); ++i) {
        const BackendSpec& b = vip.backends[i];
        const std::string at = "backends[" + std::to_string(i) + "]";
        const std::string addr = b.address.to_string();
        bool address_ok = true;
        auto bad_address = [&](std::string message, std::vector<std::string> deps = {}) {
            out.add(at + ".address", std::move(message), std::move(deps));
            address_ok = false;
        };
        if (!is_unicast(b.address)) {
            bad_address("found " + addr + ", expected a unicast address");
        } else if (is_loopback(b.address)) {
            bad_address("found loopback address " + addr +
                        ", expected the address of a server behind the VIP (packets to a "
                        "backend leave this host encapsulated)");
        } else if (b.address == vip.address) {
            bad_address("found " + addr +
                            ", the VIP's own address; expected the address of a server behind it",
                        {"address"});
        } else if (!vip.address.is_v4() && b.address.is_v4()) {
            bad_address("found IPv4 address " + addr +
                            " in an IPv6 VIP, expected an IPv6 address (IPv6-in-IPv4 "
                            "encapsulation is not supported)",
                        {"address"});
        } else if (auto [it, fresh] = addresses.emplace(b.address, i); !fresh) {
            bad_address("found " + addr + " again (also backends[" + std::to_string(it->second) +
                            "]), expected each backend once per VIP",
                        {"backends[" + std::to_string(it->second) + "].address"});
        }
        if (address_ok) {
            const std::string id = b.identity();
            if (auto [it, fresh] = identities.emplace(id, i); !fresh) {
                const std::string other = "backends[" + std::to_string(it->second) + "]";
                out.add(
                    at + (b.hash_key.empty() ? ".address" : ".hash_key"),
                    "found identity " + shown_value(id) + " again (also backends[" +
                        std::to_string(it->second) +
                        "]), expected a distinct hash_key per backend (Maglev places "
                        "backends by it)",
                    {at + ".address", at + ".hash_key", other + ".address", other + ".hash_key"});
            }
        }
        if (b.weight > kMaxWeight) {
            out.add(at + ".weight", "found " + std::to_string(b.weight) + ", expected 0-" +
                                        std::to_string(kMaxWeight));
        }
        if (b.hash_key.size() > kMaxHashKeyLength || !printable(b.hash_key)) {
            out.add(at + ".hash_key", "found " + shown_value(b.hash_key) + ", expected at most " +
                                          std::to_string(kMaxHashKeyLength) +
                                          " characters without control characters");
        }
        if (settings && address_ok) {
            // Once per family: one missing setting is one mistake.
            const bool v4 = b.address.is_v4();
            const auto& es = settings->encap_source;
            bool& reported = v4 ? v4_reported : v6_reported;
            if (!(v4 ? es.ipv4 : es.ipv6) && !reported) {
                reported = true;
                const std::string family = v4 ? "IPv4" : "IPv6";
                const std::string field = v4 ? "encap_source.ipv4" : "encap_source.ipv6";
                out.add(at + ".address",
                        "found " + family + " backend " + addr + " but " + field +
                            " is not set; expected an " + family +
                            " outer source address (or prefix) in " + field,
                        {}, {"encap_source"});
            }
        }
    }
}

std::uint16_t min_mtu_v6(const Settings& s) {
    if (s.encap != Encap::kGue) return kMinMtuV6;
    return kMinMtuV6 + kGueOverhead + (s.second_chance.enabled ? kHintV6 : 0);
}

// An explicit syn_cookies auto or always is a promise: every condition the
// data path needs must hold (unset, the VIP quietly runs without cookies:
// effective_syn_cookies()).
void check_syn_cookies(const VipSpec& vip, const Settings* settings, const Out& out) {
    if (!vip.syn_cookies || *vip.syn_cookies == SynCookies::kOff) return;
    const std::string found = std::string("found ") + to_string(*vip.syn_cookies);
    if (vip.protocol != Protocol::kTcp) {
        out.add("syn_cookies",
                found + " on a " + to_string(vip.protocol) +
                    " VIP, expected off or no syn_cookies (cookies answer TCP handshakes)",
                {"protocol"});
        return;
    }
    if (!vip.conntrack) {
        out.add("syn_cookies",
                found +
                    " with conntrack: false, expected conntrack: true (a cookie's ACK becomes "
                    "a connection-table entry)",
                {"conntrack"});
        return;
    }
    if (settings && settings->encap != Encap::kGue) {
        out.add("syn_cookies",
                found + " with encap: " + to_string(settings->encap) +
                    ", expected encap: gue (the handshake's options reach the backend in the GUE "
                    "header)",
                {}, {"encap"});
        return;
    }
    std::vector<std::string> missing, deps;
    for (std::size_t i = 0; i < vip.backends.size(); ++i) {
        const BackendSpec& b = vip.backends[i];
        if (b.state == AdminState::kDisabled || b.cookie_acks) continue;
        const std::string at = "backends[" + std::to_string(i) + "]";
        missing.push_back(b.address.to_string() + " (" + at + ")");
        deps.insert(deps.end(), {at + ".cookie_acks", at + ".state", at + ".address"});
    }
    if (missing.empty()) return;
    std::string list;
    for (std::size_t i = 0; i < missing.size() && i < 3; ++i) list += (i ? ", " : "") + missing[i];
    if (missing.size() > 3) list += " and " + std::to_string(missing.size() - 3) + " more";
    out.add("syn_cookies",
            found + " but backend" +
                (missing.size() > 1 ? "s " + list + " lack" : " " + list + " lacks") +
                " cookie_acks: true, expected every backend that is not disabled to accept "
                "cookie ACKs (xlb-decap with its cookie program; docs/syn-cookies.md)",
            deps);
}

// Source lists: of the VIP's family, each prefix once, and none in both.
void check_sources(const VipSpec& vip, const Out& out) {
    std::map<net::Prefix, std::string> seen;
    for (auto [key, list] : {std::pair{"allow_sources", &vip.allow_sources},
                             std::pair{"deny_sources", &vip.deny_sources}}) {
        if (list->size() > kMaxSourcePrefixes) {
            out.add(key, "found " + std::to_string(list->size()) + " prefixes, expected at most " +
                             std::to_string(kMaxSourcePrefixes));
            continue;
        }
        for (std::size_t i = 0; i < list->size(); ++i) {
            const net::Prefix& p = (*list)[i];
            const std::string at = std::string(key) + "[" + std::to_string(i) + "]";
            if (p.address.family != vip.address.family) {
                out.add(at,
                        "found " + p.to_string() + ", an " + family_name(p.address) +
                            " prefix, expected " + family_name(vip.address) +
                            " prefixes (the VIP's family)",
                        {"address"});
                continue;
            }
            if (auto [it, fresh] = seen.emplace(p, at); !fresh) {
                const bool same_list = it->second.starts_with(key);
                out.add(at,
                        "found " + p.to_string() + " again (also " + it->second + "), " +
                            (same_list ? "expected each prefix once"
                                       : "expected a prefix in one of the lists (a denied "
                                         "prefix is refused whatever allow_sources says)"),
                        {it->second});
            }
        }
    }
}

// QUIC-LB (docs/quic.md): the CID formats the data path can read, and the
// server ids it maps to backends. Paths are "quic.<key>" for a VIP with one
// config (the file's usual mapping form), "quic[i].<key>" with several.
void check_quic(const VipSpec& vip, const Out& out) {
    if (vip.quic.empty()) {
        for (std::size_t i = 0; i < vip.backends.size(); ++i) {
            if (!vip.backends[i].server_id) continue;
            out.add("backends[" + std::to_string(i) + "].server_id",
                    "set on a VIP without quic, expected quic on the VIP to use it (or leave it "
                    "out)",
                    {"quic"});
        }
        return;
    }
    if (vip.protocol != Protocol::kUdp) {
        out.add("quic",
                std::string("found on a ") + to_string(vip.protocol) +
                    " VIP, expected quic only on udp VIPs (QUIC runs over UDP)",
                {"protocol"});
        return;
    }
    std::map<unsigned, std::size_t> ids;
    for (std::size_t i = 0; i < vip.quic.size(); ++i) {
        const QuicConfig& q = vip.quic[i];
        const std::string at =
            vip.quic.size() == 1 ? std::string("quic") : "quic[" + std::to_string(i) + "]";
        auto add = [&](const std::string& key, std::string message,
                       std::vector<std::string> deps = {}) {
            deps.push_back("quic");
            out.add(at + "." + key, std::move(message), std::move(deps));
        };
        if (q.config_id > 6) {
            add("config_id", "found " + std::to_string(q.config_id) +
                                 ", expected 0-6 (7 marks CIDs that no load balancer routes)");
        } else if (auto [it, fresh] = ids.emplace(q.config_id, i); !fresh) {
            add("config_id", "found " + std::to_string(q.config_id) + " again (also quic[" +
                                 std::to_string(it->second) +
                                 "]), expected a distinct config_id per config (the first octet "
                                 "of a CID names its config)");
        }
        const bool sid_ok = q.server_id_length >= 1 && q.server_id_length <= 15;
        const bool nonce_ok = q.nonce_length >= 4 && q.nonce_length <= 18;
        if (!sid_ok)
            add("server_id_length", "found " + std::to_string(q.server_id_length) +
                                        ", expected 1-15 (octets of server id)");
        if (!nonce_ok)
            add("nonce_length",
                "found " + std::to_string(q.nonce_length) + ", expected 4-18 (octets of nonce)");
        const unsigned sum = q.server_id_length + q.nonce_length;
        if (sid_ok && nonce_ok && sum > 19) {
            add("nonce_length",
                "server_id_length " + std::to_string(q.server_id_length) + " + nonce_length " +
                    std::to_string(q.nonce_length) + " = " + std::to_string(sum) +
                    ", expected at most 19 (a CID holds at most 20 octets, the first one of "
                    "them the config's)",
                {at + ".server_id_length"});
        }
        if (q.mode == QuicMode::kEncrypted) {
            if (sid_ok && nonce_ok && sum != 16) {
                add("mode",
                    "found encrypted with server_id_length " + std::to_string(q.server_id_length) +
                        " + nonce_length " + std::to_string(q.nonce_length) + " = " +
                        std::to_string(sum) +
                        ", expected a sum of 16: only the single-pass form (one AES-128 block) "
                        "is supported, not the four-pass form",
                    {at + ".server_id_length", at + ".nonce_length"});
            }
            if (q.key_file.empty()) {
                add("key_file",
                    "missing, expected the path of the file holding the 16-octet AES-128 key "
                    "(mode encrypted)",
                    {at + ".mode"});
            } else if (q.key_file.front() != '/') {
                add("key_file", "found " + shown_value(q.key_file) +
                                    ", expected an absolute path to the file holding the key");
            } else if (auto key = quic::read_key_file(q.key_file); !key) {
                // Read where the configuration is checked: a key the agent
                // could not install stops the file or the change.
                add("key_file", key.error().message());
            }
        } else if (!q.key_file.empty()) {
            add("key_file",
                "set while mode is plaintext, expected mode: encrypted to use it (or leave it "
                "out)",
                {at + ".mode"});
        }
    }
    std::map<std::uint64_t, std::size_t> servers;
    for (std::size_t i = 0; i < vip.backends.size(); ++i) {
        const BackendSpec& b = vip.backends[i];
        if (!b.server_id) continue;
        const std::string at = "backends[" + std::to_string(i) + "].server_id";
        if (auto [it, fresh] = servers.emplace(*b.server_id, i); !fresh) {
            out.add(at,
                    "found " + std::to_string(*b.server_id) + " again (also backends[" +
                        std::to_string(it->second) +
                        "]), expected a distinct server_id per backend of the VIP",
                    {"backends[" + std::to_string(it->second) + "].server_id"});
            continue;
        }
        for (std::size_t c = 0; c < vip.quic.size(); ++c) {
            const unsigned len = vip.quic[c].server_id_length;
            if (len < 1 || len >= 8) continue;  // a bad length has its own error; >= 8 holds any
            if (*b.server_id >> (8 * len) == 0) continue;
            const std::string config =
                vip.quic.size() == 1 ? std::string("quic") : "quic[" + std::to_string(c) + "]";
            out.add(at,
                    "found " + std::to_string(*b.server_id) + ", expected below " +
                        std::to_string(std::uint64_t{1} << (8 * len)) + " (" + config +
                        " has server_id_length " + std::to_string(len) + ")",
                    {config + ".server_id_length", "quic"});
            break;
        }
    }
}

void check_vip_into(const VipSpec& vip, const Settings* settings, const Out& out) {
    if (!is_unicast(vip.address)) {
        out.add("address", "found " + vip.address.to_string() + ", expected a unicast address");
    } else if (settings && !vip.address.is_v4() && settings->mtu >= kMinMtu &&
               settings->mtu < min_mtu_v6(*settings)) {
        out.add("address",
                "found an IPv6 VIP with mtu " + std::to_string(settings->mtu) +
                    ", expected mtu >= " + std::to_string(min_mtu_v6(*settings)) +
                    (settings->encap != Encap::kGue
                         ? " (IPv6's minimum 1280 plus the 40-byte outer header)"
                     : settings->second_chance.enabled
                         ? " (IPv6's minimum 1280 plus the 40-byte outer header, 12 bytes of UDP "
                           "and GUE and a 20-byte second-chance hint)"
                         : " (IPv6's minimum 1280 plus the 40-byte outer header and 12 bytes "
                           "of UDP and GUE)"),
                {}, {"mtu"});
    }
    if (!vip.name.empty()) {
        const bool ok = vip.name.size() <= kMaxNameLength &&
                        std::all_of(vip.name.begin(), vip.name.end(), [](char c) {
                            return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
                                   (c >= '0' && c <= '9') || c == '.' || c == '_' || c == '-';
                        });
        if (!ok) {
            out.add("name", "found " + shown_value(vip.name) + ", expected at most " +
                                std::to_string(kMaxNameLength) +
                                " characters from A-Z a-z 0-9 . _ - (it labels logs and metrics)");
        }
    }
    // Every backend that is not disabled can be put in the table at runtime
    // (enable, a weight change) without another file check, so the ring must
    // be big enough for all of them.
    const auto candidates = static_cast<std::size_t>(
        std::count_if(vip.backends.begin(), vip.backends.end(),
                      [](const BackendSpec& b) { return b.state != AdminState::kDisabled; }));
    if (auto valid = maglev::validate_ring_size(vip.ring_size, candidates); !valid) {
        out.add("ring_size", valid.error().message, {"backends"});
    }
    if (!(vip.panic_threshold >= 0.0 && vip.panic_threshold <= 1.0)) {
        out.add("panic_threshold", "found " + number(vip.panic_threshold) +
                                       ", expected a number 0-1 (0 = never panic)");
    }
    if (vip.slow_start.window < Duration::zero() || vip.slow_start.window > kMaxDurationSetting) {
        out.add("slow_start.window", "found " + dur(vip.slow_start.window) +
                                         ", expected 0s (off) to " + dur(kMaxDurationSetting));
    }
    if (!(vip.slow_start.floor >= 0.0 && vip.slow_start.floor <= 1.0)) {
        out.add("slow_start.floor",
                "found " + number(vip.slow_start.floor) +
                    ", expected a number 0-1 (share of the weight to start from)");
    }
    if (const auto& idle = vip.conntrack_idle_timeout) {
        if (!vip.conntrack) {
            out.add("conntrack_idle_timeout",
                    "set while conntrack is false, expected conntrack: true to use it (or leave "
                    "it out)",
                    {"conntrack"});
        } else if (*idle < kMinIdleTimeout || *idle >= kMaxIdleTimeout) {
            out.add("conntrack_idle_timeout",
                    "found " + dur(*idle) + ", expected at least " + dur(kMinIdleTimeout) +
                        " and below 30 days (entry times wrap after 52 days)");
        }
    }
    check_syn_cookies(vip, settings, out);
    check_sources(vip, out);
    check_quic(vip, out);
    check_health(vip.health_check, vip, out);
    check_backends(vip, settings, out);
}

void check_encap(const std::optional<net::IpAddress>& addr, std::uint8_t len, bool v4,
                 const Out& out) {
    if (!addr) return;
    const std::string key = v4 ? "encap_source.ipv4" : "encap_source.ipv6";
    const std::string want = v4 ? "IPv4" : "IPv6";
    const unsigned max = v4 ? 32 : 128;
    const std::string shown = addr->to_string() + "/" + std::to_string(len);
    if (addr->is_v4() != v4) {
        out.add(key, "found " + family_name(*addr) + " address " + addr->to_string() +
                         ", expected an " + want + " address or prefix");
    } else if (len < 1 || len > max) {
        out.add(key, "found prefix length /" + std::to_string(len) + ", expected /1 to /" +
                         std::to_string(max));
    } else if (!is_unicast(*addr)) {
        out.add(key, "found " + shown + ", expected a unicast address or prefix");
    }
}

bool check_path(const std::string& value, const char* key, const Out& out) {
    if (value.empty() || value.front() != '/' || !printable(value)) {
        out.add(key, "found " + shown_value(value) + ", expected an absolute path");
        return false;
    }
    return true;
}

bool fleet_name_char(char c) {
    return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || c == '_' || c == '.';
}

// "http://HOST:PORT" or "https://HOST:PORT" (HOST a name, an IPv4 address or
// a bracketed IPv6 one); the reason when it is not.
std::optional<std::string> endpoint_problem(const std::string& url) {
    std::string_view rest = url;
    if (rest.starts_with("https://"))
        rest.remove_prefix(8);
    else if (rest.starts_with("http://"))
        rest.remove_prefix(7);
    else
        return "expected http:// or https:// first";
    const auto colon = rest.rfind(':');
    if (colon == std::string_view::npos || colon == 0) return "expected HOST:PORT after the scheme";
    const std::string_view host = rest.substr(0, colon), port = rest.substr(colon + 1);
    if (host.front() == '[' ? host.back() != ']'
                            : !std::all_of(host.begin(), host.end(), [](char c) {
                                  return std::isalnum(static_cast<unsigned char>(c)) || c == '.' ||
                                         c == '-';
                              }))
        return "expected a host name or address before the port";
    unsigned number = 0;
    auto [end, ec] = std::from_chars(port.data(), port.data() + port.size(), number);
    if (ec != std::errc{} || end != port.data() + port.size() || number == 0 || number > 65535)
        return "expected a port 1-65535 at the end (and no path)";
    return std::nullopt;
}

void check_fleet(const FleetSettings& f, const Out& out) {
    if (f.name.empty() || f.name.size() > 63 ||
        !std::all_of(f.name.begin(), f.name.end(), fleet_name_char))
        out.add("fleet.name", "found " + shown_value(f.name) +
                                  ", expected 1-63 characters of a-z, 0-9, '-', '_' or '.'");
    if (!f.prefix.empty() && (f.prefix.front() != '/' || !printable(f.prefix)))
        out.add("fleet.prefix",
                "found " + shown_value(f.prefix) + ", expected a key prefix starting with '/'");
    if (f.endpoints.empty())
        out.add("fleet.endpoints", "found an empty list, expected at least one etcd member's URL");
    bool https = false;
    for (std::size_t i = 0; i < f.endpoints.size(); ++i) {
        const std::string& url = f.endpoints[i];
        https = https || url.starts_with("https://");
        if (auto problem = endpoint_problem(url))
            out.add(
                "fleet.endpoints[" + std::to_string(i) + "]",
                "found " + shown_value(url) + ", " + *problem + " (e.g. https://10.0.0.1:2379)");
    }
    if (!f.host_name.empty() && (f.host_name.size() > 253 ||
                                 !std::all_of(f.host_name.begin(), f.host_name.end(), [](char c) {
                                     return std::isalnum(static_cast<unsigned char>(c)) ||
                                            c == '-' || c == '_' || c == '.';
                                 })))
        out.add("fleet.host_name", "found " + shown_value(f.host_name) +
                                       ", expected a host name (letters, digits, '-', '_', '.')");
    for (auto [key, value] : {std::pair{"fleet.ca", &f.ca}, std::pair{"fleet.cert", &f.cert},
                              std::pair{"fleet.key", &f.key}})
        if (!value->empty()) check_path(*value, key, out);
    if (https && f.ca.empty())
        out.add("fleet.ca",
                "missing with https:// endpoints, expected the PEM file of the CA "
                "that signed the etcd members' certificates");
    if (f.cert.empty() != f.key.empty())
        out.add(f.cert.empty() ? "fleet.cert" : "fleet.key",
                "missing, expected both cert and key (this host's client certificate) or "
                "neither");
    if (!f.cert.empty() && !https)
        out.add("fleet.cert",
                "set with http:// endpoints only, expected https:// endpoints "
                "(a client certificate is sent over TLS)");
    auto range = [&](const char* key, Duration d, Duration lo, Duration hi) {
        if (d < lo || d > hi)
            out.add(key, "found " + dur(d) + ", expected " + dur(lo) + " to " + dur(hi));
    };
    range("fleet.lease_ttl", f.lease_ttl, Duration{2'000}, Duration{300'000});
    range("fleet.dial_timeout", f.dial_timeout, Duration{100}, Duration{60'000});
    range("fleet.request_timeout", f.request_timeout, Duration{100}, Duration{60'000});
    range("fleet.max_publish_wait", f.max_publish_wait, Duration{0}, Duration{10'000});
    range("fleet.max_lag", f.max_lag, Duration{0}, Duration{600'000});
}

void check_settings(const Settings& s, const Out& out) {
    if (s.interface.empty()) {
        out.add("interface", "found an empty name, expected a network interface, e.g. eth0");
    } else if (s.interface.size() > kIfNameMax || s.interface == "." || s.interface == ".." ||
               !std::all_of(s.interface.begin(), s.interface.end(), [](char c) {
                   auto u = static_cast<unsigned char>(c);
                   return u > 0x20 && u != 0x7f && c != '/' && c != ':';
               })) {
        out.add("interface", "found " + shown_value(s.interface) +
                                 ", expected a network interface name (at most 15 characters, "
                                 "no '/', ':' or spaces)");
    }
    const auto& nh = s.next_hop;
    if (nh.address && nh.mac) {
        out.add("next_hop",
                "found both address and mac, expected exactly one (address: the agent resolves "
                "the MAC; mac: a fixed MAC)",
                {"next_hop.address", "next_hop.mac"});
    } else if (!nh.address && !nh.mac) {
        out.add("next_hop", "found neither address nor mac, expected exactly one",
                {"next_hop.address", "next_hop.mac"});
    }
    if (nh.address && !is_unicast(*nh.address)) {
        out.add("next_hop.address", "found " + nh.address->to_string() +
                                        ", expected the unicast address of the next hop");
    }
    if (nh.mac && !net::is_unicast_mac(*nh.mac)) {
        out.add("next_hop.mac", "found " + net::mac_to_string(*nh.mac) +
                                    ", expected the unicast MAC of the next hop");
    }
    check_encap(s.encap_source.ipv4, s.encap_source.ipv4_prefix_len, true, out);
    check_encap(s.encap_source.ipv6, s.encap_source.ipv6_prefix_len, false, out);
    if (s.mtu < kMinMtu || s.mtu > kMaxMtu) {
        out.add("mtu", "found " + std::to_string(s.mtu) + ", expected an integer " +
                           std::to_string(kMinMtu) + "-" + std::to_string(kMaxMtu));
    }
    if (s.gue_port == 0) out.add("gue_port", "found 0, expected a UDP port 1-65535");
    if (s.second_chance.enabled && s.encap != Encap::kGue) {
        out.add("second_chance.enabled",
                "found true with encap: ipip, expected encap: gue (the hint that names the "
                "previous backend travels in the GUE header)",
                {}, {"encap"});
    }
    if (s.second_chance.enabled && s.second_chance.window.count() <= 0) {
        out.add("second_chance.window",
                "found 0, expected a positive duration (how long a VIP keeps its previous ring, "
                "e.g. 10m)");
    }
    const SynFloodSettings& sf = s.syn_flood;
    if (sf.start_rate < kMinSynFloodRate || sf.start_rate > kMaxSynFloodRate) {
        out.add("syn_flood.start_rate",
                "found " + std::to_string(sf.start_rate) + ", expected an integer " +
                    std::to_string(kMinSynFloodRate) + "-" + std::to_string(kMaxSynFloodRate) +
                    " (SYNs per second on one CPU that start a flood)");
    } else if (sf.end_rate < kMinSynFloodRate || sf.end_rate > sf.start_rate) {
        out.add("syn_flood.end_rate",
                "found " + std::to_string(sf.end_rate) + ", expected an integer " +
                    std::to_string(kMinSynFloodRate) + "-" + std::to_string(sf.start_rate) +
                    " (at most start_rate: below it on every CPU, the flood ends)",
                {"syn_flood.start_rate"});
    }
    if (sf.end_after < kMinSynFloodEndAfter || sf.end_after > kMaxSynFloodEndAfter) {
        out.add("syn_flood.end_after", "found " + dur(sf.end_after) + ", expected " +
                                           dur(kMinSynFloodEndAfter) + " to " +
                                           dur(kMaxSynFloodEndAfter));
    }
    if (s.health_history > kMaxHealthHistory) {
        out.add("health_history", "found " + std::to_string(s.health_history) +
                                      ", expected an integer 0-" +
                                      std::to_string(kMaxHealthHistory) +
                                      " (verdict changes kept in memory per backend; 0 = none)");
    }
    auto size = [&](const char* key, std::uint32_t value, std::uint32_t max) {
        if (value < 1 || value > max) {
            out.add(key, "found " + std::to_string(value) + ", expected an integer 1-" +
                             std::to_string(max));
        }
    };
    size("maps.max_vips", s.maps.max_vips, kMaxVipsLimit);
    size("maps.max_backends", s.maps.max_backends, kMaxBackendsLimit);
    size("maps.conntrack_entries", s.maps.conntrack_entries, kMaxConntrackLimit);
    if (check_path(s.api_socket, "api.socket", out) && s.api_socket.size() > kMaxSocketPathBytes) {
        out.add("api.socket", "found a path of " + std::to_string(s.api_socket.size()) +
                                  " bytes, expected at most " +
                                  std::to_string(kMaxSocketPathBytes) +
                                  " (the limit of a Unix socket address)");
    }
    // What useradd/groupadd accept (and a number); the group's existence is
    // checked when the socket is made, on the host that runs the agent.
    if (!s.api_group.empty() && (s.api_group.size() > 32 || s.api_group.front() == '-' ||
                                 !std::all_of(s.api_group.begin(), s.api_group.end(), [](char c) {
                                     return std::isalnum(static_cast<unsigned char>(c)) ||
                                            c == '_' || c == '-' || c == '.';
                                 }))) {
        out.add("api.group", "found " + shown_value(s.api_group) +
                                 ", expected a group name or number (letters, digits, '_', '-', "
                                 "'.'; at most 32 characters), e.g. xlb");
    }
    if (auto ep = net::Endpoint::parse(s.metrics_listen); !ep) {
        // The reason quotes the value again, uncut: only a short one's.
        const std::string reason =
            s.metrics_listen.size() <= kShownValueBytes ? " (" + ep.error() + ")" : std::string();
        out.add("metrics.listen", "found " + shown_value(s.metrics_listen) +
                                      ", expected ADDRESS:PORT, e.g. 127.0.0.1:9464" + reason);
    } else if (ep->port == 0) {
        out.add("metrics.listen", "found port 0, expected a port 1-65535");
    }
    check_path(s.state_file, "state_file", out);
    check_path(s.pin_dir, "pin_dir", out);
    // Checked whether or not BGP is on: a reload that turns it on must not
    // meet a value that was never looked at.
    if (check_path(s.bgp.control_socket, "bgp.control_socket", out) &&
        s.bgp.control_socket.size() > kMaxSocketPathBytes) {
        out.add("bgp.control_socket",
                "found a path of " + std::to_string(s.bgp.control_socket.size()) +
                    " bytes, expected at most " + std::to_string(kMaxSocketPathBytes) +
                    " (the limit of a Unix socket address)");
    }
    if (check_path(s.bgp.routes_file, "bgp.routes_file", out) &&
        !s.bgp.routes_file.ends_with(".conf")) {
        out.add("bgp.routes_file",
                "found " + shown_value(s.bgp.routes_file) +
                    ", expected a file name ending in .conf (bird.conf includes \"DIR/*.conf\")");
    }
    // A name BIRD cannot parse in the included file stops BIRD from starting.
    if (auto ok = announce::validate(announce::RenderOptions{.protocol = s.bgp.protocol}); !ok)
        out.add("bgp.protocol",
                "found " + shown_value(s.bgp.protocol) + ": " + ok.error().message());
    if (s.fleet.enabled) check_fleet(s.fleet, out);
    const Duration sweep = s.conntrack.sweep_interval;
    if (sweep < kMinSweepInterval || sweep > kMaxSweepInterval) {
        out.add("conntrack.sweep_interval", "found " + dur(sweep) + ", expected " +
                                                dur(kMinSweepInterval) + " to " +
                                                dur(kMaxSweepInterval));
    }
}

}  // namespace

namespace detail {

bool related(std::string_view a, std::string_view b) {
    if (a.size() > b.size()) std::swap(a, b);
    if (a.empty()) return true;
    if (b.substr(0, a.size()) != a) return false;
    return b.size() == a.size() || b[a.size()] == '.' || b[a.size()] == '[';
}

void check_fleet_settings(const FleetSettings& fleet, std::vector<Issue>& issues) {
    check_fleet(fleet, Out{issues, ""});
}

void check_config(const Config& config, std::vector<Issue>& issues) {
    const Settings& s = config.settings;
    const Out top{issues, ""};
    check_settings(s, top);

    std::map<VipKey, std::size_t> keys;
    std::map<std::string, std::size_t> names;
    std::set<net::IpAddress> distinct;
    bool backends_reported = false;
    std::size_t source_entries = 0;
    bool sources_reported = false;
    for (std::size_t i = 0; i < config.vips.size(); ++i) {
        const std::string at = "vips[" + std::to_string(i) + "]";
        const VipSpec& vip = config.vips[i];
        if (i == s.maps.max_vips) {
            top.add(at,
                    "found more than " + std::to_string(s.maps.max_vips) +
                        " VIPs, expected at most maps.max_vips (" +
                        std::to_string(s.maps.max_vips) + ")",
                    {"maps.max_vips"});
        }
        check_vip_into(vip, &s, Out{issues, at});
        source_entries += source_range_entry_bound(vip);
        if (!sources_reported && source_entries > kMaxSourceRangeEntries) {
            sources_reported = true;
            top.add(at + (vip.allow_sources.empty() ? ".deny_sources" : ".allow_sources"),
                    "found more than " + std::to_string(kMaxSourceRangeEntries) +
                        " source prefixes over all VIPs (each VIP's allow_sources and "
                        "deny_sources, plus one per VIP with allow_sources), expected at most " +
                        std::to_string(kMaxSourceRangeEntries));
        }
        if (auto [it, fresh] = keys.emplace(vip.vip_key(), i); !fresh) {
            const std::string other = "vips[" + std::to_string(it->second) + "]";
            top.add(at,
                    "found VIP " + vip.key() + " again (also " + other +
                        "), expected each address:port/protocol once",
                    {at + ".address", at + ".port", at + ".protocol", other + ".address",
                     other + ".port", other + ".protocol"});
        }
        if (!vip.name.empty()) {
            if (auto [it, fresh] = names.emplace(vip.name, i); !fresh) {
                const std::string other = "vips[" + std::to_string(it->second) + "]";
                top.add(at + ".name",
                        "found name " + shown_value(vip.name) + " again (also " + other +
                            "), expected a distinct name per VIP",
                        {other + ".name"});
            }
        }
        for (std::size_t j = 0; j < vip.backends.size(); ++j) {
            distinct.insert(vip.backends[j].address);
            if (!backends_reported && distinct.size() > s.maps.max_backends) {
                backends_reported = true;
                top.add(at + ".backends[" + std::to_string(j) + "].address",
                        "found more than " + std::to_string(s.maps.max_backends) +
                            " distinct backend addresses, expected at most maps.max_backends (" +
                            std::to_string(s.maps.max_backends) + ")",
                        {"maps.max_backends"});
            }
        }
    }
}

}  // namespace detail

std::string ValidationIssue::to_string() const { return detail::with_path(path, message); }

namespace {
std::vector<ValidationIssue> plain(std::vector<detail::Issue>&& issues) {
    std::vector<ValidationIssue> out;
    out.reserve(issues.size());
    for (auto& i : issues) out.push_back(std::move(i.issue));
    return out;
}
}  // namespace

std::vector<ValidationIssue> check_vip(const VipSpec& vip, const Settings& settings) {
    std::vector<detail::Issue> issues;
    check_vip_into(vip, &settings, Out{issues, ""});
    return plain(std::move(issues));
}

std::vector<ValidationIssue> check_vip_among(const VipSpec& vip, const std::vector<VipSpec>& others,
                                             const Settings& settings) {
    Config candidate{settings, others};
    candidate.vips.push_back(vip);  // last: rules across VIPs report on it
    const std::string prefix = "vips[" + std::to_string(candidate.vips.size() - 1) + "]";
    std::vector<ValidationIssue> out;
    for (ValidationIssue& issue : check_config(candidate)) {
        if (issue.path == prefix)
            issue.path.clear();
        else if (issue.path.starts_with(prefix + "."))
            issue.path = issue.path.substr(prefix.size() + 1);
        else
            continue;
        out.push_back(std::move(issue));
    }
    return out;
}

std::vector<ValidationIssue> check_config(const Config& config) {
    std::vector<detail::Issue> issues;
    detail::check_config(config, issues);
    return plain(std::move(issues));
}

namespace {
std::vector<std::string> strings(const std::vector<ValidationIssue>& issues) {
    std::vector<std::string> out;
    out.reserve(issues.size());
    for (const auto& i : issues) out.push_back(i.to_string());
    return out;
}
}  // namespace

std::vector<std::string> validate_vip(const VipSpec& vip, const Settings& settings) {
    return strings(check_vip(vip, settings));
}

std::vector<std::string> validate_config(const Config& config) {
    return strings(check_config(config));
}

std::vector<ValidationIssue> check_fleet(const FleetSettings& fleet) {
    std::vector<detail::Issue> issues;
    detail::check_fleet_settings(fleet, issues);
    std::vector<ValidationIssue> out;
    for (auto& issue : issues) out.push_back(std::move(issue.issue));
    return out;
}

}  // namespace xlb::config
