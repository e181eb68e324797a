// SPDX-License-Identifier: Apache-2.0
// The QUIC-LB CID codec (xlb/quic/cid.h) and the key-file reader
// (xlb/quic/key_file.h): round trips over every supported length, each
// reason a CID names no server, the draft's test vectors and FIPS-197.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>

#include "xlb/quic/cid.h"
#include "xlb/quic/key_file.h"

namespace xlb::quic {
namespace {

using config::QuicConfig;
using config::QuicMode;

std::vector<std::uint8_t> hex(std::string_view text) {
    auto out = from_hex(text);
    EXPECT_TRUE(out) << text;
    return out.value_or(std::vector<std::uint8_t>{});
}

Key key_of(std::string_view text) {
    const auto octets = hex(text);
    Key key{};
    EXPECT_EQ(octets.size(), key.size());
    std::copy_n(octets.begin(), std::min(octets.size(), key.size()), key.begin());
    return key;
}

QuicConfig make(std::uint8_t id, std::uint8_t sid, std::uint8_t nonce,
                QuicMode mode = QuicMode::kPlaintext) {
    QuicConfig c;
    c.config_id = id;
    c.server_id_length = sid;
    c.nonce_length = nonce;
    c.mode = mode;
    return c;
}

std::uint64_t max_server_id(unsigned sid_len) {
    return sid_len >= 8 ? UINT64_MAX : (std::uint64_t{1} << (8 * sid_len)) - 1;
}

TEST(QuicAes, Fips197AppendixC1) {
    const Key key = key_of("000102030405060708090a0b0c0d0e0f");
    const auto plain = hex("00112233445566778899aabbccddeeff");
    auto cipher = aes_ecb_encrypt(key, std::span<const std::uint8_t, 16>(plain.data(), 16));
    ASSERT_TRUE(cipher) << cipher.error();
    EXPECT_EQ(to_hex(*cipher), "69c4e0d86a7b0430d8cdb78070b4c55a");
    auto back = aes_ecb_decrypt(key, std::span<const std::uint8_t, 16>(cipher->data(), 16));
    ASSERT_TRUE(back) << back.error();
    EXPECT_EQ(to_hex(*back), "00112233445566778899aabbccddeeff");
}

// draft-ietf-quic-load-balancers, "Load Balancer Test Vectors": every
// vector's server encodes the CID length in the first octet. The draft's
// second plaintext vector has a nonce of nine hex digits (a typo in the
// draft), and its encrypted vectors other than the 16-octet one use the
// four-pass form xlb does not support.
TEST(QuicCid, DraftPlaintextVector) {
    const QuicConfig c = make(0, 3, 4);
    auto cid = encode_cid(c, 0xc4605e, hex("4504cc4f"));
    ASSERT_TRUE(cid) << cid.error();
    EXPECT_EQ(to_hex(*cid), "07c4605e4504cc4f");
    const auto decoded = decode_cid(std::span(&c, 1), {}, hex("07c4605e4504cc4f"));
    ASSERT_TRUE(decoded);
    EXPECT_EQ(decoded->config_id, 0);
    EXPECT_EQ(decoded->server_id, 0xc4605eu);
    EXPECT_EQ(to_hex(decoded->server_id_octets), "c4605e");
    EXPECT_EQ(to_hex(decoded->nonce), "4504cc4f");
}

TEST(QuicCid, DraftSinglePassEncryptedVector) {
    const Key key = key_of("8f95f09245765f80256934e50c66207f");
    const QuicConfig c = make(2, 8, 8, QuicMode::kEncrypted);
    auto cid = encode_cid(c, 0xed793a51d49b8f5f, hex("ee080dbf48c0d1e5"), key);
    ASSERT_TRUE(cid) << cid.error();
    EXPECT_EQ(to_hex(*cid), "504dd2d05a7b0de9b2b9907afb5ecf8cc3");
    const KeyOf keys[] = {{2, key}};
    const auto decoded =
        decode_cid(std::span(&c, 1), keys, hex("504dd2d05a7b0de9b2b9907afb5ecf8cc3"));
    ASSERT_TRUE(decoded);
    EXPECT_EQ(decoded->config_id, 2);
    EXPECT_EQ(decoded->server_id, 0xed793a51d49b8f5fu);
    EXPECT_EQ(to_hex(decoded->nonce), "ee080dbf48c0d1e5");
}

// Every supported (sid, nonce) pair, each config id, the largest server id
// the length holds and a random nonce: decode gives back what was encoded.
TEST(QuicCid, RoundTripsEveryPlaintextLength) {
    std::mt19937 rng(7);
    int pairs = 0;
    for (std::uint8_t sid = 1; sid <= 15; ++sid) {
        for (std::uint8_t nonce_len = 4; nonce_len <= 18 && sid + nonce_len <= 19; ++nonce_len) {
            ++pairs;
            for (std::uint8_t id = 0; id <= 6; ++id) {
                const QuicConfig c = make(id, sid, nonce_len);
                std::vector<std::uint8_t> nonce(nonce_len);
                for (auto& o : nonce) o = static_cast<std::uint8_t>(rng());
                const std::uint64_t random_id = std::uint64_t{rng()} << 32 | rng();
                for (const std::uint64_t server_id :
                     {std::uint64_t{0}, std::uint64_t{1}, max_server_id(sid),
                      random_id & max_server_id(sid)}) {
                    auto cid = encode_cid(c, server_id, nonce);
                    ASSERT_TRUE(cid) << cid.error();
                    ASSERT_EQ(cid->size(), cid_length(c));
                    EXPECT_EQ((*cid)[0] >> 5, id);
                    EXPECT_EQ((*cid)[0] & 0x1f, cid->size() - 1);
                    const auto decoded = decode_cid(std::span(&c, 1), {}, *cid);
                    ASSERT_TRUE(decoded) << int(sid) << "+" << int(nonce_len);
                    EXPECT_EQ(decoded->config_id, id);
                    EXPECT_EQ(decoded->server_id, server_id);
                    EXPECT_EQ(decoded->server_id_octets.size(), sid);
                    EXPECT_EQ(decoded->nonce, nonce);
                }
            }
        }
    }
    // sid 1..15 with nonce 4..min(18, 19 - sid): 15 + 14 + ... + 1.
    EXPECT_EQ(pairs, 120);
}

TEST(QuicCid, RoundTripsEveryEncryptedLength) {
    std::mt19937 rng(11);
    const Key key = key_of("8f95f09245765f80256934e50c66207f");
    for (std::uint8_t sid = 1; sid <= 12; ++sid) {
        const auto nonce_len = static_cast<std::uint8_t>(16 - sid);
        for (std::uint8_t id = 0; id <= 6; ++id) {
            const QuicConfig c = make(id, sid, nonce_len, QuicMode::kEncrypted);
            const KeyOf keys[] = {{id, key}};
            std::vector<std::uint8_t> nonce(nonce_len);
            for (auto& o : nonce) o = static_cast<std::uint8_t>(rng());
            const std::uint64_t server_id = max_server_id(sid) - id;
            auto cid = encode_cid(c, server_id, nonce, key);
            ASSERT_TRUE(cid) << cid.error();
            ASSERT_EQ(cid->size(), 17u);
            EXPECT_EQ((*cid)[0], id << 5 | 16);
            // Encrypted: the server id does not show in the CID.
            auto plain = encode_cid(make(id, sid, nonce_len), server_id, nonce);
            ASSERT_TRUE(plain);
            EXPECT_NE(*cid, *plain);
            const auto decoded = decode_cid(std::span(&c, 1), keys, *cid);
            ASSERT_TRUE(decoded) << int(sid);
            EXPECT_EQ(decoded->server_id, server_id);
            EXPECT_EQ(decoded->nonce, nonce);
        }
    }
}

TEST(QuicCid, PicksTheConfigByTheFirstOctetAndReadsOnlyItsLength) {
    // A rotation: config 1 (plaintext 2+6) and config 4 (encrypted 4+12).
    const Key key = key_of("000102030405060708090a0b0c0d0e0f");
    const QuicConfig configs[] = {make(1, 2, 6), make(4, 4, 12, QuicMode::kEncrypted)};
    const KeyOf keys[] = {{4, key}};
    const std::vector<std::uint8_t> nonce6(6, 0xab), nonce12(12, 0xcd);
    auto old_cid = encode_cid(configs[0], 0x1234, nonce6);
    auto new_cid = encode_cid(configs[1], 0x89abcdef, nonce12, key);
    ASSERT_TRUE(old_cid && new_cid);
    // A short header carries more after the CID: it is not read.
    old_cid->insert(old_cid->end(), {0xff, 0xff, 0xff});
    const auto a = decode_cid(configs, keys, *old_cid);
    const auto b = decode_cid(configs, keys, *new_cid);
    ASSERT_TRUE(a && b);
    EXPECT_EQ(a->config_id, 1);
    EXPECT_EQ(a->server_id, 0x1234u);
    EXPECT_EQ(b->config_id, 4);
    EXPECT_EQ(b->server_id, 0x89abcdefu);
}

TEST(QuicCid, DecodeErrors) {
    const Key key = key_of("000102030405060708090a0b0c0d0e0f");
    const QuicConfig configs[] = {make(0, 2, 6), make(3, 8, 8, QuicMode::kEncrypted),
                                  make(5, 10, 6)};
    const KeyOf keys[] = {{3, key}};
    DecodeError why{};

    // A config id the VIP does not have, and 7 (unroutable) always.
    auto cid = encode_cid(make(1, 2, 6), 5, std::vector<std::uint8_t>(6, 1));
    ASSERT_TRUE(cid);
    EXPECT_FALSE(decode_cid(configs, keys, *cid, &why));
    EXPECT_EQ(why, DecodeError::kUnknownConfig);
    const QuicConfig seven = make(0, 2, 6);
    std::vector<std::uint8_t> unroutable(9, 0);
    unroutable[0] = 0xe8;
    EXPECT_FALSE(decode_cid(std::span(&seven, 1), {}, unroutable, &why));
    EXPECT_EQ(why, DecodeError::kUnknownConfig);

    // Shorter than the config's CID, and nothing at all.
    cid = encode_cid(configs[0], 5, std::vector<std::uint8_t>(6, 1));
    ASSERT_TRUE(cid);
    EXPECT_TRUE(decode_cid(configs, keys, *cid));
    cid->pop_back();
    why = {};
    EXPECT_FALSE(decode_cid(configs, keys, *cid, &why));
    EXPECT_EQ(why, DecodeError::kBadLength);
    why = {};
    EXPECT_FALSE(decode_cid(configs, keys, std::span<const std::uint8_t>(), &why));
    EXPECT_EQ(why, DecodeError::kBadLength);

    // An encrypted config without its key.
    cid = encode_cid(configs[1], 77, std::vector<std::uint8_t>(8, 2), key);
    ASSERT_TRUE(cid);
    EXPECT_TRUE(decode_cid(configs, keys, *cid));
    EXPECT_FALSE(decode_cid(configs, {}, *cid, &why));
    EXPECT_EQ(why, DecodeError::kNoKey);
    const KeyOf other_config_key[] = {{0, key}};
    why = {};
    EXPECT_FALSE(decode_cid(configs, other_config_key, *cid, &why));
    EXPECT_EQ(why, DecodeError::kNoKey);

    // A 10-octet server id above 2^64: no backend can own it.
    cid = encode_cid(configs[2], UINT64_MAX, std::vector<std::uint8_t>(6, 3));
    ASSERT_TRUE(cid);
    EXPECT_EQ(decode_cid(configs, keys, *cid)->server_id, UINT64_MAX);
    (*cid)[2] = 1;  // the second-highest octet
    why = {};
    EXPECT_FALSE(decode_cid(configs, keys, *cid, &why));
    EXPECT_EQ(why, DecodeError::kUnknownServer);

    // Reasons keep the data path's numbers and names.
    EXPECT_STREQ(fallback_name(static_cast<std::uint32_t>(DecodeError::kUnknownConfig)),
                 "unknown_config");
    EXPECT_STREQ(fallback_name(static_cast<std::uint32_t>(DecodeError::kBadLength)), "bad_length");
    EXPECT_STREQ(fallback_name(static_cast<std::uint32_t>(DecodeError::kNoKey)), "no_key");
    EXPECT_STREQ(fallback_name(static_cast<std::uint32_t>(DecodeError::kUnknownServer)),
                 "unknown_server");
    EXPECT_STREQ(fallback_name(XLB_QUIC_FB_CLIENT_CID), "client_cid");
    EXPECT_STREQ(fallback_name(XLB_QUIC_FB_DEAD_BACKEND), "dead_backend");
    EXPECT_STREQ(fallback_name(XLB_QUIC_FALLBACKS), "unknown");
}

TEST(QuicCid, EncodeErrors) {
    const std::vector<std::uint8_t> nonce6(6, 0);
    auto expect_error = [](const Result<Cid>& r, std::string_view part) {
        ASSERT_FALSE(r);
        EXPECT_NE(r.error().message().find(part), std::string::npos) << r.error().message();
    };
    expect_error(encode_cid(make(0, 2, 6), 0x10000, nonce6),
                 "server id 65536 does not fit in 2 octets");
    EXPECT_TRUE(encode_cid(make(0, 2, 6), 0xffff, nonce6));
    expect_error(encode_cid(make(0, 2, 6), 1, std::vector<std::uint8_t>(5, 0)),
                 "nonce of 5 octets");
    expect_error(encode_cid(make(7, 2, 6), 1, nonce6), "config id 7");
    expect_error(
        encode_cid(make(0, 8, 8, QuicMode::kEncrypted), 1, std::vector<std::uint8_t>(8, 0)),
        "needs its key");
    expect_error(encode_cid(make(0, 2, 6, QuicMode::kEncrypted), 1, nonce6, Key{}),
                 "does not support");
    expect_error(encode_cid(make(0, 2, 3), 1, std::vector<std::uint8_t>(3, 0)), "does not support");
    expect_error(encode_cid(make(0, 0, 6), 0, nonce6), "does not support");
    expect_error(encode_cid(make(0, 16, 4), 1, std::vector<std::uint8_t>(4, 0)),
                 "does not support");
    expect_error(encode_cid(make(0, 2, 18), 1, std::vector<std::uint8_t>(18, 0)),
                 "does not support");
}

TEST(QuicHex, ReadsSeparatorsAndPrefixAndWritesLowerCase) {
    EXPECT_EQ(to_hex(hex("0x0A1b")), "0a1b");
    EXPECT_EQ(to_hex(hex("0a:1b:ff")), "0a1bff");
    EXPECT_EQ(to_hex(hex("0A-1B")), "0a1b");
    EXPECT_EQ(to_hex(std::vector<std::uint8_t>{}), "");
}

TEST(QuicHex, Errors) {
    auto expect_error = [](std::string_view text, std::string_view part) {
        const auto r = from_hex(text);
        ASSERT_FALSE(r) << text;
        EXPECT_NE(r.error().message().find(part), std::string::npos) << r.error().message();
    };
    expect_error("0a1", "odd number of hex digits");
    expect_error("0a1g", "'g' at position 3 is not a hex digit");
    expect_error("0x0a 1b", "' ' at position 4 is not a hex digit");
    expect_error("", "no hex digits");
    expect_error("0x", "no hex digits");
    expect_error(":0a", "is not between two octets");
    expect_error("0a:", "is not between two octets");
    expect_error("0:a1", "is not between two octets");
    expect_error("0a::1b", "is not between two octets");
}

// Key files in a fresh directory, owned by root when the test runs as root
// (the reader refuses others).
class QuicKeyFile : public ::testing::Test {
protected:
    void SetUp() override {
        char tmpl[] = "/tmp/xlb-quic-key-XXXXXX";
        ASSERT_NE(::mkdtemp(tmpl), nullptr);
        dir_ = tmpl;
    }
    void TearDown() override { std::filesystem::remove_all(dir_); }

