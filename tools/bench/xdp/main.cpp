// SPDX-License-Identifier: Apache-2.0
//
// xlb-bench-xdp: nanoseconds per packet of the balancer's main paths, measured
// with BPF_PROG_TEST_RUN.
//
// Method (issue 2, "Benchmark"):
//  - Every measurement runs the wrapper of bpf/bench/xlb_bench.bpf.c, which
//    restores the original 128-byte frame before each repetition (the kernel
//    does not, and the balancer grows the frame) and tail-calls slot 0 of its
//    prog array: the balancer for a case, xlb_bench_floor (swap MACs, XDP_TX)
//    for the floor. net = case - floor is what the balancer itself costs.
//  - One sample = one BPF_PROG_TEST_RUN of `repeat` repetitions; the kernel
//    reports the mean per repetition. Each case sample is bracketed by two
//    floor samples taken with the same frame and the same per-run rewrite, and
//    its net figure is the case minus the mean of those two floors: the host
//    has phases of seconds in which everything runs slower, and the pairing
//    takes each sample's floor from the phase of the case. Rounds rotate the
//    order of the cases.
//  - The process is pinned to one CPU, so every repetition, counter and map
//    access happens there.
//  - After every sample, the return value, the output frame and the counters
//    (global outcomes, per-VIP packets / new flows / connection-table hits)
//    must show that the path named by the case was the path taken, every
//    repetition. Anything else ends the run with exit status 1.
//
// Exit status: 0 when every check held (targets missed or not), 1 when a check
// or the BPF setup failed, CLI11's non-zero codes for a bad command line.

#include <arpa/inet.h>
#include <bpf/bpf.h>
#include <fmt/format.h>
#include <linux/bpf.h>
#include <sched.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <array>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "harness.h"
#include "host.h"
#include "testbed.h"
#include "xlb/abi.h"
#include "xlb/bpf/ct_clock.h"
#include "xlb/bpf/programs.h"
#include "xlb/bpf/ring.h"
#include "xlb/bpf/test_run.h"
#include "xlb/datapath/setup.h"
#include "xlb/flow_hash.h"
#include "xlb/net/address.h"

namespace {

namespace bpf = xlb::bpf;
using xlb::bench::cpu_model;
using xlb::bench::kernel_release;
using xlb::bench::pin_to_cpu;
namespace test = xlb::test;
using test::Bytes;
using xlb::bench::Harness;
using xlb::bench::kFrameLen;
using xlb::net::IpAddress;

// ---------------------------------------------------------------------------
// Errors: a failed check or setup step throws; main() prints it and exits 1.

struct Failure : std::runtime_error {
    using std::runtime_error::runtime_error;
};

template <typename T>
T must(bpf::Result<T> result) {
    if (!result) throw Failure(result.error().message());
    if constexpr (!std::is_void_v<T>) return std::move(*result);
}

// ---------------------------------------------------------------------------
// The balancer's configuration for the benchmark.

constexpr std::uint32_t kVipTcp4 = 0;      // kVipV4:80/tcp, connection table
constexpr std::uint32_t kVipTcp6 = 1;      // kVipV6:80/tcp, connection table
constexpr std::uint32_t kVipUdp4NoCt = 2;  // kVipV4:53/udp, XLB_VIP_F_NO_CONNTRACK
constexpr std::uint32_t kVipCount = 3;
constexpr std::uint32_t kBackendsPerFamily = 100;
constexpr std::uint32_t kFirstV6Backend = kBackendsPerFamily;
constexpr std::uint16_t kDnsPort = 53;
// Offset of the IPv4 source address in an Ethernet frame: the field the
// wrapper rewrites on every repetition of new_flow_v4.
constexpr std::uint32_t kIpv4SrcOffset = 14 + 12;
// Spare connection-table entries: free LRU nodes parked on a CPU's local list
// cannot serve another CPU, so the table counts as full this much early.
constexpr std::uint64_t kLruSlackPerCpu = 512;
constexpr std::uint64_t kLruSlack = 4096;
// The insert budget of every case but new_flow_over_budget_v4: far above what
// one CPU inserts, so nothing is skipped, yet the token bucket runs as in
// production (a rate of 0 would skip it).
constexpr xlb::datapath::CtBudget kAmpleBudget{.rate = 1'000'000'000, .burst = 1'000'000'000};
// new_flow_over_budget_v4: one entry per second, its bucket emptied before
// each sample.
constexpr xlb::datapath::CtBudget kSpentBudget{.rate = 1, .burst = 1};

struct Counters {
    std::array<std::uint64_t, XLB_OUT__MAX> outcomes{};
    std::array<xlb_vip_stats, kVipCount> vips{};
    std::uint64_t ct_inserts = 0, ct_skipped = 0;  // xlb_ct_cpu, summed
};

// The program's clocks: CLOCK_MONOTONIC_COARSE in ns (the insert budget), and
// the entry-time clock in connection-table units (created, last_seen).
using bpf::monotonic_coarse_ns;
std::uint64_t coarse_ns() { return monotonic_coarse_ns(); }
std::uint32_t ct_now() { return bpf::ct_clock_now(); }

class Balancer {
public:
    explicit Balancer(std::uint32_t conntrack_entries)
        : lb_(must(bpf::LbProgram::load(bpf::LbMapSizes{
              .max_vips = 8, .max_backends = 256, .conntrack_entries = conntrack_entries}))) {
        configure();
        // As xlbd does: the program's entry-time clock ticks from a thread.
        clock_.emplace([this](std::uint32_t units) { lb_.set_ct_clock(units); });
    }

