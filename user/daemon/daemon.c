// SPDX-License-Identifier: GPL-2.0-only
/*
 * `spyre-bpftrace daemon`: the always-on tier. The kernel hooks count every
 * process's VFIO ioctls and the cards' interrupts in histograms and
 * counters in the kernel, and no uprobe is attached. Prometheus scrapes
 * /metrics; each scrape sums the per-CPU maps. The same kernel events (a
 * few per job) also come as records into a flight recorder. Detail windows
 * (a random one each sampling period, one on a trigger, one on `ctl
 * record`) put the runtime uprobes on the processes that hold a card for a
 * few seconds; their records go to the recorder too. Snapshots of the
 * recorder are written by a low-priority thread, into the spool or where
 * `ctl` asks. Runs until SIGTERM; SIGHUP looks again for cards bound to
 * vfio-pci and processes with VFIO files open; under systemd it says when
 * it is ready and pings the watchdog (Type=notify, WatchdogSec).
 *
 * This file sets it up, runs its main loop and stops it; what the loop
 * does is in daemon_windows.c, daemon_snapshots.c and daemon_requests.c,
 * over the state of daemon_state.h.
 */
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <errno.h>
#include <limits.h>
#include <malloc.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "attach/attach.h"
#include "attach/metawrite.h"
#include "attach/plan.h"
#include "attach/vfio_files.h"
#include "base/args.h"
#include "base/clock.h"
#include "base/log.h"
#include "base/procfs.h"
#include "commands.h"
#include "daemon/cardscan.h"
#include "daemon/control.h"
#include "daemon/control_server.h"
#include "daemon/cost.h"
#include "daemon/counters.h"
#include "daemon/daemon_state.h"
#include "daemon/devstats.h"
#include "daemon/discovery.h"
#include "daemon/drainer.h"
#include "daemon/http.h"
#include "daemon/kubelet.h"
#include "daemon/metrics.h"
#include "daemon/newcomers.h"
#include "daemon/options.h"
#include "daemon/recorder.h"
#include "daemon/sdnotify.h"
#include "daemon/snapshot.h"
#include "daemon/snapshot_queue.h"
#include "daemon/spool.h"
#include "daemon/triggers.h"
#include "daemon/window.h"

volatile sig_atomic_t daemon_stop_sig;
static volatile sig_atomic_t reload_sig;

static void on_signal(int sig)
{
	if (sig == SIGHUP)
		reload_sig = 1;
	else
		daemon_stop_sig = sig;
}

/* The kernel's count of each of our programs' runs and run time: it
 * moves only while the statistics are on (cost.h: ctl cost, or the sysctl
 * someone else set), which the metrics say. Under d->lock. */
static void bpf_run_time(struct daemon *d)
{
	d->self.bpf_stats = d->cost.stats_fd >= 0 || cost_sysctl_on();
	d->self.nprogs = cost_read(d->at.skel->obj, d->self.progs, METRICS_PROGS);
}

static char *page(void *ctx, const char *url, unsigned *status, const char **type, size_t *len)
{
	struct daemon *d = ctx;
	struct daemon_counts *c;
	char *body;

	if (!strcmp(url, "/healthz")) {
		*len = 3;
		return strdup("ok\n");
	}
	if (strcmp(url, "/metrics")) {
		static const char msg[] = "spyre-bpftrace daemon: see /metrics (and /healthz)\n";

		*status = 404;
		*len = sizeof(msg) - 1;
		return strdup(msg);
	}
	c = malloc(sizeof(*c));
	if (!c)
		return NULL;
	pthread_mutex_lock(&d->lock);
	if (daemon_read(&d->counters, c)) {
		pthread_mutex_unlock(&d->lock);
		free(c);
		*status = 500;
		body = strdup("cannot read the BPF maps\n");
		*len = body ? strlen(body) : 0;
		return body;
	}
	d->self.lost_records = attach_read_lost(&d->at);
	d->self.ring_bytes = attach_ring_size(&d->at);
	d->self.ring_peak_bytes = attach_read_ring_peak(&d->at);
	pthread_mutex_lock(&d->rec_lock);
	d->self.recorder_aged = d->rec.aged;
	d->self.recorder_unkept = d->rec.unkept;
	memcpy(d->self.recorder_evicted, d->rec.evicted_by_uid, sizeof(d->self.recorder_evicted));
	d->self.recorder_evicted_uids = d->rec.nevicted_uids;
	pthread_mutex_unlock(&d->rec_lock);
	bpf_run_time(d);
	d->self.scrapes++;
	d->self.alloc = &d->alloc;
	d->self.devstats = &d->devstats;
	body = metrics_render(&d->counters, c, &d->self, len);
	pthread_mutex_unlock(&d->lock);
	free(c);
	*type = "text/plain; version=0.0.4; charset=utf-8";
	return body;
}

