// SPDX-License-Identifier: Apache-2.0
#include "xlb/health/history.h"

#include <utility>

namespace xlb::health {

void TransitionHistory::record(Transition transition) {
    if (capacity_ == 0) return;
    if (slots_.size() < capacity_) {
        slots_.push_back(std::move(transition));
        return;
    }
    slots_[oldest_] = std::move(transition);
    oldest_ = (oldest_ + 1) % capacity_;
}

void TransitionHistory::set_capacity(std::size_t capacity) {
    std::vector<Transition> kept = entries();
    if (kept.size() > capacity)
        kept.erase(kept.begin(),
                   kept.begin() + static_cast<std::ptrdiff_t>(kept.size() - capacity));
    slots_ = std::move(kept);
    slots_.shrink_to_fit();
    capacity_ = capacity;
    oldest_ = 0;
}

std::vector<Transition> TransitionHistory::entries() const {
    std::vector<Transition> out;
    out.reserve(slots_.size());
    for (std::size_t i = 0; i < slots_.size(); ++i)
        out.push_back(slots_[(oldest_ + i) % slots_.size()]);
    return out;
}

}  // namespace xlb::health
