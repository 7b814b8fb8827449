// SPDX-License-Identifier: GPL-2.0-only
/*
 * Snapshots of the flight recorder the daemon asks for: a window's end
 * (ctl record), a trigger's, ctl snapshot's; queued for the snapshot
 * thread and answered when written.
 */
#include <errno.h>
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/clock.h"
#include "base/log.h"
#include "base/procfs.h"
#include "daemon/daemon_state.h"
#include "daemon/spool.h"

/* The window between the kernel's clocks: REALTIME minus BOOTTIME now. */
uint64_t daemon_realtime_offset(void)
{
	struct sbt_meta_clock c;

	sbt_clock_snapshot(&c);
	return c.realtime - c.boottime;
}

/* What the full recorder let go of the window, for the answer: "" when nothing. */
static void evicted_note(const struct snapshot_window *w, char *buf, size_t len)
{
	char name[16];
	size_t at;

	buf[0] = 0;
	if (!w->evicted && w->evicted_sure)
		return;
	at = (size_t)snprintf(buf, len, "; %s%llu records of the window were evicted from the full recorder (",
			      w->evicted_sure ? "" : "at least ", (unsigned long long)w->evicted);
	for (int i = 0; i < w->nevicted_uids && at < len; i++)
		at += (size_t)snprintf(buf + at, len - at, "%suser %s: %llu", i ? ", " : "",
				       recorder_uid_name(w->evicted_by_uid[i].uid, name),
				       (unsigned long long)w->evicted_by_uid[i].records);
	if (at < len)
		snprintf(buf + at, len - at, "; hint: a larger --recorder-mib)");
}

/* Written (or not), in the snapshot thread: the spool's bound, the answer. */
void snapshot_done(void *ctx, struct snapshot_job *j, int ret, const char *err)
{
	struct daemon *d = ctx;
	char msg[2 * PATH_MAX + 768], why[256], cut[160], evicted[256];
	uint64_t spool;

	if (!ret && j->spooled && spool_trim(d->spool, (uint64_t)d->o->spool_mib << 20, j->path) == -EFBIG) {
		snprintf(why, sizeof(why),
			 "the snapshot is over --spool-mib %lu even cut to its newest records; hint: "
			 "a larger --spool-mib",
			 d->o->spool_mib);
		err = why;
		ret = -1;
	}
	spool = spool_usage(d->spool);
	malloc_trim(0); /* the writer's buffers back to the system, not kept resident */
	pthread_mutex_lock(&d->lock);
	d->self.spool_bytes = spool;
	if (ret)
		d->self.snapshot_failures++;
	else
		d->self.snapshots[j->reason]++;
	if (!ret && j->cut)
		d->self.snapshots_cut++;
	pthread_mutex_unlock(&d->lock);
	cut[0] = 0;
	if (!ret && j->cut)
		snprintf(cut, sizeof(cut), " (cut to fit --spool-mib %lu: the newest %.3f s, %llu of %llu records)",
			 d->o->spool_mib, (double)(j->w.to_boot - j->kept_from_boot) / 1e9,
			 (unsigned long long)j->records, (unsigned long long)j->window_records);
	if (ret) {
		sbt_warn("snapshot (%s) failed: %s", snapshot_reason_name(j->reason), err);
		snprintf(msg, sizeof(msg), "error: %.1000s\n", err);
	} else {
		sbt_note("snapshot (%s): %llu records into %s%s", snapshot_reason_name(j->reason),
			 (unsigned long long)j->records, j->path, cut);
		evicted_note(&j->w, evicted, sizeof(evicted));
		snprintf(msg, sizeof(msg),
			 "ok %s\n%llu records%s%s; the recorder goes back to %.1f s before "
			 "the window's end%s; manifest %s.manifest.json\n",
			 j->path, (unsigned long long)j->records, cut,
			 j->records ? "" : " (nothing happened on a card in that time)",
			 j->w.oldest_boot && j->w.to_boot > j->w.oldest_boot
				 ? (double)(j->w.to_boot - j->w.oldest_boot) / 1e9
				 : 0.0,
			 evicted, j->path);
	}
	if (!ret && j->note)
		snprintf(msg + strlen(msg), sizeof(msg) - strlen(msg), "%s", j->note);
	if (j->client >= 0)
		control_reply(j->client, msg);
}

