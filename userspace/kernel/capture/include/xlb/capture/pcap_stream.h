// SPDX-License-Identifier: Apache-2.0
// Capture records written as pcap (docs/capture.md). Apart from capture.h:
// libpcap's headers define BPF types that clash with the kernel's.
#pragma once

#include <cstdint>
#include <deque>
#include <memory>
#include <optional>
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

// Which of the ring's records a capture writes (docs/capture.md, "What is
// written"). A packet is one the program matched: its records are its copy
// as received and, when it was sent on (tx, tx_icmp_error), its copy as
// sent; an answered "too big" (tx_icmp_too_big) has the sent copy alone.
// At most `limit` packets are taken, each whole: a sent copy is written only
// after its packet's received copy was (the ring may hold the sent copy of a
// packet past the limit, or of one whose received copy it lost), so that a
// file never holds half a packet. Records of several CPUs may interleave in
// the ring; a sent copy is paired with the oldest received copy still
// waiting that it can belong to (same interface, VIP and outcome).
class PacketRecords {
public:
    enum class Take { kSkip, kPacket, kRecord };  // kPacket: a packet's first record

    explicit PacketRecords(std::optional<std::uint64_t> limit) : limit_(limit) {}
    Take take(const xlb_capture_record& r);
    std::uint64_t packets() const { return packets_; }
    std::uint64_t records() const { return records_; }
    bool full() const { return limit_ && packets_ >= *limit_; }

private:
    struct Waiting {
        std::uint32_t ifindex, vip_id;
        std::uint8_t outcome, flags;
    };
    // Beyond this many received copies waiting, the oldest is given up on
    // (its sent copy was lost): the pairing's memory stays bounded.
    static constexpr std::size_t kMaxWaiting = 4096;
    std::optional<std::uint64_t> limit_;
    std::uint64_t packets_ = 0, records_ = 0;
    std::deque<Waiting> waiting_;
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
