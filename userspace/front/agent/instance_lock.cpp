// SPDX-License-Identifier: Apache-2.0
#include "xlb/agent/instance_lock.h"

#include <fcntl.h>
#include <net/if.h>
#include <sys/file.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstddef>
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

// Who holds the interface, as its lock file says: "pid N", or why unknown.
std::string holder_from_file(const std::string& path) {
    bpf::UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW));
    if (!fd) return "whose pid is unknown (" + path + ": " + std::strerror(errno) + ")";
    const std::string pid = read_holder(fd.get());
    if (pid.empty() || ::access(("/proc/" + pid).c_str(), F_OK) != 0)
        return "whose pid is unknown (" + path + " names no running process)";
    return "pid " + pid;
}

// Writes who holds the lock into its file. Informational only (the file may
// be removed by anyone who cleans /run): the socket name is the lock.
Result<void> write_holder_file(const std::string& dir, const std::string& path,
                               const std::string& interface) {
    if (::mkdir(dir.c_str(), 0755) != 0 && errno != EEXIST)
        return fail_on(errno, "create lock directory", dir);
    bpf::UniqueFd fd(::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0644));
    if (!fd) return fail_on(errno, "open lock file", path);
    const std::string text = std::to_string(::getpid()) + "\n" + interface + "\n";
    if (::ftruncate(fd.get(), 0) != 0 ||
        ::pwrite(fd.get(), text.data(), text.size(), 0) != static_cast<ssize_t>(text.size()))
        return fail_on(errno, "write lock file", path);
    return {};
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

std::string lock_socket_name(const std::string& scope, const InterfaceIdentity& iface) {
    return scope + "/netns" + std::to_string(iface.netns_ino) + "/if" +
           std::to_string(iface.ifindex);
}

Result<InstanceLock> InstanceLock::acquire(const InterfaceIdentity& iface, const Place& place) {
    const std::string name = lock_socket_name(place.scope, iface);
    const std::string shown = "@" + name;
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    if (name.size() + 1 > sizeof(addr.sun_path))
        return fail("lock socket name " + shown + " is too long");
    // An abstract name: sun_path starts with a NUL, no file is created.
    std::memcpy(addr.sun_path + 1, name.data(), name.size());
    const auto length = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + 1 + name.size());

    bpf::UniqueFd socket(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
    if (!socket) return fail_on(errno, "create lock socket", shown);
    const std::string path = lock_path(place.dir, iface);
    if (::bind(socket.get(), reinterpret_cast<const sockaddr*>(&addr), length) != 0) {
        const int err = errno;
        if (err != EADDRINUSE) return fail_on(err, "bind lock socket", shown);
        return fail("interface " + iface.name + " is already served by xlbd " +
                        holder_from_file(path) + " (lock " + shown + ")",
                    "stop that agent first: one agent per interface");
    }
    if (auto ok = write_holder_file(place.dir, path, iface.name); !ok)
        return std::unexpected(std::move(ok.error()));
    return InstanceLock(std::move(socket), shown, path);
}

}  // namespace xlb::agent
