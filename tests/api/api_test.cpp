// SPDX-License-Identifier: Apache-2.0
// The agent's API over its Unix socket, the state file and the metrics, with
// a real Reconciler and ControlLoop over a fake data plane (no kernel): every
// endpoint's happy path, every error path (the right status, an "error"
// message, and nothing changed: epochs, desired state and state file), the
// state file's round trip and restart rule, /metrics, /livez and /readyz.
#include <arpa/inet.h>
#include <fcntl.h>
#include <grp.h>
#include <gtest/gtest.h>
#include <httplib.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <atomic>
#include <cmath>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <future>
#include <limits>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <regex>
#include <set>
#include <sstream>
#include <thread>

#include "fake_conntrack.h"
#include "url_encode.h"
#include "xlb/api/audit.h"
#include "xlb/api/data_plane_view.h"
#include "xlb/api/lookup.h"
#include "xlb/api/metrics.h"
#include "xlb/api/server.h"
#include "xlb/api/state_store.h"
#include "xlb/capture/capture.h"
#include "xlb/config/config.h"
#include "xlb/config/json.h"
#include "xlb/config/vip_merge.h"
#include "xlb/control/loop.h"
#include "xlb/control/reconciler.h"
#include "xlb/datapath/setup.h"
#include "xlb/exposition/exposition.h"
#include "xlb/flow_hash.h"
#include "xlb/health/targets.h"
#include "xlb/health/tracker.h"
#include "xlb/log/event.h"
#include "xlb/quic/cid.h"

namespace xlb::api {

using test::url_encode;
namespace {

using json = nlohmann::json;
namespace fs = std::filesystem;
using namespace std::chrono_literals;

constexpr const char* kWeb = "198.51.100.10:80/tcp";
constexpr std::uint32_t kSeed = 0x5eed1234;

net::IpAddress ip(const char* s) { return *net::IpAddress::parse(s); }

// The kernel side, faked: keeps the rings the reconciler publishes (so lookup
// reads what was published) and serves counters the test sets.
class FakeDataPlane : public control::DataPlane, public DataPlaneView {
public:
    // DataPlane (control thread)
    xlb::Result<void> put_vip(const xlb_vip_key&, const xlb_vip_value& value) override {
        std::lock_guard lock(mu);
        vip_flags[value.vip_id] = value.flags;
        return {};
    }
    xlb::Result<void> remove_vip(const xlb_vip_key&) override { return {}; }
    xlb::Result<void> set_source_ranges(
        const xlb_vip_key&, std::uint32_t vip_id,
        const std::vector<datapath::SourceRangeEntry>& entries) override {
        std::lock_guard lock(mu);
        source_ranges[vip_id] = entries;
        return {};
    }
    xlb::Result<void> remove_source_ranges(std::uint32_t vip_id) override {
        std::lock_guard lock(mu);
        source_ranges.erase(vip_id);
        return {};
    }
    xlb::Result<void> put_backend(std::uint32_t, const xlb_backend&) override { return {}; }
    xlb::Result<control::PublishTiming> publish(
        const std::vector<control::RingUpdate>& updates) override {
        if (fail_publish) return xlb::fail(EIO, "publish rings (injected)");
        std::lock_guard lock(mu);
        for (const control::RingUpdate& r : updates) rings[r.vip_id] = r.backend_ids;
        auto now = control::Clock::now();
        return control::PublishTiming{now, now + 1ms};
    }
    xlb::Result<void> remove_ring(std::uint32_t vip_id) override {
        std::lock_guard lock(mu);
        rings.erase(vip_id);
        return {};
    }
    xlb::Result<void> remove_previous_ring(std::uint32_t) override { return {}; }

    // DataPlaneView (API threads)
    xlb::Result<std::vector<std::uint32_t>> ring(std::uint32_t vip_id) const override {
        std::lock_guard lock(mu);
        auto it = rings.find(vip_id);
        if (it == rings.end())
            return xlb::fail(ENOENT, "find ring of VIP id " + std::to_string(vip_id));
        return it->second;
    }
    xlb::Result<OutcomeCounts> outcomes() const override {
        std::lock_guard lock(mu);
        return outcome_counts;
    }
    xlb::Result<xlb_vip_stats> vip_stats(std::uint32_t vip_id) const override {
        std::lock_guard lock(mu);
        auto it = vip_counters.find(vip_id);
        return it == vip_counters.end() ? xlb_vip_stats{} : it->second;
    }
    xlb::Result<xlb_backend_stats> backend_stats(std::uint32_t id) const override {
        std::lock_guard lock(mu);
        auto it = backend_counters.find(id);
        return it == backend_counters.end() ? xlb_backend_stats{} : it->second;
    }
    xlb::Result<std::uint64_t> vip_hints(std::uint32_t vip_id) const override {
        std::lock_guard lock(mu);
        auto it = hint_counters.find(vip_id);
        return it == hint_counters.end() ? 0 : it->second;
    }
    xlb::Result<xlb_vip_drops> vip_drops(std::uint32_t vip_id) const override {
        std::lock_guard lock(mu);
        auto it = drop_counters.find(vip_id);
        return it == drop_counters.end() ? xlb_vip_drops{} : it->second;
    }
    xlb::Result<xlb_vip_cookie_stats> vip_cookies(std::uint32_t vip_id) const override {
        std::lock_guard lock(mu);
        auto it = cookie_counters.find(vip_id);
        return it == cookie_counters.end() ? xlb_vip_cookie_stats{} : it->second;
    }
    xlb::Result<xlb_vip_quic_stats> vip_quic(std::uint32_t vip_id) const override {
        std::lock_guard lock(mu);
        ++quic_reads[vip_id];
        auto it = quic_counters.find(vip_id);
        return it == quic_counters.end() ? xlb_vip_quic_stats{} : it->second;
    }

    std::atomic<bool> fail_publish{false};
    mutable std::mutex mu;
    std::map<std::uint32_t, std::vector<std::uint32_t>> rings;
    std::map<std::uint32_t, std::uint32_t> vip_flags;  // by VIP id, as last put
    std::map<std::uint32_t, std::vector<datapath::SourceRangeEntry>> source_ranges;
    OutcomeCounts outcome_counts{};
    std::map<std::uint32_t, xlb_vip_stats> vip_counters;
    std::map<std::uint32_t, xlb_backend_stats> backend_counters;
    std::map<std::uint32_t, std::uint64_t> hint_counters;
    std::map<std::uint32_t, xlb_vip_drops> drop_counters;
    std::map<std::uint32_t, xlb_vip_cookie_stats> cookie_counters;
    std::map<std::uint32_t, xlb_vip_quic_stats> quic_counters;
    mutable std::map<std::uint32_t, int> quic_reads;  // vip_quic() calls by VIP id
};

config::VipSpec web_vip() {
    config::VipSpec v;
    v.address = ip("198.51.100.10");
    v.port = 80;
    v.name = "web";
    v.ring_size = 251;
    for (int i = 0; i < 3; ++i) {
        config::BackendSpec b;
        b.address = net::IpAddress::v4(203, 0, 113, static_cast<std::uint8_t>(11 + i));
        v.backends.push_back(b);
    }
    return v;
}

struct Reply {
    int status = 0;
    json body;
    std::string text;
};

Reply to_reply(const httplib::Result& r) {
    Reply out;
    if (!r) {
        out.status = -1;
        out.text = httplib::to_string(r.error());
        return out;
    }
    out.status = r->status;
    out.text = r->body;
    out.body = json::parse(r->body, nullptr, false);
    return out;
}

std::string hex16(std::uint64_t v) {
    char buf[17];
    std::snprintf(buf, sizeof(buf), "%016llx", static_cast<unsigned long long>(v));
    return buf;
}

std::string read_file(const std::string& path) {
    std::ifstream in(path);
    std::stringstream buf;
    buf << in.rdbuf();
    return buf.str();
}

class ApiTest : public ::testing::Test {
protected:
    void SetUp() override {
        char tmpl[] = "/tmp/xlb-api-test-XXXXXX";
        ASSERT_NE(mkdtemp(tmpl), nullptr);
        dir = tmpl;
        settings.interface = "eth0";
        settings.next_hop.mac = net::MacAddress{2, 0, 0, 0, 0, 1};
        settings.encap_source.ipv4 = ip("192.0.2.1");
        settings.encap_source.ipv6 = ip("2001:db8:ffff::1");
        settings.hash_seed = kSeed;
        settings.state_file = dir + "/lib/state.json";
        settings.api_socket = dir + "/run/xlbd.sock";
        initial = {web_vip()};
        configure();

        // What the agent does at start: apply, publish, persist, then serve.
        store = std::make_unique<StateStore>(settings.state_file, initial);
        // With the settings' encap, as the agent makes it: cookies follow it.
        rec = std::make_unique<control::Reconciler>(
            dp, control::Reconciler::Options{16, 64, std::nullopt, settings.encap});
        rec->set_vips(initial);
        auto published = rec->reconcile(control::Clock::now());
        ASSERT_TRUE(published) << published.error().message();
        ASSERT_TRUE(store->save_current(*rec));
        loop = std::make_unique<control::ControlLoop>(*rec, control::ControlLoop::Options{50ms});
        loop->on_publish([this](const control::PublishRecord& r) { publishes.record(r); });
        loop->start();
        server = std::make_unique<ApiServer>(services(), ApiServer::Options{settings.api_socket});
        auto started = server->start();
        ASSERT_TRUE(started) << started.error();
        client = std::make_unique<httplib::Client>(settings.api_socket);
        client->set_address_family(AF_UNIX);
    }

    // A fixture's own settings and VIPs, before the agent's start.
    virtual void configure() {}

    void TearDown() override {
        if (server) server->stop();
        if (loop) loop->stop();
        fs::remove_all(dir);
    }

    virtual Services services() {
        Services s{
            *loop,
            *store,
            dp,
            publishes,
            std::make_shared<SharedSettings>(settings),
            AgentInfo{"0.1.0-test", "eth0", "generic", std::chrono::steady_clock::now() - 5s},
            [this]() -> std::optional<std::string> {
                if (attached) return std::nullopt;
                return "XDP program not attached";
            }};
        s.conntrack = conntrack;
        s.conntrack_status = ct_status;
        s.syn_flood = syn_flood;
        // Age 0: every request scans, so a test sees what it just added.
        s.connections = std::make_shared<conntrack::ConnectionsCache>(conntrack, 0ms);
        return s;
    }

    Reply get(const std::string& path) { return to_reply(client->Get(path.c_str())); }
    Reply post(const std::string& path, const std::string& body) {
        return to_reply(client->Post(path.c_str(), body, "application/json"));
    }
    Reply patch(const std::string& path, const std::string& body) {
        return to_reply(client->Patch(path.c_str(), body, "application/json"));
    }
    Reply del(const std::string& path) { return to_reply(client->Delete(path.c_str())); }

    static std::string vq(const std::string& key) { return "vip=" + url_encode(key); }

    // Everything a rejected request must leave alone.
    struct World {
        std::string vips;        // GET /v1/vips: specs and epochs
        std::string state_file;  // bytes on disk
        bool operator==(const World&) const = default;
    };
    World world() {
        Reply r = get("/v1/vips");
        EXPECT_EQ(r.status, 200) << r.text;
        return {r.body.dump(), read_file(settings.state_file)};
    }

    void expect_error(const Reply& r, int status, const std::string& needle) {
        EXPECT_EQ(r.status, status) << r.text;
        ASSERT_TRUE(r.body.is_object()) << r.text;
        ASSERT_TRUE(r.body.contains("error")) << r.text;
        EXPECT_NE(r.body["error"].get<std::string>().find(needle), std::string::npos)
            << "error \"" << r.body["error"].get<std::string>() << "\" should mention \"" << needle
            << "\"";
    }

    // A rejected request: the status, an error naming the problem, no change.
    void expect_rejected(const std::function<Reply()>& request, int status,
                         const std::string& needle) {
        World before = world();
        expect_error(request(), status, needle);
        EXPECT_EQ(world(), before) << "a rejected request changed something";
    }

    json vip(const std::string& key) {
        Reply r = get("/v1/vip?" + vq(key));
        EXPECT_EQ(r.status, 200) << r.text;
        return r.body;
    }

