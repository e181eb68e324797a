/* SPDX-License-Identifier: Apache-2.0 */
/*
 * "Too big after encapsulation" answered to the client, when the operator
 * asks for it (XLB_CFG_F_ICMP_TOO_BIG): ICMP fragmentation needed for IPv4
 * with DF set, ICMPv6 packet too big for IPv6. The reply comes from the VIP
 * (the address the client sent to) and quotes the offending packet's IP
 * header and first 8 bytes of transport header, which is all a sender needs
 * to find its socket. The advertised MTU leaves room for the outer header.
 *
 * The frame is rewritten in place: grow the head by the new headers, write
 * them over where the old Ethernet header was, cut the tail after the quote.
 */
#ifndef XLB_BPF_ICMP_H
#define XLB_BPF_ICMP_H

#include <linux/bpf.h>
#include <linux/icmp.h>
#include <linux/icmpv6.h>
#include <linux/if_ether.h>
#include <linux/in.h>
#include <linux/ip.h>
#include <linux/ipv6.h>
#include <bpf/bpf_endian.h>
#include <bpf/bpf_helpers.h>
#include "xlb/abi.h"
#include "csum.h"
#include "parse.h"

#define XLB_ICMP_QUOTE_V4 (sizeof(struct iphdr) + 8)
#define XLB_ICMP_QUOTE_V6 (sizeof(struct ipv6hdr) + 8)

/* Turns the frame into eth + `grow` bytes of room for the reply's headers +
 * the first `quote` bytes of the packet, and writes the reply's Ethernet
 * header (back where the packet came from). Returns where the reply's IP
 * header goes, or NULL when the frame's edges cannot move. */
static __always_inline void *xlb_icmp_reframe(struct xdp_md *ctx, int grow, int quote,
					      __u16 eth_proto)
{
	void *data = (void *)(long)ctx->data;
	void *data_end = (void *)(long)ctx->data_end;
	struct ethhdr *eth = data;
	__u8 client_mac[ETH_ALEN], our_mac[ETH_ALEN];
	int cut;

	if ((void *)(eth + 1) > data_end)
		return NULL;
	__builtin_memcpy(client_mac, eth->h_source, ETH_ALEN);
	__builtin_memcpy(our_mac, eth->h_dest, ETH_ALEN);
	if (bpf_xdp_adjust_head(ctx, -grow))
		return NULL;
	data = (void *)(long)ctx->data;
	data_end = (void *)(long)ctx->data_end;
	cut = (int)(data_end - data) - (int)(sizeof(struct ethhdr) + grow + quote);
	if (cut > 0 && bpf_xdp_adjust_tail(ctx, -cut))
		return NULL;
	data = (void *)(long)ctx->data;
	data_end = (void *)(long)ctx->data_end;
	eth = data;
	if ((void *)(eth + 1) + grow + quote > data_end)
		return NULL;
	__builtin_memcpy(eth->h_dest, client_mac, ETH_ALEN);
	__builtin_memcpy(eth->h_source, our_mac, ETH_ALEN);
	eth->h_proto = bpf_htons(eth_proto);
	return eth + 1;
}

