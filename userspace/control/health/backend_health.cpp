// SPDX-License-Identifier: Apache-2.0
#include "xlb/health/backend_health.h"

#include <algorithm>

#include "format.h"

namespace xlb::health {

using detail::human;
using detail::percent;

BackendHealth::BackendHealth(Policy policy, bool initial, std::uint64_t seed, TimePoint now,
                             std::size_t history)
    : policy_(std::move(policy)), initial_(initial), rng_(seed), since_(now), history_(history) {}

double BackendHealth::next_uniform() {
    // splitmix64
    std::uint64_t z = (rng_ += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    z ^= z >> 31;
    return static_cast<double>(z >> 11) * 0x1.0p-53;  // [0, 1)
}

void BackendHealth::prune(TimePoint now) {
    const auto window = std::chrono::duration_cast<Clock::duration>(policy_.accrual.window);
    while (!window_.empty() && window_.front().at <= now - window) window_.pop_front();
    const auto flap = std::chrono::duration_cast<Clock::duration>(policy_.flapping.window);
    while (!changes_.empty() && changes_.front() <= now - flap) changes_.pop_front();
}

std::optional<double> BackendHealth::success_rate() const {
    if (window_.empty() || window_.size() < policy_.accrual.min_probes) return std::nullopt;
    const auto ok =
        std::count_if(window_.begin(), window_.end(), [](const Sample& s) { return s.ok; });
    return static_cast<double>(ok) / static_cast<double>(window_.size());
}

Update BackendHealth::apply(const ProbeResult& r, TimePoint now) {
    Update update;
    ++probes_;
    last_ = LastProbe{now, r.failure, r.detail, r.http_status, r.rate_limited, r.latency()};
    if (r.rate_limited) {
        ++rate_limited_;
        if (policy_.bias.factor < 1.0) {
            const TimePoint until = now + bias_duration(policy_.bias, r.retry_after);
            if (until > bias_until_) {
                bias_until_ = until;
                update.bias_started = true;
                update.bias_until = until;
            }
        }
    }
    if (!r.ok()) ++failure_counts_[static_cast<std::size_t>(r.failure)];
    if (r.failure != Failure::kTimeout && r.failure != Failure::kLocal) latency_.add(r.latency());
    // The agent could not probe: nothing is known about the backend.
    if (r.failure == Failure::kLocal) return update;

    const bool ok = r.ok();
    if (ok) {
        if (successes_ < UINT32_MAX) ++successes_;
        failures_ = 0;
    } else {
        if (failures_ < UINT32_MAX) ++failures_;
        successes_ = 0;
    }
    if (policy_.accrual.enabled) window_.push_back(Sample{now, ok && !r.rate_limited});
    prune(now);

    const auto failures_text = [&] {
        return std::to_string(failures_) + " consecutive failure" + (failures_ == 1 ? "" : "s") +
               ", last: " + (r.detail.empty() ? to_string(r.failure) : r.detail);
    };
    switch (verdict_) {
        case Verdict::kUnknown:
            if (successes_ >= policy_.healthy_threshold) {
                become_healthy(r, now, update);
            } else if (failures_ >= policy_.unhealthy_threshold) {
                become_unhealthy(r, now, Cause::kConsecutiveFailures, failures_text(), update);
            }
            break;
        case Verdict::kHealthy:
            if (failures_ >= policy_.unhealthy_threshold) {
                become_unhealthy(r, now, Cause::kConsecutiveFailures, failures_text(), update);
            } else if (policy_.accrual.enabled) {
                if (auto rate = success_rate(); rate && *rate < policy_.accrual.success_rate) {
                    const auto ok_count = static_cast<std::size_t>(std::count_if(
                        window_.begin(), window_.end(), [](const Sample& s) { return s.ok; }));
                    become_unhealthy(r, now, Cause::kSuccessRate,
                                     "success rate " + percent(*rate) + " (" +
                                         std::to_string(ok_count) + " of " +
                                         std::to_string(window_.size()) + " probes in " +
                                         human(policy_.accrual.window) + ") below " +
                                         percent(policy_.accrual.success_rate),
                                     update);
                }
            }
            break;
        case Verdict::kUnhealthy:
            if (successes_ >= policy_.healthy_threshold && now >= held_until_) {
                become_healthy(r, now, update);
            }
            break;
    }
    return update;
}

void BackendHealth::become_healthy(const ProbeResult& r, TimePoint now, Update& update) {
    Transition t;
    t.at = now;
    t.from = verdict_;
    t.to = Verdict::kHealthy;
    t.cause = Cause::kConsecutiveSuccesses;
    t.detail = std::to_string(successes_) + " consecutive success" + (successes_ == 1 ? "" : "es");
    if (verdict_ == Verdict::kUnhealthy) changes_.push_back(now);
    const bool first_at_start = verdict_ == Verdict::kUnknown && initial_;
    const auto& ss = policy_.slow_start;
    if (ss.window > config::Duration::zero() && ss.floor < 1.0 && !first_at_start) {
        ramp_start_ = now;
        t.slow_start = true;
    } else {
        ramp_start_.reset();
    }
    verdict_ = Verdict::kHealthy;
    since_ = now;
    healthy_since_ = now;
    failures_ = 0;
    window_.clear();
    hold_ = Hold::kNone;
    ++became_healthy_;
    record(std::move(t), r, update);
}

void BackendHealth::become_unhealthy(const ProbeResult& r, TimePoint now, Cause cause,
                                     std::string detail, Update& update) {
    Transition t;
    t.at = now;
    t.from = verdict_;
    t.to = Verdict::kUnhealthy;
    t.cause = cause;
    t.detail = std::move(detail);
    if (verdict_ == Verdict::kHealthy) {
        // An ejection of a serving backend: back-off and flapping hold-downs.
        changes_.push_back(now);
        const auto& a = policy_.accrual;
        if (a.enabled) {
            if (now - healthy_since_ >= a.max_penalty) ejections_ = 0;
            const auto penalty = accrual_penalty(a, ejections_, next_uniform());
            ++ejections_;
            held_until_ = now + penalty;
            hold_ = Hold::kFailureAccrual;
            t.hold_detail =
                "ejection " + std::to_string(ejections_) + ": held out " + human(penalty);
        }
        const auto& f = policy_.flapping;
        if (f.changes > 0 && changes_.size() > f.changes) {
            const TimePoint until = now + f.hold;
            if (until > held_until_) {
                held_until_ = until;
                hold_ = Hold::kFlapping;
            }
            if (!t.hold_detail.empty()) t.hold_detail += "; ";
            t.hold_detail += "flapping: " + std::to_string(changes_.size()) + " changes in " +
                             human(f.window) + ": held out " + human(f.hold);
        }
        if (held_until_ > now) {
            t.hold = hold_;
            t.held_until = held_until_;
        }
    }
    verdict_ = Verdict::kUnhealthy;
    since_ = now;
    successes_ = 0;  // coming back takes healthy_threshold fresh successes
    window_.clear();
    ramp_start_.reset();
    ++became_unhealthy_;
    record(std::move(t), r, update);
}

void BackendHealth::record(Transition t, const ProbeResult& r, Update& update) {
    t.wall_time = r.finished_wall;
    t.probe = r.failure;
    history_.record(t);
    last_transition_ = t;
    update.transition = std::move(t);
}

double BackendHealth::weight_factor(TimePoint now) const {
    double f = 1.0;
    if (verdict_ == Verdict::kHealthy && ramp_start_) {
        f = slow_start_factor(policy_.slow_start, now - *ramp_start_);
    }
    if (now < bias_until_) f *= std::clamp(policy_.bias.factor, 0.0, 1.0);
    return std::clamp(f, kMinWeightFactor, 1.0);
}

TimePoint BackendHealth::next_change(TimePoint now) const {
    TimePoint t = TimePoint::max();
    if (verdict_ == Verdict::kHealthy && ramp_start_) {
        if (auto step = slow_start_next_step(policy_.slow_start, now - *ramp_start_)) {
            t = std::min(t, *ramp_start_ + *step);
        }
    }
    if (now < bias_until_) t = std::min(t, bias_until_);
    return t;
}

Snapshot BackendHealth::snapshot(TimePoint now) const {
    Snapshot s;
    s.verdict = verdict_;
    s.since = since_;
    s.weight_factor = weight_factor(now);
    s.last = last_;
    s.consecutive_successes = successes_;
    s.consecutive_failures = failures_;
    if (verdict_ == Verdict::kUnhealthy && held_until_ > now) {
        s.hold = hold_;
        s.held_until = held_until_;
    }
    if (now < bias_until_) {
        s.bias_until = bias_until_;
        s.bias_factor = std::clamp(policy_.bias.factor, kMinWeightFactor, 1.0);
    }
    if (verdict_ == Verdict::kHealthy) s.ramp_start = ramp_start_;
    if (verdict_ == Verdict::kHealthy && ramp_start_ &&
        now - *ramp_start_ < policy_.slow_start.window) {
        s.slow_start_end = *ramp_start_ + policy_.slow_start.window;
    }
    if (policy_.accrual.enabled) {
        const auto window = std::chrono::duration_cast<Clock::duration>(policy_.accrual.window);
        std::uint32_t n = 0, ok = 0;
        for (const Sample& x : window_) {
            if (x.at > now - window) {
                ++n;
                ok += x.ok ? 1 : 0;
            }
        }
        s.window_probes = n;
        if (n > 0 && n >= policy_.accrual.min_probes) {
            s.success_rate = static_cast<double>(ok) / static_cast<double>(n);
        }
        s.ejections = ejections_;
    }
    s.probes = probes_;
    s.rate_limited = rate_limited_;
    s.failures = failure_counts_;
    s.became_healthy = became_healthy_;
    s.became_unhealthy = became_unhealthy_;
    s.latency = latency_;
    s.last_transition = last_transition_;
    return s;
}

}  // namespace xlb::health
