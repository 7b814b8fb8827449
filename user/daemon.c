// SPDX-License-Identifier: GPL-2.0-only
/*
 * `spyre-bpftrace daemon`: the always-on tier. The kernel hooks count every
 * process's VFIO ioctls, DMA mappings and the cards' interrupts in
 * histograms and counters in the kernel, and no uprobe is attached.
 * Prometheus scrapes /metrics; each scrape sums the per-CPU maps. The same
 * kernel events (a few per job) also come as records into a flight
 * recorder, for snapshots after the fact; the control socket asks for
 * those, or for a detailed window of the processes that hold a card.
 * Runs until SIGTERM; SIGHUP looks again for cards bound to vfio-pci and
 * processes with VFIO files open; under systemd it says when it is ready
 * and pings the watchdog (Type=notify, WatchdogSec).
 */
#include <argp.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <systemd/sd-daemon.h>
#include <time.h>
#include <unistd.h>

#include "attach.h"
#include "cli.h"
#include "clock.h"
#include "commands.h"
#include "control.h"
#include "fleet.h"
#include "http.h"
#include "log.h"
#include "metrics.h"
#include "recorder.h"
#include "snapshot.h"

#define DEFAULT_LISTEN "127.0.0.1:9464"
#define SWEEP_SECONDS 10

struct daemon_opts {
	struct record_opts rec; /* the kernel-side filters, as record takes them */
	const char *listen, *runtime_dir;
	bool every_device;
	double recorder_seconds; /* 0: no flight recorder */
	unsigned long recorder_mib;
};

/* A detailed window asked for on the control socket: `record` of the
 * processes that hold a card, run as a child so the daemon goes on
 * answering scrapes and pinging the watchdog meanwhile. */
struct window {
	pid_t child; /* 0: none open */
	int client; /* who asked: answered when the child is done */
	int err_fd; /* the child's stderr */
	char path[CONTROL_LINE];
	int procs;
};

struct daemon {
	struct daemon_opts *o;
	struct attacher at;
	struct fleet fleet;
	struct http_server *http;
	pthread_mutex_t lock; /* the fleet's cards and maps, between scrapes and reloads */
	int stats_fd; /* keeps the kernel's BPF run-time statistics on; -1 */
	int control_fd; /* the control socket; -1 */
	struct ring_buffer *rb; /* records for the flight recorder; NULL without */
	struct flight_recorder rec;
	struct window win;
	struct metrics_self self;
};

static volatile sig_atomic_t stop_sig, reload_sig;

static void on_signal(int sig)
{
	if (sig == SIGHUP)
		reload_sig = 1;
	else
		stop_sig = sig;
}

enum { OPT_LISTEN = 1000, OPT_DEVICE, OPT_RUNTIME_DIR, OPT_REC_SECONDS, OPT_REC_MIB, OPT_NO_REC };

static error_t parse(int key, char *arg, struct argp_state *state)
{
	struct daemon_opts *o = state->input;
	struct record_opts *r = &o->rec;
	char err[256];

	switch (key) {
	case OPT_LISTEN: {
		struct sockaddr_storage ss;

		if (http_parse_listen(arg, &ss))
			argp_error(state, "--listen '%s' is not ADDR:PORT; hint: 127.0.0.1:9464", arg);
		o->listen = arg;
		break;
	}
	case OPT_DEVICE:
		if (devfilter_add_arg(&r->devices, &o->every_device, arg, err, sizeof(err)))
			argp_error(state, "%s", err);
		break;
	case OPT_RUNTIME_DIR:
		if (arg[0] != '/')
			argp_error(state, "--runtime-dir '%s': give an absolute path", arg);
		o->runtime_dir = arg;
		break;
	case OPT_REC_SECONDS: {
		char *end;

		o->recorder_seconds = strtod(arg, &end);
		if (*end || end == arg || !(o->recorder_seconds >= 1) || o->recorder_seconds > 86400)
			argp_error(state, "invalid --recorder-seconds '%s'; hint: 1 to 86400", arg);
		break;
	}
	case OPT_REC_MIB: {
		char *end;

		o->recorder_mib = strtoul(arg, &end, 10);
		if (*end || end == arg || !o->recorder_mib || o->recorder_mib > 65536)
			argp_error(state, "invalid --recorder-mib '%s'; hint: 1 to 65536", arg);
		break;
	}
	case OPT_NO_REC: o->recorder_seconds = 0; break;
	case 'v': r->verbose++; break;
	case ARGP_KEY_ARG:
		argp_error(state, "unexpected argument '%s'", arg);
		break;
	case ARGP_KEY_END:
		if (devfilter_finish(&r->devices, o->every_device, err, sizeof(err)))
			argp_error(state, "%s", err);
		break;
	default:
		return ARGP_ERR_UNKNOWN;
	}
	return 0;
}

