// SPDX-License-Identifier: Apache-2.0
//
// xlb-bench-xdp: nanoseconds per packet of the balancer's main paths, measured
// with BPF_PROG_TEST_RUN.
//
// Method:
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
#include <latch>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <stdexcept>
#include <string>
#include <thread>
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
#include "xlb/files/files.h"
#include "xlb/flow_hash.h"
#include "xlb/net/address.h"
#include "xlb/quic/cid.h"

namespace {

namespace bpf = xlb::bpf;
using xlb::bench::allowed_cpus;
using xlb::bench::cpu_model;
using xlb::bench::kernel_release;
using xlb::bench::pin_thread_to_cpu;
using xlb::bench::pin_to_cpu;
namespace test = xlb::test;
using test::Bytes;
using xlb::bench::Harness;
using xlb::bench::kFrameLen;
using xlb::bench::ProgramCopy;
using xlb::net::IpAddress;

// ---------------------------------------------------------------------------
// Errors: a failed check or setup step throws; main() prints it and exits 1.

struct Failure : std::runtime_error {
    using std::runtime_error::runtime_error;
};

template <typename T>
T must(xlb::Result<T> result) {
    if (!result) throw Failure(result.error().message());
    if constexpr (!std::is_void_v<T>) return std::move(*result);
}

// ---------------------------------------------------------------------------
// The balancer's configuration for the benchmark.

constexpr std::uint32_t kVipTcp4 = 0;      // kVipV4:80/tcp, connection table
constexpr std::uint32_t kVipTcp6 = 1;      // kVipV6:80/tcp, connection table
constexpr std::uint32_t kVipUdp4NoCt = 2;  // kVipV4:53/udp, XLB_VIP_F_NO_CONNTRACK
constexpr std::uint32_t kVipCookie4 = 3;   // kVipV4:443/tcp, XLB_VIP_F_COOKIES_ALWAYS
constexpr std::uint32_t kVipDenied4 = 4;   // kVipV4:8443/tcp, source lists refusing the client
// kVipV4:4433/udp, XLB_VIP_F_QUIC without a connection table: its
// fallbacks take no_conntrack_v4's path after the CID check.
constexpr std::uint32_t kVipQuic4 = 5;
constexpr std::uint32_t kVipCount = 6;
constexpr std::uint16_t kQuicPort = 4433;
// kVipQuic4's configs: plaintext 0 (2 octets of server id, 6 of nonce) and
// encrypted 1 (3 + 13, the single-pass form), and the server id both name.
const xlb::config::QuicConfig kQuicPlain{0, 2, 6, xlb::config::QuicMode::kPlaintext, {}};
const xlb::config::QuicConfig kQuicSealed{1, 3, 13, xlb::config::QuicMode::kEncrypted, {}};
const xlb::quic::Key kQuicKey = {0x2b, 0x7e, 0x15, 0x16, 0x28, 0xae, 0xd2, 0xa6,
                                 0xab, 0xf7, 0x15, 0x88, 0x09, 0xcf, 0x4f, 0x3c};
constexpr std::uint64_t kQuicServerId = 7;
constexpr std::uint32_t kQuicBackend = 42;
// The first four sealed octets of a 1-RTT packet's CID in a bench frame
// (Ethernet, IPv4, UDP, the header octet, the CID's first octet).
constexpr std::uint32_t kQuicSealedOffset = 14 + 20 + 8 + 1 + 1;
constexpr std::uint16_t kCookiePort = 443;
constexpr std::uint16_t kDeniedPort = 8443;
// The bench frames' TCP sequence number.
constexpr std::uint32_t kSynSeq = 1000;
// A Linux SYN's options: MSS 1460, SACK permitted, timestamps, NOP, window
// scale 7 (syn_cookie_v4 reads every one of them).
const Bytes kLinuxSynOptions = {2, 4, 5, 0xb4, 4, 2, 8, 10, 0, 0, 0, 1, 0, 0, 0, 0, 1, 3, 3, 7};
constexpr std::uint32_t kBackendsPerFamily = 100;
constexpr std::uint32_t kFirstV6Backend = kBackendsPerFamily;
constexpr std::uint16_t kDnsPort = 53;
// Offset of the IPv4 source address in an Ethernet frame: the field the
// wrapper rewrites on every repetition of new_flow_v4.
constexpr std::uint32_t kIpv4SrcOffset = 14 + 12;
// The IPv4 header checksum, which covers the source address: kept valid
// (the program drops a header whose checksum is wrong).
constexpr std::uint32_t kIpv4CsumOffset = 14 + 10;
// The last 32-bit word of the IPv6 source address (no header checksum).
constexpr std::uint32_t kIpv6SrcLastWordOffset = 14 + 8 + 12;
std::uint32_t csum_offset_for(std::uint32_t vary_offset) {
    return vary_offset == kIpv4SrcOffset ? kIpv4CsumOffset : 0;
}
// Spare connection-table entries: new_flow_v4 empties the table this much
// before it would hold as many flows as entries (the sets fill unevenly: a
// set-associative table replaces entries long before then anyway).
constexpr std::uint64_t kLruSlackPerCpu = 512;
constexpr std::uint64_t kLruSlack = 4096;
// The insert budget of every case but new_flow_over_budget_v4: far above what
// one CPU inserts, so nothing is skipped, yet the token bucket runs as in
// production (a rate of 0 would skip it).
constexpr xlb::datapath::CtBudget kAmpleBudget{.rate = 1'000'000'000, .burst = 1'000'000'000};
// new_flow_over_budget_v4: one entry per second, its bucket emptied before
// each sample.
constexpr xlb::datapath::CtBudget kSpentBudget{.rate = 1, .burst = 1};
// The established_many cases: this many established flows, each packet a
// different one (the sequence cycles through them), recorded in a table of
// kManyTableEntries entries of their own (one per family): the figures the
// issue measured the reference balancer with.
constexpr std::uint32_t kManyFlows = 1U << 18;
constexpr std::uint32_t kManyTableEntries = 1U << 20;
// Their source addresses (the varied word): 10.128.0.0 and up for IPv4,
// the client's IPv6 address with its last word from 10.128.0.0 up
// (2001:db8:c::a80:0 and up).
constexpr std::uint32_t kManyFirstValue = 0x0a800000;

struct Counters {
    std::array<std::uint64_t, XLB_OUT__MAX> outcomes{};
    std::array<xlb_vip_stats, kVipCount> vips{};
    std::array<std::uint64_t, kVipCount> hints{};  // second-chance hints sent
    xlb_vip_cookie_stats cookies{};                // kVipCookie4's, summed
    std::uint64_t denied = 0;                      // kVipDenied4's source_denied drops
    xlb_vip_quic_stats quic{};                     // kVipQuic4's, summed
    std::uint64_t ct_inserts = 0, ct_skipped = 0;  // xlb_ct_cpu, summed
};

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
        for (std::uint32_t v = 0; v < kVipCount; ++v) {
            c.vips[v] = xlb::datapath::sum_per_cpu(must(lb_.vip_stats().get_per_cpu(v)));
            c.hints[v] = bpf::sum_per_cpu(must(lb_.vip_hints().get_per_cpu(v)),
                                          [](std::uint64_t n) { return n; });
        }
        for (const xlb_ct_cpu& cpu : must(lb_.ct_cpu().get_per_cpu(0))) {
            c.ct_inserts += cpu.inserts;
            c.ct_skipped += cpu.skipped;
        }
        c.cookies = xlb::datapath::sum_per_cpu(must(lb_.vip_cookies().get_per_cpu(kVipCookie4)));
        c.denied = xlb::datapath::sum_per_cpu(must(lb_.vip_drops().get_per_cpu(kVipDenied4)))
                       .by_reason[xlb_vip_drop_slot(XLB_OUT_DROP_SOURCE_DENIED)];
        c.quic = xlb::datapath::sum_per_cpu(must(lb_.vip_quic().get_per_cpu(kVipQuic4)));
        return c;
    }

    // The insert budget, GUE, and second chance (GUE with hints) on or off:
    // the configuration one case needs, written before it runs.
    void use_config(xlb::datapath::CtBudget budget, bool second_chance, bool gue = false) {
        gue = gue || second_chance;
        if (budget.rate == budget_.rate && budget.burst == budget_.burst &&
            second_chance == second_chance_ && gue == gue_)
            return;
        must(lb_.config().put(0, config(budget, second_chance, gue)));
        budget_ = budget;
        second_chance_ = second_chance;
        gue_ = gue;
    }

    // cookie_ack_v4's packet: the handshake's ACK (with `template_frame`'s
    // payload) for the cookie this program answers `syn` with, valid for the
    // kernel's two cookie periods (a run is far shorter).
    Bytes cookie_ack(const Bytes& syn, const test::Flow& flow) {
        use_config(kAmpleBudget, false, true);
        const bpf::TestRunResult answer = must(bpf::test_run_xdp(lb_.prog_fd(), syn));
        const std::size_t tcp = 14 + 20;
        if (answer.action != XDP_TX || answer.frame.size() < tcp + 40)
            throw Failure("the SYN was not answered with a cookie:\n" +
                          test::describe(answer.frame));
        const std::uint32_t cookie = test::read_be32(answer.frame, tcp + 4);
        const std::uint32_t tsval = test::read_be32(answer.frame, tcp + 20 + 8);
        test::FrameOptions opt;
        opt.eth_src = test::kClientSideMac;
        opt.eth_dst = test::kLbMac;
        opt.tcp_flags = test::kTcpAck;
        opt.tcp_seq = kSynSeq + 1;
        opt.tcp_ack = cookie + 1;
        opt.tcp_options = {1, 1, 8, 10, 0, 0, 0, 1};
        test::append_be32(opt.tcp_options, tsval);
        opt.payload.clear();
        const std::size_t headers = test::make_frame(flow, opt).size();
        opt.payload.assign(kFrameLen - headers, 'x');
        return test::make_frame(flow, opt);
    }

    // second_chance_v4: the backend kVipTcp4's previous ring names for a flow.
    std::uint32_t previous_choice(const xlb_flow_key& key) const {
        return previous_v4_.at(
            xlb::datapath::ring_index(key, 0, test::kHashSeed, previous_v4_.size()));
    }

    // Every CPU's bucket empty, as of now.
    void empty_buckets() const {
        std::vector<xlb_ct_cpu> per_cpu = must(lb_.ct_cpu().get_per_cpu(0));
        for (xlb_ct_cpu& cpu : per_cpu) {
            cpu.tokens = 0;
            cpu.refill_ns = bpf::monotonic_coarse_ns();
        }
        const std::uint32_t key = 0;
        if (bpf_map_update_elem(lb_.ct_cpu().fd(), &key, per_cpu.data(), BPF_ANY) != 0)
            throw Failure(
                fmt::format("empty the insert budget's buckets: {}", std::strerror(errno)));
    }

    std::optional<xlb_ct_value> conntrack_entry(const xlb_flow_key& key) const {
        return must(lb_.conntrack().get(key));
    }

    // Entries in the connection table (a walk of its mapped sets).
    std::uint64_t conntrack_count() const { return lb_.conntrack().count(); }

    // Empties the connection table; returns how many entries it held.
    std::uint64_t clear_conntrack() const {
        const std::uint64_t total = conntrack_count();
        must(lb_.conntrack().clear());
        return total;
    }

