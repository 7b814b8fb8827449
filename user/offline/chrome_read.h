/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * Reading a Chrome JSON trace for `merge`: a PyTorch profiler (kineto)
 * trace, or one this tool wrote. Says which it is and what its clock is,
 * and hands out its events decoded, times in exact nanoseconds, one at a
 * time as it reads them.
 */
#ifndef SBT_CHROME_READ_H
#define SBT_CHROME_READ_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "base/json.h"
#include "events.h"

enum chrome_kind {
	CHROME_KINETO, /* ts: CLOCK_REALTIME in µs minus baseTimeNanoseconds */
	CHROME_OURS, /* ts: CLOCK_BOOTTIME in µs, clock snapshots in otherData */
};

#define CHROME_MAX_CLOCKS 2

/* The file is read as a stream, an event at a time, never whole: a trace
 * of gigabytes costs its longest event in memory. */
struct chrome_trace {
	enum chrome_kind kind;
	const char *path;
	FILE *f;
	char *mem; /* chrome_parse's text */
	uint64_t events_at; /* where the traceEvents array's first element may start */
	uint64_t nevents;
	int64_t base_ns; /* kineto: baseTimeNanoseconds */
	struct sbt_meta_clock clocks[CHROME_MAX_CLOCKS]; /* ours: first and last */
	int nclocks;
	char *other_text; /* otherData, kept (ours: process starts, namespaces) */
	struct json_doc other;
};

/* An id of a pid or tid: kineto writes numbers, and strings for its own
 * pseudo-processes ("Spans", "CPU functions"). */
struct chrome_id {
	bool is_num;
	int64_t num;
	const char *str;
};

/* One event; its strings and args live until the callback returns. */
struct chrome_event {
	char ph; /* X, B, E, i, I, C, M, s, t, f, ... */
	const char *name, *cat; /* "" when absent */
	struct chrome_id pid, tid;
	bool has_ts;
	int64_t ts_ns, dur_ns; /* the file's own clock, in ns */
	const struct json_value *args; /* NULL when absent */
	bool has_id;
	int64_t id; /* flows */
	bool bp_enclosing; /* f: bp "e" */
	char scope; /* instants: 'g', 'p' or 't' */
};

typedef void (*chrome_event_fn)(void *ctx, const struct chrome_event *e);

/* Reads the file through once, checking it is JSON, and classifies it;
 * each event (array elements that are objects, in order) goes to fn when
 * fn is not NULL. 0, or -1 with err (and nothing to close): unreadable,
 * not JSON, or a trace whose clock cannot be tied to anything (say which,
 * and why). */
int chrome_open(struct chrome_trace *t, const char *path, chrome_event_fn fn, void *ctx, char *err, size_t errlen);
/* The same on text in memory (the trace takes it, malloc'd, and frees it
 * on chrome_close, or at once when this fails); path names it in errors. */
int chrome_parse(struct chrome_trace *t, char *text, size_t len, const char *path, chrome_event_fn fn, void *ctx,
		 char *err, size_t errlen);
/* The events again, in order, to fn. 0, or -1 with err (the file changed
 * since it was opened). */
int chrome_each(struct chrome_trace *t, chrome_event_fn fn, void *ctx, char *err, size_t errlen);
/* otherData, or NULL. */
const struct json_value *chrome_other(const struct chrome_trace *t);
void chrome_close(struct chrome_trace *t);

#endif
