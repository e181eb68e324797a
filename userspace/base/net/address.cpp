// SPDX-License-Identifier: Apache-2.0
#include "xlb/net/address.h"

#include <arpa/inet.h>

#include <algorithm>
#include <charconv>
#include <cstdio>
#include <cstring>

namespace xlb::net {

std::expected<IpAddress, std::string> IpAddress::parse(std::string_view text) {
    // inet_pton reads a C string: an embedded NUL would cut the text and the
    // rest ("10.0.0.1\0evil") would be accepted silently.
    if (auto bad = std::find_if(text.begin(), text.end(),
                                [](char c) {
                                    const auto u = static_cast<unsigned char>(c);
                                    return u < 0x20 || u == 0x7f;
                                });
        bad != text.end()) {
        char code[8];
        std::snprintf(code, sizeof(code), "0x%02x", static_cast<unsigned char>(*bad));
        return std::unexpected("found control character " + std::string(code) + " at offset " +
                               std::to_string(bad - text.begin()) +
                               " of an address, expected e.g. 10.0.0.1 or 2001:db8::1");
    }
    std::string s(text);
    IpAddress out;
    if (s.find(':') == std::string::npos) {
        out.family = 4;
        if (inet_pton(AF_INET, s.c_str(), out.bytes.data()) == 1) return out;
        return std::unexpected("'" + s + "' is not an IPv4 address (expected e.g. 10.0.0.1)");
    }
    out.family = 6;
    if (inet_pton(AF_INET6, s.c_str(), out.bytes.data()) == 1) return out;
    return std::unexpected("'" + s + "' is not an IPv6 address (expected e.g. 2001:db8::1)");
}

IpAddress IpAddress::v4(std::uint8_t a, std::uint8_t b, std::uint8_t c, std::uint8_t d) {
    IpAddress out;
    out.family = 4;
    out.bytes[0] = a;
    out.bytes[1] = b;
    out.bytes[2] = c;
    out.bytes[3] = d;
    return out;
}

IpAddress IpAddress::from_words(const __be32 words[4], std::uint8_t family) {
    IpAddress out;
    out.family = family;
    std::memcpy(out.bytes.data(), words, family == 4 ? 4 : 16);
    return out;
}

std::string IpAddress::to_string() const {
    if (is_v4()) {
        // By hand: inet_ntop formats through sprintf, and the agent names
        // every backend (its Maglev identity) on every plan.
        std::string out;
        out.reserve(15);
        for (int i = 0; i < 4; ++i) {
            if (i > 0) out += '.';
            const unsigned octet = bytes[i];
            if (octet >= 100) out += static_cast<char>('0' + octet / 100);
            if (octet >= 10) out += static_cast<char>('0' + octet / 10 % 10);
            out += static_cast<char>('0' + octet % 10);
        }
        return out;
    }
    char buf[INET6_ADDRSTRLEN] = {};
    inet_ntop(AF_INET6, bytes.data(), buf, sizeof(buf));
    return buf;
}

void IpAddress::to_words(__be32 words[4]) const {
    std::memset(words, 0, 16);
    std::memcpy(words, bytes.data(), is_v4() ? 4 : 16);
}

std::expected<Endpoint, std::string> Endpoint::parse(std::string_view text) {
    std::string_view host, port;
    if (!text.empty() && text.front() == '[') {
        auto close = text.find(']');
        if (close == std::string_view::npos || close + 1 >= text.size() || text[close + 1] != ':')
            return std::unexpected("'" + std::string(text) +
                                   "' is not an endpoint (expected e.g. [2001:db8::1]:80)");
        host = text.substr(1, close - 1);
        port = text.substr(close + 2);
    } else {
        auto colon = text.rfind(':');
        if (colon == std::string_view::npos || text.find(':') != colon)
            return std::unexpected("'" + std::string(text) +
                                   "' is not an endpoint (expected e.g. 10.0.0.1:80 or "
                                   "[2001:db8::1]:80)");
        host = text.substr(0, colon);
        port = text.substr(colon + 1);
    }
    auto address = IpAddress::parse(host);
    if (!address) return std::unexpected(address.error());
    unsigned value = 0;
    auto [end, ec] = std::from_chars(port.data(), port.data() + port.size(), value);
    if (port.empty() || ec != std::errc{} || end != port.data() + port.size() || value > 65535)
        return std::unexpected("'" + std::string(port) + "' is not a port (expected 0-65535)");
    return Endpoint{*address, static_cast<std::uint16_t>(value)};
}

std::string Endpoint::to_string() const {
    if (address.is_v4()) return address.to_string() + ":" + std::to_string(port);
    return "[" + address.to_string() + "]:" + std::to_string(port);
}

namespace {

// The address with every bit past `length` cleared.
IpAddress masked(IpAddress address, unsigned length) {
    const unsigned bits = address.is_v4() ? 32 : 128;
    for (unsigned bit = length; bit < bits; ++bit)
        address.bytes[bit / 8] &= static_cast<std::uint8_t>(~(0x80u >> (bit % 8)));
    return address;
}

}  // namespace

std::expected<Prefix, std::string> Prefix::parse(std::string_view text) {
    const std::string shown = "'" + std::string(text) + "'";
    const auto slash = text.find('/');
    auto address = IpAddress::parse(text.substr(0, slash));
    const bool v6 = text.substr(0, slash).find(':') != std::string_view::npos;
    const std::string example = v6 ? "2001:db8:c::/48" : "192.0.2.0/24";
    if (!address)
        return std::unexpected(shown + " is not an address or prefix (expected e.g. " + example +
                               ")");
    const unsigned max = address->is_v4() ? 32 : 128;
    if (slash == std::string_view::npos) return Prefix{*address, static_cast<std::uint8_t>(max)};
    const std::string_view digits = text.substr(slash + 1);
    unsigned length = 0;
    auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), length);
    if (digits.empty() || ec != std::errc{} || end != digits.data() + digits.size() || length > max)
        return std::unexpected(shown + ": found prefix length '" + std::string(digits) +
                               "', expected 0-" + std::to_string(max) + " (e.g. " + example + ")");
    const IpAddress network = masked(*address, length);
    if (network != *address)
        return std::unexpected(shown + " has host bits set: expected the network address, " +
                               network.to_string() + "/" + std::to_string(length) + ", or " +
                               address->to_string() + " alone for that one address");
    return Prefix{network, static_cast<std::uint8_t>(length)};
}

