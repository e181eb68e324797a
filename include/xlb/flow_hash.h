/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The flow hash: one implementation, compiled into the XDP program and into
 * userspace (xlbctl lookup, tests, simulations), so every LB host and every
 * tool maps a flow to the same ring slot.
 *
 * It is a seeded Murmur3-style 32-bit mix over the 32-bit words of a
 * struct xlb_flow_key, read in host (little-endian) order. The seed is the
 * operator's secret (struct xlb_config.hash_seed): without it a client cannot
 * aim many flows at one backend. Changing any constant here reshuffles every
 * flow on every host; treat them as part of the wire contract.
 */
#ifndef XLB_FLOW_HASH_H
#define XLB_FLOW_HASH_H

#include <linux/types.h>
#include "abi.h"

#ifdef __cplusplus
#define XLB_HASH_INLINE static inline
#elif defined(__bpf__)
#define XLB_HASH_INLINE static __always_inline
#else
#define XLB_HASH_INLINE static inline
#endif

XLB_HASH_INLINE __u32 xlb_rotl32(__u32 x, int r)
{
	return (x << r) | (x >> (32 - r));
}

XLB_HASH_INLINE __u32 xlb_hash_round(__u32 h, __u32 word)
{
	word *= 0xcc9e2d51U;
	word = xlb_rotl32(word, 15);
	word *= 0x1b873593U;
	h ^= word;
	h = xlb_rotl32(h, 13);
	return h * 5U + 0xe6546b64U;
}

XLB_HASH_INLINE __u32 xlb_hash_finish(__u32 h, __u32 nbytes)
{
	h ^= nbytes;
	h ^= h >> 16;
	h *= 0x85ebca6bU;
	h ^= h >> 13;
	h *= 0xc2b2ae35U;
	h ^= h >> 16;
	return h;
}

/* Hash of the whole 5-tuple (the default per-VIP hash mode). */
XLB_HASH_INLINE __u32 xlb_flow_hash(const struct xlb_flow_key *key, __u32 seed)
{
	const __u32 *w = (const __u32 *)key;
	__u32 h = seed;

	h = xlb_hash_round(h, w[0]);
	h = xlb_hash_round(h, w[1]);
	h = xlb_hash_round(h, w[2]);
	h = xlb_hash_round(h, w[3]);
	h = xlb_hash_round(h, w[4]);
	h = xlb_hash_round(h, w[5]);
	h = xlb_hash_round(h, w[6]);
	h = xlb_hash_round(h, w[7]);
	h = xlb_hash_round(h, w[8]); /* sport, dport */
	h = xlb_hash_round(h, w[9]); /* proto, family, pad (zero) */
	return xlb_hash_finish(h, sizeof(*key));
}

/* Hash of the source address only (XLB_VIP_F_HASH_SRC_ONLY): every flow of a
 * client lands on the same backend. */
XLB_HASH_INLINE __u32 xlb_flow_hash_src(const struct xlb_flow_key *key, __u32 seed)
{
	__u32 h = seed;

	h = xlb_hash_round(h, key->src[0]);
	h = xlb_hash_round(h, key->src[1]);
	h = xlb_hash_round(h, key->src[2]);
	h = xlb_hash_round(h, key->src[3]);
	h = xlb_hash_round(h, key->family);
	return xlb_hash_finish(h, 20);
}

XLB_HASH_INLINE __u32 xlb_vip_flow_hash(const struct xlb_flow_key *key, __u32 vip_flags, __u32 seed)
{
	if (vip_flags & XLB_VIP_F_HASH_SRC_ONLY)
		return xlb_flow_hash_src(key, seed);
	return xlb_flow_hash(key, seed);
}

/* The VIP bucket (abi.h, XLB_MAP_VIP_BUCKETS) of a destination address:
 * cheap rather than secret, the bucket only says where to look. An IPv4
 * address lives in word 0, the others zero. */
XLB_HASH_INLINE __u32 xlb_vip_bucket(const __be32 *addr)
{
	__u32 x = addr[0] ^ addr[1] ^ addr[2] ^ addr[3];

	return (x * 0x9e3779b1U) >> 18;
}
XLB_STATIC_ASSERT(XLB_VIP_BUCKETS == 1U << (32 - 18), "xlb_vip_bucket covers the buckets");

/* The established-flow cache's slot of a flow (abi.h, XLB_FLOW_CACHE_BITS):
 * cheap rather than secret: colliding flows only miss the cache. */
XLB_HASH_INLINE __u32 xlb_flow_cache_slot(const struct xlb_flow_key *key)
{
	__u32 x = key->src[0] ^ key->src[1] ^ key->src[2] ^ key->src[3];

	x ^= ((__u32)key->sport << 16) | key->dport;
	return (x * 0x9e3779b1U) >> (32 - XLB_FLOW_CACHE_BITS);
}

/* The ring slot (1..ring_size) a flow hash selects; ring_size must be > 0. */
XLB_HASH_INLINE __u32 xlb_ring_slot(__u32 hash, __u32 ring_size)
{
	return XLB_RING_FIRST_SLOT + hash % ring_size;
}

#endif /* XLB_FLOW_HASH_H */
