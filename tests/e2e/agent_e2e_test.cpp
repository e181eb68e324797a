// SPDX-License-Identifier: Apache-2.0
// xlbd end to end: the real agent, started as a process in a network
// namespace with a veth pair, real BPF maps pinned under /sys/fs/bpf, driven
// through its Unix-socket API, its metrics port, signals and its config file.
// What the agent publishes is read back from the pinned maps and compared,
// slot by slot, with tables computed here with the Maglev library.
//
// Needs root (namespaces, XDP, bpffs). Each test builds and removes its own
// lab (lab.h).
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <linux/bpf.h>
#include <linux/magic.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/statfs.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <functional>
#include <future>
#include <map>
#include <sstream>

#include "lab.h"
#include "packet.h"
#include "testbed.h"
#include "xlb/abi.h"
#include "xlb/bpf/conntrack_table.h"
#include "xlb/bpf/maps.h"
#include "xlb/bpf/programs.h"
#include "xlb/bpf/ring.h"
#include "xlb/bpf/test_run.h"
#include "xlb/bpf/xdp.h"
#include "xlb/datapath/setup.h"
#include "xlb/flow_hash.h"
#include "xlb/maglev/maglev.h"
#include "xlb/net/address.h"

namespace xlb::e2e {
namespace {

namespace fs = std::filesystem;

// The map sizes of every test config: small, and what the swap test's
// second program instance must ask for to share the agent's maps.
constexpr bpf::LbMapSizes kSizes{64, 256, 8192};
constexpr std::uint32_t kHashSeed = 0x5eed1234;
constexpr int kMetricsPort = 9464;
constexpr auto kReadyTimeout = 15s;

// ---- the configuration the tests write, and what it must give ----------------------

struct BackendConf {
    std::string address;
    std::uint32_t weight = 100;
    std::string hash_key;

    std::string identity() const {
        return datapath::maglev_identity(*net::IpAddress::parse(address), hash_key);
    }
};

struct VipConf {
    std::string address;
    std::uint16_t port = 80;
    std::string name;
    bool conntrack = true;
    std::uint32_t ring_size = maglev::kDefaultRingSize;
    std::vector<BackendConf> backends;

    bool v6() const { return address.find(':') != std::string::npos; }
    std::string key() const {
        return (v6() ? "[" + address + "]" : address) + ":" + std::to_string(port) + "/tcp";
    }
    BackendConf& backend(const std::string& addr) {
        for (auto& b : backends)
            if (b.address == addr) return b;
        throw std::runtime_error("no backend " + addr);
    }
    const BackendConf& backend(const std::string& addr) const {
        return const_cast<VipConf*>(this)->backend(addr);
    }
};

std::string yaml_of(const VipConf& v) {
    std::ostringstream y;
    y << "  - address: \"" << v.address << "\"\n"
      << "    port: " << v.port << "\n"
      << "    protocol: tcp\n"
      << "    name: " << v.name << "\n"
      << "    conntrack: " << (v.conntrack ? "true" : "false") << "\n"
      << "    ring_size: " << v.ring_size << "\n"
      << "    backends:\n";
    for (const auto& b : v.backends) {
        y << "      - {address: \"" << b.address << "\", weight: " << b.weight;
        if (!b.hash_key.empty()) y << ", hash_key: " << b.hash_key;
        y << "}\n";
    }
    return y.str();
}

std::string render_config(const Lab& lab, const std::vector<VipConf>& vips) {
    std::ostringstream y;
    y << render_settings(
        lab, "xlb_agent_e2e_tests",
        {kHashSeed, kSizes.max_vips, kSizes.max_backends, kSizes.conntrack_entries, kMetricsPort});
    for (const auto& v : vips) y << yaml_of(v);
    return y.str();
}

// One IPv4 VIP with IPv4 backends, one IPv6 VIP with IPv6 backends.
VipConf web4() {
    return {"198.51.100.10",
            80,
            "web4",
            true,
            maglev::kDefaultRingSize,
            {{"203.0.113.11", 100, ""}, {"203.0.113.12", 200, ""}, {"203.0.113.13", 50, ""}}};
}
VipConf web6() {
    return {"2001:db8:f::10",
            443,
            "web6",
            true,
            maglev::kDefaultRingSize,
            {{"2001:db8:b::11", 100, ""},
             {"2001:db8:b::12", 300, ""},
             {"2001:db8:b::13", 100, "six-3"}}};
}

// map.at(key) with an error that names the key.
template <typename M>
const typename M::mapped_type& at(const M& map, const typename M::key_type& key) {
    auto it = map.find(key);
    if (it == map.end()) {
        std::ostringstream msg;
        msg << "no " << key << " among:";
        for (const auto& [k, v] : map) msg << " " << k;
        throw std::runtime_error(msg.str());
    }
    return it->second;
}

struct ExpectedTable {
    std::vector<std::uint32_t> ring;  // backend id per slot
    std::uint64_t checksum = 0;
    std::map<std::string, std::uint32_t> slots;  // per backend address
};

// What the reconciler must publish for v: every backend without a health
// check is healthy, so its effective weight is weight x 100; identity is the
// hash key or the address text; ids come from the agent (GET /v1/backends).
ExpectedTable expected_table(const VipConf& v, const std::map<std::string, std::uint32_t>& ids) {
    std::vector<maglev::Backend> members;
    std::vector<std::string> addresses;
    for (const auto& b : v.backends) {
        if (b.weight == 0) continue;
        members.push_back({b.identity(), b.weight * 100});
        addresses.push_back(b.address);
    }
    auto table = maglev::build_table(members, {v.ring_size});
    if (!table) throw std::runtime_error("maglev: " + table.error().message);
    ExpectedTable out;
    out.checksum = table->checksum;
    out.ring.reserve(table->table.size());
    for (std::uint32_t index : table->table) out.ring.push_back(at(ids, addresses.at(index)));
    for (std::size_t i = 0; i < addresses.size(); ++i)
        out.slots[addresses[i]] = table->slots_per_backend[i];
    return out;
}

std::string hex16(std::uint64_t v) {
    char buf[17];
    std::snprintf(buf, sizeof(buf), "%016llx", static_cast<unsigned long long>(v));
    return buf;
}

std::string canonical(const std::string& address) {
    return net::IpAddress::parse(address)->to_string();
}

// Prometheus text: "name{labels}" -> value.
std::map<std::string, double> parse_metrics(const std::string& text) {
    std::map<std::string, double> out;
    std::istringstream in(text);
    std::string line;
    while (std::getline(in, line)) {
        if (line.empty() || line[0] == '#') continue;
        const auto space = line.rfind(' ');
        if (space == std::string::npos) continue;
        out[line.substr(0, space)] = std::stod(line.substr(space + 1));
    }
    return out;
}

// ---- the fixture -----------------------------------------------------------------

class AgentE2E : public ::testing::Test {
protected:
    void SetUp() override {
        if (::geteuid() != 0) GTEST_SKIP() << "needs root: network namespaces, XDP, bpffs";
        const auto t0 = Clock::now();
        lab_ = new_lab_up();
        config_path_ = lab_->tmp() + "/xlbd.yaml";
        api_ = std::make_unique<Api>(lab_->tmp() + "/run/xlbd.sock");
        MEASURED("lab %s up in %.0f ms", lab_->prefix().c_str(), ms_since(t0));
    }

    void TearDown() override {
        const auto t0 = Clock::now();
        if (agent_) {
            if (HasFailure()) print_log();
            agent_.reset();  // SIGKILL
        }
        const bool had_lab = lab_ != nullptr;
        lab_.reset();  // namespaces, XDP, pins, temporary files
        if (had_lab) MEASURED("teardown in %.0f ms", ms_since(t0));
    }

    void print_log() {
        const std::string log = agent_->log();
        std::vector<std::string> lines;
        std::istringstream in(log);
        for (std::string l; std::getline(in, l);) lines.push_back(l);
        std::printf("----- xlbd log (%s, %zu lines) -----\n", agent_->log_path().c_str(),
                    lines.size());
        const std::size_t head = 80, tail = 250;
        for (std::size_t i = 0; i < lines.size(); ++i) {
            if (lines.size() > head + tail && i == head)
                std::printf("  ... %zu lines left out ...\n", lines.size() - head - tail);
            if (lines.size() > head + tail && i >= head && i < lines.size() - tail) continue;
            std::printf("  %s\n", lines[i].c_str());
        }
        std::printf("----- end of xlbd log -----\n");
    }

    void write_config(const std::vector<VipConf>& vips) {
        vips_ = vips;
        write_file(config_path_, render_config(*lab_, vips));
    }

    // Starts xlbd (again) and waits until /v1/status says ready; returns ms.
    double start_agent() {
        if (!agent_)
            agent_ = std::make_unique<AgentProcess>(*lab_, config_path_, lab_->tmp() + "/xlbd.log");
        const auto t0 = Clock::now();
        agent_->start();
        wait_ready();
        return ms_since(t0);
    }

    void wait_ready() { wait_agent_ready(*agent_, *api_, kReadyTimeout); }

    json status() {
        Reply r = api_->get("/v1/status");
        if (r.status != 200)
            throw std::runtime_error("/v1/status: " + std::to_string(r.status) + " " + r.text);
        return r.body;
    }
    // VIP summaries by key.
    std::map<std::string, json> vip_summaries() {
        std::map<std::string, json> out;
        for (const json st = status(); const json& v : st["vips"])
            out[v["vip"].get<std::string>()] = v;
        return out;
    }
    json backends(const std::string& key) {
        Reply r = api_->get("/v1/backends?vip=" + url_encode(key));
        if (r.status != 200) throw std::runtime_error("/v1/backends " + key + ": " + r.text);
        return r.body;
    }
    std::map<std::string, std::uint32_t> backend_ids(const std::string& key) {
        std::map<std::string, std::uint32_t> ids;
        for (const json bs = backends(key); const json& b : bs["backends"])
            if (!b["id"].is_null())
                ids[b["address"].get<std::string>()] = b["id"].get<std::uint32_t>();
        return ids;
    }
    Reply patch_weight(const VipConf& v, const std::string& address, std::uint32_t weight) {
        return api_->patch(
            "/v1/backends?vip=" + url_encode(v.key()) + "&address=" + url_encode(address),
            "{\"weight\": " + std::to_string(weight) + "}");
    }

