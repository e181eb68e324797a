// SPDX-License-Identifier: Apache-2.0
// QUIC connection-ID routing on the balancer (lib/quic.h, docs/quic.md). A
// packet whose CID a server issued must reach that server's backend from any
// client address and port, whole and encapsulated as the ring's choice would
// be; every way a packet falls back to its 5-tuple is counted by its reason
// and balanced by the ring. Encrypted CIDs are made here with OpenSSL, so the
// program's AES (the kernel's, through the BPF crypto kfuncs) is checked
// against an independent implementation.
#include <gtest/gtest.h>
#include <openssl/evp.h>

#include <algorithm>
#include <array>
#include <cstring>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "lb_fixture.h"
#include "testbed.h"
#include "xlb/datapath/setup.h"
#include "xlb/kernel/bpf_data_plane.h"

namespace xlb::test {
namespace {

constexpr std::uint32_t kVipId = 6;
constexpr std::uint16_t kQuicPort = 443;
// Plaintext config 0: 2 octets of server id, 6 of nonce (CIDs of 9 octets).
constexpr std::uint8_t kPlainConfig = 0;
constexpr std::uint8_t kPlainSid = 2, kPlainNonce = 6;
// Encrypted config 1: 3 + 13 octets (the single-pass form), CIDs of 17.
constexpr std::uint8_t kSealedConfig = 1;
constexpr std::uint8_t kSealedSid = 3, kSealedNonce = 13;
// FIPS-197 appendix C.1's key.
constexpr std::array<std::uint8_t, 16> kKey = {0x00, 0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07,
                                               0x08, 0x09, 0x0a, 0x0b, 0x0c, 0x0d, 0x0e, 0x0f};

std::array<std::uint8_t, 16> aes_ecb(const std::array<std::uint8_t, 16>& key,
                                     const std::array<std::uint8_t, 16>& block, bool encrypt) {
    std::array<std::uint8_t, 16> out{};
    EVP_CIPHER_CTX* ctx = EVP_CIPHER_CTX_new();
    int len = 0;
    EXPECT_TRUE(ctx);
    EXPECT_EQ(EVP_CipherInit_ex(ctx, EVP_aes_128_ecb(), nullptr, key.data(), nullptr, encrypt), 1);
    EVP_CIPHER_CTX_set_padding(ctx, 0);
    EXPECT_EQ(EVP_CipherUpdate(ctx, out.data(), &len, block.data(), 16), 1);
    EXPECT_EQ(len, 16);
    EVP_CIPHER_CTX_free(ctx);
    return out;
}

// A CID in the QUIC-LB format: config id in the first octet's top bits
// (its low five: the length minus one), then server id, then nonce.
Bytes plain_cid(std::uint8_t config, std::uint64_t server_id, std::uint8_t sid_len,
                std::uint8_t nonce_len, std::uint8_t nonce_seed = 0x5a) {
    Bytes cid{static_cast<std::uint8_t>(config << 5 | ((sid_len + nonce_len) & 0x1f))};
    for (int i = sid_len - 1; i >= 0; --i)
        cid.push_back(static_cast<std::uint8_t>(i < 8 ? server_id >> (8 * i) : 0));
    for (std::uint8_t i = 0; i < nonce_len; ++i)
        cid.push_back(static_cast<std::uint8_t>(nonce_seed + 17 * i));
    return cid;
}
Bytes sealed_cid(std::uint64_t server_id, const std::array<std::uint8_t, 16>& key,
                 std::uint8_t nonce_seed = 0x33) {
    Bytes cid = plain_cid(kSealedConfig, server_id, kSealedSid, kSealedNonce, nonce_seed);
    std::array<std::uint8_t, 16> block{};
    std::memcpy(block.data(), &cid[1], 16);
    const auto sealed = aes_ecb(key, block, true);
    std::memcpy(&cid[1], sealed.data(), 16);
    return cid;
}

// A 1-RTT packet: the header octet, the CID, a packet number and enough
// protected bytes to be a real one.
Bytes short_header(const Bytes& cid, std::size_t body = 24) {
    Bytes p{0x41};
    p.insert(p.end(), cid.begin(), cid.end());
    for (std::size_t i = 0; i < body; ++i) p.push_back(static_cast<std::uint8_t>(0xa0 + i));
    return p;
}
// A long-header packet of `version` and type bits `type` to `dcid`.
Bytes long_header(std::uint32_t version, std::uint8_t type, const Bytes& dcid) {
    Bytes p{static_cast<std::uint8_t>(0xc0 | type << 4)};
    append_be32(p, version);
    p.push_back(static_cast<std::uint8_t>(dcid.size()));
    p.insert(p.end(), dcid.begin(), dcid.end());
    p.push_back(8);  // SCID length
    for (int i = 0; i < 8; ++i) p.push_back(static_cast<std::uint8_t>(0x70 + i));
    for (int i = 0; i < 40; ++i) p.push_back(static_cast<std::uint8_t>(i));
    return p;
}

constexpr std::uint32_t kV1 = 0x00000001, kV2 = 0x6b3343cf;

class QuicTest : public LbTest {
protected:
    void SetUp() override {
        LbTest::SetUp();
        for (std::uint32_t i = 0; i < 3; ++i) add_backend(10 + i, kBackendV4[i]);
        for (std::uint32_t i = 0; i < 3; ++i) add_backend(20 + i, kBackendV6[i]);
    }

