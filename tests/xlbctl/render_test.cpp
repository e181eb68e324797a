// SPDX-License-Identifier: Apache-2.0
// Human output from canned replies (the shapes of docs/api.md): aligned
// tables, units, colour only when asked for, and the rates of stats --watch.
#include "xlb/xlbctl/render.h"

#include <gtest/gtest.h>

#include "xlb/xlbctl/drain.h"
#include "xlb/xlbctl/format.h"

namespace xlb::xlbctl {
namespace {

#define EXPECT_HAS(text, part) EXPECT_NE((text).find(part), std::string::npos) << (text)

const Style kPlain{false};
const Style kColour{true};

Command cmd(Verb verb) {
    Command c;
    c.verb = verb;
    c.vip = "198.51.100.10:80/tcp";
    return c;
}

json vip_summary(const char* key, const char* name, int healthy, int total, bool panic = false,
                 bool published = true, const char* error = "") {
    return json{{"vip", key},
                {"name", name},
                {"vip_id", 0},
                {"epoch", 3},
                {"checksum", "5bf6441c8ac68df2"},
                {"panic", panic},
                {"panic_reason", panic ? "below_threshold" : "none"},
                {"healthy_share", total ? static_cast<double>(healthy) / total : 0.0},
                {"published", published},
                {"backends_total", total},
                {"backends_healthy", healthy},
                {"last_error", error}};
}

json backend(const char* address, const char* state, const char* health, int weight, int slots,
             double share, json packets = 614901, json bytes = 541112880) {
    return json{{"address", address},
                {"hash_key", ""},
                {"state", state},
                {"health", health},
                {"last_failure", ""},
                {"weight", weight},
                {"effective_weight", state == std::string("active") ? weight * 100 : 0},
                {"weight_factor", 1.0},
                {"slots", slots},
                {"share_of_slots", share},
                {"in_table", slots > 0},
                {"live", true},
                {"id", 0},
                {"generation", 1},
                {"packets", packets},
                {"bytes", bytes},
                {"new_flows", packets.is_null() ? json() : json(10344)},
                {"new_flows_per_s", packets.is_null() ? json() : json(12.0)},
                {"connections", packets.is_null() ? json() : json(812)},
                {"inactive_connections", packets.is_null() ? json() : json(95)}};
}

// Each line's columns start at the same offsets as the header's.
void expect_aligned(const std::string& table, const std::vector<std::string>& headers) {
    std::vector<std::string> lines;
    std::size_t at = 0;
    while (at < table.size()) {
        std::size_t eol = table.find('\n', at);
        lines.push_back(table.substr(at, eol - at));
        at = eol + 1;
    }
    ASSERT_FALSE(lines.empty());
    std::size_t header_line = 0;
    while (header_line < lines.size() && lines[header_line].find(headers[0]) != 0) ++header_line;
    ASSERT_LT(header_line, lines.size()) << table;
    const std::string& header = lines[header_line];
    for (const std::string& h : headers) EXPECT_NE(header.find(h), std::string::npos) << h;
    for (const std::string& line : lines) {
        EXPECT_TRUE(line.empty() || line.back() != ' ') << "trailing blank: '" << line << "'";
        EXPECT_EQ(line.find('\x1b'), std::string::npos) << "no colour without a terminal";
    }
}

TEST(XlbctlFormat, Units) {
    EXPECT_EQ(format_bytes(0), "0 B");
    EXPECT_EQ(format_bytes(512), "512 B");
    EXPECT_EQ(format_bytes(1536), "1.50 KiB");
    EXPECT_EQ(format_bytes(541112880), "516 MiB");
    EXPECT_EQ(format_bytes(1622036480), "1.51 GiB");
    EXPECT_EQ(format_bytes(1024.0 * 1024 - 1), "1.00 MiB") << "never '1024 KiB'";
    EXPECT_EQ(format_pps(0), "0 pps");
    EXPECT_EQ(format_pps(950), "950 pps");
    EXPECT_EQ(format_pps(12345), "12.3 kpps");
    EXPECT_EQ(format_pps(1234567), "1.23 Mpps");
    EXPECT_EQ(format_pps(0.5), "0.50 pps");
    EXPECT_EQ(format_bits(800), "800 bit/s");
    EXPECT_EQ(format_bits(9.41e9), "9.41 Gbit/s");
    EXPECT_EQ(format_per_second(12300), "12.3k/s");
    EXPECT_EQ(format_percent(0.33333841951874515), "33.33%");
    EXPECT_EQ(format_signed_percent(0.004), "+0.40%");
    EXPECT_EQ(format_signed_percent(-0.0125), "-1.25%");
    EXPECT_EQ(format_uptime(45), "45s");
    EXPECT_EQ(format_uptime(3725), "1h 2m 5s");
    EXPECT_EQ(format_uptime(3 * 86400 + 4 * 3600 + 300), "3d 4h 5m");
    EXPECT_EQ(format_number(100), "100");
    EXPECT_EQ(format_number(12.5), "12.5");
    EXPECT_EQ(format_number(1.0 / 3), "0.33");
}

TEST(XlbctlFormat, TableAlignsAndColoursWithoutShifting) {
    Table t({{"NAME"}, {"COUNT", Table::Align::kRight}, {"STATE"}});
    t.add({"a", "1", {"healthy", Colour::kGreen}});
    t.add({"longer-name", "12345", ""});
    EXPECT_EQ(t.render(kPlain),
              "NAME         COUNT  STATE\n"
              "a                1  healthy\n"
              "longer-name  12345\n");
    const std::string coloured = t.render(kColour);
    EXPECT_HAS(coloured, "\x1b[1mNAME\x1b[0m");
    EXPECT_HAS(coloured, "a                1  \x1b[32mhealthy\x1b[0m\n");
}

TEST(XlbctlFormat, PaintOnlyWithColour) {
    EXPECT_EQ(paint("x", Colour::kRed, kPlain), "x");
    EXPECT_EQ(paint("x", Colour::kRed, kColour), "\x1b[31mx\x1b[0m");
}

json status_reply() {
    return json{{"version", "0.1.0"},
                {"interface", "eth0"},
                {"xdp_mode", "native"},
                {"uptime_s", 3725},
                {"ready", true},
                {"vips",
                 {vip_summary("198.51.100.10:80/tcp", "web", 3, 3),
                  vip_summary("[2001:db8::10]:443/tcp", "", 0, 2, true, false,
                              "publish rings: Operation not permitted")}}};
}

TEST(XlbctlRender, Status) {
    const std::string out = render_human(cmd(Verb::kStatus), status_reply(), kPlain);
    EXPECT_HAS(out, "xlbd 0.1.0 on eth0, native XDP, up 1h 2m 5s, ready\n");
    EXPECT_HAS(out,
               "VIP                     NAME  BACKENDS  HEALTHY WEIGHT  PANIC                  "
               "EPOCH  CHECKSUM          TABLE\n");
    EXPECT_HAS(out,
               "198.51.100.10:80/tcp    web        3/3         100.00%  no                         "
               "3  5bf6441c8ac68df2  live\n");
    EXPECT_HAS(out,
               "[2001:db8::10]:443/tcp  -          0/2           0.00%  yes (below threshold)");
    EXPECT_HAS(out, "pending\n");
    EXPECT_HAS(out, "[2001:db8::10]:443/tcp: last error: publish rings: Operation not permitted\n");
    expect_aligned(out, {"VIP", "NAME", "BACKENDS", "PANIC", "EPOCH", "CHECKSUM", "TABLE"});

    json not_ready = status_reply();
    not_ready["ready"] = false;
    not_ready["vips"] = json::array();
    const std::string empty = render_human(cmd(Verb::kStatus), not_ready, kColour);
    EXPECT_HAS(empty, "\x1b[31mnot ready\x1b[0m");
    EXPECT_HAS(empty, "no VIPs (add one: xlbctl vip add ADDRESS:PORT/PROTO)");
    EXPECT_EQ(empty.find("last reload"), std::string::npos) << "no reload yet: no line";

    json reloaded = status_reply();
    reloaded["last_reload"] = {{"time", "2026-12-01T15:02:11Z"},
                               {"source", "SIGHUP"},
                               {"result", "disruptive_refused"},
                               {"error", "1 change(s) would move flows"}};
    EXPECT_HAS(
        render_human(cmd(Verb::kStatus), reloaded, kPlain),
        "last reload: 2026-12-01T15:02:11Z (SIGHUP): rejected (disruptive_refused): 1 change(s) "
        "would move flows\n");
    reloaded["last_reload"] = {{"time", "2026-12-01T15:03:00Z"},
                               {"source", "api"},
                               {"result", "applied"},
                               {"error", nullptr}};
    EXPECT_HAS(render_human(cmd(Verb::kStatus), reloaded, kPlain),
               "last reload: 2026-12-01T15:03:00Z (api): applied\n");
}

json reload_report(const std::string& result) {
    return json{
        {"time", "2026-12-01T15:02:11Z"},
        {"source", "api"},
        {"result", result},
        {"error", result == "applied" ? json(nullptr) : json("x.yaml has 1 error(s)")},
        {"errors", result == "invalid" ? json::array({"x.yaml:3:7: found 'a', expected a port"})
                                       : json::array()},
        {"added", json::array({"198.51.100.30:80/tcp"})},
        {"removed", json::array()},
        {"changed", json::array({"198.51.100.10:80/tcp", "[2001:db8::10]:443/tcp"})},
        {"untouched", 2},
        {"settings_changed", json::array({"mtu"})},
        {"restart_required", json::array({"api.socket"})},
        {"disruptive", json::array()},
        {"warnings", json::array({"w1"})}};
}

TEST(XlbctlRender, ReloadAppliedAndRejected) {
    const std::string applied = render_human(cmd(Verb::kReload), reload_report("applied"), kPlain);
    EXPECT_HAS(applied,
               "reload applied: added 198.51.100.30:80/tcp; removed none; changed "
               "198.51.100.10:80/tcp, [2001:db8::10]:443/tcp; 2 VIP(s) untouched\n");
    EXPECT_HAS(applied, "settings changed: mtu\n");
    EXPECT_HAS(applied, "takes effect at the next restart: api.socket\n");
    EXPECT_HAS(applied, "warning: w1\n");
    const std::string invalid = render_human(cmd(Verb::kReload), reload_report("invalid"), kPlain);
    EXPECT_HAS(invalid, "reload rejected (invalid): x.yaml has 1 error(s)\n");
    EXPECT_HAS(invalid, "  x.yaml:3:7: found 'a', expected a port\n");
    EXPECT_HAS(invalid, "the running configuration stays\n");
    EXPECT_EQ(invalid.find("reload applied"), std::string::npos);
}

TEST(XlbctlRender, StatusColours) {
    const std::string out = render_human(cmd(Verb::kStatus), status_reply(), kColour);
    EXPECT_HAS(out, "\x1b[32mready\x1b[0m");
    EXPECT_HAS(out, "\x1b[31myes (below threshold)\x1b[0m");
    EXPECT_HAS(out, "\x1b[31m0/2\x1b[0m");
    EXPECT_HAS(out, "\x1b[33mpending\x1b[0m");
}

json vip_list_reply() {
    json web = vip_summary("198.51.100.10:80/tcp", "web", 2, 3);
    web["spec"] = json{{"address", "198.51.100.10"}, {"port", 80},
                       {"protocol", "tcp"},          {"name", "web"},
                       {"hash", "5tuple"},           {"conntrack", true},
                       {"ring_size", 65537},         {"panic_threshold", 0.5}};
    json dns = vip_summary("198.51.100.53:53/udp", "", 1, 1);
    dns["spec"] = json{{"address", "198.51.100.53"}, {"port", 53},
                       {"protocol", "udp"},          {"name", ""},
                       {"hash", "source"},           {"conntrack", false},
                       {"ring_size", 251},           {"panic_threshold", 0.0}};
    return json{{"vips", {web, dns}}};
}

TEST(XlbctlRender, VipList) {
    const std::string out = render_human(cmd(Verb::kVipList), vip_list_reply(), kPlain);
    EXPECT_EQ(out,
              "VIP                   NAME  HASH    CONNTRACK   RING  PANIC AT  BACKENDS  EPOCH  "
              "PANIC  TABLE\n"
              "198.51.100.10:80/tcp  web   5tuple  yes        65537       50%       2/3      3  "
              "no     live\n"
              "198.51.100.53:53/udp  -     source  no           251        0%       1/1      3  "
              "no     live\n");
    Command quiet = cmd(Verb::kVipList);
    quiet.quiet = true;
    EXPECT_EQ(render_human(quiet, vip_list_reply(), kColour),
              "198.51.100.10:80/tcp\n198.51.100.53:53/udp\n");
    EXPECT_HAS(render_human(cmd(Verb::kVipList), json{{"vips", json::array()}}, kPlain), "no VIPs");
}

json backends_reply() {
    return json{
        {"vip", "198.51.100.10:80/tcp"},
        {"epoch", 3},
        {"checksum", "5bf6441c8ac68df2"},
        {"backends",
         {backend("203.0.113.11", "active", "healthy", 100, 43691, 0.6666717),
          backend("203.0.113.12", "drain", "unknown", 50, 0, 0.0),
          backend("203.0.113.13", "active", "unhealthy", 50, 21846, 0.3333282, nullptr, nullptr)}}};
}

TEST(XlbctlRender, BackendList) {
    json reply = backends_reply();
    reply["backends"][2]["last_failure"] = "connect: connection refused";
    const std::string out = render_human(cmd(Verb::kBackendList), reply, kPlain);
    EXPECT_EQ(
        out,
        "VIP 198.51.100.10:80/tcp  epoch 3  checksum 5bf6441c8ac68df2\n"
        "ADDRESS       STATE   HEALTH     WEIGHT  EFFECTIVE  SLOTS   SHARE  ACTIVE  INACTIVE  "
        "NEW/S  PACKETS    BYTES  LAST FAILURE\n"
        "203.0.113.11  active  healthy       100        100  43691  66.67%     812        95  "
        " 12/s   614901  516 MiB  -\n"
        "203.0.113.12  drain   unknown        50          0      0   0.00%     812        95  "
        " 12/s   614901  516 MiB  -\n"
        "203.0.113.13  active  unhealthy      50         50  21846  33.33%       -         -  "
        "    -        -        -  connect: connection refused\n");
    const std::string coloured = render_human(cmd(Verb::kBackendList), reply, kColour);
    EXPECT_HAS(coloured, "\x1b[33mdrain\x1b[0m");
    EXPECT_HAS(coloured, "\x1b[31munhealthy\x1b[0m");
    EXPECT_HAS(coloured, "\x1b[32mhealthy\x1b[0m");

    Command quiet = cmd(Verb::kBackendList);
    quiet.quiet = true;
    EXPECT_EQ(render_human(quiet, reply, kPlain), "203.0.113.11\n203.0.113.12\n203.0.113.13\n");

    // Shared probes: a line after the table names them.
    EXPECT_EQ(out.find("shared"), std::string::npos);
    reply["backends"][0]["probe_shared_with"] = json::array({"198.51.100.11:80/tcp"});
    reply["backends"][1]["probe_shared_with"] = json::array();
    reply["backends"][2]["probe_shared_with"] =
        json::array({"198.51.100.11:80/tcp", "198.51.100.12:80/tcp"});
    EXPECT_TRUE(render_human(cmd(Verb::kBackendList), reply, kPlain)
                    .ends_with("-  connect: connection refused\n"
                               "health probe shared with other VIPs' identical checks: "
                               "203.0.113.11 (with 198.51.100.11:80/tcp), 203.0.113.13 (with 2 "
                               "VIPs)\n"));

    reply["backends"] = json::array();
    EXPECT_HAS(render_human(cmd(Verb::kBackendList), reply, kPlain),
               "no backends (add one: xlbctl backend add 198.51.100.10:80/tcp ADDR)");
}

// GET /v1/backend/history as docs/api.md shows it.
json history_reply() {
    return json::parse(R"({
      "vip": "198.51.100.10:80/tcp", "address": "203.0.113.11", "health": "healthy",
      "checked": true, "capacity": 20,
      "history": [
        {"time": "2026-12-01T15:02:11.250Z", "from": "unknown", "to": "healthy",
         "cause": "consecutive_successes", "probe": "passed", "reason": "2 consecutive successes"},
        {"time": "2026-12-01T16:40:03.112Z", "from": "healthy", "to": "unhealthy",
         "cause": "consecutive_failures", "probe": "refused",
         "reason": "2 consecutive failures, last: connection refused"},
        {"time": "2026-12-01T16:41:07.845Z", "from": "unhealthy", "to": "healthy",
         "cause": "consecutive_successes", "probe": "passed",
         "reason": "2 consecutive successes; slow start"}]})");
}

TEST(XlbctlRender, BackendHistoryOldestFirst) {
    const json reply = history_reply();
    EXPECT_EQ(render_human(cmd(Verb::kBackendHistory), reply, kPlain),
              "VIP 198.51.100.10:80/tcp backend 203.0.113.11: healthy; 3 verdict changes (the "
              "agent keeps the last 20)\n"
              "TIME                      FROM       TO         REASON\n"
              "2026-12-01T15:02:11.250Z  unknown    healthy    2 consecutive successes\n"
              "2026-12-01T16:40:03.112Z  healthy    unhealthy  2 consecutive failures, last: "
              "connection refused\n"
              "2026-12-01T16:41:07.845Z  unhealthy  healthy    2 consecutive successes; slow "
              "start\n");
    const std::string coloured = render_human(cmd(Verb::kBackendHistory), reply, kColour);
    EXPECT_HAS(coloured, "\x1b[31munhealthy\x1b[0m");
    EXPECT_HAS(coloured, "\x1b[33munknown\x1b[0m");
}

TEST(XlbctlRender, BackendHistoryEmptyUncheckedOrOff) {
    json reply = history_reply();
    reply["history"] = json::array();
    reply["health"] = "unknown";
    EXPECT_EQ(render_human(cmd(Verb::kBackendHistory), reply, kPlain),
              "VIP 198.51.100.10:80/tcp backend 203.0.113.11: unknown; no verdict change since "
              "the agent started\n");
    reply["capacity"] = 0;
    EXPECT_EQ(render_human(cmd(Verb::kBackendHistory), reply, kPlain),
              "VIP 198.51.100.10:80/tcp backend 203.0.113.11: unknown; health_history is 0: the "
              "agent keeps no verdict changes\n");
    reply["checked"] = false;
    reply["health"] = "healthy";
    EXPECT_EQ(render_human(cmd(Verb::kBackendHistory), reply, kPlain),
              "VIP 198.51.100.10:80/tcp backend 203.0.113.11: healthy, not health-checked (its "
              "VIP has no health_check, or the backend is disabled): no history\n");
    reply.erase("history");
    reply["checked"] = true;
    reply["capacity"] = 20;
    EXPECT_THROW(render_human(cmd(Verb::kBackendHistory), reply, kPlain), json::exception)
        << "a reply without its history is malformed";
}

// Without a VIP: one section per VIP, as each VIP's own list shows it.
TEST(XlbctlRender, BackendListOfEveryVip) {
    json first = backends_reply();
    json second = backends_reply();
    second["vip"] = "198.51.100.20:0/tcp";
    second["backends"] = json::array();
    const json all = {{"vips", {first, second}}};
    const std::string out = render_human(cmd(Verb::kBackendList), all, kPlain);
    EXPECT_EQ(out, render_human(cmd(Verb::kBackendList), first, kPlain) + "\n" +
                       render_human(cmd(Verb::kBackendList), second, kPlain));
    Command quiet = cmd(Verb::kBackendList);
    quiet.quiet = true;
    EXPECT_EQ(render_human(quiet, all, kPlain), "203.0.113.11\n203.0.113.12\n203.0.113.13\n");
    EXPECT_EQ(render_human(cmd(Verb::kBackendList), json{{"vips", json::array()}}, kPlain),
              "no VIPs (add one: xlbctl vip add VIP)\n");
}

json vip_detail(json backends) {
    json v = vip_summary("198.51.100.10:80/tcp", "web", 2, 2);
    v["epoch"] = 4;
    v["backends"] = std::move(backends);
    return v;
}

TEST(XlbctlRender, BackendChanges) {
    // Each verb on the same reply: the whole line, or (exact false) a part.
    struct Case {
        Verb verb;
        bool exact;
        std::string says;
    };
    const Case cases[] = {
        {Verb::kBackendAdd, true,
         "added backend 203.0.113.14 to 198.51.100.10:80/tcp: weight 50 (effective 50), "
         "21846 slots (33.33%), epoch 4\n"},
        {Verb::kBackendSet, true,
         "backend 203.0.113.14 of 198.51.100.10:80/tcp: weight 50 (effective 50), 21846 "
         "slots (33.33%), epoch 4\n"},
        {Verb::kBackendEnable, false, "is active: weight 50"},
        {Verb::kBackendDrain, true,
         "backend 203.0.113.14 of 198.51.100.10:80/tcp is draining: no new flows, "
         "established flows stay; epoch 4\n"},
        {Verb::kBackendDisable, false, "is disabled: out of the table"},
        {Verb::kBackendDel, true,
         "removed backend 203.0.113.14 from 198.51.100.10:80/tcp: its flows moved to the "
         "others, epoch 4\n"},
    };
    const json reply =
        vip_detail({backend("203.0.113.11", "active", "healthy", 100, 43691, 0.6667),
                    backend("203.0.113.14", "active", "healthy", 50, 21846, 0.3333)});
    for (const Case& k : cases) {
        Command c = cmd(k.verb);
        c.backend = *net::IpAddress::parse("203.0.113.14");
        const std::string text = render_human(c, reply, kPlain);
        if (k.exact) {
            EXPECT_EQ(text, k.says);
        } else {
            EXPECT_HAS(text, k.says);
        }
    }
}

// --cookie-acks given: the line says what the backend now takes.
TEST(XlbctlRender, BackendCookieAcks) {
    const json reply = vip_detail({backend("203.0.113.14", "active", "healthy", 50, 21846, 1.0)});
    Command set = cmd(Verb::kBackendSet);
    set.backend = *net::IpAddress::parse("203.0.113.14");
    set.cookie_acks = false;
    EXPECT_EQ(render_human(set, reply, kPlain),
              "backend 203.0.113.14 of 198.51.100.10:80/tcp: weight 50 (effective 50), 21846 "
              "slots (100.00%), takes no cookie ACKs, epoch 4\n");
    Command add = cmd(Verb::kBackendAdd);
    add.backend = set.backend;
    add.cookie_acks = true;
    EXPECT_HAS(render_human(add, reply, kPlain),
               "21846 slots (100.00%), accepts cookie ACKs, epoch 4\n");
}

// --server-id given: the line says what the backend's id now is.
TEST(XlbctlRender, BackendServerId) {
    const json reply = vip_detail({backend("203.0.113.14", "active", "healthy", 50, 21846, 1.0)});
    Command set = cmd(Verb::kBackendSet);
    set.backend = *net::IpAddress::parse("203.0.113.14");
    set.server_id.emplace(7);
    EXPECT_HAS(render_human(set, reply, kPlain), "21846 slots (100.00%), server id 7, epoch 4\n");
    set.server_id.emplace();
    EXPECT_HAS(render_human(set, reply, kPlain), "21846 slots (100.00%), no server id, epoch 4\n");
}

// A QUIC VIP's backends: a SERVER ID column once one has an id, "-" for
// those without.
TEST(XlbctlRender, BackendListServerIds) {
    json reply = backends_reply();
    EXPECT_EQ(render_human(cmd(Verb::kBackendList), reply, kPlain).find("SERVER ID"),
              std::string::npos);
    reply["backends"][0]["server_id"] = 7;
    reply["backends"][2]["server_id"] = 65535;
    const std::string out = render_human(cmd(Verb::kBackendList), reply, kPlain);
    EXPECT_HAS(out, "ADDRESS       SERVER ID  STATE   HEALTH     WEIGHT");
    EXPECT_HAS(out, "203.0.113.11          7  active  healthy");
    EXPECT_HAS(out, "203.0.113.12          -  drain   unknown");
    EXPECT_HAS(out, "203.0.113.13      65535  active  unhealthy");
}

TEST(XlbctlRender, VipAddAndDel) {
    json reply = vip_detail({backend("203.0.113.11", "active", "healthy", 100, 251, 1.0)});
    reply["epoch"] = 1;
    EXPECT_EQ(render_human(cmd(Verb::kVipAdd), reply, kPlain),
              "added VIP 198.51.100.10:80/tcp: 1 backend, epoch 1, checksum 5bf6441c8ac68df2\n");
    EXPECT_EQ(render_human(cmd(Verb::kVipDel),
                           json{{"vip", "198.51.100.10:80/tcp"}, {"deleted", true}}, kPlain),
              "deleted VIP 198.51.100.10:80/tcp\n");
}

TEST(XlbctlRender, PendingWarning) {
    json reply = vip_detail(json::array());
    EXPECT_EQ(pending_warning(cmd(Verb::kBackendAdd), reply), "");
    reply["published"] = false;
    reply["last_error"] = "publish rings: No space left on device";
    EXPECT_EQ(pending_warning(cmd(Verb::kBackendAdd), reply),
              "backend add 198.51.100.10:80/tcp: persisted, but not live yet: publish rings: No "
              "space left on device (the agent retries; xlbctl status shows when it is)");
}

TEST(XlbctlRender, DryRun) {
    Command c = cmd(Verb::kBackendAdd);
    c.backend = *net::IpAddress::parse("203.0.113.14");
    c.dry_run = true;
    json reply{{"vip", "198.51.100.10:80/tcp"},
               {"dry_run", true},
               {"epoch", 3},
               {"ring_size", 65537},
               {"checksum", "0123456789abcdef"},
               {"slots_moved", 16384},
               {"share_moved", 16384.0 / 65537},
               {"backends",
                {{{"address", "203.0.113.11"},
                  {"slots_before", 32769},
                  {"slots_after", 24576},
                  {"share_before", 32769.0 / 65537},
                  {"share_after", 24576.0 / 65537}},
                 {{"address", "203.0.113.14"},
                  {"slots_before", 0},
                  {"slots_after", 16384},
                  {"share_before", 0.0},
                  {"share_after", 16384.0 / 65537}}}}};
    const std::string text = render_human(c, reply, kPlain);
    EXPECT_HAS(text,
               "dry run of backend add 198.51.100.10:80/tcp 203.0.113.14: nothing was changed");
    EXPECT_HAS(text,
               "16384 of 65537 slots (25.00% of new flows) would change backend; live epoch 3");
    EXPECT_HAS(text, "-8193");
    EXPECT_HAS(text, "+16384");
    // the rows line up under the header
    const auto lines = [&] {
        std::vector<std::string> out;
        std::size_t at = 0;
        while (at < text.size()) {
            const std::size_t end = text.find('\n', at);
            out.push_back(text.substr(at, end - at));
            at = end + 1;
        }
        return out;
    }();
    ASSERT_EQ(lines.size(), 5u) << text;
    EXPECT_EQ(lines[2].size(), lines[3].size()) << text;
    EXPECT_EQ(pending_warning(c, json{{"published", false}}), "") << "a dry run is never pending";
}

TEST(XlbctlRender, Table) {
    json reply{{"vip", "198.51.100.10:80/tcp"},
               {"epoch", 3},
               {"checksum", "5bf6441c8ac68df2"},
               {"published", true},
               {"ring_size", 65537},
               {"configured_ring_size", 65537},
               {"backends",
                {{{"address", "203.0.113.11"},
                  {"in_table", true},
                  {"slots", 21846},
                  {"share", 0.33333841951874515},
                  {"target_share", 0.3333333333333333}},
                 {{"address", "203.0.113.12"},
                  {"in_table", false},
                  {"slots", 0},
                  {"share", 0.0},
                  {"target_share", 0.0}}}}};
    EXPECT_EQ(render_human(cmd(Verb::kTable), reply, kPlain),
              "VIP 198.51.100.10:80/tcp  epoch 3  checksum 5bf6441c8ac68df2  65537 slots  live\n"
              "BACKEND       SLOTS   SHARE  TARGET  DEVIATION  IN TABLE\n"
              "203.0.113.11  21846  33.33%  33.33%     +0.00%  yes\n"
              "203.0.113.12      0   0.00%       -          -  no\n");
    reply["ring_size"] = 0;
    reply["published"] = false;
    const std::string empty = render_human(cmd(Verb::kTable), reply, kPlain);
    EXPECT_HAS(empty, "0 slots (configured 65537)  pending\n");
    EXPECT_HAS(empty, "empty table: no backend can take new flows\n");
}

TEST(XlbctlRender, Lookup) {
    json reply{{"vip", "198.51.100.10:80/tcp"},
               {"src", "192.0.2.7:40000"},
               {"dport", 80},
               {"proto", "tcp"},
               {"hash", 3954743863u},
               {"ring_size", 65537},
               {"slot", 44672},
               {"backend_id", 2},
               {"backend", "203.0.113.13"},
               {"outcome", "tx"},
               {"epoch", 3}};
    EXPECT_EQ(render_human(cmd(Verb::kLookup), reply, kPlain),
              "198.51.100.10:80/tcp: a new tcp flow from 192.0.2.7:40000 to port 80 goes to "
              "203.0.113.13\n"
              "  backend id 2, slot 44672 of 65537, hash 3954743863 (0xebb89a37), epoch 3\n");
    reply["outcome"] = "drop_no_backend";
    reply["backend"] = nullptr;
    reply["backend_id"] = nullptr;
    reply["slot"] = nullptr;
    reply["ring_size"] = 0;
    EXPECT_EQ(render_human(cmd(Verb::kLookup), reply, kPlain),
              "198.51.100.10:80/tcp: a new tcp flow from 192.0.2.7:40000 to port 80 is dropped: "
              "the table is empty: no backend can take traffic (drop_no_backend)\n"
              "  hash 3954743863 (0xebb89a37), epoch 3\n");
}

json stats_reply(std::uint64_t tx, std::uint64_t packets, std::uint64_t bytes,
                 std::uint64_t drops = 0) {
    json outcomes = json::object();
    for (const char* name : {"tx", "pass_not_vip", "drop_no_backend", "drop_malformed_l4"})
        outcomes[name] = 0;
    outcomes["tx"] = tx;
    outcomes["pass_not_vip"] = 5120;
    outcomes["drop_no_backend"] = drops;
    return json{{"outcomes", outcomes},
                {"vips",
                 {{{"vip", "198.51.100.10:80/tcp"},
                   {"name", "web"},
                   {"packets", packets},
                   {"bytes", bytes},
                   {"new_flows", packets / 40},
                   {"conntrack_hits", packets - packets / 40},
                   {"drops", drops},
                   {"second_chance_hints", 12}},
                  {{"vip", "198.51.100.20:0/tcp"},
                   {"name", ""},
                   {"packets", nullptr},
                   {"bytes", nullptr},
                   {"new_flows", nullptr},
                   {"conntrack_hits", nullptr},
                   {"drops", nullptr}}}}};
}

TEST(XlbctlRender, Stats) {
    const std::string out =
        render_human(cmd(Verb::kStats), stats_reply(1843220, 1843223, 1622036480, 3), kPlain);
    EXPECT_EQ(out,
              "VIP                   NAME  PACKETS     BYTES  NEW FLOWS  CT HITS  DROPS  HINTED\n"
              "198.51.100.10:80/tcp  web   1843223  1.51 GiB      46080  1797143      3      12\n"
              "198.51.100.20:0/tcp   -           -         -          -        -      -       -\n"
              "\n"
              "OUTCOME (every packet the program saw)  PACKETS\n"
              "tx                                      1843220\n"
              "pass_not_vip                               5120\n"
              "drop_no_backend                               3\n");
    EXPECT_HAS(render_human(cmd(Verb::kStats), stats_reply(1, 1, 1, 3), kColour),
               "\x1b[31mdrop_no_backend\x1b[0m");
}

TEST(XlbctlRender, WatchRates) {
    const json before = stats_reply(1000, 1000, 1'000'000);
    const json after = stats_reply(21000, 21000, 126'000'000, 10);
    const json s = watch_sample(before, after, 2.0, "2026-01-02T03:04:05Z");
    EXPECT_EQ(s["time"], "2026-01-02T03:04:05Z");
    EXPECT_EQ(s["interval_s"], 2.0);
    EXPECT_EQ(s["outcomes"]["tx"], 21000) << "totals kept";
    EXPECT_DOUBLE_EQ(s["outcomes_per_s"]["tx"].get<double>(), 10000.0);
    EXPECT_DOUBLE_EQ(s["outcomes_per_s"]["pass_not_vip"].get<double>(), 0.0);
    const json& web = s["vips"][0];
    EXPECT_DOUBLE_EQ(web["packets_per_s"].get<double>(), 10000.0);
    EXPECT_DOUBLE_EQ(web["bytes_per_s"].get<double>(), 62'500'000.0);
    EXPECT_DOUBLE_EQ(web["bits_per_s"].get<double>(), 500'000'000.0);
    EXPECT_DOUBLE_EQ(web["new_flows_per_s"].get<double>(), 250.0);
    EXPECT_DOUBLE_EQ(web["drops_per_s"].get<double>(), 5.0);
    EXPECT_TRUE(s["vips"][1]["packets_per_s"].is_null()) << "no VIP id: no counters, no rate";

    const std::string out = render_watch(s, kPlain);
    EXPECT_HAS(out, "every 2s  2026-01-02T03:04:05Z  (Ctrl-C to stop)\n");
    EXPECT_HAS(out, "10.0 kpps");
    EXPECT_HAS(out, "500 Mbit/s");
    EXPECT_HAS(out, "250/s");
    EXPECT_HAS(out, "    5/s");
    EXPECT_HAS(out, "120 MiB");
    expect_aligned(out, {"VIP", "NAME", "PACKETS", "THROUGHPUT", "NEW FLOWS", "CT HITS", "DROPS"});
    EXPECT_HAS(out, "OUTCOME (every packet the program saw)       RATE  TOTAL\n");
}

TEST(XlbctlRender, WatchCounterReset) {
    // Maps recreated between samples: counters went back; no negative rate.
    const json s = watch_sample(stats_reply(5000, 5000, 5000), stats_reply(10, 10, 10), 1.0, "t");
    EXPECT_DOUBLE_EQ(s["vips"][0]["packets_per_s"].get<double>(), 0.0);
    EXPECT_DOUBLE_EQ(s["outcomes_per_s"]["tx"].get<double>(), 0.0);
}

json conntrack_status() {
    return json{{"capacity", 4096},
                {"requested_capacity", 4096},
                {"entries", 1234},
                {"insert_rate_per_cpu", 81},
                {"insert_burst", 81},
                {"inserts", 50000},
                {"skipped_inserts", 0},
                {"expired", 12},
                {"flooded_cpus", json::array()},
                {"last_sweep_ms", 12.5}};
}

TEST(XlbctlRender, StatusConntrackLine) {
    EXPECT_EQ(render_human(cmd(Verb::kStatus), status_reply(), kPlain).find("conntrack:"),
              std::string::npos)
        << "an agent without \"conntrack\": no line";
    json r = status_reply();
    r["conntrack"] = conntrack_status();
    EXPECT_HAS(render_human(cmd(Verb::kStatus), r, kPlain),
               "\nconntrack: 1234 of 4096 entries (30.13%), insert budget 81/s per CPU (burst 81), "
               "0 skipped inserts\n");
    r["conntrack"]["skipped_inserts"] = 1;
    r["conntrack"]["flooded_cpus"] = {0, 3};
    r["conntrack"]["insert_rate_per_cpu"] = 0;
    r["conntrack"]["requested_capacity"] = 8192;
    EXPECT_HAS(render_human(cmd(Verb::kStatus), r, kPlain),
               "conntrack: 1234 of 4096 entries (30.13%) (maps.conntrack_entries is 8192: kept "
               "the pinned size; conntrack.resize: replace resizes), insert budget unlimited, 1 "
               "skipped insert; under flood on CPU 0, 3\n");
    EXPECT_HAS(render_human(cmd(Verb::kStatus), r, kColour), "\x1b[31munder flood on CPU 0, 3");
    r["conntrack"]["entries"] = 4000;
    EXPECT_HAS(render_human(cmd(Verb::kStatus), r, kColour),
               "\x1b[33m4000 of 4096 entries (97.66%)");
    // Yellow from 75%: most 4-entry sets are full by then.
    r["conntrack"]["entries"] = 3072;
    EXPECT_HAS(render_human(cmd(Verb::kStatus), r, kColour),
               "\x1b[33m3072 of 4096 entries (75.00%)");
    r["conntrack"]["entries"] = 3071;
    EXPECT_HAS(render_human(cmd(Verb::kStatus), r, kColour),
               "conntrack: 3071 of 4096 entries (74.98%)\x1b[33m (maps");
}

json count_reply() {
    return json::parse(R"({"capacity": 4096, "scanned": 1234, "matched": 20, "scan_ms": 3.25,
        "active_within": "30s",
        "vips": [{"vip": "198.51.100.10:80/tcp", "entries": 20, "stale": 2,
                  "backends": [{"backend": "203.0.113.11", "entries": 10},
                               {"backend": "203.0.113.12", "entries": 8},
                               {"backend": null, "entries": 2}]}],
        "no_vip": 0})");
}

