// SPDX-License-Identifier: GPL-2.0-only
/*
 * attach_open: the BPF object opened and configured before it is loaded,
 * from the feature probes of plan.c: the ring buffer, VFIO's files, which
 * mechanism each probe role gets (said in the plan, for -v), and for the
 * daemon only the programs its always-on tier needs.
 */
#include <bpf/libbpf.h>
#include <errno.h>
#include <pthread.h>
#include <string.h>

#include "attach/attach.h"
#include "base/procfs.h"
#include "attach/devfilter.h"
#include "attach/kernel_hz.h"
#include "attach/plan.h"
#include "attach/uprobe_multi.h"
#include "base/log.h"
#include "spyre.skel.h"

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
	struct bpf_program *keep[] = { s->progs.ioctl_enter, s->progs.ioctl_exit, s->progs.irq_entry, s->progs.irq_exit,
				       s->progs.task_exit };
	struct bpf_program *p;

	bpf_object__for_each_program(p, s->obj)
	{
		bool kept = false;

		for (size_t i = 0; i < sizeof(keep) / sizeof(keep[0]); i++)
			kept |= p == keep[i];
		if (!kept && !attach_is_runtime_prog(a, p) && !driver_is_prog(p))
			bpf_program__set_autoload(p, false);
	}
	plan_add(&a->plan, "irq", "raw_tp irq_handler_entry,exit", "vfio-pci's, of --device cards, counted per card");
	plan_add(&a->plan, "exit", "raw_tp sched_process_exit", "forgets a process's card");
}

/*
 * Which thread a card's interrupt wakes, so that a stream's jobs go on the
 * card that ran them, without a program on every wake-up of the host: the
 * interrupt's own program reads the waiters of the eventfd vfio signals
 * (hop 0), and eventfd_write those of the eventfd a woken thread writes
 * next (hop 1), by fentry, else a kprobe (which makes a vfio_msihandler
 * kprobe miss an interrupt that lands while it runs: counted, reported),
 * else not at all. A sched_waking program, which every wake-up of the host
 * runs, only on request (--wake-hook sched_waking). The daemon attaches
 * the hop-1 program in detail windows only. off: why none is wanted
 * (NULL: one is).
 */
static void plan_wake(struct attacher *a, const char *off)
{
	static const char *const fns[] = { "default_wake_function",
					   "autoremove_wake_function",
					   "woken_wake_function",
					   "ep_autoremove_wake_function",
					   "pollwake",
					   "ep_poll_callback",
					   "eventfd_write" };
	struct spyre_bpf *s = a->skel;
	const char *when = a->o->daemon ? "in detail windows only: " : "";
	bool found[7] = { false };
	uint64_t addr[7] = { 0 };
	const char *mech = NULL;
	char why[160] = "";

	bpf_program__set_autoload(s->progs.irq_wake, false);
	bpf_program__set_autoload(s->progs.eventfd_write_fentry, false);
	bpf_program__set_autoload(s->progs.eventfd_write_kprobe, false);
	a->wake_prog = NULL;
	a->wake_hook = NULL;
	if (off) {
		plan_add(&a->plan, "wake", "-",
			 "%s: a process that drives several cards has its jobs on a card only "
			 "by a launch's DMA-mapped buffer",
			 off);
		return;
	}
	kallsyms_find(fns, 7, found, addr);
	if (a->o->wake_sched) {
		bpf_program__set_autoload(s->progs.irq_wake, true);
		a->wake_prog = s->progs.irq_wake;
		a->wake_hook = "sched_waking";
		plan_add(&a->plan, "wake", "raw_tp sched_waking",
			 "%s--wake-hook sched_waking: the traced thread a "
			 "card's interrupt woke, or the one it woke next: which card a stream's jobs run on (every "
			 "wake-up of the host runs this program)",
			 when);
		return;
	}
	/* an address kptr_restrict hides reads 0: nothing would match it */
	if (!addr[0] || !addr[1] || !addr[2]) {
		plan_add(&a->plan, "wake", "-",
			 "the kernel's wake functions have no address in /proc/kallsyms: a "
			 "process that drives several cards has its jobs on a card only by a launch's DMA-mapped "
			 "buffer; hint: --wake-hook sched_waking");
		return;
	}
	s->rodata->wake_by_eventfd = true;
	/* 0 if absent: epoll_wait() before 6.1 uses autoremove_wake_function */
	for (int i = 0; i < 4; i++)
		s->rodata->wake_fn_task[i] = addr[i];
	s->rodata->wake_fn_poll = addr[4]; /* 0 if absent: poll() waiters not followed */
	s->rodata->wake_fn_epoll = addr[5]; /* 0 if absent: epoll waiters not followed */
	a->wake_hook = "eventfd";
	if (a->o->driver_mode == DRIVER_OFF) {
		snprintf(why, sizeof(why), "--driver-probes off");
	} else {
		if (a->o->driver_mode != DRIVER_KPROBE)
			mech = driver_hook_kernel(s, DRIVER_FENTRY, "eventfd_write", &a->drv, why, sizeof(why));
		if (mech) {
			a->wake_prog = s->progs.eventfd_write_fentry;
		} else if (a->o->driver_mode == DRIVER_FENTRY) {
			/* fentry only: why says why not */
		} else if (!sbt_have_kprobes() || !found[6]) {
			snprintf(why + strlen(why), sizeof(why) - strlen(why), "%s%s", why[0] ? "; " : "",
				 !found[6] ? "eventfd_write not in /proc/kallsyms" : "kprobes not available");
		} else {
			bpf_program__set_autoload(s->progs.eventfd_write_kprobe, true);
			a->wake_prog = s->progs.eventfd_write_kprobe;
			mech = "kprobe";
		}
	}
	if (mech) {
		plan_add(&a->plan, "wake", mech,
			 "%sthe traced thread waiting on the eventfd a card's interrupt "
			 "signals (read, poll or epoll_wait), read at the interrupt; and the one it wakes next through "
			 "an eventfd "
			 "(eventfd_write): which card a stream's jobs run on; no other wake-up pays",
			 when);
		return;
	}
	a->wake_hook = "interrupt";
	plan_add(&a->plan, "wake", "raw_tp irq_handler_entry",
		 "%sthe traced thread waiting on the eventfd a card's "
		 "interrupt signals, read at the interrupt; not one it wakes next (eventfd_write: %s), so a "
		 "runtime that waits through another thread has its streams on no card; hint: --wake-hook "
		 "sched_waking",
		 when, why);
}

