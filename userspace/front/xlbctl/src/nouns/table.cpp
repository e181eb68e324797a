// SPDX-License-Identifier: Apache-2.0
// xlbctl table and lookup: a VIP's live Maglev table (GET /v1/table) and
// the backend a new flow would get from it (GET /v1/lookup).
#include <fmt/format.h>

#include <CLI/CLI.hpp>

#include "../checks.h"
#include "../render_parts.h"
#include "../request_parts.h"
#include "nouns.h"
#include "xlb/quic/cid.h"

namespace xlb::xlbctl::noun {

namespace {

std::string render_table(const json& r, const Style& style) {
    const std::uint64_t ring = u64(r, "ring_size"), configured = u64(r, "configured_ring_size");
    std::string out = header_line(r, style);
    out += fmt::format("  {} slots", ring);
    if (ring != configured) out += fmt::format(" (configured {})", configured);
    out += "  ";
    out += flag(r, "published") ? paint("live", Colour::kGreen, style)
                                : paint("pending", Colour::kYellow, style);
    out += "\n";
    if (ring == 0)
        out += paint("empty table: no backend can take new flows", Colour::kRed, style) + "\n";
    const json& backends = r.at("backends");
    if (backends.empty()) return out;
    Table t({{"BACKEND"},
             {"SLOTS", Align::kRight},
             {"SHARE", Align::kRight},
             {"TARGET", Align::kRight},
             {"DEVIATION", Align::kRight},
             {"IN TABLE"}});
    for (const json& b : backends) {
        const bool in = flag(b, "in_table");
        const double share = number(b, "share"), target = number(b, "target_share");
        std::string deviation = "-";
        if (in && target > 0) deviation = format_signed_percent(share / target - 1);
        t.add({str(b, "address"), std::to_string(u64(b, "slots")), format_percent(share),
               in ? format_percent(target) : "-", deviation,
               in ? Cell{"yes"} : Cell{"no", Colour::kYellow}});
    }
    return out + t.render(style);
}

// --cid: what the connection ID says, before the ring's answer when the
// packet falls back to it.
std::string render_quic_lookup(const json& r, const json& q, const Style& style) {
    std::string out =
        fmt::format("{}: a QUIC packet with connection ID {} ", str(r, "vip"), str(q, "cid"));
    std::string decoded;
    if (q.value("config_id", json()).is_number())
        decoded = fmt::format("config {}, server id {}", u64(q, "config_id"), u64(q, "server_id"));
    if (str(r, "outcome") == "tx_quic_cid") {
        out +=
            "goes to " + paint(str(r, "backend"), Colour::kBold, style) + " by its connection ID\n";
        out += fmt::format("  {}, backend id {}, epoch {}\n", decoded, u64(r, "backend_id"),
                           u64(r, "epoch"));
        return out;
    }
    out += paint("falls back", Colour::kYellow, style) +
           fmt::format(" to the table ({}{}); from {}:\n", str(q, "fallback"),
                       decoded.empty() ? "" : ": " + decoded, str(r, "src"));
    return out;
}

std::string render_lookup(const json& r, const Style& style) {
    std::string out;
    if (const auto q = r.find("quic"); q != r.end() && q->is_object()) {
        out = render_quic_lookup(r, *q, style);
        if (str(r, "outcome") == "tx_quic_cid") return out;
    }
    const std::string outcome = str(r, "outcome");
    out += fmt::format("{}: a new {} flow from {} to port {} ", str(r, "vip"), str(r, "proto"),
                       str(r, "src"), u64(r, "dport"));
    const std::uint64_t hash = u64(r, "hash");
    if (outcome == "tx" && !r.at("backend").is_null()) {
        out += "goes to " + paint(str(r, "backend"), Colour::kBold, style) + "\n";
        out += fmt::format("  backend id {}, slot {} of {}, hash {} (0x{:08x}), epoch {}\n",
                           u64(r, "backend_id"), u64(r, "slot"), u64(r, "ring_size"), hash, hash,
                           u64(r, "epoch"));
        return out;
    }
    std::string why = outcome;
    if (outcome == "drop_no_table")
        why = "the VIP has no published table";
    else if (outcome == "drop_no_backend")
        why = "the table is empty: no backend can take traffic";
    out += paint("is dropped", Colour::kRed, style) + fmt::format(": {} ({})\n", why, outcome);
    out += fmt::format("  hash {} (0x{:08x}), epoch {}\n", hash, hash, u64(r, "epoch"));
    return out;
}

// --proto and --dport agree with the VIP; --src is of its family.
Checked<void> lookup_check(const Raw& raw, Command& c) {
    const Examples ex = examples_for(c.vip_key);
    config::VipKey& key = *c.vip_key;
    const bool explicit_proto = raw.vip.find('/') != std::string::npos;
    if (!raw.proto.empty()) {
        auto proto = config::parse_protocol(raw.proto);
        if (!proto)
            return std::unexpected("--proto: found " + in_quotes(raw.proto) +
                                   ", expected tcp or udp, e.g. --proto udp");
        if (explicit_proto && *proto != key.protocol)
            return std::unexpected(std::string("--proto: found ") + config::to_string(*proto) +
                                   ", but VIP " + key.to_string() + " is " +
                                   config::to_string(key.protocol) + "; expected --proto " +
                                   config::to_string(key.protocol) + " or no --proto");
        key.protocol = *proto;
        c.proto = *proto;
    }
    auto src = net::Endpoint::parse(raw.src);
    if (!src) return std::unexpected("--src: " + src.error());
    if (src->address.family != key.address.family)
        return std::unexpected("--src: found an IPv" + std::to_string(src->address.family) +
                               " client " + src->to_string() + " for the IPv" +
                               std::to_string(key.address.family) + " VIP " + key.to_string() +
                               ", expected an IPv" + std::to_string(key.address.family) +
                               " address and port, e.g. --src " + ex.src);
    c.src = *src;
    if (!raw.dport.empty()) {
        auto port = parse_unsigned(raw.dport);
        if (!port || *port < 1 || *port > 65535)
            return std::unexpected("--dport: found " + in_quotes(raw.dport) +
                                   ", expected a port 1-65535, e.g. --dport 443");
        if (key.port != 0 && *port != key.port)
            return std::unexpected("--dport: found " + raw.dport + ", but VIP " + key.to_string() +
                                   " serves port " + std::to_string(key.port) +
                                   " only; expected --dport " + std::to_string(key.port) +
                                   " or no --dport");
        c.dport = static_cast<std::uint16_t>(*port);
    } else if (key.port == 0) {
        return std::unexpected("VIP " + key.to_string() +
                               " serves every port: --dport is required, e.g. " + "xlbctl lookup " +
                               key.to_string() + " --src " + ex.src + " --dport 443");
    }
    if (!raw.cid.empty()) {
        auto cid = quic::from_hex(raw.cid);
        if (!cid)
            return std::unexpected("--cid: " + cid.error().message() +
                                   ", e.g. --cid 280102a1b2c3d4e5f6");
        if (cid->empty() || cid->size() > XLB_QUIC_CID_MAX)
            return std::unexpected("--cid: found " + std::to_string(cid->size()) +
                                   " octets, expected 1 to 20 (a QUIC connection ID)");
        c.cid = std::move(*cid);
    }
    return {};
}

HttpRequest lookup_request(const Command& c) {
    std::string target = "/v1/lookup?" + vip_query(c) + "&src=" + url_encode(c.src.to_string());
    if (c.proto) target += "&proto=" + std::string(config::to_string(*c.proto));
    if (c.dport) target += "&dport=" + std::to_string(*c.dport);
    if (!c.cid.empty()) target += "&cid=" + quic::to_hex(c.cid);
    return {"GET", target, ""};
}

constexpr VerbSpec kTable[] = {
    {.verb = Verb::kTable,
     .help = "A VIP's live Maglev table: epoch, checksum, size, and slots per\n"
             "backend against its target share.",
     .examples = "  xlbctl table 198.51.100.10:80/tcp\n"
                 "  xlbctl table 198.51.100.10:80/tcp --json\n",
     .options = [](CLI::App& app, Raw& raw) { add_vip_arg(&app, raw); },
     .request =
         [](const Command& c) {
             return HttpRequest{"GET", "/v1/table?" + vip_query(c), ""};
         },
     .render = [](const Command&, const json& r,
                  const Style& style) { return render_table(r, style); }},
};

constexpr VerbSpec kLookup[] = {
    {.verb = Verb::kLookup,
     .help = "The backend the first packet of a new flow from --src would get:\n"
             "the kernel's hash, seed and live table. (Established flows follow\n"
             "the connection table and may be elsewhere.) With --cid, a QUIC VIP's\n"
             "packet with that connection ID: the backend whose server id it\n"
             "carries, or the fallback reason and then the table's answer.",
     .examples = "  xlbctl lookup 198.51.100.10:80/tcp --src 192.0.2.7:40000\n"
                 "  xlbctl lookup 198.51.100.10:53 --proto udp --src 192.0.2.7:5353\n"
                 "  xlbctl lookup 198.51.100.20:0/tcp --src 192.0.2.7:40000 --dport 443"
                 "   # every-port VIP\n"
                 "  xlbctl lookup '[2001:db8::10]:443' --src '[2001:db8:c::7]:40000'\n"
                 "  xlbctl lookup 198.51.100.10:443/udp --src 192.0.2.7:5353 --cid "
                 "280102a1b2c3d4e5f6\n",
     .options =
         [](CLI::App& app, Raw& raw) {
             add_vip_arg(&app, raw);
             app.add_option("--src", raw.src, "the client, IP:PORT or [IPv6]:PORT")
                 ->type_name("IP:PORT")
                 ->required();
             app.add_option("--proto", raw.proto, "tcp or udp (default: the VIP's)")
                 ->type_name("P");
             app.add_option("--dport", raw.dport,
                            "destination port; required for an every-port (:0) VIP")
                 ->type_name("PORT");
             app.add_option("--cid", raw.cid,
                            "a QUIC VIP: the destination connection ID of a short-header "
                            "packet, in hex; the backend it names, or why it falls back "
                            "and the table's answer")
                 ->type_name("HEX");
         },
     .check = lookup_check,
     .request = lookup_request,
     .render = [](const Command&, const json& r,
                  const Style& style) { return render_lookup(r, style); }},
};

}  // namespace

const Noun& table() {
    static const Noun noun{.name = "table", .verbs = kTable};
    return noun;
}

const Noun& lookup() {
    static const Noun noun{.name = "lookup", .verbs = kLookup};
    return noun;
}

}  // namespace xlb::xlbctl::noun
