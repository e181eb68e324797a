// SPDX-License-Identifier: Apache-2.0
// xlbctl's argument parsing and validation, verb by verb: what a valid line
// becomes, and the message (what is wrong, an example of what is right) for
// each kind of invalid one. Nothing here touches a socket.
#include "xlb/xlbctl/command.h"

#include <gtest/gtest.h>

#include <cctype>
#include <cstdio>
#include <fstream>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <ostream>
#include <set>
#include <sstream>

#include "xlb/config/json.h"
#include "xlb/xlbctl/request.h"
#include "xlb/xlbctl/verbs.h"
#include "xlb/xlbctl/vip_settings.h"

namespace xlb::xlbctl {
namespace {

using Args = std::vector<std::string>;

struct Env {
    std::map<std::string, std::string> vars;
    GetEnv get() const {
        return [this](const char* name) -> const char* {
            auto it = vars.find(name);
            return it == vars.end() ? nullptr : it->second.c_str();
        };
    }
};

Command parse_ok(const Args& args, const Env& env = {}) {
    ParseResult r = parse_command(args, env.get());
    if (auto* e = std::get_if<ParseExit>(&r)) {
        ADD_FAILURE() << "expected a command, got exit " << e->code << ": " << e->error;
        return {};
    }
    return std::get<Command>(r);
}

// The usage error for args (exit code 2, as in every xlb tool), or "" with a failure.
std::string parse_error(const Args& args, const Env& env = {}) {
    ParseResult r = parse_command(args, env.get());
    if (auto* e = std::get_if<ParseExit>(&r)) {
        EXPECT_EQ(e->code, 2);
        EXPECT_TRUE(e->out.empty());
        EXPECT_EQ(e->error.find('\n'), std::string::npos) << "one line: " << e->error;
        return e->error;
    }
    ADD_FAILURE() << "expected a usage error for the line";
    return "";
}

#define EXPECT_HAS(text, part) EXPECT_NE((text).find(part), std::string::npos) << (text)

TEST(XlbctlParse, CommonOptionsBeforeOrAfterTheVerb) {
    Command a = parse_ok({"--json", "--socket", "/tmp/a.sock", "status"});
    EXPECT_EQ(a.verb, Verb::kStatus);
    EXPECT_TRUE(a.json);
    EXPECT_EQ(a.socket, "/tmp/a.sock");
    Command b = parse_ok({"vip", "list", "--json", "--socket", "/tmp/b.sock", "--timeout", "2.5"});
    EXPECT_EQ(b.verb, Verb::kVipList);
    EXPECT_TRUE(b.json);
    EXPECT_EQ(b.socket, "/tmp/b.sock");
    EXPECT_EQ(b.timeout, std::chrono::milliseconds(2500));
    Command c = parse_ok({"backend", "--json", "list", "198.51.100.10:80"});
    EXPECT_TRUE(c.json);
}

TEST(XlbctlParse, SocketDefaultEnvironmentAndOption) {
    EXPECT_EQ(parse_ok({"status"}).socket, "/run/xlb/xlbd.sock");
    Env env{{{"XLB_SOCKET", "/tmp/env.sock"}}};
    EXPECT_EQ(parse_ok({"status"}, env).socket, "/tmp/env.sock");
    EXPECT_EQ(parse_ok({"status", "--socket", "/tmp/opt.sock"}, env).socket, "/tmp/opt.sock");
    Env empty{{{"XLB_SOCKET", ""}}};
    EXPECT_EQ(parse_ok({"status"}, empty).socket, "/run/xlb/xlbd.sock");
}

TEST(XlbctlParse, SocketPathTooLong) {
    const std::string path = "/tmp/" + std::string(120, 's');
    std::string e = parse_error({"status", "--socket", path});
    EXPECT_HAS(e, "--socket: found a path of 125 bytes, expected at most 107");
    EXPECT_HAS(e, "e.g. --socket /run/xlb/xlbd.sock");
    Env env{{{"XLB_SOCKET", path}}};
    EXPECT_HAS(parse_error({"status"}, env), "XLB_SOCKET: found a path of 125 bytes");
}

TEST(XlbctlParse, Timeout) {
    std::string e = parse_error({"status", "--timeout", "soon"});
    EXPECT_HAS(e,
               "--timeout: found 'soon', expected seconds or a duration of 100ms to 1h, e.g. "
               "--timeout 10s");
    EXPECT_HAS(parse_error({"status", "--timeout", "0"}), "of 100ms to 1h");
    EXPECT_HAS(parse_error({"status", "--timeout", "2h"}), "of 100ms to 1h");
    // One form in every verb: seconds alone or a duration.
    EXPECT_EQ(parse_ok({"status", "--timeout", "1500ms"}).timeout, std::chrono::milliseconds(1500));
    EXPECT_EQ(parse_ok({"capture", "-w", "-", "--timeout", "2m"}).timeout, std::chrono::minutes(2));
    EXPECT_EQ(parse_ok({"backend", "drain", "198.51.100.10:80", "203.0.113.11", "--wait",
                        "--timeout", "20s"})
                  .timeout,
              std::chrono::seconds(20));
}

// A short option means one thing in every verb: -w is --write (capture), and
// stats has --watch alone.
// --reason: every verb, before or after it, without a fleet too (the agent
// records it with the audit entry); one line within the agent's limit.
TEST(XlbctlParse, ReasonIsACommonOption) {
    EXPECT_EQ(parse_ok({"--reason", "kernel upgrade", "backend", "drain", "198.51.100.10:80",
                        "203.0.113.11"})
                  .reason,
              "kernel upgrade");
    EXPECT_EQ(parse_ok({"reload", "--reason", "new pool"}).reason, "new pool");
    EXPECT_EQ(parse_ok({"status"}).reason, "");
    EXPECT_HAS(parse_error({"reload", "--reason", "two\nlines"}),
               "--reason: found a control character");
    EXPECT_HAS(parse_error({"reload", "--reason", std::string(1025, 'x')}),
               "--reason: found 1025 bytes, expected at most 1024");
}

TEST(XlbctlParse, OneMeaningPerFlag) {
    EXPECT_HAS(parse_error({"stats", "-w", "2"}), "-w");
    EXPECT_EQ(parse_ok({"capture", "-w", "out.pcap"}).write_to, "out.pcap");
    EXPECT_EQ(parse_ok({"capture", "--write", "out.pcap"}).write_to, "out.pcap");
}

TEST(XlbctlParse, MissingVerb) {
    EXPECT_HAS(
        parse_error({}),
        "expected a verb after 'xlbctl': status, host, vip, backend, conntrack, capture, top, "
        "stats, table, lookup, quic, reload, export, diff, fleet or gen-seed");
    EXPECT_HAS(parse_error({"conntrack"}),
               "expected a verb after 'xlbctl conntrack': count, list or flush");
    EXPECT_HAS(parse_error({"vip"}), "expected a verb after 'xlbctl vip': list, add, set or del");
    EXPECT_HAS(parse_error({"backend"}),
               "expected a verb after 'xlbctl backend': list, add, del, set, drain, enable, "
               "disable or history");
}

// diff reads FILE before anything is sent and sends its text for a dry
// run; a file it cannot read is a usage error (exit 2), as diff(1)'s trouble.
TEST(XlbctlParse, DiffSendsItsFilesTextAndExportItsOutput) {
    const std::string path = ::testing::TempDir() + "/xlbctl-diff-test.yaml";
    std::ofstream(path) << "interface: eth0\n";
    const Command c = parse_ok({"diff", path});
    EXPECT_EQ(c.file_text, "interface: eth0\n");
    const HttpRequest r = build_request(c);
    EXPECT_EQ(r.method, "POST");
    EXPECT_EQ(r.target, "/v1/reload?dry_run=1");
    EXPECT_EQ(nlohmann::json::parse(r.body),
              (nlohmann::json{{"config", "interface: eth0\n"}, {"file", path}}));
    std::remove(path.c_str());
    EXPECT_HAS(parse_error({"diff", path}), path + ": no such file");
    EXPECT_HAS(parse_error({"diff"}), "FILE");

    EXPECT_EQ(parse_ok({"export", "-o", "/tmp/x.yaml"}).output, "/tmp/x.yaml");
    EXPECT_EQ(build_request(parse_ok({"export"})).target, "/v1/config/export");
}

TEST(XlbctlParse, TyposGetTheClosestVerbOrOption) {
    EXPECT_HAS(parse_error({"stauts"}),
               "unknown verb 'stauts' after 'xlbctl': did you mean status?");
    EXPECT_HAS(parse_error({"stauts"}), "xlbctl --help shows usage and examples");
    EXPECT_HAS(parse_error({"backend", "ad", "198.51.100.10:80", "203.0.113.11"}),
               "unknown verb 'ad' after 'xlbctl backend': did you mean add?");
    EXPECT_HAS(parse_error({"conntrack", "cuont"}), "did you mean count?");
    // nothing close: the verbs there are
    EXPECT_HAS(parse_error({"frobnicate"}),
               "unknown verb 'frobnicate' after 'xlbctl': expected status, host, vip, backend, "
               "conntrack, capture, top, stats, table, lookup, quic, reload, export, diff, fleet "
               "or gen-seed");
    EXPECT_HAS(parse_error({"status", "--jsn"}),
               "unknown option '--jsn' for 'xlbctl status': did you mean --json?");
    EXPECT_HAS(parse_error({"stats", "--wacth=2"}), "did you mean --watch?");
    // too far from anything: the parser's own message
    EXPECT_HAS(parse_error({"status", "--zzzzzz"}), "--zzzzzz");
    EXPECT_EQ(parse_error({"status", "--zzzzzz"}).find("did you mean"), std::string::npos);
}

TEST(XlbctlParse, UnknownArgumentsNameTheHelp) {
    std::string e = parse_error({"status", "--colour"});
    EXPECT_HAS(e, "--colour");
    EXPECT_HAS(e, "xlbctl status --help shows usage and examples");
    EXPECT_HAS(parse_error({"backend", "add", "198.51.100.10:80"}), "ADDR is required");
    EXPECT_HAS(parse_error({"lookup", "198.51.100.10:80"}), "--src is required");
    EXPECT_HAS(parse_error({"backend", "set", "198.51.100.10:80", "203.0.113.11"}),
               "--weight, --cookie-acks or --server-id is required");
}

// --server-id: add N; set N, or none to clear it; checked by the agent
// against the VIP's quic configs, which only it has.
TEST(XlbctlParse, BackendServerId) {
    Command add =
        parse_ok({"backend", "add", "198.51.100.10:443/udp", "203.0.113.11", "--server-id", "7"});
    ASSERT_TRUE(add.server_id);
    EXPECT_EQ(*add.server_id, 7u);
    EXPECT_EQ(nlohmann::json::parse(build_request(add).body),
              nlohmann::json::parse(R"({"address": "203.0.113.11", "server_id": 7})"));
    EXPECT_FALSE(parse_ok({"backend", "add", "198.51.100.10:80", "203.0.113.11"}).server_id);
    Command set = parse_ok({"backend", "set", "198.51.100.10:443/udp", "203.0.113.11",
                            "--server-id", "18446744073709551615"});
    EXPECT_EQ(build_request(set).body, R"({"server_id":18446744073709551615})");
    Command cleared = parse_ok(
        {"backend", "set", "198.51.100.10:443/udp", "203.0.113.11", "--server-id", "none"});
    ASSERT_TRUE(cleared.server_id);
    EXPECT_FALSE(*cleared.server_id);
    EXPECT_EQ(build_request(cleared).body, R"({"server_id":null})");
    const std::string bad = parse_error(
        {"backend", "set", "198.51.100.10:443/udp", "203.0.113.11", "--server-id", "-1"});
    EXPECT_HAS(bad, "--server-id: found '-1', expected a non-negative integer");
    EXPECT_HAS(bad, "or none (to clear it)");
    EXPECT_HAS(parse_error({"backend", "add", "198.51.100.10:443/udp", "203.0.113.11",
                            "--server-id", "none"}),
               "--server-id: found 'none', expected a non-negative integer");
}

// --quic SPEC: the file's keys as key=value, configs separated by ';'.
TEST(XlbctlParse, VipQuic) {
    Command c = parse_ok({"vip", "add", "198.51.100.10:443/udp", "--quic",
                          "server_id_length=2,nonce_length=8,config_id=1;"
                          "server_id_length=1,nonce_length=6"});
    ASSERT_EQ(c.spec.quic.size(), 2u);
    EXPECT_EQ(c.spec.quic[0], (config::QuicConfig{1, 2, 8, config::QuicMode::kPlaintext, ""}));
    EXPECT_EQ(c.spec.quic[1], (config::QuicConfig{0, 1, 6, config::QuicMode::kPlaintext, ""}));
    EXPECT_EQ(nlohmann::json::parse(build_request(c).body)["quic"].size(), 2u);
    EXPECT_EQ(settings_object({{"quic",
                                "server_id_length=2,nonce_length=8,mode=encrypted,"
                                "key_file=/etc/xlb/quic.key"}}),
              nlohmann::json::parse(R"({"quic": [{"server_id_length": 2, "nonce_length": 8,
                  "mode": "encrypted", "key_file": "/etc/xlb/quic.key"}]})"));
    EXPECT_EQ(settings_object({{"quic", ""}}), nlohmann::json::parse(R"({"quic": []})"))
        << "\"\" turns it off";
    Command set = parse_ok(
        {"vip", "set", "198.51.100.10:443/udp", "--quic", "server_id_length=2,nonce_length=8"});
    EXPECT_EQ(nlohmann::json::parse(build_request(set).body),
              nlohmann::json::parse(R"({"quic": [{"server_id_length": 2, "nonce_length": 8}]})"));
    // Refused as the file refuses it, with the option named.
    EXPECT_HAS(parse_error({"vip", "add", "198.51.100.10:443/udp", "--quic",
                            "server_id_length=2,nonce_length=30"}),
               "--quic: found 30, expected 4-18");
    EXPECT_HAS(parse_error({"vip", "add", "198.51.100.10:443/tcp", "--quic",
                            "server_id_length=2,nonce_length=8"}),
               "--quic: found on a tcp VIP, expected quic only on udp VIPs");
    EXPECT_HAS(parse_error({"vip", "add", "198.51.100.10:443/udp", "--quic", "nonce_length=8"}),
               "--quic: missing, expected the server id's length in octets");
    EXPECT_HAS(parse_error({"vip", "add", "198.51.100.10:443/udp", "--quic", "two"}),
               "--quic: found \"two\", expected an object");
    EXPECT_HAS(parse_error({"vip", "set", "198.51.100.10:443/udp", "--quic",
                            "server_id_length=2,nonce_length=8,mode=aes"}),
               "expected plaintext or encrypted");
}

