// SPDX-License-Identifier: Apache-2.0
// Attaching an XDP program to an interface, replacing an earlier one without
// a window in which the interface has no program, and asking what is
// attached (for status: "native" / "generic").
//
// How, and why not libxdp's xdp_program__attach (Linux 6.18, libxdp 1.3.1):
//  - libxdp's multi-program dispatcher links each program into the dispatcher
//    as an freplace (BPF_PROG_TYPE_EXT) program. Loading one fails on these
//    machines with EPERM before the verifier runs, so libxdp falls back to
//    attaching the program alone ("legacy" mode). Measured.
//  - Where the dispatcher does work, libxdp 1.3.1 still cannot link an
//    already-loaded XDP program (ours come from the libbpf skeletons, loaded
//    before attach so that maps can be pinned and reused): per libxdp's
//    source, linking fails with EINVAL and it falls back to legacy mode too.
//    Letting libxdp load the skeleton's object (xdp_program__from_bpf_obj)
//    makes it an freplace program: same EPERM here, same fallback (measured).
//  - In legacy mode libxdp refuses to attach while a program is attached
//    (EBUSY, measured); replacing would be detach-then-attach, a window with
//    no program.
//  - The kernel swaps programs atomically on a netlink attach with
//    XDP_FLAGS_REPLACE and the expected old program: one pointer exchange, so
//    every packet runs either the old program or the new one.
// So attach, replace and detach go through the kernel (libbpf's
// bpf_xdp_attach); detach on destruction also uses XDP_FLAGS_REPLACE, so an
// object never detaches a program that has replaced its own. libxdp is used
// to describe a libxdp dispatcher found on an interface (its programs), so
// that an error says what is in the way.
//
// Network namespaces: an interface index belongs to the calling thread's
// network namespace; attach, query and destroy an XdpAttachment in the same one.
//
// The agent's sequence (pinning: xlb/bpf/pin.h):
//   auto lb = LbProgram::load(sizes, {.pin_dir = "/sys/fs/bpf/xlb/" + ifname});
//   log(lb->pins().summary());          // reused / replaced (why) / created
//   auto iface = Interface::by_name(ifname);
//   auto xdp = XdpAttachment::attach(*lb, *iface, {.mode = mode});
//   log(xdp->summary());                // mode, native fallback, what it replaced
//   ... on exit: xdp->keep() (default: keep forwarding), or with
//   --detach-on-exit: xdp->detach(), then LbProgram::unpin(dir).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "xlb/bpf/error.h"
#include "xlb/bpf/fd.h"

struct xdp_program;

namespace xlb::bpf {

class LbProgram;
class DecapProgram;

// What the operator asks for. kAuto: native, or generic when the driver has
// no native XDP (the report says so, and why).
enum class XdpMode { kNative, kGeneric, kAuto };
const char* to_string(XdpMode);  // "native" | "generic" | "auto"
std::optional<XdpMode> parse_xdp_mode(std::string_view);

// What is attached.
enum class XdpAttachMode { kNone, kNative, kGeneric, kOffload };
const char* to_string(XdpAttachMode);  // "none" | "native" | "generic" | "offload"

struct Interface {
    std::string name;
    int ifindex = 0;

    static Result<Interface> by_name(std::string_view name);
    static Result<Interface> by_index(int ifindex);
};

struct XdpStatus {
    XdpAttachMode mode = XdpAttachMode::kNone;
    std::uint32_t prog_id = 0;
    std::string prog_name;                // empty when the program cannot be inspected
    std::vector<std::string> dispatched;  // a libxdp dispatcher: the programs it runs

