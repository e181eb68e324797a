// SPDX-License-Identifier: Apache-2.0
// One run of xlbctl: parse, validate, send, render, exit code. Everything
// outside the process (streams, environment, the socket, time) comes in
// through Io, so tests run it with a fake agent.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <ostream>
#include <string>
#include <vector>

#include "xlb/xlbctl/command.h"
#include "xlb/xlbctl/fleet.h"
#include "xlb/xlbctl/transport.h"

namespace xlb::xlbctl {

struct Io {
    std::ostream* out = nullptr;
    std::ostream* err = nullptr;
    bool out_is_tty = false;
    GetEnv getenv;
    // A transport for the command's socket and timeout.
    std::function<std::unique_ptr<Transport>(const Command&)> connect;
    // stats --watch: wait (returns early when interrupted), the clock, the
    // wall time as RFC 3339 UTC, and whether Ctrl-C was pressed.
    std::function<void(std::chrono::milliseconds)> sleep;
    std::function<std::chrono::steady_clock::time_point()> now;
    std::function<std::string()> wall_time;
    std::function<bool()> interrupted;
    // Called once when a watch loop starts (main installs its SIGINT handler).
    std::function<void()> on_watch_start;
    // top: the terminal's height in lines and width in columns; empty or
    // nullopt: not a terminal.
    std::function<std::optional<int>()> terminal_rows;
    std::function<std::optional<int>()> terminal_columns;
    // top, painting in place: reads the keyboard one key at a time (standard
    // input in non-canonical mode, no echo), so that `q` quits (interrupted()
    // turns true); the terminal is as it was once the returned object is
    // gone. Empty, or returning null: no keyboard (not a terminal).
    std::function<std::shared_ptr<void>()> take_keys;
    // With a fleet: its store (etcd), and who writes (user, uid, host, now).
    std::function<Result<std::unique_ptr<FleetStore>>(const Command&)> open_store;
    std::function<fleet::Written()> writer;
    std::function<std::chrono::system_clock::time_point()> wall_now;
};

// The real process: std::cout/std::cerr, isatty(1), ::getenv, the Unix
// socket, steady_clock, and a SIGINT flag.
Io process_io();

// Returns the exit code (kExitOk, kExitFailed, kExitUnreachable).
int run(const std::vector<std::string>& args, Io& io);

}  // namespace xlb::xlbctl
