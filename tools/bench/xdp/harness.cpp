// SPDX-License-Identifier: Apache-2.0
#include "harness.h"

#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include <cstring>
#include <string_view>
#include <utility>

#include "xlb/bpf/programs.h"
#include "xlb_bench.skel.h"
#include "xlb_lb_no_capture.skel.h"
#include "xlb_lb_no_flow_cache.skel.h"

namespace xlb::bench {

static_assert(sizeof(xlb_bench::xlb_bench__bss::frame_template) == kFrameLen,
              "kFrameLen must match XLB_BENCH_FRAME_LEN in bpf/bench/xlb_bench.bpf.c");

void Harness::SkeletonDeleter::operator()(xlb_bench* skel) const { xlb_bench__destroy(skel); }

Harness::Harness(std::unique_ptr<xlb_bench, SkeletonDeleter> skel) : skel_(std::move(skel)) {}
Harness::Harness(Harness&&) noexcept = default;
Harness& Harness::operator=(Harness&&) noexcept = default;
Harness::~Harness() = default;

xlb::Result<Harness> Harness::load() {
    std::unique_ptr<xlb_bench, SkeletonDeleter> skel(xlb_bench__open());
    if (!skel) return bpf::fail(errno, "open the xlb_bench BPF object");
    if (int rc = xlb_bench__load(skel.get()); rc != 0)
        return bpf::fail(rc, "load the xlb_bench BPF programs",
                         -rc == EPERM ? "loading BPF needs root or CAP_BPF + CAP_NET_ADMIN" : "");
    if (!skel->bss) return bpf::fail(EINVAL, "map the xlb_bench globals");
    return Harness(std::move(skel));
}

int Harness::floor_fd() const { return bpf_program__fd(skel_->progs.xlb_bench_floor); }

xlb::Result<void> Harness::set_target(int prog_fd) const {
    const std::uint32_t slot = 0;
    const std::uint32_t fd = static_cast<std::uint32_t>(prog_fd);
    if (bpf_map_update_elem(bpf_map__fd(skel_->maps.xlb_bench_target), &slot, &fd, BPF_ANY) != 0)
        return bpf::fail(
            errno, "point the bench wrapper's tail call at program fd " + std::to_string(prog_fd));
    return {};
}

void Harness::set_template(std::span<const std::uint8_t> frame, std::uint32_t vary_offset,
                           std::uint32_t vary_csum_offset) const {
    std::memset(skel_->bss->frame_template, 0, kFrameLen);
    std::memcpy(skel_->bss->frame_template, frame.data(), std::min(frame.size(), kFrameLen));
    skel_->bss->vary_offset = vary_offset;
    skel_->bss->vary_csum_offset = vary_csum_offset;
}

namespace {
// XLB_BENCH_COUNTER_STRIDE in bpf/bench/xlb_bench.bpf.c: one counter per cache line.
constexpr int kCounterStride = 16;
constexpr int kMaxCpus = static_cast<int>(sizeof(xlb_bench::xlb_bench__bss::vary_counters) /
                                          sizeof(std::uint32_t) / kCounterStride);
static_assert(kMaxCpus == 64, "XLB_BENCH_MAX_CPUS");

std::uint32_t* counter_of(xlb_bench* skel, int cpu) {
    return &skel->bss->vary_counters[(cpu % kMaxCpus) * kCounterStride];
}
}  // namespace

int Harness::max_cpus() { return kMaxCpus; }

std::uint32_t Harness::vary_counter(int cpu) const {
    return __atomic_load_n(counter_of(skel_.get(), cpu), __ATOMIC_RELAXED);
}

void Harness::set_vary_counter(int cpu, std::uint32_t value) const {
    __atomic_store_n(counter_of(skel_.get(), cpu), value, __ATOMIC_RELAXED);
}

void Harness::set_vary_cycle(std::uint32_t base, std::uint32_t length) const {
    skel_->bss->vary_cycle_base = base;
    skel_->bss->vary_cycle_len = length;
}

xlb::Result<bpf::TestRunResult> Harness::run(std::span<const std::uint8_t> frame,
                                             std::uint32_t repeat) const {
    if (frame.size() != kFrameLen)
        return bpf::fail(EINVAL, "run the bench wrapper on a frame of " +
                                     std::to_string(frame.size()) + " bytes (it needs " +
                                     std::to_string(kFrameLen) + ")");
    return bpf::test_run_xdp(bpf_program__fd(skel_->progs.xlb_bench_wrapper), frame, repeat);
}

}  // namespace xlb::bench

