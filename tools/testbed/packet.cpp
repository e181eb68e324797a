// SPDX-License-Identifier: Apache-2.0
#include "packet.h"

#include <fmt/format.h>

#include <algorithm>
#include <stdexcept>

namespace xlb::test {
namespace {

void put16(Bytes& b, std::uint16_t v) {
    b.push_back(static_cast<std::uint8_t>(v >> 8));
    b.push_back(static_cast<std::uint8_t>(v));
}
void put32(Bytes& b, std::uint32_t v) {
    put16(b, static_cast<std::uint16_t>(v >> 16));
    put16(b, static_cast<std::uint16_t>(v));
}
void set16(Bytes& b, std::size_t at, std::uint16_t v) {
    b[at] = static_cast<std::uint8_t>(v >> 8);
    b[at + 1] = static_cast<std::uint8_t>(v);
}
std::uint16_t get16(const std::uint8_t* p) { return static_cast<std::uint16_t>(p[0] << 8 | p[1]); }
std::uint32_t get32(const std::uint8_t* p) {
    return static_cast<std::uint32_t>(get16(p)) << 16 | get16(p + 2);
}
void append(Bytes& b, const std::uint8_t* p, std::size_t n) { b.insert(b.end(), p, p + n); }

std::size_t addr_len(const IpAddress& a) { return a.is_v4() ? 4 : 16; }

// Sum of the pseudo header for an upper-layer checksum.
std::uint32_t pseudo_sum(const IpAddress& src, const IpAddress& dst, std::uint8_t proto,
                         std::size_t l4_len) {
    Bytes ph;
    append(ph, src.bytes.data(), addr_len(src));
    append(ph, dst.bytes.data(), addr_len(dst));
    if (src.is_v4()) {
        ph.push_back(0);
        ph.push_back(proto);
        put16(ph, static_cast<std::uint16_t>(l4_len));
    } else {
        put32(ph, static_cast<std::uint32_t>(l4_len));
        put32(ph, proto);
    }
    std::uint32_t sum = 0;
    for (std::size_t i = 0; i < ph.size(); i += 2) sum += get16(&ph[i]);
    return sum;
}

// TCP/UDP/ICMP(v6) header + payload with its checksum.
Bytes make_l4(const Flow& flow, const FrameOptions& opt) {
    Bytes l4;
    if (flow.proto == kProtoTcp) {
        put16(l4, flow.sport);
        put16(l4, flow.dport);
        put32(l4, opt.tcp_seq);
        put32(l4, opt.tcp_ack);
        if (opt.tcp_options.size() % 4 != 0 || opt.tcp_options.size() > 40)
            throw std::invalid_argument("TCP options must be a multiple of 4 bytes, at most 40");
        l4.push_back(static_cast<std::uint8_t>((5 + opt.tcp_options.size() / 4) << 4));
        l4.push_back(opt.tcp_flags);
        put16(l4, opt.tcp_window);
        put16(l4, 0);  // checksum
        put16(l4, 0);  // urgent
        l4.insert(l4.end(), opt.tcp_options.begin(), opt.tcp_options.end());
        l4.insert(l4.end(), opt.payload.begin(), opt.payload.end());
        set16(l4, 16,
              internet_checksum(l4.data(), l4.size(),
                                pseudo_sum(flow.src, flow.dst, kProtoTcp, l4.size())));
    } else if (flow.proto == kProtoUdp) {
        put16(l4, flow.sport);
        put16(l4, flow.dport);
        put16(l4, static_cast<std::uint16_t>(8 + opt.payload.size()));
        put16(l4, 0);
        l4.insert(l4.end(), opt.payload.begin(), opt.payload.end());
        std::uint16_t c = internet_checksum(l4.data(), l4.size(),
                                            pseudo_sum(flow.src, flow.dst, kProtoUdp, l4.size()));
        set16(l4, 6, c == 0 ? 0xffff : c);
    } else {
        l4 = opt.payload;  // raw upper layer supplied by the caller
    }
    return l4;
}

Bytes ipv4_header(const IpAddress& src, const IpAddress& dst, std::uint8_t proto,
                  std::size_t payload_len, const FrameOptions& opt) {
    if (opt.ipv4_options.size() % 4 != 0 || opt.ipv4_options.size() > 40)
        throw std::invalid_argument("IPv4 options must be a multiple of 4 bytes, at most 40");
    Bytes h;
    std::size_t hlen = 20 + opt.ipv4_options.size();
    h.push_back(static_cast<std::uint8_t>(0x40 | (hlen / 4)));
    h.push_back(opt.tos);
    put16(h, static_cast<std::uint16_t>(hlen + payload_len));
    put16(h, opt.ipv4_id);
    put16(h, opt.ipv4_frag);
    h.push_back(opt.ttl);
    h.push_back(proto);
    put16(h, 0);
    append(h, src.bytes.data(), 4);
    append(h, dst.bytes.data(), 4);
    h.insert(h.end(), opt.ipv4_options.begin(), opt.ipv4_options.end());
    set16(h, 10, internet_checksum(h.data(), h.size()));
    return h;
}

Bytes ipv6_packet(const IpAddress& src, const IpAddress& dst, std::uint8_t proto,
                  const Bytes& upper, const FrameOptions& opt) {
    Bytes ext;
    std::uint8_t first = opt.ipv6_ext.empty() ? proto : opt.ipv6_ext.front().type;
    for (std::size_t i = 0; i < opt.ipv6_ext.size(); ++i) {
        const auto& e = opt.ipv6_ext[i];
        std::uint8_t next = i + 1 < opt.ipv6_ext.size() ? opt.ipv6_ext[i + 1].type : proto;
        std::size_t total = 2 + e.body.size();
        if (total % 8 != 0) throw std::invalid_argument("IPv6 extension header not 8n bytes");
        ext.push_back(next);
        ext.push_back(e.type == 44 ? 0 : static_cast<std::uint8_t>(total / 8 - 1));
        ext.insert(ext.end(), e.body.begin(), e.body.end());
    }
    Bytes p;
    std::uint32_t vtf =
        (6u << 28) | (static_cast<std::uint32_t>(opt.tos) << 20) | (opt.ipv6_flow_label & 0xfffff);
    put32(p, vtf);
    put16(p, static_cast<std::uint16_t>(ext.size() + upper.size()));
    p.push_back(first);
    p.push_back(opt.ttl);
    append(p, src.bytes.data(), 16);
    append(p, dst.bytes.data(), 16);
    p.insert(p.end(), ext.begin(), ext.end());
    p.insert(p.end(), upper.begin(), upper.end());
    return p;
}

}  // namespace

void append_be16(Bytes& b, std::uint16_t v) { put16(b, v); }
void append_be32(Bytes& b, std::uint32_t v) { put32(b, v); }
std::uint32_t read_be32(const Bytes& b, std::size_t at) {
    if (at + 4 > b.size()) throw std::out_of_range("read_be32 past the packet's end");
    return get32(b.data() + at);
}

std::uint16_t internet_checksum(const std::uint8_t* data, std::size_t len, std::uint32_t sum) {
    std::uint64_t acc = sum;
    for (std::size_t i = 0; i + 1 < len; i += 2) acc += get16(data + i);
    if (len % 2) acc += static_cast<std::uint32_t>(data[len - 1]) << 8;
    while (acc >> 16) acc = (acc & 0xffff) + (acc >> 16);
    return static_cast<std::uint16_t>(~acc);
}

Bytes make_ip_packet(const Flow& flow, const FrameOptions& opt) {
    if (flow.src.family != flow.dst.family)
        throw std::invalid_argument("flow source and destination families differ");
    Bytes l4 = make_l4(flow, opt);
    if (flow.src.is_v4()) {
        Bytes p = ipv4_header(flow.src, flow.dst, flow.proto, l4.size(), opt);
        p.insert(p.end(), l4.begin(), l4.end());
        return p;
    }
    return ipv6_packet(flow.src, flow.dst, flow.proto, l4, opt);
}

Bytes ethernet(const MacAddress& dst, const MacAddress& src, std::uint16_t ethertype,
               const Bytes& payload) {
    Bytes f;
    append(f, dst.data(), 6);
    append(f, src.data(), 6);
    put16(f, ethertype);
    f.insert(f.end(), payload.begin(), payload.end());
    return f;
}

Bytes make_frame(const Flow& flow, const FrameOptions& opt) {
    Bytes f = ethernet(opt.eth_dst, opt.eth_src, flow.src.is_v4() ? 0x0800 : 0x86dd,
                       make_ip_packet(flow, opt));
    if (f.size() < opt.pad_to) f.resize(opt.pad_to, 0);
    return f;
}

Bytes make_icmp_too_big_frame(const IpAddress& router, const Bytes& quoted, std::uint32_t mtu,
                              const FrameOptions& opt, const std::optional<IpAddress>& to) {
    IpAddress dst;
    Bytes icmp;
    if (router.is_v4()) {
        dst = to ? *to : IpAddress::v4(quoted[12], quoted[13], quoted[14], quoted[15]);
        std::size_t ihl = (quoted[0] & 0x0f) * 4u;
        icmp = {3, 4, 0, 0, 0, 0};
        put16(icmp, static_cast<std::uint16_t>(mtu));
        append(icmp, quoted.data(), std::min(quoted.size(), ihl + 8));
        set16(icmp, 2, internet_checksum(icmp.data(), icmp.size()));
        Bytes ip = ipv4_header(router, dst, kProtoIcmp, icmp.size(), opt);
        ip.insert(ip.end(), icmp.begin(), icmp.end());
        return ethernet(opt.eth_dst, opt.eth_src, 0x0800, ip);
    }
    dst.family = 6;
    std::copy(quoted.begin() + 8, quoted.begin() + 24, dst.bytes.begin());
    if (to) dst = *to;
    icmp = {2, 0, 0, 0};
    put32(icmp, mtu);
    append(icmp, quoted.data(), std::min<std::size_t>(quoted.size(), 1232));
    set16(icmp, 2,
          internet_checksum(icmp.data(), icmp.size(),
                            pseudo_sum(router, dst, kProtoIcmpv6, icmp.size())));
    return ethernet(opt.eth_dst, opt.eth_src, 0x86dd,
                    ipv6_packet(router, dst, kProtoIcmpv6, icmp, opt));
}

Bytes second_chance_hint(const IpAddress& backend, std::uint8_t state) {
    Bytes hint = {0x78, state, static_cast<std::uint8_t>(backend.is_v4() ? 4 : 6), 0};
    const std::size_t len = backend.is_v4() ? 4 : 16;
    hint.insert(hint.end(), backend.bytes.begin(), backend.bytes.begin() + len);
    return hint;
}

Bytes encapsulate(const Bytes& inner_ip, const Encapsulation& enc) {
    const bool inner_v4 = (inner_ip.at(0) >> 4) == 4;
    const std::uint8_t ip_in_ip = inner_v4 ? kProtoIpip : kProtoIpv6;
    Bytes payload;
    std::uint8_t proto = ip_in_ip;
    if (enc.gue_port) {
        if (enc.gue_extension.size() % 4 != 0 || enc.gue_extension.size() > 31 * 4)
            throw std::invalid_argument("GUE extensions are whole words, at most 31");
        const std::size_t udp_len = 8 + 4 + enc.gue_extension.size() + inner_ip.size();
        payload = {static_cast<std::uint8_t>(enc.gue_sport >> 8),
                   static_cast<std::uint8_t>(enc.gue_sport),
                   static_cast<std::uint8_t>(*enc.gue_port >> 8),
                   static_cast<std::uint8_t>(*enc.gue_port),
                   static_cast<std::uint8_t>(udp_len >> 8),
                   static_cast<std::uint8_t>(udp_len),
                   0,
                   0,
                   static_cast<std::uint8_t>(enc.gue_extension.size() / 4),
                   ip_in_ip,
                   0,
                   0};
        append(payload, enc.gue_extension.data(), enc.gue_extension.size());
        proto = kProtoUdp;
    }
    append(payload, inner_ip.data(), inner_ip.size());
    if (enc.outer_dst.is_v4()) {
        FrameOptions o;
        o.tos = enc.tos;
        o.ttl = enc.ttl;
        o.ipv4_id = 0;
        o.ipv4_frag = enc.df ? 0x4000 : 0;
        Bytes outer = ipv4_header(enc.outer_src, enc.outer_dst, proto, payload.size(), o);
        outer.insert(outer.end(), payload.begin(), payload.end());
        return ethernet(enc.eth_dst, enc.eth_src, 0x0800, outer);
    }
    FrameOptions o;
    o.tos = enc.tos;
    o.ttl = enc.ttl;
    o.ipv6_flow_label = enc.flow_label;
    return ethernet(enc.eth_dst, enc.eth_src, 0x86dd,
                    ipv6_packet(enc.outer_src, enc.outer_dst, proto, payload, o));
}

namespace {

struct Walker {
    std::string out, errors;

