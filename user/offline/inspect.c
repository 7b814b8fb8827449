// SPDX-License-Identifier: GPL-2.0-only
/*
 * `spyre-bpftrace inspect TRACE`: decode a Perfetto TrackEvent trace (ours
 * or any other) and check what the viewer does not: framing, sequence flags
 * and interning, that every event's track is described, that every slice
 * ends, that slices on a track nest or are disjoint and never partly
 * overlap, that flows connect existing events, and that timestamps are
 * sane. Prints what it found; exits 1 on any violation.
 */
#include <argp.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/hashmap.h"
#include "base/log.h"
#include "base/pb.h"
#include "base/spill.h"
#include "commands.h"
#include "offline/inspect.h"

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

__attribute__((format(printf, 2, 3))) static void violation(struct inspector *in, const char *fmt,
							    ...)
{
	va_list ap;

	if (in->res->violations++ < MAX_SHOWN && in->res->out) {
		fprintf(in->res->out, "  VIOLATION: ");
		va_start(ap, fmt);
		vfprintf(in->res->out, fmt, ap);
		va_end(ap);
		fputc('\n', in->res->out);
	}
}

static struct track *track_of(struct inspector *in, uint64_t uuid, bool create)
{
	struct track *t = hm_get(&in->tracks, uuid);

	if (t || !create)
		return t;
	t = calloc(1, sizeof(*t));
	if (!t || hm_put(&in->tracks, uuid, t)) {
		free(t);
		return NULL;
	}
	t->uuid = uuid;
	return t;
}

struct pair {
	uint64_t track, b, e;
};

#define HELD_ITEMS (256u << 10) /* events (24 bytes) and slices held in memory */

/* A BEGIN whose very next event on its track, in file order, is an END is a
 * declared slice (our writer emits every slice so): paired here, in file
 * order, checked for overlaps at the end. */
static void add_ev(struct inspector *in, struct ev e)
{
	uintptr_t begin = (uintptr_t)hm_del(&in->pending, e.track);

	if (begin && e.type == 2) {
		struct pair p = { e.track, begin - 1, e.ts };

		if (e.ts < begin - 1)
			violation(in, "track %llu: a slice ends before it begins",
				  (unsigned long long)e.track);
		spill_add(&in->pairs, &p);
	}
	if (e.type == 1)
		hm_put(&in->pending, e.track, (void *)(uintptr_t)(e.ts + 1));
	spill_add(&in->evs, &e);
}

static void check_iid(struct inspector *in, int table, uint64_t iid, const char *what)
{
	if (!iid)
		violation(in, "packet %u: %s iid 0 (invalid)", in->packet, what);
	else if (!in->cur || !hm_get(&in->cur->iids[table], iid))
		violation(in, "packet %u: %s iid %llu used but not interned on this sequence", in->packet,
			  what, (unsigned long long)iid);
}

/* InternedData: remember every iid defined. */
static void read_interned(struct inspector *in, const uint8_t *p, size_t n)
{
	struct pb_reader r = pb_reader_of(p, n), e;
	const uint8_t *d;
	size_t len;
	uint64_t v;
	uint32_t f, ef;
	int t, et;

	while (pb_next(&r, &f, &t, &v, &d, &len) > 0) {
		uint64_t iid = 0;

		if (f < 1 || f > 3 || t != PB_LEN)
			continue;
		e = pb_reader_of(d, len);
		while (pb_next(&e, &ef, &et, &v, &d, &len) > 0)
			if (ef == 1 && et == PB_VARINT)
				iid = v;
		if (!iid)
			violation(in, "packet %u: interned entry with iid 0", in->packet);
		else if (!in->cur || hm_put(&in->cur->iids[f - 1], iid, (void *)1))
			violation(in, "out of memory");
	}
}

