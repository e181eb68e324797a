// SPDX-License-Identifier: Apache-2.0
#include "xlb/bpf/xdp.h"

#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <fcntl.h>
#include <linux/if_link.h>
#include <net/if.h>
#include <xdp/libxdp.h>

#include <algorithm>
#include <atomic>
#include <cstdarg>
#include <cstdio>
#include <cstring>
#include <iterator>
#include <mutex>
#include <utility>

#include "extack.h"
#include "xlb/bpf/programs.h"
#include "xlb/names.h"

namespace xlb::bpf {
namespace {

using detail::ExtackCapture;

struct KernelError {
    int code = 0;
    std::string extack;
};

// One netlink XDP request. prog_fd -1 detaches; old_fd >= 0 adds
// XDP_FLAGS_REPLACE: the kernel acts only if old_fd's program is attached.
std::optional<KernelError> xdp_set(int ifindex, int prog_fd, std::uint32_t flags, int old_fd) {
    ExtackCapture capture;
    LIBBPF_OPTS(bpf_xdp_attach_opts, opts, .old_prog_fd = old_fd);
    int rc = bpf_xdp_attach(ifindex, prog_fd, flags, old_fd >= 0 ? &opts : nullptr);
    if (rc == 0) return std::nullopt;
    return KernelError{rc < 0 ? -rc : rc, capture.message()};
}

std::uint32_t mode_flags(XdpAttachMode mode) {
    switch (mode) {
        case XdpAttachMode::kNative: return XDP_FLAGS_DRV_MODE;
        case XdpAttachMode::kGeneric: return XDP_FLAGS_SKB_MODE;
        case XdpAttachMode::kOffload: return XDP_FLAGS_HW_MODE;
        case XdpAttachMode::kNone: break;
    }
    return 0;
}

std::string attach_hint(const KernelError& err, XdpAttachMode mode) {
    std::string advice;
    switch (err.code) {
        case EOPNOTSUPP:
            // The kernel's "Underlying driver does not support XDP in native
            // mode" says the same in more words.
            if (mode == XdpAttachMode::kNative)
                return "driver has no native XDP; try --xdp-mode generic";
            break;
        case EPERM:
        case EACCES:
            advice = "attaching XDP needs CAP_NET_ADMIN (and CAP_BPF or CAP_SYS_ADMIN)";
            break;
        case ENODEV: advice = "the interface is gone"; break;
        case EBUSY:
        case EEXIST: advice = "another program was attached meanwhile: check `ip link show`"; break;
        default:
            if (mode == XdpAttachMode::kNative) advice = "try --xdp-mode generic";
            break;
    }
    if (err.extack.empty()) return advice;
    return "kernel: " + err.extack + (advice.empty() ? "" : "; " + advice);
}

Error kernel_error(const KernelError& err, std::string what, XdpAttachMode mode) {
    return make_error(err.code, std::move(what), attach_hint(err, mode));
}

struct ProgInfo {
    std::uint32_t id = 0;
    std::uint32_t type = 0;
    std::string name;
};

Result<ProgInfo> prog_info(int fd) {
    bpf_prog_info info{};
    __u32 len = sizeof info;
    if (bpf_obj_get_info_by_fd(fd, &info, &len) != 0)
        return fail(errno, "inspect BPF program fd " + std::to_string(fd));
    return ProgInfo{info.id, info.type, info.name};
}

// The ids of the maps a program uses.
Result<std::vector<std::uint32_t>> prog_map_ids(int fd) {
    bpf_prog_info info{};
    __u32 len = sizeof info;
    if (bpf_obj_get_info_by_fd(fd, &info, &len) != 0)
        return fail(errno, "inspect BPF program fd " + std::to_string(fd));
    std::vector<std::uint32_t> ids(info.nr_map_ids);
    if (ids.empty()) return ids;
    const __u32 count = info.nr_map_ids;
    info = {};
    len = sizeof info;
    info.nr_map_ids = count;
    info.map_ids = reinterpret_cast<std::uintptr_t>(ids.data());
    if (bpf_obj_get_info_by_fd(fd, &info, &len) != 0)
        return fail(errno, "read the maps of BPF program fd " + std::to_string(fd));
    ids.resize(std::min(count, info.nr_map_ids));
    return ids;
}

std::string quoted(const std::string& name) {
    return name.empty() ? "a program" : "'" + name + "'";
}

// libxdp knows how to read a dispatcher's component programs.
std::vector<std::string> dispatched_programs(int ifindex) {
    std::vector<std::string> out;
    xdp_multiprog* mp = xdp_multiprog__get_from_ifindex(ifindex);
    if (libxdp_get_error(mp) != 0 || mp == nullptr) return out;
    for (xdp_program* p = xdp_multiprog__next_prog(nullptr, mp); p != nullptr;
         p = xdp_multiprog__next_prog(p, mp))
        out.emplace_back(xdp_program__name(p));
    xdp_multiprog__close(mp);
    return out;
}

}  // namespace

namespace {

// Indexed by XdpMode, in its order.
constexpr std::string_view kXdpModes[] = {"native", "generic", "auto"};
static_assert(std::size(kXdpModes) == static_cast<std::size_t>(XdpMode::kAuto) + 1);
// Indexed by XdpAttachMode, in its order.
constexpr std::string_view kAttachModes[] = {"none", "native", "generic", "offload"};
static_assert(std::size(kAttachModes) == static_cast<std::size_t>(XdpAttachMode::kOffload) + 1);

}  // namespace

const char* to_string(XdpMode mode) { return name_at(mode, kXdpModes); }
std::optional<XdpMode> parse_xdp_mode(std::string_view text) {
    return value_at<XdpMode>(text, kXdpModes);
}
const char* to_string(XdpAttachMode mode) { return name_at(mode, kAttachModes); }

Result<Interface> Interface::by_name(std::string_view name) {
    std::string n(name);
    if (n.empty() || n.size() >= IF_NAMESIZE)
        return fail(EINVAL, "find interface '" + n + "'", "not a valid interface name");
    unsigned index = ::if_nametoindex(n.c_str());
    if (index == 0)
        return fail(errno, "find interface " + n,
                    errno == ENODEV ? "no interface of that name in this network namespace" : "");
    return Interface{std::move(n), static_cast<int>(index)};
}

Result<Interface> Interface::by_index(int ifindex) {
    char buf[IF_NAMESIZE] = {};
    if (ifindex <= 0 || ::if_indextoname(static_cast<unsigned>(ifindex), buf) == nullptr)
        return fail(ifindex <= 0 ? EINVAL : errno,
                    "find interface with index " + std::to_string(ifindex),
                    "no such interface in this network namespace");
    return Interface{buf, ifindex};
}

std::string XdpStatus::describe() const {
    if (!attached()) return "no XDP program";
    std::string out = prog_name.empty() ? "program" : prog_name;
    out += " (id " + std::to_string(prog_id) + ") in " + to_string(mode) + " mode";
    if (!dispatched.empty()) {
        out += ", dispatching to";
        for (std::size_t i = 0; i < dispatched.size(); ++i) out += (i ? ", " : " ") + dispatched[i];
    }
    return out;
}

Result<XdpStatus> query_xdp(const Interface& iface) {
    LIBBPF_OPTS(bpf_xdp_query_opts, q);
    if (int rc = bpf_xdp_query(iface.ifindex, 0, &q); rc != 0)
        return fail(rc, "query XDP on " + iface.name);
    XdpStatus st;
    if (q.drv_prog_id) {
        st.mode = XdpAttachMode::kNative;
        st.prog_id = q.drv_prog_id;
    } else if (q.skb_prog_id) {
        st.mode = XdpAttachMode::kGeneric;
        st.prog_id = q.skb_prog_id;
    } else if (q.hw_prog_id) {
        st.mode = XdpAttachMode::kOffload;
        st.prog_id = q.hw_prog_id;
    } else {
        return st;
    }
    // Inspecting a program by id needs CAP_SYS_ADMIN; without it the name
    // stays empty and mode and id still answer the question.
    UniqueFd fd(bpf_prog_get_fd_by_id(st.prog_id));
    if (fd) {
        if (auto info = prog_info(fd.get())) st.prog_name = info->name;
    }
    if (st.libxdp_dispatcher()) st.dispatched = dispatched_programs(iface.ifindex);
    return st;
}

std::string AttachReport::summary(const std::string& interface, std::string_view prog) const {
    std::string out =
        std::string(prog) + " attached to " + interface + " in " + to_string(mode) + " mode";
    if (already_attached) return out + " (already attached)";
    if (native_error) out += " (native XDP failed: " + native_error->message() + ")";
    if (replaced_prog_id != 0) {
        out += ", replacing " + (replaced_prog_name.empty() ? "a program" : replaced_prog_name) +
               " (id " + std::to_string(replaced_prog_id) + ", " + to_string(replaced_mode) + ")";
        out += atomic ? " atomically"
                      : " by detach-then-attach for the mode change (no program for a moment)";
    }
    return out;
}

Result<XdpAttachment> XdpAttachment::attach(const LbProgram& prog, const Interface& iface,
                                            const AttachOptions& options) {
    return attach(prog.prog_fd(), iface, options);
}

Result<XdpAttachment> XdpAttachment::attach(const DecapProgram& prog, const Interface& iface,
                                            const AttachOptions& options) {
    return attach(prog.prog_fd(), iface, options);
}

Result<XdpAttachment> XdpAttachment::attach(const xdp_program* prog, const Interface& iface,
                                            const AttachOptions& options) {
    int fd = prog ? xdp_program__fd(prog) : -1;
    if (fd < 0)
        return fail(EINVAL, "attach XDP to " + iface.name, "the libxdp program is not loaded");
    return attach(fd, iface, options);
}

Result<XdpAttachment> XdpAttachment::attach(int prog_fd, const Interface& iface,
                                            const AttachOptions& options) {
    const std::string to = "attach XDP to " + iface.name;
    auto ours = prog_info(prog_fd);
    if (!ours) return std::unexpected(make_error(ours.error().code, to + ": " + ours.error().what));
    if (ours->type != BPF_PROG_TYPE_XDP)
        return fail(EINVAL, to, quoted(ours->name) + " is not an XDP program");

    XdpAttachment a;
    a.iface_ = iface;
    a.prog_.reset(::fcntl(prog_fd, F_DUPFD_CLOEXEC, 3));
    if (!a.prog_) return fail(errno, to + ": duplicate the program's descriptor");
    a.prog_id_ = ours->id;
    a.prog_name_ = ours->name;
    const int fd = a.prog_.get();

    auto current = query_xdp(iface);
    if (!current) return std::unexpected(current.error());
    AttachReport& report = a.report_;

    const auto requested = [&](XdpAttachMode fallback) {
        switch (options.mode) {
            case XdpMode::kNative: return XdpAttachMode::kNative;
            case XdpMode::kGeneric: return XdpAttachMode::kGeneric;
            case XdpMode::kAuto: break;
        }
        return fallback;
    };

    if (current->attached()) {
        const XdpAttachMode old_mode = current->mode;
        // auto keeps the mode the interface runs in: that one works, and
        // only a same-mode replacement is atomic.
        const XdpAttachMode target = requested(old_mode);
        if (current->prog_id == ours->id && target == old_mode) {
            report.mode = a.mode_ = old_mode;
            report.already_attached = true;
            return a;
        }
        const bool ours_by_name = !current->prog_name.empty() && current->prog_name == ours->name;
        if (!ours_by_name && !options.replace_foreign) {
            std::string hint = current->describe() + " is attached; xlb replaces only an earlier " +
                               ours->name + "; detach it first";
            hint += current->libxdp_dispatcher() ? " (xdp-loader unload " + iface.name + " --all)"
                                                 : " (ip link set dev " + iface.name + " xdp off)";
            return fail(EBUSY, to, hint);
        }
        if (old_mode == XdpAttachMode::kOffload)
            return fail(
                EOPNOTSUPP, to,
                current->describe() + " is offloaded; xlb does not replace offloaded programs");
        UniqueFd old(bpf_prog_get_fd_by_id(current->prog_id));
        if (!old)
            return fail(errno, to + ": open the attached " + current->describe(),
                        errno == EPERM ? "replacing a program needs CAP_SYS_ADMIN" : "");
        if (ours_by_name && options.earlier_must_use_map != 0) {
            auto maps = prog_map_ids(old.get());
            if (!maps) return std::unexpected(maps.error());
            if (std::find(maps->begin(), maps->end(), options.earlier_must_use_map) == maps->end())
                return fail(EBUSY, to,
                            current->describe() +
                                " is attached with maps other than this agent's pinned ones: "
                                "another agent (another pin_dir) serves " +
                                iface.name +
                                ", or its pins were removed; stop that agent, or detach it "
                                "(ip link set dev " +
                                iface.name + " xdp off) and start again");
        }
        report.replaced_prog_id = current->prog_id;
        report.replaced_prog_name = current->prog_name;
        report.replaced_mode = old_mode;

        if (target == old_mode) {
            if (auto err = xdp_set(iface.ifindex, fd, mode_flags(target), old.get()))
                return std::unexpected(kernel_error(*err,
                                                    "replace " + current->describe() + " on " +
                                                        iface.name + " with " + ours->name +
                                                        " (id " + std::to_string(ours->id) + ")",
                                                    target));
            report.mode = a.mode_ = target;
            return a;
        }

        // A mode change: native and generic programs cannot be attached at
        // the same time, so there is no atomic swap. Detach, attach, and put
        // the old program back if the new one does not go on.
        report.atomic = false;
        if (auto err = xdp_set(iface.ifindex, -1, mode_flags(old_mode), old.get()))
            return std::unexpected(kernel_error(*err,
                                                "detach " + current->describe() + " from " +
                                                    iface.name + " to change to " +
                                                    to_string(target) + " mode",
                                                old_mode));
        if (auto err =
                xdp_set(iface.ifindex, fd, mode_flags(target) | XDP_FLAGS_UPDATE_IF_NOEXIST, -1)) {
            Error e = kernel_error(*err, to + " in " + to_string(target) + " mode", target);
            auto restore = xdp_set(iface.ifindex, old.get(),
                                   mode_flags(old_mode) | XDP_FLAGS_UPDATE_IF_NOEXIST, -1);
            e.hint += restore ? "; restoring the previous program failed too: " +
                                    std::string(std::strerror(restore->code))
                              : "; the previous program was put back";
            return std::unexpected(std::move(e));
        }
        report.mode = a.mode_ = target;
        return a;
    }

    // Nothing attached. UPDATE_IF_NOEXIST: if something appears meanwhile,
    // fail instead of replacing it.
    const auto try_mode = [&](XdpAttachMode mode) -> std::optional<Error> {
        if (auto err =
                xdp_set(iface.ifindex, fd, mode_flags(mode) | XDP_FLAGS_UPDATE_IF_NOEXIST, -1))
            return kernel_error(*err, to + " in " + to_string(mode) + " mode", mode);
        return std::nullopt;
    };
    const XdpAttachMode first = requested(XdpAttachMode::kNative);
    auto err = try_mode(first);
    if (!err) {
        report.mode = a.mode_ = first;
        return a;
    }
    const int code = err->code;
    const bool may_fall_back = options.mode == XdpMode::kAuto && code != EPERM && code != EACCES &&
                               code != EBUSY && code != EEXIST && code != ENODEV;
    if (!may_fall_back) return std::unexpected(std::move(*err));
    report.native_error = std::move(*err);
    if (auto generic = try_mode(XdpAttachMode::kGeneric)) {
        generic->hint += (generic->hint.empty() ? "" : "; ") +
                         std::string("native failed first: ") + report.native_error->message();
        return std::unexpected(std::move(*generic));
    }
    report.mode = a.mode_ = XdpAttachMode::kGeneric;
    return a;
}

XdpAttachment::XdpAttachment(XdpAttachment&& other) noexcept
    : iface_(std::move(other.iface_)),
      prog_(std::move(other.prog_)),
      prog_id_(std::exchange(other.prog_id_, 0)),
      prog_name_(std::move(other.prog_name_)),
      mode_(std::exchange(other.mode_, XdpAttachMode::kNone)),
      report_(std::move(other.report_)),
      kept_(other.kept_) {}

XdpAttachment& XdpAttachment::operator=(XdpAttachment&& other) noexcept {
    if (this != &other) {
        detach_quietly();
        iface_ = std::move(other.iface_);
        prog_ = std::move(other.prog_);
        prog_id_ = std::exchange(other.prog_id_, 0);
        prog_name_ = std::move(other.prog_name_);
        mode_ = std::exchange(other.mode_, XdpAttachMode::kNone);
        report_ = std::move(other.report_);
        kept_ = other.kept_;
    }
    return *this;
}

XdpAttachment::~XdpAttachment() { detach_quietly(); }

void XdpAttachment::detach_quietly() {
    if (attached() && !kept_) (void)detach();
}

Result<bool> XdpAttachment::detach() {
    if (!attached()) return false;
    const XdpAttachMode mode = std::exchange(mode_, XdpAttachMode::kNone);
    auto err = xdp_set(iface_.ifindex, -1, mode_flags(mode), prog_.get());
    if (!err) return true;
    // EEXIST: the attached program is not ours any more; ENODEV: the
    // interface is gone, and our program with it.
    if (err->code == EEXIST || err->code == ENODEV) return false;
    mode_ = mode;
    return std::unexpected(kernel_error(*err, "detach XDP from " + iface_.name, mode));
}

Result<void> XdpAttachment::replace(int new_prog_fd) {
    const std::string what = "replace XDP program on " + iface_.name;
    if (!attached()) return fail(ENOENT, what, "nothing attached through this object");
    auto info = prog_info(new_prog_fd);
    if (!info)
        return std::unexpected(make_error(info.error().code, what + ": " + info.error().what));
    UniqueFd fd(::fcntl(new_prog_fd, F_DUPFD_CLOEXEC, 3));
    if (!fd) return fail(errno, what + ": duplicate the program's descriptor");
    if (auto err = xdp_set(iface_.ifindex, fd.get(), mode_flags(mode_), prog_.get()))
        return std::unexpected(kernel_error(*err, what, mode_));
    report_.replaced_prog_id = prog_id_;
    report_.replaced_prog_name = prog_name_;
    report_.replaced_mode = mode_;
    report_.atomic = true;
    report_.already_attached = false;
    prog_ = std::move(fd);
    prog_id_ = info->id;
    prog_name_ = info->name;
    return {};
}

Result<bool> detach_xdp(const Interface& iface, std::string_view prog_name) {
    auto current = query_xdp(iface);
    if (!current) return std::unexpected(current.error());
    if (!current->attached() || current->prog_name != prog_name ||
        current->mode == XdpAttachMode::kOffload)
        return false;
    UniqueFd old(bpf_prog_get_fd_by_id(current->prog_id));
    if (!old) return fail(errno, "detach XDP from " + iface.name + ": open " + current->describe());
    if (auto err = xdp_set(iface.ifindex, -1, mode_flags(current->mode), old.get())) {
        if (err->code == EEXIST || err->code == ENODEV) return false;
        return std::unexpected(kernel_error(*err, "detach XDP from " + iface.name, current->mode));
    }
    return true;
}

}  // namespace xlb::bpf
