// SPDX-License-Identifier: Apache-2.0
#include "xlb/announce/announcer.h"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <optional>

#include "fake_bird.h"
#include "xlb/files/files.h"

namespace xlb::announce {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;
using test::FakeBird;
using test::TempDir;

using test::ip;
using test::vip;

HostInput host(std::vector<VipInput> vips, bool startup_complete = true) {
    HostInput h;
    h.startup_complete = startup_complete;
    h.vips = std::move(vips);
    return h;
}

AnnouncerOptions options(const TempDir& dir) {
    AnnouncerOptions o;
    o.routes_file = dir / "run/xlb/bird/xlb.conf";
    o.control_socket = dir / "bird.ctl";
    o.timeout = milliseconds(500);
    return o;
}

std::string file(const TempDir& dir) {
    return files::read_file(dir / "run/xlb/bird/xlb.conf").value().value_or("");
}

const TimePoint t0 = TimePoint{} + seconds(1'000'000);

TEST(Announcer, WritesThenConfiguresOnceAndNotAgainForTheSameSet) {
    TempDir dir;
    FakeBird bird(dir / "bird.ctl", test::healthy_bird({"192.0.2.10/32"}, {}));
    Announcer a(options(dir));
    const HostInput in = host(
        {vip("192.0.2.10:80/tcp", "192.0.2.10", 2), vip("192.0.2.20:80/tcp", "192.0.2.20", 0)});

    const auto& s = a.update(in, t0);
    EXPECT_EQ(s.problem, Problem::kNone) << s.last_error;
    EXPECT_TRUE(s.daemon_reachable);
    EXPECT_EQ(s.daemon_version, "2.0.12");
    EXPECT_FALSE(s.configure_pending);
    EXPECT_EQ(s.last_configure, t0);
    EXPECT_TRUE(s.protocols_loaded);
    EXPECT_EQ(s.routes, std::vector<net::IpAddress>{ip("192.0.2.10")});
    EXPECT_EQ(file(dir), render_routes({ip("192.0.2.10")}, {}));
    EXPECT_EQ(bird.count("configure"), 1);
    // BIRD, running as user bird, must be able to read it whatever xlbd's umask.
    struct stat st {};
    ASSERT_EQ(::stat((dir / "run/xlb/bird/xlb.conf").c_str(), &st), 0);
    EXPECT_EQ(st.st_mode & 0777, 0644u);

    a.update(in, t0 + seconds(1));
    a.update(in, t0 + seconds(2));
    EXPECT_EQ(bird.count("configure"), 1);
    EXPECT_EQ(a.status().writes_total, 1u);
}

TEST(Announcer, RestartedAgentWithTheSameSetDoesNotReconfigure) {
    TempDir dir;
    FakeBird bird(dir / "bird.ctl", test::healthy_bird({"192.0.2.10/32"}, {"2001:db8::10/128"}));
    const HostInput in = host({vip("192.0.2.10:80/tcp", "192.0.2.10", 2),
                               vip("[2001:db8::10]:80/tcp", "2001:db8::10", 1)});
    {
        Announcer first(options(dir));
        first.update(in, t0);
    }
    ASSERT_EQ(bird.count("configure"), 1);
    Announcer second(options(dir));
    const auto& s = second.update(in, t0 + seconds(5));
    EXPECT_EQ(s.writes_total, 0u);
    EXPECT_EQ(bird.count("configure"), 1) << "the file was identical and BIRD runs it";
    EXPECT_EQ(bird.count("show route protocol xlb4"), 1);
    EXPECT_TRUE(s.daemon_reachable);
    EXPECT_EQ(s.problem, Problem::kNone) << s.last_error;
}

TEST(Announcer, RestartedAgentCatchesAConfigureThePreviousOneMissed) {
    TempDir dir;
    // BIRD still runs an older set: the previous agent died after its write.
    FakeBird bird(dir / "bird.ctl", test::healthy_bird({"192.0.2.99/32"}, {}));
    const HostInput in = host({vip("192.0.2.10:80/tcp", "192.0.2.10", 2)});
    ASSERT_TRUE(files::write_file_atomic(dir / "run/xlb/bird/xlb.conf",
                                         render_routes({ip("192.0.2.10")}, {})));
    Announcer a(options(dir));
    const auto& s = a.update(in, t0);
    EXPECT_EQ(s.writes_total, 0u);
    EXPECT_EQ(bird.count("configure"), 1);
    EXPECT_FALSE(s.configure_pending);
}

TEST(Announcer, HoldsWithdrawalsUntilStartupCompletes) {
    TempDir dir;
    FakeBird bird(dir / "bird.ctl", test::healthy_bird({"192.0.2.10/32", "192.0.2.20/32"}, {}));
    ASSERT_TRUE(files::write_file_atomic(dir / "run/xlb/bird/xlb.conf",
                                         render_routes({ip("192.0.2.10"), ip("192.0.2.20")}, {})));
    Announcer a(options(dir));
    // Starting: 192.0.2.20's table is not live yet; nothing is withdrawn.
    auto starting =
        host({vip("192.0.2.10:80/tcp", "192.0.2.10", 2), vip("192.0.2.20:80/tcp", "192.0.2.20", 0)},
             false);
    starting.vips[1].table_live = false;
    const auto& s = a.update(starting, t0);
    EXPECT_TRUE(s.holding_withdrawals);
    EXPECT_EQ(s.vips[1].reason, Reason::kNotPublished);
    EXPECT_EQ(s.routes, (std::vector<net::IpAddress>{ip("192.0.2.10"), ip("192.0.2.20")}));
    EXPECT_EQ(s.writes_total, 0u);
    EXPECT_EQ(bird.count("configure"), 0);

    // Started, and 192.0.2.20 really has no backend: withdrawn now.
    a.update(host({vip("192.0.2.10:80/tcp", "192.0.2.10", 2),
                   vip("192.0.2.20:80/tcp", "192.0.2.20", 0)}),
             t0 + seconds(1));
    EXPECT_FALSE(a.status().holding_withdrawals);
    EXPECT_EQ(a.status().routes, std::vector<net::IpAddress>{ip("192.0.2.10")});
    EXPECT_EQ(bird.count("configure"), 1);
}

TEST(Announcer, BirdUnreachableKeepsTheFileAndRetries) {
    TempDir dir;
    Announcer a(options(dir));
    const HostInput in = host({vip("192.0.2.10:80/tcp", "192.0.2.10", 2)});

    const auto& s = a.update(in, t0);
    EXPECT_EQ(file(dir), render_routes({ip("192.0.2.10")}, {})) << "BIRD reads it when it starts";
    EXPECT_FALSE(s.daemon_reachable);
    EXPECT_EQ(s.problem, Problem::kUnreachable);
    EXPECT_EQ(s.unreachable_since, t0);
    EXPECT_TRUE(s.configure_pending);
    EXPECT_EQ(s.last_error,
              "BGP daemon unreachable: connect to BIRD control socket " + (dir / "bird.ctl") +
                  ": No such file or directory (is bird running? check bgp.control_socket)");

    a.update(in, t0 + seconds(1));  // within retry_interval: not tried
    EXPECT_EQ(a.status().configure_failures_total, 1u);
    a.update(in, t0 + seconds(3));
    EXPECT_EQ(a.status().configure_failures_total, 2u);
    EXPECT_EQ(a.status().unreachable_since, t0) << "since the first failure";

    FakeBird bird(dir / "bird.ctl", test::healthy_bird({"192.0.2.10/32"}, {}));
    a.update(in, t0 + seconds(6));
    EXPECT_TRUE(a.status().daemon_reachable);
    EXPECT_FALSE(a.status().unreachable_since);
    EXPECT_FALSE(a.status().configure_pending);
    EXPECT_EQ(a.status().problem, Problem::kNone) << a.status().last_error;
    EXPECT_EQ(a.status().last_configure, t0 + seconds(6));
    EXPECT_EQ(bird.count("configure"), 1);
}

TEST(Announcer, PeriodicCheckNoticesBirdGoing) {
    TempDir dir;
    const HostInput in = host({vip("192.0.2.10:80/tcp", "192.0.2.10", 2)});
    Announcer a(options(dir));
    {
        FakeBird bird(dir / "bird.ctl", test::healthy_bird({"192.0.2.10/32"}, {}));
        a.update(in, t0);
        ASSERT_TRUE(a.status().daemon_reachable);
    }
    a.update(in, t0 + seconds(5));  // before check_interval: no contact
    EXPECT_TRUE(a.status().daemon_reachable);
    a.update(in, t0 + seconds(11));
    EXPECT_FALSE(a.status().daemon_reachable);
    EXPECT_EQ(a.status().unreachable_since, t0 + seconds(11));
    EXPECT_FALSE(a.status().configure_pending)
        << "nothing changed: BIRD reads the file when it is back";
}

// How often `needle` occurs in `text`.
int occurrences(const std::string& text, const std::string& needle) {
    int n = 0;
    for (auto at = text.find(needle); at != std::string::npos; at = text.find(needle, at + 1)) ++n;
    return n;
}

// BIRD killed: whether its socket is gone (no connection) or it hangs up in
// the middle of an exchange, the routers' view of every VIP is unknown, said
// once as "BGP daemon unreachable", until BIRD answers again.
TEST(Announcer, BirdKilledMakesEveryRouteUnknownUntilItAnswers) {
    TempDir dir;
    const HostInput in = host(
        {vip("192.0.2.10:80/tcp", "192.0.2.10", 2), vip("192.0.2.20:80/tcp", "192.0.2.20", 0)});
    Announcer a(options(dir));
    EXPECT_EQ(a.status().route_state(VipDecision{}), RouteState::kUnknown)
        << "never reached: nothing is known";
    {
        FakeBird bird(dir / "bird.ctl", test::healthy_bird({"192.0.2.10/32"}, {}));
        a.update(in, t0);
        ASSERT_TRUE(a.status().daemon_reachable);
        ASSERT_EQ(a.status().vips.size(), 2u);
        EXPECT_EQ(a.status().route_state(a.status().vips[0]), RouteState::kAnnounced);
        EXPECT_EQ(a.status().route_state(a.status().vips[1]), RouteState::kWithdrawn);
    }
    // the socket gone: the next periodic check cannot connect
    a.update(in, t0 + seconds(11));
    const AnnouncerStatus& s = a.status();
    EXPECT_FALSE(s.daemon_reachable);
    EXPECT_EQ(s.problem, Problem::kUnreachable);
    for (const VipDecision& d : s.vips) {
        EXPECT_EQ(s.route_state(d), RouteState::kUnknown) << d.key;
        EXPECT_EQ(to_string(s.route_state(d)), "unknown");
    }
    EXPECT_EQ(s.vips[0].announced, true) << "the decision itself stays";
    EXPECT_EQ(s.last_error.rfind("BGP daemon unreachable: ", 0), 0u) << s.last_error;
    EXPECT_EQ(occurrences(s.last_error, "unreachable"), 1) << s.last_error;
    a.update(in, t0 + seconds(12));
    EXPECT_EQ(occurrences(a.status().last_error, "unreachable"), 1) << a.status().last_error;

    // BIRD back: known again
    {
        FakeBird bird(dir / "bird.ctl", test::healthy_bird({"192.0.2.10/32"}, {}));
        a.update(in, t0 + seconds(30));
        EXPECT_TRUE(a.status().daemon_reachable);
        EXPECT_EQ(a.status().route_state(a.status().vips[0]), RouteState::kAnnounced);
        EXPECT_EQ(a.status().route_state(a.status().vips[1]), RouteState::kWithdrawn);
    }

    // killed in the middle of an exchange: it greets, then hangs up
    FakeBird dying(dir / "bird.ctl", [](const std::string&) { return FakeBird::kClose; });
    a.update(in, t0 + seconds(45));
    EXPECT_FALSE(a.status().daemon_reachable);
    EXPECT_EQ(a.status().problem, Problem::kUnreachable);
    EXPECT_EQ(a.status().route_state(a.status().vips[0]), RouteState::kUnknown);
    EXPECT_EQ(occurrences(a.status().last_error, "BGP daemon unreachable"), 1)
        << a.status().last_error;
}

TEST(Announcer, RefusedConfigurationIsReportedWithBirdsText) {
    TempDir dir;
    int refusals = 1;
    auto healthy = test::healthy_bird({}, {});
    FakeBird bird(dir / "bird.ctl", [&](const std::string& command) {
        if (command == "configure" && refusals-- > 0)
            return std::string(
                "0002-Reading configuration from /etc/bird/bird.conf\n"
                "8002 /etc/bird/bird.conf:12:1 syntax error, unexpected '}'\n");
        return healthy(command);
    });
    Announcer a(options(dir));
    const HostInput in = host({vip("192.0.2.10:80/tcp", "192.0.2.10", 2)});
    a.update(in, t0);
    EXPECT_TRUE(a.status().daemon_reachable);
    EXPECT_EQ(a.status().problem, Problem::kRefused);
    EXPECT_NE(a.status().last_error.find("/etc/bird/bird.conf:12:1 syntax error"),
              std::string::npos)
        << a.status().last_error;
    EXPECT_TRUE(a.status().configure_pending);
    a.update(in, t0 + seconds(3));
    EXPECT_EQ(a.status().problem, Problem::kNone) << a.status().last_error;
    EXPECT_FALSE(a.status().configure_pending);
}

TEST(Announcer, BirdThatDoesNotIncludeTheFileIsReported) {
    TempDir dir;
    FakeBird bird(dir / "bird.ctl", [](const std::string& command) -> std::string {
        if (command == "configure") return "0003 Reconfigured\n";
        return "2002-Name       Proto      Table      State  Since         Info\n"
               "1002-device1    Device     ---        up     17:41:52.148  \n0000 \n";
    });
    Announcer a(options(dir));
    a.update(host({vip("192.0.2.10:80/tcp", "192.0.2.10", 2)}), t0);
    EXPECT_EQ(a.status().problem, Problem::kNotIncluded);
    EXPECT_FALSE(a.status().protocols_loaded);
    EXPECT_NE(a.status().last_error.find("include"), std::string::npos) << a.status().last_error;
}

TEST(Announcer, DrainWithdrawsEverything) {
    TempDir dir;
    FakeBird bird(dir / "bird.ctl", test::healthy_bird({}, {}));
    Announcer a(options(dir));
    auto in = host({vip("192.0.2.10:80/tcp", "192.0.2.10", 2)});
    in.vips[0].policy = Policy::kAlways;
    a.update(in, t0);
    EXPECT_EQ(a.status().routes.size(), 1u);
    in.drained = true;
    a.update(in, t0 + seconds(1));
    EXPECT_TRUE(a.status().routes.empty());
    EXPECT_EQ(a.status().vips[0].reason, Reason::kHostDrained);
    EXPECT_EQ(file(dir), render_routes({}, {}));
    EXPECT_EQ(bird.count("configure"), 2);
}

TEST(Announcer, UnwritableFileIsAFileProblem) {
    TempDir dir;
    ASSERT_TRUE(files::write_file_atomic(dir / "run", "not a directory"));
    Announcer a(options(dir));
    a.update(host({vip("192.0.2.10:80/tcp", "192.0.2.10", 2)}), t0);
    EXPECT_EQ(a.status().problem, Problem::kFile);
    EXPECT_NE(a.status().last_error.find("Not a directory"), std::string::npos)
        << a.status().last_error;
}

}  // namespace
}  // namespace xlb::announce
