// SPDX-License-Identifier: Apache-2.0
#include "xlb/announce/bird_client.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <cstring>
#include <iterator>
#include <sstream>
#include <thread>

#include "xlb/names.h"

namespace xlb::announce::bird {

using SteadyClock = std::chrono::steady_clock;

namespace {

// A runaway reply (a full table dump) must not grow without bound; the
// commands used here answer in a few KiB per VIP.
constexpr std::size_t kMaxReplyBytes = 64u << 20;

bool is_code(std::string_view s) {
    return s.size() >= 4 && std::isdigit(static_cast<unsigned char>(s[0])) &&
           std::isdigit(static_cast<unsigned char>(s[1])) &&
           std::isdigit(static_cast<unsigned char>(s[2])) &&
           std::isdigit(static_cast<unsigned char>(s[3]));
}

int remaining_ms(SteadyClock::time_point deadline) {
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - SteadyClock::now())
            .count();
    return left <= 0 ? 0 : static_cast<int>(left);
}

std::vector<std::string> words(std::string_view text) {
    std::istringstream in{std::string(text)};
    std::vector<std::string> out;
    for (std::string w; in >> w;) out.push_back(std::move(w));
    return out;
}

}  // namespace

std::string Reply::text() const {
    std::string out;
    for (const auto& l : lines) {
        if (!out.empty()) out += '\n';
        out += l.text;
    }
    return out;
}

std::vector<std::string> Reply::texts(int code) const {
    std::vector<std::string> out;
    for (const auto& l : lines)
        if (l.code == code) out.push_back(l.text);
    return out;
}

Result<void> ReplyParser::feed(std::string_view bytes) {
    partial_.append(bytes);
    std::size_t start = 0;
    for (;;) {
        const auto nl = partial_.find('\n', start);
        if (nl == std::string::npos) break;
        auto done = line(std::string_view(partial_).substr(start, nl - start));
        start = nl + 1;
        if (!done) {
            partial_.erase(0, start);
            return done;
        }
    }
    partial_.erase(0, start);
    return {};
}

Result<void> ReplyParser::line(std::string_view text) {
    if (!text.empty() && text.back() == '\r') text.remove_suffix(1);
    if (!text.empty() && text[0] == '+') return {};
    if (!text.empty() && text[0] == ' ') {
        if (last_code_ == 0)
            return fail("BIRD sent a continuation line before any reply code: \"" +
                        std::string(text) + "\"");
        current_.lines.push_back({last_code_, std::string(text.substr(1))});
        return {};
    }
    if (is_code(text) && (text.size() == 4 || text[4] == '-' || text[4] == ' ')) {
        const int code = std::stoi(std::string(text.substr(0, 4)));
        const bool last = text.size() == 4 || text[4] == ' ';
        current_.lines.push_back(
            {code, std::string(text.size() > 5 ? text.substr(5) : std::string_view{})});
        last_code_ = code;
        if (last) {
            done_.push_back(std::move(current_));
            current_ = {};
            last_code_ = 0;
        }
        return {};
    }
    return fail("BIRD sent a line this client does not understand: \"" + std::string(text) + "\"");
}

std::optional<Reply> ReplyParser::take() {
    if (done_.empty()) return std::nullopt;
    Reply r = std::move(done_.front());
    done_.erase(done_.begin());
    return r;
}

namespace {
// Indexed by ConfigureOutcome, in its order.
constexpr std::string_view kConfigureOutcomes[] = {"reconfigured", "in_progress", "queued"};
static_assert(std::size(kConfigureOutcomes) ==
              static_cast<std::size_t>(ConfigureOutcome::kQueued) + 1);
}  // namespace

std::string_view to_string(ConfigureOutcome o) { return name_at(o, kConfigureOutcomes); }

Client::Client(int fd, std::string path, std::chrono::milliseconds timeout)
    : fd_(fd), path_(std::move(path)), timeout_(timeout) {}

Client::Client(Client&& other) noexcept
    : fd_(std::exchange(other.fd_, -1)),
      path_(std::move(other.path_)),
      timeout_(other.timeout_),
      greeting_(std::move(other.greeting_)),
      parser_(std::move(other.parser_)),
      broken_(other.broken_) {}

Client& Client::operator=(Client&& other) noexcept {
    if (this != &other) {
        if (fd_ >= 0) ::close(fd_);
        fd_ = std::exchange(other.fd_, -1);
        path_ = std::move(other.path_);
        timeout_ = other.timeout_;
        greeting_ = std::move(other.greeting_);
        parser_ = std::move(other.parser_);
        broken_ = other.broken_;
    }
    return *this;
}

