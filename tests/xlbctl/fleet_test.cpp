// SPDX-License-Identifier: Apache-2.0
// xlbctl with a fleet, against a store of versions in memory that behaves
// as etcd's keys do (a revision per write, compare-and-swap on a key's
// mod_revision, the value at an older revision): the write verbs, the
// refusals, fleet status, import, export and history.
#include "xlb/xlbctl/fleet.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include "xlb/config/config.h"
#include "xlb/fleet/values.h"
#include "xlb/xlbctl/run.h"

namespace xlb::xlbctl {
namespace {

#define EXPECT_HAS(text, part) EXPECT_NE((text).find(part), std::string::npos) << (text)

class MemoryStore : public FleetStore {
public:
    // key -> versions (revision, value; empty optional: deleted)
    std::map<std::string, std::vector<std::pair<std::int64_t, std::optional<std::string>>>> keys;
    std::int64_t revision = 1;
    int writes = 0;

    std::optional<StoredValue> at(const std::string& key, std::int64_t rev) const {
        auto it = keys.find(key);
        if (it == keys.end()) return std::nullopt;
        std::optional<StoredValue> out;
        for (const auto& [r, v] : it->second)
            if (r <= rev) out = v ? std::optional(StoredValue{key, *v, r, 0}) : std::nullopt;
        return out;
    }
    Result<StoreRead> get(const std::string& key, std::int64_t rev) override {
        StoreRead r{{}, revision};
        if (auto v = at(key, rev ? rev : revision)) r.kvs.push_back(*v);
        return r;
    }
    Result<StoreRead> get_prefix(const std::string& prefix) override {
        StoreRead r{{}, revision};
        for (const auto& [key, versions] : keys)
            if (key.starts_with(prefix))
                if (auto v = at(key, revision)) r.kvs.push_back(*v);
        return r;
    }
    Result<StoreWritten> write(const std::vector<StoreWrite>& ws) override {
        StoreWritten out;
        bool ok = true;
        for (const auto& w : ws) {
            auto now = at(w.key, revision);
            if ((now ? now->mod_revision : 0) != w.expect_revision) ok = false;
            if (now) out.now.push_back(*now);
        }
        if (!ok) {
            out.revision = revision;
            return out;
        }
        ++revision;
        ++writes;
        for (const auto& w : ws) keys[w.key].emplace_back(revision, w.value);
        out.succeeded = true;
        out.revision = revision;
        return out;
    }
    void put(const std::string& key, const std::string& value) {
        keys[key].emplace_back(++revision, value);
    }
};

const std::string kPrefix = "/xlb/default/";
const fleet::Layout kLayout{kPrefix};
const std::string kVip = "198.51.100.10:80/tcp";

struct Harness {
    MemoryStore store;
    std::ostringstream out, err;
    std::string user = "alice";
    Io io;
    Harness() {
        io.out = &out;
        io.err = &err;
        io.getenv = [](const char*) -> const char* { return nullptr; };
        io.open_store = [this](const Command&) -> Result<std::unique_ptr<FleetStore>> {
            struct Borrowed : FleetStore {
                MemoryStore* s;
                explicit Borrowed(MemoryStore* m) : s(m) {}
                Result<StoreRead> get(const std::string& k, std::int64_t r) override {
                    return s->get(k, r);
                }
                Result<StoreRead> get_prefix(const std::string& p) override {
                    return s->get_prefix(p);
                }
                Result<StoreWritten> write(const std::vector<StoreWrite>& w) override {
                    return s->write(w);
                }
            };
            return std::make_unique<Borrowed>(&store);
        };
        io.writer = [this] {
            fleet::Written w;
            w.by = user;
            w.uid = 1000;
            w.host = user == "alice" ? "ops1" : "ops2";
            w.at = "2026-12-06T11:02:03Z";
            w.tool = "xlbctl test";
            return w;
        };
        io.wall_now = [] {
            std::tm tm{};
            ::strptime("2026-12-06T11:02:13", "%Y-%m-%dT%H:%M:%S", &tm);
            return std::chrono::system_clock::from_time_t(::timegm(&tm));
        };
    }
    int run(std::vector<std::string> args) {
        out.str("");
        err.str("");
        args.insert(args.begin(), {"--fleet", "http://127.0.0.1:2379"});
        return xlb::xlbctl::run(args, io);
    }
    fleet::VipValue vip() {
        auto v = store.get(kLayout.vip(kVip), 0);
        EXPECT_EQ(v->kvs.size(), 1u);
        return *fleet::decode_vip(v->kvs.at(0).value);
    }
    std::int64_t vip_revision() { return store.get(kLayout.vip(kVip), 0)->kvs.at(0).mod_revision; }
};

std::string write_file(const std::string& name, const std::string& text) {
    const auto path = std::filesystem::temp_directory_path() / name;
    std::ofstream(path) << text;
    return path.string();
}

const std::string kFile = R"(interface: eth0
next_hop: {address: 192.0.2.1}
encap_source: {ipv4: 192.0.2.2}
hash_seed: 0x1234abcd
encap: gue
vips:
  - address: 198.51.100.10
    port: 80
    protocol: tcp
    backends:
      - {address: 203.0.113.11}
      - {address: 203.0.113.12, weight: 50}
  - address: 198.51.100.20
    port: 53
    protocol: udp
    conntrack: false
    backends:
      - {address: 203.0.113.21}
)";

TEST(XlbctlFleet, WriteVerbsChangeTheValueAndKeepWhoWroteIt) {
    Harness h;
    ASSERT_EQ(h.run({"vip", "add", kVip, "--backend", "203.0.113.11", "--reason", "new"}), 0)
        << h.err.str();
    EXPECT_HAS(h.out.str(), "VIP " + kVip + ": added with 1 backend; written at revision");
    EXPECT_EQ(h.vip().written.by, "alice");
    EXPECT_EQ(h.vip().written.reason, "new");
    ASSERT_EQ(h.run({"backend", "add", kVip, "203.0.113.12", "--weight", "50"}), 0) << h.err.str();
    ASSERT_EQ(h.run({"backend", "drain", kVip, "203.0.113.11", "--reason", "kernel"}), 0)
        << h.err.str();
    fleet::VipValue v = h.vip();
    ASSERT_TRUE(v.vip);
    ASSERT_EQ(v.vip->backends.size(), 2u);
    EXPECT_EQ(v.vip->backends[0].state, config::AdminState::kDrain);
    EXPECT_EQ(v.vip->backends[1].weight, 50u);
    EXPECT_EQ(v.written.reason, "kernel");
    // the agent's rules: a duplicate backend, an unknown VIP, a bad weight
    EXPECT_EQ(h.run({"backend", "add", kVip, "203.0.113.12"}), 1);
    EXPECT_HAS(h.err.str(), "already has backend 203.0.113.12");
    EXPECT_EQ(h.run({"backend", "drain", "198.51.100.99:80/tcp", "203.0.113.12"}), 1);
    EXPECT_HAS(h.err.str(), "no VIP 198.51.100.99:80/tcp in the fleet");
    // a disruptive change needs --allow-disruptive, refused before writing
    const int writes = h.store.writes;
    EXPECT_EQ(h.run({"vip", "set", kVip, "--ring-size", "131071"}), 1);
    EXPECT_HAS(h.err.str(), "--allow-disruptive");
    EXPECT_EQ(h.store.writes, writes);
    ASSERT_EQ(h.run({"vip", "set", kVip, "--ring-size", "131071", "--allow-disruptive"}), 0)
        << h.err.str();
    EXPECT_TRUE(h.vip().allow_disruptive);
    EXPECT_EQ(h.vip().vip->ring_size, 131071u);
    // The confirmation stays with the value while the ring size stays: a
    // host that missed the confirmed revision applies the next one too.
    ASSERT_EQ(h.run({"backend", "set", kVip, "203.0.113.12", "--weight", "60"}), 0) << h.err.str();
    EXPECT_TRUE(h.vip().allow_disruptive);
    // A new ring size is a new disruptive change: it needs its own.
    EXPECT_EQ(h.run({"vip", "set", kVip, "--ring-size", "65537"}), 1);
    EXPECT_HAS(h.err.str(), "--allow-disruptive");
    // a dry run writes nothing
    EXPECT_EQ(h.run({"backend", "del", kVip, "203.0.113.12", "--dry-run"}), 0) << h.err.str();
    EXPECT_EQ(h.store.writes, writes + 2);
    // vip del leaves a tombstone with who and why
    ASSERT_EQ(h.run({"vip", "del", kVip, "--reason", "gone"}), 0) << h.err.str();
    EXPECT_FALSE(h.vip().vip);
    EXPECT_EQ(h.vip().written.reason, "gone");
    // host drain writes desired/hosts/<host>
    ASSERT_EQ(h.run({"host", "drain", "lb2", "--json"}), 0) << h.err.str();
    auto d = h.store.get(kLayout.drain("lb2"), 0);
    ASSERT_EQ(d->kvs.size(), 1u);
    EXPECT_TRUE(fleet::decode_drain(d->kvs[0].value)->drained);
}

// backend add --cookie-acks and backend set --cookie-acks with a fleet: the
// value changes as the agent's PATCH would change it, and a VIP that asks
// for cookies (the fleet's encap: gue) refuses a backend without them.
TEST(XlbctlFleet, CookieAcksOfBackendsFollowTheAgentsRules) {
    Harness h;
    const std::string file = write_file("xlbctl-fleet-cookies.yaml", kFile);
    ASSERT_EQ(h.run({"fleet", "import", file}), 0) << h.err.str();
    ASSERT_EQ(h.run({"backend", "add", kVip, "203.0.113.13", "--cookie-acks"}), 0) << h.err.str();
    EXPECT_HAS(h.out.str(), "backend 203.0.113.13 added (weight 100, active, cookie ACKs)");
    ASSERT_EQ(h.vip().vip->backends.size(), 3u);
    EXPECT_TRUE(h.vip().vip->backends[2].cookie_acks);
    ASSERT_EQ(
        h.run({"backend", "set", kVip, "203.0.113.11", "--cookie-acks", "true", "--weight", "60"}),
        0)
        << h.err.str();
    EXPECT_HAS(h.out.str(), "backend 203.0.113.11 weight 100 -> 60 cookie_acks false -> true");
    ASSERT_EQ(h.run({"backend", "set", kVip, "203.0.113.12", "--cookie-acks", "true"}), 0)
        << h.err.str();
    EXPECT_TRUE(h.vip().vip->backends[1].cookie_acks);
    EXPECT_EQ(h.vip().vip->backends[1].weight, 50u) << "no --weight: kept";
    ASSERT_EQ(h.run({"vip", "set", kVip, "--syn-cookies", "always"}), 0) << h.err.str();
    const int writes = h.store.writes;
    EXPECT_EQ(h.run({"backend", "set", kVip, "203.0.113.12", "--cookie-acks", "false"}), 1);
    EXPECT_HAS(h.err.str(), "backend 203.0.113.12 (backends[1]) lacks cookie_acks: true");
    EXPECT_EQ(h.run({"backend", "add", kVip, "203.0.113.14"}), 1);
    EXPECT_HAS(h.err.str(), "backend 203.0.113.14 (backends[3]) lacks cookie_acks: true");
    EXPECT_EQ(h.store.writes, writes) << "refused: nothing written";
    ASSERT_EQ(h.run({"backend", "set", kVip, "203.0.113.12", "--cookie-acks", "true"}), 0);
    EXPECT_HAS(h.out.str(), "backend 203.0.113.12 unchanged (cookie_acks true)");
}

TEST(XlbctlFleet, TwoWritersOnOneRevisionOneWinsTheOtherIsRefusedNamingIt) {
    Harness h;
    ASSERT_EQ(h.run({"vip", "add", kVip, "--backend", "203.0.113.11", "--backend", "203.0.113.12"}),
              0);
    const std::string read = std::to_string(h.vip_revision());
    h.user = "bob";
    ASSERT_EQ(h.run({"backend", "drain", kVip, "203.0.113.11", "--if-revision", read, "--reason",
                     "drain for kernel upgrade"}),
              0)
        << h.err.str();
    const std::int64_t won = h.vip_revision();
    h.user = "alice";
    EXPECT_EQ(
        h.run({"backend", "set", kVip, "203.0.113.12", "--weight", "7", "--if-revision", read}), 1);
    EXPECT_HAS(h.err.str(), "refused: VIP " + kVip + " is not at revision " + read);
    EXPECT_HAS(h.err.str(), "-> " + std::to_string(won) +
                                ", by bob on ops2 at "
                                "2026-12-06T11:02:03Z: \"drain for "
                                "kernel upgrade\"");
    EXPECT_HAS(h.err.str(), "nothing written");
    // the value is the winner's whole
    fleet::VipValue v = h.vip();
    EXPECT_EQ(h.vip_revision(), won);
    EXPECT_EQ(v.written.by, "bob");
    EXPECT_EQ(v.vip->backends[0].state, config::AdminState::kDrain);
    EXPECT_EQ(v.vip->backends[1].weight, config::kDefaultWeight);
}

// quic and server_id through the store: set by the write verbs, checked by
// the agent's rules, and exported as the file writes them.
TEST(XlbctlFleet, QuicAndServerIdsRoundTripThroughTheStore) {
    Harness h;
    const std::string file = write_file("xlbctl-fleet-quic.yaml", kFile);
    ASSERT_EQ(h.run({"fleet", "import", file}), 0) << h.err.str();
    const std::string udp = "198.51.100.20:53/udp";
    auto stored = [&] {
        auto v = h.store.get(kLayout.vip(udp), 0);
        return *fleet::decode_vip(v->kvs.at(0).value)->vip;
    };
    ASSERT_EQ(h.run({"vip", "set", udp, "--quic", "server_id_length=1,nonce_length=8"}), 0)
        << h.err.str();
    ASSERT_EQ(stored().quic.size(), 1u);
    EXPECT_EQ(stored().quic[0].server_id_length, 1u);
    ASSERT_EQ(h.run({"backend", "set", udp, "203.0.113.21", "--server-id", "9"}), 0) << h.err.str();
    EXPECT_HAS(h.out.str(), "backend 203.0.113.21 server_id unset -> 9");
    ASSERT_EQ(h.run({"backend", "add", udp, "203.0.113.22", "--server-id", "10"}), 0)
        << h.err.str();
    EXPECT_HAS(h.out.str(), "backend 203.0.113.22 added (weight 100, active, server id 10)");
    EXPECT_EQ(stored().backends[0].server_id, 9u);
    EXPECT_EQ(stored().backends[1].server_id, 10u);
    const int writes = h.store.writes;
    EXPECT_EQ(h.run({"backend", "set", udp, "203.0.113.22", "--server-id", "9"}), 1);
    EXPECT_HAS(h.err.str(), "server_id: found 9 again (also backends[0])");
    EXPECT_EQ(h.run({"backend", "set", udp, "203.0.113.22", "--server-id", "256"}), 1);
    EXPECT_HAS(h.err.str(), "expected below 256 (quic has server_id_length 1)");
    EXPECT_EQ(h.store.writes, writes) << "refused: nothing written";
    ASSERT_EQ(h.run({"backend", "set", udp, "203.0.113.22", "--server-id", "none"}), 0)
        << h.err.str();
    EXPECT_HAS(h.out.str(), "backend 203.0.113.22 server_id 10 -> unset");

    ASSERT_EQ(h.run({"fleet", "export"}), 0) << h.err.str();
    auto parsed = config::parse_config(h.out.str(), "export");
    ASSERT_TRUE(parsed) << h.out.str() << parsed.error().front().to_string();
    ASSERT_NE(parsed->find_vip(udp), nullptr);
    EXPECT_EQ(*parsed->find_vip(udp), stored());
}

TEST(XlbctlFleet, ImportWritesEverythingAtOneRevisionOnceAndExportRoundTrips) {
    Harness h;
    const std::string file = write_file("xlbctl-fleet-import.yaml", kFile);
    ASSERT_EQ(h.run({"fleet", "import", file, "--dry-run"}), 0) << h.err.str();
    EXPECT_EQ(h.store.writes, 0);
    EXPECT_HAS(h.out.str(), "create " + kLayout.global());
    EXPECT_HAS(h.out.str(), "create " + kLayout.vip(kVip) + ": 2 backends");
    ASSERT_EQ(h.run({"fleet", "import", file, "--reason", "move"}), 0) << h.err.str();
    EXPECT_EQ(h.store.writes, 1);
    auto all = h.store.get_prefix(kLayout.desired());
    ASSERT_EQ(all->kvs.size(), 3u);
    for (const auto& kv : all->kvs) EXPECT_EQ(kv.mod_revision, all->kvs[0].mod_revision);
    EXPECT_EQ(h.run({"fleet", "import", file}), 1);
    EXPECT_HAS(h.err.str(), "exists");
    EXPECT_HAS(h.err.str(), "--replace");
    EXPECT_EQ(h.store.writes, 1);

    ASSERT_EQ(h.run({"fleet", "export"}), 0) << h.err.str();
    auto parsed = config::parse_config(h.out.str(), "export");
    ASSERT_TRUE(parsed) << h.out.str() << parsed.error().front().to_string();
    auto original = config::parse_config(kFile, "file");
    EXPECT_EQ(parsed->settings.hash_seed, 0x1234abcdu);
    EXPECT_EQ(parsed->settings.encap, config::Encap::kGue);
    EXPECT_EQ(parsed->vips.size(), original->vips.size());
    for (const auto& v : original->vips) {
        const auto* e = parsed->find_vip(v.key());
        ASSERT_NE(e, nullptr) << v.key();
        EXPECT_EQ(*e, v);
    }

    // --replace: a VIP the file lacks gets a tombstone
    const std::string smaller = write_file(
        "xlbctl-fleet-import2.yaml", kFile.substr(0, kFile.find("  - address: 198.51.100.20")));
    ASSERT_EQ(h.run({"fleet", "import", smaller, "--replace"}), 0) << h.err.str();
    auto udp = h.store.get(kLayout.vip("198.51.100.20:53/udp"), 0);
    EXPECT_FALSE(fleet::decode_vip(udp->kvs.at(0).value)->vip);
}

TEST(XlbctlFleet, ImportRefusesAFileWithoutASeed) {
    Harness h;
    std::string text = kFile;
    text.erase(text.find("hash_seed"),
               text.find('\n', text.find("hash_seed")) - text.find("hash_seed") + 1);
    EXPECT_EQ(h.run({"fleet", "import", write_file("xlbctl-fleet-noseed.yaml", text)}), 2);
    EXPECT_HAS(h.err.str(), "xlbctl gen-seed");
    EXPECT_EQ(h.store.writes, 0);
}

TEST(XlbctlFleet, HistoryListsEveryChangeWithItsReasonAndDiffs) {
    Harness h;
    ASSERT_EQ(h.run({"vip", "add", kVip, "--backend", "203.0.113.11", "--reason", "one"}), 0);
    const std::string first = std::to_string(h.vip_revision());
    h.store.put("/xlb/default/desired/unrelated", "x");  // other keys move the revision
    ASSERT_EQ(h.run({"backend", "add", kVip, "203.0.113.12", "--reason", "two"}), 0);
    ASSERT_EQ(h.run({"backend", "drain", kVip, "203.0.113.11", "--reason", "three"}), 0);
    const std::string last = std::to_string(h.vip_revision());
    ASSERT_EQ(h.run({"fleet", "history", kVip, "--json"}), 0) << h.err.str();
    const auto j = nlohmann::json::parse(h.out.str());
    ASSERT_EQ(j.at("changes").size(), 3u);
    EXPECT_EQ(j["changes"][0]["reason"], "one");
    EXPECT_EQ(j["changes"][0]["changes"][0], "created (1 backend)");
    EXPECT_EQ(j["changes"][1]["changes"][0], "backend 203.0.113.12 added (weight 100, active)");
    EXPECT_EQ(j["changes"][2]["reason"], "three");
    EXPECT_EQ(j["changes"][2]["changes"][0],
              "backend 203.0.113.11: weight 100, active -> weight 100, drain");
    ASSERT_EQ(h.run({"fleet", "history", kVip, "--diff", first, last}), 0) << h.err.str();
    EXPECT_HAS(h.out.str(), "backend 203.0.113.12 added");
    EXPECT_HAS(h.out.str(), "backend 203.0.113.11: weight 100, active -> weight 100, drain");
}

std::string host_record(const std::string& name, std::int64_t revision, const std::string& checksum,
                        std::uint32_t weight) {
    fleet::HostRecord r;
    r.host = name;
    r.config_revision = revision;
    r.updated_at = "2026-12-06T11:02:10Z";
    r.vips = nlohmann::json::array({{{"vip", kVip},
                                     {"epoch", 3},
                                     {"checksum", checksum},
                                     {"inputs_checksum", "i" + checksum},
                                     {"table_inputs",
                                      {{"hash_seed", "0x1"},
                                       {"ring_size", 65537},
                                       {"hash", "5tuple"},
                                       {"backends",
                                        {{{"identity", "203.0.113.11"},
                                          {"address", "203.0.113.11"},
                                          {"weight", weight},
                                          {"state", "active"}}}}}}}});
    return fleet::encode(r);
}

TEST(XlbctlFleet, StatusExitsZeroOnlyWhenEveryHostAppliedTheNewestAndAgrees) {
    Harness h;
    ASSERT_EQ(h.run({"fleet", "import", write_file("xlbctl-fleet-st.yaml", kFile)}), 0);
    const std::int64_t rev = h.store.revision;
    h.store.put(kLayout.host("lb1"), host_record("lb1", rev, "c1", 100));
    h.store.put(kLayout.host("lb2"), host_record("lb2", rev, "c1", 100));
    EXPECT_EQ(h.run({"fleet", "status"}), 0) << h.out.str() << h.err.str();
    EXPECT_HAS(h.out.str(), "lb1");
    EXPECT_HAS(h.out.str(), "3s");  // the record's age (updated_at 11:02:10, now 11:02:13)
    h.store.put(kLayout.host("lb2"), host_record("lb2", rev, "c2", 50));
    EXPECT_EQ(h.run({"fleet", "status"}), 1);
    EXPECT_HAS(h.out.str(), "lb2: backend 203.0.113.11: weight 50 (lb1: 100)");
    h.store.put(kLayout.host("lb2"), host_record("lb2", rev - 1, "c1", 100));
    EXPECT_EQ(h.run({"fleet", "status", "--json"}), 1);
    const auto j = nlohmann::json::parse(h.out.str());
    EXPECT_TRUE(j["hosts"][1]["lags"].get<bool>());
}

// A host record from an agent with the fleet's health view: its own
// probes' verdict on the backend, and when its table went live.
std::string host_record_seen(const std::string& name, std::int64_t revision,
                             const std::string& checksum, const std::string& local_health,
                             const std::string& published_at) {
    auto r = *fleet::decode_host(host_record(name, revision, checksum, 100));
    nlohmann::json& v = r.vips[0];
    v["health_consensus"] = "majority";
    v["published_at"] = published_at;
    v["backends"] = nlohmann::json::array({{{"address", "203.0.113.11"},
                                            {"health", "healthy"},
                                            {"local_health", local_health},
                                            {"weight_factor", 1.0}}});
    return fleet::encode(r);
}

TEST(XlbctlFleet, StatusNamesEveryHealthDisagreementAndThePublishSpread) {
    Harness h;
    ASSERT_EQ(h.run({"fleet", "import", write_file("xlbctl-fleet-hd.yaml", kFile)}), 0);
    const std::int64_t rev = h.store.revision;
    h.store.put(kLayout.host("lb1"),
                host_record_seen("lb1", rev, "c1", "healthy", "2026-12-06T11:02:07.500Z"));
    h.store.put(kLayout.host("lb2"),
                host_record_seen("lb2", rev, "c1", "healthy", "2026-12-06T11:02:07.512Z"));
    h.store.put(kLayout.host("lb3"),
                host_record_seen("lb3", rev, "c1", "unhealthy", "2026-12-06T11:02:07.530Z"));
    // The tables agree: exit 0, with the note.
    EXPECT_EQ(h.run({"fleet", "status"}), 0) << h.out.str() << h.err.str();
    EXPECT_HAS(h.out.str(),
               "same inputs, same fleet health, same table; lb3's own probes judge backend "
               "203.0.113.11 unhealthy, the fleet healthy (consensus hides it)");
    EXPECT_HAS(h.out.str(), "publish spread 30 ms");
    ASSERT_EQ(h.run({"fleet", "status", "--json"}), 0);
    const auto j = nlohmann::json::parse(h.out.str());
    EXPECT_EQ(j["state"], "agree_local_differs");
    EXPECT_EQ(j["health_disagreements"], (nlohmann::json::array({{{"host", "lb3"},
                                                                  {"vip", kVip},
                                                                  {"backend", "203.0.113.11"},
                                                                  {"local_health", "unhealthy"},
                                                                  {"health", "healthy"}}})));
    EXPECT_DOUBLE_EQ(j["vips"][0]["publish_spread_seconds"].get<double>(), 0.03);
    EXPECT_TRUE(j["hosts"][0]["agrees"].get<bool>());
    EXPECT_TRUE(j["hosts"][0]["applied_at"].is_null()) << "the record does not say";
    // lb2's fleet view differs from the two others': named, exit 1.
    auto r = *fleet::decode_host(
        host_record_seen("lb2", rev, "c2", "unhealthy", "2026-12-06T11:02:07.512Z"));
    r.vips[0]["backends"][0]["health"] = "unhealthy";
    h.store.put(kLayout.host("lb2"), fleet::encode(r));
    EXPECT_EQ(h.run({"fleet", "status"}), 1);
    EXPECT_HAS(h.out.str(),
               "lb2: backend 203.0.113.11: health unhealthy on lb2, healthy on lb1, lb3");
}

TEST(XlbctlFleet, FleetFromXlbctlsFileWithXlbdsKeysAndErrorsWithTheirLine) {
    const std::string good = write_file(
        "xlbctl-good.yaml", "fleet:\n  name: lab\n  endpoints: [http://10.0.0.1:2379]\n");
    const std::string bad =
        write_file("xlbctl-bad.yaml", "fleet:\n  endpoints: [http://10.0.0.1:2379]\n  lease: 3s\n");
    std::map<std::string, std::string> env{{kConfigEnv, good}};
    GetEnv getenv = [&](const char* n) -> const char* {
        auto it = env.find(n);
        return it == env.end() ? nullptr : it->second.c_str();
    };
    auto r = parse_command({"vip", "del", kVip}, getenv);
    ASSERT_TRUE(std::holds_alternative<Command>(r));
    EXPECT_EQ(std::get<Command>(r).fleet->name, "lab");
    EXPECT_EQ(config::fleet_prefix(*std::get<Command>(r).fleet), "/xlb/lab/");
    env[kConfigEnv] = bad;
    r = parse_command({"vip", "del", kVip}, getenv);
    ASSERT_TRUE(std::holds_alternative<ParseExit>(r));
    EXPECT_HAS(std::get<ParseExit>(r).error, bad + ":3:");
    EXPECT_HAS(std::get<ParseExit>(r).error, "lease");
    // without a fleet, the fleet's options are refused
    r = parse_command({"backend", "drain", kVip, "203.0.113.11", "--if-revision", "4"}, nullptr);
    ASSERT_TRUE(std::holds_alternative<ParseExit>(r));
    EXPECT_HAS(std::get<ParseExit>(r).error, "--if-revision");
}

}  // namespace
}  // namespace xlb::xlbctl