TEST(XlbctlRender, ConntrackCount) {
    json r = count_reply();
    std::string out = render_human(cmd(Verb::kConntrackCount), r, kPlain);
    EXPECT_EQ(out,
              "VIP                   BACKEND       ENTRIES  STALE\n"
              "198.51.100.10:80/tcp  (all)              20      2\n"
              "                      203.0.113.11       10      -\n"
              "                      203.0.113.12        8      -\n"
              "                      unknown             2      -\n"
              "20 entries matched (active within 30s); table: 1234 of 4096 entries (30.13%), "
              "scanned in 3.25 ms\n");
    r["no_vip"] = 7;
    r["active_within"] = nullptr;
    out = render_human(cmd(Verb::kConntrackCount), r, kPlain);
    EXPECT_HAS(out, "(no VIP)                                  7      -\n");
    EXPECT_HAS(out, "20 entries matched; table:");
    r["vips"] = json::array();
    r["no_vip"] = 0;
    r["matched"] = 1;
    EXPECT_EQ(render_human(cmd(Verb::kConntrackCount), r, kPlain),
              "no entries match\n1 entry matched; table: 1234 of 4096 entries (30.13%), scanned "
              "in 3.25 ms\n");
}

json list_reply(bool truncated) {
    json r = json::parse(R"({"capacity": 4096, "scanned": 1234, "matched": 2, "truncated": false,
        "scan_ms": 4,
        "entries": [
          {"client": "192.0.2.1:40000", "destination": "198.51.100.10:80", "protocol": "tcp",
           "vip": "198.51.100.10:80/tcp", "backend": "203.0.113.11", "backend_id": 3,
           "generation": 1, "state": "valid", "idle_ms": 400, "age_ms": 125000,
           "fin_seen": true, "rst_seen": false},
          {"client": "[2001:db8:c::7]:5353", "destination": "[2001:db8::99]:53",
           "protocol": "udp", "vip": null, "backend": null, "backend_id": 9, "generation": 4,
           "state": "stale", "idle_ms": 45000, "age_ms": 3725000,
           "fin_seen": null, "rst_seen": null}]})");
    if (truncated) {
        r["truncated"] = true;
        r["matched"] = 5000;
    }
    return r;
}

