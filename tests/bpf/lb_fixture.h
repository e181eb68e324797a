// SPDX-License-Identifier: Apache-2.0
// Shared fixture for the balancer's packet tests: one loaded program per test
// binary, every map reset before each test so order never matters, and
// helpers that compute what the program must do independently of it (the
// shared flow hash, the Maglev library, the encapsulation builder).
#pragma once

#include <gtest/gtest.h>
#include <sched.h>

#include <array>
#include <cstdint>
#include <functional>
#include <optional>
#include <utility>
#include <vector>

#include "testbed.h"
#include "xlb/abi.h"
#include "xlb/bpf/programs.h"
#include "xlb/bpf/ring.h"
#include "xlb/bpf/test_run.h"
#include "xlb/flow_hash.h"

namespace xlb::test {

using Outcomes = std::array<std::uint64_t, XLB_OUT__MAX>;

struct RingMember {
    std::uint32_t backend_id;
    std::uint32_t weight = 1;
};

class LbTest : public ::testing::Test {
protected:
    static constexpr bpf::LbMapSizes kSizes{64, 256, 8192};

    static void SetUpTestSuite();
    static void TearDownTestSuite();
    void SetUp() override;

    static bpf::LbProgram& lb() { return *program_; }

    // Default configuration: bench_config() (testbed.h), as the demo and the
    // benchmark load it.
    static xlb_config default_config();
    void write_config(const xlb_config& cfg);

    void add_vip(const net::IpAddress& addr, std::uint16_t port, std::uint8_t proto,
                 std::uint32_t vip_id, std::uint32_t flags = 0);
    void add_backend(std::uint32_t id, const net::IpAddress& addr, std::uint32_t generation = 1);
    // Builds the VIP's ring from the backends' addresses and weights with
    // datapath::build_ring (xlbd's table for them), publishes it, and returns it (backend id per
    // slot).
    std::vector<std::uint32_t> publish_maglev(std::uint32_t vip_id,
                                              const std::vector<RingMember>& members);
    void publish_ring(std::uint32_t vip_id, const std::vector<std::uint32_t>& ring);

    bpf::TestRunResult run(const Bytes& frame);
    Outcomes outcomes();
    xlb_vip_stats vip_stats(std::uint32_t vip_id);
    xlb_backend_stats backend_stats(std::uint32_t backend_id);

    // The backend a new flow gets from `ring`, computed in C++.
    static std::uint32_t expected_backend(const std::vector<std::uint32_t>& ring,
                                          const xlb_flow_key& key, std::uint32_t vip_flags = 0);
    // The frame the balancer must emit for `input` sent to `backend`.
    // hint: the backend a second-chance hint names (GUE private data);
    // gue_data: other GUE private data (a cookie ACK's), written as given.
    Bytes expected_encap(const Bytes& input, const net::IpAddress& backend, const xlb_flow_key& key,
                         std::uint32_t vip_flags = 0,
                         const std::optional<net::IpAddress>& hint = std::nullopt,
                         const Bytes& gue_data = {}) const;

    // Runs the frame and checks: action, only `outcome` counted once, and
    // for XDP_TX/XDP_PASS the exact output frame.
    void expect_outcome(const Bytes& input, std::uint32_t action, xlb_outcome outcome,
                        const std::optional<Bytes>& expected_output);

    xlb_config config_{};
    std::vector<net::IpAddress> backend_addr_;  // by backend id
    // The entry-time clock SetUp set (xlb_ct_clock): after the last stamp of
    // deleted entries, so the flow cache's copies taken from now are used.
    std::uint32_t ct_clock_ = 0;

private:
    static std::optional<bpf::LbProgram> program_;
};

// Keeps the test thread on one CPU (BPF_PROG_TEST_RUN runs the program on
// the caller's), so that every run uses the same per-CPU bucket, budget and
// flow cache; the old affinity comes back at the end of the scope.
class PinnedToOneCpu {
public:
    PinnedToOneCpu() {
        have_old_ = ::sched_getaffinity(0, sizeof old_, &old_) == 0;
        cpu_ = ::sched_getcpu();
        cpu_set_t one;
        CPU_ZERO(&one);
        CPU_SET(cpu_, &one);
        ok_ = ::sched_setaffinity(0, sizeof one, &one) == 0;
    }
    ~PinnedToOneCpu() {
        if (have_old_) ::sched_setaffinity(0, sizeof old_, &old_);
    }
    bool ok() const { return ok_; }
    int cpu() const { return cpu_; }

private:
    cpu_set_t old_{};
    bool have_old_ = false;
    bool ok_ = false;
    int cpu_ = 0;
};

// flow_key(const Flow&): testbed.h.

// The outer headers the balancer's packet to backend `to` has (from the
// encapsulation source, from the next hop's MAC to the LB's).
Encapsulation from_lb(const net::IpAddress& to);

// Expects two frames to be identical, showing a decoded diff when not.
void expect_same_frame(const Bytes& actual, const Bytes& expected);

// A loaded xlb_decap that takes packets to `addresses`; nullopt (with a
// test failure) when it cannot be loaded or given them.
std::optional<bpf::DecapProgram> decap_serving(std::initializer_list<net::IpAddress> addresses);

// Runs xlb_decap on `input` and checks the action, the whole output frame,
// and that `outcome` alone was counted, once. run: how the program is run
// (e.g. from inside a namespace); by default from the calling thread.
using DecapRun = std::function<xlb::Result<bpf::TestRunResult>(int prog_fd, const Bytes& input)>;
void expect_decap_run(const bpf::DecapProgram& decap, const Bytes& input, std::uint32_t action,
                      xlb_decap_outcome outcome, const Bytes& expected, const DecapRun& run = {});

}  // namespace xlb::test
