// SPDX-License-Identifier: Apache-2.0
#include "xlb/files/files.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>

namespace xlb::files {

namespace {

bool write_all(int fd, std::string_view data) {
    while (!data.empty()) {
        const ssize_t n = ::write(fd, data.data(), data.size());
        if (n < 0) {
            if (errno == EINTR) continue;
            return false;
        }
        data.remove_prefix(static_cast<std::size_t>(n));
    }
    return true;
}

}  // namespace

std::string parent_dir(const std::string& path) {
    const auto slash = path.rfind('/');
    if (slash == std::string::npos) return ".";
    if (slash == 0) return "/";
    return path.substr(0, slash);
}

Result<void> make_dirs(const std::string& dir, mode_t mode) {
    if (dir.empty() || dir == "/" || dir == ".") return {};
    struct stat st {};
    if (::stat(dir.c_str(), &st) == 0) {
        if (S_ISDIR(st.st_mode)) return {};
        return fail_on(ENOTDIR, "create directory", dir);
    }
    if (auto up = make_dirs(parent_dir(dir), mode); !up) return up;
    if (::mkdir(dir.c_str(), mode) != 0 && errno != EEXIST)
        return fail_on(errno, "create directory", dir);
    return {};
}

Result<std::optional<std::string>> read_file(const std::string& path) {
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        if (errno == ENOENT) return std::optional<std::string>{};
        return fail_on(errno, "open", path);
    }
    std::string out;
    char buffer[8192];
    for (;;) {
        const ssize_t n = ::read(fd, buffer, sizeof buffer);
        if (n < 0) {
            if (errno == EINTR) continue;
            const int err = errno;
            ::close(fd);
            return fail_on(err, "read", path);
        }
        if (n == 0) break;
        out.append(buffer, static_cast<std::size_t>(n));
    }
    ::close(fd);
    return std::optional<std::string>(std::move(out));
}

Result<void> write_file_atomic(const std::string& path, std::string_view content, mode_t mode) {
    const std::string step = "write " + path;
    const std::string dir = parent_dir(path);
    if (auto made = make_dirs(dir); !made)
        return std::unexpected(std::move(made.error()).add_context(step));
    const std::string tmp = path + ".tmp";
    auto failed = [&](const std::string& what, int err) -> Result<void> {
        ::unlink(tmp.c_str());
        Error e = make_error(err, what);
        e.object = tmp;
        return std::unexpected(std::move(e).add_context(step));
    };
    const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode);
    if (fd < 0) {
        // Not unlinked: what could not be opened may be someone else's.
        Error e = make_error(errno, "open");
        e.object = tmp;
        return std::unexpected(std::move(e).add_context(step));
    }
    if (::fchmod(fd, mode) != 0) {
        const int err = errno;
        ::close(fd);
        return failed("chmod", err);
    }
    if (!write_all(fd, content)) {
        const int err = errno;
        ::close(fd);
        return failed("write", err);
    }
    if (::fsync(fd) != 0) {
        const int err = errno;
        ::close(fd);
        return failed("fsync", err);
    }
    if (::close(fd) != 0) return failed("close", errno);
    if (::rename(tmp.c_str(), path.c_str()) != 0) return failed("rename", errno);
    const int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd < 0) {
        Error e = make_error(errno, "open directory");
        e.object = dir;
        return std::unexpected(std::move(e).add_context(step));
    }
    if (::fsync(dfd) != 0) {
        const int err = errno;
        ::close(dfd);
        Error e = make_error(err, "fsync directory");
        e.object = dir;
        return std::unexpected(std::move(e).add_context(step));
    }
    ::close(dfd);
    return {};
}

}  // namespace xlb::files
