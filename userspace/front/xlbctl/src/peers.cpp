// SPDX-License-Identifier: Apache-2.0
// status --peers: do the LB hosts build the same tables? (docs/scale-out.md)
#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <set>

#include "xlb/xlbctl/render.h"

namespace xlb::xlbctl {

namespace {

// A backend's table inputs, by address: what the comparison names.
struct BackendInputs {
    std::string identity;  // its Maglev identity: the address, or its hash_key
    std::uint64_t weight = 0;
    std::string state;
};

std::map<std::string, BackendInputs> backends_of(const json& inputs) {
    std::map<std::string, BackendInputs> out;
    for (const json& b : inputs.at("backends"))
        out[b.at("address").get<std::string>()] =
            BackendInputs{b.at("identity").get<std::string>(), b.at("weight").get<std::uint64_t>(),
                          b.at("state").get<std::string>()};
    return out;
}

std::string whole(const std::string& address, const BackendInputs& b) {
    return fmt::format("{} (weight {}, state {}{})", address, b.weight, b.state,
                       b.identity == address ? "" : ", hash_key identity " + b.identity);
}

// How `other`'s inputs differ from `base`'s, field by field; `base_hosts`
// names the hosts that have base's ("a, c"). Empty when they agree.
std::vector<std::string> input_differences(const json& base, const json& other,
                                           const std::string& base_hosts) {
    std::vector<std::string> out;
    for (const char* key : {"hash_seed", "ring_size", "hash"})
        if (base.at(key) != other.at(key))
            out.push_back(fmt::format("{} {} ({}: {})", key, other.at(key).dump(), base_hosts,
                                      base.at(key).dump()));
    const auto a = backends_of(base), b = backends_of(other);
    for (const auto& [address, was] : a) {
        auto it = b.find(address);
        if (it == b.end()) {
            out.push_back(
                fmt::format("no backend {} ({}: {})", address, base_hosts, whole(address, was)));
            continue;
        }
        const BackendInputs& is = it->second;
        if (is.identity != was.identity)
            out.push_back(fmt::format(
                "backend {}: hash_key changed, Maglev identity {} ({}: {}): its slots move",
                address, is.identity, base_hosts, was.identity));
        if (is.weight != was.weight)
            out.push_back(fmt::format("backend {}: weight {} ({}: {})", address, is.weight,
                                      base_hosts, was.weight));
        if (is.state != was.state)
            out.push_back(fmt::format("backend {}: state {} ({}: {})", address, is.state,
                                      base_hosts, was.state));
    }
    for (const auto& [address, is] : b)
        if (!a.contains(address))
            out.push_back(fmt::format("an extra backend {} ({} have none such)", whole(address, is),
                                      base_hosts));
    return out;
}

std::string joined(const std::vector<std::string>& names) {
    std::string out;
    for (const std::string& n : names) out += (out.empty() ? "" : ", ") + n;
    return out;
}

}  // namespace

// Per VIP, the hosts are grouped by what they build from (table inputs and
// table checksum); the largest group is the reference (the first host's
// group on a tie) and every other host is named with how it differs from
// it: the odd host out, not whichever host came first.
json compare_peers(const std::vector<std::pair<std::string, json>>& hosts) {
    json out{{"agree", true}, {"hosts", json::array()}, {"vips", json::array()}};
    std::set<std::string> keys;
    std::vector<std::map<std::string, const json*>> by_host;
    for (const auto& [name, reply] : hosts) {
        out["hosts"].push_back(name);
        auto& vips = by_host.emplace_back();
        for (const json& v : reply.at("vips")) {
            vips[v.at("vip").get<std::string>()] = &v;
            keys.insert(v.at("vip").get<std::string>());
        }
    }
    for (const std::string& key : keys) {
        json problems = json::array();
        // Groups of hosts with the same inputs and table, in the hosts' order.
        struct Group {
            const json* vip;
            std::vector<std::size_t> hosts;
        };
        std::vector<Group> groups;
        for (std::size_t i = 0; i < hosts.size(); ++i) {
            auto it = by_host[i].find(key);
            if (it == by_host[i].end()) continue;
            const json& v = *it->second;
            auto same = std::find_if(groups.begin(), groups.end(), [&](const Group& g) {
                return g.vip->at("table_inputs") == v.at("table_inputs") &&
                       g.vip->at("checksum") == v.at("checksum");
            });
            if (same == groups.end())
                groups.push_back(Group{&v, {i}});
            else
                same->hosts.push_back(i);
        }
        const Group* base = nullptr;
        for (const Group& g : groups)
            if (!base || g.hosts.size() > base->hosts.size()) base = &g;
        std::vector<std::string> base_names;
        if (base)
            for (std::size_t i : base->hosts) base_names.push_back(hosts[i].first);
        const std::string base_hosts = joined(base_names);
        for (std::size_t i = 0; i < hosts.size(); ++i) {
            auto it = by_host[i].find(key);
            if (it == by_host[i].end()) {
                problems.push_back(hosts[i].first + ": has no such VIP");
                continue;
            }
            if (std::find(base->hosts.begin(), base->hosts.end(), i) != base->hosts.end()) continue;
            const json& v = *it->second;
            const auto inputs =
                input_differences(base->vip->at("table_inputs"), v.at("table_inputs"), base_hosts);
            for (const std::string& d : inputs) problems.push_back(hosts[i].first + ": " + d);
            if (inputs.empty())
                problems.push_back(fmt::format(
                    "{}: the same inputs but table checksum {} ({}: {}): health differs, so the "
                    "hosts send new flows of some clients to different backends",
                    hosts[i].first, v.at("checksum").get<std::string>(), base_hosts,
                    base->vip->at("checksum").get<std::string>()));
        }
        const bool agree = problems.empty();
        if (!agree) out["agree"] = false;
        out["vips"].push_back({{"vip", key},
                               {"agree", agree},
                               {"checksum", base ? base->vip->at("checksum") : json(nullptr)},
                               {"problems", std::move(problems)}});
    }
    return out;
}

std::string render_peers(const json& c, const Style& style) {
    const std::size_t n = c.at("hosts").size();
    std::string out;
    for (const json& v : c.at("vips")) {
        const std::string key = v.at("vip").get<std::string>();
        if (v.at("agree").get<bool>()) {
            out += fmt::format("{} {}: all {} hosts agree (checksum {})\n",
                               paint("ok", Colour::kGreen, style), key, n,
                               v.at("checksum").get<std::string>());
            continue;
        }
        out += fmt::format("{} {} differ:\n", paint("!!", Colour::kRed, style), key);
        for (const json& p : v.at("problems")) out += "   " + p.get<std::string>() + "\n";
    }
    if (c.at("vips").empty()) out += fmt::format("no VIPs on any of the {} hosts\n", n);
    out += c.at("agree").get<bool>()
               ? fmt::format("all {} hosts agree on every VIP's table\n", n)
               : paint("the hosts differ: a flow moved between them may change backend",
                       Colour::kRed, style) +
                     "\n";
    return out;
}

}  // namespace xlb::xlbctl