    std::string dir;
    config::Settings settings;
    std::vector<config::VipSpec> initial;
    FakeDataPlane dp;
    PublishMetrics publishes;
    std::atomic<bool> attached{true};
    std::unique_ptr<StateStore> store;
    std::unique_ptr<control::Reconciler> rec;
    std::unique_ptr<control::ControlLoop> loop;
    std::unique_ptr<ApiServer> server;
    std::unique_ptr<httplib::Client> client;
    std::shared_ptr<test::FakeConntrack> conntrack = std::make_shared<test::FakeConntrack>(4096, 2);
    std::shared_ptr<conntrack::StatusBoard> ct_status = std::make_shared<conntrack::StatusBoard>();
    std::shared_ptr<conntrack::SynFloodBoard> syn_flood =
        std::make_shared<conntrack::SynFloodBoard>();
};

// ---- reading ---------------------------------------------------------------

TEST_F(ApiTest, StatusShowsAgentAndVips) {
    Reply r = get("/v1/status");
    ASSERT_EQ(r.status, 200) << r.text;
    EXPECT_EQ(r.body["version"], "0.1.0-test");
    EXPECT_EQ(r.body["interface"], "eth0");
    EXPECT_EQ(r.body["xdp_mode"], "generic");
    EXPECT_GE(r.body["uptime_s"].get<int>(), 5);
    EXPECT_EQ(r.body["ready"], true);
    ASSERT_EQ(r.body["vips"].size(), 1u);
    const json& v = r.body["vips"][0];
    EXPECT_EQ(v["vip"], kWeb);
    EXPECT_EQ(v["name"], "web");
    EXPECT_TRUE(v["vip_id"].is_number());
    EXPECT_EQ(v["epoch"], 1);
    EXPECT_TRUE(std::regex_match(v["checksum"].get<std::string>(), std::regex("[0-9a-f]{16}")));
    EXPECT_EQ(v["panic"], false);
    EXPECT_EQ(v["panic_reason"], "none");
    EXPECT_DOUBLE_EQ(v["healthy_share"].get<double>(), 1.0);
    EXPECT_EQ(v["published"], true);
    EXPECT_EQ(v["backends_total"], 3);
    // kWeb has no health check: its backends are never probed, so none is
    // called healthy; they take traffic all the same (healthy_share 1).
    EXPECT_EQ(v["backends_healthy"], 0);
    EXPECT_EQ(v["backends_unchecked"], 3);
    EXPECT_EQ(v["last_error"], "");

    attached = false;
    EXPECT_EQ(get("/v1/status").body["ready"], false);
}

TEST_F(ApiTest, ListAndGetVips) {
    Reply list = get("/v1/vips");
    ASSERT_EQ(list.status, 200) << list.text;
    ASSERT_EQ(list.body["vips"].size(), 1u);
    EXPECT_EQ(list.body["vips"][0]["vip"], kWeb);
    EXPECT_EQ(list.body["vips"][0]["spec"]["ring_size"], 251);
    EXPECT_EQ(list.body["vips"][0]["spec"]["backends"].size(), 3u);

    // the key's protocol defaults to tcp and is normalised
    json one = vip("198.51.100.10:80");
    EXPECT_EQ(one["vip"], kWeb);
    EXPECT_EQ(one["backends"].size(), 3u);
    EXPECT_EQ(one["spec"], json(web_vip()));

    expect_error(get("/v1/vip?" + vq("198.51.100.99:80/tcp")), 404, "no VIP 198.51.100.99:80/tcp");
    expect_error(get("/v1/vip"), 400, "missing query parameter vip");
    expect_error(get("/v1/vip?vip=nonsense"), 400, "vip:");
}

TEST_F(ApiTest, BackendsShowStateWeightsSlotsAndCounters) {
    json before = vip(kWeb);
    const std::uint32_t first_id = before["backends"][0]["id"];
    {
        std::lock_guard lock(dp.mu);
        dp.backend_counters[first_id] = {1234, 567890};
    }
    Reply r = get("/v1/backends?" + vq(kWeb));
    ASSERT_EQ(r.status, 200) << r.text;
    EXPECT_EQ(r.body["vip"], kWeb);
    EXPECT_EQ(r.body["epoch"], 1);
    ASSERT_EQ(r.body["backends"].size(), 3u);
    std::uint64_t slots = 0;
    double shares = 0;
    for (const json& b : r.body["backends"]) {
        for (const char* field : {"address", "state", "health", "last_failure", "weight",
                                  "effective_weight", "weight_factor", "slots", "share_of_slots",
                                  "in_table", "id", "generation", "packets", "bytes"})
            EXPECT_TRUE(b.contains(field)) << field;
        EXPECT_EQ(b["state"], "active");
        EXPECT_EQ(b["health"], "unchecked") << "kWeb has no health check";
        EXPECT_EQ(b["last_failure"], "");
        EXPECT_EQ(b["weight"], 100);
        EXPECT_EQ(b["effective_weight"], 100 * control::kWeightScale);
        EXPECT_EQ(b["in_table"], true);
        EXPECT_GE(b["generation"].get<int>(), 1);
        slots += b["slots"].get<std::uint64_t>();
        shares += b["share_of_slots"].get<double>();
    }
    EXPECT_EQ(slots, 251u);
    EXPECT_NEAR(shares, 1.0, 1e-9);
    EXPECT_EQ(r.body["backends"][0]["packets"], 1234);
    EXPECT_EQ(r.body["backends"][0]["bytes"], 567890);
    expect_error(get("/v1/backends?" + vq("198.51.100.99:80/tcp")), 404, "no VIP");

    // Without a VIP: every VIP's, each as the one-VIP reply is.
    Reply all = get("/v1/backends");
    ASSERT_EQ(all.status, 200) << all.text;
    ASSERT_EQ(all.body["vips"].size(), 1u);
    EXPECT_EQ(all.body["vips"][0], r.body);
}

// Catches connection counts keyed by the backend alone (the same id under
// another VIP id counts apart), stale entries counted, and a rate or counter
// not passed through.
TEST_F(ApiTest, BackendsShowConnectionsAndNewFlows) {
    json before = vip(kWeb);
    const std::uint32_t vip_id = before["vip_id"];
    const std::uint32_t first = before["backends"][0]["id"];
    const std::uint32_t second = before["backends"][1]["id"];
    const std::uint32_t generation = before["backends"][0]["generation"];
    {
        std::lock_guard lock(dp.mu);
        dp.backend_counters[first] = {1234, 567890, 77};
    }
    ct_status->update([&](conntrack::Status& s) { s.backend_new_flows_per_s[first] = 12.5; });
    conntrack->set_backend(first, ip(before["backends"][0]["address"].get<std::string>().c_str()),
                           generation);
    conntrack->set_now_ms(100'000);
    const net::Endpoint web = *net::Endpoint::parse("198.51.100.10:80");
    auto add = [&](const char* client, std::uint64_t seen_ms, std::uint32_t id, std::uint32_t gen,
                   std::uint32_t in_vip, unsigned ended = 0) {
        conntrack->add(*net::Endpoint::parse(client), web, 6, id, gen, 0,
                       test::FakeConntrack::units(seen_ms), in_vip, ended);
    };
    add("192.0.2.1:1000", 99'000, first, generation, vip_id);
    add("192.0.2.2:1000", 98'000, first, generation, vip_id);
    add("192.0.2.3:1000", 99'000, first, generation, vip_id, XLB_CT_ENDED_FIN);
    add("192.0.2.4:1000", 60'000, first, generation, vip_id);
    add("192.0.2.5:1000", 99'000, first, generation + 1, vip_id);  // stale: not counted
    add("192.0.2.6:1000", 99'000, first, generation, vip_id + 1);  // another VIP's

    Reply r = get("/v1/backends?" + vq(kWeb));
    ASSERT_EQ(r.status, 200) << r.text;
    const json& b = r.body["backends"][0];
    EXPECT_EQ(b["id"], first);
    EXPECT_EQ(b["new_flows"], 77);
    EXPECT_EQ(b["new_flows_per_s"], 12.5);
    EXPECT_EQ(b["connections"], 2);
    EXPECT_EQ(b["inactive_connections"], 2);
    const json& other = r.body["backends"][1];
    EXPECT_EQ(other["id"], second);
    EXPECT_EQ(other["connections"], 0) << "counted, and none";
    EXPECT_EQ(other["new_flows"], 0);
    EXPECT_TRUE(other["new_flows_per_s"].is_null()) << "no reading yet";
    EXPECT_EQ(get("/v1/backends").body["vips"][0], r.body);
}

TEST_F(ApiTest, TableShowsSlotsAgainstTargetShare) {
    Reply r = get("/v1/table?" + vq(kWeb));
    ASSERT_EQ(r.status, 200) << r.text;
    EXPECT_EQ(r.body["vip"], kWeb);
    EXPECT_EQ(r.body["epoch"], 1);
    EXPECT_EQ(r.body["ring_size"], 251);
    EXPECT_EQ(r.body["checksum"], vip(kWeb)["checksum"]);
    ASSERT_EQ(r.body["backends"].size(), 3u);
    for (const json& b : r.body["backends"]) {
        EXPECT_NEAR(b["target_share"].get<double>(), 1.0 / 3, 1e-9);
        EXPECT_NEAR(b["share"].get<double>(), 1.0 / 3, 0.02);
        EXPECT_NEAR(b["share"].get<double>(), b["slots"].get<double>() / 251, 1e-9);
    }
}

// The backend a new flow gets, computed here from first principles (the
// packet's flow key and the ABI's hash) against the published ring.
TEST_F(ApiTest, LookupAgreesWithTheDataPlaneHash) {
    json v = vip(kWeb);
    std::map<std::uint32_t, std::string> address_of;
    for (const json& b : v["backends"]) address_of[b["id"]] = b["address"];
    std::vector<std::uint32_t> ring;
    {
        std::lock_guard lock(dp.mu);
        ring = dp.rings.at(v["vip_id"].get<std::uint32_t>());
    }
    ASSERT_EQ(ring.size(), 251u);

    std::set<std::string> seen;
    for (std::uint16_t port = 40000; port < 40040; ++port) {
        xlb_flow_key key{};
        inet_pton(AF_INET, "192.0.2.7", &key.src[0]);
        inet_pton(AF_INET, "198.51.100.10", &key.dst[0]);
        key.sport = htons(port);
        key.dport = htons(80);
        key.proto = 6;
        key.family = XLB_FAMILY_V4;
        const std::uint32_t hash = xlb_flow_hash(&key, kSeed);
        const std::uint32_t slot = hash % 251;

        Reply r =
            get("/v1/lookup?" + vq(kWeb) + "&src=192.0.2.7:" + std::to_string(port) + "&proto=tcp");
        ASSERT_EQ(r.status, 200) << r.text;
        EXPECT_EQ(r.body["hash"], hash);
        EXPECT_EQ(r.body["slot"], slot);
        EXPECT_EQ(r.body["backend_id"], ring[slot]);
        EXPECT_EQ(r.body["backend"], address_of[ring[slot]]);
        EXPECT_EQ(r.body["outcome"], "tx");
        seen.insert(r.body["backend"]);
    }
    EXPECT_EQ(seen.size(), 3u) << "40 flows should reach every backend";

    expect_error(get("/v1/lookup?" + vq(kWeb)), 400, "src");
    expect_error(get("/v1/lookup?" + vq(kWeb) + "&src=192.0.2.7"), 400, "src");
    expect_error(get("/v1/lookup?" + vq(kWeb) + "&src=" + url_encode("[2001:db8::7]:1000")), 400,
                 "address family");
    expect_error(get("/v1/lookup?" + vq(kWeb) + "&src=192.0.2.7:1000&proto=udp"), 400, "proto");
    expect_error(get("/v1/lookup?" + vq(kWeb) + "&src=192.0.2.7:1000&proto=icmp"), 400, "proto");
    expect_error(get("/v1/lookup?" + vq(kWeb) + "&src=192.0.2.7:1000&dport=81"), 400, "dport");
    expect_error(get("/v1/lookup?" + vq("198.51.100.99:80") + "&src=192.0.2.7:1000"), 404,
                 "no VIP");
}

TEST_F(ApiTest, LookupSourceHashAndWildcardPort) {
    json spec = web_vip();
    spec["port"] = 0;
    spec["hash"] = "source";
    spec["name"] = "any";
    ASSERT_EQ(post("/v1/vips", spec.dump()).status, 201);
    const std::string key = "198.51.100.10:0/tcp";

    expect_error(get("/v1/lookup?" + vq(key) + "&src=192.0.2.7:1000"), 400, "dport is required");
    Reply a = get("/v1/lookup?" + vq(key) + "&src=192.0.2.7:1000&dport=443");
    Reply b = get("/v1/lookup?" + vq(key) + "&src=192.0.2.7:2000&dport=8443");
    ASSERT_EQ(a.status, 200) << a.text;
    ASSERT_EQ(b.status, 200) << b.text;
    xlb_flow_key k{};
    inet_pton(AF_INET, "192.0.2.7", &k.src[0]);
    k.family = XLB_FAMILY_V4;
    EXPECT_EQ(a.body["hash"], xlb_flow_hash_src(&k, kSeed));
    EXPECT_EQ(a.body["backend"], b.body["backend"]) << "source hashing: one client, one backend";
}

TEST_F(ApiTest, LookupWithoutLiveTable) {
    std::uint32_t vip_id = vip(kWeb)["vip_id"];
    {
        std::lock_guard lock(dp.mu);
        dp.rings[vip_id].clear();
    }
    Reply empty = get("/v1/lookup?" + vq(kWeb) + "&src=192.0.2.7:1000");
    ASSERT_EQ(empty.status, 200) << empty.text;
    EXPECT_EQ(empty.body["outcome"], "drop_no_backend");
    EXPECT_TRUE(empty.body["backend"].is_null());
    {
        std::lock_guard lock(dp.mu);
        dp.rings.erase(vip_id);
    }
    EXPECT_EQ(get("/v1/lookup?" + vq(kWeb) + "&src=192.0.2.7:1000").body["outcome"],
              "drop_no_table");
}

TEST_F(ApiTest, StatsShowOutcomesAndVipCounters) {
    const std::uint32_t vip_id = vip(kWeb)["vip_id"];
    {
        std::lock_guard lock(dp.mu);
        dp.outcome_counts[XLB_OUT_TX] = 1000;
        dp.outcome_counts[XLB_OUT_DROP_NO_BACKEND] = 7;
        dp.vip_counters[vip_id] = {1010, 90000, 40, 960, 10};
        dp.hint_counters[vip_id] = 17;
    }
    Reply r = get("/v1/stats");
    ASSERT_EQ(r.status, 200) << r.text;
    // What SYN cookies add is SynCookieApiTest's.
    ASSERT_TRUE(r.body["vips"][0]["syn_cookies"].is_object()) << r.text;
    r.body["vips"][0].erase("syn_cookies");
    // What QUIC adds is QuicApiTest's: null for a TCP VIP.
    EXPECT_TRUE(r.body["vips"][0].contains("quic")) << r.text;
    EXPECT_EQ(r.body["vips"][0]["quic"], nullptr) << r.text;
    r.body["vips"][0].erase("quic");
    EXPECT_EQ(r.body["outcomes"].size(), static_cast<std::size_t>(XLB_OUT__MAX));
    EXPECT_EQ(r.body["outcomes"]["tx"], 1000);
    EXPECT_EQ(r.body["outcomes"]["drop_no_backend"], 7);
    EXPECT_EQ(r.body["outcomes"]["pass_not_vip"], 0);
    EXPECT_EQ(r.body["outcomes"]["drop_headroom"], 0);
    ASSERT_EQ(r.body["vips"].size(), 1u);
    EXPECT_EQ(r.body["vips"][0], (json{{"vip", kWeb},
                                       {"name", "web"},
                                       {"packets", 1010},
                                       {"bytes", 90000},
                                       {"new_flows", 40},
                                       {"conntrack_hits", 960},
                                       {"drops", 10},
                                       {"second_chance_hints", 17}}));
    EXPECT_EQ(get("/v1/stats?" + vq(kWeb)).body["vips"].size(), 1u);
    expect_error(get("/v1/stats?" + vq("198.51.100.99:80")), 404, "no VIP");
}

// ---- changing ---------------------------------------------------------------

TEST_F(ApiTest, AddAndDeleteVip) {
    json spec = {
        {"address", "2001:db8::10"},
        {"port", 443},
        {"name", "web6"},
        {"ring_size", 251},
        {"backends",
         {{{"address", "2001:db8:1::11"}}, {{"address", "2001:db8:1::12"}, {"weight", 50}}}}};
    Reply added = post("/v1/vips", spec.dump());
    ASSERT_EQ(added.status, 201) << added.text;
    const std::string key = "[2001:db8::10]:443/tcp";
    EXPECT_EQ(added.body["vip"], key);
    EXPECT_EQ(added.body["epoch"], 1);
    EXPECT_EQ(added.body["published"], true);
    EXPECT_EQ(added.body["backends"].size(), 2u);
    EXPECT_EQ(added.body["backends"][1]["weight"], 50);
    EXPECT_EQ(get("/v1/vips").body["vips"].size(), 2u);
    EXPECT_NE(read_file(settings.state_file).find("2001:db8:1::12"), std::string::npos)
        << "the change is persisted";

    Reply deleted = del("/v1/vip?" + vq(key));
    ASSERT_EQ(deleted.status, 200) << deleted.text;
    EXPECT_EQ(deleted.body, (json{{"vip", key}, {"deleted", true}}));
    EXPECT_EQ(get("/v1/vips").body["vips"].size(), 1u);
    EXPECT_EQ(read_file(settings.state_file).find("2001:db8:1::12"), std::string::npos);
    expect_rejected([&] { return del("/v1/vip?" + vq(key)); }, 404, "no VIP");
}

// Deleting and adding a VIP again through the API never gives an epoch a
// second table: the answers and the state file go on above the old epochs.
TEST_F(ApiTest, AVipDeletedAndAddedAgainGetsNewEpochs) {
    json spec = {{"address", "198.51.100.77"},
                 {"port", 80},
                 {"backends", {{{"address", "203.0.113.11"}}, {{"address", "203.0.113.12"}}}}};
    const std::string key = "198.51.100.77:80/tcp";
    std::uint64_t last = 0;
    std::set<std::uint64_t> checksums;
    for (int round = 0; round < 3; ++round) {
        spec["backends"][1]["weight"] = 10 + round;  // a different table each time
        Reply added = post("/v1/vips", spec.dump());
        ASSERT_EQ(added.status, 201) << added.text;
        const std::uint64_t epoch = added.body["epoch"];
        EXPECT_GT(epoch, last) << "round " << round << ": " << added.text;
        last = epoch;
        checksums.insert(std::stoull(added.body["checksum"].get<std::string>(), nullptr, 16));
        StateStore reader(settings.state_file);
        auto loaded = reader.load();
        ASSERT_TRUE(loaded && loaded->has_value());
        EXPECT_EQ((*loaded)->epochs.at(key), epoch) << "round " << round;
        ASSERT_EQ(del("/v1/vip?" + vq(key)).status, 200);
    }
    EXPECT_EQ(checksums.size(), 3u) << "the rounds were meant to publish three tables";
}

TEST_F(ApiTest, VipChangesAreValidated) {
    json good = web_vip();
    good["port"] = 8080;
    good["name"] = "alt";
    auto post_vip = [&](const std::string& body) {
        return [this, body] { return post("/v1/vips", body); };
    };

    expect_rejected(post_vip("{\"address\": \"198.51.100.20\", "), 400, "malformed JSON");
    expect_rejected(post_vip(""), 400, "missing request body");
    expect_rejected(post_vip("[1, 2]"), 400, "expected a VIP object");
    json unknown = good;
    unknown["colour"] = "blue";
    expect_rejected(post_vip(unknown.dump()), 400, "colour");
    json bad_address = good;
    bad_address["address"] = "198.51.100.300";
    expect_rejected(post_vip(bad_address.dump()), 400, "address");
    json bad_weight = good;
    bad_weight["backends"][0]["weight"] = 20000;
    expect_rejected(post_vip(bad_weight.dump()), 400, "backends[0].weight: found 20000");
    json not_prime = good;
    not_prime["ring_size"] = 250;
    expect_rejected(post_vip(not_prime.dump()), 400, "ring_size");
    json mixed = {
        {"address", "2001:db8::20"}, {"port", 80}, {"backends", {{{"address", "203.0.113.50"}}}}};
    expect_rejected(post_vip(mixed.dump()), 400, "IPv4 address 203.0.113.50 in an IPv6 VIP");
    json same_name = good;
    same_name["name"] = "web";
    expect_rejected(post_vip(same_name.dump()), 400, "name");
    expect_rejected(post_vip(json(web_vip()).dump()), 409, "already exists");

    ASSERT_EQ(post("/v1/vips", good.dump()).status, 201) << "the valid one is accepted";
}

// PATCH /v1/vip: the given settings of a VIP change, the others and its
// backends stay; persisted like every change.
TEST_F(ApiTest, PatchVipChangesTheGivenSettings) {
    const std::uint64_t epoch = vip(kWeb)["epoch"];
    const std::string path = "/v1/vip?" + vq(kWeb);
    Reply r = patch(path, R"({"health_check": {"type": "tcp", "interval": "2s"},
                              "slow_start": {"window": "5s"}, "announce": "always",
                              "conntrack_idle_timeout": "5m", "panic_threshold": 0.25})");
    ASSERT_EQ(r.status, 200) << r.text;
    const json& spec = r.body["spec"];
    EXPECT_EQ(spec["health_check"]["type"], "tcp");
    EXPECT_EQ(spec["health_check"]["interval"], "2s");
    EXPECT_EQ(spec["health_check"]["timeout"], "1s") << "not given: kept";
    EXPECT_EQ(spec["slow_start"]["window"], "5s");
    EXPECT_DOUBLE_EQ(spec["slow_start"]["floor"].get<double>(), 0.1);
    EXPECT_EQ(spec["announce"], "always");
    EXPECT_EQ(spec["conntrack_idle_timeout"], "5m");
    EXPECT_DOUBLE_EQ(spec["panic_threshold"].get<double>(), 0.25);
    EXPECT_EQ(spec["ring_size"], 251);
    EXPECT_EQ(spec["name"], "web");
    EXPECT_EQ(r.body["backends"].size(), 3u) << "the backends stay";
    std::set<std::string> changed;
    for (const json& c : r.body["changes"]) changed.insert(c["key"].get<std::string>());
    EXPECT_EQ(changed, (std::set<std::string>{"health_check.type", "health_check.interval",
                                              "slow_start.window", "announce",
                                              "conntrack_idle_timeout", "panic_threshold"}));
    EXPECT_GE(r.body["epoch"].get<std::uint64_t>(), epoch);
    EXPECT_NE(read_file(settings.state_file).find("\"always\""), std::string::npos) << "persisted";
    EXPECT_EQ(vip(kWeb)["spec"], spec);

    // Checked now: its backends are no longer "unchecked".
    for (const json& b : get("/v1/backends?" + vq(kWeb)).body["backends"])
        EXPECT_NE(b["health"], "unchecked") << b.dump();
}

// A change that moves established flows needs allow_disruptive=1, as a
// reload does; the refusal changes nothing.
TEST_F(ApiTest, PatchVipRefusesADisruptiveChangeUnlessAllowed) {
    const std::string path = "/v1/vip?" + vq(kWeb);
    expect_rejected([&] { return patch(path, R"({"ring_size": 509})"); }, 409,
                    "ring_size 251 -> 509: its flows move to new ring slots");
    expect_rejected([&] { return patch(path, R"({"hash": "source", "name": "www"})"); }, 409,
                    "hash 5tuple -> source");
    const std::uint64_t epoch = vip(kWeb)["epoch"];
    Reply r = patch(path + "&allow_disruptive=1", R"({"ring_size": 509})");
    ASSERT_EQ(r.status, 200) << r.text;
    EXPECT_EQ(r.body["spec"]["ring_size"], 509);
    EXPECT_GT(r.body["epoch"].get<std::uint64_t>(), epoch) << "a new table";
    EXPECT_EQ(get("/v1/table?" + vq(kWeb)).body["ring_size"], 509);
    ASSERT_EQ(r.body["changes"].size(), 1u);
    EXPECT_EQ(r.body["changes"][0], (json{{"key", "ring_size"}, {"from", 251}, {"to", 509}}));
}

TEST_F(ApiTest, PatchVipValidatesLikeTheFile) {
    const std::string path = "/v1/vip?" + vq(kWeb);
    expect_rejected(
        [&] { return patch(path, R"({"health_check": {"type": "tcp", "timeout": "20s"}})"); }, 400,
        "health_check.timeout");
    // invalid before disruptive: nothing to confirm
    expect_rejected([&] { return patch(path, R"({"ring_size": 250})"); }, 400, "ring_size: ");
    expect_rejected([&] { return patch(path, R"({"health_check": {"type": "icmp"}})"); }, 400,
                    "health_check.type: found \"icmp\"");
    expect_rejected([&] { return patch(path, R"({"colour": "blue"})"); }, 400, "colour");
    expect_rejected([&] { return patch(path, R"({"port": 81})"); }, 400, "port: a VIP's address");
    expect_rejected([&] { return patch(path, R"({"backends": []})"); }, 400, "/v1/backends");
    expect_rejected([&] { return patch(path, R"({})"); }, 400, "at least one VIP setting");
    expect_rejected([&] { return patch(path, R"([1])"); }, 400, "expected an object");
    expect_rejected([&] { return patch(path + "&dry_run=maybe", R"({"name": "x"})"); }, 400,
                    "dry_run: found \"maybe\"");
    expect_rejected([&] { return patch("/v1/vip?" + vq("198.51.100.99:80"), R"({"name": "x"})"); },
                    404, "no VIP 198.51.100.99:80/tcp");
}

// Dry runs of VIP changes: validated like the real change, nothing changed.
TEST_F(ApiTest, VipDryRunsChangeNothing) {
    const World before = world();
    Reply r = patch("/v1/vip?" + vq(kWeb) + "&dry_run=1", R"({"name": "www"})");
    ASSERT_EQ(r.status, 200) << r.text;
    EXPECT_EQ(r.body["dry_run"], true);
    EXPECT_EQ(r.body["changes"], json::parse(R"([{"key": "name", "from": "web", "to": "www"}])"));
    EXPECT_EQ(r.body["spec"]["name"], "www");
    expect_rejected(
        [&] { return patch("/v1/vip?" + vq(kWeb) + "&dry_run=1", R"({"ring_size": 509})"); }, 409,
        "ring_size 251 -> 509");

    json good = {{"address", "198.51.100.11"}, {"port", 443}, {"ring_size", 251}};
    r = post("/v1/vips?dry_run=1", good.dump());
    ASSERT_EQ(r.status, 200) << r.text;
    EXPECT_EQ(r.body["vip"], "198.51.100.11:443/tcp");
    EXPECT_EQ(r.body["dry_run"], true);
    EXPECT_EQ(r.body["spec"]["ring_size"], 251);
    good["ring_size"] = 250;
    expect_error(post("/v1/vips?dry_run=1", good.dump()), 400, "ring_size");
    expect_error(post("/v1/vips?dry_run=1", json(web_vip()).dump()), 409, "already exists");
    EXPECT_EQ(world(), before);
}

TEST_F(ApiTest, AddPatchAndDeleteBackends) {
    const std::uint64_t epoch = vip(kWeb)["epoch"];
    const std::string path = "/v1/backends?" + vq(kWeb);

    Reply added = post(path, R"({"address": "203.0.113.14", "weight": 200})");
    ASSERT_EQ(added.status, 201) << added.text;
    EXPECT_EQ(added.body["epoch"], epoch + 1);
    ASSERT_EQ(added.body["backends"].size(), 4u);
    EXPECT_EQ(added.body["backends"][3]["address"], "203.0.113.14");
    EXPECT_EQ(added.body["backends"][3]["weight"], 200);
    EXPECT_EQ(added.body["backends"][3]["in_table"], true);

    Reply weighted = patch(path + "&address=203.0.113.14", R"({"weight": 50})");
    ASSERT_EQ(weighted.status, 200) << weighted.text;
    EXPECT_EQ(weighted.body["epoch"], epoch + 2);
    EXPECT_EQ(weighted.body["backends"][3]["weight"], 50);
    EXPECT_EQ(weighted.body["backends"][3]["effective_weight"], 50 * control::kWeightScale);

    Reply drained = patch(path + "&address=203.0.113.11", R"({"state": "drain"})");
    ASSERT_EQ(drained.status, 200) << drained.text;
    EXPECT_EQ(drained.body["epoch"], epoch + 3);
    EXPECT_EQ(drained.body["backends"][0]["state"], "drain");
    EXPECT_EQ(drained.body["backends"][0]["in_table"], false);
    EXPECT_EQ(drained.body["backends"][0]["slots"], 0);

    Reply enabled = patch(path + "&address=203.0.113.11", R"({"state": "active", "weight": 100})");
    ASSERT_EQ(enabled.status, 200) << enabled.text;
    EXPECT_EQ(enabled.body["backends"][0]["state"], "active");
    EXPECT_EQ(enabled.body["backends"][0]["in_table"], true);

    Reply removed = del(path + "&address=203.0.113.14");
    ASSERT_EQ(removed.status, 200) << removed.text;
    EXPECT_EQ(removed.body["backends"].size(), 3u);
    const std::string state = read_file(settings.state_file);
    EXPECT_EQ(state.find("203.0.113.14"), std::string::npos) << state;
}

TEST_F(ApiTest, BackendChangesAreValidated) {
    const std::string path = "/v1/backends?" + vq(kWeb);
    const std::string one = path + "&address=203.0.113.11";
    auto p = [&](const std::string& url, const std::string& body) {
        return [this, url, body] { return post(url, body); };
    };
    auto pa = [&](const std::string& url, const std::string& body) {
        return [this, url, body] { return patch(url, body); };
    };
    auto d = [&](const std::string& url) { return [this, url] { return del(url); }; };

    expect_rejected(p(path, "{\"address\": "), 400, "malformed JSON");
    expect_rejected(p(path, R"({"address": "203.0.113.20", "colour": "red"})"), 400, "colour");
    expect_rejected(p(path, R"({"address": "not-an-ip"})"), 400, "address");
    expect_rejected(p(path, R"({"weight": 10})"), 400, "address");
    expect_rejected(p(path, R"({"address": "203.0.113.20", "weight": 10001})"), 400,
                    "weight: found 10001, expected 0-10000");
    expect_rejected(p(path, R"({"address": "203.0.113.20", "weight": "heavy"})"), 400, "weight");
    expect_rejected(p(path, R"({"address": "203.0.113.11"})"), 409,
                    "already has backend 203.0.113.11");
    expect_rejected(p("/v1/backends?" + vq("198.51.100.99:80"), R"({"address": "203.0.113.20"})"),
                    404, "no VIP");
    expect_rejected(p("/v1/backends", R"({"address": "203.0.113.20"})"), 400,
                    "missing query parameter vip");

    expect_rejected(pa(one, R"({"weight": 20000})"), 400, "weight: found 20000");
    expect_rejected(pa(one, R"({"weight": -1})"), 400, "weight: found -1");
    expect_rejected(pa(one, R"({"weight": 1.5})"), 400, "weight");
    expect_rejected(pa(one, R"({"state": "sleeping"})"), 400, "state");
    expect_rejected(pa(one, R"({"colour": "red"})"), 400, "unknown field \"colour\"");
    expect_rejected(pa(one, R"({})"), 400, "nothing to change");
    expect_rejected(pa(one, "weight=5"), 400, "malformed JSON");
    expect_rejected(pa(path + "&address=203.0.113.99", R"({"weight": 5})"), 404,
                    "no backend 203.0.113.99");
    expect_rejected(pa(path + "&address=nope", R"({"weight": 5})"), 400, "address");
    expect_rejected(pa(path, R"({"weight": 5})"), 400, "missing query parameter address");

    expect_rejected(d(path + "&address=203.0.113.99"), 404, "no backend");
    expect_rejected(d("/v1/backends?" + vq("198.51.100.99:80") + "&address=203.0.113.11"), 404,
                    "no VIP");
}

TEST_F(ApiTest, IPv6VipRejectsIPv4Backend) {
    json spec = {{"address", "2001:db8::10"},
                 {"port", 443},
                 {"ring_size", 251},
                 {"backends", {{{"address", "2001:db8:1::11"}}}}};
    ASSERT_EQ(post("/v1/vips", spec.dump()).status, 201);
    expect_rejected(
        [&] {
            return post("/v1/backends?" + vq("[2001:db8::10]:443/tcp"),
                        R"({"address": "203.0.113.20"})");
        },
        400, "IPv4 address 203.0.113.20 in an IPv6 VIP");
}

// --- QUIC-LB configs and server ids through the API ----------------------------

// quic on a VIP and server_id on its backends: decoded and checked as the
// file's, shown as a list (never a key), changed by PATCH and persisted.
TEST_F(ApiTest, QuicConfigsAndServerIdsRoundTrip) {
    const json spec = json::parse(R"({
        "address": "198.51.100.20", "port": 443, "protocol": "udp", "ring_size": 251,
        "quic": {"server_id_length": 1, "nonce_length": 8, "config_id": 2},
        "backends": [{"address": "203.0.113.21", "server_id": 7},
                     {"address": "203.0.113.22"}]})");
    Reply added = post("/v1/vips", spec.dump());
    ASSERT_EQ(added.status, 201) << added.text;
    const std::string key = "198.51.100.20:443/udp";
    const json got = vip(key)["spec"];
    EXPECT_EQ(got["quic"], json::parse(R"([{"config_id": 2, "server_id_length": 1,
                                            "nonce_length": 8, "mode": "plaintext"}])"))
        << "always a list";
    EXPECT_EQ(got["backends"][0]["server_id"], 7);
    EXPECT_FALSE(got["backends"][1].contains("server_id")) << "written only when set";
    EXPECT_EQ(added.body["spec"], got);
    // The backends' rows carry it too (xlbctl backend list's column).
    const json rows = get("/v1/backends?" + vq(key)).body["backends"];
    EXPECT_EQ(rows[0]["server_id"], 7);
    EXPECT_FALSE(rows[1].contains("server_id"));

    const std::string path = "/v1/backends?" + vq(key);
    auto pa = [&](const std::string& address, const std::string& body) {
        return [this, path, address, body] { return patch(path + "&address=" + address, body); };
    };
    const std::string invalid = "invalid backend for VIP 198.51.100.20:443/udp: ";
    expect_rejected(pa("203.0.113.22", R"({"server_id": 7})"), 400,
                    invalid + "server_id: found 7 again (also backends[0])");
    expect_rejected(pa("203.0.113.22", R"({"server_id": 256})"), 400,
                    invalid +
                        "server_id: found 256, expected below 256 (quic has "
                        "server_id_length 1)");
    expect_rejected(pa("203.0.113.22", R"({"server_id": -3})"), 400,
                    "server_id: found -3, expected a non-negative integer");
    expect_rejected([&] { return post(path, R"({"address": "203.0.113.23", "server_id": 7})"); },
                    400, invalid + "server_id: found 7 again (also backends[0])");

    Reply set = pa("203.0.113.22", R"({"server_id": 255})")();
    ASSERT_EQ(set.status, 200) << set.text;
    EXPECT_EQ(set.body["spec"]["backends"][1]["server_id"], 255);
    EXPECT_NE(read_file(settings.state_file).find("server_id"), std::string::npos);
    Reply cleared = pa("203.0.113.21", R"({"server_id": null})")();
    ASSERT_EQ(cleared.status, 200) << cleared.text;
    EXPECT_FALSE(cleared.body["spec"]["backends"][0].contains("server_id"));

    // A VIP change is checked as the file is: the id no longer fits.
    expect_rejected(
        [&] {
            return patch("/v1/vip?" + vq(key),
                         R"({"quic": [{"server_id_length": 1, "nonce_length": 8},
                                      {"server_id_length": 2, "nonce_length": 8}]})");
        },
        400, "quic[1].config_id: found 0 again (also quic[0])");
    Reply two = patch("/v1/vip?" + vq(key),
                      R"({"quic": [{"server_id_length": 2, "nonce_length": 8, "config_id": 1},
                                   {"server_id_length": 1, "nonce_length": 8}]})");
    ASSERT_EQ(two.status, 200) << two.text;
    EXPECT_EQ(vip(key)["spec"]["quic"].size(), 2u);
    expect_rejected(
        [&] {
            return post("/v1/vips", R"({"address": "198.51.100.21", "port": 443,
                "quic": {"server_id_length": 2, "nonce_length": 8}})");
        },
        400,
        "invalid VIP 198.51.100.21:443/tcp: quic: found on a tcp VIP, expected quic only "
        "on udp VIPs");
    expect_rejected(
        [&] {
            return post("/v1/vips", R"({"address": "198.51.100.21", "port": 443,
                "protocol": "udp", "quic": {"server_id_length": 2, "nonce_length": 8,
                "mode": "encrypted", "key_file": "/nonexistent/quic.key"}})");
        },
        400, "quic.mode: found encrypted with server_id_length 2 + nonce_length 8 = 10");
}

