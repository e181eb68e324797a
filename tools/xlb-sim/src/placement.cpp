// SPDX-License-Identifier: Apache-2.0
#include "xlb/sim/placement.h"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <chrono>
#include <cmath>
#include <map>
#include <numeric>

#include "xlb/config/model.h"
#include "xlb/maglev/maglev.h"
#include "xlb/net/address.h"

namespace xlb::sim {

namespace {

// A backend's identity hash: the one the Maglev builder derives its
// permutation from, so every algorithm sees the same backend identities.
std::uint64_t identity_hash(std::string_view key) noexcept {
    return maglev::siphash24(key, maglev::kDefaultSeed, maglev::kKeyHashK1);
}

// Modulo over a slot list in which each backend appears `weight` times:
// the textbook "hash mod N", and what most people mean by it.
class ModuloPlacement final : public Placement {
public:
    xlb::Result<void> build(std::span<const Member> members) override {
        slots_.clear();
        for (std::uint32_t i = 0; i < members.size(); ++i) {
            slots_.insert(slots_.end(), members[i].weight, i);
        }
        if (slots_.empty()) return xlb::fail("modulo: no backend with a nonzero weight");
        return {};
    }
    std::uint32_t owner(const Key& key) const noexcept override {
        return slots_[key.flow_hash % slots_.size()];
    }
    std::size_t memory_bytes() const noexcept override {
        return slots_.size() * sizeof(std::uint32_t);
    }
    bool honours_weights() const noexcept override { return true; }

private:
    std::vector<std::uint32_t> slots_;
};

// Ring hash (Karger et al., 1997): `vnodes * weight` points per backend on a
// 64-bit circle; a key belongs to the first point clockwise from it.
class RingPlacement final : public Placement {
public:
    explicit RingPlacement(std::uint32_t vnodes) : vnodes_(vnodes) {}

    xlb::Result<void> build(std::span<const Member> members) override {
        std::vector<std::pair<std::uint64_t, std::uint32_t>> points;
        for (std::uint32_t i = 0; i < members.size(); ++i) {
            const std::uint64_t h = identity_hash(members[i].key);
            const std::uint64_t count = std::uint64_t{vnodes_} * members[i].weight;
            // Point j of a backend depends only on its identity and j, so a
            // backend keeps its points whoever else joins or leaves.
            for (std::uint64_t j = 1; j <= count; ++j) {
                points.emplace_back(mix64(h + j * 0x9e3779b97f4a7c15ULL), i);
            }
        }
        if (points.empty()) return xlb::fail("ring: no backend with a nonzero weight");
        // Ties (vanishingly rare) go to the lower position: a total order.
        std::sort(points.begin(), points.end());
        positions_.resize(points.size());
        owners_.resize(points.size());
        for (std::size_t p = 0; p < points.size(); ++p) {
            positions_[p] = points[p].first;
            owners_[p] = points[p].second;
        }
        return {};
    }
    std::uint32_t owner(const Key& key) const noexcept override {
        auto it = std::lower_bound(positions_.begin(), positions_.end(), key.hash64);
        if (it == positions_.end()) it = positions_.begin();  // wrap around
        return owners_[static_cast<std::size_t>(it - positions_.begin())];
    }
    std::size_t memory_bytes() const noexcept override {
        return positions_.size() * (sizeof(std::uint64_t) + sizeof(std::uint32_t));
    }
    bool honours_weights() const noexcept override { return true; }

private:
    std::uint32_t vnodes_;
    std::vector<std::uint64_t> positions_;  // sorted
    std::vector<std::uint32_t> owners_;
};

// Rendezvous, or highest random weight (Thaler and Ravishankar, 1998): every
// backend scores the key, the best score wins. Weighted with the logarithmic
// method (score = -weight / ln u, u uniform in (0, 1) from the pair's hash),
// under which a backend's chance to win is exactly its share of the weight.
class RendezvousPlacement final : public Placement {
public:
    xlb::Result<void> build(std::span<const Member> members) override {
        hashes_.clear();
        weights_.clear();
        equal_weights_ = true;
        for (const auto& m : members) {
            hashes_.push_back(identity_hash(m.key));
            weights_.push_back(m.weight);
            equal_weights_ = equal_weights_ && m.weight == members.front().weight;
        }
        if (members.empty()) return xlb::fail("rendezvous: no backend");
        return {};
    }
    std::uint32_t owner(const Key& key) const noexcept override {
        std::uint32_t best = 0;
        if (equal_weights_) {
            // With equal weights the transformation is monotonic: compare the
            // raw hashes and skip the logarithm.
            std::uint64_t best_score = 0;
            for (std::uint32_t i = 0; i < hashes_.size(); ++i) {
                const std::uint64_t score = mix64(key.hash64 ^ hashes_[i]);
                if (i == 0 || score > best_score) {
                    best_score = score;
                    best = i;
                }
            }
            return best;
        }
        double best_score = -1.0;
        for (std::uint32_t i = 0; i < hashes_.size(); ++i) {
            if (weights_[i] == 0) continue;
            const std::uint64_t h = mix64(key.hash64 ^ hashes_[i]);
            const double u = (static_cast<double>(h >> 11) + 0.5) * 0x1p-53;
            const double score = -static_cast<double>(weights_[i]) / std::log(u);
            if (score > best_score) {
                best_score = score;
                best = i;
            }
        }
        return best;
    }
    std::size_t memory_bytes() const noexcept override {
        return hashes_.size() * (sizeof(std::uint64_t) + sizeof(std::uint32_t));
    }
    bool honours_weights() const noexcept override { return true; }

private:
    std::vector<std::uint64_t> hashes_;
    std::vector<std::uint32_t> weights_;
    bool equal_weights_ = true;
};

// Jump consistent hash: backends are numbered buckets, so only removing the
// last one is cheap; weights are ignored.
class JumpPlacement final : public Placement {
public:
    xlb::Result<void> build(std::span<const Member> members) override {
        if (members.empty()) return xlb::fail("jump: no backend");
        buckets_ = static_cast<std::uint32_t>(members.size());
        return {};
    }
    std::uint32_t owner(const Key& key) const noexcept override {
        return jump_hash(key.hash64, buckets_);
    }
    std::size_t memory_bytes() const noexcept override { return 0; }
    bool honours_weights() const noexcept override { return false; }

private:
    std::uint32_t buckets_ = 0;
};

// Maglev, built by the data plane's own library: lookups index the table with
// the flow hash exactly as the XDP program does.
class MaglevPlacement final : public Placement {
public:
    explicit MaglevPlacement(std::uint32_t ring_size) : ring_size_(ring_size) {}

