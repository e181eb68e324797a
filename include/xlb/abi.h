/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The ABI between the XDP programs and userspace: map names, key and value
 * layouts, limits, flags and outcome codes. Plain C with <linux/types.h>
 * types so that clang -target bpf and g++ both include this one file; nothing
 * here is ever redefined elsewhere.
 *
 * Compatibility rules:
 *  - outcome codes are never renumbered; new ones are appended;
 *  - a changed key/value layout gets a new map name (see XLB_MAP_* below) so
 *    an agent never reuses a pinned map whose layout it does not know;
 *  - every struct has explicit padding fields: no hidden holes in hash keys.
 */
#ifndef XLB_ABI_H
#define XLB_ABI_H

#include <linux/types.h>

#ifdef __cplusplus
#define XLB_STATIC_ASSERT(cond, msg) static_assert(cond, msg)
#else
#define XLB_STATIC_ASSERT(cond, msg) _Static_assert(cond, msg)
#endif
#if defined(__bpf__) && !defined(__cplusplus)
#define XLB_ABI_INLINE static __always_inline
#else
#define XLB_ABI_INLINE static inline
#endif

/* Address families as stored in maps (not AF_*: these are part of the ABI). */
#define XLB_FAMILY_V4 4
#define XLB_FAMILY_V6 6

/*
 * Limits. The *_DEFAULT values are the sizes compiled into the object; the
 * agent resizes the maps before load from its configuration.
 */
#define XLB_MAX_VIPS_DEFAULT 512
#define XLB_MAX_BACKENDS_DEFAULT 4096
#define XLB_CONNTRACK_DEFAULT 65536
#define XLB_RING_SIZE_DEFAULT 65537
#define XLB_RING_SIZE_MAX 5000011
/* Slot 0 of every ring map holds the ring size M; slots 1..M hold backend ids. */
#define XLB_RING_SIZE_SLOT 0
#define XLB_RING_FIRST_SLOT 1
/* Every inner ring map carries exactly these flags (the outer map's template). */
#define XLB_RING_MAP_FLAGS ((1U << 12) /* BPF_F_INNER_MAP */ | (1U << 10) /* BPF_F_MMAPABLE */)

/* Parsing bounds: IPv6 extension headers walked before giving up. */
#define XLB_IPV6_EXT_MAX 6
/* Outer header TTL / hop limit of encapsulated packets. */
#define XLB_ENCAP_TTL 64

/* Pinned map names; changing a layout means a new name. */
#define XLB_MAP_VIPS "xlb_vips"
#define XLB_MAP_RINGS "xlb_rings"
#define XLB_MAP_PREV_RINGS "xlb_prev_rings" /* second chance: see struct xlb_gue_hint */
#define XLB_MAP_BACKENDS "xlb_backends"
#define XLB_MAP_CONNTRACK "xlb_conntrack5" /* layout 5: struct xlb_ct_bucket */
#define XLB_MAP_CONNTRACK_V4 "xlb_conntrack4" /* layout 4: struct xlb_ct_set */
#define XLB_MAP_CONNTRACK_V3 "xlb_conntrack3" /* layout 3: LRU hash of struct xlb_ct_value */
#define XLB_MAP_CONNTRACK_V2 "xlb_conntrack2" /* layout 2: struct xlb_ct_value_v2 */
#define XLB_MAP_CONNTRACK_V1 "xlb_conntrack" /* layout 1: struct xlb_ct_value_v1 */
#define XLB_MAP_VIP_BUCKETS "xlb_vip_buckets"
#define XLB_MAP_VIP_CANDIDATES "xlb_vip_cands"
#define XLB_MAP_CT_CPU "xlb_ct_cpu"
#define XLB_MAP_CONFIG "xlb_config"
#define XLB_MAP_STATS "xlb_stats"
#define XLB_MAP_VIP_STATS "xlb_vip_stats"
#define XLB_MAP_BACKEND_STATS "xlb_backend_stats2" /* struct xlb_backend_stats */
#define XLB_MAP_BACKEND_STATS_V1 "xlb_backend_stats" /* packets and bytes only */
#define XLB_MAP_VIP_HINTS "xlb_vip_hints" /* per VIP: packets sent with a second-chance hint */
#define XLB_MAP_VIP_DROPS "xlb_vip_drops2" /* per VIP: drops by reason, struct xlb_vip_drops */
#define XLB_MAP_VIP_DROPS_V1 "xlb_vip_drops" /* six reasons, before source ranges and cookies */
#define XLB_MAP_VIP_COOKIES "xlb_vip_cookies" /* per VIP: struct xlb_vip_cookie_stats */
/* Per-VIP source lists: struct xlb_src_range_key. */
#define XLB_MAP_SOURCE_RANGES "xlb_src_ranges"
/* Per loaded program, never pinned: capture records (struct xlb_capture_record). */
#define XLB_MAP_CAPTURE_RING "xlb_capture_ring"
/* Per loaded program, never pinned (a new program starts with it empty). */
#define XLB_MAP_FLOW_CACHE "xlb_flow_cache"
/* Per loaded program, never pinned: an insert's scratch space (ct_set.h). */
#define XLB_MAP_CT_SCRATCH "xlb_ct_scratch"
/* Per loaded program, never pinned: a TCP header copied for the SYN-cookie
 * helpers and its options (bpf/lib/cookie.h), off the stack (the balancer
 * and a cookie function together may use at most 512 bytes of it). */
#define XLB_MAP_COOKIE_SCRATCH "xlb_cookie_tmp"
/* QUIC connection-ID routing (docs/quic.md): struct xlb_quic_config per VIP
 * and config id, the backend of each server id, per-VIP counters. */
#define XLB_MAP_QUIC_CONFIGS "xlb_quic_configs"
#define XLB_MAP_QUIC_SERVERS "xlb_quic_servers"
#define XLB_MAP_VIP_QUIC "xlb_vip_quic"
/* Per loaded program, never pinned: the AES contexts of encrypted configs
 * (struct xlb_quic_key), made by the program xlb_quic_key_install from a key
 * the agent reads again at every start. */
#define XLB_MAP_QUIC_KEYS "xlb_quic_keys"
/* Per loaded program, never pinned: a CID's 16 octets and their decryption
 * (bpf_dynptr_from_mem takes map values, not the stack). */
#define XLB_MAP_QUIC_SCRATCH "xlb_quic_tmp"
/* Per loaded program, never pinned: struct xlb_quic_opened_key. */
#define XLB_MAP_QUIC_OPENED "xlb_quic_opened"

/*
 * A 5-tuple. Used as the connection-table key and as the input of the flow
 * hash. IPv4 addresses live in word 0 of the 16-byte fields, the rest zero.
 */
struct xlb_flow_key {
	__be32 src[4];
	__be32 dst[4];
	__be16 sport;
	__be16 dport;
	__u8 proto;
	__u8 family;
	__u8 pad[2];
};
XLB_STATIC_ASSERT(sizeof(struct xlb_flow_key) == 40, "xlb_flow_key layout");

/* VIP match key: exact {address, port, protocol}; port 0 is the wildcard. */
struct xlb_vip_key {
	__be32 addr[4];
	__be16 port;
	__u8 proto;
	__u8 family;
};
XLB_STATIC_ASSERT(sizeof(struct xlb_vip_key) == 20, "xlb_vip_key layout");

/*
 * VIP address buckets (XLB_MAP_VIP_BUCKETS, an array of __u32): the
 * balancer's first look at a packet. Bucket xlb_vip_bucket(dst) (flow_hash.h)
 * is 0 when no VIP address falls in it: the packet is not for a VIP and
 * leaves after this one array read. Otherwise it holds the bucket's epoch,
 * which the agent renews (from the counter in slot XLB_VIP_EPOCH_SLOT, never
 * reusing a value) after every change to a VIP whose address falls in the
 * bucket. A connection-table entry records the epoch its packet saw before
 * matching the VIP; while the bucket still holds that epoch, the VIPs at the
 * flow's address are as they were, and a hit can skip the VIP lookup.
 */
