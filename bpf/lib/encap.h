/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Encapsulation towards a backend: IP-in-IP (IPv4-in-IPv4, IPv4-in-IPv6 and
 * IPv6-in-IPv6) or, with XLB_CFG_F_GUE, the same three inside UDP and a GUE
 * header (abi.h, struct xlb_guehdr). The inner IP packet is never touched.
 * The outer Ethernet header goes from this host (the frame's old destination
 * MAC) to the configured next hop.
 *
 * The outer UDP checksum is 0: allowed over IPv4, and over IPv6 for tunnels
 * (RFC 6935/6936), which is what GUE is; the inner packet keeps its own
 * checksums end to end. Computing it would mean summing the whole packet.
 *
 * xlb_fill_outer_v4/v6 write the outer IP header alone; the XDP balancer
 * (xlb_push_encap below) and the tc probe encapsulator (xlb_probe.bpf.c,
 * after bpf_skb_adjust_room) both use them, so a probe through the data path
 * carries exactly the outer header client traffic does.
 *
 * Outer header choices: TTL/hop limit XLB_ENCAP_TTL; TOS/traffic class copied
 * from the inner packet; IPv4 DF copied from the inner packet (so path-MTU
 * discovery keeps working end to end) and ID 0; IPv6 flow label from the flow
 * hash, so ECMP between the LB and the backend keeps a flow on one path.
 */
#ifndef XLB_BPF_ENCAP_H
#define XLB_BPF_ENCAP_H

#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/in.h>
#include <linux/ip.h>
#include <linux/ipv6.h>
#include <linux/udp.h>
#include <bpf/bpf_endian.h>
#include <bpf/bpf_helpers.h>
#include "xlb/abi.h"
#include "csum.h"
#include "eth.h"
#include "parse.h"

#ifndef IPPROTO_IPV6
#define IPPROTO_IPV6 41
#endif

/* Outer source inside the configured prefix: host bits (the low 32 at most)
 * from the flow hash. */
static __always_inline __be32 xlb_derive_src32(__be32 base, __u32 host_bits, __u32 hash)
{
	__u32 host_mask;

	if (host_bits == 0)
		return base;
	host_mask = host_bits >= 32 ? 0xffffffffU : ((1U << host_bits) - 1);
	return bpf_htonl((bpf_ntohl(base) & ~host_mask) | (hash & host_mask));
}

/* Writes the outer Ethernet header at the (already moved) start of the frame.
 * old_eth is where the original Ethernet header now sits. */
static __always_inline void xlb_write_eth(struct ethhdr *eth, const struct ethhdr *old_eth,
					  const struct xlb_config *cfg, __u16 proto)
{
	xlb_set_macs(eth, old_eth->h_dest, cfg->next_hop_mac);
	eth->h_proto = bpf_htons(proto);
}

static __always_inline int xlb_gue(const struct xlb_config *cfg)
{
	return (cfg->flags & XLB_CFG_F_GUE) != 0;
}

/* The inner packet as an IP payload: protocol 4 (IPv4) or 41 (IPv6), named
 * by the outer header with IP-in-IP and by the GUE header with GUE. */
static __always_inline __u8 xlb_ip_in_ip_proto(const struct xlb_packet *pkt)
{
	return pkt->key.family == XLB_FAMILY_V4 ? IPPROTO_IPIP : IPPROTO_IPV6;
}

/* The UDP and GUE headers at `udp`, in front of the inner packet, and with
 * hint_len > 0 (a constant: XLB_GUE_HINT_LEN of the hinted backend's family)
 * a second-chance hint naming `hint` as GUE private data (abi.h, struct
 * xlb_gue_hint). The caller has bounds-checked XLB_GUE_OVERHEAD + hint_len
 * bytes. */
