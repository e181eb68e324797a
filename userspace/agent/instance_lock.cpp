// SPDX-License-Identifier: Apache-2.0
#include "xlb/agent/instance_lock.h"

#include <fcntl.h>
#include <net/if.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string_view>

namespace xlb::agent {
namespace {

// The holder's pid as it wrote it, or empty when unreadable.
std::string read_holder(int fd) {
    char buf[128] = {};
    const ssize_t n = ::pread(fd, buf, sizeof(buf) - 1, 0);
    if (n <= 0) return {};
    std::string_view text(buf, static_cast<std::size_t>(n));
    const auto end = text.find_first_not_of("0123456789");
    return std::string(text.substr(0, end));
}

}  // namespace

Result<InterfaceIdentity> identify_interface(const std::string& name) {
    InterfaceIdentity id;
    id.name = name;
    id.ifindex = ::if_nametoindex(name.c_str());
    if (id.ifindex == 0) {
        const int err = errno;
        if (err == ENODEV || err == ENXIO)
            return fail("interface " + name + ": no such interface in this network namespace",
                        "ip link show lists them");
        return fail_on(err, "look up interface", name);
    }
    struct stat st {};
    if (::stat("/proc/self/ns/net", &st) != 0) return fail_on(errno, "stat", "/proc/self/ns/net");
    id.netns_dev = st.st_dev;
    id.netns_ino = st.st_ino;
    return id;
}

std::string lock_path(const std::string& dir, const InterfaceIdentity& iface) {
    return dir + "/xlbd-netns" + std::to_string(iface.netns_ino) + "-if" +
           std::to_string(iface.ifindex) + ".lock";
}

Result<InstanceLock> InstanceLock::acquire(const InterfaceIdentity& iface, const std::string& dir) {
    if (::mkdir(dir.c_str(), 0755) != 0 && errno != EEXIST)
        return fail_on(errno, "create lock directory", dir);
    std::string path = lock_path(dir, iface);
    bpf::UniqueFd fd(::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0644));
    if (!fd) return fail_on(errno, "open lock file", path);
    if (::flock(fd.get(), LOCK_EX | LOCK_NB) != 0) {
        const int err = errno;
        if (err != EWOULDBLOCK) return fail_on(err, "lock", path);
        const std::string holder = read_holder(fd.get());
        return fail("interface " + iface.name + " is already served by xlbd" +
                        (holder.empty() ? std::string() : " pid " + holder) + " (lock " + path +
                        ")",
                    "stop that agent first: one agent per interface");
    }
    const std::string text = std::to_string(::getpid()) + "\n" + iface.name + "\n";
    if (::ftruncate(fd.get(), 0) != 0 ||
        ::pwrite(fd.get(), text.data(), text.size(), 0) != static_cast<ssize_t>(text.size()))
        return fail_on(errno, "write lock file", path);
    return InstanceLock(std::move(fd), std::move(path));
}

}  // namespace xlb::agent
