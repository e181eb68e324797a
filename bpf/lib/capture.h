/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Packet capture (docs/capture.md): while the agent's flag is set, packets
 * whose verdict matches its filter are copied into xlb_capture_ring, as
 * received and, when sent on, as sent. The whole cost is in one function out
 * of line, called at the verdict only while the flag is set.
 */
#ifndef XLB_BPF_CAPTURE_H
#define XLB_BPF_CAPTURE_H

#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <bpf/bpf_helpers.h>

#include "xlb/abi.h"
#include "maps.h"

/* In a section of their own, so that .bss (the connection-table clock) has
 * one layout whether or not the capture check is built in (the benchmark's
 * copy without it shares .bss with the balancer). */
#define XLB_CAPTURE_SEC SEC(".data.capture")
volatile __u32 xlb_capture_on XLB_CAPTURE_SEC;
struct xlb_capture_filter xlb_capture_filter XLB_CAPTURE_SEC;
/* Packets that matched the filter, and records the ring had no room for. */
__u64 xlb_capture_matched XLB_CAPTURE_SEC;
__u64 xlb_capture_lost XLB_CAPTURE_SEC;

/* What the capture needs to know of a packet's verdict. */
struct xlb_capture_meta {
	__u8 outcome;
	__u8 family; /* of src; 0: not parsed */
	__u8 backend_family; /* 0: not sent to a backend */
	__u8 has_vip;
	__u32 vip_id;
	__u32 inner_off; /* sent on: where the received IP packet now begins */
	__be32 src[4];
	__be32 backend[4];
};

static __always_inline __u8 *xlb_capture_data(struct xlb_capture_record *r)
{
	return (__u8 *)(r + 1);
}

/* Copies `len` bytes at `off` into the record's data (with_eth: an Ethernet
 * header, then len - 14 bytes from `off`), at most `room`; returns the bytes
 * kept. The Ethernet header of a packet sent on is not kept (the outer
 * header overwrote it): its addresses are those it was sent with, its type
 * the inner packet's. The empty asm hides what the compiler knows of `n`, so
 * that it keeps the clamp the verifier needs to see. */
static __always_inline __u32 xlb_capture_copy(struct xdp_md *ctx, struct xlb_capture_record *r,
					      const struct xlb_capture_meta *m, __u32 len,
					      __u32 off, int with_eth, __u32 room)
{
	__u64 n = len;

	if (with_eth) {
		__u8 *data = xlb_capture_data(r);

		if (n < sizeof(struct ethhdr) ||
		    bpf_xdp_load_bytes(ctx, 0, data, 2 * ETH_ALEN) != 0)
			return 0;
		data[12] = m->family == XLB_FAMILY_V6 ? 0x86 : 0x08;
		data[13] = m->family == XLB_FAMILY_V6 ? 0xdd : 0x00;
		n -= sizeof(struct ethhdr);
		asm volatile("" : "+r"(n));
		if (n > room - sizeof(struct ethhdr))
			n = room - sizeof(struct ethhdr);
		if (n > 0 && bpf_xdp_load_bytes(
				     ctx, off, xlb_capture_data(r) + sizeof(struct ethhdr), n) != 0)
			return sizeof(struct ethhdr);
		return n + sizeof(struct ethhdr);
	}
	asm volatile("" : "+r"(n));
	if (n > room)
		n = room;
	if (n > 0 && bpf_xdp_load_bytes(ctx, off, xlb_capture_data(r), n) != 0)
		return 0;
	return n;
}

static __always_inline void xlb_capture_emit(struct xdp_md *ctx, const struct xlb_capture_meta *m,
					     __u8 direction, __u32 len, __u32 off, int with_eth)
{
	struct xlb_capture_record *r;
	__u32 keep = len, snaplen = xlb_capture_filter.snaplen;

	if (keep > snaplen)
		keep = snaplen;
	if (keep <= XLB_CAPTURE_DATA_SMALL) {
		r = bpf_ringbuf_reserve(&xlb_capture_ring, sizeof(*r) + XLB_CAPTURE_DATA_SMALL, 0);
		if (r)
			r->caplen = xlb_capture_copy(ctx, r, m, keep, off, with_eth,
						     XLB_CAPTURE_DATA_SMALL);
	} else {
		r = bpf_ringbuf_reserve(&xlb_capture_ring, sizeof(*r) + XLB_CAPTURE_DATA_MAX, 0);
		if (r)
			r->caplen = xlb_capture_copy(ctx, r, m, keep, off, with_eth,
						     XLB_CAPTURE_DATA_MAX);
	}
	if (!r) {
		__sync_fetch_and_add(&xlb_capture_lost, 1);
		return;
	}
	r->time_ns = bpf_ktime_get_ns();
	r->ifindex = ctx->ingress_ifindex;
	r->len = len;
	r->vip_id = m->vip_id;
	r->outcome = m->outcome;
	r->direction = direction;
	r->flags = m->has_vip ? XLB_CAPTURE_F_VIP : 0;
	bpf_ringbuf_submit(r, 0);
}

static __always_inline int xlb_capture_addr_match(const __be32 *a, const __be32 *b,
						  const __be32 *mask)
{
	return ((a[0] ^ b[0]) & mask[0]) == 0 && ((a[1] ^ b[1]) & mask[1]) == 0 &&
	       ((a[2] ^ b[2]) & mask[2]) == 0 && ((a[3] ^ b[3]) & mask[3]) == 0;
}

/* Out of line and verified once: a capture's whole cost stays off the
 * packet's path until the flag is set. */
__noinline int xlb_capture_packet(struct xdp_md *ctx, const struct xlb_capture_meta *m)
{
	static const __be32 all[4] = { 0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff };
	const struct xlb_capture_filter *f = &xlb_capture_filter;
	__u32 now_len, outcome;

	if (!ctx || !m)
		return 0;
	outcome = m->outcome;
	if (outcome >= 32 || !(f->outcomes & (1U << outcome)))
		return 0;
	if ((f->flags & XLB_CAPTURE_F_VIP) && (!m->has_vip || m->vip_id != f->vip_id))
		return 0;
	if ((f->flags & XLB_CAPTURE_F_BACKEND) &&
	    (m->backend_family != f->backend_family ||
	     !xlb_capture_addr_match(m->backend, f->backend, all)))
		return 0;
	if ((f->flags & XLB_CAPTURE_F_SRC) &&
	    (m->family != f->src_family || !xlb_capture_addr_match(m->src, f->src, f->src_mask)))
		return 0;
	__sync_fetch_and_add(&xlb_capture_matched, 1);
	now_len = (__u32)(ctx->data_end - ctx->data);
	if (outcome == XLB_OUT_TX || outcome == XLB_OUT_TX_ICMP_ERROR) {
		if (m->inner_off < now_len)
			xlb_capture_emit(ctx, m, XLB_CAPTURE_RECEIVED,
					 sizeof(struct ethhdr) + now_len - m->inner_off,
					 m->inner_off, 1);
		xlb_capture_emit(ctx, m, XLB_CAPTURE_SENT, now_len, 0, 0);
	} else if (outcome == XLB_OUT_TX_ICMP_TOO_BIG || outcome == XLB_OUT_TX_SYN_COOKIE) {
		/* rewritten in place into the answer: only that is left */
		xlb_capture_emit(ctx, m, XLB_CAPTURE_SENT, now_len, 0, 0);
	} else {
		xlb_capture_emit(ctx, m, XLB_CAPTURE_RECEIVED, now_len, 0, 0);
	}
	return 0;
}

#endif /* XLB_BPF_CAPTURE_H */
