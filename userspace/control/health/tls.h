// SPDX-License-Identifier: Apache-2.0
// Internal: the TLS client of https probes (OpenSSL). The session reads and
// writes its socket through the engine's ProbeIo (a BIO whose calls are
// ProbeIo::recv/send), so that the engine's seam for sockets stays the one
// way to the system, and it never blocks: every call returns what it is
// waiting for (kWantRead, kWantWrite) and the engine calls again on the
// socket's next event.
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <memory>
#include <string>
#include <string_view>

#include "xlb/config/model.h"
#include "xlb/error.h"
#include "xlb/health/probe_io.h"
#include "xlb/net/address.h"

struct ssl_ctx_st;
struct ssl_st;
struct bio_st;
struct bio_method_st;

namespace xlb::health::detail {

// The name an https check sends as SNI and verifies the certificate
// against: `sni`, else `host` without a port when it is a name (not an
// address); empty: none (the certificate must then name the probed address).
std::string tls_server_name(const config::HealthCheck& check);

// A client context: how certificates are verified (the check's verify and
// ca_file). Shared by every session made with the same settings.
class TlsContext {
public:
    // The error names the CA file and says what OpenSSL found wrong with it.
    static Result<std::shared_ptr<const TlsContext>> make(bool verify, const std::string& ca_file);
    ~TlsContext();
    TlsContext(const TlsContext&) = delete;
    TlsContext& operator=(const TlsContext&) = delete;

    ssl_ctx_st* get() const { return ctx_; }
    bool verify() const { return verify_; }
    // Whether `other` trusts what this one does: the same verify setting and
    // the same CA file as it was on disk (device, inode, size, mtime) when
    // each was made. A connection verified under one stays good under the
    // other.
    bool same_trust(const TlsContext& other) const {
        return verify_ == other.verify_ && trust_ == other.trust_;
    }

private:
    TlsContext(ssl_ctx_st* ctx, bool verify) : ctx_(ctx), verify_(verify) {}
    ssl_ctx_st* ctx_;
    bool verify_;
    std::string trust_;  // "" without verification; "system"; or the CA file's identity
};

// One client session on a connected non-blocking socket; the socket stays
// the caller's (the session never closes it).
class TlsSession {
public:
    enum class Status { kDone, kWantRead, kWantWrite, kClosed, kError };

    // `server_name`: sent as SNI and verified (tls_server_name()); empty: the
    // certificate must name `address` (when the context verifies).
    static Result<std::unique_ptr<TlsSession>> make(std::shared_ptr<const TlsContext> context,
                                                    ProbeIo& io, int fd,
                                                    const std::string& server_name,
                                                    const net::IpAddress& address);
    ~TlsSession();
    TlsSession(const TlsSession&) = delete;
    TlsSession& operator=(const TlsSession&) = delete;

    Status handshake();
    // Plaintext out: `written` bytes of `data` were taken (kDone). After
    // kWantWrite/kWantRead, call again with the same data.
    Status write(std::string_view data, std::size_t& written);
    // Plaintext in: `got` bytes (kDone); kClosed: the peer ended the session
    // or closed the connection.
    Status read(char* data, std::size_t size, std::size_t& got);

    // After kError: the socket call's errno when the connection failed
    // underneath (a reset), else 0 and reason() says what TLS found.
    int transport_error() const { return transport_error_; }
    // The library's reason: "certificate has expired", "hostname mismatch",
    // "wrong version number", ...
    const std::string& reason() const { return reason_; }

private:
    struct Transport {
        ProbeIo* io;
        int fd;
        int error = 0;  // of the last failed recv/send (positive errno)
    };
    TlsSession(std::shared_ptr<const TlsContext> context, ProbeIo& io, int fd);
    Status outcome(int rc);
    static int bio_read(::bio_st* bio, char* data, int size);
    static int bio_write(::bio_st* bio, const char* data, int size);
    static long bio_ctrl(::bio_st* bio, int cmd, long num, void* ptr);
    static ::bio_method_st* bio_method();

    std::shared_ptr<const TlsContext> context_;
    Transport transport_;
    ssl_st* ssl_ = nullptr;
    int transport_error_ = 0;
    std::string reason_;
};

}  // namespace xlb::health::detail
