// SPDX-License-Identifier: GPL-2.0-only
/*
 * What ctl asks over the control socket, served by the main loop: status,
 * record (a window), snapshot.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/clock.h"
#include "base/log.h"
#include "base/procfs.h"
#include "daemon/daemon_state.h"

static void status(struct daemon *d, int cfd)
{
	char msg[CONTROL_LINE + 2048], win[256], sample[128];
	uint64_t now = sbt_now_boottime(), kept, evicted, written = 0, held = 0;
	size_t mib;
	pid_t pids[SBT_MAX_PIDS];
	int n = card_holders(d, pids), pending = d->dr.rb ? snapq_pending(&d->q) : 0;
	size_t removing = reaper_pending(&d->reaper);

	if (d->win.open)
		snprintf(win, sizeof(win), "%s, %d process%s, %.1f s left", window_reason_name(d->win.reason),
			 d->win.nprocs, d->win.nprocs == 1 ? "" : "es",
			 d->win.until > now ? (double)(d->win.until - now) / 1e9 : 0.0);
	else if (removing)
		snprintf(win, sizeof(win), "none (the last one's %zu uprobes being removed%s)", removing,
			 d->waiter.client >= 0 ? "; a ctl record waits for them" : "");
	else
		snprintf(win, sizeof(win), "none");
	if (d->win.sample_ns)
		snprintf(sample, sizeof(sample), "in %.0f s (%g s every %g s)",
			 d->win.next_sample > now ? (double)(d->win.next_sample - now) / 1e9 : 0.0,
			 d->o->window_seconds, d->o->sample_every);
	else
		snprintf(sample, sizeof(sample), "off");
	pthread_mutex_lock(&d->rec_lock);
	kept = recorder_kept(&d->rec);
	evicted = d->rec.evicted;
	mib = recorder_bytes(&d->rec) >> 20;
	pthread_mutex_unlock(&d->rec_lock);
	pthread_mutex_lock(&d->lock);
	for (int r = 0; r < SNAP_N; r++)
		written += d->self.snapshots[r];
	for (int k = 0; k < TRIG_N; k++)
		held += d->trig.held[k];
	snprintf(msg, sizeof(msg),
		 "ok\nversion %s\ncards %d\nprocesses with a card %d\nioctl hook %s\n"
		 "ioctls timed and recorded 1 in %u (counts, errors, bytes, slow ones: all)\nwake hook %s\nscrapes "
		 "%llu\n"
		 "lost records %llu\n"
		 "ring buffer %.1f of %.1f MiB at most in use\n"
		 "window %s\nnext sample %s\nflight recorder %llu records kept, %zu MiB, %llu evicted to make room "
		 "(the heaviest user's oldest)\n"
		 "snapshots written %llu, failed %llu, being written %d, cut to fit %llu%s\nspool %s, %.1f of %lu MiB\n"
		 "triggers fired: errors %llu, slow_ioctl %llu, lost %llu (held back as too soon: %llu)\n"
		 "bpf cost %s\n",
		 SBT_VERSION, d->counters.ncards - 1, n,
		 !strcmp(d->at.ioctl_hook, "tracepoint") ? "tracepoint (syscalls:sys_*_ioctl)" : d->at.ioctl_hook,
		 d->o->rec.daemon_sample_ioctls,
		 !d->at.wake_hook ? "none"
		 : !strcmp(d->at.wake_hook, "eventfd")
			 ? "eventfd (in detail windows; read at the interrupt and at eventfd_write)"
		 : !strcmp(d->at.wake_hook, "interrupt")
			 ? "interrupt (in detail windows; read at the interrupt only: eventfd_write not hooked)"
			 : "sched_waking (in detail windows; every wake-up of the host)",
		 (unsigned long long)d->self.scrapes, (unsigned long long)attach_read_lost(&d->at),
		 (double)attach_read_ring_peak(&d->at) / (1 << 20), (double)attach_ring_size(&d->at) / (1 << 20), win,
		 sample, (unsigned long long)kept, mib, (unsigned long long)evicted, (unsigned long long)written,
		 (unsigned long long)d->self.snapshot_failures, pending, (unsigned long long)d->self.snapshots_cut,
		 d->fired.waiting ? "; a trigger's waits for room" : "", d->dr.rb ? d->spool : "none",
		 (double)d->self.spool_bytes / (1 << 20), d->o->spool_mib,
		 (unsigned long long)d->trig.fired[TRIG_ERRORS], (unsigned long long)d->trig.fired[TRIG_SLOW],
		 (unsigned long long)d->trig.fired[TRIG_LOST], (unsigned long long)held,
		 d->cost.stats_fd >= 0 ? "being measured (ctl cost)"
		 : d->cost.last[0]     ? d->cost.last
				       : "not measured (the kernel's statistics are off; hint: ctl cost --seconds 5)");
	pthread_mutex_unlock(&d->lock);
	control_reply(cfd, msg);
}

/* ctl record: a window of secs now (the open one lengthened, if any),
 * its trace written to path (NULL: into the spool) when it ends. */
