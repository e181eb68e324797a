// SPDX-License-Identifier: Apache-2.0
#include "lab.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <grp.h>
#include <linux/magic.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <regex>
#include <sstream>
#include <stdexcept>
#include <thread>

#include "xlb/xlbctl/transport.h"

extern char** environ;

namespace xlb::xlbctl::test {

namespace fs = std::filesystem;
using namespace std::chrono_literals;

namespace {

std::vector<char*> c_strings(std::vector<std::string>& strings) {
    std::vector<char*> out;
    for (auto& s : strings) out.push_back(s.data());
    out.push_back(nullptr);
    return out;
}

std::vector<std::string> environment(const ProcessOptions& o) {
    std::map<std::string, std::string> vars;
    for (char** e = environ; *e; ++e) {
        std::string kv = *e;
        auto eq = kv.find('=');
        if (eq != std::string::npos) vars[kv.substr(0, eq)] = kv.substr(eq + 1);
    }
    for (const auto& name : o.unset_env) vars.erase(name);
    for (const auto& kv : o.env) {
        auto eq = kv.find('=');
        vars[kv.substr(0, eq)] = eq == std::string::npos ? "" : kv.substr(eq + 1);
    }
    std::vector<std::string> out;
    for (const auto& [k, v] : vars) out.push_back(k + "=" + v);
    return out;
}

int wait_exit(pid_t pid, std::chrono::milliseconds timeout) {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    int status = 0;
    while (true) {
        pid_t r = ::waitpid(pid, &status, WNOHANG);
        if (r == pid) break;
        if (r < 0 && errno != EINTR) return -1;
        if (std::chrono::steady_clock::now() >= deadline) {
            ::kill(pid, SIGKILL);
            ::waitpid(pid, &status, 0);
            break;
        }
        std::this_thread::sleep_for(5ms);
    }
    if (WIFEXITED(status)) return WEXITSTATUS(status);
    if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
    return -1;
}

}  // namespace

ProcessResult run_process(const std::vector<std::string>& argv, const ProcessOptions& options) {
    std::vector<std::string> args = argv;
    std::vector<std::string> env = environment(options);
    std::vector<char*> c_args = c_strings(args);
    std::vector<char*> c_env = c_strings(env);
    int out[2], err[2];
    if (::pipe2(out, O_CLOEXEC) != 0 || ::pipe2(err, O_CLOEXEC) != 0)
        throw std::runtime_error(std::string("pipe: ") + std::strerror(errno));
    const pid_t pid = ::fork();
    if (pid < 0) throw std::runtime_error(std::string("fork: ") + std::strerror(errno));
    if (pid == 0) {
        ::dup2(out[1], STDOUT_FILENO);
        ::dup2(err[1], STDERR_FILENO);
        int null = ::open("/dev/null", O_RDONLY);
        if (null >= 0) ::dup2(null, STDIN_FILENO);
        ::prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (options.uid) {
            if (::setgroups(0, nullptr) != 0 || ::setgid(*options.uid) != 0 ||
                ::setuid(*options.uid) != 0)
                ::_exit(126);
        }
        ::execvpe(c_args[0], c_args.data(), c_env.data());
        const char* what = std::strerror(errno);
        (void)!::write(STDERR_FILENO, "exec failed: ", 13);
        (void)!::write(STDERR_FILENO, what, std::strlen(what));
        ::_exit(127);
    }
    ::close(out[1]);
    ::close(err[1]);
    ProcessResult result;
    const auto deadline = std::chrono::steady_clock::now() + options.timeout;
    pollfd fds[2] = {{out[0], POLLIN, 0}, {err[0], POLLIN, 0}};
    std::string* sinks[2] = {&result.out, &result.err};
    int open_fds = 2;
    bool timed_out = false;
    while (open_fds > 0) {
        const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
            deadline - std::chrono::steady_clock::now());
        if (left.count() <= 0) {
            timed_out = true;
            break;
        }
        int rc = ::poll(fds, 2, static_cast<int>(left.count()));
        if (rc < 0 && errno == EINTR) continue;
        if (rc <= 0) continue;
        for (int i = 0; i < 2; ++i) {
            if (fds[i].fd < 0 || !(fds[i].revents & (POLLIN | POLLHUP | POLLERR))) continue;
            char buf[8192];
            ssize_t n = ::read(fds[i].fd, buf, sizeof(buf));
            if (n > 0) {
                sinks[i]->append(buf, static_cast<std::size_t>(n));
            } else if (n == 0 || errno != EINTR) {
                ::close(fds[i].fd);
                fds[i].fd = -1;
                --open_fds;
            }
        }
    }
    for (auto& f : fds)
        if (f.fd >= 0) ::close(f.fd);
    if (timed_out) ::kill(pid, SIGKILL);
    result.code = wait_exit(pid, timed_out ? 1000ms : options.timeout);
    if (timed_out) result.err += "\n[killed: ran longer than the test's timeout]";
    return result;
}

