// SPDX-License-Identifier: Apache-2.0
// xlbctl backend list|add|del|set|drain|enable|disable|history: a VIP's
// backends (/v1/backends, /v1/backend/history). The verbs that change one
// can be tried first (--dry-run: the share of new flows that would move);
// backend drain --wait then follows the backend's connections (run.cpp,
// drain.h).
#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <algorithm>

#include "../checks.h"
#include "../render_parts.h"
#include "../request_parts.h"
#include "nouns.h"

namespace xlb::xlbctl::noun {

namespace {

// The backends whose health probe serves other VIPs' identical checks too
// (probe_shared_with, docs/config.md "Shared probes"): a line after the
// table, the first few named; nothing when none is shared.
std::string shared_probes_note(const json& backends) {
    constexpr std::size_t kNamed = 5;
    std::vector<std::string> shared;
    for (const json& b : backends) {
        const auto it = b.find("probe_shared_with");
        if (it == b.end() || !it->is_array() || it->empty()) continue;
        shared.push_back(fmt::format(
            "{} (with {})", str(b, "address"),
            it->size() == 1 ? it->front().get<std::string>() : fmt::format("{} VIPs", it->size())));
    }
    if (shared.empty()) return "";
    std::string names;
    for (std::size_t i = 0; i < std::min(shared.size(), kNamed); ++i)
        names += (i ? ", " : "") + shared[i];
    if (shared.size() > kNamed) names += fmt::format(" and {} more", shared.size() - kNamed);
    return fmt::format("health probe shared with other VIPs' identical checks: {}\n", names);
}

std::string render_backend_list(const json& r, const Style& style, bool quiet) {
    const json& backends = r.at("backends");
    std::string out;
    if (quiet) {
        for (const json& b : backends) out += str(b, "address") + "\n";
        return out;
    }
    out = header_line(r, style) + "\n";
    if (backends.empty())
        return out + "no backends (add one: xlbctl backend add " + str(r, "vip") + " ADDR)\n";
    // The server ids of a QUIC VIP's backends: a column once one has one.
    const bool server_ids = std::any_of(backends.begin(), backends.end(),
                                        [](const json& b) { return b.contains("server_id"); });
    std::vector<Table::Column> columns{{"ADDRESS"},
                                       {"STATE"},
                                       {"HEALTH"},
                                       {"WEIGHT", Align::kRight},
                                       {"EFFECTIVE", Align::kRight},
                                       {"SLOTS", Align::kRight},
                                       {"SHARE", Align::kRight},
                                       {"ACTIVE", Align::kRight},
                                       {"INACTIVE", Align::kRight},
                                       {"NEW/S", Align::kRight},
                                       {"PACKETS", Align::kRight},
                                       {"BYTES", Align::kRight},
                                       {"LAST FAILURE"}};
    if (server_ids) columns.insert(columns.begin() + 1, Table::Column{"SERVER ID", Align::kRight});
    Table t(std::move(columns));
    for (const json& b : backends) {
        const std::string failure = b.value("last_failure", "");
        std::vector<Table::Cell> row{str(b, "address"),
                                     state_cell(str(b, "state")),
                                     health_cell(str(b, "health")),
                                     std::to_string(u64(b, "weight")),
                                     effective_text(b),
                                     std::to_string(u64(b, "slots")),
                                     format_percent(number(b, "share_of_slots")),
                                     count_or_dash(b, "connections"),
                                     count_or_dash(b, "inactive_connections"),
                                     rate_text(b.at("new_flows_per_s"), format_per_second),
                                     count_or_dash(b, "packets"),
                                     bytes_or_dash(b, "bytes"),
                                     failure.empty() ? "-" : failure};
        if (server_ids)
            row.insert(row.begin() + 1,
                       b.contains("server_id") ? std::to_string(u64(b, "server_id")) : "-");
        t.add(std::move(row));
    }
    return out + t.render(style) + shared_probes_note(backends);
}

const json* find_backend(const json& vip, const std::string& address) {
    if (!vip.contains("backends")) return nullptr;
    for (const json& b : vip.at("backends"))
        if (b.value("address", "") == address) return &b;
    return nullptr;
}

std::string slots_text(const json& b) {
    return fmt::format("{} slots ({})", u64(b, "slots"),
                       format_percent(number(b, "share_of_slots")));
}

// A backend's last verdict changes (GET /v1/backend/history), oldest first.
std::string render_backend_history(const json& r, const Style& style) {
    std::string out = paint("VIP " + str(r, "vip"), Colour::kBold, style) + " backend " +
                      str(r, "address") + ": " +
                      paint(str(r, "health"), health_cell(str(r, "health")).colour, style);
    if (!flag(r, "checked"))
        return out +
               ", not health-checked (its VIP has no health_check, or the backend is "
               "disabled): no history\n";
    const std::uint64_t capacity = u64(r, "capacity");
    if (capacity == 0) return out + "; health_history is 0: the agent keeps no verdict changes\n";
    const json& history = r.at("history");
    if (history.empty()) return out + "; no verdict change since the agent started\n";
    out += fmt::format("; {} verdict change{} (the agent keeps the last {})\n", history.size(),
                       history.size() == 1 ? "" : "s", capacity);
    Table t({{"TIME"}, {"FROM"}, {"TO"}, {"REASON"}});
    for (const json& h : history)
        t.add({str(h, "time"), health_cell(str(h, "from")), health_cell(str(h, "to")),
               str(h, "reason")});
    return out + t.render(style);
}

// A change of one backend, as the agent answered it: the backend's line of
// the reply (nullptr when the reply lacks it), and its weights and slots.
struct Change {
    std::string addr, vip, epoch;
    const json* b = nullptr;
    std::optional<bool> cookie_acks;                        // as the command gave it
    std::optional<std::optional<std::uint64_t>> server_id;  // likewise
    std::string weights() const {
        return fmt::format("weight {} (effective {}), {}", u64(*b, "weight"), effective_text(*b),
                           slots_text(*b));
    }
    // ", accepts cookie ACKs" when the command set it; "" when not given.
    std::string cookies() const {
        if (!cookie_acks) return "";
        return *cookie_acks ? ", accepts cookie ACKs" : ", takes no cookie ACKs";
    }
    // ", server id 7" when the command set it, ", no server id" when it
    // cleared it; "" when not given.
    std::string server() const {
        if (!server_id) return "";
        return *server_id ? fmt::format(", server id {}", **server_id) : ", no server id";
    }
};

// A verb's own sentence for what its change did; "" when the reply lacks
// what the sentence needs (a generic line is shown instead).
using Said = std::string (*)(const Change& x);

// The reply to a change: the dry run's prediction, or what was done.
std::string render_change(const Command& c, const json& r, const Style& style, Said said) {
    if (c.dry_run) return render_dry_run(c, r, style);
    Change x{c.backend.to_string(), str(r, "vip"), fmt::format("epoch {}", u64(r, "epoch"))};
    x.b = find_backend(r, x.addr);
    x.cookie_acks = c.cookie_acks;
    x.server_id = c.server_id;
    if (std::string text = said(x); !text.empty()) return text;
    return fmt::format("backend {} of {}: done, {}\n", x.addr, x.vip, x.epoch);
}

// A verb on one backend of one VIP that changes it: VIP, ADDR, --dry-run.
void change_options(CLI::App& app, Raw& raw) {
    add_vip_arg(&app, raw);
    add_addr_arg(&app, raw);
    add_dry_run_flag(&app, raw);
}

// The example of a verb on one backend.
std::string example_of(const Command& c) {
    const Examples ex = examples_for(c.vip_key);
    return std::string("xlbctl ") + verb_name(c.verb) + " " + ex.vip + " " + ex.backend +
           (c.verb == Verb::kBackendSet ? " --weight 50" : "");
}

// ADDR, --weight, --hash-key and add's --cookie-acks, checked with the
// agent's rules as a backend of the VIP.
Checked<void> backend_check(const Raw& raw, Command& c) {
    const Examples ex = examples_for(c.vip_key);
    auto address = check_address(raw.address, "ADDR", ex);
    if (!address) return std::unexpected(address.error());
    c.backend = *address;
    if (!raw.weight.empty()) {
        auto w = check_weight(raw.weight);
        if (!w) return std::unexpected(w.error());
        c.weight = *w;
    }
    c.hash_key = raw.hash_key;
    if (raw.cookie_acks_flag) c.cookie_acks = true;
    if (!raw.server_id.empty()) {
        // The agent checks the id against the VIP's quic configs, which only
        // it has: not part of the backend checked here.
        const bool set = c.verb == Verb::kBackendSet;
        if (set && raw.server_id == "none") {
            c.server_id.emplace();
        } else if (auto id = parse_unsigned(raw.server_id)) {
            c.server_id.emplace(*id);
        } else {
            return std::unexpected(
                "--server-id: found " + in_quotes(raw.server_id) +
                ", expected a non-negative integer (the server id the backend's QUIC server "
                "writes in its connection IDs)" +
                (set ? " or none (to clear it)" : "") + ", e.g. xlbctl " + verb_name(c.verb) + " " +
                ex.vip + " " + ex.backend + " --server-id 7");
        }
    }
    c.dry_run = raw.dry_run;
    config::BackendSpec b;
    b.address = c.backend;
    b.weight = c.weight.value_or(config::kDefaultWeight);
    b.hash_key = c.hash_key;
    b.cookie_acks = c.cookie_acks.value_or(false);
    return check_backend(*c.vip_key, b, example_of(c));
}

// backend set: --weight and/or --cookie-acks true|false (the words the file
// takes for a boolean).
Checked<void> set_check(const Raw& raw, Command& c) {
    if (auto ok = backend_check(raw, c); !ok) return ok;
    const Examples ex = examples_for(c.vip_key);
    if (raw.cookie_acks == "true" || raw.cookie_acks == "false")
        c.cookie_acks = raw.cookie_acks == "true";
    else if (!raw.cookie_acks.empty())
        return std::unexpected("--cookie-acks: found " + in_quotes(raw.cookie_acks) +
                               ", expected true or false, e.g. xlbctl backend set " + ex.vip + " " +
                               ex.backend + " --cookie-acks true");
    if (!c.weight && !c.cookie_acks && !c.server_id)
        return std::unexpected(
            "--weight, --cookie-acks or --server-id is required (nothing to set), e.g. " +
            example_of(c));
    return {};
}

Checked<void> drain_check(const Raw& raw, Command& c) {
    if (auto ok = backend_check(raw, c); !ok) return ok;
    const std::string example = example_of(c);
    if (!raw.wait && !raw.active_within.empty())
        return std::unexpected("--active-within " + raw.active_within +
                               " without --wait: it says which connections --wait "
                               "waits for, e.g. " +
                               example + " --wait --active-within 30s");
    if (!raw.wait && !raw.wait_timeout.empty())
        return std::unexpected("--wait-timeout " + raw.wait_timeout +
                               " without --wait: it bounds the wait, e.g. " + example +
                               " --wait --wait-timeout 10m");
    if (!raw.wait) return {};
    if (c.dry_run)
        return std::unexpected(
            "--wait with --dry-run: a dry run drains nothing, so there is nothing "
            "to wait for (drop one of them)");
    c.wait = true;
    if (!raw.wait_timeout.empty()) {
        auto t = check_time_bound("--wait-timeout", raw.wait_timeout, std::chrono::seconds(1),
                                  kMaxDrainWait, "1s to 24h", "10m");
        if (!t) return std::unexpected(t.error());
        c.wait_timeout = *t;
    }
    c.active_within = kDefaultActiveWithin;
    if (!raw.active_within.empty()) {
        auto d = check_duration("--active-within", raw.active_within, "--active-within 30s");
        if (!d) return std::unexpected(d.error());
        c.active_within = *d;
    }
    return {};
}

HttpRequest patch(const Command& c, const nlohmann::json& body) {
    return {"PATCH", "/v1/backends?" + backend_query(c) + dry_run(c), body.dump()};
}

constexpr VerbSpec kBackendVerbs[] = {
    {.verb = Verb::kBackendList,
     .name = "list",
     .help = "A VIP's backends (without VIP: every VIP's): state, health and last\n"
             "failure, configured and effective weight, table slots and their\n"
             "share, packets and bytes.",
     .examples = "  xlbctl backend list 198.51.100.10:80/tcp\n"
                 "  xlbctl backend list                      # every VIP\n"
                 "  xlbctl backend list '[2001:db8::10]:443/tcp' --json\n"
                 "  xlbctl backend list 198.51.100.10:80 -q   # addresses only\n",
     .options =
         [](CLI::App& app, Raw& raw) {
             app.add_option("VIP", raw.vip, "ADDRESS:PORT[/tcp|/udp]; none: every VIP")
                 ->type_name("");
             app.add_flag("-q,--quiet", raw.quiet, "print only the addresses, one a line");
         },
     .request =
         [](const Command& c) {
             return HttpRequest{
                 "GET", c.vip.empty() ? "/v1/backends" : "/v1/backends?" + vip_query(c), ""};
         },
     .render =
         [](const Command& c, const json& r, const Style& style) {
             if (!r.contains("vips")) return render_backend_list(r, style, c.quiet);
             // every VIP: one section each, a blank line between
             std::string out;
             for (const json& vip : r.at("vips")) {
                 if (!out.empty() && !c.quiet) out += "\n";
                 out += render_backend_list(vip, style, c.quiet);
             }
             return out.empty() && !c.quiet ? "no VIPs (add one: xlbctl vip add VIP)\n" : out;
         }},
    {.verb = Verb::kBackendAdd,
     .name = "add",
     .help = "Add a backend to a VIP (active; persisted). It takes new flows once\n"
             "the table is published (and, with a health check, once healthy).",
     .examples = "  xlbctl backend add 198.51.100.10:80/tcp 203.0.113.14\n"
                 "  xlbctl backend add 198.51.100.10:80/tcp 203.0.113.14 --weight 50\n"
                 "  xlbctl backend add '[2001:db8::10]:443/tcp' 2001:db8:b::14\n",
     .options =
         [](CLI::App& app, Raw& raw) {
             change_options(app, raw);
             app.add_option("--weight", raw.weight, "relative weight 0-10000 (default 100)")
                 ->type_name("W");
             app.add_option("--hash-key", raw.hash_key,
                            "stable identity for Maglev (default: the address)")
                 ->type_name("KEY");
             app.add_flag("--cookie-acks", raw.cookie_acks_flag,
                          "the backend runs xlb-decap with its cookie program and accepts "
                          "handshakes the LB answered with SYN cookies (default: it does not)");
             app.add_option("--server-id", raw.server_id,
                            "QUIC VIPs: the server id the backend's QUIC server writes in its "
                            "connection IDs (default: none, no packet is routed by its CID)")
                 ->type_name("N");
         },
     .check = backend_check,
     .request =
         [](const Command& c) {
             nlohmann::json body{{"address", c.backend.to_string()}};
             if (c.weight) body["weight"] = *c.weight;
             if (!c.hash_key.empty()) body["hash_key"] = c.hash_key;
             if (c.cookie_acks) body["cookie_acks"] = *c.cookie_acks;
             if (c.server_id && *c.server_id) body["server_id"] = **c.server_id;
             return HttpRequest{"POST", "/v1/backends?" + vip_query(c) + dry_run(c), body.dump()};
         },
     .render =
         [](const Command& c, const json& r, const Style& style) {
             return render_change(c, r, style, [](const Change& x) -> std::string {
                 if (!x.b) return "";
                 return fmt::format("added backend {} to {}: {}{}{}, {}\n", x.addr, x.vip,
                                    x.weights(), x.cookies(), x.server(), x.epoch);
             });
         }},
    {.verb = Verb::kBackendDel,
     .name = "del",
     .help = "Remove a backend: it leaves the table and its flows move to the\n"
             "others. Drain it first to let its connections finish.",
     .examples = "  xlbctl backend del 198.51.100.10:80/tcp 203.0.113.14\n",
     .options = change_options,
     .check = backend_check,
     .request =
         [](const Command& c) {
             return HttpRequest{"DELETE", "/v1/backends?" + backend_query(c) + dry_run(c), ""};
         },
     .render =
         [](const Command& c, const json& r, const Style& style) {
             return render_change(c, r, style, [](const Change& x) -> std::string {
                 return fmt::format(
                     "removed backend {} from {}: its flows moved to the others, {}\n", x.addr,
                     x.vip, x.epoch);
             });
         }},
    {.verb = Verb::kBackendSet,
     .name = "set",
     .help = "Change a backend's weight, whether it accepts cookie ACKs (a VIP\n"
             "with syn_cookies: auto or always refuses a backend that does not), or\n"
             "its QUIC server id.",
     .examples = "  xlbctl backend set 198.51.100.10:80/tcp 203.0.113.14 --weight 200\n"
                 "  xlbctl backend set 198.51.100.10:80/tcp 203.0.113.14 --weight 0  "
                 " # no new flows\n"
                 "  xlbctl backend set 198.51.100.10:80/tcp 203.0.113.14 --cookie-acks true\n"
                 "  xlbctl backend set 198.51.100.10:443/udp 203.0.113.14 --server-id 7\n",
     .options =
         [](CLI::App& app, Raw& raw) {
             change_options(app, raw);
             app.add_option("--weight", raw.weight, "relative weight 0-10000")->type_name("W");
             app.add_option("--cookie-acks", raw.cookie_acks,
                            "true: the backend runs xlb-decap with its cookie program and "
                            "accepts handshakes the LB answered with SYN cookies; false: it "
                            "does not")
                 ->type_name("true|false");
             app.add_option("--server-id", raw.server_id,
                            "QUIC VIPs: the server id the backend's QUIC server writes in its "
                            "connection IDs; none: clear it")
                 ->type_name("N|none");
         },
     .check = set_check,
     .request =
         [](const Command& c) {
             nlohmann::json body = nlohmann::json::object();
             if (c.weight) body["weight"] = *c.weight;
             if (c.cookie_acks) body["cookie_acks"] = *c.cookie_acks;
             if (c.server_id)
                 body["server_id"] = *c.server_id ? json(**c.server_id) : json(nullptr);
             return patch(c, body);
         },
     .render =
         [](const Command& c, const json& r, const Style& style) {
             return render_change(c, r, style, [](const Change& x) -> std::string {
                 if (!x.b) return "";
                 return fmt::format("backend {} of {}: {}{}{}, {}\n", x.addr, x.vip, x.weights(),
                                    x.cookies(), x.server(), x.epoch);
             });
         }},
    {.verb = Verb::kBackendDrain,
     .name = "drain",
     .help = "Drain a backend: no new flows; established flows stay (through\n"
             "the connection table) until they end. With --wait, then shows its active\n"
             "connections (entries seen within --active-within) falling, one line per\n"
             "change, and exits 0 when none are left, or 1 when --wait-timeout passes first.",
     .examples = "  xlbctl backend drain 198.51.100.10:80/tcp 203.0.113.11\n"
                 "  xlbctl backend drain 198.51.100.10:80/tcp 203.0.113.11 --wait\n"
                 "  xlbctl backend drain 198.51.100.10:80/tcp 203.0.113.11 --wait --wait-timeout "
                 "30m --active-within 1m\n"
                 "  xlbctl backend drain 198.51.100.10:80/tcp 203.0.113.11 --wait && "
                 "xlbctl backend del 198.51.100.10:80/tcp 203.0.113.11\n",
     .options =
         [](CLI::App& app, Raw& raw) {
             change_options(app, raw);
             app.add_flag("--wait", raw.wait,
                          "then wait until the backend has no active connection (asked every "
                          "second)");
             app.add_option("--active-within", raw.active_within,
                            "with --wait: a connection is active when its entry saw a packet "
                            "within DUR (default 10s)")
                 ->type_name("DUR");
             app.add_option("--wait-timeout", raw.wait_timeout,
                            "with --wait: give up waiting after SECS or DUR, 1s-24h (default 5m)")
                 ->type_name("SECS|DUR");
         },
     .check = drain_check,
     .request =
         [](const Command& c) {
             return patch(c, nlohmann::json{{"state", "drain"}});
         },
     .render =
         [](const Command& c, const json& r, const Style& style) {
             return render_change(c, r, style, [](const Change& x) -> std::string {
                 return fmt::format(
                     "backend {} of {} is draining: no new flows, established flows stay; {}\n",
                     x.addr, x.vip, x.epoch);
             });
         }},
    {.verb = Verb::kBackendEnable,
     .name = "enable",
     .help = "Make a drained or disabled backend active again.",
     .examples = "  xlbctl backend enable 198.51.100.10:80/tcp 203.0.113.11\n",
     .options = change_options,
     .check = backend_check,
     .request =
         [](const Command& c) {
             return patch(c, nlohmann::json{{"state", "active"}});
         },
     .render =
         [](const Command& c, const json& r, const Style& style) {
             return render_change(c, r, style, [](const Change& x) -> std::string {
                 if (!x.b) return "";
                 return fmt::format("backend {} of {} is active: {}, {}\n", x.addr, x.vip,
                                    x.weights(), x.epoch);
             });
         }},
    {.verb = Verb::kBackendDisable,
     .name = "disable",
     .help = "Disable a backend: it leaves the table and the data plane;\n"
             "its established flows move to other backends.",
     .examples = "  xlbctl backend disable 198.51.100.10:80/tcp 203.0.113.11\n",
     .options = change_options,
     .check = backend_check,
     .request =
         [](const Command& c) {
             return patch(c, nlohmann::json{{"state", "disabled"}});
         },
     .render =
         [](const Command& c, const json& r, const Style& style) {
             return render_change(c, r, style, [](const Change& x) -> std::string {
                 return fmt::format(
                     "backend {} of {} is disabled: out of the table and the data plane; {}\n",
                     x.addr, x.vip, x.epoch);
             });
         }},
    {.verb = Verb::kBackendHistory,
     .name = "history",
     .help = "A backend's last health verdict changes, oldest first: when (UTC), from and to\n"
             "which verdict, and why. The agent keeps health_history of them (default 20)\n"
             "in memory: a restarted agent starts with none.",
     .examples = "  xlbctl backend history 198.51.100.10:80/tcp 203.0.113.11\n"
                 "  xlbctl backend history '[2001:db8::10]:443/tcp' 2001:db8:b::11 --json\n",
     .options =
         [](CLI::App& app, Raw& raw) {
             add_vip_arg(&app, raw);
             add_addr_arg(&app, raw);
         },
     .check = backend_check,
     .request =
         [](const Command& c) {
             return HttpRequest{"GET", "/v1/backend/history?" + backend_query(c), ""};
         },
     .render = [](const Command&, const json& r,
                  const Style& style) { return render_backend_history(r, style); }},
};

}  // namespace

const Noun& backend() {
    static const Noun noun{
        .name = "backend",
        .help =
            "List a VIP's backends; add, delete, reweight, drain, enable or disable one; "
            "show one's health history.",
        .examples =
            "  xlbctl backend list 198.51.100.10:80/tcp\n"
            "  xlbctl backend add 198.51.100.10:80/tcp 203.0.113.14 --weight 50\n"
            "  xlbctl backend set 198.51.100.10:80/tcp 203.0.113.14 --weight 200\n"
            "  xlbctl backend drain 198.51.100.10:80/tcp 203.0.113.11\n"
            "  xlbctl backend enable 198.51.100.10:80/tcp 203.0.113.11\n"
            "  xlbctl backend del 198.51.100.10:80/tcp 203.0.113.14\n"
            "  xlbctl backend add 198.51.100.10:80/tcp 203.0.113.15 --dry-run   # what would move\n"
            "  xlbctl backend history 198.51.100.10:80/tcp 203.0.113.11\n",
        .verbs = kBackendVerbs};
    return noun;
}

}  // namespace xlb::xlbctl::noun
