// SPDX-License-Identifier: Apache-2.0
//
// Maglev table construction. The algorithm and its contract are in maglev.h;
// this file is about doing it fast without changing a single slot:
//
//  * A backend's permutation is never materialised: each backend keeps only
//    its next position and its skip, and steps with add-and-subtract.
//  * The walk runs in a tight loop whose state lives in registers; nothing
//    that changes per turn (remaining slots, slot counts) goes through memory.
//  * In the middle of the build, whole passes are walked in two steps that
//    leave the branch predictor nothing to guess (see PassBatch).
//  * The end game. Walking costs about M/F probes per claim while F slots are
//    free, so the last few hundred claims would cost as much as thousands of
//    earlier ones. Once F falls to a threshold the builder switches to
//    computing, for the backend whose turn it is, the distance along its walk
//    of every free slot directly, k = (slot - position) * skip^-1 mod M, and
//    claims the free slot with the smallest k: by definition the one the walk
//    would reach first. The result is identical; only the work differs.
//  * Weighted scheduling never visits every backend in every pass. With a few
//    distinct weights, the passes' turn lists repeat and are built once each
//    (WeightClassSchedule); otherwise each backend is filed under the pass of
//    its next turn (a wheel of per-pass bitmaps, or a heap for backends due
//    rarely), so a pass costs its turns. Skewed weights (1 against
//    1,000,000) thus cost about as much as equal ones.
//
// The unit tests compare the result with a direct transcription of the
// algorithm in maglev.h for many sizes, weights and seeds.

#include "xlb/maglev/maglev.h"

#include <algorithm>
#include <bit>
#include <cstdint>
#include <cstring>
#include <expected>
#include <functional>
#include <memory>
#include <numeric>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <tuple>
#include <unordered_map>
#include <utility>
#include <vector>

#include "hash_internal.h"

namespace xlb::maglev {
namespace {

constexpr std::uint32_t kNoBackend = UINT32_MAX;

// A backend due at least once every this many passes is visited every pass;
// one due less often waits in the heap of rare backends.
constexpr std::uint64_t kFrequentMaxGap = 8;

// Above this ring size the claimed-slot set is a bitmap (it then fits the L2
// cache where a byte per slot would not); below it, a byte per slot is
// cheaper to test. Either gives the same table.
constexpr std::uint32_t kBitmapFromRingSize = 262144;

// Free slots left when the end game starts. The walk costs about M/F probes
// per claim and the end game about F multiplications, so the best switch point
// grows like sqrt(M); the factor was tuned with tools/bench/maglev.
std::uint32_t end_game_threshold(std::uint32_t ring_size) noexcept {
    std::uint32_t root = 1;
    while (std::uint64_t{root} * root < ring_size) {
        ++root;
    }
    return std::min(ring_size, root);
}

// Inverse of `value` modulo the prime `modulus` (extended Euclid; 32-bit
// divisions, which are several times cheaper than 64-bit ones).
std::uint32_t modular_inverse(std::uint32_t value, std::uint32_t modulus) noexcept {
    std::uint32_t r0 = modulus, r1 = value;
    std::int64_t t0 = 0, t1 = 1;
    while (r1 != 0) {
        const std::uint32_t q = r0 / r1;
        std::tie(r0, r1) = std::pair{r1, r0 - q * r1};
        std::tie(t0, t1) = std::pair{t1, t0 - std::int64_t{q} * t1};
    }
    return static_cast<std::uint32_t>(t0 < 0 ? t0 + modulus : t0);
}

// Montgomery multiplication modulo an odd M < 2^31 with R = 2^32: a product
// reduced with two multiplications and a shift, no division.
class Montgomery {
public:
    explicit Montgomery(std::uint32_t modulus) noexcept : modulus_(modulus) {
        // Newton's iteration doubles the correct low bits of M^-1 mod 2^32
        // each step: 3 (M * M == 1 mod 8), 6, 12, 24, 48.
        std::uint32_t inverse = modulus;
        for (int i = 0; i < 4; ++i) {
            inverse *= 2 - modulus * inverse;
        }
        negated_inverse_ = 0U - inverse;
    }

    // value * 2^32 mod M: multiplying by this and reducing multiplies by value.
    [[nodiscard]] std::uint32_t to_factor(std::uint32_t value) const noexcept {
        return static_cast<std::uint32_t>((std::uint64_t{value} << 32) % modulus_);
    }

    // 2^64 mod M: multiplying by this puts a number into Montgomery form.
    [[nodiscard]] std::uint32_t r_squared() const noexcept {
        const std::uint64_t r = (std::uint64_t{1} << 32) % modulus_;
        return static_cast<std::uint32_t>(r * r % modulus_);
    }

    // a * factor / 2^32 mod M, for a, factor < M.
    [[nodiscard]] std::uint32_t multiply(std::uint32_t a, std::uint32_t factor) const noexcept {
        const std::uint64_t product = std::uint64_t{a} * factor;
        const std::uint32_t m = static_cast<std::uint32_t>(product) * negated_inverse_;
        const auto reduced =
            static_cast<std::uint32_t>((product + std::uint64_t{m} * modulus_) >> 32);
        return reduced >= modulus_ ? reduced - modulus_ : reduced;
    }

private:
    std::uint32_t modulus_;
    std::uint32_t negated_inverse_;
};

// Where a backend's walk stands: the next slot of its permutation to look at,
// and its step. Eight bytes, so that a pass over all backends streams.
struct Walker {
    std::uint32_t position;
    std::uint32_t skip;
};

// Claimed slots, one byte each. A thin view (the storage belongs to the
// builder), so that the walk keeps the pointer in a register.
struct ByteSet {
    static constexpr bool kBatchWalks = true;  // see PassBatch
    std::uint8_t* bytes;
    [[nodiscard]] bool test(std::uint32_t slot) const noexcept { return bytes[slot] != 0; }
    void set(std::uint32_t slot) const noexcept { bytes[slot] = 1; }
    static std::size_t storage_words(std::uint32_t ring_size) { return (ring_size + 7) / 8; }

