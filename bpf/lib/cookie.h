/* SPDX-License-Identifier: Apache-2.0 */
/*
 * SYN cookies on the balancer (docs/syn-cookies.md) and the per-VIP source
 * lists.
 *
 * A SYN is answered in place: the frame becomes the SYN-ACK, from the VIP,
 * sent back out of the interface it came in on. Its sequence number is the
 * kernel's cookie (bpf_tcp_raw_gen_syncookie_*: the kernel's secret, its
 * rotation and its MSS table); window scale and SACK ride in the low six bits
 * of the timestamp value, as the kernel encodes them for its own cookies, so
 * a client that sends no timestamps gets neither.
 *
 * The handshake's ACK is checked with bpf_tcp_raw_check_syncookie_*, which
 * only says valid or not. The MSS index sits in the cookie's low bits, and
 * the check accepts an acknowledgment lowered by k exactly when k is at most
 * that index: two more checks find it. Window scale and SACK come back in the
 * echoed timestamp. All of it goes to the backend as GUE private data
 * (abi.h, struct xlb_gue_cookie).
 */
#ifndef XLB_BPF_COOKIE_H
#define XLB_BPF_COOKIE_H

#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/in.h>
#include <linux/ip.h>
#include <linux/ipv6.h>
#include <linux/tcp.h>
#include <bpf/bpf_endian.h>
#include <bpf/bpf_helpers.h>
#include "xlb/abi.h"
#include "csum.h"
#include "encap.h"
#include "maps.h"
#include "parse.h"

/* TCP option kinds and the SYN-ACK's option block (20 bytes: MSS, SACK
 * permitted, timestamps, NOP, window scale; absent ones are NOPs). */
#define XLB_TCPOPT_NOP 1
#define XLB_TCPOPT_MSS 2
#define XLB_TCPOPT_WSCALE 3
#define XLB_TCPOPT_SACK_PERM 4
#define XLB_TCPOPT_TIMESTAMP 8
#define XLB_SYNACK_OPTS 20
#define XLB_SYNACK_TCP_LEN (sizeof(struct tcphdr) + XLB_SYNACK_OPTS)
/* The low bits of TSval that carry the options (the kernel's encoding). */
#define XLB_TS_OPT_BITS 6
#define XLB_TS_OPT_WSCALE_MASK 0xf
#define XLB_TS_OPT_SACK 0x10
#define XLB_TCP_MAX_WSCALE 14
/* Room for a whole TCP header; the index mask keeps reads inside. */
#define XLB_TCP_BUF 64

struct xlb_tcp_opts {
	__u16 mss; /* 0: none */
	__u8 wscale; /* with has_wscale */
	__u8 has_wscale;
	__u8 sack_ok;
	__u8 has_ts;
	__u8 pad[2];
	__u32 tsval; /* host order */
	__u32 tsecr;
};

/* The kernel's cookie MSS tables (net/ipv4 and net/ipv6 syncookies.c): the
 * cookie carries an index into them. */
static __always_inline __u16 xlb_cookie_mss(__u8 family, __u32 index)
{
	if (family == XLB_FAMILY_V4)
		return index == 0 ? 536 : index == 1 ? 1300 : index == 2 ? 1440 : 1460;
	return index == 0 ? 1220 : index == 1 ? 1420 : index == 2 ? 1440 : 8940;
}

/* Copies the TCP header (doff * 4 bytes, 20-60) at `th` into buf, whose rest
 * stays zero: the cookie helpers take a header that is readable whole.
 * Returns its length, or 0. */
static __always_inline __u32 xlb_tcp_copy(struct xdp_md *ctx, const struct tcphdr *th, __u32 off,
					  __u8 *buf)
{
	__u32 len = th->doff * 4;

	if (len < sizeof(struct tcphdr) || len > 60)
		return 0;
	if (bpf_xdp_load_bytes(ctx, off, buf, len))
		return 0;
	return len;
}

/* A header copied out of the packet (xlb_tcp_copy), with room for an
 * option that starts at byte 59 to be read whole, and its options: one per
 * CPU in a map (abi.h, XLB_MAP_COOKIE_SCRATCH), not on the stack. */
struct xlb_opt_walk {
	__u8 buf[XLB_TCP_BUF + 8];
	struct xlb_tcp_opts opts;
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct xlb_opt_walk);
} xlb_cookie_tmp SEC(".maps");

/* This CPU's walk, zeroed (the helpers read the header's buffer whole), or
 * NULL. */