TEST(XlbctlRender, ConntrackList) {
    std::string out = render_human(cmd(Verb::kConntrackList), list_reply(false), kPlain);
    EXPECT_EQ(out,
              "CLIENT                VIP                             BACKEND         STATE  IDLE  "
              "     AGE  CLIENT SENT\n"
              "192.0.2.1:40000       198.51.100.10:80/tcp            203.0.113.11    valid  0.4s  "
              "   2m 5s  FIN\n"
              "[2001:db8:c::7]:5353  [2001:db8::99]:53/udp (no VIP)  id 9 (unknown)  stale   45s  "
              "1h 2m 5s\n"
              "2 entries matched\n"
              "table: 1234 of 4096 entries (30.13%), scanned in 4 ms\n");
    expect_aligned(out, {"CLIENT", "VIP", "BACKEND", "STATE", "IDLE", "AGE", "CLIENT SENT"});
    EXPECT_HAS(render_human(cmd(Verb::kConntrackList), list_reply(true), kPlain),
               "showing 2 of 5000 matching entries (truncated: --limit N shows more)\n");
    json r = list_reply(true);
    r["matched"] = 2;
    EXPECT_HAS(render_human(cmd(Verb::kConntrackList), r, kPlain),
               "showing the first 2 entries; more entries match");
    EXPECT_HAS(render_human(cmd(Verb::kConntrackList), list_reply(false), kColour),
               "\x1b[33mstale\x1b[0m");
    r["entries"] = json::array();
    r["truncated"] = false;
    r["matched"] = 0;
    EXPECT_HAS(render_human(cmd(Verb::kConntrackList), r, kPlain),
               "no entries match\n0 entries matched\n");
}