    xlb::Result<void> build(std::span<const Member> members) override {
        std::vector<maglev::Backend> backends;
        backends.reserve(members.size());
        for (const auto& m : members) backends.push_back({m.key, m.weight});
        auto table = maglev::build_table(backends, {.ring_size = ring_size_});
        if (!table) return xlb::fail("maglev: " + table.error().message);
        if (table->empty()) return xlb::fail("maglev: no backend with a nonzero weight");
        table_ = std::move(table->table);
        return {};
    }
    std::uint32_t owner(const Key& key) const noexcept override {
        return table_[key.flow_hash % table_.size()];
    }
    std::size_t memory_bytes() const noexcept override {
        return table_.size() * sizeof(std::uint32_t);
    }
    bool honours_weights() const noexcept override { return true; }

private:
    std::uint32_t ring_size_;
    std::vector<std::uint32_t> table_;
};

double seconds_since(std::chrono::steady_clock::time_point start) {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

std::vector<Member> make_members(std::uint32_t count, std::span<const std::uint32_t> weights) {
    std::vector<Member> members;
    members.reserve(count);
    for (std::uint32_t i = 0; i < count; ++i) {
        members.push_back(make_member(i, weights.empty() ? 1 : weights[i % weights.size()]));
    }
    return members;
}

double fraction(std::size_t part, std::size_t whole) {
    return whole == 0 ? 0.0 : static_cast<double>(part) / static_cast<double>(whole);
}

xlb::Result<std::vector<std::uint32_t>> build_and_assign(Placement& placement,
                                                         std::span<const Member> members,
                                                         std::span<const Key> keys) {
    if (auto built = placement.build(members); !built) return std::unexpected(built.error());
    return assign(placement, members, keys);
}

}  // namespace

std::string_view algorithm_name(Algorithm algorithm) noexcept {
    switch (algorithm) {
        case Algorithm::kModulo: return "modulo";
        case Algorithm::kRing: return "ring";
        case Algorithm::kRendezvous: return "rendezvous";
        case Algorithm::kJump: return "jump";
        case Algorithm::kMaglev: return "maglev";
    }
    return "?";
}

xlb::Result<Algorithm> parse_algorithm(std::string_view name) {
    for (Algorithm a : kAllAlgorithms) {
        if (algorithm_name(a) == name) return a;
    }
    return xlb::fail(
        fmt::format("unknown algorithm '{}': use modulo, ring, rendezvous, jump or maglev", name));
}

Member make_member(std::uint32_t id, std::uint32_t weight) {
    // The key xlbd would hash for this backend, so that the simulated tables
    // are the agent's. Ids beyond 65535 would repeat addresses; they get a
    // hash_key instead, as an operator would give them.
    const auto address = net::IpAddress::v4(10, 1, static_cast<std::uint8_t>(id >> 8),
                                            static_cast<std::uint8_t>(id));
    std::string key = config::maglev_identity(
        address, id < 65536 ? std::string() : fmt::format("backend-{}", id));
    return {id, std::move(key), weight};
}

std::unique_ptr<Placement> make_placement(Algorithm algorithm, const AlgorithmOptions& options) {
    switch (algorithm) {
        case Algorithm::kModulo: return std::make_unique<ModuloPlacement>();
        case Algorithm::kRing: return std::make_unique<RingPlacement>(options.vnodes);
        case Algorithm::kRendezvous: return std::make_unique<RendezvousPlacement>();
        case Algorithm::kJump: return std::make_unique<JumpPlacement>();
        case Algorithm::kMaglev: return std::make_unique<MaglevPlacement>(options.ring_size);
    }
    return nullptr;
}

std::uint32_t jump_hash(std::uint64_t key, std::uint32_t buckets) noexcept {
    // The key drives a linear congruential generator; each step jumps
    // forward to the next bucket count at which this key would move, so the
    // key only ever moves to a newly added bucket.
    std::int64_t bucket = -1;
    std::int64_t next = 0;
    while (next < static_cast<std::int64_t>(buckets)) {
        bucket = next;
        key = key * 2862933555777941757ULL + 1;
        next = static_cast<std::int64_t>(
            static_cast<double>(bucket + 1) *
            (static_cast<double>(1LL << 31) / static_cast<double>((key >> 33) + 1)));
    }
    return static_cast<std::uint32_t>(bucket);
}

std::vector<std::uint32_t> assign(const Placement& placement, std::span<const Member> members,
                                  std::span<const Key> keys) {
    std::vector<std::uint32_t> owners(keys.size());
    for (std::size_t k = 0; k < keys.size(); ++k) owners[k] = members[placement.owner(keys[k])].id;
    return owners;
}

std::size_t count_moved(std::span<const std::uint32_t> before,
                        std::span<const std::uint32_t> after) noexcept {
    std::size_t moved = 0;
    for (std::size_t k = 0; k < before.size() && k < after.size(); ++k) {
        moved += before[k] != after[k];
    }
    return moved;
}

double ideal_moved_fraction(std::span<const Member> before, std::span<const Member> after) {
    std::map<std::uint32_t, std::pair<double, double>> shares;
    const auto total = [](std::span<const Member> ms) {
        double sum = 0;
        for (const auto& m : ms) sum += m.weight;
        return sum;
    };
    const double total_before = total(before);
    const double total_after = total(after);
    for (const auto& m : before) shares[m.id].first = m.weight / total_before;
    for (const auto& m : after) shares[m.id].second = m.weight / total_after;
    double distance = 0;
    for (const auto& [id, s] : shares) distance += std::abs(s.first - s.second);
    return distance / 2;
}

xlb::Result<std::vector<PlacementResult>> run_placement(const PlacementStudy& study) {
    if (study.backends < 1) return xlb::fail("placement: need at least 1 backend");
    if (study.keys < 1) return xlb::fail("placement: need at least 1 key");
    const std::vector<Key> keys = generate_keys(study.keys, study.seed);
    const std::vector<Member> base = make_members(study.backends, study.weights);

    std::vector<Member> added = base;
    added.push_back(make_member(
        study.backends,
        study.weights.empty() ? 1 : study.weights[study.backends % study.weights.size()]));
    std::vector<Member> removed = base;
    removed.pop_back();
    std::vector<Member> reweighted = base;
    reweighted[0].weight *= 2;

    double total_weight = 0;
    for (const auto& m : base) total_weight += m.weight;

    std::vector<PlacementResult> results;
    for (Algorithm algorithm : study.algorithms) {
        auto placement = make_placement(algorithm, study.algorithm);
        PlacementResult r{};
        r.algorithm = algorithm;
        r.backends = study.backends;
        r.vnodes = study.algorithm.vnodes;

        const auto build_start = std::chrono::steady_clock::now();
        if (auto built = placement->build(base); !built) return std::unexpected(built.error());
        r.build_us = seconds_since(build_start) * 1e6;
        r.memory_bytes = placement->memory_bytes();

        std::vector<std::uint32_t> owners(keys.size());
        const auto lookup_start = std::chrono::steady_clock::now();
        for (std::size_t k = 0; k < keys.size(); ++k) owners[k] = placement->owner(keys[k]);
        r.lookup_ns = seconds_since(lookup_start) * 1e9 / static_cast<double>(keys.size());

        // Positions equal ids in the base set; count keys per backend.
        std::vector<std::size_t> per_backend(base.size(), 0);
        for (auto o : owners) ++per_backend[o];
        double max_ratio = 0, sum = 0, sum_sq = 0, max_error = 0, noise_var = 0;
        for (std::size_t i = 0; i < base.size(); ++i) {
            const double target = base[i].weight / total_weight;
            const double realized = fraction(per_backend[i], keys.size());
            const double ratio = realized / target;
            max_ratio = std::max(max_ratio, ratio);
            sum += ratio;
            sum_sq += ratio * ratio;
            max_error = std::max(max_error, std::abs(ratio - 1.0));
            noise_var += (1 - target) / (static_cast<double>(keys.size()) * target);
        }
        const double n = static_cast<double>(base.size());
        const double mean = sum / n;
        r.max_over_mean = max_ratio / mean;
        r.cv = std::sqrt(std::max(0.0, sum_sq / n - mean * mean)) / mean;
        r.max_share_error = max_error;
        r.cv_noise = std::sqrt(noise_var / n);

        const auto moved_to = [&](std::span<const Member> members) -> xlb::Result<double> {
            auto after = build_and_assign(*placement, members, keys);
            if (!after) return std::unexpected(after.error());
            return fraction(count_moved(owners, *after), keys.size());
        };
        auto moved = moved_to(added);
        if (!moved) return std::unexpected(moved.error());
        r.moved_add = *moved;
        r.ideal_add = ideal_moved_fraction(base, added);
        if (base.size() > 1) {
            moved = moved_to(removed);
            if (!moved) return std::unexpected(moved.error());
            r.moved_remove = *moved;
            r.ideal_remove = ideal_moved_fraction(base, removed);
        }
        r.ideal_weight = ideal_moved_fraction(base, reweighted);
        if (placement->honours_weights()) {
            moved = moved_to(reweighted);
            if (!moved) return std::unexpected(moved.error());
            r.moved_weight = *moved;
        }
        results.push_back(r);
    }
    return results;
}

namespace {

struct ChurnAction {
    enum Kind { kJoin, kLeave, kRejoin, kWeight } kind;
    std::uint32_t id = 0;
    std::uint32_t weight = 0;
    std::string text;
};

xlb::Result<std::uint32_t> parse_number(std::string_view text, std::string_view step) {
    std::uint32_t value = 0;
    auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
    if (ec != std::errc{} || end != text.data() + text.size() || text.empty()) {
        return xlb::fail(
            fmt::format("churn script: '{}' in step '{}' is not a number", text, step));
    }
    return value;
}

xlb::Result<std::vector<ChurnAction>> parse_script(std::string_view script) {
    std::vector<ChurnAction> actions;
    std::size_t start = 0;
    while (start <= script.size()) {
        const std::size_t comma = std::min(script.find(',', start), script.size());
        const std::string_view step = script.substr(start, comma - start);
        start = comma + 1;
        const std::size_t colon = step.find(':');
        const std::string_view verb = step.substr(0, colon);
        const std::string_view arg = colon == std::string_view::npos ? "" : step.substr(colon + 1);
        if (verb == "join" && colon == std::string_view::npos) {
            actions.push_back({ChurnAction::kJoin, 0, 0, "join"});
        } else if (verb == "leave" || verb == "flap") {
            auto id = parse_number(arg, step);
            if (!id) return std::unexpected(id.error());
            actions.push_back({ChurnAction::kLeave, *id, 0, fmt::format("leave:{}", *id)});
            if (verb == "flap") {
                actions.push_back({ChurnAction::kRejoin, *id, 0, fmt::format("rejoin:{}", *id)});
            }
        } else if (verb == "weight") {
            const std::size_t eq = arg.find('=');
            if (eq == std::string_view::npos) {
                return xlb::fail(fmt::format("churn script: step '{}' needs weight:ID=W", step));
            }
            auto id = parse_number(arg.substr(0, eq), step);
            if (!id) return std::unexpected(id.error());
            auto w = parse_number(arg.substr(eq + 1), step);
            if (!w) return std::unexpected(w.error());
            actions.push_back({ChurnAction::kWeight, *id, *w, std::string(step)});
        } else {
            return xlb::fail(fmt::format(
                "churn script: unknown step '{}': use join, leave:ID, flap:ID or weight:ID=W",
                step));
        }
        if (comma == script.size()) break;
    }
    return actions;
}

}  // namespace

xlb::Result<std::vector<ChurnStep>> run_churn(const ChurnStudy& study) {
    if (study.backends < 1) return xlb::fail("churn: need at least 1 backend");
    if (study.keys < 1) return xlb::fail("churn: need at least 1 key");
    auto actions = parse_script(study.script);
    if (!actions) return std::unexpected(actions.error());

    // Members stay sorted by id, so a rejoining backend takes back its old
    // position: the friendliest case for position-based algorithms.
    std::vector<Member> members = make_members(study.backends, {});
    std::uint32_t next_id = study.backends;
    std::map<std::uint32_t, Member> departed;

    const std::vector<Key> keys = generate_keys(study.keys, study.seed);
    std::vector<std::unique_ptr<Placement>> placements;
    std::vector<std::vector<std::uint32_t>> owners;
    for (Algorithm a : study.algorithms) {
        placements.push_back(make_placement(a, study.algorithm));
        auto o = build_and_assign(*placements.back(), members, keys);
        if (!o) return std::unexpected(o.error());
        owners.push_back(std::move(*o));
    }

    std::vector<ChurnStep> steps;
    std::vector<double> cumulative(placements.size(), 0.0);
    double ideal_cumulative = 0;
    for (const auto& action : *actions) {
        std::vector<Member> next = members;
        const auto find = [&](std::uint32_t id) {
            return std::find_if(next.begin(), next.end(),
                                [id](const Member& m) { return m.id == id; });
        };
        switch (action.kind) {
            case ChurnAction::kJoin: next.push_back(make_member(next_id++)); break;
            case ChurnAction::kLeave: {
                auto it = find(action.id);
                if (it == next.end()) {
                    return xlb::fail(fmt::format("churn script: '{}': no backend {} is a member",
                                                 action.text, action.id));
                }
                if (next.size() == 1) {
                    return xlb::fail(
                        fmt::format("churn script: '{}' would leave no backend", action.text));
                }
                departed[it->id] = *it;
                next.erase(it);
                break;
            }
            case ChurnAction::kRejoin: {
                const Member m = departed.at(action.id);
                departed.erase(action.id);
                next.insert(
                    std::upper_bound(next.begin(), next.end(), m,
                                     [](const Member& a, const Member& b) { return a.id < b.id; }),
                    m);
                break;
            }
            case ChurnAction::kWeight: {
                auto it = find(action.id);
                if (it == next.end()) {
                    return xlb::fail(fmt::format("churn script: '{}': no backend {} is a member",
                                                 action.text, action.id));
                }
                if (action.weight == 0) {
                    return xlb::fail(fmt::format(
                        "churn script: '{}': use leave:{} to remove a backend, not weight 0",
                        action.text, action.id));
                }
                it->weight = action.weight;
                break;
            }
        }
        ChurnStep step;
        step.action = action.text;
        step.backends = static_cast<std::uint32_t>(next.size());
        step.ideal_step = ideal_moved_fraction(members, next);
        ideal_cumulative += step.ideal_step;
        step.ideal_cumulative = ideal_cumulative;
        for (std::size_t a = 0; a < placements.size(); ++a) {
            auto after = build_and_assign(*placements[a], next, keys);
            if (!after) return std::unexpected(after.error());
            const double moved = fraction(count_moved(owners[a], *after), keys.size());
            cumulative[a] += moved;
            step.moved_step.push_back(moved);
            step.moved_cumulative.push_back(cumulative[a]);
            owners[a] = std::move(*after);
        }
        steps.push_back(std::move(step));
        members = std::move(next);
    }
    return steps;
}

}  // namespace xlb::sim
