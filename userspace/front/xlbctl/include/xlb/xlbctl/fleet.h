// SPDX-License-Identifier: Apache-2.0
// xlbctl with a fleet (docs/fleet.md, "xlbctl and the fleet"): the write
// verbs change the fleet's desired values in its store with a
// compare-and-swap on each key's revision, and `xlbctl fleet` reads the
// fleet (status, export, history) or moves a file into it (import).
//
// The store is behind FleetStore (etcd in the binary, a map of versions in
// the tests); everything else here is pure: a verb applied to a value, the
// refusal texts, the status comparison, import and export, history diffs.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "xlb/config/model.h"
#include "xlb/error.h"
#include "xlb/fleet/desired.h"
#include "xlb/fleet/values.h"
#include "xlb/xlbctl/command.h"
#include "xlb/xlbctl/format.h"

namespace xlb::xlbctl {

// xlbctl's own file: a fleet: mapping with xlbd's keys (docs/xlbctl.md).
inline constexpr const char* kDefaultConfigFile = "/etc/xlb/xlbctl.yaml";
inline constexpr const char* kConfigEnv = "XLBCTL_CONFIG";

// fleet status: 0 every live host applied the newest revision and agrees;
// 1 a host lags, refused or disagrees; 2 the fleet could not be read.
inline constexpr int kExitFleetError = 2;

using StoredValue = fleet::StoredKey;

struct StoreRead {
    std::vector<StoredValue> kvs;  // in key order
    std::int64_t revision = 0;     // of the store when read
};

// One key written only if its mod_revision is still `expect_revision` (0:
// only if it does not exist).
struct StoreWrite {
    std::string key;
    std::string value;
    std::int64_t expect_revision = 0;
};

struct StoreWritten {
    bool succeeded = false;
    std::int64_t revision = 0;  // of the store after the transaction
    // When refused: the keys written as they are now (absent ones left out).
    std::vector<StoredValue> now;
};

class FleetStore {
public:
    virtual ~FleetStore() = default;
    // revision 0: the newest; otherwise the store as it was then.
    virtual Result<StoreRead> get(const std::string& key, std::int64_t revision = 0) = 0;
    virtual Result<StoreRead> get_prefix(const std::string& prefix) = 0;
    // Every write or none, in one transaction (one revision).
    virtual Result<StoreWritten> write(const std::vector<StoreWrite>& writes) = 0;
};

// --- pure parts ---

// A write verb applied to a VIP's desired value: the VIP after it (nullopt:
// deleted), a one-line summary, and the settings it changed (vip set).
struct VipApplied {
    std::optional<config::VipSpec> next;
    std::string summary;
    nlohmann::json changes = nlohmann::json::array();
};

// `current`: the VIP in the store (nullopt: absent or deleted); `others`:
// the fleet's other VIPs and `settings` its settings, for the rules across
// VIPs. The same checks as the agent's API, and a disruptive change (hash,
// ring_size) only with c.allow_disruptive. The error: why it is refused.
std::expected<VipApplied, std::string> apply_to_vip(const Command& c,
                                                    const std::optional<config::VipSpec>& current,
                                                    const std::vector<config::VipSpec>& others,
                                                    const config::Settings& settings);

// "refused: VIP 198.51.100.10:80/tcp changed since it was read (revision 41
// -> 43, by bob on ops2 at ...: "why"); nothing written; ..." `what`: "VIP
// 198.51.100.10:80/tcp"; `now`: the key as it is now (nullopt: absent).
std::string changed_since_read(const std::string& what, std::int64_t read_revision,
                               const std::optional<StoredValue>& now, bool if_revision);
// "by bob (uid 1000) on ops2 at 2026-...: "why"" from a value's written.
std::string written_text(const fleet::Written& w);
// The written of any desired value's text; nullopt when it does not decode.
std::optional<fleet::Written> written_of(const std::string& value);

// fleet status over everything under the prefix, read at one revision.
nlohmann::json fleet_status(const fleet::Layout& layout, const StoreRead& read,
                            std::chrono::system_clock::time_point now);
std::string render_fleet_status(const nlohmann::json& status, const Style& style);
// 0 or 1 (kExitOk, kExitFailed) from fleet_status's "ok".
int fleet_status_exit(const nlohmann::json& status);

// fleet import: the writes that put `file` into the store as it is now.
struct ImportPlan {
    std::vector<StoreWrite> writes;
    nlohmann::json keys = nlohmann::json::array();  // [{key, action, summary}]
    std::vector<std::string> refusals;              // non-empty: write nothing
};
ImportPlan plan_import(const fleet::Layout& layout, const config::Config& file,
                       const StoreRead& desired, bool replace, bool allow_disruptive,
                       const fleet::Written& written);

// fleet export: a file xlbd accepts standalone, from the desired values.
std::expected<std::string, std::string> export_yaml(const fleet::Layout& layout,
                                                    const StoreRead& desired);

// What changed from `before` to `after` (nullopt: absent; a tombstone's vip
// is nullopt too), field by field: "created (2 backends)", "backend
// 203.0.113.11 added (weight 100)", "ring_size 65537 -> 131071", "deleted".
std::vector<std::string> vip_diff(const std::optional<fleet::VipValue>& before,
                                  const std::optional<fleet::VipValue>& after);

// --- the run ---

struct FleetRun {
    int code = kExitOk;
    std::string out;    // stdout
    std::string error;  // stderr's line, without "xlbctl: "
};

// The command's fleet part: a write verb or a fleet verb, against `store`.
FleetRun run_fleet(const Command& c, FleetStore& store, const fleet::Written& who,
                   const Style& style, std::chrono::system_clock::time_point now);

// The settings a change is checked with besides the fleet-wide ones (both
// families have an encapsulation source: that is each host's own).
config::Settings client_fleet_settings();

// Whether a verb writes to the store when a fleet is configured.
bool fleet_write_verb(Verb verb);

// The store of the command's fleet (etcd), or why it cannot be opened.
Result<std::unique_ptr<FleetStore>> open_etcd_store(const config::FleetSettings& fleet,
                                                    std::chrono::milliseconds timeout);

// Who writes: the user (getpwuid), uid, host name, now, "xlbctl VERSION".
fleet::Written local_writer(const std::string& at);

}  // namespace xlb::xlbctl