    // Calls visit(slot) for every unclaimed slot below ring_size, in order.
    // Eight slots per step: by the end game almost every byte is set.
    template <class Visit>
    void for_each_free(std::uint32_t ring_size, Visit visit) const {
        constexpr std::uint64_t kAllClaimed = 0x0101010101010101ULL;
        std::uint32_t slot = 0;
        for (; slot + 8 <= ring_size; slot += 8) {
            std::uint64_t eight;
            std::memcpy(&eight, bytes + slot, sizeof eight);
            if (eight != kAllClaimed) {
                for (std::uint32_t i = slot; i < slot + 8; ++i) {
                    if (bytes[i] == 0) {
                        visit(i);
                    }
                }
            }
        }
        for (; slot < ring_size; ++slot) {
            if (bytes[slot] == 0) {
                visit(slot);
            }
        }
    }
};

// Claimed slots, one bit each.
struct BitSet {
    static constexpr bool kBatchWalks = false;
    std::uint8_t* bytes;
    [[nodiscard]] bool test(std::uint32_t slot) const noexcept {
        return (bytes[slot / 8] >> (slot % 8)) & 1;
    }
    void set(std::uint32_t slot) const noexcept {
        bytes[slot / 8] |= static_cast<std::uint8_t>(1U << (slot % 8));
    }
    static std::size_t storage_words(std::uint32_t ring_size) { return (ring_size + 63) / 64; }

    // Calls visit(slot) for every unclaimed slot below ring_size, in order.
    template <class Visit>
    void for_each_free(std::uint32_t ring_size, Visit visit) const {
        for (std::uint32_t base = 0; base < ring_size; base += 8) {
            // Bits past ring_size in the last byte are never set: stop there.
            unsigned free_bits = ~bytes[base / 8] & 0xffU;
            while (free_bits != 0) {
                const std::uint32_t slot =
                    base + static_cast<std::uint32_t>(std::countr_zero(free_bits));
                if (slot >= ring_size) {
                    return;
                }
                visit(slot);
                free_bits &= free_bits - 1;
            }
        }
    }
};

std::uint32_t step(std::uint32_t position, std::uint32_t skip, std::uint32_t ring_size) noexcept {
    // position, skip < M, so one conditional subtraction is enough.
    const std::uint32_t next = position + skip;
    return next >= ring_size ? next - ring_size : next;
}

// The first unclaimed slot of the walk from `position` on (inclusive).
template <class ClaimedSet>
[[gnu::always_inline]] inline std::uint32_t first_free(ClaimedSet claimed, std::uint32_t position,
                                                       std::uint32_t skip,
                                                       std::uint32_t ring_size) noexcept {
    while (claimed.test(position)) {
        position = step(position, skip, ring_size);
    }
    return position;
}

#if defined(__x86_64__) && defined(__GNUC__)
// The loop above is where a build spends most of its time. GCC 12 compiles it
// to nine instructions per probe (it keeps the next position, the current one
// and the byte's address alive at once); this is the same loop in six, which
// makes a whole build 5-10% faster on the development machines. The unit
// tests compare every table with a plain transcription of the algorithm.
template <>
[[gnu::always_inline]] inline std::uint32_t first_free(ByteSet claimed, std::uint32_t position,
                                                       std::uint32_t skip,
                                                       std::uint32_t ring_size) noexcept {
    std::uint64_t slot = position;  // zero-extended, so that it can index memory
    std::uint64_t wrapped;
    asm("jmp 2f\n\t"
        "1:\n\t"
        "add %k[skip], %k[slot]\n\t"  // slot += skip
        "mov %k[slot], %k[wrapped]\n\t"
        "sub %k[ring_size], %k[wrapped]\n\t"  // wrapped = slot - M; carry if slot < M
        "cmovae %k[wrapped], %k[slot]\n\t"    // no carry: slot = wrapped
        "2:\n\t"
        "cmpb $0, (%[bytes],%[slot])\n\t"  // claimed?
        "jne 1b"
        : [slot] "+r"(slot), [wrapped] "=&r"(wrapped)
        : [skip] "r"(skip), [ring_size] "r"(ring_size), [bytes] "r"(claimed.bytes)
        : "cc", "memory");
    return static_cast<std::uint32_t>(slot);
}
#endif

// One turn of the walk: the backend claims the first unclaimed slot from its
// current position on.
template <class ClaimedSet>
[[gnu::always_inline]] inline void walk_turn(ClaimedSet claimed, Walker& walker,
                                             std::uint32_t backend, std::uint32_t* table,
                                             std::uint32_t ring_size) noexcept {
    const std::uint32_t skip = walker.skip;
    const std::uint32_t position = first_free(claimed, walker.position, skip, ring_size);
    claimed.set(position);
    table[position] = backend;
    walker.position = step(position, skip, ring_size);
}

// Batched passes. In the middle of the build a turn's walk is short but its
// length is random, so the branch that ends it is mispredicted about once per
// turn, which costs more than the probes. A whole pass can instead be taken
// in two steps:
//  1. Every turn of the pass finds the first slot of its walk that was free
//     when the pass began. The walks are independent, so they advance in
//     rounds, one probe per walk per round, and a walk that is done simply
//     is not copied into the next round's list: no branch on the data.
//  2. The turns claim in order. A turn's slot may have been claimed by an
//     earlier turn of the same pass; then it walks on from there, exactly as
//     it would have. Every slot before the found one was already claimed when
//     the pass began, so the result is the same as turn by turn.
// Each backend appears at most once in a pass, which step 1 relies on.
struct Lane {
    std::uint32_t position;
    std::uint32_t skip;
    std::uint32_t turn;  // index into the pass's turns
};

// Batches pay off from this many turns in a pass, while the table is between
// these shares full (tuned with tools/bench/maglev): below, first probes
// mostly succeed; above, walks are long and the mispredictions few in
// comparison. With the bitmap of large rings, where the time goes to cache
// misses rather than mispredictions, they did not pay off at all.
constexpr std::uint32_t kBatchMinTurns = 32;
constexpr std::uint32_t kBatchFromFullPercent = 5;
constexpr std::uint32_t kBatchToFullPercent = 95;

template <class ClaimedSet>
bool batch_pays_off(std::uint32_t turns, std::uint32_t free_slots,
                    std::uint32_t ring_size) noexcept {
    if (!ClaimedSet::kBatchWalks || turns < kBatchMinTurns) {
        return false;
    }
    const std::uint64_t full = ring_size - free_slots;
    return full * 100 >= std::uint64_t{ring_size} * kBatchFromFullPercent &&
           full * 100 < std::uint64_t{ring_size} * kBatchToFullPercent;
}

class PassBatch {
public:
    explicit PassBatch(std::size_t max_turns) : lanes_(2 * max_turns), found_(max_turns) {}

