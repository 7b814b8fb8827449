// SPDX-License-Identifier: GPL-2.0-only
/*
 * Perfetto TrackEvent writer. Field numbers from perfetto_trace.proto
 * (see docs/trace-model.md).
 *
 * Events go on one packet sequence per (track, depth): slices at one depth
 * of one track end in the order they start (model.h), so each sequence is
 * in time order and its timestamps are deltas on a sequence-scoped
 * incremental clock (64), a few bytes instead of eight. A straggler that
 * would need a negative delta names BOOTTIME and an absolute time instead,
 * which leaves the incremental clock where it was. Each sequence begins
 * with a packet that clears its state, makes clock 64 the default and
 * anchors it to BOOTTIME, and names its track as the default one, so
 * events leave it out. Names, categories and annotation names are
 * interned per sequence, with the same iid for a string on every sequence.
 * Track descriptors and the capture's clock snapshots go on sequence 1.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "base/fibhash.h"
#include "base/hashmap.h"
#include "base/pb.h"
#include "base/strtab.h"
#include "model/perfetto.h"

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
#define TP_CLOCK_ID 58
#define TP_DEFAULTS 59
/* TrackEvent */
#define TE_CATEGORY_IIDS 3
#define TE_DEBUG_ANNOTATIONS 4
#define TE_TYPE 9
#define TE_NAME_IID 10
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

#define SEQ_MAIN 1 /* descriptors and clock snapshots */
#define SEQ_CLEARED 1
#define SEQ_NEEDS_STATE 2
#define CLOCK_BOOTTIME_ID 6
#define CLOCK_DELTA_ID 64 /* each sequence's own incremental clock */

enum { TYPE_SLICE_BEGIN = 1, TYPE_SLICE_END = 2, TYPE_INSTANT = 3, TYPE_COUNTER = 4 };

#define OUT_BUF (1 << 20)

#define SHAPE_BITS 5
#define SHAPE_SLOTS (1 << SHAPE_BITS)
/* name_iid's and category_iids' tags and values: 2 + 2 * 10 bytes, and
 * room to copy them with three 8-byte moves */
#define SHAPE_NAMES_MAX 24
/* a debug annotation's tag, length and name_iid's tag and value: 3 + 10 */
#define ARG_HEAD_MAX 16

struct sequence {
	uint32_t id;
	/* what every packet of it says first after its time: its id and
	 * "needs incremental state", encoded once (at most 8 bytes) */
	uint8_t head[8], head_len;
	/* the last events' shapes on it, by name's address and argument
	 * count (a name stays at its address: model.h), two ways a slot
	 * (where names lie in memory decides which meet in one): a track's
	 * calls to one function come over and over with the same names,
	 * whose fields are then copied whole (all interned on it already) */
	struct shape {
		const char *name, *cat; /* name NULL: empty */
		int nargs;
		const char *anames[MODEL_MAX_ARGS];
		/* its bytes, encoded once when it is new: the event's name
		 * and category fields, and each argument's head (the debug
		 * annotation's tag, a length to fill in, its name's iid),
		 * copied with fixed-size moves and used up to their length */
		uint8_t names[SHAPE_NAMES_MAX], names_len;
		uint8_t arg_head[MODEL_MAX_ARGS][ARG_HEAD_MAX], arg_head_len[MODEL_MAX_ARGS];
	} shapes[SHAPE_SLOTS];
	uint64_t clock; /* value of its incremental clock: the last delta's end */
	uint8_t *interned[3]; /* bitsets by iid: sent on this sequence already */
	size_t interned_bytes[3];
};

#define SEQ_CACHE 512

/* The bytes of a string argument's value the room taken for a packet
 * holds (packet_bound: 32 bytes an argument, with two tags and lengths,
 * the name's tag and an iid of up to 10 bytes). */
#define STR_IN_BOUND 16

/* A string argument's value that stays at its address (model.h's fixed:
 * an fd kind, how a job ended) and fits the bound, by address: written
 * with one fixed-size copy instead of measured and copied anew. */
#define FIXED_STR_BITS 6
struct fixed_str {
	const char *s; /* NULL: empty */
	uint8_t len;
	char bytes[STR_IN_BOUND];
};

