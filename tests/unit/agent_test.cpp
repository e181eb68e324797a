// SPDX-License-Identifier: Apache-2.0
// The agent's pure and host-local parts: the interface lock, the checks
// before a start, and what a reload applies or refuses.
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <thread>

#include "fake_conntrack.h"
#include "xlb/agent/conntrack_sweeper.h"
#include "xlb/agent/instance_lock.h"
#include "xlb/agent/preflight.h"
#include "xlb/agent/quic_keys.h"
#include "xlb/agent/reload.h"
#include "xlb/agent/syn_flood_watch.h"
#include "xlb/bpf/ct_clock.h"
#include "xlb/bpf/fd.h"
#include "xlb/kernel/conntrack_bpf_table.h"

namespace xlb::agent {
namespace {

using namespace std::chrono_literals;

namespace fs = std::filesystem;

class TempDir {
public:
    TempDir() {
        std::string tmpl = (fs::temp_directory_path() / "xlb-agent-test-XXXXXX").string();
        if (!::mkdtemp(tmpl.data())) throw std::runtime_error("mkdtemp");
        path_ = tmpl;
    }
    ~TempDir() { fs::remove_all(path_); }
    const std::string& path() const { return path_; }

private:
    std::string path_;
};

// ---- QUIC keys -------------------------------------------------------------------

// The agent reads each encrypted config's key file once, and says why one
// could not be read; plaintext configs name none.
TEST(QuicKeys, ReadOncePerFileWithTheirErrors) {
    if (::geteuid() != 0) GTEST_SKIP() << "key files must be owned by root";
    TempDir dir;
    auto write = [&](const std::string& name, const std::string& text, mode_t mode) {
        const std::string path = dir.path() + "/" + name;
        std::ofstream(path) << text;
        ::chmod(path.c_str(), mode);
        return path;
    };
    const std::string good = write("good.key", "000102030405060708090a0b0c0d0e0f\n", 0600);
    const std::string open = write("open.key", "000102030405060708090a0b0c0d0e0f\n", 0644);
    auto config = [](std::uint8_t id, config::QuicMode mode, std::string file) {
        config::QuicConfig q;
        q.config_id = id;
        q.server_id_length = 4;
        q.nonce_length = 12;
        q.mode = mode;
        q.key_file = std::move(file);
        return q;
    };
    config::VipSpec a, b;
    a.quic = {config(0, config::QuicMode::kEncrypted, good),
              config(1, config::QuicMode::kPlaintext, dir.path() + "/never-read")};
    b.quic = {config(2, config::QuicMode::kEncrypted, good),
              config(3, config::QuicMode::kEncrypted, open)};
    const QuicKeys read = read_quic_keys({a, b});
    ASSERT_EQ(read.keys.size(), 1u);
    datapath::QuicKey expected{};
    for (std::uint8_t i = 0; i < 16; ++i) expected[i] = i;
    EXPECT_EQ(read.keys.at(good), expected);
    ASSERT_EQ(read.errors.size(), 1u);
    const std::string& why = read.errors.at(open);
    EXPECT_NE(why.find(open), std::string::npos) << why;
    EXPECT_NE(why.find("chmod 600"), std::string::npos) << why;
    EXPECT_TRUE(read_quic_keys({}).keys.empty());
}

// ---- the interface lock ----------------------------------------------------------

TEST(InstanceLock, LoopbackHasAnIdentityAndAMissingInterfaceIsNamed) {
    auto lo = identify_interface("lo");
    ASSERT_TRUE(lo) << lo.error();
    EXPECT_GT(lo->ifindex, 0u);
    EXPECT_NE(lo->netns_ino, 0u);
    auto missing = identify_interface("nosuch-xlb0");
    ASSERT_FALSE(missing);
    EXPECT_NE(missing.error().message().find("nosuch-xlb0"), std::string::npos) << missing.error();
    EXPECT_NE(missing.error().message().find("no such interface"), std::string::npos)
        << missing.error();
}

TEST(InstanceLock, SecondHolderIsRefusedWithThePidAndTheLockIsFreeOnceReleased) {
    TempDir dir;
    auto lo = identify_interface("lo");
    ASSERT_TRUE(lo);
    // a scope of this test's own: an agent on this host's lo is not disturbed
    const InstanceLock::Place place{dir.path() + "/locks",  // created on demand
                                    "xlbd-test-" + std::to_string(::getpid())};
    {
        auto first = InstanceLock::acquire(*lo, place);
        ASSERT_TRUE(first) << first.error();
        EXPECT_EQ(first->path(), lock_path(place.dir, *lo));
        EXPECT_EQ(first->name(), "@" + lock_socket_name(place.scope, *lo));
        auto second = InstanceLock::acquire(*lo, place);
        ASSERT_FALSE(second);
        EXPECT_NE(second.error().message().find("pid " + std::to_string(::getpid())),
                  std::string::npos)
            << second.error();
        EXPECT_NE(second.error().message().find("lo"), std::string::npos);
        // The same interface under another name is still the same lock.
        InterfaceIdentity renamed = *lo;
        renamed.name = "renamed0";
        EXPECT_FALSE(InstanceLock::acquire(renamed, place));
        // Another interface is another lock.
        InterfaceIdentity other = *lo;
        other.ifindex += 1000;
        EXPECT_TRUE(InstanceLock::acquire(other, place));

        // A cleanup of /run removes the file, not the lock: still refused,
        // only the pid is no longer known.
        ASSERT_EQ(::unlink(first->path().c_str()), 0);
        fs::remove_all(place.dir);
        auto after_cleanup = InstanceLock::acquire(*lo, place);
        ASSERT_FALSE(after_cleanup) << "the lock went with its file";
        EXPECT_NE(after_cleanup.error().message().find("already served"), std::string::npos)
            << after_cleanup.error();
        EXPECT_NE(after_cleanup.error().message().find("pid is unknown"), std::string::npos)
            << after_cleanup.error();
    }
    // Released with its owner (as the kernel does when a holder dies).
    auto again = InstanceLock::acquire(*lo, place);
    EXPECT_TRUE(again) << again.error();
}

// ---- checks before a start -----------------------------------------------------------

TEST(Preflight, StateFileDirectoryMustTakeAFile) {
    TempDir dir;
    EXPECT_TRUE(check_state_file(dir.path() + "/state.json").empty());
    // Directories a save would create are fine; nothing is created here.
    EXPECT_TRUE(check_state_file(dir.path() + "/a/b/state.json").empty());
    EXPECT_FALSE(fs::exists(dir.path() + "/a"));
    std::ofstream(dir.path() + "/file") << "x";
    auto under_file = check_state_file(dir.path() + "/file/state.json");
    ASSERT_EQ(under_file.size(), 1u);
    EXPECT_NE(under_file[0].find("Not a directory"), std::string::npos) << under_file[0];
    // An unreadable (invalid) state file is reported, not ignored.
    std::ofstream(dir.path() + "/bad.json") << "{not json";
    auto bad = check_state_file(dir.path() + "/bad.json");
    ASSERT_EQ(bad.size(), 1u);
    EXPECT_NE(bad[0].find("state_file"), std::string::npos) << bad[0];
    EXPECT_EQ(fs::directory_iterator(dir.path()) == fs::directory_iterator(), false);
    for (const auto& e : fs::directory_iterator(dir.path()))
        EXPECT_EQ(e.path().filename().string().find(".xlbd-write-check"), std::string::npos)
            << "probe file left behind";
}

TEST(Preflight, MetricsAddressInUseIsReportedEvenWhenTheHolderUsesReusePort) {
    bpf::UniqueFd holder(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
    const int one = 1;
    ::setsockopt(holder.get(), SOL_SOCKET, SO_REUSEPORT, &one, sizeof(one));
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ASSERT_EQ(::bind(holder.get(), reinterpret_cast<sockaddr*>(&a), sizeof(a)), 0);
    ASSERT_EQ(::listen(holder.get(), 4), 0);
    socklen_t len = sizeof(a);
    ::getsockname(holder.get(), reinterpret_cast<sockaddr*>(&a), &len);
    const std::string taken = "127.0.0.1:" + std::to_string(ntohs(a.sin_port));
    auto problems = check_bindable(taken);
    ASSERT_EQ(problems.size(), 1u);
    EXPECT_NE(problems[0].find("address in use"), std::string::npos) << problems[0];
    EXPECT_NE(problems[0].find(taken), std::string::npos) << problems[0];
    holder.reset();
    EXPECT_TRUE(check_bindable(taken).empty());
    EXPECT_EQ(check_bindable("not an address").size(), 1u);
}

TEST(Preflight, UnknownGroupAndInterfaceAreEachNamed) {
    TempDir dir;
    config::Settings s;
    s.interface = "nosuch-xlb1";
    s.api_group = "no-such-xlb-group";
    s.state_file = dir.path() + "/state.json";
    auto problems = check_host(s);
    ASSERT_EQ(problems.size(), 2u);
    EXPECT_NE(problems[0].find("nosuch-xlb1"), std::string::npos);
    EXPECT_NE(problems[1].find("api.group"), std::string::npos);
    EXPECT_NE(problems[1].find("no-such-xlb-group"), std::string::npos);
    s.interface = "lo";
    s.api_group = "0";
    EXPECT_TRUE(check_host(s).empty());
}

// ---- reloads ---------------------------------------------------------------------------

config::VipSpec vip(const char* address, std::uint32_t ring = 65537) {
    config::VipSpec v;
    v.address = *net::IpAddress::parse(address);
    v.port = 80;
    v.ring_size = ring;
    return v;
}

TEST(Reload, OneTableSaysWhatAReloadAppliesAndWhatWaitsForARestart) {
    config::Settings running, next;
    next.hash_seed = 7;
    next.mtu = 9000;
    next.api_socket = "/tmp/other.sock";
    next.maps.conntrack_entries = 4096;
    next.interface = "eth1";
    EXPECT_EQ(reloadable_changes(running, next), (std::vector<std::string>{"hash_seed", "mtu"}));
    EXPECT_EQ(restart_only_changes(running, next),
              (std::vector<std::string>{"interface", "maps", "api.socket"}));
    const config::Settings applied = reloadable_settings(running, next);
    EXPECT_EQ(applied.hash_seed, 7u);
    EXPECT_EQ(applied.mtu, 9000);
    EXPECT_EQ(applied.api_socket, running.api_socket);
    EXPECT_EQ(applied.maps, running.maps);
    EXPECT_EQ(applied.interface, running.interface);
    EXPECT_TRUE(reloadable_changes(applied, next).empty());
}

TEST(Reload, HealthHistoryAppliesAtOnce) {
    config::Settings running, next;
    next.health_history = 100;
    EXPECT_EQ(reloadable_changes(running, next), (std::vector<std::string>{"health_history"}));
    EXPECT_TRUE(restart_only_changes(running, next).empty());
    EXPECT_EQ(reloadable_settings(running, next).health_history, 100u);
}

TEST(Reload, DisruptiveChangesAreTheOnesThatRemapFlows) {
    config::Settings a, b;
    const std::vector<config::VipSpec> running = {vip("198.51.100.10"), vip("198.51.100.11")};
    EXPECT_TRUE(disruptive_changes(a, b, running, running).empty());

    std::vector<config::VipSpec> next = running;
    next[0].backends.push_back({});  // a backend change moves ~1/N, and is not "disruptive"
    next[1].name = "renamed";
    next.push_back(vip("198.51.100.12", 131071));  // a new VIP has no flows yet
    EXPECT_TRUE(disruptive_changes(a, b, running, next).empty());

    next[0].ring_size = 131071;
    next[1].hash = config::HashMode::kSourceIp;
    b.hash_seed = 99;
    auto d = disruptive_changes(a, b, running, next);
    ASSERT_EQ(d.size(), 3u);
    EXPECT_NE(d[0].find("hash_seed 0 -> 99"), std::string::npos) << d[0];
    EXPECT_NE(d[1].find("198.51.100.10:80/tcp: ring_size 65537 -> 131071"), std::string::npos)
        << d[1];
    EXPECT_NE(d[2].find("198.51.100.11:80/tcp: hash"), std::string::npos) << d[2];
}

TEST(Reload, ConntrackBudgetAndSweepApplyAtOnceResizeWaits) {
    config::Settings running, next;
    next.conntrack.insert_rate = 500;
    next.conntrack.insert_burst = 1000;
    next.conntrack.sweep_interval = std::chrono::seconds(30);
    next.conntrack.resize = config::ConntrackResize::kReplace;
    EXPECT_EQ(reloadable_changes(running, next),
              (std::vector<std::string>{"conntrack.insert_rate", "conntrack.insert_burst",
                                        "conntrack.sweep_interval"}));
    EXPECT_EQ(restart_only_changes(running, next), (std::vector<std::string>{"conntrack.resize"}));
    const config::Settings applied = reloadable_settings(running, next);
    EXPECT_EQ(applied.conntrack.insert_rate, 500u);
    EXPECT_EQ(applied.conntrack.insert_burst, 1000u);
    EXPECT_EQ(applied.conntrack.sweep_interval, std::chrono::seconds(30));
    EXPECT_EQ(applied.conntrack.resize, config::ConntrackResize::kRefuse);
}

TEST(Reload, SynFloodSettingsApplyAtOnce) {
    config::Settings running, next;
    next.syn_flood.start_rate = 50'000;
    next.syn_flood.end_after = std::chrono::seconds(10);
    EXPECT_EQ(reloadable_changes(running, next), (std::vector<std::string>{"syn_flood"}));
    EXPECT_TRUE(restart_only_changes(running, next).empty());
    EXPECT_EQ(reloadable_settings(running, next).syn_flood, next.syn_flood);
}

// A reload takes the file's version of every VIP the file's edit touches,
// runtime changes to it or not (with a warning), and keeps every other
// VIP as it runs, runtime changes included.
TEST(Reload, MergeTakesTheFilesEditsAndKeepsRuntimeChangesElsewhere) {
    auto with_backend = [](config::VipSpec v, const char* address, std::uint32_t weight) {
        config::BackendSpec b;
        b.address = *net::IpAddress::parse(address);
        b.weight = weight;
        v.backends.push_back(b);
        return v;
    };
    const config::VipSpec a = with_backend(vip("198.51.100.10"), "203.0.113.11", 100);
    const config::VipSpec b = with_backend(vip("198.51.100.11"), "203.0.113.12", 100);
    const config::VipSpec c = vip("198.51.100.12");
    const config::VipSpec d = vip("198.51.100.13");
    config::VipSpec a_drained = a;
    a_drained.backends[0].state = config::AdminState::kDrain;
    config::VipSpec b_runtime = b, b_file = b;
    b_runtime.backends[0].weight = 5;
    b_file.ring_size = 257;
    const config::VipSpec e = vip("198.51.100.14");  // added at runtime

    // old file a b c d; runtime: a drained, b reweighted, d deleted, e added;
    // new file: b's ring changed, c deleted, d untouched, f added
    const config::VipSpec f = vip("198.51.100.15");
    const ReloadResult r =
        merge_reload({a, b, c, d}, {a, b_file, d, f}, {a_drained, b_runtime, c, e});
    EXPECT_EQ(r.vips, (std::vector<config::VipSpec>{a_drained, b_file, e, f}));
    EXPECT_EQ(r.changed, std::vector<std::string>{b.key()});
    EXPECT_EQ(r.removed, std::vector<std::string>{c.key()});
    EXPECT_EQ(r.added, std::vector<std::string>{f.key()});
    EXPECT_EQ(r.untouched, 3u) << "a and e as they run, d deleted at runtime stays deleted";
    EXPECT_EQ(r.warnings, std::vector<std::string>{
                              "VIP 198.51.100.11:80/tcp: the file's new version replaces runtime "
                              "changes"});
}

// A file that holds what runs (xlbctl export of a host with runtime
// changes) changes nothing: no VIP is reported changed, none replaced.
TEST(Reload, AFileEqualToWhatRunsChangesNothing) {
    config::VipSpec a = vip("198.51.100.10"), b = vip("198.51.100.11");
    config::BackendSpec backend;
    backend.address = *net::IpAddress::parse("203.0.113.11");
    a.backends.push_back(backend);
    config::VipSpec a_drained = a;
    a_drained.backends[0].state = config::AdminState::kDrain;
    const config::VipSpec e = vip("198.51.100.14");  // added at runtime
    // old file a b; runtime: a drained, b deleted, e added; the new file is what runs
    const ReloadResult r = merge_reload({a, b}, {a_drained, e}, {a_drained, e});
    EXPECT_EQ(r.vips, (std::vector<config::VipSpec>{a_drained, e}));
    EXPECT_EQ(r.changed, std::vector<std::string>{});
    EXPECT_EQ(r.added, std::vector<std::string>{});
    EXPECT_EQ(r.removed, std::vector<std::string>{});
    EXPECT_EQ(r.untouched, 2u);
    EXPECT_EQ(r.warnings, std::vector<std::string>{}) << "no runtime change is replaced";
}

TEST(ConntrackSweeper, SweepsCountsAndTracksFloods) {
    test::FakeConntrack table(1024, 2);
    table.set_backend(1, *net::IpAddress::parse("203.0.113.11"), 1);
    table.set_now_ms(100'000);
    const auto at = [](std::uint64_t ms) { return test::FakeConntrack::units(ms); };
    const net::Endpoint vip{*net::IpAddress::parse("198.51.100.53"), 53};
    table.add(*net::Endpoint::parse("192.0.2.1:1000"), vip, IPPROTO_UDP, 1, 1, at(0), at(99'000));
    table.add(*net::Endpoint::parse("192.0.2.2:1000"), vip, IPPROTO_UDP, 1, 1, at(0), at(60'000));
    config::VipSpec dns;
    dns.address = vip.address;
    dns.port = 53;
    dns.protocol = config::Protocol::kUdp;
    std::vector<xlb_ct_cpu> cpus(2);
    auto status = std::make_shared<conntrack::StatusBoard>();
    ConntrackSweeper sweeper(
        ConntrackSweeper::Inputs{table, [&]() -> Result<std::vector<xlb_ct_cpu>> { return cpus; },
                                 [&]() -> Result<std::vector<conntrack::VipInfo>> {
                                     return std::vector<conntrack::VipInfo>{
                                         conntrack::vip_info(dns)};
                                 },
                                 status,
                                 // the agent has ticked the program's clock for a day
                                 std::chrono::steady_clock::now() - std::chrono::hours(24)},
        std::chrono::seconds(10));
    sweeper.sweep_once();
    conntrack::Status s = status->get();
    EXPECT_EQ(s.entries, 1u) << "the entry idle 40 s is past udp's 30 s";
    EXPECT_EQ(s.expired, 1u);
    EXPECT_EQ(s.sweeps, 1u);
    EXPECT_EQ(s.capacity, 1024u);
    ASSERT_TRUE(s.last_sweep_ms);
    EXPECT_EQ(table.size(), 1u);

    cpus[1].inserts = 40;
    cpus[1].skipped = 9;
    cpus[1].last_skip_ns = bpf::monotonic_coarse_ns();
    sweeper.check_floods();
    s = status->get();
    EXPECT_EQ(s.inserts, 40u);
    EXPECT_EQ(s.skipped(), 9u);
    EXPECT_EQ(s.flooded_cpus(), std::vector<unsigned>{1});
    cpus[1].last_skip_ns = 1;  // long ago
    sweeper.check_floods();
    EXPECT_TRUE(status->get().flooded_cpus().empty());
    EXPECT_EQ(describe_flood({3, true, 120}),
              "connection-table flood started on CPU 3 (120 inserts skipped)");
    EXPECT_EQ(describe_flood({3, false, 5000}),
              "connection-table flood ended on CPU 3 (5000 inserts skipped)");
}

// The rates come from two readings of the counters; a failed reading keeps
// the last rates.
TEST(ConntrackSweeper, SamplesEachBackendsNewFlows) {
    test::FakeConntrack table;
    auto status = std::make_shared<conntrack::StatusBoard>();
    std::map<std::uint32_t, std::uint64_t> counters{{1, 100}, {2, 7}};
    bool readable = true;
    ConntrackSweeper sweeper(
        ConntrackSweeper::Inputs{
            table, []() -> Result<std::vector<xlb_ct_cpu>> { return std::vector<xlb_ct_cpu>(1); },
            []() -> Result<std::vector<conntrack::VipInfo>> { return {}; }, status,
            std::chrono::steady_clock::now(),
            [&]() -> Result<std::map<std::uint32_t, std::uint64_t>> {
                if (!readable) return xlb::fail("backend counters unreadable");
                return counters;
            }},
        std::chrono::seconds(3600));
    sweeper.sample_backends();
    EXPECT_TRUE(status->get().backend_new_flows_per_s.empty()) << "one reading: no rate";
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    counters[1] = 150;
    sweeper.sample_backends();
    auto rates = status->get().backend_new_flows_per_s;
    ASSERT_EQ(rates.size(), 2u);
    EXPECT_GT(rates.at(1), 0.0);
    EXPECT_EQ(rates.at(2), 0.0);
    readable = false;
    sweeper.sample_backends();
    EXPECT_EQ(status->get().backend_new_flows_per_s, rates) << "kept";
}

// What the agent wires around the detector: the program gets each change
// of state, the board every sample, a read that fails changes nothing.
TEST(SynFloodWatch, WritesEachChangeIntoTheProgramAndTheBoard) {
    conntrack::SynCounts counts{{7, {0, 0}}};
    bool readable = true;
    std::vector<std::uint32_t> written;
    auto status = std::make_shared<conntrack::SynFloodBoard>();
    SynFloodWatch watch(
        SynFloodWatch::Inputs{[&]() -> Result<conntrack::SynCounts> {
                                  if (!readable) return xlb::fail(EPERM, "read xlb_vip_cookies");
                                  return counts;
                              },
                              [&](std::uint32_t state) { written.push_back(state); }, status},
        config::SynFloodSettings{.start_rate = 1'000, .end_rate = 500, .end_after = 200ms});
    constexpr std::uint64_t kMs = 1'000'000;
    watch.sample(0);
    counts[7][1] += 150;  // 1500/s over 100 ms
    watch.sample(100 * kMs);
    EXPECT_EQ(written, std::vector<std::uint32_t>{XLB_SYN_FLOOD_ANSWERING});
    conntrack::SynFloodStatus s = status->get();
    EXPECT_EQ(s.state, conntrack::SynFloodState::kAnswering);
    EXPECT_TRUE(s.since.has_value());
    EXPECT_EQ(s.floods, 1u);
    EXPECT_EQ(s.peak_cpu, 1u);
    ASSERT_EQ(s.rate_per_cpu.size(), 2u);
    EXPECT_DOUBLE_EQ(s.rate_per_cpu[1], 1'500);

    readable = false;
    watch.sample(200 * kMs);
    EXPECT_EQ(status->get().state, conntrack::SynFloodState::kAnswering) << "kept";
    readable = true;
    // A reload's end_after of 100 ms: the next quiet sample ends it.
    watch.set_settings({.start_rate = 1'000, .end_rate = 500, .end_after = 100ms});
    watch.sample(300 * kMs);
    watch.sample(400 * kMs);
    EXPECT_EQ(written, (std::vector<std::uint32_t>{XLB_SYN_FLOOD_ANSWERING, XLB_SYN_FLOOD_RECENT}));
    EXPECT_EQ(status->get().state, conntrack::SynFloodState::kRecent);
    EXPECT_DOUBLE_EQ(status->get().rate_per_cpu[1], 0);
}

TEST(SynFloodWatch, SaysWhatChangedAndWhy) {
    const config::SynFloodSettings settings;
    EXPECT_EQ(describe_syn_flood({conntrack::SynFloodState::kCalm,
                                  conntrack::SynFloodState::kAnswering,
                                  3,
                                  45'210.4,
                                  {}},
                                 settings),
              "SYN flood started: 45210 SYNs/s on CPU 3 (start_rate 20000/s); VIPs with "
              "syn_cookies auto answer SYNs with cookies");
    EXPECT_EQ(describe_syn_flood({conntrack::SynFloodState::kAnswering,
                                  conntrack::SynFloodState::kRecent, 3, 45'210.4, 12'300ms},
                                 settings),
              "SYN flood ended after 12.3 s (peak 45210 SYNs/s on CPU 3; every CPU below end_rate "
              "10000/s for 5000 ms); SYNs go to backends again, cookies already sent are still "
              "accepted for 130 s");
    EXPECT_NE(describe_syn_flood({conntrack::SynFloodState::kRecent,
                                  conntrack::SynFloodState::kCalm, 3, 45'210.4, 12'300ms},
                                 settings)
                  .find("have expired"),
              std::string::npos);
}

TEST(SynFloodWatch, ThreadSamplesAtOnceAndStopsPromptly) {
    std::atomic<int> reads{0};
    auto status = std::make_shared<conntrack::SynFloodBoard>();
    SynFloodWatch watch(SynFloodWatch::Inputs{[&]() -> Result<conntrack::SynCounts> {
                                                  ++reads;
                                                  return conntrack::SynCounts{};
                                              },
                                              [](std::uint32_t) {}, status},
                        {});
    watch.start();
    for (int i = 0; i < 200 && reads < 2; ++i)
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
    EXPECT_GE(reads.load(), 2) << "every 100 ms";
    const auto before = std::chrono::steady_clock::now();
    watch.stop();
    EXPECT_LT(std::chrono::steady_clock::now() - before, std::chrono::milliseconds(500));
}

TEST(ConntrackSweeper, ThreadStartsAndStopsPromptly) {
    test::FakeConntrack table;
    auto status = std::make_shared<conntrack::StatusBoard>();
    ConntrackSweeper sweeper(
        ConntrackSweeper::Inputs{
            table, []() -> Result<std::vector<xlb_ct_cpu>> { return std::vector<xlb_ct_cpu>(1); },
            []() -> Result<std::vector<conntrack::VipInfo>> { return {}; }, status},
        std::chrono::seconds(3600));
    sweeper.start();
    for (int i = 0; i < 200 && status->get().sweeps == 0; ++i)
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
    EXPECT_EQ(status->get().sweeps, 1u) << "the first sweep runs at once";
    const auto before = std::chrono::steady_clock::now();
    sweeper.stop();
    EXPECT_LT(std::chrono::steady_clock::now() - before, std::chrono::milliseconds(500));
}

}  // namespace
}  // namespace xlb::agent
