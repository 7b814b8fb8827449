// SPDX-License-Identifier: GPL-2.0-only
/* The attach module (attach.h). */
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <errno.h>
#include <fnmatch.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "attach/attach.h"
#include "base/args.h"
#include "base/log.h"
#include "base/procfs.h"
#include "spyre.skel.h"

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
		sbt_err("cannot load the BPF programs: %s; hint: run with -v for the verifier log", strerror(-err));
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

struct attached_proc *attach_proc_of(struct attacher *a, pid_t pid, bool create)
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

void attach_forget(struct attacher *a, pid_t pid)
{
	struct attached_proc *ap = attach_proc_of(a, pid, false);

	if (!ap)
		return;
	if (a->reaper)
		reaper_take(a->reaper, &ap->links);
	link_free(&ap->links);
	*ap = a->procs[--a->nprocs];
}

int attach_trace_pid(struct attacher *a, pid_t pid)
{
	uint32_t key = (uint32_t)pid, one = 1;
	struct seed_ctx c = { a, pid };

	if (bpf_map_update_elem(bpf_map__fd(a->skel->maps.traced), &key, &one, BPF_ANY)) {
		sbt_err("cannot trace PID %d: %s", pid, strerror(errno));
		return -errno;
	}
	/* the daemon's ioctl hook looks at the file itself: nothing to seed */
	if (!a->o->daemon && proc_for_each_fd(pid, a->fd_scan_max, seed_fd_cb, &c))
		sbt_info(1,
			 "  fds        -> PID %d: over %zu open files: the first %zu looked at for its "
			 "accelerator files\n",
			 pid, a->fd_scan_max, a->fd_scan_max);
	return 0;
}

void attach_untrace_all(struct attacher *a)
{
	int fd = bpf_map__fd(a->skel->maps.traced);
	uint32_t key;

	/* deleting the first key each time: no iterator to lose its place */
	while (!bpf_map_get_next_key(fd, NULL, &key))
		if (bpf_map_delete_elem(fd, &key))
			break;
}

void attach_catch_newcomers(struct attacher *a, bool on)
{
	__atomic_store_n(&a->skel->bss->catch_newcomers, on ? 1u : 0u, __ATOMIC_RELEASE);
}

bool attach_any_traced(struct attacher *a)
{
	uint32_t key;

	return bpf_map_get_next_key(bpf_map__fd(a->skel->maps.traced), NULL, &key) == 0;
}

/* ---- kernel programs ------------------------------------------------------- */

bool attach_is_runtime_prog(const struct attacher *a, const struct bpf_program *p)
{
	return p == a->skel->progs.call_enter || p == a->skel->progs.call_return ||
	       p == a->skel->progs.call_enter_multi || p == a->skel->progs.call_return_multi ||
	       (a->o->daemon && (p == a->skel->progs.irq_wake || p == a->skel->progs.eventfd_write_fentry ||
				 p == a->skel->progs.eventfd_write_kprobe)); /* the daemon's: in windows */
}

int attach_window_hooks(struct attacher *a, bool on)
{
	struct bpf_program *p = a->wake_prog;
	int err;

	if (!on || !p || !bpf_program__autoload(p)) {
		bpf_link__destroy(a->wake_link);
		a->wake_link = NULL;
		return 0;
	}
	if (a->wake_link)
		return 0;
	a->wake_link = bpf_program__attach(p);
	err = libbpf_get_error(a->wake_link);
	if (err) {
		a->wake_link = NULL;
		sbt_warn("window: cannot attach the wake-up hook (%s): %s; the jobs of a process "
			 "that drives several cards stay unattributed",
			 bpf_program__section_name(p), strerror(-err));
		return err;
	}
	return 0;
}

/* Every program the object loads is attached here, but the runtime ones
 * (per process, below): a new program cannot go unattached silently. */
int attach_kernel(struct attacher *a)
{
	struct spyre_bpf *s = a->skel;
	struct bpf_program *p;
	int err;

	bpf_object__for_each_program(p, s->obj)
	{
		struct bpf_link *link;
		const char *what = bpf_program__section_name(p);

		if (!bpf_program__autoload(p) || attach_is_runtime_prog(a, p))
			continue;
		if (p == s->progs.dma_map || p == s->progs.dma_unmap) {
			what = plan_dma_tracepoint(p == s->progs.dma_unmap);
			link = bpf_program__attach_raw_tracepoint(p, what);
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

uint64_t attach_ring_size(struct attacher *a)
{
	return bpf_map__max_entries(a->skel->maps.events);
}

uint64_t attach_read_ring_peak(struct attacher *a)
{
	return __atomic_load_n(&a->skel->bss->ring_peak_bytes, __ATOMIC_RELAXED);
}

uint64_t attach_read_vfio_cmds_unknown(struct attacher *a)
{
	return __atomic_load_n(&a->skel->bss->vfio_cmds_unknown_files, __ATOMIC_RELAXED);
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

	bpf_object__for_each_program(p, a->skel->obj)
	{
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
	struct link_reaper side;
	bool own = false;

	/* the uprobes go under the kernel's uprobe lock, the tracepoints
	 * under its event lock, each waiting for grace periods: side by
	 * side, the wait is the longer of the two, not their sum */
	if (!a->reaper && a->nprocs && !reaper_start(&side)) {
		a->reaper = &side;
		own = true;
	}
	while (a->nprocs)
		attach_forget(a, a->procs[0].pid);
	bpf_link__destroy(a->wake_link);
	free(a->procs);
	link_free(&a->links);
	if (own)
		reaper_stop(&side);
	spyre_bpf__destroy(a->skel);
	probe_set_free(&a->probes);
	pthread_mutex_destroy(&a->probes_lock);
	free(a->specs);
	for (int i = 0; i < SBT_MAX_USER_PROBES; i++)
		free(a->real_libs[i]);
	memset(a, 0, sizeof(*a));
}
