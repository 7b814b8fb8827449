// SPDX-License-Identifier: GPL-2.0-only
/*
 * `spyre-bpftrace record`: open, configure, load and attach the BPF
 * programs, then drain the ring buffer into a capture file until the
 * traced processes are gone, -d elapses, or Ctrl-C.
 */
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <fnmatch.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <wordexp.h>

#include "cli.h"
#include "clock.h"
#include "commands.h"
#include "libresolve.h"
#include "names.h"
#include "output.h"
#include "driver.h"
#include "plan.h"
#include "preflight.h"
#include "probes.h"
#include "procfs.h"
#include "spyre.skel.h"

#define TICK_MS 100
#define RESCAN_MS 1000
#define CLOCK_EVERY_MS 10000 /* clock snapshots in long traces */
#define MAX_TGIDS 1024
#define MAX_GROUPS 64

struct recorder {
	struct record_opts *o;
	struct spyre_bpf *skel;
	struct ring_buffer *rb;
	struct output out;
	char out_path[4096];
	uint64_t records; /* BPF records received */
	struct probe_spec *specs;
	size_t nspecs;
	struct probe_set probes;
	struct bpf_link **links;
	size_t nlinks;
	struct plan plan;
	struct driver_plan drv;
	const char *patterns[SBT_MAX_FD_PATTERNS];
	uint32_t pattern_kinds[SBT_MAX_FD_PATTERNS];
	int npatterns;
	pid_t tgids[MAX_TGIDS];
	int ntgids;
	bool irq_named[1024];
	struct {
		pid_t pid;
		int group;
	} groups[MAX_GROUPS]; /* VFIO groups seen per process */
	int ngroups;
	pid_t child;
	int go_fd, child_status;
	bool child_reaped;
	uint64_t start_ts, lost_total;
	uint64_t missed_total; /* of lost_total, probe runs the kernel skipped */
};

static volatile sig_atomic_t stop_requested;

static void on_signal(int sig)
{
	(void)sig;
	stop_requested = 1;
}

