// SPDX-License-Identifier: Apache-2.0
// xlb-bench-conntrack: how long the operator's views of a full connection
// table take (`xlbctl conntrack count` must be cheap enough to call
// every few seconds on a 1M-entry table).
//
// Set-up. The balancer's maps are loaded unpinned (nothing attached, nothing
// pinned: the bench touches no running xlbd) with a table of --entries, and
// the table is filled nearly full: --entries flows, then fresh ones until
// 98% of the slots hold one (an insert whose two buckets are full replaces an
// entry, so the last slots fill slowly). Keys are what the
// program records: IPv4 TCP flows from clients spread over the whole address
// space to 4 VIPs on port 443. Values name backends that exist in
// xlb_backends (4 x 100), so that the entries are judged as the agent judges
// them: about 95% valid, 4% of an older generation and 1% of a released id
// (stale); idle times 0-60 s (30%), 1-30 min (60%) and 65 min-2 h (10%, past
// the TCP default timeout of 1 h: what a sweep expires).
//
// Cases, each timed --samples times, in rounds (one sample of each per round):
//   raw_read   a walk of the table's mapped buckets that copies out each entry,
//              nothing else: the floor every scan pays;
//   scan       BpfTable::scan with an empty callback: the library's read;
//   count...   conntrack::count(), the function GET /v1/conntrack/count calls,
//              with the Context built as the API builds it per request
//              (xlb_backends read through the table); without a filter and
//              with vip + backend + active_within;
//   list       conntrack::list(), --client prefix, limit 100 (GET /v1/conntrack);
//   flush      conntrack::flush() with a backend selector, dry run;
//   sweep      conntrack::sweep(), what the agent's sweeper runs: deletes the
//              10% past their timeout. The bench puts them back afterwards,
//              untimed (into the slots the sweep emptied), so that every round
//              starts from the same table.
// The VIP list the API takes from the control thread is built once, outside
// the timing (a hand-off between threads, not the table's cost).
//
// Memory. Global operator new is replaced by a counting one: each case
// reports the most heap its call held above what was in use before it (the
// keys a flush or sweep keeps to delete, the batch buffers, the counters).
// The process's peak RSS includes the bench's own copy of the entries.
//
// Checks. Every raw read must find the entries the fill left; the first unfiltered count
// must see every entry, every VIP and the stale entries the bench wrote; every
// sweep must delete exactly the expired entries, every flush dry run delete
// none. A failed check ends the run with exit status 1.
#include <bpf/bpf.h>
#include <fmt/format.h>
#include <malloc.h>
#include <netinet/in.h>
#include <sched.h>
#include <sys/resource.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <new>
#include <nlohmann/json.hpp>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "host.h"
#include "xlb/abi.h"
#include "xlb/bpf/programs.h"
#include "xlb/conntrack/table.h"
#include "xlb/datapath/setup.h"
#include "xlb/files/files.h"
#include "xlb/kernel/conntrack_bpf_table.h"
#include "xlb/net/address.h"

// ---------------------------------------------------------------------------
// Heap accounting: the library's scans allocate through std::vector and
// std::map, so counting operator new gives the memory a call holds without
// depending on when glibc returns pages to the kernel (RSS would not show a
// buffer that reuses pages freed by the previous case).

namespace {
std::atomic<std::size_t> g_heap_live{0};
std::atomic<std::size_t> g_heap_peak{0};

void* counted_alloc(std::size_t n) {
    void* p = std::malloc(n == 0 ? 1 : n);
    if (!p) throw std::bad_alloc();
    const std::size_t live =
        g_heap_live.fetch_add(malloc_usable_size(p), std::memory_order_relaxed) +
        malloc_usable_size(p);
    std::size_t peak = g_heap_peak.load(std::memory_order_relaxed);
    while (live > peak && !g_heap_peak.compare_exchange_weak(peak, live)) {
    }
    return p;
}

void counted_free(void* p) noexcept {
    if (!p) return;
    g_heap_live.fetch_sub(malloc_usable_size(p), std::memory_order_relaxed);
    std::free(p);
}
}  // namespace