/* vfio's ioctl handlers, which tell its files: at the start, on SIGHUP,
 * and at a sweep once vfio has been loaded since. */
static void find_vfio(struct daemon *d)
{
	bool found = vfio_files_handlers(d->at.skel);

	if (found != d->vfio_found || !d->vfio_looked)
		sbt_info(1, "vfio: %s\n",
			 found ? "its ioctl handlers found: its files count"
			       : "not loaded: no VFIO file counts until it is");
	d->vfio_found = found;
	d->vfio_looked = true;
}

/* Cards and processes: at the start, and again on SIGHUP. */
static void look_around(struct daemon *d, const char *why)
{
	int cards, procs;

	find_vfio(d);
	pthread_mutex_lock(&d->lock);
	cards = daemon_find_cards(&d->counters, &d->o->rec.devices, "/sys/bus/pci/devices");
	procs = daemon_seed_processes(&d->counters);
	pthread_mutex_unlock(&d->lock);
	if (cards < 0)
		sbt_warn("cannot number the cards: %s", strerror(-cards));
	sbt_note("%s: %d card%s on vfio-pci watched, %d process%s with a card open", why, d->counters.ncards - 1,
		 d->counters.ncards == 2 ? "" : "s", procs, procs == 1 ? "" : "es");
	for (int i = 1; i < d->counters.ncards; i++)
		sbt_info(1, "  card %s (%s, IOMMU group %u, NUMA node %d)\n", d->counters.cards[i].bdf,
			 d->counters.cards[i].vendor_device, d->counters.cards[i].group, d->counters.cards[i].numa);
}

/* Who had records evicted since the last sweep (the recorder's counts,
 * copied under its lock): a line a user, a sweep at most. */
static void say_evictions(struct daemon *d, const struct recorder_evicted_uid *now, int n)
{
	char name[16];

	for (int i = 0; i < n; i++) {
		uint64_t more = now[i].records - d->evicted_said[i].records;

		if (!more)
			continue;
		sbt_warn("flight recorder full: %llu records of user %s evicted since the last sweep (the oldest "
			 "of the user holding the most; hint: a larger --recorder-mib keeps more)",
			 (unsigned long long)more, recorder_uid_name(now[i].uid, name));
		d->evicted_said[i] = now[i];
	}
}

/* Whose a process is, for the recorder's fairness between users. */
static uint32_t uid_of(void *ctx, uint32_t tgid)
{
	uint32_t uid;

	(void)ctx;
	return proc_uid((pid_t)tgid, &uid) ? RECORDER_UID_UNKNOWN : uid;
}

/* A record of the daemon's own into the flight recorder (what a window
 * says of its processes). */
static void on_meta(void *ctx, const struct sbt_hdr *h)
{
	struct daemon *d = ctx;

	pthread_mutex_lock(&d->rec_lock);
	recorder_add(&d->rec, h, sbt_now_boottime());
	pthread_mutex_unlock(&d->rec_lock);
}

/* Which pods hold which cards, from the kubelet, when there is one (no
 * socket: not a Kubernetes node, nothing said). An error is said once,
 * and the last good answer kept meanwhile. */
static void ask_kubelet(struct daemon *d)
{
	struct allocations got = { 0 };
	char err[256] = "";

	if (!d->o->kubelet_socket)
		return;
	if (access(d->o->kubelet_socket, F_OK)) {
		pthread_mutex_lock(&d->lock);
		kubelet_free(&d->alloc);
		pthread_mutex_unlock(&d->lock);
		sbt_info(1, "kubelet: no socket at %s: not a Kubernetes node\n", d->o->kubelet_socket);
		return;
	}
	if (kubelet_list(d->o->kubelet_socket, d->o->kubelet_resource, 1000, &got, err, sizeof(err))) {
		if (strcmp(err, d->kubelet_said))
			sbt_warn("%s; spyre_device_allocation_info keeps the last answer", err);
		snprintf(d->kubelet_said, sizeof(d->kubelet_said), "%s", err);
		return;
	}
	if (d->kubelet_said[0] || !d->alloc.v)
		sbt_note("kubelet: %zu %s device%s allocated to containers", got.n, d->o->kubelet_resource,
			 got.n == 1 ? "" : "s");
	d->kubelet_said[0] = 0;
	pthread_mutex_lock(&d->lock);
	kubelet_free(&d->alloc);
	d->alloc = got;
	if (!d->alloc.v) /* an answer with none: known, and empty */
		d->alloc.v = calloc(1, sizeof(*d->alloc.v));
	pthread_mutex_unlock(&d->lock);
}

