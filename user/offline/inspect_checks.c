// SPDX-License-Identifier: GPL-2.0-only
/*
 * inspect: the checks of the whole trace once it is read: per track in
 * time order every slice ends and every end closes one, slices and
 * counters on the right tracks, timestamps near the clock snapshots,
 * declared slices nest or are disjoint, flows have both ends.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "offline/inspector.h"

static int cmp_ev(const void *a, const void *b)
{
	const struct ev *x = a, *y = b;

	if (x->track != y->track)
		return x->track < y->track ? -1 : 1;
	if (x->ts != y->ts)
		return x->ts < y->ts ? -1 : 1;
	return x->seq < y->seq ? -1 : x->seq > y->seq; /* stable: file order */
}

static const char *track_name(struct inspector *in, uint64_t uuid)
{
	struct track *t = hm_get(&in->tracks, uuid);

	return t ? t->name : "?";
}

/* Per track, in time order (file order among equal times, as the viewer
 * sorts): every END closes an open slice, every slice ends; counters and
 * slices on the right kinds of track; timestamps near the clock snapshots. */
struct slice_walk {
	struct inspector *in;
	bool any;
	uint64_t track;
	struct track *tr;
	size_t depth;
};

static void end_track(struct slice_walk *w)
{
	if (w->any && w->depth)
		violation(w->in, "track %s: %zu slices never end", track_name(w->in, w->track), w->depth);
}

static void walk_event(const void *item, void *ctx)
{
	struct slice_walk *w = ctx;
	struct inspector *in = w->in;
	const struct ev *e = item;
	struct track *tr;

	if (!w->any || e->track != w->track) {
		end_track(w);
		*w = (struct slice_walk){ in, true, e->track, hm_get(&in->tracks, e->track), 0 };
		tr = w->tr;
		if (!tr || (!tr->name[0] && !tr->parent && !tr->counter))
			violation(in, "events on track %llu, which no descriptor describes",
				  (unsigned long long)e->track);
	}
	tr = w->tr;
	if (e->type == 4 && tr && !tr->counter)
		violation(in, "track %s: counter value on a track that is not a counter", tr->name);
	if ((e->type == 1 || e->type == 3) && tr && tr->counter)
		violation(in, "track %s: slice on a counter track", tr->name);
	if (in->min_clock && (e->ts + HOUR_NS < in->min_clock || e->ts > in->max_clock + HOUR_NS))
		violation(in, "track %s: timestamp %llu more than an hour outside the clock snapshots",
			  track_name(in, e->track), (unsigned long long)e->ts);
	if (e->type == 1) {
		w->depth++;
	} else if (e->type == 2) {
		if (!w->depth)
			violation(in, "track %s: slice end at %llu with no slice open", track_name(in, e->track),
				  (unsigned long long)e->ts);
		else
			w->depth--;
	}
}

static void check_slices(struct inspector *in)
{
	struct slice_walk w = { .in = in };

	if (spill_each(&in->evs, walk_event, &w))
		violation(in, "cannot sort the events: %s", strerror(in->evs.error));
	end_track(&w);
}

static int cmp_pair(const void *a, const void *b)
{
	const struct pair *x = a, *y = b;

	if (x->track != y->track)
		return x->track < y->track ? -1 : 1;
	if (x->b != y->b)
		return x->b < y->b ? -1 : 1;
	return x->e > y->e ? -1 : x->e < y->e; /* the outer one first */
}

/* Declared slices on a track must nest or be disjoint: a partial overlap is
 * what the viewer silently draws wrong, since an END closes whatever slice
 * is innermost. Walked sorted by track, start, outer first. */
struct overlap_walk {
	struct inspector *in;
	uint64_t track;
	uint64_t *ends; /* of the slices open around this one */
	size_t depth, cap;
};

static void walk_pair(const void *item, void *ctx)
{
	struct overlap_walk *w = ctx;
	const struct pair *p = item;

	if (p->track != w->track)
		w->depth = 0;
	w->track = p->track;
	while (w->depth && w->ends[w->depth - 1] <= p->b)
		w->depth--;
	if (w->depth && p->e > w->ends[w->depth - 1])
		violation(w->in, "track %s: slice [%llu, %llu] partly overlaps one ending at %llu",
			  track_name(w->in, p->track), (unsigned long long)p->b, (unsigned long long)p->e,
			  (unsigned long long)w->ends[w->depth - 1]);
	if (w->depth == w->cap) {
		size_t cap = w->cap ? w->cap * 2 : 64;
		uint64_t *grown = realloc(w->ends, cap * sizeof(*grown));

		if (!grown)
			return;
		w->ends = grown;
		w->cap = cap;
	}
	w->ends[w->depth++] = p->e;
}

static void check_overlaps(struct inspector *in)
{
	struct overlap_walk w = { .in = in };

	if (spill_each(&in->pairs, walk_pair, &w))
		violation(in, "cannot sort the slices: %s", strerror(in->pairs.error));
	free(w.ends);
}

static void free_seq(uint64_t key, void *val, void *ctx)
{
	struct seq_state *q = val;

	(void)key;
	(void)ctx;
	for (int i = 0; i < 3; i++)
		hm_free(&q->iids[i]);
	free(q);
}

void inspect_begin(struct inspector *in, struct inspect_result *res)
{
	*in = (struct inspector){ .res = res };
	spill_init(&in->evs, sizeof(struct ev), HELD_ITEMS, cmp_ev);
	spill_init(&in->pairs, sizeof(struct pair), HELD_ITEMS, cmp_pair);
}

int inspect_end(struct inspector *in, size_t bytes, bool cut)
{
	struct inspect_result *res = in->res;

	if (cut)
		violation(in, "the file ends inside packet %u (or is not a Perfetto trace)", in->packet + 1);
	else if (!res->packets)
		violation(in, "not a Perfetto trace: no packets (%zu bytes)", bytes);
	check_overlaps(in);
	check_slices(in);
	hm_each(&in->flows, inspect_check_flow, in);

	hm_each(&in->seqs, free_seq, NULL);
	hm_free(&in->seqs);
	hm_free_values(&in->tracks);
	hm_free_values(&in->flows);
	hm_free(&in->pending);
	spill_free(&in->evs);
	spill_free(&in->pairs);
	return res->violations ? -1 : 0;
}
