// SPDX-License-Identifier: Apache-2.0
// The lab's fleet store (label fleet): `lab.sh up --fleet` starts three etcd
// members, one per namespace on the management network 198.18.0.0/24, which
// the LB hosts reach over their second interface with the lab's client
// certificate; etcd-stop, etcd-start and etcd-fail lose and bring back
// members; down leaves nothing behind. Every request is a real HTTPS call
// from an LB host's namespace to a member's gRPC gateway (/v3/...).
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <string>
#include <thread>

#include "lab_driver.h"
#include "netns.h"

namespace xlb::test {
namespace {

using json = nlohmann::json;
using namespace std::chrono_literals;

std::string quote(const std::string& s) {
    std::string out = "'";
    for (char c : s) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
    return out + "'";
}

std::string base64(const std::string& in) {
    static const char* const digits =
        "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    std::string out;
    for (std::size_t i = 0; i < in.size(); i += 3) {
        const std::size_t n = std::min<std::size_t>(3, in.size() - i);
        unsigned v = 0;
        for (std::size_t j = 0; j < 3; ++j)
            v = v << 8 | (j < n ? static_cast<unsigned char>(in[i + j]) : 0u);
        for (std::size_t j = 0; j < 4; ++j) out += j <= n ? digits[(v >> (18 - 6 * j)) & 63] : '=';
    }
    return out;
}

std::string read_text(const std::string& path) {
    std::ifstream in(path);
    std::stringstream s;
    s << in.rdbuf();
    return s.str();
}

// Processes whose command line names PATH (the lab's directory).
std::vector<std::string> processes_naming(const std::string& path) {
    std::vector<std::string> found;
    std::error_code ec;
    for (const auto& entry : std::filesystem::directory_iterator("/proc", ec)) {
        const std::string pid = entry.path().filename();
        if (pid.find_first_not_of("0123456789") != std::string::npos) continue;
        std::string cmdline = read_text(entry.path() / "cmdline");
        std::replace(cmdline.begin(), cmdline.end(), '\0', ' ');
        if (cmdline.find(path) != std::string::npos) found.push_back(pid + ": " + cmdline);
    }
    return found;
}

class FleetLab : public ::testing::Test {
protected:
    std::string fleet_dir() const { return lab_.dir() + "/fleet"; }
    static std::string member_url(int n) {
        return "https://198.18.0.1" + std::to_string(n) + ":2379";
    }

    // curl in an LB host's namespace to member N: with the lab's client
    // certificate unless told otherwise, a POST when there is a body.
    CommandResult call(const std::string& host, int member, const std::string& path,
                       const std::string& body = "", bool client_cert = true) const {
        std::string cmd = "ip netns exec " + lab_.ns(host) + " curl -sS --max-time 3 --cacert " +
                          fleet_dir() + "/ca.pem";
        if (client_cert)
            cmd +=
                " --cert " + fleet_dir() + "/client.pem --key " + fleet_dir() + "/client-key.pem";
        if (!body.empty()) cmd += " -X POST --data-binary " + quote(body);
        return run_command(cmd + " " + member_url(member) + path);
    }
    bool healthy(const std::string& host, int member) const {
        const CommandResult r = call(host, member, "/health");
        return r.rc == 0 && r.out.find("\"health\":\"true\"") != std::string::npos;
    }
    // A put through member N, done when etcd answers with the revision it
    // made.
    ::testing::AssertionResult put(int member, const std::string& key,
                                   const std::string& value) const {
        const CommandResult r = call("lb", member, "/v3/kv/put",
                                     json{{"key", base64(key)}, {"value", base64(value)}}.dump());
        const json j = json::parse(r.out, nullptr, false);
        if (r.rc == 0 && !j.is_discarded() && j.contains("header") &&
            j["header"].contains("revision"))
            return ::testing::AssertionSuccess();
        return ::testing::AssertionFailure()
               << "put " << key << " through e" << member << " (curl " << r.rc << "): " << r.out;
    }
    // The value of KEY as member N has it (base64 as etcd sends it; "" when
    // absent or unreachable). serializable: from the member's own copy,
    // without asking the leader.
    std::string get(int member, const std::string& key, bool serializable = false) const {
        const CommandResult r =
            call("lb", member, "/v3/kv/range",
                 json{{"key", base64(key)}, {"serializable", serializable}}.dump());
        if (r.rc != 0) return "";
        const json j = json::parse(r.out, nullptr, false);
        if (j.is_discarded() || !j.contains("kvs") || j["kvs"].empty()) return "";
        return j["kvs"][0].value("value", "");
    }

