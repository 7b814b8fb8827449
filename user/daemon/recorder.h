/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * The daemon's flight recorder: the last T seconds (or M MiB, whichever is
 * less) of raw records, in a ring of fixed-size segments. A record never
 * straddles two segments; the oldest segment is dropped whole to make room,
 * or once all it holds is older than T. Segments are allocated when first
 * used, so memory grows with what is kept, up to M.
 *
 * One process cannot flush the others' evidence: each holds at most a
 * share of M (its records' bytes still in the recorder, by tgid); past it,
 * its new records are dropped and counted, until its old ones go. Cards'
 * interrupts (taken in whatever task they interrupt) and descriptions are
 * nobody's.
 */
#ifndef SBT_RECORDER_H
#define SBT_RECORDER_H

#include <stddef.h>
#include <stdint.h>

#include "base/hashmap.h"
#include "events.h"

#define RECORDER_SEGMENT (1u << 20)
#define RECORDER_IRQ_NAMES 64

struct recorder_segment {
	uint8_t *data; /* RECORDER_SEGMENT bytes, NULL until used */
	size_t used;
	uint64_t first_ts, last_ts; /* of the records in it; 0 when empty */
	uint64_t records;
};

struct flight_recorder {
	struct recorder_segment *seg;
	size_t nseg; /* M / RECORDER_SEGMENT */
	size_t head; /* the segment being filled */
	uint64_t keep_ns; /* T */
	uint64_t age_due; /* no segment is older than T before this */
	uint64_t records, dropped_records; /* kept over its life; dropped to make room or by age */
	uint64_t share_bytes; /* a process holds at most this; 0: no bound */
	struct hashmap held; /* tgid -> its bytes in the recorder (as a pointer-sized count) */
	uint64_t over_share; /* records dropped because their process was over its share */
	uint32_t over_share_pid; /* the last process they were dropped of */
	/* each interrupt's name, as the kernel last gave it: it comes once, at
	 * the interrupt's first record ever, and a snapshot long after needs
	 * it to put the interrupts on their card */
	struct sbt_meta_irq irq_names[RECORDER_IRQ_NAMES];
	int nirq_names;
};

/* 0, or -ENOMEM. mib >= 1, seconds > 0; share_pct: a process's share of
 * the bytes, 1 to 100 (100: no bound). */
int recorder_init(struct flight_recorder *r, size_t mib, double seconds, unsigned int share_pct);
void recorder_free(struct flight_recorder *r);
/* Keeps one record (ts in h->ts), unless its process is over its share.
 * now: for dropping what is older than T. */
void recorder_add(struct flight_recorder *r, const struct sbt_hdr *h, uint64_t now);
/* Calls fn for each record with from <= ts <= to, oldest segment first;
 * returns how many. The earliest ts kept, for the answer, in *oldest. */
uint64_t recorder_each(const struct flight_recorder *r, uint64_t from, uint64_t to,
		       void (*fn)(void *ctx, const struct sbt_hdr *h), void *ctx, uint64_t *oldest);
size_t recorder_bytes(const struct flight_recorder *r); /* allocated */
size_t recorder_used(const struct flight_recorder *r); /* in records */
/* Calls fn for each interrupt's name kept (SBT_META_IRQ records). */
void recorder_irq_names(const struct flight_recorder *r, void (*fn)(void *ctx, const struct sbt_hdr *h),
			void *ctx);
/* What a process holds in the recorder now, in bytes. */
uint64_t recorder_held(const struct flight_recorder *r, uint32_t tgid);

#endif