TEST(XlbctlRender, ConntrackFlush) {
    json r{{"matched", 12}, {"deleted", 0}, {"dry_run", true}, {"scan_ms", 2.5}};
    EXPECT_EQ(render_human(cmd(Verb::kConntrackFlush), r, kPlain),
              "would delete 12 entries (scanned in 2.5 ms); dry run: nothing deleted\n");
    r = {{"matched", 12}, {"deleted", 12}, {"dry_run", false}, {"scan_ms", 2.5}};
    EXPECT_EQ(render_human(cmd(Verb::kConntrackFlush), r, kPlain),
              "deleted 12 entries (scanned in 2.5 ms)\n");
    r["deleted"] = 1;
    EXPECT_EQ(render_human(cmd(Verb::kConntrackFlush), r, kPlain),
              "deleted 1 entry of 12 matched (the others ended or changed meanwhile) (scanned in "
              "2.5 ms)\n");
}

json cookies(const char* mode, const char* state, json reason, std::uint64_t sent,
             std::uint64_t valid, std::uint64_t invalid) {
    return json{{"mode", mode},           {"state", state},       {"reason", reason},
                {"syns", sent + 100},     {"cookies_sent", sent}, {"acks_valid", valid},
                {"acks_invalid", invalid}};
}

json syn_flood(const char* state, std::uint64_t floods) {
    return json{{"state", state},
                {"since", "2026-12-06T22:00:00Z"},
                {"floods", floods},
                {"peak_rate", 45000.4},
                {"peak_cpu", floods ? json(3) : json()},
                {"rate_per_cpu", {0.0, 45000.4}},
                {"start_rate", 20000},
                {"end_rate", 10000},
                {"end_after_ms", 5000}};
}

