// SPDX-License-Identifier: Apache-2.0
// Internal to xlb_api: the body of POST /v1/capture (docs/api.md). A capture
// streams as frames, each a type byte, a 4-byte big-endian length and that
// many bytes: 'P' frames carry the pcap stream (the first one its file
// header; an empty one every second keeps the connection checked), the last
// frame, 'E', a JSON summary.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>

#include "xlb/capture/capture.h"
#include "xlb/capture/pcap_stream.h"

namespace xlb::api::detail {

inline constexpr char kCapturePcapFrame = 'P';
inline constexpr char kCaptureEndFrame = 'E';

std::string capture_frame(char type, std::string_view payload);

struct CaptureLimits {
    std::optional<std::uint64_t> packets;  // stop after this many matched packets
    std::optional<std::chrono::milliseconds> duration;
};

class CaptureStream {
public:
    using Clock = std::chrono::steady_clock;
    // on_end runs when the stream is destroyed (the capture's slot is free).
    CaptureStream(std::unique_ptr<capture::Session> session, capture::PcapStream pcap,
                  CaptureLimits limits, std::function<void()> on_end);
    ~CaptureStream();
    CaptureStream(const CaptureStream&) = delete;
    CaptureStream& operator=(const CaptureStream&) = delete;

    // The next frame of the body, after waiting up to `wait` for records;
    // nullopt once the end frame was given. A read error of the ring ends
    // the capture with it in the summary.
    std::optional<std::string> next(std::chrono::milliseconds wait);
    bool ended() const { return ended_; }

private:
    void take(const capture::Record& r);
    std::string finish(std::string why);

    std::unique_ptr<capture::Session> session_;
    capture::PcapStream pcap_;
    CaptureLimits limits_;
    std::function<void()> on_end_;
    Clock::time_point started_ = Clock::now();
    std::int64_t to_realtime_ns_ = capture::monotonic_to_realtime_ns();
    bool header_sent_ = false;
    bool ended_ = false;
    capture::PacketRecords packets_;
    std::map<std::uint32_t, std::uint64_t> by_outcome_;  // packets per outcome
};

}  // namespace xlb::api::detail
