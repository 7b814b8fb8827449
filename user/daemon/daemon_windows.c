// SPDX-License-Identifier: GPL-2.0-only
/*
 * The detail windows and the triggers, as the main loop tends them: a
 * window opened and closed, the processes that turn up in it taken in,
 * what the library search and the card reader found put on.
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

int card_holders(struct daemon *d, pid_t *pids)
{
	int n;

	pthread_mutex_lock(&d->lock);
	n = daemon_processes(&d->counters, pids, SBT_MAX_PIDS);
	pthread_mutex_unlock(&d->lock);
	return n;
}

static void window_gauges(struct daemon *d)
{
	pthread_mutex_lock(&d->lock);
	d->self.window_open = d->win.open;
	memcpy(d->self.windows, d->win.opened, sizeof(d->self.windows));
	pthread_mutex_unlock(&d->lock);
}

/* Opens a window of seconds: the processes that hold a card now, and any
 * that starts using the runtime in it (none now is fine: an empty window
 * is an answer too). */
bool open_window(struct daemon *d, enum window_reason why, double seconds)
{
	pid_t pids[SBT_MAX_PIDS];
	uint64_t now = sbt_now_boottime(), attached;
	int n, uprobes;
	size_t left = reaper_pending(&d->reaper);
	char took[64];

	/* the last window's uprobes still in place would run beside the new
	 * ones (each call twice), and attaching waits behind their removal */
	if (left) {
		if (!d->reaper_said)
			sbt_note("window (%s) not opened: the last window's %zu uprobes are still being "
				 "removed (the kernel waits for its grace periods: a busy host)",
				 window_reason_name(why), left);
		d->reaper_said = true;
		pthread_mutex_lock(&d->lock);
		d->self.windows_deferred++;
		pthread_mutex_unlock(&d->lock);
		return false;
	}
	d->reaper_said = false;
	n = card_holders(d, pids);

	/* said open before the first uprobe goes in, as closed after the last goes */
	pthread_mutex_lock(&d->lock);
	d->self.window_open = true;
	pthread_mutex_unlock(&d->lock);
	newcomers_start(&d->news, pids, n, now);
	uprobes = window_open(&d->win, &d->at, &d->disc, &d->mw, why, pids, n, now, now + (uint64_t)(seconds * 1e9));
	drainer_kick(&d->dr); /* its passes are a window's from now */
	/* on a host busy on every core attaching waits for the kernel
	 * (seconds seen): the window's time counts from when all are in */
	attached = sbt_now_boottime();
	window_extend(&d->win, attached + (uint64_t)(seconds * 1e9));
	window_gauges(d);
	took[0] = 0;
	if (attached - now > NS / 2)
		snprintf(took, sizeof(took), " (attached in %.1f s: a busy host)", (double)(attached - now) / 1e9);
	sbt_note("window (%s): %.3f s of %d process%s, %d uprobes%s%s", window_reason_name(why), seconds,
		 d->win.nprocs + d->win.nwaiting, d->win.nprocs + d->win.nwaiting == 1 ? "" : "es", uprobes, took,
		 uprobes ? "; newcomers join at their first call" : "; no runtime library known yet");
	return true;
}

/* The window's time is up (or the daemon stops): the uprobes go, and the
 * snapshots waiting for its end are written. */
/* The jobs each card ran in the window just closed, into the sampled
 * device metrics: its records through the correlator (off the metrics'
 * lock; only the main loop writes them). */
static void sample_devices(struct daemon *d, uint64_t from, uint64_t to)
{
	struct snapshot_window w = { .from_boot = from, .to_boot = to };
	struct snapshot_leave_out leave[SNAPSHOT_LEAVE_OUT];
	struct snapshot_job *j;
	struct devstats *next;
	int nleave;

	if (!d->dr.rb || !(next = malloc(sizeof(*next))))
		return;
	drainer_catch_up(&d->dr);
	pthread_mutex_lock(&d->rec_lock);
	nleave = window_leave_out(&d->win, from, to, leave, SNAPSHOT_LEAVE_OUT);
	j = snapshot_collect(&d->rec, &w, &d->at.probes, leave, nleave);
	pthread_mutex_unlock(&d->rec_lock);
	*next = d->devstats;
	if (!j || devstats_add_window(next, j->buf, j->len, (double)(to - from) / 1e9)) {
		sbt_warn("window: its device metrics are not counted: out of memory");
	} else {
		pthread_mutex_lock(&d->lock);
		d->devstats = *next;
		pthread_mutex_unlock(&d->lock);
	}
	snapshot_job_free(j);
	free(next);
	malloc_trim(0); /* the window's copy back to the system: the daemon's resident size is a goal */
}