/* Are all three of vfio's file handlers hooked (fentry or kprobe)? Then
 * VFIO's ioctls can be taken there, where no other syscall pays. */
static const char *vfio_handlers_hooked(struct attacher *a)
{
	struct spyre_bpf *s = a->skel;
	struct bpf_program *fentry[3] = { s->progs.vfio_fops_unl_ioctl_fentry,
					  s->progs.vfio_group_fops_unl_ioctl_fentry,
					  s->progs.vfio_device_fops_unl_ioctl_fentry };
	struct bpf_program *kprobe[3] = { s->progs.vfio_fops_unl_ioctl_kprobe,
					  s->progs.vfio_group_fops_unl_ioctl_kprobe,
					  s->progs.vfio_device_fops_unl_ioctl_kprobe };
	int nf = 0, nk = 0;

	for (int i = 0; i < 3; i++) {
		nf += bpf_program__autoload(fentry[i]);
		nk += bpf_program__autoload(kprobe[i]);
	}
	if (nf + nk != 3)
		return NULL;
	return nf == 3 ? "fentry" : nk == 3 ? "kprobe" : "fentry+kprobe";
}

/* Why VFIO's ioctls are not taken in vfio's handlers. */
static const char *no_handlers_why(const struct attacher *a)
{
	if (a->o->nvfio_paths)
		return "--vfio-path files reach no vfio handler";
	if (a->o->driver_mode == DRIVER_OFF)
		return "--driver-probes off";
	return "vfio's file handlers cannot all be hooked here";
}

/* The daemon's ioctl hook: vfio's three file handlers, where the plan hooks
 * all of them (only VFIO's calls reach them: no syscall of another
 * process pays), else the syscall tracepoints (every ioctl of the host runs
 * them, and every syscall takes the kernel's slower traced path). The
 * mock files of --vfio-path reach no vfio handler: tracepoints. */
static void daemon_ioctl_hook(struct attacher *a)
{
	struct spyre_bpf *s = a->skel;
	const char *hook = vfio_handlers_hooked(a);

	if (hook && !a->o->nvfio_paths) {
		a->ioctl_hook = hook;
		s->rodata->ioctl_by_driver = true;
		bpf_program__set_autoload(s->progs.ioctl_enter, false);
		bpf_program__set_autoload(s->progs.ioctl_exit, false);
		plan_add(&a->plan, "ioctl", a->ioctl_hook,
			 "vfio_*_fops_unl_ioctl: VFIO's commands of every "
			 "process, args decoded in BPF; no syscall tracepoint, so no other syscall pays");
		return;
	}
	a->ioctl_hook = "tracepoint";
	plan_add(&a->plan, "ioctl", "tracepoint syscalls:sys_*_ioctl",
		 "VFIO's commands of every process, args decoded in BPF (%s; every syscall of the host "
		 "takes the kernel's traced path while it is attached)",
		 no_handlers_why(a));
}