    const bpf::LbProgram& lb() const { return lb_; }
    const IpAddress& backend_address(std::uint32_t id) const { return backend_addr_.at(id); }
    std::uint32_t ring_size() const { return static_cast<std::uint32_t>(ring_v4_.size()); }

    // The backend the ring of `vip_id` gives the flow.
    std::uint32_t ring_choice(std::uint32_t vip_id, const xlb_flow_key& key,
                              std::uint32_t vip_flags) const {
        const auto& ring = vip_id == kVipTcp6 ? ring_v6_ : ring_v4_;
        return ring.at(xlb::datapath::ring_index(key, vip_flags, test::kHashSeed, ring.size()));
    }

    Counters counters() const {
        Counters c;
        for (std::uint32_t o = 0; o < XLB_OUT__MAX; ++o)
            c.outcomes[o] = xlb::datapath::sum_per_cpu(must(lb_.outcomes().get_per_cpu(o)));
        for (std::uint32_t v = 0; v < kVipCount; ++v)
            c.vips[v] = xlb::datapath::sum_per_cpu(must(lb_.vip_stats().get_per_cpu(v)));
        for (const xlb_ct_cpu& cpu : must(lb_.ct_cpu().get_per_cpu(0))) {
            c.ct_inserts += cpu.inserts;
            c.ct_skipped += cpu.skipped;
        }
        return c;
    }

    void use_budget(xlb::datapath::CtBudget budget) {
        if (budget.rate == budget_.rate && budget.burst == budget_.burst) return;
        must(lb_.config().put(0, config(budget)));
        budget_ = budget;
    }

    // Every CPU's bucket empty, as of now.
    void empty_buckets() const {
        std::vector<xlb_ct_cpu> per_cpu = must(lb_.ct_cpu().get_per_cpu(0));
        for (xlb_ct_cpu& cpu : per_cpu) {
            cpu.tokens = 0;
            cpu.refill_ns = coarse_ns();
        }
        const std::uint32_t key = 0;
        if (bpf_map_update_elem(lb_.ct_cpu().fd(), &key, per_cpu.data(), BPF_ANY) != 0)
            throw Failure(
                fmt::format("empty the insert budget's buckets: {}", std::strerror(errno)));
    }

    std::optional<xlb_ct_value> conntrack_entry(const xlb_flow_key& key) const {
        return must(lb_.conntrack().get(key));
    }

    // Empties the connection table with batched lookup-and-delete (a per-key
    // delete of millions of entries would take longer than the benchmark).
    std::uint64_t clear_conntrack() const {
        constexpr std::uint32_t kBatch = 65536;
        std::vector<xlb_flow_key> keys(kBatch);
        std::vector<xlb_ct_value> values(kBatch);
        std::uint32_t batch_token = 0;
        bool first = true;
        std::uint64_t total = 0;
        while (true) {
            std::uint32_t count = kBatch;
            int rc = bpf_map_lookup_and_delete_batch(lb_.conntrack().fd(),
                                                     first ? nullptr : &batch_token, &batch_token,
                                                     keys.data(), values.data(), &count, nullptr);
            int err = errno;
            total += count;
            first = false;
            if (rc != 0) {
                if (err == ENOENT) break;
                throw Failure(fmt::format("empty the connection table: {}", std::strerror(err)));
            }
        }
        return total;
    }

private:
    static xlb_config config(xlb::datapath::CtBudget budget) {
        return xlb::datapath::make_config(test::bench_settings(), test::kNextHopMac, budget);
    }

    void configure() {
        must(lb_.config().put(0, config(kAmpleBudget)));
        budget_ = kAmpleBudget;

        // Backends from the benchmarking ranges: 198.18.0.0/15 (RFC 2544)
        // and 2001:db8:b::/64 (documentation).
        backend_addr_.resize(2 * kBackendsPerFamily);
        for (std::uint32_t i = 0; i < kBackendsPerFamily; ++i) {
            backend_addr_[i] = IpAddress::v4(198, 18, static_cast<std::uint8_t>(i / 250),
                                             static_cast<std::uint8_t>(1 + i % 250));
            backend_addr_[kFirstV6Backend + i] =
                test::ip(fmt::format("2001:db8:b::{:x}", 0x100 + i).c_str());
        }
        for (std::uint32_t id = 0; id < backend_addr_.size(); ++id)
            must(lb_.backends().put(id, xlb::datapath::backend_entry(backend_addr_[id], 1)));
        ring_v4_ = publish_maglev(kVipTcp4, 0);
        ring_v6_ = publish_maglev(kVipTcp6, kFirstV6Backend);
        std::vector<std::uint32_t> copy = ring_v4_;
        must(bpf::publish_ring(lb_.rings().fd(), kVipUdp4NoCt, copy));

        add_vip(test::kVipV4, test::kVipPort, test::kProtoTcp, kVipTcp4, 0);
        add_vip(test::kVipV6, test::kVipPort, test::kProtoTcp, kVipTcp6, 0);
        add_vip(test::kVipV4, kDnsPort, test::kProtoUdp, kVipUdp4NoCt, XLB_VIP_F_NO_CONNTRACK);
    }

