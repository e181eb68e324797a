// SPDX-License-Identifier: Apache-2.0
// xlbctl capture: the packets the balancer handles, filtered in the kernel,
// into a pcap file (POST /v1/capture, docs/capture.md). The reply is a
// stream that run.cpp writes to the file; nothing is rendered.
#include <CLI/CLI.hpp>

#include "../checks.h"
#include "nouns.h"

namespace xlb::xlbctl::noun {

namespace {

Checked<void> capture_check(const Raw& raw, Command& c) {
    const Examples ex = examples_for(c.vip_key);
    if (!raw.ct_backend.empty()) {
        auto a = net::IpAddress::parse(raw.ct_backend);
        if (!a)
            return std::unexpected("--backend: " + a.error() + ", e.g. --backend " + ex.backend);
        c.capture_backend = *a;
    }
    if (!raw.client.empty()) {
        auto p = net::Prefix::parse(raw.client);
        if (!p) return std::unexpected("--src: " + p.error() + ", e.g. --src " + ex.client);
        c.capture_src = *p;
    }
    c.outcomes = raw.outcomes;
    if (!raw.count.empty()) {
        auto n = check_count(raw.count, "packets", "--count 100");
        if (!n) return std::unexpected(n.error());
        c.count = *n;
    }
    if (!raw.duration.empty()) {
        auto d = check_duration("--duration", raw.duration, "--duration 30s");
        if (!d) return std::unexpected(d.error());
        c.capture_duration = *d;
    }
    if (!raw.snaplen.empty()) {
        auto n = parse_unsigned(raw.snaplen);
        if (!n || *n < 1 || *n > kMaxSnaplen)
            return std::unexpected("--snaplen: found " + in_quotes(raw.snaplen) + ", expected 1-" +
                                   std::to_string(kMaxSnaplen) + " bytes, e.g. --snaplen 128");
        c.snaplen = static_cast<std::uint32_t>(*n);
    }
    c.write_to = raw.write_to;
    return {};
}

void capture_options(CLI::App& app, Raw& raw) {
    app.add_option("--vip", raw.vip, "only this VIP's packets (ADDRESS:PORT[/tcp|/udp])")
        ->type_name("VIP");
    app.add_option("--backend", raw.ct_backend, "only packets sent to this backend address")
        ->type_name("ADDR");
    app.add_option("--src", raw.client, "only packets from clients in this prefix (or address)")
        ->type_name("CIDR");
    app.add_option("--outcome", raw.outcomes,
                   "only these outcomes: tx, pass, drop, all, or an outcome's name as in "
                   "`xlbctl stats` (drop_no_backend, ...); repeatable (default all)")
        ->type_name("OUTCOME");
    app.add_option("-n,--count", raw.count, "stop after N packets")->type_name("N");
    app.add_option("--duration", raw.duration, "stop after DUR, e.g. 30s")->type_name("DUR");
    app.add_option("--snaplen", raw.snaplen,
                   "keep at most N bytes of each packet, 1-" + std::to_string(kMaxSnaplen) +
                       " (default " + std::to_string(kMaxSnaplen) + ")")
        ->type_name("N");
    app.add_option("-w,--write", raw.write_to,
                   "the pcap file to write (mode 0600), or - for standard output")
        ->type_name("FILE")
        ->required();
}

HttpRequest capture_request(const Command& c) {
    nlohmann::json body = nlohmann::json::object();
    if (c.vip_key) body["vip"] = c.vip;
    if (c.capture_backend) body["backend"] = c.capture_backend->to_string();
    if (c.capture_src) body["src"] = c.capture_src->to_string();
    if (!c.outcomes.empty()) body["outcomes"] = c.outcomes;
    if (c.count) body["count"] = *c.count;
    if (c.capture_duration)
        body["duration_ms"] =
            std::chrono::duration_cast<std::chrono::milliseconds>(*c.capture_duration).count();
    if (c.snaplen) body["snaplen"] = *c.snaplen;
    return {"POST", "/v1/capture", body.dump()};
}

constexpr VerbSpec kCaptureVerbs[] = {
    {.verb = Verb::kCapture,
     .help = "Copy the packets the balancer handles into a pcap file, filtered in the\n"
             "kernel: by VIP, backend, client prefix and outcome. A packet sent on gives\n"
             "two records, as received and as sent (encapsulated); the link type is\n"
             "LINUX_SLL2, whose packet type says which (tcpdump shows In / Out). Stops\n"
             "after --count packets, after --duration, or on Ctrl-C; then says how many\n"
             "packets matched and how many records the ring buffer lost. Root or the\n"
             "API socket's group only (docs/capture.md).",
     .examples = "  xlbctl capture --vip 198.51.100.10:80/tcp --outcome drop --count 100 -w "
                 "drops.pcap\n"
                 "  xlbctl capture --backend 203.0.113.11 --duration 10s -w - | tcpdump -nr -\n"
                 "  xlbctl capture --src 192.0.2.0/24 --outcome tx --snaplen 128 -w client.pcap\n",
     .options = capture_options,
     .vip_option = true,
     .check = capture_check,
     .request = capture_request},
};

}  // namespace

const Noun& capture() {
    static const Noun noun{.name = "capture", .verbs = kCaptureVerbs};
    return noun;
}

}  // namespace xlb::xlbctl::noun
