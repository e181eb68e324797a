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
 *
 * Second chance (abi.h, struct xlb_gue_hint): a GUE packet whose private
 * data names another backend is delivered only when this host's kernel knows
 * its TCP flow; otherwise it goes back out, re-addressed to that backend,
 * through the next hop the loader set (docs/second-chance.md).
 *
 * SYN cookies (abi.h, struct xlb_gue_cookie): the handshake's ACK for a SYN
 * the balancer answered itself carries the negotiated options as private
 * data. It is decapsulated and those 16 bytes are left in xlb_cookie_acks
 * under the ACK's addresses and ports, for the tc program that builds the
 * connection from them (bpf/xlb_cookie.bpf.c; abi.h says why not XDP
 * metadata); when the loader attached none, the ACK is dropped: the kernel
 * would only answer it with a reset.
 */
#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/in.h>
#include <linux/ip.h>
#include <linux/ipv6.h>
#include <linux/tcp.h>
#include <linux/udp.h>
#include <bpf/bpf_endian.h>
#include <bpf/bpf_helpers.h>

#include "xlb/abi.h"
#include "lib/cookie_maps.h"
#include "lib/counters.h"
#include "lib/csum.h"
#include "lib/eth.h"

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

/* Packets passed on, per hinted backend. */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_PERCPU_HASH);
	__uint(max_entries, XLB_DECAP_PASSED_MAX);
	__type(key, struct xlb_decap_addr);
	__type(value, __u64);
} xlb_decap_pass SEC(".maps");

/* The UDP port GUE arrives on (host order); 0: GUE is not decapsulated.
 * Written by the loader before attaching (DecapProgram::set_gue_port). */
volatile __u16 xlb_gue_port = XLB_GUE_PORT_DEFAULT;

/* Where packets passed on go: the MAC of this host's next hop (router),
 * which forwards them to the hinted backend. All zero: none set; such
 * packets are decapsulated here (DecapProgram::set_next_hop_mac). */
volatile __u8 xlb_next_hop_mac[6];

/* Non-zero: the cookie acceptor (bpf/xlb_cookie.bpf.c) is attached to this
 * interface's tc ingress, so cookie ACKs are decapsulated for it; zero: they
 * are dropped (DecapProgram::set_cookie_acceptor). */
volatile __u8 xlb_cookie_acceptor;

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

/* Removes outer_len bytes after the Ethernet header and sets its EtherType;
 * counts `done` when that worked. */
static __always_inline int xlb_strip(struct xdp_md *ctx, __u32 outer_len, __u16 inner_proto,
				     enum xlb_decap_outcome done)
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
	return xlb_decap_outcome(done, XDP_PASS);
}

/* Leaves the cookie data of the TCP packet at `inner` (an IP header of
 * EtherType inner_proto, fully in the packet) for the cookie acceptor.
 * Returns -1 when the packet is no TCP the acceptor could take. */
