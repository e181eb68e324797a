// SPDX-License-Identifier: Apache-2.0
// One agent per interface. The lock is an flock on a file named after the
// interface's network namespace and ifindex (not its pin directory, API
// socket or name), so a second agent cannot get around it with other
// settings. The kernel drops the lock when the holder dies, so a restart
// after kill -9 takes it at once.
#pragma once

#include <sys/types.h>

#include <expected>
#include <string>

#include "xlb/bpf/fd.h"
#include "xlb/error.h"

namespace xlb::agent {

inline constexpr const char* kDefaultLockDir = "/run/xlb";

// Who an interface is: its network namespace (device and inode of
// /proc/self/ns/net) and its index there.
struct InterfaceIdentity {
    std::string name;
    unsigned ifindex = 0;
    dev_t netns_dev = 0;
    ino_t netns_ino = 0;
};

// The interface as seen from the caller's network namespace; an error names
// the interface when it does not exist.
Result<InterfaceIdentity> identify_interface(const std::string& name);

// "<dir>/xlbd-netns<inode>-if<index>.lock"
std::string lock_path(const std::string& dir, const InterfaceIdentity& iface);

class InstanceLock {
public:
    // Creates `dir` (0755) when missing, opens the interface's lock file and
    // takes an exclusive lock without waiting. When another process holds it
    // the error names that process ("... is served by xlbd pid 1234 ...").
    // On success the file says who holds it (pid and interface).
    static Result<InstanceLock> acquire(const InterfaceIdentity& iface,
                                        const std::string& dir = kDefaultLockDir);

    const std::string& path() const { return path_; }

private:
    InstanceLock(bpf::UniqueFd fd, std::string path) : fd_(std::move(fd)), path_(std::move(path)) {}
    // The file is never unlinked: another agent may already have it open,
    // and unlinking would let it lock an orphaned inode while a third one
    // locks a new file. A stale file without a holder is harmless.
    bpf::UniqueFd fd_;
    std::string path_;
};

}  // namespace xlb::agent
