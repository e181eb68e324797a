// SPDX-License-Identifier: Apache-2.0
//
// xlb-demo: the balancer doing its main job, for a newcomer, in a few seconds.
//
// It loads the real XDP program (bpf/xlb_lb.bpf.c) and drives it with
// BPF_PROG_TEST_RUN: no interface is touched and no packet leaves the host.
// Every number it prints is measured in this run, from the frames the program
// returned and from its own counters; each step also checks what it shows and
// the demo exits non-zero, saying what went wrong, when a check fails.
//
//   1. load the program, configure it, add a VIP and three backends (1:1:2),
//      build the VIP's Maglev ring and publish it;
//   2. send new TCP flows and count where the program sent them;
//   3. show one input frame and its encapsulated output, field by field;
//   4. connection tracking: established flows stay put when a backend is
//      removed, and the removed backend's flows move to live ones;
//   5. the outcome counters, and packets that are not for a VIP passing;
//   6. the backend-side decapsulator restoring the client's packet.

#include <arpa/inet.h>
#include <fmt/format.h>
#include <linux/bpf.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <array>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include "testbed.h"
#include "xlb/abi.h"
#include "xlb/bpf/programs.h"
#include "xlb/bpf/ring.h"
#include "xlb/bpf/test_run.h"
#include "xlb/datapath/setup.h"
#include "xlb/flow_hash.h"
#include "xlb/net/address.h"

namespace {

using namespace xlb;
using test::Bytes;
using test::Flow;
using test::FrameOptions;

// ---------------------------------------------------------------------------
// Output helpers

struct Style {
    bool color = false;