private:
    static xlb_config config(xlb::datapath::CtBudget budget, bool second_chance = false,
                             bool gue = false) {
        xlb::config::Settings settings = test::bench_settings();
        if (gue || second_chance) settings.encap = xlb::config::Encap::kGue;
        if (second_chance) settings.second_chance.enabled = true;
        return xlb::datapath::make_config(settings, test::kNextHopMac, budget);
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
        // A previous ring that differs from the current one in every slot,
        // so that with second chance on every new flow of kVipTcp4 carries a
        // hint (it is only read with second chance on: second_chance_v4).
        previous_v4_ = ring_v4_;
        for (std::uint32_t& id : previous_v4_) id = (id + 1) % kBackendsPerFamily;
        std::vector<std::uint32_t> previous = previous_v4_;
        must(bpf::publish_ring(lb_.prev_rings().fd(), kVipTcp4, previous));
        for (std::uint32_t vip : {kVipUdp4NoCt, kVipCookie4, kVipDenied4, kVipQuic4}) {
            std::vector<std::uint32_t> copy = ring_v4_;
            must(bpf::publish_ring(lb_.rings().fd(), vip, copy));
        }
        // source_denied_v4: the client's /24 is denied.
        xlb::config::VipSpec denied;
        denied.address = test::kVipV4;
        denied.port = kDeniedPort;
        denied.deny_sources = {must_prefix("192.0.2.0/24")};
        for (const xlb::datapath::SourceRangeEntry& e :
             xlb::datapath::source_range_entries(denied, kVipDenied4))
            must(lb_.source_ranges().put(e.key, e.verdict));

        add_vip(test::kVipV4, test::kVipPort, test::kProtoTcp, kVipTcp4, 0);
        add_vip(test::kVipV6, test::kVipPort, test::kProtoTcp, kVipTcp6, 0);
        add_vip(test::kVipV4, kDnsPort, test::kProtoUdp, kVipUdp4NoCt, XLB_VIP_F_NO_CONNTRACK);
        add_vip(test::kVipV4, kCookiePort, test::kProtoTcp, kVipCookie4, XLB_VIP_F_COOKIES_ALWAYS);
        add_vip(test::kVipV4, kDeniedPort, test::kProtoTcp, kVipDenied4, XLB_VIP_F_SOURCE_RANGES);
        for (const xlb::config::QuicConfig& q : {kQuicPlain, kQuicSealed})
            must(lb_.quic_configs().put(kVipQuic4 * XLB_QUIC_CONFIG_SLOTS + q.config_id,
                                        xlb::datapath::quic_config_value(q)));
        must(lb_.install_quic_key(kVipQuic4 * XLB_QUIC_CONFIG_SLOTS + kQuicSealed.config_id,
                                  kQuicKey));
        must(
            lb_.quic_servers().put(xlb_quic_server_key{kVipQuic4, 0, kQuicServerId}, kQuicBackend));
        add_vip(test::kVipV4, kQuicPort, test::kProtoUdp, kVipQuic4,
                XLB_VIP_F_QUIC | XLB_VIP_F_NO_CONNTRACK);
    }

    static xlb::net::Prefix must_prefix(const char* text) {
        auto p = xlb::net::Prefix::parse(text);
        if (!p) throw Failure(p.error());
        return *p;
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
        must(lb_.put_vip(xlb::datapath::vip_key(addr, port, proto), xlb_vip_value{vip_id, flags}));
    }

    bpf::LbProgram lb_;
    std::optional<bpf::CtClockTicker> clock_;  // after lb_: stops first
    std::vector<IpAddress> backend_addr_;
    std::vector<std::uint32_t> ring_v4_, ring_v6_, previous_v4_;
    xlb::datapath::CtBudget budget_;
    bool second_chance_ = false;
    bool gue_ = false;
};

// ---------------------------------------------------------------------------
// Cases.

enum class Path {
    kEstablished,
    kEstablishedMany,
    kEstablishedManyAllCpus,
    kSyn,
    kNewFlow,
    kNewFlowFull,
    kNewFlowAllCpus,
    kNewFlowOverBudget,
    kSecondChance,
    kNoConntrack,
    kNotVip,
    kSynCookie,
    kCookieAck,
    kSourceDenied,
    kQuicCid,
    kQuicNewSealed,
    kQuicFallback,
};

// Cases that insert a new flow on every repetition.
constexpr const char* kCaptureIdleCases[] = {"established_v4", "not_vip"};
constexpr double kCaptureIdleTargetNs = 2;

// Whether a per-CPU cache of recent flows can answer the case's packets:
// one established flow over and over can; one of 262,144 each time cannot.
bool cache_can_answer(Path p) { return p == Path::kEstablished; }

bool inserts_every_run(Path p) {
    return p == Path::kNewFlow || p == Path::kNewFlowFull || p == Path::kNewFlowAllCpus ||
           p == Path::kSecondChance;
}
// ... into the shared table, not yet full (the full-table case has its own).
bool fills_shared_table(Path p) { return inserts_every_run(p) && p != Path::kNewFlowFull; }

struct Case {
    std::string name;
    std::string path;  // what it measures, for people
    Path kind;
    test::Flow flow;
    std::uint32_t vip_id = 0;
    std::uint32_t vip_flags = 0;
    std::uint32_t vary_offset = 0;
    std::optional<double> target_net_ns;
    // A target relative to another case of the same run: at most
    // target_factor times its net median (new_flow_v4_all_cpus).
    std::string target_relative_to;
    double target_factor = 0;
    // Run through the copy of the balancer built without the capture check
    // (the baseline of the capture_idle figures; no target of its own).
    bool without_capture_check = false;
    // Run through the copy built without the established-flow cache.
    bool without_flow_cache = false;
    // kEstablishedMany*: the varied field cycles through this many values
    // (established flows) from kManyFirstValue.
    std::uint32_t population = 0;
    // kQuicCid: the config whose CID the packet carries.
    const xlb::config::QuicConfig* quic = nullptr;
    // cookie_ack_v4 renews its packet before each sample (a cookie is valid
    // for two of the kernel's 64-second periods at most).
    mutable Bytes frame;

    std::vector<double> ns, floor_ns, net_ns;
    // new_flow_v4 / _full / _all_cpus: entries in the connection table
    // when each sample began.
    std::vector<std::uint64_t> table_entries;
};

// Exactly kFrameLen bytes: TCP (an ACK unless the case is syn_v4) or UDP,
// the payload filling the rest, valid lengths and checksums.
Bytes bench_frame(const test::Flow& flow, std::uint8_t tcp_flags, const Bytes& tcp_options = {}) {
    test::FrameOptions opt;
    opt.eth_src = test::kClientSideMac;
    opt.eth_dst = test::kLbMac;
    opt.tcp_flags = tcp_flags;
    opt.tcp_seq = kSynSeq;
    opt.tcp_options = tcp_options;
    opt.payload.clear();
    const std::size_t headers = test::make_frame(flow, opt).size();
    if (headers > kFrameLen) throw Failure("headers exceed the bench frame");
    opt.payload.assign(kFrameLen - headers, 'x');
    Bytes frame = test::make_frame(flow, opt);
    if (frame.size() != kFrameLen) throw Failure("bench frame has the wrong length");
    return frame;
}

