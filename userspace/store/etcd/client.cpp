// SPDX-License-Identifier: Apache-2.0
#include "xlb/etcd/client.h"

#include <openssl/err.h>
#include <openssl/ssl.h>

#include <cerrno>
#include <charconv>
#include <cstdio>
#include <exception>
#include <utility>

#include "codec.h"
#include "transport.h"

namespace xlb::etcd {

using detail::ClientState;
using detail::Endpoint;
using detail::Failure;
using nlohmann::json;

namespace {

constexpr int kDefaultPort = 2379;

Result<Endpoint> parse_endpoint(const std::string& url) {
    const auto bad = [&](const std::string& why) {
        return fail("etcd endpoint '" + url + "': " + why,
                    "expected http://HOST:PORT or https://HOST:PORT");
    };
    Endpoint endpoint;
    endpoint.url = url;
    std::string_view rest = url;
    if (rest.starts_with("http://")) {
        rest.remove_prefix(7);
    } else if (rest.starts_with("https://")) {
        rest.remove_prefix(8);
        endpoint.tls = true;
    } else {
        return bad("no http:// or https://");
    }
    if (rest.ends_with('/')) rest.remove_suffix(1);
    if (rest.find('/') != std::string_view::npos) return bad("a path is not allowed");
    std::string_view port;
    if (rest.starts_with('[')) {
        const auto close = rest.find(']');
        if (close == std::string_view::npos) return bad("no ']' after the IPv6 address");
        endpoint.host = std::string(rest.substr(1, close - 1));
        rest.remove_prefix(close + 1);
        if (!rest.empty()) {
            if (rest.front() != ':') return bad("':PORT' expected after ']'");
            port = rest.substr(1);
        }
    } else {
        const auto colon = rest.rfind(':');
        endpoint.host = std::string(rest.substr(0, colon));
        if (colon != std::string_view::npos) port = rest.substr(colon + 1);
        if (endpoint.host.find(':') != std::string::npos) {
            return bad("an IPv6 address goes in brackets");
        }
    }
    if (endpoint.host.empty()) return bad("no host");
    endpoint.port = kDefaultPort;
    if (!port.empty() || rest.ends_with(':')) {
        int value = 0;
        const auto [end, ec] = std::from_chars(port.data(), port.data() + port.size(), value);
        if (ec != std::errc() || end != port.data() + port.size() || value < 1 || value > 65535) {
            return bad("port '" + std::string(port) + "' is not 1-65535");
        }
        endpoint.port = value;
    }
    const bool v6 = endpoint.host.find(':') != std::string::npos;
    endpoint.scheme_host_port = std::string(endpoint.tls ? "https://" : "http://") +
                                (v6 ? "[" + endpoint.host + "]" : endpoint.host) + ":" +
                                std::to_string(endpoint.port);
    return endpoint;
}

Result<void> check_readable(const std::string& path, const std::string& what) {
    std::FILE* file = std::fopen(path.c_str(), "r");
    if (!file) return fail_on(errno, "etcd: read " + what, path);
    std::fclose(file);
    return {};
}

// What OpenSSL says about the last failure, the queue emptied.
std::string tls_reason() {
    unsigned long last = 0;
    while (const unsigned long e = ERR_get_error()) last = e;
    const char* reason = last != 0 ? ERR_reason_error_string(last) : nullptr;
    return reason ? reason : "not PEM or not valid";
}

// Loads the PEM files as a connection will, so that a bad file is named at
// start rather than at the first request.
Result<void> check_tls_files(const ClientOptions& options) {
    SSL_CTX* ctx = SSL_CTX_new(TLS_client_method());
    if (!ctx) return fail("etcd: TLS: cannot create a context: " + tls_reason());
    Result<void> result;
    ERR_clear_error();
    if (SSL_CTX_load_verify_locations(ctx, options.ca.c_str(), nullptr) != 1) {
        result = fail("etcd: TLS: CA file " + options.ca + ": " + tls_reason());
    } else if (!options.cert.empty() &&
               SSL_CTX_use_certificate_chain_file(ctx, options.cert.c_str()) != 1) {
        result = fail("etcd: TLS: client certificate " + options.cert + ": " + tls_reason());
    } else if (!options.cert.empty() &&
               SSL_CTX_use_PrivateKey_file(ctx, options.key.c_str(), SSL_FILETYPE_PEM) != 1) {
        result = fail("etcd: TLS: client key " + options.key + ": " + tls_reason());
    } else if (!options.cert.empty() && SSL_CTX_check_private_key(ctx) != 1) {
        result = fail("etcd: TLS: client key " + options.key + " does not match certificate " +
                      options.cert);
    }
    SSL_CTX_free(ctx);
    return result;
}

// Whether a request may be sent again to another member after it failed
// on one in a way that does not say whether it was served.
enum class Replay { kReadOnly, kWrite };

// One request, failing over across the endpoints. The answer's JSON body.
Result<json> call(ClientState& state, const std::string& operation, const char* path,
                  const json& body, Replay replay) {
    const std::string text = body.dump();
    const std::size_t n = state.endpoints.size();
    const std::size_t first = state.preferred.load(std::memory_order_relaxed) % n;
    std::vector<std::pair<const Endpoint*, Failure>> failures;
    for (std::size_t k = 0; k < n; ++k) {
        const std::size_t i = (first + k) % n;
        const Endpoint& endpoint = state.endpoints[i];
        Failure failure;
        auto client = state.take(i, failure);
        if (client) {
            const detail::Answer res = detail::post(*client, path, text);
            if (!res.complete) {
                failure = detail::transport_failure(res.error, *client, endpoint, state.options,
                                                    state.options.request_timeout);
                if (replay == Replay::kWrite && !failure.unsent) failure.retryable = false;
            } else {
                // A connection whose answer httplib could not finish is not reused.
                const bool reusable = res.error == httplib::Error::Success;
                json answer = json::parse(res.body, nullptr, false);
                if (res.status != 200) {
                    std::string why = codec::error_text(answer);
                    if (why.empty()) why = "HTTP " + std::to_string(res.status) + " " + res.body;
                    failure.text = why;
                    // 503 (gRPC Unavailable): this member has no leader or is
                    // stopping; another may serve a read. A write may have been
                    // proposed before the leader was lost.
                    failure.retryable = res.status == 503 && replay == Replay::kReadOnly;
                    if (reusable) state.give_back(i, std::move(client));
                } else if (answer.is_discarded() || !answer.is_object()) {
                    failure.text = "not a JSON object in the answer: " + res.body.substr(0, 200);
                    failure.retryable = false;
                } else {
                    if (reusable) state.give_back(i, std::move(client));
                    state.preferred.store(i, std::memory_order_relaxed);
                    return answer;
                }
            }
        }
        const bool retry = failure.retryable;
        failures.emplace_back(&endpoint, std::move(failure));
        if (!retry) break;
    }
    return std::unexpected(detail::endpoints_error(operation, failures));
}

// Decodes an answer with `decode`, turning a wrong shape into an error.
template <typename T, typename F>
Result<T> decode(const std::string& operation, const json& answer, F&& decode) {
    try {
        return decode(answer);
    } catch (const std::exception& e) {
        return fail("etcd: " + operation + ": unexpected answer: " + e.what());
    }
}

// How a key appears in an error: printable as is, else escaped.
std::string shown(std::string_view key) {
    std::string out;
    for (const unsigned char c : key) {
        if (c >= 0x20 && c < 0x7f) {
            out += static_cast<char>(c);
        } else {
            char hex[5];
            std::snprintf(hex, sizeof hex, "\\x%02x", c);
            out += hex;
        }
    }
    return out;
}

}  // namespace

std::string prefix_end(std::string_view prefix) {
    std::string end(prefix);
    while (!end.empty()) {
        auto& last = reinterpret_cast<unsigned char&>(end.back());
        if (last < 0xff) {
            ++last;
            return end;
        }
        end.pop_back();
    }
    // Every key: etcd's "\0" range end means "to the end of the keyspace".
    return std::string(1, '\0');
}

Op Op::put(std::string key, std::string value, std::int64_t lease) {
    Op op;
    op.type = Type::kPut;
    op.key = std::move(key);
    op.value = std::move(value);
    op.lease = lease;
    return op;
}
Op Op::del(std::string key) {
    Op op;
    op.type = Type::kDelete;
    op.key = std::move(key);
    return op;
}
Op Op::del_prefix(std::string prefix) {
    Op op = del(std::move(prefix));
    op.prefix = true;
    return op;
}
Op Op::get(std::string key) {
    Op op;
    op.type = Type::kGet;
    op.key = std::move(key);
    return op;
}
Op Op::get_prefix(std::string prefix) {
    Op op = get(std::move(prefix));
    op.prefix = true;
    return op;
}

Result<Client> Client::open(ClientOptions options) {
    if (options.endpoints.empty()) return fail("etcd: no endpoint given");
    auto state = std::make_unique<ClientState>();
    bool tls = false;
    for (const auto& url : options.endpoints) {
        auto endpoint = parse_endpoint(url);
        if (!endpoint) return std::unexpected(endpoint.error());
        tls = tls || endpoint->tls;
        state->endpoints.push_back(std::move(*endpoint));
    }
    if (options.cert.empty() != options.key.empty()) {
        return fail("etcd: a client certificate needs its key, and a key its certificate",
                    "set both cert and key, or neither");
    }
    if (tls) {
        if (options.ca.empty()) {
            return fail(
                "etcd: https endpoints need the CA file that signed the members' "
                "certificates",
                "set ca");
        }
        if (auto r = check_readable(options.ca, "CA file"); !r) return std::unexpected(r.error());
        if (!options.cert.empty()) {
            if (auto r = check_readable(options.cert, "client certificate"); !r) {
                return std::unexpected(r.error());
            }
            if (auto r = check_readable(options.key, "client key"); !r) {
                return std::unexpected(r.error());
            }
        }
        if (auto r = check_tls_files(options); !r) return std::unexpected(r.error());
    }
    if (options.dial_timeout.count() <= 0 || options.request_timeout.count() <= 0) {
        return fail("etcd: timeouts must be positive");
    }
    state->idle.resize(state->endpoints.size());
    state->options = std::move(options);
    return Client(std::move(state));
}

Client::Client(std::unique_ptr<ClientState> state) : state_(std::move(state)) {}
Client::Client(Client&&) noexcept = default;
Client& Client::operator=(Client&&) noexcept = default;
Client::~Client() = default;

const ClientOptions& Client::options() const { return state_->options; }

namespace {

Result<Range> range(ClientState& state, std::string_view key, bool prefix, std::int64_t revision) {
    const std::string operation = "range " + shown(key) + (prefix ? " (prefix)" : "") +
                                  (revision ? " at revision " + std::to_string(revision) : "");
    auto answer = call(state, operation, "/v3/kv/range",
                       codec::range_request(key, prefix, revision), Replay::kReadOnly);
    if (!answer) return std::unexpected(answer.error());
    return decode<Range>(operation, *answer, [](const json& a) {
        return Range{codec::kvs(a), codec::header_revision(a)};
    });
}

}  // namespace

Result<Range> Client::get(std::string_view key, std::int64_t revision) const {
    return range(*state_, key, false, revision);
}

Result<Range> Client::get_prefix(std::string_view prefix, std::int64_t revision) const {
    return range(*state_, prefix, true, revision);
}

Result<std::int64_t> Client::put(std::string_view key, std::string_view value,
                                 std::int64_t lease) const {
    const std::string operation = "put " + shown(key);
    json body = {{"key", codec::base64_encode(key)}, {"value", codec::base64_encode(value)}};
    if (lease != 0) body["lease"] = std::to_string(lease);
    auto answer = call(*state_, operation, "/v3/kv/put", body, Replay::kWrite);
    if (!answer) return std::unexpected(answer.error());
    return decode<std::int64_t>(operation, *answer, codec::header_revision);
}

Result<std::int64_t> Client::del(std::string_view key) const {
    const std::string operation = "delete " + shown(key);
    auto answer = call(*state_, operation, "/v3/kv/deleterange",
                       {{"key", codec::base64_encode(key)}}, Replay::kWrite);
    if (!answer) return std::unexpected(answer.error());
    return decode<std::int64_t>(operation, *answer, codec::header_revision);
}

Result<Txn> Client::txn(std::vector<Compare> compares, std::vector<Op> on_success,
                        std::vector<Op> on_failure) const {
    std::string operation = "txn";
    for (const auto& c : compares) {
        operation += " " + shown(c.key) + "@" + std::to_string(c.mod_revision);
    }
    json body = {
        {"compare", json::array()}, {"success", json::array()}, {"failure", json::array()}};
    for (const auto& c : compares) body["compare"].push_back(codec::compare(c));
    for (const auto& op : on_success) body["success"].push_back(codec::request_op(op));
    for (const auto& op : on_failure) body["failure"].push_back(codec::request_op(op));
    auto answer = call(*state_, operation, "/v3/kv/txn", body, Replay::kWrite);
    if (!answer) return std::unexpected(answer.error());
    return decode<Txn>(operation, *answer, [](const json& a) {
        Txn txn;
        txn.succeeded = a.value("succeeded", false);
        txn.revision = codec::header_revision(a);
        if (const auto responses = a.find("responses"); responses != a.end()) {
            for (const auto& response : *responses) {
                const auto got = response.find("response_range");
                if (got == response.end()) continue;
                for (auto& kv : codec::kvs(*got)) txn.got.push_back(std::move(kv));
            }
        }
        return txn;
    });
}

Result<Lease> Client::grant(std::chrono::seconds ttl) const {
    const std::string operation = "grant a lease of " + std::to_string(ttl.count()) + " s";
    auto answer = call(*state_, operation, "/v3/lease/grant",
                       {{"TTL", std::to_string(ttl.count())}}, Replay::kWrite);
    if (!answer) return std::unexpected(answer.error());
    return decode<Lease>(operation, *answer, [](const json& a) {
        if (const auto why = codec::error_text(a); !why.empty()) throw std::runtime_error(why);
        return Lease{codec::int64_field(a, "ID"),
                     std::chrono::seconds(codec::int64_field(a, "TTL"))};
    });
}

Result<std::chrono::seconds> Client::keep_alive(std::int64_t lease) const {
    const std::string operation = "keep lease " + std::to_string(lease) + " alive";
    // A stream in gRPC; through the gateway, one request gives one answer.
    auto answer = call(*state_, operation, "/v3/lease/keepalive", {{"ID", std::to_string(lease)}},
                       Replay::kReadOnly);
    if (!answer) return std::unexpected(answer.error());
    return decode<std::chrono::seconds>(operation, *answer, [](const json& a) {
        if (const auto why = codec::error_text(a); !why.empty()) throw std::runtime_error(why);
        const json& result = a.contains("result") ? a.at("result") : a;
        // A lease that is gone comes back without its TTL.
        return std::chrono::seconds(std::max<std::int64_t>(0, codec::int64_field(result, "TTL")));
    });
}

Result<void> Client::revoke(std::int64_t lease) const {
    const std::string operation = "revoke lease " + std::to_string(lease);
    auto answer = call(*state_, operation, "/v3/lease/revoke", {{"ID", std::to_string(lease)}},
                       Replay::kWrite);
    if (!answer) return std::unexpected(answer.error());
    return {};
}

Result<LeaseTtl> Client::time_to_live(std::int64_t lease) const {
    const std::string operation = "time to live of lease " + std::to_string(lease);
    auto answer = call(*state_, operation, "/v3/lease/timetolive", {{"ID", std::to_string(lease)}},
                       Replay::kReadOnly);
    if (!answer) return std::unexpected(answer.error());
    return decode<LeaseTtl>(operation, *answer, [](const json& a) {
        return LeaseTtl{std::chrono::seconds(codec::int64_field(a, "TTL")),
                        std::chrono::seconds(codec::int64_field(a, "grantedTTL"))};
    });
}

Result<void> Client::compact(std::int64_t revision) const {
    const std::string operation = "compact to revision " + std::to_string(revision);
    auto answer = call(*state_, operation, "/v3/kv/compaction",
                       {{"revision", std::to_string(revision)}}, Replay::kWrite);
    if (!answer) return std::unexpected(answer.error());
    return {};
}

Result<std::int64_t> Client::revision() const {
    const std::string operation = "read the revision";
    json body = codec::range_request(std::string_view("\0", 1), false, 0);
    body["count_only"] = true;
    auto answer = call(*state_, operation, "/v3/kv/range", body, Replay::kReadOnly);
    if (!answer) return std::unexpected(answer.error());
    return decode<std::int64_t>(operation, *answer, codec::header_revision);
}

}  // namespace xlb::etcd
