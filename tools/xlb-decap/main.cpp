// SPDX-License-Identifier: Apache-2.0
// xlb-decap: the backend side of xlb. Loads the decapsulator (xlb_decap.bpf.c),
// tells it this backend's own addresses (the outer destinations the balancer
// uses), attaches it to an interface in XDP and stays in the foreground until
// SIGTERM or SIGINT, when it detaches (SIGUSR1 prints the counters;
// --metrics-file keeps them in a file for node_exporter). Run it under a
// supervisor (systemd,
// the lab script) like any daemon; nothing is pinned, so nothing is left
// behind when it exits, however it exits. `xlb-decap setup` applies or
// checks the rest of what a backend needs (setup.h).
//
// SYN cookies: unless --no-cookies, the cookie acceptor (xlb_cookie.bpf.c)
// goes on the same interface's tc ingress, so that an ACK for a SYN the
// balancer answered with a cookie becomes a connection here.
#include <fmt/core.h>
#include <net/if.h>
#include <signal.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <string>
#include <vector>

#include "setup.h"
#include "xlb/abi.h"
#include "xlb/bpf/probe.h"
#include "xlb/bpf/programs.h"
#include "xlb/bpf/xdp.h"
#include "xlb/cli/suggest.h"
#include "xlb/exposition/exposition.h"
#include "xlb/files/files.h"
#include "xlb/net/address.h"
#include "xlb/netlink/neighbor.h"
#include "xlb/version.h"

