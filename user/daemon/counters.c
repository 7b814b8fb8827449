// SPDX-License-Identifier: GPL-2.0-only
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/procfs.h"
#include "capture/names.h"
#include "daemon/counters.h"
#include "spyre.skel.h"

int daemon_find_cards(struct daemon_counters *f, const struct devfilter *want, const char *sysfs_pci)
{
	char bdfs[SBT_DAEMON_CARDS][16];
	int n = pci_vfio_devices(bdfs, SBT_DAEMON_CARDS - 1);
	int group_fd = bpf_map__fd(f->skel->maps.daemon_group_card);
	int bdf_fd = bpf_map__fd(f->skel->maps.daemon_bdf_card);

	int before = f->ncards;

	f->ncpus = libbpf_num_possible_cpus();
	if (!f->ncards) { /* slot 0: work no card is known for */
		memset(&f->cards[0], 0, sizeof(f->cards[0]));
		snprintf(f->cards[0].bdf, sizeof(f->cards[0].bdf), "unknown");
		f->cards[0].numa = -1;
		f->ncards = 1;
	}
	for (int i = 0; i < n && f->ncards < SBT_DAEMON_CARDS; i++) {
		struct daemon_card *c = &f->cards[f->ncards];
		uint32_t bdf = devfilter_bdf(bdfs[i]), idx = (uint32_t)f->ncards;
		long vendor = 0, device = 0, numa = -1;
		char link[PATH_MAX], target[PATH_MAX];
		ssize_t len;
		const char *slash;
		bool known = false;

		for (int k = 1; k < f->ncards; k++) /* a card keeps its number: its counters go on */
			known |= !strcmp(f->cards[k].bdf, bdfs[i]);
		if (known || bdf == SBT_BDF_NONE || (want->n && !devfilter_wants_bdf(want, bdf)))
			continue;
		memset(c, 0, sizeof(*c));
		memcpy(c->bdf, bdfs[i], sizeof(c->bdf));
		c->bdf[sizeof(c->bdf) - 1] = 0;
		pci_sysfs_number(sysfs_pci, bdfs[i], "vendor", 16, &vendor);
		pci_sysfs_number(sysfs_pci, bdfs[i], "device", 16, &device);
		pci_sysfs_number(sysfs_pci, bdfs[i], "numa_node", 10, &numa);
		snprintf(c->vendor_device, sizeof(c->vendor_device), "%04x:%04x", (unsigned)vendor & 0xffff,
			 (unsigned)device & 0xffff);
		c->numa = (int)numa;
		snprintf(link, sizeof(link), "%s/%s/iommu_group", sysfs_pci, bdfs[i]);
		len = readlink(link, target, sizeof(target) - 1);
		if (len <= 0)
			continue; /* no IOMMU group: not usable through VFIO */
		target[len] = 0;
		slash = strrchr(target, '/');
		c->group = (uint32_t)strtoul(slash ? slash + 1 : target, NULL, 10);
		if (bpf_map_update_elem(group_fd, &c->group, &idx, BPF_ANY) ||
		    bpf_map_update_elem(bdf_fd, &bdf, &idx, BPF_ANY))
			return -errno;
		f->ncards++;
	}
	return f->ncards - before;
}

/* ---- processes with VFIO files open --------------------------------------- */

struct seed_ctx {
	struct daemon_counters *f;
	pid_t pid; /* the process being looked at */
	bool has_group;
	int procs; /* those seen with a VFIO group open */
};

/* A process with /dev/vfio/N open drives N's card (as BPF learns it from
 * the process's next ioctl on it, which a job set up already may not make). */
static void seed_fd(int fd, const char *target, void *vctx)
{
	struct seed_ctx *ctx = vctx;
	uint32_t group, idx, tgid = (uint32_t)ctx->pid, one = 1;
	int g = vfio_group_of_path(target);

	(void)fd;
	if (g < 0)
		return;
	group = (uint32_t)g;
	ctx->has_group = true;
	bpf_map_update_elem(bpf_map__fd(ctx->f->skel->maps.daemon_procs), &tgid, &one, BPF_ANY);
	if (!bpf_map_lookup_elem(bpf_map__fd(ctx->f->skel->maps.daemon_group_card), &group, &idx))
		bpf_map_update_elem(bpf_map__fd(ctx->f->skel->maps.daemon_proc_card), &tgid, &idx, BPF_ANY);
}

static void seed_process(pid_t pid, void *vctx)
{
	struct seed_ctx *ctx = vctx;

	ctx->pid = pid;
	ctx->has_group = false;
	proc_for_each_fd(pid, PROC_FD_SCAN_MAX, seed_fd, ctx);
	ctx->procs += ctx->has_group;
}