TEST(XlbctlParse, VipKeys) {
    Command c = parse_ok({"table", "198.51.100.10:80"});
    EXPECT_EQ(c.vip, "198.51.100.10:80/tcp") << "normalised, tcp by default";
    EXPECT_EQ(parse_ok({"table", "[2001:db8::10]:443/udp"}).vip, "[2001:db8::10]:443/udp");
    EXPECT_EQ(parse_ok({"table", "198.51.100.20:0/tcp"}).vip, "198.51.100.20:0/tcp");

    std::string e = parse_error({"table", "198.51.100.10"});
    EXPECT_HAS(e, "VIP: '198.51.100.10' is not a VIP");
    EXPECT_HAS(e, "e.g. 198.51.100.10:80/tcp or [2001:db8::10]:443/udp");
    EXPECT_HAS(parse_error({"table", "198.51.100.10:80/sctp"}),
               "protocol 'sctp' is neither tcp nor udp");
    EXPECT_HAS(parse_error({"table", "198.51.100.10:70000"}),
               "'70000' is not a port (expected 0-65535)");
    EXPECT_HAS(parse_error({"table", "198.51.100.300:80"}), "is not an IPv4 address");
    EXPECT_HAS(parse_error({"table", "2001:db8::10:80"}), "is not a VIP");
}

TEST(XlbctlParse, VipListQuiet) {
    EXPECT_FALSE(parse_ok({"vip", "list"}).quiet);
    EXPECT_TRUE(parse_ok({"vip", "list", "-q"}).quiet);
    EXPECT_TRUE(parse_ok({"backend", "list", "198.51.100.10:80", "--quiet"}).quiet);
}

TEST(XlbctlParse, VipAdd) {
    Command c = parse_ok({"vip", "add", "10.0.0.10:80/tcp", "--hash", "5tuple", "--ring-size",
                          "65537", "--name", "web", "--no-conntrack", "--panic-threshold", "0.25",
                          "--backend", "10.0.1.1", "-b", "10.0.1.2=50"});
    EXPECT_EQ(c.verb, Verb::kVipAdd);
    EXPECT_EQ(c.vip, "10.0.0.10:80/tcp");
    EXPECT_EQ(c.spec.address.to_string(), "10.0.0.10");
    EXPECT_EQ(c.spec.port, 80);
    EXPECT_EQ(c.spec.name, "web");
    EXPECT_EQ(c.spec.hash, config::HashMode::kFiveTuple);
    EXPECT_EQ(c.spec.ring_size, 65537u);
    EXPECT_FALSE(c.spec.conntrack);
    EXPECT_DOUBLE_EQ(c.spec.panic_threshold, 0.25);
    ASSERT_EQ(c.spec.backends.size(), 2u);
    EXPECT_EQ(c.spec.backends[0].weight, 100u);
    EXPECT_EQ(c.spec.backends[1].address.to_string(), "10.0.1.2");
    EXPECT_EQ(c.spec.backends[1].weight, 50u);

    Command d = parse_ok({"vip", "add", "[2001:db8::10]:53/udp", "--hash", "source"});
    EXPECT_EQ(d.spec.protocol, config::Protocol::kUdp);
    EXPECT_EQ(d.spec.hash, config::HashMode::kSourceIp);
    EXPECT_TRUE(d.spec.conntrack);
    EXPECT_EQ(d.spec.ring_size, 65537u) << "the default";
    EXPECT_EQ(parse_ok({"vip", "add", "198.51.100.20:0"}).spec.port, 0) << "every port";
}

TEST(XlbctlParse, VipDel) {
    Command c = parse_ok({"vip", "del", "10.0.0.10:80"});
    EXPECT_EQ(c.verb, Verb::kVipDel);
    EXPECT_EQ(c.vip, "10.0.0.10:80/tcp");
    EXPECT_HAS(parse_error({"vip", "del"}), "VIP is required");
}