    Lab lab_;
};

TEST_F(FleetLab, MembersServeCertifiedHostsAndSurviveStopsAndTheLossOfAll) {
    // a file the test holds open, inherited by lab.sh as a caller's lock
    // file would be: the members, which outlive lab.sh, must not keep it
    char held[] = "/tmp/xlb-fleet-held-XXXXXX";
    const int held_fd = ::mkstemp(held);
    ASSERT_GE(held_fd, 0) << std::strerror(errno);
    const auto t0 = std::chrono::steady_clock::now();
    lab_.up({.backends = 0, .client = false, .extra = {"--fleet", "--lb-hosts", "2"}});
    const auto up_ms =
        std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - t0)
            .count();
    std::printf("[ measured ] up --fleet --lb-hosts 2: %lld ms\n", static_cast<long long>(up_ms));
    for (int n = 1; n <= 3; ++n) {
        const std::string e = fleet_dir() + "/e" + std::to_string(n);
        const std::string pid = read_text(e + ".pid");
        ASSERT_FALSE(pid.empty()) << e << ".pid";
        std::error_code ec;
        for (const auto& fd : std::filesystem::directory_iterator(
                 "/proc/" + pid.substr(0, pid.find('\n')) + "/fd", ec))
            EXPECT_NE(std::filesystem::read_symlink(fd.path(), ec).string(), held)
                << "e" << n << " keeps the caller's file open as " << fd.path();
        EXPECT_GT(std::filesystem::file_size(e + ".log", ec), 0u) << e << ".log is empty";
    }
    ::close(held_fd);
    ::unlink(held);

    // every member answers both LB hosts with the client certificate ...
    for (const char* host : {"lb", "lb2"})
        for (int n = 1; n <= 3; ++n) EXPECT_TRUE(healthy(host, n)) << host << " -> e" << n;
    // ... and refuses a client without one (TLS, though the CA is known)
    for (int n = 1; n <= 3; ++n) {
        const CommandResult r = call("lb", n, "/health", "", false);
        EXPECT_NE(r.rc, 0) << "e" << n << " answered a client without a certificate: " << r.out;
        EXPECT_EQ(r.out.find("health"), std::string::npos) << r.out;
    }
    // the store's traffic stays off the data path (eth0, XDP) and the router
    const std::string route = run_command_ok("ip -n " + lab_.ns("lb") + " route get 198.18.0.11");
    EXPECT_NE(route.find("dev mgmt0"), std::string::npos) << route;
    const std::string router_addrs = run_command_ok("ip -n " + lab_.router_ns() + " -o addr");
    EXPECT_EQ(router_addrs.find("198.18."), std::string::npos) << router_addrs;