int daemon_seed_processes(struct daemon_counters *f)
{
	struct seed_ctx ctx = { .f = f };

	proc_for_each_pid(seed_process, &ctx);
	/* written here, not by BPF: no count of BPF's says so */
	f->procs_kept = false;
	f->cards_empty = false;
	return ctx.procs;
}

/* Entries of processes that are gone from a map keyed by a tgid first (a
 * u32 alone, or struct sbt_fd_key). Collect, then delete: deleting while
 * walking restarts the walk. *left: the entries that stay. */
static int sweep_map(int fd, size_t key_size, int *left)
{
	uint8_t key[8], next[8], gone[256][8];
	int n = 0, dropped = 0, walked = 0;
	bool first = true;

	while (!bpf_map_get_next_key(fd, first ? NULL : key, next)) {
		uint32_t tgid;

		first = false;
		walked++;
		memcpy(key, next, key_size);
		memcpy(&tgid, next, sizeof(tgid));
		if (n < (int)(sizeof(gone) / sizeof(gone[0])) && !proc_exists((pid_t)tgid))
			memcpy(gone[n++], next, key_size);
	}
	for (int i = 0; i < n; i++)
		dropped += !bpf_map_delete_elem(fd, gone[i]);
	*left += walked - dropped;
	return dropped;
}

static uint64_t bpf_gen(const volatile __u64 *gen)
{
	return __atomic_load_n(gen, __ATOMIC_ACQUIRE);
}

/* f->procs brought up to date with daemon_procs: walked only when BPF says
 * the map moved since (or it holds more than f keeps). */
static void procs_refresh(struct daemon_counters *f)
{
	int fd = bpf_map__fd(f->skel->maps.daemon_procs), n = 0;
	uint64_t gen = bpf_gen(&f->skel->bss->daemon_procs_gen);
	uint32_t key, next;
	bool first = true;

	if (f->procs_kept && gen == f->procs_gen)
		return;
	/* the count read first: a change during the walk is walked again */
	while (!bpf_map_get_next_key(fd, first ? NULL : &key, &next)) {
		first = false;
		key = next;
		if (n == DAEMON_PROCS_KEPT) {
			n++;
			break;
		}
		f->procs[n++] = (pid_t)next;
	}
	f->procs_kept = n <= DAEMON_PROCS_KEPT;
	f->nprocs = f->procs_kept ? n : DAEMON_PROCS_KEPT;
	f->procs_gen = gen;
}

/* A process dropped from daemon_procs must be looked up there again at
 * its pid's next VFIO ioctl: its slot in BPF's cache of them is cleared,
 * and the count that says the map moved bumped. */
static bool drop_proc(struct daemon_counters *f, uint32_t tgid)
{
	int fd = bpf_map__fd(f->skel->maps.daemon_procs), seen = bpf_map__fd(f->skel->maps.daemon_seen_slots);
	uint32_t slot = tgid & (SBT_DAEMON_SEEN_SLOTS - 1), was, zero = 0;

	if (bpf_map_delete_elem(fd, &tgid))
		return false;
	if (!bpf_map_lookup_elem(seen, &slot, &was) && was == tgid)
		bpf_map_update_elem(seen, &slot, &zero, BPF_ANY);
	/* as BPF's exit hook does: each CPU's note that it is there is void */
	__atomic_add_fetch(&f->skel->bss->daemon_procs_gen, 1, __ATOMIC_RELEASE);
	return true;
}

static int sweep_procs(struct daemon_counters *f)
{
	int fd = bpf_map__fd(f->skel->maps.daemon_procs);
	uint32_t key, next, gone[256];
	int n = 0, dropped = 0, kept = 0;
	bool first = true;

	procs_refresh(f);
	if (f->procs_kept) { /* the copy is the map: no walk */
		for (int i = 0; i < f->nprocs; i++) {
			if (proc_exists(f->procs[i]))
				f->procs[kept++] = f->procs[i];
			else
				dropped += drop_proc(f, (uint32_t)f->procs[i]);
		}
		f->nprocs = kept;
		return dropped;
	}
	while (!bpf_map_get_next_key(fd, first ? NULL : &key, &next)) {
		first = false;
		key = next;
		if (n < (int)(sizeof(gone) / sizeof(gone[0])) && !proc_exists((pid_t)next))
			gone[n++] = next;
	}
	for (int i = 0; i < n; i++)
		dropped += drop_proc(f, gone[i]);
	return dropped;
}

