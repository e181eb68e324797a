// SPDX-License-Identifier: Apache-2.0
// Percent-encoding of a query value (RFC 3986 unreserved characters kept),
// for tests that call the agent's API by hand.
#pragma once

#include <cctype>
#include <cstdio>
#include <string>

namespace xlb::test {

inline std::string url_encode(const std::string& text) {
    std::string out;
    for (unsigned char c : text) {
        if (std::isalnum(c) || c == '.' || c == '-' || c == '_' || c == '~') {
            out += static_cast<char>(c);
        } else {
            char buf[4];
            std::snprintf(buf, sizeof(buf), "%%%02X", c);
            out += buf;
        }
    }
    return out;
}

}  // namespace xlb::test