// --- SYN cookies and source lists through the API -----------------------------

// The VIP keys syn_cookies, allow_sources, deny_sources and the backends'
// cookie_acks: decoded and checked as the file's, persisted, and handed to
// the data plane (flags and source-range entries).
class CookieApiTest : public ApiTest {
protected:
    void configure() override { settings.encap = config::Encap::kGue; }

    std::uint32_t flags_of(const std::string& key) {
        const std::uint32_t id = vip(key)["vip_id"];
        std::lock_guard lock(dp.mu);
        return dp.vip_flags.at(id);
    }
    std::optional<std::vector<datapath::SourceRangeEntry>> ranges_of(const std::string& key) {
        const std::uint32_t id = vip(key)["vip_id"];
        std::lock_guard lock(dp.mu);
        auto it = dp.source_ranges.find(id);
        if (it == dp.source_ranges.end()) return std::nullopt;
        return it->second;
    }
    // The entries the VIP's spec as the API shows it must have.
    std::vector<datapath::SourceRangeEntry> entries_for(const std::string& key) {
        const json v = vip(key);
        auto spec = config::vip_from_json(v["spec"]);
        EXPECT_TRUE(spec) << spec.error();
        if (!spec) return {};
        return datapath::source_range_entries(*spec, v["vip_id"].get<std::uint32_t>());
    }
};

TEST_F(CookieApiTest, AVipWithCookiesAndSourceListsRoundTrips) {
    const json spec = json::parse(R"({
        "address": "198.51.100.20", "port": 443, "ring_size": 251,
        "syn_cookies": "always",
        "allow_sources": ["192.0.2.0/24", "198.51.100.7"],
        "deny_sources": ["192.0.2.128/25"],
        "backends": [{"address": "203.0.113.21", "cookie_acks": true},
                     {"address": "203.0.113.22", "state": "disabled"}]})");
    Reply added = post("/v1/vips", spec.dump());
    ASSERT_EQ(added.status, 201) << added.text;
    const std::string key = "198.51.100.20:443/tcp";
    const json got = vip(key)["spec"];
    EXPECT_EQ(got["syn_cookies"], "always");
    EXPECT_EQ(got["allow_sources"], json::parse(R"(["192.0.2.0/24", "198.51.100.7/32"])"))
        << "an address alone is its /32";
    EXPECT_EQ(got["deny_sources"], json::parse(R"(["192.0.2.128/25"])"));
    EXPECT_EQ(got["backends"][0]["cookie_acks"], true);
    EXPECT_FALSE(got["backends"][1].contains("cookie_acks")) << "written only when true";
    EXPECT_EQ(added.body["spec"], got);
    // What GET shows is what POST takes: adding it again elsewhere gives it back.
    json again = got;
    again["port"] = 444;
    ASSERT_EQ(post("/v1/vips", again.dump()).status, 201);
    json second = vip("198.51.100.20:444/tcp")["spec"];
    second["port"] = 443;
    EXPECT_EQ(second, got);

    // Persisted, and given to the data path.
    StateStore reader(settings.state_file);
    auto loaded = reader.load();
    ASSERT_TRUE(loaded && loaded->has_value());
    const auto saved = std::find_if((*loaded)->vips.begin(), (*loaded)->vips.end(),
                                    [&](const config::VipSpec& v) { return v.key() == key; });
    ASSERT_NE(saved, (*loaded)->vips.end());
    EXPECT_EQ(json(*saved), got);
    EXPECT_EQ(flags_of(key),
              static_cast<std::uint32_t>(XLB_VIP_F_COOKIES_ALWAYS | XLB_VIP_F_SOURCE_RANGES));
    auto ranges = ranges_of(key);
    ASSERT_TRUE(ranges);
    EXPECT_EQ(*ranges, entries_for(key));
    EXPECT_EQ(ranges->size(), 4u) << "0/0 deny, two allows, the carved-out deny";
}

TEST_F(CookieApiTest, BadSourceListsAre400NamingTheField) {
    auto post_vip = [&](const std::string& body) {
        return [this, body] { return post("/v1/vips", body); };
    };
    const json base = {{"address", "198.51.100.20"}, {"port", 443}, {"ring_size", 251}};
    json host_bits = base;
    host_bits["allow_sources"] = {"192.0.2.0/24", "10.0.0.1/8"};
    expect_rejected(post_vip(host_bits.dump()), 400,
                    "allow_sources[1]: '10.0.0.1/8' has host bits set");
    json not_prefix = base;
    not_prefix["deny_sources"] = {"192.0.2.0/33"};
    expect_rejected(post_vip(not_prefix.dump()), 400, "deny_sources[0]");
    json other_family = base;
    other_family["deny_sources"] = {"2001:db8::/32"};
    expect_rejected(post_vip(other_family.dump()), 400,
                    "deny_sources[0]: found 2001:db8::/32, an IPv6 prefix, expected IPv4");
    json v4_in_v6 = {{"address", "2001:db8::20"},
                     {"port", 443},
                     {"ring_size", 251},
                     {"allow_sources", {"192.0.2.0/24"}}};
    expect_rejected(post_vip(v4_in_v6.dump()), 400,
                    "allow_sources[0]: found 192.0.2.0/24, an IPv4 prefix, expected IPv6");
    json mode = base;
    mode["syn_cookies"] = "sometimes";
    expect_rejected(post_vip(mode.dump()), 400, "syn_cookies: found \"sometimes\"");
    // The same through PATCH /v1/vip.
    expect_rejected(
        [&] { return patch("/v1/vip?" + vq(kWeb), R"({"allow_sources": ["2001:db8::/32"]})"); },
        400, "allow_sources[0]: found 2001:db8::/32, an IPv6 prefix");
}

// encap ipip (ApiTest's): cookies cannot run, and asking for them is an error.
TEST_F(ApiTest, SynCookiesAlwaysWithIpipIs400) {
    json spec = {{"address", "198.51.100.20"},
                 {"port", 443},
                 {"ring_size", 251},
                 {"syn_cookies", "always"},
                 {"backends", {{{"address", "203.0.113.21"}, {"cookie_acks", true}}}}};
    expect_rejected([&] { return post("/v1/vips", spec.dump()); }, 400,
                    "syn_cookies: found always with encap: ipip, expected encap: gue");
    expect_rejected([&] { return patch("/v1/vip?" + vq(kWeb), R"({"syn_cookies": "auto"})"); }, 400,
                    "syn_cookies: found auto with encap: ipip");
    // Unset is no promise: the VIP runs without cookies.
    spec.erase("syn_cookies");
    ASSERT_EQ(post("/v1/vips", spec.dump()).status, 201);
    const std::uint32_t id = vip("198.51.100.20:443/tcp")["vip_id"];
    std::lock_guard lock(dp.mu);
    EXPECT_EQ(dp.vip_flags.at(id), 0u);
}

// A reload-free narrowing: PATCH /v1/vip with a smaller allow list is
// applied (new entries in the data plane), not refused as disruptive; an
// empty list opens the VIP again.
TEST_F(CookieApiTest, NarrowingAllowSourcesIsApplied) {
    const std::string path = "/v1/vip?" + vq(kWeb);
    Reply wide = patch(path, R"({"allow_sources": ["192.0.2.0/24", "198.18.0.0/15"]})");
    ASSERT_EQ(wide.status, 200) << wide.text;
    const auto wide_entries = ranges_of(kWeb);
    ASSERT_TRUE(wide_entries);
    EXPECT_EQ(*wide_entries, entries_for(kWeb));
    EXPECT_NE(flags_of(kWeb) & XLB_VIP_F_SOURCE_RANGES, 0u);

    Reply narrow = patch(path, R"({"allow_sources": ["192.0.2.0/25"]})");
    ASSERT_EQ(narrow.status, 200) << narrow.text;
    EXPECT_EQ(narrow.body["spec"]["allow_sources"], json::parse(R"(["192.0.2.0/25"])"));
    EXPECT_EQ(narrow.body["changes"],
              json::parse(R"([{"key": "allow_sources", "from": ["192.0.2.0/24", "198.18.0.0/15"],
                               "to": ["192.0.2.0/25"]}])"));
    EXPECT_EQ(vip(kWeb)["spec"]["allow_sources"], json::parse(R"(["192.0.2.0/25"])"));
    const auto narrowed = ranges_of(kWeb);
    ASSERT_TRUE(narrowed);
    EXPECT_EQ(*narrowed, entries_for(kWeb));
    EXPECT_NE(*narrowed, *wide_entries);
    EXPECT_NE(read_file(settings.state_file).find("192.0.2.0/25"), std::string::npos)
        << "persisted";

    Reply open = patch(path, R"({"allow_sources": []})");
    ASSERT_EQ(open.status, 200) << open.text;
    EXPECT_FALSE(open.body["spec"].contains("allow_sources"));
    EXPECT_FALSE(ranges_of(kWeb)) << "the entries went with the list";
    EXPECT_EQ(flags_of(kWeb) & XLB_VIP_F_SOURCE_RANGES, 0u);
}

// cookie_acks at runtime: PATCH /v1/backends takes it, and every change is
// checked against the VIP's explicit syn_cookies like the file.
TEST_F(CookieApiTest, CookieAcksChangesAreCheckedAgainstTheVipsCookies) {
    const json spec = json::parse(R"({
        "address": "198.51.100.20", "port": 443, "ring_size": 251, "syn_cookies": "always",
        "backends": [{"address": "203.0.113.21", "cookie_acks": true},
                     {"address": "203.0.113.22", "state": "disabled"}]})");
    ASSERT_EQ(post("/v1/vips", spec.dump()).status, 201);
    const std::string key = "198.51.100.20:443/tcp";
    const std::string path = "/v1/backends?" + vq(key);
    auto pa = [&](const std::string& address, const std::string& body) {
        return [this, path, address, body] { return patch(path + "&address=" + address, body); };
    };
    const std::string lacks =
        "invalid backend for VIP 198.51.100.20:443/tcp: syn_cookies: found always but backend ";
    expect_rejected(pa("203.0.113.21", R"({"cookie_acks": false})"), 400,
                    lacks + "203.0.113.21 (backends[0]) lacks cookie_acks: true");
    // Enabling the disabled backend that lacks it is refused too.
    expect_rejected(pa("203.0.113.22", R"({"state": "active"})"), 400,
                    lacks + "203.0.113.22 (backends[1]) lacks cookie_acks: true");
    expect_rejected([&] { return post(path, R"({"address": "203.0.113.23"})"); }, 400,
                    lacks + "203.0.113.23 (backends[2]) lacks cookie_acks: true");
    expect_rejected(pa("203.0.113.21", R"({"cookie_acks": "yes"})"), 400,
                    "cookie_acks: found \"yes\", expected true or false");

    Reply both = pa("203.0.113.22", R"({"state": "active", "cookie_acks": true})")();
    ASSERT_EQ(both.status, 200) << both.text;
    EXPECT_EQ(both.body["spec"]["backends"][1]["cookie_acks"], true);
    EXPECT_EQ(both.body["backends"][1]["state"], "active");
    Reply added = post(path, R"({"address": "203.0.113.23", "cookie_acks": true})");
    ASSERT_EQ(added.status, 201) << added.text;
    EXPECT_EQ(added.body["spec"]["backends"][2]["cookie_acks"], true);
    // Disabled, a backend may lack it.
    ASSERT_EQ(pa("203.0.113.23", R"({"state": "disabled"})")().status, 200);
    Reply dropped = pa("203.0.113.23", R"({"cookie_acks": false})")();
    ASSERT_EQ(dropped.status, 200) << dropped.text;
    EXPECT_FALSE(dropped.body["spec"]["backends"][2].contains("cookie_acks"));
    EXPECT_EQ(flags_of(key), static_cast<std::uint32_t>(XLB_VIP_F_COOKIES_ALWAYS));
}

// Unset syn_cookies: auto once every backend takes cookie ACKs; the data
// path's flags follow each change.
TEST_F(CookieApiTest, CookieAcksOnEveryBackendTurnsAutoOn) {
    const std::string path = "/v1/backends?" + vq(kWeb);
    EXPECT_EQ(flags_of(kWeb), 0u);
    for (const char* b : {"203.0.113.11", "203.0.113.12", "203.0.113.13"}) {
        EXPECT_EQ(flags_of(kWeb) & XLB_VIP_F_COOKIES_AUTO, 0u) << "before " << b;
        Reply r = patch(path + "&address=" + b, R"({"cookie_acks": true})");
        ASSERT_EQ(r.status, 200) << r.text;
    }
    EXPECT_EQ(flags_of(kWeb), static_cast<std::uint32_t>(XLB_VIP_F_COOKIES_AUTO));
    for (const json& b : vip(kWeb)["spec"]["backends"]) EXPECT_EQ(b["cookie_acks"], true);
    Reply off = patch(path + "&address=203.0.113.12", R"({"cookie_acks": false})");
    ASSERT_EQ(off.status, 200) << off.text;
    EXPECT_EQ(flags_of(kWeb), 0u);
    EXPECT_NE(read_file(settings.state_file).find("cookie_acks"), std::string::npos);
}

// The audit log (audit.h): one notice per change with the caller's uid and
// user name (SO_PEERCRED), what changed, the result and X-Xlb-Reason; read
// from the plain sink's lines.
#define EXPECT_HAS(text, needle) \
    EXPECT_NE(std::string(text).find(needle), std::string::npos) << (text)

class AuditLog {
public:
    AuditLog() : file_(std::tmpfile()), saved_(spdlog::default_logger()) {
        auto logger =
            std::make_shared<spdlog::logger>("audit-test", std::make_shared<log::Sink>(file_));
        spdlog::set_default_logger(std::move(logger));
    }
    ~AuditLog() {
        spdlog::set_default_logger(saved_);
        std::fclose(file_);
    }
    // The lines logged so far that are audit entries.
    std::vector<std::string> entries() {
        std::fflush(file_);
        std::rewind(file_);
        std::vector<std::string> out;
        char buf[8192];
        while (std::fgets(buf, sizeof buf, file_))
            if (std::string line = buf; line.find(" notice: audit: ") != std::string::npos)
                out.push_back(line);
        return out;
    }

private:
    std::FILE* file_;
    std::shared_ptr<spdlog::logger> saved_;
};

