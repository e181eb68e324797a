// SPDX-License-Identifier: Apache-2.0
// The etcd client (xlb/etcd/client.h) against real etcd members on
// 127.0.0.1: keys, compare-and-swap, leases, watches, failover between
// members, and TLS with client certificates.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <mutex>
#include <set>
#include <thread>

#include "etcd_members.h"
#include "netns.h"
#include "xlb/etcd/client.h"

namespace xlb::etcd {
namespace {

using namespace std::chrono_literals;
using test::EtcdMembers;
using test::EtcdMembersOptions;

// What a watch running on its own thread delivered.
class WatchRecorder {
public:
    WatchRecorder(const Client& client, std::string prefix, std::int64_t start) {
        thread_ = std::thread([this, &client, prefix, start] {
            auto end = client.watch(
                prefix, start,
                [this](const WatchBatch& batch) {
                    std::lock_guard lock(mutex_);
                    batches_.push_back(batch);
                    changed_.notify_all();
                },
                handle_);
            std::lock_guard lock(mutex_);
            end_ = std::move(end);
            done_ = true;
            changed_.notify_all();
        });
    }
    ~WatchRecorder() {
        handle_.stop();
        thread_.join();
    }

    // Waits until `events` events arrived (or the watch ended); all of them.
    std::vector<Event> wait_events(std::size_t events, std::chrono::milliseconds timeout = 10s) {
        std::unique_lock lock(mutex_);
        changed_.wait_for(lock, timeout, [&] { return done_ || count_locked() >= events; });
        std::vector<Event> out;
        for (const auto& b : batches_) out.insert(out.end(), b.events.begin(), b.events.end());
        return out;
    }
    std::vector<WatchBatch> batches() {
        std::lock_guard lock(mutex_);
        return batches_;
    }
    // Waits for the watch to end; its result.
    std::optional<Result<WatchEnd>> wait_end(std::chrono::milliseconds timeout = 10s) {
        std::unique_lock lock(mutex_);
        changed_.wait_for(lock, timeout, [&] { return done_; });
        return end_;
    }
    const Watch& handle() const { return handle_; }

private:
    std::size_t count_locked() const {
        std::size_t n = 0;
        for (const auto& b : batches_) n += b.events.size();
        return n;
    }

    Watch handle_;
    std::mutex mutex_;
    std::condition_variable changed_;
    std::vector<WatchBatch> batches_;
    std::optional<Result<WatchEnd>> end_;
    bool done_ = false;
    std::thread thread_;
};

Client open_client(ClientOptions options) {
    auto client = Client::open(std::move(options));
    if (!client) throw std::runtime_error(client.error().message());
    return std::move(*client);
}

// A port on 127.0.0.1 where nothing listens (bound, then released).
std::string dead_endpoint() {
    const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof addr;
    ::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr);
    ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
    ::close(fd);
    return "http://127.0.0.1:" + std::to_string(ntohs(addr.sin_port));
}

// ---- Without members: what open() checks, and an unreachable store. ----

TEST(EtcdOpen, RejectsBadEndpointsNamingThem) {
    for (const std::string url : {"127.0.0.1:2379", "ftp://h:1", "http://h:1/v3", "http://h:0",
                                  "http://h:99999", "http://::1:2379", "http://[::1", "http://"}) {
        auto client = Client::open({.endpoints = {url}});
        ASSERT_FALSE(client) << url;
        EXPECT_NE(client.error().message().find("'" + url + "'"), std::string::npos)
            << client.error().message();
    }
    EXPECT_TRUE(
        Client::open({.endpoints = {"http://[::1]:2379", "http://localhost", "http://h:1/"}}));
    EXPECT_FALSE(Client::open({}));
}

TEST(EtcdOpen, ChecksTheTlsFiles) {
    auto no_ca = Client::open({.endpoints = {"https://127.0.0.1:2379"}});
    ASSERT_FALSE(no_ca);
    EXPECT_NE(no_ca.error().message().find("CA"), std::string::npos) << no_ca.error().message();

    auto missing =
        Client::open({.endpoints = {"https://127.0.0.1:2379"}, .ca = "/nonexistent/ca.pem"});
    ASSERT_FALSE(missing);
    EXPECT_NE(missing.error().message().find("/nonexistent/ca.pem: No such file or directory"),
              std::string::npos)
        << missing.error().message();

    auto half = Client::open({.endpoints = {"http://127.0.0.1:2379"}, .cert = "/etc/hostname"});
    ASSERT_FALSE(half);
    EXPECT_NE(half.error().message().find("key"), std::string::npos) << half.error().message();

    // Readable but not a certificate.
    auto not_pem = Client::open({.endpoints = {"https://127.0.0.1:2379"}, .ca = "/etc/hostname"});
    ASSERT_FALSE(not_pem);
    EXPECT_NE(not_pem.error().message().find("CA file /etc/hostname"), std::string::npos)
        << not_pem.error().message();
}

TEST(EtcdOpen, UnreachableStoreNamesEveryEndpointAndItsError) {
    const std::string a = dead_endpoint(), b = dead_endpoint();
    auto one = open_client({.endpoints = {a}}).get("/k");
    ASSERT_FALSE(one);
    EXPECT_EQ(one.error().message(), "etcd " + a + ": range /k: connect: Connection refused");

    auto two = open_client({.endpoints = {a, b}}).put("/k", "v");
    ASSERT_FALSE(two);
    EXPECT_EQ(two.error().message(), "etcd: put /k: no member answered: " + a +
                                         ": connect: Connection refused; " + b +
                                         ": connect: Connection refused");
}

TEST(EtcdOpen, PrefixEnd) {
    EXPECT_EQ(prefix_end("/xlb/a/"), "/xlb/a0");
    EXPECT_EQ(prefix_end(std::string("a\xff", 2)), "b");
    EXPECT_EQ(prefix_end(std::string("\xff\xff", 2)), std::string(1, '\0'));
    EXPECT_EQ(prefix_end(""), std::string(1, '\0'));
}

// ---- One cluster of three members, shared by the suite. ----

class EtcdCluster : public ::testing::Test {
protected:
    static void SetUpTestSuite() {
        try {
            members_ = std::make_unique<EtcdMembers>(EtcdMembersOptions{.members = 3});
        } catch (const std::exception& e) {
            setup_error_ = e.what();
        }
    }
    static void TearDownTestSuite() { members_.reset(); }