    // A UDP VIP with QUIC routing: plaintext config 0, and encrypted config
    // 1 when `sealed`; server ids 1..3 owned by the family's backends.
    void vip(bool v6, bool sealed = false, std::uint32_t flags = XLB_VIP_F_QUIC) {
        add_vip(v6 ? kVipV6 : kVipV4, kQuicPort, kProtoUdp, kVipId, flags);
        base_ = v6 ? 20 : 10;
        ring_ = publish_maglev(kVipId, {{base_}, {base_ + 1}, {base_ + 2}});
        put_config(kPlainConfig, {kPlainSid, kPlainNonce, XLB_QUIC_MODE_PLAINTEXT, {}});
        if (sealed) {
            put_config(kSealedConfig, {kSealedSid, kSealedNonce, XLB_QUIC_MODE_ENCRYPTED, {}});
            auto ok = lb().install_quic_key(slot(kSealedConfig), kKey);
            ASSERT_TRUE(ok) << ok.error().message();
        }
        for (std::uint32_t s = 1; s <= 3; ++s) own(s, base_ + s - 1);
    }
    static std::uint32_t slot(std::uint8_t config) {
        return kVipId * XLB_QUIC_CONFIG_SLOTS + config;
    }
    void put_config(std::uint8_t config, const xlb_quic_config& value) {
        ASSERT_TRUE(lb().quic_configs().put(slot(config), value));
    }
    void own(std::uint64_t server_id, std::uint32_t backend_id) {
        auto ok = lb().quic_servers().put(xlb_quic_server_key{kVipId, 0, server_id}, backend_id);
        ASSERT_TRUE(ok) << ok.error().message();
    }

    static Flow client(bool v6, std::uint16_t port, int host = 0) {
        net::IpAddress src = v6 ? kClientV6 : kClientV4;
        src.bytes[v6 ? 15 : 3] = static_cast<std::uint8_t>(src.bytes[v6 ? 15 : 3] + host);
        return Flow{src, v6 ? kVipV6 : kVipV4, port, kQuicPort, kProtoUdp};
    }

    xlb_vip_quic_stats quic_stats() {
        auto per_cpu = lb().vip_quic().get_per_cpu(kVipId);
        EXPECT_TRUE(per_cpu);
        return per_cpu ? datapath::sum_per_cpu(*per_cpu) : xlb_vip_quic_stats{};
    }

