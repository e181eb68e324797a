// SPDX-License-Identifier: Apache-2.0
// QUIC connection-ID routing end to end (label quic): scripts/lab.sh's lab
// (client, router, LB, b1..b3), the real xlbd with a UDP VIP, and on each
// backend tools/quic's xlb-quic-echo (server ids 1, 2, 3, one stateless-reset
// secret as a real cluster shares), 40 connections of xlb-quic-client from
// the client namespace, each moved to a new local port mid-connection.
//   cid routing : the VIP with quic (plaintext): 0 of 40 lost.
//   encrypted   : the same with an encrypted config, its key in a root-only
//                 file the agent reads and hands to the kernel's AES: 0 lost.
//   baseline    : the same VIP without quic: the moved connections follow
//                 their new 5-tuple, mostly to another backend, which resets
//                 them; how many were lost is printed (MEASURED) and recorded.
//   removed     : with quic, b3 removed while the connections wait to move:
//                 b3's connections fall back to the ring (their server id has
//                 no backend: unknown_server, docs/quic.md), reach a backend
//                 that does not know them and are lost; the others: 0 lost.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <future>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "tcp_lab.h"
#include "url_encode.h"

#if !defined(XLB_QUIC_ECHO) || !defined(XLB_QUIC_CLIENT)
#error "XLB_QUIC_ECHO and XLB_QUIC_CLIENT must be defined"
#endif

namespace xlb::e2e_tcp {
namespace {

using json = nlohmann::json;

constexpr int kQuicPort = 443;
constexpr int kConnections = 40;
const char* const kResetKey = "5eed0000111122223333444455556666";
// The encrypted config's key (a secret in real life: here a test's).
const char* const kQuicKey = "8f95f09245765f80256934e50c66207f";

enum class Mode { kOff, kPlaintext, kEncrypted };

std::string vip_key() { return std::string(kVip4) + ":" + std::to_string(kQuicPort) + "/udp"; }

// The UDP VIP on the web VIP's address, b1..b3 with server ids 1..3; kOff:
// the same VIP balanced by its 5-tuple alone. Encrypted: 2 + 14 octets (the
// single-pass form) under the key in key_file.
std::string quic_vip(Mode mode, const std::string& key_file) {
    const bool quic = mode != Mode::kOff;
    std::ostringstream out;
    out << "  - name: quic\n"
        << "    address: \"" << kVip4 << "\"\n"
        << "    port: " << kQuicPort << "\n"
        << "    protocol: udp\n";
    if (mode == Mode::kPlaintext)
        out << "    quic: {server_id_length: 2, nonce_length: 6, config_id: 0, mode: plaintext}\n";
    if (mode == Mode::kEncrypted)
        out << "    quic: {server_id_length: 2, nonce_length: 14, config_id: 1, mode: encrypted, "
               "key_file: \""
            << key_file << "\"}\n";
    out << "    backends:\n";
    for (int i = 1; i <= 3; ++i) {
        out << "      - {address: \"" << backend_v4(i) << "\"";
        if (quic) out << ", server_id: " << i;
        out << "}\n";
    }
    return out.str();
}

int count_of(const std::string& text, const std::string& word) {
    int n = 0;
    for (auto at = text.find(word); at != std::string::npos; at = text.find(word, at + 1)) ++n;
    return n;
}

std::string read_file(const std::string& path) {
    std::ifstream in(path);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
}

class QuicLab : public ::testing::Test {
protected:
    void SetUp() override {
        if (geteuid() != 0) GTEST_SKIP() << "needs root (network namespaces, BPF)";
    }
    void TearDown() override {
        for (pid_t pid : servers_) {
            ::kill(pid, SIGTERM);
            ::waitpid(pid, nullptr, 0);
        }
        if (!HasFailure()) return;
        std::string log = lab_.agent_log();
        if (log.size() > 4000) log = log.substr(log.size() - 4000);
        std::printf("---- xlbd log (tail) ----\n%s\n", log.c_str());
        for (int i = 1; i <= 3; ++i)
            std::printf("---- b%d's server ----\n%s\n", i, server_log(i).substr(0, 3000).c_str());
    }

