// SPDX-License-Identifier: Apache-2.0
#include "checks.h"

#include <fmt/format.h>

#include <cctype>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstdlib>

#include "xlb/xlbctl/fleet.h"

namespace xlb::xlbctl {

Examples examples_for(const std::optional<config::VipKey>& key) {
    Examples e;
    if (key && !key->address.is_v4()) {
        e.vip = "[2001:db8::10]:443/tcp";
        e.backend = "2001:db8:b::11";
        e.src = "[2001:db8:c::7]:40000";
        e.client = "2001:db8:c::/48";
    }
    return e;
}

std::string with_example(std::string message, const std::string& example) {
    if (message.find("e.g.") != std::string::npos) return message;
    return message + " (e.g. " + example + ")";
}

std::string in_quotes(std::string_view s) { return "'" + std::string(s) + "'"; }

Checked<std::uint64_t> parse_unsigned(std::string_view text) {
    std::uint64_t value = 0;
    auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
    if (text.empty() || ec != std::errc{} || end != text.data() + text.size())
        return std::unexpected(std::string("not an integer"));
    return value;
}

Checked<double> parse_number(std::string_view text) {
    const std::string s(text);
    if (s.empty() || std::isspace(static_cast<unsigned char>(s.front())))
        return std::unexpected(std::string("not a number"));
    char* end = nullptr;
    errno = 0;
    const double value = std::strtod(s.c_str(), &end);
    if (end != s.c_str() + s.size() || errno == ERANGE || !std::isfinite(value))
        return std::unexpected(std::string("not a number"));
    return value;
}

Checked<config::VipKey> check_vip_key(const std::string& text) {
    auto key = config::parse_vip_key(text);
    if (!key) return std::unexpected("VIP: " + key.error());
    return *key;
}

Checked<std::uint32_t> check_weight(const std::string& text) {
    const std::string range = "0-" + std::to_string(config::kMaxWeight);
    const std::string tail = " (0 takes no new flows), e.g. --weight 100";
    auto value = parse_unsigned(text);
    if (!value)
        return std::unexpected("--weight: found " + in_quotes(text) + ", expected an integer " +
                               range + tail);
    if (*value > config::kMaxWeight)
        return std::unexpected("--weight: found " + text + ", expected " + range + tail);
    return static_cast<std::uint32_t>(*value);
}

Checked<net::IpAddress> check_address(const std::string& text, const std::string& what,
                                      const Examples& ex) {
    auto address = net::IpAddress::parse(text);
    if (address) return *address;
    if (net::Endpoint::parse(text))
        return std::unexpected(what + ": found " + in_quotes(text) +
                               ", an address with a port; a backend is an address alone "
                               "(packets keep the VIP's port), e.g. " +
                               ex.backend);
    return std::unexpected(what + ": " + address.error());
}

// Permissive settings: client-side checks are those of the VIP itself. The
// agent still applies its settings (encapsulation sources, encap, MTU, map
// sizes): gue here, so that syn_cookies is refused for an encap only by the
// agent, which knows its own.
config::Settings client_settings() {
    config::Settings s;
    s.encap = config::Encap::kGue;
    s.encap_source.ipv4 = net::IpAddress::v4(192, 0, 2, 1);
    s.encap_source.ipv6 = *net::IpAddress::parse("2001:db8::1");
    return s;
}

// One backend checked with the agent's rules, as part of its VIP.
Checked<void> check_backend(const config::VipKey& key, const config::BackendSpec& backend,
                            const std::string& example) {
    config::VipSpec spec;
    spec.address = key.address;
    spec.port = key.port;
    spec.protocol = key.protocol;
    spec.backends.push_back(backend);
    std::vector<std::string> problems;
    for (const config::ValidationIssue& issue : config::check_vip(spec, client_settings())) {
        const std::string& p = issue.path;
        if (p == "backends[0].address")
            problems.push_back("ADDR " + backend.address.to_string() + ": " + issue.message);
        else if (p == "backends[0].weight")
            problems.push_back("--weight: " + issue.message);
        else if (p == "backends[0].hash_key")
            problems.push_back("--hash-key: " + issue.message);
        else if (p.starts_with("backends[0]"))
            problems.push_back(p.substr(12) + ": " + issue.message);
    }
    if (problems.empty()) return {};
    std::string message;
    for (const auto& p : problems) message += (message.empty() ? "" : "; ") + p;
    return std::unexpected(with_example(message, example));
}

Checked<double> check_seconds(const std::string& option, const std::string& text, double min,
                              double max, const std::string& example) {
    auto value = parse_number(text);
    if (!value || *value < min || *value > max)
        return std::unexpected(option + ": found " + in_quotes(text) + ", expected seconds " +
                               fmt::format("{:g}-{:g}", min, max) + ", e.g. " + example);
    return *value;
}

// --count N of stats --watch, top (refreshes) and capture (packets): 1 or more.
Checked<std::uint64_t> check_count(const std::string& text, const char* of,
                                   const std::string& example) {
    auto n = parse_unsigned(text);
    if (!n || *n < 1)
        return std::unexpected("--count: found " + in_quotes(text) + ", expected a number of " +
                               of + " >= 1, e.g. " + example);
    return *n;
}

// A duration as the configuration writes it ("30s", "5m"), above zero.
Checked<config::Duration> check_duration(const std::string& option, const std::string& text,
                                         const std::string& example) {
    auto d = config::parse_duration(text);
    if (!d) return std::unexpected(option + ": " + d.error() + ", e.g. " + example);
    if (d->count() == 0)
        return std::unexpected(option + ": found " + in_quotes(text) +
                               ", expected a duration above zero, e.g. " + example);
    return *d;
}

// --timeout and --wait-timeout: seconds alone ("30", "0.5") or a duration
// as the configuration writes it ("10m"), the same form for both.
Checked<std::chrono::milliseconds> check_time_bound(
    const std::string& option, const std::string& text, std::chrono::milliseconds min,
    std::chrono::milliseconds max, const std::string& range, const std::string& example) {
    const std::string expected =
        ", expected seconds or a duration of " + range + ", e.g. " + option + " " + example;
    std::chrono::milliseconds bound{};
    if (auto seconds = parse_number(text)) {
        if (*seconds < 0 || *seconds > static_cast<double>(max.count()) / 1000)
            return std::unexpected(option + ": found " + in_quotes(text) + expected);
        bound = std::chrono::milliseconds(static_cast<long>(std::llround(*seconds * 1000)));
    } else if (auto d = config::parse_duration(text)) {
        bound = *d;
    } else {
        return std::unexpected(option + ": found " + in_quotes(text) + expected);
    }
    if (bound < min || bound > max)
        return std::unexpected(option + ": found " + in_quotes(text) + expected);
    return bound;
}

void add_common(CLI::App* app, Raw& raw) {
    app->add_option("--socket", raw.socket,
                    std::string("the agent's API socket (default: $") + kSocketEnv + ", else " +
                        kDefaultSocket + ")")
        ->type_name("PATH");
    app->add_flag("--json", raw.json,
                  "print the reply as JSON (field names are stable: man xlbctl)");
    app->add_option("--timeout", raw.timeout,
                    "give up on a request to the agent after SECS or DUR, 0.1-3600 s (default 30)")
        ->type_name("SECS|DUR");
    app->add_option("--reason", raw.reason,
                    "why: sent with the request and recorded in the agent's audit log entry "
                    "of a change; with a fleet, kept with the value written")
        ->type_name("TEXT");
    const char* group = "Fleet (docs/fleet.md)";
    app->add_option("--fleet", raw.fleet,
                    "the fleet's etcd members, comma-separated URLs: write verbs change the "
                    "fleet's store instead of this agent")
        ->type_name("URLS")
        ->group(group);
    app->add_option("--fleet-name", raw.fleet_name, "the fleet's name (default: default)")
        ->type_name("NAME")
        ->group(group);
    app->add_option("--fleet-prefix", raw.fleet_prefix, "its key prefix (default: /xlb/NAME/)")
        ->type_name("PREFIX")
        ->group(group);
    app->add_option("--fleet-ca", raw.fleet_ca, "PEM file of the CA of the etcd members")
        ->type_name("FILE")
        ->group(group);
    app->add_option("--fleet-cert", raw.fleet_cert, "PEM file of this client's certificate")
        ->type_name("FILE")
        ->group(group);
    app->add_option("--fleet-key", raw.fleet_key, "PEM file of its key")
        ->type_name("FILE")
        ->group(group);
    app->add_option("--config-file", raw.config_file,
                    std::string("xlbctl's file with a fleet: section (default: $") + kConfigEnv +
                        ", else " + kDefaultConfigFile + " when it exists)")
        ->type_name("FILE")
        ->group(group);
}

void add_fleet_write_options(CLI::App* app, Raw& raw, bool allow_disruptive) {
    const char* group = "With a fleet (docs/fleet.md)";
    app->add_option("--if-revision", raw.if_revision,
                    "write only if the key's revision is still N (0: it must not exist); "
                    "default: the revision just read")
        ->type_name("N")
        ->group(group);
    if (allow_disruptive)
        app->add_flag("--allow-disruptive", raw.allow_disruptive,
                      "confirm a change that moves established flows (hash, ring_size)")
            ->group(group);
}

void add_vip_arg(CLI::App* app, Raw& raw) {
    app->add_option("VIP", raw.vip, "ADDRESS:PORT[/tcp|/udp]; port 0 = every port")
        ->type_name("")
        ->required();
}

void add_addr_arg(CLI::App* app, Raw& raw) {
    app->add_option("ADDR", raw.address, "the backend's IP address (no port)")
        ->type_name("")
        ->required();
}

void add_output_option(CLI::App& app, Raw& raw) {
    app.add_option("-o,--output", raw.output, "write it to FILE (default: stdout)")
        ->type_name("FILE");
}

Checked<void> take_output(const Raw& raw, Command& c) {
    c.output = raw.output;
    return {};
}

// The backend verbs that change something can be tried first.
void add_dry_run_flag(CLI::App* app, Raw& raw) {
    app->add_flag("--dry-run", raw.dry_run,
                  "build the table this change would give, publish nothing, and show the share "
                  "of new flows that would change backend");
}

}  // namespace xlb::xlbctl
