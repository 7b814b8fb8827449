/* SPDX-License-Identifier: GPL-2.0-only */
/* A window of the daemon's flight recorder to a trace and its manifest. */
#ifndef SBT_SNAPSHOT_H
#define SBT_SNAPSHOT_H

#include <stddef.h>
#include <stdint.h>

#include "recorder.h"

struct snapshot_window {
	uint64_t from_realtime, to_realtime; /* as asked */
	uint64_t from_boot, to_boot; /* the same on the trace's clock */
	uint64_t oldest_boot; /* out: the oldest record the recorder still had */
	uint64_t lost, dropped; /* records the ring buffer and the recorder could not keep */
};

/* Writes the records of the window to path (.pftrace, .json or .sbt) and
 * path.manifest.json, both atomically, mode 0600. 0, or -1 with err. */
int snapshot_write(const struct flight_recorder *r, struct snapshot_window *w, const char *path,
		   char *err, size_t errlen, uint64_t *records);

#endif
