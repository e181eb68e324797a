// SPDX-License-Identifier: Apache-2.0
// xlb-quic-echo: a QUIC server for the lab and the tests that echoes each
// stream's data back, and whose connection IDs carry its server id in the
// QUIC-LB format (docs/quic.md), so that xlb can route a client's packets by
// them whatever its address. One UDP socket, one poll loop. A test tool: not
// installed.
#include <fmt/format.h>
#include <gnutls/crypto.h>
#include <ngtcp2/ngtcp2_crypto.h>
#include <ngtcp2/ngtcp2_crypto_gnutls.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>

#include <CLI/CLI.hpp>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <deque>
#include <map>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "common.h"
#include "xlb/quic/key_file.h"

namespace xlb::quic_tools {
namespace {

volatile sig_atomic_t g_stop = 0;

struct EchoStream {
    // Chunks as received; ngtcp2 keeps pointers into data it has sent until
    // it is acknowledged, so a chunk never moves.
    std::deque<std::vector<std::uint8_t>> chunks;
    std::size_t chunk = 0;   // next chunk to send
    std::size_t offset = 0;  // into it
    bool fin_received = false;
    bool fin_sent = false;
    bool blocked = false;  // by flow control until the peer sends more credit
    bool closed = false;

    bool pending() const {
        return !closed && !blocked && (chunk < chunks.size() || (fin_received && !fin_sent));
    }
};

class Server;

struct Connection {
    Server* server = nullptr;
    ngtcp2_conn* conn = nullptr;
    gnutls_session_t tls = nullptr;
    ngtcp2_crypto_conn_ref ref{};
    SockAddr remote;
    std::string name;               // the client's first address, for the log
    std::string first_cid;          // hex, for the log
    std::vector<std::string> cids;  // keys of this connection in Server::by_cid_
    std::map<std::int64_t, EchoStream> streams;
    ngtcp2_connection_close_error close_error{};

    ~Connection() {
        if (conn) ngtcp2_conn_del(conn);
        if (tls) gnutls_deinit(tls);
    }
};

std::string cid_key(const std::uint8_t* data, std::size_t len) {
    return std::string(reinterpret_cast<const char*>(data), len);
}

class Server {
public:
    Server(CidIssuer issuer, std::array<std::uint8_t, 32> reset_secret, bool quiet)
        : issuer_(std::move(issuer)), reset_secret_(reset_secret), quiet_(quiet) {}
    ~Server() {
        by_cid_.clear();
        if (cred_) gnutls_certificate_free_credentials(cred_);
    }

    Result<void> start(const SockAddr& listen) {
        auto cred = self_signed_credentials();
        if (!cred) return std::unexpected(cred.error());
        cred_ = *cred;
        auto fd = open_udp(listen, nullptr, &local_);
        if (!fd) return std::unexpected(fd.error());
        fd_ = std::move(*fd);
        log("listening on {} (CIDs of {} octets)", local_.to_string(), issuer_.length());
        return {};
    }

    void run() {
        while (!g_stop) {
            pollfd pfd{fd_.get(), POLLIN, 0};
            int rv = ::poll(&pfd, 1, poll_timeout_ms());
            if (rv < 0 && errno != EINTR) {
                std::fprintf(stderr, "xlb-quic-echo: poll: %s\n", std::strerror(errno));
                return;
            }
            if (rv > 0) read_all();
            handle_timers();
        }
    }

