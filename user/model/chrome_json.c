// SPDX-License-Identifier: GPL-2.0-only
/*
 * Chrome JSON writer. Host tracks are real pids and tids; a device is a
 * pseudo-process (pid CHROME_DEVICE_PID_BASE + n) whose threads are its engine
 * lanes. ts and dur are microseconds with nanosecond decimals. Flows use
 * s/t/f events bound to the enclosing slice.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/fibhash.h"
#include "base/hashmap.h"
#include "base/utf8.h"
#include "base/vec.h"
#include "model/chrome_json.h"

struct placement {
	uint32_t pid, tid;
	/* `,"pid":P,"tid":T` as every event on it says it; a counter says
	 * the first pid_len bytes */
	char ids[40];
	uint8_t ids_len, pid_len;
};

/* A name's JSON (quoted, escaped), by the name's address: names stay put
 * and unchanged for the whole trace (model.h), and events of a track
 * repeat a few of them. A name longer than the room is written anew. */
#define NAME_CACHE_BITS 9
#define NAME_CACHE (1 << NAME_CACHE_BITS)
#define CAT_CACHE_BITS 4
#define NAME_ROOM 54
struct name_json {
	const char *key;
	uint8_t len; /* 0: too long, write it anew */
	bool driver; /* categories: "driver" */
	char json[NAME_ROOM];
};

#define PLACE_CACHE 256

#define JSON_BUF (1u << 20)
#define JSON_START (16u << 10)

#define MAX_CARDS 64
#define MAX_CLOCKS 2 /* the first and the latest */

struct chrome_writer {
	FILE *f;
	bool first;
	struct hashmap places; /* track id -> placement */
	struct {
		uint64_t track; /* 0: empty (track ids start at 1) */
		struct placement *p;
	} place_cache[PLACE_CACHE];
	struct name_json names[NAME_CACHE], cats[1 << CAT_CACHE_BITS];
	struct hashmap flows; /* flow id -> its leg: FLOW_TO_JOB, FLOW_TO_END */
	struct {
		int rank;
		char name[64], ids[16]; /* ids: "vvvv:dddd" once a driver event said */
	} cards[MAX_CARDS]; /* for deviceProperties */
	int ncards;
	struct sbt_meta_clock clocks[MAX_CLOCKS];
	int nclocks;
	struct model_task_ids *tasks; /* for otherData: starts and namespace ids */
	size_t ntasks, tasks_cap;
	uint64_t bytes; /* written to the file */
	/* the last "ts" in whole seconds and its digits: a trace's times share
	 * them for a second at a time, so only the rest is written anew */
	uint64_t ts_sec;
	char ts_sec_digits[16];
	size_t ts_sec_len; /* 0: none yet */
	int error;
	char *buf; /* what is not written yet */
	size_t len, cap; /* cap grows to JSON_BUF: a small trace needs no megabyte */
};

/* The text is built in a buffer of our own and written a megabyte at a
 * time: printf's format parsing cost 20 times the rest of the conversion. */
static void flush_buf(struct chrome_writer *w)
{
	if (w->len && !w->error && fwrite(w->buf, 1, w->len, w->f) != w->len)
		w->error = errno ? errno : EIO;
	w->bytes += w->len;
	w->len = 0;
}

/* Room for n more bytes in the buffer: grown (to JSON_BUF) or written
 * out. false when n does not fit even then. */
static bool room_slow(struct chrome_writer *w, size_t n)
{
	if (w->len + n > w->cap && w->cap < JSON_BUF) {
		size_t cap = w->cap * 2 > w->len + n ? w->cap * 2 : w->len + n;
		char *grown = realloc(w->buf, cap < JSON_BUF ? cap : JSON_BUF);

		if (grown) {
			w->buf = grown;
			w->cap = cap < JSON_BUF ? cap : JSON_BUF;
		}
	}
	if (w->len + n > w->cap)
		flush_buf(w);
	return w->len + n <= w->cap;
}

static void put_slow(struct chrome_writer *w, const char *s, size_t n)
{
	if (!room_slow(w, n)) { /* a huge string (or no buffer): straight through */
		if (!w->error && fwrite(s, 1, n, w->f) != n)
			w->error = errno ? errno : EIO;
		w->bytes += n;
		return;
	}
	memcpy(w->buf + w->len, s, n);
	w->len += n;
}

/* Inline, so that a literal's copy is a few moves, not a call. */
static inline __attribute__((always_inline)) void put(struct chrome_writer *w, const char *s, size_t n)
{
	if (__builtin_expect(w->len + n <= w->cap, 1)) {
		memcpy(w->buf + w->len, s, n);
		w->len += n;
		return;
	}
	put_slow(w, s, n);
}