#define XLB_VIP_BUCKETS 16384
#define XLB_VIP_EPOCH_SLOT XLB_VIP_BUCKETS /* the last epoch handed out */

/*
 * The VIPs of each bucket, so that matching one needs no hash-map lookup
 * (XLB_MAP_VIP_CANDIDATES: an mmap()able array of XLB_VIP_BUCKETS blocks,
 * indexed like the buckets). XLB_MAP_VIPS stays the truth: a block lists every
 * VIP whose address falls in its bucket, or holds XLB_VIP_CANDIDATES_SPILL in
 * count when they do not fit, and the program then looks up XLB_MAP_VIPS as
 * before. The agent rewrites a block in place, through the mapping, and keeps
 * seq odd meanwhile; a packet that finds seq odd, or changed by the time it
 * has read the block, looks up XLB_MAP_VIPS too. (The agent's stores and the
 * program's loads keep their order: x86-64 orders stores with stores and
 * loads with loads; both sides stop the compiler from reordering them.)
 * Order of a change: XLB_MAP_VIPS, then the block, then the bucket's epoch.
 */
#define XLB_VIP_CANDIDATES 4
#define XLB_VIP_CANDIDATES_SPILL 0xffffffffU

struct xlb_vip_candidate {
	__be32 addr[4];
	__be16 port; /* 0: the port wildcard */
	__u8 proto;
	__u8 family;
	__u32 vip_id;
	__u32 flags; /* XLB_VIP_F_* */
};
XLB_STATIC_ASSERT(sizeof(struct xlb_vip_candidate) == 28, "xlb_vip_candidate layout");

struct xlb_vip_candidates {
	__u32 seq; /* odd while the agent rewrites the block */
	__u32 count; /* entries of vip in use, or XLB_VIP_CANDIDATES_SPILL */
	__u32 pad[2];
	struct xlb_vip_candidate vip[XLB_VIP_CANDIDATES];
};
XLB_STATIC_ASSERT(sizeof(struct xlb_vip_candidates) == 128, "two cache lines a block");

/* Per-VIP flags. */
#define XLB_VIP_F_NO_CONNTRACK (1U << 0) /* skip the connection table (e.g. UDP) */
#define XLB_VIP_F_HASH_SRC_ONLY (1U << 1) /* hash the source address only */
/* SYN cookies (docs/syn-cookies.md): answer the VIP's SYNs with a cookie
 * while the host is under a SYN flood (the program's `xlb_syn_flood`), or
 * always. At most one of the two; only on TCP VIPs with a connection table,
 * with XLB_CFG_F_GUE, whose backends all accept cookie ACKs. */
#define XLB_VIP_F_COOKIES_AUTO (1U << 2)
#define XLB_VIP_F_COOKIES_ALWAYS (1U << 3)
/* The VIP has source lists in XLB_MAP_SOURCE_RANGES: each packet's source is
 * looked up there (a VIP without the flag costs nothing). */
#define XLB_VIP_F_SOURCE_RANGES (1U << 4)
/* A UDP VIP that routes QUIC packets by the server id in their connection ID
 * (docs/quic.md; XLB_MAP_QUIC_CONFIGS holds its configs). */
#define XLB_VIP_F_QUIC (1U << 5)

struct xlb_vip_value {
	__u32 vip_id; /* index into the rings map and the per-VIP stats */
	__u32 flags; /* XLB_VIP_F_* */
};
XLB_STATIC_ASSERT(sizeof(struct xlb_vip_value) == 8, "xlb_vip_value layout");

/*
 * Backends live in an array indexed by backend id. generation 0 means the
 * slot is unused; an id is only reused with a new generation, so a
 * connection-table entry recorded for an older generation is stale.
 */
/* The backend's flows do not stay on it (it is down): no second-chance hint
 * names it. */
#define XLB_BACKEND_F_DOWN (1U << 0)

struct xlb_backend {
	__be32 addr[4];
	__u8 family;
	__u8 flags; /* XLB_BACKEND_F_* */
	__u16 pad;
	__u32 generation;
};
XLB_STATIC_ASSERT(sizeof(struct xlb_backend) == 24, "xlb_backend layout");

/*
 * Connection-table times: CLOCK_MONOTONIC_COARSE shifted right by
 * XLB_CT_TIME_SHIFT, i.e. units of 2^20 ns (about 1.05 ms), truncated to 32
 * bits: they wrap every 52 days, so idle times are computed modulo 2^32 units
 * and the agent expires entries long before that.
 *
 * The program does not read the clock per packet (bpf_ktime_get_coarse_ns
 * costs about 15 ns, most of an established flow's budget): the agent writes
 * the time into xlb_lb's global `xlb_ct_clock` every XLB_CT_CLOCK_TICK_MS.
 * While no agent runs, the clock stands still and entries are not refreshed.
 */
#define XLB_CT_TIME_SHIFT 20
#define XLB_CT_CLOCK_TICK_MS 250
/* A busy flow's entry has a last_seen less than XLB_CT_REFRESH_UNITS (about
 * 1.07 s) behind its latest packet, yet is not rewritten on every packet
 * (which would dirty its cache line): a lookup rewrites the slot's 16-bit
 * last_seen when its unit (XLB_CT_SEEN_SHIFT) has changed, and the data path
 * looks the entry up at least every XLB_CT_LOOKUP_UNITS (a cached copy is
 * used no longer: XLB_MAP_FLOW_CACHE). */
#define XLB_CT_REFRESH_UNITS 1024U
#define XLB_CT_LOOKUP_UNITS (XLB_CT_REFRESH_UNITS / 2)

/*
 * The established-flow cache (XLB_MAP_FLOW_CACHE): a small direct-mapped
 * per-CPU copy of the connection-table entries this CPU has just used, read
 * without a helper call (a table lookup is four kernel calls, most of an
 * established packet's cost). Slot xlb_flow_cache_slot(key) (flow_hash.h).
 * A copy is used only while all of these hold, otherwise the packet looks up
 * the table as before and refreshes the copy:
 *  - same key; the VIP bucket's epoch is vip_epoch (no VIP change since);
 *  - the backend is live with the recorded generation;
 *  - checked, the time the table was last looked up for it, is less than
 *    XLB_CT_LOOKUP_UNITS old (so the entry's last_seen, which keeps an
 *    insert from replacing it, is still refreshed twice a second) and later
 *    than `xlb_ct_erased`,
 *    the clock when the agent last deleted entries (a flush or a sweep takes
 *    effect at once).
 * A SYN clears its slot on its own CPU; a SYN that repoints an existing entry
 * clears the copies of every CPU. What is left: a reused 4-tuple whose SYN
 * and next packets arrive on different CPUs, within a second of the old
 * connection's last packet, after the old entry was evicted. RSS keeps a
 * flow's packets on one CPU, so that does not happen on a real NIC.
 * 256 slots (16 KiB a CPU): a copy serves the packets of a flow that arrive
 * close together, which is all it is for; a bigger cache makes every new
 * flow's probe of it a cache and TLB miss (8,192 slots cost new flows
 * 150-300 ns more in interleaved runs here, and established flows nothing
 * less).
 */
#define XLB_FLOW_CACHE_BITS 8
/* A slot's copy is replaced by another flow's only once it is this old
 * (XLB_CT_TIME_SHIFT units, about 67 ms) or unused: with many flows, a
 * packet's flow is rarely the one its slot holds, and rewriting the slot
 * for every packet cost the many-flows case more than the hits it gave. */
#define XLB_FLOW_CACHE_HOLD_UNITS 64
#define XLB_FLOW_CACHE_SLOTS (1U << XLB_FLOW_CACHE_BITS)
/* Bound of the walk over every CPU's copy (the kernel's largest NR_CPUS). */
#define XLB_FLOW_CACHE_MAX_CPUS 8192

struct xlb_flow_cache_entry {
	struct xlb_flow_key key;
	__u32 backend_id;
	__u32 generation;
	__u32 vip_id;
	__u32 vip_epoch; /* 0: empty (never a used bucket's epoch) */
	__u32 hash;
	__u32 checked; /* XLB_CT_TIME_SHIFT units */
};
XLB_STATIC_ASSERT(sizeof(struct xlb_flow_cache_entry) == 64, "one cache line per slot");

