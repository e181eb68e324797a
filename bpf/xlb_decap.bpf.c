/* SPDX-License-Identifier: Apache-2.0 */
/*
 * xlb_decap: runs on a backend's interface. An IPv4-in-IPv4, IPv4-in-IPv6 or
 * IPv6-in-IPv6 packet addressed to one of this backend's addresses (the
 * xlb_decap_addrs map), bare or inside UDP to the GUE port with a GUE data
 * header (abi.h, struct xlb_guehdr), loses its outer headers and goes to the
 * stack as the client's original packet, where the VIP is bound on loopback.
 * Everything else passes untouched (GUE control messages and versions other
 * than 0 too: they are the kernel's, if it has a GUE receiver). This stands
 * in for the kernel's ipip/ip6_tunnel/fou modules, which hosts (and our CI
 * machines) may not have.
 */
#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/in.h>
#include <linux/ip.h>
#include <linux/ipv6.h>
#include <linux/udp.h>
#include <bpf/bpf_endian.h>
#include <bpf/bpf_helpers.h>

#include "xlb/abi.h"
#include "lib/counters.h"

#ifndef IPPROTO_IPV6
#define IPPROTO_IPV6 41
#endif
#define XLB_IP_MF_OFFSET 0x3fff

char LICENSE[] SEC("license") = "Dual BSD/GPL";

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, XLB_DECAP_ADDRS_MAX);
	__type(key, struct xlb_decap_addr);
	__type(value, __u8);
} xlb_decap_addrs SEC(".maps");

XLB_OUTCOME_COUNTERS(xlb_decap_stats, XLB_DECAP_OUT__MAX);

/* The UDP port GUE arrives on (host order); 0: GUE is not decapsulated.
 * Written by the loader before attaching (DecapProgram::set_gue_port). */
volatile __u16 xlb_gue_port = XLB_GUE_PORT_DEFAULT;

static __always_inline int xlb_decap_outcome(enum xlb_decap_outcome outcome, int action)
{
	return xlb_count_outcome(&xlb_decap_stats, outcome, action);
}

static __always_inline int xlb_is_local(const void *addr, __u8 family)
{
	struct xlb_decap_addr key = {};

	__builtin_memcpy(key.addr, addr, family == XLB_FAMILY_V4 ? 4 : 16);
	key.family = family;
	return bpf_map_lookup_elem(&xlb_decap_addrs, &key) != NULL;
}

/* Removes outer_len bytes after the Ethernet header and sets its EtherType. */
static __always_inline int xlb_strip(struct xdp_md *ctx, __u32 outer_len, __u16 inner_proto)
{
	void *data = (void *)(long)ctx->data;
	void *data_end = (void *)(long)ctx->data_end;
	struct ethhdr *eth = data, saved;

	if ((void *)(eth + 1) > data_end)
		return xlb_decap_outcome(XLB_DECAP_OUT_PASS_MALFORMED, XDP_PASS);
	__builtin_memcpy(&saved, eth, sizeof(saved));
	if (bpf_xdp_adjust_head(ctx, (int)outer_len))
		return xlb_decap_outcome(XLB_DECAP_OUT_DROP_HEADROOM, XDP_DROP);
	data = (void *)(long)ctx->data;
	data_end = (void *)(long)ctx->data_end;
	eth = data;
	if ((void *)(eth + 1) > data_end)
		return xlb_decap_outcome(XLB_DECAP_OUT_DROP_HEADROOM, XDP_DROP);
	__builtin_memcpy(eth, &saved, sizeof(saved));
	eth->h_proto = bpf_htons(inner_proto);
	return xlb_decap_outcome(XLB_DECAP_OUT_DECAPSULATED, XDP_PASS);
}

/*
 * A GUE data packet: `udp` is the outer UDP header, already in the packet.
 * Returns the bytes of UDP + GUE + extensions and sets *inner_proto (an
 * EtherType), or 0 when this is not GUE we strip. Requires the inner IP
 * header to be there too.
 */
static __always_inline __u32 xlb_gue_len(struct udphdr *udp, void *data_end, __u16 *inner_proto)
{
	struct xlb_guehdr *gue = (void *)(udp + 1);
	__u32 len;

	if (xlb_gue_port == 0 || udp->dest != bpf_htons(xlb_gue_port))
		return 0;
	if ((void *)(gue + 1) > data_end)
		return 0;
	if (XLB_GUE_VERSION(gue->ver_c_hlen) != 0 || XLB_GUE_CONTROL(gue->ver_c_hlen))
		return 0;
	if (gue->proto == IPPROTO_IPIP)
		*inner_proto = ETH_P_IP;
	else if (gue->proto == IPPROTO_IPV6)
		*inner_proto = ETH_P_IPV6;
	else
		return 0;
	len = sizeof(*udp) + sizeof(*gue) + XLB_GUE_HLEN(gue->ver_c_hlen) * 4;
	if ((void *)udp + len +
		    (*inner_proto == ETH_P_IP ? sizeof(struct iphdr) : sizeof(struct ipv6hdr)) >
	    data_end)
		return 0;
	return len;
}

