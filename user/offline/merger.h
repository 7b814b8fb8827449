/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * merge's own parts: what reads its inputs into one store (merge_import.c),
 * what lays the store out and links it (merge_layout.c), and the command
 * (merge.c). See merge.c for the rules.
 */
#ifndef SBT_MERGER_H
#define SBT_MERGER_H

#include <errno.h>
#include <stdbool.h>
#include <stdint.h>

#include "base/hashmap.h"
#include "offline/chrome_read.h"
#include "offline/tracestore.h"

#define MAX_INPUTS 64
#define HOST_PID_SHIFT 22 /* above Linux's PID_MAX_LIMIT: another host's pids */
#define OP_DEPTH 128 /* imported slices' depths start here: their own sequences */
#define MAX_OVERFLOW 8
#define FROM_TORCH 255

/* A process a capture saw fork: the op its parent was in gets an arrow to
 * its first runtime call. */
struct fork_rec {
	uint32_t child, parent; /* store pids */
	uint64_t ts;
};

struct nsmap {
	uint32_t ns_tgid, ns_tid, tgid, tid; /* store ids */
};

struct host {
	const char *path;
	char name[64];
	int64_t offset; /* REALTIME - BOOTTIME at the first snapshot */
	int64_t drift; /* how far that moved by the last snapshot */
	uint64_t spread;
	bool has_clock;
	uint32_t pid_add; /* added to its pids and tids */
	int rank_add; /* added to its device ranks */
	uint64_t flow_add; /* added to its job flow ids */
};

struct merger {
	struct trace_store st;
	struct host hosts[MAX_INPUTS];
	int nhosts;
	struct hashmap track_of; /* (host << 56 | input track id) -> store index + 1 */
	struct hashmap thread_of; /* (pid << 32 | tid) -> store index + 1, host-made pids */
	struct hashmap process_of; /* pid -> store index + 1 */
	struct fork_rec *forks;
	size_t nforks, forks_cap;
	struct nsmap *ns;
	size_t nns, ns_cap;
	int cur; /* the host being read */
	int64_t shift; /* added to its times */
	uint32_t nimported; /* imported thread tracks, for their kineto ids */
	/* what the summary says */
	uint64_t ops, calls, calls_linked, spawns_linked, overflowed, flows_paired;
	bool damaged; /* an input could not be read whole: the exit status says so */
	int max_overflow;
};

struct merger;

/* What an imported trace names (its M events) and which of its pids hold
 * host work: gathered as it is first read, before its events are. */
struct chrome_names {
	struct hashmap proc; /* pid key -> name (in the store) */
	struct hashmap thread; /* (pid, tid) key -> name */
	struct hashmap device_pid; /* pid key -> 1: only device work on it (kineto) */
	struct hashmap cpu_pid; /* pid key -> 1: host work on it */
};

/* A Chrome JSON input: the trace and its names. */
struct chrome_input {
	struct chrome_trace t;
	struct chrome_names names;
	struct merger *m; /* whose store keeps the names */
};

/* A flow end of the imported trace, bound to its slice once all are placed. */
struct flow_end {
	uint64_t id; /* with its kind */
	uint32_t track;
	uint64_t ts;
	bool start, enclosing;
	uint8_t from; /* the input it came from: bound to that input's slices */
	uint32_t ev; /* the slice, once bound; UINT32_MAX if none */
};

struct flows {
	struct flow_end *v;
	size_t n, cap;
};

/* Clock arithmetic on offsets a crafted input may make anything: wraps,
 * as the unsigned timestamps it ends in do, instead of overflowing. */
static inline int64_t wrap_add(int64_t a, int64_t b)
{
	return (int64_t)((uint64_t)a + (uint64_t)b);
}

static inline int64_t wrap_sub(int64_t a, int64_t b)
{
	return (int64_t)((uint64_t)a - (uint64_t)b);
}

static inline uint64_t key2(uint32_t a, uint32_t b)
{
	return (uint64_t)a << 32 | b;
}

static inline uint32_t lookup(const struct hashmap *m, uint64_t key)
{
	return (uint32_t)(uintptr_t)hm_get(m, key); /* index + 1, 0 = none */
}

static inline void remember(struct merger *m, struct hashmap *map, uint64_t key, uint32_t idx)
{
	if (hm_put(map, key, (void *)(uintptr_t)(idx + 1)))
		m->st.error = ENOMEM;
}

/* merge_import.c */
/* A track of the store, made for an imported one. Its index. */
uint32_t merge_make_track(struct merger *m, enum model_track_kind kind, uint32_t parent, uint32_t pid, uint32_t tid,
			  const char *name, int rank);
/* A capture's host name and first clock, from a first look. 0, or -1. */
int merge_peek_capture(struct host *h, const char *path);
/* A capture, through the correlator, into the store (host m->cur); a
 * damaged one as far as it reads, m->damaged set. 0, or -1 (no memory). */
int merge_read_capture(struct merger *m, const char *path);
void merge_note_clock(struct merger *m, struct host *h, const struct sbt_meta_clock *c);
/* Our Chrome JSON's process starts and namespace ids. */
void merge_note_our_facts(struct merger *m, const struct chrome_trace *t);
/* chrome_open's callback for an input (ctx): its names. */
void merge_gather_names(void *ctx, const struct chrome_event *e);
void merge_input_free(struct chrome_input *in);
/* A Chrome JSON trace's events, read again in its order, times moved by
 * ts_add; its flow ends into fl, bound later. 0, or -1 (said). */
int merge_import_chrome(struct merger *m, struct chrome_input *in, int64_t ts_add, uint8_t from, struct flows *fl);

/* merge_layout.c */
/* Each thread with imported ops: ops nested around the calls, those that
 * would partly overlap on overflow tracks; each call linked to the
 * innermost op around it. */
void merge_lay_out(struct merger *m, uint64_t *next_flow);
/* A started process's first call linked to the op its parent was in. */
void merge_link_spawns(struct merger *m, uint64_t *next_flow);
/* Each imported flow end to its slice, then starts and ends paired. */
void merge_bind_flows(struct merger *m, struct flows *fl);
void merge_pair_flows(struct merger *m, struct flows *fl);

#endif
