// SPDX-License-Identifier: Apache-2.0
// The key of an encrypted QUIC-LB config (docs/quic.md, "Keys"): a file only
// root can read, holding the 16 octets raw or as 32 hex digits. Read by the
// agent when it loads a config and by xlbctl when it encodes or decodes a
// CID; nothing else ever holds the key.
#pragma once

#include <array>
#include <cstdint>
#include <string>

#include "xlb/error.h"

namespace xlb::quic {

using Key = std::array<std::uint8_t, 16>;

// The key in `path`: 16 raw octets, or 32 hex digits with an optional
// trailing newline. Refused, with the file named and the fix said: not a
// regular file, not owned by root (uid 0), any group or other permission bit
// set ("chmod 600 FILE"), any other size or content.
Result<Key> read_key_file(const std::string& path);

}  // namespace xlb::quic