/* record's ioctl hook: vfio's handlers where all three are hooked and no
 * --vfio-path pattern is given (mock files reach no vfio handler); then
 * no syscall tracepoint at all: no fd to track, and the opens of
 * libraries from do_filp_open. Else the syscall tracepoints. */
static void record_ioctl_hook(struct attacher *a)
{
	struct spyre_bpf *s = a->skel;
	const char *hook = vfio_handlers_hooked(a), *opens;
	char why[160];

	if (!hook || a->o->nvfio_paths) {
		a->ioctl_hook = "tracepoint";
		plan_add(&a->plan, "ioctl", "tracepoint syscalls:sys_*_ioctl",
			 "VFIO fds only, args decoded in BPF "
			 "(%s; every syscall of the host takes the kernel's traced path while attached)",
			 no_handlers_why(a));
		plan_add(&a->plan, "fd-track", "tracepoint syscalls:sys_*_openat,close", "learns accelerator fds");
		plan_add(&a->plan, "late-libs", "tracepoint syscalls:sys_*_openat",
			 "shared objects opened by traced processes, probed at once if runtime libraries");
		return;
	}
	a->ioctl_hook = hook;
	s->rodata->ioctl_by_driver = true;
	bpf_program__set_autoload(s->progs.ioctl_enter, false);
	bpf_program__set_autoload(s->progs.ioctl_exit, false);
	bpf_program__set_autoload(s->progs.close_enter, false);
	plan_add(&a->plan, "ioctl", hook,
		 "vfio_*_fops_unl_ioctl: the traced processes' ioctls on VFIO's files, "
		 "args decoded in BPF; no syscall tracepoint");
	plan_add(&a->plan, "fd-track", "-", "not needed: the handler an ioctl reaches says which VFIO file it is");
	opens = driver_hook_kernel(s, (enum driver_mode)a->o->driver_mode, "do_filp_open", &a->drv, why, sizeof(why));
	if (opens) {
		bpf_program__set_autoload(s->progs.openat_enter, false);
		bpf_program__set_autoload(s->progs.openat_exit, false);
		plan_add(&a->plan, "late-libs", opens,
			 "do_filp_open: shared objects opened by traced processes, "
			 "probed at once if runtime libraries");
	} else {
		plan_add(&a->plan, "late-libs", "tracepoint syscalls:sys_*_openat",
			 "shared objects opened by traced "
			 "processes (do_filp_open: %s; every syscall of the host takes the kernel's traced path)",
			 why);
	}
}

/* A library's sites in two uprobe_multi links where the kernel makes them
 * (uprobe_multi.h), else a uprobe a site: the programs for the links are
 * loaded only where they can be used. */
static void configure_uprobe_multi(struct attacher *a)
{
	struct spyre_bpf *s = a->skel;

	a->uprobe_multi = uprobe_multi_supported();
	if (a->uprobe_multi) {
		bpf_program__set_expected_attach_type(s->progs.call_enter_multi,
						      (enum bpf_attach_type)SBT_ATTACH_UPROBE_MULTI);
		bpf_program__set_expected_attach_type(s->progs.call_return_multi,
						      (enum bpf_attach_type)SBT_ATTACH_UPROBE_MULTI);
	} else {
		bpf_program__set_autoload(s->progs.call_enter_multi, false);
		bpf_program__set_autoload(s->progs.call_return_multi, false);
	}
}

