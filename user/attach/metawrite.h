/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * The records the loader adds to a capture about what it traces: host,
 * clocks, processes, probes, thread and interrupt names, and the VFIO
 * groups (cards) a process drives.
 */
#ifndef SBT_METAWRITE_H
#define SBT_METAWRITE_H

#include <stdbool.h>
#include <sys/types.h>

#include "model/output.h"
#include "probes/probes.h"

#define METAW_MAX_GROUPS 64
#define METAW_MAX_IRQ 1024

struct meta_writer {
	struct output *out;
	/* instead of out, when set: the daemon keeps these in its flight recorder */
	void (*sink)(void *ctx, const struct sbt_hdr *h);
	void *sink_ctx;
	bool irq_named[METAW_MAX_IRQ];
	struct {
		pid_t pid;
		int group;
	} groups[METAW_MAX_GROUPS]; /* VFIO groups reported per process */
	int ngroups;
	size_t fd_scan_max; /* a process's open files looked at for its groups (0: all) */
};

/* Fill h's type and size (and ts when 0) and add it to the output. */
void metaw_put(struct meta_writer *m, struct sbt_hdr *h, uint16_t type, size_t total);
void metaw_host(struct meta_writer *m);
void metaw_clock(struct meta_writer *m);
/* argv: the -c command, not yet exec'd; NULL: read /proc */
void metaw_proc(struct meta_writer *m, pid_t pid, char *const *argv);
void metaw_probe(struct meta_writer *m, const struct probe_site *s);
void metaw_thread_names(struct meta_writer *m, const pid_t *pids, int n);
/* The thread's ids in its pid namespace, when that is not ours (a container). */
void metaw_nspid(struct meta_writer *m, pid_t pid, pid_t tid);
/* Name an interrupt once; false if it was named already. */
bool metaw_irq(struct meta_writer *m, int irq, const char *name);
/* A process used this VFIO group fd: with one device in the group, the
 * process drives that card. Each group once per process. */
void metaw_group_fd(struct meta_writer *m, pid_t pid, int fd);
/* The same, the group's number known (a file the process has open). */
void metaw_group(struct meta_writer *m, pid_t pid, int group);
/* The groups a running process has open already. */
void metaw_groups_of(struct meta_writer *m, pid_t pid);

#endif
