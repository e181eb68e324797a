/* SPDX-License-Identifier: Apache-2.0 */
/*
 * xlb_probe: tc egress on the LB's interface. Health probes through the data
 * path: the agent's probe socket connects to VIP:port with
 * SO_MARK = XLB_PROBE_MARK_BASE | backend_id (include/xlb/abi.h), and this
 * program encapsulates each such packet towards that backend with the same
 * outer headers xlb_lb writes for client traffic (lib/encap.h): backend
 * address and family from xlb_backends, outer source from xlb_config, TOS and
 * DF copied from the inner packet, TTL XLB_ENCAP_TTL, outer Ethernet
 * destination the configured next hop. The backend decapsulates, answers from
 * the VIP straight to the prober, and xlb_lb passes that reply to the kernel
 * (its destination is not a VIP). A backend whose decapsulation or VIP
 * binding is broken therefore fails the probe.
 *
 * Unmarked packets: TC_ACT_OK, untouched. A marked packet that cannot be
 * encapsulated (unused backend, no configuration, ...) is dropped: a probe
 * must never reach the VIP's real owner by other means.
 *
 * xlb_backends and xlb_config are the balancer's own maps: the loader reuses
 * xlb_lb's map descriptors (bpf_map__reuse_fd) before load.
 */
#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/in.h>
#include <linux/ip.h>
#include <linux/ipv6.h>
#include <linux/pkt_cls.h>
#include <bpf/bpf_endian.h>
#include <bpf/bpf_helpers.h>

#include "xlb/abi.h"
#include "xlb/flow_hash.h"
#include "lib/counters.h"
#include "lib/csum.h"
#include "lib/encap.h"
#include "lib/shared_maps.h"
#include "lib/parse.h"

char LICENSE[] SEC("license") = "Dual BSD/GPL";

XLB_OUTCOME_COUNTERS(xlb_probe_stats, XLB_PROBE_OUT__MAX);

static __always_inline int xlb_probe_outcome(enum xlb_probe_outcome outcome, int action)
{
	return xlb_count_outcome(&xlb_probe_stats, outcome, action);
}

/* Parses the probe's IP packet and L4 ports into pkt. 0 or -1 (malformed). */
static __always_inline int xlb_probe_parse(struct __sk_buff *skb, struct xlb_packet *pkt)
{
	void *data = (void *)(long)skb->data;
	void *data_end = (void *)(long)skb->data_end;
	struct xlb_cursor cur = { .pos = data, .end = data_end, .ip_end = data_end };
	struct ethhdr *eth = data;
	int proto;

	if ((void *)(eth + 1) > data_end)
		return -1;
	cur.pos = eth + 1;
	if (eth->h_proto == bpf_htons(ETH_P_IP))
		proto = xlb_parse_ipv4(&cur, pkt);
	else if (eth->h_proto == bpf_htons(ETH_P_IPV6))
		proto = xlb_parse_ipv6(&cur, pkt);
	else
		return -1;
	if (proto < 0)
		return -1;
	/* TCP/UDP ports feed the hash; other protocols are carried as they are. */
	if (xlb_parse_l4(&cur, pkt, proto) == -XLB_OUT_DROP_MALFORMED_L4)
		return -1;
	return 0;
}