static int start(struct daemon *d)
{
	char err[512];
	int ret;

	/* the syscall tracepoints' ids are read from tracefs: a host that does
	 * not mount it (a fresh one) gets it mounted, as record does */
	if ((ret = sbt_ensure_tracefs()) || (ret = attach_open(&d->at, &d->o->rec)) || (ret = attach_load(&d->at)))
		return ret;
	if (d->o->rec.verbose)
		plan_print(&d->at.plan, stderr);
	d->counters.skel = d->at.skel;
	d->self.ioctl_hook = d->at.ioctl_hook;
	d->self.sample_ioctls = d->o->rec.daemon_sample_ioctls;
	d->self.wake_hook = d->at.wake_hook;
	if ((ret = vfio_files_dirs(d->at.skel, d->o->rec.vfio_paths, d->o->rec.nvfio_paths, err, sizeof(err)))) {
		sbt_err("%s", err);
		return ret;
	}
	if (!(d->counts = malloc(sizeof(*d->counts)))) {
		sbt_err("out of memory");
		return -ENOMEM;
	}
	/* cards and processes first, then the hooks */
	look_around(d, "starting");
	if ((ret = attach_kernel(&d->at)))
		return ret;
	if (d->o->recorder_seconds > 0 && spool_open(d->o->state_dir, d->spool, sizeof(d->spool), err, sizeof(err))) {
		sbt_err("%s", err);
		return -EIO;
	}
	d->http = http_start(d->o->listen, page, d, err, sizeof(err));
	if (!d->http) {
		sbt_err("%s", err);
		return -EADDRINUSE;
	}
	sbt_note("metrics on http://%s/metrics", d->o->listen);
	d->control_fd = control_listen(d->o->runtime_dir, &d->control_lock, err, sizeof(err));
	if (d->control_fd < 0 || control_server_start(&d->ctl, d->control_fd, err, sizeof(err))) {
		sbt_err("%s", err);
		return -EIO;
	}
	if (d->o->recorder_seconds <= 0) {
		sbt_warn("no flight recorder: no snapshots, no detail windows, no triggers");
		return 0;
	}
	if ((ret = newcomers_init(&d->news))) {
		sbt_err("cannot set up the detail windows: %s", strerror(-ret));
		return ret;
	}
	if (discovery_start(&d->disc, &d->at, err, sizeof(err))) {
		sbt_err("cannot start library discovery: %s", err);
		return -EIO;
	}
	if ((ret = cardscan_start(&d->scan, PROC_FD_SCAN_MAX))) {
		sbt_err("cannot start the card holders' file reader: %s", strerror(-ret));
		return ret;
	}
	d->win.scan = &d->scan;
	if ((ret = reaper_start(&d->reaper)))
		sbt_warn("no thread to remove uprobes on (%s): a window's close holds the main loop", strerror(-ret));
	else
		d->at.reaper = &d->reaper;
	if (recorder_init(&d->rec, d->o->recorder_mib, d->o->recorder_seconds, uid_of, NULL) ||
	    drainer_init(&d->dr, bpf_map__fd(d->at.skel->maps.events), &d->rec, &d->rec_lock, &d->news, &d->win.open)) {
		sbt_err("cannot set up the flight recorder: out of memory");
		return -ENOMEM;
	}
	/* snapshots waiting hold a recorder's worth of records at most */
	if ((ret = snapq_start(&d->q, (uint64_t)d->o->recorder_mib << 20, snapshot_done, d))) {
		sbt_err("cannot start the snapshot thread: %s", strerror(-ret));
		return ret;
	}
	if ((ret = drainer_start(&d->dr))) {
		sbt_err("cannot start the ring buffer's thread: %s", strerror(-ret));
		return ret;
	}
	d->mw.sink = on_meta;
	d->mw.fd_scan_max = PROC_FD_SCAN_MAX;
	d->mw.sink_ctx = d;
	sbt_note("flight recorder: the last %g s of kernel events, in at most %lu MiB; snapshots in %s "
		 "(at most %lu MiB)",
		 d->o->recorder_seconds, d->o->recorder_mib, d->spool, d->o->spool_mib);
	window_sampling(&d->win, d->o->sample_every ? d->o->window_seconds : 0, d->o->sample_every, sbt_now_boottime());
	if (d->o->sample_every)
		sbt_note("sampling: a detail window of %g s at a random time of every %g s", d->o->window_seconds,
			 d->o->sample_every);
	d->trig.cfg = d->o->trig;
	return 0;
}

