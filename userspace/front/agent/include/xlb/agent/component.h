// SPDX-License-Identifier: Apache-2.0
// The agent as an ordered list of components: each one part (the data plane,
// a server, a thread), started in the list's order and stopped in reverse,
// so that a part starts after what it needs and stops before it.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "xlb/error.h"

namespace xlb::agent {

class Component {
public:
    virtual ~Component() = default;
    // For the log and the tests: "API server".
    virtual std::string name() const = 0;
    // A start that fails leaves nothing of this component running; stop()
    // is then not called.
    virtual Result<void> start() = 0;
    // Called once, after a start that succeeded, whether the agent stops or
    // a later component's start failed.
    virtual void stop() = 0;
};

// A component made of two functions, for the parts that are a step of the
// agent's own rather than an object of their own (empty stop: nothing to
// undo).
class StepComponent : public Component {
public:
    StepComponent(std::string name, std::function<Result<void>()> start,
                  std::function<void()> stop = {})
        : name_(std::move(name)), start_(std::move(start)), stop_(std::move(stop)) {}
    std::string name() const override { return name_; }
    Result<void> start() override { return start_(); }
    void stop() override {
        if (stop_) stop_();
    }

private:
    std::string name_;
    std::function<Result<void>()> start_;
    std::function<void()> stop_;
};

class Components {
public:
    Components() = default;
    ~Components() { stop(); }
    Components(const Components&) = delete;
    Components& operator=(const Components&) = delete;

    // Appends; the list is started in the order of the calls.
    template <typename C, typename... Args>
    C& add(Args&&... args) {
        auto component = std::make_unique<C>(std::forward<Args>(args)...);
        C& ref = *component;
        parts_.push_back(std::move(component));
        return ref;
    }

    // Starts every component in order. When one fails, `on_failure` is told
    // first, then the ones started before it are stopped, last first, and
    // its error is returned as is.
    Result<void> start(const std::function<void(const Error&)>& on_failure = {});
    // Stops the started components, last first; again: nothing.
    void stop();
    // The names of the components running now, in start order.
    std::vector<std::string> running() const;

private:
    std::vector<std::unique_ptr<Component>> parts_;
    std::size_t started_ = 0;  // parts_[0, started_) are running
};

}  // namespace xlb::agent
