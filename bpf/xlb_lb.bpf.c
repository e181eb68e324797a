/* SPDX-License-Identifier: Apache-2.0 */
/*
 * xlb_lb: the XDP balancer. Per packet: parse, match a VIP, keep an
 * established flow on its backend through the connection table or pick one
 * from the VIP's Maglev ring, encapsulate towards it and XDP_TX. Everything
 * that is not for a VIP goes on to the kernel untouched. See
 * docs/architecture.md ("Design contracts") and include/xlb/abi.h for the
 * contracts.
 */
#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/in.h>
#include <bpf/bpf_endian.h>
#include <bpf/bpf_helpers.h>

#include "xlb/abi.h"
#include "xlb/ct_set.h"
#include "xlb/flow_hash.h"
#include "lib/maps.h"
#include "lib/capture.h"
#include "lib/conntrack.h"
#include "lib/cookie.h"
#include "lib/csum.h"
#include "lib/encap.h"
#include "lib/icmp.h"
#include "lib/parse.h"
#include "lib/quic.h"

char LICENSE[] SEC("license") = "Dual BSD/GPL";

/*
 * The VIP for {addr, port, proto} from its bucket's block of candidates
 * (abi.h, XLB_MAP_VIP_CANDIDATES): 1 with *out set, 0 when there is none, -1
 * when the block cannot say (spilled, or being rewritten).
 */
static __always_inline int xlb_match_vip_candidates(__u32 bucket, const __be32 *addr, __be16 port,
						    __u8 proto, __u8 family,
						    struct xlb_vip_value *out)
{
	struct xlb_vip_candidates *block = bpf_map_lookup_elem(&xlb_vip_cands, &bucket);
	__u32 seq, count;
	int found = 0;

	if (!block)
		return -1;
	seq = *(volatile __u32 *)&block->seq;
	if (seq & 1)
		return -1;
	asm volatile("" ::: "memory");
	count = block->count;
	if (count > XLB_VIP_CANDIDATES)
		return -1;
	for (__u32 i = 0; i < XLB_VIP_CANDIDATES; i++) {
		const struct xlb_vip_candidate *c = &block->vip[i];

		if (i >= count)
			break;
		if (c->family != family || c->proto != proto || c->addr[0] != addr[0] ||
		    c->addr[1] != addr[1] || c->addr[2] != addr[2] || c->addr[3] != addr[3])
			continue;
		if (c->port == port) {
			out->vip_id = c->vip_id;
			out->flags = c->flags;
			found = 2;
			break;
		}
		if (c->port == 0 && !found) {
			out->vip_id = c->vip_id;
			out->flags = c->flags;
			found = 1;
		}
	}
	asm volatile("" ::: "memory");
	if (*(volatile __u32 *)&block->seq != seq)
		return -1;
	return found != 0;
}

/* Exact {address, port, protocol} first, then the port wildcard. Returns 1
 * with *out set, or 0: no VIP. bucket: xlb_vip_bucket(addr). */
static __always_inline int xlb_match_vip(__u32 bucket, const __be32 *addr, __be16 port, __u8 proto,
					 __u8 family, struct xlb_vip_value *out)
{
	struct xlb_vip_key vk = {};
	struct xlb_vip_value *vip;
	int found = xlb_match_vip_candidates(bucket, addr, port, proto, family, out);

	if (found >= 0)
		return found;
	__builtin_memcpy(vk.addr, addr, 16);
	vk.port = port;
	vk.proto = proto;
	vk.family = family;
	vip = bpf_map_lookup_elem(&xlb_vips, &vk);
	if (!vip) {
		vk.port = 0;
		vip = bpf_map_lookup_elem(&xlb_vips, &vk);
	}
	if (!vip)
		return 0;
	*out = *vip;
	return 1;
}

/* The backend id `rings` (xlb_rings or xlb_prev_rings) names for the flow
 * hash: 0 with *id set, or -outcome. */