Client::~Client() {
    if (fd_ >= 0) ::close(fd_);
}

Error Client::socket_error(int code, std::string what, std::string hint) {
    broken_ = true;
    Error e = make_error(code, std::move(what), std::move(hint));
    e.object = path_;
    return e;
}

Result<Client> Client::connect(const std::string& socket_path, std::chrono::milliseconds timeout) {
    const std::string what = "connect to BIRD control socket";
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    if (socket_path.empty() || socket_path.size() >= sizeof addr.sun_path)
        return fail_on(ENAMETOOLONG, what, socket_path, "check bgp.control_socket");
    std::memcpy(addr.sun_path, socket_path.data(), socket_path.size());

    const int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (fd < 0) return fail_on(errno, what, socket_path);
    Client client(fd, socket_path, timeout);
    const auto deadline = SteadyClock::now() + timeout;
    for (;;) {
        if (::connect(fd, reinterpret_cast<const sockaddr*>(&addr), sizeof addr) == 0) break;
        const int err = errno;
        if (err == EINTR) continue;
        // A Unix socket whose backlog is full answers EAGAIN and cannot be
        // polled for room: BIRD is busy (or wedged); try until the deadline.
        if (err == EAGAIN && remaining_ms(deadline) > 0) {
            std::this_thread::sleep_for(std::chrono::milliseconds(10));
            continue;
        }
        std::string hint;
        if (err == ENOENT || err == ECONNREFUSED)
            hint = "is bird running? check bgp.control_socket";
        else if (err == EACCES)
            hint =
                "xlbd needs write access to it: run xlbd in BIRD's group "
                "(SupplementaryGroups=bird)";
        else if (err == EAGAIN)
            hint = "BIRD accepts no connection: is it wedged?";
        return std::unexpected(client.socket_error(err, what, hint));
    }
    auto greeting = client.read_reply("greeting");
    if (!greeting) return std::unexpected(std::move(greeting.error()));
    if (greeting->code() != 1)
        return std::unexpected(client.socket_error(
            0, "unexpected greeting \"" + greeting->text() + "\" on BIRD control socket",
            "is this BIRD's control socket?"));
    client.greeting_ = greeting->text();
    return client;
}

std::string Client::version() const {
    // "BIRD 2.0.12 ready."
    auto w = words(greeting_);
    return w.size() >= 2 && w[0] == "BIRD" ? w[1] : std::string{};
}

Result<Reply> Client::read_reply(std::string_view for_what) {
    const auto deadline = SteadyClock::now() + timeout_;
    std::size_t total = 0;
    for (;;) {
        if (auto reply = parser_.take()) return std::move(*reply);
        pollfd p{fd_, POLLIN, 0};
        const int ready = ::poll(&p, 1, remaining_ms(deadline));
        if (ready < 0) {
            if (errno == EINTR) continue;
            return std::unexpected(
                socket_error(errno, "wait for BIRD's " + std::string(for_what) + " on"));
        }
        if (ready == 0)
            return std::unexpected(
                socket_error(ETIMEDOUT, "read BIRD's " + std::string(for_what) + " from",
                             "no complete answer within " + std::to_string(timeout_.count()) +
                                 " ms: is bird wedged?"));
        char buffer[16384];
        const ssize_t n = ::recv(fd_, buffer, sizeof buffer, 0);
        if (n < 0) {
            if (errno == EINTR || errno == EAGAIN) continue;
            return std::unexpected(
                socket_error(errno, "read BIRD's " + std::string(for_what) + " from"));
        }
        if (n == 0)
            return std::unexpected(socket_error(0,
                                                "BIRD closed the connection before its " +
                                                    std::string(for_what) + " was complete on",
                                                "did bird stop or restart?"));
        total += static_cast<std::size_t>(n);
        if (total > kMaxReplyBytes)
            return std::unexpected(
                socket_error(EMSGSIZE, "read BIRD's " + std::string(for_what) + " from"));
        if (auto fed = parser_.feed(std::string_view(buffer, static_cast<std::size_t>(n))); !fed) {
            broken_ = true;
            return std::unexpected(
                std::move(fed.error()).add_context("read BIRD control socket " + path_));
        }
    }
}