    // the LB hosts' files name the store and hold no VIPs; the desired
    // state holds them and is a file xlbd accepts
    for (const std::string host : {"lb", "lb2"}) {
        const std::string path =
            (host == "lb" ? lab_.dir() : lab_.dir() + "/" + host) + "/xlbd.yaml";
        const std::string yaml = read_text(path);
        EXPECT_NE(yaml.find("\nfleet:\n"), std::string::npos) << path << ":\n" << yaml;
        EXPECT_NE(yaml.find("\n  host_name: " + host + "\n"), std::string::npos) << yaml;
        EXPECT_NE(yaml.find("\n  endpoints: [" + member_url(1) + ", " + member_url(2) + ", " +
                            member_url(3) + "]\n"),
                  std::string::npos)
            << yaml;
        EXPECT_NE(yaml.find("\n  cert: " + fleet_dir() + "/client.pem\n"), std::string::npos)
            << yaml;
        EXPECT_EQ(yaml.find("\nvips:"), std::string::npos) << yaml;
        EXPECT_EQ(yaml.find("\nhash_seed:"), std::string::npos) << yaml;
    }
    const std::string desired = fleet_dir() + "/desired.yaml";
    const std::string desired_yaml = read_text(desired);
    EXPECT_NE(desired_yaml.find("\nvips:\n"), std::string::npos) << desired_yaml;
    EXPECT_NE(desired_yaml.find("\nhash_seed: "), std::string::npos) << desired_yaml;
    EXPECT_EQ(desired_yaml.find("\nfleet:"), std::string::npos) << desired_yaml;
    const CommandResult check = run_command(xlbd_path() + " --check-config " + desired);
    EXPECT_EQ(check.rc, 0) << check.out;

    // one member stopped: the other two keep serving writes and reads
    ASSERT_TRUE(put(1, "lab/before", "1"));
    lab_.script("etcd-stop 1");
    EXPECT_NE(call("lb", 1, "/health").rc, 0) << "e1 still answers after etcd-stop 1";
    EXPECT_TRUE(put(2, "lab/during", "e1 down"));
    EXPECT_EQ(get(3, "lab/during"), base64("e1 down"));

    // back with its data: it catches up with what it missed
    lab_.script("etcd-start 1");
    for (int n = 1; n <= 3; ++n) EXPECT_TRUE(healthy("lb", n)) << "e" << n;
    std::string caught_up;
    for (int i = 0; i < 50 && caught_up.empty(); ++i) {
        caught_up = get(1, "lab/during", true);
        if (caught_up.empty()) std::this_thread::sleep_for(100ms);
    }
    EXPECT_EQ(caught_up, base64("e1 down"));
    const CommandResult list = call("lb", 1, "/v3/cluster/member/list", "{}");
    ASSERT_EQ(list.rc, 0) << list.out;
    const json members = json::parse(list.out, nullptr, false);
    ASSERT_TRUE(!members.is_discarded() && members.contains("members")) << list.out;
    std::set<std::string> names;
    for (const json& m : members["members"]) names.insert(m.value("name", ""));
    EXPECT_EQ(names, (std::set<std::string>{"e1", "e2", "e3"})) << list.out;

    // the whole store lost: nothing answers, no member runs
    lab_.script("etcd-fail");
    for (int n = 1; n <= 3; ++n) {
        const CommandResult r = call("lb", n, "/health");
        EXPECT_NE(r.rc, 0) << "e" << n << " answers after etcd-fail: " << r.out;
    }
    EXPECT_TRUE(processes_naming(fleet_dir() + "/e").empty());

    // and back, with everything written before
    lab_.script("etcd-start all");
    for (int n = 1; n <= 3; ++n) {
        EXPECT_TRUE(healthy("lb2", n)) << "e" << n;
        EXPECT_EQ(get(n, "lab/before"), base64("1")) << "e" << n;
    }

    // down: no namespace, directory, pin or process of the lab is left
    lab_.script("down");
    std::vector<std::string> left;
    std::error_code ec;
    for (const auto& entry : std::filesystem::directory_iterator("/run/netns", ec))
        if (entry.path().filename().string().starts_with(lab_.prefix() + "-"))
            left.push_back(entry.path());
    EXPECT_TRUE(left.empty()) << left.front();
    EXPECT_FALSE(std::filesystem::exists(lab_.dir()));
    EXPECT_FALSE(std::filesystem::exists(lab_.pin_dir()));
    EXPECT_FALSE(std::filesystem::exists(lab_.pin_dir() + "-lb2"));
    const auto procs = processes_naming(lab_.dir() + "/");
    EXPECT_TRUE(procs.empty()) << procs.front();
}

}  // namespace
}  // namespace xlb::test
