/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * The host/device model the correlation engine builds, as a stream of
 * tracks and events handed to sinks (Perfetto, Chrome JSON, the report).
 *
 * Slices are complete when handed over (start and duration known), so a
 * sink never holds open state for them. A track is announced to the sinks
 * before the first event on it, and again when its name changes.
 *
 * Event, category and argument names are strings that stay unchanged for
 * the whole trace: a sink may key on their address (Perfetto's interning).
 */
#ifndef SBT_MODEL_H
#define SBT_MODEL_H

#include <stdbool.h>
#include <stdint.h>

#include "events.h"

enum model_track_kind {
	TRACK_PROCESS, /* pid */
	TRACK_THREAD, /* pid, tid */
	TRACK_DEVICE, /* a card; parent of its engine lanes and counters */
	TRACK_LANE, /* one lane of one engine of a device */
	TRACK_COUNTER, /* a counter; parent is a device or a process track */
	TRACK_GLOBAL, /* the tracer's own marks (lost records) */
	TRACK_GROUP, /* lanes of something not a card: an imported trace's pseudo-process */
};

enum model_unit { UNIT_NONE = 0, UNIT_TIME_NS = 1, UNIT_COUNT = 2, UNIT_BYTES = 3 };

enum model_engine { ENGINE_H2D = 0, ENGINE_COMPUTE = 1, ENGINE_D2H = 2, ENGINE_MAX };

struct model_track {
	uint64_t id; /* small, unique in the trace, never 0 */
	uint64_t parent; /* 0 = none */
	enum model_track_kind kind;
	uint32_t pid, tid;
	const char *name;
	int rank; /* order among siblings */
	enum model_unit unit; /* counters */
	int engine; /* lanes: enum model_engine; else -1 */
	int lane;
	bool announced; /* the engine's own: handed to the sinks already */
};

enum model_arg_type { ARG_UINT, ARG_INT, ARG_STR, ARG_HEX };

struct model_arg {
	const char *name;
	enum model_arg_type type;
	/* ARG_STR: s stays unchanged at its address for the whole trace, as
	 * names do (a literal, a function's name): a sink may key on it */
	bool fixed;
	union {
		uint64_t u;
		int64_t i;
		const char *s;
	};
};

enum model_event_kind { EV_SLICE, EV_INSTANT, EV_COUNTER };

#define MODEL_MAX_ARGS 10
#define MODEL_MAX_FLOWS 8

struct model_event {
	enum model_event_kind kind;
	const struct model_track *track;
	uint64_t ts, dur;
	const char *name, *cat;
	struct model_arg args[MODEL_MAX_ARGS];
	int nargs;
	uint64_t flows[MODEL_MAX_FLOWS]; /* start or pass through these flows */
	int nflows;
	uint64_t term_flows[MODEL_MAX_FLOWS]; /* end these flows */
	int nterm;
	/* more of both, beyond the arrays (merge's links: an op may lead to
	 * any number of calls); NULL when none */
	const uint64_t *xflows, *xterm;
	int nxflows, nxterm;
	int64_t value; /* counters */
	/* Slices at one depth of one track never overlap and end in order of
	 * their start: writers may use it to keep packets in time order. */
	uint8_t depth;
};

#define MODEL_DEPTH_INSTANTS 255

/*
 * A flow id's kind is in its top byte. Kind 0 is the correlator's job flow
 * (launch -> job -> the wait or interrupt that ended it), the others are
 * plain arrows from one slice to another: sinks that name flows (Chrome
 * JSON) take the category from the kind.
 */
#define MODEL_FLOW_KIND_SHIFT 56
enum model_flow_kind {
	FLOW_JOB = 0,
	FLOW_OP_CALL = 1, /* merge: a PyTorch op -> a runtime call inside it */
	FLOW_SPAWN = 2, /* merge: the op that started a process -> its first call */
	FLOW_AC2G = 3, /* an imported trace's launch -> kernel arrow */
	FLOW_FWDBWD = 4, /* an imported trace's forward -> backward arrow */
	FLOW_OTHER = 5, /* an imported trace's other arrows */
};
#define MODEL_FLOW_ID(kind, n)                                                                                         \
	((uint64_t)(kind) << MODEL_FLOW_KIND_SHIFT | ((n) & ((1ull << MODEL_FLOW_KIND_SHIFT) - 1)))
#define MODEL_FLOW_KIND(id) ((int)((id) >> MODEL_FLOW_KIND_SHIFT)) /* instants of a track, apart from its slices */

/* What lets another trace be joined to this one (`merge`): a process that
 * started (its parent, when), or a thread's ids in its own pid namespace. */
struct model_task_ids {
	uint64_t ts;
	uint32_t pid, tid; /* as the tracer saw them */
	uint32_t ppid; /* a new process: its parent; else 0 */
	uint32_t ns_pid, ns_tid; /* in its pid namespace; 0 when that is the tracer's */
};

struct model_sink {
	void *ctx;
	void (*track)(void *ctx, const struct model_track *t);
	void (*event)(void *ctx, const struct model_event *e);
	/* optional (NULL): clock snapshots, and records lost just before ts */
	void (*clock)(void *ctx, const struct sbt_meta_clock *c);
	void (*lost)(void *ctx, uint64_t ts, uint64_t count);
	/* optional (NULL): process starts and namespace ids */
	void (*task)(void *ctx, const struct model_task_ids *t);
	/* a sink that writes a file (NULL for others): what it holds written
	 * and flushed (0 or -errno); the bytes so far; the file finished,
	 * closed and the sink freed (0 or -errno, the first error). */
	int (*flush)(void *ctx);
	uint64_t (*bytes)(const void *ctx);
	int (*close)(void *ctx);
};

#endif
