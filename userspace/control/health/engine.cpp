// SPDX-License-Identifier: Apache-2.0
// The probe engine: one thread, one epoll instance. A slot is one probe,
// serving every (VIP, backend) target checked alike (shared probes), with its
// kept HTTP connection between probes. Due times are a binary heap of (when,
// slot, generation); deadlines, one queue per timeout (probes with the same
// timeout end in the order they started). Both cancel lazily: a slot's
// generation moves on when its schedule or its probe is replaced, and entries
// that no longer match are dropped when they surface (a spare wake-up, no
// more). ProbeIo::wait() (epoll_pwait2() in the real one) sleeps until the
// earliest timer, rounded up to Options::timer_resolution so that probes due
// close together start in one wake-up (no timerfd re-arming per probe; in a
// VM a wake-up costs as much as the probe's own system calls). Epoll events
// carry (slot, connection generation) for the same reason as the timers.
// Every clock reading and socket call goes through ProbeIo (probe_io.h), the
// tests' seam.
#include "xlb/health/engine.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <sys/resource.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstring>
#include <ctime>
#include <deque>
#include <functional>
#include <map>
#include <mutex>
#include <random>
#include <span>
#include <system_error>
#include <thread>

#include "format.h"
#include "tls.h"
#include "xlb/health/http.h"
#include "xlb/health/probe_io.h"

#ifndef IP_BIND_ADDRESS_NO_PORT
#define IP_BIND_ADDRESS_NO_PORT 24
#endif

