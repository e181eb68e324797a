// SPDX-License-Identifier: Apache-2.0
// Packet capture: POST /v1/capture streams one, GET /v1/capture says whether
// one runs (docs/api.md, docs/capture.md).
#include <spdlog/spdlog.h>

#include "capture_stream.h"
#include "handlers.h"
#include "xlb/config/json.h"

namespace xlb::api::detail {

// POST /v1/capture: checks everything, takes the one capture slot, then
// streams the capture (capture_stream.h) until its count, its duration,
// or the client leaves.
void start_capture(Api& api, const httplib::Request& req, httplib::Response& res) {
    const bpf::LbProgram* program = api.s.data_plane.capture_program();
    if (!program) return reject(req, res, {501, "this agent has no data path to capture on"});
    const char* expected =
        "an object with any of vip, backend, src, outcomes, count, duration_ms, snaplen, "
        "e.g. {\"vip\": \"198.51.100.10:80/tcp\", \"outcomes\": [\"drop\"], \"count\": 100}";
    json body = json::object();
    if (!req.body.empty()) {
        auto parsed = body_json(req, expected);
        if (!parsed) return reject(req, res, parsed.error());
        body = std::move(*parsed);
    }
    auto request = config::capture_request_from_json(body, XLB_CAPTURE_DATA_MAX);
    if (!request) return reject(req, res, {400, request.error()});

    capture::Selection selection;
    selection.outcomes = 0;
    std::vector<const char*> names;
    for (std::uint32_t o = 0; o < XLB_OUT__MAX; ++o) names.push_back(outcome_name(o));
    for (const std::string& word : request->outcomes) {
        auto bits = capture::outcome_bits(word, names);
        if (!bits) return reject(req, res, {400, bits.error().message()});
        selection.outcomes |= *bits;
    }
    if (request->backend) selection.backend = *request->backend;
    if (request->src) selection.src = *request->src;
    if (request->snaplen) selection.snaplen = *request->snaplen;
    CaptureLimits limits;
    if (request->count) limits.packets = *request->count;
    if (request->duration) limits.duration = *request->duration;
    if (request->vip) {
        const std::string key = request->vip->to_string();
        auto vip = one_status(api, key);
        if (!vip) return reject(req, res, vip.error());
        if (!vip->vip_id)
            return reject(req, res,
                          {409, "vip: " + key + " is not in the data path yet (not applied)"});
        selection.vip_id = *vip->vip_id;
    }
    if (selection.outcomes == 0) selection.outcomes = (1U << XLB_OUT__MAX) - 1;
    auto filter = capture::make_filter(selection);
    if (!filter) return reject(req, res, {400, filter.error().message()});
    auto pcap = capture::PcapStream::open(selection.snaplen);
    if (!pcap) return reject(req, res, {500, pcap.error().message()});
    bool idle = false;
    if (!api.capture_busy->compare_exchange_strong(idle, true))
        return reject(req, res, {409, "a capture is already running (one at a time)"});
    auto session = capture::Session::start(*program, *filter);
    if (!session) {
        api.capture_busy->store(false);
        return reject(req, res, {409, session.error().message()});
    }
    spdlog::info("api: capture started: {}", req.body.empty() ? "{}" : req.body);
    auto stream =
        std::make_shared<CaptureStream>(std::move(*session), std::move(*pcap), limits,
                                        [busy = api.capture_busy] { busy->store(false); });
    res.status = 200;
    res.set_chunked_content_provider(
        "application/vnd.xlb.capture",
        [stream](std::size_t, httplib::DataSink& sink) {
            auto frame = stream->next(std::chrono::milliseconds(1000));
            if (!frame) {
                sink.done();
                return true;
            }
            // false: the client is gone; the stream's end frees the slot
            return sink.write(frame->data(), frame->size());
        },
        [stream](bool) { spdlog::info("api: capture ended"); });
}

// GET /v1/capture: whether a capture runs, and its kernel counters.
void capture_status(Api& api, const httplib::Request&, httplib::Response& res) {
    const bpf::LbProgram* program = api.s.data_plane.capture_program();
    json body = {{"available", program != nullptr}, {"active", api.capture_busy->load()}};
    if (program) {
        const auto c = program->capture_counters();
        body["capturing"] = program->capture_on();
        body["matched"] = c.matched;
        body["lost"] = c.lost;
    }
    send_json(res, 200, body);
}

}  // namespace xlb::api::detail