TEST(XlbctlRender, StatusShowsSynCookies) {
    json r = status_reply();
    r["syn_flood"] = syn_flood("answering", 2);
    r["vips"][0]["syn_cookies"] = cookies("auto", "answering", nullptr, 8000, 70, 3);
    r["vips"][1]["syn_cookies"] = cookies("off", "off", "encap is not gue", 0, 0, 0);
    const std::string out = render_human(cmd(Verb::kStatus), r, kPlain);
    EXPECT_HAS(out,
               "SYN flood: answering since 2026-12-06T22:00:00Z (peak 45000 SYNs/s on CPU 3): "
               "VIPs on auto answer SYNs with cookies\n");
    EXPECT_HAS(out, "TABLE    SYN COOKIES             COOKIES SENT  ACKS VALID  ACKS INVALID\n");
    EXPECT_HAS(out, "live     answering                       8000          70             3\n");
    EXPECT_HAS(out, "off (encap is not gue)             0           0             0\n");
    expect_aligned(
        out, {"VIP", "NAME", "TABLE", "SYN COOKIES", "COOKIES SENT", "ACKS VALID", "ACKS INVALID"});
    EXPECT_HAS(render_human(cmd(Verb::kStatus), r, kColour), "\x1b[31manswering\x1b[0m since");

    r["syn_flood"] = syn_flood("recent", 2);
    EXPECT_HAS(render_human(cmd(Verb::kStatus), r, kPlain),
               "SYN flood: recent (ended 2026-12-06T22:00:00Z, peak 45000 SYNs/s on CPU 3): SYNs "
               "go to backends, cookies already sent are still accepted\n");
    r["syn_flood"] = syn_flood("calm", 0);
    EXPECT_HAS(render_human(cmd(Verb::kStatus), r, kPlain),
               "SYN flood: calm (answers over 20000 SYNs/s on a CPU; 0 floods so far)\n");

    // Every VIP off: the state says why, no counter columns.
    r["vips"][0]["syn_cookies"] = cookies("off", "off", nullptr, 0, 0, 0);
    const std::string off = render_human(cmd(Verb::kStatus), r, kPlain);
    EXPECT_HAS(off, "SYN COOKIES\n");
    EXPECT_EQ(off.find("COOKIES SENT"), std::string::npos) << off;
    // An agent before cookies: neither the line nor the column.
    const std::string old = render_human(cmd(Verb::kStatus), status_reply(), kPlain);
    EXPECT_EQ(old.find("SYN"), std::string::npos) << old;
}

