// SPDX-License-Identifier: Apache-2.0
// The kernel's own words on a failed netlink request (internal to xlb_bpf).
#pragma once

#include <bpf/libbpf.h>

#include <mutex>
#include <string>

namespace xlb::bpf::detail {

// A failed netlink request carries an extended ack ("Underlying driver does
// not support XDP in native mode", "Peer MTU is too large to set XDP", ...).
// libbpf 1.1 only logs it, through its print callback; ExtackCapture installs
// a callback for the duration of one request that keeps the message of the
// calling thread and forwards everything else to the previous callback.
// Also how a request that is expected to fail (a query for a filter that may
// not exist) keeps libbpf from printing the kernel's message: take it and
// drop it.
class ExtackCapture {
public:
    ExtackCapture();
    ~ExtackCapture();
    ExtackCapture(const ExtackCapture&) = delete;
    ExtackCapture& operator=(const ExtackCapture&) = delete;
    const std::string& message() const { return message_; }

private:
    std::lock_guard<std::mutex> lock_;
    std::string message_;
};

}  // namespace xlb::bpf::detail