TEST_F(ApiTest, EveryChangeIsAuditedOnceWithCallerDiffResultAndReason) {
    AuditLog log;
    const std::string path = "/v1/backends?" + vq(kWeb) + "&address=203.0.113.11";
    auto r = client->Patch(path.c_str(), httplib::Headers{{"X-Xlb-Reason", "canary%20rollout"}},
                           R"({"weight": 7})", "application/json");
    ASSERT_TRUE(r);
    ASSERT_EQ(r->status, 200) << r->body;
    std::vector<std::string> lines = log.entries();
    ASSERT_EQ(lines.size(), 1u);
    const std::string& entry = lines[0];
    const std::string uid = std::to_string(::getuid());
    EXPECT_HAS(entry, "audit: PATCH /v1/backends?");
    EXPECT_HAS(entry, " by uid " + uid);
    EXPECT_HAS(entry, " uid=" + uid + " ");
    if (const std::string name = user_name(::getuid()); !name.empty()) {
        EXPECT_HAS(entry, "uid " + uid + " (" + name + ")");
        EXPECT_HAS(entry, " user=" + name + " ");
    }
    EXPECT_HAS(entry, "pid=" + std::to_string(::getpid()));
    // the diff: the VIP changed, the backend's weight from 100 to 7
    EXPECT_HAS(entry,
               "added none; removed none; changed 198.51.100.10:80/tcp (backend "
               "203.0.113.11 weight 100 -> 7)");
    EXPECT_HAS(entry, "; result: ok (epoch ");
    EXPECT_HAS(entry, "; reason: \"canary rollout\"");
    EXPECT_HAS(entry, " event=api_change vip=198.51.100.10:80/tcp backend=203.0.113.11 ");
    EXPECT_HAS(entry, " result=ok reason=\"canary rollout\"\n");

    // refused: logged once too, with the error and no diff
    Reply bad = post("/v1/backends?" + vq(kWeb), R"({"address": "203.0.113.11"})");
    ASSERT_EQ(bad.status, 409) << bad.text;
    lines = log.entries();
    ASSERT_EQ(lines.size(), 2u);
    EXPECT_HAS(lines[1], "audit: POST /v1/backends?vip=198.51.100.10:80/tcp by uid " + uid);
    EXPECT_HAS(lines[1], ": result: error: 409 VIP 198.51.100.10:80/tcp already has backend");
    EXPECT_HAS(lines[1], " result=error");
    EXPECT_EQ(lines[1].find("changed 198.51.100.10"), std::string::npos) << lines[1];
    EXPECT_EQ(lines[1].find("reason="), std::string::npos) << lines[1];

    // a VIP removed: its key in the diff
    ASSERT_EQ(del("/v1/vip?" + vq(kWeb)).status, 200);
    lines = log.entries();
    ASSERT_EQ(lines.size(), 3u);
    EXPECT_HAS(lines[2], "added none; removed 198.51.100.10:80/tcp; changed none; result: ok");

    // a dry run changes nothing and is not audited
    const json spec = {{"address", "198.51.100.20"},
                       {"port", 80},
                       {"ring_size", 251},
                       {"backends", {{{"address", "203.0.113.21"}}}}};
    ASSERT_EQ(post("/v1/vips", spec.dump()).status, 201);
    ASSERT_EQ(log.entries().size(), 4u);
    EXPECT_HAS(log.entries()[3], "added 198.51.100.20:80/tcp; removed none; changed none");
    ASSERT_EQ(post("/v1/backends?" + vq("198.51.100.20:80/tcp") + "&dry_run=1",
                   R"({"address": "203.0.113.30"})")
                  .status,
              200);
    EXPECT_EQ(log.entries().size(), 4u);
}

TEST_F(ApiTest, AReasonThatIsNotOneLineIsRefused) {
    AuditLog log;
    const std::string path = "/v1/backends?" + vq(kWeb) + "&address=203.0.113.11";
    for (const char* reason : {"two%0Alines", "bad%zz", "50%"}) {
        SCOPED_TRACE(reason);
        expect_rejected(
            [&] {
                return to_reply(client->Patch(path.c_str(),
                                              httplib::Headers{{"X-Xlb-Reason", reason}},
                                              R"({"weight": 7})", "application/json"));
            },
            400, "X-Xlb-Reason: ");
    }
    const std::string long_reason(kMaxReasonBytes + 1, 'x');
    expect_rejected(
        [&] {
            return to_reply(client->Patch(path.c_str(),
                                          httplib::Headers{{"X-Xlb-Reason", long_reason}},
                                          R"({"weight": 7})", "application/json"));
        },
        400, "expected at most 1024");
    // each refusal is audited, as a refused change
    EXPECT_EQ(log.entries().size(), 4u);
}

TEST_F(ApiTest, UnknownPathsAndWrongMethods) {
    expect_rejected([&] { return get("/v1/nothing"); }, 404, "no such endpoint");
    expect_rejected([&] { return post("/v2/vips", "{}"); }, 404, "no such endpoint");
    World before = world();
    auto put = to_reply(client->Put("/v1/vips", "{}", "application/json"));
    expect_error(put, 405, "not allowed");
    Reply del_vips = del("/v1/vips");
    expect_error(del_vips, 405, "GET, POST");
    expect_error(patch("/v1/status", "{}"), 405, "not allowed");
    expect_error(post("/v1/lookup?" + vq(kWeb), "{}"), 405, "not allowed");
    EXPECT_EQ(world(), before);
    auto head = client->Head("/v1/status");
    ASSERT_TRUE(head);
    EXPECT_EQ(head->status, 200);
}

// ---- persistence -----------------------------------------------------------

TEST_F(ApiTest, FailedPersistenceChangesNothing) {
    // The temporary file's name is taken by a directory: the write fails.
    fs::create_directories(settings.state_file + ".tmp");
    const std::string one = "/v1/backends?" + vq(kWeb) + "&address=203.0.113.11";
    expect_rejected([&] { return patch(one, R"({"weight": 7})"); }, 500, settings.state_file);
    EXPECT_EQ(vip(kWeb)["backends"][0]["weight"], 100);
    fs::remove_all(settings.state_file + ".tmp");
    Reply ok = patch(one, R"({"weight": 7})");
    ASSERT_EQ(ok.status, 200) << ok.text;
    EXPECT_EQ(ok.body["backends"][0]["weight"], 7);
    EXPECT_EQ(ok.body["publish"], "live");
}

// Persisted and handed to the reconciler, but the kernel refused the table:
// 502 "publish failed" with the reason, the VIP object and persisted: true
// (not 202, which means "pending, nothing failed"); the reconciler keeps
// trying and the change goes live.
TEST_F(ApiTest, PersistedButPublishFailed) {
    const std::string one = "/v1/backends?" + vq(kWeb) + "&address=203.0.113.11";
    dp.fail_publish = true;
    Reply r = patch(one, R"({"weight": 60})");
    EXPECT_EQ(r.status, 502) << r.text;
    EXPECT_EQ(r.body["publish"], "failed");
    EXPECT_EQ(r.body["persisted"], true);
    EXPECT_EQ(r.body["published"], false);
    EXPECT_NE(r.body["last_error"].get<std::string>().find("injected"), std::string::npos)
        << r.text;
    EXPECT_NE(r.body["error"].get<std::string>().find("persisted, but its publish failed"),
              std::string::npos)
        << r.text;
    EXPECT_EQ(r.body["epoch"], 1);
    EXPECT_NE(read_file(settings.state_file).find("\"weight\": 60"), std::string::npos);
    dp.fail_publish = false;
    json now;
    for (int i = 0; i < 100; ++i) {
        now = vip(kWeb);
        if (now["published"] == true) break;
        std::this_thread::sleep_for(20ms);
    }
    EXPECT_EQ(now["published"], true);
    EXPECT_EQ(now["epoch"], 2);
    EXPECT_EQ(now["backends"][0]["weight"], 60);
}

TEST_F(ApiTest, StateFileRoundTripsAndSurvivesRestart) {
    const std::string one = "/v1/backends?" + vq(kWeb) + "&address=203.0.113.12";
    ASSERT_EQ(patch(one, R"({"weight": 30})").status, 200);
    ASSERT_EQ(post("/v1/backends?" + vq(kWeb), R"({"address": "203.0.113.40"})").status, 201);
    json now = vip(kWeb);

    StateStore reader(settings.state_file);
    auto loaded = reader.load();
    ASSERT_TRUE(loaded) << loaded.error();
    ASSERT_TRUE(loaded->has_value());
    const StateFile& state = **loaded;
    EXPECT_EQ(state.version, 1);
    EXPECT_EQ(state.config_digest, config_digest(initial));
    ASSERT_EQ(state.vips.size(), 1u);
    EXPECT_EQ(json(state.vips[0]), now["spec"]);
    EXPECT_EQ(state.epochs.at(kWeb), now["epoch"].get<std::uint64_t>());
    ASSERT_EQ(state.backend_ids.size(), 4u);
    for (const json& b : now["backends"]) {
        auto it = std::find_if(state.backend_ids.begin(), state.backend_ids.end(),
                               [&](const control::BackendAssignment& a) {
                                   return a.address.to_string() == b["address"];
                               });
        ASSERT_NE(it, state.backend_ids.end());
        EXPECT_EQ(it->id, b["id"].get<std::uint32_t>());
        EXPECT_EQ(it->generation, b["generation"].get<std::uint32_t>());
        EXPECT_EQ(it->vip_key, kWeb);
    }
    // encode/decode is lossless
    auto again = decode_state(encode_state(state));
    ASSERT_TRUE(again) << again.error();
    EXPECT_EQ(encode_state(*again), encode_state(state));
    EXPECT_EQ(encode_state(state), read_file(settings.state_file));

    // Restart with the same configuration file: the runtime changes win, ids
    // and generations are kept and epochs go on from where they were.
    StartupDecision d = decide_startup_vips(initial, state);
    EXPECT_EQ(d.source, StartupDecision::Source::kState);
    EXPECT_FALSE(d.backup_state);
    EXPECT_TRUE(d.conflicts.empty());
    EXPECT_EQ(d.vips, state.vips);
    ASSERT_TRUE(state.config_vips) << "the state records the file it was written against";
    EXPECT_EQ(*state.config_vips, initial);
    FakeDataPlane dp2;
    control::Reconciler rec2(dp2, {16, 64});
    EXPECT_TRUE(restore_ids_and_epochs(rec2, state).empty());
    rec2.set_vips(d.vips);
    ASSERT_TRUE(rec2.reconcile(control::Clock::now()));
    auto restarted = rec2.vip_status(kWeb);
    ASSERT_TRUE(restarted);
    EXPECT_GT(restarted->epoch, now["epoch"].get<std::uint64_t>());
    EXPECT_EQ(hex16(restarted->checksum), now["checksum"]) << "same inputs, same table";
    for (std::size_t i = 0; i < restarted->backends.size(); ++i) {
        EXPECT_EQ(*restarted->backends[i].id, now["backends"][i]["id"].get<std::uint32_t>());
        EXPECT_EQ(restarted->backends[i].generation,
                  now["backends"][i]["generation"].get<std::uint32_t>());
    }

    // Restart after the file edited the VIP the API changed: a conflict, the
    // start refuses; --prefer file takes the file and sets the state aside.
    std::vector<config::VipSpec> edited = initial;
    edited[0].ring_size = 257;
    StartupDecision e = decide_startup_vips(edited, state);
    EXPECT_EQ(e.source, StartupDecision::Source::kMerged);
    EXPECT_FALSE(e.conflicts.empty());
    e = decide_startup_vips(edited, state, config::Prefer::kFile);
    EXPECT_TRUE(e.conflicts.empty());
    EXPECT_TRUE(e.backup_state);
    EXPECT_FALSE(e.warnings.empty());
    EXPECT_EQ(e.vips, edited);
    auto backup = reader.backup();
    ASSERT_TRUE(backup) << backup.error();
    EXPECT_TRUE(backup->starts_with(settings.state_file + ".bak-"));
    EXPECT_TRUE(fs::exists(*backup));
    auto none = reader.load();
    ASSERT_TRUE(none);
    EXPECT_FALSE(none->has_value()) << "no state file: a first start";
    EXPECT_EQ(decide_startup_vips(edited, std::nullopt).vips, edited);
}

TEST(ApiStateStore, DigestIgnoresOrderOnly) {
    config::VipSpec a = web_vip(), b = web_vip();
    b.port = 443;
    EXPECT_EQ(config_digest({a, b}), config_digest({b, a}));
    EXPECT_EQ(config_digest({a, b}).size(), 16u);
    config::VipSpec c = b;
    c.backends[0].weight = 5;
    EXPECT_NE(config_digest({a, b}), config_digest({a, c}));
}

TEST(ApiStateStore, CorruptFilesAreReportedWithPathAndProblem) {
    char tmpl[] = "/tmp/xlb-state-test-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    const std::string path = std::string(tmpl) + "/state.json";
    StateStore store(path);
    auto write = [&](const std::string& text) { std::ofstream(path) << text; };
    auto error_of = [&]() -> std::string {
        auto r = store.load();
        EXPECT_FALSE(r) << "should not load";
        return r ? std::string() : r.error().message();
    };
    write("{\"version\": 1, ");
    std::string e = error_of();
    EXPECT_NE(e.find(path), std::string::npos) << e;
    EXPECT_NE(e.find("not valid JSON"), std::string::npos) << e;

    StateFile good;
    good.vips = {web_vip()};
    json j = json::parse(encode_state(good));
    j["version"] = 2;
    write(j.dump());
    EXPECT_NE(error_of().find("version: found 2, expected 1"), std::string::npos);
    j = json::parse(encode_state(good));
    j["extra"] = true;
    write(j.dump());
    EXPECT_NE(error_of().find("extra"), std::string::npos);
    j = json::parse(encode_state(good));
    j["vips"][0]["port"] = "http";
    write(j.dump());
    EXPECT_NE(error_of().find("port"), std::string::npos);
    j = json::parse(encode_state(good));
    j["ids"]["backends"] = {{{"vip", kWeb}, {"address", "nope"}, {"id", 1}, {"generation", 1}}};
    write(j.dump());
    EXPECT_NE(error_of().find("ids.backends[0].address"), std::string::npos);
    j = json::parse(encode_state(good));
    j["epochs"] = {{"not a key", 3}};
    write(j.dump());
    EXPECT_NE(error_of().find("epochs"), std::string::npos);

    // a good file loads; saving leaves no temporary file behind
    ASSERT_TRUE(store.save(good));
    EXPECT_FALSE(fs::exists(path + ".tmp"));
    auto loaded = store.load();
    ASSERT_TRUE(loaded && loaded->has_value());
    EXPECT_EQ((*loaded)->vips, good.vips);
    fs::remove_all(tmpl);
}

// ---- the socket ------------------------------------------------------------

TEST_F(ApiTest, SocketModeAndSingleAgent) {
    struct stat st {};
    ASSERT_EQ(::stat(settings.api_socket.c_str(), &st), 0);
    EXPECT_TRUE(S_ISSOCK(st.st_mode));
    EXPECT_EQ(st.st_mode & 0777, 0660u);

    ApiServer second(services(), ApiServer::Options{settings.api_socket});
    auto refused = second.start();
    ASSERT_FALSE(refused);
    EXPECT_NE(refused.error().message().find("another agent"), std::string::npos)
        << refused.error();
    EXPECT_EQ(get("/livez").status, 200) << "the first agent keeps its socket";

    // A stale socket (nobody listening) is replaced.
    const std::string stale = dir + "/run/stale.sock";
    int fd = ::socket(AF_UNIX, SOCK_STREAM, 0);
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    std::strcpy(addr.sun_path, stale.c_str());
    ASSERT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
    ::close(fd);
    ApiServer third(services(), ApiServer::Options{stale});
    auto started = third.start();
    ASSERT_TRUE(started) << started.error();
    httplib::Client c(stale);
    c.set_address_family(AF_UNIX);
    auto r = c.Get("/livez");
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 200);
    third.stop();
    EXPECT_FALSE(fs::exists(stale)) << "stop removes the socket";

    // Anything else at the path is left alone.
    const std::string file = dir + "/run/file.sock";
    std::ofstream(file) << "not a socket";
    ApiServer fourth(services(), ApiServer::Options{file});
    auto not_socket = fourth.start();
    ASSERT_FALSE(not_socket);
    EXPECT_NE(not_socket.error().message().find("not a socket"), std::string::npos);
    EXPECT_TRUE(fs::exists(file));
}

// api.group: the socket belongs to the group, so that its members may use it.
TEST_F(ApiTest, SocketGroupIsSetAndAnUnknownGroupLeavesNothing) {
    struct group* daemon_group = ::getgrnam("daemon");  // in every Debian (base-passwd)
    ASSERT_NE(daemon_group, nullptr);
    const gid_t daemon_gid = daemon_group->gr_gid;
    for (const std::string& group : {std::string("daemon"), std::to_string(daemon_gid)}) {
        const std::string path = dir + "/run/grouped.sock";
        ApiServer::Options options{path};
        options.group = group;
        ApiServer grouped(services(), options);
        auto started = grouped.start();
        ASSERT_TRUE(started) << started.error();
        struct stat st {};
        ASSERT_EQ(::stat(path.c_str(), &st), 0);
        EXPECT_EQ(st.st_gid, daemon_gid) << group;
        EXPECT_EQ(st.st_mode & 0777, 0660u) << group;
        grouped.stop();
    }
    const std::string path = dir + "/run/nogroup.sock";
    ApiServer::Options options{path};
    options.group = "xlb-no-such-group";
    ApiServer ungrouped(services(), options);
    auto refused = ungrouped.start();
    ASSERT_FALSE(refused);
    EXPECT_NE(refused.error().message().find("no group \"xlb-no-such-group\""), std::string::npos)
        << refused.error();
    EXPECT_FALSE(fs::exists(path)) << "nothing is created for an unknown group";
}

// ---- health and metrics ----------------------------------------------------

TEST_F(ApiTest, LivezAndReadyz) {
    auto livez = client->Get("/livez");
    ASSERT_TRUE(livez);
    EXPECT_EQ(livez->status, 200);
    EXPECT_EQ(livez->body, "ok\n");
    auto readyz = client->Get("/readyz");
    ASSERT_TRUE(readyz);
    EXPECT_EQ(readyz->status, 200);

    attached = false;
    readyz = client->Get("/readyz");
    ASSERT_TRUE(readyz);
    EXPECT_EQ(readyz->status, 503);
    EXPECT_NE(readyz->body.find("XDP program not attached"), std::string::npos);

    // A loop whose threads never ran is not live, and says which thread.
    control::Reconciler idle_rec(dp, {16, 64});
    control::ControlLoop idle(idle_rec, {});
    ProbeResult dead = check_live(idle);
    EXPECT_FALSE(dead.ok);
    EXPECT_NE(dead.text.find("control thread"), std::string::npos) << dead.text;
    EXPECT_NE(dead.text.find("worker thread"), std::string::npos) << dead.text;
}