namespace xlb::bench {

namespace {

// Points every map of `obj` at the balancer's own (its .bss too: the
// connection-table clock); the copy's other globals are its own.
xlb::Result<void> share_maps(bpf_object* obj, const bpf::LbProgram& program) {
    const auto shared = program.map_fds();
    // Global-variable maps are named after their object ("xlb_lb.bss").
    auto section = [](std::string_view name) {
        const std::size_t dot = name.find('.');
        return dot == std::string_view::npos ? std::string_view{} : name.substr(dot);
    };
    bpf_map* map = nullptr;
    bpf_object__for_each_map(map, obj) {
        const std::string_view name = bpf_map__name(map);
        if (bpf_map__is_internal(map) && section(name) != ".bss") continue;
        int fd = -1;
        for (const auto& [other, other_fd] : shared)
            if (bpf_map__is_internal(map) ? section(other) == section(name) : other == name)
                fd = other_fd;
        if (fd < 0) return bpf::fail(ENOENT, "find the balancer's map for " + std::string(name));
        if (int rc = bpf_map__reuse_fd(map, fd); rc != 0)
            return bpf::fail(rc, "share the balancer's map " + std::string(name));
    }
    return {};
}

template <typename Skel>
xlb::Result<std::pair<std::shared_ptr<void>, int>> load_copy(Skel* (*open)(), int (*load)(Skel*),
                                                             void (*destroy)(Skel*),
                                                             const char* what,
                                                             const bpf::LbProgram& program) {
    std::shared_ptr<Skel> skel(open(), destroy);
    if (!skel) return bpf::fail(errno, std::string("open the ") + what + " BPF object");
    if (auto ok = share_maps(skel->obj, program); !ok) return std::unexpected(ok.error());
    // Read-only globals are the copy's own: as the balancer was loaded.
    skel->rodata->xlb_quic_crypto = program.quic_crypto_available() ? 1 : 0;
    if (int rc = load(skel.get()); rc != 0)
        return bpf::fail(rc, std::string("load the ") + what + " BPF program");
    const int fd = bpf_program__fd(skel->progs.xlb_lb);
    return std::pair<std::shared_ptr<void>, int>{std::shared_ptr<void>(skel, skel.get()), fd};
}

}  // namespace

struct ProgramCopy::Object {
    std::shared_ptr<void> skel;  // keeps the object loaded
    int prog_fd = -1;
};

ProgramCopy::ProgramCopy(std::unique_ptr<Object> object) : object_(std::move(object)) {}
ProgramCopy::ProgramCopy(ProgramCopy&&) noexcept = default;
ProgramCopy& ProgramCopy::operator=(ProgramCopy&&) noexcept = default;
ProgramCopy::~ProgramCopy() = default;

xlb::Result<ProgramCopy> ProgramCopy::load(const bpf::LbProgram& program, Variant variant) {
    auto loaded =
        variant == Variant::kNoCaptureCheck
            ? load_copy<xlb_lb_no_capture>(xlb_lb_no_capture__open, xlb_lb_no_capture__load,
                                           xlb_lb_no_capture__destroy, "xlb_lb_no_capture", program)
            : load_copy<xlb_lb_no_flow_cache>(
                  xlb_lb_no_flow_cache__open, xlb_lb_no_flow_cache__load,
                  xlb_lb_no_flow_cache__destroy, "xlb_lb_no_flow_cache", program);
    if (!loaded) return std::unexpected(loaded.error());
    auto object = std::make_unique<Object>();
    object->skel = std::move(loaded->first);
    object->prog_fd = loaded->second;
    return ProgramCopy(std::move(object));
}

int ProgramCopy::prog_fd() const { return object_->prog_fd; }

}  // namespace xlb::bench
