// SPDX-License-Identifier: Apache-2.0
// The one digest of text in userspace (FNV-1a, 64 bits): state-file config
// digests, a VIP's table-inputs checksum, per-target seeds. Not for packets
// (flow_hash.h) nor for Maglev tables (maglev's own checksum): it is short,
// stable across hosts and versions, and needs no library.
#pragma once

#include <cstdint>
#include <string_view>

namespace xlb
{

inline constexpr std::uint64_t kFnv1aBasis = 0xcbf29ce484222325ULL;

// `basis` chains digests: fnv1a64(b, fnv1a64(a)) covers a then b.
constexpr std::uint64_t fnv1a64(std::string_view text, std::uint64_t basis = kFnv1aBasis)
{
	std::uint64_t h = basis;
	for (unsigned char c : text) {
		h ^= c;
		h *= 0x100000001b3ULL;
	}
	return h;
}

} // namespace xlb