#define PUT(w, lit) put(w, "" lit, sizeof(lit) - 1) /* literals only */

static const char digit_pairs[201] = "00010203040506070809101112131415161718192021222324"
				     "25262728293031323334353637383940414243444546474849"
				     "50515253545556575859606162636465666768697071727374"
				     "75767778798081828384858687888990919293949596979899";

/* v's decimal digits, written backwards to end at end; returns where
 * they start. Two digits a step from a table, in 32-bit arithmetic (which
 * divides cheaper) once eight digits at a time have made v small. */
static inline char *digits_before(char *end, uint64_t v)
{
	uint32_t u;

	while (v > UINT32_MAX) {
		uint32_t lo = (uint32_t)(v % 100000000);

		v /= 100000000;
		for (int i = 0; i < 4; i++, lo /= 100) {
			end -= 2;
			memcpy(end, digit_pairs + 2 * (lo % 100), 2);
		}
	}
	for (u = (uint32_t)v; u >= 100; u /= 100) {
		end -= 2;
		memcpy(end, digit_pairs + 2 * (u % 100), 2);
	}
	if (u >= 10) {
		end -= 2;
		memcpy(end, digit_pairs + 2 * u, 2);
	} else {
		*--end = (char)('0' + u);
	}
	return end;
}

/* The most a number takes here: 20 digits, or a time in microseconds with
 * its three decimals (17 + 4). */
#define NUM_ROOM 24

/* The n bytes at from (n at most NUM_ROOM, from inside a scratch array
 * with NUM_ROOM bytes readable from it) to the buffer: one fixed-size
 * copy, whatever n is. */
static inline void put_num(struct chrome_writer *w, const char *from, size_t n)
{
	if (__builtin_expect(w->len + NUM_ROOM <= w->cap, 1) || room_slow(w, NUM_ROOM)) {
		memcpy(w->buf + w->len, from, NUM_ROOM);
		w->len += n;
	} else { /* no buffer at all */
		put_slow(w, from, n);
	}
}

static void put_u64(struct chrome_writer *w, uint64_t v)
{
	char d[2 * NUM_ROOM], *end = d + NUM_ROOM, *p = digits_before(end, v);

	put_num(w, p, (size_t)(end - p));
}

static void put_i64(struct chrome_writer *w, int64_t v)
{
	if (v < 0) {
		PUT(w, "-");
		put_u64(w, -(uint64_t)v);
	} else {
		put_u64(w, (uint64_t)v);
	}
}

/* Bytes a JSON string takes as they are: printable ASCII but '"' and '\\'. */
static const bool plain_byte[256] = {
	[0x20 ... 0x21] = true, [0x23 ... 0x5b] = true, [0x5d ... 0x7e] = true, /* not '"' (0x22), '\\' (0x5c) */
};

/* As much of the JSON string body of s as fits in room bytes at dst, whole
 * characters only: runs of plain ASCII copied whole, other characters one
 * by one (invalid UTF-8 becomes U+FFFD). Returns the bytes written; *s
 * moves past what was taken. */
static size_t escape_into(char *dst, size_t room, const char **sp)
{
	const char *s = *sp;
	char *d = dst, *end = dst + room;

	while (*s) {
		unsigned char c = (unsigned char)*s;

		if (plain_byte[c]) {
			if (d == end)
				break;
			*d++ = *s++;
			continue;
		}
		if (c >= 0x80) {
			size_t n = utf8_char_len(s);

			if ((size_t)(end - d) < (n ? n : 6))
				break;
			if (n) {
				memcpy(d, s, n);
				d += n;
			} else {
				memcpy(d, "\\ufffd", 6);
				d += 6;
			}
			s += n ? n : 1;
		} else if (c == '"' || c == '\\') {
			if (end - d < 2)
				break;
			*d++ = '\\';
			*d++ = *s++;
		} else {
			if (end - d < 6)
				break;
			memcpy(d, "\\u00", 4);
			d[4] = "0123456789abcdef"[c >> 4];
			d[5] = "0123456789abcdef"[c & 15];
			d += 6;
			s++;
		}
	}
	*sp = s;
	return (size_t)(d - dst);
}

#define STR_CHUNK 256

/* A JSON string, escaped straight into the buffer a chunk at a time. */
static void str(struct chrome_writer *w, const char *s)
{
	PUT(w, "\"");
	while (s && *s) {
		char chunk[STR_CHUNK];
		const char *from = s;

		if (w->len + STR_CHUNK <= w->cap || room_slow(w, STR_CHUNK)) {
			w->len += escape_into(w->buf + w->len, STR_CHUNK, &s);
		} else { /* no buffer: through a chunk of our own */
			size_t n = escape_into(chunk, sizeof(chunk), &s);

			put_slow(w, chunk, n);
		}
		if (s == from) /* cannot happen: a chunk takes any one character */
			break;
	}
	PUT(w, "\"");
}