    std::vector<std::uint32_t> pinned_ring(std::uint32_t vip_id) {
        bpf::UniqueFd rings = open_pinned(lab_->map_pin(XLB_MAP_RINGS));
        auto ring = bpf::read_ring(rings.get(), vip_id);
        if (!ring)
            throw std::runtime_error("read ring " + std::to_string(vip_id) + ": " +
                                     ring.error().message());
        return std::move(*ring);
    }

    // The VIP's ring in the pinned map equals the table computed here, slot by
    // slot, and the agent reports the same checksum.
    void expect_pinned_ring_matches(const VipConf& v) {
        SCOPED_TRACE("VIP " + v.key());
        const json s = at(vip_summaries(), v.key());
        ASSERT_FALSE(s["vip_id"].is_null());
        const ExpectedTable want = expected_table(v, backend_ids(v.key()));
        const std::vector<std::uint32_t> ring = pinned_ring(s["vip_id"].get<std::uint32_t>());
        ASSERT_EQ(ring.size(), want.ring.size()) << "ring size";
        std::size_t differ = 0, first = ring.size();
        for (std::size_t i = 0; i < ring.size(); ++i)
            if (ring[i] != want.ring[i]) {
                if (differ++ == 0) first = i;
            }
        EXPECT_EQ(differ, 0u) << "slots differ from the Maglev table, first at slot " << first
                              << ": " << (first < ring.size() ? ring[first] : 0)
                              << " != " << (first < ring.size() ? want.ring[first] : 0);
        EXPECT_EQ(s["checksum"].get<std::string>(), hex16(want.checksum));
    }

    // Kernel ids of every map pinned in PIN_DIR/xa0, by pin name.
    std::map<std::string, std::uint32_t> map_ids() {
        std::map<std::string, std::uint32_t> ids;
        for (const auto& entry : fs::directory_iterator(lab_->pin_dir() + "/" + Lab::kLbIf)) {
            bpf::UniqueFd fd = open_pinned(entry.path());
            if (read_file("/proc/self/fdinfo/" + std::to_string(fd.get())).find("map_type:") ==
                std::string::npos)
                continue;  // not a map
            ids[entry.path().filename()] = map_id(fd.get());
        }
        return ids;
    }