/* The closed windows' uprobes not yet gone, for /metrics (before the
 * window is said closed, and then a few times a second). */
static void note_removals(struct daemon *d)
{
	size_t n = reaper_pending(&d->reaper);

	pthread_mutex_lock(&d->lock);
	d->self.uprobes_removing = n;
	pthread_mutex_unlock(&d->lock);
}

void close_window(struct daemon *d)
{
	uint64_t now = sbt_now_boottime();
	enum window_reason why = d->win.reason;
	int procs = d->win.nprocs, joined = d->win.joined;

	uint64_t from = d->win.from;

	newcomers_stop(&d->news);
	window_close(&d->win, &d->at, &d->disc, &d->mw, now);
	note_removals(d);
	sbt_info(1, "window: closed in %.2f s (%zu uprobes being removed on their own thread)\n",
		 (double)(sbt_now_boottime() - now) / 1e9, reaper_pending(&d->reaper));
	window_gauges(d);
	sample_devices(d, from, now);
	sbt_note("window (%s) closed: %d process%s traced, %d of them joined while it was open%s",
		 window_reason_name(why), procs, procs == 1 ? "" : "es", joined,
		 d->win.turned_away ? " (some turned away: too many)" : "");
	d->win.turned_away = 0;
	if (d->waiter.client >= 0) {
		submit_snapshot(d, d->waiter.from, now, d->waiter.path[0] ? d->waiter.path : NULL, SNAP_WINDOW,
				d->waiter.client, d->waiter.note, false);
		d->waiter.client = -1;
	}
	if (d->fired.pending)
		write_fired(d, now);
}

/* What the drainer told: processes that turned up in the window, and the
 * cards of those in it, described while they are there. */
void hear_news(struct daemon *d)
{
	struct newcomer news[64];
	int n;

	do {
		n = newcomers_take(&d->news, news, 64);
		for (int i = 0; i < n && d->win.open; i++) {
			const struct newcomer *e = &news[i];

			if (e->kind == NEWS_JOINED)
				window_join(&d->win, &d->at, &d->disc, &d->mw, e->pid, e->how, e->seen);
			else if (e->kind == NEWS_CARD)
				window_cards(&d->win, &e->pid, 1);
			else
				metaw_group_fd(&d->mw, e->pid, e->fd);
		}
	} while (n == 64);
}

/* Card holders' cards read: those waiting for them are taken into the window. */
void take_cards(struct daemon *d)
{
	struct cardscan_answer got[32];
	int n;

	do {
		n = cardscan_take(&d->scan, got, 32);
		for (int i = 0; i < n; i++)
			window_scanned(&d->win, &d->at, &d->disc, &d->mw, &got[i]);
	} while (n == 32);
}

/* Between windows: the runtime a card holder has mapped is read (once a
 * process), so that the next window's probes are on it before a new
 * process of it makes its first call. Nothing is attached. */
static void learn_libraries(struct daemon *d, const pid_t *pids, int n, uint64_t now)
{
	for (int i = 0; i < n && !daemon_stop_sig; i++) {
		bool known = false;

		for (unsigned int k = 0; k < SBT_MAX_PIDS && !known; k++)
			known = d->learned[k] == pids[i];
		if (known || discovery_ask(&d->disc, pids[i], true, 0, now + DISCOVERY_BUDGET_NS))
			continue; /* asked already, or too many out: next time */
		d->learned[d->nlearned++ % SBT_MAX_PIDS] = pids[i];
	}
}

/* What the discovery thread found goes on (on the window's processes, if
 * one is open), and the window learns when each of its processes is
 * traced in full. */