    // Takes `turn_count` turns, of backends turns[i] (or i when turns is
    // null), in order.
    template <class ClaimedSet>
    [[gnu::noinline]] void walk(ClaimedSet claimed, Walker* walker, const std::uint32_t* turns,
                                std::uint32_t turn_count, std::uint32_t* table,
                                std::uint32_t ring_size) noexcept {
        Lane* current = lanes_.data();
        Lane* next = current + found_.size();
        std::uint32_t* const found = found_.data();
        // Step 1, first round straight from the walkers.
        std::uint32_t walking = 0;
        for (std::uint32_t i = 0; i < turn_count; ++i) {
            const std::uint32_t backend = turns != nullptr ? turns[i] : i;
            const std::uint32_t position = walker[backend].position;
            const std::uint32_t skip = walker[backend].skip;
            found[i] = position;
            current[walking] = {step(position, skip, ring_size), skip, i};
            walking += claimed.test(position);
        }
        // Later rounds: only the walks still on claimed slots.
        while (walking > 0) {
            std::uint32_t still_walking = 0;
            for (std::uint32_t k = 0; k < walking; ++k) {
                const Lane lane = current[k];
                found[lane.turn] = lane.position;
                next[still_walking] = {step(lane.position, lane.skip, ring_size), lane.skip,
                                       lane.turn};
                still_walking += claimed.test(lane.position);
            }
            std::swap(current, next);
            walking = still_walking;
        }
        // Step 2.
        for (std::uint32_t i = 0; i < turn_count; ++i) {
            const std::uint32_t backend = turns != nullptr ? turns[i] : i;
            Walker& turn_walker = walker[backend];
            std::uint32_t position = found[i];
            if (claimed.test(position)) [[unlikely]] {
                position = first_free(claimed, position, turn_walker.skip, ring_size);
            }
            claimed.set(position);
            table[position] = backend;
            turn_walker.position = step(position, turn_walker.skip, ring_size);
        }
    }

private:
    std::vector<Lane> lanes_;           // two lists of lanes: this round's, the next
    std::vector<std::uint32_t> found_;  // per turn: its slot, once step 1 is done
};

// The end game (see the top of the file).
class EndGame {
public:
    EndGame(std::uint32_t ring_size, std::size_t backend_count)
        : ring_size_(ring_size), montgomery_(ring_size), skip_factors_(backend_count, 0) {}

    template <class ClaimedSet>
    void start(ClaimedSet claimed, std::uint32_t free_count) {
        free_slots_.reserve(free_count);
        claimed.for_each_free(ring_size_, [&](std::uint32_t slot) { free_slots_.push_back(slot); });
    }

    // Computes skip^-1 * 2^32 mod M for the given backends ahead of their
    // turns, all with one modular inversion (Montgomery's trick: invert the
    // product, then peel off one factor at a time). Backends already done
    // are skipped; turn() computes any missing factor on its own.
    void prepare(std::span<const Walker> walkers, std::span<const std::uint32_t> backends) {
        std::vector<std::uint32_t> pending;
        pending.reserve(backends.size());
        for (const std::uint32_t backend : backends) {
            if (skip_factors_[backend] == 0) {
                skip_factors_[backend] = kPending;
                pending.push_back(backend);
            }
        }
        if (pending.empty()) {
            return;
        }
        // In Montgomery form x' = x * R mod M, with R = 2^32; multiply(a', b')
        // gives (a * b)'. prefix[i] = (skip_0 * ... * skip_i)'.
        const std::uint32_t r_squared = montgomery_.r_squared();
        std::vector<std::uint32_t> prefix(pending.size());
        std::uint32_t product = montgomery_.multiply(walkers[pending[0]].skip, r_squared);
        prefix[0] = product;
        for (std::size_t i = 1; i < pending.size(); ++i) {
            const std::uint32_t skip = montgomery_.multiply(walkers[pending[i]].skip, r_squared);
            product = montgomery_.multiply(product, skip);
            prefix[i] = product;
        }
        // (product^-1)': leave Montgomery form, invert, go back.
        std::uint32_t inverse = montgomery_.multiply(
            modular_inverse(montgomery_.multiply(product, 1), ring_size_), r_squared);
        for (std::size_t i = pending.size() - 1; i > 0; --i) {
            // inverse = (skip_0 * ... * skip_i)^-1'; times prefix[i-1] leaves
            // skip_i^-1 * R, exactly the factor turn() needs.
            skip_factors_[pending[i]] = montgomery_.multiply(inverse, prefix[i - 1]);
            const std::uint32_t skip = montgomery_.multiply(walkers[pending[i]].skip, r_squared);
            inverse = montgomery_.multiply(inverse, skip);
        }
        skip_factors_[pending[0]] = inverse;
    }

