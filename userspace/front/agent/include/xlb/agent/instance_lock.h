// SPDX-License-Identifier: Apache-2.0
// One agent per interface. The lock is an abstract Unix socket name derived
// from the interface's network namespace and ifindex (not its pin directory,
// API socket or name), so a second agent cannot get around it with other
// settings. An abstract name is no file: no cleanup of /run or rm can remove
// it, and the kernel frees it when the holder dies, so a restart after
// kill -9 takes it at once. A file in /run/xlb says which pid holds it, for
// the error a second agent prints; losing that file loses only the pid.
#pragma once

#include <sys/types.h>

#include <expected>
#include <string>

#include "xlb/bpf/fd.h"
#include "xlb/error.h"

namespace xlb::agent {

inline constexpr const char* kDefaultLockDir = "/run/xlb";
inline constexpr const char* kDefaultLockScope = "xlbd";

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

// "<dir>/xlbd-netns<inode>-if<index>.lock": who holds the lock.
std::string lock_path(const std::string& dir, const InterfaceIdentity& iface);
// "<scope>/netns<inode>/if<index>": the abstract socket name that is the lock
// (shown with a leading @, as ss -x shows it).
std::string lock_socket_name(const std::string& scope, const InterfaceIdentity& iface);

class InstanceLock {
public:
    struct Place {
        std::string dir = kDefaultLockDir;      // of the file naming the holder
        std::string scope = kDefaultLockScope;  // first part of the socket name
    };
    // Binds the interface's lock socket name. When another process holds it
    // the error names that process ("... is served by xlbd pid 1234 ...")
    // as far as the holder's file still says. On success writes that file
    // (creating `dir`, 0755).
    static Result<InstanceLock> acquire(const InterfaceIdentity& iface, const Place& place);
    static Result<InstanceLock> acquire(const InterfaceIdentity& iface) {
        return acquire(iface, Place{});
    }

    const std::string& name() const { return name_; }
    const std::string& path() const { return path_; }

private:
    InstanceLock(bpf::UniqueFd socket, std::string name, std::string path)
        : socket_(std::move(socket)), name_(std::move(name)), path_(std::move(path)) {}
    // The file is never unlinked by its holder: a stale file is harmless (the
    // pid it names is checked), and it is only ever read for a message.
    bpf::UniqueFd socket_;
    std::string name_;
    std::string path_;
};

}  // namespace xlb::agent
