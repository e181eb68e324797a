// SPDX-License-Identifier: Apache-2.0
// Watch: one POST /v3/watch whose answer is a stream of JSON messages, one a
// line: first {"result":{"created":true}}, then the events, until the
// connection closes, the member cancels the watch (compaction) or we stop it.
#include <atomic>
#include <mutex>

#include "codec.h"
#include "transport.h"
#include "xlb/etcd/client.h"

namespace xlb::etcd {

using detail::Endpoint;
using detail::Failure;
using nlohmann::json;

namespace detail {

struct WatchState {
    std::atomic<bool> stopped{false};
    std::mutex mutex;
    httplib::Client* active = nullptr;  // the connection of the running watch
};

}  // namespace detail

Watch::Watch() : state_(std::make_shared<detail::WatchState>()) {}

void Watch::stop() const {
    std::lock_guard lock(state_->mutex);
    state_->stopped = true;
    // Shuts the socket of a request in flight. One not in flight yet sees
    // `stopped` when the member's first message arrives (there always is
    // one: "created" or an error) and ends there.
    if (state_->active) state_->active->stop();
}

bool Watch::stopped() const { return state_->stopped; }

namespace {

// What the stream said, message by message.
struct StreamReader {
    const std::function<void(const WatchBatch&)>& on_batch;
    const std::atomic<bool>& stopped;

    std::string buffer;
    int status = 0;
    bool created = false;  // the member accepted the watch
    bool compacted = false;
    std::int64_t compact_revision = 0;
    std::string error;       // the member's error or cancel reason, or a bad message
    std::string error_body;  // an HTTP error's body

    // False: stop reading.
    bool feed(const char* data, std::size_t size) {
        if (stopped) return false;
        if (status != 200) {
            error_body.append(data, size);
            return true;
        }
        buffer.append(data, size);
        std::size_t start = 0;
        bool go_on = true;
        for (std::size_t end; go_on && (end = buffer.find('\n', start)) != std::string::npos;
             start = end + 1) {
            go_on = message(std::string_view(buffer).substr(start, end - start));
        }
        buffer.erase(0, start);
        return go_on && !stopped;
    }

