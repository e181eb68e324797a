// SPDX-License-Identifier: Apache-2.0
// Internal: the schema, written once, for both YAML (config file) and JSON
// (API bodies, state file). The decoders are templates over a "view" of a
// document node; config.cpp provides a yaml-cpp view with line and column,
// json.cpp an nlohmann view without. A view provides:
//
//   static constexpr std::string_view kMapNoun;     // "a mapping" / "an object"
//   Kind kind() const;  Location location() const;
//   std::string found() const;                        // for "found X, expected Y"
//   std::optional<std::string> string_text() const;   // a string value
//   std::optional<std::string> number_text() const;   // a number value
//   std::optional<std::string> bool_text() const;     // a boolean value
//   std::optional<std::string> scalar_text() const;   // a string or a number
//   std::vector<Entry<View>> entries() const;         // a map, in order
//   std::vector<View> items() const;                  // a list
//
// YAML scalars are untyped text, so every *_text() of a YAML scalar returns
// it; JSON is typed, so a JSON "80" is not a number and 80 is not a string.
//
// Decoders check structure: required and unknown keys, types, enum names and
// the ranges of the C++ types. Everything else (ranges of meaning, relations
// between fields) is validate.cpp's job, so that the API's runtime changes
// and the file meet one set of rules.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <unordered_map>
#include <vector>

#include "xlb/config/config.h"
#include "xlb/config/model.h"

namespace xlb::config::detail {

struct Location {
    int line = 0;  // 1-based; 0: unknown (JSON)
    int column = 0;
};

enum class Kind { kNull, kScalar, kList, kMap };

// One key and value of a mapping, as a view's entries() returns them.
template <class V>
struct Entry {
    std::optional<std::string> key;  // nullopt: not a scalar key
    Location key_location;
    std::string key_found;  // the key, described for an error message
    V value;
};

struct Diag {
    std::string path;  // "vips[0].port"; empty: the document itself
    Location location;
    std::string message;  // without the path
};

class Sink {
public:
    void error(const std::string& path, Location location, std::string message);
    // Remembers where a path's node is, so that semantic checks, which only
    // know paths, can point at it.
    void note(const std::string& path, Location location);
    // The location of `path`, or of its nearest ancestor that has one.
    Location locate(std::string path) const;
    std::size_t count() const { return errors_.size(); }
    const std::vector<Diag>& errors() const { return errors_; }

private:
    std::vector<Diag> errors_;
    std::unordered_map<std::string, Location> locations_;
};

std::string join(const std::string& base, std::string_view key);  // "a", "b" -> "a.b"
std::string index(const std::string& base, std::size_t i);        // "a", 3 -> "a[3]"
// "path: message", or the message alone for the empty path.
std::string with_path(const std::string& path, const std::string& message);
// A key as a path component in an error: itself when short and without
// spaces or control characters, else as shown_value() shows it (a 1 MiB
// unknown key gives a short error).
std::string path_key(std::string_view key);
// The closest allowed key within a small edit distance, or empty.
std::string_view closest(std::string_view key, std::span<const std::string_view> allowed);

std::optional<std::uint64_t> parse_decimal(std::string_view text);
std::optional<std::uint64_t> parse_decimal_or_hex(std::string_view text);
std::optional<double> parse_number(std::string_view text);
std::optional<bool> parse_bool(std::string_view text);
// "200", "200-299" (not range-checked beyond u16).
std::optional<StatusRange> parse_status_range(std::string_view text);

// ---------------------------------------------------------------------------
// Readers: each returns nullopt after recording an error.

// Every scalar reader has this shape: note where the node is, take its text
// of one kind (string, number, boolean or any scalar), parse it, and
// otherwise record "found X, expected Y". `parse` returns an optional or an
// expected.
template <class V, class Parse>
auto read_parsed(const V& v, const std::string& path, Sink& s,
                 std::optional<std::string> (V::*text)() const, Parse parse,
                 std::string_view expected)
    -> std::optional<typename std::invoke_result_t<Parse, const std::string&>::value_type> {
    s.note(path, v.location());
    if (auto t = (v.*text)()) {
        if (auto r = parse(*t)) return std::move(*r);
    }
    s.error(path, v.location(), "found " + v.found() + ", expected " + std::string(expected));
    return std::nullopt;
}

template <class V>
std::optional<std::string> read_string(const V& v, const std::string& path, Sink& s,
                                       std::string_view expected) {
    return read_parsed(
        v, path, s, &V::string_text, [](const std::string& t) { return std::optional(t); },
        expected);
}

template <class V>
std::optional<std::uint64_t> read_uint(const V& v, const std::string& path, Sink& s,
                                       std::uint64_t max, std::string_view expected = {}) {
    const std::string want =
        expected.empty() ? "an integer 0-" + std::to_string(max) : std::string(expected);
    return read_parsed(
        v, path, s, &V::number_text,
        [max](const std::string& t) {
            auto n = parse_decimal(t);
            return n && *n <= max ? n : std::nullopt;
        },
        want);
}

template <class V>
std::optional<std::uint32_t> read_u32_hex(const V& v, const std::string& path, Sink& s) {
    return read_parsed(
        v, path, s, &V::scalar_text,
        [](const std::string& t) -> std::optional<std::uint32_t> {
            auto n = parse_decimal_or_hex(t);
            if (!n || *n > 0xffffffffULL) return std::nullopt;
            return static_cast<std::uint32_t>(*n);
        },
        "a 32-bit unsigned integer, decimal or hex (e.g. 0x5eed1234)");
}

template <class V>
std::optional<bool> read_bool(const V& v, const std::string& path, Sink& s) {
    return read_parsed(v, path, s, &V::bool_text, parse_bool, "true or false");
}

template <class V>
std::optional<double> read_number(const V& v, const std::string& path, Sink& s,
                                  std::string_view expected) {
    return read_parsed(v, path, s, &V::number_text, parse_number, expected);
}

template <class V>
std::optional<Duration> read_duration(const V& v, const std::string& path, Sink& s) {
    s.note(path, v.location());
    std::string want = "a duration: a whole number and a unit (ms, s, m or h), e.g. 500ms, 2s, 1m";
    if (auto t = v.string_text()) {
        if (auto d = parse_duration(*t)) return *d;
        if (parse_decimal(*t)) want += "; units are required";
    } else if (v.number_text()) {
        want += "; units are required, and a duration is a string";
    }
    s.error(path, v.location(), "found " + v.found() + ", expected " + want);
    return std::nullopt;
}

template <class E, class V, class Parse>
std::optional<E> read_enum(const V& v, const std::string& path, Sink& s, Parse parse,
                           std::string_view names) {
    return read_parsed(v, path, s, &V::string_text, parse, names);
}

template <class V>
std::optional<net::IpAddress> read_address(const V& v, const std::string& path, Sink& s) {
    return read_parsed(v, path, s, &V::string_text, net::IpAddress::parse,
                       "an IP address, e.g. 192.0.2.1 or 2001:db8::1");
}

template <class V>
std::optional<net::MacAddress> read_mac(const V& v, const std::string& path, Sink& s) {
    return read_parsed(v, path, s, &V::string_text, net::parse_mac,
                       "a MAC address, e.g. \"02:00:00:00:00:01\"");
}

// "203.0.113.7" or "203.0.113.0/24": the prefix length defaults to the
// address's full length.
template <class V>
std::optional<std::pair<net::IpAddress, std::uint8_t>> read_prefix(const V& v,
                                                                   const std::string& path,
                                                                   Sink& s) {
    return read_parsed(
        v, path, s, &V::string_text,
        [](const std::string& t) -> std::optional<std::pair<net::IpAddress, std::uint8_t>> {
            std::string_view text = t;
            std::string_view addr = text, len;
            bool has_len = false;
            if (auto slash = text.find('/'); slash != std::string_view::npos) {
                addr = text.substr(0, slash);
                len = text.substr(slash + 1);
                has_len = true;
            }
            auto a = net::IpAddress::parse(addr);
            auto n = has_len ? parse_decimal(len)
                             : std::optional<std::uint64_t>(a && a->is_v4() ? 32 : 128);
            if (!a || !n || *n > 128) return std::nullopt;
            return std::pair{*a, static_cast<std::uint8_t>(*n)};
        },
        "an address or a prefix, e.g. 203.0.113.7 or 203.0.113.0/24");
}

// ---------------------------------------------------------------------------
// Mappings.

template <class V>
struct Fields {
    struct Item {
        std::string key;
        V value;
    };
    std::vector<Item> items;

