// SPDX-License-Identifier: GPL-2.0-only
/*
 * `spyre-bpftrace record`: the story of a recording. Set up (the attach
 * module opens, configures, loads and attaches; the workload is held
 * before exec until its probes are in place), drain the ring buffer into
 * the output until the traced processes are gone, -d elapses, or Ctrl-C,
 * then finish (final counters, the summary).
 */
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include "attach/attach.h"
#include "attach/metawrite.h"
#include "attach/preflight.h"
#include "base/clock.h"
#include "base/log.h"
#include "base/procfs.h"
#include "capture/names.h"
#include "capture/reorder.h"
#include "commands.h"
#include "model/output.h"
#include "record/cli.h"
#include "record/spawn.h"
#include "spyre.skel.h"

#define TICK_MS 100
#define RESCAN_MS 1000
#define CLOCK_EVERY_MS 10000 /* clock snapshots in long traces */
#define MAX_TGIDS 1024

/* Probes put in place after the process could already run: how many, and
 * how late at most. Calls in that window are not in the trace. */
struct late {
	unsigned n;
	uint64_t max_ns;
};

struct recording {
	struct record_opts *o;
	struct attacher at;
	struct meta_writer mw;
	struct output out;
	struct workload wl;
	struct ring_buffer *rb;
	struct reorder held; /* records in the order things happened (reorder.h) */
	char out_path[4096];
	uint64_t records; /* BPF records received */
	pid_t tgids[MAX_TGIDS];
	int ntgids;
	struct late forks, libs;
	uint64_t start_ts, lost_total;
	uint64_t missed_total; /* of lost_total, probe runs the kernel skipped */
};

static volatile sig_atomic_t stop_requested, status_requested;

/* SIGINT, SIGTERM, SIGHUP (the terminal went away): end the recording
 * cleanly; SIGUSR1: print a status line, as dd does. */
static void on_signal(int sig)
{
	if (sig == SIGUSR1)
		status_requested = 1;
	else
		stop_requested = 1;
}

static void add_tgid(struct recording *r, pid_t pid)
{
	for (int i = 0; i < r->ntgids; i++)
		if (r->tgids[i] == pid)
			return;
	if (r->ntgids < MAX_TGIDS)
		r->tgids[r->ntgids++] = pid;
}

static void late_by(struct late *l, uint64_t since_ts)
{
	uint64_t now = sbt_now_boottime(), d = now > since_ts ? now - since_ts : 0;

	l->n++;
	if (d > l->max_ns)
		l->max_ns = d;
}

/* ---- interrupts ------------------------------------------------------------ */

struct irq_ctx {
	struct recording *r;
	int want; /* name this one; -1: every accelerator interrupt, filtered in */
	char bdfs[32][16];
	int nbdfs;
};

/* An accelerator interrupt is kept if --device wants the card whose PCI
 * address its name holds; one with no address in its name, only when every
 * device is wanted. */
static bool irq_card_wanted(const struct recording *r, const char *name)
{
	uint32_t bdf;

	if (sbt_bdf_find(name, &bdf))
		return devfilter_wants_bdf(&r->o->devices, bdf);
	return r->o->devices.n == 0;
}

static void irq_name_cb(int irq, const char *name, void *ctx)
{
	struct irq_ctx *c = ctx;
	uint32_t one = 1, key = (uint32_t)irq;

	if (c->want >= 0 ? irq != c->want
			 : !irq_is_accelerator(name, c->bdfs, c->nbdfs) || !irq_card_wanted(c->r, name))
		return;
	if (c->want < 0)
		bpf_map_update_elem(bpf_map__fd(c->r->at.skel->maps.irq_filter), &key, &one, BPF_ANY);
	metaw_irq(&c->r->mw, irq, name);
}

/* Name an interrupt in the capture (once), from /proc/interrupts. */
static void name_irq(struct recording *r, int irq)
{
	struct irq_ctx c = { .r = r, .want = irq };

	if (irq >= 0 && irq < METAW_MAX_IRQ && !r->mw.irq_named[irq])
		proc_for_each_irq(irq_name_cb, &c);
}

