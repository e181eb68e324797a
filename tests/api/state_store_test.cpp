// SPDX-License-Identifier: Apache-2.0
// The state file as the epochs' journal (docs/api.md, "Conventions"): the
// epoch fields' round trip and compatibility, and a real StateStore written
// by a reconciler through its EpochJournal, read back as a kill -9 would
// leave it.
#include "xlb/api/state_store.h"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>

#include "recording_data_plane.h"
#include "xlb/control/reconciler.h"

namespace xlb::api {
namespace {

using json = nlohmann::json;
namespace fs = std::filesystem;
using control::Clock;

constexpr const char* kWeb = "198.51.100.10:80/tcp";

// Keeps the rings and reports them live, as pinned maps would.
struct RingsOnly : test::RecordingDataPlane {
    RingsOnly() { reports_live_rings = true; }
};

config::VipSpec web(std::size_t backends, std::uint32_t weight = 100) {
    config::VipSpec v;
    v.address = *net::IpAddress::parse("198.51.100.10");
    v.port = 80;
    v.ring_size = 251;
    for (std::size_t i = 0; i < backends; ++i) {
        config::BackendSpec b;
        b.address =
            net::IpAddress::v4(10, static_cast<std::uint8_t>(i >> 16),
                               static_cast<std::uint8_t>(i >> 8), static_cast<std::uint8_t>(i));
        b.weight = i == 0 ? weight : 100;
        v.backends.push_back(b);
    }
    return v;
}

class StateStoreEpochs : public ::testing::Test {
protected:
    void SetUp() override {
        // TMPDIR: to measure the write on another file system than /tmp
        const char* tmp = std::getenv("TMPDIR");
        std::string tmpl = std::string(tmp && *tmp ? tmp : "/tmp") + "/xlb-state-store-test-XXXXXX";
        ASSERT_NE(mkdtemp(tmpl.data()), nullptr);
        dir = tmpl;
        path = dir + "/state.json";
    }
    void TearDown() override { fs::remove_all(dir); }

    // An agent's start: load, restore, journal into the same file.
    struct Agent {
        RingsOnly& dp;
        StateStore store;
        control::Reconciler rec;
        Agent(RingsOnly& data_plane, const std::string& path)
            : dp(data_plane), store(path), rec(dp, {16, 64}) {
            auto loaded = store.load();
            EXPECT_TRUE(loaded) << loaded.error();
            if (loaded && *loaded) {
                EXPECT_TRUE(restore_ids_and_epochs(rec, **loaded).empty());
            }
            rec.set_epoch_journal([this](control::Reconciler& r) { return store.save_current(r); });
        }
        control::VipStatus apply(const config::VipSpec& v) {
            rec.set_vips({v});
            auto ok = rec.reconcile(Clock::now());
            EXPECT_TRUE(ok);
            return *rec.vip_status(v.key());
        }
    };

    StateFile read() {
        auto loaded = StateStore(path).load();
        EXPECT_TRUE(loaded && *loaded);
        return **loaded;
    }

