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
            : dp(data_plane), store(path, "digest"), rec(dp, {16, 64}) {
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

}  // namespace
}  // namespace xlb::api