// A UDP frame of exactly kFrameLen bytes whose payload begins with `quic`.
Bytes quic_frame(const test::Flow& flow, const Bytes& quic) {
    test::FrameOptions opt;
    opt.eth_src = test::kClientSideMac;
    opt.eth_dst = test::kLbMac;
    opt.payload.clear();
    const std::size_t headers = test::make_frame(flow, opt).size();
    if (headers + quic.size() > kFrameLen) throw Failure("QUIC header exceeds the bench frame");
    opt.payload = quic;
    opt.payload.resize(kFrameLen - headers, 'x');
    return test::make_frame(flow, opt);
}
// A 1-RTT packet's first octets: the header octet and a CID of kQuicServerId.
Bytes quic_short_header(const xlb::config::QuicConfig& config) {
    const Bytes nonce(config.nonce_length, 0x5c);
    const auto cid = must(xlb::quic::encode_cid(
        config, kQuicServerId, nonce,
        config.mode == xlb::config::QuicMode::kEncrypted ? std::optional(kQuicKey) : std::nullopt));
    Bytes header(1 + cid.size(), 0x41);
    std::copy(cid.begin(), cid.end(), header.begin() + 1);
    return header;
}
// A QUIC v1 Initial's first octets: its destination CID is the client's.
Bytes quic_initial() {
    Bytes header(6 + 8 + 1 + 8, 0);
    const std::uint8_t fixed[] = {0xc3, 0, 0, 0, 1, 8};
    std::copy(std::begin(fixed), std::end(fixed), header.begin());
    for (std::size_t i = 0; i < 8 + 1 + 8; ++i)
        header[6 + i] = static_cast<std::uint8_t>(i == 8 ? 8 : 0x90 + i);
    return header;
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
                     .vip_id = kVipTcp6,
                     .target_net_ns = 85});
    cases.push_back({.name = "established_many_v4",
                     .path = "TCP ACK, another of 262,144 established flows each run: "
                             "conntrack hit, IPv4-in-IPv4",
                     .kind = Path::kEstablishedMany,
                     .flow = Flow{test::kClientV4, test::kVipV4, 40010, test::kVipPort},
                     .vip_id = kVipTcp4,
                     .vary_offset = kIpv4SrcOffset,
                     .target_net_ns = 200,
                     .population = kManyFlows});
    cases.push_back({.name = "established_many_v6",
                     .path = "TCP ACK, another of 262,144 established flows each run: "
                             "conntrack hit, IPv6-in-IPv6",
                     .kind = Path::kEstablishedMany,
                     .flow = Flow{test::kClientV6, test::kVipV6, 40010, test::kVipPort},
                     .vip_id = kVipTcp6,
                     .vary_offset = kIpv6SrcLastWordOffset,
                     .target_net_ns = 210,
                     .population = kManyFlows});
    cases.push_back({.name = "established_many_v4_all_cpus",
                     .path = "established_many_v4 on every CPU at once (ns per CPU)",
                     .kind = Path::kEstablishedManyAllCpus,
                     .flow = Flow{test::kClientV4, test::kVipV4, 40010, test::kVipPort},
                     .vip_id = kVipTcp4,
                     .vary_offset = kIpv4SrcOffset,
                     .target_relative_to = "established_many_v4",
                     .target_factor = 1.2,
                     .population = kManyFlows});
    cases.push_back({.name = "syn_v4",
                     .path = "TCP SYN, same flow each run: Maglev, no insert",
                     .kind = Path::kSyn,
                     .flow = Flow{test::kClientV4, test::kVipV4, 40004, test::kVipPort},
                     .vip_id = kVipTcp4,
                     .target_net_ns = 180});
    cases.push_back({.name = "new_flow_v4",
                     .path = "TCP ACK, new source each run: miss, Maglev, insert",
                     .kind = Path::kNewFlow,
                     .flow = Flow{test::kClientV4, test::kVipV4, 40001, test::kVipPort},
                     .vip_id = kVipTcp4,
                     .vary_offset = kIpv4SrcOffset,
                     .target_net_ns = 480});
    cases.push_back({.name = "new_flow_full_v4",
                     .path = "TCP ACK, new source each run, table full: miss, Maglev, evict",
                     .kind = Path::kNewFlowFull,
                     .flow = Flow{test::kClientV4, test::kVipV4, 40003, test::kVipPort},
                     .vip_id = kVipTcp4,
                     .vary_offset = kIpv4SrcOffset,
                     .target_net_ns = 900});
    cases.push_back({.name = "new_flow_v4_all_cpus",
                     .path = "new_flow_v4 on every CPU at once (ns per CPU)",
                     .kind = Path::kNewFlowAllCpus,
                     .flow = Flow{test::kClientV4, test::kVipV4, 40005, test::kVipPort},
                     .vip_id = kVipTcp4,
                     .vary_offset = kIpv4SrcOffset,
                     .target_relative_to = "new_flow_v4",
                     .target_factor = 1.3});
    cases.push_back({.name = "new_flow_over_budget_v4",
                     .path = "TCP ACK, new source each run, insert budget spent: miss, Maglev",
                     .kind = Path::kNewFlowOverBudget,
                     .flow = Flow{test::kClientV4, test::kVipV4, 40002, test::kVipPort},
                     .vip_id = kVipTcp4,
                     .vary_offset = kIpv4SrcOffset});
    cases.push_back({.name = "second_chance_v4",
                     .path = "TCP ACK, new source each run, the previous ring disagrees: miss, "
                             "two rings, insert, GUE with a hint",
                     .kind = Path::kSecondChance,
                     .flow = Flow{test::kClientV4, test::kVipV4, 40006, test::kVipPort},
                     .vip_id = kVipTcp4,
                     .vary_offset = kIpv4SrcOffset});
    // Answering a SYN must cost no more than balancing a new flow.
    cases.push_back({.name = "syn_cookie_v4",
                     .path = "TCP SYN, same flow each run, VIP with SYN cookies always: "
                             "answered with a SYN-ACK, no backend, no insert",
                     .kind = Path::kSynCookie,
                     .flow = Flow{test::kClientV4, test::kVipV4, 40007, kCookiePort},
                     .vip_id = kVipCookie4,
                     .vip_flags = XLB_VIP_F_COOKIES_ALWAYS,
                     .target_relative_to = "new_flow_v4",
                     .target_factor = 1.0});
    // A valid cookie ACK of one flow, over and over: the insert budget is
    // spent so that no entry ends the cookie path (compare with
    // new_flow_over_budget_v4, the same without the cookie checks).
    cases.push_back({.name = "cookie_ack_v4",
                     .path = "TCP ACK with a valid SYN cookie, same flow each run, insert budget "
                             "spent: miss, three cookie checks, Maglev, GUE with the options",
                     .kind = Path::kCookieAck,
                     .flow = Flow{test::kClientV4, test::kVipV4, 40008, kCookiePort},
                     .vip_id = kVipCookie4,
                     .vip_flags = XLB_VIP_F_COOKIES_ALWAYS});
    cases.push_back({.name = "source_denied_v4",
                     .path = "TCP ACK from a denied source: VIP match, source-list lookup, drop",
                     .kind = Path::kSourceDenied,
                     .flow = Flow{test::kClientV4, test::kVipV4, 40009, kDeniedPort},
                     .vip_id = kVipDenied4,
                     .vip_flags = XLB_VIP_F_SOURCE_RANGES});
    cases.push_back({.name = "no_conntrack_v4",
                     .path = "UDP, VIP without conntrack: hash, Maglev",
                     .kind = Path::kNoConntrack,
                     .flow = Flow{test::kClientV4, test::kVipV4, 40000, kDnsPort, test::kProtoUdp},
                     .vip_id = kVipUdp4NoCt,
                     .vip_flags = XLB_VIP_F_NO_CONNTRACK,
                     .target_net_ns = 70});
    // kVipQuic4's cases: one client, the VIP's flags; `quic`: the config
    // whose CID the packet carries (none: an Initial).
    auto quic_case = [](std::string name, std::string path, Path kind,
                        const xlb::config::QuicConfig* quic) {
        return Case{.name = std::move(name),
                    .path = std::move(path),
                    .kind = kind,
                    .flow = Flow{test::kClientV4, test::kVipV4, 40000, kQuicPort, test::kProtoUdp},
                    .vip_id = kVipQuic4,
                    .vip_flags = XLB_VIP_F_QUIC | XLB_VIP_F_NO_CONNTRACK,
                    .quic = quic};
    };
    // Routing by the server id in the CID must cost no more than hashing
    // the 5-tuple into the ring; decrypting it at most twice that. A
    // plaintext CID names its server whoever sends it: there is no per-flow
    // state, so one flow is the common case too.
    cases.push_back(quic_case("quic_cid_plain_v4",
                              "QUIC 1-RTT, plaintext CID: CID check, server id lookup",
                              Path::kQuicCid, &kQuicPlain));
    cases.back().target_relative_to = "no_conntrack_v4";
    cases.back().target_factor = 1.0;
    cases.push_back(quic_case("quic_cid_encrypted_v4",
                              "QUIC 1-RTT, encrypted CID: CID check, AES-128 (BPF crypto), "
                              "server id lookup",
                              Path::kQuicCid, &kQuicSealed));
    cases.back().target_relative_to = "no_conntrack_v4";
    cases.back().target_factor = 2.0;
    // Every CID is opened once and then found in the opened-CID cache (a
    // connection keeps its CID): the case above. A new sealed block each
    // run, as a flood of made-up CIDs sends, pays the AES and an insert
    // into the cache, then finds no server and goes by the ring.
    cases.push_back(quic_case("quic_cid_encrypted_new_v4",
                              "QUIC 1-RTT, a new encrypted CID each run: AES-128 (BPF crypto), "
                              "cache insert, no such server: hash, Maglev",
                              Path::kQuicNewSealed, &kQuicSealed));
    cases.back().vary_offset = kQuicSealedOffset;
    cases.push_back(quic_case("quic_fallback_v4",
                              "QUIC Initial (the client's CID): CID check, then hash, Maglev",
                              Path::kQuicFallback, nullptr));
    cases.push_back({.name = "not_vip",
                     .path = "TCP to the LB's own address: pass",
                     .kind = Path::kNotVip,
                     .flow = Flow{test::kClientV4, test::kEncapSrcV4, 40000, 22},
                     .target_net_ns = 30});
    // An idle capture flag must cost at most kCaptureIdleTargetNs on these
    // paths (docs/capture.md, "Cost"), measured against the same program
    // without the check.
    for (const char* name : kCaptureIdleCases) {
        Case copy = *std::find_if(cases.begin(), cases.end(),
                                  [&](const Case& c) { return c.name == name; });
        copy.name += "_no_capture_check";
        copy.path = "the same, built without the capture flag's check";
        copy.target_net_ns.reset();
        copy.without_capture_check = true;
        cases.push_back(std::move(copy));
    }
    // What the established-flow cache earns on one flow and costs on many:
    // the same cases through the program built without it.
    for (const char* name : {"established_v4", "established_many_v4"}) {
        Case copy = *std::find_if(cases.begin(), cases.end(),
                                  [&](const Case& c) { return c.name == name; });
        copy.name += "_no_flow_cache";
        copy.path = "the same, built without the established-flow cache";
        copy.target_net_ns.reset();
        copy.without_flow_cache = true;
        cases.push_back(std::move(copy));
    }
    for (Case& c : cases)
        c.frame = c.kind == Path::kQuicCid || c.kind == Path::kQuicNewSealed
                      ? quic_frame(c.flow, quic_short_header(*c.quic))
                  : c.kind == Path::kQuicFallback ? quic_frame(c.flow, quic_initial())
                  : c.kind == Path::kSynCookie
                      ? bench_frame(c.flow, test::kTcpSyn, kLinuxSynOptions)
                      : bench_frame(c.flow, c.kind == Path::kSyn ? test::kTcpSyn : test::kTcpAck);
    return cases;
}