/* Interrupts: vfio's, those naming a device bound to vfio-pci, and --irq. */
static int filter_irqs(struct recording *r)
{
	struct irq_ctx all = { .r = r, .want = -1 };
	int fd = bpf_map__fd(r->at.skel->maps.irq_filter);

	all.nbdfs = pci_vfio_devices(all.bdfs, 32);
	proc_for_each_irq(irq_name_cb, &all);
	for (int i = 0; i < r->o->nirqs; i++) {
		uint32_t key = (uint32_t)r->o->irqs[i], one = 1;

		if (bpf_map_update_elem(fd, &key, &one, BPF_ANY)) {
			sbt_err("cannot trace interrupt %d: %s", r->o->irqs[i], strerror(errno));
			return -errno;
		}
		name_irq(r, r->o->irqs[i]);
	}
	return 0;
}

/* ---- the capture loop ------------------------------------------------------ */

/* A traced process made a child, or opened a runtime library: put the
 * runtime probes on it now, before it can get far. */
static void attach_late(struct recording *r, const struct sbt_hdr *h)
{
	if (h->type == SBT_TASK_NEW) {
		attach_runtime(&r->at, (pid_t)h->tgid);
		late_by(&r->forks, h->ts);
	} else {
		const struct sbt_lib_open *l = (const void *)h;
		char path[SBT_LIB_PATH_LEN + 1];

		char seen[SBT_LIB_PATH_LEN + 64];

		snprintf(path, sizeof(path), "%.*s", SBT_LIB_PATH_LEN, l->path);
		/* the path as the process sees it: under its root (a chroot, a container) */
		proc_root_path((pid_t)h->tgid, path, seen, sizeof(seen));
		if (attach_library(&r->at, seen, "opened while traced") > 0)
			late_by(&r->libs, h->ts);
	}
}

static int on_record(void *ctx, void *data, size_t size)
{
	struct recording *r = ctx;
	struct sbt_hdr *h = data;

	if (size < sizeof(*h) || sizeof(*h) + h->size > size)
		return 0;
	r->records++;
	/* metadata first, so the correlation has it for this very record */
	if (h->type == SBT_IRQ)
		name_irq(r, ((struct sbt_irq *)h)->irq);
	if (h->type == SBT_META_IRQ) { /* named in BPF: once is enough */
		uint32_t irq = ((struct sbt_meta_irq *)h)->irq;

		if (irq < METAW_MAX_IRQ && r->mw.irq_named[irq])
			return 0;
		if (irq < METAW_MAX_IRQ)
			r->mw.irq_named[irq] = true;
	}
	if (h->type == SBT_IOCTL && ((struct sbt_ioctl *)h)->fd_kind == SBT_FD_GROUP)
		metaw_group_fd(&r->mw, (pid_t)h->tgid, ((struct sbt_ioctl *)h)->fd);
	if (reorder_add(&r->held, h))
		output_add(&r->out, h); /* out of memory: as it came */
	if (h->type == SBT_TASK_NEW && (((struct sbt_task *)h)->flags & 1)) {
		add_tgid(r, (pid_t)h->tgid);
		attach_late(r, h);
	} else if (h->type == SBT_LIB_OPEN) {
		attach_late(r, h);
	} else if (h->type == SBT_TASK_EXIT && (((struct sbt_task *)h)->flags & 1)) {
		attach_forget(&r->at, (pid_t)h->tgid);
	}
	return 0;
}

static void emit_held(void *ctx, const struct sbt_hdr *h)
{
	output_add(&((struct recording *)ctx)->out, h);
}

/* Hand on what began long enough ago that nothing earlier can still come. */
static void release_held(struct recording *r, bool all)
{
	reorder_release_settled(&r->held, sbt_now_boottime(), all, emit_held, r);
}

static void check_lost(struct recording *r)
{
	uint64_t missed = attach_read_missed(&r->at), lost = attach_read_lost(&r->at), total;

	if (lost == UINT64_MAX)
		lost = r->lost_total - r->missed_total; /* as last read */
	if (missed > r->missed_total)
		r->missed_total = missed;
	total = lost + r->missed_total;
	if (total > r->lost_total) {
		struct sbt_lost l = { 0 };

		l.count = total - r->lost_total;
		l.total = total;
		r->lost_total = total;
		metaw_put(&r->mw, &l.h, SBT_LOST, sizeof(l));
	}
}

