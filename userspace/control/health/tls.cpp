// SPDX-License-Identifier: Apache-2.0
#include "tls.h"

#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <openssl/x509_vfy.h>
#include <sys/socket.h>
#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <climits>

namespace xlb::health::detail {

namespace {

// The reason of the oldest error in this thread's OpenSSL queue, and the
// queue emptied: it is per thread, and every probe of the engine runs on one.
std::string take_reason(const char* fallback) {
    const unsigned long e = ERR_peek_error();
    std::string reason;
    if (e != 0) {
        const char* r = ERR_reason_error_string(e);
        if (r)
            reason = r;
        else {
            char buf[256];
            ERR_error_string_n(e, buf, sizeof(buf));
            reason = buf;
        }
    }
    ERR_clear_error();
    return reason.empty() ? std::string(fallback) : reason;
}

}  // namespace

std::string tls_server_name(const config::HealthCheck& check) {
    if (!check.sni.empty()) return check.sni;
    std::string_view host = check.host;
    if (host.empty() || host.front() == '[') return {};  // "[2001:db8::1]:8443"
    if (const auto colon = host.rfind(':'); colon != std::string_view::npos) {
        if (host.find(':') != colon) return {};  // an IPv6 address without brackets
        host = host.substr(0, colon);
    }
    if (host.empty() || net::IpAddress::parse(host)) return {};
    return std::string(host);
}

Result<std::shared_ptr<const TlsContext>> TlsContext::make(bool verify,
                                                           const std::string& ca_file) {
    ERR_clear_error();
    SSL_CTX* ctx = SSL_CTX_new(TLS_client_method());
    if (!ctx) return fail("create a TLS context: " + take_reason("out of memory"));
    std::shared_ptr<TlsContext> out(new TlsContext(ctx, verify));
    SSL_CTX_set_mode(ctx, SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
    // Many servers close without close_notify; for a probe that is an end of
    // the connection like any other (the HTTP framing says whether the
    // response was complete).
    SSL_CTX_set_options(ctx, SSL_OP_IGNORE_UNEXPECTED_EOF);
    if (!verify) {
        SSL_CTX_set_verify(ctx, SSL_VERIFY_NONE, nullptr);
        return out;
    }
    SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, nullptr);
    std::string& trust = out->trust_;
    if (ca_file.empty()) {
        if (SSL_CTX_set_default_verify_paths(ctx) != 1) {
            return fail("load the system's CA certificates: " + take_reason("unknown error"));
        }
        trust = "system";
    } else if (SSL_CTX_load_verify_locations(ctx, ca_file.c_str(), nullptr) != 1) {
        return fail("load the CA file " + ca_file + ": " + take_reason("no certificate in it"));
    } else {
        struct stat st {};
        if (::stat(ca_file.c_str(), &st) != 0)
            return fail_on(errno, "read the identity of", "the CA file " + ca_file);
        trust = ca_file + " " + std::to_string(st.st_dev) + ":" + std::to_string(st.st_ino) + " " +
                std::to_string(st.st_size) + " " + std::to_string(st.st_mtim.tv_sec) + "." +
                std::to_string(st.st_mtim.tv_nsec);
    }
    return out;
}

TlsContext::~TlsContext() { SSL_CTX_free(ctx_); }

BIO_METHOD* TlsSession::bio_method() {
    static BIO_METHOD* method = [] {
        BIO_METHOD* m = BIO_meth_new(BIO_get_new_index() | BIO_TYPE_SOURCE_SINK, "xlb probe io");
        if (m) {
            BIO_meth_set_read(m, &TlsSession::bio_read);
            BIO_meth_set_write(m, &TlsSession::bio_write);
            BIO_meth_set_ctrl(m, &TlsSession::bio_ctrl);
        }
        return m;
    }();
    return method;
}

int TlsSession::bio_read(BIO* bio, char* data, int size) {
    auto* t = static_cast<Transport*>(BIO_get_data(bio));
    BIO_clear_retry_flags(bio);
    for (;;) {
        const ssize_t n = t->io->recv(t->fd, data, static_cast<std::size_t>(size), 0);
        if (n >= 0) return static_cast<int>(n);
        if (n == -EINTR) continue;
        if (n == -EAGAIN || n == -EWOULDBLOCK) {
            BIO_set_retry_read(bio);
        } else {
            t->error = static_cast<int>(-n);
        }
        return -1;
    }
}

int TlsSession::bio_write(BIO* bio, const char* data, int size) {
    auto* t = static_cast<Transport*>(BIO_get_data(bio));
    BIO_clear_retry_flags(bio);
    for (;;) {
        const ssize_t n = t->io->send(t->fd, data, static_cast<std::size_t>(size), MSG_NOSIGNAL);
        if (n >= 0) return static_cast<int>(n);
        if (n == -EINTR) continue;
        if (n == -EAGAIN || n == -EWOULDBLOCK) {
            BIO_set_retry_write(bio);
        } else {
            t->error = static_cast<int>(-n);
        }
        return -1;
    }
}

long TlsSession::bio_ctrl(BIO*, int cmd, long, void*) {
    // Writes go straight to the socket: nothing is buffered to flush.
    return cmd == BIO_CTRL_FLUSH ? 1 : 0;
}

TlsSession::TlsSession(std::shared_ptr<const TlsContext> context, ProbeIo& io, int fd)
    : context_(std::move(context)), transport_{&io, fd} {}

Result<std::unique_ptr<TlsSession>> TlsSession::make(std::shared_ptr<const TlsContext> context,
                                                     ProbeIo& io, int fd,
                                                     const std::string& server_name,
                                                     const net::IpAddress& address) {
    ERR_clear_error();
    std::unique_ptr<TlsSession> s(new TlsSession(std::move(context), io, fd));
    BIO_METHOD* method = bio_method();
    s->ssl_ = SSL_new(s->context_->get());
    BIO* bio = method ? BIO_new(method) : nullptr;
    if (!s->ssl_ || !bio) {
        if (bio) BIO_free(bio);
        return fail("create a TLS session: " + take_reason("out of memory"));
    }
    BIO_set_data(bio, &s->transport_);
    BIO_set_init(bio, 1);
    SSL_set_bio(s->ssl_, bio, bio);  // the session owns it now
    bool ok = true;
    if (!server_name.empty()) {
        ok = SSL_set_tlsext_host_name(s->ssl_, server_name.c_str()) == 1;
        if (ok && s->context_->verify()) ok = SSL_set1_host(s->ssl_, server_name.c_str()) == 1;
    } else if (s->context_->verify()) {
        ok = X509_VERIFY_PARAM_set1_ip(SSL_get0_param(s->ssl_), address.bytes.data(),
                                       address.is_v4() ? 4 : 16) == 1;
    }
    if (!ok) return fail("set the TLS server name " + server_name + ": " + take_reason("refused"));
    SSL_set_connect_state(s->ssl_);
    return s;
}

TlsSession::~TlsSession() {
    if (ssl_) SSL_free(ssl_);
}

TlsSession::Status TlsSession::outcome(int rc) {
    const int err = SSL_get_error(ssl_, rc);
    switch (err) {
        case SSL_ERROR_WANT_READ: ERR_clear_error(); return Status::kWantRead;
        case SSL_ERROR_WANT_WRITE: ERR_clear_error(); return Status::kWantWrite;
        case SSL_ERROR_ZERO_RETURN: ERR_clear_error(); return Status::kClosed;
        case SSL_ERROR_SYSCALL:
            if (transport_.error == 0) {
                // The peer closed the connection.
                ERR_clear_error();
                return Status::kClosed;
            }
            transport_error_ = transport_.error;
            reason_ = take_reason("connection failed");
            return Status::kError;
        default: break;
    }
    // A certificate the verification refused: X509's words for why
    // ("certificate has expired", "hostname mismatch"), which say more than
    // the handshake's "certificate verify failed".
    const long verify = SSL_get_verify_result(ssl_);
    if (verify != X509_V_OK) {
        reason_ = X509_verify_cert_error_string(verify);
        ERR_clear_error();
    } else {
        reason_ = take_reason("TLS error");
    }
    return Status::kError;
}

TlsSession::Status TlsSession::handshake() {
    ERR_clear_error();
    transport_.error = 0;
    const int rc = SSL_do_handshake(ssl_);
    return rc == 1 ? Status::kDone : outcome(rc);
}

TlsSession::Status TlsSession::write(std::string_view data, std::size_t& written) {
    ERR_clear_error();
    transport_.error = 0;
    written = 0;
    const int size = static_cast<int>(std::min<std::size_t>(data.size(), INT_MAX));
    const int rc = SSL_write(ssl_, data.data(), size);
    if (rc > 0) {
        written = static_cast<std::size_t>(rc);
        return Status::kDone;
    }
    return outcome(rc);
}

TlsSession::Status TlsSession::read(char* data, std::size_t size, std::size_t& got) {
    ERR_clear_error();
    transport_.error = 0;
    got = 0;
    const int rc = SSL_read(ssl_, data, static_cast<int>(std::min<std::size_t>(size, INT_MAX)));
    if (rc > 0) {
        got = static_cast<std::size_t>(rc);
        return Status::kDone;
    }
    return outcome(rc);
}

}  // namespace xlb::health::detail
