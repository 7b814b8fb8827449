// SPDX-License-Identifier: GPL-2.0-only
/*
 * ioctl path: VFIO ioctls of traced processes, from the syscall tracepoints.
 *
 * Only ioctls on accelerator files are recorded. Which fds those are is kept
 * in accel_fds: the loader seeds it from /proc/PID/fd, openat() of a path
 * matching fd_patterns adds to it, VFIO_GROUP_GET_DEVICE_FD adds the device
 * fd it returns, close() removes. The VFIO argument structs are decoded
 * here, at entry, from user memory.
 */
#include "common.bpf.h"
#include "daemon.bpf.h"
#include "libopen.bpf.h"

#define PATH_MAX_BPF SBT_LIB_PATH_LEN

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 8192);
	__type(key, struct sbt_fd_key);
	__type(value, __u32); /* enum sbt_fd_kind */
} accel_fds SEC(".maps");

/* Path patterns (events.h), checked in order. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, SBT_MAX_FD_PATTERNS);
	__type(key, __u32);
	__type(value, struct sbt_fd_pattern);
} fd_patterns SEC(".maps");

const volatile __u32 n_patterns = 0;

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, char[PATH_MAX_BPF]);
} path_buf SEC(".maps");

/* openat() in flight whose path matched: tid -> fd kind */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 4096);
	__type(key, __u32);
	__type(value, __u32);
} open_pending SEC(".maps");

/* ioctl in flight on an accelerator fd: tid -> the record being built */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 4096);
	__type(key, __u32);
	__type(value, struct sbt_ioctl);
} ioctl_pending SEC(".maps");

static __always_inline bool match_pattern(const char *path, int len,
					  const struct sbt_fd_pattern *p)
{
	int plen = p->prefix_len, slen = p->suffix_len, off;

	if (p->has_star ? len < plen + slen : len != plen)
		return false;
	for (int i = 0; i < SBT_FD_PATTERN_LEN; i++) {
		if (i >= plen)
			break;
		if (path[i & (PATH_MAX_BPF - 1)] != p->prefix[i])
			return false;
	}
	off = len - slen;
	for (int i = 0; i < SBT_FD_PATTERN_LEN; i++) {
		if (i >= slen)
			break;
		if (path[(off + i) & (PATH_MAX_BPF - 1)] != p->suffix[i])
			return false;
	}
	return true;
}

/* buf: the path, len bytes without the NUL */
static __always_inline __u32 classify_path(const char *buf, int len)
{
	for (__u32 i = 0; i < SBT_MAX_FD_PATTERNS; i++) {
		/* a copy for the lookup: a counter whose address a helper gets
		 * is no longer tracked, and older verifiers call the loop endless */
		__u32 key = i;
		struct sbt_fd_pattern *p;

		if (i >= n_patterns)
			break;
		p = bpf_map_lookup_elem(&fd_patterns, &key);
		if (p && match_pattern(buf, len, p))
			return p->kind;
	}
	return SBT_FD_NONE;
}

static __always_inline int open_enter(const char *upath)
{
	__u64 id = bpf_get_current_pid_tgid();
	__u32 tid = (__u32)id, kind, zero = 0;
	char *buf;
	int len;

	if (!sbt_is_traced(id >> 32))
		return 0;
	buf = bpf_map_lookup_elem(&path_buf, &zero);
	if (!buf)
		return 0;
	len = bpf_probe_read_user_str(buf, PATH_MAX_BPF, upath);
	if (len <= 1)
		return 0;
	len -= 1; /* without the NUL */
	kind = classify_path(buf, len);
	if (kind != SBT_FD_NONE)
		bpf_map_update_elem(&open_pending, &tid, &kind, BPF_ANY);
	else
		lib_open_enter(tid, buf, len);
	return 0;
}

static __always_inline int open_exit(long ret)
{
	__u64 id = bpf_get_current_pid_tgid();
	__u32 tid = (__u32)id, *kind;
	struct sbt_fd_key key = { .tgid = id >> 32, .fd = (__s32)ret };

	lib_open_exit(tid, ret);
	kind = bpf_map_lookup_elem(&open_pending, &tid);
	if (!kind)
		return 0;
	if (ret >= 0)
		bpf_map_update_elem(&accel_fds, &key, kind, BPF_ANY);
	bpf_map_delete_elem(&open_pending, &tid);
	return 0;
}

SEC("tp/syscalls/sys_enter_openat")
int openat_enter(struct trace_event_raw_sys_enter *ctx)
{
	return open_enter((const char *)ctx->args[1]);
}

SEC("tp/syscalls/sys_exit_openat")
int openat_exit(struct trace_event_raw_sys_exit *ctx)
{
	return open_exit(ctx->ret);
}

