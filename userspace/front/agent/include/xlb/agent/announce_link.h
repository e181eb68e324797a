// SPDX-License-Identifier: Apache-2.0
// Announcing VIPs through BIRD, wired to the reconciler. The control thread
// turns its VIPs' state into the announcer's input (announce_input(), pure)
// and hands it over with submit(); a thread of its own runs the Announcer,
// whose calls to BIRD may wait for seconds when BIRD is wedged, so that the
// control thread never does. The thread also runs every `tick` with the last
// input: BIRD restarted or stopped is noticed without any change here.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

#include "xlb/announce/announcer.h"
#include "xlb/api/services.h"
#include "xlb/control/reconciler.h"
#include "xlb/error.h"

namespace xlb::agent {

// The announcer's view of the VIPs: a table is live once published (epoch
// != 0); the backends that take new flows are those in the live table with
// a share of it.
announce::HostInput announce_input(const std::vector<control::VipStatus>& vips, bool drained,
                                   bool startup_complete, std::string behind = {});

// Start-up is over once every VIP had a table published, or after `patience`:
// until then withdrawals are held (a restarted agent must not withdraw what it
// is about to announce again).
class StartupGate {
public:
    StartupGate(std::chrono::steady_clock::time_point started, std::chrono::milliseconds patience)
        : started_(started), patience_(patience) {}
    bool complete(const std::vector<control::VipStatus>& vips,
                  std::chrono::steady_clock::time_point now);

private:
    std::chrono::steady_clock::time_point started_;
    std::chrono::milliseconds patience_;
    bool complete_ = false;
};

// The host's drain state in a file of its own beside the state file
// ("<state_file>.drain"), so that it outlives the agent and a change of the
// configured VIPs (which sets the state file aside) alike. Present: drained
// since the time it holds; absent: not drained.
class HostDrainFile {
public:
    explicit HostDrainFile(std::string path) : path_(std::move(path)) {}
    const std::string& path() const { return path_; }
    // A file that exists but cannot be read or understood is an error: the
    // caller decides (the agent then stays drained, the safe side in a group).
    Result<api::HostState> load() const;
    // Drained: the file written atomically; not drained: the file removed.
    Result<void> save(const api::HostState& state) const;

private:
    std::string path_;
};

class AnnounceLink {
public:
    // `refresh` is called every tick to have a fresh input submitted (the
    // agent posts to its control loop): whatever path a change took, the
    // announcements follow it within a tick.
    explicit AnnounceLink(announce::AnnouncerOptions options, std::function<void()> refresh = {},
                          std::chrono::milliseconds tick = std::chrono::seconds(1));
    ~AnnounceLink();
    AnnounceLink(const AnnounceLink&) = delete;
    AnnounceLink& operator=(const AnnounceLink&) = delete;

    void start();
    void stop();
    // The newest input wins; the thread runs the announcer with it promptly.
    // Returns the input's number, for wait_applied().
    std::uint64_t submit(announce::HostInput input);
    // Waits until the announcer has run with input `number` (or a later one),
    // so that status() tells what it did; false when `timeout` passed first
    // (BIRD may keep a run waiting for seconds).
    bool wait_applied(std::uint64_t number, std::chrono::milliseconds timeout) const;
    // A copy of the announcer's status after its last run.
    announce::AnnouncerStatus status() const;

private:
    void run();

    announce::Announcer announcer_;
    std::function<void()> refresh_;
    std::chrono::milliseconds tick_;
    mutable std::mutex mu_;
    std::condition_variable wake_;
    mutable std::condition_variable applied_cv_;
    std::uint64_t submitted_ = 0;  // inputs submitted so far
    std::uint64_t applied_ = 0;    // the number of the input of the last run
    std::optional<announce::HostInput> input_;
    bool fresh_ = false;
    bool stop_ = false;
    announce::AnnouncerStatus status_;
    std::thread thread_;
};

}  // namespace xlb::agent
