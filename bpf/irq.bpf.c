// SPDX-License-Identifier: GPL-2.0-only
/*
 * Interrupt path: irq_handler_entry/exit for the accelerator's interrupts
 * only: the numbers in irq_filter (the loader fills it from /proc/interrupts
 * and --irq) and, with match_vfio_names, any handler vfio-pci named for a
 * card --device wants (vfio-pci requests its MSI vectors only when the
 * traced process enables them, so they are matched here, by name).
 * Hard interrupt handlers do not nest, so one start slot per CPU.
 */
#include "common.bpf.h"
#include "device.bpf.h"
#include "daemon.bpf.h"

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 256);
	__type(key, __u32);
	__type(value, __u32);
} irq_filter SEC(".maps");

const volatile bool match_vfio_names = true;

/* interrupts already named in the capture */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 256);
	__type(key, __u32);
	__type(value, __u8);
} irq_named SEC(".maps");

#define IRQ_NAME_LEN 32

/* vfio-pci names its vectors vfio-msi[N](BDF), vfio-msix[N](BDF),
 * vfio-intx(BDF): the card, or SBT_BDF_NONE when the handler is not vfio's
 * (or its name is not in that form). */
static __always_inline __u32 vfio_handler_bdf(struct irqaction *action)
{
	const char *p = BPF_CORE_READ(action, name);
	char name[IRQ_NAME_LEN];

	if (!p || bpf_probe_read_kernel_str(name, sizeof(name), p) < 5)
		return SBT_BDF_NONE;
	if (name[0] != 'v' || name[1] != 'f' || name[2] != 'i' || name[3] != 'o')
		return SBT_BDF_NONE;
	for (int i = 4; i < IRQ_NAME_LEN - 13; i++)
		if (name[i] == '(')
			return sbt_parse_bdf(&name[i + 1]);
	return SBT_BDF_NONE;
}

/* The handler's name, the first time this interrupt is recorded: read
 * here, not later from /proc/interrupts, where a vector the traced
 * process has already freed is gone (slow machines, busy tracers). */
static __always_inline void name_irq_once(int irq, struct irqaction *action, __u64 ts)
{
	__u32 key = (__u32)irq;
	__u8 one = 1;
	struct sbt_meta_irq *m;

	if (bpf_map_lookup_elem(&irq_named, &key))
		return;
	m = sbt_reserve(sizeof(*m), SBT_META_IRQ);
	if (!m)
		return;
	/* before the interrupt's own record, and before the wake-ups it
	 * caused (reorder puts those just before the interrupt) */
	m->h.ts = ts - 2;
	m->irq = key;
	m->pad = 0;
	if (bpf_probe_read_kernel_str(m->name, sizeof(m->name), BPF_CORE_READ(action, name)) < 0)
		m->name[0] = 0;
	sbt_submit(m);
	bpf_map_update_elem(&irq_named, &key, &one, BPF_ANY);
}

/* Raw tracepoints, not perf tracepoints: a perf tracepoint's program is
 * skipped when the interrupt lands while another tracing program runs on
 * that CPU (the kernel's bpf_prog_active guard), and interrupts do land
 * inside the syscall programs. A raw tracepoint guards only against itself. */
SEC("raw_tp/irq_handler_entry")
int BPF_PROG(irq_entry, int irq, struct irqaction *action)
{
	__u32 key = (__u32)irq, zero = 0, bdf = SBT_BDF_NONE;
	struct irq_start *s;

	if (!bpf_map_lookup_elem(&irq_filter, &key)) {
		if (!match_vfio_names)
			return 0;
		bdf = vfio_handler_bdf(action);
		/* the ids are not in the name: the loader lists, by address,
		 * the cards that --device VID:DID matches */
		if (bdf == SBT_BDF_NONE || !sbt_device_wanted(bdf, 0, 0))
			return 0;
	}
	s = bpf_map_lookup_elem(&irq_starts, &zero);
	if (!s)
		return 0;
	s->ts = bpf_ktime_get_boot_ns();
	s->irq = irq;
	s->bdf = bdf;
	s->active = 1;
	return 0;
}