namespace {

std::uint64_t total(const xlb::bpf::DecapProgram& prog, std::uint32_t outcome) {
    auto per_cpu = prog.outcomes().get_per_cpu(outcome);
    if (!per_cpu) return 0;
    return xlb::bpf::sum_per_cpu(*per_cpu, [](std::uint64_t v) { return v; });
}

std::uint64_t total(const xlb::bpf::CookieProgram& prog, std::uint32_t outcome) {
    auto per_cpu = prog.outcomes().get_per_cpu(outcome);
    if (!per_cpu) return 0;
    return xlb::bpf::sum_per_cpu(*per_cpu, [](std::uint64_t v) { return v; });
}

const char* cookie_outcome_name(std::uint32_t outcome) {
    switch (static_cast<xlb_cookie_outcome>(outcome)) {
        case XLB_COOKIE_OUT_ASSIGNED: return "assigned";
        case XLB_COOKIE_OUT_PASS_ESTABLISHED: return "pass_established";
        case XLB_COOKIE_OUT_PASS_NO_LISTENER: return "pass_no_listener";
        case XLB_COOKIE_OUT_PASS_NOT_ACK: return "pass_not_ack";
        case XLB_COOKIE_OUT_DROP_ASSIGN_FAILED: return "drop_assign_failed";
        case XLB_COOKIE_OUT__MAX: break;
    }
    return "unknown";
}

void print_counters(const xlb::bpf::DecapProgram& prog, const xlb::bpf::CookieProgram* cookies) {
    fmt::print(
        "xlb-decap: decapsulated {}, passed (not encapsulated) {}, passed (malformed) {}, "
        "passed (fragment) {}, dropped (headroom) {}\n",
        total(prog, XLB_DECAP_OUT_DECAPSULATED), total(prog, XLB_DECAP_OUT_PASS_NOT_ENCAP),
        total(prog, XLB_DECAP_OUT_PASS_MALFORMED), total(prog, XLB_DECAP_OUT_PASS_FRAGMENT),
        total(prog, XLB_DECAP_OUT_DROP_HEADROOM));
    fmt::print("xlb-decap: second chance: passed on {}, decapsulated for want of a next hop {}\n",
               total(prog, XLB_DECAP_OUT_PASSED_ON),
               total(prog, XLB_DECAP_OUT_DECAPSULATED_NO_NEXT_HOP));
    fmt::print("xlb-decap: cookie ACKs: decapsulated {}, dropped (no acceptor) {}\n",
               total(prog, XLB_DECAP_OUT_DECAPSULATED_COOKIE),
               total(prog, XLB_DECAP_OUT_DROP_COOKIE_NO_ACCEPTOR));
    if (cookies != nullptr)
        fmt::print(
            "xlb-decap: cookie acceptor: connections made {}, passed (socket exists) {}, "
            "passed (no listener) {}, passed (not an ACK) {}, dropped (refused) {}\n",
            total(*cookies, XLB_COOKIE_OUT_ASSIGNED),
            total(*cookies, XLB_COOKIE_OUT_PASS_ESTABLISHED),
            total(*cookies, XLB_COOKIE_OUT_PASS_NO_LISTENER),
            total(*cookies, XLB_COOKIE_OUT_PASS_NOT_ACK),
            total(*cookies, XLB_COOKIE_OUT_DROP_ASSIGN_FAILED));
    if (auto passed = prog.passed_on(); !passed) {
        fmt::print("xlb-decap: passed on, by backend: {}\n", passed.error().message());
    } else {
        for (const auto& [addr, count] : *passed) {
            fmt::print("xlb-decap: passed on to {}: {}\n",
                       xlb::net::IpAddress::from_words(addr.addr, addr.family).to_string(), count);
        }
    }
    std::fflush(stdout);
}

const char* outcome_name(std::uint32_t outcome) {
    switch (static_cast<xlb_decap_outcome>(outcome)) {
        case XLB_DECAP_OUT_DECAPSULATED: return "decapsulated";
        case XLB_DECAP_OUT_PASS_NOT_ENCAP: return "pass_not_encap";
        case XLB_DECAP_OUT_PASS_MALFORMED: return "pass_malformed";
        case XLB_DECAP_OUT_PASS_FRAGMENT: return "pass_fragment";
        case XLB_DECAP_OUT_DROP_HEADROOM: return "drop_headroom";
        case XLB_DECAP_OUT_PASSED_ON: return "passed_on";
        case XLB_DECAP_OUT_DECAPSULATED_NO_NEXT_HOP: return "decapsulated_no_next_hop";
        case XLB_DECAP_OUT_DECAPSULATED_COOKIE: return "decapsulated_cookie";
        case XLB_DECAP_OUT_DROP_COOKIE_NO_ACCEPTOR: return "drop_cookie_no_acceptor";
        case XLB_DECAP_OUT__MAX: break;
    }
    return "unknown";
}

// The counters in the Prometheus text format, for node_exporter's textfile
// collector (docs/second-chance.md, "Observing it").
std::string metrics_text(const xlb::bpf::DecapProgram& prog, const xlb::bpf::CookieProgram* cookies,
                         const std::string& ifname) {
    xlb::exposition::Writer w;
    w.family("xlb_decap_packets_total", "counter",
             "Packets xlb_decap saw on the interface, by outcome.");
    for (std::uint32_t o = 0; o < XLB_DECAP_OUT__MAX; ++o)
        w.sample("xlb_decap_packets_total", {{"interface", ifname}, {"outcome", outcome_name(o)}},
                 total(prog, o));
    w.family("xlb_decap_passed_on_total", "counter",
             "Packets of flows this host does not know, sent on to the backend their "
             "second-chance hint named.");
    if (auto passed = prog.passed_on()) {
        for (const auto& [addr, count] : *passed)
            w.sample(
                "xlb_decap_passed_on_total",
                {{"interface", ifname},
                 {"backend", xlb::net::IpAddress::from_words(addr.addr, addr.family).to_string()}},
                count);
    }
    if (cookies != nullptr) {
        w.family("xlb_decap_cookie_acks_total", "counter",
                 "Cookie ACKs the cookie acceptor on tc ingress saw, by outcome.");
        for (std::uint32_t o = 0; o < XLB_COOKIE_OUT__MAX; ++o)
            w.sample("xlb_decap_cookie_acks_total",
                     {{"interface", ifname}, {"outcome", cookie_outcome_name(o)}},
                     total(*cookies, o));
    }
    return w.take();
}

// XLB_DECAP_ADDRESSES, when no --address is given: the addresses separated
// by spaces, tabs or commas (the systemd unit's configuration file sets it).
std::vector<std::string> addresses_from_environment() {
    std::vector<std::string> out;
    const char* value = std::getenv("XLB_DECAP_ADDRESSES");
    if (value == nullptr) return out;
    std::string word;
    for (const char* p = value;; ++p) {
        if (*p == '\0' || *p == ' ' || *p == '\t' || *p == ',' || *p == '\n') {
            if (!word.empty()) out.push_back(std::move(word));
            word.clear();
            if (*p == '\0') break;
        } else {
            word += *p;
        }
    }
    return out;
}

// Exit status (xlb-decap(8)): 2 for a wrong command line, as in every xlb tool.
constexpr int kExitFailure = 1;
constexpr int kExitUsage = 2;

int fail(const std::string& message) {
    fmt::print(stderr, "xlb-decap: {}\n", message);
    return kExitFailure;
}

int usage_error(const std::string& message) {
    fmt::print(stderr, "xlb-decap: {} (xlb-decap --help lists the options)\n", message);
    return kExitUsage;
}

// `xlb-decap setup`: applies what is wrong, then looks again; --check only
// reports. Exit 1 when anything is (still) wrong that setup was to fix.
int run_setup(const xlb::decap::SetupOptions& options, bool check_only) {
    auto findings = xlb::decap::check(options);
    if (!findings) return fail(fmt::format("setup: {}", findings.error().message()));
    if (check_only) {
        for (const auto& f : *findings) fmt::print("xlb-decap: wrong: {}\n", f.describe());
        if (findings->empty()) {
            fmt::print("xlb-decap: setup check: every setting is right\n");
            return 0;
        }
        fmt::print("xlb-decap: setup check: {} setting{} wrong\n", findings->size(),
                   findings->size() == 1 ? "" : "s");
        return kExitFailure;
    }
    int changed = 0;
    for (const auto& f : *findings) {
        if (!f.apply) continue;
        if (auto done = f.apply(); !done)
            return fail(fmt::format("setup: {}: {}", f.setting, done.error().message()));
        for (const std::string& command : f.fix) fmt::print("xlb-decap: setup: {}\n", command);
        ++changed;
    }
    auto after = xlb::decap::check(options);
    if (!after) return fail(fmt::format("setup: {}", after.error().message()));
    int status = 0;
    for (const auto& f : *after) {
        if (f.apply) {
            fmt::print(stderr, "xlb-decap: setup: still wrong after setting it: {}\n",
                       f.describe());
            status = kExitFailure;
        } else {
            fmt::print("xlb-decap: still to do: {}\n", f.describe());
        }
    }
    fmt::print("xlb-decap: setup: {} setting{} changed\n", changed, changed == 1 ? "" : "s");
    std::fflush(stdout);
    return status;
}

}  // namespace