/* What a category is written as: runtime calls under the name the Spyre
 * tools (and kineto) give them. */
static const char *cat_shown(const char *cat)
{
	return strcmp(cat, "runtime") ? cat : "cuda_runtime";
}

/* A name's JSON, filled into e. */
static void fill_name(struct name_json *e, const char *key, bool is_cat)
{
	const char *rest = is_cat ? cat_shown(key) : key;
	size_t n = escape_into(e->json + 1, NAME_ROOM - 2, &rest);

	e->key = key;
	e->json[0] = '"';
	e->json[n + 1] = '"';
	e->len = *rest ? 0 : (uint8_t)(n + 2);
	e->driver = !strcmp(key, "driver");
}

/* A name's cache entry, filled on a miss: the table (of 1 << bits) is
 * open-addressed from the slot its address hashes to, up to NAME_PROBES
 * slots on, so the few dozen names of a trace all stay (a set of two ways
 * could hold three that meet in it, which then took turns missing, as
 * where in memory the names lie decides). Past that the first slot goes. */
#define NAME_PROBES 8
static __attribute__((noinline)) struct name_json *name_probe(struct name_json *table, unsigned bits, size_t slot,
							      const char *key, bool is_cat)
{
	size_t mask = ((size_t)1 << bits) - 1;
	struct name_json *e = &table[slot];

	for (int i = 1; i < NAME_PROBES && e->key; i++) {
		e = &table[(slot + (size_t)i) & mask];
		if (e->key == key)
			return e;
	}
	if (e->key) /* all taken: the first goes */
		e = &table[slot];
	fill_name(e, key, is_cat);
	return e;
}

static inline __attribute__((always_inline)) struct name_json *name_entry(struct name_json *table, unsigned bits,
									  const char *key, bool is_cat)
{
	size_t slot = fibhash((uintptr_t)key, bits);

	if (__builtin_expect(table[slot].key == key, 1))
		return &table[slot];
	return name_probe(table, bits, slot, key, is_cat);
}

/* A name's JSON from the cache; one too long for the room is written
 * anew each time. */
static inline __attribute__((always_inline)) struct name_json *cached_str(struct chrome_writer *w, const char *key)
{
	struct name_json *e = name_entry(w->names, NAME_CACHE_BITS, key, false);

	if (e->len)
		put(w, e->json, e->len);
	else
		str(w, key);
	return e;
}

/* str() of an event's or an argument's name (model.h: at a fixed address). */
static inline void name(struct chrome_writer *w, const char *s)
{
	if (!s) {
		PUT(w, "\"\"");
		return;
	}
	cached_str(w, s);
}

static void begin_event(struct chrome_writer *w)
{
	if (w->first)
		PUT(w, "\n");
	else
		PUT(w, ",\n");
	w->first = false;
}

struct chrome_writer *chrome_writer_open(const char *path, char *err, size_t errlen)
{
	FILE *f = fopen(path, "w");

	if (!f) {
		snprintf(err, errlen, "%s", strerror(errno));
		return NULL;
	}
	return chrome_writer_open_file(f, err, errlen);
}

struct chrome_writer *chrome_writer_open_file(FILE *f, char *err, size_t errlen)
{
	struct chrome_writer *w = calloc(1, sizeof(*w));

	if (w)
		w->buf = malloc(w->cap = JSON_START);
	if (!w || !w->buf) {
		snprintf(err, errlen, "out of memory");
		if (w)
			free(w);
		fclose(f);
		return NULL;
	}
	w->f = f;
	w->first = true;
	/* the cards and the clocks are known at the end: they follow the events */
	PUT(w, "{\"schemaVersion\":1,\"displayTimeUnit\":\"ns\",\"traceEvents\":[");
	return w;
}

static struct placement *place_of(struct chrome_writer *w, uint64_t track)
{
	size_t slot = (size_t)track % PLACE_CACHE;
	struct placement *p;

	if (w->place_cache[slot].track == track)
		return w->place_cache[slot].p;
	p = hm_get(&w->places, track);
	if (p) {
		w->place_cache[slot].track = track;
		w->place_cache[slot].p = p;
	}
	return p;
}

/* ,"pid":P,"tid":T, rendered once per track. */
static void place_render(struct placement *p)
{
	int n = snprintf(p->ids, sizeof(p->ids), ",\"pid\":%u", p->pid);

	p->pid_len = (uint8_t)n;
	n += snprintf(p->ids + n, sizeof(p->ids) - (size_t)n, ",\"tid\":%u", p->tid);
	p->ids_len = (uint8_t)n;
}

