// SPDX-License-Identifier: Apache-2.0
// Real etcd members for the fleet tests: N `etcd` processes forming one
// cluster on 127.0.0.1 (free ports, data directories in a temporary
// directory), optionally with TLS: the certificates of
// scripts/fleet-certs.sh, and --client-cert-auth so that a client without a
// certificate signed by the cluster's CA is refused.
//
// RAII: the destructor kills every member and removes the directory, whatever
// the test did. Members also die with the thread that started them
// (PR_SET_PDEATHSIG), so a test process killed outright leaves none behind;
// its directory is removed by the next EtcdMembers of any test.
// Every method throws std::runtime_error (with the member's log tail) when it
// cannot do what it says.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <string>
#include <vector>

namespace xlb::test {

struct EtcdMembersOptions {
    int members = 3;
    bool tls = false;
    // How long a (re)started member may take to serve.
    std::chrono::milliseconds ready_timeout{std::chrono::seconds(20)};
};

class EtcdMembers {
public:
    // Starts the members and waits until every one serves (a cluster of
    // three: about 2 s). Throws when etcd is not installed (the message says
    // how to install it) or the cluster does not come up.
    explicit EtcdMembers(EtcdMembersOptions options = {});
    ~EtcdMembers();
    EtcdMembers(const EtcdMembers&) = delete;
    EtcdMembers& operator=(const EtcdMembers&) = delete;

    int size() const { return static_cast<int>(members_.size()); }
    // "http://127.0.0.1:PORT" or "https://..." of every member, in order.
    std::vector<std::string> endpoints() const;
    std::string endpoint(int i) const;
    bool running(int i) const;
    pid_t pid(int i) const;  // 0 when not running

    // SIGTERM, waiting for the exit (SIGKILL after 10 s).
    void stop(int i);
    // SIGKILL, waiting for the exit.
    void kill(int i);
    // Starts a stopped member again with its data directory. wait: until it
    // serves, which needs a quorum: when every member is down, start them
    // all without waiting, then wait_ready() for each.
    void start(int i, bool wait = true);
    void wait_ready(int i);
    void stop_all();

    // The temporary directory; the certificates (empty without TLS).
    const std::string& dir() const { return dir_; }
    std::string ca() const;           // DIR/certs/ca.pem
    std::string client_cert() const;  // DIR/certs/client.pem
    std::string client_key() const;   // DIR/certs/client-key.pem
    // The last lines of member i's log, for a failure's message.
    std::string log_tail(int i, std::size_t bytes = 2000) const;

    // The etcd binary: on PATH or /usr/bin/etcd; empty when there is none.
    static std::string etcd_binary();

private:
    struct Member {
        std::string name;
        int client_port = 0;
        int peer_port = 0;
        pid_t pid = 0;
        bool started_once = false;
    };

    void spawn(int i);
    bool serving(int i) const;
    std::string scheme() const { return options_.tls ? "https" : "http"; }

    EtcdMembersOptions options_;
    std::string binary_;
    std::string dir_;
    std::vector<Member> members_;
};

}  // namespace xlb::test
