/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * Records in the order things happened, not the order CPUs reserved them.
 * An interrupt's record is written when its handler returns, but the
 * handler already woke the thread waiting on the card (the eventfd), which
 * can return from its wait and have that return recorded first on another
 * CPU: the job would look ended by the wait, and the interrupt would find
 * no job. The loader holds records a short window and hands them on sorted
 * by when they began (an interrupt by its handler's entry); one thread's
 * records keep their order (their times only grow).
 */
#ifndef SBT_REORDER_H
#define SBT_REORDER_H

#include <stddef.h>
#include <stdint.h>

#include "events.h"

#define REORDER_WINDOW_NS (20ull * 1000000) /* far more than a handler runs */

/* Records are copied into chunks of this size (aligned to it, so a
 * record's chunk is its address rounded down), in the order they come;
 * a chunk whose records have all been handed on is used again. A record
 * too large for one gets an allocation of its own. */
#define REORDER_CHUNK (64u << 10)

struct reorder_chunk {
	size_t used, live; /* bytes from the chunk's start; records not handed on */
	struct reorder_chunk *next; /* on the spare list */
};

struct reorder {
	struct reorder_item {
		uint64_t key, seq;
		struct sbt_hdr *rec;
		int own; /* rec is an allocation of its own, not in a chunk */
	} * items; /* sorted by (key, seq) from head */
	size_t head, n, cap;
	uint64_t seq;
	struct reorder_chunk *cur, *spare; /* being filled; free for reuse */
	size_t nspare;
};

/* When a record began, the order records are handed on in: its ts, but
 * an interrupt (and vfio's MSI handler) at its entry, and a wake-up an
 * interrupt caused just before that interrupt. */
uint64_t reorder_began(const struct sbt_hdr *h);
/* Copy a record in. 0 or -ENOMEM. */
int reorder_add(struct reorder *q, const struct sbt_hdr *h);
/* Hand on, in order, every record that began before `before`. */
void reorder_release(struct reorder *q, uint64_t before, void (*emit)(void *ctx, const struct sbt_hdr *h), void *ctx);
/* Hand on what began long enough before now (BOOTTIME ns) that nothing
 * earlier can still come (REORDER_WINDOW_NS); all: everything held. */
void reorder_release_settled(struct reorder *q, uint64_t now, int all, void (*emit)(void *ctx, const struct sbt_hdr *h),
			     void *ctx);
void reorder_free(struct reorder *q);

#endif
