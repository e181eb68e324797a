// SPDX-License-Identifier: Apache-2.0
// A client of BIRD 2's control socket (the one birdc uses): a Unix stream
// socket, one command per line, replies as lines of
//   "DDDD-text"  a line of reply code DDDD, more follow
//   " text"      a further line of the previous code
//   "DDDD text"  the last line of the reply
//   "+..."       spontaneous output (logs when `debug` is on), skipped
// (codes in BIRD's doc/reply_codes: 0xxx done, 1xxx table entry, 2xxx table
// heading, 8xxx run-time error, 9xxx parse error). The server greets with
// "0001 BIRD 2.0.12 ready.".
//
// Every call has a deadline (connect, and each command until its last line):
// a wedged BIRD fails the call, it never blocks the agent beyond it.
// Blocking I/O on the caller's thread; one Client per thread.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "xlb/error.h"
#include "xlb/net/address.h"

namespace xlb::announce::bird {

struct ReplyLine {
    int code = 0;  // a continuation line carries the code it continues
    std::string text;
};

struct Reply {
    std::vector<ReplyLine> lines;
    int code() const { return lines.empty() ? 0 : lines.back().code; }  // of the last line
    // Every line's text, one per line (BIRD's words, for errors and logs).
    std::string text() const;
    // The text of the lines with this code.
    std::vector<std::string> texts(int code) const;
};

// Cuts a byte stream into replies: feed() what was read, take() each reply
// once its last line arrived. Separate from the socket so that tests can
// give it any split of the bytes.
class ReplyParser {
public:
    // Errors on a line that is neither "DDDD-", "DDDD ", " " nor "+".
    Result<void> feed(std::string_view bytes);
    std::optional<Reply> take();
    std::size_t buffered() const { return partial_.size() + current_.lines.size(); }

private:
    Result<void> line(std::string_view text);
    std::string partial_;  // bytes after the last newline
    Reply current_;        // lines of the reply in progress
    std::vector<Reply> done_;
    int last_code_ = 0;
};

enum class ConfigureOutcome {
    kReconfigured,  // 0003: the new configuration is running
    kInProgress,    // 0004: accepted; protocols are still shutting down/restarting
    kQueued,        // 0005: accepted after the reconfiguration in progress
};
std::string_view to_string(ConfigureOutcome);

struct ConfigureResult {
    ConfigureOutcome outcome = ConfigureOutcome::kReconfigured;
    std::string message;  // BIRD's text: "Reading configuration from ...\nReconfigured"
};

struct ProtocolInfo {
    std::string name;   // "xlb4"
    std::string proto;  // "Static", "BGP"
    std::string table;  // "master4", "---"
    std::string state;  // "up", "down", "start", "stop"
    std::string info;   // since and info columns as BIRD prints them
    bool up() const { return state == "up"; }
};

struct RouteEntry {
    net::IpAddress address;
    int length = 0;
    std::string table;     // "master4"
    std::string protocol;  // "xlb4"
};

class Client {
public:
    // Connects and reads the greeting, both within `timeout`. The error names
    // the socket and says what to check.
    static Result<Client> connect(const std::string& socket_path,
                                  std::chrono::milliseconds timeout);

    Client(Client&& other) noexcept;
    Client& operator=(Client&& other) noexcept;
    Client(const Client&) = delete;
    Client& operator=(const Client&) = delete;
    ~Client();

    const std::string& socket_path() const { return path_; }
    // An exchange failed (timeout, closed, unreadable): BIRD went away or is
    // wedged, as opposed to an answer BIRD gave. Further commands fail.
    bool broken() const { return broken_; }
    const std::string& greeting() const { return greeting_; }  // "BIRD 2.0.12 ready."
    std::string version() const;                               // "2.0.12"

    // Sends one command line and reads its whole reply within the timeout.
    // A reply BIRD gives is returned whatever its code (8xxx, 9xxx too): the
    // helpers below judge codes.
    Result<Reply> command(std::string_view line);

    // `configure`: BIRD re-reads its configuration file (and our include).
    // 0003/0004/0005 succeed; a configuration error (8002) fails with BIRD's
    // text ("/run/xlb/bird/xlb.conf:3:8 Invalid IPv4 address ..."), and BIRD
    // keeps running the previous configuration.
    Result<ConfigureResult> configure();

    // `show protocols`: every protocol, in BIRD's order.
    Result<std::vector<ProtocolInfo>> show_protocols();

    // `show route protocol NAME`: the routes NAME put in its tables. Fails
    // when BIRD knows no protocol of that name (check show_protocols() first).
    Result<std::vector<RouteEntry>> show_routes(std::string_view protocol);

private:
    Client(int fd, std::string path, std::chrono::milliseconds timeout);
    Result<Reply> read_reply(std::string_view for_what);
    Error socket_error(int code, std::string what, std::string hint = {});

    int fd_ = -1;
    std::string path_;
    std::chrono::milliseconds timeout_{};
    std::string greeting_;
    ReplyParser parser_;
    bool broken_ = false;
};

// The routes of a `show route` reply (exposed for tests).
std::vector<RouteEntry> parse_routes_reply(const Reply& reply);
// The protocols of a `show protocols` reply (exposed for tests).
std::vector<ProtocolInfo> parse_protocols_reply(const Reply& reply);

}  // namespace xlb::announce::bird
