// SPDX-License-Identifier: Apache-2.0
// The JSON of the connection-table endpoints (docs/api.md); xlbctl reads
// exactly these fields.
#include <netinet/in.h>

#include <cmath>

#include "internal.h"

namespace xlb::api::detail {

namespace {

// Milliseconds to 0.1 ms: more is noise from the scheduler.
double tenths(double ms) { return std::round(ms * 10) / 10; }

const char* protocol_name(std::uint8_t proto) {
    return proto == IPPROTO_UDP ? "udp" : proto == IPPROTO_TCP ? "tcp" : "other";
}

template <class T>
json or_null(const std::optional<T>& value) {
    return value ? json(*value) : json(nullptr);
}

// Whether the client of a TCP entry sent the flag; null for other protocols.
json tcp_flag(const conntrack::Entry& e, unsigned flag) {
    return e.key.proto == IPPROTO_TCP ? json((e.ended & flag) != 0) : json(nullptr);
}

}  // namespace

json conntrack_count_json(const conntrack::CountReport& r,
                          const std::optional<config::Duration>& active_within) {
    json vips = json::array();
    for (const auto& v : r.counts.vips) {
        json backends = json::array();
        for (const auto& b : v.backends)
            backends.push_back({{"backend", b.backend}, {"entries", b.entries}});
        vips.push_back({{"vip", v.vip},
                        {"entries", v.entries},
                        {"stale", v.stale},
                        {"backends", std::move(backends)}});
    }
    return json{{"capacity", r.capacity},
                {"scanned", r.counts.scanned},
                {"matched", r.counts.matched},
                {"scan_ms", tenths(r.scan_ms)},
                {"active_within",
                 active_within ? json(config::format_duration(*active_within)) : json(nullptr)},
                {"vips", std::move(vips)},
                {"no_vip", r.counts.no_vip}};
}

json conntrack_list_json(const conntrack::ListReport& r) {
    json entries = json::array();
    for (const auto& row : r.rows) {
        entries.push_back({{"client", conntrack::client_of(row.entry.key).to_string()},
                           {"destination", conntrack::destination_of(row.entry.key).to_string()},
                           {"protocol", protocol_name(row.entry.key.proto)},
                           {"vip", or_null(row.vip)},
                           {"backend", or_null(row.backend)},
                           {"backend_id", row.entry.value.backend_id},
                           {"generation", row.entry.value.generation},
                           {"state", row.valid ? "valid" : "stale"},
                           {"idle_ms", row.idle_ms},
                           {"age_ms", row.age_ms},
                           {"fin_seen", tcp_flag(row.entry, XLB_CT_ENDED_FIN)},
                           {"rst_seen", tcp_flag(row.entry, XLB_CT_ENDED_RST)}});
    }
    return json{{"capacity", r.capacity},       {"scanned", r.scanned},
                {"matched", r.matched},         {"truncated", r.truncated},
                {"scan_ms", tenths(r.scan_ms)}, {"entries", std::move(entries)}};
}

json conntrack_flush_json(const conntrack::FlushReport& r) {
    return json{{"matched", r.matched},
                {"deleted", r.deleted},
                {"dry_run", r.dry_run},
                {"scan_ms", tenths(r.scan_ms)}};
}

json conntrack_status_json(const conntrack::Status& s) {
    return json{
        {"capacity", s.capacity},
        {"requested_capacity", s.requested_capacity},
        {"entries", s.entries},
        {"insert_rate_per_cpu", s.insert_rate_per_cpu},
        {"insert_burst", s.insert_burst},
        {"inserts", s.inserts},
        {"skipped_inserts", s.skipped()},
        {"expired", s.expired},
        {"flooded_cpus", s.flooded_cpus()},
        {"last_sweep_ms", s.last_sweep_ms ? json(tenths(*s.last_sweep_ms)) : json(nullptr)},
    };
}

}  // namespace xlb::api::detail
