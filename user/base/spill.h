/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * Sorting more items than memory should hold: items are collected in a
 * bounded buffer, each full buffer is sorted and written to a temporary
 * file as a run, and the runs are merged on the way out. `inspect` checks
 * a trace of any length this way in bounded memory.
 */
#ifndef SBT_SPILL_H
#define SBT_SPILL_H

#include <stddef.h>
#include <stdio.h>

struct spill {
	size_t size, cap; /* item size; items held in memory at most */
	int (*cmp)(const void *, const void *); /* a total order */
	char *buf;
	size_t n, held; /* items in buf; room in it (grows to cap) */
	FILE *tmp; /* the runs, one after another */
	struct spill_run {
		size_t first, n; /* in items from the start of tmp */
	} * runs;
	size_t nruns;
	int error; /* errno of a failed write or allocation */
};

void spill_init(struct spill *s, size_t size, size_t cap, int (*cmp)(const void *, const void *));
/* 0, or -errno (then s->error says so too). */
int spill_add(struct spill *s, const void *item);
/* Every item, in order; then empty again. 0, or -errno. */
int spill_each(struct spill *s, void (*cb)(const void *item, void *ctx), void *ctx);
void spill_free(struct spill *s);
/* A temporary file, gone once closed, in $TMPDIR (else /tmp; tmpfile()
 * looks at neither). NULL with errno. */
FILE *spill_tmpfile(void);
/* Where spill_tmpfile makes it, for messages. */
const char *spill_tmpdir(void);

#endif
