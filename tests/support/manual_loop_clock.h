// SPDX-License-Identifier: Apache-2.0
// A ControlLoop clock that moves only when the test moves it, so back-offs,
// retries and windows are checked at exact times without sleeping.
#pragma once

#include <atomic>
#include <chrono>

#include "xlb/control/loop.h"

namespace xlb::test {

class ManualLoopClock final : public control::LoopClock {
public:
    using Clock = control::Clock;

    explicit ManualLoopClock(Clock::time_point start = Clock::now())
        : now_(start.time_since_epoch().count()) {}

    Clock::time_point now() const override {
        return Clock::time_point(Clock::duration(now_.load()));
    }
    void advance(Clock::duration by) { now_ += by.count(); }

    // A deadline is reached only by advance(), which cannot notify a
    // condition variable it does not know: look again every millisecond.
    bool wait_until(std::unique_lock<std::mutex>& lock, std::condition_variable& cv,
                    Clock::time_point deadline, const std::function<bool()>& ready) const override {
        while (!ready()) {
            if (now() >= deadline) return false;
            cv.wait_for(lock, std::chrono::milliseconds(1));
        }
        return true;
    }

private:
    std::atomic<Clock::rep> now_;
};

}  // namespace xlb::test