static __always_inline void xlb_fill_gue(struct udphdr *udp, const struct xlb_packet *pkt,
					 const struct xlb_config *cfg, __u32 hash,
					 const struct xlb_backend *hint, __u32 hint_len)
{
	struct xlb_guehdr *gue = (void *)(udp + 1);

	udp->source = bpf_htons(XLB_GUE_SPORT(hash));
	udp->dest = bpf_htons(cfg->gue_port);
	udp->len = bpf_htons(pkt->ip_len + XLB_GUE_OVERHEAD + hint_len);
	udp->check = 0;
	gue->ver_c_hlen = hint_len / 4;
	gue->proto = xlb_ip_in_ip_proto(pkt);
	gue->flags = 0;
	if (hint_len > 0 && hint) {
		struct xlb_gue_hint *h = (void *)(gue + 1);

		h->magic = XLB_GUE_HINT_MAGIC;
		h->state = XLB_GUE_HINT_PASS_ON;
		h->family = hint->family;
		h->pad = 0;
		__builtin_memcpy(h->addr, hint->addr, hint_len - 4);
	}
}

/* Outer header bytes after the outer IP header: 0, or UDP + GUE. */
static __always_inline __u32 xlb_tunnel_len(const struct xlb_config *cfg)
{
	return xlb_gue(cfg) ? XLB_GUE_OVERHEAD : 0;
}

/*
 * The outer headers, shared by the XDP balancer (xlb_lb) and the tc probe
 * encapsulator (xlb_probe): the caller has made room and bounds-checked
 * outer; nothing else is read or written. pkt describes the inner packet;
 * hint_len: the bytes of a second-chance hint behind the GUE header, or 0.
 */
static __always_inline void xlb_fill_outer_v4(struct iphdr *outer, const struct xlb_packet *pkt,
					      const struct xlb_backend *be,
					      const struct xlb_config *cfg, __u32 hash,
					      __u32 hint_len)
{
	outer->version = 4;
	outer->ihl = 5;
	outer->tos = pkt->tos;
	outer->tot_len = bpf_htons(pkt->ip_len + sizeof(*outer) + xlb_tunnel_len(cfg) + hint_len);
	outer->id = 0;
	outer->frag_off = pkt->df ? bpf_htons(IP_DF) : 0;
	outer->ttl = XLB_ENCAP_TTL;
	outer->protocol = xlb_gue(cfg) ? IPPROTO_UDP : IPPROTO_IPIP;
	outer->saddr = xlb_derive_src32(
		cfg->src_v4, 32 - (cfg->src_v4_prefix_len > 32 ? 32 : cfg->src_v4_prefix_len),
		hash);
	outer->daddr = be->addr[0];
	xlb_ipv4_set_csum(outer);
}

static __always_inline void xlb_fill_outer_v6(struct ipv6hdr *outer, const struct xlb_packet *pkt,
					      const struct xlb_backend *be,
					      const struct xlb_config *cfg, __u32 hash,
					      __u32 hint_len)
{
	__u32 payload_len = pkt->ip_len + xlb_tunnel_len(cfg) + hint_len;
	__u32 host_bits;
	__u32 flow_label = hash & 0xfffff;

	outer->version = 6;
	outer->priority = pkt->tos >> 4;
	outer->flow_lbl[0] = ((pkt->tos & 0x0f) << 4) | ((flow_label >> 16) & 0x0f);
	outer->flow_lbl[1] = (flow_label >> 8) & 0xff;
	outer->flow_lbl[2] = flow_label & 0xff;
	outer->payload_len = bpf_htons(payload_len);
	outer->nexthdr = xlb_gue(cfg) ? IPPROTO_UDP : xlb_ip_in_ip_proto(pkt);
	outer->hop_limit = XLB_ENCAP_TTL;
	__builtin_memcpy(&outer->saddr, cfg->src_v6, 16);
	host_bits = 128 - (cfg->src_v6_prefix_len > 128 ? 128 : cfg->src_v6_prefix_len);
	if (host_bits > 32)
		host_bits = 32;
	outer->saddr.in6_u.u6_addr32[3] = xlb_derive_src32(cfg->src_v6[3], host_bits, hash);
	__builtin_memcpy(&outer->daddr, be->addr, 16);
}

/* Bytes the outer headers add for this backend, with a second-chance hint
 * naming `hint` (or NULL: none). */
static __always_inline __u32 xlb_encap_overhead(const struct xlb_backend *be,
						const struct xlb_config *cfg,
						const struct xlb_backend *hint)
{
	return (be->family == XLB_FAMILY_V4 ? sizeof(struct iphdr) : sizeof(struct ipv6hdr)) +
	       xlb_tunnel_len(cfg) + (hint ? XLB_GUE_HINT_LEN(hint->family) : 0);
}

