/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * A VFIO ioctl from its entry to its return, whichever hook sees it: the
 * syscall tracepoints (record; the daemon where vfio's own handlers cannot
 * be hooked, or for --vfio-path files), or fentry/kprobes on vfio's three
 * file handlers (the daemon, where the kernel allows: only VFIO's calls
 * reach them, so no other syscall pays). The argument structs are decoded
 * at entry from user memory; the return completes the record.
 */
#ifndef SBT_IOCTL_DECODE_BPF_H
#define SBT_IOCTL_DECODE_BPF_H

#include "common.bpf.h"
#include "daemon.bpf.h"

/* record's accelerator fds: (tgid, fd) -> enum sbt_fd_kind (ioctl.bpf.c) */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 8192);
	__type(key, struct sbt_fd_key);
	__type(value, __u32); /* enum sbt_fd_kind */
} accel_fds SEC(".maps") __weak;

/*
 * ioctls in flight: the record being built, in a slot picked by the
 * thread id. A thread takes its slot with a compare-and-swap at entry and
 * frees it at the return: the record is built in place, with none of a
 * hash map's update and delete (most of what an ioctl cost). Two threads
 * in flight whose ids share a slot: the second goes to ioctl_pending.
 * The owner is 64-bit because older BPF targets have no 32-bit cmpxchg.
 */
#define SBT_IOCTL_SLOTS 4096

/* An ioctl in flight: its record, and what the daemon times it by. */
struct ioctl_flight {
	struct sbt_ioctl r; /* start_ts: 0 when not timed */
	__u64 coarse_start; /* the tick clock at entry (daemon_coarse_ns: untimed ones' time) */
	__u32 weight; /* daemon_weight's; 1 outside the daemon */
	__u32 pad;
};

struct ioctl_slot {
	__u64 tid; /* 0: free */
	struct ioctl_flight f;
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, SBT_IOCTL_SLOTS);
	__type(key, __u32);
	__type(value, struct ioctl_slot);
} ioctl_slots SEC(".maps") __weak;

/* the ones whose slot was taken: tid -> the record being built */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 4096);
	__type(key, __u32);
	__type(value, struct ioctl_flight);
} ioctl_pending SEC(".maps") __weak;

/* At least the number of entries in ioctl_pending (a stale one replaced
 * counts twice): while it is 0, the return of an ioctl that holds no slot
 * (any ioctl of the host, where the syscall tracepoints carry them) needs
 * no hash lookup. */
volatile __u64 ioctl_pending_n __weak = 0;

/* The thread's slot if it is free or already its own (an entry whose
 * return was never seen), taken; NULL when another thread holds it. */
static __always_inline struct ioctl_slot *slot_take(__u32 tid)
{
	__u32 k = tid & (SBT_IOCTL_SLOTS - 1);
	struct ioctl_slot *s = bpf_map_lookup_elem(&ioctl_slots, &k);
	__u64 was;

	if (!s)
		return NULL;
	was = __sync_val_compare_and_swap(&s->tid, 0, (__u64)tid);
	return was == 0 || was == tid ? s : NULL;
}

/* The thread's slot if it holds it (it took it at the entry). */
static __always_inline struct ioctl_slot *slot_held(__u32 tid)
{
	__u32 k = tid & (SBT_IOCTL_SLOTS - 1);
	struct ioctl_slot *s = bpf_map_lookup_elem(&ioctl_slots, &k);

	return s && s->tid == tid ? s : NULL;
}

/* Layouts of the VFIO argument structs (linux/vfio.h), as read from user
 * memory: the first fields of dma_map, dma_unmap and irq_set. */
struct vfio_arg_words {
	__u32 argsz;
	__u32 flags;
	__u64 q[3];
};

