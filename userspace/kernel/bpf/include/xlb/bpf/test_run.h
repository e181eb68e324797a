// SPDX-License-Identifier: Apache-2.0
// BPF_PROG_TEST_RUN for XDP and tc programs: run a program on one frame.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "xlb/bpf/error.h"

namespace xlb::bpf {

struct TestRunResult {
    std::uint32_t action = 0;         // XDP_* (or TC_ACT_* for tc) returned by the program
    std::vector<std::uint8_t> frame;  // the frame after the program
    std::uint32_t duration_ns = 0;    // mean per repetition, as the kernel measured
};

// repeat > 1 re-runs on the same buffer without restoring it: only for
// programs that do not change the frame (see bpf/bench/xlb_bench.bpf.c).
Result<TestRunResult> test_run_xdp(int prog_fd, std::span<const std::uint8_t> frame,
                                   std::uint32_t repeat = 1);

// Runs a tc (SCHED_CLS) program on one Ethernet frame with skb->mark = mark.
// action is the TC_ACT_* the program returned.
Result<TestRunResult> test_run_tc(int prog_fd, std::span<const std::uint8_t> frame,
                                  std::uint32_t mark = 0);

}  // namespace xlb::bpf
