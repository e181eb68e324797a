// SPDX-License-Identifier: Apache-2.0
// Frames for packet tests and benchmarks: builders that compute every length
// and checksum, the expected encapsulation written independently of the BPF
// code, and a decoder that renders a frame field by field so a failing
// comparison shows which field differs.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "xlb/net/address.h"

namespace xlb::test {

using Bytes = std::vector<std::uint8_t>;
using net::IpAddress;
using net::MacAddress;

inline constexpr std::uint8_t kProtoIcmp = 1;
inline constexpr std::uint8_t kProtoIpip = 4;
inline constexpr std::uint8_t kProtoTcp = 6;
inline constexpr std::uint8_t kProtoUdp = 17;
inline constexpr std::uint8_t kProtoIpv6 = 41;
inline constexpr std::uint8_t kProtoIcmpv6 = 58;

inline constexpr std::uint8_t kTcpFin = 0x01;
inline constexpr std::uint8_t kTcpSyn = 0x02;
inline constexpr std::uint8_t kTcpRst = 0x04;
inline constexpr std::uint8_t kTcpPsh = 0x08;
inline constexpr std::uint8_t kTcpAck = 0x10;

struct Flow {
    IpAddress src, dst;
    std::uint16_t sport = 0, dport = 0;
    std::uint8_t proto = kProtoTcp;
};

struct Ipv6ExtHeader {
    std::uint8_t type = 0;  // 0 hop-by-hop, 43 routing, 44 fragment, 60 dest opts
    Bytes body;             // everything after next-header/length; padded to 8n-2
};

struct FrameOptions {
    MacAddress eth_src{0x02, 0, 0, 0, 0, 0x0c};
    MacAddress eth_dst{0x02, 0, 0, 0, 0, 0x1b};
    std::uint8_t tcp_flags = kTcpAck;
    std::uint32_t tcp_seq = 1000, tcp_ack = 2000;
    std::uint16_t tcp_window = 65535;
    Bytes tcp_options;  // multiple of 4 bytes, at most 40
    Bytes payload = Bytes{'h', 'e', 'l', 'l', 'o'};
    std::uint8_t ttl = 63;
    std::uint8_t tos = 0;  // IPv4 TOS / IPv6 traffic class
    std::uint16_t ipv4_id = 0x1234;
    std::uint16_t ipv4_frag = 0x4000;  // flags + offset, host order (DF by default)
    Bytes ipv4_options;                // multiple of 4 bytes
    std::vector<Ipv6ExtHeader> ipv6_ext;
    std::uint32_t ipv6_flow_label = 0x12345;
    std::size_t pad_to = 0;  // Ethernet padding up to this frame size
};

std::uint16_t internet_checksum(const std::uint8_t* data, std::size_t len, std::uint32_t sum = 0);

// Big-endian fields: appended to a packet being written, read from one.
void append_be16(Bytes& b, std::uint16_t v);
void append_be32(Bytes& b, std::uint32_t v);
std::uint32_t read_be32(const Bytes& b, std::size_t at);

// The IP packet (no Ethernet header) of a TCP or UDP flow.
Bytes make_ip_packet(const Flow& flow, const FrameOptions& opt = {});
// Ethernet + make_ip_packet.
Bytes make_frame(const Flow& flow, const FrameOptions& opt = {});
Bytes ethernet(const MacAddress& dst, const MacAddress& src, std::uint16_t ethertype,
               const Bytes& payload);

// ICMP "fragmentation needed" (IPv4) or ICMPv6 "packet too big" from `router`
// to the quoted packet's source (or to `to`), quoting the first bytes of `quoted`.
Bytes make_icmp_too_big_frame(const IpAddress& router, const Bytes& quoted_ip_packet,
                              std::uint32_t mtu, const FrameOptions& opt = {},
                              const std::optional<IpAddress>& to = std::nullopt);

struct Encapsulation {
    IpAddress outer_src, outer_dst;
    MacAddress eth_src, eth_dst;
    std::uint8_t tos = 0;
    std::uint8_t ttl = 64;         // XLB_ENCAP_TTL; one less once passed on by a backend
    bool df = false;               // IPv4 outer only
    std::uint32_t flow_label = 0;  // IPv6 outer only
    // GUE (abi.h, struct xlb_guehdr): UDP from gue_sport to *gue_port, checksum 0,
    // a 4-byte GUE header naming the inner protocol, then `gue_extension`
    // (whole 32-bit words, counted in the header's Hlen).
    std::optional<std::uint16_t> gue_port;
    std::uint16_t gue_sport = 0;
    Bytes gue_extension;
};
// The GUE private data of a second-chance hint naming `backend` (abi.h,
// struct xlb_gue_hint, written out byte by byte): 8 bytes for an IPv4
// address, 20 for an IPv6 one. state: 1 pass on, 2 passed.
Bytes second_chance_hint(const IpAddress& backend, std::uint8_t state = 1);

// The frame an IPIP / IP6IP6 / IPv4-in-IPv6 encapsulation of `inner_ip`, or
// the same inside UDP and GUE, must be.
Bytes encapsulate(const Bytes& inner_ip, const Encapsulation& enc);

// "eth 02:..>02:.. type 0x0800 | ipv4 ... | tcp ..." one field per line.
std::string describe(const Bytes& frame);
// Checks every IPv4 header checksum and every TCP/UDP/ICMP checksum it can
// reach (through encapsulation). Empty when all are valid, else what is wrong.
std::string checksum_errors(const Bytes& frame);

// The IP packet inside a frame (without Ethernet header or padding).
Bytes ip_packet_of(const Bytes& frame);

}  // namespace xlb::test
