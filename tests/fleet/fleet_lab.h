// SPDX-License-Identifier: Apache-2.0
// The fleet lab (scripts/lab.sh up --fleet --lb-hosts 3): the LB hosts'
// agents, xlbctl on the fleet and etcdctl on its store. Shared by the fleet
// suites; header only (the including test defines XLBCTL_PATH and
// XLB_SOURCE_DIR).
#pragma once

#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>

#include "hosts_lab.h"

namespace xlb::e2e_tcp {

inline const char* const kHosts[] = {"lb", "lb2", "lb3"};

inline std::string read_text(const std::string& path) {
    std::ifstream in(path);
    std::stringstream text;
    text << in.rdbuf();
    return text.str();
}
inline const std::string kPrefix = "/xlb/lab/";

class FleetLab : public HostsLab {
public:
    std::string fleet_dir() const { return dir() + "/fleet"; }
    // xlbctl on the fleet, from the LB host lb.
    CmdResult fleet_xlbctl(const std::string& args) {
        return run("nsenter --net=/run/netns/" + lb_ns() +
                   " env XLBCTL_CONFIG=" + shell_quote(fleet_dir() + "/xlbctl.yaml") + " " +
                   XLBCTL_PATH + " " + args + " 2>&1");
    }
    // etcdctl on the store (what an operator writing by hand would do).
    CmdResult etcdctl(const std::string& args) {
        return run("cd " + shell_quote(XLB_SOURCE_DIR) + " && scripts/lab.sh etcdctl --prefix " +
                   prefix() + " -- " + args + " 2>&1");
    }
    // Puts `value` at `key` by hand; the revision of the write.
    std::int64_t put(const std::string& key, const std::string& value) {
        const std::string file = dir() + "/value.json";
        std::ofstream(file) << value;
        CmdResult r = etcdctl("put " + shell_quote(key) + " -w json < " + shell_quote(file));
        if (r.rc != 0) throw std::runtime_error("etcdctl put " + key + ": " + r.out);
        return json::parse(r.out)["header"]["revision"].get<std::int64_t>();
    }
    json fleet_of(const std::string& host) { return api_json(host, "GET", "/v1/status")["fleet"]; }
    // Waits until every host applied at least `revision`; false on timeout.
    bool wait_applied(std::int64_t revision, std::chrono::milliseconds timeout = 10s) {
        const auto until = Clock::now() + timeout;
        for (const char* host : kHosts)
            while (fleet_of(host)["applied_revision"].get<std::int64_t>() < revision) {
                if (Clock::now() > until) return false;
                std::this_thread::sleep_for(20ms);
            }
        return true;
    }
    // The store's revision now.
    std::int64_t store_revision() {
        CmdResult r = etcdctl("get " + kPrefix + "desired/global -w json");
        if (r.rc != 0) throw std::runtime_error("etcdctl get: " + r.out);
        return json::parse(r.out)["header"]["revision"].get<std::int64_t>();
    }
    // The revision a write of xlbctl's landed at ("written at revision N").
    static std::int64_t written_at(const std::string& out) {
        const auto at = out.find("written at revision ");
        if (at == std::string::npos) throw std::runtime_error("no revision in: " + out);
        return std::stoll(out.substr(at + 20));
    }
};

}  // namespace xlb::e2e_tcp
