// SPDX-License-Identifier: Apache-2.0
// Internal: a minimal rtnetlink (NETLINK_ROUTE) client. Builds one request,
// sends it, and walks the replies; used by link.cpp, neighbor.cpp and
// watcher.cpp. Not installed, not part of the library's API.
#pragma once

#include <linux/netlink.h>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "xlb/bpf/error.h"
#include "xlb/bpf/fd.h"

namespace xlb::netlink::detail {

using bpf::Error;
using bpf::Result;

// One netlink message under construction: header, the family header (ndmsg,
// ifinfomsg, ...), then attributes. Each part is 4-byte aligned.
class Message {
public:
    Message(std::uint16_t type, std::uint16_t flags);

    // Appends the family header; call once, before any attribute.
    template <typename T>
    T& family_header() {
        std::size_t at = append(sizeof(T));
        return *reinterpret_cast<T*>(buffer_.data() + at);
    }

    void attribute(std::uint16_t type, const void* data, std::size_t len);
    void attribute_u32(std::uint16_t type, std::uint32_t value) {
        attribute(type, &value, sizeof value);
    }
    void attribute_string(std::uint16_t type, std::string_view value);

    nlmsghdr* header() { return reinterpret_cast<nlmsghdr*>(buffer_.data()); }
    std::span<const std::byte> bytes() const { return buffer_; }

private:
    std::size_t append(std::size_t len);  // returns the offset of the new zeroed part

    // std::vector storage is aligned for any scalar type; every part is
    // padded to NLMSG_ALIGNTO, so the casts above stay aligned.
    std::vector<std::byte> buffer_;
};

// Iterates the attributes that follow a family header of `header_len` bytes.
// `visit(type, payload)` gets the attribute type without the NLA_F_* bits.
void for_each_attribute(
    const nlmsghdr& msg, std::size_t header_len,
    const std::function<void(std::uint16_t, std::span<const std::byte>)>& visit);

// Receive buffer large enough for any rtnetlink datagram the kernel sends
// (dump skbs are at most 32 KiB).
inline constexpr std::size_t kReceiveBufferSize = 64 * 1024;

class Socket {
public:
    // A NETLINK_ROUTE socket in the calling thread's network namespace, with
    // extended acks and strict checking of dump requests. `groups` are
    // RTNLGRP_* multicast groups to join; a socket with groups is non-blocking.
    static Result<Socket> open(std::span<const unsigned> groups = {});

    int fd() const { return fd_.get(); }

    // Sends `msg` and processes replies until the kernel's ack (or NLMSG_DONE
    // for a dump). Every reply that is not a control message goes to
    // `on_reply`. A negative ack becomes an Error naming `what` and carrying
    // the kernel's extended-ack text, if any, as the hint. Only for sockets
    // opened without groups.
    Result<void> transact(Message& msg, std::string_view what,
                          const std::function<void(const nlmsghdr&)>& on_reply = {});

    // Sends `msg` without waiting; returns the sequence number it was given.
    Result<std::uint32_t> send(Message& msg, std::string_view what);

    // One non-blocking receive into `buffer`; 0 bytes means nothing is queued.
    // ENOBUFS (the kernel dropped notifications) is returned as an error with
    // code ENOBUFS so that the caller can resynchronise.
    Result<std::size_t> receive(std::span<std::byte> buffer, std::string_view what);

private:
    explicit Socket(bpf::UniqueFd fd) : fd_(std::move(fd)) {}

    bpf::UniqueFd fd_;
    std::uint32_t seq_ = 0;
};

// Calls `visit` for every complete message in one received datagram.
void for_each_message(std::span<const std::byte> datagram,
                      const std::function<void(const nlmsghdr&)>& visit);

// The error carried by an NLMSG_ERROR message (0 for an ack) and, when the
// kernel attached one, its extended-ack text.
struct KernelStatus {
    int error = 0;  // negative errno, 0 = ack
    std::string message;
};
KernelStatus parse_error_message(const nlmsghdr& msg);

}  // namespace xlb::netlink::detail