// The flow of the repetition that wrote `counter` at the case's vary offset.
xlb_flow_key key_of_run(const Case& c, std::uint32_t counter) {
    xlb_flow_key key = test::flow_key(c.flow);
    if (c.vary_offset == kIpv4SrcOffset) key.src[0] = htonl(counter);
    if (c.vary_offset == kIpv6SrcLastWordOffset) key.src[3] = htonl(counter);
    return key;
}

Bytes frame_of_run(const Case& c, std::uint32_t counter) {
    Bytes frame = c.frame;
    if (c.vary_offset != 0) {
        const std::uint32_t value = htonl(counter);
        std::memcpy(frame.data() + c.vary_offset, &value, 4);
    }
    if (const std::uint32_t at = csum_offset_for(c.vary_offset); at != 0) {
        frame[at] = frame[at + 1] = 0;
        const std::uint16_t sum = test::internet_checksum(frame.data() + 14, 20);
        frame[at] = static_cast<std::uint8_t>(sum >> 8);
        frame[at + 1] = static_cast<std::uint8_t>(sum);
    }
    return frame;
}

// ---------------------------------------------------------------------------
// One sample and the checks that it took the path it names.

struct Sample {
    bpf::TestRunResult result;  // the run on the pinned CPU
    Counters before, after;
    // The varied field's counter on the pinned CPU, and on every CPU that
    // ran (new_flow_v4_all_cpus: all of them, in the order of `cpus`).
    std::uint32_t counter_before = 0, counter_after = 0;
    std::vector<int> cpus;
    std::vector<std::uint32_t> counters_before, counters_after;
    std::vector<bpf::TestRunResult> results;  // per CPU, in the order of `cpus`
    std::uint32_t repeat = 0;                 // repetitions per CPU
    std::uint64_t runs() const { return std::uint64_t{repeat} * cpus.size(); }
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
                outcome && o == static_cast<std::uint32_t>(*outcome) ? s_.runs() : 0;
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
            expect_eq(a.packets - b.packets, mine ? s_.runs() : 0, name + " packets grew by");
            expect_eq(a.bytes - b.bytes, mine ? s_.runs() * kFrameLen : 0, name + " bytes grew by");
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

