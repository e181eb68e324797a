// SPDX-License-Identifier: Apache-2.0
// xlb-quic-client: opens N QUIC connections to an xlb-quic-echo (through a
// VIP in the lab), checks an echo on each, moves each to a new local port or
// address mid-connection, checks an echo again, and prints a JSON summary:
// {"connections":N,"ok":K,"lost":L,"errors":[...]}. A connection is lost when
// its echo after the move does not come back in time or the server resets or
// closes it. Non-blocking sockets, one poll loop. A test tool: not installed.
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
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "common.h"

namespace xlb::quic_tools {
namespace {

enum class Rebind { kMigrate, kNat };

struct Options {
    SockAddr server;
    SockAddr bind;        // first local address (port 0)
    SockAddr migrate_to;  // local address after the move (port 0)
    Rebind rebind = Rebind::kMigrate;
    ngtcp2_duration timeout = 3 * NGTCP2_SECONDS;
    ngtcp2_duration hold = 0;
    ngtcp2_duration handshake_timeout = 5 * NGTCP2_SECONDS;
};

enum class Phase { kHandshake, kFirstEcho, kHold, kSecondEcho, kOk, kLost, kFailed };

struct Socket {
    bpf::UniqueFd fd;
    SockAddr local;
};

struct Connection {
    int index = 0;
    const Options* options = nullptr;
    ngtcp2_conn* conn = nullptr;
    gnutls_session_t tls = nullptr;
    gnutls_certificate_credentials_t cred = nullptr;
    ngtcp2_crypto_conn_ref ref{};
    // The current socket last; an old one is closed at the move, as when a
    // phone leaves a network: nothing comes back on the old address.
    std::vector<Socket> sockets;
    Phase phase = Phase::kHandshake;
    ngtcp2_tstamp deadline = 0;
    bool confirmed = false;
    bool reset = false;

    std::int64_t stream = -1;
    std::string message;
    std::size_t sent = 0;
    bool fin_sent = false;
    std::string echo;
    bool echo_fin = false;
    std::string error;

