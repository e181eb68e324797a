// SPDX-License-Identifier: Apache-2.0
#include "xlb/agent/quic_keys.h"

#include "xlb/quic/key_file.h"

namespace xlb::agent {

QuicKeys read_quic_keys(const std::vector<config::VipSpec>& vips) {
    QuicKeys out;
    for (const config::VipSpec& v : vips)
        for (const config::QuicConfig& q : v.quic) {
            if (q.mode != config::QuicMode::kEncrypted || q.key_file.empty()) continue;
            if (out.keys.contains(q.key_file) || out.errors.contains(q.key_file)) continue;
            auto key = quic::read_key_file(q.key_file);
            if (key)
                out.keys[q.key_file] = *key;
            else
                out.errors[q.key_file] = key.error().message();
        }
    return out;
}

}  // namespace xlb::agent
