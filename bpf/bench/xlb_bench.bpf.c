/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Benchmark harness for BPF_PROG_TEST_RUN. With repeat > 1 the kernel does
 * not restore the frame between repetitions, so an encapsulating program
 * would see its own output from the second run on. xlb_bench_wrapper puts the
 * original frame back (undoes any head adjustment and rewrites the bytes),
 * optionally gives one 32-bit field a new value every run (the source
 * address: every run is a new flow), and tail-calls the program under test.
 * xlb_bench_floor is the cheapest useful target (swap MACs, XDP_TX): wrapper
 * + floor is the baseline subtracted from each case.
 */
#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <bpf/bpf_endian.h>
#include <bpf/bpf_helpers.h>

#define XLB_BENCH_FRAME_LEN 128

char LICENSE[] SEC("license") = "Dual BSD/GPL";

/* Written by the benchmark before each case. 8-byte aligned: it is copied
 * into the frame 8 bytes at a time. */
__u8 frame_template[XLB_BENCH_FRAME_LEN] __attribute__((aligned(8)));
/* Offset of a 32-bit field given a new value every run (a source address,
 * so each run is a new flow); 0 = none. */
__u32 vary_offset;
/* Offset of the 16-bit checksum that covers the varied field (the IPv4
 * header's), updated with it (RFC 1624) so that the program under test sees
 * a valid header; 0 = none. */
__u32 vary_csum_offset;
/* The running value of the varied field, one per CPU (masked with
 * XLB_BENCH_MAX_CPUS - 1) at vary_counters[cpu * XLB_BENCH_COUNTER_STRIDE],
 * each on its own cache line: benchmarks that run on every CPU at once must
 * share neither a counter nor a line. The benchmark gives each CPU its own
 * range of values. */
#define XLB_BENCH_MAX_CPUS 64
#define XLB_BENCH_COUNTER_STRIDE 16
__u32 vary_counters[XLB_BENCH_MAX_CPUS * XLB_BENCH_COUNTER_STRIDE] __attribute__((aligned(64)));
/* With vary_cycle_len != 0 the values cycle through [vary_cycle_base,
 * vary_cycle_base + vary_cycle_len) on every CPU (a fixed population of
 * flows, each packet a different one); 0: every value is new. */
__u32 vary_cycle_base;
__u32 vary_cycle_len;

struct {
	__uint(type, BPF_MAP_TYPE_PROG_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u32);
} xlb_bench_target SEC(".maps");

SEC("xdp")
int xlb_bench_wrapper(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data;
	void *data_end = (void *)(long)ctx->data_end;
	int delta = (int)(data_end - data) - XLB_BENCH_FRAME_LEN;
	__u32 offset = vary_offset;

	/* An encapsulation grew the frame at its head; an answer written in
	 * place (a SYN cookie's SYN-ACK) shortened it at its tail. */
	if (delta > 0 && bpf_xdp_adjust_head(ctx, delta))
		return XDP_ABORTED;
	if (delta < 0 && bpf_xdp_adjust_tail(ctx, -delta))
		return XDP_ABORTED;
	data = (void *)(long)ctx->data;
	data_end = (void *)(long)ctx->data_end;
	if (data + XLB_BENCH_FRAME_LEN > data_end)
		return XDP_ABORTED;
		/* 16 eight-byte copies (a plain memcpy becomes 128 one-byte ones: the
		 * compiler cannot know the packet's alignment). */
#pragma unroll
	for (int i = 0; i < XLB_BENCH_FRAME_LEN / 8; i++)
		((__u64 *)data)[i] = ((const __u64 *)frame_template)[i];
	if (offset && offset <= XLB_BENCH_FRAME_LEN - 4) {
		__u32 *field;

		/* Hide the range check from clang so that it keeps the mask: the
		 * mask is what bounds the offset for the verifier (clang checks a
		 * copy of the register, whose bounds do not carry over). */
		asm volatile("" : "+r"(offset));
		field = data + (offset & (XLB_BENCH_FRAME_LEN - 1));
		if ((void *)(field + 1) > data_end)
			return XDP_ABORTED;
		__u32 *counter =
			&vary_counters[(bpf_get_smp_processor_id() & (XLB_BENCH_MAX_CPUS - 1)) *
				       XLB_BENCH_COUNTER_STRIDE];

		__u32 old = *field, now;

		__u32 next = *counter + 1;

		if (vary_cycle_len && next - vary_cycle_base >= vary_cycle_len)
			next = vary_cycle_base;
		*counter = next;
		now = bpf_htonl(next);
		*field = now;
		if (vary_csum_offset) {
			__u32 at = vary_csum_offset;
			__u16 *check;
			__u32 sum;

			asm volatile("" : "+r"(at));
			check = data + (at & (XLB_BENCH_FRAME_LEN - 1));
			if ((void *)(check + 1) > data_end)
				return XDP_ABORTED;
			/* HC' = ~(~HC + ~m + m') over the field's two 16-bit words */
			sum = (__u16) ~*check;
			sum += (__u16) ~(old & 0xffff) + (__u16) ~(old >> 16);
			sum += (now & 0xffff) + (now >> 16);
			sum = (sum & 0xffff) + (sum >> 16);
			sum = (sum & 0xffff) + (sum >> 16);
			*check = (__u16)~sum;
		}
	}
	bpf_tail_call(ctx, &xlb_bench_target, 0);
	return XDP_ABORTED;
}

SEC("xdp")
int xlb_bench_floor(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data;
	void *data_end = (void *)(long)ctx->data_end;
	struct ethhdr *eth = data;
	__u8 mac[ETH_ALEN];

	if ((void *)(eth + 1) > data_end)
		return XDP_DROP;
	__builtin_memcpy(mac, eth->h_source, ETH_ALEN);
	__builtin_memcpy(eth->h_source, eth->h_dest, ETH_ALEN);
	__builtin_memcpy(eth->h_dest, mac, ETH_ALEN);
	return XDP_TX;
}