/*
 * Makes room for outer headers of outer_len bytes in front of the frame's
 * IP packet and writes the outer Ethernet header (ethertype proto). Returns
 * where the outer IP header goes, bounds-checked for outer_len bytes, or NULL
 * when the headroom is missing. outer_len is a constant at every call.
 */
static __always_inline void *xlb_push_outer(struct xdp_md *ctx, const struct xlb_config *cfg,
					    __u32 outer_len, __u16 proto)
{
	struct ethhdr *eth, *old_eth;
	void *data, *data_end;

	if (bpf_xdp_adjust_head(ctx, -(int)outer_len))
		return NULL;
	data = (void *)(long)ctx->data;
	data_end = (void *)(long)ctx->data_end;
	eth = data;
	old_eth = data + outer_len;
	/* the old Ethernet header ends where the outer IP header does */
	if ((void *)(old_eth + 1) > data_end)
		return NULL;

	xlb_write_eth(eth, old_eth, cfg, proto);
	return eth + 1;
}

/* Returns 0 or -outcome. On success the frame is the encapsulated packet,
 * its outer header of the backend's family. hint: the backend a
 * second-chance hint names (GUE only, of be's family), or NULL. */
static __always_inline int xlb_push_encap(struct xdp_md *ctx, const struct xlb_packet *pkt,
					  const struct xlb_backend *be,
					  const struct xlb_config *cfg, __u32 hash,
					  const struct xlb_backend *hint)
{
	const __u32 v4 = sizeof(struct iphdr), v6 = sizeof(struct ipv6hdr);
	const __u32 hint4 = XLB_GUE_HINT_LEN(XLB_FAMILY_V4),
		    hint6 = XLB_GUE_HINT_LEN(XLB_FAMILY_V6);
	void *outer;

	/* One branch per shape, so that every length pushed is a constant. */
	if (be->family == XLB_FAMILY_V4 && !xlb_gue(cfg)) {
		outer = xlb_push_outer(ctx, cfg, v4, ETH_P_IP);
		if (outer)
			xlb_fill_outer_v4(outer, pkt, be, cfg, hash, 0);
	} else if (be->family == XLB_FAMILY_V4 && !hint) {
		outer = xlb_push_outer(ctx, cfg, v4 + XLB_GUE_OVERHEAD, ETH_P_IP);
		if (outer) {
			xlb_fill_outer_v4(outer, pkt, be, cfg, hash, 0);
			xlb_fill_gue(outer + v4, pkt, cfg, hash, NULL, 0);
		}
	} else if (be->family == XLB_FAMILY_V4) {
		outer = xlb_push_outer(ctx, cfg, v4 + XLB_GUE_OVERHEAD + hint4, ETH_P_IP);
		if (outer) {
			xlb_fill_outer_v4(outer, pkt, be, cfg, hash, hint4);
			xlb_fill_gue(outer + v4, pkt, cfg, hash, hint, hint4);
		}
	} else if (!xlb_gue(cfg)) {
		outer = xlb_push_outer(ctx, cfg, v6, ETH_P_IPV6);
		if (outer)
			xlb_fill_outer_v6(outer, pkt, be, cfg, hash, 0);
	} else if (!hint) {
		outer = xlb_push_outer(ctx, cfg, v6 + XLB_GUE_OVERHEAD, ETH_P_IPV6);
		if (outer) {
			xlb_fill_outer_v6(outer, pkt, be, cfg, hash, 0);
			xlb_fill_gue(outer + v6, pkt, cfg, hash, NULL, 0);
		}
	} else {
		outer = xlb_push_outer(ctx, cfg, v6 + XLB_GUE_OVERHEAD + hint6, ETH_P_IPV6);
		if (outer) {
			xlb_fill_outer_v6(outer, pkt, be, cfg, hash, hint6);
			xlb_fill_gue(outer + v6, pkt, cfg, hash, hint, hint6);
		}
	}
	return outer ? 0 : -XLB_OUT_DROP_HEADROOM;
}

#endif /* XLB_BPF_ENCAP_H */
