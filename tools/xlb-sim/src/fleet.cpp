// SPDX-License-Identifier: Apache-2.0
#include "xlb/sim/fleet.h"

#include <fmt/format.h>

#include <algorithm>
#include <memory>
#include <span>

#include "xlb/maglev/maglev.h"
#include "xlb/sim/placement.h"
#include "xlb/sim/random.h"

namespace xlb::sim {

namespace {

using control::Health;
using fleet::HealthConsensus;

// Purposes for derive_seed(); arbitrary distinct constants.
constexpr std::uint64_t kPathsPurpose = 0x666c2d7061746873ULL;
constexpr std::uint64_t kEventPurpose = 0x666c2d6576656e74ULL;
// The routers hash flows with their own function, unrelated to the LB's.
constexpr std::uint64_t kEcmpSalt = 0x65636d702d686173ULL;
constexpr std::uint64_t kRehashSalt = 0x7265686173682d31ULL;

constexpr std::uint32_t kNoBackend = UINT32_MAX;

// Hosts, backends and paths at one moment. Backend ids 0..B-1 are
// configured from the start; id B is the one a join adds.
struct World {
    std::vector<std::uint8_t> host_live;
    std::vector<std::uint8_t> configured;  // a member of the VIP
    std::vector<std::uint8_t> alive;       // the backend itself answers
    // Per host, the sorted ids of the backends its path to fails.
    std::vector<std::vector<std::uint32_t>> failed;

    [[nodiscard]] bool path_fails(std::uint32_t h, std::uint32_t b) const {
        return std::binary_search(failed[h].begin(), failed[h].end(), b);
    }
    [[nodiscard]] std::vector<std::uint32_t> live_hosts() const {
        std::vector<std::uint32_t> live;
        for (std::uint32_t h = 0; h < host_live.size(); ++h) {
            if (host_live[h]) live.push_back(h);
        }
        return live;
    }
    void fail_path(std::uint32_t h, std::uint32_t b) {
        auto& f = failed[h];
        f.insert(std::lower_bound(f.begin(), f.end(), b), b);
    }
};

// Which backends each host keeps in its table under one policy. A host's
// own verdict on a backend is healthy when the backend is alive and the
// host's path to it works.
struct Membership {
    bool shared = false;  // the fleet's verdict: one set for every host
    std::vector<std::vector<std::uint8_t>> in;
    std::vector<Health> fleet;  // shared only: the fleet's verdict per backend

    [[nodiscard]] const std::vector<std::uint8_t>& of(std::uint32_t h) const {
        return in[shared ? 0 : h];
    }
    [[nodiscard]] bool contains(std::uint32_t h, std::uint32_t b) const { return of(h)[b] != 0; }
};

// `previous`: the fleet's verdicts before (shared policies), which
// decide() keeps while neither side has its majority.
Membership decide_membership(HealthConsensus policy, const World& world,
                             const std::vector<Health>& previous) {
    const auto total = static_cast<std::uint32_t>(world.configured.size());
    const auto hosts = static_cast<std::uint32_t>(world.host_live.size());
    Membership m;
    if (policy == HealthConsensus::kLocal) {
        // decide() with no other host: a host on its own keeps its own view.
        m.in.assign(hosts, std::vector<std::uint8_t>(total, 0));
        std::vector<Health> verdicts(total);
        for (std::uint32_t h = 0; h < hosts; ++h) {
            for (std::uint32_t b = 0; b < total; ++b) {
                verdicts[b] = world.alive[b] ? Health::kHealthy : Health::kUnhealthy;
            }
            for (std::uint32_t b : world.failed[h]) verdicts[b] = Health::kUnhealthy;
            for (std::uint32_t b = 0; b < total; ++b) {
                if (!world.configured[b]) continue;
                const auto v = fleet::decide(policy, verdicts[b], {}, previous[b]);
                m.in[h][b] = v.health == Health::kHealthy;
            }
        }
        return m;
    }
    m.shared = true;
    m.in.assign(1, std::vector<std::uint8_t>(total, 0));
    m.fleet.assign(total, Health::kUnknown);
    const std::vector<std::uint32_t> live = world.live_hosts();
    // Which live hosts (by position) fail their path to each backend: most
    // backends have none, so verdicts are filled from this index.
    std::vector<std::vector<std::uint32_t>> failing(total);
    for (std::uint32_t i = 0; i < live.size(); ++i) {
        for (std::uint32_t b : world.failed[live[i]]) failing[b].push_back(i);
    }
    std::vector<Health> verdicts(live.size());
    for (std::uint32_t b = 0; b < total; ++b) {
        if (!world.configured[b] || live.empty()) continue;
        std::fill(verdicts.begin(), verdicts.end(),
                  world.alive[b] ? Health::kHealthy : Health::kUnhealthy);
        for (std::uint32_t i : failing[b]) verdicts[i] = Health::kUnhealthy;
        const auto v =
            fleet::decide(policy, verdicts[0], std::span(verdicts).subspan(1), previous[b]);
        m.fleet[b] = v.health;
        // A backend the fleet has not judged yet (a tie on a new backend) is
        // not given traffic, as on a host that has not probed it yet.
        m.in[0][b] = v.health == Health::kHealthy;
    }
    return m;
}

// One Maglev table, slots holding backend ids.
struct Table {
    std::vector<std::uint32_t> slot_id;  // empty: no backend in the table

