// SPDX-License-Identifier: Apache-2.0
#include "xlb/conntrack/table.h"

#include <netinet/in.h>

#include <algorithm>
#include <cstring>

#include "xlb/datapath/setup.h"

namespace xlb::conntrack {

namespace {

// 2^20 ns in ms, as a rational: exact for any u32 count of units.
constexpr std::uint64_t kNsPerUnit = 1ULL << XLB_CT_TIME_SHIFT;

std::string_view match_bytes(const xlb_vip_key& key) {
    return std::string_view(reinterpret_cast<const char*>(&key), sizeof(key));
}

double ms_since(std::chrono::steady_clock::time_point start) {
    return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
        .count();
}

}  // namespace

Units units_from_ns(std::uint64_t ns) { return static_cast<Units>(ns >> XLB_CT_TIME_SHIFT); }

std::uint64_t elapsed_ms(Units now, Units then) {
    const Units units = now - then;  // modulo 2^32
    if (units > 0x80000000U) return 0;
    return static_cast<std::uint64_t>(units) * kNsPerUnit / 1'000'000;
}

VipInfo vip_info(const config::VipSpec& spec) {
    return VipInfo{spec.key(), spec.vip_key(), config::idle_timeout(spec)};
}

Backends backends_from_map(std::span<const std::pair<std::uint32_t, xlb_backend>> entries) {
    Backends out;
    for (const auto& [id, b] : entries) {
        if (b.family != XLB_FAMILY_V4 && b.family != XLB_FAMILY_V6) continue;
        if (b.generation == 0) continue;
        BackendInfo info;
        info.address = net::IpAddress::from_words(b.addr, b.family);
        info.text = info.address.to_string();
        info.generation = b.generation;
        out.emplace(id, std::move(info));
    }
    return out;
}

Context::Context(std::vector<VipInfo> vips, Backends backends)
    : vips_(std::move(vips)), backends_(std::move(backends)) {
    for (std::size_t i = 0; i < vips_.size(); ++i) {
        const config::VipKey& k = vips_[i].vip;
        by_key_.emplace(vips_[i].key, i);
        const xlb_vip_key match =
            datapath::vip_key(k.address, k.port, static_cast<std::uint8_t>(k.protocol));
        by_match_.emplace(std::string(match_bytes(match)), i);
    }
}

const VipInfo* Context::vip_of(const xlb_flow_key& key) const {
    xlb_vip_key match{};
    std::memcpy(match.addr, key.dst, sizeof(match.addr));
    match.port = key.dport;
    match.proto = key.proto;
    match.family = key.family;
    if (auto it = by_match_.find(match_bytes(match)); it != by_match_.end())
        return &vips_[it->second];
    match.port = 0;
    if (auto it = by_match_.find(match_bytes(match)); it != by_match_.end())
        return &vips_[it->second];
    return nullptr;
}

const VipInfo* Context::find_vip(std::string_view key) const {
    auto it = by_key_.find(key);
    return it == by_key_.end() ? nullptr : &vips_[it->second];
}

const BackendInfo* Context::backend(std::uint32_t id) const {
    auto it = backends_.find(id);
    return it == backends_.end() ? nullptr : &it->second;
}

bool Context::valid(const xlb_ct_value& value) const {
    const BackendInfo* b = backend(value.backend_id);
    // The table keeps the generation's low bits (abi.h,
    // XLB_CT_GENERATION_MASK), and so does the program's check.
    return b && b->generation != 0 &&
           (b->generation & XLB_CT_GENERATION_MASK) == (value.generation & XLB_CT_GENERATION_MASK);
}

View judge(const Context& context, const Entry& entry, Units now) {
    View v;
    v.vip = context.vip_of(entry.key);
    v.backend = context.backend(entry.value.backend_id);
    v.valid = context.valid(entry.value);
    v.idle_ms = elapsed_ms(now, entry.value.last_seen);
    v.age_ms = elapsed_ms(now, entry.value.created);
    return v;
}

net::Endpoint client_of(const xlb_flow_key& key) {
    return net::Endpoint{net::IpAddress::from_words(key.src, key.family), be16toh(key.sport)};
}

net::Endpoint destination_of(const xlb_flow_key& key) {
    return net::Endpoint{net::IpAddress::from_words(key.dst, key.family), be16toh(key.dport)};
}

bool Filter::matches(const Entry& entry, const View& view) const {
    if (vip && (!view.vip || view.vip->key != *vip)) return false;
    if (backend && (!view.backend || view.backend->address != *backend)) return false;
    if (stale_only && view.valid) return false;
    if (active_within && view.idle_ms > static_cast<std::uint64_t>(active_within->count()))
        return false;
    if (client && !client->contains(net::IpAddress::from_words(entry.key.src, entry.key.family)))
        return false;
    return true;
}

bool expired(const Entry& entry, const View& view, std::uint64_t clock_running_ms) {
    const config::Duration timeout =
        view.vip
            ? view.vip->idle_timeout
            : config::default_idle_timeout(entry.key.proto == IPPROTO_UDP ? config::Protocol::kUdp
                                                                          : config::Protocol::kTcp);
    const auto limit = static_cast<std::uint64_t>(timeout.count());
    return view.idle_ms > limit && clock_running_ms > limit;
}

void Counter::add(const View& view) {
    ++counts_.matched;
    if (!view.vip) {
        ++counts_.no_vip;
        return;
    }
    PerVip& v = vips_[view.vip->key];
    ++v.entries;
    if (!view.valid) ++v.stale;
    if (view.backend) ++v.backends[view.backend->text];
}

Counts Counter::finish() && {
    for (auto& [key, v] : vips_) {
        VipCount out{key, v.entries, v.stale, {}};
        for (auto& [backend, n] : v.backends) out.backends.push_back(BackendCount{backend, n});
        counts_.vips.push_back(std::move(out));
    }
    return std::move(counts_);
}

Result<CountReport> count(const Table& table, const Context& context, const Filter& filter) {
    const auto start = std::chrono::steady_clock::now();
    const Units now = table.now();
    Counter counter;
    auto scanned = table.scan([&](std::span<const Entry> batch) {
        counter.scanned(batch.size());
        for (const Entry& e : batch) {
            const View v = judge(context, e, now);
            if (filter.matches(e, v)) counter.add(v);
        }
    });
    if (!scanned) return std::unexpected(scanned.error());
    return CountReport{table.capacity(), std::move(counter).finish(), ms_since(start)};
}

Result<ListReport> list(const Table& table, const Context& context, const Filter& filter,
                        std::size_t limit) {
    const auto start = std::chrono::steady_clock::now();
    const Units now = table.now();
    ListReport out;
    auto scanned = table.scan([&](std::span<const Entry> batch) {
        out.scanned += batch.size();
        for (const Entry& e : batch) {
            const View v = judge(context, e, now);
            if (!filter.matches(e, v)) continue;
            ++out.matched;
            if (out.rows.size() >= limit) {
                out.truncated = true;
                continue;
            }
            Row row{e, std::nullopt, std::nullopt, v.valid, v.idle_ms, v.age_ms};
            if (v.vip) row.vip = v.vip->key;
            if (v.backend) row.backend = v.backend->text;
            out.rows.push_back(std::move(row));
        }
    });
    if (!scanned) return std::unexpected(scanned.error());
    out.capacity = table.capacity();
    out.scan_ms = ms_since(start);
    return out;
}

Result<FlushReport> flush(const Table& table, const Context& context, const Filter& filter,
                          bool dry_run) {
    if (!filter.has_selector())
        return fail("flush the connection table", "name a vip, backend, client or stale");
    const auto start = std::chrono::steady_clock::now();
    const Units now = table.now();
    std::vector<xlb_flow_key> doomed;
    auto scanned = table.scan([&](std::span<const Entry> batch) {
        for (const Entry& e : batch) {
            if (filter.matches(e, judge(context, e, now))) doomed.push_back(e.key);
        }
    });
    if (!scanned) return std::unexpected(scanned.error());
    FlushReport out{doomed.size(), 0, dry_run, 0};
    if (!dry_run) {
        auto deleted = table.erase(doomed);
        if (!deleted) return std::unexpected(deleted.error());
        out.deleted = *deleted;
    }
    out.scan_ms = ms_since(start);
    return out;
}

Result<SweepReport> sweep(const Table& table, const Context& context,
                          std::uint64_t clock_running_ms) {
    const auto start = std::chrono::steady_clock::now();
    const Units now = table.now();
    Counter counter;
    std::vector<xlb_flow_key> doomed;
    auto scanned = table.scan([&](std::span<const Entry> batch) {
        counter.scanned(batch.size());
        for (const Entry& e : batch) {
            const View v = judge(context, e, now);
            if (expired(e, v, clock_running_ms)) {
                doomed.push_back(e.key);
            } else {
                counter.add(v);
            }
        }
    });
    if (!scanned) return std::unexpected(scanned.error());
    SweepReport out;
    out.capacity = table.capacity();
    out.counts = std::move(counter).finish();
    if (!doomed.empty()) {
        auto deleted = table.erase(doomed);
        if (!deleted) return std::unexpected(deleted.error());
        out.expired = *deleted;
    }
    out.entries = out.counts.scanned - std::min<std::uint64_t>(out.expired, out.counts.scanned);
    out.sweep_ms = ms_since(start);
    return out;
}

bool under_flood(const xlb_ct_cpu& cpu, std::uint64_t now_ns) {
    if (cpu.last_skip_ns == 0) return false;
    // A skip stamped after `now` was read is recent too.
    return cpu.last_skip_ns >= now_ns || now_ns - cpu.last_skip_ns < kFloodWindowNs;
}

std::vector<FloodChange> FloodTracker::update(std::span<const xlb_ct_cpu> per_cpu,
                                              std::uint64_t now_ns) {
    std::vector<FloodChange> changes;
    if (cpus_.size() < per_cpu.size()) cpus_.resize(per_cpu.size());
    for (unsigned i = 0; i < per_cpu.size(); ++i) {
        Cpu& c = cpus_[i];
        const bool flooded = under_flood(per_cpu[i], now_ns);
        if (flooded && !c.flooded) {
            // The skips since the last reading started it.
            c.skipped_before = c.skipped;
            changes.push_back(FloodChange{i, true, per_cpu[i].skipped - c.skipped_before});
        } else if (!flooded && c.flooded) {
            changes.push_back(FloodChange{i, false, per_cpu[i].skipped - c.skipped_before});
        }
        c.flooded = flooded;
        c.skipped = per_cpu[i].skipped;
    }
    return changes;
}

Result<ConnectionsReport> connections(const Table& table, config::Duration active_within) {
    const auto start = std::chrono::steady_clock::now();
    auto backends = table.backends();
    if (!backends) return std::unexpected(backends.error());
    const Context context({}, std::move(*backends));
    const Units now = table.now();
    const auto window =
        static_cast<std::uint64_t>(std::max<config::Duration::rep>(0, active_within.count()));
    ConnectionsReport out;
    out.active_within = active_within;
    // Counted by one 64-bit key in a hash map, then sorted once: a scan of
    // millions of entries does one hash lookup each.
    std::unordered_map<std::uint64_t, Connections> counts;
    auto scanned = table.scan([&](std::span<const Entry> batch) {
        for (const Entry& e : batch) {
            if (!context.valid(e.value)) continue;
            Connections& c = counts[(std::uint64_t{e.value.vip_id} << 32) | e.value.backend_id];
            const bool ending = (e.ended & (XLB_CT_ENDED_FIN | XLB_CT_ENDED_RST)) != 0;
            if (!ending && elapsed_ms(now, e.value.last_seen) <= window)
                ++c.active;
            else
                ++c.inactive;
        }
    });
    if (!scanned) return std::unexpected(scanned.error());
    for (const auto& [key, c] : counts)
        out.backends[{static_cast<std::uint32_t>(key >> 32), static_cast<std::uint32_t>(key)}] = c;
    out.scan_ms = ms_since(start);
    return out;
}

ConnectionsCache::ConnectionsCache(std::shared_ptr<const Table> table,
                                   std::chrono::milliseconds max_age, Now now)
    : table_(std::move(table)), max_age_(max_age), now_(std::move(now)) {}

Result<ConnectionsReport> ConnectionsCache::get(config::Duration active_within) {
    std::lock_guard lock(mu_);
    const auto at = now_();
    if (taken_ && at - *taken_ < max_age_ && last_.active_within == active_within) return last_;
    auto report = connections(*table_, active_within);
    if (!report) return report;
    last_ = *report;
    taken_ = at;
    return report;
}

std::map<std::uint32_t, double> RateMeter::update(
    std::uint64_t now_ns, const std::map<std::uint32_t, std::uint64_t>& counts) {
    std::map<std::uint32_t, double> rates;
    if (last_ns_ && now_ns > *last_ns_) {
        const double seconds = static_cast<double>(now_ns - *last_ns_) / 1e9;
        for (const auto& [id, count] : counts) {
            auto it = last_.find(id);
            // A counter that went back belongs to an id reused since.
            if (it == last_.end() || count < it->second) continue;
            rates[id] = static_cast<double>(count - it->second) / seconds;
        }
    }
    last_ns_ = now_ns;
    last_ = counts;
    return rates;
}

std::vector<unsigned> FloodTracker::flooded() const {
    std::vector<unsigned> out;
    for (unsigned i = 0; i < cpus_.size(); ++i) {
        if (cpus_[i].flooded) out.push_back(i);
    }
    return out;
}

}  // namespace xlb::conntrack
