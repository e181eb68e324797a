// SPDX-License-Identifier: Apache-2.0
// xlb-bench-publish: how long a table change takes to go live, through the
// real reconciler and the real maps. Two figures per publish:
//   decision to live   - from the reconciler's decision (plan) until the
//                        outer-map update is issued; the table is live then;
//   decision to return - until that update call returns, after the kernel's
//                        RCU grace period (see docs/architecture.md).
// Each case changes one backend's weight per publish, so every publish
// builds and swaps a full 65537-slot table. Each case runs twice: calling the
// reconciler directly (plan, build, publish on one thread: p50_ms, p99_ms),
// and as the agent does, through its control loop, with the build on the
// worker thread and a thread hand-off each way (loop_p50_ms, loop_p99_ms).
//
// A publish takes a few milliseconds of CPU, so a p99 also measures how often
// the machine takes the CPU away for that long (a shared VM's host does, for
// milliseconds at a time). Before and after the cases the bench measures that
// baseline: a thread that only reads the clock, and every gap over 0.5 ms in
// its readings, for as long as the cases took.
#include <fmt/format.h>
#include <sched.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <expected>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <optional>
#include <vector>

#include "host.h"
#include "xlb/bpf/programs.h"
#include "xlb/control/data_plane.h"
#include "xlb/control/loop.h"
#include "xlb/control/reconciler.h"
#include "xlb/kernel/bpf_data_plane.h"

namespace {

using xlb::bench::percentile;
using xlb::control::Clock;

xlb::config::VipSpec make_vip(std::uint32_t backends) {
    xlb::config::VipSpec vip;
    vip.address = *xlb::net::IpAddress::parse("198.51.100.10");
    vip.port = 80;
    for (std::uint32_t i = 0; i < backends; ++i) {
        xlb::config::BackendSpec b;
        b.address = xlb::net::IpAddress::v4(10, static_cast<std::uint8_t>(i >> 16),
                                            static_cast<std::uint8_t>(i >> 8),
                                            static_cast<std::uint8_t>(i));
        vip.backends.push_back(b);
    }
    return vip;
}

// Gaps in a loop that only reads the clock: the time this thread was not
// running although it wanted to.
struct Stalls {
    double seconds = 0;
    int over_1ms = 0, over_2_5ms = 0;
    double max_ms = 0;
    double lost_share = 0;  // of the wall time, in gaps over 0.5 ms
};

Stalls measure_stalls(std::chrono::steady_clock::duration length) {
    using Clock = std::chrono::steady_clock;
    Stalls out;
    const auto start = Clock::now();
    auto last = start;
    double lost_ms = 0;
    for (auto now = start; now - start < length; now = Clock::now()) {
        const double gap_ms = std::chrono::duration<double, std::milli>(now - last).count();
        last = now;
        if (gap_ms < 0.5) continue;
        lost_ms += gap_ms;
        out.over_1ms += gap_ms > 1.0;
        out.over_2_5ms += gap_ms > 2.5;
        out.max_ms = std::max(out.max_ms, gap_ms);
    }
    out.seconds = std::chrono::duration<double>(Clock::now() - start).count();
    out.lost_share = lost_ms / (out.seconds * 1000);
    return out;
}

struct CaseResult {
    std::uint32_t backends;
    std::vector<double> live_ms, return_ms;
    // The same changes made as the agent makes them: a task on the control
    // loop's thread, the table built on its worker thread, then published.
    std::vector<double> loop_live_ms;
};

// Publishes through a ControlLoop, one change at a time, as the API does
// (each call waits for the publish that follows it). Returns decision to live.
xlb::Result<std::vector<double>> publish_through_loop(const xlb::bpf::LbProgram& program,
                                                      std::uint32_t n, int publishes) {
    xlb::control::BpfDataPlane data_plane(program);
    xlb::control::Reconciler reconciler(data_plane, {16, 4096});
    xlb::control::ControlLoop loop(reconciler, {});
    std::vector<double> live_ms;  // control thread only until stop()
    std::optional<xlb::Error> error;
    loop.on_publish(
        [&](const xlb::control::PublishRecord& r) { live_ms.push_back(r.decision_to_live_ms); });
    loop.on_error([&](const xlb::Error& e) { error = e; });
    loop.start();
    xlb::config::VipSpec vip = make_vip(n);
    for (int i = 0; i <= publishes; ++i) {  // the first publish is the VIP's first table
        if (i > 0) {
            auto& weight = vip.backends[static_cast<std::size_t>(i - 1) % n].weight;
            weight = weight == 50 ? 150 : 50;
        }
        auto published = loop.call<bool>([&vip](xlb::control::Reconciler& r) {
            r.set_vips({vip});
            return true;
        });
        published.get();
    }
    loop.stop();
    if (error) return std::unexpected(*error);
    if (live_ms.size() != static_cast<std::size_t>(publishes) + 1)
        return xlb::fail(fmt::format("{} publishes for {} changes", live_ms.size(), publishes + 1));
    live_ms.erase(live_ms.begin());
    return live_ms;
}

}  // namespace