TEST(XlbctlRender, TopShowsCookieRates) {
    auto backends_reply = [](std::uint64_t packets) {
        return json{
            {"vips",
             {{{"vip", "198.51.100.10:80/tcp"},
               {"epoch", 3},
               {"backends",
                {backend("203.0.113.11", "active", "healthy", 100, 251, 1.0, json(packets))}}}}}};
    };
    auto stats_reply = [](std::uint64_t n, const char* state) {
        json v = {{"vip", "198.51.100.10:80/tcp"},
                  {"name", "web"},
                  {"packets", n},
                  {"bytes", n * 100},
                  {"new_flows", n / 10},
                  {"conntrack_hits", n},
                  {"drops", 0},
                  {"syn_cookies", cookies("auto", state, nullptr, n, n / 100, n / 10)}};
        return json{{"vips", {v}}, {"syn_flood", syn_flood(state, 1)}};
    };
    const json sample =
        top_sample(backends_reply(1000), stats_reply(1000, "auto idle"), backends_reply(3000),
                   stats_reply(5000, "answering"), 2.0, "2026-12-06T22:00:02Z");
    const json& k = sample["vips"][0]["syn_cookies"];
    EXPECT_EQ(k["state"], "answering") << "as of the last reply";
    EXPECT_DOUBLE_EQ(k["cookies_sent_per_s"].get<double>(), 2000.0);
    EXPECT_DOUBLE_EQ(k["acks_valid_per_s"].get<double>(), 20.0);
    EXPECT_DOUBLE_EQ(k["acks_invalid_per_s"].get<double>(), 200.0);
    EXPECT_DOUBLE_EQ(k["syns_per_s"].get<double>(), 2000.0);
    EXPECT_EQ(sample["syn_flood"]["state"], "answering");

    const std::string out = render_top(sample, kPlain, std::nullopt, std::nullopt);
    EXPECT_HAS(out, "SYN flood: answering");
    EXPECT_HAS(out, "SYN COOKIES  COOKIES  ACKS OK  ACKS BAD\n");
    EXPECT_HAS(out, "answering    2.00k/s     20/s     200/s\n");
    EXPECT_HAS(render_top(sample, kColour, std::nullopt, std::nullopt), "\x1b[31m200/s");

    // Cookies off everywhere: no cookie columns, nothing hidden for them.
    json calm_before = stats_reply(1000, "off"), calm_after = stats_reply(5000, "off");
    for (json* s : {&calm_before, &calm_after}) {
        (*s)["vips"][0]["syn_cookies"]["mode"] = "off";
        (*s)["syn_flood"]["state"] = "calm";
    }
    const json calm = top_sample(backends_reply(1000), calm_before, backends_reply(3000),
                                 calm_after, 2.0, "2026-12-06T22:00:02Z");
    const std::string plain = render_top(calm, kPlain, std::nullopt, 200);
    EXPECT_EQ(plain.find("COOKIES"), std::string::npos) << plain;
    EXPECT_EQ(plain.find("SYN flood"), std::string::npos) << plain;
    EXPECT_EQ(plain.find("hidden"), std::string::npos) << plain;
}

