// SPDX-License-Identifier: Apache-2.0
// status --peers: do the LB hosts build the same tables? (docs/scale-out.md)
#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <map>
#include <set>

#include "xlb/xlbctl/render.h"

namespace xlb::xlbctl {

std::optional<std::chrono::system_clock::time_point> parse_utc(const std::string& text) {
    std::tm tm{};
    if (text.size() < 19 || !::strptime(text.substr(0, 19).c_str(), "%Y-%m-%dT%H:%M:%S", &tm))
        return std::nullopt;
    auto at = std::chrono::system_clock::from_time_t(::timegm(&tm));
    if (text.size() > 20 && text[19] == '.') {
        std::int64_t nanos = 0, scale = 100'000'000;
        for (std::size_t i = 20;
             i < text.size() && std::isdigit(static_cast<unsigned char>(text[i])); ++i, scale /= 10)
            nanos += scale * (text[i] - '0');
        at += std::chrono::duration_cast<std::chrono::system_clock::duration>(
            std::chrono::nanoseconds(nanos));
    }
    return at;
}

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

// What a host says of a backend beyond the table inputs; null where its
// agent does not report the field (an agent older than the fleet's health
// view).
struct BackendView {
    json health;         // the verdict the table is built from
    json local_health;   // this host's own probes' verdict
    json weight_factor;  // slow start x rate-limit bias, in (0, 1]
};

json field_or_null(const json& j, const char* key) {
    auto it = j.find(key);
    return it == j.end() ? json(nullptr) : *it;
}

std::map<std::string, BackendView> views_of(const json& vip) {
    std::map<std::string, BackendView> out;
    auto backends = vip.find("backends");
    if (backends == vip.end() || !backends->is_array()) return out;
    for (const json& b : *backends)
        if (b.is_object() && b.contains("address") && b.at("address").is_string())
            out[b.at("address").get<std::string>()] =
                BackendView{field_or_null(b, "health"), field_or_null(b, "local_health"),
                            field_or_null(b, "weight_factor")};
    return out;
}

// The fields of the fleet's health view that this VIP object lacks.
std::vector<std::string> missing_fields(const json& vip) {
    std::vector<std::string> out;
    for (const char* key : {"health_consensus", "published_at"})
        if (!vip.contains(key)) out.push_back(key);
    auto backends = vip.find("backends");
    if (backends == vip.end() || !backends->is_array()) {
        out.push_back("backends");
        return out;
    }
    for (const char* key : {"health", "local_health", "weight_factor"})
        for (const json& b : *backends)
            if (!b.is_object() || !b.contains(key)) {
                out.push_back(std::string("backends' ") + key);
                break;
            }
    return out;
}

// A verdict that can disagree with another: "unknown" (no probe answered
// yet) says nothing either way.
bool verdict(const json& health) { return health.is_string() && health != "unknown"; }

std::string value_text(const json& v) { return v.is_string() ? v.get<std::string>() : v.dump(); }

// Per backend where `host` and the reference differ in `field` (both
// reported): "backend X: <what> V on host, W on base_hosts".
std::vector<std::string> view_differences(const std::map<std::string, BackendView>& base,
                                          const std::map<std::string, BackendView>& other,
                                          json BackendView::*field, const char* what,
                                          const std::string& host, const std::string& base_hosts) {
    std::vector<std::string> out;
    for (const auto& [address, b] : base) {
        auto it = other.find(address);
        if (it == other.end()) continue;
        const json& was = b.*field;
        const json& is = it->second.*field;
        if (was.is_null() || is.is_null() || was == is) continue;
        out.push_back(fmt::format("backend {}: {} {} on {}, {} on {}", address, what,
                                  value_text(is), host, value_text(was), base_hosts));
    }
    return out;
}

bool fully_reported(const std::map<std::string, BackendView>& views) {
    return !views.empty() && std::all_of(views.begin(), views.end(), [](const auto& v) {
        return !v.second.health.is_null() && !v.second.weight_factor.is_null();
    });
}

}  // namespace