__attribute__((format(printf, 1, 2))) static void say_error(const char *fmt, ...)
{
	va_list ap;

	fputs("spyre-bpftrace: ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
}

static int verbose_level;

static int libbpf_print(enum libbpf_print_level level, const char *fmt, va_list args)
{
	if (level == LIBBPF_DEBUG && verbose_level < 2)
		return 0;
	if (level == LIBBPF_INFO && verbose_level < 1)
		return 0;
	if (level == LIBBPF_WARN && verbose_level < 1)
		return 0;
	return vfprintf(stderr, fmt, args);
}

/* ---- records the loader adds ------------------------------------------- */

static void put_record(struct recorder *r, struct sbt_hdr *h, uint16_t type, size_t total)
{
	h->type = type;
	h->size = (uint16_t)(total - sizeof(*h));
	if (!h->ts)
		h->ts = sbt_now_boottime();
	output_add(&r->out, h);
}

static void write_host(struct recorder *r)
{
	struct sbt_meta_host h = { 0 };
	struct utsname u;

	gethostname(h.hostname, sizeof(h.hostname) - 1);
	if (!uname(&u))
		snprintf(h.release, sizeof(h.release), "%.*s", (int)sizeof(h.release) - 1, u.release);
	snprintf(h.version, sizeof(h.version), "%s", SBT_VERSION);
	h.clock_id = CLOCK_BOOTTIME;
	put_record(r, &h.h, SBT_META_HOST, sizeof(h));
}

static void write_clock(struct recorder *r)
{
	struct sbt_meta_clock c;

	sbt_clock_snapshot(&c);
	put_record(r, &c.h, SBT_META_CLOCK, sizeof(c));
}

/* argv: the -c command, not yet exec'd; NULL: read /proc */
static void write_proc(struct recorder *r, pid_t pid, char *const *argv)
{
	struct {
		struct sbt_meta_proc p;
		char cmd[4096];
	} rec = { 0 };

	rec.p.pid = (uint32_t)pid;
	rec.p.h.tgid = rec.p.h.tid = (uint32_t)pid;
	if (argv) {
		const char *base = strrchr(argv[0], '/');
		size_t n = 0;

		for (int i = 0; argv[i] && n < sizeof(rec.cmd); i++)
			n += (size_t)snprintf(rec.cmd + n, sizeof(rec.cmd) - n, "%s", argv[i]) + 1;
		rec.p.cmdline_len = (uint32_t)(n < sizeof(rec.cmd) ? n : sizeof(rec.cmd));
		snprintf(rec.p.comm, sizeof(rec.p.comm), "%.15s", base ? base + 1 : argv[0]);
	} else {
		rec.p.cmdline_len = (uint32_t)proc_cmdline(pid, rec.cmd, sizeof(rec.cmd));
		proc_comm(pid, pid, rec.p.comm, sizeof(rec.p.comm));
	}
	put_record(r, &rec.p.h, SBT_META_PROC, sizeof(rec.p) + rec.p.cmdline_len);
}

static void write_probe(struct recorder *r, const struct probe_site *s)
{
	struct {
		struct sbt_meta_probe p;
		char strings[8192];
	} rec = { 0 };
	int n;

	rec.p.id = s->id;
	rec.p.role = (uint16_t)s->role;
	rec.p.bytes_arg = (int16_t)s->bytes_arg;
	rec.p.offset = s->offset;
	n = snprintf(rec.strings, sizeof(rec.strings), "%s%c%s%c%s", s->name, 0, s->pattern, 0,
		     s->lib);
	if (n < 0 || (size_t)n >= sizeof(rec.strings))
		n = sizeof(rec.strings) - 1;
	rec.p.strings_len = (uint32_t)n + 1;
	put_record(r, &rec.p.h, SBT_META_PROBE, sizeof(rec.p) + rec.p.strings_len);
}

static void thread_name_cb(pid_t pid, pid_t tid, void *ctx)
{
	struct sbt_thread_name t = { 0 };

	t.h.tgid = (uint32_t)pid;
	t.h.tid = (uint32_t)tid;
	proc_comm(pid, tid, t.comm, sizeof(t.comm));
	if (t.comm[0])
		put_record(ctx, &t.h, SBT_THREAD_NAME, sizeof(t));
}

static void write_thread_names(struct recorder *r)
{
	for (int i = 0; i < r->ntgids; i++)
		proc_for_each_task(r->tgids[i], thread_name_cb, r);
}

struct irq_ctx {
	struct recorder *r;
	int want; /* name this one; -1: every accelerator interrupt, filtered in */
	char bdfs[32][16];
	int nbdfs;
};

/* An accelerator interrupt is kept if --device wants the card whose PCI
 * address its name holds; one with no address in its name, only when every
 * device is wanted. */
static bool irq_card_wanted(const struct recorder *r, const char *name)
{
	uint32_t bdf;

	if (sbt_bdf_find(name, &bdf))
		return devfilter_wants_bdf(&r->o->devices, bdf);
	return r->o->devices.n == 0;
}

static void irq_name_cb(int irq, const char *name, void *ctx)
{
	struct irq_ctx *c = ctx;
	struct sbt_meta_irq m = { 0 };
	uint32_t one = 1, key = (uint32_t)irq;

	if (c->want >= 0 ? irq != c->want
			 : !irq_is_accelerator(name, c->bdfs, c->nbdfs) || !irq_card_wanted(c->r, name))
		return;
	if (c->want < 0)
		bpf_map_update_elem(bpf_map__fd(c->r->skel->maps.irq_filter), &key, &one, BPF_ANY);
	if (irq >= 0 && irq < 1024) {
		if (c->r->irq_named[irq])
			return;
		c->r->irq_named[irq] = true;
	}
	m.irq = (uint32_t)irq;
	snprintf(m.name, sizeof(m.name), "%s", name);
	put_record(c->r, &m.h, SBT_META_IRQ, sizeof(m));
}

/* Name an interrupt in the capture (once), from /proc/interrupts. */
static void name_irq(struct recorder *r, int irq)
{
	struct irq_ctx c = { .r = r, .want = irq };

	if (irq >= 0 && irq < 1024 && !r->irq_named[irq])
		proc_for_each_irq(irq_name_cb, &c);
}

/* ---- processes --------------------------------------------------------- */

static bool have_tgid(const struct recorder *r, pid_t pid)
{
	for (int i = 0; i < r->ntgids; i++)
		if (r->tgids[i] == pid)
			return true;
	return false;
}

static void add_tgid(struct recorder *r, pid_t pid)
{
	if (!have_tgid(r, pid) && r->ntgids < MAX_TGIDS)
		r->tgids[r->ntgids++] = pid;
}

static int map_traced(struct recorder *r, pid_t pid)
{
	uint32_t key = (uint32_t)pid, one = 1;

	add_tgid(r, pid);
	if (bpf_map_update_elem(bpf_map__fd(r->skel->maps.traced), &key, &one, BPF_ANY))
		return -errno;
	return 0;
}

static bool any_traced(struct recorder *r)
{
	uint32_t key;

	return bpf_map_get_next_key(bpf_map__fd(r->skel->maps.traced), NULL, &key) == 0;
}

/* -c: fork now, exec later, once every probe is in place. */
static int spawn_child(struct recorder *r)
{
	wordexp_t we;
	int pfd[2], ret;

	ret = wordexp(r->o->command, &we, WRDE_NOCMD);
	if (ret || !we.we_wordc) {
		say_error("cannot parse command '%s'%s; hint: quote it as one argument: -c './app --flag'",
			  r->o->command, ret == WRDE_CMDSUB ? " (no $(...) or `...`)" : "");
		if (!ret)
			wordfree(&we);
		return -EINVAL;
	}
	if (pipe2(pfd, O_CLOEXEC)) {
		wordfree(&we);
		return -errno;
	}
	r->child = fork();
	if (r->child < 0) {
		ret = -errno;
		wordfree(&we);
		return ret;
	}
	if (r->child == 0) {
		char c;

		close(pfd[1]);
		/* EOF instead of a byte: the tracer gave up; do not run untraced */
		if (read(pfd[0], &c, 1) != 1)
			_exit(127);
		execvp(we.we_wordv[0], we.we_wordv);
		fprintf(stderr, "spyre-bpftrace: cannot run '%s': %s\n", we.we_wordv[0],
			strerror(errno));
		_exit(127);
	}
	close(pfd[0]);
	r->go_fd = pfd[1];
	wordfree(&we);
	return 0;
}

static void start_child(struct recorder *r)
{
	if (r->go_fd > 0) {
		if (write(r->go_fd, "g", 1) != 1)
			say_error("cannot start the command: %s", strerror(errno));
		close(r->go_fd);
		r->go_fd = -1;
	}
}

static void reap_child(struct recorder *r, bool wait)
{
	if (r->child <= 0 || r->child_reaped)
		return;
	if (waitpid(r->child, &r->child_status, wait ? 0 : WNOHANG) == r->child)
		r->child_reaped = true;
}

/* ---- configure and load ------------------------------------------------ */

/* VFIO's own files, first match wins: cdev devices, the container, groups */
static const struct {
	const char *glob;
	uint32_t kind;
} vfio_patterns[SBT_VFIO_FD_PATTERNS] = {
	{ "/dev/vfio/devices/*", SBT_FD_DEVICE },
	{ "/dev/vfio/vfio", SBT_FD_CONTAINER },
	{ "/dev/vfio/*", SBT_FD_GROUP },
};

static void add_pattern(struct recorder *r, const char *glob, uint32_t kind)
{
	r->patterns[r->npatterns] = glob;
	r->pattern_kinds[r->npatterns++] = kind;
}

static unsigned long round_pow2(unsigned long v)
{
	unsigned long p = 4096;

	while (p < v)
		p <<= 1;
	return p;
}

static const char *const dma_map_tps[] = { "dma_map_phys", "dma_map_page" };
static const char *const dma_unmap_tps[] = { "dma_unmap_phys", "dma_unmap_page" };

static const char *first_tracepoint(const char *cat, const char *const *names, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (sbt_tracepoint_exists(cat, names[i]))
			return names[i];
	return NULL;
}

/* --device: vendor:device filters also become the addresses of the cards
 * present with those ids, for events that carry only an address. */
static void configure_devices(struct recorder *r)
{
	struct spyre_bpf *s = r->skel;
	struct devfilter *d = &r->o->devices;
	char desc[256];
	int added = devfilter_expand(d, "/sys/bus/pci/devices");

	s->rodata->n_dev_filters = (uint32_t)d->n;
	for (int i = 0; i < d->n; i++)
		s->rodata->dev_filters[i] = d->f[i];
	devfilter_describe(d, desc, sizeof(desc));
	plan_add(&r->plan, "device", "-", "keeping %s (%d present by ids)", desc, added);
}

static int configure(struct recorder *r)
{
	struct spyre_bpf *s = r->skel;
	unsigned long size = round_pow2(r->o->buffer_size);
	const char *tp;

	bpf_map__set_max_entries(s->maps.events, (uint32_t)size);
	s->rodata->wakeup_bytes = size / 4;
	if (size != r->o->buffer_size)
		plan_add(&r->plan, "buffer", "-", "ring buffer rounded up to %lu bytes", size);

	for (int i = 0; i < SBT_VFIO_FD_PATTERNS; i++)
		add_pattern(r, vfio_patterns[i].glob, vfio_patterns[i].kind);
	for (int i = 0; i < r->o->nvfio_paths; i++)
		add_pattern(r, r->o->vfio_paths[i], SBT_FD_PATH);
	s->rodata->n_patterns = (uint32_t)r->npatterns;

	if (!sbt_have_uprobes()) {
		say_error("uprobes not available on this kernel; hint: needs CONFIG_UPROBE_EVENTS=y");
		return -EOPNOTSUPP;
	}
	plan_add(&r->plan, "runtime", "uprobe+uretprobe", "on the runtime's entry points, cookie = probe id");

	configure_devices(r);
	driver_plan(s, (enum driver_mode)r->o->driver_mode, &r->drv, &r->plan);
	plan_add(&r->plan, "ioctl", "tracepoint syscalls:sys_*_ioctl", "VFIO fds only, args decoded in BPF");
	plan_add(&r->plan, "fd-track", "tracepoint syscalls:sys_*_openat,close", "learns accelerator fds");

	plan_add(&r->plan, "irq", "raw_tp irq_handler_entry,exit", "vfio-pci's, of --device cards; and --irq");

	if (sbt_tracepoint_exists("iommu", "map")) {
		plan_add(&r->plan, "iommu", "tracepoint iommu:map,unmap", "in traced tasks");
	} else {
		bpf_program__set_autoload(s->progs.iommu_map, false);
		bpf_program__set_autoload(s->progs.iommu_unmap, false);
		plan_add(&r->plan, "iommu", "-", "iommu:map: no such tracepoint on this kernel");
	}
	tp = first_tracepoint("dma", dma_map_tps, 2);
	if (tp)
		plan_add(&r->plan, "dma", tp, "tracepoint dma:%s (and its unmap twin)", tp);
	else
		plan_add(&r->plan, "dma", "-", "dma_map_phys, dma_map_page: no such tracepoint");
	if (!tp || !first_tracepoint("dma", dma_unmap_tps, 2)) {
		bpf_program__set_autoload(s->progs.dma_map, false);
		bpf_program__set_autoload(s->progs.dma_unmap, false);
	}

	if (sbt_have_tp_btf("sched_process_fork")) {
		bpf_program__set_autoload(s->progs.fork_raw, false);
		plan_add(&r->plan, "fork", "tp_btf sched_process_fork", "follows children of traced processes");
	} else {
		bpf_program__set_autoload(s->progs.fork_btf, false);
		plan_add(&r->plan, "fork", "-", "tp_btf: no BTF for sched_process_fork");
		plan_add(&r->plan, "fork", "raw_tp sched_process_fork", "follows children of traced processes");
	}
	plan_add(&r->plan, "task", "tracepoint sched_process_exit, task_rename", "thread names and exits");
	return 0;
}

static int fill_patterns(struct recorder *r)
{
	int fd = bpf_map__fd(r->skel->maps.fd_patterns);

	for (int i = 0; i < r->npatterns; i++) {
		struct sbt_fd_pattern p = { .kind = r->pattern_kinds[i] };
		size_t pl, sl;
		bool star;

		if (cli_split_glob(r->patterns[i], sizeof(p.prefix) - 1, &pl, &sl, &star))
			return -EINVAL;
		p.prefix_len = (uint16_t)pl;
		p.suffix_len = (uint16_t)sl;
		p.has_star = star;
		memcpy(p.prefix, r->patterns[i], pl);
		if (star)
			memcpy(p.suffix, r->patterns[i] + pl + 1, sl);
		uint32_t key = (uint32_t)i;

		if (bpf_map_update_elem(fd, &key, &p, BPF_ANY))
			return -errno;
	}
	return 0;
}

struct seed_ctx {
	struct recorder *r;
	pid_t pid;
};

/* Accelerator fds the process opened before we attached. */
static void seed_fd_cb(int fd, const char *target, void *ctx)
{
	struct seed_ctx *c = ctx;
	struct sbt_fd_key key = { (uint32_t)c->pid, fd };
	uint32_t kind = 0;

	if (!strcmp(target, "anon_inode:[vfio-device]"))
		kind = SBT_FD_DEVICE;
	for (int i = 0; !kind && i < c->r->npatterns; i++)
		if (!fnmatch(c->r->patterns[i], target, 0))
			kind = c->r->pattern_kinds[i];
	if (kind)
		bpf_map_update_elem(bpf_map__fd(c->r->skel->maps.accel_fds), &key, &kind, BPF_ANY);
}

/* ---- attach ------------------------------------------------------------- */

static int keep_link(struct recorder *r, struct bpf_link *link, const char *what)
{
	struct bpf_link **grown;
	int err = libbpf_get_error(link);

	if (err) {
		say_error("cannot attach %s: %s; hint: run with -v for the attach plan", what,
			  strerror(-err));
		return err;
	}
	grown = realloc(r->links, (r->nlinks + 1) * sizeof(*grown));
	if (!grown) {
		bpf_link__destroy(link);
		return -ENOMEM;
	}
	r->links = grown;
	r->links[r->nlinks++] = link;
	return 0;
}

static int attach_kernel(struct recorder *r)
{
	struct spyre_bpf *s = r->skel;
	struct bpf_program *fixed[] = {
		s->progs.openat_enter, s->progs.openat_exit, s->progs.close_enter,
		s->progs.ioctl_enter, s->progs.ioctl_exit, s->progs.irq_entry, s->progs.irq_exit,
		s->progs.iommu_map, s->progs.iommu_unmap, s->progs.fork_btf, s->progs.fork_raw,
		s->progs.task_exit, s->progs.task_rename,
	};
	const char *tp;
	int err;

	for (size_t i = 0; i < sizeof(fixed) / sizeof(fixed[0]); i++) {
		if (!bpf_program__autoload(fixed[i]))
			continue;
		err = keep_link(r, bpf_program__attach(fixed[i]), bpf_program__section_name(fixed[i]));
		if (err)
			return err;
	}
	for (int i = 0; i < r->drv.nprogs; i++) {
		struct bpf_program *p = r->drv.progs[i];

		err = keep_link(r, bpf_program__attach(p), bpf_program__section_name(p));
		if (err)
			return err;
	}
	if (!bpf_program__autoload(s->progs.dma_map))
		return 0;
	tp = first_tracepoint("dma", dma_map_tps, 2);
	err = keep_link(r, bpf_program__attach_tracepoint(s->progs.dma_map, "dma", tp), tp);
	if (err)
		return err;
	tp = first_tracepoint("dma", dma_unmap_tps, 2);
	return keep_link(r, bpf_program__attach_tracepoint(s->progs.dma_unmap, "dma", tp), tp);
}

static int attach_site(struct recorder *r, const struct probe_site *site)
{
	LIBBPF_OPTS(bpf_uprobe_opts, opts, .bpf_cookie = site->id);
	char what[512];
	int err;

	snprintf(what, sizeof(what), "uprobe %s at %s+0x%llx", site->name, site->lib,
		 (unsigned long long)site->offset);
	opts.retprobe = false;
	err = keep_link(r, bpf_program__attach_uprobe_opts(r->skel->progs.call_enter, -1, site->lib,
							   site->offset, &opts), what);
	if (err)
		return err;
	opts.retprobe = true;
	return keep_link(r, bpf_program__attach_uprobe_opts(r->skel->progs.call_exit, -1, site->lib,
							    site->offset, &opts), what);
}

/* Scan the libraries for probe sites; attach and record the new ones. */
static int scan_libs(struct recorder *r, char **libs, int n)
{
	int added = 0;

	for (int i = 0; i < n; i++) {
		bool wanted = false;
		char err[512];
		size_t first = r->probes.n;
		int ret;

		if (probe_set_has_lib(&r->probes, libs[i]))
			continue;
		for (size_t j = 0; j < r->nspecs && !wanted; j++)
			wanted = probe_spec_wants_lib(&r->specs[j], libs[i]);
		if (!wanted)
			continue;
		ret = probe_set_scan_lib(&r->probes, r->specs, r->nspecs, libs[i], err, sizeof(err));
		if (ret < 0) {
			say_error("cannot read symbols: %s", err);
			continue;
		}
		for (size_t k = first; k < r->probes.n; k++) {
			ret = attach_site(r, &r->probes.sites[k]);
			if (ret)
				return ret;
			write_probe(r, &r->probes.sites[k]);
			if (r->o->verbose)
				fprintf(stderr, "  uprobe     -> %s+0x%llx %s\n", r->probes.sites[k].lib,
					(unsigned long long)r->probes.sites[k].offset,
					r->probes.sites[k].name);
			added++;
		}
	}
	return added;
}

static int scan_process_libs(struct recorder *r)
{
	int added = 0;

	for (int i = 0; i < r->ntgids; i++) {
		char **libs;
		int n = proc_mapped_files(r->tgids[i], &libs), ret;

		if (n < 0)
			continue;
		ret = scan_libs(r, libs, n);
		proc_free_paths(libs, n);
		if (ret < 0)
			return ret;
		added += ret;
	}
	return added;
}

/* scan_libs over a list of n paths (n < 0: none found), then free it */
static int scan_list(struct recorder *r, char **libs, int n, int *total)
{
	int ret;

	if (n <= 0)
		return 0;
	ret = scan_libs(r, libs, n);
	proc_free_paths(libs, n);
	if (ret > 0)
		*total += ret;
	return ret < 0 ? ret : 0;
}

static int attach_runtime(struct recorder *r)
{
	char **libs;
	int n, ret, total = 0;

	if (r->child > 0) {
		wordexp_t we;

		if (wordexp(r->o->command, &we, WRDE_NOCMD))
			return -EINVAL;
		n = resolve_command_libs(we.we_wordv, &libs);
		wordfree(&we);
		if ((ret = scan_list(r, libs, n, &total)))
			return ret;
		n = resolve_install_libs(&libs);
		if ((ret = scan_list(r, libs, n, &total)))
			return ret;
	}
	/* explicit library paths in --probe are attached whether mapped or not */
	for (int i = 0; i < r->o->nprobes; i++) {
		char *lib = (char *)r->o->probes[i].lib;

		if (!strchr(lib, '/'))
			continue;
		if (access(lib, R_OK)) {
			say_error("--probe: cannot read '%s': %s", lib, strerror(errno));
			return -errno;
		}
		ret = scan_libs(r, &lib, 1);
		if (ret < 0)
			return ret;
		total += ret;
	}
	ret = scan_process_libs(r);
	if (ret < 0)
		return ret;
	total += ret;
	if (!total) {
		if (r->o->command)
			say_error("no Spyre runtime library found for '%s' (looked for libflex.so, "
				  "libsenlib*.so and --probe libraries); hint: --probe /path/lib.so:'ns::func*'",
				  r->o->command);
		else
			say_error("no Spyre runtime library in the maps of PID %d (looked for libflex.so, "
				  "libsenlib*.so and --probe libraries); hint: --probe LIB:PATTERN",
				  r->o->pids[0]);
		return -ENOENT;
	}
	return total;
}

/* ---- which card a process drives ------------------------------------------ */

/* A process used VFIO group fd: the PCI devices of that IOMMU group are the
 * cards it drives. With one group of one device it is unambiguous, and a
 * device record puts the process's jobs on that card, where its interrupts
 * complete them. Each group is reported once per process. */
static void note_group(struct recorder *r, pid_t pid, int fd)
{
	char path[64], link[256], dir[128];
	struct sbt_meta_device m = { 0 };
	struct dirent *e;
	ssize_t n;
	DIR *d;
	int group, devices = 0;

	snprintf(path, sizeof(path), "/proc/%d/fd/%d", pid, fd);
	n = readlink(path, link, sizeof(link) - 1);
	if (n <= 0)
		return;
	link[n] = '\0';
	if (sscanf(link, "/dev/vfio/%d", &group) != 1)
		return;
	for (int i = 0; i < r->ngroups; i++)
		if (r->groups[i].pid == pid && r->groups[i].group == group)
			return;
	if (r->ngroups == MAX_GROUPS)
		return;
	r->groups[r->ngroups].pid = pid;
	r->groups[r->ngroups++].group = group;
	snprintf(dir, sizeof(dir), "/sys/kernel/iommu_groups/%d/devices", group);
	d = opendir(dir);
	if (!d)
		return;
	while ((e = readdir(d)))
		if (e->d_name[0] != '.' && devices++ == 0)
			snprintf(m.bdf, sizeof(m.bdf), "%.15s", e->d_name);
	closedir(d);
	if (devices != 1)
		return;
	m.pid = (uint32_t)pid;
	m.h.tgid = m.h.tid = (uint32_t)pid;
	put_record(r, &m.h, SBT_META_DEVICE, sizeof(m));
}

/* A process traced while it runs has its cards' groups open already. */
static void note_groups_cb(int fd, const char *target, void *ctx)
{
	struct seed_ctx *c = ctx;

	if (!strncmp(target, "/dev/vfio/", 10) && target[10] >= '0' && target[10] <= '9')
		note_group(c->r, c->pid, fd);
}

/* ---- the capture loop --------------------------------------------------- */

static int on_record(void *ctx, void *data, size_t size)
{
	struct recorder *r = ctx;
	struct sbt_hdr *h = data;

	if (size < sizeof(*h) || sizeof(*h) + h->size > size)
		return 0;
	r->records++;
	/* metadata first, so the correlation has it for this very record */
	if (h->type == SBT_IRQ)
		name_irq(r, ((struct sbt_irq *)h)->irq);
	if (h->type == SBT_IOCTL && ((struct sbt_ioctl *)h)->fd_kind == SBT_FD_GROUP)
		note_group(r, (pid_t)h->tgid, ((struct sbt_ioctl *)h)->fd);
	output_add(&r->out, h);
	if (h->type == SBT_TASK_NEW && (((struct sbt_task *)h)->flags & 1))
		add_tgid(r, (pid_t)h->tgid);
	return 0;
}

static uint64_t read_lost(struct recorder *r)
{
	int ncpu = libbpf_num_possible_cpus();
	uint64_t vals[ncpu > 0 ? ncpu : 1], sum = 0;
	uint32_t key = 0;

	if (ncpu <= 0 || bpf_map_lookup_elem(bpf_map__fd(r->skel->maps.lost), &key, vals))
		return r->lost_total - r->missed_total; /* as last read */
	for (int i = 0; i < ncpu; i++)
		sum += vals[i];
	return sum;
}

/* Probe runs the kernel skipped because a BPF program was already running
 * on that CPU (a kprobe firing in an interrupt that came during another
 * kprobe program, say): their events never reached the ring buffer. Linux
 * counts them per program where it can (docs/kernel-paths.md, Loss). */
static uint64_t read_missed(struct recorder *r)
{
	struct bpf_program *p;
	uint64_t sum = 0;

	bpf_object__for_each_program(p, r->skel->obj) {
		struct bpf_prog_info info = { 0 };
		uint32_t len = sizeof(info);
		int fd = bpf_program__fd(p);

		if (fd >= 0 && !bpf_obj_get_info_by_fd(fd, &info, &len))
			sum += info.recursion_misses;
	}
	return sum;
}

static void check_lost(struct recorder *r)
{
	uint64_t missed = read_missed(r);
	uint64_t total = read_lost(r) + missed;

	if (missed > r->missed_total)
		r->missed_total = missed;

	if (total > r->lost_total) {
		struct sbt_lost l = { 0 };

		l.count = total - r->lost_total;
		l.total = total;
		r->lost_total = total;
		put_record(r, &l.h, SBT_LOST, sizeof(l));
	}
}

static void show_status(struct recorder *r, bool final)
{
	if (r->o->quiet || !isatty(STDERR_FILENO))
		return;
	if (final) {
		fputs("\r\033[K", stderr);
		return;
	}
	fprintf(stderr, "\r\033[K[spyre-bpftrace] %6.1f s  %llu events  %llu lost  (Ctrl-C to stop)",
		(double)(sbt_now_boottime() - r->start_ts) / 1e9,
		(unsigned long long)r->records, (unsigned long long)r->lost_total);
}

static const char *run_loop(struct recorder *r)
{
	uint64_t deadline = r->o->duration > 0
		? r->start_ts + (uint64_t)(r->o->duration * 1e9) : 0;
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
			say_error("reading the ring buffer: %s", strerror(-err));
			return "error";
		}
		now = sbt_now_boottime();
		check_lost(r);
		show_status(r, false);
		if (now >= next_clock) {
			write_clock(r);
			next_clock = now + CLOCK_EVERY_MS * 1000000ull;
		}
		output_flush(&r->out);
		reap_child(r, false);
		if (stop_requested)
			return "interrupted";
		if (r->out.error)
			return "write error";
		if (deadline && now >= deadline)
			return "duration elapsed";
		if (!any_traced(r))
			return "traced processes exited";
		if (now >= next_rescan) {
			/* libraries dlopen()ed since the last look */
			if (scan_process_libs(r) < 0)
				return "error";
			next_rescan = now + RESCAN_MS * 1000000ull;
		}
	}
}

