/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * A snapshot of the daemon's flight recorder: the records of a window are
 * copied out at once (the recorder goes on), then written by a snapshot
 * job, in a low-priority thread (snapshot_queue.h), to a trace and a
 * manifest beside it.
 */
#ifndef SBT_SNAPSHOT_H
#define SBT_SNAPSHOT_H

#include <limits.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "daemon/recorder.h"

struct probe_set;

struct snapshot_window {
	uint64_t from_realtime, to_realtime; /* as asked */
	uint64_t from_boot, to_boot; /* the same on the trace's clock */
	uint64_t oldest_boot; /* out: the oldest record the recorder still had */
	uint64_t lost; /* records the ring buffer could not take, ever */
	/* out: records of the window evicted from the full recorder, by user
	 * (most first), and whether every eviction that may count is known */
	uint64_t evicted;
	struct recorder_evicted_uid evicted_by_uid[8];
	int nevicted_uids;
	bool evicted_sure;
};

/* Why a snapshot was written (the triggers' in their order, triggers.h). */
enum snap_reason { SNAP_REQUEST, SNAP_WINDOW, SNAP_ERRORS, SNAP_SLOW, SNAP_LOST, SNAP_N };

const char *snapshot_reason_name(enum snap_reason r); /* request, window, errors, ... */

/* A process left out of a snapshot over [from, to] (BOOTTIME): one that
 * called the runtime in a detail window but held no card there. */
struct snapshot_leave_out {
	uint32_t pid;
	uint64_t from, to;
};

#define SNAPSHOT_LEAVE_OUT 64

struct snapshot_job {
	struct snapshot_window w;
	struct snapshot_leave_out leave_out[SNAPSHOT_LEAVE_OUT]; /* given to snapshot_collect */
	int nleave_out;
	uint64_t left_out; /* records of them not written */
	char path[PATH_MAX];
	enum snap_reason reason;
	char *windows; /* the detail windows in it, a JSON array (manifest) */
	uint8_t *buf; /* records: the probes' descriptions, then the window's */
	size_t len, cap;
	uint64_t records; /* of the window; once cut, those kept */
	uint64_t max_bytes; /* trace and manifest at most; 0: no bound */
	uint64_t window_records; /* before any cut */
	uint64_t kept_from_boot; /* once cut: the oldest record kept */
	bool cut; /* the oldest records were left out to fit max_bytes */
	int client; /* who waits for the answer; -1: nobody */
	bool spooled; /* in the state directory: its bound is kept after */
	/* spooled: the spool, whose older snapshots make room for this one
	 * before it takes its name, so the spool never holds more than
	 * max_bytes (its bound) at any moment */
	const char *spool_dir;
	uint64_t over_bytes; /* the last try's trace, left unwritten: over max_bytes alone */
	const char *note; /* a line for the answer (a static string), or NULL */
	bool oom;
};

/* Copies the window out of the recorder, after a description of each
 * probed function (the records of runtime calls name them by number).
 * NULL when out of memory. */
/* The window's records, copied out of the recorder (under its lock), but
 * those of the processes to leave out. */
struct snapshot_job *snapshot_collect(const struct flight_recorder *r, struct snapshot_window *w,
				      const struct probe_set *probes, const struct snapshot_leave_out *leave_out,
				      int nleave_out);
/* Writes the job's records to j->path (.pftrace, .json or .sbt) and
 * path.manifest.json, both atomically, mode 0600. With j->max_bytes, a
 * snapshot over it is written again with only its newest records (every
 * description kept) until it fits, in a few tries: j->cut, and the
 * manifest says so and which range it kept. 0, or -1 with err. */
int snapshot_write(struct snapshot_job *j, char *err, size_t errlen);
void snapshot_job_free(struct snapshot_job *j);

#endif