SEC("tc")
int xlb_probe(struct __sk_buff *skb)
{
	struct xlb_packet pkt = {};
	struct xlb_backend *be;
	struct xlb_config *cfg;
	struct ethhdr *eth;
	void *data, *data_end;
	__u32 mark = skb->mark;
	__u32 zero = 0, id, overhead, hash;
	__u64 flags;

	if ((mark & XLB_PROBE_MARK_TAG_MASK) != XLB_PROBE_MARK_BASE)
		return xlb_probe_outcome(XLB_PROBE_OUT_PASS_UNMARKED, TC_ACT_OK);

	cfg = bpf_map_lookup_elem(&xlb_config, &zero);
	if (!cfg || cfg->magic != XLB_CONFIG_MAGIC || cfg->version != XLB_CONFIG_VERSION)
		return xlb_probe_outcome(XLB_PROBE_OUT_DROP_NO_CONFIG, TC_ACT_SHOT);
	/* Live the way xlb_lb takes a backend from a ring: a used slot. */
	id = mark & XLB_PROBE_MARK_ID_MASK;
	be = bpf_map_lookup_elem(&xlb_backends, &id);
	if (!be || be->generation == 0 ||
	    (be->family != XLB_FAMILY_V4 && be->family != XLB_FAMILY_V6))
		return xlb_probe_outcome(XLB_PROBE_OUT_DROP_NO_BACKEND, TC_ACT_SHOT);

	/* The whole IP packet must be readable for the parser's length checks. */
	if (bpf_skb_pull_data(skb, skb->len))
		return xlb_probe_outcome(XLB_PROBE_OUT_DROP_ADJUST, TC_ACT_SHOT);
	if (xlb_probe_parse(skb, &pkt))
		return xlb_probe_outcome(XLB_PROBE_OUT_DROP_MALFORMED, TC_ACT_SHOT);
	if (be->family == XLB_FAMILY_V4 && pkt.key.family != XLB_FAMILY_V4)
		return xlb_probe_outcome(XLB_PROBE_OUT_DROP_FAMILY, TC_ACT_SHOT);
	overhead = xlb_encap_overhead(be, cfg, NULL);
	/* A GSO packet is cut to the MTU after us; judge only single packets. */
	if (!skb->gso_size && pkt.ip_len + overhead > cfg->mtu)
		return xlb_probe_outcome(XLB_PROBE_OUT_DROP_TOO_BIG, TC_ACT_SHOT);

	/* Probes have no VIP flags: the plain 5-tuple hash picks the outer
	 * source within the prefix (and the IPv6 flow label). */
	hash = xlb_flow_hash(&pkt.key, cfg->hash_seed);
	flags = be->family == XLB_FAMILY_V4 ? BPF_F_ADJ_ROOM_ENCAP_L3_IPV4
					    : BPF_F_ADJ_ROOM_ENCAP_L3_IPV6;
	/* With GUE the kernel must know where the inner packet starts (after
	 * UDP and the GUE header) to segment a GSO probe. */
	if (xlb_gue(cfg))
		flags |= BPF_F_ADJ_ROOM_ENCAP_L4_UDP |
			 BPF_F_ADJ_ROOM_ENCAP_L2(sizeof(struct xlb_guehdr));
	if (bpf_skb_adjust_room(skb, overhead, BPF_ADJ_ROOM_MAC, flags))
		return xlb_probe_outcome(XLB_PROBE_OUT_DROP_ADJUST, TC_ACT_SHOT);

	data = (void *)(long)skb->data;
	data_end = (void *)(long)skb->data_end;
	eth = data;
	if (be->family == XLB_FAMILY_V4) {
		struct iphdr *outer = data + sizeof(*eth);

		/* Room for UDP and GUE: with IP-in-IP the inner IP header
		 * is there, so one check serves both. */
		if ((void *)(outer + 1) + XLB_GUE_OVERHEAD > data_end)
			return xlb_probe_outcome(XLB_PROBE_OUT_DROP_ADJUST, TC_ACT_SHOT);
		eth->h_proto = bpf_htons(ETH_P_IP);
		xlb_fill_outer_v4(outer, &pkt, be, cfg, hash, 0);
		if (xlb_gue(cfg))
			xlb_fill_gue((void *)(outer + 1), &pkt, cfg, hash, NULL, 0);
	} else {
		struct ipv6hdr *outer = data + sizeof(*eth);

		if ((void *)(outer + 1) + XLB_GUE_OVERHEAD > data_end)
			return xlb_probe_outcome(XLB_PROBE_OUT_DROP_ADJUST, TC_ACT_SHOT);
		eth->h_proto = bpf_htons(ETH_P_IPV6);
		xlb_fill_outer_v6(outer, &pkt, be, cfg, hash, 0);
		if (xlb_gue(cfg))
			xlb_fill_gue((void *)(outer + 1), &pkt, cfg, hash, NULL, 0);
	}
	/* Our own MAC stays the source; the next hop is the configured one. */
	__builtin_memcpy(eth->h_dest, cfg->next_hop_mac, ETH_ALEN);
	return xlb_probe_outcome(XLB_PROBE_OUT_ENCAPSULATED, TC_ACT_OK);
}
