// SPDX-License-Identifier: Apache-2.0
#include "xlb/agent/syn_flood_watch.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "xlb/log/event.h"

namespace xlb::agent {

using conntrack::SynFloodState;

std::string describe_syn_flood(const conntrack::SynFloodChange& c,
                               const config::SynFloodSettings& settings) {
    const auto seconds = std::chrono::duration<double>(c.lasted).count();
    switch (c.to) {
        case SynFloodState::kAnswering:
            return fmt::format(
                "SYN flood started: {:.0f} SYNs/s on CPU {} (start_rate {}/s); VIPs with "
                "syn_cookies auto answer SYNs with cookies",
                c.rate, c.cpu, settings.start_rate);
        case SynFloodState::kRecent:
            return fmt::format(
                "SYN flood ended after {:.1f} s (peak {:.0f} SYNs/s on CPU {}; every CPU below "
                "end_rate {}/s for {} ms); SYNs go to backends again, cookies already sent "
                "are still accepted for {} s",
                seconds, c.rate, c.cpu, settings.end_rate, settings.end_after.count(),
                XLB_SYN_FLOOD_RECENT_MS / 1000);
        case SynFloodState::kCalm:
            return fmt::format(
                "SYN cookies of the last flood have expired ({} s since it ended): ACKs without "
                "a connection-table entry go to backends as before",
                XLB_SYN_FLOOD_RECENT_MS / 1000);
    }
    return "SYN flood state unknown";
}

SynFloodWatch::SynFloodWatch(Inputs inputs, const config::SynFloodSettings& settings)
    : in_(std::move(inputs)), detector_(settings) {}

SynFloodWatch::~SynFloodWatch() { stop(); }

void SynFloodWatch::start() {
    thread_ = std::thread([this] { main(); });
}

void SynFloodWatch::stop() {
    {
        std::lock_guard lock(mu_);
        stopping_ = true;
    }
    cv_.notify_all();
    if (thread_.joinable()) thread_.join();
}

void SynFloodWatch::set_settings(const config::SynFloodSettings& settings) {
    std::lock_guard lock(mu_);
    detector_.set_settings(settings);
}

void SynFloodWatch::sample(std::uint64_t now_ns) {
    auto syns = in_.read_syns();
    // Said once when reading starts failing and once when it works again:
    // every 100 ms would bury the log.
    if (!syns) {
        if (!read_failing_)
            spdlog::warn(
                "SYN flood detector: {} (the flood state stays as it is until the "
                "counters can be read)",
                syns.error().message());
        read_failing_ = true;
        return;
    }
    if (read_failing_) spdlog::info("SYN flood detector: SYN counters readable again");
    read_failing_ = false;
    std::lock_guard lock(mu_);
    const auto change = detector_.update(now_ns, *syns);
    if (change) {
        in_.write_state(static_cast<std::uint32_t>(change->to));
        const bool started = change->to == SynFloodState::kAnswering;
        log::emit(started ? log::Priority::kWarning : log::Priority::kInfo,
                  describe_syn_flood(*change, detector_.settings()),
                  {{log::kEvent, log::kEventSynFlood},
                   {"FLOOD", started                                ? "start"
                             : change->to == SynFloodState::kRecent ? "end"
                                                                    : "expired"},
                   {"CPU", std::to_string(change->cpu)},
                   {"RATE", fmt::format("{:.0f}", change->rate)}});
    }
    in_.status->update([&](conntrack::SynFloodStatus& s) {
        s.state = detector_.state();
        if (change) s.since = std::chrono::system_clock::now();
        s.rate_per_cpu = detector_.rates();
        s.peak_rate = detector_.peak_rate();
        s.peak_cpu = detector_.peak_cpu();
        s.floods = detector_.floods();
    });
}

void SynFloodWatch::main() {
    using Clock = std::chrono::steady_clock;
    std::unique_lock lock(mu_);
    while (!stopping_) {
        lock.unlock();
        sample(static_cast<std::uint64_t>(
            std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now().time_since_epoch())
                .count()));
        lock.lock();
        cv_.wait_for(lock, kSample, [&] { return stopping_; });
    }
}

}  // namespace xlb::agent
