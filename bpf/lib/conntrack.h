/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The connection table (docs/conntrack.md; abi.h, layout 5): find a flow in
 * its buckets, write its slot(s) under the claim protocol, the insert
 * budget, and the per-CPU flow cache that answers a flow's repeated packets
 * without reading the table.
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

/*
 * A flow's place in the connection table (abi.h, layout 5), as plain data:
 * xlb_ct_lookup and xlb_ct_insert are global functions, which the verifier
 * checks once each, not again on every path of the program that calls them,
 * and which return what they found through memory like this.
 */
struct xlb_ct_found {
	struct xlb_ct_ident id;
	__u32 bucket[2]; /* bucket[1]: once second_known */
	__u32 hash; /* xlb_ct_hash of the flow */
	__u32 hint; /* found with a hint: its tail's (1 + backend id) */
	__u8 second_known;
	__u8 present; /* the table is there (and the lookup ran) */
	__u8 found;
	__u8 where; /* found: 0 the first bucket, 1 the second */
	__u8 slot; /* found: the head's slot */
	__u8 pad[3];
	__u64 meta; /* found: the head's meta as read */
};

/* The line of bucket `bucket` holding `slot`. */
static __always_inline struct xlb_ct_line *xlb_ct_line_of(__u32 bucket, __u32 slot)
{
	__u32 index = XLB_CT_BUCKET_ELEMENT(bucket) + ((slot >> 2) & 1);

	return bpf_map_lookup_elem(&xlb_conntrack5, &index);
}

/* Slot `slot` of the found flow's bucket `where` (0 the first), or NULL. */
static __always_inline struct xlb_ct_slot *xlb_ct_slot_at(const struct xlb_ct_found *f, __u32 where,
							  __u32 slot)
{
	/* Constant indices: a variable one into the stack is refused. */
	struct xlb_ct_line *line = xlb_ct_line_of(where ? f->bucket[1] : f->bucket[0], slot);

	if (!line)
		return NULL;
	return &line->slot[slot & 3];
}

/* A bucket's two lines, looked up once for a scan of its slots. */
struct xlb_ct_bucket_lines {
	struct xlb_ct_line *line[2];
};

static __always_inline struct xlb_ct_slot *xlb_ct_slot_in(const struct xlb_ct_bucket_lines *b,
							  __u32 slot)
{
	struct xlb_ct_line *line = (slot & 4) ? b->line[1] : b->line[0];

	return line ? &line->slot[slot & 3] : NULL;
}

/* Whether slot `s` of bucket `b` holds the flow; fills f->meta and f->hint.
 * A slot being written, or rewritten while it was read, does not count: that
 * entry is on its way out. */
static __always_inline int xlb_ct_match(struct xlb_ct_found *f, const struct xlb_ct_bucket_lines *b,
					__u32 s)
{
	struct xlb_ct_slot *head = xlb_ct_slot_in(b, s), *tail;
	__u64 m, tm = 0;

	if (!head)
		return 0;
	m = *(volatile __u64 *)&head->meta;
	if ((m & XLB_CT_IDENT_MASK) != f->id.head_match)
		return 0;
	asm volatile("" ::: "memory");
	if (*(volatile __u64 *)&head->key != f->id.head_key)
		return 0;
	if (xlb_ct_has_tail(m)) {
		tail = xlb_ct_slot_in(b, s | 1);
		if (!tail)
			return 0;
		tm = *(volatile __u64 *)&tail->meta;
		if ((tm & XLB_CT_TAIL_IDENT_MASK) != f->id.tail_ports)
			return 0;
		asm volatile("" ::: "memory");
		if (*(volatile __u64 *)&tail->key != f->id.tail_key)
			return 0;
		asm volatile("" ::: "memory");
		if (*(volatile __u64 *)&tail->meta != tm)
			return 0;
	}
	asm volatile("" ::: "memory");
	if ((*(volatile __u64 *)&head->meta ^ m) & ~(XLB_CT_SEEN_MASK | XLB_CT_BUCKET_FLAGS))
		return 0;
	f->meta = m;
	f->hint = (m & XLB_CT_HINT) ? xlb_ct_tail_hint(tm) : 0;
	return 1;
}

