// SPDX-License-Identifier: Apache-2.0
#include "xlb/xlbctl/vip_settings.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <map>

#include "xlb/config/config.h"
#include "xlb/config/json.h"

namespace xlb::xlbctl {

namespace {

using json = nlohmann::json;

// Words the decoder accepts, for the help of the keys that take a word.
const std::map<std::string, std::string>& accepted_words() {
    static const std::map<std::string, std::string> words{
        {"hash", "5tuple or source"},
        {"on_unhealthy", "reschedule or keep"},
        {"announce", "when_serving, always or never"},
        {"health_consensus", "local, majority or any_down"},
        {"syn_cookies", "off, auto or always"},
        {"health_check.type", "none, tcp, http, https or udp"},
        {"health_check.expected_statuses", "statuses and ranges, e.g. 200-299,301"},
    };
    return words;
}

std::string option_name(const std::string& path) {
    std::string out = "--" + path;
    std::replace(out.begin(), out.end(), '_', '-');
    return out;
}

std::string shown(const json& value) {
    if (value.is_string()) return value.get<std::string>();
    if (value.is_array()) {
        std::string out;
        for (const json& item : value) out += (out.empty() ? "" : ",") + shown(item);
        return out;
    }
    return value.dump();
}

void collect(const json& j, const std::string& prefix, std::vector<VipSetting>& out) {
    for (auto it = j.begin(); it != j.end(); ++it) {
        const std::string path = prefix.empty() ? it.key() : prefix + "." + it.key();
        if (path == "address" || path == "port" || path == "protocol" || path == "backends")
            continue;
        const json& value = it.value();
        if (value.is_object()) {
            collect(value, path, out);
            continue;
        }
        VipSetting s;
        s.path = path;
        s.option = option_name(path);
        if (value.is_boolean())
            s.type_name = "true|false";
        else if (value.is_number_integer() || value.is_number_unsigned())
            s.type_name = "N";
        else if (value.is_number())
            s.type_name = "NUM";
        else if (value.is_array())
            s.type_name = "LIST";
        else if (value.is_string() && config::parse_duration(value.get<std::string>()))
            s.type_name = "DUR";
        else
            s.type_name = "TEXT";
        const auto words = accepted_words().find(path);
        s.help = (words != accepted_words().end() ? words->second + "; " : std::string()) +
                 "file key " + path + " (default " +
                 (value.is_string() && value.get<std::string>().empty() ? "empty" : shown(value)) +
                 ")";
        out.push_back(std::move(s));
    }
}

// The default's JSON type, for typing a value as the file's key is.
const json& default_vip() {
    static const json vip = [] {
        config::VipSpec spec;
        json j = spec;
        // Written only when set: typed as the lists they are.
        j["allow_sources"] = json::array();
        j["deny_sources"] = json::array();
        return j;
    }();
    return vip;
}

const json* default_at(const std::string& path) {
    const json* at = &default_vip();
    std::size_t start = 0;
    while (true) {
        const std::size_t dot = path.find('.', start);
        const std::string part = path.substr(start, dot == std::string::npos ? dot : dot - start);
        if (!at->is_object() || !at->contains(part)) return nullptr;
        at = &(*at)[part];
        if (dot == std::string::npos) return at;
        start = dot + 1;
    }
}

json number_or_text(const std::string& text) {
    std::int64_t i = 0;
    if (auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), i);
        !text.empty() && ec == std::errc{} && end == text.data() + text.size())
        return i;
    char* end = nullptr;
    const double d = std::strtod(text.c_str(), &end);
    if (!text.empty() && end == text.c_str() + text.size() && std::isfinite(d) &&
        !std::isspace(static_cast<unsigned char>(text.front())))
        return d;
    return text;
}

// --quic: "server_id_length=2,nonce_length=8,config_id=1,mode=encrypted,
// key_file=/etc/xlb/quic.key", several configs separated by ';', the file's
// keys and words; "" turns QUIC-LB off. What does not have that form is
// passed on as text, for the decoder to name.
json quic_configs(const std::string& text) {
    json configs = json::array();
    std::size_t start = 0;
    while (start < text.size()) {
        const std::size_t semi = std::min(text.find(';', start), text.size());
        const std::string spec = text.substr(start, semi - start);
        json config = json::object();
        std::size_t at = 0;
        while (at <= spec.size()) {
            const std::size_t comma = std::min(spec.find(',', at), spec.size());
            const std::string pair = spec.substr(at, comma - at);
            const std::size_t eq = pair.find('=');
            if (eq == std::string::npos || eq == 0) return text;
            const std::string key = pair.substr(0, eq), value = pair.substr(eq + 1);
            config[key] = key == "mode" || key == "key_file" ? json(value) : number_or_text(value);
            at = comma + 1;
        }
        configs.push_back(std::move(config));
        start = semi + 1;
    }
    return configs;
}