struct perfetto_writer {
	FILE *f;
	/* packets are built in place here, each whole before the next begins;
	 * the buffer goes to the file between packets */
	struct pb out, interned;
	size_t pkt_mark;
	struct strtab names, cats, anames; /* iids, the same on every sequence */
	struct strtab_cache cache[3]; /* iids by address (model.h's names) */
	struct hashmap seqs; /* track id << 8 | depth -> struct sequence */
	struct {
		uint64_t key; /* 0: empty (track ids start at 1) */
		struct sequence *q;
	} seq_cache[SEQ_CACHE]; /* events hop between a few tracks */
	struct fixed_str fixed[1 << FIXED_STR_BITS];
	uint32_t next_seq;
	bool main_started, dropped;
	uint64_t bytes;
	int error;
};

struct perfetto_writer *perfetto_open(const char *path, char *err, size_t errlen)
{
	FILE *f = fopen(path, "wb");

	if (!f) {
		snprintf(err, errlen, "%s", strerror(errno));
		return NULL;
	}
	return perfetto_open_file(f, err, errlen);
}

struct perfetto_writer *perfetto_open_file(FILE *f, char *err, size_t errlen)
{
	struct perfetto_writer *w = calloc(1, sizeof(*w));

	if (!w) {
		snprintf(err, errlen, "out of memory");
		fclose(f);
		return NULL;
	}
	w->f = f;
	w->next_seq = SEQ_MAIN + 1;
	/* room for OUT_BUF from the start: below flush_if_full's mark, a
	 * small packet always fits without asking */
	if (pb_reserve(&w->out, OUT_BUF)) {
		snprintf(err, errlen, "out of memory");
		fclose(w->f);
		free(w);
		return NULL;
	}
	return w;
}

static void out_flush(struct perfetto_writer *w)
{
	w->bytes += w->out.len;
	if (w->out.len && !w->error && fwrite(w->out.buf, 1, w->out.len, w->f) != w->out.len)
		w->error = errno ? errno : EIO;
	w->out.len = 0;
}

/* Begin a packet (Trace.packet, field 1) in the output buffer. */
/* Write out what is built when the buffer nears full: between packets. */
static inline void flush_if_full(struct perfetto_writer *w)
{
	if (w->out.len > OUT_BUF - (64 << 10))
		out_flush(w);
}

static void packet_begin(struct perfetto_writer *w)
{
	flush_if_full(w);
	w->pkt_mark = pb_begin(&w->out, 1);
}

/* A packet on the main sequence (absolute BOOTTIME timestamps, no state). */
static void main_packet_start(struct perfetto_writer *w, uint64_t ts)
{
	packet_begin(w);
	if (ts)
		pb_uint(&w->out, TP_TIMESTAMP, ts);
	pb_uint(&w->out, TP_SEQ_ID, SEQ_MAIN);
	if (!w->main_started) {
		w->main_started = true;
		pb_uint(&w->out, TP_SEQ_FLAGS, SEQ_CLEARED);
		pb_uint(&w->out, TP_FIRST_ON_SEQ, 1);
	}
}

static void packet_end(struct perfetto_writer *w)
{
	pb_end(&w->out, w->pkt_mark);
	if (w->out.error && !w->error)
		w->error = ENOMEM;
}

static void on_track(void *ctx, const struct model_track *t)
{
	struct perfetto_writer *w = ctx;
	size_t td, sub;

	main_packet_start(w, 0);
	td = pb_begin(&w->out, TP_TRACK_DESCRIPTOR);
	pb_uint(&w->out, TD_UUID, t->id);
	switch (t->kind) {
	case TRACK_PROCESS:
		sub = pb_begin(&w->out, TD_PROCESS);
		pb_uint(&w->out, 1, t->pid);
		pb_str(&w->out, 6, t->name);
		pb_end(&w->out, sub);
		break;
	case TRACK_THREAD:
		sub = pb_begin(&w->out, TD_THREAD);
		pb_uint(&w->out, 1, t->pid);
		pb_uint(&w->out, 2, t->tid);
		pb_str(&w->out, 5, t->name);
		pb_end(&w->out, sub);
		break;
	case TRACK_COUNTER:
		pb_str(&w->out, TD_NAME, t->name);
		if (t->parent)
			pb_uint(&w->out, TD_PARENT, t->parent);
		sub = pb_begin(&w->out, TD_COUNTER);
		if (t->unit)
			pb_uint(&w->out, 3, t->unit);
		pb_end(&w->out, sub);
		pb_uint(&w->out, TD_SIBLING_RANK, (uint64_t)t->rank);
		break;
	case TRACK_DEVICE:
	case TRACK_GROUP:
		pb_str(&w->out, TD_NAME, t->name);
		pb_uint(&w->out, TD_CHILD_ORDERING, 3); /* explicit, by rank */
		pb_uint(&w->out, TD_SIBLING_RANK, (uint64_t)t->rank);
		break;
	case TRACK_LANE:
	case TRACK_GLOBAL:
		pb_str(&w->out, TD_NAME, t->name);
		if (t->parent)
			pb_uint(&w->out, TD_PARENT, t->parent);
		pb_uint(&w->out, TD_SIBLING_RANK, (uint64_t)t->rank);
		break;
	}
	pb_end(&w->out, td);
	packet_end(w);
}