static void finish(struct recorder *r, const char *why)
{
	struct sbt_meta_end e = { 0 };

	/* what is still in the ring buffer, then the final counters */
	ring_buffer__consume(r->rb);
	check_lost(r);
	write_thread_names(r);
	write_clock(r);
	e.records = r->records;
	e.lost = r->lost_total;
	e.duration_ns = sbt_now_boottime() - r->start_ts;
	put_record(r, &e.h, SBT_META_END, sizeof(e));
	show_status(r, true);
	output_close(&r->out);
	if (r->o->quiet)
		return;
	fprintf(stderr, "spyre-bpftrace: %s; %llu events, %s %s (%.1f KiB)\n", why,
		(unsigned long long)r->records, output_format_name(r->out.fmt), r->out_path,
		(double)output_bytes(&r->out) / 1024.0);
	output_report(&r->out, stderr);
	if (r->missed_total)
		fprintf(stderr, "\n  %llu of the lost events were probe runs the kernel skipped: a BPF program "
				"was already running on that CPU\n", (unsigned long long)r->missed_total);
	if (r->child > 0 && r->child_reaped) {
		if (WIFEXITED(r->child_status) && WEXITSTATUS(r->child_status))
			fprintf(stderr, "\n  command exited with status %d\n", WEXITSTATUS(r->child_status));
		else if (WIFSIGNALED(r->child_status))
			fprintf(stderr, "\n  command killed by signal %d\n", WTERMSIG(r->child_status));
	}
	if (r->out.fmt == FMT_PERFETTO)
		fprintf(stderr, "\n  open %s in https://ui.perfetto.dev (Open trace file)\n", r->out_path);
}

