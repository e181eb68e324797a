// SPDX-License-Identifier: Apache-2.0
#include "xlb/agent/announce_link.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <ctime>
#include <nlohmann/json.hpp>

#include "xlb/files/files.h"

namespace xlb::agent {

announce::HostInput announce_input(const std::vector<control::VipStatus>& vips, bool drained,
                                   bool startup_complete, std::string behind) {
    announce::HostInput input;
    input.drained = drained;
    input.behind = std::move(behind);
    input.startup_complete = startup_complete;
    for (const control::VipStatus& v : vips) {
        announce::VipInput in;
        in.key = v.spec.key();
        in.address = v.spec.address;
        in.policy = v.spec.announce;
        in.table_live = v.epoch != 0;
        in.configured_backends = static_cast<std::uint32_t>(v.spec.backends.size());
        in.serving_backends = static_cast<std::uint32_t>(std::count_if(
            v.backends.begin(), v.backends.end(), [](const control::BackendStatus& b) {
                return b.in_table && b.effective_weight > 0 && b.slots > 0;
            }));
        in.in_panic = v.panic != control::PanicReason::kNone;
        input.vips.push_back(std::move(in));
    }
    return input;
}

Result<api::HostState> HostDrainFile::load() const {
    auto text = files::read_file(path_);
    if (!text) return std::unexpected(std::move(text.error()));
    if (!*text) return api::HostState{};
    api::HostState state{.drained = true};
    try {
        const auto j = nlohmann::json::parse(**text);
        const std::int64_t since = j.at("since_unix").get<std::int64_t>();
        state.since = std::chrono::system_clock::time_point(std::chrono::seconds(since));
    } catch (const nlohmann::json::exception& e) {
        return fail_on(0, "read the drain state", path_,
                       std::string("not what xlbd writes (") + e.what() +
                           "); remove it to resume, or xlbctl host resume");
    }
    return state;
}

Result<void> HostDrainFile::save(const api::HostState& state) const {
    if (!state.drained) {
        if (std::remove(path_.c_str()) != 0 && errno != ENOENT)
            return fail_on(errno, "remove the drain state", path_);
        return {};
    }
    const auto since = state.since.value_or(std::chrono::system_clock::now());
    const nlohmann::json j{
        {"drained", true},
        {"since_unix",
         std::chrono::duration_cast<std::chrono::seconds>(since.time_since_epoch()).count()}};
    return files::write_file_atomic(path_, j.dump() + "\n", 0644);
}

bool StartupGate::complete(const std::vector<control::VipStatus>& vips,
                           std::chrono::steady_clock::time_point now) {
    if (!complete_)
        complete_ = now - started_ >= patience_ ||
                    std::all_of(vips.begin(), vips.end(),
                                [](const control::VipStatus& v) { return v.epoch != 0; });
    return complete_;
}

AnnounceLink::AnnounceLink(announce::AnnouncerOptions options, std::function<void()> refresh,
                           std::chrono::milliseconds tick)
    : announcer_(std::move(options)), refresh_(std::move(refresh)), tick_(tick) {}

AnnounceLink::~AnnounceLink() { stop(); }

void AnnounceLink::start() {
    if (!thread_.joinable()) thread_ = std::thread([this] { run(); });
}

void AnnounceLink::stop() {
    {
        std::lock_guard lock(mu_);
        stop_ = true;
    }
    wake_.notify_all();
    if (thread_.joinable()) thread_.join();
}

std::uint64_t AnnounceLink::submit(announce::HostInput input) {
    std::uint64_t number = 0;
    {
        std::lock_guard lock(mu_);
        input_ = std::move(input);
        fresh_ = true;
        number = ++submitted_;
    }
    wake_.notify_all();
    return number;
}

bool AnnounceLink::wait_applied(std::uint64_t number, std::chrono::milliseconds timeout) const {
    std::unique_lock lock(mu_);
    return applied_cv_.wait_for(lock, timeout, [&] { return applied_ >= number || stop_; }) &&
           applied_ >= number;
}

announce::AnnouncerStatus AnnounceLink::status() const {
    std::lock_guard lock(mu_);
    return status_;
}

void AnnounceLink::run() {
    std::unique_lock lock(mu_);
    announce::Problem reported = announce::Problem::kNone;
    while (!stop_) {
        if (!wake_.wait_for(lock, tick_, [this] { return stop_ || fresh_; }) && refresh_) {
            lock.unlock();
            refresh_();
            lock.lock();
        }
        if (stop_ || !input_) continue;
        announce::HostInput input = *input_;
        const std::uint64_t number = submitted_;
        fresh_ = false;
        lock.unlock();
        const announce::AnnouncerStatus& s = announcer_.update(input, announce::Clock::now());
        // One log line per change of problem, not one per tick.
        if (s.problem != reported) {
            if (s.problem == announce::Problem::kNone)
                spdlog::info("BGP: BIRD {} reachable again; announcing {} routes", s.daemon_version,
                             s.routes.size());
            else
                spdlog::warn("BGP: {}", s.last_error);
            reported = s.problem;
        }
        lock.lock();
        status_ = s;
        applied_ = number;
        applied_cv_.notify_all();
    }
}

}  // namespace xlb::agent