static __always_inline int xlb_ring_pick(void *rings, __u32 vip_id, __u32 hash, __u32 *id)
{
	__u32 slot_key = XLB_RING_SIZE_SLOT, *ring_size, *slot;
	void *ring = bpf_map_lookup_elem(rings, &vip_id);

	if (!ring)
		return -XLB_OUT_DROP_NO_TABLE;
	ring_size = bpf_map_lookup_elem(ring, &slot_key);
	if (!ring_size)
		return -XLB_OUT_DROP_NO_TABLE;
	if (*ring_size == 0)
		return -XLB_OUT_DROP_NO_BACKEND;
	slot_key = xlb_ring_slot(hash, *ring_size);
	slot = bpf_map_lookup_elem(ring, &slot_key);
	if (!slot)
		return -XLB_OUT_DROP_NO_TABLE;
	*id = *slot;
	return 0;
}

/* The backend a second-chance hint may name for a packet sent to `be`
 * (backend current_id): backend `id` when it is another backend, in use, not
 * down, and of be's family (the hint only swaps the outer destination);
 * NULL otherwise, and always without GUE, which carries the hint. */
static __always_inline struct xlb_backend *xlb_hint_target(__u32 id, __u32 current_id,
							   const struct xlb_backend *be,
							   const struct xlb_config *cfg)
{
	struct xlb_backend *prev;

	if (id == current_id || !xlb_gue(cfg))
		return NULL;
	prev = bpf_map_lookup_elem(&xlb_backends, &id);
	if (!prev || prev->generation == 0 || (prev->flags & XLB_BACKEND_F_DOWN) ||
	    prev->family != be->family)
		return NULL;
	return prev;
}

/* The hint a found entry asks for (its tail's), if any. */
static __always_inline struct xlb_backend *xlb_ct_hint(const struct xlb_ct_found *ref,
						       const struct xlb_backend *be,
						       const struct xlb_config *cfg)
{
	if (ref->hint == 0)
		return NULL;
	return xlb_hint_target(ref->hint - 1, xlb_ct_meta_backend(ref->meta), be, cfg);
}

/* What xlb_pick_backend may do besides reading the ring (a bitmask). */
enum xlb_pick {
	/* use the connection-table entry found, when its backend is live (not
	 * for a TCP SYN, which always starts a new connection) */
	XLB_PICK_USE_ENTRY = 1 << 0,
	/* write the ring's choice into the connection table, within the
	 * insert budget */
	XLB_PICK_RECORD = 1 << 1,
	/* a SYN: an entry already there for the tuple is an earlier
	 * connection's; rewrite it in place to the ring's choice, or the
	 * handshake's ACK would follow it to the old backend (rewriting
	 * inserts nothing, so it needs no budget) */
	XLB_PICK_REPOINT = 1 << 2,
	/* a TCP packet that is not a SYN, with XLB_CFG_F_SECOND_CHANCE: when
	 * the previous ring names another backend, it becomes the hint and is
	 * recorded in the entry (abi.h, struct xlb_gue_hint) */
	XLB_PICK_SECOND_CHANCE = 1 << 3,
};

/*
 * Chooses the backend for a flow: the connection-table entry `ref` found
 * (ref->present is 0 when the VIP skips the table), else the ring, as
 * `pick` (enum xlb_pick) allows. An entry's own hint is used too. Returns 0
 * with id_out and be_out set (*from_entry: whether the entry named it), or
 * -outcome.
 */
static __always_inline int xlb_pick_backend(const struct xlb_vip_value *vip,
					    const struct xlb_flow_key *key,
					    const struct xlb_config *cfg, struct xlb_ct_found *ref,
					    __u32 pick, __u32 hash, struct xlb_vip_stats *vstats,
					    __u32 *id_out, struct xlb_backend **be_out,
					    struct xlb_backend **hint_out, int *from_entry)
{
	struct xlb_backend *be, *hint = NULL;
	__u32 vip_id = vip->vip_id, prev_id = 0;
	int err;

	*from_entry = 0;
	if ((pick & XLB_PICK_USE_ENTRY) && ref->present && ref->found) {
		be = xlb_ct_backend(ref);
		if (be) {
			if (vstats)
				vstats->conntrack_hits += 1;
			*id_out = xlb_ct_meta_backend(ref->meta);
			*be_out = be;
			*hint_out = xlb_ct_hint(ref, be, cfg);
			*from_entry = 1;
			return 0;
		}
	}

