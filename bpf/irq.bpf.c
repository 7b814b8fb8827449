// SPDX-License-Identifier: GPL-2.0-only
/*
 * Interrupt path: irq_handler_entry/exit for the accelerator's interrupts
 * only: the numbers in irq_filter (the loader fills it from /proc/interrupts
 * and --irq) and, with match_vfio_names, any handler named vfio* (vfio-pci
 * requests its MSI vectors only when the traced process enables them).
 * Hard interrupt handlers do not nest, so one start slot per CPU.
 */
#include "common.bpf.h"

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 256);
	__type(key, __u32);
	__type(value, __u32);
} irq_filter SEC(".maps");

const volatile bool match_vfio_names = true;

static __always_inline bool vfio_handler(struct trace_event_raw_irq_handler_entry *ctx)
{
	char name[4];
	/* __data_loc: the low 16 bits are the string's offset in the record */
	__u32 loc = BPF_CORE_READ(ctx, __data_loc_name);

	if (bpf_probe_read_kernel(name, sizeof(name), (char *)ctx + (loc & 0xffff)))
		return false;
	return name[0] == 'v' && name[1] == 'f' && name[2] == 'i' && name[3] == 'o';
}

struct irq_start {
	__u64 ts;
	__s32 irq;
	__u32 active;
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct irq_start);
} irq_starts SEC(".maps");

SEC("tp/irq/irq_handler_entry")
int irq_entry(struct trace_event_raw_irq_handler_entry *ctx)
{
	__u32 irq = ctx->irq, zero = 0;
	struct irq_start *s;

	if (!bpf_map_lookup_elem(&irq_filter, &irq) && !(match_vfio_names && vfio_handler(ctx)))
		return 0;
	s = bpf_map_lookup_elem(&irq_starts, &zero);
	if (!s)
		return 0;
	s->ts = bpf_ktime_get_boot_ns();
	s->irq = irq;
	s->active = 1;
	return 0;
}

SEC("tp/irq/irq_handler_exit")
int irq_exit(struct trace_event_raw_irq_handler_exit *ctx)
{
	__u32 zero = 0;
	struct irq_start *s = bpf_map_lookup_elem(&irq_starts, &zero);
	struct sbt_irq *r;

	if (!s || !s->active || s->irq != ctx->irq)
		return 0;
	s->active = 0;
	r = sbt_reserve(sizeof(*r), SBT_IRQ);
	if (!r)
		return 0;
	r->start_ts = s->ts;
	r->irq = ctx->irq;
	r->ret = ctx->ret;
	sbt_submit(r);
	return 0;
}

char LICENSE[] SEC("license") = "GPL";
