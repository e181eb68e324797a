/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Where a flow goes in the set-associative connection table (abi.h, struct
 * xlb_ct_set): its set and, on an insert, the way it takes. Compiled into the
 * XDP program and into userspace (bpf::ConntrackTable, which copies entries
 * on an upgrade and writes them in tests), so both place a flow alike.
 */
#ifndef XLB_CT_SET_H
#define XLB_CT_SET_H

#include <linux/types.h>
#include "abi.h"
#include "flow_hash.h"

/* The set of a flow: element 1..sets of the table, from the table's own
 * secret seed. The multiply and shift maps the hash onto any number of sets
 * without a division. */
XLB_HASH_INLINE __u32 xlb_ct_set_index(const struct xlb_flow_key *key, __u32 seed, __u32 sets)
{
	return 1 + (__u32)(((__u64)xlb_flow_hash(key, seed) * sets) >> 32);
}

/* The way an insert of a flow not in the set takes: an empty one, else the
 * one seen longest ago (`now` and last_seen in XLB_CT_TIME_SHIFT units). */
XLB_HASH_INLINE __u32 xlb_ct_victim(const struct xlb_ct_set *set, __u32 now)
{
	__u32 victim = 0, longest = 0;

	for (__u32 w = 0; w < XLB_CT_WAYS; w++) {
		__s32 idle;

		if (set->key[w].family == 0)
			return w;
		idle = (__s32)(now - set->value[w].last_seen);
		if (idle < 0)
			idle = 0; /* refreshed after the clock was read */
		if ((__u32)idle >= longest) {
			longest = (__u32)idle;
			victim = w;
		}
	}
	return victim;
}

#endif /* XLB_CT_SET_H */
