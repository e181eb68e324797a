// SPDX-License-Identifier: Apache-2.0
#include "lab.h"

#include <arpa/inet.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <fcntl.h>
#include <httplib.h>
#include <net/if.h>
#include <netinet/in.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>

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
      << "encap_source: {ipv4: " << Lab::kLbAddr << ", ipv6: \"" << Lab::kLbAddr6 << "\"}\n"
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

std::uint32_t Lab::xdp_prog_id() const {
    return in_netns(lb_ns(), [] {
        const unsigned ifindex = ::if_nametoindex(kLbIf);
        if (ifindex == 0) throw std::runtime_error(std::string("no interface ") + kLbIf);
        LIBBPF_OPTS(bpf_xdp_query_opts, q);
        if (int rc = bpf_xdp_query(static_cast<int>(ifindex), 0, &q); rc != 0)
            throw std::runtime_error("bpf_xdp_query: " + std::string(std::strerror(-rc)));
        return q.drv_prog_id ? q.drv_prog_id : q.skb_prog_id;
    });
}

std::unique_ptr<Lab> new_lab_up() {
    auto lab = std::make_unique<Lab>();
    lab->up();
    return lab;
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
                    if (id == 0)
                        ++report_.none;
                    else if (report_.ids.empty() || report_.ids.back() != id)
                        report_.ids.push_back(id);
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

CmdResult run_xlbd(const Lab& lab, const std::vector<std::string>& args,
                   std::chrono::milliseconds timeout) {
    std::string cmd = "timeout " + std::to_string(timeout.count() / 1000 + 1) +
                      " nsenter --net=/run/netns/" + lab.lb_ns() + " " + test::xlbd_path();
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

void wait_agent_ready(AgentProcess& agent, const Api& api, std::chrono::milliseconds timeout) {
    const auto deadline = Clock::now() + timeout;
    Reply last;
    while (Clock::now() < deadline) {
        if (!agent.running()) throw std::runtime_error("xlbd exited before it was ready");
        last = api.get("/v1/status");
        if (last.status == 200 && last.body.is_object() && last.body.value("ready", false)) return;
        std::this_thread::sleep_for(10ms);
    }
    throw std::runtime_error("xlbd not ready after " + std::to_string(timeout.count()) +
                             " ms; last /v1/status: " + std::to_string(last.status) + " " +
                             last.text);
}

}  // namespace xlb::e2e
