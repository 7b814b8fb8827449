// SPDX-License-Identifier: GPL-2.0-only
/*
 * inspect: each packet read as it comes: sequence flags and interning,
 * track descriptors, clocks and their snapshots, track events with their
 * timestamps, flows; events and declared slices kept (spilled past a
 * bound) for the checks of the whole.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/pb.h"
#include "offline/inspector.h"

void violation(struct inspector *in, const char *fmt, ...)
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

/* A BEGIN whose very next event on its track, in file order, is an END is a
 * declared slice (our writer emits every slice so): paired here, in file
 * order, checked for overlaps at the end. */
static void add_ev(struct inspector *in, struct ev e)
{
	uintptr_t begin = (uintptr_t)hm_del(&in->pending, e.track);

	if (begin && e.type == 2) {
		struct pair p = { e.track, begin - 1, e.ts };

		if (e.ts < begin - 1)
			violation(in, "track %llu: a slice ends before it begins", (unsigned long long)e.track);
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
		violation(in, "packet %u: %s iid %llu used but not interned on this sequence", in->packet, what,
			  (unsigned long long)iid);
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

void inspect_check_flow(uint64_t id, void *val, void *ctx)
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
			inspect_check_flow(id, u, in);
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

static void read_track_event(struct inspector *in, const uint8_t *p, size_t n, uint64_t ts, uint64_t flags,
			     uint64_t def_track)
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
		case 10:
			check_iid(in, 1, v, "event name");
			uses_iids = has_name = true;
			break;
		case 23: has_name = true; break;
		case 3:
			check_iid(in, 0, v, "category");
			uses_iids = true;
			break;
		case 4:
			sub = pb_reader_of(d, len);
			while (pb_next(&sub, &sf, &st, &v, &d, &len) > 0)
				if (sf == 1 && st == PB_VARINT) {
					check_iid(in, 2, v, "annotation name");
					uses_iids = true;
				}
			break;
		case 47:
		case 48:
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
		violation(in, "packet %u: uses interned data without SEQ_NEEDS_INCREMENTAL_STATE", in->packet);
	if (!track)
		track = def_track;
	if (!track) {
		violation(in, "packet %u: track event without a track (no track_uuid, no default)", in->packet);
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
		violation(in, "packet %u: track event of unknown type %llu", in->packet, (unsigned long long)type);
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
static bool packet_time(struct inspector *in, struct seq_state *q, uint32_t clock, uint64_t ts, uint64_t *boot)
{
	if (!clock)
		clock = q && q->def_clock ? q->def_clock : 6;
	if (clock < 64) {
		*boot = ts;
		return true;
	}
	if (!q || clock != q->own_clock || !q->anchored) {
		violation(in, "packet %u: timestamp on clock %u, which this sequence never anchored", in->packet,
			  clock);
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
			violation(in, "packet %u: sequence clock snapshot without BOOTTIME to anchor it", in->packet);
			return;
		}
		q->anchored = true;
		q->incremental = inc;
		q->own_value = q->anchor_own = own;
		q->anchor_boot = boot;
	}
}

void inspect_read_packet(struct inspector *in, const uint8_t *p, size_t n)
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
			violation(in, "packet %u: field %u of wire type %d where a message belongs", in->packet, f, t);
			continue;
		}
		switch (f) {
		case 8:
			ts = v;
			has_ts = true;
			break;
		case 58: clock_id = (uint32_t)v; break;
		case 59:
			defs = d;
			defs_len = len;
			break;
		case 10: seq = v; break;
		case 13: flags = v; break;
		case 11:
			te = d;
			te_len = len;
			break;
		case 12:
			idata = d;
			id_len = len;
			break;
		case 60:
			desc = d;
			desc_len = len;
			break;
		case 6:
			clock = d;
			clock_len = len;
			break;
		case 42:
			if (v)
				in->res->drop_marks++;
			break;
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
			violation(in, "packet %u: interned data before incremental state was cleared", in->packet);
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
