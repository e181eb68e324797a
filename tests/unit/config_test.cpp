// SPDX-License-Identifier: Apache-2.0
// The configuration: YAML reading and validation (one case per rule, each
// pinning the line and column: a document with one mistake goes in an error
// table, ConfigErrorTable, with where its one error is and what it says), the
// example file, durations, VIP keys, and the JSON codec.
#include "xlb/config/config.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <initializer_list>
#include <iterator>
#include <ostream>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "xlb/config/json.h"
#include "xlb/config/model.h"
#include "xlb/config/vip_merge.h"

#ifndef XLB_SOURCE_DIR
#error "XLB_SOURCE_DIR must be defined (the source tree, to find etc/xlbd.example.yaml)"
#endif

namespace xlb::config {
namespace {

using nlohmann::json;

// Lines 1-4 of most test documents; a VIP starts on line 5.
const std::string kHead =
    "interface: eth0\n"                                             // 1
    "next_hop: {address: 192.0.2.1}\n"                              // 2
    "encap_source: {ipv4: 203.0.113.1, ipv6: \"2001:db8:e::1\"}\n"  // 3
    "vips:\n";                                                      // 4

// A valid VIP on lines 5-8.
const std::string kVip =
    "  - address: 198.51.100.10\n"        // 5
    "    port: 80\n"                      // 6
    "    backends:\n"                     // 7
    "      - {address: 203.0.113.11}\n";  // 8

std::vector<ConfigError> errors_of(const std::string& yaml) {
    auto parsed = parse_config(yaml, "test.yaml");
    if (parsed) return {};
    return parsed.error();
}

std::string listing(const std::vector<ConfigError>& errors) {
    std::string out;
    for (const auto& e : errors) out += "\n  " + e.to_string();
    return out;
}

// Exactly one error, at line:column, whose message contains every word.
template <class Words>
::testing::AssertionResult OneErrorOf(const std::string& yaml, int line, int column,
                                      const Words& words, std::size_t max_length = 0) {
    const auto errors = errors_of(yaml);
    if (errors.size() != 1) {
        return ::testing::AssertionFailure()
               << "expected 1 error, got " << errors.size() << ":" << listing(errors);
    }
    const ConfigError& e = errors.front();
    if (e.file != "test.yaml" || e.line != line || e.column != column) {
        return ::testing::AssertionFailure() << "expected the error at test.yaml:" << line << ":"
                                             << column << ", got " << e.to_string();
    }
    for (std::string_view w : words) {
        if (e.message.find(w) == std::string::npos) {
            return ::testing::AssertionFailure()
                   << "message lacks \"" << w << "\": " << e.to_string().substr(0, 400);
        }
    }
    if (max_length != 0 && e.to_string().size() > max_length) {
        return ::testing::AssertionFailure()
               << "the error line has " << e.to_string().size() << " bytes, expected at most "
               << max_length << ": " << e.to_string().substr(0, 400);
    }
    return ::testing::AssertionSuccess();
}

// Exactly one error, at line:column, whose message contains every word.
::testing::AssertionResult OneError(const std::string& yaml, int line, int column,
                                    std::initializer_list<std::string_view> words) {
    return OneErrorOf(yaml, line, column, words);
}

// The error table: a document with one mistake, where its one error is, what
// the message says, and (for huge values) how long the line may be.
struct ErrorCase {
    std::string name;  // the test's name: letters, digits, '_'
    std::string yaml;
    int line = 0;
    int column = 0;
    std::vector<std::string> words;  // fragments the message contains
    std::size_t max_length = 0;      // the whole error line at most this long; 0: any
};

// gtest prints a failing case's parameter: its name, not 10 MB of YAML.
void PrintTo(const ErrorCase& c, std::ostream* os) {
    *os << c.name << " (" << c.yaml.size() << " bytes of YAML)";
}

ErrorCase E(std::string name, std::string yaml, int line, int column,
            std::vector<std::string> words, std::size_t max_length = 0) {
    return ErrorCase{std::move(name), std::move(yaml), line, column, std::move(words), max_length};
}

class ConfigErrorTable : public ::testing::TestWithParam<ErrorCase> {};

TEST_P(ConfigErrorTable, OneErrorAtItsPlace) {
    const ErrorCase& c = GetParam();
    EXPECT_TRUE(OneErrorOf(c.yaml, c.line, c.column, c.words, c.max_length));
}

// Lines 1-2: the two required settings.
const std::string kMinimal =
    "interface: eth0\n"                  // 1
    "next_hop: {address: 192.0.2.1}\n";  // 2

constexpr std::size_t k10MB = 10 * 1024 * 1024;
constexpr std::size_t k1MiB = 1024 * 1024;

std::vector<ErrorCase> edge_cases() {
    using namespace std::string_literals;
    return {
        // Several documents: the second one is the error, at its start.
        E("SecondDocument", kMinimal + "---\ninterface: eth1\n", 3, 1,
          {"found a second YAML document", "expected one document per file"}),
        E("SecondDocumentAfterEndMarker", kMinimal + "...\ninterface: eth1\n", 4, 1,
          {"second YAML document"}),
        E("EmptySecondDocument", kMinimal + "---\n", 3, 1, {"second YAML document"}),
        E("SecondDocumentNotValidYaml", kMinimal + "---\n[\n", 3, 1, {"second YAML document"}),
        // A NUL byte: one error, where it is.
        E("NulByte", kMinimal + "mtu: 15\0"s + "00\n", 3, 8,
          {"found a NUL byte", "expected UTF-8 text"}),
        E("NulByteInAQuotedString", "interface: \"et\0h0\"\n"s + kMinimal.substr(16), 1, 15,
          {"NUL byte"}),
        E("NulByteInAComment", kMinimal + "# x\0\n"s, 3, 4, {"NUL byte"}),
        E("NulByteFirst", "\0"s + kMinimal, 1, 1, {"NUL byte"}),
        // Huge values: cut in the message, which still names key and place.
        E("TenMegabyteVipName",
          kHead + "  - address: 198.51.100.10\n    port: 80\n    name: " + std::string(k10MB, 'a') +
              "\n",
          7, 11,
          {"vips[0].name: found \"aaaa", "aaaa\"\u2026 (10485760 bytes)",
           "expected at most 64 characters"},
          200),
        E("MegabyteHashKey",
          kHead + kVip + "      - {address: 203.0.113.12, hash_key: " + std::string(k1MiB, 'k') +
              "}\n",
          9, 43, {"vips[0].backends[1].hash_key: found \"kkk", "(1048576 bytes)", "at most 255"},
          200),
        E("MegabytePort",
          kHead + "  - address: 198.51.100.10\n    port: " + std::string(k1MiB, '7') + "\n", 6, 11,
          {"vips[0].port: found \"777", "(1048576 bytes)", "expected an integer 0-65535"}, 200),
        E("MegabyteInterface", "interface: " + std::string(k1MiB, 'e') + "\n" + kMinimal.substr(16),
          1, 12, {"interface: found \"eee", "(1048576 bytes)", "network interface name"}, 200),
        // (An implicit key has at most 1024 characters: a long one is explicit.)
        E("MegabyteUnknownKey", kHead + kVip + "    ? " + std::string(k1MiB, 'x') + "\n    : 1\n",
          9, 7, {"vips[0].\"xxx", "(1048576 bytes): unknown key", "expected one of"}, 400),
        E("MegabyteSocketPath", kMinimal + "api: {socket: /" + std::string(k1MiB, 's') + "}\n", 3,
          15, {"api.socket: found a path of 1048577 bytes", "expected at most 107"}, 200),
        // api.socket: sun_path holds 107 bytes and the NUL.
        E("SocketPathOf108Bytes", kMinimal + "api: {socket: /" + std::string(107, 's') + "}\n", 3,
          15,
          {"api.socket: found a path of 108 bytes", "expected at most 107",
           "the limit of a Unix socket address"}),
    };
}

INSTANTIATE_TEST_SUITE_P(EdgeCases, ConfigErrorTable, ::testing::ValuesIn(edge_cases()),
                         [](const auto& info) { return info.param.name; });

Config parse_ok(const std::string& yaml) {
    auto parsed = parse_config(yaml, "test.yaml");
    EXPECT_TRUE(parsed.has_value()) << (parsed ? "" : listing(parsed.error()));
    return parsed ? *parsed : Config{};
}

std::string example_path() { return std::string(XLB_SOURCE_DIR) + "/etc/xlbd.example.yaml"; }

// --- Reading valid files ----------------------------------------------------

TEST(ConfigParse, MinimalFileGetsDocumentedDefaults) {
    const Config c = parse_ok(kHead + kVip);
    const Settings& s = c.settings;
    EXPECT_EQ(s.interface, "eth0");
    EXPECT_EQ(s.xdp_mode, XdpMode::kAuto);
    ASSERT_TRUE(s.next_hop.address);
    EXPECT_EQ(*s.next_hop.address, net::IpAddress::v4(192, 0, 2, 1));
    EXPECT_FALSE(s.next_hop.mac);
    EXPECT_EQ(s.encap_source.ipv4_prefix_len, 32);
    EXPECT_EQ(s.encap_source.ipv6_prefix_len, 128);
    EXPECT_EQ(s.hash_seed, 0u);
    EXPECT_EQ(s.mtu, 1500);
    EXPECT_TRUE(s.icmp_too_big);
    EXPECT_EQ(s.encap, Encap::kIpip);
    EXPECT_EQ(s.gue_port, 6080);
    EXPECT_FALSE(s.second_chance.enabled);
    EXPECT_EQ(s.second_chance.window, std::chrono::minutes(10));
    EXPECT_EQ(s.maps, MapSizes{});
    EXPECT_EQ(s.api_socket, "/run/xlb/xlbd.sock");
    EXPECT_EQ(s.api_group, "") << "the agent's own group";
    EXPECT_EQ(s.metrics_listen, "127.0.0.1:9464");
    EXPECT_EQ(s.health_history, 20u);
    ASSERT_EQ(c.vips.size(), 1u);
    const VipSpec& v = c.vips[0];
    EXPECT_EQ(v.key(), "198.51.100.10:80/tcp");
    EXPECT_EQ(v.ring_size, 65537u);
    EXPECT_EQ(v.panic_threshold, 0.5);
    EXPECT_EQ(v.health_check, HealthCheck{});
    EXPECT_EQ(v.slow_start, SlowStart{});
    ASSERT_EQ(v.backends.size(), 1u);
    EXPECT_EQ(v.backends[0].weight, kDefaultWeight);
    EXPECT_EQ(v.backends[0].state, AdminState::kActive);
}

TEST(ConfigParse, ExampleFileParsesCleanWithItsValues) {
    auto loaded = load_config_file(example_path());
    ASSERT_TRUE(loaded.has_value()) << listing(loaded.error());
    const Config& c = *loaded;
    EXPECT_FALSE(c.settings.hash_seed_set) << "the example must not ship a usable seed";
    EXPECT_EQ(c.settings.encap_source.ipv4_prefix_len, 24);
    ASSERT_TRUE(c.settings.encap_source.ipv6);
    EXPECT_EQ(c.settings.encap_source.ipv6->to_string(), "2001:db8:e::1");
    ASSERT_EQ(c.vips.size(), 3u);
    const VipSpec* web = c.find_vip("198.51.100.10:80/tcp");
    ASSERT_NE(web, nullptr);
    EXPECT_EQ(web->name, "web");
    EXPECT_EQ(web->health_check.type, HealthCheckType::kHttp);
    EXPECT_EQ(web->health_check.interval, std::chrono::seconds(2));
    EXPECT_EQ(web->health_check.jitter, std::chrono::milliseconds(200));
    const std::vector<StatusRange> statuses{{200, 299}, {301, 301}};
    EXPECT_EQ(web->health_check.expected_statuses, statuses);
    EXPECT_EQ(web->slow_start.window, std::chrono::seconds(30));
    ASSERT_EQ(web->backends.size(), 3u);
    EXPECT_EQ(web->backends[0].identity(), "web-1");
    EXPECT_EQ(web->backends[2].state, AdminState::kDrain);
    const VipSpec* web6 = c.find_vip("[2001:db8::10]:443/tcp");
    ASSERT_NE(web6, nullptr);
    EXPECT_EQ(web6->backends[1].weight, 200u);
    const VipSpec* dns = c.find_vip("198.51.100.53:53/udp");
    ASSERT_NE(dns, nullptr);
    EXPECT_EQ(dns->hash, HashMode::kSourceIp);
    EXPECT_FALSE(dns->conntrack);
    EXPECT_EQ(dns->on_unhealthy, UnhealthyPolicy::kKeep);
    EXPECT_EQ(dns->slow_start.window, Duration::zero());
    EXPECT_EQ(dns->panic_threshold, 0.0);
    EXPECT_TRUE(check_config(c).empty());
}

// There is no default seed: a file without hash_seed parses (the reader
// checks what is there), and missing_hash_seed() says what xlbd says before
// it runs with it: how to make one, and that a fleet shares it.
TEST(ConfigSeed, AFileWithoutASeedHasNone) {
    const Config c = parse_ok(kMinimal);
    EXPECT_FALSE(c.settings.hash_seed_set);
    const auto missing = missing_hash_seed(c, "/etc/xlb/xlbd.yaml");
    ASSERT_TRUE(missing.has_value());
    EXPECT_EQ(missing->file, "/etc/xlb/xlbd.yaml");
    EXPECT_EQ(missing->line, 0) << "not tied to a line: the key is absent";
    const std::string text = missing->to_string();
    EXPECT_TRUE(text.starts_with("/etc/xlb/xlbd.yaml: hash_seed is not set")) << text;
    for (const char* part : {"no default", "xlbctl gen-seed", "every LB host", "same value"})
        EXPECT_NE(text.find(part), std::string::npos) << "lacks \"" << part << "\": " << text;
}

TEST(ConfigSeed, AnySeedTheFileSetsIsTaken) {
    for (const auto& [line, value] : std::vector<std::pair<std::string, std::uint32_t>>{
             {"hash_seed: 0x3f6c19a2\n", 0x3f6c19a2u},
             {"hash_seed: 7\n", 7u},
             {"hash_seed: 0\n", 0u}}) {
        const Config c = parse_ok(kMinimal + line);
        EXPECT_TRUE(c.settings.hash_seed_set) << line;
        EXPECT_EQ(c.settings.hash_seed, value) << line;
        EXPECT_FALSE(missing_hash_seed(c, "test.yaml").has_value()) << line;
    }
}

TEST(ConfigSeed, TheExampleShipsNoSeedAndSaysHowToMakeOne) {
    std::ifstream in(example_path());
    const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    EXPECT_NE(text.find("xlbctl gen-seed"), std::string::npos);
    auto loaded = load_config_file(example_path());
    ASSERT_TRUE(loaded.has_value()) << listing(loaded.error());
    EXPECT_TRUE(missing_hash_seed(*loaded, example_path()).has_value());
}

TEST(ConfigSeed, WrittenBackOnlyWhenSet) {
    const Config unset = parse_ok(kMinimal);
    EXPECT_EQ(to_yaml(unset).find("hash_seed"), std::string::npos) << to_yaml(unset);
    const Config set = parse_ok(kMinimal + "hash_seed: 0x0000002a\n");
    const std::string written = to_yaml(set);
    EXPECT_NE(written.find("hash_seed: 0x0000002a"), std::string::npos) << written;
    auto reread = parse_config(written, "written.yaml");
    ASSERT_TRUE(reread.has_value()) << listing(reread.error());
    EXPECT_EQ(*reread, set);
    EXPECT_EQ(format_hash_seed(0x5eed1234u), "0x5eed1234");
    EXPECT_EQ(format_hash_seed(42), "0x0000002a");
}

TEST(ConfigParse, ExampleFileRoundTripsThroughYaml) {
    auto loaded = load_config_file(example_path());
    ASSERT_TRUE(loaded.has_value()) << listing(loaded.error());
    const std::string written = to_yaml(*loaded);
    auto reread = parse_config(written, "written.yaml");
    ASSERT_TRUE(reread.has_value()) << listing(reread.error()) << "\n" << written;
    EXPECT_EQ(*reread, *loaded) << written;
    EXPECT_EQ(to_yaml(*reread), written);
}

TEST(ConfigParse, ApiGroupIsReadAndWrittenBack) {
    auto loaded = parse_config(
        "interface: eth0\nnext_hop: {address: 192.0.2.1}\napi: {socket: /run/x/x.sock, group: "
        "xlb}\n",
        "group.yaml");
    ASSERT_TRUE(loaded.has_value()) << listing(loaded.error());
    EXPECT_EQ(loaded->settings.api_group, "xlb");
    const std::string written = to_yaml(*loaded);
    auto reread = parse_config(written, "written.yaml");
    ASSERT_TRUE(reread.has_value()) << listing(reread.error()) << "\n" << written;
    EXPECT_EQ(reread->settings.api_group, "xlb") << written;
    auto numeric = parse_config(
        "interface: eth0\nnext_hop: {address: 192.0.2.1}\napi: {group: \"998\"}\n", "gid.yaml");
    ASSERT_TRUE(numeric.has_value()) << listing(numeric.error());
    EXPECT_EQ(numeric->settings.api_group, "998");
}

TEST(ConfigParse, HealthCheckPolicyDefaults) {
    const HealthCheck h;
    EXPECT_FALSE(h.failure_accrual.enabled);  // opt-in
    EXPECT_EQ(h.failure_accrual.success_rate, 0.8);
    EXPECT_EQ(h.failure_accrual.window, std::chrono::seconds(10));
    EXPECT_EQ(h.failure_accrual.min_probes, 5u);
    EXPECT_EQ(h.failure_accrual.min_penalty, std::chrono::seconds(1));
    EXPECT_EQ(h.failure_accrual.max_penalty, std::chrono::minutes(1));
    EXPECT_EQ(h.failure_accrual.jitter, 0.5);
    EXPECT_EQ(h.rate_limit_bias.factor, 0.1);
    EXPECT_EQ(h.rate_limit_bias.penalty, std::chrono::seconds(5));
    EXPECT_EQ(h.rate_limit_bias.max_retry_after, std::chrono::seconds(300));
    EXPECT_EQ(h.flapping.changes, 4u);
    EXPECT_EQ(h.flapping.window, std::chrono::minutes(5));
    EXPECT_EQ(h.flapping.hold, std::chrono::minutes(5));
}

TEST(ConfigParse, HttpConnectionReuseDefaultsAndRoundTrips) {
    const HealthCheck defaults;
    EXPECT_TRUE(defaults.reuse_connection);
    EXPECT_EQ(defaults.reuse_limit, std::chrono::seconds(30));
    const Config c = parse_ok(kHead + kVip +
                              "    health_check: {type: http, reuse_connection: false, "
                              "reuse_limit: 2m}\n");
    const HealthCheck& h = c.vips[0].health_check;
    EXPECT_FALSE(h.reuse_connection);
    EXPECT_EQ(h.reuse_limit, std::chrono::minutes(2));
    const std::string written = to_yaml(c);
    EXPECT_NE(written.find("reuse_limit: 2m"), std::string::npos) << written;
    auto reread = parse_config(written, "written.yaml");
    ASSERT_TRUE(reread.has_value()) << listing(reread.error()) << "\n" << written;
    EXPECT_EQ(*reread, c) << written;
    auto back = health_check_from_json(json::parse(json(h).dump()));
    ASSERT_TRUE(back.has_value()) << back.error();
    EXPECT_EQ(*back, h);
    // A state file written before these settings existed reads with the defaults.
    json old = json(h);
    old.erase("reuse_connection");
    old.erase("reuse_limit");
    auto older = health_check_from_json(old);
    ASSERT_TRUE(older.has_value()) << older.error();
    EXPECT_TRUE(older->reuse_connection);
    // A tcp check's file has neither key (they are http's).
    const Config tcp = parse_ok(kHead + kVip + "    health_check: {type: tcp}\n");
    EXPECT_EQ(to_yaml(tcp).find("reuse_"), std::string::npos);
}

// A file in a temporary directory, removed with it.
class TempFile {
public:
    explicit TempFile(const std::string& content) {
        char dir[] = "/tmp/xlb-config-test.XXXXXX";
        if (::mkdtemp(dir)) dir_ = dir;
        path_ = dir_ + "/ca.pem";
        std::ofstream(path_) << content;
    }
    ~TempFile() {
        std::error_code ec;
        std::filesystem::remove_all(dir_, ec);
    }
    const std::string& path() const { return path_; }

private:
    std::string dir_;
    std::string path_;
};

// Validation only looks for a PEM certificate; the probe engine parses it.
const std::string kPemCertificate =
    "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n";

TEST(ConfigParse, HttpsCheckKeysDefaultsAndRoundTrips) {
    const HealthCheck defaults;
    EXPECT_TRUE(defaults.verify);
    EXPECT_EQ(defaults.sni, "");
    EXPECT_EQ(defaults.ca_file, "");
    const TempFile ca(kPemCertificate);
    const Config c = parse_ok(kHead + kVip +
                              "    health_check: {type: https, port: 443, path: /healthz, "
                              "expected_statuses: [200], sni: www.example.com, ca_file: " +
                              ca.path() + ", reuse_limit: 10s}\n");
    const HealthCheck& h = c.vips[0].health_check;
    EXPECT_EQ(h.type, HealthCheckType::kHttps);
    EXPECT_EQ(h.sni, "www.example.com");
    EXPECT_EQ(h.ca_file, ca.path());
    EXPECT_TRUE(h.verify);
    EXPECT_EQ(h.path, "/healthz");
    EXPECT_EQ(h.reuse_limit, std::chrono::seconds(10));
    const std::string written = to_yaml(c);
    EXPECT_NE(written.find("sni: www.example.com"), std::string::npos) << written;
    EXPECT_NE(written.find("ca_file: " + ca.path()), std::string::npos) << written;
    auto reread = parse_config(written, "written.yaml");
    ASSERT_TRUE(reread.has_value()) << listing(reread.error()) << "\n" << written;
    EXPECT_EQ(*reread, c) << written;
    auto back = health_check_from_json(json::parse(json(h).dump()));
    ASSERT_TRUE(back.has_value()) << back.error();
    EXPECT_EQ(*back, h);
    // A state file written before https existed reads with the defaults.
    json old = json(HealthCheck{});
    old.erase("sni");
    old.erase("ca_file");
    old.erase("verify");
    auto older = health_check_from_json(old);
    ASSERT_TRUE(older.has_value()) << older.error();
    EXPECT_EQ(*older, HealthCheck{});

    // Verification off: any certificate, no CA file.
    const Config off = parse_ok(kHead + kVip + "    health_check: {type: https, verify: false}\n");
    EXPECT_FALSE(off.vips[0].health_check.verify);
    auto off_again = parse_config(to_yaml(off), "written.yaml");
    ASSERT_TRUE(off_again.has_value()) << listing(off_again.error());
    EXPECT_EQ(*off_again, off);
    // http's policies hold for https too.
    parse_ok(
        kHead + kVip +
        "    health_check: {type: https, body_contains: ok, rate_limit_bias: {factor: 0.5}}\n");
    // Other types' files carry none of the TLS keys.
    const Config http = parse_ok(kHead + kVip + "    health_check: {type: http}\n");
    EXPECT_EQ(to_yaml(http).find("verify"), std::string::npos);
}

// The column of `text` in `line` (1-based), for errors whose place depends
// on a temporary path.
int column_of(const std::string& line, const std::string& text) {
    return static_cast<int>(line.find(text)) + 1;
}

TEST(ConfigErrors, TlsKeysOnOtherCheckTypes) {
    EXPECT_TRUE(OneError(kHead + kVip + "    health_check: {type: http, sni: a.example}\n", 9, 37,
                         {"health_check.sni", "set for type http", "only with type: https"}));
    EXPECT_TRUE(OneError(kHead + kVip + "    health_check: {type: tcp, verify: false}\n", 9, 39,
                         {"health_check.verify", "set for type tcp", "only with type: https"}));
    EXPECT_TRUE(OneError(kHead + kVip + "    health_check: {type: udp, ca_file: /etc/ca.pem}\n", 9,
                         40,
                         {"health_check.ca_file", "set for type udp", "only with type: https"}));
    EXPECT_TRUE(OneError(kHead + kVip + "    health_check: {type: tcp, path: /x}\n", 9, 37,
                         {"health_check.path", "only with type: http or https"}));
}

TEST(ConfigErrors, SniMustBeADnsName) {
    EXPECT_TRUE(OneError(kHead + kVip + "    health_check: {type: https, sni: 203.0.113.11}\n", 9,
                         38, {"health_check.sni", "found \"203.0.113.11\"", "a DNS name"}));
    EXPECT_TRUE(OneError(kHead + kVip + "    health_check: {type: https, sni: \"a b\"}\n", 9, 38,
                         {"health_check.sni", "a DNS name"}));
    EXPECT_TRUE(OneError(kHead + kVip + "    health_check: {type: https, sni: -a.example}\n", 9, 38,
                         {"health_check.sni", "a DNS name"}));
    parse_ok(kHead + kVip + "    health_check: {type: https, sni: api-1.eu.example.com}\n");
}

TEST(ConfigErrors, VerifyMustBeABoolean) {
    EXPECT_TRUE(OneError(kHead + kVip + "    health_check: {type: https, verify: maybe}\n", 9, 41,
                         {"health_check.verify", "found \"maybe\""}));
}

TEST(ConfigErrors, CaFileThatCannotBeReadIsNamed) {
    EXPECT_TRUE(OneError(
        kHead + kVip + "    health_check: {type: https, ca_file: /nonexistent/xlb/ca.pem}\n", 9, 42,
        {"health_check.ca_file", "cannot read the CA file /nonexistent/xlb/ca.pem",
         "No such file or directory"}));
    EXPECT_TRUE(
        OneError(kHead + kVip + "    health_check: {type: https, ca_file: /}\n", 9, 42,
                 {"health_check.ca_file", "cannot read the CA file: read /", "Is a directory"}));
    EXPECT_TRUE(OneError(kHead + kVip + "    health_check: {type: https, ca_file: certs/ca.pem}\n",
                         9, 42, {"health_check.ca_file", "\"certs/ca.pem\"", "absolute path"}));
    const TempFile junk("not a certificate\n");
    const std::string line = "    health_check: {type: https, ca_file: " + junk.path() + "}\n";
    EXPECT_TRUE(OneError(kHead + kVip + line, 9, column_of(line, junk.path()),
                         {"health_check.ca_file", junk.path() + " holds no PEM certificate"}));
}

TEST(ConfigErrors, CaFileWithVerificationOff) {
    const TempFile ca(kPemCertificate);
    const std::string line =
        "    health_check: {type: https, verify: false, ca_file: " + ca.path() + "}\n";
    EXPECT_TRUE(OneError(kHead + kVip + line, 9, column_of(line, ca.path()),
                         {"health_check.ca_file", "set while verify is false"}));
}

TEST(ConfigErrors, HttpsThroughAUdpVip) {
    const std::string yaml = kHead +
                             "  - address: 198.51.100.53\n"
                             "    port: 53\n"
                             "    protocol: udp\n"
                             "    health_check: {type: https, via_vip: true}\n";
    EXPECT_TRUE(
        OneError(yaml, 8, 42, {"health_check.via_vip", "https check of a udp VIP", "udp check"}));
}

TEST(ConfigParse, HealthCheckPoliciesAndTheirRoundTrips) {
    const Config c = parse_ok(kHead + kVip +
                              "    health_check:\n"
                              "      type: http\n"
                              "      interval: 1s\n"
                              "      timeout: 500ms\n"
                              "      failure_accrual: {enabled: true, success_rate: 0.9, window: "
                              "30s, min_probes: 10, min_penalty: 2s, max_penalty: 2m, jitter: "
                              "0.25}\n"
                              "      rate_limit_bias: {factor: 0.2, penalty: 10s, max_retry_after: "
                              "1m}\n"
                              "      flapping: {changes: 6, window: 10m, hold: 15m}\n");
    ASSERT_EQ(c.vips.size(), 1u);
    const HealthCheck& h = c.vips[0].health_check;
    const FailureAccrual accrual{
        true, 0.9, std::chrono::seconds(30), 10, std::chrono::seconds(2), std::chrono::minutes(2),
        0.25};
    EXPECT_EQ(h.failure_accrual, accrual);
    const RateLimitBias bias{0.2, std::chrono::seconds(10), std::chrono::minutes(1)};
    EXPECT_EQ(h.rate_limit_bias, bias);
    const Flapping flapping{6, std::chrono::minutes(10), std::chrono::minutes(15)};
    EXPECT_EQ(h.flapping, flapping);
    const std::string written = to_yaml(c);
    auto reread = parse_config(written, "written.yaml");
    ASSERT_TRUE(reread.has_value()) << listing(reread.error()) << "\n" << written;
    EXPECT_EQ(*reread, c) << written;
    auto back = health_check_from_json(json::parse(json(h).dump()));
    ASSERT_TRUE(back.has_value()) << back.error();
    EXPECT_EQ(*back, h);
    // A state file written before these settings existed still reads.
    json old = json(HealthCheck{});
    old.erase("failure_accrual");
    old.erase("rate_limit_bias");
    old.erase("flapping");
    auto older = health_check_from_json(old);
    ASSERT_TRUE(older.has_value()) << older.error();
    EXPECT_EQ(*older, HealthCheck{});
}

TEST(ConfigParse, MacNextHopAndHexSeed) {
    const Config c = parse_ok(
        "interface: veth0\n"
        "next_hop: {mac: \"02:00:00:00:00:01\"}\n"
        "hash_seed: 0xFFFFFFFF\n"
        "xdp_mode: generic\n");
    ASSERT_TRUE(c.settings.next_hop.mac);
    EXPECT_EQ(net::mac_to_string(*c.settings.next_hop.mac), "02:00:00:00:00:01");
    EXPECT_EQ(c.settings.hash_seed, 0xffffffffu);
    EXPECT_EQ(c.settings.xdp_mode, XdpMode::kGeneric);
    EXPECT_TRUE(c.vips.empty());
}

TEST(ConfigParse, DecimalSeed) {
    EXPECT_EQ(parse_ok("interface: eth0\nnext_hop: {address: 192.0.2.1}\nhash_seed: 4294967295\n")
                  .settings.hash_seed,
              0xffffffffu);
}

TEST(ConfigParse, MissingFileSaysSo) {
    auto loaded = load_config_file("/nonexistent/xlbd.yaml");
    ASSERT_FALSE(loaded.has_value());
    ASSERT_EQ(loaded.error().size(), 1u);
    EXPECT_EQ(loaded.error()[0].line, 0);
    EXPECT_EQ(loaded.error()[0].to_string().rfind("/nonexistent/xlbd.yaml: cannot read", 0), 0u)
        << loaded.error()[0].to_string();
}

TEST(ConfigParse, ErrorFormat) {
    EXPECT_EQ((ConfigError{"xlbd.yaml", 12, 14, "vips[0].port: found \"http\""}).to_string(),
              "xlbd.yaml:12:14: vips[0].port: found \"http\"");
}

// --- Structure: syntax, required and unknown keys, types, enums ---------------

std::vector<ErrorCase> structure_cases() {
    return {
        E("YamlSyntax", "interface: eth0\nvips: [1, 2\nmtu: 3\n", 3, 4, {"not valid YAML"}),
        E("EmptyDocument", "", 1, 1, {"empty", "interface"}),
        E("TopLevelNotAMapping", "- eth0\n", 1, 1, {"found a list", "expected a mapping"}),
        E("MissingInterface", "next_hop: {address: 192.0.2.1}\n", 1, 1,
          {"interface: missing", "expected", "eth0"}),
        E("MissingNextHop", "interface: eth0\n", 1, 1, {"next_hop: missing", "address", "mac"}),
        E("EmptyValue", "interface:\nnext_hop: {address: 192.0.2.1}\n", 1, 1,
          {"interface: found nothing (null)", "expected a string"}),
        E("MissingVipAddress", kHead + "  - port: 80\n", 5, 5,
          {"vips[0].address: missing", "IP address"}),
        E("MissingVipPort", kHead + "  - address: 198.51.100.10\n", 5, 5,
          {"vips[0].port: missing", "0-65535", "0 = every port"}),
        E("MissingBackendAddress", kHead + kVip + "      - {weight: 5}\n", 9, 9,
          {"vips[0].backends[1].address: missing"}),
        E("MissingHealthCheckType", kHead + kVip + "    health_check: {interval: 5s}\n", 9, 19,
          {"vips[0].health_check.type: missing", "none, tcp, http, https or udp"}),
        E("UnknownKeyWithSuggestion", kHead + kVip + "    helth_check: {type: tcp}\n", 9, 5,
          {"vips[0].helth_check: unknown key", "did you mean \"health_check\""}),
        E("UnknownKeyTransposition", kHead + kVip + "    health_check: {type: tcp, intreval: 2s}\n",
          9, 31, {"unknown key", "did you mean \"interval\""}),
        E("UnknownKeyListsTheKnownOnes",
          "interface: eth0\nnext_hop: {address: 192.0.2.1}\nfrobnicate: 1\n", 3, 1,
          {"frobnicate: unknown key", "expected one of", "interface", "vips"}),
        E("DuplicateKey", "interface: eth0\nnext_hop: {address: 192.0.2.1}\ninterface: eth1\n", 3,
          1, {"interface: duplicate key", "line 1"}),
        E("PortOutOfRange", kHead + "  - address: 198.51.100.10\n    port: 65536\n", 6, 11,
          {"vips[0].port", "found \"65536\"", "0-65535"}),
        E("NegativeWeight", kHead + kVip + "      - {address: 203.0.113.12, weight: -1}\n", 9, 41,
          {"backends[1].weight", "found \"-1\"", "0-10000"}),
        E("UnknownProtocol", kHead + kVip + "    protocol: sctp\n", 9, 15,
          {"vips[0].protocol", "found \"sctp\"", "tcp or udp"}),
        E("UnknownXdpMode", "interface: eth0\nnext_hop: {address: 192.0.2.1}\nxdp_mode: driver\n",
          3, 11, {"xdp_mode", "native, generic or auto"}),
        E("UnknownHashMode", kHead + kVip + "    hash: sip\n", 9, 11, {"5tuple or source"}),
        E("UnknownEncap", "interface: eth0\nnext_hop: {address: 192.0.2.1}\nencap: vxlan\n", 3, 8,
          {"encap", "found \"vxlan\"", "ipip or gue"}),
        E("GuePortOutOfRange", "interface: eth0\nnext_hop: {address: 192.0.2.1}\ngue_port: 70000\n",
          3, 11, {"gue_port", "found \"70000\"", "a UDP port 1-65535"}),
        E("GuePortZero", "interface: eth0\nnext_hop: {address: 192.0.2.1}\ngue_port: 0\n", 3, 11,
          {"gue_port", "found 0", "a UDP port 1-65535"}),
        E("HealthHistoryAboveItsMaximum", kMinimal + "health_history: 1001\n", 3, 17,
          {"health_history", "found 1001", "expected an integer 0-1000", "0 = none"}),
        E("HealthHistoryNegative", kMinimal + "health_history: -1\n", 3, 17,
          {"health_history", "found \"-1\"", "0-1000"}),
        E("HealthHistoryNotANumber", kMinimal + "health_history: lots\n", 3, 17,
          {"health_history", "found \"lots\"", "0-1000"}),
        E("UnknownBackendState", kHead + kVip + "      - {address: 203.0.113.12, state: off}\n", 9,
          40, {"backends[1].state", "found \"off\"", "active, drain or disabled"}),
        E("UnknownUnhealthyPolicy", kHead + kVip + "    on_unhealthy: drop\n", 9, 19,
          {"reschedule or keep"}),
        E("YesIsNotABoolean", kHead + kVip + "    conntrack: yes\n", 9, 16,
          {"vips[0].conntrack", "found \"yes\"", "true or false"}),
        E("BadAddress", kHead + "  - address: 198.51.100.300\n    port: 80\n", 5, 14,
          {"vips[0].address", "198.51.100.300", "expected an IP address"}),
        E("BadMac", "interface: eth0\nnext_hop: {mac: \"02:00:00:00:01\"}\n", 2, 17,
          {"next_hop.mac", "expected a MAC address"}),
        E("SeedTooBig", "interface: eth0\nnext_hop: {address: 192.0.2.1}\nhash_seed: 0x100000000\n",
          3, 12, {"hash_seed", "32-bit", "hex"}),
        E("PanicThresholdNotANumber", kHead + kVip + "    panic_threshold: half\n", 9, 22,
          {"a number 0-1"}),
        E("VipsNotAList", "interface: eth0\nnext_hop: {address: 192.0.2.1}\nvips: {a: 1}\n", 3, 7,
          {"vips: found a mapping", "expected a list of VIPs"}),
        E("BackendNotAMapping", kHead + kVip + "      - 203.0.113.12\n", 9, 9,
          {"backends[1]: found \"203.0.113.12\"", "expected a mapping"}),
        E("KeyThatIsNotAName", "interface: eth0\nnext_hop: {address: 192.0.2.1}\n[a]: 1\n", 3, 1,
          {"found a list as a key", "expected a name"}),
        E("StatusNotAStatus",
          kHead + kVip + "    health_check: {type: http, expected_statuses: [200, ok]}\n", 9, 57,
          {"expected_statuses[1]", "found \"ok\"", "HTTP status"}),
        E("StatusesNotAList",
          kHead + kVip + "    health_check: {type: http, expected_statuses: 200}\n", 9, 51,
          {"expected_statuses", "expected a list"}),
    };
}

INSTANTIATE_TEST_SUITE_P(Structure, ConfigErrorTable, ::testing::ValuesIn(structure_cases()),
                         [](const auto& info) { return info.param.name; });

TEST(ConfigErrors, PortNotAnInteger) {
    // The example of the design: the position of the value, what was found,
    // what was expected.
    const auto errors = errors_of(kHead + "  - address: 198.51.100.10\n    port: http\n");
    ASSERT_EQ(errors.size(), 1u) << listing(errors);
    EXPECT_EQ(errors[0].to_string(),
              "test.yaml:6:11: vips[0].port: found \"http\", expected an integer 0-65535 (0 = "
              "every port)");
}

// --- Durations -----------------------------------------------------------------

std::vector<ErrorCase> durations_cases() {
    return {
        E("DurationWithoutUnit", kHead + kVip + "    health_check: {type: tcp, interval: 2}\n", 9,
          41, {"health_check.interval", "found \"2\"", "units are required"}),
        E("DurationWithUnknownUnit", kHead + kVip + "    slow_start: {window: 1d}\n", 9, 26,
          {"slow_start.window", "found \"1d\"", "ms, s, m or h"}),
    };
}

INSTANTIATE_TEST_SUITE_P(Durations, ConfigErrorTable, ::testing::ValuesIn(durations_cases()),
                         [](const auto& info) { return info.param.name; });

TEST(Durations, Parse) {
    EXPECT_EQ(parse_duration("500ms"), Duration{500});
    EXPECT_EQ(parse_duration("2s"), Duration{2000});
    EXPECT_EQ(parse_duration("1m"), Duration{60'000});
    EXPECT_EQ(parse_duration("1h"), Duration{3'600'000});
    EXPECT_EQ(parse_duration("0s"), Duration{0});
    EXPECT_EQ(parse_duration("0ms"), Duration{0});
}

TEST(Durations, Rejects) {
    for (const char* bad : {"", "2", "0", "s", "-1s", "1.5s", "2 s", "2sec", "2S", "1d", " 2s",
                            "99999999999999999999h"}) {
        EXPECT_FALSE(parse_duration(bad).has_value()) << bad;
    }
    auto bare = parse_duration("2");
    ASSERT_FALSE(bare.has_value());
    EXPECT_NE(bare.error().find("units are required"), std::string::npos) << bare.error();
}

TEST(Durations, FormatUsesTheLargestExactUnitAndRoundTrips) {
    EXPECT_EQ(format_duration(Duration{0}), "0s");
    EXPECT_EQ(format_duration(Duration{1500}), "1500ms");
    EXPECT_EQ(format_duration(Duration{90'000}), "90s");
    EXPECT_EQ(format_duration(Duration{120'000}), "2m");
    EXPECT_EQ(format_duration(Duration{7'200'000}), "2h");
    for (long ms : {0L, 1L, 999L, 1000L, 61'000L, 3'600'000L, 86'400'000L}) {
        EXPECT_EQ(parse_duration(format_duration(Duration{ms})), Duration{ms}) << ms;
    }
}

// --- Semantic rules (one case each) -------------------------------------------------

std::vector<ErrorCase> rules_cases() {
    return {
        E("DuplicateVip", kHead + kVip + "  - address: 198.51.100.10\n    port: 80\n", 9, 5,
          {"vips[1]", "198.51.100.10:80/tcp again", "also vips[0]"}),
        E("DuplicateBackendAddress", kHead + kVip + "      - {address: 203.0.113.11, weight: 5}\n",
          9, 19, {"backends[1].address", "203.0.113.11 again", "also backends[0]"}),
        E("DuplicateBackendIdentity",
          kHead + kVip + "      - {address: 203.0.113.12, hash_key: 203.0.113.11}\n", 9, 43,
          {"backends[1].hash_key", "identity \"203.0.113.11\"", "distinct hash_key"}),
        E("WeightAboveMaximum", kHead + kVip + "      - {address: 203.0.113.12, weight: 10001}\n",
          9, 41, {"backends[1].weight", "found 10001", "0-10000"}),
        E("BackendIsTheVip", kHead + kVip + "      - {address: 198.51.100.10}\n", 9, 19,
          {"backends[1].address", "VIP's own address"}),
        E("MulticastVip", kHead + "  - {address: 224.0.0.1, port: 80}\n", 5, 15,
          {"vips[0].address", "found 224.0.0.1", "unicast"}),
        E("RingSizeNotPrime", kHead + kVip + "    ring_size: 65536\n", 9, 16,
          {"vips[0].ring_size", "65536", "not prime", "65537"}),
        E("RingSizeTooLarge", kHead + kVip + "    ring_size: 5000101\n", 9, 16,
          {"ring_size", "exceeds the maximum 5000011"}),
        E("PanicThresholdOutOfRange", kHead + kVip + "    panic_threshold: 1.5\n", 9, 22,
          {"panic_threshold", "found 1.5", "0-1"}),
        E("SlowStartFloorOutOfRange", kHead + kVip + "    slow_start: {window: 10s, floor: 2}\n", 9,
          38, {"slow_start.floor", "found 2", "0-1"}),
        E("SlowStartWindowTooLong", kHead + kVip + "    slow_start: {window: 2h}\n", 9, 26,
          {"slow_start.window", "found 2h", "1h"}),
        E("TimeoutNotBelowInterval",
          kHead + kVip + "    health_check: {type: tcp, interval: 2s, timeout: 2s}\n", 9, 54,
          {"health_check.timeout", "found 2s", "not below the interval 2s",
           "must fail before the next one"}),
        // timeout defaults to 1s: the error points at the check, where it is missing.
        E("DefaultTimeoutAgainstShortInterval",
          kHead + kVip + "    health_check: {type: tcp, interval: 500ms}\n", 9, 19,
          {"health_check.timeout", "found 1s", "interval 500ms"}),
        E("ZeroTimeout", kHead + kVip + "    health_check: {type: tcp, timeout: 0s}\n", 9, 40,
          {"health_check.timeout", "found 0s", "above 0"}),
        E("IntervalTooShort",
          kHead + kVip + "    health_check: {type: tcp, interval: 5ms, timeout: 1ms}\n", 9, 41,
          {"health_check.interval", "found 5ms", "10ms to 1h"}),
        E("UnhealthyThresholdZero",
          kHead + kVip + "    health_check: {type: tcp, unhealthy_threshold: 0}\n", 9, 52,
          {"health_check.unhealthy_threshold", "found 0", ">= 1"}),
        E("HealthyThresholdZero",
          kHead + kVip + "    health_check: {type: tcp, healthy_threshold: 0}\n", 9, 50,
          {"health_check.healthy_threshold", "found 0", ">= 1"}),
        E("HealthCheckPortOutOfRange",
          kHead + kVip + "    health_check: {type: tcp, port: 70000}\n", 9, 37,
          {"health_check.port", "found \"70000\"", "0-65535"}),
        E("HttpFieldOnTcpCheck", kHead + kVip + "    health_check: {type: tcp, path: /healthz}\n",
          9, 37, {"health_check.path", "set for type tcp", "type: http"}),
        E("UdpFieldOnHttpCheck",
          kHead + kVip + "    health_check: {type: http, udp_payload: ping}\n", 9, 45,
          {"health_check.udp_payload", "set for type http", "type: udp"}),
        E("ReuseOnATcpCheck",
          kHead + kVip + "    health_check: {type: tcp, reuse_connection: false}\n", 9, 49,
          {"health_check.reuse_connection", "set for type tcp", "type: http"}),
        E("ReuseLimitZero", kHead + kVip + "    health_check: {type: http, reuse_limit: 0s}\n", 9,
          45, {"health_check.reuse_limit", "found 0s", "positive duration"}),
        E("HttpFieldWithoutACheck",
          kHead + kVip + "    health_check: {type: none, host: example.com}\n", 9, 38,
          {"health_check.host", "set for type none", "type: http"}),
        E("ProbeThroughTheVipOnAnotherPort",
          kHead + kVip + "    health_check: {type: http, port: 8080, via_vip: true}\n", 9, 38,
          {"health_check.port", "found 8080 with via_vip: true", "only port 80"}),
        E("StatusOutOfRange",
          kHead + kVip + "    health_check: {type: http, expected_statuses: [\"200-299\", 600]}\n",
          9, 63, {"expected_statuses[1]", "found 600", "100-599"}),
        E("StatusRangeBackwards",
          kHead + kVip + "    health_check: {type: http, expected_statuses: [\"299-200\"]}\n", 9,
          52, {"expected_statuses[0]", "found 299-200", "FIRST <= LAST"}),
        E("HttpPathNotAbsolute", kHead + kVip + "    health_check: {type: http, path: healthz}\n",
          9, 38, {"health_check.path", "found \"healthz\"", "e.g. /healthz"}),
        E("HttpHostWithSpace", kHead + kVip + "    health_check: {type: http, host: \"a b\"}\n", 9,
          38, {"health_check.host", "without spaces"}),
        // Failure accrual, rate-limit bias, flapping.
        E("AccrualSettingsWhileDisabled",
          kHead + kVip + "    health_check: {type: tcp, failure_accrual: {window: 20s}}\n", 9, 48,
          {"health_check.failure_accrual", "enabled is false", "enabled: true"}),
        E("AccrualWindowHoldsTooFewProbes",
          kHead + kVip + "    health_check: {type: tcp, failure_accrual: {enabled: true}}\n", 9, 48,
          {"health_check.failure_accrual.window", "found 10s", "fewer than min_probes (5)",
           "interval 10s", "(50s)"}),
        E("AccrualSuccessRateZero",
          kHead + kVip +
              "    health_check: {type: tcp, interval: 1s, timeout: 500ms, "
              "failure_accrual: {enabled: true, success_rate: 0}}\n",
          9, 108, {"failure_accrual.success_rate", "found 0", "above 0, at most 1"}),
        E("AccrualSuccessRateAboveOne",
          kHead + kVip +
              "    health_check: {type: tcp, interval: 1s, timeout: 500ms, "
              "failure_accrual: {enabled: true, success_rate: 1.5}}\n",
          9, 108, {"failure_accrual.success_rate", "found 1.5"}),
        E("AccrualMinProbesZero",
          kHead + kVip +
              "    health_check: {type: tcp, interval: 1s, timeout: 500ms, "
              "failure_accrual: {enabled: true, min_probes: 0}}\n",
          9, 106, {"failure_accrual.min_probes", "found 0", ">= 1"}),
        E("AccrualMaxPenaltyBelowMin",
          kHead + kVip +
              "    health_check: {type: tcp, interval: 1s, timeout: 500ms, failure_accrual: "
              "{enabled: true, min_penalty: 10s, max_penalty: 5s}}\n",
          9, 125, {"failure_accrual.max_penalty", "found 5s", "min_penalty (10s) to 1h"}),
        E("AccrualZeroMinPenalty",
          kHead + kVip +
              "    health_check: {type: tcp, interval: 1s, timeout: 500ms, "
              "failure_accrual: {enabled: true, min_penalty: 0s}}\n",
          9, 107, {"failure_accrual.min_penalty", "found 0s", "above 0s"}),
        E("AccrualJitterAboveOne",
          kHead + kVip +
              "    health_check: {type: tcp, interval: 1s, timeout: 500ms, "
              "failure_accrual: {enabled: true, jitter: 2}}\n",
          9, 102, {"failure_accrual.jitter", "found 2", "0-1"}),
        E("AccrualUnknownKey",
          kHead + kVip +
              "    health_check: {type: tcp, interval: 1s, timeout: 500ms, "
              "failure_accrual: {enabled: true, windw: 20s}}\n",
          9, 94, {"failure_accrual.windw", "unknown key", "did you mean \"window\""}),
        E("AccrualSuccessRateNotANumber",
          kHead + kVip + "    health_check: {type: tcp, failure_accrual: {success_rate: high}}\n",
          9, 63, {"failure_accrual.success_rate", "found \"high\"", "a number above 0"}),
        E("BiasOnTcpCheck",
          kHead + kVip + "    health_check: {type: tcp, rate_limit_bias: {factor: 0.5}}\n", 9, 48,
          {"health_check.rate_limit_bias", "set for type tcp", "type: http"}),
        E("BiasFactorZero",
          kHead + kVip + "    health_check: {type: http, rate_limit_bias: {factor: 0}}\n", 9, 58,
          {"rate_limit_bias.factor", "found 0", "1 = no bias"}),
        E("BiasCapBelowPenalty",
          kHead + kVip +
              "    health_check: {type: http, rate_limit_bias: {penalty: 10s, "
              "max_retry_after: 5s}}\n",
          9, 81, {"rate_limit_bias.max_retry_after", "found 5s", "penalty (10s) to 1h"}),
        E("BiasPenaltyTooLong",
          kHead + kVip +
              "    health_check: {type: http, rate_limit_bias: {penalty: 2h, max_retry_after: "
              "2h}}\n",
          9, 59, {"rate_limit_bias.penalty", "found 2h", "0s to 1h"}),
        E("FlappingWindowWithoutChanges",
          kHead + kVip + "    health_check: {type: tcp, flapping: {changes: 0, window: 1m}}\n", 9,
          41, {"health_check.flapping", "changes is 0 (off)"}),
        E("FlappingZeroHold",
          kHead + kVip + "    health_check: {type: tcp, flapping: {hold: 0s}}\n", 9, 48,
          {"flapping.hold", "found 0s", "above 0s"}),
        E("FlappingWindowTooLong",
          kHead + kVip + "    health_check: {type: tcp, flapping: {window: 2h}}\n", 9, 50,
          {"flapping.window", "found 2h", "at most 1h"}),
        E("PoliciesWithoutACheck",
          kHead + kVip + "    health_check: {type: none, flapping: {changes: 2}}\n", 9, 42,
          {"health_check.flapping", "set for type none", "tcp, http, https or udp"}),
        E("EncapPrefixTooLong",
          "interface: eth0\nnext_hop: {address: 192.0.2.1}\n"
          "encap_source: {ipv4: 203.0.113.0/33}\n",
          3, 22, {"encap_source.ipv4", "/33", "/1 to /32"}),
        E("EncapPrefixZero",
          "interface: eth0\nnext_hop: {address: 192.0.2.1}\n"
          "encap_source: {ipv6: \"2001:db8::/0\"}\n",
          3, 22, {"encap_source.ipv6", "/0", "/1 to /128"}),
        E("EncapPrefixNotANumber",
          "interface: eth0\nnext_hop: {address: 192.0.2.1}\n"
          "encap_source: {ipv4: 203.0.113.0/x}\n",
          3, 22, {"encap_source.ipv4", "found \"203.0.113.0/x\"", "prefix"}),
        E("EncapWrongFamily",
          "interface: eth0\nnext_hop: {address: 192.0.2.1}\n"
          "encap_source: {ipv4: \"2001:db8::1\"}\n",
          3, 22, {"encap_source.ipv4", "IPv6 address 2001:db8::1", "IPv4"}),
        E("NextHopBoth",
          "interface: eth0\nnext_hop: {address: 192.0.2.1, mac: \"02:00:00:00:00:01\"}\n", 2, 11,
          {"next_hop", "both address and mac", "exactly one"}),
        E("NextHopNeither", "interface: eth0\nnext_hop: {}\n", 2, 11,
          {"next_hop", "neither address nor mac", "exactly one"}),
        E("NextHopMulticastMac", "interface: eth0\nnext_hop: {mac: \"01:00:5e:00:00:01\"}\n", 2, 17,
          {"next_hop.mac", "01:00:5e:00:00:01", "unicast"}),
        E("MtuTooSmall", "interface: eth0\nnext_hop: {address: 192.0.2.1}\nmtu: 500\n", 3, 6,
          {"mtu: found 500", "576-9000"}),
        E("MtuTooLarge", "interface: eth0\nnext_hop: {address: 192.0.2.1}\nmtu: 9001\n", 3, 6,
          {"mtu: found 9001", "576-9000"}),
        E("MapSizeZero",
          "interface: eth0\nnext_hop: {address: 192.0.2.1}\nmaps: {conntrack_entries: 0}\n", 3, 27,
          {"maps.conntrack_entries", "found 0", "1-134217728"}),
        E("MapSizeTooLarge",
          "interface: eth0\nnext_hop: {address: 192.0.2.1}\nmaps: {max_backends: 1000000}\n", 3, 22,
          {"maps.max_backends", "found 1000000", "1-262144"}),
        E("InterfaceNameTooLong",
          "interface: a-very-long-ifname0\nnext_hop: {address: 192.0.2.1}\n", 1, 12,
          {"interface", "at most 15 characters"}),
        E("RelativeSocketPath",
          "interface: eth0\nnext_hop: {address: 192.0.2.1}\napi: {socket: xlbd.sock}\n", 3, 15,
          {"api.socket", "found \"xlbd.sock\"", "absolute path"}),
        E("ApiGroupNotAGroupName",
          "interface: eth0\nnext_hop: {address: 192.0.2.1}\napi: {group: \"lb ops\"}\n", 3, 14,
          {"api.group", "found \"lb ops\"", "group name or number", "e.g. xlb"}),
        E("MetricsListenNotAnEndpoint",
          "interface: eth0\nnext_hop: {address: 192.0.2.1}\nmetrics: {listen: localhost}\n", 3, 19,
          {"metrics.listen", "found \"localhost\"", "ADDRESS:PORT"}),
        E("BadVipName", kHead + kVip + "    name: web site\n", 9, 11,
          {"vips[0].name", "found \"web site\"", "A-Z a-z 0-9"}),
        E("DuplicateVipName",
          kHead + "  - {address: 198.51.100.1, port: 80, name: web}\n"
                  "  - {address: 198.51.100.2, port: 80, name: web}\n",
          6, 45, {"vips[1].name", "\"web\" again", "also vips[0]"}),
    };
}

INSTANTIATE_TEST_SUITE_P(Rules, ConfigErrorTable, ::testing::ValuesIn(rules_cases()),
                         [](const auto& info) { return info.param.name; });

TEST(ConfigErrors, SameAddressDifferentProtocolIsNotADuplicate) {
    parse_ok(kHead + kVip + "  - {address: 198.51.100.10, port: 80, protocol: udp}\n");
}

TEST(ConfigErrors, MoreVipsThanMaxVips) {
    const std::string yaml =
        "interface: eth0\n"
        "next_hop: {address: 192.0.2.1}\n"
        "maps: {max_vips: 2}\n"
        "vips:\n"
        "  - {address: 198.51.100.1, port: 80}\n"
        "  - {address: 198.51.100.2, port: 80}\n"
        "  - {address: 198.51.100.3, port: 80}\n";
    EXPECT_TRUE(OneError(yaml, 7, 5, {"vips[2]", "more than 2 VIPs", "maps.max_vips (2)"}));
}

TEST(ConfigErrors, MoreDistinctBackendsThanMaxBackends) {
    const std::string yaml =
        "interface: eth0\n"
        "next_hop: {address: 192.0.2.1}\n"
        "encap_source: {ipv4: 203.0.113.1}\n"
        "maps: {max_backends: 2}\n"
        "vips:\n"
        "  - address: 198.51.100.1\n"
        "    port: 80\n"
        "    backends: [{address: 203.0.113.11}, {address: 203.0.113.12}]\n"
        "  - address: 198.51.100.2\n"
        "    port: 80\n"
        // The same two again count once; the third does not fit.
        "    backends:\n"
        "      - {address: 203.0.113.12}\n"
        "      - {address: 203.0.113.11}\n"
        "      - {address: 203.0.113.13}\n";
    EXPECT_TRUE(
        OneError(yaml, 14, 19,
                 {"vips[1].backends[2].address", "more than 2 distinct", "maps.max_backends (2)"}));
}

TEST(ConfigErrors, IPv6VipWithIPv4Backend) {
    const std::string yaml = kHead +
                             "  - address: \"2001:db8::10\"\n"
                             "    port: 443\n"
                             "    backends:\n"
                             "      - {address: \"2001:db8:1::1\"}\n"
                             "      - {address: 203.0.113.11}\n";
    EXPECT_TRUE(OneError(yaml, 9, 19,
                         {"backends[1].address", "IPv4 address 203.0.113.11 in an IPv6 VIP",
                          "IPv6-in-IPv4", "not supported"}));
}

// inet_pton reads up to a NUL: the text after one must not be dropped silently.
TEST(ConfigErrors, AnAddressWithAnEscapedNulIsRejected) {
    const auto errors = errors_of(kHead + kVip + "      - {address: \"203.0.113.19\\0evil\"}\n");
    ASSERT_EQ(errors.size(), 1u) << listing(errors);
    EXPECT_EQ(errors[0].line, 9);
    EXPECT_NE(errors[0].message.find("backends[1].address"), std::string::npos)
        << errors[0].to_string();
    EXPECT_NE(errors[0].message.find(R"(found "203.0.113.19\x00evil", expected an IP address)"),
              std::string::npos)
        << errors[0].to_string();
    using namespace std::string_view_literals;
    for (std::string_view text : {"203.0.113.19\0evil"sv, "2001:db8::1\0"sv, "10.0.0.1\n"sv}) {
        auto parsed = net::IpAddress::parse(text);
        ASSERT_FALSE(parsed.has_value()) << "accepted as " << parsed->to_string();
        EXPECT_NE(parsed.error().find("control character"), std::string::npos) << parsed.error();
    }
    auto json_backend = backend_from_json(json::parse(R"({"address": "203.0.113.19\u0000evil"})"));
    ASSERT_FALSE(json_backend.has_value());
    EXPECT_NE(json_backend.error().find("address"), std::string::npos) << json_backend.error();
}

TEST(ConfigErrors, ALoopbackOrUnspecifiedBackendIsRejected) {
    EXPECT_TRUE(OneError(kHead + kVip + "      - {address: 127.0.0.1}\n", 9, 19,
                         {"backends[1].address", "loopback address 127.0.0.1"}));
    EXPECT_TRUE(OneError(kHead + kVip + "      - {address: 127.3.4.5}\n", 9, 19,
                         {"backends[1].address", "loopback address 127.3.4.5"}));
    EXPECT_TRUE(OneError(kHead + kVip + "      - {address: \"::1\"}\n", 9, 19,
                         {"backends[1].address", "loopback address ::1"}));
    EXPECT_TRUE(OneError(kHead + kVip + "      - {address: 0.0.0.0}\n", 9, 19,
                         {"backends[1].address", "expected a unicast address"}));
    EXPECT_TRUE(OneError(kHead + kVip + "      - {address: \"::\"}\n", 9, 19,
                         {"backends[1].address", "expected a unicast address"}));
}

TEST(ConfigErrors, IPv4VipWithIPv6BackendIsFine) {
    parse_ok(kHead + kVip + "      - {address: \"2001:db8:1::1\"}\n");
}

TEST(ConfigErrors, RingSizeTooSmallForItsBackends) {
    // 3 backends not disabled need 30 slots; the disabled one does not count.
    const std::string yaml = kHead + kVip +
                             "      - {address: 203.0.113.12, state: drain}\n"
                             "      - {address: 203.0.113.13, weight: 0}\n"
                             "      - {address: 203.0.113.14, state: disabled}\n"
                             "    ring_size: 29\n";
    EXPECT_TRUE(
        OneError(yaml, 12, 16, {"ring_size", "ring size 29", "3 backends", "31 is the smallest"}));
    parse_ok(kHead + kVip +
             "      - {address: 203.0.113.12, state: drain}\n"
             "      - {address: 203.0.113.13, weight: 0}\n"
             "      - {address: 203.0.113.14, state: disabled}\n"
             "    ring_size: 31\n");
}

TEST(ConfigErrors, HealthCheckPortNeededForWildcardVip) {
    const std::string yaml = kHead +
                             "  - address: 198.51.100.10\n"
                             "    port: 0\n"
                             "    health_check: {type: tcp}\n";
    EXPECT_TRUE(OneError(yaml, 7, 19, {"health_check.port", "every port", "port to probe"}));
    parse_ok(kHead +
             "  - address: 198.51.100.10\n"
             "    port: 0\n"
             "    health_check: {type: tcp, port: 22}\n");
}

TEST(ConfigErrors, ProbeThroughTheVipWithAnotherProtocol) {
    const std::string yaml = kHead +
                             "  - address: 198.51.100.53\n"
                             "    port: 53\n"
                             "    protocol: udp\n"
                             "    health_check: {type: tcp, via_vip: true}\n";
    EXPECT_TRUE(
        OneError(yaml, 8, 40, {"health_check.via_vip", "tcp check of a udp VIP", "udp check"}));
}

TEST(ConfigErrors, EncapSourceIPv4MissingForIPv4Backends) {
    const std::string yaml =
        "interface: eth0\n"
        "next_hop: {address: 192.0.2.1}\n"
        "encap_source: {ipv6: \"2001:db8:e::1\"}\n"
        "vips:\n" +
        kVip + "      - {address: 203.0.113.12}\n";
    // Reported once per VIP, at its first IPv4 backend.
    EXPECT_TRUE(OneError(
        yaml, 8, 19,
        {"backends[0].address", "IPv4 backend 203.0.113.11", "encap_source.ipv4 is not set"}));
}

TEST(ConfigErrors, EncapSourceMissingAltogether) {
    const std::string yaml = "interface: eth0\nnext_hop: {address: 192.0.2.1}\nvips:\n" + kVip;
    EXPECT_TRUE(OneError(yaml, 7, 19, {"encap_source.ipv4 is not set"}));
}

TEST(ConfigErrors, EncapSourceIPv6MissingForIPv6Backends) {
    const std::string yaml =
        "interface: eth0\n"
        "next_hop: {address: 192.0.2.1}\n"
        "encap_source: {ipv4: 203.0.113.1}\n"
        "vips:\n" +
        kVip + "      - {address: \"2001:db8:1::1\"}\n";
    EXPECT_TRUE(OneError(
        yaml, 9, 19,
        {"backends[1].address", "IPv6 backend 2001:db8:1::1", "encap_source.ipv6 is not set"}));
}

TEST(ConfigErrors, MtuTooSmallForIPv6Vip) {
    const std::string yaml =
        "interface: eth0\n"
        "next_hop: {address: 192.0.2.1}\n"
        "mtu: 1300\n"
        "vips:\n"
        "  - {address: 198.51.100.10, port: 80}\n"
        "  - {address: \"2001:db8::10\", port: 80}\n";
    EXPECT_TRUE(OneError(yaml, 6, 15, {"vips[1].address", "IPv6 VIP with mtu 1300", ">= 1320"}));
}

TEST(ConfigErrors, GueNeedsTwelveMoreBytesOfMtuForIPv6Vips) {
    const std::string head =
        "interface: eth0\n"
        "next_hop: {address: 192.0.2.1}\n"
        "encap: gue\n"
        "mtu: ";
    const std::string vips =
        "\nvips:\n"
        "  - {address: \"2001:db8::10\", port: 80}\n";
    EXPECT_TRUE(OneError(head + "1331" + vips, 6, 15,
                         {"vips[0].address", "IPv6 VIP with mtu 1331", ">= 1332", "GUE"}));
    const Config ok = parse_ok(head + "1332" + vips);
    EXPECT_EQ(ok.settings.encap, Encap::kGue);
    EXPECT_EQ(ok.settings.gue_port, 6080);
}

TEST(ConfigErrors, SecondChanceNeedsGueAndAWindow) {
    const std::string head = "interface: eth0\nnext_hop: {address: 192.0.2.1}\n";
    EXPECT_TRUE(OneError(head + "second_chance: {enabled: true}\n", 3, 26,
                         {"second_chance.enabled", "encap: ipip", "expected encap: gue"}));
    EXPECT_TRUE(OneError(head + "encap: gue\nsecond_chance: {enabled: true, window: 0s}\n", 4, 40,
                         {"second_chance.window", "found 0", "positive duration"}));
    EXPECT_TRUE(OneError(head + "second_chance: {enabled: yes please}\n", 3, 26,
                         {"second_chance.enabled"}));
    EXPECT_TRUE(OneError(head + "second_chance: {on: true}\n", 3, 17, {"unknown key", "on"}));
    // off, the window and encap do not matter
    const Config off = parse_ok(head + "second_chance: {enabled: false, window: 0s}\n");
    EXPECT_FALSE(off.settings.second_chance.enabled);
}

TEST(ConfigErrors, SecondChanceNeedsTwentyMoreBytesOfMtuForIPv6Vips) {
    const std::string head =
        "interface: eth0\nnext_hop: {address: 192.0.2.1}\nencap: gue\n"
        "second_chance: {enabled: true, window: 30m}\nmtu: ";
    const std::string vips = "\nvips:\n  - {address: \"2001:db8::10\", port: 80}\n";
    EXPECT_TRUE(OneError(head + "1351" + vips, 7, 15,
                         {"vips[0].address", "mtu 1351", ">= 1352", "second-chance hint"}));
    const Config ok = parse_ok(head + "1352" + vips);
    EXPECT_TRUE(ok.settings.second_chance.enabled);
    EXPECT_EQ(ok.settings.second_chance.window, std::chrono::minutes(30));
}

TEST(ConfigParse, GueWithItsPort) {
    const Config c = parse_ok(
        "interface: eth0\nnext_hop: {address: 192.0.2.1}\nencap: gue\n"
        "gue_port: 5555\n");
    EXPECT_EQ(c.settings.encap, Encap::kGue);
    EXPECT_EQ(c.settings.gue_port, 5555);
    const Config ipip = parse_ok("interface: eth0\nnext_hop: {address: 192.0.2.1}\nencap: ipip\n");
    EXPECT_EQ(ipip.settings.encap, Encap::kIpip);
}

TEST(ConfigParse, HealthHistoryFromNoneToItsMaximum) {
    EXPECT_EQ(parse_ok(kMinimal + "health_history: 0\n").settings.health_history, 0u);
    const Config most = parse_ok(kMinimal + "health_history: 1000\n");
    EXPECT_EQ(most.settings.health_history, kMaxHealthHistory);
    const std::string written = to_yaml(most);
    auto reread = parse_config(written, "written.yaml");
    ASSERT_TRUE(reread.has_value()) << listing(reread.error()) << "\n" << written;
    EXPECT_EQ(reread->settings.health_history, 1000u) << written;
    EXPECT_EQ(settings_to_json(most.settings)["health_history"], 1000);
}

// --- Collecting errors ------------------------------------------------------------

TEST(ConfigErrors, AllErrorsInFileOrder) {
    const std::string yaml =
        "interface: eth0\n"
        "next_hop: {address: 192.0.2.1, mac: \"02:00:00:00:00:01\"}\n"
        "mtu: 100\n"
        "vips:\n"
        "  - address: 198.51.100.10\n"
        "    port: http\n"
        "    ring_size: 100\n"
        "    backends:\n"
        "      - {address: 203.0.113.11, weight: 20000}\n";
    const auto errors = errors_of(yaml);
    ASSERT_EQ(errors.size(), 6u) << listing(errors);
    EXPECT_EQ(errors[0].line, 2);  // next_hop both
    EXPECT_EQ(errors[1].line, 3);  // mtu
    EXPECT_EQ(errors[2].line, 6);  // port
    EXPECT_EQ(errors[3].line, 7);  // ring size
    EXPECT_EQ(errors[4].line, 9);  // encap_source.ipv4 missing
    EXPECT_EQ(errors[4].column, 19);
    EXPECT_EQ(errors[5].line, 9);  // weight
    EXPECT_EQ(errors[5].column, 41);
}

TEST(ConfigErrors, AnUnreadableValueIsReportedOnce) {
    // The address cannot be read; its consequences (not unicast, duplicate
    // of vips[1] by default value, missing encap source) are not reported.
    const std::string yaml =
        "interface: eth0\n"
        "next_hop: {address: 192.0.2.1}\n"
        "vips:\n"
        "  - {address: nope, port: 80, backends: [{address: bad}]}\n"
        "  - {address: nope, port: 80}\n";
    const auto errors = errors_of(yaml);
    ASSERT_EQ(errors.size(), 3u) << listing(errors);
    for (const auto& e : errors) {
        EXPECT_NE(e.message.find("expected an IP address"), std::string::npos) << e.to_string();
    }
}

std::vector<ErrorCase> collecting_cases() {
    return {
        E("AnUnreadableVipPortHidesTheHealthPortRule",
          kHead + "  - address: 198.51.100.10\n    port: x\n"
                  "    health_check: {type: tcp}\n",
          6, 11, {"vips[0].port"}),
    };
}

INSTANTIATE_TEST_SUITE_P(Collecting, ConfigErrorTable, ::testing::ValuesIn(collecting_cases()),
                         [](const auto& info) { return info.param.name; });

TEST(ConfigErrors, StatusIndicesFollowTheFile) {
    const auto errors =
        errors_of(kHead + kVip + "    health_check: {type: http, expected_statuses: [ok, 700]}\n");
    ASSERT_EQ(errors.size(), 2u) << listing(errors);
    EXPECT_NE(errors[0].message.find("expected_statuses[0]: found \"ok\""), std::string::npos);
    EXPECT_NE(errors[1].message.find("expected_statuses[1]: found 700"), std::string::npos);
    EXPECT_EQ(errors[1].column, 56);
}

// --- Semantic checks without a file (the API's view) -------------------------------

TEST(Validate, VipAgainstSettings) {
    Settings settings;
    settings.encap_source.ipv4 = net::IpAddress::v4(203, 0, 113, 1);
    VipSpec vip;
    vip.address = net::IpAddress::v4(198, 51, 100, 10);
    vip.port = 80;
    vip.backends.push_back(BackendSpec{net::IpAddress::v4(203, 0, 113, 11)});
    EXPECT_TRUE(validate_vip(vip, settings).empty());

    vip.backends.push_back(BackendSpec{net::IpAddress::v4(203, 0, 113, 11), 20000});
    vip.health_check.type = HealthCheckType::kTcp;
    vip.health_check.timeout = vip.health_check.interval;
    const auto messages = validate_vip(vip, settings);
    ASSERT_EQ(messages.size(), 3u);
    EXPECT_EQ(messages[0].rfind("health_check.timeout: found 10s, not below", 0), 0u)
        << messages[0];
    EXPECT_EQ(messages[1].rfind("backends[1].address: found 203.0.113.11 again", 0), 0u)
        << messages[1];
    EXPECT_EQ(messages[2], "backends[1].weight: found 20000, expected 0-10000");
}

TEST(Validate, WholeConfigPathsIncludeTheVipIndex) {
    Config config;
    config.settings.interface = "eth0";
    config.settings.next_hop.address = net::IpAddress::v4(192, 0, 2, 1);
    VipSpec vip;
    vip.address = net::IpAddress::v4(198, 51, 100, 10);
    vip.port = 80;
    config.vips = {vip, vip};
    const auto issues = check_config(config);
    ASSERT_EQ(issues.size(), 1u);
    EXPECT_EQ(issues[0].path, "vips[1]");
    EXPECT_NE(issues[0].message.find("198.51.100.10:80/tcp again"), std::string::npos);
}

TEST(Validate, DefaultSettingsLackOnlyTheRequiredValues) {
    const auto issues = check_config(Config{});
    ASSERT_EQ(issues.size(), 2u);
    EXPECT_EQ(issues[0].path, "interface");
    EXPECT_EQ(issues[1].path, "next_hop");
}

// --- The model: keys, names, lookups ---------------------------------------------

TEST(Model, VipKeys) {
    VipSpec v;
    v.address = net::IpAddress::v4(198, 51, 100, 10);
    v.port = 80;
    EXPECT_EQ(v.key(), "198.51.100.10:80/tcp");
    v.port = 0;
    v.protocol = Protocol::kUdp;
    EXPECT_EQ(v.key(), "198.51.100.10:0/udp");
    v.address = *net::IpAddress::parse("2001:db8::10");
    v.port = 443;
    v.protocol = Protocol::kTcp;
    EXPECT_EQ(v.key(), "[2001:db8::10]:443/tcp");
}

TEST(Model, ParseVipKey) {
    auto k = parse_vip_key("10.0.0.10:80/tcp");
    ASSERT_TRUE(k.has_value()) << k.error();
    EXPECT_EQ(k->address, net::IpAddress::v4(10, 0, 0, 10));
    EXPECT_EQ(k->port, 80);
    EXPECT_EQ(k->protocol, Protocol::kTcp);

    k = parse_vip_key("[2001:db8::1]:443/udp");
    ASSERT_TRUE(k.has_value()) << k.error();
    EXPECT_EQ(k->address, *net::IpAddress::parse("2001:db8::1"));
    EXPECT_EQ(k->port, 443);
    EXPECT_EQ(k->protocol, Protocol::kUdp);

    k = parse_vip_key("10.0.0.10:80");
    ASSERT_TRUE(k.has_value()) << k.error();
    EXPECT_EQ(k->protocol, Protocol::kTcp);
    EXPECT_EQ(k->to_string(), "10.0.0.10:80/tcp");

    // Non-canonical input comes out canonical, so that find_vip() matches.
    k = parse_vip_key("[2001:DB8:0::1]:0/udp");
    ASSERT_TRUE(k.has_value()) << k.error();
    EXPECT_EQ(k->to_string(), "[2001:db8::1]:0/udp");
}

TEST(Model, ParseVipKeyErrors) {
    for (const char* bad :
         {"", "10.0.0.10", "10.0.0.10:80/sctp", "10.0.0.10:/tcp", "10.0.0.10:65536",
          "2001:db8::1:80/tcp", "[2001:db8::1]/tcp", "10.0.0.10:80/", "host:80/tcp"}) {
        auto k = parse_vip_key(bad);
        EXPECT_FALSE(k.has_value()) << bad;
        if (!k) {
            EXPECT_NE(k.error().find("expected"), std::string::npos) << k.error();
        }
    }
    auto k = parse_vip_key("10.0.0.10:80/sctp");
    ASSERT_FALSE(k.has_value());
    EXPECT_NE(k.error().find("'sctp' is neither tcp nor udp"), std::string::npos) << k.error();
}

TEST(Model, VipKeyRoundTrip) {
    for (const char* text : {"198.51.100.10:80/tcp", "[2001:db8::10]:443/udp", "192.0.2.1:0/tcp"}) {
        auto k = parse_vip_key(text);
        ASSERT_TRUE(k.has_value()) << k.error();
        EXPECT_EQ(k->to_string(), text);
    }
}

TEST(Model, EnumNamesRoundTrip) {
    for (auto v : {XdpMode::kNative, XdpMode::kGeneric, XdpMode::kAuto})
        EXPECT_EQ(parse_xdp_mode(to_string(v)), v);
    for (auto v : {Protocol::kTcp, Protocol::kUdp}) EXPECT_EQ(parse_protocol(to_string(v)), v);
    for (auto v : {HashMode::kFiveTuple, HashMode::kSourceIp})
        EXPECT_EQ(parse_hash_mode(to_string(v)), v);
    for (auto v : {AdminState::kActive, AdminState::kDrain, AdminState::kDisabled})
        EXPECT_EQ(parse_admin_state(to_string(v)), v);
    for (auto v : {HealthCheckType::kNone, HealthCheckType::kTcp, HealthCheckType::kHttp,
                   HealthCheckType::kUdp, HealthCheckType::kHttps})
        EXPECT_EQ(parse_health_check_type(to_string(v)), v);
    EXPECT_STREQ(to_string(HealthCheckType::kHttps), "https");
    for (auto v : {UnhealthyPolicy::kReschedule, UnhealthyPolicy::kKeep})
        EXPECT_EQ(parse_unhealthy_policy(to_string(v)), v);
    EXPECT_STREQ(to_string(HashMode::kFiveTuple), "5tuple");
    EXPECT_STREQ(to_string(HashMode::kSourceIp), "source");
    EXPECT_FALSE(parse_protocol("TCP"));
    EXPECT_FALSE(parse_admin_state(""));
}

TEST(Model, Lookups) {
    Config c;
    VipSpec v;
    v.address = net::IpAddress::v4(198, 51, 100, 10);
    v.port = 80;
    v.backends.push_back(BackendSpec{net::IpAddress::v4(203, 0, 113, 11), 7});
    c.vips.push_back(v);
    ASSERT_NE(c.find_vip("198.51.100.10:80/tcp"), nullptr);
    EXPECT_EQ(c.find_vip("198.51.100.10:80/udp"), nullptr);
    VipSpec* mutable_vip = c.find_vip("198.51.100.10:80/tcp");
    BackendSpec* b = mutable_vip->find_backend(net::IpAddress::v4(203, 0, 113, 11));
    ASSERT_NE(b, nullptr);
    b->weight = 9;
    EXPECT_EQ(std::as_const(c).vips[0].find_backend(net::IpAddress::v4(203, 0, 113, 11))->weight,
              9u);
    EXPECT_EQ(v.find_backend(net::IpAddress::v4(203, 0, 113, 12)), nullptr);
}

// --- JSON --------------------------------------------------------------------------

VipSpec full_vip() {
    VipSpec v;
    v.address = *net::IpAddress::parse("2001:db8::10");
    v.port = 443;
    v.protocol = Protocol::kUdp;
    v.name = "quic";
    v.hash = HashMode::kSourceIp;
    v.conntrack = false;
    v.ring_size = 4099;
    v.panic_threshold = 0.3;
    v.slow_start = SlowStart{Duration{1500}, 0.25};
    v.on_unhealthy = UnhealthyPolicy::kKeep;
    v.health_check.type = HealthCheckType::kHttp;
    v.health_check.port = 8443;
    v.health_check.path = "/ready";
    v.health_check.host = "example.com";
    v.health_check.expected_statuses = {{200, 204}, {301, 301}};
    v.health_check.body_contains = "OK";
    v.health_check.interval = Duration{2000};
    v.health_check.timeout = Duration{750};
    v.health_check.jitter = Duration{0};
    v.health_check.unhealthy_threshold = 3;
    v.health_check.healthy_threshold = 5;
    v.health_check.via_vip = true;
    v.health_check.failure_accrual =
        FailureAccrual{true, 0.9, Duration{20'000}, 4, Duration{500}, Duration{30'000}, 0.25};
    v.health_check.rate_limit_bias = RateLimitBias{0.2, Duration{2'000}, Duration{60'000}};
    v.health_check.flapping = Flapping{3, Duration{120'000}, Duration{600'000}};
    v.backends = {
        BackendSpec{*net::IpAddress::parse("2001:db8:1::1"), 100, AdminState::kActive, "a"},
        BackendSpec{*net::IpAddress::parse("2001:db8:1::2"), 0, AdminState::kDrain, ""},
        BackendSpec{*net::IpAddress::parse("2001:db8:1::3"), 10000, AdminState::kDisabled, "c"}};
    return v;
}

TEST(Json, VipRoundTrip) {
    const VipSpec v = full_vip();
    const json j = v;
    EXPECT_EQ(j["address"], "2001:db8::10");
    EXPECT_EQ(j["protocol"], "udp");
    EXPECT_EQ(j["hash"], "source");
    EXPECT_EQ(j["slow_start"]["window"], "1500ms");
    EXPECT_EQ(j["health_check"]["interval"], "2s");
    EXPECT_EQ(j["health_check"]["expected_statuses"], json::parse(R"(["200-204", 301])"));
    EXPECT_EQ(j["backends"][1]["state"], "drain");
    auto back = vip_from_json(j);
    ASSERT_TRUE(back.has_value()) << back.error();
    EXPECT_EQ(*back, v);
    // And through text, as the API and the state file carry it.
    auto reparsed = vip_from_json(json::parse(j.dump()));
    ASSERT_TRUE(reparsed.has_value()) << reparsed.error();
    EXPECT_EQ(*reparsed, v);
}

TEST(Json, ExampleVipsRoundTrip) {
    auto loaded = load_config_file(example_path());
    ASSERT_TRUE(loaded.has_value()) << listing(loaded.error());
    const json j = vips_to_json(loaded->vips);
    auto back = vips_from_json(json::parse(j.dump(2)));
    ASSERT_TRUE(back.has_value()) << back.error();
    EXPECT_EQ(*back, loaded->vips);
}

TEST(Json, MissingFieldsTakeDefaults) {
    auto v = vip_from_json(json::parse(R"({"address": "198.51.100.10", "port": 80})"));
    ASSERT_TRUE(v.has_value()) << v.error();
    EXPECT_EQ(v->ring_size, 65537u);
    EXPECT_EQ(v->health_check, HealthCheck{});
    auto b = backend_from_json(json::parse(R"({"address": "203.0.113.11"})"));
    ASSERT_TRUE(b.has_value()) << b.error();
    EXPECT_EQ(b->weight, kDefaultWeight);
    EXPECT_EQ(b->state, AdminState::kActive);
}

TEST(Json, UnknownFieldIsNamed) {
    auto v =
        vip_from_json(json::parse(R"({"address": "198.51.100.10", "port": 80, "prot": "tcp"})"));
    ASSERT_FALSE(v.has_value());
    EXPECT_EQ(v.error(), "prot: unknown key; did you mean \"port\"?");
}

TEST(Json, WrongTypesAreNamed) {
    // JSON is typed: a string is not a port, a number is not a duration.
    auto v = vip_from_json(json::parse(
        R"({"address": "198.51.100.10", "port": "80", "conntrack": "true",
            "health_check": {"type": "tcp", "interval": 2},
            "backends": [{"address": "203.0.113.11"},
                         {"address": "203.0.113.12", "weight": 1.5}]})"));
    ASSERT_FALSE(v.has_value());
    const std::string& e = v.error();
    EXPECT_NE(e.find("port: found \"80\", expected an integer 0-65535"), std::string::npos) << e;
    EXPECT_NE(e.find("conntrack: found \"true\", expected true or false"), std::string::npos) << e;
    EXPECT_NE(e.find("health_check.interval: found 2, expected a duration"), std::string::npos)
        << e;
    EXPECT_NE(e.find("units are required"), std::string::npos) << e;
    EXPECT_NE(e.find("backends[1].weight: found 1.5, expected an integer 0-10000"),
              std::string::npos)
        << e;
}

TEST(Json, MissingRequiredFields) {
    auto v = vip_from_json(json::parse(R"({"name": "web"})"));
    ASSERT_FALSE(v.has_value());
    EXPECT_NE(v.error().find("address: missing"), std::string::npos) << v.error();
    EXPECT_NE(v.error().find("port: missing"), std::string::npos) << v.error();
}

TEST(Json, NotAnObject) {
    auto b = backend_from_json(json::parse(R"(["203.0.113.11"])"));
    ASSERT_FALSE(b.has_value());
    EXPECT_EQ(b.error().rfind("found a list, expected an object", 0), 0u) << b.error();
}

TEST(Json, BackendErrors) {
    auto b = backend_from_json(json::parse(R"({"address": "203.0.113.300", "state": "gone"})"));
    ASSERT_FALSE(b.has_value());
    EXPECT_NE(b.error().find("address: found \"203.0.113.300\", expected an IP address"),
              std::string::npos)
        << b.error();
    EXPECT_NE(b.error().find("state: found \"gone\", expected active, drain or disabled"),
              std::string::npos)
        << b.error();
}

TEST(Json, HealthCheckAndSlowStart) {
    HealthCheck h;
    h.type = HealthCheckType::kUdp;
    h.udp_payload = "ping";
    h.udp_expect = "pong";
    auto back = health_check_from_json(json(h));
    ASSERT_TRUE(back.has_value()) << back.error();
    EXPECT_EQ(*back, h);
    auto bad = health_check_from_json(json::parse(R"({"type": "icmp"})"));
    ASSERT_FALSE(bad.has_value());
    EXPECT_NE(bad.error().find("type: found \"icmp\""), std::string::npos) << bad.error();

    SlowStart s{Duration{60'000}, 0.5};
    auto ss = slow_start_from_json(json(s));
    ASSERT_TRUE(ss.has_value()) << ss.error();
    EXPECT_EQ(*ss, s);
    EXPECT_EQ(json(s)["window"], "1m");
    auto bad_ss = slow_start_from_json(json::parse(R"({"window": "30", "floor": "x"})"));
    ASSERT_FALSE(bad_ss.has_value());
    EXPECT_NE(bad_ss.error().find("window: found \"30\""), std::string::npos) << bad_ss.error();
    EXPECT_NE(bad_ss.error().find("floor: found \"x\", expected a number 0-1"), std::string::npos)
        << bad_ss.error();
}

TEST(Json, StateFileListPathsCarryTheIndex) {
    auto vips = vips_from_json(json::parse(
        R"([{"address": "198.51.100.10", "port": 80},
            {"address": "198.51.100.11", "port": 80, "backends": [{"adress": "203.0.113.1"}]}])"));
    ASSERT_FALSE(vips.has_value());
    EXPECT_NE(vips.error().find("[1].backends[0].adress: unknown key; did you mean \"address\"?"),
              std::string::npos)
        << vips.error();
    EXPECT_NE(vips.error().find("[1].backends[0].address: missing"), std::string::npos)
        << vips.error();
    auto not_list = vips_from_json(json::object());
    ASSERT_FALSE(not_list.has_value());
    EXPECT_EQ(not_list.error(), "found an object, expected a list of VIPs");
}

TEST(Json, SettingsForStatus) {
    auto loaded = load_config_file(example_path());
    ASSERT_TRUE(loaded.has_value());
    loaded->settings.hash_seed = 0x5eed1234;
    const json j = settings_to_json(loaded->settings);
    EXPECT_EQ(j["interface"], "eth0");
    EXPECT_EQ(j["hash_seed"], "0x5eed1234");
    EXPECT_EQ(j["encap_source"]["ipv4"], "203.0.113.0/24");
    EXPECT_EQ(j["next_hop"]["address"], "192.0.2.1");
    EXPECT_FALSE(j["next_hop"].contains("mac"));
    EXPECT_EQ(j["maps"]["max_vips"], 512);
}

// --- Edge cases beside the table ----------------------------------------------

TEST(ConfigParse, SocketPathOf107BytesFits) {
    EXPECT_EQ(kMaxSocketPathBytes, 107u) << "sun_path holds 108 bytes with the NUL on Linux";
    const std::string path = "/" + std::string(106, 's');
    const Config c = parse_ok(kMinimal + "api: {socket: " + path + "}\n");
    EXPECT_EQ(c.settings.api_socket, path);
}

TEST(ConfigParse, LeadingDocumentMarkerAndEndMarkerAreOneDocument) {
    EXPECT_EQ(parse_ok("---\n" + kMinimal).settings.interface, "eth0");
    EXPECT_EQ(parse_ok("---\n" + kMinimal + "...\n").settings.interface, "eth0");
    EXPECT_EQ(parse_ok(kMinimal + "# the end\n").settings.interface, "eth0");
}

TEST(ConfigErrors, ErrorsOfTheFirstDocumentAndTheSecondDocumentInFileOrder) {
    const auto errors = errors_of(
        "interface: eth0\nnext_hop: {address: 192.0.2.1}\nmtu: big\n"
        "---\ninterface: eth1\n");
    ASSERT_EQ(errors.size(), 2u) << listing(errors);
    EXPECT_EQ(errors[0].line, 3);
    EXPECT_NE(errors[0].message.find("mtu: found \"big\""), std::string::npos) << listing(errors);
    EXPECT_EQ(errors[1].line, 4);
    EXPECT_EQ(errors[1].column, 1);
    EXPECT_NE(errors[1].message.find("second YAML document"), std::string::npos) << listing(errors);
}

TEST(ConfigErrors, ManyNulBytesGiveOneError) {
    // A UTF-16 file: a NUL after every ASCII character.
    std::string utf16 = "\xff\xfe";
    for (char c : kMinimal) utf16 += std::string{c, '\0'};
    const auto errors = errors_of(utf16);
    ASSERT_EQ(errors.size(), 1u) << listing(errors);
    EXPECT_EQ(errors[0].to_string(),
              "test.yaml:1:4: found a NUL byte, expected UTF-8 text (a UTF-16 or binary file has "
              "them; save the configuration as UTF-8)");
}

TEST(ShownValue, ShortValuesWhole) {
    EXPECT_EQ(shown_value("http"), "\"http\"");
    EXPECT_EQ(shown_value(""), "\"\"");
    EXPECT_EQ(shown_value("a\"b\\c\n\t\x01"), R"("a\"b\\c\n\t\x01")");
    EXPECT_EQ(shown_value("it's", '\''), R"('it\'s')");
    const std::string exactly(kShownValueBytes, 'a');
    EXPECT_EQ(shown_value(exactly), "\"" + exactly + "\"");
}

TEST(ShownValue, LongValuesCutWithTheirSize) {
    const std::string shown = shown_value(std::string(k10MB, 'a'));
    EXPECT_EQ(shown, "\"" + std::string(kShownValueBytes, 'a') + "\"\u2026 (10485760 bytes)");
    EXPECT_EQ(shown_value(std::string(kShownValueBytes + 1, 'b')),
              "\"" + std::string(kShownValueBytes, 'b') + "\"\u2026 (49 bytes)");
    // Escapes count as what they show: a value of control characters is cut too.
    const std::string nuls = shown_value(std::string(1000, '\0'));
    EXPECT_LE(nuls.size(), kShownValueBytes + 30) << nuls;
    EXPECT_NE(nuls.find("\\x00\"\u2026 (1000 bytes)"), std::string::npos) << nuls;
}

TEST(ShownValue, NeverCutsInsideAUtf8Character) {
    // "é" is 2 bytes, "€" 3: whatever the limit, the cut falls between characters.
    for (const std::string ch : {"\u00e9", "\u20ac", "\U0001F600"}) {
        std::string text;
        for (int i = 0; i < 100; ++i) text += ch;
        const std::string shown = shown_value(text);
        const std::size_t inside = shown.find('"', 1) - 1;
        EXPECT_EQ(inside % ch.size(), 0u) << shown;
        EXPECT_LE(inside, kShownValueBytes) << shown;
        EXPECT_GT(inside + ch.size(), kShownValueBytes) << shown;
        EXPECT_TRUE(json::accept(json(shown).dump())) << "valid UTF-8 for a JSON reply";
    }
}

TEST(Json, MegabyteHashKeyGivesAShortError) {
    // What the API does with a VIP it is sent: decode, then check_vip().
    json body = {
        {"address", "198.51.100.10"},
        {"port", 80},
        {"backends", {{{"address", "203.0.113.11"}, {"hash_key", std::string(k1MiB, 'k')}}}}};
    auto vip = vip_from_json(body);
    ASSERT_TRUE(vip.has_value()) << vip.error().substr(0, 400);
    Settings settings;
    settings.encap_source.ipv4 = net::IpAddress::v4(203, 0, 113, 1);
    const auto issues = validate_vip(*vip, settings);
    ASSERT_EQ(issues.size(), 1u);
    EXPECT_LT(issues[0].size(), 200u) << issues[0].substr(0, 400);
    EXPECT_EQ(issues[0].rfind("backends[0].hash_key: found \"kkk", 0), 0u)
        << issues[0].substr(0, 400);
    EXPECT_NE(issues[0].find("(1048576 bytes), expected at most 255"), std::string::npos)
        << issues[0].substr(0, 400);
}

TEST(Json, MegabyteValuesAndKeysGiveShortDecodeErrors) {
    auto state =
        backend_from_json(json{{"address", "203.0.113.11"}, {"state", std::string(k1MiB, 'd')}});
    ASSERT_FALSE(state.has_value());
    EXPECT_LT(state.error().size(), 200u) << state.error().substr(0, 400);
    EXPECT_EQ(state.error().rfind("state: found \"ddd", 0), 0u) << state.error().substr(0, 400);
    EXPECT_NE(state.error().find("(1048576 bytes), expected active, drain or disabled"),
              std::string::npos)
        << state.error().substr(0, 400);

    auto key = backend_from_json(json{{"address", "203.0.113.11"}, {std::string(k1MiB, 'x'), 1}});
    ASSERT_FALSE(key.has_value());
    EXPECT_LT(key.error().size(), 200u) << key.error().substr(0, 400);
    EXPECT_NE(key.error().find("(1048576 bytes): unknown key"), std::string::npos)
        << key.error().substr(0, 400);
}

TEST(Model, MegabyteVipKeyAndDurationGiveShortErrors) {
    auto key = parse_vip_key(std::string(k1MiB, '1') + ":80/tcp");
    ASSERT_FALSE(key.has_value());
    EXPECT_LT(key.error().size(), 250u) << key.error().substr(0, 400);
    EXPECT_NE(key.error().find("(1048583 bytes) is not a VIP"), std::string::npos)
        << key.error().substr(0, 400);
    auto protocol = parse_vip_key("198.51.100.10:80/" + std::string(k1MiB, 'p'));
    ASSERT_FALSE(protocol.has_value());
    EXPECT_LT(protocol.error().size(), 300u) << protocol.error().substr(0, 400);
    auto duration = parse_duration("1" + std::string(k1MiB, 'u'));
    ASSERT_FALSE(duration.has_value());
    EXPECT_LT(duration.error().size(), 250u) << duration.error().substr(0, 400);
    EXPECT_NE(duration.error().find("unknown unit 'uuu"), std::string::npos)
        << duration.error().substr(0, 400);
}

// --- The connection table (conntrack section, conntrack_idle_timeout) -------

const std::string kSettingsOnly = "interface: eth0\nnext_hop: {address: 192.0.2.1}\n";  // 1-2

TEST(ConntrackConfig, DefaultsAreTheDocumentedOnes) {
    const Config c = parse_ok(kHead + kVip);
    const ConntrackSettings& ct = c.settings.conntrack;
    EXPECT_EQ(ct.insert_rate, 0u);
    EXPECT_EQ(ct.insert_burst, 0u);
    EXPECT_EQ(ct.resize, ConntrackResize::kRefuse);
    EXPECT_EQ(ct.sweep_interval, std::chrono::seconds(10));
    EXPECT_FALSE(c.vips[0].conntrack_idle_timeout);
    EXPECT_EQ(idle_timeout(c.vips[0]), std::chrono::hours(1));
    VipSpec udp = c.vips[0];
    udp.protocol = Protocol::kUdp;
    EXPECT_EQ(idle_timeout(udp), std::chrono::seconds(30));
    udp.conntrack_idle_timeout = std::chrono::minutes(2);
    EXPECT_EQ(idle_timeout(udp), std::chrono::minutes(2));
}

TEST(ConntrackConfig, ReadAndWrittenBack) {
    const Config c = parse_ok(kSettingsOnly +
                              "conntrack:\n"
                              "  insert_rate: 5000\n"
                              "  insert_burst: 20000\n"
                              "  resize: replace\n"
                              "  sweep_interval: 30s\n"
                              "encap_source: {ipv4: 203.0.113.1}\n"
                              "vips:\n" +
                              kVip + "    conntrack_idle_timeout: 10m\n");
    const ConntrackSettings want{5000, 20000, ConntrackResize::kReplace, std::chrono::seconds(30)};
    EXPECT_EQ(c.settings.conntrack, want);
    ASSERT_TRUE(c.vips[0].conntrack_idle_timeout);
    EXPECT_EQ(*c.vips[0].conntrack_idle_timeout, std::chrono::minutes(10));
    const std::string written = to_yaml(c);
    auto reread = parse_config(written, "written.yaml");
    ASSERT_TRUE(reread.has_value()) << listing(reread.error()) << "\n" << written;
    EXPECT_EQ(*reread, c) << written;
    const json settings = settings_to_json(c.settings);
    EXPECT_EQ(settings["conntrack"],
              json::parse(R"({"insert_rate": 5000, "insert_burst": 20000, "resize": "replace",
                              "sweep_interval": "30s"})"));
    const json vip = c.vips[0];
    EXPECT_EQ(vip["conntrack_idle_timeout"], "10m");
    auto back = vip_from_json(vip);
    ASSERT_TRUE(back.has_value()) << back.error();
    EXPECT_EQ(*back, c.vips[0]);
}

TEST(ConntrackConfig, IdleTimeoutWrittenOnlyWhenSet) {
    // So the config digest of a state file written before the field existed
    // does not change (a changed digest drops the API's runtime changes).
    const Config c = parse_ok(kHead + kVip);
    const json vip = c.vips[0];
    EXPECT_FALSE(vip.contains("conntrack_idle_timeout")) << vip.dump();
    EXPECT_EQ(to_yaml(c).find("conntrack_idle_timeout"), std::string::npos);
}

TEST(ConntrackConfig, JsonErrorsNameTheField) {
    auto v = vip_from_json(
        json::parse(R"({"address": "198.51.100.10", "port": 80, "conntrack_idle_timeout": 60})"));
    ASSERT_FALSE(v.has_value());
    EXPECT_NE(v.error().find("conntrack_idle_timeout: found 60"), std::string::npos) << v.error();
    auto semantic = vip_from_json(json::parse(
        R"({"address": "198.51.100.10", "port": 80, "conntrack_idle_timeout": "500ms"})"));
    ASSERT_TRUE(semantic.has_value()) << semantic.error();
    const auto issues = validate_vip(*semantic, Settings{});
    ASSERT_EQ(issues.size(), 1u);
    EXPECT_NE(issues[0].find("conntrack_idle_timeout: found 500ms, expected at least 1s"),
              std::string::npos)
        << issues[0];
}

std::vector<ErrorCase> conntrack_cases() {
    return {
        E("ConntrackUnknownKey", kSettingsOnly + "conntrack: {insert_rates: 5}\n", 3, 13,
          {"conntrack.insert_rates: unknown key", "did you mean \"insert_rate\""}),
        E("ConntrackNotAMapping", kSettingsOnly + "conntrack: on\n", 3, 12,
          {"conntrack: found \"on\"", "expected a mapping", "insert_rate"}),
        E("ConntrackNegativeRate", kSettingsOnly + "conntrack: {insert_rate: -1}\n", 3, 26,
          {"conntrack.insert_rate", "found \"-1\"", "entries per second per CPU"}),
        E("ConntrackBurstTooBig", kSettingsOnly + "conntrack: {insert_burst: 4294967296}\n", 3, 27,
          {"conntrack.insert_burst", "found \"4294967296\""}),
        E("ConntrackUnknownResize", kSettingsOnly + "conntrack: {resize: always}\n", 3, 21,
          {"conntrack.resize", "found \"always\"", "refuse or replace"}),
        E("SweepWithoutUnit", kSettingsOnly + "conntrack: {sweep_interval: 10}\n", 3, 29,
          {"conntrack.sweep_interval", "units are required"}),
        E("SweepTooShort", kSettingsOnly + "conntrack: {sweep_interval: 500ms}\n", 3, 29,
          {"conntrack.sweep_interval: found 500ms", "expected 1s to 1h"}),
        E("SweepTooLong", kSettingsOnly + "conntrack:\n  sweep_interval: 2h\n", 4, 19,
          {"conntrack.sweep_interval: found 2h", "expected 1s to 1h"}),
        E("IdleTimeoutTooShort", kHead + kVip + "    conntrack_idle_timeout: 999ms\n", 9, 29,
          {"vips[0].conntrack_idle_timeout: found 999ms", "at least 1s", "52 days"}),
        E("IdleTimeoutTooLong", kHead + kVip + "    conntrack_idle_timeout: 720h\n", 9, 29,
          {"vips[0].conntrack_idle_timeout: found 720h", "below 30 days"}),
        E("IdleTimeoutNotADuration", kHead + kVip + "    conntrack_idle_timeout: forever\n", 9, 29,
          {"vips[0].conntrack_idle_timeout", "found \"forever\"", "a duration"}),
        E("IdleTimeoutWithoutConntrack",
          kHead + kVip + "    conntrack: false\n    conntrack_idle_timeout: 1m\n", 10, 29,
          {"vips[0].conntrack_idle_timeout: set while conntrack is false"}),
    };
}
INSTANTIATE_TEST_SUITE_P(Conntrack, ConfigErrorTable, ::testing::ValuesIn(conntrack_cases()),
                         [](const auto& info) { return info.param.name; });

TEST(ConntrackConfig, LongestIdleTimeoutIsAccepted) {
    const Config c = parse_ok(kHead + kVip + "    conntrack_idle_timeout: 719h\n");
    EXPECT_EQ(*c.vips[0].conntrack_idle_timeout, std::chrono::hours(719));
}

// --- SYN cookies and source lists (syn_cookies, allow_sources, deny_sources,
// cookie_acks, syn_flood) ------------------------------------------------------

// kHead with encap: gue; a VIP starts on line 6.
const std::string kGueHead =
    "interface: eth0\n"                                             // 1
    "next_hop: {address: 192.0.2.1}\n"                              // 2
    "encap_source: {ipv4: 203.0.113.1, ipv6: \"2001:db8:e::1\"}\n"  // 3
    "encap: gue\n"                                                  // 4
    "vips:\n";                                                      // 5

TEST(SynCookiesConfig, DefaultsAreUnsetAndNotWritten) {
    const Config c = parse_ok(kHead + kVip);
    const VipSpec& v = c.vips[0];
    EXPECT_FALSE(v.syn_cookies);
    EXPECT_TRUE(v.allow_sources.empty());
    EXPECT_TRUE(v.deny_sources.empty());
    EXPECT_FALSE(v.backends[0].cookie_acks);
    EXPECT_EQ(c.settings.syn_flood, SynFloodSettings{});
    EXPECT_EQ(c.settings.syn_flood.start_rate, 20'000u);
    EXPECT_EQ(c.settings.syn_flood.end_rate, 10'000u);
    EXPECT_EQ(c.settings.syn_flood.end_after, std::chrono::seconds(5));
    // Like conntrack_idle_timeout: a state file from before keeps its digest.
    const json vip = v;
    for (const char* key : {"syn_cookies", "allow_sources", "deny_sources"})
        EXPECT_FALSE(vip.contains(key)) << key << ": " << vip.dump();
    EXPECT_FALSE(vip["backends"][0].contains("cookie_acks")) << vip.dump();
    const std::string yaml = to_yaml(c);
    for (const char* key : {"syn_cookies", "allow_sources", "deny_sources", "cookie_acks"})
        EXPECT_EQ(yaml.find(key), std::string::npos) << key << "\n" << yaml;
}

TEST(SynCookiesConfig, ReadAndWrittenBack) {
    const Config c = parse_ok(
        "interface: eth0\n"
        "next_hop: {address: 192.0.2.1}\n"
        "encap_source: {ipv4: 203.0.113.1, ipv6: \"2001:db8:e::1\"}\n"
        "encap: gue\n"
        "syn_flood: {start_rate: 50000, end_rate: 2000, end_after: 30s}\n"
        "vips:\n"
        "  - address: 198.51.100.10\n"
        "    port: 443\n"
        "    syn_cookies: always\n"
        "    allow_sources: [192.0.2.0/24, 198.18.0.7]\n"
        "    deny_sources: [192.0.2.128/25]\n"
        "    backends:\n"
        "      - {address: 203.0.113.11, cookie_acks: true}\n"
        "      - {address: 203.0.113.12, state: disabled}\n"
        "  - address: \"2001:db8::10\"\n"
        "    port: 443\n"
        "    deny_sources: [\"2001:db8:bad::/48\"]\n");
    const VipSpec& v = c.vips[0];
    ASSERT_TRUE(v.syn_cookies);
    EXPECT_EQ(*v.syn_cookies, SynCookies::kAlways);
    ASSERT_EQ(v.allow_sources.size(), 2u);
    EXPECT_EQ(v.allow_sources[0].to_string(), "192.0.2.0/24");
    EXPECT_EQ(v.allow_sources[1].to_string(), "198.18.0.7/32");
    ASSERT_EQ(v.deny_sources.size(), 1u);
    EXPECT_EQ(v.deny_sources[0].to_string(), "192.0.2.128/25");
    EXPECT_TRUE(v.backends[0].cookie_acks);
    EXPECT_FALSE(v.backends[1].cookie_acks);
    EXPECT_EQ(c.vips[1].deny_sources[0].to_string(), "2001:db8:bad::/48");
    const SynFloodSettings want{50'000, 2'000, std::chrono::seconds(30)};
    EXPECT_EQ(c.settings.syn_flood, want);

    const std::string written = to_yaml(c);
    auto reread = parse_config(written, "written.yaml");
    ASSERT_TRUE(reread.has_value()) << listing(reread.error()) << "\n" << written;
    EXPECT_EQ(*reread, c) << written;

    const json vip = v;
    EXPECT_EQ(vip["syn_cookies"], "always");
    EXPECT_EQ(vip["allow_sources"], json::parse(R"(["192.0.2.0/24", "198.18.0.7/32"])"));
    EXPECT_EQ(vip["deny_sources"], json::parse(R"(["192.0.2.128/25"])"));
    EXPECT_EQ(vip["backends"][0]["cookie_acks"], true);
    auto back = vip_from_json(vip);
    ASSERT_TRUE(back.has_value()) << back.error();
    EXPECT_EQ(*back, v);
    // Asked off is written too: it differs from unset (auto where possible).
    VipSpec off = c.vips[1];
    off.syn_cookies = SynCookies::kOff;
    const json off_json = off;
    EXPECT_EQ(off_json["syn_cookies"], "off");
    EXPECT_EQ(vip_from_json(off_json).value(), off);
    EXPECT_EQ(settings_to_json(c.settings)["syn_flood"],
              json::parse(R"({"start_rate": 50000, "end_rate": 2000, "end_after": "30s"})"));
}

TEST(SynCookiesConfig, EffectiveModeFollowsWhatTheVipCanDo) {
    Config c = parse_ok(kGueHead + kVip);
    VipSpec v = c.vips[0];
    // Unset: auto only where every condition holds, else off and why.
    EXPECT_EQ(effective_syn_cookies(v, c.settings).mode, SynCookies::kOff);
    EXPECT_NE(effective_syn_cookies(v, c.settings).reason.find("203.0.113.11"), std::string::npos);
    v.backends[0].cookie_acks = true;
    EXPECT_EQ(effective_syn_cookies(v, c.settings), (EffectiveSynCookies{SynCookies::kAuto, {}}));
    EXPECT_TRUE(validate_vip(v, c.settings).empty());
    Settings ipip = c.settings;
    ipip.encap = Encap::kIpip;
    EXPECT_EQ(effective_syn_cookies(v, ipip).mode, SynCookies::kOff);
    // Unset is no promise: no error where cookies cannot run.
    EXPECT_TRUE(validate_vip(v, ipip).empty());
    v.syn_cookies = SynCookies::kOff;
    EXPECT_EQ(effective_syn_cookies(v, c.settings).mode, SynCookies::kOff);
}

TEST(SynCookiesConfig, EveryBackendLackingCookieAcksIsNamed) {
    const auto errors = errors_of(kGueHead +
                                  "  - address: 198.51.100.10\n"
                                  "    port: 80\n"
                                  "    syn_cookies: auto\n"
                                  "    backends:\n"
                                  "      - {address: 203.0.113.11}\n"
                                  "      - {address: 203.0.113.12, cookie_acks: true}\n"
                                  "      - {address: 203.0.113.13, state: drain}\n");
    ASSERT_EQ(errors.size(), 1u) << listing(errors);
    EXPECT_NE(errors[0].message.find("vips[0].syn_cookies: found auto but backends "
                                     "203.0.113.11 (backends[0]), 203.0.113.13 (backends[2]) "
                                     "lack cookie_acks: true"),
              std::string::npos)
        << errors[0].message;
}

TEST(SynCookiesConfig, JsonErrorsNameTheField) {
    auto bad = vip_from_json(json::parse(
        R"({"address": "198.51.100.10", "port": 80, "allow_sources": ["10.0.0.1/8"]})"));
    ASSERT_FALSE(bad.has_value());
    EXPECT_NE(bad.error().find("allow_sources[0]: '10.0.0.1/8' has host bits set"),
              std::string::npos)
        << bad.error();
    auto mode = vip_from_json(
        json::parse(R"({"address": "198.51.100.10", "port": 80, "syn_cookies": true})"));
    ASSERT_FALSE(mode.has_value());
    EXPECT_NE(mode.error().find("syn_cookies: found true, expected off, auto or always"),
              std::string::npos)
        << mode.error();
    auto acks = backend_from_json(json::parse(R"({"address": "10.0.0.1", "cookie_acks": "yes"})"));
    ASSERT_FALSE(acks.has_value());
    EXPECT_NE(acks.error().find("cookie_acks: found \"yes\", expected true or false"),
              std::string::npos)
        << acks.error();
}

TEST(SynCookiesConfig, TooManySourcePrefixesOverAllVips) {
    Config c = parse_ok(kHead + kVip);
    VipSpec v = c.vips[0];
    for (std::uint32_t i = 0; i < kMaxSourcePrefixes; ++i)
        v.deny_sources.push_back(
            net::Prefix{net::IpAddress::v4(10, static_cast<std::uint8_t>(i >> 8),
                                           static_cast<std::uint8_t>(i), 0),
                        24});
    c.vips.clear();
    for (std::uint16_t port = 1; port <= kMaxSourceRangeEntries / kMaxSourcePrefixes; ++port) {
        v.port = port;
        c.vips.push_back(v);
    }
    EXPECT_TRUE(check_config(c).empty()) << check_config(c).size();
    v.port = 999;
    v.deny_sources.resize(1);
    c.vips.push_back(v);
    const auto issues = check_config(c);
    ASSERT_EQ(issues.size(), 1u);
    EXPECT_EQ(issues[0].path, "vips[16].deny_sources");
    EXPECT_NE(issues[0].message.find("more than 16384 source prefixes"), std::string::npos)
        << issues[0].message;
}

std::vector<ErrorCase> syn_cookie_cases() {
    return {
        E("SynCookiesUnknownMode", kHead + kVip + "    syn_cookies: sometimes\n", 9, 18,
          {"vips[0].syn_cookies: found \"sometimes\"", "expected off, auto or always"}),
        E("SynCookiesOnUdp", kHead + kVip + "    protocol: udp\n    syn_cookies: auto\n", 10, 18,
          {"vips[0].syn_cookies: found auto on a udp VIP", "expected off"}),
        E("SynCookiesWithoutConntrack",
          kGueHead + kVip + "    conntrack: false\n    syn_cookies: always\n", 11, 18,
          {"found always with conntrack: false", "expected conntrack: true"}),
        E("SynCookiesWithIpip", kHead + kVip + "    syn_cookies: always\n", 9, 18,
          {"found always with encap: ipip", "expected encap: gue"}),
        E("SynCookiesBackendWithoutCookieAcks", kGueHead + kVip + "    syn_cookies: always\n", 10,
          18,
          {"vips[0].syn_cookies: found always but backend 203.0.113.11 (backends[0]) lacks "
           "cookie_acks: true",
           "xlb-decap"}),
        E("CookieAcksNotABoolean",
          kHead + kVip + "      - {address: 203.0.113.12, cookie_acks: yes}\n", 9, 46,
          {"vips[0].backends[1].cookie_acks: found \"yes\"", "true or false"}),
        E("SourcesNotAList", kHead + kVip + "    allow_sources: 192.0.2.0/24\n", 9, 20,
          {"vips[0].allow_sources: found \"192.0.2.0/24\"", "expected a list of prefixes"}),
        E("SourceWithHostBits", kHead + kVip + "    deny_sources: [192.0.2.7/24]\n", 9, 20,
          {"vips[0].deny_sources[0]: '192.0.2.7/24' has host bits set", "192.0.2.0/24"}),
        E("SourceNotAPrefix", kHead + kVip + "    deny_sources: [\"192.0.2.0/33\"]\n", 9, 20,
          {"vips[0].deny_sources[0]", "expected 0-32"}),
        E("SourceOfTheOtherFamily", kHead + kVip + "    allow_sources: [\"2001:db8::/32\"]\n", 9,
          21,
          {"vips[0].allow_sources[0]: found 2001:db8::/32, an IPv6 prefix, expected IPv4 "
           "prefixes"}),
        E("SourceTwice", kHead + kVip + "    allow_sources: [192.0.2.0/24, 192.0.2.0/24]\n", 9, 35,
          {"vips[0].allow_sources[1]: found 192.0.2.0/24 again (also allow_sources[0])",
           "each prefix once"}),
        E("SourceInBothLists",
          kHead + kVip + "    allow_sources: [192.0.2.0/24]\n    deny_sources: [192.0.2.0/24]\n",
          10, 20,
          {"vips[0].deny_sources[0]: found 192.0.2.0/24 again (also allow_sources[0])",
           "in one of the lists"}),
        E("SynFloodUnknownKey", kSettingsOnly + "syn_flood: {start_rates: 5}\n", 3, 13,
          {"syn_flood.start_rates: unknown key", "did you mean \"start_rate\""}),
        E("SynFloodEndAboveStart", kSettingsOnly + "syn_flood: {start_rate: 100, end_rate: 200}\n",
          3, 40,
          {"syn_flood.end_rate: found 200, expected an integer 1-100", "at most start_rate"}),
        E("SynFloodStartZero", kSettingsOnly + "syn_flood: {start_rate: 0, end_rate: 0}\n", 3, 25,
          {"syn_flood.start_rate: found 0, expected an integer 1-100000000"}),
        E("SynFloodEndAfterTooShort", kSettingsOnly + "syn_flood: {end_after: 500ms}\n", 3, 24,
          {"syn_flood.end_after: found 500ms, expected 1s to 1h"}),
        E("SynFloodRateNotANumber", kSettingsOnly + "syn_flood:\n  start_rate: lots\n", 4, 15,
          {"syn_flood.start_rate: found \"lots\"", "SYNs per second per CPU"}),
    };
}
INSTANTIATE_TEST_SUITE_P(SynCookies, ConfigErrorTable, ::testing::ValuesIn(syn_cookie_cases()),
                         [](const auto& info) { return info.param.name; });

// --- QUIC-LB (quic, server_id) -------------------------------------------------

// A UDP VIP on lines 5-10 whose backends have server ids; quic goes on line 11.
const std::string kQuicVip =
    "  - address: 198.51.100.10\n"                        // 5
    "    port: 443\n"                                     // 6
    "    protocol: udp\n"                                 // 7
    "    backends:\n"                                     // 8
    "      - {address: 203.0.113.11, server_id: 1}\n"     // 9
    "      - {address: 203.0.113.12, server_id: 258}\n";  // 10

// A key file as the agent wants it: root's, mode 0600.
class KeyFile {
public:
    explicit KeyFile(const std::string& content, mode_t mode = 0600) : file_(content) {
        ::chmod(file_.path().c_str(), mode);
    }
    const std::string& path() const { return file_.path(); }

private:
    TempFile file_;
};

TEST(QuicConfig, MappingAndListAreReadAndWrittenBack) {
    if (::geteuid() != 0) GTEST_SKIP() << "a key file must be root's";
    const KeyFile key("00112233445566778899aabbccddeeff\n");
    const Config c = parse_ok(kHead + kQuicVip +
                              "    quic:\n"
                              "      - {server_id_length: 2, nonce_length: 14, config_id: 3, "
                              "mode: encrypted, key_file: " +
                              key.path() +
                              "}\n"
                              "      - {server_id_length: 2, nonce_length: 6}\n");
    const VipSpec& v = c.vips[0];
    ASSERT_EQ(v.quic.size(), 2u);
    EXPECT_EQ(v.quic[0], (QuicConfig{3, 2, 14, QuicMode::kEncrypted, key.path()}));
    EXPECT_EQ(v.quic[1], (QuicConfig{0, 2, 6, QuicMode::kPlaintext, ""}))
        << "config_id 0 and plaintext by default";
    EXPECT_EQ(v.backends[0].server_id, 1u);
    EXPECT_EQ(v.backends[1].server_id, 258u);

    const std::string written = to_yaml(c);
    auto reread = parse_config(written, "written.yaml");
    ASSERT_TRUE(reread.has_value()) << listing(reread.error()) << "\n" << written;
    EXPECT_EQ(*reread, c) << written;

    const json vip = v;
    EXPECT_EQ(vip["quic"], json::parse(R"([
        {"config_id": 3, "server_id_length": 2, "nonce_length": 14, "mode": "encrypted",
         "key_file": ")" + key.path() + R"("},
        {"config_id": 0, "server_id_length": 2, "nonce_length": 6, "mode": "plaintext"}])"));
    EXPECT_EQ(vip["backends"][1]["server_id"], 258);
    EXPECT_EQ(vip.dump().find("00112233"), std::string::npos) << "never the key: " << vip.dump();
    auto back = vip_from_json(vip);
    ASSERT_TRUE(back.has_value()) << back.error();
    EXPECT_EQ(*back, v);

    // The mapping form is one config; JSON writes it as a list of one.
    const Config one =
        parse_ok(kHead + kQuicVip + "    quic: {server_id_length: 2, nonce_length: 8}\n");
    ASSERT_EQ(one.vips[0].quic.size(), 1u);
    EXPECT_EQ(one.vips[0].quic[0], (QuicConfig{0, 2, 8, QuicMode::kPlaintext, ""}));
    EXPECT_TRUE(json(one.vips[0])["quic"].is_array());
    auto from_object = vip_from_json(json::parse(
        R"({"address": "198.51.100.10", "port": 443, "protocol": "udp",
            "quic": {"server_id_length": 2, "nonce_length": 8}})"));
    ASSERT_TRUE(from_object.has_value()) << from_object.error();
    EXPECT_EQ(from_object->quic, one.vips[0].quic);
}

TEST(QuicConfig, OffIsNotWritten) {
    const Config c = parse_ok(kHead + kVip);
    EXPECT_TRUE(c.vips[0].quic.empty());
    EXPECT_FALSE(c.vips[0].backends[0].server_id);
    // A state file from before keeps its digest.
    const json vip = c.vips[0];
    EXPECT_FALSE(vip.contains("quic")) << vip.dump();
    EXPECT_FALSE(vip["backends"][0].contains("server_id")) << vip.dump();
    const std::string yaml = to_yaml(c);
    for (const char* key : {"quic", "server_id"})
        EXPECT_EQ(yaml.find(key), std::string::npos) << key << "\n" << yaml;
}

TEST(QuicConfig, LargestServerIdRoundTrips) {
    Config c = parse_ok(kHead + kQuicVip + "    quic: {server_id_length: 8, nonce_length: 8}\n");
    c.vips[0].backends[0].server_id = 18446744073709551615ULL;
    EXPECT_TRUE(check_config(c).empty()) << check_config(c).size();
    auto reread = parse_config(to_yaml(c), "written.yaml");
    ASSERT_TRUE(reread.has_value()) << listing(reread.error());
    EXPECT_EQ(*reread, c);
    EXPECT_EQ(vip_from_json(json(c.vips[0])).value(), c.vips[0]);
}

// server_id_length 1: ids below 256; the first config that is too short
// for a backend's id is named.
TEST(QuicConfig, ServerIdMustFitEveryConfig) {
    const auto errors = errors_of(kHead + kQuicVip +
                                  "    quic:\n"
                                  "      - {server_id_length: 2, nonce_length: 8, config_id: 0}\n"
                                  "      - {server_id_length: 1, nonce_length: 8, config_id: 1}\n");
    ASSERT_EQ(errors.size(), 1u) << listing(errors);
    EXPECT_EQ(errors[0].line, 10);
    EXPECT_NE(errors[0].message.find("vips[0].backends[1].server_id: found 258, expected below "
                                     "256 (quic[1] has server_id_length 1)"),
              std::string::npos)
        << errors[0].message;
}

TEST(QuicConfig, EncryptedNeedsSixteenOctetsAndAKey) {
    const auto errors = errors_of(kHead + kQuicVip +
                                  "    quic: {server_id_length: 2, nonce_length: 8, mode: "
                                  "encrypted}\n");
    ASSERT_EQ(errors.size(), 2u) << listing(errors);
    const std::string all = listing(errors);
    EXPECT_NE(all.find("test.yaml:11:56: vips[0].quic.mode: found encrypted with "
                       "server_id_length 2 + nonce_length 8 = 10, expected a sum of 16: only the "
                       "single-pass form"),
              std::string::npos)
        << all;
    EXPECT_NE(all.find("vips[0].quic.key_file: missing, expected the path of the file holding "
                       "the 16-octet AES-128 key"),
              std::string::npos)
        << all;
}

// The key file is read where the configuration is checked: a key the agent
// could not use stops the file, naming the file and the fix.
TEST(QuicConfig, KeyFileIsCheckedWhenLoaded) {
    if (::geteuid() != 0) GTEST_SKIP() << "a key file must be root's";
    auto error_for = [](const std::string& path) {
        const auto errors = errors_of(kHead + kQuicVip +
                                      "    quic: {server_id_length: 3, nonce_length: 13, mode: "
                                      "encrypted, key_file: \"" +
                                      path + "\"}\n");
        return errors.size() == 1 ? errors[0].to_string() : listing(errors);
    };
    const std::string hex = "00112233445566778899AABBccddeeff";
    for (const std::string& good : {hex, hex + "\n", std::string(16, '\x07')}) {
        const KeyFile key(good);
        EXPECT_TRUE(errors_of(kHead + kQuicVip +
                              "    quic: {server_id_length: 3, nonce_length: 13, mode: encrypted, "
                              "key_file: " +
                              key.path() + "}\n")
                        .empty())
            << error_for(key.path());
    }
    // The reader is the QUIC library's (its own tests cover every form);
    // here: each refusal stops the file at the key, naming the file.
    auto expect_refused = [&](const std::string& path, const std::string& words) {
        const std::string e = error_for(path);
        EXPECT_NE(e.find("test.yaml:11:"), std::string::npos) << e;
        EXPECT_NE(e.find("vips[0].quic.key_file: "), std::string::npos) << e;
        EXPECT_NE(e.find(path), std::string::npos) << e;
        EXPECT_NE(e.find(words), std::string::npos) << e;
    };
    {
        const KeyFile loose(hex, 0640);
        expect_refused(loose.path(), "(mode 0640)");
        expect_refused(loose.path(), "chmod 600 " + loose.path());
    }
    {
        const KeyFile theirs(hex);
        ASSERT_EQ(::chown(theirs.path().c_str(), 65534, 65534), 0);
        expect_refused(theirs.path(), "not owned by root (uid 65534)");
        expect_refused(theirs.path(), "chown root " + theirs.path());
    }
    for (const std::string& bad : {hex.substr(1), std::string(17, 'a')}) {
        const KeyFile key(bad);
        expect_refused(key.path(), "holds " + std::to_string(bad.size()) + " octets");
    }
    {
        const KeyFile key(std::string(31, '0') + "g");
        expect_refused(key.path(), "not a hex digit");
        const std::string dir = std::filesystem::path(key.path()).parent_path();
        expect_refused(dir, "not a regular file");
        expect_refused(dir + "/none", "No such file or directory");
    }
    EXPECT_NE(error_for("key.hex").find("expected an absolute path"), std::string::npos)
        << error_for("key.hex");
}

// The API meets the same rules: check_vip on a VIP built in code.
TEST(QuicConfig, RuntimeChangesMeetTheFileRules) {
    Config c = parse_ok(kHead + kQuicVip + "    quic: {server_id_length: 2, nonce_length: 8}\n");
    VipSpec v = c.vips[0];
    EXPECT_TRUE(validate_vip(v, c.settings).empty());
    v.backends[1].server_id = 1;
    auto issues = check_vip(v, c.settings);
    ASSERT_EQ(issues.size(), 1u);
    EXPECT_EQ(issues[0].path, "backends[1].server_id");
    EXPECT_NE(issues[0].message.find("found 1 again (also backends[0])"), std::string::npos)
        << issues[0].message;
    v.backends[1].server_id.reset();
    v.quic.push_back(QuicConfig{0, 2, 8, QuicMode::kPlaintext, ""});
    issues = check_vip(v, c.settings);
    ASSERT_EQ(issues.size(), 1u);
    EXPECT_EQ(issues[0].path, "quic[1].config_id") << "with two configs, each is named";
    v.quic.clear();
    issues = check_vip(v, c.settings);
    ASSERT_EQ(issues.size(), 1u);
    EXPECT_EQ(issues[0].path, "backends[0].server_id");
}

std::vector<ErrorCase> quic_cases() {
    const std::string q = kHead + kQuicVip + "    quic: ";
    return {
        E("QuicNotAMapping", q + "yes\n", 11, 11,
          {"vips[0].quic: found \"yes\", expected a mapping {server_id_length, nonce_length, "
           "config_id, mode, key_file} or a list of them"}),
        E("QuicServerIdLengthMissing", q + "{nonce_length: 8}\n", 11, 11,
          {"vips[0].quic.server_id_length: missing, expected the server id's length in octets, "
           "1-15 (required"}),
        E("QuicNonceLengthMissing", q + "[{server_id_length: 2}]\n", 11, 12,
          {"vips[0].quic[0].nonce_length: missing, expected the nonce's length in octets, 4-18 "
           "(required"}),
        E("QuicUnknownKey", q + "{server_id_length: 2, nonce_length: 8, keyfile: /k}\n", 11, 50,
          {"vips[0].quic.keyfile: unknown key", "did you mean \"key_file\""}),
        E("QuicUnknownMode", q + "{server_id_length: 2, nonce_length: 8, mode: aes}\n", 11, 56,
          {"vips[0].quic.mode: found \"aes\", expected plaintext or encrypted"}),
        E("QuicLengthNotANumber", q + "{server_id_length: two, nonce_length: 8}\n", 11, 30,
          {"vips[0].quic.server_id_length: found \"two\", expected an integer 1-15"}),
        E("QuicOnTcp", kHead + kVip + "    quic: {server_id_length: 2, nonce_length: 8}\n", 9, 11,
          {"vips[0].quic: found on a tcp VIP, expected quic only on udp VIPs"}),
        E("QuicConfigIdSeven", q + "{server_id_length: 2, nonce_length: 8, config_id: 7}\n", 11, 61,
          {"vips[0].quic.config_id: found 7, expected 0-6"}),
        E("QuicConfigIdTwice",
          q + "[{server_id_length: 2, nonce_length: 8, config_id: 1},\n"
              "           {server_id_length: 2, nonce_length: 9, config_id: 1}]\n",
          12, 62,
          {"vips[0].quic[1].config_id: found 1 again (also quic[0]), expected a distinct "
           "config_id"}),
        E("QuicServerIdLengthZero", q + "{server_id_length: 0, nonce_length: 8}\n", 11, 30,
          {"vips[0].quic.server_id_length: found 0, expected 1-15"}),
        E("QuicServerIdLengthSixteen", q + "{server_id_length: 16, nonce_length: 4}\n", 11, 30,
          {"vips[0].quic.server_id_length: found 16, expected 1-15"}),
        E("QuicNonceLengthThree", q + "{server_id_length: 2, nonce_length: 3}\n", 11, 47,
          {"vips[0].quic.nonce_length: found 3, expected 4-18"}),
        E("QuicNonceLengthNineteen", q + "{server_id_length: 2, nonce_length: 19}\n", 11, 47,
          {"vips[0].quic.nonce_length: found 19, expected 4-18"}),
        E("QuicLongerThanTwentyOctets", q + "{server_id_length: 10, nonce_length: 10}\n", 11, 48,
          {"vips[0].quic.nonce_length: server_id_length 10 + nonce_length 10 = 20, expected at "
           "most 19"}),
        E("QuicPlaintextWithKeyFile",
          q + "{server_id_length: 2, nonce_length: 8, key_file: /etc/xlb/quic.key}\n", 11, 60,
          {"vips[0].quic.key_file: set while mode is plaintext, expected mode: encrypted"}),
        E("QuicServerIdNegative",
          kHead + kQuicVip + "      - {address: 203.0.113.13, server_id: -1}\n" +
              "    quic: {server_id_length: 2, nonce_length: 8}\n",
          11, 44, {"vips[0].backends[2].server_id: found \"-1\", expected a non-negative integer"}),
        E("QuicServerIdTwice",
          kHead + kQuicVip + "      - {address: 203.0.113.13, server_id: 258}\n" +
              "    quic: {server_id_length: 2, nonce_length: 8}\n",
          11, 44,
          {"vips[0].backends[2].server_id: found 258 again (also backends[1]), expected a "
           "distinct server_id"}),
        E("QuicServerIdTooLarge", q + "{server_id_length: 1, nonce_length: 8}\n", 10, 44,
          {"vips[0].backends[1].server_id: found 258, expected below 256 (quic has "
           "server_id_length 1)"}),
        E("QuicServerIdWithoutQuic",
          kHead + kVip + "      - {address: 203.0.113.12, server_id: 5}\n", 9, 44,
          {"vips[0].backends[1].server_id: set on a VIP without quic, expected quic on the VIP"}),
    };
}
INSTANTIATE_TEST_SUITE_P(Quic, ConfigErrorTable, ::testing::ValuesIn(quic_cases()),
                         [](const auto& info) { return info.param.name; });

// fleet: the store's address and this host's name; the file then holds only
// the host's own settings.
const std::string kFleet =
    "fleet:\n"                                                                    // 3
    "  endpoints: [https://198.18.0.11:2379, \"https://[2001:db8::11]:2379\"]\n"  // 4
    "  ca: /etc/xlb/etcd/ca.pem\n"                                                // 5
    "  cert: /etc/xlb/etcd/client.pem\n"                                          // 6
    "  key: /etc/xlb/etcd/client-key.pem\n";                                      // 7

TEST(FleetConfig, SectionIsReadWithItsDefaults) {
    const Config c = parse_ok(kSettingsOnly + kFleet + "  host_name: lb-7\n");
    const FleetSettings& f = c.settings.fleet;
    EXPECT_TRUE(f.enabled);
    EXPECT_EQ(f.name, "default");
    EXPECT_EQ(fleet_prefix(f), "/xlb/default/");
    ASSERT_EQ(f.endpoints.size(), 2u);
    EXPECT_EQ(f.endpoints[1], "https://[2001:db8::11]:2379");
    EXPECT_EQ(f.host_name, "lb-7");
    EXPECT_EQ(f.key, "/etc/xlb/etcd/client-key.pem");
    EXPECT_EQ(f.lease_ttl, std::chrono::seconds(10));
    EXPECT_EQ(f.request_timeout, std::chrono::seconds(5));
    // The seed is the fleet's: a host file without one is complete.
    EXPECT_FALSE(missing_hash_seed(c, "test.yaml").has_value());
    EXPECT_FALSE(parse_ok(kSettingsOnly).settings.fleet.enabled);
}

TEST(FleetConfig, NameAndPrefixMakeTheKeys) {
    Config c = parse_ok(kSettingsOnly + kFleet + "  name: prod-eu\n");
    EXPECT_EQ(fleet_prefix(c.settings.fleet), "/xlb/prod-eu/");
    c = parse_ok(kSettingsOnly + kFleet + "  prefix: /lb/edge\n");
    EXPECT_EQ(fleet_prefix(c.settings.fleet), "/lb/edge/");
}

TEST(FleetConfig, WrittenBackAsTheSameSection) {
    const Config c = parse_ok(kSettingsOnly + kFleet + "  name: prod\n  lease_ttl: 15s\n");
    const std::string yaml = to_yaml(c);
    EXPECT_EQ(yaml.find("\nvips:"), std::string::npos) << yaml;
    EXPECT_EQ(yaml.find("hash_seed"), std::string::npos) << yaml;
    EXPECT_EQ(parse_ok(yaml), c) << yaml;
}

TEST(FleetConfig, GlobalSettingsFromJson) {
    auto s = fleet_wide_from_json(json{
        {"hash_seed", "0x1234abcd"}, {"encap", "gue"}, {"second_chance", {{"enabled", true}}}});
    ASSERT_TRUE(s.has_value()) << s.error();
    EXPECT_EQ(s->hash_seed, 0x1234abcdu);
    EXPECT_TRUE(s->hash_seed_set);
    EXPECT_EQ(s->encap, Encap::kGue);
    EXPECT_TRUE(s->second_chance.enabled);
    EXPECT_EQ(fleet_wide_from_json(fleet_wide_to_json(*s)).value(), *s);

    auto missing = fleet_wide_from_json(json{{"encap", "gue"}});
    ASSERT_FALSE(missing.has_value());
    EXPECT_NE(missing.error().find("hash_seed: missing"), std::string::npos) << missing.error();
    auto host_setting = fleet_wide_from_json(json{{"hash_seed", "0x1"}, {"mtu", 9000}});
    ASSERT_FALSE(host_setting.has_value());
    EXPECT_NE(host_setting.error().find("mtu: unknown key"), std::string::npos)
        << host_setting.error();
}

TEST(FleetConfig, CopyingFleetWideLeavesTheHostsOwn) {
    Config host = parse_ok(kSettingsOnly + kFleet + "mtu: 9000\n");
    Settings global = *fleet_wide_from_json(json{{"hash_seed", "0x99"}, {"encap", "gue"}});
    EXPECT_TRUE(fleet_wide_differ(host.settings, global));
    copy_fleet_wide(host.settings, global);
    EXPECT_EQ(host.settings.hash_seed, 0x99u);
    EXPECT_EQ(host.settings.encap, Encap::kGue);
    EXPECT_EQ(host.settings.mtu, 9000);
    EXPECT_TRUE(host.settings.fleet.enabled);
    EXPECT_FALSE(fleet_wide_differ(host.settings, global));
}

std::vector<ErrorCase> fleet_cases() {
    const std::string ep = "  endpoints: [http://127.0.0.1:2379]\n";  // line 4
    return {
        E("FleetAndVips", kSettingsOnly + kFleet + "vips: []\n", 8, 7,
          {"vips: set here and fleet: is set", "desired/vips/", "xlbctl fleet import"}),
        E("FleetAndHashSeed", kSettingsOnly + "hash_seed: 0x12\n" + kFleet, 3, 12,
          {"hash_seed: set here and fleet: is set", "desired/global"}),
        E("FleetAndSecondChance", kSettingsOnly + kFleet + "second_chance: {enabled: false}\n", 8,
          16, {"second_chance: set here and fleet: is set"}),
        E("FleetWithoutEndpoints", kSettingsOnly + "fleet: {name: a}\n", 3, 8,
          {"fleet.endpoints: missing", "etcd members' client URLs"}),
        E("FleetEndpointWithoutScheme", kSettingsOnly + "fleet:\n  endpoints: [10.0.0.1:2379]\n", 4,
          15, {"fleet.endpoints[0]: found \"10.0.0.1:2379\"", "http:// or https://"}),
        E("FleetEndpointWithoutPort", kSettingsOnly + "fleet:\n  endpoints: [http://10.0.0.1]\n", 4,
          15, {"fleet.endpoints[0]", "HOST:PORT"}),
        E("FleetEndpointWithPath",
          kSettingsOnly + "fleet:\n  endpoints: [\"http://10.0.0.1:2379/v3\"]\n", 4, 15,
          {"fleet.endpoints[0]", "no path"}),
        E("FleetHttpsWithoutCa", kSettingsOnly + "fleet:\n  endpoints: [https://10.0.0.1:2379]\n",
          4, 3, {"fleet.ca: missing with https:// endpoints"}),
        E("FleetCertWithoutKey",
          kSettingsOnly + "fleet:\n  endpoints: [https://10.0.0.1:2379]\n  ca: /ca.pem\n"
                          "  cert: /c.pem\n",
          4, 3, {"fleet.key: missing", "both cert and key"}),
        E("FleetCertOverHttp", kSettingsOnly + "fleet:\n" + ep + "  cert: /c.pem\n  key: /k.pem\n",
          5, 9, {"fleet.cert: set with http:// endpoints only"}),
        E("FleetBadName", kSettingsOnly + "fleet:\n" + ep + "  name: Prod/EU\n", 5, 9,
          {"fleet.name: found \"Prod/EU\"", "a-z, 0-9"}),
        E("FleetRelativeCa", kSettingsOnly + "fleet:\n" + ep + "  ca: ca.pem\n", 5, 7,
          {"fleet.ca: found \"ca.pem\"", "absolute path"}),
        E("FleetLeaseTooShort", kSettingsOnly + "fleet:\n" + ep + "  lease_ttl: 1s\n", 5, 14,
          {"fleet.lease_ttl: found 1s", "expected 2s to 5m"}),
        E("FleetUnknownKey", kSettingsOnly + "fleet:\n" + ep + "  endpoint: x\n", 5, 3,
          {"fleet.endpoint: unknown key", "did you mean \"endpoints\""}),
        E("FleetPublishWaitTooLong", kSettingsOnly + "fleet:\n" + ep + "  max_publish_wait: 11s\n",
          5, 21, {"fleet.max_publish_wait: found 11s", "to 10s"}),
        E("FleetPublishWaitNotADuration",
          kSettingsOnly + "fleet:\n" + ep + "  max_publish_wait: soon\n", 5, 21,
          {"fleet.max_publish_wait", "found \"soon\""}),
        E("FleetLagTooLong", kSettingsOnly + "fleet:\n" + ep + "  max_lag: 11m\n", 5, 12,
          {"fleet.max_lag: found 11m", "to 10m"}),
        E("FleetUnknownAnnounce", kSettingsOnly + "fleet:\n" + ep + "  announce: when_serving\n", 5,
          13, {"fleet.announce", "found \"when_serving\"", "when_current or always"}),
    };
}
INSTANTIATE_TEST_SUITE_P(Fleet, ConfigErrorTable, ::testing::ValuesIn(fleet_cases()),
                         [](const auto& info) { return info.param.name; });

TEST(FleetConfig, PublishWaitAnnounceAndLagDefaultsAndRoundTrip) {
    const FleetSettings defaults = parse_ok(kSettingsOnly + kFleet).settings.fleet;
    EXPECT_EQ(defaults.max_publish_wait, std::chrono::seconds(1));
    EXPECT_EQ(defaults.announce, FleetAnnounce::kWhenCurrent);
    EXPECT_EQ(defaults.max_lag, std::chrono::seconds(2));

    const Config c = parse_ok(kSettingsOnly + kFleet +
                              "  max_publish_wait: 250ms\n  announce: always\n  max_lag: 10m\n");
    const FleetSettings& f = c.settings.fleet;
    EXPECT_EQ(f.max_publish_wait, std::chrono::milliseconds(250));
    EXPECT_EQ(f.announce, FleetAnnounce::kAlways);
    EXPECT_EQ(f.max_lag, std::chrono::minutes(10));
    const std::string yaml = to_yaml(c);
    EXPECT_NE(yaml.find("max_publish_wait: 250ms"), std::string::npos) << yaml;
    EXPECT_NE(yaml.find("announce: always"), std::string::npos) << yaml;
    EXPECT_EQ(parse_ok(yaml), c) << yaml;
    const json j = settings_to_json(c.settings);
    EXPECT_EQ(j["fleet"]["max_publish_wait"], "250ms");
    EXPECT_EQ(j["fleet"]["announce"], "always");
    EXPECT_EQ(j["fleet"]["max_lag"], format_duration(f.max_lag));
    // The bounds themselves are allowed: 0 publishes at once.
    const Config bounds =
        parse_ok(kSettingsOnly + kFleet + "  max_publish_wait: 0s\n  max_lag: 0s\n");
    EXPECT_EQ(bounds.settings.fleet.max_publish_wait, Duration{0});
    EXPECT_EQ(bounds.settings.fleet.max_lag, Duration{0});
    EXPECT_EQ(parse_ok(kSettingsOnly + kFleet + "  max_publish_wait: 10s\n")
                  .settings.fleet.max_publish_wait,
              std::chrono::seconds(10));
    for (FleetAnnounce a : {FleetAnnounce::kWhenCurrent, FleetAnnounce::kAlways})
        EXPECT_EQ(parse_fleet_announce(to_string(a)), a);
}

// health_consensus: per VIP; unset means majority on a fleet's host and
// local elsewhere.
TEST(HealthConsensusConfig, ReadDefaultedWrittenBack) {
    const Config unset = parse_ok(kHead + kVip);
    EXPECT_EQ(unset.vips[0].health_consensus, std::nullopt);
    EXPECT_EQ(unset.vips[0].consensus(true), HealthConsensus::kMajority);
    EXPECT_EQ(unset.vips[0].consensus(false), HealthConsensus::kLocal);
    EXPECT_EQ(to_yaml(unset).find("health_consensus"), std::string::npos) << "unset stays unset";
    EXPECT_FALSE(json(unset.vips[0]).contains("health_consensus"));

    for (HealthConsensus p :
         {HealthConsensus::kLocal, HealthConsensus::kMajority, HealthConsensus::kAnyDown}) {
        const std::string name = to_string(p);
        const Config c = parse_ok(kHead + kVip + "    health_consensus: " + name + "\n");
        ASSERT_EQ(c.vips.size(), 1u);
        EXPECT_EQ(c.vips[0].health_consensus, p) << name;
        EXPECT_EQ(c.vips[0].consensus(true), p) << name << ": set beats the fleet's default";
        EXPECT_EQ(c.vips[0].consensus(false), p) << name;
        const std::string yaml = to_yaml(c);
        EXPECT_NE(yaml.find("health_consensus: " + name), std::string::npos) << yaml;
        EXPECT_EQ(parse_ok(yaml), c) << yaml;
        const json j = c.vips[0];
        EXPECT_EQ(j["health_consensus"], name);
        auto back = vip_from_json(json::parse(j.dump()));
        ASSERT_TRUE(back.has_value()) << back.error();
        EXPECT_EQ(*back, c.vips[0]);
    }
    json bad = json(unset.vips[0]);
    bad["health_consensus"] = "unanimous";
    auto refused = vip_from_json(bad);
    ASSERT_FALSE(refused.has_value());
    EXPECT_NE(refused.error().find("health_consensus"), std::string::npos) << refused.error();
    EXPECT_NE(refused.error().find("local, majority or any_down"), std::string::npos)
        << refused.error();
}

std::vector<ErrorCase> consensus_cases() {
    return {
        E("UnknownHealthConsensus", kHead + kVip + "    health_consensus: unanimous\n", 9, 23,
          {"vips[0].health_consensus", "found \"unanimous\"", "local, majority or any_down"}),
        E("HealthConsensusNotAWord", kHead + kVip + "    health_consensus: [majority]\n", 9, 23,
          {"vips[0].health_consensus", "local, majority or any_down"}),
    };
}
INSTANTIATE_TEST_SUITE_P(HealthConsensus, ConfigErrorTable, ::testing::ValuesIn(consensus_cases()),
                         [](const auto& info) { return info.param.name; });

// PATCH /v1/backends: the value errors are a new backend's, word for word.
TEST(JsonBackendPatch, DecodesWeightStateOrBoth) {
    auto w = backend_patch_from_json(json::parse(R"({"weight": 50})"));
    ASSERT_TRUE(w) << w.error();
    EXPECT_EQ(w->weight, 50u);
    EXPECT_FALSE(w->state);
    auto both = backend_patch_from_json(json::parse(R"({"state": "drain", "weight": 0})"));
    ASSERT_TRUE(both) << both.error();
    EXPECT_EQ(both->weight, 0u);
    EXPECT_EQ(both->state, AdminState::kDrain);
    // Above kMaxWeight is the validator's to refuse, with the VIP in context.
    auto heavy = backend_patch_from_json(json::parse(R"({"weight": 20000})"));
    ASSERT_TRUE(heavy) << heavy.error();
    EXPECT_EQ(heavy->weight, 20000u);
}

TEST(JsonBackendPatch, DecodesCookieAcks) {
    auto on = backend_patch_from_json(json::parse(R"({"cookie_acks": true})"));
    ASSERT_TRUE(on) << on.error();
    EXPECT_EQ(on->cookie_acks, true);
    EXPECT_FALSE(on->weight);
    EXPECT_FALSE(on->state);
    auto off = backend_patch_from_json(json::parse(R"({"cookie_acks": false, "weight": 5})"));
    ASSERT_TRUE(off) << off.error();
    EXPECT_EQ(off->cookie_acks, false) << "false is a change, not nothing";
    EXPECT_EQ(off->weight, 5u);
    auto bad = backend_patch_from_json(json::parse(R"({"cookie_acks": "yes"})"));
    ASSERT_FALSE(bad);
    EXPECT_EQ(bad.error(),
              backend_from_json(json::parse(R"({"address": "203.0.113.11", "cookie_acks": "yes"})"))
                  .error());
    EXPECT_EQ(bad.error(), "cookie_acks: found \"yes\", expected true or false");
}

TEST(JsonBackendPatch, ValueErrorsAreTheBackendDecodersOwn) {
    for (const char* value : {"-1", "1.5", "\"heavy\"", "4294967296", "true"}) {
        const std::string weight = std::string(R"({"weight": )") + value + "}";
        auto patch = backend_patch_from_json(json::parse(weight));
        ASSERT_FALSE(patch) << weight;
        auto backend = backend_from_json(
            json::parse(std::string(R"({"address": "203.0.113.11", "weight": )") + value + "}"));
        ASSERT_FALSE(backend) << value;
        EXPECT_EQ(patch.error(), backend.error());
    }
    EXPECT_EQ(backend_patch_from_json(json::parse(R"({"weight": -1})")).error(),
              "weight: found -1, expected an integer 0-10000");
    auto state = backend_patch_from_json(json::parse(R"({"state": "sleeping"})"));
    ASSERT_FALSE(state);
    EXPECT_EQ(state.error(), "state: found \"sleeping\", expected active, drain or disabled");
    EXPECT_EQ(state.error(),
              backend_from_json(json::parse(R"({"address": "203.0.113.11", "state": "sleeping"})"))
                  .error());
}

// server_id: a number sets it, null clears it (absent: left as it is).
TEST(JsonBackendPatch, ServerIdIsSetOrCleared) {
    auto set = backend_patch_from_json(json::parse(R"({"server_id": 18446744073709551615})"));
    ASSERT_TRUE(set) << set.error();
    ASSERT_TRUE(set->server_id);
    EXPECT_EQ(*set->server_id, 18446744073709551615ULL);
    auto cleared = backend_patch_from_json(json::parse(R"({"server_id": null})"));
    ASSERT_TRUE(cleared) << cleared.error();
    ASSERT_TRUE(cleared->server_id) << "null is a change, not nothing";
    EXPECT_FALSE(*cleared->server_id);
    EXPECT_FALSE(backend_patch_from_json(json::parse(R"({"weight": 5})"))->server_id);
    for (const char* value : {"-1", "\"7\"", "1.5", "true"}) {
        auto bad =
            backend_patch_from_json(json::parse(std::string(R"({"server_id": )") + value + "}"));
        ASSERT_FALSE(bad) << value;
        EXPECT_EQ(bad.error(),
                  backend_from_json(
                      json::parse(std::string(R"({"address": "203.0.113.11", "server_id": )") +
                                  value + "}"))
                      .error());
        EXPECT_NE(bad.error().find("server_id: found " + std::string(value) +
                                   ", expected a non-negative integer"),
                  std::string::npos)
            << bad.error();
    }
}

TEST(JsonBackendPatch, UnknownFieldsAndNothingToChangeAreRefused) {
    auto unknown = backend_patch_from_json(json::parse(R"({"colour": "red"})"));
    ASSERT_FALSE(unknown);
    EXPECT_EQ(unknown.error(),
              "found unknown field \"colour\", expected an object with \"weight\" (0-10000), "
              "\"state\" (active, drain or disabled), \"cookie_acks\" (true or false) and/or "
              "\"server_id\" (an integer, or null to clear it), e.g. {\"weight\": 50}");
    auto empty = backend_patch_from_json(json::object());
    ASSERT_FALSE(empty);
    EXPECT_EQ(empty.error(), "nothing to change, expected " + std::string(kBackendPatchExpected));
    auto list = backend_patch_from_json(json::array());
    ASSERT_FALSE(list);
    EXPECT_EQ(list.error(), "found a list, expected " + std::string(kBackendPatchExpected));
    // Every problem at once, as the other decoders report them.
    auto two = backend_patch_from_json(json::parse(R"({"state": 1, "weight": -1})"));
    ASSERT_FALSE(two);
    EXPECT_EQ(two.error(),
              "state: found 1, expected active, drain or disabled; weight: found -1, expected an "
              "integer 0-10000");
}

// POST /v1/capture's body.
TEST(JsonCaptureRequest, DecodesEveryKey) {
    auto r = capture_request_from_json(
        json::parse(R"({"vip": "198.51.100.10:80", "backend": "203.0.113.11",
                        "src": "192.0.2.0/24", "outcomes": ["drop", "tx"], "count": 100,
                        "duration_ms": 10000, "snaplen": 256})"),
        2048);
    ASSERT_TRUE(r) << r.error();
    ASSERT_TRUE(r->vip);
    EXPECT_EQ(r->vip->to_string(), "198.51.100.10:80/tcp");
    EXPECT_EQ(r->backend, *net::IpAddress::parse("203.0.113.11"));
    EXPECT_EQ(r->src, *net::Prefix::parse("192.0.2.0/24"));
    EXPECT_EQ(r->outcomes, (std::vector<std::string>{"drop", "tx"}));
    EXPECT_EQ(r->count, 100u);
    EXPECT_EQ(r->duration, std::chrono::milliseconds(10000));
    EXPECT_EQ(r->snaplen, 256u);

    auto none = capture_request_from_json(json::object(), 2048);
    ASSERT_TRUE(none) << none.error();
    EXPECT_FALSE(none->vip || none->backend || none->src || none->count || none->duration ||
                 none->snaplen);
    EXPECT_TRUE(none->outcomes.empty());
}

TEST(JsonCaptureRequest, ErrorsNameTheKey) {
    auto error = [](const char* body, std::uint32_t max_snaplen = 2048) {
        auto r = capture_request_from_json(json::parse(body), max_snaplen);
        EXPECT_FALSE(r) << body;
        return r ? std::string() : r.error();
    };
    EXPECT_EQ(error(R"({"count": 0})"), "count: found 0, expected an integer 1-1000000000");
    EXPECT_EQ(error(R"({"count": 1000000001})"),
              "count: found 1000000001, expected an integer 1-1000000000");
    EXPECT_EQ(error(R"({"duration_ms": "1s"})"),
              "duration_ms: found \"1s\", expected an integer 1-604800000");
    EXPECT_EQ(error(R"({"snaplen": 2049})"), "snaplen: found 2049, expected an integer 1-2048");
    EXPECT_EQ(error(R"({"snaplen": 65})", 64), "snaplen: found 65, expected an integer 1-64");
    EXPECT_EQ(error(R"({"vip": 80})"), "vip: found 80, expected a string");
    EXPECT_EQ(error(R"({"vip": "nope"})").rfind("vip: ", 0), 0u);
    EXPECT_EQ(error(R"({"backend": "nope"})"), "backend: " + net::IpAddress::parse("nope").error());
    EXPECT_EQ(error(R"({"src": "192.0.2.1/33"})"),
              "src: " + net::Prefix::parse("192.0.2.1/33").error());
    EXPECT_EQ(error(R"({"outcomes": []})"),
              "outcomes: found an empty list, expected a list such as [\"drop\", \"tx\"]");
    EXPECT_EQ(error(R"({"outcomes": "drop"})"),
              "outcomes: found \"drop\", expected a list such as [\"drop\", \"tx\"]");
    EXPECT_EQ(error(R"({"outcomes": ["drop", 3]})"), "outcomes[1]: found 3, expected a string");
    EXPECT_EQ(error(R"({"snaplen": 10, "cuont": 5})"),
              "cuont: unknown key; did you mean \"count\"?");
}

// ---- three-way comparison of VIP lists ---------------------------------------------

VipSpec merge_vip(std::uint16_t port) {
    VipSpec v;
    v.address = *net::IpAddress::parse("198.51.100.10");
    v.port = port;
    for (const char* a : {"203.0.113.11", "203.0.113.12"}) {
        BackendSpec b;
        b.address = *net::IpAddress::parse(a);
        v.backends.push_back(b);
    }
    return v;
}

TEST(VipMerge, SaysWhichSideChangedEachVip) {
    const VipSpec a = merge_vip(80), b = merge_vip(81), c = merge_vip(82);
    VipSpec a2 = a, b2 = b, b3 = b;
    a2.ring_size = 257;
    b2.backends[0].weight = 1;
    b3.backends[0].weight = 2;
    // (the entries point into the lists)
    const std::vector<VipSpec> base = {a, b, c}, file = {a2, b2, c}, running = {a, b3};
    const auto w = compare_three_way(&base, file, running);
    ASSERT_EQ(w.size(), 3u);
    EXPECT_EQ(w[0].key, a.key());
    EXPECT_TRUE(w[0].file_changed && !w[0].runtime_changed && !w[0].conflict());
    EXPECT_TRUE(w[1].file_changed && w[1].runtime_changed && w[1].conflict());
    EXPECT_EQ(w[2].key, c.key());
    EXPECT_TRUE(!w[2].file_changed && w[2].runtime_changed && !w[2].conflict());
    EXPECT_EQ(w[2].running, nullptr);

    // both sides made the same change: no conflict
    const std::vector<VipSpec> both = {a, b2, c};
    const auto same = compare_three_way(&base, both, both);
    EXPECT_TRUE(same[1].file_changed && same[1].runtime_changed);
    EXPECT_FALSE(same[1].conflict());
    // no base: a difference is a conflict, agreement is not
    const std::vector<VipSpec> edited = {a2, b, c};
    const auto unknown = compare_three_way(nullptr, edited, base);
    EXPECT_TRUE(unknown[0].conflict());
    EXPECT_FALSE(unknown[1].conflict());
    EXPECT_EQ(unknown[0].base, nullptr);
}

TEST(VipMerge, DifferencesNameTheFieldAsTheFileDoes) {
    const VipSpec a = merge_vip(80);
    VipSpec b = a;
    b.ring_size = 257;
    b.health_check.interval = Duration{2'000};
    b.backends[0].state = AdminState::kDrain;
    b.backends.pop_back();
    BackendSpec extra;
    extra.address = *net::IpAddress::parse("203.0.113.40");
    b.backends.push_back(extra);
    EXPECT_EQ(describe_differences(a.key(), &b, &a),
              (std::vector<std::string>{
                  "VIP 198.51.100.10:80/tcp: health_check.interval 2s at runtime, 10s in the file",
                  "VIP 198.51.100.10:80/tcp: ring_size 257 at runtime, 65537 in the file",
                  "VIP 198.51.100.10:80/tcp backend 203.0.113.11: state drain at runtime, active "
                  "in the file",
                  "VIP 198.51.100.10:80/tcp backend 203.0.113.40: at runtime, not in the file",
                  "VIP 198.51.100.10:80/tcp backend 203.0.113.12: in the file, not at runtime"}));
    EXPECT_EQ(describe_differences(a.key(), nullptr, &a),
              std::vector<std::string>{"VIP 198.51.100.10:80/tcp: in the file, not at runtime"});
    EXPECT_TRUE(describe_differences(a.key(), &a, &a).empty());
}

}  // namespace
}  // namespace xlb::config

// Addresses print as the operator writes them and order as their bytes do
// (family first): the agent's maps and the Maglev identities rely on both.
namespace xlb::net {
namespace {

TEST(IpAddressText, PrintsEveryOctetWidthAndRoundTrips) {
    for (const char* text : {"0.0.0.0", "1.2.3.4", "10.0.0.1", "99.100.101.255", "203.0.113.11",
                             "255.255.255.255", "2001:db8::1", "::", "::ffff:10.0.0.1"}) {
        auto a = IpAddress::parse(text);
        ASSERT_TRUE(a) << text;
        EXPECT_EQ(a->to_string(), text);
    }
    for (unsigned octet = 0; octet < 256; ++octet) {
        const auto a = IpAddress::v4(static_cast<std::uint8_t>(octet), 0, 9, 10);
        EXPECT_EQ(a.to_string(), std::to_string(octet) + ".0.9.10");
    }
}

TEST(IpAddressOrder, FamilyThenBytes) {
    auto ip = [](const char* t) { return *IpAddress::parse(t); };
    EXPECT_LT(ip("10.0.0.1"), ip("10.0.0.2"));
    EXPECT_LT(ip("9.255.255.255"), ip("10.0.0.0"));
    EXPECT_LT(ip("255.255.255.255"), ip("::"));  // every IPv4 before every IPv6
    EXPECT_LT(ip("2001:db8::1"), ip("2001:db8::1:0"));
    EXPECT_LT(ip("2001:db8:0:0:ffff::"), ip("2001:db8:0:1::"));  // the second word decides
    EXPECT_EQ(ip("2001:db8::1"), ip("2001:0db8::0001"));
    EXPECT_NE(ip("2001:db8::1"), ip("2001:db8::2"));
    EXPECT_EQ(ip("10.0.0.1") <=> ip("10.0.0.1"), std::strong_ordering::equal);
}

}  // namespace
}  // namespace xlb::net