static void show_status(struct recording *r, bool final)
{
	if (r->o->quiet || !isatty(STDERR_FILENO))
		return;
	if (final) {
		fputs("\r\033[K", stderr);
		return;
	}
	fprintf(stderr, "\r\033[K[spyre-bpftrace] %6.1f s  %llu events  %llu lost  (Ctrl-C to stop)",
		(double)(sbt_now_boottime() - r->start_ts) / 1e9, (unsigned long long)r->records,
		(unsigned long long)r->lost_total);
}

/* Libraries a traced process mapped without our seeing the open (through
 * a path BPF could not read, say). */
static void rescan_maps(struct recording *r)
{
	for (int i = 0; i < r->ntgids; i++) {
		char **libs = NULL; /* set when n > 0; gcc -flto cannot tell */
		int n = proc_mapped_files(r->tgids[i], &libs);

		for (int k = 0; k < n; k++)
			attach_library(&r->at, libs[k], "mapped by the process");
		if (n > 0)
			proc_free_paths(libs, n);
	}
}

static const char *run_loop(struct recording *r)
{
	uint64_t deadline = r->at.deadline_ns;
	uint64_t next_rescan = r->start_ts + RESCAN_MS * 1000000ull;
	uint64_t next_clock = r->start_ts + CLOCK_EVERY_MS * 1000000ull;
	int err;

	for (;;) {
		uint64_t now;

		err = ring_buffer__poll(r->rb, TICK_MS);
		/* BPF submits without a wakeup until the buffer is a quarter full;
		 * poll only returns on wakeups, so take the rest on each tick */
		if (err >= 0)
			err = ring_buffer__consume(r->rb);
		if (err < 0 && err != -EINTR) {
			sbt_err("reading the ring buffer: %s", strerror(-err));
			return "error";
		}
		now = sbt_now_boottime();
		release_held(r, false);
		check_lost(r);
		show_status(r, false);
		if (status_requested) {
			status_requested = 0;
			fprintf(stderr, "spyre-bpftrace: %.1f s, %llu events, %llu lost, %.1f KiB written\n",
				(double)(now - r->start_ts) / 1e9, (unsigned long long)r->records,
				(unsigned long long)r->lost_total, (double)output_bytes(&r->out) / 1024.0);
		}
		if (now >= next_clock) {
			metaw_clock(&r->mw);
			next_clock = now + CLOCK_EVERY_MS * 1000000ull;
		}
		output_flush(&r->out);
		workload_reap(&r->wl, false);
		if (stop_requested)
			return "interrupted";
		if (r->out.error)
			return "write error";
		if (deadline && now >= deadline)
			return "duration elapsed";
		if (!attach_any_traced(&r->at))
			return "traced processes exited";
		if (now >= next_rescan) {
			rescan_maps(r);
			next_rescan = now + RESCAN_MS * 1000000ull;
		}
	}
}

static void print_late(const char *what, const struct late *l, const char *since)
{
	if (l->n)
		fprintf(stderr,
			"\n  %u %s: runtime probes in place at most %.1f ms after %s; calls "
			"made before that are not in the trace\n",
			l->n, what, (double)l->max_ns / 1e6, since);
}

