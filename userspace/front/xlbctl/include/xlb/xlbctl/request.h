// SPDX-License-Identifier: Apache-2.0
// The API request each verb sends (docs/api.md).
#pragma once

#include <string>
#include <string_view>

#include "xlb/xlbctl/command.h"

namespace xlb::xlbctl {

struct HttpRequest {
    std::string method;  // GET, POST, PATCH, DELETE
    std::string target;  // path and query, e.g. /v1/backends?vip=198.51.100.10%3A80%2Ftcp
    std::string body;    // JSON, or empty

    bool operator==(const HttpRequest&) const = default;
};

// Percent-encodes everything but A-Z a-z 0-9 - . _ ~ (RFC 3986 unreserved).
std::string url_encode(std::string_view text);

HttpRequest build_request(const Command& command);

// backend drain --wait: the count of the drained backend's active connections,
// GET /v1/conntrack/count?vip=V&backend=B&active_within=D.
HttpRequest drain_count_request(const Command& command);

}  // namespace xlb::xlbctl
