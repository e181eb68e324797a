// SPDX-License-Identifier: Apache-2.0
// Address prefixes (CIDR) as operators write them in selectors: parsing,
// the refusals and their messages, and membership.
#include <gtest/gtest.h>

#include "xlb/net/address.h"

namespace xlb::net {
namespace {

#define EXPECT_HAS(text, part) EXPECT_NE((text).find(part), std::string::npos) << (text)

Prefix prefix(const char* text) {
    auto p = Prefix::parse(text);
    EXPECT_TRUE(p.has_value()) << text << ": " << (p ? "" : p.error());
    return p.value_or(Prefix{});
}

IpAddress ip(const char* text) { return *IpAddress::parse(text); }

TEST(NetPrefix, ParsesAndPrintsWithTheLength) {
    EXPECT_EQ(prefix("192.0.2.0/24").to_string(), "192.0.2.0/24");
    EXPECT_EQ(prefix("192.0.2.7").to_string(), "192.0.2.7/32");
    EXPECT_EQ(prefix("0.0.0.0/0").to_string(), "0.0.0.0/0");
    EXPECT_EQ(prefix("2001:db8:c::/48").to_string(), "2001:db8:c::/48");
    EXPECT_EQ(prefix("2001:DB8::7").to_string(), "2001:db8::7/128");
    EXPECT_EQ(prefix("::/0").length, 0);
    EXPECT_EQ(prefix("10.1.2.128/25").address, ip("10.1.2.128"));
}

TEST(NetPrefix, RefusesWithWhatWasWrong) {
    auto error = [](const char* text) {
        auto p = Prefix::parse(text);
        EXPECT_FALSE(p.has_value()) << text;
        return p ? std::string() : p.error();
    };
    EXPECT_HAS(error("192.0.2.7/24"),
               "'192.0.2.7/24' has host bits set: expected the network address, 192.0.2.0/24, or "
               "192.0.2.7 alone");
    EXPECT_HAS(error("2001:db8::1/32"), "2001:db8::/32");
    EXPECT_HAS(error("192.0.2.0/33"), "found prefix length '33', expected 0-32");
    EXPECT_HAS(error("2001:db8::/129"), "expected 0-128 (e.g. 2001:db8:c::/48)");
    EXPECT_HAS(error("192.0.2.0/"), "found prefix length ''");
    EXPECT_HAS(error("192.0.2.0/x"), "found prefix length 'x'");
    EXPECT_HAS(error("192.0.2.0/+8"), "found prefix length '+8'");
    EXPECT_HAS(error("clients/24"),
               "'clients/24' is not an address or prefix (expected e.g. "
               "192.0.2.0/24)");
    EXPECT_HAS(error(""), "is not an address or prefix");
}

TEST(NetPrefix, Contains) {
    EXPECT_TRUE(prefix("192.0.2.0/24").contains(ip("192.0.2.255")));
    EXPECT_FALSE(prefix("192.0.2.0/24").contains(ip("192.0.3.0")));
    EXPECT_TRUE(prefix("10.1.2.128/25").contains(ip("10.1.2.200")));
    EXPECT_FALSE(prefix("10.1.2.128/25").contains(ip("10.1.2.127")));
    EXPECT_TRUE(prefix("0.0.0.0/0").contains(ip("203.0.113.1")));
    EXPECT_FALSE(prefix("0.0.0.0/0").contains(ip("2001:db8::1"))) << "the other family";
    EXPECT_TRUE(prefix("192.0.2.7").contains(ip("192.0.2.7")));
    EXPECT_FALSE(prefix("192.0.2.7").contains(ip("192.0.2.6")));
    EXPECT_TRUE(prefix("2001:db8:c::/48").contains(ip("2001:db8:c:ffff::1")));
    EXPECT_FALSE(prefix("2001:db8:c::/48").contains(ip("2001:db8:d::1")));
    EXPECT_TRUE(prefix("2001:db8::/127").contains(ip("2001:db8::1")));
    EXPECT_FALSE(prefix("::/0").contains(ip("192.0.2.1")));
}

TEST(NetMac, UnicastIsNeitherZeroNorAGroupAddress) {
    EXPECT_TRUE(is_unicast_mac(*parse_mac("02:78:6c:62:00:01")));
    EXPECT_FALSE(is_unicast_mac(*parse_mac("00:00:00:00:00:00")));
    EXPECT_FALSE(is_unicast_mac(*parse_mac("01:00:5e:00:00:01"))) << "multicast";
    EXPECT_FALSE(is_unicast_mac(*parse_mac("ff:ff:ff:ff:ff:ff"))) << "broadcast";
}

}  // namespace
}  // namespace xlb::net
