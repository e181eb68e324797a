// SPDX-License-Identifier: Apache-2.0
//
// Key placement algorithms and the studies xlb-sim runs on them: how evenly
// each spreads keys over backends, how fast it looks keys up, and how many
// keys change owner when membership or a weight changes.
//
// Keys are hashed with the data plane's flow hash (random.h), and backends
// are identified by the same stable identity string, hashed the same way
// (SipHash-2-4 under the Maglev seed), that the Maglev builder uses.

#pragma once

#include <cstddef>
#include <cstdint>
#include <expected>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "xlb/error.h"
#include "xlb/sim/random.h"

namespace xlb::sim {

enum class Algorithm { kModulo, kRing, kRendezvous, kJump, kMaglev };

inline constexpr Algorithm kAllAlgorithms[] = {Algorithm::kModulo, Algorithm::kRing,
                                               Algorithm::kRendezvous, Algorithm::kJump,
                                               Algorithm::kMaglev};

[[nodiscard]] std::string_view algorithm_name(Algorithm algorithm) noexcept;
// Accepts the names algorithm_name() prints.
[[nodiscard]] xlb::Result<Algorithm> parse_algorithm(std::string_view name);

// One backend. `id` is what ownership is compared by across rebuilds: a
// backend that leaves and rejoins keeps its id, key and so its place.
struct Member {
    std::uint32_t id = 0;
    std::string key;  // stable identity, e.g. "10.1.0.7"
    std::uint32_t weight = 1;
};

// Simulated backend number `id`: 10.1.x.y (id = x*256 + y), keyed as xlbd
// keys it (config::maglev_identity), "backend-<id>" from id 65536 on.
[[nodiscard]] Member make_member(std::uint32_t id, std::uint32_t weight = 1);

struct AlgorithmOptions {
    // Ring hash: points per unit of weight.
    std::uint32_t vnodes = 100;
    // Maglev: table size (prime; see xlb/maglev/maglev.h).
    std::uint32_t ring_size = 65537;
};

// A placement built for one set of members.
class Placement {
public:
    virtual ~Placement() = default;
    // Rebuilds for `members` (at least one). Errors say what is wrong.
    virtual xlb::Result<void> build(std::span<const Member> members) = 0;
    // Position, in the members of the last build, of the key's owner.
    [[nodiscard]] virtual std::uint32_t owner(const Key& key) const noexcept = 0;
    // Bytes of lookup state (what a data plane would have to hold).
    [[nodiscard]] virtual std::size_t memory_bytes() const noexcept = 0;
    // Jump hash has no notion of weight; the others do.
    [[nodiscard]] virtual bool honours_weights() const noexcept = 0;
};

[[nodiscard]] std::unique_ptr<Placement> make_placement(Algorithm algorithm,
                                                        const AlgorithmOptions& options);

// Jump consistent hash (Lamping and Veach, 2014): the bucket in [0, buckets)
// of a 64-bit key. Exposed for tests.
[[nodiscard]] std::uint32_t jump_hash(std::uint64_t key, std::uint32_t buckets) noexcept;

// Owner ids of all keys under a built placement.
[[nodiscard]] std::vector<std::uint32_t> assign(const Placement& placement,
                                                std::span<const Member> members,
                                                std::span<const Key> keys);
// Keys whose owner differs.
[[nodiscard]] std::size_t count_moved(std::span<const std::uint32_t> before,
                                      std::span<const std::uint32_t> after) noexcept;
// The fewest keys (as a fraction) any placement must move between two member
// sets: half the L1 distance between the target shares, by id.
[[nodiscard]] double ideal_moved_fraction(std::span<const Member> before,
                                          std::span<const Member> after);

// ---- placement study ------------------------------------------------------

struct PlacementStudy {
    std::uint32_t backends = 100;
    std::size_t keys = 1'000'000;
    // Repeated cyclically over the backends; empty means all 1.
    std::vector<std::uint32_t> weights;
    AlgorithmOptions algorithm;
    std::uint64_t seed = 1;
    std::vector<Algorithm> algorithms{std::begin(kAllAlgorithms), std::end(kAllAlgorithms)};
};

struct PlacementResult {
    Algorithm algorithm;
    std::uint32_t backends;
    std::uint32_t vnodes;  // meaningful for the ring only
    double build_us;       // one build, wall clock
    double lookup_ns;      // per key, over all keys
    std::size_t memory_bytes;
    // Keys per backend divided by its target (K times its weight share), so
    // that weighted and unweighted runs read the same: max over mean, and the
    // coefficient of variation (stddev / mean) of that ratio.
    double max_over_mean;
    double cv;
    // The cv that even a perfect placement shows with K random keys (each
    // backend's count is binomial): differences below it are noise.
    double cv_noise;
    // Largest |realized share / target share - 1| over backends.
    double max_share_error;
    // Fractions of all keys that changed owner, and the least possible.
    double moved_add, ideal_add;         // one backend (the next id) joins
    double moved_remove, ideal_remove;   // the last backend leaves
    std::optional<double> moved_weight;  // backend 0's weight doubles (if honoured)
    double ideal_weight;
};

// Runs the study for every algorithm in study.algorithms, in that order.
[[nodiscard]] xlb::Result<std::vector<PlacementResult>> run_placement(const PlacementStudy& study);

// ---- churn ----------------------------------------------------------------

// Two joins, a leave from the middle, a backend that flaps three times, a
// weight change, the first backend leaving, and one more join.
inline constexpr std::string_view kDefaultChurnScript =
    "join,join,leave:10,flap:20,flap:20,flap:20,weight:30=2,leave:0,join";

struct ChurnStudy {
    std::uint32_t backends = 100;
    std::size_t keys = 200'000;
    // Comma-separated steps: "join" (a new backend), "leave:ID", "flap:ID"
    // (leave, then rejoin with the same identity: two steps), "weight:ID=W".
    std::string script{kDefaultChurnScript};
    AlgorithmOptions algorithm;
    std::uint64_t seed = 1;
    std::vector<Algorithm> algorithms{std::begin(kAllAlgorithms), std::end(kAllAlgorithms)};
};

struct ChurnStep {
    std::string action;  // e.g. "leave:10"
    std::uint32_t backends;
    double ideal_step;
    double ideal_cumulative;
    // Per algorithm of the study, in its order: fractions of all keys.
    std::vector<double> moved_step;
    std::vector<double> moved_cumulative;
};

[[nodiscard]] xlb::Result<std::vector<ChurnStep>> run_churn(const ChurnStudy& study);

}  // namespace xlb::sim