static __always_inline struct xlb_opt_walk *xlb_opt_walk_get(void)
{
	__u32 zero = 0;
	struct xlb_opt_walk *w = bpf_map_lookup_elem(&xlb_cookie_tmp, &zero);

	if (w)
		__builtin_memset(w, 0, sizeof(*w));
	return w;
}

/*
 * The options the handshake needs from the header of `len` bytes in w->buf.
 * One step per byte position, each reading fixed positions: the verifier
 * sees no variable stack offsets and paths that meet again at each step
 * (a loop over options, its offset a variable, did not verify in a
 * million instructions).
 */
static __always_inline void xlb_tcp_parse_opts(struct xlb_opt_walk *w, __u32 len)
{
	__u32 next = sizeof(struct tcphdr), done = 0;
	const __u8 *b = w->buf;

#pragma unroll
	for (__u32 i = sizeof(struct tcphdr); i < 60; i++) {
		__u8 kind, olen;

		if (done || i != next || i >= len)
			continue;
		kind = b[i];
		if (kind == 0) {
			done = 1;
			continue;
		}
		if (kind == XLB_TCPOPT_NOP) {
			next = i + 1;
			continue;
		}
		olen = b[i + 1];
		if (olen < 2 || i + olen > len) {
			done = 1;
			continue;
		}
		next = i + olen;
		if (kind == XLB_TCPOPT_MSS && olen == 4) {
			w->opts.mss = ((__u16)b[i + 2] << 8) | b[i + 3];
		} else if (kind == XLB_TCPOPT_WSCALE && olen == 3) {
			w->opts.wscale =
				b[i + 2] > XLB_TCP_MAX_WSCALE ? XLB_TCP_MAX_WSCALE : b[i + 2];
			w->opts.has_wscale = 1;
		} else if (kind == XLB_TCPOPT_SACK_PERM && olen == 2) {
			w->opts.sack_ok = 1;
		} else if (kind == XLB_TCPOPT_TIMESTAMP && olen == 10) {
			w->opts.tsval = ((__u32)b[i + 2] << 24) | ((__u32)b[i + 3] << 16) |
					((__u32)b[i + 4] << 8) | b[i + 5];
			w->opts.tsecr = ((__u32)b[i + 6] << 24) | ((__u32)b[i + 7] << 16) |
					((__u32)b[i + 8] << 8) | b[i + 9];
			w->opts.has_ts = 1;
		}
	}
}

/* The SYN-ACK's TSval: this host's millisecond clock with its low bits
 * replaced by the client's options, never ahead of the clock. */
static __always_inline __u32 xlb_cookie_tsval(const struct xlb_tcp_opts *opts)
{
	__u32 now = (__u32)(bpf_ktime_get_ns() / 1000000);
	__u32 options = opts->has_wscale ? opts->wscale : XLB_TS_OPT_WSCALE_MASK;
	__u32 ts;

	if (opts->sack_ok)
		options |= XLB_TS_OPT_SACK;
	ts = (now & ~((1U << XLB_TS_OPT_BITS) - 1)) | options;
	if ((__s32)(ts - now) > 0)
		ts -= 1U << XLB_TS_OPT_BITS;
	return ts;
}

/* The SYN-ACK's TCP header and options, checksum 0, into `out`. */
static __always_inline void xlb_synack_tcp(__u8 *out, __be16 sport, __be16 dport, __u32 cookie,
					   __u32 client_seq, __u16 mss,
					   const struct xlb_tcp_opts *opts)
{
	struct tcphdr *th = (void *)out;
	__u8 *o = out + sizeof(struct tcphdr);

	__builtin_memset(out, 0, XLB_SYNACK_TCP_LEN);
	th->source = sport;
	th->dest = dport;
	th->seq = bpf_htonl(cookie);
	th->ack_seq = bpf_htonl(client_seq + 1);
	th->doff = XLB_SYNACK_TCP_LEN / 4;
	th->syn = 1;
	th->ack = 1;
	th->window = bpf_htons(XLB_COOKIE_SYNACK_WINDOW);
	o[0] = XLB_TCPOPT_MSS;
	o[1] = 4;
	o[2] = mss >> 8;
	o[3] = mss & 0xff;
	if (opts->sack_ok) {
		o[4] = XLB_TCPOPT_SACK_PERM;
		o[5] = 2;
	} else {
		o[4] = XLB_TCPOPT_NOP;
		o[5] = XLB_TCPOPT_NOP;
	}
	if (opts->has_ts) {
		__u32 tsval = xlb_cookie_tsval(opts);

		o[6] = XLB_TCPOPT_TIMESTAMP;
		o[7] = 10;
		o[8] = tsval >> 24;
		o[9] = tsval >> 16;
		o[10] = tsval >> 8;
		o[11] = tsval;
		o[12] = opts->tsval >> 24;
		o[13] = opts->tsval >> 16;
		o[14] = opts->tsval >> 8;
		o[15] = opts->tsval;
	} else {
		__builtin_memset(o + 6, XLB_TCPOPT_NOP, 10);
	}
	o[16] = XLB_TCPOPT_NOP;
	if (opts->has_wscale) {
		o[17] = XLB_TCPOPT_WSCALE;
		o[18] = 3;
		o[19] = XLB_COOKIE_RCV_WSCALE;
	} else {
		o[17] = XLB_TCPOPT_NOP;
		o[18] = XLB_TCPOPT_NOP;
		o[19] = XLB_TCPOPT_NOP;
	}
}