    std::string dir, path;
};

TEST(StateFileEpochs, RoundTripAndOlderFiles) {
    StateFile s;
    s.config_digest = "0123456789abcdef";
    s.epochs[kWeb] = 7;
    s.checksums[kWeb] = 0x5bf6441c8ac68df2ULL;
    s.epochs_reserved[kWeb] = 22;
    const std::string text = encode_state(s);
    EXPECT_NE(text.find("\"5bf6441c8ac68df2\""), std::string::npos) << text;
    auto back = decode_state(text);
    ASSERT_TRUE(back) << back.error();
    EXPECT_EQ(back->epochs.at(kWeb), 7u);
    EXPECT_EQ(back->checksums.at(kWeb), 0x5bf6441c8ac68df2ULL);
    EXPECT_EQ(back->epochs_reserved.at(kWeb), 22u);

    // a file written before checksums and reservations still loads
    json old = json::parse(text);
    old.erase("checksums");
    old.erase("epochs_reserved");
    auto older = decode_state(old.dump());
    ASSERT_TRUE(older) << older.error();
    EXPECT_EQ(older->epochs.at(kWeb), 7u);
    EXPECT_TRUE(older->checksums.empty());

    json bad = json::parse(text);
    bad["checksums"][kWeb] = "5BF6";
    auto error = decode_state(bad.dump());
    ASSERT_FALSE(error);
    EXPECT_NE(error.error().message().find("checksums[\"198.51.100.10:80/tcp\"]"),
              std::string::npos)
        << error.error();
    bad = json::parse(text);
    bad["epochs_reserved"][kWeb] = -1;
    ASSERT_FALSE(decode_state(bad.dump()));
}

// The failure this guards against: SIGHUP saved the state (epoch 202) before
// its publish took 203; kill -9; the restart named its table 202 and the next
// change 203.
TEST_F(StateStoreEpochs, SaveBeforeAPublishThenKillNineNeverRepeatsAnEpoch) {
    RingsOnly dp;
    std::map<std::uint64_t, std::uint64_t> named;  // epoch -> checksum, over every run
    auto note = [&](const control::VipStatus& s) {
        auto [it, fresh] = named.emplace(s.epoch, s.checksum);
        EXPECT_EQ(it->second, s.checksum) << "epoch " << s.epoch << " names two tables";
    };
    std::uint64_t last = 0;
    {
        Agent a(dp, path);
        auto s = a.apply(web(3));
        note(s);
        last = s.epoch;
        // SIGHUP: the desired state is saved first, then published
        a.rec.set_vips({web(3, 250)});
        ASSERT_TRUE(a.store.save_current(a.rec));
        ASSERT_TRUE(a.rec.reconcile(Clock::now()));
        s = *a.rec.vip_status(kWeb);
        note(s);
        EXPECT_GT(s.epoch, last);
        last = s.epoch;
        const StateFile f = read();
        EXPECT_GE(f.epochs_reserved.at(kWeb), s.epoch) << "the file bounds every epoch used";
    }  // kill -9: no save at exit
    {
        Agent b(dp, path);
        const auto publishes = dp.publishes;
        auto s = b.apply(web(3, 250));
        EXPECT_EQ(dp.publishes, publishes) << "the live ring is adopted";
        note(s);
        EXPECT_GT(s.epoch, last) << "unproven: above every reserved epoch";
        last = s.epoch;
        s = b.apply(web(3, 300));
        note(s);
        EXPECT_GT(s.epoch, last);
        last = s.epoch;
        // clean stop
        b.rec.release_epoch_reservations();
        ASSERT_TRUE(b.store.save_current(b.rec));
        EXPECT_EQ(read().epochs_reserved.at(kWeb), s.epoch);
        EXPECT_EQ(read().checksums.at(kWeb), s.checksum);
    }
    {
        Agent c(dp, path);
        auto s = c.apply(web(3, 300));
        note(s);
        EXPECT_EQ(s.epoch, last) << "after a clean stop the live table keeps its epoch";
        s = c.apply(web(3, 100));
        note(s);
        EXPECT_EQ(s.epoch, last + 1);
    }
}

// Rough cost of one journal write (the whole state file, fsync, rename,
// fsync of the directory) at 1,000 backends: paid once per kEpochReserve / 2
// publishes of a VIP, after its table went live.
TEST_F(StateStoreEpochs, MeasuredWriteAtAThousandBackends) {
    RingsOnly dp;
    Agent a(dp, path);
    config::VipSpec v = web(1000);
    v.ring_size = 10007;
    a.apply(v);
    constexpr int kWrites = 20;
    std::vector<double> ms;
    for (int i = 0; i < kWrites; ++i) {
        const auto t0 = Clock::now();
        ASSERT_TRUE(a.store.save_current(a.rec));
        ms.push_back(std::chrono::duration<double, std::milli>(Clock::now() - t0).count());
    }
    // of which: the snapshot and its JSON text (the rest is the file system)
    std::vector<double> encode_ms;
    for (int i = 0; i < kWrites; ++i) {
        const auto t0 = Clock::now();
        const std::string text = encode_state(snapshot_state(a.rec, "digest"));
        encode_ms.push_back(std::chrono::duration<double, std::milli>(Clock::now() - t0).count());
        ASSERT_FALSE(text.empty());
    }
    std::sort(ms.begin(), ms.end());
    std::sort(encode_ms.begin(), encode_ms.end());
    std::printf(
        "[ measured ] state file write at 1000 backends (%ju bytes, %s): median %.2f ms, max %.2f "
        "ms; "
        "snapshot + JSON alone: median %.2f ms\n",
        static_cast<std::uintmax_t>(fs::file_size(path)), dir.c_str(), ms[kWrites / 2], ms.back(),
        encode_ms[kWrites / 2]);
}

// ---- the start-up rule: the file and the runtime changes, VIP by VIP ---------------------

constexpr const char* kApi = "198.51.100.20:443/tcp";

config::VipSpec api_vip() {
    config::VipSpec v = web(2);
    v.port = 443;
    v.address = *net::IpAddress::parse("198.51.100.20");
    return v;
}

config::VipSpec* find(std::vector<config::VipSpec>& vips, const std::string& key) {
    for (auto& v : vips)
        if (v.key() == key) return &v;
    return nullptr;
}

// A state written against `base` after the API changed it into `running`.
StateFile written(const std::vector<config::VipSpec>& base,
                  const std::vector<config::VipSpec>& running) {
    StateFile s;
    s.config_digest = config_digest(base);
    s.config_vips = base;
    s.vips = running;
    return s;
}

bool has(const std::vector<std::string>& lines, const std::string& part) {
    return std::any_of(lines.begin(), lines.end(),
                       [&](const std::string& l) { return l.find(part) != std::string::npos; });
}

std::string joined(const std::vector<std::string>& lines) {
    std::string out;
    for (const auto& l : lines) out += l + "\n";
    return out;
}

TEST(StateFileConfigVips, RoundTripAndOlderFilesWithoutThem) {
    StateFile s = written({web(2)}, {web(3)});
    const std::string text = encode_state(s);
    auto back = decode_state(text);
    ASSERT_TRUE(back) << back.error();
    ASSERT_TRUE(back->config_vips);
    EXPECT_EQ(*back->config_vips, std::vector<config::VipSpec>{web(2)});
    EXPECT_EQ(back->vips, std::vector<config::VipSpec>{web(3)});
    EXPECT_EQ(encode_state(*back), text);

    json old = json::parse(text);
    old.erase("config_vips");
    auto older = decode_state(old.dump());
    ASSERT_TRUE(older) << older.error();
    EXPECT_FALSE(older->config_vips);
    EXPECT_EQ(encode_state(*older).find("config_vips"), std::string::npos);

    json bad = json::parse(text);
    bad["config_vips"][0]["port"] = "eighty";
    auto error = decode_state(bad.dump());
    ASSERT_FALSE(error);
    EXPECT_NE(error.error().message().find("config_vips"), std::string::npos) << error.error();
}

// The case found by hand: a drain through the API, then an edit of another
// VIP in the file and a restart. The drain used to be reverted with a log
// line; it is kept, and said so.
TEST(StartupRule, AnEditElsewhereKeepsARuntimeDrainAndReportsIt) {
    const std::vector<config::VipSpec> base = {web(3), api_vip()};
    std::vector<config::VipSpec> running = base;
    find(running, kWeb)->backends[1].state = config::AdminState::kDrain;
    std::vector<config::VipSpec> file = base;
    find(file, kApi)->backends[0].weight = 300;

    const StartupDecision d = decide_startup_vips(file, written(base, running));
    EXPECT_EQ(d.source, StartupDecision::Source::kMerged);
    EXPECT_TRUE(d.conflicts.empty()) << joined(d.conflicts);
    EXPECT_FALSE(d.backup_state) << "nothing was dropped";
    std::vector<config::VipSpec> vips = d.vips;
    ASSERT_EQ(vips.size(), 2u);
    EXPECT_EQ(*find(vips, kWeb), *find(running, kWeb)) << "the drain is kept";
    EXPECT_EQ(*find(vips, kApi), *find(file, kApi)) << "the file's edit is applied";
    EXPECT_TRUE(has(d.warnings,
                    "VIP 198.51.100.10:80/tcp backend 10.0.0.1: state drain at "
                    "runtime, active in the file: keeping the runtime change"))
        << joined(d.warnings);
    EXPECT_FALSE(has(d.warnings, kApi)) << joined(d.warnings);

    // The same file again (nothing edited): the drain is still kept and said so.
    StateFile again = written(file, d.vips);
    const StartupDecision same = decide_startup_vips(file, again);
    EXPECT_EQ(same.source, StartupDecision::Source::kState);
    EXPECT_EQ(same.vips, d.vips);
    EXPECT_TRUE(has(same.warnings, "backend 10.0.0.1: state drain at runtime"))
        << joined(same.warnings);
}

TEST(StartupRule, AnEditOfTheSameVipConflictsUntilTheOperatorChooses) {
    const std::vector<config::VipSpec> base = {web(3), api_vip()};
    std::vector<config::VipSpec> running = base;
    find(running, kWeb)->backends[1].state = config::AdminState::kDrain;
    std::vector<config::VipSpec> file = base;
    find(file, kWeb)->backends[2].weight = 7;
    find(file, kApi)->ring_size = 509;
    const StateFile state = written(base, running);

    const StartupDecision refused = decide_startup_vips(file, state);
    EXPECT_EQ(refused.conflicts,
              (std::vector<std::string>{
                  "VIP 198.51.100.10:80/tcp backend 10.0.0.1: state drain at runtime, active in "
                  "the file",
                  "VIP 198.51.100.10:80/tcp backend 10.0.0.2: weight 100 at runtime, 7 in the "
                  "file"}));
    const Error e = startup_refusal(refused, "/var/lib/xlb/state.json");
    EXPECT_NE(e.message().find("2 runtime change(s) recorded in /var/lib/xlb/state.json"),
              std::string::npos)
        << e.message();
    EXPECT_NE(e.message().find("--prefer file"), std::string::npos) << e.message();
    EXPECT_NE(e.message().find("--prefer runtime"), std::string::npos) << e.message();

    const StartupDecision by_file = decide_startup_vips(file, state, config::Prefer::kFile);
    EXPECT_TRUE(by_file.conflicts.empty());
    EXPECT_TRUE(by_file.backup_state) << "the dropped runtime version stays in the backup";
    std::vector<config::VipSpec> vips = by_file.vips;
    EXPECT_EQ(*find(vips, kWeb), *find(file, kWeb));
    EXPECT_EQ(*find(vips, kApi), *find(file, kApi));
    EXPECT_TRUE(has(by_file.warnings,
                    "backend 10.0.0.1: state drain at runtime, active in the "
                    "file (changed both in the file and at runtime): --prefer "
                    "file: the file's version is used"))
        << joined(by_file.warnings);

    const StartupDecision by_runtime = decide_startup_vips(file, state, config::Prefer::kRuntime);
    EXPECT_TRUE(by_runtime.conflicts.empty());
    EXPECT_FALSE(by_runtime.backup_state);
    vips = by_runtime.vips;
    EXPECT_EQ(*find(vips, kWeb), *find(running, kWeb));
    EXPECT_EQ(*find(vips, kApi), *find(file, kApi)) << "an edit without a conflict still applies";
    EXPECT_TRUE(has(by_runtime.warnings, "--prefer runtime: the runtime version is used"))
        << joined(by_runtime.warnings);
}

TEST(StartupRule, VipsAddedAndRemovedOnEitherSide) {
    config::VipSpec gone = api_vip();
    gone.port = 8080;
    const std::vector<config::VipSpec> base = {web(2), api_vip(), gone};
    // runtime: adds a VIP and deletes `gone`; the file deletes api_vip and adds one
    config::VipSpec added_at_runtime = web(1);
    added_at_runtime.port = 81;
    config::VipSpec added_in_file = web(1);
    added_in_file.port = 82;
    const std::vector<config::VipSpec> running = {web(2), api_vip(), added_at_runtime};
    const std::vector<config::VipSpec> file = {web(2), gone, added_in_file};

    const StartupDecision d = decide_startup_vips(file, written(base, running));
    EXPECT_TRUE(d.conflicts.empty()) << joined(d.conflicts);
    std::vector<std::string> keys;
    for (const auto& v : d.vips) keys.push_back(v.key());
    std::sort(keys.begin(), keys.end());
    EXPECT_EQ(keys, (std::vector<std::string>{"198.51.100.10:80/tcp", "198.51.100.10:81/tcp",
                                              "198.51.100.10:82/tcp"}));
    EXPECT_TRUE(has(d.warnings, "VIP 198.51.100.10:81/tcp: at runtime, not in the file"))
        << joined(d.warnings);
    EXPECT_TRUE(has(d.warnings, "VIP 198.51.100.20:8080/tcp: in the file, not at runtime"))
        << joined(d.warnings);

    // The file deletes a VIP the API changed: a conflict.
    std::vector<config::VipSpec> changed = running;
    find(changed, kApi)->backends[0].weight = 1;
    const StartupDecision c = decide_startup_vips(file, written(base, changed));
    EXPECT_EQ(c.conflicts,
              (std::vector<std::string>{"VIP 198.51.100.20:443/tcp: at runtime, not in the file"}));
}

// Without a record of the file the state was written against (a state file
// from before, or a list that does not match its digest), nothing says which
// side changed: every difference is a conflict, agreement is not.
TEST(StartupRule, AnUnknownBaseMakesEveryDifferenceAConflict) {
    const std::vector<config::VipSpec> base = {web(2), api_vip()};
    std::vector<config::VipSpec> running = base;
    find(running, kWeb)->backends[0].state = config::AdminState::kDisabled;
    std::vector<config::VipSpec> file = base;
    find(file, kApi)->backends[0].weight = 5;

    StateFile old = written(base, running);
    old.config_vips.reset();
    const StartupDecision d = decide_startup_vips(file, old);
    EXPECT_EQ(d.conflicts,
              (std::vector<std::string>{
                  "VIP 198.51.100.10:80/tcp backend 10.0.0.0: state disabled at runtime, active "
                  "in the file",
                  "VIP 198.51.100.20:443/tcp backend 10.0.0.0: weight 100 at runtime, 5 in the "
                  "file"}));

    StateFile tampered = written(base, running);
    tampered.config_vips = file;  // not what config_digest was taken of
    EXPECT_EQ(decide_startup_vips(file, tampered).conflicts, d.conflicts);

    // an old state file whose VIPs agree with the file: nothing to decide
    StateFile agreeing = old;
    agreeing.vips = file;
    const StartupDecision ok = decide_startup_vips(file, agreeing);
    EXPECT_TRUE(ok.conflicts.empty());
    EXPECT_TRUE(ok.warnings.empty()) << joined(ok.warnings);
    EXPECT_EQ(ok.vips.size(), 2u);
}

TEST_F(StateStoreEpochs, TheStoreRecordsTheFileItWritesAgainst) {
    RingsOnly dp;
    control::Reconciler rec(dp, {16, 64});
    rec.set_vips({web(3, 50)});
    StateStore store(path, {web(3)});
    ASSERT_TRUE(store.save_current(rec));
    StateFile s = read();
    EXPECT_EQ(s.config_digest, config_digest({web(3)}));
    ASSERT_TRUE(s.config_vips);
    EXPECT_EQ(*s.config_vips, std::vector<config::VipSpec>{web(3)});
    EXPECT_EQ(s.vips, std::vector<config::VipSpec>{web(3, 50)});
    store.set_config_vips({web(4)});
    ASSERT_TRUE(store.save_current(rec));
    s = read();
    EXPECT_EQ(s.config_digest, config_digest({web(4)}));
    EXPECT_EQ(*s.config_vips, std::vector<config::VipSpec>{web(4)});
}

}  // namespace
}  // namespace xlb::api
