// SPDX-License-Identifier: Apache-2.0
// tools/quic on loopback: the server's connection IDs carry its server id in
// the QUIC-LB format (checked with the codec's decoder), and the client's
// connections survive a move to a new port, or count as lost when the
// server they reach after the move does not know them.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "common.h"
#include "xlb/quic/cid.h"

namespace {

using xlb::config::QuicConfig;
using xlb::config::QuicMode;
using xlb::quic_tools::CidIssuer;

constexpr xlb::quic::Key kKey = {0x8f, 0x95, 0xf0, 0x92, 0x45, 0x76, 0x5f, 0x80,
                                 0x25, 0x69, 0x34, 0xe5, 0x0c, 0x66, 0x20, 0x7f};

QuicConfig config_of(int config_id, int sid, int nonce, QuicMode mode = QuicMode::kPlaintext) {
    QuicConfig c;
    c.config_id = static_cast<std::uint8_t>(config_id);
    c.server_id_length = static_cast<std::uint8_t>(sid);
    c.nonce_length = static_cast<std::uint8_t>(nonce);
    c.mode = mode;
    return c;
}

std::uint64_t decoded_server_id(const QuicConfig& config, const xlb::quic::Cid& cid,
                                const std::optional<xlb::quic::Key>& key) {
    std::vector<xlb::quic::KeyOf> keys;
    if (key) keys.push_back({config.config_id, *key});
    xlb::quic::DecodeError why{};
    auto decoded = xlb::quic::decode_cid(std::span(&config, 1), keys, cid, &why);
    EXPECT_TRUE(decoded) << "CID " << xlb::quic::to_hex(cid) << " did not decode: reason "
                         << static_cast<int>(why);
    if (!decoded) return UINT64_MAX;
    EXPECT_EQ(decoded->config_id, config.config_id);
    return decoded->server_id;
}

TEST(CidIssuer, PlaintextCidsDecodeToTheServerId) {
    struct Case {
        int config_id, sid, nonce;
        std::uint64_t server_id;
    } cases[] = {{0, 1, 4, 0x7f},
                 {1, 2, 6, 0x1234},
                 {2, 4, 8, 0xdeadbeef},
                 {6, 8, 11, 0x0123456789abcdefull},
                 {3, 3, 16, 0xabcdef}};
    for (const auto& c : cases) {
        const QuicConfig config = config_of(c.config_id, c.sid, c.nonce);
        auto issuer = CidIssuer::make(config, c.server_id, std::nullopt);
        ASSERT_TRUE(issuer) << issuer.error().message();
        std::set<xlb::quic::Cid> seen;
        for (int i = 0; i < 20; ++i) {
            auto cid = issuer->next();
            ASSERT_TRUE(cid) << cid.error().message();
            ASSERT_EQ(cid->size(), 1u + c.sid + c.nonce);
            EXPECT_EQ((*cid)[0] >> 5, c.config_id);
            EXPECT_EQ(decoded_server_id(config, *cid, std::nullopt), c.server_id);
            seen.insert(*cid);
        }
        EXPECT_EQ(seen.size(), 20u) << "the nonces must differ";
    }
}

TEST(CidIssuer, EncryptedCidsDecodeWithTheKeyOnly) {
    const QuicConfig config = config_of(2, 3, 13, QuicMode::kEncrypted);
    auto issuer = CidIssuer::make(config, 0x0a0b0c, kKey);
    ASSERT_TRUE(issuer) << issuer.error().message();
    for (int i = 0; i < 20; ++i) {
        auto cid = issuer->next();
        ASSERT_TRUE(cid);
        EXPECT_EQ(decoded_server_id(config, *cid, kKey), 0x0a0b0cu);
        // The server id is not readable in the clear.
        EXPECT_FALSE((*cid)[1] == 0x0a && (*cid)[2] == 0x0b && (*cid)[3] == 0x0c);
        xlb::quic::DecodeError why{};
        EXPECT_FALSE(xlb::quic::decode_cid(std::span(&config, 1), {}, *cid, &why));
        EXPECT_EQ(why, xlb::quic::DecodeError::kNoKey);
    }
}

TEST(CidIssuer, RefusesWhatNoBalancerCouldRoute) {
    EXPECT_FALSE(CidIssuer::make(config_of(0, 1, 4), 256, std::nullopt));  // too large
    EXPECT_FALSE(CidIssuer::make(config_of(7, 2, 6), 1, std::nullopt));    // unroutable id
    EXPECT_FALSE(CidIssuer::make(config_of(0, 2, 3), 1, std::nullopt));    // nonce < 4
    EXPECT_FALSE(CidIssuer::make(config_of(0, 8, 12), 1, std::nullopt));   // > 19 octets
    EXPECT_FALSE(CidIssuer::make(config_of(0, 2, 6, QuicMode::kEncrypted), 1, kKey));  // != 16
    EXPECT_FALSE(CidIssuer::make(config_of(0, 4, 12, QuicMode::kEncrypted), 1, std::nullopt));
}

int count(const std::string& text, const std::string& word) {
    int n = 0;
    for (std::size_t at = text.find(word); at != std::string::npos; at = text.find(word, at + 1))
        ++n;
    return n;
}

// A process of ours, its output in a file; SIGTERM and reaped at the end.
class Process {
public:
    Process(std::vector<std::string> argv, std::string log) : log_(std::move(log)) {
        pid_ = ::fork();
        if (pid_ == 0) {
            int fd = ::open(log_.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
            ::dup2(fd, 1);
            ::dup2(fd, 2);
            std::vector<char*> args;
            for (auto& a : argv) args.push_back(a.data());
            args.push_back(nullptr);
            ::execv(args[0], args.data());
            ::_exit(127);
        }
    }
    ~Process() { stop(); }
    void stop() {
        if (pid_ <= 0) return;
        ::kill(pid_, SIGTERM);
        ::waitpid(pid_, nullptr, 0);
        pid_ = -1;
    }
    std::string output() const {
        std::ifstream in(log_);
        std::stringstream s;
        s << in.rdbuf();
        return s.str();
    }
    // Waits for a line matching `pattern`; its first group.
    std::string wait_for(const std::string& pattern) const {
        const std::regex re(pattern);
        for (int i = 0; i < 100; ++i) {
            std::smatch m;
            const std::string out = output();
            if (std::regex_search(out, m, re)) return m[1];
            std::this_thread::sleep_for(std::chrono::milliseconds(50));
        }
        ADD_FAILURE() << "no '" << pattern << "' in: " << output();
        return {};
    }

    // Waits until `word` appears `n` times.
    void wait_count(const std::string& word, int n) const {
        for (int i = 0; i < 100; ++i) {
            if (count(output(), word) >= n) return;
            std::this_thread::sleep_for(std::chrono::milliseconds(50));
        }
        ADD_FAILURE() << "not " << n << " times '" << word << "' in: " << output();
    }

private:
    std::string log_;
    pid_t pid_ = -1;
};

struct ClientRun {
    int exit_code = -1;
    nlohmann::json summary;
};

ClientRun run_client(const std::vector<std::string>& args) {
    std::string command = XLB_QUIC_CLIENT;
    for (const auto& a : args) command += " '" + a + "'";
    ClientRun run;
    FILE* pipe = ::popen(command.c_str(), "r");
    std::string out;
    char buf[4096];
    while (std::size_t n = std::fread(buf, 1, sizeof buf, pipe)) out.append(buf, n);
    const int status = ::pclose(pipe);
    run.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    run.summary = nlohmann::json::parse(out, nullptr, false);
    EXPECT_FALSE(run.summary.is_discarded()) << "not JSON: " << out;
    return run;
}

std::vector<xlb::quic::Cid> accepted_cids(const std::string& log) {
    std::vector<xlb::quic::Cid> out;
    const std::regex re("accepted \\S+ cid ([0-9a-f]+)");
    for (std::sregex_iterator it(log.begin(), log.end(), re), end; it != end; ++it)
        out.push_back(*xlb::quic::from_hex((*it)[1].str()));
    return out;
}

class Loopback : public ::testing::Test {
protected:
    void SetUp() override {
        dir_ = std::filesystem::temp_directory_path() /
               ("xlb-quic-tools-" + std::to_string(::getpid()) + "-" +
                ::testing::UnitTest::GetInstance()->current_test_info()->name());
        std::filesystem::create_directories(dir_);
    }
    void TearDown() override { std::filesystem::remove_all(dir_); }