    void turn(const Walker& walker, std::uint32_t backend, std::uint32_t* table) {
        std::uint32_t& factor = skip_factors_[backend];
        if (factor == 0) {
            // skip^-1 * 2^32 mod M; never 0 as M is prime and skip < M.
            factor = montgomery_.to_factor(modular_inverse(walker.skip, ring_size_));
        }
        // Every slot the backend's walk has passed is claimed, so among the
        // free slots the one the walk would reach first is the one with the
        // smallest distance k from the current position along the walk. The
        // position is left where it is: after this claim, distances from it
        // still order the remaining free slots correctly.
        const std::uint32_t base = walker.position;
        const std::uint32_t ring_size = ring_size_;
        const std::uint32_t* free_slots = free_slots_.data();
        const std::size_t free_count = free_slots_.size();
        std::uint32_t best_distance = UINT32_MAX;
        std::size_t best_index = 0;
        for (std::size_t i = 0; i < free_count; ++i) {
            const std::uint32_t slot = free_slots[i];
            const std::uint32_t delta = slot >= base ? slot - base : slot + ring_size - base;
            const std::uint32_t distance = montgomery_.multiply(delta, factor);
            if (distance < best_distance) {
                best_distance = distance;
                best_index = i;
            }
        }
        table[free_slots_[best_index]] = backend;
        free_slots_[best_index] = free_slots_.back();
        free_slots_.pop_back();
    }

private:
    // Marks a backend collected for inversion; never a real factor (< M).
    static constexpr std::uint32_t kPending = UINT32_MAX;

    std::uint32_t ring_size_;
    Montgomery montgomery_;
    std::vector<std::uint32_t> free_slots_;
    std::vector<std::uint32_t> skip_factors_;  // 0 = not computed yet
};

// The walk phase with equal weights: `turns` turns round-robin from backend 0.
// Returns the backend whose turn is next. Kept out of line so that its few
// variables all stay in registers.
template <class ClaimedSet>
[[gnu::noinline]] std::uint32_t walk_equal_weights(ClaimedSet claimed, Walker* walker,
                                                   std::uint32_t backend_count,
                                                   std::uint32_t* table, std::uint32_t ring_size,
                                                   std::uint32_t turns) {
    PassBatch batch(ClaimedSet::kBatchWalks && backend_count >= kBatchMinTurns ? backend_count : 0);
    std::uint32_t backend = 0;
    std::uint32_t free_slots = ring_size;
    // Runs of turns up to the end of a pass or of the walk, so that no turn
    // has to check a count.
    while (turns > 0) {
        const std::uint32_t run = std::min(backend_count - backend, turns);
        if (run == backend_count && batch_pays_off<ClaimedSet>(run, free_slots, ring_size)) {
            batch.walk(claimed, walker, nullptr, run, table, ring_size);
        } else {
            for (std::uint32_t b = backend; b < backend + run; ++b) {
                walk_turn(claimed, walker[b], b, table, ring_size);
            }
        }
        backend += run;
        turns -= run;
        free_slots -= run;
        if (backend == backend_count) {
            backend = 0;
        }
    }
    return backend;
}

// Equal weights: every backend takes a turn in every pass, so exactly M turns
// round-robin from backend 0 fill the table, and backend b gets
// floor(M / n) slots, plus one if b < M mod n.
template <class ClaimedSet>
void fill_equal_weights(ClaimedSet claimed, std::span<Walker> walkers, std::uint32_t* table,
                        std::uint32_t ring_size) {
    const auto backend_count = static_cast<std::uint32_t>(walkers.size());
    const std::uint32_t end_game_at = end_game_threshold(ring_size);
    Walker* const walker = walkers.data();

    const std::uint32_t walk_turns = ring_size - end_game_at;
    std::uint32_t backend =
        walk_equal_weights(claimed, walker, backend_count, table, ring_size, walk_turns);

    EndGame end_game(ring_size, backend_count);
    end_game.start(claimed, end_game_at);
    // The backends of the end game's turns: the next ones round-robin.
    std::vector<std::uint32_t> upcoming(std::min(backend_count, end_game_at));
    for (std::uint32_t i = 0; i < upcoming.size(); ++i) {
        upcoming[i] = (backend + i) % backend_count;
    }
    end_game.prepare(walkers, upcoming);
    for (std::uint32_t left = end_game_at; left > 0; --left) {
        end_game.turn(walker[backend], backend, table);
        if (++backend == backend_count) {
            backend = 0;
        }
    }
}

// The walk phase for an explicit list of turns (weighted scheduling).
template <class ClaimedSet>
[[gnu::noinline]] void walk_turn_list(ClaimedSet claimed, Walker* walker,
                                      const std::uint32_t* turns, std::size_t turn_count,
                                      std::uint32_t* table, std::uint32_t ring_size) noexcept {
    for (std::size_t i = 0; i < turn_count; ++i) {
        walk_turn(claimed, walker[turns[i]], turns[i], table, ring_size);
    }
}

// When a backend of weight w takes its turns, with W the largest weight: its
// t-th turn falls in pass ceil(t * W / w), so consecutive turns are
// q = floor(W / w) or q + 1 passes apart. Which of the two is tracked the
// way Bresenham draws a line: `excess` = ceil(t * r / w) * w - t * r, with
// r = W mod w, decides without a division per turn.
struct TurnCadence {
    std::uint64_t weight;
    std::uint64_t quotient;   // q
    std::uint64_t remainder;  // r
    std::uint64_t excess = 0;