static void meta_event(struct chrome_writer *w, const char *what, uint32_t pid, uint32_t tid, const char *key,
		       const char *sval, long ival)
{
	if (sval && !sval[0])
		return; /* Perfetto's importer refuses an empty name: better none */
	begin_event(w);
	PUT(w, "{\"ph\":\"M\",\"name\":");
	str(w, what);
	PUT(w, ",\"pid\":");
	put_u64(w, pid);
	PUT(w, ",\"tid\":");
	put_u64(w, tid);
	PUT(w, ",\"ts\":0,\"args\":{"); /* aiu-trace-analyzer wants ts on every event */
	str(w, key);
	PUT(w, ":");
	if (sval)
		str(w, sval);
	else
		put_i64(w, ival);
	PUT(w, "}}");
}

static void on_track(void *ctx, const struct model_track *t)
{
	struct chrome_writer *w = ctx;
	struct placement *p = place_of(w, t->id), *parent;

	if (!p) {
		p = calloc(1, sizeof(*p));
		if (!p || hm_put(&w->places, t->id, p)) {
			free(p);
			w->error = ENOMEM;
			return;
		}
	}
	parent = t->parent ? place_of(w, t->parent) : NULL;
	switch (t->kind) {
	case TRACK_PROCESS:
		*p = (struct placement){ t->pid, t->pid };
		meta_event(w, "process_name", t->pid, 0, "name", t->name, 0);
		break;
	case TRACK_THREAD:
		*p = (struct placement){ t->pid, t->tid };
		meta_event(w, "thread_name", t->pid, t->tid, "name", t->name, 0);
		break;
	case TRACK_GROUP: /* a pseudo-process like a card's, not one */
	case TRACK_DEVICE:
		*p = (struct placement){ CHROME_DEVICE_PID_BASE + (uint32_t)t->rank, 0 };
		if (t->kind == TRACK_DEVICE && w->ncards < MAX_CARDS) {
			w->cards[w->ncards].rank = t->rank;
			snprintf(w->cards[w->ncards++].name, sizeof(w->cards[0].name), "%s", t->name);
		}
		meta_event(w, "process_name", p->pid, 0, "name", t->name, 0);
		meta_event(w, "process_sort_index", p->pid, 0, "sort_index", NULL, 1000 + t->rank);
		break;
	case TRACK_LANE:
		*p = (struct placement){ parent ? parent->pid : CHROME_TRACER_PID, (uint32_t)t->id };
		meta_event(w, "thread_name", p->pid, p->tid, "name", t->name, 0);
		meta_event(w, "thread_sort_index", p->pid, p->tid, "sort_index", NULL, t->rank);
		break;
	case TRACK_COUNTER: /* counters belong to their parent's process */
		*p = (struct placement){ parent ? parent->pid : CHROME_TRACER_PID, 0 };
		break;
	case TRACK_GLOBAL:
		*p = (struct placement){ CHROME_TRACER_PID, 0 };
		meta_event(w, "process_name", CHROME_TRACER_PID, 0, "name", t->name, 0);
		break;
	}
	place_render(p);
}

/* ns as microseconds with three decimals, written backwards to end at
 * end; returns where the text starts. */
static inline char *us_before(char *end, uint64_t ns)
{
	unsigned frac = (unsigned)(ns % 1000);

	end[-4] = '.';
	end[-3] = (char)('0' + frac / 100);
	memcpy(end - 2, digit_pairs + 2 * (frac % 100), 2);
	return digits_before(end - 4, ns / 1000);
}

/*
 * An event is built through a cursor in room taken once (EVENT_ROOM):
 * put() must reload the buffer's length and size after every piece (the
 * bytes it writes may alias them), a cursor in a register need not. Fixed
 * parts, cached names and numbers have a bound; what has none (a name too
 * long for the cache, a string argument) goes through str() with the
 * cursor handed back (at_sync), and room is taken anew after it.
 */
#define EVENT_ROOM 1536 /* 2 names, ids, 2 times, 10 args: about 1,100 */
_Static_assert(EVENT_ROOM <= JSON_START, "the first buffer holds an event");

/* Room for EVENT_ROOM bytes; the buffer holds that much from the start,
 * written out if need be, so this always succeeds. */
static inline char *at_room(struct chrome_writer *w)
{
	if (__builtin_expect(w->len + EVENT_ROOM <= w->cap, 1) || room_slow(w, EVENT_ROOM))
		return w->buf + w->len;
	return NULL; /* not reached: cap is at least JSON_START */
}

static inline void at_sync(struct chrome_writer *w, char *at)
{
	w->len = (size_t)(at - w->buf);
}

