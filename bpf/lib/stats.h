/* SPDX-License-Identifier: Apache-2.0 */
/* Per-CPU outcome counters: every packet ends in exactly one of them. */
#ifndef XLB_BPF_STATS_H
#define XLB_BPF_STATS_H

#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>
#include "xlb/abi.h"
#include "counters.h"

XLB_OUTCOME_COUNTERS(xlb_stats, XLB_OUT__MAX);

/* Count the outcome and return the XDP action to take for it. */
static __always_inline int xlb_outcome(enum xlb_outcome outcome, int action)
{
	return xlb_count_outcome(&xlb_stats, outcome, action);
}

#endif /* XLB_BPF_STATS_H */