	err = xlb_ring_pick(&xlb_rings, vip_id, hash, id_out);
	if (err)
		return err;
	be = bpf_map_lookup_elem(&xlb_backends, id_out);
	if (!be || be->generation == 0)
		return -XLB_OUT_DROP_BAD_BACKEND;
	if (vstats)
		vstats->new_flows += 1;
	if ((pick & XLB_PICK_SECOND_CHANCE) &&
	    xlb_ring_pick(&xlb_prev_rings, vip_id, hash, &prev_id) == 0)
		hint = xlb_hint_target(prev_id, *id_out, be, cfg);
	/* A SYN rewrites an earlier connection's entry in place (no budget:
	 * nothing is added); a recorded flow takes its stale entry's place, a
	 * free slot, or the entry seen longest ago (xlb_ct_place). */
	if (ref->present && (((pick & XLB_PICK_REPOINT) && ref->found) ||
			     ((pick & XLB_PICK_RECORD) && xlb_ct_admit(cfg)))) {
		int written = xlb_ct_insert(
			ref, xlb_ct_head_meta(vip_id, *id_out, be->generation, 0, 0, 0),
			hint ? prev_id + 1 : 0);

		/* Keeps the call's result, so that clang leaves the callee's
		 * return value in place (an unused one may be dropped, and the
		 * verifier then sees R0 hold whatever the callee left). */
		asm volatile("" ::"r"(written));
		/* Other CPUs may hold the earlier connection's copy. */
#ifndef XLB_NO_FLOW_CACHE
		if (pick & XLB_PICK_REPOINT)
			xlb_flow_cache_drop_everywhere(key);
#endif
	}
	*be_out = be;
	*hint_out = hint;
	return 0;
}

/* With cookie_ack, *cookie is the GUE data of a cookie ACK (never with a
 * hint). A flag rather than a pointer that may be NULL: the verifier keeps
 * apart states whose pointers differ in kind, and every path after the
 * choice would be checked twice. */
static __always_inline int xlb_encap(struct xdp_md *ctx, const struct xlb_packet *pkt,
				     const struct xlb_backend *be, const struct xlb_config *cfg,
				     __u32 hash, __u64 frame_len, const struct xlb_backend *hint,
				     const struct xlb_gue_cookie *cookie, int cookie_ack)
{
	__u64 packet_len = sizeof(struct ethhdr) + pkt->ip_len;

	if (be->family == XLB_FAMILY_V4 && pkt->key.family != XLB_FAMILY_V4)
		return -XLB_OUT_DROP_FAMILY;
	if (pkt->ip_len + xlb_encap_overhead(be, cfg, hint) +
		    (cookie_ack ? XLB_GUE_COOKIE_LEN : 0) >
	    cfg->mtu)
		return -XLB_OUT_DROP_TOO_BIG;
	/* Ethernet padding after the IP packet would ride inside the outer
	 * packet, past its length: cut it off first. */
	if (frame_len > packet_len && bpf_xdp_adjust_tail(ctx, -(int)(frame_len - packet_len)))
		return -XLB_OUT_DROP_HEADROOM;
	if (cookie_ack)
		return xlb_push_encap_cookie(ctx, pkt, be, cfg, hash, cookie);
	return xlb_push_encap(ctx, pkt, be, cfg, hash, hint);
}

/*
 * An ICMP "fragmentation needed" / ICMPv6 "packet too big" addressed to a VIP
 * quotes a packet the backend sent to the client (source = VIP). Reverse the
 * quoted tuple to find the client's flow and send the error to the backend
 * that owns it, so its path-MTU discovery works. Only an error sent to the
 * VIP it quotes qualifies (one to this host's own address is the kernel's),
 * and for IPv4 only one whose quoted header has a valid checksum: anything
 * else could make us forward junk to a backend. Fills pkt->key with the
 * client's flow and returns 1 with its VIP in *vip, 0 when the packet is not
 * such an error, or -XLB_OUT_DROP_ICMP_QUOTE for such an error whose quote
 * is not an IP packet of the error's family (dropped: it is addressed to a
 * VIP, and no backend should see it). bucket: the VIP bucket of the destination (the quoted
 * source). The caller has checked that the ICMP header lies in the packet.
 */