/* The kernel's time in our programs, when it keeps count (needs the stats
 * on: bpf_enable_stats, held for the daemon's life). */
static void bpf_run_time(struct daemon *d)
{
	struct bpf_program *p;
	uint64_t ns = 0, runs = 0;

	if (d->stats_fd < 0) {
		d->self.bpf_run_seconds = -1;
		return;
	}
	bpf_object__for_each_program(p, d->at.skel->obj) {
		struct bpf_prog_info info = { 0 };
		uint32_t len = sizeof(info);
		int fd = bpf_program__fd(p);

		if (fd < 0 || bpf_obj_get_info_by_fd(fd, &info, &len))
			continue;
		ns += info.run_time_ns;
		runs += info.run_cnt;
	}
	d->self.bpf_run_seconds = (double)ns / 1e9;
	d->self.bpf_run_count = runs;
}

static char *page(void *ctx, const char *url, unsigned *status, const char **type, size_t *len)
{
	struct daemon *d = ctx;
	struct fleet_counts *c;
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
	if (fleet_read(&d->fleet, c)) {
		pthread_mutex_unlock(&d->lock);
		free(c);
		*status = 500;
		body = strdup("cannot read the BPF maps\n");
		*len = body ? strlen(body) : 0;
		return body;
	}
	d->self.lost_records = attach_read_lost(&d->at);
	bpf_run_time(d);
	d->self.scrapes++;
	body = metrics_render(&d->fleet, c, &d->self, len);
	pthread_mutex_unlock(&d->lock);
	free(c);
	*type = "text/plain; version=0.0.4; charset=utf-8";
	return body;
}

/* Cards and processes: at the start, and again on SIGHUP. */
static void look_around(struct daemon *d, const char *why)
{
	int cards, procs;

	pthread_mutex_lock(&d->lock);
	cards = fleet_find_cards(&d->fleet, &d->o->rec.devices, "/sys/bus/pci/devices");
	procs = fleet_seed_processes(&d->fleet);
	pthread_mutex_unlock(&d->lock);
	if (cards < 0)
		sbt_warn("cannot number the cards: %s", strerror(-cards));
	sbt_warn("%s: %d card%s on vfio-pci watched, %d process%s with a card open", why,
		 d->fleet.ncards - 1, d->fleet.ncards == 2 ? "" : "s", procs, procs == 1 ? "" : "es");
	for (int i = 1; i < d->fleet.ncards; i++)
		sbt_info(1, "  card %s (%s, IOMMU group %u, NUMA node %d)\n", d->fleet.cards[i].bdf,
			 d->fleet.cards[i].vendor_device, d->fleet.cards[i].group, d->fleet.cards[i].numa);
}

/* A record for the flight recorder. */
static int on_record(void *ctx, void *data, size_t size)
{
	struct daemon *d = ctx;
	const struct sbt_hdr *h = data;

	if (size >= sizeof(*h) && sizeof(*h) + h->size <= size)
		recorder_add(&d->rec, h, sbt_now_boottime());
	return 0;
}

static int start(struct daemon *d)
{
	char err[256];
	int ret;

	if ((ret = attach_open(&d->at, &d->o->rec)) || (ret = attach_load(&d->at)))
		return ret;
	if (d->o->rec.verbose)
		plan_print(&d->at.plan, stderr);
	d->fleet.skel = d->at.skel;
	/* cards and processes first, then the hooks */
	look_around(d, "starting");
	if ((ret = attach_kernel(&d->at)))
		return ret;
	d->stats_fd = bpf_enable_stats(BPF_STATS_RUN_TIME);
	d->http = http_start(d->o->listen, page, d, err, sizeof(err));
	if (!d->http) {
		sbt_err("%s", err);
		return -EADDRINUSE;
	}
	sbt_warn("metrics on http://%s/metrics", d->o->listen);
	d->control_fd = control_listen(d->o->runtime_dir, err, sizeof(err));
	if (d->control_fd < 0) {
		sbt_err("%s", err);
		return -EIO;
	}
	if (d->o->recorder_seconds > 0) {
		if (recorder_init(&d->rec, d->o->recorder_mib, d->o->recorder_seconds) ||
		    !(d->rb = ring_buffer__new(bpf_map__fd(d->at.skel->maps.events), on_record, d, NULL))) {
			sbt_err("cannot set up the flight recorder: out of memory");
			return -ENOMEM;
		}
		sbt_warn("flight recorder: the last %g s of kernel events, in at most %lu MiB",
			 d->o->recorder_seconds, d->o->recorder_mib);
	}
	return 0;
}