static void read_descriptor(struct inspector *in, const uint8_t *p, size_t n)
{
	struct pb_reader r = pb_reader_of(p, n), sub;
	uint64_t v, uuid = 0, parent = 0;
	const uint8_t *d, *name = NULL;
	size_t len, name_len = 0;
	bool counter = false;
	uint32_t f, sf;
	int t, st;

	while (pb_next(&r, &f, &t, &v, &d, &len) > 0) {
		if (f == 1 && t == PB_VARINT)
			uuid = v;
		else if (f == 5 && t == PB_VARINT)
			parent = v;
		else if (f == 2 && t == PB_LEN)
			name = d, name_len = len;
		else if (f == 8 && t == PB_LEN)
			counter = true;
		else if ((f == 3 || f == 4) && t == PB_LEN) { /* process / thread name */
			sub = pb_reader_of(d, len);
			while (pb_next(&sub, &sf, &st, &v, &d, &len) > 0)
				if (st == PB_LEN && ((f == 3 && sf == 6) || (f == 4 && sf == 5)))
					name = d, name_len = len;
		}
	}
	if (r.error)
		violation(in, "packet %u: malformed track descriptor", in->packet);
	if (!uuid) {
		violation(in, "packet %u: track descriptor without uuid", in->packet);
		return;
	}
	struct track *tr = track_of(in, uuid, true);

	if (!tr)
		return;
	if (!tr->name[0] && !tr->counter && !tr->parent)
		in->res->tracks++;
	tr->parent = parent;
	tr->counter |= counter;
	if (name)
		snprintf(tr->name, sizeof(tr->name), "%.*s", (int)(name_len < 63 ? name_len : 63), name);
	else if (!tr->name[0])
		snprintf(tr->name, sizeof(tr->name), "#%llu", (unsigned long long)uuid);
}

static void check_flow(uint64_t id, void *val, void *ctx)
{
	struct inspector *in = ctx;
	struct flow_use *u = val;

	if (u->uses < 2 && in->res->drop_marks)
		in->res->dangling_flows++; /* its other end was in lost records */
	else if (u->uses < 2)
		violation(in, "flow %llu has only one event", (unsigned long long)id);
	else if (u->terms && !u->origins)
		violation(in, "flow %llu ends but never starts", (unsigned long long)id);
	else if (u->terms && u->term_ts < u->first_ts)
		violation(in, "flow %llu ends before it starts", (unsigned long long)id);
}

static void use_flow(struct inspector *in, uint64_t id, uint64_t ts, bool term)
{
	struct flow_use *u = hm_get(&in->flows, id);

	if (!u) {
		u = calloc(1, sizeof(*u));
		if (!u || hm_put(&in->flows, id, u)) {
			free(u);
			return;
		}
		u->first_ts = ts;
		in->res->flows++;
	}
	u->uses++;
	if (term) {
		u->terms++;
		u->term_ts = ts;
		/* complete, and ended last: checked now and forgotten, so memory
		 * holds only the flows still open (an id is free again after its
		 * end, as in Perfetto) */
		if (u->origins && u->uses >= 2 && ts >= u->last_origin_ts) {
			check_flow(id, u, in);
			free(hm_del(&in->flows, id));
		}
	} else {
		u->origins++;
		if (ts > u->last_origin_ts)
			u->last_origin_ts = ts;
		if (ts < u->first_ts)
			u->first_ts = ts;
	}
}

