// SPDX-License-Identifier: Apache-2.0
// The Announcer against the real `bird` (Debian bird2). BIRD runs in the
// current namespace: its configuration has static protocols only (no device,
// kernel or BGP protocol), so it opens no socket but its control socket and
// touches no kernel table. It is killed and its files removed whatever the
// test does.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <thread>

#include "fake_bird.h"
#include "xlb/announce/announcer.h"
#include "xlb/files/files.h"

namespace xlb::announce {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

std::string find_bird() {
    for (const char* p : {"/usr/sbin/bird", "/usr/local/sbin/bird", "/sbin/bird"})
        if (::access(p, X_OK) == 0) return p;
    return {};
}

class TempDir {
public:
    TempDir() {
        std::string pattern = "/tmp/xlb-announce-bird-XXXXXX";
        if (::mkdtemp(pattern.data()) == nullptr) throw std::runtime_error("mkdtemp failed");
        path_ = pattern;
    }
    ~TempDir() {
        std::error_code ec;
        std::filesystem::remove_all(path_, ec);
    }
    std::string operator/(const std::string& name) const { return path_ + "/" + name; }

private:
    std::string path_;
};

// One `bird -f` child; stopped (TERM, then KILL) by its destructor.
class BirdProcess {
public:
    BirdProcess(const std::string& binary, const std::string& config, const std::string& socket,
                const std::string& pidfile, const std::string& log) {
        pid_ = ::fork();
        if (pid_ == 0) {
            const int fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
            if (fd >= 0) {
                ::dup2(fd, 1);
                ::dup2(fd, 2);
            }
            ::execl(binary.c_str(), binary.c_str(), "-f", "-c", config.c_str(), "-s",
                    socket.c_str(), "-P", pidfile.c_str(), static_cast<char*>(nullptr));
            ::_exit(127);
        }
    }
    ~BirdProcess() { stop(); }
    BirdProcess(const BirdProcess&) = delete;
    BirdProcess& operator=(const BirdProcess&) = delete;

    bool running() {
        if (pid_ <= 0) return false;
        int status = 0;
        if (::waitpid(pid_, &status, WNOHANG) == pid_) {
            pid_ = -1;
            return false;
        }
        return true;
    }
    void stop() {
        if (pid_ <= 0) return;
        ::kill(pid_, SIGTERM);
        for (int i = 0; i < 100; ++i) {
            if (::waitpid(pid_, nullptr, WNOHANG) == pid_) {
                pid_ = -1;
                return;
            }
            std::this_thread::sleep_for(milliseconds(20));
        }
        ::kill(pid_, SIGKILL);
        ::waitpid(pid_, nullptr, 0);
        pid_ = -1;
    }

private:
    pid_t pid_ = -1;
};

using test::ip;
using test::vip;

class RealBird : public ::testing::Test {
protected:
    void SetUp() override {
        binary_ = find_bird();
        if (binary_.empty())
            GTEST_SKIP()
                << "bird (BIRD 2) is not installed: scripts/install-deps.sh installs Debian bird2";
        // The include as docs/bird-notes.md recommends it: "[n]" makes BIRD
        // glob from the parent, so a missing directory (after a reboot) is no
        // error. The anchor protocol stands for the operator's own ones
        // (BIRD refuses a configuration without any).
        std::ofstream(dir_ / "bird.conf") << "router id 192.0.2.254;\n"
                                             "protocol static anchor4 { ipv4; }\n"
                                             "include \""
                                          << (dir_ / "ru[n]/xlb/bird/*.conf") << "\";\n";
        options_.routes_file = dir_ / "run/xlb/bird/xlb.conf";
        options_.control_socket = dir_ / "bird.ctl";
        options_.timeout = milliseconds(2000);
    }

    std::unique_ptr<BirdProcess> start_bird() {
        auto bird = std::make_unique<BirdProcess>(binary_, dir_ / "bird.conf", dir_ / "bird.ctl",
                                                  dir_ / "bird.pid", dir_ / "bird.log");
        for (int i = 0; i < 250; ++i) {
            if (bird::Client::connect(dir_ / "bird.ctl", milliseconds(200))) return bird;
            if (!bird->running()) break;
            std::this_thread::sleep_for(milliseconds(20));
        }
        auto log = files::read_file(dir_ / "bird.log");
        ADD_FAILURE() << "bird did not start: " << (log && *log ? **log : std::string("(no log)"));
        return nullptr;
    }