/*
 * Turns the SYN in the frame into its cookie SYN-ACK. Returns 0; 1 when the
 * SYN cannot be answered and the frame is untouched (the helper refuses it,
 * the frame cannot be resized: the caller forwards it as usual); or
 * -XLB_OUT_DROP_HEADROOM when the frame was moved and is lost. IPv4 options,
 * IPv6 extension headers and any data of the SYN are not carried over.
 */
/* Inlined into xlb_cookie_syn, out of line: packet pointers cannot cross
 * into it, so it takes where the TCP header starts (l4_off). */
static __always_inline int xlb_cookie_answer(struct xdp_md *ctx, const struct xlb_packet *pkt,
					     __u32 l4_off)
{
	void *data, *data_end;
	struct xlb_opt_walk *walk = xlb_opt_walk_get();
	__u8 *buf;
	struct xlb_tcp_opts *opts;
	struct ethhdr *eth;
	const struct tcphdr *th;
	__u8 client_mac[ETH_ALEN], our_mac[ETH_ALEN];
	__u32 len, ip_hlen, new_len, cookie, sum, client_seq;
	__s64 gen;
	__u16 mss;
	int delta;

	if (!ctx || !pkt || !walk || l4_off > 255)
		return 1;
	buf = walk->buf;
	opts = &walk->opts;
	/* Bounded in the register the verifier follows (clang tests a copy
	 * and drops a plain mask it can prove redundant). */
	asm volatile("%0 &= 0xff" : "+r"(l4_off));
	data = (void *)(long)ctx->data;
	data_end = (void *)(long)ctx->data_end;
	eth = data;
	th = data + l4_off;
	if ((void *)(eth + 1) > data_end || (void *)(th + 1) > data_end)
		return 1;
	len = xlb_tcp_copy(ctx, th, l4_off, buf);
	if (!len)
		return 1;
	if (pkt->key.family == XLB_FAMILY_V4) {
		struct iphdr *iph = (void *)(eth + 1);

		if ((void *)(iph + 1) > data_end)
			return 1;
		gen = bpf_tcp_raw_gen_syncookie_ipv4(iph, (struct tcphdr *)buf, len);
		ip_hlen = sizeof(struct iphdr);
	} else {
		struct ipv6hdr *ip6h = (void *)(eth + 1);

		if ((void *)(ip6h + 1) > data_end)
			return 1;
		gen = bpf_tcp_raw_gen_syncookie_ipv6(ip6h, (struct tcphdr *)buf, len);
		ip_hlen = sizeof(struct ipv6hdr);
	}
	if (gen < 0)
		return 1;
	cookie = (__u32)gen;
	mss = (__u16)(gen >> 32);
	xlb_tcp_parse_opts(walk, len);
	client_seq = bpf_ntohl(((struct tcphdr *)buf)->seq);

	/* Headers are rebuilt from the frame's start: grow at the head (XDP
	 * guarantees headroom), shrink at the tail. */
	__builtin_memcpy(client_mac, eth->h_source, ETH_ALEN);
	__builtin_memcpy(our_mac, eth->h_dest, ETH_ALEN);
	new_len = sizeof(struct ethhdr) + ip_hlen + XLB_SYNACK_TCP_LEN;
	delta = (int)new_len - (int)(data_end - data);
	if (delta > 0 && bpf_xdp_adjust_head(ctx, -delta))
		return 1;
	if (delta < 0 && bpf_xdp_adjust_tail(ctx, delta))
		return 1;
	data = (void *)(long)ctx->data;
	data_end = (void *)(long)ctx->data_end;
	eth = data;
	if ((void *)(eth + 1) > data_end)
		return -XLB_OUT_DROP_HEADROOM;
	__builtin_memcpy(eth->h_dest, client_mac, ETH_ALEN);
	__builtin_memcpy(eth->h_source, our_mac, ETH_ALEN);

	if (pkt->key.family == XLB_FAMILY_V4) {
		struct iphdr *iph = (void *)(eth + 1);
		__u8 *out = (void *)(iph + 1);

		if ((void *)out + XLB_SYNACK_TCP_LEN > data_end)
			return -XLB_OUT_DROP_HEADROOM;
		eth->h_proto = bpf_htons(ETH_P_IP);
		iph->version = 4;
		iph->ihl = 5;
		iph->tos = 0;
		iph->tot_len = bpf_htons(sizeof(struct iphdr) + XLB_SYNACK_TCP_LEN);
		iph->id = 0;
		iph->frag_off = bpf_htons(IP_DF);
		iph->ttl = XLB_COOKIE_TTL;
		iph->protocol = IPPROTO_TCP;
		iph->saddr = pkt->key.dst[0];
		iph->daddr = pkt->key.src[0];
		xlb_ipv4_set_csum(iph);
		xlb_synack_tcp(out, pkt->key.dport, pkt->key.sport, cookie, client_seq, mss, opts);
		sum = xlb_csum_add_words(&iph->saddr, 4, 0);
		sum += bpf_htons(IPPROTO_TCP) + bpf_htons(XLB_SYNACK_TCP_LEN);
		sum = xlb_csum_add_words(out, XLB_SYNACK_TCP_LEN / 2, sum);
		((struct tcphdr *)out)->check = xlb_csum_fold(sum);
	} else {
		struct ipv6hdr *ip6h = (void *)(eth + 1);
		__u8 *out = (void *)(ip6h + 1);

		if ((void *)out + XLB_SYNACK_TCP_LEN > data_end)
			return -XLB_OUT_DROP_HEADROOM;
		eth->h_proto = bpf_htons(ETH_P_IPV6);
		*(__be32 *)ip6h = bpf_htonl(0x60000000);
		ip6h->payload_len = bpf_htons(XLB_SYNACK_TCP_LEN);
		ip6h->nexthdr = IPPROTO_TCP;
		ip6h->hop_limit = XLB_COOKIE_TTL;
		__builtin_memcpy(&ip6h->saddr, pkt->key.dst, 16);
		__builtin_memcpy(&ip6h->daddr, pkt->key.src, 16);
		xlb_synack_tcp(out, pkt->key.dport, pkt->key.sport, cookie, client_seq, mss, opts);
		sum = xlb_csum_add_words(pkt->key.src, 8, 0);
		sum = xlb_csum_add_words(pkt->key.dst, 8, sum);
		sum += bpf_htons(XLB_SYNACK_TCP_LEN) + bpf_htons(IPPROTO_TCP);
		sum = xlb_csum_add_words(out, XLB_SYNACK_TCP_LEN / 2, sum);
		((struct tcphdr *)out)->check = xlb_csum_fold(sum);
	}
	return 0;
}

