// SPDX-License-Identifier: Apache-2.0
#include "xlb/capture/capture.h"

#include <arpa/inet.h>
#include <bpf/libbpf.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <ctime>

namespace xlb::capture {

namespace {

// Outcomes are appended as they come (tx_syn_cookie, tx_quic_cid after the
// drops): the verdict is the name's, not a range of numbers.
bool is_tx(std::uint32_t o) {
    return o <= XLB_OUT_TX_ICMP_TOO_BIG || o == XLB_OUT_TX_SYN_COOKIE || o == XLB_OUT_TX_QUIC_CID;
}
bool is_pass(std::uint32_t o) {
    return o >= XLB_OUT_PASS_NO_CONFIG && o <= XLB_OUT_PASS_IPV6_EXT_LIMIT;
}

}  // namespace

Result<std::uint32_t> outcome_bits(const std::string& word, std::span<const char* const> names) {
    std::uint32_t bits = 0;
    for (std::uint32_t o = 0; o < names.size() && o < 32; ++o) {
        const bool pick = word == "all" || (word == "tx" && is_tx(o)) ||
                          (word == "pass" && is_pass(o)) ||
                          (word == "drop" && !is_tx(o) && !is_pass(o)) || word == names[o];
        if (pick) bits |= 1U << o;
    }
    if (bits == 0)
        return fail("capture: unknown outcome \"" + word + "\"",
                    "use tx, pass, drop, all or an outcome's name from /v1/stats");
    return bits;
}

Result<xlb_capture_filter> make_filter(const Selection& s) {
    if (s.snaplen == 0 || s.snaplen > XLB_CAPTURE_DATA_MAX)
        return fail("capture: snaplen " + std::to_string(s.snaplen) + " is out of range",
                    "1 to " + std::to_string(XLB_CAPTURE_DATA_MAX) + " bytes");
    if (s.outcomes == 0) return fail("capture: no outcome selected");
    xlb_capture_filter f{};
    f.outcomes = s.outcomes;
    f.snaplen = s.snaplen;
    if (s.vip_id) {
        f.flags |= XLB_CAPTURE_F_VIP;
        f.vip_id = *s.vip_id;
    }
    if (s.backend) {
        f.flags |= XLB_CAPTURE_F_BACKEND;
        f.backend_family = s.backend->family;
        s.backend->to_words(f.backend);
    }
    if (s.src) {
        f.flags |= XLB_CAPTURE_F_SRC;
        f.src_family = s.src->address.family;
        s.src->address.to_words(f.src);
        std::uint8_t mask[16]{};
        for (unsigned bit = 0; bit < s.src->length; ++bit)
            mask[bit / 8] |= static_cast<std::uint8_t>(0x80U >> (bit % 8));
        std::memcpy(f.src_mask, mask, sizeof mask);
    }
    return f;
}

std::int64_t monotonic_to_realtime_ns() {
    timespec mono{}, real{};
    clock_gettime(CLOCK_MONOTONIC, &mono);
    clock_gettime(CLOCK_REALTIME, &real);
    auto ns = [](const timespec& t) {
        return static_cast<std::int64_t>(t.tv_sec) * 1'000'000'000 + t.tv_nsec;
    };
    return ns(real) - ns(mono);
}

Session::Session(const bpf::LbProgram& program) : program_(program) {}

Result<std::unique_ptr<Session>> Session::start(const bpf::LbProgram& program,
                                                const xlb_capture_filter& filter) {
    if (program.capture_on()) return fail(EBUSY, "capture: start", "another capture is running");
    std::unique_ptr<Session> s(new Session(program));
    s->ring_ = ring_buffer__new(program.capture_ring_fd(), &Session::on_sample, s.get(), nullptr);
    if (!s->ring_) return fail(errno, "capture: read the ring buffer " XLB_MAP_CAPTURE_RING);
    // Records a previous session left unread are not this capture's.
    ring_buffer__consume(s->ring_);
    program.start_capture(filter);
    return s;
}

Session::~Session() {
    program_.stop_capture();
    if (ring_) ring_buffer__free(ring_);
}

int Session::on_sample(void* ctx, void* data, std::size_t size) {
    auto* self = static_cast<Session*>(ctx);
    if (!self->sink_ || size < sizeof(xlb_capture_record)) return 0;
    Record r{};
    std::memcpy(&r.header, data, sizeof r.header);
    const std::size_t room = size - sizeof(xlb_capture_record);
    const std::size_t kept = std::min<std::size_t>(r.header.caplen, room);
    r.data = {static_cast<const std::uint8_t*>(data) + sizeof(xlb_capture_record), kept};
    (*self->sink_)(r);
    return 0;
}

Result<int> Session::poll(int timeout_ms, const Sink& sink) {
    sink_ = &sink;
    const int n = ring_buffer__poll(ring_, timeout_ms);
    sink_ = nullptr;
    if (n < 0 && n != -EINTR) return fail(-n, "capture: poll " XLB_MAP_CAPTURE_RING);
    return n < 0 ? 0 : n;
}

void Session::stop() { program_.stop_capture(); }

bpf::LbProgram::CaptureCounters Session::counters() const { return program_.capture_counters(); }

}  // namespace xlb::capture