    // The ring xlbd builds for kBackendsPerFamily equal-weight backends
    // (xlb::datapath::build_ring, M = 65537), as backend ids per slot.
    std::vector<std::uint32_t> publish_maglev(std::uint32_t vip_id, std::uint32_t first_id) {
        std::vector<xlb::datapath::RingMember> members;
        for (std::uint32_t i = 0; i < kBackendsPerFamily; ++i)
            members.push_back({first_id + i, backend_addr_[first_id + i], {}, 1});
        auto ring = xlb::datapath::build_ring(members);
        if (!ring) throw Failure(ring.error().message());
        must(bpf::publish_ring(lb_.rings().fd(), vip_id, ring->slots));
        return ring->slots;
    }

    void add_vip(const IpAddress& addr, std::uint16_t port, std::uint8_t proto,
                 std::uint32_t vip_id, std::uint32_t flags) {
        must(lb_.vips().put(xlb::datapath::vip_key(addr, port, proto),
                            xlb_vip_value{vip_id, flags}));
    }

    bpf::LbProgram lb_;
    std::optional<bpf::CtClockTicker> clock_;  // after lb_: stops first
    std::vector<IpAddress> backend_addr_;
    std::vector<std::uint32_t> ring_v4_, ring_v6_;
    xlb::datapath::CtBudget budget_;
};

// ---------------------------------------------------------------------------
// Cases.

enum class Path { kEstablished, kNewFlow, kNewFlowOverBudget, kNoConntrack, kNotVip };

struct Case {
    std::string name;
    std::string path;  // what it measures, for people
    Path kind;
    test::Flow flow;
    std::uint32_t vip_id = 0;
    std::uint32_t vip_flags = 0;
    std::uint32_t vary_offset = 0;
    std::optional<double> target_net_ns;
    Bytes frame;

    std::vector<double> ns, floor_ns, net_ns;
    // new_flow_v4: entries in the connection table when each sample began.
    std::vector<std::uint64_t> table_entries;
};

// Exactly kFrameLen bytes: TCP ACK (never a SYN) or UDP, the payload filling
// the rest, valid lengths and checksums.
Bytes bench_frame(const test::Flow& flow) {
    test::FrameOptions opt;
    opt.eth_src = test::kClientSideMac;
    opt.eth_dst = test::kLbMac;
    opt.tcp_flags = test::kTcpAck;
    opt.payload.clear();
    const std::size_t headers = test::make_frame(flow, opt).size();
    if (headers > kFrameLen) throw Failure("headers exceed the bench frame");
    opt.payload.assign(kFrameLen - headers, 'x');
    Bytes frame = test::make_frame(flow, opt);
    if (frame.size() != kFrameLen) throw Failure("bench frame has the wrong length");
    return frame;
}

std::vector<Case> make_cases() {
    using test::Flow;
    std::vector<Case> cases;
    cases.push_back({.name = "established_v4",
                     .path = "TCP ACK, conntrack hit, IPv4-in-IPv4",
                     .kind = Path::kEstablished,
                     .flow = Flow{test::kClientV4, test::kVipV4, 40000, test::kVipPort},
                     .vip_id = kVipTcp4,
                     .target_net_ns = 80});
    cases.push_back({.name = "established_v6",
                     .path = "TCP ACK, conntrack hit, IPv6-in-IPv6",
                     .kind = Path::kEstablished,
                     .flow = Flow{test::kClientV6, test::kVipV6, 40000, test::kVipPort},
                     .vip_id = kVipTcp6});
    cases.push_back({.name = "new_flow_v4",
                     .path = "TCP ACK, new source each run: miss, Maglev, insert",
                     .kind = Path::kNewFlow,
                     .flow = Flow{test::kClientV4, test::kVipV4, 40001, test::kVipPort},
                     .vip_id = kVipTcp4,
                     .vary_offset = kIpv4SrcOffset,
                     .target_net_ns = 450});
    cases.push_back({.name = "new_flow_over_budget_v4",
                     .path = "TCP ACK, new source each run, insert budget spent: miss, Maglev",
                     .kind = Path::kNewFlowOverBudget,
                     .flow = Flow{test::kClientV4, test::kVipV4, 40002, test::kVipPort},
                     .vip_id = kVipTcp4,
                     .vary_offset = kIpv4SrcOffset});
    cases.push_back({.name = "no_conntrack_v4",
                     .path = "UDP, VIP without conntrack: hash, Maglev",
                     .kind = Path::kNoConntrack,
                     .flow = Flow{test::kClientV4, test::kVipV4, 40000, kDnsPort, test::kProtoUdp},
                     .vip_id = kVipUdp4NoCt,
                     .vip_flags = XLB_VIP_F_NO_CONNTRACK,
                     .target_net_ns = 90});
    cases.push_back({.name = "not_vip",
                     .path = "TCP to the LB's own address: pass",
                     .kind = Path::kNotVip,
                     .flow = Flow{test::kClientV4, test::kEncapSrcV4, 40000, 22},
                     .target_net_ns = 25});
    for (Case& c : cases) c.frame = bench_frame(c.flow);
    return cases;
}

// The flow of the repetition that wrote `counter` at the case's vary offset.
xlb_flow_key key_of_run(const Case& c, std::uint32_t counter) {
    xlb_flow_key key = test::flow_key(c.flow);
    if (c.vary_offset == kIpv4SrcOffset) key.src[0] = htonl(counter);
    return key;
}

Bytes frame_of_run(const Case& c, std::uint32_t counter) {
    Bytes frame = c.frame;
    if (c.vary_offset != 0) {
        const std::uint32_t value = htonl(counter);
        std::memcpy(frame.data() + c.vary_offset, &value, 4);
    }
    return frame;
}

// ---------------------------------------------------------------------------
// One sample and the checks that it took the path it names.

struct Sample {
    bpf::TestRunResult result;
    Counters before, after;
    std::uint32_t counter_before = 0, counter_after = 0;
    std::uint32_t repeat = 0;
    std::uint64_t wall_ns = 0;  // the run, as the program's clock saw it
};

// Connection-table units between a run's last packet and the check of its
// entry's age: the ticker's interval (the program's clock lags the real one
// by up to that) and some slack.
constexpr std::uint32_t kRefreshMargin =
    static_cast<std::uint32_t>((XLB_CT_CLOCK_TICK_MS * 1'000'000ULL) >> XLB_CT_TIME_SHIFT) + 100;

class Checker {
public:
    Checker(const Sample& s, std::string what) : s_(s), what_(std::move(what)) {}