TEST(XlbctlParse, BackendVerbs) {
    struct Case {
        const char* verb;
        Verb expected;
    } cases[] = {{"list", Verb::kBackendList},      {"add", Verb::kBackendAdd},
                 {"del", Verb::kBackendDel},        {"drain", Verb::kBackendDrain},
                 {"enable", Verb::kBackendEnable},  {"disable", Verb::kBackendDisable},
                 {"history", Verb::kBackendHistory}};
    for (const Case& c : cases) {
        Args args = {"backend", c.verb, "198.51.100.10:80"};
        if (c.expected != Verb::kBackendList) args.push_back("203.0.113.11");
        Command cmd = parse_ok(args);
        EXPECT_EQ(cmd.verb, c.expected) << c.verb;
        EXPECT_EQ(cmd.vip, "198.51.100.10:80/tcp");
        if (c.expected != Verb::kBackendList) {
            EXPECT_EQ(cmd.backend.to_string(), "203.0.113.11");
        }
    }
    Command set = parse_ok({"backend", "set", "198.51.100.10:80", "203.0.113.11", "--weight", "0"});
    EXPECT_EQ(set.verb, Verb::kBackendSet);
    EXPECT_EQ(set.weight, 0u);
    Command add = parse_ok({"backend", "add", "198.51.100.10:80", "203.0.113.11", "--weight",
                            "10000", "--hash-key", "web-1"});
    EXPECT_EQ(add.weight, 10000u);
    EXPECT_EQ(add.hash_key, "web-1");
    EXPECT_FALSE(parse_ok({"backend", "add", "198.51.100.10:80", "203.0.113.11"}).weight)
        << "no --weight: the agent's default";
    Command v6 = parse_ok({"backend", "add", "[2001:db8::10]:443", "2001:db8:b::11"});
    EXPECT_EQ(v6.backend.to_string(), "2001:db8:b::11");
    // IPv4 VIP, IPv6 backend: IPv4-in-IPv6 is supported.
    EXPECT_EQ(parse_ok({"backend", "add", "198.51.100.10:80", "2001:db8:b::11"}).backend.family, 6);
}

// add: --cookie-acks is a flag; set: --cookie-acks true|false, with or
// without --weight, and only what was given is sent.
TEST(XlbctlParse, BackendCookieAcks) {
    Command add = parse_ok({"backend", "add", "198.51.100.10:80", "203.0.113.11", "--cookie-acks"});
    EXPECT_EQ(add.cookie_acks, true);
    EXPECT_EQ(nlohmann::json::parse(build_request(add).body),
              nlohmann::json::parse(R"({"address": "203.0.113.11", "cookie_acks": true})"));
    EXPECT_FALSE(parse_ok({"backend", "add", "198.51.100.10:80", "203.0.113.11"}).cookie_acks)
        << "not given: the agent's default";
    Command off =
        parse_ok({"backend", "set", "198.51.100.10:80", "203.0.113.11", "--cookie-acks", "false"});
    EXPECT_EQ(off.cookie_acks, false);
    EXPECT_FALSE(off.weight);
    EXPECT_EQ(build_request(off).body, R"({"cookie_acks":false})");
    Command both = parse_ok({"backend", "set", "198.51.100.10:80", "203.0.113.11", "--weight", "5",
                             "--cookie-acks", "true"});
    EXPECT_EQ(nlohmann::json::parse(build_request(both).body),
              nlohmann::json::parse(R"({"weight": 5, "cookie_acks": true})"));
    const std::string bad =
        parse_error({"backend", "set", "198.51.100.10:80", "203.0.113.11", "--cookie-acks", "yes"});
    EXPECT_HAS(bad, "--cookie-acks: found 'yes', expected true or false");
    EXPECT_HAS(bad, "--cookie-acks true");
    // A flag of add, a value of set: neither takes the other's form.
    EXPECT_NE(parse_error(
                  {"backend", "add", "198.51.100.10:80", "203.0.113.11", "--cookie-acks", "true"}),
              "");
    EXPECT_HAS(parse_error({"backend", "set", "198.51.100.10:80", "203.0.113.11", "--cookie-acks"}),
               "--cookie-acks");
}

TEST(XlbctlParse, Stats) {
    Command all = parse_ok({"stats"});
    EXPECT_EQ(all.verb, Verb::kStats);
    EXPECT_TRUE(all.vip.empty());
    EXPECT_FALSE(all.watch_seconds);

    Command one = parse_ok({"stats", "198.51.100.10:80"});
    EXPECT_EQ(one.vip, "198.51.100.10:80/tcp");

    EXPECT_EQ(parse_ok({"stats", "--watch"}).watch_seconds, 2.0) << "default interval";
    EXPECT_EQ(parse_ok({"stats", "--watch", "0.5"}).watch_seconds, 0.5);
    Command w = parse_ok({"stats", "198.51.100.10:80", "--watch", "5", "--count", "3"});
    EXPECT_EQ(w.vip, "198.51.100.10:80/tcp");
    EXPECT_EQ(w.watch_seconds, 5.0);
    EXPECT_EQ(w.count, 3u);
    // --watch without SECS before the VIP: the VIP is not taken for SECS.
    Command v = parse_ok({"stats", "--watch", "198.51.100.10:80"});
    EXPECT_EQ(v.vip, "198.51.100.10:80/tcp");
    EXPECT_EQ(v.watch_seconds, 2.0);
}

TEST(XlbctlParse, Table) {
    EXPECT_EQ(parse_ok({"table", "198.51.100.10:80/tcp"}).verb, Verb::kTable);
}

TEST(XlbctlParse, Lookup) {
    Command c = parse_ok({"lookup", "198.51.100.10:80", "--src", "192.0.2.7:40000"});
    EXPECT_EQ(c.verb, Verb::kLookup);
    EXPECT_EQ(c.src.to_string(), "192.0.2.7:40000");
    EXPECT_FALSE(c.proto);
    EXPECT_FALSE(c.dport);

    Command udp =
        parse_ok({"lookup", "198.51.100.10:53", "--proto", "udp", "--src", "192.0.2.7:5353"});
    EXPECT_EQ(udp.vip, "198.51.100.10:53/udp") << "--proto names the VIP's protocol";
    Command same =
        parse_ok({"lookup", "198.51.100.10:53/udp", "--proto", "udp", "--src", "192.0.2.7:1"});
    EXPECT_EQ(same.vip, "198.51.100.10:53/udp");

    Command wild =
        parse_ok({"lookup", "198.51.100.20:0", "--src", "192.0.2.7:1", "--dport", "443"});
    EXPECT_EQ(wild.dport, 443);
    EXPECT_EQ(
        parse_ok({"lookup", "198.51.100.10:80", "--src", "192.0.2.7:1", "--dport", "80"}).dport,
        80);
    Command v6 = parse_ok({"lookup", "[2001:db8::10]:443", "--src", "[2001:db8:c::7]:40000"});
    EXPECT_EQ(v6.src.address.family, 6);
}

TEST(XlbctlParse, LookupByConnectionId) {
    Command c = parse_ok({"lookup", "198.51.100.10:443/udp", "--src", "192.0.2.7:5353", "--cid",
                          "0x28:00:65:01:02:03:04:05:06"});
    EXPECT_EQ(c.cid, (std::vector<std::uint8_t>{0x28, 0x00, 0x65, 1, 2, 3, 4, 5, 6}));
    EXPECT_EQ(build_request(c).target,
              "/v1/lookup?vip=198.51.100.10%3A443%2Fudp&src=192.0.2.7%3A5353"
              "&cid=280065010203040506");
    EXPECT_EQ(
        build_request(parse_ok({"lookup", "198.51.100.10:443/udp", "--src", "192.0.2.7:5353"}))
            .target.find("cid"),
        std::string::npos);
}

// The usage errors: a command line xlbctl refuses (exit 2, one line), and
// fragments its message must contain.
struct UsageError {
    std::string name;  // the test's name: letters, digits, '_'
    Args args;
    std::vector<std::string> says;
};

void PrintTo(const UsageError& c, std::ostream* os) { *os << c.name; }

class XlbctlUsageErrors : public ::testing::TestWithParam<UsageError> {};

TEST_P(XlbctlUsageErrors, SayWhatWasFoundAndExpected) {
    const std::string e = parse_error(GetParam().args);
    for (const auto& part : GetParam().says) EXPECT_HAS(e, part);
}

const std::string kHugeHashKey(300, 'k');

INSTANTIATE_TEST_SUITE_P(
    VipAdd, XlbctlUsageErrors,
    ::testing::Values(
        UsageError{"HashUnknown",
                   {"vip", "add", "10.0.0.10:80", "--hash", "round-robin"},
                   {"--hash: found 'round-robin', expected 5tuple"}},
        UsageError{
            "HashExample", {"vip", "add", "10.0.0.10:80", "--hash", "x"}, {"e.g. --hash source"}},
        UsageError{"RingSizeNotANumber",
                   {"vip", "add", "10.0.0.10:80", "--ring-size", "big"},
                   {"--ring-size: found 'big', expected a prime number of table slots, e.g. "
                    "--ring-size 65537"}},
        UsageError{"RingSizeNotPrime",
                   {"vip", "add", "10.0.0.10:80", "--ring-size", "1000"},
                   {"--ring-size: ring size 1000 is not prime", "1009"}},
        UsageError{"PanicThresholdAboveOne",
                   {"vip", "add", "10.0.0.10:80", "--panic-threshold", "1.5"},
                   {"--panic-threshold: found '1.5', expected a number 0-1"}},
        UsageError{"PanicThresholdNotANumber",
                   {"vip", "add", "10.0.0.10:80", "--panic-threshold", "half"},
                   {"e.g. --panic-threshold 0.5"}},
        UsageError{"NameWithSpace",
                   {"vip", "add", "10.0.0.10:80", "--name", "my web"},
                   {"--name: found \"my web\", expected at most 64 characters", "e.g. --name web"}},
        UsageError{"NotUnicast",
                   {"vip", "add", "0.0.0.0:80"},
                   {"VIP 0.0.0.0:80/tcp: found 0.0.0.0, expected a unicast address"}},
        UsageError{"BackendWeightNotANumber",
                   {"vip", "add", "10.0.0.10:80", "--backend", "10.0.1.1=heavy"},
                   {"--backend '10.0.1.1=heavy': weight 'heavy' is not an integer 0-10000"}},
        UsageError{"BackendNotAnAddress",
                   {"vip", "add", "10.0.0.10:80", "--backend", "host1"},
                   {"e.g. --backend 203.0.113.11 or --backend 203.0.113.11=50"}},
        UsageError{"BackendOfTheOtherFamily",
                   {"vip", "add", "[2001:db8::10]:80", "--backend", "10.0.1.1"},
                   {"--backend 10.0.1.1: found IPv4 address 10.0.1.1 in an IPv6 VIP"}},
        UsageError{"BackendTwice",
                   {"vip", "add", "10.0.0.10:80", "-b", "10.0.1.1", "-b", "10.0.1.1"},
                   {"again"}},
        UsageError{
            "RingTooSmallForItsBackends",
            {"vip", "add", "10.0.0.10:80", "--ring-size", "13", "-b", "10.0.1.1", "-b", "10.0.1.2"},
            {"--ring-size:"}}),
    [](const auto& info) { return info.param.name; });