std::string Prefix::to_string() const { return address.to_string() + "/" + std::to_string(length); }

bool Prefix::contains(const IpAddress& other) const {
    return other.family == address.family && masked(other, length) == address;
}

std::expected<MacAddress, std::string> parse_mac(std::string_view text) {
    MacAddress mac{};
    unsigned v[6];
    char tail;
    std::string s(text);
    if (std::sscanf(s.c_str(), "%2x:%2x:%2x:%2x:%2x:%2x%c", &v[0], &v[1], &v[2], &v[3], &v[4],
                    &v[5], &tail) != 6 ||
        s.size() != 17)
        return std::unexpected("'" + s +
                               "' is not a MAC address (expected e.g. 02:00:00:00:00:01)");
    for (int i = 0; i < 6; ++i) mac[i] = static_cast<std::uint8_t>(v[i]);
    return mac;
}

bool is_unicast_mac(const MacAddress& mac) {
    const bool zero = std::all_of(mac.begin(), mac.end(), [](std::uint8_t b) { return b == 0; });
    return !zero && (mac[0] & 1) == 0;
}

std::string mac_to_string(const MacAddress& mac) {
    char buf[18];
    std::snprintf(buf, sizeof(buf), "%02x:%02x:%02x:%02x:%02x:%02x", mac[0], mac[1], mac[2], mac[3],
                  mac[4], mac[5]);
    return buf;
}

}  // namespace xlb::net