void* operator new(std::size_t n) { return counted_alloc(n); }
void* operator new[](std::size_t n) { return counted_alloc(n); }
void operator delete(void* p) noexcept { counted_free(p); }
void operator delete[](void* p) noexcept { counted_free(p); }
void operator delete(void* p, std::size_t) noexcept { counted_free(p); }
void operator delete[](void* p, std::size_t) noexcept { counted_free(p); }

namespace {

namespace bpf = xlb::bpf;
using xlb::bench::cpu_model;
using xlb::bench::kernel_release;
using xlb::bench::pin_to_cpu;
namespace ct = xlb::conntrack;
using xlb::net::IpAddress;

struct Failure : std::runtime_error {
    using std::runtime_error::runtime_error;
};

template <typename T>
T must(xlb::Result<T> result, const std::string& what) {
    if (!result) throw Failure(what + ": " + result.error().message());
    if constexpr (!std::is_void_v<T>) return std::move(*result);
}

constexpr std::uint32_t kVips = 4;
constexpr std::uint32_t kBackendsPerVip = 100;
constexpr std::uint32_t kGeneration = 3;
// As in an agent that has ticked the program's clock for a day: idle times decide.
constexpr std::uint64_t kClockRunningMs = 86'400'000;
// Ids past the live ones: released backends whose entries are still around.
constexpr std::uint32_t kFirstReleasedId = 1 + kVips * kBackendsPerVip;
constexpr std::uint16_t kVipPort = 443;
// Longer than a run lasts, so that the entries idle under a minute at the fill
// (30%) match in every sample, and shorter than most idle times.
constexpr auto kActiveWithin = std::chrono::minutes(10);
constexpr std::size_t kListLimit = 100;

IpAddress vip_address(std::uint32_t v) { return IpAddress::v4(198, 51, 100, 10 + v); }
// Backend `b` of VIP `v`: id 1 + v * 100 + b in xlb_backends.
IpAddress backend_address(std::uint32_t v, std::uint32_t b) {
    return IpAddress::v4(10, 1, static_cast<std::uint8_t>(v), static_cast<std::uint8_t>(b + 1));
}
std::uint32_t backend_id(std::uint32_t v, std::uint32_t b) { return 1 + v * kBackendsPerVip + b; }

std::vector<xlb::config::VipSpec> make_vips() {
    std::vector<xlb::config::VipSpec> vips;
    for (std::uint32_t v = 0; v < kVips; ++v) {
        xlb::config::VipSpec spec;
        spec.address = vip_address(v);
        spec.port = kVipPort;
        for (std::uint32_t b = 0; b < kBackendsPerVip; ++b) {
            xlb::config::BackendSpec backend;
            backend.address = backend_address(v, b);
            spec.backends.push_back(backend);
        }
        vips.push_back(std::move(spec));
    }
    return vips;
}

ct::Units units_ago(ct::Units now, std::chrono::milliseconds ago) {
    return now - static_cast<ct::Units>(static_cast<std::uint64_t>(ago.count()) * 1'000'000 >>
                                        XLB_CT_TIME_SHIFT);
}

// A bijection on 32 bits (an odd multiplier, then xor-shift): every entry
// gets its own client address, spread over the whole space like real
// sources, so no key repeats and no update replaces another.
std::uint32_t spread(std::uint32_t i) {
    std::uint32_t x = i * 0x9E3779B1U;
    return x ^ (x >> 16);
}

struct Entries {
    std::vector<xlb_flow_key> keys;
    std::vector<xlb_ct_value> values;
};

// Entries [first, first + n) of the bench's sequence.
Entries make_entries(std::uint32_t first, std::uint32_t n, ct::Units now) {
    std::mt19937_64 rng(first);
    Entries out;
    out.keys.reserve(n);
    out.values.reserve(n);
    for (std::uint32_t i = first; i < first + n; ++i) {
        const std::uint32_t v = i % kVips;
        const std::uint32_t client = spread(i);
        const auto sport = static_cast<std::uint16_t>(1024 + rng() % 64512);
        const IpAddress src = IpAddress::v4(
            static_cast<std::uint8_t>(client >> 24), static_cast<std::uint8_t>(client >> 16),
            static_cast<std::uint8_t>(client >> 8), static_cast<std::uint8_t>(client));
        out.keys.push_back(xlb::datapath::flow_key(xlb::net::Endpoint{src, sport},
                                                   xlb::net::Endpoint{vip_address(v), kVipPort},
                                                   IPPROTO_TCP));
        xlb_ct_value value{};
        const auto kind = rng() % 100;
        if (kind < 4) {  // recorded before its backend was replaced
            value.backend_id = backend_id(v, static_cast<std::uint32_t>(rng() % kBackendsPerVip));
            value.generation = kGeneration - 1;
        } else if (kind == 4) {  // its backend was removed
            value.backend_id = kFirstReleasedId + v;
            value.generation = kGeneration;
        } else {
            value.backend_id = backend_id(v, static_cast<std::uint32_t>(rng() % kBackendsPerVip));
            value.generation = kGeneration;
        }
        const auto age = rng() % 100;
        std::chrono::milliseconds idle;
        if (age < 30)
            idle = std::chrono::milliseconds(rng() % 60'000);
        else if (age < 90)
            idle = std::chrono::milliseconds(60'000 + rng() % (29 * 60'000));
        else
            idle = std::chrono::milliseconds(65 * 60'000 + rng() % (55 * 60'000));
        value.last_seen = units_ago(now, idle);
        value.created =
            units_ago(value.last_seen, std::chrono::milliseconds(rng() % (3600 * 1000)));
        out.values.push_back(value);
    }
    return out;
}

