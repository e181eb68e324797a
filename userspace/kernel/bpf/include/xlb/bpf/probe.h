// SPDX-License-Identifier: Apache-2.0
// Health probes through the data path (via_vip): the tc egress program
// xlb_probe (bpf/xlb_probe.bpf.c) and its attachment.
//
// A probe socket on the LB host connects to VIP:port with
// SO_MARK = probe_mark(backend_id) (XLB_PROBE_MARK_BASE | id, include/xlb/abi.h).
// xlb_probe, attached at egress of the interface the VIP is routed through,
// encapsulates the probe's packets to that backend with the balancer's own
// outer headers; the backend decapsulates and answers from the VIP straight
// to the prober, and xlb_lb passes the reply to the kernel (its destination
// is not a VIP). A marked packet whose backend slot is unused is dropped.
//
// The agent's sequence, after LbProgram::load and the XDP attach:
//   auto probe = ProbeEncapProgram::load(*lb);       // shares xlb_backends, xlb_config
//   auto tc = TcAttachment::attach(*probe, *iface);  // clsact egress on the LB's interface
//   ... probe sockets: setsockopt(SO_MARK, *probe_mark(id)) before connect()
//   ... on exit: ~TcAttachment detaches the filter.
//
// Network namespaces: like XdpAttachment, attach and destroy a TcAttachment
// in the network namespace the interface lives in (the calling thread's).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "xlb/abi.h"
#include "xlb/bpf/error.h"
#include "xlb/bpf/fd.h"
#include "xlb/bpf/maps.h"
#include "xlb/bpf/xdp.h"

struct xlb_probe;

namespace xlb::bpf {

class LbProgram;

// The SO_MARK for a probe of backend_id; nullopt when the id does not fit the
// mark's id field (XLB_PROBE_MARK_ID_MASK).
constexpr std::optional<std::uint32_t> probe_mark(std::uint32_t backend_id) {
    if (backend_id > XLB_PROBE_MARK_ID_MASK) return std::nullopt;
    return XLB_PROBE_MARK_BASE | backend_id;
}
// The backend id a mark carries; nullopt for a mark that is not a probe's.
constexpr std::optional<std::uint32_t> probe_backend_of(std::uint32_t mark) {
    if ((mark & XLB_PROBE_MARK_TAG_MASK) != XLB_PROBE_MARK_BASE) return std::nullopt;
    return mark & XLB_PROBE_MARK_ID_MASK;
}

class ProbeEncapProgram {
public:
    // Loads xlb_probe with lb's xlb_backends and xlb_config maps (the same
    // kernel maps, through bpf_map__reuse_fd: whatever the agent writes there,
    // pinned or not, the probe program sees). Its own counters are not pinned.
    static Result<ProbeEncapProgram> load(const LbProgram& lb);

    ProbeEncapProgram(ProbeEncapProgram&&) noexcept;
    ProbeEncapProgram& operator=(ProbeEncapProgram&&) noexcept;
    ~ProbeEncapProgram();

    int prog_fd() const;
    // Per-CPU counters indexed by enum xlb_probe_outcome.
    PerCpuArrayMap<std::uint64_t> outcomes() const;

private:
    struct SkeletonDeleter {
        void operator()(xlb_probe* skel) const;
    };
    explicit ProbeEncapProgram(std::unique_ptr<xlb_probe, SkeletonDeleter> skel);

    std::unique_ptr<xlb_probe, SkeletonDeleter> skel_;
};

enum class TcDirection { kIngress, kEgress };
const char* to_string(TcDirection);  // "ingress" | "egress"

struct TcAttachOptions {
    TcDirection direction = TcDirection::kEgress;
    // The filter's place in the clsact hook. An existing filter at the same
    // handle and priority (an earlier xlb_probe, e.g. from a killed agent) is
    // replaced atomically.
    std::uint32_t handle = 1;
    std::uint32_t priority = 0x4c42;  // "LB"
    // Remove the clsact qdisc on detach when this attachment created it. Off
    // by default: the qdisc also holds every other tc filter added to the
    // interface since, and an empty clsact costs next to nothing. For owners
    // of the whole interface (tests, a lab).
    bool remove_created_qdisc = false;
};

// Where xlb-decap attaches the cookie acceptor (programs.h, CookieProgram):
// tc ingress, a priority of its own beside xlb_probe's.
constexpr TcAttachOptions cookie_tc_options() {
    return {.direction = TcDirection::kIngress, .handle = 1, .priority = 0x636b};  // "ck"
}

class TcAttachment {
public:
    // Creates the clsact qdisc on iface when it has none, then attaches
    // prog_fd (a loaded SCHED_CLS program, direct-action) at the hook.
    static Result<TcAttachment> attach(int prog_fd, const Interface& iface,
                                       const TcAttachOptions& options = {});
    static Result<TcAttachment> attach(const ProbeEncapProgram& prog, const Interface& iface,
                                       const TcAttachOptions& options = {});

    TcAttachment(TcAttachment&& other) noexcept;
    TcAttachment& operator=(TcAttachment&& other) noexcept;
    TcAttachment(const TcAttachment&) = delete;
    TcAttachment& operator=(const TcAttachment&) = delete;
    // Detaches (errors ignored: use detach()).
    ~TcAttachment();

    const Interface& interface() const { return iface_; }
    std::uint32_t prog_id() const { return prog_id_; }
    bool attached() const { return prog_id_ != 0; }
    // true when this attachment created the clsact qdisc (and so removes it).
    bool created_qdisc() const { return created_qdisc_; }
    // Leave the filter attached when this object goes away (a tool that
    // attaches and exits; detach_tc removes it later).
    void keep() { kept_ = true; }

    // Detaches our filter when it is still ours (another program at the same
    // handle/priority is left alone: false), then removes the clsact qdisc
    // when options.remove_created_qdisc and this attachment created it.
    Result<bool> detach();

private:
    TcAttachment() = default;

    Interface iface_;
    TcAttachOptions options_;
    std::uint32_t prog_id_ = 0;
    bool created_qdisc_ = false;
    bool kept_ = false;
};

// The program id attached at iface's hook with that handle/priority (0: none).
Result<std::uint32_t> query_tc(const Interface& iface, const TcAttachOptions& options = {});

// The name of the program attached at iface's hook with that handle/priority
// (empty: none).
Result<std::string> query_tc_name(const Interface& iface, const TcAttachOptions& options);

// Detaches the filter at iface's hook with that handle/priority when its
// program is named prog_name (anything else is left alone). false: there was
// none. For a tool that cleans up after a kept attachment.
Result<bool> detach_tc(const Interface& iface, const TcAttachOptions& options,
                       std::string_view prog_name);

}  // namespace xlb::bpf