static void read_track_event(struct inspector *in, const uint8_t *p, size_t n, uint64_t ts,
			     uint64_t flags, uint64_t def_track)
{
	struct pb_reader r = pb_reader_of(p, n), sub;
	uint64_t v, type = 0, track = 0;
	bool uses_iids = false, has_name = false;
	const uint8_t *d;
	size_t len;
	uint32_t f, sf;
	int t, st;

	while (pb_next(&r, &f, &t, &v, &d, &len) > 0) {
		switch (f) {
		case 9: type = v; break;
		case 11: track = v; break;
		case 10: check_iid(in, 1, v, "event name"); uses_iids = has_name = true; break;
		case 23: has_name = true; break;
		case 3: check_iid(in, 0, v, "category"); uses_iids = true; break;
		case 4:
			sub = pb_reader_of(d, len);
			while (pb_next(&sub, &sf, &st, &v, &d, &len) > 0)
				if (sf == 1 && st == PB_VARINT) {
					check_iid(in, 2, v, "annotation name");
					uses_iids = true;
				}
			break;
		case 47: case 48:
			if (t != PB_FIXED64 && t != PB_VARINT)
				violation(in, "packet %u: flow id of wire type %d", in->packet, t);
			else
				use_flow(in, v, ts, f == 48);
			break;
		}
	}
	if (r.error) {
		violation(in, "packet %u: malformed track event", in->packet);
		return;
	}
	if (uses_iids && !(flags & 2))
		violation(in, "packet %u: uses interned data without SEQ_NEEDS_INCREMENTAL_STATE",
			  in->packet);
	if (!track)
		track = def_track;
	if (!track) {
		violation(in, "packet %u: track event without a track (no track_uuid, no default)",
			  in->packet);
		return;
	}
	if (!ts)
		violation(in, "packet %u: track event without timestamp", in->packet);
	if ((type == 1 || type == 3) && !has_name)
		violation(in, "packet %u: slice or instant without a name", in->packet);
	switch (type) {
	case 1: in->res->slices++; break;
	case 3: in->res->instants++; break;
	case 4: in->res->counters++; break;
	case 2: break;
	default:
		violation(in, "packet %u: track event of unknown type %llu", in->packet,
			  (unsigned long long)type);
		return;
	}
	add_ev(in, (struct ev){ ts, track, in->packet, (uint8_t)type });
}

static struct seq_state *seq_of(struct inspector *in, uint64_t id)
{
	struct seq_state *q = hm_get(&in->seqs, id);

	if (!q) {
		q = calloc(1, sizeof(*q));
		if (!q || hm_put(&in->seqs, id, q)) {
			free(q);
			return NULL;
		}
	}
	return q;
}

static void read_defaults(struct seq_state *q, const uint8_t *p, size_t n)
{
	struct pb_reader r = pb_reader_of(p, n), sub;
	const uint8_t *d;
	size_t len;
	uint64_t v;
	uint32_t f, sf;
	int t, st;

	while (pb_next(&r, &f, &t, &v, &d, &len) > 0) {
		if (f == 58 && t == PB_VARINT)
			q->def_clock = (uint32_t)v;
		else if (f == 11 && t == PB_LEN) {
			sub = pb_reader_of(d, len);
			while (pb_next(&sub, &sf, &st, &v, &d, &len) > 0)
				if (sf == 11 && st == PB_VARINT)
					q->def_track = v;
		}
	}
}

/* The packet's time on BOOTTIME: its clock is its own field 58, else the
 * sequence default, else BOOTTIME; a sequence clock goes through its anchor. */
static bool packet_time(struct inspector *in, struct seq_state *q, uint32_t clock, uint64_t ts,
			uint64_t *boot)
{
	if (!clock)
		clock = q && q->def_clock ? q->def_clock : 6;
	if (clock < 64) {
		*boot = ts;
		return true;
	}
	if (!q || clock != q->own_clock || !q->anchored) {
		violation(in, "packet %u: timestamp on clock %u, which this sequence never anchored",
			  in->packet, clock);
		return false;
	}
	if (q->incremental) {
		q->own_value += ts;
		ts = q->own_value;
	}
	*boot = q->anchor_boot + (ts - q->anchor_own);
	return true;
}

static void read_clock(struct inspector *in, struct seq_state *q, const uint8_t *p, size_t n)
{
	struct pb_reader r = pb_reader_of(p, n), c;
	const uint8_t *d;
	size_t len;
	uint64_t v;
	uint32_t f, cf;
	int t, ct;

	uint64_t own = 0, boot = 0;
	bool has_own = false, has_boot = false, inc = false;

	in->res->clock_snapshots++;
	while (pb_next(&r, &f, &t, &v, &d, &len) > 0) {
		uint64_t id = 0, ts = 0;
		bool is_inc = false;

		if (f != 1 || t != PB_LEN)
			continue;
		c = pb_reader_of(d, len);
		while (pb_next(&c, &cf, &ct, &v, &d, &len) > 0) {
			if (cf == 1)
				id = v;
			else if (cf == 2)
				ts = v;
			else if (cf == 3)
				is_inc = v != 0;
		}
		if (id == 6 && ts) { /* BOOTTIME, the clock of our events */
			boot = ts;
			has_boot = true;
			if (!in->min_clock || ts < in->min_clock)
				in->min_clock = ts;
			if (ts > in->max_clock)
				in->max_clock = ts;
		} else if (id >= 64 && id < 128 && q) {
			q->own_clock = (uint32_t)id;
			own = ts;
			inc = is_inc;
			has_own = true;
		}
	}
	if (has_own) {
		if (!has_boot) {
			violation(in, "packet %u: sequence clock snapshot without BOOTTIME to anchor it",
				  in->packet);
			return;
		}
		q->anchored = true;
		q->incremental = inc;
		q->own_value = q->anchor_own = own;
		q->anchor_boot = boot;
	}
}