    // Sends the packet from `f` and expects it, whole, at backend `to` with
    // `outcome`.
    void expect_at(const Flow& f, const Bytes& payload, std::uint32_t to, xlb_outcome outcome) {
        FrameOptions opt;
        opt.payload = payload;
        const Bytes input = make_frame(f, opt);
        expect_outcome(input, XDP_TX, outcome,
                       expected_encap(input, backend_addr_.at(to), flow_key(f)));
    }
    // Expects the CID to route to `to` from many clients (addresses and
    // ports), and each to be counted as routed.
    void expect_routed(bool v6, const Bytes& payload, std::uint32_t to) {
        const auto before = quic_stats();
        for (int host = 0; host < 4; ++host)
            for (std::uint16_t port : {1024, 40000, 65535}) {
                SCOPED_TRACE("client host +" + std::to_string(host) + " port " +
                             std::to_string(port));
                expect_at(client(v6, port, host), payload, to, XLB_OUT_TX_QUIC_CID);
            }
        EXPECT_EQ(quic_stats().routed - before.routed, 12u);
    }
    // Expects the ring's choice for the flow, counted under `reason`.
    void expect_fallback(bool v6, const Bytes& payload, xlb_quic_fallback reason,
                         std::uint16_t port = 40000) {
        const auto before = quic_stats();
        const Flow f = client(v6, port);
        expect_at(f, payload, expected_backend(ring_, flow_key(f)), XLB_OUT_TX);
        const auto after = quic_stats();
        EXPECT_EQ(after.routed, before.routed);
        for (int r = 0; r < XLB_QUIC_FALLBACKS; ++r)
            EXPECT_EQ(after.fallbacks[r] - before.fallbacks[r], r == reason ? 1u : 0u)
                << "reason " << r;
    }