/* The iid of s (the same on every sequence), adding it to this packet's
 * interned data if the sequence has not had it yet. Out of line: a
 * sequence's shapes nearly always answer first (new_shape). */
static __attribute__((noinline)) uint64_t intern(struct perfetto_writer *w, struct sequence *q, struct strtab *t,
						 uint32_t field, const char *s)
{
	uint64_t iid = strtab_id_cached(t, &w->cache[field - 1], s);
	uint8_t **bits = &q->interned[field - 1];
	size_t *nbits = &q->interned_bytes[field - 1];
	size_t byte = iid / 8;
	if (byte < *nbits && ((*bits)[byte] >> (iid % 8) & 1))
		return iid;
	if (byte >= *nbits) {
		size_t n = (byte + 1) * 2;
		uint8_t *grown = realloc(*bits, n);

		if (!grown) {
			w->error = ENOMEM;
			return iid;
		}
		memset(grown + *nbits, 0, n - *nbits);
		*bits = grown;
		*nbits = n;
	}
	(*bits)[byte] |= (uint8_t)(1u << (iid % 8));
	size_t m = pb_begin(&w->interned, field);

	pb_uint(&w->interned, 1, iid);
	pb_str(&w->interned, 2, s);
	pb_end(&w->interned, m);
	return iid;
}

/* The sequence of (track, depth), found or made (below). */
static struct sequence *sequence_slow(struct perfetto_writer *w, uint64_t track, uint8_t depth, uint64_t ts,
				      size_t slot);

static inline __attribute__((always_inline)) struct sequence *sequence_of(struct perfetto_writer *w, uint64_t track,
									  uint8_t depth, uint64_t ts)
{
	uint64_t key = track << 8 | depth;
	size_t slot = (size_t)(track * 8 + depth) % SEQ_CACHE;

	if (w->seq_cache[slot].key == key)
		return w->seq_cache[slot].q;
	return sequence_slow(w, track, depth, ts, slot);
}

/* A new sequence starts with a packet that clears its state, makes its
 * incremental clock the default and anchors that clock at ts on BOOTTIME. */
static struct sequence *sequence_slow(struct perfetto_writer *w, uint64_t track, uint8_t depth, uint64_t ts,
				      size_t slot)
{
	uint64_t key = track << 8 | depth;
	struct sequence *q;
	size_t d, cs, clk;

	q = hm_get(&w->seqs, key);
	if (!q) {
		q = calloc(1, sizeof(*q));
		if (!q || hm_put(&w->seqs, key, q)) {
			free(q);
			w->error = ENOMEM;
			return NULL;
		}
		q->id = w->next_seq++;
		q->clock = ts;
		q->head_len =
			(uint8_t)(pb_put_uint(pb_put_uint(q->head, TP_SEQ_ID, q->id), TP_SEQ_FLAGS, SEQ_NEEDS_STATE) -
				  q->head);
		packet_begin(w);
		pb_uint(&w->out, TP_SEQ_ID, q->id);
		pb_uint(&w->out, TP_SEQ_FLAGS, SEQ_CLEARED);
		pb_uint(&w->out, TP_FIRST_ON_SEQ, 1);
		d = pb_begin(&w->out, TP_DEFAULTS);
		pb_uint(&w->out, TP_CLOCK_ID, CLOCK_DELTA_ID);
		cs = pb_begin(&w->out, 11); /* track_event_defaults */
		pb_uint(&w->out, 11, track); /* track_uuid */
		pb_end(&w->out, cs);
		pb_end(&w->out, d);
		cs = pb_begin(&w->out, TP_CLOCK_SNAPSHOT);
		clk = pb_begin(&w->out, 1);
		pb_uint(&w->out, 1, CLOCK_DELTA_ID);
		pb_uint(&w->out, 2, ts);
		pb_uint(&w->out, 3, 1); /* is_incremental */
		pb_end(&w->out, clk);
		clk = pb_begin(&w->out, 1);
		pb_uint(&w->out, 1, CLOCK_BOOTTIME_ID);
		pb_uint(&w->out, 2, ts);
		pb_end(&w->out, clk);
		pb_end(&w->out, cs);
		packet_end(w);
	}
	w->seq_cache[slot].key = key;
	w->seq_cache[slot].q = q;
	return q;
}