std::optional<std::string> Lab::unavailable(const std::string& xlbd_path) {
    if (::geteuid() != 0) return "needs root (network namespaces, XDP, bpffs)";
    struct statfs st {};
    if (::statfs("/sys/fs/bpf", &st) != 0 || st.f_type != BPF_FS_MAGIC)
        return "bpffs is not mounted on /sys/fs/bpf (mount -t bpf bpf /sys/fs/bpf)";
    if (::access(xlbd_path.c_str(), X_OK) != 0) return "no xlbd binary at " + xlbd_path;
    if (run_process({"ip", "-V"}).code != 0) return "iproute2's ip is missing";
    if (run_process({"nsenter", "--version"}).code != 0) return "nsenter is missing";
    return std::nullopt;
}

Lab::Lab(std::string xlbd_path)
    : dir_(lab_.dir()),
      pin_dir_(lab_.pin_dir()),
      socket_(dir_ + "/run/xlbd.sock"),
      state_file_(dir_ + "/lib/state.json"),
      config_(dir_ + "/xlbd.yaml"),
      log_(dir_ + "/xlbd.log"),
      agent_(lab_.lb_ns(), config_, log_, std::move(xlbd_path)) {
    lab_.up();  // on failure it has removed what it built; the destructor takes it down
    std::ofstream cfg(config_);
    cfg << fmt::format(
        R"(# SPDX-License-Identifier: Apache-2.0
# xlbctl's test agent (tests/xlbctl/lab.cpp)
interface: {iface}
xdp_mode: native
next_hop: {{address: {router}}}
encap_source: {{ipv4: {lb4}, ipv6: "{lb6}"}}
hash_seed: {seed}
maps: {{max_vips: {vips}, max_backends: {backends}, conntrack_entries: {ct}}}
api: {{socket: {socket}}}
metrics: {{listen: "127.0.0.1:9464"}}
state_file: {state}
pin_dir: {pins}
vips:
  - address: 198.51.100.10
    port: 80
    name: web
    ring_size: 251
    slow_start: {{window: 0s}}
    backends:
      - {{address: 203.0.113.11}}
      - {{address: 203.0.113.12}}
      - {{address: 203.0.113.13, weight: 50}}
  - address: 198.51.100.20
    port: 0
    name: any
    ring_size: 101
    slow_start: {{window: 0s}}
    backends:
      - {{address: 203.0.113.11}}
      - {{address: 203.0.113.12}}
)",
        fmt::arg("iface", kInterface), fmt::arg("router", xlb::test::Lab::kRouterAddr),
        fmt::arg("lb4", xlb::test::Lab::kLbAddr), fmt::arg("lb6", xlb::test::Lab::kLbAddr6),
        fmt::arg("seed", kHashSeed), fmt::arg("vips", kMaxVips), fmt::arg("backends", kMaxBackends),
        fmt::arg("ct", kConntrackEntries), fmt::arg("socket", socket_),
        fmt::arg("state", state_file_), fmt::arg("pins", pin_dir_));
    if (!cfg) throw std::runtime_error("write " + config_);
}

Lab::~Lab() { agent_.kill9(); }

void Lab::start_agent() {
    if (agent_running()) return;
    agent_.start();

    // Ready: the API answers and says the program is attached and every
    // table is published.
    const auto deadline = std::chrono::steady_clock::now() + 15s;
    std::string last;
    while (std::chrono::steady_clock::now() < deadline) {
        if (!agent_.running())
            throw std::runtime_error("xlbd exited during start-up; its log:\n" + agent_log());
        UnixSocketTransport api(socket_, 1000ms);
        auto reply = api.send({"GET", "/v1/status", ""});
        if (reply && reply->status == 200) {
            auto j = nlohmann::json::parse(reply->body, nullptr, false);
            if (j.is_object() && j.value("ready", false)) return;
            last = reply->body;
        } else if (!reply) {
            last = reply.error().detail;
        }
        std::this_thread::sleep_for(20ms);
    }
    stop_agent();
    throw std::runtime_error("xlbd not ready within 15 s (last: " + last + "); its log:\n" +
                             agent_log());
}

int Lab::stop_agent() {
    if (!agent_running()) return -1;
    agent_.signal(SIGTERM);
    if (std::optional<int> code = agent_.wait_exit(5000ms)) return *code;
    agent_.kill9();
    return 128 + SIGKILL;
}

void Lab::reload_with_hash_seed(std::uint32_t seed) {
    if (!agent_running()) throw std::runtime_error("reload: the agent is not running");
    std::string text;
    {
        std::ifstream in(config_);
        std::stringstream buf;
        buf << in.rdbuf();
        text = buf.str();
    }
    const std::regex seed_line("hash_seed: [0-9]+");
    if (!std::regex_search(text, seed_line)) throw std::runtime_error("no hash_seed in " + config_);
    std::ofstream(config_) << std::regex_replace(text, seed_line,
                                                 "hash_seed: " + std::to_string(seed));
    // A new seed remaps flows: only a confirmed reload applies it (SIGHUP cannot).
    const ProcessResult r =
        run_process({XLBCTL_PATH, "--socket", socket_, "reload", "--allow-disruptive"});
    if (r.code != 0)
        throw std::runtime_error("xlbctl reload --allow-disruptive: exit " +
                                 std::to_string(r.code) + ": " + r.out + r.err + "\n" +
                                 agent_log());
}

std::string Lab::agent_log() const { return agent_.log(); }

}  // namespace xlb::xlbctl::test