INSTANTIATE_TEST_SUITE_P(
    Backend, XlbctlUsageErrors,
    ::testing::Values(
        UsageError{
            "AddressWithPort",
            {"backend", "add", "198.51.100.10:80", "203.0.113.11:8080"},
            {"ADDR: found '203.0.113.11:8080', an address with a port", "e.g. 203.0.113.11"}},
        UsageError{"NotAnAddress",
                   {"backend", "add", "198.51.100.10:80", "server-1"},
                   {"'server-1' is not an IPv4 address (expected e.g. 10.0.0.1)"}},
        UsageError{"IPv4InIPv6Vip",
                   {"backend", "add", "[2001:db8::10]:443", "203.0.113.11"},
                   {"ADDR 203.0.113.11: found IPv4 address 203.0.113.11 in an IPv6 VIP, expected "
                    "an IPv6 address",
                    "e.g. xlbctl backend add [2001:db8::10]:443/tcp 2001:db8:b::11"}},
        UsageError{"TheVipItself",
                   {"backend", "drain", "198.51.100.10:80", "198.51.100.10"},
                   {"the VIP's own address"}},
        UsageError{"Multicast",
                   {"backend", "del", "198.51.100.10:80", "224.0.0.1"},
                   {"expected a unicast address"}},
        UsageError{"WeightTooLarge",
                   {"backend", "set", "198.51.100.10:80", "203.0.113.11", "--weight", "20000"},
                   {"--weight: found 20000, expected 0-10000 (0 takes no new flows), e.g. "
                    "--weight 100"}},
        UsageError{"WeightNegative",
                   {"backend", "set", "198.51.100.10:80", "203.0.113.11", "--weight", "-1"},
                   {"--weight: found '-1', expected an integer 0-10000"}},
        UsageError{"WeightNotAnInteger",
                   {"backend", "add", "198.51.100.10:80", "203.0.113.11", "--weight", "1.5"},
                   {"--weight: found '1.5'"}},
        UsageError{
            "HashKeyTooLong",
            {"backend", "add", "198.51.100.10:80", "203.0.113.11", "--hash-key", kHugeHashKey},
            {"--hash-key: found"}},
        UsageError{"HistoryWithoutBackend",
                   {"backend", "history", "198.51.100.10:80"},
                   {"ADDR is required"}},
        UsageError{"HistoryOfIPv4InIPv6Vip",
                   {"backend", "history", "[2001:db8::10]:443", "203.0.113.11"},
                   {"ADDR 203.0.113.11: found IPv4 address 203.0.113.11 in an IPv6 VIP",
                    "e.g. xlbctl backend history [2001:db8::10]:443/tcp 2001:db8:b::11"}},
        UsageError{"HistoryTakesNoDryRun",
                   {"backend", "history", "198.51.100.10:80", "203.0.113.11", "--dry-run"},
                   {"--dry-run"}}),
    [](const auto& info) { return info.param.name; });

INSTANTIATE_TEST_SUITE_P(
    Stats, XlbctlUsageErrors,
    ::testing::Values(
        UsageError{"WatchZero",
                   {"stats", "--watch", "0"},
                   {"--watch: found '0', expected seconds 0.1-3600, e.g. --watch 2"}},
        UsageError{"WatchNotANumber",
                   {"stats", "198.51.100.10:80", "--watch", "fast"},
                   {"--watch: found 'fast'"}},
        UsageError{"CountZero",
                   {"stats", "--watch", "1", "--count", "0"},
                   {"--count: found '0', expected a number of refreshes >= 1"}},
        UsageError{"CountWithoutWatch", {"stats", "--count", "3"}, {"--count 3 without --watch"}},
        UsageError{"NotAVip", {"stats", "nowhere:80"}, {"VIP:"}},
        UsageError{"TableWithoutVip", {"table"}, {"VIP is required"}}),
    [](const auto& info) { return info.param.name; });

INSTANTIATE_TEST_SUITE_P(
    Lookup, XlbctlUsageErrors,
    ::testing::Values(
        UsageError{"SourceWithoutPort",
                   {"lookup", "198.51.100.10:80", "--src", "192.0.2.7"},
                   {"--src: '192.0.2.7' is not an endpoint (expected e.g. 10.0.0.1:80"}},
        UsageError{"SourcePortTooLarge",
                   {"lookup", "198.51.100.10:80", "--src", "192.0.2.7:99999"},
                   {"--src: '99999' is not a port (expected 0-65535)"}},
        UsageError{"IPv6ClientOfIPv4Vip",
                   {"lookup", "198.51.100.10:80", "--src", "[2001:db8:c::7]:40000"},
                   {"--src: found an IPv6 client [2001:db8:c::7]:40000 for the IPv4 VIP "
                    "198.51.100.10:80/tcp, expected an IPv4 address and port, e.g. --src "
                    "192.0.2.7:40000"}},
        UsageError{"IPv4ClientOfIPv6Vip",
                   {"lookup", "[2001:db8::10]:443", "--src", "192.0.2.7:1"},
                   {"e.g. --src [2001:db8:c::7]:40000"}},
        UsageError{"UnknownProtocol",
                   {"lookup", "198.51.100.10:80", "--src", "192.0.2.7:1", "--proto", "sctp"},
                   {"--proto: found 'sctp', expected tcp or udp, e.g. --proto udp"}},
        UsageError{"ProtocolOtherThanTheVips",
                   {"lookup", "198.51.100.10:80/tcp", "--src", "192.0.2.7:1", "--proto", "udp"},
                   {"--proto: found udp, but VIP 198.51.100.10:80/tcp is tcp"}},
        UsageError{"WildcardVipWithoutPort",
                   {"lookup", "198.51.100.20:0", "--src", "192.0.2.7:1"},
                   {"VIP 198.51.100.20:0/tcp serves every port: --dport is required, e.g. xlbctl "
                    "lookup 198.51.100.20:0/tcp --src 192.0.2.7:40000 --dport 443"}},
        UsageError{"PortOtherThanTheVips",
                   {"lookup", "198.51.100.10:80", "--src", "192.0.2.7:1", "--dport", "81"},
                   {"--dport: found 81, but VIP 198.51.100.10:80/tcp serves port 80 only"}},
        UsageError{"PortZero",
                   {"lookup", "198.51.100.20:0", "--src", "192.0.2.7:1", "--dport", "0"},
                   {"--dport: found '0', expected a port 1-65535, e.g. --dport 443"}},
        UsageError{"PortTooLarge",
                   {"lookup", "198.51.100.20:0", "--src", "192.0.2.7:1", "--dport", "65536"},
                   {"expected a port 1-65535"}},
        UsageError{"CidNotHex",
                   {"lookup", "198.51.100.10:443/udp", "--src", "192.0.2.7:1", "--cid", "28zz"},
                   {"--cid: ", "e.g. --cid 280102a1b2c3d4e5f6"}},
        UsageError{"CidTooLong",
                   {"lookup", "198.51.100.10:443/udp", "--src", "192.0.2.7:1", "--cid",
                    "000102030405060708090a0b0c0d0e0f1011121314"},
                   {"--cid: found 21 octets, expected 1 to 20 (a QUIC connection ID)"}}),
    [](const auto& info) { return info.param.name; });

INSTANTIATE_TEST_SUITE_P(
    Conntrack, XlbctlUsageErrors,
    ::testing::Values(
        UsageError{"FlushWithoutSelector",
                   {"conntrack", "flush"},
                   {"conntrack flush: expected at least one selector, --vip V, --backend ADDR, "
                    "--client CIDR or --stale",
                    "e.g. xlbctl conntrack flush --stale --dry-run"}},
        UsageError{"FlushDryRunAloneIsNoSelector",
                   {"conntrack", "flush", "--dry-run"},
                   {"expected at least one selector"}},
        UsageError{"VipNotAKey", {"conntrack", "count", "--vip", "web"}, {"--vip: "}},
        UsageError{"BackendWithPort",
                   {"conntrack", "list", "--backend", "203.0.113.11:80"},
                   {"--backend: found '203.0.113.11:80', an address with a port"}},
        UsageError{"IPv4BackendOfIPv6Vip",
                   {"conntrack", "count", "--vip", "[2001:db8::10]:443", "--backend", "10.0.1.1"},
                   {"--backend: found IPv4 address 10.0.1.1 for the IPv6 VIP "
                    "[2001:db8::10]:443/tcp (its backends are IPv6), e.g. --backend "
                    "2001:db8:b::11"}},
        UsageError{"ClientHostBits",
                   {"conntrack", "flush", "--client", "192.0.2.7/24"},
                   {"--client: '192.0.2.7/24' has host bits set", "192.0.2.0/24"}},
        UsageError{
            "ClientNotAPrefix",
            {"conntrack", "list", "--client", "clients"},
            {"--client: 'clients' is not an address or prefix (expected e.g. 192.0.2.0/24)"}},
        UsageError{"ClientOfTheOtherFamily",
                   {"conntrack", "list", "--vip", "[2001:db8::10]:443", "--client", "192.0.2.0/24"},
                   {"--client: found IPv4 prefix 192.0.2.0/24 for the IPv6 VIP",
                    "e.g. --client 2001:db8:c::/48"}},
        UsageError{
            "LimitZero",
            {"conntrack", "list", "--limit", "0"},
            {"--limit: found '0', expected a number of entries 1-100000, e.g. --limit 1000"}},
        UsageError{"LimitTooLarge", {"conntrack", "list", "--limit", "100001"}, {"1-100000"}},
        UsageError{"ActiveWithinWithoutUnit",
                   {"conntrack", "count", "--active-within", "30"},
                   {"--active-within: '30' has no unit", "e.g. --active-within 30s"}},
        UsageError{"ActiveWithinZero",
                   {"conntrack", "count", "--active-within", "0s"},
                   {"--active-within: found '0s', expected a duration above zero"}},
        UsageError{"ListTakesNoStale", {"conntrack", "list", "--stale"}, {"--stale"}},
        UsageError{"CountTakesNoClient",
                   {"conntrack", "count", "--client", "192.0.2.0/24"},
                   {"--client"}}),
    [](const auto& info) { return info.param.name; });