json typed(const std::string& path, const std::string& text) {
    if (path == "quic") return quic_configs(text);
    const json* def = default_at(path);
    if (!def || def->is_string() || def->is_null()) return text;
    if (def->is_boolean()) {
        if (text == "true") return true;
        if (text == "false") return false;
        return text;
    }
    if (def->is_number()) return number_or_text(text);
    if (def->is_array()) {
        json items = json::array();
        // A source list can be emptied; an empty list of statuses is not a
        // value, and its decoder says so.
        if (text.empty() && (path == "allow_sources" || path == "deny_sources")) return items;
        std::size_t start = 0;
        while (start <= text.size()) {
            const std::size_t comma = std::min(text.find(',', start), text.size());
            items.push_back(number_or_text(text.substr(start, comma - start)));
            start = comma + 1;
        }
        return items;
    }
    return text;
}

}  // namespace

const std::vector<VipSetting>& vip_settings() {
    static const std::vector<VipSetting> settings = [] {
        std::vector<VipSetting> out;
        json all = default_vip();
        // Written only when set: present here with their defaults' form.
        all["announce"] = announce::to_string(announce::Policy::kWhenServing);
        all.erase("allow_sources");
        all.erase("deny_sources");
        collect(all, "", out);
        // Optional keys whose default is not a value the file could hold.
        auto optional_key = [&](std::string path, std::string type_name, std::string help) {
            VipSetting s;
            s.option = option_name(path);
            s.path = std::move(path);
            s.type_name = std::move(type_name);
            s.help = std::move(help);
            out.push_back(std::move(s));
        };
        optional_key("conntrack_idle_timeout", "DUR",
                     "file key conntrack_idle_timeout (default: the protocol's, 1h for tcp, 30s "
                     "for udp)");
        optional_key("health_consensus", "TEXT",
                     "local, majority or any_down; file key health_consensus (default: majority "
                     "on a fleet's hosts, local elsewhere)");
        optional_key("syn_cookies", "TEXT",
                     "off, auto or always; file key syn_cookies (default: auto where the VIP can "
                     "use cookies, else off)");
        optional_key("allow_sources", "LIST",
                     "prefixes, e.g. 192.0.2.0/24,198.51.100.7; file key allow_sources (default "
                     "none: every client; \"\" empties it)");
        optional_key("deny_sources", "LIST",
                     "prefixes; file key deny_sources (default none; \"\" empties it)");
        optional_key("quic", "SPEC",
                     "UDP VIPs: route QUIC packets by the server id in their connection ID, e.g. "
                     "server_id_length=2,nonce_length=8[,config_id=0][,mode=plaintext|encrypted]"
                     "[,key_file=PATH], several separated by ';' (the first is the one servers "
                     "issue); file key quic (default none; \"\" turns it off)");
        return out;
    }();
    return settings;
}

std::string option_of(const std::string& path) {
    const VipSetting* best = nullptr;
    for (const VipSetting& s : vip_settings()) {
        const bool under =
            path == s.path || path.starts_with(s.path + ".") || path.starts_with(s.path + "[");
        if (under && (!best || s.path.size() > best->path.size())) best = &s;
    }
    return best ? best->option : "";
}

json settings_object(const std::vector<std::pair<std::string, std::string>>& given) {
    json out = json::object();
    for (const auto& [path, text] : given) {
        json* at = &out;
        std::size_t start = 0;
        while (true) {
            const std::size_t dot = path.find('.', start);
            if (dot == std::string::npos) {
                (*at)[path.substr(start)] = typed(path, text);
                break;
            }
            at = &(*at)[path.substr(start, dot - start)];
            start = dot + 1;
        }
    }
    return out;
}

std::string with_options(const std::string& message) {
    std::string out;
    std::size_t start = 0;
    while (start <= message.size()) {
        std::size_t end = message.find("; ", start);
        if (end == std::string::npos) end = message.size();
        std::string part = message.substr(start, end - start);
        const std::size_t colon = part.find(": ");
        if (colon != std::string::npos) {
            const std::string option = option_of(part.substr(0, colon));
            if (!option.empty() && part.substr(0, colon).find(' ') == std::string::npos)
                part = option + part.substr(colon);
        }
        out += (out.empty() ? "" : "; ") + part;
        start = end + 2;
    }
    return out;
}

}  // namespace xlb::xlbctl