namespace xlb::health {

namespace {

using config::HealthCheckType;
using config::speaks_http;
using detail::human;
using detail::TlsContext;
using detail::TlsSession;

// read_plain() and write_plain(): the TLS layer failed (TlsSession::reason()).
constexpr ssize_t kTlsFailed = -(1 << 20);

constexpr std::size_t kScratch = 64 * 1024;

struct Mapped {
    Failure failure;
    std::string detail;
};

// The errnos with a fixed verdict and wording.
struct KnownErrno {
    int err;
    Failure failure;
    const char* detail;
};
constexpr KnownErrno kKnownErrnos[] = {
    {ECONNRESET, Failure::kReset, "connection reset"},
    {EPIPE, Failure::kReset, "connection reset (broken pipe)"},
    {ETIMEDOUT, Failure::kTimeout, "timed out (kernel)"},
    {EHOSTUNREACH, Failure::kUnreachable, "host unreachable"},
    {ENETUNREACH, Failure::kUnreachable, "network unreachable"},
    {EHOSTDOWN, Failure::kUnreachable, "host down"},
    {ENETDOWN, Failure::kUnreachable, "network down"},
};

Mapped map_errno(int err, bool udp) {
    for (const KnownErrno& k : kKnownErrnos)
        if (k.err == err) return {k.failure, k.detail};
    switch (err) {
        case ECONNREFUSED:
            return {Failure::kRefused, udp ? "port unreachable" : "connection refused"};
        case EACCES:
        case EPERM: return {Failure::kUnreachable, std::string("blocked: ") + std::strerror(err)};
        case EMFILE:
        case ENFILE:
        case ENOBUFS:
        case ENOMEM:
        case EADDRNOTAVAIL:
        case EADDRINUSE:
        case EAGAIN:
            return {Failure::kLocal, std::string("could not probe: ") + std::strerror(err)};
        default: return {Failure::kUnreachable, std::strerror(err)};
    }
}

socklen_t to_sockaddr(const net::IpAddress& a, std::uint16_t port, sockaddr_storage& out) {
    std::memset(&out, 0, sizeof(out));
    if (a.is_v4()) {
        auto* sin = reinterpret_cast<sockaddr_in*>(&out);
        sin->sin_family = AF_INET;
        sin->sin_port = htons(port);
        std::memcpy(&sin->sin_addr, a.bytes.data(), 4);
        return sizeof(sockaddr_in);
    }
    auto* sin6 = reinterpret_cast<sockaddr_in6*>(&out);
    sin6->sin6_family = AF_INET6;
    sin6->sin6_port = htons(port);
    std::memcpy(&sin6->sin6_addr, a.bytes.data(), 16);
    return sizeof(sockaddr_in6);
}

std::uint64_t splitmix(std::uint64_t& state) {
    std::uint64_t z = (state += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

}  // namespace

struct ProbeEngine::Impl {
    enum class Phase : std::uint8_t { kIdle, kConnecting, kHandshaking, kSending, kReceiving };
    enum class TimerKind : std::uint8_t { kDue, kDeadline };

    // One probe: every (VIP, backend) target it serves (shared probes,
    // targets.h group_probes) and, between probes, a kept HTTP connection.
    // What every probe reads comes first, in two cache lines, with the
    // check's settings it needs copied there: 10,000 slots are megabytes, and
    // each probe would otherwise miss the cache on every line it touches.
    struct alignas(64) Slot {
        bool active = false;
        Phase phase = Phase::kIdle;
        bool reused = false;  // the probe in flight runs on a kept connection
        HealthCheckType type = HealthCheckType::kNone;
        bool reuse_connection = false;
        bool watched = false;  // fd is set up and in the epoll set: a tcp socket may be reused
        std::uint32_t sched_gen = 0;
        std::uint32_t probe_gen = 0;
        std::uint32_t conn_gen = 0;  // tags fd's events; moves on when fd is closed
        // The probe in flight (phase not kIdle), or with phase kIdle and
        // fd >= 0, a connection kept for the next probe (reuse_connection).
        int fd = -1;
        TimePoint due{};
        TimePoint scheduled{};
        TimePoint started{};
        TimePoint connected_at{};  // when fd was opened: reuse_limit counts from it
        Clock::duration interval{}, jitter{}, timeout{}, reuse_limit{};
        std::size_t sent = 0;
        std::uint32_t mark = 0;  // the target's SO_MARK (through the VIP); 0: the engine's
        socklen_t addr_len = 0;
        sockaddr_in6 addr{};  // an IPv4 destination is a sockaddr_in in it
        // The rest, read when a probe ends, by http probes, or when targets
        // change: apart, so that the slots' array stays small.
        struct Cold {
            ProbeTarget target;         // the first subscriber's; the probe part is common to all
            config::HealthCheck probe;  // probe_part(target.check)
            ProbeEndpoint endpoint;
            // Every target the probe serves, in the order set_targets() gave them.
            std::shared_ptr<const std::vector<TargetKey>> subscribers;
            std::string request;  // http, https
            std::optional<HttpResponseReader> reader;
            // https: how certificates are checked (null: tls_error says why
            // it could not be set up), the name sent and verified, and the
            // session on fd (kept with it between probes).
            std::shared_ptr<const TlsContext> tls_context;
            std::string tls_error;
            std::string tls_name;
            std::unique_ptr<TlsSession> tls;
        };
        std::unique_ptr<Cold> cold = std::make_unique<Cold>();
    };

    struct Timer {
        TimePoint when;
        std::uint32_t slot;
        std::uint32_t gen;
        TimerKind kind;
        bool operator>(const Timer& o) const { return when > o.when; }
    };

    struct Call {
        TimePoint when;
        std::uint64_t seq;
        std::function<void()> fn;
    };
    struct CallLater {
        bool operator()(const Call& a, const Call& b) const {
            return a.when != b.when ? a.when > b.when : a.seq > b.seq;
        }
    };

    Impl(Options o, ResultHandler h, ProbeIo* given)
        : opt(std::move(o)),
          on_result(std::move(h)),
          owned_io(given ? nullptr : system_probe_io()),
          io(given ? given : owned_io.get()) {
        rng = opt.seed;
        if (rng == 0) {
            std::random_device rd;
            rng = (static_cast<std::uint64_t>(rd()) << 32) ^ rd();
        }
        if (opt.max_in_flight == 0) {
            rlimit rl{};
            std::size_t limit = 1024;
            if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY) {
                limit = static_cast<std::size_t>(rl.rlim_cur);
            } else if (rl.rlim_cur == RLIM_INFINITY) {
                limit = 1 << 20;
            }
            max_in_flight = std::max<std::size_t>(64, limit > 256 ? limit - 256 : 0);
        } else {
            max_in_flight = opt.max_in_flight;
        }
        scratch.resize(kScratch);
    }

    // Probes still in flight (an engine driven by run_once(), never started)
    // are abandoned; after loop() there are none. io outlives the engine.
    ~Impl() {
        for (Slot& s : slots) abandon(s);
    }

    // --- Shared with other threads -------------------------------------------
    Options opt;
    ResultHandler on_result;
    std::unique_ptr<ProbeIo> owned_io;  // the system's, unless one was given
    ProbeIo* io;
    bool opened = false;  // io->open() succeeded (set before the thread starts)
    std::thread thread;
    std::mutex thread_mu;  // guards `thread` for cpu_time()
    std::atomic<bool> stopping{false};
    std::mutex mu;
    std::optional<std::vector<ProbeTarget>> pending_targets;
    std::vector<Call> pending_calls;
    std::atomic<std::uint64_t> st_targets{0}, st_probes{0}, st_started{0}, st_results{0},
        st_in_flight{0}, st_waiting{0}, st_kept{0}, st_reused{0};
    std::atomic<std::int64_t> final_cpu_ns{0};

    // --- Engine thread only -------------------------------------------------------
    std::uint64_t rng = 0;
    std::size_t max_in_flight = 0;
    std::vector<Slot> slots;
    std::vector<std::uint32_t> free_slots;
    std::map<TargetKey, std::uint32_t> index;  // every subscriber's slot
    std::map<ProbeEndpoint, std::vector<std::uint32_t>> by_endpoint;
    std::vector<Timer> timers;                               // min-heap: kDue
    std::map<Clock::duration, std::deque<Timer>> deadlines;  // kDeadline, by timeout
    std::vector<Call> calls;                                 // min-heap
    std::uint64_t call_seq = 0;
    std::deque<std::pair<std::uint32_t, std::uint32_t>> waiting;  // (slot, sched_gen)
    std::size_t in_flight = 0;
    std::size_t kept = 0;  // sockets kept between probes (http connections, tcp sockets)
    std::vector<char> scratch;
    // TLS contexts by (verify, ca_file), made once per set of targets (every
    // slot's, set_tls): a CA file replaced on disk is read again at the next
    // configuration change.
    std::map<std::pair<bool, std::string>, std::shared_ptr<const TlsContext>> tls_contexts;

    void wake() { io->wake(); }

    double uniform() { return static_cast<double>(splitmix(rng) >> 11) * 0x1.0p-53; }

    Clock::duration random_upto(Clock::duration d) {
        if (d <= Clock::duration::zero()) return Clock::duration::zero();
        return Clock::duration(static_cast<Clock::rep>(uniform() * static_cast<double>(d.count())));
    }

    void push_timer(TimePoint when, std::uint32_t slot, std::uint32_t gen, TimerKind kind) {
        timers.push_back(Timer{when, slot, gen, kind});
        std::push_heap(timers.begin(), timers.end(), std::greater<>{});
    }

    // Probes with the same timeout end in the order they started: their
    // deadlines are a queue per timeout (O(1), no heap work per probe).
    void push_deadline(std::uint32_t i, const Slot& s) {
        deadlines[s.timeout].push_back(
            Timer{s.started + s.timeout, i, s.probe_gen, TimerKind::kDeadline});
    }

    // The queue whose first deadline is the earliest, if one is due by `now`.
    std::deque<Timer>* earliest_deadline(TimePoint now) {
        std::deque<Timer>* first = nullptr;
        for (auto& [timeout, q] : deadlines) {
            if (!q.empty() && q.front().when <= now &&
                (!first || q.front().when < first->front().when))
                first = &q;
        }
        return first;
    }

    void schedule(std::uint32_t i, TimePoint due) {
        Slot& s = slots[i];
        s.due = due;
        ++s.sched_gen;
        push_timer(due, i, s.sched_gen, TimerKind::kDue);
    }

    // --- Targets ----------------------------------------------------------------

    void prepare(Slot& s, ProbeTarget t) {
        s.cold->target = std::move(t);
        s.cold->probe = probe_part(s.cold->target.check);
        s.cold->endpoint = probe_endpoint(s.cold->target);
        sockaddr_storage addr;
        s.addr_len = to_sockaddr(s.cold->target.destination(), s.cold->target.port, addr);
        std::memcpy(&s.addr, &addr, s.addr_len);
        const config::HealthCheck& check = s.cold->target.check;
        s.type = check.type;
        s.mark = s.cold->target.mark;
        s.reuse_connection = check.reuse_connection;
        s.interval = std::chrono::duration_cast<Clock::duration>(check.interval);
        s.jitter = std::chrono::duration_cast<Clock::duration>(check.jitter);
        s.timeout = std::chrono::duration_cast<Clock::duration>(check.timeout);
        s.reuse_limit = std::chrono::duration_cast<Clock::duration>(check.reuse_limit);
        s.cold->request =
            speaks_http(check.type)
                ? http_request(check, s.cold->target.destination(), s.cold->target.port)
                : std::string();
        set_tls(s);
    }

    // The slot's TLS context from this set of targets' contexts (made again
    // at every configuration change, so a CA file replaced on disk is read
    // again). A kept connection verified under a context that trusted
    // something else (the CA file changed on disk) is closed: its next probe
    // verifies the backend against the CA file as it is now.
    void set_tls(Slot& s) {
        const config::HealthCheck& check = s.cold->target.check;
        std::shared_ptr<const TlsContext> before = std::move(s.cold->tls_context);
        s.cold->tls_context.reset();
        s.cold->tls_error.clear();
        s.cold->tls_name.clear();
        if (check.type != HealthCheckType::kHttps) return;
        s.cold->tls_name = detail::tls_server_name(check);
        const auto key = std::make_pair(check.verify, check.ca_file);
        if (auto it = tls_contexts.find(key); it != tls_contexts.end()) {
            s.cold->tls_context = it->second;
        } else if (auto made = TlsContext::make(check.verify, check.ca_file)) {
            s.cold->tls_context = tls_contexts[key] = *made;
        } else {
            s.cold->tls_error = made.error().message();
        }
        const auto& now = s.cold->tls_context;
        if (before && (!now || !before->same_trust(*now)) && !busy(s)) close_connection(s);
    }

    bool busy(const Slot& s) const { return s.phase != Phase::kIdle; }

    // Closes the slot's socket (a probe's or a kept one) with a reset: this
    // side closing first would otherwise keep a TIME_WAIT.
    void close_connection(Slot& s) {
        if (s.fd < 0) return;
        if (!busy(s)) {
            --kept;
            st_kept = kept;
        }
        set_abortive(s.fd);
        s.cold->tls.reset();
        io->close(s.fd);
        s.fd = -1;
        s.watched = false;
        ++s.conn_gen;
    }

    void abandon(Slot& s) {
        if (busy(s)) --in_flight;
        close_connection(s);
        s.phase = Phase::kIdle;
        s.cold->reader.reset();
        ++s.probe_gen;
    }

    void release(std::uint32_t i) {
        Slot& s = slots[i];
        abandon(s);
        s.active = false;
        ++s.sched_gen;
        s.cold->target = ProbeTarget{};
        s.cold->probe = config::HealthCheck{};
        s.cold->subscribers.reset();
        s.cold->request.clear();
        s.cold->tls_context.reset();
        free_slots.push_back(i);
    }

    std::uint32_t new_slot() {
        if (!free_slots.empty()) {
            const std::uint32_t i = free_slots.back();
            free_slots.pop_back();
            return i;
        }
        slots.emplace_back();
        return static_cast<std::uint32_t>(slots.size() - 1);
    }

    // Targets probed alike, whichever VIP they belong to, share one slot
    // (group_probes). A slot probed as before keeps its schedule, its probe
    // in flight and its kept connection, whatever else its subscribers'
    // checks say (thresholds are the state machines'); a target whose probe
    // changed moves to a slot of its own, next probed no later than one new
    // interval from now; a slot left without subscribers is closed.
    void apply_targets(std::vector<ProbeTarget> targets, TimePoint now) {
        const std::vector<std::vector<std::size_t>> groups = group_probes(targets);
        tls_contexts.clear();
        std::vector<bool> claimed(slots.size(), false);
        std::map<TargetKey, std::uint32_t> next;
        std::map<ProbeEndpoint, std::vector<std::uint32_t>> next_by_endpoint;
        for (const std::vector<std::size_t>& members : groups) {
            const ProbeTarget& first = targets[members.front()];
            const config::HealthCheck probe = probe_part(first.check);
            const ProbeEndpoint endpoint = probe_endpoint(first);
            std::optional<std::uint32_t> slot;
            if (auto it = by_endpoint.find(endpoint); it != by_endpoint.end()) {
                for (const std::uint32_t i : it->second) {
                    if (!claimed[i] && slots[i].cold->probe == probe) {
                        slot = i;
                        break;
                    }
                }
            }
            if (slot) {
                claimed[*slot] = true;
                slots[*slot].cold->target = first;  // e.g. new thresholds: the schedule stays
                set_tls(slots[*slot]);
            } else {
                // Probed before under another check: no longer than one new
                // interval from now; new: within the first-probe spread.
                const auto interval =
                    std::chrono::duration_cast<Clock::duration>(first.check.interval);
                std::optional<TimePoint> due;
                for (const std::size_t m : members) {
                    if (auto old = index.find(targets[m].key); old != index.end()) {
                        const TimePoint d =
                            std::max(std::min(slots[old->second].due, now + interval), now);
                        due = due ? std::min(*due, d) : d;
                    }
                }
                const auto spread = std::min<Clock::duration>(interval, opt.first_probe_spread);
                if (!due) due = now + random_upto(spread);
                slot = new_slot();
                if (claimed.size() < slots.size()) claimed.resize(slots.size(), false);
                claimed[*slot] = true;
                Slot& s = slots[*slot];
                s.active = true;
                prepare(s, first);
                schedule(*slot, *due);
            }
            Slot& s = slots[*slot];
            auto subscribers = std::make_shared<std::vector<TargetKey>>();
            subscribers->reserve(members.size());
            for (const std::size_t m : members) {
                subscribers->push_back(targets[m].key);
                next.emplace(targets[m].key, *slot);
            }
            s.cold->subscribers = std::move(subscribers);
            next_by_endpoint[endpoint].push_back(*slot);
        }
        for (std::uint32_t i = 0; i < slots.size(); ++i) {
            if (slots[i].active && !(i < claimed.size() && claimed[i])) release(i);
        }
        index = std::move(next);
        by_endpoint = std::move(next_by_endpoint);
        st_targets = index.size();
        st_probes = groups.size();
        st_in_flight = in_flight;
        st_kept = kept;
    }

    // --- Probes -------------------------------------------------------------------

    // Best effort: without it the close is polite (a TIME_WAIT), no worse.
    void set_abortive(int fd) {
        const linger lg{1, 0};
        io->setsockopt(fd, SOL_SOCKET, SO_LINGER, &lg, sizeof(lg));
    }

    void due(std::uint32_t i, TimePoint now) {
        Slot& s = slots[i];
        // The next one is due interval + jitter after this one was due (no
        // drift); if the loop fell that far behind, from now on.
        TimePoint next = s.due + std::max<Clock::duration>(s.interval + random_upto(s.jitter),
                                                           std::chrono::milliseconds(1));
        const TimePoint this_due = s.due;
        if (next <= now) next = now + std::chrono::milliseconds(1);
        schedule(i, next);
        if (busy(s)) return;  // the previous probe is still running: skip this round
        s.scheduled = this_due;
        if (in_flight >= max_in_flight) {
            waiting.emplace_back(i, s.sched_gen);
            st_waiting = waiting.size();
            return;
        }
        start(i);
    }

    void drain_waiting() {
        while (!waiting.empty() && in_flight < max_in_flight) {
            auto [i, gen] = waiting.front();
            waiting.pop_front();
            if (slots[i].active && slots[i].sched_gen == gen && !busy(slots[i])) start(i);
        }
        st_waiting = waiting.size();
    }

    void start(std::uint32_t i) {
        Slot& s = slots[i];
        const bool udp = s.type == HealthCheckType::kUdp;
        const bool v4 = s.addr.sin6_family == AF_INET;
        s.started = io->now();
        ++s.probe_gen;
        s.sent = 0;
        s.cold->reader.reset();
        ++st_started;
        if (s.fd >= 0) {
            // A kept http connection: used while younger than reuse_limit (so
            // that a listener gone while it lingers is noticed), else
            // replaced. A tcp probe's socket, disconnected: connected again.
            const bool http = speaks_http(s.type) && s.reuse_connection &&
                              s.started - s.connected_at < s.reuse_limit;
            if (http || s.type == HealthCheckType::kTcp) {
                --kept;
                st_kept = kept;
                s.reused = true;
                ++st_reused;
                ++in_flight;
                st_in_flight = in_flight;
                push_deadline(i, s);
                if (http) {
                    s.phase = Phase::kSending;
                    send_request(s);
                    return;
                }
                s.phase = Phase::kConnecting;
                connect(s);
                return;
            }
            close_connection(s);
        }
        if (s.type == HealthCheckType::kHttps && !s.cold->tls_context) {
            // No way to check the certificate (the CA file went away): no
            // connection for nothing.
            finish(s, Failure::kLocal, "could not probe: " + s.cold->tls_error);
            return;
        }
        s.reused = false;
        s.connected_at = s.started;
        const int fd = io->socket(v4 ? AF_INET : AF_INET6,
                                  (udp ? SOCK_DGRAM : SOCK_STREAM) | SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0) {
            local_failure(s, make_error(fd, "socket"));
            return;
        }
        s.fd = fd;
        s.phase = Phase::kConnecting;
        ++in_flight;
        st_in_flight = in_flight;
        if (auto ok = configure(s, fd, v4); !ok) {
            local_failure(s, ok.error());
            return;
        }
        if (const int r = io->watch(fd, (static_cast<std::uint64_t>(i) << 32) | s.conn_gen);
            r < 0) {
            local_failure(s, make_error(r, "epoll_ctl"));
            return;
        }
        s.watched = true;
        push_deadline(i, s);
        connect(s);
    }

    void connect(Slot& s) {
        const int r = io->connect(s.fd, reinterpret_cast<const sockaddr*>(&s.addr), s.addr_len);
        if (r == 0) {
            connected(s);
            return;
        }
        if (r == -EINPROGRESS) return;
        fail_probe(s, -r, s.type == HealthCheckType::kUdp);
    }

    // A tcp probe's socket serves the next probe of its slot too:
    // connect(AF_UNSPEC) ends the connection (with a reset when it was
    // established, as SO_LINGER 0 does on close; nothing when the SYN is
    // unanswered) and leaves the socket unconnected, its options, binding
    // and epoll registration in place; the error the disconnect leaves
    // pending (ECONNRESET) is read so that the next connect starts clean.
    // A probe then costs connect(), the disconnect and getsockopt() instead
    // of socket(), setsockopt(), epoll_ctl(), connect() and close(). False
    // when the socket cannot be reused (it is closed instead).
    bool disconnect(Slot& s) {
        sockaddr unspec{};
        unspec.sa_family = AF_UNSPEC;
        if (io->connect(s.fd, &unspec, sizeof(unspec)) != 0) return false;
        io->socket_error(s.fd);
        return true;
    }

    // The socket options of a probe; an error is this host's, not the backend's.
    Result<void> configure(const Slot& s, int fd, bool v4) {
        if (!opt.device.empty()) {
            const int r = io->setsockopt(fd, SOL_SOCKET, SO_BINDTODEVICE, opt.device.data(),
                                         static_cast<socklen_t>(opt.device.size()));
            if (r < 0) return fail_on(r, "SO_BINDTODEVICE", opt.device);
        }
        const std::uint32_t mark = s.mark != 0 ? s.mark : opt.mark;
        if (mark != 0) {
            const int r = io->setsockopt(fd, SOL_SOCKET, SO_MARK, &mark, sizeof(mark));
            if (r < 0) return fail(r, "SO_MARK");
        }
        if (s.type == HealthCheckType::kHttps) {
            // The request follows the handshake's last flight in a segment of
            // its own: with Nagle it would wait for that flight's ACK, which
            // the server delays (40 ms on Linux). Best effort.
            const int one = 1;
            io->setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
        }
        const auto& source = v4 ? opt.source_v4 : opt.source_v6;
        if (source) {
            // Best effort: without it bind() picks the port at once (fine,
            // only fewer four-tuples to choose from).
            const int one = 1;
            io->setsockopt(fd, IPPROTO_IP, IP_BIND_ADDRESS_NO_PORT, &one, sizeof(one));
            sockaddr_storage sa;
            const socklen_t len = to_sockaddr(*source, 0, sa);
            if (const int r = io->bind(fd, reinterpret_cast<const sockaddr*>(&sa), len); r < 0) {
                return fail_on(r, "bind", source->to_string());
            }
        }
        return {};
    }

    // This host could not probe (Failure::kLocal): says nothing of the backend.
    void local_failure(Slot& s, const Error& e) {
        finish(s, Failure::kLocal, "could not probe: " + e.message());
    }

    // A probe's system call failed with `err` (positive): the outcome it means.
    void fail_probe(Slot& s, int err, bool udp) {
        auto m = map_errno(err, udp);
        finish(s, m.failure, std::move(m.detail));
    }

    void connected(Slot& s) {
        switch (s.type) {
            case HealthCheckType::kTcp: finish(s, Failure::kNone, "connected"); return;
            case HealthCheckType::kHttp:
                s.phase = Phase::kSending;
                send_request(s);
                return;
            case HealthCheckType::kHttps: {
                auto session = TlsSession::make(s.cold->tls_context, *io, s.fd, s.cold->tls_name,
                                                s.cold->target.destination());
                if (!session) {
                    local_failure(s, session.error());
                    return;
                }
                s.cold->tls = std::move(*session);
                s.phase = Phase::kHandshaking;
                handshake(s);
                return;
            }
            case HealthCheckType::kUdp: {
                const auto& payload = s.cold->target.check.udp_payload;
                if (const auto n = io->send(s.fd, payload.data(), payload.size(), MSG_NOSIGNAL);
                    n < 0) {
                    fail_probe(s, static_cast<int>(-n), true);
                    return;
                }
                s.phase = Phase::kReceiving;
                receive_udp(s);
                return;
            }
            case HealthCheckType::kNone: break;
        }
        finish(s, Failure::kLocal, "no check");
    }

    // "10.0.0.2:443", "[2001:db8::2]:443": the peer of a TLS failure.
    static std::string peer(const Slot& s) {
        return net::Endpoint{s.cold->target.destination(), s.cold->target.port}.to_string();
    }

    void handshake(Slot& s) {
        switch (s.cold->tls->handshake()) {
            case TlsSession::Status::kDone:
                s.phase = Phase::kSending;
                send_request(s);
                return;
            case TlsSession::Status::kWantRead:
            case TlsSession::Status::kWantWrite: return;  // the socket's next event
            case TlsSession::Status::kClosed:
                finish(s, Failure::kClosed, "closed during the TLS handshake");
                return;
            case TlsSession::Status::kError: tls_failed(s); return;
        }
    }

    // A TLS session's call failed: underneath (the connection), or in TLS.
    void tls_failed(Slot& s) {
        const TlsSession& tls = *s.cold->tls;
        if (const int err = tls.transport_error(); err != 0) {
            auto m = map_errno(err, false);
            if (m.failure == Failure::kReset) m.detail += " " + stage(s);
            finish(s, m.failure, std::move(m.detail));
            return;
        }
        set_abortive(s.fd);
        const char* during = s.phase == Phase::kHandshaking ? "TLS handshake with " : "TLS with ";
        finish(s, Failure::kTls, during + peer(s) + ": " + tls.reason());
    }

    // The request's bytes out and the response's in, through TLS for https:
    // what io->send() and io->recv() return (bytes, 0 at the end, -errno),
    // or kTlsFailed.
    ssize_t write_plain(Slot& s, const char* data, std::size_t size) {
        if (!s.cold->tls) return io->send(s.fd, data, size, MSG_NOSIGNAL);
        std::size_t n = 0;
        switch (s.cold->tls->write(std::string_view(data, size), n)) {
            case TlsSession::Status::kDone: return static_cast<ssize_t>(n);
            case TlsSession::Status::kWantRead:
            case TlsSession::Status::kWantWrite: return -EAGAIN;
            case TlsSession::Status::kClosed: return -EPIPE;
            case TlsSession::Status::kError: break;
        }
        return kTlsFailed;
    }

    ssize_t read_plain(Slot& s, char* data, std::size_t size) {
        if (!s.cold->tls) return io->recv(s.fd, data, size, 0);
        std::size_t n = 0;
        switch (s.cold->tls->read(data, size, n)) {
            case TlsSession::Status::kDone: return static_cast<ssize_t>(n);
            case TlsSession::Status::kWantRead:
            case TlsSession::Status::kWantWrite: return -EAGAIN;
            case TlsSession::Status::kClosed: return 0;
            case TlsSession::Status::kError: break;
        }
        return kTlsFailed;
    }

    void send_request(Slot& s) {
        while (s.sent < s.cold->request.size()) {
            const ssize_t n =
                write_plain(s, s.cold->request.data() + s.sent, s.cold->request.size() - s.sent);
            if (n > 0) {
                s.sent += static_cast<std::size_t>(n);
                continue;
            }
            if (n == -EINTR) continue;
            if (n == -EAGAIN || n == -EWOULDBLOCK) return;  // EPOLLOUT follows
            if (n == kTlsFailed) {
                tls_failed(s);
                return;
            }
            fail_probe(s, n < 0 ? static_cast<int>(-n) : EPIPE, false);
            return;
        }
        s.phase = Phase::kReceiving;
        const auto& check = s.cold->target.check;
        s.cold->reader.emplace(opt.max_http_head, opt.max_http_body, !check.body_contains.empty());
        receive_http(s);  // edge-triggered: the answer may be there already
    }

    void receive_http(Slot& s) {
        for (;;) {
            const ssize_t n = read_plain(s, scratch.data(), scratch.size());
            if (n > 0) {
                const auto state = s.cold->reader->feed(
                    std::string_view(scratch.data(), static_cast<std::size_t>(n)));
                if (state == HttpResponseReader::State::kDone || s.cold->reader->body_truncated()) {
                    complete_http(s, false);
                    return;
                }
                if (state == HttpResponseReader::State::kError) {
                    set_abortive(s.fd);
                    finish(s, Failure::kBadResponse, "bad response: " + s.cold->reader->error());
                    return;
                }
                continue;
            }
            if (n == 0) {
                const auto state = s.cold->reader->finish();
                if (state == HttpResponseReader::State::kDone) {
                    complete_http(s, true);
                } else {
                    finish(
                        s,
                        s.cold->reader->closed_early() ? Failure::kClosed : Failure::kBadResponse,
                        s.cold->reader->error());
                }
                return;
            }
            if (n == -EINTR) continue;
            if (n == -EAGAIN || n == -EWOULDBLOCK) return;
            if (n == kTlsFailed) {
                tls_failed(s);
                return;
            }
            auto m = map_errno(static_cast<int>(-n), false);
            if (m.failure == Failure::kReset) m.detail += " " + stage(s);
            finish(s, m.failure, std::move(m.detail));
            return;
        }
    }

    void complete_http(Slot& s, bool eof) {
        const bool keep = !eof && s.reuse_connection && s.cold->reader->reusable();
        if (!eof && !keep) {
            // The server usually closes right after the response: if its FIN
            // is already here, close politely; otherwise reset (no TIME_WAIT).
            // Through TLS its close_notify comes first: read, not peeked (the
            // connection is not used again).
            const ssize_t n = s.cold->tls
                                  ? read_plain(s, scratch.data(), scratch.size())
                                  : io->recv(s.fd, scratch.data(), scratch.size(), MSG_PEEK);
            eof = n == 0;
            if (!eof) set_abortive(s.fd);
        }
        auto j = judge_http(s.cold->target.check, *s.cold->reader, io->wall_now());
        ProbeResult r = result_base(s, j.failure, std::move(j.detail));
        r.http_status = static_cast<std::uint16_t>(s.cold->reader->status());
        r.rate_limited = j.rate_limited;
        r.retry_after = j.retry_after;
        deliver(s, std::move(r), keep);
    }

    void receive_udp(Slot& s) {
        for (;;) {
            const ssize_t n = io->recv(s.fd, scratch.data(), scratch.size(), 0);
            if (n >= 0) {
                const std::string_view reply(scratch.data(), static_cast<std::size_t>(n));
                const auto& expect = s.cold->target.check.udp_expect;
                if (expect.empty() || reply.find(expect) != std::string_view::npos) {
                    finish(s, Failure::kNone, "reply of " + std::to_string(n) + " bytes");
                } else {
                    finish(s, Failure::kReplyMismatch,
                           "reply of " + std::to_string(n) + " bytes lacks \"" +
                               expect.substr(0, 40) + "\"");
                }
                return;
            }
            if (n == -EINTR) continue;
            if (n == -EAGAIN || n == -EWOULDBLOCK) return;
            fail_probe(s, static_cast<int>(-n), true);
            return;
        }
    }

    std::string stage(const Slot& s) const {
        switch (s.phase) {
            case Phase::kConnecting: return "(connecting)";
            case Phase::kHandshaking: return "(TLS handshake)";
            case Phase::kSending: return "(sending the request)";
            case Phase::kReceiving:
                if (s.cold->target.check.type == HealthCheckType::kUdp) return "(no reply)";
                if (s.cold->reader && s.cold->reader->state() == HttpResponseReader::State::kBody) {
                    return "(reading the response body)";
                }
                return "(waiting for the response headers)";
            case Phase::kIdle: break;
        }
        return "";
    }

    void on_event(std::uint32_t i, std::uint32_t gen, std::uint32_t events) {
        if (i >= slots.size()) return;
        Slot& s = slots[i];
        if (!s.active || s.fd < 0 || s.conn_gen != gen) return;  // stale
        if (!busy(s)) {
            idle_event(s, events);
            return;
        }
        const bool udp = s.type == HealthCheckType::kUdp;
        switch (s.phase) {
            case Phase::kConnecting: {
                if (events & (EPOLLERR | EPOLLHUP)) {
                    int err = io->socket_error(s.fd);
                    // A hang-up without an error on a reused socket is what
                    // its last disconnect left: the connect goes on.
                    if (err == 0 && !(events & EPOLLOUT) && s.reused) return;
                    if (err == 0 && !(events & EPOLLOUT)) err = ECONNRESET;
                    if (err != 0) {
                        fail_probe(s, err, udp);
                        return;
                    }
                }
                if (events & EPOLLOUT) connected(s);
                return;
            }
            case Phase::kHandshaking: handshake(s); return;
            case Phase::kSending:
                // TLS may wait for input to send (a key update).
                if (events & (EPOLLOUT | EPOLLERR | EPOLLHUP) ||
                    (s.cold->tls && (events & EPOLLIN)))
                    send_request(s);
                return;
            case Phase::kReceiving:
                if (udp) {
                    receive_udp(s);
                } else {
                    receive_http(s);
                }
                return;
            case Phase::kIdle: return;
        }
    }

    // An event on a kept connection between probes: the server closed it
    // (an idle timeout, a restart) or sent what nobody asked for. Either way
    // the next probe opens a new connection; nothing failed. A readable edge
    // can also be the last response's, read before its event came: then
    // there is nothing to read.
    // A tcp probe's idle socket is disconnected: its hang-up is expected.
    void idle_event(Slot& s, std::uint32_t events) {
        if (s.type == HealthCheckType::kTcp) return;
        if (!(events & (EPOLLIN | EPOLLRDHUP | EPOLLHUP | EPOLLERR))) return;
        if (!(events & (EPOLLRDHUP | EPOLLHUP | EPOLLERR))) {
            // Through TLS, records other than data may come between probes
            // (TLS 1.3 session tickets): read, they leave nothing to read.
            const ssize_t n = s.cold->tls ? read_plain(s, scratch.data(), scratch.size())
                                          : io->recv(s.fd, scratch.data(), 1, MSG_PEEK);
            if (n == -EAGAIN || n == -EWOULDBLOCK || n == -EINTR) return;
        }
        close_connection(s);
    }

    void on_deadline(Slot& s) {
        const auto timeout = s.timeout;
        if (s.type != HealthCheckType::kTcp) set_abortive(s.fd);  // tcp: disconnect()
        finish(s, Failure::kTimeout, "timeout after " + human(timeout) + " " + stage(s));
    }

    ProbeResult result_base(const Slot& s, Failure failure, std::string detail) const {
        ProbeResult r;
        r.key = s.cold->target.key;
        r.type = s.type;
        r.port = s.cold->target.port;
        r.failure = failure;
        r.detail = std::move(detail);
        r.scheduled = s.scheduled;
        r.started = s.started;
        r.finished = io->now();
        r.finished_wall = io->wall_now();
        return r;
    }

    void finish(Slot& s, Failure failure, std::string detail) {
        deliver(s, result_base(s, failure, std::move(detail)), false);
    }

    // The probe is over: its socket is closed (it leaves the epoll set), or
    // kept for the next probe; the result goes to every subscriber.
    void deliver(Slot& s, ProbeResult r, bool keep_connection) {
        if (busy(s)) {
            --in_flight;
            st_in_flight = in_flight;
        }
        s.phase = Phase::kIdle;
        if (s.type == HealthCheckType::kTcp && s.watched) keep_connection = disconnect(s);
        if (keep_connection && s.fd >= 0) {
            ++kept;
            st_kept = kept;
        } else if (s.fd >= 0) {
            if (s.type == HealthCheckType::kTcp) set_abortive(s.fd);  // not disconnected
            s.cold->tls.reset();
            io->close(s.fd);
            s.fd = -1;
            s.watched = false;
            ++s.conn_gen;
        }
        s.cold->reader.reset();
        ++st_results;
        // One report for every target the probe serves: r's key is the
        // first one's (result_base), the others follow in shared_targets.
        if (s.cold->subscribers && s.cold->subscribers->size() > 1)
            r.shared_targets = s.cold->subscribers;
        report(r);
    }

    // The handler must not throw (engine.h): if it does, noexcept ends the
    // process here, with the exception, rather than lose it.
    void report(const ProbeResult& r) noexcept {
        if (on_result) on_result(r);
    }

    // --- The loop -------------------------------------------------------------------

    void take_commands(TimePoint now) {
        std::optional<std::vector<ProbeTarget>> targets;
        std::vector<Call> new_calls;
        {
            std::lock_guard lock(mu);
            targets.swap(pending_targets);
            new_calls.swap(pending_calls);
        }
        if (targets) apply_targets(std::move(*targets), now);
        for (Call& c : new_calls) {
            c.seq = call_seq++;
            calls.push_back(std::move(c));
            std::push_heap(calls.begin(), calls.end(), CallLater{});
        }
    }

    // Due times and deadlines in time order (a deadline first at a tie: the
    // probe ends before its next one is due).
    void run_timers(TimePoint now) {
        for (;;) {
            std::deque<Timer>* q = earliest_deadline(now);
            const bool due_ready = !timers.empty() && timers.front().when <= now;
            if (!q && !due_ready) break;
            if (q && (!due_ready || q->front().when <= timers.front().when)) {
                const Timer t = q->front();
                q->pop_front();
                Slot& s = slots[t.slot];
                if (s.active && busy(s) && s.probe_gen == t.gen) on_deadline(s);
                continue;
            }
            std::pop_heap(timers.begin(), timers.end(), std::greater<>{});
            const Timer t = timers.back();
            timers.pop_back();
            Slot& s = slots[t.slot];
            if (s.active && s.sched_gen == t.gen) due(t.slot, now);
        }
        std::erase_if(deadlines, [](const auto& kv) { return kv.second.empty(); });
        while (!calls.empty() && calls.front().when <= now) {
            std::pop_heap(calls.begin(), calls.end(), CallLater{});
            Call c = std::move(calls.back());
            calls.pop_back();
            run_call(c.fn);
        }
    }

    // Like report(): a call_at() function must not throw.
    static void run_call(const std::function<void()>& fn) noexcept {
        if (fn) fn();
    }

    // One turn: wait for events until the next timer (rounded), handle them,
    // run the timers that are due, start probes held back.
    void turn(std::span<epoll_event> events) {
        TimePoint next = TimePoint::max();
        if (!timers.empty()) next = timers.front().when;
        for (const auto& [timeout, q] : deadlines)
            if (!q.empty()) next = std::min(next, q.front().when);
        if (!calls.empty()) next = std::min(next, calls.front().when);
        if (next != TimePoint::max()) {
            // Batch: wake at the next multiple of the resolution.
            const auto res = std::chrono::duration_cast<Clock::duration>(opt.timer_resolution);
            if (res > Clock::duration::zero()) {
                const auto since = next.time_since_epoch();
                next = TimePoint((since + res - Clock::duration(1)) / res * res);
            }
        }
        const int n = io->wait(events, next);  // < 0: an error; the timers run anyway
        const TimePoint now = io->now();
        for (int k = 0; k < n; ++k) {
            const epoll_event& ev = events[static_cast<std::size_t>(k)];
            if (ev.data.u64 == ProbeIo::kWakeTag) {
                take_commands(now);
                continue;
            }
            on_event(static_cast<std::uint32_t>(ev.data.u64 >> 32),
                     static_cast<std::uint32_t>(ev.data.u64), ev.events);
        }
        run_timers(io->now());
        drain_waiting();
    }

    void loop() {
        pthread_setname_np(pthread_self(), "xlb-probe");
        std::vector<epoll_event> events(512);
        while (!stopping.load(std::memory_order_relaxed)) turn(events);
        for (Slot& s : slots) abandon(s);
        rusage ru{};
        if (getrusage(RUSAGE_THREAD, &ru) == 0) {
            final_cpu_ns =
                (static_cast<std::int64_t>(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) *
                     1'000'000'000LL +
                 static_cast<std::int64_t>(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) * 1'000LL);
        }
    }

    Result<void> open() {
        if (opened) return {};
        if (auto ok = io->open(); !ok) return ok;
        opened = true;
        wake();  // pick up targets and calls posted before
        return {};
    }
};

ProbeEngine::ProbeEngine(Options options, ResultHandler on_result)
    : impl_(std::make_unique<Impl>(std::move(options), std::move(on_result), nullptr)) {}

ProbeEngine::ProbeEngine(Options options, ResultHandler on_result, ProbeIo& io)
    : impl_(std::make_unique<Impl>(std::move(options), std::move(on_result), &io)) {}

ProbeEngine::~ProbeEngine() { stop(); }

Result<void> ProbeEngine::start() {
    Impl& m = *impl_;
    std::lock_guard lock(m.thread_mu);
    if (m.thread.joinable()) return {};
    if (auto ok = m.open(); !ok) return with_context(std::move(ok), "start the probe engine");
    m.stopping = false;
    try {
        m.thread = std::thread([&m] { m.loop(); });
    } catch (const std::system_error& e) {
        return fail(e.code().value(), "start the probe engine's thread");
    }
    m.wake();  // pick up targets set before start()
    return {};
}

Result<void> ProbeEngine::run_once() {
    Impl& m = *impl_;
    if (m.thread.joinable()) return fail(EBUSY, "run the probe engine by hand", "it is started");
    if (auto ok = m.open(); !ok) return ok;
    std::array<epoll_event, 64> events{};
    m.turn(events);
    return {};
}

void ProbeEngine::stop() {
    Impl& m = *impl_;
    std::lock_guard lock(m.thread_mu);
    if (!m.thread.joinable()) return;
    m.stopping = true;
    m.wake();
    m.thread.join();
}

void ProbeEngine::set_targets(std::vector<ProbeTarget> targets) {
    Impl& m = *impl_;
    {
        std::lock_guard lock(m.mu);
        m.pending_targets = std::move(targets);
    }
    m.wake();
}

void ProbeEngine::call_at(TimePoint when, std::function<void()> fn) {
    Impl& m = *impl_;
    {
        std::lock_guard lock(m.mu);
        m.pending_calls.push_back(Impl::Call{when, 0, std::move(fn)});
    }
    m.wake();
}

ProbeEngine::Stats ProbeEngine::stats() const {
    const Impl& m = *impl_;
    return Stats{m.st_targets.load(), m.st_probes.load(),    m.st_started.load(),
                 m.st_results.load(), m.st_in_flight.load(), m.st_waiting.load(),
                 m.st_kept.load(),    m.st_reused.load()};
}

std::chrono::nanoseconds ProbeEngine::cpu_time() const {
    Impl& m = *impl_;
    std::lock_guard lock(m.thread_mu);
    if (m.thread.joinable()) {
        clockid_t cid;
        timespec ts{};
        if (pthread_getcpuclockid(m.thread.native_handle(), &cid) == 0 &&
            clock_gettime(cid, &ts) == 0) {
            return std::chrono::seconds(ts.tv_sec) + std::chrono::nanoseconds(ts.tv_nsec);
        }
    }
    return std::chrono::nanoseconds(m.final_cpu_ns.load());
}

}  // namespace xlb::health
