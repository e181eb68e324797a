// SPDX-License-Identifier: Apache-2.0
#include "xlb/sim/balance.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <queue>
#include <tuple>

#include "xlb/maglev/maglev.h"
#include "xlb/sim/placement.h"
#include "xlb/sim/random.h"

namespace xlb::sim {

namespace {

// Purposes for derive_seed(). Arrivals, durations and keys have their own
// streams so that every policy sees the very same requests (common random
// numbers): differences between policies are then not sampling noise.
constexpr std::uint64_t kArrivalPurpose = 11;
constexpr std::uint64_t kDurationPurpose = 12;
constexpr std::uint64_t kKeyPurpose = 13;
constexpr std::uint64_t kChoicePurpose = 14;
constexpr std::uint64_t kKeySpacePurpose = 15;

// Peak-EWMA time constant, in mean service times: long enough to average
// over many requests, short enough to notice a server slowing down.
constexpr double kEwmaTau = 10.0;
constexpr double kParetoShape = 1.5;

// Two distinct servers chosen uniformly (one if there is only one).
std::pair<std::uint32_t, std::uint32_t> two_choices(Rng& rng, std::uint32_t servers) {
    const auto a = static_cast<std::uint32_t>(rng.below(servers));
    if (servers == 1) return {a, a};
    auto b = static_cast<std::uint32_t>(rng.below(servers - 1));
    if (b >= a) ++b;
    return {a, b};
}

// Full scan by design: this is the O(N) per request the policy costs. The
// scan starts at a random server so that ties do not always favour the
// lowest index (which would load server 0 more than its share).
std::uint32_t least_loaded(std::span<const std::uint64_t> loads, Rng& rng) {
    const auto n = static_cast<std::uint32_t>(loads.size());
    const auto start = static_cast<std::uint32_t>(rng.below(n));
    std::uint32_t best = start;
    for (std::uint32_t i = start + 1; i < n; ++i) {
        if (loads[i] < loads[best]) best = i;
    }
    for (std::uint32_t i = 0; i < start; ++i) {
        if (loads[i] < loads[best]) best = i;
    }
    return best;
}

// A Maglev table over the servers, for the hash policy.
xlb::Result<std::vector<std::uint32_t>> server_table(std::uint32_t servers) {
    std::vector<maglev::Backend> backends;
    for (std::uint32_t i = 0; i < servers; ++i) backends.push_back({make_member(i).key, 1});
    const std::uint32_t size =
        maglev::next_prime(std::max<std::uint32_t>(maglev::kDefaultRingSize, 10 * servers));
    auto table = maglev::build_table(backends, {.ring_size = size});
    if (!table) return xlb::fail("hash policy: " + table.error().message);
    return std::move(table->table);
}

// Number of servers at each outstanding count, so that the busiest server's
// count is known in O(1) after every change.
class LoadHistogram {
public:
    explicit LoadHistogram(std::uint32_t servers) : count_(1, servers) {}
    void increment(std::uint64_t from) {
        if (from + 1 >= count_.size()) count_.resize(from + 2, 0);
        --count_[from];
        ++count_[from + 1];
        max_ = std::max(max_, from + 1);
    }
    void decrement(std::uint64_t from) {
        --count_[from];
        ++count_[from - 1];
        if (from == max_ && count_[from] == 0) --max_;
    }
    [[nodiscard]] std::uint64_t max() const { return max_; }

private:
    std::vector<std::uint64_t> count_;
    std::uint64_t max_ = 0;
};

}  // namespace

std::string_view policy_name(Policy policy) noexcept {
    switch (policy) {
        case Policy::kRandom: return "random";
        case Policy::kRoundRobin: return "round-robin";
        case Policy::kLeastRequest: return "least-request";
        case Policy::kP2C: return "p2c";
        case Policy::kP2CEwma: return "p2c-ewma";
        case Policy::kHash: return "hash";
    }
    return "?";
}

xlb::Result<Policy> parse_policy(std::string_view name) {
    for (Policy p : kAllPolicies) {
        if (policy_name(p) == name) return p;
    }
    return xlb::fail(fmt::format(
        "unknown policy '{}': use random, round-robin, least-request, p2c, p2c-ewma or hash",
        name));
}

std::string_view durations_name(Durations durations) noexcept {
    return durations == Durations::kUniform ? "uniform" : "heavy-tailed";
}

xlb::Result<std::vector<std::uint64_t>> place_static(std::uint32_t servers, std::uint64_t jobs,
                                                     Policy policy, std::uint64_t seed) {
    if (servers < 1) return xlb::fail("static: need at least 1 server");
    std::vector<std::uint64_t> loads(servers, 0);
    Rng rng(derive_seed(seed, kChoicePurpose));
    std::vector<std::uint32_t> table;
    if (policy == Policy::kHash) {
        auto t = server_table(servers);
        if (!t) return std::unexpected(t.error());
        table = std::move(*t);
    }
    for (std::uint64_t j = 0; j < jobs; ++j) {
        std::uint32_t s = 0;
        switch (policy) {
            case Policy::kRandom: s = static_cast<std::uint32_t>(rng.below(servers)); break;
            case Policy::kRoundRobin: s = static_cast<std::uint32_t>(j % servers); break;
            case Policy::kLeastRequest: s = least_loaded(loads, rng); break;
            case Policy::kP2C: {
                const auto [a, b] = two_choices(rng, servers);
                s = loads[b] < loads[a] ? b : a;
                break;
            }
            case Policy::kP2CEwma:
                return xlb::fail(
                    "static: p2c-ewma needs completions to learn latency; use the queue model");
            case Policy::kHash:
                // Every job its own key.
                s = table[flow_hash_of(j, seed) % table.size()];
                break;
        }
        ++loads[s];
    }
    return loads;
}

xlb::Result<QueueResult> simulate_queue(const QueueScenario& scenario, Policy policy) {
    const std::uint32_t n = scenario.servers;
    if (n < 1) return xlb::fail("queue: need at least 1 server");
    if (scenario.requests < 10) return xlb::fail("queue: need at least 10 requests");
    if (!(scenario.utilisation > 0 && scenario.utilisation < 1)) {
        return xlb::fail(
            fmt::format("queue: utilisation {} is out of range: use a value in (0, 1), e.g. 0.8",
                        scenario.utilisation));
    }
    if (!(scenario.slow_factor >= 1)) {
        return xlb::fail("queue: slow factor must be >= 1 (1 means no slow server)");
    }
    if (!(scenario.hot_share >= 0 && scenario.hot_share <= 1)) {
        return xlb::fail("queue: hot-key share must be in [0, 1]");
    }
    if (scenario.key_space < 1) return xlb::fail("queue: key space must be >= 1");

    std::vector<std::uint32_t> table;
    if (policy == Policy::kHash) {
        auto t = server_table(n);
        if (!t) return std::unexpected(t.error());
        table = std::move(*t);
    }

    Rng arrivals(derive_seed(scenario.seed, kArrivalPurpose));
    Rng durations(derive_seed(scenario.seed, kDurationPurpose));
    Rng keys(derive_seed(scenario.seed, kKeyPurpose));
    Rng choices(derive_seed(scenario.seed, kChoicePurpose));
    const std::uint64_t key_seed = derive_seed(scenario.seed, kKeySpacePurpose);
    const double arrival_rate = scenario.utilisation * n;  // mean service time is 1

    struct Server {
        double free_at = 0;
        double ewma = 1.0;  // prior: the mean service time
        double ewma_at = 0;
    };
    std::vector<Server> servers(n);
    std::vector<std::uint64_t> outstanding(n, 0);
    LoadHistogram histogram(n);
    // (finish time, server, arrival time); a total order, so ties are
    // resolved the same way on every run.
    using Completion = std::tuple<double, std::uint32_t, double>;
    std::priority_queue<Completion, std::vector<Completion>, std::greater<>> completions;

    const std::uint64_t warm_up = scenario.requests / 10;
    std::vector<double> latencies;
    latencies.reserve(scenario.requests - warm_up);
    double sum_outstanding = 0, sum_max = 0;
    std::uint64_t peak = 0, server0_requests = 0;

    double now = 0;
    for (std::uint64_t r = 0; r < scenario.requests; ++r) {
        now += arrivals.exponential(1.0 / arrival_rate);
        double service = scenario.durations == Durations::kUniform
                             ? 2.0 * durations.unit_open()
                             : durations.pareto(kParetoShape, 1.0);
        const bool hot = keys.unit_open() < scenario.hot_share;
        const std::uint64_t key = hot ? 0 : 1 + keys.below(scenario.key_space);

        while (!completions.empty() && std::get<0>(completions.top()) <= now) {
            const auto [finish, s, arrived] = completions.top();
            completions.pop();
            histogram.decrement(outstanding[s]--);
            // Peak EWMA (as in Finagle and Linkerd): jump up at once on a
            // slow response, decay smoothly otherwise.
            Server& srv = servers[s];
            const double latency = finish - arrived;
            if (latency > srv.ewma) {
                srv.ewma = latency;
            } else {
                const double keep = std::exp(-(finish - srv.ewma_at) / kEwmaTau);
                srv.ewma = srv.ewma * keep + latency * (1 - keep);
            }
            srv.ewma_at = finish;
        }

        std::uint32_t s = 0;
        switch (policy) {
            case Policy::kRandom: s = static_cast<std::uint32_t>(choices.below(n)); break;
            case Policy::kRoundRobin: s = static_cast<std::uint32_t>(r % n); break;
            case Policy::kLeastRequest: s = least_loaded(outstanding, choices); break;
            case Policy::kP2C: {
                const auto [a, b] = two_choices(choices, n);
                s = outstanding[b] < outstanding[a] ? b : a;
                break;
            }
            case Policy::kP2CEwma: {
                const auto [a, b] = two_choices(choices, n);
                const auto cost = [&](std::uint32_t i) {
                    return servers[i].ewma * static_cast<double>(outstanding[i] + 1);
                };
                s = cost(b) < cost(a) ? b : a;
                break;
            }
            case Policy::kHash: s = table[flow_hash_of(key, key_seed) % table.size()]; break;
        }

        if (s == 0) service *= scenario.slow_factor;
        const double start = std::max(now, servers[s].free_at);
        const double finish = start + service;
        servers[s].free_at = finish;
        completions.emplace(finish, s, now);
        histogram.increment(outstanding[s]++);

        if (r >= warm_up) {
            latencies.push_back(finish - now);
            sum_outstanding += static_cast<double>(completions.size()) / n;
            sum_max += static_cast<double>(histogram.max());
            peak = std::max(peak, histogram.max());
            server0_requests += s == 0;
        }
    }

    const double samples = static_cast<double>(latencies.size());
    QueueResult result{};
    result.mean_outstanding = sum_outstanding / samples;
    result.mean_max_outstanding = sum_max / samples;
    result.peak_outstanding = peak;
    const auto percentile = [&](double q) {
        const auto rank = static_cast<std::size_t>(std::ceil(q * samples)) - 1;
        std::nth_element(latencies.begin(), latencies.begin() + rank, latencies.end());
        return latencies[rank];
    };
    result.p50 = percentile(0.50);
    result.p99 = percentile(0.99);
    result.p999 = percentile(0.999);
    result.server0_share = static_cast<double>(server0_requests) / samples;
    return result;
}

}  // namespace xlb::sim
