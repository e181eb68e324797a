// SPDX-License-Identifier: Apache-2.0
#include "capture_stream.h"

#include "xlb/api/data_plane_view.h"

namespace xlb::api::detail {

std::string capture_frame(char type, std::string_view payload) {
    std::string out;
    out.reserve(5 + payload.size());
    out += type;
    const auto n = static_cast<std::uint32_t>(payload.size());
    for (int shift = 24; shift >= 0; shift -= 8) out += static_cast<char>((n >> shift) & 0xff);
    out += payload;
    return out;
}

CaptureStream::CaptureStream(std::unique_ptr<capture::Session> session, capture::PcapStream pcap,
                             CaptureLimits limits, std::function<void()> on_end)
    : session_(std::move(session)),
      pcap_(std::move(pcap)),
      limits_(limits),
      on_end_(std::move(on_end)),
      packets_(limits.packets) {}

CaptureStream::~CaptureStream() {
    session_.reset();  // the flag off before the slot is free
    if (on_end_) on_end_();
}

void CaptureStream::take(const capture::Record& r) {
    const auto taken = packets_.take(r.header);
    if (taken == capture::PacketRecords::Take::kSkip) return;
    if (taken == capture::PacketRecords::Take::kPacket) ++by_outcome_[r.header.outcome];
    pcap_.write(r, to_realtime_ns_);
}

std::string CaptureStream::finish(std::string why) {
    // The flag off first; then what the ring still holds of matched packets.
    session_->stop();
    const capture::Session::Sink sink = [this](const capture::Record& r) { take(r); };
    (void)session_->poll(0, sink);
    const auto counters = session_->counters();
    nlohmann::json summary = {{"ended", std::move(why)},
                              {"packets", packets_.packets()},
                              {"records", packets_.records()},
                              {"matched", counters.matched},
                              {"lost", counters.lost}};
    nlohmann::json outcomes = nlohmann::json::object();
    for (const auto& [outcome, n] : by_outcome_) outcomes[outcome_name(outcome)] = n;
    summary["by_outcome"] = std::move(outcomes);
    ended_ = true;
    std::string out = capture_frame(kCapturePcapFrame, pcap_.take());
    out += capture_frame(kCaptureEndFrame, summary.dump());
    return out;
}

std::optional<std::string> CaptureStream::next(std::chrono::milliseconds wait) {
    if (ended_) return std::nullopt;
    if (!header_sent_) {
        header_sent_ = true;
        return capture_frame(kCapturePcapFrame, pcap_.take());
    }
    if (limits_.duration) {
        const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
            started_ + *limits_.duration - Clock::now());
        if (left.count() <= 0) return finish("duration");
        wait = std::min(wait, left);
    }
    const capture::Session::Sink sink = [this](const capture::Record& r) { take(r); };
    auto polled = session_->poll(static_cast<int>(wait.count()), sink);
    if (!polled) return finish("error: " + polled.error().message());
    if (packets_.full()) return finish("count");
    return capture_frame(kCapturePcapFrame, pcap_.take());
}

}  // namespace xlb::api::detail