    std::string write(const std::string& name, std::string_view content, mode_t mode = 0600) {
        const std::string path = dir_ + "/" + name;
        std::ofstream(path, std::ios::binary) << content;
        EXPECT_EQ(::chmod(path.c_str(), mode), 0);
        return path;
    }
    static void expect_error(const std::string& path, std::string_view part) {
        const auto r = read_key_file(path);
        ASSERT_FALSE(r) << path;
        EXPECT_NE(r.error().message().find(part), std::string::npos) << r.error().message();
        EXPECT_NE(r.error().message().find(path), std::string::npos) << r.error().message();
    }

    std::string dir_;
};

TEST_F(QuicKeyFile, ReadsRawAndHexForms) {
    if (::geteuid() != 0) GTEST_SKIP() << "key files must be owned by root";
    const std::string raw("\x8f\x95\xf0\x92\x45\x76\x5f\x80\x25\x69\x34\xe5\x0c\x66\x20\x0a", 16);
    const std::string expected = "8f95f09245765f80256934e50c66200a";
    for (const auto& [name, content, mode] :
         {std::tuple<std::string, std::string, mode_t>{"raw", raw, 0600},
          {"hex", expected, 0400},
          {"hex-newline", expected + "\n", 0600},
          {"upper", "8F95F09245765F80256934E50C66200A\n", 0600}}) {
        const auto key = read_key_file(write(name, content, mode));
        ASSERT_TRUE(key) << name << ": " << key.error();
        EXPECT_EQ(to_hex(*key), expected) << name;
    }
}

TEST_F(QuicKeyFile, RefusesLooseModesOwnersAndShapes) {
    const std::string good = "000102030405060708090a0b0c0d0e0f";
    expect_error(dir_ + "/missing", "No such file or directory");
    expect_error(dir_, "not a regular file");
    const std::string fifo = dir_ + "/fifo";
    ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
    expect_error(fifo, "not a regular file");

    const std::string other = write("other", good);
    ASSERT_EQ(::chown(other.c_str(), 65534, 65534) == 0, ::geteuid() == 0);
    expect_error(other, "not owned by root");

    if (::geteuid() != 0) GTEST_SKIP() << "the checks below pass the owner check only as root";
    expect_error(write("group", good, 0640), "chmod 600");
    expect_error(write("others", good, 0604), "mode 0604");
    expect_error(write("short", std::string(15, 'k')), "holds 15 octets");
    expect_error(write("raw-newline", std::string(16, 'k') + "\n"), "holds 17 octets");
    expect_error(write("long", good + "\n\n"), "holds 34 octets");
    expect_error(write("longer", good + good), "holds 64 octets");
    expect_error(write("crlf", good + "\r"), "the last not a newline");
    expect_error(write("not-hex", "000102030405060708090a0b0c0d0e0z"), "offset 31");
    expect_error(write("empty", ""), "holds 0 octets");
}

}  // namespace
}  // namespace xlb::quic
