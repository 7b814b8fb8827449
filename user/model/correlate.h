/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * The correlation engine: records in (from a live ring buffer or a capture
 * file, the same way), the host/device model out (model.h) to sinks.
 *
 * - host: per thread, runtime calls with the ioctls and DMA mapping work
 *   inside them, as slices nested by time;
 * - device: per card and engine (H2D DMA, compute, D2H DMA), a job slice
 *   from the launch call's entry to its completion (the interrupt, or else
 *   the return of the wait that saw it), overlapping jobs on separate lanes;
 * - flows: launch -> device job -> interrupt -> the wait that returned;
 * - counters: jobs in flight, DMA-mapped bytes, runtime-allocated bytes.
 * Only open state is kept (open calls, jobs in flight, live allocations).
 */
#ifndef SBT_CORRELATE_H
#define SBT_CORRELATE_H

#include <stdint.h>

#include "capture/meta.h"
#include "events.h"
#include "model/model.h"

#define CORRELATE_MAX_SINKS 4

struct correlate_stats {
	uint64_t records, calls, ioctls, ioctl_errors, jobs, irqs;
	uint64_t driver_calls; /* driver-level records (vfio functions) */
	uint64_t unfinished_calls, unfinished_jobs; /* open at the end */
	uint64_t unpaired_returns; /* a return whose entry was not seen */
	uint64_t unmatched_completions; /* an interrupt with no job in flight */
	/* streams put on a card by the interrupt that woke their wait (a
	 * process that drives several cards); jobs left on no card */
	uint64_t streams_on_cards, jobs_without_card;
	/* of those, put there by a launch's buffer mapped in one card's own
	 * container, or because their process's other cards raised no
	 * interrupt meanwhile; interrupts that waited for their job's card */
	uint64_t streams_by_mapping, streams_by_elimination, irqs_held;
	uint64_t lost;
	uint64_t implausible; /* records dropped: they could not be true (a damaged capture) */
	uint64_t first_ts, last_ts;
};

struct correlator;

struct correlator *correlator_new(const struct model_sink *sinks, int nsinks);
/* Feed one record, metadata included. 0, or -ENOMEM. */
int correlator_add(struct correlator *c, const struct sbt_hdr *h);
/* End of input: what is still open is shown as unfinished and counted. */
void correlator_finish(struct correlator *c);
const struct correlate_stats *correlator_stats(const struct correlator *c);
const struct capture_meta *correlator_meta(const struct correlator *c);
void correlator_free(struct correlator *c);

#endif
