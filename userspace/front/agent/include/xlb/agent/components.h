// SPDX-License-Identifier: Apache-2.0
// The agent's parts that own threads, each a Component (component.h) that
// holds its object: created or started by start(), stopped by stop(). What a
// part needs from the rest of the agent is handed in as functions, called at
// start, because most of it (the program, the loop) exists only by then.
#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

#include "xlb/agent/announce_link.h"
#include "xlb/agent/component.h"
#include "xlb/agent/conntrack_sweeper.h"
#include "xlb/agent/syn_flood_watch.h"
#include "xlb/api/metrics.h"
#include "xlb/api/server.h"
#include "xlb/api/services.h"
#include "xlb/bpf/ct_clock.h"
#include "xlb/config/model.h"
#include "xlb/health/engine.h"

namespace xlb::agent {

// Ticks the program's entry-time clock (xlb/bpf/ct_clock.h). Started before
// anything can attach the program, so that entries get real times from the
// first packet on; stopped before the program is closed. The program keeps
// forwarding with its clock standing still until the next agent ticks it.
class CtClockComponent : public Component {
public:
    explicit CtClockComponent(std::function<void(std::uint32_t)> write)
        : write_(std::move(write)) {}
    std::string name() const override { return "connection-table clock"; }
    Result<void> start() override;
    void stop() override { ticker_.reset(); }
    std::chrono::steady_clock::time_point started() const { return started_; }

private:
    std::function<void(std::uint32_t)> write_;
    std::optional<bpf::CtClockTicker> ticker_;
    std::chrono::steady_clock::time_point started_;
};

// The probe engine's thread. Its object outlives stop(): the control thread,
// stopped later, may still hand it targets and timers, which it then ignores.
class HealthEngineComponent : public Component {
public:
    HealthEngineComponent(health::ProbeEngine::Options options,
                          health::ProbeEngine::ResultHandler on_result)
        : options_(options), on_result_(std::move(on_result)) {}
    std::string name() const override { return "health engine"; }
    Result<void> start() override;
    void stop() override { engine_->stop(); }
    // Valid from start() on.
    health::ProbeEngine& engine() { return *engine_; }
    api::ProbeEngineInfo info() const { return {engine_->stats(), engine_->cpu_time()}; }

private:
    health::ProbeEngine::Options options_;
    health::ProbeEngine::ResultHandler on_result_;
    std::optional<health::ProbeEngine> engine_;
};

// A server of the API's Services: the Unix-socket API (ApiServer, with its
// Options) or /metrics, /livez and /readyz on TCP (MetricsServer, with the
// address to listen on). The Services are asked for at start, once the parts
// they point at exist.
template <typename Server, typename Setting>
class ServerComponent : public Component {
public:
    ServerComponent(std::string name, std::function<api::Services()> services, Setting setting)
        : name_(std::move(name)), services_(std::move(services)), setting_(std::move(setting)) {}
    std::string name() const override { return name_; }
    Result<void> start() override {
        server_.emplace(services_(), setting_);
        if (auto ok = server_->start(); !ok) {
            stop();
            return ok;
        }
        return {};
    }
    void stop() override {
        if (server_) server_->stop();
        server_.reset();
    }

private:
    std::string name_;
    std::function<api::Services()> services_;
    Setting setting_;
    std::optional<Server> server_;
};

using ApiServerComponent = ServerComponent<api::ApiServer, api::ApiServer::Options>;
using MetricsServerComponent = ServerComponent<api::MetricsServer, std::string>;

// BIRD's control socket and the routes file (docs/scale-out.md). The link
// exists from construction on, so that inputs can be submitted before its
// thread runs; stopping leaves the announcements as they are: BIRD keeps
// announcing what the routes file says.
class AnnouncerComponent : public Component {
public:
    AnnouncerComponent(const config::BgpSettings& bgp, std::function<void()> refresh);
    std::string name() const override { return "announcer"; }
    Result<void> start() override;
    void stop() override { link_.stop(); }
    AnnounceLink& link() { return link_; }
    const config::BgpSettings& bgp() const { return bgp_; }

private:
    config::BgpSettings bgp_;
    AnnounceLink link_;
};

// Expiry, counting and flood detection over the connection table.
// set_interval() may come from any thread (a reload through the API): it
// applies while the sweeper runs and is dropped once it has stopped.
class ConntrackSweeperComponent : public Component {
public:
    struct Setup {
        ConntrackSweeper::Inputs inputs;
        std::chrono::milliseconds interval;
    };
    explicit ConntrackSweeperComponent(std::function<Setup()> setup) : setup_(std::move(setup)) {}
    std::string name() const override { return "connection-table sweeper"; }
    Result<void> start() override;
    void stop() override;
    void set_interval(std::chrono::milliseconds interval);

private:
    std::function<Setup()> setup_;
    std::mutex mu_;
    std::unique_ptr<ConntrackSweeper> sweeper_;
};

// The SYN flood detector (syn_flood_watch.h). set_settings() may come from
// any thread (a reload through the API), as the sweeper's set_interval().
class SynFloodComponent : public Component {
public:
    struct Setup {
        SynFloodWatch::Inputs inputs;
        config::SynFloodSettings settings;
    };
    explicit SynFloodComponent(std::function<Setup()> setup) : setup_(std::move(setup)) {}
    std::string name() const override { return "SYN flood detector"; }
    Result<void> start() override;
    void stop() override;
    void set_settings(const config::SynFloodSettings& settings);

private:
    std::function<Setup()> setup_;
    std::mutex mu_;
    std::unique_ptr<SynFloodWatch> watch_;
};

// systemd's notifications: READY=1 once everything before it runs (after
// logging `ready_line`), then, under WatchdogSec, WATCHDOG=1 from its own
// thread while `alive` says so; STOPPING=1 first of all on the way out.
class SystemdComponent : public Component {
public:
    SystemdComponent(std::string ready_line, std::string status, std::function<bool()> alive)
        : ready_line_(std::move(ready_line)),
          status_(std::move(status)),
          alive_(std::move(alive)) {}
    ~SystemdComponent() override { stop_watchdog(); }
    std::string name() const override { return "systemd notification"; }
    Result<void> start() override;
    void stop() override;

private:
    void stop_watchdog();

    std::string ready_line_;
    std::string status_;
    std::function<bool()> alive_;
    std::atomic<bool> stopping_{false};
    std::thread watchdog_;
};

}  // namespace xlb::agent
