// SPDX-License-Identifier: Apache-2.0
#include "xlb/agent/fleet_link.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <nlohmann/json.hpp>
#include <utility>

#include "xlb/files/files.h"

namespace xlb::agent {

namespace {

using json = nlohmann::json;

constexpr int kSnapshotFormat = 1;

}  // namespace

Result<std::optional<FleetSnapshot>> SnapshotFile::load() const {
    auto text = files::read_file(path_);
    if (!text) return std::unexpected(std::move(text.error()));
    if (!*text) return std::optional<FleetSnapshot>{};
    auto bad = [&](const std::string& what) {
        return xlb::fail(path_ + ": " + what,
                         "move it aside: the agent then waits for the fleet's store");
    };
    json j = json::parse(**text, nullptr, false);
    if (j.is_discarded() || !j.is_object()) return bad("not a JSON object");
    if (const auto f = j.find("format");
        f == j.end() || !f->is_number_integer() || f->get<std::int64_t>() != kSnapshotFormat)
        return bad("format " + (f == j.end() ? std::string("missing") : f->dump()) + ", expected " +
                   std::to_string(kSnapshotFormat));
    FleetSnapshot out;
    try {
        out.revision = j.at("revision").get<std::int64_t>();
        for (const json& k : j.at("keys"))
            out.keys.push_back(fleet::StoredKey{k.at("key").get<std::string>(),
                                                k.at("value").get<std::string>(),
                                                k.at("mod_revision").get<std::int64_t>()});
    } catch (const json::exception& e) {
        return bad(e.what());
    }
    return std::optional<FleetSnapshot>(std::move(out));
}

Result<void> SnapshotFile::save(const FleetSnapshot& snapshot) const {
    json keys = json::array();
    for (const fleet::StoredKey& k : snapshot.keys)
        keys.push_back({{"key", k.key}, {"value", k.value}, {"mod_revision", k.mod_revision}});
    const json j{{"format", kSnapshotFormat}, {"revision", snapshot.revision}, {"keys", keys}};
    return files::write_file_atomic(path_, j.dump(1) + "\n", 0600);
}

FleetLink::FleetLink(etcd::Client client, Options options)
    : client_(std::make_shared<etcd::Client>(std::move(client))), options_(std::move(options)) {}

FleetLink::~FleetLink() { stop(); }

Result<FleetSnapshot> FleetLink::read() { return read_prefix(options_.layout.desired()); }

Result<FleetSnapshot> FleetLink::read_prefix(const std::string& prefix) {
    auto range = client_->get_prefix(prefix);
    if (!range) return std::unexpected(std::move(range.error()));
    FleetSnapshot out;
    out.revision = range->revision;
    for (etcd::KeyValue& kv : range->kvs)
        out.keys.push_back(
            fleet::StoredKey{std::move(kv.key), std::move(kv.value), kv.mod_revision, kv.lease});
    return out;
}

void FleetLink::start_watch(std::optional<FleetSnapshot> from, OnSnapshot on_snapshot,
                            OnReachability on_reachability) {
    on_snapshot_ = std::move(on_snapshot);
    on_reachability_ = std::move(on_reachability);
    watch_thread_ = std::thread([this, from = std::move(from)] {
        watch_loop(options_.layout.desired(), from, on_snapshot_, watch_, true);
    });
}

void FleetLink::start_peers(OnSnapshot on_peers, OnSnapshot on_publishes) {
    on_peers_ = std::move(on_peers);
    on_publishes_ = std::move(on_publishes);
    peers_thread_ = std::thread([this] {
        watch_loop(options_.layout.hosts(), std::nullopt, on_peers_, peers_watch_, false);
    });
    publish_thread_ = std::thread([this] {
        watch_loop(options_.layout.publishes(), std::nullopt, on_publishes_, publish_watch_, false);
    });
}

void FleetLink::start_records(RecordSource source, RecordSource publish) {
    record_source_ = std::move(source);
    publish_source_ = std::move(publish);
    record_thread_ = std::thread([this] { record_loop(); });
    if (publish_source_) publish_writer_ = std::thread([this] { publish_loop(); });
}

void FleetLink::poke_record() {
    std::lock_guard lock(mu_);
    poked_ = true;
    wake_.notify_all();
}

void FleetLink::poke_publish() {
    std::lock_guard lock(mu_);
    publish_poked_ = true;
    wake_.notify_all();
}

void FleetLink::stop() {
    {
        std::lock_guard lock(mu_);
        if (stopping_ && !watch_thread_.joinable() && !record_thread_.joinable() &&
            !peers_thread_.joinable() && !publish_thread_.joinable() && !publish_writer_.joinable())
            return;
        stopping_ = true;
        watch_.stop();
        peers_watch_.stop();
        publish_watch_.stop();
        wake_.notify_all();
    }
    if (watch_thread_.joinable()) watch_thread_.join();
    if (peers_thread_.joinable()) peers_thread_.join();
    if (publish_thread_.joinable()) publish_thread_.join();
    if (publish_writer_.joinable()) publish_writer_.join();
    if (record_thread_.joinable()) record_thread_.join();
}

void FleetLink::set_reachable(bool reachable, const std::string& error) {
    {
        std::lock_guard lock(mu_);
        if (reachable_ == reachable && reachable) return;
        reachable_ = reachable;
    }
    if (on_reachability_) on_reachability_(reachable, error);
}

// Sleeps the back-off (doubling it up to retry_max); false when stopping.
bool FleetLink::wait_retry(std::chrono::milliseconds& backoff) {
    std::unique_lock lock(mu_);
    wake_.wait_for(lock, backoff, [this] { return stopping_; });
    backoff = std::min(backoff * 2, options_.retry_max);
    return !stopping_;
}

void FleetLink::watch_loop(const std::string& prefix, std::optional<FleetSnapshot> from,
                           const OnSnapshot& on_snapshot, etcd::Watch& watch, bool reports) {
    std::map<std::string, fleet::StoredKey> keys;
    auto set_reachable = [&](bool reachable, const std::string& error) {
        if (reports) this->set_reachable(reachable, error);
    };
    std::chrono::milliseconds backoff = options_.retry_min;
    // Without a revision to go on from (none yet, or compacted), everything
    // is read first; the watch then starts right after what was read.
    bool read_all = !from.has_value();
    std::int64_t revision = from ? from->revision : 0;
    if (from)
        for (const fleet::StoredKey& k : from->keys) keys[k.key] = k;
    auto deliver = [&] {
        FleetSnapshot snapshot;
        snapshot.revision = revision;
        for (const auto& [key, k] : keys) snapshot.keys.push_back(k);
        on_snapshot(snapshot);
    };
    while (true) {
        {
            std::lock_guard lock(mu_);
            if (stopping_) return;
        }
        if (read_all) {
            auto snapshot = read_prefix(prefix);
            if (!snapshot) {
                set_reachable(false, snapshot.error().message());
                if (!wait_retry(backoff)) return;
                continue;
            }
            set_reachable(true, {});
            backoff = options_.retry_min;
            keys.clear();
            for (fleet::StoredKey& k : snapshot->keys) keys[k.key] = std::move(k);
            revision = snapshot->revision;
            read_all = false;
            deliver();
        }
        etcd::Watch handle;
        {
            std::lock_guard lock(mu_);
            if (stopping_) return;
            watch = handle;
        }
        bool heard = false;
        auto ended = client_->watch(
            prefix, revision + 1,
            [&](const etcd::WatchBatch& batch) {
                if (!heard) {
                    heard = true;
                    set_reachable(true, {});
                    backoff = options_.retry_min;
                }
                for (const etcd::Event& e : batch.events) {
                    if (e.type == etcd::Event::Type::kDelete)
                        keys.erase(e.kv.key);
                    else
                        keys[e.kv.key] =
                            fleet::StoredKey{e.kv.key, e.kv.value, e.kv.mod_revision, e.kv.lease};
                }
                revision = std::max(revision, batch.revision);
                if (!batch.events.empty()) deliver();
            },
            handle);
        if (ended && ended->reason == etcd::WatchEnd::Reason::kStopped) return;
        if (ended) {
            spdlog::warn(
                "fleet: the store compacted its history past revision {} (oldest kept {}): "
                "reading every key under {} again",
                revision + 1, ended->compact_revision, prefix);
            read_all = true;
            continue;
        }
        set_reachable(false, ended.error().message());
        if (!wait_retry(backoff)) return;
        // A store that answers the range but not the watch (or the other
        // way round) is caught up by reading everything again.
        read_all = true;
    }
}

// Renews the lease every third of its TTL whatever else happens; rebuilds
// the record when poked or every record_interval, and puts it when it
// changed. Its failures and successes are the store's reachability too:
// the watch alone may take long to notice a path that died silently.
void FleetLink::record_loop() {
    using SteadyClock = std::chrono::steady_clock;
    std::int64_t lease = 0;
    std::string written;  // the record as last put under `lease`
    auto renew_at = SteadyClock::now();
    auto rebuild_at = SteadyClock::now();
    const auto renew_every =
        std::max<std::chrono::milliseconds>(std::chrono::milliseconds(500), options_.lease_ttl / 3);
    const std::string key = options_.layout.host(options_.host);
    std::string last_error;
    auto report = [&](const Error& e) {
        if (e.message() != last_error) spdlog::warn("fleet: host record {}: {}", key, e.message());
        last_error = e.message();
        set_reachable(false, e.message());
    };
    bool first = true;
    while (true) {
        bool poked = false;
        {
            std::unique_lock lock(mu_);
            const auto until = first        ? SteadyClock::now()
                               : lease != 0 ? std::min(renew_at, rebuild_at)
                                            : rebuild_at;
            wake_.wait_until(lock, until, [this] { return stopping_ || poked_; });
            if (stopping_) return;
            poked = std::exchange(poked_, false);
            first = false;
        }
        const auto now = SteadyClock::now();
        if (lease != 0 && now >= renew_at) {
            auto left = client_->keep_alive(lease);
            if (!left) {
                report(left.error());
                // Soon again: the lease may still live.
                renew_at = now + std::min(renew_every, options_.retry_max);
                rebuild_at = std::max(rebuild_at, renew_at);
                continue;
            }
            if (left->count() <= 0) {
                spdlog::warn("fleet: the lease of {} expired; granting a new one", key);
                lease = 0;
                std::lock_guard lock(mu_);
                lease_ = 0;
            } else {
                renew_at = now + renew_every;
            }
        }
        if (lease == 0) {
            auto granted = client_->grant(options_.lease_ttl);
            if (!granted) {
                report(granted.error());
                rebuild_at = now + options_.retry_max;
                continue;
            }
            lease = granted->id;
            renew_at = now + renew_every;
            written.clear();
            std::lock_guard lock(mu_);
            lease_ = lease;
            wake_.notify_all();
        }
        if (!poked && now < rebuild_at && !written.empty()) continue;
        rebuild_at = now + options_.record_interval;
        std::string record = record_source_();
        if (record.empty() || record == written) continue;
        if (auto put = client_->put(key, record, lease); !put) {
            report(put.error());
            continue;
        }
        if (!last_error.empty()) spdlog::info("fleet: host record {} written again", key);
        last_error.clear();
        set_reachable(true, {});
        written = std::move(record);
    }
}

// Puts the publish state when poked, and again under each new lease (the
// old one's keys went with it); a failed put is tried again after a pause.
void FleetLink::publish_loop() {
    const std::string key = options_.layout.publish(options_.host);
    std::string written;
    std::int64_t written_lease = 0;
    bool again = false;      // the last put failed: once more after a pause
    std::string last_error;  // logged once while it lasts (the record says the rest)
    while (true) {
        std::int64_t lease = 0;
        {
            std::unique_lock lock(mu_);
            if (again) wake_.wait_for(lock, options_.retry_min, [&] { return stopping_; });
            wake_.wait(lock, [&] {
                return stopping_ ||
                       (lease_ != 0 && (again || publish_poked_ || lease_ != written_lease));
            });
            if (stopping_) return;
            publish_poked_ = false;
            lease = lease_;
        }
        std::string state = publish_source_();
        again = false;
        if (state.empty() || (state == written && lease == written_lease)) continue;
        if (auto put = client_->put(key, state, lease); !put) {
            if (put.error().message() != last_error)
                spdlog::warn("fleet: publish state {}: {}", key, put.error().message());
            last_error = put.error().message();
            again = true;
            continue;
        }
        last_error.clear();
        written = std::move(state);
        written_lease = lease;
    }
}

}  // namespace xlb::agent
