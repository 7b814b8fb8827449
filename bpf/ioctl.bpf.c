// SPDX-License-Identifier: GPL-2.0-only
/*
 * ioctl path: VFIO ioctls from the syscall tracepoints, for record's
 * traced processes and for the daemon where vfio's own handlers cannot be
 * hooked (ioctl_decode.bpf.h has what both hooks share).
 *
 * record records ioctls on accelerator files only. Which fds those are is
 * kept in accel_fds: the loader seeds it from /proc/PID/fd, openat() of a
 * path matching fd_patterns adds to it, VFIO_GROUP_GET_DEVICE_FD adds the
 * device fd it returns, close() removes. Where vfio's own handlers carry
 * the ioctls (driver.bpf.c, ioctl_by_driver), none of these syscall
 * tracepoints is attached: the opens of libraries come from the kernel's
 * do_filp_open instead (below), so no syscall of the host pays.
 */
#include "common.bpf.h"
#include "daemon.bpf.h"
#include "ioctl_decode.bpf.h"
#include "libopen.bpf.h"

#define PATH_MAX_BPF SBT_LIB_PATH_LEN

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

static __always_inline bool match_pattern(const char *path, int len, const struct sbt_fd_pattern *p)
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

/* The per-CPU buffer for an open's path, when the opener is traced;
 * NULL otherwise (nothing to do). */
static __always_inline char *traced_path_buf(__u64 id)
{
	__u32 zero = 0;

	return sbt_is_traced(id >> 32) ? bpf_map_lookup_elem(&path_buf, &zero) : NULL;
}

static __always_inline int open_enter(const char *upath)
{
	__u64 id = bpf_get_current_pid_tgid();
	__u32 tid = (__u32)id, kind;
	char *buf = traced_path_buf(id);
	int len;

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

	lib_open_exit(tid, ret >= 0, (__s32)ret);
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

/* ioctls of traced processes with VFIO's numbers on files not known to
 * be VFIO's (record's summary hints at --vfio-path) */
volatile __u64 vfio_cmds_unknown_files __weak = 0;

SEC("tp/syscalls/sys_enter_ioctl")
int ioctl_enter(struct trace_event_raw_sys_enter *ctx)
{
	__u64 id = bpf_get_current_pid_tgid();
	struct sbt_fd_key key = { .tgid = id >> 32, .fd = (__s32)ctx->args[0] };
	__u32 cmd = (__u32)ctx->args[1], *kind, group;

	if (daemon_mode) {
		/* the always-on tier: any VFIO ioctl on a VFIO file, the file
		 * looked at now. VFIO's numbers on another file, or another
		 * number (every other ioctl of the host): nothing, at once */
		struct daemon_cpu *cpu;
		__u32 daemon_kind;

		if (!daemon_vfio_cmd(cmd))
			return 0;
		daemon_kind = daemon_fd_kind(key.fd, &group, &cpu);
		if (daemon_kind != SBT_FD_NONE)
			daemon_ioctl_begin(id, key.fd, cmd, ctx->args[2], daemon_kind, group, cpu);
		return 0;
	}
	if (!sbt_is_traced(key.tgid))
		return 0;
	if (!(kind = bpf_map_lookup_elem(&accel_fds, &key))) {
		/* VFIO's numbers on a file record does not know: a mock's,
		 * not named by --vfio-path? The summary says so. */
		if (daemon_vfio_cmd(cmd))
			__sync_fetch_and_add(&vfio_cmds_unknown_files, 1);
		return 0;
	}
	ioctl_begin(id, key.fd, cmd, ctx->args[2], *kind, 1);
	return 0;
}

SEC("tp/syscalls/sys_exit_ioctl")
int ioctl_exit(struct trace_event_raw_sys_exit *ctx)
{
	ioctl_finish(bpf_get_current_pid_tgid(), ctx->ret);
	return 0;
}

/* Opens of libraries where no syscall tracepoint is attached: do_filp_open
 * is where every open(), openat() and openat2() of a path ends up (fentry,
 * else kprobe: the loader tries). Its fd is not given out yet. */
static __always_inline int filp_open_enter(struct filename *name)
{
	__u64 id = bpf_get_current_pid_tgid();
	char *buf = traced_path_buf(id);
	int len;

	if (!buf)
		return 0;
	len = bpf_probe_read_kernel_str(buf, PATH_MAX_BPF, BPF_CORE_READ(name, name));
	if (len > 1)
		lib_open_enter((__u32)id, buf, len - 1);
	return 0;
}

static __always_inline int filp_open_exit(struct file *f)
{
	/* a struct file, or an -errno in the pointer */
	lib_open_exit((__u32)bpf_get_current_pid_tgid(), (unsigned long)f < (unsigned long)-4095, -1);
	return 0;
}

SEC("fentry/do_filp_open")
int BPF_PROG(do_filp_open_fentry, int dfd, struct filename *name)
{
	return filp_open_enter(name);
}

SEC("fexit/do_filp_open")
int BPF_PROG(do_filp_open_fexit, int dfd, struct filename *name, void *op, struct file *ret)
{
	return filp_open_exit(ret);
}

SEC("kprobe/do_filp_open")
int BPF_KPROBE(do_filp_open_kprobe, int dfd, struct filename *name)
{
	return filp_open_enter(name);
}

SEC("kretprobe/do_filp_open")
int BPF_KRETPROBE(do_filp_open_kretprobe, struct file *ret)
{
	return filp_open_exit(ret);
}
