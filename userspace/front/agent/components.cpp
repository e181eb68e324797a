// SPDX-License-Identifier: Apache-2.0
#include "xlb/agent/components.h"

#include <spdlog/spdlog.h>
#include <systemd/sd-daemon.h>

namespace xlb::agent {

Result<void> CtClockComponent::start() {
    ticker_.emplace(write_);
    started_ = std::chrono::steady_clock::now();
    return {};
}

Result<void> HealthEngineComponent::start() {
    engine_.emplace(options_, on_result_);
    if (auto ok = engine_->start(); !ok)
        return std::unexpected(std::move(ok.error()).add_context("health checks"));
    return {};
}

namespace {

announce::AnnouncerOptions announcer_options(const config::BgpSettings& bgp) {
    announce::AnnouncerOptions options;
    options.routes_file = bgp.routes_file;
    options.control_socket = bgp.control_socket;
    options.render.protocol = bgp.protocol;
    options.render.form = bgp.route;
    // BIRD stopped or back is noticed within two seconds even when
    // nothing here changes: one connect and "show protocols".
    options.check_interval = std::chrono::seconds(2);
    return options;
}

}  // namespace

AnnouncerComponent::AnnouncerComponent(const config::BgpSettings& bgp,
                                       std::function<void()> refresh)
    : bgp_(bgp), link_(announcer_options(bgp), std::move(refresh)) {}

Result<void> AnnouncerComponent::start() {
    link_.start();
    spdlog::info("BGP: announcing through BIRD on {} (routes file {}, protocols {}4/{}6)",
                 bgp_.control_socket, bgp_.routes_file, bgp_.protocol, bgp_.protocol);
    return {};
}

Result<void> ConntrackSweeperComponent::start() {
    Setup setup = setup_();
    std::lock_guard lock(mu_);
    sweeper_ = std::make_unique<ConntrackSweeper>(std::move(setup.inputs), setup.interval);
    sweeper_->start();
    return {};
}

void ConntrackSweeperComponent::stop() {
    std::lock_guard lock(mu_);
    sweeper_.reset();
}

void ConntrackSweeperComponent::set_interval(std::chrono::milliseconds interval) {
    std::lock_guard lock(mu_);
    if (sweeper_) sweeper_->set_interval(interval);
}

Result<void> SynFloodComponent::start() {
    Setup setup = setup_();
    std::lock_guard lock(mu_);
    watch_ = std::make_unique<SynFloodWatch>(std::move(setup.inputs), setup.settings);
    watch_->start();
    return {};
}

// The program keeps the last state written: a flood going on when the agent
// stops is still answered until the next agent's first samples.
void SynFloodComponent::stop() {
    std::lock_guard lock(mu_);
    watch_.reset();
}

void SynFloodComponent::set_settings(const config::SynFloodSettings& settings) {
    std::lock_guard lock(mu_);
    if (watch_) watch_->set_settings(settings);
}

Result<void> SystemdComponent::start() {
    stopping_ = false;
    spdlog::info("{}", ready_line_);
    sd_notify(0, ("READY=1\nSTATUS=" + status_).c_str());
    std::uint64_t watchdog_usec = 0;
    if (sd_watchdog_enabled(0, &watchdog_usec) > 0) {
        watchdog_ = std::thread([this, period = std::chrono::microseconds(watchdog_usec / 2)] {
            while (!stopping_) {
                if (alive_()) sd_notify(0, "WATCHDOG=1");
                for (auto slept = std::chrono::microseconds(0); slept < period && !stopping_;
                     slept += std::chrono::milliseconds(100))
                    std::this_thread::sleep_for(std::chrono::milliseconds(100));
            }
        });
    }
    return {};
}

void SystemdComponent::stop() {
    sd_notify(0, "STOPPING=1");
    stop_watchdog();
}

void SystemdComponent::stop_watchdog() {
    stopping_ = true;
    if (watchdog_.joinable()) watchdog_.join();
}

}  // namespace xlb::agent
