// SPDX-License-Identifier: Apache-2.0
// Network namespaces for tests: a bare named namespace owned by an object that
// removes it (killing what still runs inside) whatever the test did, the sweep
// of those left by killed runs, a scope that moves the calling thread into a
// namespace and back, and in_netns() to run a function there on a fresh
// thread. Shell commands run through run_command()/run_command_ok().
//
// Netns is one of the two places where tests create namespaces; the other is
// the lab (scripts/lab.sh, driven through lab_driver.h), for every test that
// needs the lab's topology. Tests that need an empty namespace use Netns.
#pragma once

#include <future>
#include <string>
#include <vector>

namespace xlb::test {

struct CommandResult {
    int rc = -1;      // exit status, or -1 when it did not exit normally
    std::string out;  // stdout and stderr together
};
CommandResult run_command(const std::string& command);
// run_command(), throwing std::runtime_error (with command and output) on failure.
std::string run_command_ok(const std::string& command);

// Moves the calling thread into the named network namespace (/run/netns/NAME)
// and back to the one it was in when destroyed (aborting the process if it
// cannot). Throws std::runtime_error when it cannot enter.
class NetnsScope {
public:
    explicit NetnsScope(const std::string& ns);
    ~NetnsScope();
    NetnsScope(const NetnsScope&) = delete;
    NetnsScope& operator=(const NetnsScope&) = delete;

private:
    int saved_ = -1;
};

// Runs fn on a fresh thread inside namespace ns and returns its result
// (exceptions travel back too). The caller's thread never changes namespace.
template <typename F>
auto in_netns(const std::string& ns, F&& fn) -> decltype(fn()) {
    return std::async(std::launch::async,
                      [&ns, &fn]() -> decltype(fn()) {
                          NetnsScope scope(ns);
                          return fn();
                      })
        .get();
}

// A named network namespace (`ip netns add`), removed on destruction after
// the processes left in it are killed. Never throws from the destructor.
class Netns {
public:
    // Creates it; throws std::runtime_error when `ip netns add` fails.
    explicit Netns(std::string name);
    ~Netns();
    Netns(const Netns&) = delete;
    Netns& operator=(const Netns&) = delete;

    const std::string& name() const { return name_; }
    // `ip -n NAME ARGS`, throwing on failure.
    std::string ip(const std::string& args) const;

private:
    std::string name_;
};

// A prefix unique to this process and call: "<base>-<pid>-<n>".
std::string unique_netns_prefix(const std::string& base);

// Removes the namespaces named "<base>-<pid>-..." whose <pid> is gone (left by
// a run killed before its destructors ran), killing what runs inside. Returns
// their names.
std::vector<std::string> sweep_stale_netns(const std::string& base);

}  // namespace xlb::test