    bool attached() const { return prog_id != 0; }
    bool libxdp_dispatcher() const { return prog_name == "xdp_dispatcher"; }
    std::string describe() const;  // "xlb_lb (id 42) in native mode"
};

Result<XdpStatus> query_xdp(const Interface& iface);

struct AttachOptions {
    XdpMode mode = XdpMode::kAuto;
    // A program already attached is replaced (atomically) only when it has
    // the same name as the new one: an earlier xlb_lb from a previous run.
    // Set this to replace whatever is there.
    bool replace_foreign = false;
    // Non-zero: an earlier program of the same name is replaced only when it
    // uses this map (by id), e.g. the configuration map pinned for this
    // agent: an xlb_lb with other maps belongs to another agent (another pin
    // directory) or to pins that were removed, and replacing it would put
    // empty tables under its flows.
    std::uint32_t earlier_must_use_map = 0;
};

struct AttachReport {
    XdpAttachMode mode = XdpAttachMode::kNone;  // how the program is attached now
    // kAuto fell back to generic: why native failed.
    std::optional<Error> native_error;
    // The program this attach replaced (id 0: the interface had none).
    std::uint32_t replaced_prog_id = 0;
    std::string replaced_prog_name;
    XdpAttachMode replaced_mode = XdpAttachMode::kNone;
    // true unless a mode change forced detach-then-attach (the kernel cannot
    // swap a native program for a generic one atomically): then the interface
    // ran no program for the moment in between.
    bool atomic = true;
    // Our program was already the one attached: nothing changed.
    bool already_attached = false;

    // One line for the log.
    std::string summary(const std::string& interface, std::string_view prog) const;
};

class XdpAttachment {
public:
    // Attaches prog_fd (any loaded XDP program; the attachment keeps its own
    // reference) to iface. A program attached already is replaced atomically
    // when allowed (see AttachOptions), else the attach fails with EBUSY.
    static Result<XdpAttachment> attach(int prog_fd, const Interface& iface,
                                        const AttachOptions& options = {});
    static Result<XdpAttachment> attach(const LbProgram& prog, const Interface& iface,
                                        const AttachOptions& options = {});
    static Result<XdpAttachment> attach(const DecapProgram& prog, const Interface& iface,
                                        const AttachOptions& options = {});
    // A program loaded through libxdp (xdp_program__open_file + load).
    static Result<XdpAttachment> attach(const xdp_program* prog, const Interface& iface,
                                        const AttachOptions& options = {});

    XdpAttachment(XdpAttachment&& other) noexcept;
    XdpAttachment& operator=(XdpAttachment&& other) noexcept;
    XdpAttachment(const XdpAttachment&) = delete;
    XdpAttachment& operator=(const XdpAttachment&) = delete;
    // Detaches, unless keep() was called or the program attached now is no
    // longer ours (a newer one replaced it). Errors are ignored: use detach().
    ~XdpAttachment();

    const Interface& interface() const { return iface_; }
    XdpAttachMode mode() const { return mode_; }
    std::uint32_t prog_id() const { return prog_id_; }
    const std::string& prog_name() const { return prog_name_; }
    const AttachReport& report() const { return report_; }
    std::string summary() const { return report_.summary(iface_.name, prog_name_); }
    bool attached() const { return mode_ != XdpAttachMode::kNone; }

    // Leave the program attached when this object goes away: the data plane
    // keeps forwarding after the agent exits (its default).
    void keep() { kept_ = true; }
    bool kept() const { return kept_; }

    // Detaches now. false: nothing to do, because our program is no longer
    // the attached one (another replaced it, or the interface is gone).
    Result<bool> detach();

    // Swaps in another program atomically, in the same mode.
    Result<void> replace(int new_prog_fd);

private:
    XdpAttachment() = default;
    void detach_quietly();

    Interface iface_;
    UniqueFd prog_;
    std::uint32_t prog_id_ = 0;
    std::string prog_name_;
    XdpAttachMode mode_ = XdpAttachMode::kNone;
    AttachReport report_;
    bool kept_ = false;
};

// Detaches whatever program named prog_name is attached to iface (checked
// atomically: nothing else is ever detached). false: no such program was
// attached. For a tool that cleans up after a kept attachment.
Result<bool> detach_xdp(const Interface& iface, std::string_view prog_name);

}  // namespace xlb::bpf
