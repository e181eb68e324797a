// SPDX-License-Identifier: Apache-2.0
// The fleet's keys in its store and what each one holds (docs/fleet.md).
//
//   <prefix>desired/global          GlobalValue: the fleet-wide settings
//   <prefix>desired/vips/<vip key>  VipValue: one VIP and its backends
//   <prefix>desired/hosts/<host>    DrainValue: an operator's drain of a host
//   <prefix>hosts/<host>            HostRecord: what a host applied (its agent
//                                   writes it under a lease)
//   <prefix>publish/<host>          PublishState: the tables it prepared and
//                                   runs (under the same lease; small, for the
//                                   two-phase publish)
//
// Every value is a JSON object with "format": kFormat. A reader meets an
// unknown format or an unknown field as an error, never as a guess: a new
// layout is a new format number, which older agents refuse to apply.
// Pure: no I/O; the agent and xlbctl move the text.
#pragma once

#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "xlb/config/model.h"
#include "xlb/error.h"
#include "xlb/fleet/consensus.h"

namespace xlb::fleet {

inline constexpr int kFormat = 1;

struct Layout {
    std::string prefix;  // ends with '/': "/xlb/<fleet>/"

    std::string desired() const { return prefix + "desired/"; }
    std::string global() const { return prefix + "desired/global"; }
    std::string vips() const { return prefix + "desired/vips/"; }
    std::string vip(const std::string& vip_key) const { return vips() + vip_key; }
    std::string drains() const { return prefix + "desired/hosts/"; }
    std::string drain(const std::string& host) const { return drains() + host; }
    std::string hosts() const { return prefix + "hosts/"; }
    std::string host(const std::string& name) const { return hosts() + name; }
    std::string publishes() const { return prefix + "publish/"; }
    std::string publish(const std::string& name) const { return publishes() + name; }
};

// Who wrote a desired value, when and why (xlbctl fills it in).
struct Written {
    std::string by;  // user name
    std::uint32_t uid = 0;
    std::string host;    // where the writer ran
    std::string at;      // UTC, RFC 3339
    std::string reason;  // --reason; may be empty
    std::string tool;    // "xlbctl 0.9.0"
    bool operator==(const Written&) const = default;
};

struct GlobalValue {
    // The fleet-wide settings (config::kFleetWideKeys); the rest default.
    config::Settings settings;
    // The writer confirmed a change that moves established flows (a new
    // hash_seed): xlbctl --allow-disruptive.
    bool allow_disruptive = false;
    Written written;
};

struct VipValue {
    std::optional<config::VipSpec> vip;  // nullopt: deleted (a tombstone keeps who and why)
    bool allow_disruptive = false;       // the writer confirmed a new hash or ring_size
    Written written;
};

struct DrainValue {
    bool drained = false;
    Written written;
};

std::string encode(const GlobalValue& value);
std::string encode(const VipValue& value);
std::string encode(const DrainValue& value);
// The error says what is wrong in the value ("vip.port: found ..."), not
// which key it came from: the caller knows that.
Result<GlobalValue> decode_global(std::string_view text);
Result<VipValue> decode_vip(std::string_view text);
Result<DrainValue> decode_drain(std::string_view text);

nlohmann::json written_json(const Written& written);

// A host's report of what it runs: the same fields `GET /v1/status` shows
// per VIP, so that `xlbctl fleet status` compares hosts as `status --peers`
// does. Written by the agent, read by xlbctl.
struct HostRecord {
    std::string host;
    std::string version;               // xlbd's
    std::int64_t config_revision = 0;  // of the desired state it applied; 0: none yet
    std::string applied_at;            // UTC, ms: when it applied config_revision
    std::int64_t seen_revision = 0;    // the newest store revision it has read
    bool drained = false;
    bool store_reachable = true;
    std::string store_since;  // UTC: when the store became (un)reachable
    std::string store_error;  // why it is unreachable
    // The newest desired state it did not apply, and why (invalid data, or a
    // disruptive change nobody confirmed); nullopt when it applied the newest.
    struct Refusal {
        std::int64_t revision = 0;
        std::string reason;               // "invalid" or "disruptive"
        std::vector<std::string> errors;  // "key@revision: what"
        bool operator==(const Refusal&) const = default;
    };
    std::optional<Refusal> refused;
    std::string updated_at;  // UTC
    // Per VIP, as /v1/status has them: vip, epoch, checksum, inputs_checksum,
    // table_inputs, announcement, health_consensus, and backends [{address,
    // health, local_health, weight_factor}]; the record adds to each backend
    // the host's vote (healthy_since_ms, bias) and to each VIP when its live
    // table was published (published_at).
    nlohmann::json vips = nlohmann::json::array();
};

std::string encode(const HostRecord& record);
Result<HostRecord> decode_host(std::string_view text);

// A host's tables in the two-phase publish, per VIP: the checksum of the
// one it built and holds (prepared) and of the one live, with when it went
// live (UTC, ms). Kept apart from the record, which is large and written
// less often.
struct PublishState {
    std::map<std::string, std::string> prepared;
    struct Live {
        std::string checksum;
        std::string published_at;
        bool operator==(const Live&) const = default;
    };
    std::map<std::string, Live> live;
    bool operator==(const PublishState&) const = default;
};
std::string encode(const PublishState& state);
Result<PublishState> decode_publish(std::string_view text);

// The votes and publishes a record holds (consensus.h). Fields an older
// agent does not write read as unknown: its backends' own verdicts as
// their `health`.
HostVotes host_votes(const HostRecord& record);

// "2026-12-06T14:03:07.123Z" (or without the milliseconds) as ms since the
// Unix epoch; nullopt for anything else.
std::optional<std::int64_t> parse_utc_ms(std::string_view text);

}  // namespace xlb::fleet
