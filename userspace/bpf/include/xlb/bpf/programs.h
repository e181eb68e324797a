// SPDX-License-Identifier: Apache-2.0
// Owners of the loaded BPF objects (libbpf skeletons) with typed views of
// every map. Tests, benchmarks and the agent use these and nothing lower.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "xlb/abi.h"
#include "xlb/bpf/error.h"
#include "xlb/bpf/maps.h"
#include "xlb/bpf/pin.h"

struct xlb_lb;
struct xlb_decap;

namespace xlb::bpf {

struct LbMapSizes {
    std::uint32_t max_vips = XLB_MAX_VIPS_DEFAULT;
    std::uint32_t max_backends = XLB_MAX_BACKENDS_DEFAULT;
    std::uint32_t conntrack_entries = XLB_CONNTRACK_DEFAULT;
};

// TEMPORARY STUB (replaced by ct-bpf): what a load did with the connection
// table (XLB_MAP_CONNTRACK).
struct ConntrackLoad {
    enum class Outcome {
        kCreated,
        kReused,
        kKeptPinnedSize,
        kResized,
        kMigratedV1,
        kV1Unreadable,
    };
    Outcome outcome = Outcome::kCreated;
    std::uint32_t capacity = 0;
    std::uint32_t requested = 0;
    std::uint64_t copied = 0;
    std::uint64_t dropped = 0;
    std::string message;
    bool warn() const {
        return outcome == Outcome::kKeptPinnedSize || outcome == Outcome::kV1Unreadable ||
               dropped > 0;
    }
};

class LbProgram {
public:
    // Opens the embedded object, sizes the maps and loads it into the kernel.
    // With options.pin_dir, compatible maps pinned there are reused and every
    // map is pinned there after load (see xlb/bpf/pin.h); pins() tells which.
    static Result<LbProgram> load(const LbMapSizes& sizes = {}, const LoadOptions& options = {});

    // Removes the balancer's map pins from dir, and dir when it is then empty
    // (e.g. --detach-on-exit). A missing dir or pin is not an error. The maps
    // themselves live on while a program or descriptor still uses them.
    static Result<void> unpin(const std::string& dir);

    LbProgram(LbProgram&&) noexcept;
    LbProgram& operator=(LbProgram&&) noexcept;
    ~LbProgram();

    int prog_fd() const;
    const LbMapSizes& sizes() const { return sizes_; }
    const PinReport& pins() const { return pins_; }
    // TEMPORARY STUB (replaced by ct-bpf).
    ConntrackLoad conntrack_load() const;

    ArrayMap<xlb_config> config() const;
    HashMap<xlb_vip_key, xlb_vip_value> vips() const;
    MapView rings() const;  // ARRAY_OF_MAPS: use ring.h to publish
    ArrayMap<xlb_backend> backends() const;
    HashMap<xlb_flow_key, xlb_ct_value> conntrack() const;
    PerCpuArrayMap<xlb_ct_cpu> ct_cpu() const;  // the insert budget, one entry
    PerCpuArrayMap<std::uint64_t> outcomes() const;
    PerCpuArrayMap<xlb_vip_stats> vip_stats() const;
    PerCpuArrayMap<xlb_backend_stats> backend_stats() const;

private:
    struct SkeletonDeleter {
        void operator()(xlb_lb* skel) const;
    };
    LbProgram(std::unique_ptr<xlb_lb, SkeletonDeleter> skel, LbMapSizes sizes, PinReport pins);

    std::unique_ptr<xlb_lb, SkeletonDeleter> skel_;
    LbMapSizes sizes_;
    PinReport pins_;
};

class DecapProgram {
public:
    // Same pinning behaviour as LbProgram::load.
    static Result<DecapProgram> load(const LoadOptions& options = {});
    static Result<void> unpin(const std::string& dir);

    DecapProgram(DecapProgram&&) noexcept;
    DecapProgram& operator=(DecapProgram&&) noexcept;
    ~DecapProgram();

    int prog_fd() const;
    const PinReport& pins() const { return pins_; }
    HashMap<xlb_decap_addr, std::uint8_t> local_addresses() const;
    PerCpuArrayMap<std::uint64_t> outcomes() const;

private:
    struct SkeletonDeleter {
        void operator()(xlb_decap* skel) const;
    };
    DecapProgram(std::unique_ptr<xlb_decap, SkeletonDeleter> skel, PinReport pins);

    std::unique_ptr<xlb_decap, SkeletonDeleter> skel_;
    PinReport pins_;
};

// Sums a per-CPU counter vector.
template <typename V, typename F>
auto sum_per_cpu(const std::vector<V>& per_cpu, F field) {
    decltype(field(per_cpu.front())) total{};
    for (const V& v : per_cpu) total += field(v);
    return total;
}

}  // namespace xlb::bpf