    // Passes from this turn to the next (from pass 0 for the first turn).
    // Branch-free: which of the two gaps comes next follows no pattern the
    // branch predictor could learn across backends.
    std::uint64_t next_gap() noexcept {
        const bool short_gap = excess >= remainder;
        excess = short_gap ? excess - remainder : excess + weight - remainder;
        return quotient + !short_gap;
    }
};

// Integer credit scheduling (maglev.h, step 3) for unequal weights comes in
// two schedules that give the same turns, pass by pass: a pass's turns are
// the backends due in it, in backend order. next_pass() returns them; the
// span stays valid until the next call.
//
// The general one: rather than adding every backend's weight to its credit
// in every pass, each backend is filed under the pass of its next turn:
// frequent backends (due at least every kFrequentMaxGap passes) in a wheel of
// per-pass bitmaps, rare ones in a heap. A pass then costs its turns plus a
// scan of one bitmap.
class WheelSchedule {
public:
    WheelSchedule(std::span<const std::uint32_t> weights, std::uint64_t max_weight,
                  std::uint32_t ring_size)
        : weights_(weights),
          max_weight_(max_weight),
          last_pass_(ring_size),
          rare_turns_(weights.size(), 0),
          pass_turns_(weights.size()) {
        for (std::uint32_t backend = 0; backend < weights.size(); ++backend) {
            const std::uint64_t weight = weights[backend];
            if (weight * kFrequentMaxGap >= max_weight) {
                frequent_.push_back(backend);
                frequent_cadence_.push_back({weight, max_weight / weight, max_weight % weight});
            } else if (const std::uint64_t pass = pass_of_turn(backend, 1); pass <= last_pass_) {
                rare_heap_.push_back(pass << 32 | backend);
            }
        }
        std::ranges::make_heap(rare_heap_, std::greater<>{});
        words_ = (frequent_.size() + 63) / 64;
        wheel_.assign(kWheel * words_, 0);
        for (std::size_t i = 0; i < frequent_.size(); ++i) {
            file(i, frequent_cadence_[i].next_gap());
        }
    }

    std::span<const std::uint32_t> next_pass() {
        ++pass_;
        // The pass's turns: its frequent backends, bit by bit, merged by
        // backend number with the rare ones due this pass.
        std::size_t turn_count = 0;
        std::uint32_t rare = next_rare();
        auto take_rare_before = [&](std::uint32_t limit) {
            while (rare < limit) {
                std::ranges::pop_heap(rare_heap_, std::greater<>{});
                rare_heap_.pop_back();
                const std::uint64_t pass_after = pass_of_turn(rare, ++rare_turns_[rare] + 1);
                if (pass_after <= last_pass_) {
                    rare_heap_.push_back(pass_after << 32 | rare);
                    std::ranges::push_heap(rare_heap_, std::greater<>{});
                }
                pass_turns_[turn_count++] = rare;
                rare = next_rare();
            }
        };
        std::uint64_t* bucket = &wheel_[(pass_ % kWheel) * words_];
        for (std::size_t word = 0; word < words_; ++word) {
            std::uint64_t bits = bucket[word];
            bucket[word] = 0;
            while (bits != 0) {
                const std::size_t index = word * 64 + std::countr_zero(bits);
                bits &= bits - 1;
                const std::uint32_t backend = frequent_[index];
                if (rare < backend) [[unlikely]] {
                    take_rare_before(backend);
                }
                pass_turns_[turn_count++] = backend;
                file(index, pass_ + frequent_cadence_[index].next_gap());
            }
        }
        take_rare_before(kNoBackend);
        return std::span(pass_turns_).first(turn_count);
    }

private:
    // The wheel: bitmap (pass mod kWheel) holds the frequent backends due in
    // that pass. Gaps are at most kFrequentMaxGap < kWheel passes, so a
    // backend is never filed into the bitmap being read.
    static constexpr std::uint64_t kWheel = 16;
    static_assert(kFrequentMaxGap < kWheel && std::has_single_bit(kWheel));

    // ceil(t * W / w); a division, but only for the few rare turns.
    [[nodiscard]] std::uint64_t pass_of_turn(std::uint32_t backend, std::uint64_t turn) const {
        const std::uint64_t weight = weights_[backend];
        return (turn * max_weight_ + weight - 1) / weight;
    }

    // The next rare backend due in this pass, or kNoBackend.
    [[nodiscard]] std::uint32_t next_rare() const {
        return !rare_heap_.empty() && rare_heap_.front() >> 32 == pass_
                   ? static_cast<std::uint32_t>(rare_heap_.front())
                   : kNoBackend;
    }

    void file(std::size_t index, std::uint64_t pass) {
        wheel_[(pass % kWheel) * words_ + index / 64] |= std::uint64_t{1} << (index % 64);
    }

    std::span<const std::uint32_t> weights_;
    std::uint64_t max_weight_;
    // The heaviest backend takes a turn every pass, so the table is full
    // after at most M passes; turns due later never happen.
    std::uint64_t last_pass_;
    std::uint64_t pass_ = 0;
    // Frequent backends, numbered by their position in frequent_ (which is
    // in backend order, so bit order is turn order within a pass).
    std::vector<std::uint32_t> frequent_;
    std::vector<TurnCadence> frequent_cadence_;
    // Rare backends: (pass of next turn) << 32 | backend, in a min-heap, so
    // that the top is the next due and, within a pass, the lowest number.
    std::vector<std::uint64_t> rare_heap_;
    std::vector<std::uint32_t> rare_turns_;
    std::size_t words_ = 0;
    std::vector<std::uint64_t> wheel_;
    std::vector<std::uint32_t> pass_turns_;
};

// The schedule for few distinct weights, which is what operators configure
// (and what one weight change or one slow-starting backend makes of equal
// weights). Backends of the same weight are due in the same passes, so a
// pass is named by the set of weights due in it, and that set repeats with a
// short period (for weights w and W, W / gcd(W, w) passes). Each distinct
// set's turn list is built once, by one scan of the backends, and reused:
// a pass then costs a few operations per distinct weight and nothing per
// turn, where the wheel pays several per turn.
class WeightClassSchedule {
public:
    // Up to this many distinct weights; a pass's set of them is a bitmask.
    static constexpr std::size_t kMaxClasses = 16;
    // Cached turn lists are bounded by this many entries (1 MiB).
    static constexpr std::uint64_t kMaxCachedTurns = 262144;

