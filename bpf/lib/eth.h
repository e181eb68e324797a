/* SPDX-License-Identifier: Apache-2.0 */
/* Ethernet addresses of a frame this host sends on to its next hop. */
#ifndef XLB_BPF_ETH_H
#define XLB_BPF_ETH_H

#include <linux/if_ether.h>
#include <linux/types.h>
#include <bpf/bpf_helpers.h>

/*
 * Addresses `eth` from our_mac to next_hop. Both are read before anything is
 * written, so our_mac may be eth's own destination or lie in a header the
 * frame is moving away from. In 16-bit words rather than memcpy: clang cannot
 * know the frame's alignment and would move the 12 bytes one at a time (every
 * MAC here is 2-byte aligned).
 */
static __always_inline void xlb_set_macs(struct ethhdr *eth, const void *our_mac,
					 const volatile void *next_hop)
{
	const __u16 *ours = our_mac;
	const volatile __u16 *hop = next_hop;
	__u16 *dst = (__u16 *)eth->h_dest, *src = (__u16 *)eth->h_source;
	__u16 ours0 = ours[0], ours1 = ours[1], ours2 = ours[2];
	__u16 hop0 = hop[0], hop1 = hop[1], hop2 = hop[2];

	dst[0] = hop0;
	dst[1] = hop1;
	dst[2] = hop2;
	src[0] = ours0;
	src[1] = ours1;
	src[2] = ours2;
}

#endif /* XLB_BPF_ETH_H */
