// SPDX-License-Identifier: Apache-2.0
// The query pieces the verbs' requests share; each verb's request is in its
// noun's file (src/nouns/).
#include "xlb/xlbctl/request.h"

#include <nlohmann/json.hpp>

#include "request_parts.h"
#include "xlb/config/json.h"
#include "xlb/xlbctl/verbs.h"

namespace xlb::xlbctl {

std::string url_encode(std::string_view text) {
    static constexpr char kHex[] = "0123456789ABCDEF";
    std::string out;
    out.reserve(text.size());
    for (unsigned char c : text) {
        const bool unreserved = (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') ||
                                (c >= '0' && c <= '9') || c == '-' || c == '.' || c == '_' ||
                                c == '~';
        if (unreserved) {
            out += static_cast<char>(c);
        } else {
            out += '%';
            out += kHex[c >> 4];
            out += kHex[c & 0xf];
        }
    }
    return out;
}

std::string vip_query(const Command& c) { return "vip=" + url_encode(c.vip); }

std::string backend_query(const Command& c) {
    return vip_query(c) + "&address=" + url_encode(c.backend.to_string());
}

// A dry run asks for the prediction instead of the change (docs/api.md).
std::string dry_run(const Command& c) { return c.dry_run ? "&dry_run=1" : ""; }

// The conntrack selectors given, as a query ("" when none).
std::string selector_query(const Command& c) {
    std::string q;
    auto add = [&](const char* name, const std::string& value) {
        q += (q.empty() ? "?" : "&") + std::string(name) + "=" + url_encode(value);
    };
    if (c.vip_key) add("vip", c.vip);
    if (c.ct_backend) add("backend", c.ct_backend->to_string());
    if (c.ct_client) add("client", c.ct_client->to_string());
    if (c.active_within) add("active_within", config::format_duration(*c.active_within));
    if (c.limit) add("limit", std::to_string(*c.limit));
    return q;
}

HttpRequest drain_count_request(const Command& c) {
    Command count = c;
    count.verb = Verb::kConntrackCount;
    count.ct_backend = c.backend;
    count.active_within = c.active_within.value_or(kDefaultActiveWithin);
    count.limit.reset();
    count.ct_client.reset();
    return build_request(count);
}

HttpRequest build_request(const Command& c) { return verb_spec(c.verb).request(c); }

}  // namespace xlb::xlbctl
