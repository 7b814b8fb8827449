/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * Reading a Chrome JSON trace for `merge`: a PyTorch profiler (kineto)
 * trace, or one this tool wrote. Says which it is and what its clock is,
 * and hands out its events decoded, times in exact nanoseconds.
 */
#ifndef SBT_CHROME_READ_H
#define SBT_CHROME_READ_H

#include <stdbool.h>
#include <stdint.h>

#include "base/json.h"
#include "events.h"

enum chrome_kind {
	CHROME_KINETO, /* ts: CLOCK_REALTIME in µs minus baseTimeNanoseconds */
	CHROME_OURS, /* ts: CLOCK_BOOTTIME in µs, clock snapshots in otherData */
};

#define CHROME_MAX_CLOCKS 2

struct chrome_trace {
	enum chrome_kind kind;
	char *text;
	size_t len;
	struct json_doc doc;
	const struct json_value *events; /* the traceEvents array */
	int64_t base_ns; /* kineto: baseTimeNanoseconds */
	struct sbt_meta_clock clocks[CHROME_MAX_CLOCKS]; /* ours: first and last */
	int nclocks;
};

/* An id of a pid or tid: kineto writes numbers, and strings for its own
 * pseudo-processes ("Spans", "CPU functions"). */
struct chrome_id {
	bool is_num;
	int64_t num;
	const char *str;
};

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

/* Reads and classifies the file. 0, or -1 with err (and nothing to close):
 * unreadable, not JSON, or a trace whose clock cannot be tied to anything
 * (say which, and why). */
int chrome_open(struct chrome_trace *t, const char *path, char *err, size_t errlen);
/* The same on text in memory (malloc'd: the trace takes it, and frees
 * it on chrome_close, or at once when this fails); path names it in errors. */
int chrome_parse(struct chrome_trace *t, char *text, size_t len, const char *path, char *err,
		 size_t errlen);
uint32_t chrome_count(const struct chrome_trace *t);
/* The i-th event. false when it is not an object (skipped). */
bool chrome_event(const struct chrome_trace *t, uint32_t i, struct chrome_event *e);
void chrome_close(struct chrome_trace *t);

#endif