json quic_counts(std::uint64_t routed, std::uint64_t client_cid, std::uint64_t unknown_server) {
    return json{{"routed", routed},
                {"fallbacks",
                 {{"client_cid", client_cid},
                  {"unknown_config", 0},
                  {"bad_length", 1},
                  {"unknown_server", unknown_server},
                  {"dead_backend", 0},
                  {"no_key", 0}}}};
}

TEST(XlbctlRender, StatusShowsQuicPerVip) {
    json r = status_reply();
    r["vips"][0]["quic"] = quic_counts(903710, 3120, 7);
    r["vips"][1]["quic"] = nullptr;
    const std::string out = render_human(cmd(Verb::kStatus), r, kPlain);
    const std::string vip = r["vips"][0]["vip"];
    EXPECT_HAS(out, "quic " + vip +
                        ": 903710 routed by connection ID, 3128 fallbacks (client_cid 3120, "
                        "unknown_config 0, bad_length 1, unknown_server 7, dead_backend 0, "
                        "no_key 0)\n");
    EXPECT_EQ(out.find("quic " + std::string(r["vips"][1]["vip"])), std::string::npos) << out;
    // Unreadable counters: dashes.
    r["vips"][0]["quic"]["routed"] = nullptr;
    r["vips"][0]["quic"]["fallbacks"]["no_key"] = nullptr;
    EXPECT_HAS(render_human(cmd(Verb::kStatus), r, kPlain),
               ": - routed by connection ID, 3128 fallbacks (client_cid 3120, unknown_config 0, "
               "bad_length 1, unknown_server 7, dead_backend 0, no_key -)\n");
    // An agent before QUIC routing: no line.
    EXPECT_EQ(render_human(cmd(Verb::kStatus), status_reply(), kPlain).find("quic "),
              std::string::npos);
}