    // ngtcp2 callbacks reach the server through these.
    int issue_cid(Connection& c, ngtcp2_cid* cid, std::uint8_t* token, std::size_t cidlen) {
        auto next = issuer_.next();
        if (!next || next->size() != cidlen) return NGTCP2_ERR_CALLBACK_FAILURE;
        ngtcp2_cid_init(cid, next->data(), next->size());
        if (ngtcp2_crypto_generate_stateless_reset_token(token, reset_secret_.data(),
                                                         reset_secret_.size(), cid) != 0)
            return NGTCP2_ERR_CALLBACK_FAILURE;
        add_cid(c, cid_key(cid->data, cid->datalen));
        return 0;
    }
    void retire_cid(const ngtcp2_cid* cid) { by_cid_.erase(cid_key(cid->data, cid->datalen)); }

private:
    template <typename... Args>
    void log(fmt::format_string<Args...> format, Args&&... args) {
        if (quiet_) return;
        std::fputs((fmt::format(format, std::forward<Args>(args)...) + "\n").c_str(), stdout);
        std::fflush(stdout);
    }

    void add_cid(Connection& c, std::string key) {
        auto it = connections_.find(&c);
        if (it == connections_.end()) return;
        c.cids.push_back(key);
        by_cid_[std::move(key)] = it->second;
    }

    int poll_timeout_ms() {
        ngtcp2_tstamp next = UINT64_MAX;
        for (auto& [ptr, c] : connections_) next = std::min(next, ngtcp2_conn_get_expiry(c->conn));
        if (next == UINT64_MAX) return 1000;
        const ngtcp2_tstamp now = now_ns();
        if (next <= now) return 0;
        return static_cast<int>(
            std::min<ngtcp2_tstamp>((next - now) / NGTCP2_MILLISECONDS + 1, 1000));
    }

    void read_all() {
        std::uint8_t buf[65536];
        for (;;) {
            SockAddr remote;
            remote.len = sizeof remote.storage;
            ssize_t n = ::recvfrom(fd_.get(), buf, sizeof buf, 0, remote.get(), &remote.len);
            if (n < 0) return;  // EAGAIN, or an ICMP error of an earlier send: nothing to do
            on_packet(remote, buf, static_cast<std::size_t>(n));
        }
    }

    void on_packet(SockAddr& remote, const std::uint8_t* data, std::size_t len) {
        ngtcp2_version_cid vc{};
        if (ngtcp2_pkt_decode_version_cid(&vc, data, len, issuer_.length()) != 0) return;
        auto it = by_cid_.find(cid_key(vc.dcid, vc.dcidlen));
        if (it != by_cid_.end()) {
            // The connection may close in there: hold it until done.
            std::shared_ptr<Connection> c = it->second;
            feed(*c, remote, data, len);
            return;
        }
        if (data[0] & 0x80) {
            accept(remote, data, len);
            return;
        }
        send_stateless_reset(remote, vc, len);
    }

    ngtcp2_path path_to(SockAddr& remote) {
        return ngtcp2_path{local_.addr(), remote.addr(), nullptr};
    }