    // Returns the schedule, or nothing when the weights do not suit it (too
    // many distinct weights, or passes too short or sets too many for the
    // cache to pay off); then the wheel is used.
    static std::optional<WeightClassSchedule> make(std::span<const std::uint32_t> weights,
                                                   std::uint64_t max_weight,
                                                   std::uint32_t ring_size) {
        std::vector<std::uint32_t> class_weights;
        std::vector<std::uint8_t> class_of(weights.size());
        std::uint64_t weight_sum = 0;
        for (std::size_t b = 0; b < weights.size(); ++b) {
            auto known = std::ranges::find(class_weights, weights[b]);
            if (known == class_weights.end()) {
                if (class_weights.size() == kMaxClasses) {
                    return std::nullopt;
                }
                class_weights.push_back(weights[b]);
                known = class_weights.end() - 1;
            }
            class_of[b] = static_cast<std::uint8_t>(known - class_weights.begin());
            weight_sum += weights[b];
        }
        // Through pass p, backends have taken sum_b floor(p * w_b / W) >=
        // p * sum_w / W - n turns, so the table is full by this pass.
        const std::uint64_t backend_count = weights.size();
        const std::uint64_t pass_bound =
            ((ring_size + backend_count) * max_weight + weight_sum - 1) / weight_sum;
        // Short passes: per-pass work would dominate; the wheel does better.
        if (pass_bound * 8 > ring_size) {
            return std::nullopt;
        }
        // Distinct sets: at most 2^k, at most one per pass, at most the period.
        std::uint64_t period = 1;
        for (const std::uint32_t weight : class_weights) {
            const std::uint64_t own = max_weight / std::gcd(max_weight, std::uint64_t{weight});
            period = std::min(std::lcm(period, own), pass_bound + 1);  // no overflow: both small
        }
        const std::uint64_t sets =
            std::min({std::uint64_t{1} << class_weights.size(), pass_bound, period});
        if (sets * backend_count > kMaxCachedTurns) {
            return std::nullopt;
        }
        return WeightClassSchedule(class_weights, std::move(class_of), max_weight);
    }

    std::span<const std::uint32_t> next_pass() {
        ++pass_;
        std::uint32_t due = 0;
        for (std::size_t c = 0; c < next_due_.size(); ++c) {
            if (next_due_[c] == pass_) {
                due |= std::uint32_t{1} << c;
                next_due_[c] += cadence_[c].next_gap();
            }
        }
        auto [entry, added] = list_of_set_.try_emplace(due, lists_.size());
        if (added) {
            const std::size_t offset = turns_.size();
            for (std::uint32_t b = 0; b < class_of_.size(); ++b) {
                if ((due >> class_of_[b]) & 1U) {
                    turns_.push_back(b);
                }
            }
            lists_.push_back({offset, turns_.size() - offset});
        }
        const auto [offset, length] = lists_[entry->second];
        return std::span(turns_).subspan(offset, length);
    }

private:
    WeightClassSchedule(std::span<const std::uint32_t> class_weights,
                        std::vector<std::uint8_t> class_of, std::uint64_t max_weight)
        : class_of_(std::move(class_of)) {
        for (const std::uint64_t weight : class_weights) {
            cadence_.push_back({weight, max_weight / weight, max_weight % weight});
            next_due_.push_back(cadence_.back().next_gap());
        }
    }