static __always_inline int xlb_leave_cookie(void *inner, void *data_end, __u16 inner_proto,
					    const struct xlb_gue_cookie *cookie)
{
	struct xlb_cookie_ack_key key = {};
	struct tcphdr *th;
	__u32 zero = 0;
	__u64 *pending;

	if (inner_proto == ETH_P_IP) {
		struct iphdr *iph = inner;

		if ((void *)(iph + 1) > data_end || iph->protocol != IPPROTO_TCP || iph->ihl < 5)
			return -1;
		th = inner + iph->ihl * 4;
		key.saddr[0] = iph->saddr;
		key.daddr[0] = iph->daddr;
		key.family = XLB_FAMILY_V4;
	} else {
		struct ipv6hdr *ip6h = inner;

		if ((void *)(ip6h + 1) > data_end || ip6h->nexthdr != IPPROTO_TCP)
			return -1;
		th = (void *)(ip6h + 1);
		__builtin_memcpy(key.saddr, &ip6h->saddr, 16);
		__builtin_memcpy(key.daddr, &ip6h->daddr, 16);
		key.family = XLB_FAMILY_V6;
	}
	if ((void *)(th + 1) > data_end)
		return -1;
	key.sport = th->source;
	key.dport = th->dest;
	if (bpf_map_update_elem(&xlb_cookie_acks, &key, cookie, BPF_ANY))
		return -1;
	pending = bpf_map_lookup_elem(&xlb_cookie_pending, &zero);
	if (pending)
		__sync_fetch_and_add(pending, 1);
	return 0;
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

/*
 * Whether this host's kernel knows the TCP flow of the inner packet at
 * `inner` (an IP header of EtherType inner_proto): a socket for it (any
 * state but listening, a request socket in SYN_RECV included) or, for an ACK
 * that reaches a listener, a valid SYN cookie. A SYN starts a connection
 * here, and what is not TCP, or cannot be read, is the kernel's to judge:
 * both count as local.
 */
static __always_inline int xlb_flow_is_local(struct xdp_md *ctx, void *inner, void *data_end,
					     __u16 inner_proto)
{
	struct bpf_sock_tuple tuple = {};
	struct bpf_sock *sk;
	struct tcphdr *th;
	__u32 tuple_len;
	int local;

	if (inner_proto == ETH_P_IP) {
		struct iphdr *iph = inner;

		if ((void *)(iph + 1) > data_end || iph->protocol != IPPROTO_TCP || iph->ihl < 5)
			return 1;
		th = inner + iph->ihl * 4;
		if ((void *)(th + 1) > data_end)
			return 1;
		tuple.ipv4.saddr = iph->saddr;
		tuple.ipv4.daddr = iph->daddr;
		tuple.ipv4.sport = th->source;
		tuple.ipv4.dport = th->dest;
		tuple_len = sizeof(tuple.ipv4);
	} else {
		struct ipv6hdr *ip6h = inner;

		if ((void *)(ip6h + 1) > data_end || ip6h->nexthdr != IPPROTO_TCP)
			return 1;
		th = (void *)(ip6h + 1);
		if ((void *)(th + 1) > data_end)
			return 1;
		__builtin_memcpy(tuple.ipv6.saddr, &ip6h->saddr, 16);
		__builtin_memcpy(tuple.ipv6.daddr, &ip6h->daddr, 16);
		tuple.ipv6.sport = th->source;
		tuple.ipv6.dport = th->dest;
		tuple_len = sizeof(tuple.ipv6);
	}
	if (th->syn)
		return 1;
	sk = bpf_skc_lookup_tcp(ctx, &tuple, tuple_len, BPF_F_CURRENT_NETNS, 0);
	if (!sk)
		return 0;
	if (sk->state != BPF_TCP_LISTEN)
		local = 1;
	else if (!th->ack || th->rst)
		local = 0;
	else if (inner_proto == ETH_P_IP)
		local = bpf_tcp_check_syncookie(sk, inner, sizeof(struct iphdr), th, sizeof(*th)) ==
			0;
	else
		local = bpf_tcp_check_syncookie(sk, inner, sizeof(struct ipv6hdr), th,
						sizeof(*th)) == 0;
	bpf_sk_release(sk);
	return local;
}

/* The second-chance hint in the GUE header at `gue` when it asks this
 * backend to pass the packet on (abi.h, struct xlb_gue_hint), else NULL.
 * family: the outer header's, which the hinted backend shares. */
static __always_inline struct xlb_gue_hint *xlb_pass_on_hint(struct xlb_guehdr *gue, void *data_end,
							     __u8 family)
{
	struct xlb_gue_hint *hint = (void *)(gue + 1);

	if (XLB_GUE_HLEN(gue->ver_c_hlen) * 4 != XLB_GUE_HINT_LEN(family))
		return NULL;
	if ((void *)hint + XLB_GUE_HINT_LEN(XLB_FAMILY_V4) > data_end)
		return NULL;
	if (hint->magic != XLB_GUE_HINT_MAGIC || hint->state != XLB_GUE_HINT_PASS_ON ||
	    hint->family != family)
		return NULL;
	if (family == XLB_FAMILY_V6 && (void *)(hint + 1) > data_end)
		return NULL;
	return hint;
}

/* family: the hint's (the caller knows it; the verifier must too). */
static __always_inline void xlb_count_passed(const struct xlb_gue_hint *hint, __u8 family)
{
	struct xlb_decap_addr key = {};
	__u64 one = 1, *count;

	key.addr[0] = hint->addr[0];
	if (family == XLB_FAMILY_V6) {
		key.addr[1] = hint->addr[1];
		key.addr[2] = hint->addr[2];
		key.addr[3] = hint->addr[3];
	}
	key.family = family;
	count = bpf_map_lookup_elem(&xlb_decap_pass, &key);
	if (count)
		*count += 1;
	else
		bpf_map_update_elem(&xlb_decap_pass, &key, &one, BPF_NOEXIST);
}

/*
 * Sends a packet on to the backend its hint names: the outer destination
 * becomes the hinted address, the hint is marked passed (so that backend
 * delivers it, whatever it knows), the hop limit drops by one, and the
 * frame goes back out of this interface to the next hop. Returns -1 when
 * the packet cannot be passed on (the caller delivers it instead).
 */
static __always_inline int xlb_pass_on(struct ethhdr *eth, void *outer, __u8 family,
				       struct udphdr *udp, struct xlb_gue_hint *hint)
{
	const volatile __u16 *hop = (const volatile __u16 *)xlb_next_hop_mac;

	if ((hop[0] | hop[1] | hop[2]) == 0)
		return -1;
	if (family == XLB_FAMILY_V4) {
		struct iphdr *iph = outer;

		if (iph->ihl != 5 || iph->ttl <= 1)
			return -1;
		iph->daddr = hint->addr[0];
		iph->ttl -= 1;
		xlb_ipv4_set_csum(iph);
		udp->check = 0;
	} else {
		struct ipv6hdr *ip6h = outer;

		/* a UDP checksum over the old destination cannot be kept */
		if (udp->check != 0 || ip6h->hop_limit <= 1)
			return -1;
		__builtin_memcpy(&ip6h->daddr, hint->addr, 16);
		ip6h->hop_limit -= 1;
	}
	hint->state = XLB_GUE_HINT_PASSED;
	xlb_set_macs(eth, eth->h_dest, xlb_next_hop_mac);
	xlb_count_passed(hint, family);
	return 0;
}

/* Strips ip_len bytes of outer IP header (at `outer`, of `family`) and the
 * UDP/GUE headers at `udp` behind them, or passes the packet when it is not
 * GUE we take; a packet with a second-chance hint for a flow this host does
 * not know goes on to the hinted backend instead. */
static __always_inline int xlb_strip_gue(struct xdp_md *ctx, struct ethhdr *eth, void *outer,
					 __u8 family, struct udphdr *udp, __u32 ip_len)
{
	void *data_end = (void *)(long)ctx->data_end;
	struct xlb_gue_cookie *cookie;
	struct xlb_gue_hint *hint;
	__u16 inner_proto;
	__u32 tunnel_len;

	if ((void *)(udp + 1) > data_end)
		return xlb_decap_outcome(XLB_DECAP_OUT_PASS_NOT_ENCAP, XDP_PASS);
	tunnel_len = xlb_gue_len(udp, data_end, &inner_proto);
	if (tunnel_len == 0)
		return xlb_decap_outcome(XLB_DECAP_OUT_PASS_NOT_ENCAP, XDP_PASS);
	cookie = (void *)(udp + 1) + sizeof(struct xlb_guehdr);
	if (tunnel_len == sizeof(*udp) + sizeof(struct xlb_guehdr) + XLB_GUE_COOKIE_LEN &&
	    (void *)(cookie + 1) <= data_end && cookie->magic == XLB_GUE_COOKIE_MAGIC) {
		struct xlb_gue_cookie copy;

		if (!xlb_cookie_acceptor)
			return xlb_decap_outcome(XLB_DECAP_OUT_DROP_COOKIE_NO_ACCEPTOR, XDP_DROP);
		__builtin_memcpy(&copy, cookie, sizeof(copy));
		/* Not TCP: nothing to accept; the kernel judges it as any packet. */
		if (xlb_leave_cookie((void *)udp + tunnel_len, data_end, inner_proto, &copy))
			return xlb_strip(ctx, ip_len + tunnel_len, inner_proto,
					 XLB_DECAP_OUT_DECAPSULATED);
		return xlb_strip(ctx, ip_len + tunnel_len, inner_proto,
				 XLB_DECAP_OUT_DECAPSULATED_COOKIE);
	}
	hint = xlb_pass_on_hint((void *)(udp + 1), data_end, family);
	if (hint && !xlb_flow_is_local(ctx, (void *)udp + tunnel_len, data_end, inner_proto)) {
		if (xlb_pass_on(eth, outer, family, udp, hint) == 0)
			return xlb_decap_outcome(XLB_DECAP_OUT_PASSED_ON, XDP_TX);
		return xlb_strip(ctx, ip_len + tunnel_len, inner_proto,
				 XLB_DECAP_OUT_DECAPSULATED_NO_NEXT_HOP);
	}
	return xlb_strip(ctx, ip_len + tunnel_len, inner_proto, XLB_DECAP_OUT_DECAPSULATED);
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
			return xlb_strip_gue(ctx, eth, iph, XLB_FAMILY_V4, (void *)iph + hlen,
					     hlen);
		/* the inner header must be there before we commit to stripping */
		if ((void *)iph + hlen + sizeof(struct iphdr) > data_end)
			return xlb_decap_outcome(XLB_DECAP_OUT_PASS_MALFORMED, XDP_PASS);
		return xlb_strip(ctx, hlen, ETH_P_IP, XLB_DECAP_OUT_DECAPSULATED);
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
			return xlb_strip_gue(ctx, eth, ip6h, XLB_FAMILY_V6, (void *)(ip6h + 1),
					     sizeof(*ip6h));
		if ((void *)(ip6h + 1) + (inner_proto == ETH_P_IP ? sizeof(struct iphdr)
								  : sizeof(struct ipv6hdr)) >
		    data_end)
			return xlb_decap_outcome(XLB_DECAP_OUT_PASS_MALFORMED, XDP_PASS);
		return xlb_strip(ctx, sizeof(*ip6h), inner_proto, XLB_DECAP_OUT_DECAPSULATED);
	}

	return xlb_decap_outcome(XLB_DECAP_OUT_PASS_NOT_ENCAP, XDP_PASS);
}
