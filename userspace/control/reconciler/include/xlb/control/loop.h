// SPDX-License-Identifier: Apache-2.0
// Runs a Reconciler on its own thread with a worker thread for table builds.
// Everything that changes desired or observed state arrives as a task on the
// control thread's queue; nothing else touches the reconciler. Changes that
// arrive while tables are being built are coalesced into the next pass.
#pragma once

#include <atomic>
#include <condition_variable>
#include <deque>
#include <functional>
#include <future>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

#include "xlb/control/reconciler.h"

namespace xlb::control {

// The loop's only source of time: what it passes to the reconciler and how
// long it sleeps. The steady clock in the agent; tests pass a clock they
// move by hand, so back-offs and windows are checked without sleeping.
class LoopClock {
public:
    virtual ~LoopClock() = default;
    virtual Clock::time_point now() const = 0;
    // Waits on cv (lock held) until ready() or until the clock reaches
    // deadline; returns ready().
    virtual bool wait_until(std::unique_lock<std::mutex>& lock, std::condition_variable& cv,
                            Clock::time_point deadline,
                            const std::function<bool()>& ready) const = 0;
};

// std::chrono::steady_clock.
const LoopClock& steady_loop_clock();

class ControlLoop {
public:
    using Task = std::function<void(Reconciler&)>;
    using PublishObserver = std::function<void(const PublishRecord&)>;
    using ErrorObserver = std::function<void(const Error&)>;
    // After each pass that planned (and, when tables were built, published):
    // e.g. to report panic changes decided by plan() without a new table.
    using PassObserver = std::function<void(Reconciler&)>;
    // Two-phase publish (docs/fleet.md, "Tables that go live together"):
    // tables just built are held until ready() says they may go live, at
    // most the time prepare() gave; nothing else is planned meanwhile. Both
    // run on the control thread, which posted tasks wake to ask ready()
    // again.
    struct PublishGate {
        std::function<Clock::duration(const std::vector<BuildResult>&)> prepare;
        std::function<bool(const std::vector<BuildResult>&)> ready;
    };

    struct Options {
        // How often the loop wakes without work: retries failed publishes
        // and proves to /livez that the thread is alive.
        std::chrono::milliseconds idle_tick{500};
        const LoopClock* clock = &steady_loop_clock();
    };

    ControlLoop(Reconciler& reconciler, Options options);
    ~ControlLoop();
    ControlLoop(const ControlLoop&) = delete;
    ControlLoop& operator=(const ControlLoop&) = delete;

    // Observers run on the control thread; set them before start().
    void on_publish(PublishObserver observer) { publish_observer_ = std::move(observer); }
    void on_error(ErrorObserver observer) { error_observer_ = std::move(observer); }
    void on_pass(PassObserver observer) { pass_observer_ = std::move(observer); }
    void set_publish_gate(PublishGate gate) { gate_ = std::move(gate); }

    void start();
    void stop();

    // Runs fn on the control thread. The future is ready once the reconcile
    // pass that follows fn has published (or found nothing to publish).
    template <typename R>
    std::future<R> call(std::function<R(Reconciler&)> fn) {
        auto promise = std::make_shared<std::promise<R>>();
        auto future = promise->get_future();
        post_with_completion([fn = std::move(fn), promise](Reconciler& r) -> std::function<void()> {
            auto value = std::make_shared<R>(fn(r));
            return [promise, value] { promise->set_value(std::move(*value)); };
        });
        return future;
    }
    // Runs fn on the control thread; the future is ready as soon as fn
    // returned, without waiting for a publish (which may be held).
    template <typename R>
    std::future<R> query(std::function<R(Reconciler&)> fn) {
        auto promise = std::make_shared<std::promise<R>>();
        auto future = promise->get_future();
        post([fn = std::move(fn), promise](Reconciler& r) { promise->set_value(fn(r)); });
        return future;
    }
    // Fire and forget (health observations, timers).
    void post(Task task);

    // Time of the last iteration of each thread, for /livez.
    Clock::time_point control_heartbeat() const {
        return Clock::time_point(Clock::duration(control_beat_.load()));
    }
    Clock::time_point worker_heartbeat() const {
        return Clock::time_point(Clock::duration(worker_beat_.load()));
    }

private:
    using CompletingTask = std::function<std::function<void()>(Reconciler&)>;
    void post_with_completion(CompletingTask task);
    void control_main();
    void worker_main();

    Reconciler& reconciler_;
    Options options_;
    PublishObserver publish_observer_;
    ErrorObserver error_observer_;
    PassObserver pass_observer_;
    PublishGate gate_;

    std::mutex mu_;
    std::condition_variable cv_;
    std::deque<CompletingTask> tasks_;
    std::optional<std::vector<BuildResult>> built_;  // results from the worker
    bool stopping_ = false;

    std::mutex worker_mu_;
    std::condition_variable worker_cv_;
    std::optional<std::vector<BuildJob>> to_build_;
    bool worker_stopping_ = false;

    std::atomic<Clock::rep> control_beat_{0};
    std::atomic<Clock::rep> worker_beat_{0};
    std::thread control_thread_;
    std::thread worker_thread_;
};

}  // namespace xlb::control