    void line(int depth, const std::string& text) {
        out.append(static_cast<std::size_t>(depth) * 2, ' ');
        out += text;
        out += '\n';
    }

    void l4(int depth, std::uint8_t proto, const std::uint8_t* p, std::size_t len,
            std::uint32_t pseudo) {
        if (proto == kProtoTcp) {
            if (len < 20) return line(depth, fmt::format("tcp truncated ({} bytes)", len));
            line(depth, fmt::format("tcp sport={} dport={} seq={} ack={} doff={} flags=0x{:02x} "
                                    "win={} csum=0x{:04x}",
                                    get16(p), get16(p + 2), get32(p + 4), get32(p + 8), p[12] >> 4,
                                    p[13], get16(p + 14), get16(p + 16)));
            if (internet_checksum(p, len, pseudo) != 0) errors += "bad TCP checksum; ";
            const std::size_t hlen = std::min<std::size_t>(len, (p[12] >> 4) * 4u);
            if (hlen > 20) {
                std::string opts;
                for (std::size_t i = 20; i < hlen; ++i) opts += fmt::format("{:02x}", p[i]);
                line(depth + 1, "options " + opts);
            }
            line(depth + 1, fmt::format("payload {} bytes", len - hlen));
        } else if (proto == kProtoUdp) {
            if (len < 8) return line(depth, fmt::format("udp truncated ({} bytes)", len));
            line(depth, fmt::format("udp sport={} dport={} len={} csum=0x{:04x}", get16(p),
                                    get16(p + 2), get16(p + 4), get16(p + 6)));
            if (get16(p + 6) != 0 && internet_checksum(p, len, pseudo) != 0)
                errors += "bad UDP checksum; ";
        } else if (proto == kProtoIcmp || proto == kProtoIcmpv6) {
            if (len < 8) return line(depth, fmt::format("icmp truncated ({} bytes)", len));
            line(depth, fmt::format("icmp{} type={} code={} csum=0x{:04x} word=0x{:08x}",
                                    proto == kProtoIcmpv6 ? "v6" : "", p[0], p[1], get16(p + 2),
                                    get32(p + 4)));
            if (internet_checksum(p, len, proto == kProtoIcmpv6 ? pseudo : 0) != 0)
                errors += "bad ICMP checksum; ";
            line(depth + 1, fmt::format("quoted {} bytes", len - 8));
        } else {
            line(depth, fmt::format("proto {} ({} bytes)", proto, len));
        }
    }

