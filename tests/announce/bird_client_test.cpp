// SPDX-License-Identifier: Apache-2.0
#include "xlb/announce/bird_client.h"

#include <gtest/gtest.h>

#include <chrono>

#include "fake_bird.h"

namespace xlb::announce::bird {
namespace {

using std::chrono::milliseconds;
using test::FakeBird;
using test::TempDir;

TEST(BirdReplyParser, CodesContinuationsAndSpontaneousLines) {
    ReplyParser p;
    const std::string bytes =
        "2002-Name       Proto\n1002-device1    Device\n kernel1    Kernel\n+spontaneous log "
        "line\n0000 \n"
        "0002-Reading configuration from x\n8002 x.conf:3:8 Invalid IPv4 address\n";
    // Every split of the stream gives the same replies.
    for (std::size_t cut = 0; cut <= bytes.size(); cut += 7) {
        ReplyParser q;
        ASSERT_TRUE(q.feed(bytes.substr(0, cut)));
        ASSERT_TRUE(q.feed(bytes.substr(cut)));
        auto a = q.take();
        auto b = q.take();
        ASSERT_TRUE(a && b) << cut;
        EXPECT_FALSE(q.take());
        EXPECT_EQ(a->code(), 0);
        ASSERT_EQ(a->lines.size(), 4u);
        EXPECT_EQ(a->lines[2].code, 1002);
        EXPECT_EQ(a->lines[2].text, "kernel1    Kernel");
        EXPECT_EQ(b->code(), 8002);
        EXPECT_EQ(b->texts(8002), std::vector<std::string>{"x.conf:3:8 Invalid IPv4 address"});
    }
    EXPECT_FALSE(p.feed("garbage\n"));
    ReplyParser r;
    EXPECT_FALSE(r.feed(" continuation first\n"));
}

TEST(BirdClient, GreetingAndVersion) {
    TempDir dir;
    FakeBird bird(dir / "bird.ctl", test::healthy_bird({}, {}));
    auto c = Client::connect(dir / "bird.ctl", milliseconds(1000));
    ASSERT_TRUE(c) << c.error();
    EXPECT_EQ(c->greeting(), "BIRD 2.0.12 ready.");
    EXPECT_EQ(c->version(), "2.0.12");
}

TEST(BirdClient, ConfigureOutcomes) {
    TempDir dir;
    std::string answer;
    FakeBird bird(dir / "bird.ctl", [&](const std::string&) { return answer; });
    auto c = Client::connect(dir / "bird.ctl", milliseconds(1000));
    ASSERT_TRUE(c) << c.error();

    answer = "0002-Reading configuration from /etc/bird/bird.conf\n0003 Reconfigured\n";
    auto r = c->configure();
    ASSERT_TRUE(r) << r.error();
    EXPECT_EQ(r->outcome, ConfigureOutcome::kReconfigured);
    EXPECT_EQ(r->message, "Reading configuration from /etc/bird/bird.conf\nReconfigured");

    answer =
        "0002-Reading configuration from /etc/bird/bird.conf\n0004 Reconfiguration in progress\n";
    r = c->configure();
    ASSERT_TRUE(r) << r.error();
    EXPECT_EQ(r->outcome, ConfigureOutcome::kInProgress);

    answer = "0005 Reconfiguration already in progress, queueing new config\n";
    r = c->configure();
    ASSERT_TRUE(r) << r.error();
    EXPECT_EQ(r->outcome, ConfigureOutcome::kQueued);

    answer =
        "0002-Reading configuration from /etc/bird/bird.conf\n"
        "8002 /run/xlb/bird/xlb.conf:3:8 Invalid IPv4 address 192.0.2.300\n";
    r = c->configure();
    ASSERT_FALSE(r);
    EXPECT_FALSE(c->broken());
    EXPECT_EQ(r.error().message(),
              "BIRD refused its configuration: /run/xlb/bird/xlb.conf:3:8 Invalid IPv4 address "
              "192.0.2.300 "
              "(BIRD keeps running the previous one; fix the file and xlbd tries again)");

    answer = "0016 Access restricted\n";
    r = c->configure();
    ASSERT_FALSE(r);
    EXPECT_NE(r.error().message().find("code 16: Access restricted"), std::string::npos)
        << r.error();
    EXPECT_EQ(bird.count("configure"), 5);
}

TEST(BirdClient, ShowProtocolsAndRoutes) {
    TempDir dir;
    FakeBird bird(dir / "bird.ctl",
                  test::healthy_bird({"192.0.2.10/32", "192.0.2.11/32"}, {"2001:db8::10/128"}));
    auto c = Client::connect(dir / "bird.ctl", milliseconds(1000));
    ASSERT_TRUE(c) << c.error();
    auto protocols = c->show_protocols();
    ASSERT_TRUE(protocols) << protocols.error();
    ASSERT_EQ(protocols->size(), 4u);
    EXPECT_EQ((*protocols)[1].name, "xlb4");
    EXPECT_EQ((*protocols)[1].proto, "Static");
    EXPECT_EQ((*protocols)[1].table, "master4");
    EXPECT_TRUE((*protocols)[1].up());
    EXPECT_EQ((*protocols)[3].info, "17:41:55.564  Established");

    auto routes = c->show_routes("xlb4");
    ASSERT_TRUE(routes) << routes.error();
    ASSERT_EQ(routes->size(), 2u);
    EXPECT_EQ((*routes)[0].address, *net::IpAddress::parse("192.0.2.10"));
    EXPECT_EQ((*routes)[0].length, 32);
    EXPECT_EQ((*routes)[0].table, "master4");
    EXPECT_EQ((*routes)[0].protocol, "xlb4");
    routes = c->show_routes("xlb6");
    ASSERT_TRUE(routes) << routes.error();
    ASSERT_EQ(routes->size(), 1u);
    EXPECT_EQ((*routes)[0].length, 128);

    // An unknown protocol is a parse error in BIRD (9001), not an empty list.
    auto none = c->show_routes("nosuch");
    ASSERT_FALSE(none);
    EXPECT_NE(none.error().message().find("code 9001"), std::string::npos) << none.error();
}

TEST(BirdClient, RouteReplyWithNextHopLinesAndTwoTables) {
    Reply r;
    r.lines = {{1007, "Table master4:"},
               {1007, "192.0.2.11/32        unicast [lb 17:41:58.485] * (100) [AS65001i]"},
               {1007, "\tvia 198.51.100.2 on vr"},
               {1007, ""},
               {1007, "Table master6:"},
               {1007, "2001:db8::10/128     blackhole [xlb6 17:41:58.485] * (200)"},
               {0, ""}};
    auto routes = parse_routes_reply(r);
    ASSERT_EQ(routes.size(), 2u);
    EXPECT_EQ(routes[0].protocol, "lb");
    EXPECT_EQ(routes[1].table, "master6");
    EXPECT_EQ(routes[1].address, *net::IpAddress::parse("2001:db8::10"));
}

TEST(BirdClient, NoSocketNamesPathAndHint) {
    TempDir dir;
    auto c = Client::connect(dir / "bird.ctl", milliseconds(500));
    ASSERT_FALSE(c);
    EXPECT_EQ(c.error().message(),
              "connect to BIRD control socket " + (dir / "bird.ctl") +
                  ": No such file or directory (is bird running? check bgp.control_socket)");
}

TEST(BirdClient, SilentServerTimesOut) {
    TempDir dir;
    FakeBird bird(dir / "bird.ctl", test::healthy_bird({}, {}), FakeBird::kStall);
    const auto start = std::chrono::steady_clock::now();
    auto c = Client::connect(dir / "bird.ctl", milliseconds(300));
    const auto took = std::chrono::steady_clock::now() - start;
    ASSERT_FALSE(c);
    EXPECT_EQ(c.error().code, ETIMEDOUT) << c.error();
    EXPECT_NE(c.error().message().find("greeting"), std::string::npos) << c.error();
    EXPECT_LT(took, milliseconds(2000));
}

TEST(BirdClient, WedgedCommandTimesOut) {
    TempDir dir;
    FakeBird bird(dir / "bird.ctl", [](const std::string&) { return FakeBird::kStall; });
    auto c = Client::connect(dir / "bird.ctl", milliseconds(300));
    ASSERT_TRUE(c) << c.error();
    auto r = c->configure();
    ASSERT_FALSE(r);
    EXPECT_TRUE(c->broken());
    EXPECT_EQ(r.error().message(),
              "read BIRD's answer to \"configure\" from " + (dir / "bird.ctl") +
                  ": Connection timed out (no complete answer within 300 ms: is bird wedged?)");
}

TEST(BirdClient, ServerGoneMidReply) {
    TempDir dir;
    FakeBird bird(dir / "bird.ctl", [](const std::string&) { return FakeBird::kClose; });
    auto c = Client::connect(dir / "bird.ctl", milliseconds(1000));
    ASSERT_TRUE(c) << c.error();
    auto r = c->show_protocols();
    ASSERT_FALSE(r);
    EXPECT_TRUE(c->broken());
    EXPECT_NE(r.error().message().find("BIRD closed the connection"), std::string::npos)
        << r.error();
    // Once broken, nothing more is sent.
    EXPECT_FALSE(c->command("show status"));
}

TEST(BirdClient, NotBird) {
    TempDir dir;
    FakeBird bird(dir / "bird.ctl", test::healthy_bird({}, {}), "220 smtp.example ESMTP\n");
    auto c = Client::connect(dir / "bird.ctl", milliseconds(500));
    ASSERT_FALSE(c);
}

}  // namespace
}  // namespace xlb::announce::bird