    std::string paint(std::string_view code, std::string_view text) const {
        if (!color) return std::string(text);
        return fmt::format("\033[{}m{}\033[0m", code, text);
    }
    std::string heading(std::string_view t) const { return paint("1;36", t); }
    std::string bold(std::string_view t) const { return paint("1", t); }
    std::string good(std::string_view t) const { return paint("32", t); }
    std::string bad(std::string_view t) const { return paint("1;31", t); }
    std::string dim(std::string_view t) const { return paint("2", t); }
};

enum class Align { kLeft, kRight };

struct Column {
    std::string title;
    Align align = Align::kRight;
};

using Row = std::vector<std::string>;

// Prints an aligned table, indented. Colour is applied to whole lines only so
// that escape codes never disturb the column widths.
void print_table(const Style& style, const std::vector<Column>& columns,
                 const std::vector<Row>& rows, const std::vector<bool>& dim_rows = {}) {
    std::vector<std::size_t> width(columns.size());
    for (std::size_t c = 0; c < columns.size(); ++c) width[c] = columns[c].title.size();
    for (const Row& row : rows)
        for (std::size_t c = 0; c < columns.size() && c < row.size(); ++c)
            width[c] = std::max(width[c], row[c].size());

    auto render = [&](const Row& row) {
        std::string line = "    ";
        for (std::size_t c = 0; c < columns.size(); ++c) {
            const std::string& cell = c < row.size() ? row[c] : std::string{};
            if (c > 0) line += "  ";
            if (columns[c].align == Align::kLeft)
                line += fmt::format("{:<{}}", cell, c + 1 == columns.size() ? 0 : width[c]);
            else
                line += fmt::format("{:>{}}", cell, width[c]);
        }
        while (!line.empty() && line.back() == ' ') line.pop_back();
        return line;
    };

    Row titles;
    Row rules;
    for (std::size_t c = 0; c < columns.size(); ++c) {
        titles.push_back(columns[c].title);
        rules.push_back(std::string(width[c], '-'));
    }
    fmt::print("{}\n{}\n", style.bold(render(titles)), style.dim(render(rules)));
    for (std::size_t r = 0; r < rows.size(); ++r) {
        const bool dim = r < dim_rows.size() && dim_rows[r];
        fmt::print("{}\n", dim ? style.dim(render(rows[r])) : render(rows[r]));
    }
}

std::string percent(double part, double whole) {
    if (whole <= 0) return "-";
    return fmt::format("{:.1f}%", 100.0 * part / whole);
}

// Indents every line of a multi-line text.
std::string indent(const std::string& text, std::string_view prefix) {
    std::string out;
    std::size_t start = 0;
    while (start < text.size()) {
        std::size_t end = text.find('\n', start);
        if (end == std::string::npos) end = text.size();
        out += prefix;
        out.append(text, start, end - start);
        out += '\n';
        start = end + 1;
    }
    return out;
}

// ---------------------------------------------------------------------------
// Failure handling: every check throws a Failure that names what went wrong.

struct Failure : std::runtime_error {
    using std::runtime_error::runtime_error;
};

void check(bool ok, const std::string& what) {
    if (!ok) throw Failure(what);
}

template <typename T>
T must(xlb::Result<T> result, std::string_view doing) {
    if (!result) {
        const bpf::Error& e = result.error();
        std::string msg = fmt::format("{}: {}", doing, e.message());
        if (e.code == EPERM || e.code == EACCES)
            msg +=
                "\n  loading BPF programs needs root (or CAP_BPF, CAP_PERFMON and "
                "CAP_NET_ADMIN); run: sudo ./scripts/demo.sh";
        throw Failure(msg);
    }
    if constexpr (!std::is_void_v<T>) return std::move(*result);
}

// ---------------------------------------------------------------------------
// Names for the ABI's codes.

struct OutcomeName {
    xlb_outcome code;
    const char* name;
    const char* meaning;
};

constexpr OutcomeName kOutcomes[] = {
    {XLB_OUT_TX, "TX", "encapsulated to a backend"},
    {XLB_OUT_TX_ICMP_ERROR, "TX_ICMP_ERROR", "ICMP error quoting a VIP flow, to its backend"},
    {XLB_OUT_TX_ICMP_TOO_BIG, "TX_ICMP_TOO_BIG", "answered \"too big\" to the client"},
    {XLB_OUT_PASS_NO_CONFIG, "PASS_NO_CONFIG", "not configured yet"},
    {XLB_OUT_PASS_NOT_IP, "PASS_NOT_IP", "not IPv4/IPv6 (ARP, ...)"},
    {XLB_OUT_PASS_NOT_VIP, "PASS_NOT_VIP", "no VIP matches"},
    {XLB_OUT_PASS_FRAGMENT, "PASS_FRAGMENT", "IP fragment"},
    {XLB_OUT_PASS_IPV6_EXT_LIMIT, "PASS_IPV6_EXT_LIMIT", "too many IPv6 extension headers"},
    {XLB_OUT_DROP_MALFORMED_ETH, "DROP_MALFORMED_ETH", "truncated Ethernet header"},
    {XLB_OUT_DROP_MALFORMED_IPV4, "DROP_MALFORMED_IPV4", "bad IPv4 header"},
    {XLB_OUT_DROP_MALFORMED_IPV6, "DROP_MALFORMED_IPV6", "bad IPv6 header"},
    {XLB_OUT_DROP_MALFORMED_L4, "DROP_MALFORMED_L4", "bad TCP/UDP/ICMP header"},
    {XLB_OUT_DROP_NO_TABLE, "DROP_NO_TABLE", "VIP has no published ring"},
    {XLB_OUT_DROP_NO_BACKEND, "DROP_NO_BACKEND", "VIP's ring is empty"},
    {XLB_OUT_DROP_TOO_BIG, "DROP_TOO_BIG", "too big once encapsulated"},
    {XLB_OUT_DROP_FAMILY, "DROP_FAMILY", "IPv6 VIP with an IPv4 backend"},
    {XLB_OUT_DROP_BAD_BACKEND, "DROP_BAD_BACKEND", "ring names an unused backend id"},
    {XLB_OUT_DROP_HEADROOM, "DROP_HEADROOM", "no headroom for the outer header"},
    {XLB_OUT_DROP_IPV4_CSUM, "DROP_IPV4_CSUM", "IPv4 header checksum wrong"},
    {XLB_OUT_DROP_ICMP_QUOTE, "DROP_ICMP_QUOTE", "\"too big\" error quoting no IP packet"},
    {XLB_OUT_DROP_SOURCE_DENIED, "DROP_SOURCE_DENIED", "source refused by the VIP's lists"},
    {XLB_OUT_TX_SYN_COOKIE, "TX_SYN_COOKIE", "SYN answered with a SYN cookie"},
    {XLB_OUT_DROP_COOKIE_INVALID, "DROP_COOKIE_INVALID", "ACK without entry, cookie wrong"},
    {XLB_OUT_TX_QUIC_CID, "TX_QUIC_CID", "QUIC packet sent to the server its CID names"},
};
static_assert(std::size(kOutcomes) == XLB_OUT__MAX,
              "a new xlb_outcome needs a name in xlb-demo's table");

const char* xdp_action_name(std::uint32_t action) {
    switch (action) {
        case XDP_ABORTED: return "XDP_ABORTED";
        case XDP_DROP: return "XDP_DROP";
        case XDP_PASS: return "XDP_PASS";
        case XDP_TX: return "XDP_TX";
        case XDP_REDIRECT: return "XDP_REDIRECT";
        default: return "unknown action";
    }
}

// ---------------------------------------------------------------------------
// The demo.

struct Options {
    std::uint32_t flows = 3000;
    std::uint32_t established = 300;
    bool color = false;
};

struct DemoBackend {
    std::uint32_t id;
    net::IpAddress address;
    std::uint32_t weight;
    std::uint32_t generation = 1;
    bool in_ring = true;
};

constexpr std::uint32_t kVipId = 1;
constexpr std::uint16_t kVipPort = test::kVipPort;
// Clients: 240 addresses of 192.0.2.0/24 (RFC 5737), ephemeral source ports.
constexpr std::uint32_t kClientFirst = 10;
constexpr std::uint32_t kClientCount = 240;
constexpr std::uint32_t kPortFirst = 32768;
constexpr std::uint32_t kPortCount = 28232;  // 32768..60999, Linux's default range
constexpr std::uint32_t kPortStride = 7919;  // prime, coprime with kPortCount

class Demo {
public:
    Demo(Options options, Style style) : opt_(options), s_(style) {}

