/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Where a flow goes in the connection table (abi.h, layout 5: struct
 * xlb_ct_bucket) and how a slot names it. Compiled into the XDP program and
 * into userspace (bpf::ConntrackTable, the placement simulation of
 * tests/unit/ct_place_test.cpp), so both place and recognise a flow alike.
 */
#ifndef XLB_CT_SET_H
#define XLB_CT_SET_H

#include <linux/types.h>
#include "abi.h"
#include "flow_hash.h"

#define XLB_CT_KIND_MASK (3ULL << XLB_CT_KIND_SHIFT)
#define XLB_CT_SEEN_MASK (0xffffULL << XLB_CT_SEEN_SHIFT_BITS)
/* The flags of a bucket, in its slot 0's meta: every writer keeps them. */
#define XLB_CT_BUCKET_FLAGS (XLB_CT_OVERFLOW | XLB_CT_LINE1)

XLB_HASH_INLINE __u32 xlb_ct_kind(__u64 meta)
{
	return (__u32)(meta >> XLB_CT_KIND_SHIFT) & 3;
}
XLB_HASH_INLINE __u32 xlb_ct_meta_vip(__u64 meta)
{
	return (__u32)meta & XLB_CT_MAX_VIP_ID;
}
XLB_HASH_INLINE __u32 xlb_ct_meta_backend(__u64 meta)
{
	return (__u32)(meta >> 16) & XLB_CT_MAX_BACKEND_ID;
}
XLB_HASH_INLINE __u32 xlb_ct_meta_generation(__u64 meta)
{
	return (__u32)(meta >> 34) & XLB_CT_GENERATION_MASK;
}
XLB_HASH_INLINE __u32 xlb_ct_meta_seen(__u64 meta)
{
	return (__u32)(meta >> XLB_CT_SEEN_SHIFT_BITS);
}
/* A head's 16-bit last_seen for an entry time. */
XLB_HASH_INLINE __u32 xlb_ct_seen16(__u32 units)
{
	return (units >> XLB_CT_SEEN_SHIFT) & 0xffff;
}

/* The meta of a head slot (abi.h, struct xlb_ct_slot), version and bucket
 * flags clear. The caller makes sure that vip_id and backend_id fit
 * (XLB_CT_MAX_*). */
XLB_HASH_INLINE __u64 xlb_ct_head_meta(__u32 vip_id, __u32 backend_id, __u32 generation, __u32 kind,
				       int hint, __u32 seen16)
{
	return (__u64)(vip_id & XLB_CT_MAX_VIP_ID) |
	       ((__u64)(backend_id & XLB_CT_MAX_BACKEND_ID) << 16) |
	       ((__u64)(generation & XLB_CT_GENERATION_MASK) << 34) |
	       ((__u64)kind << XLB_CT_KIND_SHIFT) | (hint ? XLB_CT_HINT : 0) |
	       ((__u64)(seen16 & 0xffff) << XLB_CT_SEEN_SHIFT_BITS);
}

/* Whether a head has a tail: an IPv6 entry, or one with a hint. */
XLB_HASH_INLINE int xlb_ct_has_tail(__u64 meta)
{
	return xlb_ct_kind(meta) == XLB_CT_KIND_V6 ||
	       (xlb_ct_kind(meta) == XLB_CT_KIND_V4 && (meta & XLB_CT_HINT));
}

/* A tail's hint: 0, or 1 + the hinted backend's id. */
XLB_HASH_INLINE __u32 xlb_ct_tail_hint(__u64 tail_meta)
{
	return (__u32)(tail_meta >> XLB_CT_TAIL_HINT_SHIFT);
}

/*
 * What the slot(s) of a flow hold, but for the head meta's value fields: the
 * flow exactly, given its VIP (abi.h). head_match is compared with the head
 * meta under XLB_CT_IDENT_MASK (VIP, kind, and the claimed bit clear); an
 * IPv6 entry's tail must hold tail_key and tail_ports under
 * XLB_CT_TAIL_IDENT_MASK.
 */
struct xlb_ct_ident {
	__u64 head_key;
	__u64 head_match;
	__u64 tail_key; /* IPv6 */
	__u64 tail_ports; /* IPv6: the tail meta's ports and kind */
	__u32 v6;
	__u32 pad;
};
#define XLB_CT_IDENT_MASK (XLB_CT_MAX_VIP_ID | XLB_CT_KIND_MASK | XLB_CT_CLAIMED)
#define XLB_CT_TAIL_IDENT_MASK (0xffffffffULL | XLB_CT_KIND_MASK | XLB_CT_CLAIMED)

XLB_HASH_INLINE void xlb_ct_ident_of(const struct xlb_flow_key *key, __u32 vip_id,
				     struct xlb_ct_ident *id)
{
	const __u64 ports = (__u64)key->sport | ((__u64)key->dport << 16);