    // A server on HOST, port chosen by the kernel: its ADDR:PORT.
    std::unique_ptr<Process> server(const std::string& listen, std::vector<std::string> args,
                                    const std::string& name, std::string* address) {
        std::vector<std::string> argv = {XLB_QUIC_ECHO, "--listen", listen};
        argv.insert(argv.end(), args.begin(), args.end());
        auto p = std::make_unique<Process>(argv, (dir_ / (name + ".log")).string());
        *address = p->wait_for("listening on (\\S+) ");
        return p;
    }

    std::filesystem::path dir_;
};

TEST_F(Loopback, TenConnectionsMigrateToNewPortsAndAllEcho) {
    std::string address;
    auto echo =
        server("127.0.0.1:0", {"--server-id", "513", "--server-id-length", "2"}, "echo", &address);
    ClientRun run = run_client({address, "--connections", "10"});
    EXPECT_EQ(run.exit_code, 0) << run.summary;
    EXPECT_EQ(run.summary["connections"], 10);
    EXPECT_EQ(run.summary["ok"], 10);
    EXPECT_EQ(run.summary["lost"], 0);
    EXPECT_TRUE(run.summary["errors"].empty());
    echo->wait_count("closed ", 10);
    echo->stop();
    const std::string log = echo->output();
    EXPECT_EQ(count(log, "accepted "), 10) << log;
    // The server saw every connection come from a second address.
    EXPECT_EQ(count(log, "moved "), 10) << log;
    EXPECT_EQ(count(log, "closed by the client"), 10) << log;
    const auto cids = accepted_cids(log);
    ASSERT_EQ(cids.size(), 10u);
    for (const auto& cid : cids) EXPECT_EQ(decoded_server_id(config_of(0, 2, 6), cid, {}), 513u);
}

TEST_F(Loopback, NatRebindingOverIpv6KeepsTheConnections) {
    std::string address;
    auto echo = server(
        "[::1]:0",
        {"--server-id", "9", "--config-id", "5", "--server-id-length", "1", "--nonce-length", "8"},
        "echo", &address);
    ClientRun run = run_client({address, "--connections", "10", "--rebind", "nat"});
    EXPECT_EQ(run.exit_code, 0) << run.summary;
    EXPECT_EQ(run.summary["ok"], 10);
    echo->stop();
    const std::string log = echo->output();
    EXPECT_EQ(count(log, "moved "), 10) << log;
    for (const auto& cid : accepted_cids(log))
        EXPECT_EQ(decoded_server_id(config_of(5, 1, 8), cid, {}), 9u);
}

TEST_F(Loopback, EncryptedCidsCarryTheServerIdAndConnectionsMigrate) {
    // The key file must be root's (xlb/quic/key_file.h), as the agent's.
    if (::geteuid() != 0) GTEST_SKIP() << "needs root: a key file owned by root";
    const auto key_file = dir_ / "key";
    {
        std::ofstream out(key_file);
        out << xlb::quic::to_hex(kKey) << "\n";
    }
    ::chmod(key_file.c_str(), 0600);
    std::string address;
    auto echo =
        server("127.0.0.1:0",
               {"--server-id", "4660", "--config-id", "1", "--server-id-length", "2",
                "--nonce-length", "14", "--mode", "encrypted", "--key-file", key_file.string()},
               "echo", &address);
    ClientRun run = run_client({address, "--connections", "10"});
    EXPECT_EQ(run.exit_code, 0) << run.summary;
    EXPECT_EQ(run.summary["ok"], 10);
    EXPECT_EQ(run.summary["lost"], 0);
    echo->stop();
    const std::string log = echo->output();
    EXPECT_EQ(count(log, "moved "), 10) << log;
    const auto cids = accepted_cids(log);
    ASSERT_EQ(cids.size(), 10u);
    const QuicConfig config = config_of(1, 2, 14, QuicMode::kEncrypted);
    for (const auto& cid : cids) EXPECT_EQ(decoded_server_id(config, cid, kKey), 4660u);
}

// After the move the client reaches a server that does not know its
// connections (here: the first one, restarted): a stateless reset, and each
// connection counts as lost; without --allow-loss the client fails.
TEST_F(Loopback, ConnectionsAnotherServerResetsCountAsLost) {
    const std::string reset_key = "00112233445566778899aabbccddeeff";
    std::string address;
    auto first =
        server("127.0.0.1:0", {"--server-id", "1", "--reset-key", reset_key}, "first", &address);
    auto port = address.substr(address.rfind(':') + 1);
    std::unique_ptr<Process> second;
    std::thread swap([&] {
        first->wait_count("accepted ", 3);
        // The first echoes take milliseconds; the client holds 1.5 s.
        std::this_thread::sleep_for(std::chrono::milliseconds(500));
        first->stop();
        std::string again;
        second = server("127.0.0.1:" + port, {"--server-id", "2", "--reset-key", reset_key},
                        "second", &again);
    });
    ClientRun run = run_client({address, "--connections", "3", "--hold", "1.5"});
    swap.join();
    EXPECT_EQ(run.exit_code, 1) << run.summary;
    EXPECT_EQ(run.summary["ok"], 0) << run.summary;
    EXPECT_EQ(run.summary["lost"], 3) << run.summary;
    ASSERT_EQ(run.summary["errors"].size(), 3u);
    for (const auto& e : run.summary["errors"])
        EXPECT_NE(e.get<std::string>().find("stateless reset"), std::string::npos) << e;
    second->stop();
    EXPECT_EQ(count(second->output(), "accepted "), 0);
}

TEST_F(Loopback, AllowLossTurnsLostConnectionsIntoSuccessAndATimeoutIsALoss) {
    std::string address;
    auto first = server("127.0.0.1:0", {"--server-id", "1"}, "first", &address);
    std::thread stop([&] {
        first->wait_count("accepted ", 2);
        std::this_thread::sleep_for(std::chrono::milliseconds(500));
        first->stop();
    });
    // Nobody answers after the move: lost by the timeout.
    ClientRun run = run_client(
        {address, "--connections", "2", "--hold", "1.5", "--timeout", "1", "--allow-loss"});
    stop.join();
    EXPECT_EQ(run.exit_code, 0) << run.summary;
    EXPECT_EQ(run.summary["lost"], 2) << run.summary;
    for (const auto& e : run.summary["errors"])
        EXPECT_NE(e.get<std::string>().find("no echo in time"), std::string::npos) << e;
}

}  // namespace
