/* SPDX-License-Identifier: GPL-2.0-only */
/* What inspect found in a Perfetto trace (inspect.h): counts and violations. */
#ifndef SBT_INSPECT_RESULT_H
#define SBT_INSPECT_RESULT_H

#include <stdint.h>
#include <stdio.h>

struct inspect_result {
	FILE *out; /* violations are printed here (NULL: counted only) */
	uint64_t packets, tracks, slices, instants, counters, flows, clock_snapshots, drop_marks;
	uint64_t dangling_flows; /* one-ended flows in a trace that marks lost data */
	uint64_t violations;
};

#endif