static __always_inline int xlb_ct_find_in(struct xlb_ct_found *f, __u32 where)
{
	struct xlb_ct_bucket_lines b;
	__u32 bucket = where ? f->bucket[1] : f->bucket[0];

	__u32 slots;

	b.line[0] = xlb_ct_line_of(bucket, 0);
	b.line[1] = xlb_ct_line_of(bucket, 4);
	if (!b.line[0])
		return 0;
	/* The second line only once it has held an entry (XLB_CT_LINE1). */
	slots = (*(volatile __u64 *)&b.line[0]->slot[0].meta & XLB_CT_LINE1) ? XLB_CT_SLOTS
									     : XLB_CT_SLOTS / 2;
	for (__u32 s = 0; s < XLB_CT_SLOTS; s++) {
		if (s >= slots)
			break;
		/* An IPv6 head is in an even slot. */
		if (f->id.v6 && (s & 1))
			continue;
		if (!xlb_ct_match(f, &b, s))
			continue;
		f->where = where;
		f->slot = s;
		f->found = 1;
		return 1;
	}
	return 0;
}

/* Computes the flow's second bucket, once. */
static __always_inline void xlb_ct_need_second(struct xlb_ct_found *f,
					       const struct xlb_ct_header5 *hdr)
{
	if (f->second_known)
		return;
	f->bucket[1] = xlb_ct_second_bucket(f->hash, hdr->seed, hdr->buckets);
	f->second_known = 1;
}

/* Finds the flow of the VIP in its buckets: the first, then the second when
 * the first has sent flows there (XLB_CT_OVERFLOW). Returns f->found. */
__noinline int xlb_ct_lookup(const struct xlb_flow_key *key, __u32 vip_id, struct xlb_ct_found *f)
{
	__u32 index = 0;
	struct xlb_ct_header5 *hdr = bpf_map_lookup_elem(&xlb_conntrack5, &index);
	struct xlb_ct_slot *first;

	if (!f)
		return 0;
	f->present = 0;
	f->found = 0;
	if (!key || !hdr || hdr->magic != XLB_CT_MAGIC5 || hdr->buckets == 0)
		return 0;
	f->hash = xlb_ct_hash(key, hdr->seed);
	f->bucket[0] = xlb_ct_first_bucket(f->hash, hdr->buckets);
	f->bucket[1] = f->bucket[0];
	f->second_known = 0;
	first = xlb_ct_slot_at(f, 0, 0);
	if (!first)
		return 0;
	f->present = 1;
	xlb_ct_ident_of(key, vip_id, &f->id);
	if (xlb_ct_find_in(f, 0))
		return 1;
	if (!(*(volatile __u64 *)&first->meta & XLB_CT_OVERFLOW))
		return 0;
	xlb_ct_need_second(f, hdr);
	if (f->bucket[1] == f->bucket[0])
		return 0;
	return xlb_ct_find_in(f, 1);
}

/* Sets a bucket flag (XLB_CT_BUCKET_FLAGS) in slot 0 of bucket `where`:
 * XLB_CT_OVERFLOW in the first bucket before a flow goes to its second,
 * XLB_CT_LINE1 before a flow takes a slot of a bucket's second line.
 * Returns 0 when a writer holds the slot. */
static __always_inline int xlb_ct_mark(const struct xlb_ct_found *f, __u32 where, __u64 flag)
{
	struct xlb_ct_slot *first = xlb_ct_slot_at(f, where, 0);
	__u64 old;

	if (!first)
		return 0;
	old = *(volatile __u64 *)&first->meta;
	if (old & flag)
		return 1;
	if (old & XLB_CT_CLAIMED)
		return 0;
	return __sync_val_compare_and_swap(&first->meta, old, old | flag) == old;
}

/*
 * Writes the flow into `spot` (with the aligned pair when spot->pair), as
 * abi.h's protocol says: claims, keys, tail, head meta last. `meta`: the head
 * meta without its version and overflow bits; `tail_meta`: what the tail
 * holds. Returns 0 when another writer holds a slot.
 */
static __always_inline int xlb_ct_store(struct xlb_ct_found *f, const struct xlb_ct_spot *spot,
					__u64 meta, __u64 tail_meta)
{
	struct xlb_ct_slot *head, *tail = NULL;
	__u32 where = spot->bucket & 1, slot = spot->slot & (XLB_CT_SLOTS - 1), pair = spot->pair;
	__u64 old, told = 0;

	if (pair)
		slot &= ~1U;
	head = xlb_ct_slot_at(f, where, slot);
	if (!head)
		return 0;
	old = *(volatile __u64 *)&head->meta;
	if ((old & XLB_CT_CLAIMED) ||
	    __sync_val_compare_and_swap(&head->meta, old, old | XLB_CT_CLAIMED) != old)
		return 0;
	if (pair) {
		tail = xlb_ct_slot_at(f, where, slot | 1);
		if (tail)
			told = *(volatile __u64 *)&tail->meta;
		if (!tail || (told & XLB_CT_CLAIMED) ||
		    __sync_val_compare_and_swap(&tail->meta, told, told | XLB_CT_CLAIMED) != told) {
			*(volatile __u64 *)&head->meta = old;
			return 0;
		}
	}
	*(volatile __u64 *)&head->key = f->id.head_key;
	if (tail) {
		/* An entry of one slot over a pair empties the tail. */
		*(volatile __u64 *)&tail->key = (tail_meta & XLB_CT_KIND_MASK) ? f->id.tail_key : 0;
		asm volatile("" ::: "memory");
		*(volatile __u64 *)&tail->meta = tail_meta;
	}
	asm volatile("" ::: "memory");
	*(volatile __u64 *)&head->meta =
		meta | ((old ^ XLB_CT_VERSION) & (XLB_CT_VERSION | XLB_CT_BUCKET_FLAGS));
	return 1;
}

