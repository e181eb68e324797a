// SPDX-License-Identifier: Apache-2.0
// Internal: pins the maps of one libbpf object while it is loaded. Used by
// LbProgram and DecapProgram; see xlb/bpf/pin.h for the contract.
//
//   auto session = PinSession::open(dir);    // mkdir 0700, bpffs check, lock
//   session->prepare(obj);                   // before load: reuse compatible pins
//   bpf_object__load(obj) (or the skeleton's __load)
//   auto report = session->commit();         // after load: pin new/replacing maps
//
// The directory is flock()ed from open() until the session is destroyed, so
// two processes loading into the same directory take turns.
#pragma once

#include <span>
#include <string>
#include <vector>

#include "xlb/bpf/error.h"
#include "xlb/bpf/fd.h"
#include "xlb/bpf/pin.h"

struct bpf_object;
struct bpf_map;

namespace xlb::bpf::detail {

class PinSession {
public:
    static Result<PinSession> open(const std::string& dir);

    PinSession(PinSession&&) noexcept = default;
    PinSession& operator=(PinSession&&) noexcept = default;
    ~PinSession() = default;

    // For every (non-internal) map of the unloaded object: reuse the pinned
    // map of the same name when compatible (bpf_map__reuse_fd), otherwise
    // remember that it must be created or replaced.
    Result<void> prepare(bpf_object* obj);

    // After a successful load: pins every map that was not reused (a replaced
    // pin is swapped by rename(), so the path never goes missing) and reports.
    Result<PinReport> commit();

    const std::string& dir() const { return dir_; }
    // How many pinned maps prepare() reused.
    std::size_t reused() const;

private:
    explicit PinSession(std::string dir, UniqueFd lock)
        : dir_(std::move(dir)), lock_(std::move(lock)) {}

    struct Plan {
        bpf_map* map = nullptr;
        MapPin pin;
    };

    std::string dir_;
    UniqueFd lock_;
    std::vector<Plan> plans_;
};

// Removes the pins named after the object's maps and `extra` (maps of older
// layouts) from dir, plus leftovers of an interrupted replacement, then dir
// itself when it is empty. A missing dir or pin is not an error.
Result<void> unpin_object_maps(bpf_object* obj, const std::string& dir,
                               std::span<const std::string> extra = {});

// Why the pinned map (fd) cannot stand in for `want`; empty when it can.
// Without max_entries, a map differing only in size counts as compatible.
std::string incompatibility(bpf_map* want, int fd, bool max_entries = true);

std::string join(const std::string& dir, const std::string& name);

}  // namespace xlb::bpf::detail
