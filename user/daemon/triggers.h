/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * The daemon's automatic triggers: from the always-on counters, checked
 * every few seconds, a burst of failed VFIO ioctls, a VFIO ioctl slower
 * than a threshold, or records lost, each at most once per interval.
 * A trigger opens a detail window and ends in a snapshot in the spool.
 */
#ifndef SBT_TRIGGERS_H
#define SBT_TRIGGERS_H

#include <stdbool.h>
#include <stdint.h>

enum trigger { TRIG_ERRORS, TRIG_SLOW, TRIG_LOST, TRIG_N };

struct trigger_cfg {
	uint64_t errors; /* failed VFIO ioctls in one check that fire it; 0: off */
	uint64_t slow_ns; /* a VFIO ioctl at least this slow fires it; 0: off */
	bool lost; /* records lost fire it */
	uint64_t interval_ns; /* the least time between two of the same kind */
};

struct triggers {
	struct trigger_cfg cfg;
	bool primed; /* the first check only learns the counters */
	uint64_t seen[TRIG_N]; /* the counters at the last check */
	uint64_t last[TRIG_N]; /* when each fired last (BOOTTIME), 0: never */
	uint64_t fired[TRIG_N], held[TRIG_N]; /* fired; would have, but too soon */
};

/* The counters now (totals over the daemon's life, each): which trigger
 * fires, TRIG_N for none. One at most per check; the others wait for the
 * next check (their counters are not taken as seen). */
enum trigger triggers_check(struct triggers *t, const uint64_t totals[TRIG_N], uint64_t now);
const char *trigger_name(enum trigger k); /* errors, slow_ioctl, lost */

#endif