int main(int argc, char** argv) {
    CLI::App app{"xlb-bench-publish: table publish latency through the real maps"};
    std::string out_path = "build/bench/publish.json";
    int publishes = 200;
    app.add_option("--out", out_path, "JSON output path")->capture_default_str();
    app.add_option("--publishes", publishes, "publishes per case")
        ->check(CLI::Range(10, 100000))
        ->capture_default_str();
    CLI11_PARSE(app, argc, argv);

    auto program = xlb::bpf::LbProgram::load({16, 4096, 1024});
    if (!program) {
        fmt::print(stderr, "xlb-bench-publish: {}\n", program.error().message());
        return 1;
    }
    std::vector<CaseResult> results;
    const auto cases_start = std::chrono::steady_clock::now();
    // half the baseline before the cases, half after (see the top)
    std::vector<Stalls> baseline;
    auto measure_baseline = [&](std::chrono::steady_clock::duration length) {
        baseline.push_back(measure_stalls(length));
    };
    measure_baseline(std::chrono::seconds(1));
    for (std::uint32_t n : {100u, 1000u}) {
        xlb::control::BpfDataPlane data_plane(*program);
        xlb::control::Reconciler reconciler(data_plane, {16, 4096});
        xlb::config::VipSpec vip = make_vip(n);
        reconciler.set_vips({vip});
        if (auto r = reconciler.reconcile(Clock::now()); !r) {
            fmt::print(stderr, "xlb-bench-publish: first publish: {}\n", r.error().message());
            return 1;
        }
        CaseResult result{n, {}, {}};
        for (int i = 0; i < publishes; ++i) {
            auto& weight = vip.backends[static_cast<std::size_t>(i) % n].weight;
            weight = weight == 50 ? 150 : 50;  // every publish changes the table
            reconciler.set_vips({vip});
            auto records = reconciler.reconcile(Clock::now());
            if (!records || records->size() != 1) {
                fmt::print(stderr, "xlb-bench-publish: publish {} failed: {}\n", i,
                           records ? "no table published" : records.error().message());
                return 1;
            }
            result.live_ms.push_back(records->front().decision_to_live_ms);
            result.return_ms.push_back(records->front().decision_to_return_ms);
        }
        reconciler.set_vips({});
        (void)reconciler.reconcile(Clock::now());
        auto through_loop = publish_through_loop(*program, n, publishes);
        if (!through_loop) {
            fmt::print(stderr, "xlb-bench-publish: through the control loop: {}\n",
                       through_loop.error().message());
            return 1;
        }
        result.loop_live_ms = std::move(*through_loop);
        results.push_back(std::move(result));
    }
    measure_baseline(std::max<std::chrono::steady_clock::duration>(
        std::chrono::seconds(1),
        std::chrono::steady_clock::now() - cases_start - std::chrono::seconds(1)));
    Stalls stalls;
    for (const Stalls& b : baseline) {
        stalls.over_1ms += b.over_1ms;
        stalls.over_2_5ms += b.over_2_5ms;
        stalls.max_ms = std::max(stalls.max_ms, b.max_ms);
        stalls.lost_share += b.lost_share * b.seconds;
        stalls.seconds += b.seconds;
    }
    stalls.lost_share /= stalls.seconds;

    nlohmann::json cases = nlohmann::json::array();
    fmt::print("{:>9}  {:>14}  {:>14}  {:>16}  {:>16}  {:>14}  {:>14}  {}\n", "backends",
               "live p50 ms", "live p99 ms", "return p50 ms", "return p99 ms", "loop p50 ms",
               "loop p99 ms", "target (live p99 < 5 ms)");
    for (const CaseResult& r : results) {
        const double p50 = percentile(r.live_ms, 50), p99 = percentile(r.live_ms, 99);
        const double rp50 = percentile(r.return_ms, 50), rp99 = percentile(r.return_ms, 99);
        const double lp50 = percentile(r.loop_live_ms, 50), lp99 = percentile(r.loop_live_ms, 99);
        fmt::print("{:>9}  {:>14.3f}  {:>14.3f}  {:>16.3f}  {:>16.3f}  {:>14.3f}  {:>14.3f}  {}\n",
                   r.backends, p50, p99, rp50, rp99, lp50, lp99,
                   r.backends == 1000 ? (p99 < 5.0 ? "met" : "MISSED") : "-");
        cases.push_back({{"backends", r.backends},
                         {"p50_ms", p50},
                         {"p99_ms", p99},
                         {"return_p50_ms", rp50},
                         {"return_p99_ms", rp99},
                         {"loop_p50_ms", lp50},
                         {"loop_p99_ms", lp99}});
    }
    fmt::print(
        "live: decision to live, reconciler called directly; return: until the update "
        "returned; loop: decision to live through the agent's control loop (build on its "
        "worker thread)\n");
    fmt::print(
        "baseline, a thread that only reads the clock for {:.1f} s: {:.1f} stalls/s over 1 ms, "
        "{:.1f}/s over 2.5 ms, longest {:.2f} ms, {:.2f}% of the time lost\n",
        stalls.seconds, stalls.over_1ms / stalls.seconds, stalls.over_2_5ms / stalls.seconds,
        stalls.max_ms, stalls.lost_share * 100);
    std::filesystem::path path(out_path);
    if (path.has_parent_path()) std::filesystem::create_directories(path.parent_path());
    const nlohmann::json baseline_json{
        {"seconds", stalls.seconds},
        {"stalls_over_1ms_per_s", stalls.over_1ms / stalls.seconds},
        {"stalls_over_2_5ms_per_s", stalls.over_2_5ms / stalls.seconds},
        {"longest_stall_ms", stalls.max_ms},
        {"time_lost_share", stalls.lost_share}};
    std::ofstream(path) << nlohmann::json{{"cases", cases}, {"stall_baseline", baseline_json}}.dump(
                               2)
                        << "\n";
    fmt::print("wrote {}\n", out_path);
    return 0;
}
