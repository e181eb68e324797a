// SPDX-License-Identifier: Apache-2.0
// Command line -> Command, with every argument checked before anything is
// sent. Error messages say what was found, what was expected, and show an
// example of the right form.
#include "xlb/xlbctl/command.h"

#include <fmt/format.h>
#include <sys/un.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cctype>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <expected>
#include <map>
#include <optional>

#include "xlb/cli/suggest.h"
#include "xlb/config/config.h"
#include "xlb/config/json.h"
#include "xlb/xlbctl/seed.h"
#include "xlb/xlbctl/vip_settings.h"

#ifndef XLBCTL_VERSION
#define XLBCTL_VERSION "unknown"
#endif

namespace xlb::xlbctl {

namespace {

// Indexed by Verb, in its order. (xlbctl does not link userspace/error, where
// the name-table helper lives; a Verb is never parsed back from its name.)
constexpr const char* kVerbNames[] = {
    "status",         "vip list",        "vip add",         "vip del",     "vip set",
    "backend list",   "backend add",     "backend del",     "backend set", "backend drain",
    "backend enable", "backend disable", "backend history", "stats",       "table",
    "lookup",         "reload",          "host drain",      "host resume", "conntrack count",
    "conntrack list", "conntrack flush", "capture",         "top",
};
static_assert(std::size(kVerbNames) == static_cast<std::size_t>(Verb::kTop) + 1,
              "a name for every Verb");

}  // namespace

const char* verb_name(Verb verb) {
    const auto i = static_cast<std::size_t>(verb);
    return i < std::size(kVerbNames) ? kVerbNames[i] : "?";
}

bool wants_json(const std::vector<std::string>& args) {
    return std::find(args.begin(), args.end(), "--json") != args.end();
}

namespace {

template <typename T>
using Checked = std::expected<T, std::string>;

constexpr double kMinWatch = 0.1, kMaxWatch = 3600;
constexpr std::chrono::milliseconds kMinTimeout{100}, kMaxTimeout{3'600'000};
constexpr std::size_t kMaxSocketPath = config::kMaxSocketPathBytes;

// Arguments as typed, before checking.
struct Raw {
    std::string socket;
    std::string timeout;
    bool json = false;
    std::string vip, address, weight, hash_key;
    std::string name, hash, ring_size, panic_threshold;
    bool no_conntrack = false;
    bool dry_run = false;
    bool allow_disruptive = false;
    std::vector<std::string> backends;
    bool quiet = false;
    std::string watch, count;
    bool watch_given = false, count_given = false;
    std::string src, proto, dport;
    std::vector<std::string> peers;
    // conntrack selectors; backend drain --wait.
    std::string ct_backend, client, limit, active_within, wait_timeout;
    bool stale = false;
    bool wait = false;
    // capture
    std::vector<std::string> outcomes;
    std::string duration, snaplen, write_to;
    // vip add, vip set: the VIP settings' options (by path), and which were given.
    std::map<std::string, std::string> settings;
    std::vector<std::pair<std::string, std::string>> given;
    // The options add_vip_settings() made, per verb, with their paths.
    std::map<const CLI::App*, std::vector<std::pair<const CLI::Option*, std::string>>>
        setting_options;
};

// Documentation-range examples in the VIP's family.
struct Examples {
    std::string vip = "198.51.100.10:80/tcp";
    std::string backend = "203.0.113.11";
    std::string src = "192.0.2.7:40000";
    std::string client = "192.0.2.0/24";
};
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
// agent still applies its settings (encapsulation sources, MTU, map sizes).
config::Settings client_settings() {
    config::Settings s;
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

Checked<config::BackendSpec> check_backend_option(const std::string& text, const Examples& ex) {
    const std::string form = "expected ADDR or ADDR=WEIGHT, e.g. --backend " + ex.backend +
                             " or --backend " + ex.backend + "=50";
    config::BackendSpec b;
    std::string address = text, weight;
    if (auto eq = text.find('='); eq != std::string::npos) {
        address = text.substr(0, eq);
        weight = text.substr(eq + 1);
    }
    auto parsed = net::IpAddress::parse(address);
    if (!parsed)
        return std::unexpected("--backend " + in_quotes(text) + ": " + parsed.error() + "; " +
                               form);
    b.address = *parsed;
    if (!weight.empty() || text.find('=') != std::string::npos) {
        auto w = parse_unsigned(weight);
        if (!w || *w > config::kMaxWeight)
            return std::unexpected("--backend " + in_quotes(text) + ": weight " +
                                   in_quotes(weight) + " is not an integer 0-" +
                                   std::to_string(config::kMaxWeight) + "; " + form);
        b.weight = static_cast<std::uint32_t>(*w);
    }
    return b;
}

Checked<config::VipSpec> check_vip_add(const Raw& raw, const config::VipKey& key,
                                       const Examples& ex) {
    config::VipSpec spec;
    spec.address = key.address;
    spec.port = key.port;
    spec.protocol = key.protocol;
    spec.name = raw.name;
    spec.conntrack = !raw.no_conntrack;
    if (!raw.hash.empty()) {
        auto mode = config::parse_hash_mode(raw.hash);
        if (!mode)
            return std::unexpected("--hash: found " + in_quotes(raw.hash) +
                                   ", expected 5tuple (addresses and ports: a client's "
                                   "connections spread) or source (client address only: one "
                                   "client, one backend), e.g. --hash source");
        spec.hash = *mode;
    }
    if (!raw.ring_size.empty()) {
        auto size = parse_unsigned(raw.ring_size);
        if (!size || *size > UINT32_MAX)
            return std::unexpected("--ring-size: found " + in_quotes(raw.ring_size) +
                                   ", expected a prime number of table slots, e.g. "
                                   "--ring-size 65537");
        spec.ring_size = static_cast<std::uint32_t>(*size);
    }
    if (!raw.panic_threshold.empty()) {
        auto t = parse_number(raw.panic_threshold);
        if (!t || *t < 0 || *t > 1)
            return std::unexpected("--panic-threshold: found " + in_quotes(raw.panic_threshold) +
                                   ", expected a number 0-1 (share of healthy weight below "
                                   "which health is ignored; 0 = never panic), e.g. "
                                   "--panic-threshold 0.5");
        spec.panic_threshold = *t;
    }
    for (const std::string& text : raw.backends) {
        auto b = check_backend_option(text, ex);
        if (!b) return std::unexpected(b.error());
        spec.backends.push_back(*b);
    }
    // The other settings given: decoded by the config library as the file's.
    if (!raw.given.empty()) {
        nlohmann::json whole = spec;
        whole.update(settings_object(raw.given), true);
        auto decoded = config::vip_from_json(whole);
        if (!decoded)
            return std::unexpected(
                with_example(with_options(decoded.error()),
                             "xlbctl vip add " + ex.vip + " --health-check.type tcp"));
        spec = std::move(*decoded);
    }

    std::vector<std::string> problems;
    for (const config::ValidationIssue& issue : config::check_vip(spec, client_settings())) {
        const std::string& p = issue.path;
        std::string where = p;
        if (p == "address")
            where = "VIP " + key.to_string();
        else if (p == "name")
            where = "--name";
        else if (p == "ring_size")
            where = "--ring-size";
        else if (p == "panic_threshold")
            where = "--panic-threshold";
        else if (p.starts_with("backends[")) {
            const std::size_t i = std::strtoul(p.c_str() + 9, nullptr, 10);
            if (i < raw.backends.size()) where = "--backend " + raw.backends[i];
        } else if (const std::string option = option_of(p); !option.empty()) {
            where = option;
        }
        std::string message = where + ": " + issue.message;
        if (p == "name") message = with_example(message, "--name web");
        problems.push_back(std::move(message));
    }
    if (!problems.empty()) {
        std::string message;
        for (const auto& p : problems) message += (message.empty() ? "" : "; ") + p;
        return std::unexpected(
            with_example(message, "xlbctl vip add " + ex.vip + " --ring-size 65537"));
    }
    return spec;
}

// vip set: the settings given, typed and decoded as the file's keys (the
// agent checks them with the VIP's other settings, which only it has).
Checked<std::string> check_vip_set(const Raw& raw, const config::VipKey& key, const Examples& ex) {
    const std::string example = "xlbctl vip set " + ex.vip + " --health-check.type tcp";
    if (raw.given.empty())
        return std::unexpected("vip set: expected at least one setting to change, e.g. " + example +
                               " (xlbctl vip set --help lists them)");
    const nlohmann::json given = settings_object(raw.given);
    // Over a VIP of defaults, as the agent merges them over the VIP's own
    // (a health_check object needs its type, for one).
    config::VipSpec base;
    base.address = key.address;
    base.port = key.port;
    base.protocol = key.protocol;
    nlohmann::json whole = base;
    whole.update(given, true);
    if (auto decoded = config::vip_from_json(whole); !decoded)
        return std::unexpected(with_example(with_options(decoded.error()), example));
    return given.dump();
}

Checked<double> check_seconds(const std::string& option, const std::string& text, double min,
                              double max, const std::string& example) {
    auto value = parse_number(text);
    if (!value || *value < min || *value > max)
        return std::unexpected(option + ": found " + in_quotes(text) + ", expected seconds " +
                               fmt::format("{:g}-{:g}", min, max) + ", e.g. " + example);
    return *value;
}

// A duration as the configuration writes it ("30s", "5m"), above zero.
// --count N of stats --watch, top (refreshes) and capture (packets): 1 or more.
Checked<std::uint64_t> check_count(const std::string& text, const char* of,
                                   const std::string& example) {
    auto n = parse_unsigned(text);
    if (!n || *n < 1)
        return std::unexpected("--count: found " + in_quotes(text) + ", expected a number of " +
                               of + " >= 1, e.g. " + example);
    return *n;
}

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

constexpr std::chrono::hours kMaxDrainWait{24};

// The conntrack selectors: a backend address, a client prefix. With a VIP,
// one that no entry of the VIP can match is a mistake on the line: a client
// of the other family, an IPv4 backend of an IPv6 VIP.
Checked<void> check_selectors(const Raw& raw, Command& c, const Examples& ex) {
    const std::string family_of_vip =
        c.vip_key ? "IPv" + std::to_string(c.vip_key->address.family) : "";
    if (!raw.ct_backend.empty()) {
        auto address = check_address(raw.ct_backend, "--backend", ex);
        if (!address) return std::unexpected(address.error());
        // An IPv4 VIP may have IPv6 backends (IPv4-in-IPv6), not the reverse.
        if (c.vip_key && !c.vip_key->address.is_v4() && address->is_v4())
            return std::unexpected("--backend: found IPv4 address " + address->to_string() +
                                   " for the IPv6 VIP " + c.vip_key->to_string() +
                                   " (its backends are IPv6), e.g. --backend " + ex.backend);
        c.ct_backend = *address;
    }
    if (!raw.client.empty()) {
        auto prefix = net::Prefix::parse(raw.client);
        if (!prefix) return std::unexpected("--client: " + prefix.error());
        if (c.vip_key && prefix->address.family != c.vip_key->address.family)
            return std::unexpected("--client: found IPv" + std::to_string(prefix->address.family) +
                                   " prefix " + prefix->to_string() + " for the " + family_of_vip +
                                   " VIP " + c.vip_key->to_string() + ", expected an " +
                                   family_of_vip + " address or prefix, e.g. --client " +
                                   ex.client);
        c.ct_client = *prefix;
    }
    return {};
}

// ---------------------------------------------------------------------------
// The command tree.

struct Cli {
    CLI::App app{
        "xlbctl: the operator's command line of the xlb load balancer.\n"
        "Talks to the xlbd agent over its Unix socket (never to the kernel).",
        "xlbctl"};
    Raw raw;
    std::map<const CLI::App*, Verb> leaves;
    // Answered here, without the agent (no Verb, no request).
    CLI::App* gen_seed = nullptr;
};

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
}

CLI::App* leaf(Cli& cli, CLI::App* parent, const std::string& name, const std::string& help,
               Verb verb, const std::string& examples) {
    CLI::App* app = parent->add_subcommand(name, help);
    add_common(app, cli.raw);
    app->footer("Examples:\n" + examples);
    cli.leaves[app] = verb;
    return app;
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

// The backend verbs that change something can be tried first.
void add_dry_run_flag(CLI::App* app, Raw& raw) {
    app->add_flag("--dry-run", raw.dry_run,
                  "build the table this change would give, publish nothing, and show the share "
                  "of new flows that would change backend");
}

// A verb on one backend of one VIP that changes it: VIP, ADDR, --dry-run.
CLI::App* backend_leaf(Cli& cli, CLI::App* parent, const std::string& name, const std::string& help,
                       Verb verb, const std::string& examples) {
    CLI::App* app = leaf(cli, parent, name, help, verb, examples);
    add_vip_arg(app, cli.raw);
    add_addr_arg(app, cli.raw);
    add_dry_run_flag(app, cli.raw);
    return app;
}

// vip add and vip set can be tried first.
void add_dry_run_flag_vip(CLI::App* app, Raw& raw, const std::string& verb) {
    app->add_flag("--dry-run", raw.dry_run,
                  "have the agent check the " + std::string(verb == "add" ? "VIP" : "change") +
                      " as it would apply it, and change nothing");
}

// The per-VIP keys of the file as options (vip_settings.h). vip add has
// options of its own for name, hash, ring_size, panic_threshold and
// conntrack (--no-conntrack); vip set takes them as the others.
void add_vip_settings(CLI::App* app, Raw& raw, bool with_dedicated) {
    for (const VipSetting& s : vip_settings()) {
        const bool dedicated = s.path == "name" || s.path == "hash" || s.path == "ring_size" ||
                               s.path == "panic_threshold" || s.path == "conntrack";
        if (dedicated && !with_dedicated) continue;
        const CLI::Option* option = app->add_option(s.option, raw.settings[s.path], s.help)
                                        ->type_name(s.type_name)
                                        ->group("VIP settings (docs/config.md)");
        raw.setting_options[app].emplace_back(option, s.path);
    }
}

void build(Cli& cli) {
    CLI::App& app = cli.app;
    Raw& raw = cli.raw;
    app.set_version_flag("--version", "xlbctl " XLBCTL_VERSION);
    app.require_subcommand(1);
    add_common(&app, raw);
    app.footer(
        "Examples:\n"
        "  xlbctl status\n"
        "  xlbctl vip add 198.51.100.10:80/tcp --hash 5tuple --ring-size 65537\n"
        "  xlbctl backend add 198.51.100.10:80/tcp 203.0.113.14 --weight 50\n"
        "  xlbctl backend drain 198.51.100.10:80/tcp 203.0.113.11 --wait\n"
        "  xlbctl conntrack count --vip 198.51.100.10:80/tcp\n"
        "  xlbctl stats --watch\n"
        "  xlbctl lookup 198.51.100.10:80/tcp --src 192.0.2.7:40000\n"
        "  xlbctl reload\n"
        "Every verb takes --json and --socket PATH, and --help with examples.\n"
        "Exit status: 0 done; 1 rejected by the agent; 2 a wrong command line\n"
        "(nothing was sent); 3 the agent could not be reached. See man xlbctl.");

    CLI::App* status =
        leaf(cli, &app, "status",
             "The agent (version, interface, XDP mode, uptime, readiness, BGP) and, per VIP,\n"
             "healthy/total backends, panic, epoch, table checksum and announcement.\n"
             "With --peers, compares this host's tables with other LB hosts' and exits 1\n"
             "when they differ (docs/scale-out.md).",
             Verb::kStatus,
             "  xlbctl status\n"
             "  xlbctl status --json\n"
             "  XLB_SOCKET=/tmp/lab/xlbd.sock xlbctl status\n"
             "  xlbctl status --peers /run/xlb-lab/p/lb2/xlbd.sock\n"
             "  ssh lb2 xlbctl status --json > lb2.json; xlbctl status --peers lb2.json\n");
    status
        ->add_option("--peers", raw.peers,
                     "other LB hosts: API socket paths, or files with their `xlbctl status --json`")
        ->type_name("SOCKET|FILE")
        ->expected(1, -1);

    CLI::App* host =
        app.add_subcommand("host", "Drain this LB host (withdraw every VIP) or resume it.");
    host->require_subcommand(1);
    add_common(host, raw);
    leaf(cli, host, "drain",
         "Withdraw every VIP from the routers (BGP): they move new and established flows\n"
         "to the other LB hosts; what still arrives here is served. Kept across restarts.\n"
         "Then wait for the VIPs' packet rate to fall (xlbctl stats --watch) before\n"
         "stopping the agent or the host.",
         Verb::kHostDrain, "  xlbctl host drain\n  xlbctl stats --watch\n");
    leaf(cli, host, "resume", "Announce the VIPs again, each by its announce policy.",
         Verb::kHostResume, "  xlbctl host resume\n");

    CLI::App* vip = app.add_subcommand("vip", "List, add, change or delete VIPs.");
    vip->require_subcommand(1);
    add_common(vip, raw);
    vip->footer(
        "Examples:\n"
        "  xlbctl vip list\n"
        "  xlbctl vip add 198.51.100.10:80/tcp --hash 5tuple --ring-size 65537\n"
        "  xlbctl vip set 198.51.100.10:80/tcp --health-check.type tcp\n"
        "  xlbctl vip del 198.51.100.10:80/tcp\n");
    CLI::App* vip_list = leaf(cli, vip, "list",
                              "Every VIP: name, hash mode, conntrack, ring size, panic threshold,\n"
                              "healthy/total backends, epoch and whether its table is live.",
                              Verb::kVipList,
                              "  xlbctl vip list\n"
                              "  xlbctl vip list -q          # keys only, one a line\n"
                              "  xlbctl vip list --json\n");
    vip_list->add_flag("-q,--quiet", raw.quiet, "print only the VIP keys, one a line");

    CLI::App* vip_add = leaf(
        cli, vip, "add",
        "Add a VIP (persisted: it survives an agent restart). Every per-VIP key of\n"
        "the configuration file is an option, named after its path (docs/config.md);\n"
        "those not given take the file's defaults (no health check: its backends are\n"
        "never probed and show as unchecked).",
        Verb::kVipAdd,
        "  xlbctl vip add 10.0.0.10:80/tcp --hash 5tuple --ring-size 65537\n"
        "  xlbctl vip add 198.51.100.10:443 --name web --backend 203.0.113.11 --backend "
        "203.0.113.12=50\n"
        "  xlbctl vip add '[2001:db8::10]:53/udp' --hash source --no-conntrack\n"
        "  xlbctl vip add 198.51.100.20:0/tcp --panic-threshold 0   # every port, never panic\n"
        "  xlbctl vip add 198.51.100.10:80 --health-check.type http --health-check.path /healthz "
        "--slow-start.window 10s\n"
        "  xlbctl vip add 198.51.100.10:80 --announce never --conntrack-idle-timeout 10m "
        "--dry-run\n");
    add_vip_arg(vip_add, raw);
    vip_add->add_option("--name", raw.name, "label for logs and metrics (A-Z a-z 0-9 . _ -)");
    vip_add
        ->add_option("--hash", raw.hash,
                     "5tuple (default: addresses and ports) or source (client address "
                     "only: one client, one backend)")
        ->type_name("MODE");
    vip_add
        ->add_option("--ring-size", raw.ring_size,
                     "Maglev table slots, a prime >= 10 per backend (default 65537)")
        ->type_name("N");
    vip_add->add_flag("--no-conntrack", raw.no_conntrack,
                      "skip the connection table (stateless UDP): flows follow the table");
    vip_add
        ->add_option("--panic-threshold", raw.panic_threshold,
                     "below this healthy share of weight, ignore health (default 0.5; 0 = "
                     "never)")
        ->type_name("0-1");
    vip_add
        ->add_option("-b,--backend", raw.backends,
                     "a backend to start with, ADDR or ADDR=WEIGHT (repeatable)")
        ->type_name("ADDR[=W]");

    add_dry_run_flag_vip(vip_add, raw, "add");
    add_vip_settings(vip_add, raw, /*with_dedicated=*/false);

    CLI::App* vip_set =
        leaf(cli, vip, "set",
             "Change settings of a VIP (persisted): only those given; its backends and\n"
             "other settings stay. Every per-VIP key of the configuration file is an\n"
             "option, named after its path (docs/config.md). A change that moves\n"
             "established flows (hash, ring_size) is refused unless --allow-disruptive\n"
             "confirms it, as for reloads.",
             Verb::kVipSet,
             "  xlbctl vip set 198.51.100.10:80/tcp --health-check.type http --health-check.path "
             "/healthz\n"
             "  xlbctl vip set 198.51.100.10:80/tcp --slow-start.window 10s --announce always\n"
             "  xlbctl vip set 198.51.100.10:80/tcp --conntrack-idle-timeout 5m --dry-run\n"
             "  xlbctl vip set 198.51.100.10:80/tcp --ring-size 131071 --allow-disruptive\n");
    add_vip_arg(vip_set, raw);
    add_dry_run_flag_vip(vip_set, raw, "set");
    vip_set->add_flag("--allow-disruptive", raw.allow_disruptive,
                      "apply a change of hash or ring_size, which moves established flows of a "
                      "VIP without conntrack and flows other LB hosts receive");
    add_vip_settings(vip_set, raw, /*with_dedicated=*/true);

    CLI::App* vip_del = leaf(cli, vip, "del",
                             "Delete a VIP: its table and entries leave the data plane, its "
                             "flows are dropped.",
                             Verb::kVipDel, "  xlbctl vip del 198.51.100.10:80/tcp\n");
    add_vip_arg(vip_del, raw);

    CLI::App* backend = app.add_subcommand(
        "backend",
        "List a VIP's backends; add, delete, reweight, drain, enable or disable one; show one's "
        "health history.");
    backend->require_subcommand(1);
    add_common(backend, raw);
    backend->footer(
        "Examples:\n"
        "  xlbctl backend list 198.51.100.10:80/tcp\n"
        "  xlbctl backend add 198.51.100.10:80/tcp 203.0.113.14 --weight 50\n"
        "  xlbctl backend set 198.51.100.10:80/tcp 203.0.113.14 --weight 200\n"
        "  xlbctl backend drain 198.51.100.10:80/tcp 203.0.113.11\n"
        "  xlbctl backend enable 198.51.100.10:80/tcp 203.0.113.11\n"
        "  xlbctl backend del 198.51.100.10:80/tcp 203.0.113.14\n"
        "  xlbctl backend add 198.51.100.10:80/tcp 203.0.113.15 --dry-run   # what would move\n"
        "  xlbctl backend history 198.51.100.10:80/tcp 203.0.113.11\n");
    CLI::App* b_list = leaf(cli, backend, "list",
                            "A VIP's backends (without VIP: every VIP's): state, health and last\n"
                            "failure, configured and effective weight, table slots and their\n"
                            "share, packets and bytes.",
                            Verb::kBackendList,
                            "  xlbctl backend list 198.51.100.10:80/tcp\n"
                            "  xlbctl backend list                      # every VIP\n"
                            "  xlbctl backend list '[2001:db8::10]:443/tcp' --json\n"
                            "  xlbctl backend list 198.51.100.10:80 -q   # addresses only\n");
    b_list->add_option("VIP", raw.vip, "ADDRESS:PORT[/tcp|/udp]; none: every VIP")->type_name("");
    b_list->add_flag("-q,--quiet", raw.quiet, "print only the addresses, one a line");

    CLI::App* b_add =
        backend_leaf(cli, backend, "add",
                     "Add a backend to a VIP (active; persisted). It takes new flows once\n"
                     "the table is published (and, with a health check, once healthy).",
                     Verb::kBackendAdd,
                     "  xlbctl backend add 198.51.100.10:80/tcp 203.0.113.14\n"
                     "  xlbctl backend add 198.51.100.10:80/tcp 203.0.113.14 --weight 50\n"
                     "  xlbctl backend add '[2001:db8::10]:443/tcp' 2001:db8:b::14\n");
    b_add->add_option("--weight", raw.weight, "relative weight 0-10000 (default 100)")
        ->type_name("W");
    b_add
        ->add_option("--hash-key", raw.hash_key,
                     "stable identity for Maglev (default: the address)")
        ->type_name("KEY");

    backend_leaf(cli, backend, "del",
                 "Remove a backend: it leaves the table and its flows move to the\n"
                 "others. Drain it first to let its connections finish.",
                 Verb::kBackendDel, "  xlbctl backend del 198.51.100.10:80/tcp 203.0.113.14\n");

    CLI::App* b_set =
        backend_leaf(cli, backend, "set", "Change a backend's weight.", Verb::kBackendSet,
                     "  xlbctl backend set 198.51.100.10:80/tcp 203.0.113.14 --weight 200\n"
                     "  xlbctl backend set 198.51.100.10:80/tcp 203.0.113.14 --weight 0  "
                     " # no new flows\n");
    b_set->add_option("--weight", raw.weight, "relative weight 0-10000")
        ->type_name("W")
        ->required();

    CLI::App* b_drain = backend_leaf(
        cli, backend, "drain",
        "Drain a backend: no new flows; established flows stay (through\n"
        "the connection table) until they end. With --wait, then shows its active\n"
        "connections (entries seen within --active-within) falling, one line per\n"
        "change, and exits 0 when none are left, or 1 when --wait-timeout passes first.",
        Verb::kBackendDrain,
        "  xlbctl backend drain 198.51.100.10:80/tcp 203.0.113.11\n"
        "  xlbctl backend drain 198.51.100.10:80/tcp 203.0.113.11 --wait\n"
        "  xlbctl backend drain 198.51.100.10:80/tcp 203.0.113.11 --wait --wait-timeout 30m "
        "--active-within 1m\n"
        "  xlbctl backend drain 198.51.100.10:80/tcp 203.0.113.11 --wait && "
        "xlbctl backend del 198.51.100.10:80/tcp 203.0.113.11\n");
    b_drain->add_flag("--wait", raw.wait,
                      "then wait until the backend has no active connection (asked every "
                      "second)");
    b_drain
        ->add_option("--active-within", raw.active_within,
                     "with --wait: a connection is active when its entry saw a packet within DUR "
                     "(default 10s)")
        ->type_name("DUR");
    b_drain
        ->add_option("--wait-timeout", raw.wait_timeout,
                     "with --wait: give up waiting after SECS or DUR, 1s-24h (default 5m)")
        ->type_name("SECS|DUR");

    backend_leaf(cli, backend, "enable", "Make a drained or disabled backend active again.",
                 Verb::kBackendEnable,
                 "  xlbctl backend enable 198.51.100.10:80/tcp 203.0.113.11\n");

    backend_leaf(cli, backend, "disable",
                 "Disable a backend: it leaves the table and the data plane;\n"
                 "its established flows move to other backends.",
                 Verb::kBackendDisable,
                 "  xlbctl backend disable 198.51.100.10:80/tcp 203.0.113.11\n");

    CLI::App* b_history =
        leaf(cli, backend, "history",
             "A backend's last health verdict changes, oldest first: when (UTC), from and to\n"
             "which verdict, and why. The agent keeps health_history of them (default 20)\n"
             "in memory: a restarted agent starts with none.",
             Verb::kBackendHistory,
             "  xlbctl backend history 198.51.100.10:80/tcp 203.0.113.11\n"
             "  xlbctl backend history '[2001:db8::10]:443/tcp' 2001:db8:b::11 --json\n");
    add_vip_arg(b_history, raw);
    add_addr_arg(b_history, raw);

    CLI::App* ct =
        app.add_subcommand("conntrack",
                           "Count, list or flush the connection table's entries (per VIP, backend, "
                           "client).");
    ct->require_subcommand(1);
    add_common(ct, raw);
    ct->footer(
        "Examples:\n"
        "  xlbctl conntrack count\n"
        "  xlbctl conntrack count --vip 198.51.100.10:80/tcp --active-within 30s\n"
        "  xlbctl conntrack list --backend 203.0.113.11 --limit 20\n"
        "  xlbctl conntrack flush --stale --dry-run\n");
    auto add_vip_selector = [&](CLI::App* app_) {
        app_->add_option("--vip", raw.vip, "only this VIP's entries (ADDRESS:PORT[/tcp|/udp])")
            ->type_name("VIP");
    };
    auto add_backend_selector = [&](CLI::App* app_) {
        app_->add_option("--backend", raw.ct_backend,
                         "only entries pointing at this backend address (of any VIP, unless "
                         "--vip)")
            ->type_name("ADDR");
    };
    auto add_client_selector = [&](CLI::App* app_) {
        app_->add_option("--client", raw.client,
                         "only entries of clients in this prefix, or of this one address")
            ->type_name("CIDR");
    };

    CLI::App* ct_count =
        leaf(cli, ct, "count",
             "Count the table's entries per VIP and per backend (stale: the entry's backend\n"
             "generation is no longer live; such a flow is rebalanced on its next packet),\n"
             "with the table's capacity, how full it is, and how long the scan took.",
             Verb::kConntrackCount,
             "  xlbctl conntrack count\n"
             "  xlbctl conntrack count --vip 198.51.100.10:80/tcp\n"
             "  xlbctl conntrack count --backend 203.0.113.11 --active-within 30s\n"
             "  xlbctl conntrack count --json\n");
    add_vip_selector(ct_count);
    add_backend_selector(ct_count);
    ct_count
        ->add_option("--active-within", raw.active_within,
                     "count only entries that saw a packet within DUR, e.g. 30s")
        ->type_name("DUR");

    CLI::App* ct_list =
        leaf(cli, ct, "list",
             "List entries: client, VIP, backend, state (valid, or stale: its backend\n"
             "generation is no longer live), idle time (since the entry last saw a\n"
             "packet, to about a second) and age. Says when more entries matched than\n"
             "--limit shows.",
             Verb::kConntrackList,
             "  xlbctl conntrack list\n"
             "  xlbctl conntrack list --vip 198.51.100.10:80/tcp --backend 203.0.113.11\n"
             "  xlbctl conntrack list --client 192.0.2.0/24 --limit 1000\n"
             "  xlbctl conntrack list --client 2001:db8:c::7 --json\n");
    add_vip_selector(ct_list);
    add_backend_selector(ct_list);
    add_client_selector(ct_list);
    ct_list
        ->add_option("--limit", raw.limit,
                     "show at most N entries, 1-" + std::to_string(kMaxListLimit) + " (default " +
                         std::to_string(kDefaultListLimit) + ")")
        ->type_name("N");

    CLI::App* ct_flush =
        leaf(cli, ct, "flush",
             "Delete the entries that match every selector given (at least one: --vip,\n"
             "--backend, --client or --stale). Their flows are then balanced by the\n"
             "table again: a flow whose backend is no longer its table owner moves (TCP\n"
             "connections to it are reset). Try --dry-run first.",
             Verb::kConntrackFlush,
             "  xlbctl conntrack flush --stale\n"
             "  xlbctl conntrack flush --backend 203.0.113.11 --dry-run\n"
             "  xlbctl conntrack flush --vip 198.51.100.10:80/tcp --client 192.0.2.0/24\n");
    add_vip_selector(ct_flush);
    add_backend_selector(ct_flush);
    add_client_selector(ct_flush);
    ct_flush->add_flag("--stale", raw.stale,
                       "entries whose backend generation is no longer live (a removed or "
                       "re-added backend)");
    ct_flush->add_flag("--dry-run", raw.dry_run,
                       "delete nothing: say how many entries would be deleted");

    CLI::App* cap = leaf(
        cli, &app, "capture",
        "Copy the packets the balancer handles into a pcap file, filtered in the\n"
        "kernel: by VIP, backend, client prefix and outcome. A packet sent on gives\n"
        "two records, as received and as sent (encapsulated); the link type is\n"
        "LINUX_SLL2, whose packet type says which (tcpdump shows In / Out). Stops\n"
        "after --count packets, after --duration, or on Ctrl-C; then says how many\n"
        "packets matched and how many records the ring buffer lost. Root or the\n"
        "API socket's group only (docs/capture.md).",
        Verb::kCapture,
        "  xlbctl capture --vip 198.51.100.10:80/tcp --outcome drop --count 100 -w drops.pcap\n"
        "  xlbctl capture --backend 203.0.113.11 --duration 10s -w - | tcpdump -nr -\n"
        "  xlbctl capture --src 192.0.2.0/24 --outcome tx --snaplen 128 -w client.pcap\n");
    cap->add_option("--vip", raw.vip, "only this VIP's packets (ADDRESS:PORT[/tcp|/udp])")
        ->type_name("VIP");
    cap->add_option("--backend", raw.ct_backend, "only packets sent to this backend address")
        ->type_name("ADDR");
    cap->add_option("--src", raw.client, "only packets from clients in this prefix (or address)")
        ->type_name("CIDR");
    cap->add_option("--outcome", raw.outcomes,
                    "only these outcomes: tx, pass, drop, all, or an outcome's name as in "
                    "`xlbctl stats` (drop_no_backend, ...); repeatable (default all)")
        ->type_name("OUTCOME");
    cap->add_option("--count", raw.count, "stop after N packets")->type_name("N");
    cap->add_option("--duration", raw.duration, "stop after DUR, e.g. 30s")->type_name("DUR");
    cap->add_option("--snaplen", raw.snaplen,
                    "keep at most N bytes of each packet, 1-" + std::to_string(kMaxSnaplen) +
                        " (default " + std::to_string(kMaxSnaplen) + ")")
        ->type_name("N");
    cap->add_option("-w,--write", raw.write_to,
                    "the pcap file to write (mode 0600), or - for standard output")
        ->type_name("FILE")
        ->required();

    CLI::App* top =
        leaf(cli, &app, "top",
             "Every VIP and its backends on one screen, refreshed every SECS: admin state,\n"
             "health, weight and effective weight, share of the table's slots, and rates\n"
             "(packets/s, throughput, new flows/s and drops/s per VIP; packets/s and\n"
             "throughput per backend) over the last interval. Fits the terminal (the\n"
             "rows that do not fit are counted). --json: one snapshot after one interval\n"
             "(with --count N, N lines of JSON).",
             Verb::kTop,
             "  xlbctl top\n"
             "  xlbctl top --interval 5\n"
             "  xlbctl top --json\n");
    top->add_option("-i,--interval", raw.watch, "seconds between refreshes, 0.1-3600 (default 1)")
        ->type_name("SECS");
    top->add_option("-n,--count", raw.count, "stop after N refreshes")->type_name("N");

    CLI::App* stats = leaf(cli, &app, "stats",
                           "Packet counters: per VIP packets, bytes, new flows, connection-table\n"
                           "hits and drops; globally every outcome (drops by reason). With\n"
                           "--watch, rates (pps, bit/s) refreshed in place every SECS.",
                           Verb::kStats,
                           "  xlbctl stats\n"
                           "  xlbctl stats 198.51.100.10:80/tcp\n"
                           "  xlbctl stats --watch            # every 2 s until Ctrl-C\n"
                           "  xlbctl stats 198.51.100.10:80/tcp --watch 1\n"
                           "  xlbctl stats --watch 5 --count 12 --json   # JSON Lines\n");
    stats->add_option("VIP", raw.vip, "only this VIP (ADDRESS:PORT[/tcp|/udp])")->type_name("");
    stats->add_option("--watch", raw.watch, "show rates, refreshing every SECS (default 2)")
        ->expected(0, 1)
        ->type_name("[SECS]");
    stats->add_option("-n,--count", raw.count, "with --watch: stop after N refreshes")
        ->type_name("N");

    CLI::App* table = leaf(cli, &app, "table",
                           "A VIP's live Maglev table: epoch, checksum, size, and slots per\n"
                           "backend against its target share.",
                           Verb::kTable,
                           "  xlbctl table 198.51.100.10:80/tcp\n"
                           "  xlbctl table 198.51.100.10:80/tcp --json\n");
    add_vip_arg(table, raw);

    CLI::App* lookup = leaf(cli, &app, "lookup",
                            "The backend the first packet of a new flow from --src would get:\n"
                            "the kernel's hash, seed and live table. (Established flows follow\n"
                            "the connection table and may be elsewhere.)",
                            Verb::kLookup,
                            "  xlbctl lookup 198.51.100.10:80/tcp --src 192.0.2.7:40000\n"
                            "  xlbctl lookup 198.51.100.10:53 --proto udp --src 192.0.2.7:5353\n"
                            "  xlbctl lookup 198.51.100.20:0/tcp --src 192.0.2.7:40000 --dport 443"
                            "   # every-port VIP\n"
                            "  xlbctl lookup '[2001:db8::10]:443' --src '[2001:db8:c::7]:40000'\n");
    add_vip_arg(lookup, raw);
    lookup->add_option("--src", raw.src, "the client, IP:PORT or [IPv6]:PORT")
        ->type_name("IP:PORT")
        ->required();
    lookup->add_option("--proto", raw.proto, "tcp or udp (default: the VIP's)")->type_name("P");
    lookup
        ->add_option("--dport", raw.dport, "destination port; required for an every-port (:0) VIP")
        ->type_name("PORT");

    CLI::App* reload =
        leaf(cli, &app, "reload",
             "Ask the agent to re-read its configuration file. Prints what changed,\n"
             "or why nothing did (file:line:column errors) and exits 1. A change that\n"
             "moves established flows (hash_seed, a VIP's hash or ring_size) is\n"
             "refused unless --allow-disruptive confirms it.",
             Verb::kReload,
             "  xlbctl reload\n"
             "  xlbctl reload --allow-disruptive   # e.g. after changing hash_seed\n"
             "  xlbctl reload --json\n");
    reload->add_flag("--allow-disruptive", raw.allow_disruptive,
                     "apply changes that remap flows: flows of VIPs without conntrack, and flows "
                     "that other LB hosts (not yet reloaded) receive, move to other backends");

    cli.gen_seed = app.add_subcommand(
        "gen-seed",
        "Print a new random hash_seed line (from getrandom) for the configuration file.\n"
        "xlbd refuses to start without a seed, and there is no default. Every LB host\n"
        "of a fleet (behind one ECMP group) needs the same seed: make it once and copy\n"
        "the line to each host's file. Needs no agent.");
    cli.gen_seed->footer(
        "Examples:\n"
        "  xlbctl gen-seed                          # hash_seed: 0x3f6c19a2\n"
        "  xlbctl gen-seed >> /etc/xlb/xlbd.yaml    # a file that has no hash_seed line yet\n");
}

// The deepest subcommand given on the line.
CLI::App* selected(CLI::App& app) {
    CLI::App* at = &app;
    while (true) {
        auto subs = at->get_subcommands();
        if (subs.empty()) return at;
        at = subs.front();
    }
}

std::string path_of(CLI::App* app) {
    std::string path;
    for (CLI::App* at = app; at; at = at->get_parent())
        path = at->get_name() + (path.empty() ? "" : " " + path);
    return path;
}

std::string verbs_of(CLI::App* app) {
    std::vector<std::string> names;
    for (CLI::App* sub : app->get_subcommands([](CLI::App*) { return true; }))
        names.push_back(sub->get_name());
    std::string text;
    for (std::size_t i = 0; i < names.size(); ++i)
        text += (i == 0 ? "" : i + 1 == names.size() ? " or " : ", ") + names[i];
    return text;
}

ParseExit usage(std::string message) { return ParseExit{kExitUsage, "", std::move(message)}; }

using xlb::cli::closest;
using xlb::cli::option_names;

// "did you mean ..." for the first word the parser could not place at `at`:
// a verb when `at` takes verbs, an option when the word starts with '-'.
std::optional<std::string> suggestion(CLI::App* at) {
    const std::vector<std::string> left = at->remaining();
    if (left.empty()) return std::nullopt;
    const std::string& word = left.front();
    if (word.starts_with("-")) {
        const std::string flag = word.substr(0, word.find('='));
        auto near = closest(flag, option_names(at));
        if (!near) return std::nullopt;
        return "unknown option " + in_quotes(flag) + " for '" + path_of(at) + "': did you mean " +
               *near + "?";
    }
    std::vector<std::string> verbs;
    for (CLI::App* sub : at->get_subcommands([](CLI::App*) { return true; }))
        verbs.push_back(sub->get_name());
    if (verbs.empty()) return std::nullopt;
    auto near = closest(word, verbs);
    return "unknown verb " + in_quotes(word) + " after '" + path_of(at) +
           "': " + (near ? "did you mean " + *near + "?" : "expected " + verbs_of(at));
}

// Checks the arguments of the verb and fills the Command.
Checked<Command> finish(const Raw& raw, Verb verb, const GetEnv& getenv) {
    Command c;
    c.verb = verb;
    c.json = raw.json;
    c.quiet = raw.quiet;
    c.allow_disruptive = raw.allow_disruptive;
    c.peers = raw.peers;

    if (!raw.socket.empty()) {
        c.socket = raw.socket;
    } else if (const char* env = getenv ? getenv(kSocketEnv) : nullptr; env && *env) {
        c.socket = env;
    }
    if (c.socket.size() > kMaxSocketPath) {
        const std::string from = raw.socket.empty() ? std::string(kSocketEnv) : "--socket";
        return std::unexpected(from + ": found a path of " + std::to_string(c.socket.size()) +
                               " bytes, expected at most " + std::to_string(kMaxSocketPath) +
                               " (the limit of a Unix socket address), e.g. --socket " +
                               kDefaultSocket);
    }
    // --timeout bounds each request, in every verb; the drain's wait has its own bound.
    if (!raw.timeout.empty()) {
        auto t = check_time_bound("--timeout", raw.timeout, kMinTimeout, kMaxTimeout, "100ms to 1h",
                                  "10s");
        if (!t) return std::unexpected(t.error());
        c.timeout = *t;
    }
    const bool wait = verb == Verb::kBackendDrain && raw.wait;

    std::string vip_text = raw.vip;
    // stats --watch VIP: the VIP was taken for SECS.
    std::string watch = raw.watch;
    if (verb == Verb::kStats && !watch.empty() && !parse_number(watch) && vip_text.empty()) {
        vip_text = watch;
        watch.clear();
    }

    if (!vip_text.empty()) {
        auto key = check_vip_key(vip_text);
        const bool option = verb == Verb::kConntrackCount || verb == Verb::kConntrackList ||
                            verb == Verb::kConntrackFlush || verb == Verb::kCapture;
        if (!key) return std::unexpected(option ? "--vip: " + key.error().substr(5) : key.error());
        c.vip_key = *key;
    }
    const Examples ex = examples_for(c.vip_key);

    switch (verb) {
        case Verb::kBackendAdd:
        case Verb::kBackendDel:
        case Verb::kBackendSet:
        case Verb::kBackendDrain:
        case Verb::kBackendEnable:
        case Verb::kBackendDisable:
        case Verb::kBackendHistory: {
            const std::string example = std::string("xlbctl ") + verb_name(verb) + " " + ex.vip +
                                        " " + ex.backend +
                                        (verb == Verb::kBackendSet ? " --weight 50" : "");
            auto address = check_address(raw.address, "ADDR", ex);
            if (!address) return std::unexpected(address.error());
            c.backend = *address;
            if (!raw.weight.empty()) {
                auto w = check_weight(raw.weight);
                if (!w) return std::unexpected(w.error());
                c.weight = *w;
            }
            c.hash_key = raw.hash_key;
            c.dry_run = raw.dry_run;
            config::BackendSpec b;
            b.address = c.backend;
            b.weight = c.weight.value_or(config::kDefaultWeight);
            b.hash_key = c.hash_key;
            if (auto ok = check_backend(*c.vip_key, b, example); !ok)
                return std::unexpected(ok.error());
            if (verb == Verb::kBackendDrain && !raw.wait && !raw.active_within.empty())
                return std::unexpected("--active-within " + raw.active_within +
                                       " without --wait: it says which connections --wait "
                                       "waits for, e.g. " +
                                       example + " --wait --active-within 30s");
            if (verb == Verb::kBackendDrain && !raw.wait && !raw.wait_timeout.empty())
                return std::unexpected("--wait-timeout " + raw.wait_timeout +
                                       " without --wait: it bounds the wait, e.g. " + example +
                                       " --wait --wait-timeout 10m");
            if (wait) {
                if (c.dry_run)
                    return std::unexpected(
                        "--wait with --dry-run: a dry run drains nothing, so there is nothing "
                        "to wait for (drop one of them)");
                c.wait = true;
                if (!raw.wait_timeout.empty()) {
                    auto t = check_time_bound("--wait-timeout", raw.wait_timeout,
                                              std::chrono::seconds(1), kMaxDrainWait, "1s to 24h",
                                              "10m");
                    if (!t) return std::unexpected(t.error());
                    c.wait_timeout = *t;
                }
                c.active_within = kDefaultActiveWithin;
                if (!raw.active_within.empty()) {
                    auto d =
                        check_duration("--active-within", raw.active_within, "--active-within 30s");
                    if (!d) return std::unexpected(d.error());
                    c.active_within = *d;
                }
            }
            break;
        }
        case Verb::kConntrackCount:
        case Verb::kConntrackList:
        case Verb::kConntrackFlush: {
            if (auto ok = check_selectors(raw, c, ex); !ok) return std::unexpected(ok.error());
            if (!raw.active_within.empty()) {
                auto d =
                    check_duration("--active-within", raw.active_within, "--active-within 30s");
                if (!d) return std::unexpected(d.error());
                c.active_within = *d;
            }
            if (!raw.limit.empty()) {
                auto n = parse_unsigned(raw.limit);
                if (!n || *n < 1 || *n > kMaxListLimit)
                    return std::unexpected("--limit: found " + in_quotes(raw.limit) +
                                           ", expected a number of entries 1-" +
                                           std::to_string(kMaxListLimit) + ", e.g. --limit 1000");
                c.limit = static_cast<std::uint32_t>(*n);
            }
            c.ct_stale = raw.stale;
            c.dry_run = raw.dry_run;
            if (verb == Verb::kConntrackFlush && !c.vip_key && !c.ct_backend && !c.ct_client &&
                !c.ct_stale)
                return std::unexpected(
                    "conntrack flush: expected at least one selector, --vip V, --backend ADDR, "
                    "--client CIDR or --stale (deleting the whole table moves every flow whose "
                    "backend is not its table owner), e.g. xlbctl conntrack flush --stale "
                    "--dry-run");
            break;
        }
        case Verb::kTop: {
            double seconds = kDefaultTopSeconds;
            if (!raw.watch.empty()) {
                auto s =
                    check_seconds("--interval", raw.watch, kMinWatch, kMaxWatch, "--interval 2");
                if (!s) return std::unexpected(s.error());
                seconds = *s;
            }
            c.watch_seconds = seconds;
            if (raw.count_given) {
                auto n = check_count(raw.count, "refreshes", "--count 10");
                if (!n) return std::unexpected(n.error());
                c.count = *n;
            }
            break;
        }
        case Verb::kCapture: {
            if (!raw.ct_backend.empty()) {
                auto a = net::IpAddress::parse(raw.ct_backend);
                if (!a)
                    return std::unexpected("--backend: " + a.error() + ", e.g. --backend " +
                                           ex.backend);
                c.capture_backend = *a;
            }
            if (!raw.client.empty()) {
                auto p = net::Prefix::parse(raw.client);
                if (!p) return std::unexpected("--src: " + p.error() + ", e.g. --src " + ex.client);
                c.capture_src = *p;
            }
            c.outcomes = raw.outcomes;
            if (!raw.count.empty()) {
                auto n = check_count(raw.count, "packets", "--count 100");
                if (!n) return std::unexpected(n.error());
                c.count = *n;
            }
            if (!raw.duration.empty()) {
                auto d = check_duration("--duration", raw.duration, "--duration 30s");
                if (!d) return std::unexpected(d.error());
                c.capture_duration = *d;
            }
            if (!raw.snaplen.empty()) {
                auto n = parse_unsigned(raw.snaplen);
                if (!n || *n < 1 || *n > kMaxSnaplen)
                    return std::unexpected("--snaplen: found " + in_quotes(raw.snaplen) +
                                           ", expected 1-" + std::to_string(kMaxSnaplen) +
                                           " bytes, e.g. --snaplen 128");
                c.snaplen = static_cast<std::uint32_t>(*n);
            }
            c.write_to = raw.write_to;
            break;
        }
        case Verb::kVipAdd: {
            auto spec = check_vip_add(raw, *c.vip_key, ex);
            if (!spec) return std::unexpected(spec.error());
            c.spec = std::move(*spec);
            c.settings = settings_object(raw.given).dump();
            c.dry_run = raw.dry_run;
            break;
        }
        case Verb::kVipSet: {
            auto settings = check_vip_set(raw, *c.vip_key, ex);
            if (!settings) return std::unexpected(settings.error());
            c.settings = std::move(*settings);
            c.dry_run = raw.dry_run;
            break;
        }
        case Verb::kStats: {
            if (raw.watch_given) {
                double seconds = kDefaultWatchSeconds;
                if (!watch.empty()) {
                    auto s = check_seconds("--watch", watch, kMinWatch, kMaxWatch, "--watch 2");
                    if (!s) return std::unexpected(s.error());
                    seconds = *s;
                }
                c.watch_seconds = seconds;
            }
            if (raw.count_given) {
                auto n = check_count(raw.count, "refreshes", "--watch 2 --count 10");
                if (!n) return std::unexpected(n.error());
                if (!c.watch_seconds)
                    return std::unexpected("--count " + raw.count +
                                           " without --watch: --count limits the refreshes of "
                                           "--watch, e.g. xlbctl stats --watch 2 --count 10");
                c.count = *n;
            }
            break;
        }
        case Verb::kLookup: {
            config::VipKey& key = *c.vip_key;
            const bool explicit_proto = vip_text.find('/') != std::string::npos;
            if (!raw.proto.empty()) {
                auto proto = config::parse_protocol(raw.proto);
                if (!proto)
                    return std::unexpected("--proto: found " + in_quotes(raw.proto) +
                                           ", expected tcp or udp, e.g. --proto udp");
                if (explicit_proto && *proto != key.protocol)
                    return std::unexpected(
                        std::string("--proto: found ") + config::to_string(*proto) + ", but VIP " +
                        key.to_string() + " is " + config::to_string(key.protocol) +
                        "; expected --proto " + config::to_string(key.protocol) + " or no --proto");
                key.protocol = *proto;
                c.proto = *proto;
            }
            auto src = net::Endpoint::parse(raw.src);
            if (!src) return std::unexpected("--src: " + src.error());
            if (src->address.family != key.address.family)
                return std::unexpected(
                    "--src: found an IPv" + std::to_string(src->address.family) + " client " +
                    src->to_string() + " for the IPv" + std::to_string(key.address.family) +
                    " VIP " + key.to_string() + ", expected an IPv" +
                    std::to_string(key.address.family) + " address and port, e.g. --src " + ex.src);
            c.src = *src;
            if (!raw.dport.empty()) {
                auto port = parse_unsigned(raw.dport);
                if (!port || *port < 1 || *port > 65535)
                    return std::unexpected("--dport: found " + in_quotes(raw.dport) +
                                           ", expected a port 1-65535, e.g. --dport 443");
                if (key.port != 0 && *port != key.port)
                    return std::unexpected("--dport: found " + raw.dport + ", but VIP " +
                                           key.to_string() + " serves port " +
                                           std::to_string(key.port) + " only; expected --dport " +
                                           std::to_string(key.port) + " or no --dport");
                c.dport = static_cast<std::uint16_t>(*port);
            } else if (key.port == 0) {
                return std::unexpected(
                    "VIP " + key.to_string() + " serves every port: --dport is required, e.g. " +
                    "xlbctl lookup " + key.to_string() + " --src " + ex.src + " --dport 443");
            }
            break;
        }
        default: break;
    }
    if (c.vip_key) c.vip = c.vip_key->to_string();
    return c;
}

}  // namespace

ParseResult parse_command(const std::vector<std::string>& args, const GetEnv& getenv) {
    Cli cli;
    build(cli);
    std::vector<std::string> reversed(args.rbegin(), args.rend());
    try {
        cli.app.parse(reversed);
    } catch (const CLI::CallForHelp&) {
        return ParseExit{kExitOk, cli.app.help(), ""};
    } catch (const CLI::CallForAllHelp&) {
        return ParseExit{kExitOk, cli.app.help("", CLI::AppFormatMode::All), ""};
    } catch (const CLI::CallForVersion& e) {
        return ParseExit{kExitOk, std::string(e.what()) + "\n", ""};
    } catch (const CLI::ParseError& e) {
        CLI::App* at = selected(cli.app);
        if (auto hint = suggestion(at))
            return usage(*hint + " (" + path_of(at) + " --help shows usage and examples)");
        if (!cli.leaves.contains(at) &&
            at->get_subcommands([](CLI::App*) { return true; }).size() &&
            dynamic_cast<const CLI::RequiredError*>(&e))
            return usage("expected a verb after '" + path_of(at) + "': " + verbs_of(at) + " (" +
                         path_of(at) + " --help shows them with examples)");
        return usage(std::string(e.what()) + " (" + path_of(at) +
                     " --help shows usage and examples)");
    }
    CLI::App* at = selected(cli.app);
    if (at == cli.gen_seed) {
        auto seed = random_seed();
        if (!seed) return ParseExit{kExitFailed, "", "gen-seed: " + seed.error()};
        return ParseExit{kExitOk, seed_line(*seed), ""};
    }
    auto it = cli.leaves.find(at);
    if (it == cli.leaves.end())
        return usage("expected a verb after '" + path_of(at) + "': " + verbs_of(at));
    cli.raw.watch_given =
        at->get_option_no_throw("--watch") && at->get_option_no_throw("--watch")->count() > 0;
    cli.raw.count_given =
        at->get_option_no_throw("--count") && at->get_option_no_throw("--count")->count() > 0;
    // The VIP settings given, in the order of vip_settings().
    if (auto options = cli.raw.setting_options.find(at); options != cli.raw.setting_options.end())
        for (const auto& [option, path] : options->second)
            if (option->count() > 0) cli.raw.given.emplace_back(path, cli.raw.settings[path]);
    auto command = finish(cli.raw, it->second, getenv);
    if (!command) return usage(command.error());
    return *command;
}

}  // namespace xlb::xlbctl