	if (key->family == XLB_FAMILY_V6) {
		id->head_key = (__u64)key->src[0] | ((__u64)key->src[1] << 32);
		id->head_match =
			(vip_id & XLB_CT_MAX_VIP_ID) | ((__u64)XLB_CT_KIND_V6 << XLB_CT_KIND_SHIFT);
		id->tail_key = (__u64)key->src[2] | ((__u64)key->src[3] << 32);
		id->tail_ports = ports | ((__u64)XLB_CT_KIND_TAIL << XLB_CT_KIND_SHIFT);
		id->v6 = 1;
	} else {
		id->head_key = (__u64)key->src[0] | (ports << 32);
		id->head_match =
			(vip_id & XLB_CT_MAX_VIP_ID) | ((__u64)XLB_CT_KIND_V4 << XLB_CT_KIND_SHIFT);
		id->tail_key = 0;
		id->tail_ports = (__u64)XLB_CT_KIND_TAIL << XLB_CT_KIND_SHIFT;
		id->v6 = 0;
	}
	id->pad = 0;
}

/* The flow an entry's slots name, given its VIP's key (abi.h, struct
 * xlb_vip_key; a port-0 VIP takes the destination port from the slot). */
XLB_HASH_INLINE void xlb_ct_key_of(__u64 head_key, __u64 tail_key, __u64 tail_meta,
				   const struct xlb_vip_key *vip, struct xlb_flow_key *key)
{
	__u64 ports;

	__builtin_memset(key, 0, sizeof(*key));
	key->family = vip->family;
	key->proto = vip->proto;
	for (int i = 0; i < 4; i++)
		key->dst[i] = vip->addr[i];
	if (vip->family == XLB_FAMILY_V6) {
		key->src[0] = (__be32)head_key;
		key->src[1] = (__be32)(head_key >> 32);
		key->src[2] = (__be32)tail_key;
		key->src[3] = (__be32)(tail_key >> 32);
		ports = tail_meta;
	} else {
		key->src[0] = (__be32)head_key;
		ports = head_key >> 32;
	}
	key->sport = (__be16)ports;
	key->dport = (__be16)(ports >> 16);
}

/* The program's word in a record's `ended` (abi.h, struct xlb_ct_record):
 * `flags` (XLB_CT_ENDED_*) under a 24-bit tag of the head slot's key and its
 * meta under XLB_CT_TAG_MASK; and the flags such a word holds for the entry
 * now in the slot (0 when it was written for another). */
XLB_HASH_INLINE __u32 xlb_ct_ended_tag(__u64 head_key, __u64 meta)
{
	const __u64 tagged = meta & XLB_CT_TAG_MASK;
	__u32 h = xlb_hash_round(0, (__u32)head_key);

	h = xlb_hash_round(h, (__u32)(head_key >> 32));
	h = xlb_hash_round(h, (__u32)tagged);
	h = xlb_hash_round(h, (__u32)(tagged >> 32));
	return xlb_hash_finish(h, 16) & ~0xffU;
}
XLB_HASH_INLINE __u32 xlb_ct_ended_flags(__u32 word, __u64 head_key, __u64 meta)
{
	return (word & ~0xffU) == xlb_ct_ended_tag(head_key, meta) ? (word & 0xffU) : 0;
}

/* The two buckets (0..buckets-1) a flow may live in, from the table's own
 * secret seed: the first from the flow's hash (xlb_ct_hash), the second from
 * a further mix of it, computed only when needed. The multiply and shift
 * map a hash onto any number of buckets without a division. */
XLB_HASH_INLINE __u32 xlb_ct_hash(const struct xlb_flow_key *key, __u32 seed)
{
	return xlb_flow_hash(key, seed);
}
XLB_HASH_INLINE __u32 xlb_ct_first_bucket(__u32 hash, __u32 buckets)
{
	return (__u32)(((__u64)hash * buckets) >> 32);
}
XLB_HASH_INLINE __u32 xlb_ct_second_bucket(__u32 hash, __u32 seed, __u32 buckets)
{
	return (__u32)(((__u64)xlb_hash_finish(xlb_hash_round(~seed, hash), 4) * buckets) >> 32);
}
XLB_HASH_INLINE void xlb_ct_buckets(const struct xlb_flow_key *key, __u32 seed, __u32 buckets,
				    __u32 *first, __u32 *second)
{
	__u32 h = xlb_ct_hash(key, seed);

	*first = xlb_ct_first_bucket(h, buckets);
	*second = xlb_ct_second_bucket(h, seed, buckets);
}

/* Where an insert goes (xlb_ct_place): bucket 0 (the first) or 1, the slot,
 * and whether the write takes the aligned pair of slots around it (an IPv6
 * entry, or an IPv4 entry over an IPv6 one, whose other slot it empties). */