    std::string key_file() const { return lab_.dir() + "/quic.key"; }

    void start(Mode mode) {
        mode_ = mode;
        try {
            lab_.up(3);
            if (mode == Mode::kEncrypted) {
                // Root-only, as the agent and the servers insist.
                const std::string path = key_file();
                std::ofstream(path) << kQuicKey << "\n";
                ASSERT_EQ(::chmod(path.c_str(), 0600), 0);
            }
            std::ofstream(lab_.dir() + "/xlbd.yaml", std::ios::app) << quic_vip(mode, key_file());
            lab_.agent_start();
        } catch (const std::exception& e) {
            FAIL() << e.what();
        }
        for (int i = 1; i <= 3; ++i) start_server(i);
        for (int i = 1; i <= 3; ++i) {
            for (int tries = 0; tries < 100 && count_of(server_log(i), "listening on") == 0;
                 ++tries)
                std::this_thread::sleep_for(50ms);
            ASSERT_EQ(count_of(server_log(i), "listening on"), 1) << server_log(i);
        }
    }

    std::string server_log_path(int i) const {
        return lab_.dir() + "/quic-b" + std::to_string(i) + ".log";
    }
    std::string server_log(int i) const { return read_file(server_log_path(i)); }

    void start_server(int i) {
        const std::string ns = lab_.ns("b" + std::to_string(i));
        const std::string listen = std::string(kVip4) + ":" + std::to_string(kQuicPort);
        const std::string id = std::to_string(i);
        const std::string log = server_log_path(i);
        pid_t pid = ::fork();
        if (pid == 0) {
            FILE* out = std::freopen(log.c_str(), "w", stdout);
            if (out) ::dup2(::fileno(stdout), 2);
            const std::string key = key_file();
            if (mode_ == Mode::kEncrypted)
                ::execlp("ip", "ip", "netns", "exec", ns.c_str(), XLB_QUIC_ECHO, "--listen",
                         listen.c_str(), "--server-id", id.c_str(), "--server-id-length", "2",
                         "--nonce-length", "14", "--config-id", "1", "--mode", "encrypted",
                         "--key-file", key.c_str(), "--reset-key", kResetKey, nullptr);
            else
                ::execlp("ip", "ip", "netns", "exec", ns.c_str(), XLB_QUIC_ECHO, "--listen",
                         listen.c_str(), "--server-id", id.c_str(), "--server-id-length", "2",
                         "--nonce-length", "6", "--reset-key", kResetKey, nullptr);
            ::_exit(127);
        }
        servers_.push_back(pid);
    }

    // xlb-quic-client in the client namespace: its JSON summary.
    json client(double hold) {
        const std::string cmd = "ip netns exec " + lab_.client_ns() + " " + XLB_QUIC_CLIENT + " " +
                                kVip4 + ":" + std::to_string(kQuicPort) + " --connections " +
                                std::to_string(kConnections) + " --allow-loss --timeout 3 --hold " +
                                std::to_string(hold) + " 2>&1";
        CmdResult r = run(cmd);
        json summary;
        std::istringstream lines(r.out);
        for (std::string line; std::getline(lines, line);)
            if (!line.empty() && line.front() == '{') summary = json::parse(line, nullptr, false);
        EXPECT_EQ(r.rc, 0) << r.out;
        EXPECT_TRUE(summary.is_object()) << r.out;
        return summary;
    }

    int accepted(int i) const { return count_of(server_log(i), "accepted "); }

    // The agent's count of the VIP's packets routed by their CID.
    std::int64_t routed() {
        const auto reply = lab_.api("GET", "/v1/status");
        const json status = json::parse(reply.body, nullptr, false);
        if (!status.is_object() || !status.contains("vips")) return -1;
        for (const json& v : status["vips"])
            if (v.value("vip", "") == vip_key() && v.contains("quic") && v["quic"].is_object())
                return v["quic"].value("routed", std::int64_t{-1});
        return -1;
    }