INSTANTIATE_TEST_SUITE_P(
    DrainWait, XlbctlUsageErrors,
    ::testing::Values(
        UsageError{
            "ActiveWithinWithoutWait",
            {"backend", "drain", "198.51.100.10:80", "203.0.113.11", "--active-within", "30s"},
            {"--active-within 30s without --wait", "--wait --active-within 30s"}},
        UsageError{"WaitOnADryRun",
                   {"backend", "drain", "198.51.100.10:80", "203.0.113.11", "--wait", "--dry-run"},
                   {"--wait with --dry-run"}},
        UsageError{"WaitTimeoutNotADuration",
                   {"backend", "drain", "198.51.100.10:80", "203.0.113.11", "--wait",
                    "--wait-timeout", "soon"},
                   {"--wait-timeout: found 'soon', expected seconds or a duration of 1s to 24h, "
                    "e.g. --wait-timeout 10m"}},
        UsageError{"WaitTimeoutTooLong",
                   {"backend", "drain", "198.51.100.10:80", "203.0.113.11", "--wait",
                    "--wait-timeout", "25h"},
                   {"--wait-timeout: found '25h'"}},
        UsageError{"WaitTimeoutTooShort",
                   {"backend", "drain", "198.51.100.10:80", "203.0.113.11", "--wait",
                    "--wait-timeout", "500ms"},
                   {"--wait-timeout: found '500ms'"}},
        UsageError{
            "WaitTimeoutWithoutWait",
            {"backend", "drain", "198.51.100.10:80", "203.0.113.11", "--wait-timeout", "10m"},
            {"--wait-timeout 10m without --wait"}},
        UsageError{"ActiveWithinNotADuration",
                   {"backend", "drain", "198.51.100.10:80", "203.0.113.11", "--wait",
                    "--active-within", "a while"},
                   {"--active-within: 'a while' is not a duration"}},
        UsageError{"WaitOnlyOnDrain",
                   {"backend", "enable", "198.51.100.10:80", "203.0.113.11", "--wait"},
                   {"--wait"}}),
    [](const auto& info) { return info.param.name; });

TEST(XlbctlParse, HelpOnEveryVerbHasExamples) {
    const std::vector<Args> verbs = {
        {},
        {"status"},
        {"vip"},
        {"vip", "list"},
        {"vip", "add"},
        {"vip", "set"},
        {"vip", "del"},
        {"backend"},
        {"backend", "list"},
        {"backend", "add"},
        {"backend", "del"},
        {"backend", "set"},
        {"backend", "drain"},
        {"backend", "enable"},
        {"backend", "disable"},
        {"backend", "history"},
        {"stats"},
        {"table"},
        {"lookup"},
        {"conntrack"},
        {"conntrack", "count"},
        {"conntrack", "list"},
        {"conntrack", "flush"},
    };
    for (Args args : verbs) {
        std::string name = "xlbctl";
        for (const auto& a : args) name += " " + a;
        args.push_back("--help");
        ParseResult r = parse_command(args, nullptr);
        ASSERT_TRUE(std::holds_alternative<ParseExit>(r)) << name;
        const ParseExit& e = std::get<ParseExit>(r);
        EXPECT_EQ(e.code, kExitOk) << name;
        EXPECT_TRUE(e.error.empty()) << name;
        EXPECT_HAS(e.out, "Usage: " + name);
        EXPECT_HAS(e.out, "Examples:\n  xlbctl");
        if (args.size() > 1 && args[0] != "vip" && args[0] != "backend" && args[0] != "conntrack") {
            EXPECT_HAS(e.out, "--json");
            EXPECT_HAS(e.out, "--socket");
        }
    }
}

// vip add and vip set take every per-VIP key of the configuration file as
// an option named after its path.
TEST(XlbctlParse, EveryVipKeyOfTheFileIsAnOption) {
    // The keys of the file's VIP (the config library's JSON form of one with
    // every optional key set), but its key and backends.
    config::VipSpec full;
    full.announce = announce::Policy::kNever;
    full.conntrack_idle_timeout = std::chrono::minutes(5);
    full.health_consensus = config::HealthConsensus::kAnyDown;
    full.syn_cookies = config::SynCookies::kAlways;
    full.allow_sources.push_back(*net::Prefix::parse("192.0.2.0/24"));
    full.deny_sources.push_back(*net::Prefix::parse("192.0.2.128/25"));
    full.quic.push_back(config::QuicConfig{});
    std::vector<std::string> keys;
    std::function<void(const nlohmann::json&, const std::string&)> walk =
        [&](const nlohmann::json& j, const std::string& prefix) {
            for (auto it = j.begin(); it != j.end(); ++it) {
                const std::string path = prefix.empty() ? it.key() : prefix + "." + it.key();
                if (it.value().is_object())
                    walk(it.value(), path);
                else if (path != "address" && path != "port" && path != "protocol" &&
                         path != "backends")
                    keys.push_back(path);
            }
        };
    walk(nlohmann::json(full), "");
    ASSERT_GT(keys.size(), 30u);
    std::set<std::string> options;
    for (const VipSetting& s : vip_settings()) options.insert(s.path);
    for (const std::string& key : keys) EXPECT_TRUE(options.contains(key)) << key;
    EXPECT_EQ(options.size(), keys.size());

    const ParseExit set_help =
        std::get<ParseExit>(parse_command({"vip", "set", "--help"}, nullptr));
    const ParseExit add_help =
        std::get<ParseExit>(parse_command({"vip", "add", "--help"}, nullptr));
    for (const VipSetting& s : vip_settings()) {
        EXPECT_HAS(set_help.out, s.option);
        if (s.path != "conntrack") {
            EXPECT_HAS(add_help.out, s.option);  // add has --no-conntrack instead
        }
    }
    EXPECT_HAS(set_help.out, "--health-check.failure-accrual.min-probes");
    EXPECT_HAS(set_help.out, "--allow-disruptive");
    EXPECT_HAS(add_help.out, "--dry-run");
}

TEST(XlbctlParse, VipSourceListsAndCookieMode) {
    Command c =
        parse_ok({"vip", "add", "198.51.100.10:443", "--syn-cookies", "always", "--allow-sources",
                  "192.0.2.0/24,198.51.100.7", "--deny-sources", "192.0.2.128/25"});
    ASSERT_TRUE(c.spec.syn_cookies);
    EXPECT_EQ(*c.spec.syn_cookies, config::SynCookies::kAlways);
    ASSERT_EQ(c.spec.allow_sources.size(), 2u);
    EXPECT_EQ(c.spec.allow_sources[1].to_string(), "198.51.100.7/32");
    ASSERT_EQ(c.spec.deny_sources.size(), 1u);
    const auto body = nlohmann::json::parse(build_request(c).body);
    EXPECT_EQ(body["syn_cookies"], "always");
    EXPECT_EQ(body["allow_sources"], nlohmann::json::parse(R"(["192.0.2.0/24", "198.51.100.7"])"));
    // vip set: "" empties a list (a reload's way to open the VIP again).
    EXPECT_EQ(settings_object({{"allow_sources", ""}, {"deny_sources", "10.0.0.0/8"}}),
              nlohmann::json::parse(R"({"allow_sources": [], "deny_sources": ["10.0.0.0/8"]})"));
    // Refused as the file refuses it, with the option named.
    auto bad = parse_command({"vip", "add", "198.51.100.10:443", "--deny-sources", "192.0.2.7/24"},
                             nullptr);
    ASSERT_TRUE(std::holds_alternative<ParseExit>(bad));
    EXPECT_HAS(std::get<ParseExit>(bad).error, "--deny-sources");
    EXPECT_HAS(std::get<ParseExit>(bad).error, "has host bits set");
}