TEST_F(ApiTest, MetricsExposition) {
    const std::uint32_t vip_id = vip(kWeb)["vip_id"];
    const std::uint32_t backend_id = vip(kWeb)["backends"][0]["id"];
    {
        std::lock_guard lock(dp.mu);
        dp.outcome_counts[XLB_OUT_TX] = 1000;
        dp.vip_counters[vip_id] = {1010, 90000, 40, 960, 10};
        dp.hint_counters[vip_id] = 17;
        xlb_vip_drops drops{};
        drops.by_reason[xlb_vip_drop_slot(XLB_OUT_DROP_NO_BACKEND)] = 7;
        drops.by_reason[xlb_vip_drop_slot(XLB_OUT_DROP_TOO_BIG)] = 3;
        drops.by_reason[xlb_vip_drop_slot(XLB_OUT_DROP_SOURCE_DENIED)] = 5;
        dp.drop_counters[vip_id] = drops;
        dp.backend_counters[backend_id] = {333, 44444, 21};
        dp.cookie_counters[vip_id] = {
            .syns = 5000, .cookies_sent = 4000, .acks_valid = 30, .acks_invalid = 12};
    }
    syn_flood->update([](conntrack::SynFloodStatus& s) {
        s.state = conntrack::SynFloodState::kAnswering;
        s.floods = 2;
        s.rate_per_cpu = {25'000.5, 10};
    });
    // Backend 203.0.113.11: two active connections and one inactive.
    conntrack->set_backend(backend_id, ip("203.0.113.11"), 1);
    conntrack->set_now_ms(100'000);
    for (const char* client : {"192.0.2.1:40000", "192.0.2.2:40000", "192.0.2.3:40000"})
        conntrack->add(*net::Endpoint::parse(client), *net::Endpoint::parse("198.51.100.10:80"), 6,
                       backend_id, 1, 0,
                       test::FakeConntrack::units(client[8] == '3' ? 50'000 : 99'000), vip_id);
    ASSERT_EQ(
        patch("/v1/backends?" + vq(kWeb) + "&address=203.0.113.13", R"({"weight": 0})").status,
        200);

    // at least 50 ms of CPU, so process_cpu_seconds_total cannot read 0
    while (std::clock() < CLOCKS_PER_SEC / 20) {
    }
    MetricsServer metrics(services(), "127.0.0.1:0");
    auto started = metrics.start();
    ASSERT_TRUE(started) << started.error();
    ASSERT_NE(metrics.port(), 0);
    httplib::Client c("127.0.0.1", metrics.port());
    auto r = c.Get("/metrics");
    ASSERT_TRUE(r);
    ASSERT_EQ(r->status, 200);
    EXPECT_NE(r->get_header_value("Content-Type").find("text/plain; version=0.0.4"),
              std::string::npos);
    const std::string& text = r->body;

    // Every line is a HELP, a TYPE or a well-formed sample of a declared family.
    const std::regex help(R"(# HELP ([a-zA-Z_:][a-zA-Z0-9_:]*) .+)");
    const std::regex type(R"(# TYPE ([a-zA-Z_:][a-zA-Z0-9_:]*) (counter|gauge|histogram))");
    const std::regex sample(
        R"(([a-zA-Z_:][a-zA-Z0-9_:]*)(\{[a-zA-Z_][a-zA-Z0-9_]*="(?:[^"\\\n]|\\.)*"(,[a-zA-Z_][a-zA-Z0-9_]*="(?:[^"\\\n]|\\.)*")*\})? (-?[0-9.]+(e[-+]?[0-9]+)?|\+Inf))");
    std::map<std::string, std::string> types;
    std::set<std::string> helped;
    std::map<std::string, std::string> values;  // "name{labels}" -> value
    std::istringstream lines(text);
    std::string line;
    int samples = 0;
    while (std::getline(lines, line)) {
        std::smatch m;
        if (std::regex_match(line, m, help)) {
            helped.insert(m[1]);
        } else if (std::regex_match(line, m, type)) {
            EXPECT_TRUE(helped.contains(m[1])) << "HELP before TYPE: " << line;
            EXPECT_FALSE(types.contains(m[1])) << "one TYPE per family: " << line;
            types[m[1]] = m[2];
        } else if (std::regex_match(line, m, sample)) {
            std::string family = m[1];
            for (const char* suffix : {"_bucket", "_sum", "_count"})
                if (!types.contains(family) && family.ends_with(suffix))
                    family = family.substr(0, family.size() - std::strlen(suffix));
            EXPECT_TRUE(types.contains(family)) << "sample of an undeclared family: " << line;
            values[std::string(m[1]) + std::string(m[2])] = line.substr(line.rfind(' ') + 1);
            ++samples;
        } else {
            ADD_FAILURE() << "not exposition format: \"" << line << "\"";
        }
    }
    EXPECT_GT(samples, 40);
    for (const char* f :
         {"xlb_packets_total", "xlb_bytes_total", "xlb_new_flows_total", "xlb_conntrack_hits_total",
          "xlb_vip_drops_total", "xlb_backend_packets_total", "xlb_backend_bytes_total",
          "xlb_outcomes_total", "xlb_publishes_total", "xlb_second_chance_hints_total"})
        EXPECT_EQ(types[f], "counter") << f;
    for (const char* f : {"xlb_backend_healthy", "xlb_backend_effective_weight", "xlb_vip_panic",
                          "xlb_table_epoch"})
        EXPECT_EQ(types[f], "gauge") << f;
    EXPECT_EQ(types["xlb_publish_latency_seconds"], "histogram");

    const std::string v = "{vip=\"198.51.100.10:80/tcp\"}";
    const std::string b11 = "{vip=\"198.51.100.10:80/tcp\",backend=\"203.0.113.11\"}";
    const std::string b13 = "{vip=\"198.51.100.10:80/tcp\",backend=\"203.0.113.13\"}";
    EXPECT_EQ(values["xlb_packets_total" + v], "1010");
    EXPECT_EQ(values["xlb_bytes_total" + v], "90000");
    EXPECT_EQ(values["xlb_new_flows_total" + v], "40");
    EXPECT_EQ(values["xlb_conntrack_hits_total" + v], "960");
    auto drops = [&](const char* reason) {
        return values[std::string("xlb_vip_drops_total{vip=\"198.51.100.10:80/tcp\",reason=\"") +
                      reason + "\"}"];
    };
    EXPECT_EQ(drops("drop_no_backend"), "7");
    EXPECT_EQ(drops("drop_too_big"), "3");
    EXPECT_EQ(drops("source_denied"), "5");
    for (const char* zero :
         {"drop_no_table", "drop_family", "drop_bad_backend", "drop_headroom", "cookie_invalid"})
        EXPECT_EQ(drops(zero), "0") << "every reason has its series: " << zero;
    EXPECT_EQ(values["xlb_vip_drops_total" + v], "") << "no series without a reason";
    EXPECT_EQ(types["xlb_applies_total"], "counter");
    EXPECT_EQ(values["xlb_applies_total{vip=\"198.51.100.10:80/tcp\",result=\"published\"}"], "2")
        << "the first table and the one after the weight change";
    EXPECT_EQ(values["xlb_applies_total{vip=\"198.51.100.10:80/tcp\",result=\"failed\"}"], "0");
    EXPECT_EQ(values["xlb_second_chance_hints_total" + v], "17");
    for (const char* f : {"xlb_syns_total", "xlb_syn_cookies_sent_total",
                          "xlb_syn_cookie_acks_total", "xlb_syn_floods_total"})
        EXPECT_EQ(types[f], "counter") << f;
    for (const char* f : {"xlb_syn_flood_state", "xlb_syn_flood_syn_rate"})
        EXPECT_EQ(types[f], "gauge") << f;
    EXPECT_EQ(values["xlb_syns_total" + v], "5000");
    EXPECT_EQ(values["xlb_syn_cookies_sent_total" + v], "4000");
    EXPECT_EQ(values["xlb_syn_cookie_acks_total{vip=\"198.51.100.10:80/tcp\",result=\"valid\"}"],
              "30");
    EXPECT_EQ(values["xlb_syn_cookie_acks_total{vip=\"198.51.100.10:80/tcp\",result=\"invalid\"}"],
              "12");
    EXPECT_EQ(values["xlb_syn_flood_state{state=\"answering\"}"], "1");
    EXPECT_EQ(values["xlb_syn_flood_state{state=\"calm\"}"], "0");
    EXPECT_EQ(values["xlb_syn_flood_state{state=\"recent\"}"], "0");
    EXPECT_EQ(values["xlb_syn_floods_total"], "2");
    EXPECT_EQ(values["xlb_syn_flood_syn_rate{cpu=\"0\"}"], "25000.5");
    EXPECT_EQ(values["xlb_syn_flood_syn_rate{cpu=\"1\"}"], "10");
    EXPECT_EQ(values["xlb_backend_packets_total" + b11], "333");
    EXPECT_EQ(values["xlb_backend_bytes_total" + b11], "44444");
    EXPECT_EQ(types["xlb_backend_new_flows_total"], "counter");
    EXPECT_EQ(values["xlb_backend_new_flows_total" + b11], "21");
    EXPECT_EQ(types["xlb_backend_connections"], "gauge");
    const std::string c11 = "{vip=\"198.51.100.10:80/tcp\",backend=\"203.0.113.11\",state=";
    const std::string c13 = "{vip=\"198.51.100.10:80/tcp\",backend=\"203.0.113.13\",state=";
    EXPECT_EQ(values["xlb_backend_connections" + c11 + "\"active\"}"], "2");
    EXPECT_EQ(values["xlb_backend_connections" + c11 + "\"inactive\"}"], "1");
    EXPECT_EQ(values["xlb_backend_connections" + c13 + "\"active\"}"], "0")
        << "a backend without entries has its series";
    EXPECT_EQ(values["xlb_outcomes_total{outcome=\"tx\"}"], "1000");
    EXPECT_EQ(values["xlb_outcomes_total{outcome=\"drop_no_backend\"}"], "0");
    EXPECT_EQ(values["xlb_backend_healthy" + b11], "1");
    // in the CLI's units: the configured weight 100, not the table's x100
    EXPECT_EQ(values["xlb_backend_effective_weight" + b11], "100");
    EXPECT_EQ(values["xlb_backend_effective_weight" + b13], "0");
    const std::string b11s = "{vip=\"198.51.100.10:80/tcp\",backend=\"203.0.113.11\",state=";
    EXPECT_EQ(values["xlb_backend_state" + b11s + "\"active\"}"], "1");
    EXPECT_EQ(values["xlb_backend_state" + b11s + "\"drain\"}"], "0");
    EXPECT_EQ(values["xlb_backend_state" + b11s + "\"disabled\"}"], "0");
    EXPECT_EQ(values["xlb_build_info{version=\"0.1.0-test\"}"], "1");
    // this test's own process
    EXPECT_EQ(types["process_cpu_seconds_total"], "counter");
    EXPECT_GT(std::stod(values["process_cpu_seconds_total"]), 0.0);
    EXPECT_GT(std::stoull(values["process_resident_memory_bytes"]), 1'000'000u);
    EXPECT_GE(std::stoull(values["process_open_fds"]), 3u);
    EXPECT_GT(std::stoull(values["process_max_fds"]), 0u);
    const double start_time = std::stod(values["process_start_time_seconds"]);
    const double now =
        std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
    // start times are in clock ticks (1/100 s)
    EXPECT_LE(start_time, now + 0.05) << std::fixed << start_time << " vs now " << now;
    EXPECT_GT(start_time, now - 24 * 3600) << "started within the day";
    EXPECT_EQ(values["xlb_vip_panic" + v], "0");
    EXPECT_EQ(types["xlb_vip_info"], "gauge");
    EXPECT_EQ(values["xlb_vip_info{vip=\"198.51.100.10:80/tcp\",name=\"web\"}"], "1")
        << "the VIP's name, as docs/config.md promises, joined on vip";
    EXPECT_EQ(values["xlb_table_epoch" + v], "2");
    EXPECT_EQ(values["xlb_publishes_total"], "1");
    EXPECT_EQ(values["xlb_publish_latency_seconds_count"], "1");
    EXPECT_EQ(values["xlb_publish_latency_seconds_bucket{le=\"+Inf\"}"], "1");
    EXPECT_EQ(values["xlb_publish_latency_seconds_bucket{le=\"0.0005\"}"].empty(), false);
    EXPECT_EQ(values["xlb_publish_return_latency_seconds_bucket{le=\"0.0005\"}"], "0")
        << "the fake's update returns 1 ms after it was issued";

    auto livez = c.Get("/livez");
    ASSERT_TRUE(livez);
    EXPECT_EQ(livez->status, 200);
    auto readyz = c.Get("/readyz");
    ASSERT_TRUE(readyz);
    EXPECT_EQ(readyz->status, 200);
    auto missing = c.Get("/nothing");
    ASSERT_TRUE(missing);
    EXPECT_EQ(missing->status, 404);
    metrics.stop();
}

// ---- the configuration file: export, and reload's dry run ------------------

// Every kind of setting the file has, each away from its default.
constexpr const char* kEverySetting = R"(interface: eth1
xdp_mode: generic
next_hop: {address: 192.0.2.254}
encap_source: {ipv4: 192.0.2.0/28, ipv6: "2001:db8:ffff::/120"}
hash_seed: 0x1234abcd
mtu: 9000
icmp_too_big: false
encap: gue
gue_port: 7080
second_chance: {enabled: true, window: 5m}
maps: {max_vips: 16, max_backends: 64, conntrack_entries: 65536}
api: {socket: /run/xlb/other.sock, group: xlb}
metrics: {listen: "127.0.0.1:9500"}
state_file: /var/lib/xlb/other.json
pin_dir: /sys/fs/bpf/xlb-other
bgp: {enabled: true, control_socket: /run/bird/b.ctl, routes_file: /run/xlb/b.conf,
      protocol: lb, route: via_lo}
conntrack: {insert_rate: 5000, insert_burst: 10000, resize: replace, sweep_interval: 3s}
health_history: 50
vips:
  - address: 198.51.100.10
    port: 80
    name: web
    hash: source
    ring_size: 251
    panic_threshold: 0.25
    slow_start: {window: 10s, floor: 0.2}
    on_unhealthy: keep
    health_consensus: any_down
    announce: always
    conntrack_idle_timeout: 10m
    health_check:
      type: http
      port: 8080
      path: /healthz
      host: web.example
      expected_statuses: [200, 301-302]
      body_contains: ok
      reuse_connection: false
      interval: 2s
      timeout: 500ms
      jitter: 100ms
      unhealthy_threshold: 3
      healthy_threshold: 4
      failure_accrual: {enabled: true, success_rate: 0.9, window: 20s, min_probes: 7,
                        min_penalty: 2s, max_penalty: 2m, jitter: 0.25}
      rate_limit_bias: {factor: 0.5, penalty: 10s, max_retry_after: 1m}
      flapping: {changes: 6, window: 10m, hold: 1m}
    backends:
      - {address: 203.0.113.11, weight: 200, hash_key: web-a}
      - {address: 203.0.113.12, state: drain}
      - {address: 203.0.113.13, weight: 0, state: disabled}
  - address: 198.51.100.53
    port: 53
    protocol: udp
    conntrack: false
    health_check: {type: udp, udp_payload: ping, udp_expect: pong}
    backends:
      - {address: 203.0.113.21}
  - address: "2001:db8:10::1"
    port: 0
    announce: never
    health_check: {type: tcp, port: 443, via_vip: true}
    backends:
      - {address: "2001:db8:20::1", weight: 50}
)";

std::vector<config::VipSpec> by_key(std::vector<config::VipSpec> vips) {
    std::sort(vips.begin(), vips.end(),
              [](const config::VipSpec& a, const config::VipSpec& b) { return a.key() < b.key(); });
    return vips;
}

// SYN cookies (docs/syn-cookies.md): each VIP's effective mode and state,
// its counters from the data plane, the host's flood state from the
// detector's board.
class SynCookieApiTest : public ApiTest {
protected:
    static constexpr const char* kTls = "198.51.100.10:443/tcp";
    static constexpr const char* kLegacy = "198.51.100.10:8080/tcp";
    static constexpr const char* kQuiet = "198.51.100.10:8443/tcp";

    void configure() override {
        settings.encap = config::Encap::kGue;
        settings.syn_flood = {.start_rate = 30'000, .end_rate = 5'000, .end_after = 2s};
        for (auto& b : initial[0].backends) b.cookie_acks = true;
        auto variant = [&](std::uint16_t port, std::optional<config::SynCookies> mode,
                           bool cookie_acks) {
            config::VipSpec v = web_vip();
            v.port = port;
            v.name = "v" + std::to_string(port);
            v.syn_cookies = mode;
            for (auto& b : v.backends) b.cookie_acks = cookie_acks;
            initial.push_back(v);
        };
        variant(443, config::SynCookies::kAlways, true);
        variant(8080, std::nullopt, false);
        variant(8443, config::SynCookies::kOff, true);
    }

    static json cookies_of(const json& body, const std::string& key) {
        for (const json& v : body["vips"])
            if (v["vip"] == key) return v["syn_cookies"];
        ADD_FAILURE() << key << " not in " << body.dump();
        return nullptr;
    }
};

// --outcome words: a verdict selects every outcome of it, those appended
// after the drops too; a name selects its outcome alone.
TEST(CaptureOutcomes, VerdictsCoverAppendedOutcomes) {
    std::vector<const char*> names;
    for (std::uint32_t o = 0; o < XLB_OUT__MAX; ++o) names.push_back(outcome_name(o));
    auto bits = [&](const char* word) {
        auto b = capture::outcome_bits(word, names);
        EXPECT_TRUE(b) << word;
        return b ? *b : 0U;
    };
    EXPECT_EQ(bits("tx_quic_cid"), 1U << XLB_OUT_TX_QUIC_CID);
    for (std::uint32_t o = 0; o < XLB_OUT__MAX; ++o) {
        const std::string name = names[o];
        const char* verdict = name.starts_with("tx")     ? "tx"
                              : name.starts_with("pass") ? "pass"
                                                         : "drop";
        for (const char* word : {"tx", "pass", "drop"})
            EXPECT_EQ((bits(word) >> o) & 1U, std::string(word) == verdict ? 1U : 0U)
                << name << " under --outcome " << word;
    }
    EXPECT_FALSE(capture::outcome_bits("tx_quic", names)) << "no prefix matching";
}

// A UDP VIP routing QUIC by connection ID beside the TCP one.
class QuicApiTest : public ApiTest {
protected:
    static constexpr const char* kQuic = "198.51.100.10:443/udp";

    void configure() override {
        config::VipSpec v = web_vip();
        v.port = 443;
        v.protocol = config::Protocol::kUdp;
        v.name = "quic";
        v.health_check.type = config::HealthCheckType::kNone;
        config::QuicConfig q;
        q.config_id = 1;
        v.quic.push_back(q);
        for (std::size_t i = 0; i < v.backends.size(); ++i) v.backends[i].server_id = 100 + i;
        initial.push_back(v);
    }

    static json quic_of(const json& body, const std::string& key) {
        for (const json& v : body["vips"])
            if (v["vip"] == key) return v.value("quic", json("missing"));
        ADD_FAILURE() << key << " not in " << body.dump();
        return nullptr;
    }
};

TEST_F(QuicApiTest, StatusAndStatsShowRoutedAndFallbacksByReason) {
    const std::uint32_t quic_id = vip(kQuic)["vip_id"];
    xlb_vip_quic_stats counts{};
    counts.routed = 9001;
    for (std::uint32_t r = 0; r < XLB_QUIC_FALLBACKS; ++r) counts.fallbacks[r] = 10 + r;
    {
        std::lock_guard lock(dp.mu);
        dp.quic_counters[quic_id] = counts;
    }
    for (const char* path : {"/v1/status", "/v1/stats"}) {
        SCOPED_TRACE(path);
        Reply r = get(path);
        ASSERT_EQ(r.status, 200) << r.text;
        EXPECT_EQ(quic_of(r.body, kQuic), (json{{"routed", 9001},
                                                {"fallbacks",
                                                 {{"client_cid", 10},
                                                  {"unknown_config", 11},
                                                  {"bad_length", 12},
                                                  {"unknown_server", 13},
                                                  {"dead_backend", 14},
                                                  {"no_key", 15}}}}));
        EXPECT_EQ(quic_of(r.body, kWeb), nullptr) << "a VIP without QUIC routing";
    }
    const std::uint32_t web_id = vip(kWeb)["vip_id"];
    std::lock_guard lock(dp.mu);
    EXPECT_EQ(dp.quic_reads[web_id], 0) << "only QUIC VIPs' counters are read";
    EXPECT_GT(dp.quic_reads[quic_id], 0);
}

TEST_F(QuicApiTest, MetricsPerVipAndReason) {
    const std::uint32_t quic_id = vip(kQuic)["vip_id"];
    {
        std::lock_guard lock(dp.mu);
        xlb_vip_quic_stats counts{};
        counts.routed = 77;
        counts.fallbacks[XLB_QUIC_FB_UNKNOWN_SERVER] = 5;
        counts.fallbacks[XLB_QUIC_FB_NO_KEY] = 2;
        dp.quic_counters[quic_id] = counts;
    }
    MetricsServer metrics(services(), "127.0.0.1:0");
    ASSERT_TRUE(metrics.start());
    httplib::Client c("127.0.0.1", metrics.port());
    auto r = c.Get("/metrics");
    ASSERT_TRUE(r);
    std::map<std::string, std::string> values;
    std::istringstream lines(r->body);
    for (std::string line; std::getline(lines, line);)
        if (!line.starts_with("#") && line.find(' ') != std::string::npos)
            values[line.substr(0, line.rfind(' '))] = line.substr(line.rfind(' ') + 1);
    EXPECT_NE(r->body.find("# TYPE xlb_quic_routed_total counter"), std::string::npos);
    EXPECT_NE(r->body.find("# TYPE xlb_quic_fallbacks_total counter"), std::string::npos);
    const std::string v = "{vip=\"198.51.100.10:443/udp\"";
    EXPECT_EQ(values["xlb_quic_routed_total" + v + "}"], "77");
    auto fallback = [&](const char* reason) {
        return values["xlb_quic_fallbacks_total" + v + ",reason=\"" + reason + "\"}"];
    };
    EXPECT_EQ(fallback("unknown_server"), "5");
    EXPECT_EQ(fallback("no_key"), "2");
    for (const char* zero : {"client_cid", "unknown_config", "bad_length", "dead_backend"})
        EXPECT_EQ(fallback(zero), "0") << "every reason has its series: " << zero;
    EXPECT_FALSE(values.contains("xlb_quic_routed_total{vip=\"198.51.100.10:80/tcp\"}"))
        << "no series for a VIP without QUIC routing";
}

TEST_F(QuicApiTest, LookupByConnectionId) {
    const config::QuicConfig& q = initial.back().quic[0];
    const std::vector<std::uint8_t> nonce{1, 2, 3, 4, 5, 6};
    auto cid = [&](std::uint64_t server_id) {
        auto c = quic::encode_cid(q, server_id, nonce);
        EXPECT_TRUE(c) << c.error().message();
        return c ? quic::to_hex(*c) : std::string();
    };
    auto lookup = [&](const std::string& hex) {
        return get("/v1/lookup?" + vq(kQuic) + "&src=192.0.2.7:5353&cid=" + hex);
    };
    // Server id 101 is the second backend's: routed there, the ring unread.
    Reply r = lookup(cid(101));
    ASSERT_EQ(r.status, 200) << r.text;
    EXPECT_EQ(r.body["outcome"], "tx_quic_cid");
    EXPECT_EQ(r.body["backend"], "203.0.113.12");
    EXPECT_EQ(r.body["backend_id"], vip(kQuic)["backends"][1]["id"]);
    EXPECT_EQ(r.body["slot"], nullptr);
    EXPECT_EQ(
        r.body["quic"],
        (json{{"cid", cid(101)}, {"config_id", 1}, {"server_id", 101}, {"fallback", nullptr}}));
    // The same client without a CID: the ring's answer, which fallbacks give.
    const Reply ring = get("/v1/lookup?" + vq(kQuic) + "&src=192.0.2.7:5353");
    ASSERT_EQ(ring.status, 200) << ring.text;
    auto expect_fallback = [&](const std::string& hex, const char* reason) {
        SCOPED_TRACE(hex);
        Reply f = lookup(hex);
        ASSERT_EQ(f.status, 200) << f.text;
        EXPECT_EQ(f.body["quic"]["fallback"], reason);
        EXPECT_EQ(f.body["outcome"], "tx");
        EXPECT_EQ(f.body["backend"], ring.body["backend"]);
        EXPECT_EQ(f.body["slot"], ring.body["slot"]);
    };
    expect_fallback(cid(999), "unknown_server");
    std::string other_config = cid(101);
    other_config[0] = '6';  // config id 3: not configured
    expect_fallback(other_config, "unknown_config");
    expect_fallback(cid(101).substr(0, 8), "bad_length");

    expect_error(lookup("xyz"), 400, "cid");
    expect_error(get("/v1/lookup?" + vq(kWeb) + "&src=192.0.2.7:5353&cid=" + cid(101)), 400,
                 "does not route QUIC");
}

TEST_F(SynCookieApiTest, StatusAndStatsShowEachVipsModeStateAndCounters) {
    const std::uint32_t web_id = vip(kWeb)["vip_id"];
    {
        std::lock_guard lock(dp.mu);
        dp.cookie_counters[web_id] = {
            .syns = 9000, .cookies_sent = 8000, .acks_valid = 70, .acks_invalid = 3};
    }
    for (const char* path : {"/v1/status", "/v1/stats"}) {
        SCOPED_TRACE(path);
        Reply r = get(path);
        ASSERT_EQ(r.status, 200) << r.text;
        EXPECT_EQ(cookies_of(r.body, kWeb), (json{{"mode", "auto"},
                                                  {"state", "auto idle"},
                                                  {"reason", nullptr},
                                                  {"syns", 9000},
                                                  {"cookies_sent", 8000},
                                                  {"acks_valid", 70},
                                                  {"acks_invalid", 3}}));
        EXPECT_EQ(cookies_of(r.body, kTls)["state"], "always");
        EXPECT_EQ(cookies_of(r.body, kTls)["cookies_sent"], 0);
        const json legacy = cookies_of(r.body, kLegacy);
        EXPECT_EQ(legacy["mode"], "off");
        EXPECT_EQ(legacy["state"], "off");
        EXPECT_EQ(legacy["reason"], "backend 203.0.113.11 has no cookie_acks");
        EXPECT_EQ(cookies_of(r.body, kQuiet)["state"], "off");
        EXPECT_EQ(cookies_of(r.body, kQuiet)["reason"], nullptr) << "asked off: nothing missing";
        const json& flood = r.body["syn_flood"];
        EXPECT_EQ(flood["state"], "calm");
        EXPECT_EQ(flood["since"], nullptr);
        EXPECT_EQ(flood["floods"], 0);
        EXPECT_EQ(flood["peak_cpu"], nullptr) << "no flood yet";
        EXPECT_EQ(flood["start_rate"], 30'000);
        EXPECT_EQ(flood["end_rate"], 5'000);
        EXPECT_EQ(flood["end_after_ms"], 2'000);
    }

    syn_flood->update([](conntrack::SynFloodStatus& s) {
        s.state = conntrack::SynFloodState::kAnswering;
        s.since = std::chrono::system_clock::now();
        s.floods = 1;
        s.peak_rate = 45'000;
        s.peak_cpu = 3;
        s.rate_per_cpu = {0, 0, 0, 45'000};
    });
    for (const char* path : {"/v1/status", "/v1/stats"}) {
        SCOPED_TRACE(path);
        Reply r = get(path);
        ASSERT_EQ(r.status, 200) << r.text;
        EXPECT_EQ(cookies_of(r.body, kWeb)["state"], "answering");
        EXPECT_EQ(cookies_of(r.body, kTls)["state"], "always");
        EXPECT_EQ(cookies_of(r.body, kLegacy)["state"], "off");
        const json& flood = r.body["syn_flood"];
        EXPECT_EQ(flood["state"], "answering");
        EXPECT_TRUE(flood["since"].is_string());
        EXPECT_EQ(flood["peak_cpu"], 3);
        EXPECT_DOUBLE_EQ(flood["peak_rate"].get<double>(), 45'000);
        EXPECT_EQ(flood["rate_per_cpu"].size(), 4u);
    }

    // RECENT: SYNs go to backends again, so auto is idle.
    syn_flood->update(
        [](conntrack::SynFloodStatus& s) { s.state = conntrack::SynFloodState::kRecent; });
    EXPECT_EQ(cookies_of(get("/v1/stats").body, kWeb)["state"], "auto idle");
}

TEST_F(ApiTest, CookiesOffSayWhyAndNoDetectorShowsNull) {
    Reply r = get("/v1/status");
    ASSERT_EQ(r.status, 200) << r.text;
    const json& k = r.body["vips"][0]["syn_cookies"];
    EXPECT_EQ(k["state"], "off");
    EXPECT_EQ(k["reason"], "encap is not gue") << "the default encapsulation is ipip";

    Services s = services();
    s.syn_flood.reset();
    server->stop();
    server = std::make_unique<ApiServer>(s, ApiServer::Options{settings.api_socket});
    ASSERT_TRUE(server->start());
    EXPECT_EQ(get("/v1/status").body["syn_flood"], nullptr);
    EXPECT_EQ(get("/v1/stats").body["syn_flood"], nullptr);
}

class ExportTest : public ApiTest {
protected:
    void configure() override {
        auto parsed = config::parse_config(kEverySetting, "every.yaml");
        if (!parsed)
            for (const auto& e : parsed.error()) ADD_FAILURE() << e.to_string();
        ASSERT_TRUE(parsed);
        loaded = *parsed;
        // the test's own paths: the socket and state file it serves on
        loaded.settings.state_file = settings.state_file;
        loaded.settings.api_socket = settings.api_socket;
        settings = loaded.settings;
        initial = loaded.vips;
    }
    Services services() override {
        Services s = ApiTest::services();
        s.reload = [this](bool allow) {
            ++reloads;
            ReloadReport r;
            r.source = "api";
            r.disruptive = {allow ? "allowed" : "not allowed"};
            return r;
        };
        s.reload_dry_run = [this](const std::string& yaml, const std::string& file, bool allow) {
            tried.push_back({yaml, file, allow});
            ReloadReport r;
            r.source = "api";
            r.dry_run = true;
            r.changed = {kWeb};
            r.differences = {"VIP " + std::string(kWeb) +
                             " backend 203.0.113.11: weight 200 at runtime, 100 in the file"};
            if (yaml == "bad") {
                r.outcome = ReloadReport::Outcome::kInvalid;
                r.error = file + " has 1 error(s)";
                r.errors = {file + ":1:1: expected a YAML mapping"};
            }
            return r;
        };
        return s;
    }

    config::Config exported() {
        Reply r = get("/v1/config/export");
        EXPECT_EQ(r.status, 200) << r.text;
        EXPECT_TRUE(r.body.contains("yaml")) << r.text;
        const std::string yaml = r.body.value("yaml", "");
        auto parsed = config::parse_config(yaml, "export.yaml");
        EXPECT_TRUE(parsed) << (parsed ? "" : parsed.error().front().to_string()) << "\n" << yaml;
        EXPECT_EQ(r.body["vips"], parsed ? parsed->vips.size() : 0u);
        return parsed ? *parsed : config::Config{};
    }

    struct Tried {
        std::string yaml, file;
        bool allow = false;
    };
    config::Config loaded;
    std::vector<Tried> tried;
    int reloads = 0;
};

// The export is the file the agent runs with: loading it gives the same
// settings and VIPs, every kind of setting included.
TEST_F(ExportTest, ExportOfTheFileAsLoadedGivesTheSameConfig) {
    const config::Config out = exported();
    EXPECT_EQ(out.settings, loaded.settings);
    EXPECT_EQ(by_key(out.vips), by_key(loaded.vips));
    EXPECT_FALSE(config::missing_hash_seed(out, "export.yaml"));
}

// Runtime changes through the API are in the export: loading it gives the
// desired state the agent runs, not the file it started from.
TEST_F(ExportTest, ExportCarriesEveryRuntimeChange) {
    const std::string web = "/v1/backends?" + vq(kWeb);
    ASSERT_EQ(patch(web + "&address=203.0.113.11", R"({"weight": 70})").status, 200);
    ASSERT_EQ(patch(web + "&address=203.0.113.13", R"({"state": "active", "weight": 10})").status,
              200);
    ASSERT_EQ(post(web, R"({"address": "203.0.113.14", "hash_key": "web-d"})").status, 201);
    ASSERT_EQ(del(web + "&address=203.0.113.12").status, 200);
    Reply set = patch("/v1/vip?" + vq(kWeb),
                      R"({"health_check": {"interval": "1s", "expected_statuses": [204]},
                          "slow_start": {"window": "0s"}, "name": "www"})");
    ASSERT_EQ(set.status, 200) << set.text;
    ASSERT_EQ(del("/v1/vip?" + vq("198.51.100.53:53/udp")).status, 200);
    Reply added = post("/v1/vips", R"({"address": "198.51.100.11", "port": 443, "ring_size": 251,
                                       "health_check": {"type": "tcp"},
                                       "backends": [{"address": "203.0.113.31", "weight": 5}]})");
    ASSERT_EQ(added.status, 201) << added.text;

    // The same changes on the model, by hand.
    std::vector<config::VipSpec> want = loaded.vips;
    config::VipSpec& w = want[0];
    w.name = "www";
    w.health_check.interval = 1s;
    w.health_check.expected_statuses = {config::StatusRange{204, 204}};
    w.slow_start.window = 0s;
    w.backends[0].weight = 70;
    w.backends[2].state = config::AdminState::kActive;
    w.backends[2].weight = 10;
    config::BackendSpec d;
    d.address = ip("203.0.113.14");
    d.hash_key = "web-d";
    w.backends.push_back(d);
    w.backends.erase(w.backends.begin() + 1);
    want.erase(want.begin() + 1);
    config::VipSpec tls;
    tls.address = ip("198.51.100.11");
    tls.port = 443;
    tls.ring_size = 251;
    tls.health_check.type = config::HealthCheckType::kTcp;
    config::BackendSpec t;
    t.address = ip("203.0.113.31");
    t.weight = 5;
    tls.backends.push_back(t);
    want.push_back(tls);

    const config::Config out = exported();
    EXPECT_EQ(out.settings, settings);
    const std::vector<config::VipSpec> got = by_key(out.vips);
    want = by_key(want);
    ASSERT_EQ(got.size(), want.size());
    for (std::size_t i = 0; i < got.size(); ++i) {
        EXPECT_EQ(got[i], want[i]) << got[i].key();
        for (const auto& line : config::describe_differences(got[i].key(), &got[i], &want[i]))
            ADD_FAILURE() << line;
    }
    // and what the API itself says runs
    std::vector<config::VipSpec> listed;
    const Reply list = get("/v1/vips");
    for (const json& v : list.body["vips"]) {
        auto spec = config::vip_from_json(v["spec"]);
        ASSERT_TRUE(spec) << spec.error();
        listed.push_back(*spec);
    }
    EXPECT_EQ(got, by_key(listed));
}

TEST_F(ExportTest, ExportTakesNoParameters) {
    expect_error(get("/v1/config/export?vip=x"), 400, "unknown query parameter \"vip\"");
}

// ?dry_run=1 hands the body's file to the dry run, answers with its report
// (dry_run, differences) and its status; the reload itself is not run.
TEST_F(ExportTest, ReloadDryRunTriesTheBodysFile) {
    Reply r =
        post("/v1/reload?dry_run=1", json{{"config", "vips: []"}, {"file", "new.yaml"}}.dump());
    ASSERT_EQ(r.status, 200) << r.text;
    ASSERT_EQ(tried.size(), 1u);
    EXPECT_EQ(tried[0].yaml, "vips: []");
    EXPECT_EQ(tried[0].file, "new.yaml");
    EXPECT_FALSE(tried[0].allow);
    EXPECT_EQ(r.body["dry_run"], true);
    EXPECT_EQ(r.body["result"], "applied");
    EXPECT_EQ(r.body["changed"], json::array({kWeb}));
    ASSERT_EQ(r.body["differences"].size(), 1u);
    EXPECT_EQ(reloads, 0) << "a dry run is not a reload";

    r = post("/v1/reload?dry_run=1",
             json{{"config", "bad"}, {"file", "x.yaml"}, {"allow_disruptive", true}}.dump());
    EXPECT_EQ(r.status, 422) << r.text;
    EXPECT_EQ(r.body["errors"], json::array({"x.yaml:1:1: expected a YAML mapping"}));
    EXPECT_TRUE(tried.back().allow);

    // a plain reload's report has no dry-run fields
    r = post("/v1/reload", "");
    EXPECT_EQ(reloads, 1);
    EXPECT_FALSE(r.body.contains("dry_run")) << r.text;
    EXPECT_FALSE(r.body.contains("differences")) << r.text;
}

TEST_F(ExportTest, ReloadDryRunRefusesWhatItCannotTry) {
    expect_error(post("/v1/reload?dry_run=1", ""), 400, "the body needs \"config\"");
    expect_error(post("/v1/reload?dry_run=1", R"({"config": 1})"), 400,
                 "config: found number, expected a string");
    expect_error(post("/v1/reload?dry_run=1", R"({"config": "", "colour": 1})"), 400,
                 "unknown key \"colour\", expected only allow_disruptive, config and file");
    expect_error(post("/v1/reload?dry_run=maybe", R"({"config": ""})"), 400,
                 "dry_run: found \"maybe\"");
    expect_error(post("/v1/reload", R"({"config": "vips: []"})"), 400,
                 "config: only with dry_run=1");
    EXPECT_TRUE(tried.empty());
    EXPECT_EQ(reloads, 0);
}

// ---- health: the history of verdict changes, the latency histogram ----------

// The agent's health wiring (userspace/front/agent/health_link.cpp), played by the
// test on the control thread: a tracker follows the checked backends of the
// desired VIPs, is fed the probe results the test makes, hands its
// observations to the reconciler, and serves its snapshots and histories.
// A fleet's host: VIPs, backends and the drain come from the store, so the
// API refuses to change them and says where to; status and metrics show the
// store.
class FleetApiTest : public ApiTest {
protected:
    Services services() override {
        Services s = ApiTest::services();
        s.fleet.refusal = "this host takes its VIPs from fleet lab";
        s.fleet.status = [this] { return fleet; };
        s.host.set_drained = [](bool) -> Result<HostState> { return HostState{}; };
        return s;
    }
    FleetInfo fleet{.name = "lab",
                    .host = "lb2",
                    .store_reachable = false,
                    .store_since = std::chrono::system_clock::from_time_t(1'800'000'000),
                    .store_error = "etcd http://198.18.0.11:2379: connect: Connection refused",
                    .applied_revision = 57,
                    .seen_revision = 58,
                    .refused_revision = 58,
                    .refused_reason = "invalid",
                    .refused_errors = {"/xlb/lab/desired/global@58: not valid JSON"},
                    .source = "store"};
};

TEST_F(FleetApiTest, ChangesOfTheDesiredStateAre409AndChangeNothing) {
    const std::string web = "/v1/backends?" + vq(kWeb);
    expect_rejected([&] { return post(web, R"({"address": "203.0.113.99"})"); }, 409, "fleet lab");
    expect_rejected([&] { return del(web + "&address=203.0.113.11"); }, 409, "fleet lab");
    expect_rejected([&] { return patch(web + "&address=203.0.113.11", R"({"weight": 5})"); }, 409,
                    "fleet lab");
    expect_rejected([&] { return patch("/v1/vip?" + vq(kWeb), R"({"panic_threshold": 0.2})"); },
                    409, "fleet lab");
    expect_rejected([&] { return del("/v1/vip?" + vq(kWeb)); }, 409, "fleet lab");
    expect_rejected([&] { return post("/v1/vips", R"({"address": "198.51.100.77", "port": 80})"); },
                    409, "fleet lab");
    expect_rejected([&] { return post("/v1/host/drain", ""); }, 409, "fleet lab");
    expect_rejected([&] { return post("/v1/host/resume", ""); }, 409, "fleet lab");
    // Reading is as on any host.
    EXPECT_EQ(get("/v1/vips").status, 200);
    EXPECT_EQ(get("/v1/backends?" + vq(kWeb)).status, 200);
}

TEST_F(FleetApiTest, StatusAndMetricsShowTheStore) {
    Reply r = get("/v1/status");
    ASSERT_EQ(r.status, 200) << r.text;
    const json& f = r.body["fleet"];
    EXPECT_EQ(f["name"], "lab");
    EXPECT_EQ(f["host"], "lb2");
    EXPECT_EQ(f["source"], "store");
    EXPECT_EQ(f["applied_revision"], 57);
    EXPECT_EQ(f["seen_revision"], 58);
    EXPECT_EQ(f["store"]["reachable"], false);
    EXPECT_EQ(f["store"]["since"], "2027-01-15T08:00:00Z");
    EXPECT_EQ(f["refused"]["revision"], 58);
    EXPECT_EQ(f["refused"]["errors"][0], "/xlb/lab/desired/global@58: not valid JSON");
    MetricsInput in;
    in.fleet = fleet;
    const std::string text = render_metrics(in);
    EXPECT_NE(text.find("xlb_fleet_store_reachable{fleet=\"lab\"} 0\n"), std::string::npos) << text;
    EXPECT_NE(text.find("xlb_fleet_applied_revision{fleet=\"lab\"} 57\n"), std::string::npos);
    EXPECT_NE(text.find("xlb_fleet_refused_revision{fleet=\"lab\"} 58\n"), std::string::npos);
}

TEST_F(ApiTest, AHostWithoutAFleetShowsNoFleet) {
    Reply r = get("/v1/status");
    ASSERT_EQ(r.status, 200) << r.text;
    EXPECT_FALSE(r.body.contains("fleet")) << r.text;
    EXPECT_EQ(render_metrics(MetricsInput{}).find("xlb_fleet_"), std::string::npos);
}

class HealthApiTest : public ApiTest {
protected:
    static constexpr const char* kChecked = "198.51.100.20:80/tcp";

    Services services() override {
        Services s = ApiTest::services();
        s.health = [this](const std::string& vip,
                          const net::IpAddress& backend) -> std::optional<BackendHealthInfo> {
            const health::BackendHealth* h = tracker.find({vip, backend});
            if (!h) return std::nullopt;
            std::vector<std::string> shared;
            if (auto it = shared_with.find(backend.to_string()); it != shared_with.end())
                shared = it->second;
            return BackendHealthInfo{h->snapshot(health::Clock::now()), std::nullopt, shared};
        };
        s.health_history = [this](const std::string& vip, const net::IpAddress& backend)
            -> std::optional<std::vector<health::Transition>> {
            const health::BackendHealth* h = tracker.find({vip, backend});
            if (!h) return std::nullopt;
            return h->history().entries();
        };
        s.on_vips_changed = [this](control::Reconciler& r) {
            tracker.set_targets(health::tracked_targets(r.vips()), health::Clock::now());
        };
        return s;
    }

    // A VIP with a tcp check that judges on every probe, and two backends.
    void add_checked_vip() {
        Reply r = post("/v1/vips", R"({"address": "198.51.100.20", "port": 80,
            "health_check": {"type": "tcp", "healthy_threshold": 1, "unhealthy_threshold": 1},
            "backends": [{"address": "203.0.113.21"}, {"address": "203.0.113.22"}]})");
        ASSERT_EQ(r.status, 201) << r.text;
    }

    // One probe of a backend of kChecked that took `latency` and finished at
    // `wall`, judged on the control thread as the agent judges it.
    void probe(const char* backend, health::Failure failure, health::WallTime wall,
               health::Clock::duration latency = 2ms) {
        health::ProbeResult result;
        result.key = {kChecked, ip(backend)};
        result.failure = failure;
        result.detail = failure == health::Failure::kNone ? "connected" : "connection refused";
        result.started = health::Clock::now();
        result.finished = result.started + latency;
        result.finished_wall = wall;
        auto done = loop->call<bool>([this, result](control::Reconciler& r) {
            tracker.apply(result, result.finished);
            for (const health::Observation& o : tracker.take_changes(result.finished))
                r.set_observed(
                    o.key.vip, o.key.backend,
                    {o.verdict == health::Verdict::kHealthy     ? control::Health::kHealthy
                     : o.verdict == health::Verdict::kUnhealthy ? control::Health::kUnhealthy
                                                                : control::Health::kUnknown,
                     o.weight_factor});
            return true;
        });
        ASSERT_EQ(done.wait_for(5s), std::future_status::ready);
    }

    static std::string history_path(const std::string& vip, const std::string& backend) {
        return "/v1/backend/history?" + vq(vip) + "&address=" + url_encode(backend);
    }

    health::HealthTracker tracker{7};  // control thread only
    // What the agent's HealthLink would say of shared probes, by backend.
    std::map<std::string, std::vector<std::string>> shared_with;
};

TEST_F(HealthApiTest, BackendsShowWhichVipsShareTheirProbe) {
    add_checked_vip();
    shared_with["203.0.113.21"] = {"198.51.100.21:80/tcp", "198.51.100.22:80/tcp"};
    Reply r = get("/v1/backends?" + vq(kChecked));
    ASSERT_EQ(r.status, 200) << r.text;
    EXPECT_EQ(r.body["backends"][0]["probe_shared_with"],
              json::array({"198.51.100.21:80/tcp", "198.51.100.22:80/tcp"}));
    EXPECT_EQ(r.body["backends"][1]["probe_shared_with"], json::array());  // its own probe
    // Not checked: null.
    r = get("/v1/backends?" + vq(kWeb));
    ASSERT_EQ(r.status, 200) << r.text;
    EXPECT_TRUE(r.body["backends"][0]["probe_shared_with"].is_null());
}

// 2026-12-01T15:02:11.250Z
const health::WallTime kNoon =
    std::chrono::sys_days{std::chrono::year{2026} / 12 / 1} + 15h + 2min + 11s + 250ms;

TEST_F(HealthApiTest, HistoryShowsABackendGoingDownAndUp) {
    add_checked_vip();
    probe("203.0.113.21", health::Failure::kNone, kNoon);               // unknown -> healthy
    probe("203.0.113.21", health::Failure::kNone, kNoon + 500ms);       // no change
    probe("203.0.113.21", health::Failure::kRefused, kNoon + 1s);       // -> unhealthy
    probe("203.0.113.21", health::Failure::kNone, kNoon + 1s + 700ms);  // -> healthy

    Reply r = get(history_path(kChecked, "203.0.113.21"));
    ASSERT_EQ(r.status, 200) << r.text;
    EXPECT_EQ(r.body["vip"], kChecked);
    EXPECT_EQ(r.body["address"], "203.0.113.21");
    EXPECT_EQ(r.body["health"], "healthy");
    EXPECT_EQ(r.body["checked"], true);
    EXPECT_EQ(r.body["capacity"], 20);
    const json expected = json::parse(R"([
        {"time": "2026-12-01T15:02:11.250Z", "from": "unknown", "to": "healthy",
         "cause": "consecutive_successes", "probe": "passed", "reason": "1 consecutive success"},
        {"time": "2026-12-01T15:02:12.250Z", "from": "healthy", "to": "unhealthy",
         "cause": "consecutive_failures", "probe": "refused",
         "reason": "1 consecutive failure, last: connection refused"},
        {"time": "2026-12-01T15:02:12.950Z", "from": "unhealthy", "to": "healthy",
         "cause": "consecutive_successes", "probe": "passed",
         "reason": "1 consecutive success; slow start"}])");
    EXPECT_EQ(r.body["history"], expected) << r.body.dump(2);

    // The other backend has not been judged: checked, nothing yet.
    r = get(history_path(kChecked, "203.0.113.22"));
    ASSERT_EQ(r.status, 200) << r.text;
    EXPECT_EQ(r.body["health"], "unknown");
    EXPECT_EQ(r.body["checked"], true);
    EXPECT_EQ(r.body["history"], json::array());
    // A VIP without a check: its backends are unchecked and have no history.
    r = get(history_path(kWeb, "203.0.113.11"));
    ASSERT_EQ(r.status, 200) << r.text;
    EXPECT_EQ(r.body["health"], "unchecked");
    EXPECT_EQ(r.body["checked"], false);
    EXPECT_EQ(r.body["history"], json::array());
    // The backend list shows the last change as the reason of the verdict.
    r = get("/v1/backends?" + vq(kChecked));
    ASSERT_EQ(r.status, 200) << r.text;
    EXPECT_EQ(r.body["backends"][0]["health_reason"],
              "unhealthy -> healthy: 1 consecutive success; slow start");
}

TEST_F(HealthApiTest, HistoryOfAnUnknownVipOrBackendIsA404LikeTheOtherBackendPaths) {
    add_checked_vip();
    expect_error(get(history_path("198.51.100.99:80/tcp", "203.0.113.21")), 404,
                 "no VIP 198.51.100.99:80/tcp (GET /v1/vips lists them)");
    expect_error(get(history_path(kChecked, "203.0.113.99")), 404,
                 "VIP 198.51.100.20:80/tcp has no backend 203.0.113.99 (GET "
                 "/v1/backends?vip=198.51.100.20:80/tcp lists them)");
    // The same words as PATCH on that backend.
    expect_error(
        patch("/v1/backends?" + vq(kChecked) + "&address=203.0.113.99", R"({"weight": 1})"), 404,
        "VIP 198.51.100.20:80/tcp has no backend 203.0.113.99");
    expect_error(get("/v1/backend/history?" + vq(kChecked)), 400,
                 "missing query parameter address");
    expect_error(get("/v1/backend/history?address=203.0.113.21"), 400,
                 "missing query parameter vip");
    expect_error(get(history_path("198.51.100.20:http", "203.0.113.21")), 400, "vip:");
    expect_error(post(history_path(kChecked, "203.0.113.21"), "{}"), 405, "not allowed");
}

TEST_F(HealthApiTest, ProbeLatencyIsAHistogramPerBackend) {
    add_checked_vip();
    probe("203.0.113.21", health::Failure::kNone, kNoon, 300us);
    probe("203.0.113.21", health::Failure::kRefused, kNoon + 1s, 20ms);
    probe("203.0.113.21", health::Failure::kTimeout, kNoon + 2s, 1s);  // no measurement

    MetricsServer metrics(services(), "127.0.0.1:0");
    auto started = metrics.start();
    ASSERT_TRUE(started) << started.error();
    httplib::Client c("127.0.0.1", metrics.port());
    auto r = c.Get("/metrics");
    ASSERT_TRUE(r);
    ASSERT_EQ(r->status, 200);
    const std::string& text = r->body;
    const std::string family = "xlb_health_probe_latency_seconds";
    EXPECT_NE(text.find("# TYPE " + family + " histogram\n"), std::string::npos);
    const std::string labels = "vip=\"198.51.100.20:80/tcp\",backend=\"203.0.113.21\"";
    for (const auto& [le, n] : std::vector<std::pair<std::string, int>>{
             {"0.0005", 1}, {"0.01", 1}, {"0.025", 2}, {"5", 2}, {"+Inf", 2}})
        EXPECT_NE(text.find(family + "_bucket{" + labels + ",le=\"" + le + "\"} " +
                            std::to_string(n) + "\n"),
                  std::string::npos)
            << "le " << le << "\n"
            << text;
    EXPECT_NE(text.find(family + "_count{" + labels + "} 2\n"), std::string::npos) << text;
    EXPECT_NE(text.find(family + "_sum{" + labels + "} 0.0203\n"), std::string::npos) << text;
    // Judged or not, every checked backend has its series; unchecked ones none.
    EXPECT_NE(
        text.find(family + "_count{vip=\"198.51.100.20:80/tcp\",backend=\"203.0.113.22\"} 0\n"),
        std::string::npos);
    EXPECT_EQ(text.find(family + "_count{vip=\"198.51.100.10:80/tcp\""), std::string::npos);
    EXPECT_EQ(text.find(family + "{"), std::string::npos) << "no gauge series any more";
    metrics.stop();
}

TEST(ApiMetrics, HistogramSeriesCarryTheirLabelsBeforeLe) {
    exposition::Writer w;
    w.family("h_seconds", "histogram", "A test.");
    const std::array<double, 2> bounds{0.5, 1.0};
    const std::array<std::uint64_t, 2> buckets{1, 3};
    w.histogram_series("h_seconds", {{"vip", "a\"b"}}, bounds, buckets, 4, 2.25);
    EXPECT_EQ(w.take(),
              "# HELP h_seconds A test.\n"
              "# TYPE h_seconds histogram\n"
              "h_seconds_bucket{vip=\"a\\\"b\",le=\"0.5\"} 1\n"
              "h_seconds_bucket{vip=\"a\\\"b\",le=\"1\"} 3\n"
              "h_seconds_bucket{vip=\"a\\\"b\",le=\"+Inf\"} 4\n"
              "h_seconds_sum{vip=\"a\\\"b\"} 2.25\n"
              "h_seconds_count{vip=\"a\\\"b\"} 4\n");
    // Without labels, as xlb_publish_latency_seconds is written.
    w.histogram("p_seconds", "B.", bounds, buckets, 4, 2.25);
    EXPECT_EQ(w.take(),
              "# HELP p_seconds B.\n"
              "# TYPE p_seconds histogram\n"
              "p_seconds_bucket{le=\"0.5\"} 1\n"
              "p_seconds_bucket{le=\"1\"} 3\n"
              "p_seconds_bucket{le=\"+Inf\"} 4\n"
              "p_seconds_sum 2.25\n"
              "p_seconds_count 4\n");
}

TEST(ApiMetrics, ProcStatIsReadFromTheFieldsAfterTheCommand) {
    // A command with spaces and parentheses; fields 14/15 utime/stime,
    // 22 starttime, 23 vsize, 24 rss (proc(5)).
    const std::string stat =
        "4242 (xlbd (test) x) S 1 4242 4242 0 -1 4194560 100 0 0 0 250 150 0 0 20 0 3 0 "
        "5000 123456789 2000 18446744073709551615 0 0 0 0 0 0 0 0 0 0 0 0 17 1 0 0 0 0 0";
    auto p = parse_proc_stat(stat, 100, 4096, 1'700'000'000.0);
    ASSERT_TRUE(p);
    EXPECT_DOUBLE_EQ(p->cpu_seconds, 4.0);
    EXPECT_DOUBLE_EQ(p->start_time_seconds, 1'700'000'050.0);
    EXPECT_EQ(p->virtual_memory_bytes, 123456789u);
    EXPECT_EQ(p->resident_memory_bytes, 2000u * 4096u);
    EXPECT_FALSE(parse_proc_stat("4242 (xlbd) S 1 2 3", 100, 4096, 0)) << "too few fields";
    EXPECT_FALSE(parse_proc_stat("no command here", 100, 4096, 0));
    EXPECT_FALSE(parse_proc_stat(stat, 0, 4096, 0)) << "no tick rate";
    auto self = read_process_stats();
    ASSERT_TRUE(self);
    EXPECT_GT(self->resident_memory_bytes, 0u);
}

TEST(ApiMetrics, NumbersKeepTheirDigits) {
    EXPECT_EQ(exposition::number(1796217646.25), "1796217646.25") << "a start time to the 1/100 s";
    EXPECT_EQ(exposition::number(12.54 / 1000.0), "0.01254");
    EXPECT_EQ(exposition::number(0.0005), "0.0005");
    EXPECT_EQ(exposition::number(3), "3");
    EXPECT_EQ(exposition::number(std::numeric_limits<double>::infinity()), "+Inf");
    EXPECT_EQ(exposition::number(std::nan("")), "NaN");
}

TEST(ApiMetrics, LabelValuesAreEscaped) {
    EXPECT_EQ(escape_label_value("a\\b\"c\nd"), "a\\\\b\\\"c\\nd");
    EXPECT_EQ(escape_label_value("198.51.100.10:80/tcp"), "198.51.100.10:80/tcp");

    MetricsInput in;
    control::VipStatus v;
    v.spec = web_vip();
    v.spec.name = "x";
    control::BackendStatus b;
    b.address = ip("203.0.113.11");
    v.backends.push_back(b);
    in.vips.push_back(v);
    in.outcomes = OutcomeCounts{};
    const std::string text = render_metrics(in);
    EXPECT_NE(
        text.find("xlb_backend_healthy{vip=\"198.51.100.10:80/tcp\",backend=\"203.0.113.11\"} 0"),
        std::string::npos);
    EXPECT_EQ(text.find("xlb_packets_total{"), std::string::npos) << "no VIP id: no counter sample";
    EXPECT_NE(text.find("# TYPE xlb_publish_latency_seconds histogram"), std::string::npos);
}

TEST(ApiMetrics, ParseListenAddress) {
    EXPECT_EQ(parse_listen_address("127.0.0.1:9464").value(),
              (std::pair<std::string, std::uint16_t>{"127.0.0.1", 9464}));
    EXPECT_EQ(parse_listen_address("[::1]:9000").value(),
              (std::pair<std::string, std::uint16_t>{"::1", 9000}));
    EXPECT_EQ(parse_listen_address("localhost:0").value().second, 0);
    for (const char* bad :
         {"127.0.0.1", "127.0.0.1:", ":9464", "::1:9464", "[::1]9464", "127.0.0.1:65536", "h:x"}) {
        auto r = parse_listen_address(bad);
        EXPECT_FALSE(r) << bad;
        if (!r) {
            EXPECT_NE(r.error().message().find("expected HOST:PORT"), std::string::npos);
        }
    }
}

TEST(ApiLookup, MatchesTheKernelsFlowKey) {
    config::VipSpec v = web_vip();
    auto src = *net::Endpoint::parse("192.0.2.7:40000");
    xlb_flow_key k = datapath::flow_key(v, src, 80);
    EXPECT_EQ(k.sport, htons(40000));
    EXPECT_EQ(k.dport, htons(80));
    EXPECT_EQ(k.proto, 6);
    EXPECT_EQ(k.family, XLB_FAMILY_V4);
    EXPECT_EQ(k.pad[0] | k.pad[1], 0);
    std::vector<std::uint32_t> ring = {7, 8, 9};
    LookupResult r = lookup(v, src, 80, kSeed, std::span<const std::uint32_t>(ring));
    EXPECT_EQ(r.hash, xlb_flow_hash(&k, kSeed));
    EXPECT_EQ(*r.slot, r.hash % 3);
    EXPECT_EQ(*r.backend_id, ring[r.hash % 3]);
    v.hash = config::HashMode::kSourceIp;
    v.conntrack = false;
    EXPECT_EQ(datapath::vip_flags(v), XLB_VIP_F_HASH_SRC_ONLY | XLB_VIP_F_NO_CONNTRACK);
    EXPECT_EQ(lookup(v, src, 80, kSeed, std::nullopt).outcome, "drop_no_table");
}

// ---- client mistakes are 4xx ----------------------------------------------

TEST_F(ApiTest, BodyMistakesAre400AndChangeNothing) {
    const std::string one = "/v1/backends?" + vq(kWeb) + "&address=203.0.113.11";
    expect_rejected([&] { return patch(one, "{\"state\": \"dr\xff\xfein\"}"); }, 400,
                    "invalid UTF-8 in the body at byte 13");
    expect_rejected([&] { return patch(one, "{\"state\": \"\xed\xa0\x80\"}"); }, 400,
                    "invalid UTF-8");  // a surrogate
    expect_rejected(
        [&] {
            return post("/v1/vips",
                        "{\"address\": \"198.51.100.20\", \"port\": 80, \"name\": \"w\xc3\x28\"}");
        },
        400, "invalid UTF-8 in the body at byte 51");
    expect_rejected([&] { return patch(one, R"({"weight": 1e309})"); }, 400, "number out of range");
    expect_rejected([&] { return patch(one, R"({"weight": 5, "weight": 7})"); }, 400,
                    "duplicate key \"weight\"");
    expect_rejected(
        [&] {
            return post("/v1/vips", R"({"address": "198.51.100.20", "port": 80,
                                    "backends": [{"address": "203.0.113.1", "weight": 1, "weight": 2}]})");
        },
        400, "duplicate key \"weight\"");
    // The same key in two objects is no duplicate.
    Reply fine = post("/v1/vips", R"({"address": "198.51.100.20", "port": 80, "ring_size": 251,
                                      "backends": [{"address": "203.0.113.1", "weight": 1},
                                                   {"address": "203.0.113.2", "weight": 2}]})");
    EXPECT_EQ(fine.status, 201) << fine.text;
}

TEST_F(ApiTest, NulInAQueryParameterIs400) {
    expect_rejected([&] { return get("/v1/vip?vip=198.51.100.10%00garbage:80"); }, 400, "NUL");
    expect_rejected([&] { return get("/v1/backends?vip=198.51.100.10%00garbage:80"); }, 400,
                    "query parameter vip: contains a NUL byte");
    expect_rejected(
        [&] {
            return patch("/v1/backends?" + vq(kWeb) + "&address=203.0.113.11%00x",
                         R"({"weight": 7})");
        },
        400, "query parameter address: contains a NUL byte");
    EXPECT_EQ(vip(kWeb)["backends"][0]["weight"], 100);
}

// An escaped NUL in a backend's address is refused, not cut at the NUL; the
// dry run says so too, and a loopback backend is refused alike.
TEST_F(ApiTest, BackendAddressWithNulOrLoopbackIs400) {
    const std::string body = R"({"address": "203.0.113.19\u0000evil"})";
    expect_rejected([&] { return post("/v1/backends?" + vq(kWeb) + "&dry_run=1", body); }, 400,
                    "address");
    expect_rejected([&] { return post("/v1/backends?" + vq(kWeb), body); }, 400, "address");
    expect_rejected([&] { return post("/v1/backends?" + vq(kWeb), R"({"address": "127.0.0.1"})"); },
                    400, "loopback address 127.0.0.1");
    json spec = web_vip();
    spec["port"] = 8443;
    spec["backends"] = json::array({json{{"address", std::string("203.0.113.19\0evil", 17)}}});
    expect_rejected([&] { return post("/v1/vips", spec.dump()); }, 400, "address");
    for (const json& b : vip(kWeb)["backends"])
        EXPECT_NE(b["address"], "203.0.113.19") << "the cut address was stored";
}

// ---- raw connections -------------------------------------------------------

using Clock = std::chrono::steady_clock;

int connect_unix(const std::string& path, bool nonblocking = false) {
    int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | (nonblocking ? SOCK_NONBLOCK : 0), 0);
    if (fd < 0) return -errno;
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    std::strcpy(addr.sun_path, path.c_str());
    if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
        const int err = errno;
        ::close(fd);
        return -err;
    }
    return fd;
}

int connect_tcp(std::uint16_t port) {
    int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) return -errno;
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(port);
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
        const int err = errno;
        ::close(fd);
        return -err;
    }
    return fd;
}