static int configure(struct attacher *a)
{
	struct spyre_bpf *s = a->skel;
	struct bpf_program *filp_open[4] = { s->progs.do_filp_open_fentry, s->progs.do_filp_open_fexit,
					     s->progs.do_filp_open_kprobe, s->progs.do_filp_open_kretprobe };
	unsigned long size = round_pow2(a->o->buffer_size);
	const char *tp;
	int hz;

	bpf_map__set_max_entries(s->maps.events, (uint32_t)size);
	s->rodata->wakeup_bytes = size / 4;
	if (size != a->o->buffer_size)
		plan_add(&a->plan, "buffer", "-", "ring buffer rounded up to %lu bytes", size);

	for (int i = 0; i < SBT_VFIO_FD_PATTERNS; i++)
		add_pattern(a, vfio_patterns[i].glob, vfio_patterns[i].kind);
	/* record matches --vfio-path globs at openat(); the daemon takes
	 * directories, matched by inode at each ioctl (vfio_files.c) */
	for (int i = 0; i < a->o->nvfio_paths && !a->o->daemon; i++)
		add_pattern(a, a->o->vfio_paths[i], SBT_FD_PATH);
	s->rodata->n_patterns = (uint32_t)a->npatterns;
	s->rodata->daemon_n_mock_dirs = a->o->daemon ? (uint32_t)a->o->nvfio_paths : 0;

	s->rodata->daemon_mode = a->o->daemon;
	s->rodata->daemon_record = a->o->daemon_record;
	s->rodata->daemon_sample_every = a->o->daemon_sample_ioctls ? a->o->daemon_sample_ioctls : 1;
	s->rodata->daemon_slow_ns = a->o->daemon_slow_ns;
	if (a->o->daemon && (hz = kernel_hz()))
		s->rodata->daemon_ns_per_jiffy = 1000000000ull / (unsigned)hz;
	configure_uprobe_multi(a);
	if (a->o->daemon) {
		plan_add(&a->plan, "daemon", "per-CPU maps",
			 "every process's VFIO ioctls; counts and histograms summed in the kernel, no records");
		plan_add(&a->plan, "runtime", a->uprobe_multi ? "uprobe_multi per library" : "uprobe per process",
			 "only in detail windows, on the processes that hold a card");
		/* files are told by the ioctl itself: no hook on every open of the host */
		plan_add(&a->plan, "fd-track", "-", "not needed: an ioctl's file is looked at when VFIO's");
		plan_add(&a->plan, "vfio-files", "f_op",
			 "a file is VFIO's when its ioctls go to vfio's own "
			 "handlers (from /proc/kallsyms)%s",
			 a->o->nvfio_paths ? ", or lies below --vfio-path" : "");
	} else if (!sbt_have_uprobes()) {
		sbt_err("uprobes not available on this kernel; hint: needs CONFIG_UPROBE_EVENTS=y");
		return -EOPNOTSUPP;
	} else {
		plan_add(&a->plan, "runtime", a->uprobe_multi ? "uprobe_multi per library" : "uprobe per process",
			 "entry and return sites (no uretprobe), traced processes only%s",
			 a->uprobe_multi ? "; a library's sites in two links, removed at once"
					 : "; one uprobe a site (no uprobe_multi links here)");
	}

	configure_devices(a);
	for (int i = 0; i < 4; i++) /* record's, where vfio's handlers carry the ioctls */
		bpf_program__set_autoload(filp_open[i], false);
	driver_plan(s, (enum driver_mode)a->o->driver_mode, &a->drv, &a->plan);
	if (a->o->daemon) {
		daemon_ioctl_hook(a);
		daemon_trim(a);
		plan_wake(a, NULL);
		return 0;
	}
	record_ioctl_hook(a);

	plan_add(&a->plan, "irq", "raw_tp irq_handler_entry,exit", "vfio-pci's, of --device cards; and --irq");
	char vfio_card[1][16];

	/* only where a card's interrupt can be the cause */
	plan_wake(a, a->o->no_wake_hook					   ? "--no-wake-hook"
		     : !a->o->nirqs && pci_vfio_devices(vfio_card, 1) <= 0 ? "no device on vfio-pci, no --irq"
									   : NULL);

	if (sbt_tracepoint_exists("iommu", "map")) {
		plan_add(&a->plan, "iommu", "raw_tp iommu:map,unmap", "in traced tasks");
	} else {
		bpf_program__set_autoload(s->progs.iommu_map, false);
		bpf_program__set_autoload(s->progs.iommu_unmap, false);
		plan_add(&a->plan, "iommu", "-", "iommu:map: no such tracepoint on this kernel");
	}
	tp = plan_dma_tracepoint(false);
	if (tp)
		plan_add(&a->plan, "dma", tp, "raw_tp dma:%s (and its unmap twin)", tp);
	else
		plan_add(&a->plan, "dma", "-", "dma_map_phys, dma_map_page: no such tracepoint");
	if (!tp || !plan_dma_tracepoint(true)) {
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
	plan_add(&a->plan, "task", "raw_tp sched_process_exit, task_rename", "thread names and exits");
	return 0;
}

int attach_open(struct attacher *a, const struct record_opts *o)
{
	int bad;

	a->o = o;
	pthread_mutex_init(&a->probes_lock, NULL);
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
