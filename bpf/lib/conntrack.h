/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The connection table (docs/conntrack.md; abi.h, struct xlb_ct_set): find a
 * flow in its set of four ways, write a way under its sequence number, the
 * insert budget, and the per-CPU flow cache that answers a flow's repeated
 * packets without reading the table.
 */
#ifndef XLB_BPF_CONNTRACK_H
#define XLB_BPF_CONNTRACK_H

#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

#include "xlb/abi.h"
#include "xlb/ct_set.h"
#include "xlb/flow_hash.h"
#include "maps.h"

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

#endif /* XLB_BPF_CONNTRACK_H */