/* bpf_loop's context must live on the stack: it points at the scratch. */
struct xlb_ct_evict_ctx {
	struct xlb_ct_place_state *st;
};

static long xlb_ct_evict_step(__u64 index, void *ctx)
{
	struct xlb_ct_place_state *st = ((struct xlb_ct_evict_ctx *)ctx)->st;

	if (st)
		xlb_ct_place_evict_step(st, (__u32)index);
	return 0;
}

/* Records the flow xlb_ct_lookup looked for: over its own entry when one was
 * found (stale, or a SYN repointing it), else where xlb_ct_place says.
 * value: xlb_ct_head_meta of the VIP, backend and generation (kind 0, no
 * hint, time 0); hint: 0, or 1 + the id of the backend a second-chance hint
 * names. Returns whether it wrote. */
__noinline int xlb_ct_insert(struct xlb_ct_found *f, __u64 value, __u32 hint)
{
	__u32 zero = 0, now16 = xlb_ct_seen16(xlb_ct_clock), pair;
	struct xlb_ct_place_state *st = bpf_map_lookup_elem(&xlb_ct_scratch, &zero);
	struct xlb_ct_header5 *hdr = bpf_map_lookup_elem(&xlb_conntrack5, &zero);
	__u64 meta, tail_meta, kind, line1;
	struct xlb_ct_slot *first, *second;
	struct xlb_ct_spot spot;

	if (!f || !st || !hdr || !f->present)
		return 0;
	first = xlb_ct_slot_at(f, 0, 0);
	if (!first)
		return 0;
	kind = f->id.v6 ? XLB_CT_KIND_V6 : XLB_CT_KIND_V4;
	if (f->found) {
		/* In place, in the slots it holds: an IPv4 entry of one slot
		 * keeps no hint; the tail of one with a hint is emptied when
		 * the new one has none. */
		spot.bucket = f->where;
		spot.slot = f->slot;
		spot.pair = (__u32)xlb_ct_has_tail(f->meta);
		if (!spot.pair)
			hint = 0;
		meta = value | xlb_ct_head_meta(0, 0, 0, kind, hint != 0, now16);
		tail_meta = f->id.v6 || hint
				    ? f->id.tail_ports | ((__u64)hint << XLB_CT_TAIL_HINT_SHIFT)
				    : 0;
		return xlb_ct_store(f, &spot, meta, tail_meta);
	}
	pair = f->id.v6 || hint != 0;
	meta = value | xlb_ct_head_meta(0, 0, 0, kind, hint != 0, now16);
	tail_meta = pair ? (f->id.tail_ports | ((__u64)hint << XLB_CT_TAIL_HINT_SHIFT)) : 0;
	/* A second line that never held an entry is empty: not read. */
	line1 = *(volatile __u64 *)&first->meta & XLB_CT_LINE1;
	for (__u32 s = 0; s < XLB_CT_SLOTS; s++) {
		struct xlb_ct_slot *a = (s < 4 || line1) ? xlb_ct_slot_at(f, 0, s) : NULL;

		st->meta[s] = a ? *(volatile __u64 *)&a->meta : (s < 4 ? XLB_CT_CLAIMED : 0);
	}
	st->pair = pair;
	st->now16 = now16;
	if (xlb_ct_place_first(st, &spot) == 0)
		goto store; /* the second bucket is not read */
	if (xlb_ct_room(xlb_ct_free_mask(st, 0), pair) < 0) {
		/* The first bucket full: its entry seen longest ago goes when it
		 * is no busy flow's, still without the second bucket. */
		struct xlb_ct_evict_ctx evict = { .st = st };

		st->best = 0;
		bpf_loop(XLB_CT_SLOTS, xlb_ct_evict_step, &evict, 0);
		if (xlb_ct_place_stale(st, &spot) == 0)
			goto store;
	}
	xlb_ct_need_second(f, hdr);
	second = xlb_ct_slot_at(f, 1, 0);
	if (!second)
		return 0;
	line1 = *(volatile __u64 *)&second->meta & XLB_CT_LINE1;
	for (__u32 s = 0; s < XLB_CT_SLOTS; s++) {
		struct xlb_ct_slot *b = (s < 4 || line1) ? xlb_ct_slot_at(f, 1, s) : NULL;

		st->meta[XLB_CT_SLOTS + s] =
			b ? *(volatile __u64 *)&b->meta : (s < 4 ? XLB_CT_CLAIMED : 0);
		if (f->bucket[1] == f->bucket[0])
			st->meta[XLB_CT_SLOTS + s] = XLB_CT_CLAIMED; /* one bucket: never twice */
	}
	if (xlb_ct_place_room(st, &spot) != 0) {
		/* Both buckets full: the scan for the entry seen longest ago,
		 * verified once as bpf_loop's callback. */
		struct xlb_ct_evict_ctx evict = { .st = st };

		bpf_loop(2 * XLB_CT_SLOTS, xlb_ct_evict_step, &evict, 0);
		if (xlb_ct_place_evicted(st, &spot) != 0)
			return 0;
	}
store:
	if (spot.bucket && !xlb_ct_mark(f, 0, XLB_CT_OVERFLOW))
		return 0;
	if ((spot.slot & 4) && !xlb_ct_mark(f, spot.bucket, XLB_CT_LINE1))
		return 0;
	return xlb_ct_store(f, &spot, meta, spot.pair && !pair ? 0 : tail_meta);
}