    const V* get(std::string_view key) const {
        for (const auto& item : items) {
            if (item.key == key) return &item.value;
        }
        return nullptr;
    }
};

// Checks that `v` is a mapping whose keys are all in `allowed`, each at most
// once. Unknown and duplicate keys are reported and left out. `what` names
// the thing for the "expected" part, e.g. "a VIP".
template <class V>
std::optional<Fields<V>> read_fields(const V& v, const std::string& path, Sink& s,
                                     std::span<const std::string_view> allowed,
                                     std::string_view what) {
    s.note(path, v.location());
    if (v.kind() != Kind::kMap) {
        s.error(path, v.location(),
                "found " + v.found() + ", expected " + std::string(V::kMapNoun) + " (" +
                    std::string(what) + ")");
        return std::nullopt;
    }
    Fields<V> out;
    std::unordered_map<std::string, Location> seen;
    for (auto& entry : v.entries()) {
        if (!entry.key) {
            s.error(path, entry.key_location,
                    "found " + entry.key_found + " as a key, expected a name");
            continue;
        }
        const std::string& key = *entry.key;
        const std::string key_path = join(path, path_key(key));
        if (auto it = seen.find(key); it != seen.end()) {
            std::string msg = "duplicate key";
            if (it->second.line > 0)
                msg += " (first given at line " + std::to_string(it->second.line) + ")";
            s.error(key_path, entry.key_location, msg + ", expected each key once");
            continue;
        }
        seen.emplace(key, entry.key_location);
        bool known = false;
        for (auto a : allowed) known = known || a == key;
        if (!known) {
            std::string msg = "unknown key";
            if (auto near = closest(key, allowed); !near.empty()) {
                msg += "; did you mean \"" + std::string(near) + "\"?";
            } else {
                msg += ", expected one of: ";
                for (std::size_t i = 0; i < allowed.size(); ++i) {
                    msg += (i ? ", " : "") + std::string(allowed[i]);
                }
            }
            s.error(key_path, entry.key_location, msg);
            continue;
        }
        out.items.push_back({key, std::move(entry.value)});
    }
    return out;
}

template <class V>
void missing(const V& map, const std::string& path, std::string_view key, Sink& s,
             std::string_view expected) {
    s.error(join(path, key), map.location(), "missing, expected " + std::string(expected));
}

// Applies `read` to the field if present; assigns the result to `out`.
template <class V, class T, class Read>
void field(const Fields<V>& f, const std::string& path, std::string_view key, T& out, Read read) {
    if (const V* v = f.get(key)) {
        if (auto value = read(*v, join(path, key))) out = std::move(*value);
    }
}

// ---------------------------------------------------------------------------
// The schema.

inline constexpr std::string_view kSlowStartKeys[] = {"window", "floor"};
inline constexpr std::string_view kHealthCheckKeys[] = {"type",
                                                        "port",
                                                        "path",
                                                        "host",
                                                        "expected_statuses",
                                                        "body_contains",
                                                        "reuse_connection",
                                                        "reuse_limit",
                                                        "sni",
                                                        "ca_file",
                                                        "verify",
                                                        "udp_payload",
                                                        "udp_expect",
                                                        "interval",
                                                        "timeout",
                                                        "jitter",
                                                        "unhealthy_threshold",
                                                        "healthy_threshold",
                                                        "via_vip",
                                                        "failure_accrual",
                                                        "rate_limit_bias",
                                                        "flapping"};
inline constexpr std::string_view kFailureAccrualKeys[] = {
    "enabled", "success_rate", "window", "min_probes", "min_penalty", "max_penalty", "jitter"};
inline constexpr std::string_view kRateLimitBiasKeys[] = {"factor", "penalty", "max_retry_after"};
inline constexpr std::string_view kFlappingKeys[] = {"changes", "window", "hold"};
inline constexpr std::string_view kBackendKeys[] = {"address",  "weight",      "state",
                                                    "hash_key", "cookie_acks", "server_id"};
inline constexpr std::string_view kQuicKeys[] = {"server_id_length", "nonce_length", "config_id",
                                                 "mode", "key_file"};
inline constexpr std::string_view kVipKeys[] = {"address",
                                                "port",
                                                "protocol",
                                                "name",
                                                "hash",
                                                "conntrack",
                                                "ring_size",
                                                "panic_threshold",
                                                "slow_start",
                                                "on_unhealthy",
                                                "health_consensus",
                                                "health_check",
                                                "announce",
                                                "conntrack_idle_timeout",
                                                "syn_cookies",
                                                "allow_sources",
                                                "deny_sources",
                                                "quic",
                                                "backends"};

template <class V>
SlowStart decode_slow_start(const V& v, const std::string& path, Sink& s) {
    SlowStart out;
    auto f = read_fields(v, path, s, kSlowStartKeys, "slow start: window, floor");
    if (!f) return out;
    field(*f, path, "window", out.window,
          [&](const V& x, const std::string& p) { return read_duration(x, p, s); });
    field(*f, path, "floor", out.floor, [&](const V& x, const std::string& p) {
        return read_number(x, p, s, "a number 0-1 (share of the weight to start from)");
    });
    return out;
}

template <class V>
std::optional<std::string> read_text(const V& x, const std::string& p, Sink& s) {
    return read_string(x, p, s, "a string");
}

template <class V>
FailureAccrual decode_failure_accrual(const V& v, const std::string& path, Sink& s) {
    FailureAccrual out;
    auto f = read_fields(v, path, s, kFailureAccrualKeys,
                         "failure accrual: enabled, success_rate, window, min_probes, "
                         "min_penalty, max_penalty, jitter");
    if (!f) return out;
    auto dur = [&](const V& x, const std::string& p) { return read_duration(x, p, s); };
    field(*f, path, "enabled", out.enabled,
          [&](const V& x, const std::string& p) { return read_bool(x, p, s); });
    field(*f, path, "success_rate", out.success_rate, [&](const V& x, const std::string& p) {
        return read_number(x, p, s, "a number above 0, at most 1 (share of successful probes)");
    });
    field(*f, path, "window", out.window, dur);
    field(*f, path, "min_probes", out.min_probes, [&](const V& x, const std::string& p) {
        return read_uint(x, p, s, 0xffffffffULL, "an integer >= 1 (probes in the window)");
    });
    field(*f, path, "min_penalty", out.min_penalty, dur);
    field(*f, path, "max_penalty", out.max_penalty, dur);
    field(*f, path, "jitter", out.jitter, [&](const V& x, const std::string& p) {
        return read_number(x, p, s, "a number 0-1 (share of the hold-down added at random)");
    });
    return out;
}

template <class V>
RateLimitBias decode_rate_limit_bias(const V& v, const std::string& path, Sink& s) {
    RateLimitBias out;
    auto f = read_fields(v, path, s, kRateLimitBiasKeys,
                         "rate-limit bias: factor, penalty, max_retry_after");
    if (!f) return out;
    auto dur = [&](const V& x, const std::string& p) { return read_duration(x, p, s); };
    field(*f, path, "factor", out.factor, [&](const V& x, const std::string& p) {
        return read_number(x, p, s, "a number above 0, at most 1 (1 = no bias)");
    });
    field(*f, path, "penalty", out.penalty, dur);
    field(*f, path, "max_retry_after", out.max_retry_after, dur);
    return out;
}

template <class V>
Flapping decode_flapping(const V& v, const std::string& path, Sink& s) {
    Flapping out;
    auto f = read_fields(v, path, s, kFlappingKeys, "flapping: changes, window, hold");
    if (!f) return out;
    auto dur = [&](const V& x, const std::string& p) { return read_duration(x, p, s); };
    field(*f, path, "changes", out.changes, [&](const V& x, const std::string& p) {
        return read_uint(x, p, s, 0xffffffffULL,
                         "an integer >= 0 (state changes allowed in the window; 0 = off)");
    });
    field(*f, path, "window", out.window, dur);
    field(*f, path, "hold", out.hold, dur);
    return out;
}

template <class V>
HealthCheck decode_health_check(const V& v, const std::string& path, Sink& s) {
    HealthCheck out;
    auto f = read_fields(v, path, s, kHealthCheckKeys, "a health check: type, interval, ...");
    if (!f) return out;
    if (!f->get("type")) missing(v, path, "type", s, "none, tcp, http, https or udp");
    field(*f, path, "type", out.type, [&](const V& x, const std::string& p) {
        return read_enum<HealthCheckType>(x, p, s, parse_health_check_type,
                                          "none, tcp, http, https or udp");
    });
    field(*f, path, "port", out.port, [&](const V& x, const std::string& p) {
        return read_uint(x, p, s, 65535, "an integer 0-65535 (0 = the VIP's port)");
    });
    auto text = [&](const V& x, const std::string& p) { return read_text(x, p, s); };
    field(*f, path, "path", out.path, text);
    field(*f, path, "host", out.host, text);
    field(*f, path, "body_contains", out.body_contains, text);
    field(*f, path, "sni", out.sni, text);
    field(*f, path, "ca_file", out.ca_file, text);
    field(*f, path, "udp_payload", out.udp_payload, text);
    field(*f, path, "udp_expect", out.udp_expect, text);
    if (const V* list = f->get("expected_statuses")) {
        const std::string lpath = join(path, "expected_statuses");
        s.note(lpath, list->location());
        if (list->kind() != Kind::kList) {
            s.error(lpath, list->location(),
                    "found " + list->found() +
                        ", expected a list of statuses and ranges, e.g. [\"200-299\", 301]");
        } else {
            out.expected_statuses.clear();
            std::size_t i = 0;
            for (const V& item : list->items()) {
                const std::string ipath = index(lpath, i++);
                s.note(ipath, item.location());
                std::optional<StatusRange> r;
                if (auto t = item.scalar_text()) r = parse_status_range(*t);
                // A placeholder keeps later indices equal to the file's.
                out.expected_statuses.push_back(r.value_or(StatusRange{}));
                if (!r) {
                    s.error(ipath, item.location(),
                            "found " + item.found() +
                                ", expected an HTTP status (e.g. 301) or a range (e.g. "
                                "\"200-299\")");
                }
            }
        }
    }
    auto dur = [&](const V& x, const std::string& p) { return read_duration(x, p, s); };
    field(*f, path, "interval", out.interval, dur);
    field(*f, path, "timeout", out.timeout, dur);
    field(*f, path, "jitter", out.jitter, dur);
    field(*f, path, "reuse_limit", out.reuse_limit, dur);
    field(*f, path, "reuse_connection", out.reuse_connection,
          [&](const V& x, const std::string& p) { return read_bool(x, p, s); });
    auto count = [&](const V& x, const std::string& p) {
        return read_uint(x, p, s, 0xffffffffULL, "an integer >= 1 (consecutive probes)");
    };
    field(*f, path, "unhealthy_threshold", out.unhealthy_threshold, count);
    field(*f, path, "healthy_threshold", out.healthy_threshold, count);
    field(*f, path, "via_vip", out.via_vip,
          [&](const V& x, const std::string& p) { return read_bool(x, p, s); });
    field(*f, path, "verify", out.verify,
          [&](const V& x, const std::string& p) { return read_bool(x, p, s); });
    if (const V* x = f->get("failure_accrual")) {
        out.failure_accrual = decode_failure_accrual(*x, join(path, "failure_accrual"), s);
    }
    if (const V* x = f->get("rate_limit_bias")) {
        out.rate_limit_bias = decode_rate_limit_bias(*x, join(path, "rate_limit_bias"), s);
    }
    if (const V* x = f->get("flapping")) {
        out.flapping = decode_flapping(*x, join(path, "flapping"), s);
    }
    return out;
}

template <class V>
std::optional<std::uint64_t> read_server_id(const V& v, const std::string& path, Sink& s) {
    return read_uint(v, path, s, ~std::uint64_t{0},
                     "a non-negative integer (the server id its QUIC server writes in its "
                     "connection IDs)");
}

template <class V>
BackendSpec decode_backend(const V& v, const std::string& path, Sink& s) {
    BackendSpec out;
    auto f = read_fields(v, path, s, kBackendKeys, "a backend: address, weight, state, hash_key");
    if (!f) return out;
    if (!f->get("address")) missing(v, path, "address", s, "the backend's IP address");
    field(*f, path, "address", out.address,
          [&](const V& x, const std::string& p) { return read_address(x, p, s); });
    field(*f, path, "weight", out.weight, [&](const V& x, const std::string& p) {
        return read_uint(x, p, s, 0xffffffffULL, "an integer 0-" + std::to_string(kMaxWeight));
    });
    field(*f, path, "state", out.state, [&](const V& x, const std::string& p) {
        return read_enum<AdminState>(x, p, s, parse_admin_state, "active, drain or disabled");
    });
    field(*f, path, "hash_key", out.hash_key,
          [&](const V& x, const std::string& p) { return read_text(x, p, s); });
    field(*f, path, "cookie_acks", out.cookie_acks,
          [&](const V& x, const std::string& p) { return read_bool(x, p, s); });
    field(*f, path, "server_id", out.server_id,
          [&](const V& x, const std::string& p) { return read_server_id(x, p, s); });
    return out;
}

// One QUIC-LB configuration. The lengths have no default: they must match
// what the VIP's QUIC servers were set up with.
template <class V>
QuicConfig decode_quic_config(const V& v, const std::string& path, Sink& s) {
    QuicConfig out;
    auto f = read_fields(v, path, s, kQuicKeys,
                         "a QUIC-LB config: server_id_length, nonce_length, config_id, mode, "
                         "key_file");
    if (!f) return out;
    if (!f->get("server_id_length"))
        missing(v, path, "server_id_length", s,
                "the server id's length in octets, 1-15 (required: the length the VIP's QUIC "
                "servers use)");
    if (!f->get("nonce_length"))
        missing(v, path, "nonce_length", s,
                "the nonce's length in octets, 4-18 (required: the length the VIP's QUIC "
                "servers use)");
    field(*f, path, "server_id_length", out.server_id_length,
          [&](const V& x, const std::string& p) {
              return read_uint(x, p, s, 255, "an integer 1-15 (octets of server id)");
          });
    field(*f, path, "nonce_length", out.nonce_length, [&](const V& x, const std::string& p) {
        return read_uint(x, p, s, 255, "an integer 4-18 (octets of nonce)");
    });
    field(*f, path, "config_id", out.config_id, [&](const V& x, const std::string& p) {
        return read_uint(x, p, s, 255, "an integer 0-6");
    });
    field(*f, path, "mode", out.mode, [&](const V& x, const std::string& p) {
        return read_enum<QuicMode>(x, p, s, parse_quic_mode, "plaintext or encrypted");
    });
    field(*f, path, "key_file", out.key_file,
          [&](const V& x, const std::string& p) { return read_text(x, p, s); });
    return out;
}

// `quic:` is one config (a mapping) or several (a list, during a rotation).
template <class V>
std::vector<QuicConfig> decode_quic(const V& v, const std::string& path, Sink& s) {
    std::vector<QuicConfig> out;
    s.note(path, v.location());
    if (v.kind() == Kind::kMap) {
        out.push_back(decode_quic_config(v, path, s));
    } else if (v.kind() == Kind::kList) {
        std::size_t i = 0;
        for (const V& item : v.items())
            out.push_back(decode_quic_config(item, index(path, i++), s));
    } else {
        s.error(path, v.location(),
                "found " + v.found() + ", expected " + std::string(V::kMapNoun) +
                    " {server_id_length, nonce_length, config_id, mode, key_file} or a list of "
                    "them");
    }
    return out;
}

template <class V>
std::vector<BackendSpec> decode_backends(const V& v, const std::string& path, Sink& s) {
    std::vector<BackendSpec> out;
    s.note(path, v.location());
    if (v.kind() != Kind::kList) {
        s.error(path, v.location(),
                "found " + v.found() + ", expected a list of backends (may be empty: [])");
        return out;
    }
    std::size_t i = 0;
    for (const V& item : v.items()) out.push_back(decode_backend(item, index(path, i++), s));
    return out;
}

// A list of client prefixes ("192.0.2.0/24", "2001:db8::/32", or an address
// alone), net::Prefix's rules: host bits must be zero.
template <class V>
std::optional<std::vector<net::Prefix>> read_prefix_list(const V& v, const std::string& path,
                                                         Sink& s) {
    s.note(path, v.location());
    if (v.kind() != Kind::kList) {
        s.error(path, v.location(),
                "found " + v.found() +
                    ", expected a list of prefixes, e.g. [\"192.0.2.0/24\", \"198.51.100.7\"]");
        return std::nullopt;
    }
    std::vector<net::Prefix> out;
    bool ok = true;
    std::size_t i = 0;
    for (const V& item : v.items()) {
        const std::string ipath = index(path, i++);
        s.note(ipath, item.location());
        auto text = item.string_text();
        if (!text) {
            s.error(ipath, item.location(),
                    "found " + item.found() + ", expected a prefix, e.g. \"192.0.2.0/24\"");
            ok = false;
            continue;
        }
        auto prefix = net::Prefix::parse(*text);
        if (!prefix) {
            s.error(ipath, item.location(), prefix.error());
            ok = false;
            continue;
        }
        out.push_back(*prefix);
    }
    if (!ok) return std::nullopt;
    return out;
}

template <class V>
VipSpec decode_vip(const V& v, const std::string& path, Sink& s) {
    VipSpec out;
    auto f = read_fields(v, path, s, kVipKeys, "a VIP: address, port, protocol, backends, ...");
    if (!f) return out;
    if (!f->get("address")) missing(v, path, "address", s, "the VIP's IP address");
    if (!f->get("port")) missing(v, path, "port", s, "an integer 0-65535 (0 = every port)");
    field(*f, path, "address", out.address,
          [&](const V& x, const std::string& p) { return read_address(x, p, s); });
    field(*f, path, "port", out.port, [&](const V& x, const std::string& p) {
        return read_uint(x, p, s, 65535, "an integer 0-65535 (0 = every port)");
    });
    field(*f, path, "protocol", out.protocol, [&](const V& x, const std::string& p) {
        return read_enum<Protocol>(x, p, s, parse_protocol, "tcp or udp");
    });
    field(*f, path, "name", out.name,
          [&](const V& x, const std::string& p) { return read_text(x, p, s); });
    field(*f, path, "hash", out.hash, [&](const V& x, const std::string& p) {
        return read_enum<HashMode>(x, p, s, parse_hash_mode, "5tuple or source");
    });
    field(*f, path, "conntrack", out.conntrack,
          [&](const V& x, const std::string& p) { return read_bool(x, p, s); });
    field(*f, path, "ring_size", out.ring_size, [&](const V& x, const std::string& p) {
        return read_uint(x, p, s, 0xffffffffULL, "a prime number of slots, e.g. 65537");
    });
    field(*f, path, "panic_threshold", out.panic_threshold, [&](const V& x, const std::string& p) {
        return read_number(x, p, s, "a number 0-1 (0 = never panic)");
    });
    if (const V* x = f->get("slow_start")) {
        out.slow_start = decode_slow_start(*x, join(path, "slow_start"), s);
    }
    field(*f, path, "on_unhealthy", out.on_unhealthy, [&](const V& x, const std::string& p) {
        return read_enum<UnhealthyPolicy>(x, p, s, parse_unhealthy_policy, "reschedule or keep");
    });
    if (const V* x = f->get("health_consensus")) {
        const std::string p = join(path, "health_consensus");
        if (auto c = read_enum<HealthConsensus>(*x, p, s, parse_health_consensus,
                                                "local, majority or any_down"))
            out.health_consensus = *c;
    }
    if (const V* x = f->get("health_check")) {
        out.health_check = decode_health_check(*x, join(path, "health_check"), s);
    }
    field(*f, path, "announce", out.announce, [&](const V& x, const std::string& p) {
        return read_enum<announce::Policy>(x, p, s, announce::parse_policy,
                                           "when_serving, always or never");
    });
    field(*f, path, "conntrack_idle_timeout", out.conntrack_idle_timeout,
          [&](const V& x, const std::string& p) { return read_duration(x, p, s); });
    if (const V* x = f->get("syn_cookies")) {
        const std::string p = join(path, "syn_cookies");
        if (auto c = read_enum<SynCookies>(*x, p, s, parse_syn_cookies, "off, auto or always"))
            out.syn_cookies = *c;
    }
    field(*f, path, "allow_sources", out.allow_sources,
          [&](const V& x, const std::string& p) { return read_prefix_list(x, p, s); });
    field(*f, path, "deny_sources", out.deny_sources,
          [&](const V& x, const std::string& p) { return read_prefix_list(x, p, s); });
    if (const V* x = f->get("quic")) out.quic = decode_quic(*x, join(path, "quic"), s);
    if (const V* x = f->get("backends")) {
        out.backends = decode_backends(*x, join(path, "backends"), s);
    }
    return out;
}

inline constexpr std::string_view kRootKeys[] = {
    "interface",    "xdp_mode",   "next_hop", "encap_source",  "hash_seed", "mtu",
    "icmp_too_big", "encap",      "gue_port", "second_chance", "maps",      "api",
    "metrics",      "state_file", "pin_dir",  "bgp",           "conntrack", "health_history",
    "vips",         "fleet",      "syn_flood"};
// What every host of a fleet shares: with fleet: set they come from the
// store's desired/global, and a file that sets them is refused.
inline constexpr std::string_view kFleetWideKeys[] = {
    "hash_seed", "icmp_too_big", "encap", "gue_port", "second_chance", "health_history"};
inline constexpr std::string_view kFleetKeys[] = {
    "name",      "prefix",       "endpoints",       "host_name",        "ca",       "cert",   "key",
    "lease_ttl", "dial_timeout", "request_timeout", "max_publish_wait", "announce", "max_lag"};
inline constexpr std::string_view kSecondChanceKeys[] = {"enabled", "window"};
inline constexpr std::string_view kNextHopKeys[] = {"address", "mac"};
inline constexpr std::string_view kEncapKeys[] = {"ipv4", "ipv6"};
inline constexpr std::string_view kMapsKeys[] = {"max_vips", "max_backends", "conntrack_entries"};
inline constexpr std::string_view kApiKeys[] = {"socket", "group"};
inline constexpr std::string_view kMetricsKeys[] = {"listen"};
inline constexpr std::string_view kConntrackKeys[] = {"insert_rate", "insert_burst", "resize",
                                                      "sweep_interval"};
inline constexpr std::string_view kSynFloodKeys[] = {"start_rate", "end_rate", "end_after"};
inline constexpr std::string_view kBgpKeys[] = {"enabled", "control_socket", "routes_file",
                                                "protocol", "route"};

struct Decoded {
    Config config;
};

// The fleet-wide settings of a mapping (the file's top level, or the
// store's desired/global).
template <class V>
void decode_fleet_wide(const Fields<V>& f, const std::string& top, Settings& st, Sink& s) {
    field(f, top, "hash_seed", st.hash_seed,
          [&](const V& x, const std::string& p) { return read_u32_hex(x, p, s); });
    st.hash_seed_set = f.get("hash_seed") != nullptr;
    field(f, top, "icmp_too_big", st.icmp_too_big,
          [&](const V& x, const std::string& p) { return read_bool(x, p, s); });
    field(f, top, "encap", st.encap, [&](const V& x, const std::string& p) {
        return read_enum<Encap>(x, p, s, parse_encap, "ipip or gue");
    });
    field(f, top, "gue_port", st.gue_port, [&](const V& x, const std::string& p) {
        return read_uint(x, p, s, 65535, "a UDP port 1-65535");
    });
    if (const V* x = f.get("second_chance")) {
        const std::string p = join(top, "second_chance");
        if (auto sc = read_fields(*x, p, s, kSecondChanceKeys, "second chance: enabled, window")) {
            field(*sc, p, "enabled", st.second_chance.enabled,
                  [&](const V& y, const std::string& q) { return read_bool(y, q, s); });
            field(*sc, p, "window", st.second_chance.window,
                  [&](const V& y, const std::string& q) { return read_duration(y, q, s); });
        }
    }
    field(f, top, "health_history", st.health_history, [&](const V& x, const std::string& p) {
        return read_uint(x, p, s, 0xffffffffULL,
                         "an integer 0-" + std::to_string(kMaxHealthHistory) +
                             " (verdict changes kept per backend; 0 = none)");
    });
}

// The store's desired/global settings: the fleet-wide keys only, hash_seed
// required; everything else keeps its default.
template <class V>
Settings decode_fleet_global(const V& v, const std::string& path, Sink& s) {
    Settings st;
    auto f = read_fields(v, path, s, kFleetWideKeys, "the fleet-wide settings: hash_seed, ...");
    if (!f) return st;
    if (!f->get("hash_seed"))
        missing(v, path, "hash_seed", s, "the fleet's hash seed (xlbctl gen-seed makes one)");
    decode_fleet_wide(*f, path, st, s);
    return st;
}

template <class V>
FleetSettings decode_fleet(const V& v, const std::string& p, Sink& s) {
    FleetSettings fl;
    fl.enabled = true;
    auto f = read_fields(v, p, s, kFleetKeys,
                         "the fleet's store: endpoints, name, host_name, ca, cert, key, ...");
    if (!f) return fl;
    auto text = [&](const V& x, const std::string& q) { return read_text(x, q, s); };
    auto dur = [&](const V& x, const std::string& q) { return read_duration(x, q, s); };
    if (!f->get("endpoints"))
        missing(v, p, "endpoints", s,
                "the etcd members' client URLs, e.g. [https://10.0.0.1:2379]");
    field(*f, p, "name", fl.name, text);
    field(*f, p, "prefix", fl.prefix, text);
    if (const V* x = f->get("endpoints")) {
        const std::string q = join(p, "endpoints");
        s.note(q, x->location());
        if (x->kind() != Kind::kList) {
            s.error(
                q, x->location(),
                "found " + x->found() + ", expected a list of URLs, e.g. [https://10.0.0.1:2379]");
        } else {
            std::size_t i = 0;
            for (const V& item : x->items())
                if (auto url = read_text(item, index(q, i++), s)) fl.endpoints.push_back(*url);
        }
    }
    field(*f, p, "host_name", fl.host_name, text);
    field(*f, p, "ca", fl.ca, text);
    field(*f, p, "cert", fl.cert, text);
    field(*f, p, "key", fl.key, text);
    field(*f, p, "lease_ttl", fl.lease_ttl, dur);
    field(*f, p, "dial_timeout", fl.dial_timeout, dur);
    field(*f, p, "request_timeout", fl.request_timeout, dur);
    field(*f, p, "max_publish_wait", fl.max_publish_wait, dur);
    field(*f, p, "announce", fl.announce, [&](const V& x, const std::string& q) {
        return read_enum<FleetAnnounce>(x, q, s, parse_fleet_announce, "when_current or always");
    });
    field(*f, p, "max_lag", fl.max_lag, dur);
    return fl;
}

template <class V>
Decoded decode_config(const V& root, Sink& s) {
    Decoded out;
    Settings& st = out.config.settings;
    const std::string top;
    s.note(top, root.location());
    if (root.kind() == Kind::kNull) {
        s.error(top, Location{1, 1},
                "the document is empty, expected " + std::string(V::kMapNoun) +
                    " with at least interface and next_hop");
        return out;
    }
    auto f = read_fields(root, top, s, kRootKeys, "the configuration: interface, vips, ...");
    if (!f) return out;
    auto text = [&](const V& x, const std::string& p) { return read_text(x, p, s); };
    if (!f->get("interface")) {
        missing(root, top, "interface", s, "the name of the network interface, e.g. eth0");
    }
    if (!f->get("next_hop")) {
        missing(root, top, "next_hop", s,
                "{address: IP} or {mac: MAC} (where encapsulated packets go)");
    }
    field(*f, top, "interface", st.interface, text);
    field(*f, top, "xdp_mode", st.xdp_mode, [&](const V& x, const std::string& p) {
        return read_enum<XdpMode>(x, p, s, parse_xdp_mode, "native, generic or auto");
    });
    if (const V* x = f->get("next_hop")) {
        const std::string p = "next_hop";
        if (auto nh =
                read_fields(*x, p, s, kNextHopKeys, "next hop: {address: IP} or {mac: MAC}")) {
            field(*nh, p, "address", st.next_hop.address,
                  [&](const V& y, const std::string& q) { return read_address(y, q, s); });
            field(*nh, p, "mac", st.next_hop.mac,
                  [&](const V& y, const std::string& q) { return read_mac(y, q, s); });
        }
    }
    if (const V* x = f->get("encap_source")) {
        const std::string p = "encap_source";
        if (auto es = read_fields(*x, p, s, kEncapKeys, "outer source addresses: ipv4, ipv6")) {
            for (std::string_view key : kEncapKeys) {
                const V* y = es->get(key);
                if (!y) continue;
                if (auto prefix = read_prefix(*y, join(p, key), s)) {
                    if (key == "ipv4") {
                        st.encap_source.ipv4 = prefix->first;
                        st.encap_source.ipv4_prefix_len = prefix->second;
                    } else {
                        st.encap_source.ipv6 = prefix->first;
                        st.encap_source.ipv6_prefix_len = prefix->second;
                    }
                }
            }
        }
    }
    decode_fleet_wide(*f, top, st, s);
    field(*f, top, "mtu", st.mtu, [&](const V& x, const std::string& p) {
        return read_uint(x, p, s, 65535, "an integer 576-9000");
    });
    if (const V* x = f->get("maps")) {
        const std::string p = "maps";
        if (auto m = read_fields(*x, p, s, kMapsKeys,
                                 "map sizes: max_vips, max_backends, conntrack_entries")) {
            auto size = [&](const V& y, const std::string& q) {
                return read_uint(y, q, s, 0xffffffffULL, "a positive integer");
            };
            field(*m, p, "max_vips", st.maps.max_vips, size);
            field(*m, p, "max_backends", st.maps.max_backends, size);
            field(*m, p, "conntrack_entries", st.maps.conntrack_entries, size);
        }
    }
    if (const V* x = f->get("api")) {
        if (auto a = read_fields(*x, "api", s, kApiKeys, "the API: socket, group")) {
            field(*a, "api", "socket", st.api_socket, text);
            field(*a, "api", "group", st.api_group, text);
        }
    }
    if (const V* x = f->get("metrics")) {
        if (auto m = read_fields(*x, "metrics", s, kMetricsKeys, "metrics: listen")) {
            field(*m, "metrics", "listen", st.metrics_listen, text);
        }
    }
    field(*f, top, "state_file", st.state_file, text);
    field(*f, top, "pin_dir", st.pin_dir, text);
    if (const V* x = f->get("bgp")) {
        if (auto b = read_fields(
                *x, "bgp", s, kBgpKeys,
                "BGP announcements: enabled, control_socket, routes_file, protocol, route")) {
            field(*b, "bgp", "enabled", st.bgp.enabled,
                  [&](const V& y, const std::string& p) { return read_bool(y, p, s); });
            field(*b, "bgp", "control_socket", st.bgp.control_socket, text);
            field(*b, "bgp", "routes_file", st.bgp.routes_file, text);
            field(*b, "bgp", "protocol", st.bgp.protocol, text);
            field(*b, "bgp", "route", st.bgp.route, [&](const V& y, const std::string& p) {
                return read_enum<announce::RouteForm>(y, p, s, announce::parse_route_form,
                                                      "blackhole or via_lo");
            });
        }
    }
    if (const V* x = f->get("conntrack")) {
        const std::string p = "conntrack";
        if (auto c = read_fields(
                *x, p, s, kConntrackKeys,
                "the connection table: insert_rate, insert_burst, resize, sweep_interval")) {
            auto per_cpu = [&](const V& y, const std::string& q) {
                return read_uint(y, q, s, 0xffffffffULL,
                                 "an integer >= 0 (entries per second per CPU; 0 = derived from "
                                 "maps.conntrack_entries)");
            };
            field(*c, p, "insert_rate", st.conntrack.insert_rate, per_cpu);
            field(*c, p, "insert_burst", st.conntrack.insert_burst,
                  [&](const V& y, const std::string& q) {
                      return read_uint(y, q, s, 0xffffffffULL,
                                       "an integer >= 0 (entries at once per CPU; 0 = the rate)");
                  });
            field(*c, p, "resize", st.conntrack.resize, [&](const V& y, const std::string& q) {
                return read_enum<ConntrackResize>(y, q, s, parse_conntrack_resize,
                                                  "refuse or replace");
            });
            field(*c, p, "sweep_interval", st.conntrack.sweep_interval,
                  [&](const V& y, const std::string& q) { return read_duration(y, q, s); });
        }
    }
    if (const V* x = f->get("syn_flood")) {
        const std::string p = "syn_flood";
        if (auto sf = read_fields(*x, p, s, kSynFloodKeys,
                                  "the SYN flood detector: start_rate, end_rate, end_after")) {
            auto rate = [&](const V& y, const std::string& q) {
                return read_uint(y, q, s, 0xffffffffULL,
                                 "an integer (SYNs per second per CPU to VIPs with "
                                 "syn_cookies auto)");
            };
            field(*sf, p, "start_rate", st.syn_flood.start_rate, rate);
            field(*sf, p, "end_rate", st.syn_flood.end_rate, rate);
            field(*sf, p, "end_after", st.syn_flood.end_after,
                  [&](const V& y, const std::string& q) { return read_duration(y, q, s); });
        }
    }
    if (const V* x = f->get("fleet")) {
        st.fleet = decode_fleet(*x, "fleet", s);
        // One source for what the hosts share: the store.
        auto belongs_to_store = [&](std::string_view key, std::string_view where) {
            if (const V* y = f->get(key))
                s.error(std::string(key), y->location(),
                        "set here and fleet: is set, expected it only in the fleet's store (" +
                            std::string(where) +
                            "): remove it from this file; `xlbctl fleet import` moves a file's "
                            "VIPs and fleet-wide settings into the store");
        };
        for (std::string_view key : kFleetWideKeys) belongs_to_store(key, "desired/global");
        belongs_to_store("vips", "desired/vips/");
    }

    if (const V* x = f->get("vips")) {
        const std::string p = "vips";
        s.note(p, x->location());
        if (x->kind() != Kind::kList) {
            s.error(p, x->location(),
                    "found " + x->found() + ", expected a list of VIPs (may be empty: [])");
        } else {
            std::size_t i = 0;
            for (const V& item : x->items()) {
                out.config.vips.push_back(decode_vip(item, index(p, i++), s));
            }
        }
    }
    return out;
}

}  // namespace xlb::config::detail
