// SPDX-License-Identifier: Apache-2.0
// xlbctl quic cid|decode (docs/quic.md): a VIP's QUIC-LB configs as the
// agent sends them (GET /v1/vip), turned into a sample CID or a CID's
// reading. The agent never sends a key: an encrypted config's key is read
// here from its key_file (or --key-file).
#pragma once

#include <expected>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "xlb/xlbctl/command.h"
#include "xlb/xlbctl/format.h"

namespace xlb::xlbctl {

struct QuicAnswer {
    nlohmann::json document;  // --json
    std::string text;         // the human output
    std::vector<std::string> warnings;
};

// `vip`: the GET /v1/vip reply. The error says what is wrong (no quic
// config, an unknown --config-id, a key that cannot be read, ...). Throws
// json::exception on a reply without a field it needs.
std::expected<QuicAnswer, std::string> quic_answer(const Command& command,
                                                   const nlohmann::json& vip, const Style& style);

}  // namespace xlb::xlbctl
