/* SPDX-License-Identifier: Apache-2.0 */
/* Internet checksums for headers the balancer writes itself. */
#ifndef XLB_BPF_CSUM_H
#define XLB_BPF_CSUM_H

#include <linux/ip.h>
#include <linux/types.h>
#include <bpf/bpf_helpers.h>

static __always_inline __u16 xlb_csum_fold(__u32 sum)
{
	sum = (sum & 0xffff) + (sum >> 16);
	sum = (sum & 0xffff) + (sum >> 16);
	return (__u16)~sum;
}

/* Adds `words` 16-bit words at p (a constant count) to a checksum sum. */
static __always_inline __u32 xlb_csum_add_words(const void *p, int words, __u32 sum)
{
	const __u16 *w = p;

#pragma unroll
	for (int i = 0; i < words; i++)
		sum += w[i];
	return sum;
}

/* Header checksum of an option-less IPv4 header (the outer header we build). */
static __always_inline void xlb_ipv4_set_csum(struct iphdr *iph)
{
	const __u16 *word = (const __u16 *)iph;
	__u32 sum = 0;

	iph->check = 0;
#pragma unroll
	for (int i = 0; i < (int)(sizeof(*iph) / 2); i++)
		sum += word[i];
	iph->check = xlb_csum_fold(sum);
}

#endif /* XLB_BPF_CSUM_H */