    void run() {
        const auto start = std::chrono::steady_clock::now();
        fmt::print("{}\n", s_.bold("xlb demo: the XDP load balancer at work"));
        fmt::print("{}\n",
                   s_.dim("The real XDP program (bpf/xlb_lb.bpf.c) runs in the kernel on frames "
                          "handed to it\nwith BPF_PROG_TEST_RUN: no interface is touched, no "
                          "packet leaves this host.\nEvery number below is measured in this run."));
        step_load();
        step_balance();
        step_frame();
        step_conntrack();
        step_counters();
        step_decap();
        const double seconds =
            std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
        fmt::print("\n{} {} packets through the balancer, every check passed, in {:.2f} s.\n",
                   s_.good("Done:"), packets_sent_, seconds);
    }

private:
    // ----- helpers -----

    void heading(int number, std::string_view title, std::string_view what) {
        step_ = number;
        fmt::print("\n{}\n", s_.heading(fmt::format("{}. {}", number, title)));
        fmt::print("{}", indent(std::string(what), "   "));
    }

    void ok(const std::string& text) { fmt::print("   {} {}\n", s_.good("ok"), text); }

    bpf::LbProgram& lb() { return *lb_; }

    DemoBackend& backend(std::uint32_t id) {
        for (DemoBackend& b : backends_)
            if (b.id == id) return b;
        throw Failure(fmt::format("no backend with id {}", id));
    }

    // A new, never used flow from one of the client addresses.
    Flow next_flow() {
        const std::uint32_t n = flow_counter_++;
        check(n < kPortCount, "ran out of distinct client flows");
        Flow flow;
        flow.src = net::IpAddress::v4(192, 0, 2,
                                      static_cast<std::uint8_t>(kClientFirst + n % kClientCount));
        flow.dst = test::kVipV4;
        flow.sport = static_cast<std::uint16_t>(kPortFirst + (n * kPortStride) % kPortCount);
        flow.dport = kVipPort;
        flow.proto = test::kProtoTcp;
        return flow;
    }

    bpf::TestRunResult send(const Bytes& frame) {
        ++packets_sent_;
        return must(bpf::test_run_xdp(lb().prog_fd(), frame), "run the balancer on a frame");
    }

    // Checks that the balancer encapsulated `input` and returns the backend id
    // the output frame is addressed to (its outer IPv4 destination).
    std::uint32_t backend_of(const bpf::TestRunResult& out, const Bytes& input) {
        check(out.action == XDP_TX,
              fmt::format("expected XDP_TX for a VIP packet, the program returned {}\n{}",
                          xdp_action_name(out.action), test::describe(input)));
        const Bytes& f = out.frame;
        check(f.size() >= 14 + 20 && f[12] == 0x08 && f[13] == 0x00 && (f[14] >> 4) == 4 &&
                  f[14 + 9] == test::kProtoIpip,
              "the output frame is not IPv4-in-IPv4:\n" + test::describe(f));
        const net::IpAddress dst = net::IpAddress::v4(f[30], f[31], f[32], f[33]);
        for (const DemoBackend& b : backends_)
            if (b.address == dst) return b.id;
        throw Failure(fmt::format("output addressed to {}, which is no backend", dst.to_string()));
    }

    // The backend the live ring gives a new flow, computed in userspace with
    // the same flow hash (include/xlb/flow_hash.h) and the same ring.
    std::uint32_t predicted_backend(const std::vector<std::uint32_t>& ring,
                                    const Flow& flow) const {
        return ring.at(
            datapath::ring_index(test::flow_key(flow), 0, config_.hash_seed, ring.size()));
    }