static void request_window(struct daemon *d, int cfd, double secs, const char *path, const char *note)
{
	uint64_t now = sbt_now_boottime(), until = now + (uint64_t)(secs * 1e9);

	if (!d->dr.rb) {
		control_reply(cfd, NO_RECORDER);
		return;
	}
	if (d->waiter.client >= 0) {
		control_reply(cfd, "error: a window is open already for another ctl record; hint: wait for it\n");
		return;
	}
	d->waiter.unopened = false;
	if (d->win.open) {
		window_extend(&d->win, until);
		sbt_note("window (%s): lengthened for a ctl record of %.3f s", window_reason_name(d->win.reason), secs);
	} else if (reaper_pending(&d->reaper)) {
		/* opened by tend_window once they are gone */
		sbt_note("window (request): waits for the last window's uprobes to be removed");
		d->waiter.unopened = true;
		d->waiter.seconds = secs;
	} else {
		open_window(d, WIN_REQUEST, secs);
	}
	d->waiter.client = cfd;
	d->waiter.from = now;
	snprintf(d->waiter.path, sizeof(d->waiter.path), "%s", path ? path : "");
	d->waiter.note = note;
}

/* ctl cost: the kernel's statistics on for secs (every BPF program of the
 * host pays meanwhile), the answer at their end (end_cost). */
static void begin_cost(struct daemon *d, int cfd, double secs)
{
	char msg[160];
	int err;

	pthread_mutex_lock(&d->lock); /* the scrapes read it */
	err = cost_begin(&d->cost, d->at.skel->obj, secs, cfd, sbt_now_boottime());
	pthread_mutex_unlock(&d->lock);
	if (!err) {
		sbt_note("ctl cost: the kernel's BPF statistics on for %.1f s", secs);
		return;
	}
	snprintf(msg, sizeof(msg), "error: %s; hint: %s\n",
		 err == -EBUSY ? "a cost measure is under way" : "the kernel would not count BPF run time",
		 err == -EBUSY ? "wait for it" : strerror(-err));
	control_reply(cfd, msg);
}

void end_cost(struct daemon *d, uint64_t now)
{
	char msg[CONTROL_LINE];
	int cfd = d->cost.client;

	pthread_mutex_lock(&d->lock);
	cost_end(&d->cost, d->at.skel->obj, now, msg, sizeof(msg));
	pthread_mutex_unlock(&d->lock);
	sbt_note("ctl cost: the kernel's BPF statistics off again: %s", d->cost.last);
	if (cfd >= 0)
		control_reply(cfd, msg);
}

/* One request from the control socket, read whole by its thread. */
static void serve_request(struct daemon *d, int cfd, const char *line)
{
	char err[256];
	struct control_request *r = &d->request;
	const char *note = NULL;
	uint64_t off;

	if (control_parse_request(line, r, err, sizeof(err))) {
		control_reply(cfd, err);
		return;
	}
	/* the daemon writes -o where it sees the path; say so when the asker
	 * sees another directory there (systemd's PrivateTmp, say) */
	if (r->path[0] && !control_peer_sees_same_dir(cfd, r->path))
		note = "note: the daemon sees this file's directory as another than you do (its own /tmp "
		       "under systemd's PrivateTmp=yes, or another mount namespace): the file is not where "
		       "you look; hint: -o under /var/lib/spyre-bpftrace\n";
	switch (r->verb) {
	case CONTROL_STATUS: status(d, cfd); break;
	case CONTROL_RECORD: request_window(d, cfd, r->seconds, r->path[0] ? r->path : NULL, note); break;
	case CONTROL_COST: begin_cost(d, cfd, r->seconds); break;
	case CONTROL_SNAPSHOT:
		off = daemon_realtime_offset();
		if (r->to < off)
			control_reply(cfd, "error: that window ends before this host booted\n");
		else
			submit_snapshot(d, r->from > off ? r->from - off : 0, r->to - off, r->path[0] ? r->path : NULL,
					SNAP_REQUEST, cfd, note, false);
		break;
	}
}

/* Every request the control thread has read whole. */
void serve_control(struct daemon *d)
{
	char line[CONTROL_LINE];
	int cfd;

	while ((cfd = control_server_next(&d->ctl, line, sizeof(line))) >= 0)
		serve_request(d, cfd, line);
}