    // A TCP SYN from the router namespace (192.0.2.2:sport) to the VIP, through
    // the real XDP program on xa0: it is counted, encapsulated and sent back
    // out (nobody answers); a SYN is never recorded in the connection table.
    void send_syn(const VipConf& v, std::uint16_t sport) {
        in_netns(lab_->router_ns(), [&] {
            bpf::UniqueFd fd(::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
            const int one = 1;
            ::setsockopt(fd.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
            sockaddr_in from{}, to{};
            from.sin_family = to.sin_family = AF_INET;
            from.sin_port = htons(sport);
            ::inet_pton(AF_INET, Lab::kRouterAddr, &from.sin_addr);
            to.sin_port = htons(v.port);
            ::inet_pton(AF_INET, v.address.c_str(), &to.sin_addr);
            if (::bind(fd.get(), reinterpret_cast<sockaddr*>(&from), sizeof(from)) != 0)
                throw std::runtime_error("bind: " + std::string(std::strerror(errno)));
            ::connect(fd.get(), reinterpret_cast<sockaddr*>(&to), sizeof(to));  // EINPROGRESS
            std::this_thread::sleep_for(50ms);
            return 0;
        });
    }

    // The handshake's ACK after send_syn (nobody answers the SYN, so the
    // kernel never sends one): a TCP ACK from the router namespace, written
    // whole through a raw socket. The data plane records the flow from it,
    // as it never does from a SYN.
    // (src: another client address, which the raw socket lets it claim.)
    void send_ack(const VipConf& v, std::uint16_t sport, const char* src = Lab::kRouterAddr) {
        in_netns(lab_->router_ns(), [&] {
            bpf::UniqueFd fd(::socket(AF_INET, SOCK_RAW | SOCK_CLOEXEC, IPPROTO_RAW));
            if (!fd) throw std::runtime_error("raw socket: " + std::string(std::strerror(errno)));
            const test::Flow flow{*net::IpAddress::parse(src), *net::IpAddress::parse(v.address),
                                  sport, v.port, test::kProtoTcp};
            const test::Bytes packet = test::make_ip_packet(flow);  // ACK, valid checksums
            sockaddr_in to{};
            to.sin_family = AF_INET;
            ::inet_pton(AF_INET, v.address.c_str(), &to.sin_addr);
            if (::sendto(fd.get(), packet.data(), packet.size(), 0,
                         reinterpret_cast<sockaddr*>(&to), sizeof(to)) < 0)
                throw std::runtime_error("send the ACK: " + std::string(std::strerror(errno)));
            std::this_thread::sleep_for(50ms);
            return 0;
        });
    }

    std::unique_ptr<Lab> lab_;
    std::unique_ptr<Api> api_;
    std::unique_ptr<AgentProcess> agent_;
    std::string config_path_;
    std::vector<VipConf> vips_;
};

xlb_vip_key vip_map_key(const VipConf& v) {
    return datapath::vip_key(*net::IpAddress::parse(v.address), v.port, IPPROTO_TCP);
}

// ---- 1. start, publish, read the maps back --------------------------------------------

TEST_F(AgentE2E, StartPublishesMaglevTablesIntoThePinnedMaps) {
    write_config({web4(), web6()});
    const double ready_ms = start_agent();
    MEASURED("xlbd ready %.0f ms after exec (2 VIPs, ring size 65537)", ready_ms);

    const json st = status();
    EXPECT_EQ(st["interface"], Lab::kLbIf);
    EXPECT_EQ(st["xdp_mode"], "native");
    EXPECT_NE(lab_->xdp_prog_id(), 0u) << "no XDP program on xa0";

    bpf::UniqueFd vips_fd = open_pinned(lab_->map_pin(XLB_MAP_VIPS));
    bpf::UniqueFd backends_fd = open_pinned(lab_->map_pin(XLB_MAP_BACKENDS));
    bpf::HashMap<xlb_vip_key, xlb_vip_value> vip_map(vips_fd.get(), XLB_MAP_VIPS);
    bpf::ArrayMap<xlb_backend> backend_map(backends_fd.get(), XLB_MAP_BACKENDS);

    for (const VipConf& v : vips_) {
        SCOPED_TRACE(v.key());
        const json s = at(vip_summaries(), v.key());
        EXPECT_EQ(s["epoch"], 1);
        EXPECT_EQ(s["published"], true);
        expect_pinned_ring_matches(v);

        // the VIP map points the VIP at its ring
        auto entry = vip_map.get(vip_map_key(v));
        ASSERT_TRUE(entry) << entry.error().message();
        ASSERT_TRUE(entry->has_value()) << "VIP missing from " << XLB_MAP_VIPS;
        EXPECT_EQ((*entry)->vip_id, s["vip_id"].get<std::uint32_t>());
        EXPECT_EQ((*entry)->flags, 0u);

        // every backend's entry holds its address, and the API's effective
        // weight is weight x 100
        const json bs = backends(v.key());
        const ExpectedTable want = expected_table(v, backend_ids(v.key()));
        for (const json& b : bs["backends"]) {
            const std::string addr = b["address"];
            const BackendConf& conf = v.backend(addr);
            EXPECT_EQ(b["effective_weight"], conf.weight * 100) << addr;
            EXPECT_EQ(b["slots"], at(want.slots, addr)) << addr;
            auto be = backend_map.get(b["id"].get<std::uint32_t>());
            ASSERT_TRUE(be) << be.error().message();
            EXPECT_EQ(net::IpAddress::from_words(be->addr, be->family).to_string(),
                      canonical(addr));
            EXPECT_EQ(be->generation, b["generation"].get<std::uint32_t>());
            EXPECT_NE(be->generation, 0u);
        }
        std::string shares;
        for (const auto& [addr, slots] : want.slots)
            shares += " " + addr + "=" + std::to_string(slots);
        MEASURED(
            "%s: vip_id %u, epoch %d, checksum %s, ring %zu slots:%s — pinned ring equals the "
            "Maglev table",
            v.key().c_str(), s["vip_id"].get<unsigned>(), s["epoch"].get<int>(),
            s["checksum"].get<std::string>().c_str(), want.ring.size(), shares.c_str());
    }
}

// ---- 2. a weight change through the API ------------------------------------------------

TEST_F(AgentE2E, WeightChangeThroughTheApiPublishesANewEpoch) {
    write_config({web4(), web6()});
    start_agent();
    const auto before = vip_summaries();
    VipConf& v4 = vips_[0];
    const VipConf& v6 = vips_[1];

    const auto t0 = Clock::now();
    Reply r = patch_weight(v4, "203.0.113.12", 50);
    const double patch_ms = ms_since(t0);
    ASSERT_EQ(r.status, 200) << r.text;
    v4.backend("203.0.113.12").weight = 50;

    const auto after = vip_summaries();
    const json& a4 = at(after, v4.key());
    const json& b4 = at(before, v4.key());
    EXPECT_EQ(r.body["epoch"], b4["epoch"].get<int>() + 1) << "the answer carries the new epoch";
    EXPECT_EQ(a4["epoch"], b4["epoch"].get<int>() + 1);
    EXPECT_NE(a4["checksum"], b4["checksum"]);
    EXPECT_EQ(a4["published"], true);
    EXPECT_EQ(at(after, v6.key())["epoch"], at(before, v6.key())["epoch"])
        << "the other VIP keeps its epoch";
    EXPECT_EQ(at(after, v6.key())["checksum"], at(before, v6.key())["checksum"]);
    expect_pinned_ring_matches(v4);
    expect_pinned_ring_matches(v6);

    for (const json bs = backends(v4.key()); const json& b : bs["backends"])
        if (b["address"] == "203.0.113.12") {
            EXPECT_EQ(b["effective_weight"], 5000);
        }

    // persisted
    const json state = json::parse(read_file(lab_->tmp() + "/state/state.json"));
    bool found = false;
    for (const json& v : state["vips"])
        if (v["address"] == v4.address)
            for (const json& b : v["backends"])
                if (b["address"] == "203.0.113.12") found = b["weight"] == 50;
    EXPECT_TRUE(found) << "state file does not hold weight 50: " << state.dump();
    MEASURED(
        "PATCH weight 200 -> 50 answered in %.1f ms; %s epoch %d -> %d, checksum %s -> %s; %s "
        "epoch stays %d",
        patch_ms, v4.key().c_str(), b4["epoch"].get<int>(), a4["epoch"].get<int>(),
        b4["checksum"].get<std::string>().c_str(), a4["checksum"].get<std::string>().c_str(),
        v6.key().c_str(), at(after, v6.key())["epoch"].get<int>());
}

// ---- 3. restarts: SIGTERM, then kill -9 ----------------------------------------------------

TEST_F(AgentE2E, RestartKeepsPinnedMapsConnectionsTablesAndRuntimeChanges) {
    write_config({web4(), web6()});
    start_agent();
    VipConf& v4 = vips_[0];
    ASSERT_EQ(patch_weight(v4, "203.0.113.12", 50).status, 200);  // a runtime change
    v4.backend("203.0.113.12").weight = 50;

    const auto ids_before = map_ids();
    const auto summaries_before = vip_summaries();
    std::map<std::string, std::vector<std::uint32_t>> rings_before;
    for (const VipConf& v : vips_)
        rings_before[v.key()] = pinned_ring(at(summaries_before, v.key())["vip_id"]);
    const auto backend_ids_before = backend_ids(v4.key());

    // An established flow, recorded by the data plane itself from the ACK
    // after its SYN, and a second one written straight into the pinned
    // connection table (the same value under another source port).
    xlb_flow_key flow{};
    net::IpAddress::parse(Lab::kRouterAddr)->to_words(flow.src);
    net::IpAddress::parse(v4.address)->to_words(flow.dst);
    flow.sport = htons(40077);
    flow.dport = htons(v4.port);
    flow.proto = IPPROTO_TCP;
    flow.family = XLB_FAMILY_V4;
    xlb_flow_key inserted = flow;
    inserted.sport = htons(40078);
    send_syn(v4, 40077);
    send_ack(v4, 40077);
    xlb_ct_value ct{};
    {
        auto conntrack = bpf::ConntrackTable::open_pinned(lab_->map_pin(XLB_MAP_CONNTRACK)).value();
        auto recorded = conntrack.get(flow);
        ASSERT_TRUE(recorded) << recorded.error().message();
        ASSERT_TRUE(recorded->has_value()) << "the ACK from the router namespace was not recorded";
        ct = **recorded;
        auto ok = conntrack.put(inserted, ct);
        ASSERT_TRUE(ok) << ok.error().message();
    }
    auto conntrack_entries = [&] {
        auto conntrack = bpf::ConntrackTable::open_pinned(lab_->map_pin(XLB_MAP_CONNTRACK)).value();
        int same = 0;
        for (const xlb_flow_key& k : {flow, inserted}) {
            auto got = conntrack.get(k);
            if (got && got->has_value() && std::memcmp(&**got, &ct, sizeof(ct)) == 0) ++same;
        }
        return same;
    };
    ASSERT_EQ(conntrack_entries(), 2);

    struct Way {
        const char* name;
        int signal;
        int exit_code;
    };
    for (const Way way : {Way{"SIGTERM", SIGTERM, 0}, Way{"kill -9", SIGKILL, 128 + SIGKILL}}) {
        SCOPED_TRACE(way.name);
        const std::uint32_t prog_before = lab_->xdp_prog_id();
        ASSERT_NE(prog_before, 0u);
        const int epoch_before = at(vip_summaries(), v4.key())["epoch"].get<int>();

        XdpWatch watch(*lab_);
        const auto t0 = Clock::now();
        agent_->signal(way.signal);
        const auto code = agent_->wait_exit(10s);
        const double stop_ms = ms_since(t0);
        ASSERT_TRUE(code.has_value()) << "xlbd did not exit after " << way.name;
        EXPECT_EQ(*code, way.exit_code);
        EXPECT_EQ(lab_->xdp_prog_id(), prog_before)
            << "the data plane must keep forwarding while xlbd is down";
        EXPECT_FALSE(fs::exists(lab_->tmp() + "/run/xlbd.sock") && way.signal == SIGTERM)
            << "a clean exit removes the socket";

        const auto t1 = Clock::now();
        agent_->start();
        wait_ready();
        const double restart_ms = ms_since(t1);
        const XdpWatch::Report seen = watch.stop();

        EXPECT_EQ(seen.none, 0u) << "the interface had no XDP program for " << seen.none
                                 << " polls";
        EXPECT_EQ(seen.errors, 0u);
        ASSERT_FALSE(seen.ids.empty());
        EXPECT_EQ(seen.ids.front(), prog_before);
        EXPECT_EQ(seen.ids.size(), 2u) << "one atomic replacement: old program, then the new one";
        const std::uint32_t prog_after = lab_->xdp_prog_id();
        EXPECT_NE(prog_after, prog_before) << "the restarted agent attaches its own program";
        EXPECT_EQ(seen.ids.back(), prog_after);

        EXPECT_EQ(map_ids(), ids_before) << "pinned maps must be reused, not recreated";
        EXPECT_EQ(conntrack_entries(), 2)
            << "the connection-table entries did not survive unchanged";
        const auto summaries = vip_summaries();
        for (const VipConf& v : vips_) {
            SCOPED_TRACE(v.key());
            const json& s = at(summaries, v.key());
            const json& was = at(summaries_before, v.key());
            EXPECT_EQ(s["vip_id"], was["vip_id"]);
            EXPECT_EQ(s["checksum"], was["checksum"]);
            EXPECT_GE(s["epoch"].get<int>(), was["epoch"].get<int>()) << "epochs never go back";
            EXPECT_EQ(pinned_ring(s["vip_id"]), at(rings_before, v.key())) << "the table changed";
            expect_pinned_ring_matches(v);  // includes the runtime weight 50
        }
        EXPECT_EQ(backend_ids(v4.key()), backend_ids_before);
        for (const json bs = backends(v4.key()); const json& b : bs["backends"])
            if (b["address"] == "203.0.113.12") {
                EXPECT_EQ(b["weight"], 50) << "the runtime change was lost";
            }

        MEASURED(
            "%s: exit %d after %.0f ms; restart ready in %.0f ms; XDP polled %llu times during it: "
            "program %u -> %u, %llu polls without a program; %zu map ids, 2 conntrack entries, "
            "rings, "
            "checksums and weight 50 kept; %s epoch %d -> %d",
            way.name, code.value_or(-1), stop_ms, restart_ms,
            static_cast<unsigned long long>(seen.polls), prog_before, prog_after,
            static_cast<unsigned long long>(seen.none), ids_before.size(), v4.key().c_str(),
            epoch_before, at(summaries, v4.key())["epoch"].get<int>());
    }
}

// ---- 4. SIGHUP ---------------------------------------------------------------------------

TEST_F(AgentE2E, SighupAppliesOnlyTheDifferenceAndRejectsABadFile) {
    write_config({web4(), web6()});
    start_agent();
    const auto before = vip_summaries();

    std::vector<VipConf> next = vips_;
    next[0].backend("203.0.113.11").weight = 250;
    next.push_back({"198.51.100.30",
                    8080,
                    "api4",
                    true,
                    4099,
                    {{"203.0.113.31", 100, ""}, {"203.0.113.32", 100, ""}}});
    write_config(next);
    const auto t0 = Clock::now();
    agent_->signal(SIGHUP);
    std::map<std::string, json> after;
    while (ms_since(t0) < 10000) {
        after = vip_summaries();
        if (after.contains(next[2].key()) && at(after, next[2].key())["published"] == true &&
            at(after, next[0].key())["epoch"] != at(before, next[0].key())["epoch"])
            break;
        std::this_thread::sleep_for(5ms);
    }
    const double reload_ms = ms_since(t0);
    ASSERT_TRUE(after.contains(next[2].key())) << "the added VIP did not appear";
    EXPECT_EQ(at(after, next[0].key())["epoch"], at(before, next[0].key())["epoch"].get<int>() + 1);
    EXPECT_NE(at(after, next[0].key())["checksum"], at(before, next[0].key())["checksum"]);
    EXPECT_EQ(at(after, next[1].key())["epoch"], at(before, next[1].key())["epoch"])
        << "untouched VIP";
    EXPECT_EQ(at(after, next[1].key())["checksum"], at(before, next[1].key())["checksum"]);
    EXPECT_EQ(at(after, next[2].key())["epoch"], 1);
    for (const VipConf& v : vips_) expect_pinned_ring_matches(v);
    MEASURED(
        "SIGHUP (weight 100 -> 250 on %s, %s added) applied within %.0f ms: epochs %d -> %d, "
        "%s stays %d, new VIP epoch %d",
        next[0].key().c_str(), next[2].key().c_str(), reload_ms,
        at(before, next[0].key())["epoch"].get<int>(), at(after, next[0].key())["epoch"].get<int>(),
        next[1].key().c_str(), at(after, next[1].key())["epoch"].get<int>(),
        at(after, next[2].key())["epoch"].get<int>());

    // An invalid file: rejected, nothing changes, the agent keeps running.
    const std::string vips_before = api_->get("/v1/vips").body.dump();
    std::map<std::string, std::vector<std::uint32_t>> rings_before;
    for (const auto& [key, s] : after) rings_before[key] = pinned_ring(s["vip_id"]);
    std::string bad = render_config(*lab_, next);
    bad.replace(bad.find("port: 8080"), 10, "port: 80x0");
    bad += "  - address: 198.51.100.31\n    port: 80\n    colour: blue\n";
    write_file(config_path_, bad);
    const std::size_t rejected_before = [&] {
        std::size_t n = 0;
        for (std::size_t p = 0; (p = agent_->log().find("reload rejected", p)) != std::string::npos;
             ++p)
            ++n;
        return n;
    }();
    const auto t1 = Clock::now();
    agent_->signal(SIGHUP);
    bool rejected = false;
    while (!rejected && ms_since(t1) < 5000) {
        std::size_t n = 0;
        const std::string log = agent_->log();
        for (std::size_t p = 0; (p = log.find("reload rejected", p)) != std::string::npos; ++p) ++n;
        rejected = n > rejected_before;
        if (!rejected) std::this_thread::sleep_for(5ms);
    }
    const double reject_ms = ms_since(t1);
    EXPECT_TRUE(rejected) << "no \"reload rejected\" in the log";
    std::this_thread::sleep_for(100ms);
    EXPECT_TRUE(agent_->running()) << "a bad file must not stop the agent";
    EXPECT_EQ(api_->get("/v1/vips").body.dump(), vips_before)
        << "a rejected reload changed something";
    for (const auto& [key, s] : vip_summaries())
        EXPECT_EQ(pinned_ring(s["vip_id"]), at(rings_before, key)) << key;
    EXPECT_EQ(api_->get("/livez").status, 200);
    const std::string log = agent_->log();
    EXPECT_NE(log.find("xlbd.yaml:"), std::string::npos) << "the errors should name the file";
    MEASURED(
        "SIGHUP with an invalid file rejected within %.0f ms; agent running, VIPs, epochs and "
        "rings unchanged",
        reject_ms);
}

// ---- 5. API errors ---------------------------------------------------------------------------

TEST_F(AgentE2E, ApiErrorsAnswer4xxJsonAndChangeNothing) {
    write_config({web4(), web6()});
    start_agent();
    const VipConf& v4 = vips_[0];
    const VipConf& v6 = vips_[1];
    const std::string state_path = lab_->tmp() + "/state/state.json";

    auto world = [&] {
        std::string w = api_->get("/v1/vips").body.dump() + "\n" + read_file(state_path);
        for (const auto& [key, s] : vip_summaries())
            for (std::uint32_t id : pinned_ring(s["vip_id"])) w += std::to_string(id) + ",";
        return w;
    };
    const std::string before = world();
    const std::string q4 = "/v1/backends?vip=" + url_encode(v4.key());
    const std::string q6 = "/v1/backends?vip=" + url_encode(v6.key());

    struct Case {
        const char* what;
        std::function<Reply()> request;
        int status;
        const char* needle;  // the error message must mention it
    };
    const std::vector<Case> cases{
        {"malformed JSON",
         [&] { return api_->patch(q4 + "&address=203.0.113.11", "{\"weight\": "); }, 400,
         "malformed JSON"},
        {"unknown VIP",
         [&] {
             return api_->patch("/v1/backends?vip=198.51.100.99:80/tcp&address=203.0.113.11",
                                "{\"weight\": 10}");
         },
         404, "198.51.100.99"},
        {"unknown backend",
         [&] { return api_->patch(q4 + "&address=203.0.113.99", "{\"weight\": 10}"); }, 404,
         "203.0.113.99"},
        {"weight too big",
         [&] { return api_->patch(q4 + "&address=203.0.113.11", "{\"weight\": 20000}"); }, 400,
         "weight"},
        {"negative weight",
         [&] { return api_->patch(q4 + "&address=203.0.113.11", "{\"weight\": -1}"); }, 400,
         "weight"},
        {"weight of the wrong type",
         [&] {
             return api_->patch(q6 + "&address=" + url_encode("2001:db8:b::11"),
                                "{\"weight\": \"heavy\"}");
         },
         400, "weight"},
        {"unknown field",
         [&] { return api_->patch(q4 + "&address=203.0.113.11", "{\"colour\": \"blue\"}"); }, 400,
         "colour"},
        {"missing address", [&] { return api_->patch(q4, "{\"weight\": 10}"); }, 400, "address"},
        {"IPv4 backend in an IPv6 VIP",
         [&] {
             return api_->post("/v1/vips", R"({"address": "2001:db8:f::20", "port": 80,
                                             "backends": [{"address": "203.0.113.50"}]})");
         },
         400, "203.0.113.50"},
        {"duplicate VIP",
         [&] { return api_->post("/v1/vips", R"({"address": "198.51.100.10", "port": 80})"); }, 409,
         "already exists"},
    };
    for (const Case& c : cases) {
        SCOPED_TRACE(c.what);
        const Reply r = c.request();
        EXPECT_EQ(r.status, c.status) << r.text;
        EXPECT_NE(r.content_type.find("application/json"), std::string::npos) << r.content_type;
        ASSERT_TRUE(r.body.is_object() && r.body.contains("error") && r.body["error"].is_string())
            << r.text;
        const std::string error = r.body["error"];
        EXPECT_NE(error.find(c.needle), std::string::npos)
            << "\"" << error << "\" should mention " << c.needle;
        EXPECT_EQ(world(), before)
            << "a rejected request changed the VIPs, an epoch, the state file or a ring";
        MEASURED("%-28s -> %d %s", c.what, r.status, error.c_str());
    }
    EXPECT_TRUE(agent_->running());
}

// ---- 6. /metrics, /livez, /readyz ---------------------------------------------------------------

// ---- capture (docs/capture.md) -----------------------------------------------------------

// xlbctl capture against the real agent and real packets through the XDP
// program: the pcap holds exactly the packets the counters counted for what
// was selected, opens in tcpdump, and each selector leaves the rest out.
TEST_F(AgentE2E, CaptureWritesExactlyTheSelectedPacketsTheCountersCount) {
    VipConf empty{
        "198.51.100.20", 80, "empty", true, maglev::kDefaultRingSize, {{"203.0.113.21", 100, ""}}};
    write_config({web4(), empty});
    start_agent();
    ASSERT_EQ(api_->patch("/v1/backends?vip=" + url_encode(empty.key()) + "&address=203.0.113.21",
                          R"({"state": "disabled"})")
                  .status,
              200);
    const std::string sock = lab_->tmp() + "/run/xlbd.sock";
    auto metrics = [&] {
        return parse_metrics(
            http_get_in_netns(lab_->lb_ns(), "127.0.0.1", kMetricsPort, "/metrics").text);
    };
    auto drops_of = [](std::map<std::string, double>& m, const std::string& vip) {
        double sum = 0;
        for (const auto& [series, value] : m)
            if (series.starts_with("xlb_vip_drops_total{vip=\"" + vip + "\",")) sum += value;
        return sum;
    };
    // Runs xlbctl capture in the background until it ends; `traffic` runs
    // once the agent says the capture is on.
    struct Captured {
        CmdResult ctl;
        std::string tcpdump;
        std::size_t lines = 0, in = 0, out = 0;
    };
    auto capture = [&](const std::string& args, const std::function<void()>& traffic) {
        const std::string file = lab_->tmp() + "/capture.pcap";
        std::filesystem::remove(file);
        std::future<CmdResult> ctl = std::async(std::launch::async, [&] {
            return run(std::string(XLBCTL_PATH) + " --socket " + sock + " capture " + args +
                       " -w " + file + " 2>&1");
        });
        const auto t0 = Clock::now();
        while (ms_since(t0) < 5000) {
            const Reply r = api_->get("/v1/capture");
            if (r.status == 200 && r.body.value("capturing", false)) break;
            std::this_thread::sleep_for(20ms);
        }
        traffic();
        Captured c;
        c.ctl = ctl.get();
        c.tcpdump = run("tcpdump -nn -r " + file).out;
        std::istringstream lines(c.tcpdump);
        for (std::string line; std::getline(lines, line);) {
            if (line.empty() || !std::isdigit(static_cast<unsigned char>(line[0])))
                continue;  // tcpdump's notes, not packets
            ++c.lines;
            if (line.find(" In ") != std::string::npos) ++c.in;
            if (line.find(" Out ") != std::string::npos) ++c.out;
        }
        return c;
    };

    // 1. drops of a VIP without a backend
    auto before = metrics();
    Captured c = capture("--vip " + empty.key() + " --outcome drop --count 5", [&] {
        for (std::uint16_t i = 0; i < 5; ++i) send_ack(empty, 41000 + i);
        send_ack(web4(), 41000);  // sent on, not selected
    });
    auto after = metrics();
    EXPECT_EQ(c.ctl.rc, 0) << c.ctl.out;
    EXPECT_NE(c.ctl.out.find("captured 5 packets (5 records)"), std::string::npos) << c.ctl.out;
    EXPECT_NE(c.ctl.out.find("0 records lost"), std::string::npos) << c.ctl.out;
    EXPECT_EQ(drops_of(after, empty.key()) - drops_of(before, empty.key()), 5);
    EXPECT_EQ(c.lines, 5u) << c.tcpdump;
    EXPECT_EQ(c.in, 5u) << c.tcpdump;
    EXPECT_NE(c.tcpdump.find("203.0.113.1.41004 > 198.51.100.20.80"), std::string::npos)
        << c.tcpdump;

    // 2. what one backend was sent, as received and as sent
    const std::string b12 =
        "xlb_backend_packets_total{vip=\"" + web4().key() + "\",backend=\"203.0.113.12\"}";
    before = metrics();
    c = capture("--backend 203.0.113.12 --outcome tx --duration 3s", [&] {
        for (std::uint16_t i = 0; i < 20; ++i) send_ack(web4(), 42000 + i);
    });
    after = metrics();
    const auto sent_to_b12 = static_cast<std::size_t>(after[b12] - before[b12]);
    EXPECT_EQ(c.ctl.rc, 0) << c.ctl.out;
    ASSERT_GT(sent_to_b12, 0u) << "weight 200 of 350: some of 20 flows go there";
    EXPECT_LT(sent_to_b12, 20u) << "and some elsewhere";
    EXPECT_NE(c.ctl.out.find("captured " + std::to_string(sent_to_b12) + " packets (" +
                             std::to_string(2 * sent_to_b12) + " records)"),
              std::string::npos)
        << c.ctl.out;
    EXPECT_NE(c.ctl.out.find("ended: duration"), std::string::npos) << c.ctl.out;
    EXPECT_EQ(c.in, sent_to_b12) << c.tcpdump;
    EXPECT_EQ(c.out, sent_to_b12) << c.tcpdump;
    EXPECT_NE(c.tcpdump.find("> 203.0.113.12: IP 203.0.113.1.420"), std::string::npos)
        << "the sent copy is IP-in-IP to the backend:\n"
        << c.tcpdump;

    // 3. one client prefix
    c = capture("--src 192.0.2.200/32 --count 2", [&] {
        send_ack(web4(), 43000);
        send_ack(web4(), 43001, "192.0.2.200");
        send_ack(empty, 43002);
        send_ack(empty, 43003, "192.0.2.200");
    });
    EXPECT_EQ(c.ctl.rc, 0) << c.ctl.out;
    EXPECT_NE(c.ctl.out.find("captured 2 packets (3 records)"), std::string::npos)
        << "one sent on (two records), one dropped:\n"
        << c.ctl.out;
    EXPECT_EQ(c.tcpdump.find("203.0.113.1.4300"), std::string::npos) << c.tcpdump;
    EXPECT_NE(c.tcpdump.find("192.0.2.200.43001 > 198.51.100.10.80"), std::string::npos)
        << c.tcpdump;
    EXPECT_NE(c.tcpdump.find("192.0.2.200.43003 > 198.51.100.20.80"), std::string::npos)
        << c.tcpdump;

    // bad selections change nothing and name what was wrong
    const CmdResult bad = run(std::string(XLBCTL_PATH) + " --socket " + sock +
                              " capture --outcome dorp --count 1 -w /dev/null 2>&1");
    EXPECT_NE(bad.rc, 0);
    EXPECT_NE(bad.out.find("unknown outcome \"dorp\""), std::string::npos) << bad.out;
    EXPECT_FALSE(api_->get("/v1/capture").body.value("capturing", true));
}

TEST_F(AgentE2E, MetricsLivezAndReadyzAnswer) {
    write_config({web4(), web6()});
    start_agent();
    const auto summaries = vip_summaries();

    send_syn(vips_[0], 40001);

    const std::string v4 = vips_[0].key(), v6 = vips_[1].key();
    Reply m;
    std::map<std::string, double> series;
    const auto t0 = Clock::now();
    const std::string packets4 = "xlb_packets_total{vip=\"" + v4 + "\"}";
    do {
        m = http_get_in_netns(lab_->lb_ns(), "127.0.0.1", kMetricsPort, "/metrics");
        ASSERT_EQ(m.status, 200) << m.text;
        series = parse_metrics(m.text);
        if (series[packets4] >= 1) break;
        std::this_thread::sleep_for(20ms);
    } while (ms_since(t0) < 3000);
    EXPECT_NE(m.content_type.find("text/plain"), std::string::npos) << m.content_type;
    for (const std::string& key : {v4, v6}) {
        SCOPED_TRACE(key);
        const std::string epoch = "xlb_table_epoch{vip=\"" + key + "\"}";
        const std::string packets = "xlb_packets_total{vip=\"" + key + "\"}";
        ASSERT_TRUE(series.contains(epoch)) << m.text;
        EXPECT_EQ(series[epoch], at(summaries, key)["epoch"].get<double>());
        EXPECT_TRUE(series.contains(packets)) << m.text;
    }
    EXPECT_GE(series[packets4], 1) << "the SYN sent to " << v4 << " was not counted";
    EXPECT_NE(m.text.find("# TYPE xlb_table_epoch gauge"), std::string::npos);
    EXPECT_NE(m.text.find("# TYPE xlb_packets_total counter"), std::string::npos);

    const Reply live = http_get_in_netns(lab_->lb_ns(), "127.0.0.1", kMetricsPort, "/livez");
    const Reply ready = http_get_in_netns(lab_->lb_ns(), "127.0.0.1", kMetricsPort, "/readyz");
    EXPECT_EQ(live.status, 200) << live.text;
    EXPECT_EQ(ready.status, 200) << ready.text;
    EXPECT_EQ(api_->get("/livez").status, 200);
    EXPECT_EQ(api_->get("/readyz").status, 200);
    MEASURED(
        "/metrics: %zu bytes, %zu series; %s = %.0f, %s = %.0f after one SYN; "
        "xlb_table_epoch %.0f and %.0f; /livez %d, /readyz %d (TCP and Unix socket)",
        m.text.size(), series.size(), packets4.c_str(), series[packets4],
        ("xlb_packets_total{vip=\"" + v6 + "\"}").c_str(),
        series["xlb_packets_total{vip=\"" + v6 + "\"}"],
        series["xlb_table_epoch{vip=\"" + v4 + "\"}"],
        series["xlb_table_epoch{vip=\"" + v6 + "\"}"], live.status, ready.status);
}

// ---- 7. --check-config ------------------------------------------------------------------------

TEST_F(AgentE2E, CheckConfigExitsZeroOrOneWithFileLineColumnAndTouchesNothing) {
    write_config({web4(), web6()});
    const std::string good = config_path_;
    const CmdResult ok = run_xlbd(*lab_, {"--check-config", "--config", good});
    EXPECT_EQ(ok.rc, 0) << ok.out;
    EXPECT_NE(ok.out.find("valid"), std::string::npos) << ok.out;

    // Two mistakes at known places: a port that is not a number and an unknown key.
    std::string text = render_config(*lab_, vips_);
    const std::size_t port_at = text.find("port: 443") + 6;
    text.replace(port_at, 3, "https");
    const std::size_t key_at = text.find("    conntrack: true", port_at) + 4;
    text.replace(key_at, 9, "conntrak");
    const std::string bad = lab_->tmp() + "/bad.yaml";
    write_file(bad, text);
    auto line_col = [&](std::size_t offset) {
        const std::size_t line = 1 + std::count(text.begin(), text.begin() + offset, '\n');
        const std::size_t line_start = text.rfind('\n', offset - 1) + 1;
        return bad + ":" + std::to_string(line) + ":" + std::to_string(offset - line_start + 1) +
               ":";
    };
    const CmdResult err = run_xlbd(*lab_, {"--check-config", "--config", bad});
    EXPECT_EQ(err.rc, 1) << err.out;
    EXPECT_NE(err.out.find(line_col(port_at)), std::string::npos)
        << "want " << line_col(port_at) << " in:\n"
        << err.out;
    EXPECT_NE(err.out.find(line_col(key_at)), std::string::npos)
        << "want " << line_col(key_at) << " in:\n"
        << err.out;

    // touched nothing: no pins, no socket, no state file, no XDP program
    EXPECT_TRUE(fs::is_empty(lab_->pin_dir())) << "pins created in " << lab_->pin_dir();
    EXPECT_FALSE(fs::exists(lab_->tmp() + "/run")) << "API socket directory created";
    EXPECT_FALSE(fs::exists(lab_->tmp() + "/state")) << "state file created";
    EXPECT_EQ(lab_->xdp_prog_id(), 0u) << "an XDP program was attached";
    MEASURED("--check-config: valid file -> %d (%s); invalid -> %d with:\n%s", ok.rc,
             ok.out.substr(0, ok.out.find('\n')).c_str(), err.rc, err.out.c_str());
}

// ---- 8. swap under load
// --------------------------------------------------------------------------

TEST_F(AgentE2E, ThousandPublishesUnderLoadNeverLeaveAPacketWithoutABackend) {
    constexpr int kPublishes = 1000;
    constexpr int kFlows = 1024;
    VipConf swap{"198.51.100.20",
                 80,
                 "swap",
                 false,
                 maglev::kDefaultRingSize,
                 {{"203.0.113.21", 100, ""}, {"203.0.113.22", 100, ""}, {"203.0.113.23", 100, ""}}};
    write_config({swap});
    start_agent();
    const json s0 = at(vip_summaries(), swap.key());

    // A second instance of the balancer, sharing every pinned map of the agent's.
    auto lb = bpf::LbProgram::load(kSizes, {lab_->pin_dir() + "/" + Lab::kLbIf});
    ASSERT_TRUE(lb) << lb.error().message();
    for (const bpf::MapPin& p : lb->pins().maps)
        ASSERT_EQ(p.action, bpf::PinAction::kReused) << p.map << ": " << p.reason;
    {
        auto entry = lb->vips().get(vip_map_key(swap));
        ASSERT_TRUE(entry && entry->has_value());
        ASSERT_EQ((*entry)->flags & XLB_VIP_F_NO_CONNTRACK, XLB_VIP_F_NO_CONNTRACK);
    }

    // The two tables the agent alternates between; each flow must land on the
    // backend one of them gives it.
    const auto ids = backend_ids(swap.key());
    std::map<std::uint32_t, net::IpAddress> addr_of;
    for (const auto& [addr, id] : ids) addr_of[id] = *net::IpAddress::parse(addr);
    VipConf alt = swap;
    alt.backend("203.0.113.22").weight = 150;
    const ExpectedTable table_a = expected_table(swap, ids), table_b = expected_table(alt, ids);

    std::vector<test::Bytes> frames;
    std::vector<std::pair<net::IpAddress, net::IpAddress>> allowed;
    for (int f = 0; f < kFlows; ++f) {
        test::Flow flow{net::IpAddress::v4(192, 0, 2, static_cast<std::uint8_t>(10 + f % 200)),
                        *net::IpAddress::parse(swap.address), static_cast<std::uint16_t>(20000 + f),
                        swap.port, test::kProtoTcp};
        frames.push_back(test::make_frame(flow));
        const std::uint32_t slot = datapath::ring_index(
            test::flow_key(flow), XLB_VIP_F_NO_CONNTRACK, kHashSeed, swap.ring_size);
        allowed.emplace_back(at(addr_of, table_a.ring.at(slot)),
                             at(addr_of, table_b.ring.at(slot)));
    }

    auto outcome_totals = [&] {
        std::array<std::uint64_t, XLB_OUT__MAX> out{};
        for (std::uint32_t o = 0; o < XLB_OUT__MAX; ++o) {
            auto per_cpu = lb->outcomes().get_per_cpu(o);
            if (per_cpu) out[o] = datapath::sum_per_cpu(*per_cpu);
        }
        return out;
    };
    const auto outcomes_before = outcome_totals();

    std::atomic<bool> done{false};
    std::atomic<std::uint64_t> packets{0}, not_tx{0}, run_errors{0}, wrong_backend{0};
    std::thread forwarder([&] {
        int f = 0;
        while (!done.load(std::memory_order_relaxed)) {
            auto out = bpf::test_run_xdp(lb->prog_fd(), frames[f]);
            packets.fetch_add(1, std::memory_order_relaxed);
            if (!out) {
                run_errors.fetch_add(1, std::memory_order_relaxed);
            } else if (out->action != XDP_TX) {
                not_tx.fetch_add(1, std::memory_order_relaxed);
            } else {
                const net::IpAddress dst = net::IpAddress::v4(out->frame[30], out->frame[31],
                                                              out->frame[32], out->frame[33]);
                if (dst != allowed[f].first && dst != allowed[f].second)
                    wrong_backend.fetch_add(1, std::memory_order_relaxed);
            }
            f = (f + 1) % kFlows;
        }
    });

    std::vector<double> latencies;
    latencies.reserve(kPublishes);
    int failed = 0;
    std::string first_failure;
    const auto t0 = Clock::now();
    for (int i = 0; i < kPublishes; ++i) {
        const auto t = Clock::now();
        const Reply r = patch_weight(swap, "203.0.113.22", i % 2 == 0 ? 150 : 100);
        latencies.push_back(ms_since(t));
        if (r.status != 200 && failed++ == 0)
            first_failure = std::to_string(r.status) + " " + r.text;
    }
    const double publish_ms = ms_since(t0);
    done = true;
    forwarder.join();
    const auto outcomes_after = outcome_totals();
    const json s1 = at(vip_summaries(), swap.key());

    std::sort(latencies.begin(), latencies.end());
    const double p50 = latencies[latencies.size() / 2],
                 p99 = latencies[latencies.size() * 99 / 100];
    MEASURED(
        "%llu packets through BPF_PROG_TEST_RUN (%d flows, no conntrack) while %d PATCHes "
        "published "
        "%d tables in %.0f ms (%.2f ms each; PATCH p50 %.2f ms, p99 %.2f ms, max %.2f ms); "
        "not XDP_TX %llu, wrong backend %llu, run errors %llu",
        static_cast<unsigned long long>(packets.load()), kFlows, kPublishes,
        s1["epoch"].get<int>() - s0["epoch"].get<int>(), publish_ms, publish_ms / kPublishes, p50,
        p99, latencies.back(), static_cast<unsigned long long>(not_tx.load()),
        static_cast<unsigned long long>(wrong_backend.load()),
        static_cast<unsigned long long>(run_errors.load()));

    EXPECT_EQ(failed, 0) << "first failed PATCH: " << first_failure;
    EXPECT_EQ(s1["epoch"].get<int>() - s0["epoch"].get<int>(), kPublishes)
        << "one publish per change";
    EXPECT_GT(packets.load(), static_cast<std::uint64_t>(kPublishes))
        << "traffic must overlap the publishes";
    EXPECT_EQ(not_tx.load(), 0u);
    EXPECT_EQ(run_errors.load(), 0u);
    EXPECT_EQ(wrong_backend.load(), 0u)
        << "a packet went to a backend neither table gives its flow";
    for (xlb_outcome o : {XLB_OUT_DROP_NO_TABLE, XLB_OUT_DROP_NO_BACKEND, XLB_OUT_DROP_BAD_BACKEND})
        EXPECT_EQ(outcomes_after[o], outcomes_before[o]) << "outcome " << o;
    EXPECT_GE(outcomes_after[XLB_OUT_TX] - outcomes_before[XLB_OUT_TX], packets.load());
    // 1000 is even: the last PATCH set the weight back to 100
    expect_pinned_ring_matches(swap);
}

// ---- 9. operating safety: one agent per interface, clean failed starts, reloads ----------------

// What a failed start must leave as it was: the program on xa0, every pinned
// map, every VIP's ring, what the agent reports, and the state file.
struct DataPlaneSnapshot {
    std::uint32_t prog_id = 0;
    std::map<std::string, std::uint32_t> map_ids;
    std::map<std::string, std::vector<std::uint32_t>> rings;  // by VIP key
    std::map<std::string, std::string> epochs_and_checksums;  // by VIP key
    std::string state_file;
    bool operator==(const DataPlaneSnapshot&) const = default;
};

class AgentSafetyE2E : public AgentE2E {
protected:
    DataPlaneSnapshot snapshot(bool with_agent = true) {
        DataPlaneSnapshot s;
        s.prog_id = lab_->xdp_prog_id();
        if (fs::exists(lab_->pin_dir() + "/" + Lab::kLbIf)) s.map_ids = map_ids();
        if (with_agent)
            for (const auto& [key, v] : vip_summaries()) {
                s.rings[key] = pinned_ring(v["vip_id"]);
                s.epochs_and_checksums[key] =
                    v["epoch"].dump() + "/" + v["checksum"].get<std::string>();
            }
        s.state_file = fs::exists(state_path()) ? read_file(state_path()) : "";
        return s;
    }
    std::string state_path() const { return lab_->tmp() + "/state/state.json"; }