    [[nodiscard]] std::uint32_t lookup(const Key& key) const {
        return slot_id.empty() ? kNoBackend : slot_id[key.flow_hash % slot_id.size()];
    }
};
using TablePtr = std::shared_ptr<const Table>;

class TableBuilder {
public:
    TableBuilder(std::uint32_t backends_total, std::uint32_t ring_size) : ring_size_(ring_size) {
        for (std::uint32_t b = 0; b < backends_total; ++b) {
            all_.push_back({make_member(b).key, 1});
        }
    }
    xlb::Result<TablePtr> build(const std::vector<std::uint8_t>& in) const {
        std::vector<maglev::Backend> input;
        std::vector<std::uint32_t> ids;
        for (std::uint32_t b = 0; b < in.size(); ++b) {
            if (!in[b]) continue;
            input.push_back(all_[b]);
            ids.push_back(b);
        }
        auto table = std::make_shared<Table>();
        if (input.empty()) return table;
        auto built = maglev::build_table(input, {.ring_size = ring_size_});
        if (!built) return xlb::fail("maglev: " + built.error().message);
        table->slot_id.resize(built->table.size());
        for (std::size_t s = 0; s < built->table.size(); ++s) {
            table->slot_id[s] = ids[built->table[s]];
        }
        return table;
    }

private:
    std::uint32_t ring_size_;
    std::vector<maglev::Backend> all_;
};

// Every host's table for a membership; hosts of a shared one share it.
xlb::Result<std::vector<TablePtr>> build_all(const Membership& m, std::uint32_t hosts,
                                             const TableBuilder& builder) {
    std::vector<TablePtr> tables(hosts);
    for (std::uint32_t h = 0; h < hosts; ++h) {
        if (m.shared && h > 0) {
            tables[h] = tables[0];
            continue;
        }
        auto t = builder.build(m.of(h));
        if (!t) return std::unexpected(t.error());
        tables[h] = std::move(*t);
    }
    return tables;
}

std::uint64_t ecmp_hash(const Key& key) noexcept { return mix64(key.hash64 ^ kEcmpSalt); }

// The host the routers send a flow to, given the host it went to while all
// were up.
std::uint32_t route(Ecmp ecmp, const Key& key, std::uint32_t first_host, const World& world,
                    const std::vector<std::uint32_t>& live) {
    if (ecmp == Ecmp::kModulo) return live[ecmp_hash(key) % live.size()];
    if (world.host_live[first_host]) return first_host;
    return live[mix64(ecmp_hash(key) ^ kRehashSalt) % live.size()];
}

// What happens in one trial, drawn once and applied under every policy.
struct Draw {
    std::optional<std::uint32_t> lost_host;
    std::optional<std::uint32_t> failed_backend;
    bool join = false;
    std::optional<std::pair<std::uint32_t, std::uint32_t>> new_path;
};

Draw draw_event(FleetEvent kind, const World& world, const FleetStudy& study, Rng& rng) {
    Draw d;
    const auto alive_backend = [&] {
        // Configured backends are alive in the steady state.
        return static_cast<std::uint32_t>(rng.below(study.backends));
    };
    const auto working_path = [&]() -> std::optional<std::pair<std::uint32_t, std::uint32_t>> {
        // A path that works now; with (almost) every path failed, none changes.
        for (int attempt = 0; attempt < 1000; ++attempt) {
            const auto h = static_cast<std::uint32_t>(rng.below(study.hosts));
            const auto b = alive_backend();
            if (!world.path_fails(h, b)) return std::pair{h, b};
        }
        return std::nullopt;
    };
    switch (kind) {
        case FleetEvent::kHostLoss: d.lost_host = rng.below(study.hosts); break;
        case FleetEvent::kBackendFail: d.failed_backend = alive_backend(); break;
        case FleetEvent::kBackendJoin: d.join = true; break;
        case FleetEvent::kPathFailure: d.new_path = working_path(); break;
        case FleetEvent::kJoinThenHostLoss:
            d.join = true;
            d.lost_host = rng.below(study.hosts);
            break;
        case FleetEvent::kFailThenHostLoss:
            d.failed_backend = alive_backend();
            d.lost_host = rng.below(study.hosts);
            break;
        case FleetEvent::kPathThenHostLoss:
            d.new_path = working_path();
            d.lost_host = rng.below(study.hosts);
            break;
    }
    return d;
}

World apply(const World& base, const Draw& d, const FleetStudy& study, Rng& rng) {
    World w = base;
    if (d.lost_host) w.host_live[*d.lost_host] = 0;
    if (d.failed_backend) w.alive[*d.failed_backend] = 0;
    if (d.new_path) w.fail_path(d.new_path->first, d.new_path->second);
    if (d.join) {
        const std::uint32_t b = study.backends;
        w.configured[b] = 1;
        w.alive[b] = 1;
        for (std::uint32_t h = 0; h < study.hosts; ++h) {
            if (rng.unit_open() < study.path_failure) w.fail_path(h, b);
        }
    }
    return w;
}

double capacity_lost(const World& world, const Membership& m) {
    std::size_t alive = 0;
    for (std::uint32_t b = 0; b < world.alive.size(); ++b) {
        alive += world.configured[b] && world.alive[b];
    }
    const auto live = world.live_hosts();
    if (alive == 0 || live.empty()) return 0;
    double sum = 0;
    for (std::uint32_t h : live) {
        std::size_t out = 0;
        const auto& in = m.of(h);
        for (std::uint32_t b = 0; b < world.alive.size(); ++b) {
            out += world.configured[b] && world.alive[b] && !in[b];
        }
        sum += static_cast<double>(out) / static_cast<double>(alive);
        if (m.shared) return sum;  // the same on every host
    }
    return sum / static_cast<double>(live.size());
}

double fraction(std::size_t part, std::size_t whole) {
    return whole == 0 ? 0.0 : static_cast<double>(part) / static_cast<double>(whole);
}

}  // namespace

std::string_view ecmp_name(Ecmp ecmp) noexcept {
    return ecmp == Ecmp::kModulo ? "modulo" : "resilient";
}

xlb::Result<Ecmp> parse_ecmp(std::string_view name) {
    for (Ecmp e : {Ecmp::kResilient, Ecmp::kModulo}) {
        if (ecmp_name(e) == name) return e;
    }
    return xlb::fail(fmt::format("unknown ECMP model '{}': use resilient or modulo", name));
}

std::string_view fleet_event_name(FleetEvent event) noexcept {
    switch (event) {
        case FleetEvent::kHostLoss: return "host-loss";
        case FleetEvent::kBackendFail: return "backend-fail";
        case FleetEvent::kBackendJoin: return "backend-join";
        case FleetEvent::kPathFailure: return "path-failure";
        case FleetEvent::kJoinThenHostLoss: return "join+host-loss";
        case FleetEvent::kFailThenHostLoss: return "fail+host-loss";
        case FleetEvent::kPathThenHostLoss: return "path+host-loss";
    }
    return "?";
}

xlb::Result<FleetEvent> parse_fleet_event(std::string_view name) {
    for (FleetEvent e : kAllFleetEvents) {
        if (fleet_event_name(e) == name) return e;
    }
    return xlb::fail(
        fmt::format("unknown event '{}': use host-loss, backend-fail, backend-join, path-failure, "
                    "join+host-loss, fail+host-loss or path+host-loss",
                    name));
}

std::uint32_t fleet_ring_size(const FleetStudy& study) {
    if (study.ring_size != 0) return study.ring_size;
    // Room for every backend and the one a join adds.
    const std::uint64_t needed = std::uint64_t{maglev::kMinSlotsPerBackend} * (study.backends + 1);
    if (needed <= maglev::kDefaultRingSize) return maglev::kDefaultRingSize;
    return maglev::next_prime(static_cast<std::uint32_t>(needed));
}

xlb::Result<FleetResult> run_fleet(const FleetStudy& study) {
    if (study.hosts < 1 || study.hosts > kMaxFleetHosts) {
        return xlb::fail(
            fmt::format("fleet: hosts must be 1 to {}, not {}", kMaxFleetHosts, study.hosts));
    }
    if (study.backends < 1 || study.backends > kMaxFleetBackends) {
        return xlb::fail(fmt::format("fleet: backends must be 1 to {}, not {}", kMaxFleetBackends,
                                     study.backends));
    }
    if (study.flows < 1) return xlb::fail("fleet: need at least 1 flow");
    if (!(study.path_failure >= 0.0 && study.path_failure <= 1.0)) {
        return xlb::fail(fmt::format("fleet: path failure is a probability, 0 to 1, not {}",
                                     study.path_failure));
    }
    if (study.events < 1) return xlb::fail("fleet: need at least 1 event of each kind");
    if (study.policies.empty()) return xlb::fail("fleet: need at least 1 policy");
    for (FleetEvent kind : study.kinds) {
        const bool loses_host =
            kind == FleetEvent::kHostLoss || kind == FleetEvent::kJoinThenHostLoss ||
            kind == FleetEvent::kFailThenHostLoss || kind == FleetEvent::kPathThenHostLoss;
        if (loses_host && study.hosts < 2) {
            return xlb::fail(fmt::format(
                "fleet: event {} needs at least 2 hosts (one is lost, another takes its flows)",
                fleet_event_name(kind)));
        }
    }
    const std::uint32_t ring_size = fleet_ring_size(study);
    if (auto ok = maglev::validate_ring_size(ring_size, study.backends + 1); !ok) {
        return xlb::fail(fmt::format("fleet: ring size {} for {} backends and one joining: {}",
                                     ring_size, study.backends, ok.error().message));
    }

    // The steady state: every host and backend up, each path failed with P.
    const std::uint32_t total = study.backends + 1;
    World base;
    base.host_live.assign(study.hosts, 1);
    base.configured.assign(total, 1);
    base.configured[study.backends] = 0;
    base.alive.assign(total, 1);
    base.alive[study.backends] = 0;
    base.failed.resize(study.hosts);
    FleetResult result;
    result.ring_size = ring_size;
    {
        Rng paths(derive_seed(study.seed, kPathsPurpose));
        for (std::uint32_t h = 0; h < study.hosts; ++h) {
            for (std::uint32_t b = 0; b < study.backends; ++b) {
                if (paths.unit_open() < study.path_failure) base.failed[h].push_back(b);
            }
            result.failed_paths += base.failed[h].size();
        }
    }

    const std::vector<Key> keys = generate_keys(study.flows, study.seed);
    std::vector<std::uint32_t> first_host(keys.size());
    for (std::size_t f = 0; f < keys.size(); ++f) {
        first_host[f] = static_cast<std::uint32_t>(ecmp_hash(keys[f]) % study.hosts);
    }
    const TableBuilder builder(total, ring_size);

    // Before the paths failed every backend was healthy: the fleet's
    // previous verdict, which a tie keeps.
    std::vector<Health> history(total, Health::kHealthy);
    history[study.backends] = Health::kUnknown;

    struct PolicyState {
        Membership membership;
        std::vector<TablePtr> tables;
        std::vector<std::uint32_t> backend;  // each flow's own
        std::size_t established = 0;
    };
    std::vector<PolicyState> states;
    for (HealthConsensus policy : study.policies) {
        PolicyState s;
        s.membership = decide_membership(policy, base, history);
        auto tables = build_all(s.membership, study.hosts, builder);
        if (!tables) return std::unexpected(tables.error());
        s.tables = std::move(*tables);
        s.backend.resize(keys.size());
        for (std::size_t f = 0; f < keys.size(); ++f) {
            s.backend[f] = s.tables[first_host[f]]->lookup(keys[f]);
            s.established += s.backend[f] != kNoBackend;
        }
        FleetRow steady{};
        steady.policy = policy;
        steady.established = s.established;
        steady.capacity_lost = capacity_lost(base, s.membership);
        result.rows.push_back(steady);
        states.push_back(std::move(s));
    }

    for (std::size_t k = 0; k < study.kinds.size(); ++k) {
        const FleetEvent kind = study.kinds[k];
        std::vector<FleetRow> rows(study.policies.size());
        for (std::size_t p = 0; p < study.policies.size(); ++p) {
            rows[p].event = kind;
            rows[p].policy = study.policies[p];
            rows[p].established = states[p].established;
        }
        for (std::uint32_t t = 0; t < study.events; ++t) {
            // Each trial's randomness depends only on the seed, the kind and
            // the trial's number: the same event under every policy, and the
            // same events whichever other kinds run.
            Rng rng(derive_seed(study.seed,
                                kEventPurpose + (static_cast<std::uint64_t>(kind) << 32) + t));
            const Draw d = draw_event(kind, base, study, rng);
            const World world = apply(base, d, study, rng);
            const std::vector<std::uint32_t> live = world.live_hosts();
            for (std::size_t p = 0; p < study.policies.size(); ++p) {
                const PolicyState& s = states[p];
                std::vector<Health> previous = s.membership.shared ? s.membership.fleet : history;
                const Membership m = decide_membership(study.policies[p], world, previous);
                // A host whose set of backends changed publishes a new table
                // and, with second chance, keeps the one it had as its
                // previous ring; a host whose set did not change has only its
                // table, its last change being older than the window.
                std::vector<std::uint8_t> changed(study.hosts);
                for (std::uint32_t h = 0; h < study.hosts; ++h) {
                    changed[h] = m.of(h) != s.membership.of(h);
                }
                std::vector<TablePtr> now(study.hosts);
                const auto table_of = [&](std::uint32_t h) -> xlb::Result<const Table*> {
                    if (!changed[h]) return s.tables[h].get();
                    if (!now[h]) {
                        if (m.shared) {
                            for (std::uint32_t o = 0; o < study.hosts && !now[h]; ++o) {
                                if (now[o]) now[h] = now[o];
                            }
                        }
                        if (!now[h]) {
                            auto built = builder.build(m.of(h));
                            if (!built) return std::unexpected(built.error());
                            now[h] = std::move(*built);
                        }
                    }
                    return now[h].get();
                };
                std::size_t moved = 0, lost = 0, broken = 0, broken_sc = 0;
                for (std::size_t f = 0; f < keys.size(); ++f) {
                    const std::uint32_t own = s.backend[f];
                    if (own == kNoBackend) continue;
                    if (!world.alive[own]) {
                        ++lost;
                        continue;
                    }
                    const std::uint32_t h0 = first_host[f];
                    const std::uint32_t h1 = route(study.ecmp, keys[f], h0, world, live);
                    if (h1 != h0) ++moved;
                    // Out of the host's table while alive: marked down there,
                    // so its flows re-pick (on_unhealthy: reschedule), entry or
                    // not, and second chance never hints a backend that is
                    // down.
                    if (!m.contains(h1, own)) {
                        ++broken;
                        ++broken_sc;
                        continue;
                    }
                    // The host that carried the flow has its entry.
                    if (h1 == h0) continue;
                    auto table = table_of(h1);
                    if (!table) return std::unexpected(table.error());
                    if ((*table)->lookup(keys[f]) == own) continue;
                    ++broken;
                    const bool rescued = changed[h1] && s.tables[h1]->lookup(keys[f]) == own;
                    if (!rescued) ++broken_sc;
                }
                FleetRow& row = rows[p];
                const double b = fraction(broken, s.established);
                row.trials += 1;
                row.moved += fraction(moved, s.established);
                row.lost += fraction(lost, s.established);
                row.broken += b;
                row.broken_second_chance += fraction(broken_sc, s.established);
                row.max_broken = std::max(row.max_broken, b);
                row.capacity_lost += capacity_lost(world, m);
            }
        }
        for (FleetRow& row : rows) {
            const double n = row.trials;
            row.moved /= n;
            row.lost /= n;
            row.broken /= n;
            row.broken_second_chance /= n;
            row.capacity_lost /= n;
            result.rows.push_back(row);
        }
    }
    return result;
}

}  // namespace xlb::sim
