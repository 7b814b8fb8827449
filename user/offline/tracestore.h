/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * The model (model.h) held in memory: what `merge` gathers from several
 * traces before it can link them (an op and the calls inside it come from
 * different files) and hand the whole to the writers. Events keep the
 * order they were added in, per input, so a sink that relies on the
 * correlator's order (Chrome JSON's job flows) sees it unchanged.
 */
#ifndef SBT_TRACESTORE_H
#define SBT_TRACESTORE_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "base/hashmap.h"
#include "base/strtab.h"
#include "model/model.h"

#define STORE_NO_EXT_ID INT64_MIN

struct store_event {
	uint64_t ts, dur;
	int64_t value;
	int64_t ext_id; /* merge: the External id of the op around it, or STORE_NO_EXT_ID */
	int64_t own_ext; /* its own "External id" arg (an op's), or STORE_NO_EXT_ID */
	uint32_t name, cat; /* ids in the store's strings (store_text), 0 for none */
	uint32_t track; /* index into tracks */
	uint32_t flows; /* first of its flows (then terms) in the pool */
	uint8_t kind, depth, nargs, nflows, nterm;
	uint8_t from; /* which input */
};

struct store_link {
	uint32_t from, to; /* event indexes */
	uint64_t id; /* flow id */
};

/* Events stay in memory, a fixed few bytes each; their args, the bulk of
 * an imported trace, go to a temporary file in event order, and are read
 * back in that order as the events are replayed. */
struct trace_store {
	struct model_track *tracks; /* ids are index + 1; names interned */
	size_t ntracks, tracks_cap;
	struct store_event *ev;
	size_t nev, ev_cap;
	FILE *args; /* each event's args, one after another */
	uint64_t *flows;
	size_t nflows, flows_cap;
	struct store_link *links; /* arrows merge adds: any number per event */
	size_t nlinks, links_cap;
	struct sbt_meta_clock clocks[2]; /* the first and the last snapshot, of input 0 */
	int nclocks;
	struct strtab strs;
	int error; /* errno once anything could not be kept (ENOMEM, or the file's) */
};

void store_init(struct trace_store *s);
void store_free(struct trace_store *s);
/* A string kept as long as the store: the same address for the same text. */
const char *store_str(struct trace_store *s, const char *text);
/* A string's id in the store (0 for NULL), and the id's text. */
uint32_t store_str_id(struct trace_store *s, const char *text);
static inline const char *store_text(const struct trace_store *s, uint32_t id)
{
	return id ? strtab_str(&s->strs, id) : NULL;
}
/* A new track like t (its id, parent as given: store ids). Returns its index. */
uint32_t store_track(struct trace_store *s, const struct model_track *t);
static inline struct model_track *store_track_at(struct trace_store *s, uint32_t i)
{
	return &s->tracks[i];
}
/* Adds e on track index `track`, strings interned, args written out and
 * flows copied. */
void store_event(struct trace_store *s, uint32_t track, const struct model_event *e, uint8_t from);
void store_link(struct trace_store *s, uint32_t from, uint32_t to, uint64_t id);
/* Every track (announced in index order, a parent before its children)
 * and event, with the links as flows, to the sinks. Once: the args are
 * read through. */
void store_replay(struct trace_store *s, const struct model_sink *sinks, int nsinks);

#endif
