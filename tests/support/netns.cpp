// SPDX-License-Identifier: Apache-2.0
#include "netns.h"

#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <sstream>
#include <stdexcept>

namespace xlb::test {

CommandResult run_command(const std::string& command) {
    CommandResult result;
    FILE* pipe = ::popen((command + " 2>&1").c_str(), "r");
    if (!pipe) {
        result.out = "popen: " + std::string(std::strerror(errno));
        return result;
    }
    char buf[4096];
    std::size_t n;
    while ((n = std::fread(buf, 1, sizeof(buf), pipe)) > 0) result.out.append(buf, n);
    const int status = ::pclose(pipe);
    result.rc = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    return result;
}

std::string run_command_ok(const std::string& command) {
    CommandResult r = run_command(command);
    if (r.rc != 0)
        throw std::runtime_error("`" + command + "` failed (" + std::to_string(r.rc) +
                                 "): " + r.out);
    return r.out;
}

NetnsScope::NetnsScope(const std::string& ns) {
    saved_ = ::open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC);
    if (saved_ < 0)
        throw std::runtime_error("open own netns: " + std::string(std::strerror(errno)));
    const std::string path = "/run/netns/" + ns;
    const int target = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (target < 0) {
        const int err = errno;
        ::close(saved_);
        throw std::runtime_error("open " + path + ": " + std::strerror(err));
    }
    const int rc = ::setns(target, CLONE_NEWNET);
    const int err = errno;
    ::close(target);
    if (rc != 0) {
        ::close(saved_);
        throw std::runtime_error("setns " + path + ": " + std::strerror(err));
    }
}

NetnsScope::~NetnsScope() {
    // A thread that ran on in the wrong namespace would make every later test
    // of the process pass or fail for the wrong reason.
    if (::setns(saved_, CLONE_NEWNET) != 0) {
        std::fprintf(stderr, "test: cannot return to the original netns: %s\n",
                     std::strerror(errno));
        std::abort();
    }
    ::close(saved_);
}

Netns::Netns(std::string name) : name_(std::move(name)) {
    run_command_ok("ip netns add " + name_);
    run_command_ok("ip -n " + name_ + " link set lo up");
}

Netns::~Netns() {
    // a process left inside keeps the namespace alive
    // (never this test process itself, whatever thread is where)
    run_command("for p in $(ip netns pids " + name_ + " 2>/dev/null); do [ $p = " +
                std::to_string(::getpid()) + " ] || kill -9 $p; done");
    CommandResult r = run_command("ip netns del " + name_);
    if (r.rc != 0) std::fprintf(stderr, "test: ip netns del %s: %s", name_.c_str(), r.out.c_str());
}

std::string Netns::ip(const std::string& args) const {
    return run_command_ok("ip -n " + name_ + " " + args);
}

std::string unique_netns_prefix(const std::string& base) {
    static std::atomic<unsigned> counter{0};
    return base + "-" + std::to_string(::getpid()) + "-" + std::to_string(counter++);
}

std::vector<std::string> sweep_stale_netns(const std::string& base) {
    std::vector<std::string> removed;
    const std::string head = base + "-";
    std::error_code ec;
    for (const auto& entry : std::filesystem::directory_iterator("/run/netns", ec)) {
        const std::string name = entry.path().filename().string();
        if (name.rfind(head, 0) != 0) continue;
        const std::size_t end = name.find('-', head.size());
        const std::string digits =
            name.substr(head.size(), end == std::string::npos ? end : end - head.size());
        if (digits.empty() || digits.find_first_not_of("0123456789") != std::string::npos) continue;
        const pid_t pid = static_cast<pid_t>(std::stol(digits));
        if (pid == ::getpid() || ::kill(pid, 0) == 0 || errno != ESRCH) continue;
        std::istringstream pids(run_command("ip netns pids " + name).out);
        for (pid_t p; pids >> p;)
            if (p > 1) ::kill(p, SIGKILL);
        if (run_command("ip netns del " + name).rc == 0) removed.push_back(name);
    }
    return removed;
}

}  // namespace xlb::test
