// SPDX-License-Identifier: Apache-2.0
#include "etcd_members.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <httplib.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <thread>

#include "netns.h"

namespace xlb::test {

namespace fs = std::filesystem;

namespace {

constexpr std::string_view kDirPrefix = "xlb-etcd-";

// Directories of test processes that are gone ("xlb-etcd-<pid>-XXXXXX").
void sweep_stale_dirs(const fs::path& tmp) {
    std::error_code ec;
    for (const auto& entry : fs::directory_iterator(tmp, ec)) {
        const std::string name = entry.path().filename().string();
        if (!name.starts_with(kDirPrefix)) continue;
        const pid_t pid = static_cast<pid_t>(std::atoi(name.c_str() + kDirPrefix.size()));
        if (pid <= 0 || pid == getpid()) continue;
        if (::kill(pid, 0) == 0 || errno != ESRCH) continue;
        fs::remove_all(entry.path(), ec);
    }
}

// Distinct free TCP ports on 127.0.0.1: all bound at once so none repeats,
// then released for etcd to take.
std::vector<int> free_ports(int count) {
    std::vector<int> fds;
    std::vector<int> ports;
    for (int k = 0; k < count; ++k) {
        const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        sockaddr_in addr{};
        addr.sin_family = AF_INET;
        addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        socklen_t len = sizeof addr;
        if (fd < 0 || ::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 ||
            ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
            const std::string why = std::strerror(errno);
            if (fd >= 0) ::close(fd);
            for (const int f : fds) ::close(f);
            throw std::runtime_error("etcd members: no free port on 127.0.0.1: " + why);
        }
        fds.push_back(fd);
        ports.push_back(ntohs(addr.sin_port));
    }
    for (const int f : fds) ::close(f);
    return ports;
}

bool exited(pid_t pid) {
    int status = 0;
    return ::waitpid(pid, &status, WNOHANG) == pid;
}

// Waits up to `timeout` for pid to exit; false if it did not.
bool wait_exit(pid_t pid, std::chrono::milliseconds timeout) {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    while (std::chrono::steady_clock::now() < deadline) {
        if (exited(pid)) return true;
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    return false;
}

}  // namespace

std::string EtcdMembers::etcd_binary() {
    if (const char* path = std::getenv("PATH")) {
        std::stringstream dirs(path);
        for (std::string d; std::getline(dirs, d, ':');) {
            if (d.empty()) continue;
            const std::string candidate = d + "/etcd";
            if (::access(candidate.c_str(), X_OK) == 0) return candidate;
        }
    }
    if (::access("/usr/bin/etcd", X_OK) == 0) return "/usr/bin/etcd";
    return {};
}

EtcdMembers::EtcdMembers(EtcdMembersOptions options) : options_(options) {
    if (options_.members < 1) throw std::runtime_error("etcd members: need at least one");
    binary_ = etcd_binary();
    if (binary_.empty()) {
        throw std::runtime_error(
            "etcd members: no etcd binary on PATH or at /usr/bin/etcd "
            "(scripts/install-deps.sh installs etcd-server)");
    }
    const fs::path tmp = fs::temp_directory_path();
    sweep_stale_dirs(tmp);
    std::string pattern =
        (tmp / (std::string(kDirPrefix) + std::to_string(getpid()) + "-XXXXXX")).string();
    if (!::mkdtemp(pattern.data())) {
        throw std::runtime_error("etcd members: mkdtemp " + pattern + ": " + std::strerror(errno));
    }
    dir_ = pattern;
    try {
        if (options_.tls) run_command_ok(std::string(XLB_FLEET_CERTS_SH) + " " + dir_ + "/certs");
        const auto ports = free_ports(2 * options_.members);
        for (int i = 0; i < options_.members; ++i) {
            members_.push_back(Member{"m" + std::to_string(i), ports[2 * i], ports[2 * i + 1]});
        }
        for (int i = 0; i < size(); ++i) spawn(i);
        for (int i = 0; i < size(); ++i) wait_ready(i);
    } catch (...) {
        for (auto& m : members_) {
            if (m.pid > 0) {
                ::kill(m.pid, SIGKILL);
                ::waitpid(m.pid, nullptr, 0);
            }
        }
        std::error_code ec;
        fs::remove_all(dir_, ec);
        throw;
    }
}

EtcdMembers::~EtcdMembers() {
    for (auto& m : members_) {
        if (m.pid > 0) {
            ::kill(m.pid, SIGKILL);
            ::waitpid(m.pid, nullptr, 0);
            m.pid = 0;
        }
    }
    std::error_code ec;
    fs::remove_all(dir_, ec);
}

std::vector<std::string> EtcdMembers::endpoints() const {
    std::vector<std::string> out;
    for (int i = 0; i < size(); ++i) out.push_back(endpoint(i));
    return out;
}

std::string EtcdMembers::endpoint(int i) const {
    return scheme() + "://127.0.0.1:" + std::to_string(members_.at(i).client_port);
}

bool EtcdMembers::running(int i) const { return members_.at(i).pid > 0; }
pid_t EtcdMembers::pid(int i) const { return members_.at(i).pid; }

std::string EtcdMembers::ca() const { return options_.tls ? dir_ + "/certs/ca.pem" : ""; }
std::string EtcdMembers::client_cert() const {
    return options_.tls ? dir_ + "/certs/client.pem" : "";
}
std::string EtcdMembers::client_key() const {
    return options_.tls ? dir_ + "/certs/client-key.pem" : "";
}

std::string EtcdMembers::log_tail(int i, std::size_t bytes) const {
    std::ifstream in(dir_ + "/" + members_.at(i).name + ".log", std::ios::binary);
    std::stringstream all;
    all << in.rdbuf();
    const std::string text = all.str();
    return text.size() > bytes ? text.substr(text.size() - bytes) : text;
}

void EtcdMembers::spawn(int i) {
    Member& m = members_.at(i);
    const std::string peer_scheme = scheme();
    const auto peer_url = [&](const Member& x) {
        return peer_scheme + "://127.0.0.1:" + std::to_string(x.peer_port);
    };
    std::string cluster;
    for (const auto& x : members_) {
        cluster += (cluster.empty() ? "" : ",") + x.name + "=" + peer_url(x);
    }
    std::vector<std::string> args = {
        binary_,
        "--name",
        m.name,
        "--data-dir",
        dir_ + "/" + m.name + ".etcd",
        "--listen-client-urls",
        endpoint(i),
        "--advertise-client-urls",
        endpoint(i),
        "--listen-peer-urls",
        peer_url(m),
        "--initial-advertise-peer-urls",
        peer_url(m),
        "--initial-cluster",
        cluster,
        "--initial-cluster-state",
        m.started_once ? "existing" : "new",
        "--initial-cluster-token",
        "xlb-test-" + std::to_string(getpid()),
        "--logger",
        "zap",
        "--log-outputs",
        "stderr",
    };
    if (options_.tls) {
        const std::string certs = dir_ + "/certs/";
        for (const char* side : {"", "peer-"}) {
            const std::string s = side;
            args.insert(args.end(),
                        {"--" + s + "cert-file", certs + "member.pem", "--" + s + "key-file",
                         certs + "member-key.pem", "--" + s + "trusted-ca-file", certs + "ca.pem",
                         "--" + s + "client-cert-auth"});
        }
    }
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    const std::string log = dir_ + "/" + m.name + ".log";
    const pid_t parent = getpid();

    const pid_t pid = ::fork();
    if (pid < 0)
        throw std::runtime_error("etcd members: fork: " + std::string(std::strerror(errno)));
    if (pid == 0) {
        // Only async-signal-safe calls until exec.
        ::prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (::getppid() != parent) ::_exit(127);
        const int out = ::open(log.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
        const int null = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
        if (out < 0 || null < 0) ::_exit(127);
        ::dup2(null, 0);
        ::dup2(out, 1);
        ::dup2(out, 2);
        ::execv(argv[0], argv.data());
        ::_exit(127);
    }
    m.pid = pid;
    m.started_once = true;
}

bool EtcdMembers::serving(int i) const {
    const std::string url = endpoint(i);
    std::unique_ptr<httplib::Client> client;
    if (options_.tls) {
        client = std::make_unique<httplib::Client>(url, client_cert(), client_key());
        client->set_ca_cert_path(ca());
    } else {
        client = std::make_unique<httplib::Client>(url);
    }
    client->set_connection_timeout(1, 0);
    client->set_read_timeout(2, 0);
    auto res = client->Get("/health");
    return res && res->status == 200 && res->body.find("\"true\"") != std::string::npos;
}

void EtcdMembers::wait_ready(int i) {
    const Member& m = members_.at(i);
    if (m.pid <= 0) throw std::runtime_error("etcd members: " + m.name + " is not running");
    const auto deadline = std::chrono::steady_clock::now() + options_.ready_timeout;
    while (!serving(i)) {
        if (exited(m.pid)) {
            members_.at(i).pid = 0;
            throw std::runtime_error("etcd members: " + m.name + " exited; its log ends:\n" +
                                     log_tail(i));
        }
        if (std::chrono::steady_clock::now() > deadline) {
            throw std::runtime_error("etcd members: " + m.name + " (" + endpoint(i) +
                                     ") not serving after " +
                                     std::to_string(options_.ready_timeout.count()) +
                                     " ms; its log ends:\n" + log_tail(i));
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
}

void EtcdMembers::stop(int i) {
    Member& m = members_.at(i);
    if (m.pid <= 0) return;
    ::kill(m.pid, SIGTERM);
    if (!wait_exit(m.pid, std::chrono::seconds(10))) {
        ::kill(m.pid, SIGKILL);
        ::waitpid(m.pid, nullptr, 0);
    }
    m.pid = 0;
}

void EtcdMembers::kill(int i) {
    Member& m = members_.at(i);
    if (m.pid <= 0) return;
    ::kill(m.pid, SIGKILL);
    ::waitpid(m.pid, nullptr, 0);
    m.pid = 0;
}

void EtcdMembers::start(int i, bool wait) {
    if (members_.at(i).pid > 0) {
        throw std::runtime_error("etcd members: " + members_.at(i).name + " is already running");
    }
    spawn(i);
    if (wait) wait_ready(i);
}

void EtcdMembers::stop_all() {
    for (int i = 0; i < size(); ++i) stop(i);
}

}  // namespace xlb::test
