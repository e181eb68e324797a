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
#include "lib/csum.h"
#include "lib/encap.h"
#include "lib/shared_maps.h"
#include "lib/icmp.h"
#include "lib/parse.h"
#include "lib/stats.h"

char LICENSE[] SEC("license") = "Dual BSD/GPL";

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, XLB_MAX_VIPS_DEFAULT);
	__type(key, struct xlb_vip_key);
	__type(value, struct xlb_vip_value);
} xlb_vips SEC(".maps");

/* Inner map template: every VIP's ring is an array of backend ids, slot 0
 * holding the ring size. BPF_F_INNER_MAP lets rings of different sizes share
 * the outer map; BPF_F_MMAPABLE lets the agent fill a fresh ring in place. */
struct xlb_ring {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, XLB_RING_SIZE_DEFAULT + 1);
	__uint(map_flags, XLB_RING_MAP_FLAGS);
	__type(key, __u32);
	__type(value, __u32);
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY_OF_MAPS);
	__uint(max_entries, XLB_MAX_VIPS_DEFAULT);
	__type(key, __u32);
	__array(values, struct xlb_ring);
} xlb_rings SEC(".maps");

/* Second chance (abi.h, struct xlb_gue_hint): each VIP's previous ring, for
 * a while after its ring changed; the agent publishes it before the new one. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY_OF_MAPS);
	__uint(max_entries, XLB_MAX_VIPS_DEFAULT);
	__type(key, __u32);
	__array(values, struct xlb_ring);
} xlb_prev_rings SEC(".maps");

/* abi.h, struct xlb_ct_set: element 0 the header, then the sets. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, XLB_CT_ELEMENTS(XLB_CONNTRACK_DEFAULT));
	__uint(map_flags, BPF_F_MMAPABLE);
	__type(key, __u32);
	__type(value, struct xlb_ct_set);
} xlb_conntrack4 SEC(".maps");

/* abi.h, XLB_MAP_VIP_BUCKETS: 0 = no VIP address in the bucket, else its
 * epoch; the extra last slot is the agent's epoch counter. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, XLB_VIP_BUCKETS + 1);
	__type(key, __u32);
	__type(value, __u32);
} xlb_vip_buckets SEC(".maps");

/* abi.h, XLB_MAP_VIP_CANDIDATES: the VIPs of each bucket. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, XLB_VIP_BUCKETS);
	__uint(map_flags, BPF_F_MMAPABLE);
	__type(key, __u32);
	__type(value, struct xlb_vip_candidates);
} xlb_vip_cands SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct xlb_ct_cpu);
} xlb_ct_cpu SEC(".maps");

/* Entry times (abi.h): written by the agent every XLB_CT_CLOCK_TICK_MS. */
volatile __u32 xlb_ct_clock;
/* The clock when the agent last deleted connection-table entries: cached
 * copies checked before then are not used (abi.h, XLB_MAP_FLOW_CACHE). */
volatile __u32 xlb_ct_erased;

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, XLB_FLOW_CACHE_SLOTS);
	__type(key, __u32);
	__type(value, struct xlb_flow_cache_entry);
} xlb_flow_cache SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, XLB_MAX_VIPS_DEFAULT);
	__type(key, __u32);
	__type(value, struct xlb_vip_stats);
} xlb_vip_stats SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, XLB_MAX_BACKENDS_DEFAULT);
	__type(key, __u32);
	__type(value, struct xlb_backend_stats);
} xlb_backend_stats SEC(".maps");

/* Per VIP: packets sent with a second-chance hint. Apart from
 * xlb_vip_stats so that its layout (and pin) stays as it was. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, XLB_MAX_VIPS_DEFAULT);
	__type(key, __u32);
	__type(value, __u64);
} xlb_vip_hints SEC(".maps");

/* Per VIP: drops by reason (abi.h, struct xlb_vip_drops). */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, XLB_MAX_VIPS_DEFAULT);
	__type(key, __u32);
	__type(value, struct xlb_vip_drops);
} xlb_vip_drops SEC(".maps");

/* Capture (abi.h, struct xlb_capture_filter): the agent writes the filter,
 * then sets the flag; it clears the flag to stop. */
struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, XLB_CAPTURE_RING_BYTES);
} xlb_capture_ring SEC(".maps");
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
	} else if (outcome == XLB_OUT_TX_ICMP_TOO_BIG) {
		/* rewritten in place into the answer: only that is left */
		xlb_capture_emit(ctx, m, XLB_CAPTURE_SENT, now_len, 0, 0);
	} else {
		xlb_capture_emit(ctx, m, XLB_CAPTURE_RECEIVED, now_len, 0, 0);
	}
	return 0;
}

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

