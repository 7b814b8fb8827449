/* SPDX-License-Identifier: GPL-2.0-only */
/* The daemon's command line: what it watches, where it writes, its flight
 * recorder, windows, triggers and the kubelet. */
#ifndef SBT_DAEMON_OPTIONS_H
#define SBT_DAEMON_OPTIONS_H

#include <stdbool.h>

#include "attach/trace_opts.h"
#include "daemon/triggers.h"

#define DEFAULT_LISTEN "127.0.0.1:9464"
#define DEFAULT_STATE_DIR "/var/lib/spyre-bpftrace"

/* --sample-ioctls: 1 in N VFIO ioctls timed and recorded, by default;
 * bench/daemon_cost.py measured the cost of each N */
#define DAEMON_SAMPLE_IOCTLS 16
#define DAEMON_SAMPLE_IOCTLS_S "16"
#define DAEMON_MAX_SAMPLE_IOCTLS 1024

struct daemon_opts {
	struct record_opts rec; /* the kernel-side filters, as record takes them */
	const char *listen, *runtime_dir, *state_dir;
	bool every_device;
	double recorder_seconds; /* 0: no flight recorder */
	unsigned long recorder_mib, spool_mib;
	double window_seconds, sample_every; /* sample_every 0: no sampling */
	double trigger_before; /* a trigger's snapshot reaches this far back */
	struct trigger_cfg trig;
	const char *kubelet_socket, *kubelet_resource; /* socket NULL: not asked */
	char vfio_dirs[SBT_MAX_MOCK_DIRS][256]; /* --vfio-path, as rec.vfio_paths points to them */
};

/* Parses argv into o, defaults first; exits on --help and on an error, as
 * a command line does. */
void daemon_parse_opts(int argc, char **argv, struct daemon_opts *o);

#endif
