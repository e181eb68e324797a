// SPDX-License-Identifier: Apache-2.0
#include "xlb/bpf/probe.h"

#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <unistd.h>

#include <cstdio>
#include <utility>

#include "extack.h"
#include "xlb/bpf/programs.h"
#include "xlb_probe.skel.h"

namespace xlb::bpf {
namespace {

bpf_tc_attach_point attach_point(TcDirection direction) {
    return direction == TcDirection::kIngress ? BPF_TC_INGRESS : BPF_TC_EGRESS;
}

std::string where(const Interface& iface, TcDirection direction) {
    return "tc " + std::string(to_string(direction)) + " of " + iface.name + " (ifindex " +
           std::to_string(iface.ifindex) + ")";
}

std::string tc_hint(int code) {
    if (code == EPERM) return "attaching tc programs needs root or CAP_NET_ADMIN";
    if (code == ENODEV) return "no such interface in this network namespace";
    return {};
}

Result<std::uint32_t> prog_id_of(int prog_fd) {
    bpf_prog_info info{};
    __u32 len = sizeof(info);
    if (bpf_obj_get_info_by_fd(prog_fd, &info, &len) != 0)
        return fail(errno, "inspect BPF program fd " + std::to_string(prog_fd));
    return info.id;
}

}  // namespace

const char* to_string(TcDirection direction) {
    return direction == TcDirection::kIngress ? "ingress" : "egress";
}

// ---- ProbeEncapProgram ------------------------------------------------------------

void ProbeEncapProgram::SkeletonDeleter::operator()(xlb_probe* skel) const {
    xlb_probe__destroy(skel);
}

ProbeEncapProgram::ProbeEncapProgram(std::unique_ptr<xlb_probe, SkeletonDeleter> skel)
    : skel_(std::move(skel)) {}
ProbeEncapProgram::ProbeEncapProgram(ProbeEncapProgram&&) noexcept = default;
ProbeEncapProgram& ProbeEncapProgram::operator=(ProbeEncapProgram&&) noexcept = default;
ProbeEncapProgram::~ProbeEncapProgram() = default;

Result<ProbeEncapProgram> ProbeEncapProgram::load(const LbProgram& lb) {
    std::unique_ptr<xlb_probe, SkeletonDeleter> skel(xlb_probe__open());
    if (!skel) return fail(errno, "open the xlb_probe BPF object");
    // The balancer's own maps: same backends, same configuration, always.
    for (auto [map, fd] : {std::pair{skel->maps.xlb_backends, lb.backends().fd()},
                           std::pair{skel->maps.xlb_config, lb.config().fd()}}) {
        if (int rc = bpf_map__reuse_fd(map, fd); rc != 0)
            return fail(rc, std::string("share the balancer's map ") + bpf_map__name(map) +
                                " (fd " + std::to_string(fd) + ") with xlb_probe");
    }
    if (int rc = xlb_probe__load(skel.get()); rc != 0)
        return fail(rc, "load the xlb_probe BPF program",
                    -rc == EPERM ? "loading BPF needs root or CAP_BPF + CAP_NET_ADMIN" : "");
    return ProbeEncapProgram(std::move(skel));
}

int ProbeEncapProgram::prog_fd() const { return bpf_program__fd(skel_->progs.xlb_probe); }

PerCpuArrayMap<std::uint64_t> ProbeEncapProgram::outcomes() const {
    return {bpf_map__fd(skel_->maps.xlb_probe_stats), XLB_MAP_PROBE_STATS};
}

// ---- TcAttachment -------------------------------------------------------------------

Result<TcAttachment> TcAttachment::attach(const ProbeEncapProgram& prog, const Interface& iface,
                                          const TcAttachOptions& options) {
    return attach(prog.prog_fd(), iface, options);
}

Result<TcAttachment> TcAttachment::attach(int prog_fd, const Interface& iface,
                                          const TcAttachOptions& options) {
    const std::string at = where(iface, options.direction);
    LIBBPF_OPTS(bpf_tc_hook, hook, .ifindex = iface.ifindex,
                .attach_point = attach_point(options.direction));
    TcAttachment out;
    out.iface_ = iface;
    out.options_ = options;
    int rc = 0;
    std::string said;
    {
        // EEXIST (a clsact qdisc is there) is expected: no kernel message.
        detail::ExtackCapture quiet;
        rc = bpf_tc_hook_create(&hook);
        said = quiet.message();
    }
    if (rc == 0)
        out.created_qdisc_ = true;
    else if (rc != -EEXIST)
        return fail(rc, "create the clsact qdisc for " + at,
                    said.empty() ? tc_hint(-rc) : "the kernel: " + said);

    LIBBPF_OPTS(bpf_tc_opts, opts, .prog_fd = prog_fd, .flags = BPF_TC_F_REPLACE,
                .handle = options.handle, .priority = options.priority);
    rc = bpf_tc_attach(&hook, &opts);
    if (rc != 0) {
        Error err = make_error(rc, "attach BPF program fd " + std::to_string(prog_fd) + " at " + at,
                               tc_hint(-rc));
        if (out.created_qdisc_ && options.remove_created_qdisc) {
            hook.attach_point = static_cast<bpf_tc_attach_point>(BPF_TC_INGRESS | BPF_TC_EGRESS);
            bpf_tc_hook_destroy(&hook);
        }
        return std::unexpected(std::move(err));
    }
    out.prog_id_ = opts.prog_id;
    if (out.prog_id_ == 0) {
        auto id = prog_id_of(prog_fd);
        if (!id) return std::unexpected(id.error());
        out.prog_id_ = *id;
    }
    return out;
}

TcAttachment::TcAttachment(TcAttachment&& other) noexcept
    : iface_(std::move(other.iface_)),
      options_(other.options_),
      prog_id_(std::exchange(other.prog_id_, 0)),
      created_qdisc_(std::exchange(other.created_qdisc_, false)),
      kept_(other.kept_) {}

TcAttachment& TcAttachment::operator=(TcAttachment&& other) noexcept {
    if (this != &other) {
        (void)detach();
        iface_ = std::move(other.iface_);
        options_ = other.options_;
        prog_id_ = std::exchange(other.prog_id_, 0);
        created_qdisc_ = std::exchange(other.created_qdisc_, false);
        kept_ = other.kept_;
    }
    return *this;
}

TcAttachment::~TcAttachment() {
    if (kept_) return;
    if (auto done = detach(); !done)
        std::fprintf(stderr, "xlb: %s\n", done.error().message().c_str());
}

Result<bool> TcAttachment::detach() {
    if (prog_id_ == 0 && !created_qdisc_) return false;
    const std::string at = where(iface_, options_.direction);
    LIBBPF_OPTS(bpf_tc_hook, hook, .ifindex = iface_.ifindex,
                .attach_point = attach_point(options_.direction));
    bool detached = false;
    if (prog_id_ != 0) {
        const std::uint32_t ours = std::exchange(prog_id_, 0);
        auto now = query_tc(iface_, options_);
        // The interface is gone, and the filter with it.
        if (!now && now.error().code == ENODEV) return false;
        if (!now) return std::unexpected(now.error());
        if (*now == ours) {
            LIBBPF_OPTS(bpf_tc_opts, opts, .handle = options_.handle,
                        .priority = options_.priority);
            if (int rc = bpf_tc_detach(&hook, &opts); rc != 0 && rc != -ENOENT)
                return fail(rc, "detach BPF program id " + std::to_string(ours) + " from " + at,
                            tc_hint(-rc));
            detached = true;
        }
    }
    if (std::exchange(created_qdisc_, false) && options_.remove_created_qdisc) {
        hook.attach_point = static_cast<bpf_tc_attach_point>(BPF_TC_INGRESS | BPF_TC_EGRESS);
        if (int rc = bpf_tc_hook_destroy(&hook); rc != 0 && rc != -ENOENT && rc != -EINVAL)
            return fail(rc, "remove the clsact qdisc of " + iface_.name, tc_hint(-rc));
    }
    return detached;
}

Result<std::uint32_t> query_tc(const Interface& iface, const TcAttachOptions& options) {
    LIBBPF_OPTS(bpf_tc_hook, hook, .ifindex = iface.ifindex,
                .attach_point = attach_point(options.direction));
    LIBBPF_OPTS(bpf_tc_opts, opts, .handle = options.handle, .priority = options.priority);
    detail::ExtackCapture quiet;  // "no such filter" is an answer here
    int rc = bpf_tc_query(&hook, &opts);
    // ENOENT: no such filter; EINVAL: no clsact qdisc at all.
    if (rc == -ENOENT || rc == -EINVAL) return 0u;
    if (rc != 0)
        return fail(rc, "query " + where(iface, options.direction),
                    quiet.message().empty() ? tc_hint(-rc) : "the kernel: " + quiet.message());
    return opts.prog_id;
}

Result<std::string> query_tc_name(const Interface& iface, const TcAttachOptions& options) {
    auto id = query_tc(iface, options);
    if (!id) return std::unexpected(id.error());
    if (*id == 0) return std::string();
    const int fd = bpf_prog_get_fd_by_id(*id);
    if (fd < 0) {
        if (errno == ENOENT) return std::string();  // detached meanwhile
        return fail(errno, "open BPF program id " + std::to_string(*id));
    }
    bpf_prog_info info{};
    __u32 len = sizeof(info);
    const int rc = bpf_obj_get_info_by_fd(fd, &info, &len);
    const int saved = errno;
    close(fd);
    if (rc != 0) return fail(saved, "inspect BPF program id " + std::to_string(*id));
    return std::string(info.name);
}

Result<bool> detach_tc(const Interface& iface, const TcAttachOptions& options,
                       std::string_view prog_name) {
    auto name = query_tc_name(iface, options);
    if (!name) return std::unexpected(name.error());
    if (name->empty() || *name != prog_name) return false;
    LIBBPF_OPTS(bpf_tc_hook, hook, .ifindex = iface.ifindex,
                .attach_point = attach_point(options.direction));
    LIBBPF_OPTS(bpf_tc_opts, opts, .handle = options.handle, .priority = options.priority);
    if (int err = bpf_tc_detach(&hook, &opts); err != 0) {
        if (err == -ENOENT) return false;
        return fail(err,
                    "detach " + std::string(prog_name) + " from " + where(iface, options.direction),
                    tc_hint(-err));
    }
    return true;
}

}  // namespace xlb::bpf
