// SPDX-License-Identifier: Apache-2.0
// The agent's ordered components: started in order, stopped in reverse, and
// a start that fails stops what had started, last first.
#include "xlb/agent/component.h"

#include <gtest/gtest.h>

#include <atomic>
#include <condition_variable>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace xlb::agent {
namespace {

// What the fakes did, in order, and how many of their threads run.
struct Journal {
    std::vector<std::string> events;
    std::atomic<int> threads{0};
};

// Owns a thread from start() to stop(), as the agent's parts do; fails its
// start (starting nothing) when told to.
class FakeComponent : public Component {
public:
    FakeComponent(std::string name, Journal& journal, bool fail = false)
        : name_(std::move(name)), journal_(journal), fail_(fail) {}
    ~FakeComponent() override { EXPECT_FALSE(thread_.joinable()) << name_ << " left running"; }
    std::string name() const override { return name_; }
    Result<void> start() override {
        journal_.events.push_back("start " + name_);
        if (fail_) return xlb::fail("cannot start " + name_, "free it");
        stopping_ = false;
        ++journal_.threads;  // counted here, so that the count is exact on return
        thread_ = std::thread([this] {
            std::unique_lock lock(mu_);
            cv_.wait(lock, [this] { return stopping_; });
            --journal_.threads;
        });
        return {};
    }
    void stop() override {
        journal_.events.push_back("stop " + name_);
        {
            std::lock_guard lock(mu_);
            stopping_ = true;
        }
        cv_.notify_all();
        thread_.join();
    }

private:
    std::string name_;
    Journal& journal_;
    bool fail_;
    std::mutex mu_;
    std::condition_variable cv_;
    bool stopping_ = false;
    std::thread thread_;
};

const std::vector<std::string> kNames = {"lock", "data plane", "loop", "API", "sweeper"};

TEST(Components, StartInOrderAndStopInReverse) {
    Journal journal;
    Components list;
    for (const auto& name : kNames) list.add<FakeComponent>(name, journal);
    EXPECT_TRUE(list.running().empty());

    ASSERT_TRUE(list.start());
    EXPECT_EQ(list.running(), kNames);
    EXPECT_EQ(journal.threads, static_cast<int>(kNames.size()));
    std::vector<std::string> want;
    for (const auto& name : kNames) want.push_back("start " + name);
    EXPECT_EQ(journal.events, want);

    list.stop();
    for (auto name = kNames.rbegin(); name != kNames.rend(); ++name)
        want.push_back("stop " + *name);
    EXPECT_EQ(journal.events, want);
    EXPECT_TRUE(list.running().empty());
    EXPECT_EQ(journal.threads, 0);

    list.stop();  // again: nothing
    EXPECT_EQ(journal.events, want);
}

// For each k: component k fails; 0..k-1 stop in reverse after the failure
// is reported, k is not stopped (it started nothing), none after k starts.
TEST(Components, AFailedStartStopsTheStartedOnesInReverseAndLeavesNothingRunning) {
    for (std::size_t k = 0; k < kNames.size(); ++k) {
        SCOPED_TRACE("failing: " + kNames[k]);
        Journal journal;
        Components list;
        for (std::size_t i = 0; i < kNames.size(); ++i)
            list.add<FakeComponent>(kNames[i], journal, i == k);

        auto started = list.start([&](const Error& e) {
            journal.events.push_back("failed: " + e.message());
            // reported while the components before k still run
            EXPECT_EQ(journal.threads, static_cast<int>(k));
        });
        ASSERT_FALSE(started);
        EXPECT_EQ(started.error().message(), "cannot start " + kNames[k] + " (free it)");

        std::vector<std::string> want;
        for (std::size_t i = 0; i <= k; ++i) want.push_back("start " + kNames[i]);
        want.push_back("failed: cannot start " + kNames[k] + " (free it)");
        for (std::size_t i = k; i-- > 0;) want.push_back("stop " + kNames[i]);
        EXPECT_EQ(journal.events, want);
        EXPECT_TRUE(list.running().empty());
        EXPECT_EQ(journal.threads, 0);

        list.stop();  // the agent's stop after a failed start: nothing more
        EXPECT_EQ(journal.events, want);
    }
}

TEST(Components, TheListStopsWhatRunsWhenDestroyed) {
    Journal journal;
    {
        Components list;
        list.add<FakeComponent>("first", journal);
        list.add<FakeComponent>("second", journal);
        ASSERT_TRUE(list.start());
        EXPECT_EQ(journal.threads, 2);
    }
    EXPECT_EQ(journal.events, (std::vector<std::string>{"start first", "start second",
                                                        "stop second", "stop first"}));
    EXPECT_EQ(journal.threads, 0);
}

TEST(Components, AStepWithoutStopIsSkippedOnTheWayOut) {
    std::vector<std::string> events;
    Components list;
    list.add<StepComponent>("checks", [&]() -> Result<void> {
        events.push_back("checks");
        return {};
    });
    list.add<StepComponent>(
        "lock",
        [&]() -> Result<void> {
            events.push_back("lock");
            return {};
        },
        [&] { events.push_back("unlock"); });
    list.add<StepComponent>("go live", [&]() -> Result<void> { return xlb::fail("attach"); });
    auto started = list.start();
    ASSERT_FALSE(started);
    EXPECT_EQ(started.error().message(), "attach");
    EXPECT_EQ(events, (std::vector<std::string>{"checks", "lock", "unlock"}));
    EXPECT_EQ(list.running(), std::vector<std::string>{});
}

}  // namespace
}  // namespace xlb::agent