    // Every connection moved and kept its server.
    void expect_none_lost(const char* what) {
        const json summary = client(0);
        std::printf("MEASURED [%s] %s; accepted b1 %d, b2 %d, b3 %d; routed by CID %lld\n", what,
                    summary.dump().c_str(), accepted(1), accepted(2), accepted(3),
                    static_cast<long long>(routed()));
        RecordProperty("lost", summary.value("lost", -1));
        EXPECT_EQ(summary["connections"], kConnections);
        EXPECT_EQ(summary["ok"], kConnections) << summary;
        EXPECT_EQ(summary["lost"], 0) << summary;
        // Each server saw its connections come from their new port.
        int moved = 0;
        for (int i = 1; i <= 3; ++i) moved += count_of(server_log(i), "moved ");
        EXPECT_EQ(accepted(1) + accepted(2) + accepted(3), kConnections);
        EXPECT_EQ(moved, kConnections);
        // More than one backend took connections: the Initials are balanced.
        EXPECT_LT(std::max({accepted(1), accepted(2), accepted(3)}), kConnections);
        // The moved packets went by their CID, not by luck of the ring.
        EXPECT_GE(routed(), kConnections);
    }

    Lab lab_;
    Mode mode_ = Mode::kOff;
    std::vector<pid_t> servers_;
};

TEST_F(QuicLab, CidRoutingKeepsEveryMovedConnection) {
    ASSERT_NO_FATAL_FAILURE(start(Mode::kPlaintext));
    expect_none_lost("cid routing");
}

TEST_F(QuicLab, EncryptedCidRoutingKeepsEveryMovedConnection) {
    ASSERT_NO_FATAL_FAILURE(start(Mode::kEncrypted));
    expect_none_lost("cid routing, encrypted");
}

TEST_F(QuicLab, WithoutQuicMovedConnectionsAreLost) {
    ASSERT_NO_FATAL_FAILURE(start(Mode::kOff));
    const json summary = client(0);
    const int lost = summary.value("lost", -1);
    std::printf("MEASURED [baseline, quic off] %d of %d connections lost after the move: %s\n",
                lost, kConnections, summary.dump().c_str());
    RecordProperty("lost", lost);
    EXPECT_EQ(summary["connections"], kConnections);
    // A moved connection keeps its backend only when its new 5-tuple hashes
    // there (about a third): all 40 surviving is (1/3)^40.
    EXPECT_GT(lost, 0) << summary;
    EXPECT_EQ(summary.value("ok", 0) + lost, kConnections) << summary;
}

TEST_F(QuicLab, RemovedBackendLosesItsConnectionsOnly) {
    ASSERT_NO_FATAL_FAILURE(start(Mode::kPlaintext));
    // The connections wait 4 s between their first echo and the move; b3 is
    // removed in that time.
    auto result = std::async(std::launch::async, [this] { return client(4); });
    for (int tries = 0; tries < 100 && accepted(1) + accepted(2) + accepted(3) < kConnections;
         ++tries)
        std::this_thread::sleep_for(50ms);
    std::this_thread::sleep_for(500ms);  // their first echoes
    const int on_b3 = accepted(3);
    const auto reply = lab_.api(
        "DELETE", "/v1/backends?vip=" + test::url_encode(vip_key()) + "&address=" + backend_v4(3));
    EXPECT_EQ(reply.status / 100, 2) << reply.status << " " << reply.body;
    const json summary = result.get();
    std::printf("MEASURED [b3 removed] %s; b3 had %d of %d connections\n", summary.dump().c_str(),
                on_b3, kConnections);
    RecordProperty("lost", summary.value("lost", -1));
    ASSERT_GT(on_b3, 0) << "b3 took no connection: nothing to show";
    EXPECT_EQ(accepted(1) + accepted(2) + on_b3, kConnections);
    // b3's connections fall back to the ring and reach b1 or b2, which do
    // not know them; every other connection keeps its server.
    EXPECT_EQ(summary["lost"], on_b3) << summary;
    EXPECT_EQ(summary["ok"], kConnections - on_b3) << summary;
    EXPECT_EQ(count_of(server_log(1), "moved ") + count_of(server_log(2), "moved "),
              kConnections - on_b3);
}

}  // namespace
}  // namespace xlb::e2e_tcp