// Sends request on a blocking fd and reads the whole answer (until the
// server closes), at most `limit` long. Returns the status code, or -1.
int exchange_raw(int fd, const std::string& request, std::chrono::milliseconds limit,
                 std::string* body = nullptr) {
    timeval tv{static_cast<time_t>(limit.count() / 1000),
               static_cast<suseconds_t>((limit.count() % 1000) * 1000)};
    ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    if (!request.empty() && ::send(fd, request.data(), request.size(), MSG_NOSIGNAL) !=
                                static_cast<ssize_t>(request.size()))
        return -1;
    std::string reply;
    char buf[4096];
    const auto deadline = Clock::now() + limit;
    while (Clock::now() < deadline) {
        ssize_t n = ::recv(fd, buf, sizeof(buf), 0);
        if (n <= 0) break;
        reply.append(buf, static_cast<std::size_t>(n));
    }
    if (body) *body = reply;
    if (!reply.starts_with("HTTP/1.1 ")) return -1;
    return std::atoi(reply.c_str() + 9);
}

// A request without a body (and without Content-Length) is complete after
// its head: POST /v1/status answers 405 at once, like other wrong methods.
TEST_F(ApiTest, PostStatusWithoutBodyIs405) {
    int fd = connect_unix(settings.api_socket);
    ASSERT_GE(fd, 0) << std::strerror(-fd);
    const auto start = Clock::now();
    std::string reply;
    EXPECT_EQ(
        exchange_raw(fd, "POST /v1/status HTTP/1.1\r\nHost: xlbd\r\nConnection: close\r\n\r\n", 2s,
                     &reply),
        405)
        << reply;
    ::close(fd);
    EXPECT_LT(Clock::now() - start, 1s);
    EXPECT_NE(reply.find("Allow: GET"), std::string::npos) << reply;
    expect_error(to_reply(client->Post("/v1/status")), 405, "not allowed");
}

