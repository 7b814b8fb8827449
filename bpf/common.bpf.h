/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * Maps and helpers shared by every BPF program of spyre-bpftrace.
 *
 * Each *.bpf.c file is compiled alone and the objects are linked into one
 * with `bpftool gen object`. The maps here are __weak so that every file can
 * see them and the linker keeps a single copy.
 */
#ifndef SBT_COMMON_BPF_H
#define SBT_COMMON_BPF_H

#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>
#include "events.h"

/* libbpf before 1.2 stops at the fifth argument register. */
#ifndef PT_REGS_PARM6
#if defined(__TARGET_ARCH_x86)
#define PT_REGS_PARM6(x) (((struct pt_regs *)(x))->r9)
#elif defined(__TARGET_ARCH_arm64)
#define PT_REGS_PARM6(x) (((struct user_pt_regs *)(x))->regs[5])
#elif defined(__TARGET_ARCH_powerpc)
#define PT_REGS_PARM6(x) (((struct pt_regs *)(x))->gpr[8])
#elif defined(__TARGET_ARCH_s390)
#define PT_REGS_PARM6(x) 0 /* sixth argument is on the stack on s390 */
#endif
#endif

/* libbpf 1.1 names powerpc's stack pointer and link register wrongly (sp,
 * regs[31]); later releases use these, so redefining is harmless there. */
#if defined(__TARGET_ARCH_powerpc)
#undef __PT_SP_REG
#define __PT_SP_REG gpr[1]
#undef __PT_RET_REG
#define __PT_RET_REG link
#endif

/* GPL for the helpers the programs use; weak like the maps, one copy. */
char LICENSE[] SEC("license") __weak = "GPL";

/* The one ring buffer; the loader sets its size before load. */
struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 8 << 20);
} events SEC(".maps") __weak;

/* Records that did not fit in the ring buffer, per CPU. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u64);
} lost SEC(".maps") __weak;

/* Traced processes (tgid -> 1). The loader adds the -p/-c pids, the fork
 * hook adds their children, the exit hook removes a process when its last
 * thread is gone. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 4096);
	__type(key, __u32);
	__type(value, __u32);
} traced SEC(".maps") __weak;

/* The daemon, while a detail window is open: its runtime uprobes are then
 * on every process that maps a runtime library, and one that is not
 * traced joins at its first runtime call (the loader learns of it by that
 * call's record). Set and cleared by the loader while loaded: a global,
 * not a setting fixed at load. */
volatile __u32 catch_newcomers __weak = 0;

/* Per-thread stack of open runtime calls, so returns pair with entries.
 * The exit hook in task.bpf.c drops a thread's stack. */
struct call_stack {
	__u32 depth; /* may exceed SBT_MAX_DEPTH; deeper frames are not kept */
	__u32 ids[SBT_MAX_DEPTH];
	__u64 ts[SBT_MAX_DEPTH];
	__u64 sp[SBT_MAX_DEPTH]; /* stack pointer at entry: where the return address is */
	__u64 ip[SBT_MAX_DEPTH]; /* the function's address in this process */
};

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 16384);
	__type(key, __u32); /* tid */
	__type(value, struct call_stack);
} call_stacks SEC(".maps") __weak;

/* Ring buffer data (bytes) above which a submit wakes the loader; below it
 * the loader's poll timeout picks the data up. Saves a wakeup per event. */
const volatile __u64 wakeup_bytes __weak = 256 << 10;

/* The most bytes a submit saw waiting in the ring buffer (its own
 * included): how near the loader came to losing records. The loader reads
 * it; nothing resets it. */
volatile __u64 ring_peak_bytes __weak = 0;

static __always_inline bool sbt_is_traced(__u32 tgid)
{
	return bpf_map_lookup_elem(&traced, &tgid) != NULL;
}

static __always_inline void sbt_count_lost(void)
{
	__u32 zero = 0;
	__u64 *n = bpf_map_lookup_elem(&lost, &zero);

	if (n)
		*n += 1;
}

/* Reserve a record and fill its header; counts a loss when full. */
/* A record of the current thread (id: its pid_tgid) at ts. */
static __always_inline void *sbt_reserve_at(__u32 size, __u16 type, __u64 id, __u64 ts)
{
	struct sbt_hdr *h = bpf_ringbuf_reserve(&events, size, 0);

	if (!h) {
		sbt_count_lost();
		return NULL;
	}
	h->type = type;
	h->size = size - sizeof(*h);
	h->cpu = bpf_get_smp_processor_id();
	h->tgid = id >> 32;
	h->tid = (__u32)id;
	h->ts = ts;
	return h;
}

static __always_inline void *sbt_reserve(__u32 size, __u16 type)
{
	return sbt_reserve_at(size, type, bpf_get_current_pid_tgid(), bpf_ktime_get_boot_ns());
}

static __always_inline void sbt_submit(void *rec)
{
	__u64 flags = BPF_RB_NO_WAKEUP, fill = bpf_ringbuf_query(&events, BPF_RB_AVAIL_DATA);

	/* racy between CPUs, and a high-water mark needs no more */
	if (fill > ring_peak_bytes)
		ring_peak_bytes = fill;
	if (fill >= wakeup_bytes)
		flags = BPF_RB_FORCE_WAKEUP;
	bpf_ringbuf_submit(rec, flags);
}

#endif /* SBT_COMMON_BPF_H */
