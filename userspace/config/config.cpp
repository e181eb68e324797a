// SPDX-License-Identifier: Apache-2.0
// The YAML side: a yaml-cpp view for the shared decoders (decode.h), the
// file reader, error locations, and the writer.
#include "xlb/config/config.h"

// yaml-cpp 0.7's inline code trips g++ 12's -Wdangling-pointer (a false
// positive in its node iterators); silence it for that header only.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdangling-pointer"
#include <yaml-cpp/eventhandler.h>
#include <yaml-cpp/yaml.h>
#pragma GCC diagnostic pop

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstring>
#include <fstream>
#include <optional>
#include <sstream>

#include "decode.h"
#include "validate_internal.h"

namespace xlb::config {

namespace {

using detail::Kind;
using detail::Location;

Location location_of(const YAML::Mark& mark, Location fallback) {
    if (mark.is_null() || mark.line < 0) return fallback;
    return Location{mark.line + 1, mark.column + 1};
}

class YamlView {
public:
    static constexpr std::string_view kMapNoun = "a mapping";

    using Entry = detail::Entry<YamlView>;

    YamlView(YAML::Node node, Location location) : node_(std::move(node)), location_(location) {}

    Kind kind() const {
        if (node_.IsMap()) return Kind::kMap;
        if (node_.IsSequence()) return Kind::kList;
        if (node_.IsScalar()) return Kind::kScalar;
        return Kind::kNull;
    }
    Location location() const { return location_; }

    std::string found() const {
        switch (kind()) {
            case Kind::kMap: return "a mapping";
            case Kind::kList: return "a list";
            case Kind::kScalar: return shown_value(node_.Scalar());
            case Kind::kNull: break;
        }
        return "nothing (null)";
    }

    // YAML scalars are untyped: the schema decides how to read the text.
    std::optional<std::string> string_text() const { return text(); }
    std::optional<std::string> number_text() const { return text(); }
    std::optional<std::string> bool_text() const { return text(); }
    std::optional<std::string> scalar_text() const { return text(); }

    std::vector<Entry> entries() const {
        std::vector<Entry> out;
        for (auto it = node_.begin(); it != node_.end(); ++it) {
            const YAML::Node& k = it->first;
            const YAML::Node& v = it->second;
            const Location key_location = location_of(k.Mark(), location_);
            Location value_location = location_of(v.Mark(), key_location);
            // An empty value ("key:" and a line break) has the position of
            // whatever follows; the key is where the operator looks.
            if (v.IsNull() && value_location.line != key_location.line) {
                value_location = key_location;
            }
            YamlView key_view(k, key_location);
            std::optional<std::string> key;
            if (k.IsScalar()) key = k.Scalar();
            out.push_back(Entry{key, key_location, key_view.found(), YamlView(v, value_location)});
        }
        return out;
    }

    std::vector<YamlView> items() const {
        std::vector<YamlView> out;
        for (auto it = node_.begin(); it != node_.end(); ++it) {
            out.emplace_back(*it, location_of(it->Mark(), location_));
        }
        return out;
    }

private:
    std::optional<std::string> text() const {
        if (node_.IsScalar()) return node_.Scalar();
        return std::nullopt;
    }

    YAML::Node node_;
    Location location_;
};

// The line and column of byte `offset` of `text`, counted as yaml-cpp
// counts them (columns in bytes).
Location location_at(std::string_view text, std::size_t offset) {
    const std::string_view before = text.substr(0, offset);
    const auto line_start = before.rfind('\n');
    const auto column = line_start == std::string_view::npos ? offset : offset - line_start - 1;
    return Location{static_cast<int>(std::count(before.begin(), before.end(), '\n')) + 1,
                    static_cast<int>(column) + 1};
}

// Notes where each document starts and ignores the rest: a second pass over
// the text finds out whether it holds more than one document.
class DocumentStarts : public YAML::EventHandler {
public:
    std::vector<Location> starts;

