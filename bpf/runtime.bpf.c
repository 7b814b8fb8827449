// SPDX-License-Identifier: GPL-2.0-only
/*
 * Runtime path: uprobes on the Spyre runtime's entry points and on their
 * return sites.
 *
 * One entry program and one return program serve every probed function:
 * the loader attaches them per traced process, once per entry and once per
 * return site, with the probe id (and the site's kind) as the BPF cookie.
 * No uretprobe: the traced program's stack is never touched.
 *
 * Entries and returns pair on a per-thread stack by the stack pointer,
 * which is the same at a function's first instruction and at its return
 * (or tail jump): the return address sits at the top of the stack both
 * times. A frame whose stack pointer is no deeper than a later entry's, or
 * shallower than a later return's, was left without a return (an exception
 * unwound through it, or a longjmp): it is popped, and the correlator marks
 * it as a call without return.
 */
#include "common.bpf.h"

/* A zeroed stack to insert from (too big to build on the BPF stack twice). */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct call_stack);
} empty_stack SEC(".maps");

/* Runtime probe runs for a process that is not traced. record attaches
 * probes per process, so the kernel should never run them elsewhere: this
 * is the second guard, and the tests read it to prove the first one
 * holds. (The daemon's windows probe every process that maps a runtime
 * library, and catch_newcomers makes each one traced.) */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u64);
} untraced_runs SEC(".maps");

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

enum { UNTRACED, TRACED, JOINED };

/* JOINED: a newcomer, traced from this very call; its record wakes the
 * loader, which describes the process while it is there. */
static __always_inline int traced_or_count(__u32 tgid)
{
	__u32 zero = 0, one = 1;
	__u64 *n;

	if (sbt_is_traced(tgid))
		return TRACED;
	/* a daemon's window (NOEXIST: another of its threads may have joined
	 * it meanwhile) */
	if (catch_newcomers) {
		if (!bpf_map_update_elem(&traced, &tgid, &one, BPF_NOEXIST))
			return JOINED;
		if (sbt_is_traced(tgid))
			return TRACED;
	}
	n = bpf_map_lookup_elem(&untraced_runs, &zero);
	if (n)
		*n += 1;
	return UNTRACED;
}

/* Pop the frames a thread left without returning: those whose stack
 * pointer is below sp (or at it, when `at` is set: a new entry there means
 * the frame that was there is gone). Frames deeper than SBT_MAX_DEPTH have
 * no stack pointer kept and are left to their own returns. */
static __always_inline void pop_left(struct call_stack *st, __u64 sp, bool at)
{
	for (int i = 0; i < SBT_MAX_DEPTH; i++) {
		__u32 d = st->depth;

		if (d == 0 || d > SBT_MAX_DEPTH)
			return;
		d -= 1;
		if (st->sp[d & (SBT_MAX_DEPTH - 1)] > sp || (!at && st->sp[d & (SBT_MAX_DEPTH - 1)] == sp))
			return;
		st->depth = d;
	}
}

static __always_inline int on_enter(struct pt_regs *ctx)
{
	__u64 id = bpf_get_current_pid_tgid();
	__u32 probe = SBT_COOKIE_ID(bpf_get_attach_cookie(ctx));
	__u64 sp = PT_REGS_SP(ctx);
	struct sbt_call_enter *e;
	struct call_stack *st;
	__u32 depth;
	__u64 ts;
	int traced = traced_or_count(id >> 32);

	if (traced == UNTRACED)
		return 0;
	st = stack_of((__u32)id, true);
	if (!st)
		return 0;
	pop_left(st, sp, true);
	/* Push before reserving, so the return pairs even when the record is
	 * lost; the record carries the frame's time. */
	ts = bpf_ktime_get_boot_ns();
	depth = st->depth;
	if (depth < SBT_MAX_DEPTH) {
		st->ids[depth] = probe;
		st->ts[depth] = ts;
		st->sp[depth] = sp;
		st->ip[depth] = PT_REGS_IP(ctx);
	}
	st->depth = depth + 1;
	e = sbt_reserve(sizeof(*e), SBT_CALL_ENTER);
	if (!e)
		return 0;
	e->h.ts = ts;
	e->probe_id = probe;
	e->depth = depth;
	e->args[0] = PT_REGS_PARM1(ctx);
	e->args[1] = PT_REGS_PARM2(ctx);
	e->args[2] = PT_REGS_PARM3(ctx);
	e->args[3] = PT_REGS_PARM4(ctx);
	e->args[4] = PT_REGS_PARM5(ctx);
	e->args[5] = PT_REGS_PARM6(ctx);
	if (traced == JOINED)
		bpf_ringbuf_submit(e, BPF_RB_FORCE_WAKEUP);
	else
		sbt_submit(e);
	return 0;
}

