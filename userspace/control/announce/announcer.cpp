// SPDX-License-Identifier: Apache-2.0
#include "xlb/announce/announcer.h"

#include <algorithm>
#include <iterator>

#include "xlb/files/files.h"
#include "xlb/names.h"

namespace xlb::announce {

namespace {
// Indexed by Problem, in its order.
constexpr std::string_view kProblems[] = {"none", "file", "daemon_unreachable", "config_refused",
                                          "not_included"};
static_assert(std::size(kProblems) == static_cast<std::size_t>(Problem::kNotIncluded) + 1);
// Indexed by RouteState, in its order.
constexpr std::string_view kRouteStates[] = {"announced", "withdrawn", "unknown"};
static_assert(std::size(kRouteStates) == static_cast<std::size_t>(RouteState::kUnknown) + 1);
}  // namespace

std::string_view to_string(Problem p) { return name_at(p, kProblems); }
std::string_view to_string(RouteState s) { return name_at(s, kRouteStates); }

Announcer::Announcer(AnnouncerOptions options) : options_(std::move(options)) {}

void Announcer::record_error(Problem problem, Error e, TimePoint now) {
    status_.problem = problem;
    status_.last_error = e.message();
    status_.last_error_at = now;
}

// Only the problem that a success disproves is cleared: reaching BIRD says
// nothing about whether it accepted the file.
void Announcer::clear_error(Problem problem) {
    if (status_.problem != problem) return;
    status_.problem = Problem::kNone;
    status_.last_error.clear();
    status_.last_error_at.reset();
}

const AnnouncerStatus& Announcer::update(const HostInput& input, TimePoint now) {
    status_.vips = table_.update(input, now);
    std::vector<net::IpAddress> routes = routes_of(status_.vips);

    auto disk = files::read_file(options_.routes_file);
    if (!disk) {
        record_error(Problem::kFile, std::move(disk.error()).add_context("BGP announcements"), now);
        return status_;
    }
    status_.holding_withdrawals = !input.startup_complete;
    if (status_.holding_withdrawals && disk->has_value()) {
        for (const auto& kept : parse_routes(**disk)) routes.push_back(kept);
        std::sort(routes.begin(), routes.end());
        routes.erase(std::unique(routes.begin(), routes.end()), routes.end());
    }
    const std::string text = render_routes(routes, options_.render);
    const bool first = std::exchange(first_update_, false);

    if (!disk->has_value() || **disk != text) {
        if (auto written = files::write_file_atomic(options_.routes_file, text); !written) {
            record_error(Problem::kFile,
                         std::move(written.error()).add_context("BGP announcements"), now);
            return status_;
        }
        status_.last_write = now;
        ++status_.writes_total;
        status_.configure_pending = true;
        next_configure_ = now;  // a change goes out at once, whatever the back-off
    }
    status_.routes = std::move(routes);
    clear_error(Problem::kFile);

    const bool configure_due = status_.configure_pending && now >= next_configure_;
    const bool check_due = !status_.configure_pending && (first || now >= next_check_);
    if (!configure_due && !check_due) return status_;
    // One connection per update: BIRD serves its CLI clients one command at a time anyway.
    next_check_ = now + options_.check_interval;
    auto client = connect(now);
    if (!client) {
        if (configure_due) {
            ++status_.configure_failures_total;
            next_configure_ = now + options_.retry_interval;
        }
        return status_;
    }
    if (configure_due)
        configure(*client, now);
    else
        check(*client, now, /*verify_routes=*/first);
    return status_;
}

std::optional<bird::Client> Announcer::connect(TimePoint now) {
    auto client = bird::Client::connect(options_.control_socket, options_.timeout);
    if (!client) {
        if (!status_.unreachable_since) status_.unreachable_since = now;
        status_.daemon_reachable = false;
        record_error(Problem::kUnreachable,
                     std::move(client.error()).add_context("BGP daemon unreachable"), now);
        return std::nullopt;
    }
    status_.daemon_reachable = true;
    status_.unreachable_since.reset();
    status_.daemon_version = client->version();
    clear_error(Problem::kUnreachable);
    return std::move(*client);
}

void Announcer::configure(bird::Client& client, TimePoint now) {
    auto result = client.configure();
    if (!result) {
        ++status_.configure_failures_total;
        next_configure_ = now + options_.retry_interval;
        lost(client, std::move(result.error()), now);
        return;
    }
    status_.configure_pending = false;
    status_.last_configure = now;
    ++status_.configures_total;
    clear_error(Problem::kRefused);
    check(client, now, /*verify_routes=*/false);
    if (status_.daemon_reachable && !status_.protocols_loaded &&
        status_.problem == Problem::kNone) {
        Error e = make_error(
            0,
            "BIRD runs neither protocol " + options_.render.protocol + "4 nor " +
                options_.render.protocol + "6 after `configure`: bird.conf does not include",
            "add `include \"" + options_.routes_file + "\";` to bird.conf (docs/scale-out.md)");
        e.object = options_.routes_file;
        record_error(Problem::kNotIncluded, std::move(e).add_context("BGP announcements"), now);
    }
}

// A failed exchange on a socket that greeted us is BIRD going away (closed,
// wedged); anything else came with an answer: BIRD refused.
void Announcer::lost(const bird::Client& client, Error e, TimePoint now) {
    if (client.broken()) {
        status_.daemon_reachable = false;
        if (!status_.unreachable_since) status_.unreachable_since = now;
        record_error(Problem::kUnreachable, std::move(e).add_context("BGP daemon unreachable"),
                     now);
    } else {
        record_error(Problem::kRefused, std::move(e).add_context("BGP announcements"), now);
    }
}

void Announcer::check(bird::Client& client, TimePoint now, bool verify_routes) {
    auto protocols = client.show_protocols();
    if (!protocols) {
        lost(client, std::move(protocols.error()), now);
        return;
    }
    const std::string name4 = options_.render.protocol + "4";
    const std::string name6 = options_.render.protocol + "6";
    status_.protocols.clear();
    for (auto& p : *protocols)
        if (p.name == name4 || p.name == name6) status_.protocols.push_back(std::move(p));
    status_.protocols_loaded = status_.protocols.size() == 2;
    if (status_.protocols_loaded) clear_error(Problem::kNotIncluded);
    if (!verify_routes) return;

    // The file was already as wanted when this process started. Did BIRD
    // load it? The previous agent may have died between write and configure.
    bool in_sync = status_.protocols_loaded;
    std::vector<net::IpAddress> running;
    for (const auto& name : {name4, name6}) {
        if (!in_sync) break;
        auto routes = client.show_routes(name);
        if (!routes) {
            in_sync = false;
            break;
        }
        for (const auto& r : *routes) running.push_back(r.address);
    }
    std::sort(running.begin(), running.end());
    running.erase(std::unique(running.begin(), running.end()), running.end());
    if (!in_sync || running != status_.routes) {
        status_.configure_pending = true;
        configure(client, now);
    }
}

}  // namespace xlb::announce