    void SetUp() override {
        ASSERT_NE(members_, nullptr) << setup_error_;
        client_.emplace(open_client({.endpoints = members_->endpoints()}));
        prefix_ = std::string("/t/") +
                  ::testing::UnitTest::GetInstance()->current_test_info()->name() + "/";
    }

    const Client& client() const { return *client_; }
    std::string key(const std::string& name) const { return prefix_ + name; }

    static std::unique_ptr<EtcdMembers> members_;
    static std::string setup_error_;
    std::optional<Client> client_;
    std::string prefix_;
};
std::unique_ptr<EtcdMembers> EtcdCluster::members_;
std::string EtcdCluster::setup_error_;

TEST_F(EtcdCluster, PutGetPrefixDelete) {
    auto r1 = client().put(key("a"), "one");
    ASSERT_TRUE(r1) << r1.error();
    auto r2 = client().put(key("b"), std::string("two\0bytes\xff", 10));
    ASSERT_TRUE(r2) << r2.error();
    auto r3 = client().put(key("a"), "uno");
    ASSERT_TRUE(r3) << r3.error();
    ASSERT_TRUE(client().put(prefix_.substr(0, prefix_.size() - 1) + "0", "outside"));
    EXPECT_LT(*r1, *r2);
    EXPECT_LT(*r2, *r3);

    auto a = client().get(key("a"));
    ASSERT_TRUE(a) << a.error();
    ASSERT_EQ(a->kvs.size(), 1u);
    EXPECT_EQ(a->kvs[0].key, key("a"));
    EXPECT_EQ(a->kvs[0].value, "uno");
    EXPECT_EQ(a->kvs[0].create_revision, *r1);
    EXPECT_EQ(a->kvs[0].mod_revision, *r3);
    EXPECT_EQ(a->kvs[0].version, 2);
    EXPECT_GE(a->revision, *r3);

    auto old = client().get(key("a"), *r2);
    ASSERT_TRUE(old) << old.error();
    ASSERT_EQ(old->kvs.size(), 1u);
    EXPECT_EQ(old->kvs[0].value, "one");

    auto all = client().get_prefix(prefix_);
    ASSERT_TRUE(all) << all.error();
    ASSERT_EQ(all->kvs.size(), 2u);  // not the key beside the prefix
    EXPECT_EQ(all->kvs[0].key, key("a"));
    EXPECT_EQ(all->kvs[1].key, key("b"));
    EXPECT_EQ(all->kvs[1].value, std::string("two\0bytes\xff", 10));

    auto deleted = client().del(key("a"));
    ASSERT_TRUE(deleted) << deleted.error();
    EXPECT_GT(*deleted, *r3);
    auto gone = client().get(key("a"));
    ASSERT_TRUE(gone);
    EXPECT_TRUE(gone->kvs.empty());
    auto revision = client().revision();
    ASSERT_TRUE(revision) << revision.error();
    EXPECT_GE(*revision, *deleted);

    auto future = client().get(key("a"), *revision + 1000);
    ASSERT_FALSE(future);
    EXPECT_NE(future.error().message().find("future revision"), std::string::npos)
        << future.error().message();
}

TEST_F(EtcdCluster, TxnCompareAndSwap) {
    auto first = client().put(key("vip"), "v1");
    ASSERT_TRUE(first);

    // Based on the revision read: applied.
    auto won =
        client().txn({{key("vip"), *first}}, {Op::put(key("vip"), "v2")}, {Op::get(key("vip"))});
    ASSERT_TRUE(won) << won.error();
    EXPECT_TRUE(won->succeeded);
    EXPECT_TRUE(won->got.empty());

    // A second writer still holding the first revision: refused, and told
    // what is there now.
    auto lost =
        client().txn({{key("vip"), *first}}, {Op::put(key("vip"), "v3")}, {Op::get(key("vip"))});
    ASSERT_TRUE(lost) << lost.error();
    EXPECT_FALSE(lost->succeeded);
    ASSERT_EQ(lost->got.size(), 1u);
    EXPECT_EQ(lost->got[0].value, "v2");
    EXPECT_EQ(lost->got[0].mod_revision, won->revision);
    EXPECT_EQ(lost->revision, won->revision);  // nothing written

    auto now = client().get(key("vip"));
    ASSERT_TRUE(now);
    EXPECT_EQ(now->kvs.at(0).value, "v2");

    // Several keys at once, and a delete.
    ASSERT_TRUE(client().put(key("other"), "x"));
    auto both =
        client().txn({{key("vip"), won->revision}},
                     {Op::del(key("vip")), Op::put(key("other"), "y"), Op::get_prefix(prefix_)});
    ASSERT_TRUE(both) << both.error();
    EXPECT_TRUE(both->succeeded);
    ASSERT_EQ(both->got.size(), 1u);
    EXPECT_EQ(both->got[0].key, key("other"));
    EXPECT_EQ(both->got[0].value, "y");
}

TEST_F(EtcdCluster, TxnCreateOnly) {
    auto created =
        client().txn({{key("new"), 0}}, {Op::put(key("new"), "mine")}, {Op::get(key("new"))});
    ASSERT_TRUE(created) << created.error();
    EXPECT_TRUE(created->succeeded);

    auto again =
        client().txn({{key("new"), 0}}, {Op::put(key("new"), "theirs")}, {Op::get(key("new"))});
    ASSERT_TRUE(again) << again.error();
    EXPECT_FALSE(again->succeeded);
    ASSERT_EQ(again->got.size(), 1u);
    EXPECT_EQ(again->got[0].value, "mine");
    EXPECT_EQ(again->got[0].create_revision, created->revision);

    // Deleted: it does not exist again, whatever its history.
    ASSERT_TRUE(client().del(key("new")));
    auto recreated = client().txn({{key("new"), 0}}, {Op::put(key("new"), "back")});
    ASSERT_TRUE(recreated);
    EXPECT_TRUE(recreated->succeeded);
}

TEST_F(EtcdCluster, LeaseKeepAliveAndExpiry) {
    // etcd raises a TTL below its minimum (1.5 election timeouts: 2 s here).
    auto lease = client().grant(1s);
    ASSERT_TRUE(lease) << lease.error();
    EXPECT_NE(lease->id, 0);
    EXPECT_GE(lease->ttl, 1s);
    ASSERT_TRUE(client().put(key("host"), "alive", lease->id));
    auto stored = client().get(key("host"));
    ASSERT_TRUE(stored);
    EXPECT_EQ(stored->kvs.at(0).lease, lease->id);

    // Kept alive past its TTL: still there.
    const auto start = std::chrono::steady_clock::now();
    while (std::chrono::steady_clock::now() - start < lease->ttl + 1s) {
        auto left = client().keep_alive(lease->id);
        ASSERT_TRUE(left) << left.error();
        EXPECT_GT(*left, 0s);
        std::this_thread::sleep_for(300ms);
    }
    auto ttl = client().time_to_live(lease->id);
    ASSERT_TRUE(ttl) << ttl.error();
    EXPECT_EQ(ttl->granted, lease->ttl);
    EXPECT_GT(ttl->remaining, 0s);
    ASSERT_EQ(client().get(key("host"))->kvs.size(), 1u);

    // Left alone: it expires and takes its key.
    const auto deadline = std::chrono::steady_clock::now() + lease->ttl + 5s;
    while (!client().get(key("host"))->kvs.empty() && std::chrono::steady_clock::now() < deadline) {
        std::this_thread::sleep_for(200ms);
    }
    EXPECT_TRUE(client().get(key("host"))->kvs.empty());
    auto gone = client().keep_alive(lease->id);
    ASSERT_TRUE(gone) << gone.error();
    EXPECT_EQ(*gone, 0s);
    auto expired = client().time_to_live(lease->id);
    ASSERT_TRUE(expired);
    EXPECT_EQ(expired->remaining, -1s);

    // Revoked: its keys go at once.
    auto other = client().grant(30s);
    ASSERT_TRUE(other);
    ASSERT_TRUE(client().put(key("revoked"), "x", other->id));
    ASSERT_TRUE(client().revoke(other->id));
    EXPECT_TRUE(client().get(key("revoked"))->kvs.empty());
    auto twice = client().revoke(other->id);
    ASSERT_FALSE(twice);
    EXPECT_NE(twice.error().message().find("lease not found"), std::string::npos)
        << twice.error().message();
}

TEST_F(EtcdCluster, WatchDeliversPutsAndDeletesFromARevision) {
    auto r1 = client().put(key("a"), "1");
    ASSERT_TRUE(r1);
    ASSERT_TRUE(client().put(key("b"), "2"));
    ASSERT_TRUE(client().del(key("a")));
    ASSERT_TRUE(client().put(prefix_.substr(0, prefix_.size() - 1) + "0", "outside"));

    WatchRecorder watch(client(), prefix_, *r1);
    // The history first, then what is written while it runs.
    auto history = watch.wait_events(3);
    ASSERT_EQ(history.size(), 3u);
    EXPECT_EQ(history[0].type, Event::Type::kPut);
    EXPECT_EQ(history[0].kv.key, key("a"));
    EXPECT_EQ(history[0].kv.value, "1");
    EXPECT_EQ(history[0].kv.mod_revision, *r1);
    EXPECT_EQ(history[1].kv.key, key("b"));
    EXPECT_EQ(history[2].type, Event::Type::kDelete);
    EXPECT_EQ(history[2].kv.key, key("a"));

    auto txn = client().txn({}, {Op::put(key("c"), "3"), Op::put(key("d"), "4")});
    ASSERT_TRUE(txn);
    auto all = watch.wait_events(5);
    ASSERT_EQ(all.size(), 5u);
    EXPECT_EQ(all[3].kv.key, key("c"));
    EXPECT_EQ(all[4].kv.key, key("d"));
    // One revision, one batch; the batch says how far the caller has seen.
    bool together = false;
    for (const auto& batch : watch.batches()) {
        if (!batch.events.empty() && batch.events.back().kv.key == key("d")) {
            together = batch.events.size() >= 2 &&
                       batch.events[batch.events.size() - 2].kv.key == key("c");
            EXPECT_EQ(batch.revision, txn->revision);
        }
    }
    EXPECT_TRUE(together);
    EXPECT_EQ(all[3].kv.mod_revision, all[4].kv.mod_revision);
}

TEST_F(EtcdCluster, WatchOfACompactedRevisionSaysCompacted) {
    auto r1 = client().put(key("x"), "1");
    ASSERT_TRUE(r1);
    auto r2 = client().put(key("x"), "2");
    ASSERT_TRUE(r2);
    ASSERT_TRUE(client().compact(*r2));

    WatchRecorder watch(client(), prefix_, *r1);
    auto end = watch.wait_end();
    ASSERT_TRUE(end.has_value());
    ASSERT_TRUE(*end) << end->error();
    EXPECT_EQ((*end)->reason, WatchEnd::Reason::kCompacted);
    EXPECT_EQ((*end)->compact_revision, *r2);
    EXPECT_TRUE(watch.batches().empty());

    auto old = client().get(key("x"), *r1);
    ASSERT_FALSE(old);
    EXPECT_NE(old.error().message().find("compacted"), std::string::npos) << old.error().message();
}

TEST_F(EtcdCluster, WatchStoppedFromAnotherThread) {
    WatchRecorder watch(client(), prefix_, 0);
    // Running: it sees a write made now.
    std::vector<Event> seen;
    for (int i = 0; i < 50 && seen.empty(); ++i) {
        ASSERT_TRUE(client().put(key("ping"), std::to_string(i)));
        seen = watch.wait_events(1, 200ms);
    }
    ASSERT_FALSE(seen.empty());

    const auto start = std::chrono::steady_clock::now();
    watch.handle().stop();
    auto end = watch.wait_end(5s);
    ASSERT_TRUE(end.has_value()) << "the watch did not end";
    ASSERT_TRUE(*end) << end->error();
    EXPECT_EQ((*end)->reason, WatchEnd::Reason::kStopped);
    EXPECT_LT(std::chrono::steady_clock::now() - start, 2s);

    // Stopped before it starts: it returns at once.
    Watch stopped;
    stopped.stop();
    auto at_once = client().watch(
        prefix_, 0, [](const WatchBatch&) {}, stopped);
    ASSERT_TRUE(at_once);
    EXPECT_EQ(at_once->reason, WatchEnd::Reason::kStopped);
}

TEST_F(EtcdCluster, ConcurrentCallsFromSeveralThreads) {
    constexpr int kThreads = 4, kWrites = 10;
    std::vector<std::vector<std::int64_t>> revisions(kThreads);
    std::vector<std::string> errors(kThreads);
    {
        std::vector<std::jthread> threads;
        for (int t = 0; t < kThreads; ++t) {
            threads.emplace_back([&, t] {
                for (int w = 0; w < kWrites; ++w) {
                    const std::string k = key(std::to_string(t) + "/" + std::to_string(w));
                    auto put = client().put(k, std::to_string(w));
                    auto got = client().get(k);
                    if (!put || !got || got->kvs.size() != 1 || got->kvs[0].mod_revision != *put) {
                        errors[t] = put ? (got ? "read back wrong" : got.error().message())
                                        : put.error().message();
                        return;
                    }
                    revisions[t].push_back(*put);
                }
            });
        }
    }
    std::set<std::int64_t> distinct;
    for (int t = 0; t < kThreads; ++t) {
        EXPECT_EQ(errors[t], "") << "thread " << t;
        distinct.insert(revisions[t].begin(), revisions[t].end());
    }
    EXPECT_EQ(distinct.size(), static_cast<std::size_t>(kThreads * kWrites));
    auto all = client().get_prefix(prefix_);
    ASSERT_TRUE(all);
    EXPECT_EQ(all->kvs.size(), static_cast<std::size_t>(kThreads * kWrites));
}

// Last in the suite: it stops a member (and starts it again).
TEST_F(EtcdCluster, FailsOverWhenAMemberIsDown) {
    ASSERT_TRUE(client().put(key("k"), "before"));
    // A watch on member 0 alone, running when it stops: an error (the caller
    // watches again later), neither "stopped" nor "compacted".
    const Client only_0 = open_client({.endpoints = {members_->endpoint(0)}});
    WatchRecorder cut(only_0, prefix_, 0);
    std::vector<Event> seen_before;
    for (int i = 0; i < 50 && seen_before.empty(); ++i) {
        ASSERT_TRUE(client().put(key("cut"), std::to_string(i)));
        seen_before = cut.wait_events(1, 200ms);
    }
    ASSERT_FALSE(seen_before.empty());

    members_->stop(0);
    auto cut_end = cut.wait_end();
    ASSERT_TRUE(cut_end.has_value()) << "the watch did not end with its member";
    ASSERT_FALSE(*cut_end);
    EXPECT_TRUE(cut_end->error().message().starts_with("etcd " + members_->endpoint(0) + ": watch"))
        << cut_end->error().message();
    members_->wait_ready(1);  // the others have a leader again
    // A client that just used member 0 (its idle connection is dead), and a
    // new one.
    const Client fresh = open_client({.endpoints = members_->endpoints()});
    for (const Client* c : {&client(), &fresh}) {
        auto put = c->put(key("k"), "during");
        ASSERT_TRUE(put) << put.error();
        auto got = c->get(key("k"));
        ASSERT_TRUE(got) << got.error();
        EXPECT_EQ(got->kvs.at(0).value, "during");
    }
    // A watch starts on a member that serves.
    {
        WatchRecorder watch(client(), prefix_, 0);
        std::vector<Event> seen;
        for (int i = 0; i < 50 && seen.empty(); ++i) {
            ASSERT_TRUE(client().put(key("w"), std::to_string(i)));
            seen = watch.wait_events(1, 200ms);
        }
        EXPECT_FALSE(seen.empty());
    }
    // Only the stopped member: the error names it.
    auto alone = open_client({.endpoints = {members_->endpoint(0)}}).get(key("k"));
    ASSERT_FALSE(alone);
    EXPECT_NE(alone.error().message().find("etcd " + members_->endpoint(0) + ": range"),
              std::string::npos)
        << alone.error().message();

    members_->start(0);
    auto back = open_client({.endpoints = {members_->endpoint(0)}}).get(key("k"));
    ASSERT_TRUE(back) << back.error();
    EXPECT_EQ(back->kvs.at(0).value, "during");
}

// ---- One member with TLS and client certificates. ----

class EtcdTls : public ::testing::Test {
protected:
    static void SetUpTestSuite() {
        try {
            members_ = std::make_unique<EtcdMembers>(EtcdMembersOptions{.members = 1, .tls = true});
        } catch (const std::exception& e) {
            setup_error_ = e.what();
        }
    }
    static void TearDownTestSuite() { members_.reset(); }
    void SetUp() override { ASSERT_NE(members_, nullptr) << setup_error_; }