int daemon_processes(struct daemon_counters *f, pid_t *pids, int max)
{
	int fd = bpf_map__fd(f->skel->maps.daemon_procs), n = 0;
	uint32_t key, next;
	bool first = true;

	procs_refresh(f);
	if (f->procs_kept) {
		for (int i = 0; i < f->nprocs && n < max; i++)
			if (proc_exists(f->procs[i]))
				pids[n++] = f->procs[i];
		return n;
	}
	while (n < max && !bpf_map_get_next_key(fd, first ? NULL : &key, &next)) {
		first = false;
		key = next;
		if (proc_exists((pid_t)next))
			pids[n++] = (pid_t)next;
	}
	return n;
}

/* BPF forgets a process's card at its exit; this catches one it missed,
 * and containers' cards, which nothing else drops (an exit closes files
 * without close(), and the daemon does not watch close anyway). The card
 * maps are walked unless they were empty at the last sweep and nothing
 * was added since. */
int daemon_sweep(struct daemon_counters *f)
{
	uint64_t gen = bpf_gen(&f->skel->bss->daemon_cards_gen);
	int dropped = sweep_procs(f), left = 0;

	if (f->cards_empty && gen == f->cards_gen)
		return dropped;
	dropped += sweep_map(bpf_map__fd(f->skel->maps.daemon_proc_card), sizeof(uint32_t), &left) +
		   sweep_map(bpf_map__fd(f->skel->maps.daemon_fd_card), sizeof(struct sbt_fd_key), &left);
	f->cards_gen = gen;
	f->cards_empty = left == 0;
	return dropped;
}

/* ---- the counters ------------------------------------------------------------ */

static int sum_percpu(int fd, uint32_t key, int ncpus, void *out, size_t size)
{
	size_t stride = (size + 7) & ~(size_t)7;
	uint64_t *sum = out;
	char *all = calloc((size_t)ncpus, stride);

	if (!all)
		return -ENOMEM;
	if (bpf_map_lookup_elem(fd, &key, all)) {
		free(all);
		return -errno;
	}
	memset(out, 0, size);
	for (int c = 0; c < ncpus; c++) {
		const uint64_t *v = (const uint64_t *)(all + (size_t)c * stride);

		for (size_t w = 0; w < size / sizeof(uint64_t); w++)
			sum[w] += v[w];
	}
	free(all);
	return 0;
}

int daemon_read(struct daemon_counters *f, struct daemon_counts *c)
{
	int ops = bpf_map__fd(f->skel->maps.daemon_ioctls), cards = bpf_map__fd(f->skel->maps.daemon_cards);
	int drv = bpf_map__fd(f->skel->maps.daemon_drv), err;

	for (uint32_t i = 0; i < SBT_DAEMON_OPS; i++)
		if ((err = sum_percpu(ops, i, f->ncpus, &c->ops[i], sizeof(c->ops[i]))))
			return err;
	for (uint32_t i = 0; i < SBT_DAEMON_CARDS; i++)
		if ((err = sum_percpu(cards, i, f->ncpus, &c->cards[i], sizeof(c->cards[i]))))
			return err;
	for (uint32_t i = 0; i < SBT_DRV_FUNC_MAX; i++)
		if ((err = sum_percpu(drv, i, f->ncpus, &c->drv[i], sizeof(c->drv[i]))))
			return err;
	return 0;
}

const char *daemon_op_name(uint32_t op)
{
	const char *name = NULL;

	if (op < 18) /* VFIO_BASE + op on a container (or any file that is not a device's) */
		name = sbt_vfio_cmd_name(SBT_VFIO_IO(op), SBT_FD_HOST_CONTAINER);
	else if (op < 24) /* a device fd's 12..17 */
		name = sbt_vfio_cmd_name(SBT_VFIO_IO(op - 6), SBT_FD_DEVICE);
	else if (op < 29) /* an sPAPR container's 17..21 */
		name = sbt_vfio_cmd_name(SBT_VFIO_IO(op - 7), SBT_FD_SPAPR);
	return name ? name : "other";
}

uint64_t daemon_slow(const struct daemon_counts *c)
{
	uint64_t n = 0;

	for (int i = 0; i < SBT_DAEMON_OPS; i++)
		n += c->ops[i].slow;
	return n;
}

uint64_t daemon_errors(const struct daemon_counts *c)
{
	uint64_t n = 0;

	for (int i = 0; i < SBT_DAEMON_OPS; i++)
		n += c->ops[i].errors;
	return n;
}