Result<Reply> Client::command(std::string_view line) {
    if (fd_ < 0 || broken_)
        return std::unexpected(socket_error(EBADF, "send to BIRD control socket"));
    if (line.find('\n') != std::string_view::npos)
        return fail("BIRD command \"" + std::string(line) + "\" spans lines");
    std::string out(line);
    out += '\n';
    const std::string what = "\"" + std::string(line) + "\"";
    const auto deadline = SteadyClock::now() + timeout_;
    std::string_view rest = out;
    while (!rest.empty()) {
        const ssize_t n = ::send(fd_, rest.data(), rest.size(), MSG_NOSIGNAL);
        if (n >= 0) {
            rest.remove_prefix(static_cast<std::size_t>(n));
            continue;
        }
        if (errno == EINTR) continue;
        if (errno == EAGAIN) {
            pollfd p{fd_, POLLOUT, 0};
            if (::poll(&p, 1, remaining_ms(deadline)) == 0)
                return std::unexpected(socket_error(
                    ETIMEDOUT, "send " + what + " to BIRD control socket", "is bird wedged?"));
            continue;
        }
        return std::unexpected(socket_error(errno, "send " + what + " to BIRD control socket",
                                            errno == EPIPE ? "did bird stop or restart?" : ""));
    }
    return read_reply("answer to " + what);
}

Result<ConfigureResult> Client::configure() {
    auto reply = command("configure");
    if (!reply) return std::unexpected(std::move(reply.error()));
    ConfigureResult result{ConfigureOutcome::kReconfigured, reply->text()};
    switch (reply->code()) {
        case 3: return result;
        case 4: result.outcome = ConfigureOutcome::kInProgress; return result;
        case 5: result.outcome = ConfigureOutcome::kQueued; return result;
        case 8002: {
            // BIRD's own line names file:line:column; the "Reading
            // configuration from" line before it adds nothing.
            auto errors = reply->texts(8002);
            std::string text;
            for (const auto& t : errors) text += (text.empty() ? "" : "; ") + t;
            return fail("BIRD refused its configuration: " + text,
                        "BIRD keeps running the previous one; fix the file and xlbd tries again");
        }
        default:
            return fail("BIRD answered `configure` with code " + std::to_string(reply->code()) +
                        ": " + reply->text());
    }
}

std::vector<ProtocolInfo> parse_protocols_reply(const Reply& reply) {
    std::vector<ProtocolInfo> out;
    for (const auto& l : reply.lines) {
        if (l.code != 1002) continue;
        std::istringstream in(l.text);
        ProtocolInfo p;
        if (!(in >> p.name >> p.proto >> p.table >> p.state)) continue;
        std::getline(in, p.info);
        const auto first = p.info.find_first_not_of(' ');
        const auto last = p.info.find_last_not_of(' ');
        p.info =
            first == std::string::npos ? std::string{} : p.info.substr(first, last - first + 1);
        out.push_back(std::move(p));
    }
    return out;
}

Result<std::vector<ProtocolInfo>> Client::show_protocols() {
    auto reply = command("show protocols");
    if (!reply) return std::unexpected(std::move(reply.error()));
    if (reply->code() != 0)
        return fail("BIRD answered `show protocols` with code " + std::to_string(reply->code()) +
                    ": " + reply->text());
    return parse_protocols_reply(*reply);
}

std::vector<RouteEntry> parse_routes_reply(const Reply& reply) {
    std::vector<RouteEntry> out;
    std::string table;
    for (const auto& l : reply.lines) {
        if (l.code != 1007) continue;
        auto w = words(l.text);
        if (w.empty()) continue;
        if (w.size() == 2 && w[0] == "Table" && w[1].ends_with(':')) {
            table = w[1].substr(0, w[1].size() - 1);
            continue;
        }
        const auto slash = w[0].find('/');
        if (slash == std::string::npos) continue;  // a next hop line: "via 198.51.100.2 on vr"
        auto address = net::IpAddress::parse(std::string_view(w[0]).substr(0, slash));
        if (!address) continue;
        RouteEntry r;
        r.address = *address;
        r.length = std::atoi(w[0].c_str() + slash + 1);
        r.table = table;
        for (const auto& word : w)
            if (word.size() > 1 && word[0] == '[') {
                r.protocol = word.substr(1);
                break;
            }
        out.push_back(std::move(r));
    }
    return out;
}

Result<std::vector<RouteEntry>> Client::show_routes(std::string_view protocol) {
    auto reply = command("show route protocol " + std::string(protocol));
    if (!reply) return std::unexpected(std::move(reply.error()));
    if (reply->code() != 0)
        return fail("BIRD answered `show route protocol " + std::string(protocol) + "` with code " +
                    std::to_string(reply->code()) + ": " + reply->text());
    return parse_routes_reply(*reply);
}

}  // namespace xlb::announce::bird
