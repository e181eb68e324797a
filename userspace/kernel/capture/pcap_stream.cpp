// SPDX-License-Identifier: Apache-2.0
#include "xlb/capture/pcap_stream.h"

#include <arpa/inet.h>
#include <pcap/pcap.h>
#include <pcap/sll.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

namespace xlb::capture {

std::vector<std::uint8_t> sll2_frame(const Record& r) {
    // LINUX_SLL2: protocol, reserved, ifindex, ARPHRD type, packet type,
    // address length, 8 address bytes; then the payload after the link header.
    constexpr std::size_t kEth = 14;
    const bool whole_eth = r.data.size() >= kEth;
    sll2_header h{};
    h.sll2_protocol = whole_eth ? static_cast<std::uint16_t>(r.data[12] << 8 | r.data[13]) : 0;
    h.sll2_protocol = htons(h.sll2_protocol);
    h.sll2_if_index = htonl(r.header.ifindex);
    h.sll2_hatype = htons(1);                                   // ARPHRD_ETHER
    h.sll2_pkttype = r.header.direction == XLB_CAPTURE_SENT ? 4 /* PACKET_OUTGOING */
                                                            : 0 /* PACKET_HOST */;
    if (whole_eth) {
        h.sll2_halen = 6;
        std::memcpy(h.sll2_addr, r.data.data() + 6, 6);  // the source MAC
    }
    static_assert(sizeof h == SLL2_HDR_LEN);
    const auto payload = whole_eth ? r.data.subspan(kEth) : r.data;
    std::vector<std::uint8_t> out(sizeof h + payload.size());
    std::memcpy(out.data(), &h, sizeof h);
    if (!payload.empty()) std::memcpy(out.data() + sizeof h, payload.data(), payload.size());
    return out;
}

// The FILE libpcap writes to appends to `pending` (fopencookie): the stream
// never touches the disk, and take() drains it.
struct PcapStream::State {
    std::string pending;
    pcap_t* dead = nullptr;
    pcap_dumper_t* dumper = nullptr;
    ~State() {
        if (dumper) pcap_dump_close(dumper);  // closes the FILE too
        if (dead) pcap_close(dead);
    }
    static ssize_t append(void* cookie, const char* buf, size_t size) {
        static_cast<State*>(cookie)->pending.append(buf, size);
        return static_cast<ssize_t>(size);
    }
};

PcapStream::PcapStream(std::unique_ptr<State> state) : state_(std::move(state)) {}
PcapStream::PcapStream(PcapStream&&) noexcept = default;
PcapStream& PcapStream::operator=(PcapStream&&) noexcept = default;
PcapStream::~PcapStream() = default;

Result<PcapStream> PcapStream::open(std::uint32_t snaplen) {
    auto state = std::make_unique<State>();
    state->dead = pcap_open_dead_with_tstamp_precision(
        DLT_LINUX_SLL2, static_cast<int>(snaplen + SLL2_HDR_LEN), PCAP_TSTAMP_PRECISION_NANO);
    if (!state->dead) return fail(ENOMEM, "capture: open a pcap stream");
    cookie_io_functions_t io{};
    io.write = &State::append;
    FILE* file = fopencookie(state.get(), "w", io);
    if (!file) return fail(errno, "capture: open a pcap stream");
    state->dumper = pcap_dump_fopen(state->dead, file);
    if (!state->dumper) {
        std::string why = pcap_geterr(state->dead);
        std::fclose(file);
        return fail("capture: write the pcap header: " + why);
    }
    return PcapStream(std::move(state));
}

void PcapStream::write(const Record& r, std::int64_t monotonic_to_realtime) {
    const std::vector<std::uint8_t> frame = sll2_frame(r);
    const std::int64_t ns = static_cast<std::int64_t>(r.header.time_ns) + monotonic_to_realtime;
    pcap_pkthdr h{};
    h.ts.tv_sec = static_cast<time_t>(ns / 1'000'000'000);
    // With nanosecond precision libpcap stores tv_usec as nanoseconds.
    h.ts.tv_usec = static_cast<suseconds_t>(ns % 1'000'000'000);
    h.caplen = static_cast<bpf_u_int32>(frame.size());
    const std::size_t link_cut = r.data.size() >= 14 ? 14 : 0;
    h.len = static_cast<bpf_u_int32>(r.header.len - link_cut + SLL2_HDR_LEN);
    pcap_dump(reinterpret_cast<u_char*>(state_->dumper), &h, frame.data());
}

PacketRecords::Take PacketRecords::take(const xlb_capture_record& r) {
    const bool sent_on = r.outcome == XLB_OUT_TX || r.outcome == XLB_OUT_TX_ICMP_ERROR;
    if (r.direction == XLB_CAPTURE_SENT && sent_on) {
        for (auto it = waiting_.begin(); it != waiting_.end(); ++it) {
            if (it->ifindex != r.ifindex || it->vip_id != r.vip_id || it->outcome != r.outcome ||
                it->flags != r.flags)
                continue;
            waiting_.erase(it);
            ++records_;
            return Take::kRecord;
        }
        return Take::kSkip;  // its received copy was not written
    }
    if (full()) return Take::kSkip;
    if (r.direction == XLB_CAPTURE_RECEIVED && sent_on) {
        if (waiting_.size() >= kMaxWaiting) waiting_.pop_front();
        waiting_.push_back({r.ifindex, r.vip_id, r.outcome, r.flags});
    }
    ++packets_;
    ++records_;
    return Take::kPacket;
}

std::string PcapStream::take() {
    pcap_dump_flush(state_->dumper);
    std::string out;
    out.swap(state_->pending);
    return out;
}

}  // namespace xlb::capture
