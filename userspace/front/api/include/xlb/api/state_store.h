// SPDX-License-Identifier: Apache-2.0
// The state file: what the operator changed at runtime (through the API) and
// the ids the data plane uses, so a restarted agent loses nothing.
//
//   {"version": 1,
//    "config_digest": "9f2c...",          // config_digest() of the YAML VIP list
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
// Start-up rule (decide_startup_vips, docs/api.md): the state file's VIPs win
// when it was written against the same configuration file VIP list (equal
// digests); otherwise the operator has edited the file since, the file wins,
// and the old state file is backed up. Ids and epochs are restored either way.
//
// Threads: load() at start-up; everything that writes (save, save_current,
// set_config_digest) runs on the control thread (inside ControlLoop tasks),
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
    enum class Source { kConfig, kState };
    Source source = Source::kConfig;
    std::vector<config::VipSpec> vips;
    // The state file was written for a different configuration: move it
    // aside (StateStore::backup) before the first save.
    bool backup_state = false;
    std::string warning;  // non-empty: log it
};
StartupDecision decide_startup_vips(const std::vector<config::VipSpec>& config_vips,
                                    const std::optional<StateFile>& state);

// The reconciler's current desired state, ids and epochs (control thread).
StateFile snapshot_state(control::Reconciler& reconciler, const std::string& config_digest);
// Restores ids and epochs into a reconciler that has not allocated any yet
// (before its first set_vips). Returns what had to be skipped, for the log.
std::vector<std::string> restore_ids_and_epochs(control::Reconciler& reconciler,
                                                const StateFile& state);

class StateStore {
public:
    explicit StateStore(std::string path, std::string config_digest = {});

    const std::string& path() const { return path_; }

    // nullopt: there is no state file (first start). An error names the path
    // and what is wrong; never silently ignored: the caller decides.
    Result<std::optional<StateFile>> load() const;

    // Atomic replace; creates the directory (0755) if needed. The error names
    // the path, the step and the errno text.
    Result<void> save(const StateFile& state) const;

    // snapshot_state(reconciler, config_digest()) then save: what the API
    // does around a change and what the agent calls after publishes or at
    // shutdown to keep epochs and ids current. Control thread only.
    Result<void> save_current(control::Reconciler& reconciler) const;

    // Renames the file to "<path>.bak-YYYYMMDDTHHMMSSZ"; returns the new path
    // (empty when there was no file).
    Result<std::string> backup() const;

    // The digest of the configuration file's VIP list the state is written
    // against (set at start-up and on SIGHUP, on the control thread).
    void set_config_digest(std::string digest);
    std::string config_digest() const;

private:
    std::string path_;
    mutable std::mutex mu_;
    std::string config_digest_;
};

}  // namespace xlb::api
