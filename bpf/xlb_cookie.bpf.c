/* SPDX-License-Identifier: Apache-2.0 */
/*
 * xlb_cookie: the backend's cookie acceptor, on tc ingress of the interface
 * xlb_decap runs on. When the balancer answered a client's SYN with a SYN
 * cookie, this host never saw the SYN; the client's ACK reaches it with the
 * handshake's options (abi.h, struct xlb_gue_cookie), which xlb_decap hands
 * on in the maps this program shares with it (abi.h, XLB_MAP_COOKIE_ACKS).
 * For such an ACK to a listening socket this program
 * builds the request socket the kernel would have made for the SYN
 * (bpf_sk_assign_tcp_reqsk, Linux >= 6.9); the kernel then completes the
 * connection from the ACK, its ISNs included. The cookie itself was checked
 * by the balancer: nothing here can check it (the secret is the LB's).
 *
 * Every other packet passes uncounted, and while no cookie ACK is pending
 * (XLB_MAP_COOKIE_PENDING) without a table lookup.
 */
#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/in.h>
#include <linux/ip.h>
#include <linux/ipv6.h>
#include <linux/pkt_cls.h>
#include <linux/tcp.h>
#include <bpf/bpf_endian.h>
#include <bpf/bpf_helpers.h>

#include "xlb/abi.h"
#include "lib/cookie_maps.h"
#include "lib/counters.h"

char LICENSE[] SEC("license") = "Dual BSD/GPL";

/* The kernel's argument of bpf_sk_assign_tcp_reqsk (not in the UAPI headers;
 * its size is checked by the kfunc). Timestamps in host order. */
struct bpf_tcp_req_attrs {
	__u32 rcv_tsval;
	__u32 rcv_tsecr;
	__u16 mss;
	__u8 rcv_wscale;
	__u8 snd_wscale;
	__u8 ecn_ok;
	__u8 wscale_ok;
	__u8 sack_ok;
	__u8 tstamp_ok;
	__u8 usec_ts_ok;
	__u8 reserved[3];
};

/* Opaque here; a complete type, because libbpf matches the kfunc's
 * prototype against the kernel's kind by kind and a forward declaration is
 * not a struct to it. */
struct sock {
	__u8 opaque;
};
extern int bpf_sk_assign_tcp_reqsk(struct __sk_buff *skb, struct sock *sk,
				   struct bpf_tcp_req_attrs *attrs, int attrs__sz) __ksym;

XLB_OUTCOME_COUNTERS(xlb_cookie_stats, XLB_COOKIE_OUT__MAX);

static __always_inline int xlb_cookie_outcome(enum xlb_cookie_outcome outcome, int action)
{
	return xlb_count_outcome(&xlb_cookie_stats, outcome, action);
}

/* The request socket's attributes from what the balancer negotiated. */
static __always_inline void xlb_fill_attrs(struct bpf_tcp_req_attrs *attrs,
					   const struct xlb_gue_cookie *cookie)
{
	attrs->mss = bpf_ntohs(cookie->mss);
	if (cookie->flags & XLB_GUE_COOKIE_F_WSCALE) {
		attrs->wscale_ok = 1;
		attrs->snd_wscale = cookie->snd_wscale;
		attrs->rcv_wscale = cookie->rcv_wscale;
	}
	attrs->sack_ok = (cookie->flags & XLB_GUE_COOKIE_F_SACK) != 0;
	attrs->ecn_ok = (cookie->flags & XLB_GUE_COOKIE_F_ECN) != 0;
	if (cookie->flags & XLB_GUE_COOKIE_F_TSTAMP) {
		/* The ACK's own: its TSval is the client's clock, its TSecr
		 * echoes the SYN-ACK's, which becomes this side's clock offset. */
		attrs->tstamp_ok = 1;
		attrs->rcv_tsval = bpf_ntohl(cookie->tsval);
		attrs->rcv_tsecr = bpf_ntohl(cookie->tsecr);
	}
}

/* Takes the cookie data xlb_decap left for this flow, if any, into *cookie. */
static __always_inline int xlb_take_cookie(const struct xlb_cookie_ack_key *key,
					   struct xlb_gue_cookie *cookie, __u64 *pending)
{
	struct xlb_gue_cookie *left = bpf_map_lookup_elem(&xlb_cookie_acks, key);