/* Strips ip_len bytes of outer IP header and the UDP/GUE headers at `udp`
 * behind them, or passes the packet when it is not GUE we take. */
static __always_inline int xlb_strip_gue(struct xdp_md *ctx, struct udphdr *udp, __u32 ip_len)
{
	void *data_end = (void *)(long)ctx->data_end;
	__u16 inner_proto;
	__u32 tunnel_len;

	if ((void *)(udp + 1) > data_end)
		return xlb_decap_outcome(XLB_DECAP_OUT_PASS_NOT_ENCAP, XDP_PASS);
	tunnel_len = xlb_gue_len(udp, data_end, &inner_proto);
	if (tunnel_len == 0)
		return xlb_decap_outcome(XLB_DECAP_OUT_PASS_NOT_ENCAP, XDP_PASS);
	return xlb_strip(ctx, ip_len + tunnel_len, inner_proto);
}

SEC("xdp")
int xlb_decap(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data;
	void *data_end = (void *)(long)ctx->data_end;
	struct ethhdr *eth = data;

	if ((void *)(eth + 1) > data_end)
		return xlb_decap_outcome(XLB_DECAP_OUT_PASS_MALFORMED, XDP_PASS);

	if (eth->h_proto == bpf_htons(ETH_P_IP)) {
		struct iphdr *iph = (void *)(eth + 1);
		__u32 hlen;

		if ((void *)(iph + 1) > data_end)
			return xlb_decap_outcome(XLB_DECAP_OUT_PASS_MALFORMED, XDP_PASS);
		if ((iph->protocol != IPPROTO_IPIP && iph->protocol != IPPROTO_UDP) ||
		    !xlb_is_local(&iph->daddr, XLB_FAMILY_V4))
			return xlb_decap_outcome(XLB_DECAP_OUT_PASS_NOT_ENCAP, XDP_PASS);
		if (iph->version != 4 || iph->ihl < 5)
			return xlb_decap_outcome(XLB_DECAP_OUT_PASS_MALFORMED, XDP_PASS);
		if (iph->frag_off & bpf_htons(XLB_IP_MF_OFFSET))
			return xlb_decap_outcome(XLB_DECAP_OUT_PASS_FRAGMENT, XDP_PASS);
		hlen = iph->ihl * 4;
		if (iph->protocol == IPPROTO_UDP)
			return xlb_strip_gue(ctx, (void *)iph + hlen, hlen);
		/* the inner header must be there before we commit to stripping */
		if ((void *)iph + hlen + sizeof(struct iphdr) > data_end)
			return xlb_decap_outcome(XLB_DECAP_OUT_PASS_MALFORMED, XDP_PASS);
		return xlb_strip(ctx, hlen, ETH_P_IP);
	}

	if (eth->h_proto == bpf_htons(ETH_P_IPV6)) {
		struct ipv6hdr *ip6h = (void *)(eth + 1);
		__u16 inner_proto;

		if ((void *)(ip6h + 1) > data_end)
			return xlb_decap_outcome(XLB_DECAP_OUT_PASS_MALFORMED, XDP_PASS);
		if (ip6h->nexthdr == IPPROTO_IPV6)
			inner_proto = ETH_P_IPV6;
		else if (ip6h->nexthdr == IPPROTO_IPIP)
			inner_proto = ETH_P_IP;
		else if (ip6h->nexthdr != IPPROTO_UDP)
			return xlb_decap_outcome(XLB_DECAP_OUT_PASS_NOT_ENCAP, XDP_PASS);
		if (!xlb_is_local(&ip6h->daddr, XLB_FAMILY_V6))
			return xlb_decap_outcome(XLB_DECAP_OUT_PASS_NOT_ENCAP, XDP_PASS);
		if (ip6h->nexthdr == IPPROTO_UDP)
			return xlb_strip_gue(ctx, (void *)(ip6h + 1), sizeof(*ip6h));
		if ((void *)(ip6h + 1) + (inner_proto == ETH_P_IP ? sizeof(struct iphdr)
								  : sizeof(struct ipv6hdr)) >
		    data_end)
			return xlb_decap_outcome(XLB_DECAP_OUT_PASS_MALFORMED, XDP_PASS);
		return xlb_strip(ctx, sizeof(*ip6h), inner_proto);
	}

	return xlb_decap_outcome(XLB_DECAP_OUT_PASS_NOT_ENCAP, XDP_PASS);
}
