// SPDX-License-Identifier: Apache-2.0
#include "xlb/sim/cli.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cmath>
#include <fstream>
#include <optional>
#include <sstream>
#include <utility>

#include "xlb/cli/suggest.h"
#include "xlb/sim/balance.h"
#include "xlb/sim/fleet.h"
#include "xlb/sim/placement.h"
#include "xlb/sim/report.h"
#include "xlb/version.h"

namespace xlb::sim {

namespace {

enum class Format { kText, kCsv, kJson };

// Options every subcommand shares.
struct Common {
    std::uint64_t seed = 1;
    bool csv = false;
    bool json = false;
    std::string plot;

    [[nodiscard]] Format format() const {
        return json ? Format::kJson : csv ? Format::kCsv : Format::kText;
    }
};

void add_common(CLI::App& app, Common& common) {
    app.add_option("--seed", common.seed, "seed of every random choice; same seed, same output")
        ->capture_default_str();
    auto* csv = app.add_flag("--csv", common.csv, "print CSV instead of a table");
    auto* json = app.add_flag("--json", common.json, "print JSON instead of a table");
    csv->excludes(json);
    app.add_option("--plot", common.plot, "also write a line chart to this SVG file");
}

std::string render(const Report& report, Format format) {
    switch (format) {
        case Format::kCsv: return render_csv(report);
        case Format::kJson: return render_json(report);
        case Format::kText: break;
    }
    return render_text(report);
}

xlb::Result<void> write_file(const std::string& path, const std::string& text) {
    std::ofstream file(path, std::ios::binary | std::ios::trunc);
    file << text;
    file.close();
    if (!file) return xlb::fail(fmt::format("cannot write plot file '{}'", path));
    return {};
}

double percent(double fraction) { return 100.0 * fraction; }

// Series colours: algorithms by their enum value, the ideal in black.
constexpr int kIdealColour = 6;

// Drops series that dwarf the reference series (say, modulo's ~100% next to
// consistent hashing's ~1%): they would flatten every other curve. The title
// names what was dropped; the table still has it.
void drop_off_scale(Plot& plot, const std::string& reference, double factor) {
    const auto peak = [](const Series& s) {
        double m = 0;
        for (auto [x, y] : s.points) m = std::max(m, y);
        return m;
    };
    const auto ref = std::find_if(plot.series.begin(), plot.series.end(),
                                  [&](const Series& s) { return s.name == reference; });
    if (ref == plot.series.end()) return;
    const double limit = factor * peak(*ref);
    std::vector<std::string> dropped;
    std::erase_if(plot.series, [&](const Series& s) {
        if (s.name == reference || peak(s) <= limit) return false;
        dropped.push_back(s.name);
        return true;
    });
    if (!dropped.empty()) {
        plot.title += fmt::format(" ({}: off the scale)", fmt::join(dropped, ", "));
    }
}

xlb::Result<std::vector<Algorithm>> parse_algorithms(const std::vector<std::string>& names) {
    std::vector<Algorithm> algorithms;
    for (const auto& name : names) {
        auto a = parse_algorithm(name);
        if (!a) return std::unexpected(a.error());
        if (std::find(algorithms.begin(), algorithms.end(), *a) == algorithms.end()) {
            algorithms.push_back(*a);
        }
    }
    return algorithms;
}

// ---- placement ------------------------------------------------------------

struct PlacementArgs {
    std::vector<std::uint32_t> backends{100};
    std::size_t keys = 1'000'000;
    std::vector<std::uint32_t> weights;
    std::vector<std::uint32_t> vnodes{100};
    std::uint32_t ring_size = 65537;
    std::vector<std::string> algorithms{"modulo", "ring", "rendezvous", "jump", "maglev"};
    bool no_timing = false;
};

// A plot to write once the simulation is done: path and SVG.
using PlotFile = std::optional<std::pair<std::string, std::string>>;

xlb::Result<std::string> run_placement_command(const PlacementArgs& args, const Common& common,
                                               PlotFile& plot_file) {
    auto algorithms = parse_algorithms(args.algorithms);
    if (!algorithms) return std::unexpected(algorithms.error());
    const bool sweep_backends = args.backends.size() > 1;
    const bool sweep_vnodes = args.vnodes.size() > 1;
    if (!common.plot.empty() && !sweep_backends && !sweep_vnodes) {
        return xlb::fail(
            "--plot needs a sweep to draw: give several --backends (moved keys vs N) or "
            "several --vnodes (ring balance vs virtual nodes)");
    }
    if (sweep_backends && sweep_vnodes) {
        return xlb::fail("sweep either --backends or --vnodes, not both");
    }

    Report report;
    report.command = "placement";
    report.parameters = {{"backends", args.backends},   {"keys", args.keys},
                         {"weights", args.weights},     {"vnodes", args.vnodes},
                         {"ring_size", args.ring_size}, {"algorithms", args.algorithms},
                         {"seed", common.seed}};
    report.columns = {{"algorithm"}, {"backends"}, {"vnodes"}};
    if (!args.no_timing) {
        report.columns.push_back({"build_us", 0});
        report.columns.push_back({"lookup_ns", 1});
    }
    for (const char* name : {"memory_bytes"}) report.columns.push_back({name});
    for (const char* name : {"max_over_mean", "cv", "cv_noise", "max_share_err"}) {
        report.columns.push_back({name, 4});
    }
    for (const char* name : {"add_moved_pct", "add_ideal_pct", "remove_moved_pct",
                             "remove_ideal_pct", "weight_moved_pct", "weight_ideal_pct"}) {
        report.columns.push_back({name, 3});
    }

    std::vector<PlacementResult> all;
    for (std::uint32_t n : args.backends) {
        for (std::size_t v = 0; v < args.vnodes.size(); ++v) {
            PlacementStudy study;
            study.backends = n;
            study.keys = args.keys;
            study.weights = args.weights;
            study.algorithm.vnodes = args.vnodes[v];
            study.algorithm.ring_size = args.ring_size;
            study.seed = common.seed;
            study.algorithms.clear();
            // Only the ring depends on the number of virtual nodes.
            for (Algorithm a : *algorithms) {
                if (v == 0 || a == Algorithm::kRing) study.algorithms.push_back(a);
            }
            auto results = run_placement(study);
            if (!results) return std::unexpected(results.error());
            all.insert(all.end(), results->begin(), results->end());
        }
    }
    if (sweep_vnodes) {
        // Keep each algorithm's rows together (the ring's sweep in order).
        const auto rank = [&](Algorithm x) {
            return std::find(algorithms->begin(), algorithms->end(), x) - algorithms->begin();
        };
        std::stable_sort(all.begin(), all.end(), [&](const auto& a, const auto& b) {
            return rank(a.algorithm) < rank(b.algorithm);
        });
    }
    for (const auto& r : all) {
        std::vector<Cell> row{
            std::string(algorithm_name(r.algorithm)), std::int64_t{r.backends},
            r.algorithm == Algorithm::kRing ? Cell{std::int64_t{r.vnodes}} : Cell{}};
        if (!args.no_timing) {
            row.emplace_back(r.build_us);
            row.emplace_back(r.lookup_ns);
        }
        row.emplace_back(static_cast<std::int64_t>(r.memory_bytes));
        row.emplace_back(r.max_over_mean);
        row.emplace_back(r.cv);
        row.emplace_back(r.cv_noise);
        row.emplace_back(r.max_share_error);
        row.emplace_back(percent(r.moved_add));
        row.emplace_back(percent(r.ideal_add));
        row.emplace_back(r.backends > 1 ? Cell{percent(r.moved_remove)} : Cell{});
        row.emplace_back(r.backends > 1 ? Cell{percent(r.ideal_remove)} : Cell{});
        row.emplace_back(r.moved_weight ? Cell{percent(*r.moved_weight)} : Cell{});
        row.emplace_back(percent(r.ideal_weight));
        report.rows.push_back(std::move(row));
    }

    if (!common.plot.empty()) {
        Plot plot;
        plot.log_x = true;
        if (sweep_backends) {
            plot.title = "Keys moved when one backend joins";
            plot.x_label = "backends before the join (N)";
            plot.y_label = "keys moved / least possible";
            for (Algorithm a : *algorithms) {
                Series s{std::string(algorithm_name(a)), {}, false, static_cast<int>(a)};
                for (const auto& r : all) {
                    if (r.algorithm == a)
                        s.points.emplace_back(r.backends, r.moved_add / r.ideal_add);
                }
                plot.series.push_back(std::move(s));
            }
            Series ideal{"ideal", {}, true, kIdealColour};
            for (std::uint32_t n : args.backends) {
                for (const auto& r : all) {
                    if (r.backends == n) {
                        ideal.points.emplace_back(n, 1.0);
                        break;
                    }
                }
            }
            plot.series.push_back(std::move(ideal));
            drop_off_scale(plot, "ideal", 20);
        } else {
            plot.title = fmt::format("Balance with {} backends", args.backends.front());
            plot.x_label = "ring hash: virtual nodes per backend";
            plot.y_label = "max / mean keys per backend";
            const double v_lo = args.vnodes.front(), v_hi = args.vnodes.back();
            for (Algorithm a : *algorithms) {
                Series s{std::string(algorithm_name(a)), {}, false, static_cast<int>(a)};
                for (const auto& r : all) {
                    if (r.algorithm != a) continue;
                    if (a == Algorithm::kRing) {
                        s.points.emplace_back(r.vnodes, r.max_over_mean);
                    } else {
                        // Independent of virtual nodes: a flat reference line.
                        s.points = {{v_lo, r.max_over_mean}, {v_hi, r.max_over_mean}};
                        s.dashed = true;
                    }
                }
                std::sort(s.points.begin(), s.points.end());
                plot.series.push_back(std::move(s));
            }
            drop_off_scale(plot, "rendezvous", 10);
        }
        plot_file.emplace(common.plot, render_svg(plot));
    }
    return render(report, common.format());
}

// ---- churn ----------------------------------------------------------------

struct ChurnArgs {
    std::uint32_t backends = 100;
    std::size_t keys = 200'000;
    std::string script{kDefaultChurnScript};
    std::uint32_t vnodes = 100;
    std::uint32_t ring_size = 65537;
    std::vector<std::string> algorithms{"modulo", "ring", "rendezvous", "jump", "maglev"};
};

xlb::Result<std::string> run_churn_command(const ChurnArgs& args, const Common& common,
                                           PlotFile& plot_file) {
    auto algorithms = parse_algorithms(args.algorithms);
    if (!algorithms) return std::unexpected(algorithms.error());
    ChurnStudy study;
    study.backends = args.backends;
    study.keys = args.keys;
    study.script = args.script;
    study.algorithm.vnodes = args.vnodes;
    study.algorithm.ring_size = args.ring_size;
    study.seed = common.seed;
    study.algorithms = *algorithms;
    auto steps = run_churn(study);
    if (!steps) return std::unexpected(steps.error());

    Report report;
    report.command = "churn";
    report.parameters = {{"backends", args.backends},   {"keys", args.keys},
                         {"script", args.script},       {"vnodes", args.vnodes},
                         {"ring_size", args.ring_size}, {"algorithms", args.algorithms},
                         {"seed", common.seed}};
    report.columns = {{"step"}, {"action"}, {"backends"}, {"ideal_pct", 2}};
    for (Algorithm a : *algorithms) {
        report.columns.push_back({fmt::format("{}_pct", algorithm_name(a)), 2});
    }
    report.columns.push_back({"ideal_cum_pct", 2});
    for (Algorithm a : *algorithms) {
        report.columns.push_back({fmt::format("{}_cum_pct", algorithm_name(a)), 2});
    }
    std::int64_t number = 0;
    for (const auto& s : *steps) {
        std::vector<Cell> row{++number, s.action, std::int64_t{s.backends}, percent(s.ideal_step)};
        for (double m : s.moved_step) row.emplace_back(percent(m));
        row.emplace_back(percent(s.ideal_cumulative));
        for (double m : s.moved_cumulative) row.emplace_back(percent(m));
        report.rows.push_back(std::move(row));
    }

    if (!common.plot.empty()) {
        Plot plot;
        plot.title = "Cumulative keys moved over a membership script";
        plot.x_label = "step";
        plot.y_label = "keys moved, cumulative (% of all keys)";
        for (std::size_t a = 0; a < algorithms->size(); ++a) {
            Series s{std::string(algorithm_name((*algorithms)[a])),
                     {{0, 0}},
                     false,
                     static_cast<int>((*algorithms)[a])};
            for (std::size_t i = 0; i < steps->size(); ++i) {
                s.points.emplace_back(i + 1, percent((*steps)[i].moved_cumulative[a]));
            }
            plot.series.push_back(std::move(s));
        }
        Series ideal{"ideal", {{0, 0}}, true, kIdealColour};
        for (std::size_t i = 0; i < steps->size(); ++i) {
            ideal.points.emplace_back(i + 1, percent((*steps)[i].ideal_cumulative));
        }
        plot.series.push_back(std::move(ideal));
        drop_off_scale(plot, "ideal", 5);
        plot_file.emplace(common.plot, render_svg(plot));
    }
    return render(report, common.format());
}

// ---- balance --------------------------------------------------------------

struct BalanceArgs {
    std::uint32_t servers = 100;
    std::uint64_t requests = 200'000;
    std::uint64_t jobs_per_server = 1000;
    double utilisation = 0.8;
    double slow_factor = 5.0;
    double hot_share = 0.1;
    std::uint64_t key_space = 100'000;
    std::vector<std::string> scenarios{"static", "uniform", "heavy-tailed", "slow-server",
                                       "hot-key"};
    std::vector<std::string> policies{"random", "round-robin", "least-request",
                                      "p2c",    "p2c-ewma",    "hash"};
};

xlb::Result<std::string> run_balance_command(const BalanceArgs& args, const Common& common) {
    if (!common.plot.empty()) {
        return xlb::fail(
            "--plot: balance has no curve to draw; plot placement (--backends or --vnodes "
            "sweep) or churn");
    }
    std::vector<Policy> policies;
    for (const auto& name : args.policies) {
        auto p = parse_policy(name);
        if (!p) return std::unexpected(p.error());
        policies.push_back(*p);
    }
    static constexpr const char* kScenarios[] = {"static", "uniform", "heavy-tailed", "slow-server",
                                                 "hot-key"};
    for (const auto& s : args.scenarios) {
        if (std::find(std::begin(kScenarios), std::end(kScenarios), s) == std::end(kScenarios)) {
            return xlb::fail(fmt::format(
                "unknown scenario '{}': use static, uniform, heavy-tailed, slow-server or hot-key",
                s));
        }
    }

    Report report;
    report.command = "balance";
    report.parameters = {{"servers", args.servers},
                         {"requests", args.requests},
                         {"jobs_per_server", args.jobs_per_server},
                         {"utilisation", args.utilisation},
                         {"slow_factor", args.slow_factor},
                         {"hot_share", args.hot_share},
                         {"key_space", args.key_space},
                         {"scenarios", args.scenarios},
                         {"policies", args.policies},
                         {"seed", common.seed}};
    report.columns = {{"scenario"},  {"policy"},           {"mean_load", 2},      {"max_load", 2},
                      {"peak_load"}, {"max_over_mean", 3}, {"max_minus_mean", 2}, {"p50", 3},
                      {"p99", 3},    {"p999", 3},          {"server0_pct", 2}};

    for (const auto& scenario : args.scenarios) {
        for (Policy policy : policies) {
            std::vector<Cell> row{scenario, std::string(policy_name(policy))};
            if (scenario == "static") {
                if (policy == Policy::kP2CEwma) continue;  // nothing to learn from
                const std::uint64_t jobs = args.jobs_per_server * args.servers;
                auto loads = place_static(args.servers, jobs, policy, common.seed);
                if (!loads) return std::unexpected(loads.error());
                const double mean = static_cast<double>(jobs) / args.servers;
                const auto max = *std::max_element(loads->begin(), loads->end());
                row.insert(row.end(), {mean, static_cast<double>(max), std::int64_t(max),
                                       max / mean, max - mean, Cell{}, Cell{}, Cell{},
                                       percent(static_cast<double>((*loads)[0]) / jobs)});
            } else {
                QueueScenario q;
                q.servers = args.servers;
                q.requests = args.requests;
                q.utilisation = args.utilisation;
                q.key_space = args.key_space;
                q.seed = common.seed;
                if (scenario == "heavy-tailed") q.durations = Durations::kHeavyTailed;
                if (scenario == "slow-server") q.slow_factor = args.slow_factor;
                if (scenario == "hot-key") q.hot_share = args.hot_share;
                auto r = simulate_queue(q, policy);
                if (!r) return std::unexpected(r.error());
                row.insert(row.end(), {r->mean_outstanding, r->mean_max_outstanding,
                                       static_cast<std::int64_t>(r->peak_outstanding),
                                       r->mean_max_outstanding / r->mean_outstanding,
                                       r->mean_max_outstanding - r->mean_outstanding, r->p50,
                                       r->p99, r->p999, percent(r->server0_share)});
            }
            report.rows.push_back(std::move(row));
        }
    }
    return render(report, common.format());
}

// ---- fleet ----------------------------------------------------------------

struct FleetArgs {
    std::uint32_t hosts = 10;
    std::uint32_t backends = 1000;
    std::size_t flows = 100'000;
    double path_failure = 0.01;
    std::uint32_t events = 10;
    std::uint32_t ring_size = 0;
    std::string ecmp = "resilient";
    std::vector<std::string> kinds{"host-loss",     "backend-fail",   "backend-join",
                                   "path-failure",  "join+host-loss", "fail+host-loss",
                                   "path+host-loss"};
    std::vector<std::string> policies{"local", "majority", "any_down"};
};

xlb::Result<std::string> run_fleet_command(const FleetArgs& args, const Common& common) {
    if (!common.plot.empty()) {
        return xlb::fail("--plot: fleet has no curve to draw; plot placement or churn");
    }
    FleetStudy study;
    study.hosts = args.hosts;
    study.backends = args.backends;
    study.flows = args.flows;
    study.path_failure = args.path_failure;
    study.events = args.events;
    study.ring_size = args.ring_size;
    study.seed = common.seed;
    auto ecmp = parse_ecmp(args.ecmp);
    if (!ecmp) return std::unexpected(ecmp.error());
    study.ecmp = *ecmp;
    study.kinds.clear();
    for (const auto& name : args.kinds) {
        auto kind = parse_fleet_event(name);
        if (!kind) return std::unexpected(kind.error());
        if (std::find(study.kinds.begin(), study.kinds.end(), *kind) == study.kinds.end()) {
            study.kinds.push_back(*kind);
        }
    }
    study.policies.clear();
    for (const auto& name : args.policies) {
        auto policy = fleet::parse_health_consensus(name);
        if (!policy) {
            return xlb::fail(fmt::format(
                "unknown health consensus '{}': use local, majority or any_down", name));
        }
        if (std::find(study.policies.begin(), study.policies.end(), *policy) ==
            study.policies.end()) {
            study.policies.push_back(*policy);
        }
    }
    auto result = run_fleet(study);
    if (!result) return std::unexpected(result.error());

    Report report;
    report.command = "fleet";
    report.parameters = {{"hosts", args.hosts},
                         {"backends", args.backends},
                         {"flows", args.flows},
                         {"path_failure", args.path_failure},
                         {"events", args.events},
                         {"ring_size", result->ring_size},
                         {"ecmp", args.ecmp},
                         {"kinds", args.kinds},
                         {"policies", args.policies},
                         {"seed", common.seed},
                         {"failed_paths", result->failed_paths}};
    report.columns = {{"event"},
                      {"policy"},
                      {"trials"},
                      {"established"},
                      {"moved_pct", 3},
                      {"lost_pct", 3},
                      {"broken_pct", 4},
                      {"broken_sc_pct", 4},
                      {"max_broken_pct", 4},
                      {"capacity_lost_pct", 3}};
    for (const auto& r : result->rows) {
        const bool steady = !r.event;
        const auto figure = [&](double fraction) {
            return steady ? Cell{} : Cell{percent(fraction)};
        };
        report.rows.push_back(
            {steady ? std::string("steady") : std::string(fleet_event_name(*r.event)),
             std::string(fleet::to_string(r.policy)),
             steady ? Cell{} : Cell{std::int64_t{r.trials}},
             static_cast<std::int64_t>(r.established), figure(r.moved), figure(r.lost),
             figure(r.broken), figure(r.broken_second_chance), figure(r.max_broken),
             percent(r.capacity_lost)});
    }
    return render(report, common.format());
}

}  // namespace

int run_cli(const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
    CLI::App app{
        "xlb-sim: fixed-seed simulations of key placement, request balancing and a fleet's "
        "health consensus",
        "xlb-sim"};
    app.set_version_flag("--version", "xlb-sim " XLB_VERSION);
    app.require_subcommand(1);

    Common placement_common, churn_common, balance_common;

    PlacementArgs placement;
    auto* p = app.add_subcommand("placement",
                                 "balance, speed, memory and disruption of placement algorithms");
    add_common(*p, placement_common);
    p->add_option("-n,--backends", placement.backends,
                  "backends; several (comma-separated) sweep N")
        ->delimiter(',')
        ->check(CLI::Range(1u, 100'000u))
        ->capture_default_str();
    p->add_option("-k,--keys", placement.keys, "keys to place")
        ->check(CLI::Range(std::size_t{1}, std::size_t{20'000'000}))
        ->capture_default_str();
    p->add_option("-w,--weights", placement.weights,
                  "backend weights, repeated cyclically (default all 1)")
        ->delimiter(',')
        ->check(CLI::Range(1u, 1'000'000u));
    p->add_option("-v,--vnodes", placement.vnodes,
                  "ring hash points per unit of weight; several sweep V")
        ->delimiter(',')
        ->check(CLI::Range(1u, 100'000u))
        ->capture_default_str();
    p->add_option("-m,--ring-size", placement.ring_size, "Maglev table size (prime)")
        ->capture_default_str();
    p->add_option("-a,--algorithms", placement.algorithms, "modulo, ring, rendezvous, jump, maglev")
        ->delimiter(',')
        ->capture_default_str();
    p->add_flag("--no-timing", placement.no_timing,
                "leave out build and lookup times (the only columns that vary between runs)");

    ChurnArgs churn;
    auto* c = app.add_subcommand("churn", "cumulative keys moved over scripted membership changes");
    add_common(*c, churn_common);
    c->add_option("-n,--backends", churn.backends, "backends at the start (ids 0..N-1)")
        ->check(CLI::Range(1u, 100'000u))
        ->capture_default_str();
    c->add_option("-k,--keys", churn.keys, "keys to place")
        ->check(CLI::Range(std::size_t{1}, std::size_t{20'000'000}))
        ->capture_default_str();
    c->add_option("-s,--script", churn.script,
                  "steps: join, leave:ID, flap:ID (leave and rejoin), weight:ID=W")
        ->capture_default_str();
    c->add_option("-v,--vnodes", churn.vnodes, "ring hash points per unit of weight")
        ->check(CLI::Range(1u, 100'000u))
        ->capture_default_str();
    c->add_option("-m,--ring-size", churn.ring_size, "Maglev table size (prime)")
        ->capture_default_str();
    c->add_option("-a,--algorithms", churn.algorithms, "modulo, ring, rendezvous, jump, maglev")
        ->delimiter(',')
        ->capture_default_str();

    BalanceArgs balance;
    auto* b = app.add_subcommand("balance", "request-level balancing policies, simulated");
    add_common(*b, balance_common);
    b->add_option("-n,--servers", balance.servers, "servers")
        ->check(CLI::Range(1u, 100'000u))
        ->capture_default_str();
    b->add_option("-r,--requests", balance.requests, "requests per queue scenario")
        ->check(CLI::Range(std::uint64_t{10}, std::uint64_t{10'000'000}))
        ->capture_default_str();
    b->add_option("--jobs-per-server", balance.jobs_per_server,
                  "static scenario: jobs (that never finish) per server")
        ->check(CLI::Range(std::uint64_t{1}, std::uint64_t{1'000'000}))
        ->capture_default_str();
    b->add_option("-u,--utilisation", balance.utilisation,
                  "arrival rate over the capacity of N normal servers")
        ->check(CLI::Range(0.01, 0.99))
        ->capture_default_str();
    b->add_option("--slow-factor", balance.slow_factor,
                  "slow-server scenario: server 0 is this many times slower")
        ->check(CLI::Range(1.0, 1000.0))
        ->capture_default_str();
    b->add_option("--hot-share", balance.hot_share,
                  "hot-key scenario: share of requests for the one hot key")
        ->check(CLI::Range(0.0, 1.0))
        ->capture_default_str();
    b->add_option("--key-space", balance.key_space, "distinct keys besides the hot one")
        ->check(CLI::Range(std::uint64_t{1}, std::uint64_t{1'000'000'000}))
        ->capture_default_str();
    b->add_option("--scenarios", balance.scenarios,
                  "static, uniform, heavy-tailed, slow-server, hot-key")
        ->delimiter(',')
        ->capture_default_str();
    b->add_option("-p,--policies", balance.policies,
                  "random, round-robin, least-request, p2c, p2c-ewma, hash")
        ->delimiter(',')
        ->capture_default_str();

    FleetArgs fleet_args;
    Common fleet_common;
    auto* f = app.add_subcommand(
        "fleet", "flows a fleet's health consensus breaks: host loss, churn, partial reachability");
    add_common(*f, fleet_common);
    f->add_option("--hosts", fleet_args.hosts, "LB hosts behind ECMP")
        ->check(CLI::Range(1u, kMaxFleetHosts))
        ->capture_default_str();
    f->add_option("--backends", fleet_args.backends, "backends of the VIP")
        ->check(CLI::Range(1u, kMaxFleetBackends))
        ->capture_default_str();
    f->add_option("--flows", fleet_args.flows, "established flows")
        ->check(CLI::Range(std::size_t{1}, std::size_t{20'000'000}))
        ->capture_default_str();
    f->add_option("--path-failure", fleet_args.path_failure,
                  "probability that one host's path to one backend fails (the host judges a "
                  "live backend unhealthy)")
        ->check(CLI::Range(0.0, 1.0))
        ->capture_default_str();
    f->add_option("--events", fleet_args.events, "trials of each event kind")
        ->check(CLI::Range(1u, 10'000u))
        ->capture_default_str();
    f->add_option("-m,--ring-size", fleet_args.ring_size,
                  "Maglev table size (prime); default 65537, or the smallest prime with 10 slots "
                  "per backend");
    f->add_option("--ecmp", fleet_args.ecmp,
                  "resilient (only a lost host's flows move) or modulo (hash mod live hosts)")
        ->capture_default_str();
    f->add_option("--kinds", fleet_args.kinds,
                  "host-loss, backend-fail, backend-join, path-failure, join+host-loss, "
                  "fail+host-loss, path+host-loss")
        ->delimiter(',')
        ->capture_default_str();
    f->add_option("--policies", fleet_args.policies, "local, majority, any_down")
        ->delimiter(',')
        ->capture_default_str();

    // CLI11 consumes a vector from the back.
    std::vector<std::string> reversed(args.rbegin(), args.rend());
    try {
        app.parse(reversed);
    } catch (const CLI::ParseError& e) {
        if (auto hint = xlb::cli::did_you_mean(&app)) {
            err << "xlb-sim: " << *hint << " (xlb-sim --help lists them)\n";
            return kExitUsage;
        }
        std::ostringstream usage_out, usage_err;
        const int code = app.exit(e, usage_out, usage_err);
        out << usage_out.str();
        if (!usage_err.str().empty()) err << "xlb-sim: " << usage_err.str();
        return code == 0 ? kExitOk : kExitUsage;
    }

    // Every error of a simulation comes from the values on the command line
    // (an unknown algorithm, a ring size that is not prime, ...): a usage
    // error, 2 as in every xlb tool. Writing the plot is the one failure.
    xlb::Result<std::string> result;
    PlotFile plot_file;
    if (p->parsed()) {
        result = run_placement_command(placement, placement_common, plot_file);
    } else if (c->parsed()) {
        result = run_churn_command(churn, churn_common, plot_file);
    } else if (f->parsed()) {
        result = run_fleet_command(fleet_args, fleet_common);
    } else {
        result = run_balance_command(balance, balance_common);
    }
    if (!result) {
        err << "xlb-sim: error: " << result.error() << '\n';
        return kExitUsage;
    }
    if (plot_file) {
        if (auto w = write_file(plot_file->first, plot_file->second); !w) {
            err << "xlb-sim: error: " << w.error() << '\n';
            return kExitFailure;
        }
    }
    out << *result;
    return kExitOk;
}

}  // namespace xlb::sim
