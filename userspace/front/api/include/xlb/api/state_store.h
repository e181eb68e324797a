// SPDX-License-Identifier: Apache-2.0
// The state file: what the operator changed at runtime (through the API) and
// the ids the data plane uses, so a restarted agent loses nothing.
//
//   {"version": 1,
//    "config_digest": "9f2c...",          // config_digest() of the YAML VIP list
//    "config_vips": [VipSpec JSON, ...],  // that YAML VIP list (optional on reading)
//    "vips": [VipSpec JSON, ...],         // the desired VIPs, runtime changes included
//    "epochs": {"198.51.100.10:80/tcp": 7},
//    "checksums": {"198.51.100.10:80/tcp": "5bf6441c8ac68df2"},  // the table that epoch named
//    "epochs_reserved": {"198.51.100.10:80/tcp": 22},          // no epoch above has been used
//    "ids": {"vips": [{"vip": KEY, "id": 0}],
//            "backends": [{"vip": KEY, "address": "10.0.0.1", "id": 3, "generation": 2}]}}
//
// Writes are atomic: a temporary file in the same directory, fsync, rename,
// fsync of the directory. A reader sees the old file or the new one.
//
// Epochs (docs/api.md): the reconciler writes the file through its
// EpochJournal before a table takes an epoch above epochs_reserved, so the
// file always bounds the epochs used; "checksums" and "epochs_reserved" are
// optional on reading (files written before them: nothing is proven).
//
// Start-up rule (decide_startup_vips, docs/api.md): VIP by VIP, the file's
// version when only the file changed it since the state was written (against
// "config_vips"), the runtime version, reported, when only the API changed
// it, and a conflict when both did: the start refuses unless the operator
// chose a side (xlbd --prefer file|runtime). Never silently reverted. Ids
// and epochs are restored either way.
//
// Threads: load() at start-up; everything that writes (save, save_current,
// set_config_vips) runs on the control thread (inside ControlLoop tasks),
// which serialises writers. An internal mutex makes misuse harmless.
#pragma once

#include <cstdint>
#include <expected>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "xlb/config/model.h"
#include "xlb/config/vip_merge.h"
#include "xlb/control/registry.h"
#include "xlb/error.h"

namespace xlb::control {
class Reconciler;
}

namespace xlb::api {

inline constexpr int kStateFileVersion = 1;

struct StateFile {
    int version = kStateFileVersion;
    std::string config_digest;
    // The configuration file's VIPs that config_digest was taken of: the base
    // of the start-up merge. Absent in files written before it was recorded.
    std::optional<std::vector<config::VipSpec>> config_vips;
    std::vector<config::VipSpec> vips;
    std::map<std::string, std::uint64_t> epochs;                 // by VIP key
    std::map<std::string, std::uint64_t> checksums;              // of the table each epoch named
    std::map<std::string, std::uint64_t> epochs_reserved;        // bound of the epochs used
    std::vector<std::pair<std::string, std::uint32_t>> vip_ids;  // (VIP key, id)
    std::vector<control::BackendAssignment> backend_ids;
};

// Canonical JSON text of a state (stable key order, 2-space indent).
std::string encode_state(const StateFile& state);
// The error names what is wrong ("vips[0].port: found ..., expected ...").
Result<StateFile> decode_state(std::string_view text);

// 16 hex digits: FNV-1a 64 of the canonical JSON of the VIPs, sorted by key.
// Order of VIPs in the file does not matter; any other change does.
std::string config_digest(const std::vector<config::VipSpec>& vips);

// What the agent runs with after a start.
struct StartupDecision {
    // kState: the file is the one the state was written against; kMerged:
    // it changed since, and the VIPs are merged one by one.
    enum class Source { kConfig, kState, kMerged };
    Source source = Source::kConfig;
    std::vector<config::VipSpec> vips;
    // A runtime version was dropped (--prefer file): move the state file
    // aside (StateStore::backup) before the first save.
    bool backup_state = false;
    // For the log: runtime changes kept, and conflicts settled by --prefer.
    std::vector<std::string> warnings;
    // Conflicts no --prefer settled, one line per VIP and field, e.g. "VIP
    // 198.51.100.10:80/tcp backend 203.0.113.11: state drain at runtime,
    // active in the file". Non-empty: the start must refuse (startup_refusal)
    // and `vips` is not to be used.
    std::vector<std::string> conflicts;
};
// The start-up rule (top of this file). Pure: reads nothing, writes nothing.
StartupDecision decide_startup_vips(const std::vector<config::VipSpec>& config_vips,
                                    const std::optional<StateFile>& state,
                                    config::Prefer prefer = config::Prefer::kNone);
// The error of a start that refuses over decision.conflicts: how many, and
// how to choose. The caller shows the conflicts themselves, one per line.
Error startup_refusal(const StartupDecision& decision, const std::string& state_path);

// The reconciler's current desired state, ids and epochs (control thread).
StateFile snapshot_state(control::Reconciler& reconciler, const std::string& config_digest);
// Restores ids and epochs into a reconciler that has not allocated any yet
// (before its first set_vips). Returns what had to be skipped, for the log.
std::vector<std::string> restore_ids_and_epochs(control::Reconciler& reconciler,
                                                const StateFile& state);

class StateStore {
public:
    explicit StateStore(std::string path);
    // The configuration file's VIPs the state is written against.
    StateStore(std::string path, std::vector<config::VipSpec> config_vips);

    const std::string& path() const { return path_; }

    // nullopt: there is no state file (first start). An error names the path
    // and what is wrong; never silently ignored: the caller decides.
    Result<std::optional<StateFile>> load() const;

    // Atomic replace; creates the directory (0755) if needed. The error names
    // the path, the step and the errno text.
    Result<void> save(const StateFile& state) const;

    // snapshot_state(reconciler, config_digest()) with the file's VIPs
    // (config_vips). Control thread only.
    StateFile snapshot(control::Reconciler& reconciler) const;
    // snapshot then save: what the API does around a change and what the
    // agent calls after publishes or at shutdown to keep epochs and ids
    // current. Control thread only.
    Result<void> save_current(control::Reconciler& reconciler) const;

    // Renames the file to "<path>.bak-YYYYMMDDTHHMMSSZ"; returns the new path
    // (empty when there was no file).
    Result<std::string> backup() const;

    // The configuration file's VIP list the state is written against, and
    // its digest (set at start-up and on SIGHUP, on the control thread).
    void set_config_vips(std::vector<config::VipSpec> vips);
    std::string config_digest() const;

private:
    std::string path_;
    mutable std::mutex mu_;
    std::optional<std::vector<config::VipSpec>> config_vips_;
    std::string config_digest_;
};

}  // namespace xlb::api