SEC("raw_tp/irq_handler_exit")
int BPF_PROG(irq_exit, int irq, struct irqaction *action, int ret)
{
	__u32 zero = 0;
	struct irq_start *s = bpf_map_lookup_elem(&irq_starts, &zero);
	struct sbt_irq *r;

	if (!s || !s->active || s->irq != irq)
		return 0;
	s->active = 0;
	if (daemon_mode) { /* counted in the kernel; a record for the flight recorder */
		daemon_irq(s->bdf, bpf_ktime_get_boot_ns() - s->ts);
		if (!daemon_record)
			return 0;
	}
	name_irq_once(irq, action, s->ts);
	r = sbt_reserve(sizeof(*r), SBT_IRQ);
	if (!r)
		return 0;
	r->start_ts = s->ts;
	r->irq = irq;
	r->ret = ret;
	sbt_submit(r);
	return 0;
}

/* Threads a card's interrupt woke, for their next wake-up of another
 * thread (one hop): tid -> the interrupt. */
struct irq_woken {
	__u64 start_ts;
	__s32 irq;
	__u32 pad;
};

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 1024);
	__type(key, __u32);
	__type(value, struct irq_woken);
} irq_woken SEC(".maps");

/* How many threads in irq_woken have news to pass on: 0 nearly always,
 * and then a wake-up elsewhere on the host costs one per-CPU look and
 * this load (an entry the LRU evicts leaves it high: slower, not wrong). */
__u64 irq_woken_pending = 0;

/*
 * Which thread a card's interrupt woke: a wake-up while one of the
 * traced interrupts' handlers runs on this CPU is that interrupt's (vfio
 * signals the eventfd a thread waits on); a wake-up by a thread an
 * interrupt woke is the interrupt's too, once (a completion thread passing
 * the news on). Recorded for traced processes only.
 */
SEC("raw_tp/sched_waking")
int BPF_PROG(irq_wake, struct task_struct *p)
{
	__u32 zero = 0, me, tid, tgid, hop = 0, waker = 0;
	struct irq_start *s = bpf_map_lookup_elem(&irq_starts, &zero);
	struct irq_woken by, *seen;
	struct sbt_wake *w;

	/* the daemon attaches it in detail windows only, for its recorder */
	if (daemon_mode && !daemon_record)
		return 0;
	if (s && s->active) {
		tgid = BPF_CORE_READ(p, tgid);
		if (!sbt_is_traced(tgid))
			return 0;
		tid = BPF_CORE_READ(p, pid);
		by = (struct irq_woken){ s->ts, s->irq, 0 };
		if (!bpf_map_update_elem(&irq_woken, &tid, &by, BPF_NOEXIST))
			__sync_fetch_and_add(&irq_woken_pending, 1);
		else
			bpf_map_update_elem(&irq_woken, &tid, &by, BPF_EXIST);
	} else {
		if (!irq_woken_pending)
			return 0;
		me = (__u32)bpf_get_current_pid_tgid();
		seen = bpf_map_lookup_elem(&irq_woken, &me);
		if (!seen)
			return 0;
		by = *seen;
		if (!bpf_map_delete_elem(&irq_woken, &me))
			__sync_fetch_and_add(&irq_woken_pending, -1);
		hop = 1;
		waker = me;
		tgid = BPF_CORE_READ(p, tgid);
		if (!sbt_is_traced(tgid))
			return 0;
		tid = BPF_CORE_READ(p, pid);
	}
	w = sbt_reserve(sizeof(*w), SBT_WAKE);
	if (!w)
		return 0;
	w->h.tgid = tgid;
	w->h.tid = tid;
	w->irq_start_ts = by.start_ts;
	w->irq = by.irq;
	w->waker_tid = waker;
	w->hop = hop;
	w->pad = 0;
	sbt_submit(w);
	return 0;
}
