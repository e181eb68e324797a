// SPDX-License-Identifier: Apache-2.0
// What xlb-quic-echo and xlb-quic-client share: UDP sockets, addresses in
// ngtcp2's form, the clock ngtcp2 runs on, GnuTLS setup, and the server's
// QUIC-LB connection-ID issuer (the part the tests check apart).
#pragma once

#include <gnutls/gnutls.h>
#include <ngtcp2/ngtcp2.h>
#include <sys/socket.h>

#include <cstdint>
#include <optional>
#include <string>

#include "xlb/bpf/fd.h"
#include "xlb/config/model.h"
#include "xlb/error.h"
#include "xlb/net/address.h"
#include "xlb/quic/cid.h"

namespace xlb::quic_tools {

// Both ends agree on it: a server refuses a client offering another.
inline constexpr std::string_view kAlpn = "xlb-echo";
// TLS 1.3 only, as QUIC requires; no middlebox compatibility mode.
inline constexpr const char* kTlsPriority =
    "NORMAL:-VERS-ALL:+VERS-TLS1.3:%DISABLE_TLS13_COMPAT_MODE";

// CLOCK_MONOTONIC in nanoseconds: ngtcp2's timestamps.
ngtcp2_tstamp now_ns();

// The transport parameters both tools start from: 1 MiB of connection
// credit, 256 KiB per stream, 30 s idle, room for 8 CIDs of the peer (a
// migration takes an unused one); streams_bidi: the streams the peer may
// open.
ngtcp2_transport_params echo_transport_params(std::uint64_t streams_bidi);

// The callbacks both roles take from ngtcp2_crypto (the packet protection,
// key updates, path challenges, version negotiation) and GnuTLS's random
// numbers; each role adds its own initial and CID callbacks.
ngtcp2_callbacks crypto_callbacks();

struct SockAddr {
    sockaddr_storage storage{};
    socklen_t len = 0;

    static SockAddr from(const net::Endpoint& endpoint);
    sockaddr* get() { return reinterpret_cast<sockaddr*>(&storage); }
    const sockaddr* get() const { return reinterpret_cast<const sockaddr*>(&storage); }
    ngtcp2_addr addr() { return ngtcp2_addr{get(), len}; }
    int family() const { return storage.ss_family; }
    std::string to_string() const;
    bool operator==(const SockAddr& other) const;
};
bool same_addr(const ngtcp2_addr& a, const SockAddr& b);

// A non-blocking UDP socket bound to `local` (port 0: any) and, when `peer`
// is given, connected to it. `bound` receives the address it got.
Result<bpf::UniqueFd> open_udp(const SockAddr& local, const SockAddr* peer, SockAddr* bound);

// Raises an Error from a GnuTLS return code.
std::unexpected<Error> tls_fail(int rv, std::string what);

// A self-signed ECDSA P-256 certificate made now, for a server that only
// tests need to reach (clients do not verify it).
Result<gnutls_certificate_credentials_t> self_signed_credentials();

// Issues the server's connection IDs: config id, server id, then a random
// nonce, in the QUIC-LB format (plaintext or encrypted).
class CidIssuer {
public:
    static Result<CidIssuer> make(const config::QuicConfig& config, std::uint64_t server_id,
                                  std::optional<quic::Key> key);
    Result<quic::Cid> next() const;
    std::size_t length() const { return quic::cid_length(config_); }
    const config::QuicConfig& config() const { return config_; }
    const std::optional<quic::Key>& key() const { return key_; }

private:
    config::QuicConfig config_;
    std::uint64_t server_id_ = 0;
    std::optional<quic::Key> key_;
};

}  // namespace xlb::quic_tools