/* Counted as failed, and said. */
void snapshot_dropped(struct daemon *d, enum snap_reason why, const char *because)
{
	pthread_mutex_lock(&d->lock);
	d->self.snapshot_failures++;
	pthread_mutex_unlock(&d->lock);
	sbt_warn("snapshot (%s) dropped: %s", snapshot_reason_name(why), because);
}

/* A snapshot of [from, to] (BOOTTIME) to path, or into the spool (NULL),
 * handed to the snapshot thread. Answers client (-1: nobody) once written,
 * or now with the error. With can_wait, a queue with no room for it is
 * the caller's to wait for: -EBUSY, nothing said or counted. */
int submit_snapshot(struct daemon *d, uint64_t from, uint64_t to, const char *path, enum snap_reason why, int client,
		    const char *note, bool can_wait)
{
	uint64_t off = daemon_realtime_offset();
	struct snapshot_window w = {
		.from_realtime = from + off, .to_realtime = to + off, .from_boot = from, .to_boot = to
	};
	struct snapshot_job *j;
	struct snapshot_leave_out leave[SNAPSHOT_LEAVE_OUT];
	int nleave, ret = -ENOMEM;

	if (!d->dr.rb) {
		if (client >= 0)
			control_reply(client, NO_RECORDER);
		return -ENODEV;
	}
	drainer_catch_up(&d->dr); /* what came just now too */
	w.lost = attach_read_lost(&d->at);
	pthread_mutex_lock(&d->rec_lock);
	nleave = window_leave_out(&d->win, from, to, leave, SNAPSHOT_LEAVE_OUT);
	j = snapshot_collect(&d->rec, &w, &d->at.probes, leave, nleave);
	pthread_mutex_unlock(&d->rec_lock);
	if (j && (j->windows = window_json(&d->win, from, to))) {
		j->reason = why;
		j->client = client;
		j->spooled = !path;
		/* the spool's bound holds for each snapshot alone too: one
		 * over it keeps its newest part rather than nothing */
		if (j->spooled) {
			j->max_bytes = (uint64_t)d->o->spool_mib << 20;
			j->spool_dir = d->spool;
		}
		j->note = note;
		if (path)
			snprintf(j->path, sizeof(j->path), "%s", path);
		else
			spool_name(d->spool, snapshot_reason_name(why), to + off, j->path, sizeof(j->path));
	}
	if (j && j->windows && !(ret = snapq_submit(&d->q, j)))
		return 0;
	snapshot_job_free(j);
	if (ret != -ENOMEM && can_wait)
		return -EBUSY;
	snapshot_dropped(d, why,
			 ret == -EBUSY	   ? "four wait to be written already"
			 : ret == -ENOBUFS ? "those waiting to be written hold a recorder's worth of records already"
					   : "out of memory");
	if (client >= 0)
		control_reply(client, ret != -ENOMEM ? "error: busy writing snapshots; hint: ask again in a while\n"
						     : "error: out of memory\n");
	return ret;
}

/* The pending trigger's snapshot, from --trigger-before ago to now, into
 * the spool; with the queue full it waits for room rather than being
 * dropped (asked again each tick), and any trigger meanwhile is in it. */
void write_fired(struct daemon *d, uint64_t now)
{
	size_t bytes;

	pthread_mutex_lock(&d->rec_lock);
	bytes = recorder_used(&d->rec); /* about what it copies: not copied to learn it does not fit */
	pthread_mutex_unlock(&d->rec_lock);
	if (!snapq_room(&d->q, bytes) ||
	    submit_snapshot(d, d->fired.from, now, NULL, (enum snap_reason)(SNAP_ERRORS + d->fired.kind), -1, NULL,
			    true) == -EBUSY) {
		if (!d->fired.waiting)
			sbt_note("trigger %s: its snapshot waits for room behind those being written",
				 trigger_name(d->fired.kind));
		d->fired.waiting = true;
		return;
	}
	d->fired.pending = d->fired.waiting = false;
}