struct xlb_ct_spot {
	__u32 bucket;
	__u32 slot;
	__u32 pair;
};

/*
 * Where a flow not in the table goes (abi.h, "Placement"), from the metas of
 * its two buckets, in steps so that the program reads the second bucket only
 * when it must and runs each eviction scan, one slot a call, under bpf_loop
 * (verified once, not per path). xlb_ct_place takes them in order:
 *  1. xlb_ct_place_first: the first bucket, while it has room and holds
 *     fewer than XLB_CT_FIRST_FILL slots;
 *  2. the first bucket full: a scan of it (xlb_ct_place_evict_step over
 *     0..XLB_CT_SLOTS-1), and xlb_ct_place_stale: over its entry seen
 *     longest ago when that entry has been idle about a second or more;
 *  3. xlb_ct_place_room: the less loaded bucket with room (ties: the first);
 *  4. a scan of both (indices 0..2*XLB_CT_SLOTS-1) and
 *     xlb_ct_place_evicted: over the entry (pair: the aligned pair) seen
 *     longest ago of either.
 * Claimed slots are never chosen.
 */
struct xlb_ct_place_state {
	__u64 meta[2 * XLB_CT_SLOTS]; /* the first bucket's, then the second's */
	__u32 pair; /* placing an entry of two slots (IPv6, or with a hint) */
	__u32 now16; /* xlb_ct_seen16 of the clock */
	/* xlb_ct_place_evict_step: the best candidate so far, 0 = none;
	 * (idle + 1) << 8 | index << 1 | takes_pair */
	__u32 best;
	__u32 pad;
};

/* Which slots of bucket b are free, a bit each (slot s: bit s). Branch-free
 * arithmetic: the program's verifier would otherwise follow every
 * combination of slots. */
XLB_HASH_INLINE __u32 xlb_ct_free_mask(const struct xlb_ct_place_state *st, __u32 b)
{
	__u32 mask = 0;

	for (__u32 s = 0; s < XLB_CT_SLOTS; s++) {
		/* kind and claimed bit: 0 when free, 1..7 otherwise */
		__u32 state = (__u32)(st->meta[b * XLB_CT_SLOTS + s] >> XLB_CT_KIND_SHIFT) & 7;

		mask |= (1 - ((state + 7) >> 3)) << s;
	}
	return mask;
}

/* Bits set in an 8-bit mask. */
XLB_HASH_INLINE __u32 xlb_ct_bits8(__u32 x)
{
	x = x - ((x >> 1) & 0x55);
	x = (x & 0x33) + ((x >> 2) & 0x33);
	return (x + (x >> 4)) & 0x0f;
}

/* The first free slot (pair: aligned pair of slots) of a free mask, or -1. */
XLB_HASH_INLINE int xlb_ct_room(__u32 free_mask, __u32 pair)
{
	__u32 m = pair ? (free_mask & (free_mask >> 1) & 0x55) : free_mask;

	if (m == 0)
		return -1;
	/* the index of the lowest set bit: the bits below it */
	return (int)xlb_ct_bits8((m & (0U - m)) - 1);
}

/* A flow takes its first bucket, without the second being read, while the
 * first holds fewer than this many slots (its first line's worth). More
 * would leave a new flow's second bucket unread more often (6 of 8: in 5 %
 * of the inserts up to half the capacity rather than 24 %, in a simple
 * balls-into-buckets model), but a mix with
 * a quarter of the flows IPv6 then loses 0.6-0.8 % of them at 75 % of the
 * capacity rather than 0.35 %: an entry of two slots needs an aligned free
 * pair, which a fuller first bucket seldom keeps. */
#define XLB_CT_FIRST_FILL 4

/* Returns 0 with *out set when the first bucket alone decides (the second
 * bucket's metas need not be read): it has room and holds fewer than
 * XLB_CT_FIRST_FILL slots; 1 otherwise. */
XLB_HASH_INLINE int xlb_ct_place_first(const struct xlb_ct_place_state *st, struct xlb_ct_spot *out)
{
	__u32 free1 = xlb_ct_free_mask(st, 0);
	int room1 = xlb_ct_room(free1, st->pair);

	if (room1 < 0 || XLB_CT_SLOTS - xlb_ct_bits8(free1) >= XLB_CT_FIRST_FILL)
		return 1;
	out->bucket = 0;
	out->slot = (__u32)room1;
	out->pair = st->pair;
	return 0;
}

/* Returns 0 with *out set when a bucket has room, 1 when an entry must be
 * evicted. */