    void ip(int depth, const std::uint8_t* p, std::size_t len) {
        if (len < 1) return line(depth, "ip truncated");
        int version = p[0] >> 4;
        if (version == 4) {
            if (len < 20) return line(depth, fmt::format("ipv4 truncated ({} bytes)", len));
            std::size_t ihl = (p[0] & 0x0f) * 4u;
            std::size_t tot = get16(p + 2);
            IpAddress s = IpAddress::v4(p[12], p[13], p[14], p[15]);
            IpAddress d = IpAddress::v4(p[16], p[17], p[18], p[19]);
            line(depth, fmt::format("ipv4 ihl={} tos=0x{:02x} len={} id=0x{:04x} frag=0x{:04x} "
                                    "ttl={} proto={} csum=0x{:04x} {} > {}",
                                    ihl, p[1], tot, get16(p + 4), get16(p + 6), p[8], p[9],
                                    get16(p + 10), s.to_string(), d.to_string()));
            if (ihl < 20 || ihl > len) return;
            if (internet_checksum(p, ihl) != 0) errors += "bad IPv4 header checksum; ";
            if (tot > len || tot < ihl) {
                errors += "IPv4 length beyond frame; ";
                return;
            }
            const std::uint8_t* up = p + ihl;
            std::size_t up_len = tot - ihl;
            if (p[9] == kProtoIpip || p[9] == kProtoIpv6) return ip(depth + 1, up, up_len);
            if (get16(p + 6) & 0x3fff) return line(depth + 1, "fragment");
            return l4(depth + 1, p[9], up, up_len, pseudo_of(s, d, p[9], up_len));
        }
        if (version == 6) {
            if (len < 40) return line(depth, fmt::format("ipv6 truncated ({} bytes)", len));
            IpAddress s, d;
            s.family = d.family = 6;
            std::copy(p + 8, p + 24, s.bytes.begin());
            std::copy(p + 24, p + 40, d.bytes.begin());
            std::uint32_t vtf = get32(p);
            std::size_t plen = get16(p + 4);
            line(depth, fmt::format("ipv6 tc=0x{:02x} flow=0x{:05x} plen={} next={} hop={} {} > {}",
                                    (vtf >> 20) & 0xff, vtf & 0xfffff, plen, p[6], p[7],
                                    s.to_string(), d.to_string()));
            if (40 + plen > len) {
                errors += "IPv6 length beyond frame; ";
                return;
            }
            std::uint8_t next = p[6];
            const std::uint8_t* up = p + 40;
            std::size_t up_len = plen;
            while (next == 0 || next == 43 || next == 60 || next == 44) {
                if (up_len < 8) return line(depth + 1, "extension header truncated");
                std::size_t hl = next == 44 ? 8 : (up[1] + 1u) * 8;
                line(depth + 1, fmt::format("ext {} len={}", next, hl));
                if (next == 44) return line(depth + 1, "fragment");
                next = up[0];
                up += hl;
                up_len -= std::min(up_len, hl);
            }
            if (next == kProtoIpip || next == kProtoIpv6) return ip(depth + 1, up, up_len);
            return l4(depth + 1, next, up, up_len, pseudo_of(s, d, next, up_len));
        }
        line(depth, fmt::format("ip version {}", version));
    }

