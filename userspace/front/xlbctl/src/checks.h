// SPDX-License-Identifier: Apache-2.0
// What the verbs' checks share (src/nouns/): the arguments as typed, the
// parsers and checks of numbers, addresses, weights, durations and VIP keys,
// and the options every verb or many take. Their messages say what was
// found, what was expected, and show an example of the right form.
#pragma once

#include <CLI/CLI.hpp>
#include <chrono>
#include <cstdint>
#include <expected>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "xlb/config/config.h"
#include "xlb/xlbctl/command.h"

namespace xlb::xlbctl {

// A message for a wrong command line: exit 2, nothing sent.
template <typename T>
using Checked = std::expected<T, std::string>;

inline constexpr double kMinWatch = 0.1, kMaxWatch = 3600;
inline constexpr std::chrono::hours kMaxDrainWait{24};

// Arguments as typed, before checking.
struct Raw {
    std::string socket;
    std::string timeout;
    bool json = false;
    std::string vip, address, weight, hash_key;
    // backend add --cookie-acks (a flag); backend set --cookie-acks true|false
    bool cookie_acks_flag = false;
    std::string cookie_acks;
    // backend add --server-id N; backend set --server-id N|none
    std::string server_id;
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
    // the fleet (every verb) and the write verbs' fleet options
    std::string fleet, fleet_name, fleet_prefix, fleet_ca, fleet_cert, fleet_key, config_file;
    std::string reason, if_revision, host;
    bool fleet_given = false;
    // fleet import|export|history
    std::string file, output;
    bool replace = false;
    std::vector<std::string> diff;
    // quic cid|decode; cid: also lookup --cid
    // (--server-id is the backend verbs' raw server_id above)
    std::string config_id, nonce, key_file, cid;
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
// In the VIP's family (IPv4 without a VIP).
Examples examples_for(const std::optional<config::VipKey>& key);

// message, with " (e.g. EXAMPLE)" unless it has an example already.
std::string with_example(std::string message, const std::string& example);
std::string in_quotes(std::string_view s);

Checked<std::uint64_t> parse_unsigned(std::string_view text);
Checked<double> parse_number(std::string_view text);
// "VIP: <why>" when the key is wrong.
Checked<config::VipKey> check_vip_key(const std::string& text);
Checked<std::uint32_t> check_weight(const std::string& text);
// what: the argument's name in the message ("ADDR", "--backend").
Checked<net::IpAddress> check_address(const std::string& text, const std::string& what,
                                      const Examples& ex);
// Permissive settings: client-side checks are those of the VIP itself.
config::Settings client_settings();
// One backend checked with the agent's rules, as part of its VIP.
Checked<void> check_backend(const config::VipKey& key, const config::BackendSpec& backend,
                            const std::string& example);
Checked<double> check_seconds(const std::string& option, const std::string& text, double min,
                              double max, const std::string& example);
// --count N: 1 or more `of` (refreshes, packets).
Checked<std::uint64_t> check_count(const std::string& text, const char* of,
                                   const std::string& example);
// A duration as the configuration writes it ("30s", "5m"), above zero.
Checked<config::Duration> check_duration(const std::string& option, const std::string& text,
                                         const std::string& example);
// --timeout and --wait-timeout: seconds alone ("30", "0.5") or a duration
// as the configuration writes it ("10m"), the same form for both.
Checked<std::chrono::milliseconds> check_time_bound(
    const std::string& option, const std::string& text, std::chrono::milliseconds min,
    std::chrono::milliseconds max, const std::string& range, const std::string& example);

// The options of every verb: --socket, --json, --timeout, --reason, and the
// fleet's (--fleet, --fleet-name, --fleet-prefix, --fleet-ca, --fleet-cert,
// --fleet-key, --config-file).
void add_common(CLI::App* app, Raw& raw);
// The write verbs' options with a fleet: --if-revision, and
// --allow-disruptive unless the verb has it already (vip set).
void add_fleet_write_options(CLI::App* app, Raw& raw, bool allow_disruptive);
void add_vip_arg(CLI::App* app, Raw& raw);
void add_addr_arg(CLI::App* app, Raw& raw);
// The backend verbs that change something can be tried first.
void add_dry_run_flag(CLI::App* app, Raw& raw);
// -o FILE of the verbs that write a configuration file (export, fleet
// export), and its check.
void add_output_option(CLI::App& app, Raw& raw);
Checked<void> take_output(const Raw& raw, Command& c);

}  // namespace xlb::xlbctl
