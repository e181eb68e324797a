// SPDX-License-Identifier: Apache-2.0
//
// Build time of a VIP's Maglev table: the library (BM_Maglev*) against a
// straightforward textbook implementation (BM_Textbook*) kept here, in the
// same run, on the same inputs. The textbook version follows the paper's
// pseudocode: a 64-bit modulo per probe, one pass over all backends per round.
// Both produce the same table; main() checks that before measuring. The
// library's time includes what the textbook's leaves out: input validation,
// the checksum and the slot counts.
//
// The development machines are shared and noisy: compare figures taken in one
// run, and prefer --benchmark_repetitions with the median or minimum.

#include <benchmark/benchmark.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <vector>

#include "xlb/config/model.h"
#include "xlb/maglev/maglev.h"
#include "xlb/net/address.h"

namespace {

namespace maglev = xlb::maglev;

constexpr std::uint32_t kLargeRingSize = 655373;

// Backends 10.0.0.0, 10.0.0.1, ... in input order, equal weights, keyed as
// xlbd keys them, so that the sort and the hashes cost what they cost there.
std::vector<maglev::Backend> make_backends(std::uint32_t count) {
    std::vector<maglev::Backend> backends;
    backends.reserve(count);
    for (std::uint32_t i = 0; i < count; ++i) {
        const auto address = xlb::net::IpAddress::v4(10, static_cast<std::uint8_t>(i >> 16),
                                                     static_cast<std::uint8_t>(i >> 8),
                                                     static_cast<std::uint8_t>(i));
        backends.push_back({xlb::config::maglev_identity(address, ""), 1});
    }
    return backends;
}

// Mixed weights 1..16, so that the weighted case exercises both the backends
// due every few passes and the rarely due ones.
std::vector<maglev::Backend> make_weighted_backends(std::uint32_t count) {
    std::vector<maglev::Backend> backends = make_backends(count);
    for (std::uint32_t i = 0; i < count; ++i) {
        backends[i].weight = 1 + i % 16;
    }
    return backends;
}

// The textbook build, equal weights: sort by key, hash each key to (offset,
// skip), then round-robin over the backends, each probing
// (offset + next * skip) mod M until it finds an empty slot.
// Not inlined, and the ring size laundered through DoNotOptimize, so that the
// compiler cannot turn the modulo by a known constant into a multiplication:
// the point is to measure what the textbook code costs for a runtime size.
[[gnu::noinline]] std::vector<std::uint32_t> textbook_build(
    const std::vector<maglev::Backend>& backends, std::uint32_t ring_size) {
    benchmark::DoNotOptimize(ring_size);
    std::vector<std::uint32_t> order(backends.size());
    for (std::uint32_t i = 0; i < order.size(); ++i) {
        order[i] = i;
    }
    std::sort(order.begin(), order.end(),
              [&](std::uint32_t a, std::uint32_t b) { return backends[a].key < backends[b].key; });
    const std::size_t count = order.size();
    std::vector<std::uint64_t> offset(count), skip(count), next(count, 0);
    for (std::size_t i = 0; i < count; ++i) {
        const maglev::Permutation permutation =
            maglev::permutation_for(backends[order[i]].key, ring_size);
        offset[i] = permutation.offset;
        skip[i] = permutation.skip;
    }
    std::vector<std::int64_t> entry(ring_size, -1);
    std::uint32_t filled = 0;
    for (;;) {
        for (std::size_t i = 0; i < count; ++i) {
            std::uint64_t slot = (offset[i] + next[i] * skip[i]) % ring_size;
            while (entry[slot] >= 0) {
                ++next[i];
                slot = (offset[i] + next[i] * skip[i]) % ring_size;
            }
            entry[slot] = static_cast<std::int64_t>(order[i]);
            ++next[i];
            if (++filled == ring_size) {
                return {entry.begin(), entry.end()};
            }
        }
    }
}

void run_library(benchmark::State& state, const std::vector<maglev::Backend>& backends,
                 std::uint32_t ring_size) {
    for (auto _ : state) {
        auto table = maglev::build_table(backends, {.ring_size = ring_size});
        if (!table) {
            state.SkipWithError(table.error().message.c_str());
            return;
        }
        benchmark::DoNotOptimize(table->table.data());
        benchmark::ClobberMemory();
    }
    state.counters["slots"] = ring_size;
}

void BM_MaglevBuild(benchmark::State& state) {
    const auto backends = make_backends(static_cast<std::uint32_t>(state.range(0)));
    run_library(state, backends, maglev::kDefaultRingSize);
}

void BM_MaglevBuildWeighted(benchmark::State& state) {
    const auto backends = make_weighted_backends(static_cast<std::uint32_t>(state.range(0)));
    run_library(state, backends, maglev::kDefaultRingSize);
}

void BM_MaglevBuildLarge(benchmark::State& state) {
    const auto backends = make_backends(static_cast<std::uint32_t>(state.range(0)));
    run_library(state, backends, kLargeRingSize);
}

void BM_TextbookBuild(benchmark::State& state) {
    const auto backends = make_backends(static_cast<std::uint32_t>(state.range(0)));
    for (auto _ : state) {
        auto table = textbook_build(backends, maglev::kDefaultRingSize);
        benchmark::DoNotOptimize(table.data());
        benchmark::ClobberMemory();
    }
    state.counters["slots"] = maglev::kDefaultRingSize;
}

BENCHMARK(BM_MaglevBuild)->Arg(10)->Arg(100)->Arg(1000)->Arg(5000)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_MaglevBuildWeighted)->Arg(1000)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_MaglevBuildLarge)->Arg(1000)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_TextbookBuild)->Arg(10)->Arg(100)->Arg(1000)->Arg(5000)->Unit(benchmark::kMillisecond);

// A benchmark of a wrong answer is worthless: the library must agree with the
// textbook slot for slot before anything is timed.
bool library_matches_textbook() {
    for (const std::uint32_t count : {10U, 100U, 1000U, 5000U}) {
        const auto backends = make_backends(count);
        const auto library = maglev::build_table(backends);
        if (!library || library->table != textbook_build(backends, maglev::kDefaultRingSize)) {
            std::fprintf(stderr, "xlb-bench-maglev: library and textbook differ for N=%u\n", count);
            return false;
        }
    }
    return true;
}

}  // namespace

int main(int argc, char** argv) {
    benchmark::Initialize(&argc, argv);
    if (benchmark::ReportUnrecognizedArguments(argc, argv)) {
        return 1;
    }
    if (!library_matches_textbook()) {
        return 1;
    }
    benchmark::RunSpecifiedBenchmarks();
    benchmark::Shutdown();
    return 0;
}
