/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The maps a cookie ACK's data crosses from xlb_decap (XDP) to the cookie
 * acceptor (tc), defined once for both objects; CookieProgram::load makes
 * the acceptor share xlb_decap's (abi.h, XLB_MAP_COOKIE_ACKS).
 */
#ifndef XLB_BPF_COOKIE_MAPS_H
#define XLB_BPF_COOKIE_MAPS_H

#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>
#include "xlb/abi.h"

/* Cookie ACKs decapsulated and not yet taken by the acceptor. */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, XLB_COOKIE_ACKS_MAX);
	__type(key, struct xlb_cookie_ack_key);
	__type(value, struct xlb_gue_cookie);
} xlb_cookie_acks SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u64);
} xlb_cookie_pending SEC(".maps");

#endif /* XLB_BPF_COOKIE_MAPS_H */