static __always_inline void decode_arg(struct sbt_ioctl *r)
{
	struct vfio_arg_words w = {};
	__u32 *irq = (__u32 *)&w;
	/* VFIO numbers overlap across fd types: MAP_DMA's is a device fd's
	 * PCI_HOT_RESET. Path-matched files (the mock) may be either. */
	bool iommu = r->fd_kind == SBT_FD_CONTAINER || r->fd_kind == SBT_FD_PATH || r->fd_kind == SBT_FD_SPAPR;
	bool device = r->fd_kind == SBT_FD_DEVICE || r->fd_kind == SBT_FD_PATH;
	bool spapr = r->fd_kind == SBT_FD_SPAPR;

	if (!(iommu && (r->cmd == SBT_VFIO_IOMMU_MAP_DMA || r->cmd == SBT_VFIO_IOMMU_UNMAP_DMA)) &&
	    !(device && r->cmd == SBT_VFIO_DEVICE_SET_IRQS) &&
	    !(spapr && (r->cmd == SBT_VFIO_SPAPR_REGISTER_MEMORY || r->cmd == SBT_VFIO_SPAPR_UNREGISTER_MEMORY ||
			r->cmd == SBT_VFIO_SPAPR_TCE_REMOVE)))
		return;
	if (bpf_probe_read_user(&w, sizeof(w), (void *)r->arg)) {
		r->decoded = SBT_DEC_FAULT;
		return;
	}
	if (r->cmd == SBT_VFIO_IOMMU_MAP_DMA) {
		r->decoded = SBT_DEC_DMA_MAP;
		r->u.dma.argsz = w.argsz;
		r->u.dma.flags = w.flags;
		r->u.dma.vaddr = w.q[0];
		r->u.dma.iova = w.q[1];
		r->u.dma.size = w.q[2];
	} else if (r->cmd == SBT_VFIO_IOMMU_UNMAP_DMA) {
		r->decoded = SBT_DEC_DMA_UNMAP;
		r->u.dma.argsz = w.argsz;
		r->u.dma.flags = w.flags;
		r->u.dma.iova = w.q[0];
		r->u.dma.size = w.q[1];
	} else if (r->cmd == SBT_VFIO_DEVICE_SET_IRQS) {
		r->decoded = SBT_DEC_SET_IRQS;
		r->u.irqs.argsz = irq[0];
		r->u.irqs.flags = irq[1];
		r->u.irqs.index = irq[2];
		r->u.irqs.start = irq[3];
		r->u.irqs.count = irq[4];
	} else if (r->cmd == SBT_VFIO_SPAPR_TCE_REMOVE) {
		r->decoded = SBT_DEC_SPAPR_REMOVE;
		r->u.window.argsz = w.argsz;
		r->u.window.flags = w.flags;
		r->u.window.start = w.q[0];
	} else { /* struct vfio_iommu_spapr_register_memory */
		r->decoded =
			r->cmd == SBT_VFIO_SPAPR_REGISTER_MEMORY ? SBT_DEC_SPAPR_REGISTER : SBT_DEC_SPAPR_UNREGISTER;
		r->u.dma.argsz = w.argsz;
		r->u.dma.flags = w.flags;
		r->u.dma.vaddr = w.q[0];
		r->u.dma.size = w.q[1];
	}
}

/* uapi struct vfio_iommu_spapr_tce_info and _tce_create, as far as read */
struct spapr_info_arg {
	__u32 argsz, flags;
	__u32 dma32_window_start, dma32_window_size;
};

struct spapr_create_arg {
	__u32 argsz, flags;
	__u32 page_shift, resv1;
	__u64 window_size;
	__u32 levels, resv2;
	__u64 start_addr;
};

/* What sPAPR's GET_INFO and TCE_CREATE give back, read after the call. */
static __always_inline void decode_out(struct sbt_ioctl *r, long ret)
{
	if (r->fd_kind != SBT_FD_SPAPR || ret)
		return;
	if (r->cmd == SBT_VFIO_IOMMU_GET_INFO) {
		struct spapr_info_arg i;

		if (bpf_probe_read_user(&i, sizeof(i), (void *)r->arg)) {
			r->decoded = SBT_DEC_FAULT;
			return;
		}
		r->decoded = SBT_DEC_SPAPR_INFO;
		r->u.window.argsz = i.argsz;
		r->u.window.flags = i.flags;
		r->u.window.start = i.dma32_window_start;
		r->u.window.size = i.dma32_window_size;
	} else if (r->cmd == SBT_VFIO_SPAPR_TCE_CREATE) {
		struct spapr_create_arg c;

		if (bpf_probe_read_user(&c, sizeof(c), (void *)r->arg)) {
			r->decoded = SBT_DEC_FAULT;
			return;
		}
		r->decoded = SBT_DEC_SPAPR_CREATE;
		r->u.window.argsz = c.argsz;
		r->u.window.flags = c.flags;
		r->u.window.start = c.start_addr;
		r->u.window.size = c.window_size;
		r->u.window.page_shift = c.page_shift;
		r->u.window.levels = c.levels;
	}
}

/* An ioctl begins: its record, kept until it returns; timed (on the
 * precise clock) when weight is not 0. Built in the thread's slot where it
 * has one (no copy), else on the stack for ioctl_pending. */
static __always_inline void ioctl_begin(__u64 id, __s32 fd, __u32 cmd, __u64 arg, __u32 kind, __u32 weight)
{
	struct ioctl_flight stack = {}, *f;
	__u32 tid = (__u32)id;
	struct ioctl_slot *s = slot_take(tid);

	f = s ? &s->f : &stack;
	f->r.start_ts = weight ? bpf_ktime_get_boot_ns() : 0;
	/* the tick clock only for an untimed one: what ioctl_finish reads it for */
	f->coarse_start = !weight && daemon_mode && (daemon_slow_ns || daemon_record) ? daemon_coarse_ns() : 0;
	f->weight = weight;
	f->r.fd = fd;
	f->r.cmd = cmd;
	f->r.arg = arg;
	f->r.fd_kind = (__u16)kind;
	f->r.decoded = SBT_DEC_NONE;
	__builtin_memset(&f->r.u, 0, sizeof(f->r.u));
	decode_arg(&f->r);
	if (!s && !bpf_map_update_elem(&ioctl_pending, &tid, &stack, BPF_ANY))
		__sync_fetch_and_add(&ioctl_pending_n, 1);
}

