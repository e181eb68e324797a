// SPDX-License-Identifier: Apache-2.0
// The SYN flood detector behind `syn_cookies: auto` on a fake clock: on
// within one sample of the threshold, hysteresis between the two rates, the
// end_after hold, RECENT's expiry, counters that go back or appear, several
// CPUs, a reload's settings.
#include "xlb/conntrack/syn_flood.h"

#include <gtest/gtest.h>

namespace xlb::conntrack {
namespace {

using namespace std::chrono_literals;

constexpr std::uint64_t kMs = 1'000'000;

// The agent's loop in miniature: per-CPU SYN counters of one VIP, sampled
// every `step` of a fake clock.
class Feed {
public:
    explicit Feed(config::SynFloodSettings settings = {}, std::size_t cpus = 2)
        : detector(settings), counts{{1, std::vector<std::uint64_t>(cpus, 0)}} {
        EXPECT_FALSE(detector.update(now_ns, counts)) << "the first sample only sets the base";
    }
    // `per_cpu_rate` SYNs per second on each CPU over the next `step`.
    std::optional<SynFloodChange> run(std::vector<double> per_cpu_rate,
                                      std::chrono::milliseconds step = 100ms) {
        for (std::size_t cpu = 0; cpu < per_cpu_rate.size(); ++cpu)
            counts[1][cpu] += static_cast<std::uint64_t>(per_cpu_rate[cpu] * step.count() / 1000);
        now_ns += static_cast<std::uint64_t>(step.count()) * kMs;
        return detector.update(now_ns, counts);
    }
    // Keeps the rates for `samples` samples; the first change, if any.
    std::optional<SynFloodChange> hold(std::vector<double> rates, int samples) {
        for (int i = 0; i < samples; ++i)
            if (auto c = run(rates)) return c;
        return std::nullopt;
    }