static void cleanup(struct recorder *r)
{
	for (size_t i = 0; i < r->nlinks; i++)
		bpf_link__destroy(r->links[i]);
	free(r->links);
	ring_buffer__free(r->rb);
	spyre_bpf__destroy(r->skel);
	if (r->go_fd > 0)
		close(r->go_fd); /* an unstarted child sees EOF and exits */
	if (r->child > 0 && !r->child_reaped) {
		/* -d elapsed or setup failed: end the command we started */
		reap_child(r, false);
		if (!r->child_reaped)
			kill(r->child, SIGTERM);
		reap_child(r, true);
	}
	output_free(&r->out);
	probe_set_free(&r->probes);
	free(r->specs);
}

static int preflight(struct record_opts *o)
{
	char err[512];

	if (sbt_check_privileges(geteuid(), sbt_effective_caps(), err, sizeof(err)) ||
	    sbt_check_btf("/sys/kernel/btf/vmlinux", err, sizeof(err))) {
		say_error("%s", err);
		return -1;
	}
	for (int i = 0; i < o->npids; i++)
		if (sbt_check_pid(o->pids[i], err, sizeof(err))) {
			say_error("%s", err);
			return -1;
		}
	return 0;
}

/* Interrupts: vfio's, those naming a device bound to vfio-pci, and --irq. */
static int filter_irqs(struct recorder *r)
{
	struct irq_ctx all = { .r = r, .want = -1 };
	int fd = bpf_map__fd(r->skel->maps.irq_filter);

	all.nbdfs = pci_vfio_devices(all.bdfs, 32);
	proc_for_each_irq(irq_name_cb, &all);
	for (int i = 0; i < r->o->nirqs; i++) {
		uint32_t key = (uint32_t)r->o->irqs[i], one = 1;

		if (bpf_map_update_elem(fd, &key, &one, BPF_ANY))
			return -errno;
		name_irq(r, r->o->irqs[i]);
	}
	return 0;
}

