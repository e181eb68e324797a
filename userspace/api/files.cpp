// SPDX-License-Identifier: Apache-2.0
#include "files.h"

#include <sys/stat.h>

#include <cerrno>
#include <cstring>

namespace xlb::api::detail {

std::string parent_dir(const std::string& path) {
    auto slash = path.rfind('/');
    if (slash == std::string::npos) return ".";
    if (slash == 0) return "/";
    return path.substr(0, slash);
}

std::expected<void, std::string> make_dirs(const std::string& dir) {
    if (dir.empty() || dir == "/" || dir == ".") return {};
    struct stat st {};
    if (::stat(dir.c_str(), &st) == 0) {
        if (S_ISDIR(st.st_mode)) return {};
        return std::unexpected(dir + " exists and is not a directory");
    }
    if (auto up = make_dirs(parent_dir(dir)); !up) return up;
    if (::mkdir(dir.c_str(), 0755) != 0 && errno != EEXIST)
        return std::unexpected("create directory " + dir + ": " + std::strerror(errno));
    return {};
}

}  // namespace xlb::api::detail