    std::vector<std::uint8_t> class_of_;   // per backend: index of its weight
    std::vector<TurnCadence> cadence_;     // per weight
    std::vector<std::uint64_t> next_due_;  // per weight: pass of its next turn
    std::uint64_t pass_ = 0;
    std::unordered_map<std::uint32_t, std::size_t> list_of_set_;  // due set -> lists_ index
    std::vector<std::pair<std::size_t, std::size_t>> lists_;      // offset, length in turns_
    std::vector<std::uint32_t> turns_;
};

// Takes the turns of `schedule`, pass by pass, until every slot is claimed;
// counts each backend's turns, which are its slots, into slot_counts.
template <class ClaimedSet, class Schedule>
void take_scheduled_turns(ClaimedSet claimed, std::span<Walker> walkers, Schedule& schedule,
                          std::uint32_t* table, std::uint32_t ring_size,
                          std::span<std::uint32_t> slot_counts) {
    const std::uint32_t end_game_at = end_game_threshold(ring_size);
    std::uint32_t walk_turns_left = ring_size - end_game_at;
    std::uint32_t end_game_turns_left = end_game_at;
    EndGame end_game(ring_size, walkers.size());
    if (walk_turns_left == 0) {
        end_game.start(claimed, end_game_at);
    }
    PassBatch batch(ClaimedSet::kBatchWalks && walkers.size() >= kBatchMinTurns ? walkers.size()
                                                                                : 0);
    for (;;) {
        const std::span<const std::uint32_t> turns = schedule.next_pass();
        const std::size_t turn_count = turns.size();
        // Walking while the walk phase lasts, then the end game.
        const std::size_t walked = std::min<std::size_t>(turn_count, walk_turns_left);
        if (walked > 0) {
            if (walked == turn_count &&
                batch_pays_off<ClaimedSet>(static_cast<std::uint32_t>(walked),
                                           walk_turns_left + end_game_at, ring_size)) {
                batch.walk(claimed, walkers.data(), turns.data(),
                           static_cast<std::uint32_t>(walked), table, ring_size);
            } else {
                walk_turn_list(claimed, walkers.data(), turns.data(), walked, table, ring_size);
            }
            walk_turns_left -= static_cast<std::uint32_t>(walked);
            if (walk_turns_left == 0) {
                end_game.start(claimed, end_game_at);
            }
        }
        for (std::size_t i = 0; i < walked; ++i) {
            ++slot_counts[turns[i]];
        }
        if (walked < turn_count) {
            end_game.prepare(walkers, turns.subspan(walked));
        }
        for (std::size_t i = walked; i < turn_count; ++i) {
            const std::uint32_t backend = turns[i];
            end_game.turn(walkers[backend], backend, table);
            ++slot_counts[backend];
            if (--end_game_turns_left == 0) {
                return;
            }
        }
    }
}

template <class ClaimedSet>
void fill_weighted(ClaimedSet claimed, std::span<Walker> walkers,
                   std::span<const std::uint32_t> weights, std::uint32_t* table,
                   std::uint32_t ring_size, std::span<std::uint32_t> slot_counts) {
    const std::uint64_t max_weight = *std::ranges::max_element(weights);
    if (auto by_class = WeightClassSchedule::make(weights, max_weight, ring_size)) {
        take_scheduled_turns(claimed, walkers, *by_class, table, ring_size, slot_counts);
        return;
    }
    WheelSchedule wheel(weights, max_weight, ring_size);
    take_scheduled_turns(claimed, walkers, wheel, table, ring_size, slot_counts);
}

// Fills `table` (size M) with sorted backend numbers and `slot_counts` with
// each backend's number of slots.
template <class ClaimedSet>
void fill_table(std::span<Walker> walkers, std::span<const std::uint32_t> weights,
                std::span<std::uint32_t> table, std::span<std::uint32_t> slot_counts) {
    const auto ring_size = static_cast<std::uint32_t>(table.size());
    const auto storage = std::make_unique<std::uint64_t[]>(ClaimedSet::storage_words(ring_size));
    const ClaimedSet claimed{reinterpret_cast<std::uint8_t*>(storage.get())};
    const bool equal_weights =
        std::ranges::all_of(weights, [&](std::uint32_t w) { return w == weights.front(); });
    if (equal_weights) {
        fill_equal_weights(claimed, walkers, table.data(), ring_size);
        const auto backend_count = static_cast<std::uint32_t>(walkers.size());
        for (std::uint32_t b = 0; b < backend_count; ++b) {
            slot_counts[b] = ring_size / backend_count + (b < ring_size % backend_count);
        }
    } else {
        fill_weighted(claimed, walkers, weights, table.data(), ring_size, slot_counts);
    }
}

// The checksum of maglev.h, step 4, over the table in sorted numbers; then,
// if to_input is given, the table rewritten in the caller's numbering. Both
// in one sweep, a cache-sized chunk at a time, so that a large table is read
// from memory once.
std::uint64_t checksum_and_renumber(std::span<std::uint32_t> table,
                                    std::span<const std::uint64_t> key_hashes,
                                    std::uint32_t ring_size, const std::uint32_t* to_input) {
    // "xlb-csum": a fixed seed so that checksums compare across hosts.
    detail::WordDigest header(0x786c622d6373756dULL);
    header.add(ring_size);
    header.add(key_hashes.size());
    for (const std::uint64_t key_hash : key_hashes) {
        header.add(key_hash);
    }
    detail::WordDigest body(header.finish());
    constexpr std::size_t kChunk = 4096;  // even, so pairs never straddle chunks
    for (std::size_t from = 0; from < table.size(); from += kChunk) {
        const std::span<std::uint32_t> chunk =
            table.subspan(from, std::min(kChunk, table.size() - from));
        body.add_u32_array(chunk);
        if (to_input != nullptr) {
            for (std::uint32_t& owner : chunk) {
                owner = to_input[owner];
            }
        }
    }
    return body.finish();
}

// A key's first 16 bytes as two big-endian numbers, zero-padded, so that most
// comparisons in the sort are two integer comparisons instead of a memcmp.
// Equal prefixes fall back to comparing the whole keys.
struct SortKey {
    std::uint64_t high;
    std::uint64_t low;
    std::uint32_t input_index;
};

SortKey make_sort_key(std::string_view key, std::uint32_t input_index) noexcept {
    unsigned char prefix[16] = {};
    std::memcpy(prefix, key.data(), std::min(key.size(), sizeof prefix));
    std::uint64_t high = 0;
    std::uint64_t low = 0;
    for (int i = 0; i < 8; ++i) {
        high = high << 8 | prefix[i];
        low = low << 8 | prefix[8 + i];
    }
    return {high, low, input_index};
}

// "what to use" for a ring size that must be a prime >= minimum.
std::string prime_advice(std::uint32_t minimum) {
    const std::uint32_t smallest = next_prime(minimum);
    std::string advice = "use a prime of at least " + std::to_string(minimum) + ": " +
                         std::to_string(smallest) + " is the smallest";
    if (smallest < kDefaultRingSize) {
        advice += ", " + std::to_string(kDefaultRingSize) + " the default";
    }
    return advice;
}

}  // namespace

std::expected<void, Error> validate_ring_size(std::uint32_t ring_size,
                                              std::size_t active_backends) {
    const std::uint64_t needed = std::uint64_t{kMinSlotsPerBackend} * active_backends;
    if (needed > kMaxRingSize) {
        return std::unexpected(
            Error{ErrorCode::kTooManyBackends,
                  std::to_string(active_backends) + " backends with nonzero weight need at least " +
                      std::to_string(needed) + " slots (" + std::to_string(kMinSlotsPerBackend) +
                      " each), more than the largest ring size " + std::to_string(kMaxRingSize) +
                      "; use at most " + std::to_string(kMaxRingSize / kMinSlotsPerBackend) +
                      " backends with nonzero weight in one VIP"});
    }
    const auto minimum = static_cast<std::uint32_t>(std::max<std::uint64_t>(needed, 2));
    if (ring_size > kMaxRingSize) {
        return std::unexpected(
            Error{ErrorCode::kRingSizeTooLarge,
                  "ring size " + std::to_string(ring_size) + " exceeds the maximum " +
                      std::to_string(kMaxRingSize) + "; use a prime between " +
                      std::to_string(minimum) + " and " + std::to_string(kMaxRingSize) + ", e.g. " +
                      std::to_string(std::max(kDefaultRingSize, next_prime(minimum)))});
    }
    if (!is_prime(ring_size)) {
        return std::unexpected(
            Error{ErrorCode::kRingSizeNotPrime,
                  "ring size " + std::to_string(ring_size) +
                      " is not prime (every backend's walk must visit every slot, which "
                      "needs a prime); " +
                      prime_advice(std::max(ring_size, minimum))});
    }
    if (ring_size < needed) {
        return std::unexpected(
            Error{ErrorCode::kRingSizeTooSmall,
                  "ring size " + std::to_string(ring_size) + " gives fewer than " +
                      std::to_string(kMinSlotsPerBackend) + " slots per backend to " +
                      std::to_string(active_backends) + " backends with nonzero weight; " +
                      prime_advice(minimum)});
    }
    return {};
}

std::expected<Table, Error> build_table(std::span<const Backend> backends,
                                        const BuildOptions& options) {
    const std::uint32_t ring_size = options.ring_size;

    std::uint64_t weight_sum = 0;
    std::size_t active_count = 0;
    for (std::size_t i = 0; i < backends.size(); ++i) {
        if (backends[i].key.empty()) {
            return std::unexpected(Error{
                ErrorCode::kEmptyKey, "backend at input position " + std::to_string(i) +
                                          " has an empty key; use its address "
                                          "(config::maglev_identity()) or an explicit hash key"});
        }
        weight_sum += backends[i].weight;
        active_count += backends[i].weight != 0;
    }
    if (weight_sum > UINT32_MAX) {
        const std::uint64_t divisor = (weight_sum + UINT32_MAX - 1) / UINT32_MAX;
        return std::unexpected(
            Error{ErrorCode::kWeightSumOverflow, "sum of weights " + std::to_string(weight_sum) +
                                                     " does not fit in 32 bits (max " +
                                                     std::to_string(UINT32_MAX) +
                                                     "); use smaller weights, e.g. divide every "
                                                     "weight by " +
                                                     std::to_string(divisor) + " or more"});
    }
    if (auto valid = validate_ring_size(ring_size, active_count); !valid) {
        return std::unexpected(std::move(valid.error()));
    }

    // Sort every backend, weight 0 included, so that duplicates are found
    // whatever their weights. The order is bytewise on the whole key.
    std::vector<SortKey> order(backends.size());
    for (std::uint32_t i = 0; i < order.size(); ++i) {
        order[i] = make_sort_key(backends[i].key, i);
    }
    auto compare_keys = [&](const SortKey& a, const SortKey& b) {
        if (a.high != b.high) {
            return a.high < b.high ? std::strong_ordering::less : std::strong_ordering::greater;
        }
        if (a.low != b.low) {
            return a.low < b.low ? std::strong_ordering::less : std::strong_ordering::greater;
        }
        return std::string_view(backends[a.input_index].key) <=>
               std::string_view(backends[b.input_index].key);
    };
    std::ranges::sort(order,
                      [&](const SortKey& a, const SortKey& b) { return compare_keys(a, b) < 0; });
    for (std::size_t i = 1; i < order.size(); ++i) {
        if (compare_keys(order[i - 1], order[i]) == 0) {
            const auto [first, second] =
                std::minmax(order[i - 1].input_index, order[i].input_index);
            return std::unexpected(
                Error{ErrorCode::kDuplicateKey,
                      "duplicate backend key \"" + backends[first].key + "\" at input positions " +
                          std::to_string(first) + " and " + std::to_string(second) +
                          "; every backend needs a distinct key (its address, or an explicit "
                          "hash key)"});
        }
    }

    Table result;
    result.ring_size = ring_size;
    result.slots_per_backend.assign(backends.size(), 0);

    // Active backends in sorted order; "sorted number" below means the index
    // into these arrays.
    std::vector<std::uint32_t> input_index;
    std::vector<std::uint32_t> weights;
    std::vector<std::uint64_t> key_hashes;
    std::vector<Walker> walkers;
    input_index.reserve(active_count);
    weights.reserve(active_count);
    key_hashes.reserve(active_count);
    walkers.reserve(active_count);
    for (const SortKey& sorted : order) {
        const Backend& backend = backends[sorted.input_index];
        if (backend.weight == 0) {
            continue;
        }
        const std::uint64_t key_hash = siphash24(backend.key, options.seed, kKeyHashK1);
        const Permutation permutation = detail::permutation_from_hash(key_hash, ring_size);
        input_index.push_back(sorted.input_index);
        weights.push_back(backend.weight);
        key_hashes.push_back(key_hash);
        walkers.push_back({permutation.offset, permutation.skip});
    }

    if (active_count == 0) {
        result.checksum = checksum_and_renumber({}, {}, ring_size, nullptr);
        return result;
    }

    result.table.resize(ring_size);
    std::vector<std::uint32_t> sorted_counts(active_count, 0);
    if (ring_size >= kBitmapFromRingSize) {
        fill_table<BitSet>(walkers, weights, result.table, sorted_counts);
    } else {
        fill_table<ByteSet>(walkers, weights, result.table, sorted_counts);
    }

    // From sorted numbers to the caller's indices (unless they are the same).
    bool identity_order = true;
    for (std::uint32_t b = 0; b < active_count; ++b) {
        identity_order = identity_order && input_index[b] == b;
        result.slots_per_backend[input_index[b]] = sorted_counts[b];
    }
    result.checksum = checksum_and_renumber(result.table, key_hashes, ring_size,
                                            identity_order ? nullptr : input_index.data());
    return result;
}

}  // namespace xlb::maglev