static void summary(struct recording *r, const char *why)
{
	uint64_t untraced = attach_read_untraced_runs(&r->at), unknown;
	uint64_t peak = attach_read_ring_peak(&r->at), size = attach_ring_size(&r->at);

	fprintf(stderr, "spyre-bpftrace: %s; %llu events, %s %s (%.1f KiB)\n", why, (unsigned long long)r->records,
		output_format_name(r->out.fmt), r->out_path, (double)output_bytes(&r->out) / 1024.0);
	output_report(&r->out, stderr, REPORT_TEXT);
	/* before it loses records, a ring buffer runs near full */
	if (peak * 2 >= size || r->lost_total > r->missed_total) {
		double unit = size >= (1 << 20) ? 1 << 20 : 1 << 10;

		fprintf(stderr,
			"\n  the ring buffer was at most %.0f%% full (%.1f of %.0f %s); hint: a larger "
			"--buffer-size\n",
			100.0 * (double)peak / (double)size, (double)peak / unit, (double)size / unit,
			size >= (1 << 20) ? "MiB" : "KiB");
	}
	if (r->missed_total)
		fprintf(stderr,
			"\n  %llu of the lost events were probe runs the kernel skipped: a BPF program "
			"was already running on that CPU\n",
			(unsigned long long)r->missed_total);
	if ((unknown = attach_read_vfio_cmds_unknown(&r->at)))
		fprintf(stderr,
			"\n  %llu ioctls carried VFIO's numbers on files not known as VFIO's (not under "
			"/dev/vfio); hint: --vfio-path DIR (or GLOB) names a mock's or another driver's files\n",
			(unsigned long long)unknown);
	print_late("child processes followed", &r->forks, "their fork");
	print_late("runtime libraries found when opened", &r->libs, "the open");
	if (r->at.refused)
		fprintf(stderr, "\n  %zu runtime function%s not probed; -v says why\n", r->at.refused,
			r->at.refused == 1 ? " was" : "s were");
	if (untraced && untraced != UINT64_MAX)
		fprintf(stderr, "\n  WARNING: runtime probes ran %llu times in untraced processes\n",
			(unsigned long long)untraced);
	if (r->wl.pid > 0 && r->wl.reaped) {
		if (WIFEXITED(r->wl.status) && WEXITSTATUS(r->wl.status))
			fprintf(stderr, "\n  command exited with status %d (and so does spyre-bpftrace)\n",
				WEXITSTATUS(r->wl.status));
		else if (WIFSIGNALED(r->wl.status))
			fprintf(stderr, "\n  command killed by signal %d (spyre-bpftrace exits with %d)\n",
				WTERMSIG(r->wl.status), 128 + WTERMSIG(r->wl.status));
	}
	if (r->out.fmt == FMT_PERFETTO)
		fprintf(stderr, "\n  open %s in https://ui.perfetto.dev (Open trace file)\n", r->out_path);
}

/* The -c command's own exit status when it ended by itself and failed
 * (128 + N for a signal N, as a shell gives it), as time and perf stat
 * pass it on: a script sees its command fail; else 0. */
static int command_status(const struct recording *r)
{
	if (r->wl.pid <= 0 || !r->wl.reaped)
		return 0;
	if (WIFEXITED(r->wl.status))
		return WEXITSTATUS(r->wl.status);
	return WIFSIGNALED(r->wl.status) ? 128 + WTERMSIG(r->wl.status) : 0;
}

static void finish(struct recording *r, const char *why)
{
	struct sbt_meta_end e = { 0 };

	/* what is still in the ring buffer, then the final counters */
	if (r->rb)
		ring_buffer__consume(r->rb);
	release_held(r, true);
	check_lost(r);
	metaw_thread_names(&r->mw, r->tgids, r->ntgids);
	metaw_clock(&r->mw);
	e.records = r->records;
	e.lost = r->lost_total;
	e.duration_ns = sbt_now_boottime() - r->start_ts;
	metaw_put(&r->mw, &e.h, SBT_META_END, sizeof(e));
	show_status(r, true);
	output_close(&r->out);
	if (!r->o->quiet)
		summary(r, why);
}

/* ---- set-up ------------------------------------------------------------------ */

static int preflight(struct record_opts *o)
{
	char err[512];

	if (sbt_check_privileges(geteuid(), sbt_effective_caps(), err, sizeof(err)) ||
	    sbt_check_btf("/sys/kernel/btf/vmlinux", err, sizeof(err))) {
		sbt_err("%s", err);
		return -1;
	}
	for (int i = 0; i < o->npids; i++) {
		char note[160];

		if (sbt_resolve_pid("/proc", &o->pids[i], note, sizeof(note), err, sizeof(err))) {
			sbt_err("%s", err);
			return -1;
		}
		if (note[0])
			sbt_note("%s", note);
	}
	return 0;
}

static void on_function(void *ctx, const struct probe_site *s)
{
	struct recording *r = ctx;

	if (!s->refused)
		metaw_probe(&r->mw, s);
}