TEST(XlbctlParse, VipAddTakesEverySetting) {
    Command c = parse_ok({"vip",
                          "add",
                          "198.51.100.10:80",
                          "--health-check.type",
                          "http",
                          "--health-check.path",
                          "/healthz",
                          "--health-check.interval",
                          "2s",
                          "--health-check.expected-statuses",
                          "200-299,301",
                          "--slow-start.window",
                          "10s",
                          "--announce",
                          "never",
                          "--conntrack-idle-timeout",
                          "5m",
                          "--on-unhealthy",
                          "keep",
                          "--health-check.failure-accrual.enabled",
                          "true",
                          "--ring-size",
                          "251",
                          "--dry-run"});
    EXPECT_EQ(c.spec.health_check.type, config::HealthCheckType::kHttp);
    EXPECT_EQ(c.spec.health_check.path, "/healthz");
    EXPECT_EQ(c.spec.health_check.interval, std::chrono::seconds(2));
    ASSERT_EQ(c.spec.health_check.expected_statuses.size(), 2u);
    EXPECT_EQ(c.spec.health_check.expected_statuses[1].first, 301);
    EXPECT_EQ(c.spec.slow_start.window, std::chrono::seconds(10));
    EXPECT_EQ(c.spec.announce, announce::Policy::kNever);
    EXPECT_EQ(c.spec.conntrack_idle_timeout, std::chrono::minutes(5));
    EXPECT_EQ(c.spec.on_unhealthy, config::UnhealthyPolicy::kKeep);
    EXPECT_TRUE(c.spec.health_check.failure_accrual.enabled);
    EXPECT_EQ(c.spec.ring_size, 251u);
    EXPECT_TRUE(c.dry_run);
    const HttpRequest r = build_request(c);
    EXPECT_EQ(r.target, "/v1/vips?dry_run=1");
    const auto body = nlohmann::json::parse(r.body);
    EXPECT_EQ(body["health_check"]["type"], "http");
    EXPECT_EQ(body["health_check"]["expected_statuses"],
              nlohmann::json::parse(R"(["200-299", 301])"));
    EXPECT_EQ(body["health_check"]["failure_accrual"]["enabled"], true);
    EXPECT_EQ(body["slow_start"]["window"], "10s");
    EXPECT_EQ(body["announce"], "never");
    EXPECT_EQ(body["ring_size"], 251);
    EXPECT_FALSE(body["health_check"].contains("timeout")) << "only what was given";
    EXPECT_EQ(build_request(parse_ok({"vip", "add", "198.51.100.10:80"})).target, "/v1/vips");
}

TEST(XlbctlParse, VipSettingsAreCheckedAsTheFilesAre) {
    EXPECT_HAS(parse_error({"vip", "add", "198.51.100.10:80", "--health-check.type", "icmp"}),
               "--health-check.type: found \"icmp\", expected");
    EXPECT_HAS(parse_error({"vip", "add", "198.51.100.10:80", "--slow-start.window", "10"}),
               "--slow-start.window: found");
    EXPECT_HAS(parse_error({"vip", "add", "198.51.100.10:80", "--slow-start.window", "10"}),
               "units are required");
    EXPECT_HAS(parse_error({"vip", "add", "198.51.100.10:80", "--health-check.unhealthy-threshold",
                            "many"}),
               "--health-check.unhealthy-threshold: found \"many\"");
    EXPECT_HAS(parse_error({"vip", "add", "198.51.100.10:80", "--health-check.type", "tcp",
                            "--health-check.timeout", "20s"}),
               "--health-check.timeout: ");
    EXPECT_HAS(parse_error({"vip", "add", "198.51.100.10:80", "--announce", "sometimes"}),
               "--announce: found \"sometimes\"");
    EXPECT_HAS(
        parse_error({"vip", "set", "198.51.100.10:80", "--health-check.reuse-connection", "yes"}),
        "--health-check.reuse-connection: found \"yes\", expected true or false");
    EXPECT_HAS(parse_error({"vip", "set", "198.51.100.10:80", "--ring-size", "big"}),
               "--ring-size: found \"big\"");
    EXPECT_HAS(parse_error({"vip", "set", "198.51.100.10:80"}),
               "vip set: expected at least one setting to change");
    EXPECT_HAS(parse_error({"vip", "set", "198.51.100.10:80", "--backend", "203.0.113.11"}),
               "--backend");
}

TEST(XlbctlParse, VipSetSendsOnlyWhatIsGiven) {
    Command c = parse_ok({"vip", "set", "198.51.100.10:80", "--health-check.type", "tcp",
                          "--health-check.port", "8080", "--name", "www", "--conntrack", "false",
                          "--panic-threshold", "0"});
    EXPECT_EQ(c.verb, Verb::kVipSet);
    EXPECT_EQ(c.vip, "198.51.100.10:80/tcp");
    HttpRequest r = build_request(c);
    EXPECT_EQ(r.method, "PATCH");
    EXPECT_EQ(r.target, "/v1/vip?vip=198.51.100.10%3A80%2Ftcp");
    EXPECT_EQ(nlohmann::json::parse(r.body), nlohmann::json::parse(R"({
        "health_check": {"type": "tcp", "port": 8080}, "name": "www", "conntrack": false,
        "panic_threshold": 0})"));
    Command d = parse_ok({"vip", "set", "198.51.100.10:80", "--ring-size", "251",
                          "--allow-disruptive", "--dry-run"});
    EXPECT_EQ(build_request(d).target,
              "/v1/vip?vip=198.51.100.10%3A80%2Ftcp&dry_run=1&allow_disruptive=1");
    EXPECT_EQ(build_request(d).body, R"({"ring_size":251})");
    // one key of a nested object: the agent keeps the object's others
    EXPECT_EQ(
        build_request(parse_ok({"vip", "set", "198.51.100.10:80", "--health-check.timeout", "2s"}))
            .body,
        R"({"health_check":{"timeout":"2s"}})");
}

// The verb table (verbs.h) is the list of verbs the command tree, the
// requests and the rendering are built from: every Verb has exactly one row,
// under one name, and that name on the command line parses to its Verb.
TEST(XlbctlVerbs, EveryVerbHasOneRowThatParsesToIt) {
    std::set<Verb> verbs;
    std::set<std::string> names;
    for (const Noun& noun : nouns()) {
        ASSERT_FALSE(noun.verbs.empty()) << noun.name;
        for (const VerbSpec& verb : noun.verbs) {
            const std::string name = verb_name(verb.verb);
            SCOPED_TRACE(name);
            EXPECT_TRUE(verbs.insert(verb.verb).second) << "a second row";
            EXPECT_TRUE(names.insert(name).second) << "a second verb of this name";
            EXPECT_EQ(name, noun.is_verb() ? std::string(noun.name)
                                           : std::string(noun.name) + " " + verb.name);
            EXPECT_EQ(&verb_spec(verb.verb), &verb);
            EXPECT_NE(verb.request, nullptr);
            EXPECT_NE(std::string(verb.help), "");
            EXPECT_NE(std::string(verb.examples), "");
            Args args;
            std::istringstream words(name);
            for (std::string w; words >> w;) args.push_back(w);
            // what its --help shows is its row's
            Args help = args;
            help.push_back("--help");
            const ParseResult shown = parse_command(help, nullptr);
            ASSERT_TRUE(std::holds_alternative<ParseExit>(shown));
            const std::string text = std::get<ParseExit>(shown).out;
            EXPECT_HAS(text, verb.help);
            EXPECT_HAS(text, verb.examples);
            // the line alone parses to this verb, or is refused by this
            // verb (a missing argument), never by another
            ParseResult r = parse_command(args, nullptr);
            if (auto* c = std::get_if<Command>(&r))
                EXPECT_EQ(c->verb, verb.verb);
            else
                EXPECT_HAS(std::get<ParseExit>(r).error, name);
        }
    }
    EXPECT_EQ(verbs.size(), static_cast<std::size_t>(Verb::kTop) + 1) << "a Verb without a row";
}

// The options the bash completion offers after each verb, from its
// `case` on the verb ("status", "vip add", "backend *": the noun's other
// verbs), with $common written out.
std::map<std::string, std::string> completed_options(const std::string& completion) {
    std::map<std::string, std::string> options;
    auto local = [&](const std::string& name) {
        const std::size_t at = completion.find("local " + name + "=\"");
        if (at == std::string::npos) return std::string();
        const std::size_t start = at + name.size() + 8;
        return completion.substr(start, completion.find('"', start) - start);
    };
    const std::string common = local("common"), fleetw = local("fleetw");
    const std::size_t from = completion.find("local options=");
    if (from == std::string::npos) return options;
    std::istringstream lines(completion.substr(from));
    std::string noun;
    std::vector<std::string> at;  // the labels the next options="..." is for
    for (std::string line; std::getline(lines, line);) {
        const std::size_t indent = line.find_first_not_of(' ');
        if (indent == std::string::npos) continue;
        std::string rest = line.substr(indent);
        // "del | enable | disable) options=..." or "vip)"
        const std::size_t close = rest.find(')');
        const bool label = (indent == 8 || indent == 16) && close != std::string::npos &&
                           rest.find_first_of("\"$=") > close;
        if (label) {
            at.clear();
            std::istringstream names(rest.substr(0, close));
            for (std::string n; std::getline(names, n, '|');) {
                n.erase(0, n.find_first_not_of(' '));
                n.erase(n.find_last_not_of(' ') + 1);
                if (indent == 8) noun = n;
                at.push_back(indent == 8 ? n : noun + " " + n);
            }
            rest = rest.substr(close + 1);
        }
        const std::size_t o = rest.find("options=\"");
        if (o == std::string::npos) continue;
        std::string value = rest.substr(o + 9, rest.find('"', o + 9) - o - 9);
        if (const std::size_t c = value.find("$common"); c != std::string::npos)
            value.replace(c, 7, common);
        if (const std::size_t c = value.find("$fleetw"); c != std::string::npos)
            value.replace(c, 7, fleetw);
        for (const std::string& key : at) options[key] = value;
    }
    return options;
}