/* The backend a found entry names when it is still the one recorded (same
 * generation), the entry's age refreshed; NULL when it went away. */
static __always_inline struct xlb_backend *xlb_ct_backend(const struct xlb_ct_found *f)
{
	__u32 id = xlb_ct_meta_backend(f->meta), now16;
	struct xlb_backend *be = bpf_map_lookup_elem(&xlb_backends, &id);
	struct xlb_ct_line *line;

	if (!be || be->generation == 0 ||
	    (be->generation & XLB_CT_GENERATION_MASK) != xlb_ct_meta_generation(f->meta))
		return NULL;
	now16 = xlb_ct_seen16(xlb_ct_clock);
	if (now16 != xlb_ct_meta_seen(f->meta)) {
		/* Constant indices: a variable one into the stack is refused. */
		line = xlb_ct_line_of(f->where ? f->bucket[1] : f->bucket[0], f->slot);
		if (line)
			*((volatile __u16 *)&line->slot[f->slot & 3].meta + 3) = (__u16)now16;
	}
	return be;
}

/* Notes in the found entry's record that the client sent FIN or RST
 * (`flags`, XLB_CT_ENDED_*), for the agent's listing (abi.h, struct
 * xlb_ct_record). Returns whether the word changed. */
__noinline int xlb_ct_note_ended(const struct xlb_ct_found *f, __u32 flags)
{
	__u32 zero = 0, index, tag, word, old;
	struct xlb_ct_header5 *hdr = bpf_map_lookup_elem(&xlb_conntrack5, &zero);
	struct xlb_ct_record *rec;
	struct xlb_ct_line *line;

	if (!f || !hdr || !f->found)
		return 0;
	index = XLB_CT_RECORD_ELEMENT(hdr->buckets, f->where ? f->bucket[1] : f->bucket[0],
				      f->slot & (XLB_CT_SLOTS - 1));
	line = bpf_map_lookup_elem(&xlb_conntrack5, &index);
	if (!line)
		return 0;
	rec = (struct xlb_ct_record *)line + (f->slot & 1);
	tag = xlb_ct_ended_tag(f->id.head_key, f->meta);
	old = *(volatile __u32 *)&rec->ended;
	word = tag | (flags & 0xff) | ((old & ~0xffU) == tag ? (old & 0xff) : 0);
	if (word == old)
		return 0;
	*(volatile __u32 *)&rec->ended = word;
	return 1;
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
						const struct xlb_flow_key *key, __u32 backend_id,
						__u32 generation, __u32 vip_id, __u32 epoch,
						__u32 hash, __u32 checked)
{
	__builtin_memcpy(&fc->key, key, sizeof(*key));
	fc->backend_id = backend_id;
	fc->generation = generation;
	fc->vip_id = vip_id;
	fc->vip_epoch = epoch;
	fc->hash = hash;
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

#endif /* XLB_BPF_CONNTRACK_H */
