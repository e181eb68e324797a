// SPDX-License-Identifier: Apache-2.0
// The health history of one backend of one VIP: its last verdict changes,
// oldest first (GET /v1/backend/history, xlbctl backend history). Pure: the
// transitions carry their own times.
//
// A ring of at most `capacity` transitions: once full, each new one replaces
// the oldest. Slots are taken as transitions arrive, not reserved, so a
// backend that never changes costs one slot (its first verdict) whatever the
// capacity. Capacity 0 keeps nothing. Kept in memory only: an agent restart
// starts every history empty.
#pragma once

#include <cstddef>
#include <vector>

#include "xlb/config/model.h"
#include "xlb/health/transition.h"

namespace xlb::health {

class TransitionHistory {
public:
    explicit TransitionHistory(std::size_t capacity = config::kDefaultHealthHistory)
        : capacity_(capacity) {}

    void record(Transition transition);
    // Keeps the newest transitions that fit the new capacity.
    void set_capacity(std::size_t capacity);

    std::size_t capacity() const { return capacity_; }
    std::size_t size() const { return slots_.size(); }
    bool empty() const { return slots_.empty(); }
    // Oldest first.
    std::vector<Transition> entries() const;

private:
    std::vector<Transition> slots_;  // grows to capacity_, then wraps around
    std::size_t capacity_;
    std::size_t oldest_ = 0;  // slot of the oldest transition (0 until full)
};

}  // namespace xlb::health
