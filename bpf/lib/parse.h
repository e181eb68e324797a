/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Packet parsing for the balancer. Each step checks its header against
 * data_end before reading it and returns either the next protocol or a
 * negative outcome (-XLB_OUT_*), so the caller ends the packet with exactly
 * one counter.
 *
 * Decisions made here on purpose:
 *  - IPv4 with ihl < 5, a version other than 4, or a total length that does
 *    not fit the frame is malformed (dropped; the kernel would drop it too).
 *  - IPv4 options are skipped by ihl; the packet is forwarded with them.
 *  - IPv6 hop-by-hop, routing, destination-options and AH headers are walked
 *    (at most XLB_IPV6_EXT_MAX); a fragment header or more headers than that
 *    passes the packet to the kernel.
 *  - Any fragment (IPv4 MF or offset, IPv6 fragment header) is passed:
 *    only the first would carry ports, and splitting a datagram's fragments
 *    over two backends is worse than not balancing it.
 *  - Lengths come from the IP header. Ethernet padding after the IP packet
 *    is tolerated but never read as part of it: a TCP/UDP/ICMP or IPv6
 *    extension header that would end past the IP packet's own length is
 *    malformed even when the frame goes on (cur->ip_end below), and the
 *    balancer trims the padding before it encapsulates.
 */
#ifndef XLB_BPF_PARSE_H
#define XLB_BPF_PARSE_H

#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/in.h>
#include <linux/ip.h>
#include <linux/ipv6.h>
#include <linux/tcp.h>
#include <linux/udp.h>
#include <linux/icmp.h>
#include <linux/icmpv6.h>
#include <bpf/bpf_endian.h>
#include <bpf/bpf_helpers.h>
#include "xlb/abi.h"

#ifndef IP_MF
#define IP_MF 0x2000
#define IP_OFFSET 0x1fff
#define IP_DF 0x4000
#endif

#define XLB_NEXTHDR_HOP 0
#define XLB_NEXTHDR_ROUTING 43
#define XLB_NEXTHDR_FRAGMENT 44
#define XLB_NEXTHDR_AH 51
#define XLB_NEXTHDR_DEST 60

/* What the balancer needs to know about a packet after parsing. */
struct xlb_packet {
	struct xlb_flow_key key; /* as sent by the client */
	__u32 ip_len; /* bytes of the IP packet, from its header */
	__u8 tos; /* IPv4 TOS / IPv6 traffic class */
	__u8 df; /* IPv4 DF bit (IPv6 never fragments in flight) */
	__u8 tcp_syn; /* a SYN without ACK: always a new connection */
	__u8 tcp_ended; /* XLB_CT_ENDED_FIN and _RST: the flags the client sent */
};

/* end: the frame's end, which every read is checked against (the verifier's
 * bound). ip_end: where the IP packet ends by its own length, never past end;
 * headers must also end before it. */
struct xlb_cursor {
	void *pos;
	void *end;
	void *ip_end;
};

/* A header of `len` bytes at `at` lies inside the IP packet (and the frame). */
static __always_inline int xlb_in_ip_packet(const struct xlb_cursor *cur, const void *at, __u32 len)
{
	return at + len <= cur->end && at + len <= cur->ip_end;
}

/* Returns the IPv4 protocol, or -outcome. */
static __always_inline int xlb_parse_ipv4(struct xlb_cursor *cur, struct xlb_packet *pkt)
{
	struct iphdr *iph = cur->pos;
	__u32 hlen, tot_len;

	if ((void *)(iph + 1) > cur->end)
		return -XLB_OUT_DROP_MALFORMED_IPV4;
	if (iph->version != 4 || iph->ihl < 5)
		return -XLB_OUT_DROP_MALFORMED_IPV4;
	hlen = iph->ihl * 4;
	tot_len = bpf_ntohs(iph->tot_len);
	if (tot_len < hlen || (void *)iph + tot_len > cur->end)
		return -XLB_OUT_DROP_MALFORMED_IPV4;
	if (iph->frag_off & bpf_htons(IP_MF | IP_OFFSET))
		return -XLB_OUT_PASS_FRAGMENT;

	pkt->key.family = XLB_FAMILY_V4;
	pkt->key.proto = iph->protocol;
	pkt->key.src[0] = iph->saddr;
	pkt->key.dst[0] = iph->daddr;
	pkt->ip_len = tot_len;
	cur->ip_end = (void *)iph + tot_len;
	pkt->tos = iph->tos;
	pkt->df = !!(iph->frag_off & bpf_htons(IP_DF));
	cur->pos = (void *)iph + hlen;
	return iph->protocol;
}