static inline char *at_put(char *at, const char *s, size_t n)
{
	memcpy(at, s, n);
	return at + n;
}

#define AT_PUT(at, lit) at_put(at, "" lit, sizeof(lit) - 1) /* literals only */

/* begin_event() through a cursor: what goes before an event */
static inline char *at_begin_event(struct chrome_writer *w, char *at)
{
	at = w->first ? AT_PUT(at, "\n") : AT_PUT(at, ",\n");
	w->first = false;
	return at;
}

/* A number: its digits in a scratch, moved with one fixed-size copy (the
 * room counts NUM_ROOM for it). */
static inline char *at_u64(char *at, uint64_t v)
{
	char d[2 * NUM_ROOM], *end = d + NUM_ROOM, *p = digits_before(end, v);

	memcpy(at, p, NUM_ROOM);
	return at + (end - p);
}

static inline char *at_i64(char *at, int64_t v)
{
	if (v < 0) {
		*at++ = '-';
		return at_u64(at, -(uint64_t)v);
	}
	return at_u64(at, (uint64_t)v);
}

/* "0x..." in lower-case hex */
static inline char *at_hex(char *at, uint64_t v)
{
	char d[48], *end = d + 20, *p = end; /* 20 bytes read from p, wherever it starts */

	*--p = '"';
	do
		*--p = "0123456789abcdef"[v & 15];
	while ((v >>= 4));
	*--p = 'x';
	*--p = '0';
	*--p = '"';
	memcpy(at, p, 20); /* 16 digits and the quotes and 0x at most */
	return at + (end - p);
}

/* ,"key":MICROSECONDS.NNN, key a literal */
#define AT_TS(at, key, ns) at_ts(at, ",\"" key "\":", sizeof(",\"" key "\":") - 1, ns)

static inline char *at_ts(char *at, const char *key, size_t keylen, uint64_t ns)
{
	char d[2 * NUM_ROOM], *end = d + NUM_ROOM, *p = us_before(end, ns);

	at = at_put(at, key, keylen);
	memcpy(at, p, NUM_ROOM);
	return at + (end - p);
}

/* An event's ,"ts":MICROSECONDS.NNN: the whole seconds' digits from the
 * writer's last, the rest (six digits, the point, three) from pairs. The
 * same text as AT_TS. */
static inline __attribute__((always_inline)) char *at_event_ts(struct chrome_writer *w, char *at, uint64_t ns)
{
	uint64_t sec = ns / 1000000000;
	uint32_t sub = (uint32_t)(ns % 1000000000), us = sub / 1000, frac = sub % 1000;

	if (!sec)
		return AT_TS(at, "ts", ns);
	if (sec != w->ts_sec || !w->ts_sec_len) {
		char *e = w->ts_sec_digits + sizeof(w->ts_sec_digits), *b = digits_before(e, sec);

		w->ts_sec_len = (size_t)(e - b);
		memmove(w->ts_sec_digits, b, w->ts_sec_len);
		w->ts_sec = sec;
	}
	at = AT_PUT(at, ",\"ts\":");
	memcpy(at, w->ts_sec_digits, sizeof(w->ts_sec_digits));
	at += w->ts_sec_len;
	memcpy(at, digit_pairs + 2 * (us / 10000), 2);
	memcpy(at + 2, digit_pairs + 2 * (us / 100 % 100), 2);
	memcpy(at + 4, digit_pairs + 2 * (us % 100), 2);
	at[6] = '.';
	at[7] = (char)('0' + frac / 100);
	memcpy(at + 8, digit_pairs + 2 * (frac % 100), 2);
	return at + 10;
}

/* A name (or, is_cat, a category) from the cache: its JSON with one
 * fixed-size copy. *driver: the category is "driver". */
static inline __attribute__((always_inline)) char *at_name(struct chrome_writer *w, char *at, const char *s,
							   bool is_cat, bool *driver)
{
	struct name_json *e;

	if (!s)
		return AT_PUT(at, "\"\"");
	e = is_cat ? name_entry(w->cats, CAT_CACHE_BITS, s, true) : name_entry(w->names, NAME_CACHE_BITS, s, false);
	if (driver)
		*driver = e->driver;
	if (__builtin_expect(e->len, 1)) {
		memcpy(at, e->json, NAME_ROOM);
		return at + e->len;
	}
	at_sync(w, at); /* too long for the cache: written anew */
	str(w, is_cat ? cat_shown(s) : s);
	return at_room(w);
}