static inline bool same_shape(const struct shape *sh, const struct model_event *e)
{
	if (sh->name != e->name || sh->cat != e->cat || sh->nargs != e->nargs)
		return false;
	for (int i = 0; i < e->nargs; i++)
		if (sh->anames[i] != e->args[i].name)
			return false;
	return true;
}

/* The shape of e, its strings interned on q (into this packet's interned
 * data where q has not had them). Remembered only when interning worked. */
static __attribute__((noinline)) void new_shape(struct perfetto_writer *w, struct sequence *q, struct shape *sh,
						const struct model_event *e)
{
	uint64_t name = intern(w, q, &w->names, ID_NAMES, e->name);
	uint64_t cat = e->cat ? intern(w, q, &w->cats, ID_CATEGORIES, e->cat) : 0;
	uint8_t *p = pb_put_uint(sh->names, TE_NAME_IID, name);

	if (cat)
		p = pb_put_uint(p, TE_CATEGORY_IIDS, cat);
	sh->names_len = (uint8_t)(p - sh->names);
	for (int i = 0; i < e->nargs; i++) {
		uint64_t aname = intern(w, q, &w->anames, ID_ANNOTATION_NAMES, e->args[i].name);

		sh->anames[i] = e->args[i].name;
		/* the annotation's tag, a one-byte length set when written */
		p = pb_put_varint(sh->arg_head[i], TE_DEBUG_ANNOTATIONS << 3 | PB_LEN) + 1;
		p = pb_put_uint(p, DA_NAME_IID, aname);
		sh->arg_head_len[i] = (uint8_t)(p - sh->arg_head[i]);
	}
	sh->nargs = e->nargs;
	sh->cat = e->cat;
	sh->name = w->error ? NULL : e->name;
}

/* Most bytes an event packet can take, but for long string values (each
 * argument's key, name iid and value fit 32 bytes; a longer string value
 * reserves its own room as it is written). */
#define PACKET_BOUND_FIXED (96 + (2 * MODEL_MAX_FLOWS) * 11 + MODEL_MAX_ARGS * 32)
/* an annotation's tag and length, name_iid's tag and value, string_value's
 * tag, length and STR_IN_BOUND bytes */
_Static_assert(1 + 1 + 1 + 10 + 1 + 1 + STR_IN_BOUND <= 32, "a string in the bound fits an argument's 32 bytes");
/* an argument's head is copied whole, ARG_HEAD_MAX bytes, and its value
 * written from where the head ends: a number's tag and varint, or a
 * string's tag, length and STR_IN_BOUND bytes */
_Static_assert((TE_DEBUG_ANNOTATIONS << 3 | PB_LEN) < 0x80 && 1 + 1 + 1 + 10 <= ARG_HEAD_MAX,
	       "an argument's head: a one-byte tag, its length, then its name");
_Static_assert(ARG_HEAD_MAX <= 32 && 1 + 1 + 1 + 10 + 1 + 10 <= 32, "a number fits an argument's 32 bytes");
/* the names' copy within the packet's fixed part (PACKET_BOUND_FIXED's
 * 96: its frame, time, head, loss mark, interned data's tag and length,
 * the event's tag, length and type take at most 36 of them) */
_Static_assert(1 + 10 + 1 + 10 <= SHAPE_NAMES_MAX && 36 + SHAPE_NAMES_MAX <= 96,
	       "a shape's names fit its bytes and the packet's bound");
