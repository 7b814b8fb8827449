// SPDX-License-Identifier: GPL-2.0-only
/*
 * Process lifetime: follow children of traced processes, name threads
 * (task_rename also fires when exec sets the new name), and drop state of
 * threads that exit.
 *
 * Fork is hooked as tp_btf where the kernel has it, else as a raw
 * tracepoint (the loader picks one); both read the child's tgid from its
 * task_struct, which the plain tracepoint's fields do not give.
 */
#include "common.bpf.h"
#include "daemon.bpf.h"

static __always_inline void emit_task(__u16 type, __u32 tgid, __u32 tid, __u32 ppid, __u32 flags, const char *comm_src)
{
	/* a new process gets its runtime probes from the loader: wake it now */
	bool urgent = type == SBT_TASK_NEW && flags;
	struct sbt_task *r = sbt_reserve(sizeof(*r), type);

	if (!r)
		return;
	r->h.tgid = tgid;
	r->h.tid = tid;
	r->ppid = ppid;
	r->flags = flags;
	if (comm_src)
		bpf_probe_read_kernel_str(r->comm, sizeof(r->comm), comm_src);
	else
		bpf_get_current_comm(r->comm, sizeof(r->comm));
	if (urgent)
		bpf_ringbuf_submit(r, BPF_RB_FORCE_WAKEUP);
	else
		sbt_submit(r);
}

/* A task in a pid namespace below ours (a container): the ids it has
 * there, which an in-process profiler writes down. Read now, as /proc may
 * be gone by the time the loader looks. */
static __always_inline void emit_nspid(struct task_struct *child, __u32 tgid, __u32 tid)
{
	struct pid *tp = BPF_CORE_READ(child, thread_pid);
	struct pid *lp = BPF_CORE_READ(child, group_leader, thread_pid);
	unsigned int level = BPF_CORE_READ(tp, level);
	struct sbt_meta_nspid *r;

	if (!level || level >= 32)
		return;
	r = sbt_reserve(sizeof(*r), SBT_META_NSPID);
	if (!r)
		return;
	r->h.tgid = tgid;
	r->h.tid = tid;
	r->ns_tid = BPF_CORE_READ(tp, numbers[level].nr);
	r->ns_tgid = BPF_CORE_READ(lp, numbers[level].nr);
	r->level = level;
	r->pad = 0;
	sbt_submit(r);
}

static __always_inline int on_fork(struct task_struct *parent, struct task_struct *child)
{
	__u32 ptgid = BPF_CORE_READ(parent, tgid);
	__u32 ctgid = BPF_CORE_READ(child, tgid);
	__u32 cpid = BPF_CORE_READ(child, pid);
	__u32 one = 1, new_proc = ctgid != ptgid;

	if (!sbt_is_traced(ptgid))
		return 0;
	if (new_proc)
		bpf_map_update_elem(&traced, &ctgid, &one, BPF_ANY);
	emit_nspid(child, ctgid, cpid);
	emit_task(SBT_TASK_NEW, ctgid, cpid, ptgid, new_proc, child->comm);
	return 0;
}

SEC("tp_btf/sched_process_fork")
int BPF_PROG(fork_btf, struct task_struct *parent, struct task_struct *child)
{
	return on_fork(parent, child);
}

SEC("raw_tp/sched_process_fork")
int BPF_PROG(fork_raw, struct task_struct *parent, struct task_struct *child)
{
	return on_fork(parent, child);
}

/* Raw tracepoints here and in dma.bpf.c: a perf-event tracepoint's link
 * waits for two grace periods when it goes (65 ms each on a quiet host,
 * one after another), a raw one for none. */
SEC("raw_tp/sched_process_exit")
int BPF_PROG(task_exit)
{
	struct task_struct *task = (struct task_struct *)bpf_get_current_task();
	__u64 id = bpf_get_current_pid_tgid();
	__u32 tgid = id >> 32, tid = (__u32)id, last;
	bool watched = sbt_is_traced(tgid); /* not `traced`: that is the map */

	if (!watched && !daemon_mode)
		return 0;
	/* signal->live drops to 0 before this tracepoint for the last thread */
	last = BPF_CORE_READ(task, signal, live.counter) == 0;
	if (daemon_mode && last) /* its card slot, for the next process with its pid */
		daemon_forget(tgid);
	if (!watched)
		return 0;
	bpf_map_delete_elem(&call_stacks, &tid);
	emit_task(SBT_TASK_EXIT, tgid, tid, 0, last, NULL);
	if (last)
		bpf_map_delete_elem(&traced, &tgid);
	return 0;
}

/* the task renamed (a thread may name another of its process) */
SEC("raw_tp/task_rename")
int BPF_PROG(task_rename, struct task_struct *task, const char *comm)
{
	__u32 tgid = BPF_CORE_READ(task, tgid);

	if (sbt_is_traced(tgid))
		emit_task(SBT_TASK_COMM, tgid, BPF_CORE_READ(task, pid), 0, 0, comm);
	return 0;
}
