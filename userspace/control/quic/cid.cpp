// SPDX-License-Identifier: Apache-2.0
#include "xlb/quic/cid.h"

#include <openssl/evp.h>

#include <algorithm>
#include <memory>

namespace xlb::quic {

namespace {

using config::QuicConfig;
using config::QuicMode;

// The lengths the data path reads: plaintext sid 1..15, nonce 4..18, both
// at most 19 (a QUIC v1 CID is at most 20 octets with the first); encrypted
// only the single-pass form (sid + nonce == 16).
bool lengths_supported(const QuicConfig& c) {
    const unsigned sum = c.server_id_length + c.nonce_length;
    if (c.server_id_length < 1 || c.server_id_length > XLB_QUIC_SERVER_ID_MAX) return false;
    if (c.nonce_length < XLB_QUIC_NONCE_MIN || c.nonce_length > XLB_QUIC_NONCE_MAX) return false;
    if (sum > XLB_QUIC_CID_MAX - 1) return false;
    return c.mode != QuicMode::kEncrypted || sum == XLB_QUIC_SINGLE_PASS;
}

std::string describe(const QuicConfig& c) {
    return "config " + std::to_string(c.config_id) + " (" +
           (c.mode == QuicMode::kEncrypted ? "encrypted" : "plaintext") + ", server_id_length " +
           std::to_string(c.server_id_length) + ", nonce_length " + std::to_string(c.nonce_length) +
           ")";
}

struct CipherCtxFree {
    void operator()(EVP_CIPHER_CTX* ctx) const { EVP_CIPHER_CTX_free(ctx); }
};

Result<std::array<std::uint8_t, 16>> aes_ecb(const Key& key, std::span<const std::uint8_t, 16> in,
                                             bool encrypt) {
    const char* what = encrypt ? "AES-128-ECB encrypt" : "AES-128-ECB decrypt";
    std::unique_ptr<EVP_CIPHER_CTX, CipherCtxFree> ctx(EVP_CIPHER_CTX_new());
    if (!ctx) return fail(ENOMEM, what);
    if (EVP_CipherInit_ex(ctx.get(), EVP_aes_128_ecb(), nullptr, key.data(), nullptr,
                          encrypt ? 1 : 0) != 1)
        return fail(std::string(what) + ": OpenSSL refused the cipher");
    // One block, no padding: the CID is exactly one block.
    EVP_CIPHER_CTX_set_padding(ctx.get(), 0);
    std::array<std::uint8_t, 16> out{};
    int len = 0;
    if (EVP_CipherUpdate(ctx.get(), out.data(), &len, in.data(), static_cast<int>(in.size())) !=
            1 ||
        len != 16)
        return fail(std::string(what) + ": OpenSSL failed on the block");
    int tail = 0;
    if (EVP_CipherFinal_ex(ctx.get(), out.data() + len, &tail) != 1 || tail != 0)
        return fail(std::string(what) + ": OpenSSL failed to finish the block");
    return out;
}

}  // namespace

std::size_t cid_length(const QuicConfig& config) {
    return 1u + config.server_id_length + config.nonce_length;
}

Result<Cid> encode_cid(const QuicConfig& config, std::uint64_t server_id,
                       std::span<const std::uint8_t> nonce, const std::optional<Key>& key) {
    if (config.config_id >= XLB_QUIC_CONFIG_IDS)
        return fail("encode QUIC-LB CID: config id " + std::to_string(config.config_id) +
                    " is not one of 0..6 (7 marks unroutable CIDs)");
    if (!lengths_supported(config))
        return fail("encode QUIC-LB CID: " + describe(config) + " has lengths xlb does not support",
                    "plaintext: server_id_length 1..15, nonce_length 4..18, sum at most 19; "
                    "encrypted: sum exactly 16");
    const std::size_t sid_len = config.server_id_length;
    if (sid_len < 8 && server_id >> (8 * sid_len) != 0)
        return fail("encode QUIC-LB CID: server id " + std::to_string(server_id) +
                    " does not fit in " + std::to_string(sid_len) +
                    (sid_len == 1 ? " octet" : " octets") + " of " + describe(config));
    if (nonce.size() != config.nonce_length)
        return fail("encode QUIC-LB CID: nonce of " + std::to_string(nonce.size()) + " octets, " +
                    describe(config) + " takes " + std::to_string(config.nonce_length));
    if (config.mode == QuicMode::kEncrypted && !key)
        return fail("encode QUIC-LB CID: " + describe(config) + " needs its key");

    Cid cid(cid_length(config));
    // Length self-description: the low five bits say how many octets follow.
    cid[0] = static_cast<std::uint8_t>(config.config_id << 5 | ((cid.size() - 1) & 0x1f));
    for (std::size_t i = 0; i < sid_len; ++i) {
        const std::size_t shift = 8 * (sid_len - 1 - i);
        cid[1 + i] = shift < 64 ? static_cast<std::uint8_t>(server_id >> shift) : 0;
    }
    std::copy(nonce.begin(), nonce.end(), cid.begin() + 1 + static_cast<std::ptrdiff_t>(sid_len));
    if (config.mode == QuicMode::kEncrypted) {
        auto block = aes_ecb_encrypt(*key, std::span<const std::uint8_t, 16>(cid.data() + 1, 16));
        if (!block) return std::unexpected(std::move(block.error()));
        std::copy(block->begin(), block->end(), cid.begin() + 1);
    }
    return cid;
}

std::optional<Decoded> decode_cid(std::span<const QuicConfig> configs, std::span<const KeyOf> keys,
                                  std::span<const std::uint8_t> cid, DecodeError* why) {
    auto refuse = [why](DecodeError reason) -> std::optional<Decoded> {
        if (why) *why = reason;
        return std::nullopt;
    };
    if (cid.empty()) return refuse(DecodeError::kBadLength);
    const std::uint8_t config_id = cid[0] >> 5;
    const auto config = std::find_if(configs.begin(), configs.end(),
                                     [&](const QuicConfig& c) { return c.config_id == config_id; });
    if (config_id == XLB_QUIC_UNROUTABLE || config == configs.end())
        return refuse(DecodeError::kUnknownConfig);
    // The data path never holds a config with other lengths (validation
    // refuses it), so nothing can be read under one.
    if (!lengths_supported(*config) || cid.size() < cid_length(*config))
        return refuse(DecodeError::kBadLength);

    const std::size_t sid_len = config->server_id_length;
    std::array<std::uint8_t, XLB_QUIC_CID_MAX - 1> plain{};
    std::copy_n(cid.begin() + 1, sid_len + config->nonce_length, plain.begin());
    if (config->mode == QuicMode::kEncrypted) {
        const auto key = std::find_if(keys.begin(), keys.end(),
                                      [&](const KeyOf& k) { return k.config_id == config_id; });
        if (key == keys.end()) return refuse(DecodeError::kNoKey);
        auto block = aes_ecb_decrypt(key->key, std::span<const std::uint8_t, 16>(plain.data(), 16));
        if (!block) return refuse(DecodeError::kNoKey);
        std::copy(block->begin(), block->end(), plain.begin());
    }

    Decoded out;
    out.config_id = config_id;
    out.server_id_octets.assign(plain.begin(),
                                plain.begin() + static_cast<std::ptrdiff_t>(sid_len));
    out.nonce.assign(plain.begin() + static_cast<std::ptrdiff_t>(sid_len),
                     plain.begin() + static_cast<std::ptrdiff_t>(sid_len + config->nonce_length));
    // Server ids are 64-bit numbers: octets above the low eight must be zero.
    for (std::size_t i = 0; i < sid_len; ++i) {
        if (sid_len - i > 8) {
            if (plain[i] != 0) return refuse(DecodeError::kUnknownServer);
            continue;
        }
        out.server_id = out.server_id << 8 | plain[i];
    }
    return out;
}

const char* fallback_name(std::uint32_t reason) {
    switch (reason) {
        case XLB_QUIC_FB_CLIENT_CID: return "client_cid";
        case XLB_QUIC_FB_UNKNOWN_CONFIG: return "unknown_config";
        case XLB_QUIC_FB_BAD_LENGTH: return "bad_length";
        case XLB_QUIC_FB_UNKNOWN_SERVER: return "unknown_server";
        case XLB_QUIC_FB_DEAD_BACKEND: return "dead_backend";
        case XLB_QUIC_FB_NO_KEY: return "no_key";
        default: return "unknown";
    }
}

std::string to_hex(std::span<const std::uint8_t> octets) {
    static constexpr char kDigits[] = "0123456789abcdef";
    std::string out;
    out.reserve(2 * octets.size());
    for (const std::uint8_t o : octets) {
        out += kDigits[o >> 4];
        out += kDigits[o & 0xf];
    }
    return out;
}

Result<std::vector<std::uint8_t>> from_hex(std::string_view text) {
    const std::string_view original = text;
    if (text.starts_with("0x") || text.starts_with("0X")) text.remove_prefix(2);
    std::vector<std::uint8_t> out;
    int high = -1;
    bool after_separator = false;
    for (std::size_t i = 0; i < text.size(); ++i) {
        const char c = text[i];
        int digit = -1;
        if (c >= '0' && c <= '9')
            digit = c - '0';
        else if (c >= 'a' && c <= 'f')
            digit = c - 'a' + 10;
        else if (c >= 'A' && c <= 'F')
            digit = c - 'A' + 10;
        if (digit < 0) {
            // Separators only between whole octets ("0a:1b", not "0:a1b").
            if ((c == ':' || c == '-') && high < 0 && !out.empty() && !after_separator &&
                i + 1 < text.size()) {
                after_separator = true;
                continue;
            }
            return fail(
                "read hex \"" + std::string(original) + "\": '" + std::string(1, c) +
                "' at position " + std::to_string(i + (original.size() - text.size())) +
                (c == ':' || c == '-' ? " is not between two octets" : " is not a hex digit"));
        }
        after_separator = false;
        if (high < 0) {
            high = digit;
        } else {
            out.push_back(static_cast<std::uint8_t>(high << 4 | digit));
            high = -1;
        }
    }
    if (high >= 0)
        return fail("read hex \"" + std::string(original) + "\": odd number of hex digits",
                    "each octet is two digits");
    if (out.empty()) return fail("read hex \"" + std::string(original) + "\": no hex digits");
    return out;
}

Result<std::array<std::uint8_t, 16>> aes_ecb_encrypt(const Key& key,
                                                     std::span<const std::uint8_t, 16> block) {
    return aes_ecb(key, block, true);
}

Result<std::array<std::uint8_t, 16>> aes_ecb_decrypt(const Key& key,
                                                     std::span<const std::uint8_t, 16> block) {
    return aes_ecb(key, block, false);
}

}  // namespace xlb::quic
