// SPDX-License-Identifier: Apache-2.0
#include "xlb/bpf/test_run.h"

#include <bpf/bpf.h>

namespace xlb::bpf {

Result<TestRunResult> test_run_xdp(int prog_fd, std::span<const std::uint8_t> frame,
                                   std::uint32_t repeat) {
    // Encapsulation grows the frame by at most an IPv6 header; leave room.
    std::vector<std::uint8_t> out(frame.size() + 256);
    LIBBPF_OPTS(bpf_test_run_opts, opts, .data_in = frame.data(), .data_out = out.data(),
                .data_size_in = static_cast<__u32>(frame.size()),
                .data_size_out = static_cast<__u32>(out.size()),
                .repeat = static_cast<int>(repeat));
    if (bpf_prog_test_run_opts(prog_fd, &opts) != 0)
        return fail(errno, "BPF_PROG_TEST_RUN of program fd " + std::to_string(prog_fd));
    out.resize(opts.data_size_out);
    return TestRunResult{opts.retval, std::move(out), opts.duration};
}

Result<TestRunResult> test_run_tc(int prog_fd, std::span<const std::uint8_t> frame,
                                  std::uint32_t mark) {
    std::vector<std::uint8_t> out(frame.size() + 256);
    __sk_buff ctx{};
    ctx.mark = mark;
    LIBBPF_OPTS(bpf_test_run_opts, opts, .data_in = frame.data(), .data_out = out.data(),
                .data_size_in = static_cast<__u32>(frame.size()),
                .data_size_out = static_cast<__u32>(out.size()), .ctx_in = &ctx,
                .ctx_size_in = sizeof(ctx), .repeat = 1);
    if (bpf_prog_test_run_opts(prog_fd, &opts) != 0)
        return fail(errno, "BPF_PROG_TEST_RUN (tc) of program fd " + std::to_string(prog_fd));
    out.resize(opts.data_size_out);
    return TestRunResult{opts.retval, std::move(out), opts.duration};
}

}  // namespace xlb::bpf
