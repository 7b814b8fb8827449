// SPDX-License-Identifier: GPL-2.0-only
/*
 * Perfetto TrackEvent writer. Field numbers from perfetto_trace.proto
 * (see docs/trace-model.md). One trusted sequence; names, categories and
 * debug annotation names are interned, each in the first packet that uses
 * it; the first packet clears incremental state.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "pb.h"
#include "perfetto.h"
#include "strtab.h"

/* TracePacket */
#define TP_TIMESTAMP 8
#define TP_CLOCK_SNAPSHOT 6
#define TP_SEQ_ID 10
#define TP_TRACK_EVENT 11
#define TP_INTERNED_DATA 12
#define TP_SEQ_FLAGS 13
#define TP_PREV_DROPPED 42
#define TP_TRACK_DESCRIPTOR 60
#define TP_FIRST_ON_SEQ 87
/* TrackEvent */
#define TE_CATEGORY_IIDS 3
#define TE_DEBUG_ANNOTATIONS 4
#define TE_TYPE 9
#define TE_NAME_IID 10
#define TE_TRACK_UUID 11
#define TE_COUNTER_VALUE 30
#define TE_FLOW_IDS 47
#define TE_TERM_FLOW_IDS 48
/* DebugAnnotation */
#define DA_NAME_IID 1
#define DA_UINT 3
#define DA_INT 4
#define DA_STRING 6
#define DA_POINTER 7
/* InternedData */
#define ID_CATEGORIES 1
#define ID_NAMES 2
#define ID_ANNOTATION_NAMES 3
/* TrackDescriptor */
#define TD_UUID 1
#define TD_NAME 2
#define TD_PROCESS 3
#define TD_THREAD 4
#define TD_PARENT 5
#define TD_COUNTER 8
#define TD_CHILD_ORDERING 11
#define TD_SIBLING_RANK 12

#define SEQ_ID 1
#define SEQ_CLEARED 1
#define SEQ_NEEDS_STATE 2
#define CLOCK_BOOTTIME_ID 6

enum { TYPE_SLICE_BEGIN = 1, TYPE_SLICE_END = 2, TYPE_INSTANT = 3, TYPE_COUNTER = 4 };

#define OUT_BUF (1 << 20)
#define CACHE 512

/* iids by string address: names handed to sinks never change (model.h),
 * so a pointer seen before has the iid it had; misses go by content */
struct iid_cache {
	const char *ptr[CACHE];
	uint64_t iid[CACHE];
};

struct perfetto_writer {
	FILE *f;
	struct pb pkt, interned;
	uint8_t *out; /* whole packets, written out when full */
	size_t out_len;
	struct strtab names, cats, anames;
	struct iid_cache cache[3];
	bool started, dropped;
	uint64_t bytes;
	int error;
};

struct perfetto_writer *perfetto_open(const char *path, char *err, size_t errlen)
{
	struct perfetto_writer *w = calloc(1, sizeof(*w));

	if (!w) {
		snprintf(err, errlen, "out of memory");
		return NULL;
	}
	w->f = fopen(path, "wb");
	if (!w->f) {
		snprintf(err, errlen, "%s", strerror(errno));
		free(w);
		return NULL;
	}
	w->out = malloc(OUT_BUF);
	if (!w->out) {
		snprintf(err, errlen, "out of memory");
		fclose(w->f);
		free(w);
		return NULL;
	}
	return w;
}

static void out_flush(struct perfetto_writer *w)
{
	if (w->out_len && !w->error && fwrite(w->out, 1, w->out_len, w->f) != w->out_len)
		w->error = errno ? errno : EIO;
	w->out_len = 0;
}

/* Common packet fields; the first packet of the sequence clears its state. */
static void packet_start(struct perfetto_writer *w, uint64_t ts, bool uses_state)
{
	w->pkt.len = 0;
	if (ts)
		pb_uint(&w->pkt, TP_TIMESTAMP, ts);
	pb_uint(&w->pkt, TP_SEQ_ID, SEQ_ID);
	if (!w->started) {
		w->started = true;
		pb_uint(&w->pkt, TP_SEQ_FLAGS, SEQ_CLEARED | SEQ_NEEDS_STATE);
		pb_uint(&w->pkt, TP_FIRST_ON_SEQ, 1);
	} else if (uses_state) {
		pb_uint(&w->pkt, TP_SEQ_FLAGS, SEQ_NEEDS_STATE);
	}
	if (w->dropped) {
		w->dropped = false;
		pb_uint(&w->pkt, TP_PREV_DROPPED, 1);
	}
}

