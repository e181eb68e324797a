/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Every map of xlb_lb, and the globals the agent writes into it, in one
 * place: what the program reads and writes besides the packet. The maps
 * shared with xlb_probe are in shared_maps.h, the outcome counters in
 * stats.h; the capture's filter and flag in capture.h (a section of their
 * own). Map names and layouts are the ABI (include/xlb/abi.h): a changed
 * layout gets a new map name.
 */
#ifndef XLB_BPF_MAPS_H
#define XLB_BPF_MAPS_H

#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

#include "xlb/abi.h"
#include "xlb/ct_set.h"
#include "shared_maps.h"
#include "stats.h"

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

/* abi.h, layout 5: the header, the buckets' lines, the records. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, XLB_CT_ELEMENTS(XLB_CONNTRACK_DEFAULT));
	__uint(map_flags, BPF_F_MMAPABLE);
	__type(key, __u32);
	__type(value, struct xlb_ct_line);
} xlb_conntrack5 SEC(".maps");

/* Scratch space of a connection-table insert: the two buckets' metas
 * (ct_set.h, xlb_ct_place) do not fit the program's stack. Never pinned. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct xlb_ct_place_state);
} xlb_ct_scratch SEC(".maps");

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
/* XLB_SYN_FLOOD_* (abi.h): written by the agent's SYN flood detector. */
volatile __u32 xlb_syn_flood;

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
} xlb_backend_stats2 SEC(".maps");

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
} xlb_vip_drops2 SEC(".maps");

/* Per VIP: SYN cookies (abi.h, struct xlb_vip_cookie_stats). */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, XLB_MAX_VIPS_DEFAULT);
	__type(key, __u32);
	__type(value, struct xlb_vip_cookie_stats);
} xlb_vip_cookies SEC(".maps");

/* Per-VIP source lists (abi.h, struct xlb_src_range_key). */
struct {
	__uint(type, BPF_MAP_TYPE_LPM_TRIE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__uint(max_entries, XLB_SOURCE_RANGES_DEFAULT);
	__type(key, struct xlb_src_range_key);
	__type(value, __u8);
} xlb_src_ranges SEC(".maps");

/* Capture's records (abi.h, struct xlb_capture_record; lib/capture.h). */
struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, XLB_CAPTURE_RING_BYTES);
} xlb_capture_ring SEC(".maps");

#endif /* XLB_BPF_MAPS_H */