/* REALTIME to BOOTTIME now (the window is asked in wall-clock time, the
 * same absolute window of every host of a job). */
static uint64_t boot_of(uint64_t realtime)
{
	struct sbt_meta_clock c;

	sbt_clock_snapshot(&c);
	return realtime > c.realtime - c.boottime ? realtime - (c.realtime - c.boottime) : 0;
}

static void take_snapshot(struct daemon *d, int cfd, uint64_t from_rt, uint64_t to_rt, const char *path)
{
	struct snapshot_window w = { from_rt, to_rt, boot_of(from_rt), boot_of(to_rt), 0, 0, 0 };
	char err[512], msg[2 * CONTROL_LINE + 512];
	uint64_t n = 0;

	if (!d->rb) {
		control_reply(cfd, "error: this daemon runs with --no-recorder; hint: restart it without\n");
		return;
	}
	ring_buffer__consume(d->rb); /* what came just now too */
	w.lost = attach_read_lost(&d->at);
	w.dropped = d->rec.dropped_records;
	if (snapshot_write(&d->rec, &w, path, err, sizeof(err), &n)) {
		snprintf(msg, sizeof(msg), "error: %s\n", err);
		control_reply(cfd, msg);
		return;
	}
	snprintf(msg, sizeof(msg), "ok %s\n%llu records; the recorder goes back to %.1f s ago; manifest %s.manifest.json\n",
		 path, (unsigned long long)n,
		 w.oldest_boot ? (double)(sbt_now_boottime() - w.oldest_boot) / 1e9 : 0.0, path);
	sbt_warn("snapshot: %llu records into %s", (unsigned long long)n, path);
	control_reply(cfd, msg);
}

/* record -q -d SECONDS -o PATH -p PID..., this very binary. */
static void open_window(struct daemon *d, int client, const char *secs, const char *path)
{
	pid_t pids[SBT_MAX_PIDS];
	char *argv[8 + 2 * SBT_MAX_PIDS], pidstr[SBT_MAX_PIDS][16], self[64];
	int n, argc = 0, pipefd[2];

	pthread_mutex_lock(&d->lock);
	n = fleet_processes(&d->fleet, pids, SBT_MAX_PIDS);
	pthread_mutex_unlock(&d->lock);
	if (!n) {
		control_reply(client, "error: no process holds a Spyre card now; nothing to record\n");
		return;
	}
	if (pipe2(pipefd, O_CLOEXEC)) {
		control_reply(client, "error: cannot start the window: no pipe\n");
		return;
	}
	snprintf(self, sizeof(self), "/proc/%d/exe", getpid());
	argv[argc++] = "spyre-bpftrace";
	argv[argc++] = "record";
	argv[argc++] = "-q";
	argv[argc++] = "-d";
	argv[argc++] = (char *)secs;
	argv[argc++] = "-o";
	argv[argc++] = (char *)path;
	for (int i = 0; i < n; i++) {
		snprintf(pidstr[i], sizeof(pidstr[i]), "%d", pids[i]);
		argv[argc++] = "-p";
		argv[argc++] = pidstr[i];
	}
	argv[argc] = NULL;
	d->win.child = fork();
	if (d->win.child == 0) {
		dup2(pipefd[1], 2);
		execv(self, argv);
		_exit(127);
	}
	close(pipefd[1]);
	if (d->win.child < 0) {
		close(pipefd[0]);
		d->win.child = 0;
		control_reply(client, "error: cannot start the window: fork failed\n");
		return;
	}
	d->win.client = client;
	d->win.err_fd = pipefd[0];
	d->win.procs = n;
	snprintf(d->win.path, sizeof(d->win.path), "%s", path);
	sbt_warn("window: %s s of %d process%s into %s", secs, n, n == 1 ? "" : "es", path);
}