void take_discoveries(struct daemon *d)
{
	struct discovery_job *jobs[DISCOVERY_MAX_JOBS];
	int n = discovery_take(&d->disc, jobs, DISCOVERY_MAX_JOBS);

	for (int i = 0; i < n; i++) {
		int found = attach_found(&d->at, &jobs[i]->search);

		if (found < 0)
			sbt_info(1, "window: PID %d: libraries: %s\n", jobs[i]->pid, strerror(-found));
		if (!jobs[i]->partial && jobs[i]->err == -EINTR && !daemon_stop_sig &&
		    jobs[i]->done_ns >= jobs[i]->deadline_ns)
			sbt_warn("library discovery for PID %d stopped after its %llu s; a library not read "
				 "by then is looked for again at the next window",
				 jobs[i]->pid, DISCOVERY_BUDGET_NS / NS);
		window_searched(&d->win, jobs[i], found);
		discovery_job_free(jobs[i]);
	}
}

/* A few times a second: card holders that no record told of yet join the
 * open window, which closes at its end; a sample opens when due. */
void tend_window(struct daemon *d, uint64_t now)
{
	pid_t pids[SBT_MAX_PIDS];
	int n = card_holders(d, pids);

	if (d->win.open) {
		if (now >= d->win.until || daemon_stop_sig) {
			close_window(d);
		} else {
			for (int i = 0; i < n; i++)
				window_join(&d->win, &d->at, &d->disc, &d->mw, pids[i], JOIN_CARD, now);
			window_cards(&d->win, pids, n);
		}
	} else {
		learn_libraries(d, pids, n, now);
	}
	note_removals(d);
	if (d->fired.waiting)
		write_fired(d, now);
	/* a ctl record that waited for the last window's uprobes to go */
	if (!d->win.open && d->waiter.client >= 0 && d->waiter.unopened && !daemon_stop_sig &&
	    open_window(d, WIN_REQUEST, d->waiter.seconds)) {
		d->waiter.unopened = false;
		d->waiter.from = now;
	}
	/* a sample that falls in another window is that window */
	if (window_sample_due(&d->win, now) && !d->win.open)
		open_window(d, WIN_SAMPLE, d->o->window_seconds);
}

/* Every few seconds: errors, slow ioctls, records lost. A trigger opens a
 * window (or joins the open one) and, at its end, snapshots the time from
 * --trigger-before ago into the spool. */
void check_triggers(struct daemon *d, uint64_t now)
{
	uint64_t totals[TRIG_N];
	enum trigger k;

	if (!d->dr.rb)
		return;
	pthread_mutex_lock(&d->lock);
	if (daemon_read(&d->counters, d->counts)) {
		pthread_mutex_unlock(&d->lock);
		return;
	}
	pthread_mutex_unlock(&d->lock);
	totals[TRIG_ERRORS] = daemon_errors(d->counts);
	totals[TRIG_SLOW] = d->trig.cfg.slow_ns ? daemon_slow(d->counts) : 0;
	totals[TRIG_LOST] = attach_read_lost(&d->at);
	k = triggers_check(&d->trig, totals, now);
	if (k == TRIG_N)
		return;
	if (d->fired.pending) { /* one trigger snapshot per window: this one is in it */
		sbt_warn("trigger %s: in the snapshot of the %s trigger, %s", trigger_name(k),
			 trigger_name(d->fired.kind),
			 d->fired.waiting ? "which waits for room" : "at the window's end");
		return;
	}
	sbt_warn("trigger %s: a detail window, then a snapshot from %g s before", trigger_name(k),
		 d->o->trigger_before);
	d->fired.pending = true;
	d->fired.kind = k;
	d->fired.from = now > (uint64_t)(d->o->trigger_before * 1e9) ? now - (uint64_t)(d->o->trigger_before * 1e9) : 0;
	if (d->win.open) {
		window_extend(&d->win, now + (uint64_t)(d->o->window_seconds * 1e9));
	} else if (!open_window(d, WIN_TRIGGER, d->o->window_seconds)) {
		/* no window now: the recorder's time before it, at once */
		write_fired(d, now);
	}
}
