// SPDX-License-Identifier: Apache-2.0
// The lab with several LB hosts (lab.sh --lb-hosts N): each host's agent
// through its API socket and xlbctl, the router's next hops for a VIP, and
// each host's log. Used by the ECMP and the fleet suites. Header only: the
// including test defines XLBCTL_PATH.
#pragma once

#include <algorithm>
#include <fstream>
#include <nlohmann/json.hpp>
#include <optional>
#include <regex>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "tcp_lab.h"

#ifndef XLBCTL_PATH
#error "XLBCTL_PATH must name the xlbctl binary"
#endif

namespace xlb::e2e_tcp {

inline std::string shell_quote(const std::string& s) {
    std::string out = "'";
    for (char c : s) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
    return out + "'";
}

class HostsLab : public Lab {
public:
    using json = nlohmann::json;

    std::string host_dir(const std::string& host) const {
        return host == "lb" ? dir() : dir() + "/" + host;
    }
    std::string socket(const std::string& host) const { return host_dir(host) + "/xlbd.sock"; }

    json api_json(const std::string& host, const std::string& method, const std::string& path,
                  const std::string& body = "") {
        std::string cmd =
            "curl -sS --max-time 20 --unix-socket " + shell_quote(socket(host)) + " -X " + method;
        if (!body.empty())
            cmd += " -H 'Content-Type: application/json' --data-binary " + shell_quote(body);
        CmdResult r = run(cmd + " " + shell_quote("http://xlbd" + path));
        if (r.rc != 0) throw std::runtime_error(host + " " + path + ": " + r.out);
        return json::parse(r.out);
    }

    // xlbctl ARGS against a host's agent: exit code and output.
    CmdResult xlbctl(const std::string& host, const std::string& args) {
        return run(std::string(XLBCTL_PATH) + " --socket " + shell_quote(socket(host)) + " " +
                   args + " 2>&1");
    }

    // The router's next hops for a VIP's route (empty: no route).
    std::vector<std::string> next_hops(const std::string& vip) {
        const bool v6 = vip.find(':') != std::string::npos;
        CmdResult r = run("ip -n " + router_ns() + (v6 ? " -6" : "") + " route show " + vip);
        std::vector<std::string> hops;
        static const std::regex via(R"(via (\S+))");
        for (std::sregex_iterator it(r.out.begin(), r.out.end(), via), end; it != end; ++it)
            hops.push_back((*it)[1]);
        std::sort(hops.begin(), hops.end());
        return hops;
    }

    // Polls until the router's next hops for `vip` number `count`; the time it
    // took, or nullopt after `timeout`.
    std::optional<std::chrono::milliseconds> wait_next_hops(
        const std::string& vip, std::size_t count, std::chrono::milliseconds timeout = 10s) {
        const auto start = Clock::now();
        while (Clock::now() - start < timeout) {
            if (next_hops(vip).size() == count)
                return std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - start);
            std::this_thread::sleep_for(10ms);
        }
        return std::nullopt;
    }

    // A host's counters for one VIP key (/v1/stats).
    json vip_stats(const std::string& host, const std::string& key) {
        const json stats = api_json(host, "GET", "/v1/stats");
        for (const json& v : stats["vips"])
            if (v["vip"] == key) return v;
        throw std::runtime_error(host + ": no stats for " + key);
    }
    json vip_status(const std::string& host, const std::string& key) {
        const json status = api_json(host, "GET", "/v1/status");
        for (const json& v : status["vips"])
            if (v["vip"] == key) return v;
        throw std::runtime_error(host + ": no status for " + key);
    }

    std::string host_log(const std::string& host) const {
        std::ifstream in(host_dir(host) + "/xlbd.log");
        std::stringstream ss;
        ss << in.rdbuf();
        std::string log = ss.str();
        return log.size() > 3000 ? log.substr(log.size() - 3000) : log;
    }
};

}  // namespace xlb::e2e_tcp