// 1,000 requests from 32 clients that connect at the same moment, each
// connect non-blocking (a full backlog would refuse it with EAGAIN): every
// connect is accepted and every request answered.
TEST_F(ApiTest, BurstOfConnectsIsNotRefused) {
    constexpr int kClients = 32;
    constexpr int kRequests = 1000;
    std::atomic<int> next{0}, refused{0}, answered{0}, other{0};
    std::atomic<int> ready{0};
    std::mutex mu;
    std::string first_problem;
    std::vector<std::thread> clients;
    for (int c = 0; c < kClients; ++c) {
        clients.emplace_back([&] {
            ++ready;
            while (ready < kClients) std::this_thread::yield();
            while (next++ < kRequests) {
                int fd = connect_unix(settings.api_socket, true);
                if (fd < 0) {
                    ++refused;
                    std::lock_guard lock(mu);
                    if (first_problem.empty())
                        first_problem = std::string("connect: ") + std::strerror(-fd);
                    continue;
                }
                const int flags = ::fcntl(fd, F_GETFL);
                ::fcntl(fd, F_SETFL, flags & ~O_NONBLOCK);
                std::string reply;
                const int status = exchange_raw(
                    fd, "GET /livez HTTP/1.1\r\nHost: xlbd\r\nConnection: close\r\n\r\n", 10s,
                    &reply);
                ::close(fd);
                if (status == 200) {
                    ++answered;
                } else {
                    ++other;
                    std::lock_guard lock(mu);
                    if (first_problem.empty()) first_problem = reply.empty() ? "no reply" : reply;
                }
            }
        });
    }
    for (auto& t : clients) t.join();
    EXPECT_EQ(refused, 0) << first_problem;
    EXPECT_EQ(other, 0) << first_problem;
    EXPECT_EQ(answered, kRequests);
}

// Slow clients: some send a request one byte at a time, some connect and
// say nothing. Meanwhile other requests are answered at once, and the server
// keeps serving after the slow ones are cut off.
struct SlowClients {
    std::vector<int> fds;
    std::atomic<bool> stop{false};
    std::vector<std::thread> tricklers;

    template <typename Connect>
    void start(int count, Connect connect) {
        for (int i = 0; i < count; ++i) {
            int fd = connect();
            ASSERT_GE(fd, 0) << std::strerror(-fd);
            fds.push_back(fd);
            if (i % 2 == 1) continue;  // idle after connecting
            tricklers.emplace_back([this, fd] {
                const std::string request = "GET /v1/status HTTP/1.1\r\nHost: xlbd\r\nX-Slow: ";
                for (std::size_t k = 0; !stop; ++k) {
                    const char c = k < request.size() ? request[k] : 'x';
                    if (::send(fd, &c, 1, MSG_NOSIGNAL) != 1) return;
                    std::this_thread::sleep_for(100ms);
                }
            });
        }
        std::this_thread::sleep_for(300ms);  // all connected and trickling
    }
    ~SlowClients() {
        stop = true;
        for (auto& t : tricklers) t.join();
        for (int fd : fds) ::close(fd);
    }
};

// While slow clients hold their connections: three requests a while apart,
// each answered 200 within a second.
template <typename Get>
void expect_prompt_answers(Get get) {
    for (int round = 0; round < 3; ++round) {
        const auto start = Clock::now();
        auto r = get();
        const auto took = Clock::now() - start;
        ASSERT_TRUE(r) << httplib::to_string(r.error());
        EXPECT_EQ(r->status, 200);
        EXPECT_LT(took, 1s) << "round " << round;
        std::this_thread::sleep_for(200ms);
    }
}

TEST_F(ApiTest, SlowClientsDoNotStarveTheApi) {
    SlowClients slow;
    slow.start(16, [&] { return connect_unix(settings.api_socket); });
    expect_prompt_answers([&] {
        httplib::Client c(settings.api_socket);
        c.set_address_family(AF_UNIX);
        c.set_read_timeout(5, 0);
        return c.Get("/v1/status");
    });
    // The request timeout (3 s) closes the slow ones: the trickled request is
    // answered 408, the idle connection closed without a word.
    std::string reply;
    EXPECT_EQ(exchange_raw(slow.fds[0], "", 5s, &reply), 408) << reply;
    EXPECT_NE(reply.find("did not arrive within 3000 ms"), std::string::npos) << reply;
    std::string idle;
    EXPECT_EQ(exchange_raw(slow.fds[1], "", 5s, &idle), -1);
    EXPECT_EQ(idle, "");
    EXPECT_EQ(get("/v1/status").status, 200) << "still serving";
}

