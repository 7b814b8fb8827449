/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * The daemon's always-on tier, user side: the cards it numbers for BPF
 * (bpf/daemon.bpf.h), the processes that already had a card open when it
 * started, the sweep of processes gone, and the in-kernel counters read
 * and summed over CPUs.
 */
#ifndef SBT_DAEMON_H
#define SBT_DAEMON_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "attach/devfilter.h"
#include "events.h"

struct spyre_bpf;

struct daemon_card {
	char bdf[16]; /* 0000:3b:00.0; "unknown" for slot 0 */
	char vendor_device[10]; /* 1014:06a7 */
	int numa; /* -1 when the kernel does not say */
	uint32_t group; /* VFIO (IOMMU) group */
};

/* Card holders the daemon keeps a copy of: more, and daemon_procs is
 * walked at each look. */
#define DAEMON_PROCS_KEPT 256

struct daemon_counters {
	struct spyre_bpf *skel;
	struct daemon_card cards[SBT_DAEMON_CARDS]; /* [0]: work no card is known for */
	int ncards; /* slots used, 0 included */
	int ncpus;
	/* daemon_procs as last walked, valid while BPF's daemon_procs_gen
	 * is procs_gen: a walk reads every bucket of the map, cold */
	pid_t procs[DAEMON_PROCS_KEPT];
	int nprocs;
	uint64_t procs_gen;
	bool procs_kept; /* procs is the map's whole content at procs_gen */
	/* the card maps were empty at the last sweep, and BPF's
	 * daemon_cards_gen was cards_gen: nothing to sweep */
	uint64_t cards_gen;
	bool cards_empty;
};

/* What the kernel summed, over all CPUs. */
struct daemon_counts {
	struct sbt_daemon_hist ops[SBT_DAEMON_OPS];
	struct sbt_daemon_card cards[SBT_DAEMON_CARDS];
	struct sbt_daemon_hist drv[SBT_DRV_FUNC_MAX]; /* vfio's functions, by enum sbt_drv_func */
};

/* The cards bound to vfio-pci that the filter wants, numbered 1.. into the
 * BPF maps (after load); again later, only new cards are added (a card
 * keeps its number). Returns how many were added, or -errno. */
int daemon_find_cards(struct daemon_counters *f, const struct devfilter *want, const char *sysfs_pci);
/* Processes that have a VFIO group open now: their card into the BPF map,
 * as BPF would learn it from their next ioctl on the group. Returns how
 * many processes. */
int daemon_seed_processes(struct daemon_counters *f);
/* The processes that hold a card: made a VFIO ioctl since the daemon
 * started, or had a group open then. Returns how many (at most max). */
int daemon_processes(struct daemon_counters *f, pid_t *pids, int max);
/* Forget the cards of processes that are gone. Returns how many. */
int daemon_sweep(struct daemon_counters *f);
/* The counters now. 0 or -errno. */
int daemon_read(struct daemon_counters *f, struct daemon_counts *c);
/* VFIO ioctls that took at least --trigger-slow: every one, the untimed
 * to a clock tick (BPF's daemon_slow_ns). */
uint64_t daemon_slow(const struct daemon_counts *c);
/* Failed VFIO ioctls, of every command. */
uint64_t daemon_errors(const struct daemon_counts *c);
/* The name of a command slot (sbt_daemon_op): "VFIO_IOMMU_MAP_DMA", "other". */
const char *daemon_op_name(uint32_t op);

#endif