static inline size_t packet_bound(const struct model_event *e, size_t interned)
{
	if (!(e->nxflows | e->nxterm)) /* nearly always: one bound for all */
		return PACKET_BOUND_FIXED + interned;
	return PACKET_BOUND_FIXED + interned + (size_t)(e->nxflows + e->nxterm) * 11;
}

/* Argument i's head (tag, length, name_iid) as its shape has it, at *p,
 * which moves past it; returns where its body starts, behind a one-byte
 * length the caller sets when the body is written. */
static inline __attribute__((always_inline)) uint8_t *annotation_begin(uint8_t **p, const struct shape *sh, int i)
{
	uint8_t *body = *p + 2; /* behind the one-byte tag and length */

	__builtin_memcpy(*p, sh->arg_head[i], ARG_HEAD_MAX);
	*p += sh->arg_head_len[i];
	return body;
}

/* A string argument (debug annotation name_iid, string_value) at p, in a
 * packet whose bound counted 32 bytes for it: room for a longer one is
 * made here (the buffer may move: the packet is known by offsets), and a
 * body of 128 bytes or more gets its longer length. Out of line: numbers
 * are most arguments. */
static __attribute__((noinline)) uint8_t *string_arg(struct perfetto_writer *w, const struct model_event *e, uint8_t *p,
						     const struct shape *sh, int i)
{
	const char *s = e->args[i].s;
	size_t slen = s ? strlen(s) : 0, off;
	uint8_t *da;

	if (e->args[i].fixed && s && slen <= STR_IN_BOUND) { /* the next time from the cache */
		struct fixed_str *fs = &w->fixed[fibhash((uintptr_t)s, FIXED_STR_BITS)];

		fs->s = s;
		fs->len = (uint8_t)slen;
		memcpy(fs->bytes, s, slen);
	}

	if (slen > STR_IN_BOUND) { /* room for it and the rest */
		off = (size_t)(p - w->out.buf);
		w->out.len = off;
		if (pb_reserve(&w->out, slen + packet_bound(e, 0))) {
			w->error = ENOMEM;
			return NULL;
		}
		p = w->out.buf + off;
	}
	da = annotation_begin(&p, sh, i);
	p = pb_put_bytes(p, DA_STRING, s ? s : "", slen);
	if (p - da < 0x80) {
		da[-1] = (uint8_t)(p - da);
		return p;
	}
	w->out.len = (size_t)(p - w->out.buf); /* a longer length: the body moves */
	pb_end(&w->out, (size_t)(da - w->out.buf));
	return w->out.buf + w->out.len;
}

/* The packet at offset start, its event at offset te, end at p: a length
 * of two bytes or more for either, the bodies moved to make room. */
static __attribute__((noinline)) void long_lengths(struct perfetto_writer *w, uint8_t *p, size_t start, size_t te)
{
	w->out.len = (size_t)(p - w->out.buf);
	pb_end(&w->out, te); /* the event's length first: the packet's body holds it */
	pb_end(&w->out, start + 2);
	if (w->out.error && !w->error)
		w->error = ENOMEM;
}

/* A slice's begin or an instant: name, category, args and flows. Built in
 * place behind a one-byte length for the packet and one for its event,
 * made longer at the end only when a body has 128 bytes or more. */
