// SPDX-License-Identifier: Apache-2.0
// xlbctl quic cid|decode: the CIDs a VIP's QUIC servers issue under its
// QUIC-LB configs (docs/quic.md), for operators checking a server's
// settings. Both read the VIP (GET /v1/vip) and compute the rest here
// (quic.h); run.cpp shows the result.
#include <CLI/CLI.hpp>

#include "../checks.h"
#include "../request_parts.h"
#include "nouns.h"
#include "xlb/quic/cid.h"

namespace xlb::xlbctl::noun {

namespace {

// QUIC VIPs are UDP: a key without /proto means udp here.
Checked<void> quic_vip(const Raw& raw, Command& c) {
    if (raw.vip.find('/') == std::string::npos) c.vip_key->protocol = config::Protocol::kUdp;
    return {};
}

void add_key_file_option(CLI::App& app, Raw& raw) {
    app.add_option("--key-file", raw.key_file,
                   "an encrypted config's key (16 octets raw or 32 hex digits, owned by root, "
                   "mode 0600 or 0400) instead of the config's key_file")
        ->type_name("PATH");
}

Checked<void> quic_cid_check(const Raw& raw, Command& c) {
    if (auto ok = quic_vip(raw, c); !ok) return ok;
    auto id = parse_unsigned(raw.server_id);
    if (!id)
        return std::unexpected("--server-id: found " + in_quotes(raw.server_id) +
                               ", expected the backend's server_id, a number, e.g. --server-id 3");
    c.quic_server_id = *id;
    if (!raw.config_id.empty()) {
        auto config_id = parse_unsigned(raw.config_id);
        if (!config_id || *config_id >= XLB_QUIC_CONFIG_IDS)
            return std::unexpected("--config-id: found " + in_quotes(raw.config_id) +
                                   ", expected a config id 0-6, e.g. --config-id 1");
        c.quic_config_id = static_cast<std::uint8_t>(*config_id);
    }
    if (!raw.nonce.empty()) {
        auto nonce = quic::from_hex(raw.nonce);
        if (!nonce) return std::unexpected("--nonce: " + nonce.error().message());
        c.nonce = std::move(*nonce);
    }
    c.key_file = raw.key_file;
    return {};
}

Checked<void> quic_decode_check(const Raw& raw, Command& c) {
    if (auto ok = quic_vip(raw, c); !ok) return ok;
    auto cid = quic::from_hex(raw.cid);
    if (!cid) return std::unexpected("CID: " + cid.error().message() + ", e.g. 4a00030d2f8e1b7c5a");
    c.cid = std::move(*cid);
    c.key_file = raw.key_file;
    return {};
}

HttpRequest quic_request(const Command& c) { return {"GET", "/v1/vip?" + vip_query(c), ""}; }

constexpr VerbSpec kQuicVerbs[] = {
    {.verb = Verb::kQuicCid,
     .name = "cid",
     .help = "A sample CID (hex) that a QUIC server with this server id issues under\n"
             "the VIP's QUIC-LB config (default: its first, the one servers issue now),\n"
             "with a random nonce unless --nonce is given. An encrypted config's key is\n"
             "read from its key_file (or --key-file).",
     .examples =
         "  xlbctl quic cid 198.51.100.10:443/udp --server-id 3\n"
         "  xlbctl quic cid 198.51.100.10:443 --server-id 3 --config-id 1 "
         "--nonce 0a0b0c0d0e0f\n"
         "  xlbctl quic cid 198.51.100.10:443 --server-id 3 --key-file /root/k.hex --json\n",
     .options =
         [](CLI::App& app, Raw& raw) {
             add_vip_arg(&app, raw);
             app.add_option("--server-id", raw.server_id, "the backend's server_id")
                 ->type_name("N")
                 ->required();
             app.add_option("--config-id", raw.config_id,
                            "the config to encode with, 0-6 (default: the VIP's first)")
                 ->type_name("C");
             app.add_option("--nonce", raw.nonce,
                            "the nonce, nonce_length octets as hex (default: random)")
                 ->type_name("HEX");
             add_key_file_option(app, raw);
         },
     .check = quic_cid_check,
     .request = quic_request},
    {.verb = Verb::kQuicDecode,
     .name = "decode",
     .help = "What the balancer reads in a CID (hex) under the VIP's QUIC-LB configs:\n"
             "config id, server id, nonce, and the backend that owns that server id,\n"
             "or why its packets are balanced by their 5-tuple instead (the fallback\n"
             "reason: unknown_config, bad_length, unknown_server, no_key).",
     .examples =
         "  xlbctl quic decode 198.51.100.10:443/udp 4a00030d2f8e1b7c5a\n"
         "  xlbctl quic decode 198.51.100.10:443 50:4d:d2:d0:5a:7b:0d:e9:b2:b9:90:7a:fb:5e:cf:"
         "8c:c3 --key-file /root/k.hex\n",
     .options =
         [](CLI::App& app, Raw& raw) {
             add_vip_arg(&app, raw);
             app.add_option("CID", raw.cid,
                            "the connection ID as hex (\"0x\" prefix, ':' or '-' between octets "
                            "allowed)")
                 ->type_name("")
                 ->required();
             add_key_file_option(app, raw);
         },
     .check = quic_decode_check,
     .request = quic_request},
};

}  // namespace

const Noun& quic() {
    static const Noun noun{
        .name = "quic",
        .help = "QUIC-LB connection IDs of a VIP's servers: a sample one, or one decoded.",
        .examples =
            "  xlbctl quic cid 198.51.100.10:443/udp --server-id 3\n"
            "  xlbctl quic decode 198.51.100.10:443/udp 4a00030d2f8e1b7c5a\n",
        .verbs = kQuicVerbs};
    return noun;
}

}  // namespace xlb::xlbctl::noun