/*
 * Layout 3. The last three fields let an established TCP flow's packet be
 * forwarded from the entry alone (bpf/xlb_lb.bpf.c): its VIP (for the
 * counters), the flow hash (for the outer header) and the VIP bucket's epoch
 * when they were recorded (see XLB_MAP_VIP_BUCKETS). vip_epoch 0 never
 * matches: such an entry (copied from an older layout) takes the full path
 * once, which fills them in.
 */
struct xlb_ct_value {
	__u32 backend_id;
	__u32 generation; /* the backend's generation when recorded */
	__u32 created; /* XLB_CT_TIME_SHIFT units */
	__u32 last_seen; /* XLB_CT_TIME_SHIFT units, see XLB_CT_REFRESH_UNITS */
	__u32 vip_id;
	__u32 vip_epoch;
	__u32 hash; /* xlb_vip_flow_hash of the flow */
	/* 0, or 1 + the id of the backend the VIP's previous ring named when
	 * the entry was made by a packet that found no entry: every packet of
	 * the flow carries that backend as a second-chance hint (struct
	 * xlb_gue_hint). Entries of older programs hold 0 here. */
	__u32 second_chance;
};
XLB_STATIC_ASSERT(sizeof(struct xlb_ct_value) == 32, "xlb_ct_value layout");

/*
 * Layout 4 (XLB_MAP_CONNTRACK_V4; an agent upgraded over such a table copies
 * its entries into the layout-5 table, then unpins it): set-associative, our own rather than the
 * kernel's LRU hash (whose inserts cost three or four cache misses on a big
 * table: the bucket walked twice, a free element from a random address). An
 * mmap()able array map: element 0 is the table's header (struct
 * xlb_ct_header, in the first bytes of an element), elements 1..sets are
 * sets of XLB_CT_WAYS entries each (capacity = sets * XLB_CT_WAYS). A flow
 * lives in set xlb_ct_set_index(key) (flow_hash.h, with the header's seed: a
 * secret of the table, so that clients cannot aim flows at one set), in any
 * of its ways. A lookup and an insert read the same five adjacent cache
 * lines, fetched together; a new flow costs one memory round trip here.
 *
 * A way whose key has family 0 is empty. Writers (the program's inserts and
 * rewrites, the agent's deletes and copies) claim a way by moving its seq
 * from even to odd with a compare-and-swap, write key and value, and make it
 * even again; a writer that finds the way claimed gives up (the flow is
 * recorded by a later packet). A reader matches the key under an even seq,
 * copies the value and uses it only if seq has not changed meanwhile (x86-64
 * keeps loads in order and stores in order; both sides stop the compiler
 * from reordering). Single-field updates of a found entry (last_seen, the
 * VIP fields) are plain stores: at worst they land in the entry that just
 * replaced the flow's, which concerns a flow whose packets arrive on two
 * CPUs at once, which RSS prevents.
 *
 * An insert into a full set replaces the way seen longest ago (last_seen),
 * not the least recently used entry of the whole table: a set's four flows
 * compete only with each other.
 */
#define XLB_CT_WAYS 4
#define XLB_CT_MAGIC 0x584c4354U /* "XLCT" */

struct xlb_ct_set {
	__u64 seq[XLB_CT_WAYS]; /* odd while a writer owns the way */
	struct xlb_flow_key key[XLB_CT_WAYS]; /* family 0: empty */
	struct xlb_ct_value value[XLB_CT_WAYS];
};
XLB_STATIC_ASSERT(sizeof(struct xlb_ct_set) == 320, "five cache lines a set");

/* Element 0 of the table, written once by the agent when it creates the
 * table; the program records nothing while magic is not XLB_CT_MAGIC. */
struct xlb_ct_header {
	__u32 magic; /* XLB_CT_MAGIC */
	__u32 seed; /* of xlb_ct_set_index: random, kept with the table */
	__u32 sets; /* max_entries - 1 */
	__u32 ways; /* XLB_CT_WAYS */
};
XLB_STATIC_ASSERT(sizeof(struct xlb_ct_header) <= sizeof(struct xlb_ct_set), "header fits");

/*
 * Layout 5 (docs/conntrack.md, "How the table is organised"): an established
 * packet among many flows reads one 64-byte line of the table, which says
 * everything its packet needs.
 *
 * An mmap()able array of 64-byte elements (struct xlb_ct_line), in three
 * regions: elements 0-1 the header (struct xlb_ct_header5, in element 0);
 * then `buckets` buckets of two elements each (struct xlb_ct_bucket: 8 slots
 * of 16 bytes, 128-byte aligned); then a record per slot (struct
 * xlb_ct_record, two an element), which only the agent reads and writes.
 *
 * A slot names its flow exactly, not by a fingerprint: the VIP (vip_id, from
 * the VIP match every packet makes before the lookup) fixes the destination
 * address, protocol and family, so an IPv4 flow is the VIP plus its source
 * address and both ports, which fit one slot; an IPv6 flow takes an aligned
 * pair of slots (0-1, 2-3, 4-5 or 6-7, in one line), a head and a tail. An
 * IPv4 entry with a second-chance hint takes a pair too: its tail holds the
 * hint. Two flows that a slot cannot tell apart are the same flow.
 *
 * Placement: a flow may live in either of two buckets, both chosen by a hash
 * of its 5-tuple under the header's secret seed (xlb_ct_buckets, ct_set.h; a
 * client cannot aim flows at a bucket without it). An insert takes the first
 * bucket while it holds fewer than four slots (XLB_CT_FIRST_FILL);
 * when the first bucket is full, its entry seen longest ago if that entry
 * has been idle about a second (XLB_CT_STALE16), still without reading the
 * second bucket; else the less loaded of the two, else replaces the entry
 * seen longest ago in either (xlb_ct_place; the agent's copies skip the
 * idle-entry step). Placing a flow in its second bucket first sets
 * XLB_CT_OVERFLOW in the first bucket's slot 0, and a lookup reads the second
 * bucket only when that bit is set; likewise XLB_CT_LINE1 before a flow takes
 * one of a bucket's slots 4-7, and a bucket's second line is read only when
 * it is set: a new flow in a lightly loaded table reads one line. With live IPv4 flows at 75 % of
 * the capacity, fewer than 0.1 % of them find both buckets full; with a quarter of the flows IPv6
 * (pairs), fewer than 0.5 % (tests/unit/ct_place_test.cpp).
 *
 * Writers (the program's inserts and rewrites, the agent's deletes and
 * copies) claim a slot by setting XLB_CT_CLAIMED in its meta with a
 * compare-and-swap (a pair: the head, then the tail), write the key(s) and
 * the tail's meta, then store the head's meta with the bit clear and
 * XLB_CT_VERSION flipped. A writer that finds a slot claimed gives up (the
 * flow is recorded by a later packet). A reader reads the meta(s), the
 * key(s), then the meta(s) again, and uses the entry only if it was not
 * claimed and nothing but last_seen (and the overflow bit) changed. The
 * program refreshes last_seen (the head meta's top 16 bits) with a plain
 * store. XLB_CT_OVERFLOW and XLB_CT_LINE1 are kept by every writer of slot 0
 * and cleared only when the table is emptied.
 */
#define XLB_CT_SLOTS 8 /* per bucket */
#define XLB_CT_MAGIC5 0x35544358U /* "XCT5" */
#define XLB_CT_LAYOUT 5
#define XLB_CT_HEADER_ELEMENTS 2