    void accept(SockAddr& remote, const std::uint8_t* data, std::size_t len) {
        ngtcp2_pkt_hd hd{};
        if (ngtcp2_accept(&hd, data, len) != 0) return;
        auto c = std::make_shared<Connection>();
        c->server = this;
        c->remote = remote;
        c->name = remote.to_string();
        c->ref.get_conn = [](ngtcp2_crypto_conn_ref* ref) {
            return static_cast<Connection*>(ref->user_data)->conn;
        };
        c->ref.user_data = c.get();
        ngtcp2_connection_close_error_default(&c->close_error);

        auto scid_octets = issuer_.next();
        if (!scid_octets) return;
        ngtcp2_cid scid;
        ngtcp2_cid_init(&scid, scid_octets->data(), scid_octets->size());

        ngtcp2_settings settings;
        ngtcp2_settings_default(&settings);
        settings.initial_ts = now_ns();
        ngtcp2_transport_params params = echo_transport_params(100);
        // Clients may move: migration is what the QUIC-LB format is for.
        params.disable_active_migration = 0;
        params.original_dcid = hd.dcid;
        params.stateless_reset_token_present = 1;
        ngtcp2_crypto_generate_stateless_reset_token(
            params.stateless_reset_token, reset_secret_.data(), reset_secret_.size(), &scid);

        ngtcp2_callbacks cb = crypto_callbacks();
        cb.recv_client_initial = ngtcp2_crypto_recv_client_initial_cb;
        cb.get_new_connection_id = [](ngtcp2_conn*, ngtcp2_cid* cid, std::uint8_t* token,
                                      std::size_t cidlen, void* user) {
            auto* conn = static_cast<Connection*>(user);
            return conn->server->issue_cid(*conn, cid, token, cidlen);
        };
        cb.remove_connection_id = [](ngtcp2_conn*, const ngtcp2_cid* cid, void* user) {
            static_cast<Connection*>(user)->server->retire_cid(cid);
            return 0;
        };
        cb.recv_stream_data = [](ngtcp2_conn* conn, std::uint32_t flags, std::int64_t id,
                                 std::uint64_t, const std::uint8_t* data, std::size_t len,
                                 void* user, void*) {
            auto& stream = static_cast<Connection*>(user)->streams[id];
            if (len) stream.chunks.emplace_back(data, data + len);
            if (flags & NGTCP2_STREAM_DATA_FLAG_FIN) stream.fin_received = true;
            ngtcp2_conn_extend_max_stream_offset(conn, id, len);
            ngtcp2_conn_extend_max_offset(conn, len);
            return 0;
        };
        cb.extend_max_stream_data = [](ngtcp2_conn*, std::int64_t id, std::uint64_t, void* user,
                                       void*) {
            auto& streams = static_cast<Connection*>(user)->streams;
            if (auto it = streams.find(id); it != streams.end()) it->second.blocked = false;
            return 0;
        };
        cb.stream_close = [](ngtcp2_conn*, std::uint32_t, std::int64_t id, std::uint64_t,
                             void* user, void*) {
            auto& streams = static_cast<Connection*>(user)->streams;
            if (auto it = streams.find(id); it != streams.end()) it->second.closed = true;
            return 0;
        };

        ngtcp2_path path = path_to(remote);
        int rv = ngtcp2_conn_server_new(&c->conn, &hd.scid, &scid, &path, hd.version, &cb,
                                        &settings, &params, nullptr, c.get());
        if (rv != 0) {
            log("refused {}: {}", c->name, ngtcp2_strerror(rv));
            return;
        }
        if (auto tls = make_tls(*c); !tls) {
            log("refused {}: {}", c->name, tls.error().message());
            return;
        }
        c->first_cid = quic::to_hex(*scid_octets);
        connections_[c.get()] = c;
        add_cid(*c, cid_key(hd.dcid.data, hd.dcid.datalen));
        add_cid(*c, cid_key(scid.data, scid.datalen));
        log("accepted {} cid {}", c->name, c->first_cid);
        feed(*c, remote, data, len);
    }

    Result<void> make_tls(Connection& c) {
        int rv = gnutls_init(
            &c.tls, GNUTLS_SERVER | GNUTLS_ENABLE_EARLY_DATA | GNUTLS_NO_END_OF_EARLY_DATA);
        if (rv != 0) return tls_fail(rv, "start a TLS session");
        if ((rv = gnutls_priority_set_direct(c.tls, kTlsPriority, nullptr)) != 0)
            return tls_fail(rv, "set the TLS priorities");
        if (ngtcp2_crypto_gnutls_configure_server_session(c.tls) != 0)
            return fail("configure the TLS session for QUIC");
        gnutls_session_set_ptr(c.tls, &c.ref);
        if ((rv = gnutls_credentials_set(c.tls, GNUTLS_CRD_CERTIFICATE, cred_)) != 0)
            return tls_fail(rv, "set the TLS certificate");
        gnutls_datum_t alpn{reinterpret_cast<unsigned char*>(const_cast<char*>(kAlpn.data())),
                            static_cast<unsigned>(kAlpn.size())};
        if ((rv = gnutls_alpn_set_protocols(c.tls, &alpn, 1, GNUTLS_ALPN_MANDATORY)) != 0)
            return tls_fail(rv, "set the ALPN");
        ngtcp2_conn_set_tls_native_handle(c.conn, c.tls);
        return {};
    }

