// SPDX-License-Identifier: Apache-2.0
// What another thread hands a test (a neighbour watcher's events, a probe
// engine's results), with a bounded wait for the next ones: tests wait for
// what they expect to happen, not for time to pass.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <mutex>
#include <vector>

namespace xlb::test {

template <typename T>
class EventLog {
public:
    // The callback: pass std::ref(log) where a std::function is wanted.
    void operator()(T event) {
        std::lock_guard lock(mu_);
        events_.push_back(std::move(event));
        cv_.notify_all();
    }
    // Waits until at least `count` events arrived or `limit` passed; returns
    // every event so far.
    std::vector<T> wait_for(std::size_t count, std::chrono::milliseconds limit) {
        std::unique_lock lock(mu_);
        cv_.wait_for(lock, limit, [&] { return events_.size() >= count; });
        return events_;
    }

private:
    std::mutex mu_;
    std::condition_variable cv_;
    std::vector<T> events_;
};

}  // namespace xlb::test
