// SPDX-License-Identifier: GPL-2.0-only
/* The attach module (attach.h). */
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <errno.h>
#include <fnmatch.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "attach/attach.h"
#include "attach/libresolve.h"
#include "attach/retsites.h"
#include "base/args.h"
#include "base/clock.h"
#include "base/log.h"
#include "base/procfs.h"
#include "spyre.skel.h"

/* ---- configure ----------------------------------------------------------- */

/* VFIO's own files, first match wins: cdev devices, the container, groups */
static const struct {
	const char *glob;
	uint32_t kind;
} vfio_patterns[SBT_VFIO_FD_PATTERNS] = {
	{ "/dev/vfio/devices/*", SBT_FD_DEVICE },
	{ "/dev/vfio/vfio", SBT_FD_HOST_CONTAINER }, /* SET_IOMMU may tell more */
	{ "/dev/vfio/*", SBT_FD_GROUP },
};

static void add_pattern(struct attacher *a, const char *glob, uint32_t kind)
{
	a->patterns[a->npatterns] = glob;
	a->pattern_kinds[a->npatterns++] = kind;
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
static void configure_devices(struct attacher *a)
{
	struct spyre_bpf *s = a->skel;
	struct devfilter *d = (struct devfilter *)&a->o->devices;
	char desc[256];
	int added = devfilter_expand(d, "/sys/bus/pci/devices");

	s->rodata->n_dev_filters = (uint32_t)d->n;
	for (int i = 0; i < d->n; i++)
		s->rodata->dev_filters[i] = d->f[i];
	devfilter_describe(d, desc, sizeof(desc));
	plan_add(&a->plan, "device", "-", "keeping %s (%d present by ids)", desc, added);
}

static bool is_runtime_prog(const struct attacher *a, const struct bpf_program *p);

/* The always-on tier: the ioctl, interrupt and exit hooks, the driver-level
 * probes the plan chose (they count vfio's functions), and the runtime
 * programs (attached as uprobes in detail windows only). The others serve
 * record's traced processes; each would run on every fork, rename or DMA
 * mapping of the host for nothing. */
static void fleet_trim(struct attacher *a)
{
	struct spyre_bpf *s = a->skel;
	struct bpf_program *keep[] = { s->progs.ioctl_enter, s->progs.ioctl_exit, s->progs.irq_entry,
				       s->progs.irq_exit, s->progs.task_exit };
	struct bpf_program *p;

	bpf_object__for_each_program(p, s->obj) {
		bool kept = false;

		for (size_t i = 0; i < sizeof(keep) / sizeof(keep[0]); i++)
			kept |= p == keep[i];
		if (!kept && !is_runtime_prog(a, p) && !driver_is_prog(p))
			bpf_program__set_autoload(p, false);
	}
	plan_add(&a->plan, "irq", "raw_tp irq_handler_entry,exit", "vfio-pci's, of --device cards, counted per card");
	plan_add(&a->plan, "exit", "tracepoint sched_process_exit", "forgets a process's card");
}

static int configure(struct attacher *a)
{
	struct spyre_bpf *s = a->skel;
	unsigned long size = round_pow2(a->o->buffer_size);
	const char *tp;

	bpf_map__set_max_entries(s->maps.events, (uint32_t)size);
	s->rodata->wakeup_bytes = size / 4;
	if (size != a->o->buffer_size)
		plan_add(&a->plan, "buffer", "-", "ring buffer rounded up to %lu bytes", size);

	for (int i = 0; i < SBT_VFIO_FD_PATTERNS; i++)
		add_pattern(a, vfio_patterns[i].glob, vfio_patterns[i].kind);
	for (int i = 0; i < a->o->nvfio_paths; i++)
		add_pattern(a, a->o->vfio_paths[i], SBT_FD_PATH);
	s->rodata->n_patterns = (uint32_t)a->npatterns;

	s->rodata->fleet_mode = a->o->fleet;
	s->rodata->fleet_record = a->o->fleet_record;
	if (a->o->fleet) {
		plan_add(&a->plan, "fleet", "per-CPU maps",
			 "every process's VFIO ioctls; counts and histograms summed in the kernel, no records");
		plan_add(&a->plan, "runtime", "uprobe per process",
			 "only in detail windows, on the processes that hold a card");
		/* files are told by the ioctl itself: no hook on every open of the host */
		plan_add(&a->plan, "fd-track", "-", "not needed: an ioctl's file is looked at when VFIO's");
	} else if (!sbt_have_uprobes()) {
		sbt_err("uprobes not available on this kernel; hint: needs CONFIG_UPROBE_EVENTS=y");
		return -EOPNOTSUPP;
	} else {
		plan_add(&a->plan, "runtime", "uprobe per process",
			 "entry and return sites (no uretprobe), traced processes only");
		plan_add(&a->plan, "late-libs", "tracepoint syscalls:sys_*_openat",
			 "shared objects opened by traced processes, probed at once if runtime libraries");
	}

	configure_devices(a);
	driver_plan(s, (enum driver_mode)a->o->driver_mode, &a->drv, &a->plan);
	if (a->o->fleet) {
		plan_add(&a->plan, "ioctl", "tracepoint syscalls:sys_*_ioctl",
			 "VFIO's commands of every process, args decoded in BPF");
		fleet_trim(a);
		return 0;
	}
	plan_add(&a->plan, "ioctl", "tracepoint syscalls:sys_*_ioctl", "VFIO fds only, args decoded in BPF");
	plan_add(&a->plan, "fd-track", "tracepoint syscalls:sys_*_openat,close", "learns accelerator fds");

	plan_add(&a->plan, "irq", "raw_tp irq_handler_entry,exit", "vfio-pci's, of --device cards; and --irq");

	if (sbt_tracepoint_exists("iommu", "map")) {
		plan_add(&a->plan, "iommu", "tracepoint iommu:map,unmap", "in traced tasks");
	} else {
		bpf_program__set_autoload(s->progs.iommu_map, false);
		bpf_program__set_autoload(s->progs.iommu_unmap, false);
		plan_add(&a->plan, "iommu", "-", "iommu:map: no such tracepoint on this kernel");
	}
	tp = first_tracepoint("dma", dma_map_tps, 2);
	if (tp)
		plan_add(&a->plan, "dma", tp, "tracepoint dma:%s (and its unmap twin)", tp);
	else
		plan_add(&a->plan, "dma", "-", "dma_map_phys, dma_map_page: no such tracepoint");
	if (!tp || !first_tracepoint("dma", dma_unmap_tps, 2)) {
		bpf_program__set_autoload(s->progs.dma_map, false);
		bpf_program__set_autoload(s->progs.dma_unmap, false);
	}

	if (sbt_have_tp_btf("sched_process_fork")) {
		bpf_program__set_autoload(s->progs.fork_raw, false);
		plan_add(&a->plan, "fork", "tp_btf sched_process_fork", "follows children of traced processes");
	} else {
		bpf_program__set_autoload(s->progs.fork_btf, false);
		plan_add(&a->plan, "fork", "-", "tp_btf: no BTF for sched_process_fork");
		plan_add(&a->plan, "fork", "raw_tp sched_process_fork", "follows children of traced processes");
	}
	plan_add(&a->plan, "task", "tracepoint sched_process_exit, task_rename", "thread names and exits");
	return 0;
}

int attach_open(struct attacher *a, const struct record_opts *o)
{
	int bad;

	a->o = o;
	a->nspecs = sbt_n_builtin_probes + (size_t)o->nprobes;
	a->specs = probe_specs_table(o->probes, o->nprobes, a->real_libs, &bad);
	if (!a->specs) {
		sbt_err("out of memory");
		return -ENOMEM;
	}
	if (bad >= 0) {
		sbt_err("--probe: cannot read '%s': %s", o->probes[bad].lib, strerror(errno));
		return -errno;
	}
	a->probes.max_uprobes = o->max_probes;

	a->skel = spyre_bpf__open();
	if (!a->skel) {
		sbt_err("cannot open the BPF object: %s", strerror(errno));
		return -errno;
	}
	return configure(a);
}

/* ---- load ---------------------------------------------------------------- */

static int fill_patterns(struct attacher *a)
{
	int fd = bpf_map__fd(a->skel->maps.fd_patterns);

	for (int i = 0; i < a->npatterns; i++) {
		struct sbt_fd_pattern p = { .kind = a->pattern_kinds[i] };
		uint32_t key = (uint32_t)i;
		size_t pl, sl;
		bool star;

		if (arg_split_glob(a->patterns[i], sizeof(p.prefix) - 1, &pl, &sl, &star)) {
			sbt_err("--vfio-path '%s' is too long; hint: at most %zu characters each side of '*'",
				a->patterns[i], sizeof(p.prefix) - 1);
			return -EINVAL;
		}
		p.prefix_len = (uint16_t)pl;
		p.suffix_len = (uint16_t)sl;
		p.has_star = star;
		memcpy(p.prefix, a->patterns[i], pl);
		if (star)
			memcpy(p.suffix, a->patterns[i] + pl + 1, sl);
		if (bpf_map_update_elem(fd, &key, &p, BPF_ANY)) {
			sbt_err("cannot fill the path patterns: %s", strerror(errno));
			return -errno;
		}
	}
	return 0;
}

int attach_load(struct attacher *a)
{
	int err = spyre_bpf__load(a->skel);

	if (err) {
		sbt_err("cannot load the BPF programs: %s; hint: run with -v for the verifier log",
			strerror(-err));
		return err;
	}
	return fill_patterns(a);
}

struct seed_ctx {
	struct attacher *a;
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
	for (int i = 0; !kind && i < c->a->npatterns; i++)
		if (!fnmatch(c->a->patterns[i], target, 0))
			kind = c->a->pattern_kinds[i];
	if (kind)
		bpf_map_update_elem(bpf_map__fd(c->a->skel->maps.accel_fds), &key, &kind, BPF_ANY);
}

int attach_trace_pid(struct attacher *a, pid_t pid)
{
	uint32_t key = (uint32_t)pid, one = 1;
	struct seed_ctx c = { a, pid };

	if (bpf_map_update_elem(bpf_map__fd(a->skel->maps.traced), &key, &one, BPF_ANY)) {
		sbt_err("cannot trace PID %d: %s", pid, strerror(errno));
		return -errno;
	}
	proc_for_each_fd(pid, seed_fd_cb, &c);
	return 0;
}

void attach_untrace_pid(struct attacher *a, pid_t pid)
{
	uint32_t key = (uint32_t)pid;

	attach_forget(a, pid);
	bpf_map_delete_elem(bpf_map__fd(a->skel->maps.traced), &key);
}

bool attach_any_traced(struct attacher *a)
{
	uint32_t key;

	return bpf_map_get_next_key(bpf_map__fd(a->skel->maps.traced), NULL, &key) == 0;
}

/* ---- kernel programs ------------------------------------------------------- */

/* Keep a link that attached; the error of one that did not. */
static int link_keep(struct link_set *ls, struct bpf_link *link)
{
	int err = libbpf_get_error(link);

	if (err)
		return err;
	if (ls->n == ls->cap) {
		size_t cap = ls->cap ? ls->cap * 2 : 64;
		struct bpf_link **grown = realloc(ls->v, cap * sizeof(*grown));

		if (!grown) {
			bpf_link__destroy(link);
			return -ENOMEM;
		}
		ls->v = grown;
		ls->cap = cap;
	}
	ls->v[ls->n++] = link;
	return 0;
}

/* Destroy the links kept since there were n. */
static void link_drop_to(struct link_set *ls, size_t n)
{
	while (ls->n > n)
		bpf_link__destroy(ls->v[--ls->n]);
}

static void link_free(struct link_set *ls)
{
	link_drop_to(ls, 0);
	free(ls->v);
	memset(ls, 0, sizeof(*ls));
}

static bool is_runtime_prog(const struct attacher *a, const struct bpf_program *p)
{
	return p == a->skel->progs.call_enter || p == a->skel->progs.call_return;
}

/* Every program the object loads is attached here, but the runtime ones
 * (per process, below): a new program cannot go unattached silently. */
int attach_kernel(struct attacher *a)
{
	struct spyre_bpf *s = a->skel;
	struct bpf_program *p;
	int err;

	bpf_object__for_each_program(p, s->obj) {
		struct bpf_link *link;
		const char *what = bpf_program__section_name(p);

		if (!bpf_program__autoload(p) || is_runtime_prog(a, p))
			continue;
		if (p == s->progs.dma_map || p == s->progs.dma_unmap) {
			what = first_tracepoint("dma", p == s->progs.dma_map ? dma_map_tps : dma_unmap_tps, 2);
			link = bpf_program__attach_tracepoint(p, "dma", what);
		} else {
			link = bpf_program__attach(p);
		}
		err = link_keep(&a->links, link);
		if (err) {
			sbt_err("cannot attach %s (%s): %s; hint: run with -v for the attach plan",
				bpf_program__name(p), what, strerror(-err));
			return err;
		}
	}
	return 0;
}

/* ---- runtime probes, per process ------------------------------------------ */

static bool stop_now(struct attacher *a)
{
	if ((a->stop && *a->stop) || (a->deadline_ns && sbt_now_boottime() >= a->deadline_ns))
		a->interrupted = true;
	return a->interrupted;
}

static struct attached_proc *proc_of(struct attacher *a, pid_t pid, bool create)
{
	struct attached_proc *grown;

	for (size_t i = 0; i < a->nprocs; i++)
		if (a->procs[i].pid == pid)
			return &a->procs[i];
	if (!create)
		return NULL;
	grown = realloc(a->procs, (a->nprocs + 1) * sizeof(*grown));
	if (!grown)
		return NULL;
	a->procs = grown;
	grown[a->nprocs] = (struct attached_proc){ .pid = pid };
	return &grown[a->nprocs++];
}

static struct bpf_link *uprobe(struct bpf_program *prog, pid_t pid, const char *lib,
			       uint64_t off, uint64_t cookie)
{
	LIBBPF_OPTS(bpf_uprobe_opts, opts, .bpf_cookie = cookie, .retprobe = false);

	return bpf_program__attach_uprobe_opts(prog, pid, lib, off, &opts);
}

/* One function on one process: its entry and every return site, or none
 * of them (a function whose returns cannot all be seen is refused). The
 * returns go first: from the moment its entry is live, each call that is
 * seen entering is seen leaving. */
static int attach_function(struct attacher *a, struct attached_proc *ap, struct probe_site *s)
{
	size_t first = ap->links.n;
	uint64_t at = s->offset;
	int err = 0;

	for (int i = 0; !err && i < s->nrets; i++) {
		const struct ret_site *r = &s->rets[i];

		at = r->offset;
		err = link_keep(&ap->links,
				uprobe(a->skel->progs.call_return, ap->pid, s->lib, r->offset,
				       SBT_COOKIE(s->id, r->kind, r->reg, s->size)));
	}
	if (!err) {
		at = s->offset;
		err = link_keep(&ap->links,
				uprobe(a->skel->progs.call_enter, ap->pid, s->lib, s->offset,
				       SBT_COOKIE(s->id, SBT_SITE_ENTRY, 0, 0)));
	}
	if (!err)
		return 0;
	link_drop_to(&ap->links, first);
	if (err == -ESRCH || err == -ENOMEM)
		return err; /* the process is gone, or we are out of memory: not the function's fault */
	if (asprintf(&s->refused, "the kernel refused a uprobe at +0x%llx: %s",
		     (unsigned long long)(at - s->offset), strerror(-err)) < 0)
		s->refused = NULL;
	a->refused++;
	sbt_info(1, "  refused    -> %s in %s: %s\n", s->name, s->lib,
		 s->refused ? s->refused : strerror(-err));
	return 0;
}

int attach_runtime(struct attacher *a, pid_t pid)
{
	struct attached_proc *ap = proc_of(a, pid, true);
	size_t before;
	int err;

	if (!ap) {
		sbt_err("out of memory");
		return -ENOMEM;
	}
	before = ap->links.n;
	for (; ap->done < a->probes.n; ap->done++) {
		struct probe_site *s = &a->probes.sites[ap->done];

		if (stop_now(a))
			break;
		if (s->refused)
			continue;
		err = attach_function(a, ap, s);
		if (err == -ESRCH)
			return 0; /* exited while we attached: its exit record follows */
		if (err) {
			sbt_err("cannot attach %s to PID %d: %s", s->name, pid, strerror(-err));
			return err;
		}
	}
	return (int)(ap->links.n - before);
}

void attach_forget(struct attacher *a, pid_t pid)
{
	struct attached_proc *ap = proc_of(a, pid, false);

	if (!ap)
		return;
	link_free(&ap->links);
	*ap = a->procs[--a->nprocs];
}

size_t attach_nuprobes(const struct attacher *a)
{
	size_t n = 0;

	for (size_t i = 0; i < a->nprocs; i++)
		n += a->procs[i].links.n;
	return n;
}

size_t attach_nfunctions(const struct attacher *a)
{
	size_t n = 0;

	for (size_t i = 0; i < a->probes.n; i++)
		n += !a->probes.sites[i].refused;
	return n;
}

/* ---- finding libraries ------------------------------------------------------ */

static bool wanted(const struct attacher *a, const char *path)
{
	for (size_t i = 0; i < a->nspecs; i++)
		if (probe_spec_wants_lib(&a->specs[i], path))
			return true;
	return false;
}

int attach_library(struct attacher *a, const char *path, const char *why)
{
	char real[PATH_MAX], err[512];
	size_t first = a->probes.n;
	int ret;

	/* by name first: most files seen are not runtime libraries */
	if (!wanted(a, path) || !realpath(path, real))
		return 0;
	/* one inode, one set of probes, whatever path led to it */
	if (probe_set_has_lib(&a->probes, real))
		return 0;
	uint64_t t0 = sbt_now_boottime(), t1;

	ret = probe_set_scan_lib(&a->probes, a->specs, a->nspecs, real, err, sizeof(err));
	t1 = sbt_now_boottime();
	if (ret < 0) {
		sbt_warn("cannot read symbols: %s", err);
		return 0;
	}
	sbt_info(1, "  library    -> %s (%s): %d function%s\n", real, why, ret, ret == 1 ? "" : "s");
	for (size_t k = first; k < a->probes.n; k++) {
		struct probe_site *s = &a->probes.sites[k];

		if (s->refused) {
			a->refused++;
			sbt_info(1, "  refused    -> %s in %s: %s\n", s->name, s->lib, s->refused);
		} else {
			sbt_info(1, "  uprobe     -> %s+0x%llx %s, %d return site%s\n", s->lib,
				 (unsigned long long)s->offset, s->name, s->nrets,
				 s->nrets == 1 ? "" : "s");
		}
		if (a->on_function)
			a->on_function(a->ctx, s);
	}
	for (size_t i = 0; i < a->nprocs && ret > 0; i++) {
		int err2 = attach_runtime(a, a->procs[i].pid);

		if (err2 < 0)
			return err2;
	}
	sbt_info(2, "  library    -> %s: symbols and return sites in %.2f ms, attached in %.2f ms\n",
		 real, (double)(t1 - t0) / 1e6, (double)(sbt_now_boottime() - t1) / 1e6);
	return ret;
}

static void found_cb(const char *path, const char *why, void *ctx)
{
	struct attacher *a = ctx;

	if (!stop_now(a))
		attach_library(a, path, why);
}

int attach_find_libraries(struct attacher *a, pid_t pid, char *const *command)
{
	char **maps, env[8192];
	int n;

	/* what it has mapped */
	n = proc_mapped_files(pid, &maps);
	for (int i = 0; i < n; i++)
		found_cb(maps[i], "mapped by the process", a);
	if (n > 0)
		proc_free_paths(maps, n);
	/* --probe naming a file: probed whether mapped or not */
	for (int i = 0; i < a->o->nprobes; i++)
		if (a->real_libs[i])
			found_cb(a->real_libs[i], "named by --probe", a);
	if (command) {
		libs_of_command(command, found_cb, a);
		libs_in_dirs(getenv("LD_LIBRARY_PATH"), 0, "LD_LIBRARY_PATH", found_cb, a);
		libs_in_python_env(command, found_cb, a);
	} else if (!proc_getenv(pid, "LD_LIBRARY_PATH", env, sizeof(env))) {
		libs_in_dirs(env, 0, "the process's LD_LIBRARY_PATH", found_cb, a);
	}
	libs_in_ldcache(found_cb, a);
	libs_in_install_tree(found_cb, a);
	return a->interrupted ? -EINTR : 0;
}

void attach_warn_unmatched(const struct attacher *a, bool later)
{
	for (int i = 0; i < a->o->nprobes; i++) {
		const struct probe_spec *sp = &a->specs[i];
		bool hit = false;

		for (size_t k = 0; k < a->probes.n && !hit; k++)
			hit = a->probes.sites[k].pattern == sp->pattern;
		if (!hit)
			sbt_warn("--probe '%.200s:%.200s' matched no function%s; hint: spyre-bpftrace "
				 "list LIB --probe ... shows what a pattern picks", a->o->probes[i].lib,
				 sp->pattern, later ? " yet (a library loaded later still counts)" : "");
	}
}

/* ---- counters ----------------------------------------------------------------- */

static uint64_t sum_percpu(int fd)
{
	int ncpu = libbpf_num_possible_cpus();
	uint64_t vals[ncpu > 0 ? ncpu : 1], sum = 0;
	uint32_t key = 0;

	/* the kernel fills it; zeroed so that valgrind, which cannot see
	 * that, has nothing to say */
	memset(vals, 0, sizeof(vals));
	if (ncpu <= 0 || bpf_map_lookup_elem(fd, &key, vals))
		return UINT64_MAX;
	for (int i = 0; i < ncpu; i++)
		sum += vals[i];
	return sum;
}

uint64_t attach_read_lost(struct attacher *a)
{
	return sum_percpu(bpf_map__fd(a->skel->maps.lost));
}

uint64_t attach_read_untraced_runs(struct attacher *a)
{
	return sum_percpu(bpf_map__fd(a->skel->maps.untraced_runs));
}

/* Probe runs the kernel skipped because a BPF program was already running
 * on that CPU (a kprobe firing in an interrupt that came during another
 * kprobe program, say): their events never reached the ring buffer. Linux
 * counts them per program where it can (docs/kernel-paths.md, Loss). */
uint64_t attach_read_missed(struct attacher *a)
{
	struct bpf_program *p;
	uint64_t sum = 0;

	bpf_object__for_each_program(p, a->skel->obj) {
		struct bpf_prog_info info = { 0 };
		uint32_t len = sizeof(info);
		int fd = bpf_program__fd(p);

		if (fd >= 0 && !bpf_obj_get_info_by_fd(fd, &info, &len))
			sum += info.recursion_misses;
	}
	return sum;
}

void attach_close(struct attacher *a)
{
	while (a->nprocs)
		attach_forget(a, a->procs[0].pid);
	free(a->procs);
	link_free(&a->links);
	spyre_bpf__destroy(a->skel);
	probe_set_free(&a->probes);
	free(a->specs);
	for (int i = 0; i < SBT_MAX_USER_PROBES; i++)
		free(a->real_libs[i]);
	memset(a, 0, sizeof(*a));
}