struct xlb_ct_slot {
	/* IPv4 head: source address, source port, destination port as the
	 * packet carries them (bytes 0-3, 4-5, 6-7); IPv6 head: source address
	 * bytes 0-7; IPv6 tail: bytes 8-15; IPv4 tail: 0. */
	__u64 key;
	/* Head, from bit 0: vip_id (16 bits), backend_id (18), the backend's
	 * generation (its low 7 bits, XLB_CT_GENERATION_MASK), XLB_CT_LINE1,
	 * kind (2), XLB_CT_CLAIMED, XLB_CT_HINT, XLB_CT_VERSION,
	 * XLB_CT_OVERFLOW, last_seen (16 bits, XLB_CT_SEEN_SHIFT units). Tail: source port (16
	 * bits) and destination port (16) of an IPv6 flow (0 for IPv4), 10 zero bits, kind
	 * (XLB_CT_KIND_TAIL), XLB_CT_CLAIMED, then the hint (19 bits: 0, or 1 +
	 * the hinted backend's id). Empty: 0 but for the version and overflow
	 * bits. */
	__u64 meta;
};
XLB_STATIC_ASSERT(sizeof(struct xlb_ct_slot) == 16, "xlb_ct_slot layout");

#define XLB_CT_KIND_EMPTY 0
#define XLB_CT_KIND_V4 1
#define XLB_CT_KIND_V6 2
#define XLB_CT_KIND_TAIL 3
#define XLB_CT_KIND_SHIFT 42
#define XLB_CT_CLAIMED (1ULL << 44)
/* A head whose tail holds a second-chance hint. */
#define XLB_CT_HINT (1ULL << 45)
#define XLB_CT_VERSION (1ULL << 46)
/* Slot 0 of a bucket only: some flow whose first bucket this is lives in its
 * second bucket. */
#define XLB_CT_OVERFLOW (1ULL << 47)
/* Slot 0 of a bucket only: the bucket's second line (slots 4-7) has held an
 * entry; while it has not, a lookup and an insert read the first line only. */
#define XLB_CT_LINE1 (1ULL << 41)
#define XLB_CT_GENERATION_MASK 0x7fU
#define XLB_CT_SEEN_SHIFT_BITS 48
#define XLB_CT_TAIL_HINT_SHIFT 45
/* A head's last_seen is the entry time (XLB_CT_TIME_SHIFT units) shifted
 * right by this much: units of about 268 ms, wrapping every 4.9 hours. The
 * agent keeps the whole time in the slot's record (its walks are at most an
 * hour apart: conntrack.sweep_interval). */
#define XLB_CT_SEEN_SHIFT 8
#define XLB_CT_MAX_VIP_ID 0xffffU
#define XLB_CT_MAX_BACKEND_ID 0x3ffffU

struct xlb_ct_line {
	struct xlb_ct_slot slot[XLB_CT_SLOTS / 2];
};
XLB_STATIC_ASSERT(sizeof(struct xlb_ct_line) == 64, "one cache line an element");

struct xlb_ct_bucket {
	struct xlb_ct_slot slot[XLB_CT_SLOTS];
};
XLB_STATIC_ASSERT(sizeof(struct xlb_ct_bucket) == 128, "two cache lines a bucket");

/* The agent's record of a head slot's entry, valid while tag_key and tag_meta
 * are the slot's key and its meta under XLB_CT_TAG_MASK (the entry was not
 * rewritten since): when it was first seen, and its whole last_seen at the
 * slot's 16-bit last_seen `seen16`. The agent writes every field but `ended`.
 *
 * `ended` is the program's: a TCP packet with FIN or RST that finds the entry
 * (such packets skip the flow cache) sets XLB_CT_ENDED_FIN or _RST in its low
 * byte, under a 24-bit tag of the slot's key and meta above it
 * (xlb_ct_ended_tag, ct_set.h): a new entry in the slot fails the tag, so no
 * one clears the word. Only these rare packets touch the record's line; the
 * flags are best effort (two CPUs setting both at once may keep one). */
struct xlb_ct_record {
	__u64 tag_key;
	__u64 tag_meta;
	__u32 created; /* XLB_CT_TIME_SHIFT units */
	__u32 last_seen; /* XLB_CT_TIME_SHIFT units */
	__u32 seen16;
	__u32 ended;
};
#define XLB_CT_ENDED_FIN 0x1U /* the client sent a FIN */
#define XLB_CT_ENDED_RST 0x2U /* the client sent a RST */
XLB_STATIC_ASSERT(sizeof(struct xlb_ct_record) == 32, "two records a line");
#define XLB_CT_TAG_MASK \
	(~(XLB_CT_CLAIMED | XLB_CT_OVERFLOW | XLB_CT_LINE1 | (0xffffULL << XLB_CT_SEEN_SHIFT_BITS)))

/* Element 0, written once by the agent when it creates the table; the
 * program records nothing while magic is not XLB_CT_MAGIC5. */
struct xlb_ct_header5 {
	__u32 magic; /* XLB_CT_MAGIC5 */
	__u32 seed; /* of xlb_ct_buckets: random, kept with the table */
	__u32 buckets;
	__u32 slots; /* XLB_CT_SLOTS */
	__u32 layout; /* XLB_CT_LAYOUT */
	__u32 pad[11];
};
XLB_STATIC_ASSERT(sizeof(struct xlb_ct_header5) == 64, "header line");

/* Buckets of a table of at least `entries` entries, its map elements, and the
 * entries a map of `elements` elements holds. */
#define XLB_CT_BUCKETS(entries) (((entries) + XLB_CT_SLOTS - 1) / XLB_CT_SLOTS)
#define XLB_CT_BUCKET_ELEMENTS (2 + XLB_CT_SLOTS / 2) /* its lines and its records */
#define XLB_CT_ELEMENTS(entries) \
	(XLB_CT_HEADER_ELEMENTS + XLB_CT_BUCKETS(entries) * XLB_CT_BUCKET_ELEMENTS)
#define XLB_CT_BUCKETS_OF(elements)                                   \
	((elements) < XLB_CT_HEADER_ELEMENTS + XLB_CT_BUCKET_ELEMENTS \
		 ? 0                                                  \
		 : ((elements)-XLB_CT_HEADER_ELEMENTS) / XLB_CT_BUCKET_ELEMENTS)
#define XLB_CT_CAPACITY(elements) (XLB_CT_BUCKETS_OF(elements) * XLB_CT_SLOTS)
/* Element of bucket b's first line, and of the record of slot s of bucket b
 * (the record is in its first half when s is even). */
#define XLB_CT_BUCKET_ELEMENT(b) (XLB_CT_HEADER_ELEMENTS + 2 * (b))
#define XLB_CT_RECORD_ELEMENT(buckets, b, s) \
	(XLB_CT_HEADER_ELEMENTS + 2 * (buckets) + ((b)*XLB_CT_SLOTS + (s)) / 2)

/* The values of older layouts (XLB_MAP_CONNTRACK_V3 keeps struct
 * xlb_ct_value, XLB_MAP_CONNTRACK_V2, _V1): an agent upgraded
 * over such a table copies its entries into the new table, then unpins it. */
struct xlb_ct_value_v2 {
	__u32 backend_id;
	__u32 generation;
	__u32 created;
	__u32 last_seen;
};
XLB_STATIC_ASSERT(sizeof(struct xlb_ct_value_v2) == 16, "xlb_ct_value_v2 layout");

struct xlb_ct_value_v1 {
	__u32 backend_id;
	__u32 generation;
};
XLB_STATIC_ASSERT(sizeof(struct xlb_ct_value_v1) == 8, "xlb_ct_value_v1 layout");

/*
 * Per-CPU state of the connection table's insert budget (XLB_MAP_CT_CPU, one
 * entry). A token bucket: xlb_config.ct_insert_rate entries per second per
 * CPU, at most ct_insert_burst at once. An insert over budget is skipped (the
 * packet is still balanced by the ring) and counted; last_skip_ns is the
 * "under flood" flag: the CPU is flooded while it is recent.
 */
struct xlb_ct_cpu {
	__u64 tokens; /* token-nanoseconds: one entry costs 10^9 */
	__u64 refill_ns; /* coarse time of the last refill */
	__u64 inserts; /* entries written (or lost to another writer of the way) */
	__u64 skipped; /* inserts skipped: over budget */
	__u64 last_skip_ns; /* coarse time of the last skip; 0 = never */
};
XLB_STATIC_ASSERT(sizeof(struct xlb_ct_cpu) == 40, "xlb_ct_cpu layout");