/* Whether the header in buf (an ACK) carries a valid cookie. */
static __always_inline int xlb_cookie_valid(void *iph, __u8 family, __u8 *buf)
{
	if (family == XLB_FAMILY_V4)
		return bpf_tcp_raw_check_syncookie_ipv4(iph, (struct tcphdr *)buf) == 0;
	return bpf_tcp_raw_check_syncookie_ipv6(iph, (struct tcphdr *)buf) == 0;
}

/* The cookie check of the ACK with its acknowledgment lowered by k. */
static __always_inline int xlb_cookie_valid_below(void *iph, __u8 family, __u8 *buf, __u32 ack,
						  __u32 k)
{
	((struct tcphdr *)buf)->ack_seq = bpf_htonl(ack - k);
	return xlb_cookie_valid(iph, family, buf);
}

/*
 * Checks the TCP packet at l4_off against the cookies this host sends:
 * an ACK without SYN or RST. Returns 1 with *out filled (struct
 * xlb_gue_cookie) when it carries a valid one, 0 when not, -1 when it
 * cannot be read.
 */
static __always_inline int xlb_cookie_check(struct xdp_md *ctx, const struct xlb_packet *pkt,
					    __u32 l4_off, struct xlb_gue_cookie *out)
{
	void *data, *data_end, *iph;
	const struct tcphdr *th;
	struct xlb_opt_walk *walk = xlb_opt_walk_get();
	__u8 *buf;
	const struct xlb_tcp_opts *opts;
	__u8 family;
	__u32 len, ack, index;

	if (!ctx || !pkt || !out || !walk || l4_off > 255)
		return -1;
	buf = walk->buf;
	opts = &walk->opts;
	asm volatile("%0 &= 0xff" : "+r"(l4_off));
	family = pkt->key.family;
	data = (void *)(long)ctx->data;
	data_end = (void *)(long)ctx->data_end;
	iph = data + sizeof(struct ethhdr);
	th = data + l4_off;
	if ((void *)(th + 1) > data_end)
		return -1;
	len = xlb_tcp_copy(ctx, th, l4_off, buf);
	if (!len)
		return -1;
	if (!((struct tcphdr *)buf)->ack || ((struct tcphdr *)buf)->syn ||
	    ((struct tcphdr *)buf)->rst)
		return 0;
	data = (void *)(long)ctx->data;
	data_end = (void *)(long)ctx->data_end;
	iph = data + sizeof(struct ethhdr);
	if (iph + sizeof(struct ipv6hdr) > data_end)
		return -1;
	if (!xlb_cookie_valid(iph, family, buf))
		return 0;
	/* The MSS index: the largest k in 0..3 the check still accepts. */
	ack = bpf_ntohl(((struct tcphdr *)buf)->ack_seq);
	if (xlb_cookie_valid_below(iph, family, buf, ack, 2))
		index = xlb_cookie_valid_below(iph, family, buf, ack, 3) ? 3 : 2;
	else
		index = xlb_cookie_valid_below(iph, family, buf, ack, 1) ? 1 : 0;
	((struct tcphdr *)buf)->ack_seq = bpf_htonl(ack);
	xlb_tcp_parse_opts(walk, len);

	__builtin_memset(out, 0, sizeof(*out));
	out->magic = XLB_GUE_COOKIE_MAGIC;
	out->rcv_wscale = XLB_COOKIE_RCV_WSCALE;
	out->mss = bpf_htons(xlb_cookie_mss(family, index));
	if (opts->has_ts) {
		__u32 echoed = opts->tsecr;

		out->flags |= XLB_GUE_COOKIE_F_TSTAMP;
		out->tsval = bpf_htonl(opts->tsval);
		out->tsecr = bpf_htonl(opts->tsecr);
		if (echoed & XLB_TS_OPT_SACK)
			out->flags |= XLB_GUE_COOKIE_F_SACK;
		if ((echoed & XLB_TS_OPT_WSCALE_MASK) != XLB_TS_OPT_WSCALE_MASK) {
			out->flags |= XLB_GUE_COOKIE_F_WSCALE;
			out->snd_wscale = echoed & XLB_TS_OPT_WSCALE_MASK;
		}
	}
	return 1;
}