// Every verb of the table is in the man page's synopsis and in the bash
// completion, and each of its options is completed after it (but the VIP
// settings, which the completion asks the binary for); a noun's verbs are
// completed as the table lists them.
TEST(XlbctlDocs, EveryVerbAndOptionIsInTheManPageAndTheCompletion) {
    auto read = [](const std::string& path) {
        std::ifstream in(path);
        std::stringstream text;
        text << in.rdbuf();
        return text.str();
    };
    const std::string man = read(XLB_SOURCE_DIR "/docs/xlbctl.8");
    const std::string completion = read(XLB_SOURCE_DIR "/scripts/xlbctl.bash-completion");
    ASSERT_FALSE(man.empty());
    ASSERT_FALSE(completion.empty());
    const std::size_t from = man.find(".SH SYNOPSIS"), to = man.find(".SH DESCRIPTION");
    ASSERT_LT(from, to);
    const std::string synopsis = man.substr(from, to - from);
    auto has_word = [](const std::string& text, const std::string& word) {
        for (std::size_t at = text.find(word); at != std::string::npos;
             at = text.find(word, at + 1)) {
            auto edge = [&](std::size_t i) {
                return i >= text.size() || !(std::isalnum(static_cast<unsigned char>(text[i])) ||
                                             text[i] == '-' || text[i] == '_' || text[i] == '.');
            };
            if ((at == 0 || edge(at - 1)) && edge(at + word.size())) return true;
        }
        return false;
    };
    for (const Noun& noun : nouns()) {
        SCOPED_TRACE(noun.name);
        if (!noun.is_verb()) {
            std::string listed;
            for (const VerbSpec& verb : noun.verbs)
                listed += (listed.empty() ? "" : " ") + std::string(verb.name);
            EXPECT_HAS(completion, "compgen -W \"" + listed + "\"");
            EXPECT_HAS(completion, "$verb == " + std::string(noun.name));
        }
        const std::size_t top = completion.find("compgen -W \"status ");
        ASSERT_NE(top, std::string::npos);
        const std::string nouns_listed =
            completion.substr(top, completion.find('"', top + 12) - top);
        EXPECT_TRUE(has_word(nouns_listed, noun.name))
            << noun.name << " not completed after xlbctl";
    }
    const std::map<std::string, std::string> completing = completed_options(completion);
    for (const Noun& noun : nouns())
        for (const VerbSpec& verb : noun.verbs) {
            const std::string name = verb_name(verb.verb);
            SCOPED_TRACE(name);
            Args args;
            std::istringstream words(name);
            for (std::string w; words >> w;) args.push_back(w);
            EXPECT_HAS(synopsis, ".B xlbctl " + args[0]);
            for (const std::string& w : args) {
                EXPECT_TRUE(has_word(synopsis, w)) << w << " not in the synopsis";
                EXPECT_TRUE(has_word(completion, w)) << w << " not in the completion";
            }
            // the verb's own case, else its noun's other verbs' ("*"), else the noun's
            std::string offered;
            for (const std::string& key : {name, args[0] + " *", args[0]})
                if (auto it = completing.find(key); it != completing.end()) {
                    offered = it->second;
                    break;
                }
            EXPECT_NE(offered, "") << "no options completed after " << name;
            args.push_back("--help");
            const std::string help = std::get<ParseExit>(parse_command(args, nullptr)).out;
            const std::string own = help.substr(0, help.find("VIP settings ("));
            std::istringstream lines(own);
            for (std::string line; std::getline(lines, line);) {
                // "  -w,--write FILE ..." -> -w, --write
                std::istringstream fields(line);
                std::string first;
                if (!(fields >> first) || !first.starts_with("-")) continue;
                std::istringstream flags(first);
                for (std::string flag; std::getline(flags, flag, ',');) {
                    if (flag == "-h" || flag == "--help") continue;
                    EXPECT_TRUE(has_word(offered, flag))
                        << flag << " not completed after " << name << ": " << offered;
                }
            }
        }
}

TEST(XlbctlParse, Conntrack) {
    Command count = parse_ok({"conntrack", "count", "--vip", "198.51.100.10:80", "--backend",
                              "203.0.113.11", "--active-within", "30s", "--json"});
    EXPECT_EQ(count.verb, Verb::kConntrackCount);
    EXPECT_EQ(count.vip, "198.51.100.10:80/tcp");
    EXPECT_EQ(count.ct_backend, net::IpAddress::parse("203.0.113.11").value());
    EXPECT_EQ(count.active_within, std::chrono::seconds(30));
    EXPECT_TRUE(count.json);
    Command all = parse_ok({"conntrack", "count"});
    EXPECT_FALSE(all.vip_key);
    EXPECT_FALSE(all.ct_backend);
    EXPECT_FALSE(all.active_within);
    EXPECT_TRUE(
        parse_ok({"conntrack", "list", "--vip", "198.51.100.10:80", "--backend", "2001:db8:b::11"})
            .ct_backend)
        << "an IPv4 VIP may have IPv6 backends";

    Command list = parse_ok({"conntrack", "list", "--client", "192.0.2.0/24", "--limit", "1000",
                             "--backend", "10.0.1.1"});
    EXPECT_EQ(list.verb, Verb::kConntrackList);
    ASSERT_TRUE(list.ct_client);
    EXPECT_EQ(list.ct_client->to_string(), "192.0.2.0/24");
    EXPECT_EQ(list.limit, 1000u);
    EXPECT_EQ(parse_ok({"conntrack", "list", "--client", "2001:db8:c::7"}).ct_client->to_string(),
              "2001:db8:c::7/128");
    EXPECT_FALSE(parse_ok({"conntrack", "list"}).limit) << "the agent's default";

    Command flush = parse_ok({"conntrack", "flush", "--stale", "--dry-run"});
    EXPECT_EQ(flush.verb, Verb::kConntrackFlush);
    EXPECT_TRUE(flush.ct_stale);
    EXPECT_TRUE(flush.dry_run);
    EXPECT_FALSE(parse_ok({"conntrack", "flush", "--backend", "203.0.113.11"}).dry_run);
}

TEST(XlbctlParse, DrainWait) {
    Command plain = parse_ok({"backend", "drain", "198.51.100.10:80", "203.0.113.11"});
    EXPECT_FALSE(plain.wait);
    Command wait = parse_ok({"backend", "drain", "198.51.100.10:80", "203.0.113.11", "--wait"});
    EXPECT_TRUE(wait.wait);
    EXPECT_EQ(wait.wait_timeout, std::chrono::minutes(5));
    EXPECT_EQ(wait.active_within, std::chrono::seconds(10));
    EXPECT_EQ(wait.timeout, std::chrono::seconds(30)) << "each request keeps the default";
    Command custom = parse_ok({"backend", "drain", "198.51.100.10:80", "203.0.113.11", "--wait",
                               "--wait-timeout", "30m", "--active-within", "1m"});
    EXPECT_EQ(custom.wait_timeout, std::chrono::minutes(30));
    EXPECT_EQ(custom.timeout, std::chrono::seconds(30)) << "--timeout stays the request's";
    EXPECT_EQ(custom.active_within, std::chrono::minutes(1));
    EXPECT_EQ(parse_ok({"backend", "drain", "198.51.100.10:80", "203.0.113.11", "--wait",
                        "--wait-timeout", "90"})
                  .wait_timeout,
              std::chrono::seconds(90))
        << "seconds alone, like --timeout";
    EXPECT_EQ(parse_ok({"backend", "drain", "198.51.100.10:80", "203.0.113.11", "--timeout", "2"})
                  .timeout,
              std::chrono::seconds(2))
        << "without --wait, --timeout is the request's";
}

TEST(XlbctlParse, Version) {
    ParseResult r = parse_command({"--version"}, nullptr);
    ASSERT_TRUE(std::holds_alternative<ParseExit>(r));
    EXPECT_EQ(std::get<ParseExit>(r).code, 0);
    EXPECT_HAS(std::get<ParseExit>(r).out, "xlbctl ");
}

TEST(XlbctlParse, WantsJson) {
    EXPECT_TRUE(wants_json({"vip", "add", "--json", "x"}));
    EXPECT_FALSE(wants_json({"status"}));
}

TEST(XlbctlParse, Capture) {
    const Command c =
        parse_ok({"capture", "--vip", "198.51.100.10:80", "--backend", "203.0.113.11", "--src",
                  "192.0.2.0/24", "--outcome", "drop", "--outcome", "tx", "--count", "100",
                  "--duration", "30s", "--snaplen", "128", "-w", "out.pcap"});
    EXPECT_EQ(c.verb, Verb::kCapture);
    EXPECT_EQ(c.write_to, "out.pcap");
    EXPECT_EQ(build_request(c),
              (HttpRequest{"POST", "/v1/capture",
                           R"({"backend":"203.0.113.11","count":100,"duration_ms":30000,)"
                           R"("outcomes":["drop","tx"],"snaplen":128,"src":"192.0.2.0/24",)"
                           R"("vip":"198.51.100.10:80/tcp"})"}));
    EXPECT_EQ(build_request(parse_ok({"capture", "-w", "-"})).body, "{}");
    // -n is --count in every verb that takes --count
    EXPECT_EQ(parse_ok({"capture", "-n", "7", "-w", "-"}).count, std::optional<std::uint64_t>(7));
    EXPECT_HAS(parse_error({"capture", "--count", "5"}), "-w");
    EXPECT_HAS(parse_error({"capture", "--snaplen", "4096", "-w", "-"}),
               "--snaplen: found '4096', expected 1-2048 bytes");
    EXPECT_HAS(parse_error({"capture", "--count", "0", "-w", "-"}), "--count: found '0'");
    EXPECT_HAS(parse_error({"capture", "--src", "192.0.2.7/24", "-w", "-"}), "--src: ");
    EXPECT_HAS(parse_error({"capture", "--backend", "nope", "-w", "-"}), "--backend: ");
    EXPECT_HAS(parse_error({"capture", "--duration", "soon", "-w", "-"}), "--duration: ");
}