// Per VIP, the hosts are grouped by what they build from (table inputs and
// table checksum); the largest group is the reference (the first host's
// group on a tie) and every other host is named with how it differs from
// it: the odd host out, not whichever host came first. Where the inputs
// agree, the backends' health and weight factors say why the tables differ;
// where the tables agree, a host whose own probes judge a backend otherwise
// than the table does is a note, not a difference: the fleet's consensus
// hides it from the table on purpose.
json compare_peers(const std::vector<std::pair<std::string, json>>& hosts) {
    json out{{"agree", true},
             {"state", "agree"},
             {"hosts", json::array()},
             {"vips", json::array()},
             {"unknown", json::array()}};
    std::set<std::string> keys;
    std::vector<std::map<std::string, const json*>> by_host;
    // Per host, the fields its agent does not report (on any VIP).
    std::vector<std::set<std::string>> missing(hosts.size());
    for (const auto& [name, reply] : hosts) {
        out["hosts"].push_back(name);
        auto& vips = by_host.emplace_back();
        for (const json& v : reply.at("vips")) {
            vips[v.at("vip").get<std::string>()] = &v;
            keys.insert(v.at("vip").get<std::string>());
            for (std::string& f : missing_fields(v)) missing[by_host.size() - 1].insert(f);
        }
    }
    bool local_differs = false;
    for (const std::string& key : keys) {
        json problems = json::array();
        json notes = json::array();
        json disagreements = json::array();
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
        const auto base_views = base ? views_of(*base->vip) : std::map<std::string, BackendView>{};
        for (std::size_t i = 0; i < hosts.size(); ++i) {
            const std::string& name = hosts[i].first;
            auto it = by_host[i].find(key);
            if (it == by_host[i].end()) {
                problems.push_back(name + ": has no such VIP");
                continue;
            }
            const json& v = *it->second;
            const auto views = views_of(v);
            for (const auto& [address, b] : views)
                if (verdict(b.health) && verdict(b.local_health) && b.health != b.local_health)
                    disagreements.push_back({{"host", name},
                                             {"backend", address},
                                             {"local_health", b.local_health},
                                             {"health", b.health}});
            if (std::find(base->hosts.begin(), base->hosts.end(), i) != base->hosts.end()) continue;
            auto differences =
                input_differences(base->vip->at("table_inputs"), v.at("table_inputs"), base_hosts);
            if (differences.empty())
                differences = view_differences(base_views, views, &BackendView::health, "health",
                                               name, base_hosts);
            if (differences.empty())
                differences = view_differences(base_views, views, &BackendView::weight_factor,
                                               "slow-start step / weight factor", name, base_hosts);
            for (const std::string& d : differences) problems.push_back(name + ": " + d);
            if (!differences.empty()) continue;
            const std::string checksums =
                fmt::format("table checksum {} ({}: {})", v.at("checksum").get<std::string>(),
                            base_hosts, base->vip->at("checksum").get<std::string>());
            if (fully_reported(views) && fully_reported(base_views))
                problems.push_back(fmt::format(
                    "{}: {} with the same inputs, health and weight factors: no visible reason",
                    name, checksums));
            else
                problems.push_back(fmt::format(
                    "{}: the same inputs but {}: health differs or a backend ramps (slow start), "
                    "so the hosts send new flows of some clients to different backends; a host "
                    "does not report its backends' health and weight factors (an older agent)",
                    name, checksums));
        }
        const bool agree = problems.empty();
        std::string state = agree ? "agree" : "differ";
        if (agree && !disagreements.empty()) state = "agree_local_differs";
        for (const json& d : disagreements)
            notes.push_back(fmt::format(
                "{}{}'s own probes judge backend {} {}, the fleet {} (consensus hides it)",
                agree ? "same inputs, same fleet health, same table; " : "",
                d.at("host").get<std::string>(), d.at("backend").get<std::string>(),
                d.at("local_health").get<std::string>(), d.at("health").get<std::string>()));
        // The time between the first and the last publish of the reference
        // table; unknown unless every host of its group says when.
        json spread = nullptr;
        if (base) {
            std::vector<std::chrono::system_clock::time_point> at;
            for (std::size_t i : base->hosts) {
                const json published = field_or_null(*by_host[i].at(key), "published_at");
                if (!published.is_string()) break;
                auto t = parse_utc(published.get<std::string>());
                if (!t) break;
                at.push_back(*t);
            }
            if (!at.empty() && at.size() == base->hosts.size()) {
                const auto [first, last] = std::minmax_element(at.begin(), at.end());
                spread =
                    std::chrono::duration_cast<std::chrono::milliseconds>(*last - *first).count() /
                    1000.0;
            }
        }
        if (!agree) out["agree"] = false;
        if (state == "agree_local_differs") local_differs = true;
        out["vips"].push_back(
            {{"vip", key},
             {"agree", agree},
             {"state", state},
             {"checksum", base ? base->vip->at("checksum") : json(nullptr)},
             {"health_consensus",
              base ? field_or_null(*base->vip, "health_consensus") : json(nullptr)},
             {"problems", std::move(problems)},
             {"notes", std::move(notes)},
             {"health_disagreements", std::move(disagreements)},
             {"publish_spread_seconds", spread}});
    }
    if (!out["agree"].get<bool>())
        out["state"] = "differ";
    else if (local_differs)
        out["state"] = "agree_local_differs";
    for (std::size_t i = 0; i < hosts.size(); ++i)
        if (!missing[i].empty())
            out["unknown"].push_back(fmt::format(
                "{} does not report {} (an older agent?): unknown, not compared", hosts[i].first,
                joined(std::vector<std::string>(missing[i].begin(), missing[i].end()))));
    return out;
}

