// SPDX-License-Identifier: Apache-2.0
//
// Prime helpers: Maglev ring sizes must be prime.

#include <cstdint>

#include "xlb/maglev/maglev.h"

namespace xlb::maglev {

bool is_prime(std::uint32_t n) noexcept {
    if (n < 2) {
        return false;
    }
    if (n % 2 == 0) {
        return n == 2;
    }
    for (std::uint32_t d = 3; std::uint64_t{d} * d <= n; d += 2) {
        if (n % d == 0) {
            return false;
        }
    }
    return true;
}

std::uint32_t next_prime(std::uint32_t n) noexcept {
    // 4294967291 is the largest prime below 2^32; callers stay far below it.
    while (!is_prime(n)) {
        ++n;
    }
    return n;
}

}  // namespace xlb::maglev