static void packet_write(struct perfetto_writer *w)
{
	uint8_t head[11];
	size_t n = 0, len = w->pkt.len;

	if (w->error)
		return;
	if (w->pkt.error) {
		w->error = ENOMEM;
		return;
	}
	head[n++] = 0x0a; /* Trace.packet, field 1, length-delimited */
	do {
		head[n++] = (uint8_t)((len & 0x7f) | (len >= 0x80 ? 0x80 : 0));
		len >>= 7;
	} while (len);
	if (w->out_len + n + w->pkt.len > OUT_BUF)
		out_flush(w);
	if (n + w->pkt.len > OUT_BUF) { /* a giant packet: straight out */
		if (fwrite(head, 1, n, w->f) != n ||
		    fwrite(w->pkt.buf, 1, w->pkt.len, w->f) != w->pkt.len)
			w->error = errno ? errno : EIO;
	} else {
		memcpy(w->out + w->out_len, head, n);
		memcpy(w->out + w->out_len + n, w->pkt.buf, w->pkt.len);
		w->out_len += n + w->pkt.len;
	}
	w->bytes += n + w->pkt.len;
}

static void on_track(void *ctx, const struct model_track *t)
{
	struct perfetto_writer *w = ctx;
	size_t td, sub;

	packet_start(w, 0, false);
	td = pb_begin(&w->pkt, TP_TRACK_DESCRIPTOR);
	pb_uint(&w->pkt, TD_UUID, t->id);
	switch (t->kind) {
	case TRACK_PROCESS:
		sub = pb_begin(&w->pkt, TD_PROCESS);
		pb_uint(&w->pkt, 1, t->pid);
		pb_str(&w->pkt, 6, t->name);
		pb_end(&w->pkt, sub);
		break;
	case TRACK_THREAD:
		sub = pb_begin(&w->pkt, TD_THREAD);
		pb_uint(&w->pkt, 1, t->pid);
		pb_uint(&w->pkt, 2, t->tid);
		pb_str(&w->pkt, 5, t->name);
		pb_end(&w->pkt, sub);
		break;
	case TRACK_COUNTER:
		pb_str(&w->pkt, TD_NAME, t->name);
		if (t->parent)
			pb_uint(&w->pkt, TD_PARENT, t->parent);
		sub = pb_begin(&w->pkt, TD_COUNTER);
		if (t->unit)
			pb_uint(&w->pkt, 3, t->unit);
		pb_end(&w->pkt, sub);
		pb_uint(&w->pkt, TD_SIBLING_RANK, (uint64_t)t->rank);
		break;
	case TRACK_DEVICE:
		pb_str(&w->pkt, TD_NAME, t->name);
		pb_uint(&w->pkt, TD_CHILD_ORDERING, 3); /* explicit, by rank */
		pb_uint(&w->pkt, TD_SIBLING_RANK, (uint64_t)t->rank);
		break;
	case TRACK_LANE:
	case TRACK_GLOBAL:
		pb_str(&w->pkt, TD_NAME, t->name);
		if (t->parent)
			pb_uint(&w->pkt, TD_PARENT, t->parent);
		pb_uint(&w->pkt, TD_SIBLING_RANK, (uint64_t)t->rank);
		break;
	}
	pb_end(&w->pkt, td);
	packet_write(w);
}

/* iid of s in table, adding an entry to this packet's interned data if new */
static uint64_t intern(struct perfetto_writer *w, struct strtab *t, uint32_t field, const char *s)
{
	struct iid_cache *c = &w->cache[field - 1];
	size_t slot = ((uintptr_t)s >> 3) % CACHE;
	bool added;
	uint64_t iid;

	if (c->ptr[slot] == s)
		return c->iid[slot];
	iid = strtab_id(t, s, &added);
	c->ptr[slot] = s;
	c->iid[slot] = iid;

	if (added) {
		size_t m = pb_begin(&w->interned, field);

		pb_uint(&w->interned, 1, iid);
		pb_str(&w->interned, 2, s);
		pb_end(&w->interned, m);
	}
	return iid;
}