    void feed(Connection& c, SockAddr& remote, const std::uint8_t* data, std::size_t len) {
        ngtcp2_path path = path_to(remote);
        ngtcp2_pkt_info pi{};
        int rv = ngtcp2_conn_read_pkt(c.conn, &path, &pi, data, len, now_ns());
        if (rv == 0) {
            // ngtcp2 moves the connection to the client's new address once
            // a packet other than a probe comes from there.
            const ngtcp2_path* current = ngtcp2_conn_get_path(c.conn);
            if (!same_addr(current->remote, c.remote)) {
                std::memcpy(&c.remote.storage, current->remote.addr, current->remote.addrlen);
                c.remote.len = current->remote.addrlen;
                log("moved {} cid {} to {}", c.name, c.first_cid, c.remote.to_string());
            }
            write(c);
            return;
        }
        if (rv == NGTCP2_ERR_DRAINING) {
            close(c, "closed by the client");
        } else if (rv == NGTCP2_ERR_DROP_CONN) {
            close(c, "dropped");
        } else {
            ngtcp2_connection_close_error_set_transport_error_liberr(&c.close_error, rv, nullptr,
                                                                     0);
            send_close(c);
            close(c, fmt::format("error: {}", ngtcp2_strerror(rv)));
        }
    }

    void write(Connection& c) {
        std::uint8_t buf[1500];
        const ngtcp2_tstamp ts = now_ns();
        for (;;) {
            EchoStream* stream = nullptr;
            std::int64_t stream_id = -1;
            for (auto& [id, s] : c.streams) {
                if (s.pending()) {
                    stream = &s;
                    stream_id = id;
                    break;
                }
            }
            ngtcp2_vec vec{};
            std::size_t nvec = 0;
            std::uint32_t flags = NGTCP2_WRITE_STREAM_FLAG_NONE;
            if (stream) {
                if (stream->chunk < stream->chunks.size()) {
                    auto& chunk = stream->chunks[stream->chunk];
                    vec.base = chunk.data() + stream->offset;
                    vec.len = chunk.size() - stream->offset;
                    nvec = 1;
                }
                if (stream->fin_received && stream->chunk + nvec >= stream->chunks.size())
                    flags |= NGTCP2_WRITE_STREAM_FLAG_FIN;
            }
            ngtcp2_path_storage ps;
            ngtcp2_path_storage_zero(&ps);
            ngtcp2_pkt_info pi{};
            ngtcp2_ssize consumed = -1;
            ngtcp2_ssize n =
                ngtcp2_conn_writev_stream(c.conn, &ps.path, &pi, buf, sizeof buf, &consumed, flags,
                                          stream_id, nvec ? &vec : nullptr, nvec, ts);
            if (n < 0) {
                if (stream &&
                    (n == NGTCP2_ERR_STREAM_DATA_BLOCKED || n == NGTCP2_ERR_STREAM_SHUT_WR ||
                     n == NGTCP2_ERR_STREAM_NOT_FOUND)) {
                    stream->blocked = true;
                    continue;
                }
                ngtcp2_connection_close_error_set_transport_error_liberr(&c.close_error, n, nullptr,
                                                                         0);
                send_close(c);
                close(c, fmt::format("error: {}", ngtcp2_strerror(static_cast<int>(n))));
                return;
            }
            if (stream && consumed >= 0) {
                if (nvec) {
                    stream->offset += static_cast<std::size_t>(consumed);
                    if (stream->offset == stream->chunks[stream->chunk].size()) {
                        ++stream->chunk;
                        stream->offset = 0;
                    }
                }
                if ((flags & NGTCP2_WRITE_STREAM_FLAG_FIN) &&
                    stream->chunk >= stream->chunks.size())
                    stream->fin_sent = true;
            }
            if (n == 0) break;
            send_to(ps.path.remote, buf, static_cast<std::size_t>(n));
        }
        ngtcp2_conn_update_pkt_tx_time(c.conn, ts);
        for (auto it = c.streams.begin(); it != c.streams.end();)
            it = it->second.closed ? c.streams.erase(it) : std::next(it);
    }