    ~Connection() {
        if (conn) ngtcp2_conn_del(conn);
        if (tls) gnutls_deinit(tls);
        if (cred) gnutls_certificate_free_credentials(cred);
    }
    bool done() const {
        return phase == Phase::kOk || phase == Phase::kLost || phase == Phase::kFailed;
    }
};

void random_cid(ngtcp2_cid* cid, std::size_t len) {
    std::uint8_t octets[NGTCP2_MAX_CIDLEN];
    gnutls_rnd(GNUTLS_RND_NONCE, octets, len);
    ngtcp2_cid_init(cid, octets, len);
}

Result<void> make_tls(Connection& c) {
    int rv = gnutls_certificate_allocate_credentials(&c.cred);
    if (rv != 0) return tls_fail(rv, "allocate TLS credentials");
    rv =
        gnutls_init(&c.tls, GNUTLS_CLIENT | GNUTLS_ENABLE_EARLY_DATA | GNUTLS_NO_END_OF_EARLY_DATA);
    if (rv != 0) return tls_fail(rv, "start a TLS session");
    if ((rv = gnutls_priority_set_direct(c.tls, kTlsPriority, nullptr)) != 0)
        return tls_fail(rv, "set the TLS priorities");
    if (ngtcp2_crypto_gnutls_configure_client_session(c.tls) != 0)
        return fail("configure the TLS session for QUIC");
    gnutls_session_set_ptr(c.tls, &c.ref);
    // The server's certificate is made at its start: not verified.
    if ((rv = gnutls_credentials_set(c.tls, GNUTLS_CRD_CERTIFICATE, c.cred)) != 0)
        return tls_fail(rv, "set the TLS credentials");
    gnutls_datum_t alpn{reinterpret_cast<unsigned char*>(const_cast<char*>(kAlpn.data())),
                        static_cast<unsigned>(kAlpn.size())};
    if ((rv = gnutls_alpn_set_protocols(c.tls, &alpn, 1, 0)) != 0)
        return tls_fail(rv, "set the ALPN");
    gnutls_server_name_set(c.tls, GNUTLS_NAME_DNS, "xlb-quic-echo", 13);
    ngtcp2_conn_set_tls_native_handle(c.conn, c.tls);
    return {};
}

Result<std::unique_ptr<Connection>> connect(int index, const Options& options) {
    auto c = std::make_unique<Connection>();
    c->index = index;
    c->options = &options;
    c->ref.get_conn = [](ngtcp2_crypto_conn_ref* ref) {
        return static_cast<Connection*>(ref->user_data)->conn;
    };
    c->ref.user_data = c.get();
    Socket socket;
    auto fd = open_udp(options.bind, &options.server, &socket.local);
    if (!fd) return std::unexpected(fd.error());
    socket.fd = std::move(*fd);
    c->sockets.push_back(std::move(socket));

    ngtcp2_cid dcid, scid;
    random_cid(&dcid, 18);
    random_cid(&scid, 8);
    ngtcp2_settings settings;
    ngtcp2_settings_default(&settings);
    settings.initial_ts = now_ns();
    ngtcp2_transport_params params = echo_transport_params(0);

    ngtcp2_callbacks cb = crypto_callbacks();
    cb.client_initial = ngtcp2_crypto_client_initial_cb;
    cb.recv_retry = ngtcp2_crypto_recv_retry_cb;
    cb.get_new_connection_id = [](ngtcp2_conn*, ngtcp2_cid* cid, std::uint8_t* token,
                                  std::size_t cidlen, void*) {
        random_cid(cid, cidlen);
        gnutls_rnd(GNUTLS_RND_NONCE, token, NGTCP2_STATELESS_RESET_TOKENLEN);
        return 0;
    };
    cb.handshake_confirmed = [](ngtcp2_conn*, void* user) {
        static_cast<Connection*>(user)->confirmed = true;
        return 0;
    };
    cb.recv_stateless_reset = [](ngtcp2_conn*, const ngtcp2_pkt_stateless_reset*, void* user) {
        static_cast<Connection*>(user)->reset = true;
        return 0;
    };
    cb.recv_stream_data = [](ngtcp2_conn* conn, std::uint32_t flags, std::int64_t id, std::uint64_t,
                             const std::uint8_t* data, std::size_t len, void* user, void*) {
        auto* c = static_cast<Connection*>(user);
        if (id == c->stream) {
            c->echo.append(reinterpret_cast<const char*>(data), len);
            if (flags & NGTCP2_STREAM_DATA_FLAG_FIN) c->echo_fin = true;
        }
        ngtcp2_conn_extend_max_stream_offset(conn, id, len);
        ngtcp2_conn_extend_max_offset(conn, len);
        return 0;
    };

    ngtcp2_path path{c->sockets[0].local.addr(), const_cast<SockAddr&>(options.server).addr(),
                     nullptr};
    int rv = ngtcp2_conn_client_new(&c->conn, &dcid, &scid, &path, NGTCP2_PROTO_VER_V1, &cb,
                                    &settings, &params, nullptr, c.get());
    if (rv != 0) return fail(fmt::format("create a QUIC connection: {}", ngtcp2_strerror(rv)));
    if (auto tls = make_tls(*c); !tls) return std::unexpected(tls.error());
    c->deadline = settings.initial_ts + options.handshake_timeout;
    return c;
}

class Client {
public:
    explicit Client(Options options) : options_(std::move(options)) {}

    void add(std::unique_ptr<Connection> c) { connections_.push_back(std::move(c)); }