static inline __attribute__((always_inline)) void event_packet(struct perfetto_writer *w, struct sequence *q,
							       const struct model_event *e, int type, uint64_t ts)
{
	/* DebugAnnotation's value field by argument type (strings apart) */
	static const uint8_t value_tag[] = { [ARG_UINT] = DA_UINT << 3 | PB_VARINT,
					     [ARG_INT] = DA_INT << 3 | PB_VARINT,
					     [ARG_HEX] = DA_POINTER << 3 | PB_VARINT };
	int nargs = e->nargs;
	size_t start, te; /* offsets: a long string argument may move the buffer */
	uint8_t *buf, *p;
	struct shape *sh;

	w->interned.len = 0;
	sh = &q->shapes[fibhash((uintptr_t)e->name + (unsigned)nargs, SHAPE_BITS) & ~(size_t)1];
	if (!same_shape(sh, e)) {
		if (same_shape(sh + 1, e)) {
			sh++;
		} else { /* the older way goes, the newest comes first */
			sh[1] = sh[0];
			new_shape(w, q, sh, e);
		}
	}
	flush_if_full(w);
	if (pb_reserve(&w->out, 2 + packet_bound(e, w->interned.len))) {
		w->error = ENOMEM;
		return;
	}
	start = w->out.len;
	buf = w->out.buf;
	p = buf + start + 2; /* Trace.packet's tag and one-byte length go before */
	if (ts >= q->clock) {
		p = pb_put_uint(p, TP_TIMESTAMP, ts - q->clock);
		q->clock = ts;
	} else { /* a straggler: absolute, and the incremental clock stays put */
		p = pb_put_uint(p, TP_TIMESTAMP, ts);
		p = pb_put_uint(p, TP_CLOCK_ID, CLOCK_BOOTTIME_ID);
	}
	/* TP_SEQ_ID and TP_SEQ_FLAGS (interned names, and the clock): one
	 * store, the packet's bound leaves room for all 8 bytes */
	__builtin_memcpy(p, q->head, 8);
	p += q->head_len;
	if (w->dropped) {
		w->dropped = false;
		p = pb_put_uint(p, TP_PREV_DROPPED, 1);
	}
	if (w->interned.len)
		p = pb_put_bytes(p, TP_INTERNED_DATA, w->interned.buf, w->interned.len);
	p = pb_put_varint(p, TP_TRACK_EVENT << 3 | PB_LEN);
	te = (size_t)(++p - buf); /* a one-byte length before it, fixed below */
	p = pb_put_uint(p, TE_TYPE, (uint64_t)type); /* the track is the sequence's default */
	__builtin_memcpy(p, sh->names, SHAPE_NAMES_MAX); /* name and category */
	p += sh->names_len;
	for (int i = 0; i < nargs; i++) {
		const struct model_arg *a = &e->args[i];
		enum model_arg_type at = a->type;
		uint64_t v = a->u; /* INT: its two's complement, as int64 is sent */
		uint8_t *da;

		if (at == ARG_STR) {
			const struct fixed_str *fs = &w->fixed[fibhash((uintptr_t)a->s, FIXED_STR_BITS)];

			/* in the bound (a NULL string meets an empty slot,
			 * whose length 0 is what it writes) */
			if (fs->s == a->s && a->fixed) {
				da = annotation_begin(&p, sh, i);
				*p++ = DA_STRING << 3 | PB_LEN;
				*p++ = fs->len;
				__builtin_memcpy(p, fs->bytes, STR_IN_BOUND);
				p += fs->len;
				da[-1] = (uint8_t)(p - da);
				continue;
			}
			if (!(p = string_arg(w, e, p, sh, i)))
				return;
			buf = w->out.buf; /* it may have moved */
			continue;
		}
		/* a number's body is at most 15 bytes: a one-byte length */
		da = annotation_begin(&p, sh, i);
		*p++ = value_tag[at];
		p = pb_put_varint(p, v);
		da[-1] = (uint8_t)(p - da);
	}
	if (e->nflows | e->nxflows | e->nterm | e->nxterm) {
		for (int i = 0; i < e->nflows; i++)
			p = pb_put_fixed64(p, TE_FLOW_IDS, e->flows[i]);
		for (int i = 0; i < e->nxflows; i++)
			p = pb_put_fixed64(p, TE_FLOW_IDS, e->xflows[i]);
		for (int i = 0; i < e->nterm; i++)
			p = pb_put_fixed64(p, TE_TERM_FLOW_IDS, e->term_flows[i]);
		for (int i = 0; i < e->nxterm; i++)
			p = pb_put_fixed64(p, TE_TERM_FLOW_IDS, e->xterm[i]);
	}
	buf[start] = 1 << 3 | PB_LEN; /* Trace.packet */
	if (__builtin_expect(p - (buf + te) < 0x80 && p - (buf + start + 2) < 0x80, 1)) {
		buf[te - 1] = (uint8_t)(p - (buf + te));
		buf[start + 1] = (uint8_t)(p - (buf + start + 2));
		w->out.len = (size_t)(p - buf);
		return;
	}
	long_lengths(w, p, start, te);
}

/* A slice's end or a counter value: no names, no args, no flows, so at most
 * 50 bytes, written in one go behind a one-byte length. The same bytes as
 * event_packet would write; this is the converter's most frequent packet. */
