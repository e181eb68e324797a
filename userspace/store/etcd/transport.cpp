// SPDX-License-Identifier: Apache-2.0
#include "transport.h"

#include <netdb.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <pthread.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <nlohmann/json.hpp>
#include <utility>

namespace xlb::etcd::detail {

namespace {

// Idle connections kept per endpoint: as many as threads that usually call
// at once (the agent's watch has its own).
constexpr std::size_t kIdlePerEndpoint = 4;

struct SocketGuard {
    int fd = -1;
    ~SocketGuard() {
        if (fd >= 0) ::close(fd);
    }
};

// httplib reports a failed connect without its errno; one blocking connect
// of our own finds it (refused, unreachable, ...), 0 when it now succeeds.
int connect_errno(const Endpoint& endpoint, std::chrono::milliseconds timeout) {
    addrinfo hints{};
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = AI_NUMERICSERV;
    addrinfo* found = nullptr;
    const std::string port = std::to_string(endpoint.port);
    if (getaddrinfo(endpoint.host.c_str(), port.c_str(), &hints, &found) != 0 || !found) {
        return EHOSTUNREACH;
    }
    int error = 0;
    SocketGuard socket{::socket(found->ai_family, found->ai_socktype | SOCK_CLOEXEC, 0)};
    if (socket.fd < 0) {
        error = errno;
    } else {
        timeval tv{};
        tv.tv_sec = timeout.count() / 1000;
        tv.tv_usec = timeout.count() % 1000 * 1000;
        setsockopt(socket.fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
        if (::connect(socket.fd, found->ai_addr, found->ai_addrlen) != 0) {
            error = errno == EINPROGRESS ? ETIMEDOUT : errno;
        }
    }
    freeaddrinfo(found);
    return error;
}

// The reason of the last error in this thread's OpenSSL queue (the most
// specific one), and the queue emptied.
std::string take_tls_reason() {
    unsigned long last = 0;
    while (const unsigned long e = ERR_get_error()) last = e;
    if (last == 0) return {};
    if (const char* reason = ERR_reason_error_string(last)) return reason;
    char text[256];
    ERR_error_string_n(last, text, sizeof text);
    return text;
}

// TLS 1.3 ends the client's half of the handshake before the member checks
// the client certificate; its refusal (an alert) then lands on a connection
// httplib has already given up on while writing the request. A handshake of
// our own, waiting briefly for that alert, finds the reason: empty when the
// member accepts (then the failure was something else).
std::string tls_refusal(const Endpoint& endpoint, const ClientOptions& options) {
    addrinfo hints{};
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = AI_NUMERICSERV;
    addrinfo* found = nullptr;
    const std::string port = std::to_string(endpoint.port);
    if (getaddrinfo(endpoint.host.c_str(), port.c_str(), &hints, &found) != 0 || !found) return {};
    SocketGuard socket{::socket(found->ai_family, found->ai_socktype | SOCK_CLOEXEC, 0)};
    const auto timeout = std::min(options.dial_timeout, std::chrono::milliseconds(1000));
    timeval tv{};
    tv.tv_sec = timeout.count() / 1000;
    tv.tv_usec = timeout.count() % 1000 * 1000;
    bool connected = false;
    if (socket.fd >= 0) {
        setsockopt(socket.fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
        setsockopt(socket.fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
        connected = ::connect(socket.fd, found->ai_addr, found->ai_addrlen) == 0;
    }
    freeaddrinfo(found);
    if (!connected) return {};

    std::string reason;
    ERR_clear_error();
    SSL_CTX* ctx = SSL_CTX_new(TLS_client_method());
    SSL* ssl = nullptr;
    if (ctx && SSL_CTX_load_verify_locations(ctx, options.ca.c_str(), nullptr) == 1 &&
        (options.cert.empty() ||
         (SSL_CTX_use_certificate_chain_file(ctx, options.cert.c_str()) == 1 &&
          SSL_CTX_use_PrivateKey_file(ctx, options.key.c_str(), SSL_FILETYPE_PEM) == 1)) &&
        (ssl = SSL_new(ctx)) != nullptr && SSL_set_fd(ssl, socket.fd) == 1) {
        SSL_set_tlsext_host_name(ssl, endpoint.host.c_str());
        char byte = 0;
        // The member sends nothing before a request, except its refusal.
        if (SSL_connect(ssl) != 1 || SSL_read(ssl, &byte, 1) <= 0) reason = take_tls_reason();
    }
    // A timeout or an end of stream is not a refusal.
    if (reason.find("alert") == std::string::npos) reason.clear();
    ERR_clear_error();
    if (ssl) SSL_free(ssl);
    if (ctx) SSL_CTX_free(ctx);
    return reason;
}

std::string with_reason(std::string text, const std::string& reason) {
    if (!reason.empty()) text += ": " + reason;
    return text;
}

}  // namespace

void clear_tls_errors() { ERR_clear_error(); }

SigpipeGuard::SigpipeGuard() {
    sigset_t pipe;
    sigemptyset(&pipe);
    sigaddset(&pipe, SIGPIPE);
    sigset_t pending;
    sigpending(&pending);
    was_pending_ = sigismember(&pending, SIGPIPE) == 1;
    sigset_t old;
    pthread_sigmask(SIG_BLOCK, &pipe, &old);
    was_blocked_ = sigismember(&old, SIGPIPE) == 1;
}

SigpipeGuard::~SigpipeGuard() {
    sigset_t pipe;
    sigemptyset(&pipe);
    sigaddset(&pipe, SIGPIPE);
    if (!was_pending_) {
        sigset_t pending;
        sigpending(&pending);
        if (sigismember(&pending, SIGPIPE) == 1) {
            const timespec now{};
            while (sigtimedwait(&pipe, nullptr, &now) < 0 && errno == EINTR) {
            }
        }
    }
    if (!was_blocked_) pthread_sigmask(SIG_UNBLOCK, &pipe, nullptr);
}

Answer post(httplib::Client& client, const std::string& path, const std::string& body) {
    Answer answer;
    httplib::Request request;
    request.method = "POST";
    request.path = path;
    request.body = body;
    request.set_header("Content-Type", "application/json");
    request.response_handler = [&](const httplib::Response& response) {
        answer.status = response.status;
        return true;
    };
    request.content_receiver = [&](const char* data, std::size_t size, std::uint64_t,
                                   std::uint64_t) {
        answer.body.append(data, size);
        return true;
    };
    httplib::Response response;
    answer.error = httplib::Error::Success;
    clear_tls_errors();
    {
        SigpipeGuard guard;
        answer.complete = client.send(request, response, answer.error);
    }
    if (!answer.complete && answer.status != 0 && answer.error == httplib::Error::Read) {
        answer.complete = nlohmann::json::accept(answer.body);
    }
    return answer;
}

std::string failure_text(const Failure& failure) {
    if (failure.code == 0) return failure.text;
    return failure.text + ": " + std::strerror(failure.code);
}

Error endpoint_error(const Endpoint& endpoint, const std::string& operation,
                     const Failure& failure) {
    Error e = make_error(failure.code, operation + ": " + failure.text);
    e.add_context("etcd " + endpoint.url);
    return e;
}

Error endpoints_error(const std::string& operation,
                      const std::vector<std::pair<const Endpoint*, Failure>>& failures) {
    if (failures.size() == 1) {
        return endpoint_error(*failures.front().first, operation, failures.front().second);
    }
    std::string text = operation + ": no member answered";
    const char* separator = ": ";
    for (const auto& [endpoint, failure] : failures) {
        text += separator + endpoint->url + ": " + failure_text(failure);
        separator = "; ";
    }
    Error e = make_error(0, std::move(text));
    e.add_context("etcd");
    return e;
}

Failure transport_failure(httplib::Error error, httplib::Client& client, const Endpoint& endpoint,
                          const ClientOptions& options, std::chrono::milliseconds request_timeout) {
    const auto dial_timeout = options.dial_timeout;
    std::string reason = take_tls_reason();
    if (endpoint.tls && reason.find("alert") == std::string::npos &&
        (error == httplib::Error::Write || error == httplib::Error::Read)) {
        if (auto refusal = tls_refusal(endpoint, options); !refusal.empty()) reason = refusal;
    }
    Failure f;
    switch (error) {
        case httplib::Error::Connection:
            f.code = connect_errno(endpoint, dial_timeout);
            f.text = f.code != 0 ? "connect" : with_reason("cannot connect", reason);
            f.unsent = true;
            break;
        case httplib::Error::ConnectionTimeout:
            f.text = "no connection within " + std::to_string(dial_timeout.count()) + " ms";
            f.unsent = true;
            break;
        case httplib::Error::SSLConnection:
            f.text = with_reason("TLS handshake failed", reason);
            f.unsent = true;
            break;
        case httplib::Error::SSLLoadingCerts:
            f.text = with_reason("TLS: cannot load the CA certificates", reason);
            f.unsent = true;
            f.retryable = false;
            break;
        case httplib::Error::SSLServerVerification: {
            const long verify = client.get_openssl_verify_result();
            if (verify != X509_V_OK) {
                f.text = std::string("TLS: the member's certificate is not trusted: ") +
                         X509_verify_cert_error_string(verify);
            } else {
                f.text = "TLS: the member's certificate is not valid for " + endpoint.host;
            }
            f.unsent = true;
            break;
        }
        case httplib::Error::Read:
        case httplib::Error::Write:
            if (endpoint.tls && reason.find("alert") != std::string::npos) {
                // The member's TLS layer refused the connection (TLS 1.3
                // checks the client certificate after the client's side of
                // the handshake): the request was not served.
                f.text = "TLS: the member refused the connection: " + reason;
                f.unsent = true;
            } else if (error == httplib::Error::Write) {
                // A request not written whole is not served.
                f.text = with_reason("cannot send the request", reason);
                f.unsent = true;
            } else {
                f.text = with_reason("no answer within " + std::to_string(request_timeout.count()) +
                                         " ms, or the connection was closed",
                                     reason);
            }
            break;
        case httplib::Error::Canceled:
            f.text = "canceled";
            f.retryable = false;
            break;
        default: f.text = with_reason("HTTP error " + httplib::to_string(error), reason); break;
    }
    return f;
}

std::unique_ptr<httplib::Client> ClientState::make(std::size_t i, Failure& failure) const {
    const Endpoint& endpoint = endpoints[i];
    std::unique_ptr<httplib::Client> client;
    if (endpoint.tls) {
        clear_tls_errors();
        client =
            std::make_unique<httplib::Client>(endpoint.scheme_host_port, options.cert, options.key);
        if (!client->is_valid()) {
            failure.text = with_reason("TLS: cannot load the client certificate " + options.cert +
                                           " and key " + options.key,
                                       take_tls_reason());
            failure.unsent = true;
            failure.retryable = false;
            return nullptr;
        }
        client->set_ca_cert_path(options.ca);
        client->enable_server_certificate_verification(true);
    } else {
        client = std::make_unique<httplib::Client>(endpoint.scheme_host_port);
    }
    const auto split = [](std::chrono::milliseconds t) {
        return std::pair<time_t, time_t>(t.count() / 1000, t.count() % 1000 * 1000);
    };
    const auto [dial_s, dial_us] = split(options.dial_timeout);
    const auto [request_s, request_us] = split(options.request_timeout);
    client->set_connection_timeout(dial_s, dial_us);
    client->set_read_timeout(request_s, request_us);
    client->set_write_timeout(request_s, request_us);
    client->set_keep_alive(true);
    return client;
}

std::unique_ptr<httplib::Client> ClientState::take(std::size_t i, Failure& failure) {
    {
        std::lock_guard lock(mutex);
        auto& pool = idle[i];
        if (!pool.empty()) {
            auto client = std::move(pool.back());
            pool.pop_back();
            return client;
        }
    }
    return make(i, failure);
}

void ClientState::give_back(std::size_t i, std::unique_ptr<httplib::Client> client) {
    std::lock_guard lock(mutex);
    if (idle[i].size() < kIdlePerEndpoint) idle[i].push_back(std::move(client));
}

}  // namespace xlb::etcd::detail