    void run() {
        for (auto& c : connections_) write(*c);
        for (;;) {
            std::vector<pollfd> fds;
            std::vector<std::pair<Connection*, Socket*>> owners;
            ngtcp2_tstamp next = UINT64_MAX;
            for (auto& c : connections_) {
                if (c->done()) continue;
                next = std::min({next, ngtcp2_conn_get_expiry(c->conn), c->deadline});
                for (auto& s : c->sockets) {
                    fds.push_back({s.fd.get(), POLLIN, 0});
                    owners.emplace_back(c.get(), &s);
                }
            }
            if (owners.empty()) return;
            ngtcp2_tstamp now = now_ns();
            int timeout = next <= now ? 0
                                      : static_cast<int>(std::min<ngtcp2_tstamp>(
                                            (next - now) / NGTCP2_MILLISECONDS + 1, 1000));
            if (::poll(fds.data(), fds.size(), timeout) < 0 && errno != EINTR) return;
            for (std::size_t i = 0; i < fds.size(); ++i)
                if (fds[i].revents & POLLIN) read(*owners[i].first, *owners[i].second);
            now = now_ns();
            for (auto& c : connections_) {
                if (c->done()) continue;
                if (ngtcp2_conn_get_expiry(c->conn) <= now) {
                    int rv = ngtcp2_conn_handle_expiry(c->conn, now);
                    if (rv != 0) {
                        end(*c, fmt::format("closed: {}", ngtcp2_strerror(rv)));
                        continue;
                    }
                }
                advance(*c, now);
                if (!c->done()) write(*c);
            }
        }
    }

    nlohmann::json summary() const {
        int ok = 0, lost = 0;
        nlohmann::json errors = nlohmann::json::array();
        for (const auto& c : connections_) {
            if (c->phase == Phase::kOk) ++ok;
            if (c->phase == Phase::kLost) ++lost;
            if (!c->error.empty())
                errors.push_back(fmt::format("connection {}: {}", c->index, c->error));
        }
        return {
            {"connections", connections_.size()}, {"ok", ok}, {"lost", lost}, {"errors", errors}};
    }

private:
    // A failure after the move is a lost connection; one before it an error.
    void end(Connection& c, std::string why) {
        c.phase = c.phase == Phase::kSecondEcho ? Phase::kLost : Phase::kFailed;
        c.error = c.phase == Phase::kLost ? "lost after the move: " + why : why;
        c.sockets.clear();
    }

    void read(Connection& c, Socket& s) {
        std::uint8_t buf[65536];
        for (;;) {
            if (c.done()) return;
            ssize_t n = ::recv(s.fd.get(), buf, sizeof buf, 0);
            if (n < 0) return;  // EAGAIN; ICMP unreachable: the timers decide
            ngtcp2_path path{s.local.addr(), options_.server.addr(), nullptr};
            ngtcp2_pkt_info pi{};
            int rv = ngtcp2_conn_read_pkt(c.conn, &path, &pi, buf, static_cast<std::size_t>(n),
                                          now_ns());
            if (rv != 0) {
                end(c,
                    c.reset ? "stateless reset" : fmt::format("closed: {}", ngtcp2_strerror(rv)));
                return;
            }
        }
    }

    void start_echo(Connection& c, const char* which, ngtcp2_tstamp now) {
        std::int64_t id;
        int rv = ngtcp2_conn_open_bidi_stream(c.conn, &id, nullptr);
        if (rv == NGTCP2_ERR_STREAM_ID_BLOCKED) return;  // again when the server allows more
        if (rv != 0) {
            end(c, fmt::format("open a stream: {}", ngtcp2_strerror(rv)));
            return;
        }
        c.stream = id;
        c.message = fmt::format("xlb-quic-client connection {} {} message", c.index, which);
        c.sent = 0;
        c.fin_sent = false;
        c.echo.clear();
        c.echo_fin = false;
        (void)now;
    }

    bool echoed(Connection& c) {
        if (!c.echo_fin) return false;
        if (c.echo != c.message) {
            end(c, fmt::format("echo {:?} for {:?}", c.echo, c.message));
            return false;
        }
        return true;
    }