	if (!left)
		return -1;
	__builtin_memcpy(cookie, left, sizeof(*cookie));
	/* only the one that deletes it counts it taken (RPS: two CPUs may race) */
	if (bpf_map_delete_elem(&xlb_cookie_acks, key) == 0)
		__sync_fetch_and_add(pending, -1);
	return cookie->magic == XLB_GUE_COOKIE_MAGIC ? 0 : -1;
}

SEC("tc")
int xlb_cookie(struct __sk_buff *skb)
{
	void *data = (void *)(long)skb->data;
	void *data_end = (void *)(long)skb->data_end;
	struct bpf_tcp_req_attrs attrs = {};
	struct xlb_cookie_ack_key key = {};
	struct bpf_sock_tuple tuple = {};
	struct xlb_gue_cookie cookie;
	struct ethhdr *eth = data;
	struct bpf_sock *sk;
	struct tcp_sock *tp;
	struct tcphdr *th;
	__u32 tuple_len, zero = 0;
	__u64 *pending;
	int rc;

	pending = bpf_map_lookup_elem(&xlb_cookie_pending, &zero);
	if (!pending || *pending == 0)
		return TC_ACT_OK;
	if ((void *)(eth + 1) > data_end)
		return TC_ACT_OK;
	if (eth->h_proto == bpf_htons(ETH_P_IP)) {
		struct iphdr *iph = (void *)(eth + 1);

		if ((void *)(iph + 1) > data_end || iph->protocol != IPPROTO_TCP || iph->ihl != 5)
			return TC_ACT_OK;
		th = (void *)(iph + 1);
		if ((void *)(th + 1) > data_end)
			return TC_ACT_OK;
		key.saddr[0] = tuple.ipv4.saddr = iph->saddr;
		key.daddr[0] = tuple.ipv4.daddr = iph->daddr;
		key.family = XLB_FAMILY_V4;
		tuple.ipv4.sport = th->source;
		tuple.ipv4.dport = th->dest;
		tuple_len = sizeof(tuple.ipv4);
	} else if (eth->h_proto == bpf_htons(ETH_P_IPV6)) {
		struct ipv6hdr *ip6h = (void *)(eth + 1);

		if ((void *)(ip6h + 1) > data_end || ip6h->nexthdr != IPPROTO_TCP)
			return TC_ACT_OK;
		th = (void *)(ip6h + 1);
		if ((void *)(th + 1) > data_end)
			return TC_ACT_OK;
		__builtin_memcpy(key.saddr, &ip6h->saddr, 16);
		__builtin_memcpy(key.daddr, &ip6h->daddr, 16);
		__builtin_memcpy(tuple.ipv6.saddr, &ip6h->saddr, 16);
		__builtin_memcpy(tuple.ipv6.daddr, &ip6h->daddr, 16);
		key.family = XLB_FAMILY_V6;
		tuple.ipv6.sport = th->source;
		tuple.ipv6.dport = th->dest;
		tuple_len = sizeof(tuple.ipv6);
	} else {
		return TC_ACT_OK;
	}
	key.sport = th->source;
	key.dport = th->dest;
	if (xlb_take_cookie(&key, &cookie, pending))
		return TC_ACT_OK;
	if (!th->ack || th->syn || th->rst)
		return xlb_cookie_outcome(XLB_COOKIE_OUT_PASS_NOT_ACK, TC_ACT_OK);

	sk = bpf_skc_lookup_tcp(skb, &tuple, tuple_len, BPF_F_CURRENT_NETNS, 0);
	if (!sk)
		return xlb_cookie_outcome(XLB_COOKIE_OUT_PASS_NO_LISTENER, TC_ACT_OK);
	if (sk->state != BPF_TCP_LISTEN) {
		bpf_sk_release(sk);
		return xlb_cookie_outcome(XLB_COOKIE_OUT_PASS_ESTABLISHED, TC_ACT_OK);
	}
	tp = bpf_skc_to_tcp_sock(sk);
	if (!tp) {
		bpf_sk_release(sk);
		return xlb_cookie_outcome(XLB_COOKIE_OUT_PASS_NO_LISTENER, TC_ACT_OK);
	}
	xlb_fill_attrs(&attrs, &cookie);
	rc = bpf_sk_assign_tcp_reqsk(skb, (struct sock *)tp, &attrs, sizeof(attrs));
	bpf_sk_release(sk);
	if (rc < 0)
		return xlb_cookie_outcome(XLB_COOKIE_OUT_DROP_ASSIGN_FAILED, TC_ACT_SHOT);
	return xlb_cookie_outcome(XLB_COOKIE_OUT_ASSIGNED, TC_ACT_OK);
}
