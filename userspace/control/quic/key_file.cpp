// SPDX-License-Identifier: Apache-2.0
#include "xlb/quic/key_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <string_view>

namespace xlb::quic {

namespace {

// Closes the key file on every path out of the reader.
class KeyFd {
public:
    explicit KeyFd(int fd) : fd_(fd) {}
    KeyFd(const KeyFd&) = delete;
    KeyFd& operator=(const KeyFd&) = delete;
    ~KeyFd() {
        if (fd_ >= 0) ::close(fd_);
    }
    int get() const { return fd_; }

private:
    int fd_;
};

int hex_digit(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

constexpr std::string_view kFormat = "16 raw octets, or 32 hex digits and an optional newline";

}  // namespace

Result<Key> read_key_file(const std::string& path) {
    // O_NONBLOCK: a FIFO in the key's place must not hang the reader before
    // fstat refuses it.
    KeyFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK));
    if (fd.get() < 0) return fail_on(errno, "open QUIC-LB key file", path);
    // The checks read the opened file, not the path, so a file swapped in
    // between cannot pass them for another.
    struct stat st {};
    if (::fstat(fd.get(), &st) != 0) return fail_on(errno, "stat QUIC-LB key file", path);
    if (!S_ISREG(st.st_mode)) return fail_on(0, "QUIC-LB key file is not a regular file:", path);
    if (st.st_uid != 0)
        return fail_on(
            0,
            "QUIC-LB key file is not owned by root (uid " + std::to_string(st.st_uid) + "):", path,
            "chown root " + path);
    if ((st.st_mode & 077) != 0) {
        char mode[8];
        std::snprintf(mode, sizeof mode, "%04o", static_cast<unsigned>(st.st_mode & 07777));
        return fail_on(
            0,
            std::string("QUIC-LB key file is readable or writable by group or others (mode ") +
                mode + "):",
            path, "chmod 600 " + path);
    }
    const auto expected = static_cast<std::size_t>(st.st_size);
    if (expected != 16 && expected != 32 && expected != 33)
        return fail_on(0, "QUIC-LB key file holds " + std::to_string(expected) + " octets:", path,
                       std::string(kFormat));
    // One more octet than the longest form: a file that grew since fstat
    // is refused, not cut short.
    char buffer[34];
    std::size_t size = 0;
    while (size < sizeof buffer) {
        const ssize_t n = ::read(fd.get(), buffer + size, sizeof buffer - size);
        if (n < 0) {
            if (errno == EINTR) continue;
            return fail_on(errno, "read QUIC-LB key file", path);
        }
        if (n == 0) break;
        size += static_cast<std::size_t>(n);
    }
    if (size != expected)
        return fail_on(0, "QUIC-LB key file changed while read:", path, std::string(kFormat));
    Key key{};
    if (size == key.size()) {
        for (std::size_t i = 0; i < key.size(); ++i) key[i] = static_cast<std::uint8_t>(buffer[i]);
        return key;
    }
    if (size == 33 && buffer[32] != '\n')
        return fail_on(0, "QUIC-LB key file holds 33 octets, the last not a newline:", path,
                       std::string(kFormat));
    for (std::size_t i = 0; i < key.size(); ++i) {
        const int hi = hex_digit(buffer[2 * i]);
        const int lo = hex_digit(buffer[2 * i + 1]);
        if (hi < 0 || lo < 0)
            return fail_on(0,
                           "QUIC-LB key file holds a character that is not a hex digit at offset " +
                               std::to_string(hi < 0 ? 2 * i : 2 * i + 1) + ":",
                           path, std::string(kFormat));
        key[i] = static_cast<std::uint8_t>(hi << 4 | lo);
    }
    return key;
}

}  // namespace xlb::quic