static char *at_args(struct chrome_writer *w, char *at, const struct model_event *e)
{
	at = AT_PUT(at, ",\"args\":{");
	for (int i = 0; i < e->nargs; i++) {
		const struct model_arg *a = &e->args[i];

		if (i)
			*at++ = ',';
		at = at_name(w, at, a->name, false, NULL);
		*at++ = ':';
		switch (a->type) {
		case ARG_UINT: at = at_u64(at, a->u); break;
		case ARG_INT: at = at_i64(at, a->i); break;
		case ARG_HEX: at = at_hex(at, a->u); break;
		case ARG_STR:
			if (a->fixed) { /* from the cache, as a name */
				at = at_name(w, at, a->s, false, NULL);
				break;
			}
			at_sync(w, at); /* no bound */
			str(w, a->s);
			at = at_room(w);
			break;
		}
	}
	*at++ = '}';
	return at;
}

/*
 * A job's flow runs launch -> job -> the wait or interrupt that ended it.
 * Chrome JSON readers such as aiu-trace-analyzer take only s and f, so it
 * is two flows: launch -> job as kineto writes its "ac2g" (id: the job's
 * correlation), and job -> end (id: FLOW_END_IDS + correlation).
 */
enum { FLOW_TO_JOB = 1, FLOW_TO_END = 2 };
#define FLOW_END_IDS (1ull << 40)

/* An arrow's end from its id on: the id, the track, the time, how it
 * binds (the buffer has room for it: at_room). */
static inline __attribute__((always_inline)) char *flow_tail(struct chrome_writer *w, char *at, bool start, uint64_t id,
							     const struct placement *p, uint64_t ts)
{
	at = at_u64(at, id);
	memcpy(at, p->ids, sizeof(p->ids));
	at += p->ids_len;
	at = at_event_ts(w, at, ts);
	return start ? AT_PUT(at, "}") : AT_PUT(at, ",\"bp\":\"e\"}");
}

/* One end of an arrow: s binds to the slice starting here, f (bp e) to the
 * slice that holds ts. */
static void flow_event(struct chrome_writer *w, bool start, const char *what, const char *cat, uint64_t id,
		       const struct placement *p, uint64_t ts)
{
	char *at;

	begin_event(w);
	PUT(w, "{\"ph\":");
	put(w, start ? "\"s\"" : "\"f\"", 3);
	PUT(w, ",\"name\":");
	name(w, what);
	PUT(w, ",\"cat\":");
	name(w, cat);
	PUT(w, ",\"id\":");
	at = at_room(w);
	at_sync(w, flow_tail(w, at, start, id, p, ts));
}

/* flow_event() of a job's flow, whose names are known: its head is one
 * literal (a job makes four of these), all of it through one cursor. */
static void flow(struct chrome_writer *w, bool start, uint64_t id, int leg, const struct placement *p, uint64_t ts)
{
#define FLOW_HEAD(ph, name, cat) "{\"ph\":\"" ph "\",\"name\":\"" name "\",\"cat\":\"" cat "\",\"id\":"
	char *at = at_room(w);

	at = at_begin_event(w, at);
	if (leg == FLOW_TO_JOB) {
		if (start)
			at = AT_PUT(at, FLOW_HEAD("s", "ac2g", "ac2g"));
		else
			at = AT_PUT(at, FLOW_HEAD("f", "ac2g", "ac2g"));
	} else {
		id += FLOW_END_IDS;
		if (start)
			at = AT_PUT(at, FLOW_HEAD("s", "job end", "flow"));
		else
			at = AT_PUT(at, FLOW_HEAD("f", "job end", "flow"));
	}
#undef FLOW_HEAD
	at_sync(w, flow_tail(w, at, start, id, p, ts));
}

/* An arrow of another kind than a job's (model.h): named by its kind; the
 * id keeps the kind (at bit 44), so ids of two kinds never meet, and stays
 * under 2^53 for readers that hold numbers as doubles. */
static void plain_flow(struct chrome_writer *w, bool start, uint64_t id, const struct placement *p, uint64_t ts)
{
	static const char *const cats[] = { [FLOW_OP_CALL] = "op_call",
					    [FLOW_SPAWN] = "spawn",
					    [FLOW_AC2G] = "ac2g",
					    [FLOW_FWDBWD] = "fwdbwd",
					    [FLOW_OTHER] = "flow" };
	int kind = MODEL_FLOW_KIND(id);
	const char *cat = kind > 0 && kind < (int)(sizeof(cats) / sizeof(cats[0])) ? cats[kind] : "flow";

	flow_event(w, start, cat, cat, (uint64_t)kind << 44 | (id & ((1ull << 44) - 1)), p, ts);
}

