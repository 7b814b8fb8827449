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
#include <sys/resource.h>
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
#include "base/thread.h"
#include "capture/reorder.h"
#include "commands.h"
#include "daemon/cardscan.h"
#include "daemon/control.h"
#include "daemon/control_server.h"
#include "daemon/counters.h"
#include "daemon/devstats.h"
#include "daemon/discovery.h"
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

#define SWEEP_SECONDS 10
#define TRIGGER_CHECK_SECONDS 5
#define KUBELET_SECONDS 30 /* pods come and go slowly; one small call each time */
#define NS 1000000000ull
#define NO_RECORDER "error: this daemon runs with --no-recorder; hint: restart it without\n"


#define DRAINER_NICE (-10) /* SNAPQ_STOP_NICE too */
/* Records the drainer holds, in order, before it hands them to the
 * recorder: rather than wait for the recorder's lock (a snapshot's copy
 * in the main loop), it holds up to some 0.2 s of a detail window's
 * records, about 8 MiB; then it waits, and hands on all it holds. */
#define HELD_MAX 65536
#define HELD_FULL (-EOVERFLOW) /* on_record: stop the pass, hand on */
#define FINAL_DRAIN_NS (1 * NS) /* the ring buffer read at the stop, at most */

struct daemon {
	struct daemon_opts *o;
	struct attacher at;
	struct link_reaper reaper; /* a closed window's uprobes go here */
	bool reaper_said; /* a window waits for it: said once */
	struct daemon_counters counters;
	struct daemon_counts *counts; /* for the triggers */
	struct http_server *http;
	pthread_mutex_t lock; /* the counters' cards and maps, between scrapes and reloads */
	int stats_fd; /* keeps the kernel's BPF run-time statistics on; -1 */
	int control_fd; /* the control socket; -1 */
	int control_lock; /* its directory's lock, held while the daemon runs; -1 */
	struct control_server ctl; /* its clients, read on a thread of their own */
	struct ring_buffer *rb; /* records for the flight recorder; NULL without */
	pthread_t drainer; /* drains rb into rec */
	uint64_t drained; /* passes over rb the drainer finished */
	bool draining;
	pthread_mutex_t rec_lock; /* rec, between the drainer and the main loop */
	/* the drainer's: kernel records held REORDER_WINDOW_NS and handed to
	 * the recorder in the order things happened, as record does */
	struct reorder held;
	uint64_t released_at; /* when the drainer's pass began to hand records on */
	struct flight_recorder rec;
	struct meta_writer mw; /* what the windows say of their processes, into the recorder */
	struct detail_window win;
	struct newcomers news; /* from the drainer: who turned up in the window */
	struct discovery disc; /* library searches, off the main loop */
	struct cardscan scan; /* card holders' open files, off the main loop */
	pid_t learned[SBT_MAX_PIDS]; /* card holders whose mapped libraries were read */
	unsigned int nlearned; /* a ring: ever added */
	struct { /* a ctl record waits for the window's end */
		int client; /* -1: none */
		uint64_t from;
		char path[CONTROL_LINE]; /* "": into the spool */
		const char *note; /* for the answer, or NULL */
		/* its window waits for the last one's uprobes to go (seconds) */
		bool unopened;
		double seconds;
	} waiter;
	struct { /* a trigger's snapshot, written at the window's end */
		bool pending;
		bool waiting; /* the window ended; it waits for room in the queue */
		enum trigger kind;
		uint64_t from;
	} fired;
	struct triggers trig;
	struct snapshot_queue q;
	char spool[PATH_MAX];
	struct allocations alloc; /* the kubelet's, under lock */
	char kubelet_said[256]; /* its last error, said once */
	struct metrics_self self;
	struct devstats devstats; /* the detail windows' jobs; written by the main loop, under lock */
	bool vfio_found, vfio_looked; /* vfio's handlers known to BPF; looked once */
	/* records each user had evicted from the recorder, as last logged */
	struct recorder_evicted_uid evicted_said[RECORDER_USERS_NAMED + 1];
	struct control_request request; /* the one being served: its path is long */
};

static volatile sig_atomic_t stop_sig, reload_sig;

static void on_signal(int sig)
{
	if (sig == SIGHUP)
		reload_sig = 1;
	else
		stop_sig = sig;
}

