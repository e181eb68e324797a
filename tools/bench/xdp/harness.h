// SPDX-License-Identifier: Apache-2.0
// The measuring harness of xlb-bench-xdp: owns the wrapper object
// (bpf/bench/xlb_bench.bpf.c), points its tail call at the program under test
// or at the floor, loads the frame it restores on every repetition, and runs
// it through BPF_PROG_TEST_RUN.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>

#include "xlb/bpf/error.h"
#include "xlb/bpf/test_run.h"

struct xlb_bench;

namespace xlb::bpf {
class LbProgram;
}

namespace xlb::bench {

// The wrapper restores exactly this many bytes (XLB_BENCH_FRAME_LEN).
inline constexpr std::size_t kFrameLen = 128;

class Harness {
public:
    static xlb::Result<Harness> load();

    Harness(Harness&&) noexcept;
    Harness& operator=(Harness&&) noexcept;
    ~Harness();

    // Fd of xlb_bench_floor: wrapper + floor is the baseline of every case.
    int floor_fd() const;
    // The program the wrapper tail-calls from now on (slot 0 of its prog array).
    xlb::Result<void> set_target(int prog_fd) const;
    // The frame restored before every repetition, and the offset of the 32-bit
    // field given a new value (the running counter) on every repetition; 0 = none.
    // vary_csum_offset: the 16-bit checksum over that field, kept valid.
    void set_template(std::span<const std::uint8_t> frame, std::uint32_t vary_offset,
                      std::uint32_t vary_csum_offset = 0) const;
    // The last value the wrapper wrote at vary_offset on `cpu` (counts every
    // repetition there that had one), and where that count goes on from.
    std::uint32_t vary_counter(int cpu) const;
    void set_vary_counter(int cpu, std::uint32_t value) const;
    // Makes the varied field cycle through [base, base + length) (a fixed
    // set of flows); length 0: a new value every repetition.
    void set_vary_cycle(std::uint32_t base, std::uint32_t length) const;
    // CPUs the wrapper keeps apart counters for (XLB_BENCH_MAX_CPUS).
    static int max_cpus();
    // Runs the wrapper `repeat` times on `frame` (kFrameLen bytes).
    xlb::Result<bpf::TestRunResult> run(std::span<const std::uint8_t> frame,
                                        std::uint32_t repeat) const;

private:
    struct SkeletonDeleter {
        void operator()(xlb_bench* skel) const;
    };
    explicit Harness(std::unique_ptr<xlb_bench, SkeletonDeleter> skel);

    std::unique_ptr<xlb_bench, SkeletonDeleter> skel_;
};

// A second copy of the balancer, built with a part left out, sharing every
// map and the .bss globals of `program`: the same paths minus that part.
// kNoCaptureCheck (XLB_NO_CAPTURE): without the capture flag's read, the
// baseline of the capture_idle figure. kNoFlowCache (XLB_NO_FLOW_CACHE):
// without the established-flow cache, for what the cache earns and costs.
class ProgramCopy {
public:
    enum class Variant { kNoCaptureCheck, kNoFlowCache };
    static xlb::Result<ProgramCopy> load(const bpf::LbProgram& program, Variant variant);
    ProgramCopy(ProgramCopy&&) noexcept;
    ProgramCopy& operator=(ProgramCopy&&) noexcept;
    ~ProgramCopy();
    int prog_fd() const;

private:
    struct Object;
    explicit ProgramCopy(std::unique_ptr<Object> object);
    std::unique_ptr<Object> object_;
};

}  // namespace xlb::bench