static __always_inline int xlb_backend_live(const struct xlb_backend *be, __u32 generation)
{
	return be && be->generation != 0 && be->generation == generation;
}

/*
 * The connection table's insert budget (struct xlb_ct_cpu): takes one entry's
 * worth of tokens from this CPU's bucket. Returns 0 when the bucket is empty;
 * the caller then balances the packet without recording it.
 */
static __always_inline int xlb_ct_admit(const struct xlb_config *cfg)
{
	const __u64 one = 1000000000ULL;
	struct xlb_ct_cpu *cpu;
	__u32 zero = 0;
	__u64 elapsed, cap, now_ns;

	cpu = bpf_map_lookup_elem(&xlb_ct_cpu, &zero);
	if (!cpu)
		return 1;
	if (cfg->ct_insert_rate != 0) {
		/* The bucket needs finer time than xlb_ct_clock's ticks; the
		 * insert path can afford the helper. */
		now_ns = bpf_ktime_get_coarse_ns();
		/* Capped so that elapsed * rate fits 64 bits; a full bucket
		 * needs no more than a second's worth anyway when burst <= rate. */
		elapsed = now_ns - cpu->refill_ns;
		if (elapsed > one)
			elapsed = one;
		cpu->refill_ns = now_ns;
		cpu->tokens += elapsed * cfg->ct_insert_rate;
		cap = (__u64)cfg->ct_insert_burst * one;
		if (cpu->tokens > cap)
			cpu->tokens = cap;
		if (cpu->tokens < one) {
			cpu->skipped += 1;
			cpu->last_skip_ns = now_ns;
			return 0;
		}
		cpu->tokens -= one;
	}
	cpu->inserts += 1;
	return 1;
}

static __always_inline int xlb_same_flow(const struct xlb_flow_key *a, const struct xlb_flow_key *b)
{
	const __u64 *x = (const __u64 *)a, *y = (const __u64 *)b;

	return x[0] == y[0] && x[1] == y[1] && x[2] == y[2] && x[3] == y[3] && x[4] == y[4];
}

/* A flow's place in the connection table (abi.h, struct xlb_ct_set). */
struct xlb_ct_ref {
	struct xlb_ct_set *set; /* the flow's set; NULL: no table yet */
	__u32 way; /* valid when found */
	int found;
	struct xlb_ct_value v; /* found: a consistent copy of the way's value */
};

/* Finds the flow in its set. A way being written, or rewritten while its
 * value was copied, does not count: that entry is on its way out. */
static __noinline void xlb_ct_find(struct xlb_ct_ref *ref, const struct xlb_flow_key *key)
{
	__u32 index = 0;
	__u64 seq;
	struct xlb_ct_header *hdr = bpf_map_lookup_elem(&xlb_conntrack4, &index);
	struct xlb_ct_set *set;

	ref->set = NULL;
	ref->found = 0;
	if (!hdr || hdr->magic != XLB_CT_MAGIC)
		return;
	index = xlb_ct_set_index(key, hdr->seed, hdr->sets);
	set = bpf_map_lookup_elem(&xlb_conntrack4, &index);
	if (!set)
		return;
	ref->set = set;
	for (__u32 w = 0; w < XLB_CT_WAYS; w++) {
		seq = *(volatile __u64 *)&set->seq[w];
		if (seq & 1)
			continue;
		asm volatile("" ::: "memory");
		if (!xlb_same_flow(&set->key[w], key))
			continue;
		__builtin_memcpy(&ref->v, &set->value[w], sizeof(ref->v));
		asm volatile("" ::: "memory");
		if (*(volatile __u64 *)&set->seq[w] != seq)
			return;
		ref->way = w;
		ref->found = 1;
		return;
	}
}

/* Writes key and value into the way (abi.h: claimed through its seq).
 * Returns 0 when another writer holds it. */
static __always_inline int xlb_ct_write(struct xlb_ct_set *set, __u32 way,
					const struct xlb_flow_key *key,
					const struct xlb_ct_value *val)
{
	__u64 seq;

	way &= XLB_CT_WAYS - 1;
	seq = *(volatile __u64 *)&set->seq[way];
	if ((seq & 1) || __sync_val_compare_and_swap(&set->seq[way], seq, seq + 1) != seq)
		return 0;
	__builtin_memcpy(&set->key[way], key, sizeof(*key));
	__builtin_memcpy(&set->value[way], val, sizeof(*val));
	asm volatile("" ::: "memory");
	*(volatile __u64 *)&set->seq[way] = seq + 2;
	return 1;
}