    void send_to(const ngtcp2_addr& remote, const std::uint8_t* data, std::size_t len) {
        // A full socket buffer loses the packet; QUIC retransmits.
        (void)::sendto(fd_.get(), data, len, MSG_DONTWAIT, remote.addr, remote.addrlen);
    }

    void send_close(Connection& c) {
        std::uint8_t buf[1500];
        ngtcp2_path_storage ps;
        ngtcp2_path_storage_zero(&ps);
        ngtcp2_pkt_info pi{};
        ngtcp2_ssize n = ngtcp2_conn_write_connection_close(c.conn, &ps.path, &pi, buf, sizeof buf,
                                                            &c.close_error, now_ns());
        if (n > 0) send_to(ps.path.remote, buf, static_cast<std::size_t>(n));
    }

    void close(Connection& c, const std::string& why) {
        log("closed {} cid {}: {}", c.name, c.first_cid, why);
        for (const auto& key : c.cids) {
            auto it = by_cid_.find(key);
            if (it != by_cid_.end() && it->second.get() == &c) by_cid_.erase(it);
        }
        c.cids.clear();
        connections_.erase(&c);
    }

    // A packet for a connection this server does not have (another server's,
    // or one it forgot): tell the client at once instead of letting it time
    // out. The token is derived from the CID, so a server sharing the secret
    // can reset the connections of another.
    void send_stateless_reset(SockAddr& remote, const ngtcp2_version_cid& vc, std::size_t len) {
        // Smaller than what triggered it, so two endpoints never loop.
        constexpr std::size_t kMin =
            1 + NGTCP2_MIN_STATELESS_RESET_RANDLEN + NGTCP2_STATELESS_RESET_TOKENLEN;
        if (len <= kMin + 1) return;
        ngtcp2_cid cid;
        ngtcp2_cid_init(&cid, vc.dcid, vc.dcidlen);
        std::uint8_t token[NGTCP2_STATELESS_RESET_TOKENLEN];
        if (ngtcp2_crypto_generate_stateless_reset_token(token, reset_secret_.data(),
                                                         reset_secret_.size(), &cid) != 0)
            return;
        std::uint8_t random[64];
        const std::size_t randlen =
            std::min(sizeof random, len - 1 - 1 - NGTCP2_STATELESS_RESET_TOKENLEN);
        gnutls_rnd(GNUTLS_RND_NONCE, random, randlen);
        std::uint8_t buf[128];
        ngtcp2_ssize n = ngtcp2_pkt_write_stateless_reset(buf, sizeof buf, token, random, randlen);
        if (n > 0) {
            ::sendto(fd_.get(), buf, static_cast<std::size_t>(n), MSG_DONTWAIT, remote.get(),
                     remote.len);
            log("reset {} cid {}", remote.to_string(), quic::to_hex({vc.dcid, vc.dcidlen}));
        }
    }

    void handle_timers() {
        const ngtcp2_tstamp now = now_ns();
        std::vector<std::shared_ptr<Connection>> due;
        for (auto& [ptr, c] : connections_)
            if (ngtcp2_conn_get_expiry(c->conn) <= now) due.push_back(c);
        for (auto& c : due) {
            int rv = ngtcp2_conn_handle_expiry(c->conn, now);
            if (rv == NGTCP2_ERR_IDLE_CLOSE) {
                close(*c, "idle");
            } else if (rv != 0) {
                close(*c, fmt::format("error: {}", ngtcp2_strerror(rv)));
            } else {
                write(*c);
            }
        }
    }

