// SPDX-License-Identifier: Apache-2.0
// xlbctl host drain|resume: withdraw every VIP from the routers, or announce
// them again (POST /v1/host/drain, /v1/host/resume).
#include <CLI/CLI.hpp>

#include "../checks.h"
#include "../render_parts.h"
#include "nouns.h"

namespace xlb::xlbctl::noun {

namespace {

// The answer is the BGP state, as status shows it.
std::string render_host(const Command&, const json& r, const Style& style) {
    return bgp_line(r, style);
}

// With a fleet, any host of it by name (its desired/hosts/<host> key).
void host_options(CLI::App& app, Raw& raw) {
    app.add_option("HOST", raw.host,
                   "with a fleet: the host to drain or resume (default: this one)")
        ->type_name("");
}

constexpr VerbSpec kHostVerbs[] = {
    {.verb = Verb::kHostDrain,
     .name = "drain",
     .help = "Withdraw every VIP from the routers (BGP): they move new and established flows\n"
             "to the other LB hosts; what still arrives here is served. Kept across restarts.\n"
             "Then wait for the VIPs' packet rate to fall (xlbctl stats --watch) before\n"
             "stopping the agent or the host.",
     .examples = "  xlbctl host drain\n  xlbctl stats --watch\n"
                 "  xlbctl --fleet https://10.0.0.1:2379 --fleet-ca ca.pem host drain lb2 "
                 "--reason 'kernel upgrade'\n",
     .options = host_options,
     .request =
         [](const Command&) {
             return HttpRequest{"POST", "/v1/host/drain", ""};
         },
     .render = render_host},
    {.verb = Verb::kHostResume,
     .name = "resume",
     .help = "Announce the VIPs again, each by its announce policy.",
     .examples = "  xlbctl host resume\n  xlbctl host resume lb2   # with a fleet\n",
     .options = host_options,
     .request =
         [](const Command&) {
             return HttpRequest{"POST", "/v1/host/resume", ""};
         },
     .render = render_host},
};

}  // namespace

const Noun& host() {
    static const Noun noun{.name = "host",
                           .help = "Drain this LB host (withdraw every VIP) or resume it.",
                           .verbs = kHostVerbs};
    return noun;
}

}  // namespace xlb::xlbctl::noun
