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

/* Which thread an interrupt wakes, without a hook on every wake-up of the
 * host: set by the loader with the addresses of the kernel's wake
 * functions (the interrupt's own program reads the eventfd's waiters; the
 * next hop, where eventfd_write takes fentry or a kprobe). Else, and only
 * when asked, the sched_waking program below does it. */
const volatile bool wake_by_eventfd = false;
/* default_, autoremove_, woken_wake_function, ep_autoremove_wake_function
 * (epoll_wait's, 6.1 on; 0 before) */
const volatile __u64 wake_fn_task[4] = {};
const volatile __u64 wake_fn_poll = 0; /* pollwake */
const volatile __u64 wake_fn_epoll = 0; /* ep_poll_callback */

/* vfio-pci's MSI and MSI-X handlers, by their vectors' names: their dev_id
 * is the eventfd they signal (INTx's is not). */
static __always_inline bool vfio_msi_handler(struct irqaction *action)
{
	const char *p = BPF_CORE_READ(action, name);
	char name[9];

	if (!p || bpf_probe_read_kernel(name, sizeof(name) - 1, p))
		return false;
	return name[0] == 'v' && name[1] == 'f' && name[2] == 'i' && name[3] == 'o' && name[4] == '-' &&
	       name[5] == 'm' && name[6] == 's' && name[7] == 'i';
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

/* Forward: who the interrupt's eventfd wakes (below). */
static __always_inline void eventfd_waiters(void *eventfd, __u64 start_ts, __s32 irq, __u32 waker);

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
	s->msi = daemon_mode && drv_msi_probed && bdf != SBT_BDF_NONE && vfio_msi_handler(action) ? IRQ_MSI : 0;
	/* vfio-pci's MSI handler signals the eventfd it was given as dev_id:
	 * its waiters are the threads this interrupt wakes */
	if (wake_by_eventfd && !(daemon_mode && !daemon_record) && vfio_msi_handler(action))
		eventfd_waiters(BPF_CORE_READ(action, dev_id), s->ts, irq, 0);
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
		if (s->msi == IRQ_MSI) /* vfio's MSI handler ran, its probe did not count it */
			daemon_drv_missed(SBT_DRV_MSI);
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

/* A traced thread this interrupt woke (hop 0), or that a thread it woke
 * woke next (hop 1): a record, and for hop 0 the news to pass on. */
static __always_inline void woke(struct task_struct *p, __u64 start_ts, __s32 irq, __u32 waker)
{
	__u32 tgid = BPF_CORE_READ(p, tgid), tid;
	struct irq_woken by = { start_ts, irq, 0 };
	struct sbt_wake *w;

	if (!sbt_is_traced(tgid))
		return;
	tid = BPF_CORE_READ(p, pid);
	if (!waker) {
		if (!bpf_map_update_elem(&irq_woken, &tid, &by, BPF_NOEXIST))
			__sync_fetch_and_add(&irq_woken_pending, 1);
		else
			bpf_map_update_elem(&irq_woken, &tid, &by, BPF_EXIST);
	}
	w = sbt_reserve(sizeof(*w), SBT_WAKE);
	if (!w)
		return;
	w->h.tgid = tgid;
	w->h.tid = tid;
	w->irq_start_ts = start_ts;
	w->irq = irq;
	w->waker_tid = waker;
	w->hop = waker ? 1 : 0;
	w->pad = 0;
	sbt_submit(w);
}

/* The news the current thread has to pass on (an interrupt woke it), taken
 * once: false when it has none. */
static __always_inline bool take_news(struct irq_woken *by, __u32 *me)
{
	struct irq_woken *seen;

	if (!irq_woken_pending)
		return false;
	*me = (__u32)bpf_get_current_pid_tgid();
	seen = bpf_map_lookup_elem(&irq_woken, me);
	if (!seen)
		return false;
	*by = *seen;
	if (!bpf_map_delete_elem(&irq_woken, me))
		__sync_fetch_and_add(&irq_woken_pending, -1);
	return true;
}

/* fs/eventfd.c's context is private to that file: its wait queue, by
 * CO-RE (the kernel's BTF has the type; this vmlinux.h has its name only). */
struct eventfd_ctx___sbt {
	struct wait_queue_head wqh;
} __attribute__((preserve_access_index));

#define EVENTFD_MAX_WAITERS 4
#define WQ_EXCLUSIVE 0x01 /* WQ_FLAG_EXCLUSIVE: a wake-up stops at the first such */

static __always_inline bool wakes_task(__u64 fn)
{
	return fn && (fn == wake_fn_task[0] || fn == wake_fn_task[1] || fn == wake_fn_task[2] || fn == wake_fn_task[3]);
}

/* The task an entry of a wait queue wakes: read()'s and epoll_wait()'s
 * (private: the task), poll()'s (private: the poll_wqueues of the polling
 * task); NULL for any other (epoll's own entry, handled by the caller). */
static __always_inline struct task_struct *waiter_task(struct wait_queue_entry *e, __u64 fn)
{
	void *priv = BPF_CORE_READ(e, private);

	if (wakes_task(fn))
		return priv;
	if (fn && fn == wake_fn_poll && priv)
		return BPF_CORE_READ((struct poll_wqueues *)priv, polling_task);
	return NULL;
}

/* The wait_queue_entry at pos on a wait queue; NULL when pos is back at
 * its head (no more). */
static __always_inline struct wait_queue_entry *entry_at(struct list_head *pos, struct list_head *head)
{
	if (!pos || pos == head)
		return NULL;
	return (void *)pos - bpf_core_field_offset(struct wait_queue_entry, entry);
}

/* An epoll instance the eventfd is in (its entry on the eventfd's queue,
 * ep_poll_callback's): the thread in epoll_wait() on it that the wake-up
 * reaches, the first exclusive waiter of the epoll's own queue and any
 * before it. A nested epoll is not followed. */
static __always_inline void epoll_waiters(struct wait_queue_entry *e, __u64 start_ts, __s32 irq, __u32 waker)
{
	struct eppoll_entry *pwq = (void *)e - bpf_core_field_offset(struct eppoll_entry, wait);
	struct eventpoll *ep = BPF_CORE_READ(pwq, base, ep);
	struct list_head *head, *pos;

	if (!ep)
		return;
	head = __builtin_preserve_access_index(&ep->wq.head);
	pos = BPF_CORE_READ(ep, wq.head.next);
	for (int i = 0; i < EVENTFD_MAX_WAITERS; i++) {
		struct wait_queue_entry *w = entry_at(pos, head);
		struct task_struct *t;

		if (!w)
			break;
		t = waiter_task(w, (__u64)BPF_CORE_READ(w, func));
		if (t)
			woke(t, start_ts, irq, waker);
		if (BPF_CORE_READ(w, flags) & WQ_EXCLUSIVE)
			break;
		pos = BPF_CORE_READ(pos, next);
	}
}

/* The threads waiting on an eventfd, woken when it is signalled: entries of
 * its wait queue whose wake function wakes a task, and through an epoll
 * instance the eventfd is in, the thread waiting on that epoll. */
static __always_inline void eventfd_waiters(void *eventfd, __u64 start_ts, __s32 irq, __u32 waker)
{
	struct eventfd_ctx___sbt *ctx = eventfd;
	struct list_head *head, *pos;

	if (!ctx)
		return;
	head = __builtin_preserve_access_index(&ctx->wqh.head);
	pos = BPF_CORE_READ(ctx, wqh.head.next);
	for (int i = 0; i < EVENTFD_MAX_WAITERS; i++) {
		struct wait_queue_entry *e = entry_at(pos, head);
		struct task_struct *t;
		__u64 fn;

		if (!e)
			break;
		fn = (__u64)BPF_CORE_READ(e, func);
		t = waiter_task(e, fn);
		if (t)
			woke(t, start_ts, irq, waker);
		else if (fn && fn == wake_fn_epoll)
			epoll_waiters(e, start_ts, irq, waker);
		if (BPF_CORE_READ(e, flags) & WQ_EXCLUSIVE)
			break;
		pos = BPF_CORE_READ(pos, next);
	}
}

/* A thread an interrupt woke writes an eventfd (a completion thread passing
 * the news on): its waiters are hop 1. Only eventfd writes run this. */
static __always_inline int eventfd_written(struct file *file)
{
	struct irq_woken by;
	__u32 me;

	if (!wake_by_eventfd || (daemon_mode && !daemon_record) || !take_news(&by, &me))
		return 0;
	eventfd_waiters(BPF_CORE_READ(file, private_data), by.start_ts, by.irq, me);
	return 0;
}

SEC("fentry/eventfd_write")
int BPF_PROG(eventfd_write_fentry, struct file *file)
{
	return eventfd_written(file);
}

/* Where fentry is not to be had. While a kprobe program runs the kernel
 * skips every other kprobe program on that CPU (bpf_prog_active): a card's
 * interrupt that lands in these few instructions loses its vfio_msihandler
 * kprobe record (the kernel counts it, record reports it as lost; the
 * interrupt itself is still seen by irq_handler_entry). That, rather than
 * a program on every wake-up of the host. */
SEC("kprobe/eventfd_write")
int BPF_KPROBE(eventfd_write_kprobe, struct file *file)
{
	return eventfd_written(file);
}

/*
 * On request (--wake-hook sched_waking), for a kernel where eventfd_write
 * can be hooked neither way, or a runtime that passes the news on by other
 * means than an eventfd: a wake-up while one of the traced interrupts'
 * handlers runs on this CPU is that interrupt's (vfio signals the eventfd
 * a thread waits on); a wake-up by a thread an interrupt woke is the
 * interrupt's too, once (a completion thread passing the news on). It runs
 * on every wake-up of the host. Recorded for traced processes only.
 */
SEC("raw_tp/sched_waking")
int BPF_PROG(irq_wake, struct task_struct *p)
{
	__u32 zero = 0, me;
	struct irq_start *s = bpf_map_lookup_elem(&irq_starts, &zero);
	struct irq_woken by;

	/* the daemon attaches it in detail windows only, for its recorder */
	if (daemon_mode && !daemon_record)
		return 0;
	if (s && s->active)
		woke(p, s->ts, s->irq, 0);
	else if (take_news(&by, &me))
		woke(p, by.start_ts, by.irq, me);
	return 0;
}