    void expect(bool ok, const std::string& message) {
        if (!ok) errors_.push_back(message);
    }
    template <typename A, typename B>
    void expect_eq(const A& actual, const B& expected, const std::string& what) {
        if (actual != expected)
            errors_.push_back(fmt::format("{}: {} (expected {})", what, actual, expected));
    }
    void finish() const {
        if (errors_.empty()) return;
        std::string text =
            fmt::format("{}: the measurement did not take the path it names:", what_);
        for (const std::string& e : errors_) text += "\n  - " + e;
        throw Failure(text);
    }

    // Only outcome `outcome` counted, once per repetition (or nothing at all).
    void expect_outcomes(std::optional<xlb_outcome> outcome) {
        for (std::uint32_t o = 0; o < XLB_OUT__MAX; ++o) {
            const std::uint64_t delta = s_.after.outcomes[o] - s_.before.outcomes[o];
            const std::uint64_t want =
                outcome && o == static_cast<std::uint32_t>(*outcome) ? s_.repeat : 0;
            expect_eq(delta, want, fmt::format("outcome counter {} grew by", o));
        }
    }

    // Per-VIP counters: `vip` counted every repetition as given, the others nothing.
    void expect_vip(std::optional<std::uint32_t> vip, std::uint64_t new_flows, std::uint64_t hits) {
        for (std::uint32_t v = 0; v < kVipCount; ++v) {
            const xlb_vip_stats& b = s_.before.vips[v];
            const xlb_vip_stats& a = s_.after.vips[v];
            const bool mine = vip && *vip == v;
            const std::string name = fmt::format("VIP {}", v);
            expect_eq(a.packets - b.packets, mine ? std::uint64_t{s_.repeat} : 0,
                      name + " packets grew by");
            expect_eq(a.bytes - b.bytes, mine ? std::uint64_t{s_.repeat} * kFrameLen : 0,
                      name + " bytes grew by");
            expect_eq(a.new_flows - b.new_flows, mine ? new_flows : 0, name + " new_flows grew by");
            expect_eq(a.conntrack_hits - b.conntrack_hits, mine ? hits : 0,
                      name + " conntrack_hits grew by");
            expect_eq(a.drops - b.drops, std::uint64_t{0}, name + " drops grew by");
        }
    }

    // xlb_ct_cpu: entries written and inserts skipped over budget.
    void expect_inserts(std::uint64_t inserts, std::uint64_t skipped) {
        expect_eq(s_.after.ct_inserts - s_.before.ct_inserts, inserts, "inserts grew by");
        expect_eq(s_.after.ct_skipped - s_.before.ct_skipped, skipped, "skipped inserts grew by");
    }

    void expect_action(std::uint32_t action) {
        expect_eq(s_.result.action, action, "XDP action of the last repetition");
    }

