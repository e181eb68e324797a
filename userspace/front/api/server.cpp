// SPDX-License-Identifier: Apache-2.0
// The API server: its Unix socket and its thread. The routes and their
// handlers: routes.cpp.
#include "xlb/api/server.h"

#include <grp.h>
#include <spdlog/spdlog.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <memory>
#include <optional>

#include "files.h"
#include "handlers.h"
#include "listener.h"
#include "xlb/config/config.h"
#include "xlb/files/files.h"

namespace xlb::api {
namespace {

// Whether something accepts connections on the socket at `path`: 1 yes,
// 0 no (stale), or the errno that prevented finding out.
std::expected<bool, int> socket_answers(const std::string& path) {
    int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) return std::unexpected(errno);
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    std::memcpy(addr.sun_path, path.c_str(), path.size() + 1);
    const int rc = ::connect(fd, reinterpret_cast<const sockaddr*>(&addr), sizeof(addr));
    const int err = errno;
    ::close(fd);
    if (rc == 0) return true;
    if (err == ECONNREFUSED || err == ENOENT) return false;
    return std::unexpected(err);
}

}  // namespace

struct ApiServer::Impl {
    detail::Router router;
};

ApiServer::ApiServer(Services services, Options options)
    : services_(std::move(services)),
      options_(std::move(options)),
      impl_(std::make_unique<Impl>()) {
    detail::install_routes(impl_->router, std::make_shared<detail::Api>(detail::Api{services_}));
}

ApiServer::~ApiServer() { stop(); }

Result<void> ApiServer::start() {
    const std::string& path = options_.socket_path;
    const std::string where = "API socket " + path;
    // A step that failed (with its errno, if any), or an error from below.
    auto fail = [&](std::string step, int err = 0) -> Result<void> {
        return std::unexpected(make_error(err, std::move(step)).add_context(where));
    };
    auto failed = [&](Error e) -> Result<void> {
        return std::unexpected(std::move(e).add_context(where));
    };
    if (path.empty() || path.size() > config::kMaxSocketPathBytes)
        return fail("expected a path of 1-" + std::to_string(config::kMaxSocketPathBytes) +
                    " bytes");
    // before anything is created: an unknown group leaves nothing behind
    std::optional<gid_t> group;
    if (!options_.group.empty()) {
        auto resolved = resolve_group(options_.group);
        if (!resolved) return failed(std::move(resolved.error()));
        group = *resolved;
    }
    if (auto made = files::make_dirs(files::parent_dir(path)); !made)
        return failed(std::move(made.error()));

    struct stat st {};
    if (::lstat(path.c_str(), &st) == 0) {
        if (!S_ISSOCK(st.st_mode))
            return fail("exists and is not a socket; refusing to replace it");
        auto answers = socket_answers(path);
        if (!answers) return fail("cannot tell whether another agent uses it", answers.error());
        if (*answers) return fail("another agent is serving on it; stop it first");
        if (::unlink(path.c_str()) != 0 && errno != ENOENT)
            return fail("remove stale socket", errno);
        spdlog::info("api: removed stale socket {}", path);
    } else if (errno != ENOENT) {
        return fail("stat", errno);
    }

    // The socket is bound, given its mode and group, and only then listens:
    // nobody connects before the permissions hold.
    auto bound = detail::bind_unix(path);
    if (!bound) return failed(std::move(bound.error()));
    const int fd = *bound;
    created_socket_ = true;
    auto undo = [&](Error e) -> Result<void> {
        ::close(fd);
        ::unlink(path.c_str());
        created_socket_ = false;
        return failed(std::move(e));
    };
    if (::chmod(path.c_str(), 0660) != 0) return undo(make_error(errno, "chmod 0660"));
    if (group && ::chown(path.c_str(), static_cast<uid_t>(-1), *group) != 0)
        return undo(make_error(errno, "chown to group " + options_.group));
    if (auto listening = detail::start_listening(fd); !listening)
        return undo(std::move(listening.error()));

    server_ = std::make_unique<detail::GuardedServer>(options_.limits, true);
    server_->set_payload_max_length(options_.max_body_bytes);
    impl_->router.install(*server_);
    server_->adopt(fd);
    thread_ = std::thread([server = server_.get()] { server->serve(); });
    // stop() only works once the server runs: wait for it.
    for (int i = 0; i < 2000 && !server_->is_running(); ++i)
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
    spdlog::info("api: serving on {}", path);
    return {};
}

void ApiServer::stop() {
    if (server_) {
        server_->stop();
        if (thread_.joinable()) thread_.join();
        server_.reset();
    }
    if (created_socket_) {
        ::unlink(options_.socket_path.c_str());
        created_socket_ = false;
        spdlog::info("api: stopped serving on {}", options_.socket_path);
    }
}

}  // namespace xlb::api