    // Builds the VIP's ring from the backends that are in it, as xlbd builds
    // it for them (datapath::build_ring), publishes it and reads it back.
    void build_and_publish() {
        std::vector<datapath::RingMember> members;
        for (const DemoBackend& b : backends_)
            if (b.in_ring) members.push_back({b.id, b.address, {}, b.weight});
        const auto t0 = std::chrono::steady_clock::now();
        auto ring = datapath::build_ring(members);
        build_ms_ = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0)
                        .count();
        if (!ring) throw Failure(ring.error().message());
        ring_ = ring->slots;
        slots_.assign(backends_.size(), 0);
        for (std::size_t i = 0; i < members.size(); ++i)
            for (std::size_t b = 0; b < backends_.size(); ++b)
                if (backends_[b].id == members[i].backend_id) slots_[b] = ring->slots_per_member[i];
        checksum_ = ring->checksum;

        must(bpf::publish_ring(lb().rings().fd(), kVipId, ring_), "publish the VIP's ring");
        auto live = must(bpf::read_ring(lb().rings().fd(), kVipId), "read the VIP's ring back");
        check(live == ring_, "the ring read back from the kernel differs from the one published");
    }

    std::uint32_t slots_of(std::uint32_t id) const {
        for (std::size_t b = 0; b < backends_.size(); ++b)
            if (backends_[b].id == id) return slots_[b];
        return 0;
    }

    std::uint64_t outcome_count(std::uint32_t code) {
        auto per_cpu = must(lb().outcomes().get_per_cpu(code), "read the outcome counters");
        return datapath::sum_per_cpu(per_cpu);
    }

    xlb_vip_stats vip_stats() {
        auto per_cpu = must(lb().vip_stats().get_per_cpu(kVipId), "read the VIP's counters");
        return datapath::sum_per_cpu(per_cpu);
    }

    // Sends `count` new TCP connections (SYN) and prints where they went.
    void send_new_flows(std::uint32_t count, bool keep_sample) {
        std::vector<std::uint64_t> flows(backends_.size(), 0);
        std::uint32_t agree = 0, intact = 0;
        const auto t0 = std::chrono::steady_clock::now();
        for (std::uint32_t i = 0; i < count; ++i) {
            const Flow flow = next_flow();
            FrameOptions syn;
            syn.tcp_flags = test::kTcpSyn;
            syn.payload.clear();
            const Bytes frame = test::make_frame(flow, syn);
            const bpf::TestRunResult out = send(frame);
            const std::uint32_t id = backend_of(out, frame);
            for (std::size_t b = 0; b < backends_.size(); ++b)
                if (backends_[b].id == id) ++flows[b];
            if (id == predicted_backend(ring_, flow)) ++agree;
            const Bytes inner(out.frame.begin() + 14 + 20, out.frame.end());
            if (inner == test::ip_packet_of(frame) && test::checksum_errors(out.frame).empty())
                ++intact;
            if (keep_sample && i == 0) {
                sample_in_ = frame;
                sample_out_ = out.frame;
                sample_backend_ = id;
            }
        }
        const double wall_ms =
            std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0)
                .count();

        std::uint32_t weight_sum = 0;
        std::uint32_t ring_total = 0;
        for (std::size_t b = 0; b < backends_.size(); ++b) {
            if (backends_[b].in_ring) weight_sum += backends_[b].weight;
            ring_total += slots_[b];
        }
        std::vector<Row> rows;
        std::vector<bool> dim;
        for (std::size_t b = 0; b < backends_.size(); ++b) {
            const DemoBackend& be = backends_[b];
            rows.push_back({fmt::format("{}", be.id), be.address.to_string(),
                            be.in_ring ? fmt::format("{}", be.weight) : "removed",
                            fmt::format("{}", flows[b]), percent(double(flows[b]), count),
                            be.in_ring ? percent(be.weight, weight_sum) : "0.0%",
                            fmt::format("{}", slots_[b]), percent(slots_[b], ring_total)});
            dim.push_back(!be.in_ring);
        }
        print_table(s_,
                    {{"backend"},
                     {"address", Align::kLeft},
                     {"weight"},
                     {"flows"},
                     {"share"},
                     {"target share"},
                     {"ring slots"},
                     {"ring share"}},
                    rows, dim);

