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
	struct pb_field f, ef;

	PB_EACH(r, f)
	{
		uint64_t iid = 0;

		if (f.num < 1 || f.num > 3 || f.type != PB_LEN)
			continue;
		e = pb_sub(&f);
		PB_EACH(e, ef)
		if (pb_is(&ef, 1, PB_VARINT))
			iid = ef.v;
		if (!iid)
			violation(in, "packet %u: interned entry with iid 0", in->packet);
		else if (!in->cur || hm_put(&in->cur->iids[f.num - 1], iid, (void *)1))
			violation(in, "out of memory");
	}
}

static void read_descriptor(struct inspector *in, const uint8_t *p, size_t n)
{
	struct pb_reader r = pb_reader_of(p, n), sub;
	uint64_t uuid = 0, parent = 0;
	const uint8_t *name = NULL;
	size_t name_len = 0;
	bool counter = false;
	struct pb_field f, sf;

	PB_EACH(r, f)
	{
		if (pb_is(&f, 1, PB_VARINT))
			uuid = f.v;
		else if (pb_is(&f, 5, PB_VARINT))
			parent = f.v;
		else if (pb_is(&f, 2, PB_LEN))
			name = f.d, name_len = f.len;
		else if (pb_is(&f, 8, PB_LEN))
			counter = true;
		else if (pb_is(&f, 3, PB_LEN) || pb_is(&f, 4, PB_LEN)) { /* process / thread name */
			sub = pb_sub(&f);
			PB_EACH(sub, sf)
			if (pb_is(&sf, f.num == 3 ? 6 : 5, PB_LEN))
				name = sf.d, name_len = sf.len;
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
	uint64_t type = 0, track = 0;
	bool uses_iids = false, has_name = false;
	struct pb_field f, sf;

	PB_EACH(r, f)
	{
		switch (f.num) {
		case 9: type = f.v; break;
		case 11: track = f.v; break;
		case 10:
			check_iid(in, 1, f.v, "event name");
			uses_iids = has_name = true;
			break;
		case 23: has_name = true; break;
		case 3:
			check_iid(in, 0, f.v, "category");
			uses_iids = true;
			break;
		case 4:
			sub = pb_sub(&f);
			PB_EACH(sub, sf)
			if (pb_is(&sf, 1, PB_VARINT)) {
				check_iid(in, 2, sf.v, "annotation name");
				uses_iids = true;
			}
			break;
		case 47:
		case 48:
			if (f.type != PB_FIXED64 && f.type != PB_VARINT)
				violation(in, "packet %u: flow id of wire type %d", in->packet, f.type);
			else
				use_flow(in, f.v, ts, f.num == 48);
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
	struct pb_field f, sf;

	PB_EACH(r, f)
	{
		if (pb_is(&f, 58, PB_VARINT))
			q->def_clock = (uint32_t)f.v;
		else if (pb_is(&f, 11, PB_LEN)) {
			sub = pb_sub(&f);
			PB_EACH(sub, sf)
			if (pb_is(&sf, 11, PB_VARINT))
				q->def_track = sf.v;
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
	struct pb_field f, cf;
	uint64_t own = 0, boot = 0;
	bool has_own = false, has_boot = false, inc = false;

	in->res->clock_snapshots++;
	PB_EACH(r, f)
	{
		uint64_t id = 0, ts = 0;
		bool is_inc = false;

		if (!pb_is(&f, 1, PB_LEN))
			continue;
		c = pb_sub(&f);
		PB_EACH(c, cf)
		{
			if (cf.num == 1)
				id = cf.v;
			else if (cf.num == 2)
				ts = cf.v;
			else if (cf.num == 3)
				is_inc = cf.v != 0;
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
	const uint8_t *te = NULL, *idata = NULL, *desc = NULL, *clock = NULL, *defs = NULL;
	size_t te_len = 0, id_len = 0, desc_len = 0, clock_len = 0, defs_len = 0;
	uint64_t ts = 0, flags = 0, seq = 0, boot = 0;
	uint32_t clock_id = 0;
	bool has_ts = false;
	struct pb_field f;
	struct seq_state *q;

	PB_EACH(r, f)
	{
		/* a varint where a message belongs is no message (fuzzing
		 * found a stale pointer read as one; pb_next leaves none now) */
		if (f.type != PB_LEN && (f.num == 59 || f.num == 11 || f.num == 12 || f.num == 60 || f.num == 6)) {
			violation(in, "packet %u: field %u of wire type %d where a message belongs", in->packet, f.num,
				  f.type);
			continue;
		}
		switch (f.num) {
		case 8:
			ts = f.v;
			has_ts = true;
			break;
		case 58: clock_id = (uint32_t)f.v; break;
		case 59:
			defs = f.d;
			defs_len = f.len;
			break;
		case 10: seq = f.v; break;
		case 13: flags = f.v; break;
		case 11:
			te = f.d;
			te_len = f.len;
			break;
		case 12:
			idata = f.d;
			id_len = f.len;
			break;
		case 60:
			desc = f.d;
			desc_len = f.len;
			break;
		case 6:
			clock = f.d;
			clock_len = f.len;
			break;
		case 42:
			if (f.v)
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