/* The daemon's (cpu: this CPU's daemon_cpus entry, if the caller has it):
 * the process holds a card now; a group's card is its card;
 * SET_CONTAINER ties the container to the group's card. (A group it opens
 * in a window is in no table: there is no hook on opens.) */
static __always_inline void daemon_ioctl_begin(__u64 id, __s32 fd, __u32 cmd, __u64 arg, __u32 kind, __u32 group,
					       struct daemon_cpu *cpu)
{
	__u32 tgid = id >> 32;

	daemon_seen(tgid, cpu);
	if (kind == SBT_FD_GROUP) {
		daemon_group_opened(tgid, group);
		if (cmd == SBT_VFIO_GROUP_SET_CONTAINER)
			daemon_set_container_enter((__u32)id, group, arg);
	}
	ioctl_begin(id, fd, cmd, arg, kind, daemon_weight(cmd));
}

/* The ioctl returned ret: counted (daemon), recorded (the daemon's: the
 * timed ones, and untimed ones that were slow or failed, these up to a
 * rate). */
static __always_inline void ioctl_finish(__u64 id, long ret)
{
	__u32 tid = (__u32)id, kind = SBT_FD_DEVICE;
	struct ioctl_slot *s = slot_held(tid);
	struct ioctl_flight *f = s ? &s->f : NULL;
	struct sbt_ioctl *p, *r;
	__u64 now = 0, dur = 0;
	bool keep = true, slow;

	if (!s && ioctl_pending_n)
		f = bpf_map_lookup_elem(&ioctl_pending, &tid);
	if (!f)
		return;
	p = &f->r;
	if (p->cmd == SBT_VFIO_GROUP_GET_DEVICE_FD && ret >= 0 && p->fd_kind != SBT_FD_CONTAINER &&
	    p->fd_kind != SBT_FD_SPAPR && p->fd_kind != SBT_FD_DEVICE) {
		struct sbt_fd_key key = { .tgid = id >> 32, .fd = (__s32)ret };

		bpf_map_update_elem(&accel_fds, &key, &kind, BPF_ANY);
	}
	/* the container's IOMMU is known now: its later commands decode by it */
	if (p->cmd == SBT_VFIO_SET_IOMMU && ret == 0 && !daemon_mode &&
	    (p->fd_kind == SBT_FD_CONTAINER || p->fd_kind == SBT_FD_SPAPR)) {
		struct sbt_fd_key key = { .tgid = id >> 32, .fd = p->fd };

		kind = p->arg == SBT_VFIO_SPAPR_TCE_IOMMU || p->arg == SBT_VFIO_SPAPR_TCE_v2_IOMMU ? SBT_FD_SPAPR
												   : SBT_FD_CONTAINER;
		bpf_map_update_elem(&accel_fds, &key, &kind, BPF_EXIST);
	}
	decode_out(p, ret);
	if (f->weight) {
		now = bpf_ktime_get_boot_ns();
		dur = now > p->start_ts ? now - p->start_ts : 0;
	}
	if (daemon_mode) {
		__u64 coarse = 0;

		/* an untimed one: slow or not from the tick; recorded only if
		 * it failed or was slow, and then with its start from the tick */
		if (!f->weight && (daemon_slow_ns || (daemon_record && ret < 0))) {
			coarse = daemon_coarse_ns();
			dur = coarse > f->coarse_start ? coarse - f->coarse_start : 0;
		}
		slow = daemon_slow_ns && dur >= daemon_slow_ns;
		daemon_ioctl(id >> 32, tid, p, ret, slow, dur, f->weight);
		/* records only for the flight recorder: a slow one is what a
		 * trigger's snapshot is about */
		keep = daemon_record && (f->weight || slow || (ret < 0 && daemon_fail_recorded(id >> 32, coarse)));
		if (keep && !f->weight) {
			now = bpf_ktime_get_boot_ns();
			p->start_ts = now > dur ? now - dur : 0;
		}
	}
	r = keep ? sbt_reserve_at(sizeof(*r), SBT_IOCTL, id, now) : NULL;
	if (r) {
		__builtin_memcpy((char *)r + sizeof(r->h), (char *)p + sizeof(p->h), sizeof(*r) - sizeof(r->h));
		r->ret = ret;
		/* in a daemon's window, a process not traced yet is one to
		 * describe (and its runtime to find) while it is there */
		if (catch_newcomers && !sbt_is_traced(id >> 32))
			bpf_ringbuf_submit(r, BPF_RB_FORCE_WAKEUP);
		else
			sbt_submit(r);
	}
	/* a full barrier: the record is read before another thread may
	 * take the slot */
	if (s)
		__sync_val_compare_and_swap(&s->tid, (__u64)tid, 0);
	else if (!bpf_map_delete_elem(&ioctl_pending, &tid))
		__sync_fetch_and_add(&ioctl_pending_n, -1);
}

#endif /* SBT_IOCTL_DECODE_BPF_H */
