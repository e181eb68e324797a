// SPDX-License-Identifier: Apache-2.0
// xlbctl's command line: the verbs, their arguments, and their validation.
//
// parse_command() turns argv into a Command that is complete and valid: every
// address, port, weight and VIP key has been checked, with the same rules the
// agent applies (config::check_vip), before anything is sent. What it cannot
// check (an unknown VIP, a duplicate backend) the agent reports.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "xlb/config/model.h"
#include "xlb/net/address.h"

namespace xlb::xlbctl {

inline constexpr const char* kDefaultSocket = "/run/xlb/xlbd.sock";
inline constexpr const char* kSocketEnv = "XLB_SOCKET";
inline constexpr double kDefaultWatchSeconds = 2.0;
inline constexpr double kDefaultTopSeconds = 1.0;
inline constexpr double kDefaultTimeoutSeconds = 30.0;
// backend drain --wait: how long to wait, what counts as active, how often to ask.
inline constexpr std::chrono::minutes kDefaultDrainWait{5};
inline constexpr std::chrono::seconds kDefaultActiveWithin{10};
inline constexpr std::chrono::seconds kDrainPollInterval{1};
// conntrack list --limit: the API's default and maximum.
inline constexpr std::uint32_t kDefaultListLimit = 100;
inline constexpr std::uint32_t kMaxListLimit = 100000;
// capture --snaplen: the data path keeps at most this much of a packet
// (abi.h, XLB_CAPTURE_DATA_MAX).
inline constexpr std::uint32_t kMaxSnaplen = 2048;

// Exit codes (docs/xlbctl.md). 2 for a wrong command line, as in every xlb tool.
inline constexpr int kExitOk = 0;           // done
inline constexpr int kExitFailed = 1;       // rejected by the agent (or a wait that failed)
inline constexpr int kExitUsage = 2;        // the command line is wrong: nothing was sent
inline constexpr int kExitUnreachable = 3;  // no usable agent on the socket

// Which verb a Command is; each has its row (name, options, checks, request,
// rendering) in the verb table (verbs.h), and the last one is kTop.
enum class Verb {
    kStatus,
    kVipList,
    kVipAdd,
    kVipDel,
    kVipSet,
    kBackendList,
    kBackendAdd,
    kBackendDel,
    kBackendSet,
    kBackendDrain,
    kBackendEnable,
    kBackendDisable,
    kBackendHistory,
    kStats,
    kTable,
    kLookup,
    kReload,
    kHostDrain,
    kHostResume,
    kConntrackCount,
    kConntrackList,
    kConntrackFlush,
    kCapture,
    kFleetStatus,
    kFleetImport,
    kFleetExport,
    kFleetHistory,
    kExport,
    kDiff,
    kQuicCid,
    kQuicDecode,
    kTop,
};

// "status", "vip add", "backend drain", ... (from the verb table)
const char* verb_name(Verb verb);

struct Command {
    Verb verb = Verb::kStatus;

    // Every verb.
    std::string socket = kDefaultSocket;
    bool json = false;
    std::chrono::milliseconds timeout{static_cast<long>(kDefaultTimeoutSeconds * 1000)};

    // The VIP a verb acts on, normalised ("198.51.100.10:80/tcp"); empty for
    // status, vip list, and stats without a VIP.
    std::string vip;
    std::optional<config::VipKey> vip_key;

    // vip add: the VIP object sent to POST /v1/vips.
    config::VipSpec spec;
    // vip add, vip set: the VIP settings given as options (vip_settings.h),
    // a JSON object nested as the VIP object ("{}" when none): vip add sends
    // them with the VIP, vip set sends them alone (PATCH /v1/vip).
    std::string settings = "{}";

    // backend add|del|set|drain|enable|disable|history.
    net::IpAddress backend;
    std::optional<std::uint32_t> weight;  // add (agent default 100), set (required)
    std::string hash_key;                 // add
    // add (--cookie-acks: true), set (--cookie-acks true|false); nullopt:
    // not given (add: the agent's default, false).
    std::optional<bool> cookie_acks;
    // add, set (--server-id N; set: none clears it): outer nullopt: not
    // given; inner nullopt: cleared.
    std::optional<std::optional<std::uint64_t>> server_id;
    // --dry-run: the agent builds the table the change would give, publishes
    // nothing, and answers with the share of slots that would change owner.
    bool dry_run = false;

