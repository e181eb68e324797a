// SPDX-License-Identifier: Apache-2.0
// The key file of an encrypted QUIC-LB config. Read where the configuration
// is checked, so that a key the agent could not use stops the file (or the
// API's change) rather than the VIP's routing.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <string>

#include "xlb/config/config.h"

namespace xlb::config {

namespace {

// A key is 16 octets, its hex form 32 digits and a newline: anything longer
// is not a key file, and is not read whole.
constexpr std::size_t kReadLimit = 64;

int hex_digit(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

class Fd {
public:
    explicit Fd(int fd) : fd_(fd) {}
    Fd(const Fd&) = delete;
    Fd& operator=(const Fd&) = delete;
    ~Fd() {
        if (fd_ >= 0) ::close(fd_);
    }
    int get() const { return fd_; }

private:
    int fd_;
};

}  // namespace

Result<QuicKey> read_quic_key_file(const std::string& path) {
    const std::string what = "read the QUIC-LB key file";
    if (path.empty() || path.front() != '/')
        return fail_on(0, what, shown_value(path), "expected an absolute path");
    // O_NOFOLLOW: the checks below are of the file itself, not of a link
    // someone else may own; O_NONBLOCK: a FIFO in its place must not hang
    // the check.
    Fd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY));
    if (fd.get() < 0) {
        const int err = errno;
        if (err == ELOOP)
            return fail_on(0, what, path,
                           "it is a symbolic link, expected the key file itself; point key_file "
                           "at the file it names");
        return fail_on(err, what, path);
    }
    struct stat st {};
    if (::fstat(fd.get(), &st) != 0) return fail_on(errno, what, path);
    if (!S_ISREG(st.st_mode))
        return fail_on(0, what, path, "not a regular file, expected a file holding the key");
    if (st.st_uid != 0)
        return fail_on(0, what, path,
                       "owned by uid " + std::to_string(st.st_uid) +
                           ", expected a file owned by root: chown root " + path);
    if ((st.st_mode & 077) != 0) {
        char mode[8];
        std::snprintf(mode, sizeof mode, "%04o", static_cast<unsigned>(st.st_mode & 07777));
        return fail_on(0, what, path,
                       std::string("mode ") + mode +
                           " lets others than root read or change the key, expected no group "
                           "or other permissions: chmod 600 " +
                           path);
    }
    std::string content;
    char buffer[kReadLimit + 1];
    for (;;) {
        const ssize_t n = ::read(fd.get(), buffer, sizeof buffer);
        if (n < 0) {
            if (errno == EINTR) continue;
            return fail_on(errno, what, path);
        }
        if (n == 0) break;
        content.append(buffer, static_cast<std::size_t>(n));
        if (content.size() > kReadLimit) break;
    }
    QuicKey key{};
    if (content.size() == key.size()) {
        for (std::size_t i = 0; i < key.size(); ++i) key[i] = static_cast<std::uint8_t>(content[i]);
        return key;
    }
    std::string_view hex = content;
    if (hex.ends_with('\n')) hex.remove_suffix(1);
    bool ok = hex.size() == 2 * key.size();
    for (std::size_t i = 0; ok && i < key.size(); ++i) {
        const int hi = hex_digit(hex[2 * i]), lo = hex_digit(hex[2 * i + 1]);
        ok = hi >= 0 && lo >= 0;
        key[i] = static_cast<std::uint8_t>(hi << 4 | lo);
    }
    if (ok) return key;
    return fail_on(0, what, path,
                   "holds " +
                       (content.size() > kReadLimit ? "more than " + std::to_string(kReadLimit)
                                                    : std::to_string(content.size())) +
                       " bytes, expected the 16-octet AES-128 key: 16 raw octets or 32 hex "
                       "digits (and a newline), e.g. made with: openssl rand -hex 16 > " +
                       path);
}

}  // namespace xlb::config
