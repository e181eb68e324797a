// SPDX-License-Identifier: Apache-2.0
// The connection table (XLB_MAP_CONNTRACK) as the operator sees it: which VIP
// and backend each entry belongs to, whether it is still valid, how long it
// has been idle; counts, lists, flushes and expiry. The logic here is pure:
// it reads entries through a Table, which the agent backs with the BPF map
// (bpf_table.h) and the tests with a fake holding entries and a clock.
#pragma once

#include <chrono>
#include <cstdint>
#include <expected>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "xlb/abi.h"
#include "xlb/config/model.h"
#include "xlb/error.h"
#include "xlb/net/address.h"

namespace xlb::conntrack {

// Entry times (abi.h): CLOCK_MONOTONIC_COARSE in units of 2^XLB_CT_TIME_SHIFT
// ns, truncated to 32 bits, so they wrap every 52 days.
using Units = std::uint32_t;
Units units_from_ns(std::uint64_t monotonic_coarse_ns);
// From `then` to `now` in ms, modulo 2^32 units. A `then` up to half the
// range after `now` (a CPU refreshed the entry after the clock was read)
// counts as 0.
std::uint64_t elapsed_ms(Units now, Units then);

struct Entry {
    xlb_flow_key key{};
    xlb_ct_value value{};
    // What the data path saw the client send to end a TCP flow:
    // XLB_CT_ENDED_FIN, XLB_CT_ENDED_RST (abi.h, struct xlb_ct_record).
    unsigned ended = 0;
};

struct VipInfo {
    std::string key;  // config::VipSpec::key()
    config::VipKey vip;
    config::Duration idle_timeout{};  // config::idle_timeout(spec)
};
VipInfo vip_info(const config::VipSpec& spec);

// A backend id as xlb_backends holds it now.
struct BackendInfo {
    net::IpAddress address;
    std::string text;              // address.to_string(): how the API names a backend
    std::uint32_t generation = 0;  // 0: released (no entry can be valid)
};
using Backends = std::unordered_map<std::uint32_t, BackendInfo>;
// From xlb_backends entries by id (family 0: a released id).
Backends backends_from_map(std::span<const std::pair<std::uint32_t, xlb_backend>> entries);

// The VIPs and backends an entry is judged against.
class Context {
public:
    Context() = default;
    Context(std::vector<VipInfo> vips, Backends backends);

    // The VIP whose packets the entry's flow is: exact port first, then the
    // port-0 wildcard, as the program matches.
    const VipInfo* vip_of(const xlb_flow_key& key) const;
    const VipInfo* find_vip(std::string_view key) const;
    const BackendInfo* backend(std::uint32_t id) const;
    // As the program decides: the id's generation is current and not 0.
    bool valid(const xlb_ct_value& value) const;
    const std::vector<VipInfo>& vips() const { return vips_; }

private:
    std::vector<VipInfo> vips_;
    std::map<std::string, std::size_t, std::less<>> by_key_;
    // xlb_vip_key bytes -> index in vips_. Looked up once or twice per entry
    // of every scan, by a view of the key: no allocation per entry.
    struct BytesHash {
        using is_transparent = void;
        std::size_t operator()(std::string_view bytes) const {
            return std::hash<std::string_view>{}(bytes);
        }
    };
    std::unordered_map<std::string, std::size_t, BytesHash, std::equal_to<>> by_match_;
    Backends backends_;
};

// One entry judged.
struct View {
    const VipInfo* vip = nullptr;          // null: no configured VIP matches
    const BackendInfo* backend = nullptr;  // null: the id is not in use
    bool valid = false;
    std::uint64_t idle_ms = 0;  // since its last packet (about 1 s of precision)
    std::uint64_t age_ms = 0;   // since it was recorded
};
View judge(const Context& context, const Entry& entry, Units now);

// Which entries an operation takes. Every set field must match.
struct Filter {
    std::optional<std::string> vip;  // a VipSpec::key()
    std::optional<net::IpAddress> backend;
    std::optional<net::Prefix> client;
    bool stale_only = false;
    // Only entries with a packet within this long (drain --wait).
    std::optional<config::Duration> active_within;

