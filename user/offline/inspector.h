/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * inspect's own parts: the state of one check, the packets read into it
 * (inspect_packets.c), and the checks made once the whole trace is read
 * (inspect_checks.c). inspect.c frames the file and is the command.
 */
#ifndef SBT_INSPECTOR_H
#define SBT_INSPECTOR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/hashmap.h"
#include "base/spill.h"
#include "offline/inspect_result.h"

#define MAX_SHOWN 20
#define HOUR_NS 3600000000000ull

struct ev {
	uint64_t ts, track;
	uint32_t seq; /* order in the file */
	uint8_t type;
};

struct flow_use {
	uint64_t first_ts, last_origin_ts;
	uint32_t uses, origins, terms;
	uint64_t term_ts;
};

struct track {
	uint64_t uuid, parent;
	bool counter;
	char name[64];
};

/* What a sequence has set up: default clock and track, and its own clock
 * (ids 64-127) anchored to BOOTTIME by a snapshot, maybe incremental. */
struct seq_state {
	/* iids interned since the sequence last cleared its state, by
	 * InternedData field - 1: categories, event names, annotation names */
	struct hashmap iids[3];
	bool started, cleared;
	uint32_t def_clock;
	uint64_t def_track;
	uint32_t own_clock;
	bool incremental, anchored;
	uint64_t own_value, anchor_own, anchor_boot;
};

struct inspector {
	struct inspect_result *res;
	struct hashmap seqs; /* sequence id -> seq_state */
	struct seq_state *cur; /* the sequence of the packet being read */
	struct hashmap tracks, flows;
	/* every event, and every declared slice, sorted on the way out: on disk
	 * past a bound, so a trace of any length is checked in bounded memory */
	struct spill evs, pairs;
	struct hashmap pending; /* track -> 1 + time of its BEGIN, if its last event */
	uint64_t min_clock, max_clock;
	uint32_t packet;
};

struct pair {
	uint64_t track, b, e;
};

#define HELD_ITEMS (256u << 10) /* events (24 bytes) and slices held in memory */

#define HELD_ITEMS (256u << 10) /* events (24 bytes) and slices held in memory */

/* One violation: counted, the first MAX_SHOWN printed. */
__attribute__((format(printf, 2, 3))) void violation(struct inspector *in, const char *fmt, ...);
/* One packet of the trace, read and checked as it comes. */
void inspect_read_packet(struct inspector *in, const uint8_t *p, size_t n);
/* A flow's ends checked (a hashmap walk's callback: ctx the inspector). */
void inspect_check_flow(uint64_t id, void *val, void *ctx);
void inspect_begin(struct inspector *in, struct inspect_result *res);
/* The checks of the whole: slices, overlaps, flows still open. 0 when
 * the trace is valid, -1 on any violation; the inspector freed. */
int inspect_end(struct inspector *in, size_t bytes, bool cut);

#endif