TEST_F(ApiTest, SlowClientsDoNotStarveMetrics) {
    MetricsServer metrics(services(), "127.0.0.1:0");
    auto started = metrics.start();
    ASSERT_TRUE(started) << started.error();
    {
        SlowClients slow;
        slow.start(16, [&] { return connect_tcp(metrics.port()); });
        expect_prompt_answers([&] {
            httplib::Client c("127.0.0.1", metrics.port());
            c.set_read_timeout(5, 0);
            return c.Get("/metrics");
        });
    }
    httplib::Client c("127.0.0.1", metrics.port());
    auto r = c.Get("/metrics");
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 200) << "still serving";
    metrics.stop();
}

// One peer (here: this process's uid) holds at most max_per_peer
// connections; one more is answered 503 at once and the rest keep working.
TEST_F(ApiTest, ConnectionsPerPeerAreLimited) {
    const std::string path = dir + "/run/limited.sock";
    ApiServer::Options options{path};
    options.limits.max_per_peer = 4;
    ApiServer limited(services(), options);
    ASSERT_TRUE(limited.start());
    std::vector<int> held;
    for (int i = 0; i < 4; ++i) {
        int fd = connect_unix(path);
        ASSERT_GE(fd, 0);
        held.push_back(fd);
    }
    std::this_thread::sleep_for(200ms);
    int extra = connect_unix(path);
    ASSERT_GE(extra, 0);
    std::string reply;
    const auto start = Clock::now();
    EXPECT_EQ(exchange_raw(extra, "GET /livez HTTP/1.1\r\nHost: xlbd\r\n\r\n", 2s, &reply), 503)
        << reply;
    EXPECT_LT(Clock::now() - start, 1s);
    EXPECT_NE(reply.find("too many connections from uid " + std::to_string(::getuid())),
              std::string::npos)
        << reply;
    ::close(extra);
    ::close(held.back());
    held.pop_back();
    std::this_thread::sleep_for(200ms);
    int again = connect_unix(path);
    ASSERT_GE(again, 0);
    EXPECT_EQ(
        exchange_raw(again, "GET /livez HTTP/1.1\r\nHost: xlbd\r\nConnection: close\r\n\r\n", 2s),
        200);
    ::close(again);
    for (int fd : held) ::close(fd);
    limited.stop();
}

// Every local user connects to the metrics port from 127.0.0.1: local peers
// are limited per uid (the peer socket's owner, from the kernel's socket
// diagnostics), not per address. A child running as an unprivileged uid holds
// its 32 idle connections: a scrape by root is still answered 200 at once,
// and the child's 33rd connection is still answered 503.
TEST_F(ApiTest, LocalUserHoldingItsConnectionsDoesNotStarveScrapes) {
    if (::geteuid() != 0) GTEST_SKIP() << "needs root (a child becomes another uid)";
    constexpr uid_t kNobody = 65534;
    ConnectionLimits limits;  // 32 per peer
    // Idle connections are closed after request_timeout: keep them for the test.
    limits.request_timeout = 10s;
    MetricsServer metrics(services(), "127.0.0.1:0", limits);
    auto started = metrics.start();
    ASSERT_TRUE(started) << started.error();
    const std::uint16_t port = metrics.port();
    ASSERT_EQ(limits.max_per_peer, 32u);

    int pair[2];  // [0] the parent's end, [1] the child's
    ASSERT_EQ(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, pair), 0);
    const pid_t pid = ::fork();
    ASSERT_GE(pid, 0) << std::strerror(errno);
    if (pid == 0) {
        // The child of a threaded process: system calls only.
        ::close(pair[0]);  // or the parent's close would not end the child's wait
        const int parent = pair[1];
        auto say = [&](char c) { (void)!::send(parent, &c, 1, MSG_NOSIGNAL); };
        char c = 0;
        if (::syscall(SYS_setgroups, 0, nullptr) != 0 ||
            ::syscall(SYS_setresgid, kNobody, kNobody, kNobody) != 0 ||
            ::syscall(SYS_setresuid, kNobody, kNobody, kNobody) != 0) {
            say('u');
            ::_exit(1);
        }
        int held[32];
        for (int& fd : held) {
            fd = connect_tcp(port);
            if (fd < 0) {
                say('c');
                ::_exit(1);
            }
        }
        say('h');  // holding every connection the uid may have
        if (::recv(parent, &c, 1, 0) != 1) ::_exit(1);
        const int extra = connect_tcp(port);
        const char request[] = "GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n";
        char reply[13] = {};
        std::size_t got = 0;
        if (extra >= 0 && ::send(extra, request, sizeof request - 1, MSG_NOSIGNAL) > 0) {
            const timeval tv{5, 0};
            ::setsockopt(extra, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
            while (got < 12) {
                const ssize_t n = ::recv(extra, reply + got, 12 - got, 0);
                if (n <= 0) break;
                got += static_cast<std::size_t>(n);
            }
        }
        say(got == 12 && std::memcmp(reply, "HTTP/1.1 503", 12) == 0 ? '5' : 'x');
        (void)!::recv(parent, &c, 1, 0);  // hold until the parent is done
        ::_exit(0);
    }
    ::close(pair[1]);
    const int child = pair[0];
    auto hear = [&] {
        char c = 0;
        return ::recv(child, &c, 1, 0) == 1 ? c : '?';
    };
    auto tell = [&] {
        const char c = 'g';
        (void)!::send(child, &c, 1, MSG_NOSIGNAL);
    };
    const char held = hear();
    EXPECT_EQ(held, 'h') << "u: could not become uid " << kNobody << ", c: connect failed";
    if (held == 'h') {
        std::this_thread::sleep_for(300ms);  // every held connection admitted
        const auto start = Clock::now();
        httplib::Client c("127.0.0.1", port);
        c.set_read_timeout(5, 0);
        auto r = c.Get("/metrics");
        EXPECT_TRUE(r) << httplib::to_string(r.error());
        if (r) {
            EXPECT_EQ(r->status, 200) << r->body;
        }
        EXPECT_LT(Clock::now() - start, 1s);
        tell();
        EXPECT_EQ(hear(), '5') << "the unprivileged uid's 33rd connection was not refused";
    }
    ::close(child);  // the child's recv returns: it exits
    int status = 0;
    ASSERT_EQ(::waitpid(pid, &status, 0), pid);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
    metrics.stop();
}

// ---- the metrics port is not shared ------------------------------------------

TEST_F(ApiTest, MetricsPortAlreadyBoundIsAddressInUse) {
    auto holder = [](bool reuseport, bool listen) {
        int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        const int yes = 1;
        if (reuseport) ::setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &yes, sizeof(yes));
        sockaddr_in addr{};
        addr.sin_family = AF_INET;
        addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        EXPECT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0)
            << std::strerror(errno);
        if (listen) {
            EXPECT_EQ(::listen(fd, 16), 0);
        }
        socklen_t len = sizeof(addr);
        ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
        return std::pair{fd, ntohs(addr.sin_port)};
    };
    for (auto [reuseport, listen] : {std::pair{false, false}, std::pair{true, true}}) {
        auto [fd, port] = holder(reuseport, listen);
        const std::string address = "127.0.0.1:" + std::to_string(port);
        MetricsServer metrics(services(), address);
        auto started = metrics.start();
        ASSERT_FALSE(started) << "bound beside a socket with SO_REUSEPORT=" << reuseport;
        EXPECT_NE(started.error().message().find(address), std::string::npos) << started.error();
        EXPECT_NE(started.error().message().find("address in use"), std::string::npos)
            << started.error();
        ::close(fd);
    }
    // And a second agent beside the first.
    MetricsServer first(services(), "127.0.0.1:0");
    ASSERT_TRUE(first.start());
    const std::string address = "127.0.0.1:" + std::to_string(first.port());
    MetricsServer second(services(), address);
    auto refused = second.start();
    ASSERT_FALSE(refused);
    EXPECT_NE(refused.error().message().find(address + ": address in use"), std::string::npos)
        << refused.error();
    httplib::Client c("127.0.0.1", first.port());
    auto r = c.Get("/livez");
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 200) << "the first keeps serving";
    first.stop();
}

}  // namespace
}  // namespace xlb::api

namespace xlb::api {
namespace {

// ---- the connection table ---------------------------------------------------

class ConntrackApiTest : public ApiTest {
protected:
    void SetUp() override {
        ApiTest::SetUp();
        auto ep = [](const char* t) { return *net::Endpoint::parse(t); };
        auto at = [](std::uint64_t ms) { return test::FakeConntrack::units(ms); };
        conntrack->set_backend(1, ip("203.0.113.11"), 1);
        conntrack->set_backend(2, ip("203.0.113.12"), 2);
        conntrack->set_now_ms(100'000);
        // web: two on .11 (one idle 50 s), one stale on .12; one of no VIP.
        conntrack->add(ep("192.0.2.1:40000"), ep("198.51.100.10:80"), 6, 1, 1, at(40'000),
                       at(99'000));
        conntrack->add(ep("192.0.2.2:40000"), ep("198.51.100.10:80"), 6, 1, 1, at(40'000),
                       at(50'000));
        conntrack->add(ep("192.0.2.3:40000"), ep("198.51.100.10:80"), 6, 2, 1, at(40'000),
                       at(99'000));
        conntrack->add(ep("192.0.2.9:40000"), ep("198.51.100.99:80"), 6, 1, 1, at(40'000),
                       at(99'000));
    }
};

TEST_F(ConntrackApiTest, CountPerVipAndBackend) {
    Reply r = get("/v1/conntrack/count");
    ASSERT_EQ(r.status, 200) << r.text;
    EXPECT_EQ(r.body["capacity"], 4096);
    EXPECT_EQ(r.body["scanned"], 4);
    EXPECT_EQ(r.body["matched"], 4);
    EXPECT_TRUE(r.body["scan_ms"].is_number());
    EXPECT_TRUE(r.body["active_within"].is_null());
    EXPECT_EQ(r.body["no_vip"], 1);
    EXPECT_EQ(r.body["vips"], json::parse(R"([{"vip": "198.51.100.10:80/tcp", "entries": 3,
        "stale": 1, "backends": [{"backend": "203.0.113.11", "entries": 2},
                                 {"backend": "203.0.113.12", "entries": 1}]}])"));

    r = get("/v1/conntrack/count?" + vq("198.51.100.10:80") + "&backend=203.0.113.11" +
            "&active_within=10s");
    ASSERT_EQ(r.status, 200) << r.text;
    EXPECT_EQ(r.body["matched"], 1) << "the entry idle 50 s is not active";
    EXPECT_EQ(r.body["active_within"], "10s");
    ASSERT_EQ(r.body["vips"].size(), 1u);
    EXPECT_EQ(r.body["vips"][0]["backends"][0]["entries"], 1);
}

TEST_F(ConntrackApiTest, CountRejectsBadParameters) {
    expect_error(get("/v1/conntrack/count?" + vq("198.51.100.99:80")), 404,
                 "no VIP 198.51.100.99:80/tcp");
    expect_error(get("/v1/conntrack/count?vip=nonsense"), 400, "vip:");
    expect_error(get("/v1/conntrack/count?backend=203.0.113"), 400, "backend:");
    expect_error(get("/v1/conntrack/count?active_within=10"), 400, "active_within:");
    expect_error(get("/v1/conntrack/count?active_within=0s"), 400, "positive duration");
    expect_error(get("/v1/conntrack/count?backnd=203.0.113.11"), 400,
                 "unknown query parameter \"backnd\"");
    expect_error(get("/v1/conntrack/count?client=192.0.2.0/24"), 400, "unknown query parameter");
}

TEST_F(ConntrackApiTest, ListShowsEntries) {
    Reply r = get("/v1/conntrack?client=" + url_encode("192.0.2.0/30") + "&limit=2");
    ASSERT_EQ(r.status, 200) << r.text;
    EXPECT_EQ(r.body["scanned"], 4);
    EXPECT_EQ(r.body["matched"], 3);
    EXPECT_EQ(r.body["truncated"], true);
    ASSERT_EQ(r.body["entries"].size(), 2u);
    const json& e = r.body["entries"][0];
    EXPECT_EQ(e["client"], "192.0.2.1:40000");
    EXPECT_EQ(e["destination"], "198.51.100.10:80");
    EXPECT_EQ(e["protocol"], "tcp");
    EXPECT_EQ(e["vip"], kWeb);
    EXPECT_EQ(e["backend"], "203.0.113.11");
    EXPECT_EQ(e["backend_id"], 1);
    EXPECT_EQ(e["generation"], 1);
    EXPECT_EQ(e["state"], "valid");
    EXPECT_NEAR(e["idle_ms"].get<double>(), 1000, 2);
    EXPECT_NEAR(e["age_ms"].get<double>(), 60000, 2);
    EXPECT_EQ(e["fin_seen"], false);
    EXPECT_EQ(e["rst_seen"], false);
    EXPECT_EQ(e.size(), 12u) << e.dump();

    r = get("/v1/conntrack?backend=203.0.113.12");
    ASSERT_EQ(r.status, 200) << r.text;
    ASSERT_EQ(r.body["entries"].size(), 1u);
    EXPECT_EQ(r.body["entries"][0]["state"], "stale");
    EXPECT_EQ(r.body["truncated"], false);

    r = get("/v1/conntrack?client=192.0.2.9");
    ASSERT_EQ(r.status, 200) << r.text;
    ASSERT_EQ(r.body["entries"].size(), 1u);
    EXPECT_TRUE(r.body["entries"][0]["vip"].is_null());

    expect_error(get("/v1/conntrack?limit=0"), 400,
                 "limit: found \"0\", expected an integer 1-100000");
    expect_error(get("/v1/conntrack?limit=100001"), 400, "limit");
    expect_error(get("/v1/conntrack?limit=ten"), 400, "limit");
    expect_error(get("/v1/conntrack?client=192.0.2.0/40"), 400, "client:");
    expect_error(get("/v1/conntrack?active_within=1s"), 400, "unknown query parameter");
}

TEST_F(ConntrackApiTest, FlushNeedsASelector) {
    expect_error(post("/v1/conntrack/flush", "{}"), 400, "nothing selected");
    expect_error(post("/v1/conntrack/flush", R"({"stale": false, "dry_run": true})"), 400,
                 "nothing selected");
    expect_error(post("/v1/conntrack/flush", R"({"vips": "198.51.100.10:80"})"), 400,
                 "unknown key \"vips\"");
    expect_error(post("/v1/conntrack/flush", R"({"stale": "yes"})"), 400,
                 "stale: found \"yes\", expected true or false");
    expect_error(post("/v1/conntrack/flush", R"({"backend": 5})"), 400, "backend: found 5");
    expect_error(post("/v1/conntrack/flush", R"({"vip": "198.51.100.99:80"})"), 404, "no VIP");
    expect_error(post("/v1/conntrack/flush", ""), 400, "missing request body");
    EXPECT_EQ(conntrack->size(), 4u);
}

TEST_F(ConntrackApiTest, FlushDryRunThenForReal) {
    AuditLog log;
    Reply r = post("/v1/conntrack/flush", R"({"stale": true, "dry_run": true})");
    ASSERT_EQ(r.status, 200) << r.text;
    EXPECT_EQ(r.body["matched"], 1);
    EXPECT_EQ(r.body["deleted"], 0);
    EXPECT_EQ(r.body["dry_run"], true);
    EXPECT_TRUE(r.body["scan_ms"].is_number());
    EXPECT_EQ(r.body.size(), 4u) << r.text;
    EXPECT_EQ(conntrack->size(), 4u);
    EXPECT_TRUE(log.entries().empty()) << "a dry run changes nothing: not audited";

    r = post("/v1/conntrack/flush", R"({"backend": "203.0.113.11"})");
    ASSERT_EQ(r.status, 200) << r.text;
    EXPECT_EQ(r.body["matched"], 3) << "both web entries and the VIP-less one";
    EXPECT_EQ(r.body["deleted"], 3);
    EXPECT_EQ(r.body["dry_run"], false);
    EXPECT_EQ(conntrack->size(), 1u);
    const std::vector<std::string> lines = log.entries();
    ASSERT_EQ(lines.size(), 1u);
    EXPECT_HAS(lines[0], "audit: POST /v1/conntrack/flush by uid ");
    EXPECT_HAS(lines[0], ": flushed 3 of 3 matching connection-table entries; result: ok");
    EXPECT_HAS(lines[0], " backend=203.0.113.11 ");

    r = post("/v1/conntrack/flush", R"({"vip": "198.51.100.10:80", "stale": true})");
    ASSERT_EQ(r.status, 200) << r.text;
    EXPECT_EQ(r.body["deleted"], 1);
    EXPECT_EQ(get("/v1/conntrack/count").body["scanned"], 0);
}

TEST_F(ConntrackApiTest, StatusAndMetricsShowTheSweepersWord) {
    ct_status->update([](conntrack::Status& s) {
        s.capacity = 4096;
        s.requested_capacity = 8192;
        s.entries = 4;
        s.insert_rate_per_cpu = 40;
        s.insert_burst = 40;
        s.inserts = 100;
        s.skipped_per_cpu = {0, 7};
        s.flooded_per_cpu = {false, true};
        s.expired = 3;
        s.last_sweep_ms = 12.54;
    });
    Reply r = get("/v1/status");
    ASSERT_EQ(r.status, 200) << r.text;
    EXPECT_EQ(r.body["conntrack"], json::parse(R"({"capacity": 4096, "requested_capacity": 8192,
        "entries": 4, "insert_rate_per_cpu": 40, "insert_burst": 40, "inserts": 100,
        "skipped_inserts": 7, "expired": 3, "flooded_cpus": [1], "last_sweep_ms": 12.5})"));

    MetricsServer metrics(services(), "127.0.0.1:0");
    ASSERT_TRUE(metrics.start());
    httplib::Client c("127.0.0.1", metrics.port());
    auto m = c.Get("/metrics");
    ASSERT_TRUE(m);
    for (const char* line :
         {"xlb_conntrack_entries 4\n", "xlb_conntrack_capacity 4096\n",
          "xlb_conntrack_inserts_total 100\n", "xlb_conntrack_insert_skipped_total{cpu=\"1\"} 7\n",
          "xlb_conntrack_flooded{cpu=\"0\"} 0\n", "xlb_conntrack_flooded{cpu=\"1\"} 1\n",
          "xlb_conntrack_expired_total 3\n", "xlb_conntrack_sweep_seconds 0.01254\n"})
        EXPECT_NE(m->body.find(line), std::string::npos) << line;
    metrics.stop();
}

// ---- BGP announcements while BIRD does not answer ----------------------------

// An announcer that cannot reach BIRD (here: no control socket, as after a
// kill -9 of bird): every VIP's announcement is "unknown", whatever the agent
// wants, and the error says "BGP daemon unreachable" once.
class BgpApiTest : public ApiTest {
protected:
    Services services() override {
        Services s = ApiTest::services();
        bgp_settings.enabled = true;
        bgp_settings.control_socket = dir + "/run/bird.ctl";  // nothing listens
        bgp_settings.routes_file = dir + "/run/xlb/bird/xlb.conf";
        s.host.state = [] { return HostState{}; };
        s.host.bgp = [this]() -> std::optional<BgpInfo> {
            std::lock_guard lock(bgp_mu);
            return BgpInfo{bgp_settings, bgp_status};
        };
        return s;
    }
    void announce(announce::TimePoint now) {
        announce::AnnouncerOptions o;
        o.control_socket = bgp_settings.control_socket;
        o.routes_file = bgp_settings.routes_file;
        if (!announcer) announcer.emplace(o);
        announce::VipInput v;
        v.key = kWeb;
        v.address = ip("198.51.100.10");
        v.table_live = true;
        v.serving_backends = v.configured_backends = 2;
        announce::HostInput in;
        in.startup_complete = true;
        in.vips = {v};
        const announce::AnnouncerStatus& st = announcer->update(in, now);
        std::lock_guard lock(bgp_mu);
        bgp_status = st;
    }
    config::BgpSettings bgp_settings;
    std::mutex bgp_mu;
    announce::AnnouncerStatus bgp_status;
    std::optional<announce::Announcer> announcer;
};

TEST_F(BgpApiTest, UnreachableBirdMakesAnnouncementsUnknownAndSaysSoOnce) {
    const announce::TimePoint t0 = announce::Clock::now();
    announce(t0);
    announce(t0 + 3s);  // a retry: the text must not grow
    const Reply r = get("/v1/status");
    ASSERT_EQ(r.status, 200) << r.text;
    const json& daemon = r.body["bgp"]["daemon"];
    EXPECT_EQ(daemon["reachable"], false) << daemon.dump();
    EXPECT_EQ(daemon["problem"], "daemon_unreachable") << daemon.dump();
    const std::string error = daemon["error"].get<std::string>();
    EXPECT_EQ(error.rfind("BGP daemon unreachable: connect to BIRD control socket", 0), 0u)
        << error;
    EXPECT_EQ(error.find("unreachable", error.find("unreachable") + 1), std::string::npos)
        << "repeated: " << error;
    ASSERT_EQ(r.body["vips"].size(), 1u);
    const json& a = r.body["vips"][0]["announcement"];
    EXPECT_EQ(a["state"], "unknown") << a.dump();
    EXPECT_EQ(a["reason"], "serving") << "what the agent wants stays visible: " << a.dump();

    const Reply host = get("/v1/host");
    ASSERT_EQ(host.status, 200) << host.text;
    EXPECT_EQ(host.body["daemon"]["error"], daemon["error"]) << host.text;
}

}  // namespace
}  // namespace xlb::api