    // vip, backend, client or stale: what a flush needs.
    bool has_selector() const { return vip || backend || client || stale_only; }
    bool matches(const Entry& entry, const View& view) const;
};

// Whether the sweep deletes the entry: idle longer than its VIP's timeout,
// or, matching no VIP (it was deleted), than its protocol's default; and the
// program's clock has been ticking for longer than that timeout too
// (`clock_running_ms`): while no agent ticks it the clock stands still and
// busy entries look idle, so only a timeout the clock has run through since
// proves a flow idle.
bool expired(const Entry& entry, const View& view, std::uint64_t clock_running_ms);

struct BackendCount {
    std::string backend;  // BackendInfo::text
    std::uint64_t entries = 0;
};
struct VipCount {
    std::string vip;
    std::uint64_t entries = 0;
    std::uint64_t stale = 0;
    std::vector<BackendCount> backends;  // by address text
};
struct Counts {
    std::uint64_t scanned = 0;
    std::uint64_t matched = 0;
    std::uint64_t no_vip = 0;    // matched entries of no configured VIP
    std::vector<VipCount> vips;  // by key
};

class Counter {
public:
    void scanned(std::uint64_t n = 1) { counts_.scanned += n; }
    void add(const View& view);
    Counts finish() &&;

private:
    struct PerVip {
        std::uint64_t entries = 0;
        std::uint64_t stale = 0;
        std::map<std::string, std::uint64_t> backends;
    };
    Counts counts_;
    std::map<std::string, PerVip> vips_;
};

// One entry as the API lists it.
struct Row {
    Entry entry;
    std::optional<std::string> vip;
    std::optional<std::string> backend;
    bool valid = false;
    std::uint64_t idle_ms = 0;
    std::uint64_t age_ms = 0;
};
// "192.0.2.1:40000", "[2001:db8::1]:40000": the entry's client and destination.
net::Endpoint client_of(const xlb_flow_key& key);
net::Endpoint destination_of(const xlb_flow_key& key);

// ---------------------------------------------------------------------------
// Reading and changing a table.

class Table {
public:
    virtual ~Table() = default;
    // max_entries of the table.
    virtual std::uint32_t capacity() const = 0;
    // The clock the entry times are in.
    virtual Units now() const = 0;
    // Every entry, a batch at a time. A snapshot it is not: entries change
    // while it runs (the kernel's batch lookup has no isolation).
    virtual Result<void> scan(const std::function<void(std::span<const Entry>)>& batch) const = 0;
    // Deletes the keys; ones already gone are not an error. Returns how many
    // were deleted.
    virtual Result<std::uint64_t> erase(std::span<const xlb_flow_key> keys) const = 0;
    // xlb_backends as it is now.
    virtual Result<Backends> backends() const = 0;
};

struct CountReport {
    std::uint32_t capacity = 0;
    Counts counts;
    double scan_ms = 0;
};
Result<CountReport> count(const Table& table, const Context& context, const Filter& filter);

struct ListReport {
    std::uint32_t capacity = 0;
    std::uint64_t scanned = 0;
    std::uint64_t matched = 0;
    bool truncated = false;
    std::vector<Row> rows;  // at most `limit`
    double scan_ms = 0;
};
Result<ListReport> list(const Table& table, const Context& context, const Filter& filter,
                        std::size_t limit);

struct FlushReport {
    std::uint64_t matched = 0;
    std::uint64_t deleted = 0;
    bool dry_run = false;
    double scan_ms = 0;  // the scan and the deletes
};
// Refuses a filter without a selector (the whole table is never flushed by
// accident).
Result<FlushReport> flush(const Table& table, const Context& context, const Filter& filter,
                          bool dry_run);

// One pass of the agent's sweeper: deletes expired entries and counts the
// table (everything, no filter).
struct SweepReport {
    std::uint32_t capacity = 0;
    std::uint64_t entries = 0;  // left after the deletes
    std::uint64_t expired = 0;  // deleted
    Counts counts;
    double sweep_ms = 0;
};
Result<SweepReport> sweep(const Table& table, const Context& context,
                          std::uint64_t clock_running_ms);

// ---------------------------------------------------------------------------
// Floods: the per-CPU insert budget's state (xlb_ct_cpu), read by the agent.

// A CPU is under flood while its last skip is less than this old.
inline constexpr std::uint64_t kFloodWindowNs = 1'000'000'000;

struct FloodChange {
    unsigned cpu = 0;
    bool started = false;       // false: ended
    std::uint64_t skipped = 0;  // inserts skipped since the flood started
};

class FloodTracker {
public:
    // `now_ns`: CLOCK_MONOTONIC_COARSE, the clock of last_skip_ns.
    std::vector<FloodChange> update(std::span<const xlb_ct_cpu> per_cpu, std::uint64_t now_ns);
    std::vector<unsigned> flooded() const;

private:
    struct Cpu {
        bool flooded = false;
        std::uint64_t skipped_before = 0;  // its counter when the flood started
        std::uint64_t skipped = 0;
    };
    std::vector<Cpu> cpus_;
};

bool under_flood(const xlb_ct_cpu& cpu, std::uint64_t now_ns);

// ---------------------------------------------------------------------------
// Connections per backend, as ipvsadm shows them per real server.

// A backend's valid entries: active ones had a packet within the window and
// no FIN or RST from the client; the others (idle, or ending) are inactive.
struct Connections {
    std::uint64_t active = 0;
    std::uint64_t inactive = 0;
};
// By (VIP id, backend id), from entry values.
using ConnectionsByBackend = std::map<std::pair<std::uint32_t, std::uint32_t>, Connections>;
struct ConnectionsReport {
    ConnectionsByBackend backends;
    config::Duration active_within{};
    double scan_ms = 0;
};
// The default window: what `backend drain --wait` calls active.
inline constexpr config::Duration kActiveWithin = std::chrono::seconds(10);
Result<ConnectionsReport> connections(const Table& table, config::Duration active_within);

// The last count, taken again when it is older than `max_age`: every reader
// of /v1/backends, top and /metrics within it shares one scan. Safe from
// several threads; one scan at a time.
class ConnectionsCache {
public:
    using Now = std::function<std::chrono::steady_clock::time_point()>;
    ConnectionsCache(std::shared_ptr<const Table> table, std::chrono::milliseconds max_age,
                     Now now = std::chrono::steady_clock::now);
    Result<ConnectionsReport> get(config::Duration active_within = kActiveWithin);

private:
    std::shared_ptr<const Table> table_;
    std::chrono::milliseconds max_age_;
    Now now_;
    std::mutex mu_;
    std::optional<std::chrono::steady_clock::time_point> taken_;
    ConnectionsReport last_;
};

// New flows per second per backend id, from its counter (struct
// xlb_backend_stats) read about once a second.
class RateMeter {
public:
    // The rates since the previous reading; an id first read now has none.
    std::map<std::uint32_t, double> update(std::uint64_t now_ns,
                                           const std::map<std::uint32_t, std::uint64_t>& counts);

private:
    std::optional<std::uint64_t> last_ns_;
    std::map<std::uint32_t, std::uint64_t> last_;
};

}  // namespace xlb::conntrack