namespace {

std::string spread_text(double seconds) {
    return seconds < 1 ? fmt::format("{} ms", static_cast<std::int64_t>(seconds * 1000 + 0.5))
                       : fmt::format("{:.3f} s", seconds);
}

}  // namespace

std::string render_peers(const json& c, const Style& style) {
    const std::size_t n = c.at("hosts").size();
    std::string out;
    for (const json& v : c.at("vips")) {
        const std::string key = v.at("vip").get<std::string>();
        const json spread = v.value("publish_spread_seconds", json(nullptr));
        const std::string published =
            spread.is_number() ? ", publish spread " + spread_text(spread.get<double>()) : "";
        if (v.at("agree").get<bool>()) {
            out += fmt::format("{} {}: all {} hosts agree (checksum {}{})\n",
                               paint("ok", Colour::kGreen, style), key, n,
                               v.at("checksum").get<std::string>(), published);
        } else {
            out += fmt::format("{} {} differ{}:\n", paint("!!", Colour::kRed, style), key,
                               published.empty() ? "" : " (" + published.substr(2) + ")");
            for (const json& p : v.at("problems")) out += "   " + p.get<std::string>() + "\n";
        }
        for (const json& note : v.value("notes", json::array()))
            out += "   " + paint(note.get<std::string>(), Colour::kYellow, style) + "\n";
    }
    if (c.at("vips").empty()) out += fmt::format("no VIPs on any of the {} hosts\n", n);
    for (const json& u : c.value("unknown", json::array())) out += u.get<std::string>() + "\n";
    const std::string state = c.value("state", "");
    out += !c.at("agree").get<bool>()
               ? paint("the hosts differ: a flow moved between them may change backend",
                       Colour::kRed, style) +
                     "\n"
           : state == "agree_local_differs"
               ? fmt::format(
                     "all {} hosts agree on every VIP's table; some hosts' own probes judge a "
                     "backend otherwise (the fleet's consensus hides it)\n",
                     n)
               : fmt::format("all {} hosts agree on every VIP's table\n", n);
    return out;
}

}  // namespace xlb::xlbctl
