// SPDX-License-Identifier: Apache-2.0
// QUIC-LB connection IDs (draft-ietf-quic-load-balancers; docs/quic.md): the
// format a VIP's QUIC servers write their server id in, and the one the
// balancer's XDP program reads (bpf/lib/quic.h). Pure: no I/O; the AES of
// encrypted configs is OpenSSL's libcrypto.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "xlb/abi.h"
#include "xlb/config/model.h"
#include "xlb/error.h"
#include "xlb/quic/key_file.h"

namespace xlb::quic {

using Cid = std::vector<std::uint8_t>;

// The length of the CIDs a config's servers issue: 1 + server id + nonce.
std::size_t cid_length(const config::QuicConfig& config);

// The CID a server with `server_id` issues under `config` with this nonce
// (nonce.size() == nonce_length): first octet = config id in the top three
// bits and the CID length minus one in the low five (the draft's length
// self-description), then the server id (big-endian, server_id_length
// octets), then the nonce; encrypted: octets 1..16 under AES-128-ECB with
// `key` (required then). Errors: a server id too large for its length, a
// nonce of the wrong length, no key for an encrypted config.
Result<Cid> encode_cid(const config::QuicConfig& config, std::uint64_t server_id,
                       std::span<const std::uint8_t> nonce, const std::optional<Key>& key = {});

// What a CID says under a VIP's configs (keys: the key of each encrypted
// config, by config id; missing: that config decodes as kNoKey).
struct Decoded {
    std::uint8_t config_id = 0;
    std::uint64_t server_id = 0;
    std::vector<std::uint8_t> server_id_octets;
    std::vector<std::uint8_t> nonce;
};
// Why a CID names no server: the data path's fallback reasons
// (enum xlb_quic_fallback) that a CID alone can meet.
enum class DecodeError : std::uint8_t {
    kUnknownConfig = XLB_QUIC_FB_UNKNOWN_CONFIG,
    kBadLength = XLB_QUIC_FB_BAD_LENGTH,
    kNoKey = XLB_QUIC_FB_NO_KEY,
    // server id octets beyond the low 8 are not zero: no backend can own it
    kUnknownServer = XLB_QUIC_FB_UNKNOWN_SERVER,
};
struct KeyOf {
    std::uint8_t config_id = 0;
    Key key{};
};
// `cid`: the CID alone, as a short header carries it at its start (longer
// input is fine: a short header's CID has no length field, the config's
// length is read). Exactly as the XDP program decides.
std::optional<Decoded> decode_cid(std::span<const config::QuicConfig> configs,
                                  std::span<const KeyOf> keys, std::span<const std::uint8_t> cid,
                                  DecodeError* why = nullptr);

// The name of a fallback reason as metrics and JSON spell it: "client_cid",
// "unknown_config", "bad_length", "unknown_server", "dead_backend", "no_key".
const char* fallback_name(std::uint32_t reason);

// A CID as lower-case hex, and back (accepts "0x" prefix, ':' or '-'
// separators; errors name what is wrong).
std::string to_hex(std::span<const std::uint8_t> octets);
Result<std::vector<std::uint8_t>> from_hex(std::string_view text);

// AES-128-ECB of one block (the single-pass form), both ways.
Result<std::array<std::uint8_t, 16>> aes_ecb_encrypt(const Key& key,
                                                     std::span<const std::uint8_t, 16> block);
Result<std::array<std::uint8_t, 16>> aes_ecb_decrypt(const Key& key,
                                                     std::span<const std::uint8_t, 16> block);

}  // namespace xlb::quic