XLB_HASH_INLINE int xlb_ct_place_room(struct xlb_ct_place_state *st, struct xlb_ct_spot *out)
{
	__u32 free1 = xlb_ct_free_mask(st, 0), free2 = xlb_ct_free_mask(st, 1);
	int room1 = xlb_ct_room(free1, st->pair), room2 = xlb_ct_room(free2, st->pair);
	__u32 used1 = XLB_CT_SLOTS - xlb_ct_bits8(free1),
	      used2 = XLB_CT_SLOTS - xlb_ct_bits8(free2);

	st->best = 0;
	out->pair = st->pair;
	if (room1 >= 0 && (used1 < XLB_CT_FIRST_FILL || room2 < 0 || used1 <= used2)) {
		out->bucket = 0;
		out->slot = (__u32)room1;
		return 0;
	}
	if (room2 >= 0) {
		out->bucket = 1;
		out->slot = (__u32)room2;
		return 0;
	}
	return 1;
}

/* One slot of the eviction scan: index = bucket * XLB_CT_SLOTS + slot. An
 * entry of one slot takes any head's place (a pair's head: the whole pair);
 * an entry of two a pair, judged by the entry seen most recently in it. */
XLB_HASH_INLINE void xlb_ct_place_evict_step(struct xlb_ct_place_state *st, __u32 index)
{
	__u32 s = index & (XLB_CT_SLOTS - 1), base = index & XLB_CT_SLOTS;
	__u64 meta = st->meta[base + s], next = st->meta[base + ((s + 1) & (XLB_CT_SLOTS - 1))];
	__u32 kind = xlb_ct_kind(meta), idle, takes_pair = st->pair, score;

	if (meta & XLB_CT_CLAIMED)
		return;
	if (st->pair) {
		if ((s & 1) || (next & XLB_CT_CLAIMED))
			return;
		idle = kind == XLB_CT_KIND_EMPTY ? 0xffff
						 : ((st->now16 - xlb_ct_meta_seen(meta)) & 0xffff);
		if (xlb_ct_kind(next) == XLB_CT_KIND_V4) {
			__u32 idle2 = (st->now16 - xlb_ct_meta_seen(next)) & 0xffff;

			if (idle2 < idle)
				idle = idle2;
		}
	} else {
		if (kind == XLB_CT_KIND_TAIL || kind == XLB_CT_KIND_EMPTY)
			return;
		if (xlb_ct_has_tail(meta)) {
			if (next & XLB_CT_CLAIMED)
				return;
			takes_pair = 1;
		}
		idle = (st->now16 - xlb_ct_meta_seen(meta)) & 0xffff;
	}
	score = ((idle + 1) << 8) | ((index & (2 * XLB_CT_SLOTS - 1)) << 1) | takes_pair;
	if (score > st->best)
		st->best = score;
}

/* After the scan: 0 with *out set, -1 when every candidate was claimed. */
XLB_HASH_INLINE int xlb_ct_place_evicted(const struct xlb_ct_place_state *st,
					 struct xlb_ct_spot *out)
{
	__u32 index = (st->best >> 1) & (2 * XLB_CT_SLOTS - 1);

	if (st->best == 0)
		return -1;
	out->bucket = index / XLB_CT_SLOTS;
	out->slot = index % XLB_CT_SLOTS;
	out->pair = st->best & 1;
	return 0;
}

/* An entry idle this long (XLB_CT_SEEN_SHIFT units, about a second) is no
 * busy flow's: a full first bucket gives such an entry up without the second
 * bucket being read (xlb_ct_place_stale). */
#define XLB_CT_STALE16 4

/* After an eviction scan of the first bucket alone (xlb_ct_place_evict_step
 * over indices 0..XLB_CT_SLOTS-1, st->best cleared first): 0 with *out set
 * when its best candidate has been idle at least XLB_CT_STALE16, else 1
 * (the second bucket decides too). */
XLB_HASH_INLINE int xlb_ct_place_stale(const struct xlb_ct_place_state *st, struct xlb_ct_spot *out)
{
	if ((st->best >> 8) < XLB_CT_STALE16 + 1)
		return 1;
	return xlb_ct_place_evicted(st, out);
}

XLB_HASH_INLINE int xlb_ct_place(struct xlb_ct_place_state *st, struct xlb_ct_spot *out)
{
	if (xlb_ct_place_first(st, out) == 0)
		return 0;
	if (xlb_ct_room(xlb_ct_free_mask(st, 0), st->pair) < 0) {
		st->best = 0;
		for (__u32 i = 0; i < XLB_CT_SLOTS; i++)
			xlb_ct_place_evict_step(st, i);
		if (xlb_ct_place_stale(st, out) == 0)
			return 0;
	}
	if (xlb_ct_place_room(st, out) == 0)
		return 0;
	for (__u32 i = 0; i < 2 * XLB_CT_SLOTS; i++)
		xlb_ct_place_evict_step(st, i);
	return xlb_ct_place_evicted(st, out);
}

#endif /* XLB_CT_SET_H */