    // vip list -q, backend list -q: keys only, one a line.
    bool quiet = false;

    // stats --watch [SECS]; top --interval SECS (always set for top).
    std::optional<double> watch_seconds;
    // --count N: stats --watch and top stop after N refreshes, capture
    // after N packets
    std::optional<std::uint64_t> count;

    // lookup.
    net::Endpoint src;
    std::optional<std::uint16_t> dport;
    std::optional<config::Protocol> proto;

    // conntrack count|list|flush: selectors (an entry must match every one
    // given) and the VIP above (vip, vip_key) when --vip is given.
    std::optional<net::IpAddress> ct_backend;
    std::optional<net::Prefix> ct_client;
    bool ct_stale = false;                          // flush --stale
    std::optional<config::Duration> active_within;  // count; drain --wait (default 10s)
    std::optional<std::uint32_t> limit;             // list

    // backend drain --wait: poll the backend's active connections until none
    // are left or wait_timeout passes.
    bool wait = false;
    std::chrono::milliseconds wait_timeout{kDefaultDrainWait};

    // reload, vip set: confirm changes that move established flows.
    bool allow_disruptive = false;

    // capture (docs/capture.md): the selectors besides --vip, how long, and
    // where the pcap goes ("-": standard output).
    std::optional<net::IpAddress> capture_backend;
    std::optional<net::Prefix> capture_src;
    std::vector<std::string> outcomes;  // as given; the agent checks the names
    std::optional<config::Duration> capture_duration;
    std::optional<std::uint32_t> snaplen;
    std::string write_to;

    // status --peers: other LB hosts to compare with, each an API socket path
    // or a file holding a host's `xlbctl status --json`.
    std::vector<std::string> peers;

    // The fleet (--fleet, or xlbctl.yaml: docs/xlbctl.md): the write verbs
    // change its store instead of the local agent, and the fleet verbs read
    // it. nullopt: no fleet, everything goes to the agent's socket.
    std::optional<config::FleetSettings> fleet;
    std::string fleet_source;  // "--fleet" or the file it came from
    // --reason: why. Sent to the agent with every request (its audit log
    // records it with a change); a fleet's write verbs keep it in the value.
    std::string reason;
    // Write verbs with a fleet: the revision to compare the key with
    // instead of the one just read.
    std::optional<std::int64_t> if_revision;
    // host drain|resume HOST (fleet only; empty: this host).
    std::string host;
    // fleet import FILE [--replace]; fleet export -o FILE; export -o FILE;
    // diff FILE, and FILE's content, read before anything is sent.
    std::string file;
    bool replace = false;
    std::string output;
    std::string file_text;
    // fleet history VIP --diff REV1 REV2.
    std::optional<std::pair<std::int64_t, std::int64_t>> diff;

    // quic cid VIP --server-id N [--config-id C] [--nonce HEX]; quic decode
    // VIP CID; both [--key-file PATH] (docs/quic.md). Computed here from the
    // VIP's configs, which the agent sends without their keys.
    std::uint64_t quic_server_id = 0;
    std::optional<std::uint8_t> quic_config_id;
    std::optional<std::vector<std::uint8_t>> nonce;  // nullopt: random
    std::string key_file;                            // overrides the config's key_file
    std::vector<std::uint8_t> cid;                   // also lookup --cid (empty: none)
};

// --help, --version, gen-seed's line, or a usage error: what to print and the
// exit code.
struct ParseExit {
    int code = kExitOk;
    std::string out;    // help, version or gen-seed text (stdout)
    std::string error;  // one line without "xlbctl: " or newline; empty for help
};

using ParseResult = std::variant<Command, ParseExit>;
using GetEnv = std::function<const char*(const char*)>;

// args: the command line without the program name. getenv: the environment
// (XLB_SOCKET), injectable for tests.
ParseResult parse_command(const std::vector<std::string>& args, const GetEnv& getenv);

// Whether --json was asked for anywhere on the line (errors are then written
// as JSON even when the line did not parse).
bool wants_json(const std::vector<std::string>& args);

}  // namespace xlb::xlbctl