/* Before start: what is not zero in a fresh daemon, and the signals. */
static void setup(struct daemon *d, struct daemon_opts *o)
{
	struct sigaction sa = { .sa_handler = on_signal };
	struct timespec now;

	d->o = o;
	cost_init(&d->cost);
	d->control_fd = -1;
	d->control_lock = -1;
	d->ctl.wake_fd = -1;
	d->waiter.client = -1;
	d->news.wake_fd = -1;
	d->disc.wake_fd = -1;
	d->at.stop = &daemon_stop_sig;
	d->at.fd_scan_max = PROC_FD_SCAN_MAX;
	pthread_mutex_init(&d->lock, NULL);
	pthread_mutex_init(&d->rec_lock, NULL);
	clock_gettime(CLOCK_REALTIME, &now);
	d->self.start_time = (double)now.tv_sec + now.tv_nsec / 1e9;
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGHUP, &sa, NULL);
	signal(SIGPIPE, SIG_IGN);
}

/* Every SWEEP_SECONDS: the recorder's size and evictions said, the
 * counters' gone processes swept, vfio looked for if it was not there. */
static void sweep(struct daemon *d)
{
	struct recorder_evicted_uid evicted[RECORDER_USERS_NAMED + 1];
	int nevicted;
	size_t bytes;

	pthread_mutex_lock(&d->rec_lock);
	bytes = recorder_bytes(&d->rec);
	nevicted = d->rec.nevicted_uids;
	memcpy(evicted, d->rec.evicted_by_uid, sizeof(evicted));
	pthread_mutex_unlock(&d->rec_lock);
	say_evictions(d, evicted, nevicted);
	pthread_mutex_lock(&d->lock);
	daemon_sweep(&d->counters);
	d->self.recorder_bytes = bytes;
	pthread_mutex_unlock(&d->lock);
	if (!d->vfio_found && vfio_module_present())
		find_vfio(d);
}

/* Is anything in hand that the main loop tends every quarter second (a
 * window, snapshots or a ctl record waiting for one, uprobes going, a
 * cost measure)? Otherwise it wakes once a second: each wake of an idle
 * daemon is a cost its host pays. */
static bool tending(struct daemon *d)
{
	return d->win.open || d->fired.waiting || d->waiter.client >= 0 || d->cost.stats_fd >= 0 ||
	       reaper_pending(&d->reaper);
}

/* The main loop, until a signal; then the open window and what waits
 * for it are written. */
static void run(struct daemon *d)
{
	uint64_t watchdog_us, next_ping = 0, next_sweep, next_check, next_tick = 0, next_kubelet = 0, scrapes;
	bool busy = true;

	sd_notify_send("READY=1\nSTATUS=watching %d cards", d->counters.ncards - 1);
	watchdog_us = sd_notify_watchdog_usec();
	next_sweep = sbt_now_boottime() + SWEEP_SECONDS * NS;
	next_check = sbt_now_boottime();
	while (!daemon_stop_sig) {
		uint64_t t = sbt_now_boottime();
		struct pollfd p[4] = { { d->ctl.wake_fd, POLLIN, 0 },
				       { d->news.wake_fd, POLLIN, 0 },
				       { d->disc.wake_fd, POLLIN, 0 },
				       { d->scan.wake_fd, POLLIN, 0 } };

		if (watchdog_us && t >= next_ping) {
			sd_notify_send("WATCHDOG=1");
			next_ping = t + watchdog_us * 1000 / 2;
		}
		if (t >= next_sweep) {
			sweep(d);
			next_sweep = t + SWEEP_SECONDS * NS;
		}
		if (reload_sig) {
			reload_sig = 0;
			sd_notify_send("RELOADING=1");
			look_around(d, "SIGHUP");
			ask_kubelet(d);
			sd_notify_send("READY=1\nSTATUS=watching %d cards", d->counters.ncards - 1);
		}
		if (d->dr.rb && t >= next_tick) {
			tend_window(d, t);
			busy = tending(d);
			next_tick = t + (busy ? NS / 4 : NS);
		}
		if (t >= next_kubelet) {
			ask_kubelet(d);
			next_kubelet = t + KUBELET_SECONDS * NS;
		}
		if (t >= next_check) {
			check_triggers(d, t);
			next_check = t + TRIGGER_CHECK_SECONDS * NS;
		}
		if (cost_due(&d->cost, t))
			end_cost(d, t);
		/* a signal ends it early */
		if (poll(p, d->dr.rb ? 4 : 1, busy ? 250 : 1000) > 0) {
			if (p[3].revents & POLLIN)
				take_cards(d);
			if (p[2].revents & POLLIN)
				take_discoveries(d);
			if (p[1].revents & POLLIN)
				hear_news(d);
			if (p[0].revents & POLLIN)
				serve_control(d);
		}
		/* a window a trigger or a request opened is tended from now */
		if (!busy && (busy = tending(d)) && next_tick > t + NS / 4)
			next_tick = t + NS / 4;
	}
	sd_notify_send("STOPPING=1");
	if (d->dr.rb)
		snapq_closing(&d->q); /* room for a trigger's that waited */
	if (d->win.open) /* the window ends now; what waits for it is written */
		close_window(d); /* says how long it took (-v) */
	if (d->fired.waiting)
		write_fired(d, sbt_now_boottime());
	if (d->fired.waiting) /* a ctl record's took the last room */
		snapshot_dropped(d, (enum snap_reason)(SNAP_ERRORS + d->fired.kind),
				 "the daemon stops with five waiting to be written");
	if (d->cost.client >= 0) { /* a ctl cost cut short: what it measured */
		end_cost(d, sbt_now_boottime());
	}
	if (d->waiter.client >= 0) { /* a ctl record whose window never opened */
		control_reply(d->waiter.client, "error: the daemon is stopping; its window did not open\n");
		d->waiter.client = -1;
	}
	pthread_mutex_lock(&d->lock); /* the HTTP thread counts them */
	scrapes = d->self.scrapes;
	pthread_mutex_unlock(&d->lock);
	sbt_note("stopping on %s after %llu scrapes", strsignal(daemon_stop_sig), (unsigned long long)scrapes);
}