    void OnDocumentStart(const YAML::Mark& mark) override {
        starts.push_back(location_of(mark, Location{1, 1}));
    }
    void OnDocumentEnd() override {}
    void OnNull(const YAML::Mark&, YAML::anchor_t) override {}
    void OnAlias(const YAML::Mark&, YAML::anchor_t) override {}
    void OnScalar(const YAML::Mark&, const std::string&, YAML::anchor_t,
                  const std::string&) override {}
    void OnSequenceStart(const YAML::Mark&, const std::string&, YAML::anchor_t,
                         YAML::EmitterStyle::value) override {}
    void OnSequenceEnd() override {}
    void OnMapStart(const YAML::Mark&, const std::string&, YAML::anchor_t,
                    YAML::EmitterStyle::value) override {}
    void OnMapEnd() override {}
};

// After a first document that yaml-cpp read: an error at the start of a
// second one ("---" or what follows "..."), or at whatever after the first
// document is not YAML; nullopt when the first document is all there is.
std::optional<ConfigError> extra_document(const std::string& text, const std::string& source) {
    // Another document begins after a "---" or a "..." at the start of a
    // line: without one, spare a big file its second pass.
    auto marker_at = [&](std::size_t at) {
        return text.compare(at, 3, "---") == 0 || text.compare(at, 3, "...") == 0;
    };
    bool marker = marker_at(0);
    for (auto nl = text.find('\n'); !marker && nl != std::string::npos;
         nl = text.find('\n', nl + 1)) {
        marker = marker_at(nl + 1);
    }
    if (!marker) return std::nullopt;
    std::istringstream in(text);
    YAML::Parser parser(in);
    DocumentStarts documents;
    try {
        bool more = true;
        while (more && documents.starts.size() < 2) more = parser.HandleNextDocument(documents);
    } catch (const YAML::Exception& e) {
        // A syntax error inside a second document: the document itself is
        // the error to report (removing it removes the syntax error too).
        if (documents.starts.size() < 2) {
            const Location at = location_of(e.mark, Location{1, 1});
            return ConfigError{source, at.line, at.column,
                               "not valid YAML after the first document: " + e.msg +
                                   " (expected one YAML document: the configuration)"};
        }
    }
    if (documents.starts.size() < 2) return std::nullopt;
    const Location at = documents.starts[1];
    return ConfigError{source, at.line, at.column,
                       "found a second YAML document, expected one document per file (the "
                       "configuration): remove the extra one or merge it into the first"};
}

std::string number_text(double v) {
    char buf[64];
    auto [end, ec] = std::to_chars(buf, buf + sizeof(buf), v);
    if (ec != std::errc{}) return "0";
    return std::string(buf, end);
}

std::string status_text(const StatusRange& r) {
    if (r.first == r.last) return std::to_string(r.first);
    return std::to_string(r.first) + "-" + std::to_string(r.last);
}

// The whole file, or why it cannot be read (`expected`: what should be there).
std::expected<std::string, std::vector<ConfigError>> read_text(const std::string& path,
                                                               std::string_view expected) {
    std::ifstream in(path, std::ios::binary);
    if (!in) {
        const int err = errno;
        return std::unexpected(std::vector<ConfigError>{
            ConfigError{path, 0, 0,
                        std::string("cannot read the file: ") + std::strerror(err) + " (expected " +
                            std::string(expected) + ")"}});
    }
    std::ostringstream text;
    text << in.rdbuf();
    if (in.bad())
        return std::unexpected(
            std::vector<ConfigError>{ConfigError{path, 0, 0, "cannot read the file (I/O error)"}});
    return text.str();
}

// The document's root node, or its syntax error at its line and column.
std::expected<YAML::Node, std::vector<ConfigError>> load_yaml(const std::string& text,
                                                              const std::string& source_name,
                                                              std::string_view expectation) {
    try {
        return YAML::Load(text);
    } catch (const YAML::Exception& e) {
        const Location at = location_of(e.mark, Location{1, 1});
        return std::unexpected(std::vector<ConfigError>{
            ConfigError{source_name, at.line, at.column,
                        "not valid YAML: " + e.msg + " (" + std::string(expectation) + ")"}});
    }
}

}  // namespace

std::string ConfigError::to_string() const {
    if (line <= 0) return file + ": " + message;
    return file + ":" + std::to_string(line) + ":" + std::to_string(column) + ": " + message;
}

std::expected<Config, std::vector<ConfigError>> parse_config(std::string_view yaml,
                                                             const std::string& source_name) {
    // yaml-cpp misreads a NUL byte (an "unknown escape character" somewhere
    // else, or the end of the text): find it first.
    if (const auto nul = yaml.find('\0'); nul != std::string_view::npos) {
        const Location at = location_at(yaml, nul);
        return std::unexpected(std::vector<ConfigError>{ConfigError{
            source_name, at.line, at.column,
            "found a NUL byte, expected UTF-8 text (a UTF-16 or binary file has them; save the "
            "configuration as UTF-8)"}});
    }
    const std::string text(yaml);
    auto loaded = load_yaml(text, source_name, "expected a YAML mapping; see docs/config.md");
    if (!loaded) return std::unexpected(std::move(loaded.error()));
    const YAML::Node& root = *loaded;

    detail::Sink sink;
    const YamlView view(root, location_of(root.Mark(), Location{1, 1}));
    detail::Decoded decoded = detail::decode_config(view, sink);
    std::vector<detail::Issue> issues;
    detail::check_config(decoded.config, issues);

    std::vector<ConfigError> errors;
    if (auto extra = extra_document(text, source_name)) errors.push_back(std::move(*extra));
    for (const auto& d : sink.errors()) {
        errors.push_back(ConfigError{source_name, d.location.line, d.location.column,
                                     detail::with_path(d.path, d.message)});
    }
    // Skip the consequences of what could not be read: an issue on a path at
    // or below a structural error, or computed from a value that had one.
    auto consequence = [&](const detail::Issue& issue) {
        for (const auto& d : sink.errors()) {
            const std::string_view at = issue.issue.path;
            if (d.path.empty() || (detail::related(d.path, at) && d.path.size() <= at.size())) {
                return true;
            }
            for (const auto& dep : issue.depends_on) {
                if (detail::related(d.path, dep)) return true;
            }
        }
        return false;
    };
    for (const auto& issue : issues) {
        if (consequence(issue)) continue;
        const Location at = sink.locate(issue.issue.path);
        errors.push_back(ConfigError{source_name, at.line, at.column, issue.issue.to_string()});
    }
    if (errors.empty()) return std::move(decoded.config);
    std::stable_sort(errors.begin(), errors.end(), [](const ConfigError& a, const ConfigError& b) {
        return std::pair(a.line, a.column) < std::pair(b.line, b.column);
    });
    return std::unexpected(std::move(errors));
}

std::expected<FleetSettings, std::vector<ConfigError>> parse_client_config(
    std::string_view yaml, const std::string& source_name) {
    const std::string text(yaml);
    auto loaded = load_yaml(text, source_name, "expected a mapping with a fleet: section");
    if (!loaded) return std::unexpected(std::move(loaded.error()));
    const YAML::Node& root = *loaded;
    detail::Sink sink;
    const YamlView view(root, location_of(root.Mark(), Location{1, 1}));
    FleetSettings fleet;
    static constexpr std::string_view kClientKeys[] = {"fleet"};
    if (view.kind() == Kind::kNull) {
        sink.error("", Location{1, 1},
                   "the document is empty, expected a mapping with a fleet: section "
                   "(endpoints, name, ca, cert, key)");
    } else if (auto f =
                   detail::read_fields(view, "", sink, kClientKeys, "xlbctl's settings: fleet")) {
        if (const YamlView* x = f->get("fleet"))
            fleet = detail::decode_fleet(*x, "fleet", sink);
        else
            detail::missing(view, "", "fleet", sink,
                            "the fleet's store: endpoints, name, ca, cert, key");
    }
    std::vector<ConfigError> errors;
    for (const auto& d : sink.errors())
        errors.push_back(ConfigError{source_name, d.location.line, d.location.column,
                                     detail::with_path(d.path, d.message)});
    if (errors.empty()) {
        std::vector<detail::Issue> issues;
        detail::check_fleet_settings(fleet, issues);
        for (const auto& issue : issues) {
            const Location at = sink.locate(issue.issue.path);
            errors.push_back(ConfigError{source_name, at.line, at.column, issue.issue.to_string()});
        }
    }
    if (!errors.empty()) return std::unexpected(std::move(errors));
    return fleet;
}

std::expected<FleetSettings, std::vector<ConfigError>> load_client_config(const std::string& path) {
    auto text = read_text(path, "a readable YAML file with a fleet: section");
    if (!text) return std::unexpected(std::move(text.error()));
    return parse_client_config(*text, path);
}

std::optional<ConfigError> missing_hash_seed(const Config& config, const std::string& source_name) {
    // A fleet's seed is in its store (desired/global), which the file may not set.
    if (config.settings.hash_seed_set || config.settings.fleet.enabled) return std::nullopt;
    return ConfigError{
        source_name, 0, 0,
        "hash_seed is not set, and there is no default: the flow hash needs a secret seed of "
        "your own. Make one with `xlbctl gen-seed` and put the line it prints "
        "(hash_seed: 0x...) at the top level of the file; every LB host of a fleet (the "
        "hosts behind one ECMP group) needs the same value, so make it once and copy it to "
        "the others"};
}

std::expected<Config, std::vector<ConfigError>> load_config_file(const std::string& path) {
    auto text = read_text(path, "a readable YAML file");
    if (!text) return std::unexpected(std::move(text.error()));
    return parse_config(*text, path);
}

std::string to_yaml(const Config& config) {
    const Settings& s = config.settings;
    YAML::Emitter e;
    e << YAML::BeginMap;
    e << YAML::Key << "interface" << YAML::Value << s.interface;
    e << YAML::Key << "xdp_mode" << YAML::Value << to_string(s.xdp_mode);
    e << YAML::Key << "next_hop" << YAML::Value << YAML::Flow << YAML::BeginMap;
    if (s.next_hop.address)
        e << YAML::Key << "address" << YAML::Value << s.next_hop.address->to_string();
    if (s.next_hop.mac)
        e << YAML::Key << "mac" << YAML::Value << net::mac_to_string(*s.next_hop.mac);
    e << YAML::EndMap;
    e << YAML::Key << "encap_source" << YAML::Value << YAML::Flow << YAML::BeginMap;
    if (s.encap_source.ipv4) {
        e << YAML::Key << "ipv4" << YAML::Value
          << s.encap_source.ipv4->to_string() + "/" +
                 std::to_string(s.encap_source.ipv4_prefix_len);
    }
    if (s.encap_source.ipv6) {
        e << YAML::Key << "ipv6" << YAML::Value
          << s.encap_source.ipv6->to_string() + "/" +
                 std::to_string(s.encap_source.ipv6_prefix_len);
    }
    e << YAML::EndMap;
    // A fleet host's file holds none of what the fleet shares (its store does).
    const bool fleet_wide = !s.fleet.enabled;
    if (fleet_wide && s.hash_seed_set)
        e << YAML::Key << "hash_seed" << YAML::Value << format_hash_seed(s.hash_seed);
    e << YAML::Key << "mtu" << YAML::Value << s.mtu;
    if (fleet_wide) {
        e << YAML::Key << "icmp_too_big" << YAML::Value << s.icmp_too_big;
        e << YAML::Key << "encap" << YAML::Value << to_string(s.encap);
        e << YAML::Key << "gue_port" << YAML::Value << s.gue_port;
        e << YAML::Key << "second_chance" << YAML::Value << YAML::BeginMap;
        e << YAML::Key << "enabled" << YAML::Value << s.second_chance.enabled;
        e << YAML::Key << "window" << YAML::Value << format_duration(s.second_chance.window);
        e << YAML::EndMap;
    }
    e << YAML::Key << "maps" << YAML::Value << YAML::BeginMap;
    e << YAML::Key << "max_vips" << YAML::Value << s.maps.max_vips;
    e << YAML::Key << "max_backends" << YAML::Value << s.maps.max_backends;
    e << YAML::Key << "conntrack_entries" << YAML::Value << s.maps.conntrack_entries;
    e << YAML::EndMap;
    e << YAML::Key << "api" << YAML::Value << YAML::BeginMap << YAML::Key << "socket" << YAML::Value
      << s.api_socket;
    if (!s.api_group.empty()) e << YAML::Key << "group" << YAML::Value << s.api_group;
    e << YAML::EndMap;
    e << YAML::Key << "metrics" << YAML::Value << YAML::BeginMap << YAML::Key << "listen"
      << YAML::Value << s.metrics_listen << YAML::EndMap;
    e << YAML::Key << "state_file" << YAML::Value << s.state_file;
    e << YAML::Key << "pin_dir" << YAML::Value << s.pin_dir;
    e << YAML::Key << "bgp" << YAML::Value << YAML::BeginMap;
    e << YAML::Key << "enabled" << YAML::Value << s.bgp.enabled;
    e << YAML::Key << "control_socket" << YAML::Value << s.bgp.control_socket;
    e << YAML::Key << "routes_file" << YAML::Value << s.bgp.routes_file;
    e << YAML::Key << "protocol" << YAML::Value << s.bgp.protocol;
    e << YAML::Key << "route" << YAML::Value << std::string(announce::to_string(s.bgp.route));
    e << YAML::EndMap;
    e << YAML::Key << "conntrack" << YAML::Value << YAML::BeginMap;
    e << YAML::Key << "insert_rate" << YAML::Value << s.conntrack.insert_rate;
    e << YAML::Key << "insert_burst" << YAML::Value << s.conntrack.insert_burst;
    e << YAML::Key << "resize" << YAML::Value << to_string(s.conntrack.resize);
    e << YAML::Key << "sweep_interval" << YAML::Value
      << format_duration(s.conntrack.sweep_interval);
    e << YAML::EndMap;
    if (fleet_wide) e << YAML::Key << "health_history" << YAML::Value << s.health_history;
    e << YAML::Key << "syn_flood" << YAML::Value << YAML::Flow << YAML::BeginMap;
    e << YAML::Key << "start_rate" << YAML::Value << s.syn_flood.start_rate;
    e << YAML::Key << "end_rate" << YAML::Value << s.syn_flood.end_rate;
    e << YAML::Key << "end_after" << YAML::Value << format_duration(s.syn_flood.end_after);
    e << YAML::EndMap;
    if (s.fleet.enabled) {
        const FleetSettings& f = s.fleet;
        e << YAML::Key << "fleet" << YAML::Value << YAML::BeginMap;
        e << YAML::Key << "name" << YAML::Value << f.name;
        if (!f.prefix.empty()) e << YAML::Key << "prefix" << YAML::Value << f.prefix;
        e << YAML::Key << "endpoints" << YAML::Value << YAML::Flow << f.endpoints;
        for (auto [key, value] : {std::pair{"host_name", &f.host_name}, std::pair{"ca", &f.ca},
                                  std::pair{"cert", &f.cert}, std::pair{"key", &f.key}})
            if (!value->empty()) e << YAML::Key << key << YAML::Value << *value;
        e << YAML::Key << "lease_ttl" << YAML::Value << format_duration(f.lease_ttl);
        e << YAML::Key << "dial_timeout" << YAML::Value << format_duration(f.dial_timeout);
        e << YAML::Key << "request_timeout" << YAML::Value << format_duration(f.request_timeout);
        e << YAML::Key << "max_publish_wait" << YAML::Value << format_duration(f.max_publish_wait);
        e << YAML::Key << "announce" << YAML::Value << to_string(f.announce);
        e << YAML::Key << "max_lag" << YAML::Value << format_duration(f.max_lag);
        e << YAML::EndMap;
    }

    auto optional_text = [&](const char* key, const std::string& value) {
        if (!value.empty()) e << YAML::Key << key << YAML::Value << value;
    };
    if (fleet_wide) e << YAML::Key << "vips" << YAML::Value << YAML::BeginSeq;
    for (const VipSpec& v : fleet_wide ? config.vips : std::vector<VipSpec>{}) {
        e << YAML::BeginMap;
        e << YAML::Key << "address" << YAML::Value << v.address.to_string();
        e << YAML::Key << "port" << YAML::Value << v.port;
        e << YAML::Key << "protocol" << YAML::Value << to_string(v.protocol);
        optional_text("name", v.name);
        e << YAML::Key << "hash" << YAML::Value << to_string(v.hash);
        e << YAML::Key << "conntrack" << YAML::Value << v.conntrack;
        e << YAML::Key << "ring_size" << YAML::Value << v.ring_size;
        e << YAML::Key << "panic_threshold" << YAML::Value << number_text(v.panic_threshold);
        e << YAML::Key << "slow_start" << YAML::Value << YAML::Flow << YAML::BeginMap << YAML::Key
          << "window" << YAML::Value << format_duration(v.slow_start.window) << YAML::Key << "floor"
          << YAML::Value << number_text(v.slow_start.floor) << YAML::EndMap;
        e << YAML::Key << "on_unhealthy" << YAML::Value << to_string(v.on_unhealthy);
        if (v.health_consensus)
            e << YAML::Key << "health_consensus" << YAML::Value << to_string(*v.health_consensus);
        e << YAML::Key << "announce" << YAML::Value << std::string(announce::to_string(v.announce));
        if (v.conntrack_idle_timeout) {
            e << YAML::Key << "conntrack_idle_timeout" << YAML::Value
              << format_duration(*v.conntrack_idle_timeout);
        }
        if (v.syn_cookies)
            e << YAML::Key << "syn_cookies" << YAML::Value << to_string(*v.syn_cookies);
        for (auto [key, list] : {std::pair{"allow_sources", &v.allow_sources},
                                 std::pair{"deny_sources", &v.deny_sources}}) {
            if (list->empty()) continue;
            e << YAML::Key << key << YAML::Value << YAML::Flow << YAML::BeginSeq;
            for (const net::Prefix& p : *list) e << p.to_string();
            e << YAML::EndSeq;
        }
        if (!v.quic.empty()) {
            e << YAML::Key << "quic" << YAML::Value << YAML::BeginSeq;
            for (const QuicConfig& q : v.quic) {
                e << YAML::Flow << YAML::BeginMap;
                e << YAML::Key << "config_id" << YAML::Value << unsigned{q.config_id};
                e << YAML::Key << "server_id_length" << YAML::Value << unsigned{q.server_id_length};
                e << YAML::Key << "nonce_length" << YAML::Value << unsigned{q.nonce_length};
                e << YAML::Key << "mode" << YAML::Value << to_string(q.mode);
                optional_text("key_file", q.key_file);
                e << YAML::EndMap;
            }
            e << YAML::EndSeq;
        }
        const HealthCheck& h = v.health_check;
        e << YAML::Key << "health_check" << YAML::Value << YAML::BeginMap;
        e << YAML::Key << "type" << YAML::Value << to_string(h.type);
        e << YAML::Key << "port" << YAML::Value << h.port;
        e << YAML::Key << "path" << YAML::Value << h.path;
        optional_text("host", h.host);
        e << YAML::Key << "expected_statuses" << YAML::Value << YAML::Flow << YAML::BeginSeq;
        for (const auto& r : h.expected_statuses) e << status_text(r);
        e << YAML::EndSeq;
        optional_text("body_contains", h.body_contains);
        if (speaks_http(h.type)) {
            e << YAML::Key << "reuse_connection" << YAML::Value << h.reuse_connection;
            e << YAML::Key << "reuse_limit" << YAML::Value << format_duration(h.reuse_limit);
        }
        if (h.type == HealthCheckType::kHttps) {
            optional_text("sni", h.sni);
            optional_text("ca_file", h.ca_file);
            e << YAML::Key << "verify" << YAML::Value << h.verify;
        }
        optional_text("udp_payload", h.udp_payload);
        optional_text("udp_expect", h.udp_expect);
        e << YAML::Key << "interval" << YAML::Value << format_duration(h.interval);
        e << YAML::Key << "timeout" << YAML::Value << format_duration(h.timeout);
        e << YAML::Key << "jitter" << YAML::Value << format_duration(h.jitter);
        e << YAML::Key << "unhealthy_threshold" << YAML::Value << h.unhealthy_threshold;
        e << YAML::Key << "healthy_threshold" << YAML::Value << h.healthy_threshold;
        e << YAML::Key << "via_vip" << YAML::Value << h.via_vip;
        // Failure accrual, rate-limit bias, flapping: written when not the defaults.
        const HealthCheck defaults;
        if (h.failure_accrual != defaults.failure_accrual) {
            const FailureAccrual& a = h.failure_accrual;
            e << YAML::Key << "failure_accrual" << YAML::Value << YAML::Flow << YAML::BeginMap;
            e << YAML::Key << "enabled" << YAML::Value << a.enabled;
            e << YAML::Key << "success_rate" << YAML::Value << number_text(a.success_rate);
            e << YAML::Key << "window" << YAML::Value << format_duration(a.window);
            e << YAML::Key << "min_probes" << YAML::Value << a.min_probes;
            e << YAML::Key << "min_penalty" << YAML::Value << format_duration(a.min_penalty);
            e << YAML::Key << "max_penalty" << YAML::Value << format_duration(a.max_penalty);
            e << YAML::Key << "jitter" << YAML::Value << number_text(a.jitter);
            e << YAML::EndMap;
        }
        if (h.rate_limit_bias != defaults.rate_limit_bias) {
            const RateLimitBias& b = h.rate_limit_bias;
            e << YAML::Key << "rate_limit_bias" << YAML::Value << YAML::Flow << YAML::BeginMap;
            e << YAML::Key << "factor" << YAML::Value << number_text(b.factor);
            e << YAML::Key << "penalty" << YAML::Value << format_duration(b.penalty);
            e << YAML::Key << "max_retry_after" << YAML::Value
              << format_duration(b.max_retry_after);
            e << YAML::EndMap;
        }
        if (h.flapping != defaults.flapping) {
            const Flapping& f = h.flapping;
            e << YAML::Key << "flapping" << YAML::Value << YAML::Flow << YAML::BeginMap;
            e << YAML::Key << "changes" << YAML::Value << f.changes;
            e << YAML::Key << "window" << YAML::Value << format_duration(f.window);
            e << YAML::Key << "hold" << YAML::Value << format_duration(f.hold);
            e << YAML::EndMap;
        }
        e << YAML::EndMap;
        e << YAML::Key << "backends" << YAML::Value << YAML::BeginSeq;
        for (const BackendSpec& b : v.backends) {
            e << YAML::Flow << YAML::BeginMap;
            e << YAML::Key << "address" << YAML::Value << b.address.to_string();
            e << YAML::Key << "weight" << YAML::Value << b.weight;
            e << YAML::Key << "state" << YAML::Value << to_string(b.state);
            optional_text("hash_key", b.hash_key);
            if (b.cookie_acks) e << YAML::Key << "cookie_acks" << YAML::Value << true;
            if (b.server_id) e << YAML::Key << "server_id" << YAML::Value << *b.server_id;
            e << YAML::EndMap;
        }
        e << YAML::EndSeq;
        e << YAML::EndMap;
    }
    if (fleet_wide) e << YAML::EndSeq;
    e << YAML::EndMap;
    return std::string(e.c_str()) + "\n";
}

}  // namespace xlb::config
