/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * The daemon's metrics in Prometheus's text exposition format (0.0.4):
 * names in base units, counters ending in _total, labels bounded (a
 * command, a card: never a pid, an address or a cgroup).
 */
#ifndef SBT_METRICS_H
#define SBT_METRICS_H

#include <stddef.h>
#include <stdint.h>

#include "daemon/counters.h"
#include "daemon/devstats.h"
#include "daemon/kubelet.h"
#include "daemon/recorder.h"
#include "daemon/snapshot.h"
#include "daemon/window.h"

#define METRICS_PROGS 16

/* A loaded program's runs and run time as the kernel counted them (only
 * while its statistics are on: cost.h) */
struct metrics_prog {
	char name[64]; /* the program's own name: the kernel's is cut at 15 */
	double seconds;
	uint64_t runs;
};

struct metrics_self {
	uint64_t lost_records;
	uint64_t ring_bytes, ring_peak_bytes; /* the kernel's ring buffer: size, most in use */
	bool bpf_stats; /* the kernel counts the programs' runs now (ctl cost, or the sysctl) */
	struct metrics_prog progs[METRICS_PROGS]; /* the daemon's loaded programs */
	int nprogs;
	uint64_t scrapes;
	double start_time; /* seconds since the epoch */
	uint64_t snapshots[SNAP_N], snapshot_failures;
	uint64_t snapshots_cut; /* written with only their newest part, to fit the spool */
	uint64_t windows[3]; /* detail windows opened, by enum window_reason */
	uint64_t windows_deferred; /* not opened: the last one's uprobes still being removed */
	uint64_t uprobes_removing; /* a closed window's, not yet gone */
	bool window_open;
	uint64_t spool_bytes, recorder_bytes;
	const char *ioctl_hook; /* how VFIO ioctls are seen: fentry, kprobe, tracepoint */
	unsigned sample_ioctls; /* 1 in N timed and recorded */
	const char *wake_hook; /* in windows, who an interrupt woke: eventfd, sched_waking; NULL none */
	uint64_t recorder_aged, recorder_unkept; /* records let go by age; not kept (too large, no memory) */
	struct recorder_evicted_uid recorder_evicted[RECORDER_USERS_NAMED + 1]; /* to make room, by user */
	int recorder_evicted_uids;
	const struct allocations *alloc; /* the kubelet's; v NULL: never answered */
	const struct devstats *devstats; /* the detail windows' jobs, sampled */
};

/* The page for /metrics: malloc'd, NUL ended, its length in *len; NULL
 * when out of memory. */
char *metrics_render(const struct daemon_counters *f, const struct daemon_counts *c, const struct metrics_self *self,
		     size_t *len);

#endif