    // The last repetition's output: `input` in GUE towards `backend`, with
    // the 8-byte hint naming `hinted` (abi.h, struct xlb_gue_hint).
    void expect_hinted(const Bytes& input, const IpAddress& backend, const IpAddress& hinted) {
        const Bytes& out = s_.result.frame;
        const std::size_t outer = 20 + XLB_GUE_OVERHEAD + XLB_GUE_HINT_LEN(XLB_FAMILY_V4);
        if (out.size() != input.size() + outer) {
            errors_.push_back(fmt::format("output frame is {} bytes, expected {}:\n{}", out.size(),
                                          input.size() + outer, test::describe(out)));
            return;
        }
        expect_eq(out[14 + 9], test::kProtoUdp, "outer IPv4 protocol");
        expect(std::equal(backend.bytes.begin(), backend.bytes.begin() + 4, out.begin() + 30),
               "outer destination is not backend " + backend.to_string());
        const Bytes hint = test::second_chance_hint(hinted);
        expect(
            std::equal(hint.begin(), hint.end(), out.begin() + 14 + 20 + 12),
            fmt::format("the hint does not name {}:\n{}", hinted.to_string(), test::describe(out)));
        expect(std::equal(input.begin() + 14, input.end(), out.begin() + 14 + outer),
               "the inner IP packet is not the input's, byte for byte");
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
    // A production size (at least 1M entries), small enough that
    // new_flow_full_v4 fills its own table in seconds.
    std::uint32_t conntrack_entries = 1U << 22;
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
    Bench(const Options& opt, std::vector<Case> cases, int cpu, std::vector<int> cpus)
        : opt_(opt),
          balancer_(opt.conntrack_entries),
          harness_(must(Harness::load())),
          cases_(std::move(cases)),
          cpu_(cpu),
          cpus_(std::move(cpus)) {
        if (std::any_of(cases_.begin(), cases_.end(),
                        [](const Case& c) { return c.kind == Path::kNewFlowFull; }))
            full_.emplace(opt.conntrack_entries);
        if (std::any_of(cases_.begin(), cases_.end(),
                        [](const Case& c) { return c.without_capture_check; }))
            no_capture_.emplace(
                must(ProgramCopy::load(balancer_.lb(), ProgramCopy::Variant::kNoCaptureCheck)));
        for (const Case& c : cases_) {
            if (c.population == 0) continue;
            std::optional<Balancer>& many = c.vip_id == kVipTcp6 ? many_v6_ : many_v4_;
            if (!many) many.emplace(kManyTableEntries);
        }
        for (const Case& c : cases_) {
            if (!c.without_flow_cache) continue;
            std::optional<ProgramCopy>& copy =
                c.population ? no_flow_cache_many_ : no_flow_cache_main_;
            if (!copy)
                copy.emplace(must(
                    ProgramCopy::load(balancer_for(c).lb(), ProgramCopy::Variant::kNoFlowCache)));
        }
        // Each CPU's counter gets its own range of values (source
        // addresses): flows made on two CPUs never collide.
        const int top = *std::max_element(cpus_.begin(), cpus_.end());
        if (top >= Harness::max_cpus())
            throw Failure(fmt::format("CPU {} is beyond the {} CPUs the bench wrapper counts for",
                                      top, Harness::max_cpus()));
        const std::uint64_t range = (std::uint64_t{1} << 32) / static_cast<std::uint64_t>(top + 1);
        for (int c : cpus_) harness_.set_vary_counter(c, static_cast<std::uint32_t>(range * c));
        // The established_many cases' CPUs start apart in the cycle (the
        // counter is the value before the next run's).
        for (std::size_t i = 0; i < cpus_.size(); ++i)
            for (std::uint32_t vip : {kVipTcp4, kVipTcp6})
                many_position_[{vip, cpus_[i]}] =
                    kManyFirstValue - 1 + static_cast<std::uint32_t>(kManyFlows * i / cpus_.size());
    }

    // What the established_many cases found in their tables after the
    // flows were recorded.
    struct ManyTable {
        std::uint64_t flows_held = 0;  // entries in the table
        std::uint64_t churn = 0;       // flows inserted again in one cycle
    };
    const std::map<std::uint32_t, ManyTable>& many_tables() const { return many_tables_; }

    // Puts the established flows into the connection table (one packet each,
    // straight through the balancer) and checks where they went. With
    // `missing_only`, only flows whose entry is gone: new_flow_v4's millions
    // of inserts fill the established flows' sets too, and an insert into a
    // full set replaces the way seen longest ago.
    void warm_established(bool missing_only = false) {
        bool configured = false;
        for (Case& c : cases_) {
            if (c.kind != Path::kEstablished) continue;
            const xlb_flow_key key = test::flow_key(c.flow);
            if (missing_only && balancer_.conntrack_entry(key)) continue;
            if (!configured) {
                // The last case run may have left the budget spent or second
                // chance on: either would leave these flows without their
                // plain entry.
                balancer_.use_config(kAmpleBudget, false);
                configured = true;
            }
            // The flow's cached copy would answer the packet without the table.
            balancer_.lb().note_conntrack_erased();
            if (missing_only) ct_rewarmed_ += 1;
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
        // Copies are cached again only once the clock has moved past the
        // erase (abi.h, XLB_MAP_FLOW_CACHE): a sample must not start before.
        if (configured)
            std::this_thread::sleep_for(std::chrono::milliseconds(2 * XLB_CT_CLOCK_TICK_MS));
    }

    // new_flow_full_v4's table: distinct flows until inserting more no longer
    // grows it (every insert evicts), as a host under steady load is.
    void fill_full_table() {
        if (!full_) return;
        const Case& c = *std::find_if(cases_.begin(), cases_.end(),
                                      [](const Case& k) { return k.kind == Path::kNewFlowFull; });
        must(harness_.set_target(full_->lb().prog_fd()));
        harness_.set_template(c.frame, c.vary_offset, csum_offset_for(c.vary_offset));
        const std::uint32_t chunk = 1'000'000;
        std::uint64_t inserted = 0, count = 0;
        while (true) {
            must(harness_.run(c.frame, chunk));
            inserted += chunk;
            const std::uint64_t now = full_->conntrack_count();
            // Full: another chunk of inserts left it (nearly) where it was.
            if (inserted > opt_.conntrack_entries && now <= count + chunk / 100) {
                count = now;
                break;
            }
            count = now;
            if (inserted > 4ULL * opt_.conntrack_entries)
                throw Failure(
                    fmt::format("the full-table case's table still grows after {} "
                                "inserts ({} entries)",
                                inserted, now));
        }
        full_entries_ = count;
        fmt::print(stderr,
                   "filled the full-table case's connection table: {} entries after {} "
                   "inserts\n",
                   count, inserted);
    }

    // Records the established_many cases' flows: one packet each, through
    // the balancer, then further cycles count the flows that lost their
    // entry meanwhile (sets that drew more flows than they hold) and come
    // back as new ones on every cycle.
    void populate_many() {
        for (std::uint32_t vip : {kVipTcp4, kVipTcp6}) {
            auto it = std::find_if(cases_.begin(), cases_.end(),
                                   [&](const Case& c) { return c.population && c.vip_id == vip; });
            if (it == cases_.end()) continue;
            const Case& c = *it;
            Balancer& balancer = balancer_for(c);
            balancer.use_config(kAmpleBudget, false);
            must(harness_.set_target(balancer.lb().prog_fd()));
            harness_.set_template(c.frame, c.vary_offset, csum_offset_for(c.vary_offset));
            harness_.set_vary_cycle(kManyFirstValue, c.population);
            const std::uint32_t saved = harness_.vary_counter(cpu_);
            harness_.set_vary_counter(cpu_, kManyFirstValue - 1);
            must(harness_.run(c.frame, c.population));
            // The most of a few cycles: flows of a set that drew more than
            // it holds push each other out in turn.
            ManyTable table;
            for (int cycle = 0; cycle < 4; ++cycle) {
                const Counters before = balancer.counters();
                must(harness_.run(c.frame, c.population));
                table.churn =
                    std::max(table.churn, balancer.counters().ct_inserts - before.ct_inserts);
            }
            harness_.set_vary_counter(cpu_, saved);
            harness_.set_vary_cycle(0, 0);
            table.flows_held = balancer.conntrack_count();
            std::uint64_t found = 0;
            for (std::uint32_t i = 0; i < c.population; ++i) {
                const xlb_flow_key key = key_of_run(c, kManyFirstValue + i);
                auto entry = balancer.conntrack_entry(key);
                if (!entry) continue;
                found += 1;
                if (entry->backend_id != balancer.ring_choice(c.vip_id, key, c.vip_flags))
                    throw Failure(
                        fmt::format("{}: flow #{} is recorded with backend {}, not the "
                                    "ring's",
                                    c.name, i, entry->backend_id));
            }
            if (found != table.flows_held)
                throw Failure(fmt::format("{}: {} of the flows found, {} entries in the table",
                                          c.name, found, table.flows_held));
            fmt::print(stderr,
                       "{}: {} of {} flows held in a {}-entry table; {} inserted again per "
                       "cycle\n",
                       c.name, table.flows_held, c.population, kManyTableEntries, table.churn);
            many_tables_[vip] = table;
        }
    }

    // Occupancy: a table of kManyTableEntries entries of its own given live
    // flows for 75% of its capacity (each recorded by one packet), then a
    // second cycle over them: the flows that lost their entry come back as
    // inserts. Only with an established_many case in the run.
    void measure_fill() {
        auto it = std::find_if(cases_.begin(), cases_.end(),
                               [](const Case& c) { return c.population && c.vip_id == kVipTcp4; });
        if (it == cases_.end()) return;
        Case c = *it;
        c.population = kManyTableEntries / 4 * 3;
        Balancer balancer(kManyTableEntries);
        must(harness_.set_target(balancer.lb().prog_fd()));
        harness_.set_template(c.frame, c.vary_offset, csum_offset_for(c.vary_offset));
        harness_.set_vary_cycle(kManyFirstValue, c.population);
        const std::uint32_t saved = harness_.vary_counter(cpu_);
        harness_.set_vary_counter(cpu_, kManyFirstValue - 1);
        must(harness_.run(c.frame, c.population));
        const Counters first = balancer.counters();
        must(harness_.run(c.frame, c.population));
        const Counters second = balancer.counters();
        harness_.set_vary_counter(cpu_, saved);
        harness_.set_vary_cycle(0, 0);
        fill_.flows = c.population;
        fill_.capacity = balancer.lb().conntrack().capacity();
        fill_.held = balancer.conntrack_count();
        fill_.lost = second.ct_inserts - first.ct_inserts;
        fmt::print(stderr,
                   "fill: {} live flows in a {}-entry table: {} held, {} lost and inserted "
                   "again on the next cycle ({:.3f} %)\n",
                   fill_.flows, fill_.capacity, fill_.held, fill_.lost,
                   100.0 * static_cast<double>(fill_.lost) / fill_.flows);
    }
    struct Fill {
        std::uint64_t flows = 0, capacity = 0, held = 0, lost = 0;
    };
    const Fill& fill() const { return fill_; }

    void run() {
        warm_established();
        populate_many();
        measure_fill();
        fill_full_table();
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
    std::uint64_t established_rewarmed() const { return ct_rewarmed_; }
    std::uint32_t ring_size() const { return balancer_.ring_size(); }
    std::uint64_t full_table_entries() const { return full_entries_; }
    const std::vector<int>& cpus() const { return cpus_; }
    // How the connection table is organised (abi.h, layout 5).
    std::string conntrack_layout() const {
        return fmt::format("two_choice_buckets_{}_slots", XLB_CT_SLOTS);
    }

private:
    Balancer& balancer_for(const Case& c) {
        if (c.population) return c.vip_id == kVipTcp6 ? *many_v6_ : *many_v4_;
        return c.kind == Path::kNewFlowFull ? *full_ : balancer_;
    }
    std::vector<int> cpus_for(const Case& c) const {
        return c.kind == Path::kNewFlowAllCpus || c.kind == Path::kEstablishedManyAllCpus
                   ? cpus_
                   : std::vector<int>{cpu_};
    }
    int program_for(const Case& c, bool floor) {
        if (floor) return harness_.floor_fd();
        if (c.without_capture_check) return no_capture_->prog_fd();
        if (c.without_flow_cache)
            return (c.population ? no_flow_cache_many_ : no_flow_cache_main_)->prog_fd();
        return balancer_for(c).lb().prog_fd();
    }
    // The counter a CPU's run of `repeat` repetitions ends on, from `before`.
    static std::uint32_t counter_after(const Case& c, std::uint32_t before, std::uint32_t repeat) {
        if (!c.vary_offset) return before;
        if (!c.population) return before + repeat;
        const std::int64_t pos = static_cast<std::int64_t>(before) - kManyFirstValue;
        return kManyFirstValue + static_cast<std::uint32_t>((pos + repeat) % c.population);
    }

    // Floor, case, floor; the case's net figure is relative to the mean of
    // the two floors around it.
    void measure_pair(Case& c, std::uint32_t repeat, bool record) {
        if (fills_shared_table(c.kind))
            make_room(repeat * static_cast<std::uint32_t>(cpus_for(c).size()));
        if (c.kind == Path::kEstablished) warm_established(true);
        const std::uint64_t entries =
            c.kind == Path::kNewFlowFull ? full_->conntrack_count() : ct_inserted_;
        const double floor_before = measure(c, repeat, true);
        const double ns = measure(c, repeat, false);
        const double floor_after = measure(c, repeat, true);
        if (!record) return;
        const double floor = (floor_before + floor_after) / 2;
        c.ns.push_back(ns);
        c.floor_ns.push_back(floor);
        c.net_ns.push_back(ns - floor);
        if (inserts_every_run(c.kind)) c.table_entries.push_back(entries);
        floors_.push_back(floor_before);
        floors_.push_back(floor_after);
    }

    // new_flow_v4 inserts `inserts` entries per sample and must find the
    // table not full: empty it when the next sample would not fit.
    void make_room(std::uint32_t inserts) {
        const std::uint64_t slack = kLruSlack + kLruSlackPerCpu * bpf::possible_cpu_count();
        if (ct_inserted_ + inserts + slack <= opt_.conntrack_entries) return;
        balancer_.clear_conntrack();
        ct_inserted_ = 0;
        ct_clears_ += 1;
        warm_established();
    }

    // Runs the wrapper on every CPU of `cpus` at once, one thread each,
    // started together.
    std::vector<bpf::TestRunResult> run_on(const std::vector<int>& cpus, const Case& c,
                                           std::uint32_t repeat) {
        if (cpus.size() == 1) return {must(harness_.run(c.frame, repeat))};
        std::vector<bpf::TestRunResult> results(cpus.size());
        std::vector<std::string> errors(cpus.size());
        std::latch start(static_cast<std::ptrdiff_t>(cpus.size()));
        std::vector<std::thread> threads;
        for (std::size_t i = 0; i < cpus.size(); ++i) {
            threads.emplace_back([&, i] {
                try {
                    pin_thread_to_cpu(cpus[i]);
                    start.arrive_and_wait();
                    results[i] = must(harness_.run(c.frame, repeat));
                } catch (const std::exception& e) {
                    errors[i] = e.what();
                }
            });
        }
        for (std::thread& t : threads) t.join();
        for (std::size_t i = 0; i < cpus.size(); ++i)
            if (!errors[i].empty()) throw Failure(fmt::format("CPU {}: {}", cpus[i], errors[i]));
        return results;
    }

    double measure(const Case& c, std::uint32_t repeat, bool floor) {
        Balancer& balancer = balancer_for(c);
        if (c.kind == Path::kCookieAck)
            c.frame =
                balancer.cookie_ack(bench_frame(c.flow, test::kTcpSyn, kLinuxSynOptions), c.flow);
        if (!floor) {
            const bool spent = c.kind == Path::kNewFlowOverBudget || c.kind == Path::kCookieAck;
            const bool gue = c.kind == Path::kSynCookie || c.kind == Path::kCookieAck;
            balancer.use_config(spent ? kSpentBudget : kAmpleBudget, c.kind == Path::kSecondChance,
                                gue);
            if (spent) balancer.empty_buckets();
        }
        must(harness_.set_target(program_for(c, floor)));
        harness_.set_template(c.frame, c.vary_offset, csum_offset_for(c.vary_offset));
        Sample s;
        s.repeat = repeat;
        s.cpus = cpus_for(c);
        // A population of flows: each CPU goes on where it left off in the
        // cycle; its own new-flow counter is put back afterwards.
        std::vector<std::uint32_t> saved;
        if (c.population) {
            harness_.set_vary_cycle(kManyFirstValue, c.population);
            for (int cpu : s.cpus) {
                saved.push_back(harness_.vary_counter(cpu));
                harness_.set_vary_counter(cpu, many_position_.at({c.vip_id, cpu}));
            }
        }
        s.before = balancer.counters();
        for (int cpu : s.cpus) s.counters_before.push_back(harness_.vary_counter(cpu));
        const std::uint64_t start_ns = bpf::monotonic_coarse_ns();
        s.results = run_on(s.cpus, c, repeat);
        s.wall_ns = bpf::monotonic_coarse_ns() - start_ns;
        for (int cpu : s.cpus) s.counters_after.push_back(harness_.vary_counter(cpu));
        if (c.population) {
            for (std::size_t i = 0; i < s.cpus.size(); ++i) {
                many_position_[{c.vip_id, s.cpus[i]}] = s.counters_after[i];
                harness_.set_vary_counter(s.cpus[i], saved[i]);
            }
            harness_.set_vary_cycle(0, 0);
        }
        s.after = balancer.counters();
        const std::size_t mine = static_cast<std::size_t>(
            std::find(s.cpus.begin(), s.cpus.end(), cpu_) - s.cpus.begin());
        if (mine >= s.cpus.size()) throw Failure("the pinned CPU did not run the case");
        s.result = s.results[mine];
        s.counter_before = s.counters_before[mine];
        s.counter_after = s.counters_after[mine];
        if (floor)
            check_floor(c, s);
        else
            check_case(c, s);
        if (!floor && fills_shared_table(c.kind)) ct_inserted_ += s.runs();
        double total = 0;
        for (const bpf::TestRunResult& r : s.results) total += r.duration_ns;
        return total / static_cast<double>(s.results.size());
    }

    void check_floor(const Case& c, const Sample& s) {
        Checker check(s, "floor for " + c.name);
        check.expect_action(XDP_TX);
        check.expect_outcomes(std::nullopt);
        check.expect_vip(std::nullopt, 0, 0);
        for (std::size_t i = 0; i < s.cpus.size(); ++i)
            check.expect_eq(s.counters_after[i], counter_after(c, s.counters_before[i], s.repeat),
                            fmt::format("the rewritten field's last value on CPU {}", s.cpus[i]));
        Bytes expected = frame_of_run(c, s.counter_after);
        std::swap_ranges(expected.begin(), expected.begin() + 6, expected.begin() + 6);
        check.expect_frame(expected);
        check.finish();
    }

    // Every repetition on every CPU inserted its flow: the last flow of each
    // CPU is in `balancer`'s table with the ring's backend. (The first may
    // have been replaced since: a later flow of the sample landed in its
    // full set.)
    void expect_recorded(Checker& check, const Case& c, const Sample& s, const Balancer& balancer) {
        for (std::size_t i = 0; i < s.cpus.size(); ++i) {
            for (std::uint32_t counter : {s.counters_after[i]}) {
                const xlb_flow_key key = key_of_run(c, counter);
                auto entry = balancer.conntrack_entry(key);
                check.expect(entry.has_value(),
                             fmt::format("flow #{} of CPU {} has no connection-table entry",
                                         counter, s.cpus[i]));
                if (entry)
                    check.expect_eq(entry->backend_id,
                                    balancer.ring_choice(c.vip_id, key, c.vip_flags),
                                    fmt::format("flow #{}'s backend", counter));
            }
        }
    }

    void check_case(const Case& c, const Sample& s) {
        Checker check(s, c.name);
        const std::uint64_t n = s.runs();
        for (std::size_t i = 0; i < s.cpus.size(); ++i)
            check.expect_eq(s.counters_after[i], counter_after(c, s.counters_before[i], s.repeat),
                            fmt::format("the rewritten field's last value on CPU {}", s.cpus[i]));
        for (const bpf::TestRunResult& r : s.results)
            check.expect_eq(r.action, s.result.action, "XDP action on every CPU");
        const Balancer& balancer = balancer_for(c);
        const xlb_flow_key last_key = key_of_run(c, s.counter_after);
        const Bytes last_frame = frame_of_run(c, s.counter_after);
        const std::uint32_t ring_backend = balancer.ring_choice(c.vip_id, last_key, c.vip_flags);
        switch (c.kind) {
            case Path::kEstablished: {
                check.expect_action(XDP_TX);
                check.expect_outcomes(XLB_OUT_TX);
                check.expect_vip(c.vip_id, 0, n);
                check.expect_inserts(0, 0);
                auto entry = balancer.conntrack_entry(last_key);
                check.expect(entry.has_value(), "the flow's connection-table entry is gone");
                if (entry) {
                    check.expect_eq(entry->backend_id, ring_backend, "connection-table backend");
                    check.expect_encapsulated(last_frame,
                                              balancer.backend_address(entry->backend_id), true);
                    // The hits keep the entry's age fresh: last_seen is at most
                    // one refresh interval old (plus the time since the run).
                    const std::uint32_t idle = bpf::ct_clock_now() - entry->last_seen;
                    check.expect(idle <= XLB_CT_REFRESH_UNITS + kRefreshMargin,
                                 fmt::format("last_seen is {} units old after the run", idle));
                    // ... and it names the flow's VIP (its slot is keyed by it).
                    check.expect_eq(entry->vip_id, c.vip_id, "the entry's VIP");
                }
                break;
            }
            case Path::kEstablishedMany:
            case Path::kEstablishedManyAllCpus: {
                check.expect_action(XDP_TX);
                check.expect_outcomes(XLB_OUT_TX);
                // A flow that lost its entry comes back as a new one: a
                // ring lookup and an insert, no hit.
                const std::uint64_t inserts = s.after.ct_inserts - s.before.ct_inserts;
                check.expect_inserts(inserts, 0);
                check.expect_vip(c.vip_id, inserts, n - inserts);
                const ManyTable& table = many_tables_.at(c.vip_id);
                // Cycles begun by any CPU, a partial one at each end.
                const std::uint64_t cycles = n / c.population + 1 + s.cpus.size();
                check.expect(inserts <= table.churn * cycles,
                             fmt::format("{} inserts, more than the {} flows per cycle that "
                                         "lose their entry",
                                         inserts, table.churn));
                for (std::size_t i = 0; i < s.cpus.size(); ++i) {
                    const xlb_flow_key key = key_of_run(c, s.counters_after[i]);
                    auto entry = balancer.conntrack_entry(key);
                    const std::uint32_t want = balancer.ring_choice(c.vip_id, key, c.vip_flags);
                    check.expect(entry.has_value(),
                                 fmt::format("flow #{} of CPU {} has no connection-table entry",
                                             s.counters_after[i], s.cpus[i]));
                    if (entry)
                        check.expect_eq(entry->backend_id, want,
                                        fmt::format("flow #{}'s backend", s.counters_after[i]));
                }
                // The varied source leaves the inner TCP checksum stale (the
                // wrapper keeps only the IPv4 header's): the inner packet is
                // compared byte for byte instead.
                check.expect_encapsulated(last_frame, balancer.backend_address(ring_backend),
                                          false);
                break;
            }
            case Path::kSyn: {
                check.expect_action(XDP_TX);
                check.expect_outcomes(XLB_OUT_TX);
                check.expect_vip(c.vip_id, n, 0);
                check.expect_inserts(0, 0);
                check.expect_encapsulated(last_frame, balancer.backend_address(ring_backend), true);
                check.expect(!balancer.conntrack_entry(last_key).has_value(),
                             "a SYN left a connection-table entry");
                break;
            }
            case Path::kNewFlow:
            case Path::kNewFlowAllCpus: {
                check.expect_action(XDP_TX);
                check.expect_outcomes(XLB_OUT_TX);
                check.expect_vip(c.vip_id, n, 0);
                check.expect_inserts(n, 0);
                check.expect_encapsulated(last_frame, balancer.backend_address(ring_backend),
                                          false);
                // None was evicted (the table is not full).
                expect_recorded(check, c, s, balancer);
                break;
            }
            case Path::kNewFlowFull: {
                check.expect_action(XDP_TX);
                check.expect_outcomes(XLB_OUT_TX);
                check.expect_vip(c.vip_id, n, 0);
                check.expect_inserts(n, 0);
                check.expect_encapsulated(last_frame, balancer.backend_address(ring_backend),
                                          false);
                // The sample's flows are the newest: inserts replaced older ones.
                expect_recorded(check, c, s, balancer);
                // And the table stayed full: every insert evicted one.
                const std::uint64_t count = full_->conntrack_count();
                check.expect(
                    count <= full_entries_ + kLruSlack + n / 100,
                    fmt::format("the full table grew from {} to {} entries", full_entries_, count));
                check.expect(count + kLruSlack + n / 100 >= full_entries_,
                             fmt::format("the full table shrank from {} to {} entries",
                                         full_entries_, count));
                break;
            }
            case Path::kSecondChance: {
                check.expect_action(XDP_TX);
                check.expect_outcomes(XLB_OUT_TX);
                check.expect_vip(c.vip_id, n, 0);
                check.expect_inserts(n, 0);
                check.expect_eq(s.after.hints[c.vip_id] - s.before.hints[c.vip_id], n,
                                "second-chance hints grew by");
                const std::uint32_t previous = balancer.previous_choice(last_key);
                check.expect_hinted(last_frame, balancer.backend_address(ring_backend),
                                    balancer.backend_address(previous));
                expect_recorded(check, c, s, balancer);
                auto entry = balancer.conntrack_entry(last_key);
                if (entry)
                    check.expect_eq(entry->second_chance, previous + 1,
                                    "the entry's second-chance hint");
                break;
            }
            case Path::kNewFlowOverBudget: {
                check.expect_action(XDP_TX);
                check.expect_outcomes(XLB_OUT_TX);
                check.expect_vip(c.vip_id, n, 0);
                check.expect_encapsulated(last_frame, balancer.backend_address(ring_backend),
                                          false);
                // The bucket gains one entry per second of the run: all but
                // those were skipped, the first flow certainly.
                const std::uint64_t inserts = s.after.ct_inserts - s.before.ct_inserts;
                const std::uint64_t skipped = s.after.ct_skipped - s.before.ct_skipped;
                const std::uint64_t seconds = s.wall_ns / 1'000'000'000ULL + 1;
                check.expect_eq(inserts + skipped, n, "inserts + skipped inserts");
                check.expect(inserts <= seconds * kSpentBudget.rate,
                             fmt::format("{} inserts in {} s", inserts, seconds));
                check.expect(!balancer.conntrack_entry(key_of_run(c, s.counter_before + 1)),
                             "the sample's first flow was recorded over budget");
                break;
            }
            case Path::kNoConntrack: {
                check.expect_action(XDP_TX);
                check.expect_outcomes(XLB_OUT_TX);
                check.expect_vip(c.vip_id, n, 0);
                check.expect_inserts(0, 0);
                check.expect_encapsulated(last_frame, balancer.backend_address(ring_backend), true);
                check.expect(!balancer.conntrack_entry(last_key).has_value(),
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
            case Path::kSynCookie: {
                check.expect_action(XDP_TX);
                check.expect_outcomes(XLB_OUT_TX_SYN_COOKIE);
                check.expect_vip(c.vip_id, 0, 0);
                check.expect_inserts(0, 0);
                check.expect_eq(s.after.cookies.cookies_sent - s.before.cookies.cookies_sent, n,
                                "cookies sent grew by");
                const Bytes& out = s.result.frame;
                check.expect_eq(out.size(), std::size_t{14 + 20 + 40}, "SYN-ACK frame length");
                if (out.size() == 14 + 20 + 40) {
                    check.expect_eq(out[14 + 20 + 13], std::uint8_t{0x12}, "SYN-ACK flags");
                    check.expect(std::equal(test::kVipV4.bytes.begin(),
                                            test::kVipV4.bytes.begin() + 4, out.begin() + 26),
                                 "the SYN-ACK is not from the VIP");
                    check.expect(test::checksum_errors(out).empty(),
                                 "SYN-ACK checksums: " + test::checksum_errors(out));
                }
                check.expect(!balancer.conntrack_entry(last_key).has_value(),
                             "an answered SYN left a connection-table entry");
                break;
            }
            case Path::kCookieAck: {
                check.expect_action(XDP_TX);
                check.expect_outcomes(XLB_OUT_TX);
                check.expect_vip(c.vip_id, n, 0);
                check.expect_eq(s.after.cookies.acks_valid - s.before.cookies.acks_valid, n,
                                "valid cookie ACKs grew by");
                check.expect_eq(s.after.cookies.acks_invalid - s.before.cookies.acks_invalid,
                                std::uint64_t{0}, "invalid cookie ACKs grew by");
                const Bytes& out = s.result.frame;
                const std::size_t gue = 14 + 20 + 8;
                check.expect_eq(out.size(),
                                std::size_t{kFrameLen + 20 + XLB_GUE_OVERHEAD + XLB_GUE_COOKIE_LEN},
                                "cookie ACK frame length");
                if (out.size() > gue + 4 + XLB_GUE_COOKIE_LEN) {
                    check.expect_eq(out[gue], std::uint8_t{XLB_GUE_COOKIE_LEN / 4}, "GUE Hlen");
                    check.expect_eq(out[gue + 4], std::uint8_t{XLB_GUE_COOKIE_MAGIC},
                                    "cookie data magic");
                    const IpAddress& backend = balancer.backend_address(ring_backend);
                    check.expect(std::equal(backend.bytes.begin(), backend.bytes.begin() + 4,
                                            out.begin() + 30),
                                 "the cookie ACK is not sent to the ring's backend");
                }
                check.expect(!balancer.conntrack_entry(last_key).has_value(),
                             "the spent budget let the cookie ACK record its flow");
                break;
            }
            case Path::kQuicCid: {
                check.expect_action(XDP_TX);
                check.expect_outcomes(XLB_OUT_TX_QUIC_CID);
                check.expect_vip(c.vip_id, 0, 0);
                check.expect_inserts(0, 0);
                check.expect_eq(s.after.quic.routed - s.before.quic.routed, n,
                                "packets routed by CID grew by");
                check.expect_encapsulated(last_frame, balancer.backend_address(kQuicBackend), true);
                break;
            }
            case Path::kQuicNewSealed: {
                check.expect_action(XDP_TX);
                check.expect_outcomes(XLB_OUT_TX);
                check.expect_vip(c.vip_id, n, 0);
                check.expect_inserts(0, 0);
                check.expect_eq(s.after.quic.fallbacks[XLB_QUIC_FB_UNKNOWN_SERVER] -
                                    s.before.quic.fallbacks[XLB_QUIC_FB_UNKNOWN_SERVER],
                                n, "unknown_server fallbacks grew by");
                check.expect_encapsulated(last_frame, balancer.backend_address(ring_backend),
                                          false);
                break;
            }
            case Path::kQuicFallback: {
                check.expect_action(XDP_TX);
                check.expect_outcomes(XLB_OUT_TX);
                check.expect_vip(c.vip_id, n, 0);
                check.expect_inserts(0, 0);
                check.expect_eq(s.after.quic.fallbacks[XLB_QUIC_FB_CLIENT_CID] -
                                    s.before.quic.fallbacks[XLB_QUIC_FB_CLIENT_CID],
                                n, "client_cid fallbacks grew by");
                check.expect_encapsulated(last_frame, balancer.backend_address(ring_backend), true);
                break;
            }
            case Path::kSourceDenied: {
                check.expect_action(XDP_DROP);
                check.expect_outcomes(XLB_OUT_DROP_SOURCE_DENIED);
                check.expect_eq(s.after.denied - s.before.denied, n, "source_denied drops grew by");
                check.expect_inserts(0, 0);
                break;
            }
        }
        check.finish();
    }

    Options opt_;
    Balancer balancer_;
    std::optional<Balancer> full_;               // new_flow_full_v4's table, kept full
    std::optional<Balancer> many_v4_, many_v6_;  // the established_many cases' tables
    std::optional<ProgramCopy> no_capture_;      // the *_no_capture_check cases' program
    // The *_no_flow_cache cases' programs, on balancer_'s maps and many_v4_'s.
    std::optional<ProgramCopy> no_flow_cache_main_, no_flow_cache_many_;
    std::map<std::pair<std::uint32_t, int>, std::uint32_t> many_position_;  // {VIP, CPU}
    std::map<std::uint32_t, ManyTable> many_tables_;                        // by VIP
    Fill fill_;                                                             // measure_fill
    Harness harness_;
    std::vector<Case> cases_;
    int cpu_;
    std::vector<int> cpus_;
    std::vector<double> floors_;
    std::uint64_t ct_inserted_ = 0;
    std::uint64_t ct_clears_ = 0;
    std::uint64_t ct_rewarmed_ = 0;  // established flows put back (warm_established)
    std::uint64_t full_entries_ = 0;
};

// ---------------------------------------------------------------------------
// Environment and reporting.

std::string ns_text(double ns) { return fmt::format("{:.1f}", ns); }

double min_of(const std::vector<double>& v) { return *std::min_element(v.begin(), v.end()); }
double max_of(const std::vector<double>& v) { return *std::max_element(v.begin(), v.end()); }

// A case's target in ns: its own, or target_factor times the net median of
// the case it is relative to (when that case ran).
std::optional<double> target_of(const Case& c, const std::vector<Case>& all) {
    if (c.target_net_ns) return c.target_net_ns;
    if (c.target_relative_to.empty()) return std::nullopt;
    for (const Case& other : all)
        if (other.name == c.target_relative_to && !other.net_ns.empty())
            return c.target_factor * median(other.net_ns);
    return std::nullopt;
}

std::string target_text(const Case& c, const std::vector<Case>& all) {
    const std::optional<double> target = target_of(c, all);
    if (!c.target_relative_to.empty())
        return target ? fmt::format("<= {:.0f} ({}x)", *target, c.target_factor)
                      : fmt::format("{}x {}", c.target_factor, c.target_relative_to);
    return target ? fmt::format("<= {:.0f}", *target) : "-";
}

// What the capture flag costs while no capture runs: a case's net median
// minus that of the same case through the program without the check.
struct CaptureIdle {
    std::string with_check, without_check;
    double ns = 0;
};
std::vector<CaptureIdle> capture_idle(const std::vector<Case>& cases) {
    std::vector<CaptureIdle> out;
    for (const Case& base : cases) {
        if (!base.without_capture_check) continue;
        const std::string name =
            base.name.substr(0, base.name.size() - std::strlen("_no_capture_check"));
        auto with =
            std::find_if(cases.begin(), cases.end(), [&](const Case& c) { return c.name == name; });
        if (with == cases.end() || with->net_ns.empty() || base.net_ns.empty()) continue;
        out.push_back({name, base.name, median(with->net_ns) - median(base.net_ns)});
    }
    return out;
}

void print_table(const Options& opt, const Bench& bench, int cpu) {
    const auto& floors = bench.floors();
    fmt::print("\nxlb-bench-xdp: {} samples x {} repetitions per case, pinned to CPU {}\n",
               opt.samples, opt.repeat, cpu);
    fmt::print("kernel {}, {}\n", kernel_release(), cpu_model());
    fmt::print("Maglev M = {}, {} backends per family; connection table {} entries\n",
               bench.ring_size(), kBackendsPerFamily, opt.conntrack_entries);
    if (bench.full_table_entries() > 0)
        fmt::print("new_flow_full_v4's table: full at {} entries (every insert evicts)\n",
                   bench.full_table_entries());
    fmt::print("new_flow_v4_all_cpus ran on CPUs {}\n", fmt::join(bench.cpus(), ","));
    fmt::print(
        "floor (wrapper + xlb_bench_floor): median {} ns, min {}, max {} over {} samples\n\n",
        ns_text(median(floors)), ns_text(min_of(floors)), ns_text(max_of(floors)), floors.size());

    constexpr auto kRow = "{:<34} {:>7} {:>7} {:>7} {:>7} {:>8} {:>8} {:>14}  {}\n";
    const std::string header = fmt::format(kRow, "case", "min", "median", "max", "floor", "net med",
                                           "net min", "target", "result");
    fmt::print("{}{}\n", header, std::string(header.size() - 1, '-'));
    for (const Case& c : bench.cases()) {
        const double net = median(c.net_ns);
        const std::optional<double> goal = target_of(c, bench.cases());
        std::string target = target_text(c, bench.cases());
        std::string result = !goal ? "-" : net <= *goal ? "met" : "MISSED";
        fmt::print(kRow, c.name, ns_text(min_of(c.ns)), ns_text(median(c.ns)),
                   ns_text(max_of(c.ns)), ns_text(median(c.floor_ns)), ns_text(net),
                   ns_text(min_of(c.net_ns)), target, result);
    }
    fmt::print("\n");
    for (const CaptureIdle& idle : capture_idle(bench.cases()))
        fmt::print("idle capture flag on {}: {:+.1f} ns net (median vs {}), target <= {} ns: {}\n",
                   idle.with_check, idle.ns, idle.without_check, kCaptureIdleTargetNs,
                   idle.ns <= kCaptureIdleTargetNs ? "met" : "MISSED");
    fmt::print("\n");
    for (const auto& [vip, table] : bench.many_tables())
        fmt::print(
            "established_many ({}): {} of {} flows held in a {}-entry table, {} "
            "inserted again per cycle\n",
            vip == kVipTcp6 ? "IPv6" : "IPv4", table.flows_held, kManyFlows, kManyTableEntries,
            table.churn);
    if (bench.fill().flows > 0)
        fmt::print(
            "occupancy: {} live IPv4 flows in a {}-entry table (75 %): {} held, {} lost "
            "per cycle ({:.3f} %)\n",
            bench.fill().flows, bench.fill().capacity, bench.fill().held, bench.fill().lost,
            100.0 * static_cast<double>(bench.fill().lost) / bench.fill().flows);
    std::vector<std::string> cached, uncached;
    for (const Case& c : bench.cases()) {
        if (c.kind != Path::kEstablished && c.population == 0) continue;
        (cache_can_answer(c.kind) && !c.without_flow_cache ? cached : uncached).push_back(c.name);
    }
    fmt::print(
        "answered by the per-CPU flow cache: {}\nnot answerable by a cache (the common "
        "case) or run without it: {}\n",
        fmt::join(cached, ", "), fmt::join(uncached, ", "));
    fmt::print("\n");
    for (const Case& c : bench.cases()) fmt::print("  {:<34} {}\n", c.name, c.path);
    fmt::print(
        "\nns per packet: the kernel's mean over each sample's repetitions. min/median/max:\n"
        "the case (wrapper + xlb_lb); floor: median of the floor samples taken around it;\n"
        "net: case - mean of the two floors around each sample (target and result use the\n"
        "median). Every sample was checked to take its path: XDP action, output frame,\n"
        "outcome counters, per-VIP new_flows / conntrack_hits.\n");
    if (bench.conntrack_clears() > 0)
        fmt::print("The connection table was emptied {} times to stay below full.\n",
                   bench.conntrack_clears());
    // The host runs in phases (docs/architecture.md): everything slower for
    // seconds.
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
        if (inserts_every_run(c.kind)) entry["samples_table_entries"] = c.table_entries;
        if (c.kind == Path::kNewFlowAllCpus || c.kind == Path::kEstablishedManyAllCpus)
            entry["cpus"] = bench.cpus();
        if (c.kind == Path::kEstablished || c.population) {
            entry["flow_cache"] = !c.without_flow_cache;
            entry["cache_can_answer"] = cache_can_answer(c.kind);
        }
        if (c.population) {
            const auto& table = bench.many_tables().at(c.vip_id);
            entry["flows"] = c.population;
            entry["table_entries"] = kManyTableEntries;
            entry["table_flows_held"] = table.flows_held;
            entry["flows_inserted_again_per_cycle"] = table.churn;
        }
        if (!c.target_relative_to.empty()) {
            entry["target_relative_to"] = c.target_relative_to;
            entry["target_factor"] = c.target_factor;
        }
        if (const std::optional<double> goal = target_of(c, bench.cases())) {
            entry["target_net_ns"] = *goal;
            entry["target_met"] = net <= *goal;
        } else {
            entry["target_net_ns"] = nullptr;
            entry["target_met"] = nullptr;
        }
        cases.push_back(std::move(entry));
    }
    json idle = json::array();
    for (const CaptureIdle& i : capture_idle(bench.cases()))
        idle.push_back({{"case", i.with_check},
                        {"baseline", i.without_check},
                        {"ns", i.ns},
                        {"target_ns", kCaptureIdleTargetNs},
                        {"target_met", i.ns <= kCaptureIdleTargetNs}});
    json doc = {
        {"floor_ns", median(bench.floors())},
        {"cases", std::move(cases)},
        {"capture_idle", std::move(idle)},
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
        {"full_table_entries", bench.full_table_entries()},
        {"conntrack_layout", bench.conntrack_layout()},
        {"fill_75", bench.fill().flows == 0
                        ? nlohmann::ordered_json(nullptr)
                        : nlohmann::ordered_json{{"flows", bench.fill().flows},
                                                 {"capacity", bench.fill().capacity},
                                                 {"held", bench.fill().held},
                                                 {"lost_per_cycle", bench.fill().lost}}},
        {"established_rewarmed", bench.established_rewarmed()},
    };

    if (auto ok = xlb::files::write_file_atomic(opt.out, doc.dump(2) + "\n"); !ok)
        throw Failure(ok.error().message());
    fmt::print("JSON: {}\n", opt.out);
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

    std::vector<int> cpus = allowed_cpus();
    const int cpu = pin_to_cpu(opt.cpu);
    // Best effort: fewer preemptions by other work on this CPU.
    (void)setpriority(PRIO_PROCESS, 0, -10);

    Bench bench(opt, std::move(cases), cpu, std::move(cpus));
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