int main(int argc, char** argv) {
    CLI::App app{
        "xlb-decap: strips the outer headers that xlb's balancer adds (IPv4-in-IPv4,\n"
        "IPv4-in-IPv6, IPv6-in-IPv6, bare or inside UDP and GUE) from packets\n"
        "addressed to this backend, in XDP, so that the client's packet reaches the\n"
        "VIP configured on loopback.\n\n"
        "It runs in the foreground: the program stays attached while xlb-decap runs\n"
        "and is detached when it gets SIGTERM or SIGINT (nothing is pinned, nothing\n"
        "outlives it). --detach removes a decapsulator left attached by a process\n"
        "that was killed with SIGKILL, and exits. --keep attaches and exits at once,\n"
        "leaving the program attached.\n\n"
        "Without --address nothing is decapsulated and every packet passes: a\n"
        "plain pass-through program, e.g. for the peer of a veth whose other end\n"
        "sends with XDP_TX (native XDP_TX on veth needs a program on the peer).\n\n"
        "Options not given on the command line are taken from the environment\n"
        "variables named below (the systemd unit xlb-decap@IFACE reads them from\n"
        "/etc/xlb/decap-IFACE.conf): XLB_DECAP_ADDRESSES lists the addresses,\n"
        "separated by spaces or commas. See xlb-decap(8).\n\n"
        "SYN cookies: the cookie acceptor goes on the interface's tc ingress too, so\n"
        "that an ACK for a SYN the balancer answered with a cookie becomes a\n"
        "connection here (Linux 6.9 or later; on older kernels such ACKs are dropped\n"
        "and counted). --no-cookies leaves tc alone."};
    std::string ifname;
    std::vector<std::string> addresses;
    std::string mode_text = "native";
    bool replace = false;
    bool detach_only = false;
    bool quiet = false;
    bool keep = false;
    bool no_cookies = false;
    std::uint16_t gue_port = XLB_GUE_PORT_DEFAULT;
    std::string next_hop_text;
    std::string metrics_file;
    unsigned metrics_interval_s = 10;
    app.add_option("-i,--interface", ifname,
                   "interface to attach to (receives the encapsulated packets); required");
    app.add_option("-a,--address", addresses,
                   "an address of this backend that the balancer sends to (outer destination); "
                   "repeat for each (IPv4 and/or IPv6); default: XLB_DECAP_ADDRESSES");
    app.add_option("-m,--xdp-mode", mode_text, "native, generic or auto")
        ->envname("XLB_DECAP_XDP_MODE")
        ->capture_default_str();
    app.add_option("--gue-port", gue_port,
                   "UDP port of GUE-encapsulated packets (the balancer's gue_port); 0: "
                   "IP-in-IP only")
        ->envname("XLB_DECAP_GUE_PORT")
        ->capture_default_str();
    app.add_option("--next-hop", next_hop_text,
                   "second chance: the router (IP address, resolved now on --interface, or MAC) "
                   "that packets whose hint names another backend are sent back through when "
                   "this host does not know their flow; without it they are decapsulated here")
        ->envname("XLB_DECAP_NEXT_HOP");
    app.add_option("--metrics-file", metrics_file,
                   "write the counters in the Prometheus text format to this file (replaced "
                   "atomically every --metrics-interval and at exit), e.g. into node_exporter's "
                   "textfile collector directory")
        ->envname("XLB_DECAP_METRICS_FILE");
    app.add_option("--metrics-interval", metrics_interval_s, "seconds between metrics-file writes")
        ->check(CLI::Range(1u, 3600u))
        ->capture_default_str();
    app.add_flag("--replace", replace,
                 "replace a program already attached to the interface (by default only an "
                 "earlier xlb_decap is replaced)");
    app.add_flag("--detach", detach_only,
                 "detach an xlb_decap program from the interface and exit");
    app.add_flag("--keep", keep,
                 "attach, leave the program attached and exit at once (it stays until --detach "
                 "or until the interface goes away)");
    app.add_flag("--no-cookies", no_cookies,
                 "attach no cookie acceptor on tc ingress: ACKs the balancer sends with SYN "
                 "cookie data are dropped (the balancer's backend must then have "
                 "cookie_acks: false)")
        ->envname("XLB_DECAP_NO_COOKIES");
    app.add_flag("-q,--quiet", quiet, "do not print the counters on exit");
    xlb::decap::SetupOptions setup_options;
    std::vector<std::string> setup_vips;
    std::uint32_t setup_mtu = 0;
    std::string setup_decap = "xdp";
    bool setup_check = false;
    CLI::App* setup = app.add_subcommand(
        "setup",
        "apply the host settings a backend needs for these VIPs (each VIP on lo; with an "
        "IPv4 VIP arp_ignore, arp_announce and a loose rp_filter; the MTU), or with --check "
        "only report each one that is wrong, with its fix (docs/deploy.md)");
    setup
        ->add_option("-i,--interface", setup_options.interface,
                     "the interface that receives the encapsulated packets")
        ->required();
    setup->add_option("--vip", setup_vips, "a VIP this backend serves (IPv4 or IPv6); repeat")
        ->required();
    setup
        ->add_option("--mtu", setup_mtu,
                     "the balancer's mtu: the interface's MTU must be at least this "
                     "(default: not checked)")
        ->check(CLI::Range(576u, 9000u));
    setup
        ->add_option("--decap", setup_decap,
                     "what decapsulates: xdp (an xlb_decap program must be attached to the "
                     "interface) or kernel (the kernel's tunnel devices; not checked)")
        ->capture_default_str();
    setup->add_flag("--cookies", setup_options.want_cookie_acceptor,
                    "the balancer sends this backend SYN-cookie ACKs (its cookie_acks: true): "
                    "the cookie acceptor must be on the interface's tc ingress too (needs "
                    "--decap xdp)");
    setup->add_flag("--check", setup_check,
                    "change nothing: print each wrong setting and its fix, exit 1 if any");
    setup->footer(
        "Examples:\n"
        "  xlb-decap setup --interface eth0 --vip 198.51.100.10 --vip 2001:db8:f::10\n"
        "  xlb-decap setup --interface eth0 --vip 198.51.100.10 --mtu 1600 --check\n"
        "  xlb-decap setup --interface eth0 --vip 198.51.100.10 --cookies --check\n"
        "Exit status: 0 done (or, with --check, every setting right), 1 a setting wrong\n"
        "or an error, 2 a wrong command line.");
    app.require_subcommand(0, 1);
    app.footer(
        "Examples:\n"
        "  xlb-decap --interface eth0 --address 203.0.113.11 --address 2001:db8:b::11\n"
        "  xlb-decap --interface eth0 --address 203.0.113.11 --next-hop 203.0.113.1\n"
        "  xlb-decap --interface eth0 --detach\n"
        "  xlb-decap setup --interface eth0 --vip 198.51.100.10 --check\n"
        "Exit status: 0 after SIGTERM/SIGINT (or a successful --detach), 1 on error,\n"
        "2 a wrong command line.");
    app.set_version_flag("--version", "xlb-decap " XLB_VERSION);
    try {
        app.parse(argc, argv);
    } catch (const CLI::ParseError& e) {
        if (auto hint = xlb::cli::did_you_mean(&app)) return usage_error(*hint);
        const int code = app.exit(e);  // prints help, the version, or the error
        return code == 0 ? 0 : kExitUsage;
    }
    if (setup->parsed()) {
        for (const std::string& text : setup_vips) {
            auto vip = xlb::net::IpAddress::parse(text);
            if (!vip) return usage_error(fmt::format("setup --vip {}: {}", text, vip.error()));
            setup_options.vips.push_back(*vip);
        }
        if (setup_options.interface == "lo")
            return usage_error(
                "setup --interface: found lo, expected the interface that receives the "
                "encapsulated packets (the VIPs go on lo)");
        if (setup_decap != "xdp" && setup_decap != "kernel")
            return usage_error(
                fmt::format("setup --decap: found \"{}\", expected xdp or kernel", setup_decap));
        setup_options.want_decapsulator = setup_decap == "xdp";
        if (setup_options.want_cookie_acceptor && !setup_options.want_decapsulator)
            return usage_error(
                "setup --cookies: needs --decap xdp (the kernel's tunnel devices do not hand "
                "the cookie data on)");
        if (setup_mtu != 0) setup_options.mtu = setup_mtu;
        return run_setup(setup_options, setup_check);
    }
    if (ifname.empty()) return usage_error("--interface is required");
    const bool addresses_from_env = addresses.empty();
    if (addresses_from_env) addresses = addresses_from_environment();
    const char* address_source = addresses_from_env ? "XLB_DECAP_ADDRESSES" : "--address";

    // The arguments are checked before anything is touched.
    auto mode = xlb::bpf::parse_xdp_mode(mode_text);
    if (!mode)
        return usage_error(
            fmt::format("--xdp-mode: found \"{}\", expected native, generic or auto", mode_text));
    std::vector<xlb_decap_addr> keys;
    for (const std::string& text : addresses) {
        auto addr = xlb::net::IpAddress::parse(text);
        if (!addr) return usage_error(fmt::format("{} {}: {}", address_source, text, addr.error()));
        xlb_decap_addr key{};
        addr->to_words(key.addr);
        key.family = addr->family;
        keys.push_back(key);
    }
    std::optional<xlb::net::MacAddress> next_hop_mac;
    std::optional<xlb::net::IpAddress> next_hop_address;
    if (!next_hop_text.empty()) {
        if (auto mac = xlb::net::parse_mac(next_hop_text)) {
            if (!xlb::net::is_unicast_mac(*mac))
                return usage_error(
                    fmt::format("--next-hop: found {}, expected the unicast MAC of the "
                                "router (or its IP address)",
                                next_hop_text));
            next_hop_mac = *mac;
        } else if (auto hop = xlb::net::IpAddress::parse(next_hop_text)) {
            next_hop_address = *hop;
        } else {
            return usage_error(fmt::format(
                "--next-hop: found \"{}\", expected an IP address or a MAC", next_hop_text));
        }
    }

    auto iface = xlb::bpf::Interface::by_name(ifname);
    if (!iface) return fail(fmt::format("interface {}: {}", ifname, iface.error().message()));

    if (detach_only) {
        auto detached = xlb::bpf::detach_xdp(*iface, "xlb_decap");
        if (!detached)
            return fail(fmt::format("detach from {}: {}", ifname, detached.error().message()));
        fmt::print("xlb-decap: {}\n",
                   *detached ? "detached from " + ifname : "no xlb_decap program on " + ifname);
        auto acceptor = xlb::bpf::detach_tc(*iface, xlb::bpf::cookie_tc_options(), "xlb_cookie");
        if (!acceptor)
            return fail(fmt::format("detach the cookie acceptor from {}: {}", ifname,
                                    acceptor.error().message()));
        if (*acceptor) fmt::print("xlb-decap: detached the cookie acceptor from {}\n", ifname);
        return 0;
    }

    if (next_hop_address) {
        auto resolver = xlb::netlink::NeighborResolver::open(ifname);
        if (!resolver) return fail(fmt::format("--next-hop: {}", resolver.error().message()));
        auto resolved = resolver->resolve(*next_hop_address);
        if (!resolved) return fail(fmt::format("--next-hop: {}", resolved.error().message()));
        next_hop_mac = *resolved;
    }

    auto prog = xlb::bpf::DecapProgram::load();
    if (!prog) return fail(fmt::format("load xlb_decap: {}", prog.error().message()));
    prog->set_gue_port(gue_port);
    prog->set_next_hop_mac(next_hop_mac);
    for (std::size_t i = 0; i < keys.size(); ++i) {
        if (auto put = prog->local_addresses().put(keys[i], 1); !put)
            return fail(fmt::format("map xlb_decap_addrs: add {}: {}", addresses[i],
                                    put.error().message()));
    }

    // The acceptor first: from the moment xlb_decap runs, a cookie ACK has
    // somewhere to go.
    std::optional<xlb::bpf::CookieProgram> cookies;
    std::optional<xlb::bpf::TcAttachment> cookie_tc;
    std::string cookie_summary = "; cookie ACKs dropped (--no-cookies)";
    if (!no_cookies) {
        auto loaded = xlb::bpf::CookieProgram::load(*prog);
        if (!loaded && loaded.error().code == EOPNOTSUPP) {
            fmt::print(stderr,
                       "xlb-decap: no cookie acceptor: {}; ACKs the balancer sends with SYN "
                       "cookie data are dropped and counted (drop_cookie_no_acceptor)\n",
                       loaded.error().message());
            cookie_summary = "; cookie ACKs dropped (kernel without bpf_sk_assign_tcp_reqsk)";
        } else if (!loaded) {
            return fail(fmt::format("load xlb_cookie: {} (--no-cookies runs without it)",
                                    loaded.error().message()));
        } else {
            auto tc = xlb::bpf::TcAttachment::attach(loaded->prog_fd(), *iface,
                                                     xlb::bpf::cookie_tc_options());
            if (!tc)
                return fail(
                    fmt::format("attach xlb_cookie to {}: {} (--no-cookies runs without it)",
                                ifname, tc.error().message()));
            cookies = std::move(*loaded);
            cookie_tc = std::move(*tc);
            prog->set_cookie_acceptor(true);
            cookie_summary = "; accepting cookie ACKs (tc ingress)";
        }
    }

    // Taken synchronously (sigtimedwait), never by a handler: blocked from
    // here on, so none is lost while the program is being attached.
    sigset_t signals;
    sigemptyset(&signals);
    sigaddset(&signals, SIGTERM);
    sigaddset(&signals, SIGINT);
    sigaddset(&signals, SIGUSR1);
    sigprocmask(SIG_BLOCK, &signals, nullptr);
    auto write_metrics = [&] {
        if (metrics_file.empty()) return;
        if (auto ok = xlb::files::write_file_atomic(
                metrics_file, metrics_text(*prog, cookies ? &*cookies : nullptr, ifname));
            !ok)
            fmt::print(stderr, "xlb-decap: --metrics-file: {}\n", ok.error().message());
    };

    auto attachment =
        xlb::bpf::XdpAttachment::attach(*prog, *iface, {.mode = *mode, .replace_foreign = replace});
    if (!attachment)
        return fail(
            fmt::format("attach xlb_decap to {}: {}", ifname, attachment.error().message()));
    std::string joined;
    for (const std::string& a : addresses) joined += (joined.empty() ? "" : ", ") + a;
    fmt::print("xlb-decap: {}; decapsulating for {}{}{}\n", attachment->summary(),
               joined.empty() ? "no address (pass-through)" : joined,
               next_hop_mac ? "; passing on through " + xlb::net::mac_to_string(*next_hop_mac)
                            : std::string(),
               cookie_summary);
    std::fflush(stdout);
    if (keep) {
        attachment->keep();
        if (cookie_tc) cookie_tc->keep();
        fmt::print("xlb-decap: left attached to {} (remove: xlb-decap -i {} --detach)\n", ifname,
                   ifname);
        return 0;
    }

    write_metrics();
    const timespec interval{static_cast<time_t>(metrics_interval_s), 0};
    while (true) {
        const int sig = sigtimedwait(&signals, nullptr, metrics_file.empty() ? nullptr : &interval);
        if (sig == SIGTERM || sig == SIGINT) break;
        if (sig == SIGUSR1) print_counters(*prog, cookies ? &*cookies : nullptr);
        if (sig < 0 && errno != EAGAIN && errno != EINTR)
            return fail(fmt::format("wait for signals: {}", std::strerror(errno)));
        write_metrics();
    }
    write_metrics();

    auto detached = attachment->detach();
    if (!quiet) print_counters(*prog, cookies ? &*cookies : nullptr);
    if (!detached)
        return fail(
            fmt::format("detach xlb_decap from {}: {}", ifname, detached.error().message()));
    if (*detached)
        fmt::print("xlb-decap: detached from {}\n", ifname);
    else
        fmt::print("xlb-decap: left {} alone: another program replaced ours there\n", ifname);
    return 0;
}
