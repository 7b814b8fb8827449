// SPDX-License-Identifier: GPL-2.0-only
/*
 * The attach plan: feature probes, and the decisions made from them before
 * the object is loaded (plan.h).
 */
#include <bpf/libbpf.h>
#include <errno.h>
#include <stdarg.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/statfs.h>
#include <unistd.h>

#include "attach/attach.h"
#include "attach/devfilter.h"
#include "attach/plan.h"
#include "base/args.h"
#include "base/log.h"
#include "spyre.skel.h"

#ifndef TRACEFS_MAGIC
#define TRACEFS_MAGIC 0x74726163
#endif

void plan_add(struct plan *p, const char *role, const char *mech, const char *fmt, ...)
{
	struct plan_item *it;
	va_list ap;

	if (p->n == PLAN_MAX)
		return;
	it = &p->items[p->n++];
	snprintf(it->role, sizeof(it->role), "%s", role);
	snprintf(it->mech, sizeof(it->mech), "%s", mech);
	va_start(ap, fmt);
	vsnprintf(it->note, sizeof(it->note), fmt, ap);
	va_end(ap);
}

void plan_print(const struct plan *p, FILE *out)
{
	fprintf(out, "attach plan:\n");
	for (int i = 0; i < p->n; i++) {
		const struct plan_item *it = &p->items[i];
		bool chosen = strcmp(it->mech, "-") != 0;

		fprintf(out, "  %-10s %s %-40s %s\n", it->role, chosen ? "->" : "  ",
			chosen ? it->mech : "", it->note);
	}
}

static const char *tracefs_root(void)
{
	static const char *const roots[] = { "/sys/kernel/tracing", "/sys/kernel/debug/tracing" };

	for (size_t i = 0; i < sizeof(roots) / sizeof(roots[0]); i++) {
		char path[128];

		snprintf(path, sizeof(path), "%s/events", roots[i]);
		if (!access(path, F_OK))
			return roots[i];
	}
	return NULL;
}

int sbt_ensure_tracefs(void)
{
	struct statfs st;

	if (tracefs_root())
		return 0;
	/* libbpf finds tracepoint ids in tracefs; some systems do not mount it */
	if (!statfs("/sys/kernel/tracing", &st) && st.f_type == TRACEFS_MAGIC)
		return 0;
	if (mount("nodev", "/sys/kernel/tracing", "tracefs", 0, NULL))
		return -errno;
	return 0;
}

bool sbt_tracepoint_exists(const char *category, const char *name)
{
	const char *root = tracefs_root();
	char path[256];

	if (!root)
		return false;
	snprintf(path, sizeof(path), "%s/events/%s/%s", root, category, name);
	return !access(path, F_OK);
}

bool sbt_have_kprobes(void)
{
	return !access("/sys/bus/event_source/devices/kprobe/type", F_OK);
}

bool sbt_have_uprobes(void)
{
	return !access("/sys/bus/event_source/devices/uprobe/type", F_OK);
}

bool sbt_module_btf(const char *module)
{
	char path[128];

	snprintf(path, sizeof(path), "/sys/kernel/btf/%s", module);
	return !access(path, F_OK);
}

bool sbt_have_tp_btf(const char *tracepoint)
{
	return libbpf_find_vmlinux_btf_id(tracepoint, BPF_TRACE_RAW_TP) > 0;
}

/* ---- the decisions ---------------------------------------------------------- */

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

const char *plan_dma_tracepoint(bool unmap)
{
	return first_tracepoint("dma", unmap ? dma_unmap_tps : dma_map_tps, 2);
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

/* The always-on tier: the ioctl, interrupt and exit hooks, the driver-level
 * probes the plan chose (they count vfio's functions), and the runtime
 * programs (attached as uprobes in detail windows only). The others serve
 * record's traced processes; each would run on every fork, rename or DMA
 * mapping of the host for nothing. */
static void daemon_trim(struct attacher *a)
{
	struct spyre_bpf *s = a->skel;
	struct bpf_program *keep[] = { s->progs.ioctl_enter, s->progs.ioctl_exit, s->progs.irq_entry,
				       s->progs.irq_exit, s->progs.task_exit };
	struct bpf_program *p;

	bpf_object__for_each_program(p, s->obj) {
		bool kept = false;

		for (size_t i = 0; i < sizeof(keep) / sizeof(keep[0]); i++)
			kept |= p == keep[i];
		if (!kept && !attach_is_runtime_prog(a, p) && !driver_is_prog(p))
			bpf_program__set_autoload(p, false);
	}
	plan_add(&a->plan, "irq", "raw_tp irq_handler_entry,exit", "vfio-pci's, of --device cards, counted per card");
	plan_add(&a->plan, "exit", "tracepoint sched_process_exit", "forgets a process's card");
}

int plan_decide(struct attacher *a)
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

	s->rodata->daemon_mode = a->o->daemon;
	s->rodata->daemon_record = a->o->daemon_record;
	if (a->o->daemon) {
		plan_add(&a->plan, "daemon", "per-CPU maps",
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
	if (a->o->daemon) {
		plan_add(&a->plan, "ioctl", "tracepoint syscalls:sys_*_ioctl",
			 "VFIO's commands of every process, args decoded in BPF");
		daemon_trim(a);
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
