// SPDX-License-Identifier: Apache-2.0
// A stand-in for BIRD's control socket: greets, then answers each command
// line with what the test's handler returns (raw bytes, codes included).
// Special answers: kStall (never answer), kClose (hang up).
#pragma once

#include <atomic>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "xlb/announce/policy.h"

namespace xlb::announce::test {

inline net::IpAddress ip(const char* text) { return *net::IpAddress::parse(text); }

// A VIP whose table is live with `serving` of its 2 backends taking new flows.
inline VipInput vip(const char* key, const char* address, std::uint32_t serving) {
    VipInput v;
    v.key = key;
    v.address = ip(address);
    v.table_live = true;
    v.serving_backends = serving;
    v.configured_backends = 2;
    return v;
}

// A temporary directory removed (with its content) on destruction.
class TempDir {
public:
    TempDir();
    ~TempDir();
    TempDir(const TempDir&) = delete;
    TempDir& operator=(const TempDir&) = delete;
    const std::string& path() const { return path_; }
    std::string operator/(const std::string& name) const { return path_ + "/" + name; }

private:
    std::string path_;
};

class FakeBird {
public:
    static inline const std::string kStall = "\x01stall";
    static inline const std::string kClose = "\x01close";
    using Handler = std::function<std::string(const std::string& command)>;

    FakeBird(std::string socket_path, Handler handler,
             std::string greeting = "0001 BIRD 2.0.12 ready.\n");
    ~FakeBird();
    FakeBird(const FakeBird&) = delete;
    FakeBird& operator=(const FakeBird&) = delete;

    std::vector<std::string> commands() const;  // every line received, in order
    int count(const std::string& command) const;

private:
    void serve();
    void session(int fd);

    std::string path_;
    Handler handler_;
    std::string greeting_;
    int listen_fd_ = -1;
    std::atomic<bool> stop_{false};
    mutable std::mutex mu_;
    std::vector<std::string> commands_;
    std::thread thread_;
};

// The answers of a BIRD that runs protocols xlb4/xlb6 with `routes` (text
// prefixes such as "192.0.2.10/32"), and accepts every `configure`.
FakeBird::Handler healthy_bird(std::vector<std::string> routes4, std::vector<std::string> routes6);

}  // namespace xlb::announce::test