static void read_packet(struct inspector *in, const uint8_t *p, size_t n)
{
	struct pb_reader r = pb_reader_of(p, n);
	const uint8_t *d = NULL, *te = NULL, *idata = NULL, *desc = NULL, *clock = NULL, *defs = NULL;
	size_t len = 0, te_len = 0, id_len = 0, desc_len = 0, clock_len = 0, defs_len = 0;
	uint64_t v, ts = 0, flags = 0, seq = 0, boot = 0;
	uint32_t f, clock_id = 0;
	bool has_ts = false;
	struct seq_state *q;
	int t;

	while (pb_next(&r, &f, &t, &v, &d, &len) > 0) {
		/* d and len are the field's only if it has a length: a varint
		 * where a message belongs is no message (fuzzing found a stale
		 * pointer read as one) */
		if (t != PB_LEN && (f == 59 || f == 11 || f == 12 || f == 60 || f == 6)) {
			violation(in, "packet %u: field %u of wire type %d where a message belongs",
				  in->packet, f, t);
			continue;
		}
		switch (f) {
		case 8: ts = v; has_ts = true; break;
		case 58: clock_id = (uint32_t)v; break;
		case 59: defs = d; defs_len = len; break;
		case 10: seq = v; break;
		case 13: flags = v; break;
		case 11: te = d; te_len = len; break;
		case 12: idata = d; id_len = len; break;
		case 60: desc = d; desc_len = len; break;
		case 6: clock = d; clock_len = len; break;
		case 42: if (v) in->res->drop_marks++; break;
		}
	}
	if (r.error) {
		violation(in, "packet %u: malformed", in->packet);
		return;
	}
	q = in->cur = seq_of(in, seq);
	if (!q) {
		violation(in, "out of memory");
		return;
	}
	if (flags & 1) { /* incremental state cleared: forget interning, defaults, clock */
		for (int i = 0; i < 3; i++)
			hm_free(&q->iids[i]);
		*q = (struct seq_state){ .started = q->started, .cleared = true };
	}
	if (defs && q)
		read_defaults(q, defs, defs_len);
	if (seq && !q->started) {
		q->started = true;
		if (!(flags & 1) && (te || idata))
			violation(in, "packet %u: first packet of the sequence does not clear incremental state",
				  in->packet);
	}
	if (idata) {
		if (!q->cleared)
			violation(in, "packet %u: interned data before incremental state was cleared",
				  in->packet);
		read_interned(in, idata, id_len);
	}
	if (desc)
		read_descriptor(in, desc, desc_len);
	if (clock) {
		read_clock(in, q, clock, clock_len);
		return; /* as the trace processor: a snapshot packet carries nothing else */
	}
	if (te && has_ts && packet_time(in, q, clock_id, ts, &boot))
		read_track_event(in, te, te_len, boot, flags, q ? q->def_track : 0);
	else if (te && !has_ts)
		violation(in, "packet %u: track event without timestamp", in->packet);
}

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
			violation(in, "track %s: slice end at %llu with no slice open",
				  track_name(in, e->track), (unsigned long long)e->ts);
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
			  track_name(w->in, p->track), (unsigned long long)p->b,
			  (unsigned long long)p->e, (unsigned long long)w->ends[w->depth - 1]);
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