/* Walks the extension headers; returns the upper-layer protocol, or -outcome. */
static __always_inline int xlb_parse_ipv6(struct xlb_cursor *cur, struct xlb_packet *pkt)
{
	struct ipv6hdr *ip6h = cur->pos;
	__u8 nexthdr;

	if ((void *)(ip6h + 1) > cur->end)
		return -XLB_OUT_DROP_MALFORMED_IPV6;
	if (ip6h->version != 6)
		return -XLB_OUT_DROP_MALFORMED_IPV6;
	pkt->ip_len = sizeof(*ip6h) + bpf_ntohs(ip6h->payload_len);
	if ((void *)ip6h + pkt->ip_len > cur->end)
		return -XLB_OUT_DROP_MALFORMED_IPV6;
	cur->ip_end = (void *)ip6h + pkt->ip_len;

	pkt->key.family = XLB_FAMILY_V6;
	__builtin_memcpy(pkt->key.src, &ip6h->saddr, 16);
	__builtin_memcpy(pkt->key.dst, &ip6h->daddr, 16);
	pkt->tos = (ip6h->priority << 4) | (ip6h->flow_lbl[0] >> 4);
	pkt->df = 1;
	nexthdr = ip6h->nexthdr;
	cur->pos = ip6h + 1;

#pragma unroll
	for (int i = 0; i < XLB_IPV6_EXT_MAX; i++) {
		struct ipv6_opt_hdr *opt = cur->pos;
		__u32 len;

		switch (nexthdr) {
		case XLB_NEXTHDR_HOP:
		case XLB_NEXTHDR_ROUTING:
		case XLB_NEXTHDR_DEST:
		case XLB_NEXTHDR_AH:
			if (!xlb_in_ip_packet(cur, opt, sizeof(*opt)))
				return -XLB_OUT_DROP_MALFORMED_IPV6;
			if (nexthdr == XLB_NEXTHDR_AH)
				len = ((__u32)opt->hdrlen + 2) * 4;
			else
				len = ((__u32)opt->hdrlen + 1) * 8;
			nexthdr = opt->nexthdr;
			cur->pos += len;
			if (cur->pos > cur->end || cur->pos > cur->ip_end)
				return -XLB_OUT_DROP_MALFORMED_IPV6;
			break;
		case XLB_NEXTHDR_FRAGMENT:
			return -XLB_OUT_PASS_FRAGMENT;
		default:
			pkt->key.proto = nexthdr;
			return nexthdr;
		}
	}
	if (nexthdr == XLB_NEXTHDR_HOP || nexthdr == XLB_NEXTHDR_ROUTING ||
	    nexthdr == XLB_NEXTHDR_DEST || nexthdr == XLB_NEXTHDR_AH ||
	    nexthdr == XLB_NEXTHDR_FRAGMENT)
		return -XLB_OUT_PASS_IPV6_EXT_LIMIT;
	pkt->key.proto = nexthdr;
	return nexthdr;
}

/* The header checksum of the IPv4 header at `iph`, which xlb_parse_ipv4
 * accepted: 1 when it holds. The usual header (ihl 5) is summed as five
 * 32-bit words; one with options word by word. */
static __always_inline int xlb_ipv4_csum_valid(const struct xlb_cursor *cur,
					       const struct iphdr *iph)
{
	if ((void *)(iph + 1) > cur->end)
		return 0;
	if (iph->ihl == 5) {
		const __u32 *w = (const __u32 *)iph;
		__u64 sum = (__u64)w[0] + w[1] + w[2] + w[3] + w[4];

		sum = (sum & 0xffffffff) + (sum >> 32);
		sum = (sum & 0xffffffff) + (sum >> 32);
		sum = (sum & 0xffff) + (sum >> 16);
		sum = (sum & 0xffff) + (sum >> 16);
		return sum == 0xffff;
	}
	{
		const __u16 *word = (const __u16 *)iph;
		__u32 words = iph->ihl * 2, sum = 0;

		for (__u32 i = 0; i < 30; i++) {
			if (i >= words)
				break;
			/* Keeps clang from turning the bound into an index compare
			 * the verifier cannot follow. */
			asm volatile("" : "+r"(word));
			if (!xlb_in_ip_packet(cur, word, sizeof(*word)))
				return 0;
			sum += *word;
			word++;
		}
		sum = (sum & 0xffff) + (sum >> 16);
		sum = (sum & 0xffff) + (sum >> 16);
		return sum == 0xffff;
	}
}

/* Reads the ports (and SYN) of a TCP or UDP header; 0 or -outcome. */
static __always_inline int xlb_parse_l4(struct xlb_cursor *cur, struct xlb_packet *pkt, int proto)
{
	if (proto == IPPROTO_TCP) {
		struct tcphdr *th = cur->pos;

		if (!xlb_in_ip_packet(cur, th, sizeof(*th)))
			return -XLB_OUT_DROP_MALFORMED_L4;
		if (th->doff < 5 || !xlb_in_ip_packet(cur, th, th->doff * 4))
			return -XLB_OUT_DROP_MALFORMED_L4;
		pkt->key.sport = th->source;
		pkt->key.dport = th->dest;
		pkt->tcp_syn = th->syn && !th->ack;
		pkt->tcp_ended =
			(th->fin ? XLB_CT_ENDED_FIN : 0) | (th->rst ? XLB_CT_ENDED_RST : 0);
		return 0;
	}
	if (proto == IPPROTO_UDP) {
		struct udphdr *uh = cur->pos;

		if (!xlb_in_ip_packet(cur, uh, sizeof(*uh)))
			return -XLB_OUT_DROP_MALFORMED_L4;
		pkt->key.sport = uh->source;
		pkt->key.dport = uh->dest;
		return 0;
	}
	return -XLB_OUT_PASS_NOT_VIP;
}

#endif /* XLB_BPF_PARSE_H */