/* The kernel's time in each of our programs, when it keeps count (needs
 * the stats on: bpf_enable_stats, held for the daemon's life). */
static void bpf_run_time(struct daemon *d)
{
	struct bpf_program *p;

	d->self.bpf_stats = d->stats_fd >= 0;
	d->self.nprogs = 0;
	bpf_object__for_each_program(p, d->at.skel->obj) {
		struct bpf_prog_info info = { 0 };
		uint32_t len = sizeof(info);
		int fd = bpf_program__fd(p), i = d->self.nprogs;

		if (fd < 0 || i == METRICS_PROGS || bpf_obj_get_info_by_fd(fd, &info, &len))
			continue;
		snprintf(d->self.progs[i].name, sizeof(d->self.progs[i].name), "%s", bpf_program__name(p));
		d->self.progs[i].seconds = (double)info.run_time_ns / 1e9;
		d->self.progs[i].runs = info.run_cnt;
		d->self.nprogs++;
	}
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
		sbt_info(1, "vfio: %s\n", found ? "its ioctl handlers found: its files count"
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
	sbt_note("%s: %d card%s on vfio-pci watched, %d process%s with a card open", why,
		 d->counters.ncards - 1, d->counters.ncards == 2 ? "" : "s", procs, procs == 1 ? "" : "es");
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

/* A record into the flight recorder: the daemon's own (a window's
 * processes), or one from the ring buffer (on_record). */
static void on_meta(void *ctx, const struct sbt_hdr *h)
{
	struct daemon *d = ctx;

	pthread_mutex_lock(&d->rec_lock);
	recorder_add(&d->rec, h, sbt_now_boottime());
	pthread_mutex_unlock(&d->rec_lock);
}

/* A kernel record: held to be put in order (as it came, out of memory);
 * who it is about is news at once. */
static int on_record(void *ctx, void *data, size_t size)
{
	struct daemon *d = ctx;
	const struct sbt_hdr *h = data;

	if (size >= sizeof(*h) && sizeof(*h) + h->size <= size) {
		if (reorder_add(&d->held, h))
			on_meta(ctx, h);
		newcomers_note(&d->news, h);
	}
	/* taken; but a pass that outruns its producers stops here to hand
	 * on what it holds, rather than hold without bound */
	return d->held.n >= HELD_MAX ? HELD_FULL : 0;
}

static void to_recorder(void *ctx, const struct sbt_hdr *h)
{
	struct daemon *d = ctx;

	recorder_add(&d->rec, h, d->released_at);
}

/* Into the recorder, in order, what began long enough ago that nothing
 * earlier can still come (all: everything held). False when the recorder
 * was busy and the records stay held for the next pass. */
static bool release_held(struct daemon *d, bool all)
{
	uint64_t now = sbt_now_boottime();

	if (!d->held.n)
		return true;
	/* the kernel's ring buffer never waits behind a snapshot */
	if (!all && d->held.n < HELD_MAX) {
		if (pthread_mutex_trylock(&d->rec_lock))
			return false;
	} else {
		pthread_mutex_lock(&d->rec_lock);
	}
	d->released_at = now; /* one clock read a pass, not one a record */
	reorder_release(&d->held, all ? UINT64_MAX : now > REORDER_WINDOW_NS ? now - REORDER_WINDOW_NS : 0,
			to_recorder, d);
	/* more than HELD_MAX in the reorder window (millions a second): in
	 * bounded memory, the order of those few ms may suffer */
	if (d->held.n >= HELD_MAX)
		reorder_release(&d->held, UINT64_MAX, to_recorder, d);
	pthread_mutex_unlock(&d->rec_lock);
	return true;
}

/* The drainer outweighs the job threads it shares the CPUs with (nice
 * -10: nine times a nice-0 thread's share) so that a host busy on every
 * core still has its records read before the ring buffer fills; it needs
 * CAP_SYS_NICE, and without it runs as the rest of the daemon. */
static void drainer_priority(void)
{
	if (setpriority(PRIO_PROCESS, (id_t)gettid(), DRAINER_NICE))
		sbt_info(1, "the ring buffer's thread runs at the daemon's priority: nice %d: %s\n",
			 DRAINER_NICE, strerror(errno));
}

/* The ring buffer, drained by a thread of its own: a window's attach or a
 * snapshot's copy in the main loop never holds it up (in a window, runtime
 * calls come by the hundred thousand a second). */
static void *drain(void *arg)
{
	struct daemon *d = arg;
	uint64_t until;
	bool handed;
	int n;

	drainer_priority();
	while (__atomic_load_n(&d->draining, __ATOMIC_ACQUIRE)) {
		/* the kernel wakes us only past wakeup_bytes: read what is there anyway */
		n = ring_buffer__poll(d->rb, __atomic_load_n(&d->win.open, __ATOMIC_RELAXED) ? 50 : 200);
		if (n == HELD_FULL) /* hand on before reading on */
			release_held(d, false);
		/* a stop is looked at between passes too: jobs that write as
		 * fast as this reads would keep it here for as long as they run */
		do {
			n = ring_buffer__consume(d->rb);
			handed = release_held(d, false);
		} while (n == HELD_FULL && __atomic_load_n(&d->draining, __ATOMIC_ACQUIRE));
		/* a pass counts (catch_up) once what it read is in the recorder */
		if (handed)
			__atomic_add_fetch(&d->drained, 1, __ATOMIC_RELEASE);
	}
	/* what came before the stop, for FINAL_DRAIN_NS at most: the same */
	until = sbt_now_boottime() + FINAL_DRAIN_NS;
	do {
		n = ring_buffer__consume(d->rb);
		release_held(d, true);
	} while (n == HELD_FULL && sbt_now_boottime() < until);
	return NULL;
}

/* Waits (a little) for a whole pass of the drainer that started after
 * now and past the reorder window: what the kernel wrote before now is in
 * the recorder. */
static void catch_up(struct daemon *d)
{
	uint64_t seen;

	/* a pass that starts past the reorder window hands on all of now */
	usleep(REORDER_WINDOW_NS / 1000);
	seen = __atomic_load_n(&d->drained, __ATOMIC_ACQUIRE);

	for (int i = 0; i < 100 && __atomic_load_n(&d->drained, __ATOMIC_ACQUIRE) < seen + 2; i++)
		usleep(5000);
}

/* The window between the kernel's clocks: REALTIME minus BOOTTIME now. */
static uint64_t realtime_offset(void)
{
	struct sbt_meta_clock c;

	sbt_clock_snapshot(&c);
	return c.realtime - c.boottime;
}

static void snapshot_done(void *ctx, struct snapshot_job *j, int ret, const char *err);

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
	if ((ret = sbt_ensure_tracefs()) || (ret = attach_open(&d->at, &d->o->rec)) ||
	    (ret = attach_load(&d->at)))
		return ret;
	if (d->o->rec.verbose)
		plan_print(&d->at.plan, stderr);
	d->counters.skel = d->at.skel;
	d->self.ioctl_hook = d->at.ioctl_hook;
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
	d->stats_fd = bpf_enable_stats(BPF_STATS_RUN_TIME);
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
		sbt_warn("no thread to remove uprobes on (%s): a window's close holds the main loop",
			 strerror(-ret));
	else
		d->at.reaper = &d->reaper;
	if (recorder_init(&d->rec, d->o->recorder_mib, d->o->recorder_seconds, uid_of, NULL) ||
	    !(d->rb = ring_buffer__new(bpf_map__fd(d->at.skel->maps.events), on_record, d, NULL))) {
		sbt_err("cannot set up the flight recorder: out of memory");
		return -ENOMEM;
	}
	/* snapshots waiting hold a recorder's worth of records at most */
	if ((ret = snapq_start(&d->q, (uint64_t)d->o->recorder_mib << 20, snapshot_done, d))) {
		sbt_err("cannot start the snapshot thread: %s", strerror(-ret));
		return ret;
	}
	d->draining = true;
	if ((ret = thread_start_quiet(&d->drainer, "sbt-drain", drain, d))) {
		d->draining = false;
		sbt_err("cannot start the ring buffer's thread: %s", strerror(-ret));
		return ret;
	}
	d->mw.sink = on_meta;
	d->mw.fd_scan_max = PROC_FD_SCAN_MAX;
	d->mw.sink_ctx = d;
	sbt_note("flight recorder: the last %g s of kernel events, in at most %lu MiB; snapshots in %s "
		 "(at most %lu MiB)", d->o->recorder_seconds, d->o->recorder_mib, d->spool, d->o->spool_mib);
	window_sampling(&d->win, d->o->sample_every ? d->o->window_seconds : 0, d->o->sample_every,
			sbt_now_boottime());
	if (d->o->sample_every)
		sbt_note("sampling: a detail window of %g s at a random time of every %g s",
			 d->o->window_seconds, d->o->sample_every);
	d->trig.cfg = d->o->trig;
	return 0;
}

/* ---- snapshots ------------------------------------------------------------- */

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
static void snapshot_done(void *ctx, struct snapshot_job *j, int ret, const char *err)
{
	struct daemon *d = ctx;
	char msg[2 * PATH_MAX + 768], why[256], cut[160], evicted[256];
	uint64_t spool;

	if (!ret && j->spooled && spool_trim(d->spool, (uint64_t)d->o->spool_mib << 20, j->path) == -EFBIG) {
		snprintf(why, sizeof(why), "the snapshot is over --spool-mib %lu even cut to its newest records; hint: "
			 "a larger --spool-mib", d->o->spool_mib);
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
		snprintf(msg, sizeof(msg), "ok %s\n%llu records%s%s; the recorder goes back to %.1f s before "
			 "the window's end%s; manifest %s.manifest.json\n", j->path, (unsigned long long)j->records,
			 cut, j->records ? "" : " (nothing happened on a card in that time)",
			 j->w.oldest_boot && j->w.to_boot > j->w.oldest_boot ?
				 (double)(j->w.to_boot - j->w.oldest_boot) / 1e9 : 0.0, evicted, j->path);
	}
	if (!ret && j->note)
		snprintf(msg + strlen(msg), sizeof(msg) - strlen(msg), "%s", j->note);
	if (j->client >= 0)
		control_reply(j->client, msg);
}

/* Counted as failed, and said. */
static void snapshot_dropped(struct daemon *d, enum snap_reason why, const char *because)
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
static int submit_snapshot(struct daemon *d, uint64_t from, uint64_t to, const char *path,
			   enum snap_reason why, int client, const char *note, bool can_wait)
{
	uint64_t off = realtime_offset();
	struct snapshot_window w = { .from_realtime = from + off, .to_realtime = to + off, .from_boot = from,
				     .to_boot = to };
	struct snapshot_job *j;
	struct snapshot_leave_out leave[SNAPSHOT_LEAVE_OUT];
	char *windows;
	int nleave, ret = -ENOMEM;

	if (!d->rb) {
		if (client >= 0)
			control_reply(client, NO_RECORDER);
		return -ENODEV;
	}
	catch_up(d); /* what came just now too */
	w.lost = attach_read_lost(&d->at);
	pthread_mutex_lock(&d->rec_lock);
	nleave = window_leave_out(&d->win, from, to, leave, SNAPSHOT_LEAVE_OUT);
	j = snapshot_collect(&d->rec, &w, &d->at.probes, leave, nleave);
	pthread_mutex_unlock(&d->rec_lock);
	if (j && (windows = malloc(window_json_room()))) {
		window_json(&d->win, from, to, windows, window_json_room());
		j->windows = strdup(windows);
		free(windows);
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
static void write_fired(struct daemon *d, uint64_t now)
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

/* ---- detail windows ---------------------------------------------------------- */

static int card_holders(struct daemon *d, pid_t *pids)
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
static bool open_window(struct daemon *d, enum window_reason why, double seconds)
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

	if (!d->rb || !(next = malloc(sizeof(*next))))
		return;
	catch_up(d);
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

static void close_window(struct daemon *d)
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
static void hear_news(struct daemon *d)
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
				window_cards(&d->win, &d->mw, &e->pid, 1);
			else
				metaw_group_fd(&d->mw, e->pid, e->fd);
		}
	} while (n == 64);
}