static int setup(struct recorder *r)
{
	struct record_opts *o = r->o;
	int err;

	r->nspecs = sbt_n_builtin_probes + (size_t)o->nprobes;
	r->specs = calloc(r->nspecs, sizeof(*r->specs));
	if (!r->specs)
		return -ENOMEM;
	/* user probes first: a user role wins over the built-in one */
	memcpy(r->specs, o->probes, (size_t)o->nprobes * sizeof(*r->specs));
	memcpy(r->specs + o->nprobes, sbt_builtin_probes,
	       sbt_n_builtin_probes * sizeof(*r->specs));

	err = sbt_ensure_tracefs();
	if (err) {
		say_error("tracefs is not mounted and cannot be: %s; hint: mount -t tracefs nodev /sys/kernel/tracing",
			  strerror(-err));
		return err;
	}
	if (o->command && (err = spawn_child(r)))
		return err;

	r->skel = spyre_bpf__open();
	if (!r->skel) {
		say_error("cannot open the BPF object: %s", strerror(errno));
		return -errno;
	}
	if ((err = configure(r)))
		return err;
	/* vfio is loaded but some of its functions got no probe: say so, the
	 * syscall paths carry on without their detail */
	if (!o->quiet && !o->verbose && r->drv.nnone && o->driver_mode != DRIVER_OFF &&
	    !access("/sys/module/vfio", F_OK))
		fprintf(stderr, "spyre-bpftrace: %d of %d vfio functions have no driver-level probe "
				"here; -v says why\n", r->drv.nnone,
			r->drv.nnone + r->drv.nfentry + r->drv.nkprobe);
	err = spyre_bpf__load(r->skel);
	if (err) {
		say_error("cannot load the BPF programs: %s; hint: run with -v for the verifier log",
			  strerror(-err));
		return err;
	}
	if ((err = fill_patterns(r)))
		return err;
	for (int i = 0; i < o->npids; i++) {
		struct seed_ctx c = { r, o->pids[i] };

		if ((err = map_traced(r, o->pids[i])))
			return err;
		proc_for_each_fd(o->pids[i], seed_fd_cb, &c);
	}
	if (r->child > 0 && (err = map_traced(r, r->child)))
		return err;

	if ((err = attach_kernel(r)))
		return err;
	write_clock(r);
	write_host(r);
	for (int i = 0; i < o->npids; i++) {
		struct seed_ctx c = { r, o->pids[i] };

		write_proc(r, o->pids[i], NULL);
		proc_for_each_fd(o->pids[i], note_groups_cb, &c); /* after its process record */
	}
	if (r->child > 0) {
		wordexp_t we;

		if (!wordexp(o->command, &we, WRDE_NOCMD)) {
			write_proc(r, r->child, we.we_wordv);
			wordfree(&we);
		}
	}
	err = attach_runtime(r);
	if (err < 0)
		return err;
	if ((err = filter_irqs(r)))
		return err;
	if (!r->child)
		write_thread_names(r); /* a -c child is named when it execs */
	if (o->verbose)
		plan_print(&r->plan, stderr);
	r->rb = ring_buffer__new(bpf_map__fd(r->skel->maps.events), on_record, r, NULL);
	if (!r->rb) {
		say_error("cannot open the ring buffer: %s", strerror(errno));
		return -errno;
	}
	return 0;
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
		 o->format && !strcmp(o->format, "json") ? "json"
		 : o->format && !strcmp(o->format, "sbt") ? "sbt" : "pftrace");
}

