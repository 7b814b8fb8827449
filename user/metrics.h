/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * The daemon's metrics in Prometheus's text exposition format (0.0.4):
 * names in base units, counters ending in _total, labels bounded (a
 * command, a card: never a pid, an address or a cgroup).
 */
#ifndef SBT_METRICS_H
#define SBT_METRICS_H

#include <stddef.h>
#include <stdint.h>

#include "fleet.h"

struct metrics_self {
	uint64_t lost_records;
	double bpf_run_seconds; /* all our programs; < 0 when the kernel keeps no stats */
	uint64_t bpf_run_count;
	uint64_t scrapes;
	double start_time; /* seconds since the epoch */
};

/* The page for /metrics: malloc'd, NUL ended, its length in *len; NULL
 * when out of memory. */
char *metrics_render(const struct fleet *f, const struct fleet_counts *c,
		     const struct metrics_self *self, size_t *len);

#endif
