// SPDX-License-Identifier: Apache-2.0
// Capture records written as pcap (docs/capture.md). Apart from capture.h:
// libpcap's headers define BPF types that clash with the kernel's.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "xlb/abi.h"
#include "xlb/error.h"

namespace xlb::capture {

// One record from the ring: its header and the bytes it kept.
struct Record {
    xlb_capture_record header;
    std::span<const std::uint8_t> data;
};

// The records' pcap stream: LINUX_SLL2 link type (its packet type says
// received or sent, its interface index where the packet arrived), times in
// nanoseconds. Written through libpcap into memory; take() hands over what
// was written since the last call.
class PcapStream {
public:
    static Result<PcapStream> open(std::uint32_t snaplen);
    PcapStream(PcapStream&&) noexcept;
    PcapStream& operator=(PcapStream&&) noexcept;
    ~PcapStream();

    // monotonic_to_realtime_ns: added to the record's CLOCK_MONOTONIC time.
    void write(const Record& r, std::int64_t monotonic_to_realtime_ns);
    std::string take();

private:
    struct State;
    explicit PcapStream(std::unique_ptr<State> state);
    std::unique_ptr<State> state_;
};

// The SLL2 header and payload the stream writes for a record (the Ethernet
// header becomes the SLL2 header; a frame shorter than one is kept whole
// under protocol 0).
std::vector<std::uint8_t> sll2_frame(const Record& r);

}  // namespace xlb::capture
