// SPDX-License-Identifier: Apache-2.0
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <fcntl.h>
#include <linux/magic.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <iterator>
#include <string_view>
#include <thread>

#include "pin_session.h"
#include "xlb/abi.h"
#include "xlb/names.h"

namespace xlb::bpf {

namespace {

// Indexed by PinAction, in its order.
constexpr std::string_view kPinActions[] = {"created", "reused", "replaced"};
static_assert(std::size(kPinActions) == static_cast<std::size_t>(PinAction::kReplaced) + 1);

}  // namespace

const char* to_string(PinAction action) { return name_at(action, kPinActions); }

std::vector<std::string> PinReport::names(PinAction action) const {
    std::vector<std::string> out;
    for (const MapPin& m : maps)
        if (m.action == action) out.push_back(m.map);
    return out;
}

const MapPin* PinReport::find(const std::string& map) const {
    for (const MapPin& m : maps)
        if (m.map == map) return &m;
    return nullptr;
}

std::string PinReport::summary() const {
    if (!pinned()) return "maps not pinned";
    std::string out = "pins in " + dir + ":";
    for (PinAction action : {PinAction::kReused, PinAction::kReplaced, PinAction::kCreated}) {
        std::string part;
        for (const MapPin& m : maps) {
            if (m.action != action) continue;
            if (!part.empty()) part += ", ";
            part += m.map;
            if (action == PinAction::kReplaced) part += " (" + m.reason + ")";
        }
        if (part.empty()) continue;
        if (out.back() != ':') out += ";";
        out += std::string(" ") + to_string(action) + " " + part;
    }
    return out;
}

namespace detail {
namespace {

namespace fs = std::filesystem;

// How long open() waits for another process that is loading into the same
// directory (a load takes well under a second).
constexpr auto kLockWait = std::chrono::seconds(5);

// Maps that belong to one loaded program and are never pinned: .rodata/.bss,
// the established-flow cache, whose copies are only valid against the
// program's own clock (abi.h, XLB_MAP_FLOW_CACHE), the capture ring, read
// by the agent that turned its program's capture on, and the QUIC keys'
// kernel contexts, made again from the key files by every agent.
bool per_program(const bpf_map* map) {
    const std::string_view name = bpf_map__name(map);
    return bpf_map__is_internal(map) || name == XLB_MAP_FLOW_CACHE ||
           name == XLB_MAP_CAPTURE_RING || name == XLB_MAP_CT_SCRATCH ||
           name == XLB_MAP_COOKIE_SCRATCH || name == XLB_MAP_QUIC_KEYS ||
           name == XLB_MAP_QUIC_SCRATCH || name == XLB_MAP_QUIC_OPENED;
}

std::string hex(std::uint32_t v) {
    char buf[16];
    std::snprintf(buf, sizeof buf, "0x%x", v);
    return buf;
}

std::string map_type_name(std::uint32_t type) {
    const char* name = libbpf_bpf_map_type_str(static_cast<bpf_map_type>(type));
    return name ? name : "type " + std::to_string(type);
}

// What kind of BPF object an fd refers to: "bpf-map", "bpf-prog", "bpf-link", ...
std::string bpf_fd_kind(int fd) {
    char link[64];
    std::string proc = "/proc/self/fd/" + std::to_string(fd);
    ssize_t n = ::readlink(proc.c_str(), link, sizeof link - 1);
    if (n <= 0) return "?";
    std::string target(link, static_cast<std::size_t>(n));
    constexpr std::string_view kPrefix = "anon_inode:";
    if (target.starts_with(kPrefix)) target.erase(0, kPrefix.size());
    return target;
}

Result<bpf_map_info> map_info(int fd, const std::string& what) {
    bpf_map_info info{};
    __u32 len = sizeof info;
    if (bpf_obj_get_info_by_fd(fd, &info, &len) != 0) return fail(errno, what);
    return info;
}

void differ(std::string& out, const char* field, const std::string& have, const std::string& want) {
    if (have == want) return;
    if (!out.empty()) out += ", ";
    out += std::string(field) + " " + have + ", want " + want;
}

// What a map found in the kernel must share with the object's definition of
// it; max_entries is left out where the kernel lets it differ (an inner map
// template with BPF_F_INNER_MAP).
void differ_layout(std::string& out, const bpf_map_info& have, const bpf_map* want,
                   bool max_entries) {
    differ(out, "type", map_type_name(have.type), map_type_name(bpf_map__type(want)));
    differ(out, "key size", std::to_string(have.key_size), std::to_string(bpf_map__key_size(want)));
    differ(out, "value size", std::to_string(have.value_size),
           std::to_string(bpf_map__value_size(want)));
    if (max_entries)
        differ(out, "max_entries", std::to_string(have.max_entries),
               std::to_string(bpf_map__max_entries(want)));
    differ(out, "flags", hex(have.map_flags), hex(bpf_map__map_flags(want)));
}

// Compares one inner map of a pinned map-in-map with the object's template,
// the way the kernel compares inner maps on insert (bpf_map_meta_equal).
std::string inner_incompatibility(int outer_fd, const bpf_map_info& outer, bpf_map* tmpl) {
    if (!tmpl) return {};
    std::uint32_t key = 0, next = 0;
    const void* prev = nullptr;
    for (std::uint32_t scanned = 0; scanned < outer.max_entries; ++scanned) {
        if (bpf_map_get_next_key(outer_fd, prev, &next) != 0) break;
        key = next;
        prev = &key;
        std::uint32_t inner_id = 0;
        if (bpf_map_lookup_elem(outer_fd, &key, &inner_id) != 0) continue;  // empty slot
        UniqueFd inner(bpf_map_get_fd_by_id(inner_id));
        if (!inner) return "cannot open inner map id " + std::to_string(inner_id);
        auto info = map_info(inner.get(), "inner map");
        if (!info) return "cannot read inner map id " + std::to_string(inner_id);
        std::string out;
        differ_layout(out, *info, tmpl, !(bpf_map__map_flags(tmpl) & BPF_F_INNER_MAP));
        return out.empty() ? out : "inner map " + out;
    }
    // No inner map to compare with. The outer map's template is not visible
    // from userspace, and probing it would mean writing into the live map;
    // the ABI rule (a changed layout gets a new map name) covers this case.
    return {};
}

std::uint32_t map_id_of(int fd) {
    auto info = map_info(fd, "map");
    return info ? info->id : 0;
}

// Where a replacing map is pinned before it is renamed over the old pin.
// bpffs refuses names with a '.' (EPERM), hence the '~'.
std::string staging_name(const std::string& map) { return map + "~new"; }

}  // namespace

std::string join(const std::string& dir, const std::string& name) { return dir + "/" + name; }

std::string incompatibility(bpf_map* want, int fd, bool max_entries) {
    std::string kind = bpf_fd_kind(fd);
    if (kind != "bpf-map") return "pinned object is a " + kind + ", not a map";
    auto info = map_info(fd, "pinned map");
    if (!info) return "cannot read the pinned map: " + info.error().message();
    std::string out;
    differ_layout(out, *info, want, max_entries);
    if (out.empty() &&
        (info->type == BPF_MAP_TYPE_ARRAY_OF_MAPS || info->type == BPF_MAP_TYPE_HASH_OF_MAPS))
        out = inner_incompatibility(fd, *info, bpf_map__inner_map(want));
    return out;
}

Result<PinSession> PinSession::open(const std::string& dir_arg) {
    const std::string what = "pin maps in " + dir_arg;
    if (dir_arg.empty() || dir_arg.front() != '/')
        return fail(EINVAL, what, "the pin directory must be an absolute path under bpffs");
    std::string dir = fs::path(dir_arg).lexically_normal().string();
    while (dir.size() > 1 && dir.back() == '/') dir.pop_back();

    // The nearest existing ancestor must be on bpffs: never create
    // directories anywhere else.
    std::vector<fs::path> missing;
    fs::path existing = dir;
    struct stat st {};
    while (::stat(existing.c_str(), &st) != 0) {
        if (errno != ENOENT) return fail(errno, what + ": stat " + existing.string());
        missing.push_back(existing);
        existing = existing.parent_path();
    }
    struct statfs sfs {};
    if (::statfs(existing.c_str(), &sfs) != 0)
        return fail(errno, what + ": statfs " + existing.string());
    if (static_cast<unsigned long>(sfs.f_type) != BPF_FS_MAGIC)
        return fail(ENOTSUP, what,
                    existing.string() +
                        " is not on a BPF filesystem; mount one: "
                        "mount -t bpf bpf /sys/fs/bpf");
    if (missing.empty() && !S_ISDIR(st.st_mode)) return fail(ENOTDIR, what);
    for (auto it = missing.rbegin(); it != missing.rend(); ++it) {
        if (::mkdir(it->c_str(), 0700) != 0) {
            if (errno == EEXIST) continue;
            return fail(errno, "create pin directory " + it->string());
        }
        // mkdir's mode is masked by the umask; make it exact.
        if (::chmod(it->c_str(), 0700) != 0) return fail(errno, "chmod 0700 " + it->string());
    }

    UniqueFd lock(::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
    if (!lock) return fail(errno, "open pin directory " + dir);
    const auto deadline = std::chrono::steady_clock::now() + kLockWait;
    while (::flock(lock.get(), LOCK_EX | LOCK_NB) != 0) {
        if (errno != EWOULDBLOCK && errno != EINTR) return fail(errno, "lock pin directory " + dir);
        if (std::chrono::steady_clock::now() >= deadline)
            return fail(EWOULDBLOCK, "lock pin directory " + dir,
                        "another process has been loading into it for " +
                            std::to_string(kLockWait.count()) + " s");
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return PinSession(std::move(dir), std::move(lock));
}

Result<void> PinSession::prepare(bpf_object* obj) {
    plans_.clear();
    bpf_map* map = nullptr;
    bpf_object__for_each_map(map, obj) {
        if (per_program(map)) continue;
        Plan plan;
        plan.map = map;
        plan.pin.map = bpf_map__name(map);  // before reuse_fd renames it to the kernel's name
        plan.pin.path = join(dir_, plan.pin.map);
        int fd = bpf_obj_get(plan.pin.path.c_str());
        if (fd < 0) {
            if (errno != ENOENT)
                return fail(errno, "open pinned map " + plan.pin.map + " at " + plan.pin.path);
            plan.pin.action = PinAction::kCreated;
        } else {
            UniqueFd pinned(fd);
            std::string why = incompatibility(map, pinned.get());
            if (why.empty()) {
                if (int rc = bpf_map__reuse_fd(map, pinned.get()); rc != 0)
                    return fail(rc, "reuse pinned map " + plan.pin.map + " at " + plan.pin.path);
                plan.pin.action = PinAction::kReused;
            } else {
                plan.pin.action = PinAction::kReplaced;
                plan.pin.reason = std::move(why);
            }
        }
        plans_.push_back(std::move(plan));
    }
    return {};
}

std::size_t PinSession::reused() const {
    std::size_t n = 0;
    for (const Plan& plan : plans_) n += plan.pin.action == PinAction::kReused;
    return n;
}

Result<PinReport> PinSession::commit() {
    PinReport report;
    report.dir = dir_;
    for (Plan& plan : plans_) {
        const int fd = bpf_map__fd(plan.map);
        MapPin& pin = plan.pin;
        if (pin.action == PinAction::kCreated) {
            if (bpf_obj_pin(fd, pin.path.c_str()) != 0)
                return fail(errno, "pin map " + pin.map + " at " + pin.path);
        } else if (pin.action == PinAction::kReplaced) {
            // Pin beside, then rename over the old pin: readers of the path
            // see the old map or the new one, never nothing.
            const std::string staging = join(dir_, staging_name(pin.map));
            ::unlink(staging.c_str());
            if (bpf_obj_pin(fd, staging.c_str()) != 0)
                return fail(errno, "pin map " + pin.map + " at " + staging);
            if (::rename(staging.c_str(), pin.path.c_str()) != 0) {
                int err = errno;
                ::unlink(staging.c_str());
                return fail(err, "replace pinned map " + pin.map + " at " + pin.path);
            }
        }
        pin.map_id = map_id_of(fd);
        report.maps.push_back(pin);
    }
    return report;
}

Result<void> unpin_object_maps(bpf_object* obj, const std::string& dir,
                               std::span<const std::string> extra) {
    struct stat st {};
    if (::stat(dir.c_str(), &st) != 0) {
        if (errno == ENOENT) return {};
        return fail(errno, "unpin maps in " + dir);
    }
    std::vector<std::string> names(extra.begin(), extra.end());
    bpf_map* map = nullptr;
    bpf_object__for_each_map(map, obj) {
        if (!per_program(map)) names.push_back(bpf_map__name(map));
    }
    for (const std::string& name : names) {
        for (const std::string& path : {join(dir, name), join(dir, staging_name(name))}) {
            if (::unlink(path.c_str()) != 0 && errno != ENOENT)
                return fail(errno, "unpin map " + name + " at " + path);
        }
    }
    if (::rmdir(dir.c_str()) != 0 && errno != ENOENT && errno != ENOTEMPTY && errno != EEXIST)
        return fail(errno, "remove pin directory " + dir);
    return {};
}

}  // namespace detail
}  // namespace xlb::bpf
