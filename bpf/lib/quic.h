/* SPDX-License-Identifier: Apache-2.0 */
/*
 * QUIC connection-ID routing (docs/quic.md; abi.h, struct xlb_quic_config):
 * a QUIC packet whose destination CID a server issued in the QUIC-LB format
 * goes to the backend owning the server id in it, whatever its addresses, so
 * that a client that migrates or is rebound by a NAT keeps its server.
 */
#ifndef XLB_BPF_QUIC_H
#define XLB_BPF_QUIC_H

#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

#include "xlb/abi.h"

/* The kernel's BPF crypto (Linux >= 6.10), declared here: the headers this
 * project builds with predate it. Weak: on a kernel without them libbpf
 * leaves the calls unresolved, and xlb_quic_crypto (set by the loader from
 * the kernel's BTF) keeps the verifier from ever reaching them. The context
 * type must be a struct (not a declaration) for libbpf to match the
 * kernel's prototypes. */
struct bpf_crypto_ctx {
	int opaque;
};
struct bpf_crypto_params {
	char type[14];
	__u8 reserved[2];
	char algo[128];
	__u8 key[256];
	__u32 key_len;
	__u32 authsize;
};
extern struct bpf_crypto_ctx *bpf_crypto_ctx_create(const struct bpf_crypto_params *params,
						    __u32 params__sz, int *err) __ksym __weak;
extern void bpf_crypto_ctx_release(struct bpf_crypto_ctx *ctx) __ksym __weak;
extern int bpf_crypto_decrypt(struct bpf_crypto_ctx *ctx, const struct bpf_dynptr *src,
			      const struct bpf_dynptr *dst,
			      const struct bpf_dynptr *siv__nullable) __ksym __weak;

/* 1 when the kernel has the crypto kfuncs; written by the loader. */
const volatile __u32 xlb_quic_crypto = 0;

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, XLB_MAX_VIPS_DEFAULT *XLB_QUIC_CONFIG_SLOTS);
	__type(key, __u32);
	__type(value, struct xlb_quic_config);
} xlb_quic_configs SEC(".maps");

/* Created by the loader with a BTF that marks crypto_ctx a kptr to the
 * kernel's struct bpf_crypto_ctx (clang 14 drops the kptr type tag): the
 * verifier reads the kind of a map's fields from the map's own BTF. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, XLB_MAX_VIPS_DEFAULT *XLB_QUIC_CONFIG_SLOTS);
	__type(key, __u32);
	__type(value, struct xlb_quic_key);
} xlb_quic_keys SEC(".maps");

struct xlb_quic_scratch {
	struct xlb_quic_opened_key opened; /* the sealed block, as the cache's key */
	__u8 plain[XLB_QUIC_SINGLE_PASS];
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct xlb_quic_scratch);
} xlb_quic_tmp SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, XLB_QUIC_OPENED_DEFAULT);
	__type(key, struct xlb_quic_opened_key);
	__type(value, __u8[XLB_QUIC_SINGLE_PASS]);
} xlb_quic_opened SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, XLB_QUIC_SERVERS_DEFAULT);
	__type(key, struct xlb_quic_server_key);
	__type(value, __u32);
} xlb_quic_servers SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, XLB_MAX_VIPS_DEFAULT);
	__type(key, __u32);
	__type(value, struct xlb_vip_quic_stats);
} xlb_vip_quic SEC(".maps");

/* What xlb_quic_route answers when the CID names a backend (otherwise an
 * enum xlb_quic_fallback). */
#define XLB_QUIC_ROUTED XLB_QUIC_FALLBACKS

/* QUIC versions whose long header we read (RFC 9000, RFC 9369), and how each
 * numbers the long-header types whose CID the client chose. */
#define XLB_QUIC_V1 0x00000001U
#define XLB_QUIC_V2 0x6b3343cfU

/* The UDP payload must hold this much before we read a CID: a short
 * header's first octet and the longest CID (every real 1-RTT packet is
 * longer: packet number, sample for header protection, AEAD tag), or a
 * long header up to the end of a 20-octet DCID. */
