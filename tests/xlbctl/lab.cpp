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

// Runs a setup command; throws with its output when it fails.
void must(const std::vector<std::string>& argv) {
    ProcessResult r = run_process(argv);
    if (r.code != 0) {
        std::string line;
        for (const auto& a : argv) line += (line.empty() ? "" : " ") + a;
        throw std::runtime_error(line + ": exit " + std::to_string(r.code) + ": " + r.err + r.out);
    }
}

void quietly(const std::vector<std::string>& argv) {
    (void)run_process(argv, {{}, {}, {}, 5000ms});
}

bool process_alive(pid_t pid) { return ::kill(pid, 0) == 0 || errno != ESRCH; }

void remove_netns(const std::string& ns) {
    // A process left in a namespace keeps it alive: kill it first.
    ProcessResult pids = run_process({"ip", "netns", "pids", ns});
    std::istringstream in(pids.out);
    for (pid_t pid; in >> pid;) ::kill(pid, SIGKILL);
    quietly({"ip", "netns", "del", ns});
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

void clean_up_stale_labs() noexcept {
    static const std::regex kName("^xlbc-([0-9]+)-.*");
    auto stale = [](const std::string& name) {
        std::smatch m;
        if (!std::regex_match(name, m, kName)) return false;
        const pid_t pid = static_cast<pid_t>(std::stol(m[1]));
        return pid != ::getpid() && !process_alive(pid);
    };
    std::error_code ec;
    for (const auto& e : fs::directory_iterator("/run/netns", ec))
        if (stale(e.path().filename().string())) remove_netns(e.path().filename().string());
    for (const char* root : {"/sys/fs/bpf", "/tmp"})
        for (const auto& e : fs::directory_iterator(root, ec))
            if (stale(e.path().filename().string())) fs::remove_all(e.path(), ec);
}

Lab::Lab(std::string xlbd_path) : xlbd_(std::move(xlbd_path)) {
    try {
        setup();
    } catch (...) {
        teardown();
        throw;
    }
}

Lab::~Lab() { teardown(); }

void Lab::setup() {
    static std::atomic<int> counter{0};
    prefix_ = fmt::format("xlbc-{}-{}", ::getpid(), counter++);
    ns_lb_ = prefix_ + "-lb";
    ns_rt_ = prefix_ + "-rt";
    std::string tmpl = "/tmp/" + prefix_ + "-XXXXXX";
    if (!::mkdtemp(tmpl.data()))
        throw std::runtime_error("mkdtemp: " + std::string(std::strerror(errno)));
    dir_ = tmpl;
    pin_dir_ = "/sys/fs/bpf/" + prefix_;
    socket_ = dir_ + "/run/xlbd.sock";
    state_file_ = dir_ + "/lib/state.json";
    config_ = dir_ + "/xlbd.yaml";
    log_ = dir_ + "/xlbd.log";

    const std::string router_mac = "02:00:00:00:00:2e";
    must({"ip", "netns", "add", ns_lb_});
    must({"ip", "netns", "add", ns_rt_});
    must({"ip", "link", "add", kInterface, "netns", ns_lb_, "type", "veth", "peer", "name",
          "xlbc-rt", "netns", ns_rt_});
    must({"ip", "-n", ns_rt_, "link", "set", "xlbc-rt", "address", router_mac});
    must({"ip", "-n", ns_lb_, "addr", "add", "192.0.2.1/24", "dev", kInterface});
    must({"ip", "-n", ns_rt_, "addr", "add", "192.0.2.2/24", "dev", "xlbc-rt"});
    for (const auto& [ns, dev] :
         {std::pair{ns_lb_, std::string(kInterface)}, std::pair{ns_rt_, std::string("xlbc-rt")}}) {
        must({"ip", "-n", ns, "link", "set", "lo", "up"});
        must({"ip", "-n", ns, "link", "set", dev, "up"});
    }
    // The next hop's MAC, known without ARP.
    must({"ip", "-n", ns_lb_, "neigh", "replace", "192.0.2.2", "lladdr", router_mac, "dev",
          kInterface, "nud", "permanent"});

    std::ofstream cfg(config_);
    cfg << fmt::format(R"(# SPDX-License-Identifier: Apache-2.0
# xlbctl's test agent (tests/xlbctl/lab.cpp)
interface: {iface}
xdp_mode: native
next_hop: {{address: 192.0.2.2}}
encap_source: {{ipv4: 192.0.2.1, ipv6: "2001:db8:e::1"}}
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
                       fmt::arg("iface", kInterface), fmt::arg("seed", kHashSeed),
                       fmt::arg("vips", kMaxVips), fmt::arg("backends", kMaxBackends),
                       fmt::arg("ct", kConntrackEntries), fmt::arg("socket", socket_),
                       fmt::arg("state", state_file_), fmt::arg("pins", pin_dir_));
    if (!cfg) throw std::runtime_error("write " + config_);
}

void Lab::start_agent() {
    if (agent_ > 0) return;
    const std::string netns = "--net=/run/netns/" + ns_lb_;
    std::vector<std::string> args = {"nsenter", netns, xlbd_, "--config", config_};
    std::vector<char*> c_args = c_strings(args);
    const pid_t pid = ::fork();
    if (pid < 0) throw std::runtime_error(std::string("fork: ") + std::strerror(errno));
    if (pid == 0) {
        int log = ::open(log_.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
        if (log >= 0) {
            ::dup2(log, STDOUT_FILENO);
            ::dup2(log, STDERR_FILENO);
        }
        int null = ::open("/dev/null", O_RDONLY);
        if (null >= 0) ::dup2(null, STDIN_FILENO);
        ::prctl(PR_SET_PDEATHSIG, SIGKILL);  // the agent never outlives the test
        ::execvp(c_args[0], c_args.data());
        ::_exit(127);
    }
    agent_ = pid;

    // Ready: the API answers and says the program is attached and every
    // table is published.
    const auto deadline = std::chrono::steady_clock::now() + 15s;
    std::string last;
    while (std::chrono::steady_clock::now() < deadline) {
        int status = 0;
        if (::waitpid(agent_, &status, WNOHANG) == agent_) {
            agent_ = -1;
            throw std::runtime_error("xlbd exited during start-up (status " +
                                     std::to_string(status) + "); its log:\n" + agent_log());
        }
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
    if (agent_ <= 0) return -1;
    ::kill(agent_, SIGTERM);
    const int code = wait_exit(agent_, 5000ms);
    agent_ = -1;
    return code;
}

void Lab::reload_with_hash_seed(std::uint32_t seed) {
    if (agent_ <= 0) throw std::runtime_error("reload: the agent is not running");
    std::string text;
    {
        std::ifstream in(config_);
        std::stringstream buf;
        buf << in.rdbuf();
        text = buf.str();
    }
    const std::regex seed_line("hash_seed: [0-9]+");
    if (!std::regex_search(text, seed_line)) throw std::runtime_error("no hash_seed in " + config_);
    std::ofstream(config_) << std::regex_replace(text, seed_line, "hash_seed: " + std::to_string(seed));
    // A new seed remaps flows: only a confirmed reload applies it (SIGHUP cannot).
    const ProcessResult r =
        run_process({XLBCTL_PATH, "--socket", socket_, "reload", "--allow-disruptive"});
    if (r.code != 0)
        throw std::runtime_error("xlbctl reload --allow-disruptive: exit " + std::to_string(r.code) +
                                 ": " + r.out + r.err + "\n" + agent_log());
}

std::string Lab::agent_log() const {
    std::ifstream in(log_);
    std::stringstream buf;
    buf << in.rdbuf();
    return buf.str();
}

void Lab::teardown() noexcept {
    try {
        if (agent_ > 0) {
            ::kill(agent_, SIGKILL);
            wait_exit(agent_, 5000ms);
            agent_ = -1;
        }
        if (!ns_lb_.empty()) {
            quietly({"ip", "-n", ns_lb_, "link", "set", "dev", kInterface, "xdp", "off"});
            remove_netns(ns_lb_);
        }
        if (!ns_rt_.empty()) remove_netns(ns_rt_);
        std::error_code ec;
        if (!pin_dir_.empty()) fs::remove_all(pin_dir_, ec);
        if (!dir_.empty()) fs::remove_all(dir_, ec);
    } catch (...) {
        // a destructor must not throw; what is left is removed by the next
        // run (clean_up_stale_labs)
    }
}

}  // namespace xlb::xlbctl::test