static __always_inline int xlb_match_icmp_error(const struct xlb_cursor *cur,
						struct xlb_packet *pkt, int proto, __u32 bucket,
						struct xlb_vip_value *vip)
{
	struct xlb_flow_key *key = &pkt->key;
	__u8 inner_proto;
	__be16 *ports;

	if (proto == IPPROTO_ICMP && key->family == XLB_FAMILY_V4) {
		struct icmphdr *icmp = cur->pos;
		struct iphdr *inner;

		if (!xlb_in_ip_packet(cur, icmp, sizeof(*icmp)))
			return 0;
		if (icmp->type != ICMP_DEST_UNREACH || icmp->code != ICMP_FRAG_NEEDED)
			return 0;
		inner = (void *)(icmp + 1);
		if (!xlb_in_ip_packet(cur, inner, sizeof(*inner)))
			return 0;
		if (inner->version != 4 || inner->ihl < 5)
			return -XLB_OUT_DROP_ICMP_QUOTE;
		ports = (void *)inner + inner->ihl * 4;
		if (!xlb_in_ip_packet(cur, ports, 4))
			return 0;
		/* the quoted packet went VIP -> client; the flow is client -> VIP */
		if (inner->saddr != key->dst[0] || !xlb_ipv4_csum_valid(cur, inner))
			return 0;
		inner_proto = inner->protocol;
		key->src[0] = inner->daddr;
	} else if (proto == IPPROTO_ICMPV6 && key->family == XLB_FAMILY_V6) {
		struct icmp6hdr *icmp6 = cur->pos;
		struct ipv6hdr *inner;

		if (!xlb_in_ip_packet(cur, icmp6, sizeof(*icmp6)))
			return 0;
		if (icmp6->icmp6_type != ICMPV6_PKT_TOOBIG)
			return 0;
		inner = (void *)(icmp6 + 1);
		ports = (void *)(inner + 1);
		if (!xlb_in_ip_packet(cur, ports, 4))
			return 0;
		/* Its addresses would be read from whatever it quotes: a
		 * quote that is no IPv6 packet must not pick a backend. */
		if (inner->version != 6)
			return -XLB_OUT_DROP_ICMP_QUOTE;
		if (inner->saddr.in6_u.u6_addr32[0] != key->dst[0] ||
		    inner->saddr.in6_u.u6_addr32[1] != key->dst[1] ||
		    inner->saddr.in6_u.u6_addr32[2] != key->dst[2] ||
		    inner->saddr.in6_u.u6_addr32[3] != key->dst[3])
			return 0;
		inner_proto = inner->nexthdr;
		__builtin_memcpy(key->src, &inner->daddr, 16);
	} else {
		return 0;
	}
	if (inner_proto != IPPROTO_TCP && inner_proto != IPPROTO_UDP)
		return 0;
	key->proto = inner_proto;
	key->sport = ports[1];
	key->dport = ports[0];
	return xlb_match_vip(bucket, key->dst, key->dport, key->proto, key->family, vip);
}

static __always_inline void xlb_count_vip_drop(__u32 vip_id, __u32 outcome)
{
	struct xlb_vip_drops *drops;
	__u32 reason = xlb_vip_drop_slot(outcome);

	if (vip_id == XLB_CAPTURE_NO_VIP || reason >= XLB_VIP_DROP_REASONS)
		return;
	drops = bpf_map_lookup_elem(&xlb_vip_drops2, &vip_id);
	if (drops)
		drops->by_reason[reason] += 1;
}

/* A QUIC packet's backend by its connection ID (lib/quic.h): 1 with *be_out
 * set when the CID names a live backend, else 0 (the packet goes by its
 * 5-tuple). Counts either way. */
