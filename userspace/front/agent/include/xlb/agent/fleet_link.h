// SPDX-License-Identifier: Apache-2.0
// The agent's link to its fleet's store (docs/fleet.md). One thread reads
// every key under <prefix>desired/, then watches them from the revision it
// read and hands each new revision, whole, to the agent; when the store
// stops answering it says so and tries again, and it re-reads everything
// when the revision it watched from was compacted. Another thread keeps
// this host's record (hosts/<host>) under a lease: granted, kept alive every
// third of its TTL, written again whenever the record changes, and granted
// anew if it expired meanwhile.
//
// The last desired state the agent applied is kept in a file
// (SnapshotFile), so that a start with the store unreachable serves it.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "xlb/error.h"
#include "xlb/etcd/client.h"
#include "xlb/fleet/desired.h"

namespace xlb::agent {

// Every desired key at one store revision.
struct FleetSnapshot {
    std::vector<fleet::StoredKey> keys;
    std::int64_t revision = 0;  // the store's, when it was read
};

// The snapshot the agent applied last, on disk: {"format": 1, "revision": N,
// "keys": [{"key", "value", "mod_revision"}]}, written atomically (0600: the
// values name who changed what).
class SnapshotFile {
public:
    explicit SnapshotFile(std::string path) : path_(std::move(path)) {}
    const std::string& path() const { return path_; }
    // nullopt: no file (nothing applied yet on this host).
    Result<std::optional<FleetSnapshot>> load() const;
    Result<void> save(const FleetSnapshot& snapshot) const;

private:
    std::string path_;
};

class FleetLink {
public:
    struct Options {
        fleet::Layout layout;
        std::string host;
        std::chrono::seconds lease_ttl{10};
        // Waits between attempts while the store does not answer.
        std::chrono::milliseconds retry_min{250};
        std::chrono::milliseconds retry_max{2000};
        // The agent pokes the writer after each change the record shows
        // (an applied revision, a publish, a verdict, the store's state);
        // past this without a poke it is rebuilt anyway, to see whether it
        // changed.
        std::chrono::milliseconds record_interval{10'000};
    };
    // Each new revision of the desired keys (the link's thread; it waits
    // for the call to return before it reads on).
    using OnSnapshot = std::function<void(const FleetSnapshot&)>;
    // The store answered again, or stopped answering (with why).
    using OnReachability = std::function<void(bool reachable, const std::string& error)>;
    // The host record's text as it is now (the writer's thread).
    using RecordSource = std::function<std::string()>;

    FleetLink(etcd::Client client, Options options);
    ~FleetLink();
    FleetLink(const FleetLink&) = delete;
    FleetLink& operator=(const FleetLink&) = delete;

    // One read of every desired key, on the caller's thread (the start).
    Result<FleetSnapshot> read();

    // Watches from the revision after `from`'s (what the agent runs: a read
    // at start or the persisted snapshot), keeping its keys up to date;
    // nullopt: reads everything first.
    void start_watch(std::optional<FleetSnapshot> from, OnSnapshot on_snapshot,
                     OnReachability on_reachability);
    // `publish`: the host's publish state (<prefix>publish/<host>), put by a
    // thread of its own under the same lease when poked (poke_publish): a
    // record being built or written must not delay it.
    void start_records(RecordSource source, RecordSource publish = {});
    // Watches every host record (<prefix>hosts/, this host's included): each
    // change hands all of them, whole, to `on_peers` (a record is there while
    // its host's lease holds). The desired watch reports the reachability.
    // And every host's publish state (<prefix>publish/), to `on_publishes`.
    void start_peers(OnSnapshot on_peers, OnSnapshot on_publishes);
    // Asks for the record to be rebuilt and written now (after a change).
    void poke_record();
    void poke_publish();
    void stop();

private:
    // Reads then watches every key under `prefix`, handing each new
    // revision to `deliver`; `watch` is the handle stop() ends.
    void watch_loop(const std::string& prefix, std::optional<FleetSnapshot> from,
                    const OnSnapshot& deliver, etcd::Watch& watch, bool reports);
    Result<FleetSnapshot> read_prefix(const std::string& prefix);
    void record_loop();
    void publish_loop();
    void set_reachable(bool reachable, const std::string& error);
    bool wait_retry(std::chrono::milliseconds& backoff);

    std::shared_ptr<etcd::Client> client_;
    Options options_;
    OnSnapshot on_snapshot_;
    OnSnapshot on_peers_;
    OnSnapshot on_publishes_;
    RecordSource publish_source_;
    OnReachability on_reachability_;
    RecordSource record_source_;

    std::mutex mu_;
    std::condition_variable wake_;
    bool stopping_ = false;
    bool poked_ = false;
    bool publish_poked_ = false;
    std::int64_t lease_ = 0;         // the record's, shared with the publish writer
    std::optional<bool> reachable_;  // as last reported
    etcd::Watch watch_;              // the ones running (a handle serves one watch), to stop them
    etcd::Watch peers_watch_;
    etcd::Watch publish_watch_;
    std::thread watch_thread_;
    std::thread peers_thread_;
    std::thread publish_thread_;
    std::thread publish_writer_;
    std::thread record_thread_;
};

}  // namespace xlb::agent