/* The runtime probes: the libraries each traced process can load, on it. */
static int attach_runtime_probes(struct recording *r)
{
	struct record_opts *o = r->o;
	int err;

	/* every process first, so each library found goes on all of them */
	for (int i = 0; i < r->ntgids; i++)
		if ((err = attach_runtime(&r->at, r->tgids[i])) < 0)
			return err;
	for (int i = 0; i < o->npids && !r->at.interrupted; i++)
		if ((err = attach_find_libraries(&r->at, o->pids[i], NULL)) < 0 && err != -EINTR)
			return err;
	if (r->wl.pid > 0 && !r->at.interrupted && (err = attach_find_libraries(&r->at, r->wl.pid, r->wl.argv)) < 0 &&
	    err != -EINTR)
		return err;
	if (!r->at.interrupted)
		attach_warn_unmatched(&r->at, o->command != NULL);
	if (r->at.interrupted || attach_nfunctions(&r->at))
		return 0;
	for (int i = 0; i < o->npids; i++)
		if (!proc_exists(o->pids[i])) {
			sbt_err("PID %d exited while its probes were being attached", o->pids[i]);
			return -ESRCH;
		}
	if (o->command) {
		/* a framework may dlopen() it later: BPF sees the open */
		sbt_warn("no Spyre runtime library found yet for '%s' (looked for libflex.so, "
			 "libsenlib*.so and --probe libraries); watching for one to be loaded; "
			 "-v lists where it looked",
			 o->command);
		return 0;
	}
	sbt_err("no Spyre runtime library in the maps or the library path of PID %d (looked for "
		"libflex.so, libsenlib*.so and --probe libraries); hint: --probe LIB:PATTERN",
		o->pids[0]);
	return -ENOENT;
}

static int setup(struct recording *r)
{
	struct record_opts *o = r->o;
	int err;

	if ((err = sbt_ensure_tracefs()))
		return err;
	r->wl.keep = o->keep_command;
	if (o->command && (err = workload_spawn(&r->wl, o->command)))
		return err;

	r->at.on_function = on_function;
	r->at.ctx = r;
	r->at.stop = &stop_requested;
	if (o->duration > 0)
		r->at.deadline_ns = r->start_ts + (uint64_t)(o->duration * 1e9);
	if ((err = attach_open(&r->at, o)))
		return err;
	/* vfio is loaded but some of its functions got no probe: say so, the
	 * syscall paths carry on without their detail */
	if (!o->verbose && r->at.drv.nnone && o->driver_mode != DRIVER_OFF && !access("/sys/module/vfio", F_OK))
		sbt_warn("%d of %d vfio functions have no driver-level probe here; -v says why", r->at.drv.nnone,
			 r->at.drv.nnone + r->at.drv.nfentry + r->at.drv.nkprobe);
	if ((err = attach_load(&r->at)))
		return err;
	for (int i = 0; i < o->npids; i++)
		add_tgid(r, o->pids[i]);
	if (r->wl.pid > 0)
		add_tgid(r, r->wl.pid);
	for (int i = 0; i < r->ntgids; i++)
		if ((err = attach_trace_pid(&r->at, r->tgids[i])))
			return err;
	if ((err = attach_kernel(&r->at)))
		return err;

	metaw_clock(&r->mw);
	metaw_host(&r->mw);
	for (int i = 0; i < o->npids; i++) {
		metaw_proc(&r->mw, o->pids[i], NULL);
		metaw_groups_of(&r->mw, o->pids[i]); /* after its process record */
	}
	if (r->wl.pid > 0)
		metaw_proc(&r->mw, r->wl.pid, r->wl.argv);
	if ((err = attach_runtime_probes(r)))
		return err;
	if ((err = filter_irqs(r)))
		return err;
	if (!r->wl.pid)
		metaw_thread_names(&r->mw, r->tgids, r->ntgids); /* a -c child is named when it execs */
	sbt_info(1, "  runtime: %zu functions, %zu uprobes on %d process%s\n", attach_nfunctions(&r->at),
		 attach_nuprobes(&r->at), r->ntgids, r->ntgids == 1 ? "" : "es");
	if (o->verbose) /* last: once it shows, every probe is in place */
		plan_print(&r->at.plan, stderr);
	r->rb = ring_buffer__new(bpf_map__fd(r->at.skel->maps.events), on_record, r, NULL);
	if (!r->rb) {
		sbt_err("cannot open the ring buffer: %s", strerror(errno));
		return -errno;
	}
	return 0;
}