/* The backend a found entry names when it is still the one recorded (same
 * generation), the entry's age refreshed; NULL when it went away. */
static __always_inline struct xlb_backend *xlb_ct_backend(struct xlb_ct_ref *ref)
{
	__u32 id = ref->v.backend_id, now;
	struct xlb_backend *be = bpf_map_lookup_elem(&xlb_backends, &id);

	if (!xlb_backend_live(be, ref->v.generation))
		return NULL;
	now = xlb_ct_clock;
	if (now - ref->v.last_seen >= XLB_CT_LOOKUP_UNITS) {
		ref->v.last_seen = now;
		ref->set->value[ref->way & (XLB_CT_WAYS - 1)].last_seen = now;
	}
	return be;
}

/* The cached copy of the flow's entry in `fc` (its slot on this CPU), when
 * it may stand in for the table (abi.h, XLB_MAP_FLOW_CACHE); NULL otherwise. */
static __always_inline struct xlb_backend *
xlb_flow_cache_backend(const struct xlb_flow_cache_entry *fc, const struct xlb_flow_key *key,
		       __u32 epoch)
{
	__u32 now = xlb_ct_clock, id;
	struct xlb_backend *be;

	if (!xlb_same_flow(&fc->key, key) || fc->vip_epoch != epoch ||
	    now - fc->checked >= XLB_CT_LOOKUP_UNITS || (__s32)(fc->checked - xlb_ct_erased) <= 0)
		return NULL;
	id = fc->backend_id;
	be = bpf_map_lookup_elem(&xlb_backends, &id);
	return xlb_backend_live(be, fc->generation) ? be : NULL;
}

static __always_inline void xlb_flow_cache_fill(struct xlb_flow_cache_entry *fc,
						const struct xlb_flow_key *key,
						const struct xlb_ct_value *ct, __u32 checked)
{
	__builtin_memcpy(&fc->key, key, sizeof(*key));
	fc->backend_id = ct->backend_id;
	fc->generation = ct->generation;
	fc->vip_id = ct->vip_id;
	fc->vip_epoch = ct->vip_epoch;
	fc->hash = ct->hash;
	fc->checked = checked;
}

struct xlb_flow_cache_drop {
	struct xlb_flow_key key;
	__u32 slot;
};

static long xlb_flow_cache_drop_on_cpu(__u64 cpu, void *data)
{
	struct xlb_flow_cache_drop *drop = data;
	struct xlb_flow_cache_entry *fc;

	fc = bpf_map_lookup_percpu_elem(&xlb_flow_cache, &drop->slot, (__u32)cpu);
	if (!fc)
		return 1; /* past the last CPU */
	if (xlb_same_flow(&fc->key, &drop->key))
		fc->vip_epoch = 0;
	return 0;
}

/* Forgets the cached copies of a flow's entry on every CPU. */
static __always_inline void xlb_flow_cache_drop_everywhere(const struct xlb_flow_key *key)
{
	struct xlb_flow_cache_drop drop = { .slot = xlb_flow_cache_slot(key) };

	__builtin_memcpy(&drop.key, key, sizeof(*key));
	bpf_loop(XLB_FLOW_CACHE_MAX_CPUS, xlb_flow_cache_drop_on_cpu, &drop, 0);
}

/* Brings a found entry's record of its VIP up to date (see struct
 * xlb_ct_value). */