int cmd_record(int argc, char **argv)
{
	struct record_opts o;
	struct recorder r = { .o = &o, .go_fd = -1 };
	struct sigaction sa = { .sa_handler = on_signal };
	struct rlimit rl = { RLIM_INFINITY, RLIM_INFINITY };
	const char *why;
	char err[512];
	int ret;

	enum out_format fmt;

	if (cli_parse_record(argc, argv, &o, 0, err, sizeof(err)))
		return 2;
	default_output(&o, r.out_path, sizeof(r.out_path));
	if (output_format(r.out_path, o.format, &fmt, err, sizeof(err))) {
		say_error("%s", err);
		cli_free_record(&o);
		return 2;
	}
	verbose_level = o.verbose;
	libbpf_set_print(libbpf_print);
	if (preflight(&o)) {
		cli_free_record(&o);
		return 1;
	}
	ret = output_open(&r.out, r.out_path, fmt, !o.quiet, err, sizeof(err));
	if (ret) {
		say_error("cannot write '%s': %s; hint: choose another path with -o", r.out_path, err);
		output_free(&r.out);
		cli_free_record(&o);
		return 1;
	}
	setrlimit(RLIMIT_MEMLOCK, &rl); /* kernels before 5.11 charge BPF maps here */
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	signal(SIGPIPE, SIG_IGN);

	r.start_ts = sbt_now_boottime();
	if (setup(&r)) {
		/* keep what there is: the file stays readable */
		output_close(&r.out);
		cleanup(&r);
		cli_free_record(&o);
		return 1;
	}
	start_child(&r);
	why = run_loop(&r);
	finish(&r, why);
	if (r.out.error)
		say_error("writing '%s' failed: %s; the file holds what came before", r.out_path,
			  strerror(r.out.error));
	ret = r.out.error || !strcmp(why, "error") ? 1 : 0;
	cleanup(&r);
	cli_free_record(&o);
	return ret;
}