static void inspect_begin(struct inspector *in, struct inspect_result *res)
{
	*in = (struct inspector){ .res = res };
	spill_init(&in->evs, sizeof(struct ev), HELD_ITEMS, cmp_ev);
	spill_init(&in->pairs, sizeof(struct pair), HELD_ITEMS, cmp_pair);
}

static int inspect_end(struct inspector *in, size_t bytes, bool cut)
{
	struct inspect_result *res = in->res;

	if (cut)
		violation(in, "the file ends inside packet %u (or is not a Perfetto trace)", in->packet + 1);
	else if (!res->packets)
		violation(in, "not a Perfetto trace: no packets (%zu bytes)", bytes);
	check_overlaps(in);
	check_slices(in);
	hm_each(&in->flows, check_flow, in);

	hm_each(&in->seqs, free_seq, NULL);
	hm_free(&in->seqs);
	hm_free_values(&in->tracks);
	hm_free_values(&in->flows);
	hm_free(&in->pending);
	spill_free(&in->evs);
	spill_free(&in->pairs);
	return res->violations ? -1 : 0;
}

/* One top-level field of the file: a packet, or the end of the checks. */
static bool top_field(struct inspector *in, uint32_t f, int t, const uint8_t *d, size_t len,
		      size_t at)
{
	in->packet++;
	if (f != 1 || t != PB_LEN) {
		violation(in, "at byte %zu: field %u of wire type %d where a packet belongs", at, f, t);
		return false;
	}
	in->res->packets++;
	read_packet(in, d, len);
	return true;
}

int inspect_buffer(const uint8_t *data, size_t len, struct inspect_result *res)
{
	struct inspector in;
	struct pb_reader r = pb_reader_of(data, len);
	const uint8_t *d;
	size_t plen;
	uint64_t v;
	uint32_t f;
	int t, ret;

	inspect_begin(&in, res);
	while ((ret = pb_next(&r, &f, &t, &v, &d, &plen)) > 0)
		if (!top_field(&in, f, t, d, plen, (size_t)(r.p - data)))
			break;
	return inspect_end(&in, len, ret < 0);
}

#define MAX_PACKET (64u << 20)

/* The framing of a top-level field at p (n bytes there): 1 when it is all
 * there (hdr: the bytes of its key and length; a field without a length is
 * 1 with len 0, for the caller to reject), 0 when more bytes are needed,
 * -1 when it is no protobuf field at all. */
static int top_frame(const uint8_t *p, size_t n, uint32_t *f, int *t, size_t *hdr, uint64_t *len)
{
	uint64_t v[2] = { 0, 0 };
	size_t i = 0;

	*hdr = 0;
	*len = 0;
	for (int k = 0; k < 2; k++) {
		for (int shift = 0;; shift += 7) {
			if (shift > 63)
				return -1;
			if (i == n)
				return 0;
			v[k] |= (uint64_t)(p[i] & 0x7f) << shift;
			if (!(p[i++] & 0x80))
				break;
		}
		if (k == 0) {
			if ((v[0] >> 3) == 0 || (v[0] >> 3) > 0x1fffffff)
				return -1;
			*f = (uint32_t)(v[0] >> 3);
			*t = (int)(v[0] & 7);
			if (*t != PB_LEN) {
				*hdr = i;
				*len = 0;
				return 1;
			}
		}
	}
	*hdr = i;
	*len = v[1];
	return v[1] <= n - i ? 1 : 0; /* 0 with hdr and len set: the body is to come */
}

/* The file read through a window, packet by packet: memory stays bounded
 * whatever its length, and a file cut while read just ends. */
