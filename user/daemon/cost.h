/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * What the daemon's BPF costs, measured on request (`ctl cost`). The kernel
 * counts a program's runs and run time only while its statistics are on,
 * and with them on every BPF program of the host (networking, security
 * agents, other tracers) pays some 40-50 ns more a run: the daemon turns
 * them on for the measure only (a BPF_ENABLE_STATS fd, closed at its end),
 * never for its life. kernel.bpf_stats_enabled, the sysctl, is left as it
 * was; when someone else set it, the counts move meanwhile too.
 */
#ifndef SBT_COST_H
#define SBT_COST_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "daemon/metrics.h"

#define COST_MAX_SECONDS 60

struct bpf_object;

struct cost_measure {
	int stats_fd; /* the statistics held on for it; -1: not measuring */
	int client; /* who asked (its answer at the end); -1 */
	uint64_t from, until; /* BOOTTIME ns */
	int nprogs;
	struct metrics_prog before[METRICS_PROGS];
	char last[160]; /* the last measure, for ctl status; "" none yet */
};

void cost_init(struct cost_measure *c);
/* The runs and run time the kernel counted so far of obj's loaded
 * programs, up to max; how many. */
int cost_read(struct bpf_object *obj, struct metrics_prog *out, int max);
/* Is kernel.bpf_stats_enabled set (by someone: the daemon never sets it)? */
bool cost_sysctl_on(void);
/* A measure of seconds begun now for client: 0, -EBUSY while one is under
 * way, or -errno when the kernel would not turn its statistics on. */
int cost_begin(struct cost_measure *c, struct bpf_object *obj, double seconds, int client, uint64_t now);
bool cost_due(const struct cost_measure *c, uint64_t now);
/* Ends the measure (the statistics off again): the answer for its client
 * ("ok" and a table), also summed up in c->last. */
void cost_end(struct cost_measure *c, struct bpf_object *obj, uint64_t now, char *answer, size_t len);

#endif
