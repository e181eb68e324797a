// SPDX-License-Identifier: Apache-2.0
#include "lab_driver.h"

#include <fcntl.h>
#include <linux/magic.h>
#include <sched.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/statfs.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <thread>

#include "netns.h"

#if !defined(XLB_LAB_SH) || !defined(XLBD_PATH) || !defined(XLB_DECAP_PATH) || \
    !defined(XLB_LAB_XLBCTL_PATH)
#error "XLB_LAB_SH, XLBD_PATH, XLB_DECAP_PATH and XLB_LAB_XLBCTL_PATH must be defined"
#endif

namespace xlb::test {

namespace {

std::string quote(const std::string& s) {
    std::string out = "'";
    for (char c : s) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
    return out + "'";
}

std::string env_or(const char* name, const char* fallback) {
    const char* v = std::getenv(name);
    return v && *v ? v : fallback;
}

std::string lab_sh(const std::string& args) {
    // XLBD / XLB_DECAP / XLBCTL in the environment run other builds of the binaries
    const std::string cmd =
        "XLBD=" + quote(xlbd_path()) + " XLB_DECAP=" + quote(env_or("XLB_DECAP", XLB_DECAP_PATH)) +
        " XLBCTL=" + quote(env_or("XLBCTL", XLB_LAB_XLBCTL_PATH)) + " " + XLB_LAB_SH + " " + args;
    CommandResult r = run_command(cmd);
    if (r.rc != 0)
        throw std::runtime_error("lab.sh " + args + " failed (exit " + std::to_string(r.rc) +
                                 "):\n" + r.out);
    return r.out;
}

void prepare_host_once() {
    struct statfs st {};
    if (::statfs("/sys/fs/bpf", &st) != 0 || st.f_type != BPF_FS_MAGIC)
        run_command_ok("mount -t bpf bpf /sys/fs/bpf");
    static const bool swept = [] {
        // labs of killed runs of any suite: their owner pid is gone
        std::istringstream out(lab_sh("sweep"));
        for (std::string line; std::getline(out, line);)
            std::printf("[ cleanup  ] %s\n", line.c_str());
        return true;
    }();
    (void)swept;
}

}  // namespace

std::string xlbd_path() { return env_or("XLBD", XLBD_PATH); }

Lab::Lab() {
    static std::atomic<unsigned> counter{0};
    const unsigned n = counter++ % (26 * 26);
    prefix_ = "t" + std::to_string(::getpid()) + static_cast<char>('a' + n / 26) +
              static_cast<char>('a' + n % 26);
}

Lab::~Lab() {
    if (!up_) return;
    CommandResult r = run_command(std::string(XLB_LAB_SH) + " down --prefix " + prefix_);
    if (r.rc != 0)
        std::fprintf(stderr, "lab %s: down failed:\n%s\n", prefix_.c_str(), r.out.c_str());
}

void Lab::up(const LabOptions& o) {
    prepare_host_once();
    std::string args =
        "up --owner " + std::to_string(::getpid()) + " --backends " + std::to_string(o.backends);
    if (!o.client) args += " --no-client";
    for (const std::string& e : o.extra) args += " " + quote(e);
    up_ = true;  // a failed up removes itself, but down is harmless
    script(args);
}

std::string Lab::script(const std::string& args) const {
    return lab_sh(args + " --prefix " + prefix_);
}

// ---- the agent -------------------------------------------------------------------

AgentProcess::AgentProcess(std::string ns, std::string config_path, std::string log_path,
                           std::string xlbd)
    : ns_(std::move(ns)),
      config_path_(std::move(config_path)),
      log_path_(std::move(log_path)),
      xlbd_(std::move(xlbd)) {}

AgentProcess::~AgentProcess() { kill9(); }

void AgentProcess::start(const std::vector<std::string>& extra_args) {
    if (pid_ > 0) throw std::runtime_error("xlbd is already running");
    const std::string ns_path = "/run/netns/" + ns_;
    const int ns = ::open(ns_path.c_str(), O_RDONLY | O_CLOEXEC);
    if (ns < 0) throw std::runtime_error("open " + ns_path + ": " + std::strerror(errno));
    const int log = ::open(log_path_.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (log < 0) {
        const int err = errno;
        ::close(ns);
        throw std::runtime_error("open " + log_path_ + ": " + std::strerror(err));
    }
    ++starts_;
    const std::string marker = "===== test: xlbd start #" + std::to_string(starts_) + " =====\n";
    if (::write(log, marker.data(), marker.size()) < 0) {
        // the marker only helps reading the log
    }

    std::vector<std::string> args{xlbd_, "--config", config_path_};
    args.insert(args.end(), extra_args.begin(), extra_args.end());
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    const pid_t parent = ::getpid();

    const pid_t pid = ::fork();
    if (pid == 0) {
        // child: only async-signal-safe calls until exec
        ::prctl(PR_SET_PDEATHSIG, SIGKILL);  // the agent never outlives the test
        if (::getppid() != parent) ::_exit(125);
        if (::setns(ns, CLONE_NEWNET) != 0) ::_exit(126);
        ::dup2(log, STDOUT_FILENO);
        ::dup2(log, STDERR_FILENO);
        const int devnull = ::open("/dev/null", O_RDONLY);
        if (devnull >= 0) ::dup2(devnull, STDIN_FILENO);
        sigset_t none;
        sigemptyset(&none);
        ::sigprocmask(SIG_SETMASK, &none, nullptr);
        ::signal(SIGPIPE, SIG_DFL);
        ::execv(argv[0], argv.data());
        ::_exit(127);
    }
    const int err = errno;
    ::close(ns);
    ::close(log);
    if (pid < 0) throw std::runtime_error("fork: " + std::string(std::strerror(err)));
    pid_ = pid;
}

bool AgentProcess::running() {
    if (pid_ <= 0) return false;
    int status = 0;
    const pid_t r = ::waitpid(pid_, &status, WNOHANG);
    if (r == pid_ || (r < 0 && errno == ECHILD)) {
        pid_ = -1;
        return false;
    }
    return true;
}

void AgentProcess::signal(int sig) {
    if (pid_ > 0) ::kill(pid_, sig);
}

std::optional<int> AgentProcess::wait_exit(std::chrono::milliseconds timeout) {
    if (pid_ <= 0) return std::nullopt;
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    while (true) {
        int status = 0;
        const pid_t r = ::waitpid(pid_, &status, WNOHANG);
        if (r == pid_) {
            pid_ = -1;
            if (WIFEXITED(status)) return WEXITSTATUS(status);
            if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
            return -1;
        }
        if (r < 0) {
            pid_ = -1;
            return -1;
        }
        if (std::chrono::steady_clock::now() > deadline) return std::nullopt;
        std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
}

void AgentProcess::kill9() {
    if (pid_ <= 0) return;
    ::kill(pid_, SIGKILL);
    int status = 0;
    ::waitpid(pid_, &status, 0);
    pid_ = -1;
}

std::string AgentProcess::log() const {
    std::ifstream in(log_path_, std::ios::binary);
    std::stringstream buf;
    buf << in.rdbuf();
    return buf.str();
}

}  // namespace xlb::test
