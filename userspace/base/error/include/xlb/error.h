// SPDX-License-Identifier: Apache-2.0
// The one error type of the agent and its libraries: the errno when there is
// one, what was being done, to which object, and advice for the operator;
// callers add context as it travels up. Rendered as
//   "start: attach XDP to eth0: Operation not supported (try --xdp-mode generic)".
// Errors are values (Result<T>); nothing in the agent's loops throws.
#pragma once

#include <cerrno>
#include <expected>
#include <ostream>
#include <string>
#include <utility>
#include <vector>

namespace xlb {

struct Error {
    int code = 0;        // errno value (positive); 0 when the error has none
    std::string what;    // what was being done: "attach XDP to"
    std::string hint;    // optional advice: "try --xdp-mode generic"
    std::string object;  // optional: the object it was done to: "eth0"
    // Outer steps added on the way up (add_context), innermost first.
    std::vector<std::string> context;

    std::string message() const;
    // This error as a step of a larger one: "step: <message>".
    Error& add_context(std::string step) &;
    Error&& add_context(std::string step) &&;
};

template <typename T>
using Result = std::expected<T, Error>;

// For logs and test failures: the message.
inline std::ostream& operator<<(std::ostream& out, const Error& e) { return out << e.message(); }

// From a libbpf-style return (negative errno) or errno; 0: no errno.
Error make_error(int code, std::string what, std::string hint = {});
inline std::unexpected<Error> fail(int code, std::string what, std::string hint = {}) {
    return std::unexpected(make_error(code, std::move(what), std::move(hint)));
}
// An error without an errno (a validation, a refused request).
inline std::unexpected<Error> fail(std::string what, std::string hint = {}) {
    return std::unexpected(make_error(0, std::move(what), std::move(hint)));
}
// The same with the object named: "<what> <object>: ...".
inline std::unexpected<Error> fail_on(int code, std::string what, std::string object,
                                      std::string hint = {}) {
    Error e = make_error(code, std::move(what), std::move(hint));
    e.object = std::move(object);
    return std::unexpected(std::move(e));
}

// Adds a step to the error of `result`, if any, and passes it on.
template <typename T>
Result<T> with_context(Result<T> result, std::string step) {
    if (!result) result.error().add_context(std::move(step));
    return result;
}

}  // namespace xlb