static void event_packet(struct perfetto_writer *w, const struct model_event *e, int type,
			 uint64_t ts)
{
	struct pb *p = &w->pkt;
	uint64_t name = 0, cat = 0, anames[MODEL_MAX_ARGS];
	size_t te;

	w->interned.len = 0;
	if (type != TYPE_SLICE_END) {
		name = intern(w, &w->names, ID_NAMES, e->name);
		if (e->cat)
			cat = intern(w, &w->cats, ID_CATEGORIES, e->cat);
		for (int i = 0; i < e->nargs; i++)
			anames[i] = intern(w, &w->anames, ID_ANNOTATION_NAMES, e->args[i].name);
	}
	/* only packets that use interned data depend on the sequence's state */
	packet_start(w, ts, type != TYPE_SLICE_END && type != TYPE_COUNTER);
	if (w->interned.len)
		pb_bytes(p, TP_INTERNED_DATA, w->interned.buf, w->interned.len);
	te = pb_begin(p, TP_TRACK_EVENT);
	pb_uint(p, TE_TYPE, (uint64_t)type);
	pb_uint(p, TE_TRACK_UUID, e->track->id);
	if (type == TYPE_COUNTER) {
		pb_int(p, TE_COUNTER_VALUE, e->value);
	} else if (type != TYPE_SLICE_END) {
		pb_uint(p, TE_NAME_IID, name);
		if (cat)
			pb_uint(p, TE_CATEGORY_IIDS, cat);
		for (int i = 0; i < e->nargs; i++) {
			const struct model_arg *a = &e->args[i];
			size_t da = pb_begin(p, TE_DEBUG_ANNOTATIONS);

			pb_uint(p, DA_NAME_IID, anames[i]);
			switch (a->type) {
			case ARG_UINT: pb_uint(p, DA_UINT, a->u); break;
			case ARG_INT: pb_int(p, DA_INT, a->i); break;
			case ARG_HEX: pb_uint(p, DA_POINTER, a->u); break;
			case ARG_STR: pb_str(p, DA_STRING, a->s ? a->s : ""); break;
			}
			pb_end(p, da);
		}
		for (int i = 0; i < e->nflows; i++)
			pb_fixed64(p, TE_FLOW_IDS, e->flows[i]);
		for (int i = 0; i < e->nterm; i++)
			pb_fixed64(p, TE_TERM_FLOW_IDS, e->term_flows[i]);
	}
	pb_end(p, te);
	packet_write(w);
}

static void on_event(void *ctx, const struct model_event *e)
{
	struct perfetto_writer *w = ctx;

	switch (e->kind) {
	case EV_SLICE:
		/* begin and end together: a slice is whole when handed over */
		event_packet(w, e, TYPE_SLICE_BEGIN, e->ts);
		event_packet(w, e, TYPE_SLICE_END, e->ts + e->dur);
		break;
	case EV_INSTANT:
		event_packet(w, e, TYPE_INSTANT, e->ts);
		break;
	case EV_COUNTER:
		event_packet(w, e, TYPE_COUNTER, e->ts);
		break;
	}
}

static void on_clock(void *ctx, const struct sbt_meta_clock *c)
{
	static const struct {
		uint32_t id;
		size_t off;
	} clocks[] = { { CLOCK_BOOTTIME_ID, offsetof(struct sbt_meta_clock, boottime) },
		       { 3, offsetof(struct sbt_meta_clock, monotonic) },
		       { 1, offsetof(struct sbt_meta_clock, realtime) } };
	struct perfetto_writer *w = ctx;
	size_t cs;

	packet_start(w, c->boottime, false);
	cs = pb_begin(&w->pkt, TP_CLOCK_SNAPSHOT);
	for (size_t i = 0; i < sizeof(clocks) / sizeof(clocks[0]); i++) {
		size_t m = pb_begin(&w->pkt, 1);
		uint64_t v;

		memcpy(&v, (const char *)c + clocks[i].off, sizeof(v));
		pb_uint(&w->pkt, 1, clocks[i].id);
		pb_uint(&w->pkt, 2, v);
		pb_end(&w->pkt, m);
	}
	pb_uint(&w->pkt, 2, CLOCK_BOOTTIME_ID); /* primary_trace_clock */
	pb_end(&w->pkt, cs);
	packet_write(w);
}

static void on_lost(void *ctx, uint64_t ts, uint64_t count)
{
	struct perfetto_writer *w = ctx;

	(void)ts;
	(void)count;
	w->dropped = true; /* marks the next packet */
}

struct model_sink perfetto_sink(struct perfetto_writer *w)
{
	return (struct model_sink){ w, on_track, on_event, on_clock, on_lost };
}

int perfetto_flush(struct perfetto_writer *w)
{
	out_flush(w);
	if (!w->error && fflush(w->f))
		w->error = errno;
	return -w->error;
}

uint64_t perfetto_bytes(const struct perfetto_writer *w)
{
	return w->bytes;
}

int perfetto_close(struct perfetto_writer *w)
{
	int err;

	if (!w)
		return 0;
	perfetto_flush(w);
	if (fclose(w->f) && !w->error)
		w->error = errno;
	err = -w->error;
	pb_free(&w->pkt);
	pb_free(&w->interned);
	free(w->out);
	strtab_free(&w->names);
	strtab_free(&w->cats);
	strtab_free(&w->anames);
	free(w);
	return err;
}