    static std::uint32_t pseudo_of(const IpAddress& s, const IpAddress& d, std::uint8_t proto,
                                   std::size_t len) {
        return pseudo_sum(s, d, proto, len);
    }
};

}  // namespace

std::string describe(const Bytes& frame) {
    Walker w;
    if (frame.size() < 14) return fmt::format("frame truncated ({} bytes)\n", frame.size());
    MacAddress dst, src;
    std::copy(frame.begin(), frame.begin() + 6, dst.begin());
    std::copy(frame.begin() + 6, frame.begin() + 12, src.begin());
    std::uint16_t type = get16(&frame[12]);
    w.line(0, fmt::format("eth {} > {} type=0x{:04x} ({} bytes)", net::mac_to_string(src),
                          net::mac_to_string(dst), type, frame.size()));
    if (type == 0x0800 || type == 0x86dd) w.ip(1, frame.data() + 14, frame.size() - 14);
    return w.out;
}

std::string checksum_errors(const Bytes& frame) {
    Walker w;
    if (frame.size() >= 14) w.ip(1, frame.data() + 14, frame.size() - 14);
    return w.errors;
}

Bytes ip_packet_of(const Bytes& frame) {
    if (frame.size() < 14 + 20) return {};
    const std::uint8_t* p = frame.data() + 14;
    std::size_t len = (p[0] >> 4) == 4 ? get16(p + 2) : 40u + get16(p + 4);
    len = std::min(len, frame.size() - 14);
    return Bytes(p, p + len);
}

}  // namespace xlb::test
