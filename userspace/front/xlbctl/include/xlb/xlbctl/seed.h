// SPDX-License-Identifier: Apache-2.0
// xlbctl gen-seed: a new hash_seed for the configuration file. Answered by
// xlbctl itself, without the agent: a fleet's seed is made once, before any
// agent runs with it (xlbd refuses a file without one).
#pragma once

#include <cstdint>
#include <string>

#include "xlb/error.h"

namespace xlb::xlbctl {

// 32 bits from the kernel's random generator (getrandom(2)), or what failed.
Result<std::uint32_t> random_seed();

// The line gen-seed prints, as the configuration file takes it:
// "hash_seed: 0x3f6c19a2\n".
std::string seed_line(std::uint32_t seed);

}  // namespace xlb::xlbctl