void write_entries(const bpf::ConntrackTable& table, const std::vector<xlb_flow_key>& keys,
                   const std::vector<xlb_ct_value>& values) {
    for (std::size_t i = 0; i < keys.size(); ++i)
        must(table.put(keys[i], values[i]), "fill the connection table");
}

// The baseline: every entry copied out of the mapping, nothing done with it.
std::uint64_t raw_read(const bpf::ConntrackTable& table) {
    std::uint64_t total = 0;
    table.for_each([&](const xlb_flow_key&, const xlb_ct_value&) { ++total; });
    return total;
}

// The whole table, for the checks (untimed).
Entries read_all(const bpf::ConntrackTable& table) {
    Entries out;
    table.for_each([&](const xlb_flow_key& key, const xlb_ct_value& value) {
        out.keys.push_back(key);
        out.values.push_back(value);
    });
    return out;
}

// What each API request (and each sweep) builds before its scan.
ct::Context api_context(const ct::Table& table, const std::vector<ct::VipInfo>& vips) {
    return ct::Context(vips, must(table.backends(), "read xlb_backends"));
}

struct Case {
    std::string name;
    std::string what;
    std::vector<double> ms;
    std::uint64_t scanned = 0;  // entries read per call
    std::uint64_t matched = 0;  // of the last sample
    std::size_t heap_peak_bytes = 0;
};

double median(std::vector<double> v) {
    std::sort(v.begin(), v.end());
    const std::size_t n = v.size();
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}
double min_of(const std::vector<double>& v) { return *std::min_element(v.begin(), v.end()); }
double max_of(const std::vector<double>& v) { return *std::max_element(v.begin(), v.end()); }

// How full the fill leaves the table: a set-associative table reaches 100%
// only slowly (the last empty slots wait for a flow of their own buckets).
constexpr std::uint64_t kFilledPercent = 98;