    SynFloodDetector detector;
    SynCounts counts;
    std::uint64_t now_ns = 1'000 * kMs;
};

TEST(SynFloodDetector, AnswersWithinOneSampleOfCrossingStartRate) {
    Feed f;
    EXPECT_FALSE(f.hold({19'000, 0}, 20));
    EXPECT_FALSE(f.run({20'000, 0})) << "at start_rate is not over it";
    EXPECT_EQ(f.detector.state(), SynFloodState::kCalm);
    auto c = f.run({0, 20'010});
    ASSERT_TRUE(c) << "the first sample over start_rate turns it on";
    EXPECT_EQ(c->from, SynFloodState::kCalm);
    EXPECT_EQ(c->to, SynFloodState::kAnswering);
    EXPECT_EQ(c->cpu, 1u);
    EXPECT_NEAR(c->rate, 20'010, 1);
    EXPECT_EQ(f.detector.state(), SynFloodState::kAnswering);
    EXPECT_EQ(f.detector.floods(), 1u);
    ASSERT_EQ(f.detector.rates().size(), 2u);
    EXPECT_NEAR(f.detector.rates()[1], 20'010, 1);
}

TEST(SynFloodDetector, RatesBetweenTheTwoThresholdsKeepItAnswering) {
    Feed f;
    ASSERT_TRUE(f.run({50'000, 0}));
    // 15000/s is under start_rate but not under end_rate: far longer than
    // end_after, still answering.
    EXPECT_FALSE(f.hold({15'000, 0}, 200));
    EXPECT_EQ(f.detector.state(), SynFloodState::kAnswering);
    // And calm at 15000/s does not start one.
    Feed calm;
    EXPECT_FALSE(calm.hold({15'000, 15'000}, 200));
    EXPECT_EQ(calm.detector.state(), SynFloodState::kCalm);
}

TEST(SynFloodDetector, EndsOnceEveryCpuStayedBelowEndRateForEndAfter) {
    Feed f;  // end_rate 10000/s, end_after 5 s, samples every 100 ms
    ASSERT_TRUE(f.run({60'000, 0}));
    EXPECT_FALSE(f.hold({80'000, 0}, 10));
    // 3 s below, then one sample at end_rate: the hold starts over.
    EXPECT_FALSE(f.hold({9'000, 0}, 30));
    EXPECT_FALSE(f.run({10'000, 0}));
    // The 49 samples below cover 4.9 s: not yet.
    EXPECT_FALSE(f.hold({9'000, 9'000}, 49));
    EXPECT_EQ(f.detector.state(), SynFloodState::kAnswering);
    auto c = f.run({9'000, 9'000});
    ASSERT_TRUE(c) << "the 50th sample below ends 5 s after the hold began";
    EXPECT_EQ(c->from, SynFloodState::kAnswering);
    EXPECT_EQ(c->to, SynFloodState::kRecent);
    EXPECT_NEAR(c->rate, 80'000, 1) << "the end reports the flood's peak";
    EXPECT_EQ(c->cpu, 0u);
    EXPECT_EQ(c->lasted, std::chrono::nanoseconds(9'100ms));
}

TEST(SynFloodDetector, RecentTurnsCalmAfterTheCookiesExpire) {
    Feed f;
    ASSERT_TRUE(f.run({30'000, 0}));
    auto ended = f.hold({0, 0}, 51);
    ASSERT_TRUE(ended);
    ASSERT_EQ(ended->to, SynFloodState::kRecent);
    // Samples every second up to just before XLB_SYN_FLOOD_RECENT_MS.
    constexpr int kSeconds = XLB_SYN_FLOOD_RECENT_MS / 1000;
    for (int i = 0; i < kSeconds - 1; ++i) ASSERT_FALSE(f.run({0, 0}, 1000ms)) << i;
    EXPECT_FALSE(f.run({0, 0}, 999ms));
    EXPECT_EQ(f.detector.state(), SynFloodState::kRecent);
    auto c = f.run({0, 0}, 1ms);
    ASSERT_TRUE(c);
    EXPECT_EQ(c->from, SynFloodState::kRecent);
    EXPECT_EQ(c->to, SynFloodState::kCalm);
    EXPECT_EQ(f.detector.state(), SynFloodState::kCalm);
}

TEST(SynFloodDetector, ANewFloodWhileRecentAnswersAgain) {
    Feed f;
    ASSERT_TRUE(f.run({30'000, 0}));
    ASSERT_TRUE(f.hold({0, 0}, 60));
    ASSERT_EQ(f.detector.state(), SynFloodState::kRecent);
    auto c = f.run({0, 25'000});
    ASSERT_TRUE(c);
    EXPECT_EQ(c->from, SynFloodState::kRecent);
    EXPECT_EQ(c->to, SynFloodState::kAnswering);
    EXPECT_EQ(f.detector.floods(), 2u);
    EXPECT_NEAR(f.detector.peak_rate(), 25'000, 1) << "the peak is the new flood's";
    EXPECT_EQ(f.detector.peak_cpu(), 1u);
}

TEST(SynFloodDetector, CountersThatGoBackOrAppearAreNoFlood) {
    Feed f;
    EXPECT_FALSE(f.hold({1'000, 1'000}, 5));
    // A new program's counters (or a reused VIP id) start over from 0.
    f.counts[1] = {100, 0};
    EXPECT_FALSE(f.run({0, 0})) << "a counter that went back is no flood";
    EXPECT_EQ(f.detector.state(), SynFloodState::kCalm);
    EXPECT_FALSE(f.run({1'000, 0}));
    ASSERT_EQ(f.detector.rates().size(), 2u);
    EXPECT_NEAR(f.detector.rates()[0], 1'000, 1) << "counted from the new base";
    // A VIP that gains a cookie flag brings its older count along.
    f.counts[2] = {9'000'000'000, 0};
    EXPECT_FALSE(f.run({0, 0})) << "a VIP that appears adds nothing";
    EXPECT_EQ(f.detector.state(), SynFloodState::kCalm);
    // From then on its SYNs count like any other VIP's.
    f.counts[2][1] += 2'500;
    auto c = f.run({0, 0});
    ASSERT_TRUE(c);
    EXPECT_EQ(c->cpu, 1u);
    EXPECT_NEAR(c->rate, 25'000, 1);
}

TEST(SynFloodDetector, VipsAddUpPerCpu) {
    Feed f;
    f.counts[2] = {0, 0};
    EXPECT_FALSE(f.run({0, 0}));
    // 12000/s to each of two VIPs on CPU 0: 24000/s on that CPU.
    f.counts[2][0] += 1'200;
    auto c = f.run({12'000, 0});
    ASSERT_TRUE(c);
    EXPECT_EQ(c->cpu, 0u);
    EXPECT_NEAR(c->rate, 24'000, 1);
}

TEST(SynFloodDetector, EveryCpuMustCalmDown) {
    Feed f({}, 4);
    auto c = f.run({15'000, 25'000, 0, 0});
    ASSERT_TRUE(c);
    EXPECT_EQ(c->cpu, 1u) << "the CPU over start_rate";
    // CPU 1 calms, CPU 3 still at 11000/s: no end, however long.
    EXPECT_FALSE(f.hold({0, 0, 0, 11'000}, 100));
    EXPECT_EQ(f.detector.state(), SynFloodState::kAnswering);
    EXPECT_NEAR(f.detector.peak_rate(), 25'000, 1);
    auto end = f.hold({9'999, 9'999, 9'999, 9'999}, 50);
    ASSERT_TRUE(end);
    EXPECT_EQ(end->to, SynFloodState::kRecent);
    EXPECT_EQ(end->cpu, 1u);
}

TEST(SynFloodDetector, AReloadsSettingsApplyFromTheNextSample) {
    Feed f;
    EXPECT_FALSE(f.hold({5'000, 0}, 3));
    f.detector.set_settings({.start_rate = 4'000, .end_rate = 1'000, .end_after = 1s});
    ASSERT_TRUE(f.run({5'000, 0}));
    EXPECT_FALSE(f.hold({2'000, 0}, 30)) << "the new end_rate";
    EXPECT_FALSE(f.hold({500, 0}, 9));
    auto c = f.run({500, 0});
    ASSERT_TRUE(c) << "the new end_after: 1 s";
    EXPECT_EQ(c->to, SynFloodState::kRecent);
}

TEST(SynFloodDetector, AClockThatStoodStillGivesNoRate) {
    Feed f;
    f.counts[1][0] += 1'000'000;
    EXPECT_FALSE(f.detector.update(f.now_ns, f.counts));
    EXPECT_EQ(f.detector.state(), SynFloodState::kCalm);
    // The next sample measures the whole burst over its interval.
    EXPECT_TRUE(f.run({0, 0}, 1000ms));
}

TEST(SynFloodDetector, StatesHaveNames) {
    EXPECT_STREQ(to_string(SynFloodState::kCalm), "calm");
    EXPECT_STREQ(to_string(SynFloodState::kAnswering), "answering");
    EXPECT_STREQ(to_string(SynFloodState::kRecent), "recent");
}

}  // namespace
}  // namespace xlb::conntrack
