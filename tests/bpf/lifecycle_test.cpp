// SPDX-License-Identifier: Apache-2.0
// The BPF lifecycle the agent drives: pinning and reuse of the balancer's
// maps, attaching through XdpAttachment (native, generic, auto), keeping a
// program attached on exit, and replacing it without a moment in which the
// interface has no program.
//
// Every test runs in a network namespace of its own (xlbt-<pid>-<n>) with a
// veth pair, entered on the test thread and always removed, also when an
// assertion fails; no traffic is sent. Pins go to a unique directory under
// /sys/fs/bpf that is always removed. Needs root.
#include <arpa/inet.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <linux/bpf.h>
#include <signal.h>
#include <spawn.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "netns.h"
#include "xlb/abi.h"
#include "xlb/bpf/ct_clock.h"
#include "xlb/bpf/fd.h"
#include "xlb/bpf/pin.h"
#include "xlb/bpf/programs.h"
#include "xlb/bpf/ring.h"
#include "xlb/bpf/xdp.h"
#include "xlb/ct_set.h"
#include "xlb/flow_hash.h"

extern char** environ;

namespace xlb::bpf {
namespace {

namespace fs = std::filesystem;

constexpr const char* kPrefix = "xlbt-";
constexpr const char* kVeth = "xv0";
constexpr const char* kPeer = "xv1";
constexpr LbMapSizes kSizes{16, 64, 4096};

std::string own_prefix() { return kPrefix + std::to_string(::getpid()) + "-"; }

// Runs a command (no shell) and returns its exit status; -1 if it did not run.
int run(const std::vector<std::string>& argv, bool quiet = false) {
    std::vector<char*> args;
    for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    if (quiet) {
        posix_spawn_file_actions_addopen(&actions, 1, "/dev/null", O_WRONLY, 0);
        posix_spawn_file_actions_addopen(&actions, 2, "/dev/null", O_WRONLY, 0);
    }
    pid_t pid = 0;
    int rc = posix_spawnp(&pid, args[0], &actions, nullptr, args.data(), environ);
    posix_spawn_file_actions_destroy(&actions);
    if (rc != 0) return -1;
    int status = 0;
    while (::waitpid(pid, &status, 0) < 0)
        if (errno != EINTR) return -1;
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

// Namespaces and pin directories left by a test binary that crashed: the
// name carries the pid, and a dead pid means nobody will clean them up.
bool left_by_dead_process(const std::string& name) {
    if (!name.starts_with(kPrefix)) return false;
    std::string rest = name.substr(std::strlen(kPrefix));
    std::size_t dash = rest.find('-');
    if (dash == std::string::npos || dash == 0) return false;
    pid_t pid = 0;
    for (char c : rest.substr(0, dash)) {
        if (c < '0' || c > '9') return false;
        pid = pid * 10 + (c - '0');
    }
    return pid != ::getpid() && ::kill(pid, 0) != 0 && errno == ESRCH;
}

void sweep_stale() {
    std::error_code ec;
    test::sweep_stale_netns("xlbt");
    for (const auto& entry : fs::directory_iterator("/sys/fs/bpf", ec)) {
        std::string name = entry.path().filename();
        if (left_by_dead_process(name)) fs::remove_all(entry.path(), ec);
    }
}

// The test's namespace (tests/support/netns.h) with a veth pair, entered on
// the calling thread. Members go in reverse: the thread leaves before the
// namespace is removed, whatever state setup reached.
class TestNetns {
public:
    explicit TestNetns(std::string name) : name_(std::move(name)) {}

    const std::string& name() const { return name_; }

    ::testing::AssertionResult setup() {
        try {
            netns_.emplace(name_);
            netns_->ip(std::string("link add ") + kVeth + " type veth peer name " + kPeer);
            netns_->ip(std::string("link set dev ") + kVeth + " up");
            netns_->ip(std::string("link set dev ") + kPeer + " up");
            inside_.emplace(name_);
        } catch (const std::exception& e) {
            return ::testing::AssertionFailure() << e.what();
        }
        return ::testing::AssertionSuccess();
    }

private:
    std::string name_;
    std::optional<test::Netns> netns_;
    std::optional<test::NetnsScope> inside_;
};

// Polls the interface's XDP program from a thread of its own (in the same
// namespace) while a test replaces it, and counts the polls that saw none.
class XdpWatcher {
public:
    XdpWatcher(const std::string& netns, int ifindex)
        : thread_([this, netns, ifindex] { loop(netns, ifindex); }) {
        while (polls_.load() < 20 && !failed_.load()) std::this_thread::yield();
    }
    ~XdpWatcher() { stop(); }

    void stop() {
        stop_ = true;
        if (thread_.joinable()) thread_.join();
    }
    bool failed() const { return failed_; }
    std::uint64_t polls() const { return polls_; }
    std::uint64_t gaps() const { return gaps_; }
    const std::set<std::uint32_t>& seen() const { return seen_; }

private:
    void loop(const std::string& netns, int ifindex) {
        std::optional<test::NetnsScope> inside;
        try {
            inside.emplace(netns);
        } catch (const std::exception&) {
            failed_ = true;
            return;
        }
        while (!stop_.load()) {
            LIBBPF_OPTS(bpf_xdp_query_opts, q);
            if (bpf_xdp_query(ifindex, 0, &q) != 0) {
                failed_ = true;
                return;
            }
            std::uint32_t id = q.drv_prog_id ? q.drv_prog_id : q.skb_prog_id;
            if (id == 0) gaps_.fetch_add(1);
            seen_.insert(id);
            polls_.fetch_add(1);
        }
    }

    std::atomic<bool> stop_{false};
    std::atomic<bool> failed_{false};
    std::atomic<std::uint64_t> polls_{0};
    std::atomic<std::uint64_t> gaps_{0};
    std::set<std::uint32_t> seen_;  // read after stop()
    std::thread thread_;
};

std::uint32_t map_id(int fd) {
    bpf_map_info info{};
    __u32 len = sizeof info;
    return bpf_obj_get_info_by_fd(fd, &info, &len) == 0 ? info.id : 0;
}

std::uint32_t pinned_map_id(const std::string& path) {
    UniqueFd fd(bpf_obj_get(path.c_str()));
    return fd ? map_id(fd.get()) : 0;
}

std::vector<std::uint32_t> lb_map_ids(const LbProgram& lb) {
    return {
        map_id(lb.config().fd()),   map_id(lb.vips().fd()),      map_id(lb.rings().fd()),
        map_id(lb.backends().fd()), map_id(lb.conntrack().fd()), map_id(lb.ct_cpu().fd()),
        map_id(lb.outcomes().fd()), map_id(lb.vip_stats().fd()), map_id(lb.backend_stats().fd())};
}

xlb_vip_key vip_key() {
    xlb_vip_key k{};
    k.addr[0] = htonl(0xc0000201);  // 192.0.2.1
    k.port = htons(80);
    k.proto = 6;
    k.family = XLB_FAMILY_V4;
    return k;
}

xlb_flow_key flow() {
    xlb_flow_key k{};
    k.src[0] = htonl(0xc6336401);  // 198.51.100.1
    k.dst[0] = htonl(0xc0000201);
    k.sport = htons(40000);
    k.dport = htons(80);
    k.proto = 6;
    k.family = XLB_FAMILY_V4;
    return k;
}

class LifecycleTest : public ::testing::Test {
protected:
    static void SetUpTestSuite() {
        ASSERT_EQ(run({"sh", "-c", "mountpoint -q /sys/fs/bpf || mount -t bpf bpf /sys/fs/bpf"}), 0)
            << "bpffs is not mounted at /sys/fs/bpf";
        sweep_stale();
    }

    void SetUp() override {
        netns_ = std::make_unique<TestNetns>(own_prefix() + std::to_string(counter_++));
        ASSERT_TRUE(netns_->setup());
        auto veth = Interface::by_name(kVeth);
        ASSERT_TRUE(veth) << veth.error().message();
        veth_ = *veth;
        auto lo = Interface::by_name("lo");
        ASSERT_TRUE(lo) << lo.error().message();
        lo_ = *lo;
    }

    void TearDown() override {
        std::error_code ec;
        for (const std::string& root : pin_roots_) fs::remove_all(root, ec);
        netns_.reset();
    }

    // A fresh pin directory, nested like the agent's /sys/fs/bpf/xlb/<if>/,
    // that does not exist yet; removed in TearDown.
    std::string pin_dir() {
        std::string root =
            "/sys/fs/bpf/" + netns_->name() + "-" + std::to_string(pin_roots_.size());
        pin_roots_.push_back(root);
        return root + "/xlb/" + kVeth;
    }

    LbProgram load(const LoadOptions& options = {}, const LbMapSizes& sizes = kSizes) {
        auto lb = LbProgram::load(sizes, options);
        EXPECT_TRUE(lb) << lb.error().message();
        if (!lb) throw std::runtime_error(lb.error().message());
        return std::move(*lb);
    }

    // The VIP of flow() (id 3) pinned in dir, as the agent being upgraded
    // left it: a layout-5 slot names its flow by its VIP, so a migration
    // keeps the entries of the VIPs the balancer has. The layout-5 table
    // this load pinned goes again (it would supersede an older layout's).
    void pin_vip_of_flows(const std::string& dir) {
        {
            LbProgram lb = load({.pin_dir = dir});
            ASSERT_TRUE(lb.put_vip(vip_key(), {3, 0}));
        }
        ASSERT_EQ(::unlink((dir + "/" XLB_MAP_CONNTRACK).c_str()), 0) << std::strerror(errno);
    }

    XdpStatus status(const Interface& iface) {
        auto st = query_xdp(iface);
        EXPECT_TRUE(st) << st.error().message();
        return st ? *st : XdpStatus{};
    }

    std::unique_ptr<TestNetns> netns_;
    Interface veth_, lo_;
    std::vector<std::string> pin_roots_;
    static inline int counter_ = 0;
};

// --- attaching --------------------------------------------------------------

TEST_F(LifecycleTest, NativeAttachIsQueryableAndDetachedOnDestruction) {
    LbProgram lb = load();
    {
        auto a = XdpAttachment::attach(lb, veth_, {.mode = XdpMode::kNative});
        ASSERT_TRUE(a) << a.error().message();
        EXPECT_EQ(a->mode(), XdpAttachMode::kNative);
        EXPECT_EQ(a->prog_name(), "xlb_lb");
        EXPECT_EQ(a->report().replaced_prog_id, 0u);
        EXPECT_FALSE(a->report().native_error);
        XdpStatus st = status(veth_);
        EXPECT_EQ(st.mode, XdpAttachMode::kNative);
        EXPECT_STREQ(to_string(st.mode), "native");
        EXPECT_EQ(st.prog_id, a->prog_id());
        EXPECT_EQ(st.prog_name, "xlb_lb");
        EXPECT_EQ(a->report().summary(veth_.name, "xlb_lb"),
                  "xlb_lb attached to xv0 in native mode");
    }
    EXPECT_FALSE(status(veth_).attached());
}

TEST_F(LifecycleTest, GenericAttachAndExplicitDetach) {
    LbProgram lb = load();
    auto by_index = Interface::by_index(veth_.ifindex);
    ASSERT_TRUE(by_index) << by_index.error().message();
    EXPECT_EQ(by_index->name, kVeth);
    auto a = XdpAttachment::attach(lb, *by_index, {.mode = XdpMode::kGeneric});
    ASSERT_TRUE(a) << a.error().message();
    EXPECT_EQ(a->mode(), XdpAttachMode::kGeneric);
    XdpStatus st = status(veth_);
    EXPECT_EQ(st.mode, XdpAttachMode::kGeneric);
    EXPECT_STREQ(to_string(st.mode), "generic");
    EXPECT_EQ(st.prog_id, a->prog_id());

    auto detached = a->detach();
    ASSERT_TRUE(detached) << detached.error().message();
    EXPECT_TRUE(*detached);
    EXPECT_FALSE(a->attached());
    EXPECT_FALSE(status(veth_).attached());
    auto again = a->detach();
    ASSERT_TRUE(again);
    EXPECT_FALSE(*again);
}

TEST_F(LifecycleTest, AutoPrefersNative) {
    LbProgram lb = load();
    auto a = XdpAttachment::attach(lb, veth_, {.mode = XdpMode::kAuto});
    ASSERT_TRUE(a) << a.error().message();
    EXPECT_EQ(a->mode(), XdpAttachMode::kNative);
    EXPECT_FALSE(a->report().native_error);
    EXPECT_EQ(status(veth_).mode, XdpAttachMode::kNative);
}

TEST_F(LifecycleTest, AutoFallsBackToGenericAndSaysWhy) {
    // The loopback device has no native XDP.
    LbProgram lb = load();
    auto a = XdpAttachment::attach(lb, lo_, {.mode = XdpMode::kAuto});
    ASSERT_TRUE(a) << a.error().message();
    EXPECT_EQ(a->mode(), XdpAttachMode::kGeneric);
    ASSERT_TRUE(a->report().native_error);
    EXPECT_EQ(a->report().native_error->code, EOPNOTSUPP);
    std::string summary = a->report().summary(lo_.name, a->prog_name());
    EXPECT_NE(summary.find("in generic mode (native XDP failed: attach XDP to lo in native mode: "
                           "Operation not supported"),
              std::string::npos)
        << summary;
    EXPECT_EQ(status(lo_).mode, XdpAttachMode::kGeneric);
}

TEST_F(LifecycleTest, NativeWithoutDriverSupportFailsWithAHint) {
    LbProgram lb = load();
    auto a = XdpAttachment::attach(lb, lo_, {.mode = XdpMode::kNative});
    ASSERT_FALSE(a);
    EXPECT_EQ(a.error().code, EOPNOTSUPP);
    EXPECT_EQ(a.error().message(),
              "attach XDP to lo in native mode: Operation not supported "
              "(driver has no native XDP; try --xdp-mode generic)");
    EXPECT_FALSE(status(lo_).attached());

    auto missing = Interface::by_name("xlbt-nonesuch");
    ASSERT_FALSE(missing);
    EXPECT_EQ(missing.error().code, ENODEV);
    EXPECT_EQ(missing.error().message(),
              "find interface xlbt-nonesuch: No such device "
              "(no interface of that name in this network namespace)");
}

TEST_F(LifecycleTest, TheKernelsReasonReachesTheError) {
    // Native XDP on a veth refuses a peer MTU above what one page holds
    // (docs/architecture.md); the kernel says so in its extended ack.
    ASSERT_EQ(run({"ip", "-n", netns_->name(), "link", "set", "dev", kPeer, "mtu", "9000"}), 0);
    LbProgram lb = load();
    auto native = XdpAttachment::attach(lb, veth_, {.mode = XdpMode::kNative});
    ASSERT_FALSE(native);
    EXPECT_EQ(native.error().code, ERANGE);
    EXPECT_EQ(native.error().message(),
              "attach XDP to xv0 in native mode: Numerical result out of range "
              "(kernel: veth: Peer MTU is too large to set XDP; try --xdp-mode generic)");

    auto a = XdpAttachment::attach(lb, veth_, {.mode = XdpMode::kAuto});
    ASSERT_TRUE(a) << a.error().message();
    EXPECT_EQ(a->mode(), XdpAttachMode::kGeneric);
    ASSERT_TRUE(a->report().native_error);
    EXPECT_EQ(a->report().native_error->message(), native.error().message());
    EXPECT_EQ(a->summary(), "xlb_lb attached to xv0 in generic mode (native XDP failed: " +
                                native.error().message() + ")");
}

TEST_F(LifecycleTest, KeptAttachmentOutlivesTheAgentsObjects) {
    std::uint32_t id = 0;
    {
        LbProgram lb = load();
        auto a = XdpAttachment::attach(lb, veth_, {.mode = XdpMode::kNative});
        ASSERT_TRUE(a) << a.error().message();
        a->keep();
        id = a->prog_id();
    }  // the attachment, the skeleton and every descriptor are gone
    XdpStatus st = status(veth_);
    EXPECT_EQ(st.prog_id, id);
    EXPECT_EQ(st.prog_name, "xlb_lb");
    EXPECT_EQ(st.mode, XdpAttachMode::kNative);

    // What --detach-on-exit of a later run, or a cleanup tool, does.
    auto other = detach_xdp(veth_, "xlb_decap");
    ASSERT_TRUE(other) << other.error().message();
    EXPECT_FALSE(*other);
    EXPECT_TRUE(status(veth_).attached());
    auto detached = detach_xdp(veth_, "xlb_lb");
    ASSERT_TRUE(detached) << detached.error().message();
    EXPECT_TRUE(*detached);
    EXPECT_FALSE(status(veth_).attached());
}

TEST_F(LifecycleTest, ReplacesAnEarlierProgramWithoutAGap) {
    std::uint32_t old_id = 0;
    {
        LbProgram old_lb = load();
        auto old = XdpAttachment::attach(old_lb, veth_, {.mode = XdpMode::kNative});
        ASSERT_TRUE(old) << old.error().message();
        old->keep();  // the previous agent exited, leaving it forwarding
        old_id = old->prog_id();
    }
    LbProgram lb = load();
    XdpWatcher watcher(netns_->name(), veth_.ifindex);
    ASSERT_FALSE(watcher.failed());
    auto a = XdpAttachment::attach(lb, veth_, {.mode = XdpMode::kAuto});
    // Let the watcher see the new program for a while, too.
    const std::uint64_t after = watcher.polls() + 20;
    while (watcher.polls() < after && !watcher.failed()) std::this_thread::yield();
    watcher.stop();
    ASSERT_TRUE(a) << a.error().message();

    EXPECT_EQ(a->report().replaced_prog_id, old_id);
    EXPECT_EQ(a->report().replaced_prog_name, "xlb_lb");
    EXPECT_EQ(a->report().replaced_mode, XdpAttachMode::kNative);
    EXPECT_TRUE(a->report().atomic);
    EXPECT_EQ(a->mode(), XdpAttachMode::kNative);
    EXPECT_NE(a->prog_id(), old_id);
    EXPECT_EQ(status(veth_).prog_id, a->prog_id());

    EXPECT_FALSE(watcher.failed());
    EXPECT_EQ(watcher.gaps(), 0u) << "polls without a program, of " << watcher.polls();
    EXPECT_EQ(watcher.seen(), (std::set<std::uint32_t>{old_id, a->prog_id()}));
    EXPECT_NE(a->report().summary(veth_.name, "xlb_lb").find("atomically"), std::string::npos);
}

TEST_F(LifecycleTest, AnOldAttachmentNeverDetachesItsReplacement) {
    LbProgram first = load();
    LbProgram second = load();
    auto a = XdpAttachment::attach(first, veth_, {.mode = XdpMode::kGeneric});
    ASSERT_TRUE(a) << a.error().message();
    auto b = XdpAttachment::attach(second, veth_, {.mode = XdpMode::kGeneric});
    ASSERT_TRUE(b) << b.error().message();
    EXPECT_EQ(b->report().replaced_prog_id, a->prog_id());

    auto detached = a->detach();  // not attached any more: nothing to do
    ASSERT_TRUE(detached) << detached.error().message();
    EXPECT_FALSE(*detached);
    EXPECT_EQ(status(veth_).prog_id, b->prog_id());

    // The attachment can swap its program in place, atomically.
    LbProgram third = load();
    auto swapped = b->replace(third.prog_fd());
    ASSERT_TRUE(swapped) << swapped.error().message();
    EXPECT_EQ(status(veth_).prog_id, b->prog_id());
    EXPECT_EQ(b->mode(), XdpAttachMode::kGeneric);
}

TEST_F(LifecycleTest, AModeChangeIsReportedAsNotAtomic) {
    LbProgram first = load();
    auto a = XdpAttachment::attach(first, veth_, {.mode = XdpMode::kNative});
    ASSERT_TRUE(a) << a.error().message();
    a->keep();
    LbProgram second = load();
    auto b = XdpAttachment::attach(second, veth_, {.mode = XdpMode::kGeneric});
    ASSERT_TRUE(b) << b.error().message();
    EXPECT_EQ(b->mode(), XdpAttachMode::kGeneric);
    EXPECT_FALSE(b->report().atomic);
    EXPECT_EQ(b->report().replaced_mode, XdpAttachMode::kNative);
    EXPECT_EQ(status(veth_).mode, XdpAttachMode::kGeneric);
    EXPECT_NE(b->report().summary(veth_.name, "xlb_lb").find("mode change"), std::string::npos);
}

TEST_F(LifecycleTest, DecapAttachesTooAndAForeignProgramIsNotReplaced) {
    auto decap = DecapProgram::load();
    ASSERT_TRUE(decap) << decap.error().message();
    auto d = XdpAttachment::attach(*decap, veth_, {.mode = XdpMode::kNative});
    ASSERT_TRUE(d) << d.error().message();
    EXPECT_EQ(d->prog_name(), "xlb_decap");
    EXPECT_EQ(status(veth_).prog_name, "xlb_decap");

    LbProgram lb = load();
    auto refused = XdpAttachment::attach(lb, veth_);
    ASSERT_FALSE(refused);
    EXPECT_EQ(refused.error().code, EBUSY);
    EXPECT_EQ(refused.error().message(),
              "attach XDP to xv0: Device or resource busy (xlb_decap (id " +
                  std::to_string(d->prog_id()) +
                  ") in native mode is attached; xlb replaces only an earlier xlb_lb; detach it "
                  "first (ip link set dev xv0 xdp off))");
    EXPECT_EQ(status(veth_).prog_id, d->prog_id());

    auto forced = XdpAttachment::attach(lb, veth_, {.replace_foreign = true});
    ASSERT_TRUE(forced) << forced.error().message();
    EXPECT_EQ(forced->report().replaced_prog_name, "xlb_decap");
    EXPECT_EQ(status(veth_).prog_name, "xlb_lb");
}

// An agent replaces an earlier xlb_lb only when that one uses the maps
// pinned for it: one over other pins (another agent's pin_dir) is refused.
TEST_F(LifecycleTest, AnEarlierXlbLbOverOtherPinsIsNotReplaced) {
    const std::string first_pins = pin_dir();
    LbProgram first = load({.pin_dir = first_pins});
    auto a = XdpAttachment::attach(first, veth_, {.mode = XdpMode::kGeneric});
    ASSERT_TRUE(a) << a.error().message();
    a->keep();

    LbProgram other = load({.pin_dir = pin_dir()});
    auto other_config = other.config_map_id();
    ASSERT_TRUE(other_config) << other_config.error().message();
    auto refused = XdpAttachment::attach(
        other, veth_, {.mode = XdpMode::kGeneric, .earlier_must_use_map = *other_config});
    ASSERT_FALSE(refused);
    EXPECT_EQ(refused.error().code, EBUSY);
    EXPECT_NE(refused.error().message().find("maps other than this agent's pinned ones"),
              std::string::npos)
        << refused.error().message();
    EXPECT_EQ(status(veth_).prog_id, a->prog_id()) << "the first program was replaced";

    // the same pins again (a restarted agent): replaced as always
    LbProgram again = load({.pin_dir = first_pins});
    auto again_config = again.config_map_id();
    ASSERT_TRUE(again_config);
    EXPECT_EQ(*again_config, *first.config_map_id());
    auto replaced = XdpAttachment::attach(
        again, veth_, {.mode = XdpMode::kGeneric, .earlier_must_use_map = *again_config});
    ASSERT_TRUE(replaced) << replaced.error().message();
    EXPECT_EQ(replaced->report().replaced_prog_id, a->prog_id());
}

// --- pinning ----------------------------------------------------------------

TEST_F(LifecycleTest, PinnedMapsSurviveAReload) {
    const std::string dir = pin_dir();
    std::vector<std::uint32_t> ids;
    {
        LbProgram lb = load({.pin_dir = dir});
        const PinReport& pins = lb.pins();
        EXPECT_EQ(pins.dir, dir);
        EXPECT_EQ(pins.maps.size(), 19u);
        EXPECT_EQ(pins.names(PinAction::kCreated).size(), 19u) << pins.summary();
        EXPECT_FALSE(pins.find(XLB_MAP_FLOW_CACHE)) << "the flow cache belongs to the program";
        EXPECT_FALSE(std::filesystem::exists(dir + "/" XLB_MAP_FLOW_CACHE));
        EXPECT_FALSE(pins.find(XLB_MAP_CAPTURE_RING)) << "a capture belongs to the program";
        EXPECT_TRUE(pins.find(XLB_MAP_VIP_DROPS));
        EXPECT_EQ(lb.conntrack_load().outcome, ConntrackLoad::Outcome::kCreated);
        ASSERT_TRUE(lb.put_vip(vip_key(), {3, 0}));
        ASSERT_TRUE(lb.conntrack().put(flow(), {7, 2}));
        ASSERT_TRUE(lb.backends().put(7, xlb_backend{{htonl(0x0a000007)}, XLB_FAMILY_V4, 0, 0, 2}));
        const std::vector<std::uint32_t> ring = {7, 7, 7, 7, 7};
        ASSERT_TRUE(publish_ring(lb.rings().fd(), 3, ring));
        ids = lb_map_ids(lb);
        for (const MapPin& pin : pins.maps)
            EXPECT_EQ(pinned_map_id(pin.path), pin.map_id) << pin.map;
    }
    struct stat st {};
    ASSERT_EQ(::stat(dir.c_str(), &st), 0);
    EXPECT_EQ(st.st_mode & 0777, 0700u);
    EXPECT_EQ(::stat(fs::path(dir).parent_path().c_str(), &st), 0);
    EXPECT_EQ(st.st_mode & 0777, 0700u);

    LbProgram lb = load({.pin_dir = dir});
    EXPECT_EQ(lb.pins().names(PinAction::kReused).size(), 19u) << lb.pins().summary();
    EXPECT_EQ(lb_map_ids(lb), ids);
    EXPECT_EQ(lb.conntrack_load().outcome, ConntrackLoad::Outcome::kReused);
    EXPECT_EQ(lb.conntrack_load().capacity, kSizes.conntrack_entries);
    EXPECT_FALSE(lb.conntrack_load().warn());
    auto vip = lb.vips().get(vip_key());
    ASSERT_TRUE(vip && *vip);
    EXPECT_EQ((*vip)->vip_id, 3u);
    auto ct = lb.conntrack().get(flow());
    ASSERT_TRUE(ct && *ct);
    EXPECT_EQ((*ct)->backend_id, 7u);
    EXPECT_EQ((*ct)->generation, 2u);
    auto ring = read_ring(lb.rings().fd(), 3);
    ASSERT_TRUE(ring) << ring.error().message();
    EXPECT_EQ(*ring, (std::vector<std::uint32_t>{7, 7, 7, 7, 7}));

    ASSERT_TRUE(LbProgram::unpin(dir));
    EXPECT_FALSE(fs::exists(dir));
    // The maps outlive their pins while the program holds them.
    EXPECT_TRUE(lb.put_vip(vip_key(), {4, 0}));
}

// An upgrade finds VIPs pinned but no VIP buckets beside them (an agent
// before them), or buckets out of step with the VIPs (a crash between the two
// writes): the load makes them match before the program sees a packet.
TEST_F(LifecycleTest, VipBucketsAreBroughtInStepWithThePinnedVips) {
    const std::string dir = pin_dir();
    const xlb_vip_key key = vip_key();
    const std::uint32_t bucket = xlb_vip_bucket(key.addr);
    xlb_vip_key other = key;
    other.addr[0] ^= htonl(0x00ff0000);  // another address, another bucket
    ASSERT_NE(xlb_vip_bucket(other.addr), bucket);
    std::uint32_t first_epoch = 0;
    {
        LbProgram lb = load({.pin_dir = dir});
        ASSERT_TRUE(lb.put_vip(key, {3, 0}));
        first_epoch = *lb.vip_buckets().get(bucket);
        EXPECT_NE(first_epoch, 0u);
        // A stale bucket: an address whose VIP is gone.
        ASSERT_TRUE(lb.vip_buckets().put(xlb_vip_bucket(other.addr), 77));
    }
    {
        // Reloaded as is: the VIP's bucket gets a new epoch (an epoch left
        // by a crash between a VIP change and its renewal must not stay),
        // the stale one empties.
        LbProgram lb = load({.pin_dir = dir});
        const std::uint32_t reloaded = *lb.vip_buckets().get(bucket);
        EXPECT_NE(reloaded, 0u);
        EXPECT_NE(reloaded, first_epoch);
        EXPECT_EQ(*lb.vip_buckets().get(XLB_VIP_EPOCH_SLOT), reloaded);
        EXPECT_EQ(*lb.vip_buckets().get(xlb_vip_bucket(other.addr)), 0u);
    }
    ASSERT_EQ(::unlink((dir + "/" XLB_MAP_VIP_BUCKETS).c_str()), 0);
    LbProgram lb = load({.pin_dir = dir});
    EXPECT_EQ(lb.pins().find(XLB_MAP_VIP_BUCKETS)->action, PinAction::kCreated);
    const std::uint32_t epoch = *lb.vip_buckets().get(bucket);
    EXPECT_NE(epoch, 0u) << "the pinned VIP's bucket must say so";
    EXPECT_EQ(*lb.vip_buckets().get(XLB_VIP_EPOCH_SLOT), epoch);
    // Removing the VIP empties its bucket; adding it back hands out a new epoch.
    ASSERT_TRUE(lb.erase_vip(key));
    EXPECT_EQ(*lb.vip_buckets().get(bucket), 0u);
    ASSERT_TRUE(lb.put_vip(key, {3, 0}));
    EXPECT_EQ(*lb.vip_buckets().get(bucket), epoch + 1);
}

TEST_F(LifecycleTest, VipCandidatesAreBroughtInStepWithThePinnedVips) {
    const std::string dir = pin_dir();
    const xlb_vip_key key = vip_key();
    const std::uint32_t bucket = xlb_vip_bucket(key.addr);
    xlb_vip_key other = key;
    other.addr[0] ^= htonl(0x00ff0000);
    const std::uint32_t other_bucket = xlb_vip_bucket(other.addr);
    ASSERT_NE(other_bucket, bucket);
    {
        LbProgram lb = load({.pin_dir = dir});
        ASSERT_TRUE(lb.put_vip(key, {3, 0}));
        // A crash mid-rewrite (odd seq, wrong id) and a stale block.
        xlb_vip_candidates torn = *lb.vip_candidates().get(bucket);
        torn.seq |= 1;
        torn.vip[0].vip_id = 9;
        ASSERT_TRUE(lb.vip_candidates().put(bucket, torn));
        xlb_vip_candidates stale = torn;
        stale.seq = 2;
        ASSERT_TRUE(lb.vip_candidates().put(other_bucket, stale));
    }
    auto expect_in_step = [&](const LbProgram& lb) {
        const xlb_vip_candidates block = *lb.vip_candidates().get(bucket);
        EXPECT_EQ(block.seq % 2, 0u);
        ASSERT_EQ(block.count, 1u);
        EXPECT_EQ(block.vip[0].vip_id, 3u);
        EXPECT_EQ(std::memcmp(block.vip[0].addr, key.addr, sizeof key.addr), 0);
        EXPECT_EQ(lb.vip_candidates().get(other_bucket)->count, 0u);
    };
    {
        LbProgram lb = load({.pin_dir = dir});
        EXPECT_EQ(lb.pins().find(XLB_MAP_VIP_CANDIDATES)->action, PinAction::kReused);
        expect_in_step(lb);
    }
    // An upgrade from before the candidates: made from the pinned VIPs.
    ASSERT_EQ(::unlink((dir + "/" XLB_MAP_VIP_CANDIDATES).c_str()), 0);
    LbProgram lb = load({.pin_dir = dir});
    EXPECT_EQ(lb.pins().find(XLB_MAP_VIP_CANDIDATES)->action, PinAction::kCreated);
    expect_in_step(lb);
}

TEST_F(LifecycleTest, AnIncompatiblePinnedMapIsReplacedAndReported) {
    const std::string dir = pin_dir();
    std::uint32_t old_ct = 0, old_vips = 0;
    {
        LbProgram lb = load({.pin_dir = dir}, {16, 64, 1024});
        // The VIP first: a slot names its flow by the VIP the map matches.
        ASSERT_TRUE(lb.put_vip(vip_key(), {3, 0}));
        ASSERT_TRUE(lb.conntrack().put(flow(), {7, 2, 100, 200}));
        old_ct = map_id(lb.conntrack().fd());
        old_vips = map_id(lb.vips().fd());
    }
    LbProgram lb =
        load({.pin_dir = dir, .conntrack_resize = ConntrackResize::kReplace}, {16, 64, 2048});
    const PinReport& pins = lb.pins();
    EXPECT_EQ(pins.names(PinAction::kReplaced), std::vector<std::string>{XLB_MAP_CONNTRACK});
    EXPECT_EQ(pins.names(PinAction::kReused).size(), 18u);
    const MapPin* ct = pins.find(XLB_MAP_CONNTRACK);
    ASSERT_NE(ct, nullptr);
    // The map's own size: two header lines, then per bucket of 8 entries
    // two lines of slots and four of records (1024 entries: 770 lines).
    EXPECT_EQ(ct->reason, "max_entries 770, want 1538");
    EXPECT_EQ(ct->path, dir + "/" XLB_MAP_CONNTRACK);
    EXPECT_NE(ct->map_id, old_ct);
    EXPECT_EQ(pinned_map_id(ct->path), map_id(lb.conntrack().fd()));
    EXPECT_FALSE(fs::exists(dir + "/" XLB_MAP_CONNTRACK "~new"));
    EXPECT_NE(pins.summary().find("replaced xlb_conntrack5 (max_entries 770, want 1538)"),
              std::string::npos)
        << pins.summary();
    // The new table holds the old one's entries, times included; everything
    // else is still there.
    const ConntrackLoad& ct_load = lb.conntrack_load();
    EXPECT_EQ(ct_load.outcome, ConntrackLoad::Outcome::kResized);
    EXPECT_EQ(ct_load.capacity, 2048u);
    EXPECT_EQ(ct_load.copied, 1u);
    EXPECT_EQ(ct_load.dropped, 0u);
    EXPECT_EQ(ct_load.message,
              "resized the connection table from 1024 to 2048 entries: copied 1 entry");
    auto flow_entry = lb.conntrack().get(flow());
    ASSERT_TRUE(flow_entry && *flow_entry);
    EXPECT_EQ((*flow_entry)->backend_id, 7u);
    EXPECT_EQ((*flow_entry)->generation, 2u);
    EXPECT_EQ((*flow_entry)->created, 100u);
    EXPECT_EQ((*flow_entry)->last_seen, 200u);
    EXPECT_EQ(map_id(lb.vips().fd()), old_vips);
    auto vip = lb.vips().get(vip_key());
    ASSERT_TRUE(vip && *vip);
}

// --- the connection table across loads ---------------------------------------

// The table's times, as the agent reads them.
std::uint32_t ct_now() { return bpf::ct_clock_now(); }

xlb_flow_key flow_n(std::uint32_t n) {
    xlb_flow_key k = flow();
    k.src[0] = htonl(0x0a000000 + n);  // 10.0.0.0 + n
    return k;
}

std::size_t table_size(const LbProgram& lb) {
    auto keys = lb.conntrack().keys();
    EXPECT_TRUE(keys) << keys.error().message();
    return keys ? keys->size() : 0;
}

// A table as an agent of layout 1 pinned it: LRU hash, 8-byte values.
UniqueFd pin_v1_table(const std::string& dir, std::uint32_t entries) {
    fs::create_directories(dir);
    UniqueFd fd(bpf_map_create(BPF_MAP_TYPE_LRU_HASH, XLB_MAP_CONNTRACK_V1, sizeof(xlb_flow_key),
                               sizeof(xlb_ct_value_v1), 1024, nullptr));
    EXPECT_TRUE(fd) << std::strerror(errno);
    for (std::uint32_t i = 0; i < entries; ++i) {
        const xlb_flow_key key = flow_n(i);
        const xlb_ct_value_v1 value{i % 7, 1 + i % 3};
        EXPECT_EQ(bpf_map_update_elem(fd.get(), &key, &value, BPF_ANY), 0) << std::strerror(errno);
    }
    EXPECT_EQ(bpf_obj_pin(fd.get(), (dir + "/" XLB_MAP_CONNTRACK_V1).c_str()), 0)
        << std::strerror(errno);
    return fd;
}

// A table as an agent of layout 2 pinned it: LRU hash, 16-byte values.
UniqueFd pin_v2_table(const std::string& dir, std::uint32_t entries) {
    fs::create_directories(dir);
    UniqueFd fd(bpf_map_create(BPF_MAP_TYPE_LRU_HASH, XLB_MAP_CONNTRACK_V2, sizeof(xlb_flow_key),
                               sizeof(xlb_ct_value_v2), 1024, nullptr));
    EXPECT_TRUE(fd) << std::strerror(errno);
    for (std::uint32_t i = 0; i < entries; ++i) {
        const xlb_flow_key key = flow_n(i);
        const xlb_ct_value_v2 value{i % 7, 1 + i % 3, 1000 + i, 2000 + i};
        EXPECT_EQ(bpf_map_update_elem(fd.get(), &key, &value, BPF_ANY), 0) << std::strerror(errno);
    }
    EXPECT_EQ(bpf_obj_pin(fd.get(), (dir + "/" XLB_MAP_CONNTRACK_V2).c_str()), 0)
        << std::strerror(errno);
    return fd;
}

// A table as an agent of layout 3 pinned it: LRU hash of struct xlb_ct_value.
UniqueFd pin_v3_table(const std::string& dir, std::uint32_t entries) {
    fs::create_directories(dir);
    UniqueFd fd(bpf_map_create(BPF_MAP_TYPE_LRU_HASH, XLB_MAP_CONNTRACK_V3, sizeof(xlb_flow_key),
                               sizeof(xlb_ct_value), 1024, nullptr));
    EXPECT_TRUE(fd) << std::strerror(errno);
    for (std::uint32_t i = 0; i < entries; ++i) {
        const xlb_flow_key key = flow_n(i);
        const xlb_ct_value value{.backend_id = i % 7,
                                 .generation = 1 + i % 3,
                                 .created = 1000 + i,
                                 .last_seen = 2000 + i,
                                 .vip_id = 3,
                                 .vip_epoch = 40 + i,
                                 .hash = 0xabc00000 + i,
                                 .second_chance = i % 2};
        EXPECT_EQ(bpf_map_update_elem(fd.get(), &key, &value, BPF_ANY), 0) << std::strerror(errno);
    }
    EXPECT_EQ(bpf_obj_pin(fd.get(), (dir + "/" XLB_MAP_CONNTRACK_V3).c_str()), 0)
        << std::strerror(errno);
    return fd;
}

TEST_F(LifecycleTest, ALayoutThreeTableIsMigratedWholeAndUnpinned) {
    const std::string dir = pin_dir();
    pin_vip_of_flows(dir);
    pin_v3_table(dir, 60);
    pin_v2_table(dir, 5);  // an older leftover beside it: removed, not copied
    LbProgram lb = load({.pin_dir = dir}, {16, 64, 4096});
    const ConntrackLoad& ct = lb.conntrack_load();
    EXPECT_EQ(ct.outcome, ConntrackLoad::Outcome::kMigrated);
    EXPECT_EQ(ct.old_layout, 3);
    EXPECT_EQ(ct.copied + ct.dropped, 60u);
    EXPECT_EQ(ct.copied, table_size(lb));
    // 60 flows over 512 buckets of 8 slots (an entry with a hint takes
    // two), each flow with two buckets to choose from: none is left out.
    EXPECT_EQ(ct.dropped, 0u);
    EXPECT_EQ(ct.message,
              "upgraded the connection table from layout 3 (xlb_conntrack3): copied 60 entries "
              "into a new table of 4096 entries; removed the old pin; removed a leftover table "
              "of an older layout");
    EXPECT_FALSE(fs::exists(dir + "/" XLB_MAP_CONNTRACK_V3));
    EXPECT_FALSE(fs::exists(dir + "/" XLB_MAP_CONNTRACK_V2));
    EXPECT_EQ(pinned_map_id(dir + "/" XLB_MAP_CONNTRACK), map_id(lb.conntrack().fd()));
    for (std::uint32_t i = 0; i < 60; ++i) {
        auto e = lb.conntrack().get(flow_n(i));
        ASSERT_TRUE(e && *e) << i;
        // Every field layout 5 keeps, as it was, the hint included; it keeps
        // no VIP epoch or hash (a slot names its VIP, which every packet
        // matches before the lookup).
        EXPECT_EQ((*e)->backend_id, i % 7);
        EXPECT_EQ((*e)->generation, 1 + i % 3);
        EXPECT_EQ((*e)->created, 1000 + i);
        EXPECT_EQ((*e)->last_seen, 2000 + i);
        EXPECT_EQ((*e)->vip_id, 3u);
        EXPECT_EQ((*e)->vip_epoch, 0u);
        EXPECT_EQ((*e)->hash, 0u);
        EXPECT_EQ((*e)->second_chance, i % 2);
    }
    LbProgram again = load({.pin_dir = dir}, {16, 64, 4096});
    EXPECT_EQ(again.conntrack_load().outcome, ConntrackLoad::Outcome::kReused);
    EXPECT_EQ(table_size(again), ct.copied);
}

TEST_F(LifecycleTest, WithoutPinsTheConnectionTableIsNew) {
    LbProgram lb = load();
    const ConntrackLoad& ct = lb.conntrack_load();
    EXPECT_EQ(ct.outcome, ConntrackLoad::Outcome::kCreated);
    EXPECT_EQ(ct.capacity, kSizes.conntrack_entries);
    EXPECT_EQ(ct.requested, kSizes.conntrack_entries);
    EXPECT_EQ(ct.message, "new connection table of 4096 entries");
    EXPECT_FALSE(ct.warn());
    EXPECT_STREQ(to_string(ct.outcome), "created");
}

TEST_F(LifecycleTest, AWayAKilledAgentLeftClaimedIsReleasedAtTheNextStart) {
    const std::string dir = pin_dir();
    {
        LbProgram lb = load({.pin_dir = dir});
        ASSERT_TRUE(lb.put_vip(vip_key(), {3, 0}));
        for (std::uint32_t i = 0; i < 3; ++i)
            ASSERT_TRUE(lb.conntrack().put(flow_n(i), {i, 1, 5, 6}));
        // An agent killed between claiming flow 1's head slot and releasing it.
        const xlb_ct_header5 header = lb.conntrack().header();
        const xlb_flow_key key = flow_n(1);
        xlb_ct_ident id{};
        xlb_ct_ident_of(&key, 3, &id);
        std::uint32_t buckets[2] = {};
        xlb_ct_buckets(&key, header.seed, header.buckets, &buckets[0], &buckets[1]);
        const std::size_t length = std::size_t{lb.conntrack().elements()} * sizeof(xlb_ct_line);
        void* p = mmap(nullptr, length, PROT_READ | PROT_WRITE, MAP_SHARED, lb.conntrack().fd(), 0);
        ASSERT_NE(p, MAP_FAILED) << std::strerror(errno);
        auto* lines = static_cast<xlb_ct_line*>(p);
        int claimed = 0;
        for (std::uint32_t b : buckets) {
            auto* bucket = reinterpret_cast<xlb_ct_bucket*>(&lines[XLB_CT_BUCKET_ELEMENT(b)]);
            for (xlb_ct_slot& slot : bucket->slot) {
                if (slot.key != id.head_key || (slot.meta & XLB_CT_IDENT_MASK) != id.head_match)
                    continue;
                __atomic_fetch_or(&slot.meta, XLB_CT_CLAIMED, __ATOMIC_ACQ_REL);
                ++claimed;
            }
            if (buckets[1] == buckets[0]) break;
        }
        munmap(p, length);
        ASSERT_EQ(claimed, 1);
        // Meanwhile the way is nobody's: its flow is not found.
        auto gone = lb.conntrack().get(key);
        ASSERT_TRUE(gone);
        EXPECT_FALSE(*gone);
    }
    LbProgram lb = load({.pin_dir = dir});
    const ConntrackLoad& ct = lb.conntrack_load();
    EXPECT_EQ(ct.outcome, ConntrackLoad::Outcome::kReused);
    EXPECT_EQ(ct.released_ways, 1u);
    EXPECT_TRUE(ct.warn());
    EXPECT_EQ(ct.message,
              "reused the pinned connection table of 4096 entries; released 1 slot a stopped "
              "writer had left claimed (their entries dropped)");
    EXPECT_EQ(table_size(lb), 2u);
    EXPECT_FALSE(*lb.conntrack().get(flow_n(1)));
    ASSERT_TRUE(lb.conntrack().put(flow_n(1), {9, 1, 5, 6}));
    auto back = lb.conntrack().get(flow_n(1));
    ASSERT_TRUE(back && *back);
    EXPECT_EQ((*back)->backend_id, 9u);
    // Nothing left to release.
    LbProgram again = load({.pin_dir = dir});
    EXPECT_EQ(again.conntrack_load().released_ways, 0u);
    EXPECT_FALSE(again.conntrack_load().warn());
}

TEST_F(LifecycleTest, RefuseKeepsThePinnedTableAtItsSize) {
    const std::string dir = pin_dir();
    std::uint32_t old_ct = 0;
    {
        LbProgram lb = load({.pin_dir = dir}, {16, 64, 1024});
        ASSERT_TRUE(lb.put_vip(vip_key(), {3, 0}));
        for (std::uint32_t i = 0; i < 10; ++i)
            ASSERT_TRUE(lb.conntrack().put(flow_n(i), {i, 1, 5, 6}));
        old_ct = map_id(lb.conntrack().fd());
    }
    LbProgram lb = load({.pin_dir = dir}, {16, 64, 4096});  // kRefuse: the default
    const ConntrackLoad& ct = lb.conntrack_load();
    EXPECT_EQ(ct.outcome, ConntrackLoad::Outcome::kKeptPinnedSize);
    EXPECT_EQ(ct.capacity, 1024u);
    EXPECT_EQ(ct.requested, 4096u);
    EXPECT_EQ(ct.copied, 0u);
    EXPECT_TRUE(ct.warn());
    EXPECT_EQ(ct.message,
              "kept the pinned connection table of 1024 entries, not the 4096 requested "
              "(replacing it copies its entries into a new table)");
    EXPECT_EQ(map_id(lb.conntrack().fd()), old_ct);
    EXPECT_EQ(lb.pins().names(PinAction::kReused).size(), 19u) << lb.pins().summary();
    bpf_map_info info{};
    __u32 len = sizeof info;
    ASSERT_EQ(bpf_obj_get_info_by_fd(lb.conntrack().fd(), &info, &len), 0);
    EXPECT_EQ(info.max_entries, XLB_CT_ELEMENTS(1024u));
    EXPECT_EQ(table_size(lb), 10u);
    auto e = lb.conntrack().get(flow_n(3));
    ASSERT_TRUE(e && *e);
    EXPECT_EQ((*e)->backend_id, 3u);
    EXPECT_EQ((*e)->last_seen, 6u);
}

TEST_F(LifecycleTest, ReplaceIntoASmallerTableKeepsTheMostRecentlySeen) {
    const std::string dir = pin_dir();
    constexpr std::uint32_t kOld = 600;
    // A slot keeps last_seen in units of 2^XLB_CT_SEEN_SHIFT, which is what
    // an insert compares: entries one such unit apart are never a tie.
    constexpr std::uint32_t kStep = 1U << XLB_CT_SEEN_SHIFT;
    const std::uint32_t now = ct_now();
    std::size_t old_entries = 0;
    std::set<std::uint32_t> in_old;  // the flows the old table held
    {
        LbProgram lb = load({.pin_dir = dir}, {16, 64, 4096});
        ASSERT_TRUE(lb.put_vip(vip_key(), {3, 0}));
        // Entry i was last seen i steps ago; the times wrap around zero.
        for (std::uint32_t i = 0; i < kOld; ++i)
            ASSERT_TRUE(lb.conntrack().put(flow_n(i), {i, 1, now - kOld * kStep, now - i * kStep}));
        old_entries = table_size(lb);
        EXPECT_GT(old_entries, kOld * 9 / 10);
        for (std::uint32_t i = 0; i < kOld; ++i)
            if (*lb.conntrack().get(flow_n(i))) in_old.insert(i);
        EXPECT_EQ(in_old.size(), old_entries);
    }
    LbProgram lb =
        load({.pin_dir = dir, .conntrack_resize = ConntrackResize::kReplace}, {16, 64, 256});
    const ConntrackLoad& ct = lb.conntrack_load();
    EXPECT_EQ(ct.outcome, ConntrackLoad::Outcome::kResized);
    EXPECT_EQ(ct.capacity, 256u);
    EXPECT_EQ(ct.requested, 256u);
    EXPECT_TRUE(ct.warn());
    const std::size_t in = table_size(lb);
    EXPECT_EQ(ct.copied, in);
    EXPECT_EQ(ct.copied + ct.dropped, old_entries);
    EXPECT_LE(ct.copied, 256u);
    // 600 flows over 32 buckets of 8, two buckets each, leave almost every
    // bucket full.
    EXPECT_GE(ct.copied, 240u);
    EXPECT_EQ(ct.message, "resized the connection table from 4096 to 256 entries: copied " +
                              std::to_string(ct.copied) + " entries, dropped " +
                              std::to_string(ct.dropped) + " entries that did not fit");
    // What is kept, intact, are the most recently seen of each pair of
    // buckets. The copy inserts oldest first, and an insert only ever
    // replaces the entry seen longest ago of a full bucket (xlb_ct_place),
    // with a more recent one; a bucket never empties meanwhile. So a flow
    // left out was the oldest of a full bucket of its two, which now holds
    // eight flows all seen more recently.
    const xlb_ct_header5 header = lb.conntrack().header();
    auto keys = lb.conntrack().keys();
    ASSERT_TRUE(keys);
    for (const xlb_flow_key& key : *keys) {
        const std::uint32_t i = ntohl(key.src[0]) - 0x0a000000;
        auto e = lb.conntrack().get(key);
        ASSERT_TRUE(e && *e);
        EXPECT_EQ((*e)->backend_id, i);
        EXPECT_EQ((*e)->created, now - kOld * kStep);
        EXPECT_EQ((*e)->last_seen, now - i * kStep);
    }
    // The flows each bucket holds, read from the slots (a head's key word
    // starts with the client address, 10.0.0.0 + i).
    std::map<std::uint32_t, std::vector<std::uint32_t>> held;
    {
        const std::size_t length = std::size_t{lb.conntrack().elements()} * sizeof(xlb_ct_line);
        void* p = mmap(nullptr, length, PROT_READ, MAP_SHARED, lb.conntrack().fd(), 0);
        ASSERT_NE(p, MAP_FAILED) << std::strerror(errno);
        const auto* lines = static_cast<const xlb_ct_line*>(p);
        for (std::uint32_t b = 0; b < header.buckets; ++b) {
            const auto* bucket =
                reinterpret_cast<const xlb_ct_bucket*>(&lines[XLB_CT_BUCKET_ELEMENT(b)]);
            for (const xlb_ct_slot& slot : bucket->slot)
                if (xlb_ct_kind(slot.meta) == XLB_CT_KIND_V4)
                    held[b].push_back(ntohl(static_cast<std::uint32_t>(slot.key)) - 0x0a000000);
        }
        munmap(p, length);
    }
    std::size_t left_out = 0;
    for (std::uint32_t i : in_old) {
        const xlb_flow_key key = flow_n(i);
        if (*lb.conntrack().get(key)) continue;
        ++left_out;
        std::uint32_t first = 0, second = 0;
        xlb_ct_buckets(&key, header.seed, header.buckets, &first, &second);
        auto full_of_newer = [&](std::uint32_t b) {
            const auto& flows = held[b];
            return flows.size() == XLB_CT_SLOTS &&
                   std::all_of(flows.begin(), flows.end(), [&](std::uint32_t j) { return j < i; });
        };
        EXPECT_TRUE(full_of_newer(first) || full_of_newer(second))
            << "flow " << i << " left out while neither of its buckets is full of newer ones";
    }
    EXPECT_EQ(left_out, old_entries - in);
    auto newest = lb.conntrack().get(flow_n(0));
    ASSERT_TRUE(newest);
    EXPECT_TRUE(*newest);
}

TEST_F(LifecycleTest, AnIncompatibleConnectionTableIsReplacedWhateverTheResizeMode) {
    const std::string dir = pin_dir();
    fs::create_directories(dir);
    // The current name over an LRU hash: nothing to keep or copy.
    UniqueFd odd(bpf_map_create(BPF_MAP_TYPE_LRU_HASH, XLB_MAP_CONNTRACK, sizeof(xlb_flow_key), 8,
                                1024, nullptr));
    ASSERT_TRUE(odd) << std::strerror(errno);
    ASSERT_EQ(bpf_obj_pin(odd.get(), (dir + "/" XLB_MAP_CONNTRACK).c_str()), 0);
    LbProgram lb = load({.pin_dir = dir});  // kRefuse
    const ConntrackLoad& ct = lb.conntrack_load();
    EXPECT_EQ(ct.outcome, ConntrackLoad::Outcome::kCreated);
    EXPECT_EQ(ct.capacity, kSizes.conntrack_entries);
    EXPECT_EQ(ct.message,
              "new connection table of 4096 entries: the pinned one is incompatible (type "
              "lru_hash, want array, key size 40, want 4, value size 8, want 64, flags 0x0, "
              "want 0x400)");
    const MapPin* pin = lb.pins().find(XLB_MAP_CONNTRACK);
    ASSERT_NE(pin, nullptr);
    EXPECT_EQ(pin->action, PinAction::kReplaced);
    EXPECT_EQ(pinned_map_id(dir + "/" XLB_MAP_CONNTRACK), map_id(lb.conntrack().fd()));
}

TEST_F(LifecycleTest, ALayoutOneTableIsMigratedAndUnpinned) {
    const std::string dir = pin_dir();
    pin_vip_of_flows(dir);
    pin_v1_table(dir, 50);
    const std::uint32_t before = ct_now();
    LbProgram lb = load({.pin_dir = dir});
    const std::uint32_t after = ct_now();
    const ConntrackLoad& ct = lb.conntrack_load();
    EXPECT_EQ(ct.outcome, ConntrackLoad::Outcome::kMigrated);
    EXPECT_EQ(ct.old_layout, 1);
    EXPECT_EQ(ct.copied, 50u);
    EXPECT_EQ(ct.dropped, 0u);
    EXPECT_EQ(ct.capacity, kSizes.conntrack_entries);
    EXPECT_FALSE(ct.warn());
    EXPECT_EQ(ct.message,
              "upgraded the connection table from layout 1 (xlb_conntrack): copied 50 entries "
              "into a new table of 4096 entries; removed the old pin");
    EXPECT_FALSE(fs::exists(dir + "/" XLB_MAP_CONNTRACK_V1));
    EXPECT_EQ(pinned_map_id(dir + "/" XLB_MAP_CONNTRACK), map_id(lb.conntrack().fd()));
    EXPECT_EQ(table_size(lb), 50u);
    for (std::uint32_t i = 0; i < 50; ++i) {
        auto e = lb.conntrack().get(flow_n(i));
        ASSERT_TRUE(e && *e) << i;
        EXPECT_EQ((*e)->backend_id, i % 7);
        EXPECT_EQ((*e)->generation, 1 + i % 3);
        // As if just seen: the program's clock at load time.
        EXPECT_EQ((*e)->created, (*e)->last_seen);
        EXPECT_LE((*e)->last_seen - before, after - before);
    }
    // The next load finds the current table and reuses it.
    LbProgram again = load({.pin_dir = dir});
    EXPECT_EQ(again.conntrack_load().outcome, ConntrackLoad::Outcome::kReused);
}

TEST_F(LifecycleTest, ALayoutTwoTableIsMigratedWithItsTimesAndUnpinned) {
    const std::string dir = pin_dir();
    pin_vip_of_flows(dir);
    pin_v2_table(dir, 40);
    pin_v1_table(dir, 5);  // an older leftover beside it: removed, not copied
    LbProgram lb = load({.pin_dir = dir});
    const ConntrackLoad& ct = lb.conntrack_load();
    EXPECT_EQ(ct.outcome, ConntrackLoad::Outcome::kMigrated);
    EXPECT_EQ(ct.old_layout, 2);
    EXPECT_EQ(ct.copied, 40u);
    EXPECT_EQ(ct.dropped, 0u);
    EXPECT_EQ(ct.message,
              "upgraded the connection table from layout 2 (xlb_conntrack2): copied 40 entries "
              "into a new table of 4096 entries; removed the old pin; removed a leftover table "
              "of an older layout");
    EXPECT_FALSE(fs::exists(dir + "/" XLB_MAP_CONNTRACK_V2));
    EXPECT_FALSE(fs::exists(dir + "/" XLB_MAP_CONNTRACK_V1));
    EXPECT_EQ(table_size(lb), 40u);
    for (std::uint32_t i = 0; i < 40; ++i) {
        auto e = lb.conntrack().get(flow_n(i));
        ASSERT_TRUE(e && *e) << i;
        EXPECT_EQ((*e)->backend_id, i % 7);
        EXPECT_EQ((*e)->generation, 1 + i % 3);
        EXPECT_EQ((*e)->created, 1000 + i);
        EXPECT_EQ((*e)->last_seen, 2000 + i);
        // No VIP epoch (0 never matches): the flow's next packet takes the
        // full path, which fills the VIP fields in.
        EXPECT_EQ((*e)->vip_epoch, 0u);
    }
}

TEST_F(LifecycleTest, AnUnreadableLayoutOneTableMeansAnEmptyTable) {
    const std::string dir = pin_dir();
    fs::create_directories(dir);
    // Same name, but not the layout-1 table (an array of 4-byte values).
    UniqueFd garbage(bpf_map_create(BPF_MAP_TYPE_ARRAY, XLB_MAP_CONNTRACK_V1, 4, 4, 8, nullptr));
    ASSERT_TRUE(garbage) << std::strerror(errno);
    ASSERT_EQ(bpf_obj_pin(garbage.get(), (dir + "/" XLB_MAP_CONNTRACK_V1).c_str()), 0);
    LbProgram lb = load({.pin_dir = dir});
    const ConntrackLoad& ct = lb.conntrack_load();
    EXPECT_EQ(ct.outcome, ConntrackLoad::Outcome::kOldUnreadable);
    EXPECT_TRUE(ct.warn());
    EXPECT_EQ(ct.copied, 0u);
    EXPECT_EQ(ct.message, "could not read the layout-1 connection table at " + dir +
                              "/xlb_conntrack (array, key size 4, value size 4; want a hash of "
                              "40-byte keys and 8-byte values): starting with an empty table of "
                              "4096 entries; removed the old pin");
    EXPECT_EQ(table_size(lb), 0u);
    EXPECT_FALSE(fs::exists(dir + "/" XLB_MAP_CONNTRACK_V1));
}

TEST_F(LifecycleTest, ALeftoverLayoutOneTableIsRemoved) {
    const std::string dir = pin_dir();
    { LbProgram lb = load({.pin_dir = dir}); }
    // An upgrade that pinned the new table but died before unpinning the old.
    pin_v1_table(dir, 3);
    LbProgram lb = load({.pin_dir = dir});
    EXPECT_EQ(lb.conntrack_load().outcome, ConntrackLoad::Outcome::kReused);
    EXPECT_EQ(lb.conntrack_load().message,
              "reused the pinned connection table of 4096 entries; removed a leftover table of "
              "an older layout");
    EXPECT_EQ(table_size(lb), 0u);
    EXPECT_FALSE(fs::exists(dir + "/" XLB_MAP_CONNTRACK_V1));

    // unpin takes a layout-1 pin too, so that the directory goes.
    pin_v1_table(dir, 1);
    ASSERT_TRUE(LbProgram::unpin(dir));
    EXPECT_FALSE(fs::exists(dir));
}

TEST_F(LifecycleTest, IncompatibleRingTemplateAndKeyLayoutAreDetected) {
    const std::string dir = pin_dir();
    fs::create_directories(dir);
    // Rings whose inner maps are not mmapable (an older layout), holding one ring.
    LIBBPF_OPTS(bpf_map_create_opts, inner_opts, .map_flags = BPF_F_INNER_MAP);
    UniqueFd tmpl(bpf_map_create(BPF_MAP_TYPE_ARRAY, "tmpl", 4, 4, 8, &inner_opts));
    ASSERT_TRUE(tmpl) << std::strerror(errno);
    LIBBPF_OPTS(bpf_map_create_opts, outer_opts, .inner_map_fd = static_cast<__u32>(tmpl.get()));
    UniqueFd rings(bpf_map_create(BPF_MAP_TYPE_ARRAY_OF_MAPS, "xlb_rings", 4, 4, kSizes.max_vips,
                                  &outer_opts));
    ASSERT_TRUE(rings) << std::strerror(errno);
    UniqueFd inner(bpf_map_create(BPF_MAP_TYPE_ARRAY, "ring", 4, 4, 32, &inner_opts));
    ASSERT_TRUE(inner) << std::strerror(errno);
    std::uint32_t slot = 5, inner_fd = static_cast<std::uint32_t>(inner.get());
    ASSERT_EQ(bpf_map_update_elem(rings.get(), &slot, &inner_fd, BPF_ANY), 0)
        << std::strerror(errno);
    ASSERT_EQ(bpf_obj_pin(rings.get(), (dir + "/" XLB_MAP_RINGS).c_str()), 0);
    // VIPs keyed by something else.
    UniqueFd vips(bpf_map_create(BPF_MAP_TYPE_HASH, "xlb_vips", 8, 8, kSizes.max_vips, nullptr));
    ASSERT_TRUE(vips) << std::strerror(errno);
    ASSERT_EQ(bpf_obj_pin(vips.get(), (dir + "/" XLB_MAP_VIPS).c_str()), 0);

    LbProgram lb = load({.pin_dir = dir});
    const PinReport& pins = lb.pins();
    const MapPin* r = pins.find(XLB_MAP_RINGS);
    ASSERT_NE(r, nullptr);
    EXPECT_EQ(r->action, PinAction::kReplaced);
    EXPECT_EQ(r->reason, "inner map flags 0x1000, want 0x1400");
    const MapPin* v = pins.find(XLB_MAP_VIPS);
    ASSERT_NE(v, nullptr);
    EXPECT_EQ(v->action, PinAction::kReplaced);
    EXPECT_EQ(v->reason, "key size 8, want 20");
    EXPECT_EQ(pins.names(PinAction::kCreated).size(), 17u);
    EXPECT_EQ(pinned_map_id(dir + "/" XLB_MAP_RINGS), map_id(lb.rings().fd()));
    // The replacement takes rings of the current layout.
    const std::vector<std::uint32_t> ring = {1, 2, 3};
    EXPECT_TRUE(publish_ring(lb.rings().fd(), 0, ring));
}

TEST_F(LifecycleTest, AgentRestartKeepsStateAndForwarding) {
    // The whole sequence: run 1 pins, attaches and exits leaving the program;
    // run 2 reuses the maps and swaps the program in without a gap.
    const std::string dir = pin_dir();
    std::vector<std::uint32_t> ids;
    std::uint32_t old_prog = 0;
    {
        LbProgram lb = load({.pin_dir = dir});
        ASSERT_TRUE(lb.conntrack().put(flow(), {7, 2}));
        auto a = XdpAttachment::attach(lb, veth_);
        ASSERT_TRUE(a) << a.error().message();
        a->keep();
        ids = lb_map_ids(lb);
        old_prog = a->prog_id();
    }
    XdpWatcher watcher(netns_->name(), veth_.ifindex);
    LbProgram lb = load({.pin_dir = dir});
    auto a = XdpAttachment::attach(lb, veth_);
    watcher.stop();
    ASSERT_TRUE(a) << a.error().message();
    EXPECT_EQ(a->report().replaced_prog_id, old_prog);
    EXPECT_TRUE(a->report().atomic);
    EXPECT_EQ(watcher.gaps(), 0u);
    EXPECT_EQ(lb_map_ids(lb), ids);
    auto ct = lb.conntrack().get(flow());
    ASSERT_TRUE(ct && *ct);
    EXPECT_EQ((*ct)->backend_id, 7u);

    // --detach-on-exit: detach, then remove the pins.
    auto detached = a->detach();
    ASSERT_TRUE(detached && *detached);
    ASSERT_TRUE(LbProgram::unpin(dir));
    EXPECT_FALSE(fs::exists(dir));
}

TEST_F(LifecycleTest, PinDirectoryOutsideBpffsIsRefused) {
    const std::string dir = "/tmp/" + netns_->name() + "-pins/xlb";
    auto lb = LbProgram::load(kSizes, {.pin_dir = dir});
    ASSERT_FALSE(lb);
    EXPECT_EQ(lb.error().code, ENOTSUP);
    EXPECT_EQ(lb.error().message(),
              "pin maps in " + dir +
                  ": Operation not supported (/tmp is not on a BPF filesystem; mount one: "
                  "mount -t bpf bpf /sys/fs/bpf)");
    EXPECT_FALSE(fs::exists(fs::path(dir).parent_path()));

    auto relative = LbProgram::load(kSizes, {.pin_dir = "xlb/eth0"});
    ASSERT_FALSE(relative);
    EXPECT_EQ(relative.error().code, EINVAL);
}

TEST_F(LifecycleTest, DecapMapsPinAndUnpinToo) {
    const std::string dir = pin_dir();
    {
        auto decap = DecapProgram::load({.pin_dir = dir});
        ASSERT_TRUE(decap) << decap.error().message();
        EXPECT_EQ(decap->pins().names(PinAction::kCreated),
                  (std::vector<std::string>{XLB_MAP_COOKIE_ACKS, XLB_MAP_COOKIE_PENDING,
                                            XLB_MAP_DECAP_ADDRS, XLB_MAP_DECAP_STATS,
                                            XLB_MAP_DECAP_PASSED}));
    }
    auto decap = DecapProgram::load({.pin_dir = dir});
    ASSERT_TRUE(decap) << decap.error().message();
    EXPECT_EQ(decap->pins().names(PinAction::kReused).size(), 5u);
    ASSERT_TRUE(DecapProgram::unpin(dir));
    EXPECT_FALSE(fs::exists(dir));
    EXPECT_TRUE(DecapProgram::unpin(dir));  // nothing left: still fine
}

}  // namespace
}  // namespace xlb::bpf
