// SPDX-License-Identifier: Apache-2.0
#include "xlb/control/loop.h"

namespace xlb::control {

namespace {

class SteadyLoopClock final : public LoopClock {
public:
    Clock::time_point now() const override { return Clock::now(); }
    bool wait_until(std::unique_lock<std::mutex>& lock, std::condition_variable& cv,
                    Clock::time_point deadline, const std::function<bool()>& ready) const override {
        return cv.wait_until(lock, deadline, ready);
    }
};

}  // namespace

const LoopClock& steady_loop_clock() {
    static const SteadyLoopClock clock;
    return clock;
}

ControlLoop::ControlLoop(Reconciler& reconciler, Options options)
    : reconciler_(reconciler), options_(options) {}

ControlLoop::~ControlLoop() { stop(); }

void ControlLoop::start() {
    control_beat_ = options_.clock->now().time_since_epoch().count();
    worker_beat_ = control_beat_.load();
    worker_thread_ = std::thread([this] { worker_main(); });
    control_thread_ = std::thread([this] { control_main(); });
}

void ControlLoop::stop() {
    {
        std::lock_guard lock(mu_);
        stopping_ = true;
    }
    cv_.notify_all();
    if (control_thread_.joinable()) control_thread_.join();
    {
        std::lock_guard lock(worker_mu_);
        worker_stopping_ = true;
    }
    worker_cv_.notify_all();
    if (worker_thread_.joinable()) worker_thread_.join();
}

void ControlLoop::post(Task task) {
    post_with_completion([task = std::move(task)](Reconciler& r) -> std::function<void()> {
        task(r);
        return {};
    });
}

void ControlLoop::post_with_completion(CompletingTask task) {
    {
        std::lock_guard lock(mu_);
        tasks_.push_back(std::move(task));
    }
    cv_.notify_one();
}

void ControlLoop::control_main() {
    const LoopClock& clock = *options_.clock;
    std::vector<std::function<void()>> waiting;    // completions of tasks not yet planned
    std::vector<std::function<void()>> in_flight;  // completions waiting for a build
    bool building = false;
    std::optional<Clock::time_point> previous_rings_due;  // second chance: the next window's end
    std::optional<std::vector<BuildResult>> held;         // built, waiting for the gate
    Clock::time_point held_until{};
    auto complete = [](std::vector<std::function<void()>>& list) {
        for (auto& done : list)
            if (done) done();
        list.clear();
    };

    while (true) {
        std::deque<CompletingTask> tasks;
        std::optional<std::vector<BuildResult>> built;
        {
            // a failed publish waiting out its back-off wakes the loop when due
            auto wake_at = clock.now() + options_.idle_tick;
            if (auto retry = reconciler_.next_retry(); retry && !building)
                wake_at = std::min(wake_at, *retry);
            if (previous_rings_due) wake_at = std::min(wake_at, *previous_rings_due);
            if (held) wake_at = std::min(wake_at, held_until);
            std::unique_lock lock(mu_);
            clock.wait_until(lock, cv_, wake_at,
                             [&] { return stopping_ || !tasks_.empty() || built_.has_value(); });
            if (stopping_) break;
            tasks.swap(tasks_);
            built.swap(built_);
        }
        control_beat_ = clock.now().time_since_epoch().count();

        for (CompletingTask& task : tasks) waiting.push_back(task(reconciler_));

        if (built && gate_.prepare) {
            const Clock::duration wait = gate_.prepare(*built);
            if (wait > Clock::duration::zero()) {
                held = std::move(built);
                held_until = clock.now() + wait;
                built.reset();
            }
        }
        if (held && (clock.now() >= held_until || gate_.ready(*held))) {
            built = std::move(held);
            held.reset();
        }
        if (built) {
            building = false;
            auto records = reconciler_.publish(std::move(*built), clock.now());
            if (!records) {
                if (error_observer_) error_observer_(records.error());
            } else if (publish_observer_) {
                for (const PublishRecord& r : *records) publish_observer_(r);
            }
            complete(in_flight);
        }

        if (!building && reconciler_.has_pending_work(clock.now())) {
            std::vector<BuildJob> jobs = reconciler_.plan(clock.now());
            if (pass_observer_) pass_observer_(reconciler_);
            if (!jobs.empty()) {
                building = true;
                in_flight.insert(in_flight.end(), std::make_move_iterator(waiting.begin()),
                                 std::make_move_iterator(waiting.end()));
                waiting.clear();
                {
                    std::lock_guard lock(worker_mu_);
                    to_build_ = std::move(jobs);
                }
                worker_cv_.notify_one();
            }
        }
        previous_rings_due = reconciler_.expire_previous_rings(clock.now());
        if (!building) complete(waiting);
    }
    complete(waiting);
    complete(in_flight);
}

void ControlLoop::worker_main() {
    const LoopClock& clock = *options_.clock;
    while (true) {
        std::vector<BuildJob> jobs;
        {
            std::unique_lock lock(worker_mu_);
            clock.wait_until(lock, worker_cv_, clock.now() + options_.idle_tick,
                             [&] { return worker_stopping_ || to_build_.has_value(); });
            worker_beat_ = clock.now().time_since_epoch().count();
            if (worker_stopping_) return;
            if (!to_build_) continue;
            jobs = std::move(*to_build_);
            to_build_.reset();
        }
        std::vector<BuildResult> results;
        results.reserve(jobs.size());
        for (const BuildJob& job : jobs) results.push_back(build_table(job));
        {
            std::lock_guard lock(mu_);
            built_ = std::move(results);
        }
        cv_.notify_one();
    }
}

}  // namespace xlb::control
