/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * Device metrics, sampled: the jobs each card ran while a detail window
 * was open (sampled, triggered or asked for), from the window's records
 * through the correlator, per card and engine: how long each took
 * (launch to completion) and the time with one in flight. The windows'
 * own seconds are counted too, so that rates over them divide correctly:
 * busy seconds / window seconds is the busy ratio while windows were open.
 */
#ifndef SBT_DEVSTATS_H
#define SBT_DEVSTATS_H

#include <stddef.h>
#include <stdint.h>

#define DEVSTATS_CARDS 16
#define DEVSTATS_ENGINES 3 /* H2D DMA, Compute, D2H DMA: enum model_engine */
#define DEVSTATS_LE 7 /* 10 µs to 10 s, a decade each */
#define DEVSTATS_UNATTRIBUTED "unattributed" /* jobs of a process whose card is not known */

struct devstats_engine {
	uint64_t jobs, bucket[DEVSTATS_LE + 1]; /* the last: over 10 s */
	double sum_s, busy_s;
};

struct devstats_card {
	char card[24]; /* its PCI address, or DEVSTATS_UNATTRIBUTED */
	struct devstats_engine eng[DEVSTATS_ENGINES];
};

struct devstats {
	struct devstats_card cards[DEVSTATS_CARDS];
	int ncards;
	double window_s; /* detail windows' seconds, summed */
	uint64_t windows;
};

/* Upper bounds of the buckets, in seconds. */
extern const double devstats_le[DEVSTATS_LE];
extern const char *const devstats_engine_names[DEVSTATS_ENGINES];

/* One window's records (sbt records one after another, as a snapshot
 * holds them) through the correlator, its device jobs added to s, and
 * window_s to its seconds. 0, or -ENOMEM (s unchanged). */
int devstats_add_window(struct devstats *s, const uint8_t *recs, size_t len, double window_s);

#endif