static void cleanup(struct recording *r)
{
	ring_buffer__free(r->rb);
	reorder_free(&r->held);
	attach_close(&r->at);
	workload_end(&r->wl); /* -d elapsed or setup failed: end the command we started */
	output_free(&r->out);
}

/* -o, or spyre-bpftrace-<pid>.pftrace / spyre-bpftrace-<command>.pftrace */
static void default_output(const struct record_opts *o, char *buf, size_t len)
{
	char name[64] = "trace";

	if (o->output) {
		snprintf(buf, len, "%s", o->output);
		return;
	}
	if (o->npids) {
		snprintf(name, sizeof(name), "%d", o->pids[0]);
	} else if (o->command) {
		size_t n = strcspn(o->command, " \t");
		const char *cmd = o->command, *slash;

		while ((slash = memchr(cmd, '/', n - (size_t)(cmd - o->command))))
			cmd = slash + 1;
		snprintf(name, sizeof(name), "%.*s", (int)(n - (size_t)(cmd - o->command)), cmd);
	}
	snprintf(buf, len, "spyre-bpftrace-%s.%s", name,
		 o->format && !strcmp(o->format, "json")  ? "json"
		 : o->format && !strcmp(o->format, "sbt") ? "sbt"
							  : "pftrace");
}

int cmd_record(int argc, char **argv)
{
	struct record_opts o;
	struct recording r = { .o = &o, .wl = { .go_fd = -1 } };
	struct sigaction sa = { .sa_handler = on_signal };
	struct rlimit rl = { RLIM_INFINITY, RLIM_INFINITY };
	enum out_format fmt;
	const char *why;
	char err[512];
	int ret;

	if (cli_parse_record(argc, argv, &o, 0, err, sizeof(err)))
		return 2;
	default_output(&o, r.out_path, sizeof(r.out_path));
	if (output_format(r.out_path, o.format, &fmt, err, sizeof(err))) {
		sbt_err("%s", err);
		cli_free_record(&o);
		return 2;
	}
	sbt_verbosity = o.verbose;
	sbt_log_quiet(o.quiet);
	libbpf_set_print((libbpf_print_fn_t)sbt_libbpf_print);
	if (preflight(&o)) {
		cli_free_record(&o);
		return 1;
	}
	ret = output_open(&r.out, r.out_path, fmt, !o.quiet, err, sizeof(err));
	if (ret) {
		sbt_err("cannot write '%s': %s; hint: choose another path with -o", r.out_path, err);
		output_free(&r.out);
		cli_free_record(&o);
		return 1;
	}
	r.mw.out = &r.out;
	setrlimit(RLIMIT_MEMLOCK, &rl); /* kernels before 5.11 charge BPF maps here */
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGHUP, &sa, NULL);
	sigaction(SIGUSR1, &sa, NULL);
	signal(SIGPIPE, SIG_IGN);

	r.start_ts = sbt_now_boottime();
	/* the output takes its name once the run is set up: a run that fails
	 * before leaves an existing file as it was */
	if (setup(&r) || output_commit(&r.out)) {
		if (r.out.error)
			sbt_err("cannot write '%s': %s", r.out_path, strerror(r.out.error));
		output_close(&r.out);
		cleanup(&r);
		cli_free_record(&o);
		return 1;
	}
	if (r.at.interrupted) {
		why = stop_requested ? "interrupted while attaching" : "duration elapsed while attaching";
	} else {
		workload_start(&r.wl);
		why = run_loop(&r);
	}
	finish(&r, why);
	if (r.out.error)
		sbt_err("writing '%s' failed: %s; the file holds what came before", r.out_path, strerror(r.out.error));
	ret = r.out.error || !strcmp(why, "error") ? 1 : command_status(&r);
	cleanup(&r);
	cli_free_record(&o);
	return ret;
}
