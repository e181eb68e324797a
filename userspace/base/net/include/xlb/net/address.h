// SPDX-License-Identifier: Apache-2.0
// IP addresses, endpoints and MAC addresses as the operator writes them and as
// the BPF maps store them (16-byte fields, IPv4 in the first word).
#pragma once

#include <endian.h>
#include <linux/types.h>

#include <array>
#include <compare>
#include <cstdint>
#include <cstring>
#include <expected>
#include <string>
#include <string_view>

namespace xlb::net {

struct IpAddress {
    std::uint8_t family = 4;               // 4 or 6 (XLB_FAMILY_V4 / XLB_FAMILY_V6)
    std::array<std::uint8_t, 16> bytes{};  // network order; IPv4 uses the first 4

    // "10.0.0.1" or "2001:db8::1"; the error says what was wrong.
    static std::expected<IpAddress, std::string> parse(std::string_view text);
    static IpAddress v4(std::uint8_t a, std::uint8_t b, std::uint8_t c, std::uint8_t d);
    // From a map's 16-byte field.
    static IpAddress from_words(const __be32 words[4], std::uint8_t family);

    bool is_v4() const { return family == 4; }
    std::string to_string() const;
    // Into a map's 16-byte field (zero-filled for IPv4).
    void to_words(__be32 words[4]) const;

    // Family, then bytes in network order: the order of the defaulted
    // comparison, done on two big-endian words instead of a memcmp call
    // (the agent keeps thousands of backends in ordered maps).
    std::strong_ordering operator<=>(const IpAddress& other) const {
        if (auto c = family <=> other.family; c != 0) return c;
        if (auto c = word(0) <=> other.word(0); c != 0) return c;
        return word(1) <=> other.word(1);
    }
    bool operator==(const IpAddress& other) const {
        return family == other.family && word(0) == other.word(0) && word(1) == other.word(1);
    }

private:
    std::uint64_t word(int i) const {
        std::uint64_t w;
        std::memcpy(&w, bytes.data() + 8 * i, 8);
        return be64toh(w);
    }
};

struct Endpoint {
    IpAddress address;
    std::uint16_t port = 0;

    // "10.0.0.1:80" or "[2001:db8::1]:80".
    static std::expected<Endpoint, std::string> parse(std::string_view text);
    std::string to_string() const;

    auto operator<=>(const Endpoint&) const = default;
};

// An address prefix (CIDR), e.g. a client selector: "192.0.2.0/24",
// "2001:db8:c::/48", or an address alone (/32, /128). Host bits must be zero:
// "192.0.2.7/24" is refused with the prefix it probably meant, since taking it
// as 192.0.2.0/24 silently widens a selector that may delete entries.
struct Prefix {
    IpAddress address;        // the network address, host bits zero
    std::uint8_t length = 0;  // 0-32 (IPv4) or 0-128 (IPv6)

    static std::expected<Prefix, std::string> parse(std::string_view text);
    // "192.0.2.0/24"; always with the length, also for /32 and /128.
    std::string to_string() const;
    // False for an address of the other family.
    bool contains(const IpAddress& address) const;

    auto operator<=>(const Prefix&) const = default;
};

using MacAddress = std::array<std::uint8_t, 6>;
// "02:00:00:00:00:01"
std::expected<MacAddress, std::string> parse_mac(std::string_view text);
std::string mac_to_string(const MacAddress& mac);
// Not all zero and not a group (multicast/broadcast) address: a MAC a frame
// can be sent to as a next hop.
bool is_unicast_mac(const MacAddress& mac);

}  // namespace xlb::net
