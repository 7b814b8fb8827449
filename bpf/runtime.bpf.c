// SPDX-License-Identifier: GPL-2.0-only
/*
 * Runtime path: uprobes and uretprobes on the Spyre runtime's entry points.
 *
 * One program pair serves every probed function: the loader attaches it
 * once per function with the probe id as the BPF cookie. Entries and
 * returns are paired on a per-thread stack so nested and recursive calls
 * come out right; the exit record carries the entry time it closes.
 */
#include "common.bpf.h"

/* A zeroed stack to insert from (too big to build on the BPF stack twice). */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct call_stack);
} empty_stack SEC(".maps");

static __always_inline struct call_stack *stack_of(__u32 tid, bool create)
{
	struct call_stack *st = bpf_map_lookup_elem(&call_stacks, &tid);
	__u32 zero = 0;

	if (st || !create)
		return st;
	st = bpf_map_lookup_elem(&empty_stack, &zero);
	if (!st)
		return NULL;
	bpf_map_update_elem(&call_stacks, &tid, st, BPF_NOEXIST);
	return bpf_map_lookup_elem(&call_stacks, &tid);
}

SEC("uprobe")
int BPF_KPROBE(call_enter)
{
	__u64 id = bpf_get_current_pid_tgid();
	__u32 probe = (__u32)bpf_get_attach_cookie(ctx);
	struct sbt_call_enter *e;
	struct call_stack *st;
	__u32 depth;

	if (!sbt_is_traced(id >> 32))
		return 0;
	st = stack_of((__u32)id, true);
	if (!st)
		return 0;
	e = sbt_reserve(sizeof(*e), SBT_CALL_ENTER);
	/* Push even when the record is lost, so the return still pairs. */
	depth = st->depth;
	if (depth < SBT_MAX_DEPTH) {
		st->ids[depth] = probe;
		st->ts[depth] = e ? e->h.ts : bpf_ktime_get_boot_ns();
	}
	st->depth = depth + 1;
	if (!e)
		return 0;
	e->probe_id = probe;
	e->depth = depth;
	e->args[0] = PT_REGS_PARM1(ctx);
	e->args[1] = PT_REGS_PARM2(ctx);
	e->args[2] = PT_REGS_PARM3(ctx);
	e->args[3] = PT_REGS_PARM4(ctx);
	e->args[4] = PT_REGS_PARM5(ctx);
	e->args[5] = PT_REGS_PARM6(ctx);
	sbt_submit(e);
	return 0;
}

SEC("uretprobe")
int BPF_KRETPROBE(call_exit, long ret)
{
	__u64 id = bpf_get_current_pid_tgid();
	__u32 probe = (__u32)bpf_get_attach_cookie(ctx);
	struct sbt_call_exit *e;
	struct call_stack *st;
	__u64 entry_ts = 0;
	__u32 depth = 0, flags = SBT_CALL_UNPAIRED;

	if (!sbt_is_traced(id >> 32))
		return 0;
	st = stack_of((__u32)id, false);
	if (st && st->depth > 0) {
		depth = st->depth - 1;
		st->depth = depth;
		if (depth < SBT_MAX_DEPTH && st->ids[depth] == probe) {
			entry_ts = st->ts[depth];
			flags = 0;
		}
	}
	e = sbt_reserve(sizeof(*e), SBT_CALL_EXIT);
	if (!e)
		return 0;
	e->probe_id = probe;
	e->depth = depth;
	e->entry_ts = entry_ts;
	e->ret = ret;
	e->flags = flags;
	e->pad = 0;
	sbt_submit(e);
	return 0;
}

char LICENSE[] SEC("license") = "GPL";