/* A driver event names its card's vendor:device: remembered for deviceProperties. */
static void note_card_ids(struct chrome_writer *w, const struct model_event *e)
{
	const char *dev = NULL;
	uint64_t vendor = 0, device = 0;

	for (int i = 0; i < e->nargs; i++) {
		if (!strcmp(e->args[i].name, "device") && e->args[i].type == ARG_STR)
			dev = e->args[i].s;
		else if (!strcmp(e->args[i].name, "vendor"))
			vendor = e->args[i].u;
		else if (!strcmp(e->args[i].name, "device_id"))
			device = e->args[i].u;
	}
	if (!dev || !vendor)
		return;
	for (int i = 0; i < w->ncards; i++)
		if (!strncmp(w->cards[i].name, "PCI ", 4) && !strcmp(w->cards[i].name + 4, dev))
			snprintf(w->cards[i].ids, sizeof(w->cards[i].ids), "%04x:%04x", (unsigned)vendor & 0xffff,
				 (unsigned)device & 0xffff);
}

static void on_event(void *ctx, const struct model_event *e)
{
	struct chrome_writer *w = ctx;
	struct placement *p = place_of(w, e->track->id);
	bool driver = false;
	char *at;

	if (!p)
		return;
	at = at_room(w);
	at = at_begin_event(w, at);
	if (e->kind == EV_COUNTER) {
		at = AT_PUT(at, "{\"ph\":\"C\",\"name\":");
		at = at_name(w, at, e->name, false, NULL);
		memcpy(at, p->ids, sizeof(p->ids)); /* the pid of it */
		at += p->pid_len;
		at = at_event_ts(w, at, e->ts);
		at = AT_PUT(at, ",\"args\":{\"value\":");
		at = at_i64(at, e->value);
		at = AT_PUT(at, "}}");
		at_sync(w, at);
		return;
	}
	if (e->kind == EV_SLICE)
		at = AT_PUT(at, "{\"ph\":\"X\",\"name\":");
	else
		at = AT_PUT(at, "{\"ph\":\"i\",\"name\":");
	at = at_name(w, at, e->name, false, NULL);
	at = AT_PUT(at, ",\"cat\":");
	at = at_name(w, at, e->cat, true, &driver);
	memcpy(at, p->ids, sizeof(p->ids));
	at += p->ids_len;
	at = at_event_ts(w, at, e->ts);
	if (e->kind == EV_SLICE)
		at = AT_TS(at, "dur", e->dur);
	else
		at = AT_PUT(at, ",\"s\":\"t\"");
	at = at_args(w, at, e);
	*at++ = '}';
	at_sync(w, at);
	if (driver)
		note_card_ids(w, e);
	/* flow events at the slice's start bind to it */
	for (int i = 0; i < e->nxflows; i++)
		plain_flow(w, true, e->xflows[i], p, e->ts);
	for (int i = 0; i < e->nxterm; i++)
		plain_flow(w, false, e->xterm[i], p, e->ts);
	for (int i = 0; i < e->nflows; i++) {
		uintptr_t leg;

		if (MODEL_FLOW_KIND(e->flows[i]) != FLOW_JOB) {
			plain_flow(w, true, e->flows[i], p, e->ts);
			continue;
		}
		leg = (uintptr_t)hm_get(&w->flows, e->flows[i]);

		if (!leg) { /* the launch */
			flow(w, true, e->flows[i], FLOW_TO_JOB, p, e->ts);
			leg = FLOW_TO_JOB;
		} else if (leg == FLOW_TO_JOB) { /* the job: ends one leg, starts the next */
			flow(w, false, e->flows[i], FLOW_TO_JOB, p, e->ts);
			flow(w, true, e->flows[i], FLOW_TO_END, p, e->ts);
			leg = FLOW_TO_END;
		}
		if (hm_put(&w->flows, e->flows[i], (void *)leg))
			w->error = ENOMEM;
	}
	for (int i = 0; i < e->nterm; i++) {
		uintptr_t leg;

		if (MODEL_FLOW_KIND(e->term_flows[i]) != FLOW_JOB) {
			plain_flow(w, false, e->term_flows[i], p, e->ts);
			continue;
		}
		leg = (uintptr_t)hm_del(&w->flows, e->term_flows[i]);

		if (leg)
			flow(w, false, e->term_flows[i], (int)leg, p, e->ts);
	}
}

static void on_task(void *ctx, const struct model_task_ids *t)
{
	struct chrome_writer *w = ctx;

	if (vec_reserve((void **)&w->tasks, &w->tasks_cap, w->ntasks + 1, sizeof(*t))) {
		w->error = ENOMEM;
		return;
	}
	w->tasks[w->ntasks++] = *t;
}

static void on_clock(void *ctx, const struct sbt_meta_clock *c)
{
	struct chrome_writer *w = ctx;

	w->clocks[w->nclocks < MAX_CLOCKS ? w->nclocks++ : MAX_CLOCKS - 1] = *c;
}