/* The window's child is done (or not yet): answer who asked. */
static void check_window(struct daemon *d, bool wait)
{
	char msg[CONTROL_LINE + 512], err[512] = "";
	int status;
	ssize_t got;

	if (!d->win.child || waitpid(d->win.child, &status, wait ? 0 : WNOHANG) <= 0)
		return;
	got = read(d->win.err_fd, err, sizeof(err) - 1);
	err[got > 0 ? got : 0] = 0;
	err[strcspn(err, "\n")] = 0;
	close(d->win.err_fd);
	if (WIFEXITED(status) && WEXITSTATUS(status) == 0)
		snprintf(msg, sizeof(msg), "ok %s\nwindow of %d process%s written\n", d->win.path,
			 d->win.procs, d->win.procs == 1 ? "" : "es");
	else
		snprintf(msg, sizeof(msg), "error: the window's record failed: %s\n",
			 err[0] ? err + (strncmp(err, "spyre-bpftrace: ", 16) ? 0 : 16) : "no message");
	control_reply(d->win.client, msg);
	d->win.child = 0;
}

/* One request from the control socket. */
static void serve_control(struct daemon *d)
{
	char line[CONTROL_LINE], secs[32], path[CONTROL_LINE], msg[CONTROL_LINE + 512];
	unsigned long long from, to;
	int cfd = control_accept(d->control_fd, line, sizeof(line));
	pid_t pids[SBT_MAX_PIDS];
	int n;

	if (cfd < 0)
		return;
	if (!strcmp(line, "status")) {
		pthread_mutex_lock(&d->lock);
		n = fleet_processes(&d->fleet, pids, SBT_MAX_PIDS);
		pthread_mutex_unlock(&d->lock);
		snprintf(msg, sizeof(msg),
			 "ok\nversion %s\ncards %d\nprocesses with a card %d\nscrapes %llu\n"
			 "lost records %llu\nwindow %s\nflight recorder %llu records kept, %zu MiB\n",
			 SBT_VERSION, d->fleet.ncards - 1, n, (unsigned long long)d->self.scrapes,
			 (unsigned long long)attach_read_lost(&d->at), d->win.child ? d->win.path : "none",
			 (unsigned long long)(d->rec.records - d->rec.dropped_records),
			 recorder_bytes(&d->rec) >> 20);
		control_reply(cfd, msg);
	} else if (sscanf(line, "record %31s %4095s", secs, path) == 2 && path[0] == '/') {
		if (d->win.child)
			control_reply(cfd, "error: a window is open already; hint: wait for it\n");
		else
			open_window(d, cfd, secs, path);
	} else if (sscanf(line, "snapshot %llu %llu %4095s", &from, &to, path) == 3 && path[0] == '/' &&
		   from <= to) {
		take_snapshot(d, cfd, from, to, path);
	} else {
		control_reply(cfd, "error: unknown request; hint: status, record SECONDS /PATH\n");
	}
}