/* Card holders' cards read: those waiting for them are taken into the window. */
static void take_cards(struct daemon *d)
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
	for (int i = 0; i < n && !stop_sig; i++) {
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
static void take_discoveries(struct daemon *d)
{
	struct discovery_job *jobs[DISCOVERY_MAX_JOBS];
	int n = discovery_take(&d->disc, jobs, DISCOVERY_MAX_JOBS);

	for (int i = 0; i < n; i++) {
		int found = attach_found(&d->at, &jobs[i]->search);

		if (found < 0)
			sbt_info(1, "window: PID %d: libraries: %s\n", jobs[i]->pid, strerror(-found));
		if (!jobs[i]->partial && jobs[i]->err == -EINTR && !stop_sig &&
		    jobs[i]->done_ns >= jobs[i]->deadline_ns)
			sbt_warn("library discovery for PID %d stopped after its %llu s; a library not read "
				 "by then is looked for again at the next window", jobs[i]->pid,
				 DISCOVERY_BUDGET_NS / NS);
		window_searched(&d->win, jobs[i], found);
		discovery_job_free(jobs[i]);
	}
}

/* A few times a second: card holders that no record told of yet join the
 * open window, which closes at its end; a sample opens when due. */
static void tend_window(struct daemon *d, uint64_t now)
{
	pid_t pids[SBT_MAX_PIDS];
	int n = card_holders(d, pids);

	if (d->win.open) {
		if (now >= d->win.until || stop_sig) {
			close_window(d);
		} else {
			for (int i = 0; i < n; i++)
				window_join(&d->win, &d->at, &d->disc, &d->mw, pids[i], JOIN_CARD, now);
			window_cards(&d->win, &d->mw, pids, n);
		}
	} else {
		learn_libraries(d, pids, n, now);
	}
	note_removals(d);
	if (d->fired.waiting)
		write_fired(d, now);
	/* a ctl record that waited for the last window's uprobes to go */
	if (!d->win.open && d->waiter.client >= 0 && d->waiter.unopened && !stop_sig &&
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
static void check_triggers(struct daemon *d, uint64_t now)
{
	uint64_t totals[TRIG_N];
	enum trigger k;

	if (!d->rb)
		return;
	pthread_mutex_lock(&d->lock);
	if (daemon_read(&d->counters, d->counts)) {
		pthread_mutex_unlock(&d->lock);
		return;
	}
	pthread_mutex_unlock(&d->lock);
	totals[TRIG_ERRORS] = daemon_errors(d->counts);
	totals[TRIG_SLOW] = d->trig.cfg.slow_ns ? daemon_slower_than(d->counts, d->trig.cfg.slow_ns) : 0;
	totals[TRIG_LOST] = attach_read_lost(&d->at);
	k = triggers_check(&d->trig, totals, now);
	if (k == TRIG_N)
		return;
	if (d->fired.pending) { /* one trigger snapshot per window: this one is in it */
		sbt_warn("trigger %s: in the snapshot of the %s trigger, %s", trigger_name(k),
			 trigger_name(d->fired.kind), d->fired.waiting ? "which waits for room" : "at the window's end");
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

/* ---- the control socket ---------------------------------------------------- */

static void status(struct daemon *d, int cfd)
{
	char msg[CONTROL_LINE + 2048], win[256], sample[128];
	uint64_t now = sbt_now_boottime(), kept, evicted, written = 0, held = 0;
	size_t mib;
	pid_t pids[SBT_MAX_PIDS];
	int n = card_holders(d, pids), pending = d->rb ? snapq_pending(&d->q) : 0;
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
		 "ok\nversion %s\ncards %d\nprocesses with a card %d\nioctl hook %s\nwake hook %s\nscrapes %llu\n"
		 "lost records %llu\n"
		 "ring buffer %.1f of %.1f MiB at most in use\n"
		 "window %s\nnext sample %s\nflight recorder %llu records kept, %zu MiB, %llu evicted to make room (the heaviest user's oldest)\n"
		 "snapshots written %llu, failed %llu, being written %d, cut to fit %llu%s\nspool %s, %.1f of %lu MiB\n"
		 "triggers fired: errors %llu, slow_ioctl %llu, lost %llu (held back as too soon: %llu)\n",
		 SBT_VERSION, d->counters.ncards - 1, n,
		 !strcmp(d->at.ioctl_hook, "tracepoint") ? "tracepoint (syscalls:sys_*_ioctl)" : d->at.ioctl_hook,
		 !d->at.wake_hook ? "none"
		 : !strcmp(d->at.wake_hook, "eventfd")
			 ? "eventfd (in detail windows; read at the interrupt and at eventfd_write)"
		 : !strcmp(d->at.wake_hook, "interrupt")
			 ? "interrupt (in detail windows; read at the interrupt only: eventfd_write not hooked)"
			 : "sched_waking (in detail windows; every wake-up of the host)",
		 (unsigned long long)d->self.scrapes,
		 (unsigned long long)attach_read_lost(&d->at),
		 (double)attach_read_ring_peak(&d->at) / (1 << 20), (double)attach_ring_size(&d->at) / (1 << 20),
		 win, sample,
		 (unsigned long long)kept, mib, (unsigned long long)evicted,
		 (unsigned long long)written,
		 (unsigned long long)d->self.snapshot_failures, pending,
		 (unsigned long long)d->self.snapshots_cut,
		 d->fired.waiting ? "; a trigger's waits for room" : "", d->rb ? d->spool : "none",
		 (double)d->self.spool_bytes / (1 << 20), d->o->spool_mib,
		 (unsigned long long)d->trig.fired[TRIG_ERRORS], (unsigned long long)d->trig.fired[TRIG_SLOW],
		 (unsigned long long)d->trig.fired[TRIG_LOST],
		 (unsigned long long)held);
	pthread_mutex_unlock(&d->lock);
	control_reply(cfd, msg);
}

/* ctl record: a window of secs now (the open one lengthened, if any),
 * its trace written to path (NULL: into the spool) when it ends. */
static void request_window(struct daemon *d, int cfd, double secs, const char *path, const char *note)
{
	uint64_t now = sbt_now_boottime(), until = now + (uint64_t)(secs * 1e9);

	if (!d->rb) {
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
	case CONTROL_STATUS:
		status(d, cfd);
		break;
	case CONTROL_RECORD:
		request_window(d, cfd, r->seconds, r->path[0] ? r->path : NULL, note);
		break;
	case CONTROL_SNAPSHOT:
		off = realtime_offset();
		if (r->to < off)
			control_reply(cfd, "error: that window ends before this host booted\n");
		else
			submit_snapshot(d, r->from > off ? r->from - off : 0, r->to - off, r->path[0] ? r->path : NULL,
					SNAP_REQUEST, cfd, note, false);
		break;
	}
}

/* Every request the control thread has read whole. */
static void serve_control(struct daemon *d)
{
	char line[CONTROL_LINE];
	int cfd;

	while ((cfd = control_server_next(&d->ctl, line, sizeof(line))) >= 0)
		serve_request(d, cfd, line);
}

int cmd_daemon(int argc, char **argv)
{
	struct daemon_opts o;
	struct daemon *d = calloc(1, sizeof(*d));
	struct sigaction sa = { .sa_handler = on_signal };
	uint64_t watchdog_us = 0, next_ping = 0, next_sweep, next_check, next_tick = 0, next_kubelet = 0, scrapes;
	struct timespec now;
	int ret;

	if (!d) {
		sbt_err("out of memory");
		return 1;
	}
	daemon_parse_opts(argc, argv, &o);
	sbt_verbosity = o.rec.verbose;
	libbpf_set_print((libbpf_print_fn_t)sbt_libbpf_print);
	d->o = &o;
	d->stats_fd = -1;
	d->control_fd = -1;
	d->control_lock = -1;
	d->ctl.wake_fd = -1;
	d->waiter.client = -1;
	d->news.wake_fd = -1;
	d->disc.wake_fd = -1;
	d->at.stop = &stop_sig;
	d->at.fd_scan_max = PROC_FD_SCAN_MAX;
	pthread_mutex_init(&d->lock, NULL);
	pthread_mutex_init(&d->rec_lock, NULL);
	clock_gettime(CLOCK_REALTIME, &now);
	d->self.start_time = (double)now.tv_sec + now.tv_nsec / 1e9;
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGHUP, &sa, NULL);
	signal(SIGPIPE, SIG_IGN);

	ret = start(d);
	if (!ret) {
		sd_notify_send("READY=1\nSTATUS=watching %d cards", d->counters.ncards - 1);
		watchdog_us = sd_notify_watchdog_usec();
		next_sweep = sbt_now_boottime() + SWEEP_SECONDS * NS;
		next_check = sbt_now_boottime();
		while (!stop_sig) {
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
				next_sweep = t + SWEEP_SECONDS * NS;
			}
			if (reload_sig) {
				reload_sig = 0;
				sd_notify_send("RELOADING=1");
				look_around(d, "SIGHUP");
				ask_kubelet(d);
				sd_notify_send("READY=1\nSTATUS=watching %d cards", d->counters.ncards - 1);
			}
			if (d->rb && t >= next_tick) {
				tend_window(d, t);
				next_tick = t + NS / 4;
			}
			if (t >= next_kubelet) {
				ask_kubelet(d);
				next_kubelet = t + KUBELET_SECONDS * NS;
			}
			if (t >= next_check) {
				check_triggers(d, t);
				next_check = t + TRIGGER_CHECK_SECONDS * NS;
			}
			/* a signal ends it early */
			if (poll(p, d->rb ? 4 : 1, 250) > 0) {
				if (p[3].revents & POLLIN)
					take_cards(d);
				if (p[2].revents & POLLIN)
					take_discoveries(d);
				if (p[1].revents & POLLIN)
					hear_news(d);
				if (p[0].revents & POLLIN)
					serve_control(d);
			}
		}
		sd_notify_send("STOPPING=1");
		if (d->rb)
			snapq_closing(&d->q); /* room for a trigger's that waited */
		if (d->win.open) /* the window ends now; what waits for it is written */
			close_window(d); /* says how long it took (-v) */
		if (d->fired.waiting)
			write_fired(d, sbt_now_boottime());
		if (d->fired.waiting) /* a ctl record's took the last room */
			snapshot_dropped(d, (enum snap_reason)(SNAP_ERRORS + d->fired.kind),
					 "the daemon stops with five waiting to be written");
		if (d->waiter.client >= 0) { /* a ctl record whose window never opened */
			control_reply(d->waiter.client, "error: the daemon is stopping; its window did not open\n");
			d->waiter.client = -1;
		}
		pthread_mutex_lock(&d->lock); /* the HTTP thread counts them */
		scrapes = d->self.scrapes;
		pthread_mutex_unlock(&d->lock);
		sbt_note("stopping on %s after %llu scrapes", strsignal(stop_sig), (unsigned long long)scrapes);
	}
	/* each step of the stop timed (-v): a stop slower than a unit's or
	 * a pod's grace period is killed, and what took the time must show */
	uint64_t t0 = sbt_now_boottime(), t1, t2, t3, t4, t5;
	size_t removing;

	if (d->draining) {
		__atomic_store_n(&d->draining, false, __ATOMIC_RELEASE);
		pthread_join(d->drainer, NULL);
	}
	reorder_free(&d->held);
	t1 = sbt_now_boottime();
	if (d->rb)
		snapq_stop(&d->q);
	t2 = sbt_now_boottime();
	control_server_stop(&d->ctl);
	control_close(d->control_fd, d->control_lock, o.runtime_dir);
	ring_buffer__free(d->rb);
	recorder_free(&d->rec);
	newcomers_free(&d->news);
	http_stop(d->http);
	if (d->stats_fd >= 0)
		close(d->stats_fd);
	t3 = sbt_now_boottime();
	/* a search still reading a file uses the attacher (in d): then both
	 * are left as they are, for the exit to take */
	cardscan_stop(&d->scan);
	if (!discovery_stop(&d->disc, 2 * NS))
		return ret ? 1 : 0;
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
	sbt_info(1, "stop: ring reader %.2f s, queued snapshots %.2f s, recorder and servers %.2f s, "
		    "library search %.2f s, uprobes removed %.2f s, BPF programs detached %.2f s\n",
		 (double)(t1 - t0) / 1e9, (double)(t2 - t1) / 1e9, (double)(t3 - t2) / 1e9,
		 (double)(t4 - t3) / 1e9, (double)(t5 - t4) / 1e9, (double)(sbt_now_boottime() - t5) / 1e9);
	pthread_mutex_destroy(&d->lock);
	pthread_mutex_destroy(&d->rec_lock);
	free(d->counts);
	kubelet_free(&d->alloc);
	free(d);
	return ret ? 1 : 0;
}