    std::vector<std::uint32_t> ring_;
    std::uint32_t base_ = 10;
};

TEST_F(QuicTest, PlaintextShortHeaderGoesToItsServerWhateverTheTuple) {
    for (bool v6 : {false, true}) {
        SCOPED_TRACE(v6 ? "IPv6" : "IPv4");
        SetUp();
        vip(v6);
        for (std::uint64_t s = 1; s <= 3; ++s)
            expect_routed(v6, short_header(plain_cid(kPlainConfig, s, kPlainSid, kPlainNonce)),
                          base_ + static_cast<std::uint32_t>(s) - 1);
    }
}

TEST_F(QuicTest, EncryptedShortHeaderDecryptsAsOpenSslEncrypted) {
    for (bool v6 : {false, true}) {
        SCOPED_TRACE(v6 ? "IPv6" : "IPv4");
        SetUp();
        vip(v6, true);
        // Several nonces: each CID's 16 octets differ entirely once sealed.
        for (std::uint64_t s = 1; s <= 3; ++s)
            for (std::uint8_t nonce : {0x01, 0x80, 0xfe}) {
                const Bytes cid = sealed_cid(s, kKey, nonce);
                const Bytes plain = plain_cid(kSealedConfig, s, kSealedSid, kSealedNonce, nonce);
                EXPECT_FALSE(std::equal(cid.begin() + 1, cid.begin() + 4, plain.begin() + 1))
                    << "the server id went out in clear";
                expect_routed(v6, short_header(cid), base_ + static_cast<std::uint32_t>(s) - 1);
            }
        // Both configs live at once (a rotation): the plaintext one still routes.
        expect_routed(v6, short_header(plain_cid(kPlainConfig, 2, kPlainSid, kPlainNonce)),
                      base_ + 1);
    }
}

Bytes from_hex(std::string_view text) {
    Bytes out;
    for (std::size_t i = 0; i + 1 < text.size(); i += 2)
        out.push_back(
            static_cast<std::uint8_t>(std::stoi(std::string(text.substr(i, 2)), nullptr, 16)));
    return out;
}

// draft-ietf-quic-load-balancers' test vectors ("Load Balancer Test
// Vectors"): its plaintext one, and its 16-octet encrypted one, whose
// decryption by the kernel's AES must give the draft's server id.
TEST_F(QuicTest, DraftTestVectorsRouteToTheirServerIds) {
    vip(false);
    put_config(0, {3, 4, XLB_QUIC_MODE_PLAINTEXT, {}});
    put_config(2, {8, 8, XLB_QUIC_MODE_ENCRYPTED, {}});
    std::array<std::uint8_t, 16> key{};
    const Bytes key_octets = from_hex("8f95f09245765f80256934e50c66207f");
    std::copy(key_octets.begin(), key_octets.end(), key.begin());
    ASSERT_TRUE(lb().install_quic_key(slot(2), key));
    own(0xc4605e, 11);
    own(0xed793a51d49b8f5fULL, 12);
    const Bytes plain = from_hex("07c4605e4504cc4f");
    const Bytes sealed = from_hex("504dd2d05a7b0de9b2b9907afb5ecf8cc3");
    // The reference: OpenSSL opens the sealed CID to the same octets.
    std::array<std::uint8_t, 16> block{};
    std::copy(sealed.begin() + 1, sealed.end(), block.begin());
    const auto opened = aes_ecb(key, block, false);
    EXPECT_EQ(Bytes(opened.begin(), opened.end()), from_hex("ed793a51d49b8f5fee080dbf48c0d1e5"));
    expect_routed(false, short_header(plain), 11);
    expect_routed(false, short_header(sealed), 12);
    expect_routed(false, long_header(kV1, 2, sealed), 12);
}

TEST_F(QuicTest, HandshakeLongHeaderGoesByItsServerChosenCid) {
    vip(false, true);
    const Bytes cid = plain_cid(kPlainConfig, 3, kPlainSid, kPlainNonce);
    expect_routed(false, long_header(kV1, 2, cid), 12);  // v1 Handshake
    expect_routed(false, long_header(kV2, 3, cid), 12);  // v2 Handshake
    expect_routed(false, long_header(kV1, 2, sealed_cid(1, kKey)), 10);
}

TEST_F(QuicTest, ClientChosenCidsGoByTheRing) {
    for (bool v6 : {false, true}) {
        SCOPED_TRACE(v6 ? "IPv6" : "IPv4");
        SetUp();
        vip(v6);
        // A client's Initial may by chance look like a routable CID: it is
        // the client's, so the ring decides (and the table keeps it).
        const Bytes lookalike = plain_cid(kPlainConfig, 3, kPlainSid, kPlainNonce);
        expect_fallback(v6, long_header(kV1, 0, lookalike), XLB_QUIC_FB_CLIENT_CID);  // Initial
        expect_fallback(v6, long_header(kV1, 1, lookalike), XLB_QUIC_FB_CLIENT_CID);  // 0-RTT
        expect_fallback(v6, long_header(kV2, 1, lookalike), XLB_QUIC_FB_CLIENT_CID);  // v2 Initial
        expect_fallback(v6, long_header(kV2, 2, lookalike), XLB_QUIC_FB_CLIENT_CID);  // v2 0-RTT
        // A version we cannot read (and version negotiation's 0).
        expect_fallback(v6, long_header(0xff00001d, 2, lookalike), XLB_QUIC_FB_CLIENT_CID);
        expect_fallback(v6, long_header(0, 2, lookalike), XLB_QUIC_FB_CLIENT_CID);
    }
}

TEST_F(QuicTest, UnroutableCidsAreCountedByReasonAndGoByTheRing) {
    for (bool v6 : {false, true}) {
        SCOPED_TRACE(v6 ? "IPv6" : "IPv4");
        SetUp();
        vip(v6, true);
        // Config ids nobody configured, and 7 (chosen without a config).
        expect_fallback(v6, short_header(plain_cid(4, 1, kPlainSid, kPlainNonce)),
                        XLB_QUIC_FB_UNKNOWN_CONFIG);
        expect_fallback(v6, short_header(plain_cid(7, 1, kPlainSid, kPlainNonce)),
                        XLB_QUIC_FB_UNKNOWN_CONFIG);
        // A Handshake whose CID has another length than its config's.
        expect_fallback(v6, long_header(kV1, 2, plain_cid(kPlainConfig, 1, kPlainSid, 4)),
                        XLB_QUIC_FB_BAD_LENGTH);
        // A payload too short to be a QUIC packet with such a CID.
        expect_fallback(v6, Bytes{0x41, 0x08, 0x00, 0x01, 1, 2, 3}, XLB_QUIC_FB_BAD_LENGTH);
        expect_fallback(v6, Bytes{}, XLB_QUIC_FB_BAD_LENGTH);
        // A server id no backend owns, and one wider than 64 bits can say.
        expect_fallback(v6, short_header(plain_cid(kPlainConfig, 9, kPlainSid, kPlainNonce)),
                        XLB_QUIC_FB_UNKNOWN_SERVER);
        // Sealed under another key: decrypts to a server id nobody owns.
        auto other = kKey;
        other[0] ^= 0xff;
        expect_fallback(v6, short_header(sealed_cid(1, other)), XLB_QUIC_FB_UNKNOWN_SERVER);
    }
}

TEST_F(QuicTest, ServerIdBeyondSixtyFourBitsIsUnknown) {
    vip(false);
    put_config(2, {9, 5, XLB_QUIC_MODE_PLAINTEXT, {}});
    Bytes cid = plain_cid(2, 1, 9, 5);
    own(1, 11);
    expect_routed(false, short_header(cid), 11);
    cid[1] = 0x01;  // the ninth octet from the right: 2^64
    expect_fallback(false, short_header(cid), XLB_QUIC_FB_UNKNOWN_SERVER);
}

TEST_F(QuicTest, ServerOfADeadBackendFallsBack) {
    vip(false);
    const Bytes to_second = short_header(plain_cid(kPlainConfig, 2, kPlainSid, kPlainNonce));
    // Down: its connections move with the ring's choice.
    ASSERT_TRUE(lb().backends().put(11, datapath::backend_entry(kBackendV4[1], 1, true)));
    expect_fallback(false, to_second, XLB_QUIC_FB_DEAD_BACKEND);
    // Released (removed from the VIP while the server id was still named).
    ASSERT_TRUE(lb().backends().put(11, datapath::released_backend_entry(2)));
    expect_fallback(false, to_second, XLB_QUIC_FB_DEAD_BACKEND, 40001);
    // The others are untouched.
    expect_routed(false, short_header(plain_cid(kPlainConfig, 1, kPlainSid, kPlainNonce)), 10);
}

TEST_F(QuicTest, EncryptedConfigWithoutItsKeyFallsBack) {
    vip(false, true);
    ASSERT_TRUE(lb().clear_quic_key(slot(kSealedConfig)));
    expect_fallback(false, short_header(sealed_cid(1, kKey)), XLB_QUIC_FB_NO_KEY);
    // Installed again (another key): routes by the new key only.
    auto next = kKey;
    next[15] ^= 0x5a;
    ASSERT_TRUE(lb().install_quic_key(slot(kSealedConfig), next));
    expect_routed(false, short_header(sealed_cid(2, next)), 11);
    expect_fallback(false, short_header(sealed_cid(2, kKey)), XLB_QUIC_FB_UNKNOWN_SERVER, 40002);
    // A CID opened under a key (and kept in the opened-CID cache) means
    // nothing once the key is replaced.
    auto third = next;
    third[3] ^= 0x77;
    ASSERT_TRUE(lb().install_quic_key(slot(kSealedConfig), third));
    expect_fallback(false, short_header(sealed_cid(2, next)), XLB_QUIC_FB_UNKNOWN_SERVER, 40003);
    expect_routed(false, short_header(sealed_cid(2, third)), 11);
}

TEST_F(QuicTest, VipWithoutQuicIgnoresCids) {
    vip(false, false, 0);
    const auto before = quic_stats();
    const Flow f = client(false, 40000);
    expect_at(f, short_header(plain_cid(kPlainConfig, 3, kPlainSid, kPlainNonce)),
              expected_backend(ring_, flow_key(f)), XLB_OUT_TX);
    const auto after = quic_stats();
    EXPECT_EQ(after.routed, before.routed);
    for (int r = 0; r < XLB_QUIC_FALLBACKS; ++r) EXPECT_EQ(after.fallbacks[r], before.fallbacks[r]);
}

TEST_F(QuicTest, RoutedPacketsNeitherReadNorWriteTheConnectionTable) {
    vip(false);
    const Flow f = client(false, 50000);
    const std::uint32_t by_ring = expected_backend(ring_, flow_key(f));
    // A server other than the ring's choice for this tuple.
    const std::uint64_t server = by_ring == 10 ? 2 : 1;
    const std::uint32_t owner = 10 + static_cast<std::uint32_t>(server) - 1;
    expect_at(f, short_header(plain_cid(kPlainConfig, server, kPlainSid, kPlainNonce)), owner,
              XLB_OUT_TX_QUIC_CID);
    auto entry = lb().conntrack().get(flow_key(f));
    ASSERT_TRUE(entry);
    EXPECT_FALSE(*entry) << "a routed packet left a table entry";
    // A fallback of the same tuple is recorded, and a later routed packet
    // still follows its CID, not the entry.
    expect_fallback(false, long_header(kV1, 0, plain_cid(kPlainConfig, 1, 2, 6)),
                    XLB_QUIC_FB_CLIENT_CID, 50000);
    entry = lb().conntrack().get(flow_key(f));
    ASSERT_TRUE(entry);
    EXPECT_TRUE(*entry) << "a fallback left no table entry";
    expect_at(f, short_header(plain_cid(kPlainConfig, server, kPlainSid, kPlainNonce)), owner,
              XLB_OUT_TX_QUIC_CID);
}

TEST_F(QuicTest, KeyInstallRefusesASlotBeyondTheMap) {
    auto bad = lb().install_quic_key(kSizes.max_vips * XLB_QUIC_CONFIG_SLOTS, kKey);
    ASSERT_FALSE(bad);
    EXPECT_NE(bad.error().message().find("no such slot"), std::string::npos)
        << bad.error().message();
}

// What the reconciler publishes for a QUIC VIP, written by BpfDataPlane
// into the real maps: its CIDs route; a backend removed, a config removed,
// the whole routing removed each leave nothing that still routes.
TEST_F(QuicTest, PublishedThroughTheDataPlane) {
    add_vip(kVipV4, kQuicPort, kProtoUdp, kVipId, XLB_VIP_F_QUIC);
    ring_ = publish_maglev(kVipId, {{10}, {11}, {12}});
    const bool crypto = lb().quic_crypto_available();
    config::VipSpec spec;
    spec.address = kVipV4;
    spec.port = kQuicPort;
    spec.protocol = config::Protocol::kUdp;
    config::QuicConfig plain;
    plain.config_id = kPlainConfig;
    plain.server_id_length = kPlainSid;
    plain.nonce_length = kPlainNonce;
    spec.quic.push_back(plain);
    if (crypto) {
        config::QuicConfig sealed = plain;
        sealed.config_id = kSealedConfig;
        sealed.server_id_length = kSealedSid;
        sealed.nonce_length = kSealedNonce;
        sealed.mode = config::QuicMode::kEncrypted;
        spec.quic.push_back(sealed);
    }
    for (std::uint32_t i = 0; i < 3; ++i) {
        config::BackendSpec b;
        b.address = kBackendV4[i];
        b.server_id = i + 1;
        spec.backends.push_back(b);
    }
    std::vector<std::optional<std::uint32_t>> ids{10, 11, 12};
    std::vector<datapath::QuicKeyEntry> keys;
    if (crypto) keys.push_back({slot(kSealedConfig), kKey});
    control::BpfDataPlane dp(lb());
    auto publish = [&] {
        auto ok = dp.set_quic(kVipId, datapath::quic_config_entries(spec, kVipId),
                              datapath::quic_server_entries(spec, kVipId, ids), keys);
        ASSERT_TRUE(ok) << ok.error().message();
    };
    publish();
    const Bytes to_second = short_header(plain_cid(kPlainConfig, 2, kPlainSid, kPlainNonce));
    expect_routed(false, to_second, 11);
    if (crypto) expect_routed(false, short_header(sealed_cid(3, kKey)), 12);

    // The backend of server 2 removed: its entry goes, the others stay.
    spec.backends.erase(spec.backends.begin() + 1);
    ids = {10, 12};
    publish();
    expect_fallback(false, to_second, XLB_QUIC_FB_UNKNOWN_SERVER);
    expect_routed(false, short_header(plain_cid(kPlainConfig, 1, kPlainSid, kPlainNonce)), 10);
    EXPECT_EQ(lb().quic_servers().get(xlb_quic_server_key{kVipId, 0, 2}).value(), std::nullopt);

    // The encrypted config removed: its slot empty, its key gone.
    if (crypto) {
        spec.quic.pop_back();
        keys.clear();
        publish();
        expect_fallback(false, short_header(sealed_cid(3, kKey)), XLB_QUIC_FB_UNKNOWN_CONFIG,
                        40001);
        EXPECT_EQ(lb().quic_configs().get(slot(kSealedConfig)).value().server_id_len, 0);
    }

    // All of it removed: no config, no server entry of the VIP id.
    ASSERT_TRUE(dp.remove_quic(kVipId));
    expect_fallback(false, short_header(plain_cid(kPlainConfig, 1, kPlainSid, kPlainNonce)),
                    XLB_QUIC_FB_UNKNOWN_CONFIG, 40002);
    auto left = lb().quic_servers().keys();
    ASSERT_TRUE(left);
    for (const xlb_quic_server_key& k : *left) EXPECT_NE(k.vip_id, kVipId) << k.server_id;
}

// On a kernel without the BPF crypto kfuncs the program still loads (its
// decryption never reached), an encrypted config cannot get a key, and its
// CIDs fall back as no_key, never routed by a guess.
TEST(QuicWithoutCrypto, LoadsRefusesKeysAndFallsBack) {
    auto loaded = bpf::LbProgram::load({8, 32, 4096}, {.without_bpf_crypto = true});
    ASSERT_TRUE(loaded) << loaded.error().message();
    bpf::LbProgram& lb = *loaded;
    EXPECT_FALSE(lb.quic_crypto_available());
    auto refused = lb.install_quic_key(1 * XLB_QUIC_CONFIG_SLOTS + kSealedConfig, kKey);
    ASSERT_FALSE(refused);
    EXPECT_NE(refused.error().message().find("no BPF crypto kfuncs"), std::string::npos)
        << refused.error().message();
    EXPECT_TRUE(lb.clear_quic_key(1 * XLB_QUIC_CONFIG_SLOTS + kSealedConfig));

    ASSERT_TRUE(lb.config().put(0, bench_config()));
    ASSERT_TRUE(lb.backends().put(3, datapath::backend_entry(kBackendV4[0], 1)));
    std::vector<std::uint32_t> ring(7, 3);
    ASSERT_TRUE(bpf::publish_ring(lb.rings().fd(), 1, ring));
    ASSERT_TRUE(lb.put_vip(datapath::vip_key(kVipV4, kQuicPort, kProtoUdp),
                           xlb_vip_value{1, XLB_VIP_F_QUIC}));
    ASSERT_TRUE(lb.quic_configs().put(1 * XLB_QUIC_CONFIG_SLOTS + kSealedConfig,
                                      {kSealedSid, kSealedNonce, XLB_QUIC_MODE_ENCRYPTED, {}}));
    ASSERT_TRUE(lb.quic_servers().put(xlb_quic_server_key{1, 0, 1}, 3));
    FrameOptions opt;
    opt.payload = short_header(sealed_cid(1, kKey));
    auto result = bpf::test_run_xdp(
        lb.prog_fd(), make_frame(Flow{kClientV4, kVipV4, 40000, kQuicPort, kProtoUdp}, opt));
    ASSERT_TRUE(result) << result.error().message();
    EXPECT_EQ(result->action, XDP_TX);
    auto per_cpu = lb.vip_quic().get_per_cpu(1);
    ASSERT_TRUE(per_cpu);
    const xlb_vip_quic_stats stats = datapath::sum_per_cpu(*per_cpu);
    EXPECT_EQ(stats.routed, 0u);
    EXPECT_EQ(stats.fallbacks[XLB_QUIC_FB_NO_KEY], 1u);
}

}  // namespace
}  // namespace xlb::test