    // The last repetition's output: `input` encapsulated towards `backend`.
    void expect_encapsulated(const Bytes& input, const IpAddress& backend, bool checksums) {
        const Bytes& out = s_.result.frame;
        const std::size_t outer = backend.is_v4() ? 20 : 40;
        if (out.size() != input.size() + outer) {
            errors_.push_back(fmt::format("output frame is {} bytes, expected {}:\n{}", out.size(),
                                          input.size() + outer, test::describe(out)));
            return;
        }
        expect(std::equal(test::kNextHopMac.begin(), test::kNextHopMac.end(), out.begin()),
               "outer destination MAC is not the next hop");
        expect(std::equal(test::kLbMac.begin(), test::kLbMac.end(), out.begin() + 6),
               "outer source MAC is not the LB's");
        const std::uint16_t ethertype = static_cast<std::uint16_t>(out[12] << 8 | out[13]);
        expect_eq(ethertype, backend.is_v4() ? 0x0800 : 0x86dd, "outer ethertype");
        std::array<std::uint8_t, 16> dst{};
        if (backend.is_v4()) {
            expect_eq(out[14 + 9], test::kProtoIpip, "outer IPv4 protocol");
            std::copy_n(out.begin() + 14 + 16, 4, dst.begin());
        } else {
            expect_eq(out[14 + 6], input[12] == 0x08 ? test::kProtoIpip : test::kProtoIpv6,
                      "outer IPv6 next header");
            std::copy_n(out.begin() + 14 + 24, 16, dst.begin());
        }
        expect(dst == backend.bytes, fmt::format("outer destination is not backend {}:\n{}",
                                                 backend.to_string(), test::describe(out)));
        expect(std::equal(input.begin() + 14, input.end(), out.begin() + 14 + outer),
               "the inner IP packet is not the input's, byte for byte");
        if (checksums) {
            const std::string bad = test::checksum_errors(out);
            expect(bad.empty(), "checksums: " + bad);
        }
    }