    bool message(std::string_view line) {
        if (line.find_first_not_of(" \r\t") == std::string_view::npos) return true;
        const json m = json::parse(line, nullptr, false);
        if (m.is_discarded() || !m.is_object()) {
            error = "not a JSON message: " + std::string(line.substr(0, 200));
            return false;
        }
        if (auto why = codec::error_text(m); !why.empty()) {
            error = std::move(why);
            return false;
        }
        const auto result = m.find("result");
        if (result == m.end()) return true;
        try {
            if (result->value("created", false)) {
                created = true;
                return true;
            }
            if (result->value("canceled", false)) {
                compact_revision = codec::int64_field(*result, "compact_revision");
                compacted = compact_revision != 0;
                if (!compacted) {
                    error = "the member canceled the watch";
                    if (auto reason = result->value("cancel_reason", std::string());
                        !reason.empty()) {
                        error += ": " + reason;
                    }
                }
                return false;
            }
            WatchBatch batch;
            if (const auto events = result->find("events"); events != result->end()) {
                for (const auto& e : *events) {
                    Event event;
                    event.type = e.value("type", std::string()) == "DELETE" ? Event::Type::kDelete
                                                                            : Event::Type::kPut;
                    if (const auto kv = e.find("kv"); kv != e.end()) {
                        event.kv = codec::key_value(*kv);
                    }
                    batch.events.push_back(std::move(event));
                }
            }
            // A message lists every event up to its last one's revision; its
            // header revision may be newer (the store's, while catching up
            // in chunks), so only a progress notification (no events) moves
            // the caller to the header's.
            batch.revision = batch.events.empty() ? codec::header_revision(*result)
                                                  : batch.events.back().kv.mod_revision;
            on_batch(batch);
        } catch (const std::exception& e) {
            error = std::string("unexpected message: ") + e.what();
            return false;
        }
        return true;
    }
};

}  // namespace

Result<WatchEnd> Client::watch(std::string_view prefix, std::int64_t start_revision,
                               const std::function<void(const WatchBatch&)>& on_batch,
                               const Watch& handle) const {
    detail::ClientState& state = *state_;
    detail::WatchState& ws = *handle.state_;
    const std::string operation =
        "watch " + std::string(prefix) + " from revision " + std::to_string(start_revision);
    json create = {{"key", codec::base64_encode(prefix)},
                   {"range_end", codec::base64_encode(prefix_end(prefix))},
                   {"progress_notify", true}};
    if (start_revision != 0) create["start_revision"] = std::to_string(start_revision);
    const std::string body = json{{"create_request", std::move(create)}}.dump();

    const std::size_t n = state.endpoints.size();
    const std::size_t first = state.preferred.load(std::memory_order_relaxed) % n;
    std::vector<std::pair<const Endpoint*, Failure>> failures;
    for (std::size_t k = 0; k < n; ++k) {
        const std::size_t i = (first + k) % n;
        const Endpoint& endpoint = state.endpoints[i];
        Failure failure;
        auto client = state.make(i, failure);
        if (client) {
            const auto idle = state.options.watch_idle_timeout;
            client->set_read_timeout(idle.count() / 1000, idle.count() % 1000 * 1000);
            client->set_keep_alive(false);
            {
                std::lock_guard lock(ws.mutex);
                if (ws.stopped) return WatchEnd{WatchEnd::Reason::kStopped, 0};
                ws.active = client.get();
            }
            StreamReader reader{on_batch, ws.stopped};
            httplib::Request request;
            request.method = "POST";
            request.path = "/v3/watch";
            request.body = body;
            request.set_header("Content-Type", "application/json");
            // The member ends the watch when it loses its leader, rather than
            // keep a stream that no write reaches.
            request.set_header("Grpc-Metadata-hasleader", "true");
            request.response_handler = [&](const httplib::Response& response) {
                reader.status = response.status;
                return !ws.stopped;
            };
            request.content_receiver = [&](const char* data, std::size_t size, std::uint64_t,
                                           std::uint64_t) { return reader.feed(data, size); };
            httplib::Response response;
            httplib::Error error = httplib::Error::Success;
            detail::clear_tls_errors();
            bool answered = false;
            {
                detail::SigpipeGuard guard;
                answered = client->send(request, response, error);
            }
            {
                std::lock_guard lock(ws.mutex);
                ws.active = nullptr;
            }
            if (ws.stopped) return WatchEnd{WatchEnd::Reason::kStopped, 0};
            if (reader.compacted) {
                return WatchEnd{WatchEnd::Reason::kCompacted, reader.compact_revision};
            }
            if (reader.created) {
                // The stream ran, then ended: not ours to restart from here.
                failure.text = !reader.error.empty() ? reader.error
                               : answered            ? "the member closed the stream"
                                                     : "stream lost: " +
                                                detail::failure_text(detail::transport_failure(
                                                    error, *client, endpoint, state.options, idle));
                return std::unexpected(detail::endpoint_error(endpoint, operation, failure));
            }
            if (!reader.error.empty()) {
                failure.text = reader.error;
            } else if (reader.status != 0 && reader.status != 200) {
                const json answer = json::parse(reader.error_body, nullptr, false);
                failure.text = codec::error_text(answer);
                if (failure.text.empty()) {
                    failure.text =
                        "HTTP " + std::to_string(reader.status) + " " + reader.error_body;
                }
            } else if (answered) {
                failure.text = "the member closed the stream before accepting the watch";
            } else {
                failure = detail::transport_failure(error, *client, endpoint, state.options,
                                                    state.options.request_timeout);
            }
        }
        const bool retry = failure.retryable;
        failures.emplace_back(&endpoint, std::move(failure));
        if (!retry) break;
    }
    return std::unexpected(detail::endpoints_error(operation, failures));
}

}  // namespace xlb::etcd
