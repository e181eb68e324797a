// SPDX-License-Identifier: Apache-2.0
#include "xlb/error.h"

#include <cstdlib>
#include <cstring>

namespace xlb {

std::string Error::message() const {
    std::string out;
    for (auto step = context.rbegin(); step != context.rend(); ++step) out += *step + ": ";
    out += what;
    if (!object.empty()) out += " " + object;
    if (code != 0) {
        out += ": ";
        out += std::strerror(code);
    }
    if (!hint.empty()) out += " (" + hint + ")";
    return out;
}

Error& Error::add_context(std::string step) & {
    context.push_back(std::move(step));
    return *this;
}

Error&& Error::add_context(std::string step) && {
    context.push_back(std::move(step));
    return std::move(*this);
}

Error make_error(int code, std::string what, std::string hint) {
    Error e;
    e.code = std::abs(code);
    e.what = std::move(what);
    e.hint = std::move(hint);
    return e;
}

}  // namespace xlb
