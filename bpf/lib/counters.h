/* SPDX-License-Identifier: Apache-2.0 */
/* Per-CPU outcome counters: each program keeps an array indexed by its own
 * outcome enum and counts every packet in exactly one entry. */
#ifndef XLB_BPF_COUNTERS_H
#define XLB_BPF_COUNTERS_H

#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

/* Declares a program's outcome counters: a per-CPU array with one slot per
 * outcome, read by the agent (per-CPU summed) for metrics and `xlbctl stats`. */
#define XLB_OUTCOME_COUNTERS(name, outcomes)             \
	struct {                                         \
		__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY); \
		__uint(max_entries, outcomes);           \
		__type(key, __u32);                      \
		__type(value, __u64);                    \
	} name SEC(".maps")

/* Counts `outcome` in the per-CPU array `counters` and returns `action`, so
 * that a verdict is counted where it is returned. */
static __always_inline int xlb_count_outcome(void *counters, __u32 outcome, int action)
{
	__u64 *count = bpf_map_lookup_elem(counters, &outcome);

	if (count)
		*count += 1;
	return action;
}

#endif /* XLB_BPF_COUNTERS_H */