TEST(XlbctlRender, TopShowsQuicRates) {
    auto backends_reply = [](std::uint64_t packets) {
        return json{
            {"vips",
             {{{"vip", "198.51.100.10:443/udp"},
               {"epoch", 3},
               {"backends",
                {backend("203.0.113.11", "active", "healthy", 100, 251, 1.0, json(packets))}}}}}};
    };
    auto stats_reply = [](std::uint64_t n, json quic) {
        json v = {{"vip", "198.51.100.10:443/udp"},
                  {"name", "h3"},
                  {"packets", n},
                  {"bytes", n * 100},
                  {"new_flows", n / 10},
                  {"conntrack_hits", n},
                  {"drops", 0},
                  {"quic", std::move(quic)}};
        return json{{"vips", {v}}};
    };
    const json sample = top_sample(
        backends_reply(1000), stats_reply(1000, quic_counts(1000, 10, 0)), backends_reply(3000),
        stats_reply(5000, quic_counts(9000, 50, 4)), 2.0, "2026-12-06T22:00:02Z");
    const json& q = sample["vips"][0]["quic"];
    EXPECT_DOUBLE_EQ(q["routed_per_s"].get<double>(), 4000.0);
    EXPECT_DOUBLE_EQ(q["fallbacks_per_s"].get<double>(), 22.0);  // (55 - 11) / 2
    EXPECT_EQ(q["fallbacks"]["unknown_server"], 4);
    const std::string out = render_top(sample, kPlain, std::nullopt, std::nullopt);
    EXPECT_HAS(out, "QUIC CID  QUIC FALLBACK\n");
    EXPECT_HAS(out, "4.00 kpps         22 pps\n");
    EXPECT_HAS(render_top(sample, kColour, std::nullopt, std::nullopt), "\x1b[33m");

    // No QUIC VIP: no QUIC columns.
    const json plain =
        top_sample(backends_reply(1000), stats_reply(1000, nullptr), backends_reply(3000),
                   stats_reply(5000, nullptr), 2.0, "2026-12-06T22:00:02Z");
    const std::string none = render_top(plain, kPlain, std::nullopt, 200);
    EXPECT_EQ(none.find("QUIC"), std::string::npos) << none;
    EXPECT_EQ(none.find("hidden"), std::string::npos) << none;
}

TEST(XlbctlRender, LookupByConnectionId) {
    json reply{{"vip", "198.51.100.10:443/udp"},
               {"src", "192.0.2.7:5353"},
               {"dport", 443},
               {"proto", "udp"},
               {"hash", 3954743863u},
               {"ring_size", 65537},
               {"slot", nullptr},
               {"backend_id", 1},
               {"backend", "203.0.113.12"},
               {"outcome", "tx_quic_cid"},
               {"epoch", 3},
               {"quic",
                {{"cid", "280065010203040506"},
                 {"config_id", 1},
                 {"server_id", 101},
                 {"fallback", nullptr}}}};
    EXPECT_EQ(render_human(cmd(Verb::kLookup), reply, kPlain),
              "198.51.100.10:443/udp: a QUIC packet with connection ID 280065010203040506 goes to "
              "203.0.113.12 by its connection ID\n"
              "  config 1, server id 101, backend id 1, epoch 3\n");
    reply["outcome"] = "tx";
    reply["slot"] = 44672;
    reply["backend_id"] = 2;
    reply["backend"] = "203.0.113.13";
    reply["quic"]["server_id"] = 999;
    reply["quic"]["fallback"] = "unknown_server";
    EXPECT_EQ(render_human(cmd(Verb::kLookup), reply, kPlain),
              "198.51.100.10:443/udp: a QUIC packet with connection ID 280065010203040506 falls "
              "back to the table (unknown_server: config 1, server id 999); from 192.0.2.7:5353:\n"
              "198.51.100.10:443/udp: a new udp flow from 192.0.2.7:5353 to port 443 goes to "
              "203.0.113.13\n"
              "  backend id 2, slot 44672 of 65537, hash 3954743863 (0xebb89a37), epoch 3\n");
}

TEST(XlbctlRender, DrainCounts) {
    const auto v4 = *net::IpAddress::parse("203.0.113.11");
    EXPECT_EQ(backend_entries(count_reply(), "198.51.100.10:80/tcp", v4), 10u);
    EXPECT_EQ(backend_entries(count_reply(), "198.51.100.20:80/tcp", v4), 0u) << "another VIP";
    EXPECT_EQ(backend_entries(json{{"vips", json::array()}}, "198.51.100.10:80/tcp", v4), 0u)
        << "no entry matched: none listed";
    const json v6 = json::parse(R"({"vips": [{"vip": "[2001:db8::10]:443/tcp", "entries": 3,
        "stale": 0, "backends": [{"backend": "2001:0db8:b::11", "entries": 3}]}]})");
    EXPECT_EQ(
        backend_entries(v6, "[2001:db8::10]:443/tcp", *net::IpAddress::parse("2001:db8:b::11")), 3u)
        << "addresses compared, not spellings";
    EXPECT_THROW(backend_entries(json::object(), "x", v4), json::exception);
}

TEST(XlbctlFormat, ElapsedMilliseconds) {
    EXPECT_EQ(format_elapsed_ms(0), "0.0s");
    EXPECT_EQ(format_elapsed_ms(1234), "1.2s");
    EXPECT_EQ(format_elapsed_ms(9'999), "9.9s");
    EXPECT_EQ(format_elapsed_ms(10'000), "10s");
    EXPECT_EQ(format_elapsed_ms(59'999), "59s");
    EXPECT_EQ(format_elapsed_ms(60'000), "1m 0s");
    EXPECT_EQ(format_elapsed_ms(3'725'000), "1h 2m 5s");
}

// BIRD killed: the agent reports the daemon unreachable and every VIP's
// announcement unknown (docs/api.md); status says so instead of "announced".
TEST(XlbctlRender, StatusWithBirdUnreachable) {
    json r = status_reply();
    r["bgp"] = {{"enabled", true},
                {"host", {{"drained", false}, {"since", nullptr}}},
                {"routes_file", "/run/xlb/bird/xlb.conf"},
                {"protocol", "xlb"},
                {"daemon",
                 {{"control_socket", "/run/bird/bird.ctl"},
                  {"reachable", false},
                  {"version", "2.0.12"},
                  {"problem", "daemon_unreachable"},
                  {"error",
                   "BGP daemon unreachable: connect to BIRD control socket /run/bird/bird.ctl: "
                   "Connection refused (is bird running? check bgp.control_socket)"}}},
                {"routes", {"198.51.100.10/32"}}};
    r["vips"][0]["announcement"] = {{"policy", "when_serving"},
                                    {"state", "unknown"},
                                    {"reason", "serving"},
                                    {"detail", "3 of 3 backends take new flows"},
                                    {"since", "2026-12-01T15:02:12Z"}};
    r["vips"][1]["announcement"] = {{"policy", "when_serving"},
                                    {"state", "unknown"},
                                    {"reason", "no_serving_backend"},
                                    {"detail", "0 of 2 backends take new flows"},
                                    {"since", "2026-12-01T15:02:12Z"}};
    const std::string out = render_human(cmd(Verb::kStatus), r, kPlain);
    EXPECT_HAS(out, "BGP: BGP daemon unreachable: connect to BIRD control socket");
    EXPECT_EQ(out.find("announced"), std::string::npos) << out;
    EXPECT_EQ(out.find("withdrawn"), std::string::npos) << out;
    std::size_t unknown = 0;
    for (auto at = out.find("unknown (daemon unreachable)"); at != std::string::npos;
         at = out.find("unknown (daemon unreachable)", at + 1))
        ++unknown;
    EXPECT_EQ(unknown, 2u) << out;
    expect_aligned(out, {"VIP", "NAME", "BACKENDS", "PANIC", "EPOCH", "CHECKSUM", "TABLE", "BGP"});
    EXPECT_HAS(render_human(cmd(Verb::kStatus), r, kColour),
               "\x1b[31munknown (daemon unreachable)\x1b[0m");
}

TEST(XlbctlRender, MissingFieldsThrow) {
    EXPECT_THROW(render_human(cmd(Verb::kStatus), json{{"version", "x"}}, kPlain), json::exception);
}

TEST(XlbctlRender, JsonIsTheReply) {
    const json reply = status_reply();
    EXPECT_EQ(json::parse(render_json(reply)), reply);
    EXPECT_EQ(render_json(reply).back(), '\n');
}

}  // namespace
}  // namespace xlb::xlbctl