/* Global configuration, one entry in an array map, written by the agent. */
#define XLB_CONFIG_MAGIC 0x584c4243U /* "XLBC" */
#define XLB_CONFIG_VERSION 2
/* Answer "too big after encapsulation" with ICMP frag-needed / packet-too-big. */
#define XLB_CFG_F_ICMP_TOO_BIG (1U << 0)
/* Encapsulate in GUE (UDP to xlb_config.gue_port) instead of IP-in-IP. */
#define XLB_CFG_F_GUE (1U << 1)
/* Second chance (struct xlb_gue_hint): a TCP packet, not a SYN, that finds
 * no connection-table entry and whose backend the VIP's previous ring
 * (XLB_MAP_PREV_RINGS) names differently carries the previous backend as a
 * hint. Only with XLB_CFG_F_GUE, which carries it. */
#define XLB_CFG_F_SECOND_CHANCE (1U << 2)

/*
 * Generic UDP Encapsulation (draft-ietf-intarea-gue), variant 0, as xlb
 * sends it: outer IP, a UDP header to the GUE port (source port from the flow
 * hash, XLB_GUE_SPORT_BASE and up, so a backend's NIC spreads flows over its
 * receive queues), then this 4-byte header and the client's IP packet. The
 * first byte holds Ver (2 bits, 0), C (1 bit, 0 = data) and Hlen (5 bits,
 * extension words after the header); proto is the inner packet's IP
 * protocol (4 or 41). xlb_decap skips Hlen words of extensions.
 */
struct xlb_guehdr {
	__u8 ver_c_hlen;
	__u8 proto;
	__be16 flags;
};
XLB_STATIC_ASSERT(sizeof(struct xlb_guehdr) == 4, "xlb_guehdr layout");
#define XLB_GUE_PORT_DEFAULT 6080
#define XLB_GUE_SPORT_BASE 0xc000 /* 49152 */
/* The outer UDP source port of a flow: the flow hash's top 14 bits over the base. */
#define XLB_GUE_SPORT(hash) (XLB_GUE_SPORT_BASE | ((hash) >> 18))
#define XLB_GUE_OVERHEAD (8 + 4) /* UDP + GUE headers */
#define XLB_GUE_VERSION(first_byte) ((first_byte) >> 6)
#define XLB_GUE_CONTROL(first_byte) (((first_byte) >> 5) & 1)
#define XLB_GUE_HLEN(first_byte) ((first_byte)&0x1f)

/*
 * Second chance (docs/second-chance.md). When a TCP packet that is not a SYN
 * finds no connection-table entry and the VIP's current and previous rings
 * name different backends for it, the balancer sends it to the current one
 * with the previous one named in the GUE header's private data (Hlen words,
 * no flag fields): this struct, 8 bytes with an IPv4 address (addr[0] only),
 * 20 with an IPv6 one. xlb_decap on the current backend delivers the packet
 * when its kernel knows the flow (a socket, a request socket, or a valid SYN
 * cookie), else rewrites the outer destination to addr, marks the hint
 * XLB_GUE_HINT_PASSED and sends it on; a backend never passes a packet on
 * twice. The hinted backend always has the outer header's family.
 */
struct xlb_gue_hint {
	__u8 magic; /* XLB_GUE_HINT_MAGIC */
	__u8 state; /* XLB_GUE_HINT_PASS_ON or XLB_GUE_HINT_PASSED */
	__u8 family; /* XLB_FAMILY_V4 or XLB_FAMILY_V6: of addr */
	__u8 pad;
	__be32 addr[4];
};
XLB_STATIC_ASSERT(sizeof(struct xlb_gue_hint) == 20, "xlb_gue_hint layout");
#define XLB_GUE_HINT_MAGIC 0x78 /* 'x' */
#define XLB_GUE_HINT_PASS_ON 1
#define XLB_GUE_HINT_PASSED 2
#define XLB_GUE_HINT_LEN(family) ((family) == XLB_FAMILY_V4 ? 8 : 20)

/*
 * SYN cookies (docs/syn-cookies.md): the handshake's ACK, when the LB answered
 * the SYN with a cookie, reaches the backend with this in the GUE header's
 * private data (Hlen 4, never with a second-chance hint: the connection is
 * new). The backend's xlb_decap hands it on (XLB_MAP_COOKIE_ACKS) to its tc
 * program, which builds the request socket the backend's kernel never made
 * (bpf_sk_assign_tcp_reqsk). The ISNs are the ACK's own (seq - 1, ack - 1).
 */
struct xlb_gue_cookie {
	__u8 magic; /* XLB_GUE_COOKIE_MAGIC */
	__u8 flags; /* XLB_GUE_COOKIE_F_* negotiated */
	__u8 snd_wscale; /* the client's window scale (with _F_WSCALE) */
	__u8 rcv_wscale; /* the one announced for the backend: XLB_COOKIE_RCV_WSCALE */
	__be16 mss; /* from the cookie: the kernel's MSS table */
	__u16 pad;
	__be32 tsval; /* the ACK's timestamps (with _F_TSTAMP), else 0 */
	__be32 tsecr;
};
XLB_STATIC_ASSERT(sizeof(struct xlb_gue_cookie) == 16, "xlb_gue_cookie layout");
#define XLB_GUE_COOKIE_MAGIC 0x63 /* 'c' */
#define XLB_GUE_COOKIE_F_WSCALE (1U << 0)
#define XLB_GUE_COOKIE_F_SACK (1U << 1)
#define XLB_GUE_COOKIE_F_TSTAMP (1U << 2)
#define XLB_GUE_COOKIE_F_ECN (1U << 3)
#define XLB_GUE_COOKIE_LEN 16

struct xlb_config {
	__u32 magic; /* XLB_CONFIG_MAGIC; anything else: the program passes all */
	__u32 version; /* XLB_CONFIG_VERSION */
	__u32 hash_seed; /* the shared secret of the flow hash */
	__u32 flags; /* XLB_CFG_F_* */
	/* Outer source addresses. With a prefix shorter than the address, the
	 * host bits (at most the low 32) come from the flow hash, which spreads
	 * a backend's receive load over its queues. */
	__be32 src_v4;
	__be32 src_v6[4];
	__u8 src_v4_prefix_len; /* 32 = fixed address */
	__u8 src_v6_prefix_len; /* 128 = fixed address */
	__u8 next_hop_mac[6]; /* outer Ethernet destination */
	__u16 mtu; /* largest outer IP packet the link carries */
	__u16 gue_port; /* host order; the outer UDP destination with XLB_CFG_F_GUE */
	/* Connection-table insert budget per CPU (struct xlb_ct_cpu): entries
	 * per second and bucket depth; rate 0 = unlimited. */
	__u32 ct_insert_rate;
	__u32 ct_insert_burst;
};
XLB_STATIC_ASSERT(sizeof(struct xlb_config) == 56, "xlb_config layout");

/*
 * Outcomes. Every packet the balancer sees increments exactly one of these
 * per-CPU counters. Never renumber; append.
 */