static __always_inline int xlb_quic_pick(struct xdp_md *ctx, __u32 l4_off, __u32 ip_len,
					 __u32 vip_id, __u32 *backend_id,
					 struct xlb_backend **be_out)
{
	__u32 payload_off = l4_off + sizeof(struct udphdr);
	__u32 payload_end = sizeof(struct ethhdr) + ip_len;
	struct xlb_vip_quic_stats *qs = bpf_map_lookup_elem(&xlb_vip_quic, &vip_id);
	int r = xlb_quic_route(ctx, payload_off, payload_end, vip_id, backend_id);
	__u32 reason;

	if (r == XLB_QUIC_ROUTED) {
		struct xlb_backend *be = bpf_map_lookup_elem(&xlb_backends, backend_id);

		/* Released ids keep their generation, family 0 (abi.h). */
		if (be && be->generation != 0 && be->family != 0 &&
		    !(be->flags & XLB_BACKEND_F_DOWN)) {
			if (qs)
				qs->routed += 1;
			*be_out = be;
			return 1;
		}
		r = XLB_QUIC_FB_DEAD_BACKEND;
	}
	/* Masked: the verifier knows nothing of a global function's result. */
	reason = (__u32)r & 7;
	if (qs && reason < XLB_QUIC_FALLBACKS)
		qs->fallbacks[reason] += 1;
	return 0;
}

/* Every verdict leaves through one exit, where a capture sees it. */
#define XLB_VERDICT(out, act)    \
	do {                     \
		outcome = (out); \
		action = (act);  \
		goto verdict;    \
	} while (0)