int inspect_fd(int fd, struct inspect_result *res)
{
	size_t cap = 1u << 20, len = 0, off = 0, total = 0;
	uint8_t *buf = malloc(cap);
	struct inspector in;
	bool eof = false, cut = false;

	inspect_begin(&in, res);
	if (!buf) {
		violation(&in, "out of memory");
		return inspect_end(&in, 0, false);
	}
	for (;;) {
		uint32_t f;
		int t, got;
		size_t hdr, need;
		uint64_t plen;

		got = top_frame(buf + off, len - off, &f, &t, &hdr, &plen);
		if (got < 0) {
			violation(&in, "at byte %zu: no packet field (or not a Perfetto trace)", total + off);
			break;
		}
		if (got > 0) { /* a whole field in the window */
			if (!top_field(&in, f, t, buf + off + hdr, (size_t)plen, total + off))
				break;
			off += hdr + (size_t)plen;
			continue;
		}
		if (hdr && plen > MAX_PACKET) {
			violation(&in, "at byte %zu: a packet of %llu bytes (more than %u MiB)",
				  total + off, (unsigned long long)plen, MAX_PACKET >> 20);
			break;
		}
		if (eof) {
			cut = off < len;
			break;
		}
		/* read more: what is left to the front, then the rest of the window,
		 * grown when one packet is larger than it */
		need = len - off;
		memmove(buf, buf + off, need);
		total += off;
		len = need;
		off = 0;
		if (len == cap) {
			uint8_t *grown = cap < MAX_PACKET ? realloc(buf, cap * 2) : NULL;

			if (!grown) {
				violation(&in, "a packet larger than %u MiB", MAX_PACKET >> 20);
				break;
			}
			buf = grown;
			cap *= 2;
		}
		while (len < cap) {
			ssize_t n = read(fd, buf + len, cap - len);

			if (n < 0 && errno == EINTR)
				continue;
			if (n <= 0) {
				eof = true;
				break;
			}
			len += (size_t)n;
		}
	}
	free(buf);
	return inspect_end(&in, total + len, cut);
}

static const char inspect_doc[] =
	"Check a Perfetto trace: framing, sequence flags and interning, track descriptors, "
	"that every slice ends, that slices nest and never partly overlap, flows, timestamps.\n"
	"\n"
	"EXAMPLES:\n"
	"  spyre-bpftrace inspect run.pftrace";

static error_t inspect_parse(int key, char *arg, struct argp_state *state)
{
	const char **file = state->input;

	if (key == ARGP_KEY_ARG) {
		if (*file)
			argp_error(state, "one trace at a time");
		*file = arg;
	} else if (key == ARGP_KEY_END && !*file) {
		argp_error(state, "no trace; hint: spyre-bpftrace inspect FILE.pftrace");
	} else {
		return ARGP_ERR_UNKNOWN;
	}
	return 0;
}

int cmd_inspect(int argc, char **argv)
{
	static const struct argp_option none[] = { { 0 } };
	static const struct argp argp = { none, inspect_parse, "TRACE", inspect_doc, NULL, NULL, NULL };
	struct inspect_result res = { .out = stdout };
	const char *file = NULL;
	struct stat st;
	int fd;

	argp_parse(&argp, argc, argv, 0, NULL, &file);
	fd = open(file, O_RDONLY | O_CLOEXEC);
	if (fd < 0 || fstat(fd, &st)) {
		sbt_err("cannot read '%s': %s", file, strerror(errno));
		return 1;
	}
	printf("%s:\n", file);
	/* read, not mapped: a file cut while read ends short instead of killing
	 * us with SIGBUS; /proc files (size 0) and devices read too */
	inspect_fd(fd, &res);
	close(fd);
	if (res.violations > MAX_SHOWN)
		printf("  ... and %llu more violations\n",
		       (unsigned long long)(res.violations - MAX_SHOWN));
	printf("  %llu packets, %llu tracks, %llu slices, %llu instants, %llu counter values, "
	       "%llu flows, %llu clock snapshots, %llu lost-data marks\n",
	       (unsigned long long)res.packets, (unsigned long long)res.tracks,
	       (unsigned long long)res.slices, (unsigned long long)res.instants,
	       (unsigned long long)res.counters, (unsigned long long)res.flows,
	       (unsigned long long)res.clock_snapshots, (unsigned long long)res.drop_marks);
	if (res.dangling_flows)
		printf("  note: %llu flows have one end; the trace marks lost data, which explains them\n",
		       (unsigned long long)res.dangling_flows);
	if (res.violations)
		printf("  FAILED: %llu violations\n", (unsigned long long)res.violations);
	else
		printf("  ok: framing, sequence flags and interning, tracks, slice nesting, flows, "
		       "timestamps\n");
	return res.violations ? 1 : 0;
}