/* Pushes the outer headers of a cookie ACK: GUE with `cookie` as private
 * data. 0 or -outcome. */
static __always_inline int xlb_push_encap_cookie(struct xdp_md *ctx, const struct xlb_packet *pkt,
						 const struct xlb_backend *be,
						 const struct xlb_config *cfg, __u32 hash,
						 const struct xlb_gue_cookie *cookie)
{
	const __u32 v4 = sizeof(struct iphdr), v6 = sizeof(struct ipv6hdr);
	void *outer;

	if (be->family == XLB_FAMILY_V4) {
		outer = xlb_push_outer(ctx, cfg, v4 + XLB_GUE_OVERHEAD + XLB_GUE_COOKIE_LEN,
				       ETH_P_IP);
		if (outer) {
			xlb_fill_outer_v4(outer, pkt, be, cfg, hash, XLB_GUE_COOKIE_LEN);
			xlb_fill_gue(outer + v4, pkt, cfg, hash, NULL, XLB_GUE_COOKIE_LEN);
			__builtin_memcpy(outer + v4 + XLB_GUE_OVERHEAD, cookie, XLB_GUE_COOKIE_LEN);
		}
	} else {
		outer = xlb_push_outer(ctx, cfg, v6 + XLB_GUE_OVERHEAD + XLB_GUE_COOKIE_LEN,
				       ETH_P_IPV6);
		if (outer) {
			xlb_fill_outer_v6(outer, pkt, be, cfg, hash, XLB_GUE_COOKIE_LEN);
			xlb_fill_gue(outer + v6, pkt, cfg, hash, NULL, XLB_GUE_COOKIE_LEN);
			__builtin_memcpy(outer + v6 + XLB_GUE_OVERHEAD, cookie, XLB_GUE_COOKIE_LEN);
		}
	}
	return outer ? 0 : -XLB_OUT_DROP_HEADROOM;
}