    void advance(Connection& c, ngtcp2_tstamp now) {
        switch (c.phase) {
            case Phase::kHandshake:
                if (ngtcp2_conn_get_handshake_completed(c.conn)) {
                    start_echo(c, "first", now);
                    if (c.stream >= 0) c.phase = Phase::kFirstEcho;
                }
                break;
            case Phase::kFirstEcho:
                // A move needs the handshake confirmed and a spare server CID.
                if (echoed(c) && c.confirmed) {
                    c.phase = Phase::kHold;
                    c.deadline = now + options_.hold;
                    return;
                }
                break;
            case Phase::kHold:
                if (now >= c.deadline) move(c, now);
                return;
            case Phase::kSecondEcho:
                if (echoed(c)) {
                    c.phase = Phase::kOk;
                    close(c);
                    return;
                }
                break;
            default: return;
        }
        if (!c.done() && now >= c.deadline)
            end(c, c.phase == Phase::kSecondEcho ? "no echo in time" : "no first echo in time");
    }

    void move(Connection& c, ngtcp2_tstamp now) {
        Socket socket;
        SockAddr local = c.options->migrate_to;
        auto fd = open_udp(local, &options_.server, &socket.local);
        if (!fd) {
            end(c, fd.error().message());
            return;
        }
        socket.fd = std::move(*fd);
        ngtcp2_path path{socket.local.addr(), options_.server.addr(), nullptr};
        if (options_.rebind == Rebind::kMigrate) {
            int rv = ngtcp2_conn_initiate_immediate_migration(c.conn, &path, now);
            if (rv != 0) {
                end(c, fmt::format("migrate: {}", ngtcp2_strerror(rv)));
                return;
            }
        } else {
            // A NAT's rebinding: same CID, new address; only the server notices.
            ngtcp2_conn_set_local_addr(c.conn, &path.local);
        }
        c.sockets.clear();
        c.sockets.push_back(std::move(socket));
        c.phase = Phase::kSecondEcho;
        c.deadline = now + options_.timeout;
        start_echo(c, "second", now);
        if (c.stream < 0) end(c, "no stream for the second message");
    }

    void close(Connection& c) {
        std::uint8_t buf[1500];
        ngtcp2_path_storage ps;
        ngtcp2_path_storage_zero(&ps);
        ngtcp2_pkt_info pi{};
        ngtcp2_connection_close_error ccerr;
        ngtcp2_connection_close_error_default(&ccerr);
        ngtcp2_connection_close_error_set_application_error(&ccerr, 0, nullptr, 0);
        ngtcp2_ssize n = ngtcp2_conn_write_connection_close(c.conn, &ps.path, &pi, buf, sizeof buf,
                                                            &ccerr, now_ns());
        if (n > 0) send(c, ps.path.local, buf, static_cast<std::size_t>(n));
        c.sockets.clear();
    }

    void send(Connection& c, const ngtcp2_addr& local, const std::uint8_t* data, std::size_t len) {
        for (auto& s : c.sockets) {
            if (same_addr(local, s.local)) {
                (void)::send(s.fd.get(), data, len, MSG_DONTWAIT);
                return;
            }
        }
        // The old address is gone: what ngtcp2 still sends there is lost.
    }

    void write(Connection& c) {
        std::uint8_t buf[1500];
        const ngtcp2_tstamp ts = now_ns();
        for (;;) {
            const bool has_stream = c.stream >= 0 && !c.fin_sent &&
                                    (c.phase == Phase::kFirstEcho || c.phase == Phase::kSecondEcho);
            ngtcp2_vec vec{};
            std::size_t nvec = 0;
            std::uint32_t flags = NGTCP2_WRITE_STREAM_FLAG_NONE;
            if (has_stream) {
                vec.base = reinterpret_cast<std::uint8_t*>(c.message.data()) + c.sent;
                vec.len = c.message.size() - c.sent;
                nvec = vec.len ? 1 : 0;
                flags |= NGTCP2_WRITE_STREAM_FLAG_FIN;
            }
            ngtcp2_path_storage ps;
            ngtcp2_path_storage_zero(&ps);
            ngtcp2_pkt_info pi{};
            ngtcp2_ssize consumed = -1;
            ngtcp2_ssize n = ngtcp2_conn_writev_stream(c.conn, &ps.path, &pi, buf, sizeof buf,
                                                       &consumed, flags, has_stream ? c.stream : -1,
                                                       nvec ? &vec : nullptr, nvec, ts);
            if (n < 0) {
                if (n == NGTCP2_ERR_STREAM_DATA_BLOCKED) break;
                end(c, fmt::format("write: {}", ngtcp2_strerror(static_cast<int>(n))));
                return;
            }
            if (has_stream && consumed >= 0) {
                c.sent += static_cast<std::size_t>(consumed);
                if (c.sent == c.message.size()) c.fin_sent = true;
            }
            if (n == 0) break;
            send(c, ps.path.local, buf, static_cast<std::size_t>(n));
        }
        ngtcp2_conn_update_pkt_tx_time(c.conn, ts);
    }

