// SPDX-License-Identifier: Apache-2.0
// Errors as values for everything that touches the kernel: the errno, what we
// were doing and to which object, rendered as "what: strerror (hint)".
#pragma once

#include <cerrno>
#include <expected>
#include <string>

namespace xlb::bpf {

struct Error {
    int code = 0;          // errno value (positive)
    std::string what;      // "create ring map for VIP 3"
    std::string hint;      // optional advice for the operator

    std::string message() const;
};

template <typename T>
using Result = std::expected<T, Error>;

// Builds an Error from a libbpf-style return (negative errno) or errno.
Error make_error(int code, std::string what, std::string hint = {});
inline std::unexpected<Error> fail(int code, std::string what, std::string hint = {}) {
    return std::unexpected(make_error(code, std::move(what), std::move(hint)));
}

}  // namespace xlb::bpf