/* Whether the VIP's source lists refuse the client (abi.h, struct
 * xlb_src_range_key). */
static __always_inline int xlb_source_denied(__u32 vip_id, const struct xlb_flow_key *key)
{
	struct xlb_src_range_key k;
	__u8 *verdict;

	k.vip_id = bpf_htonl(vip_id);
	if (key->family == XLB_FAMILY_V4) {
		k.prefixlen = 32 + 128;
		k.addr[0] = 0;
		k.addr[1] = 0;
		k.addr[2] = bpf_htonl(0x0000ffff);
		k.addr[3] = key->src[0];
	} else {
		k.prefixlen = 32 + 128;
		__builtin_memcpy(k.addr, key->src, 16);
	}
	verdict = bpf_map_lookup_elem(&xlb_src_ranges, &k);
	return verdict && *verdict == XLB_SOURCE_DENY;
}

/* Whether a VIP with a cookie flag answers SYNs now: always, or auto
 * during a flood. */
static __always_inline int xlb_cookies_answering(__u32 vip_flags)
{
	return (vip_flags & XLB_VIP_F_COOKIES_ALWAYS) || xlb_syn_flood == XLB_SYN_FLOOD_ANSWERING;
}

/*
 * A SYN to a VIP with a cookie flag: counted (the flood detector's input),
 * and answered while the VIP answers. Returns 0 (not answered, the frame
 * untouched: balance it as usual), XLB_OUT_TX_SYN_COOKIE (the frame is the
 * SYN-ACK) or another outcome to drop it with. Out of line, like the two
 * below, so that the choices made here do not multiply the paths the
 * verifier walks through the rest of the balancer. The caller has checked
 * that the balancer encapsulates in GUE, which carries the ACK's options.
 */
__noinline int xlb_cookie_syn(struct xdp_md *ctx, const struct xlb_packet *pkt, __u32 l4_off,
			      const struct xlb_vip_value *vip)
{
	struct xlb_vip_cookie_stats *stats;
	__u32 vip_id;
	int err;

	if (!ctx || !pkt || !vip)
		return 0;
	vip_id = vip->vip_id;
	stats = bpf_map_lookup_elem(&xlb_vip_cookies, &vip_id);
	if (stats)
		stats->syns += 1;
	if (!xlb_cookies_answering(vip->flags))
		return 0;
	err = xlb_cookie_answer(ctx, pkt, l4_off);
	if (err > 0)
		return 0;
	if (err < 0)
		return -err;
	if (stats)
		stats->cookies_sent += 1;
	return XLB_OUT_TX_SYN_COOKIE;
}

/*
 * An ACK without entry to a VIP with a cookie flag, while cookies sent may
 * come back (the VIP answers, or a flood ended less than
 * XLB_SYN_FLOOD_RECENT_MS ago): 1 with *out filled when it carries a valid
 * cookie, 0 to balance it as usual, -XLB_OUT_DROP_COOKIE_INVALID to drop it
 * (no valid cookie while the VIP answers).
 */
__noinline int xlb_cookie_ack(struct xdp_md *ctx, const struct xlb_packet *pkt, __u32 l4_off,
			      const struct xlb_vip_value *vip, struct xlb_gue_cookie *out)
{
	struct xlb_vip_cookie_stats *stats;
	int answering;
	__u32 vip_id;

	if (!ctx || !pkt || !vip || !out)
		return 0;
	answering = xlb_cookies_answering(vip->flags);
	if (!answering && xlb_syn_flood == XLB_SYN_FLOOD_CALM)
		return 0;
	vip_id = vip->vip_id;
	stats = bpf_map_lookup_elem(&xlb_vip_cookies, &vip_id);
	if (xlb_cookie_check(ctx, pkt, l4_off, out) > 0) {
		if (stats)
			stats->acks_valid += 1;
		return 1;
	}
	if (!answering)
		return 0;
	if (stats)
		stats->acks_invalid += 1;
	return -XLB_OUT_DROP_COOKIE_INVALID;
}

#endif /* XLB_BPF_COOKIE_H */