#define XLB_QUIC_SHORT_MIN (1 + XLB_QUIC_CID_MAX)
#define XLB_QUIC_LONG_MIN (1 + 4 + 1 + XLB_QUIC_CID_MAX)

/* The server id in the big-endian octets at `sid`, len of them (1..15), or
 * XLB_QUIC_FB_UNKNOWN_SERVER via *bad when it cannot fit 64 bits. */
static __always_inline __u64 xlb_quic_server_number(const __u8 *sid, __u32 len, int *bad)
{
	__u64 n = 0;

#pragma clang loop unroll(full)
	for (__u32 i = 0; i < XLB_QUIC_SERVER_ID_MAX; i++) {
		if (i < len) {
			if (n >> 56)
				*bad = 1;
			n = (n << 8) | sid[i];
		}
	}
	return n;
}

/*
 * The backend a QUIC packet's CID names. payload_off and payload_end: the
 * UDP payload's bounds as offsets into the frame. Returns XLB_QUIC_ROUTED
 * with *backend_id set, or why the packet goes by its 5-tuple (enum
 * xlb_quic_fallback; the caller checks that the backend is live).
 */
__noinline int xlb_quic_route(struct xdp_md *ctx, __u32 payload_off, __u32 payload_end,
			      __u32 vip_id, __u32 *backend_id)
{
	void *data = (void *)(long)ctx->data;
	void *data_end = (void *)(long)ctx->data_end;
	struct xlb_quic_server_key server = {};
	struct xlb_quic_config *qc;
	__u8 *p, *cid, *sid, first;
	__u32 slot, cid_len = 0, avail, *owner;
	__u64 off;
	int bad = 0;

	if (!backend_id || payload_off > 0x3fff || payload_end > 0x3fff ||
	    payload_end < payload_off)
		return XLB_QUIC_FB_BAD_LENGTH;
	avail = payload_end - payload_off;
	/* A bound the verifier sees: clang merges the checks above into one
	 * it cannot read, and would drop a plain mask as redundant. Frames are
	 * far shorter than 16 KiB, and the verifier gives a range to a packet
	 * pointer only while its offset plus the range stays below 64 KiB. */
	off = payload_off;
	asm volatile("%[off] &= 0x3fff" : [off] "+r"(off));
	p = data + off;
	if (avail < XLB_QUIC_SHORT_MIN || (void *)(p + XLB_QUIC_SHORT_MIN) > data_end)
		return XLB_QUIC_FB_BAD_LENGTH;
	first = p[0];
	cid = p + 1;
	if (first & 0x80) {
		__u32 version, type = (first >> 4) & 3;

		if (avail < XLB_QUIC_LONG_MIN || (void *)(p + XLB_QUIC_LONG_MIN) > data_end)
			return XLB_QUIC_FB_BAD_LENGTH;
		version = ((__u32)p[1] << 24) | ((__u32)p[2] << 16) | ((__u32)p[3] << 8) | p[4];
		/* Initial and 0-RTT carry the CID the client made up. */
		if (version == XLB_QUIC_V1) {
			if (type <= 1)
				return XLB_QUIC_FB_CLIENT_CID;
		} else if (version == XLB_QUIC_V2) {
			if (type == 1 || type == 2)
				return XLB_QUIC_FB_CLIENT_CID;
		} else {
			return XLB_QUIC_FB_CLIENT_CID;
		}
		cid_len = p[5];
		cid = p + 6;
	}
	first = cid[0];
	slot = vip_id * XLB_QUIC_CONFIG_SLOTS + (first >> 5);
	qc = bpf_map_lookup_elem(&xlb_quic_configs, &slot);
	if (!qc || qc->server_id_len == 0 || (first >> 5) == XLB_QUIC_UNROUTABLE)
		return XLB_QUIC_FB_UNKNOWN_CONFIG;
	if ((p[0] & 0x80) && cid_len != 1U + qc->server_id_len + qc->nonce_len)
		return XLB_QUIC_FB_BAD_LENGTH;
	if (!(p[0] & 0x80) && avail < 1U + 1 + qc->server_id_len + qc->nonce_len)
		return XLB_QUIC_FB_BAD_LENGTH;
	if (qc->server_id_len > XLB_QUIC_SERVER_ID_MAX)
		return XLB_QUIC_FB_UNKNOWN_CONFIG;

	/* The server id's octets: in the packet (the 20 after the first lie
	 * in the frame, checked above), or decrypted into scratch space. */
	sid = cid + 1;
	if (qc->mode == XLB_QUIC_MODE_ENCRYPTED) {
		struct bpf_dynptr src, dst;
		struct xlb_quic_scratch *tmp;
		struct xlb_quic_key *key;
		struct bpf_crypto_ctx *aes;
		__u8 *opened;
		__u32 zero = 0;

		if (!xlb_quic_crypto)
			return XLB_QUIC_FB_NO_KEY;
		key = bpf_map_lookup_elem(&xlb_quic_keys, &slot);
		tmp = bpf_map_lookup_elem(&xlb_quic_tmp, &zero);
		if (!key || !tmp)
			return XLB_QUIC_FB_NO_KEY;
		aes = (struct bpf_crypto_ctx *)(unsigned long)key->crypto_ctx;
		if (!aes)
			return XLB_QUIC_FB_NO_KEY;
		tmp->opened.slot = slot;
		tmp->opened.generation = key->generation;
		__builtin_memcpy(tmp->opened.sealed, sid, sizeof(tmp->opened.sealed));
		opened = bpf_map_lookup_elem(&xlb_quic_opened, &tmp->opened);
		if (opened) {
			sid = opened;
		} else {
			bpf_dynptr_from_mem(tmp->opened.sealed, sizeof(tmp->opened.sealed), 0,
					    &src);
			bpf_dynptr_from_mem(tmp->plain, sizeof(tmp->plain), 0, &dst);
			if (bpf_crypto_decrypt(aes, &src, &dst, NULL) != 0)
				return XLB_QUIC_FB_NO_KEY;
			/* A full cache evicts the CID seen longest ago. */
			bpf_map_update_elem(&xlb_quic_opened, &tmp->opened, tmp->plain, BPF_ANY);
			sid = tmp->plain;
		}
	}
	server.vip_id = vip_id;
	server.server_id = xlb_quic_server_number(sid, qc->server_id_len, &bad);
	if (bad)
		return XLB_QUIC_FB_UNKNOWN_SERVER;
	owner = bpf_map_lookup_elem(&xlb_quic_servers, &server);
	if (!owner)
		return XLB_QUIC_FB_UNKNOWN_SERVER;
	*backend_id = *owner;
	return XLB_QUIC_ROUTED;
}