    Options options_;
    std::vector<std::unique_ptr<Connection>> connections_;
};

int run(int argc, char** argv) {
    CLI::App app{"xlb-quic-client: QUIC connections that move mid-connection, checked by echo"};
    std::string server, bind, migrate_to, rebind = "migrate";
    int count = 1;
    double timeout = 3.0, hold = 0.0;
    bool allow_loss = false;
    app.add_option("server", server, "ADDR:PORT of the server or VIP")->required();
    app.add_option("--connections", count, "connections to open")->check(CLI::Range(1, 10000));
    app.add_option("--bind", bind, "local address to start from (default: any)");
    app.add_option("--migrate-to", migrate_to,
                   "local address to move to (default: the first one, on a new port)");
    app.add_option("--rebind", rebind,
                   "migrate: an explicit migration (new path, new server CID); nat: a NAT "
                   "rebinding (new port, same CID)")
        ->check(CLI::IsMember({"migrate", "nat"}));
    app.add_option("--timeout", timeout, "seconds the echo after the move may take");
    app.add_option("--hold", hold, "seconds between the first echo and the move");
    app.add_flag("--allow-loss", allow_loss, "exit 0 even when connections were lost");
    CLI11_PARSE(app, argc, argv);

    auto die = [](const std::string& message) {
        std::fprintf(stderr, "xlb-quic-client: %s\n", message.c_str());
        return 2;
    };
    auto endpoint = net::Endpoint::parse(server);
    if (!endpoint) return die("server " + server + ": " + endpoint.error());
    Options options;
    options.server = SockAddr::from(*endpoint);
    auto local_of = [&](const std::string& text, SockAddr& out) -> bool {
        net::Endpoint any{endpoint->address, 0};
        any.address.bytes.fill(0);
        if (!text.empty()) {
            auto address = net::IpAddress::parse(text);
            if (!address || address->family != endpoint->address.family) return false;
            any.address = *address;
        }
        out = SockAddr::from(any);
        return true;
    };
    if (!local_of(bind, options.bind))
        return die("--bind " + bind + ": not an address of the server's family");
    if (!local_of(migrate_to.empty() ? bind : migrate_to, options.migrate_to))
        return die("--migrate-to " + migrate_to + ": not an address of the server's family");
    options.rebind = rebind == "nat" ? Rebind::kNat : Rebind::kMigrate;
    if (timeout <= 0 || hold < 0) return die("--timeout must be positive and --hold not negative");
    options.timeout = static_cast<ngtcp2_duration>(timeout * NGTCP2_SECONDS);
    options.hold = static_cast<ngtcp2_duration>(hold * NGTCP2_SECONDS);
    options.handshake_timeout = options.timeout + 2 * NGTCP2_SECONDS;
    ::signal(SIGPIPE, SIG_IGN);

    Client client(options);
    for (int i = 0; i < count; ++i) {
        auto c = connect(i, options);
        if (!c) return die(c.error().message());
        client.add(std::move(*c));
    }
    client.run();
    auto summary = client.summary();
    std::puts(summary.dump().c_str());
    const int ok = summary["ok"], lost = summary["lost"];
    if (ok == count) return 0;
    if (allow_loss && ok + lost == count) return 0;
    return 1;
}

}  // namespace
}  // namespace xlb::quic_tools

int main(int argc, char** argv) { return xlb::quic_tools::run(argc, argv); }