// Times one call and the heap it held above what was in use before it.
struct Sample {
    double ms = 0;
    std::size_t heap_bytes = 0;
};
template <typename F>
Sample timed(F&& call) {
    const std::size_t before = g_heap_live.load();
    g_heap_peak.store(before);
    const auto start = std::chrono::steady_clock::now();
    call();
    const auto end = std::chrono::steady_clock::now();
    return Sample{std::chrono::duration<double, std::milli>(end - start).count(),
                  g_heap_peak.load() - before};
}

std::uint64_t proc_status_kib(const char* field) {
    std::ifstream in("/proc/self/status");
    std::string line;
    const std::string prefix = std::string(field) + ":";
    while (std::getline(in, line))
        if (line.rfind(prefix, 0) == 0)
            return std::strtoull(line.c_str() + prefix.size(), nullptr, 10);
    return 0;
}

struct Options {
    std::uint32_t entries = 1U << 20;
    unsigned samples = 11;
    int cpu = -1;
    std::string out;
};

int run(int argc, char** argv) {
    Options opt;
    CLI::App app{"xlb-bench-conntrack: count, list, flush and sweep of a full connection table"};
    app.add_option("--entries", opt.entries, "connection-table size, filled to 98% or more")
        ->check(CLI::Range(4096u, 1u << 26))
        ->capture_default_str();
    app.add_option("--samples", opt.samples, "samples per case (median, min, max)")
        ->check(CLI::Range(1u, 1000u))
        ->capture_default_str();
    app.add_option("--cpu", opt.cpu, "CPU to pin to (default: the highest allowed)");
    app.add_option("--out", opt.out, "where to write the JSON results (default: none)");
    CLI11_PARSE(app, argc, argv);
    if (opt.samples < 5) fmt::print(stderr, "note: fewer than 5 samples: figures are indicative\n");

    // One CPU: the scans are single-threaded in the agent too.
    const int cpu = pin_to_cpu(opt.cpu);

    bpf::LbMapSizes sizes;
    sizes.conntrack_entries = opt.entries;
    auto lb = must(bpf::LbProgram::load(sizes), "load the balancer's maps");
    const auto conntrack = lb.conntrack();
    const auto backends_map = lb.backends();

    for (std::uint32_t v = 0; v < kVips; ++v) {
        for (std::uint32_t b = 0; b < kBackendsPerVip; ++b)
            must(backends_map.put(backend_id(v, b),
                                  xlb::datapath::backend_entry(backend_address(v, b), kGeneration)),
                 "write xlb_backends");
        must(backends_map.put(kFirstReleasedId + v,
                              xlb::datapath::released_backend_entry(kGeneration + 1)),
             "write xlb_backends");
    }
    // The VIPs in the balancer's VIP map, as xlbd writes them: the table
    // names each flow by its VIP's id (abi.h, layout 5).
    for (std::uint32_t v = 0; v < kVips; ++v)
        must(lb.put_vip(xlb::datapath::vip_key(vip_address(v), kVipPort, IPPROTO_TCP),
                        xlb_vip_value{v, 0}),
             "write xlb_vips");
    const auto table = must(ct::BpfTable::open(conntrack, backends_map, {}), "open the table");

    const std::vector<xlb::config::VipSpec> specs = make_vips();
    std::vector<ct::VipInfo> vips;
    for (const auto& spec : specs) vips.push_back(ct::vip_info(spec));

    const auto fill_start = std::chrono::steady_clock::now();
    {
        const Entries entries = make_entries(0, opt.entries, table.now());
        write_entries(conntrack, entries.keys, entries.values);
    }
    const double fill_ms =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - fill_start)
            .count();
    std::uint32_t next_fresh = opt.entries;

    // What the table holds (what the checks expect) and the entries the next
    // sweep deletes, to put back after it.
    std::uint64_t held = 0;
    std::uint64_t stale = 0;
    Entries expired;
    auto take_stock = [&] {
        const Entries now_in = read_all(conntrack);
        const ct::Context context = api_context(table, vips);
        const ct::Units now = table.now();
        held = now_in.keys.size();
        stale = 0;
        expired = {};
        for (std::size_t i = 0; i < now_in.keys.size(); ++i) {
            const ct::Entry e{now_in.keys[i], now_in.values[i]};
            const ct::View view = ct::judge(context, e, now);
            stale += !view.valid;
            if (ct::expired(e, view, kClockRunningMs)) {
                expired.keys.push_back(e.key);
                expired.values.push_back(e.value);
            }
        }
    };
    // Flows land in buckets at random: where both of a flow's buckets are
    // full, the entry seen longest ago goes. Fresh flows fill the gaps.
    take_stock();
    std::uint64_t topped_up = 0;
    const std::uint64_t capacity = conntrack.capacity();
    for (int attempt = 0; attempt < 16 && held * 100 < capacity * kFilledPercent; ++attempt) {
        const auto chunk = static_cast<std::uint32_t>(capacity / 4);
        const Entries fresh = make_entries(next_fresh, chunk, table.now());
        next_fresh += chunk;
        topped_up += chunk;
        write_entries(conntrack, fresh.keys, fresh.values);
        take_stock();
    }
    const std::uint64_t filled = held;
    if (filled * 100 < capacity * kFilledPercent)
        throw Failure(fmt::format("the table holds {} entries of {} after {} flows", filled,
                                  capacity, next_fresh));

    // The swept entries go back into the slots the sweep emptied.
    std::uint64_t least_held = held;
    double refill_ms_total = 0;
    auto refill = [&] {
        const auto start = std::chrono::steady_clock::now();
        write_entries(conntrack, expired.keys, expired.values);
        refill_ms_total +=
            std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
                .count();
        take_stock();
        least_held = std::min(least_held, held);
    };

    ct::Filter narrow;
    narrow.vip = specs[0].key();
    narrow.backend = backend_address(0, 0);
    narrow.active_within = std::chrono::duration_cast<xlb::config::Duration>(kActiveWithin);
    ct::Filter by_client;
    // The /12 of the first client: about 1 entry in 4096 (256 of 1M, past the limit).
    const std::uint32_t first_client = spread(0);
    by_client.client = xlb::net::Prefix{
        IpAddress::v4(static_cast<std::uint8_t>(first_client >> 24),
                      static_cast<std::uint8_t>((first_client >> 16) & 0xF0), 0, 0),
        12};
    ct::Filter by_backend;
    by_backend.backend = backend_address(1, 7);

    std::vector<Case> cases = {
        {"raw_read", "baseline: walk of the mapped buckets, every entry copied", {}, 0, 0, 0},
        {"scan", "BpfTable::scan, empty callback", {}, 0, 0, 0},
        {"count", "count, no filter (GET /v1/conntrack/count)", {}, 0, 0, 0},
        {"count_filtered", "count --vip --backend --active-within 10m", {}, 0, 0, 0},
        {"list", "list --client /12 --limit 100", {}, 0, 0, 0},
        {"flush_dry_run", "flush --backend --dry-run", {}, 0, 0, 0},
        {"sweep", "sweep: expire ~10%, count the rest (the sweeper)", {}, 0, 0, 0},
        {"connections",
         "connections per backend (backend list, top, /metrics; once a second)",
         {},
         0,
         0,
         0},
    };
    auto record = [](Case& c, const Sample& s) {
        c.ms.push_back(s.ms);
        c.heap_peak_bytes = std::max(c.heap_peak_bytes, s.heap_bytes);
    };

    for (unsigned round = 0; round < opt.samples; ++round) {
        std::uint64_t n = 0;
        record(cases[0], timed([&] { n = raw_read(conntrack); }));
        if (n != held)
            throw Failure(
                fmt::format("round {}: the table holds {} entries, not {}", round, n, held));
        cases[0].scanned = cases[0].matched = n;

        n = 0;
        record(cases[1], timed([&] {
                   must(table.scan([&](std::span<const ct::Entry> batch) { n += batch.size(); }),
                        "scan");
               }));
        cases[1].scanned = cases[1].matched = n;

        ct::CountReport all;
        record(cases[2], timed([&] {
                   const ct::Context context = api_context(table, vips);
                   all = must(ct::count(table, context, ct::Filter{}), "count");
               }));
        cases[2].scanned = all.counts.scanned;
        cases[2].matched = all.counts.matched;
        if (round == 0) {
            std::uint64_t stale_seen = 0;
            for (const auto& v : all.counts.vips) stale_seen += v.stale;
            if (all.counts.scanned != held || all.counts.matched != held ||
                all.counts.no_vip != 0 || all.counts.vips.size() != kVips || stale_seen != stale)
                throw Failure(fmt::format(
                    "count saw {} entries, {} matched, {} of no VIP, {} VIPs, {} stale; "
                    "expected {}, {}, 0, {}, {}",
                    all.counts.scanned, all.counts.matched, all.counts.no_vip,
                    all.counts.vips.size(), stale_seen, held, held, kVips, stale));
        }

        ct::CountReport some;
        record(cases[3], timed([&] {
                   const ct::Context context = api_context(table, vips);
                   some = must(ct::count(table, context, narrow), "count (filtered)");
               }));
        cases[3].scanned = some.counts.scanned;
        cases[3].matched = some.counts.matched;

        ct::ListReport listed;
        record(cases[4], timed([&] {
                   const ct::Context context = api_context(table, vips);
                   listed = must(ct::list(table, context, by_client, kListLimit), "list");
               }));
        cases[4].scanned = listed.scanned;
        cases[4].matched = listed.matched;

        ct::FlushReport flushed;
        record(cases[5], timed([&] {
                   const ct::Context context = api_context(table, vips);
                   flushed = must(ct::flush(table, context, by_backend, true), "flush --dry-run");
               }));
        if (flushed.deleted != 0)
            throw Failure(fmt::format("a dry run deleted {} entries", flushed.deleted));
        cases[5].scanned = held;
        cases[5].matched = flushed.matched;

        ct::ConnectionsReport per_backend;
        record(cases[7], timed([&] {
                   per_backend = must(ct::connections(table, ct::kActiveWithin), "connections");
               }));
        std::uint64_t counted = 0;
        for (const auto& [ids, c] : per_backend.backends) counted += c.active + c.inactive;
        if (counted != held - stale)
            throw Failure(
                fmt::format("round {}: connections counted {} entries, expected the {} "
                            "valid ones",
                            round, counted, held - stale));
        cases[7].scanned = held;
        cases[7].matched = counted;

        ct::SweepReport swept;
        record(cases[6], timed([&] {
                   const ct::Context context = api_context(table, vips);
                   swept = must(ct::sweep(table, context, kClockRunningMs), "sweep");
               }));
        if (swept.expired != expired.keys.size())
            throw Failure(fmt::format("round {}: the sweep deleted {} entries, expected {}", round,
                                      swept.expired, expired.keys.size()));
        cases[6].scanned = swept.counts.scanned;
        cases[6].matched = swept.expired;

        refill();
    }

    // ---- the table for people
    const double baseline = median(cases[0].ms);
    fmt::print(
        "\nxlb-bench-conntrack: {}-entry table holding {} ({:.1f}%), {} VIPs x {} backends, {} "
        "samples, batch {}, pinned to CPU {}\n",
        capacity, filled, 100.0 * static_cast<double>(filled) / static_cast<double>(capacity),
        kVips, kBackendsPerVip, opt.samples, ct::kBatchSize, cpu);
    fmt::print("kernel {}, {}\n", kernel_release(), cpu_model());
    fmt::print(
        "fill: {:.0f} ms ({:.2f} M entries/s, written through the mapping); {} stale, {} "
        "expired\n\n",
        fill_ms, static_cast<double>(held) / fill_ms / 1000.0, stale, expired.keys.size());
    constexpr auto kRow = "{:<15} {:>9} {:>9} {:>9} {:>8} {:>11} {:>9} {:>9}  {}\n";
    const std::string header = fmt::format(kRow, "case", "median ms", "min ms", "max ms", "x base",
                                           "M entries/s", "matched", "heap MiB", "what");
    fmt::print("{}{}\n", header, std::string(header.size() - 1, '-'));
    for (const Case& c : cases) {
        const double med = median(c.ms);
        fmt::print(kRow, c.name, fmt::format("{:.1f}", med), fmt::format("{:.1f}", min_of(c.ms)),
                   fmt::format("{:.1f}", max_of(c.ms)), fmt::format("{:.2f}", med / baseline),
                   fmt::format("{:.2f}", static_cast<double>(c.scanned) / med / 1000.0), c.matched,
                   fmt::format("{:.2f}", static_cast<double>(c.heap_peak_bytes) / (1 << 20)),
                   c.what);
    }
    const double rss_mib = static_cast<double>(proc_status_kib("VmRSS")) / 1024.0;
    const double hwm_mib = static_cast<double>(proc_status_kib("VmHWM")) / 1024.0;
    fmt::print(
        "\nms: wall time of one call, the API's Context (xlb_backends read) included; x base:\n"
        "median / raw_read's median; M entries/s: entries read per call / median; heap MiB:\n"
        "most heap held by one call above what it started with. Process RSS {:.0f} MiB, peak\n"
        "{:.0f} MiB (the bench's own copy of the entries included). Refill after each sweep\n"
        "(untimed): {:.1f} ms on average. The fill wrote {} flows beyond --entries to\n"
        "fill 98% of the slots or more.\n",
        rss_mib, hwm_mib, refill_ms_total / opt.samples, topped_up);
    if (least_held < filled)
        fmt::print(
            "Note: some rounds ran with {} entries only (the refill could not top the table "
            "up).\n",
            least_held);

    if (opt.out.empty()) return 0;
    using json = nlohmann::ordered_json;
    json jcases = json::array();
    for (const Case& c : cases) {
        const double med = median(c.ms);
        jcases.push_back({
            {"name", c.name},
            {"what", c.what},
            {"ms_median", med},
            {"ms_min", min_of(c.ms)},
            {"ms_max", max_of(c.ms)},
            {"vs_baseline", med / baseline},
            {"entries_scanned", c.scanned},
            {"entries_per_s", static_cast<double>(c.scanned) / med * 1000.0},
            {"matched", c.matched},
            {"heap_peak_bytes", c.heap_peak_bytes},
            {"samples_ms", c.ms},
        });
    }
    const json doc = {
        {"entries", opt.entries},
        {"entries_held", filled},
        {"least_entries_held", least_held},
        {"topped_up", topped_up},
        {"vips", kVips},
        {"backends_per_vip", kBackendsPerVip},
        {"stale", stale},
        {"expired_per_sweep", expired.keys.size()},
        {"batch_size", ct::kBatchSize},
        {"samples", opt.samples},
        {"baseline", "raw_read"},
        {"cases", std::move(jcases)},
        {"fill_ms", fill_ms},
        {"refill_ms_mean", refill_ms_total / opt.samples},
        {"rss_mib", rss_mib},
        {"peak_rss_mib", hwm_mib},
        {"cpu", cpu},
        {"kernel", kernel_release()},
        {"cpu_model", cpu_model()},
    };
    if (auto ok = xlb::files::write_file_atomic(opt.out, doc.dump(2) + "\n"); !ok)
        throw Failure(ok.error().message());
    fmt::print("JSON: {}\n", opt.out);
    return 0;
}

}  // namespace

int main(int argc, char** argv) {
    try {
        return run(argc, argv);
    } catch (const std::exception& e) {
        fmt::print(stderr, "xlb-bench-conntrack: {}\n", e.what());
        return 1;
    }
}
