/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The maps every program of the load balancer's host shares: xlb_lb defines
 * them, xlb_probe reuses xlb_lb's (bpf_map__reuse_fd), which needs the very
 * same definitions. One copy here keeps them so.
 */
#ifndef XLB_BPF_SHARED_MAPS_H
#define XLB_BPF_SHARED_MAPS_H

#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

#include "xlb/abi.h"

/* XLB_MAP_CONFIG: the data path's settings, one entry. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct xlb_config);
} xlb_config SEC(".maps");

/* XLB_MAP_BACKENDS: backends by id. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, XLB_MAX_BACKENDS_DEFAULT);
	__type(key, __u32);
	__type(value, struct xlb_backend);
} xlb_backends SEC(".maps");

#endif
