// SPDX-License-Identifier: Apache-2.0
#include "xlb/xlbctl/quic.h"

#include <fmt/format.h>

#include <random>

#include "render_parts.h"
#include "xlb/quic/cid.h"

namespace xlb::xlbctl {

namespace {

using nlohmann::json;

// The VIP's configs as the API writes them: a list (or one mapping, as the
// configuration file also allows), each key optional with the model's
// default.
std::expected<std::vector<config::QuicConfig>, std::string> quic_configs_of(const json& vip) {
    const json& spec = vip.contains("spec") ? vip.at("spec") : vip;
    const std::string key = vip.value("vip", std::string("the VIP"));
    if (!spec.contains("quic") || spec.at("quic").is_null() ||
        (spec.at("quic").is_array() && spec.at("quic").empty()))
        return std::unexpected("VIP " + key +
                               " has no quic configuration: its packets are balanced by their "
                               "5-tuple (docs/quic.md says how to add one)");
    json list = spec.at("quic");
    if (list.is_object()) list = json::array({list});
    std::vector<config::QuicConfig> out;
    for (const json& j : list) {
        config::QuicConfig c;
        c.config_id = j.value("config_id", c.config_id);
        c.server_id_length = j.value("server_id_length", c.server_id_length);
        c.nonce_length = j.value("nonce_length", c.nonce_length);
        const std::string mode = j.value("mode", std::string("plaintext"));
        if (mode == "encrypted")
            c.mode = config::QuicMode::kEncrypted;
        else if (mode != "plaintext")
            throw json::other_error::create(501, "quic mode \"" + mode + "\" is unknown", &j);
        c.key_file = j.value("key_file", std::string());
        out.push_back(c);
    }
    return out;
}

std::string quic_config_text(const config::QuicConfig& c) {
    return fmt::format("config {} ({}, server_id_length {}, nonce_length {})", c.config_id,
                       c.mode == config::QuicMode::kEncrypted ? "encrypted" : "plaintext",
                       c.server_id_length, c.nonce_length);
}

// The key of an encrypted config: --key-file, else the config's key_file.
std::expected<quic::Key, std::string> quic_key_for(const Command& cmd,
                                                   const config::QuicConfig& c) {
    const std::string path = cmd.key_file.empty() ? c.key_file : cmd.key_file;
    if (path.empty())
        return std::unexpected(quic_config_text(c) +
                               " is encrypted and names no key_file: give its key with --key-file "
                               "PATH");
    auto key = quic::read_key_file(path);
    if (!key)
        return std::unexpected("the key of " + quic_config_text(c) + ": " + key.error().message() +
                               (cmd.key_file.empty()
                                    ? " (xlbctl reads the config's key_file itself: run it as "
                                      "root on the balancer, or give a copy with --key-file PATH)"
                                    : ""));
    return *key;
}

// The backends the spec gives a server id, by address; their live state
// from the status part of the reply when it is there.
struct QuicOwner {
    std::string address;
    std::string state;   // active, draining, disabled ("" unknown)
    std::string health;  // healthy, unhealthy, ... ("" unknown)
};
std::optional<QuicOwner> quic_owner(const json& vip, std::uint64_t server_id) {
    const json& spec = vip.contains("spec") ? vip.at("spec") : vip;
    if (!spec.contains("backends")) return std::nullopt;
    for (const json& b : spec.at("backends")) {
        if (!b.contains("server_id") || b.at("server_id").is_null()) continue;
        if (b.at("server_id").get<std::uint64_t>() != server_id) continue;
        QuicOwner owner{str(b, "address"), b.value("state", std::string()), ""};
        if (vip.contains("backends") && vip.at("backends").is_array())
            for (const json& s : vip.at("backends"))
                if (s.value("address", std::string()) == owner.address) {
                    owner.state = s.value("state", owner.state);
                    owner.health = s.value("health", std::string());
                }
        return owner;
    }
    return std::nullopt;
}

std::expected<QuicAnswer, std::string> quic_sample(const Command& cmd, const json& vip,
                                                   const std::vector<config::QuicConfig>& configs) {
    const std::string key_text = str(vip, "vip");
    const config::QuicConfig* chosen = &configs.front();
    if (cmd.quic_config_id) {
        chosen = nullptr;
        std::string ids;
        for (const config::QuicConfig& c : configs) {
            if (c.config_id == *cmd.quic_config_id) chosen = &c;
            ids += (ids.empty() ? "" : ", ") + std::to_string(c.config_id);
        }
        if (!chosen)
            return std::unexpected(
                fmt::format("--config-id: VIP {} has no config {}; its configs: {}", key_text,
                            *cmd.quic_config_id, ids));
    }
    const config::QuicConfig& c = *chosen;
    std::vector<std::uint8_t> nonce;
    if (cmd.nonce) {
        nonce = *cmd.nonce;
        if (nonce.size() != c.nonce_length)
            return std::unexpected(
                fmt::format("--nonce: found {} octets, {} takes {} ({} hex digits)", nonce.size(),
                            quic_config_text(c), c.nonce_length, 2 * c.nonce_length));
    } else {
        std::random_device random;
        nonce.resize(c.nonce_length);
        for (auto& o : nonce) o = static_cast<std::uint8_t>(random());
    }
    std::optional<quic::Key> key;
    if (c.mode == config::QuicMode::kEncrypted) {
        auto k = quic_key_for(cmd, c);
        if (!k) return std::unexpected(k.error());
        key = *k;
    }
    auto cid = quic::encode_cid(c, cmd.quic_server_id, nonce, key);
    if (!cid) return std::unexpected("--server-id: " + cid.error().message());

    QuicAnswer answer;
    const auto owner = quic_owner(vip, cmd.quic_server_id);
    if (!owner)
        answer.warnings.push_back(fmt::format(
            "no backend of VIP {} has server_id {}: the balancer would send this CID's packets by "
            "their 5-tuple (unknown_server)",
            key_text, cmd.quic_server_id));
    answer.document =
        json{{"vip", key_text},
             {"cid", quic::to_hex(*cid)},
             {"config_id", c.config_id},
             {"mode", c.mode == config::QuicMode::kEncrypted ? "encrypted" : "plaintext"},
             {"server_id", cmd.quic_server_id},
             {"nonce", quic::to_hex(nonce)},
             {"backend", owner ? json(owner->address) : json(nullptr)}};
    answer.text = quic::to_hex(*cid) + "\n";
    return answer;
}

std::expected<QuicAnswer, std::string> quic_read(const Command& cmd, const json& vip,
                                                 const std::vector<config::QuicConfig>& configs,
                                                 const Style& style) {
    const std::string key_text = str(vip, "vip");
    const std::uint8_t config_id = cmd.cid.front() >> 5;
    const auto named = std::find_if(configs.begin(), configs.end(),
                                    [&](const auto& c) { return c.config_id == config_id; });
    std::vector<quic::KeyOf> keys;
    if (named != configs.end() && named->mode == config::QuicMode::kEncrypted &&
        cmd.cid.size() >= quic::cid_length(*named)) {
        auto k = quic_key_for(cmd, *named);
        if (!k) return std::unexpected(k.error());
        keys.push_back({config_id, *k});
    }
    quic::DecodeError why{};
    const auto decoded = quic::decode_cid(configs, keys, cmd.cid, &why);

    QuicAnswer answer;
    json& doc = answer.document;
    doc = json{{"vip", key_text},        {"cid", quic::to_hex(cmd.cid)},
               {"config_id", config_id}, {"server_id", nullptr},
               {"nonce", nullptr},       {"backend", nullptr},
               {"fallback", nullptr}};
    std::string& out = answer.text;
    out = fmt::format("{}: CID {}\n", key_text, quic::to_hex(cmd.cid));
    if (named != configs.end())
        out += fmt::format("  config     {}\n", quic_config_text(*named).substr(7));
    else
        out += fmt::format("  config     {}\n", config_id);

    std::string fallback, reason;
    if (!decoded) {
        fallback = quic::fallback_name(static_cast<std::uint32_t>(why));
        switch (why) {
            case quic::DecodeError::kUnknownConfig: {
                std::string ids;
                for (const auto& c : configs)
                    ids += (ids.empty() ? "" : ", ") + std::to_string(c.config_id);
                reason =
                    config_id == XLB_QUIC_UNROUTABLE
                        ? "config id 7 marks a CID its server chose without a config"
                        : fmt::format("the VIP has no config {} (its configs: {})", config_id, ids);
                break;
            }
            case quic::DecodeError::kBadLength:
                reason = fmt::format("{} octets, config {} reads {}", cmd.cid.size(), config_id,
                                     quic::cid_length(*named));
                break;
            case quic::DecodeError::kUnknownServer:
                reason = "the server id is above 2^64: no backend can own it";
                break;
            case quic::DecodeError::kNoKey: reason = "no key for the config"; break;
        }
    } else {
        doc["server_id"] = decoded->server_id;
        doc["nonce"] = quic::to_hex(decoded->nonce);
        out += fmt::format("  server id  {} (0x{})\n", decoded->server_id,
                           quic::to_hex(decoded->server_id_octets));
        out += fmt::format("  nonce      {}\n", quic::to_hex(decoded->nonce));
        if (cmd.cid.size() > quic::cid_length(*named))
            out += fmt::format("  (the {} octets after the CID's {} are not part of it)\n",
                               cmd.cid.size() - quic::cid_length(*named), quic::cid_length(*named));
        if (const auto owner = quic_owner(vip, decoded->server_id)) {
            doc["backend"] = owner->address;
            std::string detail = owner->state;
            if (!owner->health.empty()) detail += (detail.empty() ? "" : ", ") + owner->health;
            out += "  backend    " + paint(owner->address, Colour::kBold, style) +
                   (detail.empty() ? "" : " (" + detail + ")") + "\n";
            return answer;
        }
        fallback = quic::fallback_name(XLB_QUIC_FB_UNKNOWN_SERVER);
        reason = fmt::format("no backend of the VIP has server_id {}", decoded->server_id);
    }
    doc["fallback"] = fallback;
    out += "  backend    " + paint("none", Colour::kYellow, style) +
           fmt::format(": balanced by its 5-tuple, {} ({})\n", fallback, reason);
    return answer;
}

}  // namespace

std::expected<QuicAnswer, std::string> quic_answer(const Command& command, const json& vip,
                                                   const Style& style) {
    auto configs = quic_configs_of(vip);
    if (!configs) return std::unexpected(configs.error());
    if (command.verb == Verb::kQuicCid) return quic_sample(command, vip, *configs);
    return quic_read(command, vip, *configs, style);
}

}  // namespace xlb::xlbctl