/* otherData's process starts (pid, ppid, ts_ns) or, with ns, the ids of
 * threads in a pid namespace (pid, tid, ns_pid, ns_tid). */
static void task_list(struct chrome_writer *w, bool ns)
{
	static const char *const start_keys[] = { "{\"pid\":", ",\"ppid\":", ",\"ts_ns\":" };
	static const char *const ns_keys[] = { "{\"pid\":", ",\"tid\":", ",\"ns_pid\":", ",\"ns_tid\":" };
	const char *const *keys = ns ? ns_keys : start_keys;
	int nkeys = ns ? 4 : 3;

	for (size_t i = 0, n = 0; i < w->ntasks; i++) {
		const struct model_task_ids *t = &w->tasks[i];
		uint64_t v[4] = { t->pid, ns ? t->tid : t->ppid, ns ? t->ns_pid : t->ts, t->ns_tid };

		if (ns ? !t->ns_pid : !t->ppid)
			continue;
		if (n++)
			PUT(w, ",");
		for (int k = 0; k < nkeys; k++) {
			put(w, keys[k], strlen(keys[k]));
			put_u64(w, v[k]);
		}
		PUT(w, "}");
	}
}

/* The cards [first, end), as kineto's deviceProperties entries. */
static void cards(struct chrome_writer *w, int first, int end)
{
	for (int i = first; i < end; i++) {
		const char *n = w->cards[i].name;

		if (i > first)
			PUT(w, ",");
		PUT(w, "{\"id\":");
		put_u64(w, (uint64_t)(w->cards[i].rank - 1));
		PUT(w, ",\"name\":");
		str(w, n);
		PUT(w, ",\"pciAddress\":");
		str(w, strncmp(n, "PCI ", 4) ? "" : n + 4);
		PUT(w, ",\"vendorDevice\":");
		str(w, w->cards[i].ids);
		PUT(w, "}");
	}
}

/* After the events: the cards and the clock snapshots, so the file alone
 * can be aligned with another trace (ts is CLOCK_BOOTTIME in µs).
 * aiu-trace-analyzer reads a file as PyTorch's only with deviceProperties,
 * and takes a file per card (rank): it stops on a list of any other length
 * than one, empty included. So deviceProperties holds the first card (or,
 * with none seen, an entry with no name), and otherData.devices all. */
static void trailer(struct chrome_writer *w)
{
	PUT(w, "\n],\"deviceProperties\":[");
	if (w->ncards)
		cards(w, 0, 1);
	else
		PUT(w, "{\"id\":0,\"name\":\"\",\"pciAddress\":\"\",\"vendorDevice\":\"\"}");
	PUT(w, "],\"otherData\":{\"producer\":\"spyre-bpftrace\",\"clock\":\"BOOTTIME\","
	       "\"devices\":[");
	cards(w, 0, w->ncards);
	PUT(w, "],\"clock_snapshots\":[");
	for (int i = 0; i < w->nclocks; i++) {
		if (i)
			PUT(w, ",");
		PUT(w, "{\"boottime_ns\":");
		put_u64(w, w->clocks[i].boottime);
		PUT(w, ",\"monotonic_ns\":");
		put_u64(w, w->clocks[i].monotonic);
		PUT(w, ",\"realtime_ns\":");
		put_u64(w, w->clocks[i].realtime);
		PUT(w, ",\"spread_ns\":");
		put_u64(w, w->clocks[i].spread_ns);
		PUT(w, "}");
	}
	/* so `merge` can join a profiler's trace to this file alone */
	PUT(w, "],\"process_starts\":[");
	task_list(w, false);
	PUT(w, "],\"pid_namespaces\":[");
	task_list(w, true);
	PUT(w, "]}}\n");
}

struct model_sink chrome_writer_sink(struct chrome_writer *w)
{
	return (struct model_sink){ w, on_track, on_event, on_clock, NULL, on_task };
}

int chrome_writer_flush(struct chrome_writer *w)
{
	flush_buf(w);
	if (!w->error && fflush(w->f))
		w->error = errno;
	return -w->error;
}

uint64_t chrome_writer_bytes(const struct chrome_writer *w)
{
	return w->bytes + w->len;
}

int chrome_writer_close(struct chrome_writer *w)
{
	int err;

	if (!w)
		return 0;
	trailer(w);
	chrome_writer_flush(w);
	if (fclose(w->f) && !w->error)
		w->error = errno;
	err = -w->error;
	hm_free_values(&w->places);
	hm_free(&w->flows);
	free(w->tasks);
	free(w->buf);
	free(w);
	return err;
}