/* Returns 0 with the frame rewritten into the reply, or -outcome. */
static __always_inline int xlb_icmp_too_big_v4(struct xdp_md *ctx, __u16 mtu)
{
	const int grow = sizeof(struct iphdr) + sizeof(struct icmphdr);
	void *data = (void *)(long)ctx->data;
	void *data_end = (void *)(long)ctx->data_end;
	struct ethhdr *eth = data;
	struct iphdr *orig, *iph;
	struct icmphdr *icmp;
	__be32 client, vip;
	__u32 sum;

	orig = (void *)(eth + 1);
	if ((void *)orig + XLB_ICMP_QUOTE_V4 > data_end)
		return -XLB_OUT_DROP_TOO_BIG;
	/* A quote must show the ports: only option-less headers, and IPv4
	 * packets without DF may not be answered (the sender did not ask). */
	if (orig->ihl != 5 || !(orig->frag_off & bpf_htons(IP_DF)))
		return -XLB_OUT_DROP_TOO_BIG;
	client = orig->saddr;
	vip = orig->daddr;

	iph = xlb_icmp_reframe(ctx, grow, XLB_ICMP_QUOTE_V4, ETH_P_IP);
	if (!iph)
		return -XLB_OUT_DROP_HEADROOM;
	icmp = (void *)(iph + 1);

	iph->version = 4;
	iph->ihl = 5;
	iph->tos = 0;
	iph->tot_len = bpf_htons(sizeof(*iph) + sizeof(*icmp) + XLB_ICMP_QUOTE_V4);
	iph->id = 0;
	iph->frag_off = bpf_htons(IP_DF);
	iph->ttl = XLB_ENCAP_TTL;
	iph->protocol = IPPROTO_ICMP;
	iph->saddr = vip;
	iph->daddr = client;
	xlb_ipv4_set_csum(iph);

	icmp->type = ICMP_DEST_UNREACH;
	icmp->code = ICMP_FRAG_NEEDED;
	icmp->checksum = 0;
	icmp->un.frag.__unused = 0;
	icmp->un.frag.mtu = bpf_htons(mtu);
	sum = xlb_csum_add_words(icmp, (sizeof(*icmp) + XLB_ICMP_QUOTE_V4) / 2, 0);
	icmp->checksum = xlb_csum_fold(sum);
	return 0;
}

static __always_inline int xlb_icmp_too_big_v6(struct xdp_md *ctx, __u32 mtu)
{
	const int grow = sizeof(struct ipv6hdr) + sizeof(struct icmp6hdr);
	const __u32 icmp_len = sizeof(struct icmp6hdr) + XLB_ICMP_QUOTE_V6;
	void *data = (void *)(long)ctx->data;
	void *data_end = (void *)(long)ctx->data_end;
	struct ethhdr *eth = data;
	struct ipv6hdr *orig, *ip6h;
	struct icmp6hdr *icmp6;
	struct in6_addr client, vip;
	__u32 sum;

	orig = (void *)(eth + 1);
	if ((void *)orig + XLB_ICMP_QUOTE_V6 > data_end)
		return -XLB_OUT_DROP_TOO_BIG;
	__builtin_memcpy(&client, &orig->saddr, sizeof(client));
	__builtin_memcpy(&vip, &orig->daddr, sizeof(vip));

	ip6h = xlb_icmp_reframe(ctx, grow, XLB_ICMP_QUOTE_V6, ETH_P_IPV6);
	if (!ip6h)
		return -XLB_OUT_DROP_HEADROOM;
	icmp6 = (void *)(ip6h + 1);

	ip6h->version = 6;
	ip6h->priority = 0;
	ip6h->flow_lbl[0] = 0;
	ip6h->flow_lbl[1] = 0;
	ip6h->flow_lbl[2] = 0;
	ip6h->payload_len = bpf_htons(icmp_len);
	ip6h->nexthdr = IPPROTO_ICMPV6;
	ip6h->hop_limit = XLB_ENCAP_TTL;
	__builtin_memcpy(&ip6h->saddr, &vip, sizeof(vip));
	__builtin_memcpy(&ip6h->daddr, &client, sizeof(client));

	icmp6->icmp6_type = ICMPV6_PKT_TOOBIG;
	icmp6->icmp6_code = 0;
	icmp6->icmp6_cksum = 0;
	icmp6->icmp6_mtu = bpf_htonl(mtu);
	/* pseudo header: addresses, upper-layer length, next header */
	sum = xlb_csum_add_words(&ip6h->saddr, 16, 0);
	sum += bpf_htons(icmp_len);
	sum += bpf_htons(IPPROTO_ICMPV6);
	sum = xlb_csum_add_words(icmp6, icmp_len / 2, sum);
	icmp6->icmp6_cksum = xlb_csum_fold(sum);
	return 0;
}

#endif /* XLB_BPF_ICMP_H */
