// SPDX-License-Identifier: Apache-2.0
#include "fake_bird.h"

#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <stdexcept>

namespace xlb::announce::test {

TempDir::TempDir() {
    std::string pattern = "/tmp/xlb-announce-XXXXXX";
    if (::mkdtemp(pattern.data()) == nullptr) throw std::runtime_error("mkdtemp failed");
    path_ = pattern;
}

TempDir::~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
}

FakeBird::FakeBird(std::string socket_path, Handler handler, std::string greeting)
    : path_(std::move(socket_path)), handler_(std::move(handler)), greeting_(std::move(greeting)) {
    listen_fd_ = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    std::strncpy(addr.sun_path, path_.c_str(), sizeof addr.sun_path - 1);
    if (::bind(listen_fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 ||
        ::listen(listen_fd_, 8) != 0)
        throw std::runtime_error("fake BIRD: bind/listen " + path_ + ": " + std::strerror(errno));
    thread_ = std::thread([this] { serve(); });
}

FakeBird::~FakeBird() {
    stop_ = true;
    thread_.join();
    ::close(listen_fd_);
    ::unlink(path_.c_str());
}

std::vector<std::string> FakeBird::commands() const {
    std::lock_guard lock(mu_);
    return commands_;
}

int FakeBird::count(const std::string& command) const {
    int n = 0;
    for (const auto& c : commands())
        if (c == command) ++n;
    return n;
}

void FakeBird::serve() {
    while (!stop_) {
        pollfd p{listen_fd_, POLLIN, 0};
        if (::poll(&p, 1, 20) <= 0) continue;
        const int fd = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
        if (fd < 0) continue;
        session(fd);
        ::close(fd);
    }
}

void FakeBird::session(int fd) {
    if (greeting_ == kStall) {
        while (!stop_) ::usleep(10000);
        return;
    }
    ::send(fd, greeting_.data(), greeting_.size(), MSG_NOSIGNAL);
    std::string buffer;
    while (!stop_) {
        pollfd p{fd, POLLIN, 0};
        if (::poll(&p, 1, 20) <= 0) continue;
        char chunk[4096];
        const ssize_t n = ::recv(fd, chunk, sizeof chunk, 0);
        if (n <= 0) return;
        buffer.append(chunk, static_cast<std::size_t>(n));
        for (auto nl = buffer.find('\n'); nl != std::string::npos; nl = buffer.find('\n')) {
            const std::string command = buffer.substr(0, nl);
            buffer.erase(0, nl + 1);
            {
                std::lock_guard lock(mu_);
                commands_.push_back(command);
            }
            const std::string answer = handler_(command);
            if (answer == kClose) return;
            if (answer == kStall) {
                while (!stop_) ::usleep(10000);
                return;
            }
            // Byte by byte now and then, so the client's reassembly is exercised.
            if (answer.size() < 64) {
                for (char c : answer) ::send(fd, &c, 1, MSG_NOSIGNAL);
            } else {
                ::send(fd, answer.data(), answer.size(), MSG_NOSIGNAL);
            }
        }
    }
}

FakeBird::Handler healthy_bird(std::vector<std::string> routes4, std::vector<std::string> routes6) {
    return [routes4, routes6](const std::string& command) -> std::string {
        if (command == "configure")
            return "0002-Reading configuration from /etc/bird/bird.conf\n0003 Reconfigured\n";
        if (command == "show protocols")
            return "2002-Name       Proto      Table      State  Since         Info\n"
                   "1002-device1    Device     ---        up     17:41:52.148  \n"
                   " xlb4       Static     master4    up     17:42:23.636  \n"
                   " xlb6       Static     master6    up     17:42:23.636  \n"
                   " uplink     BGP        ---        up     17:41:55.564  Established   \n"
                   "0000 \n";
        auto table = [](const char* name, const std::vector<std::string>& routes,
                        const char* proto) {
            if (routes.empty()) return std::string("0000 \n");
            std::string out = std::string("1007-Table ") + name + ":\n";
            for (const auto& r : routes)
                out += " " + r + "        blackhole [" + proto + " 17:42:23.636] * (200)\n";
            return out + "0000 \n";
        };
        if (command == "show route protocol xlb4") return table("master4", routes4, "xlb4");
        if (command == "show route protocol xlb6") return table("master6", routes6, "xlb6");
        return "9001 syntax error\n";
    };
}

}  // namespace xlb::announce::test