    void expect_frame(const Bytes& expected) {
        expect(s_.result.frame == expected,
               fmt::format("output frame differs:\n{}\nexpected:\n{}",
                           test::describe(s_.result.frame), test::describe(expected)));
    }

private:
    const Sample& s_;
    std::string what_;
    std::vector<std::string> errors_;
};

// ---------------------------------------------------------------------------
// The run.

struct Options {
    std::string out = "build/bench/xdp.json";
    std::uint32_t samples = 11;
    std::uint32_t repeat = 1'000'000;
    int cpu = -1;
    std::uint32_t conntrack_entries = 1U << 24;
    std::vector<std::string> only;  // case names; empty = all
};

double median(std::vector<double> v) {
    if (v.empty()) return 0;
    std::sort(v.begin(), v.end());
    const std::size_t n = v.size();
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

class Bench {
public:
    Bench(const Options& opt, std::vector<Case> cases)
        : opt_(opt),
          balancer_(opt.conntrack_entries),
          harness_(must(Harness::load())),
          cases_(std::move(cases)) {}

    // Puts the established flows into the connection table (one packet each,
    // straight through the balancer) and checks where they went.
    void warm_established() {
        for (Case& c : cases_) {
            if (c.kind != Path::kEstablished) continue;
            const xlb_flow_key key = test::flow_key(c.flow);
            auto r = must(bpf::test_run_xdp(balancer_.lb().prog_fd(), c.frame));
            if (r.action != XDP_TX)
                throw Failure(c.name + ": the warm-up packet was not forwarded");
            auto entry = balancer_.conntrack_entry(key);
            if (!entry)
                throw Failure(c.name + ": the warm-up packet left no connection-table entry");
            if (entry->backend_id != balancer_.ring_choice(c.vip_id, key, c.vip_flags))
                throw Failure(c.name +
                              ": the warm-up packet went to a backend the ring did not pick");
            ct_inserted_ += 1;
        }
    }

    void run() {
        warm_established();
        // One unrecorded round at a tenth of the repeat count: faults in the
        // maps, wakes the CPU up, and checks every path before measuring.
        const std::uint32_t warm_repeat = std::max<std::uint32_t>(1, opt_.repeat / 10);
        for (Case& c : cases_) measure_pair(c, warm_repeat, false);
        for (std::uint32_t round = 0; round < opt_.samples; ++round) {
            for (std::size_t i = 0; i < cases_.size(); ++i)
                measure_pair(cases_[(round + i) % cases_.size()], opt_.repeat, true);
        }
    }

    const std::vector<Case>& cases() const { return cases_; }
    const std::vector<double>& floors() const { return floors_; }
    std::uint64_t conntrack_clears() const { return ct_clears_; }
    std::uint32_t ring_size() const { return balancer_.ring_size(); }

private:
    // Floor, case, floor; the case's net figure is relative to the mean of
    // the two floors around it.
    void measure_pair(Case& c, std::uint32_t repeat, bool record) {
        if (c.kind == Path::kNewFlow) make_room(repeat);
        const std::uint64_t entries = ct_inserted_;
        const double floor_before = measure(c, repeat, true);
        const double ns = measure(c, repeat, false);
        const double floor_after = measure(c, repeat, true);
        if (!record) return;
        const double floor = (floor_before + floor_after) / 2;
        c.ns.push_back(ns);
        c.floor_ns.push_back(floor);
        c.net_ns.push_back(ns - floor);
        if (c.kind == Path::kNewFlow) c.table_entries.push_back(entries);
        floors_.push_back(floor_before);
        floors_.push_back(floor_after);
    }

    // new_flow_v4 inserts `repeat` entries per sample and must find the table
    // not full: empty it when the next sample would not fit.
    void make_room(std::uint32_t repeat) {
        const std::uint64_t slack = kLruSlack + kLruSlackPerCpu * bpf::possible_cpu_count();
        if (ct_inserted_ + repeat + slack <= opt_.conntrack_entries) return;
        balancer_.clear_conntrack();
        ct_inserted_ = 0;
        ct_clears_ += 1;
        warm_established();
    }

    double measure(const Case& c, std::uint32_t repeat, bool floor) {
        if (!floor) {
            const bool spent = c.kind == Path::kNewFlowOverBudget;
            balancer_.use_budget(spent ? kSpentBudget : kAmpleBudget);
            if (spent) balancer_.empty_buckets();
        }
        must(harness_.set_target(floor ? harness_.floor_fd() : balancer_.lb().prog_fd()));
        harness_.set_template(c.frame, c.vary_offset);
        Sample s;
        s.repeat = repeat;
        s.before = balancer_.counters();
        s.counter_before = harness_.vary_counter();
        const std::uint64_t start_ns = coarse_ns();
        s.result = must(harness_.run(c.frame, repeat));
        s.wall_ns = coarse_ns() - start_ns;
        s.counter_after = harness_.vary_counter();
        s.after = balancer_.counters();
        if (floor)
            check_floor(c, s);
        else
            check_case(c, s);
        if (c.kind == Path::kNewFlow && !floor) ct_inserted_ += repeat;
        return s.result.duration_ns;
    }

    void check_floor(const Case& c, const Sample& s) {
        Checker check(s, "floor for " + c.name);
        check.expect_action(XDP_TX);
        check.expect_outcomes(std::nullopt);
        check.expect_vip(std::nullopt, 0, 0);
        check.expect_eq(s.counter_after - s.counter_before, c.vary_offset ? s.repeat : 0u,
                        "repetitions with a rewritten field");
        Bytes expected = frame_of_run(c, s.counter_after);
        std::swap_ranges(expected.begin(), expected.begin() + 6, expected.begin() + 6);
        check.expect_frame(expected);
        check.finish();
    }

    void check_case(const Case& c, const Sample& s) {
        Checker check(s, c.name);
        const std::uint64_t n = s.repeat;
        check.expect_eq(s.counter_after - s.counter_before, c.vary_offset ? s.repeat : 0u,
                        "repetitions with a rewritten field");
        const xlb_flow_key last_key = key_of_run(c, s.counter_after);
        const Bytes last_frame = frame_of_run(c, s.counter_after);
        const std::uint32_t ring_backend = balancer_.ring_choice(c.vip_id, last_key, c.vip_flags);
        switch (c.kind) {
            case Path::kEstablished: {
                check.expect_action(XDP_TX);
                check.expect_outcomes(XLB_OUT_TX);
                check.expect_vip(c.vip_id, 0, n);
                check.expect_inserts(0, 0);
                auto entry = balancer_.conntrack_entry(last_key);
                check.expect(entry.has_value(), "the flow's connection-table entry is gone");
                if (entry) {
                    check.expect_eq(entry->backend_id, ring_backend, "connection-table backend");
                    check.expect_encapsulated(last_frame,
                                              balancer_.backend_address(entry->backend_id), true);
                    // The hits keep the entry's age fresh: last_seen is at most
                    // one refresh interval old (plus the time since the run).
                    const std::uint32_t idle = ct_now() - entry->last_seen;
                    check.expect(idle <= XLB_CT_REFRESH_UNITS + kRefreshMargin,
                                 fmt::format("last_seen is {} units old after the run", idle));
                }
                break;
            }
            case Path::kNewFlow: {
                check.expect_action(XDP_TX);
                check.expect_outcomes(XLB_OUT_TX);
                check.expect_vip(c.vip_id, n, 0);
                check.expect_inserts(n, 0);
                check.expect_encapsulated(last_frame, balancer_.backend_address(ring_backend),
                                          false);
                // Every run inserted its flow; none was evicted (the table is
                // not full): the first and the last flow of the sample are there.
                for (std::uint32_t counter : {s.counter_before + 1, s.counter_after}) {
                    const xlb_flow_key key = key_of_run(c, counter);
                    auto entry = balancer_.conntrack_entry(key);
                    check.expect(entry.has_value(),
                                 fmt::format("flow #{} has no connection-table entry", counter));
                    if (entry)
                        check.expect_eq(entry->backend_id,
                                        balancer_.ring_choice(c.vip_id, key, c.vip_flags),
                                        fmt::format("flow #{}'s backend", counter));
                }
                break;
            }
            case Path::kNewFlowOverBudget: {
                check.expect_action(XDP_TX);
                check.expect_outcomes(XLB_OUT_TX);
                check.expect_vip(c.vip_id, n, 0);
                check.expect_encapsulated(last_frame, balancer_.backend_address(ring_backend),
                                          false);
                // The bucket gains one entry per second of the run: all but
                // those were skipped, the first flow certainly.
                const std::uint64_t inserts = s.after.ct_inserts - s.before.ct_inserts;
                const std::uint64_t skipped = s.after.ct_skipped - s.before.ct_skipped;
                const std::uint64_t seconds = s.wall_ns / 1'000'000'000ULL + 1;
                check.expect_eq(inserts + skipped, n, "inserts + skipped inserts");
                check.expect(inserts <= seconds * kSpentBudget.rate,
                             fmt::format("{} inserts in {} s", inserts, seconds));
                check.expect(!balancer_.conntrack_entry(key_of_run(c, s.counter_before + 1)),
                             "the sample's first flow was recorded over budget");
                break;
            }
            case Path::kNoConntrack: {
                check.expect_action(XDP_TX);
                check.expect_outcomes(XLB_OUT_TX);
                check.expect_vip(c.vip_id, n, 0);
                check.expect_inserts(0, 0);
                check.expect_encapsulated(last_frame, balancer_.backend_address(ring_backend),
                                          true);
                check.expect(!balancer_.conntrack_entry(last_key).has_value(),
                             "a VIP without conntrack left a connection-table entry");
                break;
            }
            case Path::kNotVip:
                check.expect_action(XDP_PASS);
                check.expect_outcomes(XLB_OUT_PASS_NOT_VIP);
                check.expect_vip(std::nullopt, 0, 0);
                check.expect_inserts(0, 0);
                check.expect_frame(c.frame);
                break;
        }
        check.finish();
    }

    Options opt_;
    Balancer balancer_;
    Harness harness_;
    std::vector<Case> cases_;
    std::vector<double> floors_;
    std::uint64_t ct_inserted_ = 0;
    std::uint64_t ct_clears_ = 0;
};

// ---------------------------------------------------------------------------
// Environment and reporting.

std::string ns_text(double ns) { return fmt::format("{:.1f}", ns); }

double min_of(const std::vector<double>& v) { return *std::min_element(v.begin(), v.end()); }
double max_of(const std::vector<double>& v) { return *std::max_element(v.begin(), v.end()); }

void print_table(const Options& opt, const Bench& bench, int cpu) {
    const auto& floors = bench.floors();
    fmt::print("\nxlb-bench-xdp: {} samples x {} repetitions per case, pinned to CPU {}\n",
               opt.samples, opt.repeat, cpu);
    fmt::print("kernel {}, {}\n", kernel_release(), cpu_model());
    fmt::print("Maglev M = {}, {} backends per family; connection table {} entries\n",
               bench.ring_size(), kBackendsPerFamily, opt.conntrack_entries);
    fmt::print(
        "floor (wrapper + xlb_bench_floor): median {} ns, min {}, max {} over {} samples\n\n",
        ns_text(median(floors)), ns_text(min_of(floors)), ns_text(max_of(floors)), floors.size());

    constexpr auto kRow = "{:<24} {:>7} {:>7} {:>7} {:>7} {:>8} {:>8} {:>8}  {}\n";
    const std::string header = fmt::format(kRow, "case", "min", "median", "max", "floor", "net med",
                                           "net min", "target", "result");
    fmt::print("{}{}\n", header, std::string(header.size() - 1, '-'));
    for (const Case& c : bench.cases()) {
        const double net = median(c.net_ns);
        std::string target = c.target_net_ns ? fmt::format("<= {:.0f}", *c.target_net_ns) : "-";
        std::string result = !c.target_net_ns ? "-" : net <= *c.target_net_ns ? "met" : "MISSED";
        fmt::print(kRow, c.name, ns_text(min_of(c.ns)), ns_text(median(c.ns)),
                   ns_text(max_of(c.ns)), ns_text(median(c.floor_ns)), ns_text(net),
                   ns_text(min_of(c.net_ns)), target, result);
    }
    fmt::print("\n");
    for (const Case& c : bench.cases()) fmt::print("  {:<24} {}\n", c.name, c.path);
    fmt::print(
        "\nns per packet: the kernel's mean over each sample's repetitions. min/median/max:\n"
        "the case (wrapper + xlb_lb); floor: median of the floor samples taken around it;\n"
        "net: case - mean of the two floors around each sample (target and result use the\n"
        "median). Every sample was checked to take its path: XDP action, output frame,\n"
        "outcome counters, per-VIP new_flows / conntrack_hits.\n");
    if (bench.conntrack_clears() > 0)
        fmt::print("The connection table was emptied {} times to stay below full.\n",
                   bench.conntrack_clears());
    // The host runs in phases (measured.md): everything slower for seconds.
    if (max_of(floors) > 1.25 * min_of(floors))
        fmt::print(
            "Note: the floor varied from {} to {} ns: the host changed speed during the run\n"
            "(other load, phases). Medians may mix phases; net min shows the fast phase.\n",
            ns_text(min_of(floors)), ns_text(max_of(floors)));
}

void write_json(const Options& opt, const Bench& bench, int cpu) {
    using json = nlohmann::ordered_json;
    json cases = json::array();
    for (const Case& c : bench.cases()) {
        const double net = median(c.net_ns);
        json entry = {
            {"name", c.name},
            {"ns_min", min_of(c.ns)},
            {"ns_median", median(c.ns)},
            {"ns_max", max_of(c.ns)},
            {"net_ns_median", net},
            {"net_ns_min", min_of(c.net_ns)},
            {"net_ns_max", max_of(c.net_ns)},
            {"floor_ns_median", median(c.floor_ns)},
            {"path", c.path},
            {"samples_ns", c.ns},
            {"samples_floor_ns", c.floor_ns},
        };
        if (c.kind == Path::kNewFlow) entry["samples_table_entries"] = c.table_entries;
        if (c.target_net_ns) {
            entry["target_net_ns"] = *c.target_net_ns;
            entry["target_met"] = net <= *c.target_net_ns;
        } else {
            entry["target_net_ns"] = nullptr;
            entry["target_met"] = nullptr;
        }
        cases.push_back(std::move(entry));
    }
    json doc = {
        {"floor_ns", median(bench.floors())},
        {"cases", std::move(cases)},
        {"floor_ns_min", min_of(bench.floors())},
        {"floor_ns_max", max_of(bench.floors())},
        {"samples", opt.samples},
        {"repeat", opt.repeat},
        {"cpu", cpu},
        {"kernel", kernel_release()},
        {"cpu_model", cpu_model()},
        {"ring_size", bench.ring_size()},
        {"backends_per_family", kBackendsPerFamily},
        {"conntrack_entries", opt.conntrack_entries},
    };

    const std::filesystem::path path(opt.out);
    if (path.has_parent_path()) std::filesystem::create_directories(path.parent_path());
    const std::filesystem::path tmp = path.string() + ".tmp";
    {
        std::ofstream out(tmp);
        out << doc.dump(2) << '\n';
        if (!out) throw Failure("write " + tmp.string());
    }
    std::filesystem::rename(tmp, path);
    fmt::print("JSON: {}\n", path.string());
}

int run(int argc, char** argv) {
    Options opt;
    std::vector<Case> cases = make_cases();
    std::vector<std::string> names;
    for (const Case& c : cases) names.push_back(c.name);

    CLI::App app{"xlb-bench-xdp: ns per packet of the XDP balancer's paths (BPF_PROG_TEST_RUN)"};
    app.add_option("--out", opt.out, "where to write the JSON results")->capture_default_str();
    app.add_option("--samples", opt.samples, "samples per case (11 or more for reported figures)")
        ->check(CLI::Range(1u, 1000u))
        ->capture_default_str();
    app.add_option("--repeat", opt.repeat,
                   "repetitions per sample (1000000 or more for reported figures)")
        ->check(CLI::Range(1u, 100'000'000u))
        ->capture_default_str();
    app.add_option("--cpu", opt.cpu, "CPU to pin to (default: the highest allowed)");
    app.add_option("--conntrack-entries", opt.conntrack_entries,
                   "connection-table size; emptied whenever new_flow_v4 would fill it")
        ->check(CLI::Range(1u << 16, 1u << 27))
        ->capture_default_str();
    app.add_option("--case", opt.only, "run only this case (repeatable), e.g. to profile it")
        ->check(CLI::IsMember(names));
    CLI11_PARSE(app, argc, argv);

    if (opt.samples < 11 || opt.repeat < 1'000'000)
        fmt::print(stderr,
                   "note: fewer than 11 samples or 1000000 repetitions: figures are "
                   "indicative only\n");
    const std::uint64_t slack = kLruSlack + kLruSlackPerCpu * bpf::possible_cpu_count();
    if (std::uint64_t{opt.repeat} + slack + 16 > opt.conntrack_entries)
        throw Failure(
            fmt::format("--conntrack-entries {} cannot hold one sample of {} new flows "
                        "(plus {} spare)",
                        opt.conntrack_entries, opt.repeat, slack));
    if (!opt.only.empty())
        std::erase_if(cases, [&](const Case& c) {
            return std::find(opt.only.begin(), opt.only.end(), c.name) == opt.only.end();
        });

    const int cpu = pin_to_cpu(opt.cpu);
    // Best effort: fewer preemptions by other work on this CPU.
    (void)setpriority(PRIO_PROCESS, 0, -10);

    Bench bench(opt, std::move(cases));
    bench.run();
    print_table(opt, bench, cpu);
    write_json(opt, bench, cpu);
    return 0;
}

}  // namespace

int main(int argc, char** argv) {
    try {
        return run(argc, argv);
    } catch (const std::exception& e) {
        fmt::print(stderr, "xlb-bench-xdp: {}\n", e.what());
        return 1;
    }
}