int cmd_daemon(int argc, char **argv)
{
	static const struct argp_option options[] = {
		{ "listen", OPT_LISTEN, "ADDR:PORT", 0, "serve /metrics and /healthz here (default " DEFAULT_LISTEN ")", 0 },
		{ "runtime-dir", OPT_RUNTIME_DIR, "DIR", 0, "the control socket's directory (default " CONTROL_DEFAULT_DIR ")", 0 },
		{ "recorder-seconds", OPT_REC_SECONDS, "T", 0, "the flight recorder keeps the last T seconds (default 120)", 0 },
		{ "recorder-mib", OPT_REC_MIB, "M", 0, "... in at most M MiB, taken as used (default 64)", 0 },
		{ "no-recorder", OPT_NO_REC, NULL, 0, "no flight recorder: nothing per event to user space", 0 },
		{ "device", OPT_DEVICE, "BDF|VID:DID|all", 0, "the cards to watch (repeatable; default Spyre's 1014:06a7, 1014:06a8)", 0 },
		{ "verbose", 'v', NULL, 0, "print the attach plan and the cards", 0 },
		{ 0 }
	};
	static const struct argp argp = {
		options, parse, NULL,
		"Watch every Spyre card on this host, always, at a cost nobody notices: VFIO "
		"ioctls by command (counts, errors, latency histograms), DMA mapping bytes, "
		"pinned bytes and interrupts per card, summed in the kernel and served to "
		"Prometheus on /metrics; the last minutes of those kernel events in a flight "
		"recorder, for `ctl snapshot`; a detailed window on `ctl record`. No uprobe is "
		"attached but in a window. Runs until SIGTERM; SIGHUP looks again for cards and "
		"processes.\n\nEXAMPLES:\n"
		"  spyre-bpftrace daemon\n"
		"  spyre-bpftrace daemon --listen 127.0.0.1:9464 --device 0000:3b:00.0\n"
		"  curl -s 127.0.0.1:9464/metrics | grep spyre_vfio_ioctls_total\n"
		"  spyre-bpftrace ctl snapshot --last 30s -o /tmp/last.pftrace",
		NULL, NULL, NULL
	};
	struct daemon_opts o = { .listen = DEFAULT_LISTEN, .runtime_dir = CONTROL_DEFAULT_DIR,
				 .recorder_seconds = 120, .recorder_mib = 64 };
	struct daemon *d = calloc(1, sizeof(*d));
	struct sigaction sa = { .sa_handler = on_signal };
	uint64_t watchdog_us = 0, next_ping = 0, next_sweep;
	struct timespec now;
	int ret;

	if (!d) {
		sbt_err("out of memory");
		return 1;
	}
	o.rec.buffer_size = 1 << 20; /* a few records per job, for the flight recorder */
	o.rec.max_probes = 1;
	o.rec.driver_mode = DRIVER_OFF;
	o.rec.fleet = true;
	argp_parse(&argp, argc, argv, 0, NULL, &o);
	o.rec.fleet_record = o.recorder_seconds > 0;
	sbt_verbosity = o.rec.verbose;
	libbpf_set_print((libbpf_print_fn_t)sbt_libbpf_print);
	d->o = &o;
	d->stats_fd = -1;
	d->control_fd = -1;
	pthread_mutex_init(&d->lock, NULL);
	clock_gettime(CLOCK_REALTIME, &now);
	d->self.start_time = (double)now.tv_sec + now.tv_nsec / 1e9;
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGHUP, &sa, NULL);
	signal(SIGPIPE, SIG_IGN);

	ret = start(d);
	if (!ret) {
		sd_notifyf(0, "READY=1\nSTATUS=watching %d cards", d->fleet.ncards - 1);
		if (sd_watchdog_enabled(0, &watchdog_us) <= 0)
			watchdog_us = 0;
		next_sweep = sbt_now_boottime() + SWEEP_SECONDS * 1000000000ull;
		while (!stop_sig) {
			uint64_t t = sbt_now_boottime();

			if (watchdog_us && t >= next_ping) {
				sd_notify(0, "WATCHDOG=1");
				next_ping = t + watchdog_us * 1000 / 2;
			}
			if (t >= next_sweep) {
				pthread_mutex_lock(&d->lock);
				fleet_sweep(&d->fleet);
				pthread_mutex_unlock(&d->lock);
				next_sweep = t + SWEEP_SECONDS * 1000000000ull;
			}
			if (reload_sig) {
				reload_sig = 0;
				sd_notify(0, "RELOADING=1");
				look_around(d, "SIGHUP");
				sd_notifyf(0, "READY=1\nSTATUS=watching %d cards", d->fleet.ncards - 1);
			}
			{
				struct pollfd p[2] = { { d->control_fd, POLLIN, 0 },
						       { d->rb ? ring_buffer__epoll_fd(d->rb) : -1, POLLIN, 0 } };

				/* a signal ends it early */
				if (poll(p, 2, 500) > 0 && (p[0].revents & POLLIN))
					serve_control(d);
				if (d->rb)
					ring_buffer__consume(d->rb);
			}
			check_window(d, false);
		}
		sd_notify(0, "STOPPING=1");
		if (d->win.child) { /* the window ends now, written */
			kill(d->win.child, SIGINT);
			check_window(d, true);
		}
		sbt_warn("stopping on %s after %llu scrapes", strsignal(stop_sig),
			 (unsigned long long)d->self.scrapes);
	}
	control_close(d->control_fd, o.runtime_dir);
	ring_buffer__free(d->rb);
	recorder_free(&d->rec);
	http_stop(d->http);
	if (d->stats_fd >= 0)
		close(d->stats_fd);
	attach_close(&d->at);
	pthread_mutex_destroy(&d->lock);
	free(d);
	return ret ? 1 : 0;
}