enum xlb_outcome {
	XLB_OUT_TX = 0, /* encapsulated to a backend */
	XLB_OUT_TX_ICMP_ERROR = 1, /* ICMP error quoting a VIP flow, sent to its backend */
	XLB_OUT_TX_ICMP_TOO_BIG = 2, /* answered "too big" to the client */
	XLB_OUT_PASS_NO_CONFIG = 3, /* agent has not configured the program yet */
	XLB_OUT_PASS_NOT_IP = 4, /* not IPv4/IPv6 (ARP, VLAN, ...) */
	XLB_OUT_PASS_NOT_VIP = 5, /* no VIP matches */
	XLB_OUT_PASS_FRAGMENT = 6, /* IPv4/IPv6 fragment (passed by default) */
	XLB_OUT_PASS_IPV6_EXT_LIMIT = 7, /* more extension headers than we walk */
	XLB_OUT_DROP_MALFORMED_ETH = 8,
	XLB_OUT_DROP_MALFORMED_IPV4 = 9, /* truncated, ihl < 5, bad version or length */
	XLB_OUT_DROP_MALFORMED_IPV6 = 10, /* truncated header or extension header */
	XLB_OUT_DROP_MALFORMED_L4 = 11, /* truncated TCP/UDP/ICMP header, TCP doff < 5 */
	XLB_OUT_DROP_NO_TABLE = 12, /* VIP has no published ring */
	XLB_OUT_DROP_NO_BACKEND = 13, /* VIP's ring is empty (no live backend) */
	XLB_OUT_DROP_TOO_BIG = 14, /* too big after encapsulation */
	XLB_OUT_DROP_FAMILY = 15, /* IPv6 VIP with an IPv4 backend: unsupported */
	XLB_OUT_DROP_BAD_BACKEND = 16, /* ring names an unused backend id */
	XLB_OUT_DROP_HEADROOM = 17, /* bpf_xdp_adjust_head (or the padding trim) failed */
	XLB_OUT_DROP_IPV4_CSUM = 18, /* IPv4 header checksum wrong (to a VIP's address) */
	XLB_OUT_DROP_ICMP_QUOTE =
		19, /* "too big" error to a VIP quoting no IP packet of its family */
	XLB_OUT_DROP_SOURCE_DENIED = 20, /* the VIP's source lists refuse the client */
	XLB_OUT_TX_SYN_COOKIE = 21, /* a SYN answered with a SYN cookie (SYN-ACK sent back) */
	XLB_OUT_DROP_COOKIE_INVALID = 22, /* while answering: ACK without entry, cookie wrong */
	XLB_OUT_TX_QUIC_CID = 23, /* QUIC packet sent to the backend its connection ID names */
	XLB_OUT__MAX = 24,
};

struct xlb_vip_stats {
	__u64 packets;
	__u64 bytes;
	__u64 new_flows; /* ring lookups: connection-table misses, SYNs, no-conntrack */
	__u64 conntrack_hits;
	__u64 drops; /* no table, no backend, too big, ... for this VIP */
};
XLB_STATIC_ASSERT(sizeof(struct xlb_vip_stats) == 40, "xlb_vip_stats layout");

/* Per VIP: packets dropped, by the drop outcomes a packet can meet once its
 * VIP is known (their sum is xlb_vip_stats.drops). A "too big" answered with
 * ICMP counts as too big. Slot xlb_vip_drop_slot(outcome) of by_reason. */
#define XLB_VIP_DROP_REASONS 8
struct xlb_vip_drops {
	__u64 by_reason[XLB_VIP_DROP_REASONS];
};
XLB_STATIC_ASSERT(sizeof(struct xlb_vip_drops) == 64, "xlb_vip_drops layout");

/* The slot of a per-VIP drop outcome, XLB_VIP_DROP_REASONS for any other. */
XLB_ABI_INLINE __u32 xlb_vip_drop_slot(__u32 outcome)
{
	if (outcome >= XLB_OUT_DROP_NO_TABLE && outcome <= XLB_OUT_DROP_HEADROOM)
		return outcome - XLB_OUT_DROP_NO_TABLE;
	if (outcome == XLB_OUT_DROP_SOURCE_DENIED)
		return 6;
	if (outcome == XLB_OUT_DROP_COOKIE_INVALID)
		return 7;
	return XLB_VIP_DROP_REASONS;
}

/* The outcome a slot counts (the inverse of xlb_vip_drop_slot). */
XLB_ABI_INLINE __u32 xlb_vip_drop_outcome(__u32 slot)
{
	if (slot < 6)
		return XLB_OUT_DROP_NO_TABLE + slot;
	return slot == 6 ? XLB_OUT_DROP_SOURCE_DENIED : XLB_OUT_DROP_COOKIE_INVALID;
}

/*
 * SYN cookies (docs/syn-cookies.md). The agent sets the program's global
 * `xlb_syn_flood` from the SYN rate it reads in XLB_MAP_VIP_COOKIES:
 *  - XLB_SYN_FLOOD_CALM: VIPs with XLB_VIP_F_COOKIES_AUTO forward their SYNs
 *    to backends as other VIPs do;
 *  - XLB_SYN_FLOOD_ANSWERING: the host is under a SYN flood; they answer
 *    SYNs with cookies and drop ACKs that find no entry and carry no valid
 *    cookie (as XLB_VIP_F_COOKIES_ALWAYS VIPs always do);
 *  - XLB_SYN_FLOOD_RECENT: the flood ended less than
 *    XLB_SYN_FLOOD_RECENT_MS ago, while cookies sent may still come back:
 *    SYNs go to backends again, an ACK without entry with a valid cookie is
 *    balanced as a cookie ACK, any other is forwarded as in calm.
 * An ACK with a valid cookie is balanced as a new flow and carries what the
 * backend needs to build the connection (struct xlb_gue_cookie).
 */
#define XLB_SYN_FLOOD_CALM 0
#define XLB_SYN_FLOOD_ANSWERING 1
#define XLB_SYN_FLOOD_RECENT 2
/* The kernel accepts a cookie for up to two of its 64-second periods. */
#define XLB_SYN_FLOOD_RECENT_MS 130000
/* The window scale the LB announces on the backend's behalf (the backend's
 * kernel keeps it: struct xlb_gue_cookie.rcv_wscale), and the SYN-ACK's
 * window and hop limit. */
#define XLB_COOKIE_RCV_WSCALE 7
#define XLB_COOKIE_SYNACK_WINDOW 65535
#define XLB_COOKIE_TTL 64

/* Per VIP, per CPU (XLB_MAP_VIP_COOKIES), for VIPs with a cookie flag. */
struct xlb_vip_cookie_stats {
	__u64 syns; /* SYNs to the VIP, answered or not: the flood detector's input */
	__u64 cookies_sent; /* SYN-ACKs sent with a cookie */
	__u64 acks_valid; /* ACKs without entry whose cookie checked out */
	__u64 acks_invalid; /* ACKs dropped: no entry, no valid cookie, while answering */
};
XLB_STATIC_ASSERT(sizeof(struct xlb_vip_cookie_stats) == 32, "xlb_vip_cookie_stats layout");

/*
 * QUIC connection-ID routing (docs/quic.md), the format of
 * draft-ietf-quic-load-balancers: a server's connection ID is one octet
 * whose top three bits are the config id ("config rotation" bits), then the
 * server id (server_id_len octets), then a nonce (nonce_len octets). An
 * encrypted config (single-pass form: server_id_len + nonce_len == 16)
 * encrypts those 16 octets with AES-128-ECB under the config's key.
 *
 * Per VIP with XLB_VIP_F_QUIC, config id c (0..6; 7 marks a CID no LB may
 * route) has slot vip_id * XLB_QUIC_CONFIG_SLOTS + c of XLB_MAP_QUIC_CONFIGS
 * (server_id_len 0: no such config) and, when encrypted, the same slot of
 * XLB_MAP_QUIC_KEYS. A server id is the big-endian number in its octets (at
 * most 8 of them non-zero); XLB_MAP_QUIC_SERVERS names its backend.
 */
#define XLB_QUIC_CONFIG_SLOTS 8
#define XLB_QUIC_CONFIG_IDS 7 /* config ids 0..6 */
#define XLB_QUIC_UNROUTABLE 7 /* config id of CIDs chosen without a config */
#define XLB_QUIC_SERVER_ID_MAX 15
#define XLB_QUIC_NONCE_MIN 4
#define XLB_QUIC_NONCE_MAX 18
#define XLB_QUIC_CID_MAX 20 /* RFC 9000: connection IDs are at most 20 octets */
#define XLB_QUIC_SINGLE_PASS 16 /* server_id_len + nonce_len of the encrypted form */
#define XLB_QUIC_MODE_PLAINTEXT 0
#define XLB_QUIC_MODE_ENCRYPTED 1

struct xlb_quic_config {
	__u8 server_id_len; /* 1..15; 0: the slot holds no config */
	__u8 nonce_len; /* 4..18, server_id_len + nonce_len <= 19 */
	__u8 mode; /* XLB_QUIC_MODE_* */
	__u8 pad[5];
};
XLB_STATIC_ASSERT(sizeof(struct xlb_quic_config) == 8, "xlb_quic_config layout");

