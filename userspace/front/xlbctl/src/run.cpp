// SPDX-License-Identifier: Apache-2.0
#include "xlb/xlbctl/run.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <poll.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <termios.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <ctime>
#include <fstream>
#include <iostream>
#include <optional>
#include <sstream>
#include <thread>
#include <utility>

#include "xlb/files/files.h"
#include "xlb/xlbctl/drain.h"
#include "xlb/xlbctl/quic.h"
#include "xlb/xlbctl/render.h"
#include "xlb/xlbctl/request.h"

namespace xlb::xlbctl {

namespace {

struct Failure {
    int code = kExitFailed;
    std::string message;
    std::optional<int> http_status;
};

class Reporter {
public:
    Reporter(Io& io, bool json) : io_(io), json_(json) {}

    int fail(const Failure& f) const {
        if (json_) {
            json j{{"error", f.message}, {"exit_code", f.code}};
            if (f.http_status) j["http_status"] = *f.http_status;
            *io_.err << j.dump() << "\n";
        } else {
            *io_.err << "xlbctl: " << f.message << "\n";
        }
        return f.code;
    }

    void warn(const std::string& message) const {
        if (json_)
            *io_.err << json{{"warning", message}}.dump() << "\n";
        else
            *io_.err << "xlbctl: warning: " << message << "\n";
    }

private:
    Io& io_;
    bool json_;
};

bool colour_enabled(const Io& io) {
    if (!io.out_is_tty) return false;
    const char* no_color = io.getenv ? io.getenv("NO_COLOR") : nullptr;
    if (no_color && *no_color) return false;
    const char* term = io.getenv ? io.getenv("TERM") : nullptr;
    return !(term && std::string_view(term) == "dumb");
}

struct Reply {
    int status = 0;
    json body;
};

// One request: the reply as JSON, or the failure to report.
std::expected<Reply, Failure> exchange(Transport& transport, const HttpRequest& request,
                                       const Command& c) {
    auto response = transport.send(request);
    if (!response)
        return std::unexpected(
            Failure{kExitUnreachable, describe(response.error(), c.socket, c.timeout)});
    json body = json::parse(response->body, nullptr, false);
    if (response->status >= 400) {
        std::string message;
        if (body.is_object() && body.contains("error") && body["error"].is_string()) {
            message = body["error"].get<std::string>();
        } else {
            message = response->body.substr(0, response->body.find('\n'));
            if (message.empty()) message = "HTTP status " + std::to_string(response->status);
        }
        return std::unexpected(Failure{kExitFailed, "xlbd: " + message, response->status});
    }
    if (body.is_discarded() || !body.is_object())
        return std::unexpected(Failure{
            kExitUnreachable,
            fmt::format("xlbd at {} sent a malformed reply: HTTP {} without a JSON object (is it "
                        "the agent's API socket?)",
                        c.socket, response->status)});
    return Reply{response->status, std::move(body)};
}

// A reload's reply is a report whether it was applied or not: print it
// whole (the errors with their file:line:column) and exit 1 unless applied.
// The reload report the agent answered with (applied or not) and the HTTP
// status, or what to say instead: the agent unreachable (exit
// `unreachable`), or its error or HTTP status when the reply is no report
// (exit `refused`).
struct ReloadReply {
    json body;
    int status = 0;
};
std::expected<ReloadReply, Failure> reload_report(const Command& c, Transport& transport,
                                                  int unreachable, int refused) {
    auto response = transport.send(build_request(c));
    if (!response)
        return std::unexpected(
            Failure{unreachable, describe(response.error(), c.socket, c.timeout)});
    json body = json::parse(response->body, nullptr, false);
    if (!body.is_object() || !body.contains("result")) {
        std::string message =
            body.is_object() && body.contains("error") && body["error"].is_string()
                ? body["error"].get<std::string>()
                : "HTTP status " + std::to_string(response->status);
        return std::unexpected(Failure{refused, "xlbd: " + message, response->status});
    }
    return ReloadReply{std::move(body), response->status};
}

int reload(const Command& c, Transport& transport, Io& io, const Style& style,
           const Reporter& report) {
    auto reply = reload_report(c, transport, kExitUnreachable, kExitFailed);
    if (!reply) return report.fail(reply.error());
    const json& body = reply->body;
    try {
        const bool applied = reply->status == 200 && body.value("result", "") == "applied";
        std::ostream& to = applied || c.json ? *io.out : *io.err;
        to << (c.json ? render_json(body) : render_human(c, body, style));
        to.flush();
        return applied ? kExitOk : kExitFailed;
    } catch (const json::exception& e) {
        return report.fail(
            Failure{kExitUnreachable, std::string("malformed reload report: ") + e.what()});
    }
}

Failure malformed(const Command& c, const std::exception& e) {
    return Failure{kExitUnreachable,
                   fmt::format("xlbd at {} sent a reply xlbctl does not understand: {} (are xlbd "
                               "and xlbctl the same version? xlbctl --version, xlbctl status "
                               "--json)",
                               c.socket, e.what())};
}

// export: the agent's YAML to standard output, or written to -o FILE
// (atomically, mode 0600: it holds the hash seed).
int export_state(const Command& c, Transport& transport, Io& io, const Reporter& report) {
    auto reply = exchange(transport, build_request(c), c);
    if (!reply) return report.fail(reply.error());
    std::string yaml;
    try {
        yaml = reply->body.at("yaml").get<std::string>();
    } catch (const json::exception& e) {
        return report.fail(malformed(c, e));
    }
    if (!c.output.empty())
        if (auto written = files::write_file_atomic(c.output, yaml, 0600); !written)
            return report.fail(
                Failure{kExitFailed, "export: " + written.error().message(), std::nullopt});
    if (c.json) {
        json out = reply->body;
        out["output"] = c.output;
        *io.out << render_json(out);
    } else if (c.output.empty()) {
        *io.out << yaml;
    } else {
        *io.out << fmt::format("wrote {}: {} VIP(s)\n", c.output,
                               reply->body.value("vips", std::uint64_t{0}));
    }
    io.out->flush();
    return kExitOk;
}

// diff: the dry run's report. Exit as diff(1) does: 0 no difference, 1
// differences, 2 trouble (an invalid file, an agent that cannot be asked).
int diff(const Command& c, Transport& transport, Io& io, const Style& style,
         const Reporter& report) {
    constexpr int kTrouble = 2;
    auto reply = reload_report(c, transport, kTrouble, kTrouble);
    if (!reply) return report.fail(reply.error());
    const json& body = reply->body;
    try {
        const std::string result = body.at("result").get<std::string>();
        if (result == "invalid" || result == "failed") {
            std::ostream& to = c.json ? *io.out : *io.err;
            if (c.json) {
                to << render_json(body);
            } else {
                to << "xlbctl: " << body.at("error").get<std::string>() << "\n";
                for (const json& e : body.at("errors")) to << "  " << e.get<std::string>() << "\n";
            }
            to.flush();
            return kTrouble;
        }
        bool differs = false;
        for (const char* key :
             {"added", "removed", "changed", "settings_changed", "restart_required", "disruptive"})
            differs = differs || !body.at(key).empty();
        *io.out << (c.json ? render_json(body) : render_human(c, body, style));
        io.out->flush();
        return differs ? 1 : kExitOk;
    } catch (const json::exception& e) {
        return report.fail(Failure{kTrouble, std::string("malformed reload report: ") + e.what()});
    }
}

// quic cid|decode: the VIP from the agent, the CID computed here.
int quic(const Command& c, Transport& transport, Io& io, const Style& style,
         const Reporter& report) {
    auto reply = exchange(transport, build_request(c), c);
    if (!reply) return report.fail(reply.error());
    try {
        auto answer = quic_answer(c, reply->body, style);
        if (!answer) return report.fail(Failure{kExitFailed, answer.error(), std::nullopt});
        for (const std::string& warning : answer->warnings) report.warn(warning);
        *io.out << (c.json ? render_json(answer->document) : answer->text);
    } catch (const json::exception& e) {
        return report.fail(malformed(c, e));
    }
    io.out->flush();
    return kExitOk;
}

// A refresh drawn over the last one: home (the first one clears the screen),
// each line cleared to its end, then the rest of the screen.
void paint_in_place(Io& io, const std::string& frame, bool first) {
    std::string painted;
    for (char ch : frame) {
        if (ch == '\n') painted += "\x1b[K";
        painted += ch;
    }
    *io.out << (first ? "\x1b[H\x1b[2J" : "\x1b[H") << painted << "\x1b[J";
}

// The loop of stats --watch and top: a first snapshot, then every interval
// another and the rates between the two, as one JSON line (--json), painted
// over the last refresh (a terminal) or appended; until Ctrl-C or `count`
// refreshes (0: no limit). snapshot() gives the counters or a Failure; sample(before,
// after, seconds, wall time) the refresh's document; render(document, the
// terminal's rows and columns when painting in place) its text.
template <class Snapshot, class Sample, class Render>
int refresh_loop(const Command& c, Io& io, const Reporter& report, std::uint64_t count,
                 Snapshot snapshot, Sample sample, Render render) {
    auto before = snapshot();
    if (!before) return report.fail(before.error());
    auto t0 = io.now();
    if (io.on_watch_start) io.on_watch_start();
    const auto interval =
        std::chrono::milliseconds(static_cast<long>(std::llround(*c.watch_seconds * 1000)));
    const bool in_place = io.out_is_tty && !c.json;
    if (in_place) {
        std::string note = fmt::format("measuring rates over {}s (Ctrl-C to stop)...",
                                       format_number(*c.watch_seconds));
        // as wide as the terminal at most: a wrapped line would scroll
        const std::optional<int> columns =
            io.terminal_columns ? io.terminal_columns() : std::nullopt;
        if (columns && note.size() > static_cast<std::size_t>(*columns))
            note.resize(static_cast<std::size_t>(std::max(*columns, 1)));
        *io.out << note << "\n" << std::flush;
    }
    std::uint64_t shown = 0;
    while (!io.interrupted()) {
        io.sleep(interval);
        if (io.interrupted()) break;
        auto after = snapshot();
        if (!after) return report.fail(after.error());
        const auto t1 = io.now();
        const double seconds = std::chrono::duration<double>(t1 - t0).count();
        try {
            const json document = sample(*before, *after, seconds, io.wall_time());
            if (c.json) {
                *io.out << document.dump() << "\n";
            } else if (in_place) {
                const std::optional<int> rows =
                    io.terminal_rows ? io.terminal_rows() : std::nullopt;
                const std::optional<int> columns =
                    io.terminal_columns ? io.terminal_columns() : std::nullopt;
                paint_in_place(io, render(document, rows, columns), shown == 0);
            } else {
                if (shown > 0) *io.out << "\n";
                *io.out << render(document, std::nullopt, std::nullopt);
            }
        } catch (const json::exception& e) {
            return report.fail(malformed(c, e));
        }
        io.out->flush();
        before = std::move(after);
        t0 = t1;
        ++shown;
        if (count != 0 && shown >= count) break;
    }
    return kExitOk;
}

int watch(const Command& c, Transport& transport, Io& io, const Style& style,
          const Reporter& report) {
    const HttpRequest request = build_request(c);
    return refresh_loop(
        c, io, report, c.count.value_or(0),
        [&]() -> std::expected<json, Failure> {
            auto r = exchange(transport, request, c);
            if (!r) return std::unexpected(r.error());
            return std::move(r->body);
        },
        [](const json& before, const json& after, double seconds, auto wall) {
            return watch_sample(before, after, seconds, wall);
        },
        [&](const json& sample, std::optional<int>, std::optional<int>) {
            return render_watch(sample, style);
        });
}

// top: GET /v1/backends and GET /v1/stats every interval; each refresh
// shows the counters' rates since the one before (docs/xlbctl.md).
int top(const Command& c, Transport& transport, Io& io, const Style& style,
        const Reporter& report) {
    const HttpRequest backends{"GET", "/v1/backends", ""}, stats{"GET", "/v1/stats", ""};
    using Counters = std::pair<json, json>;  // backends, stats
    // --json: one snapshot unless --count says how many
    const std::uint64_t count = c.count.value_or(c.json ? 1 : 0);
    // Painting in place: `q` quits. The terminal is given back on every way
    // out of the loop (the guard), Ctrl-C included (it only sets a flag).
    std::shared_ptr<void> keys;
    if (io.out_is_tty && !c.json && io.take_keys) keys = io.take_keys();
    return refresh_loop(
        c, io, report, count,
        [&]() -> std::expected<Counters, Failure> {
            auto b = exchange(transport, backends, c);
            if (!b) return std::unexpected(b.error());
            auto s = exchange(transport, stats, c);
            if (!s) return std::unexpected(s.error());
            return Counters{std::move(b->body), std::move(s->body)};
        },
        [](const Counters& before, const Counters& after, double seconds, auto wall) {
            return top_sample(before.first, before.second, after.first, after.second, seconds,
                              wall);
        },
        [&](const json& sample, std::optional<int> rows, std::optional<int> columns) {
            return render_top(sample, style, rows, columns);
        });
}

// status --peers: this host's status and each peer's (from its socket, or
// from a file with its `status --json`), compared. Exit 1 when they differ.
int compare_with_peers(const Command& c, Transport& transport, Io& io, const Style& style,
                       const Reporter& report) {
    std::vector<std::pair<std::string, json>> hosts;
    auto own = exchange(transport, build_request(c), c);
    if (!own) return report.fail(own.error());
    hosts.emplace_back(c.socket, std::move(own->body));
    for (const std::string& peer : c.peers) {
        struct stat st {};
        if (::stat(peer.c_str(), &st) == 0 && S_ISREG(st.st_mode)) {
            std::ifstream in(peer);
            std::stringstream text;
            text << in.rdbuf();
            json body = json::parse(text.str(), nullptr, false);
            if (!body.is_object() || !body.contains("vips"))
                return report.fail(Failure{
                    kExitFailed, "--peers " + peer + ": not the JSON of `xlbctl status --json`"});
            hosts.emplace_back(peer, std::move(body));
            continue;
        }
        Command at = c;
        at.socket = peer;
        std::unique_ptr<Transport> to = io.connect(at);
        auto reply = exchange(*to, build_request(at), at);
        if (!reply) return report.fail(reply.error());
        hosts.emplace_back(peer, std::move(reply->body));
    }
    try {
        const json comparison = compare_peers(hosts);
        *io.out << (c.json ? render_json(comparison) : render_peers(comparison, style));
        io.out->flush();
        return comparison.at("agree").get<bool>() ? kExitOk : kExitFailed;
    } catch (const json::exception& e) {
        return report.fail(malformed(c, e));
    }
}

std::string connections(std::uint64_t n) {
    return fmt::format("{} active connection{}", n, n == 1 ? "" : "s");
}

// backend drain --wait, after the drain was accepted: the backend's active
// connections, one line per change, until none are left (exit 0) or the
// wait's --timeout passes (exit 1).
int wait_for_drain(const Command& c, const json& drained, Transport& transport, Io& io,
                   const Reporter& report) {
    const std::string backend = c.backend.to_string();
    // A VIP without a connection table has no entries to count: waiting
    // would report "0" at once although flows may still reach the backend.
    if (const auto spec = drained.find("spec");
        spec != drained.end() && spec->is_object() && !spec->value("conntrack", true))
        return report.fail(Failure{
            kExitFailed,
            fmt::format("backend drain --wait: VIP {} has no connection table (conntrack: false), "
                        "so its connections cannot be counted; watch the backend's packets "
                        "instead (xlbctl backend list {})",
                        c.vip, c.vip)});
    const auto within = c.active_within.value_or(kDefaultActiveWithin);
    if (!c.json)
        *io.out << fmt::format(
            "waiting up to {} for {}'s active connections (entries seen within {}) to reach 0\n",
            config::format_duration(c.wait_timeout), backend, config::format_duration(within));
    io.out->flush();
    if (io.on_watch_start) io.on_watch_start();

    const HttpRequest request = drain_count_request(c);
    std::optional<Failure> failure;
    DrainWaitIo wait;
    wait.fetch = [&]() -> Result<std::uint64_t> {
        auto reply = exchange(transport, request, c);
        if (!reply) {
            failure = reply.error();
            return xlb::fail(failure->message);
        }
        try {
            return backend_entries(reply->body, c.vip, c.backend);
        } catch (const json::exception& e) {
            failure = malformed(c, e);
            return xlb::fail(failure->message);
        }
    };
    wait.report = [&](std::uint64_t n, std::chrono::milliseconds elapsed) {
        if (c.json)
            *io.out << json{{"vip", c.vip},
                            {"backend", backend},
                            {"active_connections", n},
                            {"active_within", config::format_duration(within)},
                            {"elapsed_s", static_cast<double>(elapsed.count()) / 1000}}
                           .dump()
                    << "\n";
        else
            *io.out << backend << ": " << connections(n) << "\n";
        io.out->flush();
    };
    wait.sleep = io.sleep;
    wait.now = io.now;
    wait.interrupted = io.interrupted;
    const DrainWaitResult r = wait_until_drained(wait, c.wait_timeout, kDrainPollInterval);
    using Outcome = DrainWaitResult::Outcome;
    switch (r.outcome) {
        case Outcome::kDrained: return kExitOk;
        case Outcome::kFailed: return report.fail(*failure);
        case Outcome::kTimedOut:
            return report.fail(Failure{
                kExitFailed,
                fmt::format(
                    "backend drain --wait: {} of {} still has {} after {} (--wait-timeout); "
                    "it stays draining (xlbctl conntrack list --vip {} --backend {} shows "
                    "them)",
                    backend, c.vip, connections(r.remaining),
                    config::format_duration(c.wait_timeout), c.vip, backend)});
        case Outcome::kInterrupted:
            return report.fail(
                Failure{kExitFailed, fmt::format("interrupted: {} of {} still has {}; it stays "
                                                 "draining",
                                                 backend, c.vip, connections(r.remaining))});
    }
    return kExitFailed;
}

std::atomic<bool> g_interrupted{false};
// Standard input is in non-canonical mode (top): sleeps watch it for `q`.
std::atomic<bool> g_keys{false};

void on_signal(int) { g_interrupted = true; }

// The keyboard of top: standard input without line buffering or echo
// (signals still work: Ctrl-C stays SIGINT), as it was once destroyed.
class KeyboardMode {
public:
    static std::shared_ptr<KeyboardMode> take() {
        termios saved{};
        if (::isatty(STDIN_FILENO) != 1 || ::tcgetattr(STDIN_FILENO, &saved) != 0) return nullptr;
        termios raw = saved;
        raw.c_lflag &= ~static_cast<tcflag_t>(ICANON | ECHO);
        raw.c_cc[VMIN] = 0;
        raw.c_cc[VTIME] = 0;
        if (::tcsetattr(STDIN_FILENO, TCSANOW, &raw) != 0) return nullptr;
        // Ctrl-\ and a hang-up end the loop too, so that the terminal is restored.
        struct sigaction sa {};
        sa.sa_handler = on_signal;
        sigemptyset(&sa.sa_mask);
        ::sigaction(SIGQUIT, &sa, nullptr);
        ::sigaction(SIGHUP, &sa, nullptr);
        g_keys = true;
        return std::shared_ptr<KeyboardMode>(new KeyboardMode(saved));
    }
    ~KeyboardMode() {
        g_keys = false;
        ::tcsetattr(STDIN_FILENO, TCSANOW, &saved_);
    }
    KeyboardMode(const KeyboardMode&) = delete;
    KeyboardMode& operator=(const KeyboardMode&) = delete;

private:
    explicit KeyboardMode(const termios& saved) : saved_(saved) {}
    termios saved_;
};

// Waits up to `wait` for a key; `q` (or Q) sets the interrupted flag.
void watch_keys(std::chrono::milliseconds wait) {
    pollfd in{STDIN_FILENO, POLLIN, 0};
    if (::poll(&in, 1, static_cast<int>(wait.count())) <= 0) return;
    char keys[16];
    const ssize_t n = ::read(STDIN_FILENO, keys, sizeof(keys));
    for (ssize_t i = 0; i < n; ++i)
        if (keys[i] == 'q' || keys[i] == 'Q') g_interrupted = true;
}

}  // namespace

// Where capture writes the pcap: a new file (0600: packets may hold what
// clients sent) or standard output.
class PcapOutput {
public:
    static std::expected<PcapOutput, Failure> open(const std::string& path, Io& io) {
        PcapOutput out;
        if (path == "-") {
            out.stream_ = io.out;
            return out;
        }
        out.fd_ = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
        if (out.fd_ < 0)
            return std::unexpected(Failure{
                kExitFailed, "capture: open " + path + ": " + std::strerror(errno), std::nullopt});
        return out;
    }
    PcapOutput() = default;
    PcapOutput(PcapOutput&& o) noexcept : fd_(std::exchange(o.fd_, -1)), stream_(o.stream_) {}
    PcapOutput& operator=(PcapOutput&&) = delete;
    ~PcapOutput() {
        if (fd_ >= 0) ::close(fd_);
    }
    bool write(std::string_view bytes) {
        if (stream_) {
            stream_->write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
            stream_->flush();
            return stream_->good();
        }
        while (!bytes.empty()) {
            const ssize_t n = ::write(fd_, bytes.data(), bytes.size());
            if (n < 0 && errno == EINTR) continue;
            if (n <= 0) return false;
            bytes.remove_prefix(static_cast<std::size_t>(n));
        }
        return true;
    }

private:
    int fd_ = -1;
    std::ostream* stream_ = nullptr;
};

// capture: the agent streams frames (docs/api.md, POST /v1/capture): 'P'
// frames are pcap bytes for the output, the last, 'E', the summary. The
// file is created at the first frame, once the agent has accepted the
// capture: a refused one leaves an existing file as it was.
int capture(const Command& c, Transport& transport, Io& io, const Reporter& report) {
    std::optional<PcapOutput> out;
    std::optional<Failure> open_failure;
    std::string buffered;
    std::optional<json> summary;
    std::string write_error;
    const BodySink sink = [&](std::string_view piece) {
        buffered.append(piece);
        while (buffered.size() >= 5) {
            const std::uint32_t n = static_cast<std::uint8_t>(buffered[1]) << 24 |
                                    static_cast<std::uint8_t>(buffered[2]) << 16 |
                                    static_cast<std::uint8_t>(buffered[3]) << 8 |
                                    static_cast<std::uint8_t>(buffered[4]);
            if (buffered.size() < 5 + static_cast<std::size_t>(n)) break;
            const std::string_view payload(buffered.data() + 5, n);
            if (buffered[0] == 'P') {
                if (!out) {
                    auto opened = PcapOutput::open(c.write_to, io);
                    if (!opened) {
                        open_failure = opened.error();
                        return false;
                    }
                    out.emplace(std::move(*opened));
                }
                if (!out->write(payload)) {
                    write_error = "capture: write " + c.write_to + ": " + std::strerror(errno);
                    return false;
                }
            } else if (buffered[0] == 'E') {
                summary = json::parse(payload, nullptr, false);
            }
            buffered.erase(0, 5 + n);
        }
        return true;
    };
    // The agent sends a frame at least every second while it captures.
    auto response = transport.stream(build_request(c), sink, std::chrono::seconds(10));
    if (open_failure) return report.fail(*open_failure);
    if (!write_error.empty()) return report.fail(Failure{kExitFailed, write_error, std::nullopt});
    if (!response)
        return report.fail(
            Failure{kExitUnreachable, describe(response.error(), c.socket, c.timeout)});
    if (response->status != 200) {
        json body = json::parse(response->body, nullptr, false);
        std::string message =
            body.is_object() && body.contains("error") && body["error"].is_string()
                ? body["error"].get<std::string>()
                : "the agent answered HTTP " + std::to_string(response->status);
        return report.fail(Failure{kExitFailed, message, response->status});
    }
    if (!summary || !summary->is_object())
        return report.fail(Failure{
            kExitFailed, "capture: the agent ended the capture without its summary", std::nullopt});
    if (c.json) {
        *io.err << summary->dump() << "\n";
    } else {
        *io.err << fmt::format(
            "xlbctl: captured {} packets ({} records) to {}; {} matched in the kernel, {} records "
            "lost (ended: {})\n",
            summary->value("packets", 0), summary->value("records", 0),
            c.write_to == "-" ? "standard output" : c.write_to, summary->value("matched", 0),
            summary->value("lost", 0), summary->value("ended", std::string("?")));
    }
    if (summary->value("lost", 0) > 0)
        report.warn(
            "the ring buffer lost records: capture fewer packets (--vip, --src, "
            "--outcome) or a shorter --snaplen");
    return kExitOk;
}

int run(const std::vector<std::string>& args, Io& io) {
    const Reporter report(io, wants_json(args));
    ParseResult parsed = parse_command(args, io.getenv);
    if (const ParseExit* e = std::get_if<ParseExit>(&parsed)) {
        *io.out << e->out;
        if (!e->error.empty()) return report.fail(Failure{e->code, e->error, std::nullopt});
        return e->code;
    }
    const Command& c = std::get<Command>(parsed);
    const Style style{colour_enabled(io)};
    if (c.fleet &&
        (fleet_write_verb(c.verb) || c.verb == Verb::kFleetStatus || c.verb == Verb::kFleetImport ||
         c.verb == Verb::kFleetExport || c.verb == Verb::kFleetHistory)) {
        auto store = io.open_store(c);
        if (!store)
            return report.fail(Failure{c.verb == Verb::kFleetStatus ? kExitFleetError : kExitUsage,
                                       "fleet store: " + store.error().message(), std::nullopt});
        const FleetRun r =
            run_fleet(c, **store, io.writer(), style,
                      io.wall_now ? io.wall_now() : std::chrono::system_clock::now());
        *io.out << r.out;
        io.out->flush();
        if (!r.error.empty()) return report.fail(Failure{r.code, r.error, std::nullopt});
        return r.code;
    }
    std::unique_ptr<Transport> transport = io.connect(c);
    if (c.verb == Verb::kTop) return top(c, *transport, io, style, report);
    if (c.watch_seconds) return watch(c, *transport, io, style, report);
    if (c.verb == Verb::kReload) return reload(c, *transport, io, style, report);
    if (c.verb == Verb::kExport) return export_state(c, *transport, io, report);
    if (c.verb == Verb::kDiff) return diff(c, *transport, io, style, report);
    if (c.verb == Verb::kCapture) return capture(c, *transport, io, report);
    if (c.verb == Verb::kQuicCid || c.verb == Verb::kQuicDecode)
        return quic(c, *transport, io, style, report);
    if (c.verb == Verb::kStatus && !c.peers.empty())
        return compare_with_peers(c, *transport, io, style, report);

    auto reply = exchange(*transport, build_request(c), c);
    if (!reply) return report.fail(reply.error());
    try {
        *io.out << (c.json ? render_json(reply->body) : render_human(c, reply->body, style));
        if (reply->status == 202)
            if (auto warning = pending_warning(c, reply->body); !warning.empty())
                report.warn(warning);
    } catch (const json::exception& e) {
        return report.fail(malformed(c, e));
    }
    io.out->flush();
    if (c.wait) return wait_for_drain(c, reply->body, *transport, io, report);
    return kExitOk;
}

Io process_io() {
    Io io;
    io.out = &std::cout;
    io.err = &std::cerr;
    io.out_is_tty = ::isatty(STDOUT_FILENO) == 1;
    io.getenv = [](const char* name) -> const char* { return std::getenv(name); };
    io.connect = [](const Command& c) -> std::unique_ptr<Transport> {
        return std::make_unique<UnixSocketTransport>(c.socket, c.timeout, c.reason);
    };
    io.sleep = [](std::chrono::milliseconds total) {
        const auto end = std::chrono::steady_clock::now() + total;
        while (!g_interrupted && std::chrono::steady_clock::now() < end) {
            const auto left = end - std::chrono::steady_clock::now();
            const auto step = std::chrono::duration_cast<std::chrono::milliseconds>(
                std::min<std::chrono::steady_clock::duration>(left, std::chrono::milliseconds(50)));
            if (g_keys)
                watch_keys(step);
            else
                std::this_thread::sleep_for(step);
        }
    };
    io.now = [] { return std::chrono::steady_clock::now(); };
    io.wall_time = [] {
        const std::time_t now = std::time(nullptr);
        std::tm tm{};
        ::gmtime_r(&now, &tm);
        char buf[32];
        std::strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%M:%SZ", &tm);
        return std::string(buf);
    };
    io.interrupted = [] { return g_interrupted.load(); };
    io.terminal_rows = []() -> std::optional<int> {
        winsize size{};
        if (::ioctl(STDOUT_FILENO, TIOCGWINSZ, &size) != 0 || size.ws_row == 0) return std::nullopt;
        return static_cast<int>(size.ws_row);
    };
    io.terminal_columns = []() -> std::optional<int> {
        winsize size{};
        if (::ioctl(STDOUT_FILENO, TIOCGWINSZ, &size) != 0 || size.ws_col == 0) return std::nullopt;
        return static_cast<int>(size.ws_col);
    };
    io.take_keys = []() -> std::shared_ptr<void> { return KeyboardMode::take(); };
    io.open_store = [](const Command& c) { return open_etcd_store(*c.fleet, c.timeout); };
    io.wall_now = [] { return std::chrono::system_clock::now(); };
    io.writer = [wall = io.wall_time] { return local_writer(wall()); };
    io.on_watch_start = [] {
        struct sigaction sa {};
        sa.sa_handler = on_signal;
        sigemptyset(&sa.sa_mask);
        ::sigaction(SIGINT, &sa, nullptr);
        ::sigaction(SIGTERM, &sa, nullptr);
    };
    return io;
}

}  // namespace xlb::xlbctl