        for (std::size_t b = 0; b < backends_.size(); ++b)
            check(
                backends_[b].in_ring || flows[b] == 0,
                fmt::format("{} new flows went to removed backend {}", flows[b], backends_[b].id));
        check(agree == count,
              fmt::format("only {} of {} flows went where the flow hash and the ring say", agree,
                          count));
        check(intact == count,
              fmt::format("only {} of {} outputs carry the client's packet unchanged with valid "
                          "checksums",
                          intact, count));
        ok(
            fmt::format("{}/{} flows went exactly where userspace computes (same flow hash, "
                        "same ring)",
                        agree, count));
        ok(fmt::format("{}/{} outputs carry the client's packet unchanged, all checksums valid",
                       intact, count));
        fmt::print("   {}\n", s_.dim(fmt::format("{} test runs (one system call each) took {:.0f} "
                                                 "ms wall-clock; per-packet cost: `make bench`",
                                                 count, wall_ms)));
    }

    // ----- the steps -----

    void step_load() {
        heading(1, "Load the balancer and configure one VIP",
                "The agent's first job: load the XDP program, write its configuration, add a\n"
                "VIP and its backends, build the VIP's Maglev ring and publish it atomically.\n");

        lb_.emplace(must(bpf::LbProgram::load(), "load the balancer (bpf/xlb_lb.bpf.c)"));
        const bpf::LbMapSizes& sizes = lb().sizes();
        ok(fmt::format(
            "program loaded, prog fd {}; maps sized for {} VIPs, {} backends, {} "
            "connections",
            lb().prog_fd(), sizes.max_vips, sizes.max_backends, sizes.conntrack_entries));

        config_ = test::bench_config();
        must(lb().config().put(0, config_), "write the configuration");
        check(outcome_count(XLB_OUT_PASS_NO_CONFIG) == 0, "fresh program already counted packets");
        ok(fmt::format("config: hash seed 0x{:08x}, outer source {}, next hop {}, MTU {}",
                       config_.hash_seed, test::kEncapSrcV4.to_string(),
                       net::mac_to_string(test::kNextHopMac), config_.mtu));

        must(lb().put_vip(datapath::vip_key(test::kVipV4, kVipPort, test::kProtoTcp),
                          xlb_vip_value{kVipId, 0}),
             "add the VIP");
        ok(fmt::format("VIP {}:{}/tcp added as VIP id {} (connection tracking on, 5-tuple hash)",
                       test::kVipV4.to_string(), kVipPort, kVipId));

        const std::uint32_t weights[] = {1, 1, 2};
        for (std::uint32_t i = 0; i < 3; ++i)
            backends_.push_back({i + 1, test::kBackendV4[i], weights[i]});
        for (const DemoBackend& b : backends_) write_backend(b);

        build_and_publish();
        std::vector<Row> rows;
        std::uint32_t weight_sum = 0;
        for (const DemoBackend& b : backends_) weight_sum += b.weight;
        for (std::size_t b = 0; b < backends_.size(); ++b) {
            const DemoBackend& be = backends_[b];
            rows.push_back({fmt::format("{}", be.id), be.address.to_string(),
                            datapath::maglev_identity(be.address, ""), fmt::format("{}", be.weight),
                            fmt::format("{}", be.generation), fmt::format("{}", slots_[b]),
                            percent(slots_[b], double(ring_.size())),
                            percent(be.weight, weight_sum)});
        }
        print_table(s_,
                    {{"backend"},
                     {"address", Align::kLeft},
                     {"maglev key", Align::kLeft},
                     {"weight"},
                     {"generation"},
                     {"ring slots"},
                     {"ring share"},
                     {"weight share"}},
                    rows);
        ok(
            fmt::format("Maglev ring: {} slots, built in {:.1f} ms, checksum {:016x}; published, "
                        "read back identical",
                        ring_.size(), build_ms_, checksum_));
    }

    void write_backend(const DemoBackend& b) {
        must(lb().backends().put(b.id, datapath::backend_entry(b.address, b.generation)),
             fmt::format("write backend {}", b.id));
    }

    void step_balance() {
        heading(2, fmt::format("Balance {} new connections", opt_.flows),
                fmt::format("Each is a TCP SYN from one of {} clients (192.0.2.{}-{}) and an "
                            "ephemeral port to\n{}:{}. The backend is read from each output "
                            "frame's outer IPv4 destination.\n",
                            kClientCount, kClientFirst, kClientFirst + kClientCount - 1,
                            test::kVipV4.to_string(), kVipPort));
        send_new_flows(opt_.flows, true);
    }

    void step_frame() {
        heading(3, "One packet, before and after",
                "The first SYN of step 2 as the client sent it, and as the balancer sent it on:\n"
                "wrapped in an outer IPv4 header (protocol 4, IP-in-IP) addressed to the backend,\n"
                "Ethernet rewritten towards the next hop.\n");
        fmt::print("   {}\n", s_.bold("in  (client -> VIP):"));
        fmt::print("{}", indent(test::describe(sample_in_), "     "));
        fmt::print("   {}\n",
                   s_.bold(fmt::format("out (XDP_TX, to backend {}):", sample_backend_)));
        fmt::print("{}", indent(test::describe(sample_out_), "     "));
        const Bytes inner(sample_out_.begin() + 14 + 20, sample_out_.end());
        check(inner == test::ip_packet_of(sample_in_), "the sample's inner packet changed");
        ok(
            fmt::format("{} -> {} bytes: +20 for the outer IPv4 header; the {}-byte client packet "
                        "inside is byte-identical",
                        sample_in_.size(), sample_out_.size(), inner.size()));
    }

    void step_conntrack() {
        heading(4, "Connection tracking across a backend removal",
                fmt::format("{} established connections (ACK packets, so each is recorded in "
                            "the connection table),\nthen backend 3 is removed the way the "
                            "agent removes one: a new ring without it is\npublished and its "
                            "generation is bumped. Then one more packet of each connection.\n",
                            opt_.established));

        must(lb().conntrack().clear(), "clear the connection table");
        struct Established {
            Flow flow;
            std::uint32_t before = 0;
            std::uint32_t after = 0;
        };
        std::vector<Established> conns;
        for (std::uint32_t i = 0; i < opt_.established; ++i) {
            Established c{next_flow()};
            const Bytes frame = test::make_frame(c.flow);  // ACK with payload
            c.before = backend_of(send(frame), frame);
            conns.push_back(c);
        }
        auto keys = must(lb().conntrack().keys(), "list the connection table");
        std::uint32_t recorded = 0;
        for (const Established& c : conns) {
            auto entry =
                must(lb().conntrack().get(test::flow_key(c.flow)), "read the connection table");
            if (entry && entry->backend_id == c.before && entry->generation == 1) ++recorded;
        }
        check(recorded == conns.size(),
              fmt::format("only {} of {} connections are recorded with their backend", recorded,
                          conns.size()));
        ok(
            fmt::format("connection table: {} entries; {}/{} connections recorded with the backend "
                        "they were sent to",
                        keys.size(), recorded, conns.size()));

        // Remove backend 3: new ring without it, then bump its generation so
        // that its connection-table entries are stale.
        constexpr std::uint32_t kRemoved = 3;
        const std::vector<std::uint32_t> old_ring = ring_;
        DemoBackend& removed = backend(kRemoved);
        removed.in_ring = false;
        build_and_publish();
        removed.generation += 1;
        write_backend(removed);
        std::uint32_t reshuffled = 0, kept_slots = 0;
        for (std::size_t i = 0; i < old_ring.size(); ++i) {
            if (old_ring[i] == kRemoved) continue;
            ++kept_slots;
            if (ring_[i] != old_ring[i]) ++reshuffled;
        }
        ok(fmt::format(
            "backend {} removed: ring republished (backend 1: {} slots, backend 2: {}), "
            "generation {} -> {}",
            kRemoved, slots_of(1), slots_of(2), removed.generation - 1, removed.generation));

        const xlb_vip_stats before_stats = vip_stats();
        for (Established& c : conns) {
            const Bytes frame = test::make_frame(c.flow);
            c.after = backend_of(send(frame), frame);
        }
        const xlb_vip_stats after_stats = vip_stats();

        std::vector<Row> rows;
        std::uint32_t live_total = 0, live_stayed = 0, live_ring_would_move = 0;
        std::uint32_t gone_total = 0, gone_moved = 0;
        for (const DemoBackend& b : backends_) {
            std::uint32_t n = 0, same = 0, to1 = 0, to2 = 0, to3 = 0;
            for (const Established& c : conns) {
                if (c.before != b.id) continue;
                ++n;
                if (c.after == c.before) ++same;
                (c.after == 1 ? to1 : c.after == 2 ? to2 : to3) += c.after != c.before ? 1 : 0;
                if (b.in_ring && predicted_backend(ring_, c.flow) != c.before)
                    ++live_ring_would_move;
            }
            if (b.in_ring) {
                live_total += n;
                live_stayed += same;
            } else {
                gone_total += n;
                gone_moved += n - same;
            }
            rows.push_back({fmt::format("{}{}", b.id, b.in_ring ? "" : " (removed)"),
                            fmt::format("{}", n), fmt::format("{}", same),
                            fmt::format("{}", n - same), fmt::format("{}", to1),
                            fmt::format("{}", to2), fmt::format("{}", to3)});
        }
        print_table(s_,
                    {{"was on backend", Align::kLeft},
                     {"connections"},
                     {"stayed"},
                     {"moved"},
                     {"-> 1"},
                     {"-> 2"},
                     {"-> 3"}},
                    rows);

        check(live_stayed == live_total, fmt::format("{} of {} connections on live backends moved",
                                                     live_total - live_stayed, live_total));
        check(
            gone_moved == gone_total,
            fmt::format("{} connections still go to the removed backend", gone_total - gone_moved));
        for (const Established& c : conns)
            check(c.after != kRemoved, "a connection still goes to the removed backend");
        const std::uint64_t hits = after_stats.conntrack_hits - before_stats.conntrack_hits;
        check(
            hits == live_total,
            fmt::format("expected {} connection-table hits, the VIP counted {}", live_total, hits));

        std::uint32_t stale_left = 0;
        for (const Established& c : conns) {
            auto entry =
                must(lb().conntrack().get(test::flow_key(c.flow)), "read the connection table");
            if (!entry || entry->backend_id == kRemoved) ++stale_left;
        }
        check(stale_left == 0, fmt::format("{} connection-table entries still name backend {}",
                                           stale_left, kRemoved));

        ok(
            fmt::format("{}/{} connections on backends 1-2 stayed where they were ({} connection-"
                        "table hits)",
                        live_stayed, live_total, hits));
        fmt::print("   {}\n",
                   s_.dim(fmt::format("   without the connection table the new ring would have "
                                      "moved {} of them: Maglev gave {} of\n"
                                      "      the {} slots backends 1-2 owned to the other one "
                                      "(few, but not none)",
                                      live_ring_would_move, reshuffled, kept_slots)));
        ok(
            fmt::format("{}/{} connections of removed backend {} moved to live backends and were "
                        "re-recorded there",
                        gone_moved, gone_total, kRemoved));

        fmt::print("\n   {}\n",
                   s_.bold(fmt::format("{} new connections after the removal:", opt_.flows)));
        send_new_flows(opt_.flows, false);
    }

    void step_counters() {
        heading(5, "Outcome counters, and traffic that is not for a VIP",
                "Packets that match no VIP go on to the kernel untouched (XDP_PASS). Every\n"
                "packet increments exactly one per-CPU outcome counter; here they are summed.\n");

        struct Passing {
            const char* what;
            Bytes frame;
        };
        const Flow other_port{test::kClientV4, test::kVipV4, 40443, 443, test::kProtoTcp};
        const Passing passing[] = {
            {"TCP to 198.51.100.10:443 (the VIP's address, port not configured)",
             test::make_frame(other_port)},
            {"ARP frame", test::ethernet(test::kLbMac, test::kClientSideMac, 0x0806, Bytes(28, 0))},
        };
        for (const Passing& p : passing) {
            const bpf::TestRunResult out = send(p.frame);
            check(out.action == XDP_PASS, fmt::format("{}: expected XDP_PASS, got {}", p.what,
                                                      xdp_action_name(out.action)));
            check(out.frame == p.frame, fmt::format("{}: the frame was changed", p.what));
            ok(fmt::format("{}: {}, {} bytes byte-identical", p.what, xdp_action_name(out.action),
                           out.frame.size()));
        }

        std::vector<Row> rows;
        std::vector<bool> dim;
        std::uint64_t total = 0;
        for (const OutcomeName& o : kOutcomes) {
            const std::uint64_t n = outcome_count(o.code);
            total += n;
            rows.push_back({fmt::format("{}", static_cast<int>(o.code)),
                            fmt::format("XLB_OUT_{}", o.name), fmt::format("{}", n), o.meaning});
            dim.push_back(n == 0);
        }
        print_table(s_,
                    {{"code"}, {"outcome", Align::kLeft}, {"packets"}, {"meaning", Align::kLeft}},
                    rows, dim);
        check(
            total == packets_sent_,
            fmt::format("the counters sum to {}, but {} packets were sent", total, packets_sent_));
        ok(fmt::format("counters sum to {} = packets this demo sent to the balancer", total));

        const xlb_vip_stats v = vip_stats();
        fmt::print("   {}\n",
                   s_.dim(fmt::format("VIP {} counters: {} packets, {} bytes, {} ring lookups, {} "
                                      "connection-table hits, {} drops",
                                      kVipId, v.packets, v.bytes, v.new_flows, v.conntrack_hits,
                                      v.drops)));
    }

    void step_decap() {
        heading(6, "On the backend: the decapsulator",
                fmt::format("The output of step 3 goes to backend {} ({}), where xlb_decap "
                            "(bpf/xlb_decap.bpf.c)\nstrips the outer header; the backend then "
                            "answers the client directly (DSR).\n",
                            sample_backend_, backend(sample_backend_).address.to_string()));
        auto decap = must(bpf::DecapProgram::load(), "load the decapsulator (bpf/xlb_decap.bpf.c)");
        const net::IpAddress& local = backend(sample_backend_).address;
        xlb_decap_addr key{};
        local.to_words(key.addr);
        key.family = XLB_FAMILY_V4;
        must(decap.local_addresses().put(key, 1), "give the decapsulator its local address");

        const bpf::TestRunResult out =
            must(bpf::test_run_xdp(decap.prog_fd(), sample_out_), "run the decapsulator");
        check(out.action == XDP_PASS, fmt::format("expected XDP_PASS from the decapsulator, got {}",
                                                  xdp_action_name(out.action)));
        auto per_cpu = must(decap.outcomes().get_per_cpu(XLB_DECAP_OUT_DECAPSULATED),
                            "read the decapsulator's counters");
        const std::uint64_t decapsulated = datapath::sum_per_cpu(per_cpu);
        check(decapsulated == 1,
              fmt::format("the decapsulator counted {} decapsulations, expected 1", decapsulated));

        fmt::print("   {}\n", s_.bold("after xlb_decap (XDP_PASS to the backend's stack):"));
        fmt::print("{}", indent(test::describe(out.frame), "     "));

        const Bytes original = test::ip_packet_of(sample_in_);
        const Bytes restored = test::ip_packet_of(out.frame);
        check(restored == original,
              "the decapsulated packet differs from the client's:\n" + test::describe(out.frame));
        const Bytes expected_frame =
            test::ethernet(test::kNextHopMac, test::kLbMac, 0x0800, original);
        check(out.frame == expected_frame,
              "the decapsulated frame is not the client's packet behind the LB's Ethernet header");
        ok(fmt::format("the {}-byte IP packet is byte-identical to the one the client sent",
                       restored.size()));
        ok(
            fmt::format("the whole {}-byte frame is that packet behind the link's Ethernet "
                        "header (LB > next hop)",
                        out.frame.size()));
    }

    Options opt_;
    Style s_;
    int step_ = 0;
    std::optional<bpf::LbProgram> lb_;
    xlb_config config_{};
    std::vector<DemoBackend> backends_;
    std::vector<std::uint32_t> ring_;   // live ring: backend id per slot
    std::vector<std::uint32_t> slots_;  // ring slots per backends_ entry
    std::uint64_t checksum_ = 0;
    double build_ms_ = 0;
    std::uint64_t packets_sent_ = 0;
    std::uint32_t flow_counter_ = 0;
    Bytes sample_in_, sample_out_;
    std::uint32_t sample_backend_ = 0;