/* Each as a uprobe of its own (a perf event a site), and as a uprobe_multi
 * link's program (every site of a library on a process in one link, whose
 * removal waits for the kernel's grace periods once, not once a site):
 * the loader attaches the one the kernel has (attach/uprobe_multi.c). */
SEC("uprobe")
int BPF_KPROBE(call_enter)
{
	return on_enter(ctx);
}

SEC("uprobe")
int BPF_KPROBE(call_enter_multi)
{
	return on_enter(ctx);
}

/* The target of an indirect jump, from the register the loader named.
 * Read through BPF_CORE_READ: a switch of direct context loads is merged
 * by the compiler into one load at a computed offset, which the verifier
 * refuses. */
static __always_inline __u64 jump_target(struct pt_regs *ctx, __u32 reg)
{
#if defined(__TARGET_ARCH_x86)
	switch (reg) {
	case SBT_REG_AX: return BPF_CORE_READ(ctx, ax);
	case SBT_REG_BX: return BPF_CORE_READ(ctx, bx);
	case SBT_REG_CX: return BPF_CORE_READ(ctx, cx);
	case SBT_REG_DX: return BPF_CORE_READ(ctx, dx);
	case SBT_REG_SI: return BPF_CORE_READ(ctx, si);
	case SBT_REG_DI: return BPF_CORE_READ(ctx, di);
	case SBT_REG_BP: return BPF_CORE_READ(ctx, bp);
	case SBT_REG_R8: return BPF_CORE_READ(ctx, r8);
	case SBT_REG_R9: return BPF_CORE_READ(ctx, r9);
	case SBT_REG_R10: return BPF_CORE_READ(ctx, r10);
	case SBT_REG_R11: return BPF_CORE_READ(ctx, r11);
	case SBT_REG_R12: return BPF_CORE_READ(ctx, r12);
	case SBT_REG_R13: return BPF_CORE_READ(ctx, r13);
	case SBT_REG_R14: return BPF_CORE_READ(ctx, r14);
	case SBT_REG_R15: return BPF_CORE_READ(ctx, r15);
	}
#endif
	return 0; /* the loader makes indirect sites on x86-64 only */
}

static __always_inline int on_return(struct pt_regs *ctx)
{
	__u64 id = bpf_get_current_pid_tgid();
	__u64 cookie = bpf_get_attach_cookie(ctx);
	__u32 probe = SBT_COOKIE_ID(cookie), kind = SBT_COOKIE_KIND(cookie);
	__u64 sp = PT_REGS_SP(ctx);
	struct sbt_call_exit *e;
	struct call_stack *st;
	__u64 entry_ts = 0;
	__u32 depth = 0, flags = SBT_CALL_UNPAIRED, top;

	if (traced_or_count(id >> 32) == UNTRACED)
		return 0;
	st = stack_of((__u32)id, false);
	if (kind == SBT_SITE_INDIRECT) {
		/* a jump table stays in the body: only a jump out leaves */
		if (!st || st->depth == 0 || st->depth > SBT_MAX_DEPTH)
			return 0;
		top = (st->depth - 1) & (SBT_MAX_DEPTH - 1);
		if (st->ids[top] != probe || st->sp[top] != sp ||
		    jump_target(ctx, SBT_COOKIE_REG(cookie)) - st->ip[top] < SBT_COOKIE_SIZE(cookie))
			return 0;
	}
	if (st) {
		pop_left(st, sp, false);
		if (st->depth > SBT_MAX_DEPTH) {
			/* deeper than kept: trust the order of returns */
			depth = st->depth - 1;
			st->depth = depth;
		} else if (st->depth > 0) {
			top = (st->depth - 1) & (SBT_MAX_DEPTH - 1);
			if (st->ids[top] == probe && st->sp[top] == sp) {
				depth = top;
				entry_ts = st->ts[top];
				flags = 0;
				st->depth = top;
			}
		}
	}
	if (kind != SBT_SITE_RET)
		flags |= SBT_CALL_TAIL;
	e = sbt_reserve(sizeof(*e), SBT_CALL_EXIT);
	if (!e)
		return 0;
	e->probe_id = probe;
	e->depth = depth;
	e->entry_ts = entry_ts;
	e->ret = kind == SBT_SITE_RET ? PT_REGS_RC(ctx) : 0;
	e->flags = flags;
	e->pad = 0;
	sbt_submit(e);
	return 0;
}

SEC("uprobe")
int BPF_KPROBE(call_return)
{
	return on_return(ctx);
}

SEC("uprobe")
int BPF_KPROBE(call_return_multi)
{
	return on_return(ctx);
}
