// SPDX-License-Identifier: Apache-2.0
#include "xlb/bpf/maps.h"

#include <bpf/libbpf.h>

namespace xlb::bpf {

Result<void> MapView::update_raw(const void* key, const void* value, std::uint64_t flags,
                                 const char* verb) const {
    if (bpf_map_update_elem(fd_, key, value, flags) != 0)
        return fail(errno, std::string(verb) + " " + name_);
    return {};
}

Result<bool> MapView::lookup_raw(const void* key, void* value) const {
    if (bpf_map_lookup_elem(fd_, key, value) == 0) return true;
    if (errno == ENOENT) return false;
    return fail(errno, "look up in " + name_);
}

Result<bool> MapView::erase_raw(const void* key) const {
    if (bpf_map_delete_elem(fd_, key) == 0) return true;
    if (errno == ENOENT) return false;
    return fail(errno, "delete from " + name_);
}

std::size_t possible_cpu_count() {
    static const std::size_t count = [] {
        int n = libbpf_num_possible_cpus();
        return n > 0 ? static_cast<std::size_t>(n) : std::size_t{1};
    }();
    return count;
}

}  // namespace xlb::bpf
