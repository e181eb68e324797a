// SPDX-License-Identifier: Apache-2.0
// A client of etcd v3, the fleet's store: keys, compare-and-swap
// transactions, leases and watches, over etcd's JSON gateway (HTTP POST to
// /v3/... on the client port, with TLS and client certificates when the
// endpoint is https). The gateway rather than gRPC: it needs only the HTTP
// library the API already uses, and etcd serves it on every client port.
//
// Errors name the endpoint, the operation and what failed, in words:
//   "etcd https://127.0.0.1:23790: range /xlb/a/desired/: TLS: the member
//    refused the connection: sslv3 alert bad certificate"
// With several endpoints, a request that cannot reach a member is tried on the
// next one (starting from the one that last answered); when none answers, the
// error names each endpoint and its failure. A write is moved to another
// member only when it surely was not sent (no connection, TLS refused), so it
// is never applied twice.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "xlb/error.h"

namespace xlb::etcd {

struct ClientOptions {
    // "http://HOST:PORT" or "https://HOST:PORT" (an IPv6 HOST in brackets;
    // PORT defaults to 2379), the members to talk to, tried in this order.
    std::vector<std::string> endpoints;
    // PEM files. `ca` (the CA that signed the members' certificates) is
    // required by https endpoints; `cert` and `key` (a client certificate,
    // for members run with --client-cert-auth) go together.
    std::string ca;
    std::string cert;
    std::string key;
    // Connecting (TCP and TLS) to one member.
    std::chrono::milliseconds dial_timeout{2000};
    // Waiting for one member's answer once the request is sent.
    std::chrono::milliseconds request_timeout{5000};
    // A watch that hears nothing for this long ends with an error (a member
    // gone without closing the connection). Members send a progress
    // notification to idle watches every 10 minutes by default, so a healthy
    // watch never waits that long.
    std::chrono::milliseconds watch_idle_timeout{std::chrono::minutes(15)};
};

struct KeyValue {
    std::string key;
    std::string value;
    std::int64_t create_revision = 0;
    std::int64_t mod_revision = 0;
    std::int64_t version = 0;  // writes since the key was created
    std::int64_t lease = 0;    // 0: none
};

struct Range {
    std::vector<KeyValue> kvs;  // in key order
    std::int64_t revision = 0;  // the store's revision the range was read at
};

// "The key's mod_revision equals mod_revision"; 0: the key does not exist.
struct Compare {
    std::string key;
    std::int64_t mod_revision = 0;
};

// One operation of a transaction.
struct Op {
    enum class Type { kPut, kDelete, kGet };
    Type type = Type::kGet;
    std::string key;
    std::string value;       // kPut
    std::int64_t lease = 0;  // kPut
    bool prefix = false;     // kDelete, kGet: every key that starts with `key`

    static Op put(std::string key, std::string value, std::int64_t lease = 0);
    static Op del(std::string key);
    static Op del_prefix(std::string prefix);
    static Op get(std::string key);
    static Op get_prefix(std::string prefix);
};

struct Txn {
    bool succeeded = false;     // every Compare held: on_success ran, else on_failure
    std::int64_t revision = 0;  // the store's revision after the transaction
    std::vector<KeyValue> got;  // what the get ops of the branch that ran read, in order
};

struct Lease {
    std::int64_t id = 0;
    std::chrono::seconds ttl{0};  // as granted: etcd raises a TTL below its minimum
};

struct LeaseTtl {
    std::chrono::seconds remaining{0};  // -1: expired, revoked or never granted
    std::chrono::seconds granted{0};
};

struct Event {
    enum class Type { kPut, kDelete };
    Type type = Type::kPut;
    KeyValue kv;  // kDelete: key and mod_revision (the deletion's) only
};

// What one message of a watch carries. A revision's events always arrive
// together, in one batch; a batch may hold several revisions (catching up).
struct WatchBatch {
    std::vector<Event> events;
    // The newest revision the caller has now seen every event up to: the
    // last event's mod_revision, or for a progress notification (events
    // empty) the store's revision. Resume a watch from revision + 1.
    std::int64_t revision = 0;
};

// How a watch ended, when it was not an error (an error: the connection was
// lost or refused; watch again later from the last batch's revision + 1).
struct WatchEnd {
    enum class Reason {
        kStopped,    // Watch::stop()
        kCompacted,  // the start revision was compacted: re-read everything
    };
    Reason reason = Reason::kStopped;
    std::int64_t compact_revision = 0;  // kCompacted: the oldest revision kept
};

namespace detail {
struct WatchState;
struct ClientState;
}  // namespace detail

// Stops a watch from another thread (or from its own callback). A handle:
// copies share one watch. stop() before the watch starts makes it return at
// once; a handle serves one watch.
class Watch {
public:
    Watch();
    void stop() const;
    bool stopped() const;

private:
    friend class Client;
    std::shared_ptr<detail::WatchState> state_;
};

// Thread-safe: calls from several threads run side by side, each on its own
// connection (idle connections are kept for the next call). Movable; a
// moved-from Client must not be used.
class Client {
public:
    // Checks the endpoints' syntax and that the PEM files are readable (the
    // error names the file); connects only when a request is made.
    static Result<Client> open(ClientOptions options);

    Client(Client&&) noexcept;
    Client& operator=(Client&&) noexcept;
    ~Client();

    const ClientOptions& options() const;

    // `revision` 0: the newest; otherwise the store as it was then (an error
    // when it was compacted).
    Result<Range> get(std::string_view key, std::int64_t revision = 0) const;
    Result<Range> get_prefix(std::string_view prefix, std::int64_t revision = 0) const;
    // The revision of the write.
    Result<std::int64_t> put(std::string_view key, std::string_view value,
                             std::int64_t lease = 0) const;
    // The revision after the delete (unchanged when the key did not exist).
    Result<std::int64_t> del(std::string_view key) const;
    Result<Txn> txn(std::vector<Compare> compares, std::vector<Op> on_success,
                    std::vector<Op> on_failure = {}) const;

    Result<Lease> grant(std::chrono::seconds ttl) const;
    // Renews the lease once; its remaining TTL, 0 when it is gone (expired
    // or revoked): its keys are deleted and a new lease is needed.
    Result<std::chrono::seconds> keep_alive(std::int64_t lease) const;
    Result<void> revoke(std::int64_t lease) const;
    Result<LeaseTtl> time_to_live(std::int64_t lease) const;

    // Discards the history before `revision`.
    Result<void> compact(std::int64_t revision) const;
    // The store's current revision (a count-only read of one key).
    Result<std::int64_t> revision() const;

    // Watches every key under `prefix` from `start_revision` (0: from now),
    // calling on_batch on this thread for each message, until `handle` is
    // stopped, the start revision turns out compacted, or the connection
    // fails (an error). Blocks the calling thread. Tries the endpoints in
    // turn to start; once the stream runs, a failure ends it.
    Result<WatchEnd> watch(std::string_view prefix, std::int64_t start_revision,
                           const std::function<void(const WatchBatch&)>& on_batch,
                           const Watch& handle = Watch()) const;

private:
    explicit Client(std::unique_ptr<detail::ClientState> state);
    std::unique_ptr<detail::ClientState> state_;
};

// The end of the key range that covers every key starting with `prefix`
// (etcd's range_end): the prefix with its last byte increased, "\0" for all.
std::string prefix_end(std::string_view prefix);

}  // namespace xlb::etcd