    // Runs a second xlbd to its end (it must fail): exit code, ms and log.
    struct Failed {
        std::optional<int> rc;
        double ms = 0;
        std::string log;
    };
    Failed run_failing(const std::vector<std::string>& args, const std::string& config = {}) {
        static int n = 0;
        AgentProcess second(*lab_, config.empty() ? config_path_ : config,
                            lab_->tmp() + "/second-" + std::to_string(++n) + ".log");
        const auto t0 = Clock::now();
        second.start(args);
        Failed f;
        f.rc = second.wait_exit(10s);
        f.ms = ms_since(t0);
        f.log = second.log();
        return f;
    }

    Reply reload(bool allow_disruptive = false) {
        return api_->post("/v1/reload", allow_disruptive ? "{\"allow_disruptive\": true}" : "");
    }

    std::uint32_t live_hash_seed() {
        bpf::UniqueFd fd = open_pinned(lab_->map_pin(XLB_MAP_CONFIG));
        bpf::ArrayMap<xlb_config> config(fd.get(), XLB_MAP_CONFIG);
        auto c = config.get(0);
        if (!c) throw std::runtime_error("read xlb_config: " + c.error().message());
        return c->hash_seed;
    }
};

TEST_F(AgentSafetyE2E, SecondAgentOnTheSameInterfaceExitsAtOnceNamingTheFirstAndChangesNothing) {
    write_config({web4(), web6()});
    start_agent();
    const DataPlaneSnapshot before = snapshot();
    ASSERT_NE(before.prog_id, 0u);
    const std::string metrics_before =
        http_get_in_netns(lab_->lb_ns(), "127.0.0.1", kMetricsPort, "/metrics").text;
    const std::string first_pid = std::to_string(agent_->pid());

    const std::string other_pins = "/sys/fs/bpf/" + lab_->prefix() + "-other";
    struct Case {
        const char* what;
        std::vector<std::string> args;
    };
    const std::vector<Case> cases = {
        {"same configuration", {}},
        {"another API socket and metrics port",
         {"--api-socket", lab_->tmp() + "/other/xlbd.sock", "--metrics-listen", "127.0.0.1:9474"}},
        {"another pin_dir",
         {"--pin-dir", other_pins, "--api-socket", lab_->tmp() + "/other2/xlbd.sock",
          "--metrics-listen", "127.0.0.1:9475"}},
    };
    for (const Case& c : cases) {
        SCOPED_TRACE(c.what);
        const Failed f = run_failing(c.args);
        ASSERT_TRUE(f.rc.has_value()) << "the second agent did not exit:\n" << f.log;
        EXPECT_EQ(*f.rc, 1) << f.log;
        EXPECT_LT(f.ms, 2000) << "it should fail at once";
        EXPECT_NE(f.log.find("pid " + first_pid), std::string::npos)
            << "the error should name the first agent's pid:\n"
            << f.log;
        EXPECT_TRUE(agent_->running());
        EXPECT_EQ(snapshot(), before)
            << "the second agent changed the data plane or the state file";
        EXPECT_FALSE(fs::exists(other_pins + "/" + Lab::kLbIf))
            << "pins created under the other pin_dir";
        EXPECT_FALSE(fs::exists(lab_->tmp() + "/other/xlbd.sock"));
        const std::size_t said = f.log.find("already served");
        MEASURED("second agent (%s): exit %d after %.0f ms: %s", c.what, *f.rc, f.ms,
                 said == std::string::npos ? "?" : f.log.substr(said, 120).c_str());
    }
    // A cleanup of /run (every file under /run/xlb removed) does not free the
    // interface: the lock is a socket name no file operation removes.
    for (const auto& entry : fs::directory_iterator("/run/xlb"))
        if (!entry.is_directory()) fs::remove(entry.path());
    for (const Case& c : cases) {
        SCOPED_TRACE(std::string("after /run/xlb was emptied: ") + c.what);
        const Failed f = run_failing(c.args);
        ASSERT_TRUE(f.rc.has_value()) << "the second agent did not exit:\n" << f.log;
        EXPECT_EQ(*f.rc, 1) << f.log;
        EXPECT_NE(f.log.find("already served"), std::string::npos) << f.log;
        EXPECT_TRUE(agent_->running());
        EXPECT_EQ(snapshot(), before)
            << "the second agent changed the data plane or the state file";
        EXPECT_FALSE(fs::exists(other_pins + "/" + Lab::kLbIf))
            << "pins created under the other pin_dir";
    }
    EXPECT_EQ(api_->get("/readyz").status, 200);

    // The first agent's metrics port is its own: nothing else answers there.
    const Reply m = http_get_in_netns(lab_->lb_ns(), "127.0.0.1", kMetricsPort, "/metrics");
    EXPECT_EQ(m.status, 200);
    EXPECT_EQ(parse_metrics(m.text).count("xlb_table_epoch{vip=\"" + web4().key() + "\"}"), 1u);
    EXPECT_EQ(parse_metrics(m.text)["xlb_table_epoch{vip=\"" + web4().key() + "\"}"],
              parse_metrics(metrics_before)["xlb_table_epoch{vip=\"" + web4().key() + "\"}"]);

    // kill -9: the kernel releases the lock; a new agent starts at once.
    agent_->kill9();
    const auto t0 = Clock::now();
    start_agent();
    MEASURED("after kill -9 of the first agent, a new one was ready in %.0f ms", ms_since(t0));
    EXPECT_EQ(lab_->xdp_prog_id() != 0, true);
}

// A first start refused at the attach step (another XDP program on the
// interface) removes what it made: pins, the pin directories it created, the
// state file; the foreign program stays.
TEST_F(AgentSafetyE2E, AFirstStartRefusedAtAttachLeavesNoPinDirectory) {
    write_config({web4(), web6()});
    auto decap = in_netns(lab_->lb_ns(), [] { return bpf::DecapProgram::load(); });
    ASSERT_TRUE(decap) << decap.error().message();
    // kept attached: the lab's teardown removes it with its namespace
    auto foreign = in_netns(lab_->lb_ns(), [&]() -> xlb::Result<void> {
        auto iface = bpf::Interface::by_name(Lab::kLbIf);
        if (!iface) return std::unexpected(iface.error());
        auto xdp = bpf::XdpAttachment::attach(*decap, *iface, {bpf::XdpMode::kGeneric});
        if (!xdp) return std::unexpected(xdp.error());
        xdp->keep();
        return {};
    });
    ASSERT_TRUE(foreign) << foreign.error().message();
    const std::uint32_t foreign_id = lab_->xdp_prog_id();
    ASSERT_NE(foreign_id, 0u);

    // a pin_dir two levels below what exists: both levels are the agent's
    const std::string root = "/sys/fs/bpf/" + lab_->prefix() + "-fresh";
    ASSERT_FALSE(fs::exists(root));
    const Failed f = run_failing({"--pin-dir", root + "/pins"});
    ASSERT_TRUE(f.rc.has_value()) << f.log;
    EXPECT_EQ(*f.rc, 1) << f.log;
    EXPECT_NE(f.log.find("xlb_decap"), std::string::npos) << "the error names the program:\n"
                                                          << f.log;
    EXPECT_FALSE(fs::exists(root)) << "pin directories left behind:\n" << f.log;
    EXPECT_FALSE(fs::exists(state_path())) << "state file left behind";
    EXPECT_EQ(lab_->xdp_prog_id(), foreign_id) << "the foreign program was touched";
}

TEST_F(AgentSafetyE2E, LateStartFailuresLeaveNothingOnAFirstStartAndTheDataPlaneOnARestart) {
    write_config({web4(), web6()});
    // A plain TCP listener on the agent's metrics port, inside the namespace.
    auto take_port = [&] {
        return in_netns(lab_->lb_ns(), [&] {
            bpf::UniqueFd fd(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
            sockaddr_in a{};
            a.sin_family = AF_INET;
            a.sin_port = htons(kMetricsPort);
            a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
            if (::bind(fd.get(), reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0 ||
                ::listen(fd.get(), 4) != 0)
                throw std::runtime_error("take the metrics port: " +
                                         std::string(std::strerror(errno)));
            return fd.release();
        });
    };
    std::string unknown_group = render_config(*lab_, vips_);
    unknown_group.replace(unknown_group.find("api: {socket: "), 6,
                          "api: {group: no-such-xlb-group, ");
    const std::string group_config = lab_->tmp() + "/group.yaml";
    write_file(group_config, unknown_group);
    write_file(lab_->tmp() + "/a-file", "not a directory\n");

    struct Case {
        const char* what;
        std::vector<std::string> args;
        std::string config;
        const char* expect;  // in the log
        bool hold_port = false;
    };
    const std::vector<Case> cases = {
        {"metrics port taken", {}, {}, "metrics.listen", true},
        {"unknown api.group", {}, group_config, "no-such-xlb-group"},
        {"missing interface", {"--interface", "nosuch0"}, {}, "nosuch0"},
        {"state directory unwritable",
         {"--state-file", lab_->tmp() + "/a-file/state.json"},
         {},
         "a-file"},
    };
    auto run_cases = [&](const char* phase, const DataPlaneSnapshot& want) {
        for (const Case& c : cases) {
            SCOPED_TRACE(std::string(phase) + ": " + c.what);
            bpf::UniqueFd port(c.hold_port ? take_port() : -1);
            const Failed f = run_failing(c.args, c.config);
            ASSERT_TRUE(f.rc.has_value()) << f.log;
            EXPECT_EQ(*f.rc, 1) << f.log;
            EXPECT_NE(f.log.find(c.expect), std::string::npos)
                << "the error should name " << c.expect << ":\n"
                << f.log;
            EXPECT_EQ(snapshot(false), want) << f.log;
            if (want.prog_id == 0) {
                EXPECT_FALSE(fs::exists(lab_->tmp() + "/run/xlbd.sock"))
                    << "API socket left behind";
            }
            MEASURED("%s, %s: exit %d in %.0f ms", phase, c.what, *f.rc, f.ms);
        }
    };

    // First start: nothing existed, nothing may be left.
    const DataPlaneSnapshot nothing = snapshot(false);
    ASSERT_EQ(nothing.prog_id, 0u);
    ASSERT_TRUE(nothing.map_ids.empty());
    run_cases("first start", nothing);
    EXPECT_FALSE(fs::exists(lab_->pin_dir() + "/" + Lab::kLbIf)) << "pin directory left behind";
    EXPECT_FALSE(fs::exists(state_path())) << "state file left behind";

    // Restart over a live data plane left by a killed agent.
    start_agent();
    agent_->kill9();
    const DataPlaneSnapshot live = snapshot(false);
    ASSERT_NE(live.prog_id, 0u);
    ASSERT_FALSE(live.map_ids.empty());
    std::map<std::uint32_t, std::vector<std::uint32_t>> rings_before;
    for (std::uint32_t id = 0; id < 2; ++id) rings_before[id] = pinned_ring(id);
    run_cases("restart", live);
    for (std::uint32_t id = 0; id < 2; ++id)
        EXPECT_EQ(pinned_ring(id), rings_before[id]) << "ring " << id;
}

// A drain made with xlbctl, then a restart after a file edit: the drain is
// kept and reported when the edit is elsewhere; when the edit touches the
// same VIP the start refuses and changes nothing until the operator chooses
// with --prefer file|runtime, each doing what it says. Never reverted
// silently.
TEST_F(AgentSafetyE2E, RestartAfterAFileEditKeepsOrRefusesButNeverRevertsARuntimeDrain) {
    write_config({web4(), web6()});
    start_agent();
    const std::string v4 = web4().key(), v6 = web6().key();
    const CmdResult drained = run(std::string(XLBCTL_PATH) + " --socket " + lab_->tmp() +
                                  "/run/xlbd.sock backend drain " + v4 + " 203.0.113.11 2>&1");
    ASSERT_EQ(drained.rc, 0) << drained.out;
    // address -> "state/weight" as the agent runs it
    auto backends_of = [&](const std::string& key) {
        std::map<std::string, std::string> out;
        for (const json bs = backends(key); const json& b : bs["backends"])
            out[b["address"].get<std::string>()] =
                b["state"].get<std::string>() + "/" + b["weight"].dump();
        return out;
    };
    ASSERT_EQ(backends_of(v4).at("203.0.113.11"), "drain/100");
    auto stop = [&] {
        agent_->signal(SIGTERM);
        ASSERT_EQ(agent_->wait_exit(10s), 0);
    };
    // The agent's log from here on.
    std::size_t log_from = 0;
    auto restart = [&](const std::vector<std::string>& args) {
        log_from = agent_->log().size();
        agent_->start(args);
        wait_ready();
    };
    auto log_since = [&] { return agent_->log().substr(log_from); };
    const std::string kept_line =
        "VIP 198.51.100.10:80/tcp backend 203.0.113.11: state drain at runtime, active in the "
        "file: keeping the runtime change";

    // 1. The file edits another VIP: the drain stays, and the log says so.
    stop();
    std::vector<VipConf> edit = {web4(), web6()};
    edit[1].backend("2001:db8:b::12").weight = 150;
    write_config(edit);
    restart({});
    EXPECT_EQ(backends_of(v4).at("203.0.113.11"), "drain/100") << "the drain was reverted";
    EXPECT_EQ(backends_of(v6).at("2001:db8:b::12"), "active/150") << "the file's edit is lost";
    EXPECT_NE(log_since().find(kept_line), std::string::npos) << log_since();

    // 2. The file edits the drained VIP: the start refuses, nothing changes.
    stop();
    edit[0].backend("203.0.113.12").weight = 150;
    write_config(edit);
    const DataPlaneSnapshot before = snapshot(false);
    const std::string conflict =
        "VIP 198.51.100.10:80/tcp backend 203.0.113.11: state drain at runtime, active in the file";
    Failed refused = run_failing({});
    EXPECT_EQ(refused.rc, 1) << refused.log;
    EXPECT_NE(refused.log.find(conflict), std::string::npos) << refused.log;
    EXPECT_NE(refused.log.find("VIP 198.51.100.10:80/tcp backend 203.0.113.12: weight 200 at "
                               "runtime, 150 in the file"),
              std::string::npos)
        << refused.log;
    EXPECT_NE(refused.log.find("--prefer file"), std::string::npos) << refused.log;
    EXPECT_NE(refused.log.find("--prefer runtime"), std::string::npos) << refused.log;
    EXPECT_EQ(snapshot(false), before) << "the refused start changed the data plane or state";
    const CmdResult check = run_xlbd(*lab_, {"--check-config", config_path_});
    EXPECT_EQ(check.rc, 1) << check.out;
    EXPECT_NE(check.out.find(conflict), std::string::npos) << check.out;
    const CmdResult check_runtime =
        run_xlbd(*lab_, {"--check-config", config_path_, "--prefer", "runtime"});
    EXPECT_EQ(check_runtime.rc, 0) << check_runtime.out;
    EXPECT_EQ(snapshot(false), before) << "--check-config changed something";

    // 3. --prefer runtime: the runtime version of that VIP, reported.
    restart({"--prefer", "runtime"});
    EXPECT_EQ(backends_of(v4).at("203.0.113.11"), "drain/100");
    EXPECT_EQ(backends_of(v4).at("203.0.113.12"), "active/200");
    EXPECT_NE(log_since().find(conflict + " (changed both in the file and at runtime): --prefer "
                                          "runtime: the runtime version is used"),
              std::string::npos)
        << log_since();
    // settled: the same file again starts without --prefer
    stop();
    restart({});
    EXPECT_EQ(backends_of(v4).at("203.0.113.11"), "drain/100");

    // 4. Another edit of that VIP, then --prefer file: the file's version,
    // the old state file kept as a backup.
    stop();
    edit[0].backend("203.0.113.13").weight = 60;
    write_config(edit);
    refused = run_failing({});
    EXPECT_EQ(refused.rc, 1) << refused.log;
    restart({"--prefer", "file"});
    EXPECT_EQ(backends_of(v4).at("203.0.113.11"), "active/100");
    EXPECT_EQ(backends_of(v4).at("203.0.113.12"), "active/150");
    EXPECT_EQ(backends_of(v4).at("203.0.113.13"), "active/60");
    EXPECT_NE(log_since().find(conflict + " (changed both in the file and at runtime): --prefer "
                                          "file: the file's version is used"),
              std::string::npos)
        << log_since();
    bool backup = false;
    for (const auto& entry : fs::directory_iterator(lab_->tmp() + "/state"))
        backup = backup || entry.path().filename().string().starts_with("state.json.bak-");
    EXPECT_TRUE(backup) << "no backup of the state file with the dropped drain";
}

TEST_F(AgentSafetyE2E, ReloadThroughTheApiReportsChangesErrorsAndRefusesDisruptiveOnes) {
    write_config({web4(), web6()});
    start_agent();
    EXPECT_TRUE(status()["last_reload"].is_null());

    // A valid change: the answer names it, status shows it.
    std::vector<VipConf> next = vips_;
    next[0].backend("203.0.113.11").weight = 250;
    write_config(next);
    Reply r = reload();
    ASSERT_EQ(r.status, 200) << r.text;
    EXPECT_EQ(r.body["result"], "applied");
    EXPECT_EQ(r.body["changed"], json::array({web4().key()}));
    EXPECT_EQ(r.body["untouched"], 1);
    EXPECT_EQ(status()["last_reload"]["result"], "applied");
    EXPECT_EQ(status()["last_reload"]["source"], "api");

    // An invalid file: 422 with file:line:column, nothing applied.
    const auto before = vip_summaries();
    std::string bad = render_config(*lab_, next);
    bad.replace(bad.find("port: 443"), 9, "port: 4x3");
    write_file(config_path_, bad);
    r = reload();
    EXPECT_EQ(r.status, 422) << r.text;
    EXPECT_EQ(r.body["result"], "invalid");
    ASSERT_FALSE(r.body["errors"].empty()) << r.text;
    EXPECT_NE(r.body["errors"][0].get<std::string>().find(config_path_ + ":"), std::string::npos)
        << r.text;
    EXPECT_EQ(vip_summaries(), before);
    // The xlbctl form systemd's ExecReload runs: exit 1 on a rejected reload.
    CmdResult ctl =
        run(std::string(XLBCTL_PATH) + " --socket " + lab_->tmp() + "/run/xlbd.sock reload 2>&1");
    EXPECT_EQ(ctl.rc, 1) << ctl.out;
    EXPECT_NE(ctl.out.find(config_path_ + ":"), std::string::npos) << ctl.out;

    // A file without hash_seed: invalid (there is no default seed to fall
    // back on), nothing applied.
    std::string unseeded = render_config(*lab_, next);
    const std::size_t seed_at = unseeded.find("hash_seed: ");
    ASSERT_NE(seed_at, std::string::npos);
    unseeded.erase(seed_at, unseeded.find('\n', seed_at) + 1 - seed_at);
    write_file(config_path_, unseeded);
    r = reload();
    EXPECT_EQ(r.status, 422) << r.text;
    EXPECT_EQ(r.body["result"], "invalid");
    ASSERT_FALSE(r.body["errors"].empty()) << r.text;
    EXPECT_NE(r.body["errors"][0].get<std::string>().find("hash_seed is not set"),
              std::string::npos)
        << r.text;
    EXPECT_EQ(vip_summaries(), before);

    // A new hash_seed remaps flows: refused unless confirmed.
    const std::uint32_t seed_before = live_hash_seed();
    std::string seeded = render_config(*lab_, next);
    seeded.replace(seeded.find("hash_seed: "), 11 + std::to_string(kHashSeed).size(),
                   "hash_seed: 77");
    write_file(config_path_, seeded);
    r = reload();
    EXPECT_EQ(r.status, 409) << r.text;
    EXPECT_EQ(r.body["result"], "disruptive_refused");
    ASSERT_EQ(r.body["disruptive"].size(), 1u) << r.text;
    EXPECT_NE(r.body["disruptive"][0].get<std::string>().find("hash_seed"), std::string::npos);
    EXPECT_EQ(live_hash_seed(), seed_before) << "a refused reload changed the data plane";
    ctl = run(std::string(XLBCTL_PATH) + " --socket " + lab_->tmp() + "/run/xlbd.sock reload 2>&1");
    EXPECT_EQ(ctl.rc, 1) << ctl.out;
    EXPECT_NE(ctl.out.find("--allow-disruptive"), std::string::npos) << ctl.out;
    // SIGHUP cannot confirm: refused too, and status says so.
    agent_->signal(SIGHUP);
    const auto t0 = Clock::now();
    while (status()["last_reload"]["source"] != "SIGHUP" && ms_since(t0) < 5000)
        std::this_thread::sleep_for(10ms);
    EXPECT_EQ(status()["last_reload"]["result"], "disruptive_refused");
    EXPECT_EQ(live_hash_seed(), seed_before);

    ctl = run(std::string(XLBCTL_PATH) + " --socket " + lab_->tmp() +
              "/run/xlbd.sock reload --allow-disruptive 2>&1");
    EXPECT_EQ(ctl.rc, 0) << ctl.out;
    EXPECT_NE(ctl.out.find("hash_seed"), std::string::npos) << ctl.out;
    EXPECT_EQ(live_hash_seed(), 77u);
    EXPECT_EQ(status()["last_reload"]["result"], "applied");

    const auto series =
        parse_metrics(http_get_in_netns(lab_->lb_ns(), "127.0.0.1", kMetricsPort, "/metrics").text);
    EXPECT_EQ(series.at("xlb_reloads_total{result=\"applied\"}"), 2);
    EXPECT_EQ(series.at("xlb_reloads_total{result=\"invalid\"}"), 3);
    EXPECT_EQ(series.at("xlb_reloads_total{result=\"disruptive_refused\"}"), 3);
    EXPECT_EQ(series.at("xlb_reloads_total{result=\"failed\"}"), 0);
    EXPECT_TRUE(agent_->running());
}

}  // namespace
}  // namespace xlb::e2e
