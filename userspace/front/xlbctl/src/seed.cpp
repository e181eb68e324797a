// SPDX-License-Identifier: Apache-2.0
#include "xlb/xlbctl/seed.h"

#include <sys/random.h>

#include <cerrno>

#include "xlb/config/model.h"

namespace xlb::xlbctl {

Result<std::uint32_t> random_seed() {
    std::uint32_t seed = 0;
    auto* at = reinterpret_cast<unsigned char*>(&seed);
    std::size_t left = sizeof(seed);
    while (left > 0) {
        // Blocks only until the kernel's generator is seeded, early at boot.
        const ssize_t n = ::getrandom(at, left, 0);
        if (n < 0) {
            if (errno == EINTR) continue;
            return fail(errno, "getrandom");
        }
        at += n;
        left -= static_cast<std::size_t>(n);
    }
    return seed;
}

std::string seed_line(std::uint32_t seed) {
    return "hash_seed: " + config::format_hash_seed(seed) + "\n";
}

}  // namespace xlb::xlbctl
