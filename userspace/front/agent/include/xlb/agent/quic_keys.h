// SPDX-License-Identifier: Apache-2.0
// The keys of encrypted QUIC configs (docs/quic.md), read by the agent where
// it loads or changes its VIPs and given to the reconciler, which reads no
// files.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "xlb/config/model.h"
#include "xlb/datapath/setup.h"

namespace xlb::agent {

struct QuicKeys {
    std::map<std::string, datapath::QuicKey> keys;  // by key file
    std::map<std::string, std::string> errors;      // by key file: why it was not read
};

// Reads each key file the VIPs' encrypted configs name, once per file
// (xlb::quic::read_key_file: root-only, 16 raw octets or 32 hex digits).
QuicKeys read_quic_keys(const std::vector<config::VipSpec>& vips);

}  // namespace xlb::agent
