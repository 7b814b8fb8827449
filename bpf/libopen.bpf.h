/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * Libraries opened while traced: when a traced process opens a shared
 * object (a dlopen() of libflex.so from a Python package, say), the loader
 * is told at once, so that, if it is a runtime library, the probes are on
 * the file before the process gets far into it.
 * Part of the open paths in ioctl.bpf.c (openat's tracepoints, or the
 * kernel's do_filp_open), which have the path in hand.
 */
#ifndef SBT_LIBOPEN_BPF_H
#define SBT_LIBOPEN_BPF_H

#include "common.bpf.h"

/* openat() of a library in flight: tid -> the record to send if it opens */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 1024);
	__type(key, __u32);
	__type(value, struct sbt_lib_open);
} lib_pending SEC(".maps");

/* where a record is built before it goes into lib_pending (too big for the BPF stack) */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct sbt_lib_open);
} lib_scratch SEC(".maps");

static __always_inline bool dot_so_at(const char *path, int at)
{
	return path[at & (SBT_LIB_PATH_LEN - 1)] == '.' && path[(at + 1) & (SBT_LIB_PATH_LEN - 1)] == 's' &&
	       path[(at + 2) & (SBT_LIB_PATH_LEN - 1)] == 'o';
}

/* A shared object by its name: "x.so", or "x.so.1" up to "x.so.1.22.333".
 * The loader decides by the whole name whether it is a runtime library;
 * here only fixed positions are looked at, which the verifier takes in
 * one pass. path: len bytes without the NUL. */
static __always_inline void lib_open_enter(__u32 tid, const char *path, int len)
{
	struct sbt_lib_open *r;
	__u32 zero = 0;

	if (len < 4 || len >= SBT_LIB_PATH_LEN)
		return;
	if (dot_so_at(path, len - 3))
		goto hit;
#pragma unroll
	for (int k = 5; k <= 14; k++)
		if (len > k && dot_so_at(path, len - k) && path[(len - k + 3) & (SBT_LIB_PATH_LEN - 1)] == '.' &&
		    path[(len - k + 4) & (SBT_LIB_PATH_LEN - 1)] >= '0' &&
		    path[(len - k + 4) & (SBT_LIB_PATH_LEN - 1)] <= '9')
			goto hit;
	return;
hit:
	r = bpf_map_lookup_elem(&lib_scratch, &zero);
	if (!r)
		return;
	r->path_len = (__u32)len + 1;
	bpf_probe_read_kernel_str(r->path, sizeof(r->path), path);
	bpf_map_update_elem(&lib_pending, &tid, r, BPF_ANY);
}

/* opened: the open succeeded; fd: its fd, or -1 where the hook comes
 * before the fd is given out (do_filp_open) */
static __always_inline void lib_open_exit(__u32 tid, bool opened, __s32 fd)
{
	struct sbt_lib_open *p = bpf_map_lookup_elem(&lib_pending, &tid), *r;

	if (!p)
		return;
	if (opened) {
		r = sbt_reserve(sizeof(*r), SBT_LIB_OPEN);
		if (r) {
			r->fd = fd;
			r->path_len = p->path_len;
			__builtin_memcpy(r->path, p->path, sizeof(r->path));
			/* the loader attaches now, not at its next tick */
			bpf_ringbuf_submit(r, BPF_RB_FORCE_WAKEUP);
		}
	}
	bpf_map_delete_elem(&lib_pending, &tid);
}

#endif /* SBT_LIBOPEN_BPF_H */
