/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * What to trace and how: the options `record` takes from its command line
 * and the daemon sets from its own, read by the attach layer.
 */
#ifndef SBT_TRACE_OPTS_H
#define SBT_TRACE_OPTS_H

#include <stdbool.h>
#include <sys/types.h>

#include "attach/devfilter.h"
#include "events.h"
#include "probes/probes.h"

#define SBT_MAX_PIDS 64
#define SBT_MAX_USER_PROBES 64
#define SBT_MAX_VFIO_PATHS (SBT_MAX_FD_PATTERNS - SBT_VFIO_FD_PATTERNS)
#define SBT_MAX_IRQS 64
#define SBT_DEFAULT_BUFFER (8u << 20)
#define SBT_DEFAULT_MAX_PROBES 4096

struct record_opts {
	pid_t pids[SBT_MAX_PIDS];
	int npids;
	char *command; /* -c */
	double duration; /* seconds; 0 = until done or Ctrl-C */
	const char *output; /* NULL: spyre-bpftrace-<pid|command>.pftrace */
	const char *format; /* --format, else by the output's extension */
	struct probe_spec probes[SBT_MAX_USER_PROBES];
	int nprobes;
	const char *vfio_paths[SBT_MAX_VFIO_PATHS];
	int nvfio_paths;
	/* a --vfio-path given as a directory, as its files' glob (DIR/ *) */
	char vfio_dir_globs[SBT_MAX_VFIO_PATHS][2 * SBT_FD_PATTERN_LEN];
	int irqs[SBT_MAX_IRQS];
	int nirqs;
	unsigned long buffer_size;
	unsigned long max_probes; /* uprobes per traced process */
	bool keep_command; /* the -c command outlives the tracing */
	bool no_wake_hook; /* which thread an interrupt woke is not looked for: streams stay off cards */
	bool wake_sched; /* looked for by a program on every wake-up (sched_waking), not the eventfd's */
	struct devfilter devices; /* --device; Spyre's ids if none given */
	int driver_mode; /* enum driver_mode (driver.h) */
	int verbose;
	bool quiet; /* no live status, no summary */
	bool daemon; /* the daemon: every process's VFIO files, counted in the kernel */
	bool daemon_record; /* ... and their records kept in its flight recorder */
	unsigned daemon_sample_ioctls; /* 1 in N VFIO ioctls timed and recorded (a power of two; 0, 1: all) */
	uint64_t daemon_slow_ns; /* an ioctl this long is slow (the trigger's); 0: not looked for */
};

#endif
