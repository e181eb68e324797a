/* SPDX-License-Identifier: Apache-2.0 */
/* Per-CPU outcome counters: every packet ends in exactly one of them. */
#ifndef XLB_BPF_STATS_H
#define XLB_BPF_STATS_H

#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>
#include "xlb/abi.h"
#include "counters.h"

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, XLB_OUT__MAX);
	__type(key, __u32);
	__type(value, __u64);
} xlb_stats SEC(".maps");

/* Count the outcome and return the XDP action to take for it. */
static __always_inline int xlb_outcome(enum xlb_outcome outcome, int action)
{
	return xlb_count_outcome(&xlb_stats, outcome, action);
}

#endif /* XLB_BPF_STATS_H */