// The requests, per verb (docs/api.md).
TEST(XlbctlRequest, PerVerb) {
    auto req = [](const Args& args) { return build_request(parse_ok(args)); };
    EXPECT_EQ(req({"status"}), (HttpRequest{"GET", "/v1/status", ""}));
    EXPECT_EQ(req({"vip", "list"}), (HttpRequest{"GET", "/v1/vips", ""}));
    EXPECT_EQ(req({"vip", "del", "198.51.100.10:80"}),
              (HttpRequest{"DELETE", "/v1/vip?vip=198.51.100.10%3A80%2Ftcp", ""}));
    EXPECT_EQ(req({"backend", "list", "[2001:db8::10]:443/udp"}),
              (HttpRequest{"GET", "/v1/backends?vip=%5B2001%3Adb8%3A%3A10%5D%3A443%2Fudp", ""}));
    EXPECT_EQ(req({"backend", "list"}), (HttpRequest{"GET", "/v1/backends", ""}));
    EXPECT_EQ(req({"backend", "add", "198.51.100.10:80", "203.0.113.14", "--weight", "50"}),
              (HttpRequest{"POST", "/v1/backends?vip=198.51.100.10%3A80%2Ftcp",
                           R"({"address":"203.0.113.14","weight":50})"}));
    EXPECT_EQ(req({"backend", "add", "198.51.100.10:80", "203.0.113.14"}).body,
              R"({"address":"203.0.113.14"})");
    const std::string target = "/v1/backends?vip=198.51.100.10%3A80%2Ftcp&address=203.0.113.14";
    EXPECT_EQ(req({"backend", "del", "198.51.100.10:80", "203.0.113.14"}),
              (HttpRequest{"DELETE", target, ""}));
    EXPECT_EQ(req({"backend", "set", "198.51.100.10:80", "203.0.113.14", "--weight", "7"}),
              (HttpRequest{"PATCH", target, R"({"weight":7})"}));
    EXPECT_EQ(req({"backend", "drain", "198.51.100.10:80", "203.0.113.14"}).body,
              R"({"state":"drain"})");
    EXPECT_EQ(req({"backend", "enable", "198.51.100.10:80", "203.0.113.14"}).body,
              R"({"state":"active"})");
    EXPECT_EQ(req({"backend", "disable", "198.51.100.10:80", "203.0.113.14"}).body,
              R"({"state":"disabled"})");
    EXPECT_EQ(
        req({"backend", "history", "198.51.100.10:80", "203.0.113.14"}),
        (HttpRequest{"GET", "/v1/backend/history?vip=198.51.100.10%3A80%2Ftcp&address=203.0.113.14",
                     ""}));
    EXPECT_EQ(req({"backend", "history", "[2001:db8::10]:443", "2001:db8:b::11"}).target,
              "/v1/backend/history?vip=%5B2001%3Adb8%3A%3A10%5D%3A443%2Ftcp&address=2001%3Adb8%"
              "3Ab%3A%3A11");
    EXPECT_EQ(req({"stats"}).target, "/v1/stats");
    EXPECT_EQ(req({"stats", "198.51.100.10:80"}).target, "/v1/stats?vip=198.51.100.10%3A80%2Ftcp");
    EXPECT_EQ(req({"table", "198.51.100.10:80"}).target, "/v1/table?vip=198.51.100.10%3A80%2Ftcp");
    EXPECT_EQ(
        req({"lookup", "198.51.100.20:0/udp", "--src", "192.0.2.7:5", "--dport", "53"}).target,
        "/v1/lookup?vip=198.51.100.20%3A0%2Fudp&src=192.0.2.7%3A5&dport=53");
    EXPECT_EQ(req({"lookup", "198.51.100.10:53", "--proto", "udp", "--src", "192.0.2.7:5"}).method,
              "GET");
}

TEST(XlbctlRequest, Conntrack) {
    auto req = [](const Args& args) { return build_request(parse_ok(args)); };
    EXPECT_EQ(req({"conntrack", "count"}), (HttpRequest{"GET", "/v1/conntrack/count", ""}));
    EXPECT_EQ(req({"conntrack", "count", "--vip", "198.51.100.10:80", "--backend", "203.0.113.11",
                   "--active-within", "90s"}),
              (HttpRequest{"GET",
                           "/v1/conntrack/count?vip=198.51.100.10%3A80%2Ftcp&backend=203.0.113.11"
                           "&active_within=90s",
                           ""}));
    EXPECT_EQ(req({"conntrack", "count", "--active-within", "60000ms"}).target,
              "/v1/conntrack/count?active_within=1m");
    EXPECT_EQ(req({"conntrack", "list"}), (HttpRequest{"GET", "/v1/conntrack", ""}));
    EXPECT_EQ(req({"conntrack", "list", "--client", "2001:DB8:c::/48", "--limit", "5"}).target,
              "/v1/conntrack?client=2001%3Adb8%3Ac%3A%3A%2F48&limit=5");
    EXPECT_EQ(req({"conntrack", "flush", "--stale"}),
              (HttpRequest{"POST", "/v1/conntrack/flush", R"({"stale":true})"}));
    const HttpRequest flush =
        req({"conntrack", "flush", "--vip", "198.51.100.10:80/tcp", "--backend", "203.0.113.11",
             "--client", "192.0.2.7", "--dry-run"});
    EXPECT_EQ(nlohmann::json::parse(flush.body), nlohmann::json::parse(R"({
        "vip": "198.51.100.10:80/tcp", "backend": "203.0.113.11", "client": "192.0.2.7/32",
        "dry_run": true})"));
}

TEST(XlbctlRequest, DrainWaitCountsTheBackend) {
    const Command c = parse_ok({"backend", "drain", "[2001:db8::10]:443", "2001:db8:b::11",
                                "--wait", "--active-within", "30s"});
    EXPECT_EQ(build_request(c).body, R"({"state":"drain"})");
    EXPECT_EQ(drain_count_request(c),
              (HttpRequest{"GET",
                           "/v1/conntrack/count?vip=%5B2001%3Adb8%3A%3A10%5D%3A443%2Ftcp&backend="
                           "2001%3Adb8%3Ab%3A%3A11&active_within=30s",
                           ""}));
    EXPECT_EQ(drain_count_request(
                  parse_ok({"backend", "drain", "198.51.100.10:80", "203.0.113.11", "--wait"}))
                  .target,
              "/v1/conntrack/count?vip=198.51.100.10%3A80%2Ftcp&backend=203.0.113.11"
              "&active_within=10s");
}

// --dry-run: the same request, asking for the prediction; only the backend
// verbs that change something take it.
TEST(XlbctlRequest, ReloadConfirmsDisruptiveChangesOnlyWhenAsked) {
    auto req = [](const Args& args) { return build_request(parse_ok(args)); };
    EXPECT_EQ(req({"reload"}),
              (HttpRequest{"POST", "/v1/reload", R"({"allow_disruptive":false})"}));
    EXPECT_EQ(req({"reload", "--allow-disruptive"}),
              (HttpRequest{"POST", "/v1/reload", R"({"allow_disruptive":true})"}));
    EXPECT_TRUE(parse_ok({"reload", "--json"}).json);
}

TEST(XlbctlRequest, DryRunAsksForThePrediction) {
    auto req = [](const Args& args) { return build_request(parse_ok(args)); };
    const std::string vip = "/v1/backends?vip=198.51.100.10%3A80%2Ftcp";
    const std::string target = vip + "&address=203.0.113.14";
    EXPECT_EQ(req({"backend", "add", "198.51.100.10:80", "203.0.113.14", "--dry-run"}),
              (HttpRequest{"POST", vip + "&dry_run=1", R"({"address":"203.0.113.14"})"}));
    EXPECT_EQ(req({"backend", "del", "198.51.100.10:80", "203.0.113.14", "--dry-run"}),
              (HttpRequest{"DELETE", target + "&dry_run=1", ""}));
    EXPECT_EQ(
        req({"backend", "set", "198.51.100.10:80", "203.0.113.14", "--weight", "7", "--dry-run"}),
        (HttpRequest{"PATCH", target + "&dry_run=1", R"({"weight":7})"}));
    EXPECT_EQ(req({"backend", "drain", "198.51.100.10:80", "203.0.113.14", "--dry-run"}).target,
              target + "&dry_run=1");
    EXPECT_TRUE(
        parse_ok({"backend", "disable", "198.51.100.10:80", "203.0.113.14", "--dry-run"}).dry_run);
    EXPECT_FALSE(
        parse_ok({"backend", "set", "198.51.100.10:80", "203.0.113.14", "--weight", "7"}).dry_run);
    // checked like the real change
    EXPECT_HAS(parse_error({"backend", "set", "198.51.100.10:80", "203.0.113.14", "--weight",
                            "70000", "--dry-run"}),
               "--weight");
    EXPECT_HAS(parse_error({"backend", "list", "198.51.100.10:80", "--dry-run"}), "--dry-run");
    EXPECT_HAS(parse_error({"vip", "del", "198.51.100.10:80", "--dry-run"}), "--dry-run");
}

TEST(XlbctlRequest, VipAddBody) {
    HttpRequest r = build_request(parse_ok({"vip", "add", "10.0.0.10:80/tcp", "--hash", "source",
                                            "--ring-size", "251", "--name", "web", "--no-conntrack",
                                            "--panic-threshold", "0", "-b", "10.0.1.1=5"}));
    EXPECT_EQ(r.method, "POST");
    EXPECT_EQ(r.target, "/v1/vips");
    auto body = nlohmann::json::parse(r.body);
    EXPECT_EQ(body, nlohmann::json::parse(R"({
        "address": "10.0.0.10", "port": 80, "protocol": "tcp", "name": "web", "hash": "source",
        "conntrack": false, "ring_size": 251, "panic_threshold": 0.0,
        "backends": [{"address": "10.0.1.1", "weight": 5}]})"));
}

TEST(XlbctlRequest, UrlEncode) {
    EXPECT_EQ(url_encode("AZaz09-._~"), "AZaz09-._~");
    EXPECT_EQ(url_encode("[::1]:80/tcp &="), "%5B%3A%3A1%5D%3A80%2Ftcp%20%26%3D");
}

}  // namespace
}  // namespace xlb::xlbctl
