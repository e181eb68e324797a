// SPDX-License-Identifier: Apache-2.0
#include "rtnl.h"

#include <linux/rtnetlink.h>
#include <sys/socket.h>
#include <sys/time.h>

#include <cerrno>
#include <cstring>
#include <optional>

namespace xlb::netlink::detail {

Message::Message(std::uint16_t type, std::uint16_t flags) {
    append(NLMSG_HDRLEN);
    nlmsghdr* h = header();
    h->nlmsg_type = type;
    h->nlmsg_flags = static_cast<std::uint16_t>(NLM_F_REQUEST | flags);
}

std::size_t Message::append(std::size_t len) {
    std::size_t at = buffer_.size();
    buffer_.resize(at + NLMSG_ALIGN(len), std::byte{0});
    header()->nlmsg_len = static_cast<std::uint32_t>(buffer_.size());
    return at;
}

void Message::attribute(std::uint16_t type, const void* data, std::size_t len) {
    std::size_t at = append(RTA_LENGTH(len));
    auto* rta = reinterpret_cast<rtattr*>(buffer_.data() + at);
    rta->rta_type = type;
    rta->rta_len = static_cast<unsigned short>(RTA_LENGTH(len));
    if (len > 0) std::memcpy(RTA_DATA(rta), data, len);
}

void Message::attribute_string(std::uint16_t type, std::string_view value) {
    std::string terminated(value);  // the kernel wants the NUL
    attribute(type, terminated.c_str(), terminated.size() + 1);
}

void for_each_attribute(
    const nlmsghdr& msg, std::size_t header_len,
    const std::function<void(std::uint16_t, std::span<const std::byte>)>& visit) {
    std::size_t start = NLMSG_LENGTH(NLMSG_ALIGN(header_len));
    if (msg.nlmsg_len < start) return;
    auto* base = reinterpret_cast<const std::byte*>(&msg);
    auto* rta = reinterpret_cast<const rtattr*>(base + start);
    auto left = static_cast<int>(msg.nlmsg_len - start);
    for (; RTA_OK(rta, left); rta = RTA_NEXT(rta, left)) {
        auto* data = static_cast<const std::byte*>(RTA_DATA(const_cast<rtattr*>(rta)));
        visit(static_cast<std::uint16_t>(rta->rta_type & NLA_TYPE_MASK),
              std::span<const std::byte>(data, RTA_PAYLOAD(rta)));
    }
}

void for_each_message(std::span<const std::byte> datagram,
                      const std::function<void(const nlmsghdr&)>& visit) {
    auto* nlh = reinterpret_cast<const nlmsghdr*>(datagram.data());
    auto left = static_cast<unsigned int>(datagram.size());
    for (; NLMSG_OK(nlh, left); nlh = NLMSG_NEXT(nlh, left)) visit(*nlh);
}

KernelStatus parse_error_message(const nlmsghdr& msg) {
    KernelStatus status;
    if (msg.nlmsg_len < NLMSG_LENGTH(sizeof(nlmsgerr))) {
        status.error = -EPROTO;
        return status;
    }
    auto* err = static_cast<const nlmsgerr*>(NLMSG_DATA(const_cast<nlmsghdr*>(&msg)));
    status.error = err->error;
    if (!(msg.nlmsg_flags & NLM_F_ACK_TLVS)) return status;
    // With NETLINK_CAP_ACK the echoed request is cut to its header, so the
    // TLVs start right after struct nlmsgerr, unless the kernel says it is not capped.
    std::size_t offset = sizeof(nlmsgerr);
    if (!(msg.nlmsg_flags & NLM_F_CAPPED)) offset += err->msg.nlmsg_len - sizeof(nlmsghdr);
    std::size_t start = NLMSG_HDRLEN + NLMSG_ALIGN(offset);
    if (msg.nlmsg_len <= start) return status;
    auto* base = reinterpret_cast<const std::byte*>(&msg);
    auto* rta = reinterpret_cast<const rtattr*>(base + start);
    auto left = static_cast<int>(msg.nlmsg_len - start);
    for (; RTA_OK(rta, left); rta = RTA_NEXT(rta, left)) {
        if ((rta->rta_type & NLA_TYPE_MASK) != NLMSGERR_ATTR_MSG) continue;
        const char* text = static_cast<const char*>(RTA_DATA(const_cast<rtattr*>(rta)));
        status.message.assign(text, strnlen(text, RTA_PAYLOAD(rta)));
    }
    return status;
}

Result<Socket> Socket::open(std::span<const unsigned> groups) {
    int type = SOCK_RAW | SOCK_CLOEXEC | (groups.empty() ? 0 : SOCK_NONBLOCK);
    bpf::UniqueFd fd(::socket(AF_NETLINK, type, NETLINK_ROUTE));
    if (!fd) return bpf::fail(errno, "open rtnetlink socket");

    int one = 1;
    // Best effort: older kernels lack some of these, and nothing depends on them
    // for correctness (strict checking only narrows dumps; userspace filters too).
    (void)::setsockopt(fd.get(), SOL_NETLINK, NETLINK_EXT_ACK, &one, sizeof one);
    (void)::setsockopt(fd.get(), SOL_NETLINK, NETLINK_CAP_ACK, &one, sizeof one);
    (void)::setsockopt(fd.get(), SOL_NETLINK, NETLINK_GET_STRICT_CHK, &one, sizeof one);

    sockaddr_nl local{};
    local.nl_family = AF_NETLINK;
    if (::bind(fd.get(), reinterpret_cast<sockaddr*>(&local), sizeof local) < 0)
        return bpf::fail(errno, "bind rtnetlink socket");

    if (groups.empty()) {
        // A request socket: never wait for the kernel forever.
        timeval limit{.tv_sec = 5, .tv_usec = 0};
        (void)::setsockopt(fd.get(), SOL_SOCKET, SO_RCVTIMEO, &limit, sizeof limit);
    } else {
        // Bursts of neighbour events (a flush of a big table) should not
        // overflow the queue; when they do anyway, receive() reports ENOBUFS.
        int size = 1 << 20;
        if (::setsockopt(fd.get(), SOL_SOCKET, SO_RCVBUFFORCE, &size, sizeof size) < 0)
            (void)::setsockopt(fd.get(), SOL_SOCKET, SO_RCVBUF, &size, sizeof size);
        for (unsigned group : groups) {
            if (::setsockopt(fd.get(), SOL_NETLINK, NETLINK_ADD_MEMBERSHIP, &group, sizeof group) <
                0)
                return bpf::fail(errno, "join rtnetlink group " + std::to_string(group));
        }
    }
    return Socket(std::move(fd));
}

Result<std::uint32_t> Socket::send(Message& msg, std::string_view what) {
    nlmsghdr* h = msg.header();
    h->nlmsg_seq = ++seq_;
    sockaddr_nl kernel{};
    kernel.nl_family = AF_NETLINK;
    auto bytes = msg.bytes();
    for (;;) {
        ssize_t n = ::sendto(fd_.get(), bytes.data(), bytes.size(), 0,
                             reinterpret_cast<sockaddr*>(&kernel), sizeof kernel);
        if (n >= 0) break;
        if (errno == EINTR) continue;
        return bpf::fail(errno, std::string(what));
    }
    return h->nlmsg_seq;
}

Result<std::size_t> Socket::receive(std::span<std::byte> buffer, std::string_view what) {
    for (;;) {
        ssize_t n = ::recv(fd_.get(), buffer.data(), buffer.size(), MSG_TRUNC | MSG_DONTWAIT);
        if (n >= 0) {
            if (static_cast<std::size_t>(n) > buffer.size())
                return bpf::fail(EMSGSIZE, std::string(what) + ": netlink message of " +
                                               std::to_string(n) + " bytes truncated");
            return static_cast<std::size_t>(n);
        }
        if (errno == EINTR) continue;
        if (errno == EAGAIN || errno == EWOULDBLOCK) return std::size_t{0};
        return bpf::fail(errno, std::string(what));
    }
}

Result<void> Socket::transact(Message& msg, std::string_view what,
                              const std::function<void(const nlmsghdr&)>& on_reply) {
    bool dump = (msg.header()->nlmsg_flags & NLM_F_DUMP) == NLM_F_DUMP;
    if (!dump) msg.header()->nlmsg_flags |= NLM_F_ACK;
    auto seq = send(msg, what);
    if (!seq) return std::unexpected(seq.error());

    std::vector<std::byte> buffer(kReceiveBufferSize);
    for (;;) {
        ssize_t n = ::recv(fd_.get(), buffer.data(), buffer.size(), MSG_TRUNC);
        if (n < 0) {
            if (errno == EINTR) continue;
            if (errno == EAGAIN || errno == EWOULDBLOCK)
                return bpf::fail(ETIMEDOUT, std::string(what) + ": no answer from the kernel");
            return bpf::fail(errno, std::string(what));
        }
        if (static_cast<std::size_t>(n) > buffer.size())
            return bpf::fail(EMSGSIZE, std::string(what) + ": netlink reply truncated");

        bool finished = false;
        std::optional<Error> failure;
        for_each_message(
            std::span(buffer.data(), static_cast<std::size_t>(n)), [&](const nlmsghdr& h) {
                if (finished || failure || h.nlmsg_seq != *seq) return;
                if (h.nlmsg_type == NLMSG_ERROR) {
                    KernelStatus status = parse_error_message(h);
                    if (status.error != 0)
                        failure = bpf::make_error(status.error, std::string(what), status.message);
                    finished = true;
                } else if (h.nlmsg_type == NLMSG_DONE) {
                    if (h.nlmsg_len >= NLMSG_LENGTH(sizeof(int))) {
                        int error = 0;
                        std::memcpy(&error, NLMSG_DATA(const_cast<nlmsghdr*>(&h)), sizeof error);
                        if (error < 0) failure = bpf::make_error(error, std::string(what));
                    }
                    finished = true;
                } else if (h.nlmsg_type >= NLMSG_MIN_TYPE && on_reply) {
                    on_reply(h);
                }
            });
        if (failure) return std::unexpected(*failure);
        if (finished) return {};
    }
}

}  // namespace xlb::netlink::detail