static inline __attribute__((always_inline)) void small_packet(struct perfetto_writer *w, struct sequence *q,
							       const struct model_event *e, int type, uint64_t ts)
{
	uint8_t *start, *p, *te;

	flush_if_full(w); /* leaves at least 64 KiB of the buffer's OUT_BUF */
	start = w->out.buf + w->out.len;
	p = start + 2; /* the packet's tag and one-byte length go before */
	if (ts >= q->clock) {
		p = pb_put_uint(p, TP_TIMESTAMP, ts - q->clock);
		q->clock = ts;
		__builtin_memcpy(p, q->head, 8); /* TP_SEQ_ID, TP_SEQ_FLAGS */
		p += q->head_len;
	} else { /* a straggler: absolute, and the incremental clock stays put */
		p = pb_put_uint(p, TP_TIMESTAMP, ts);
		p = pb_put_uint(p, TP_CLOCK_ID, CLOCK_BOOTTIME_ID);
		p = pb_put_uint(p, TP_SEQ_ID, q->id);
	}
	if (w->dropped) {
		w->dropped = false;
		p = pb_put_uint(p, TP_PREV_DROPPED, 1);
	}
	p = pb_put_varint(p, TP_TRACK_EVENT << 3 | PB_LEN);
	te = ++p;
	p = pb_put_uint(p, TE_TYPE, (uint64_t)type);
	if (type == TYPE_COUNTER)
		p = pb_put_uint(p, TE_COUNTER_VALUE, (uint64_t)e->value);
	te[-1] = (uint8_t)(p - te);
	start[0] = 1 << 3 | PB_LEN; /* Trace.packet */
	start[1] = (uint8_t)(p - start - 2);
	w->out.len = (size_t)(p - w->out.buf);
}

static void on_event(void *ctx, const struct model_event *e)
{
	struct perfetto_writer *w = ctx;
	/* (made here, a new sequence's first packet goes before the event's) */
	struct sequence *q = sequence_of(w, e->track->id, e->depth, e->ts);

	if (!q)
		return;
	/* tests, not a switch's table: slices are most events, counters next */
	if (e->kind == EV_SLICE) {
		/* begin and end together: a slice is whole when handed over */
		event_packet(w, q, e, TYPE_SLICE_BEGIN, e->ts);
		small_packet(w, q, e, TYPE_SLICE_END, e->ts + e->dur);
	} else if (e->kind == EV_COUNTER) {
		small_packet(w, q, e, TYPE_COUNTER, e->ts);
	} else if (e->kind == EV_INSTANT) {
		event_packet(w, q, e, TYPE_INSTANT, e->ts);
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

	main_packet_start(w, c->boottime);
	cs = pb_begin(&w->out, TP_CLOCK_SNAPSHOT);
	for (size_t i = 0; i < sizeof(clocks) / sizeof(clocks[0]); i++) {
		size_t m = pb_begin(&w->out, 1);
		uint64_t v;

		memcpy(&v, (const char *)c + clocks[i].off, sizeof(v));
		pb_uint(&w->out, 1, clocks[i].id);
		pb_uint(&w->out, 2, v);
		pb_end(&w->out, m);
	}
	pb_uint(&w->out, 2, CLOCK_BOOTTIME_ID); /* primary_trace_clock */
	pb_end(&w->out, cs);
	packet_end(w);
}

static void on_lost(void *ctx, uint64_t ts, uint64_t count)
{
	struct perfetto_writer *w = ctx;

	(void)ts;
	(void)count;
	w->dropped = true; /* marks the next packet */
}

static int sink_flush(void *w)
{
	return perfetto_flush(w);
}

static uint64_t sink_bytes(const void *w)
{
	return perfetto_bytes(w);
}

static int sink_close(void *w)
{
	return perfetto_close(w);
}

struct model_sink perfetto_sink(struct perfetto_writer *w)
{
	return (struct model_sink){
		w, on_track, on_event, on_clock, on_lost, NULL, sink_flush, sink_bytes, sink_close
	};
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
	return w->bytes + w->out.len;
}

static void free_sequence(uint64_t key, void *val, void *ctx)
{
	struct sequence *q = val;

	(void)key;
	(void)ctx;
	for (int i = 0; i < 3; i++)
		free(q->interned[i]);
	free(q);
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
	pb_free(&w->out);
	pb_free(&w->interned);
	hm_each(&w->seqs, free_sequence, NULL);
	hm_free(&w->seqs);
	strtab_free(&w->names);
	strtab_free(&w->cats);
	strtab_free(&w->anames);
	free(w);
	return err;
}