/* The AES context of an encrypted config: a kernel object (struct
 * bpf_crypto_ctx __kptr), 0 until installed. The map's BTF is built by the
 * loader (clang 14 does not emit the kptr tag). */
struct xlb_quic_key {
	__u64 crypto_ctx;
	/* Bumped by every install and removal: the opened-CID cache's
	 * entries made under an older key never match again. */
	__u32 generation;
	__u32 pad;
};
XLB_STATIC_ASSERT(sizeof(struct xlb_quic_key) == 16, "xlb_quic_key layout");

/* The opened-CID cache (XLB_MAP_QUIC_OPENED, an LRU hash, per program): a
 * connection's packets carry one CID for its whole life, so each sealed
 * block is decrypted once and then found here. */
struct xlb_quic_opened_key {
	__u32 slot;
	__u32 generation; /* struct xlb_quic_key's when it was opened */
	__u8 sealed[XLB_QUIC_SINGLE_PASS];
};
XLB_STATIC_ASSERT(sizeof(struct xlb_quic_opened_key) == 24, "xlb_quic_opened_key layout");
/* value: the 16 octets decrypted */
#define XLB_QUIC_OPENED_DEFAULT 65536

/* What xlb_quic_key_install (a BPF_PROG_TYPE_SYSCALL program) takes through
 * BPF_PROG_TEST_RUN: the slot and the 16-octet key; it answers in err. */
struct xlb_quic_key_args {
	__u32 slot; /* vip_id * XLB_QUIC_CONFIG_SLOTS + config id */
	__s32 err; /* 0, or -errno from bpf_crypto_ctx_create or the slot */
	__u8 key[16]; /* all zero with clear = 1 */
	__u32 clear; /* 1: remove the slot's context */
	__u32 pad;
};
XLB_STATIC_ASSERT(sizeof(struct xlb_quic_key_args) == 32, "xlb_quic_key_args layout");

struct xlb_quic_server_key {
	__u32 vip_id;
	__u32 pad;
	__u64 server_id;
};
XLB_STATIC_ASSERT(sizeof(struct xlb_quic_server_key) == 16, "xlb_quic_server_key layout");
/* value: __u32 backend id (XLB_MAP_BACKENDS) */
#define XLB_QUIC_SERVERS_DEFAULT 16384

/* Why a packet of a VIP with XLB_VIP_F_QUIC was balanced by its 5-tuple
 * (the ring and the connection table) instead of its connection ID. */
enum xlb_quic_fallback {
	/* a long header the client addressed with a CID of its own choosing
	 * (Initial, 0-RTT), or of a version whose header we cannot read */
	XLB_QUIC_FB_CLIENT_CID = 0,
	XLB_QUIC_FB_UNKNOWN_CONFIG = 1, /* config id not configured (or 7) */
	/* too short for the config's CID, or a long header's CID of another
	 * length */
	XLB_QUIC_FB_BAD_LENGTH = 2,
	XLB_QUIC_FB_UNKNOWN_SERVER = 3, /* no backend owns the server id */
	XLB_QUIC_FB_DEAD_BACKEND = 4, /* its backend is down or released */
	XLB_QUIC_FB_NO_KEY = 5, /* encrypted config without a context, or decryption failed */
	XLB_QUIC_FALLBACKS = 6,
};

/* Per VIP, per CPU (XLB_MAP_VIP_QUIC), for VIPs with XLB_VIP_F_QUIC. */
struct xlb_vip_quic_stats {
	__u64 routed; /* sent to the backend their CID names */
	__u64 fallbacks[XLB_QUIC_FALLBACKS]; /* by enum xlb_quic_fallback */
	__u64 pad;
};
XLB_STATIC_ASSERT(sizeof(struct xlb_vip_quic_stats) == 64, "xlb_vip_quic_stats layout");

/*
 * Per-VIP source lists (XLB_MAP_SOURCE_RANGES, an LPM trie; only VIPs with
 * XLB_VIP_F_SOURCE_RANGES look it up). Key: the VIP id, then the source as an
 * IPv6 address (IPv4 as ::ffff:a.b.c.d), prefixlen counting the 32 bits of
 * the id. The agent writes each deny prefix as XLB_SOURCE_DENY and each allow
 * prefix that no deny prefix covers as XLB_SOURCE_ALLOW, plus, when the VIP
 * has an allow list, its family's whole space as XLB_SOURCE_DENY: the longest
 * match is then the verdict (allowed: in the allow list, or there is none;
 * and in no deny prefix). No match: allowed.
 */
struct xlb_src_range_key {
	__u32 prefixlen; /* 32 + prefix bits of addr */
	__be32 vip_id; /* big-endian: the trie matches bytes from the first */
	__be32 addr[4];
};
XLB_STATIC_ASSERT(sizeof(struct xlb_src_range_key) == 24, "xlb_src_range_key layout");
#define XLB_SOURCE_ALLOW 1
#define XLB_SOURCE_DENY 2
#define XLB_SOURCE_RANGES_DEFAULT 16384

/*
 * Packet capture (xlbctl capture, docs/capture.md). While the program's
 * global `xlb_capture_on` is 0 a packet costs that one read; otherwise each
 * packet whose verdict matches `xlb_capture_filter` (written by the agent
 * before it sets the flag) is copied into XLB_MAP_CAPTURE_RING: one record as
 * received and, when it was sent back out, one as sent.
 */
#define XLB_CAPTURE_DATA_SMALL 256 /* records of short packets reserve this */
#define XLB_CAPTURE_DATA_MAX 2048 /* the longest snap length */
#define XLB_CAPTURE_RING_BYTES (4U << 20)

enum xlb_capture_direction {
	XLB_CAPTURE_RECEIVED = 0, /* as it arrived (for a packet sent on: its inner packet) */
	XLB_CAPTURE_SENT = 1, /* as it left, encapsulated or answered */
};

struct xlb_capture_filter {
	__u32 outcomes; /* bit (1 << outcome) per enum xlb_outcome to capture */
	__u32 vip_id; /* with XLB_CAPTURE_F_VIP: only this VIP's packets */
	__u32 snaplen; /* bytes kept per record, 1..XLB_CAPTURE_DATA_MAX */
	__u32 flags; /* XLB_CAPTURE_F_* */
	__be32 backend[4]; /* with XLB_CAPTURE_F_BACKEND: only packets sent to it */
	__be32 src[4]; /* with XLB_CAPTURE_F_SRC: client source addr & src_mask == src */
	__be32 src_mask[4];
	__u8 backend_family;
	__u8 src_family;
	__u8 pad[6];
};
XLB_STATIC_ASSERT(sizeof(struct xlb_capture_filter) == 72, "xlb_capture_filter layout");
#define XLB_CAPTURE_F_VIP (1U << 0)
#define XLB_CAPTURE_F_BACKEND (1U << 1)
#define XLB_CAPTURE_F_SRC (1U << 2)
#define XLB_CAPTURE_NO_VIP 0xffffffffU /* vip_id when the packet met no VIP */

struct xlb_capture_record {
	__u64 time_ns; /* bpf_ktime_get_ns: CLOCK_MONOTONIC */
	__u32 ifindex; /* the interface the packet arrived on */
	__u32 len; /* the packet's whole length */
	__u32 caplen; /* bytes of it in data */
	__u32 vip_id; /* with XLB_CAPTURE_F_VIP set in flags */
	__u8 outcome; /* enum xlb_outcome */
	__u8 direction; /* enum xlb_capture_direction */
	__u8 flags; /* XLB_CAPTURE_F_VIP: vip_id is known */
	__u8 pad[5];
	/* then the data: XLB_CAPTURE_DATA_SMALL or XLB_CAPTURE_DATA_MAX bytes
	 * reserved, caplen of them kept */
};
XLB_STATIC_ASSERT(sizeof(struct xlb_capture_record) == 32, "xlb_capture_record layout");

