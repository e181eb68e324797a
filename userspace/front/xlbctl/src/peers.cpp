// SPDX-License-Identifier: Apache-2.0
// status --peers: do the LB hosts build the same tables? (docs/scale-out.md)
#include <fmt/format.h>

#include <map>
#include <set>

#include "xlb/xlbctl/render.h"

namespace xlb::xlbctl {

namespace {

// A backend's inputs as one comparable line, by identity.
std::map<std::string, std::string> backends_of(const json& inputs) {
    std::map<std::string, std::string> out;
    for (const json& b : inputs.at("backends"))
        out[b.at("identity").get<std::string>()] =
            fmt::format("address {}, weight {}, state {}", b.at("address").get<std::string>(),
                        b.at("weight").get<std::uint64_t>(), b.at("state").get<std::string>());
    return out;
}

// How `other`'s inputs differ from `base`'s, in words; empty when they agree.
std::vector<std::string> input_differences(const json& base, const json& other) {
    std::vector<std::string> out;
    for (const char* key : {"hash_seed", "ring_size", "hash"})
        if (base.at(key) != other.at(key))
            out.push_back(
                fmt::format("{} {} (here {})", key, other.at(key).dump(), base.at(key).dump()));
    const auto a = backends_of(base), b = backends_of(other);
    for (const auto& [identity, line] : a) {
        auto it = b.find(identity);
        if (it == b.end())
            out.push_back(fmt::format("no backend {} (here {})", identity, line));
        else if (it->second != line)
            out.push_back(fmt::format("backend {}: {} (here {})", identity, it->second, line));
    }
    for (const auto& [identity, line] : b)
        if (!a.contains(identity))
            out.push_back(fmt::format("an extra backend {} ({})", identity, line));
    return out;
}

}  // namespace

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
        const json* base = nullptr;
        std::string base_host;
        for (std::size_t i = 0; i < hosts.size(); ++i) {
            auto it = by_host[i].find(key);
            if (it == by_host[i].end()) {
                problems.push_back(hosts[i].first + ": has no such VIP");
                continue;
            }
            if (!base) {
                base = it->second;
                base_host = hosts[i].first;
                continue;
            }
            const json& v = *it->second;
            const auto inputs = input_differences(base->at("table_inputs"), v.at("table_inputs"));
            for (const std::string& d : inputs) problems.push_back(hosts[i].first + ": " + d);
            if (inputs.empty() && v.at("checksum") != base->at("checksum"))
                problems.push_back(fmt::format(
                    "{}: the same inputs but table checksum {} (here {}): health differs, so the "
                    "hosts send new flows of some clients to different backends",
                    hosts[i].first, v.at("checksum").get<std::string>(),
                    base->at("checksum").get<std::string>()));
        }
        const bool agree = problems.empty();
        if (!agree) out["agree"] = false;
        out["vips"].push_back({{"vip", key},
                               {"agree", agree},
                               {"checksum", base ? base->at("checksum") : json(nullptr)},
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
