// SPDX-License-Identifier: Apache-2.0
#include "lab.h"

#include <arpa/inet.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <fcntl.h>
#include <net/if.h>
#include <netinet/in.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/wait.h>
#include <unistd.h>

#include <linux/magic.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <httplib.h>
#include <regex>
#include <sstream>
#include <stdexcept>

#ifndef XLBD_PATH
#error "XLBD_PATH must name the xlbd binary"
#endif

namespace xlb::e2e {

namespace fs = std::filesystem;

std::string read_file(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    std::stringstream buf;
    buf << in.rdbuf();
    return buf.str();
}

void write_file(const std::string& path, const std::string& text) {
    // write beside and rename, as an operator's editor would
    const std::string tmp = path + ".new";
    {
        std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
        out << text;
        if (!out) throw std::runtime_error("cannot write " + tmp);
    }
    fs::rename(tmp, path);
}

std::string render_settings(const Lab& lab, const std::string& writer, const LabSettings& s) {
    std::ostringstream y;
    y << "# SPDX-License-Identifier: Apache-2.0\n"
      << "# written by " << writer << " for lab " << lab.prefix() << "\n"
      << "interface: " << Lab::kLbIf << "\n"
      << "xdp_mode: native\n"
      << "next_hop: {address: " << Lab::kRouterAddr << "}\n"
      << "encap_source: {ipv4: 203.0.113.1, ipv6: \"2001:db8:e::1\"}\n"
      << "hash_seed: " << s.hash_seed << "\n"
      << "maps: {max_vips: " << s.max_vips << ", max_backends: " << s.max_backends
      << ", conntrack_entries: " << s.conntrack_entries << "}\n"
      << "api: {socket: " << lab.tmp() << "/run/xlbd.sock}\n"
      << "metrics: {listen: \"127.0.0.1:" << s.metrics_port << "\"}\n"
      << "state_file: " << lab.tmp() << "/state/state.json\n"
      << "pin_dir: " << lab.pin_dir() << "\n"
      << "vips:\n";
    return y.str();
}

double ms_since(Clock::time_point start) {
    return std::chrono::duration<double, std::milli>(Clock::now() - start).count();
}

// ---- namespaces ------------------------------------------------------------------

// ---- servers in the namespaces (health checks) ----------------------------------

void add_router_addresses(const Lab& lab, const std::vector<std::string>& addresses) {
    for (const std::string& a : addresses) {
        run_ok("ip -n " + lab.router_ns() + " addr add " + a + "/32 dev lo");
        run_ok("ip -n " + lab.lb_ns() + " route add " + a + "/32 via " + Lab::kRouterAddr);
    }
}

TcpServer::TcpServer(std::string ns, std::string address, std::uint16_t port)
    : ns_(std::move(ns)), address_(std::move(address)), port_(port) {}

TcpServer::~TcpServer() { stop(); }

void TcpServer::start() {
    if (listening()) return;
    // the socket belongs to the namespace it is created in, whatever thread uses it later
    listener_ = in_netns(ns_, [this] {
        bpf::UniqueFd fd(::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
        if (!fd) throw std::runtime_error("socket: " + std::string(std::strerror(errno)));
        const int one = 1;
        ::setsockopt(fd.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
        sockaddr_in sa{};
        sa.sin_family = AF_INET;
        sa.sin_port = htons(port_);
        if (::inet_pton(AF_INET, address_.c_str(), &sa.sin_addr) != 1)
            throw std::runtime_error("TcpServer: not an IPv4 address: " + address_);
        if (::bind(fd.get(), reinterpret_cast<sockaddr*>(&sa), sizeof(sa)) != 0)
            throw std::runtime_error("bind " + name() + " in " + ns_ + ": " + std::strerror(errno));
        if (::listen(fd.get(), 512) != 0)
            throw std::runtime_error("listen " + name() + ": " + std::strerror(errno));
        return fd;
    });
    stop_ = false;
    thread_ = std::thread([this] {
        pollfd p{listener_.get(), POLLIN, 0};
        while (!stop_) {
            if (::poll(&p, 1, 50) <= 0) continue;
            while (true) {
                bpf::UniqueFd conn(::accept4(listener_.get(), nullptr, nullptr, SOCK_CLOEXEC));
                if (!conn) break;
                ++accepted_;
            }
        }
    });
}

void TcpServer::stop() {
    if (!thread_.joinable()) return;
    stop_ = true;
    thread_.join();
    listener_.reset();  // from here on a SYN is answered with a reset
}

// ---- the lab -------------------------------------------------------------------

namespace {
std::atomic<int> g_lab_counter{0};
}

Lab::Lab() {
    prefix_ = "xlbe-" + std::to_string(::getpid()) + "-" + std::to_string(g_lab_counter++);
    lb_ns_ = prefix_ + "-lb";
    router_ns_ = prefix_ + "-rt";
    pin_dir_ = "/sys/fs/bpf/" + prefix_;
}

void Lab::up() {
    std::string tmpl = "/tmp/" + prefix_ + "-XXXXXX";
    if (!::mkdtemp(tmpl.data())) throw std::runtime_error("mkdtemp: " + std::string(std::strerror(errno)));
    tmp_ = tmpl;
    tmp_made_ = true;

    const std::string lb = "ip -n " + lb_ns_ + " ", rt = "ip -n " + router_ns_ + " ";
    run_ok("ip netns add " + lb_ns_);
    run_ok("ip netns add " + router_ns_);
    run_ok(lb + "link set lo up");
    run_ok(rt + "link set lo up");
    // created directly inside the namespaces: no name clash with anything else
    run_ok("ip link add " + std::string(kLbIf) + " netns " + lb_ns_ + " type veth peer name " +
           kRouterIf + " netns " + router_ns_);
    run_ok(lb + "addr add " + kLbAddr + "/24 dev " + kLbIf);
    run_ok(rt + "addr add " + kRouterAddr + "/24 dev " + kRouterIf);
    run_ok(lb + "link set " + kLbIf + " up");
    run_ok(rt + "link set " + kRouterIf + " up");
    // the router sends VIP traffic to the LB (never on-link)
    run_ok(rt + "route add 198.51.100.0/24 via " + kLbAddr);

    if (::mkdir(pin_dir_.c_str(), 0700) != 0)
        throw std::runtime_error("mkdir " + pin_dir_ + ": " + std::strerror(errno));
    pin_made_ = true;
}

Lab::~Lab() {
    // processes left in the namespaces keep them alive
    for (const std::string& ns : {lb_ns_, router_ns_}) {
        CmdResult pids = run("ip netns pids " + ns);
        if (pids.rc != 0) continue;
        std::istringstream in(pids.out);
        pid_t pid;
        while (in >> pid)
            if (pid > 1 && pid != ::getpid()) ::kill(pid, SIGKILL);
    }
    run("ip -n " + lb_ns_ + " link set " + kLbIf + " xdp off");
    run("ip -n " + lb_ns_ + " link set " + kLbIf + " xdpgeneric off");
    run("ip netns del " + lb_ns_);
    run("ip netns del " + router_ns_);
    std::error_code ec;
    if (pin_made_) {
        fs::remove_all(pin_dir_, ec);
        if (ec) std::fprintf(stderr, "e2e: remove %s: %s\n", pin_dir_.c_str(), ec.message().c_str());
    }
    if (tmp_made_) fs::remove_all(tmp_, ec);
}

std::uint32_t Lab::xdp_prog_id() const {
    return in_netns(lb_ns_, [] {
        const unsigned ifindex = ::if_nametoindex(kLbIf);
        if (ifindex == 0) throw std::runtime_error("no interface xa0");
        LIBBPF_OPTS(bpf_xdp_query_opts, q);
        if (int rc = bpf_xdp_query(static_cast<int>(ifindex), 0, &q); rc != 0)
            throw std::runtime_error("bpf_xdp_query: " + std::string(std::strerror(-rc)));
        return q.drv_prog_id ? q.drv_prog_id : q.skb_prog_id;
    });
}

std::unique_ptr<Lab> new_lab_up() {
    struct statfs st {};
    if (::statfs("/sys/fs/bpf", &st) != 0 || st.f_type != BPF_FS_MAGIC) run_ok("mount -t bpf bpf /sys/fs/bpf");
    static const bool swept = [] {
        for (const std::string& what : sweep_stale_labs())
            std::printf("[ cleanup  ] removed %s, left by a killed earlier run\n", what.c_str());
        return true;
    }();
    (void)swept;
    auto lab = std::make_unique<Lab>();
    lab->up();
    return lab;
}

std::vector<std::string> sweep_stale_labs() {
    static const std::regex name(R"(^xlbe-([0-9]+)-[0-9]+(-.*)?$)");
    auto stale = [](const std::string& n) {
        std::smatch m;
        if (!std::regex_match(n, m, name)) return false;
        const pid_t pid = static_cast<pid_t>(std::stol(m[1].str()));
        return pid != ::getpid() && ::kill(pid, 0) != 0 && errno == ESRCH;
    };
    std::vector<std::string> removed;
    std::istringstream list(run("ip netns list").out);
    for (std::string line; std::getline(list, line);) {
        const std::string ns = line.substr(0, line.find(' '));
        if (!stale(ns)) continue;
        std::istringstream pids(run("ip netns pids " + ns).out);
        for (pid_t pid; pids >> pid;)
            if (pid > 1) ::kill(pid, SIGKILL);
        if (run("ip netns del " + ns).rc == 0) removed.push_back("netns " + ns);
    }
    std::error_code ec;
    for (const char* dir : {"/sys/fs/bpf", "/tmp"}) {
        for (const auto& entry : fs::directory_iterator(dir, ec)) {
            const std::string n = entry.path().filename().string();
            if (!stale(n) || !entry.is_directory(ec)) continue;
            if (fs::remove_all(entry.path(), ec) > 0 && !ec) removed.push_back(entry.path().string());
        }
    }
    return removed;
}

XdpWatch::XdpWatch(const Lab& lab) {
    thread_ = std::thread([this, ns = lab.lb_ns()] {
        try {
            NetnsScope scope(ns);
            const int ifindex = static_cast<int>(::if_nametoindex(Lab::kLbIf));
            do {
                LIBBPF_OPTS(bpf_xdp_query_opts, q);
                ++report_.polls;
                if (ifindex == 0 || bpf_xdp_query(ifindex, 0, &q) != 0) {
                    ++report_.errors;
                } else {
                    const std::uint32_t id = q.drv_prog_id ? q.drv_prog_id : q.skb_prog_id;
                    if (id == 0) ++report_.none;
                    else if (report_.ids.empty() || report_.ids.back() != id) report_.ids.push_back(id);
                }
                started_.store(true);
            } while (!stop_.load(std::memory_order_relaxed));
        } catch (const std::exception& e) {
            std::fprintf(stderr, "e2e: XDP watch: %s\n", e.what());
            ++report_.errors;
            started_.store(true);
        }
    });
    while (!started_.load()) std::this_thread::sleep_for(100us);
}

XdpWatch::~XdpWatch() {
    stop_ = true;
    if (thread_.joinable()) thread_.join();
}

XdpWatch::Report XdpWatch::stop() {
    stop_ = true;
    if (thread_.joinable()) thread_.join();
    return report_;
}

// ---- the agent -------------------------------------------------------------------

AgentProcess::AgentProcess(const Lab& lab, std::string config_path, std::string log_path)
    : lab_(lab), config_path_(std::move(config_path)), log_path_(std::move(log_path)) {}

AgentProcess::~AgentProcess() { kill9(); }

void AgentProcess::start(const std::vector<std::string>& extra_args) {
    if (pid_ > 0) throw std::runtime_error("xlbd is already running");
    const std::string ns_path = "/run/netns/" + lab_.lb_ns();
    bpf::UniqueFd ns(::open(ns_path.c_str(), O_RDONLY | O_CLOEXEC));
    if (!ns) throw std::runtime_error("open " + ns_path + ": " + std::strerror(errno));
    bpf::UniqueFd log(::open(log_path_.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644));
    if (!log) throw std::runtime_error("open " + log_path_ + ": " + std::strerror(errno));
    ++starts_;
    const std::string marker = "===== e2e: xlbd start #" + std::to_string(starts_) + " =====\n";
    if (::write(log.get(), marker.data(), marker.size()) < 0) {
        // the marker only helps reading the log
    }

    std::vector<std::string> args{XLBD_PATH, "--config", config_path_};
    args.insert(args.end(), extra_args.begin(), extra_args.end());
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    const pid_t parent = ::getpid();

    const pid_t pid = ::fork();
    if (pid < 0) throw std::runtime_error("fork: " + std::string(std::strerror(errno)));
    if (pid == 0) {
        // child: only async-signal-safe calls until exec
        ::prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (::getppid() != parent) ::_exit(125);
        if (::setns(ns.get(), CLONE_NEWNET) != 0) ::_exit(126);
        ::dup2(log.get(), STDOUT_FILENO);
        ::dup2(log.get(), STDERR_FILENO);
        const int devnull = ::open("/dev/null", O_RDONLY);
        if (devnull >= 0) ::dup2(devnull, STDIN_FILENO);
        sigset_t none;
        sigemptyset(&none);
        ::sigprocmask(SIG_SETMASK, &none, nullptr);
        ::signal(SIGPIPE, SIG_DFL);
        ::execv(argv[0], argv.data());
        ::_exit(127);
    }
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
    const auto deadline = Clock::now() + timeout;
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
        if (Clock::now() > deadline) return std::nullopt;
        std::this_thread::sleep_for(2ms);
    }
}

void AgentProcess::kill9() {
    if (pid_ <= 0) return;
    ::kill(pid_, SIGKILL);
    int status = 0;
    ::waitpid(pid_, &status, 0);
    pid_ = -1;
}

CmdResult run_xlbd(const Lab& lab, const std::vector<std::string>& args,
                   std::chrono::milliseconds timeout) {
    std::string cmd = "timeout " + std::to_string(timeout.count() / 1000 + 1) + " nsenter --net=/run/netns/" +
                      lab.lb_ns() + " " + XLBD_PATH;
    for (const auto& a : args) cmd += " '" + a + "'";
    return run(cmd);
}

// ---- HTTP ----------------------------------------------------------------------

namespace {

Reply to_reply(const httplib::Result& r) {
    Reply out;
    if (!r) {
        out.text = "no answer: " + httplib::to_string(r.error());
        return out;
    }
    out.status = r->status;
    out.text = r->body;
    out.content_type = r->get_header_value("Content-Type");
    out.body = json::parse(r->body, nullptr, false);
    return out;
}

std::unique_ptr<httplib::Client> unix_client(const std::string& socket) {
    auto c = std::make_unique<httplib::Client>(socket);
    c->set_address_family(AF_UNIX);
    c->set_connection_timeout(2s);
    c->set_read_timeout(30s);
    c->set_write_timeout(5s);
    return c;
}

}  // namespace

Reply Api::get(const std::string& path) const { return to_reply(unix_client(socket_)->Get(path)); }

Reply Api::patch(const std::string& path, const std::string& body) const {
    return to_reply(unix_client(socket_)->Patch(path, body, "application/json"));
}

Reply Api::post(const std::string& path, const std::string& body) const {
    return to_reply(unix_client(socket_)->Post(path, body, "application/json"));
}

Reply http_get_in_netns(const std::string& ns, const std::string& host, int port,
                        const std::string& path) {
    return in_netns(ns, [&] {
        httplib::Client c(host, port);
        c.set_connection_timeout(2s);
        c.set_read_timeout(10s);
        return to_reply(c.Get(path));
    });
}

// ---- pinned maps -----------------------------------------------------------------

bpf::UniqueFd open_pinned(const std::string& path) {
    bpf::UniqueFd fd(bpf_obj_get(path.c_str()));
    if (!fd) throw std::runtime_error("bpf_obj_get " + path + ": " + std::strerror(errno));
    return fd;
}

std::uint32_t map_id(int fd) {
    bpf_map_info info{};
    __u32 len = sizeof(info);
    if (bpf_obj_get_info_by_fd(fd, &info, &len) != 0)
        throw std::runtime_error("bpf_obj_get_info_by_fd: " + std::string(std::strerror(errno)));
    return info.id;
}

}  // namespace xlb::e2e