static __always_inline void xlb_ct_note_vip(struct xlb_ct_ref *ref, __u32 vip_id, __u32 epoch,
					    __u32 hash)
{
	struct xlb_ct_value *ct;

	if (ref->v.vip_id == vip_id && ref->v.vip_epoch == epoch && ref->v.hash == hash)
		return;
	ct = &ref->set->value[ref->way & (XLB_CT_WAYS - 1)];
	ct->vip_id = vip_id;
	ct->vip_epoch = epoch;
	ct->hash = hash;
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

/* The hint an entry asks for (struct xlb_ct_value, second_chance), if any. */
static __always_inline struct xlb_backend *xlb_ct_hint(const struct xlb_ct_value *ct,
						       const struct xlb_backend *be,
						       const struct xlb_config *cfg)
{
	if (ct->second_chance == 0)
		return NULL;
	return xlb_hint_target(ct->second_chance - 1, ct->backend_id, be, cfg);
}

/*
 * Chooses the backend for a flow on the full path: the connection-table
 * entry `ref` found when it names a live backend and use_entry is set (not
 * for a TCP SYN, which always starts a new connection; ref->set is NULL when
 * the VIP skips the table), else the ring. record: write the ring's
 * choice into the connection table, within the insert budget. repoint (a
 * SYN): an entry already there for the tuple is an earlier connection's; it
 * is rewritten in place to the ring's choice, or the handshake's ACK would
 * follow it to the old backend. Rewriting an existing entry inserts nothing,
 * so it needs no budget. epoch: the VIP bucket's, read before the VIP was
 * matched; entries written here carry it. second_chance (a TCP packet that
 * is not a SYN, with XLB_CFG_F_SECOND_CHANCE): when the previous
 * ring names another backend, that one goes in *hint_out and into the entry
 * recorded (abi.h, struct xlb_gue_hint); an entry's own hint is used too.
 * Returns 0 with id_out and be_out set, or -outcome.
 */
static __always_inline int
xlb_pick_backend(const struct xlb_vip_value *vip, const struct xlb_flow_key *key,
		 const struct xlb_config *cfg, struct xlb_ct_ref *ref, int use_entry, int record,
		 int repoint, int second_chance, __u32 hash, __u32 epoch,
		 struct xlb_vip_stats *vstats, __u32 *id_out, struct xlb_backend **be_out,
		 struct xlb_backend **hint_out)
{
	struct xlb_backend *be, *hint = NULL;
	__u32 vip_id = vip->vip_id, prev_id = 0;
	int err;

	if (use_entry && ref->set && ref->found) {
		be = xlb_ct_backend(ref);
		if (be) {
			xlb_ct_note_vip(ref, vip_id, epoch, hash);
			if (vstats)
				vstats->conntrack_hits += 1;
			*id_out = ref->v.backend_id;
			*be_out = be;
			*hint_out = xlb_ct_hint(&ref->v, be, cfg);
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
	if (second_chance && xlb_ring_pick(&xlb_prev_rings, vip_id, hash, &prev_id) == 0)
		hint = xlb_hint_target(prev_id, *id_out, be, cfg);
	/* A SYN rewrites an earlier connection's entry in place (no budget:
	 * nothing is added); a recorded flow takes its stale entry's way, a
	 * free one, or the one seen longest ago. */
	if (ref->set && ((repoint && ref->found) || (record && xlb_ct_admit(cfg)))) {
		__u32 now = xlb_ct_clock;
		struct xlb_ct_value val = {
			.backend_id = *id_out,
			.generation = be->generation,
			.created = now,
			.last_seen = now,
			.vip_id = vip_id,
			.vip_epoch = epoch,
			.hash = hash,
			.second_chance = hint ? prev_id + 1 : 0,
		};

		xlb_ct_write(ref->set, ref->found ? ref->way : xlb_ct_victim(ref->set, now), key,
			     &val);
		/* Other CPUs may hold the earlier connection's copy. */
		if (repoint)
			xlb_flow_cache_drop_everywhere(key);
	}
	*be_out = be;
	*hint_out = hint;
	return 0;
}

static __always_inline int xlb_encap(struct xdp_md *ctx, const struct xlb_packet *pkt,
				     const struct xlb_backend *be, const struct xlb_config *cfg,
				     __u32 hash, __u64 frame_len, const struct xlb_backend *hint)
{
	__u64 packet_len = sizeof(struct ethhdr) + pkt->ip_len;

	if (be->family == XLB_FAMILY_V4 && pkt->key.family != XLB_FAMILY_V4)
		return -XLB_OUT_DROP_FAMILY;
	if (pkt->ip_len + xlb_encap_overhead(be, cfg, hint) > cfg->mtu)
		return -XLB_OUT_DROP_TOO_BIG;
	/* Ethernet padding after the IP packet would ride inside the outer
	 * packet, past its length: cut it off first. */
	if (frame_len > packet_len && bpf_xdp_adjust_tail(ctx, -(int)(frame_len - packet_len)))
		return -XLB_OUT_DROP_HEADROOM;
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
	__u32 reason = outcome - XLB_VIP_DROP_FIRST;

	if (vip_id == XLB_CAPTURE_NO_VIP || reason >= XLB_VIP_DROP_REASONS)
		return;
	drops = bpf_map_lookup_elem(&xlb_vip_drops, &vip_id);
	if (drops)
		drops->by_reason[reason] += 1;
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
	struct xlb_ct_ref ct;
	struct xlb_config *cfg;
	struct ethhdr *eth = data;
	__u32 zero = 0, backend_id = 0, vip_id = XLB_CAPTURE_NO_VIP, hash, bucket, *epoch;
	__u64 frame_len = data_end - data;
	int proto, err, icmp_error = 0, ct_looked_up = 0, hit = 0, matched, action;
	enum xlb_outcome outcome;

	/* Not "= {}": zeroing the copy costs every packet stores. */
	ct.set = NULL;
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

	/* An established TCP flow: its entry, while the bucket's epoch is the
	 * one it recorded, says everything needed (VIP, backend, hash); this
	 * CPU's copy of the entry says it without a table lookup. */
	if (!icmp_error && pkt.key.proto == IPPROTO_TCP) {
		__u32 slot = xlb_flow_cache_slot(&pkt.key);
		struct xlb_flow_cache_entry *fc = bpf_map_lookup_elem(&xlb_flow_cache, &slot);

		if (pkt.tcp_syn) {
			/* A new connection: an earlier one's copy must not
			 * outlive this SYN's choice. */
			if (fc && xlb_same_flow(&fc->key, &pkt.key))
				fc->vip_epoch = 0;
		} else if (fc && (be = xlb_flow_cache_backend(fc, &pkt.key, *epoch))) {
			backend_id = fc->backend_id;
			vip_id = fc->vip_id;
			hash = fc->hash;
			hit = 1;
			err = 0;
		} else {
			/* Read before the lookup: an entry deleted after it was
			 * found is never cached as checked after the delete. */
			__u32 now = xlb_ct_clock;

			xlb_ct_find(&ct, &pkt.key);
			ct_looked_up = 1;
			if (ct.found && ct.v.vip_epoch == *epoch) {
				be = xlb_ct_backend(&ct);
				if (be) {
					backend_id = ct.v.backend_id;
					vip_id = ct.v.vip_id;
					hash = ct.v.hash;
					hit = 1;
					err = 0;
					/* A copy taken in the tick of the agent's
					 * last delete would not be used: skip it.
					 * A flow with a hint is never copied: the
					 * cache's hits carry none. */
					if (ct.v.second_chance)
						hint = xlb_ct_hint(&ct.v, be, cfg);
					else if (fc && (__s32)(now - xlb_ct_erased) > 0)
						xlb_flow_cache_fill(fc, &pkt.key, &ct.v, now);
				}
			}
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

		hash = xlb_vip_flow_hash(&pkt.key, vip->flags, cfg->hash_seed);
		{
			int use_ct = !(vip->flags & XLB_VIP_F_NO_CONNTRACK);
			int second_chance = use_ct && (cfg->flags & XLB_CFG_F_SECOND_CHANCE) &&
					    pkt.key.proto == IPPROTO_TCP && !pkt.tcp_syn &&
					    !icmp_error;

			/* A SYN never creates an entry: the ring's answer for it
			 * is the one the handshake's ACK gets, which records the
			 * flow (docs/conntrack.md). An ICMP error must not
			 * create one either. */
			if (!use_ct)
				ct.set = NULL;
			else if (!ct_looked_up)
				xlb_ct_find(&ct, &pkt.key);
			err = xlb_pick_backend(vip, &pkt.key, cfg, &ct, !pkt.tcp_syn,
					       use_ct && !icmp_error && !pkt.tcp_syn,
					       use_ct && pkt.tcp_syn, second_chance, hash,
					       seen_epoch, icmp_error ? NULL : vstats, &backend_id,
					       &be, &hint);
		}
	}
	if (err == 0)
		err = xlb_encap(ctx, &pkt, be, cfg, hash, frame_len, hint);
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

	bstats = bpf_map_lookup_elem(&xlb_backend_stats, &backend_id);
	if (bstats) {
		bstats->packets += 1;
		bstats->bytes += frame_len;
	}
	if (hint) {
		__u64 *hinted = bpf_map_lookup_elem(&xlb_vip_hints, &vip_id);

		if (hinted)
			*hinted += 1;
	}
	XLB_VERDICT(icmp_error ? XLB_OUT_TX_ICMP_ERROR : XLB_OUT_TX, XDP_TX);

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