SEC("tp/syscalls/sys_enter_close")
int close_enter(struct trace_event_raw_sys_enter *ctx)
{
	__u64 id = bpf_get_current_pid_tgid();
	struct sbt_fd_key key = { .tgid = id >> 32, .fd = (__s32)ctx->args[0] };

	if (sbt_is_traced(key.tgid))
		bpf_map_delete_elem(&accel_fds, &key);
	return 0;
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
	bool iommu = r->fd_kind == SBT_FD_CONTAINER || r->fd_kind == SBT_FD_PATH ||
		     r->fd_kind == SBT_FD_SPAPR;
	bool device = r->fd_kind == SBT_FD_DEVICE || r->fd_kind == SBT_FD_PATH;
	bool spapr = r->fd_kind == SBT_FD_SPAPR;

	if (!(iommu && (r->cmd == SBT_VFIO_IOMMU_MAP_DMA ||
			r->cmd == SBT_VFIO_IOMMU_UNMAP_DMA)) &&
	    !(device && r->cmd == SBT_VFIO_DEVICE_SET_IRQS) &&
	    !(spapr && (r->cmd == SBT_VFIO_SPAPR_REGISTER_MEMORY ||
			r->cmd == SBT_VFIO_SPAPR_UNREGISTER_MEMORY ||
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
		r->decoded = r->cmd == SBT_VFIO_SPAPR_REGISTER_MEMORY ? SBT_DEC_SPAPR_REGISTER
								       : SBT_DEC_SPAPR_UNREGISTER;
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

SEC("tp/syscalls/sys_enter_ioctl")
int ioctl_enter(struct trace_event_raw_sys_enter *ctx)
{
	__u64 id = bpf_get_current_pid_tgid();
	struct sbt_fd_key key = { .tgid = id >> 32, .fd = (__s32)ctx->args[0] };
	__u32 tid = (__u32)id, *kind;
	struct sbt_ioctl r = {};
	__u32 daemon_kind, group;

	if (daemon_mode && daemon_vfio_cmd((__u32)ctx->args[1])) {
		/* the always-on tier: any VFIO ioctl on a VFIO file, the file
		 * looked at now, also of a process a detail window traces (a
		 * group it opens in the window is in no table: there is no
		 * hook on opens). VFIO's numbers on another file: nothing. */
		daemon_kind = daemon_fd_kind(key.fd, &group);
		if (daemon_kind == SBT_FD_NONE)
			return 0;
		daemon_seen(key.tgid);
		if (daemon_kind == SBT_FD_GROUP) {
			daemon_group_opened(key.tgid, group);
			if ((__u32)ctx->args[1] == SBT_VFIO_GROUP_SET_CONTAINER)
				daemon_set_container_enter(tid, group, ctx->args[2]);
		}
		kind = &daemon_kind;
	} else if (sbt_is_traced(key.tgid)) {
		kind = bpf_map_lookup_elem(&accel_fds, &key);
	} else {
		return 0;
	}
	if (!kind)
		return 0;
	r.start_ts = bpf_ktime_get_boot_ns();
	r.fd = key.fd;
	r.cmd = (__u32)ctx->args[1];
	r.arg = ctx->args[2];
	r.fd_kind = *kind;
	decode_arg(&r);
	bpf_map_update_elem(&ioctl_pending, &tid, &r, BPF_ANY);
	return 0;
}

SEC("tp/syscalls/sys_exit_ioctl")
int ioctl_exit(struct trace_event_raw_sys_exit *ctx)
{
	__u64 id = bpf_get_current_pid_tgid();
	__u32 tid = (__u32)id, kind = SBT_FD_DEVICE;
	struct sbt_ioctl *p, *r;

	p = bpf_map_lookup_elem(&ioctl_pending, &tid);
	if (!p)
		return 0;
	if (p->cmd == SBT_VFIO_GROUP_GET_DEVICE_FD && ctx->ret >= 0 &&
	    p->fd_kind != SBT_FD_CONTAINER && p->fd_kind != SBT_FD_SPAPR &&
	    p->fd_kind != SBT_FD_DEVICE) {
		struct sbt_fd_key key = { .tgid = id >> 32, .fd = (__s32)ctx->ret };

		bpf_map_update_elem(&accel_fds, &key, &kind, BPF_ANY);
	}
	/* the container's IOMMU is known now: its later commands decode by it */
	if (p->cmd == SBT_VFIO_SET_IOMMU && ctx->ret == 0 && !daemon_mode &&
	    (p->fd_kind == SBT_FD_CONTAINER || p->fd_kind == SBT_FD_SPAPR)) {
		struct sbt_fd_key key = { .tgid = id >> 32, .fd = p->fd };

		kind = p->arg == SBT_VFIO_SPAPR_TCE_IOMMU || p->arg == SBT_VFIO_SPAPR_TCE_v2_IOMMU
			       ? SBT_FD_SPAPR
			       : SBT_FD_CONTAINER;
		bpf_map_update_elem(&accel_fds, &key, &kind, BPF_EXIST);
	}
	decode_out(p, ctx->ret);
	if (daemon_mode)
		daemon_ioctl(id >> 32, tid, p, ctx->ret, bpf_ktime_get_boot_ns());
	/* in daemon mode, records only for the flight recorder */
	r = daemon_mode && !daemon_record ? NULL : sbt_reserve(sizeof(*r), SBT_IOCTL);
	if (r) {
		__builtin_memcpy((char *)r + sizeof(r->h),
				 (char *)p + sizeof(p->h),
				 sizeof(*r) - sizeof(r->h));
		r->ret = ctx->ret;
		/* in a daemon's window, a process not traced yet is one to
		 * describe (and its runtime to find) while it is there */
		if (catch_newcomers && !sbt_is_traced(id >> 32))
			bpf_ringbuf_submit(r, BPF_RB_FORCE_WAKEUP);
		else
			sbt_submit(r);
	}
	bpf_map_delete_elem(&ioctl_pending, &tid);
	return 0;
}