    static ClientOptions with_cert() {
        return {.endpoints = members_->endpoints(),
                .ca = members_->ca(),
                .cert = members_->client_cert(),
                .key = members_->client_key()};
    }

    static std::unique_ptr<EtcdMembers> members_;
    static std::string setup_error_;
};
std::unique_ptr<EtcdMembers> EtcdTls::members_;
std::string EtcdTls::setup_error_;

TEST_F(EtcdTls, WorksWithTheClientCertificate) {
    Client client = open_client(with_cert());
    auto put = client.put("/tls/k", "v");
    ASSERT_TRUE(put) << put.error();
    auto got = client.get("/tls/k");
    ASSERT_TRUE(got) << got.error();
    EXPECT_EQ(got->kvs.at(0).value, "v");

    WatchRecorder watch(client, "/tls/", *put);
    auto events = watch.wait_events(1);
    ASSERT_EQ(events.size(), 1u);
    EXPECT_EQ(events[0].kv.value, "v");
}

TEST_F(EtcdTls, RefusedWithoutAClientCertificate) {
    ClientOptions options = with_cert();
    options.cert.clear();
    options.key.clear();
    Client client = open_client(options);
    auto got = client.get("/tls/k");
    ASSERT_FALSE(got);
    const std::string message = got.error().message();
    EXPECT_TRUE(message.starts_with("etcd " + members_->endpoint(0) + ": range /tls/k: TLS"))
        << message;
    EXPECT_NE(message.find("certificate"), std::string::npos) << message;

    // A plain-HTTP client to the TLS port gets nothing either.
    options.endpoints = {"http://" + members_->endpoint(0).substr(8)};
    auto plain = open_client(options).get("/tls/k");
    ASSERT_FALSE(plain);
}

TEST_F(EtcdTls, RefusesAMemberSignedByAnotherCa) {
    const std::string other = members_->dir() + "/other-ca";
    test::run_command_ok(std::string(XLB_SOURCE_DIR) + "/scripts/fleet-certs.sh " + other);
    ClientOptions options = with_cert();
    options.ca = other + "/ca.pem";
    auto got = open_client(options).get("/tls/k");
    ASSERT_FALSE(got);
    const std::string message = got.error().message();
    EXPECT_TRUE(message.starts_with("etcd " + members_->endpoint(0) + ": range /tls/k: TLS"))
        << message;
    EXPECT_NE(message.find("not trusted"), std::string::npos) << message;

    // A client certificate of another CA: the member refuses it.
    options = with_cert();
    options.cert = other + "/client.pem";
    options.key = other + "/client-key.pem";
    auto foreign = open_client(options).get("/tls/k");
    ASSERT_FALSE(foreign);
    EXPECT_NE(foreign.error().message().find(": TLS"), std::string::npos)
        << foreign.error().message();
}

TEST_F(EtcdTls, OpenNamesAKeyThatDoesNotMatch) {
    ClientOptions options = with_cert();
    options.key = members_->dir() + "/certs/member-key.pem";
    auto client = Client::open(options);
    ASSERT_FALSE(client);
    EXPECT_NE(client.error().message().find(options.key), std::string::npos)
        << client.error().message();
}

}  // namespace
}  // namespace xlb::etcd