public:
    int failed_step() const { return step_; }
};

bool want_color(const std::string& mode) {
    if (mode == "always") return true;
    if (mode == "never") return false;
    const char* term = std::getenv("TERM");
    return ::isatty(STDOUT_FILENO) && std::getenv("NO_COLOR") == nullptr &&
           !(term && std::string_view(term) == "dumb");
}

}  // namespace

int main(int argc, char** argv) {
    CLI::App app{"xlb-demo: the XDP load balancer at work, driven through BPF_PROG_TEST_RUN"};
    Options options;
    std::string color = "auto";
    app.add_option("--flows", options.flows, "new connections sent in steps 2 and 4")
        ->check(CLI::Range(1u, 10000u));
    app.add_option("--established", options.established,
                   "established connections in the removal experiment of step 4")
        ->check(CLI::Range(1u, 5000u));
    app.add_option("--color", color, "colour the output: auto (if a terminal), always, never")
        ->check(CLI::IsMember({"auto", "always", "never"}));
    CLI11_PARSE(app, argc, argv);
    options.color = want_color(color);

    if (::geteuid() != 0) {
        fmt::print(stderr,
                   "xlb-demo: must run as root: it loads BPF programs into the kernel.\n"
                   "  run: sudo ./scripts/demo.sh (or sudo make demo)\n");
        return 1;
    }

    Style style{options.color};
    Demo demo(options, style);
    try {
        demo.run();
    } catch (const std::exception& e) {
        std::fflush(stdout);
        fmt::print(stderr, "\n{} step {}: {}\n", style.bad("xlb-demo FAILED at"),
                   demo.failed_step(), e.what());
        return 1;
    }
    return 0;
}
