// SPDX-License-Identifier: Apache-2.0
#include "common.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <fmt/format.h>
#include <gnutls/crypto.h>
#include <gnutls/x509.h>
#include <netinet/in.h>
#include <ngtcp2/ngtcp2_crypto.h>
#include <time.h>

#include <cstring>
#include <vector>

namespace xlb::quic_tools {

ngtcp2_transport_params echo_transport_params(std::uint64_t streams_bidi) {
    ngtcp2_transport_params params;
    ngtcp2_transport_params_default(&params);
    params.initial_max_data = 1 << 20;
    params.initial_max_stream_data_bidi_local = 256 << 10;
    params.initial_max_stream_data_bidi_remote = 256 << 10;
    params.initial_max_streams_bidi = streams_bidi;
    params.max_idle_timeout = 30 * NGTCP2_SECONDS;
    params.active_connection_id_limit = 8;
    return params;
}

ngtcp2_callbacks crypto_callbacks() {
    ngtcp2_callbacks cb{};
    cb.recv_crypto_data = ngtcp2_crypto_recv_crypto_data_cb;
    cb.encrypt = ngtcp2_crypto_encrypt_cb;
    cb.decrypt = ngtcp2_crypto_decrypt_cb;
    cb.hp_mask = ngtcp2_crypto_hp_mask_cb;
    cb.update_key = ngtcp2_crypto_update_key_cb;
    cb.delete_crypto_aead_ctx = ngtcp2_crypto_delete_crypto_aead_ctx_cb;
    cb.delete_crypto_cipher_ctx = ngtcp2_crypto_delete_crypto_cipher_ctx_cb;
    cb.get_path_challenge_data = ngtcp2_crypto_get_path_challenge_data_cb;
    cb.version_negotiation = ngtcp2_crypto_version_negotiation_cb;
    cb.rand = [](std::uint8_t* dest, std::size_t len, const ngtcp2_rand_ctx*) {
        gnutls_rnd(GNUTLS_RND_RANDOM, dest, len);
    };
    return cb;
}

ngtcp2_tstamp now_ns() {
    timespec ts{};
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return static_cast<ngtcp2_tstamp>(ts.tv_sec) * NGTCP2_SECONDS +
           static_cast<ngtcp2_tstamp>(ts.tv_nsec);
}

SockAddr SockAddr::from(const net::Endpoint& endpoint) {
    SockAddr out;
    if (endpoint.address.is_v4()) {
        auto* sin = reinterpret_cast<sockaddr_in*>(&out.storage);
        sin->sin_family = AF_INET;
        sin->sin_port = htons(endpoint.port);
        std::memcpy(&sin->sin_addr, endpoint.address.bytes.data(), 4);
        out.len = sizeof(sockaddr_in);
    } else {
        auto* sin6 = reinterpret_cast<sockaddr_in6*>(&out.storage);
        sin6->sin6_family = AF_INET6;
        sin6->sin6_port = htons(endpoint.port);
        std::memcpy(&sin6->sin6_addr, endpoint.address.bytes.data(), 16);
        out.len = sizeof(sockaddr_in6);
    }
    return out;
}

std::string SockAddr::to_string() const {
    char text[INET6_ADDRSTRLEN] = "?";
    if (family() == AF_INET) {
        const auto* sin = reinterpret_cast<const sockaddr_in*>(&storage);
        inet_ntop(AF_INET, &sin->sin_addr, text, sizeof text);
        return fmt::format("{}:{}", text, ntohs(sin->sin_port));
    }
    const auto* sin6 = reinterpret_cast<const sockaddr_in6*>(&storage);
    inet_ntop(AF_INET6, &sin6->sin6_addr, text, sizeof text);
    return fmt::format("[{}]:{}", text, ntohs(sin6->sin6_port));
}

bool SockAddr::operator==(const SockAddr& other) const {
    return len == other.len && std::memcmp(&storage, &other.storage, len) == 0;
}

bool same_addr(const ngtcp2_addr& a, const SockAddr& b) {
    return a.addrlen == b.len && std::memcmp(a.addr, &b.storage, b.len) == 0;
}

Result<bpf::UniqueFd> open_udp(const SockAddr& local, const SockAddr* peer, SockAddr* bound) {
    bpf::UniqueFd fd(::socket(local.family(), SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
    if (!fd) return fail_on(errno, "open a UDP socket for", local.to_string());
    if (local.family() == AF_INET6) {
        int on = 1;  // [::]:PORT must not also take the v4 port another server may use
        ::setsockopt(fd.get(), IPPROTO_IPV6, IPV6_V6ONLY, &on, sizeof on);
    }
    if (::bind(fd.get(), local.get(), local.len) != 0)
        return fail_on(errno, "bind a UDP socket to", local.to_string());
    if (peer && ::connect(fd.get(), peer->get(), peer->len) != 0)
        return fail_on(errno, "connect a UDP socket to", peer->to_string());
    if (bound) {
        bound->len = sizeof bound->storage;
        if (::getsockname(fd.get(), bound->get(), &bound->len) != 0)
            return fail_on(errno, "read the address of the UDP socket on", local.to_string());
    }
    return fd;
}

std::unexpected<Error> tls_fail(int rv, std::string what) {
    return fail(fmt::format("{}: {}", what, gnutls_strerror(rv)));
}

Result<gnutls_certificate_credentials_t> self_signed_credentials() {
    gnutls_x509_privkey_t key = nullptr;
    gnutls_x509_crt_t crt = nullptr;
    gnutls_certificate_credentials_t cred = nullptr;
    auto cleanup = [&] {
        if (crt) gnutls_x509_crt_deinit(crt);
        if (key) gnutls_x509_privkey_deinit(key);
    };
    int rv = gnutls_x509_privkey_init(&key);
    if (rv == 0)
        rv = gnutls_x509_privkey_generate(key, GNUTLS_PK_ECDSA,
                                          GNUTLS_CURVE_TO_BITS(GNUTLS_ECC_CURVE_SECP256R1), 0);
    if (rv == 0) rv = gnutls_x509_crt_init(&crt);
    if (rv == 0) rv = gnutls_x509_crt_set_version(crt, 3);
    unsigned char serial[8];
    if (rv == 0) rv = gnutls_rnd(GNUTLS_RND_NONCE, serial, sizeof serial);
    serial[0] &= 0x7f;  // a positive serial number
    if (rv == 0) rv = gnutls_x509_crt_set_serial(crt, serial, sizeof serial);
    const time_t now = time(nullptr);
    if (rv == 0) rv = gnutls_x509_crt_set_activation_time(crt, now - 3600);
    if (rv == 0) rv = gnutls_x509_crt_set_expiration_time(crt, now + 7 * 86400);
    if (rv == 0) rv = gnutls_x509_crt_set_dn(crt, "CN=xlb-quic-echo", nullptr);
    if (rv == 0) rv = gnutls_x509_crt_set_key(crt, key);
    if (rv == 0) rv = gnutls_x509_crt_sign2(crt, crt, key, GNUTLS_DIG_SHA256, 0);
    if (rv == 0) rv = gnutls_certificate_allocate_credentials(&cred);
    if (rv == 0) rv = gnutls_certificate_set_x509_key(cred, &crt, 1, key);
    cleanup();
    if (rv != 0) {
        if (cred) gnutls_certificate_free_credentials(cred);
        return tls_fail(rv, "make a self-signed certificate");
    }
    return cred;
}

Result<CidIssuer> CidIssuer::make(const config::QuicConfig& config, std::uint64_t server_id,
                                  std::optional<quic::Key> key) {
    const int sid = config.server_id_length, nonce = config.nonce_length;
    if (config.config_id > 6) return fail("--config-id must be 0..6 (7 means unroutable)");
    if (sid < 1 || sid > 15) return fail("--server-id-length must be 1..15");
    if (nonce < 4 || nonce > 18) return fail("--nonce-length must be 4..18");
    if (sid + nonce > 19) return fail("--server-id-length + --nonce-length must be at most 19");
    const bool encrypted = config.mode == config::QuicMode::kEncrypted;
    if (encrypted && sid + nonce != 16)
        return fail(
            "encrypted mode needs --server-id-length + --nonce-length == 16 "
            "(the single-pass form)");
    if (encrypted && !key) return fail("encrypted mode needs --key-file");
    CidIssuer issuer;
    issuer.config_ = config;
    issuer.server_id_ = server_id;
    if (encrypted) issuer.key_ = key;
    // A server id too large for its length is refused here, not per connection.
    if (auto probe = issuer.next(); !probe)
        return std::unexpected(std::move(probe.error()).add_context("--server-id"));
    return issuer;
}

Result<quic::Cid> CidIssuer::next() const {
    std::vector<std::uint8_t> nonce(config_.nonce_length);
    if (int rv = gnutls_rnd(GNUTLS_RND_NONCE, nonce.data(), nonce.size()); rv != 0)
        return tls_fail(rv, "draw a connection ID nonce");
    return quic::encode_cid(config_, server_id_, nonce, key_);
}

}  // namespace xlb::quic_tools