SEC("xdp")
int xlb_lb(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data;
	void *data_end = (void *)(long)ctx->data_end;
	struct xlb_cursor cur = { .pos = data, .end = data_end, .ip_end = data_end };
	struct xlb_packet pkt = {};
	struct xlb_vip_value *vip, vip_match;
	struct xlb_vip_stats *vstats;
	struct xlb_backend_stats *bstats;
	struct xlb_backend *be = NULL, *hint = NULL;
	struct xlb_ct_found ct;
	struct xlb_config *cfg;
	struct ethhdr *eth = data;
	__u32 zero = 0, backend_id = 0, vip_id = XLB_CAPTURE_NO_VIP, hash, bucket, *epoch;
	__u64 frame_len = data_end - data;
	int proto, err, icmp_error = 0, hit = 0, from_entry = 0, matched, action;
	int cookie_ack = 0, quic_routed = 0;
	struct xlb_flow_cache_entry *fc = NULL;
	struct xlb_gue_cookie cookie_data;
	__u32 l4_off = 0;
	enum xlb_outcome outcome;

	/* Not "= {}": zeroing the copy costs every packet stores. */
	ct.present = 0;
	ct.found = 0;
	cfg = bpf_map_lookup_elem(&xlb_config, &zero);
	if (!cfg || cfg->magic != XLB_CONFIG_MAGIC || cfg->version != XLB_CONFIG_VERSION)
		XLB_VERDICT(XLB_OUT_PASS_NO_CONFIG, XDP_PASS);

	if ((void *)(eth + 1) > data_end)
		XLB_VERDICT(XLB_OUT_DROP_MALFORMED_ETH, XDP_DROP);
	cur.pos = eth + 1;
	if (eth->h_proto == bpf_htons(ETH_P_IP))
		proto = xlb_parse_ipv4(&cur, &pkt);
	else if (eth->h_proto == bpf_htons(ETH_P_IPV6))
		proto = xlb_parse_ipv6(&cur, &pkt);
	else
		XLB_VERDICT(XLB_OUT_PASS_NOT_IP, XDP_PASS);
	if (proto < 0)
		goto out_err_proto;
	if (proto == IPPROTO_ICMP || proto == IPPROTO_ICMPV6) {
		/* As for TCP and UDP: a header cut short is malformed whoever the
		 * packet is for (both ICMP headers are 8 bytes). */
		if (!xlb_in_ip_packet(&cur, cur.pos, sizeof(struct icmphdr))) {
			proto = -XLB_OUT_DROP_MALFORMED_L4;
			goto out_err_proto;
		}
		icmp_error = 1;
	} else {
		err = xlb_parse_l4(&cur, &pkt, proto);
		if (err < 0) {
			proto = err;
			goto out_err_proto;
		}
		/* Taken while the position is surely a packet pointer: later
		 * clang may keep it as an integer, which the verifier cannot
		 * subtract ctx->data from. */
		l4_off = (__u32)((long)cur.pos - (long)data);
	}

	/* No VIP address in the destination's bucket: not ours, after one
	 * array read. (An ICMP error we forward is addressed to the VIP too.) */
	bucket = xlb_vip_bucket(pkt.key.dst);
	epoch = bpf_map_lookup_elem(&xlb_vip_buckets, &bucket);
	if (!epoch || *epoch == 0)
		XLB_VERDICT(XLB_OUT_PASS_NOT_VIP, XDP_PASS);
	/* Checked only here, for packets that may be a VIP's: the kernel checks
	 * the ones it gets, and forwarding a damaged header would hand the
	 * backend's kernel a packet it drops after we spent a table slot on it. */
	if (pkt.key.family == XLB_FAMILY_V4 && !xlb_ipv4_csum_valid(&cur, (void *)(eth + 1)))
		XLB_VERDICT(XLB_OUT_DROP_IPV4_CSUM, XDP_DROP);

	/* An established TCP flow: this CPU's copy of its entry, while the VIP
	 * bucket's epoch is the one it recorded, says everything needed (VIP,
	 * backend, hash) without matching the VIP or reading the table. */
	if (!icmp_error && pkt.key.proto == IPPROTO_TCP) {
#ifndef XLB_NO_FLOW_CACHE /* the benchmark's copy without the cache (bpf/CMakeLists.txt) */
		__u32 slot = xlb_flow_cache_slot(&pkt.key);

		fc = bpf_map_lookup_elem(&xlb_flow_cache, &slot);
#endif
		if (pkt.tcp_syn) {
			/* A new connection: an earlier one's copy must not
			 * outlive this SYN's choice. */
			if (fc && xlb_same_flow(&fc->key, &pkt.key))
				fc->vip_epoch = 0;
			fc = NULL;
		} else if (fc && !pkt.tcp_ended &&
			   (be = xlb_flow_cache_backend(fc, &pkt.key, *epoch))) {
			/* (A FIN or RST goes to the table: its entry notes it.) */
			backend_id = fc->backend_id;
			vip_id = fc->vip_id;
			hash = fc->hash;
			hit = 1;
			err = 0;
		}
	}

	if (hit) {
		vstats = bpf_map_lookup_elem(&xlb_vip_stats, &vip_id);
		if (vstats) {
			vstats->packets += 1;
			vstats->bytes += frame_len;
			vstats->conntrack_hits += 1;
		}
	} else {
		__u32 seen_epoch = *epoch;
		/* Read before the lookup: an entry deleted after it was found
		 * is never cached as checked after the delete. */
		__u32 now = xlb_ct_clock;

		if (icmp_error)
			matched = xlb_match_icmp_error(&cur, &pkt, proto, bucket, &vip_match);
		else
			matched = xlb_match_vip(bucket, pkt.key.dst, pkt.key.dport, pkt.key.proto,
						pkt.key.family, &vip_match);
		if (matched < 0)
			XLB_VERDICT(-matched, XDP_DROP);
		if (!matched)
			XLB_VERDICT(XLB_OUT_PASS_NOT_VIP, XDP_PASS);
		vip = &vip_match;

		vip_id = vip->vip_id;
		vstats = bpf_map_lookup_elem(&xlb_vip_stats, &vip_id);
		if (vstats) {
			vstats->packets += 1;
			vstats->bytes += frame_len;
		}
		if ((vip->flags & XLB_VIP_F_SOURCE_RANGES) && xlb_source_denied(vip_id, &pkt.key)) {
			if (vstats)
				vstats->drops += 1;
			xlb_count_vip_drop(vip_id, XLB_OUT_DROP_SOURCE_DENIED);
			XLB_VERDICT(XLB_OUT_DROP_SOURCE_DENIED, XDP_DROP);
		}

		/* SYN cookies (lib/cookie.h): a SYN answered here goes to no
		 * backend and makes no entry. */
		if ((vip->flags & (XLB_VIP_F_COOKIES_AUTO | XLB_VIP_F_COOKIES_ALWAYS)) &&
		    !icmp_error && pkt.key.proto == IPPROTO_TCP && xlb_gue(cfg)) {
			if (pkt.tcp_syn) {
				err = xlb_cookie_syn(ctx, &pkt, l4_off, vip);
				if (err == XLB_OUT_TX_SYN_COOKIE)
					XLB_VERDICT(XLB_OUT_TX_SYN_COOKIE, XDP_TX);
				if (err > 0)
					XLB_VERDICT(err, XDP_DROP);
			}
		}

		hash = xlb_vip_flow_hash(&pkt.key, vip->flags, cfg->hash_seed);
		/* A CID names the server whatever the addresses: no table entry
		 * is read or written for it. */
		if ((vip->flags & XLB_VIP_F_QUIC) && !icmp_error && pkt.key.proto == IPPROTO_UDP) {
			quic_routed =
				xlb_quic_pick(ctx, l4_off, pkt.ip_len, vip_id, &backend_id, &be);
		}
		if (quic_routed) {
			err = 0;
		} else {
			int use_ct = !(vip->flags & XLB_VIP_F_NO_CONNTRACK);
			__u32 pick = 0;

			if (!pkt.tcp_syn)
				pick |= XLB_PICK_USE_ENTRY;
			if (use_ct && !icmp_error && !pkt.tcp_syn)
				pick |= XLB_PICK_RECORD;
			if (use_ct && pkt.tcp_syn)
				pick |= XLB_PICK_REPOINT;
			if (use_ct && (cfg->flags & XLB_CFG_F_SECOND_CHANCE) &&
			    pkt.key.proto == IPPROTO_TCP && !pkt.tcp_syn && !icmp_error)
				pick |= XLB_PICK_SECOND_CHANCE;

			/* A SYN never creates an entry: the ring's answer for it
			 * is the one the handshake's ACK gets, which records the
			 * flow (docs/conntrack.md). An ICMP error must not
			 * create one either. */
			if (use_ct)
				xlb_ct_lookup(&pkt.key, vip_id, &ct);
			/* An ACK that finds no entry may be a handshake whose SYN
			 * this host answered (while cookies could be out). */
			if ((vip->flags & (XLB_VIP_F_COOKIES_AUTO | XLB_VIP_F_COOKIES_ALWAYS)) &&
			    ct.present && !ct.found && !pkt.tcp_syn && !icmp_error &&
			    pkt.key.proto == IPPROTO_TCP && xlb_gue(cfg)) {
				cookie_ack = xlb_cookie_ack(ctx, &pkt, l4_off, vip, &cookie_data);
				if (cookie_ack < 0) {
					if (vstats)
						vstats->drops += 1;
					xlb_count_vip_drop(vip_id, XLB_OUT_DROP_COOKIE_INVALID);
					XLB_VERDICT(XLB_OUT_DROP_COOKIE_INVALID, XDP_DROP);
				}
				if (cookie_ack)
					pick &= ~XLB_PICK_SECOND_CHANCE;
			}
			err = xlb_pick_backend(vip, &pkt.key, cfg, &ct, pick, hash,
					       icmp_error ? NULL : vstats, &backend_id, &be, &hint,
					       &from_entry);
			if (err == 0 && from_entry && pkt.tcp_ended && !icmp_error)
				xlb_ct_note_ended(&ct, pkt.tcp_ended);
		}
		/* This CPU keeps a copy of an entry it used, but not one taken
		 * in the tick of the agent's last delete (it would not be
		 * used), nor one with a hint (the cache's hits carry none), and
		 * not over a copy taken less than XLB_FLOW_CACHE_HOLD_UNITS
		 * ago: among many flows a slot would be rewritten for every
		 * packet and never used (abi.h, XLB_MAP_FLOW_CACHE). */
		if (err == 0 && from_entry && fc && !hint && (__s32)(now - xlb_ct_erased) > 0 &&
		    (fc->vip_epoch == 0 || now - fc->checked >= XLB_FLOW_CACHE_HOLD_UNITS))
			xlb_flow_cache_fill(fc, &pkt.key, backend_id, be->generation, vip_id,
					    seen_epoch, hash, now);
	}
	if (err == 0)
		err = xlb_encap(ctx, &pkt, be, cfg, hash, frame_len, hint, &cookie_data,
				cookie_ack);
	if (err == -XLB_OUT_DROP_TOO_BIG && (cfg->flags & XLB_CFG_F_ICMP_TOO_BIG) && !icmp_error) {
		/* the largest packet that still fits once encapsulated */
		__u32 room = cfg->mtu - xlb_encap_overhead(be, cfg, hint);

		if (pkt.key.family == XLB_FAMILY_V4)
			err = xlb_icmp_too_big_v4(ctx, room);
		else
			err = xlb_icmp_too_big_v6(ctx, room);
		if (vstats)
			vstats->drops += 1;
		xlb_count_vip_drop(vip_id, XLB_OUT_DROP_TOO_BIG);
		if (err == 0)
			XLB_VERDICT(XLB_OUT_TX_ICMP_TOO_BIG, XDP_TX);
		XLB_VERDICT(-err, XDP_DROP);
	}
	if (err < 0) {
		if (vstats)
			vstats->drops += 1;
		xlb_count_vip_drop(vip_id, -err);
		XLB_VERDICT(-err, XDP_DROP);
	}

	bstats = bpf_map_lookup_elem(&xlb_backend_stats2, &backend_id);
	if (bstats) {
		bstats->packets += 1;
		bstats->bytes += frame_len;
		/* A connection started (abi.h, struct xlb_backend_stats). */
		if (!hit && !from_entry && !icmp_error &&
		    (pkt.tcp_syn || cookie_ack || (pkt.key.proto != IPPROTO_TCP && ct.present)))
			bstats->new_flows += 1;
	}
	if (hint) {
		__u64 *hinted = bpf_map_lookup_elem(&xlb_vip_hints, &vip_id);

		if (hinted)
			*hinted += 1;
	}
	if (icmp_error)
		XLB_VERDICT(XLB_OUT_TX_ICMP_ERROR, XDP_TX);
	XLB_VERDICT(quic_routed ? XLB_OUT_TX_QUIC_CID : XLB_OUT_TX, XDP_TX);

out_err_proto:
	/* Parsing outcomes: PASS_* go to the kernel, the rest are drops. */
	if (-proto == XLB_OUT_PASS_FRAGMENT || -proto == XLB_OUT_PASS_IPV6_EXT_LIMIT ||
	    -proto == XLB_OUT_PASS_NOT_VIP)
		XLB_VERDICT(-proto, XDP_PASS);
	XLB_VERDICT(-proto, XDP_DROP);

verdict:
#ifndef XLB_NO_CAPTURE /* the benchmark's baseline (bpf/CMakeLists.txt) */
	/* The flag is read here only, where the verdict is known: an idle
	 * capture costs this one read. */
	if (xlb_capture_on) {
		struct xlb_capture_meta capture_meta = {};

		capture_meta.outcome = outcome;
		capture_meta.family = pkt.key.family;
		__builtin_memcpy(capture_meta.src, pkt.key.src, sizeof(capture_meta.src));
		capture_meta.has_vip = vip_id != XLB_CAPTURE_NO_VIP;
		capture_meta.vip_id = vip_id;
		capture_meta.backend_family = 0;
		capture_meta.inner_off = 0;
		if (action == XDP_TX && be && outcome != XLB_OUT_TX_ICMP_TOO_BIG) {
			capture_meta.backend_family = be->family;
			__builtin_memcpy(capture_meta.backend, be->addr,
					 sizeof(capture_meta.backend));
			capture_meta.inner_off =
				(__u32)((long)ctx->data_end - (long)ctx->data) - pkt.ip_len;
		}
		xlb_capture_packet(ctx, &capture_meta);
	}
#endif
	return xlb_outcome(outcome, action);
}
