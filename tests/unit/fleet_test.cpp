// SPDX-License-Identifier: Apache-2.0
// The fleet's values in the store and a host's reading of them: what is
// applied, what is refused and with which key and revision.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "xlb/config/config.h"
#include "xlb/config/json.h"
#include "xlb/fleet/consensus.h"
#include "xlb/fleet/desired.h"
#include "xlb/fleet/values.h"

namespace xlb::fleet {
namespace {

using nlohmann::json;

const Layout kLayout{"/xlb/lab/"};

config::VipSpec vip(const char* address, std::vector<const char*> backends) {
    config::VipSpec v;
    v.address = *net::IpAddress::parse(address);
    v.port = 80;
    for (const char* b : backends) {
        config::BackendSpec spec;
        spec.address = *net::IpAddress::parse(b);
        v.backends.push_back(spec);
    }
    return v;
}

GlobalValue global(std::uint32_t seed) {
    GlobalValue g;
    g.settings.hash_seed = seed;
    g.settings.hash_seed_set = true;
    g.written = Written{"alice", 1000, "ops1", "2026-12-06T10:00:00Z", "first import", "xlbctl"};
    return g;
}

StoredKey stored(std::string key, std::string value, std::int64_t revision) {
    return StoredKey{std::move(key), std::move(value), revision};
}

config::Settings host_settings() {
    auto parsed = config::parse_config(
        "interface: eth0\nnext_hop: {address: 192.0.2.1}\nencap_source: {ipv4: 203.0.113.1}\n"
        "fleet: {endpoints: [\"http://127.0.0.1:2379\"], name: lab}\n",
        "host.yaml");
    EXPECT_TRUE(parsed.has_value());
    return parsed ? parsed->settings : config::Settings{};
}

TEST(FleetValues, EachValueComesBackAsWritten) {
    const GlobalValue g = global(0xabcdef01);
    auto g2 = decode_global(encode(g));
    ASSERT_TRUE(g2.has_value()) << g2.error().message();
    EXPECT_EQ(g2->settings, g.settings);
    EXPECT_EQ(g2->written, g.written);
    EXPECT_FALSE(g2->allow_disruptive);

    VipValue v{vip("198.51.100.10", {"203.0.113.11", "203.0.113.12"}), true, g.written};
    auto v2 = decode_vip(encode(v));
    ASSERT_TRUE(v2.has_value()) << v2.error().message();
    EXPECT_EQ(v2->vip, v.vip);
    EXPECT_TRUE(v2->allow_disruptive);
    // The VIP is the same JSON the API uses.
    EXPECT_EQ(json::parse(encode(v))["vip"], json(*v.vip));

    VipValue tombstone{std::nullopt, false, g.written};
    auto t2 = decode_vip(encode(tombstone));
    ASSERT_TRUE(t2.has_value()) << t2.error().message();
    EXPECT_FALSE(t2->vip.has_value());
    EXPECT_EQ(t2->written.reason, "first import");

    auto d2 = decode_drain(encode(DrainValue{true, g.written}));
    ASSERT_TRUE(d2.has_value());
    EXPECT_TRUE(d2->drained);

    HostRecord r;
    r.host = "lb2";
    r.config_revision = 41;
    r.seen_revision = 42;
    r.refused = HostRecord::Refusal{42, "invalid", {"k@42: vip.port: found"}};
    r.vips = json::array({json{{"vip", "198.51.100.10:80/tcp"}, {"epoch", 3}}});
    auto r2 = decode_host(encode(r));
    ASSERT_TRUE(r2.has_value()) << r2.error().message();
    EXPECT_EQ(r2->config_revision, 41);
    EXPECT_EQ(r2->refused, r.refused);
    EXPECT_EQ(r2->vips, r.vips);
}

// A QUIC VIP's configs and its backends' server ids travel through the
// store as the API's JSON does: every host reads the same.
TEST(FleetValues, QuicConfigsAndServerIdsComeBackAsWritten) {
    config::VipSpec spec = vip("198.51.100.10", {"203.0.113.11", "203.0.113.12"});
    spec.protocol = config::Protocol::kUdp;
    spec.port = 443;
    spec.quic = {config::QuicConfig{1, 2, 14, config::QuicMode::kEncrypted, "/etc/xlb/q.key"},
                 config::QuicConfig{0, 8, 8, config::QuicMode::kPlaintext, ""}};
    spec.backends[0].server_id = 18446744073709551615ULL;
    VipValue v{spec, false, global(1).written};
    auto v2 = decode_vip(encode(v));
    ASSERT_TRUE(v2.has_value()) << v2.error().message();
    ASSERT_TRUE(v2->vip);
    EXPECT_EQ(*v2->vip, spec);
    EXPECT_EQ(v2->vip->quic.size(), 2u);
    EXPECT_EQ(v2->vip->backends[0].server_id, 18446744073709551615ULL);
    EXPECT_FALSE(v2->vip->backends[1].server_id);
}

TEST(FleetValues, UnknownFormatsAndFieldsAreRefusedNotGuessed) {
    json j = json::parse(encode(global(1)));
    j["format"] = 2;
    auto newer = decode_global(j.dump());
    ASSERT_FALSE(newer.has_value());
    EXPECT_NE(newer.error().message().find("format 2 is not understood"), std::string::npos)
        << newer.error().message();
    j = json::parse(encode(global(1)));
    j["weights_by_zone"] = json::object();
    auto unknown = decode_global(j.dump());
    ASSERT_FALSE(unknown.has_value());
    EXPECT_NE(unknown.error().message().find("unknown field \"weights_by_zone\""),
              std::string::npos);
    EXPECT_NE(decode_vip("{not json").error().message().find("not valid JSON"), std::string::npos);
    EXPECT_NE(decode_vip(R"({"format":1})").error().message().find("vip: missing"),
              std::string::npos);
    auto bad_port =
        decode_vip(R"({"format":1,"vip":{"address":"198.51.100.10","port":"http","backends":[]}})");
    ASSERT_FALSE(bad_port.has_value());
    EXPECT_NE(bad_port.error().message().find("vip.port"), std::string::npos)
        << bad_port.error().message();
}

TEST(FleetDesired, ReadsEveryKeyAndTheNewestRevision) {
    const config::VipSpec a = vip("198.51.100.10", {"203.0.113.11"});
    const config::VipSpec b = vip("198.51.100.20", {"203.0.113.12"});
    const std::vector<StoredKey> keys{
        stored(kLayout.global(), encode(global(7)), 3),
        stored(kLayout.vip(a.key()), encode(VipValue{a, false, {}}), 9),
        stored(kLayout.vip(b.key()), encode(VipValue{std::nullopt, false, {}}), 12),
        stored(kLayout.drain("lb2"), encode(DrainValue{true, {}}), 5)};
    auto d = read_desired(kLayout, keys);
    ASSERT_TRUE(d.has_value()) << d.error().front().to_string();
    EXPECT_EQ(d->config_revision, 12);
    EXPECT_EQ(d->vips.size(), 2u);
    EXPECT_TRUE(d->drains.at("lb2").value.drained);

    auto c = host_config(kLayout, *d, host_settings());
    ASSERT_TRUE(c.has_value()) << c.error().front().to_string();
    ASSERT_EQ(c->vips.size(), 1u) << "the deleted VIP is not run";
    EXPECT_EQ(c->vips[0], a);
    EXPECT_EQ(c->settings.hash_seed, 7u);
    EXPECT_EQ(c->settings.interface, "eth0");
}

TEST(FleetDesired, BadKeysAreNamedWithTheirRevision) {
    const config::VipSpec a = vip("198.51.100.10", {"203.0.113.11"});
    const std::vector<StoredKey> keys{
        stored(kLayout.global(), encode(global(7)), 3),
        stored(kLayout.vip("198.51.100.99:80/tcp"), encode(VipValue{a, false, {}}), 8),
        stored(kLayout.vip("not-a-vip"), "{}", 9), stored(kLayout.desired() + "extras", "{}", 10),
        stored(kLayout.vip("198.51.100.11:80/tcp"), "[1,2]", 11)};
    auto d = read_desired(kLayout, keys);
    ASSERT_FALSE(d.has_value());
    const auto& p = d.error();
    ASSERT_EQ(p.size(), 4u);
    EXPECT_EQ(p[0].to_string(),
              "/xlb/lab/desired/vips/198.51.100.99:80/tcp@8: the value is VIP "
              "198.51.100.10:80/tcp, expected the key's 198.51.100.99:80/tcp");
    EXPECT_EQ(p[1].revision, 9);
    EXPECT_NE(p[1].message.find("does not name a VIP"), std::string::npos);
    EXPECT_NE(p[2].message.find("not a key of the fleet's layout"), std::string::npos);
    EXPECT_NE(p[3].message.find("expected an object"), std::string::npos);
}

TEST(FleetDesired, ValidationProblemsPointAtTheVipsKey) {
    config::VipSpec a = vip("198.51.100.10", {"203.0.113.11"});
    config::VipSpec b = vip("198.51.100.20", {"203.0.113.12"});
    b.backends[0].weight = 0;
    b.ring_size = 100;  // not prime
    const std::vector<StoredKey> keys{
        stored(kLayout.global(), encode(global(7)), 3),
        stored(kLayout.vip(a.key()), encode(VipValue{a, false, {}}), 4),
        stored(kLayout.vip(b.key()), encode(VipValue{b, false, {}}), 6)};
    auto d = read_desired(kLayout, keys);
    ASSERT_TRUE(d.has_value());
    auto c = host_config(kLayout, *d, host_settings());
    ASSERT_FALSE(c.has_value());
    for (const Problem& p : c.error()) {
        EXPECT_EQ(p.key, kLayout.vip(b.key())) << p.to_string();
        EXPECT_EQ(p.revision, 6);
        EXPECT_TRUE(p.message.starts_with("vip.")) << p.to_string();
    }
    EXPECT_FALSE(c.error().empty());

    auto no_global = read_desired(kLayout, std::vector<StoredKey>{keys[1]});
    ASSERT_TRUE(no_global.has_value());
    auto c2 = host_config(kLayout, *no_global, host_settings());
    ASSERT_FALSE(c2.has_value());
    EXPECT_EQ(c2.error().front().key, kLayout.global());
    EXPECT_NE(c2.error().front().message.find("no hash seed"), std::string::npos);
}

TEST(FleetDesired, DisruptiveChangesNeedTheWritersConfirmation) {
    const config::VipSpec a = vip("198.51.100.10", {"203.0.113.11"});
    config::VipSpec a_small = a;
    a_small.ring_size = 251;
    auto desired = [&](std::uint32_t seed, bool seed_ok, const config::VipSpec& v, bool vip_ok) {
        GlobalValue g = global(seed);
        g.allow_disruptive = seed_ok;
        const std::vector<StoredKey> keys{
            stored(kLayout.global(), encode(g), 20),
            stored(kLayout.vip(v.key()), encode(VipValue{v, vip_ok, {}}), 21)};
        return *read_desired(kLayout, keys);
    };
    const config::Settings host = host_settings();
    const Desired before = desired(7, false, a, false);
    const config::Config running = *host_config(kLayout, before, host);

    // Nothing running: the first seed moves nothing.
    EXPECT_TRUE(unconfirmed_disruptive(kLayout, config::Config{host, {}}, before, running).empty());
    // Same state: nothing.
    EXPECT_TRUE(unconfirmed_disruptive(kLayout, running, before, running).empty());

    const Desired new_seed = desired(8, false, a, false);
    auto refused =
        unconfirmed_disruptive(kLayout, running, new_seed, *host_config(kLayout, new_seed, host));
    ASSERT_EQ(refused.size(), 1u);
    EXPECT_EQ(refused[0].key, kLayout.global());
    EXPECT_EQ(refused[0].revision, 20);
    EXPECT_NE(refused[0].message.find("--allow-disruptive"), std::string::npos);
    const Desired confirmed_seed = desired(8, true, a, false);
    EXPECT_TRUE(unconfirmed_disruptive(kLayout, running, confirmed_seed,
                                       *host_config(kLayout, confirmed_seed, host))
                    .empty());

    const Desired new_ring = desired(7, false, a_small, false);
    refused =
        unconfirmed_disruptive(kLayout, running, new_ring, *host_config(kLayout, new_ring, host));
    ASSERT_EQ(refused.size(), 1u);
    EXPECT_EQ(refused[0].key, kLayout.vip(a.key()));
    EXPECT_NE(refused[0].message.find("ring_size 65537 -> 251"), std::string::npos)
        << refused[0].message;
    const Desired confirmed_ring = desired(7, false, a_small, true);
    EXPECT_TRUE(unconfirmed_disruptive(kLayout, running, confirmed_ring,
                                       *host_config(kLayout, confirmed_ring, host))
                    .empty());
}

// ---- the fleet's verdict on a backend ------------------------------------

TEST(FleetValues, UtcTimesParseToEpochMilliseconds) {
    EXPECT_EQ(parse_utc_ms("1970-01-01T00:00:00Z"), 0);
    EXPECT_EQ(parse_utc_ms("2000-01-01T00:00:00Z"), 946'684'800'000);
    EXPECT_EQ(parse_utc_ms("2000-01-01T00:00:00.007Z"), 946'684'800'007);
    const auto whole = parse_utc_ms("2026-12-06T14:03:07Z");
    ASSERT_TRUE(whole);
    EXPECT_EQ(parse_utc_ms("2026-12-06T14:03:07.123Z"), *whole + 123);
    EXPECT_EQ(parse_utc_ms("2026-12-06T14:03:08.000Z"), *whole + 1'000);
    EXPECT_EQ(parse_utc_ms("2026-12-07T14:03:07Z"), *whole + 86'400'000);
    EXPECT_EQ(parse_utc_ms("2026-12-31T23:59:60Z"), parse_utc_ms("2027-01-01T00:00:00Z"))
        << "a leap second";
    EXPECT_EQ(parse_utc_ms("2028-02-29T00:00:00Z"),
              *parse_utc_ms("2028-03-01T00:00:00Z") - 86'400'000);
    for (const char* bad :
         {"", "2026-12-06", "2026-12-06T14:03:07", "2026-12-06T14:03:07.12Z",
          "2026-12-06T14:03:07.1234Z", "2026-12-06T14:03:07.1x3Z", "2026-12-06T14:03:07+01:00",
          "2026-12-06 14:03:07Z", "2026-12-06T14:03:07Zjunk", "2026-13-06T14:03:07Z",
          "2026-00-06T14:03:07Z", "2026-12-32T14:03:07Z", "2026-12-06T24:03:07Z",
          "2026-12-06T14:60:07Z", "2026-12-06T14:03:61Z", "2026-02-29T00:00:00Z",
          "2026-12-06T-1:03:07Z", "yesterday"})
        EXPECT_EQ(parse_utc_ms(bad), std::nullopt) << '"' << bad << '"';
}

TEST(FleetValues, AppliedAtRoundTripsThroughTheHostRecord) {
    HostRecord r;
    r.host = "lb1";
    r.config_revision = 12;
    r.applied_at = "2026-12-06T14:03:07.250Z";
    auto back = decode_host(encode(r));
    ASSERT_TRUE(back.has_value()) << back.error().message();
    EXPECT_EQ(back->applied_at, r.applied_at);
    EXPECT_EQ(host_votes(*back).applied_at_ms, *parse_utc_ms(r.applied_at));
    EXPECT_EQ(host_votes(*back).config_revision, 12);
    // An older record without it: no time.
    json older = json::parse(encode(r));
    older.erase("applied_at");
    auto old = decode_host(older.dump());
    ASSERT_TRUE(old.has_value()) << old.error().message();
    EXPECT_EQ(old->applied_at, "");
    EXPECT_EQ(host_votes(*old).applied_at_ms, 0);
}

TEST(FleetValues, HostVotesReadEveryBackendsVoteAndTheVipsTables) {
    HostRecord r;
    r.host = "lb2";
    r.config_revision = 7;
    r.vips = json::array(
        {json{
             {"vip", "198.51.100.10:80/tcp"},
             {"checksum", "00000000000000aa"},
             {"published_at", "2026-12-06T14:03:07.500Z"},
             {"backends",
              json::array({
                  // The table follows the fleet (healthy); this host's own
                  // probes say unhealthy: its vote is its own.
                  json{{"address", "10.0.0.1"},
                       {"health", "healthy"},
                       {"local_health", "unhealthy"},
                       {"bias", 1.0}},
                  json{{"address", "10.0.0.2"},
                       {"health", "unhealthy"},
                       {"local_health", "healthy"},
                       {"healthy_since_ms", 1'765'000'000'123},
                       {"bias", 0.5}},
                  json{{"address", "10.0.0.3"}, {"health", "unknown"}, {"local_health", "unknown"}},
              })}},
         // An older agent's VIP: no local_health, no vote fields, no tables.
         json{{"vip", "198.51.100.10:443/tcp"},
              {"backends", json::array({json{{"address", "10.0.0.1"}, {"health", "unhealthy"}},
                                        json{{"address", "10.0.0.2"}, {"health", "healthy"}}})}},
         // A VIP without a health check: every backend takes traffic.
         json{{"vip", "198.51.100.10:53/udp"},
              {"backends", json::array({json{{"address", "10.0.0.9"}, {"health", "unchecked"}}})}},
         // Not a VIP the reader can name: skipped, not a failure.
         json{{"epoch", 3}}});
    const HostVotes v = host_votes(r);
    EXPECT_EQ(v.config_revision, 7);
    ASSERT_EQ(v.vips.size(), 3u);
    const auto& web = v.vips.at("198.51.100.10:80/tcp");
    ASSERT_EQ(web.size(), 3u);
    EXPECT_EQ(web.at("10.0.0.1"), (Vote{control::Health::kUnhealthy, std::nullopt, 1.0}));
    EXPECT_EQ(web.at("10.0.0.2"), (Vote{control::Health::kHealthy, 1'765'000'000'123, 0.5}));
    EXPECT_EQ(web.at("10.0.0.3"), (Vote{control::Health::kUnknown, std::nullopt, 1.0}));
    const auto& tls = v.vips.at("198.51.100.10:443/tcp");
    EXPECT_EQ(tls.at("10.0.0.1").health, control::Health::kUnhealthy);
    EXPECT_EQ(tls.at("10.0.0.2"), (Vote{control::Health::kHealthy, 0, 1.0}))
        << "healthy without a time: no ramp";
    EXPECT_EQ(v.vips.at("198.51.100.10:53/udp").at("10.0.0.9").health, control::Health::kHealthy);
    EXPECT_EQ(v.live,
              (std::map<std::string, std::string>{{"198.51.100.10:80/tcp", "00000000000000aa"}}));
    EXPECT_FALSE(v.live.contains("198.51.100.10:443/tcp"));
    EXPECT_EQ(v.published_at_ms.at("198.51.100.10:80/tcp"),
              *parse_utc_ms("2026-12-06T14:03:07.500Z"));
    EXPECT_FALSE(v.published_at_ms.contains("198.51.100.10:443/tcp"));

    // The record as the store carries it reads the same.
    auto back = decode_host(encode(r));
    ASSERT_TRUE(back.has_value()) << back.error().message();
    EXPECT_EQ(host_votes(*back).vips, v.vips);

    // A bad publish time is no time, not epoch 0.
    r.vips[0]["published_at"] = "2026-12-06T14:03";
    EXPECT_FALSE(host_votes(r).published_at_ms.contains("198.51.100.10:80/tcp"));
}

namespace consensus {

using control::Health;
constexpr Health H = Health::kHealthy;
constexpr Health U = Health::kUnhealthy;
constexpr Health N = Health::kUnknown;

FleetVerdict verdict(HealthConsensus policy, Health local, std::vector<Health> others,
                     Health previous) {
    return decide(policy, local, others, previous);
}
Health majority(Health local, std::vector<Health> others, Health previous) {
    return verdict(HealthConsensus::kMajority, local, std::move(others), previous).health;
}

TEST(FleetConsensus, MajorityWithOneToFiveHosts) {
    // One host: its own verdict is the majority.
    EXPECT_EQ(majority(U, {}, H), U);
    EXPECT_EQ(majority(H, {}, U), H);
    // Two: one against one is a tie, the previous verdict stays.
    EXPECT_EQ(majority(U, {H}, H), H);
    EXPECT_EQ(majority(H, {U}, U), U);
    EXPECT_EQ(majority(U, {U}, H), U);
    // Three: two of three decide, whichever host is the odd one out.
    EXPECT_EQ(majority(U, {H, H}, H), H);
    EXPECT_EQ(majority(H, {U, U}, H), U);
    EXPECT_EQ(majority(H, {U, H}, U), H);
    // Four: two against two is a tie.
    EXPECT_EQ(majority(U, {U, H, H}, H), H);
    EXPECT_EQ(majority(U, {U, H, H}, U), U);
    EXPECT_EQ(majority(U, {U, U, H}, H), U);
    // Five: three decide.
    EXPECT_EQ(majority(U, {U, H, H, H}, U), H);
    EXPECT_EQ(majority(U, {U, U, H, H}, H), U);
}

TEST(FleetConsensus, UnknownVerdictsHoldNoVote) {
    // A host that has not judged yet counts among the live hosts but for
    // neither side: one healthy of three is no majority.
    EXPECT_EQ(majority(H, {N, N}, N), N);
    EXPECT_EQ(majority(H, {H, N}, N), H);
    EXPECT_EQ(majority(U, {N, N}, H), H);
    const FleetVerdict v = verdict(HealthConsensus::kMajority, N, {H, H}, N);
    EXPECT_EQ(v.health, H);
    EXPECT_EQ(v.live, 3u);
    EXPECT_EQ(v.healthy, 2u);
    EXPECT_FALSE(v.local_disagrees) << "a host without a verdict disagrees with nobody";
}

TEST(FleetConsensus, HostsJoiningAndLeavingMoveTheMajority) {
    // Three hosts, one cannot reach the backend: it stays in.
    Health fleet = majority(U, {H, H}, H);
    EXPECT_EQ(fleet, H);
    // A healthy host's lease expires mid-decision: two hosts, one each way,
    // a tie: the backend stays in rather than flapping out.
    fleet = majority(U, {H}, fleet);
    EXPECT_EQ(fleet, H);
    // The other healthy host goes too: the one left decides alone.
    fleet = majority(U, {}, fleet);
    EXPECT_EQ(fleet, U);
    // Two hosts join that can reach it: back in.
    fleet = majority(U, {H, H}, fleet);
    EXPECT_EQ(fleet, H);
}

TEST(FleetConsensus, AFlappingHostDoesNotFlapTheFleet) {
    Health fleet = H;
    for (int round = 0; round < 10; ++round) {
        const Health flapping = round % 2 ? U : H;
        fleet = majority(flapping, {H, H}, fleet);
        EXPECT_EQ(fleet, H) << "round " << round;
    }
    // Four hosts, two flapping in step: ties keep what was decided.
    for (int round = 0; round < 10; ++round) {
        const Health flapping = round % 2 ? U : H;
        fleet = majority(flapping, {flapping, H, H}, fleet);
        EXPECT_EQ(fleet, H) << "round " << round;
    }
}

TEST(FleetConsensus, AnyDownTakesItOutAtTheFirstUnhealthyVerdict) {
    auto any_down = [](Health local, std::vector<Health> others, Health previous) {
        return verdict(HealthConsensus::kAnyDown, local, std::move(others), previous).health;
    };
    EXPECT_EQ(any_down(H, {H, U}, H), U);
    EXPECT_EQ(any_down(H, {H, H}, U), H);
    EXPECT_EQ(any_down(H, {N, N}, U), U) << "back in only on a healthy majority";
    EXPECT_EQ(any_down(N, {N, N}, N), N);
}

TEST(FleetConsensus, LocalIsTheHostsOwnAndTheDisagreementIsReported) {
    EXPECT_EQ(verdict(HealthConsensus::kLocal, U, {H, H}, H).health, U);
    const FleetVerdict v = verdict(HealthConsensus::kMajority, U, {H, H}, H);
    EXPECT_EQ(v.health, H);
    EXPECT_TRUE(v.local_disagrees);
    EXPECT_EQ(v.unhealthy, 1u);
    EXPECT_FALSE(verdict(HealthConsensus::kLocal, U, {H, H}, H).local_disagrees);
}

TEST(FleetConsensus, PolicyNames) {
    for (HealthConsensus p :
         {HealthConsensus::kLocal, HealthConsensus::kMajority, HealthConsensus::kAnyDown})
        EXPECT_EQ(parse_health_consensus(to_string(p)), p);
    EXPECT_EQ(parse_health_consensus("all"), std::nullopt);
}

// decide_backend() over whole votes: the health, the counts, when the fleet
// brought the backend in and its bias.
Vote vote(Health health, std::optional<std::int64_t> since = std::nullopt, double bias = 1.0) {
    if (health == H && !since) since = 0;
    return Vote{health, health == H ? since : std::nullopt, bias};
}
FleetBackend fleet_of(HealthConsensus policy, std::vector<Vote> votes, Health previous) {
    return decide_backend(policy, votes, previous);
}

TEST(FleetDecideBackend, MajorityOfOneToFiveLiveHostsUnknownsInTheDenominator) {
    // Every mix of healthy, unhealthy and unknown votes among 1 to 5 hosts,
    // each with every previous verdict, in every order: out on more than
    // half unhealthy, in on more than half healthy, else what it was.
    for (std::size_t n = 1; n <= 5; ++n)
        for (std::size_t h = 0; h <= n; ++h)
            for (std::size_t u = 0; h + u <= n; ++u)
                for (Health previous : {H, U, N}) {
                    std::vector<Health> order(h, H);
                    order.insert(order.end(), u, U);
                    order.insert(order.end(), n - h - u, N);
                    std::sort(order.begin(), order.end());
                    const Health expected = 2 * u > n ? U : 2 * h > n ? H : previous;
                    do {
                        std::vector<Vote> votes;
                        for (Health one : order) votes.push_back(vote(one));
                        const FleetBackend f =
                            fleet_of(HealthConsensus::kMajority, votes, previous);
                        const std::string at = std::to_string(n) + " hosts, " + std::to_string(h) +
                                               " healthy, " + std::to_string(u) +
                                               " unhealthy, previous " +
                                               control::to_string(previous);
                        ASSERT_EQ(f.health, expected) << at;
                        EXPECT_EQ(f.live, n) << at;
                        EXPECT_EQ(f.healthy, h) << at;
                        EXPECT_EQ(f.unhealthy, u) << at;
                        EXPECT_EQ(f.in_since_ms.has_value(), f.health == H) << at;
                    } while (std::next_permutation(order.begin(), order.end()));
                }
}

TEST(FleetDecideBackend, AnyDownOutOnOneUnhealthyInOnAHealthyMajority) {
    for (std::size_t n = 1; n <= 5; ++n)
        for (std::size_t h = 0; h <= n; ++h)
            for (std::size_t u = 0; h + u <= n; ++u)
                for (Health previous : {H, U, N}) {
                    std::vector<Vote> votes(h, vote(H));
                    votes.insert(votes.end(), u, vote(U));
                    votes.insert(votes.end(), n - h - u, vote(N));
                    const Health expected = u > 0 ? U : 2 * h > n ? H : previous;
                    EXPECT_EQ(fleet_of(HealthConsensus::kAnyDown, votes, previous).health, expected)
                        << n << " hosts, " << h << " healthy, " << u << " unhealthy";
                }
}

TEST(FleetDecideBackend, LocalIsTheOneVoteGiven) {
    const FleetBackend out = fleet_of(HealthConsensus::kLocal, {vote(U)}, H);
    EXPECT_EQ(out.health, U);
    EXPECT_FALSE(out.in_since_ms);
    const FleetBackend in = fleet_of(HealthConsensus::kLocal, {vote(H, 7'000, 0.25)}, U);
    EXPECT_EQ(in.health, H);
    EXPECT_EQ(in.in_since_ms, 7'000);
    EXPECT_EQ(in.bias, 0.25);
    EXPECT_EQ(fleet_of(HealthConsensus::kLocal, {}, U).health, U) << "no vote: as before";
}

TEST(FleetDecideBackend, MajorityComesInWhenTheMajorityThHostTurnedHealthy) {
    // Three hosts healthy since 3 s, 1 s and 2 s: two of them were healthy
    // from 2 s on.
    EXPECT_EQ(
        fleet_of(HealthConsensus::kMajority, {vote(H, 3'000), vote(H, 1'000), vote(H, 2'000)}, U)
            .in_since_ms,
        2'000);
    // Five: the third earliest.
    EXPECT_EQ(
        fleet_of(HealthConsensus::kMajority,
                 {vote(H, 5'000), vote(H, 1'000), vote(H, 4'000), vote(H, 2'000), vote(H, 3'000)},
                 U)
            .in_since_ms,
        3'000);
    // The unhealthy host's vote is no time: of two healthy, the later.
    EXPECT_EQ(fleet_of(HealthConsensus::kMajority, {vote(H, 1'000), vote(U), vote(H, 3'000)}, U)
                  .in_since_ms,
              3'000);
    // Two hosts that started with it (no ramp) are a majority without a ramp.
    EXPECT_EQ(fleet_of(HealthConsensus::kMajority, {vote(H, 0), vote(H, 9'000), vote(H, 0)}, U)
                  .in_since_ms,
              0);
    EXPECT_EQ(fleet_of(HealthConsensus::kMajority, {vote(H, 0), vote(H, 9'000), vote(H, 8'000)}, U)
                  .in_since_ms,
              8'000);
    // Out: no time at all.
    EXPECT_EQ(
        fleet_of(HealthConsensus::kMajority, {vote(U), vote(U), vote(H, 1'000)}, H).in_since_ms,
        std::nullopt);
}

TEST(FleetDecideBackend, AnyDownComesInWhenTheLastHostTurnedHealthy) {
    const FleetBackend f =
        fleet_of(HealthConsensus::kAnyDown, {vote(H, 3'000), vote(H, 1'000), vote(H, 2'000)}, U);
    EXPECT_EQ(f.health, H);
    EXPECT_EQ(f.in_since_ms, 3'000);
    EXPECT_EQ(fleet_of(HealthConsensus::kAnyDown, {vote(H, 3'000), vote(U), vote(H, 1'000)}, H)
                  .in_since_ms,
              std::nullopt);
}

TEST(FleetDecideBackend, MajorityIsBiasedOnlyWhenMoreThanHalfOfTheHostsAre) {
    auto bias = [](std::vector<double> factors) {
        std::vector<Vote> votes;
        for (double f : factors) votes.push_back(vote(H, 0, f));
        return fleet_of(HealthConsensus::kMajority, votes, H).bias;
    };
    EXPECT_EQ(bias({0.5}), 0.5);
    // Half is not more than half: one of two, two of four.
    EXPECT_EQ(bias({0.5, 1.0}), 1.0);
    EXPECT_EQ(bias({1.0, 0.5, 0.5, 1.0}), 1.0);
    EXPECT_EQ(bias({1.0, 0.5, 1.0}), 1.0);
    // More than half: the factor that many hosts are biased at least by.
    EXPECT_EQ(bias({0.5, 0.25}), 0.5);
    EXPECT_EQ(bias({1.0, 0.5, 0.25}), 0.5);
    EXPECT_EQ(bias({0.4, 1.0, 0.6, 0.5}), 0.6);
    EXPECT_EQ(bias({0.2, 1.0, 0.6, 0.4, 1.0}), 0.6);
    // Whatever the order the records came in.
    std::vector<double> f{0.2, 0.4, 0.6, 0.8, 1.0};
    const double first = bias(f);
    while (std::next_permutation(f.begin(), f.end())) EXPECT_EQ(bias(f), first);
    // A factor out of range counts as its bound.
    EXPECT_EQ(bias({1.5, 1.5, 0.5}), 1.0);
}

TEST(FleetDecideBackend, AnyDownTakesTheSmallestBias) {
    EXPECT_EQ(
        fleet_of(HealthConsensus::kAnyDown, {vote(H, 0, 1.0), vote(H, 0, 0.3), vote(H, 0, 0.9)}, H)
            .bias,
        0.3);
    EXPECT_EQ(fleet_of(HealthConsensus::kAnyDown, {vote(H, 0, 1.0), vote(H, 0, 1.0)}, H).bias, 1.0);
}

TEST(FleetDecideBackend, HostsJoiningLeavingAndALeaseExpiringMidDecision) {
    // Five hosts, the backend in since the third turned healthy.
    std::vector<Vote> votes{vote(H, 1'000), vote(H, 2'000), vote(H, 3'000), vote(U), vote(U)};
    FleetBackend f = fleet_of(HealthConsensus::kMajority, votes, U);
    EXPECT_EQ(f.health, H);
    EXPECT_EQ(f.in_since_ms, 3'000);
    // A healthy host's lease expires while the fleet decides: its record,
    // so its vote, is gone. Two of four: a tie keeps it in.
    votes.erase(votes.begin());
    f = fleet_of(HealthConsensus::kMajority, votes, f.health);
    EXPECT_EQ(f.health, H);
    EXPECT_EQ(f.live, 4u);
    EXPECT_TRUE(f.in_since_ms.has_value());
    // Another goes: one healthy of three, two unhealthy decide.
    votes.erase(votes.begin());
    f = fleet_of(HealthConsensus::kMajority, votes, f.health);
    EXPECT_EQ(f.health, U);
    // A host joins that has not judged yet: it holds no vote, but it is one
    // of the live hosts: two unhealthy of four is no majority, it stays out.
    votes.push_back(vote(N));
    f = fleet_of(HealthConsensus::kMajority, votes, f.health);
    EXPECT_EQ(f.health, U);
    EXPECT_EQ(f.live, 4u);
    // Its first verdict is healthy, and another healthy host joins: in, from
    // when the third healthy host turned healthy.
    votes.back() = vote(H, 8'000);
    votes.push_back(vote(H, 9'000));
    f = fleet_of(HealthConsensus::kMajority, votes, f.health);
    EXPECT_EQ(f.health, H);
    EXPECT_EQ(f.in_since_ms, 9'000);
}

TEST(FleetDecideBackend, AFlappingHostNeitherFlapsTheFleetNorRestartsItsRamp) {
    // Under majority the fleet's ramp started when the second of three
    // turned healthy: a third host flapping (each healthy turn a new time)
    // moves neither the verdict nor the ramp.
    FleetBackend fleet{H};
    for (std::int64_t round = 0; round < 10; ++round) {
        const Vote flapping = round % 2 ? vote(U) : vote(H, 10'000 + round * 1'000);
        fleet = fleet_of(HealthConsensus::kMajority, {vote(H, 1'000), flapping, vote(H, 2'000)},
                         fleet.health);
        EXPECT_EQ(fleet.health, H) << "round " << round;
        EXPECT_EQ(fleet.in_since_ms, 2'000) << "round " << round;
    }
    // any_down follows it: out on each unhealthy turn, in again from the
    // flapping host's newest time.
    for (std::int64_t round = 0; round < 6; ++round) {
        const std::int64_t at = 10'000 + round * 1'000;
        const Vote flapping = round % 2 ? vote(U) : vote(H, at);
        fleet = fleet_of(HealthConsensus::kAnyDown, {vote(H, 1'000), flapping, vote(H, 2'000)},
                         fleet.health);
        EXPECT_EQ(fleet.health, round % 2 ? U : H) << "round " << round;
        if (round % 2 == 0) {
            EXPECT_EQ(fleet.in_since_ms, at) << "round " << round;
        }
    }
}

TEST(FleetValues, PublishStateRoundTripsAndRefusesUnknownFields) {
    PublishState state;
    state.prepared["198.51.100.10:80/tcp"] = "00000000000000bb";
    state.live["198.51.100.10:80/tcp"] = {"00000000000000aa", "2026-12-06T14:03:07.500Z"};
    state.live["198.51.100.20:80/tcp"] = {"00000000000000cc", ""};
    auto back = decode_publish(encode(state));
    ASSERT_TRUE(back) << back.error().message();
    EXPECT_EQ(*back, state);
    EXPECT_TRUE(decode_publish(R"({"format": 1})").has_value()) << "nothing held, nothing live";
    auto unknown = decode_publish(R"({"format": 1, "prepared": {}, "epoch": 3})");
    ASSERT_FALSE(unknown);
    EXPECT_NE(unknown.error().message().find("epoch"), std::string::npos)
        << unknown.error().message();
    EXPECT_FALSE(decode_publish(R"({"format": 1, "live": {"v": {"published_at": "x"}}})"))
        << "a live table without its checksum";
    EXPECT_FALSE(decode_publish(R"({"format": 2})"));
}

}  // namespace consensus

}  // namespace
}  // namespace xlb::fleet
