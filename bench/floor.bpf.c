// SPDX-License-Identifier: GPL-2.0-only
/* The floor of a probe's cost: programs that do nothing, programs that
 * only count, and one that only reads the clock (as every timed hook
 * must), for bench/floor.c to put on the same sites as the tracer; an
 * empty wake-up hook for bench/hook-toggle. */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u64);
} hits SEC(".maps");

SEC("uprobe")
int empty_uprobe(void *ctx)
{
	return 0;
}

SEC("tracepoint")
int empty_tp(void *ctx)
{
	return 0;
}

SEC("uprobe")
int count_uprobe(void *ctx)
{
	__u32 zero = 0;
	__u64 *n = bpf_map_lookup_elem(&hits, &zero);

	if (n)
		*n += 1;
	return 0;
}

SEC("tracepoint")
int count_tp(void *ctx)
{
	__u32 zero = 0;
	__u64 *n = bpf_map_lookup_elem(&hits, &zero);

	if (n)
		*n += 1;
	return 0;
}

SEC("tracepoint")
int clock_tp(void *ctx)
{
	__u32 zero = 0;
	__u64 *n = bpf_map_lookup_elem(&hits, &zero);

	if (n)
		*n += bpf_ktime_get_boot_ns() & 1; /* kept, not optimised out */
	return 0;
}

/* the floor of any hook on wake-ups: what the kernel's running a program
 * there costs, for bench/wake_cost.py beside record's real one */
SEC("raw_tp/sched_waking")
int empty_waking(void *ctx)
{
	return 0;
}

/* the floor of the daemon's hooks in vfio's three file handlers (where the
 * kernel has vfio's BTF): an empty entry and return program on each, as
 * the daemon puts its own there (bench/guest_daemon_cost.py; loaded by
 * bench-floor fentry only) */
#define EMPTY_FOPS(fn)                                                                                                 \
	SEC("fentry/" #fn)                                                                                             \
	int BPF_PROG(fn##_floor_in)                                                                                   \
	{                                                                                                              \
		return 0;                                                                                              \
	}                                                                                                              \
	SEC("fexit/" #fn)                                                                                              \
	int BPF_PROG(fn##_floor_out)                                                                                  \
	{                                                                                                              \
		return 0;                                                                                              \
	}

EMPTY_FOPS(vfio_fops_unl_ioctl)
EMPTY_FOPS(vfio_group_fops_unl_ioctl)
EMPTY_FOPS(vfio_device_fops_unl_ioctl)

char LICENSE[] SEC("license") = "GPL";