    // The addresses BIRD has from our two protocols (none when they are not defined).
    std::vector<net::IpAddress> bird_routes() {
        auto c = bird::Client::connect(dir_ / "bird.ctl", milliseconds(2000));
        EXPECT_TRUE(c) << c.error();
        if (!c) return {};
        auto protocols = c->show_protocols();
        EXPECT_TRUE(protocols) << protocols.error();
        std::vector<net::IpAddress> out;
        for (const char* name : {"xlb4", "xlb6"}) {
            bool defined = false;
            for (const auto& p : *protocols) defined = defined || p.name == name;
            if (!defined) continue;
            auto routes = c->show_routes(name);
            EXPECT_TRUE(routes) << routes.error();
            if (routes)
                for (const auto& r : *routes) out.push_back(r.address);
        }
        std::sort(out.begin(), out.end());
        return out;
    }

    std::string binary_;
    TempDir dir_;
    AnnouncerOptions options_;
};

TEST_F(RealBird, AnnouncesWithdrawsAndSurvivesRestartsOfEither) {
    const TimePoint t0 = Clock::now();
    // No include file yet (a host just rebooted): BIRD starts anyway.
    auto bird = start_bird();
    ASSERT_TRUE(bird);
    EXPECT_TRUE(bird_routes().empty());

    HostInput in;
    in.startup_complete = true;
    in.vips = {
        vip("192.0.2.10:80/tcp", "192.0.2.10", 2), vip("192.0.2.10:443/tcp", "192.0.2.10", 1),
        vip("[2001:db8::10]:80/tcp", "2001:db8::10", 1), vip("192.0.2.20:80/tcp", "192.0.2.20", 0)};
    {
        Announcer a(options_);
        const auto& s = a.update(in, t0);
        ASSERT_EQ(s.problem, Problem::kNone) << s.last_error;
        EXPECT_TRUE(s.daemon_reachable);
        EXPECT_EQ(s.daemon_version, "2.0.12");
        EXPECT_TRUE(s.protocols_loaded);
        EXPECT_EQ(bird_routes(),
                  (std::vector<net::IpAddress>{ip("192.0.2.10"), ip("2001:db8::10")}));

        // 192.0.2.10 loses its backends on both ports: withdrawn; 192.0.2.20 gains one.
        in.vips[0].serving_backends = 0;
        in.vips[1].serving_backends = 0;
        in.vips[3].serving_backends = 1;
        a.update(in, t0 + seconds(1));
        ASSERT_EQ(a.status().problem, Problem::kNone) << a.status().last_error;
        EXPECT_EQ(bird_routes(),
                  (std::vector<net::IpAddress>{ip("192.0.2.20"), ip("2001:db8::10")}));
        EXPECT_EQ(a.status().configures_total, 2u);
    }

    // BIRD restarted: it reads the file and announces the same set again.
    bird->stop();
    bird = start_bird();
    ASSERT_TRUE(bird);
    EXPECT_EQ(bird_routes(), (std::vector<net::IpAddress>{ip("192.0.2.20"), ip("2001:db8::10")}));

    // xlbd restarted with the same set: no write, no reconfiguration.
    {
        Announcer a(options_);
        const auto& s = a.update(in, t0 + seconds(2));
        EXPECT_EQ(s.problem, Problem::kNone) << s.last_error;
        EXPECT_EQ(s.writes_total, 0u);
        EXPECT_EQ(s.configures_total, 0u);
        EXPECT_TRUE(s.protocols_loaded);
    }

    // Drained: everything withdrawn, the protocols stay defined.
    {
        Announcer a(options_);
        in.drained = true;
        a.update(in, t0 + seconds(3));
        ASSERT_EQ(a.status().problem, Problem::kNone) << a.status().last_error;
        EXPECT_TRUE(bird_routes().empty());
        EXPECT_TRUE(a.status().protocols_loaded);
    }

    // A reboot empties /run: BIRD starts without the file and announces nothing.
    bird->stop();
    std::filesystem::remove_all(dir_ / "run");
    bird = start_bird();
    ASSERT_TRUE(bird);
    EXPECT_TRUE(bird_routes().empty());
}

TEST_F(RealBird, RefusedConfigurationCarriesBirdsText) {
    auto bird = start_bird();
    ASSERT_TRUE(bird);
    // Something else in the included directory that BIRD cannot parse.
    ASSERT_TRUE(
        files::write_file_atomic(dir_ / "run/xlb/bird/broken.conf",
                                 "protocol static { ipv4; route 192.0.2.300/32 blackhole; }\n"));
    Announcer a(options_);
    HostInput in;
    in.startup_complete = true;
    in.vips = {vip("192.0.2.10:80/tcp", "192.0.2.10", 2)};
    a.update(in, Clock::now());
    EXPECT_EQ(a.status().problem, Problem::kRefused);
    EXPECT_NE(a.status().last_error.find("broken.conf:1:"), std::string::npos)
        << a.status().last_error;
    EXPECT_TRUE(a.status().configure_pending);
}

}  // namespace
}  // namespace xlb::announce
