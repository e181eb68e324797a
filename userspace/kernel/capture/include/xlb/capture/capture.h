// SPDX-License-Identifier: Apache-2.0
// Packet capture (docs/capture.md). The XDP program copies the packets whose
// verdict matches a filter into a ring buffer while its capture flag is set;
// a Session sets the flag, reads the records and clears it when it ends;
// PcapStream turns records into a pcap stream (libpcap writes it) for a
// client to save or pipe into tcpdump.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "xlb/abi.h"
#include "xlb/bpf/programs.h"
#include "xlb/capture/pcap_stream.h"
#include "xlb/error.h"
#include "xlb/net/address.h"

struct ring_buffer;

namespace xlb::capture {

inline constexpr std::uint32_t kDefaultSnaplen = XLB_CAPTURE_DATA_MAX;

// What to capture, resolved: VIP id, backend and source prefix as the kernel
// compares them, outcomes as a bit per enum xlb_outcome.
struct Selection {
    std::uint32_t outcomes = 0;
    std::optional<std::uint32_t> vip_id;
    std::optional<net::IpAddress> backend;
    std::optional<net::Prefix> src;
    std::uint32_t snaplen = kDefaultSnaplen;
};

// The outcome bits one `--outcome` word selects: "tx", "pass", "drop" (every
// outcome of that verdict), "all", or one outcome's name ("drop_no_backend").
// `names` is the outcomes' names in enum order.
Result<std::uint32_t> outcome_bits(const std::string& word, std::span<const char* const> names);

// The kernel's filter for a selection: refuses a snap length outside
// 1..XLB_CAPTURE_DATA_MAX and a selection of no outcome.
Result<xlb_capture_filter> make_filter(const Selection& s);

// CLOCK_REALTIME minus CLOCK_MONOTONIC, now.
std::int64_t monotonic_to_realtime_ns();

// A capture on a loaded balancer: on from start() until the session is
// destroyed. Records are read with poll().
class Session {
public:
    // Fails when the program already captures (another session).
    static Result<std::unique_ptr<Session>> start(const bpf::LbProgram& program,
                                                  const xlb_capture_filter& filter);
    ~Session();
    Session(const Session&) = delete;
    Session& operator=(const Session&) = delete;

    using Sink = std::function<void(const Record&)>;
    // Waits up to timeout_ms for records and hands each to sink; returns how
    // many were read.
    Result<int> poll(int timeout_ms, const Sink& sink);
    bpf::LbProgram::CaptureCounters counters() const;
    // Turns the flag off; the ring keeps what it holds for a last poll().
    void stop();

private:
    Session(const bpf::LbProgram& program);
    static int on_sample(void* ctx, void* data, std::size_t size);

    const bpf::LbProgram& program_;
    ring_buffer* ring_ = nullptr;
    const Sink* sink_ = nullptr;
};

}  // namespace xlb::capture