/* Everything stopped and freed, each step timed (-v): a stop slower than
 * a unit's or a pod's grace period is killed, and what took the time must
 * show. False when a library search still reads a file: then the
 * attacher it uses (in d) is left as it is, for the exit to take. */
static bool stop(struct daemon *d)
{
	uint64_t t0 = sbt_now_boottime(), t1, t2, t3, t4, t5;
	size_t removing;

	drainer_stop(&d->dr);
	t1 = sbt_now_boottime();
	if (d->dr.rb)
		snapq_stop(&d->q);
	t2 = sbt_now_boottime();
	control_server_stop(&d->ctl);
	control_close(d->control_fd, d->control_lock, d->o->runtime_dir);
	drainer_free(&d->dr);
	recorder_free(&d->rec);
	newcomers_free(&d->news);
	http_stop(d->http);
	t3 = sbt_now_boottime();
	cardscan_stop(&d->scan);
	if (!discovery_stop(&d->disc, 2 * NS))
		return false;
	t4 = sbt_now_boottime();
	/* last: all is written by now, and the kernel may take long (grace
	 * periods, for uprobes and tracepoints alike, on a busy host) */
	removing = reaper_pending(&d->reaper);
	if (removing)
		sbt_note("stopping: everything written; the kernel is removing %zu uprobes, then the BPF programs",
			 removing);
	else
		sbt_note("stopping: everything written; the kernel is removing the BPF programs");
	reaper_stop(&d->reaper);
	t5 = sbt_now_boottime();
	attach_close(&d->at);
	sbt_info(1,
		 "stop: ring reader %.2f s, queued snapshots %.2f s, recorder and servers %.2f s, "
		 "library search %.2f s, uprobes removed %.2f s, BPF programs detached %.2f s\n",
		 (double)(t1 - t0) / 1e9, (double)(t2 - t1) / 1e9, (double)(t3 - t2) / 1e9, (double)(t4 - t3) / 1e9,
		 (double)(t5 - t4) / 1e9, (double)(sbt_now_boottime() - t5) / 1e9);
	pthread_mutex_destroy(&d->lock);
	pthread_mutex_destroy(&d->rec_lock);
	free(d->counts);
	kubelet_free(&d->alloc);
	return true;
}

int cmd_daemon(int argc, char **argv)
{
	struct daemon_opts o;
	struct daemon *d = calloc(1, sizeof(*d));
	int ret;

	if (!d) {
		sbt_err("out of memory");
		return 1;
	}
	daemon_parse_opts(argc, argv, &o);
	sbt_verbosity = o.rec.verbose;
	libbpf_set_print((libbpf_print_fn_t)sbt_libbpf_print);
	setup(d, &o);
	ret = start(d);
	if (!ret)
		run(d);
	if (stop(d))
		free(d);
	return ret ? 1 : 0;
}