/*
 * Makes the AES context of an encrypted config's slot from its key, or
 * removes it (struct xlb_quic_key_args), run by the loader through
 * BPF_PROG_TEST_RUN: bpf_crypto_ctx_create may only be called from a
 * syscall program.
 */
SEC("syscall")
int xlb_quic_key_install(struct xlb_quic_key_args *args)
{
	struct bpf_crypto_params params = {
		.type = "skcipher",
		.algo = "ecb(aes)",
		.key_len = sizeof(args->key),
	};
	struct bpf_crypto_ctx *aes = NULL, *old;
	struct xlb_quic_key *key;
	__u32 slot = args->slot;
	int err = 0;

	if (!xlb_quic_crypto) {
		args->err = -95; /* EOPNOTSUPP */
		return 0;
	}
	key = bpf_map_lookup_elem(&xlb_quic_keys, &slot);
	if (!key) {
		args->err = -2; /* ENOENT */
		return 0;
	}
	if (!args->clear) {
		__builtin_memcpy(params.key, args->key, sizeof(args->key));
		aes = bpf_crypto_ctx_create(&params, sizeof(params), &err);
		if (!aes) {
			args->err = err ? err : -22;
			return 0;
		}
	}
	old = bpf_kptr_xchg(&key->crypto_ctx, aes);
	if (old)
		bpf_crypto_ctx_release(old);
	__sync_fetch_and_add(&key->generation, 1);
	args->err = 0;
	return 0;
}

#endif /* XLB_BPF_QUIC_H */
