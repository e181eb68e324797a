// SPDX-License-Identifier: Apache-2.0
#include "files.h"

#include <grp.h>
#include <sys/stat.h>

#include <cerrno>
#include <charconv>
#include <cstring>
#include <vector>

namespace xlb::api {

// A group name or number as the host knows it.
Result<gid_t> resolve_group(const std::string& group) {
    gid_t number = 0;
    const char* end = group.data() + group.size();
    if (auto [p, ec] = std::from_chars(group.data(), end, number); ec == std::errc{} && p == end)
        return number;
    std::vector<char> buffer(16384);
    struct group entry {};
    struct group* found = nullptr;
    const int err = ::getgrnam_r(group.c_str(), &entry, buffer.data(), buffer.size(), &found);
    if (err != 0) return fail_on(err, "look up group", "\"" + group + "\"");
    if (found == nullptr)
        return fail("no group \"" + group + "\" on this host",
                    "create it, e.g. groupadd --system " + group + ", or change api.group");
    return found->gr_gid;
}

}  // namespace xlb::api