struct xlb_backend_stats {
	__u64 packets;
	__u64 bytes;
	/* Connections started towards the backend: TCP SYNs, and packets of
	 * other protocols that found no entry in the table (a ring choice; a
	 * VIP without a connection table has no flows to count but its TCP
	 * SYNs). A TCP packet without SYN that finds no entry (the handshake's
	 * ACK, a flow moved from another host) is not counted: its connection
	 * was, or began elsewhere. */
	__u64 new_flows;
};
XLB_STATIC_ASSERT(sizeof(struct xlb_backend_stats) == 24, "xlb_backend_stats layout");

/* Decapsulator: addresses of this backend; outer packets to them are stripped. */
#define XLB_MAP_DECAP_ADDRS "xlb_decap_addrs"
#define XLB_DECAP_ADDRS_MAX 64

struct xlb_decap_addr {
	__be32 addr[4];
	__u8 family;
	__u8 pad[3];
};
XLB_STATIC_ASSERT(sizeof(struct xlb_decap_addr) == 20, "xlb_decap_addr layout");

enum xlb_decap_outcome {
	XLB_DECAP_OUT_DECAPSULATED = 0,
	XLB_DECAP_OUT_PASS_NOT_ENCAP = 1, /* not IPIP/IP6IP6/GUE data, or not for us */
	XLB_DECAP_OUT_PASS_MALFORMED = 2, /* let the kernel judge it */
	XLB_DECAP_OUT_PASS_FRAGMENT = 3, /* outer fragment: the kernel reassembles */
	XLB_DECAP_OUT_DROP_HEADROOM = 4,
	/* a second-chance hint for a flow this host does not know: sent on */
	XLB_DECAP_OUT_PASSED_ON = 5,
	/* the same, but no next hop is set to send it on: decapsulated */
	XLB_DECAP_OUT_DECAPSULATED_NO_NEXT_HOP = 6,
	/* a cookie ACK (struct xlb_gue_cookie), decapsulated, its cookie data
	 * left in XLB_MAP_COOKIE_ACKS for the tc program that accepts it */
	XLB_DECAP_OUT_DECAPSULATED_COOKIE = 7,
	/* a cookie ACK and no tc program to accept it: dropped */
	XLB_DECAP_OUT_DROP_COOKIE_NO_ACCEPTOR = 8,
	XLB_DECAP_OUT__MAX = 9,
};
#define XLB_MAP_DECAP_STATS "xlb_decap_stats"
/* Packets passed on, per hinted backend address (an LRU per-CPU hash of
 * struct xlb_decap_addr -> __u64). */
#define XLB_MAP_DECAP_PASSED "xlb_decap_pass"
#define XLB_DECAP_PASSED_MAX 1024

/*
 * The backend's cookie acceptor (bpf/xlb_cookie.bpf.c), a tc ingress program
 * beside xlb_decap: an ACK that xlb_decap decapsulated from GUE with a struct
 * xlb_gue_cookie is handed to its listener as a request socket built from
 * that data (kfunc bpf_sk_assign_tcp_reqsk). The data travels from XDP to tc
 * in XLB_MAP_COOKIE_ACKS, keyed by the inner packet's addresses and ports:
 * XDP metadata would be the natural carrier, but this kernel refuses
 * bpf_xdp_adjust_meta to XDP programs (measured), and tc may run on another
 * CPU than XDP (RPS). XLB_MAP_COOKIE_PENDING counts the entries written and
 * not yet taken, so that tc looks up the table only while there are some.
 * xlb_decap drops cookie ACKs (XLB_DECAP_OUT_DROP_COOKIE_NO_ACCEPTOR) unless
 * its loader said an acceptor is attached (its global `xlb_cookie_acceptor`).
 */
struct xlb_cookie_ack_key {
	__be32 saddr[4]; /* the client's address (IPv4: the first word) */
	__be32 daddr[4]; /* the VIP */
	__be16 sport;
	__be16 dport;
	__u8 family; /* XLB_FAMILY_V4 or XLB_FAMILY_V6 */
	__u8 pad[3];
};
XLB_STATIC_ASSERT(sizeof(struct xlb_cookie_ack_key) == 40, "xlb_cookie_ack_key layout");
#define XLB_MAP_COOKIE_ACKS "xlb_cookie_acks" /* LRU hash: key -> struct xlb_gue_cookie */
#define XLB_COOKIE_ACKS_MAX 16384
#define XLB_MAP_COOKIE_PENDING "xlb_cookie_pending" /* one __u64, changed atomically */

/* Outcomes of the cookie acceptor, per-CPU counters in its own map; packets
 * that are not cookie ACKs pass uncounted. Never renumber. */
enum xlb_cookie_outcome {
	/* a request socket was built: the kernel completes the handshake */
	XLB_COOKIE_OUT_ASSIGNED = 0,
	/* the flow has a socket already (e.g. the ACK came again): passed untouched */
	XLB_COOKIE_OUT_PASS_ESTABLISHED = 1,
	/* no socket listens on the ACK's address and port: passed (the kernel resets) */
	XLB_COOKIE_OUT_PASS_NO_LISTENER = 2,
	/* cookie data for a packet that is not a plain TCP ACK: passed to the kernel */
	XLB_COOKIE_OUT_PASS_NOT_ACK = 3,
	/* the kernel refused the request socket (attributes, memory): dropped */
	XLB_COOKIE_OUT_DROP_ASSIGN_FAILED = 4,
	XLB_COOKIE_OUT__MAX = 5,
};
#define XLB_MAP_COOKIE_STATS "xlb_cookie_stats"

/*
 * Probes through the data path (health checks with via_vip). The agent's
 * probe socket connects to VIP:port with SO_MARK = XLB_PROBE_MARK_BASE |
 * backend_id; the tc egress program xlb_probe (bpf/xlb_probe.bpf.c) on the
 * LB's interface encapsulates every packet whose mark has the tag
 * (mark & XLB_PROBE_MARK_TAG_MASK) == XLB_PROBE_MARK_BASE towards the backend
 * xlb_backends[mark & XLB_PROBE_MARK_ID_MASK], exactly as xlb_lb encapsulates
 * client traffic. A marked packet whose backend slot is unused (generation 0)
 * or out of range is dropped, never sent to the VIP by other means. Unmarked
 * packets (and marks without the tag) pass untouched. Backend ids above
 * XLB_PROBE_MARK_ID_MASK cannot be probed this way.
 */
#define XLB_PROBE_MARK_BASE 0x78000000U /* tag 'x' in the top byte */
#define XLB_PROBE_MARK_TAG_MASK 0xff000000U
#define XLB_PROBE_MARK_ID_MASK 0x00ffffffU
XLB_STATIC_ASSERT((XLB_PROBE_MARK_BASE & XLB_PROBE_MARK_ID_MASK) == 0, "probe mark layout");
XLB_STATIC_ASSERT((XLB_PROBE_MARK_TAG_MASK ^ XLB_PROBE_MARK_ID_MASK) == 0xffffffffU,
		  "probe mark layout");

/* Outcomes of xlb_probe, per-CPU counters in its own map. Never renumber. */
enum xlb_probe_outcome {
	XLB_PROBE_OUT_ENCAPSULATED = 0, /* marked, sent encapsulated to its backend */
	XLB_PROBE_OUT_PASS_UNMARKED = 1, /* not a probe: untouched */
	XLB_PROBE_OUT_DROP_NO_CONFIG = 2, /* agent has not configured xlb_config */
	XLB_PROBE_OUT_DROP_NO_BACKEND = 3, /* backend id unused or out of range */
	XLB_PROBE_OUT_DROP_FAMILY = 4, /* IPv6 probe to an IPv4 backend */
	XLB_PROBE_OUT_DROP_MALFORMED = 5, /* not IPv4/IPv6, truncated, fragment */
	XLB_PROBE_OUT_DROP_TOO_BIG = 6, /* too big for the MTU once encapsulated */
	XLB_PROBE_OUT_DROP_ADJUST = 7, /* bpf_skb_adjust_room / pull failed */
	XLB_PROBE_OUT__MAX = 8,
};
#define XLB_MAP_PROBE_STATS "xlb_probe_stats"

#endif /* XLB_ABI_H */