    CidIssuer issuer_;
    std::array<std::uint8_t, 32> reset_secret_;
    bool quiet_;
    gnutls_certificate_credentials_t cred_ = nullptr;
    bpf::UniqueFd fd_;
    SockAddr local_;
    std::unordered_map<Connection*, std::shared_ptr<Connection>> connections_;
    std::unordered_map<std::string, std::shared_ptr<Connection>> by_cid_;
};

int run(int argc, char** argv) {
    CLI::App app{
        "xlb-quic-echo: a QUIC echo server whose connection IDs carry its QUIC-LB server id"};
    std::string listen = "127.0.0.1:4433";
    std::uint64_t server_id = 0;
    int config_id = 0, sid_len = 2, nonce_len = 6;
    std::string mode = "plaintext", key_file, reset_key;
    bool quiet = false;
    app.add_option("--listen", listen, "ADDR:PORT to listen on ([v6]:port for IPv6)");
    app.add_option("--server-id", server_id, "this server's QUIC-LB server id")->required();
    app.add_option("--config-id", config_id, "QUIC-LB config id (0..6)");
    app.add_option("--server-id-length", sid_len, "octets of the server id (1..15)");
    app.add_option("--nonce-length", nonce_len, "octets of the nonce (4..18)");
    app.add_option("--mode", mode, "plaintext or encrypted")
        ->check(CLI::IsMember({"plaintext", "encrypted"}));
    app.add_option("--key-file", key_file,
                   "the AES-128 key: 16 octets or 32 hex digits, a file only root may read");
    app.add_option("--reset-key", reset_key,
                   "32 hex digits: the stateless-reset secret; servers of one VIP share it "
                   "(default: random)");
    app.add_flag("--quiet", quiet, "no log of connections");
    CLI11_PARSE(app, argc, argv);

    auto die = [](const Error& e) {
        std::fprintf(stderr, "xlb-quic-echo: %s\n", e.message().c_str());
        return 1;
    };
    auto endpoint = net::Endpoint::parse(listen);
    if (!endpoint) return die(make_error(0, "--listen " + listen + ": " + endpoint.error()));
    config::QuicConfig config;
    config.config_id = static_cast<std::uint8_t>(config_id);
    config.server_id_length = static_cast<std::uint8_t>(sid_len);
    config.nonce_length = static_cast<std::uint8_t>(nonce_len);
    config.mode = mode == "encrypted" ? config::QuicMode::kEncrypted : config::QuicMode::kPlaintext;
    config.key_file = key_file;
    if (config_id < 0 || config_id > 6 || sid_len < 1 || sid_len > 15 || nonce_len < 4 ||
        nonce_len > 18)
        return die(
            make_error(0, "--config-id 0..6, --server-id-length 1..15, --nonce-length 4..18"));
    std::optional<quic::Key> key;
    if (!key_file.empty()) {
        auto read = quic::read_key_file(key_file);
        if (!read) return die(read.error());
        key = *read;
    }
    auto issuer = CidIssuer::make(config, server_id, key);
    if (!issuer) return die(issuer.error());
    std::array<std::uint8_t, 32> secret{};
    if (reset_key.empty()) {
        gnutls_rnd(GNUTLS_RND_KEY, secret.data(), secret.size());
    } else {
        auto octets = quic::from_hex(reset_key);
        if (!octets || octets->size() != 16)
            return die(make_error(0, "--reset-key must be 32 hex digits"));
        std::copy(octets->begin(), octets->end(), secret.begin());
    }

    struct sigaction sa {};
    sa.sa_handler = [](int) { g_stop = 1; };
    sigaction(SIGINT, &sa, nullptr);
    sigaction(SIGTERM, &sa, nullptr);
    ::signal(SIGPIPE, SIG_IGN);

    Server server(std::move(*issuer), secret, quiet);
    if (auto started = server.start(SockAddr::from(*endpoint)); !started)
        return die(started.error());
    server.run();
    return 0;
}

}  // namespace
}  // namespace xlb::quic_tools

int main(int argc, char** argv) { return xlb::quic_tools::run(argc, argv); }
