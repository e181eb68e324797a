// SPDX-License-Identifier: Apache-2.0
#include "xlb/bpf/error.h"

#include <cstdlib>
#include <cstring>

namespace xlb::bpf {

std::string Error::message() const {
    std::string out = what;
    if (code != 0) {
        out += ": ";
        out += std::strerror(code);
    }
    if (!hint.empty()) {
        out += " (";
        out += hint;
        out += ")";
    }
    return out;
}

Error make_error(int code, std::string what, std::string hint) {
    return Error{std::abs(code), std::move(what), std::move(hint)};
}

}  // namespace xlb::bpf
