// SPDX-License-Identifier: Apache-2.0
#include "xlb/agent/preflight.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <linux/magic.h>
#include <netdb.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "xlb/agent/instance_lock.h"
#include "xlb/api/metrics.h"
#include "xlb/api/server.h"
#include "xlb/api/state_store.h"
#include "xlb/bpf/fd.h"
#include "xlb/files/files.h"

namespace xlb::agent {
namespace {

std::string errno_text(int code) { return std::strerror(code); }

}  // namespace

bool on_bpf_filesystem(const std::string& dir) {
    // The directory itself may not exist yet: its nearest existing ancestor
    // is where it would be created.
    std::string probe = dir.empty() ? "/" : dir;
    struct statfs st {};
    while (::statfs(probe.c_str(), &st) != 0) {
        if (probe == "/" || probe == ".") return false;
        probe = files::parent_dir(probe);
    }
    return st.f_type == BPF_FS_MAGIC;
}

std::vector<std::string> check_state_file(const std::string& path) {
    std::vector<std::string> problems;
    api::StateStore store(path);
    if (auto loaded = store.load(); !loaded) return {"state_file: " + loaded.error().message()};

    std::string dir = files::parent_dir(path);
    struct stat st {};
    while (::stat(dir.c_str(), &st) != 0) {
        if (errno != ENOENT) {
            problems.push_back("state_file " + path + ": " + dir + ": " + errno_text(errno));
            return problems;
        }
        dir = files::parent_dir(dir);
    }
    if (!S_ISDIR(st.st_mode)) {
        problems.push_back("state_file " + path + ": " + dir + " is not a directory");
        return problems;
    }
    std::string probe = dir + "/.xlbd-write-check-XXXXXX";
    bpf::UniqueFd fd(::mkstemp(probe.data()));
    if (!fd) {
        problems.push_back("state_file " + path + ": cannot create a file in " + dir + ": " +
                           errno_text(errno));
        return problems;
    }
    ::unlink(probe.c_str());
    return problems;
}

std::vector<std::string> check_bindable(const std::string& listen) {
    if (auto ok = api::check_listen_address(listen); !ok)
        return {"metrics.listen: " + ok.error().message()};
    return {};
}

std::vector<std::string> check_host(const config::Settings& s) {
    std::vector<std::string> problems;
    if (auto iface = identify_interface(s.interface); !iface)
        problems.push_back(iface.error().message());
    if (!s.api_group.empty())
        if (auto gid = api::resolve_group(s.api_group); !gid)
            problems.push_back("api.group: " + gid.error().message());
    for (auto& p : check_state_file(s.state_file)) problems.push_back(std::move(p));
    return problems;
}

std::vector<std::string> check_start(const config::Settings& s) {
    std::vector<std::string> problems = check_host(s);
    if (!on_bpf_filesystem(s.pin_dir))
        problems.push_back("pin_dir " + s.pin_dir +
                           " is not on a BPF filesystem (mount -t bpf bpf /sys/fs/bpf)");
    for (auto& p : check_bindable(s.metrics_listen)) problems.push_back(std::move(p));
    return problems;
}

}  // namespace xlb::agent
